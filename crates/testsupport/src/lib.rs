//! What profkit's tests share: the one rule for tests that need the real
//! kernel.
//!
//! Tests that open perf events, lower a sysctl or run `perf` need root (or
//! `perf_event_paranoid <= 0`). Where that is missing they print why and
//! pass, so a developer without root can still run the suite; under
//! `PROFKIT_REQUIRE_PERF=1` (CI, which runs as root) the same condition is
//! a failure, so nothing real-kernel is silently skipped there.
//!
//! # Design constraints
//!
//! - A dev-dependency only: no library or binary of profkit links it.
//! - One spelling of the rule ([`skip`]), whatever the reason to skip.
//!
//! Not for: fixtures or workloads (each test crate builds its own).
//!
//! # Example
//!
//! ```
//! use profkit_testsupport::{open_or_skip, perf_required};
//! let config = profkit_perf::SamplerConfig::new(profkit_perf::EventSpec::parse("cpu-clock").unwrap());
//! match open_or_skip(&config) {
//!     Some(sampler) => assert!(!sampler.rings().is_empty()),
//!     None => assert!(!perf_required()), // skipped (and said why)
//! }
//! ```

#![forbid(unsafe_code)]
#![deny(missing_docs)]

use profkit_perf::{EventSpec, Sampler, SamplerConfig};
use std::fmt::Display;

/// The environment variable that turns a skip into a failure.
pub const REQUIRE_PERF: &str = "PROFKIT_REQUIRE_PERF";

/// Whether real-kernel tests must run (`PROFKIT_REQUIRE_PERF=1`).
pub fn perf_required() -> bool {
    std::env::var(REQUIRE_PERF).as_deref() == Ok("1")
}

/// Skips a test for `why`: prints `SKIP: why` and returns `false`, or
/// panics when [`perf_required`].
///
/// # Panics
/// Under `PROFKIT_REQUIRE_PERF=1`, always.
#[track_caller]
pub fn skip(why: impl Display) -> bool {
    if perf_required() {
        panic!("{REQUIRE_PERF}=1 but {why}");
    }
    eprintln!("SKIP: {why}");
    false
}

/// Opens `config`, or returns `None` after [`skip`] says why it could not.
///
/// # Panics
/// Under `PROFKIT_REQUIRE_PERF=1`, when the events cannot be opened.
#[track_caller]
pub fn open_or_skip(config: &SamplerConfig) -> Option<Sampler> {
    match Sampler::open(config) {
        Ok(s) => Some(s),
        Err(e) => {
            skip(format_args!("perf events cannot be opened: {e}"));
            None
        }
    }
}

/// True if system-wide `cpu-clock` sampling works here; otherwise
/// [`skip`]s (and returns false).
///
/// # Panics
/// Under `PROFKIT_REQUIRE_PERF=1`, when it does not work.
#[track_caller]
pub fn perf_ok() -> bool {
    let spec = EventSpec::parse("cpu-clock").expect("cpu-clock is a known event");
    open_or_skip(&SamplerConfig::new(spec)).is_some()
}
