//! Off-CPU reports (`--off-cpu`, `--wall`) on a session whose intervals
//! are known: every figure below is exact.

use super::*;

/// Kernel offsets (see `callgraph.rs`): `do_one_initcall` ("main"),
/// `schedule` ("a"), `arch_weak_hook` ("b"), `local_helper` ("c").
const MAIN_RET: u64 = 0x61;
const A_RET: u64 = 0x211;
const B_RET: u64 = 0x311;
const C_OFF: u64 = 0x390;
const SCHED_OFF: u64 = 0x250;

fn frame(offset: u64) -> Frame {
    Frame {
        cookie: KERNEL,
        offset,
        kernel: true,
    }
}

#[allow(clippy::too_many_arguments)]
fn off(
    cpu: u32,
    tid: u32,
    kind: OffCpuKind,
    cookie: Cookie,
    offset: u64,
    stack: Option<u32>,
    count: u64,
    total_ns: u64,
) -> Event {
    Event::OffCpu {
        cpu,
        pid: 10,
        tid,
        kind,
        kernel: true,
        cookie,
        offset,
        stack,
        cgroup: 0,
        count,
        total_ns,
    }
}

fn header(off_cpu: bool) -> SessionHeader {
    SessionHeader {
        host: "test".into(),
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
    }
}

fn defs(enc: &mut ChunkEncoder) {
    let kdef = CookieEntry {
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
    };
    enc.event(&Event::CookieDef(kdef.clone()));
    enc.event(&Event::CookieDef(CookieEntry {
        cookie: COOKIE_UNKNOWN,
        kind: CookieKind::Other,
        path: "[unknown]".into(),
        base: 0,
        ..kdef
    }));
    enc.event(&comm(10, 10, "app", true));
    enc.event(&comm(10, 11, "worker", false));
    enc.event(&Event::StackDef {
        id: 1,
        frames: vec![frame(A_RET), frame(MAIN_RET)],
    });
    enc.event(&Event::StackDef {
        id: 2,
        frames: vec![frame(B_RET), frame(MAIN_RET)],
    });
}

/// Thread 10: blocked 3 ms in local_helper ← schedule ← main (3
/// intervals), 0.5 ms with no stack recorded (second chunk), 5 samples
/// on CPU. Thread 11: blocked 1.5 ms in local_helper ← arch_weak_hook ←
/// main, runnable 2 ms in schedule ← schedule ← main, 2 samples. The
/// session is sampled at 1000 Hz: a sample is 1 ms.
pub(super) fn off_session(dir: &std::path::Path) -> PathBuf {
    let path = dir.join(SESSION_FILE);
    let mut w = SessionWriter::create(&path, &header(true)).unwrap();
    let mut enc = ChunkEncoder::new();
    defs(&mut enc);
    use OffCpuKind::{Blocked, Runnable};
    enc.event(&off(0, 10, Blocked, KERNEL, C_OFF, Some(1), 3, 3_000_000));
    enc.event(&off(1, 11, Blocked, KERNEL, C_OFF, Some(2), 1, 1_500_000));
    enc.event(&off(
        1,
        11,
        Runnable,
        KERNEL,
        SCHED_OFF,
        Some(1),
        2,
        2_000_000,
    ));
    for _ in 0..5 {
        enc.sample(0, 10, 10, true, KERNEL, SCHED_OFF);
    }
    w.append_chunk(0, 1_250_000_000, enc.bytes()).unwrap();
    let mut enc = ChunkEncoder::new();
    enc.event(&off(0, 10, Blocked, COOKIE_UNKNOWN, 0, None, 1, 500_000));
    for _ in 0..2 {
        enc.sample(1, 10, 11, true, KERNEL, SCHED_OFF);
    }
    w.append_chunk(1, 1_500_000_000, enc.bytes()).unwrap();
    w.write_footer(&SessionFooter {
        end_time_unix_ns: 1_795_379_395_600_000_000,
        end_monotonic_ns: 1_600_000_000,
        rounds: 2,
        accounting: vec![
            CpuAccounting {
                cpu: 0,
                samples_written: 5,
                offcpu_switches: 8,
                offcpu_intervals: 4,
                offcpu_no_stack: 1,
                ..Default::default()
            },
            CpuAccounting {
                cpu: 1,
                samples_written: 2,
                offcpu_switches: 6,
                offcpu_intervals: 3,
                offcpu_unpaired: 2,
                ..Default::default()
            },
        ],
    })
    .unwrap();
    path
}

fn opts(mode: OffCpuMode) -> ReportOptions {
    ReportOptions {
        off_cpu: Some(mode),
        symbols: true,
        ..Default::default()
    }
}

fn csv(r: &Report) -> String {
    let mut out = Vec::new();
    write_csv(r, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

fn json(r: &Report) -> serde_json::Value {
    let mut out = Vec::new();
    write_json(r, &mut out).unwrap();
    serde_json::from_slice(&out).unwrap()
}

#[test]
fn flat_view_counts_blocked_nanoseconds_and_shows_ms() {
    let d = tempfile::tempdir().unwrap();
    off_session(d.path());
    let r = report_with(d.path(), opts(OffCpuMode::Blocked));
    assert_eq!(r.header.total_samples, 5_000_000);
    assert_eq!(r.header.samples_read, 5_000_000);
    assert_eq!(
        rows(&r),
        [
            (
                "[kernel.kallsyms]".to_owned(),
                Some("local_helper".to_owned()),
                4_500_000
            ),
            (
                "[unknown]".to_owned(),
                Some("[unknown]".to_owned()),
                500_000
            ),
        ]
    );
    assert!((r.rows[0].percent[0] - 90.0).abs() < 1e-9);
    let t = text(&r);
    assert!(
        t.contains("Counted:  off-CPU time (blocked), ms: 5.000 in this report, 5.000 read"),
        "{t}"
    );
    assert!(
        t.contains(
            "Off-CPU:  14 switches, 7 intervals, 1 intervals without a stack, 2 unpaired \
             switch-ins\n"
        ),
        "{t}"
    );
    assert!(
        t.contains(
            "   ms         %  image name         symbol name\n\
             4.500   90.0000  [kernel.kallsyms]  local_helper\n\
             0.500   10.0000  [unknown]          [unknown]\n"
        ),
        "{t}"
    );
    assert!(!t.contains("Samples:"), "{t}");
}

#[test]
fn runnable_and_all_choose_the_intervals() {
    let d = tempfile::tempdir().unwrap();
    off_session(d.path());
    let r = report_with(d.path(), opts(OffCpuMode::Runnable));
    assert_eq!(
        rows(&r),
        [(
            "[kernel.kallsyms]".to_owned(),
            Some("schedule".to_owned()),
            2_000_000
        )]
    );
    assert!(text(&r).contains("off-CPU time (runnable: waiting for a CPU), ms: 2.000"));
    let r = report_with(d.path(), opts(OffCpuMode::All));
    assert_eq!(r.header.total_samples, 7_000_000);
}

#[test]
fn separate_thread_and_task_specs_split_the_time() {
    let d = tempfile::tempdir().unwrap();
    off_session(d.path());
    let r = report_with(
        d.path(),
        ReportOptions {
            separate: Separate::parse("thread").unwrap(),
            ..opts(OffCpuMode::Blocked)
        },
    );
    let per: Vec<(Option<u32>, Option<String>, u64)> = r
        .rows
        .iter()
        .map(|r| (r.tid(), r.symbol.clone(), r.total))
        .collect();
    assert_eq!(
        per,
        [
            (Some(10), Some("local_helper".to_owned()), 3_000_000),
            (Some(11), Some("local_helper".to_owned()), 1_500_000),
            (Some(10), Some("[unknown]".to_owned()), 500_000),
        ]
    );
    let t = text(&r);
    assert!(
        t.contains("1.500   30.0000    10   11  worker   [kernel.kallsyms]  local_helper\n"),
        "{t}"
    );
    let r = report_with(
        d.path(),
        ReportOptions {
            spec: ProfileSpec::parse(&["tid:11".to_owned()]).unwrap(),
            ..opts(OffCpuMode::Blocked)
        },
    );
    assert_eq!(r.header.total_samples, 1_500_000);
    assert_eq!(r.header.samples_read, 5_000_000, "read: before the spec");
    let r = report_with(
        d.path(),
        ReportOptions {
            separate: Separate::parse("cpu").unwrap(),
            ..opts(OffCpuMode::Blocked)
        },
    );
    assert_eq!(r.columns, [Column::Cpu(0), Column::Cpu(1)]);
    let helper = r
        .rows
        .iter()
        .find(|r| r.symbol.as_deref() == Some("local_helper"))
        .unwrap();
    assert_eq!(helper.samples[..], [3_000_000, 1_500_000]);
    assert_eq!(helper.percent[..], [3.0 / 3.5 * 100.0, 100.0]);
}

#[test]
fn call_graph_and_children_weigh_stacks_by_time() {
    let d = tempfile::tempdir().unwrap();
    off_session(d.path());
    let r = report_with(
        d.path(),
        ReportOptions {
            callgraph: true,
            ..opts(OffCpuMode::Blocked)
        },
    );
    let cg = r.callgraph.as_ref().unwrap();
    let entry = |name: &str| cg.entries.iter().find(|e| e.symbol == name).unwrap();
    let c = entry("local_helper");
    assert_eq!((c.self_samples, c.total), (4_500_000, 4_500_000));
    let callers: Vec<(&str, u64)> = c
        .callers
        .iter()
        .map(|a| (a.symbol.as_str(), a.samples))
        .collect();
    assert_eq!(
        callers,
        [("schedule", 3_000_000), ("arch_weak_hook", 1_500_000)]
    );
    let main = entry("do_one_initcall");
    assert_eq!((main.self_samples, main.total), (0, 4_500_000));
    let t = text(&r);
    assert!(
        t.contains(
            "ms              %  incl. ms        %  image name         symbol name\n\
             -------------------------------------------------------------------------------\n\
             \x20 3.000   66.6667                     [kernel.kallsyms]  schedule\n\
             \x20 1.500   33.3333                     [kernel.kallsyms]  arch_weak_hook\n\
             4.500     90.0000     4.500  90.0000  [kernel.kallsyms]  local_helper\n"
        ),
        "{t}"
    );

    let r = report_with(
        d.path(),
        ReportOptions {
            children: true,
            ..opts(OffCpuMode::Blocked)
        },
    );
    let main = r
        .rows
        .iter()
        .find(|r| r.symbol.as_deref() == Some("do_one_initcall"))
        .unwrap();
    assert_eq!((main.total, main.inclusive_total()), (0, 4_500_000));
    assert!((main.inclusive_total_percent() - 90.0).abs() < 1e-9);
    let c = csv(&r);
    assert!(
        c.starts_with(
            "off_cpu_ms,percent,cpu,tgid,tid,ns_tgid,ns_tid,comm,cgroup,app,image,symbol,vma,\
             location,inclusive_ms,inclusive_percent\n"
        ),
        "{c}"
    );
    assert!(
        c.contains("0.000,0.0000,,,,,,,,,[kernel.kallsyms],do_one_initcall,,,4.500,90.0000\n"),
        "{c}"
    );
}

#[test]
fn collapsed_stacks_weigh_microseconds_and_flame_graph_says_so() {
    let d = tempfile::tempdir().unwrap();
    off_session(d.path());
    let r = report_with(
        d.path(),
        ReportOptions {
            stacks: true,
            ..opts(OffCpuMode::All)
        },
    );
    let lines = collapsed_lines(&r, None).unwrap();
    assert_eq!(
        lines,
        [
            ("app;[unknown]".to_owned(), 500),
            (
                "app;do_one_initcall;arch_weak_hook;local_helper".to_owned(),
                1500
            ),
            ("app;do_one_initcall;schedule;local_helper".to_owned(), 3000),
            ("app;do_one_initcall;schedule;schedule".to_owned(), 2000),
        ]
    );
    let mut svg = Vec::new();
    write_flamegraph(&r, None, &mut svg).unwrap();
    let svg = String::from_utf8(svg).unwrap();
    assert!(svg.contains("Off-CPU Time Flame Graph"), "title");
    assert!(svg.contains("3,000 us"), "count name us");
}

#[test]
fn pprof_sample_type_is_off_cpu_nanoseconds() {
    let d = tempfile::tempdir().unwrap();
    off_session(d.path());
    let r = report_with(
        d.path(),
        ReportOptions {
            stacks: true,
            ..opts(OffCpuMode::Blocked)
        },
    );
    let p = pprof::to_profile(&r).unwrap();
    assert_eq!(p.sample_type.len(), 1);
    let st = &p.sample_type[0];
    assert_eq!(
        (p.string(st.r#type), p.string(st.unit)),
        ("off_cpu", "nanoseconds")
    );
    assert!(p.period_type.is_none());
    let total: i64 = p.sample.iter().map(|s| s.value[0]).sum();
    assert_eq!(total, 5_000_000);
}

#[test]
fn json_and_csv_say_the_unit() {
    let d = tempfile::tempdir().unwrap();
    off_session(d.path());
    let r = report_with(d.path(), opts(OffCpuMode::Blocked));
    let j = json(&r);
    assert_eq!(j["unit"], "ns");
    assert_eq!(j["off_cpu"], "blocked");
    assert_eq!(j["total_samples"], 5_000_000);
    assert_eq!(j["rows"][0]["samples"], 4_500_000);
    assert_eq!(j["off_cpu_accounting"]["switches"], 14);
    assert_eq!(j["off_cpu_accounting"]["unpaired"], 2);
    let c = csv(&r);
    assert!(c.starts_with("off_cpu_ms,percent,"), "{c}");
    assert!(c.contains("\n4.500,90.0000,"), "{c}");

    // A sample report of the same session: no unit, the accounting shown.
    let r = report_with(d.path(), ReportOptions::default());
    let j = json(&r);
    assert!(j.get("unit").is_none());
    assert_eq!(j["total_samples"], 7);
    assert_eq!(j["off_cpu_accounting"]["intervals"], 7);
    assert!(text(&r).contains("Samples:  7 in this report"));
    assert!(text(&r).contains("Off-CPU:  14 switches"));
}

#[test]
fn other_sessions_show_no_off_cpu_line_and_refuse_off_cpu() {
    let d = tempfile::tempdir().unwrap();
    standard(d.path(), true);
    let r = report_with(d.path(), ReportOptions::default());
    assert!(r.header.off_cpu_accounting.is_none());
    assert!(!text(&r).contains("Off-CPU"));
    assert!(json(&r).get("off_cpu_accounting").is_none());
    let s = Session::open(d.path()).unwrap();
    let e = build_report(
        std::slice::from_ref(&s),
        &opts(OffCpuMode::Blocked),
        &sources(),
        &NoProgress,
    )
    .unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, crate::Error::NoOffCpu { .. }));
    assert!(
        msg.contains("this session was recorded without --off-cpu")
            && msg.contains("record one with `profctl start --off-cpu`"),
        "{msg}"
    );
    let e = build_wall(&[s], &ReportOptions::default(), &NoProgress).unwrap_err();
    assert!(matches!(e, crate::Error::NoOffCpu { .. }));
    // --diff serializes headers: nothing new in them either.
    let d = diff_reports(&r, &r, 0.0);
    let mut out = Vec::new();
    write_diff(&d, Format::Json, &mut out).unwrap();
    assert!(!String::from_utf8(out).unwrap().contains("off_cpu"));
}

#[test]
fn wall_adds_on_cpu_blocked_and_runnable_per_thread() {
    let d = tempfile::tempdir().unwrap();
    off_session(d.path());
    let s = Session::open(d.path()).unwrap();
    let w = build_wall(&[s], &ReportOptions::default(), &NoProgress).unwrap();
    assert_eq!(w.ns_per_sample, Some(1_000_000));
    let row = |tid: u32, comm: &str, samples: u64, blocked_ns: u64, runnable_ns: u64| WallRow {
        tgid: 10,
        tid,
        comm: comm.to_owned(),
        samples,
        on_cpu_ns: Some(samples * 1_000_000),
        blocked_ns,
        runnable_ns,
        total_ns: samples * 1_000_000 + blocked_ns + runnable_ns,
    };
    assert_eq!(
        w.rows,
        [
            row(10, "app", 5, 3_500_000, 0),
            row(11, "worker", 2, 1_500_000, 2_000_000)
        ]
    );
    assert_eq!(
        (w.rows[0].total_ns, w.rows[1].total_ns),
        (8_500_000, 5_500_000)
    );
    let mut out = Vec::new();
    write_wall(&w, Format::Text, &mut out).unwrap();
    let t = String::from_utf8(out).unwrap();
    assert!(
        t.contains("on-CPU ms  blocked ms  runnable ms  total ms  tgid  tid  command"),
        "{t}"
    );
    assert!(
        t.contains("    5.000       3.500        0.000     8.500    10   10  app"),
        "{t}"
    );
    let mut out = Vec::new();
    write_wall(&w, Format::Csv, &mut out).unwrap();
    let c = String::from_utf8(out).unwrap();
    assert_eq!(
        c,
        "tgid,tid,comm,samples,on_cpu_ms,blocked_ms,runnable_ms,total_ms\n\
         10,10,app,5,5.000,3.500,0.000,8.500\n\
         10,11,worker,2,2.000,1.500,2.000,5.500\n"
    );
    let mut out = Vec::new();
    write_wall(&w, Format::Json, &mut out).unwrap();
    let j: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(j["unit"], "ns");
    assert_eq!(j["threads"][1]["runnable_ns"], 2_000_000);
    assert_eq!(j["threads"][0]["total_ns"], 8_500_000);
}

#[test]
fn wall_of_a_non_clock_event_counts_samples() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join(SESSION_FILE);
    let mut h = header(true);
    h.event.name = "cycles".into();
    let mut w = SessionWriter::create(&path, &h).unwrap();
    let mut enc = ChunkEncoder::new();
    defs(&mut enc);
    enc.event(&off(
        0,
        10,
        OffCpuKind::Blocked,
        KERNEL,
        C_OFF,
        Some(1),
        1,
        1_000_000,
    ));
    enc.sample(0, 10, 10, true, KERNEL, SCHED_OFF);
    w.append_chunk(0, 1_250_000_000, enc.bytes()).unwrap();
    drop(w);
    let s = Session::open(d.path()).unwrap();
    let w = build_wall(&[s], &ReportOptions::default(), &NoProgress).unwrap();
    assert_eq!(w.ns_per_sample, None);
    assert_eq!(w.rows[0].on_cpu_ns, None);
    assert_eq!(w.rows[0].total_ns, 1_000_000, "off-CPU time only");
    let mut out = Vec::new();
    write_wall(&w, Format::Text, &mut out).unwrap();
    let t = String::from_utf8(out).unwrap();
    assert!(t.contains("cycles samples are not a time"), "{t}");
    assert!(t.contains("on-CPU samples  blocked ms"), "{t}");
}

#[test]
fn merge_diff_and_time_windows_work_on_time() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    off_session(a.path());
    off_session(b.path());
    let sa = Session::open(a.path()).unwrap();
    let sb = Session::open(b.path()).unwrap();
    let r = build_report(
        &[sa, sb],
        &opts(OffCpuMode::Blocked),
        &sources(),
        &NoProgress,
    )
    .unwrap();
    assert_eq!(r.header.total_samples, 10_000_000);
    assert_eq!(r.rows[0].total, 9_000_000);

    let old = report_with(a.path(), opts(OffCpuMode::Blocked));
    let new = report_with(b.path(), opts(OffCpuMode::Blocked));
    let d = diff_reports(&old, &new, 0.0);
    assert!(d.rows.iter().all(|r| r.change == 0.0));
    let mut out = Vec::new();
    write_diff(&d, Format::Text, &mut out).unwrap();
    let t = String::from_utf8(out).unwrap();
    assert!(t.contains("(off-CPU time (blocked): 5.000 ms)"), "{t}");
    assert!(t.contains("old ms"), "{t}");

    // The first round only (0 to 0.25 s): the interval of the second
    // chunk is outside.
    let s = Session::open_window(a.path(), Some(&TimeSpec::parse("0,0.25").unwrap())).unwrap();
    let r = build_report(
        &[s],
        &ReportOptions {
            time: Some(TimeSpec::parse("0,0.25").unwrap()),
            ..opts(OffCpuMode::Blocked)
        },
        &sources(),
        &NoProgress,
    )
    .unwrap();
    assert_eq!(r.header.total_samples, 4_500_000);
}

/// Forged markers: every count and time at u64::MAX, many of them, in
/// every view. Nothing overflows; the total stops at the report's bound
/// and a warning says why.
#[test]
fn hostile_weights_saturate_and_are_said() {
    let d = tempfile::tempdir().unwrap();
    let path = d.path().join(SESSION_FILE);
    let mut w = SessionWriter::create(&path, &header(true)).unwrap();
    for round in 0..4u64 {
        let mut enc = ChunkEncoder::new();
        if round == 0 {
            defs(&mut enc);
        }
        for i in 0..500u64 {
            let kind = if i % 2 == 0 {
                OffCpuKind::Blocked
            } else {
                OffCpuKind::Runnable
            };
            let stack = [Some(1), Some(2), None][i as usize % 3];
            enc.event(&off(
                (i % 2) as u32,
                10 + (i % 2) as u32,
                kind,
                KERNEL,
                C_OFF + i % 7,
                stack,
                u64::MAX,
                u64::MAX,
            ));
        }
        w.append_chunk(round, 1_250_000_000 + round * 250_000_000, enc.bytes())
            .unwrap();
    }
    w.write_footer(&SessionFooter {
        accounting: vec![
            CpuAccounting {
                cpu: 0,
                offcpu_switches: u64::MAX,
                offcpu_intervals: u64::MAX,
                ..Default::default()
            };
            3
        ],
        ..Default::default()
    })
    .unwrap();
    drop(w);
    for mode in [OffCpuMode::Blocked, OffCpuMode::All] {
        for extra in [
            ReportOptions::default(),
            ReportOptions {
                callgraph: true,
                children: true,
                ..Default::default()
            },
            ReportOptions {
                stacks: true,
                separate: Separate::parse("cpu").unwrap(),
                ..Default::default()
            },
            ReportOptions {
                separate: Separate::parse("thread").unwrap(),
                global_percent: true,
                ..Default::default()
            },
        ] {
            let r = report_with(
                d.path(),
                ReportOptions {
                    off_cpu: Some(mode),
                    symbols: true,
                    ..extra
                },
            );
            assert_eq!(r.header.total_samples, 1 << 62);
            assert!(
                r.warnings.iter().any(|w| w.contains("not plausible")),
                "{:?}",
                r.warnings
            );
            text(&r);
            json(&r);
            csv(&r);
            if r.stacks.is_some() {
                collapsed_lines(&r, None).unwrap();
                let mut out = Vec::new();
                write_flamegraph(&r, Some(0), &mut out).unwrap();
                pprof::to_profile(&r).unwrap();
            }
            assert!(r.header.off_cpu_accounting.unwrap().switches == u64::MAX);
        }
    }
    let s = Session::open(d.path()).unwrap();
    let w = build_wall(&[s], &ReportOptions::default(), &NoProgress).unwrap();
    let times: Vec<(u32, u64, u64)> = w
        .rows
        .iter()
        .map(|r| (r.tid, r.blocked_ns, r.runnable_ns))
        .collect();
    assert_eq!(times, [(10, 1 << 62, 0), (11, 0, 1 << 62)]);
    assert!(w.warnings.iter().any(|w| w.contains("not plausible")));
    let mut out = Vec::new();
    write_wall(&w, Format::Text, &mut out).unwrap();
}

#[test]
fn timeline_and_annotate_do_not_go_with_off_cpu() {
    let d = tempfile::tempdir().unwrap();
    off_session(d.path());
    let s = Session::open(d.path()).unwrap();
    for o in [
        ReportOptions {
            timeline: Some(1),
            ..opts(OffCpuMode::Blocked)
        },
        ReportOptions {
            annotate: Some(AnnotateOptions::default()),
            ..opts(OffCpuMode::Blocked)
        },
    ] {
        let e = build_report(std::slice::from_ref(&s), &o, &sources(), &NoProgress).unwrap_err();
        assert!(matches!(e, crate::Error::Conflict(_)), "{e}");
    }
}

/// A rotated session: each part numbers its stacks anew, and off-CPU
/// intervals find their own part's stack.
#[test]
fn rotated_parts_keep_their_own_stacks() {
    let d = tempfile::tempdir().unwrap();
    let mut event = super::parts::flat_event();
    event.callchain = true;
    event.off_cpu = true;
    let mut first = Vec::new();
    defs_into(&mut first);
    first.push(Event::StackDef {
        id: 1,
        frames: vec![frame(A_RET), frame(MAIN_RET)],
    });
    first.push(off(
        0,
        10,
        OffCpuKind::Blocked,
        KERNEL,
        C_OFF,
        Some(1),
        1,
        1_000_000,
    ));
    let mut second = Vec::new();
    defs_into(&mut second);
    second.push(Event::StackDef {
        id: 1,
        frames: vec![frame(B_RET), frame(MAIN_RET)],
    });
    second.push(off(
        0,
        10,
        OffCpuKind::Blocked,
        KERNEL,
        C_OFF,
        Some(1),
        1,
        2_000_000,
    ));
    super::parts::write_part(d.path(), 1, false, &event, &[(first, vec![])], true);
    super::parts::write_part(d.path(), 2, true, &event, &[(second, vec![])], true);
    let r = report_with(
        d.path(),
        ReportOptions {
            stacks: true,
            ..opts(OffCpuMode::Blocked)
        },
    );
    assert_eq!(
        collapsed_lines(&r, None).unwrap(),
        [
            (
                "app;do_one_initcall;arch_weak_hook;local_helper".to_owned(),
                2000
            ),
            ("app;do_one_initcall;schedule;local_helper".to_owned(), 1000),
        ]
    );
}

/// [`defs`] as events.
fn defs_into(out: &mut Vec<Event>) {
    let mut enc = ChunkEncoder::new();
    defs(&mut enc);
    for e in ChunkDecoder::new(enc.bytes()) {
        let e = e.unwrap();
        if !matches!(e, Event::StackDef { .. }) {
            out.push(e);
        }
    }
}
