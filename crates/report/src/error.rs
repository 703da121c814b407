//! The one error type of this crate. Every message names the offending value
//! and, for option values, what would have been accepted.

use std::path::PathBuf;

/// Everything that stops a report. Problems *inside* a session (corrupt or
/// torn chunks, missing binaries) are not errors: they become
/// [`crate::Report::warnings`] and the rest is reported.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A profile spec (`cpu:0,1`, `tgid:N`, `image:GLOB`, …) could not be
    /// parsed.
    #[error("bad profile spec '{spec}': {reason}")]
    BadSpec {
        /// The spec as given.
        spec: String,
        /// What is wrong and what is allowed.
        reason: String,
    },
    /// An option value is not one of the accepted ones.
    #[error("bad value '{value}' for {option}: {allowed}")]
    BadValue {
        /// The option (`--separate`, `--sort`, …).
        option: &'static str,
        /// The value given.
        value: String,
        /// What is allowed.
        allowed: String,
    },
    /// No session file where one was expected.
    #[error("{}: no profkit session here (looked for {}): record one with `profctl record -- CMD` or `profctl start`, or name another with --session-dir", dir.display(), file.display())]
    NoSession {
        /// The session directory given.
        dir: PathBuf,
        /// The file looked for.
        file: PathBuf,
    },
    /// The parts of a rotated session could not be listed, are too many
    /// to read, or kept changing while they were read.
    #[error("{}: cannot read the parts of the rotated session: {reason}", dir.display())]
    Parts {
        /// The session directory.
        dir: PathBuf,
        /// What went wrong.
        reason: String,
    },
    /// The session file could not be opened or is not a readable session
    /// (wrong magic, unsupported version, corrupt header). The source names
    /// the file and, for a version mismatch, both versions.
    #[error(transparent)]
    Session(#[from] profkit_eventlog::Error),
    /// The symbolizer rejected an option (a kallsyms file that does not
    /// exist, a sysroot that is not a directory).
    #[error(transparent)]
    Symbols(#[from] profkit_symbols::Error),
    /// `--merge` was given sessions of different events: their samples do
    /// not add up.
    #[error("cannot merge {} (event {second}) into {} (event {first}): sessions of different events do not add up", second_path.display(), first_path.display())]
    MergeMismatch {
        /// The first session.
        first_path: PathBuf,
        /// Its event.
        first: String,
        /// The session that differs.
        second_path: PathBuf,
        /// Its event.
        second: String,
    },
    /// `--off-cpu` or `--wall` on a session recorded without off-CPU
    /// intervals.
    #[error("{}: this session was recorded without --off-cpu: it holds no off-CPU intervals; record one with `profctl start --off-cpu`", path.display())]
    NoOffCpu {
        /// The session's file.
        path: PathBuf,
    },
    /// Options that cannot be used together; the message says which and
    /// what to do instead.
    #[error("{0}")]
    Conflict(String),
    /// Writing a streamed output failed (`--format script`, `jsonl`, ...):
    /// a closed pipe, a full disk.
    #[error("writing the output: {0}")]
    Output(#[source] std::io::Error),
    /// A fleet store could not be read or written (`profreport --from`,
    /// `profctl export`): its message, with the store's URL redacted.
    #[error("{0}")]
    Fleet(String),
}

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;
