//! The profkit daemon's process machinery, independent of what is sampled.
//!
//! `profctl start` starts a background daemon that samples (OProfile's
//! `oprofiled`, on `perf_event_open`); `profctl stop/dump/status/reset` talk
//! to it. This crate owns everything about that daemon except the sampling:
//!
//! - [`SessionDir`]: the session directory (`./profkit_data` by default,
//!   chosen by the CLI), created 0700 and validated (ours, not writable by
//!   others, not a symlink); files inside are opened relative to its fd
//!   with `O_NOFOLLOW`. Known names: [`SESSION_LOG`], [`LOCK_FILE`],
//!   [`PID_FILE`], [`CONTROL_SOCKET`], [`DAEMON_LOG`].
//! - [`DaemonLock`] and [`daemon_state`]: one daemon per directory
//!   (`flock` on `daemon.lock`); stale locks of dead daemons recover
//!   themselves.
//! - [`Request`]/[`Response`] and [`Client`]: the control protocol, one
//!   JSON line each way over `control.sock` (mode 0600, peer uid checked
//!   with `SO_PEERCRED`: the owner or root only).
//! - [`Daemon`] / [`run`]: the main loop (sync timer, wake fds, requests,
//!   signals) around an [`Engine`], the trait the live recording
//!   (`profkit-live`'s `LiveEngine` over `profkit-sync`'s `Recorder`)
//!   implements.
//! - [`spawn_daemon`]: starting the daemon in the background and waiting
//!   until it answers, or reporting why it died.
//! - [`Logger`]: lines to `daemon.log`, level from `PROFKIT_LOG`.
//!
//! # Design constraints
//!
//! - No dependency on the sampling crates: the engine is behind
//!   [`Engine`], and every test here runs a [`testing::FakeEngine`].
//! - `#![forbid(unsafe_code)]`: syscalls go through `rustix` (flock,
//!   SO_PEERCRED, poll, openat) and `signal-hook` (handlers).
//! - One thread. The daemon's work is a round every 250 ms and an
//!   occasional request; a second thread would only add locking. Nothing a
//!   client does can block the loop: connections are non-blocking until
//!   their request line is complete, with a deadline.
//! - Nothing is trusted by path alone: the directory is opened once and
//!   checked on its fd; files are created 0600 with `O_NOFOLLOW`; the socket
//!   appears under its final name only after it is 0600 and listening.
//! - A failed round is logged and counted, never fatal; the daemon dies
//!   only when told to, when its engine says it is finished
//!   ([`Engine::finished`], e.g. its session directory was deleted) or when
//!   killed, and the engine's `stop` runs on every exit path of
//!   [`Daemon::run`] so the session file gets its footer.
//!
//! # Example
//!
//! A daemon with a fake engine in a thread, asked for its status, then
//! stopped:
//!
//! ```
//! use profkit_daemon::testing::FakeEngine;
//! use profkit_daemon::{run, Client, LoopOptions, Request, SessionDir};
//! use std::time::Duration;
//!
//! let tmp = tempfile::tempdir()?;
//! let dir = SessionDir::create(tmp.path().join("profkit_data"))?;
//! let opts = LoopOptions { handle_signals: false, ..LoopOptions::default() };
//! std::thread::scope(|s| -> Result<(), profkit_daemon::Error> {
//!     let daemon = s.spawn(|| run(&mut FakeEngine::new(), opts, &dir));
//!     // Wait until it serves (`spawn_daemon` does this for a process).
//!     let client = loop {
//!         match Client::connect(dir.path()) {
//!             Ok(c) => break c,
//!             Err(_) => std::thread::sleep(Duration::from_millis(5)),
//!         }
//!     };
//!     let status = client.request(Request::Status)?.into_result(Request::Status)?;
//!     assert_eq!(status["daemon"]["pid"], std::process::id());
//!
//!     let summary = Client::connect(dir.path())?
//!         .request(Request::Stop)?
//!         .into_result(Request::Stop)?;
//!     assert_eq!(summary["stopped"], true);
//!     assert_eq!(daemon.join().unwrap()?, summary);
//!     Ok(())
//! })?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Not for
//!
//! Sampling, draining rings or writing the session file (that is
//! `profkit-sync` and `profkit-eventlog` behind [`Engine`]); not a general
//! service manager: no daemonizing by double fork, no restarts, no remote
//! control (the socket is local and the owner's only).
//!
//! # Implementation notes
//!
//! A daemon's life (`profctl` on the left, the daemon on the right):
//!
//! ```text
//! profctl start ──spawn_daemon──▶ daemon process (own process group,
//!   │                              stdout/stderr → daemon.log)
//!   │                             SessionDir::create      0700, checked
//!   │                             Daemon::new             flock daemon.lock,
//!   │                                                     pid → daemon.lock, daemon.pid
//!   │                             build the engine        perf events, session.pkl
//!   │                             Daemon::run             bind control.sock.PID.tmp,
//!   │    status? ───────────────▶                         chmod 0600, rename → control.sock
//!   │    ◀──────── {"ok":{pid}}   loop:
//!   ▼ "started"                     every 250 ms ──────▶  engine.round()
//!                                   wake fd readable ──▶  engine.round()
//! profctl dump ── {"request":"dump"} ─▶ engine.dump()   (a round + wait for disk)
//!              ◀─ {"ok":{status}} ──
//! profctl stop ── {"request":"stop"} ─▶ leave loop     (SIGTERM/SIGINT: same)
//!                                     engine.stop()     (disable, drain, footer)
//!                                     rm control.sock, rm daemon.pid, unlock
//!              ◀─ {"ok":{summary}} ─  exit
//! ```
//!
//! The daemon cleans up after itself on a stop; if it is killed instead,
//! `daemon.pid` stays behind without a lock holder ([`DaemonState::Dead`]),
//! clients say it died, and the next start takes the free lock over.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod client;
mod daemon;
mod dir;
mod engine;
mod error;
mod lock;
mod log;
mod protocol;
mod signals;
mod socket;
mod spawn;
mod status;
pub mod testing;

pub use client::Client;
pub use daemon::{
    run, Daemon, LoopOptions, DEFAULT_SYNC_INTERVAL, MAX_PENDING_CONNECTIONS, REQUEST_DEADLINE,
};
pub use dir::{
    SessionDir, CONTROL_SOCKET, DAEMON_LOG, DIR_MODE, FILE_MODE, LOCK_FILE, PID_FILE, SESSION_LOG,
};
pub use engine::{error_message, Engine, EngineError};
pub use error::{Error, Result};
pub use lock::{daemon_state, DaemonLock, DaemonState};
pub use log::{Level, Logger, LOG_ENV};
pub use protocol::{Request, Response, MAX_REQUEST_LINE, MAX_RESPONSE_LINE};
pub use spawn::{spawn_daemon, DEFAULT_READY_TIMEOUT};
pub use status::{DaemonStatus, StatusReply};
