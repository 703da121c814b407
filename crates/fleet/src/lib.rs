//! profkit's fleet export: every host's profiles into ClickHouse, and
//! reports computed there by SQL (issue 31).
//!
//! This crate owns the ClickHouse side: the `clickhouse://` URL
//! ([`Target`]), the HTTP client ([`Client`]), the tables
//! ([`schema`], created by [`Client::ensure_schema`]), the idempotent
//! export of a session part's rows ([`Client::export_part`]) and the
//! report queries ([`Client::query`], [`Client::stacks`],
//! [`Client::totals`]). Turning a recorded part into [`PartRows`] and the
//! command-line tools (`profctl export`, `profreport --from URL`) belong
//! to their callers.
//!
//! ```no_run
//! use profkit_fleet::{Client, Key, PartRows, Query, Target};
//! let client = Client::new(Target::parse("clickhouse://ch.example.com/profiles")?);
//! client.ensure_schema()?;
//! let part = PartRows { host: "web-1".into(), session: "s1".into(), ..Default::default() };
//! client.export_part(&part)?; // again later: Exported::AlreadyThere
//! let q = Query { group: vec![Key::Binary, Key::Function], limit: Some(20), ..Default::default() };
//! for row in client.query(&q)? {
//!     println!("{:>10} {}", row.samples, row.keys.join(" "));
//! }
//! # Ok::<(), profkit_fleet::Error>(())
//! ```
//!
//! # Design constraints
//!
//! - **ClickHouse's HTTP interface only**, and SQL that ClickHouse
//!   18.16.1 (Debian's, what the tests run against) and current versions
//!   both accept: no `LowCardinality`, no newer functions. Tables are
//!   always named with their database (no `database=` parameter).
//! - **A part is exported once**, whatever happens between attempts: a
//!   part is listed in `profkit_parts` only after its rows were inserted
//!   in one INSERT (one block: atomic) and counted back; a half-done
//!   export is completed, not repeated; a stored part that does not match
//!   is an error ([`Error::Inconsistent`]), never overwritten. Reports
//!   count only listed parts. Retrying is the caller's.
//! - **A server's answer is a claim.** Every answer is parsed strictly
//!   (column counts, numbers, a final newline), an exception written into
//!   a 200's body is an error, answers are capped
//!   ([`DEFAULT_MAX_RESPONSE`], [`Client::max_response`]), and every step
//!   has a timeout ([`CONNECT_TIMEOUT`], [`READ_TIMEOUT`]). Nothing a
//!   server sends makes it panic.
//! - **Credentials never leak**: sent as `X-ClickHouse-User` /
//!   `X-ClickHouse-Key` headers, never in a URL; errors, `Debug` and
//!   logs show [`Target::redacted`].
//! - **Errors say what to do** and whether to try later
//!   ([`Error::is_unreachable`]).
//! - Strings are sent in `TabSeparated` with ClickHouse's escaping: any
//!   text (tabs, newlines, quotes, backslashes) is stored as given;
//!   answers that are not UTF-8 are read lossily.
//!
//! # Not for
//!
//! Running or administering ClickHouse (retention, TTLs, clusters: see
//! [`schema`] for the Distributed variant), reading session files,
//! symbolizing, rendering reports, or ClickHouse's native TCP protocol.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod error;
mod export;
mod http;
mod query;
pub mod schema;
mod target;
mod tsv;

pub use error::Error;
pub use export::{Exported, PartRows, SampleRow, MAX_ROWS};
pub use http::{Client, CONNECT_TIMEOUT, DEFAULT_MAX_RESPONSE, READ_TIMEOUT};
pub use query::{Arcs, Cut, FrameTotal, Key, Query, Row, StackRow, Totals};
pub use target::{Target, DEFAULT_HTTPS_PORT, DEFAULT_HTTP_PORT};
