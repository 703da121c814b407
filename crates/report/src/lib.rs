//! The analysis half of profkit: reads sessions, aggregates their samples in
//! parallel, names them, and prints opreport-style reports.
//!
//! This crate owns:
//! - opening sessions ([`Session`]), including running ones (every complete
//!   chunk is read), stopped ones, and ones killed mid-run (the torn chunk is
//!   named) — and merging several;
//! - reading a rotated session (`profctl start --rotate`: closed parts
//!   `session.NNNNNN.pkl` beside the `session.pkl` being written) as one
//!   session ([`Session::open`]): every part in number order, each an
//!   [`Part`] with its own checked file; the listing is checked against the
//!   parts' header numbers (a gap after the first, or `session.pkl` ahead of
//!   the newest closed part, is a rotation seen mid-listing: listed again,
//!   up to 5 times, then a warning naming the part); parts deleted by
//!   retention are said in the header; at most [`MAX_PARTS`] parts. Each
//!   footer counts its own part, so losses and totals add up over parts;
//!   only the newest part may lack a footer while recording. Stack ids are
//!   per file, so stack tables are kept per part; cookies, threads and
//!   applications are per session. With `--time`
//!   ([`Session::open_window`]) the window is the whole session's (from its
//!   first part's start, even when deleted) and only the parts it meets are
//!   opened, placed in time from their headers alone
//!   (`profkit_eventlog::read_header`), and, of a session with JIT code,
//!   the parts after it (for their definitions only);
//! - JIT code (format version 7): the `JitCode` markers of every chunk and
//!   part read (a runtime writes its dump late, so a marker may follow its
//!   samples by chunks or parts) name a `Jit` cookie's addresses, the later
//!   marker where two cover one, the process's perf map what none covers;
//!   at most 4 Mi markers and 512 MiB of them are held, the rest counted in
//!   a warning; `--annotate` disassembles a marker's code bytes and lays
//!   out its lines;
//! - the parallel pass over chunks ([`build_report`]): decoding with
//!   `profkit_eventlog::SessionReader::for_each_sample`, per-worker hash maps
//!   keyed by (cookie, offset) plus whatever is separated (CPU, process,
//!   thread), merged with rayon `fold`/`reduce`;
//! - attributing samples to applications (`--separate=lib,kernel`, `--app`):
//!   the application of a process is the user binary whose file name starts
//!   with the process's name at exec (the kernel's `comm`, which is the
//!   executable's file name cut to 15 bytes), preferring one the process was
//!   seen mapping; failing that, its most sampled user binary that is not a
//!   shared library; kernel threads have none, and their samples count as
//!   their own image's;
//! - profile specs ([`ProfileSpec`]: `cpu:`, `tgid:`, `tid:`, `image:`,
//!   `image-exclude:`), `--separate` ([`Separate`]), sorting, thresholds,
//!   percentages;
//! - trimming kallsyms (the session's copy, `--kallsyms`, or the live one)
//!   to the lines the samples need before the symbolizer parses it, and the
//!   per-session symbol sources: a session directory's `kallsyms`,
//!   `perf-PID.map` files and an unpacked `profctl archive`'s `debug/` tree;
//! - debug files from debuginfod servers ([`Debuginfod`], `naming/debuginfod.rs`):
//!   the client's cache searched by the symbolizer, and what the local files
//!   leave unnamed fetched in parallel and symbolized again;
//! - the loss summary (from the footer's accounting, else from the Lost
//!   markers), the timeline, and the renderers ([`render`]: text, JSON, CSV);
//! - call graphs of sessions recorded with `-g` or `--call-graph`: samples aggregated per
//!   (key, stack id), each distinct stack's frames symbolized once, then the
//!   symbolized [`Stacks`] ([`ReportOptions::stacks`]), opreport's caller/callee
//!   blocks ([`CallGraph`], `--callgraph`) and inclusive samples per row
//!   (`--children`); see `callgraph.rs`;
//! - exports from those stacks: folded stacks ([`write_collapsed`]), flame
//!   graphs drawn by inferno ([`write_flamegraph`], one per CPU if asked),
//!   and gzip-compressed pprof `profile.proto` ([`pprof`]) for fleet tools;
//! - the sample stream ([`stream`]): every sample of the sessions in time
//!   order (a bounded reorder buffer over the chunks' per-CPU runs), with
//!   its time (exact, or its round's middle for sessions written before
//!   per-sample times, said once), thread, and stack as interned frame ids
//!   named after one symbolization of the distinct offsets; off-CPU
//!   aggregates and losses as items of their own; sinks for `--format
//!   script` (perf script's text) and `jsonl`, and the entry points of the
//!   viewers' formats (`firefox`, `speedscope`);
//! - nothing of `--import perf.data`: `profkit-import` feeds a `perf
//!   record` file through the sync stage and writes an ordinary session,
//!   which this crate reads like any other;
//! - `--diff` ([`diff_reports`]): the change in each symbol's share between
//!   two reports;
//! - off-CPU time of sessions recorded with `profctl start --off-cpu`
//!   ([`ReportOptions::off_cpu`], `--off-cpu[=blocked|runnable|all]`): each
//!   `OffCpu` marker of the chosen kinds is a "sample" at its switch-out's
//!   (cookie, offset) and stack, weighted by its nanoseconds, through the
//!   same decode loop (a third monomorphization, so the sample path is
//!   untouched) and the same maps, so every view (flat, `-c`,
//!   `--children`, `--separate`, specs, `--time`, `--merge`, `--diff`,
//!   parts, JSON, CSV, collapsed stacks in µs, flame graphs, pprof
//!   `off_cpu/nanoseconds`) shows time: ms in text and CSV, ns in JSON
//!   (`"unit": "ns"`). A report adds up at most 2⁶² ns (146 years): a
//!   forged file's weights past that are not counted and a warning says so,
//!   so no sum overflows. `--wall` ([`build_wall`]): per thread, on-CPU
//!   time (samples × a sample's time for `cpu-clock`/`task-clock`), blocked
//!   and runnable time, and their sum.
//!
//! # Design constraints
//!
//! - **Aggregate first, name later.** Samples are counted per (cookie,
//!   offset[, cpu, pid, tid]) before anything is named; then each binary's
//!   *distinct* offsets are symbolized once (`profkit_symbols::Symbolizer::
//!   symbolize_all`, one rayon task per binary), and rows are grouped by
//!   symbol id. Nothing is O(samples × binaries) or O(samples × symbols).
//! - **Fast enough to run often.** A 1.37 M-sample session: `profreport -l`
//!   in ~45 ms and 16.6 MiB against `perf report`'s ~600 ms and 77 MiB on
//!   the same workload (`scripts/bench.sh report`, docs/PERFORMANCE.md).
//!   The biggest single cost was parsing a 5 MB kallsyms: it is trimmed
//!   first (`profkit_symbols::trim_kallsyms`), in parallel with reading the other binaries.
//! - **Only what the report needs is kept.** The aggregation key drops the
//!   fields a report does not show (the offset for an image summary, the
//!   thread unless `--separate=thread`), so maps stay small.
//! - **Stacks cost only the reports that use them.** Without call-graph
//!   output the stack id is never looked at (a separate, monomorphized
//!   sink keeps the flat pass what it was); with it, samples are counted
//!   per (key, stack id) and a stack's frames are symbolized once per
//!   distinct (binary, offset), not per sample.
//! - **Never panic on a session.** Corrupt and torn chunks are skipped and
//!   reported (index, byte offset, reason) in [`Report::warnings`] and the
//!   header; samples the footer counted but that could not be read are
//!   stated. Only a file that is not a readable session at all (wrong magic
//!   or version, bad header) is an [`Error`].
//! - **Byte consumer only.** No perf, no daemon: whether a recorder still
//!   runs is told by the caller ([`Session::set_liveness`]).
//! - **Renderers write to `impl Write`** and only format a [`Report`].
//!
//! # Example
//!
//! ```
//! use profkit_eventlog::*;
//! use profkit_report::{build_report, render, Format, NoProgress, ReportOptions, Session, SymbolSources};
//!
//! // A session of three samples in one binary, on two CPUs.
//! let dir = tempfile::tempdir()?;
//! let header = SessionHeader { event: EventConfigDesc { name: "cpu-clock".into(), frequency: Some(1000), ..Default::default() }, cpus: vec![0, 1], ..Default::default() };
//! let mut w = SessionWriter::create(dir.path().join("session.pkl"), &header)?;
//! let mut enc = ChunkEncoder::new();
//! enc.event(&Event::CookieDef(CookieEntry { cookie: 7, kind: CookieKind::User, path: "/bin/app".into(), build_id: None, dev: 0, inode: 0, generation: 0, base: 0, pid: None, file: Default::default() }));
//! enc.sample(0, 10, 10, false, 7, 0x1000);
//! enc.sample(1, 10, 11, false, 7, 0x1000);
//! enc.sample(1, 10, 11, false, 7, 0x1008);
//! w.append_chunk(0, 1, enc.bytes())?;
//!
//! let session = Session::open(dir.path())?;
//! let report = build_report(&[session], &ReportOptions::default(), &SymbolSources::default(), &NoProgress)?;
//! assert_eq!(report.header.total_samples, 3);
//! assert_eq!((&*report.rows[0].image, report.rows[0].total), ("app", 3));
//! let mut out = Vec::new();
//! render(&report, Format::Json, &mut out)?;
//! assert!(String::from_utf8(out)?.contains("\"total_samples\": 3"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Output formats
//!
//! Text is opreport's layout: a header (sessions and their state, event,
//! rate and how call graphs were recorded, time span, samples, loss per
//! CPU with a warning line above 0.01 %, the footer's stack counts when
//! any is not 0, unreadable chunks), then one `samples %` column pair (one
//! per CPU with `--separate=cpu`, headed `cpu:N`), then the thread,
//! location, application, image and symbol columns that apply. JSON is one
//! object:
//!
//! ```text
//! { "event", "frequency" | null, "period" | null,
//!   "call_graph": null | { "mode": "fp" } | { "mode": "dwarf", "user_stack": bytes },
//!   "cgroups"?: "sample" | "proc",
//!   "unit"?: "ns", "off_cpu"?: "blocked" | "runnable" | "all",   (--off-cpu: figures are ns)
//!   "off_cpu_accounting"?: { "switches", "intervals", "lost", "kernel_lost", "no_stack",
//!                            "unpaired", "dropped" },          (sessions recorded with --off-cpu)
//!   "total_samples", "samples_read",
//!   "samples_unreadable" | null, "lost": { "total", "percent", "source", "per_cpu": { "0": n, … } },
//!   "stacks"?: { "unknown", "truncated", "user_stacks_cut" },
//!   "start_time", "start_time_unix_ns", "duration_s", "sessions": [...], "bad_chunks": [...],
//!   "warnings": [...], "unnamed_binaries"?: [ { "path", "samples", "note" } ],
//!   "debuginfod"?: { "servers", "network", "named", "not_found", "fetched", "bytes",
//!                    "requests", "refused", "seconds", "errors": [...] },
//!   "rows": [ { "samples", "percent", "image", "app", "symbol", "cpu", "tgid", "tid", "comm",
//!               "ns_tgid"?, "ns_tid"?, "cgroup"?, "vma"?, "location"? } ]
//!                                                  (or "timeline": {...} with --timeline) }
//! ```
//!
//! `ns_tgid`/`ns_tid` (`--separate=thread`) are a task's ids in its own pid
//! namespace, there only for tasks that ran in another pid namespace than
//! the recorder (a container's init is 1/1); the text report shows them as
//! an `ns tgid/tid` column when any row has them. `cgroup` is there with
//! `--separate=cgroup`.
//!
//! Each of `sessions` is `{ "path", "state", "target", "host", "chunks",
//! "rounds" }`, and for a rotated session also `"parts"` (how many from
//! `"first_part"` to `"last_part"`), `"parts_read"` (fewer with `--time`)
//! and, when one part file was given alone, `"one_part": true`.
//!
//! `debuginfod` (a report whose client has servers, or named a binary from
//! its cache) says what the client did: `named`, binaries named (or given lines) by a
//! file of its cache, fetched by this report or before; `not_found`,
//! binaries no server has; `fetched`/`bytes`/`requests`/`refused`, this
//! report's downloads; `errors`, the first few failures.
//!
//! `stacks` (the footers' `stacks_unknown`, `stacks_truncated` and
//! `user_stacks_cut`, summed over CPUs and sessions) is there only when one
//! of them is not 0.
//!
//! Rows are the text report's rows, flattened ([`flat_rows`]): one per
//! (row, CPU) with samples under `--separate=cpu`, percent within that CPU;
//! a nested application row comes before its dependents, which carry it as
//! `app`. CSV has the same rows under a fixed header
//! (`samples,percent,cpu,tgid,tid,ns_tgid,ns_tid,comm,cgroup,app,image,symbol,vma,location`,
//! empty fields where a row has no value). With `--children`
//! rows also carry `inclusive` and `inclusive_percent` (a CSV gets two more
//! columns); with `--callgraph` the JSON object has a `callgraph` key
//! (`entries`: `image`, `symbol`, `self_samples`, `self_percent`, `total`,
//! `total_percent`, `callers` and `callees` as `{image, symbol, samples,
//! percent}`, the percent of the entry's `total`), and CSV is one line per
//! arc (`function_image,function_symbol,relation,samples,percent,image,symbol`,
//! relation `caller`, `self`, `total` or `callee`).
//!
//! With [`ReportOptions::inline`] (`--inline`), call-graph frames are
//! expanded into their inlined functions (from DWARF): an inlined function
//! is a function of its own, its `symbol` `NAME (inlined)` in every format,
//! and JSON rows, call-graph entries and arcs carry `"inlined": true` (the
//! key is left out otherwise). Its `--children` row has inclusive samples
//! only (self samples stay with the symbol, as in the flat profile); in
//! `-c`, the innermost frame of a sample holds its self samples.
//!
//! The call-graph text is opreport's `-c` layout: per function, its
//! callers indented, the function (self samples and share, inclusive
//! samples and share), its callees indented with `[self]` among them:
//!
//! ```text
//! samples         %  inclusive         %  image name  symbol name
//! -------------------------------------------------------------------------------
//!   236     66.6667                       callgraph   b
//!   118     33.3333                       callgraph   a
//! 354      100.0000        354  100.0000  callgraph   c
//!   354    100.0000                       callgraph   c [self]
//! -------------------------------------------------------------------------------
//! ```
//!
//! Stack formats (`collapsed`, `flamegraph`, `pprof`) are described in
//! `export.rs` and [`pprof`].
//!
//! # What it is not for
//!
//! It does not record, talk to the daemon, or follow a growing session (a
//! report is a snapshot: run it again to see more). It does not unwind
//! (stacks are what the recorder gave: the kernel's frame-pointer walk, or
//! the sync stage's DWARF unwinding; see `docs/FORMAT.md` for their
//! limits) and annotates no source. `--callgraph`
//! and `--children` are per function: they do not split by thread or
//! application. `--import` reads file-mode perf.data without compressed
//! (`-z`) records; it does not read pipe output. Command-line parsing
//! lives in `cli/` (`profreport`); a progress bar is the caller's, through
//! [`Progress`].
//!
//! # Implementation notes
//!
//! ```text
//!  session.pkl ──► SessionReader (scan, CRC) ──► valid chunks ─┬─ rayon worker: for_each_sample → FxHashMap<Key, n>
//!                                          └─► bad chunks      ├─ rayon worker: …          + markers (CookieDef, Comm,
//!                                                (warnings)    └─ …                           ModuleLoad, Lost) per chunk
//!                                                                        │ reduce (merge maps)
//!        comms in file order ◄── markers ────────────────────────────────┤
//!        apps per (session, pid) ◄── user cookies mapped/sampled ────────┤
//!        distinct offsets per cookie ──► Symbolizer::symbolize_all ──────┤ (one task per binary)
//!                                                                        ▼
//!                                        rows keyed by (tgid, tid, app, image, symbol id) × column (CPU)
//!                                                                        ▼
//!                                           percent, sort, threshold ──► render (text | json | csv)
//!
//!  with stacks:  Key × stack id ─► frames at return − 1 added to the offsets symbolized above
//!                                ─► Stacks (locations, functions, merged samples)
//!                                     ├─► inclusive per function ─► rows' inclusive columns (--children)
//!                                     ├─► callers/callees at each function's innermost occurrence (-c)
//!                                     └─► folded lines ─► collapsed | inferno SVG;  profile.proto ─► gzip
//!  perf.data ─► profkit-import ─► profkit_sync::SyncStage::record ─► session.pkl ─► everything above
//! ```

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod aggregate;
mod annotate;
mod build;
mod callgraph;
mod diff;
mod error;
mod export;
pub mod fleet;
mod hash;
mod model;
mod naming;
mod options;
pub mod pprof;
mod render;
mod session;
mod spec;
pub mod stream;
#[cfg(test)]
mod tests;
mod wall;
mod warnings;
mod window;

pub use build::{build_report, build_report_owned};
pub use diff::{diff_reports, write_diff, Diff, DiffRow};
pub use error::{Error, Result};
pub use export::{collapsed_lines, write_collapsed, write_flamegraph};
pub use model::{
    Annotation, AsmLine, BadChunkInfo, CallArc, CallEntry, CallGraph, CallGraphMode, Column,
    CpuLoss, Function, Header, Location, Mapping, OffCpuCounts, Report, Row, SessionInfo,
    SessionTimeline, ShownColumns, StackCounts, StackSample, Stacks, Symbol, Timeline,
    TimelineLine, UnnamedBinary,
};
pub use naming::debuginfod::{Debuginfod, DebuginfodOutcome};
pub use options::{AnnotateOptions, OffCpuMode, ReportOptions, SymbolSources};
/// Where [`SymbolSources::index_cache`] keeps binaries' symbol indexes.
pub use profkit_symbols::IndexCacheOptions;
/// The background build of the symbol index ([`IndexCacheOptions::defer_builds`]).
pub use profkit_symbols::{builder_lock, builds_deferred, BuilderLock};
pub use render::{
    flat_rows, format_utc, printable, render, render_colored, write_csv, write_json, write_text,
    Format, Printable, NO_SYMBOLS, TEXT_CPU_COLUMNS, UNKNOWN_SYMBOL,
};
pub use session::{
    Liveness, Part, Rotation, Session, ARCHIVE_DEBUG_DIR, JIT_DEFINITIONS_AFTER_NS, KALLSYMS_FILE,
    MAX_PARTS, SESSION_FILE,
};
pub use spec::{base_name, Glob, ProfileSpec, Separate, SortKey, SPEC_TAGS};
pub use wall::{build_wall, write_wall, WallReport, WallRow};
pub use warnings::MAX_WARNING_LINES;
pub use window::TimeSpec;

/// Progress of a report, for a progress bar. Called from rayon workers, so
/// it must be `Sync`; every method has an empty default.
pub trait Progress: Sync {
    /// A phase begins with `total` steps (chunks, binaries).
    fn start(&self, _phase: &'static str, _total: u64) {}
    /// `n` steps of the current phase are done.
    fn advance(&self, _n: u64) {}
    /// The report is built.
    fn finish(&self) {}
}

/// No progress reporting.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoProgress;

impl Progress for NoProgress {}
