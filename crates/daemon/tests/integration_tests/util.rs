//! Shared helpers: temporary sessions, daemons in threads, re-executing
//! this binary as a helper process.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use profkit_daemon::testing::{FakeEngine, FakeStats};
use profkit_daemon::{run, Client, LoopOptions, Request, SessionDir};
use serde_json::Value;

/// Env var that tells a helper test which session directory to use.
pub const HELPER_DIR: &str = "PROFKIT_TEST_HELPER_DIR";
/// Env var that selects a helper's behaviour.
pub const HELPER_MODE: &str = "PROFKIT_TEST_HELPER_MODE";

/// A temporary directory and a session directory `s` inside it.
pub struct Session {
    pub tmp: tempfile::TempDir,
    pub path: PathBuf,
}

impl Session {
    pub fn new() -> Session {
        let tmp = tempfile::tempdir().unwrap();
        let path = tmp.path().join("s");
        SessionDir::create(&path).unwrap();
        Session { tmp, path }
    }

    pub fn dir(&self) -> SessionDir {
        SessionDir::open(&self.path).unwrap()
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.path.join(profkit_daemon::DAEMON_LOG)).unwrap_or_default()
    }
}

/// Options for in-process daemons: no signal handlers (they would be
/// process-wide), a given interval.
pub fn opts(interval: Duration) -> LoopOptions {
    LoopOptions {
        sync_interval: interval,
        handle_signals: false,
        ..LoopOptions::default()
    }
}

/// A daemon running `engine` in a thread of this process.
pub struct ThreadDaemon {
    pub stats: Arc<FakeStats>,
    pub handle: Option<JoinHandle<profkit_daemon::Result<Value>>>,
    pub path: PathBuf,
}

impl ThreadDaemon {
    pub fn start(path: &Path, engine: FakeEngine, opts: LoopOptions) -> ThreadDaemon {
        let stats = engine.stats();
        let p = path.to_owned();
        let handle = std::thread::spawn(move || {
            let dir = SessionDir::open(&p)?;
            let mut engine = engine;
            run(&mut engine, opts, &dir)
        });
        let d = ThreadDaemon {
            stats,
            handle: Some(handle),
            path: path.to_owned(),
        };
        wait_until(Duration::from_secs(10), "the daemon thread serves", || {
            status(&d.path).is_some()
        });
        d
    }

    /// Stop through the socket; returns the summary the client got and the
    /// one `run` returned.
    pub fn stop(mut self) -> (Value, Value) {
        let got = Client::connect(&self.path)
            .unwrap()
            .request(Request::Stop)
            .unwrap()
            .into_result(Request::Stop)
            .unwrap();
        let returned = self.handle.take().unwrap().join().unwrap().unwrap();
        (got, returned)
    }
}

impl Drop for ThreadDaemon {
    fn drop(&mut self) {
        if let Some(h) = self.handle.take() {
            if let Ok(c) = Client::connect(&self.path) {
                let _ = c.request(Request::Stop);
            }
            let _ = h.join();
        }
    }
}

/// The daemon's status, if one answers.
pub fn status(path: &Path) -> Option<Value> {
    Client::connect(path)
        .ok()?
        .request(Request::Status)
        .ok()?
        .into_result(Request::Status)
        .ok()
}

/// Poll `cond` every 5 ms until it holds; panic after `limit`.
pub fn wait_until(limit: Duration, what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < limit, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A command that re-runs this test binary as helper `name` (a test
/// path like `process::helper_fake_daemon`) in `mode` for `dir`.
pub fn helper_command(exe: &Path, name: &str, mode: &str, dir: &Path) -> Command {
    let mut cmd = Command::new(exe);
    cmd.args([
        "--ignored",
        "--exact",
        name,
        "--nocapture",
        "--test-threads=1",
    ])
    .env(HELPER_DIR, dir)
    .env(HELPER_MODE, mode);
    cmd
}

/// The helper's session directory and mode, if this process is a helper.
pub fn helper_env() -> Option<(PathBuf, String)> {
    let dir = std::env::var_os(HELPER_DIR)?;
    let mode = std::env::var(HELPER_MODE).unwrap_or_default();
    Some((dir.into(), mode))
}

pub fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}
