//! The sync stage: one round drains every CPU's ring into one chunk of the
//! global event buffer, resolving samples to (cookie, offset) as it goes.
//!
//! # Implementation notes
//!
//! ```text
//!  round R                                                     chunk R
//!  ───────────────────────────────────────────────────────────────────────
//!  pending markers (lost to overflow / disk full, dropped metadata)  ─┐
//!  cpu 0 ring: [S S MMAP2 S LOST S ...]  → CpuSwitch(0) Task Mode      │
//!                                          Cookie S S ModuleLoad S     │
//!                                          Lost(Ring) S ...            ├─► encoded
//!  cpu 1 ring: [S COMM S EXIT ...]       → CpuSwitch(1) ... Comm ...   │   bytes
//!  deferred samples (mapping seen later on another CPU; one retry in   │
//!  round R+1 for those whose FORK/MMAP2 came after its ring's drain)   │
//!  Lost(NoMapping / NoTask) per CPU, then end_round(R)                ─┘
//! ```
//!
//! A ring with nothing to read (an idle CPU) adds nothing to the chunk,
//! not even its `CpuSwitch`: per round, idle CPUs cost a look at their
//! ring's head. Only the ring's tail is touched (the kernel keeps writing
//! at the head).
//! Task, mode and cookie switches are written only when they change (the
//! encoder tracks them); cookie definitions and thread names are written
//! lazily, the first time a chunk needs them after a switch, so a session
//! holds each once (and again after `reset`, which starts a new file).
//! A user sample whose mapping is not known yet is deferred to the end of
//! the round, since its MMAP2 may sit in a CPU ring drained after its own;
//! if still unknown it waits one more round (the record may have been
//! written to a ring already drained this round), then counts as lost.
//! An exited process stays in the table until the end of the next round:
//! samples it left in another CPU's ring (drained earlier in this round,
//! but written after that drain) still find their task and binaries.
//!
//! A source of records other than rings (an imported perf.data file) runs
//! the same round by hand: [`SyncStage::begin_round`], then per CPU
//! [`SyncStage::begin_cpu`] and [`SyncStage::record`] for each of that
//! CPU's records, then [`SyncStage::finish_round`] (for its last round,
//! [`SyncStage::finish_final_round`]).
//!
//! What the stage reads from the machine it reads through its
//! [`HostProbe`] (`crate::probe`): [`crate::ProcfsProbe`] live, [`NullProbe`]
//! (the default, [`SyncStage::new`]) for imports and tests, which then
//! resolve from their records alone.
//!
//! Parts, each a field of [`SyncStage`] with its own module:
//! `stage/resolving.rs` (`Resolving`: kernel maps, cookies
//! and which the file has defined, files' build-ids and claims, anonymous
//! code's owners, cgroups, the probe), `stage/emitting.rs`
//! (`Emitting`: the encoder, current CPU/task/cookie, chunk
//! metadata, the stack table), `stage/accounting.rs`
//! (`Accounting`: per-CPU counts, parts, losses waiting for
//! their markers, unattributed examples). Code working on the stage as a
//! whole: `stage/maps.rs` (mapping records and `/proc` maps → cookies),
//! `stage/stacks.rs` (call stacks, DWARF unwinding), `stage/tasks.rs`
//! (processes, threads and their names, whose tables stay fields of the
//! stage); this file keeps the record dispatch, samples, rounds and
//! deferral.
//!
//! Off-CPU intervals (`--off-cpu`) are a part of their own
//! (`stage/offcpu.rs`: switch-out stacks resolved like samples', switch
//! records paired in time order up to the round's horizon, intervals
//! summed per task and stack and written as `OffCpu` markers), fed by
//! [`SyncStage::record_offcpu`] from the off-CPU rings, writing through
//! `Emitting` (stacks through its stack table) and counting in
//! `Accounting`. JIT dumps belong to resolving (their code regions become
//! cookies like anonymous code's, the dump files read through the probe).

use crate::probe::{HostProbe, NullProbe};
use crate::process::{IntMap, ProcessTable, Unresolved};
use crate::unwind::{DebugFrameSources, DwarfUnwinder};
use accounting::{Accounting, LostKindKey};
use emitting::Emitting;
pub use offcpu::{OffCpuSizes, HORIZON_MARGIN_NS, MAX_OPEN, MAX_PENDING};
use profkit_eventlog::{Event, LostKind};
use profkit_perf::{Layout, RawRecord, Record, RecordRing};
use resolving::Resolving;

mod accounting;
mod emitting;
mod jit;
mod maps;
mod offcpu;
mod resolving;
mod stacks;
mod tasks;
use stacks::DeferredUser;

/// Options of a sync stage.
#[derive(Debug, Clone)]
pub struct SyncOptions {
    /// The record layout the rings carry.
    pub layout: Layout,
    /// Where DWARF unwinding looks for the separate debug file of a binary
    /// without unwind tables of its own (`--call-graph dwarf` only).
    pub debug_frame: DebugFrameSources,
}

impl SyncOptions {
    /// Options for rings of `layout`, separate debug files looked for
    /// where the system keeps them ([`DebugFrameSources::default`]).
    pub fn new(layout: Layout) -> Self {
        SyncOptions {
            layout,
            debug_frame: DebugFrameSources::default(),
        }
    }
}

/// One round's output: the encoded events plus what is needed if the chunk
/// has to be dropped (per-CPU sample counts and the metadata to re-emit).
#[derive(Debug, Clone, Default)]
pub struct Chunk {
    /// Round number.
    pub round: u64,
    /// CLOCK_MONOTONIC time of the round, ns.
    pub time: u64,
    /// The encoded event stream.
    pub bytes: Vec<u8>,
    /// Samples written per CPU.
    pub per_cpu: Vec<(u32, u64)>,
    /// Metadata events (cookie and stack definitions, names, module loads)
    /// in this chunk.
    pub meta: Vec<Event>,
    /// Loss markers carried over from earlier dropped chunks (re-carried
    /// if this chunk is dropped too).
    pub carried_lost: Vec<(u32, LostKind, u64)>,
    /// Off-CPU waits written per CPU (`OffCpu` markers' counts): counted
    /// as dropped if the chunk is.
    pub offcpu: Vec<(u32, u64)>,
}

impl Chunk {
    /// Total samples in the chunk.
    pub fn samples(&self) -> u64 {
        self.per_cpu.iter().map(|c| c.1).sum()
    }
}

#[derive(Debug, Clone)]
struct Deferred {
    cpu: u32,
    pid: u32,
    tid: u32,
    ip: u64,
    time: u64,
    /// The raw callchain (empty without call graphs).
    chain: Vec<u64>,
    /// The copied user registers and stack (DWARF call graphs), unwound
    /// when the sample resolves.
    user: Option<DeferredUser>,
    /// Already retried at the end of an earlier round.
    carried: bool,
    /// The sample's cgroup (0: none or not recorded).
    cgroup: u64,
}

/// How many entries the stage's per-task tables hold.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TableSizes {
    /// Processes in the process table.
    pub processes: usize,
    /// Threads with a name of their own.
    pub threads: usize,
    /// Tasks whose names were written to the current file.
    pub announced: usize,
    /// Pids known to be absent from `/proc` (a negative cache, capped).
    pub negative: usize,
}

/// The sync stage. See the module docs.
#[derive(Debug)]
pub struct SyncStage {
    opts: SyncOptions,
    procs: ProcessTable,
    /// Per task: the time of the newest COMM record applied. Rings are
    /// drained one after the other, so an exec read later may be older
    /// (`sh` exec'ing `node` on another CPU); an older name is dropped.
    comm_time: IntMap<u32, u64>,
    /// Pids known to be absent from `/proc` (a negative cache).
    no_proc: IntMap<u32, ()>,
    /// Pids whose `/proc` maps were read again this round.
    refreshed: IntMap<u32, ()>,
    /// Tasks whose names the current file holds.
    announced: IntMap<u32, ()>,
    round: u64,
    round_time: u64,
    deferred: Vec<Deferred>,
    /// The DWARF unwinder, made at the first copied user stack.
    unwinder: Option<Box<DwarfUnwinder>>,
    /// Kernel maps, cookies, files, cgroups and the host probe.
    res: Resolving,
    /// The encoder and what it has written.
    out: Emitting,
    /// Counts and losses.
    acc: Accounting,
    /// Off-CPU intervals (`--off-cpu`).
    off: offcpu::OffCpu,
    /// The processes' JIT dumps (`crate::jit`).
    jit: crate::jit::JitDumps,
}

impl SyncStage {
    /// A stage with empty tables that reads nothing from the machine
    /// ([`NullProbe`]): tests, imported recordings.
    pub fn new(opts: SyncOptions) -> Self {
        Self::with_probe(opts, NullProbe)
    }

    /// A stage with empty tables that reads the machine through `probe`
    /// (a live session: [`crate::ProcfsProbe`]).
    pub fn with_probe(opts: SyncOptions, probe: impl HostProbe + 'static) -> Self {
        let layout_cgroup = opts.layout.cgroup;
        Self {
            opts,
            procs: ProcessTable::default(),
            comm_time: IntMap::default(),
            no_proc: IntMap::default(),
            refreshed: IntMap::default(),
            announced: IntMap::default(),
            round: 0,
            round_time: 0,
            deferred: Vec::new(),
            unwinder: None,
            res: Resolving::new(Box::new(probe), layout_cgroup),
            out: Emitting::new(),
            acc: Accounting::default(),
            off: offcpu::OffCpu::default(),
            jit: Default::default(),
        }
    }

    /// The process table (for status and tests).
    pub fn processes(&self) -> &ProcessTable {
        &self.procs
    }

    /// Sizes of the stage's per-task tables, for status and leak tests.
    pub fn table_sizes(&self) -> TableSizes {
        TableSizes {
            processes: self.procs.len(),
            threads: self.procs.thread_count(),
            announced: self.announced.len(),
            negative: self.no_proc.len(),
        }
    }

    /// Starts a new part of a rotated session (its own file): cookie,
    /// stack and cgroup definitions and thread names are written again
    /// when next needed, the part's accounting starts from zero (the
    /// session's goes on), and round numbers go on. Samples waiting for
    /// their mapping and losses not yet written go into the new part.
    /// Call it between rounds, after the old part's chunks are written
    /// (or dropped and accounted).
    pub fn new_part(&mut self) {
        self.res.emitted = Default::default();
        self.res.cgroups.reset();
        self.out.stacks.restart();
        self.announced.clear();
        self.jit.reset();
        // Definitions of dropped chunks belonged to the old part; the new
        // one writes its own on first use.
        self.out.pending_meta.clear();
        self.acc.part_base = self.acc.acct.clone();
        self.acc.part_first_round = self.round;
    }

    /// Rounds completed.
    pub fn rounds(&self) -> u64 {
        self.round
    }

    /// Starts a round: clears the chunk and writes the markers left over
    /// from chunks that could not be stored.
    pub fn begin_round(&mut self, now: u64) {
        if let Some(u) = &mut self.unwinder {
            u.begin_round();
        }
        self.out.enc.clear();
        self.out.meta.clear();
        self.round_time = now;
        self.out.cur_cpu = None;
        for e in std::mem::take(&mut self.out.pending_meta) {
            self.marker(e);
        }
        self.acc.carried_lost = std::mem::take(&mut self.acc.pending_lost);
        for &(cpu, kind, count) in &self.acc.carried_lost {
            self.out.enc.event(&Event::Lost { cpu, kind, count });
        }
        // What runtimes wrote before this round's samples are read (a
        // generation starting before them is known to them).
        self.read_jit(false);
        for (m, e) in self.res.probe.new_modules(&mut self.res.kernel) {
            self.res.known.insert(e.cookie, e);
            self.ensure_defined(m.cookie);
            self.marker(Event::ModuleLoad {
                cookie: m.cookie,
                start: m.module.base,
                end: m.module.base + m.module.size,
                pgoff: 0,
                pid: None,
            });
        }
    }

    /// Drains one ring completely. An empty ring (an idle CPU) writes
    /// nothing, not even its CPU-switch marker: on 256 CPUs of which most
    /// are idle, a round costs what the busy ones hold. Its accounting
    /// exists from its first drain on (the footer lists every CPU).
    pub fn drain<R: RecordRing>(&mut self, ring: &mut R) {
        let cpu = ring.cpu();
        if ring.pending() == 0 {
            self.acct(cpu);
            return;
        }
        self.begin_cpu(cpu);
        let layout = self.opts.layout;
        let stats = ring.read_records(|raw: RawRecord<'_>| {
            self.handle(cpu, layout, raw);
            true
        });
        if stats.corrupt_bytes > 0 {
            self.acct(cpu).records_skipped += 1;
        }
    }

    /// Ends the round: retries deferred samples, writes per-CPU loss
    /// markers, retires exited processes; returns the chunk. A sample still
    /// unresolved waits one more round, once: the FORK or MMAP2 it needs
    /// may have been written to a CPU's ring after that ring was drained.
    /// The last round of a session is [`SyncStage::finish_final_round`].
    pub fn finish_round(&mut self) -> Chunk {
        self.finish(true)
    }

    /// [`SyncStage::finish_round`] for the last round of a session (stop,
    /// the end of an import): every deferred sample is resolved now or
    /// counted as lost, none waits.
    pub fn finish_final_round(&mut self) -> Chunk {
        self.finish(false)
    }

    fn finish(&mut self, carry: bool) -> Chunk {
        // What the runtimes wrote during the round: markers for its hits.
        self.read_jit(!carry);
        let mut waiting = Vec::new();
        for d in std::mem::take(&mut self.deferred) {
            let mut res = self.procs.resolve(d.pid, d.ip, d.time);
            if res.is_err() && self.refresh_from_proc(d.pid) {
                res = self.procs.resolve(d.pid, d.ip, d.time);
            }
            match res {
                Ok((cookie, off)) => {
                    let stack = if self.opts.layout.has_stacks() {
                        let user = d.user.as_ref().map(DeferredUser::get);
                        self.stack_with_user(
                            d.cpu,
                            d.pid,
                            d.ip,
                            d.time,
                            false,
                            d.chain.iter().copied(),
                            user.as_ref(),
                        )
                    } else {
                        None
                    };
                    self.emit_sample(
                        d.cpu, d.pid, d.tid, false, cookie, off, stack, d.cgroup, d.time,
                    )
                }
                Err(_) if carry && !d.carried => waiting.push(Deferred { carried: true, ..d }),
                Err(why) => {
                    let key = LostKindKey::of(why);
                    *self.acc.round_lost.entry((d.cpu, key)).or_default() += 1;
                    self.keep_unattributed(d.pid, d.tid, d.ip, d.time, false, why);
                }
            }
        }
        self.finish_offcpu(!carry);
        for ((cpu, key), n) in std::mem::take(&mut self.acc.round_lost) {
            let kind = key.kind();
            self.acct(cpu).add_lost(kind, n);
            self.out.enc.event(&Event::Lost {
                cpu,
                kind,
                count: n,
            });
        }
        let per_cpu = self.out.enc.per_cpu_samples();
        for &(cpu, n) in &per_cpu {
            self.acct(cpu).samples_written += n;
        }
        let chunk = Chunk {
            round: self.round,
            time: self.round_time,
            bytes: self.out.enc.bytes().to_vec(),
            per_cpu,
            meta: std::mem::take(&mut self.out.meta),
            carried_lost: std::mem::take(&mut self.acc.carried_lost),
            offcpu: self.take_offcpu_written(),
        };
        for tid in self.procs.end_round(self.round) {
            self.announced.remove(&tid);
            self.comm_time.remove(&tid);
        }
        self.deferred = waiting;
        // A negative cache: clearing it only costs a /proc read later.
        if self.no_proc.len() > 4096 {
            self.no_proc.clear();
        }
        self.refreshed.clear();
        self.round += 1;
        chunk
    }

    /// One whole round over `rings`. (Not a call of
    /// [`SyncStage::round_with_offcpu`] with no off-CPU rings: the flat
    /// round measured 20 % slower that way, `cargo bench -p profkit-sync`.)
    pub fn round<R: RecordRing>(&mut self, rings: &mut [R], now: u64) -> Chunk {
        self.begin_round(now);
        for r in rings.iter_mut() {
            self.drain(r);
        }
        self.finish_round()
    }

    /// One whole round over `rings` and the off-CPU rings `offcpu`
    /// (`--off-cpu`; each CPU's off-CPU ring right after its sampled one).
    pub fn round_with_offcpu<R: RecordRing>(
        &mut self,
        rings: &mut [R],
        offcpu: &mut [R],
        now: u64,
    ) -> Chunk {
        self.begin_round(now);
        for r in rings.iter_mut() {
            self.drain(r);
        }
        for r in offcpu.iter_mut() {
            self.drain_offcpu(r);
        }
        self.finish_round()
    }

    /// Forgets what was written (for `profctl reset`, which starts a new
    /// file): accounting restarts, and cookie and stack definitions and
    /// thread names are written again when next needed (stack ids stay).
    pub fn reset(&mut self) {
        self.res.emitted = Default::default();
        self.res.cgroups.reset();
        self.out.stacks.reset();
        self.announced.clear();
        self.acc.acct.clear();
        self.acc.part_base.clear();
        self.acc.part_first_round = self.round;
        self.out.pending_meta.clear();
        self.acc.pending_lost.clear();
        // Samples waiting for their mapping belong to the discarded file.
        self.deferred.clear();
        self.jit.reset();
    }

    /// Sets the resolution of the sample times it writes (ns per tick;
    /// [`crate::SAMPLE_TIME_UNIT_NS`] unless set): an import asks for 1,
    /// so that its samples keep perf's nanoseconds and their order.
    /// Takes effect at once when no timed sample was written this round,
    /// else from the next round on.
    pub fn set_time_unit(&mut self, ns: u64) {
        self.out.enc.set_time_unit(ns);
    }

    /// Starts the records of CPU `cpu`'s ring (what [`SyncStage::drain`]
    /// does first): a CPU-switch marker, and the CPU's accounting exists
    /// from here on even if it has no sample. A source of records other
    /// than the rings (an imported perf.data file) calls it before handing
    /// each CPU's records to [`SyncStage::record`].
    #[inline]
    pub fn begin_cpu(&mut self, cpu: u32) {
        self.switch_cpu(cpu);
    }

    /// The call-graph sample path, kept out of line so that the plain path
    /// stays as small as it was.
    #[inline(never)]
    fn stack_sample(&mut self, s: &profkit_perf::Sample<'_>) {
        self.sample::<true>(s);
    }

    /// Resolves and encodes one sample; `G`: with its call stack.
    #[inline(always)]
    fn sample<const G: bool>(&mut self, s: &profkit_perf::Sample<'_>) {
        let cpu = s.cpu;
        let stack_of = |this: &mut Self, kernel: bool| {
            if G {
                this.stack_with_user(
                    cpu,
                    s.pid,
                    s.ip,
                    s.time,
                    kernel,
                    s.callchain.iter(),
                    s.user().as_ref(),
                )
            } else {
                None
            }
        };
        if s.is_kernel() {
            match self.res.kernel.resolve(s.ip) {
                Some((c, off)) => {
                    let stack = stack_of(self, true);
                    self.emit_sample(cpu, s.pid, s.tid, true, c, off, stack, s.cgroup, s.time)
                }
                None => {
                    *self
                        .acc
                        .round_lost
                        .entry((cpu, LostKindKey::NoMapping))
                        .or_default() += 1;
                    self.keep_unattributed(s.pid, s.tid, s.ip, s.time, true, Unresolved::NoMapping);
                }
            }
            return;
        }
        match self.procs.resolve(s.pid, s.ip, s.time) {
            Ok((c, off)) => {
                let stack = stack_of(self, false);
                self.emit_sample(cpu, s.pid, s.tid, false, c, off, stack, s.cgroup, s.time)
            }
            Err(why) => {
                if why == Unresolved::NoTask && self.ensure_process(s.pid) {
                    if let Ok((c, off)) = self.procs.resolve(s.pid, s.ip, s.time) {
                        let stack = stack_of(self, false);
                        self.emit_sample(cpu, s.pid, s.tid, false, c, off, stack, s.cgroup, s.time);
                        return;
                    }
                }
                self.deferred.push(Deferred {
                    cpu,
                    pid: s.pid,
                    tid: s.tid,
                    ip: s.ip,
                    time: s.time,
                    chain: if G {
                        s.callchain.iter().collect()
                    } else {
                        Vec::new()
                    },
                    user: if G && self.opts.layout.user_stack > 0 {
                        s.user().as_ref().map(DeferredUser::new)
                    } else {
                        None
                    },
                    carried: false,
                    cgroup: s.cgroup,
                });
            }
        }
    }

    #[inline]
    fn handle(&mut self, cpu: u32, layout: Layout, raw: RawRecord<'_>) {
        match layout.parse(raw) {
            Ok(rec) => self.record(cpu, &rec),
            Err(_) => self.acct(cpu).records_skipped += 1,
        }
    }

    /// Handles one parsed record read from CPU `cpu`'s ring: the one entry
    /// for every source of records (the rings through [`SyncStage::drain`],
    /// an imported perf.data file directly). Samples are resolved and
    /// encoded (with their stack when the stage's layout has call chains),
    /// or deferred to the end of the round; MMAP2, COMM, FORK and EXIT keep
    /// the process table current; pid −1 mappings (perf.data's
    /// `[kernel.kallsyms]_text` and modules) set the kernel maps; LOST and
    /// throttling become markers and accounting.
    #[inline]
    pub fn record(&mut self, cpu: u32, rec: &Record<'_>) {
        match *rec {
            Record::Sample(ref s) => {
                self.acct(cpu).samples_received += 1;
                // Two copies of the sample path: without call graphs it
                // is exactly the resolve-and-encode path, with no stack work.
                if self.opts.layout.has_stacks() {
                    self.stack_sample(s);
                } else {
                    self.sample::<false>(s);
                }
            }
            Record::Mmap(ref m) => self.on_mmap(m),
            Record::Comm(c) => self.on_comm(&c),
            Record::Fork(t) => self.on_fork(&t),
            Record::Exit(t) => self.on_exit(&t),
            Record::Lost { lost, .. } => self.lost(cpu, LostKind::Ring, lost),
            Record::LostSamples { lost, .. } => self.lost(cpu, LostKind::Other, lost),
            Record::Throttle {
                throttled, time, ..
            } => {
                if throttled {
                    self.acct(cpu).throttle_events += 1;
                }
                self.out.enc.event(&Event::Throttle {
                    cpu,
                    time,
                    throttled,
                });
            }
            Record::Cgroup { id, path, .. } => self.res.cgroups.insert(id, path),
            Record::Switch { .. } | Record::Ksymbol { .. } => {}
            Record::Unknown { .. } => self.acct(cpu).records_skipped += 1,
        }
    }
}

#[cfg(test)]
mod tests;
