//! The status reply, typed: the daemon's own counters ([`DaemonStatus`])
//! beside the engine's, as one [`StatusReply`] that the daemon serializes
//! and clients read back with serde (no field is looked up by name).

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The daemon's own counters, kept by its loop.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    pub timer_rounds: u64,
    pub wake_rounds: u64,
    pub round_errors: u64,
    pub last_round_error: Option<String>,
    pub last_round: Duration,
    pub max_round: Duration,
    pub missed_ticks: u64,
    pub requests: u64,
    pub refused: u64,
}

impl Stats {
    pub fn rounds(&self) -> u64 {
        self.timer_rounds + self.wake_rounds
    }
}

/// The daemon's half of a status reply (`"daemon"`). A counter the reply
/// leaves out reads as zero.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DaemonStatus {
    /// The daemon's pid.
    pub pid: u32,
    /// Who owns the session directory (and may talk to the daemon).
    pub uid: u32,
    /// The session directory.
    pub session_dir: String,
    /// When the daemon started, seconds since the epoch.
    pub started_unix: u64,
    /// Seconds since it started.
    pub uptime_s: f64,
    /// Milliseconds between timer rounds.
    pub sync_interval_ms: f64,
    /// Rounds run, by the timer and on a wake-up.
    pub rounds: u64,
    /// Rounds run by the timer.
    pub timer_rounds: u64,
    /// Rounds run because a ring passed its watermark.
    pub wake_rounds: u64,
    /// Timer ticks missed because a round ran long.
    pub missed_ticks: u64,
    /// Rounds that failed.
    pub round_errors: u64,
    /// The last failure's message.
    pub last_round_error: Option<String>,
    /// The last round's duration (µs).
    pub last_round_us: u64,
    /// The longest round's duration (µs).
    pub max_round_us: u64,
    /// Requests answered.
    pub requests: u64,
    /// Connections refused (another user, a bad request).
    pub refused: u64,
    /// Descriptors polled for wake-ups.
    pub wake_fds: usize,
    /// Of them, dropped after a hang-up or error.
    pub dead_wake_fds: usize,
}

/// A status reply: the daemon's counters and the engine's
/// ([`crate::Engine::status`], whatever the engine answers).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct StatusReply {
    /// The daemon's counters.
    pub daemon: DaemonStatus,
    /// The engine's counters.
    pub engine: serde_json::Value,
}

impl StatusReply {
    /// A status answer read back.
    ///
    /// # Errors
    /// When the value is not a status reply.
    pub fn from_value(v: serde_json::Value) -> serde_json::Result<StatusReply> {
        serde_json::from_value(v)
    }
}
