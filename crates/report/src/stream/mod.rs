//! The sample stream: every sample of one or more sessions, one at a time,
//! **in time order**, with its thread, its time and its named call stack
//! — for `profreport --format script` (perf script's text), `jsonl`, and
//! the viewers' formats (Firefox Profiler, speedscope).
//!
//! [`stream`] reads the sessions and calls a [`StreamSink`]:
//! [`StreamSink::begin`] once, then [`StreamSink::sample`] for every
//! sample, [`StreamSink::off_cpu`] for every off-CPU aggregate of a
//! session recorded with `profctl start --off-cpu`, [`StreamSink::marker`]
//! for losses and part starts, all interleaved in time order, then
//! [`StreamSink::end`] with a [`StreamSummary`].
//!
//! ```
//! use profkit_eventlog::*;
//! use profkit_report::stream::{stream, StreamSample, StreamSink};
//! use profkit_report::{NoProgress, ReportOptions, Session, SymbolSources};
//!
//! let dir = tempfile::tempdir()?;
//! let header = SessionHeader { event: EventConfigDesc { name: "cpu-clock".into(), frequency: Some(1000), ..Default::default() }, cpus: vec![0, 1], ..Default::default() };
//! let mut w = SessionWriter::create(dir.path().join("session.pkl"), &header)?;
//! let mut enc = ChunkEncoder::new();
//! enc.event(&Event::CookieDef(CookieEntry { cookie: 7, kind: CookieKind::User, path: "/bin/app".into(), build_id: None, dev: 0, inode: 0, generation: 0, base: 0, pid: None, file: Default::default() }));
//! enc.sample(1, 10, 11, false, 7, 0x1008);
//! enc.sample(0, 10, 10, false, 7, 0x1000);
//! w.append_chunk(0, 250_000_000, enc.bytes())?;
//!
//! struct Tids(Vec<(u32, u64)>);
//! impl StreamSink for Tids {
//!     fn sample(&mut self, s: &StreamSample<'_>) -> std::io::Result<()> {
//!         self.0.push((s.tid, s.time_ns));
//!         Ok(())
//!     }
//! }
//! let session = Session::open(dir.path())?;
//! let mut sink = Tids(Vec::new());
//! let summary = stream(&[session], &ReportOptions::default(), &SymbolSources::default(), &NoProgress, &mut sink)?;
//! // Written before per-sample times: both at their round's middle, CPU 0 first.
//! assert_eq!(sink.0, [(10, 125_000_000), (11, 125_000_000)]);
//! assert_eq!(summary.samples, 2);
//! assert_eq!(summary.round_middle, 2);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # What a sample carries
//!
//! Its time (CLOCK_MONOTONIC ns, perf's clock; `time_exact` false when the
//! session was written before per-sample times and the sample is placed at
//! its round's middle, `(previous round's time + its round's time) / 2`),
//! CPU, process and thread ids, thread and process names (as the stream
//! met them: a thread renamed by `exec` is shown by its new name from the
//! rename on, in the order the chunks hold them; a sample taken on another
//! CPU within the same round as the rename may carry the other name, as
//! markers carry no time), weight (1 sample; the sampling period in ns for
//! `cpu-clock`/`task-clock` when the header tells it), and its frames,
//! innermost first: the sampled instruction, then the callers of its stack
//! (sessions recorded with `-g` or `--call-graph`). Each frame is a
//! [`FrameId`], a small integer into the [`FrameTable`] handed with every
//! item: one id per distinct (binary, offset, kernel, return address or
//! not), so a viewer interns frames by id; each frame names its image
//! ([`StreamImage`]) and its symbol ([`StreamSymbol`], also interned: one
//! id per (binary, symbol)) with the offset into it.
//!
//! # Design constraints
//!
//! - **Aggregate first, name later.** A first, parallel pass (the report's
//!   own aggregation, `crate::aggregate`) collects the distinct (binary,
//!   offset) of samples and the distinct stacks, and each binary's
//!   distinct offsets are symbolized once (`crate::naming::symbolize`);
//!   the second pass streams and only looks names up.
//! - **Constant memory in the number of samples.** The second pass holds
//!   the names (bounded by distinct addresses and stacks) and a reorder
//!   buffer of about two sync rounds of samples, never more than
//!   [`REORDER_MAX`] items, whatever the file says.
//! - **Time order from ring order.** Within a chunk (one sync round) each
//!   CPU's samples come as a run in ring order, and consecutive chunks
//!   overlap a little in time (CPUs are drained one after another; samples
//!   deferred for their mapping come a round later). The reorder buffer
//!   keeps each CPU's items as a queue while they come in order and merges
//!   the queues through a heap of their heads (log(CPUs) per item), with a
//!   heap of its own for the rare item older than its CPU's last; ordered
//!   by (time, CPU, arrival), it releases what is older than the previous
//!   chunk's round time once a chunk is read. An item that still arrives
//!   after a later one was released is delivered at once and counted in
//!   [`StreamSummary::out_of_order`].
//! - **Never panic on a session**, as the rest of the crate: a chunk that
//!   fails to decode gives the samples before its bad byte and a warning.
//!
//! # Options honoured
//!
//! From [`ReportOptions`]: the profile specs (`cpu:`, `tgid:`, `tid:`,
//! `image:` and `image-exclude:` on the sampled binary, `cgroup:`), `--time`
//! (per sample when its time is exact, else by its round's middle, which is
//! where the report's own window puts the whole round), `demangle`,
//! `long_filenames` (image names). Several sessions (`--merge`) are
//! streamed one after the other, in the order given (their clocks need not
//! be comparable: other machines, other boots); the parts of a rotated
//! session in order. Inlined frames (`--inline`) are not expanded.
//!
//! # Implementation notes
//!
//! ```text
//!  pass 1 (parallel):  chunks ─► aggregate (cookie, offset, stack) ─► symbolize distinct offsets once
//!  pass 2 (in order):  part ─► chunk ─► for_each_sample ─► time, filters, comm, frame ids
//!                                                              │
//!       ReorderBuffer (per-CPU queues merged by a heap of heads; strays) ◄┘
//!                              │ after chunk k: release time < round time of chunk k−1
//!                              ▼
//!                          StreamSink::sample / off_cpu / marker   ─► script | jsonl | viewers
//! ```

mod core;
pub mod firefox;
mod jsonl;
mod names;
mod order;
mod script;
pub mod speedscope;
#[cfg(test)]
mod tests;

use std::io;
use std::path::Path;

use profkit_eventlog::{LostKind, OffCpuKind};

pub use self::core::stream;
pub use jsonl::{write_jsonl, JsonlSink};
pub use names::{FrameId, FrameTable, ImageId, StreamFrame, StreamImage, StreamSymbol, SymbolId};
pub use order::REORDER_MAX;
pub use script::{write_script, ScriptSink};

/// What the stream is about, given to [`StreamSink::begin`].
#[derive(Clone, Debug)]
pub struct StreamInfo<'a> {
    /// The report's header over the same sessions (event, rate, call-graph
    /// mode, sessions, start, losses), built before streaming.
    pub header: &'a crate::Header,
    /// The sampled event's name (`cpu-clock`).
    pub event: &'a str,
    /// The time one sample stands for, in ns, for `cpu-clock` and
    /// `task-clock` (`1e9 / frequency`, or the period itself, which these
    /// events count in ns); `None` for other events.
    pub period_ns: Option<u64>,
    /// The first session's start on CLOCK_MONOTONIC (sample times are on
    /// this clock), ns.
    pub start_monotonic_ns: u64,
    /// The same instant, ns since the Unix epoch.
    pub start_unix_ns: u64,
    /// Some part of some session was written without per-sample times
    /// (before format version 6, or its header's `sample_times` false): its
    /// samples are placed at their round's middle
    /// ([`StreamSample::time_exact`] false).
    pub round_middle: bool,
    /// The sync interval of the first session, ms (the round length).
    pub sync_interval_ms: u32,
    /// Whether any session was recorded with call stacks.
    pub call_graph: bool,
    /// Whether any session was recorded with `--off-cpu` (then
    /// [`StreamSink::off_cpu`] may be called).
    pub off_cpu: bool,
    /// The frames named so far: empty at the start (frames are named as
    /// the stream first meets them, from the first pass's symbolization);
    /// the table only grows, and every item carries it.
    pub frames: &'a FrameTable,
    /// The report's warnings so far (binaries not found, sessions still
    /// recording, ...).
    pub warnings: &'a [String],
    /// The cgroups' paths per (session, id): see [`StreamInfo::cgroup_name`].
    pub(crate) cgroup_paths: &'a crate::hash::FxHashMap<(u32, u64), String>,
}

impl StreamInfo<'_> {
    /// The name of cgroup `id` of session `session` (a sample's
    /// [`StreamSample::cgroup`]), as `--separate=cgroup` and the `cgroup:`
    /// spec name it: its path (`/system.slice/x.service`), `[cgroup ID]`
    /// when the session never named it, `[none]` for 0 (no cgroup).
    pub fn cgroup_name(&self, session: u32, id: u64) -> String {
        crate::stream::core::cgroup_name(self.cgroup_paths, session, id)
    }
}

/// One sample, given to [`StreamSink::sample`]. Borrowed: a sink copies
/// what it keeps.
#[derive(Clone, Copy, Debug)]
pub struct StreamSample<'a> {
    /// Which session (index into the sessions given, `--merge`).
    pub session: u32,
    /// When it was taken: CLOCK_MONOTONIC ns.
    pub time_ns: u64,
    /// False when the session was written before per-sample times: the
    /// time is the middle of the sample's sync round.
    pub time_exact: bool,
    /// The CPU it was taken on.
    pub cpu: u32,
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// The thread's name (`?` when the session never named it).
    pub comm: &'a str,
    /// The process's name (its main thread's, else the thread's).
    pub process: &'a str,
    /// Taken in kernel mode.
    pub kernel: bool,
    /// The cgroup id (0: none recorded).
    pub cgroup: u64,
    /// What it counts: 1 sample.
    pub weight: u64,
    /// The time a sample stands for, ns (as [`StreamInfo::period_ns`]).
    pub period_ns: Option<u64>,
    /// Frames, innermost first: the sampled instruction, then its callers.
    pub frames: &'a [FrameId],
    /// Where the frames are described.
    pub table: &'a FrameTable,
}

impl<'a> StreamSample<'a> {
    /// The frames with their descriptions, innermost first.
    pub fn frames(&self) -> impl Iterator<Item = (FrameId, &'a StreamFrame)> + 'a {
        let table = self.table;
        self.frames.iter().map(move |&id| (id, table.frame(id)))
    }
}

/// Off-CPU time of one thread in one sync round (sessions recorded with
/// `profctl start --off-cpu`): `count` intervals of `kind`, `total_ns` in
/// all, that began with a switch-out at `frames` (innermost first, named
/// as a sample's). Given to [`StreamSink::off_cpu`] at its round's time
/// (the intervals ended in that round).
#[derive(Clone, Copy, Debug)]
pub struct StreamOffCpu<'a> {
    /// Which session.
    pub session: u32,
    /// The round's time, CLOCK_MONOTONIC ns.
    pub time_ns: u64,
    /// The CPU the switch-outs were on.
    pub cpu: u32,
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// The thread's name.
    pub comm: &'a str,
    /// The process's name.
    pub process: &'a str,
    /// Blocked or runnable.
    pub kind: OffCpuKind,
    /// Intervals (at least 1).
    pub count: u64,
    /// Their total length, ns.
    pub total_ns: u64,
    /// The cgroup id (0: none recorded).
    pub cgroup: u64,
    /// The switch-out's frames, innermost first.
    pub frames: &'a [FrameId],
    /// Where the frames are described.
    pub table: &'a FrameTable,
}

/// Something that happened, given to [`StreamSink::marker`] in time order.
#[derive(Clone, Copy, Debug)]
#[non_exhaustive]
pub enum StreamMarker<'a> {
    /// `count` samples lost on `cpu` in the round ending at `time_ns`.
    Lost {
        /// Which session.
        session: u32,
        /// The round's time, CLOCK_MONOTONIC ns.
        time_ns: u64,
        /// The CPU.
        cpu: u32,
        /// Why.
        kind: LostKind,
        /// How many.
        count: u64,
    },
    /// A part of a rotated session begins (also the first).
    PartStart {
        /// Which session.
        session: u32,
        /// The part's start, CLOCK_MONOTONIC ns.
        time_ns: u64,
        /// Its number, from 1.
        number: u64,
        /// Its file.
        path: &'a Path,
    },
}

impl StreamMarker<'_> {
    /// The marker's time, CLOCK_MONOTONIC ns.
    pub fn time_ns(&self) -> u64 {
        match *self {
            StreamMarker::Lost { time_ns, .. } | StreamMarker::PartStart { time_ns, .. } => time_ns,
        }
    }
}

/// What a stream delivered, given to [`StreamSink::end`] and returned by
/// [`stream`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StreamSummary {
    /// Samples delivered.
    pub samples: u64,
    /// Samples decoded (before specs and the time window).
    pub samples_read: u64,
    /// Off-CPU items delivered.
    pub off_cpu: u64,
    /// Markers delivered.
    pub markers: u64,
    /// Samples delivered with a round-middle time (sessions written before
    /// per-sample times); see [`StreamSummary::notes`].
    pub round_middle: u64,
    /// The sync interval of those sessions, ms (for the note).
    pub round_ms: u32,
    /// Items delivered after an item with a later time: they arrived
    /// beyond what the reorder buffer holds (a sample deferred twice, or a
    /// forged file).
    pub out_of_order: u64,
    /// The most items the reorder buffer held at once.
    pub reorder_peak: u64,
    /// What the report would warn of over the same sessions: sessions
    /// still recording, unreadable chunks (a chunk that fails part-way is
    /// streamed up to its bad byte), binaries not found.
    pub warnings: Vec<String>,
}

impl StreamSummary {
    /// What a reader of the output should be told (on stderr, or in a
    /// summary field): the round-middle placement, items out of order,
    /// and the warnings.
    pub fn notes(&self) -> Vec<String> {
        let mut v = Vec::new();
        if self.round_middle > 0 {
            v.push(round_middle_note(self.round_ms));
        }
        if self.out_of_order > 0 {
            v.push(format!(
                "{} items arrived after later ones beyond the reorder buffer and are out of time \
                 order",
                self.out_of_order
            ));
        }
        v.extend(self.warnings.iter().cloned());
        v
    }
}

/// The note for samples placed at their round's middle.
pub fn round_middle_note(round_ms: u32) -> String {
    format!(
        "this session was written before per-sample times: each sample is placed at the middle \
         of its {round_ms} ms round"
    )
}

/// Where the stream goes. Every method has a default that does nothing, so
/// a sink implements what it uses. Errors stop the stream and come back
/// from [`stream`] as [`crate::Error::Output`].
pub trait StreamSink {
    /// Called once, before any item.
    fn begin(&mut self, _info: &StreamInfo<'_>) -> io::Result<()> {
        Ok(())
    }
    /// One sample, in time order with the other items.
    fn sample(&mut self, _sample: &StreamSample<'_>) -> io::Result<()> {
        Ok(())
    }
    /// One off-CPU aggregate, in time order with the other items.
    fn off_cpu(&mut self, _off: &StreamOffCpu<'_>) -> io::Result<()> {
        Ok(())
    }
    /// One marker, in time order with the other items.
    fn marker(&mut self, _marker: &StreamMarker<'_>) -> io::Result<()> {
        Ok(())
    }
    /// Called once, after every item (also for an empty stream).
    fn end(&mut self, _summary: &StreamSummary) -> io::Result<()> {
        Ok(())
    }
}

impl<S: StreamSink + ?Sized> StreamSink for &mut S {
    fn begin(&mut self, info: &StreamInfo<'_>) -> io::Result<()> {
        (**self).begin(info)
    }
    fn sample(&mut self, sample: &StreamSample<'_>) -> io::Result<()> {
        (**self).sample(sample)
    }
    fn off_cpu(&mut self, off: &StreamOffCpu<'_>) -> io::Result<()> {
        (**self).off_cpu(off)
    }
    fn marker(&mut self, marker: &StreamMarker<'_>) -> io::Result<()> {
        (**self).marker(marker)
    }
    fn end(&mut self, summary: &StreamSummary) -> io::Result<()> {
        (**self).end(summary)
    }
}

/// The stream formats of `profreport --format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamFormat {
    /// `perf script -F comm,pid,tid,cpu,time,event,ip,sym,dso`'s text.
    Script,
    /// One JSON object per line per sample (and per off-CPU aggregate).
    Jsonl,
    /// The Firefox Profiler's processed format (JSON).
    Firefox,
    /// speedscope's file format (JSON).
    Speedscope,
}

impl StreamFormat {
    /// The values `--format` accepts for streams.
    pub const ALLOWED: &'static str = "script, jsonl, firefox, speedscope";

    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            StreamFormat::Script => "script",
            StreamFormat::Jsonl => "jsonl",
            StreamFormat::Firefox => "firefox",
            StreamFormat::Speedscope => "speedscope",
        }
    }
}

impl std::str::FromStr for StreamFormat {
    type Err = crate::Error;
    fn from_str(s: &str) -> crate::Result<Self> {
        Ok(match s {
            "script" => StreamFormat::Script,
            "jsonl" => StreamFormat::Jsonl,
            "firefox" | "gecko" => StreamFormat::Firefox,
            "speedscope" => StreamFormat::Speedscope,
            _ => {
                return Err(crate::Error::BadValue {
                    option: "--format",
                    value: s.to_owned(),
                    allowed: Self::ALLOWED.to_owned(),
                })
            }
        })
    }
}

/// Streams `sessions` in `format` to `out` (the one entry the CLI calls).
///
/// # Errors
/// As [`stream`].
pub fn write_stream(
    format: StreamFormat,
    sessions: &[crate::Session],
    opts: &crate::ReportOptions,
    sources: &crate::SymbolSources,
    progress: &dyn crate::Progress,
    out: &mut dyn io::Write,
) -> crate::Result<StreamSummary> {
    match format {
        StreamFormat::Script => write_script(sessions, opts, sources, progress, out),
        StreamFormat::Jsonl => write_jsonl(sessions, opts, sources, progress, out),
        StreamFormat::Firefox => firefox::write_firefox(sessions, opts, sources, progress, out),
        StreamFormat::Speedscope => {
            speedscope::write_speedscope(sessions, opts, sources, progress, out)
        }
    }
}
