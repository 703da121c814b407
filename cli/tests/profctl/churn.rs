//! Process churn: fork, exec and thread storms do not grow the daemon, and
//! exec chains and fork loops leave no sample unattributed.

use super::*;

fn vm_rss_kib(pid: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find_map(|l| {
            l.strip_prefix("VmRSS:")
                .map(|v| v.trim().trim_end_matches(" kB").parse().unwrap())
        })
        .unwrap()
}

#[test]
fn fork_exec_and_thread_storms_do_not_grow_the_daemon() {
    if !perf_ok() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("s");
    let ds = d.to_str().unwrap();
    let _stop = StopOnDrop(std::path::PathBuf::from(ds));
    assert!(profctl(
        tmp.path(),
        &["start", "-a", "-F", "2000", "--session-dir", ds]
    )
    .status
    .success());
    let pid = std::fs::read_to_string(d.join("daemon.pid"))
        .unwrap()
        .trim()
        .to_string();
    let storm = |n: u32| {
        let forks = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "i=0; while [ $i -lt {n} ]; do /bin/true; i=$((i+1)); done"
            ))
            .status();
        let threads = Command::new("python3")
            .arg("-c")
            .arg(format!("import threading\nfor _ in range({n}):\n    t = threading.Thread(target=lambda: sum(range(2000)))\n    t.start(); t.join()\n"))
            .status();
        assert!(forks.unwrap().success());
        if threads.is_err() {
            eprintln!("note: python3 missing, thread storm skipped");
        }
    };
    storm(300);
    std::thread::sleep(Duration::from_millis(600));
    let rss_warm = vm_rss_kib(&pid);
    storm(2000);
    std::thread::sleep(Duration::from_millis(800));
    let st = status_json(tmp.path(), ds);
    let rss_after = vm_rss_kib(&pid);
    let live = std::fs::read_dir("/proc")
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
        })
        .count() as u64;
    let procs = st["processes"].as_u64().unwrap();
    assert!(
        procs <= live + 64,
        "the table holds {procs} processes, {live} are alive"
    );
    assert!(
        st["tasks_announced"].as_u64().unwrap() <= live * 4 + 256,
        "{st}"
    );
    // Thousands more tasks must not cost the daemon memory in proportion.
    assert!(
        rss_after < rss_warm + 16 * 1024,
        "daemon RSS grew from {rss_warm} KiB to {rss_after} KiB"
    );
    let o = profctl(tmp.path(), &["stop", "--session-dir", ds]);
    assert!(o.status.success(), "{}", text(&o));
    let r = SessionReader::open(session(tmp.path())).unwrap();
    for a in &r.footer().unwrap().accounting {
        assert_eq!(
            a.samples_received,
            a.samples_written
                + a.lost_no_mapping
                + a.lost_no_task
                + a.lost_overflow
                + a.lost_disk_full,
            "every sample attributed or counted: {a:?}"
        );
        let unresolved = a.lost_no_mapping + a.lost_no_task;
        eprintln!(
            "storm cpu {}: {} no-mapping, {} no-task of {}",
            a.cpu, a.lost_no_mapping, a.lost_no_task, a.samples_received
        );
        assert!(
            unresolved * 100 <= a.samples_received.max(100),
            "cpu {}: {unresolved} of {} samples unresolved",
            a.cpu,
            a.samples_received
        );
    }
}

/// Churn (issue 16's target): chains of execs (a bash script exec'ing a
/// bash script exec'ing `env sh`, as version-manager shims do) and a fork
/// loop leave at most 0.01 % of the session unattributed. The race this
/// once lost samples to (an older exec read after a newer one, the CPUs'
/// rings being read in turn: 12 of 13,469 samples of 100 such chains with
/// a release daemon, 60 of 25,000 for 30 pyenv shim runs) depends on
/// where the scheduler puts each exec; its deterministic test is
/// `crates/sync/src/process.rs::an_older_exec_read_after_a_newer_one_keeps_both_address_spaces`.
#[test]
fn exec_chains_and_fork_loops_leave_no_sample_unattributed() {
    if !perf_ok() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    let d = dir.to_str().unwrap();
    let _stop = StopOnDrop(std::path::PathBuf::from(d));
    let s1 = tmp.path().join("s1.sh");
    let s2 = tmp.path().join("s2.sh");
    std::fs::write(
        &s1,
        format!(
            "#!/usr/bin/env bash\ni=0; while [ $i -lt 300 ]; do i=$((i+1)); done\nexec {} \"$@\"\n",
            s2.display()
        ),
    )
    .unwrap();
    std::fs::write(
        &s2,
        "#!/usr/bin/env bash\ni=0; while [ $i -lt 300 ]; do i=$((i+1)); done\n\
         exec env sh -c 'i=0; while [ $i -lt 2000 ]; do i=$((i+1)); done'\n",
    )
    .unwrap();
    for f in [&s1, &s2] {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(f, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let o = profctl(tmp.path(), &["start", "-a", "--session-dir", d]);
    assert!(o.status.success(), "{}", text(&o));
    let chains = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "for i in $(seq 150); do {}; done; for i in $(seq 300); do /bin/true; done",
            s1.display()
        ))
        .status()
        .unwrap();
    assert!(chains.success());
    let o = profctl(tmp.path(), &["stop", "--session-dir", d]);
    assert!(o.status.success(), "{}", text(&o));
    let (r, _) = decode(&session(tmp.path()));
    let footer = r.footer().expect("stop writes the footer");
    let written: u64 = footer.accounting.iter().map(|a| a.samples_written).sum();
    let unattributed: u64 = footer
        .accounting
        .iter()
        .map(|a| a.lost_no_mapping + a.lost_no_task)
        .sum();
    eprintln!("churn: {unattributed} of {written} samples unattributed");
    assert!(written > 1000, "{}", text(&o));
    // The bound: at most 0.01 % of the session.
    assert!(
        unattributed * 10_000 <= written,
        "{unattributed} of {written} samples unattributed: {}",
        text(&o)
    );
}
