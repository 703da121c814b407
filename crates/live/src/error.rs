//! The crate's one error type.

use std::path::PathBuf;

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What can go wrong starting, running, finishing or archiving a live
/// session. Errors of the crates underneath pass through unchanged (their
/// messages already name the value or path); this crate's own name the
/// file or value involved and leave the cause to
/// [`source`](std::error::Error::source), so that `profctl`, which prints
/// an error's whole chain, shows it once (`creating PATH: CAUSE`).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Opening or configuring perf events.
    #[error(transparent)]
    Perf(#[from] profkit_perf::Error),
    /// The recorder, its buffer or the session file while recording.
    #[error(transparent)]
    Sync(#[from] profkit_sync::Error),
    /// The session directory, lock or control socket.
    #[error(transparent)]
    Daemon(#[from] profkit_daemon::Error),
    /// Reading or appending to the session file.
    #[error(transparent)]
    Session(#[from] profkit_eventlog::Error),
    /// A dead daemon's session file could not be reopened to finish it.
    #[error("reopening {path}")]
    Reopen {
        /// The session file.
        path: PathBuf,
        /// Why.
        source: profkit_eventlog::Error,
    },
    /// A file operation failed.
    #[error("{action} {path}")]
    Io {
        /// What was being done ("creating", "reading", ...).
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The start configuration handed to the daemon could not be read.
    #[error("invalid start configuration {text:?}")]
    Config {
        /// The configuration as received (truncated).
        text: String,
        /// Why it was refused.
        source: serde_json::Error,
    },
    /// A `--call-graph` value that is not `fp`, `dwarf` or `dwarf,SIZE`, or
    /// one `-g` contradicts; the message names the value and one that works.
    #[error("{0}")]
    CallGraph(String),
    /// `archive` while a daemon still writes the session.
    #[error("a daemon is still recording into {dir}: run `profctl stop` first")]
    StillRecording {
        /// The session directory.
        dir: PathBuf,
    },
    /// A request to an engine that has already stopped.
    #[error("the recording has stopped")]
    Stopped,
    /// A request to a daemon that died.
    #[error(
        "the profkit daemon for {} (pid {}) died; its complete rounds are in {}",
        dir.display(),
        pid.map_or_else(|| "?".to_owned(), |p| p.to_string()),
        dir.join(profkit_daemon::SESSION_LOG).display()
    )]
    DaemonDied {
        /// The session directory.
        dir: PathBuf,
        /// The daemon's pid, if known.
        pid: Option<u32>,
    },
    /// A daemon's answer that is not what was asked for (another
    /// version's daemon?).
    #[error("reading the daemon's {what}")]
    Reply {
        /// What was asked for.
        what: &'static str,
        /// Why it did not read.
        source: serde_json::Error,
    },
    /// `record`: the command could not be run or supervised.
    #[error(transparent)]
    Record(#[from] crate::record::RecordError),
    /// A file `archive` would not read (a symbolic link, a FIFO, a device).
    #[error("{}: not archived: {why}", path.display())]
    Refused {
        /// The file.
        path: PathBuf,
        /// Why.
        why: String,
    },
}

impl Error {
    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        Error::Io {
            action,
            path: path.into(),
            source,
        }
    }

    /// Whether the error is the user's input (a bad event, CPU list or rate,
    /// a pid that does not exist): the CLI exits with status 2 for these,
    /// like for a bad flag. What is found on disk (a session directory that
    /// is missing, a file, not a session) is not: status 1, whatever the
    /// cause.
    pub fn is_usage(&self) -> bool {
        match self {
            Error::Perf(e) => perf_is_usage(e),
            Error::CallGraph(_) => true,
            _ => false,
        }
    }

    /// Whether the error is a ring buffer that could not be mapped for
    /// want of locked memory (`kernel.perf_event_mlock_kb` and
    /// `RLIMIT_MEMLOCK`, for a user without root or `CAP_IPC_LOCK`).
    pub fn is_locked_memory(&self) -> bool {
        matches!(self, Error::Perf(profkit_perf::Error::Mmap { source, .. })
            if matches!(source.raw_os_error(), Some(libc::EPERM | libc::ENOMEM)))
    }
}

/// [`Error::is_usage`] for a bare perf error.
pub fn perf_is_usage(e: &profkit_perf::Error) -> bool {
    match e {
        profkit_perf::Error::Config(_) => true,
        profkit_perf::Error::Open { source, .. } => source.raw_os_error() == Some(libc::ESRCH),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn own_errors_name_the_file_and_leave_the_cause_to_the_chain() {
        let e = Error::io(
            "creating",
            "/d/footer.reserve",
            std::io::Error::from_raw_os_error(libc::ENOSPC),
        );
        assert_eq!(e.to_string(), "creating /d/footer.reserve");
        let cause = e.source().expect("the cause is the source").to_string();
        assert!(cause.contains("No space left"), "{cause}");
        assert!(!e.is_usage());
        assert!(!e.is_locked_memory());
    }

    #[test]
    fn a_ring_refused_for_locked_memory_is_told_apart() {
        let mmap = |errno| {
            Error::Perf(profkit_perf::Error::Mmap {
                cpu: 0,
                source: std::io::Error::from_raw_os_error(errno),
                message: String::new(),
            })
        };
        assert!(mmap(libc::EPERM).is_locked_memory());
        assert!(mmap(libc::ENOMEM).is_locked_memory());
        assert!(!mmap(libc::EINVAL).is_locked_memory());
        assert!(!mmap(libc::EPERM).is_usage());
        assert!(Error::CallGraph("x".into()).is_usage());
    }
}
