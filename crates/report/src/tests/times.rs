//! Sample times (format version 6): `--time` windows exact to the sample,
//! `--timeline` per time step, and sessions written before still read.

use super::*;

const START: u64 = 1_000_000_000;
const MS: u64 = 1_000_000;

/// A session of three 250 ms rounds from START: `samples` are (round,
/// time, cookie), each written in the chunk of the round given, in the
/// binary /bin/a, b or c (cookies 0x10, 0x20, 0x30); timed when `timed`.
fn timed_session(dir: &std::path::Path, timed: bool, samples: &[(usize, u64, u64)]) {
    let header = SessionHeader {
        host: "test".into(),
        event: EventConfigDesc {
            name: "cpu-clock".into(),
            frequency: Some(1000),
            sample_times: timed,
            ..Default::default()
        },
        cpus: vec![0, 1],
        start_time_unix_ns: 1_795_379_395_000_000_000,
        start_monotonic_ns: START,
        sync_interval_ms: 250,
        target: "command app".into(),
        ..Default::default()
    };
    let mut w = SessionWriter::create(dir.join(SESSION_FILE), &header).unwrap();
    for round in 0..3usize {
        let mut enc = ChunkEncoder::new();
        enc.set_time_unit(100);
        if round == 0 {
            for (c, path) in [(0x10, "/bin/a"), (0x20, "/bin/b"), (0x30, "/bin/c")] {
                enc.event(&def(c, CookieKind::User, path, 0, None));
            }
        }
        for &(r, t, off) in samples {
            if r == round {
                if timed {
                    enc.time(t);
                }
                enc.sample((t / MS % 2) as u32, 10, 10, false, off, 0x100);
            }
        }
        let time = START + (round as u64 + 1) * 250 * MS;
        w.append_chunk(round as u64, time, enc.bytes()).unwrap();
    }
}

/// (cookie, samples) per row: images /bin/a, b, c are 0x10, 0x20, 0x30.
fn offsets(r: &Report) -> Vec<(u64, u64)> {
    let mut v: Vec<(u64, u64)> = r
        .rows
        .iter()
        .map(|r| {
            let c = match &*r.image {
                "a" | "/bin/a" => 0x10,
                "b" | "/bin/b" => 0x20,
                "c" | "/bin/c" => 0x30,
                other => panic!("image {other}"),
            };
            (c, r.total)
        })
        .collect();
    v.sort();
    v
}

/// Binary a runs 0-200 ms, 0x20 200-500 ms, 0x30 500-750 ms; one
/// b sample at 240 ms comes in round 1's chunk (resolved a round
/// late), one c sample at 510 ms in round 1's (drained before the
/// round's time was taken).
fn phases() -> Vec<(usize, u64, u64)> {
    let mut v = Vec::new();
    for ms in (0..750).step_by(5) {
        let t = START + ms * MS + 1234;
        let off = match ms {
            0..200 => 0x10,
            200..500 => 0x20,
            _ => 0x30,
        };
        let round = if ms == 240 || ms == 510 {
            1
        } else {
            (ms / 250) as usize
        };
        v.push((round, t, off));
    }
    v
}

fn window(spec: &str) -> ReportOptions {
    ReportOptions {
        time: Some(TimeSpec::parse(spec).unwrap()),
        ..Default::default()
    }
}

#[test]
fn a_time_window_takes_exactly_the_samples_whose_time_is_in_it() {
    let d = tempfile::tempdir().unwrap();
    timed_session(d.path(), true, &phases());
    // 200-500 ms: every 0x20 sample and nothing else, across three
    // chunks, wherever each sample was written.
    let r = report_with(d.path(), window("0.2,0.5"));
    assert_eq!(offsets(&r), [(0x20, 60)], "{:?}", offsets(&r));
    assert_eq!(r.header.total_samples, 60);
    assert!(!r.warnings.iter().any(|w| w.contains("before samples had")));
    // A window inside one round: 100-150 ms.
    let r = report_with(d.path(), window("0.1,0.15"));
    assert_eq!(offsets(&r), [(0x10, 10)]);
    // Without a window, everything.
    let r = report_with(d.path(), ReportOptions::default());
    assert_eq!(offsets(&r), [(0x10, 40), (0x20, 60), (0x30, 50)]);
}

#[test]
fn an_untimed_session_still_reads_its_window_by_rounds_and_says_so() {
    let d = tempfile::tempdir().unwrap();
    timed_session(d.path(), false, &phases());
    let r = report_with(d.path(), window("0.2,0.5"));
    // Round 1's middle (375 ms) is in the window, round 0's (125) is
    // not: round 1's chunk is taken whole.
    assert_eq!(offsets(&r), [(0x20, 51), (0x30, 1)], "{:?}", offsets(&r));
    assert!(
        r.warnings
            .iter()
            .any(|w| w.contains("before samples had their own time")),
        "{:?}",
        r.warnings
    );
}

#[test]
fn a_timeline_by_time_step_puts_each_sample_in_its_own_line() {
    let d = tempfile::tempdir().unwrap();
    timed_session(d.path(), true, &phases());
    let r = report_with(
        d.path(),
        ReportOptions {
            timeline_every: Some(100 * MS),
            ..Default::default()
        },
    );
    let t = r.timeline.as_ref().unwrap();
    assert_eq!(t.step_ns, Some(100 * MS));
    let lines = &t.sessions[0].lines;
    let per_line: Vec<u64> = lines.iter().map(|l| l.samples.iter().sum()).collect();
    // 20 samples per 100 ms, the last line half full (700-750 ms).
    assert_eq!(per_line, [20, 20, 20, 20, 20, 20, 20, 10]);
    assert!((lines[2].time_s - 0.3).abs() < 1e-9);
    // The line of 200-300 ms has samples from rounds 0 and 1 (240 ms was
    // written in round 1).
    assert_eq!((lines[2].first_round, lines[2].last_round), (0, 1));
    // Samples alternate CPUs by millisecond: 10 on each per line.
    assert_eq!(lines[0].samples, [10, 10]);
    // With a --time window, only its samples.
    let r = report_with(
        d.path(),
        ReportOptions {
            timeline_every: Some(100 * MS),
            time: Some(TimeSpec::parse("0.2,0.5").unwrap()),
            ..Default::default()
        },
    );
    let lines = &r.timeline.as_ref().unwrap().sessions[0].lines;
    let per_line: Vec<(u64, u64)> = lines
        .iter()
        .map(|l| ((l.time_s * 10.0).round() as u64, l.samples.iter().sum()))
        .collect();
    assert_eq!(per_line, [(3, 20), (4, 20), (5, 20)]);
}

#[test]
fn a_timeline_step_too_fine_for_the_session_is_refused_before_decoding() {
    let d = tempfile::tempdir().unwrap();
    timed_session(d.path(), true, &phases());
    let s = Session::open(d.path()).unwrap();
    let e = build_report(
        &[s],
        &ReportOptions {
            timeline_every: Some(1),
            ..Default::default()
        },
        &sources(),
        &NoProgress,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("--timeline") && e.contains("lines"), "{e}");
}

#[test]
fn forged_sample_times_far_from_the_session_stay_in_bounds() {
    let d = tempfile::tempdir().unwrap();
    // Times at 0, at the session start, and at 2^62 ns.
    timed_session(
        d.path(),
        true,
        &[(0, 0, 0x10), (0, START, 0x10), (1, (1 << 62) - 1, 0x20)],
    );
    let r = report_with(
        d.path(),
        ReportOptions {
            timeline_every: Some(100 * MS),
            ..Default::default()
        },
    );
    let lines = &r.timeline.as_ref().unwrap().sessions[0].lines;
    assert!(lines.len() <= 3, "{lines:?}");
    assert_eq!(
        lines
            .iter()
            .map(|l| l.samples.iter().sum::<u64>())
            .sum::<u64>(),
        3
    );
}
