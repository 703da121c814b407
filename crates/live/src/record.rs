//! `profctl record`: a command run under a session of its own, the daemon
//! stopped on every way out (the command's end, an error, a signal).
//!
//! Per process (the default) the command starts stopped: a shell stops
//! itself, the events are opened on it with `enable_on_exec`, and it
//! continues into the exec, where sampling begins. System-wide (`-a`) the
//! daemon starts first and the command after. SIGINT, SIGTERM and SIGHUP
//! reaching `record` are noted rather than ending it (it must still stop
//! its daemon); SIGTERM and SIGHUP are passed on to the command (Ctrl-C
//! reaches it from the terminal directly).
//!
//! Not for: the flags (`profctl`) or starting the daemon process (given as
//! a function, so that this stays independent of how the daemon is run).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rustix::process::{kill_process, Pid, Signal};
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

use crate::error::Error;
use crate::summary::Summary;

/// Why a command could not be recorded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// No such command on `PATH`.
    #[error("command not found: {0}")]
    NotFound(String),
    /// SIGINT, SIGTERM or SIGHUP before the command started.
    #[error("interrupted before the command started")]
    Interrupted,
    /// The command could not be started, stopped, resumed or waited for.
    #[error("{what}")]
    Io {
        /// What was being done.
        what: String,
        /// Why it failed.
        source: std::io::Error,
    },
    /// The stopped shell went away before it could be profiled.
    #[error("the command (pid {pid}) exited before it could be profiled")]
    ExitedEarly {
        /// Its pid.
        pid: u32,
    },
    /// The shell did not stop itself within a second.
    #[error("the command (pid {pid}) did not reach its start point")]
    NotStopped {
        /// Its pid.
        pid: u32,
    },
}

fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> RecordError {
    let what = what.into();
    move |source| RecordError::Io { what, source }
}

/// What `record` runs.
#[derive(Debug, Clone)]
pub struct RecordRun<'a> {
    /// The session directory (where the daemon is reached to stop it).
    pub session_dir: &'a Path,
    /// The command and its arguments (at least one word).
    pub command: &'a [String],
    /// Sample the whole system (`-a`) rather than the command.
    pub system_wide: bool,
}

/// Runs `run.command` under a session: `start(pid)` starts the daemon
/// (`Some(pid)`: sampling that process, enabled at its exec; `None`:
/// system-wide) and answers the daemon's pid. Returns the command's exit
/// status and the stop summary.
///
/// # Errors
/// [`RecordError`] (as [`Error::Record`]) when the command cannot be run;
/// `start`'s error; the stop request's error (the daemon is then sent
/// SIGTERM, its own clean stop, and waited for).
pub fn record<E>(
    run: &RecordRun<'_>,
    start: impl FnOnce(Option<u32>) -> Result<u32, E>,
) -> Result<(ExitStatus, Summary), E>
where
    E: From<Error>,
{
    let rec = |e: RecordError| E::from(Error::Record(e));
    let command = run.command;
    let which = Command::new("sh")
        .arg("-c")
        .arg("command -v \"$1\"")
        .arg("sh")
        .arg(&command[0])
        .output()
        .map_err(io("looking the command up"))
        .map_err(rec)?;
    if !which.status.success() {
        return Err(rec(RecordError::NotFound(command[0].clone())));
    }
    let sig = Interrupts::catch().map_err(rec)?;
    let mut child;
    let mut daemon;
    if run.system_wide {
        daemon = RecordDaemon::new(run.session_dir, start(None)?);
        if sig.any() {
            return Err(rec(RecordError::Interrupted));
        }
        child = Command::new(&command[0])
            .args(&command[1..])
            .spawn()
            .map_err(io(format!("running {}", command[0])))
            .map_err(rec)?;
    } else {
        child = Command::new("sh")
            .arg("-c")
            .arg("kill -STOP $$; exec \"$@\"")
            .arg("sh")
            .args(command)
            .spawn()
            .map_err(io("starting the command"))
            .map_err(rec)?;
        if let Err(e) = wait_stopped(child.id()) {
            let _ = child.kill();
            let _ = child.wait();
            return Err(rec(e));
        }
        daemon = match start(Some(child.id())) {
            Ok(pid) => RecordDaemon::new(run.session_dir, pid),
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(e);
            }
        };
        if sig.any() {
            let _ = child.kill();
            let _ = child.wait();
            return Err(rec(RecordError::Interrupted));
        }
        if let Some(pid) = Pid::from_raw(child.id() as i32) {
            kill_process(pid, Signal::CONT)
                .map_err(|e| RecordError::Io {
                    what: "resuming the command".into(),
                    source: e.into(),
                })
                .map_err(rec)?;
        }
    }
    let status = wait_command(&mut child, &sig).map_err(rec)?;
    let summary = daemon.stop()?;
    Ok((status, summary))
}

/// Waits until the shell `pid` has stopped itself (`T` in its stat).
fn wait_stopped(pid: u32) -> Result<(), RecordError> {
    let stat = format!("/proc/{pid}/stat");
    for _ in 0..500 {
        let s = std::fs::read_to_string(&stat).map_err(|_| RecordError::ExitedEarly { pid })?;
        if s.rsplit(')')
            .next()
            .is_some_and(|r| r.trim_start().starts_with('T'))
        {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    Err(RecordError::NotStopped { pid })
}

/// The daemon `record` started, stopped on every way out of `record`: a
/// normal end, an error, or a signal (Ctrl-C reaches `record` and the
/// command, not the daemon in its own process group).
struct RecordDaemon {
    dir: PathBuf,
    pid: u32,
    stopped: bool,
}

impl RecordDaemon {
    fn new(dir: &Path, pid: u32) -> Self {
        RecordDaemon {
            dir: dir.into(),
            pid,
            stopped: false,
        }
    }

    /// The stop request; if the daemon cannot be reached or fails, it is
    /// sent SIGTERM (its own clean stop) and waited for.
    fn stop(&mut self) -> Result<Summary, Error> {
        self.stopped = true;
        let r = crate::control::stop(&self.dir);
        if r.is_err() {
            self.terminate();
        }
        r
    }

    fn terminate(&self) {
        let Some(pid) = Pid::from_raw(self.pid as i32) else {
            return;
        };
        if kill_process(pid, Signal::TERM).is_ok() {
            // The daemon writes its footer and leaves; wait a little for it.
            for _ in 0..500 {
                if !Path::new(&format!("/proc/{}", self.pid)).exists() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
}

impl Drop for RecordDaemon {
    fn drop(&mut self) {
        if !self.stopped {
            let _ = self.stop();
        }
    }
}

/// SIGINT, SIGTERM and SIGHUP while `record` runs: noted instead of ending
/// `record` (which must still stop its daemon).
struct Interrupts {
    int: Arc<AtomicBool>,
    term: Arc<AtomicBool>,
    hup: Arc<AtomicBool>,
}

impl Interrupts {
    fn catch() -> Result<Self, RecordError> {
        let i = Interrupts {
            int: Arc::default(),
            term: Arc::default(),
            hup: Arc::default(),
        };
        for (sig, flag) in [(SIGINT, &i.int), (SIGTERM, &i.term), (SIGHUP, &i.hup)] {
            signal_hook::flag::register(sig, Arc::clone(flag))
                .map_err(io("installing signal handlers"))?;
        }
        Ok(i)
    }

    fn any(&self) -> bool {
        [&self.int, &self.term, &self.hup]
            .iter()
            .any(|f| f.load(Ordering::Relaxed))
    }
}

/// Waits for the command; SIGTERM and SIGHUP sent to `record` are passed
/// on to it (Ctrl-C reaches it from the terminal directly).
fn wait_command(child: &mut Child, sig: &Interrupts) -> Result<ExitStatus, RecordError> {
    let mut passed = false;
    loop {
        if let Some(st) = child.try_wait().map_err(io("waiting for the command"))? {
            return Ok(st);
        }
        if !passed {
            let to_pass = if sig.term.load(Ordering::Relaxed) {
                Some(Signal::TERM)
            } else if sig.hup.load(Ordering::Relaxed) {
                Some(Signal::HUP)
            } else {
                None
            };
            if let (Some(s), Some(pid)) = (to_pass, Pid::from_raw(child.id() as i32)) {
                let _ = kill_process(pid, s);
                passed = true;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}
