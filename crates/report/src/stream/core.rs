//! [`stream`]: the two passes (see the module notes in `mod.rs`).

use std::cell::RefCell;
use std::io;

use profkit_eventlog::{ChunkRef, Cookie, Event, LostKind, OffCpuKind, StackTable};

use super::names::{FrameId, FrameTable, Namer};
use super::order::{ReorderBuffer, Timed, REORDER_MAX};
use super::{StreamInfo, StreamMarker, StreamOffCpu, StreamSample, StreamSink, StreamSummary};
use crate::aggregate::summary::header;
use crate::aggregate::{aggregate, Aggregate, KeyShape};
use crate::error::{Error, Result};
use crate::hash::FxHashMap;
use crate::naming::apps::{Comms, Images};
use crate::naming::symbolize::symbolize;
use crate::options::{OffCpuMode, ReportOptions, SymbolSources};
use crate::session::{check_merge, Session};
use crate::spec::ProfileSpec;
use crate::Progress;

/// "No stack" in an [`Item`].
const NO_STACK: u32 = u32::MAX;

/// What an [`Item`] that is not a sample is, kept in a [`Slab`] while
/// the item waits.
#[derive(Clone, Copy, Debug)]
enum What {
    OffCpu {
        kind: OffCpuKind,
        count: u64,
        total_ns: u64,
    },
    Lost {
        sess: u32,
        kind: LostKind,
        count: u64,
    },
    Part {
        sess: u32,
        index: u32,
        number: u64,
    },
}

/// [`Item::what`]: a sample, with these flags; else [`OTHER`] and the
/// index of its [`What`] in the [`Slab`].
const KERNEL: u32 = 1;
const EXACT: u32 = 2;
const OTHER: u32 = 1 << 31;

/// The payloads of the items that are not samples, while they wait (a
/// slot is reused once its item is delivered: bounded by the buffer).
#[derive(Default)]
struct Slab {
    slots: Vec<What>,
    free: Vec<u32>,
}

impl Slab {
    fn put(&mut self, w: What) -> u32 {
        match self.free.pop() {
            Some(i) => {
                self.slots[i as usize] = w;
                i
            }
            None => {
                self.slots.push(w);
                (self.slots.len() - 1) as u32
            }
        }
    }

    fn take(&mut self, i: u32) -> What {
        self.free.push(i);
        self.slots[i as usize]
    }
}

/// One item waiting in the reorder buffer: everything it needs, as ids.
#[derive(Clone, Copy, Debug)]
struct Item {
    time: u64,
    seq: u64,
    cpu: u32,
    /// The task (thread, its names, its cgroup) in [`Threads::tasks`];
    /// unused for markers.
    task: u32,
    leaf: FrameId,
    stack: u32,
    /// [`KERNEL`] | [`EXACT`] for a sample; [`OTHER`] | slab index.
    what: u32,
}

impl Timed for Item {
    #[inline]
    fn key(&self) -> (u64, u32, u64) {
        (self.time, self.cpu, self.seq)
    }
}

/// (session, pid, tid).
type Task = (u32, u32, u32);

/// Thread names as the stream meets them: the current name of each
/// (session, pid, tid), interned.
#[derive(Default)]
struct Threads {
    names: Vec<Box<str>>,
    ids: FxHashMap<Box<str>, u32>,
    current: FxHashMap<(u32, u32, u32), u32>,
    /// Each distinct (task, names, cgroup) an item refers to.
    tasks: Vec<TaskNames>,
    task_ids: FxHashMap<TaskNames, u32>,
    /// The last (session, pid, tid, cgroup) looked up and its task.
    last: Option<((Task, u64), u32)>,
}

/// A task as items refer to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct TaskNames {
    sess: u32,
    pid: u32,
    tid: u32,
    comm: u32,
    process: u32,
    cgroup: u64,
}

impl Threads {
    fn intern(&mut self, s: &str) -> u32 {
        if let Some(&i) = self.ids.get(s) {
            return i;
        }
        let i = self.names.len() as u32;
        self.names.push(s.into());
        self.ids.insert(s.into(), i);
        i
    }

    fn rename(&mut self, sess: u32, pid: u32, tid: u32, comm: &str) {
        let id = self.intern(comm);
        self.current.insert((sess, pid, tid), id);
        self.last = None;
    }

    /// The task of a sample with its current names (a task the stream
    /// has not met a name for yet gets its name from the whole session).
    #[inline]
    fn task(&mut self, sess: u32, pid: u32, tid: u32, cgroup: u64, comms: &Comms) -> u32 {
        let key = ((sess, pid, tid), cgroup);
        if let Some((k, v)) = self.last {
            if k == key {
                return v;
            }
        }
        let (comm, process) = self.lookup(key.0, comms);
        let t = TaskNames {
            sess,
            pid,
            tid,
            comm,
            process,
            cgroup,
        };
        let v = match self.task_ids.get(&t) {
            Some(&v) => v,
            None => {
                let v = self.tasks.len() as u32;
                self.tasks.push(t);
                self.task_ids.insert(t, v);
                v
            }
        };
        self.last = Some((key, v));
        v
    }

    fn lookup(&mut self, (sess, pid, tid): (u32, u32, u32), comms: &Comms) -> (u32, u32) {
        let comm = match self.current.get(&(sess, pid, tid)) {
            Some(&c) => c,
            None => {
                let c = self.intern(comms.name(sess, pid, tid));
                self.current.insert((sess, pid, tid), c);
                c
            }
        };
        let process = if pid == tid {
            comm
        } else {
            match self.current.get(&(sess, pid, pid)) {
                Some(&c) => c,
                None => match comms.process(sess, pid) {
                    Some(p) => self.intern(p),
                    None => comm,
                },
            }
        };
        (comm, process)
    }
}

/// Distinct stacks as frame ids, by (file, stack id).
#[derive(Default)]
struct Stacks {
    index: FxHashMap<(u32, u32), u32>,
    frames: Vec<Box<[FrameId]>>,
}

impl Stacks {
    #[inline]
    fn id(
        &mut self,
        file: u32,
        stack: u32,
        tables: &FxHashMap<u32, &StackTable>,
        namer: &mut Namer<'_>,
    ) -> u32 {
        if let Some(&i) = self.index.get(&(file, stack)) {
            return i;
        }
        let ids: Box<[FrameId]> = match tables.get(&file).and_then(|t| t.get(stack)) {
            Some(frames) => frames
                .iter()
                .map(|f| namer.frame(f.cookie, f.offset, f.kernel, true))
                .collect(),
            None => Box::new([]),
        };
        let i = self.frames.len() as u32;
        self.frames.push(ids);
        self.index.insert((file, stack), i);
        i
    }

    fn get(&self, i: u32) -> &[FrameId] {
        if i == NO_STACK {
            &[]
        } else {
            &self.frames[i as usize]
        }
    }
}

/// Which samples pass the specs beyond CPU and task: per binary (`image:`)
/// and per cgroup (`cgroup:`), each answer cached.
struct Filters<'a> {
    spec: &'a ProfileSpec,
    task: bool,
    images: Option<FxHashMap<Cookie, bool>>,
    cgroups: Option<FxHashMap<(u32, u64), bool>>,
    names: &'a Images<'a>,
    cgroup_paths: &'a FxHashMap<(u32, u64), String>,
}

impl Filters<'_> {
    #[inline]
    fn wants(
        &mut self,
        sess: u32,
        cpu: u32,
        pid: u32,
        tid: u32,
        cookie: Cookie,
        cgroup: u64,
    ) -> bool {
        if self.task && !self.spec.wants_task(cpu, pid, tid) {
            return false;
        }
        if let Some(m) = &mut self.images {
            let ok = *m
                .entry(cookie)
                .or_insert_with(|| self.spec.wants_image(&self.names.match_path(cookie), None));
            if !ok {
                return false;
            }
        }
        if let Some(m) = &mut self.cgroups {
            let paths = self.cgroup_paths;
            let spec = self.spec;
            let ok = *m
                .entry((sess, cgroup))
                .or_insert_with(|| spec.wants_cgroup(&cgroup_name(paths, sess, cgroup)));
            if !ok {
                return false;
            }
        }
        true
    }
}

/// Where released items go: the sink, with what it needs to describe them.
struct Out<'a, S: ?Sized> {
    sink: &'a mut S,
    sessions: &'a [Session],
    period_ns: Option<u64>,
    scratch: Vec<FrameId>,
    summary: StreamSummary,
}

impl<S: StreamSink + ?Sized> Out<'_, S> {
    #[inline]
    fn deliver(
        &mut self,
        it: Item,
        table: &FrameTable,
        stacks: &Stacks,
        threads: &Threads,
        slab: &mut Slab,
    ) -> io::Result<()> {
        let task = threads.tasks.get(it.task as usize).copied();
        let name = |i: u32| threads.names.get(i as usize).map(|s| &**s);
        let comm = task.and_then(|t| name(t.comm)).unwrap_or("?");
        let process = task.and_then(|t| name(t.process)).unwrap_or(comm);
        let t = task.unwrap_or(TaskNames {
            sess: 0,
            pid: 0,
            tid: 0,
            comm: 0,
            process: 0,
            cgroup: 0,
        });
        if it.what & OTHER == 0 {
            self.scratch.clear();
            self.scratch.push(it.leaf);
            self.scratch.extend_from_slice(stacks.get(it.stack));
            let exact = it.what & EXACT != 0;
            self.summary.samples += 1;
            if !exact {
                self.summary.round_middle += 1;
            }
            return self.sink.sample(&StreamSample {
                session: t.sess,
                time_ns: it.time,
                time_exact: exact,
                cpu: it.cpu,
                pid: t.pid,
                tid: t.tid,
                comm,
                process,
                kernel: it.what & KERNEL != 0,
                cgroup: t.cgroup,
                weight: 1,
                period_ns: self.period_ns,
                frames: &self.scratch,
                table,
            });
        }
        match slab.take(it.what & !OTHER) {
            What::OffCpu {
                kind,
                count,
                total_ns,
            } => {
                self.scratch.clear();
                self.scratch.push(it.leaf);
                self.scratch.extend_from_slice(stacks.get(it.stack));
                self.summary.off_cpu += 1;
                self.sink.off_cpu(&StreamOffCpu {
                    session: t.sess,
                    time_ns: it.time,
                    cpu: it.cpu,
                    pid: t.pid,
                    tid: t.tid,
                    comm,
                    process,
                    kind,
                    count,
                    total_ns,
                    cgroup: t.cgroup,
                    frames: &self.scratch,
                    table,
                })
            }
            What::Lost { sess, kind, count } => {
                self.summary.markers += 1;
                self.sink.marker(&StreamMarker::Lost {
                    session: sess,
                    time_ns: it.time,
                    cpu: it.cpu,
                    kind,
                    count,
                })
            }
            What::Part {
                sess,
                index,
                number,
            } => {
                self.summary.markers += 1;
                let path = self
                    .sessions
                    .get(sess as usize)
                    .and_then(|s| s.parts().get(index as usize))
                    .map_or(std::path::Path::new(""), |p| p.reader().path());
                self.sink.marker(&StreamMarker::PartStart {
                    session: sess,
                    time_ns: it.time,
                    number,
                    path,
                })
            }
        }
    }
}

/// The middle of `(prev, time]`, without overflow.
#[inline]
fn middle(prev: u64, time: u64) -> u64 {
    prev / 2 + time / 2 + (prev % 2 + time % 2) / 2
}

/// The time one sample stands for, ns, for the clock events.
fn period_ns(s: &Session) -> Option<u64> {
    let e = &s.reader().header().event;
    if !matches!(e.name.as_str(), "cpu-clock" | "task-clock") {
        return None;
    }
    match (e.period, e.frequency) {
        (Some(p), _) if p > 0 => Some(p),
        (_, Some(f)) if f > 0 => Some(1_000_000_000 / f),
        _ => None,
    }
}

/// Streams every sample of `sessions` (and, for sessions recorded with
/// `--off-cpu`, every off-CPU aggregate; losses and part starts as
/// markers) to `sink`, in time order; see the module documentation.
/// Honours the profile specs, `--time` and the naming options of `opts`.
///
/// # Errors
/// [`Error::MergeMismatch`] when merged sessions sampled different events;
/// [`Error::Symbols`] when a symbol source option is unusable;
/// [`Error::Output`] when the sink fails (a closed pipe included).
pub fn stream<S: StreamSink + ?Sized>(
    sessions: &[Session],
    opts: &ReportOptions,
    sources: &SymbolSources,
    progress: &dyn Progress,
    sink: &mut S,
) -> Result<StreamSummary> {
    stream_with(sessions, opts, sources, progress, sink, REORDER_MAX)
}

/// [`stream`] with a reorder buffer of at most `cap` items (tests use a
/// small one).
pub(super) fn stream_with<S: StreamSink + ?Sized>(
    sessions: &[Session],
    opts: &ReportOptions,
    sources: &SymbolSources,
    progress: &dyn Progress,
    sink: &mut S,
    cap: usize,
) -> Result<StreamSummary> {
    let mut warnings = Vec::new();
    check_merge(sessions, &mut warnings)?;
    let off_cpu = sessions
        .iter()
        .flat_map(|s| s.parts())
        .any(|p| p.reader().header().event.off_cpu);
    // Pass 1: the distinct (binary, offset) and stacks, all chunks (a
    // sample near a window's edge is named whichever side it falls).
    let shape = KeyShape {
        offset: true,
        stacks: true,
        ..KeyShape::default()
    };
    let mut agg = aggregate(sessions, shape, &opts.spec, None, progress);
    agg.fold_stacks();
    let (head, _) = header(sessions, &agg, false, None, &mut warnings);
    if off_cpu {
        let mut off = aggregate(
            sessions,
            KeyShape {
                off_cpu: Some(OffCpuMode::All),
                ..shape
            },
            &opts.spec,
            None,
            progress,
        );
        off.fold_stacks();
        add_counts(&mut agg, off);
    }
    let names_opts = ReportOptions {
        symbols: true,
        inline: false,
        debug_info: false,
        stacks: true,
        ..opts.clone()
    };
    // Callers at their call instruction, and at their return address
    // where that is in no symbol (as perf names them).
    let symbols = symbolize(
        sessions,
        &agg,
        &names_opts,
        sources,
        progress,
        &mut warnings,
    )?;
    if let Some(d) = &sources.debuginfod {
        let lines = crate::naming::debuginfod::fetch_lines(&d.outcome());
        warnings.splice(0..0, lines);
    }
    // The counts were for naming: the second pass needs the definitions
    // only (cookies, threads, stacks), so the counts' memory is given back
    // first (once the warnings about binaries never defined are said).
    // (The names borrow only the cookies.)
    let images = Images::new(
        &agg.cookies,
        &agg.counts,
        opts.long_filenames,
        &mut warnings,
    );
    agg.counts = crate::aggregate::KeyCounts::default();
    agg.stack_counts = FxHashMap::default();
    let comms = Comms::new(&agg);
    let tables: FxHashMap<u32, &StackTable> =
        agg.stack_tables.iter().map(|(&f, t)| (f, t)).collect();

    let first = sessions.first();
    let (start_monotonic_ns, start_unix_ns) = first.map_or((0, 0), Session::start);
    let round_middle = sessions
        .iter()
        .flat_map(|s| s.parts())
        .any(|p| !p.reader().header().event.sample_times);
    let sync_interval_ms = first.map_or(0, |s| s.reader().header().sync_interval_ms);
    let period = first.and_then(period_ns);
    let mut namer = Namer::new(&images, &symbols);
    let out = Out {
        sink,
        sessions,
        period_ns: period,
        scratch: Vec::with_capacity(64),
        summary: StreamSummary {
            round_ms: sync_interval_ms,
            ..StreamSummary::default()
        },
    };
    out.sink
        .begin(&StreamInfo {
            header: &head,
            event: &head.event,
            period_ns: period,
            start_monotonic_ns,
            start_unix_ns,
            round_middle,
            sync_interval_ms,
            call_graph: head.call_graph.is_some(),
            off_cpu,
            frames: &namer.table,
            warnings: &warnings,
            cgroup_paths: &agg.cgroups,
        })
        .map_err(Error::Output)?;

    // Pass 2.
    let filters = Filters {
        spec: &opts.spec,
        task: !(opts.spec.cpus.is_empty()
            && opts.spec.tgids.is_empty()
            && opts.spec.tids.is_empty()),
        images: (!opts.spec.images.is_empty() || !opts.spec.exclude_images.is_empty())
            .then(FxHashMap::default),
        cgroups: (!opts.spec.cgroups.is_empty()).then(FxHashMap::default),
        names: &images,
        cgroup_paths: &agg.cgroups,
    };
    let pass = RefCell::new(Pass {
        out,
        namer: &mut namer,
        stacks: Stacks::default(),
        threads: Threads::default(),
        buf: ReorderBuffer::new(cap),
        slab: Slab::default(),
        filters,
        comms: &comms,
        tables: &tables,
        seq: 0,
        err: None,
        read: 0,
    });
    let total_chunks: u64 = sessions
        .iter()
        .flat_map(|s| s.parts())
        .map(|p| p.reader().chunks().len() as u64)
        .sum();
    progress.start("streaming samples", total_chunks);
    let mut file = 0u32;
    for (si, s) in sessions.iter().enumerate() {
        let sess = si as u32;
        let (sm, su) = s.start();
        let win = opts
            .time
            .as_ref()
            .map(|w| w.resolve(sm, su, s.end_monotonic_ns()));
        pass.borrow_mut().buf.restart();
        for (pi, part) in s.parts().iter().enumerate() {
            let r = part.reader();
            let ph = r.header();
            let mut prev = ph.start_monotonic_ns;
            {
                let mut p = pass.borrow_mut();
                let t = ph.start_monotonic_ns;
                // Parts of a rotated session only.
                if let Some(number) = ph
                    .part
                    .map(|x| x.number)
                    .filter(|_| win.is_none_or(|(lo, hi)| lo <= t && t < hi))
                {
                    p.push_other(
                        0,
                        t,
                        What::Part {
                            sess,
                            index: pi as u32,
                            number,
                        },
                    );
                }
            }
            for c in r.chunks() {
                decode(&pass, sess, file, r, c, prev, win);
                // What chunk k+1 may still bring is at most about a round
                // older than chunk k's time: release what is older than
                // chunk k−1's.
                let mut p = pass.borrow_mut();
                p.release_before(prev);
                prev = prev.max(c.time);
                if p.err.is_some() {
                    break;
                }
                progress.advance(1);
            }
            file += 1;
            if pass.borrow().err.is_some() {
                break;
            }
        }
        let mut p = pass.borrow_mut();
        p.release_all();
        if p.err.is_some() {
            break;
        }
    }
    let Pass {
        mut out,
        buf,
        err,
        read,
        ..
    } = pass.into_inner();
    if let Some(e) = err {
        return Err(Error::Output(e));
    }
    out.summary.samples_read = read;
    out.summary.out_of_order = buf.out_of_order;
    out.summary.reorder_peak = buf.peak as u64;
    // The first pass's: sessions' states, unreadable chunks (a chunk that
    // fails part-way is streamed up to its bad byte), binaries not found.
    out.summary.warnings = warnings;
    out.sink.end(&out.summary).map_err(Error::Output)?;
    progress.finish();
    Ok(out.summary)
}

/// The second pass's state, shared by the sample and marker callbacks.
struct Pass<'a, 'n, S: ?Sized> {
    out: Out<'a, S>,
    namer: &'a mut Namer<'n>,
    stacks: Stacks,
    threads: Threads,
    buf: ReorderBuffer<Item>,
    slab: Slab,
    filters: Filters<'a>,
    comms: &'a Comms,
    tables: &'a FxHashMap<u32, &'a StackTable>,
    seq: u64,
    err: Option<io::Error>,
    read: u64,
}

impl<S: StreamSink + ?Sized> Pass<'_, '_, S> {
    /// An item of `task` at `time` on `cpu`.
    #[inline]
    fn item(&mut self, cpu: u32, time: u64, task: u32, what: u32) -> Item {
        self.seq += 1;
        Item {
            time,
            seq: self.seq,
            cpu,
            task,
            leaf: 0,
            stack: NO_STACK,
            what,
        }
    }

    /// A marker (or an off-CPU item, given its task, leaf and stack after).
    fn push_other(&mut self, cpu: u32, time: u64, w: What) {
        let i = self.slab.put(w);
        let it = self.item(cpu, time, u32::MAX, OTHER | i);
        self.push(it);
    }

    #[inline]
    fn push(&mut self, it: Item) {
        if self.err.is_some() {
            return;
        }
        let Pass {
            out,
            namer,
            stacks,
            threads,
            buf,
            slab,
            ..
        } = self;
        let table = &namer.table;
        let r = buf.push(it, &mut |i| out.deliver(i, table, stacks, threads, slab));
        if let Err(e) = r {
            self.err = Some(e);
        }
    }

    /// Releases what is older than `horizon` (`u64::MAX`: everything).
    fn release_before(&mut self, horizon: u64) {
        if self.err.is_some() {
            return;
        }
        let Pass {
            out,
            namer,
            stacks,
            threads,
            buf,
            slab,
            ..
        } = self;
        let table = &namer.table;
        let mut deliver = |i| out.deliver(i, table, stacks, threads, slab);
        let r = if horizon == u64::MAX {
            buf.release_all(&mut deliver)
        } else {
            buf.release_before(horizon, &mut deliver)
        };
        if let Err(e) = r {
            self.err = Some(e);
        }
    }

    fn release_all(&mut self) {
        self.release_before(u64::MAX);
    }

    /// The leaf and stack frame ids of a sample or off-CPU item.
    #[inline]
    fn frames(
        &mut self,
        file: u32,
        cookie: Cookie,
        offset: u64,
        kernel: bool,
        stack: Option<u32>,
    ) -> (FrameId, u32) {
        let leaf = self.namer.frame(cookie, offset, kernel, false);
        let stack = match stack {
            Some(id) => self.stacks.id(file, id, self.tables, self.namer),
            None => NO_STACK,
        };
        (leaf, stack)
    }
}

/// One chunk of the second pass: its samples and markers into the buffer.
#[allow(clippy::too_many_arguments)]
fn decode<S: StreamSink + ?Sized>(
    pass: &RefCell<Pass<'_, '_, S>>,
    sess: u32,
    file: u32,
    reader: &profkit_eventlog::SessionReader,
    c: &ChunkRef,
    prev: u64,
    win: Option<(u64, u64)>,
) {
    let round_mid = middle(prev, c.time);
    let round_in = win.is_none_or(|(lo, hi)| lo <= round_mid && round_mid < hi);
    // The outcome is the chunk's decode error, already in the first pass's
    // warnings (the same bytes): the samples before it are streamed.
    let _ = reader.for_each_sample(
        c,
        |s| {
            let mut p = pass.borrow_mut();
            if p.err.is_some() {
                return;
            }
            p.read += 1;
            let (time, exact) = match s.time {
                Some(t) => (t, true),
                None => (round_mid, false),
            };
            if win.is_some_and(|(lo, hi)| time < lo || time >= hi) {
                return;
            }
            if !p
                .filters
                .wants(sess, s.cpu, s.pid, s.tid, s.cookie, s.cgroup)
            {
                return;
            }
            let comms = p.comms;
            let task = p.threads.task(sess, s.pid, s.tid, s.cgroup, comms);
            let (leaf, stack) = p.frames(file, s.cookie, s.offset, s.kernel, s.stack);
            let flags = if s.kernel { KERNEL } else { 0 } | if exact { EXACT } else { 0 };
            let mut it = p.item(s.cpu, time, task, flags);
            it.leaf = leaf;
            it.stack = stack;
            p.push(it);
        },
        |m| {
            let mut p = pass.borrow_mut();
            if p.err.is_some() {
                return;
            }
            match m {
                Event::Comm { pid, tid, comm, .. } => p.threads.rename(sess, pid, tid, &comm),
                Event::Lost { cpu, kind, count } if round_in => {
                    p.push_other(cpu, c.time, What::Lost { sess, kind, count });
                }
                Event::OffCpu {
                    cpu,
                    pid,
                    tid,
                    kind,
                    kernel,
                    cookie,
                    offset,
                    stack,
                    cgroup,
                    count,
                    total_ns,
                } if round_in => {
                    if !p.filters.wants(sess, cpu, pid, tid, cookie, cgroup) {
                        return;
                    }
                    let comms = p.comms;
                    let task = p.threads.task(sess, pid, tid, cgroup, comms);
                    let (leaf, stack) = p.frames(file, cookie, offset, kernel, stack);
                    let i = p.slab.put(What::OffCpu {
                        kind,
                        count,
                        total_ns,
                    });
                    let mut it = p.item(cpu, c.time, task, OTHER | i);
                    it.leaf = leaf;
                    it.stack = stack;
                    p.push(it);
                }
                _ => {}
            }
        },
    );
}

/// Adds the off-CPU pass's keys to the sample pass's, so both are named.
fn add_counts(agg: &mut Aggregate, off: Aggregate) {
    for (k, v) in off.stack_counts {
        let c = agg.stack_counts.entry(k).or_insert(0);
        *c = c.saturating_add(v);
    }
    agg.counts.merge(off.counts);
}

/// A cgroup's name: its path, `[cgroup ID]` unnamed, `[none]` for 0.
pub(crate) fn cgroup_name(paths: &FxHashMap<(u32, u64), String>, sess: u32, id: u64) -> String {
    match (id, paths.get(&(sess, id))) {
        (0, _) => "[none]".to_owned(),
        (_, Some(p)) => p.clone(),
        (id, None) => format!("[cgroup {id}]"),
    }
}
