//! Symbolization for profkit: turns the (cookie, offset) pairs of the sample stream into
//! function names, and with `--debug-info` into source lines and inlined frames.
//!
//! This crate owns:
//! - ELF binaries and shared libraries: `.symtab` and `.dynsym` through the `object` crate,
//!   function sizes honoured, file offsets mapped to virtual addresses through PT_LOAD
//!   headers (so PIE and non-PIE are one case; the headers, notes, sections and the vDSO
//!   image are read by `profkit-elf`, the rule the sync stage and annotation share),
//!   separate debug files under `/usr/lib/debug` (and in a debuginfod client's cache,
//!   [`SymbolizerOptions::debuginfod_cache`]: this crate never downloads)
//!   found by build-id and by debuglink, DWARF lines and inlined frames through addr2line;
//! - the check that a binary is still the recorded one (build-id, else inode): a changed
//!   binary is reported once ("binary changed since recording") and its samples are not
//!   named, since any name would be a guess. A build-id is only a file's claim (any file
//!   can be linked with libc's): when the recorder identified the file behind a cookie
//!   ([`BinaryRequest::file`]), a candidate is used only if it is that file — the copy kept
//!   of it, the recorded path with its inode, size and mtime, a file found by build-id of
//!   its size — a separate debug file found by build-id is used only for a binary with its
//!   PT_LOAD layout, and the cache shares parsed binaries only between copies of one
//!   content and DWARF only between paths of one file;
//! - the kernel and its modules from kallsyms (hidden addresses are detected and the samples
//!   go to `[kernel]`), or a module's `.ko` file;
//! - trimming a kallsyms file to the lines some sampled addresses need ([`trim_kallsyms`],
//!   two streamed passes, then [`KallsymsSource::Text`]): a report touches a few hundred of
//!   ~120,000 symbols, and the trimmed text names every wanted address exactly as the whole
//!   file would. It lives beside the kallsyms parser because it must agree with it; both
//!   take module names and the kernel's notes build-id through `profkit-eventlog`'s
//!   `module_name` and `build_id_from_notes`, the rules the sync stage's cookies use;
//! - JIT code from perf maps (`perf-PID.map`), other anonymous code as `anon` ranges;
//! - demangling of Rust (legacy and v0) and C++ names, switchable off;
//! - a parse cache so a report with `--debug-info` reuses each parsed binary, and one rayon
//!   task per binary;
//! - the symbol index ([`SymbolizerOptions::index_cache`], [`IndexCacheOptions`]): each
//!   ELF64 binary's whole function table (raw and demangled names), written once to a
//!   cache directory as one checksummed entry for that very file, and binary-searched by
//!   later reports; a miss is built at once, or left to a builder run
//!   ([`IndexCacheOptions::defer_builds`], [`builds_deferred`], [`builder_lock`]: the
//!   report answers it by range meanwhile).
//!
//! # Design constraints
//!
//! - **Pure consumer of bytes.** Input is a cookie table converted to [`BinaryRequest`]s and
//!   the offsets sampled in each; nothing here talks to perf or the daemon. Everything that a
//!   recorded session needs (kallsyms copy, perf maps, debug dirs, sysroot) comes through
//!   [`SymbolizerOptions`], so a report on another machine gives the same answer.
//! - **Never fail a report.** A missing, changed or unreadable binary becomes a warning in
//!   its [`BinaryResult`] and offsets without names; only bad options are errors.
//! - **Per symbol, not per sample.** A result holds each symbol hit once and gives every
//!   offset a [`SymbolId`], so the report aggregates by id. Lookups are a binary search in a
//!   sorted table built once per binary: O(log n) per offset, never O(offsets × symbols).
//! - **Read what is needed, not whole files.** Without `--debug-info` an ELF64 binary is
//!   read by range (`elf_range.rs`): headers and notes, its symbol tables streamed in
//!   blocks, and only the names of the symbols that cover a sampled offset; a stripped
//!   binary's debug file the same way. A report's memory is then its samples and those
//!   symbols, not the binaries' sizes (a `cargo build` session: 383 MB before, 32 MB).
//!   Such a table answers only for the offsets it was read for, so it is not cached;
//!   each binary is one request per report. With a symbol index (issue 32, `index/`) the
//!   first report's builder instead reads the binary's whole table once (one pass over
//!   each symbol table, its string table whole) and writes it as an entry of raw names and
//!   names demangled once, on every core; later reports read the entry's head (33 bytes a
//!   symbol) in one pass and the names of the symbols hit. The answers are the ones
//!   without the index, entry for entry; `examples/index_bench.rs` times it.
//! - **Answers as small as asked.** [`Symbolizer::symbolize_runs`] answers sorted offsets
//!   as runs of one symbol (no per-offset answer, 64 bytes each), for reports that need
//!   no source lines or inlined frames; names not held demangled are demangled once a
//!   binary is resolved, all at once on every core.
//!   An entry is used only for the file it was made from (build-id and `fstat` identity,
//!   after the checks above), only if it is ours and intact; see `index/mod.rs`. With `--debug-info` the DWARF is read by
//!   range too, as addr2line asks for it (`dwarf_reader.rs`: a lazy `gimli::Reader` over a
//!   bounded page cache of positioned reads), and kept per symbolizer with the headers; the
//!   symbol tables are still read per request. Files that are not ELF64 little-endian
//!   (and `.ko` modules) are read whole. No `unsafe`: nothing is memory-mapped
//!   (`memmap2::Mmap::map` is `unsafe`).
//! - **Untrusted files.** Every file is opened non-blocking and must be a regular file, at
//!   most 4 GiB (binaries, debug files) or 256 MiB (kallsyms, perf maps), not mostly holes;
//!   a debug link is a file name looked up beside the binary and in the debug directories,
//!   never a path (`files.rs`).
//! - **`Sync`.** One [`Symbolizer`] serves all threads; each binary is parsed once even when
//!   two tasks want it at the same time.
//!
//! # Example
//!
//! ```
//! use profkit_symbols::{BinaryRequest, KallsymsSource, Symbolizer, SymbolizerOptions};
//!
//! let symbolizer = Symbolizer::new(SymbolizerOptions {
//!     kallsyms: KallsymsSource::Text(
//!         "ffffffff81000000 T _text\nffffffff81000100 T do_syscall_64\nffffffff81000200 T _etext\n"
//!             .into(),
//!     ),
//!     ..SymbolizerOptions::default()
//! })?;
//! let results = symbolizer.symbolize_all(vec![
//!     (BinaryRequest::kernel(0xffffffff81000000), vec![0x120]),
//!     (BinaryRequest::elf("/no/such/binary"), vec![0x1000]),
//! ]);
//! assert_eq!(results[0].name_at(0), Some("do_syscall_64"));
//! assert_eq!(results[1].name_at(0), None);
//! assert!(results[1].warnings[0].contains("not found"));
//! # Ok::<(), profkit_symbols::Error>(())
//! ```
//!
//! # Not for
//!
//! Unwinding, disassembly or annotation of source files; attaching to live processes (the
//! vDSO of *this* process is the only memory it reads); split DWARF (`.dwo`) and dwz
//! supplementary files (names still work there, lines may be missing); non-ELF binaries.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod cache;
mod demangle;
mod dwarf;
mod dwarf_reader;
mod elf;
mod elf_range;
mod error;
mod files;
mod index;
mod kallsyms;
mod kallsyms_trim;
mod perfmap;
mod symbolizer;
mod table;
mod types;

pub use cache::CacheStats;

/// Entry points for the fuzz targets in `fuzz/` (not a stable API).
#[doc(hidden)]
pub mod fuzzing {
    /// Parses a perf map and looks up a few addresses; must never panic.
    pub fn perf_map(text: &str, probes: &[u64]) -> usize {
        let m = crate::perfmap::PerfMap::parse(text);
        probes
            .iter()
            .filter(|&&a| m.table.lookup(a).is_some())
            .count()
            + m.skipped
    }

    /// Parses a kallsyms text; must never panic.
    pub fn kallsyms(text: &str) {
        let _ = crate::kallsyms::Kallsyms::parse(text);
    }

    /// Decodes a symbol index entry and looks up a few addresses with their names; must
    /// never panic. Returns the symbols named (0 for a refused entry).
    pub fn symbol_index(data: &[u8], probes: &[u64]) -> usize {
        let Ok(ix) = crate::index::format::decode(data.to_vec()) else {
            return 0;
        };
        ix.symbols_at(probes.to_vec())
            .map_or(0, |found| found.len().min(ix.len()))
    }
}
pub use demangle::demangle;
pub use error::Error;
pub use index::{builder_lock, builds_deferred, BuilderLock, IndexCacheOptions};

pub use kallsyms_trim::{trim_kallsyms, KallsymsInput, KallsymsWanted, TrimmedKallsyms};
pub use symbolizer::Symbolizer;
pub use types::{
    BinaryKind, BinaryRequest, BinaryResult, InlinedFrame, KallsymsSource, OffsetInfo,
    RecordedFile, SourceLocation, SymbolId, SymbolInfo, SymbolOrigin, SymbolRun, SymbolizerOptions,
};
