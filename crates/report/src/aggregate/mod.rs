//! Aggregation: the parallel pass over every valid chunk of the opened
//! sessions. Each chunk is decoded on a rayon worker into per-worker hash
//! maps keyed by (cookie, offset) and whatever the report separates by
//! ([`KeyShape`]); the maps are then merged (rayon `fold`/`reduce`).
//! Markers (cookie definitions, thread names, mappings, losses, stack
//! definitions) are collected on the side with their chunk index, so file
//! order can be restored after the parallel pass. The decode loop itself is
//! in `decode.rs`; the header and timeline read from an [`Aggregate`] in
//! `summary.rs`.

mod counts;
mod decode;
pub(crate) mod summary;

pub(crate) use counts::KeyCounts;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use profkit_eventlog::{ChunkRef, Cookie, CookieEntry, FrameBudget, SessionReader, StackTable};
use rayon::prelude::*;

use crate::hash::FxHashMap;
use crate::naming::jit::{JitBudget, JitTable};
use crate::session::Session;
use crate::spec::ProfileSpec;
use crate::Progress;
use decode::decode_chunk;

/// Which sample fields the aggregation keeps (the others are zeroed, so
/// the maps stay as small as the report allows).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct KeyShape {
    pub offset: bool,
    pub pid: bool,
    pub tid: bool,
    pub cpu: bool,
    /// Keep each sample's cgroup id.
    pub cgroup: bool,
    /// Keep each sample's stack id (call graphs): samples go to
    /// [`Aggregate::stack_counts`] instead of [`Aggregate::counts`], and
    /// the `StackDef` markers to [`Aggregate::stack_tables`].
    pub stacks: bool,
    /// Count the `OffCpu` markers of these kinds, weighted by their
    /// nanoseconds, instead of samples (`--off-cpu`).
    pub off_cpu: Option<crate::options::OffCpuMode>,
    /// Count kept samples per CPU per this many ns from the session's
    /// start, by each sample's time ([`ChunkStat::buckets`],
    /// `--timeline 10ms`).
    pub buckets: Option<u64>,
}

/// Which of a chunk's samples count (the `--time` window): timed samples
/// whose time is in `lo..hi`, untimed ones (sessions before sample times)
/// when the chunk's middle `mid` is; none at all unless `any`. `chunk`:
/// the chunk's middle is in the window, so its losses and off-CPU
/// markers count.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Counting {
    pub any: bool,
    pub chunk: bool,
    pub lo: u64,
    pub hi: u64,
    pub mid: u64,
    /// For [`KeyShape::buckets`]: the session's start.
    pub origin: u64,
}

/// How far a chunk's samples may lie before its previous round or after
/// its own round time (samples resolved a round late, rings drained after
/// the round's time was taken): a chunk this close to a `--time` window
/// has its samples checked one by one.
pub(crate) const CHUNK_TIME_SLACK_NS: u64 = 2_000_000_000;

/// At most this many `--timeline` lines per session: a finer step is
/// refused before anything is decoded, and a forged sample time past the
/// end falls in the last line.
pub(crate) const MAX_TIMELINE_LINES: u64 = 1_000_000;

/// The most off-CPU time one report adds up, in ns (2⁶², 146 years of
/// thread time): far above any real session, and low enough that no sum
/// of a report's figures (rows, columns, stacks, inclusive, merged
/// sessions) can overflow a `u64`. A forged file's weights past it are not
/// counted, and the report says so.
pub(crate) const OFF_CPU_TOTAL_MAX: u64 = 1 << 62;

/// The off-CPU time still to be counted, shared by every worker of a
/// report (see [`OFF_CPU_TOTAL_MAX`]).
#[derive(Debug)]
pub(crate) struct WeightBudget {
    left: AtomicU64,
    clamped: AtomicBool,
}

/// An exhausted budget: the one the plain sample pass is handed (it never
/// takes from it).
pub(crate) static NO_WEIGHTS: WeightBudget = WeightBudget {
    left: AtomicU64::new(0),
    clamped: AtomicBool::new(false),
};

impl WeightBudget {
    fn new(total: u64) -> WeightBudget {
        WeightBudget {
            left: AtomicU64::new(total),
            clamped: AtomicBool::new(false),
        }
    }

    /// Takes up to `w` from the budget; what is taken is what counts.
    #[inline]
    pub fn take(&self, w: u64) -> u64 {
        let mut cur = self.left.load(Ordering::Relaxed);
        loop {
            let t = w.min(cur);
            if t < w {
                self.clamped.store(true, Ordering::Relaxed);
            }
            if t == 0 {
                return 0;
            }
            match self.left.compare_exchange_weak(
                cur,
                cur - t,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return t,
                Err(c) => cur = c,
            }
        }
    }

    /// Whether some weight was not counted.
    pub fn clamped(&self) -> bool {
        self.clamped.load(Ordering::Relaxed)
    }
}

/// "No stack" in a [`StackKey`]: the sample had no caller frame.
pub(crate) const NO_STACK: u32 = u32::MAX;

/// An aggregation key with call graphs: the sample's key, the file its
/// stack id is defined in (stack ids are per file: each part of a rotated
/// session numbers its stacks anew; 0 with [`NO_STACK`]) and the stack id,
/// or [`NO_STACK`].
pub(crate) type StackKey = (Key, u32, u32);

/// An aggregation key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Key {
    pub sess: u32,
    pub cpu: u32,
    pub pid: u32,
    pub tid: u32,
    pub cookie: Cookie,
    pub offset: u64,
    /// The sample's cgroup id (0: none, or not kept).
    pub cgroup: u64,
}

/// Per-chunk figures, for the timeline and for losses when there is no
/// footer.
#[derive(Clone, Debug, Default)]
pub(crate) struct ChunkStat {
    pub sess: u32,
    /// The file (part) it is in, numbered over all sessions' parts.
    pub file: u32,
    pub round: u64,
    pub time: u64,
    /// (cpu, samples read) for every sample decoded.
    pub read: Vec<(u32, u64)>,
    /// (cpu, samples kept) for samples that passed the CPU/task spec.
    pub kept: Vec<(u32, u64)>,
    /// (cpu, samples lost) from Lost markers.
    pub lost: Vec<(u32, u64)>,
    /// With [`KeyShape::buckets`]: (line, cpu, samples kept), the line
    /// being the sample's time from the session start over the step.
    pub buckets: Vec<(u64, u32, u64)>,
}

/// A chunk whose frame checked but whose payload could not be decoded to
/// the end (a writer bug or a forged file).
#[derive(Clone, Debug)]
pub(crate) struct DecodeError {
    pub file: u32,
    pub index: u64,
    pub offset: u64,
    pub samples_before: u64,
    pub message: String,
}

/// A thread name, with where it was found.
#[derive(Clone, Debug)]
pub(crate) struct CommMark {
    pub sess: u32,
    pub file: u32,
    pub chunk: u64,
    pub seq: u32,
    pub pid: u32,
    pub tid: u32,
    pub exec: bool,
    pub comm: String,
    /// The task's ids in its own pid namespace, when it had one.
    pub ns: Option<profkit_eventlog::NsTask>,
}

/// Cookie → (entry, session, (file, chunk index)) of its first definition.
pub(crate) type Cookies = FxHashMap<Cookie, (CookieEntry, u32, (u32, u64))>;

/// What the parallel pass produces.
#[derive(Default)]
pub(crate) struct Aggregate {
    pub counts: KeyCounts,
    /// With [`KeyShape::stacks`]: counts per (key, stack id). `counts` is
    /// derived from it after the parallel pass ([`Aggregate::fold_stacks`]).
    pub stack_counts: FxHashMap<StackKey, u64>,
    /// With [`KeyShape::stacks`]: each file's stack table, by file index
    /// (per part of a rotated session, not per session: stack ids are
    /// per file).
    pub stack_tables: BTreeMap<u32, StackTable>,
    /// Cookie → (entry, session, (file, chunk index)) of its first
    /// definition.
    pub cookies: Cookies,
    pub comms: Vec<CommMark>,
    /// (session, pid, cookie) of every user mapping announced.
    pub maps: Vec<(u32, u32, Cookie)>,
    /// (session, cgroup id) → path, from the sessions' `CgroupDef`s (the
    /// first met).
    pub cgroups: FxHashMap<(u32, u64), String>,
    pub chunks: Vec<ChunkStat>,
    pub errors: Vec<DecodeError>,
    /// The `StackDefOn` frame budget every stack table of this report
    /// draws on (all workers, parts and sessions): what the files read
    /// justify ([`FrameBudget::for_bytes`]).
    pub stack_budget: Option<FrameBudget>,
    /// With [`KeyShape::off_cpu`]: the off-CPU time this report may still
    /// count, shared by all workers.
    pub weight_budget: Option<Arc<WeightBudget>>,
    /// The `JitCode` markers read (duplicates included), until
    /// [`aggregate`] builds [`Aggregate::jit`] from them.
    pub jit_markers: Vec<profkit_eventlog::JitCode>,
    /// The JIT markers this report may still hold, shared by all workers.
    pub jit_budget: Option<Arc<JitBudget>>,
    /// Every `Jit` cookie's functions, from all chunks read.
    pub jit: JitTable,
}

impl Aggregate {
    fn merge(mut self, mut other: Aggregate) -> Aggregate {
        self.counts.merge(std::mem::take(&mut other.counts));
        if other.stack_counts.len() > self.stack_counts.len() {
            std::mem::swap(&mut self.stack_counts, &mut other.stack_counts);
        }
        for (k, v) in other.stack_counts {
            let c = self.stack_counts.entry(k).or_insert(0);
            *c = c.saturating_add(v);
        }
        for (file, table) in other.stack_tables {
            match self.stack_tables.get_mut(&file) {
                Some(t) => t.merge(table),
                None => {
                    self.stack_tables.insert(file, table);
                }
            }
        }
        for (c, (e, s, i)) in other.cookies {
            match self.cookies.get(&c) {
                Some(&(_, _, i0)) if i0 <= i => {}
                _ => {
                    self.cookies.insert(c, (e, s, i));
                }
            }
        }
        for (id, p) in other.cgroups {
            self.cgroups.entry(id).or_insert(p);
        }
        self.comms.append(&mut other.comms);
        self.maps.append(&mut other.maps);
        self.chunks.append(&mut other.chunks);
        self.errors.append(&mut other.errors);
        if self.stack_budget.is_none() {
            self.stack_budget = other.stack_budget;
        }
        if self.weight_budget.is_none() {
            self.weight_budget = other.weight_budget;
        }
        self.jit_markers.append(&mut other.jit_markers);
        if self.jit_budget.is_none() {
            self.jit_budget = other.jit_budget;
        }
        self
    }

    /// Fills `counts` from `stack_counts` (the flat view of a call-graph
    /// aggregation), so everything that does not look at stacks works the
    /// same either way.
    pub fn fold_stacks(&mut self) {
        let mut counts = KeyCounts::default();
        counts.reserve(self.stack_counts.len());
        for (&(k, _, _), &n) in &self.stack_counts {
            counts.add(k, n);
        }
        self.counts = counts;
    }
}

/// Decodes every valid chunk of every session in parallel and aggregates.
pub(crate) fn aggregate(
    sessions: &[Session],
    shape: KeyShape,
    spec: &ProfileSpec,
    window: Option<&crate::window::TimeSpec>,
    progress: &dyn Progress,
) -> Aggregate {
    // With a time window (`--time`), chunks outside it are read for their
    // definitions only: their samples and losses do not count. The window
    // is the whole session's (from its start, to its newest part's end);
    // each part's first chunk starts at that part's start.
    let mut work: Vec<(u32, u32, &SessionReader, &ChunkRef, Counting)> = Vec::new();
    let mut file = 0u32;
    let bytes: u64 = sessions
        .iter()
        .flat_map(|s| s.parts())
        .map(|p| p.reader().bytes().len() as u64)
        .sum();
    let budget = FrameBudget::for_bytes(bytes);
    let weights = shape
        .off_cpu
        .map(|_| Arc::new(WeightBudget::new(OFF_CPU_TOTAL_MAX)));
    let jit_budget = Arc::new(JitBudget::default());
    let empty = || Aggregate {
        stack_budget: Some(budget.clone()),
        weight_budget: weights.clone(),
        jit_budget: Some(jit_budget.clone()),
        ..Aggregate::default()
    };
    for (i, s) in sessions.iter().enumerate() {
        let (start_mono, start_unix) = s.start();
        let win = window.map(|w| w.resolve(start_mono, start_unix, s.end_monotonic_ns()));
        for part in s.parts() {
            let r = part.reader();
            let timed = r.header().event.sample_times;
            let mut prev = r.header().start_monotonic_ns;
            for c in r.chunks() {
                let mid = crate::window::middle(prev, c.time);
                let chunk_in = win.is_none_or(|w| crate::window::in_window(prev, c.time, w));
                let (lo, hi) = win.unwrap_or((0, u64::MAX));
                // A timed chunk near the window has its samples checked
                // one by one; an untimed one counts where its middle is.
                let any = chunk_in
                    || (timed
                        && c.time.saturating_add(CHUNK_TIME_SLACK_NS) >= lo
                        && prev.saturating_sub(CHUNK_TIME_SLACK_NS) < hi);
                let counts = Counting {
                    any,
                    chunk: chunk_in,
                    lo,
                    hi,
                    mid,
                    origin: start_mono,
                };
                prev = prev.max(c.time);
                work.push((i as u32, file, r, c, counts));
            }
            file += 1;
        }
    }
    progress.start("decoding chunks", work.len() as u64);
    let filter_task = !(spec.cpus.is_empty() && spec.tgids.is_empty() && spec.tids.is_empty());
    // One accumulator per worker: each one's map is merged into another at
    // the end, and with high-cardinality keys (a million distinct offsets)
    // merging costs as much as filling; every extra map also grows through
    // its own doublings (fresh pages: on a cargo build's 111,543 keys, four
    // accumulators per worker made this pass 30 ms where one makes it 21).
    let min_len = work.len() / rayon::current_num_threads().max(1);
    let mut agg = work
        .par_iter()
        .with_min_len(min_len.max(1))
        .fold(empty, |mut acc, &(sess, file, reader, chunk, counts)| {
            decode_chunk(
                &mut acc,
                (sess, file),
                reader,
                chunk,
                shape,
                spec,
                filter_task,
                counts,
            );
            progress.advance(1);
            acc
        })
        .reduce(empty, Aggregate::merge);
    // Stacks defined on a parent in a chunk decoded after theirs.
    for t in agg.stack_tables.values_mut() {
        t.settle();
    }
    // JIT functions, whatever chunk or part their markers came in.
    agg.jit = JitTable::build(std::mem::take(&mut agg.jit_markers), jit_budget.dropped());
    agg
}
