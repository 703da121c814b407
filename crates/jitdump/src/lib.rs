//! The parser of perf's jitdump files: the `jit-<pid>.dump` a JIT runtime
//! (Python 3.13 `-X perf_jit`, node `--perf-prof`, Java agents) writes so
//! that a profiler can name, and unwind through, code that exists in no
//! file. It owns the format (the [`Header`] and the records: [`CodeLoad`],
//! [`CodeMove`], [`DebugInfo`], [`UnwindingInfo`], close), one record's
//! parser ([`parse_record`]), the incremental reader of a file the runtime
//! is still writing ([`DumpReader`]) and a writer for tests and tools
//! ([`DumpWriter`]). Format: the Linux kernel's
//! `tools/perf/Documentation/jitdump-specification.txt`.
//!
//! ```text
//!   0        header (magic "JiTD" as a little-endian u32, total_size 40..=4096)
//!   total_size
//!            record: prefix { id u32, total_size u32, timestamp u64 } body …
//!            record: …                        (the last one may be half written)
//! ```
//!
//! # Design constraints
//!
//! - **Every byte is hostile.** The file belongs to the profiled process
//!   and is read by a profiler running as root. No input panics; every
//!   size field is checked against the bytes present and against
//!   [`Limits`] before anything is allocated from it; what a record holds
//!   (names, code, unwinding data) is never more than the bytes it came
//!   from (names are sanitised without growing: invalid UTF-8 and control
//!   characters become `?`, and a debug entry's "same file" shares the
//!   previous entry's name).
//! - **Bounded reads of a growing file.** [`DumpReader`] reads from where
//!   it stopped, through one buffer it reuses, at most
//!   `max(max_bytes, Limits::max_record)` bytes a call; a half-written
//!   record at the end is kept for the next call, never an error.
//! - **Errors are final.** A malformed record means the file is not what
//!   it says (or is not written in order); the reader stops there rather
//!   than guess where the next record starts.
//! - **Host byte order only.** A dump written in the other byte order is
//!   refused ([`Error::OtherEndian`]); runtimes write the dumps of their
//!   own machine.
//!
//! # Not for
//!
//! Finding or opening dump files (callers open them through
//! `profkit-untrusted` and add the path to errors), resolving samples to
//! JIT code or keeping a process's code map over time (the sync stage),
//! unwinding with the `.eh_frame` bytes (profkit-sync), disassembly
//! (profkit-annotate).

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod error;
mod header;
mod reader;
mod record;
mod text;
mod writer;

pub use error::Error;
pub use header::{Header, HEADER_SIZE, MAGIC, MAX_HEADER_SIZE};
pub use reader::{DumpReader, ReadOutcome, ReadStats};
pub use record::{
    parse_record, CodeLoad, CodeMove, DebugEntry, DebugInfo, Record, Timed, UnwindingInfo,
    PREFIX_SIZE,
};
pub use writer::DumpWriter;

/// The bounds a dump's size fields are checked against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// The largest record (its prefix's `total_size`) read; larger is
    /// [`Error::RecordTooLarge`]. Default 16 MiB.
    pub max_record: u32,
    /// The most bytes of a name (code or source file) kept; longer names
    /// are cut at a character boundary. Default 4096.
    pub max_name: usize,
    /// The most code bytes a [`CodeLoad`] keeps; larger code is not kept
    /// (`code: None`) and counted ([`ReadStats::code_not_kept`]). Default
    /// 1 MiB.
    pub max_code: u64,
    /// The most entries a [`DebugInfo`] may claim; more is
    /// [`Error::Malformed`]. Default 65536.
    pub max_debug_entries: u64,
    /// The most unwinding bytes an [`UnwindingInfo`] may claim; more is
    /// [`Error::Malformed`]. Default 1 MiB.
    pub max_unwind: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_record: 16 << 20,
            max_name: 4096,
            max_code: 1 << 20,
            max_debug_entries: 65536,
            max_unwind: 1 << 20,
        }
    }
}
