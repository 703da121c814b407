//! Rotated sessions (`profctl start --rotate`): a directory of parts read
//! as one session.

use super::*;
use profkit_eventlog::parts::part_file_name;

const S0: u64 = 1_000_000_000;
const U0: u64 = 1_795_379_395_000_000_000;
/// Each part spans 10 s and holds up to 4 rounds of 2.5 s.
const PART_NS: u64 = 10_000_000_000;
const ROUND_NS: u64 = 2_500_000_000;

pub(super) fn flat_event() -> EventConfigDesc {
    EventConfigDesc {
        name: "cpu-clock".into(),
        frequency: Some(1000),
        ..Default::default()
    }
}

/// One round: markers, then samples (cpu, pid, tid, kernel, cookie,
/// offset, count, stack id).
type Round = (
    Vec<Event>,
    Vec<(u32, u32, u32, bool, Cookie, u64, u32, Option<u32>)>,
);

/// Writes part `number` of a rotated session into `dir` (as
/// `session.pkl` when `current`), its rounds numbered on from the parts
/// before it (4 per part), with a footer counting its own samples and
/// losses when `footer`.
pub(super) fn write_part(
    dir: &std::path::Path,
    number: u64,
    current: bool,
    event: &EventConfigDesc,
    rounds: &[Round],
    footer: bool,
) -> PathBuf {
    assert!(rounds.len() <= 4);
    let start = S0 + (number - 1) * PART_NS;
    let header = SessionHeader {
        host: "test".into(),
        event: event.clone(),
        cpus: vec![0, 1],
        start_time_unix_ns: U0 + (number - 1) * PART_NS,
        start_monotonic_ns: start,
        sync_interval_ms: 2500,
        target: "system-wide".into(),
        part: Some(PartInfo {
            number,
            first_round: (number - 1) * 4,
            session_start_unix_ns: U0,
            session_start_monotonic_ns: S0,
        }),
        ..Default::default()
    };
    let path = if current {
        dir.join(SESSION_FILE)
    } else {
        dir.join(part_file_name(number))
    };
    let mut w = SessionWriter::create(&path, &header).unwrap();
    let mut written = [0u64; 2];
    let mut lost = [0u64; 2];
    for (j, (markers, samples)) in rounds.iter().enumerate() {
        let mut enc = ChunkEncoder::new();
        for m in markers {
            if let Event::Lost { cpu, count, .. } = m {
                lost[*cpu as usize] += count;
            }
            enc.event(m);
        }
        for &(cpu, pid, tid, kernel, cookie, offset, n, stack) in samples {
            for _ in 0..n {
                match stack {
                    Some(id) => enc.sample_with_stack(cpu, pid, tid, kernel, cookie, offset, id),
                    None => enc.sample(cpu, pid, tid, kernel, cookie, offset),
                }
            }
            written[cpu as usize] += u64::from(n);
        }
        let round = (number - 1) * 4 + j as u64;
        w.append_chunk(round, start + (j as u64 + 1) * ROUND_NS, enc.bytes())
            .unwrap();
    }
    if footer {
        w.write_footer(&SessionFooter {
            end_time_unix_ns: U0 + number * PART_NS,
            end_monotonic_ns: start + rounds.len() as u64 * ROUND_NS,
            rounds: rounds.len() as u64,
            accounting: (0..2)
                .map(|cpu| CpuAccounting {
                    cpu: cpu as u32,
                    samples_written: written[cpu],
                    lost_ring: lost[cpu],
                    ..Default::default()
                })
                .collect(),
        })
        .unwrap();
    }
    path
}

/// Round `r` (0-based over the session) of a flat session: `r + 1`
/// samples of the app in process 10, its binary and thread defined again
/// in each part's first round.
fn flat_round(r: u64, first_of_part: bool) -> Round {
    let markers = if first_of_part {
        vec![
            def(APP, CookieKind::User, "/usr/bin/app", 0, None),
            comm(10, 10, "app", true),
        ]
    } else {
        Vec::new()
    };
    (
        markers,
        vec![(0, 10, 10, false, APP, 0x100, r as u32 + 1, None)],
    )
}

/// Parts `numbers` of a flat session of 4 rounds per part, the last one
/// `session.pkl`; every part with a footer.
pub(super) fn flat_parts(dir: &std::path::Path, numbers: std::ops::RangeInclusive<u64>) {
    let last = *numbers.end();
    for n in numbers {
        let rounds: Vec<Round> = (0..4)
            .map(|j| flat_round((n - 1) * 4 + j, j == 0))
            .collect();
        write_part(dir, n, n == last, &flat_event(), &rounds, true);
    }
}

fn json(r: &Report) -> serde_json::Value {
    let mut out = Vec::new();
    write_json(r, &mut out).unwrap();
    serde_json::from_slice(&out).unwrap()
}

fn open_report(dir: &std::path::Path, opts: ReportOptions) -> Report {
    let s = Session::open_window(dir, opts.time.as_ref()).unwrap();
    build_report(&[s], &opts, &sources(), &NoProgress).unwrap()
}

/// The sum of `r + 1` over rounds `rounds`.
fn samples_of(rounds: std::ops::Range<u64>) -> u64 {
    rounds.map(|r| r + 1).sum()
}

#[test]
fn three_parts_redefining_a_binary_are_one_session_with_one_row() {
    let d = tempfile::tempdir().unwrap();
    // Part 1 and 2 closed, part 3 current; each defines the app and libc
    // again; part 2 loses 3 samples, part 3 2.
    let part = |n: u64, extra_lost: u64| -> Vec<Round> {
        let mut first = (
            vec![
                def(APP, CookieKind::User, "/usr/bin/app", 0, None),
                def(LIBC, CookieKind::User, "/usr/lib/libc.so.6", 0, None),
                comm(10, 10, "app", true),
                comm(10, 11, "worker", false),
            ],
            vec![
                (0, 10, 10, false, APP, 0x100, n as u32, None),
                (1, 10, 11, false, LIBC, 0x200, 1, None),
            ],
        );
        if extra_lost > 0 {
            first.0.push(Event::Lost {
                cpu: 1,
                kind: LostKind::Ring,
                count: extra_lost,
            });
        }
        vec![
            first,
            (vec![], vec![(0, 10, 10, false, APP, 0x100, 1, None)]),
        ]
    };
    write_part(d.path(), 1, false, &flat_event(), &part(1, 0), true);
    write_part(d.path(), 2, false, &flat_event(), &part(2, 3), true);
    write_part(d.path(), 3, true, &flat_event(), &part(3, 2), true);
    let r = open_report(d.path(), ReportOptions::default());
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    // app: (1+1) + (2+1) + (3+1) = 9; libc 3.
    assert_eq!(r.header.total_samples, 12);
    assert_eq!(
        rows(&r),
        [
            ("app".to_owned(), None, 9),
            ("libc.so.6".to_owned(), None, 3)
        ]
    );
    // Each footer counts its own part: they add up.
    assert_eq!(r.header.lost_total, 5);
    assert_eq!(r.header.lost_source, "footer");
    assert_eq!(r.header.cpus[0].samples, 9);
    assert_eq!(r.header.cpus[1].samples, 3);
    assert_eq!(r.header.samples_unreadable, Some(0));
    assert_eq!(r.header.sessions.len(), 1);
    let info = &r.header.sessions[0];
    assert_eq!((info.chunks, info.rounds), (6, Some(6)));
    assert_eq!(info.state, "stopped");
    // The whole span: from part 1's start to part 3's end.
    assert_eq!(r.header.start_unix_ns, U0);
    assert_eq!(r.header.duration_ns, 2 * PART_NS + 2 * ROUND_NS);
    let t = text(&r);
    assert!(
        t.contains("\n          parts 1–3 of a rotated session\n"),
        "{t}"
    );
    let j = json(&r);
    let s = &j["sessions"][0];
    assert_eq!(
        (
            &s["parts"],
            &s["first_part"],
            &s["last_part"],
            &s["parts_read"]
        ),
        (&3.into(), &1.into(), &3.into(), &3.into())
    );
    // A thread seen in every part is one thread.
    let r = open_report(
        d.path(),
        ReportOptions {
            separate: Separate::parse("thread").unwrap(),
            ..Default::default()
        },
    );
    let threads: Vec<(Option<u32>, Option<String>, u64)> = r
        .rows
        .iter()
        .map(|r| (r.tid(), r.comm().map(str::to_owned), r.total))
        .collect();
    assert_eq!(
        threads,
        [
            (Some(10), Some("app".to_owned()), 9),
            (Some(11), Some("worker".to_owned()), 3)
        ]
    );
}

#[test]
fn one_part_file_is_read_alone() {
    let d = tempfile::tempdir().unwrap();
    flat_parts(d.path(), 1..=3);
    let s = Session::open(d.path().join(part_file_name(2))).unwrap();
    assert_eq!(s.parts().len(), 1);
    let r = build_report(&[s], &ReportOptions::default(), &sources(), &NoProgress).unwrap();
    assert_eq!(r.header.total_samples, samples_of(4..8));
    let t = text(&r);
    assert!(t.contains("part 2 of a rotated session, read alone"), "{t}");
    assert!(!t.contains("deleted"), "{t}");
    assert_eq!(json(&r)["sessions"][0]["one_part"], true);
}

/// Every live session's header says part 1: alone in its directory, its
/// `session.pkl` is a session in one file, shown as before.
#[test]
fn a_session_pkl_that_is_part_1_alone_is_not_called_rotated() {
    let d = tempfile::tempdir().unwrap();
    flat_parts(d.path(), 1..=1);
    for given in [d.path().to_path_buf(), d.path().join(SESSION_FILE)] {
        let s = Session::open(&given).unwrap();
        assert!(s.rotation().is_none(), "{given:?}");
        let r = build_report(&[s], &ReportOptions::default(), &sources(), &NoProgress).unwrap();
        let t = text(&r);
        assert!(!t.contains("rotated"), "{t}");
        assert!(json(&r)["sessions"][0].get("parts").is_none());
    }
    // Alone after `--keep 1` deleted the parts before it: still a part.
    let d = tempfile::tempdir().unwrap();
    flat_parts(d.path(), 1..=3);
    std::fs::remove_file(d.path().join(part_file_name(1))).unwrap();
    std::fs::remove_file(d.path().join(part_file_name(2))).unwrap();
    let s = Session::open(d.path()).unwrap();
    assert_eq!(s.rotation().map(|r| (r.first, r.last)), Some((3, 3)));
}

#[test]
fn parts_deleted_by_retention_are_said_and_time_counts_from_the_session_start() {
    let d = tempfile::tempdir().unwrap();
    flat_parts(d.path(), 4..=6);
    let r = open_report(d.path(), ReportOptions::default());
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    assert_eq!(r.header.total_samples, samples_of(12..24));
    let t = text(&r);
    assert!(
        t.contains("parts 4–6 of a rotated session; parts 1–3 were deleted (retention)"),
        "{t}"
    );
    // The report starts where its data does: part 4.
    assert_eq!(r.header.start_unix_ns, U0 + 3 * PART_NS);
    let j = json(&r);
    assert_eq!(j["sessions"][0]["first_part"], 4);
    assert_eq!(j["sessions"][0]["parts"], 3);
    // Seconds are from the session's start (part 1's), not part 4's: 40 to
    // 45 s is rounds 16 and 17 (middles at 41.25 and 43.75 s).
    let r = open_report(
        d.path(),
        ReportOptions {
            time: Some(TimeSpec::parse("40,45").unwrap()),
            ..Default::default()
        },
    );
    assert_eq!(r.header.total_samples, samples_of(16..18));
    // Only part 5 was opened.
    assert_eq!(json(&r)["sessions"][0]["parts_read"], 1);
}

#[test]
fn a_part_missing_in_the_middle_is_a_warning_naming_it() {
    let d = tempfile::tempdir().unwrap();
    flat_parts(d.path(), 1..=4);
    std::fs::remove_file(d.path().join(part_file_name(2))).unwrap();
    let r = open_report(d.path(), ReportOptions::default());
    let w = r.warnings.join("\n");
    assert!(
        w.contains("part 2 of the rotated session could not be read"),
        "{w}"
    );
    assert_eq!(r.header.total_samples, samples_of(0..4) + samples_of(8..16));
    // Two missing: named as a range.
    std::fs::remove_file(d.path().join(part_file_name(3))).unwrap();
    let r = open_report(d.path(), ReportOptions::default());
    assert!(
        r.warnings.join("\n").contains("parts 2–3 of the rotated"),
        "{:?}",
        r.warnings
    );
}

#[test]
fn session_pkl_ahead_of_the_closed_parts_is_a_missed_rotation() {
    // Closed 1..2 and session.pkl says it is part 4: part 3 was closed
    // after the listing (or is missing). Listed again, then a warning.
    let d = tempfile::tempdir().unwrap();
    flat_parts(d.path(), 1..=4);
    std::fs::rename(d.path().join(SESSION_FILE), d.path().join("keep")).unwrap();
    std::fs::remove_file(d.path().join(part_file_name(3))).unwrap();
    std::fs::rename(d.path().join("keep"), d.path().join(SESSION_FILE)).unwrap();
    let r = open_report(d.path(), ReportOptions::default());
    assert!(
        r.warnings
            .join("\n")
            .contains("part 3 of the rotated session could not be read"),
        "{:?}",
        r.warnings
    );
    assert_eq!(
        r.header.total_samples,
        samples_of(0..8) + samples_of(12..16)
    );
}

#[test]
fn a_closed_part_without_a_footer_is_a_warning_and_the_current_one_is_not() {
    let d = tempfile::tempdir().unwrap();
    let rounds = |n: u64| -> Vec<Round> {
        (0..4)
            .map(|j| flat_round((n - 1) * 4 + j, j == 0))
            .collect()
    };
    write_part(d.path(), 1, false, &flat_event(), &rounds(1), false);
    write_part(d.path(), 2, true, &flat_event(), &rounds(2), false);
    let mut s = Session::open(d.path()).unwrap();
    s.set_liveness(Liveness::Running);
    let r = build_report(&[s], &ReportOptions::default(), &sources(), &NoProgress).unwrap();
    let w = r.warnings.join("\n");
    assert!(
        w.contains("session.000001.pkl: a closed part without a footer"),
        "{w}"
    );
    assert!(!w.contains("session.pkl: a closed"), "{w}");
    assert_eq!(r.header.total_samples, samples_of(0..8));
    assert!(r.header.sessions[0].state.starts_with("running"));
}

#[test]
fn a_window_reads_across_a_part_boundary_and_only_the_parts_it_needs() {
    let d = tempfile::tempdir().unwrap();
    flat_parts(d.path(), 1..=3);
    let report = |t: &str| {
        open_report(
            d.path(),
            ReportOptions {
                time: Some(TimeSpec::parse(t).unwrap()),
                ..Default::default()
            },
        )
    };
    // 8 to 12 s: round 3 (middle 8.75 s, part 1) and round 4 (11.25 s,
    // part 2).
    let r = report("8,12");
    assert_eq!(r.header.total_samples, samples_of(3..5));
    assert_eq!(json(&r)["sessions"][0]["parts_read"], 2);
    // Percent of the whole session (0 to 30 s): 90 % to 100 % is 27 s to
    // 30 s, round 11.
    let r = report("90%-100%");
    assert_eq!(r.header.total_samples, samples_of(11..12));
    // 0 % to 40 % is 0 to 12 s of the whole 30 s, though part 3 (read
    // for the end) is not in it: rounds 0 to 4.
    let r = report("0%-40%");
    assert_eq!(r.header.total_samples, samples_of(0..5));
    assert_eq!(json(&r)["sessions"][0]["parts_read"], 2);
    // Break part 1 inside a chunk: a window in part 3 never opens it.
    let p1 = d.path().join(part_file_name(1));
    let mut bytes = std::fs::read(&p1).unwrap();
    let n = bytes.len();
    bytes[n / 2] ^= 0xff;
    std::fs::write(&p1, &bytes).unwrap();
    let r = report("25,30");
    // (These synthetic parts have no sample times: that is said, and only
    // that.)
    assert!(
        r.warnings
            .iter()
            .all(|w| w.contains("before samples had their own time")),
        "{:?}",
        r.warnings
    );
    assert_eq!(r.header.total_samples, samples_of(10..12));
    assert_eq!(json(&r)["sessions"][0]["parts_read"], 1);
    let t = text(&r);
    assert!(
        t.contains("parts 1–3 of a rotated session; 1 of them read"),
        "{t}"
    );
    // The whole session does read it, and says so.
    let r = open_report(d.path(), ReportOptions::default());
    assert!(
        r.warnings.iter().any(|w| w.contains("session.000001.pkl")),
        "{:?}",
        r.warnings
    );
}

#[test]
fn the_timeline_spans_the_parts_from_the_session_start() {
    let d = tempfile::tempdir().unwrap();
    flat_parts(d.path(), 2..=3);
    let r = open_report(
        d.path(),
        ReportOptions {
            timeline: Some(1),
            ..Default::default()
        },
    );
    let t = r.timeline.as_ref().unwrap();
    assert_eq!(t.sessions.len(), 1);
    let lines = &t.sessions[0].lines;
    assert_eq!(lines.len(), 8);
    assert_eq!(lines[0].first_round, 4);
    assert_eq!(lines[0].samples, [5, 0]);
    // Round 4 ends 12.5 s after the session's start (part 1 deleted).
    assert!((lines[0].time_s - 12.5).abs() < 1e-9, "{}", lines[0].time_s);
    assert_eq!(lines[7].first_round, 11);
    assert!((lines[7].time_s - 30.0).abs() < 1e-9);
}

#[test]
fn merged_rotated_sessions_add_up() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    flat_parts(a.path(), 1..=2);
    flat_parts(b.path(), 3..=4);
    let sessions = [
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
    assert_eq!(r.header.total_samples, samples_of(0..16));
    assert_eq!(r.header.sessions.len(), 2);
    assert_eq!(r.rows[0].total, samples_of(0..16));
}

/// Two parts that both call their stack 1, each meaning another stack:
/// each part's samples take its own part's stack.
#[test]
fn stack_ids_are_per_part() {
    let d = tempfile::tempdir().unwrap();
    let event = EventConfigDesc {
        callchain: true,
        ..flat_event()
    };
    let frame = |offset: u64| Frame {
        cookie: KERNEL,
        offset,
        kernel: true,
    };
    let kdef = def(KERNEL, CookieKind::Kernel, "[kernel.kallsyms]", KBASE, None);
    // Kernel offsets in testdata/symbols/kallsyms: do_one_initcall,
    // schedule, arch_weak_hook return addresses; local_helper sampled.
    let (main_ret, a_ret, b_ret, c_off) = (0x61, 0x211, 0x311, 0x390);
    for (n, caller, count) in [(1, a_ret, 10), (2, b_ret, 20)] {
        write_part(
            d.path(),
            n,
            n == 2,
            &event,
            &[(
                vec![
                    kdef.clone(),
                    comm(10, 10, "app", true),
                    Event::StackDef {
                        id: 1,
                        frames: vec![frame(caller), frame(main_ret)],
                    },
                ],
                vec![(0, 10, 10, true, KERNEL, c_off, count, Some(1))],
            )],
            true,
        );
    }
    let r = open_report(
        d.path(),
        ReportOptions {
            callgraph: true,
            ..Default::default()
        },
    );
    let cg = r.callgraph.as_ref().unwrap();
    let c = cg
        .entries
        .iter()
        .find(|e| e.symbol == "local_helper")
        .unwrap();
    let callers: Vec<(&str, u64)> = c
        .callers
        .iter()
        .map(|a| (a.symbol.as_str(), a.samples))
        .collect();
    assert_eq!(callers, [("arch_weak_hook", 20), ("schedule", 10)]);
    // And the folded stacks.
    let r = open_report(
        d.path(),
        ReportOptions {
            stacks: true,
            ..Default::default()
        },
    );
    let lines = collapsed_lines(&r, None).unwrap();
    let names: Vec<(String, u64)> = lines
        .into_iter()
        .map(|(l, n)| (l.split_once(';').unwrap().1.to_owned(), n))
        .collect();
    assert_eq!(
        names,
        [
            ("do_one_initcall;arch_weak_hook;local_helper".to_owned(), 20),
            ("do_one_initcall;schedule;local_helper".to_owned(), 10),
        ]
    );
}

#[test]
fn too_many_parts_are_refused_before_any_is_opened() {
    let d = tempfile::tempdir().unwrap();
    for n in 1..=(MAX_PARTS as u64 + 1) {
        std::fs::File::create(d.path().join(part_file_name(n))).unwrap();
    }
    let e = Session::open(d.path()).unwrap_err().to_string();
    assert!(e.contains("100001 parts, more than the 100000"), "{e}");
}

/// A recorder rotating while reports read the directory: every report
/// reads consecutive parts and counts exactly their samples (part `n`
/// holds `n` samples); a report that could not see a consistent listing
/// in 5 tries says so rather than miscounting.
#[test]
fn reports_during_rotations_read_consistent_parts() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().to_path_buf();
    let part = |n: u64| -> Vec<Round> {
        vec![(
            vec![def(APP, CookieKind::User, "/usr/bin/app", 0, None)],
            vec![(0, 10, 10, false, APP, 0x100, n as u32, None)],
        )]
    };
    write_part(&dir, 1, true, &flat_event(), &part(1), false);
    let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let writer = {
        let (dir, done) = (dir.clone(), done.clone());
        std::thread::spawn(move || {
            for n in 1..=150u64 {
                std::fs::rename(dir.join(SESSION_FILE), dir.join(part_file_name(n))).unwrap();
                write_part(&dir, n + 1, true, &flat_event(), &part(n + 1), false);
                std::thread::sleep(std::time::Duration::from_micros(500));
            }
            done.store(true, std::sync::atomic::Ordering::SeqCst);
        })
    };
    let (mut reports, mut warned) = (0, 0);
    while !done.load(std::sync::atomic::Ordering::SeqCst) {
        let s = Session::open(&dir).unwrap();
        let numbers: Vec<u64> = s.parts().iter().filter_map(Part::number).collect();
        // Part n holds n samples; the one being written may not have its
        // chunk complete yet.
        let expected: u64 = s
            .parts()
            .iter()
            .filter(|p| !p.reader().chunks().is_empty())
            .filter_map(Part::number)
            .sum();
        if s.warnings().is_empty() {
            let first = numbers[0];
            assert_eq!(first, 1, "{numbers:?}");
            assert_eq!(
                numbers,
                (first..first + numbers.len() as u64).collect::<Vec<_>>()
            );
        } else {
            warned += 1;
        }
        assert!(numbers.windows(2).all(|w| w[0] < w[1]), "{numbers:?}");
        let r = build_report(&[s], &ReportOptions::default(), &sources(), &NoProgress).unwrap();
        assert_eq!(r.header.total_samples, expected);
        reports += 1;
    }
    writer.join().unwrap();
    eprintln!("{reports} reports during 150 rotations, {warned} with a warning");
    assert!(reports > 0);
}

/// A rotation caught half done (part 3 not yet in place, `session.pkl`
/// already part 4) and finished a moment later: the directory is listed
/// again and every part read, without a warning.
#[test]
fn a_rotation_finishing_while_listing_is_waited_for() {
    let d = tempfile::tempdir().unwrap();
    flat_parts(d.path(), 1..=4);
    let held = d.path().join("held");
    std::fs::rename(d.path().join(part_file_name(3)), &held).unwrap();
    let finish = {
        let (held, to) = (held.clone(), d.path().join(part_file_name(3)));
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_micros(500));
            std::fs::rename(held, to).unwrap();
        })
    };
    let s = Session::open(d.path()).unwrap();
    finish.join().unwrap();
    assert!(s.warnings().is_empty(), "{:?}", s.warnings());
    let numbers: Vec<u64> = s.parts().iter().filter_map(Part::number).collect();
    assert_eq!(numbers, [1, 2, 3, 4]);
}

/// Issue 25 (6): `session.000001.pkl` and `session.0000001.pkl` were both
/// part 1, read twice with no warning.
#[test]
fn a_part_under_a_second_spelling_is_not_read_again_and_is_named() {
    let d = tempfile::tempdir().unwrap();
    flat_parts(d.path(), 1..=3);
    let one = std::fs::read(d.path().join(part_file_name(1))).unwrap();
    std::fs::write(d.path().join("session.0000001.pkl"), &one).unwrap();
    let r = open_report(d.path(), ReportOptions::default());
    assert_eq!(r.header.total_samples, samples_of(0..12), "part 1 once");
    let w = r.warnings.join("\n");
    assert!(
        w.contains("session.0000001.pkl: not a part's name") && w.contains("not read"),
        "{w}"
    );
}

/// Issue 25 (6): parts whose headers list 16 M CPUs (zero bytes: a
/// sparse file on disk) were each held with a 64 MB CPU list; now every
/// part's list is empty and the report's columns are the CPUs with data.
#[test]
fn parts_claiming_millions_of_cpus_hold_no_cpu_list() {
    let d = tempfile::tempdir().unwrap();
    flat_parts(d.path(), 1..=3);
    for n in 1..=3u64 {
        let path = if n == 3 {
            d.path().join(SESSION_FILE)
        } else {
            d.path().join(part_file_name(n))
        };
        let old = SessionReader::open(&path).unwrap();
        let mut header = old.header().clone();
        header.cpus = vec![0; 1 << 20];
        let chunks: Vec<(u64, u64, Vec<u8>)> = old
            .chunks()
            .iter()
            .map(|c| (c.round, c.time, old.payload(c).to_vec()))
            .collect();
        let footer = old.footer().cloned();
        drop(old);
        std::fs::remove_file(&path).unwrap();
        let mut w = SessionWriter::create(&path, &header).unwrap();
        for (round, time, p) in &chunks {
            w.append_chunk(*round, *time, p).unwrap();
        }
        if let Some(f) = footer {
            w.write_footer(&f).unwrap();
        }
    }
    let s = Session::open_window(d.path(), None).unwrap();
    for p in s.parts() {
        assert!(p.reader().header().cpus.is_empty());
    }
    let r = build_report(&[s], &ReportOptions::default(), &sources(), &NoProgress).unwrap();
    assert_eq!(r.header.total_samples, samples_of(0..12));
    assert!(r.header.cpus.len() <= 2, "{} CPUs", r.header.cpus.len());
}
