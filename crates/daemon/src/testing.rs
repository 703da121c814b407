//! A fake [`Engine`] for tests of this crate and of `profctl`: it samples
//! nothing, counts calls, and can fail on demand.

use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{json, Value};

use crate::engine::{Engine, EngineError};

/// What a [`FakeEngine`] was asked to do; shared, so a test can watch an
/// engine another thread runs.
#[derive(Debug, Default)]
pub struct FakeStats {
    /// Calls of [`Engine::round`].
    pub rounds: AtomicU64,
    /// Calls of [`Engine::dump`].
    pub dumps: AtomicU64,
    /// Calls of [`Engine::reset`].
    pub resets: AtomicU64,
    /// Calls of [`Engine::rotate`].
    pub rotations: AtomicU64,
    /// Calls of [`Engine::stop`].
    pub stops: AtomicU64,
    /// Every call by name, in order.
    pub calls: Mutex<Vec<&'static str>>,
    /// While set, [`Engine::round`] fails.
    pub fail_rounds: AtomicBool,
    /// Once set, [`Engine::finished`] says the engine is done.
    pub finish: AtomicBool,
}

impl FakeStats {
    /// `rounds` now.
    pub fn rounds(&self) -> u64 {
        self.rounds.load(Ordering::SeqCst)
    }

    /// `stops` now.
    pub fn stops(&self) -> u64 {
        self.stops.load(Ordering::SeqCst)
    }

    fn call(&self, name: &'static str) {
        self.calls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(name);
    }
}

type StopHook = Box<dyn FnMut(&Value) + Send>;

/// An [`Engine`] that samples nothing.
///
/// Rounds drain the optional wake socket (so a readable wake fd triggers
/// exactly one round per write); `stop` returns `{"rounds": N,
/// "stopped": true}` and runs the optional hook (e.g. to leave a marker
/// file for a test that only sees the process from outside).
pub struct FakeEngine {
    stats: Arc<FakeStats>,
    wake: Option<UnixStream>,
    on_stop: Option<StopHook>,
}

impl std::fmt::Debug for FakeEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeEngine")
            .field("stats", &self.stats)
            .field("wake", &self.wake)
            .finish_non_exhaustive()
    }
}

impl Default for FakeEngine {
    fn default() -> Self {
        Self::new()
    }
}

impl FakeEngine {
    /// A fake engine with no wake fd.
    pub fn new() -> FakeEngine {
        FakeEngine {
            stats: Arc::default(),
            wake: None,
            on_stop: None,
        }
    }

    /// The shared counters.
    pub fn stats(&self) -> Arc<FakeStats> {
        self.stats.clone()
    }

    /// Use `wake` (one end of a socket pair) as the wake fd: writing to the
    /// other end makes it readable; each round drains it.
    pub fn with_wake(mut self, wake: UnixStream) -> std::io::Result<FakeEngine> {
        wake.set_nonblocking(true)?;
        self.wake = Some(wake);
        Ok(self)
    }

    /// Run `hook` with the summary when stopped.
    pub fn on_stop(mut self, hook: impl FnMut(&Value) + Send + 'static) -> FakeEngine {
        self.on_stop = Some(Box::new(hook));
        self
    }
}

impl Engine for FakeEngine {
    fn wake_fds(&self) -> Vec<BorrowedFd<'_>> {
        self.wake.iter().map(|w| w.as_fd()).collect()
    }

    fn round(&mut self) -> Result<(), EngineError> {
        self.stats.call("round");
        self.stats.rounds.fetch_add(1, Ordering::SeqCst);
        if let Some(w) = &self.wake {
            let mut buf = [0u8; 256];
            while matches!((&*w).read(&mut buf), Ok(n) if n > 0) {}
        }
        if self.stats.fail_rounds.load(Ordering::SeqCst) {
            return Err("fake round failure".into());
        }
        Ok(())
    }

    fn dump(&mut self) -> Result<(), EngineError> {
        self.stats.call("dump");
        self.stats.dumps.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    fn status(&self) -> Value {
        json!({
            "rounds": self.stats.rounds(),
            "dumps": self.stats.dumps.load(Ordering::SeqCst),
            "resets": self.stats.resets.load(Ordering::SeqCst),
        })
    }

    fn reset(&mut self) -> Result<(), EngineError> {
        self.stats.call("reset");
        self.stats.resets.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    fn rotate(&mut self) -> Result<serde_json::Value, EngineError> {
        self.stats.call("rotate");
        let n = self.stats.rotations.fetch_add(1, Ordering::SeqCst) + 1;
        Ok(serde_json::json!({ "part": n + 1 }))
    }

    fn finished(&mut self) -> Option<String> {
        self.stats
            .finish
            .load(Ordering::SeqCst)
            .then(|| "the fake engine was told to finish".to_owned())
    }

    fn stop(&mut self) -> Result<Value, EngineError> {
        self.stats.call("stop");
        self.stats.stops.fetch_add(1, Ordering::SeqCst);
        let summary = json!({ "rounds": self.stats.rounds(), "stopped": true });
        if let Some(hook) = &mut self.on_stop {
            hook(&summary);
        }
        Ok(summary)
    }
}
