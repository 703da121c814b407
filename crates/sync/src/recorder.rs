//! `Recorder`: rings + sync stage + event buffer + writer thread, the
//! engine a daemon drives (a round per tick, dump, status, reset, stop).

use crate::buffer::{BufferState, ChunkSink, EventBuffer, NextPart};
use crate::error::{Error, Result};
use crate::stacks::StackStats;
use crate::stage::SyncStage;
use profkit_eventlog::{CpuAccounting, LostKind, SessionFooter};
use profkit_perf::{monotonic_ns, PerfRing, RecordRing, Sampler, SimRing};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

fn unix_ns() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

/// Where the rings come from: the live [`Sampler`] or [`SimRings`].
pub trait RingSource {
    /// The ring type.
    type Ring: RecordRing;
    /// The rings, in CPU order.
    fn rings_mut(&mut self) -> &mut [Self::Ring];
    /// Stops the producers.
    fn disable(&mut self) -> Result<()>;
    /// Per-CPU lost counts as the producer knows them (`PERF_FORMAT_LOST`).
    fn lost_counts(&mut self) -> Result<Vec<(u32, u64)>>;
    /// The rings and the off-CPU rings (`--off-cpu`; none by default),
    /// each in CPU order.
    fn all_rings_mut(&mut self) -> (&mut [Self::Ring], &mut [Self::Ring]) {
        (self.rings_mut(), &mut [])
    }
    /// Per-CPU lost counts of the off-CPU events (none by default).
    fn offcpu_lost_counts(&mut self) -> Result<Vec<(u32, u64)>> {
        Ok(Vec::new())
    }
}

impl RingSource for Sampler {
    type Ring = PerfRing;
    fn rings_mut(&mut self) -> &mut [PerfRing] {
        Sampler::rings_mut(self)
    }
    fn disable(&mut self) -> Result<()> {
        Ok(Sampler::disable(self)?)
    }
    fn lost_counts(&mut self) -> Result<Vec<(u32, u64)>> {
        Ok(Sampler::lost_counts(self)?)
    }
    fn all_rings_mut(&mut self) -> (&mut [PerfRing], &mut [PerfRing]) {
        Sampler::all_rings_mut(self)
    }
    fn offcpu_lost_counts(&mut self) -> Result<Vec<(u32, u64)>> {
        Ok(Sampler::offcpu_lost_counts(self)?)
    }
}

/// SimRings as a ring source (tests and benchmarks).
#[derive(Debug)]
pub struct SimRings(pub Vec<SimRing>);

/// SimRings with off-CPU rings (tests of `--off-cpu`).
#[derive(Debug)]
pub struct SimOffCpuRings {
    /// The sampled event's rings.
    pub rings: Vec<SimRing>,
    /// The off-CPU rings.
    pub offcpu: Vec<SimRing>,
}

impl RingSource for SimOffCpuRings {
    type Ring = SimRing;
    fn rings_mut(&mut self) -> &mut [SimRing] {
        &mut self.rings
    }
    fn disable(&mut self) -> Result<()> {
        Ok(())
    }
    fn lost_counts(&mut self) -> Result<Vec<(u32, u64)>> {
        Ok(self.rings.iter().map(|r| (r.cpu(), r.dropped())).collect())
    }
    fn all_rings_mut(&mut self) -> (&mut [SimRing], &mut [SimRing]) {
        (&mut self.rings, &mut self.offcpu)
    }
    fn offcpu_lost_counts(&mut self) -> Result<Vec<(u32, u64)>> {
        Ok(self.offcpu.iter().map(|r| (r.cpu(), r.dropped())).collect())
    }
}

impl RingSource for SimRings {
    type Ring = SimRing;
    fn rings_mut(&mut self) -> &mut [SimRing] {
        &mut self.0
    }
    fn disable(&mut self) -> Result<()> {
        Ok(())
    }
    fn lost_counts(&mut self) -> Result<Vec<(u32, u64)>> {
        Ok(self.0.iter().map(|r| (r.cpu(), r.dropped())).collect())
    }
}

/// Options of a recorder.
#[derive(Debug, Clone)]
pub struct RecorderOptions {
    /// Capacity of the global event buffer in bytes.
    pub buffer_bytes: usize,
}

impl Default for RecorderOptions {
    fn default() -> Self {
        Self {
            buffer_bytes: 64 << 20,
        }
    }
}

/// What `profctl status` shows.
#[derive(Debug, Clone, Default)]
pub struct RecorderStatus {
    /// Rounds run.
    pub rounds: u64,
    /// Per-CPU accounting.
    pub accounting: Vec<CpuAccounting>,
    /// The buffer's and writer's counters.
    pub buffer: BufferState,
    /// Duration of the last round.
    pub last_round: Duration,
    /// Time since the recorder started.
    pub elapsed: Duration,
    /// Processes in the table.
    pub processes: usize,
    /// Sizes of the stage's per-task tables.
    pub tables: crate::stage::TableSizes,
    /// The call-stack table (all zero without call graphs).
    pub stacks: StackStats,
    /// Build-ids of mapped binaries not read, by reason: unopenable (or
    /// behind a symlink), not a regular file, another file than the one
    /// mapped, timed out ([`crate::binfile::Refused`]).
    pub build_ids_refused: [u64; 4],
    /// Mappings claiming a build-id whose file could not be identified
    /// ([`SyncStage::files_unidentified`]).
    pub files_unidentified: u64,
    /// The DWARF unwinder's counters (all zero without DWARF call graphs).
    pub unwind: crate::UnwindStats,
    /// The first samples that resolved to nothing, as examples.
    pub unattributed: Vec<crate::UnattributedSample>,
    /// Binaries whose unwind information was refused, `PATH: reason`.
    pub unwind_refused: Vec<String>,
    /// Binaries demoted to frame-pointer stepping for their unwinding
    /// cost, `PATH: cost`.
    pub unwind_demoted: Vec<String>,
    /// Off-CPU recording is on (`--off-cpu`).
    pub off_cpu: bool,
    /// Off-CPU switch records waiting and waits open.
    pub offcpu: crate::OffCpuSizes,
    /// What the stage did with runtimes' JIT dumps.
    pub jit: crate::JitStats,
}

/// Rings, stage, buffer and writer. See the module docs.
pub struct Recorder<S: RingSource> {
    source: S,
    stage: SyncStage,
    buffer: Arc<EventBuffer>,
    writer: Option<JoinHandle<()>>,
    last_round: Duration,
    started: Instant,
}

impl<S: RingSource> std::fmt::Debug for Recorder<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("rounds", &self.stage.rounds())
            .finish()
    }
}

impl<S: RingSource> Recorder<S> {
    /// Ties `source` and `stage` to a writer thread draining into `sink`.
    pub fn new(
        source: S,
        stage: SyncStage,
        sink: Box<dyn ChunkSink>,
        opts: RecorderOptions,
    ) -> std::io::Result<Self> {
        let buffer = EventBuffer::new(opts.buffer_bytes);
        let writer = Some(buffer.spawn_writer(sink)?);
        Ok(Self {
            source,
            stage,
            buffer,
            writer,
            last_round: Duration::ZERO,
            started: Instant::now(),
        })
    }

    fn absorb_failed(&mut self) {
        for c in self.buffer.take_failed() {
            self.stage.chunk_dropped(c, LostKind::DiskFull);
        }
    }

    /// One sync round; never waits for the disk. Returns the round number.
    pub fn round(&mut self) -> u64 {
        let t0 = Instant::now();
        self.absorb_failed();
        let (rings, offcpu) = self.source.all_rings_mut();
        // Without off-CPU rings, the plain round (one generic loop: the
        // sampling path inlines as it did; through round_with_offcpu the
        // flat round measured 20 % slower).
        let chunk = if offcpu.is_empty() {
            self.stage.round(rings, monotonic_ns())
        } else {
            self.stage.round_with_offcpu(rings, offcpu, monotonic_ns())
        };
        let round = chunk.round;
        if let Err(chunk) = self.buffer.try_push(chunk) {
            self.stage.chunk_dropped(chunk, LostKind::Overflow);
        }
        self.last_round = t0.elapsed();
        round
    }

    /// A round, then waits until everything so far is on disk.
    pub fn dump(&mut self) -> Result<()> {
        let r = self.round();
        self.buffer.wait_done(r);
        match self.buffer.take_failed() {
            f if f.is_empty() => Ok(()),
            f => {
                let err = self.buffer.state().last_error.unwrap_or_default();
                for c in f {
                    self.stage.chunk_dropped(c, LostKind::DiskFull);
                }
                Err(Error::WriteFailed { last_error: err })
            }
        }
    }

    /// The buffer's and writer's counters alone.
    pub fn buffer_state(&self) -> BufferState {
        self.buffer.state()
    }

    /// Bytes written to the current part (cheap: for a check every round).
    pub fn part_bytes(&self) -> u64 {
        self.buffer.part_bytes()
    }

    /// Counters for `profctl status`.
    pub fn status(&self) -> RecorderStatus {
        RecorderStatus {
            rounds: self.stage.rounds(),
            accounting: self.stage.accounting(),
            buffer: self.buffer.state(),
            last_round: self.last_round,
            elapsed: self.started.elapsed(),
            processes: self.stage.processes().len(),
            tables: self.stage.table_sizes(),
            stacks: self.stage.stack_stats(),
            build_ids_refused: self.stage.build_id_refusals(),
            files_unidentified: self.stage.files_unidentified(),
            unwind: self.stage.unwind_stats(),
            unattributed: self.stage.unattributed_examples().to_vec(),
            unwind_refused: self.stage.unwind_refusals(),
            unwind_demoted: self.stage.unwind_demotions(),
            off_cpu: self.stage.offcpu_enabled(),
            offcpu: self.stage.offcpu_sizes(),
            jit: self.stage.jit_stats(),
        }
    }

    /// Closes the current part of a rotated session and goes on in a new
    /// one, without stopping the rings: a round drains what they hold
    /// into the old part, the writer is waited for (so the old part's
    /// footer counts exactly what reached its file; a rotation is rare,
    /// a round never waits), then the footer and the new part's header go
    /// to the sink, and the writer is waited for again until the new part
    /// is started. Only then does the stage start its part
    /// ([`SyncStage::new_part`]): a part the sink could not close goes on
    /// whole, its definitions, stack ids and counts untouched. Returns the
    /// number of the round the new part starts with; None when the part
    /// was not closed (the error is in [`BufferState::last_error`]).
    pub fn rotate(&mut self) -> Option<u64> {
        // Waits still going on are counted in the old part up to here.
        self.stage.close_offcpu_intervals_next_round();
        let r = self.round();
        self.buffer.wait_done(r);
        self.absorb_failed();
        let footer = SessionFooter {
            end_time_unix_ns: unix_ns(),
            end_monotonic_ns: monotonic_ns(),
            rounds: self.stage.part_rounds(),
            accounting: self.stage.part_accounting(),
        };
        let first_round = self.stage.rounds();
        let closed = self.buffer.rotate(NextPart {
            footer,
            first_round,
            start_unix_ns: unix_ns(),
            start_monotonic_ns: monotonic_ns(),
        });
        closed.then(|| {
            self.stage.new_part();
            first_round
        })
    }

    /// Discards the samples so far and starts a new session file.
    pub fn reset(&mut self) -> Result<()> {
        // Drain what the rings hold now into the old file, then start over.
        self.round();
        self.buffer.restart();
        self.stage.reset();
        Ok(())
    }

    /// The sync stage (tests).
    pub fn stage(&self) -> &SyncStage {
        &self.stage
    }

    /// The ring source.
    pub fn source(&self) -> &S {
        &self.source
    }

    /// The ring source (tests).
    pub fn source_mut(&mut self) -> &mut S {
        &mut self.source
    }

    /// Disables sampling, drains every ring to the end, reconciles lost
    /// counts with the producer's, writes the footer, and stops the writer.
    pub fn stop(mut self) -> Result<RecorderStatus> {
        let disable = self.source.disable();
        self.absorb_failed();
        self.stage.begin_round(monotonic_ns());
        let (rings, offcpu) = self.source.all_rings_mut();
        for r in rings {
            self.stage.drain(r);
        }
        for r in offcpu {
            self.stage.drain_offcpu(r);
        }
        let lost = self.source.lost_counts();
        if let Ok(l) = &lost {
            self.stage.reconcile(l);
        }
        if let Ok(l) = self.source.offcpu_lost_counts() {
            self.stage.reconcile_offcpu(&l);
        }
        let chunk = self.stage.finish_final_round();
        let round = chunk.round;
        self.buffer.push_blocking(chunk);
        self.buffer.wait_done(round);
        let failed = self.buffer.take_failed();
        if !failed.is_empty() {
            for c in failed {
                self.stage.chunk_dropped(c, LostKind::DiskFull);
            }
            // One more small chunk carrying the LOST markers, if the disk lets us.
            self.stage.begin_round(monotonic_ns());
            let c = self.stage.finish_final_round();
            let r = c.round;
            self.buffer.push_blocking(c);
            self.buffer.wait_done(r);
            for c in self.buffer.take_failed() {
                self.stage.chunk_dropped(c, LostKind::DiskFull);
            }
        }
        let footer = SessionFooter {
            end_time_unix_ns: unix_ns(),
            end_monotonic_ns: monotonic_ns(),
            rounds: self.stage.part_rounds(),
            accounting: self.stage.part_accounting(),
        };
        let fin = self.buffer.finish(footer);
        if let Some(w) = self.writer.take() {
            let _ = w.join();
        }
        let status = self.status();
        disable?;
        lost?;
        fin.map_err(|e| Error::Footer {
            source: Box::new(e),
        })?;
        Ok(status)
    }
}
