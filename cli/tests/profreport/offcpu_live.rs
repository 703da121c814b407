//! Live off-CPU fidelity: testdata/workloads/offcpu.c's worker sleeps
//! 30 ms in wait_sleep, waits 10 ms on a pipe in wait_pipe and 20 ms on a
//! mutex in wait_mutex, computes 2 ms, round after round, and measures its
//! own waits and lifetime. `profctl record --off-cpu` (frame pointers and
//! DWARF) must find each function's share of the worker's blocked time
//! within 2 points of the program's own clock, and `--wall` the worker's
//! on-CPU + blocked + runnable time within 2 % of its lifetime.

use std::collections::BTreeMap;

use crate::live::build_workload;
use crate::util::*;

use profkit_testsupport::perf_ok;

/// The worker's own figures: `worker tid=N lifetime_ns=L sleep_ns=S ...`.
fn own_figures(stdout: &str) -> BTreeMap<String, u64> {
    let line = stdout
        .lines()
        .find(|l| l.starts_with("worker "))
        .unwrap_or_else(|| panic!("no worker line in {stdout:?}"));
    line.split_whitespace()
        .skip(1)
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.parse().unwrap()))
        .collect()
}

fn fidelity(flags: &[&str]) {
    let d = tempdir();
    let Some(_) = build_workload(d.path(), "offcpu", &["-pthread"]) else {
        return;
    };
    let mut all = vec!["record", "-F", "4000", "--off-cpu", "--session-dir", "s"];
    all.extend_from_slice(flags);
    all.extend_from_slice(&["--", "./offcpu", "25"]);
    let run = profctl(d.path(), &all);
    assert_eq!(run.code, 0, "profctl record: {}{}", run.stdout, run.stderr);
    let own = own_figures(&run.stdout);
    let tid = own["tid"];
    let s = d.path().join("s");
    let s = s.to_str().unwrap();
    let spec = format!("tid:{tid}");
    let v = profreport(&[
        "--session-dir",
        s,
        "--format",
        "json",
        "--off-cpu",
        "--children",
        &spec,
    ])
    .expect(0)
    .json();
    assert_eq!(v["unit"], "ns");
    let inclusive = |sym: &str| -> u64 {
        rows(&v)
            .iter()
            .filter(|r| r["symbol"] == sym)
            .map(|r| r["inclusive"].as_u64().unwrap())
            .max()
            .unwrap_or(0)
    };
    let waits = [
        ("wait_sleep", own["sleep_ns"]),
        ("wait_pipe", own["pipe_ns"]),
        ("wait_mutex", own["mutex_ns"]),
    ];
    let own_total: u64 = waits.iter().map(|w| w.1).sum();
    let found: Vec<(&str, u64)> = waits.iter().map(|&(f, _)| (f, inclusive(f))).collect();
    let found_total: u64 = found.iter().map(|f| f.1).sum();
    for ((f, own_ns), (_, ns)) in waits.iter().zip(&found) {
        let own_pct = 100.0 * *own_ns as f64 / own_total as f64;
        let pct = 100.0 * *ns as f64 / found_total.max(1) as f64;
        eprintln!(
            "{flags:?} {f}: {:.1} ms, {pct:.1} % of the waits; the program's clock {:.1} ms, {own_pct:.1} %",
            *ns as f64 / 1e6,
            *own_ns as f64 / 1e6
        );
        assert!(
            (pct - own_pct).abs() <= 2.0,
            "{flags:?}: {f} has {pct:.1} % of the worker's waits, the program measured {own_pct:.1} %"
        );
    }
    // And the waits are nearly all of the worker's blocked time.
    assert!(
        found_total as f64 >= 0.95 * own_total as f64,
        "{flags:?}: the three waits add up to {found_total} ns of the program's {own_total}"
    );
    // --wall: on + blocked + runnable = the worker's lifetime.
    let w = profreport(&["--session-dir", s, "--format", "json", "--wall"])
        .expect(0)
        .json();
    let t = w["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tid"].as_u64() == Some(tid))
        .unwrap_or_else(|| panic!("no thread {tid} in {w}"))
        .clone();
    let total = t["total_ns"].as_u64().unwrap();
    let life = own["lifetime_ns"];
    eprintln!(
        "{flags:?} worker: on {} + blocked {} + runnable {} = {total} ns; lifetime {life} ns",
        t["on_cpu_ns"], t["blocked_ns"], t["runnable_ns"]
    );
    assert!(
        (total as f64 - life as f64).abs() <= 0.02 * life as f64,
        "{flags:?}: the worker's on + blocked + runnable is {total} ns, its lifetime {life} ns"
    );
}

#[test]
fn live_off_cpu_shares_and_wall_time_match_the_programs_own_clock_with_frame_pointers() {
    let _rec = recording();
    if !perf_ok() {
        return;
    }
    fidelity(&[]);
}

#[test]
fn live_off_cpu_shares_and_wall_time_match_the_programs_own_clock_with_dwarf() {
    let _rec = recording();
    if !perf_ok() {
        return;
    }
    fidelity(&["--call-graph", "dwarf"]);
}
