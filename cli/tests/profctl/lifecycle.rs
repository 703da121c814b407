//! The daemon's life: `start`, `status`, `dump`, `reset`, `stop`, `--foreground`;
//! one daemon per session directory, private session files, and a daemon's
//! end (SIGKILL, its session directory deleted).

use super::*;

#[test]
fn start_dump_status_stop_with_busy_workers_on_every_cpu() {
    if !perf_ok() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    let d = dir.to_str().unwrap();
    let _stop = StopOnDrop(std::path::PathBuf::from(d));
    let o = profctl(tmp.path(), &["start", "-F", "1000", "--session-dir", d]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("sampling started"), "{}", text(&o));
    let cpus = profkit_perf::online_cpus().unwrap();
    let mut workers: Vec<Child> = cpus.iter().map(|&c| busy_on(c)).collect();
    std::thread::sleep(Duration::from_millis(1200));
    let o = profctl(tmp.path(), &["dump", "--session-dir", d]);
    assert!(o.status.success(), "{}", text(&o));
    // Everything up to the dump is on disk and readable while the daemon runs.
    let (r, mid) = decode(&session(tmp.path()));
    assert!(r.footer().is_none() && !r.chunks().is_empty());
    let pids: Vec<u32> = workers.iter().map(|w| w.id()).collect();
    assert!(
        mid.per_cpu_pid.keys().any(|(_, p)| pids.contains(p)),
        "the workers' samples are readable after dump"
    );
    let o = profctl(tmp.path(), &["status", "--session-dir", d]);
    assert!(
        o.status.success() && text(&o).contains("running"),
        "{}",
        text(&o)
    );
    let t = text(&o);
    assert!(!t.contains('{') && !t.contains('"'), "no raw JSON: {t}");
    assert!(t.contains("event:    cpu-clock at 1000 Hz"), "{t}");
    assert!(t.contains("cpu  samples  lost  lost %"), "{t}");
    for cpu in &cpus {
        assert!(
            t.lines()
                .any(|l| l.split_whitespace().next() == Some(&cpu.to_string())),
            "a row for cpu {cpu}: {t}"
        );
    }
    let st = status_json(tmp.path(), d);
    assert_eq!(st["state"], "running", "{st}");
    assert!(st["pid"].as_u64().is_some(), "{st}");
    assert!(st["rounds"].as_u64().unwrap() > 0, "{st}");
    let per_cpu = st["cpus"].as_array().unwrap();
    assert_eq!(per_cpu.len(), cpus.len(), "{st}");
    assert!(
        per_cpu.iter().all(|c| c["samples"].as_u64().unwrap() > 0),
        "samples on every busy CPU: {st}"
    );
    std::thread::sleep(Duration::from_millis(300));
    let o = profctl(tmp.path(), &["stop", "--session-dir", d]);
    for w in &mut workers {
        let _ = w.kill();
        let _ = w.wait();
    }
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("samples") && text(&o).contains("Session"),
        "{}",
        text(&o)
    );
    let (r, d) = decode(&session(tmp.path()));
    let footer = r.footer().expect("stop writes the footer").clone();
    for (cpu, pid) in cpus.iter().zip(&pids) {
        let n = d.per_cpu_pid.get(&(*cpu, *pid)).copied().unwrap_or(0);
        // Other tests (and builds) share the CPUs, so only demand a clear presence.
        assert!(n >= 20, "worker pinned to cpu {cpu} has {n} samples there");
    }
    for a in &footer.accounting {
        // The session's loss equals the kernel's read-back count.
        let ring = d
            .lost_markers
            .get(&(a.cpu, LostKind::Ring))
            .copied()
            .unwrap_or(0)
            + d.lost_markers
                .get(&(a.cpu, LostKind::Reconcile))
                .copied()
                .unwrap_or(0);
        assert_eq!(ring, a.kernel_lost, "cpu {}", a.cpu);
        assert_eq!(
            a.lost_ring + a.lost_reconcile,
            a.kernel_lost,
            "cpu {}",
            a.cpu
        );
    }
    let o = profctl(
        tmp.path(),
        &[
            "status",
            "--session-dir",
            tmp.path().join("s").to_str().unwrap(),
        ],
    );
    assert!(text(&o).contains("no daemon running"), "{}", text(&o));
}

#[test]
fn sigkill_then_status_says_died_and_stop_finalizes_every_complete_round() {
    if !perf_ok() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("s");
    let ds = d.to_str().unwrap();
    let _stop = StopOnDrop(std::path::PathBuf::from(ds));
    assert!(
        profctl(tmp.path(), &["start", "-F", "1000", "--session-dir", ds])
            .status
            .success()
    );
    let mut w = busy_on(0);
    std::thread::sleep(Duration::from_millis(800));
    assert!(profctl(tmp.path(), &["dump", "--session-dir", ds])
        .status
        .success());
    let before = SessionReader::open(session(tmp.path()))
        .unwrap()
        .chunks()
        .len();
    let pid: i32 = std::fs::read_to_string(d.join("daemon.pid"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap()
        .success());
    std::thread::sleep(Duration::from_millis(300));
    let _ = w.kill();
    let _ = w.wait();
    let o = profctl(tmp.path(), &["status", "--session-dir", ds]);
    assert!(text(&o).contains("died"), "{}", text(&o));
    let st = status_json(tmp.path(), ds);
    assert_eq!(
        (st["state"].as_str(), st["pid"].as_i64()),
        (Some("died"), Some(i64::from(pid))),
        "{st}"
    );
    assert!(st["session_file_bytes"].as_u64().unwrap() > 0, "{st}");
    let o = profctl(tmp.path(), &["stop", "--session-dir", ds]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("finalized"), "{}", text(&o));
    let r = SessionReader::open(session(tmp.path())).unwrap();
    assert!(r.footer().is_some(), "stop wrote the footer");
    assert!(
        r.chunks().len() >= before,
        "every round complete before the kill is kept"
    );
    assert!(r.bad_chunks().is_empty(), "{:?}", r.bad_chunks());
    let written: u64 = r
        .footer()
        .unwrap()
        .accounting
        .iter()
        .map(|a| a.samples_written)
        .sum();
    let mut n = 0u64;
    for c in r.chunks() {
        n += r.for_each_sample(c, |_| {}, |_| {}).unwrap();
    }
    assert_eq!(written, n);
    // The stale lock is recovered: a new daemon starts on the same dir.
    let o = profctl(tmp.path(), &["start", "--session-dir", ds]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(profctl(tmp.path(), &["stop", "--session-dir", ds])
        .status
        .success());
}

#[test]
fn a_second_start_names_the_running_daemon() {
    if !perf_ok() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("s");
    let ds = ds.to_str().unwrap();
    let _stop = StopOnDrop(std::path::PathBuf::from(ds));
    assert!(profctl(tmp.path(), &["start", "--session-dir", ds])
        .status
        .success());
    let o = profctl(tmp.path(), &["start", "--session-dir", ds]);
    let pid = std::fs::read_to_string(tmp.path().join("s/daemon.pid")).unwrap();
    assert!(!o.status.success());
    assert!(text(&o).contains(pid.trim()), "{}", text(&o));
    assert!(profctl(tmp.path(), &["stop", "--session-dir", ds])
        .status
        .success());
}

#[test]
fn reset_discards_samples_and_recording_goes_on() {
    if !perf_ok() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("s");
    let ds = ds.to_str().unwrap();
    let _stop = StopOnDrop(std::path::PathBuf::from(ds));
    assert!(
        profctl(tmp.path(), &["start", "-F", "1000", "--session-dir", ds])
            .status
            .success()
    );
    let mut w = busy_on(0);
    std::thread::sleep(Duration::from_millis(600));
    let o = profctl(tmp.path(), &["reset", "--session-dir", ds]);
    assert!(
        !o.status.success() && text(&o).contains("--yes"),
        "{}",
        text(&o)
    );
    assert!(profctl(tmp.path(), &["dump", "--session-dir", ds])
        .status
        .success());
    let before: u64 = decode(&session(tmp.path())).1.per_cpu_pid.values().sum();
    assert!(
        profctl(tmp.path(), &["reset", "--yes", "--session-dir", ds])
            .status
            .success()
    );
    std::thread::sleep(Duration::from_millis(300));
    assert!(profctl(tmp.path(), &["stop", "--session-dir", ds])
        .status
        .success());
    let _ = w.kill();
    let _ = w.wait();
    let (r, d) = decode(&session(tmp.path()));
    let after: u64 = d.per_cpu_pid.values().sum();
    assert!(
        after > 0 && after < before + 400,
        "after reset {after}, before {before}"
    );
    // Cookie definitions are re-emitted in the new file.
    let mut defs = 0;
    for c in r.chunks() {
        r.for_each_sample(
            c,
            |_| {},
            |m| defs += matches!(m, Event::CookieDef(_)) as u32,
        )
        .unwrap();
    }
    assert!(defs > 0);
}

#[test]
fn two_starts_at_once_make_exactly_one_daemon() {
    if !perf_ok() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("s");
    let _stop = StopOnDrop(ds.clone());
    let spawn = || {
        Command::new(PROFCTL)
            .args(["start", "--session-dir", ds.to_str().unwrap()])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn(), spawn());
    let (a, b) = (a.wait_with_output().unwrap(), b.wait_with_output().unwrap());
    let ok = [&a, &b].iter().filter(|o| o.status.success()).count();
    assert_eq!(ok, 1, "a: {}\nb: {}", text(&a), text(&b));
    let loser = if a.status.success() { &b } else { &a };
    assert!(
        text(loser).contains("already running") || text(loser).contains("starting"),
        "{}",
        text(loser)
    );
    assert!(
        profctl(tmp.path(), &["stop", "--session-dir", ds.to_str().unwrap()])
            .status
            .success()
    );
}

#[test]
fn session_files_are_private() {
    if !perf_ok() {
        return;
    }
    use std::os::unix::fs::PermissionsExt;
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("s");
    let _stop = StopOnDrop(std::path::PathBuf::from(d.to_str().unwrap()));
    assert!(
        profctl(tmp.path(), &["start", "--session-dir", d.to_str().unwrap()])
            .status
            .success()
    );
    let sock = std::fs::metadata(d.join("control.sock"))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(sock, 0o600);
    assert!(
        profctl(tmp.path(), &["stop", "--session-dir", d.to_str().unwrap()])
            .status
            .success()
    );
    assert_eq!(
        std::fs::metadata(&d).unwrap().permissions().mode() & 0o777,
        0o700
    );
    for f in ["session.pkl", "kallsyms"] {
        let m = std::fs::metadata(d.join(f)).unwrap().permissions().mode() & 0o777;
        assert_eq!(m, 0o600, "{f} holds kernel addresses: owner only");
    }
    assert!(!d.join("footer.reserve").exists());
}

#[test]
fn a_daemon_whose_session_dir_is_deleted_stops_by_itself() {
    if !perf_ok() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("s");
    assert!(
        profctl(tmp.path(), &["start", "--session-dir", d.to_str().unwrap()])
            .status
            .success()
    );
    let pid = std::fs::read_to_string(d.join("daemon.pid"))
        .unwrap()
        .trim()
        .to_string();
    std::fs::remove_dir_all(&d).unwrap();
    let alive =
        || std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "));
    for _ in 0..100 {
        if !alive() {
            return;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = Command::new("kill").arg(&pid).status();
    panic!("daemon {pid} still runs 10 s after its session directory was removed");
}

/// `start --foreground` (for a service manager): no fork, log lines on
/// stderr, `status` works from elsewhere, SIGTERM stops it cleanly with
/// the footer written and exit status 0.
#[test]
fn start_in_the_foreground_logs_to_stderr_and_stops_cleanly_on_sigterm() {
    if !perf_ok() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("s");
    let ds = d.to_str().unwrap();
    let _stop = StopOnDrop(PathBuf::from(ds));
    let fg = Command::new(PROFCTL)
        .args(["start", "--foreground", "-F", "1000", "--session-dir", ds])
        .env_remove("PROFKIT_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut w = busy_on(0);
    // Running once `status --json` says so, under the foreground pid.
    let mut running = false;
    for _ in 0..100 {
        std::thread::sleep(Duration::from_millis(50));
        let o = profctl(tmp.path(), &["status", "--json", "--session-dir", ds]);
        let v: serde_json::Value =
            serde_json::from_slice(&o.stdout).unwrap_or(serde_json::Value::Null);
        if v["state"] == "running" {
            assert_eq!(v["pid"], fg.id(), "the daemon is this process: {v}");
            running = true;
            break;
        }
    }
    assert!(running, "status never said running");
    // A second one on the same directory is refused before announcing
    // anything.
    let again = profctl(tmp.path(), &["start", "--foreground", "--session-dir", ds]);
    assert_eq!(again.status.code(), Some(1), "{}", text(&again));
    assert!(
        text(&again).contains("is already running"),
        "{}",
        text(&again)
    );
    assert!(!text(&again).contains("sampling in the foreground"));
    std::thread::sleep(Duration::from_millis(600));
    assert!(Command::new("kill")
        .args(["-TERM", &fg.id().to_string()])
        .status()
        .unwrap()
        .success());
    let out = fg.wait_with_output().unwrap();
    let _ = w.kill();
    let _ = w.wait();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "exit {:?}: {err}", out.status);
    assert!(
        err.contains("INFO  stopping on SIGTERM"),
        "log lines on stderr: {err}"
    );
    assert!(err.contains("profkit: stopped; session"), "{err}");
    let r = SessionReader::open(session(tmp.path())).unwrap();
    assert!(r.is_complete(), "the footer is written");
    let samples: u64 = r
        .footer()
        .unwrap()
        .accounting
        .iter()
        .map(|a| a.samples_written)
        .sum();
    assert!(samples > 100, "{samples} samples");
    // --foreground is start's alone: record runs in the foreground anyway.
    let o = profctl(tmp.path(), &["record", "--foreground", "--", "true"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}
