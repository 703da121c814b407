//! The sync stage's off-CPU part ([`OffCpu`]): where sampled tasks waited.
//!
//! `--off-cpu` opens a second event per CPU (`context-switches`, period 1,
//! with the switch records) whose ring holds, per context switch:
//!
//! ```text
//!  off-CPU ring of CPU c:  SAMPLE(tid X, stack)  SWITCH out(X, preempt?)  SWITCH in(Y)  ...
//!                          └─ resolved now ──────┘ (frames kept)          closes Y's interval
//! ```
//!
//! The stack sample is resolved when it is read, like an on-CPU sample's
//! (same process table, cookies, unwinder), and kept as frames, not as a
//! stack id: an interval may end in a later part of a rotated session,
//! whose stack ids start again. A switch-out opens an interval for its
//! task (blocked, or runnable when preempted), the task's next switch-in,
//! on whatever CPU, ends it.
//!
//! Rings are drained one after the other, so a task that blocked on CPU 0
//! and woke on CPU 1 may have its switch-in read first. The switch records
//! wait here until the round's horizon (the round's start less a margin:
//! every record older than that was in its ring when the rings were
//! drained), and are paired in time order. Intervals ended in a round are
//! summed per (task, kind, CPU, switch-out address, stack, cgroup) and
//! written as `OffCpu` markers at the end of the round. At a rotation the
//! open intervals are closed at the horizon in the old part and go on
//! from there in the new one; at stop every record is paired and the
//! intervals still open are closed at the stop.
//!
//! When the kernel drops records (a LOST record in an off-CPU ring), the
//! intervals open at that time may have lost their switch-in: they are
//! not measured (a later switch-in would close them over time the task
//! ran), and counted as unpaired.
//!
//! A task's last switch-outs follow its exit (it may block in the exit
//! path, then switch out for good): they are not waits, and are dropped
//! (the task's EXIT record, from the sampled event's ring, is noted here
//! for two seconds). Memory is bounded: at most [`MAX_PENDING`] records waiting
//! and [`MAX_OPEN`] open intervals; beyond, records are dropped and
//! counted (`offcpu_dropped`).

use super::SyncStage;
use crate::process::IntMap;
use profkit_eventlog::{Cookie, Event, Frame, OffCpuKind, COOKIE_UNKNOWN};
use profkit_perf::{Record, Sample};
use rustc_hash::FxHashMap;
use std::sync::Arc;

/// Switch records older than the round's start by this much are paired in
/// that round (a record is stamped just before it is written).
pub const HORIZON_MARGIN_NS: u64 = 2_000_000;
/// At most this many switch records wait to be paired.
pub const MAX_PENDING: usize = 1 << 19;
/// At most this many intervals are open at once (one per task off its CPU).
pub const MAX_OPEN: usize = 1 << 18;
/// At most this many frames are kept in the table of shared stacks (24
/// bytes each: 24 MiB).
const MAX_FRAMES_HELD: usize = 1 << 20;
/// Exits remembered (to drop a dead task's last switch-out) for this long.
const EXIT_KEEP_NS: u64 = 2_000_000_000;
/// A switch-out's stack sample is taken just before its switch record; a
/// stack older than this is not its stack.
const STACK_SLACK_NS: u64 = 1_000_000;

/// Raw switch-out stacks remembered with their resolution (a stack of 16
/// frames takes some 250 bytes here: 16 MiB at most).
const MAX_CACHED: usize = 1 << 16;

/// A hash of a switch-out's raw stack: process, mode, address, cgroup and
/// callchain (the cache's key; a hit is checked whole, [`Cached::is`]).
fn raw_key(s: &Sample<'_>) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = rustc_hash::FxHasher::default();
    (s.pid, s.cpumode, s.ip, s.cgroup, s.callchain.len()).hash(&mut h);
    for a in s.callchain.iter() {
        a.hash(&mut h);
    }
    h.finish()
}

impl Cached {
    /// True when `s` is the raw stack this entry resolved.
    fn is(&self, s: &Sample<'_>) -> bool {
        self.pid == s.pid
            && self.ip == s.ip
            && self.cpumode == s.cpumode
            && self.cgroup == s.cgroup
            && self.chain.len() == s.callchain.len()
            && self.chain.iter().copied().eq(s.callchain.iter())
    }
}

/// Where a task switched out: its address and callers, resolved. One
/// pointer (records waiting to be paired are small), compared and hashed
/// by its fields and its frames' address.
#[derive(Debug, Clone)]
pub(super) struct SwitchStack(Arc<StackInfo>);

#[derive(Debug)]
pub(super) struct StackInfo {
    kernel: bool,
    cookie: Cookie,
    offset: u64,
    /// The callers, innermost first (shared by every stack with these
    /// frames: one copy per stack met).
    frames: Arc<[Frame]>,
    cgroup: u64,
}

impl std::ops::Deref for SwitchStack {
    type Target = StackInfo;
    fn deref(&self) -> &StackInfo {
        &self.0
    }
}

impl PartialEq for SwitchStack {
    fn eq(&self, o: &Self) -> bool {
        Arc::ptr_eq(&self.0, &o.0)
            || ((self.kernel, self.cookie, self.offset, self.cgroup)
                == (o.kernel, o.cookie, o.offset, o.cgroup)
                && Arc::ptr_eq(&self.frames, &o.frames))
    }
}

impl Eq for SwitchStack {}

impl std::hash::Hash for SwitchStack {
    fn hash<H: std::hash::Hasher>(&self, h: &mut H) {
        (self.cookie, self.offset, self.cgroup).hash(h);
        (Arc::as_ptr(&self.frames) as *const Frame as usize).hash(h);
    }
}

/// A switch-out stack as it was read (pid, mode, ip, raw callchain) and
/// what it resolved to: a task switching out again and again (a lock, a
/// pipe) has the same raw stack every time, and is resolved once.
#[derive(Debug)]
struct Cached {
    pid: u32,
    cpumode: u16,
    ip: u64,
    cgroup: u64,
    chain: Vec<u64>,
    stack: SwitchStack,
}

#[derive(Debug, Clone)]
enum Dir {
    Out {
        kind: OffCpuKind,
        stack: Option<SwitchStack>,
    },
    In,
    /// The kernel dropped records of this ring before this time: any
    /// interval open then may have lost its switch-in.
    Lost,
}

#[derive(Debug, Clone)]
struct SwitchRec {
    time: u64,
    pid: u32,
    tid: u32,
    cpu: u32,
    dir: Dir,
}

#[derive(Debug, Clone)]
struct Open {
    pid: u32,
    start: u64,
    cpu: u32,
    kind: OffCpuKind,
    stack: Option<SwitchStack>,
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    pid: u32,
    tid: u32,
    cpu: u32,
    kind: OffCpuKind,
    stack: Option<SwitchStack>,
}

/// See the module docs.
#[derive(Debug, Default)]
pub(super) struct OffCpu {
    /// Some off-CPU record was met: the stage records exits for it.
    active: bool,
    /// Per CPU (indexed by CPU number, up to [`DENSE_CPUS`]; others in
    /// `last_stack_sparse`), the last switch-out stack read: (tid, time,
    /// stack).
    last_stack: Vec<Option<(u32, u64, SwitchStack)>>,
    last_stack_sparse: IntMap<u32, (u32, u64, SwitchStack)>,
    /// Switch records waiting for the horizon.
    pending: Vec<SwitchRec>,
    /// Intervals open, per thread.
    open: IntMap<u32, Open>,
    /// Intervals ended this round: (count, total ns).
    ended: FxHashMap<Key, (u64, u64)>,
    /// Per thread: when it exited, and when a task with its id was made
    /// again (ids are reused).
    exited: IntMap<u32, (u64, Option<u64>)>,
    /// Shared frames of the stacks met (one copy each), cleared when large.
    frames: FxHashMap<Arc<[Frame]>, ()>,
    /// Raw switch-out stacks met and their resolution (frame-pointer call
    /// graphs only), by a hash of the raw stack (`raw_key`); checked
    /// whole on a hit. Emptied when a mapping changes, and when full.
    cache: FxHashMap<u64, Cached>,
    /// Close open intervals at the next round's end (a rotation).
    close_at_end: bool,
    /// Waits written into this round's chunk, per CPU.
    written: std::collections::BTreeMap<u32, u64>,
    /// Switch records were dropped at the bound since the last pairing:
    /// any wait open may have lost its end (as at a kernel loss).
    overflowed: bool,
    /// Frames held by `frames` (its bound).
    frames_held: usize,
    /// This round's counts per CPU (dense below [`DENSE_CPUS`]), added to
    /// the accounting at the round's end: switch-outs, intervals, intervals
    /// without a stack. (A lookup in the accounting per switch was a tenth
    /// of a storm's cost.)
    counts: Vec<[u64; 3]>,
}

/// CPUs numbered below this keep their last stack in a vector.
const DENSE_CPUS: u32 = 4096;

impl OffCpu {
    /// Counts one of this round's events (0 switch-out, 1 interval, 2
    /// interval without a stack) on `cpu`; false for a CPU numbered past
    /// [`DENSE_CPUS`] (the caller counts it directly).
    #[inline]
    fn count(&mut self, cpu: u32, what: usize) -> bool {
        if cpu >= DENSE_CPUS {
            return false;
        }
        let i = cpu as usize;
        if i >= self.counts.len() {
            self.counts.resize(i + 1, [0; 3]);
        }
        self.counts[i][what] += 1;
        true
    }

    fn set_last(&mut self, cpu: u32, v: (u32, u64, SwitchStack)) {
        if cpu < DENSE_CPUS {
            let i = cpu as usize;
            if i >= self.last_stack.len() {
                self.last_stack.resize(i + 1, None);
            }
            self.last_stack[i] = Some(v);
        } else {
            if self.last_stack_sparse.len() >= DENSE_CPUS as usize
                && !self.last_stack_sparse.contains_key(&cpu)
            {
                // A forged file's CPU numbers: bounded.
                self.last_stack_sparse.clear();
            }
            self.last_stack_sparse.insert(cpu, v);
        }
    }

    fn take_last(&mut self, cpu: u32) -> Option<(u32, u64, SwitchStack)> {
        if cpu < DENSE_CPUS {
            self.last_stack.get_mut(cpu as usize).and_then(Option::take)
        } else {
            self.last_stack_sparse.remove(&cpu)
        }
    }

    fn intern(&mut self, frames: &[Frame]) -> Arc<[Frame]> {
        if let Some((k, _)) = self.frames.get_key_value(frames) {
            return k.clone();
        }
        if self.frames.len() >= 1 << 16 || self.frames_held + frames.len() > MAX_FRAMES_HELD {
            // Bounded by stacks and by frames: the stacks still used by
            // waiting records and open waits stay alive through them.
            self.frames.clear();
            self.frames_held = 0;
        }
        let a: Arc<[Frame]> = frames.into();
        self.frames_held += frames.len();
        self.frames.insert(a.clone(), ());
        a
    }

    /// A mapping changed: raw stacks may mean other code now.
    pub(super) fn forget_stacks(&mut self) {
        self.cache.clear();
    }

    /// How many records wait and intervals are open (status, tests).
    pub(super) fn sizes(&self) -> (usize, usize) {
        (self.pending.len(), self.open.len())
    }
}

/// What the stage holds for off-CPU recording, for status and leak tests.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OffCpuSizes {
    /// Switch records waiting to be paired.
    pub pending: usize,
    /// Intervals open.
    pub open: usize,
}

impl SyncStage {
    /// Handles one record read from CPU `cpu`'s off-CPU ring (`--off-cpu`:
    /// the context-switch event's samples and switch records); the one
    /// entry for every source of them (the rings through
    /// [`SyncStage::drain_offcpu`], an imported perf.data file directly). A
    /// sample is the stack of the task switching out; a switch-out opens an
    /// interval, a switch-in ends one; a LOST record counts
    /// `offcpu_lost`. Mapping and task records are the sampled event's
    /// ring's business and are ignored here.
    pub fn record_offcpu(&mut self, cpu: u32, rec: &Record<'_>) {
        self.off.active = true;
        match *rec {
            Record::Sample(ref s) => self.switch_stack(cpu, s),
            Record::Switch {
                out, preempt, sid, ..
            } => {
                if sid.tid == 0 {
                    // The idle task does not wait.
                    return;
                }
                let dir = if out {
                    if !self.off.count(cpu, 0) {
                        self.acct(cpu).offcpu_switches += 1;
                    }
                    let stack = match self.off.take_last(cpu) {
                        Some((tid, t, st))
                            if tid == sid.tid
                                && t <= sid.time
                                && sid.time - t <= STACK_SLACK_NS =>
                        {
                            Some(st)
                        }
                        _ => None,
                    };
                    Dir::Out {
                        kind: if preempt {
                            OffCpuKind::Runnable
                        } else {
                            OffCpuKind::Blocked
                        },
                        stack,
                    }
                } else {
                    Dir::In
                };
                if self.off.pending.len() >= MAX_PENDING {
                    self.acct(cpu).offcpu_dropped += 1;
                    self.off.overflowed = true;
                    return;
                }
                self.off.pending.push(SwitchRec {
                    time: sid.time,
                    pid: sid.pid,
                    tid: sid.tid,
                    cpu,
                    dir,
                });
            }
            Record::Lost { lost, sid, .. } | Record::LostSamples { lost, sid, .. } => {
                let a = self.acct(cpu);
                a.offcpu_lost = a.offcpu_lost.saturating_add(lost);
                if self.off.pending.len() < MAX_PENDING {
                    self.off.pending.push(SwitchRec {
                        time: sid.time,
                        pid: 0,
                        tid: 0,
                        cpu,
                        dir: Dir::Lost,
                    });
                } else {
                    self.off.overflowed = true;
                }
            }
            _ => {}
        }
    }

    /// Drains one off-CPU ring completely ([`SyncStage::record_offcpu`]
    /// for each record).
    pub fn drain_offcpu<R: profkit_perf::RecordRing>(&mut self, ring: &mut R) {
        let cpu = ring.cpu();
        let layout = self.opts.layout;
        self.off.active = true;
        let stats = ring.read_records(|raw| {
            match layout.parse(raw) {
                Ok(rec) => self.record_offcpu(cpu, &rec),
                Err(_) => self.acct(cpu).records_skipped += 1,
            }
            true
        });
        if stats.corrupt_bytes > 0 {
            self.acct(cpu).records_skipped += 1;
        }
    }

    /// Off-CPU records will come ([`SyncStage::record_offcpu`]): from now
    /// on exits are noted (a dying task's last switch-out is no wait) and
    /// rounds pair switch records. Called before the first round of an
    /// off-CPU recording (the first off-CPU record does it too, but an
    /// exit read before it would be missed).
    pub fn enable_offcpu(&mut self) {
        self.off.active = true;
    }

    /// True once off-CPU recording is on ([`SyncStage::enable_offcpu`]).
    pub fn offcpu_enabled(&self) -> bool {
        self.off.active
    }

    /// At the next round's end, close the intervals still open (at the
    /// round's horizon) and go on with them from there: the round before
    /// a rotation, so the old part counts its share of each wait.
    pub fn close_offcpu_intervals_next_round(&mut self) {
        self.off.close_at_end = true;
    }

    /// Records and intervals the off-CPU part holds.
    pub fn offcpu_sizes(&self) -> OffCpuSizes {
        let (pending, open) = self.off.sizes();
        OffCpuSizes { pending, open }
    }

    /// Reconciles the kernel's off-CPU lost counts (`PERF_FORMAT_LOST` of
    /// the context-switch events) at stop. The kernel's count above the
    /// LOST records read (records lost while
    /// the ring was full at the end, whose LOST record was never written)
    /// is added to `offcpu_lost`, and the waits open are then not measured
    /// (one of their switch-ins may be among those records).
    pub fn reconcile_offcpu(&mut self, kernel_lost: &[(u32, u64)]) {
        for &(cpu, n) in kernel_lost {
            let a = self.acct(cpu);
            a.offcpu_kernel_lost = n;
            if n > a.offcpu_lost {
                a.offcpu_lost = n;
                self.off.overflowed = true;
            }
        }
    }

    /// A task exited (its EXIT record): its next switch-out is its last.
    pub(super) fn offcpu_exit(&mut self, tid: u32, time: u64) {
        if self.off.active {
            self.off.exited.insert(tid, (time, None));
        }
    }

    /// A task was made (its FORK record): a thread id used again is a new
    /// task, whose switches from `time` on are waits again.
    pub(super) fn offcpu_fork(&mut self, tid: u32, time: u64) {
        if let Some(e) = self.off.exited.get_mut(&tid) {
            e.1 = Some(time);
        }
    }

    /// The waits written into this round's chunk, per CPU (taken).
    pub(super) fn take_offcpu_written(&mut self) -> Vec<(u32, u64)> {
        std::mem::take(&mut self.off.written).into_iter().collect()
    }

    /// The stack of the task switching out on `cpu`, resolved now.
    fn switch_stack(&mut self, cpu: u32, s: &Sample<'_>) {
        if s.tid == 0 {
            return;
        }
        let cacheable = self.opts.layout.user_stack == 0;
        let key = if cacheable { raw_key(s) } else { 0 };
        if cacheable {
            if let Some(c) = self.off.cache.get(&key).filter(|c| c.is(s)) {
                let stack = c.stack.clone();
                self.off.set_last(cpu, (s.tid, s.time, stack));
                return;
            }
        }
        if self.procs.get(s.pid).is_none() {
            // A kernel-mode switch-out's user frames need the process too
            // (and the cache would keep them unknown).
            self.ensure_process(s.pid);
        }
        let (kernel, cookie, offset) = if s.is_kernel() {
            match self.res.kernel.resolve(s.ip) {
                Some((c, off)) => (true, c, off),
                None => (true, COOKIE_UNKNOWN, 0),
            }
        } else {
            match self.procs.resolve(s.pid, s.ip, s.time) {
                Ok((c, off)) => (false, c, off),
                Err(_) if self.ensure_process(s.pid) => self
                    .procs
                    .resolve(s.pid, s.ip, s.time)
                    .map_or((false, COOKIE_UNKNOWN, 0), |(c, off)| (false, c, off)),
                Err(_) => (false, COOKIE_UNKNOWN, 0),
            }
        };
        let frames = if self.opts.layout.has_stacks() {
            self.frames_with_user(
                cpu,
                s.pid,
                s.ip,
                s.time,
                s.is_kernel(),
                s.callchain.iter(),
                s.user().as_ref(),
                false,
            );
            let f = std::mem::take(&mut self.out.frames);
            let a = self.off.intern(&f);
            self.out.frames = f;
            a
        } else {
            self.off.intern(&[])
        };
        let stack = SwitchStack(Arc::new(StackInfo {
            kernel,
            cookie,
            offset,
            frames,
            cgroup: s.cgroup,
        }));
        if cacheable {
            if self.off.cache.len() >= MAX_CACHED {
                self.off.cache.clear();
            }
            self.off.cache.insert(
                key,
                Cached {
                    pid: s.pid,
                    cpumode: s.cpumode,
                    ip: s.ip,
                    cgroup: s.cgroup,
                    chain: s.callchain.iter().collect(),
                    stack: stack.clone(),
                },
            );
        }
        self.off.set_last(cpu, (s.tid, s.time, stack));
    }

    /// Pairs the switch records up to the horizon (all of them when
    /// `last`), closes the intervals open at a rotation or at the end, and
    /// writes this round's intervals. Part of the round's end.
    pub(super) fn finish_offcpu(&mut self, last: bool) {
        if !self.off.active {
            return;
        }
        let horizon = if last {
            u64::MAX
        } else {
            self.round_time.saturating_sub(HORIZON_MARGIN_NS)
        };
        let mut pending = std::mem::take(&mut self.off.pending);
        // In time order; a switch-out before a switch-in at the same time.
        // Stable: the rings' records are runs already in time order, which
        // the stable sort merges (an unstable sort was a fifth of a storm).
        pending.sort_by_key(|r| {
            (
                r.time,
                match r.dir {
                    Dir::Out { .. } => 0,
                    Dir::In => 1,
                    Dir::Lost => 2,
                },
            )
        });
        let split = pending.partition_point(|r| r.time <= horizon);
        let later: Vec<SwitchRec> = pending.drain(split..).collect();
        let mut end_time = 0;
        for r in pending.drain(..) {
            end_time = end_time.max(r.time);
            self.pair(r);
        }
        // The buffer keeps its capacity from round to round.
        pending.extend(later);
        self.off.pending = pending;
        if std::mem::take(&mut self.off.overflowed) {
            // Records were dropped at the bound, or lost by the kernel
            // without a LOST record (reconciled at stop): a wait open now
            // may have lost its switch-in there.
            self.drop_open_waits(self.out.cur_cpu.unwrap_or(0));
        }
        if last || std::mem::take(&mut self.off.close_at_end) {
            let at = if last {
                end_time.max(self.round_time)
            } else {
                horizon
            };
            let open: Vec<(u32, Open)> = if last {
                self.off.open.drain().collect()
            } else {
                self.off
                    .open
                    .iter()
                    .filter(|(_, o)| o.start < at)
                    .map(|(&t, o)| (t, o.clone()))
                    .collect()
            };
            for (tid, o) in open {
                if at > o.start {
                    self.end_interval(tid, &o, at);
                }
                if let Some(o) = self.off.open.get_mut(&tid) {
                    o.start = at;
                }
            }
        }
        self.write_intervals();
        for (cpu, c) in std::mem::take(&mut self.off.counts).into_iter().enumerate() {
            if c != [0; 3] {
                let a = self.acct(cpu as u32);
                a.offcpu_switches += c[0];
                a.offcpu_intervals += c[1];
                a.offcpu_no_stack += c[2];
            }
        }
        // Forget exits older than any record still to come.
        let keep_after = self.round_time.saturating_sub(EXIT_KEEP_NS);
        self.off.exited.retain(|_, &mut (t, _)| t >= keep_after);
        for l in &mut self.off.last_stack {
            if l.as_ref().is_some_and(|(_, t, _)| *t < keep_after) {
                *l = None;
            }
        }
        self.off
            .last_stack_sparse
            .retain(|_, (_, t, _)| *t >= keep_after);
    }

    fn pair(&mut self, r: SwitchRec) {
        match r.dir {
            Dir::Out { kind, stack } => {
                if self
                    .off
                    .exited
                    .get(&r.tid)
                    .is_some_and(|&(exit, fork)| exit <= r.time && fork.is_none_or(|f| r.time < f))
                {
                    // A task past its EXIT record: its switches in the
                    // exit path (it may still block there, then switch
                    // out for good) are not the program's waits. Kept
                    // until pruned: there may be more than one.
                    self.off.open.remove(&r.tid);
                    return;
                }
                if self.off.open.len() >= MAX_OPEN && !self.off.open.contains_key(&r.tid) {
                    self.acct(r.cpu).offcpu_dropped += 1;
                    return;
                }
                if self
                    .off
                    .open
                    .insert(
                        r.tid,
                        Open {
                            pid: r.pid,
                            start: r.time,
                            cpu: r.cpu,
                            kind,
                            stack,
                        },
                    )
                    .is_some()
                {
                    // Two switch-outs in a row: the switch-in between was lost.
                    self.acct(r.cpu).offcpu_unpaired += 1;
                }
            }
            Dir::In => match self.off.open.remove(&r.tid) {
                Some(o) => self.end_interval(r.tid, &o, r.time),
                None => self.acct(r.cpu).offcpu_unpaired += 1,
            },
            Dir::Lost => self.drop_open_waits(r.cpu),
        }
    }

    /// Records were lost (by the kernel, or at the stage's bound): any
    /// open wait may have lost its end, and a later switch-in would close
    /// it over time the task ran. Not measured rather than measured wrong:
    /// the open waits are dropped and counted as unpaired on `cpu`.
    fn drop_open_waits(&mut self, cpu: u32) {
        let n = self.off.open.len() as u64;
        self.off.open.clear();
        self.acct(cpu).offcpu_unpaired += n;
    }

    fn end_interval(&mut self, tid: u32, o: &Open, end: u64) {
        let ns = end.saturating_sub(o.start);
        let key = Key {
            pid: o.pid,
            tid,
            cpu: o.cpu,
            kind: o.kind,
            stack: o.stack.clone(),
        };
        let e = self.off.ended.entry(key).or_insert((0, 0));
        e.0 += 1;
        e.1 = e.1.saturating_add(ns);
        if !self.off.count(o.cpu, 1) {
            self.acct(o.cpu).offcpu_intervals += 1;
        }
        if o.stack.is_none() && !self.off.count(o.cpu, 2) {
            self.acct(o.cpu).offcpu_no_stack += 1;
        }
    }

    fn write_intervals(&mut self) {
        if self.off.ended.is_empty() {
            return;
        }
        let mut ended: Vec<(Key, (u64, u64))> = self.off.ended.drain().collect();
        // A stable order, so a round's bytes do not depend on hashing.
        let order = |k: &Key| {
            let st = k.stack.as_ref();
            (
                k.pid,
                k.tid,
                k.cpu,
                k.kind,
                st.map(|s| (s.cookie, s.offset, s.cgroup)),
                st.map(|s| s.frames.clone()),
            )
        };
        ended.sort_by_key(|a| order(&a.0));
        for (k, (count, total_ns)) in ended {
            self.announce(k.pid, k.tid);
            let (kernel, cookie, offset, stack, cgroup) = match &k.stack {
                Some(s) => {
                    self.ensure_defined(s.cookie);
                    (
                        s.kernel,
                        s.cookie,
                        s.offset,
                        self.stack_id(&s.frames),
                        s.cgroup,
                    )
                }
                None => {
                    self.ensure_defined(COOKIE_UNKNOWN);
                    (true, COOKIE_UNKNOWN, 0, None, 0)
                }
            };
            let w = self.off.written.entry(k.cpu).or_default();
            *w = w.saturating_add(count);
            self.out.enc.event(&Event::OffCpu {
                cpu: k.cpu,
                pid: k.pid,
                tid: k.tid,
                kind: k.kind,
                kernel,
                cookie,
                offset,
                stack,
                cgroup,
                count,
                total_ns,
            });
        }
    }
}

#[cfg(test)]
mod tests;
