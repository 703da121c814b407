//! The daemon as a background process: spawning, readiness, signals,
//! death and recovery. The daemon is this test binary re-run as
//! `process::helper_fake_daemon`.

use std::io::Write;
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use profkit_daemon::testing::FakeEngine;
use profkit_daemon::{
    daemon_state, spawn_daemon, Client, Daemon, DaemonState, Error, LoopOptions, Request,
    SessionDir, DEFAULT_READY_TIMEOUT,
};
use rustix::process::{kill_process, Pid, Signal};

use crate::util::{helper_command, helper_env, opts, status, wait_until, Session};

/// Where the helper's fake engine records that `stop` ran.
const STOP_MARKER: &str = "fake-stop.json";

/// The daemon process (modes: `run`, `fail`, `hang`).
#[test]
#[ignore = "helper: run by the process tests as a daemon"]
fn helper_fake_daemon() {
    let Some((path, mode)) = helper_env() else {
        return;
    };
    let result = (|| -> profkit_daemon::Result<()> {
        let dir = SessionDir::open(&path)?;
        let daemon = Daemon::new(
            &dir,
            LoopOptions {
                sync_interval: Duration::from_millis(50),
                ..LoopOptions::default()
            },
        )?;
        match mode.as_str() {
            "fail" => {
                // What a real start does when the engine cannot be built:
                // return the error (the lock is released on the way out).
                return Err(profkit_daemon::Error::Engine {
                    op: "start",
                    message: "cannot open perf events: fake setup failure".into(),
                });
            }
            "hang" => std::thread::sleep(Duration::from_secs(60)),
            _ => {}
        }
        let marker = dir.create_truncate(STOP_MARKER)?;
        let mut engine = FakeEngine::new().on_stop(move |summary| {
            let _ = (&marker).write_all(summary.to_string().as_bytes());
        });
        daemon.run(&mut engine)?;
        Ok(())
    })();
    if let Err(e) = result {
        eprintln!("error: {e}");
        std::process::exit(1);
    }
}

fn spawn(s: &Session, mode: &str) -> profkit_daemon::Result<Child> {
    let exe = std::env::current_exe().unwrap();
    let cmd = helper_command(&exe, "process::helper_fake_daemon", mode, &s.path);
    spawn_daemon(cmd, &s.dir(), DEFAULT_READY_TIMEOUT)
}

fn signal(child: &Child, sig: Signal) {
    let pid = Pid::from_raw(child.id() as i32).unwrap();
    kill_process(pid, sig).unwrap();
}

/// Wait for the child to exit; kill it and fail after 20 s.
fn wait_exit(child: &mut Child) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(st) = child.try_wait().unwrap() {
            return st;
        }
        if start.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            panic!("daemon pid {} did not exit", child.id());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn stop_marker(path: &Path) -> serde_json::Value {
    let text = std::fs::read_to_string(path.join(STOP_MARKER)).unwrap();
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text:?}"))
}

#[test]
fn spawned_daemon_is_ready_when_spawn_returns_and_stops_on_request() {
    let s = Session::new();
    let mut child = spawn(&s, "run").unwrap();
    let st = status(&s.path).expect("ready means answering");
    assert_eq!(st["daemon"]["pid"], child.id());
    assert_eq!(
        daemon_state(&s.path).unwrap(),
        DaemonState::Running {
            pid: Some(child.id())
        }
    );
    let summary = Client::connect(&s.path)
        .unwrap()
        .request(Request::Stop)
        .unwrap()
        .into_result(Request::Stop)
        .unwrap();
    assert_eq!(summary["stopped"], true);
    assert!(wait_exit(&mut child).success());
    assert_eq!(stop_marker(&s.path), summary);
    assert_eq!(daemon_state(&s.path).unwrap(), DaemonState::NotRunning);
}

#[test]
fn sigterm_stops_the_daemon_cleanly() {
    let s = Session::new();
    let mut child = spawn(&s, "run").unwrap();
    wait_until(Duration::from_secs(5), "some rounds", || {
        status(&s.path).is_some_and(|st| st["daemon"]["rounds"].as_u64() >= Some(2))
    });
    signal(&child, Signal::TERM);
    assert!(wait_exit(&mut child).success());
    assert_eq!(stop_marker(&s.path)["stopped"], true);
    assert!(!s.path.join("control.sock").exists());
    assert!(!s.path.join("daemon.pid").exists());
    assert_eq!(daemon_state(&s.path).unwrap(), DaemonState::NotRunning);
    assert!(s.log().contains("stopping on SIGTERM"), "{}", s.log());
}

#[test]
fn sighup_rotates_and_sigint_stops() {
    let s = Session::new();
    let mut child = spawn(&s, "run").unwrap();
    signal(&child, Signal::HUP);
    wait_until(Duration::from_secs(5), "SIGHUP logged", || {
        s.log().contains("SIGHUP: rotated: {\"part\":2}")
    });
    assert!(status(&s.path).is_some(), "the daemon died of SIGHUP");
    assert!(child.try_wait().unwrap().is_none());
    signal(&child, Signal::INT);
    assert!(wait_exit(&mut child).success());
    assert_eq!(stop_marker(&s.path)["stopped"], true);
    assert!(s.log().contains("stopping on SIGINT"), "{}", s.log());
}

#[test]
fn second_start_reports_the_running_pid() {
    let s = Session::new();
    let mut child = spawn(&s, "run").unwrap();
    let e = spawn(&s, "run").unwrap_err();
    assert!(
        matches!(e, Error::AlreadyRunning { pid: Some(p), .. } if p == child.id()),
        "{e}"
    );
    // Also when it gets as far as the lock (no pre-check).
    let e = Daemon::new(&s.dir(), opts(Duration::from_secs(1))).unwrap_err();
    assert!(
        matches!(e, Error::AlreadyRunning { pid: Some(p), .. } if p == child.id()),
        "{e}"
    );
    signal(&child, Signal::TERM);
    wait_exit(&mut child);
}

#[test]
fn killed_daemon_is_dead_then_recovered_by_the_next_start() {
    let s = Session::new();
    let mut child = spawn(&s, "run").unwrap();
    let pid = child.id();
    child.kill().unwrap(); // SIGKILL: no cleanup at all
    wait_exit(&mut child);

    assert_eq!(
        daemon_state(&s.path).unwrap(),
        DaemonState::Dead { pid: Some(pid) }
    );
    let e = Client::connect(&s.path).unwrap_err();
    assert!(
        matches!(e, Error::DaemonDied { pid: Some(p), .. } if p == pid),
        "{e}"
    );

    let mut again = spawn(&s, "run").unwrap();
    assert_ne!(again.id(), pid);
    signal(&again, Signal::TERM);
    assert!(wait_exit(&mut again).success());
    assert_eq!(daemon_state(&s.path).unwrap(), DaemonState::NotRunning);
}

#[test]
fn daemon_that_fails_to_start_reports_why() {
    let s = Session::new();
    let e = spawn(&s, "fail").unwrap_err();
    match &e {
        Error::DaemonExited { status, log } => {
            assert!(status.contains('1'), "{status}");
            assert!(log.contains("fake setup failure"), "{log}");
        }
        e => panic!("unexpected {e}"),
    }
    assert!(e.to_string().contains("fake setup failure"));
    // It cleaned up on its way out: not running, not dead.
    assert_eq!(daemon_state(&s.path).unwrap(), DaemonState::NotRunning);
}

#[test]
fn daemon_that_never_gets_ready_is_killed_after_the_timeout() {
    let s = Session::new();
    let exe = std::env::current_exe().unwrap();
    let cmd = helper_command(&exe, "process::helper_fake_daemon", "hang", &s.path);
    let t0 = Instant::now();
    let e = spawn_daemon(cmd, &s.dir(), Duration::from_millis(700)).unwrap_err();
    assert!(matches!(e, Error::ReadyTimeout { .. }), "{e}");
    assert!(t0.elapsed() < Duration::from_secs(10));
    let Error::ReadyTimeout { pid, .. } = e else {
        unreachable!()
    };
    // Killed: its lock is free again.
    wait_until(Duration::from_secs(5), "the lock is released", || {
        !matches!(daemon_state(&s.path).unwrap(), DaemonState::Running { .. })
    });
    assert!(matches!(
        daemon_state(&s.path).unwrap(),
        DaemonState::Dead { pid: Some(p) } if p == pid
    ));
}

#[test]
fn missing_program_is_a_spawn_error() {
    let s = Session::new();
    let cmd = std::process::Command::new(s.tmp.path().join("no-such-profctl"));
    let e = spawn_daemon(cmd, &s.dir(), Duration::from_secs(1)).unwrap_err();
    assert!(matches!(e, Error::Spawn { .. }), "{e}");
    assert!(e.to_string().contains("no-such-profctl"), "{e}");
}
