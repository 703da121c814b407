//! The boundary between the daemon machinery and the sampling engine.

use std::os::fd::BorrowedFd;

/// An engine's error, typed where it arose (the daemon's callers may
/// downcast it to the engine's own error type).
pub type EngineError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// An error and its causes on one line, `outer: inner: innermost`, as the
/// daemon logs and answers it and the command line prints it: a cause whose
/// text the message before it already quotes (`open X: No such file or
/// directory`) is not said twice, nor an empty one.
pub fn error_message(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = String::new();
    for cause in std::iter::successors(Some(e), |c| c.source()) {
        let text = cause.to_string();
        if text.is_empty() || out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

/// What the daemon drives: in profkit, `profkit-live`'s `LiveEngine`; in
/// tests, [`FakeEngine`](crate::testing::FakeEngine).
///
/// The daemon calls these from its one thread, never concurrently, and
/// turns an `Err` into a log line and a counter ([`round`]) or an error
/// answer to the client (the others), shown with its causes
/// ([`error_message`]): say what failed and, if there is one, the fix.
/// Errors stay typed ([`EngineError`]) until they are shown.
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
    fn round(&mut self) -> Result<(), EngineError>;

    /// A round, then wait until everything so far is on disk
    /// (`profctl dump`). Does its own round: the daemon does not call
    /// [`round`](Engine::round) first.
    fn dump(&mut self) -> Result<(), EngineError>;

    /// Counters for `profctl status` (per-CPU samples/lost, rounds, bytes
    /// written, last round duration, ...). Answered under the key
    /// `"engine"`, next to the daemon's own counters under `"daemon"`.
    fn status(&self) -> serde_json::Value;

    /// Discard the samples so far (`profctl reset`).
    fn reset(&mut self) -> Result<(), EngineError>;

    /// Close the current part of the session and go on in a new one
    /// (`profctl rotate`, SIGHUP). Answers what the new part is. The
    /// default cannot.
    fn rotate(&mut self) -> Result<serde_json::Value, EngineError> {
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
    fn stop(&mut self) -> Result<serde_json::Value, EngineError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("writing /s/session.pkl")]
    struct Outer(#[source] std::io::Error);

    /// An engine's error stays typed until shown, and is shown with its
    /// cause (before, engines flattened errors to their top line).
    #[test]
    fn an_engine_error_is_typed_and_shown_with_its_causes() {
        let e: EngineError = Box::new(Outer(std::io::Error::from_raw_os_error(28)));
        assert!(e.downcast_ref::<Outer>().is_some());
        assert_eq!(
            error_message(&*e),
            "writing /s/session.pkl: No space left on device (os error 28)"
        );
    }
}
