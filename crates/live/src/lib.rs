//! The live recording: everything between `profctl`'s flags and the
//! libraries that sample, sync and serve.
//!
//! - [`StartConfig`]: what a session is started with, validated into the
//!   sampler's configuration ([`StartConfig::sampler_config`], with the
//!   user-space fallback of [`StartConfig::probe`]) and handed to the
//!   daemon process as one JSON argument (paths as bytes: a non-UTF-8
//!   session directory arrives unchanged).
//! - [`CallGraph`]: `-g` and `--call-graph fp|dwarf[,SIZE]` (perf's
//!   syntax), and [`RingChoice`], the rings a session gets when
//!   `--buffer-pages` is not given (`profkit_perf::ring_plan` for its
//!   CPUs, rate, call graphs and locked-memory limit), said at start.
//! - [`LiveEngine`]: `profkit-sync`'s [`Recorder`](profkit_sync::Recorder)
//!   behind `profkit-daemon`'s [`Engine`](profkit_daemon::Engine), generic
//!   over the ring source ([`WakeSource`]: the live `Sampler`, or
//!   `SimRings` in tests); [`run_daemon`] is the daemon process's body.
//! - [`ReservedSink`]: the session file plus [`RESERVE_FILE`], disk space
//!   released right before each footer so a full disk still gets one.
//! - [`PartsConfig`]: a long recording in parts (`--rotate TIME|SIZE`,
//!   SIGHUP, `profctl rotate`) and which closed parts to delete
//!   ([`apply_retention`]: `--keep N`, `--max-disk SIZE`); the engine
//!   rotates through `Recorder::rotate`.
//! - [`DiskBudget`]: the one budget everything a session writes counts
//!   against (`--max-disk`, or [`DEFAULT_BUDGET_PERCENT`] of the free
//!   space at start, at most [`DEFAULT_BUDGET_MAX`]): parts, and the
//!   copies besides them (kept binaries, JIT maps, kallsyms) at most half
//!   of it, one user's at most a quarter; refusals counted and named
//!   ([`DiskSummary`]). Copies are charged what they take on disk: holes
//!   are neither read nor written, JIT maps are copied by their lines
//!   ([`PERF_MAP_LINE_MAX`], [`PERF_MAP_KEPT_MAX_LINES`],
//!   [`PERF_MAP_KEPT_MAX_BYTES`]), appended to, never copied whole again.
//!   A start removes what an earlier session left besides its parts
//!   (`debug/`, `perf-*.map`, `kallsyms`).
//! - [`save_session_extras`]: at stop, the lines of the kernel symbol table
//!   the session's kernel samples and frames need (trimmed by
//!   `profkit_symbols::trim_kallsyms`, not the whole 5 MB table) and the
//!   JIT maps of sampled processes, saved into the session directory.
//! - [`finalize_dead`]: the footer for the session of a daemon that died.
//! - [`archive`]: a session and the binaries it samples in one tar.
//! - [`Summary`]: the typed status/stop summary, built here only, sent as
//!   JSON over the control socket, rendered here for `profctl`
//!   ([`Summary::stop_text`]); [`control`]: the requests `profctl` sends,
//!   their answers read back typed ([`Rotation`], [`Status`], [`Summary`]).
//! - [`record()`]: `profctl record`'s supervisor (the command started
//!   stopped, the daemon stopped on every way out, signals passed on).
//! - [`Status`]: `profctl status`: the daemon's state, event and rate
//!   (session header), uptime, sizes and the [`Summary`], as text
//!   ([`Status::text`], [`Summary::status_text`]) or serde JSON.
//!
//! # Design constraints
//!
//! - Owns the live recording's *composition*, not its parts: opening
//!   events is `profkit-perf`'s, rounds and the event buffer
//!   `profkit-sync`'s, the file format `profkit-eventlog`'s, the process
//!   machinery `profkit-daemon`'s (which stays free of sampling crates:
//!   this crate depends on it, not the other way round).
//! - Everything but [`run_daemon`] and [`StartConfig::probe`] runs without
//!   `perf_event_open` (simulated rings, temporary directories, fake
//!   `/proc/kallsyms`), and is tested that way.
//! - No CLI types: `profctl` converts its clap arguments into a
//!   [`StartConfig`] and prints what comes back.
//! - `#![forbid(unsafe_code)]`; typed errors ([`Error`]).
//!
//! # Example
//!
//! A live engine over simulated rings, stopped by the daemon machinery's
//! [`Engine`](profkit_daemon::Engine) interface:
//!
//! ```
//! use profkit_daemon::Engine;
//! use profkit_live::{LiveEngine, Summary};
//! use profkit_perf::Layout;
//! use profkit_sync::{FileSink, Recorder, RecorderOptions, SimRings, SyncOptions, SyncStage};
//!
//! let tmp = tempfile::tempdir()?;
//! let session = tmp.path().join("session.pkl");
//! let layout = Layout { callchain: false, user_stack: 0,     cgroup: false, };
//! let stage = SyncStage::new(SyncOptions::new(layout));
//! let sink = FileSink::create(session.clone(), Default::default())?;
//! let rings = SimRings(vec![profkit_perf::SimRing::new(0, 4096, layout)]);
//! let rec = Recorder::new(rings, stage, Box::new(sink), RecorderOptions::default())?;
//! let mut engine = LiveEngine::new(rec, session);
//! engine.round()?;
//! let summary: Summary = serde_json::from_value(engine.stop()?)?;
//! assert_eq!(summary.rounds, 2); // one round, and stop's final drain
//! # Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
//! ```
//!
//! # Not for
//!
//! Command-line parsing and printing (`profctl`), reading sessions for
//! reports (`profkit-report`).
#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod archive;
mod budget;
mod callgraph;
mod config;
pub mod control;
mod engine;
mod error;
mod export;
mod extras;
mod finalize;
mod jitmap;
mod keep;
mod parts;
mod record;
mod sparse;
mod summary;

pub use archive::{archive, archive_with, Archived, DebugDir, DebugFiles, SYSTEM_DEBUG_DIR};
pub use budget::{
    BudgetLimit, DiskBudget, DiskSummary, Refusal, DEFAULT_BUDGET_MAX, DEFAULT_BUDGET_PERCENT,
    NAMED_REFUSALS,
};
pub use callgraph::{CallGraph, RingChoice, DEFAULT_DWARF_STACK};
pub use config::{Rate, StartConfig, DEFAULT_FREQUENCY};
pub use engine::{
    run_daemon, run_daemon_exporting, run_daemon_with, LiveEngine, ReservedSink, WakeSource,
    DIR_CHECK_INTERVAL, RESERVE_BYTES, RESERVE_FILE,
};
pub use error::{perf_is_usage, Error, Result};
pub use export::{
    exported_through, write_exported_through, ExportConfig, ExportState, Exporter, EXPORT_LOG_FILE,
    EXPORT_STATE_FILE, EXPORT_URL_ENV, MAX_BACKOFF, STOP_WAIT,
};
pub use extras::{
    is_extra, save_session_extras, ExtrasSources, SavedExtras, KALLSYMS_COPY, KALLSYMS_MAX_BYTES,
    PERF_MAP_MAX_BYTES,
};
pub use finalize::{finalize_dead, Finalized};
pub use jitmap::{
    PERF_MAP_KEPT_MAX_BYTES, PERF_MAP_KEPT_MAX_LINES, PERF_MAP_LINE_MAX, PERF_MAP_READ_PER_LOOK,
};
pub use keep::{
    KeptSummary, BINARIES_KEPT_MAX_BYTES, BINARY_KEEP_MAX_BYTES, KEEP_STOP_WAIT, KEPT_DIR,
    NOT_KEPT_FILE, NOT_KEPT_LINES, NS_PROCESSES_PER_ROUND,
};
pub use parts::{
    apply_retention, parse_keep, parse_size, PartsConfig, Retention, Rotate, Rotation,
};
pub use record::{record, RecordError, RecordRun};
pub use summary::{
    CpuSummary, JitSummary, SessionSummary, Status, Summary, UnattributedExample, UnwindSummary,
};
