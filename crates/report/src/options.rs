//! What a report is asked for: the validated flags of `profreport`
//! ([`ReportOptions`]) and where binaries and kernel symbols are found
//! ([`SymbolSources`]).

use std::path::PathBuf;

use crate::spec::{ProfileSpec, Separate, SortKey};

/// What to report: the flags of `profreport`, validated.
#[derive(Clone, Debug, PartialEq)]
pub struct ReportOptions {
    /// One row per symbol (`-l`) instead of per binary.
    pub symbols: bool,
    /// What to separate by.
    pub separate: Separate,
    /// Show the application column (`--app`): the executable of the
    /// process each sample was taken in.
    pub app_column: bool,
    /// Which samples to look at.
    pub spec: ProfileSpec,
    /// Leave out rows below this percentage.
    pub threshold: f64,
    /// Row order.
    pub sort: SortKey,
    /// Reverse the row order.
    pub reverse: bool,
    /// Demangle C++ and Rust names.
    pub demangle: bool,
    /// Show each symbol's start address.
    pub show_address: bool,
    /// Percentages of the whole session(s), not of this report's samples.
    pub global_percent: bool,
    /// Only samples in the executable of the process they were taken in
    /// (no libraries, no kernel).
    pub exclude_dependent: bool,
    /// Show each symbol's source file and line.
    pub debug_info: bool,
    /// Full paths of binaries instead of file names.
    pub long_filenames: bool,
    /// Instead of rows: samples and losses per CPU per this many rounds.
    pub timeline: Option<u32>,
    /// Instead of rows: samples and losses per CPU per this many
    /// nanoseconds from the session's start, each sample placed by its own
    /// time (`--timeline 10ms`); wins over [`ReportOptions::timeline`].
    /// Losses fall in their round's line; samples of sessions written
    /// before sample times in their round's middle's.
    pub timeline_every: Option<u64>,
    /// Caller/callee blocks per function (`--callgraph`); implies
    /// `symbols`.
    pub callgraph: bool,
    /// Inclusive samples per row (`--children`): the samples whose call
    /// stack holds the row's function; rows are sorted and cut by them.
    /// Implies `symbols`.
    pub children: bool,
    /// Keep the symbolized stacks in [`Report::stacks`] (for the collapsed,
    /// flame graph and pprof outputs). Implies `symbols`.
    pub stacks: bool,
    /// Expand each frame of a call stack into its inlined functions
    /// (innermost first, then the real function), read from the binary's
    /// DWARF (or its debug file), as perf's `--inline` (`profreport
    /// --inline`). Only call-graph outputs use it (stacks, `--callgraph`,
    /// `--children`); a binary without DWARF keeps its frames as they are.
    /// Off by default: reading DWARF makes the symbolizer read each binary
    /// whole (a system-wide report: ~10× the time, ~20× the memory).
    pub inline: bool,
    /// Annotate functions (`--annotate[=SYMBOL]`): samples per source line
    /// and/or per instruction. Implies `symbols`.
    pub annotate: Option<AnnotateOptions>,
    /// Only the samples of this window of time (`--time`).
    pub time: Option<crate::window::TimeSpec>,
    /// Count off-CPU time instead of samples (`--off-cpu[=KIND]`): each
    /// `OffCpu` marker of the chosen kind(s) is a "sample" weighted by its
    /// nanoseconds, at its switch-out's (cookie, offset) and stack. Needs a
    /// session recorded with `profctl start --off-cpu`.
    pub off_cpu: Option<OffCpuMode>,
    /// With `--separate=cpu`: at most this many CPU columns; past it the
    /// CPUs (in order) are added up in contiguous ranges
    /// ([`crate::Column::Cpus`]) of equal count, and a warning says so.
    /// `None`: one column per CPU. For text: JSON and CSV name one CPU
    /// per record, so they keep every CPU (`profreport` sets it for text
    /// only).
    pub cpu_columns: Option<usize>,
}

/// Which off-CPU intervals a report counts (`--off-cpu[=blocked|runnable|all]`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OffCpuMode {
    /// The task slept: I/O, a lock, a pipe, a timer (the default).
    #[default]
    Blocked,
    /// The task was preempted and waited for a CPU.
    Runnable,
    /// Both.
    All,
}

impl OffCpuMode {
    /// True when intervals of `kind` count.
    #[inline]
    pub fn wants(self, kind: profkit_eventlog::OffCpuKind) -> bool {
        use profkit_eventlog::OffCpuKind;
        matches!(
            (self, kind),
            (OffCpuMode::All, _)
                | (OffCpuMode::Blocked, OffCpuKind::Blocked)
                | (OffCpuMode::Runnable, OffCpuKind::Runnable)
        )
    }

    /// How reports and the command line name it.
    pub fn name(self) -> &'static str {
        match self {
            OffCpuMode::Blocked => "blocked",
            OffCpuMode::Runnable => "runnable",
            OffCpuMode::All => "all",
        }
    }

    /// Parses `blocked`, `runnable` or `all`.
    ///
    /// # Errors
    /// [`crate::Error::BadValue`] for anything else.
    pub fn parse(s: &str) -> crate::Result<OffCpuMode> {
        match s {
            "blocked" => Ok(OffCpuMode::Blocked),
            "runnable" => Ok(OffCpuMode::Runnable),
            "all" => Ok(OffCpuMode::All),
            _ => Err(crate::Error::BadValue {
                option: "--off-cpu",
                value: s.to_owned(),
                allowed: "blocked, runnable or all".to_owned(),
            }),
        }
    }
}

/// What `--annotate` shows.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AnnotateOptions {
    /// The function (its name as shown, or its raw name); `None`: every
    /// function above the threshold.
    pub symbol: Option<String>,
    /// Samples per source line (`--source`).
    pub source: bool,
    /// Samples per instruction (`--assembly`); with `source`, mixed.
    /// Neither: source where line information is found, else assembly.
    pub assembly: bool,
    /// Where to look for source files whose recorded path is missing
    /// (`--source-dir`).
    pub source_dirs: Vec<std::path::PathBuf>,
    /// Intel syntax instead of AT&T (objdump's and perf's default).
    pub intel: bool,
}

impl ReportOptions {
    /// True when the report needs each sample's call stack.
    pub fn wants_stacks(&self) -> bool {
        self.callgraph || self.children || self.stacks
    }

    /// True for a `--timeline` report (per rounds or per time step).
    pub fn wants_timeline(&self) -> bool {
        self.timeline.is_some() || self.timeline_every.is_some()
    }
}

impl Default for ReportOptions {
    fn default() -> Self {
        ReportOptions {
            symbols: false,
            separate: Separate::default(),
            app_column: false,
            spec: ProfileSpec::default(),
            threshold: 0.0,
            sort: SortKey::Samples,
            reverse: false,
            demangle: true,
            show_address: false,
            global_percent: false,
            exclude_dependent: false,
            debug_info: false,
            long_filenames: false,
            timeline: None,
            timeline_every: None,
            callgraph: false,
            children: false,
            stacks: false,
            inline: false,
            annotate: None,
            time: None,
            off_cpu: None,
            cpu_columns: None,
        }
    }
}

/// Where binaries and kernel symbols are found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SymbolSources {
    /// A kallsyms file for every session (else each session's `kallsyms`
    /// copy, else the live `/proc/kallsyms`).
    pub kallsyms: Option<PathBuf>,
    /// Prefix for every recorded path (a copy of the recording machine's
    /// files).
    pub sysroot: Option<PathBuf>,
    /// Directories searched by file name for a binary with the recorded
    /// build-id, when the recorded path is missing or changed.
    pub search_dirs: Vec<PathBuf>,
    /// Roots of separate debug files (empty: `/usr/lib/debug`).
    pub debug_dirs: Vec<PathBuf>,
    /// A debuginfod client: its cache is searched for debug files and
    /// binaries by build-id, and what the local files leave unnamed is
    /// fetched from its servers (unless it is offline).
    pub debuginfod: Option<crate::Debuginfod>,
    /// Where binaries' symbol indexes are kept and read
    /// (`profkit_symbols::IndexCacheOptions`: made by the first report that
    /// needs a binary's symbols, binary-searched by the next; `None`: every
    /// report reads the symbol tables, and nothing is written).
    pub index_cache: Option<profkit_symbols::IndexCacheOptions>,
}
