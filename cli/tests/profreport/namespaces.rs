//! Live, root: containers. A binary run from a tmpfs mounted only inside
//! `unshare -m` is named after its namespace is gone (the daemon kept it
//! in the session under its cookie), with the shares it has when run from the
//! host; a JIT map written to a private `/tmp` inside `unshare -p -f -m`
//! names the JavaScript functions as on the host. Skipped with a printed
//! reason when perf, cc, unshare or node are missing, unless
//! PROFKIT_REQUIRE_PERF=1, where that is a failure.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::*;

use profkit_testsupport::{perf_ok, skip};

/// Builds testdata/workloads/shares.c into `dir` with a build-id of its own.
fn build_shares(dir: &Path) -> Option<PathBuf> {
    crate::live::build_workload(dir, "shares", &["-pthread"])
}

fn unshare_ok() -> bool {
    match Command::new("unshare").args(["-m", "true"]).status() {
        Ok(s) if s.success() => true,
        Ok(s) => skip(format!("unshare -m true failed ({s})")),
        Err(e) => skip(format!("no unshare ({e})")),
    }
}

/// Starts a system-wide session `s` in `dir`, runs `cmd`, stops it.
fn system_wide(dir: &Path, cmd: &mut Command) -> String {
    profctl(dir, &["start", "-a", "-F", "4000", "--session-dir", "s"]).expect(0);
    let st = cmd.status();
    let stop = profctl(dir, &["stop", "--session-dir", "s"]).expect(0);
    assert!(st.as_ref().is_ok_and(|s| s.success()), "{cmd:?}: {st:?}");
    stop.stdout
}

fn report_l(dir: &Path) -> (serde_json::Value, String) {
    let s = dir.join("s");
    let r = profreport(&[
        "--session-dir",
        s.to_str().unwrap(),
        "--format",
        "json",
        "-l",
    ])
    .expect(0);
    (r.json(), r.stderr)
}

/// f_a's share of f_a + f_b, in percent.
fn ratio(v: &serde_json::Value) -> f64 {
    let (a, b) = (samples_of(v, "f_a"), samples_of(v, "f_b"));
    assert!(
        a + b > 0,
        "neither f_a nor f_b named; warnings: {}",
        v["warnings"]
    );
    100.0 * a as f64 / (a + b) as f64
}

#[test]
fn live_binary_in_a_private_mount_namespace_is_named_after_it_is_gone() {
    let _rec = recording();
    if !perf_ok() || !unshare_ok() {
        return;
    }
    let d = tempdir();
    let Some(shares) = build_shares(d.path()) else {
        return;
    };
    // From the host.
    let host = d.path().join("host");
    std::fs::create_dir(&host).unwrap();
    system_wide(&host, Command::new(&shares).args(["ratio", "150"]));
    let (v, _) = report_l(&host);
    let on_host = ratio(&v);
    // From a tmpfs only the namespace sees: the host has an empty
    // directory at that path, then nothing at all.
    let ns = d.path().join("ns");
    let mnt = d.path().join("mnt");
    std::fs::create_dir_all(&ns).unwrap();
    std::fs::create_dir_all(&mnt).unwrap();
    let inside = mnt.join("shares");
    let script = format!(
        "mount -t tmpfs ns-only {m} && cp {src} {bin} && {bin} ratio 150",
        m = mnt.display(),
        src = shares.display(),
        bin = inside.display()
    );
    let stop = system_wide(
        &ns,
        Command::new("unshare").args(["-m", "sh", "-c", &script]),
    );
    assert!(
        !inside.exists(),
        "the host never sees the namespace's tmpfs"
    );
    std::fs::remove_dir(&mnt).unwrap();
    let kept = d.path().join("ns/s/debug/.kept");
    assert!(kept.is_dir(), "nothing kept; profctl stop said: {stop}");
    assert!(
        stop.contains("containers: kept 1 binaries"),
        "profctl stop says what it kept: {stop}"
    );
    let (v, warnings) = report_l(&ns);
    let in_ns = ratio(&v);
    eprintln!(
        "f_a share of f_a+f_b: host {on_host:.2} %, private mount namespace {in_ns:.2} % ({} samples); {}",
        samples_of(&v, "f_a") + samples_of(&v, "f_b"),
        warnings.lines().find(|l| l.contains("shares")).unwrap_or("")
    );
    assert!(
        (on_host - in_ns).abs() <= 2.0,
        "host {on_host} % against namespace {in_ns} %"
    );
    // The copy kept of that very file names it: nothing to warn about.
    assert!(
        !warnings
            .lines()
            .any(|l| l.contains(&*inside.to_string_lossy())),
        "{warnings}"
    );
}

fn node() -> Option<PathBuf> {
    let node = PathBuf::from("/usr/bin/node");
    if node.exists() {
        Some(node)
    } else {
        skip("no node at /usr/bin/node");
        None
    }
}

const HOT_JS: &str =
    "function hotLoopAlpha(n){let x=0;for(let i=0;i<n;i++){x=(x*31+i)%1000003;}return x;}\
const end=Date.now()+1500;let s=0;while(Date.now()<end){s+=hotLoopAlpha(200000);}";

/// `node --perf-basic-prof -e JS` as pid 1 of its own pid and mount
/// namespaces with a private tmpfs on /tmp (where it writes its JIT map),
/// working in `cwd` (node leaves isolate-*.log files there).
fn node_in_pid_namespace(node: &Path, js: &str, cwd: &Path) -> Command {
    let script = format!(
        "mount -t tmpfs ns-tmp /tmp && exec {} --perf-basic-prof -e \"$0\"",
        node.display()
    );
    let mut c = Command::new("unshare");
    c.args(["-p", "-f", "-m", "--mount-proc", "sh", "-c", &script, js])
        .current_dir(cwd);
    c
}

/// Samples of rows whose symbol starts with `prefix`.
fn samples_starting(v: &serde_json::Value, prefix: &str) -> u64 {
    rows(v)
        .iter()
        .filter(|r| r["symbol"].as_str().is_some_and(|s| s.starts_with(prefix)))
        .map(|r| r["samples"].as_u64().unwrap_or(0))
        .sum()
}

#[test]
fn live_jit_map_in_a_private_pid_namespace_and_tmp_is_used() {
    let _rec = recording();
    if !perf_ok() || !unshare_ok() {
        return;
    }
    let Some(node) = node() else {
        return;
    };
    let _jit_files = TmpJitFiles::new();
    let d = tempdir();
    let host = d.path().join("host");
    std::fs::create_dir(&host).unwrap();
    system_wide(
        &host,
        Command::new(&node)
            .args(["--perf-basic-prof", "-e", HOT_JS])
            .current_dir(&host),
    );
    let (v, _) = report_l(&host);
    let on_host = samples_starting(&v, "JS:*hotLoopAlpha");
    let ns = d.path().join("ns");
    std::fs::create_dir(&ns).unwrap();
    let stop = system_wide(&ns, &mut node_in_pid_namespace(&node, HOT_JS, &ns));
    let (v, _) = report_l(&ns);
    let in_ns = samples_starting(&v, "JS:*hotLoopAlpha");
    let maps: Vec<String> = std::fs::read_dir(ns.join("s"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("perf-"))
        .collect();
    eprintln!(
        "JS:*hotLoopAlpha samples: host {on_host}, pid namespace {in_ns}; maps kept {maps:?}"
    );
    assert!(on_host > 0, "not named on the host: {}", v["warnings"]);
    assert!(
        in_ns * 2 >= on_host,
        "named in {in_ns} samples in the namespace against {on_host} on the host; stop said: {stop}"
    );
    // Thread rows: node is pid 1 of its namespace (sh exec'd it), shown
    // beside its host pid; nothing of the host run has namespace ids.
    let threads = |dir: &Path| {
        let s = dir.join("s");
        profreport(&[
            "--session-dir",
            s.to_str().unwrap(),
            "--format",
            "json",
            "--separate=thread",
        ])
        .expect(0)
        .json()["rows"]
            .as_array()
            .unwrap()
            .clone()
    };
    let rows = threads(&ns);
    let main = rows
        .iter()
        .find(|r| r["comm"] == "node" && r["tgid"] == r["tid"] && r["image"] == "node")
        .unwrap_or_else(|| panic!("no row of node's main thread: {rows:?}"));
    assert_eq!(
        (&main["ns_tgid"], &main["ns_tid"]),
        (&serde_json::json!(1), &serde_json::json!(1)),
        "{main}"
    );
    let host_pid = main["tgid"].as_u64().unwrap();
    assert!(host_pid != 1);
    let of_node: Vec<_> = rows.iter().filter(|r| r["tgid"] == host_pid).collect();
    assert!(
        of_node.iter().all(|r| r["ns_tgid"] == 1),
        "every row of node's threads carries its namespace pid: {of_node:?}"
    );
    let others = of_node.iter().filter(|r| r["tid"] != host_pid).count();
    let with_tid = of_node
        .iter()
        .filter(|r| r["tid"] != host_pid && r["ns_tid"].as_u64().is_some_and(|t| t > 1))
        .count();
    eprintln!(
        "node thread rows: {} ({others} other threads, {with_tid} with their namespace tid)",
        of_node.len()
    );
    assert!(
        threads(&host).iter().all(|r| r.get("ns_tgid").is_none()),
        "a host process has no namespace ids"
    );
}

/// Warm-up JavaScript for 1 s, then a function compiled and run only in
/// the last 120 ms before the process exits.
const LATE_JS: &str = "function warm(n){let x=0;for(let i=0;i<n;i++){x=(x*7+i)%1009;}return x;}\
function lateHotGamma(n){let x=0;for(let i=0;i<n;i++){x=(x*31+i)%1000003;}return x;}\
let s=0;const t0=Date.now();while(Date.now()<t0+1000){s+=warm(100000);}\
while(Date.now()<t0+1120){s+=lateHotGamma(200000);}";

/// A JIT map written in a private /tmp is read to its end after the
/// process, its namespace and its tmpfs are gone (the daemon holds the
/// open map): functions compiled in the last round are named.
#[test]
fn live_jit_functions_compiled_just_before_a_namespaced_process_exits_are_named() {
    let _rec = recording();
    if !perf_ok() || !unshare_ok() {
        return;
    }
    let Some(node) = node() else {
        return;
    };
    let d = tempdir();
    let stop = system_wide(
        d.path(),
        &mut node_in_pid_namespace(&node, LATE_JS, d.path()),
    );
    let (v, _) = report_l(d.path());
    let late = samples_starting(&v, "JS:*lateHotGamma");
    let warm = samples_starting(&v, "JS:*warm");
    // node's anonymous code rows without a name.
    let unnamed: u64 = rows(&v)
        .iter()
        .filter(|r| {
            r["image"]
                .as_str()
                .is_some_and(|i| i.starts_with("anon (tgid:"))
        })
        .filter(|r| r["symbol"].as_str().is_none_or(|s| !s.starts_with("JS:")))
        .map(|r| r["samples"].as_u64().unwrap_or(0))
        .sum();
    eprintln!("JS:*warm {warm}, JS:*lateHotGamma {late}, anonymous code unnamed {unnamed}; stop said: {stop}");
    assert!(warm > 0, "warm not named: {stop}");
    assert!(
        late > 0,
        "the function of the last 120 ms not named: {stop}"
    );
    assert!(
        unnamed * 20 <= warm + late + unnamed,
        "{unnamed} unnamed of {} samples in node's JIT code",
        warm + late + unnamed
    );
}

/// A binary of a private mount namespace that cannot be kept (it has no
/// build-id to file it under) is named in the report with the reason.
#[test]
fn live_binary_of_a_namespace_that_cannot_be_kept_is_named_with_the_reason() {
    let _rec = recording();
    if !perf_ok() || !unshare_ok() {
        return;
    }
    let d = tempdir();
    let Some(shares) =
        crate::live::build_workload(d.path(), "shares", &["-pthread", "-Wl,--build-id=none"])
    else {
        return;
    };
    let mnt = d.path().join("mnt");
    std::fs::create_dir_all(&mnt).unwrap();
    let inside = mnt.join("shares");
    let script = format!(
        "mount -t tmpfs ns-only {m} && cp {src} {bin} && {bin} ratio 40",
        m = mnt.display(),
        src = shares.display(),
        bin = inside.display()
    );
    let stop = system_wide(
        d.path(),
        Command::new("unshare").args(["-m", "sh", "-c", &script]),
    );
    std::fs::remove_dir(&mnt).unwrap();
    let (_, warnings) = report_l(d.path());
    let line = warnings
        .lines()
        .find(|l| l.contains("could not keep it from its container"))
        .unwrap_or_else(|| panic!("no reason given; warnings: {warnings}; stop said: {stop}"));
    eprintln!("{line}");
    assert!(line.contains(inside.to_str().unwrap()), "{line}");
    assert!(line.contains("no build-id"), "{line}");
}
