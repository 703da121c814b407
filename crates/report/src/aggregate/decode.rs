//! Decoding one chunk: the one loop over its samples and markers, generic
//! over where the samples go ([`Sink`]). The flat and the call-graph passes
//! are the same function monomorphized for [`FlatSink`] and [`StackSink`]
//! (as the sync stage's `fn sample<const G: bool>`), so the flat pass never
//! looks at a stack id and pays nothing for call graphs.
//!
//! Off-CPU reports (`--off-cpu`) are a third monomorphization axis, the
//! const `OFF`: the sample callback is empty, and each `OffCpu` marker of
//! the chosen kinds goes to the same sink as one "sample" weighted by its
//! nanoseconds ([`Sink::add_weighted`]), so every view downstream works
//! unchanged. The plain sample path is the code it was.

use std::collections::BTreeMap;

use profkit_eventlog::{ChunkRef, Cookie, CookieEntry, Event, Frame, SessionReader, StackTable};

use super::{
    Aggregate, ChunkStat, CommMark, Counting, DecodeError, Key, KeyCounts, KeyShape, StackKey,
    WeightBudget, MAX_TIMELINE_LINES, NO_STACK, NO_WEIGHTS,
};
use crate::hash::FxHashMap;
use crate::naming::jit::JitBudget;
use crate::spec::ProfileSpec;

/// Where decoded samples are counted. Both sinks keep a one-entry cache in
/// front of their map: consecutive samples of a hot loop often share their
/// key.
pub(super) trait Sink {
    /// Counts one sample.
    fn add(&mut self, key: Key, stack: Option<u32>);
    /// Counts one weighted sample (an off-CPU interval's nanoseconds),
    /// saturating.
    fn add_weighted(&mut self, key: Key, stack: Option<u32>, weight: u64);
    /// Counts what the cache still holds.
    fn flush(&mut self);
}

/// A map that counts per key.
pub(super) trait CountMap<K> {
    /// Adds `n` to `k`'s count, saturating.
    fn add_count(&mut self, k: K, n: u64);
}

impl<K: Eq + std::hash::Hash> CountMap<K> for FxHashMap<K, u64> {
    #[inline]
    fn add_count(&mut self, k: K, n: u64) {
        let c = self.entry(k).or_insert(0);
        *c = c.saturating_add(n);
    }
}

impl CountMap<Key> for KeyCounts {
    #[inline]
    fn add_count(&mut self, k: Key, n: u64) {
        self.add(k, n);
    }
}

/// A map of counts behind a one-entry cache of the last key and its run.
pub(super) struct Runs<'a, K, M: CountMap<K>> {
    pub counts: &'a mut M,
    pub last: Option<(K, u64)>,
}

impl<K: Eq + Copy, M: CountMap<K>> Runs<'_, K, M> {
    #[inline(always)]
    fn add(&mut self, key: K) {
        match &mut self.last {
            Some((k, n)) if *k == key => *n += 1,
            _ => {
                self.flush();
                self.last = Some((key, 1));
            }
        }
    }

    /// As [`Runs::add`], `weight` times (saturating: a weight is the
    /// file's word).
    #[inline]
    fn add_weighted(&mut self, key: K, weight: u64) {
        match &mut self.last {
            Some((k, n)) if *k == key => *n = n.saturating_add(weight),
            _ => {
                self.flush();
                self.last = Some((key, weight));
            }
        }
    }

    fn flush(&mut self) {
        if let Some((k, n)) = self.last.take() {
            self.counts.add_count(k, n);
        }
    }
}

/// Counts per key; stacks are never looked at.
pub(super) struct FlatSink<'a>(pub Runs<'a, Key, KeyCounts>);

impl Sink for FlatSink<'_> {
    #[inline(always)]
    fn add(&mut self, key: Key, _stack: Option<u32>) {
        self.0.add(key);
    }

    fn add_weighted(&mut self, key: Key, _stack: Option<u32>, weight: u64) {
        self.0.add_weighted(key, weight);
    }

    fn flush(&mut self) {
        self.0.flush();
    }
}

/// Counts per (key, file, stack id); the file is the one decoded.
pub(super) struct StackSink<'a>(pub Runs<'a, StackKey, FxHashMap<StackKey, u64>>, pub u32);

impl Sink for StackSink<'_> {
    #[inline(always)]
    fn add(&mut self, key: Key, stack: Option<u32>) {
        match stack {
            Some(id) => self.0.add((key, self.1, id)),
            None => self.0.add((key, 0, NO_STACK)),
        }
    }

    fn add_weighted(&mut self, key: Key, stack: Option<u32>, weight: u64) {
        match stack {
            Some(id) => self.0.add_weighted((key, self.1, id), weight),
            None => self.0.add_weighted((key, 0, NO_STACK), weight),
        }
    }

    fn flush(&mut self) {
        self.0.flush();
    }
}

/// Where `StackDef` markers go: the session's stack table, or nowhere
/// (`()`, the flat pass).
pub(super) trait StackDefs {
    /// One stack definition.
    fn define(&mut self, id: u32, frames: Vec<Frame>);
    /// One stack defined on a parent (`StackDefOn`).
    fn define_on(&mut self, id: u32, parent: u32, frames: Vec<Frame>);
}

impl StackDefs for StackTable {
    fn define(&mut self, id: u32, frames: Vec<Frame>) {
        self.insert(id, frames);
    }

    fn define_on(&mut self, id: u32, parent: u32, frames: Vec<Frame>) {
        self.insert_on(id, parent, frames);
    }
}

impl StackDefs for () {
    #[inline(always)]
    fn define(&mut self, _id: u32, _frames: Vec<Frame>) {}

    #[inline(always)]
    fn define_on(&mut self, _id: u32, _parent: u32, _frames: Vec<Frame>) {}
}

/// Counts per CPU in a small vector indexed by CPU (CPU numbers are
/// small); forged huge numbers go to a side map instead of a huge vector.
#[derive(Default)]
struct CpuCounts {
    dense: Vec<u64>,
    sparse: BTreeMap<u32, u64>,
}

impl CpuCounts {
    const DENSE_MAX: u32 = 1 << 14;

    /// Adds `n` to `cpu`'s count, saturating (counts and off-CPU weights
    /// are the file's word: a forged Lost count must not wrap).
    #[inline]
    fn add(&mut self, cpu: u32, n: u64) {
        let c = if cpu < Self::DENSE_MAX {
            let i = cpu as usize;
            if i >= self.dense.len() {
                self.dense.resize(i + 1, 0);
            }
            &mut self.dense[i]
        } else {
            self.sparse.entry(cpu).or_insert(0)
        };
        *c = c.saturating_add(n);
    }

    fn into_pairs(self) -> Vec<(u32, u64)> {
        let mut v: Vec<(u32, u64)> = self
            .dense
            .into_iter()
            .enumerate()
            .filter(|&(_, n)| n > 0)
            .map(|(c, n)| (c as u32, n))
            .collect();
        v.extend(self.sparse);
        v
    }
}

/// What one chunk gave besides its samples.
struct Marks {
    read: CpuCounts,
    kept: CpuCounts,
    lost: CpuCounts,
    buckets: Vec<(u64, u32, u64)>,
    cookies: Vec<CookieEntry>,
    comms: Vec<CommMark>,
    maps: Vec<(u32, u32, Cookie)>,
    cgroups: Vec<(u64, String)>,
    jits: Vec<profkit_eventlog::JitCode>,
    result: profkit_eventlog::Result<u64>,
}

/// One chunk of session `sess`, file `file` (its part), decoded into `acc`.
#[allow(clippy::too_many_arguments)]
pub(super) fn decode_chunk(
    acc: &mut Aggregate,
    (sess, file): (u32, u32),
    reader: &SessionReader,
    chunk: &ChunkRef,
    shape: KeyShape,
    spec: &ProfileSpec,
    filter_task: bool,
    counts: Counting,
) {
    let default_budget = JitBudget::default();
    let jit_budget = acc.jit_budget.clone();
    let jit_budget = jit_budget.as_deref().unwrap_or(&default_budget);
    let args = (
        sess,
        file,
        reader,
        chunk,
        shape,
        spec,
        filter_task,
        counts,
        jit_budget,
    );
    let marks = if shape.stacks {
        let mut table = match acc.stack_tables.remove(&file) {
            Some(t) => t,
            None => match &acc.stack_budget {
                Some(b) => StackTable::with_budget(b.clone()),
                None => StackTable::new(),
            },
        };
        let sink = StackSink(
            Runs {
                counts: &mut acc.stack_counts,
                last: None,
            },
            file,
        );
        let marks = match &acc.weight_budget {
            Some(budget) if shape.off_cpu.is_some() => {
                decode_into::<_, _, true>(sink, &mut table, budget, args)
            }
            _ => decode_into::<_, _, false>(sink, &mut table, &NO_WEIGHTS, args),
        };
        acc.stack_tables.insert(file, table);
        marks
    } else {
        let sink = FlatSink(Runs {
            counts: &mut acc.counts,
            last: None,
        });
        match &acc.weight_budget {
            Some(budget) if shape.off_cpu.is_some() => {
                decode_into::<_, _, true>(sink, &mut (), budget, args)
            }
            _ => decode_into::<_, _, false>(sink, &mut (), &NO_WEIGHTS, args),
        }
    };
    acc.add_marks(marks, (sess, file), chunk, counts);
}

/// What [`decode_into`] decodes: session, file, reader, chunk, key
/// shape, spec, whether the spec filters tasks, whether the chunk counts
/// (in the `--time` window), and the JIT markers the report may still hold.
type DecodeArgs<'a> = (
    u32,
    u32,
    &'a SessionReader,
    &'a ChunkRef,
    KeyShape,
    &'a ProfileSpec,
    bool,
    Counting,
    &'a JitBudget,
);

/// The decode loop, monomorphized per sink and per `OFF` (off-CPU
/// intervals instead of samples). The sink is taken by value so the
/// per-sample closure reaches its cache through one reference, as a local.
#[inline(always)]
fn decode_into<S: Sink, D: StackDefs, const OFF: bool>(
    mut sink: S,
    defs: &mut D,
    budget: &WeightBudget,
    (sess, file, reader, chunk, shape, spec, filter_task, counts, jit_budget): DecodeArgs<'_>,
) -> Marks {
    let mut read = CpuCounts::default();
    let mut kept = CpuCounts::default();
    let mut lost = CpuCounts::default();
    let mut buckets: FxHashMap<(u64, u32), u64> = FxHashMap::default();
    let chunk_counts = counts.chunk;
    let mut seq = 0u32;
    let mut cookies = Vec::new();
    let mut comms = Vec::new();
    let mut maps = Vec::new();
    let mut cgroups = Vec::new();
    let mut jits = Vec::new();
    let mut marker = |m: Event| match m {
        Event::CookieDef(e) => cookies.push(e),
        Event::Comm {
            pid,
            tid,
            comm,
            exec,
            ns,
        } => {
            seq += 1;
            comms.push(CommMark {
                sess,
                file,
                chunk: chunk.index,
                seq,
                pid,
                tid,
                exec,
                comm,
                ns,
            });
        }
        Event::ModuleLoad {
            cookie,
            pid: Some(pid),
            ..
        } => maps.push((sess, pid, cookie)),
        Event::Lost { cpu, count, .. } if chunk_counts => lost.add(cpu, count),
        Event::CgroupDef { id, path } => cgroups.push((id, path)),
        Event::StackDef { id, frames } => defs.define(id, frames),
        Event::StackDefOn { id, parent, frames } => defs.define_on(id, parent, frames),
        // Rare (one per JIT function hit), and kept only within the
        // report's bounds.
        Event::JitCode(j) if jit_budget.take(&j) => jits.push(j),
        _ => {}
    };
    let result = if OFF {
        let mode = shape.off_cpu.unwrap_or_default();
        reader.for_each_sample(
            chunk,
            |_| {},
            |m| match m {
                Event::OffCpu {
                    cpu,
                    pid,
                    tid,
                    kind,
                    cookie,
                    offset,
                    stack,
                    cgroup,
                    total_ns,
                    ..
                } => {
                    if !chunk_counts || !mode.wants(kind) {
                        return;
                    }
                    let w = budget.take(total_ns);
                    read.add(cpu, w);
                    if filter_task && !spec.wants_task(cpu, pid, tid) {
                        return;
                    }
                    kept.add(cpu, w);
                    let key = Key {
                        sess,
                        cpu: if shape.cpu { cpu } else { 0 },
                        pid: if shape.pid { pid } else { 0 },
                        tid: if shape.tid { tid } else { 0 },
                        cookie,
                        offset: if shape.offset { offset } else { 0 },
                        cgroup: if shape.cgroup { cgroup } else { 0 },
                    };
                    sink.add_weighted(key, stack, w);
                }
                m => marker(m),
            },
        )
    } else {
        reader.for_each_sample(
            chunk,
            |s| {
                if !counts.any {
                    return;
                }
                let t = s.time.unwrap_or(counts.mid);
                if t < counts.lo || t >= counts.hi {
                    return;
                }
                read.add(s.cpu, 1);
                if filter_task && !spec.wants_task(s.cpu, s.pid, s.tid) {
                    return;
                }
                kept.add(s.cpu, 1);
                if let Some(step) = shape.buckets {
                    let line = (t.saturating_sub(counts.origin) / step).min(MAX_TIMELINE_LINES);
                    *buckets.entry((line, s.cpu)).or_default() += 1;
                }
                let key = Key {
                    sess,
                    cpu: if shape.cpu { s.cpu } else { 0 },
                    pid: if shape.pid { s.pid } else { 0 },
                    tid: if shape.tid { s.tid } else { 0 },
                    cookie: s.cookie,
                    offset: if shape.offset { s.offset } else { 0 },
                    cgroup: if shape.cgroup { s.cgroup } else { 0 },
                };
                sink.add(key, s.stack);
            },
            &mut marker,
        )
    };
    sink.flush();
    Marks {
        read,
        kept,
        lost,
        buckets: buckets.into_iter().map(|((l, c), n)| (l, c, n)).collect(),
        cookies,
        comms,
        maps,
        cgroups,
        jits,
        result,
    }
}

impl Aggregate {
    /// Adds what a chunk gave besides its samples; a cookie's first
    /// definition (in file order) wins.
    fn add_marks(
        &mut self,
        m: Marks,
        (sess, file): (u32, u32),
        chunk: &ChunkRef,
        counts: Counting,
    ) {
        let Marks {
            read,
            kept,
            lost,
            buckets,
            cookies,
            mut comms,
            mut maps,
            cgroups,
            mut jits,
            result,
        } = m;
        self.jit_markers.append(&mut jits);
        for (id, p) in cgroups {
            self.cgroups.entry((sess, id)).or_insert(p);
        }
        for e in cookies {
            match self.cookies.get(&e.cookie) {
                Some(&(_, _, i0)) if i0 <= (file, chunk.index) => {}
                _ => {
                    self.cookies
                        .insert(e.cookie, (e, sess, (file, chunk.index)));
                }
            }
        }
        self.comms.append(&mut comms);
        self.maps.append(&mut maps);
        let read = read.into_pairs();
        if let Err(e) = result {
            self.errors.push(DecodeError {
                file,
                index: chunk.index,
                offset: chunk.offset,
                samples_before: read.iter().map(|&(_, n)| n).sum(),
                message: e.to_string(),
            });
        }
        // A chunk outside the time window is not part of the report.
        if counts.any {
            self.chunks.push(ChunkStat {
                sess,
                file,
                round: chunk.round,
                time: chunk.time,
                read,
                kept: kept.into_pairs(),
                lost: lost.into_pairs(),
                buckets,
            });
        }
    }
}
