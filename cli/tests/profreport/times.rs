//! Live, root: sample times (format version 6) on testdata/workloads/
//! phases.c, four CPU-bound phases of a second each that print their
//! start and end on CLOCK_MONOTONIC. At least 99 % of each phase's samples
//! carry a time within its printed interval ± 5 ms (counted through
//! `--time`, which is exact to the sample), and at least 99 % of the
//! samples of a `--time` window of one phase are under that phase's
//! function (inclusive, `-g --children`: the vDSO's clock_gettime and a
//! kernel preemption on top of it count as the phase's). Skipped with a printed
//! reason where perf_event_open or cc are missing, unless
//! PROFKIT_REQUIRE_PERF=1, where that is a failure.

use crate::live::{build_workload, record_with};
use crate::util::*;

use profkit_testsupport::perf_ok;

/// Samples under `phase` (inclusive: its own, and those of what it calls
/// or what interrupted it, such as clock_gettime in the vDSO or a kernel
/// preemption) and of everything, in the session's `--time` window from
/// `lo` to `hi` (CLOCK_MONOTONIC ns) or in all of it.
fn samples(s: &std::path::Path, start: u64, window: Option<(u64, u64)>, phase: &str) -> (u64, u64) {
    let secs = |t: u64| format!("{:.9}", t.saturating_sub(start) as f64 / 1e9);
    let spec = window.map(|(lo, hi)| format!("{},{}", secs(lo), secs(hi)));
    let mut args = vec![
        "--session-dir",
        s.to_str().unwrap(),
        "--format",
        "json",
        "-l",
        "--children",
    ];
    if let Some(w) = &spec {
        args.extend(["--time", w]);
    }
    let v = profreport(&args).expect(0).json();
    let under: u64 = rows(&v)
        .iter()
        .filter(|r| r["symbol"] == phase)
        .map(|r| r["inclusive"].as_u64().unwrap())
        .sum();
    (under, v["total_samples"].as_u64().unwrap())
}

#[test]
fn live_each_phase_s_samples_carry_times_within_its_interval() {
    let _rec = recording();
    if !perf_ok() {
        return;
    }
    let d = tempdir();
    let Some(phases) = build_workload(d.path(), "phases", &[]) else {
        return;
    };
    let printed = d.path().join("phases.txt");
    record_with(
        d.path(),
        &["-g"],
        &[phases.to_str().unwrap(), printed.to_str().unwrap()],
    );
    let s = d.path().join("s");
    let (header, version) = profkit_eventlog::read_header(&s.join("session.pkl")).unwrap();
    // Version 7: every live session may hold JIT code (issue 29).
    assert_eq!(version, 7);
    assert!(header.event.sample_times);
    let start = header.start_monotonic_ns;
    let text = std::fs::read_to_string(&printed).unwrap();
    let ms5 = 5_000_000;
    for line in text.lines() {
        let mut f = line.split_whitespace();
        let (name, lo, hi) = (
            f.next().unwrap(),
            f.next().unwrap().parse::<u64>().unwrap(),
            f.next().unwrap().parse::<u64>().unwrap(),
        );
        let (all, _) = samples(&s, start, None, name);
        let (near, _) = samples(&s, start, Some((lo - ms5, hi + ms5)), name);
        let (inside, total_inside) = samples(&s, start, Some((lo, hi)), name);
        let near_share = 100.0 * near as f64 / all as f64;
        let purity = 100.0 * inside as f64 / total_inside as f64;
        eprintln!(
            "{name}: {all} samples, {near} ({near_share:.2} %) within its interval ± 5 ms; \
             its window holds {total_inside} samples, {purity:.2} % {name}"
        );
        assert!(all > 1500, "{name}: too few samples ({all})");
        assert!(
            near_share >= 99.0,
            "{name}: {near_share:.2} % within ± 5 ms"
        );
        assert!(purity >= 99.0, "{name}: its window is {purity:.2} % {name}");
    }
    assert_eq!(text.lines().count(), 4, "{text}");
}
