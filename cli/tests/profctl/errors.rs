//! What profctl says, and its exit status, when something is wrong before
//! or instead of recording: no daemon, no session, bad flags (exit 2), a
//! bad or unwritable session directory (exit 1), no PMU, no such pid.

use super::*;

#[test]
fn no_daemon_errors_for_stop_dump_status() {
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("none");
    let ds = ds.to_str().unwrap();
    for cmd in ["stop", "dump"] {
        let o = profctl(tmp.path(), &[cmd, "--session-dir", ds]);
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        assert!(
            text(&o).contains("no profkit daemon is running"),
            "{cmd}: {}",
            text(&o)
        );
    }
    let o = profctl(tmp.path(), &["status", "--session-dir", ds]);
    assert!(text(&o).contains("no daemon running"), "{}", text(&o));
}

#[test]
fn status_of_a_directory_without_a_session_says_so_in_text_and_json() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("empty")).unwrap();
    for dir in ["none", "empty"] {
        let d = tmp.path().join(dir);
        let ds = d.to_str().unwrap();
        let o = profctl(tmp.path(), &["status", "--session-dir", ds]);
        assert_eq!(o.status.code(), Some(0), "{dir}: {}", text(&o));
        assert_eq!(
            String::from_utf8_lossy(&o.stdout),
            format!("profkit: no daemon running for {ds}\n"),
            "{dir}"
        );
        let st = status_json(tmp.path(), ds);
        assert_eq!(st["state"], "not running", "{dir}: {st}");
        assert!(
            st["pid"].is_null() && st["session_file_bytes"].is_null(),
            "{st}"
        );
        assert!(
            st.get("cpus").is_none(),
            "no counters without a daemon: {st}"
        );
    }
}

#[test]
fn bad_values_exit_2_with_a_message_naming_them() {
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("s");
    let ds = ds.to_str().unwrap();
    // -G's message says why: no such cgroup v2 directory, or none mounted.
    let v2 = profkit_perf::cgroup2_mount().is_some();
    let cases: &[(&[&str], &str)] = &[
        (
            &["start", "-e", "no-such-event"],
            "unknown event 'no-such-event'",
        ),
        (&["start", "-F", "0"], "at least 1 Hz"),
        (&["start", "-F", "999999999"], "maximum sample rate"),
        (&["start", "--buffer-pages", "3"], "power of two"),
        (&["start", "-C", "9999"], "not online"),
        (&["start", "-C", "x-y"], "bad CPU list"),
        (&["start", "-F", "-5"], "-5"),
        (&["start", "--sync-interval", "1"], "1"),
        (
            &["start", "-c", "18446744073709551615"],
            "period 18446744073709551615 is too large",
        ),
        (&["start", "-p", "1,1,1"], "pid 1 is given more than once"),
        (&["record", "-p", "1", "--", "true"], "-p/--pid is for"),
        (
            &["start", "-G", "/no/such/profkit-cgroup"],
            if v2 {
                "-G /no/such/profkit-cgroup: not a cgroup v2 directory"
            } else {
                "-G /no/such/profkit-cgroup: no cgroup v2 hierarchy"
            },
        ),
        (
            &["record", "-G", "/", "--", "true"],
            if v2 {
                "cannot be combined with -p or a command"
            } else {
                "no cgroup v2 hierarchy"
            },
        ),
        (&["start", "-p", "1", "-G", "/"], "cannot be used with"),
        (&["start", "--rotate", "0"], "\"0\""),
        (&["start", "--rotate", "0s"], "\"0s\""),
        (&["start", "--rotate", "10"], "\"10\" has no unit"),
        (&["start", "--rotate", "5x"], "\"5x\""),
        (
            &["start", "--keep", "0"],
            "\"0\": the part being written always stays",
        ),
        (&["start", "--keep", "-1"], "-1"),
        (&["start", "--max-disk", "0M"], "\"0M\""),
        (
            &["bogus-command"],
            "unrecognized subcommand 'bogus-command'",
        ),
    ];
    for (args, want) in cases {
        let mut a = args.to_vec();
        a.extend(["--session-dir", ds]);
        let o = profctl(tmp.path(), &a);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert!(text(&o).contains(want), "{args:?}: {}", text(&o));
        // One line, like profreport's.
        assert_eq!(
            String::from_utf8_lossy(&o.stderr)
                .trim_end()
                .lines()
                .count(),
            1,
            "{args:?}: {}",
            text(&o)
        );
    }
}

#[test]
fn bad_call_graph_values_exit_2_before_anything_starts() {
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("s");
    let ran = tmp.path().join("ran");
    let touch = format!("touch {}", ran.display());
    let record = |mode: &'static [&'static str]| -> Vec<String> {
        let mut a: Vec<String> = ["record"]
            .iter()
            .chain(mode)
            .map(|s| s.to_string())
            .collect();
        a.extend(["--".into(), "sh".into(), "-c".into(), touch.clone()]);
        a
    };
    let start = |mode: &[&str]| -> Vec<String> {
        ["start"]
            .iter()
            .chain(mode)
            .map(|s| s.to_string())
            .collect()
    };
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            start(&["--call-graph", "dwarf,8190"]),
            "'dwarf,8190' for '--call-graph <MODE>': the stack size 8190 must be a multiple of 8 (e.g. dwarf,8192)",
        ),
        (
            record(&["--call-graph", "dwarf,8190"]),
            "the stack size 8190 must be a multiple of 8",
        ),
        (
            start(&["--call-graph", "lbr"]),
            "unknown call-graph mode 'lbr': use fp (frame pointers, as -g), dwarf",
        ),
        (
            record(&["--call-graph=dwarf,65536"]),
            "above the kernel's limit of 65528 bytes",
        ),
        (start(&["--call-graph", "dwarf,0"]), "at least 8 bytes"),
        (
            start(&["--call-graph", "dwarf,8k"]),
            "'8k' is not a number of bytes",
        ),
        (
            start(&["-g", "--call-graph", "dwarf"]),
            "-g means frame-pointer call graphs (--call-graph fp), not --call-graph dwarf,8192",
        ),
        (
            record(&["-g", "--call-graph", "dwarf,4096"]),
            "give --call-graph dwarf,4096 alone",
        ),
    ];
    for (args, want) in cases {
        let mut a: Vec<&str> = args.iter().map(String::as_str).collect();
        a.extend(["--session-dir", ds.to_str().unwrap()]);
        let o = profctl(tmp.path(), &a);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", text(&o));
        assert!(text(&o).contains(want), "{args:?}: {}", text(&o));
        assert_eq!(
            String::from_utf8_lossy(&o.stderr)
                .trim_end()
                .lines()
                .count(),
            1,
            "{args:?}: {}",
            text(&o)
        );
        // Refused before a daemon, a session or the command.
        assert!(!ds.exists(), "{args:?} made the session directory");
        assert!(!ran.exists(), "{args:?} ran the command");
    }
}

#[test]
fn cycles_without_a_pmu_suggests_cpu_clock() {
    if !perf_ok() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let o = profctl(
        tmp.path(),
        &[
            "start",
            "-e",
            "cycles",
            "--session-dir",
            tmp.path().join("s").to_str().unwrap(),
        ],
    );
    if o.status.success() {
        eprintln!("SKIP: this machine has a hardware PMU");
        profctl(
            tmp.path(),
            &[
                "stop",
                "--session-dir",
                tmp.path().join("s").to_str().unwrap(),
            ],
        );
        return;
    }
    assert_eq!(o.status.code(), Some(1));
    assert!(
        text(&o).contains("'cycles'") && text(&o).contains("-e cpu-clock"),
        "{}",
        text(&o)
    );
}

/// Whatever is wrong with a session directory (a file, a FIFO, missing, a
/// FIFO or garbage as its session), every subcommand that needs one exits
/// 1 naming the path, never 2 (that is for bad flags), never a
/// `/proc/self/fd` path, and says the OS's reason once.
#[test]
fn a_bad_session_dir_exits_1_naming_it_whatever_the_cause() {
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path();
    std::fs::write(t.join("file"), "x").unwrap();
    std::fs::create_dir(t.join("empty")).unwrap();
    std::fs::create_dir(t.join("garbage")).unwrap();
    std::fs::write(t.join("garbage/session.pkl"), [0x5a; 4096]).unwrap();
    std::fs::create_dir(t.join("fifod")).unwrap();
    for fifo in [t.join("fifo"), t.join("fifod/session.pkl")] {
        assert!(Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
    }
    let mut cases: Vec<(&str, Vec<&str>)> = vec![
        ("file", vec!["stop"]),
        ("file", vec!["status"]),
        ("file", vec!["archive", "-o", "a.tar"]),
        ("fifo", vec!["archive", "-o", "a.tar"]),
        ("none", vec!["stop"]),
        ("none", vec!["archive", "-o", "a.tar"]),
        ("empty", vec!["archive", "-o", "a.tar"]),
        ("garbage", vec!["archive", "-o", "a.tar"]),
        ("fifod", vec!["archive", "-o", "a.tar"]),
    ];
    if perf_ok() {
        cases.push(("file", vec!["start"]));
    }
    for (dir, args) in cases {
        let d = t.join(dir);
        let mut full = args.clone();
        full.extend(["--session-dir", d.to_str().unwrap()]);
        let o = profctl(t, &full);
        let msg = text(&o);
        assert_eq!(o.status.code(), Some(1), "{dir} {args:?}: {msg}");
        assert!(msg.contains(d.to_str().unwrap()), "{dir} {args:?}: {msg}");
        assert!(!msg.contains("/proc/self/fd"), "{dir} {args:?}: {msg}");
        if let Some(i) = msg.find("(os error") {
            assert!(!msg[i + 1..].contains("(os error"), "said twice: {msg}");
        }
        assert!(
            msg.matches("not a regular file").count() <= 1,
            "said twice: {msg}"
        );
    }
}

#[test]
fn a_nonexistent_pid_exits_2_naming_it() {
    let tmp = tempfile::tempdir().unwrap();
    let o = profctl(
        tmp.path(),
        &[
            "start",
            "-p",
            "2147483600",
            "--session-dir",
            tmp.path().join("s").to_str().unwrap(),
        ],
    );
    if text(&o).contains("no permission") {
        eprintln!("SKIP: {}", text(&o));
        return;
    }
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("2147483600"), "{}", text(&o));
}

#[test]
fn an_unwritable_session_dir_is_named_with_the_fix() {
    if !perf_ok() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ro = tmp.path().join("ro");
    std::fs::create_dir(&ro).unwrap();
    std::os::unix::fs::chown(&ro, Some(65534), Some(65534)).unwrap_or(());
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o555)).unwrap();
    // As nobody (root writes anywhere): a per-process record gets past the
    // permission check, then meets the read-only session directory.
    let Some(o) = as_nobody(tmp.path(), &["record", "--session-dir", "ro", "--", "true"]) else {
        return;
    };
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(
        text(&o).contains("ro") && text(&o).contains("not writable"),
        "{}",
        text(&o)
    );
}
