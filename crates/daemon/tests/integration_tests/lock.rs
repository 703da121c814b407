//! One daemon per session directory.

use std::sync::{Arc, Barrier};
use std::time::Duration;

use profkit_daemon::testing::FakeEngine;
use profkit_daemon::{
    daemon_state, run, Client, Daemon, DaemonLock, DaemonState, Error, SessionDir,
};

use crate::util::{opts, Session, ThreadDaemon};

#[test]
fn second_run_on_one_dir_fails_with_the_first_pid() {
    let s = Session::new();
    let first = ThreadDaemon::start(&s.path, FakeEngine::new(), opts(Duration::from_millis(250)));
    let dir = s.dir();
    let mut second = FakeEngine::new();
    let stats = second.stats();
    let e = run(&mut second, opts(Duration::from_millis(250)), &dir).unwrap_err();
    match &e {
        Error::AlreadyRunning { pid, dir } => {
            assert_eq!(*pid, Some(std::process::id()));
            assert_eq!(dir, &s.path);
        }
        e => panic!("unexpected {e}"),
    }
    assert!(e.to_string().contains("profctl stop"), "{e}");
    // The loser never touched its engine.
    assert!(stats.calls.lock().unwrap().is_empty());
    assert_eq!(
        daemon_state(&s.path).unwrap(),
        DaemonState::Running {
            pid: Some(std::process::id())
        }
    );
    first.stop();
    assert_eq!(daemon_state(&s.path).unwrap(), DaemonState::NotRunning);
}

#[test]
fn two_threads_racing_for_the_lock_one_wins() {
    for _ in 0..20 {
        let s = Session::new();
        let barrier = Arc::new(Barrier::new(2));
        let results: Vec<_> = (0..2)
            .map(|_| {
                let b = barrier.clone();
                let p = s.path.clone();
                std::thread::spawn(move || {
                    let dir = SessionDir::open(&p).unwrap();
                    b.wait();
                    let r = Daemon::new(&dir, opts(Duration::from_secs(1)));
                    // Hold a won lock until the other thread has tried.
                    b.wait();
                    r.map(|d| d.pid())
                })
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|h| h.join().unwrap())
            .collect();
        let won = results.iter().filter(|r| r.is_ok()).count();
        assert_eq!(won, 1, "{results:?}");
        let lost = results.iter().find_map(|r| r.as_ref().err()).unwrap();
        assert!(
            matches!(lost, Error::AlreadyRunning { pid: Some(p), .. } if *p == std::process::id()),
            "{lost}"
        );
    }
}

#[test]
fn stale_lock_of_a_dead_daemon_is_recovered_silently() {
    let s = Session::new();
    let dir = s.dir();
    // What a SIGKILLed daemon leaves: pid in both files, no lock holder.
    std::fs::write(s.path.join("daemon.lock"), "4000000\n").unwrap();
    std::fs::write(s.path.join("daemon.pid"), "4000000\n").unwrap();
    assert_eq!(
        daemon_state(&s.path).unwrap(),
        DaemonState::Dead { pid: Some(4000000) }
    );
    let e = Client::connect(&s.path).unwrap_err();
    assert!(
        matches!(
            e,
            Error::DaemonDied {
                pid: Some(4000000),
                ..
            }
        ),
        "{e}"
    );

    let d = ThreadDaemon::start(&s.path, FakeEngine::new(), opts(Duration::from_millis(250)));
    let pid_file = std::fs::read_to_string(s.path.join("daemon.pid")).unwrap();
    assert_eq!(pid_file.trim(), std::process::id().to_string());
    d.stop();
    assert!(s.log().contains("recovered the stale lock"), "{}", s.log());
    drop(dir);
}

#[test]
fn lock_held_but_not_serving_is_reported_as_starting() {
    let s = Session::new();
    let dir = s.dir();
    let _lock = DaemonLock::acquire(&dir).unwrap();
    let e = Client::connect(&s.path).unwrap_err();
    assert!(
        matches!(e, Error::Starting { pid: Some(p), .. } if p == std::process::id()),
        "{e}"
    );
}
