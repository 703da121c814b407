//! The main loop: timer rhythm, wake fds, failing rounds, debug log.

use std::io::Write;
use std::os::unix::net::UnixStream;
use std::sync::atomic::Ordering;
use std::time::Duration;

use profkit_daemon::testing::FakeEngine;
use profkit_daemon::{Level, LoopOptions};

use crate::util::{opts, status, wait_until, Session, ThreadDaemon};

#[test]
fn timer_runs_a_round_every_sync_interval() {
    let s = Session::new();
    let d = ThreadDaemon::start(&s.path, FakeEngine::new(), opts(Duration::from_millis(250)));
    let before = d.stats.rounds();
    std::thread::sleep(Duration::from_millis(1100));
    let n = d.stats.rounds() - before;
    assert!((3..=5).contains(&n), "{n} rounds in 1.1 s at 250 ms");
    let st = status(&s.path).unwrap();
    assert_eq!(st["daemon"]["wake_rounds"], 0);
    d.stop();
}

#[test]
fn readable_wake_fd_triggers_a_round() {
    let s = Session::new();
    let (ours, theirs) = UnixStream::pair().unwrap();
    let engine = FakeEngine::new().with_wake(theirs).unwrap();
    // A timer that never fires within the test: every round is a wake round.
    let d = ThreadDaemon::start(&s.path, engine, opts(Duration::from_secs(3600)));
    assert_eq!(d.stats.rounds(), 0);
    for n in 1..=3 {
        (&ours).write_all(b"!").unwrap();
        wait_until(Duration::from_secs(5), "a wake round ran", || {
            d.stats.rounds() >= n
        });
        std::thread::sleep(Duration::from_millis(30));
        assert_eq!(d.stats.rounds(), n, "one round per wake-up");
    }
    let st = status(&s.path).unwrap();
    assert_eq!(st["daemon"]["wake_rounds"], 3);
    assert_eq!(st["daemon"]["timer_rounds"], 0);
    assert_eq!(st["daemon"]["wake_fds"], 1);
    d.stop();
}

#[test]
fn hung_up_wake_fd_is_dropped_not_spun_on() {
    let s = Session::new();
    let (ours, theirs) = UnixStream::pair().unwrap();
    let engine = FakeEngine::new().with_wake(theirs).unwrap();
    let d = ThreadDaemon::start(&s.path, engine, opts(Duration::from_secs(3600)));
    drop(ours); // the wake fd now reports POLLHUP forever
    wait_until(Duration::from_secs(5), "the hang-up was seen", || {
        d.stats.rounds() >= 1
    });
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(d.stats.rounds(), 1, "the loop spun on a hung-up fd");
    let st = status(&s.path).unwrap();
    assert_eq!(st["daemon"]["dead_wake_fds"], 1);
    d.stop();
    assert!(s.log().contains("no longer polled"), "{}", s.log());
}

#[test]
fn failing_rounds_are_counted_and_logged_never_fatal() {
    let s = Session::new();
    let engine = FakeEngine::new();
    engine.stats().fail_rounds.store(true, Ordering::SeqCst);
    let d = ThreadDaemon::start(&s.path, engine, opts(Duration::from_millis(10)));
    wait_until(Duration::from_secs(5), "rounds failed", || {
        d.stats.rounds() >= 20
    });
    let st = status(&s.path).unwrap();
    assert!(st["daemon"]["round_errors"].as_u64().unwrap() >= 20, "{st}");
    assert_eq!(st["daemon"]["last_round_error"], "fake round failure");
    let (summary, _) = d.stop();
    assert_eq!(summary["stopped"], true);
    let log = s.log();
    let warned = log.matches("sync round failed").count();
    // Logged, but sparsely: 1, 2, 4, 8, 16... not once per round.
    assert!((1..=12).contains(&warned), "{warned} warnings:\n{log}");
}

#[test]
fn debug_level_logs_one_line_per_round() {
    let s = Session::new();
    let o = LoopOptions {
        log_level: Some(Level::Debug),
        ..opts(Duration::from_millis(20))
    };
    let d = ThreadDaemon::start(&s.path, FakeEngine::new(), o);
    wait_until(Duration::from_secs(5), "a few rounds", || {
        d.stats.rounds() >= 3
    });
    d.stop();
    let log = s.log();
    assert!(log.contains("round 1 (Timer) took"), "{log}");
    assert!(log.contains("round 3 (Timer) took"), "{log}");
}

#[test]
fn info_level_logs_no_round_lines() {
    let s = Session::new();
    let o = LoopOptions {
        log_level: Some(Level::Info),
        ..opts(Duration::from_millis(20))
    };
    let d = ThreadDaemon::start(&s.path, FakeEngine::new(), o);
    wait_until(Duration::from_secs(5), "a few rounds", || {
        d.stats.rounds() >= 3
    });
    d.stop();
    let log = s.log();
    assert!(!log.contains("(Timer) took"), "{log}");
    assert!(log.contains("serving"), "{log}");
}

#[test]
fn an_engine_that_finishes_is_stopped_and_the_daemon_cleans_up() {
    let s = Session::new();
    let mut d = ThreadDaemon::start(&s.path, FakeEngine::new(), opts(Duration::from_millis(20)));
    let rounds_before = d.stats.rounds();
    d.stats.finish.store(true, Ordering::SeqCst);
    let summary = d.handle.take().unwrap().join().unwrap().unwrap();
    // The loop left after a round, then ran the engine's stop, once, last.
    assert_eq!(summary["stopped"], true);
    assert!(d.stats.rounds() > rounds_before);
    assert_eq!(d.stats.stops(), 1);
    assert_eq!(d.stats.calls.lock().unwrap().last(), Some(&"stop"));
    assert!(!s.path.join(profkit_daemon::CONTROL_SOCKET).exists());
    assert!(!s.path.join(profkit_daemon::PID_FILE).exists());
    let log = s.log();
    assert!(
        log.contains("the engine finished: the fake engine was told to finish"),
        "{log}"
    );
}
