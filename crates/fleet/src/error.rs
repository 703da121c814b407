//! The crate's one error type. Every message names the target in its
//! redacted form ([`Target::redacted`](crate::Target::redacted)): no
//! password ever appears in a message or a `Debug` output.

use std::time::Duration;

/// What went wrong, with the redacted target, and what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The URL is not `clickhouse://[USER[:PASS]@]HOST[:PORT]/DATABASE`.
    #[error("{url}: {why} (expected clickhouse://[USER[:PASSWORD]@]HOST[:PORT]/DATABASE, or clickhouses:// for https)")]
    BadUrl {
        /// The URL as given, its credentials replaced by `***`.
        url: String,
        /// What is wrong with it.
        why: String,
    },
    /// The server could not be reached (refused connection, unknown host,
    /// unreachable network): nothing was done; try again later.
    #[error("{target}: unreachable: {why} (is the server up? the export is retried later)")]
    Unreachable {
        /// The redacted target.
        target: String,
        /// What failed.
        why: String,
    },
    /// The server took too long to connect, answer or send.
    #[error(
        "{target}: {what} after {after:?} (the server is overloaded or stuck; try again later)"
    )]
    TimedOut {
        /// The redacted target.
        target: String,
        /// Which step.
        what: &'static str,
        /// The limit.
        after: Duration,
    },
    /// The server refused the user or password.
    #[error("{target}: authentication failed: {message} (check the user and password in the URL)")]
    Auth {
        /// The redacted target.
        target: String,
        /// The server's message.
        message: String,
    },
    /// ClickHouse reported an error (an HTTP error status with its text,
    /// or an exception written into a 200's body after it began).
    #[error("{target}: the server failed (HTTP {status}, code {code}): {message}")]
    Server {
        /// The redacted target.
        target: String,
        /// The HTTP status (200 for an exception inside a 200's body).
        status: u16,
        /// ClickHouse's error code (0 when the text carries none).
        code: u32,
        /// The server's message (at most 1000 characters).
        message: String,
    },
    /// The request or the answer's transfer failed (a cut body, a broken
    /// connection, a TLS failure).
    #[error("{target}: {why} (check the URL and the network; try again later)")]
    Http {
        /// The redacted target.
        target: String,
        /// What failed.
        why: String,
    },
    /// The answer is over [`Client::max_response`](crate::Client::max_response).
    #[error("{target}: the answer is over {max} bytes (refused; narrow the query with a host, time or binary filter or a limit, or raise Client::max_response)")]
    TooLarge {
        /// The redacted target.
        target: String,
        /// The limit.
        max: u64,
    },
    /// The answer is not what the query asks for: not ClickHouse, or a
    /// server that lies.
    #[error("{target}: unexpected answer to {what}: {why} (is this a ClickHouse HTTP port?)")]
    BadAnswer {
        /// The redacted target.
        target: String,
        /// Which query.
        what: &'static str,
        /// What is wrong (with the start of the offending text).
        why: String,
    },
    /// The part cannot be exported as given (the caller's bug).
    #[error("part {part_id}: {why}")]
    BadPart {
        /// `host/session/part`.
        part_id: String,
        /// What is wrong.
        why: String,
    },
    /// Rows of the part are stored already but do not match it: an
    /// earlier export of a different part under the same id, or a damaged
    /// table. Nothing was written.
    #[error("{target}: part {part_id} is stored inconsistently: {stored_rows} rows with {stored_samples} samples, this part has {rows} rows with {samples} samples (remove its rows by hand: ALTER TABLE profkit_samples DELETE WHERE part_id = '…', or give the session a new id)")]
    Inconsistent {
        /// The redacted target.
        target: String,
        /// `host/session/part`.
        part_id: String,
        /// Rows stored.
        stored_rows: u64,
        /// Their samples.
        stored_samples: u64,
        /// Rows of the part.
        rows: u64,
        /// Its samples.
        samples: u64,
    },
}

impl Error {
    /// Whether the server could not be reached or did not answer in time:
    /// the caller tries again later ([`Error::Unreachable`] and
    /// [`Error::TimedOut`]).
    pub fn is_unreachable(&self) -> bool {
        matches!(self, Error::Unreachable { .. } | Error::TimedOut { .. })
    }
}
