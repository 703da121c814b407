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
//! Only the ring's tail is touched (the kernel keeps writing at the head).
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
//! Parts: `stage/maps.rs` (mapping records and `/proc` maps → cookies),
//! `stage/stacks.rs` (call stacks, DWARF unwinding), `stage/tasks.rs`
//! (processes, threads and their names); this file keeps the record
//! dispatch, samples, rounds, deferral and losses.

use crate::cgroups::Cgroups;
use crate::cookies::CookieTable;
use crate::kernel::KernelMaps;
use crate::probe::{HostProbe, NullProbe};
use crate::process::{IntMap, ProcessTable, UnattributedSample, Unresolved};
use crate::stacks::{StackIds, StackStats};
use crate::unwind::DwarfUnwinder;
use profkit_eventlog::{
    unknown_entry, ChunkEncoder, Cookie, CookieEntry, CpuAccounting, Event, Frame, LostKind,
};
use profkit_perf::{Layout, RawRecord, Record, RecordRing};
use std::collections::{BTreeMap, HashMap};

mod maps;
mod stacks;
mod tasks;
use stacks::DeferredUser;

/// Options of a sync stage.
#[derive(Debug, Clone)]
pub struct SyncOptions {
    /// The record layout the rings carry.
    pub layout: Layout,
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
    kernel: KernelMaps,
    known: IntMap<Cookie, CookieEntry>,
    emitted: CookieTable,
    file_cookies: IntMap<(u64, u64, u64), Cookie>,
    /// The owner (uid) of each process with anonymous code, read from
    /// `/proc/PID` when its first anonymous mapping was seen.
    anon_owners: IntMap<u32, u32>,
    /// Per build-id: the file holding its plain cookie in this session
    /// (the first identified with it; see `profkit_eventlog::cookie`).
    claims: HashMap<Vec<u8>, profkit_eventlog::FileIdentity>,
    /// Build-ids known by mapping path from outside the records.
    build_ids: HashMap<String, Vec<u8>>,
    announced: IntMap<u32, ()>,
    no_proc: IntMap<u32, ()>,
    refreshed: IntMap<u32, ()>,
    acct: BTreeMap<u32, CpuAccounting>,
    /// `acct` when the current part of a rotated session began.
    part_base: BTreeMap<u32, CpuAccounting>,
    /// The round the current part began with.
    part_first_round: u64,
    enc: ChunkEncoder,
    meta: Vec<Event>,
    round: u64,
    round_time: u64,
    deferred: Vec<Deferred>,
    pending_meta: Vec<Event>,
    pending_lost: Vec<(u32, LostKind, u64)>,
    round_lost: BTreeMap<(u32, LostKindKey), u64>,
    carried_lost: Vec<(u32, LostKind, u64)>,
    cur_cpu: Option<u32>,
    cur_tid: Option<u32>,
    cur_cookie: Option<Cookie>,
    stacks: StackIds,
    /// Scratch for one sample's resolved frames.
    frames: Vec<Frame>,
    /// Scratch for one sample's callchain with its unwound user part.
    chain: Vec<u64>,
    /// The DWARF unwinder, made at the first copied user stack.
    unwinder: Option<Box<DwarfUnwinder>>,
    /// The first samples that resolved to nothing, as examples.
    unattributed: Vec<UnattributedSample>,
    /// Samples' cgroups (off unless asked for).
    cgroups: Cgroups,
    /// Per task: the time of the newest COMM record applied. Rings are
    /// drained one after the other, so an exec read later may be older
    /// (`sh` exec'ing `node` on another CPU); an older name is dropped.
    comm_time: IntMap<u32, u64>,
    /// What the stage reads from the machine (nothing for imports).
    probe: Box<dyn HostProbe>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum LostKindKey {
    NoMapping,
    NoTask,
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
        let mut known = IntMap::default();
        let unknown = unknown_entry();
        known.insert(unknown.cookie, unknown);
        Self {
            opts,
            procs: ProcessTable::default(),
            kernel: KernelMaps::default(),
            known,
            emitted: CookieTable::default(),
            file_cookies: IntMap::default(),
            claims: HashMap::new(),
            anon_owners: IntMap::default(),
            build_ids: HashMap::new(),
            announced: IntMap::default(),
            no_proc: IntMap::default(),
            refreshed: IntMap::default(),
            acct: BTreeMap::new(),
            part_base: BTreeMap::new(),
            part_first_round: 0,
            enc: ChunkEncoder::with_capacity(1 << 20),
            meta: Vec::new(),
            round: 0,
            round_time: 0,
            deferred: Vec::new(),
            pending_meta: Vec::new(),
            pending_lost: Vec::new(),
            round_lost: BTreeMap::new(),
            carried_lost: Vec::new(),
            cur_cpu: None,
            cur_tid: None,
            cur_cookie: None,
            stacks: StackIds::default(),
            frames: Vec::new(),
            chain: Vec::new(),
            unwinder: None,
            unattributed: Vec::new(),
            cgroups: Cgroups {
                mode: if layout_cgroup {
                    profkit_perf::CgroupRecording::Sample
                } else {
                    profkit_perf::CgroupRecording::Off
                },
                ..Default::default()
            },
            comm_time: IntMap::default(),
            probe: Box::new(probe),
        }
    }

    /// How samples' cgroups are recorded: [`CgroupRecording::Sample`]
    /// (the default when the layout has `PERF_SAMPLE_CGROUP`) takes each
    /// sample's id; `Proc` reads `/proc/PID/cgroup` once per process (older
    /// kernels; through the stage's [`HostProbe`]: none with
    /// [`NullProbe`]); `Off` writes none. Set
    /// it before seeding: seeding walks the cgroup v2 hierarchy for the
    /// paths of the cgroups that exist already.
    ///
    /// [`CgroupRecording::Sample`]: profkit_perf::CgroupRecording::Sample
    pub fn set_cgroups(&mut self, mode: profkit_perf::CgroupRecording) {
        self.cgroups.mode = mode;
    }

    /// Seeds the cgroup id → path table from the cgroup v2 hierarchy
    /// mounted at `mount` (`None`: this system's, from
    /// `/proc/self/mountinfo`); the seeding functions do it for live
    /// sessions that record cgroups.
    pub fn seed_cgroups(&mut self, mount: Option<std::path::PathBuf>) {
        self.cgroups.seed(mount);
    }

    fn seed_kernel(&mut self) {
        if let Some(kernel) = self.probe.kernel() {
            self.kernel = kernel;
            if let Some(k) = self.kernel.kernel.clone() {
                self.known.insert(k.cookie, k);
            }
        }
        for (_, e) in self.probe.new_modules(&mut self.kernel) {
            self.known.insert(e.cookie, e);
        }
    }

    /// Sets the kernel layout directly (tests, or a caller that read it).
    pub fn set_kernel(&mut self, kernel: KernelMaps) {
        if let Some(k) = &kernel.kernel {
            self.known.insert(k.cookie, k.clone());
        }
        self.kernel = kernel;
    }

    /// Makes `build_id` the build-id of the file mapped as `path` (as a
    /// mapping record names it: `/usr/lib/libc.so.6`, `[kernel.kallsyms]_text`,
    /// a module's `.ko` path), for mappings whose record does not carry
    /// one: perf.data's build-id table. Used before reading the file.
    pub fn add_build_id(&mut self, path: &str, build_id: Vec<u8>) {
        if !build_id.is_empty() {
            self.build_ids.insert(path.to_string(), build_id);
        }
    }

    /// Defines a cookie the stage may meet (tests: module cookies).
    pub fn add_cookie(&mut self, e: CookieEntry) {
        self.known.insert(e.cookie, e);
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

    /// Per-CPU accounting so far.
    pub fn accounting(&self) -> Vec<CpuAccounting> {
        self.acct.values().cloned().collect()
    }

    /// Per-CPU accounting of the current part of a rotated session (all
    /// of it without rotation): what the part's footer says, so that the
    /// parts' footers add up to the session's counts.
    pub fn part_accounting(&self) -> Vec<CpuAccounting> {
        self.acct
            .values()
            .map(|a| match self.part_base.get(&a.cpu) {
                Some(b) => a.minus(b),
                None => a.clone(),
            })
            .collect()
    }

    /// Rounds of the current part.
    pub fn part_rounds(&self) -> u64 {
        self.round - self.part_first_round
    }

    /// Starts a new part of a rotated session (its own file): cookie,
    /// stack and cgroup definitions and thread names are written again
    /// when next needed, the part's accounting starts from zero (the
    /// session's goes on), and round numbers go on. Samples waiting for
    /// their mapping and losses not yet written go into the new part.
    /// Call it between rounds, after the old part's chunks are written
    /// (or dropped and accounted).
    pub fn new_part(&mut self) {
        self.emitted = CookieTable::default();
        self.cgroups.reset();
        self.stacks.restart();
        self.announced.clear();
        // Definitions of dropped chunks belonged to the old part; the new
        // one writes its own on first use.
        self.pending_meta.clear();
        self.part_base = self.acct.clone();
        self.part_first_round = self.round;
    }

    /// Rounds completed.
    pub fn rounds(&self) -> u64 {
        self.round
    }

    fn acct(&mut self, cpu: u32) -> &mut CpuAccounting {
        self.acct.entry(cpu).or_insert_with(|| CpuAccounting {
            cpu,
            ..Default::default()
        })
    }

    /// The uid that owned process `pid` when its first anonymous code
    /// mapping was seen (live sessions only).
    pub fn anon_owner(&self, pid: u32) -> Option<u32> {
        self.anon_owners.get(&pid).copied()
    }

    /// Every (pid, uid) of [`SyncStage::anon_owner`].
    pub fn anon_owners(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.anon_owners.iter().map(|(&p, &u)| (p, u))
    }

    /// Binaries the host cannot reach at their recorded paths, to keep
    /// in the session (a handle on the probe's queue; see `reach`).
    pub fn keep_queue(&self) -> crate::reach::KeepQueue {
        self.probe.keep_queue()
    }

    /// Build-ids of mapped binaries not read, by reason (see
    /// [`crate::RecorderStatus::build_ids_refused`]).
    pub fn build_id_refusals(&self) -> [u64; 4] {
        self.probe.build_id_refusals()
    }

    /// Mappings claiming a build-id whose file could not be identified
    /// (gone, refused or timed out): their cookie is the claim's
    /// `build-id-unverified` one, named only by their recorded path (see
    /// [`crate::RecorderStatus::files_unidentified`]).
    pub fn files_unidentified(&self) -> u64 {
        self.probe.files_unidentified()
    }

    /// The stack table's counters.
    pub fn stack_stats(&self) -> StackStats {
        self.stacks.stats()
    }

    /// Bounds the stack table's memory (default
    /// [`crate::DEFAULT_STACK_TABLE_BYTES`]); see [`StackStats`] for what
    /// happens at the bound.
    pub fn set_stack_table_limit(&mut self, bytes: usize) {
        self.stacks.set_limit(bytes);
    }

    fn marker(&mut self, e: Event) {
        self.enc.event(&e);
        if matches!(
            e,
            Event::CookieDef(_)
                | Event::Comm { .. }
                | Event::ModuleLoad { .. }
                | Event::StackDef { .. }
                | Event::StackDefOn { .. }
                | Event::CgroupDef { .. }
        ) {
            self.meta.push(e);
        }
    }

    /// Starts a round: clears the chunk and writes the markers left over
    /// from chunks that could not be stored.
    pub fn begin_round(&mut self, now: u64) {
        if let Some(u) = &mut self.unwinder {
            u.begin_round();
        }
        self.enc.clear();
        self.meta.clear();
        self.round_time = now;
        self.cur_cpu = None;
        for e in std::mem::take(&mut self.pending_meta) {
            self.marker(e);
        }
        self.carried_lost = std::mem::take(&mut self.pending_lost);
        for &(cpu, kind, count) in &self.carried_lost {
            self.enc.event(&Event::Lost { cpu, kind, count });
        }
        for (m, e) in self.probe.new_modules(&mut self.kernel) {
            self.known.insert(e.cookie, e);
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

    /// Drains one ring completely.
    pub fn drain<R: RecordRing>(&mut self, ring: &mut R) {
        let cpu = ring.cpu();
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
        let mut waiting = Vec::new();
        for d in std::mem::take(&mut self.deferred) {
            let mut res = self.procs.resolve(d.pid, d.ip, d.time);
            if res.is_err() {
                self.refresh_from_proc(d.pid);
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
                    self.emit_sample(d.cpu, d.pid, d.tid, false, cookie, off, stack, d.cgroup)
                }
                Err(_) if carry && !d.carried => waiting.push(Deferred { carried: true, ..d }),
                Err(why) => {
                    let key = match why {
                        Unresolved::NoTask => LostKindKey::NoTask,
                        Unresolved::NoMapping => LostKindKey::NoMapping,
                    };
                    *self.round_lost.entry((d.cpu, key)).or_default() += 1;
                    self.keep_unattributed(d.pid, d.tid, d.ip, d.time, false, why);
                }
            }
        }
        for ((cpu, key), n) in std::mem::take(&mut self.round_lost) {
            let kind = match key {
                LostKindKey::NoMapping => LostKind::NoMapping,
                LostKindKey::NoTask => LostKind::NoTask,
            };
            self.acct(cpu).add_lost(kind, n);
            self.enc.event(&Event::Lost {
                cpu,
                kind,
                count: n,
            });
        }
        let per_cpu = self.enc.per_cpu_samples();
        for &(cpu, n) in &per_cpu {
            self.acct(cpu).samples_written += n;
        }
        let chunk = Chunk {
            round: self.round,
            time: self.round_time,
            bytes: self.enc.bytes().to_vec(),
            per_cpu,
            meta: std::mem::take(&mut self.meta),
            carried_lost: std::mem::take(&mut self.carried_lost),
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

    /// One whole round over `rings`.
    pub fn round<R: RecordRing>(&mut self, rings: &mut [R], now: u64) -> Chunk {
        self.begin_round(now);
        for r in rings.iter_mut() {
            self.drain(r);
        }
        self.finish_round()
    }

    /// Records that a chunk could not be stored (event buffer full, or the
    /// write failed): its samples move from written to lost, and its
    /// metadata and a LOST marker per CPU go into the next chunk.
    pub fn chunk_dropped(&mut self, chunk: Chunk, kind: LostKind) {
        for (cpu, k, n) in chunk.carried_lost {
            self.add_pending_lost(cpu, k, n);
        }
        for &(cpu, n) in &chunk.per_cpu {
            let a = self.acct(cpu);
            a.samples_written -= n.min(a.samples_written);
            // Anything but a full disk was a full event buffer.
            let kind = match kind {
                LostKind::DiskFull => LostKind::DiskFull,
                _ => LostKind::Overflow,
            };
            a.add_lost(kind, n);
            self.add_pending_lost(cpu, kind, n);
        }
        // Cookie definitions must reach the log before samples using them
        // in later chunks: re-emit the dropped chunk's metadata.
        self.pending_meta.extend(chunk.meta);
    }

    fn add_pending_lost(&mut self, cpu: u32, kind: LostKind, n: u64) {
        if let Some(e) = self
            .pending_lost
            .iter_mut()
            .find(|e| e.0 == cpu && e.1 == kind)
        {
            e.2 += n;
        } else {
            self.pending_lost.push((cpu, kind, n));
        }
    }

    /// Adds the stop-time reconciliation to the current round: for each
    /// CPU, the kernel's read-back lost count minus the LOST records seen
    /// becomes a final `Lost(Reconcile)` marker, so the session's totals
    /// equal the kernel's.
    pub fn reconcile(&mut self, kernel_lost: &[(u32, u64)]) {
        for &(cpu, k) in kernel_lost {
            let a = self.acct(cpu);
            a.kernel_lost = k;
            let diff = k.saturating_sub(a.lost_ring + a.lost_reconcile);
            if diff > 0 {
                a.add_lost(LostKind::Reconcile, diff);
                self.enc.event(&Event::Lost {
                    cpu,
                    kind: LostKind::Reconcile,
                    count: diff,
                });
            }
        }
    }

    /// Forgets what was written (for `profctl reset`, which starts a new
    /// file): accounting restarts, and cookie and stack definitions and
    /// thread names are written again when next needed (stack ids stay).
    pub fn reset(&mut self) {
        self.emitted = CookieTable::default();
        self.cgroups.reset();
        self.stacks.reset();
        self.announced.clear();
        self.acct.clear();
        self.part_base.clear();
        self.part_first_round = self.round;
        self.pending_meta.clear();
        self.pending_lost.clear();
        // Samples waiting for their mapping belong to the discarded file.
        self.deferred.clear();
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

    #[inline]
    fn switch_cpu(&mut self, cpu: u32) {
        self.enc.event(&Event::CpuSwitch { cpu });
        self.acct(cpu);
        self.cur_cpu = Some(cpu);
        self.cur_tid = None;
        self.cur_cookie = None;
    }

    fn ensure_defined(&mut self, cookie: Cookie) {
        if !self.emitted.contains(cookie) {
            if let Some(e) = self.known.get(&cookie).cloned() {
                self.emitted.define(e.clone());
                self.marker(Event::CookieDef(e));
            }
        }
    }

    #[inline]
    #[allow(clippy::too_many_arguments)]
    fn emit_sample(
        &mut self,
        cpu: u32,
        pid: u32,
        tid: u32,
        kernel: bool,
        cookie: Cookie,
        off: u64,
        stack: Option<u32>,
        cgroup: u64,
    ) {
        if self.cur_cpu != Some(cpu) {
            self.switch_cpu(cpu);
        }
        if self.cgroups.on() {
            self.set_cgroup(pid, cgroup);
        }
        if self.cur_tid != Some(tid) {
            self.cur_tid = Some(tid);
            self.announce(pid, tid);
        }
        if self.cur_cookie != Some(cookie) {
            self.cur_cookie = Some(cookie);
            self.ensure_defined(cookie);
        }
        match stack {
            None => self.enc.sample(cpu, pid, tid, kernel, cookie, off),
            Some(id) => self
                .enc
                .sample_with_stack(cpu, pid, tid, kernel, cookie, off, id),
        }
    }

    /// The cgroup state for a sample of `pid` (whose sample gave `id`):
    /// its definition first, once per file.
    #[inline(never)]
    fn set_cgroup(&mut self, pid: u32, id: u64) {
        let id = if self.cgroups.mode == profkit_perf::CgroupRecording::Proc {
            self.cgroups.of_pid(self.probe.as_mut(), pid).unwrap_or(id)
        } else {
            id
        };
        if let Some((id, path)) = self.cgroups.define(id) {
            self.marker(Event::CgroupDef { id, path });
        }
        self.enc.cgroup(id);
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
            match self.kernel.resolve(s.ip) {
                Some((c, off)) => {
                    let stack = stack_of(self, true);
                    self.emit_sample(cpu, s.pid, s.tid, true, c, off, stack, s.cgroup)
                }
                None => {
                    *self
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
                self.emit_sample(cpu, s.pid, s.tid, false, c, off, stack, s.cgroup)
            }
            Err(why) => {
                if why == Unresolved::NoTask && self.ensure_process(s.pid) {
                    if let Ok((c, off)) = self.procs.resolve(s.pid, s.ip, s.time) {
                        let stack = stack_of(self, false);
                        self.emit_sample(cpu, s.pid, s.tid, false, c, off, stack, s.cgroup);
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
                self.enc.event(&Event::Throttle {
                    cpu,
                    time,
                    throttled,
                });
            }
            Record::Cgroup { id, path, .. } => self.cgroups.insert(id, path),
            Record::Switch { .. } | Record::Ksymbol { .. } => {}
            Record::Unknown { .. } => self.acct(cpu).records_skipped += 1,
        }
    }

    fn lost(&mut self, cpu: u32, kind: LostKind, count: u64) {
        self.acct(cpu).add_lost(kind, count);
        self.enc.event(&Event::Lost { cpu, kind, count });
    }
}

#[cfg(test)]
mod tests;
