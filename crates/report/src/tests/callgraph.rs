//! Call graphs and the formats drawn from stacks, and --diff.

use super::*;

/// Kernel offsets (from `_text` in testdata/symbols/kallsyms) inside
/// `do_one_initcall` ("main"), `schedule` ("a"), `arch_weak_hook` ("b")
/// and `local_helper` ("c"). Frames are return addresses: the function
/// is found at offset − 1.
const MAIN_RET: u64 = 0x61;
const A_RET: u64 = 0x211;
const B_RET: u64 = 0x311;
const C_OFF: u64 = 0x390;

fn frame(offset: u64) -> Frame {
    Frame {
        cookie: KERNEL,
        offset,
        kernel: true,
    }
}

/// main → a → c (10 samples), main → b → c (20, split over two chunks,
/// the second chunk's stack defined only in the first), main itself (5),
/// and one sample whose caller is `[unknown]`.
fn call_session(dir: &std::path::Path) -> PathBuf {
    call_session_and(dir, |_| {})
}

/// [`call_session`], and more chunks `more` writes.
fn call_session_and(dir: &std::path::Path, more: impl FnOnce(&mut SessionWriter)) -> PathBuf {
    let header = SessionHeader {
        host: "test".into(),
        event: EventConfigDesc {
            name: "cpu-clock".into(),
            frequency: Some(1000),
            callchain: true,
            user_stack: 0,
            ..Default::default()
        },
        cpus: vec![0, 1],
        start_time_unix_ns: 1_795_379_395_000_000_000,
        start_monotonic_ns: 1_000_000_000,
        target: "command app".into(),
        ..Default::default()
    };
    let path = dir.join(SESSION_FILE);
    let mut w = SessionWriter::create(&path, &header).unwrap();
    let mut kdef = CookieEntry {
        cookie: KERNEL,
        kind: CookieKind::Kernel,
        path: "[kernel.kallsyms]".into(),
        build_id: Some(vec![0xab, 0xcd, 0x01]),
        dev: 0,
        inode: 0,
        generation: 0,
        base: KBASE,
        pid: None,
        file: Default::default(),
    };
    let mut enc = ChunkEncoder::new();
    enc.event(&Event::CookieDef(kdef.clone()));
    enc.event(&Event::CookieDef(CookieEntry {
        cookie: COOKIE_UNKNOWN,
        kind: CookieKind::Other,
        path: "[unknown]".into(),
        build_id: None,
        ..kdef.clone()
    }));
    enc.event(&comm(10, 10, "app", true));
    enc.event(&Event::StackDef {
        id: 1,
        frames: vec![frame(A_RET), frame(MAIN_RET)],
    });
    enc.event(&Event::StackDef {
        id: 2,
        frames: vec![frame(B_RET), frame(MAIN_RET)],
    });
    enc.event(&Event::StackDef {
        id: 3,
        frames: vec![Frame {
            cookie: COOKIE_UNKNOWN,
            offset: 0,
            kernel: true,
        }],
    });
    for i in 0..10 {
        enc.sample_with_stack(0, 10, 10, true, KERNEL, C_OFF + i % 3, 1);
    }
    for _ in 0..12 {
        enc.sample_with_stack(1, 10, 10, true, KERNEL, C_OFF, 2);
    }
    for _ in 0..5 {
        enc.sample(0, 10, 10, true, KERNEL, MAIN_RET + 4);
    }
    enc.sample_with_stack(0, 10, 10, true, KERNEL, 0x220, 3);
    w.append_chunk(0, 1_100_000_000, enc.bytes()).unwrap();
    let mut enc = ChunkEncoder::new();
    kdef.build_id = None; // a repeated definition: the first wins
    for _ in 0..8 {
        enc.sample_with_stack(1, 10, 10, true, KERNEL, C_OFF + 8, 2);
    }
    w.append_chunk(1, 1_200_000_000, enc.bytes()).unwrap();
    more(&mut w);
    path
}

fn call_report(dir: &std::path::Path, opts: ReportOptions) -> Report {
    report_with(dir, opts)
}

#[test]
fn callgraph_splits_callers_and_counts_inclusive_samples() {
    let d = tempfile::tempdir().unwrap();
    call_session(d.path());
    let r = call_report(
        d.path(),
        ReportOptions {
            callgraph: true,
            ..Default::default()
        },
    );
    assert_eq!(r.header.total_samples, 36);
    let cg = r.callgraph.as_ref().unwrap();
    let entry = |name: &str| cg.entries.iter().find(|e| e.symbol == name).unwrap();
    let c = entry("local_helper");
    assert_eq!((c.self_samples, c.total), (30, 30));
    let callers: Vec<(&str, u64)> = c
        .callers
        .iter()
        .map(|a| (a.symbol.as_str(), a.samples))
        .collect();
    assert_eq!(callers, [("arch_weak_hook", 20), ("schedule", 10)]);
    assert!((c.callers[0].percent - 200.0 / 3.0).abs() < 1e-9);
    assert!(c.callees.is_empty());
    let main = entry("do_one_initcall");
    assert_eq!((main.self_samples, main.total), (5, 35));
    let callees: Vec<(&str, u64)> = main
        .callees
        .iter()
        .map(|a| (a.symbol.as_str(), a.samples))
        .collect();
    assert_eq!(callees, [("arch_weak_hook", 20), ("schedule", 10)]);
    assert!(main.callers.is_empty(), "the outermost frame has no caller");
    // schedule: 10 via the stack as a caller of c, plus 1 sampled itself
    // (with an [unknown] caller).
    let a = entry("schedule");
    assert_eq!((a.self_samples, a.total), (1, 11));
    assert_eq!(a.callers[0].symbol, "do_one_initcall");
    assert_eq!(a.callers[1].symbol, "[unknown]");
    // Sorted by self samples.
    assert_eq!(cg.entries[0].symbol, "local_helper");

    let t = text(&r);
    assert!(t.contains("local_helper [self]"), "{t}");
    assert!(
        t.lines().any(|l| l.starts_with("  20 ")
            && l.contains(" 66.6667 ")
            && l.ends_with("arch_weak_hook")),
        "{t}"
    );
}

#[test]
fn children_adds_inclusive_rows_for_callers() {
    let d = tempfile::tempdir().unwrap();
    call_session(d.path());
    let r = call_report(
        d.path(),
        ReportOptions {
            children: true,
            ..Default::default()
        },
    );
    assert!(r.shown.inclusive && r.shown.symbols);
    let got: Vec<(&str, u64, u64)> = r
        .rows
        .iter()
        .map(|r| (r.symbol.as_deref().unwrap(), r.total, r.inclusive_total()))
        .collect();
    assert_eq!(
        got,
        [
            ("do_one_initcall", 5, 35),
            ("local_helper", 30, 30),
            ("arch_weak_hook", 0, 20),
            ("schedule", 1, 11),
            ("[unknown]", 0, 1),
        ]
    );
    let b = r.rows.iter().find(|r| r.inclusive_total() == 20).unwrap();
    assert!((b.inclusive_total_percent() - 2000.0 / 36.0).abs() < 1e-9);
    // Threshold cuts by inclusive share.
    let r = call_report(
        d.path(),
        ReportOptions {
            children: true,
            threshold: 50.0,
            ..Default::default()
        },
    );
    assert_eq!(r.rows.len(), 3);
    assert_eq!(r.rows_below_threshold, 2);
    // Per CPU columns: inclusive per column.
    let r = call_report(
        d.path(),
        ReportOptions {
            children: true,
            separate: Separate::parse("cpu").unwrap(),
            ..Default::default()
        },
    );
    let main = r
        .rows
        .iter()
        .find(|r| r.symbol.as_deref() == Some("do_one_initcall"))
        .unwrap();
    assert_eq!(main.inclusive_samples(), [15, 20]);
    assert_eq!(main.samples[..], [5, 0]);
}

#[test]
fn stacks_do_not_change_the_flat_profile() {
    let d = tempfile::tempdir().unwrap();
    call_session(d.path());
    let flat = call_report(
        d.path(),
        ReportOptions {
            symbols: true,
            ..Default::default()
        },
    );
    let with = call_report(
        d.path(),
        ReportOptions {
            symbols: true,
            stacks: true,
            ..Default::default()
        },
    );
    assert_eq!(rows(&flat), rows(&with));
    assert!(flat.stacks.is_none());
    assert_eq!(with.stacks.as_ref().unwrap().total(), 36);
}

#[test]
fn callgraph_conflicts_with_thread_separation() {
    let d = tempfile::tempdir().unwrap();
    call_session(d.path());
    let s = Session::open(d.path()).unwrap();
    let e = build_report(
        &[s],
        &ReportOptions {
            callgraph: true,
            separate: Separate::parse("thread").unwrap(),
            ..Default::default()
        },
        &sources(),
        &NoProgress,
    )
    .unwrap_err();
    assert!(e.to_string().contains("--separate=thread"), "{e}");
}

/// Asking for cgroups or inlined frames of a session that cannot have
/// them says so instead of showing `[none]` or nothing different.
#[test]
fn cgroups_and_inline_asked_of_a_session_without_them_say_so() {
    let d = tempfile::tempdir().unwrap();
    standard(d.path(), true);
    let mut opts = ReportOptions {
        inline: true,
        ..Default::default()
    };
    opts.separate.cgroup = true;
    let r = report_with(d.path(), opts);
    for want in ["profctl start --cgroups", "--inline expands call stacks"] {
        assert!(
            r.warnings.iter().any(|w| w.contains(want)),
            "{want}: {:?}",
            r.warnings
        );
    }
}

#[test]
fn a_session_without_stacks_says_so() {
    let d = tempfile::tempdir().unwrap();
    standard(d.path(), true);
    let r = report_with(
        d.path(),
        ReportOptions {
            callgraph: true,
            ..Default::default()
        },
    );
    assert!(
        r.warnings.iter().any(|w| w.contains("record with")),
        "{:?}",
        r.warnings
    );
    // Every function is its own root.
    let cg = r.callgraph.unwrap();
    assert!(cg.entries.iter().all(|e| e.callers.is_empty()));
}

#[test]
fn collapsed_stacks_are_folded_outermost_first() {
    let d = tempfile::tempdir().unwrap();
    call_session(d.path());
    let r = call_report(
        d.path(),
        ReportOptions {
            stacks: true,
            ..Default::default()
        },
    );
    let mut out = Vec::new();
    render(&r, Format::Collapsed, &mut out).unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "app;[unknown];schedule 1\n\
         app;do_one_initcall 5\n\
         app;do_one_initcall;arch_weak_hook;local_helper 20\n\
         app;do_one_initcall;schedule;local_helper 10\n"
    );
    // One CPU's lines only.
    let r = call_report(
        d.path(),
        ReportOptions {
            stacks: true,
            separate: Separate::parse("cpu").unwrap(),
            ..Default::default()
        },
    );
    let lines = collapsed_lines(&r, Some(1)).unwrap();
    assert_eq!(
        lines,
        [(
            "app;do_one_initcall;arch_weak_hook;local_helper".to_owned(),
            20
        )]
    );
}

#[test]
fn flame_graph_is_an_svg_with_every_function() {
    let d = tempfile::tempdir().unwrap();
    call_session(d.path());
    let r = call_report(
        d.path(),
        ReportOptions {
            stacks: true,
            ..Default::default()
        },
    );
    let mut out = Vec::new();
    render(&r, Format::Flamegraph, &mut out).unwrap();
    let svg = String::from_utf8(out).unwrap();
    assert!(svg.starts_with("<?xml"));
    for f in [
        "do_one_initcall",
        "arch_weak_hook",
        "schedule",
        "local_helper",
    ] {
        assert!(svg.contains(&format!("<title>{f} (")), "{f} missing");
    }
}

#[test]
fn pprof_round_trips_with_names_totals_and_build_ids() {
    let d = tempfile::tempdir().unwrap();
    call_session(d.path());
    let r = call_report(
        d.path(),
        ReportOptions {
            stacks: true,
            ..Default::default()
        },
    );
    let mut out = Vec::new();
    render(&r, Format::Pprof, &mut out).unwrap();
    assert_eq!(&out[..2], &[0x1f, 0x8b], "gzip");
    let p = pprof::read_pprof(&out).unwrap();
    assert_eq!(p.string_table[0], "");
    let types: Vec<(&str, &str)> = p
        .sample_type
        .iter()
        .map(|t| (p.string(t.r#type), p.string(t.unit)))
        .collect();
    assert_eq!(types, [("samples", "count"), ("cpu", "nanoseconds")]);
    assert_eq!(p.period, 1_000_000);
    let total: i64 = p.sample.iter().map(|s| s.value[0]).sum();
    let nanos: i64 = p.sample.iter().map(|s| s.value[1]).sum();
    assert_eq!((total, nanos), (36, 36_000_000));
    let kernel = p
        .mapping
        .iter()
        .find(|m| p.string(m.filename) == "[kernel.kallsyms]")
        .unwrap();
    assert_eq!(p.string(kernel.build_id), "abcd01");
    assert_eq!(kernel.memory_start, KBASE);
    // Self samples per function, from the leaf location, as the text report.
    let name_of_loc = |id: u64| {
        let l = &p.location[id as usize - 1];
        assert_eq!(l.id, id);
        let f = &p.function[l.line[0].function_id as usize - 1];
        p.string(f.name).to_owned()
    };
    let mut own: std::collections::BTreeMap<String, i64> = Default::default();
    for s in &p.sample {
        *own.entry(name_of_loc(s.location_id[0])).or_default() += s.value[0];
    }
    let flat: std::collections::BTreeMap<String, i64> = r
        .rows
        .iter()
        .map(|r| (r.symbol.clone().unwrap(), r.total as i64))
        .collect();
    assert_eq!(own, flat);
    // Addresses are kernel addresses: _text + offset (− 1 for callers).
    let c = p
        .location
        .iter()
        .find(|l| l.address == KBASE + C_OFF)
        .expect("the sampled location of local_helper");
    assert_eq!(c.mapping_id, kernel.id);
    assert!(p.location.iter().any(|l| l.address == KBASE + A_RET - 1));
}

#[test]
fn diff_sorts_by_absolute_change_in_share() {
    let d = tempfile::tempdir().unwrap();
    let old_dir = d.path().join("old");
    let new_dir = d.path().join("new");
    std::fs::create_dir_all(&old_dir).unwrap();
    std::fs::create_dir_all(&new_dir).unwrap();
    let k = |name, kind, base| def(KERNEL, kind, name, base, None);
    write_session(
        &old_dir,
        &[(
            vec![k("[kernel.kallsyms]", CookieKind::Kernel, KBASE)],
            vec![
                (0, 1, 1, true, KERNEL, 0x60, 50),
                (0, 1, 1, true, KERNEL, 0x210, 50),
            ],
        )],
        None,
    );
    write_session(
        &new_dir,
        &[(
            vec![k("[kernel.kallsyms]", CookieKind::Kernel, KBASE)],
            vec![
                (0, 1, 1, true, KERNEL, 0x60, 20),
                (0, 1, 1, true, KERNEL, 0x210, 70),
                (0, 1, 1, true, KERNEL, 0x390, 10),
            ],
        )],
        None,
    );
    let opts = ReportOptions {
        symbols: true,
        ..Default::default()
    };
    let old = report_with(&old_dir, opts.clone());
    let new = report_with(&new_dir, opts);
    let diff = diff_reports(&old, &new, 0.0);
    let got: Vec<(&str, i64)> = diff
        .rows
        .iter()
        .map(|r| (r.symbol.as_deref().unwrap(), r.change.round() as i64))
        .collect();
    assert_eq!(
        got,
        [
            ("do_one_initcall", -30),
            ("schedule", 20),
            ("local_helper", 10)
        ]
    );
    let mut out = Vec::new();
    write_diff(&diff, Format::Text, &mut out).unwrap();
    let t = String::from_utf8(out).unwrap();
    assert!(t.contains("-30.0000"), "{t}");
    // A threshold leaves out small changes.
    assert_eq!(diff_reports(&old, &new, 15.0).rows.len(), 2);
}

/// Issue 25 (6): a session of stacks defined on a 255-frame parent with no
/// frame of their own (a few bytes in the file, 255 frames in memory), over
/// many chunks: every worker's table had a budget of its own, so a 10 MB file
/// held 2.97 GB. One budget per report, sized by the bytes read, now
/// refuses the rest, and the report says how many.
#[test]
fn stacks_on_parents_share_one_budget_across_workers_and_say_what_was_refused() {
    let d = tempfile::tempdir().unwrap();
    let header = SessionHeader {
        host: "test".into(),
        event: EventConfigDesc {
            name: "cpu-clock".into(),
            frequency: Some(1000),
            callchain: true,
            ..Default::default()
        },
        cpus: vec![0],
        start_monotonic_ns: 1_000_000_000,
        ..Default::default()
    };
    let path = d.path().join(SESSION_FILE);
    let mut w = SessionWriter::create(&path, &header).unwrap();
    let (chunks, children) = (16u32, 2_000u32);
    for round in 0..chunks {
        let mut enc = ChunkEncoder::new();
        if round == 0 {
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
                file: profkit_eventlog::FileCheck::NotRecorded,
            }));
        }
        enc.event(&Event::StackDef {
            id: 1,
            frames: (0..255).map(|i| frame(MAIN_RET + i)).collect(),
        });
        for c in 0..children {
            let id = 2 + round * children + c;
            // The parent's frames again under a new id: a few bytes in
            // the file, 255 frames in memory.
            enc.event(&Event::StackDefOn {
                id,
                parent: 1,
                frames: vec![],
            });
        }
        enc.sample_with_stack(0, 10, 10, true, KERNEL, C_OFF, 1 + (round + 1) * children);
        let time = 1_000_000_000 + u64::from(round + 1) * 250_000_000;
        w.append_chunk(u64::from(round), time, enc.bytes()).unwrap();
    }
    drop(w);
    let bytes = std::fs::metadata(&path).unwrap().len();
    let budget = profkit_eventlog::FrameBudget::for_bytes(bytes).size();
    let asked = (chunks * children) as usize * 255;
    assert!(
        asked > budget,
        "{asked} frames asked, a budget of {budget} for {bytes} bytes"
    );
    let r = call_report(
        d.path(),
        ReportOptions {
            callgraph: true,
            ..Default::default()
        },
    );
    let warning = r
        .warnings
        .iter()
        .find(|w| w.contains("call stacks of this session could not be resolved"))
        .unwrap_or_else(|| panic!("no warning of refused stacks: {:?}", r.warnings));
    let refused: usize = warning.split(' ').next().unwrap().parse().unwrap();
    let held = ((chunks * children) as usize - refused) * 255;
    assert!(held <= budget, "{held} frames held, budget {budget}");
    assert!(
        held + 255 > budget,
        "the budget is used, not refused wholesale"
    );
    assert!(
        warning.contains(&format!("past the {budget} frames")),
        "{warning}"
    );
    // Every sample is still counted, stack or not.
    assert_eq!(r.header.total_samples, u64::from(chunks));
}

/// A report with stacks says where they broke: the binary of the frame
/// before the sync stage's `[unknown]`, and why (its offset).
#[test]
fn broken_stacks_are_counted_by_where_and_why_they_broke() {
    use profkit_eventlog::broken;
    let d = tempfile::tempdir().unwrap();
    call_session(d.path());
    let r = call_report(
        d.path(),
        ReportOptions {
            callgraph: true,
            ..Default::default()
        },
    );
    let w: Vec<&String> = r.warnings.iter().filter(|w| w.contains("break")).collect();
    assert_eq!(
        w,
        [
            "1 samples' stacks break before their outermost frame (shown as [unknown]): \
          1 after [kernel.kallsyms] (not said)"
        ],
        "{:?}",
        r.warnings
    );
    // A stack that says why: after its caller's binary, by that reason.
    let d = tempfile::tempdir().unwrap();
    call_session_and(d.path(), |w| {
        let mut enc = ChunkEncoder::new();
        enc.event(&Event::StackDef {
            id: 9,
            frames: vec![
                frame(A_RET),
                Frame {
                    cookie: COOKIE_UNKNOWN,
                    offset: broken::NO_RULE,
                    kernel: false,
                },
            ],
        });
        for _ in 0..4 {
            enc.sample_with_stack(0, 10, 10, true, KERNEL, C_OFF, 9);
        }
        w.append_chunk(2, 1_300_000_000, enc.bytes()).unwrap();
    });
    let r = call_report(
        d.path(),
        ReportOptions {
            callgraph: true,
            ..Default::default()
        },
    );
    let w = r.warnings.iter().find(|w| w.contains("break")).unwrap();
    assert!(
        w.starts_with("5 samples' stacks break")
            && w.contains(
                "4 after [kernel.kallsyms] (no unwind rule), 1 after [kernel.kallsyms] (not said)"
            ),
        "{w}"
    );
}

#[test]
fn a_report_of_sessions_given_to_it_equals_one_of_sessions_lent() {
    // Given, the sessions' chunk bytes are given back once counted: every
    // report kind must come out the same.
    let d = tempfile::tempdir().unwrap();
    call_session(d.path());
    let kinds = [
        ReportOptions::default(),
        ReportOptions {
            symbols: true,
            ..Default::default()
        },
        ReportOptions {
            symbols: true,
            separate: Separate {
                cpu: true,
                thread: true,
                ..Default::default()
            },
            ..Default::default()
        },
        ReportOptions {
            callgraph: true,
            ..Default::default()
        },
        ReportOptions {
            children: true,
            symbols: true,
            ..Default::default()
        },
        ReportOptions {
            stacks: true,
            ..Default::default()
        },
        ReportOptions {
            timeline_every: Some(1_000_000_000),
            ..Default::default()
        },
    ];
    for opts in kinds {
        let lent = report_with(d.path(), opts.clone());
        let s = Session::open(d.path()).unwrap();
        let given = build_report_owned(vec![s], &opts, &sources(), &NoProgress).unwrap();
        assert!(lent.header.total_samples > 0);
        assert_eq!(given, lent, "{opts:?}");
    }
}
