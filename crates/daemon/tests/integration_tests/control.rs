//! The control socket: mode, protocol round trips, client errors, peer uid.

use std::io::{Read, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::time::{Duration, Instant};

use profkit_daemon::testing::FakeEngine;
use profkit_daemon::{daemon_state, Client, DaemonState, Error, Request, Response};
use serde_json::json;

use crate::util::{helper_command, helper_env, is_root, opts, status, Session, ThreadDaemon};

#[test]
fn socket_is_0600_and_ours() {
    let s = Session::new();
    let d = ThreadDaemon::start(&s.path, FakeEngine::new(), opts(Duration::from_millis(250)));
    let m = std::fs::symlink_metadata(s.path.join("control.sock")).unwrap();
    assert!(m.file_type().is_socket());
    assert_eq!(m.mode() & 0o7777, 0o600);
    assert_eq!(m.uid(), rustix::process::geteuid().as_raw());
    // No temporary name left behind.
    let names: Vec<_> = std::fs::read_dir(&s.path)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(!names.iter().any(|n| n.ends_with(".tmp")), "{names:?}");
    d.stop();
}

#[test]
fn status_dump_reset_stop_round_trip() {
    let s = Session::new();
    let d = ThreadDaemon::start(&s.path, FakeEngine::new(), opts(Duration::from_millis(250)));
    let stats = d.stats.clone();

    let st = status(&s.path).unwrap();
    assert_eq!(st["daemon"]["pid"], std::process::id());
    assert_eq!(st["daemon"]["session_dir"], s.path.display().to_string());
    assert_eq!(st["daemon"]["sync_interval_ms"], 250.0);
    assert!(st["engine"]["rounds"].is_u64());

    let dumped = Client::connect(&s.path)
        .unwrap()
        .request(Request::Dump)
        .unwrap()
        .into_result(Request::Dump)
        .unwrap();
    assert_eq!(dumped["engine"]["dumps"], 1);

    let reset = Client::connect(&s.path)
        .unwrap()
        .request(Request::Reset)
        .unwrap();
    assert_eq!(reset, Response::Ok(serde_json::Value::Null));

    let rotated = Client::connect(&s.path)
        .unwrap()
        .request(Request::Rotate)
        .unwrap();
    assert_eq!(rotated, Response::Ok(serde_json::json!({"part": 2})));

    let (got, returned) = d.stop();
    assert_eq!(got, returned);
    assert_eq!(got["stopped"], true);
    let calls = stats.calls.lock().unwrap().clone();
    let non_round: Vec<_> = calls.into_iter().filter(|c| *c != "round").collect();
    assert_eq!(non_round, ["dump", "reset", "rotate", "stop"]);

    // By the time the stop answer arrived, everything was cleaned up.
    assert!(!s.path.join("control.sock").exists());
    assert!(!s.path.join("daemon.pid").exists());
    assert_eq!(daemon_state(&s.path).unwrap(), DaemonState::NotRunning);
    let log = s.log();
    for line in [
        "dump requested",
        "reset requested",
        "rotate requested",
        "rotated: {\"part\":2}",
        "stop requested",
        "stopped after",
    ] {
        assert!(log.contains(line), "{line:?} missing from\n{log}");
    }
}

#[test]
fn wire_protocol_is_one_json_line_each_way() {
    let s = Session::new();
    let d = ThreadDaemon::start(&s.path, FakeEngine::new(), opts(Duration::from_millis(250)));
    let mut raw = UnixStream::connect(s.path.join("control.sock")).unwrap();
    raw.write_all(b"{\"request\":\"status\"}\n").unwrap();
    let mut answer = String::new();
    raw.read_to_string(&mut answer).unwrap();
    assert!(
        answer.starts_with("{\"ok\":{") && answer.ends_with("}\n"),
        "{answer}"
    );
    assert_eq!(answer.matches('\n').count(), 1);
    d.stop();
}

#[test]
fn malformed_request_gets_an_error_and_the_daemon_lives_on() {
    let s = Session::new();
    let d = ThreadDaemon::start(&s.path, FakeEngine::new(), opts(Duration::from_millis(250)));
    for bad in [&b"hello\n"[..], b"{\"request\":\"explode\"}\n", b"{}"] {
        let mut raw = UnixStream::connect(s.path.join("control.sock")).unwrap();
        raw.write_all(bad).unwrap();
        raw.shutdown(std::net::Shutdown::Write).unwrap();
        let mut answer = String::new();
        raw.read_to_string(&mut answer).unwrap();
        let r: Response = serde_json::from_str(answer.trim_end()).unwrap();
        assert!(
            matches!(&r, Response::Error(m) if m.starts_with("malformed request")),
            "{r:?}"
        );
    }
    let oversized = vec![b'x'; 10_000];
    let mut raw = UnixStream::connect(s.path.join("control.sock")).unwrap();
    let _ = raw.write_all(&oversized);
    let mut answer = String::new();
    let _ = raw.read_to_string(&mut answer);
    assert!(answer.contains("too long"), "{answer}");
    assert!(status(&s.path).is_some());
    d.stop();
}

#[test]
fn silent_client_does_not_block_rounds_or_other_clients() {
    let s = Session::new();
    let d = ThreadDaemon::start(&s.path, FakeEngine::new(), opts(Duration::from_millis(20)));
    let _silent = UnixStream::connect(s.path.join("control.sock")).unwrap();
    let before = d.stats.rounds();
    let t0 = Instant::now();
    let st = status(&s.path).unwrap();
    assert!(t0.elapsed() < Duration::from_secs(2), "{:?}", t0.elapsed());
    assert!(st["daemon"]["pid"].is_u64());
    std::thread::sleep(Duration::from_millis(300));
    assert!(d.stats.rounds() > before + 3, "rounds stalled");
    d.stop();
}

#[test]
fn no_daemon_errors_say_so_and_how_to_start_one() {
    let s = Session::new();
    let e = Client::connect(&s.path).unwrap_err();
    assert!(matches!(e, Error::NotRunning { .. }), "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains(&s.path.display().to_string())
            && msg.contains("no control socket")
            && msg.contains("profctl start"),
        "{msg}"
    );
    let e = Client::connect(s.tmp.path().join("never-created")).unwrap_err();
    assert!(matches!(e, Error::NotRunning { .. }), "{e}");
}

#[test]
fn dead_daemon_socket_is_reported_as_died() {
    let s = Session::new();
    // A socket file nobody listens on any more.
    drop(UnixListener::bind(s.path.join("control.sock")).unwrap());
    std::fs::write(s.path.join("daemon.pid"), "31337\n").unwrap();
    let e = Client::connect(&s.path).unwrap_err();
    assert!(
        matches!(
            e,
            Error::DaemonDied {
                pid: Some(31337),
                ..
            }
        ),
        "{e}"
    );
    let msg = e.to_string();
    assert!(
        msg.contains("pid 31337") && msg.contains("daemon.log"),
        "{msg}"
    );

    // A new daemon clears the leftover socket and serves.
    let d = ThreadDaemon::start(&s.path, FakeEngine::new(), opts(Duration::from_millis(250)));
    d.stop();
}

#[test]
fn request_timeout_is_reported() {
    let s = Session::new();
    // Something that accepts but never answers.
    let listener = UnixListener::bind(s.path.join("control.sock")).unwrap();
    let t0 = Instant::now();
    let e = Client::connect(&s.path)
        .unwrap()
        .request_with_timeout(Request::Status, Duration::from_millis(200))
        .unwrap_err();
    assert!(
        matches!(
            e,
            Error::Timeout {
                request: "status",
                ..
            }
        ),
        "{e}"
    );
    assert!(t0.elapsed() < Duration::from_secs(5));
    drop(listener);
}

#[test]
fn long_session_path_still_gets_a_socket() {
    let tmp = tempfile::tempdir().unwrap();
    let path = tmp.path().join("x".repeat(100)).join("y".repeat(60));
    profkit_daemon::SessionDir::create(&path).unwrap();
    assert!(path.join("control.sock").as_os_str().len() > 108);
    let d = ThreadDaemon::start(&path, FakeEngine::new(), opts(Duration::from_millis(250)));
    assert!(std::fs::symlink_metadata(path.join("control.sock"))
        .unwrap()
        .file_type()
        .is_socket());
    d.stop();
}

/// Run by `other_uid_is_refused` as uid 65534: prints what the daemon said.
#[test]
#[ignore = "helper: run by other_uid_is_refused as another user"]
fn helper_other_uid_client() {
    let Some((dir, _)) = helper_env() else { return };
    let outcome = match Client::connect(&dir).and_then(|c| c.request(Request::Status)) {
        Ok(Response::Ok(_)) => "ANSWERED".to_owned(),
        Ok(Response::Error(m)) => format!("REFUSED {m}"),
        Err(e) => format!("ERROR {e}"),
    };
    println!("HELPER-OUTCOME: {outcome}");
}

fn run_as_nobody(exe: &Path, dir: &Path) -> String {
    let inner = helper_command(exe, "control::helper_other_uid_client", "", dir);
    let out = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(inner.get_program())
        .args(inner.get_args())
        .envs(inner.get_envs().filter_map(|(k, v)| Some((k, v?))))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    stdout
        .lines()
        .find_map(|l| l.split_once("HELPER-OUTCOME: ").map(|(_, r)| r))
        .unwrap_or_else(|| {
            panic!(
                "helper printed no outcome; status {}, stdout:\n{stdout}\nstderr:\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            )
        })
        .to_owned()
}

#[test]
fn other_uid_is_refused() {
    if !is_root() {
        eprintln!("skipped: needs root to run a client as uid 65534 (setpriv)");
        return;
    }
    if std::process::Command::new("setpriv")
        .arg("--version")
        .output()
        .is_err()
    {
        eprintln!("skipped: setpriv (util-linux) is not installed");
        return;
    }
    // The helper binary must be reachable by uid 65534.
    let bin = tempfile::tempdir().unwrap();
    std::fs::set_permissions(bin.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let exe = bin.path().join("helper");
    std::fs::copy(std::env::current_exe().unwrap(), &exe).unwrap();
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();

    let s = Session::new();
    std::fs::set_permissions(s.tmp.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
    let d = ThreadDaemon::start(&s.path, FakeEngine::new(), opts(Duration::from_millis(250)));

    // Layer 1: the 0700 directory and the 0600 socket keep others out.
    let outcome = run_as_nobody(&exe, &s.path);
    assert!(
        outcome.starts_with("ERROR") && outcome.contains("or root"),
        "{outcome}"
    );

    // Layer 2: with both opened up, SO_PEERCRED still refuses uid 65534.
    std::fs::set_permissions(&s.path, std::fs::Permissions::from_mode(0o711)).unwrap();
    std::fs::set_permissions(
        s.path.join("control.sock"),
        std::fs::Permissions::from_mode(0o666),
    )
    .unwrap();
    let outcome = run_as_nobody(&exe, &s.path);
    assert!(
        outcome.starts_with("REFUSED permission denied: uid 65534"),
        "{outcome}"
    );

    let st = status(&s.path).unwrap();
    assert_eq!(st["daemon"]["refused"], 1);
    let (summary, _) = d.stop();
    assert_eq!(summary["stopped"], json!(true));
    assert!(s.log().contains("refused client pid"), "{}", s.log());
}

#[test]
fn too_many_pending_clients_are_told_the_daemon_is_busy() {
    let s = Session::new();
    let d = ThreadDaemon::start(&s.path, FakeEngine::new(), opts(Duration::from_millis(250)));
    let silent: Vec<_> = (0..profkit_daemon::MAX_PENDING_CONNECTIONS)
        .map(|_| UnixStream::connect(s.path.join("control.sock")).unwrap())
        .collect();
    // The daemon answers and closes before reading our line: the client
    // must still read the answer rather than report a broken pipe.
    let mut busy = None;
    crate::util::wait_until(
        Duration::from_secs(5),
        "a busy answer",
        || match Client::connect(&s.path).unwrap().request(Request::Status) {
            Ok(Response::Error(m)) => {
                busy = Some(m);
                true
            }
            _ => false,
        },
    );
    assert!(busy.unwrap().contains("busy"));
    drop(silent);
    crate::util::wait_until(Duration::from_secs(5), "served again", || {
        status(&s.path).is_some()
    });
    d.stop();
}

#[test]
fn a_control_socket_served_by_another_user_gets_no_request() {
    if !is_root() {
        eprintln!("skipped: needs root to run a server as uid 65534 (setpriv)");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
    let sock = d.path().join("control.sock");
    // Another user's process answering at our socket path, as a fake
    // daemon would (with terminal escapes in its reply). It listens
    // before the socket gets its name: a socket bound but not yet
    // listening refuses the connection, and the client then never meets
    // its owner.
    let mut server = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .args([
            "/usr/bin/python3",
            "-c",
            "import os,socket,sys,time\n\
             s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1] + '.new'); s.listen(1)\n\
             os.rename(sys.argv[1] + '.new', sys.argv[1])\n\
             c,_=s.accept(); c.sendall(b'{\"error\":\"\\x1b]0;pwned\\x07\"}\\n'); time.sleep(5)",
        ])
        .arg(&sock)
        .spawn()
        .unwrap();
    let t = Instant::now();
    while !sock.exists() && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let r = Client::connect(d.path());
    let _ = server.kill();
    let _ = server.wait();
    match r {
        Err(Error::ForeignServer { uid: 65534, .. }) => {}
        other => panic!("talked to another user's server: {other:?}"),
    }
}
