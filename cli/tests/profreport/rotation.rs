//! Live, root: a recording split into 2-second parts (`profctl record
//! --rotate 2s`) reads as one session, and its per-second sample rate from
//! `--timeline` is the same within 5 % in the second before and the second
//! after every part boundary: nothing falls between two parts. Skipped with a printed reason where perf_event_open
//! or cc are missing, unless PROFKIT_REQUIRE_PERF=1, where that is a
//! failure.

use crate::live::build_workload;
use crate::util::*;

use profkit_testsupport::perf_ok;

#[test]
fn live_parts_of_2_seconds_read_as_one_with_no_gap_at_the_boundaries() {
    let _rec = recording();
    if !perf_ok() {
        return;
    }
    let d = tempdir();
    let Some(loops) = build_workload(d.path(), "loops", &[]) else {
        return;
    };
    // About 10 seconds of steady work: at least 3 boundaries with a second
    // on each side.
    crate::live::record_with(
        d.path(),
        &["--rotate", "2s"],
        &[loops.to_str().unwrap(), "1600"],
    );
    let s = d.path().join("s");
    let closed = profkit_eventlog::parts::closed_parts(&s).unwrap();
    assert!(closed.len() >= 3, "{} closed parts", closed.len());
    // Where each part after the first starts, as a round number.
    let mut starts: Vec<u64> = closed[1..]
        .iter()
        .map(|(_, p)| {
            profkit_eventlog::read_header(p)
                .unwrap()
                .0
                .part
                .unwrap()
                .first_round
        })
        .collect();
    let (last, _) = profkit_eventlog::read_header(&s.join("session.pkl")).unwrap();
    starts.push(last.part.unwrap().first_round);
    let v = profreport(&[
        "--session-dir",
        s.to_str().unwrap(),
        "--format",
        "json",
        "--timeline",
    ])
    .expect(0)
    .json();
    let whole = profreport(&["--session-dir", s.to_str().unwrap(), "--format", "json"])
        .expect(0)
        .json();
    let tl = &v["timeline"]["sessions"];
    assert_eq!(
        tl.as_array().unwrap().len(),
        1,
        "one session, not one per part: {tl}"
    );
    // Cumulative samples at the end of each round, with its time.
    let mut t = vec![0.0f64];
    let mut cum = vec![0u64];
    let mut round_at = Vec::new();
    for line in tl[0]["lines"].as_array().unwrap() {
        let n: u64 = line["samples"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap())
            .sum();
        t.push(line["time_s"].as_f64().unwrap());
        cum.push(cum.last().unwrap() + n);
        round_at.push(line["first_round"].as_u64().unwrap());
    }
    let total = *cum.last().unwrap();
    assert_eq!(
        total,
        whole["samples_read"].as_u64().unwrap(),
        "the timeline covers every part"
    );
    let span = t[t.len() - 1] - t[1];
    let rate = (cum[cum.len() - 1] - cum[1]) as f64 / span;
    eprintln!("{total} samples over {span:.2} s: {rate:.0}/s; parts start at rounds {starts:?}");
    assert!(span > 7.0, "{span} s recorded");
    // The rate over about a second on each side of each boundary.
    let at = |time: f64| t.iter().position(|&x| x >= time).unwrap_or(t.len() - 1);
    let mut checked = 0;
    for &r in &starts {
        let Some(i) = round_at.iter().position(|&x| x == r) else {
            panic!("round {r} not in the timeline");
        };
        // Lines end at t[i + 1]; the boundary is between line i - 1 and i.
        let b = i; // index into t of the last line of the old part
                   // At least a second on each side: from the last line end a second
                   // or more before, to the first a second or more after.
        let Some(a0) = t.iter().rposition(|&x| x <= t[b] - 1.0) else {
            continue; // too close to the start of the recording
        };
        let c1 = at(t[b] + 1.0);
        if t[c1] - t[b] < 1.0 {
            continue; // too close to the end
        }
        let (a1, c0) = (b, b);
        let before = (cum[a1] - cum[a0]) as f64 / (t[a1] - t[a0]);
        let after = (cum[c1] - cum[c0]) as f64 / (t[c1] - t[c0]);
        eprintln!("boundary at round {r}: {before:.0}/s before, {after:.0}/s after");
        // A gap (samples in neither part) or samples counted twice would
        // show as a step at the boundary.
        assert!(
            (after / before - 1.0).abs() <= 0.05,
            "round {r}: {before:.0}/s before, {after:.0}/s after"
        );
        checked += 1;
    }
    assert!(
        checked >= 3,
        "{checked} boundaries with a second on each side"
    );
}
