//! SimRing scenarios.

use crate::{decode, sim_recorder, sim_stage};
use profkit_eventlog::{for_each_sample, Event, LostKind};
use profkit_perf::{Layout, SimRecord, SimRing};
use profkit_sync::{dev_number, inode_cookie, ChunkSink};
use proptest::prelude::*;
use std::collections::BTreeMap;

fn mmap(pid: u32, addr: u64, len: u64, pgoff: u64, ino: u64, time: u64) -> SimRecord {
    SimRecord::Mmap2 {
        pid,
        tid: pid,
        addr,
        len,
        pgoff,
        ino,
        build_id: None,
        prot: 5,
        filename: format!("/bin/f{ino}"),
        time,
    }
}

fn sample(pid: u32, tid: u32, ip: u64, time: u64) -> SimRecord {
    SimRecord::Sample {
        ip,
        pid,
        tid,
        time,
        kernel: false,
        period: 1,
        callchain: vec![],
    }
}

fn cookie(ino: u64) -> u64 {
    // SimRecord's inode-form MMAP2 says device 8:1, generation 0.
    inode_cookie(dev_number(8, 1), ino, 0)
}

#[derive(Debug, Clone)]
enum Step {
    /// cpu, process index, thread index, map index, offset fraction.
    Sample(u32, usize, u32, usize, u16),
    Round,
}

fn step(ncpu: u32) -> impl Strategy<Value = Step> {
    prop_oneof![
        20 => (0..ncpu, 0usize..3, 0u32..3, 0usize..2, any::<u16>())
            .prop_map(|(c, p, t, m, o)| Step::Sample(c, p, t, m, o)),
        1 => Just(Step::Round),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Decoding the log and expanding the markers gives back exactly the
    /// samples that were produced (right cpu, pid, tid, cookie, offset), in
    /// order per CPU; samples + lost = produced.
    #[test]
    fn log_gives_back_the_produced_sample_stream(
        ncpu in 1u32..4,
        ring_log in 10u32..14,
        steps in (1u32..4).prop_flat_map(|n| prop::collection::vec(step(n), 1..400)),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let rings: Vec<SimRing> = (0..ncpu).map(|c| SimRing::new(c, 1 << ring_log, Layout { callchain: false, user_stack: 0,     cgroup: false, })).collect();
        let mut rec = sim_recorder(dir.path(), rings, 64 << 20);
        // Three processes, two file mappings each, all announced on cpu 0.
        let maps = |p: usize, m: usize| (0x400000 + (p as u64) * 0x100000 + (m as u64) * 0x10000, 0x8000u64, (m as u64) * 0x1000, (p * 2 + m) as u64 + 1);
        let mut t = 1u64;
        for p in 0..3 {
            for m in 0..2 {
                let (a, l, off, ino) = maps(p, m);
                assert!(rec.source_mut().0[0].push(&mmap(100 + p as u32, a, l, off, ino, t)));
                t += 1;
            }
        }
        rec.round();
        let mut expected: BTreeMap<u32, Vec<(u32, u32, u64, u64)>> = BTreeMap::new();
        let mut produced = 0u64;
        for s in steps {
            match s {
                Step::Sample(cpu, p, th, m, frac) => {
                    let cpu = cpu % ncpu;
                    let (a, l, off, ino) = maps(p, m);
                    let ip = a + (frac as u64 * l) / 65536;
                    let pid = 100 + p as u32;
                    let tid = pid + th * 1000;
                    t += 1;
                    produced += 1;
                    if rec.source_mut().0[cpu as usize].push(&sample(pid, tid, ip, t)) {
                        expected.entry(cpu).or_default().push((pid, tid, cookie(ino), off + ip - a));
                    }
                }
                Step::Round => { rec.round(); }
            }
        }
        rec.stop().unwrap();
        let d = decode(&dir.path().join("session.pkl"));
        let mut got: BTreeMap<u32, Vec<(u32, u32, u64, u64)>> = BTreeMap::new();
        for s in &d.samples {
            prop_assert!(!s.kernel);
            got.entry(s.cpu).or_default().push((s.pid, s.tid, s.cookie, s.offset));
        }
        prop_assert_eq!(&got, &expected);
        let written: u64 = d.accounting.iter().map(|a| a.samples_written).sum();
        let lost: u64 = d.accounting.iter().map(|a| a.lost_total()).sum();
        prop_assert_eq!(written, d.samples.len() as u64);
        prop_assert_eq!(written + lost, produced);
        // Loss markers in the log add up to the footer's loss.
        let marked: u64 = d.markers.iter().filter_map(|(_, m)| match m { Event::Lost { count, .. } => Some(*count), _ => None }).sum();
        prop_assert_eq!(marked, lost);
        // Every cookie used is defined in the log.
        for s in &d.samples {
            prop_assert!(d.markers.iter().any(|(_, m)| matches!(m, Event::CookieDef(e) if e.cookie == s.cookie)));
        }
    }
}

#[test]
fn samples_of_an_exited_process_in_another_rings_keep_task_and_binary() {
    let layout = Layout {
        callchain: false,
        user_stack: 0,
        cgroup: false,
    };
    let mut stage = sim_stage(layout);
    let mut rings: Vec<SimRing> = (0..2).map(|c| SimRing::new(c, 4096, layout)).collect();
    rings[0].push(&mmap(7, 0x400000, 0x1000, 0, 42, 1));
    stage.round(&mut rings, 2);
    // Round 1: cpu 0 (drained first) holds the exit; cpu 1 still holds samples
    // taken before it.
    rings[0].push(&SimRecord::Exit {
        pid: 7,
        ppid: 1,
        tid: 7,
        ptid: 1,
        time: 10,
    });
    rings[1].push(&sample(7, 7, 0x400100, 9));
    let c1 = stage.round(&mut rings, 11);
    // Round 2: a sample written to cpu 0's ring after its drain in round 1
    // but before the exit on another CPU... arrives one round later.
    rings[1].push(&sample(7, 7, 0x400200, 9));
    let c2 = stage.round(&mut rings, 12);
    let mut got = Vec::new();
    for c in [&c1, &c2] {
        for_each_sample(
            &c.bytes,
            |s| got.push((s.cpu, s.pid, s.tid, s.cookie, s.offset)),
            |_| {},
        )
        .unwrap();
    }
    assert_eq!(
        got,
        vec![(1, 7, 7, cookie(42), 0x100), (1, 7, 7, cookie(42), 0x200)]
    );
    // Two rounds after the exit the table forgets the process.
    stage.round(&mut rings, 13);
    assert!(stage.processes().get(7).is_none());
    let acct = stage.accounting();
    assert_eq!(
        acct.iter()
            .map(|a| a.lost_no_task + a.lost_no_mapping)
            .sum::<u64>(),
        0
    );
}

#[test]
fn a_mapping_seen_on_a_later_cpu_in_the_same_round_still_resolves() {
    let layout = Layout {
        callchain: false,
        user_stack: 0,
        cgroup: false,
    };
    let mut stage = sim_stage(layout);
    let mut rings: Vec<SimRing> = (0..2).map(|c| SimRing::new(c, 4096, layout)).collect();
    rings[0].push(&sample(9, 9, 0x7000_0010, 5));
    rings[1].push(&mmap(9, 0x7000_0000, 0x1000, 0x3000, 77, 4));
    let c = stage.round(&mut rings, 6);
    let mut got = Vec::new();
    let mut marker_before_sample = false;
    let seen_load = std::cell::Cell::new(false);
    for_each_sample(
        &c.bytes,
        |s| {
            marker_before_sample = seen_load.get();
            got.push((s.cpu, s.cookie, s.offset));
        },
        |m| {
            if matches!(m, Event::ModuleLoad { cookie: k, pid: Some(9), .. } if k == cookie(77)) {
                seen_load.set(true);
            }
        },
    )
    .unwrap();
    assert_eq!(got, vec![(0, cookie(77), 0x3010)]);
    assert!(
        marker_before_sample,
        "the module-load marker precedes the sample"
    );
}

#[test]
fn unmapped_samples_are_counted_not_dropped_silently() {
    let layout = Layout {
        callchain: false,
        user_stack: 0,
        cgroup: false,
    };
    let mut stage = sim_stage(layout);
    let mut rings = vec![SimRing::new(0, 4096, layout)];
    rings[0].push(&mmap(3, 0x1000, 0x1000, 0, 1, 1));
    rings[0].push(&sample(3, 3, 0x9999, 2)); // no mapping
    rings[0].push(&sample(4, 4, 0x1100, 3)); // unknown task
    rings[0].push(&SimRecord::Unknown { kind: 77, len: 8 });
    rings[0].push(&SimRecord::Throttle {
        throttled: true,
        time: 4,
    });
    let c = stage.round(&mut rings, 5);
    // Neither is lost yet: the FORK or MMAP2 they need may have gone into
    // a ring after it was drained, so they wait one round.
    let a = &stage.accounting()[0];
    assert_eq!(
        (
            a.samples_received,
            a.samples_written,
            a.lost_no_mapping,
            a.lost_no_task
        ),
        (2, 0, 0, 0)
    );
    let c2 = stage.round(&mut rings, 6);
    let a = &stage.accounting()[0];
    assert_eq!(
        (
            a.samples_received,
            a.samples_written,
            a.lost_no_mapping,
            a.lost_no_task
        ),
        (2, 0, 1, 1)
    );
    assert_eq!((a.records_skipped, a.throttle_events), (1, 1));
    let mut kinds = Vec::new();
    for bytes in [&c.bytes, &c2.bytes] {
        for_each_sample(
            bytes,
            |_| {},
            |m| {
                if let Event::Lost {
                    kind,
                    count,
                    cpu: 0,
                } = m
                {
                    kinds.push((kind, count));
                }
                if let Event::Throttle { throttled, .. } = m {
                    assert!(throttled);
                }
            },
        )
        .unwrap();
    }
    kinds.sort_by_key(|k| format!("{k:?}"));
    assert_eq!(kinds, vec![(LostKind::NoMapping, 1), (LostKind::NoTask, 1)]);
}

#[test]
fn a_child_whose_fork_comes_a_round_late_resolves_before_and_after_its_exec() {
    // The parent (pid 3) runs /bin/sh; it forks pid 4 on CPU 0, but that
    // FORK reaches CPU 0's ring after the ring was drained. Pid 4 runs on
    // CPU 1: a sample in the parent's code, its exec, its new binary, a
    // sample there — all in round 1. The FORK arrives in round 2.
    let layout = Layout {
        callchain: false,
        user_stack: 0,
        cgroup: false,
    };
    let mut stage = sim_stage(layout);
    let mut rings = vec![SimRing::new(0, 4096, layout), SimRing::new(1, 4096, layout)];
    rings[0].push(&mmap(3, 0x1000, 0x1000, 0, 1, 1));
    rings[1].push(&sample(4, 4, 0x1100, 3));
    rings[1].push(&SimRecord::Comm {
        pid: 4,
        tid: 4,
        comm: "true".into(),
        exec: true,
        time: 4,
    });
    rings[1].push(&mmap(4, 0x5000, 0x1000, 0, 2, 5));
    rings[1].push(&sample(4, 4, 0x5100, 6));
    let c1 = stage.round(&mut rings, 7);
    rings[0].push(&SimRecord::Fork {
        pid: 4,
        ppid: 3,
        tid: 4,
        ptid: 3,
        time: 2,
    });
    let c2 = stage.round(&mut rings, 8);
    let a = &stage.accounting()[1];
    assert_eq!(
        (
            a.samples_received,
            a.samples_written,
            a.lost_no_mapping,
            a.lost_no_task
        ),
        (2, 2, 0, 0),
        "{a:?}"
    );
    let mut got = Vec::new();
    for bytes in [&c1.bytes, &c2.bytes] {
        for_each_sample(bytes, |s| got.push((s.pid, s.cookie, s.offset)), |_| {}).unwrap();
    }
    got.sort();
    assert_eq!(got, vec![(4, cookie(1), 0x100), (4, cookie(2), 0x100)]);
}

/// A sink that blocks until released, then writes to a real session file.
struct Stalling {
    inner: profkit_sync::FileSink,
    gate: std::sync::Arc<(std::sync::Mutex<bool>, std::sync::Condvar)>,
}

impl ChunkSink for Stalling {
    fn write_chunk(&mut self, round: u64, time: u64, payload: &[u8]) -> profkit_sync::Result<u64> {
        let (m, cv) = &*self.gate;
        let mut open = m.lock().unwrap();
        while !*open {
            open = cv.wait(open).unwrap();
        }
        self.inner.write_chunk(round, time, payload)
    }
    fn finish(&mut self, f: &profkit_eventlog::SessionFooter) -> profkit_sync::Result<()> {
        self.inner.finish(f)
    }
    fn restart(&mut self) -> profkit_sync::Result<()> {
        self.inner.restart()
    }
}

struct Feeder {
    t: u64,
    produced: [u64; 2],
}

impl Feeder {
    fn feed(&mut self, rec: &mut profkit_sync::Recorder<profkit_sync::SimRings>, n: u64) {
        for i in 0..n {
            for c in 0..2 {
                self.t += 1;
                let s = sample(5, 5 + c as u32, 0x400000 + (i * 4099) % 0x10000, self.t);
                assert!(rec.source_mut().0[c].push(&s));
                self.produced[c] += 1;
            }
        }
    }
}

#[test]
fn a_stalled_writer_costs_only_the_rounds_that_did_not_fit() {
    use profkit_sync::{Recorder, RecorderOptions, SimRings};
    let dir = tempfile::tempdir().unwrap();
    let layout = Layout {
        callchain: false,
        user_stack: 0,
        cgroup: false,
    };
    let gate = std::sync::Arc::new((std::sync::Mutex::new(false), std::sync::Condvar::new()));
    let sink = Stalling {
        inner: profkit_sync::FileSink::create(dir.path().join("session.pkl"), Default::default())
            .unwrap(),
        gate: gate.clone(),
    };
    let rings: Vec<SimRing> = (0..2).map(|c| SimRing::new(c, 1 << 16, layout)).collect();
    let mut rec = Recorder::new(
        SimRings(rings),
        sim_stage(layout),
        Box::new(sink),
        RecorderOptions { buffer_bytes: 2048 },
    )
    .unwrap();
    for c in 0..2 {
        rec.source_mut().0[c].push(&mmap(5, 0x400000, 0x10000, 0, 9, 1));
    }
    let mut feeder = Feeder {
        t: 2,
        produced: [0; 2],
    };
    // The writer stalls: rounds keep running (each returns: the producer
    // never waits), the buffer fills, later rounds overflow.
    let (tx, rx) = std::sync::mpsc::channel();
    let h = std::thread::spawn(move || {
        for _ in 0..12 {
            feeder.feed(&mut rec, 100);
            rec.round();
        }
        tx.send(()).unwrap();
        (rec, feeder)
    });
    rx.recv_timeout(std::time::Duration::from_secs(30))
        .expect("rounds must not block on a stalled writer");
    let (mut rec, mut feeder) = h.join().unwrap();
    let overflow: Vec<u64> = rec
        .status()
        .accounting
        .iter()
        .map(|a| a.lost_overflow)
        .collect();
    assert!(
        overflow.iter().all(|&o| o > 0),
        "both CPUs lost rounds to overflow: {overflow:?}"
    );
    // Space returns.
    *gate.0.lock().unwrap() = true;
    gate.1.notify_all();
    std::thread::sleep(std::time::Duration::from_millis(200));
    feeder.feed(&mut rec, 10);
    rec.round();
    let status = rec.stop().unwrap();
    let d = decode(&dir.path().join("session.pkl"));
    for (c, a) in status.accounting.iter().enumerate() {
        assert_eq!(
            a.samples_written + a.lost_total(),
            feeder.produced[c],
            "cpu {c}"
        );
        assert_eq!(
            a.lost_total(),
            a.lost_overflow,
            "only overflow loss on cpu {c}"
        );
    }
    // The LOST(Overflow) markers sit in one chunk, after the stall, and
    // carry exactly the per-CPU overflow counts.
    let ov: Vec<(usize, u32, u64)> = d
        .markers
        .iter()
        .filter_map(|(i, m)| match m {
            Event::Lost {
                cpu,
                kind: LostKind::Overflow,
                count,
            } => Some((*i, *cpu, *count)),
            _ => None,
        })
        .collect();
    let per_cpu: Vec<u64> = (0..2)
        .map(|c| ov.iter().filter(|o| o.1 == c).map(|o| o.2).sum())
        .collect();
    assert_eq!(per_cpu, overflow);
    assert!(
        ov.iter().all(|o| o.0 > 0),
        "markers come after the chunks that fit: {ov:?}"
    );
    assert_eq!(
        d.samples.len() as u64,
        status
            .accounting
            .iter()
            .map(|a| a.samples_written)
            .sum::<u64>()
    );
}

/// Regression: a child's FORK record sits in a ring drained after the ring
/// holding its exec's MMAP2 (fork on one CPU, exec and run on another).
/// The late FORK must not replace what the stage learned about the child
/// after the fork with a copy of the parent's mappings, or every later
/// sample of the child is lost as "no mapping". (Seen live: the call-graph
/// test under load lost the whole fixture this way.)
#[test]
fn a_fork_record_drained_after_the_childs_exec_keeps_the_exec_mappings() {
    let layout = Layout {
        callchain: false,
        user_stack: 0,
        cgroup: false,
    };
    let mut stage = sim_stage(layout);
    let mut rings: Vec<SimRing> = (0..2).map(|c| SimRing::new(c, 4096, layout)).collect();
    // The parent and its binary.
    rings[0].push(&mmap(10, 0x50_0000, 0x1000, 0, 1, 1));
    stage.round(&mut rings, 2);
    // Fork at time 10 on CPU 1; exec (COMM), MMAP2 and samples of the child
    // at 20.. on CPU 0, which is drained first.
    rings[0].push(&SimRecord::Comm {
        pid: 11,
        tid: 11,
        comm: "child".into(),
        exec: true,
        time: 20,
    });
    rings[0].push(&mmap(11, 0x40_0000, 0x1000, 0, 2, 21));
    rings[0].push(&sample(11, 11, 0x40_0010, 22));
    rings[1].push(&SimRecord::Fork {
        pid: 11,
        ppid: 10,
        tid: 11,
        ptid: 10,
        time: 10,
    });
    let c1 = stage.round(&mut rings, 23);
    rings[0].push(&sample(11, 11, 0x40_0020, 30));
    let c2 = stage.round(&mut rings, 31);
    let mut got = Vec::new();
    for c in [&c1, &c2] {
        for_each_sample(&c.bytes, |s| got.push((s.cookie, s.offset)), |_| {}).unwrap();
    }
    assert_eq!(got, [(cookie(2), 0x10), (cookie(2), 0x20)]);
    let a = stage.accounting();
    assert_eq!(a.iter().map(|a| a.lost_no_mapping).sum::<u64>(), 0);
}

#[test]
fn a_thread_seen_before_its_process_exec_gets_the_new_name() {
    let layout = Layout {
        callchain: false,
        user_stack: 0,
        cgroup: false,
    };
    let mut stage = sim_stage(layout);
    let mut rings: Vec<SimRing> = (0..2).map(|c| SimRing::new(c, 4096, layout)).collect();
    rings[0].push(&SimRecord::Comm {
        pid: 50,
        tid: 50,
        comm: "sh".into(),
        exec: true,
        time: 1,
    });
    rings[0].push(&mmap(50, 0x400000, 0x1000, 0, 3, 2));
    stage.round(&mut rings, 3);
    // cpu 0 (drained first) holds the new thread's FORK and a sample; the
    // exec COMM and the new binary's MMAP2 sit in cpu 1's ring.
    rings[0].push(&SimRecord::Fork {
        pid: 50,
        ppid: 50,
        tid: 51,
        ptid: 50,
        time: 6,
    });
    rings[0].push(&sample(50, 51, 0x500010, 7));
    rings[1].push(&SimRecord::Comm {
        pid: 50,
        tid: 50,
        comm: "shares".into(),
        exec: true,
        time: 4,
    });
    rings[1].push(&mmap(50, 0x500000, 0x1000, 0, 4, 5));
    let c = stage.round(&mut rings, 8);
    let mut names = Vec::new();
    for_each_sample(
        &c.bytes,
        |_| {},
        |m| {
            if let Event::Comm {
                pid: 50, tid, comm, ..
            } = m
            {
                names.push((tid, comm));
            }
        },
    )
    .unwrap();
    // No name is written for thread 51 itself (it has none of its own), so
    // it shows its process's name; the last name of 50 is "shares".
    assert!(names.iter().all(|(t, _)| *t == 50), "{names:?}");
    assert_eq!(
        names.last().map(|n| n.1.as_str()),
        Some("shares"),
        "{names:?}"
    );
}

#[test]
fn lost_mmaps_are_recovered_from_proc() {
    // A fake /proc with one process whose MMAP2 never reached the ring.
    let root = tempfile::tempdir().unwrap();
    let p = root.path().join("proc/4242");
    std::fs::create_dir_all(&p).unwrap();
    std::fs::write(p.join("comm"), "jit\n").unwrap();
    std::fs::write(
        p.join("maps"),
        "00400000-00402000 r-xp 00001000 08:01 99 /no/such/bin\n7f0000000000-7f0000001000 rwxp 00000000 00:00 0 \n",
    )
    .unwrap();
    let layout = Layout {
        callchain: false,
        user_stack: 0,
        cgroup: false,
    };
    let mut stage = profkit_sync::SyncStage::with_probe(
        profkit_sync::SyncOptions::new(layout),
        profkit_sync::ProcfsProbe::new(profkit_sync::ProcPaths {
            proc_root: root.path().join("proc"),
            sys_root: root.path().join("sys"),
        }),
    );
    let mut rings = vec![SimRing::new(0, 4096, layout)];
    // The process is known (a FORK arrived) but its exec's mappings were lost.
    rings[0].push(&SimRecord::Fork {
        pid: 4242,
        ppid: 1,
        tid: 4242,
        ptid: 1,
        time: 1,
    });
    rings[0].push(&sample(4242, 4242, 0x400010, 2));
    rings[0].push(&sample(4242, 4242, 0x7f0000000020, 3));
    let c = stage.round(&mut rings, 4);
    let mut got = Vec::new();
    for_each_sample(&c.bytes, |s| got.push((s.cookie, s.offset)), |_| {}).unwrap();
    assert_eq!(
        got.len(),
        2,
        "both samples resolved after the /proc refresh"
    );
    assert_eq!(got[0], (inode_cookie(dev_number(8, 1), 99, 0), 0x1010));
    assert_eq!(got[1], (profkit_sync::anon_cookie(4242), 0x7f0000000020));
    assert_eq!(stage.accounting()[0].lost_no_mapping, 0);
}

#[test]
fn fork_exec_storms_leave_no_trace_in_the_tables() {
    let layout = Layout {
        callchain: false,
        user_stack: 0,
        cgroup: false,
    };
    let mut stage = sim_stage(layout);
    let mut rings: Vec<SimRing> = (0..2).map(|c| SimRing::new(c, 1 << 16, layout)).collect();
    rings[0].push(&mmap(1, 0x400000, 0x1000, 0, 1, 1));
    stage.round(&mut rings, 2);
    let mut t = 10;
    let mut produced = 0u64;
    for batch in 0..50u32 {
        for i in 0..200u32 {
            let pid = 1000 + batch * 200 + i;
            let cpu = (i % 2) as usize;
            t += 1;
            rings[cpu].push(&SimRecord::Fork {
                pid,
                ppid: 1,
                tid: pid,
                ptid: 1,
                time: t,
            });
            rings[cpu].push(&SimRecord::Comm {
                pid,
                tid: pid,
                comm: format!("job{i}"),
                exec: true,
                time: t + 1,
            });
            rings[cpu].push(&mmap(pid, 0x500000, 0x1000, 0, 7, t + 2));
            rings[cpu].push(&SimRecord::Fork {
                pid,
                ppid: pid,
                tid: pid + 500_000,
                ptid: pid,
                time: t + 3,
            });
            rings[cpu].push(&sample(pid, pid + 500_000, 0x500100, t + 4));
            rings[cpu].push(&SimRecord::Exit {
                pid,
                ppid: pid,
                tid: pid + 500_000,
                ptid: pid,
                time: t + 5,
            });
            rings[cpu].push(&sample(pid, pid, 0x500200, t + 6));
            rings[cpu].push(&SimRecord::Exit {
                pid,
                ppid: 1,
                tid: pid,
                ptid: 1,
                time: t + 7,
            });
            produced += 2;
            t += 8;
        }
        stage.round(&mut rings, t);
    }
    for _ in 0..3 {
        stage.round(&mut rings, t);
    }
    let sizes = stage.table_sizes();
    assert!(
        sizes.processes <= 2 && sizes.threads <= 2 && sizes.announced <= 2,
        "{sizes:?}"
    );
    let a: Vec<_> = stage.accounting();
    let written: u64 = a.iter().map(|a| a.samples_written).sum();
    let lost: u64 = a.iter().map(|a| a.lost_total()).sum();
    assert_eq!((written, lost), (produced, 0));
}

/// A sink whose disk is full: every write and the footer fail.
struct Full;

impl ChunkSink for Full {
    fn write_chunk(&mut self, _: u64, _: u64, _: &[u8]) -> profkit_sync::Result<u64> {
        Err(profkit_sync::Error::Sink("no space left on /full".into()))
    }
    fn finish(&mut self, _: &profkit_eventlog::SessionFooter) -> profkit_sync::Result<()> {
        Err(profkit_sync::Error::Sink("no space left on /full".into()))
    }
    fn restart(&mut self) -> profkit_sync::Result<()> {
        Ok(())
    }
}

#[test]
fn a_failing_sink_surfaces_as_typed_dump_and_footer_errors() {
    use profkit_sync::{Error, Recorder, RecorderOptions, SimRings};
    let layout = Layout {
        callchain: false,
        user_stack: 0,
        cgroup: false,
    };
    let mut rings = vec![SimRing::new(0, 1 << 16, layout)];
    rings[0].push(&mmap(5, 0x400000, 0x10000, 0, 9, 1));
    rings[0].push(&sample(5, 5, 0x400010, 2));
    let mut rec = Recorder::new(
        SimRings(rings),
        sim_stage(layout),
        Box::new(Full),
        RecorderOptions::default(),
    )
    .unwrap();
    match rec.dump() {
        Err(Error::WriteFailed { last_error }) => {
            assert!(last_error.contains("/full"), "{last_error}")
        }
        other => panic!("dump: {other:?}"),
    }
    // The sample of the failed round is counted as lost to a full disk.
    let acct = rec.status().accounting;
    assert_eq!(acct.iter().map(|a| a.lost_disk_full).sum::<u64>(), 1);
    match rec.stop() {
        Err(e @ Error::Footer { .. }) => assert_eq!(
            e.to_string(),
            "writing the session footer failed: no space left on /full"
        ),
        other => panic!("stop: {other:?}"),
    }
}
