//! Property tests: for any interleaving of produce and drain steps and any
//! buffer size, every record is read exactly once and in order, or counted in
//! a LOST record; wrapped records arrive intact; partial drains resume.

use profkit_perf::{
    kind, Layout, RawRecord, Record, RecordRing, SimRecord, SimRing, PERF_CONTEXT_KERNEL,
};
use proptest::prelude::*;

const TEST_KIND: u32 = 0x7000;

#[derive(Debug, Clone)]
enum Op {
    /// Produce records with these body sizes (in u64 words, >= 1).
    Produce(Vec<usize>),
    /// Drain at most this many records (None: all).
    Drain(Option<usize>),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        prop::collection::vec(1usize..40, 1..30).prop_map(Op::Produce),
        prop::option::of(0usize..20).prop_map(Op::Drain),
    ]
}

fn body(seq: u64, words: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(words * 8);
    v.extend_from_slice(&seq.to_ne_bytes());
    for i in 1..words {
        v.extend_from_slice(&(seq.wrapping_mul(31).wrapping_add(i as u64)).to_ne_bytes());
    }
    v
}

/// Drains up to `limit` records, checking each, returning how many were taken.
fn drain(
    ring: &mut SimRing,
    limit: Option<usize>,
    next_expected: &mut u64,
    produced: &[(u64, usize, bool)],
    lost_seen: &mut u64,
    read: &mut u64,
) {
    let mut taken = 0usize;
    let layout = Layout {
        callchain: false,
        user_stack: 0,
        cgroup: false,
    };
    ring.read_records(|r: RawRecord<'_>| {
        if limit.is_some_and(|l| taken >= l) {
            return false;
        }
        taken += 1;
        match r.kind {
            kind::LOST => {
                let Ok(Record::Lost { lost, .. }) = layout.parse(r) else {
                    panic!("LOST record did not parse");
                };
                // The LOST record stands exactly where the dropped records were:
                // skip that many dropped records in the produced sequence.
                let mut skipped = 0;
                while skipped < lost {
                    let (seq, _, kept) = produced[*next_expected as usize];
                    assert!(!kept, "record {seq} was kept but the LOST record claims it");
                    *next_expected += 1;
                    skipped += 1;
                }
                *lost_seen += lost;
            }
            TEST_KIND => {
                let seq = u64::from_ne_bytes(r.body[..8].try_into().unwrap());
                let (exp_seq, words, kept) = produced[*next_expected as usize];
                assert!(
                    kept,
                    "record {exp_seq} was dropped but record {seq} arrived in its place"
                );
                assert_eq!(seq, exp_seq, "out of order");
                assert_eq!(r.body, &body(seq, words)[..], "record {seq} is not intact");
                *next_expected += 1;
                *read += 1;
            }
            k => panic!("unexpected record type {k}"),
        }
        true
    });
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn every_record_read_once_in_order_or_counted_lost(
        size_log in 6u32..13,
        ops in prop::collection::vec(op(), 1..60),
    ) {
        let mut ring = SimRing::new(3, 1 << size_log, Layout { callchain: false, user_stack: 0,     cgroup: false, });
        let mut produced: Vec<(u64, usize, bool)> = Vec::new();
        let mut next_expected = 0u64;
        let (mut lost_seen, mut read) = (0u64, 0u64);
        for op in ops {
            match op {
                Op::Produce(sizes) => {
                    for words in sizes {
                        let seq = produced.len() as u64;
                        let kept = ring.push_raw(TEST_KIND, 0, &body(seq, words));
                        produced.push((seq, words, kept));
                    }
                }
                Op::Drain(limit) => drain(&mut ring, limit, &mut next_expected, &produced, &mut lost_seen, &mut read),
            }
        }
        // Final: drain everything; then one more record lets a pending LOST out.
        drain(&mut ring, None, &mut next_expected, &produced, &mut lost_seen, &mut read);
        let seq = produced.len() as u64;
        let kept = ring.push_raw(TEST_KIND, 0, &body(seq, 1));
        prop_assert!(kept, "an empty ring must accept a small record");
        produced.push((seq, 1, kept));
        drain(&mut ring, None, &mut next_expected, &produced, &mut lost_seen, &mut read);
        prop_assert_eq!(next_expected as usize, produced.len());
        prop_assert_eq!(read + lost_seen, produced.len() as u64);
        prop_assert_eq!(lost_seen, ring.dropped());
        prop_assert_eq!(ring.pending(), 0);
    }
}

#[test]
fn typed_records_round_trip_through_the_ring() {
    for callchain in [false, true] {
        let layout = Layout {
            callchain,
            user_stack: 0,
            cgroup: false,
        };
        let mut ring = SimRing::new(1, 1024, layout);
        let recs = vec![
            SimRecord::Comm {
                pid: 5,
                tid: 6,
                comm: "worker-thread".into(),
                exec: true,
                time: 1,
            },
            SimRecord::Mmap2 {
                pid: 5,
                tid: 5,
                addr: 0x400000,
                len: 0x2000,
                pgoff: 0x1000,
                ino: 77,
                build_id: Some(vec![0xab; 20]),
                prot: 5,
                filename: "/usr/bin/x".into(),
                time: 2,
            },
            SimRecord::Fork {
                pid: 9,
                ppid: 5,
                tid: 9,
                ptid: 5,
                time: 3,
            },
            SimRecord::Sample {
                ip: 0x401234,
                pid: 5,
                tid: 6,
                time: 4,
                kernel: false,
                period: 250000,
                callchain: vec![0x401234, 0x401000],
            },
            SimRecord::Throttle {
                throttled: true,
                time: 5,
            },
            SimRecord::Switch {
                out: true,
                pid: 9,
                tid: 9,
                time: 6,
            },
            SimRecord::Ksymbol {
                addr: 0xffff_0000,
                len: 64,
                name: "bpf_prog_x".into(),
                time: 7,
            },
            SimRecord::Unknown { kind: 99, len: 16 },
            SimRecord::Exit {
                pid: 9,
                ppid: 5,
                tid: 9,
                ptid: 5,
                time: 8,
            },
        ];
        // Push and drain several times so records straddle the wrap point.
        let mut parsed = Vec::new();
        for _ in 0..7 {
            for r in &recs {
                assert!(ring.push(r));
            }
            ring.read_records(|raw| {
                parsed.push(format!("{:?}", layout.parse(raw).expect("parses")));
                true
            });
        }
        assert_eq!(parsed.len(), 7 * recs.len());
        let s = &parsed[3];
        assert!(
            s.contains("ip: 4198964") && s.contains("tid: 6") && s.contains("cpu: 1"),
            "{s}"
        );
        if callchain {
            let mut r = SimRing::new(0, 256, layout);
            r.push(&recs[3]);
            r.read_records(|raw| {
                let Ok(Record::Sample(s)) = layout.parse(raw) else {
                    panic!()
                };
                assert_eq!(
                    s.callchain.iter().collect::<Vec<_>>(),
                    vec![0x401234, 0x401000]
                );
                true
            });
        }
        assert!(parsed[1].contains("BuildId([171"), "{}", parsed[1]);
        assert!(parsed[0].contains("exec: true"), "{}", parsed[0]);
        assert!(parsed[7].contains("Unknown { kind: 99 }"), "{}", parsed[7]);
        assert!(parsed[4].contains("throttled: true"), "{}", parsed[4]);
    }
}

#[test]
fn short_records_are_errors_not_panics() {
    let layout = Layout {
        callchain: true,
        user_stack: 0,
        cgroup: false,
    };
    for k in [
        kind::SAMPLE,
        kind::MMAP2,
        kind::COMM,
        kind::FORK,
        kind::LOST,
        kind::KSYMBOL,
    ] {
        for len in [0usize, 8, 16, 24, 40] {
            let body = vec![0xffu8; len];
            let r = layout.parse(RawRecord {
                kind: k,
                misc: 0,
                body: &body,
            });
            if let Err(e) = r {
                assert!(e.to_string().contains("too short"));
            }
        }
    }
}

#[test]
fn lost_record_is_written_where_space_returned() {
    let layout = Layout {
        callchain: false,
        user_stack: 0,
        cgroup: false,
    };
    let mut ring = SimRing::new(0, 256, layout);
    let s = |t| SimRecord::Sample {
        ip: t,
        pid: 1,
        tid: 1,
        time: t,
        kernel: true,
        period: 1,
        callchain: vec![],
    };
    let mut kept = 0;
    for t in 0..10 {
        kept += ring.push(&s(t)) as u64;
    }
    assert_eq!(kept, 5, "256 bytes hold five 48-byte samples");
    assert_eq!(ring.dropped(), 5);
    let mut kinds = Vec::new();
    ring.read_records(|r| {
        kinds.push(r.kind);
        true
    });
    assert!(ring.push(&s(10)));
    ring.read_records(|r| {
        if let Ok(Record::Lost { lost, sid, .. }) = layout.parse(r) {
            assert_eq!((lost, sid.time), (5, 10));
        }
        kinds.push(r.kind);
        true
    });
    assert_eq!(kinds, [9, 9, 9, 9, 9, kind::LOST, 9]);
}

/// Issue 15 groundwork: the user registers and stack of a sample, encoded
/// as the kernel writes them (abi, bp/sp/ip, size, bytes, dyn_size), parse
/// back; bytes past `dyn_size` are not handed out; a sample without a user
/// context (abi 0, size 0) has none; a truncated body is an error.
#[test]
fn user_registers_and_stack_round_trip() {
    let layout = Layout {
        callchain: true,
        user_stack: 64,
        cgroup: false,
    };
    let stack: Vec<u8> = (0..40u8).collect();
    let rec = SimRecord::UserSample {
        ip: 0x401000,
        pid: 7,
        tid: 8,
        time: 9,
        period: 1,
        callchain: vec![PERF_CONTEXT_KERNEL, 0xffff_ffff_8100_0000],
        bp: 0x7ffc_0000_1000,
        sp: 0x7ffc_0000_0f00,
        stack: stack.clone(),
    };
    let (k, m, body) = rec.encode(0, layout);
    let raw = RawRecord {
        kind: k,
        misc: m,
        body: &body,
    };
    let Ok(Record::Sample(s)) = layout.parse(raw) else {
        panic!("not a sample");
    };
    let u = s.user().expect("user registers");
    assert_eq!(
        (u.bp, u.sp, u.ip),
        (0x7ffc_0000_1000, 0x7ffc_0000_0f00, 0x401000)
    );
    assert_eq!(u.stack, &stack[..]);
    assert_eq!(s.callchain.len(), 2);
    // A kernel thread's sample: no user context.
    let kernel = SimRecord::Sample {
        ip: 0xffff_ffff_8100_0010,
        pid: 0,
        tid: 0,
        time: 10,
        kernel: true,
        period: 1,
        callchain: vec![],
    };
    let (k, m, body) = kernel.encode(0, layout);
    let Ok(Record::Sample(s)) = layout.parse(RawRecord {
        kind: k,
        misc: m,
        body: &body,
    }) else {
        panic!("not a sample");
    };
    assert_eq!(s.user(), None);
    // Without user stacks in the layout the same record has none.
    let plain = Layout {
        callchain: true,
        user_stack: 0,
        cgroup: false,
    };
    let (k, m, body) = rec.encode(0, plain);
    let Ok(Record::Sample(s)) = plain.parse(RawRecord {
        kind: k,
        misc: m,
        body: &body,
    }) else {
        panic!("not a sample");
    };
    assert_eq!(s.user(), None);
    assert_eq!(plain.sample_type() & (1 << 12 | 1 << 13), 0);
    assert_eq!(
        layout.sample_type() & (1 << 12 | 1 << 13),
        1 << 12 | 1 << 13
    );
    // Cut anywhere inside the user part: an error, never a short stack.
    let (k, m, body) = rec.encode(0, layout);
    for cut in [body.len() - 8, body.len() - 40, 48 + 16 + 8] {
        assert!(layout
            .parse(RawRecord {
                kind: k,
                misc: m,
                body: &body[..cut]
            })
            .is_err());
    }
}

#[test]
fn cgroup_ids_end_samples_and_cgroup_records_name_them() {
    for (callchain, user_stack) in [(false, 0), (true, 0), (true, 64)] {
        let layout = Layout {
            callchain,
            user_stack,
            cgroup: true,
        };
        assert_eq!(layout.sample_type() & (1 << 21), 1 << 21);
        let inner = SimRecord::UserSample {
            ip: 0x401000,
            pid: 7,
            tid: 8,
            time: 9,
            period: 1,
            callchain: vec![PERF_CONTEXT_KERNEL, 0xffff_ffff_8100_0000],
            bp: 0x1000,
            sp: 0x0f00,
            stack: vec![1; 16],
        };
        let rec = SimRecord::CgroupSample {
            sample: Box::new(inner.clone()),
            cgroup: 0x1234_5678,
        };
        let (k, m, body) = rec.encode(3, layout);
        let Ok(Record::Sample(s)) = layout.parse(RawRecord {
            kind: k,
            misc: m,
            body: &body,
        }) else {
            panic!("not a sample");
        };
        assert_eq!(
            (s.cgroup, s.ip, s.pid, s.tid, s.cpu),
            (0x1234_5678, 0x401000, 7, 8, 3)
        );
        assert_eq!(s.callchain.len(), if callchain { 2 } else { 0 });
        if user_stack > 0 {
            assert_eq!(s.user().unwrap().stack, &[1; 16][..]);
        }
        // A sample body too short for its cgroup is an error.
        assert!(
            layout
                .parse(RawRecord {
                    kind: k,
                    misc: m,
                    body: &body[..body.len() - 8],
                })
                .is_err()
                || callchain
                || user_stack > 0
        );
        // Without cgroups in the layout nothing is appended.
        let plain = Layout {
            cgroup: false,
            ..layout
        };
        assert_eq!(rec.encode(3, plain), inner.encode(3, plain));
        assert_eq!(plain.sample_type() & (1 << 21), 0);
    }
    let layout = Layout::default();
    let rec = SimRecord::Cgroup {
        id: 4242,
        path: "/work/a b".into(),
        time: 77,
    };
    let (k, m, body) = rec.encode(1, layout);
    assert_eq!(k, kind::CGROUP);
    assert_eq!(k, 19);
    match layout.parse(RawRecord {
        kind: k,
        misc: m,
        body: &body,
    }) {
        Ok(Record::Cgroup { id, path, sid }) => {
            assert_eq!(
                (id, path, sid.time, sid.cpu),
                (4242, &b"/work/a b"[..], 77, 1)
            );
        }
        other => panic!("{other:?}"),
    }
    for len in [0usize, 8, 24, 31] {
        assert!(layout
            .parse(RawRecord {
                kind: kind::CGROUP,
                misc: 0,
                body: &body[..len.min(body.len())],
            })
            .is_err());
    }
}
