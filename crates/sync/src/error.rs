//! The crate's one error type.

use std::path::PathBuf;

/// What can go wrong recording a session: the sink (session file) failing,
/// or the producer (the live sampler) refusing to stop or to count.
///
/// Messages name the session file or the failed step; `profctl` shows them
/// as they are.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Writing to (or creating) the session file failed.
    #[error("{action} {path}: {source}")]
    Session {
        /// What was being done ("writing a round to", "creating", ...).
        action: &'static str,
        /// The session file.
        path: PathBuf,
        /// The format crate's error.
        source: profkit_eventlog::Error,
    },
    /// Removing the old session file (reset) failed.
    #[error("{path}: {source}")]
    Remove {
        /// The session file.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// Renaming the closed part of a rotated session failed: the session
    /// goes on in the same file.
    #[error("renaming {from} to {to} to close the part: {source}; still writing {from}")]
    Rename {
        /// The part being written.
        from: PathBuf,
        /// Its closed part's name.
        to: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A sink's own failure (sinks other than [`FileSink`](crate::FileSink),
    /// e.g. a test sink or a reserve file).
    #[error("{0}")]
    Sink(String),
    /// `dump`: some rounds could not be written; their samples are counted
    /// as lost to a full disk. Carries the writer's last error.
    #[error("writing the session failed: {last_error}")]
    WriteFailed {
        /// The writer's last error, as text.
        last_error: String,
    },
    /// `stop`: the footer could not be written.
    #[error("writing the session footer failed: {source}")]
    Footer {
        /// Why.
        source: Box<Error>,
    },
    /// The sampler failed to disable its events or to report lost counts.
    #[error(transparent)]
    Sampler(#[from] profkit_perf::Error),
}

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_carry_the_path_and_the_cause() {
        let e = Error::Remove {
            path: "/x/session.pkl".into(),
            source: std::io::Error::from(std::io::ErrorKind::NotFound),
        };
        assert!(e.to_string().starts_with("/x/session.pkl: "), "{e}");
        let f = Error::Footer {
            source: Box::new(Error::Sink("disk full".into())),
        };
        assert_eq!(
            f.to_string(),
            "writing the session footer failed: disk full"
        );
        let d = Error::WriteFailed {
            last_error: "no space".into(),
        };
        assert_eq!(d.to_string(), "writing the session failed: no space");
    }
}
