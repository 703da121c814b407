//! Sessions as read: losses, forged and corrupt files, timelines,
//! merging, machine formats and errors.

use super::*;

#[test]
fn no_footer_takes_losses_from_markers() {
    let d = tempfile::tempdir().unwrap();
    standard(d.path(), false);
    let r = report_with(d.path(), ReportOptions::default());
    assert_eq!(r.header.lost_source, "markers");
    assert_eq!(r.header.lost_total, 5);
    assert!(r.header.sessions[0].state.contains("no footer"));
    assert_eq!(r.header.samples_unreadable, Some(0));
}

#[test]
fn forged_loss_counts_saturate_instead_of_wrapping() {
    let d = tempfile::tempdir().unwrap();
    let forged = |cpu| CpuAccounting {
        cpu,
        samples_received: u64::MAX - 1,
        samples_written: u64::MAX - 1,
        lost_ring: u64::MAX - 1,
        lost_reconcile: 7,
        ..Default::default()
    };
    write_session(
        d.path(),
        &[(vec![], vec![])],
        Some(SessionFooter {
            rounds: 1,
            accounting: vec![forged(0), forged(1)],
            ..Default::default()
        }),
    );
    // Before: "Lost: 18446744073709551613" (or an overflow panic).
    let r = report_with(d.path(), ReportOptions::default());
    assert_eq!(r.header.lost_total, u64::MAX);
    assert!(r.header.lost_percent <= 100.0, "{}", r.header.lost_percent);
    assert!(text(&r).contains(&u64::MAX.to_string()), "{}", text(&r));
}

#[test]
fn a_header_claiming_a_million_cpus_costs_only_the_cpus_with_data() {
    let d = tempfile::tempdir().unwrap();
    let chunks: Vec<(Vec<Event>, Vec<S>)> = (0..40).map(|_| (vec![], vec![])).collect();
    let path = write_session(d.path(), &chunks, None);
    // Rewrite the header with a million CPUs (before: 3.9 GB and 20 s
    // for --timeline, chunks x CPUs).
    let header = SessionHeader {
        cpus: (0..1_000_000).collect(),
        event: EventConfigDesc {
            name: "cpu-clock".into(),
            ..Default::default()
        },
        ..Default::default()
    };
    let old = SessionReader::open(&path).unwrap();
    let chunks: Vec<(u64, u64, Vec<u8>)> = old
        .chunks()
        .iter()
        .map(|c| (c.round, c.time, old.payload(c).to_vec()))
        .collect();
    drop(old);
    std::fs::remove_file(&path).unwrap();
    let mut w = SessionWriter::create(&path, &header).unwrap();
    for (round, time, p) in &chunks {
        w.append_chunk(*round, *time, p).unwrap();
    }
    drop(w);
    let r = report_with(
        d.path(),
        ReportOptions {
            timeline: Some(1),
            ..Default::default()
        },
    );
    let t = r.timeline.as_ref().expect("a timeline");
    assert!(t.cpus.len() <= 2, "{} CPU columns", t.cpus.len());
    assert!(
        r.header.cpus.len() <= 2,
        "{} CPUs in the header",
        r.header.cpus.len()
    );
}

#[test]
fn terminal_escapes_in_names_are_shown_not_sent() {
    let d = tempfile::tempdir().unwrap();
    let evil = "/tmp/\u{1b}]0;pwned\u{7}\u{1b}[2J\u{9b}31m";
    write_session(
        d.path(),
        &[(
            vec![
                def(APP, CookieKind::User, evil, 0, None),
                comm(10, 10, "\u{1b}[31mred", true),
            ],
            vec![(0, 10, 10, false, APP, 0x10, 3)],
        )],
        None,
    );
    let r = report_with(
        d.path(),
        ReportOptions {
            separate: Separate::parse("thread").unwrap(),
            ..Default::default()
        },
    );
    for format in [Format::Text, Format::Csv] {
        let mut out = Vec::new();
        render(&r, format, &mut out).unwrap();
        let t = String::from_utf8(out).unwrap();
        assert!(
            !t.chars().any(|c| c.is_control() && c != '\n' && c != '\t'),
            "{format:?}: {t:?}"
        );
        assert!(t.contains("\\x1b]0;pwned\\x07"), "{format:?}: {t}");
        assert!(t.contains("\\x9b31m"), "{format:?}: {t}");
    }
    assert_eq!(printable("a\u{1b}b\nc"), "a\\x1bb\nc");
}

#[test]
fn a_newline_in_a_binary_path_adds_no_row_to_the_text_report() {
    // Issue 25 (5): `x\n   99999  99.9999  sshd  check_password` as a
    // binary's path made a fake row under root's eyes.
    let d = tempfile::tempdir().unwrap();
    let evil = "/home/u/x\n   99999  99.9999  sshd  check_password";
    write_session(
        d.path(),
        &[(
            vec![
                def(APP, CookieKind::User, evil, 0, None),
                comm(10, 10, "a\r\tb\nc", true),
            ],
            vec![(0, 10, 10, false, APP, 0x10, 3)],
        )],
        None,
    );
    for separate in ["none", "thread"] {
        let r = report_with(
            d.path(),
            ReportOptions {
                separate: Separate::parse(separate).unwrap(),
                ..Default::default()
            },
        );
        let mut out = Vec::new();
        render(&r, Format::Text, &mut out).unwrap();
        let t = String::from_utf8(out).unwrap();
        assert!(
            !t.lines().any(|l| l.trim_start().starts_with("99999")),
            "{separate}: a fake row: {t}"
        );
        assert!(t.contains("x\\x0a   99999"), "{separate}: {t}");
        if separate == "thread" {
            assert!(t.contains("a\\x0d\\x09b\\x0ac"), "{t}");
        }
        // The machine formats keep the name as it is.
        let mut json = Vec::new();
        render(&r, Format::Json, &mut json).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
        assert!(v.to_string().contains("x\\n   99999"), "{v}");
        // --diff's table too.
        let d = crate::diff_reports(&r, &r, 0.0);
        let mut out = Vec::new();
        crate::write_diff(&d, Format::Text, &mut out).unwrap();
        let t = String::from_utf8(out).unwrap();
        assert!(
            !t.lines().any(|l| l.trim_start().starts_with("99999")),
            "{separate}: a fake row in --diff: {t}"
        );
    }
}

#[test]
fn corrupt_and_torn_chunks_are_named_and_skipped() {
    let d = tempfile::tempdir().unwrap();
    let path = standard(d.path(), true);
    let mut bytes = std::fs::read(&path).unwrap();
    let reader = SessionReader::open(&path).unwrap();
    let second = reader.chunks()[1];
    // Flip a payload byte of the second chunk: CRC mismatch.
    bytes[second.payload_offset() as usize + 3] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();
    let r = report_with(d.path(), ReportOptions::default());
    assert_eq!(r.header.samples_read, 17);
    assert_eq!(r.header.samples_unreadable, Some(6));
    assert_eq!(r.header.bad_chunks.len(), 1);
    assert_eq!(r.header.bad_chunks[0].index, 1);
    assert_eq!(r.header.bad_chunks[0].offset, second.offset);
    assert!(r
        .warnings
        .iter()
        .any(|w| w.contains(&format!("chunk 1 at byte {}", second.offset))));
    assert!(r
        .warnings
        .iter()
        .any(|w| w.contains("6 samples are in unreadable chunks")));

    // Cut in the middle of the second chunk, no footer: a torn tail.
    std::fs::write(&path, &bytes[..second.payload_offset() as usize + 5]).unwrap();
    let mut s = Session::open(d.path()).unwrap();
    s.set_liveness(Liveness::NotRunning);
    let r = build_report(&[s], &ReportOptions::default(), &sources(), &NoProgress).unwrap();
    assert_eq!(r.header.samples_read, 17);
    assert!(r.header.bad_chunks[0].torn);
    assert!(r.header.sessions[0].state.contains("killed"));
    assert!(
        r.warnings.iter().any(|w| w.contains("torn chunk")),
        "{:?}",
        r.warnings
    );
    assert!(text(&r).contains(&format!(
        "torn chunk: {} chunk 1 at byte {}",
        path.display(),
        second.offset
    )));

    // The same while a recorder runs: being written, not a warning.
    let mut s = Session::open(d.path()).unwrap();
    s.set_liveness(Liveness::Running);
    let r = build_report(&[s], &ReportOptions::default(), &sources(), &NoProgress).unwrap();
    assert!(
        !r.warnings.iter().any(|w| w.contains("torn")),
        "{:?}",
        r.warnings
    );
    assert!(r.header.sessions[0].state.starts_with("running"));
}

#[test]
fn a_missing_cookie_definition_is_named_not_fatal() {
    let d = tempfile::tempdir().unwrap();
    write_session(
        d.path(),
        &[(vec![], vec![(0, 1, 1, false, 0x99, 4, 3)])],
        None,
    );
    let r = report_with(d.path(), ReportOptions::default());
    assert_eq!(&*r.rows[0].image, "[unknown binary 0x0000000000000099]");
    assert!(r.warnings[0].contains("definition was not read"));
}

#[test]
fn timeline_counts_per_round_and_cpu() {
    let d = tempfile::tempdir().unwrap();
    standard(d.path(), true);
    let r = report_with(
        d.path(),
        ReportOptions {
            timeline: Some(1),
            ..Default::default()
        },
    );
    let t = r.timeline.as_ref().unwrap();
    assert_eq!(t.cpus, [0, 1]);
    let lines = &t.sessions[0].lines;
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0].samples, [8, 9]);
    assert_eq!(lines[1].samples, [6, 0]);
    assert_eq!(lines[1].lost, [0, 5]);
    assert!((lines[1].time_s - 0.5).abs() < 1e-9);
    let r = report_with(
        d.path(),
        ReportOptions {
            timeline: Some(2),
            ..Default::default()
        },
    );
    let lines = &r.timeline.as_ref().unwrap().sessions[0].lines;
    assert_eq!(lines.len(), 1);
    assert_eq!((lines[0].first_round, lines[0].last_round), (0, 1));
    assert_eq!(lines[0].samples, [14, 9]);
    let t = text(&r);
    assert!(t.contains("cpu1 lost"), "{t}");
    let mut csv = Vec::new();
    write_csv(&r, &mut csv).unwrap();
    assert!(String::from_utf8(csv)
        .unwrap()
        .contains(",0,1,0.500,1,9,5\n"));
}

#[test]
fn merged_sessions_add_up() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    standard(a.path(), true);
    standard(b.path(), true);
    let sessions = vec![
        Session::open(a.path()).unwrap(),
        Session::open(b.path()).unwrap(),
    ];
    let r = build_report(
        &sessions,
        &ReportOptions::default(),
        &sources(),
        &NoProgress,
    )
    .unwrap();
    assert_eq!(r.header.total_samples, 46);
    assert_eq!(r.header.lost_total, 10);
    assert_eq!(r.rows[0].total, 18);
    assert_eq!(r.header.sessions.len(), 2);
}

#[test]
fn merging_different_events_is_refused() {
    let a = tempfile::tempdir().unwrap();
    standard(a.path(), true);
    let b = tempfile::tempdir().unwrap();
    let header = SessionHeader {
        event: EventConfigDesc {
            name: "page-faults".into(),
            type_: 1,
            config: 2,
            ..Default::default()
        },
        ..Default::default()
    };
    SessionWriter::create(b.path().join(SESSION_FILE), &header).unwrap();
    let sessions = vec![
        Session::open(a.path()).unwrap(),
        Session::open(b.path()).unwrap(),
    ];
    let e = build_report(
        &sessions,
        &ReportOptions::default(),
        &sources(),
        &NoProgress,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("page-faults") && e.contains("cpu-clock"), "{e}");
}

#[test]
fn json_and_csv_rows() {
    let d = tempfile::tempdir().unwrap();
    standard(d.path(), true);
    let r = report_with(
        d.path(),
        ReportOptions {
            symbols: true,
            separate: Separate::parse("cpu,thread").unwrap(),
            ..Default::default()
        },
    );
    let mut out = Vec::new();
    write_json(&r, &mut out).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["event"], "cpu-clock");
    assert_eq!(v["frequency"], 1000);
    assert_eq!(v["period"], serde_json::Value::Null);
    assert_eq!(v["total_samples"], 23);
    assert_eq!(v["lost"]["total"], 5);
    assert_eq!(v["lost"]["per_cpu"]["1"], 5);
    let rows = v["rows"].as_array().unwrap();
    let worker = rows
        .iter()
        .find(|r| r["comm"] == "worker" && r["image"] == "app")
        .unwrap();
    assert_eq!(worker["cpu"], 1);
    assert_eq!(worker["tgid"], 10);
    assert_eq!(worker["tid"], 11);
    assert_eq!(worker["samples"], 3);
    assert_eq!(worker["symbol"], NO_SYMBOLS);
    assert_eq!(worker["percent"], 33.3333);
    let sum: u64 = rows.iter().map(|r| r["samples"].as_u64().unwrap()).sum();
    assert_eq!(sum, 23);

    let mut out = Vec::new();
    write_csv(&r, &mut out).unwrap();
    let csv = String::from_utf8(out).unwrap();
    assert!(csv.starts_with(
        "samples,percent,cpu,tgid,tid,ns_tgid,ns_tid,comm,cgroup,app,image,symbol,vma,location\n"
    ));
    assert!(
        csv.contains("3,33.3333,1,10,11,,,worker,,,app,(no symbols),,\n"),
        "{csv}"
    );
}

/// A session recorded with call graphs (`user_stack` 0: frame pointers)
/// whose footer counts stacks: `counts` per CPU (unknown, truncated, cut).
fn stack_session(dir: &std::path::Path, user_stack: u32, counts: [(u64, u64, u64); 2]) {
    let acc = |cpu: u32, (unknown, truncated, cut): (u64, u64, u64)| CpuAccounting {
        cpu,
        samples_written: 2,
        stacks_unknown: unknown,
        stacks_truncated: truncated,
        user_stacks_cut: cut,
        ..Default::default()
    };
    write_session_of(
        dir,
        EventConfigDesc {
            name: "cpu-clock".into(),
            frequency: Some(1000),
            callchain: true,
            user_stack,
            ..Default::default()
        },
        &[(
            vec![def(APP, CookieKind::User, "/usr/bin/app", 0, None)],
            vec![
                (0, 10, 10, false, APP, 0x10, 2),
                (1, 10, 10, false, APP, 0x20, 2),
            ],
        )],
        Some(SessionFooter {
            rounds: 1,
            accounting: vec![acc(0, counts[0]), acc(1, counts[1])],
            ..Default::default()
        }),
    );
}

fn json(r: &Report) -> serde_json::Value {
    let mut out = Vec::new();
    write_json(r, &mut out).unwrap();
    serde_json::from_slice(&out).unwrap()
}

#[test]
fn a_flat_session_shows_no_call_graph_and_no_stack_counts() {
    let d = tempfile::tempdir().unwrap();
    standard(d.path(), true);
    let r = report_with(d.path(), ReportOptions::default());
    assert_eq!(r.header.call_graph, None);
    assert!(r.header.stacks.is_zero());
    let t = text(&r);
    assert!(
        t.contains("Event:    cpu-clock, sampled at 1000 Hz per CPU\n"),
        "{t}"
    );
    assert!(!t.contains("call graph") && !t.contains("Stacks:"), "{t}");
    let v = json(&r);
    assert_eq!(v["call_graph"], serde_json::Value::Null);
    assert!(v.get("stacks").is_none(), "{v}");
}

#[test]
fn frame_pointer_call_graphs_and_their_stack_counts_are_shown() {
    let d = tempfile::tempdir().unwrap();
    stack_session(d.path(), 0, [(2, 1, 0), (1, 0, 0)]);
    let r = report_with(d.path(), ReportOptions::default());
    assert_eq!(r.header.call_graph, Some(CallGraphMode::FramePointers));
    assert_eq!(
        r.header.stacks,
        StackCounts {
            unknown: 3,
            truncated: 1,
            user_stacks_cut: 0
        }
    );
    let t = text(&r);
    assert!(
        t.contains("Event:    cpu-clock, sampled at 1000 Hz per CPU; call graph: frame pointers\n"),
        "{t}"
    );
    assert!(
        t.contains(
            "Stacks:   3 with an [unknown] frame, 1 truncated (too deep), 0 user stacks cut at \
             the copied size\n"
        ),
        "{t}"
    );
    // After the loss line, before the table.
    let (lost, stacks) = (t.find("Lost:").unwrap(), t.find("Stacks:").unwrap());
    assert!(lost < stacks && stacks < t.find("samples ").unwrap(), "{t}");
    let v = json(&r);
    assert_eq!(v["call_graph"], serde_json::json!({"mode": "fp"}));
    assert_eq!(
        v["stacks"],
        serde_json::json!({"unknown": 3, "truncated": 1, "user_stacks_cut": 0})
    );
}

#[test]
fn dwarf_call_graphs_show_their_stack_size_and_cut_user_stacks() {
    let d = tempfile::tempdir().unwrap();
    stack_session(d.path(), 8192, [(0, 0, 4), (0, 0, 0)]);
    let r = report_with(d.path(), ReportOptions::default());
    assert_eq!(
        r.header.call_graph,
        Some(CallGraphMode::Dwarf { user_stack: 8192 })
    );
    let t = text(&r);
    assert!(
        t.contains("per CPU; call graph: dwarf, 8192-byte stacks\n"),
        "{t}"
    );
    assert!(
        t.contains(
            "0 with an [unknown] frame, 0 truncated (too deep), 4 user stacks cut at the \
             copied size (a larger --call-graph dwarf,SIZE keeps more)\n"
        ),
        "{t}"
    );
    let v = json(&r);
    assert_eq!(
        v["call_graph"],
        serde_json::json!({"mode": "dwarf", "user_stack": 8192})
    );
    assert_eq!(v["stacks"]["user_stacks_cut"], 4);
    // A call-graph session whose stacks were all whole: the mode, no counts.
    let d = tempfile::tempdir().unwrap();
    stack_session(d.path(), 8192, [(0, 0, 0), (0, 0, 0)]);
    let r = report_with(d.path(), ReportOptions::default());
    assert!(text(&r).contains("call graph: dwarf"));
    assert!(!text(&r).contains("Stacks:"));
    assert!(json(&r).get("stacks").is_none());
}

#[test]
fn merged_stack_counts_add_up_and_different_modes_are_a_warning() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    stack_session(a.path(), 8192, [(1, 2, 3), (0, 0, 1)]);
    stack_session(b.path(), 0, [(10, 0, 0), (0, 20, 0)]);
    let sessions = vec![
        Session::open(a.path()).unwrap(),
        Session::open(b.path()).unwrap(),
    ];
    let r = build_report(
        &sessions,
        &ReportOptions::default(),
        &sources(),
        &NoProgress,
    )
    .unwrap();
    assert_eq!(
        r.header.stacks,
        StackCounts {
            unknown: 11,
            truncated: 22,
            user_stacks_cut: 4
        }
    );
    assert_eq!(
        r.header.call_graph,
        Some(CallGraphMode::Dwarf { user_stack: 8192 })
    );
    assert!(
        r.warnings.iter().any(|w| w.contains(
            "record call graphs differently (dwarf, 8192-byte stacks and frame pointers)"
        )),
        "{:?}",
        r.warnings
    );
}

#[test]
fn wrong_version_names_both_versions() {
    let d = tempfile::tempdir().unwrap();
    let path = standard(d.path(), true);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[8] = 0x63;
    bytes[9] = 0;
    std::fs::write(&path, &bytes).unwrap();
    let e = Session::open(d.path()).unwrap_err().to_string();
    assert!(
        e.contains("version 99") && e.contains(&format!("{FORMAT_VERSION}")),
        "{e}"
    );
}

#[test]
fn no_session_says_how_to_make_one() {
    let d = tempfile::tempdir().unwrap();
    let e = Session::open(d.path()).unwrap_err().to_string();
    assert!(e.contains("profctl record"), "{e}");
}

// ---------------------------------------------------------------- call graphs
