//! Live, root: cgroup v2. Two different workloads, each in a cgroup of
//! its own: `profctl start -a --cgroups` then `profreport
//! --separate=cgroup` puts each one's functions under its own group path
//! (and `cgroup:GLOB` keeps one group); `profctl start -G PATH` records
//! only the chosen group. Skipped with a printed reason when perf, cc or
//! a writable cgroup v2 hierarchy is missing, unless
//! PROFKIT_REQUIRE_PERF=1, where that is a failure.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::live::build_workload;
use crate::util::*;

use profkit_testsupport::{perf_ok, skip};

/// The test's cgroups and the processes in them: on drop the processes
/// are killed and reaped first (a cgroup directory can only be removed
/// once empty), then the directories removed.
struct Groups {
    dirs: Vec<PathBuf>,
    kids: Vec<Child>,
}

impl Groups {
    /// None yet, or a skip when there is no cgroup v2 hierarchy.
    fn new() -> Option<(Groups, PathBuf)> {
        let Some(mount) = profkit_perf::cgroup2_mount() else {
            skip("no cgroup v2 hierarchy is mounted (/proc/self/mountinfo)");
            return None;
        };
        let g = Groups {
            dirs: Vec::new(),
            kids: Vec::new(),
        };
        Some((g, mount))
    }

    /// Makes `MOUNT/profkit-test-PID-NAME` and gives its cgroup path
    /// (`/profkit-test-PID-NAME`), or skips.
    fn add(&mut self, mount: &Path, name: &str) -> Option<String> {
        let rel = format!("profkit-test-{}-{name}", std::process::id());
        let dir = mount.join(&rel);
        if let Err(e) = std::fs::create_dir(&dir) {
            skip(format!("cannot create the cgroup {}: {e}", dir.display()));
            return None;
        }
        self.dirs.push(dir);
        Some(format!("/{rel}"))
    }

    /// Runs `prog args` inside group `i`: a shell moves itself into the
    /// group, then execs the program, so it never runs outside it.
    fn spawn(&mut self, i: usize, prog: &Path, args: &[&str]) {
        let procs = self.dirs[i].join("cgroup.procs");
        let child = Command::new("sh")
            .arg("-c")
            .arg("echo $$ > \"$0\" && exec \"$@\"")
            .arg(&procs)
            .arg(prog)
            .args(args)
            .stdout(Stdio::null())
            .spawn()
            .expect("sh");
        self.kids.push(child);
    }

    /// Pids in group `i` (`cgroup.procs`).
    fn pids(&self, i: usize) -> Vec<u32> {
        std::fs::read_to_string(self.dirs[i].join("cgroup.procs"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }
}

impl Drop for Groups {
    fn drop(&mut self) {
        for k in &mut self.kids {
            let _ = k.kill();
            let _ = k.wait();
        }
        for d in &self.dirs {
            for _ in 0..100 {
                if std::fs::remove_dir(d).is_ok() || !d.exists() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            if d.exists() {
                eprintln!("note: could not remove the cgroup {}", d.display());
            }
        }
    }
}

/// Records system-wide (with `flags`) into `dir/name` for about 2 s.
fn record_2s(dir: &Path, name: &str, flags: &[&str]) -> String {
    let mut args = vec!["start", "-F", "2000", "--session-dir", name];
    args.extend_from_slice(flags);
    profctl(dir, &args).expect(0);
    std::thread::sleep(Duration::from_secs(2));
    profctl(dir, &["stop", "--session-dir", name])
        .expect(0)
        .stdout
}

fn report(dir: &Path, name: &str, args: &[&str]) -> serde_json::Value {
    let s = dir.join(name);
    let mut all = vec![
        "--session-dir",
        s.to_str().unwrap(),
        "--format",
        "json",
        "-l",
    ];
    all.extend_from_slice(args);
    profreport(&all).expect(0).json()
}

/// Samples of rows whose symbol is one of `symbols` and (when given)
/// whose cgroup is `cgroup`.
fn samples(v: &serde_json::Value, symbols: &[&str], cgroup: Option<&str>) -> u64 {
    rows(v)
        .iter()
        .filter(|r| symbols.iter().any(|s| r["symbol"] == *s))
        .filter(|r| cgroup.is_none_or(|c| r["cgroup"] == c))
        .map(|r| r["samples"].as_u64().unwrap())
        .sum()
}

/// The functions of shares.c (`ratio`) and of spin.c.
const SHARES: &[&str] = &["f_a", "f_b", "tick"];
const SPIN: &[&str] = &["hot_alpha", "hot_beta", "step"];

#[test]
fn live_two_workloads_in_two_cgroups_are_separated_and_g_records_one() {
    let _rec = recording();
    if !perf_ok() {
        return;
    }
    let d = tempdir();
    let Some(shares) = build_workload(d.path(), "shares", &["-pthread"]) else {
        return;
    };
    let Some(spin) = build_workload(d.path(), "spin", &["-pthread"]) else {
        return;
    };
    let Some((mut groups, mount)) = Groups::new() else {
        return;
    };
    // A exists before the session (its path comes from the walk of the
    // hierarchy at start), B is made during it (PERF_RECORD_CGROUP).
    let Some(a) = groups.add(&mount, "a") else {
        return;
    };
    let a = a.as_str();

    // Both run until the guard kills them: far more work than the test
    // records.
    let (stop, b) = {
        let args = ["start", "-a", "--cgroups", "-F", "2000"];
        let mut all = args.to_vec();
        all.extend(["--session-dir", "s"]);
        profctl(d.path(), &all).expect(0);
        let b = groups.add(&mount, "b");
        groups.spawn(0, &shares, &["ratio", "1000000"]);
        groups.spawn(1, &spin, &["1000000000000000"]);
        std::thread::sleep(Duration::from_secs(2));
        let stop = profctl(d.path(), &["stop", "--session-dir", "s"]).expect(0);
        (stop.stdout, b)
    };
    let Some(b) = b else {
        return;
    };
    let b = b.as_str();
    assert_eq!(
        (groups.pids(0).len(), groups.pids(1).len()),
        (1, 1),
        "each group holds its program"
    );

    let v = report(d.path(), "s", &["--separate=cgroup"]);
    let total = v["total_samples"].as_u64().unwrap_or(0);
    let (sa, sb) = (samples(&v, SHARES, Some(a)), samples(&v, SPIN, Some(b)));
    let (sa_in_b, sb_in_a) = (samples(&v, SHARES, Some(b)), samples(&v, SPIN, Some(a)));
    // Samples per cgroup, every row.
    let mut per = std::collections::BTreeMap::<String, u64>::new();
    for r in rows(&v) {
        let c = r["cgroup"].as_str().unwrap_or("?").to_owned();
        *per.entry(c).or_default() += r["samples"].as_u64().unwrap_or(0);
    }
    eprintln!(
        "--cgroups: {total} samples; shares {sa} in {a} ({sa_in_b} in {b}), spin {sb} in {b} ({sb_in_a} in {a}); \
         {} rows, samples per cgroup {per:?}; stop said: {}",
        rows(&v).len(),
        stop.trim()
    );
    assert!(
        rows(&v).iter().all(|r| r["cgroup"].is_string()),
        "every row names its cgroup: {v:#}"
    );
    // 2 s on 2 CPUs at 2 kHz: about 8000 samples, most of them these
    // three busy threads' (seen: 2800 of shares, 4800 of spin; the
    // machine's other load can take a good part).
    assert!(sa > 300, "shares: {sa} samples in {a}; rows {v:#}");
    assert!(sb > 300, "spin: {sb} samples in {b}; rows {v:#}");
    assert_eq!(sa_in_b, 0, "shares' functions under {b}");
    assert_eq!(sb_in_a, 0, "spin's functions under {a}");
    // No function of either program shows under another cgroup either
    // (the root, or an id without a path).
    assert_eq!(samples(&v, SHARES, None), sa, "shares outside {a}");
    assert_eq!(samples(&v, SPIN, None), sb, "spin outside {b}");

    // cgroup:GLOB keeps one group's rows.
    let glob = format!("cgroup:/profkit-test-{}-a", std::process::id());
    let only_a = report(d.path(), "s", &["--separate=cgroup", &glob]);
    assert!(!rows(&only_a).is_empty());
    assert!(
        rows(&only_a).iter().all(|r| r["cgroup"] == a),
        "{glob} kept another cgroup: {only_a:#}"
    );
    assert_eq!(samples(&only_a, SHARES, None), sa);
    assert_eq!(samples(&only_a, SPIN, None), 0);
    let star = report(d.path(), "s", &["--separate=cgroup", "cgroup:*-b"]);
    assert!(rows(&star).iter().all(|r| r["cgroup"] == b), "{star:#}");
    assert_eq!(samples(&star, SPIN, None), sb);

    // -G A: only group A's program is sampled. The kernel checks the
    // task's cgroup at each sample, so nothing of B should be there.
    let stop = record_2s(d.path(), "g", &["-G", a]);
    let v = report(d.path(), "g", &[]);
    let (ga, gb) = (samples(&v, SHARES, None), samples(&v, SPIN, None));
    let target = v["sessions"][0]["target"].clone();
    eprintln!(
        "-G {a}: {} samples; shares {ga}, spin {gb}; target {target}; stop said: {}",
        v["total_samples"],
        stop.trim()
    );
    assert!(ga > 300, "-G {a}: only {ga} samples of shares: {v:#}");
    assert!(gb <= 5, "-G {a}: {gb} samples of spin (in {b})");

    // The way of kernels without PERF_SAMPLE_CGROUP (/proc/PID/cgroup once
    // per process), forced on this one: the same separation, and said.
    let start = Command::new(PROFCTL)
        .args([
            "start",
            "-a",
            "--cgroups",
            "-F",
            "2000",
            "--session-dir",
            "p",
        ])
        .current_dir(d.path())
        .env("PROFKIT_CGROUPS_FROM_PROC", "1")
        .env_remove("PROFKIT_SESSION_DIR")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&start.stderr).into_owned();
    assert!(start.status.success(), "{said}");
    assert!(
        said.contains("cgroups read from /proc/PID/cgroup"),
        "{said}"
    );
    std::thread::sleep(Duration::from_secs(2));
    profctl(d.path(), &["stop", "--session-dir", "p"]).expect(0);
    let v = report(d.path(), "p", &["--separate=cgroup"]);
    assert_eq!(v["cgroups"], "proc");
    let (pa, pb) = (samples(&v, SHARES, Some(a)), samples(&v, SPIN, Some(b)));
    eprintln!("/proc/PID/cgroup: shares {pa} in {a}, spin {pb} in {b}");
    assert!(pa > 300 && pb > 300, "{pa} in {a}, {pb} in {b}: {v:#}");
    assert_eq!(samples(&v, SHARES, None), pa, "shares outside {a}");
    assert_eq!(samples(&v, SPIN, None), pb, "spin outside {b}");
    let text = profreport(&["--session-dir", d.path().join("p").to_str().unwrap()])
        .expect(0)
        .stdout;
    assert!(
        text.contains("Cgroups:  read from /proc/PID/cgroup"),
        "{text}"
    );
}
