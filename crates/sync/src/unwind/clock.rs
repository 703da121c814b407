//! The unwinder's clock (round budgets, windows, timed frames).

use profkit_eventlog::Cookie;
use std::time::{Duration, Instant};

/// The unwinder's clock: the real one, or (tests) a cost model in which
/// time passes only by a fixed cost per frame of each binary.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Clock {
    /// Time since the unwinder was made.
    Real(Instant),
    /// The time the frames stepped so far cost, by this model.
    #[cfg(test)]
    Model {
        /// What one frame of a binary costs.
        cost: fn(Cookie) -> Duration,
        /// The time now.
        now: Duration,
    },
}

impl Clock {
    /// Monotonic time (the round's budget, windows).
    pub(super) fn now(&self) -> Duration {
        match self {
            Clock::Real(epoch) => epoch.elapsed(),
            #[cfg(test)]
            Clock::Model { now, .. } => *now,
        }
    }

    /// This thread's CPU time (a suspect binary's frames: time the thread
    /// was preempted is not theirs). A system call, not the vDSO: only
    /// for timed frames.
    pub(super) fn cpu(&self) -> Duration {
        match self {
            Clock::Real(_) => {
                let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
                Duration::new(
                    u64::try_from(t.tv_sec).unwrap_or(0),
                    u32::try_from(t.tv_nsec).unwrap_or(0),
                )
            }
            #[cfg(test)]
            Clock::Model { now, .. } => *now,
        }
    }

    /// A frame of `cookie` was stepped (the model's time passes).
    #[inline]
    pub(super) fn stepped(&mut self, cookie: Cookie) {
        let _ = cookie;
        #[cfg(test)]
        if let Clock::Model { cost, now } = self {
            *now += cost(cookie);
        }
    }
}
