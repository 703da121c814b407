//! `profctl record`: the command's exit status passed on, its profile,
//! DWARF call graphs, a missing command.

use super::*;

#[test]
fn record_passes_on_the_exit_status_and_profiles_the_command() {
    if !perf_ok() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("s");
    let o = profctl(
        tmp.path(),
        &[
            "record",
            "--session-dir",
            d.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            "exit 7",
        ],
    );
    assert_eq!(o.status.code(), Some(7), "{}", text(&o));
    let o = profctl(
        tmp.path(),
        &[
            "record",
            "-F",
            "2000",
            "--session-dir",
            d.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let (r, dec) = decode(&session(tmp.path()));
    assert!(r.footer().is_some());
    let total: u64 = dec.per_cpu_pid.values().sum();
    assert!(total > 50, "{total} samples of the recorded command");
    // Only the command's process tree was sampled.
    let pids: std::collections::BTreeSet<u32> = dec.per_cpu_pid.keys().map(|k| k.1).collect();
    assert_eq!(pids.len(), 1, "per-process record sampled {pids:?}");
    assert!(dec.comms.values().any(|c| c == "sh"), "{:?}", dec.comms);
}

#[test]
fn record_with_dwarf_call_graphs_copies_user_stacks() {
    if !perf_ok() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("s");
    let o = profctl(
        tmp.path(),
        &[
            "record",
            "--call-graph",
            "dwarf",
            "-F",
            "4000",
            "--session-dir",
            d.to_str().unwrap(),
            "--",
            "sh",
            "-c",
            "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let stderr = String::from_utf8_lossy(&o.stderr);
    let cpus = profkit_perf::online_cpus().unwrap().len();
    assert!(
        stderr.contains(&format!("profkit: rings of 16 MiB × {cpus} CPUs = "))
            && stderr.contains("because dwarf,8192 samples (8352 bytes each) at 4000 Hz"),
        "{}",
        text(&o)
    );
    // The stop summary says what the unwinder did.
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.lines().any(|l| l.starts_with("DWARF call graphs: ")
            && l.contains(" user stacks unwound at sync time")),
        "{}",
        text(&o)
    );
    let (r, dec) = decode(&session(tmp.path()));
    assert!(r.footer().is_some());
    assert_eq!(r.header().event.user_stack, 8192);
    assert!(
        r.header().event.callchain,
        "the kernel part comes from the callchain"
    );
    assert!(dec.per_cpu_pid.values().sum::<u64>() > 50);
    let o = Command::new(env!("CARGO_BIN_EXE_profreport"))
        .args(["--no-progress", "--session-dir"])
        .arg(&d)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        String::from_utf8_lossy(&o.stdout).lines().any(
            |l| l.starts_with("Event:") && l.ends_with("; call graph: dwarf, 8192-byte stacks")
        ),
        "{}",
        text(&o)
    );

    // An explicit --buffer-pages is kept: no ring is chosen.
    let o = profctl(
        tmp.path(),
        &[
            "record",
            "--call-graph",
            "dwarf,4096",
            "--buffer-pages",
            "64",
            "--session-dir",
            d.to_str().unwrap(),
            "--",
            "true",
        ],
    );
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(!text(&o).contains("rings of"), "{}", text(&o));
    let r = SessionReader::open(session(tmp.path())).unwrap();
    assert_eq!(r.header().event.user_stack, 4096);
}

#[test]
fn record_of_a_missing_command_says_so() {
    let tmp = tempfile::tempdir().unwrap();
    let o = profctl(
        tmp.path(),
        &[
            "record",
            "--session-dir",
            tmp.path().join("s").to_str().unwrap(),
            "--",
            "/no/such/cmd",
        ],
    );
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o).contains("command not found: /no/such/cmd"),
        "{}",
        text(&o)
    );
}
