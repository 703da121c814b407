//! The one time-boxed worker: work that may hang on a file a user
//! controls (a FUSE or NFS file that never answers, a slow disk) runs on a
//! worker thread and is waited for at most a time; what does not answer
//! in time is given up and its thread left to it.
//!
//! - A job given up while its thread is still busy is **stuck**; it stops
//!   being stuck when its thread finishes (a slow read, not a hung one).
//!   Once [`TimeBox::stuck`] reaches the box's limit, new jobs are refused
//!   at once ([`Late::TooManyStuck`]) rather than pile up threads.
//! - Threads that finish are kept (up to the box's `keep_idle`) and take
//!   the next job, so a reader asked once per new binary does not start a
//!   thread per binary; they end when the box is dropped.
//! - Jobs are waited for one at a time ([`TimeBox::run`]), or started and
//!   polled ([`TimeBox::start`], [`Running`]) by a caller that keeps
//!   several in flight and collects their answers itself.
//!
//! Used by [`open_untrusted`](crate::open_untrusted)'s
//! [`Policy::time_box`](crate::Policy::time_box), and by the sync stage's
//! build-id, identity and reachability readers and its unwind-section
//! loader.

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex, PoisonError, Weak};
use std::time::{Duration, Instant};

/// Why a time-boxed job gave no answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Late {
    /// It did not answer within the time box; it was given up (and is
    /// stuck until its thread finishes).
    #[error("no answer in time (given up)")]
    TimedOut,
    /// Not started: too many earlier jobs are still stuck.
    #[error("not started: {stuck} earlier jobs are still stuck")]
    TooManyStuck {
        /// Jobs stuck.
        stuck: usize,
    },
    /// No thread could be started, or the job ended without an answer (it
    /// panicked).
    #[error("its worker thread could not be started or ended without an answer")]
    NoWorker,
}

type Job = Box<dyn FnOnce() + Send>;

const PENDING: u8 = 0;
const DONE: u8 = 1;
const GIVEN_UP: u8 = 2;

#[derive(Debug)]
struct Shared {
    name: &'static str,
    max_stuck: usize,
    keep_idle: usize,
    stuck: AtomicUsize,
    /// Threads waiting for a job, each by the sender of its own channel.
    idle: Mutex<Vec<Sender<Job>>>,
}

/// Worker threads for jobs that may hang, each waited for at most a time
/// (see the module docs). A clone is another handle on the same threads
/// and the same stuck count.
#[derive(Debug, Clone)]
pub struct TimeBox {
    shared: Arc<Shared>,
}

impl TimeBox {
    /// Threads named `name`; refuses jobs once `max_stuck` are stuck; keeps
    /// up to `keep_idle` finished threads for the next jobs (0: a thread
    /// per job).
    pub fn new(name: &'static str, max_stuck: usize, keep_idle: usize) -> TimeBox {
        TimeBox {
            shared: Arc::new(Shared {
                name,
                max_stuck,
                keep_idle,
                stuck: AtomicUsize::new(0),
                idle: Mutex::new(Vec::new()),
            }),
        }
    }

    /// Jobs given up whose threads have not finished.
    pub fn stuck(&self) -> usize {
        self.shared.stuck.load(Ordering::Relaxed)
    }

    /// True once no more jobs are started ([`Late::TooManyStuck`]).
    pub fn is_refusing(&self) -> bool {
        self.stuck() >= self.shared.max_stuck
    }

    /// Runs `job` and waits at most `limit` for its answer; a job that
    /// does not answer in time is given up.
    ///
    /// # Errors
    /// [`Late`]: timed out, not started, or no answer.
    pub fn run<A: Send + 'static>(
        &self,
        limit: Duration,
        job: impl FnOnce() -> A + Send + 'static,
    ) -> Result<A, Late> {
        let r = self.start(job)?;
        match r.rx.recv_timeout(limit) {
            Ok(a) => Ok(a),
            Err(RecvTimeoutError::Disconnected) => Err(Late::NoWorker),
            Err(RecvTimeoutError::Timeout) => r.give_up(),
        }
    }

    /// Starts `job` on a worker; the caller waits for it through the
    /// [`Running`] handle (or through a channel the job itself sends on),
    /// and gives it up with [`Running::give_up`] when its time is over.
    ///
    /// # Errors
    /// [`Late::TooManyStuck`], or [`Late::NoWorker`] if no thread could be
    /// started.
    pub fn start<A: Send + 'static>(
        &self,
        job: impl FnOnce() -> A + Send + 'static,
    ) -> Result<Running<A>, Late> {
        let stuck = self.stuck();
        if stuck >= self.shared.max_stuck {
            return Err(Late::TooManyStuck { stuck });
        }
        let state = Arc::new(AtomicU8::new(PENDING));
        let (tx, rx) = channel();
        let settle = Settle {
            state: Arc::clone(&state),
            shared: Arc::downgrade(&self.shared),
        };
        self.dispatch(Box::new(move || {
            let _ = tx.send(job());
            // After the answer is sent: one who gives up after this finds
            // the answer there.
            drop(settle);
        }))?;
        Ok(Running {
            rx,
            state,
            started: Instant::now(),
            shared: Arc::clone(&self.shared),
        })
    }

    /// Hands `job` to an idle thread, else to a new one.
    fn dispatch(&self, mut job: Job) -> Result<(), Late> {
        loop {
            let idle = self
                .shared
                .idle
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .pop();
            let Some(tx) = idle else { break };
            match tx.send(job) {
                Ok(()) => return Ok(()),
                // That thread is gone: try the next.
                Err(std::sync::mpsc::SendError(j)) => job = j,
            }
        }
        let shared = Arc::downgrade(&self.shared);
        std::thread::Builder::new()
            .name(self.shared.name.into())
            .spawn(move || worker(job, shared))
            .map(drop)
            .map_err(|_| Late::NoWorker)
    }
}

/// A worker thread: runs its job, then waits for another while the box
/// lives and wants it kept.
fn worker(mut job: Job, shared: Weak<Shared>) {
    loop {
        job();
        let rx = {
            let Some(s) = shared.upgrade() else { return };
            let mut idle = s.idle.lock().unwrap_or_else(PoisonError::into_inner);
            if idle.len() >= s.keep_idle {
                return;
            }
            let (tx, rx) = channel();
            idle.push(tx);
            rx
        };
        match rx.recv() {
            Ok(next) => job = next,
            // The box was dropped.
            Err(_) => return,
        }
    }
}

/// Settles a job's state when it ends (answered or panicked): a job given
/// up before is no longer stuck.
struct Settle {
    state: Arc<AtomicU8>,
    shared: Weak<Shared>,
}

impl Drop for Settle {
    fn drop(&mut self) {
        if self
            .state
            .compare_exchange(PENDING, DONE, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            if let Some(s) = self.shared.upgrade() {
                s.stuck.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }
}

/// A job started by [`TimeBox::start`]. Dropping it without
/// [`Running::give_up`] leaves the job to finish uncounted.
#[derive(Debug)]
pub struct Running<A> {
    rx: Receiver<A>,
    state: Arc<AtomicU8>,
    started: Instant,
    shared: Arc<Shared>,
}

impl<A> Running<A> {
    /// When it was started.
    pub fn started(&self) -> Instant {
        self.started
    }

    /// Its answer if it has come.
    pub fn try_answer(&self) -> Option<A> {
        self.rx.try_recv().ok()
    }

    /// Gives it up: it counts as stuck until its thread finishes. If it
    /// finished just now, its answer.
    ///
    /// # Errors
    /// [`Late::TimedOut`] (now stuck), or [`Late::NoWorker`] if it ended
    /// without an answer.
    pub fn give_up(self) -> Result<A, Late> {
        // Counted before it is given up, so the thread's decrement never
        // comes first.
        self.shared.stuck.fetch_add(1, Ordering::Relaxed);
        if self
            .state
            .compare_exchange(PENDING, GIVEN_UP, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
        {
            return Err(Late::TimedOut);
        }
        // It finished: its answer is sent (or it panicked).
        self.shared.stuck.fetch_sub(1, Ordering::Relaxed);
        self.rx.try_recv().map_err(|_| Late::NoWorker)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_in_time_come_back_and_a_thread_is_reused() {
        let b = TimeBox::new("test-box", 2, 1);
        let first = b
            .run(Duration::from_secs(10), || std::thread::current().id())
            .unwrap();
        // Give the thread time to go idle.
        std::thread::sleep(Duration::from_millis(50));
        let second = b
            .run(Duration::from_secs(10), || std::thread::current().id())
            .unwrap();
        assert_eq!(first, second, "the idle thread took the next job");
        assert_eq!(b.stuck(), 0);
    }

    #[test]
    fn hung_jobs_are_given_up_counted_and_then_refuse_further_jobs() {
        let b = TimeBox::new("test-box", 2, 1);
        let (release, wait) = std::sync::mpsc::channel::<()>();
        let wait = Arc::new(Mutex::new(wait));
        for _ in 0..2 {
            let w = Arc::clone(&wait);
            let r = b.run(Duration::from_millis(20), move || {
                let _ = w.lock().unwrap().recv();
            });
            assert_eq!(r, Err(Late::TimedOut));
        }
        assert_eq!(b.stuck(), 2);
        assert!(b.is_refusing());
        assert_eq!(
            b.run(Duration::from_secs(1), || 1),
            Err(Late::TooManyStuck { stuck: 2 })
        );
        // The hung jobs finish: no longer stuck, jobs run again.
        release.send(()).unwrap();
        release.send(()).unwrap();
        let t = Instant::now();
        while b.stuck() > 0 && t.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(b.stuck(), 0);
        assert_eq!(b.run(Duration::from_secs(10), || 7), Ok(7));
    }

    #[test]
    fn a_started_job_is_polled_and_a_panicking_one_is_not_stuck() {
        let b = TimeBox::new("test-box", 1, 0);
        let r = b.start(|| 5).unwrap();
        let t = Instant::now();
        let got = loop {
            if let Some(a) = r.try_answer() {
                break a;
            }
            assert!(t.elapsed() < Duration::from_secs(10));
            std::thread::sleep(Duration::from_millis(1));
        };
        assert_eq!(got, 5);
        let r = b.start(|| -> u8 { panic!("a job that panics") }).unwrap();
        // Until its thread has unwound (printing a backtrace can take a while).
        let t = Instant::now();
        while r.state.load(Ordering::Acquire) == PENDING {
            assert!(t.elapsed() < Duration::from_secs(10));
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(r.give_up(), Err(Late::NoWorker));
        assert_eq!(b.stuck(), 0);
    }
}
