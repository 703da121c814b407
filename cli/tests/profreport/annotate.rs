//! Live, root: `--annotate` on a function with two loops, the first
//! running three times the iterations of the second (testdata/workloads/
//! loops.c): per source line the first loop holds 75 % of the function's
//! samples and the second 25 %; per instruction the counts of a perf
//! recording, imported, agree with `perf annotate --stdio` on the same
//! file. Skipped with a printed reason where perf_event_open, cc or perf
//! are missing, unless PROFKIT_REQUIRE_PERF=1, where that is a failure.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use crate::live::build_workload;
use crate::util::*;

use profkit_testsupport::{perf_ok, skip};

/// The annotation rows of a JSON report (`annotation_rows`).
fn annotation_rows(v: &serde_json::Value) -> Vec<serde_json::Value> {
    v["annotation_rows"].as_array().cloned().unwrap_or_default()
}

/// The line numbers of loops.c whose text contains `marker`.
fn lines_with(marker: &str) -> Vec<u64> {
    let text = std::fs::read_to_string(testdata().join("workloads/loops.c")).unwrap();
    text.lines()
        .enumerate()
        .filter(|(_, l)| l.contains(marker))
        .map(|(i, _)| i as u64 + 1)
        .collect()
}

#[test]
fn live_annotate_splits_two_loops_three_to_one_per_source_line() {
    let _rec = recording();
    if !perf_ok() {
        return;
    }
    let d = tempdir();
    let Some(loops) = build_workload(d.path(), "loops", &[]) else {
        return;
    };
    crate::live::record(d.path(), &[loops.to_str().unwrap(), "300"]);
    let s = d.path().join("s");
    let v = profreport(&[
        "--session-dir",
        s.to_str().unwrap(),
        "--annotate=two_loops",
        "--format",
        "json",
    ])
    .expect(0)
    .json();
    // The loop control (`for`) lines count with their loop's body.
    let first: Vec<u64> = [
        lines_with("/* first loop */"),
        lines_with("i < 3 * ITERATIONS"),
    ]
    .concat();
    let second: Vec<u64> = [
        lines_with("/* second loop */"),
        lines_with("i < ITERATIONS;"),
    ]
    .concat();
    assert_eq!((first.len(), second.len()), (3, 3), "loops.c changed");
    let (mut a, mut b, mut other) = (0, 0, 0);
    for r in annotation_rows(&v) {
        if r["function"] != "two_loops" || r["address"].is_string() {
            continue;
        }
        let line = r["line"].as_u64().unwrap();
        let n = r["samples"].as_u64().unwrap();
        if first.contains(&line) {
            a += n;
        } else if second.contains(&line) {
            b += n;
        } else {
            other += n;
        }
    }
    let share = 100.0 * a as f64 / (a + b).max(1) as f64;
    eprintln!("two_loops: first loop {a}, second {b} samples ({share:.2} % : {:.2} %), other lines {other}", 100.0 - share);
    assert!(a + b > 1000, "too few samples: {v:#}");
    assert!(
        (share - 75.0).abs() <= 3.0,
        "first loop {share:.2} % (want 75 ± 3)"
    );
    assert!(other * 100 <= a + b, "{other} samples on other lines");
}

/// perf annotate's per-instruction percentages of `func` (address →
/// percent of the function), from its `--stdio` output.
fn perf_annotate(perf_data: &Path, func: &str) -> Option<BTreeMap<u64, f64>> {
    let out = Command::new("perf")
        .args(["annotate", "--stdio", "-i"])
        .arg(perf_data)
        .args(["-s", func])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut per = BTreeMap::new();
    for l in text.lines() {
        // "   46.35 :   115f:   lea    (%rax,%rdx,1),%rcx"
        let Some((pct, rest)) = l.split_once(" : ") else {
            continue;
        };
        let Ok(p) = pct.trim().parse::<f64>() else {
            continue;
        };
        let Some((addr, _)) = rest.trim().split_once(':') else {
            continue;
        };
        if let Ok(a) = u64::from_str_radix(addr.trim(), 16) {
            per.insert(a, p);
        }
    }
    (!per.is_empty()).then_some(per)
}

#[test]
fn live_annotate_per_instruction_agrees_with_perf_annotate() {
    let _rec = recording();
    if !perf_ok() {
        return;
    }
    if Command::new("perf").arg("--version").output().is_err() {
        skip("no perf (apt-get install linux-perf)");
        return;
    }
    let d = tempdir();
    let Some(loops) = build_workload(d.path(), "loops", &[]) else {
        return;
    };
    let data = d.path().join("perf.data");
    // --no-buildid: perf 6.1 crashes collecting build-ids while any
    // profkit session (another test's) has an event with build_id open.
    let rec = Command::new("perf")
        .args([
            "record",
            "-q",
            "--no-buildid",
            "-e",
            "cpu-clock",
            "-F",
            "4000",
            "-o",
        ])
        .arg(&data)
        .arg(&loops)
        .arg("200")
        .output()
        .expect("perf record");
    assert!(
        rec.status.success(),
        "perf record: {}",
        String::from_utf8_lossy(&rec.stderr)
    );
    let Some(theirs) = perf_annotate(&data, "two_loops") else {
        panic!("perf annotate gave no per-instruction lines for two_loops");
    };
    let v = profreport(&[
        "--import",
        data.to_str().unwrap(),
        "--annotate=two_loops",
        "--assembly",
        "--format",
        "json",
    ])
    .expect(0)
    .json();
    let mut ours: BTreeMap<u64, (u64, f64)> = BTreeMap::new();
    for r in annotation_rows(&v) {
        if r["function"] != "two_loops" {
            continue;
        }
        let Some(a) = r["address"].as_str() else {
            continue;
        };
        let a = u64::from_str_radix(a.trim_start_matches("0x"), 16).unwrap();
        ours.insert(
            a,
            (
                r["samples"].as_u64().unwrap(),
                r["percent"].as_f64().unwrap(),
            ),
        );
    }
    let total: u64 = ours.values().map(|v| v.0).sum();
    eprintln!(
        "two_loops: {total} samples imported; per instruction (address: profkit % / perf %): {}",
        theirs
            .iter()
            .filter(|(_, &p)| p > 0.0)
            .map(|(a, p)| format!("{a:x}: {:.2}/{p:.2}", ours.get(a).map_or(-1.0, |v| v.1)))
            .collect::<Vec<_>>()
            .join(", ")
    );
    assert!(total > 500, "too few samples: {v:#}");
    assert_eq!(
        ours.keys().collect::<Vec<_>>(),
        theirs.keys().collect::<Vec<_>>(),
        "the same instructions"
    );
    for (a, p) in &theirs {
        let mine = ours[a].1;
        // perf prints two decimals: the same count gives the same figure
        // to its rounding.
        assert!(
            (mine - p).abs() <= 0.006,
            "at {a:#x}: profkit {mine:.4} %, perf annotate {p:.2} %"
        );
    }
}

/// Issue 25 (4): a user's function compiled with `#line 1 "/etc/shadow"`
/// made root's `profreport --annotate` print the whole file. A file at its
/// recorded path is shown only if the binary's owner could read it; under
/// a `--source-dir` root names, it is shown.
#[test]
fn live_annotate_does_not_show_a_file_the_binarys_owner_could_not_read() {
    use std::os::unix::fs::PermissionsExt;
    let _rec = recording();
    if !perf_ok() {
        return;
    }
    let Some(user) = profkit_testsupport::ThrowawayUser::create() else {
        return;
    };
    let d = tempdir();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let secret = d.path().join("secret.txt");
    std::fs::write(&secret, "TOP-SECRET root:$6$hash\n".repeat(20)).unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let src = d.path().join("evil.c");
    std::fs::write(
        &src,
        format!(
            "#line 1 \"{}\"\nvolatile unsigned long x;\nint main(void) {{ for (unsigned long i = 0; \
             i < 400000000UL; i++) x += i; return 0; }}\n",
            secret.display()
        ),
    )
    .unwrap();
    let evil = d.path().join("evil");
    if !compile(
        Command::new("cc")
            .args(["-O1", "-g", "-o"])
            .arg(&evil)
            .arg(&src),
        "C compiler (cc)",
    ) {
        return;
    }
    user.give(&evil);
    let as_user = [
        "/usr/bin/setpriv".to_owned(),
        format!("--reuid={}", user.uid),
        format!("--regid={}", user.gid),
        "--clear-groups".to_owned(),
        "--".to_owned(),
        evil.display().to_string(),
    ];
    let args: Vec<&str> = as_user.iter().map(String::as_str).collect();
    crate::live::record(d.path(), &args);
    let s = d.path().join("s");
    let run = profreport(&["--session-dir", s.to_str().unwrap(), "--annotate=main"]).expect(0);
    assert!(
        !run.stdout.contains("TOP-SECRET"),
        "a file the binary's owner cannot read was shown: {}",
        run.stdout
    );
    assert!(
        run.stdout.contains("not shown") && run.stdout.contains(&format!("uid {}", user.uid)),
        "{}",
        run.stdout
    );
    // Where root names the directory, it is shown.
    let dir = d.path().to_str().unwrap();
    let run = profreport(&[
        "--session-dir",
        s.to_str().unwrap(),
        "--annotate=main",
        "--source-dir",
        dir,
    ])
    .expect(0);
    assert!(run.stdout.contains("TOP-SECRET"), "{}", run.stdout);
}
