//! What a report says, independent of how it is printed: the header,
//! the columns, the rows, the timeline and the warnings. Renderers only
//! format these.

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

/// The report's header.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Header {
    /// The sessions read (one, or several with `--merge`).
    pub sessions: Vec<SessionInfo>,
    /// The sampled event.
    pub event: String,
    /// Samples per second per CPU, in frequency mode.
    pub frequency: Option<u64>,
    /// Events per sample, in period mode.
    pub period: Option<u64>,
    /// Wall-clock start, ns since the Unix epoch.
    pub start_unix_ns: u64,
    /// Length of the session(s), ns.
    pub duration_ns: u64,
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
    /// Unreadable parts of the session file(s).
    pub bad_chunks: Vec<BadChunkInfo>,
}

/// What a column counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Column {
    /// All CPUs together.
    All,
    /// One CPU (`--separate=cpu`).
    Cpu(u32),
}

/// Which optional columns rows carry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Layout {
    /// One row per symbol (`-l`).
    pub symbols: bool,
    /// The application column.
    pub app: bool,
    /// tgid, tid and command columns.
    pub thread: bool,
    /// The vma column (`--show-address`).
    pub address: bool,
    /// The source location column (`--debug-info`).
    pub location: bool,
    /// Image summary with dependent images under their application.
    pub nested: bool,
}

/// One line of the report.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Row {
    /// Samples per column.
    pub samples: Vec<u64>,
    /// Percent per column.
    pub percent: Vec<f64>,
    /// Samples over all columns.
    pub total: u64,
    /// Percent of all columns together.
    pub total_percent: f64,
    /// The application (with the app column, or for a nested parent row
    /// its own name is `image`).
    pub app: Option<String>,
    /// The binary.
    pub image: String,
    /// The symbol (`-l`).
    pub symbol: Option<String>,
    /// The symbol's start address (shown with `--show-address`).
    pub vma: Option<u64>,
    /// The symbol's source file and line (`--debug-info`).
    pub location: Option<String>,
    /// Process (`--separate=thread`).
    pub tgid: Option<u32>,
    /// Thread (`--separate=thread`).
    pub tid: Option<u32>,
    /// Thread name (`--separate=thread`).
    pub comm: Option<String>,
    /// Dependent images, for a nested parent row.
    pub children: Vec<Row>,
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
    /// Rounds per line.
    pub rounds_per_line: u32,
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
    pub layout: Layout,
    /// The rows, in print order.
    pub rows: Vec<Row>,
    /// Rows left out by `--threshold`.
    pub rows_below_threshold: usize,
    /// The timeline, instead of rows (`--timeline`).
    pub timeline: Option<Timeline>,
    /// Problems worth telling: unreadable chunks, missing binaries, high loss.
    pub warnings: Vec<String>,
}
