//! The boundary between the daemon machinery and the sampling engine.

use std::os::fd::BorrowedFd;

/// What the daemon drives: in profkit, `profkit-live`'s `LiveEngine`; in
/// tests, [`FakeEngine`](crate::testing::FakeEngine).
///
/// The daemon calls these from its one thread, never concurrently, and
/// turns an `Err(message)` into a log line and a counter ([`round`]) or an
/// error answer to the client (the others). Messages are shown to users
/// as they are: say what failed and, if there is one, the fix.
///
/// [`round`]: Engine::round
pub trait Engine {
    /// Descriptors that become readable when a ring passes its watermark
    /// (perf event fds with `wakeup_watermark`). The main loop polls them
    /// for `POLLIN` and runs [`round`](Engine::round) when one is readable.
    /// Called once per loop iteration, so it must be cheap; the set may
    /// change between calls. A descriptor that reports `POLLHUP`/`POLLERR`
    /// (a perf fd whose task exited) is dropped from polling for the rest
    /// of the run (the timer still drains its ring); descriptors are told
    /// apart by number, so keep them open for the whole run rather than
    /// closing one and opening another. Return an empty `Vec`
    /// to rely on the timer alone.
    fn wake_fds(&self) -> Vec<BorrowedFd<'_>>;

    /// One sync round: drain every ring into the event buffer. Called every
    /// sync interval and when a wake fd is readable. An error is logged and
    /// counted, never fatal.
    fn round(&mut self) -> Result<(), String>;

    /// A round, then wait until everything so far is on disk
    /// (`profctl dump`). Does its own round: the daemon does not call
    /// [`round`](Engine::round) first.
    fn dump(&mut self) -> Result<(), String>;

    /// Counters for `profctl status` (per-CPU samples/lost, rounds, bytes
    /// written, last round duration, ...). Answered under the key
    /// `"engine"`, next to the daemon's own counters under `"daemon"`.
    fn status(&self) -> serde_json::Value;

    /// Discard the samples so far (`profctl reset`).
    fn reset(&mut self) -> Result<(), String>;

    /// Close the current part of the session and go on in a new one
    /// (`profctl rotate`, SIGHUP). Answers what the new part is. The
    /// default cannot.
    fn rotate(&mut self) -> Result<serde_json::Value, String> {
        Err("this engine cannot rotate its session".into())
    }

    /// Lines for the daemon's log about what the engine did on its own in
    /// the last round (a rotation by time or size, parts deleted), taken
    /// after every round. The default has none.
    fn take_log_lines(&mut self) -> Vec<String> {
        Vec::new()
    }

    /// Whether the engine has nothing more to record, and why (e.g. its
    /// session directory was deleted, so no client can reach the daemon
    /// any more). Checked after every round; when it says `Some(reason)`,
    /// the main loop leaves as on a stop request: it logs the reason, calls
    /// [`stop`](Engine::stop) (so the session gets its footer), cleans up
    /// and returns the summary. The default never finishes.
    fn finished(&mut self) -> Option<String> {
        None
    }

    /// Disable sampling, final drain, reconcile, write the footer; returns
    /// the summary `profctl stop` prints. Called exactly once, last. Does
    /// its own final drain: the daemon does not call
    /// [`round`](Engine::round) first.
    fn stop(&mut self) -> Result<serde_json::Value, String>;
}
