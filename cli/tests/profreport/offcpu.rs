//! `profreport --off-cpu` and `--wall` on a session written here, whose
//! off-CPU intervals are known: every figure is exact.

use std::path::Path;

use profkit_eventlog::*;

use crate::util::*;

const KERNEL: Cookie = 0xc;
const KBASE: u64 = 0xffff_ffff_a000_0000;
/// In testdata/symbols/kallsyms: `local_helper`, `schedule`, return
/// addresses in `schedule` and `do_one_initcall`.
const HELPER: u64 = 0x390;
const SCHEDULE: u64 = 0x250;
const SCHEDULE_RET: u64 = 0x211;
const MAIN_RET: u64 = 0x61;
const KALLSYMS: &str = "../testdata/symbols/kallsyms";

fn frame(offset: u64) -> Frame {
    Frame {
        cookie: KERNEL,
        offset,
        kernel: true,
    }
}

fn interval(tid: u32, kind: OffCpuKind, offset: u64, stack: Option<u32>, ns: u64) -> Event {
    Event::OffCpu {
        cpu: tid % 2,
        pid: 10,
        tid,
        kind,
        kernel: true,
        cookie: KERNEL,
        offset,
        stack,
        cgroup: 0,
        count: 1,
        total_ns: ns,
    }
}

/// Thread 10 ("app"): blocked 3 ms in local_helper ← schedule ←
/// do_one_initcall, 4 samples on CPU at 1000 Hz (4 ms). Thread 11
/// ("worker"): blocked 1 ms in local_helper (no callers), runnable 2 ms
/// in schedule. With `off_cpu` false: the same samples, no intervals.
fn write_session(dir: &Path, off_cpu: bool) {
    let header = SessionHeader {
        event: EventConfigDesc {
            name: "cpu-clock".into(),
            frequency: Some(1000),
            callchain: true,
            off_cpu,
            ..Default::default()
        },
        cpus: vec![0, 1],
        start_time_unix_ns: 1_795_379_395_000_000_000,
        start_monotonic_ns: 1_000_000_000,
        sync_interval_ms: 250,
        target: "command app".into(),
        ..Default::default()
    };
    let mut w = SessionWriter::create(dir.join("session.pkl"), &header).unwrap();
    let mut enc = ChunkEncoder::new();
    enc.event(&Event::CookieDef(CookieEntry {
        cookie: KERNEL,
        kind: CookieKind::Kernel,
        path: "[kernel.kallsyms]".into(),
        build_id: None,
        dev: 0,
        inode: 0,
        generation: 0,
        base: KBASE,
        pid: None,
        file: Default::default(),
    }));
    for (tid, name) in [(10, "app"), (11, "worker")] {
        enc.event(&Event::Comm {
            pid: 10,
            tid,
            exec: tid == 10,
            comm: name.into(),
            ns: None,
        });
    }
    enc.event(&Event::StackDef {
        id: 1,
        frames: vec![frame(SCHEDULE_RET), frame(MAIN_RET)],
    });
    if off_cpu {
        enc.event(&interval(
            10,
            OffCpuKind::Blocked,
            HELPER,
            Some(1),
            3_000_000,
        ));
        enc.event(&interval(11, OffCpuKind::Blocked, HELPER, None, 1_000_000));
        enc.event(&interval(
            11,
            OffCpuKind::Runnable,
            SCHEDULE,
            None,
            2_000_000,
        ));
    }
    for _ in 0..4 {
        enc.sample(0, 10, 10, true, KERNEL, SCHEDULE);
    }
    w.append_chunk(0, 1_250_000_000, enc.bytes()).unwrap();
    w.write_footer(&SessionFooter {
        end_time_unix_ns: 1_795_379_395_500_000_000,
        end_monotonic_ns: 1_500_000_000,
        rounds: 1,
        accounting: vec![CpuAccounting {
            cpu: 0,
            samples_written: 4,
            offcpu_switches: if off_cpu { 6 } else { 0 },
            offcpu_intervals: if off_cpu { 3 } else { 0 },
            offcpu_lost: if off_cpu { 2 } else { 0 },
            ..Default::default()
        }],
    })
    .unwrap();
}

fn run(dir: &Path, args: &[&str]) -> Run {
    let mut all = vec![
        "--session-dir".to_owned(),
        dir.display().to_string(),
        "--kallsyms".to_owned(),
        KALLSYMS.to_owned(),
        "--no-progress".to_owned(),
    ];
    all.extend(args.iter().map(|s| s.to_string()));
    profreport(&all)
}

#[test]
fn off_cpu_symbols_show_blocked_ms() {
    let d = tempdir();
    write_session(d.path(), true);
    let r = run(d.path(), &["--off-cpu", "-l"]).expect(0);
    assert!(
        r.stdout
            .contains("Counted:  off-CPU time (blocked), ms: 4.000 in this report, 4.000 read\n"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout
            .contains("Off-CPU:  6 switches, 3 intervals, 2 switch records lost\n"),
        "{}",
        r.stdout
    );
    assert!(
        r.stdout.contains(
            "   ms         %  image name         symbol name\n\
             4.000  100.0000  [kernel.kallsyms]  local_helper\n"
        ),
        "{}",
        r.stdout
    );
}

#[test]
fn off_cpu_kinds_json_and_csv() {
    let d = tempdir();
    write_session(d.path(), true);
    let j = run(d.path(), &["--off-cpu=runnable", "-l", "--format", "json"])
        .expect(0)
        .json();
    assert_eq!(j["unit"], "ns");
    assert_eq!(j["off_cpu"], "runnable");
    assert_eq!(j["total_samples"], 2_000_000);
    assert_eq!(rows(&j)[0]["symbol"], "schedule");
    let c = run(
        d.path(),
        &[
            "--off-cpu=all",
            "--separate=thread",
            "-l",
            "--format",
            "csv",
        ],
    )
    .expect(0);
    let lines: Vec<&str> = c.stdout.lines().collect();
    assert!(lines[0].starts_with("off_cpu_ms,percent,"), "{}", c.stdout);
    assert_eq!(lines.len(), 4, "{}", c.stdout);
    assert!(
        lines[1].starts_with("3.000,50.0000,,10,10,,,app,"),
        "{}",
        c.stdout
    );
}

#[test]
fn off_cpu_collapsed_stacks_are_microseconds() {
    let d = tempdir();
    write_session(d.path(), true);
    let r = run(d.path(), &["--off-cpu=all", "--format", "collapsed"]).expect(0);
    assert_eq!(
        r.stdout,
        "app;do_one_initcall;schedule;local_helper 3000\n\
         app;local_helper 1000\n\
         app;schedule 2000\n"
    );
}

#[test]
fn wall_adds_up_each_thread() {
    let d = tempdir();
    write_session(d.path(), true);
    let r = run(d.path(), &["--wall", "--format", "csv"]).expect(0);
    assert_eq!(
        r.stdout,
        "tgid,tid,comm,samples,on_cpu_ms,blocked_ms,runnable_ms,total_ms\n\
         10,10,app,4,4.000,3.000,0.000,7.000\n\
         10,11,worker,0,0.000,1.000,2.000,3.000\n"
    );
    let t = run(d.path(), &["--wall"]).expect(0);
    assert!(
        t.stdout
            .contains("on-CPU ms  blocked ms  runnable ms  total ms  tgid  tid  command\n"),
        "{}",
        t.stdout
    );
    run(d.path(), &["--wall", "--format", "collapsed"]).expect(2);
    run(d.path(), &["--wall", "--off-cpu"]).expect(2);
}

#[test]
fn a_session_without_off_cpu_says_how_to_record_one() {
    let d = tempdir();
    write_session(d.path(), false);
    for args in [&["--off-cpu"][..], &["--wall"]] {
        let r = run(d.path(), args).expect(1);
        assert!(
            r.stderr
                .contains("this session was recorded without --off-cpu")
                && r.stderr.contains("profctl start --off-cpu"),
            "{}",
            r.stderr
        );
    }
    // The plain report of it says nothing of off-CPU time.
    let r = run(d.path(), &["-l"]).expect(0);
    assert!(!r.stdout.contains("Off-CPU"), "{}", r.stdout);
    assert!(
        r.stdout.contains("Samples:  4 in this report"),
        "{}",
        r.stdout
    );
}

#[test]
fn bad_off_cpu_kind_is_a_usage_error() {
    let d = tempdir();
    write_session(d.path(), true);
    let r = run(d.path(), &["--off-cpu=sleepy"]).expect(2);
    assert!(
        r.stderr.contains("blocked, runnable or all"),
        "{}",
        r.stderr
    );
}
