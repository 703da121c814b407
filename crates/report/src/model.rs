//! What a report says, independent of how it is printed: the header,
//! the columns, the rows, the timeline and the warnings. Renderers only
//! format these.

use std::sync::Arc;

use serde::Serialize;

/// The state a session was found in.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SessionInfo {
    /// The session file as given.
    pub path: String,
    /// `stopped`, `running`, `no footer` …, in words.
    pub state: String,
    /// What was profiled (`command ls -l`, `system-wide`).
    pub target: String,
    /// Host name.
    pub host: String,
    /// Sync rounds read (valid chunks).
    pub chunks: u64,
    /// Sync rounds run, from the footer.
    pub rounds: Option<u64>,
    /// Of a rotated session (`profctl start --rotate`): how many parts it
    /// has from `first_part` to `last_part` (older ones were deleted by
    /// retention when `first_part` is not 1). Absent otherwise.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parts: Option<u64>,
    /// The oldest part present.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_part: Option<u64>,
    /// The newest part present.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_part: Option<u64>,
    /// The parts read: fewer than `parts` with `--time` (parts outside the
    /// window are not opened) or when some could not be read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parts_read: Option<u64>,
    /// One part file was given and is reported alone.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub one_part: bool,
}

/// A part of a session file that could not be read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BadChunkInfo {
    /// The session file.
    pub session: String,
    /// Chunk index (the reader's numbering of frames and bad regions).
    pub index: u64,
    /// File offset.
    pub offset: u64,
    /// Bytes skipped.
    pub len: u64,
    /// Why, in words.
    pub reason: String,
    /// An incomplete frame at the end: a chunk being written, or the
    /// recorder was killed while writing it.
    pub torn: bool,
}

/// Samples and losses of one CPU.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CpuLoss {
    /// The CPU.
    pub cpu: u32,
    /// Samples of this CPU in the session (written, per the footer; else read).
    pub samples: u64,
    /// Samples lost on this CPU, every reason.
    pub lost: u64,
    /// `lost / (samples + lost)`, in percent.
    pub percent: f64,
}

/// How a session's call graphs were recorded (its header's event
/// `callchain` and `user_stack`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "mode")]
pub enum CallGraphMode {
    /// The kernel's frame-pointer walk (`-g`, `--call-graph fp`).
    #[serde(rename = "fp")]
    FramePointers,
    /// DWARF unwinding of a copy of each sample's user stack
    /// (`--call-graph dwarf,SIZE`).
    #[serde(rename = "dwarf")]
    Dwarf {
        /// Bytes of user stack copied per sample.
        user_stack: u32,
    },
}

impl CallGraphMode {
    /// The mode of a session whose event is `event`; `None` without call
    /// graphs.
    pub fn of(event: &profkit_eventlog::EventConfigDesc) -> Option<Self> {
        match (event.callchain, event.user_stack) {
            (_, n) if n > 0 => Some(CallGraphMode::Dwarf { user_stack: n }),
            (true, _) => Some(CallGraphMode::FramePointers),
            (false, _) => None,
        }
    }
}

/// `frame pointers`, `dwarf, 8192-byte stacks`.
impl std::fmt::Display for CallGraphMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallGraphMode::FramePointers => f.write_str("frame pointers"),
            CallGraphMode::Dwarf { user_stack } => write!(f, "dwarf, {user_stack}-byte stacks"),
        }
    }
}

/// What the sync stage counted about the samples' stacks (the footer's
/// accounting, summed over CPUs and sessions). The samples are all in the
/// report; their stacks are shorter than the real ones.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct StackCounts {
    /// Stacks that met a frame in no known binary: it is kept as one
    /// `[unknown]` frame and the rest of that part of the stack dropped
    /// (`stacks_unknown`).
    pub unknown: u64,
    /// Stacks longer than the sync stage's bound: their outermost frames
    /// were dropped (`stacks_truncated`).
    pub truncated: u64,
    /// DWARF call graphs: user stacks the copy ended before the outermost
    /// frame was reached (`user_stacks_cut`).
    pub user_stacks_cut: u64,
}

impl StackCounts {
    /// Whether every count is 0.
    pub fn is_zero(&self) -> bool {
        *self == StackCounts::default()
    }
}

/// What the sync stage counted about off-CPU intervals (the footers'
/// off-CPU accounting, summed over CPUs, parts and sessions); there only
/// for sessions recorded with `profctl start --off-cpu`.
pub use profkit_eventlog::OffCpuCounts;

/// The report's header.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Header {
    /// The sessions read (one, or several with `--merge`).
    pub sessions: Vec<SessionInfo>,
    /// The sampled event.
    pub event: String,
    /// Samples per second per CPU, in frequency mode.
    pub frequency: Option<u64>,
    /// Events per sample, in period mode.
    pub period: Option<u64>,
    /// How call graphs were recorded (the first session's); `None`
    /// without.
    pub call_graph: Option<CallGraphMode>,
    /// How samples' cgroups were recorded (the first session with them):
    /// `sample` (the kernel's id per sample) or `proc` (`/proc/PID/cgroup`
    /// once per process, kernels before 5.7); `None` without.
    pub cgroups: Option<&'static str>,
    /// Wall-clock start, ns since the Unix epoch.
    pub start_unix_ns: u64,
    /// Length of the session(s), ns (of the window, with `--time`).
    pub duration_ns: u64,
    /// A `--time` window was applied: start, length, samples and losses
    /// are the window's (to the sync interval).
    pub window: bool,
    /// Samples decoded from the session(s), before any spec or filter.
    pub samples_read: u64,
    /// Samples in this report (after specs, `--exclude-dependent`).
    pub total_samples: u64,
    /// Samples the footer says were written but could not be read (bad
    /// chunks); `None` without a footer (unknown).
    pub samples_unreadable: Option<u64>,
    /// Loss per CPU.
    pub cpus: Vec<CpuLoss>,
    /// All losses.
    pub lost_total: u64,
    /// `lost_total` over samples plus losses, in percent.
    pub lost_percent: f64,
    /// Where the loss figures come from: `footer` or `markers`.
    pub lost_source: String,
    /// The stack accounting of the sessions' footers (0 without one).
    pub stacks: StackCounts,
    /// Unreadable parts of the session file(s).
    pub bad_chunks: Vec<BadChunkInfo>,
    /// The report counts off-CPU time of these intervals (`--off-cpu`):
    /// every sample figure of the report (rows, totals, `samples_read`,
    /// `total_samples`, stacks) is then nanoseconds, not samples.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub off_cpu: Option<crate::options::OffCpuMode>,
    /// The footers' off-CPU accounting, for sessions recorded with
    /// `--off-cpu` (`None` for others, and with `--time`: footers count
    /// whole files).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub off_cpu_accounting: Option<OffCpuCounts>,
    /// What the debuginfod client did, when the report had one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub debuginfod: Option<crate::DebuginfodOutcome>,
}

/// What a column counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Column {
    /// All CPUs together.
    All,
    /// One CPU (`--separate=cpu`).
    Cpu(u32),
    /// The CPUs from the first to the last (those of the report in that
    /// range) added up: `--separate=cpu` on more CPUs than
    /// [`crate::ReportOptions::cpu_columns`].
    Cpus(u32, u32),
}

/// Which optional columns rows carry (not a record layout: that is
/// `profkit_perf::Layout`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ShownColumns {
    /// One row per symbol (`-l`).
    pub symbols: bool,
    /// The application column.
    pub app: bool,
    /// tgid, tid and command columns.
    pub thread: bool,
    /// The cgroup column (`--separate=cgroup`).
    pub cgroup: bool,
    /// The vma column (`--show-address`).
    pub address: bool,
    /// The source location column (`--debug-info`).
    pub location: bool,
    /// Image summary with dependent images under their application.
    pub nested: bool,
    /// Inclusive (self plus callees) samples per row (`--children`).
    pub inclusive: bool,
}

/// One line of the report.
///
/// A report of a large build holds some ten thousand rows at its memory
/// peak, so what most rows leave empty is boxed ([`Row::thread`],
/// [`Row::extra`], [`Row::inclusive`]), a binary's name is shared by its rows
/// ([`Row::image`]) and one column's figures are held in place
/// ([`PerColumn`]): 152 bytes a row and nothing on the heap but its
/// names, where it was 344 bytes and three blocks.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    /// Samples per column.
    pub samples: PerColumn<u64>,
    /// Percent per column.
    pub percent: PerColumn<f64>,
    /// Samples over all columns.
    pub total: u64,
    /// Percent of all columns together.
    pub total_percent: f64,
    /// The binary (one name shared by the rows of a binary).
    pub image: Arc<str>,
    /// The symbol (`-l`); `NAME (inlined)` for an inlined function's
    /// row (`--children`).
    pub symbol: Option<String>,
    /// With `--children`: the row is an inlined function's (inclusive
    /// samples only; its self samples are its symbol's).
    pub inlined: bool,
    /// The symbol's start address (shown with `--show-address`).
    pub vma: Option<u64>,
    /// The thread columns (`--separate=thread`); read them with
    /// [`Row::tgid`], [`Row::tid`], [`Row::comm`], [`Row::ns_tgid`] and
    /// [`Row::ns_tid`].
    pub thread: Option<Box<ThreadColumns>>,
    /// What most reports leave empty: the application, source location
    /// and cgroup columns and nested rows; read them with [`Row::app`],
    /// [`Row::location`], [`Row::cgroup`] and [`Row::children`].
    pub extra: Option<Box<RowExtra>>,
    /// With `--children`: the row's inclusive samples; read them with
    /// [`Row::inclusive_samples`], [`Row::inclusive_percent`],
    /// [`Row::inclusive_total`] and [`Row::inclusive_total_percent`].
    pub inclusive: Option<Box<Inclusive>>,
}

/// A row's figures, one per column: held in the row itself for one column
/// (most reports), on the heap for more.
pub type PerColumn<T> = smallvec::SmallVec<[T; 1]>;

/// A row's columns that most reports leave empty.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RowExtra {
    /// The application (with the app column, or for a nested parent row
    /// its own name is `image`).
    pub app: Option<Arc<str>>,
    /// The symbol's source file and line (`--debug-info`).
    pub location: Option<String>,
    /// The cgroup's path (`--separate=cgroup`); `[cgroup ID]` for a
    /// cgroup the session does not name, `[none]` for samples without.
    pub cgroup: Option<String>,
    /// Dependent images, for a nested parent row.
    pub children: Vec<Row>,
}

/// A row's thread columns (`--separate=thread`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ThreadColumns {
    /// Process.
    pub tgid: Option<u32>,
    /// Thread.
    pub tid: Option<u32>,
    /// Thread name.
    pub comm: Option<String>,
    /// The process's pid in its own pid namespace, for a process that ran
    /// in another pid namespace than the recorder.
    pub ns_tgid: Option<u32>,
    /// The thread's tid in its own pid namespace (as `ns_tgid`).
    pub ns_tid: Option<u32>,
}

/// A row's inclusive columns (`--children`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Inclusive {
    /// Samples whose stack holds the row's function (itself or a caller
    /// of the sampled function), per column.
    pub samples: Vec<u64>,
    /// `samples` in percent, per column.
    pub percent: Vec<f64>,
    /// Inclusive samples over all columns.
    pub total: u64,
    /// `total` in percent.
    pub total_percent: f64,
}

impl Row {
    /// A row of `image` with no samples, names or columns yet (fill in
    /// the rest with struct update syntax).
    pub fn of_image(image: impl Into<Arc<str>>) -> Row {
        Row {
            samples: PerColumn::new(),
            percent: PerColumn::new(),
            total: 0,
            total_percent: 0.0,
            image: image.into(),
            symbol: None,
            inlined: false,
            vma: None,
            thread: None,
            extra: None,
            inclusive: None,
        }
    }

    /// The application ([`RowExtra::app`]).
    pub fn app(&self) -> Option<&Arc<str>> {
        self.extra.as_ref()?.app.as_ref()
    }

    /// The source location ([`RowExtra::location`]).
    pub fn location(&self) -> Option<&str> {
        self.extra.as_ref()?.location.as_deref()
    }

    /// The cgroup ([`RowExtra::cgroup`]).
    pub fn cgroup(&self) -> Option<&str> {
        self.extra.as_ref()?.cgroup.as_deref()
    }

    /// Dependent images, for a nested parent row ([`RowExtra::children`]).
    pub fn children(&self) -> &[Row] {
        self.extra.as_ref().map_or(&[], |e| &e.children)
    }

    /// The rarely set columns, made empty if the row had none.
    pub fn extra_mut(&mut self) -> &mut RowExtra {
        self.extra.get_or_insert_with(Default::default)
    }

    /// Process (`--separate=thread`).
    pub fn tgid(&self) -> Option<u32> {
        self.thread.as_ref()?.tgid
    }

    /// Thread (`--separate=thread`).
    pub fn tid(&self) -> Option<u32> {
        self.thread.as_ref()?.tid
    }

    /// Thread name (`--separate=thread`).
    pub fn comm(&self) -> Option<&str> {
        self.thread.as_ref()?.comm.as_deref()
    }

    /// The process's pid in its own pid namespace ([`ThreadColumns::ns_tgid`]).
    pub fn ns_tgid(&self) -> Option<u32> {
        self.thread.as_ref()?.ns_tgid
    }

    /// The thread's tid in its own pid namespace ([`ThreadColumns::ns_tid`]).
    pub fn ns_tid(&self) -> Option<u32> {
        self.thread.as_ref()?.ns_tid
    }

    /// The thread columns, made empty if the row had none.
    pub fn thread_mut(&mut self) -> &mut ThreadColumns {
        self.thread.get_or_insert_with(Default::default)
    }

    /// With `--children`: inclusive samples per column; empty otherwise.
    pub fn inclusive_samples(&self) -> &[u64] {
        self.inclusive.as_ref().map_or(&[], |i| &i.samples)
    }

    /// With `--children`: inclusive percent per column; empty otherwise.
    pub fn inclusive_percent(&self) -> &[f64] {
        self.inclusive.as_ref().map_or(&[], |i| &i.percent)
    }

    /// With `--children`: inclusive samples over all columns; 0 otherwise.
    pub fn inclusive_total(&self) -> u64 {
        self.inclusive.as_ref().map_or(0, |i| i.total)
    }

    /// With `--children`: [`Row::inclusive_total`] in percent; 0 otherwise.
    pub fn inclusive_total_percent(&self) -> f64 {
        self.inclusive.as_ref().map_or(0.0, |i| i.total_percent)
    }
}

/// One line of the timeline: a sync round, or a group of rounds.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TimelineLine {
    /// First round of the line.
    pub first_round: u64,
    /// Last round of the line.
    pub last_round: u64,
    /// Seconds from the session start to the last round of the line.
    pub time_s: f64,
    /// Samples per CPU, in [`Timeline::cpus`] order.
    pub samples: Vec<u64>,
    /// Lost per CPU, in [`Timeline::cpus`] order.
    pub lost: Vec<u64>,
    /// Chunks of these rounds that could not be read.
    pub unreadable_chunks: Vec<u64>,
}

/// The timeline of one session.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SessionTimeline {
    /// The session file.
    pub session: String,
    /// Its lines, in round order.
    pub lines: Vec<TimelineLine>,
}

/// Samples and losses per CPU over time (`--timeline`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Timeline {
    /// Rounds per line (0 when lines are a time step: `step_ns`).
    pub rounds_per_line: u32,
    /// Nanoseconds per line (`--timeline 10ms`), each sample counted in
    /// the line its own time falls in; then a line's rounds are those its
    /// samples came in, and `time_s` is the end of its step.
    pub step_ns: Option<u64>,
    /// The CPUs, in column order.
    pub cpus: Vec<u32>,
    /// One per session.
    pub sessions: Vec<SessionTimeline>,
}

/// A finished report.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    /// The header.
    pub header: Header,
    /// The sample columns.
    pub columns: Vec<Column>,
    /// Which optional columns there are.
    pub shown: ShownColumns,
    /// The rows, in print order.
    pub rows: Vec<Row>,
    /// Rows left out by `--threshold`.
    pub rows_below_threshold: usize,
    /// The timeline, instead of rows (`--timeline`).
    pub timeline: Option<Timeline>,
    /// Problems worth telling: unreadable chunks, missing binaries, high loss.
    pub warnings: Vec<String>,
    /// Binaries hit whose samples found no name for want of symbols
    /// (stripped, no debug file found), most samples first: counted in one
    /// line by [`Report::warning_lines`], listed with `-v`.
    pub unnamed_binaries: Vec<UnnamedBinary>,
    /// The caller/callee blocks (`--callgraph`).
    pub callgraph: Option<CallGraph>,
    /// The symbolized stacks, for the collapsed, flame graph and pprof
    /// outputs (kept when [`crate::ReportOptions::stacks`] asks for them).
    pub stacks: Option<Stacks>,
    /// The annotated functions (`--annotate`), hottest first.
    pub annotations: Option<Vec<Annotation>>,
}

/// A binary whose samples found no name: no symbol table of its own and
/// no debug file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct UnnamedBinary {
    /// Its path as recorded.
    pub path: String,
    /// Its samples that found no name (shown as offsets).
    pub samples: u64,
    /// What was missing and where debug files were looked for.
    pub note: String,
}

/// One function annotated (`--annotate`): its samples per source line
/// and/or per instruction.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Annotation {
    /// The binary's display name.
    pub image: String,
    /// The file its code was read from, when it was.
    pub path: Option<String>,
    /// The function.
    pub symbol: String,
    /// Its start address (link-time virtual address) and size.
    pub start: u64,
    /// Size in bytes (0: unknown).
    pub size: u64,
    /// Samples in the function, per column.
    pub samples: Vec<u64>,
    /// Their percent of the report's samples, per column.
    pub percent: Vec<f64>,
    /// Samples per source line (when shown).
    pub source: Option<profkit_annotate::SourceListing>,
    /// Samples per instruction (when shown).
    pub assembly: Option<Vec<AsmLine>>,
    /// What could not be shown, and how to get it.
    pub notes: Vec<String>,
}

/// One instruction of an [`Annotation`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AsmLine {
    /// Its address (link-time virtual address).
    pub address: u64,
    /// Mnemonic and operands; `None` where the code could not be read (the
    /// kernel, JIT code): the line is then one sampled address.
    pub text: Option<String>,
    /// Samples on it, per column.
    pub samples: Vec<u64>,
    /// A direct jump's or call's target.
    pub target: Option<u64>,
    /// The target is inside this function (a jump the listing can show).
    pub local_target: bool,
    /// Its source file (as recorded in DWARF) and line, when DWARF gives
    /// them.
    pub file: Option<String>,
    /// Its source line.
    pub line: Option<u32>,
    /// The inlined function it belongs to, if it is inlined code.
    pub inlined: Option<String>,
}

/// What a code address is in, by name. The text shown for the stand-ins
/// is the renderers' ([`crate::NO_SYMBOLS`], [`crate::UNKNOWN_SYMBOL`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Symbol {
    /// A symbol of the binary.
    Named(String),
    /// The binary could not be read, or the address is in no symbol of it.
    NoSymbols,
    /// Not in any known binary (a caller the frame-pointer walk could not
    /// place).
    Unknown,
}

impl Symbol {
    /// The stand-in for an address of `image` that has no symbol.
    pub(crate) fn missing(image: profkit_eventlog::Cookie) -> Symbol {
        if image == profkit_eventlog::COOKIE_UNKNOWN {
            Symbol::Unknown
        } else {
            Symbol::NoSymbols
        }
    }
}

/// A binary of [`Stacks`] (a pprof mapping).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Mapping {
    /// The recorded path (`[kernel.kallsyms]`, `/usr/lib/…/libc.so.6`).
    pub path: String,
    /// The name shown in reports (file name, or the path with `-f`).
    pub name: String,
    /// GNU build-id in lower-case hex, when recorded.
    pub build_id: Option<String>,
    /// The kernel or a module.
    pub kernel: bool,
    /// Kernel or module: the load address offsets are relative to.
    pub base: u64,
}

/// A function of [`Stacks`]: a symbol of a binary, or a stand-in.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Function {
    /// The symbol, or why there is none.
    pub symbol: Symbol,
    /// The binary's index in [`Stacks::mappings`].
    pub mapping: u32,
    /// The symbol's start address, when known (`None` for an inlined
    /// function).
    pub start: Option<u64>,
    /// An inlined function ([`ReportOptions::inline`](crate::ReportOptions::inline)):
    /// a function of the source whose code was inlined into a symbol of the
    /// binary; shown `NAME (inlined)`, as perf does.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub inlined: bool,
}

impl Function {
    /// The name shown in stacks and call graphs: the symbol, and
    /// ` (inlined)` after an inlined function's.
    pub fn display_name(&self) -> String {
        if self.inlined {
            format!("{} (inlined)", self.symbol)
        } else {
            self.symbol.to_string()
        }
    }
}

/// A code location of [`Stacks`]: an offset in a binary.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Location {
    /// The binary's index in [`Stacks::mappings`].
    pub mapping: u32,
    /// The offset looked up: the sample's offset for a sampled location;
    /// the return address minus one (the call instruction) for a caller.
    pub offset: u64,
    /// Its function's index in [`Stacks::functions`]: the symbol the
    /// offset is in.
    pub function: u32,
    /// The inlined functions at the offset (indexes into
    /// [`Stacks::functions`]), innermost first: each was inlined into the
    /// next, the last into `function`. Empty outside inlined code, or
    /// without [`ReportOptions::inline`](crate::ReportOptions::inline).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub inlined: Vec<u32>,
}

/// Samples that share a call stack, a column and a thread.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StackSample {
    /// The column (an index into [`Report::columns`]).
    pub column: usize,
    /// Process id (0 when merged sessions are not told apart).
    pub pid: u32,
    /// Thread id (0 unless `--separate=thread`).
    pub tid: u32,
    /// The process's name.
    pub process: String,
    /// Indexes into [`Stacks::locations`], the sampled one first, then its
    /// callers, outermost last.
    pub locations: Vec<u32>,
    /// Samples.
    pub count: u64,
}

/// Every sample of a report with its symbolized call stack (one entry per
/// distinct stack, column and thread).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Stacks {
    /// Binaries.
    pub mappings: Vec<Mapping>,
    /// Functions.
    pub functions: Vec<Function>,
    /// Locations.
    pub locations: Vec<Location>,
    /// The samples.
    pub samples: Vec<StackSample>,
}

impl Stacks {
    /// The function of location `loc` (the symbol, not an inlined
    /// function).
    pub fn function_of(&self, loc: u32) -> &Function {
        &self.functions[self.locations[loc as usize].function as usize]
    }

    /// The frames of location `loc`, innermost first: its inlined
    /// functions, then its function (indexes into [`Stacks::functions`]).
    pub fn frames_of(&self, loc: u32) -> impl DoubleEndedIterator<Item = u32> + '_ {
        let l = &self.locations[loc as usize];
        l.inlined.iter().copied().chain(std::iter::once(l.function))
    }

    /// Total samples.
    pub fn total(&self) -> u64 {
        self.samples.iter().map(|s| s.count).sum()
    }
}

/// One caller or callee of a [`CallEntry`].
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CallArc {
    /// The binary.
    pub image: String,
    /// The function (`NAME (inlined)` for an inlined function).
    pub symbol: String,
    /// An inlined function (see [`Function::inlined`]).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub inlined: bool,
    /// Samples of the entry's function that came through this arc.
    pub samples: u64,
    /// `samples` in percent of the entry's inclusive samples.
    pub percent: f64,
}

/// One block of the call graph: a function, who called it and whom it
/// called, in samples.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CallEntry {
    /// The binary.
    pub image: String,
    /// The function (`NAME (inlined)` for an inlined function).
    pub symbol: String,
    /// An inlined function (see [`Function::inlined`]).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub inlined: bool,
    /// Samples taken in the function itself.
    pub self_samples: u64,
    /// `self_samples` in percent of the report's samples.
    pub self_percent: f64,
    /// Samples whose stack holds the function (itself included); a
    /// recursive function counts once per sample.
    pub total: u64,
    /// `total` in percent of the report's samples.
    pub total_percent: f64,
    /// Its callers (the next frame out, at the function's innermost
    /// occurrence), most samples first. They add up to `total` less the
    /// samples where the function is the outermost frame.
    pub callers: Vec<CallArc>,
    /// Its callees (the next frame in), most samples first; with
    /// `self_samples` they add up to `total`.
    pub callees: Vec<CallArc>,
}

/// The call graph (`--callgraph`): one entry per function above the
/// threshold, most samples first (self samples, or inclusive with
/// `--children`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CallGraph {
    /// The entries, in print order.
    pub entries: Vec<CallEntry>,
    /// Entries left out by `--threshold`.
    pub below_threshold: usize,
    /// Entries are sorted and cut by inclusive samples.
    pub by_inclusive: bool,
}
