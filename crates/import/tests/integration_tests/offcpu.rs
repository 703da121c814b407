//! Real off-CPU recordings imported: `perf record -e cs -c 1 -g
//! --switch-events -a` (the context-switch event, as `profctl start
//! --off-cpu` records), the same beside an on-CPU `cpu-clock`, and `perf
//! record -e sched:sched_switch -g -a` (a tracepoint, no switch records),
//! each of a small program that sleeps in a known function (`napper`: 20
//! times `usleep(20000)`, measuring its own sleeps). The session is an
//! off-CPU one (`event.off_cpu`, version 5) whose `OffCpu` markers give
//! the program's thread the time it slept, within 10 %, as blocked, from
//! stacks that reach the program. Skipped with a printed reason when perf,
//! a C compiler or the tracepoint is missing or perf events cannot be
//! opened, unless PROFKIT_REQUIRE_PERF=1 (CI), where that is a failure.

use profkit_eventlog::{Event, OffCpuKind, SessionReader};
use profkit_testsupport::{perf_ok, skip};
use std::path::{Path, PathBuf};
use std::process::Command;

const NAPPER_C: &str = r#"
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static unsigned long long now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

/* 20 sleeps of 20 ms; returns the time they took, measured around each. */
__attribute__((noinline)) unsigned long long napper(void) {
    unsigned long long slept = 0;
    for (int i = 0; i < 20; i++) {
        unsigned long long t = now_ns();
        usleep(20000);
        slept += now_ns() - t;
    }
    return slept;
}

int main(void) {
    unsigned long long slept = napper();
    printf("pid=%d sleep_ns=%llu\n", (int)getpid(), slept);
    return 0;
}
"#;

/// The workload, built with frame pointers into `dir`.
fn build_napper(dir: &Path) -> Option<PathBuf> {
    let src = dir.join("napper.c");
    std::fs::write(&src, NAPPER_C).unwrap();
    let out = dir.join("napper");
    let status = Command::new("cc")
        .args(["-O1", "-g", "-fno-omit-frame-pointer", "-o"])
        .arg(&out)
        .arg(&src)
        .status();
    match status {
        Ok(s) if s.success() => Some(out),
        Ok(s) => {
            skip(format!("cc failed on napper.c ({s})"));
            None
        }
        Err(e) => {
            skip(format!("no C compiler (cc: {e})"));
            None
        }
    }
}

fn perf_bin() -> Option<String> {
    let perf = std::env::var("PERF").unwrap_or_else(|_| "/usr/bin/perf".into());
    if !Path::new(&perf).exists() {
        skip(format!("no perf at {perf} (set PERF=...)"));
        return None;
    }
    perf_ok().then_some(perf)
}

/// What a recording of the workload gave.
struct Recorded {
    data: PathBuf,
    pid: u32,
    sleep_ns: u64,
}

/// One system-wide recording at a time: they would see each other's
/// load (and the machine is small).
static RECORDING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// `perf record EVENTS -a -- napper` into `dir/name`.
fn record(
    perf: &str,
    dir: &Path,
    workload: &Path,
    name: &str,
    events: &[&str],
) -> Option<Recorded> {
    let data = dir.join(name);
    let _one = RECORDING.lock().unwrap_or_else(|e| e.into_inner());
    // --no-buildid: perf cannot collect build-ids while a profkit session
    // is open on this machine (and the import needs none here).
    let out = Command::new(perf)
        .args(["record", "-q", "--no-buildid"])
        .args(events)
        // 4 MiB a CPU: every switch of a busy machine is a record.
        .args(["-a", "-m", "1024", "-o"])
        .arg(&data)
        .arg("--")
        .arg(workload)
        .current_dir(dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let field = |key: &str| -> Option<u64> {
        stdout
            .split_whitespace()
            .find_map(|w| w.strip_prefix(key))
            .and_then(|v| v.parse().ok())
    };
    match (
        out.status.success() && data.exists(),
        field("pid="),
        field("sleep_ns="),
    ) {
        (true, Some(pid), Some(sleep_ns)) => Some(Recorded {
            data,
            pid: pid as u32,
            sleep_ns,
        }),
        _ => {
            skip(format!(
                "perf record {events:?} failed ({}): {} {stdout}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
            None
        }
    }
}

/// The workload's off-CPU intervals in an imported session.
#[derive(Debug, Default)]
struct Found {
    /// Blocked time of the workload's thread, all stacks.
    blocked_ns: u64,
    /// Of it, from a stack with a frame in the workload's binary.
    blocked_in_workload_ns: u64,
    /// Blocked intervals of the workload's thread from such stacks.
    blocked_in_workload: u64,
    /// Runnable (preempted) time of the workload's thread.
    runnable_ns: u64,
    /// OffCpu markers in the session (all tasks).
    markers: u64,
    /// Samples (on-CPU) in the session.
    samples: u64,
}

fn offcpu_of(session: &Path, workload: &Path, pid: u32) -> Found {
    let r = SessionReader::open(session).unwrap();
    assert!(r.header().event.off_cpu, "{:?}", r.header().event);
    // Off-CPU (5) and timed samples (6).
    assert_eq!(r.version(), 6);
    let table = r.stack_table();
    let mut prog = None;
    let mut offcpu = Vec::new();
    let mut found = Found::default();
    for c in r.chunks() {
        found.samples += r
            .for_each_sample(
                c,
                |_| {},
                |m| match m {
                    Event::CookieDef(e) if Path::new(&e.path) == workload => prog = Some(e.cookie),
                    e @ Event::OffCpu { .. } => offcpu.push(e),
                    _ => {}
                },
            )
            .unwrap();
    }
    let prog = prog.expect("the workload's cookie is defined");
    for e in offcpu {
        let Event::OffCpu {
            pid: p,
            tid,
            kind,
            stack,
            count,
            total_ns,
            ..
        } = e
        else {
            unreachable!()
        };
        found.markers += 1;
        if (p, tid) != (pid, pid) {
            continue;
        }
        match kind {
            OffCpuKind::Blocked => {
                found.blocked_ns += total_ns;
                let frames = stack.and_then(|id| table.get(id)).unwrap_or(&[]);
                if frames.iter().any(|f| !f.kernel && f.cookie == prog) {
                    found.blocked_in_workload_ns += total_ns;
                    found.blocked_in_workload += count;
                }
            }
            OffCpuKind::Runnable => found.runnable_ns += total_ns,
        }
    }
    found
}

/// Imports `rec` and checks the workload's blocked time against its own
/// measure; returns the summary and what was found.
fn import_and_check(
    dir: &Path,
    workload: &Path,
    rec: &Recorded,
    name: &str,
) -> (profkit_import::ImportSummary, Found) {
    let session = dir.join(format!("{name}/session.pkl"));
    let summary = profkit_import::import_perf_data(&rec.data, &session).unwrap();
    let found = offcpu_of(&session, workload, rec.pid);
    let r = SessionReader::open(&session).unwrap();
    let footer = r.footer().expect("a footer");
    let switch_outs: u64 = footer.accounting.iter().map(|a| a.offcpu_switches).sum();
    let data_bytes = std::fs::metadata(&rec.data).unwrap().len();
    let session_bytes = std::fs::metadata(&session).unwrap().len();
    // Every context switch is one switch-out and one switch-in record
    // (or one sched_switch sample, restated as both); idle's included.
    let switches = (summary.switches / 2).max(1);
    eprintln!(
        "{name}: {summary:?}\n{name}: {found:?}; the workload slept {} ns (nominal 400 ms)\n\
         {name}: {switches} context switches ({switch_outs} switch-outs of tasks): \
         perf.data {data_bytes} bytes ({:.1} bytes/switch), \
         session {session_bytes} bytes ({:.1} bytes/switch)",
        rec.sleep_ns,
        data_bytes as f64 / switches as f64,
        session_bytes as f64 / switches as f64,
    );
    assert_eq!(summary.bad_records, 0, "{summary:?}");
    assert!(
        summary.offcpu_samples > 0 && summary.switches > 0,
        "{summary:?}"
    );
    assert!(switch_outs > 20, "{switch_outs} switch-outs");
    // The program measured 20 sleeps of at least 20 ms.
    assert!(rec.sleep_ns >= 400_000_000, "{}", rec.sleep_ns);
    // The sleeps, blocked, from stacks that reach the workload's code.
    // (Its process may also have waited before it was the workload:
    // perf's child blocks on a pipe until perf has set up, and perf's
    // side-band event records that switch before the stack event is on:
    // a wait without a stack, or perf's.)
    let within = |ns: u64| (ns as f64 - rec.sleep_ns as f64).abs() <= rec.sleep_ns as f64 * 0.10;
    assert!(
        within(found.blocked_in_workload_ns),
        "{name}: {} ns blocked in the workload's stacks against {} ns slept: {found:?} {summary:?} {:?}",
        found.blocked_in_workload_ns,
        rec.sleep_ns,
        footer.accounting
    );
    assert!(
        found.blocked_in_workload >= 20,
        "{name}: {found:?} {summary:?}"
    );
    assert!(found.blocked_ns >= found.blocked_in_workload_ns);
    (summary, found)
}

#[test]
fn a_context_switch_recording_is_imported_as_off_cpu_intervals() {
    let Some(perf) = perf_bin() else { return };
    let d = tempfile::tempdir().unwrap();
    let Some(workload) = build_napper(d.path()) else {
        return;
    };
    let Some(rec) = record(
        &perf,
        d.path(),
        &workload,
        "cs.data",
        &["-e", "cs", "-c", "1", "-g", "--switch-events"],
    ) else {
        return;
    };
    let (summary, found) = import_and_check(d.path(), &workload, &rec, "cs");
    // Only the context-switch event: the header describes it.
    let r = SessionReader::open(d.path().join("cs/session.pkl")).unwrap();
    let ev = &r.header().event;
    assert_eq!((ev.type_, ev.config, ev.period), (1, 3, Some(1)), "{ev:?}");
    assert!(ev.callchain);
    assert_eq!(found.samples, 0, "{summary:?}");
}

#[test]
fn an_on_cpu_and_context_switch_recording_keeps_its_on_cpu_event() {
    let Some(perf) = perf_bin() else { return };
    let d = tempfile::tempdir().unwrap();
    let Some(workload) = build_napper(d.path()) else {
        return;
    };
    let Some(rec) = record(
        &perf,
        d.path(),
        &workload,
        "mixed.data",
        &[
            "-e",
            "cpu-clock/freq=4000/",
            "-e",
            "cs/period=1/",
            "-g",
            "--switch-events",
        ],
    ) else {
        return;
    };
    let (summary, found) = import_and_check(d.path(), &workload, &rec, "mixed");
    let r = SessionReader::open(d.path().join("mixed/session.pkl")).unwrap();
    let ev = &r.header().event;
    // cpu-clock's description, with the off-CPU flag.
    assert_eq!(
        (ev.type_, ev.config, ev.frequency, ev.off_cpu),
        (1, 0, Some(4000), true),
        "{ev:?}"
    );
    // cpu-clock's samples are on-CPU samples; the switch-out stacks are not.
    assert!(found.samples > 0, "{summary:?}");
    assert_eq!(
        summary.samples,
        summary.written + summary.offcpu_samples + summary.no_mapping + summary.no_task,
        "{summary:?}"
    );
}

/// The tracefs mount perf reads tracepoints through: mounted if it is
/// not (it is not by default on this test machine).
fn tracefs() -> bool {
    let format = Path::new("/sys/kernel/tracing/events/sched/sched_switch/format");
    if format.exists() {
        return true;
    }
    let out = Command::new("mount")
        .args(["-t", "tracefs", "nodev", "/sys/kernel/tracing"])
        .output();
    if format.exists() {
        return true;
    }
    skip(format!(
        "no sched:sched_switch tracepoint (mount -t tracefs: {:?})",
        out.map(|o| String::from_utf8_lossy(&o.stderr).trim().to_owned())
    ))
}

#[test]
fn a_sched_switch_recording_is_imported_as_off_cpu_intervals() {
    let Some(perf) = perf_bin() else { return };
    if !tracefs() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let Some(workload) = build_napper(d.path()) else {
        return;
    };
    let Some(rec) = record(
        &perf,
        d.path(),
        &workload,
        "sched.data",
        &["-e", "sched:sched_switch", "-g"],
    ) else {
        return;
    };
    let (summary, _) = import_and_check(d.path(), &workload, &rec, "sched");
    // Its format was read from the file; two switches per sample (a dead
    // task's has no switch-out), and those perf missed inferred.
    assert!(summary.warnings.is_empty(), "{:?}", summary.warnings);
    assert_eq!(
        summary.switches + summary.switches_dead,
        2 * summary.offcpu_samples + summary.switches_inferred,
        "{summary:?}"
    );
    let r = SessionReader::open(d.path().join("sched/session.pkl")).unwrap();
    let ev = &r.header().event;
    assert_eq!(
        (ev.type_, ev.name.as_str()),
        (2, "sched:sched_switch"),
        "{ev:?}"
    );
}

/// The same off-CPU records as SimRings (the live path: the sampled
/// rings, then the off-CPU rings, drained by one round) and as a perf.data
/// file of the `context-switches` event with its switch records
/// (`import_perf_data`) give byte-identical chunks and identical
/// accounting: blocked and runnable waits with their stacks, one without
/// (its stack sample missing), a switch-in with no wait open, a loss.
#[test]
fn off_cpu_records_as_simrings_and_as_perf_data_give_the_same_session() {
    use crate::perf_data::{self, RawRec, CONTEXT_SWITCHES};
    use profkit_perf::{
        Layout, Record, SampleId, SimRecord, SimRing, PERF_CONTEXT_KERNEL, PERF_CONTEXT_USER,
    };
    use profkit_sync::{SyncOptions, SyncStage};
    const KTEXT: u64 = 0xffff_ffff_8100_0000;
    const APP: u64 = 0x40_0000;
    let layout = Layout {
        callchain: true,
        user_stack: 0,
        cgroup: false,
    };
    let sim = |cpu: u32, r: SimRecord| r.encode(cpu, layout);
    let rec = |r: Record<'_>| -> RawRec {
        let mut body = Vec::new();
        let (k, m) = layout.encode(&r, &mut body);
        (k, m, body)
    };
    let id = |tid: u32, time: u64, cpu: u32| SampleId {
        pid: 100,
        tid,
        time,
        cpu,
    };
    let switch = |out: bool, preempt: bool, tid: u32, time: u64, cpu: u32| {
        rec(Record::Switch {
            out,
            preempt,
            next_prev: Some((0, 0)),
            sid: id(tid, time, cpu),
        })
    };
    // The switch-out's stack: in the kernel's schedule, called from the
    // app.
    let stack = |tid: u32, time: u64| SimRecord::Sample {
        ip: KTEXT + 0x1234,
        pid: 100,
        tid,
        time,
        kernel: true,
        period: 1,
        callchain: vec![
            PERF_CONTEXT_KERNEL,
            KTEXT + 0x1234,
            PERF_CONTEXT_USER,
            APP + 0x10,
            APP + 0x20,
        ],
    };
    let sampled: Vec<(u32, Vec<RawRec>)> = vec![(
        0,
        vec![
            sim(
                0,
                SimRecord::Mmap2 {
                    pid: u32::MAX,
                    tid: u32::MAX,
                    addr: KTEXT,
                    len: 0x100_0000,
                    pgoff: KTEXT,
                    ino: 0,
                    build_id: None,
                    prot: 5,
                    filename: "[kernel.kallsyms]_text".into(),
                    time: 10,
                },
            ),
            sim(
                0,
                SimRecord::Comm {
                    pid: 100,
                    tid: 100,
                    comm: "app".into(),
                    exec: true,
                    time: 20,
                },
            ),
            sim(
                0,
                SimRecord::Mmap2 {
                    pid: 100,
                    tid: 100,
                    addr: APP,
                    len: 0x10000,
                    pgoff: 0,
                    ino: 5,
                    build_id: None,
                    prot: 5,
                    filename: "/bin/app".into(),
                    time: 21,
                },
            ),
        ],
    )];
    let offcpu: Vec<(u32, Vec<RawRec>)> = vec![
        (
            0,
            vec![
                // 100 blocks at 101 (its stack at 100), 101 is preempted
                // at 301; 100 is back at 600.
                sim(0, stack(100, 100)),
                switch(true, false, 100, 101, 0),
                sim(0, stack(101, 300)),
                switch(true, true, 101, 301, 0),
                switch(false, false, 100, 600, 0),
            ],
        ),
        (
            1,
            vec![
                // 100 wakes here at 251, 101 at 400; 100 blocks again at
                // 500 (its stack sample lost); 102 comes in with no wait
                // open; 2 records lost.
                switch(false, false, 100, 251, 1),
                switch(false, false, 101, 400, 1),
                switch(true, false, 100, 500, 1),
                switch(false, false, 102, 550, 1),
                rec(Record::Lost {
                    id: 0,
                    lost: 2,
                    sid: id(0, 700, 1),
                }),
            ],
        ),
    ];
    let rings = |recs: &[(u32, Vec<RawRec>)]| -> Vec<SimRing> {
        recs.iter()
            .map(|(cpu, recs)| {
                let mut r = SimRing::new(*cpu, 1 << 20, layout);
                for (k, m, body) in recs {
                    assert!(r.push_raw(*k, *m, body));
                }
                r
            })
            .collect()
    };
    let mut stage = SyncStage::new(SyncOptions::new(layout));
    // One round that is also the session's last (as the import's is), at
    // the last record's time (the import's round time).
    stage.begin_round(700);
    for r in rings(&sampled).iter_mut() {
        stage.drain(r);
    }
    for r in rings(&offcpu).iter_mut() {
        stage.drain_offcpu(r);
    }
    let live = stage.finish_final_round();
    let live_acct = stage.accounting();

    let d = tempfile::tempdir().unwrap();
    let data = d.path().join("perf.data");
    let all: Vec<RawRec> = sampled
        .iter()
        .chain(&offcpu)
        .flat_map(|(_, r)| r.iter().cloned())
        .collect();
    perf_data::write_event(&data, CONTEXT_SWITCHES, layout.sample_type(), &all, &[]);
    let session = d.path().join("s/session.pkl");
    let summary = profkit_import::import_perf_data(&data, &session).unwrap();
    assert_eq!(
        (
            summary.samples,
            summary.offcpu_samples,
            summary.switches,
            summary.lost,
            summary.bad_records
        ),
        (2, 2, 7, 2, 0)
    );
    let r = SessionReader::open(&session).unwrap();
    assert!(r.header().event.off_cpu);
    assert_eq!(r.chunks().len(), 1);
    assert_eq!(
        r.payload(&r.chunks()[0]),
        live.bytes.as_slice(),
        "chunk bytes differ"
    );
    let acct = r.footer().unwrap().accounting.clone();
    assert_eq!(acct, live_acct);

    // And the session says what the records say.
    let total = |f: fn(&profkit_eventlog::CpuAccounting) -> u64| acct.iter().map(f).sum::<u64>();
    assert_eq!(
        (
            total(|a| a.offcpu_switches),
            total(|a| a.offcpu_intervals),
            total(|a| a.offcpu_no_stack),
            total(|a| a.offcpu_unpaired),
            total(|a| a.offcpu_lost)
        ),
        (3, 3, 1, 1, 2)
    );
    let table = r.stack_table();
    let mut got = Vec::new();
    r.for_each_sample(
        &r.chunks()[0],
        |_| {},
        |m| {
            if let Event::OffCpu {
                tid,
                cpu,
                kind,
                kernel,
                offset,
                stack,
                count,
                total_ns,
                ..
            } = m
            {
                let frames = stack.map(|s| table.get(s).unwrap().len());
                got.push((tid, cpu, kind, kernel, offset, frames, count, total_ns));
            }
        },
    )
    .unwrap();
    assert_eq!(
        got,
        [
            (100, 0, OffCpuKind::Blocked, true, 0x1234, Some(2), 1, 150),
            (100, 1, OffCpuKind::Blocked, true, 0, None, 1, 100),
            (101, 0, OffCpuKind::Runnable, true, 0x1234, Some(2), 1, 99),
        ]
    );
}
