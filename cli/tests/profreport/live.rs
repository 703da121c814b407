//! Live: record workloads with known shares of time on this kernel, then
//! check that profreport finds those shares. Skipped with a printed reason
//! when perf events cannot be opened (or there is no C compiler, or one
//! CPU), unless PROFKIT_REQUIRE_PERF=1 (CI), where that is a failure.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::util::*;

use profkit_testsupport::{perf_ok, skip};

/// Builds testdata/workloads/shares.c into `dir`, with a build-id of its
/// own: two identical builds share a build-id, hence a cookie, and the
/// sync stage names a cookie after the first path it saw the binary at —
/// possibly the other test's copy, deleted by the time of the report.
pub(crate) fn build_shares(dir: &Path) -> Option<PathBuf> {
    build_workload(dir, "shares", &["-pthread"])
}

/// Builds testdata/workloads/NAME.c into `dir` with frame pointers, no
/// sibling calls and a build-id of its own.
pub(crate) fn build_workload(dir: &Path, name: &str, extra: &[&str]) -> Option<PathBuf> {
    let out = dir.join(name);
    let src = testdata().join(format!("workloads/{name}.c"));
    compile(
        Command::new("cc")
            .args([
                "-O1",
                "-g",
                "-fno-omit-frame-pointer",
                "-fno-optimize-sibling-calls",
                &unique_build_id(),
            ])
            .args(extra)
            .arg("-o")
            .arg(&out)
            .arg(&src),
        "C compiler (cc)",
    )
    .then_some(out)
}

/// `profctl record -F 4000 --session-dir s -- ARGS` in `dir`.
pub(crate) fn record(dir: &Path, args: &[&str]) {
    record_with(dir, &[], args);
}

/// [`record`] with more `profctl record` flags.
pub(crate) fn record_with(dir: &Path, flags: &[&str], args: &[&str]) {
    let mut all = vec!["record", "-F", "4000", "--session-dir", "s"];
    all.extend_from_slice(flags);
    all.push("--");
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
    let _rec = recording();
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
    let _rec = recording();
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
    let _rec = recording();
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

#[test]
fn live_callgraph_callers_and_inclusive_shares_within_3_points() {
    let _rec = recording();
    if !perf_ok() {
        return;
    }
    let d = tempdir();
    let Some(bin) = build_workload(d.path(), "callgraph", &[]) else {
        return;
    };
    // ~1.2 s of work at 4 kHz: ~5000 samples.
    let run = profctl(
        d.path(),
        &[
            "record",
            "-g",
            "-F",
            "4000",
            "--session-dir",
            "s",
            "--",
            bin.to_str().unwrap(),
            "150",
        ],
    );
    assert_eq!(
        run.code, 0,
        "profctl record -g: {}{}",
        run.stdout, run.stderr
    );
    let v = report(d.path(), &["-c", "--children"]);
    let entries = v["callgraph"]["entries"].as_array().unwrap();
    let entry = |s: &str| {
        entries
            .iter()
            .find(|e| e["symbol"] == s)
            .unwrap_or_else(|| panic!("no entry {s}; warnings {}", v["warnings"]))
    };
    let caller = |e: &serde_json::Value, s: &str| {
        e["callers"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["symbol"] == s)
            .and_then(|a| a["percent"].as_f64())
            .unwrap_or(0.0)
    };
    let c = entry("c");
    let (via_a, via_b) = (caller(c, "a"), caller(c, "b"));
    let total = v["total_samples"].as_f64().unwrap();
    let share = |s: &str| entry(s)["total"].as_f64().unwrap() * 100.0 / total;
    let (a, b) = (share("a"), share("b"));
    eprintln!(
        "callers of c: a {via_a:.2} %, b {via_b:.2} %; inclusive a {a:.2} %, b {b:.2} % of {total} samples"
    );
    assert!((via_a - 100.0 / 3.0).abs() <= 3.0, "c via a: {via_a}");
    assert!((via_b - 200.0 / 3.0).abs() <= 3.0, "c via b: {via_b}");
    assert!((a - 100.0 / 3.0).abs() <= 3.0, "inclusive a: {a}");
    assert!((b - 200.0 / 3.0).abs() <= 3.0, "inclusive b: {b}");
}

/// A copy of `data` whose MMAP2 records claim a build-id only when they
/// hold one. Works around perf 6.1 failing (an assertion, then a stack
/// smash) on files where a 6.18 kernel set the build-id bit of MMAP2
/// records that carry device and inode: seen while another session with
/// `build_id` (any profkit session) was open on the machine.
pub(crate) fn fix_mmap2_build_id_bits(data: &Path) -> PathBuf {
    let mut d = std::fs::read(data).unwrap();
    let u64_at = |d: &[u8], o: usize| u64::from_le_bytes(d[o..o + 8].try_into().unwrap());
    let (off, size) = (u64_at(&d, 40) as usize, u64_at(&d, 48) as usize);
    let mut p = off;
    while p + 8 <= (off + size).min(d.len()) {
        let ty = u32::from_le_bytes(d[p..p + 4].try_into().unwrap());
        let misc = u16::from_le_bytes(d[p + 4..p + 6].try_into().unwrap());
        let sz = u16::from_le_bytes(d[p + 6..p + 8].try_into().unwrap()) as usize;
        if sz == 0 {
            break;
        }
        if ty == 10 && misc & 0x4000 != 0 && d.get(p + 8 + 32).is_some_and(|&n| n > 20) {
            d[p + 4..p + 6].copy_from_slice(&(misc & !0x4000).to_le_bytes());
        }
        p += sz;
    }
    let out = data.with_extension("fixed");
    std::fs::write(&out, d).unwrap();
    out
}

/// `perf report`'s rows: (percent, symbol), most first.
pub(crate) fn perf_report(perf: &str, data: &Path) -> Option<Vec<(f64, String)>> {
    let run = |data: &Path| {
        Command::new(perf)
            .args([
                "report",
                "--stdio",
                "--no-children",
                "-F",
                "overhead,sym",
                "-q",
                "-i",
            ])
            .arg(data)
            .output()
            .ok()
    };
    let mut out = run(data)?;
    if !out.status.success() {
        eprintln!(
            "note: perf report failed ({}); again on a copy with MMAP2 build-id bits fixed",
            String::from_utf8_lossy(&out.stderr).trim()
        );
        out = run(&fix_mmap2_build_id_bits(data))?;
    }
    if !out.status.success() {
        skip(format!(
            "perf report failed on {}: {}",
            data.display(),
            String::from_utf8_lossy(&out.stderr)
        ));
        return None;
    }
    let text = String::from_utf8_lossy(&out.stdout);
    let rows = text
        .lines()
        .filter_map(|l| {
            let (pct, rest) = l.trim().split_once('%')?;
            let sym = rest.trim().split_once("] ")?.1.trim().to_owned();
            Some((pct.trim().parse().ok()?, sym))
        })
        .collect();
    Some(rows)
}

/// `perf record ARGS`; again with `--no-buildid` if perf fails collecting
/// build-ids (see [`fix_mmap2_build_id_bits`]).
pub(crate) fn perf_record(perf: &str, dir: &Path, data: &Path, args: &[&str]) -> bool {
    for extra in [&[][..], &["--no-buildid"][..]] {
        let _ = std::fs::remove_file(data);
        let out = Command::new(perf)
            .arg("record")
            .args(extra)
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap();
        if out.status.success() && data.exists() {
            return true;
        }
        eprintln!(
            "note: perf record {extra:?} failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    skip("perf record failed");
    false
}

#[test]
fn live_perf_data_import_reports_the_same_top_symbols_as_perf_report() {
    let _rec = recording();
    let perf = std::env::var("PERF").unwrap_or_else(|_| "/usr/bin/perf".into());
    if !Path::new(&perf).exists() {
        eprintln!("SKIP: no perf at {perf} (set PERF=...)");
        return;
    }
    if !perf_ok() {
        return;
    }
    let d = tempdir();
    let Some(shares) = build_shares(d.path()) else {
        return;
    };
    let Some(cg) = build_workload(d.path(), "callgraph", &[]) else {
        return;
    };
    for (name, cmd, g) in [
        (
            "flat.data",
            vec![shares.to_str().unwrap(), "ratio", "100"],
            false,
        ),
        ("g.data", vec![cg.to_str().unwrap(), "100"], true),
    ] {
        let data = d.path().join(name);
        let mut args = vec!["-q", "-e", "cpu-clock", "-F", "4000", "--no-bpf-event"];
        if g {
            args.push("-g");
        }
        args.extend(["-o", data.to_str().unwrap(), "--"]);
        args.extend(&cmd);
        if !perf_record(&perf, d.path(), &data, &args) {
            return;
        }
        let Some(theirs) = perf_report(&perf, &data) else {
            return;
        };
        let run =
            profreport(&["--import", data.to_str().unwrap(), "-l", "--format", "json"]).expect(0);
        let v = run.json();
        let ours: Vec<(f64, String)> = rows(&v)
            .iter()
            .map(|r| {
                (
                    r["percent"].as_f64().unwrap(),
                    r["symbol"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        eprintln!("{name}: perf report {:?}", &theirs[..theirs.len().min(4)]);
        eprintln!("{name}: profreport  {:?}", &ours[..ours.len().min(4)]);
        // The symbols above 5 % are the same, in the same order, with the
        // same shares within a point.
        let top = |rows: &[(f64, String)]| -> Vec<String> {
            rows.iter()
                .filter(|(p, _)| *p >= 5.0)
                .map(|(_, s)| s.clone())
                .collect()
        };
        assert_eq!(top(&ours), top(&theirs), "{name}: top symbols differ");
        assert!(!top(&ours).is_empty());
        for (p, s) in theirs.iter().filter(|(p, _)| *p >= 5.0) {
            let mine = ours.iter().find(|(_, o)| o == s).unwrap().0;
            assert!(
                (mine - p).abs() <= 1.0,
                "{name}: {s} {mine} % against perf's {p} %"
            );
        }
        if g {
            // The imported call stacks split c's callers as recorded.
            let v = profreport(&["--import", data.to_str().unwrap(), "-c", "--format", "json"])
                .expect(0)
                .json();
            let c = v["callgraph"]["entries"]
                .as_array()
                .unwrap()
                .iter()
                .find(|e| e["symbol"] == "c")
                .cloned()
                .expect("c in the imported call graph");
            let via = |s: &str| {
                c["callers"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|a| a["symbol"] == s)
                    .and_then(|a| a["percent"].as_f64())
                    .unwrap_or(0.0)
            };
            eprintln!(
                "{name}: callers of c: a {:.2} %, b {:.2} %",
                via("a"),
                via("b")
            );
            assert!((via("a") - 100.0 / 3.0).abs() <= 3.0);
            assert!((via("b") - 200.0 / 3.0).abs() <= 3.0);
        }
    }
}

/// Percent per binary (image) of a JSON report.
fn per_image(v: &serde_json::Value) -> std::collections::BTreeMap<String, f64> {
    rows(v)
        .iter()
        .map(|r| {
            (
                r["image"].as_str().unwrap().to_owned(),
                r["percent"].as_f64().unwrap(),
            )
        })
        .collect()
}

/// One workload recorded at once by `perf record -a` and `profctl start
/// -a`: `profreport --import perf.data` and `profreport` on the native
/// session give each binary of the workload's process the same share
/// within 1.5 points (the process's samples only: idle CPUs are sampled
/// erratically by both). The two recordings go through one resolution
/// path, the sync stage, so they can only differ by sampling; the
/// workload works in turns of 10 ms, long against the 250 µs sampling
/// period, so two samplers count each turn alike (measured: within 0.3
/// points of each other on ~10 000 samples).
#[test]
fn live_perf_data_import_and_native_session_agree_per_binary() {
    let _rec = recording();
    let perf = std::env::var("PERF").unwrap_or_else(|_| "/usr/bin/perf".into());
    if !Path::new(&perf).exists() {
        skip(format!("no perf at {perf} (set PERF=...)"));
        return;
    }
    if !perf_ok() {
        return;
    }
    let d = tempdir();
    let Some(split) = build_workload(d.path(), "split", &[]) else {
        return;
    };
    let s = d.path().join("s");
    let sd = s.to_str().unwrap();
    let run = profctl(
        d.path(),
        &["start", "-a", "-F", "4000", "--session-dir", sd],
    );
    assert_eq!(run.code, 0, "profctl start: {}{}", run.stdout, run.stderr);
    let data = d.path().join("perf.data");
    let out = Command::new(&perf)
        .args([
            "record",
            "-q",
            "-a",
            "--no-buildid",
            "-e",
            "cpu-clock",
            "-F",
            "4000",
            "-o",
        ])
        .arg(&data)
        .arg("--")
        .arg(&split)
        .arg("3")
        .current_dir(d.path())
        .output()
        .unwrap();
    let run = profctl(d.path(), &["stop", "--session-dir", sd]);
    assert_eq!(run.code, 0, "profctl stop: {}{}", run.stdout, run.stderr);
    if !out.status.success() || !data.exists() {
        skip(format!(
            "perf record failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
        return;
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let pid = stdout
        .lines()
        .find_map(|l| l.strip_prefix("pid "))
        .unwrap_or_else(|| panic!("no pid in the workload's output: {stdout}"));
    let tgid = format!("tgid:{pid}");

    let native = profreport(&["--session-dir", sd, &tgid, "--format", "json"])
        .expect(0)
        .json();
    let imported = profreport(&[
        "--import",
        data.to_str().unwrap(),
        &tgid,
        "--format",
        "json",
    ])
    .expect(0)
    .json();
    let (n, i) = (per_image(&native), per_image(&imported));
    eprintln!(
        "native   {} samples: {n:?}\nimported {} samples: {i:?}",
        native["total_samples"], imported["total_samples"]
    );
    // The workload did split its time: its own code, libc, the kernel.
    for image in ["split", "libc.so.6", "[kernel.kallsyms]"] {
        let share = n.get(image).copied().unwrap_or(0.0);
        assert!(share > 10.0, "{image}: {share} % natively, expected > 10");
    }
    let total = |v: &serde_json::Value| v["total_samples"].as_u64().unwrap() as f64;
    assert!(
        (total(&native) / total(&imported) - 1.0).abs() < 0.1,
        "sample counts differ by more than 10 %"
    );
    for image in n.keys().chain(i.keys()) {
        let (a, b) = (
            n.get(image).copied().unwrap_or(0.0),
            i.get(image).copied().unwrap_or(0.0),
        );
        // Quiet: within 0.35 points (6 runs). With the other tests of
        // this binary running beside it, a gap of 1.13 points was seen
        // once (kernel 30.53 / 31.67): both samplers see the same process,
        // at different instants of a contended CPU. A resolution bug costs
        // whole binaries, or many points.
        assert!(
            (a - b).abs() <= 1.5,
            "{image}: {a} % natively, {b} % imported"
        );
    }
}
