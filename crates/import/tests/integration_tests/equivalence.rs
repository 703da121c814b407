//! The same records as a SimRing scenario (the live path: rings drained by
//! `SyncStage::round`) and as a perf.data file (`import_perf_data`) give
//! byte-identical chunks and identical accounting, and that session holds
//! what the records say: anonymous, memfd and vDSO code, kernel and module
//! samples from perf's kernel mappings, throttling, a LOST record, a stack
//! over 256 frames, a stack with an unknown frame, a sample in no mapping
//! and one of an unknown process.

use crate::perf_data::{self, RawRec, LOST};
use profkit_eventlog::cookie::{anon_cookie, inode_cookie, vdso_cookie};
use profkit_eventlog::{
    kernel_entry, module_entry, Cookie, CpuAccounting, ExpandedSample, SessionReader,
};
use profkit_perf::{Layout, SimRecord, SimRing, PERF_CONTEXT_KERNEL, PERF_CONTEXT_USER};
use profkit_sync::{dev_number, SyncOptions, SyncStage};

const KTEXT: u64 = 0xffff_ffff_8100_0000;
const MODULE: u64 = 0xffff_ffff_c000_0000;
const APP: u64 = 0x40_0000;
const JIT: u64 = 0x7f00_0000_0000;
const MEMFD: u64 = 0x7f10_0000_0000;
const VDSO: u64 = 0x7fff_0000_0000;
const LATE: u64 = 0x60_0000;
const NOWHERE: u64 = 0x1234;

/// An inode-form MMAP2 (`ino` 0 and no build-id for pseudo-files).
#[allow(clippy::too_many_arguments)]
fn map(
    pid: u32,
    addr: u64,
    len: u64,
    pgoff: u64,
    ino: u64,
    prot: u32,
    path: &str,
    time: u64,
) -> SimRecord {
    SimRecord::Mmap2 {
        pid,
        tid: pid,
        addr,
        len,
        pgoff,
        ino,
        build_id: None,
        prot,
        filename: path.into(),
        time,
    }
}

fn sample(pid: u32, tid: u32, ip: u64, kernel: bool, callchain: Vec<u64>, time: u64) -> SimRecord {
    SimRecord::Sample {
        ip,
        pid,
        tid,
        time,
        kernel,
        period: 1,
        callchain,
    }
}

/// Per CPU, the records in ring order (times increasing).
fn scenario() -> Vec<(u32, Vec<RawRec>)> {
    let layout = Layout {
        callchain: true,
        user_stack: 0,
        cgroup: false,
    };
    let enc = |cpu: u32, recs: Vec<SimRecord>| -> Vec<RawRec> {
        recs.iter().map(|r| r.encode(cpu, layout)).collect()
    };
    let user = |ip: u64, more: &[u64]| {
        let mut c = vec![PERF_CONTEXT_USER, ip];
        c.extend_from_slice(more);
        c
    };
    let deep: Vec<u64> = (0..300).map(|i| APP + 0x100 + 8 * i).collect();
    let mut cpu0 = enc(
        0,
        vec![
            // perf's kernel mappings: _text in pgoff; a module by its path.
            map(
                u32::MAX,
                KTEXT,
                MODULE - KTEXT,
                KTEXT,
                0,
                5,
                "[kernel.kallsyms]_text",
                10,
            ),
            map(
                u32::MAX,
                MODULE,
                0x4000,
                0,
                0,
                5,
                "/lib/modules/6.1.0/kernel/sound/core/snd-seq-device.ko",
                11,
            ),
            SimRecord::Comm {
                pid: 100,
                tid: 100,
                comm: "app".into(),
                exec: true,
                time: 20,
            },
            map(100, APP, 0x10000, 0, 5, 5, "/bin/app", 21),
            // Anonymous JIT code (named through perf-100.map), memfd code,
            // the vDSO, and a data mapping (not code: ignored).
            map(100, JIT, 0x10000, 0, 0, 7, "//anon", 22),
            map(100, MEMFD, 0x10000, 0, 9, 5, "/memfd:jit (deleted)", 23),
            map(100, VDSO, 0x2000, 0, 0, 5, "[vdso]", 24),
            map(100, 0x50_0000, 0x1000, 0, 6, 3, "/lib/data", 25),
            sample(
                100,
                100,
                APP + 0x123,
                false,
                user(APP + 0x123, &[APP + 0x500, APP + 0x600]),
                30,
            ),
            sample(
                100,
                100,
                JIT + 0x40,
                false,
                user(JIT + 0x40, &[JIT + 0x80, APP + 0x600]),
                31,
            ),
            sample(100, 100, MEMFD + 0x100, false, vec![], 32),
            sample(100, 100, VDSO + 0x10, false, vec![], 33),
            sample(
                100,
                100,
                KTEXT + 0x1234,
                true,
                vec![
                    PERF_CONTEXT_KERNEL,
                    KTEXT + 0x1234,
                    MODULE + 0x40,
                    PERF_CONTEXT_USER,
                    APP + 0x200,
                    APP + 0x300,
                ],
                34,
            ),
            sample(
                100,
                100,
                MODULE + 0x80,
                true,
                vec![PERF_CONTEXT_KERNEL, MODULE + 0x80, KTEXT + 0x10],
                35,
            ),
            sample(100, 100, APP + 0x10, false, user(APP + 0x10, &deep), 36),
            sample(
                100,
                100,
                APP + 0x20,
                false,
                user(APP + 0x20, &[APP + 0x100, NOWHERE, APP + 0x200]),
                37,
            ),
            sample(100, 100, NOWHERE, false, vec![], 38),
            sample(555, 555, APP + 0x30, false, vec![], 39),
            SimRecord::Throttle {
                throttled: true,
                time: 40,
            },
            SimRecord::Throttle {
                throttled: false,
                time: 41,
            },
        ],
    );
    cpu0.push((LOST, 0, perf_data::lost_body(7, 42, 0)));
    cpu0.extend(enc(
        0,
        vec![
            SimRecord::Fork {
                pid: 101,
                ppid: 100,
                tid: 101,
                ptid: 100,
                time: 43,
            },
            sample(101, 101, APP + 0x40, false, vec![], 44),
            SimRecord::Exit {
                pid: 101,
                ppid: 100,
                tid: 101,
                ptid: 100,
                time: 45,
            },
            // Its mapping is on CPU 1, drained after this ring: the
            // sample waits for the end of the round.
            sample(100, 100, LATE + 0x10, false, vec![], 50),
        ],
    ));
    let cpu1 = enc(
        1,
        vec![
            map(100, LATE, 0x1000, 0x2000, 11, 5, "/lib/late.so", 48),
            SimRecord::Comm {
                pid: 100,
                tid: 102,
                comm: "worker".into(),
                exec: false,
                time: 49,
            },
            sample(
                100,
                102,
                APP + 0x50,
                false,
                user(APP + 0x50, &[APP + 0x60]),
                51,
            ),
        ],
    );
    vec![(0, cpu0), (1, cpu1)]
}

fn cookie(ino: u64) -> Cookie {
    // SimRecord's inode-form MMAP2 says device 8:1, generation 0.
    inode_cookie(dev_number(8, 1), ino, 0)
}

#[test]
fn a_simring_scenario_and_its_perf_data_give_the_same_session() {
    let layout = Layout {
        callchain: true,
        user_stack: 0,
        cgroup: false,
    };
    let records = scenario();

    // The live path.
    let mut rings: Vec<SimRing> = records
        .iter()
        .map(|(cpu, recs)| {
            let mut r = SimRing::new(*cpu, 1 << 20, layout);
            for (k, m, body) in recs {
                assert!(r.push_raw(*k, *m, body));
            }
            r
        })
        .collect();
    let mut stage = SyncStage::new(SyncOptions::new(layout));
    // The import keeps perf's nanoseconds (time unit 1).
    stage.set_time_unit(1);
    // One round that is also the session's last (as the import's is).
    stage.begin_round(1_000);
    for r in rings.iter_mut() {
        stage.drain(r);
    }
    let live = stage.finish_final_round();
    let live_acct = stage.accounting();

    // The import of the same records.
    let d = tempfile::tempdir().unwrap();
    let data = d.path().join("perf.data");
    let all: Vec<RawRec> = records
        .iter()
        .flat_map(|(_, r)| r.iter().cloned())
        .collect();
    perf_data::write(&data, layout.sample_type(), &all);
    let session = d.path().join("s/session.pkl");
    let summary = profkit_import::import_perf_data(&data, &session).unwrap();
    let r = SessionReader::open(&session).unwrap();
    assert!(r.is_complete() && r.bad_chunks().is_empty());
    assert_eq!(r.chunks().len(), 1, "one round: 41 ns of samples");
    assert_eq!(
        r.payload(&r.chunks()[0]),
        live.bytes.as_slice(),
        "chunk bytes differ"
    );
    let acct = r.footer().unwrap().accounting.clone();
    assert_eq!(acct, live_acct);

    // And the session says what the records say.
    let total = |f: fn(&CpuAccounting) -> u64| acct.iter().map(f).sum::<u64>();
    assert_eq!(total(|a| a.samples_received), 13);
    assert_eq!(total(|a| a.samples_written), 11);
    assert_eq!(total(|a| a.lost_no_mapping), 1, "the sample in no mapping");
    assert_eq!(total(|a| a.lost_no_task), 1, "the sample of pid 555");
    assert_eq!(total(|a| a.throttle_events), 1, "THROTTLE, not UNTHROTTLE");
    assert_eq!(total(|a| a.lost_ring), 7);
    assert_eq!(total(|a| a.stacks_truncated), 1);
    assert_eq!(total(|a| a.stacks_unknown), 1);
    assert_eq!(
        (
            summary.samples,
            summary.written,
            summary.no_mapping,
            summary.no_task,
            summary.lost
        ),
        (13, 11, 1, 1, 7)
    );
    assert_eq!(summary.bad_records, 0);

    let mut samples: Vec<ExpandedSample> = Vec::new();
    r.for_each_sample(&r.chunks()[0], |s| samples.push(*s), |_| {})
        .unwrap();
    let at = |pid: u32, tid: u32| -> Vec<(Cookie, u64, bool)> {
        samples
            .iter()
            .filter(|s| (s.pid, s.tid) == (pid, tid))
            .map(|s| (s.cookie, s.offset, s.kernel))
            .collect()
    };
    let kernel = kernel_entry(KTEXT, None).cookie;
    let module = module_entry("snd_seq_device", MODULE, None).cookie;
    assert_eq!(
        at(100, 100),
        [
            (cookie(5), 0x123, false),
            (anon_cookie(100), JIT + 0x40, false),
            (anon_cookie(100), MEMFD + 0x100, false),
            (vdso_cookie(), 0x10, false),
            (kernel, 0x1234, true),
            (module, 0x80, true),
            (cookie(5), 0x10, false),
            (cookie(5), 0x20, false),
            (cookie(11), 0x2010, false),
        ]
    );
    assert_eq!(at(101, 101), [(cookie(5), 0x40, false)]);
    assert_eq!(at(100, 102), [(cookie(5), 0x50, false)]);
    let stacks = r.stack_table();
    let frames = |s: &ExpandedSample| stacks.get(s.stack.unwrap()).unwrap().to_vec();
    let kernel_sample = samples.iter().find(|s| s.cookie == kernel).unwrap();
    let f = frames(kernel_sample);
    assert_eq!(
        f.iter()
            .map(|f| (f.cookie, f.offset, f.kernel))
            .collect::<Vec<_>>(),
        [
            (module, 0x40, true),
            (cookie(5), 0x200, false),
            (cookie(5), 0x300, false)
        ]
    );
    let deep = samples
        .iter()
        .find(|s| s.offset == 0x10 && s.cookie == cookie(5))
        .unwrap();
    assert_eq!(frames(deep).len(), profkit_sync::MAX_STACK_FRAMES);
}

/// perf's build-id table names binaries whose MMAP2 records carry only
/// device and inode: the import gives them the cookies the live path
/// derives from the same build-ids (read from the file, or from
/// `/sys/kernel/notes`), with device and inode kept in the definition.
#[test]
fn build_ids_from_perf_data_give_the_live_cookies() {
    let layout = Layout {
        callchain: false,
        user_stack: 0,
        cgroup: false,
    };
    let app_id = [0xaa; 20];
    let kernel_id = [0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88];
    let recs: Vec<RawRec> = [
        map(
            u32::MAX,
            KTEXT,
            0x100_0000,
            KTEXT,
            0,
            5,
            "[kernel.kallsyms]_text",
            1,
        ),
        map(100, APP, 0x10000, 0, 5, 5, "/bin/app", 2),
        map(100, LATE, 0x1000, 0, 11, 5, "/lib/late.so", 3),
        sample(100, 100, APP + 0x10, false, vec![], 4),
        sample(100, 100, KTEXT + 0x20, true, vec![], 5),
        sample(100, 100, LATE + 0x30, false, vec![], 6),
    ]
    .iter()
    .map(|r| r.encode(0, layout))
    .collect();
    let d = tempfile::tempdir().unwrap();
    let data = d.path().join("perf.data");
    perf_data::write_with_build_ids(
        &data,
        layout.sample_type(),
        &recs,
        &[
            (profkit_perf::misc::USER, &app_id, "/bin/app"),
            (profkit_perf::misc::KERNEL, &kernel_id, "[kernel.kallsyms]"),
        ],
    );
    let session = d.path().join("session.pkl");
    let summary = profkit_import::import_perf_data(&data, &session).unwrap();
    assert_eq!((summary.written, summary.bad_records), (3, 0));
    let r = SessionReader::open(&session).unwrap();
    let mut got = Vec::new();
    let mut defs = Vec::new();
    for c in r.chunks() {
        r.for_each_sample(
            c,
            |s| got.push((s.cookie, s.offset)),
            |m| {
                if let profkit_eventlog::Event::CookieDef(e) = m {
                    defs.push(e)
                }
            },
        )
        .unwrap();
    }
    let app =
        profkit_eventlog::file_entry("/bin/app", Some(app_id.to_vec()), dev_number(8, 1), 5, 0);
    let kernel = kernel_entry(KTEXT, Some(kernel_id.to_vec()));
    assert_eq!(
        got,
        [
            (app.cookie, 0x10),
            (kernel.cookie, 0x20),
            (cookie(11), 0x30)
        ]
    );
    assert!(defs.contains(&app), "{defs:?}");
    assert!(defs.contains(&kernel), "{defs:?}");
}
