//! `--format speedscope`: speedscope's file format
//! (<https://www.speedscope.app/file-format-schema.json>), for
//! `npx speedscope FILE` or <https://www.speedscope.app>.
//!
//! ```text
//! { "$schema": "https://www.speedscope.app/file-format-schema.json",
//!   "exporter": "profkit 0.1.0", "name": "cpu-clock", "activeProfileIndex": 0,
//!   "shared": { "frames": [ { "name": "memcpy (libc.so.6)", "file": "/usr/lib/x86_64-linux-gnu/libc.so.6" }, … ] },
//!   "profiles": [ { "type": "sampled", "name": "comm (pid/tid)", "unit": "nanoseconds" | "none",
//!                   "startValue": 0, "endValue": the profile's total weight,
//!                   "samples": [ [root frame, …, innermost frame], … ],   (time order)
//!                   "weights": [ the sample's period in ns (or 1), … ] }, … ] }
//! ```
//!
//! - One `sampled` profile per thread, named `comm (pid/tid)`, its samples
//!   in time order; with `--separate=cpu`, one per CPU (`CPU n`), each
//!   stack rooted in a frame naming its task, `comm (pid/tid)`.
//! - Weights: the sample's period in ns (unit `nanoseconds`) for
//!   `cpu-clock` and `task-clock`; 1 (unit `none`) for other events.
//! - With `--off-cpu[=KIND]` the profiles hold off-CPU time instead, as the
//!   report does: each aggregated off-CPU record of the chosen kinds (a
//!   task's intervals of one kind and stack in one sync round) is one
//!   sample weighted by its nanoseconds, at its switch-out stack under a
//!   leaf `[off-CPU: blocked]` or `[off-CPU: runnable]`.
//! - Frames are shared by the stream's frame ids: `symbol (image)`, or
//!   `image+0xOFFSET` when unnamed; `file` is the binary's path.
//! - `--merge`: each session's threads are profiles of their own, those of
//!   the second and later sessions named `comm (pid/tid) [session N]`.
//! - Profiles are sorted by total weight, heaviest first (the one speedscope
//!   opens).
//!
//! # Memory
//!
//! Until the end a sample costs a `u32` stack node and a `u64` weight,
//! never its frames: stacks are kept once in a prefix tree of frame indices
//! ([`StackTrie`]), frame names once per frame. The file is written at the
//! end, one profile after another, each profile's memory freed once
//! written.

use std::collections::HashMap;
use std::io::{self, Write};

use crate::hash::FxHashMap;
use crate::{OffCpuMode, Progress, ReportOptions, Session, SymbolSources};

use super::{
    stream, FrameId, FrameTable, StreamFrame, StreamInfo, StreamOffCpu, StreamSample, StreamSink,
    StreamSummary,
};

/// Writes `sessions` as a speedscope file to `out` (`profreport --format
/// speedscope`): the stream's samples (or, with
/// [`ReportOptions::off_cpu`], its off-CPU time) with the report's specs,
/// `--time`, `--merge` and parts.
///
/// # Errors
/// As [`stream`]; a write error is [`crate::Error::Output`].
pub fn write_speedscope(
    sessions: &[Session],
    opts: &ReportOptions,
    sources: &SymbolSources,
    progress: &dyn Progress,
    out: &mut dyn Write,
) -> crate::Result<StreamSummary> {
    if opts.off_cpu.is_some() {
        // As the report: off-CPU time needs a session that recorded it.
        let parts = || sessions.iter().flat_map(|s| s.parts());
        if !parts().any(|p| p.reader().header().event.off_cpu) {
            if let Some(p) = parts().next() {
                return Err(crate::Error::NoOffCpu {
                    path: p.reader().path().to_owned(),
                });
            }
        }
    }
    let mut sink = Speedscope::new(io::BufWriter::with_capacity(1 << 16, out), opts);
    stream(sessions, opts, sources, progress, &mut sink)
}

/// The root of every stack in a [`StackTrie`].
pub(super) const ROOT: u32 = u32::MAX;

/// Stacks as a prefix tree of dense frame indices: a sample keeps one
/// `u32` node, not its frames, so memory is O(samples + distinct stacks),
/// never O(samples × depth).
#[derive(Default)]
pub(super) struct StackTrie {
    /// (parent node or [`ROOT`], frame index) per node.
    nodes: Vec<(u32, u32)>,
    index: FxHashMap<(u32, u32), u32>,
}

impl StackTrie {
    /// The node of `frame` called from `parent`.
    ///
    /// # Errors
    /// Past `u32::MAX − 1` distinct nodes.
    pub(super) fn child(&mut self, parent: u32, frame: u32) -> io::Result<u32> {
        if let Some(&n) = self.index.get(&(parent, frame)) {
            return Ok(n);
        }
        let n = dense(self.nodes.len(), "stack nodes")?;
        self.nodes.push((parent, frame));
        self.index.insert((parent, frame), n);
        Ok(n)
    }

    /// (parent, frame) of `node`.
    pub(super) fn node(&self, node: u32) -> (u32, u32) {
        self.nodes[node as usize]
    }

    /// The frames of `node`, root first, into `out` (cleared first).
    pub(super) fn frames_root_first(&self, mut node: u32, out: &mut Vec<u32>) {
        out.clear();
        while node != ROOT {
            let (parent, frame) = self.nodes[node as usize];
            out.push(frame);
            node = parent;
        }
        out.reverse();
    }
}

/// `len` as the next dense `u32` index (never [`ROOT`]).
pub(super) fn dense(len: usize, what: &str) -> io::Result<u32> {
    u32::try_from(len)
        .ok()
        .filter(|&i| i != ROOT)
        .ok_or_else(|| io::Error::other(format!("more than {} distinct {what}", ROOT - 1)))
}

/// A frame's name in both viewers: `symbol (image)`, else
/// `image+0xOFFSET`.
pub(super) fn frame_name(table: &FrameTable, f: &StreamFrame) -> String {
    let image = &table.image(f.image).name;
    match table.symbol_name(f) {
        Some(sym) => format!("{sym} ({image})"),
        None => format!("{image}+{:#x}", f.offset),
    }
}

/// A thread's name in both viewers: `comm (pid/tid)`.
pub(super) fn thread_label(comm: &str, pid: u32, tid: u32) -> String {
    format!("{comm} ({pid}/{tid})")
}

/// The leaf frame of blocked off-CPU time.
pub const OFF_CPU_BLOCKED: &str = "[off-CPU: blocked]";
/// The leaf frame of runnable off-CPU time (preempted, waiting for a CPU).
pub const OFF_CPU_RUNNABLE: &str = "[off-CPU: runnable]";

/// One profile being gathered: a thread's (or a CPU's) samples in time order.
struct Track {
    key: TrackKey,
    /// The thread's latest name (a thread renamed by `exec` is shown by
    /// its new name, as in the report).
    comm: String,
    nodes: Vec<u32>,
    weights: Vec<u64>,
    total: u64,
}

/// Which profile a sample goes to: a thread, or a CPU, of one session
/// (`--merge`).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum TrackKey {
    Thread { session: u32, pid: u32, tid: u32 },
    Cpu { session: u32, cpu: u32 },
}

/// The speedscope sink: gathers samples per thread, writes the file at the
/// end ([`write_speedscope`] drives it).
pub struct Speedscope<W: Write> {
    out: W,
    name: String,
    /// Weights in ns (a time event's period) or 1 per sample (`"none"`).
    unit_ns: bool,
    by_cpu: bool,
    /// `--off-cpu`: off-CPU time of these kinds instead of samples.
    off_cpu: Option<OffCpuMode>,
    /// Our frame index per stream frame id.
    frame_ids: FxHashMap<FrameId, u32>,
    /// Our frame index per label of our own (tasks, off-CPU leaves); keyed
    /// by names from the session, so not the Fx hasher.
    labels: HashMap<String, u32>,
    /// (name, file) per frame index.
    frames: Vec<(String, Option<String>)>,
    trie: StackTrie,
    tracks: Vec<Track>,
    track_ids: FxHashMap<TrackKey, usize>,
}

impl<W: Write> Speedscope<W> {
    /// A sink writing to `out`, honouring `opts.separate.cpu` and
    /// `opts.off_cpu`.
    pub fn new(out: W, opts: &ReportOptions) -> Self {
        Self {
            out,
            name: String::new(),
            unit_ns: false,
            by_cpu: opts.separate.cpu,
            off_cpu: opts.off_cpu,
            frame_ids: FxHashMap::default(),
            labels: HashMap::new(),
            frames: Vec::new(),
            trie: StackTrie::default(),
            tracks: Vec::new(),
            track_ids: FxHashMap::default(),
        }
    }

    fn frame(&mut self, table: &FrameTable, id: FrameId) -> io::Result<u32> {
        if let Some(&i) = self.frame_ids.get(&id) {
            return Ok(i);
        }
        let i = dense(self.frames.len(), "frames")?;
        let f = table.frame(id);
        let path = &table.image(f.image).path;
        self.frames.push((
            frame_name(table, f),
            (!path.is_empty()).then(|| path.clone()),
        ));
        self.frame_ids.insert(id, i);
        Ok(i)
    }

    fn label(&mut self, label: &str) -> io::Result<u32> {
        if let Some(&i) = self.labels.get(label) {
            return Ok(i);
        }
        let i = dense(self.frames.len(), "frames")?;
        self.frames.push((label.to_owned(), None));
        self.labels.insert(label.to_owned(), i);
        Ok(i)
    }

    /// The stack node of `frames` (innermost first), under the task's
    /// frame per CPU, above `leaf`.
    fn stack(
        &mut self,
        task: Option<&str>,
        table: &FrameTable,
        frames: &[FrameId],
        leaf: Option<&str>,
    ) -> io::Result<u32> {
        let mut node = ROOT;
        if let Some(label) = task {
            let f = self.label(label)?;
            node = self.trie.child(node, f)?;
        }
        for &id in frames.iter().rev() {
            let f = self.frame(table, id)?;
            node = self.trie.child(node, f)?;
        }
        if let Some(label) = leaf {
            let f = self.label(label)?;
            node = self.trie.child(node, f)?;
        }
        Ok(node)
    }

    /// Adds one sample of `weight` at `frames` to its thread's (or CPU's)
    /// profile.
    #[allow(clippy::too_many_arguments)]
    fn add(
        &mut self,
        (session, cpu, pid, tid): (u32, u32, u32, u32),
        comm: &str,
        table: &FrameTable,
        frames: &[FrameId],
        leaf: Option<&str>,
        weight: u64,
    ) -> io::Result<()> {
        let (key, task) = if self.by_cpu {
            (
                TrackKey::Cpu { session, cpu },
                Some(thread_label(comm, pid, tid)),
            )
        } else {
            (TrackKey::Thread { session, pid, tid }, None)
        };
        let node = self.stack(task.as_deref(), table, frames, leaf)?;
        let tracks = &mut self.tracks;
        let t = *self.track_ids.entry(key).or_insert_with(|| {
            tracks.push(Track {
                key,
                comm: comm.to_owned(),
                nodes: Vec::new(),
                weights: Vec::new(),
                total: 0,
            });
            tracks.len() - 1
        });
        let track = &mut self.tracks[t];
        if track.comm != comm {
            comm.clone_into(&mut track.comm);
        }
        track.nodes.push(node);
        track.weights.push(weight);
        track.total = track.total.saturating_add(weight);
        Ok(())
    }

    /// Writes the whole file.
    fn finish(&mut self) -> io::Result<()> {
        let mut order: Vec<usize> = (0..self.tracks.len()).collect();
        // Heaviest first: speedscope opens the first profile.
        order.sort_by(|&a, &b| self.tracks[b].total.cmp(&self.tracks[a].total));
        let out = &mut self.out;
        out.write_all(
            b"{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",\"exporter\":",
        )?;
        json_str(out, concat!("profkit ", env!("CARGO_PKG_VERSION")))?;
        out.write_all(b",\"name\":")?;
        json_str(out, &self.name)?;
        out.write_all(b",\"activeProfileIndex\":0,\"shared\":{\"frames\":[")?;
        for (i, (name, file)) in self.frames.iter().enumerate() {
            if i > 0 {
                out.write_all(b",")?;
            }
            out.write_all(b"\n{\"name\":")?;
            json_str(out, name)?;
            if let Some(file) = file {
                out.write_all(b",\"file\":")?;
                json_str(out, file)?;
            }
            out.write_all(b"}")?;
        }
        out.write_all(b"]},\"profiles\":[")?;
        let unit = if self.unit_ns { "nanoseconds" } else { "none" };
        let mut stack = Vec::new();
        for (n, &t) in order.iter().enumerate() {
            let track = &mut self.tracks[t];
            if n > 0 {
                out.write_all(b",")?;
            }
            out.write_all(b"\n{\"type\":\"sampled\",\"name\":")?;
            let (mut name, session) = match track.key {
                TrackKey::Cpu { session, cpu } => (format!("CPU {cpu}"), session),
                TrackKey::Thread { session, pid, tid } => {
                    (thread_label(&track.comm, pid, tid), session)
                }
            };
            if session > 0 {
                // The second and later sessions of --merge.
                name = format!("{name} [session {}]", session + 1);
            }
            json_str(out, &name)?;
            write!(
                out,
                ",\"unit\":\"{unit}\",\"startValue\":0,\"endValue\":{},\"samples\":[",
                track.total
            )?;
            let mut last = None;
            for (i, &node) in track.nodes.iter().enumerate() {
                if i > 0 {
                    out.write_all(b",")?;
                }
                if last != Some(node) {
                    self.trie.frames_root_first(node, &mut stack);
                    last = Some(node);
                }
                out.write_all(b"[")?;
                for (j, f) in stack.iter().enumerate() {
                    if j > 0 {
                        out.write_all(b",")?;
                    }
                    write!(out, "{f}")?;
                }
                out.write_all(b"]")?;
            }
            out.write_all(b"],\"weights\":[")?;
            for (i, w) in track.weights.iter().enumerate() {
                if i > 0 {
                    out.write_all(b",")?;
                }
                write!(out, "{w}")?;
            }
            out.write_all(b"]}")?;
            // Written: its memory goes now.
            track.nodes = Vec::new();
            track.weights = Vec::new();
        }
        out.write_all(b"]}\n")?;
        out.flush()
    }
}

/// Writes `s` as a JSON string.
pub(super) fn json_str(out: &mut impl Write, s: &str) -> io::Result<()> {
    serde_json::to_writer(&mut *out, s).map_err(io::Error::from)
}

impl<W: Write> StreamSink for Speedscope<W> {
    fn begin(&mut self, info: &StreamInfo<'_>) -> io::Result<()> {
        self.name = info.event.to_owned();
        self.unit_ns = self.off_cpu.is_some() || info.period_ns.is_some();
        if let Some(mode) = self.off_cpu {
            self.name = format!("off-CPU time ({})", mode.name());
        }
        Ok(())
    }

    fn sample(&mut self, s: &StreamSample<'_>) -> io::Result<()> {
        if self.off_cpu.is_some() {
            return Ok(());
        }
        let weight = if self.unit_ns {
            s.period_ns.unwrap_or(1)
        } else {
            1
        };
        self.add(
            (s.session, s.cpu, s.pid, s.tid),
            s.comm,
            s.table,
            s.frames,
            None,
            weight,
        )
    }

    fn off_cpu(&mut self, o: &StreamOffCpu<'_>) -> io::Result<()> {
        let Some(mode) = self.off_cpu else {
            return Ok(());
        };
        if !mode.wants(o.kind) {
            return Ok(());
        }
        let leaf = match o.kind {
            profkit_eventlog::OffCpuKind::Blocked => OFF_CPU_BLOCKED,
            profkit_eventlog::OffCpuKind::Runnable => OFF_CPU_RUNNABLE,
        };
        self.add(
            (o.session, o.cpu, o.pid, o.tid),
            o.comm,
            o.table,
            o.frames,
            Some(leaf),
            o.total_ns,
        )
    }

    fn end(&mut self, _summary: &StreamSummary) -> io::Result<()> {
        self.finish()
    }
}
