//! Live: record workloads with known shares of time on this kernel, then
//! check that profreport finds those shares. Skipped with a printed reason
//! when perf events cannot be opened (or there is no C compiler, or one
//! CPU), unless PROFKIT_REQUIRE_PERF=1 (CI), where that is a failure.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::util::*;

fn required() -> bool {
    std::env::var("PROFKIT_REQUIRE_PERF").as_deref() == Ok("1")
}

fn skip(why: &str) -> bool {
    if required() {
        panic!("PROFKIT_REQUIRE_PERF=1 but {why}");
    }
    eprintln!("SKIP: {why}");
    false
}

/// True if cpu-clock sampling works here.
fn perf_ok() -> bool {
    let cfg =
        profkit_perf::SamplerConfig::new(profkit_perf::EventSpec::parse("cpu-clock").unwrap());
    match profkit_perf::Sampler::open(&cfg) {
        Ok(_) => true,
        Err(e) => skip(&format!("perf events cannot be opened here: {e}")),
    }
}

/// Builds testdata/workloads/shares.c into `dir`, with a build-id of its
/// own: two identical builds share a build-id, hence a cookie, and the
/// sync stage names a cookie after the first path it saw the binary at —
/// possibly the other test's copy, deleted by the time of the report.
fn build_shares(dir: &Path) -> Option<PathBuf> {
    let out = dir.join("shares");
    let src = testdata().join("workloads/shares.c");
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let id = format!("-Wl,--build-id=0x{:08x}{nanos:032x}", std::process::id());
    let status = Command::new("cc")
        .args([
            "-O1",
            "-g",
            "-fno-omit-frame-pointer",
            "-pthread",
            &id,
            "-o",
        ])
        .arg(&out)
        .arg(&src)
        .status();
    match status {
        Ok(s) if s.success() => Some(out),
        Ok(s) => {
            skip(&format!("cc failed on {} ({s})", src.display()));
            None
        }
        Err(e) => {
            skip(&format!("no C compiler (cc: {e})"));
            None
        }
    }
}

fn record(dir: &Path, args: &[&str]) {
    let mut all = vec!["record", "-F", "4000", "--session-dir", "s", "--"];
    all.extend_from_slice(args);
    let run = profctl(dir, &all);
    assert_eq!(run.code, 0, "profctl record: {}{}", run.stdout, run.stderr);
}

fn report(dir: &Path, args: &[&str]) -> serde_json::Value {
    let s = dir.join("s");
    let mut all = vec!["--session-dir", s.to_str().unwrap(), "--format", "json"];
    all.extend_from_slice(args);
    profreport(&all).expect(0).json()
}

#[test]
fn live_known_ratio_is_found_within_3_points() {
    if !perf_ok() {
        return;
    }
    let d = tempdir();
    let Some(shares) = build_shares(d.path()) else {
        return;
    };
    // About 1.5 s of work: ~6000 samples at 4 kHz, so the sampling error of
    // a 2/3 share is about 0.6 points.
    record(d.path(), &[shares.to_str().unwrap(), "ratio", "150"]);
    let v = report(d.path(), &["-l"]);
    assert!(
        samples_of(&v, "f_a") > 0,
        "f_a not found; warnings: {}",
        v["warnings"]
    );
    let (a, b) = (percent_of(&v, "f_a"), percent_of(&v, "f_b"));
    eprintln!(
        "f_a {a:.2} %, f_b {b:.2} % of {} samples",
        v["total_samples"]
    );
    assert!(
        (a - 200.0 / 3.0).abs() <= 3.0,
        "f_a at {a} %, expected 66.7 ± 3"
    );
    assert!(
        (b - 100.0 / 3.0).abs() <= 3.0,
        "f_b at {b} %, expected 33.3 ± 3"
    );
}

#[test]
fn live_pinned_threads_show_on_their_own_cpus() {
    if !perf_ok() {
        return;
    }
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if cpus < 2 {
        skip("one CPU: cannot pin two threads apart");
        return;
    }
    let d = tempdir();
    let Some(shares) = build_shares(d.path()) else {
        return;
    };
    record(d.path(), &[shares.to_str().unwrap(), "pinned", "100"]);
    let v = report(d.path(), &["-l", "--separate=cpu"]);
    let on = |symbol: &str, cpu: u64| -> u64 {
        rows(&v)
            .iter()
            .filter(|r| r["symbol"] == symbol && r["cpu"] == cpu)
            .map(|r| r["samples"].as_u64().unwrap())
            .sum()
    };
    for (symbol, home, away) in [("f_cpu0", 0, 1), ("f_cpu1", 1, 0)] {
        let (h, a) = (on(symbol, home), on(symbol, away));
        eprintln!("{symbol}: {h} samples on cpu{home}, {a} on cpu{away}");
        assert!(h > 200, "{symbol}: only {h} samples on its CPU");
        assert_eq!(a, 0, "{symbol} ran on cpu{away}");
        // Within its CPU it is nearly everything.
        let pct = rows(&v)
            .iter()
            .find(|r| r["symbol"] == symbol && r["cpu"] == home)
            .and_then(|r| r["percent"].as_f64())
            .unwrap();
        assert!(pct > 90.0, "{symbol}: {pct} % of cpu{home}");
    }
    // The text layout has one samples/% pair per CPU.
    let s = d.path().join("s");
    let run = profreport(&["--session-dir", s.to_str().unwrap(), "-l", "--separate=cpu"]).expect(0);
    assert!(run.stdout.contains("cpu:0") && run.stdout.contains("cpu:1"));
}

/// Waits until `path` exists (the daemon writes its pid file).
fn wait_for(path: &Path) {
    for _ in 0..500 {
        if path.exists() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("{} never appeared", path.display());
}

#[test]
fn live_running_killed_and_stopped_sessions() {
    if !perf_ok() {
        return;
    }
    let d = tempdir();
    let s = d.path().join("s");
    let sd = s.to_str().unwrap();
    let run = profctl(d.path(), &["start", "-F", "1000", "--session-dir", sd]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let mut busy = Command::new("sh")
        .args(["-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done"])
        .spawn()
        .unwrap();
    busy.wait().unwrap();
    let run = profctl(d.path(), &["dump", "--session-dir", sd]);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);

    // Running: every complete chunk is read.
    let v = profreport(&["--session-dir", sd, "--format", "json"])
        .expect(0)
        .json();
    let state = v["sessions"][0]["state"].as_str().unwrap().to_owned();
    assert!(state.starts_with("running"), "{state}");
    assert!(v["samples_read"].as_u64().unwrap() > 0, "{v:#}");
    assert_eq!(v["lost"]["source"], "markers");

    // Killed mid-run: no footer; the report still works and says so.
    wait_for(&s.join("daemon.pid"));
    let pid: i32 = std::fs::read_to_string(s.join("daemon.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    for _ in 0..500 {
        if !Path::new(&format!("/proc/{pid}")).exists() {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let run = profreport(&["--session-dir", sd]).expect(0);
    assert!(
        run.stdout.contains("not stopped cleanly"),
        "{}{}",
        run.stdout,
        run.stderr
    );

    // Stopping the dead session finalizes it: a footer, "stopped".
    let run = profctl(d.path(), &["stop", "--session-dir", sd]);
    if run.code == 0 {
        let v = profreport(&["--session-dir", sd, "--format", "json"])
            .expect(0)
            .json();
        assert_eq!(v["sessions"][0]["state"], "stopped", "{v:#}");
        assert_eq!(v["lost"]["source"], "footer");
    } else {
        eprintln!("note: stop after a kill: {}{}", run.stdout, run.stderr);
    }
}
