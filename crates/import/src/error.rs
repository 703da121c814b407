//! The import's error type.

use std::path::PathBuf;

/// What can go wrong importing a perf.data file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The perf.data file could not be opened or read.
    #[error("{}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The file is not a perf.data file this import reads (no event
    /// attributes, another format).
    #[error("{}: not a perf.data file: {message}", path.display())]
    NotPerfData {
        /// The file.
        path: PathBuf,
        /// The reader's complaint.
        message: String,
    },
    /// The file's compressed records (`perf record -z`) could not be
    /// expanded: not zstd data, or past a bound (named in the message).
    #[error("{}: {source}", path.display())]
    Compressed {
        /// The file.
        path: PathBuf,
        /// Why.
        source: crate::compressed::ExpandError,
    },
    /// The session directory could not be made.
    #[error("{}: cannot create the session directory: {source}", path.display())]
    SessionDir {
        /// The directory.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The session file could not be written.
    #[error(transparent)]
    Session(#[from] profkit_eventlog::Error),
}

/// The import's result type.
pub type Result<T> = std::result::Result<T, Error>;
