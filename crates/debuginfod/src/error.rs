//! The crate's one error type.

use std::path::PathBuf;
use std::time::Duration;

/// What went wrong, naming the variable, URL or path, and what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A `DEBUGINFOD_*` variable holds a value that is not what it should.
    #[error("{name}={value:?}: {why} (fix or unset the variable)")]
    BadVariable {
        /// The variable.
        name: String,
        /// Its value.
        value: String,
        /// What is wrong with it.
        why: String,
    },
    /// A build-id of a length no ELF note has.
    #[error("a build-id of {len} bytes: must be 1 to 64 bytes (the caller passed a wrong id)")]
    BadBuildId {
        /// Its length.
        len: usize,
    },
    /// A source path that cannot be asked for.
    #[error("source path {path:?}: {why}")]
    BadSourcePath {
        /// The path as given.
        path: String,
        /// What is wrong with it.
        why: &'static str,
    },
    /// The cache directory cannot be used.
    #[error("debuginfod cache {}: {why}", path.display())]
    Cache {
        /// The directory or file.
        path: PathBuf,
        /// What is wrong and what to do.
        why: String,
    },
    /// A file or directory of the cache could not be read or written.
    #[error("debuginfod cache {}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The system's error.
        source: std::io::Error,
    },
    /// The server answered a status other than 200, 404 or a redirect.
    #[error("{url}: HTTP status {status} (the server failed; try again later or remove it from DEBUGINFOD_URLS)")]
    Status {
        /// The URL asked.
        url: String,
        /// The status.
        status: u16,
    },
    /// The request failed: no connection, a malformed answer, a cut body.
    #[error("{url}: {why} (check the URL in DEBUGINFOD_URLS and the network)")]
    Http {
        /// The URL asked.
        url: String,
        /// What failed.
        why: String,
    },
    /// The server could not be reached (refused connection, unknown host,
    /// unreachable network): not asked again by the same client.
    #[error("{url}: {why} (check the URL in DEBUGINFOD_URLS and the network)")]
    Unreachable {
        /// The URL asked.
        url: String,
        /// What failed.
        why: String,
    },
    /// The server took too long (no answer, a stalled body, or a transfer
    /// over `DEBUGINFOD_MAXTIME`).
    #[error("{url}: {what} after {after:?} (raise DEBUGINFOD_TIMEOUT or DEBUGINFOD_MAXTIME, or try later)")]
    TimedOut {
        /// The URL asked.
        url: String,
        /// Which limit.
        what: &'static str,
        /// The limit.
        after: Duration,
    },
    /// The file is over the size limit (refused).
    #[error("{url}: {size} bytes, over the {max}-byte limit (refused; raise DEBUGINFOD_MAXSIZE to accept it)")]
    TooLarge {
        /// The URL asked.
        url: String,
        /// Its announced size, or the bytes read when the body passed the limit.
        size: u64,
        /// The limit.
        max: u64,
    },
    /// The client's download budget ([`Client::with_budget`](crate::Client::with_budget))
    /// is spent: nothing more is downloaded by it.
    #[error("{url}: not downloaded: this run has downloaded {spent} bytes, its budget of {budget} (run again: what was fetched is in the cache)")]
    OverBudget {
        /// The URL asked.
        url: String,
        /// Bytes downloaded so far.
        spent: u64,
        /// The budget.
        budget: u64,
    },
    /// The server sent an ELF file whose build-id is not the one asked
    /// for, or no ELF file at all (refused; nothing was cached).
    #[error("{url}: the file sent has build-id {found}, not the one asked for (refused: the server is wrong or lying)")]
    WrongBuildId {
        /// The URL asked.
        url: String,
        /// The build-id found in lowercase hex, or "none".
        found: String,
    },
    /// A redirect to somewhere other than an http or https URL (refused).
    #[error("{url}: redirected to {location:?}, not an http or https URL (refused)")]
    BadRedirect {
        /// The URL that redirected.
        url: String,
        /// Where it pointed.
        location: String,
    },
    /// More redirects than [`crate::MAX_REDIRECTS`] (refused).
    #[error("{url}: over {max} redirects (refused; the server is misconfigured)")]
    TooManyRedirects {
        /// The first URL asked.
        url: String,
        /// The limit.
        max: u32,
    },
}

impl Error {
    /// A refusal: the server answered, but with something not accepted
    /// (counted in [`crate::Stats::refused`]).
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            Error::WrongBuildId { .. }
                | Error::TooLarge { .. }
                | Error::BadRedirect { .. }
                | Error::TooManyRedirects { .. }
        )
    }
}
