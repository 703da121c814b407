//! DWARF unwinding of copied user stacks, at sync time.
//!
//! With `--call-graph dwarf` each sample carries the user registers (ip,
//! sp, bp) and a copy of the user stack from sp up. This module turns them
//! into return addresses right away, in the sync stage, with the unwind
//! information (`.eh_frame` with `.eh_frame_hdr`, else `.debug_frame`) of
//! the binaries the process maps, so that the stack bytes never reach the
//! disk: the log stores resolved frames, exactly as for frame pointers.
//!
//! The unwinder is framehop's (samply's). How it is used here:
//!
//! - **One unwinder per binary, in the binary's own addresses.** Each
//!   binary's sections are read once per session and cached by cookie; its
//!   framehop module is placed at its stated addresses (SVMAs), not where a
//!   process loaded it. A frame's address is moved into the binary's
//!   addresses by the load bias of the process's mapping (from the process
//!   table, which already knows which mapping covers each address at the
//!   sample's time) before the binary's unwinder is asked; registers and
//!   the stack stay in the process's addresses. So nothing is rebuilt when
//!   a process maps or unmaps something, processes share the work, and
//!   exited processes' samples still unwind.
//! - **Reading binaries never stalls the stage** (`unwind/sections.rs`). Sections are read on a
//!   few threads of their own through [`crate::binfile::open_mapped`] (the mapped
//!   file itself via `/proc/PID/map_files`, no symlinks, no FIFOs); the
//!   stage waits for a new binary at most [`CFI_FIRST_WAIT`], then goes
//!   on with the frame pointer for that binary's frames until the answer
//!   is in; a read past [`CFI_TIMEOUT`] is given up (its thread abandoned
//!   to it: `profkit_untrusted::TimeBox`, the build-id reader's worker
//!   too). A binary whose build-id is known must have that build-id.
//!   `[vdso]` is read from this process's own vdso (`profkit_elf::read_own_vdso`,
//!   the same kernel image for every 64-bit process).
//! - **A stripped binary without unwind tables** (built with
//!   `-fno-asynchronous-unwind-tables`, its `.debug_frame` moved to its
//!   separate debug file) takes the `.debug_frame` of that file, found by
//!   build-id in `SyncOptions::debug_frame` ([`DebugFrameSources`]: debug
//!   directories, a debuginfod cache, a fetch hook whose reads are given
//!   up after its own `fetch_timeout`), checked to carry the binary's
//!   build-id and code layout (`unwind/debug_file.rs`), counted in
//!   [`UnwindStats::from_debug_file`].
//! - **Untrusted unwind information is checked first**
//!   ([`crate::cfi_check`]): CFI expressions with branches (a backward
//!   `DW_OP_skip` makes framehop's expression evaluation loop forever) or
//!   that do not parse make the binary's information refused, counted in
//!   [`UnwindStats::refused`]; its frames then fall back to the frame
//!   pointer, as JIT code does.
//! - **JIT and anonymous code** (no unwind information): the frame pointer
//!   for that step (framehop's fallback rule), then DWARF again.
//! - **Bounded per sample**: at most [`crate::MAX_STACK_FRAMES`] + 1 steps,
//!   each a rule-cache lookup or one FDE evaluation, which runs at most
//!   `cfi_check::MAX_ENTRY_INSTRUCTIONS` (65,536) CFI instructions: framehop
//!   evaluates an FDE from its start on every miss of its 509-rule cache.
//! - **Bounded per round** (issue 25.1): a round that has run for
//!   [`UNWIND_ROUND_BUDGET`] of wall time (waits for sections not counted)
//!   and as much of the stage thread's CPU time (a preempted stage has not
//!   spent it) steps the rest of its user stacks by their frame pointer
//!   ([`UnwindStats::stacks_over_budget`]), so the rings keep being
//!   drained whatever one process's stacks cost. The clock is read at the
//!   end of each window of [`WINDOW_FRAMES`] DWARF frames or
//!   [`WINDOW_MISSES`] rule-cache misses, whichever comes first (a read
//!   costs about as much as a cached frame; a miss may cost an FDE of
//!   65,536 instructions), so a round overshoots by a few lookups at most.
//! - **Bounded per binary**: a window whose frames cost more than
//!   [`DEMOTE_FRAME_COST`] each on average makes its binaries suspect,
//!   and their next 256 frames are timed one by one, in the thread's CPU
//!   time (a preemption is not a binary's cost); a binary whose timed
//!   frames cost that much on average and [`DEMOTE_AFTER`] in all is
//!   demoted: its sections are dropped and its frames stepped by the frame
//!   pointer for the rest of the session, counted
//!   ([`UnwindStats::demoted`]) and named in status and stop
//!   (`SyncStage::unwind_demotions`). One found cheap on average after its
//!   256 frames is cleared. The cost per frame is for a release build; an
//!   unoptimized one (the tests' daemon) allows 10 times as much, and 10
//!   times the round's budget.
//!
//! ```text
//!  round:  begin ─────────────────────────────── 100 ms ────────── end
//!  frames: |w1: 32 frames|w2: 4 misses|w3| ...   clock read at each |
//!          w2 slow (> 10 µs a frame) → its binaries' next 256 frames timed
//!          B's timed frames > 20 ms in all, > 10 µs each → B demoted (FP)
//!          round clock ≥ budget at a window's end → rest of round by FP
//! ```
//!
//! framehop's rule cache is keyed by a process-wide 16-bit module
//! generation, bumped for every unwinder built: before 2^16 builds could
//! make two binaries share a generation, the cache and every unwinder are
//! rebuilt from the sections already held ([`GENERATIONS_BEFORE_RESET`]).

mod clock;
mod debug_file;
mod jit;
mod sections;

pub(crate) use clock::Clock;
pub use debug_file::{
    DebugFrameSources, FetchDebugFile, DEFAULT_FETCH_TIMEOUT, MAX_DEBUG_FILE_BYTES,
    SYSTEM_DEBUG_DIR,
};
#[cfg(test)]
use jit::NoJitFrames;
use jit::{jit_sections, Epilogue, EPILOGUE_MAX_BYTES};
pub(crate) use jit::{JitCodeInfo, JitFrames, JitUnwind};
use sections::*;
pub(crate) use sections::{source_of, CfiMissing, CfiSections, CfiSource};

use crate::binfile::{build_id_of, open_mapped, MappedBinary, MAX_STUCK_READS};
use crate::cfi_check::{check_cfi, framehop_bases, CfiSection};
use crate::process::{Map, MapKind, Process};
use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{ExplicitModuleSectionInfo, FrameAddress, Module, Unwinder};
use profkit_eventlog::{broken, Cookie};
use profkit_perf::{UserStack, PERF_CONTEXT_USER};
use rustc_hash::FxHashMap;
use std::collections::VecDeque;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a binary's unwind sections may take to read before the read
/// is given up (the worker is abandoned to it and a new one started).
pub const CFI_TIMEOUT: Duration = Duration::from_secs(1);

/// How long the stage waits for a binary's sections when it first needs
/// them (libc's take 1.4 ms in a release build). A slower read goes on in
/// the background; until it is in, that binary's frames are stepped by
/// their frame pointer (counted in [`UnwindStats::frames_while_loading`]),
/// so no read stalls the rings.
pub const CFI_FIRST_WAIT: Duration = Duration::from_millis(100);

/// The most a sync round waits for unwind sections in all, whatever the
/// number of new binaries: well under the round's share of a DWARF ring
/// (which holds two rounds).
pub const CFI_ROUND_WAIT: Duration = Duration::from_millis(150);

/// Largest unwind section read (`.eh_frame`, `.debug_frame`): larger ones
/// are refused (the largest seen here, librustc_driver's, is ~10 MiB).
pub const MAX_CFI_SECTION: u64 = 256 << 20;

/// Most bytes of unwind sections held at once: past it, every binary's
/// sections are dropped and read again when next needed
/// ([`UnwindStats::flushes`]), so a daemon that meets ever new binaries
/// keeps a bounded cache (a Rust toolchain's librustc_driver holds 10 MiB).
pub const MAX_CFI_HELD: u64 = 512 << 20;

/// Refusal reasons kept for the stop summary (all are counted); so many
/// demoted binaries' names too.
const MAX_REFUSALS_KEPT: usize = 8;

/// The unwinding time a sync round may spend: past it, the round's other
/// user stacks (and the rest of the one being unwound) are stepped by
/// their frame pointer, without unwind information
/// ([`UnwindStats::stacks_over_budget`]). 40 % of the daemon's default
/// 250 ms sync interval: the rings (which hold two intervals of DWARF
/// samples) keep being drained, whatever the stacks cost. (1 s in an
/// unoptimized build: `BUILD_SLOWDOWN`.)
pub const UNWIND_ROUND_BUDGET: Duration = Duration::from_millis(100);

/// A binary whose frames have cost more than this in all
/// ([`DEMOTE_FRAME_COST`] on average) is demoted.
pub const DEMOTE_AFTER: Duration = Duration::from_millis(20);

/// A binary whose frames cost more than this each, on average, once they
/// have cost [`DEMOTE_AFTER`] in all, is demoted: its frames are stepped
/// by the frame pointer for the rest of the session
/// ([`UnwindStats::demoted`]). A real binary's frame costs about 0.1 µs
/// from the rule cache and a few µs on a miss (release build); one whose
/// FDEs hold `cfi_check::MAX_ENTRY_INSTRUCTIONS` instructions costs 0.3-0.4 ms
/// (nops) to 9 ms (row copies) on every miss, measured.
pub const DEMOTE_FRAME_COST: Duration = Duration::from_micros(10);

/// How much slower an unoptimized build (the tests' daemon) runs gimli's
/// CFI evaluation: a miss on an ordinary FDE costs tens of µs there. The
/// demotion's cost per frame ([`DEMOTE_FRAME_COST`]) and the round's
/// budget ([`UNWIND_ROUND_BUDGET`]) are this many times larger in such a
/// build, so that a debug daemon neither demotes ordinary binaries nor
/// cuts the stacks of an ordinary 1 kHz system-wide recording (whose
/// rounds took up to 300 ms in a debug build on a loaded machine).
const BUILD_SLOWDOWN: u32 = if cfg!(debug_assertions) { 10 } else { 1 };

/// The average cost per frame past which a binary is suspect and, after
/// [`DEMOTE_AFTER`], demoted: [`DEMOTE_FRAME_COST`] in a release build.
pub(crate) fn frame_cost_limit() -> Duration {
    DEMOTE_FRAME_COST * BUILD_SLOWDOWN
}

/// Most answers [`DwarfUnwinder::is_entry_code`] keeps.
const ENTRY_CODE_CACHE: usize = 4096;

/// framehop generations used before the cache and unwinders are rebuilt
/// (its counter is 16 bits; each binary's unwinder uses two).
const GENERATIONS_BEFORE_RESET: u32 = 30_000;

/// Most JIT functions' unwinders held (dropped all at once past it, and
/// rebuilt as their frames come back).
const MAX_JIT_UNWINDERS: usize = 16_384;

/// Most decoded epilogues held in a round.
const MAX_EPILOGUES: usize = 65_536;

/// `PERF_SAMPLE_REGS_ABI_64`: the only ABI unwound (x86-64).
const ABI_64: u64 = 2;

/// A binary's unwind information in use, and what its frames have cost.
struct Loaded {
    sections: CfiSections,
    unwinder: UnwinderX86_64<Data>,
    /// Frames still to be timed one by one (0: not timed; see
    /// [`TIMED_FRAMES`]), and what those timed so far cost.
    timed: u32,
    spent: Duration,
    frames: u64,
}

/// DWARF frames between two looks at the clock (reading it costs about as
/// much as a frame found in the rule cache, so it is not read per frame).
pub const WINDOW_FRAMES: u32 = 32;

/// Rule-cache misses that end a window early: a miss evaluates an FDE,
/// which may cost up to `cfi_check::MAX_ENTRY_INSTRUCTIONS` instructions,
/// so a window of costly frames ends after a few of them.
pub const WINDOW_MISSES: u32 = 4;

/// Frames of a suspect binary timed one by one: a window of frames that
/// cost more than [`DEMOTE_FRAME_COST`] each on average makes each binary
/// in it suspect, and its next so many frames are timed. If its timed
/// frames so far cost less than that on average, it is cleared (the
/// window was slow for another reason: a preemption, another binary);
/// else it stays suspect and is timed again after its next slow window,
/// until it is demoted.
const TIMED_FRAMES: u32 = 256;

/// The unwinder's counters (`SyncStage::unwind_stats`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UnwindStats {
    /// User stacks unwound.
    pub stacks: u64,
    /// Return addresses found.
    pub frames: u64,
    /// Binaries whose unwind information was read.
    pub binaries: u64,
    /// Bytes of unwind sections read (over the session).
    pub bytes: u64,
    /// Binaries without unwind information (frame-pointer fallback).
    pub without_cfi: u64,
    /// Binaries that could not be read (or not in time).
    pub unreadable: u64,
    /// Binaries whose unwind information failed the check.
    pub refused: u64,
    /// Times the rule cache and unwinders were rebuilt (generation wrap).
    pub resets: u64,
    /// Times the held sections were dropped at [`MAX_CFI_HELD`].
    pub flushes: u64,
    /// Frames stepped by the frame pointer because their binary's unwind
    /// information was still being read ([`CFI_FIRST_WAIT`]).
    pub frames_while_loading: u64,
    /// Binaries whose frames cost too much to unwind
    /// ([`DEMOTE_FRAME_COST`]), stepped by the frame pointer since.
    pub demoted: u64,
    /// User stacks (all or the rest of them) stepped by the frame pointer
    /// because their round had spent its [`UNWIND_ROUND_BUDGET`].
    pub stacks_over_budget: u64,
    /// Frames of generated code stepped with the runtime's own unwind
    /// information (a jitdump's `JIT_CODE_UNWINDING_INFO`).
    pub jit_frames_cfi: u64,
    /// Frames of generated code stepped by decoding their epilogue
    /// (trampolines and stubs that keep no frame pointer).
    pub jit_frames_epilogue: u64,
    /// JIT functions whose unwind information was refused (corrupt or
    /// hostile): their frames fall back as if they had none.
    pub jit_unwind_refused: u64,
    /// Binaries (of [`UnwindStats::binaries`]) whose unwind information
    /// came from their separate debug file (`DebugFrameSources`).
    pub from_debug_file: u64,
}

/// How an unwind ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UnwindEnd {
    /// At the outermost frame (or the frame limit).
    Complete,
    /// The next step needed stack beyond the copied bytes: the copy size
    /// cut it (`user_stacks_cut`).
    Cut,
    /// The next step could not be made: the stack ends with `[unknown]`
    /// (`stacks_unknown`), whose offset says why
    /// (`profkit_eventlog::broken`).
    Failed(u64),
}

type CfiAnswer = Result<CfiSections, CfiMissing>;

/// The sync stage's DWARF unwinder: per-binary unwind information by
/// cookie, one rule cache.
pub(crate) struct DwarfUnwinder {
    binaries: FxHashMap<Cookie, Result<Loaded, CfiMissing>>,
    /// Unwinds anonymous code and binaries without information: framehop's
    /// frame-pointer fallback.
    empty: UnwinderX86_64<Data>,
    cache: CacheX86_64,
    generations: u32,
    /// Bytes of sections held now.
    held: u64,
    reader: Loader,
    /// What this round may still wait for sections ([`CFI_ROUND_WAIT`]).
    round_wait: Duration,
    /// [`DwarfUnwinder::is_entry_code`]'s answers by (binary, address): a
    /// stack that fails at one place fails there in every sample, and the
    /// FDE search costs more than the rest of the unwind. Emptied at
    /// [`ENTRY_CODE_CACHE`] entries.
    entry_code: FxHashMap<(Cookie, u64), bool>,
    /// Why binaries' unwind information was refused (the first
    /// [`MAX_REFUSALS_KEPT`]), for the stop summary.
    refusals: Vec<(Cookie, String)>,
    /// Demoted binaries and what their frames cost (the first
    /// [`MAX_REFUSALS_KEPT`]).
    demotions: Vec<(Cookie, String)>,
    /// When this round started (less what it waited for sections), and
    /// the time it may take before its stacks are stepped by frame pointer.
    round_start: Duration,
    /// The thread's CPU time when this round started.
    round_cpu_start: Duration,
    round_budget: Duration,
    /// This round has taken its budget.
    over_budget: bool,
    /// The current window: when it started (less waits), its DWARF
    /// frames, the binaries they were in (consecutive ones once).
    window_start: Duration,
    window_frames: u32,
    window_misses: u32,
    window_binaries: Vec<Cookie>,
    clock: Clock,
    stats: UnwindStats,
    /// Unwinders of JIT functions with unwind information, by the code
    /// instance's key (None: refused).
    jit_unwinders: FxHashMap<u64, Option<UnwinderX86_64<Data>>>,
    /// Decoded epilogues of generated code by (pid, address); cleared
    /// every round (code at an address may be replaced).
    epilogues: FxHashMap<(u32, u64), Option<Epilogue>>,
}

impl std::fmt::Debug for DwarfUnwinder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DwarfUnwinder")
            .field("binaries", &self.binaries.len())
            .field("stats", &self.stats)
            .finish()
    }
}

impl Default for DwarfUnwinder {
    fn default() -> Self {
        Self::new(CFI_TIMEOUT, DebugFrameSources::default())
    }
}

impl DwarfUnwinder {
    /// An unwinder whose section reads are given up after `timeout`
    /// (`sources.fetch_timeout` while the fetch hook runs), looking for
    /// separate debug files in `sources`.
    pub(crate) fn new(timeout: Duration, sources: DebugFrameSources) -> Self {
        let mut u = DwarfUnwinder {
            binaries: FxHashMap::default(),
            empty: UnwinderX86_64::new(),
            cache: CacheX86_64::new(),
            generations: 1,
            held: 0,
            reader: Loader::new(timeout, sources),
            round_wait: CFI_ROUND_WAIT,
            entry_code: FxHashMap::default(),
            refusals: Vec::new(),
            demotions: Vec::new(),
            round_start: Duration::ZERO,
            round_cpu_start: Duration::ZERO,
            round_budget: UNWIND_ROUND_BUDGET * BUILD_SLOWDOWN,
            over_budget: false,
            window_start: Duration::ZERO,
            window_frames: 0,
            window_misses: 0,
            window_binaries: Vec::new(),
            clock: Clock::Real(Instant::now()),
            stats: UnwindStats::default(),
            jit_unwinders: FxHashMap::default(),
            epilogues: FxHashMap::default(),
        };
        // The round's clocks start now (on the stage's thread).
        u.begin_window();
        u
    }

    /// Sets the unwinding time a round may spend.
    #[cfg(test)]
    pub(crate) fn set_round_budget(&mut self, budget: Duration) {
        self.round_budget = budget;
    }

    /// Charges each frame of a binary `cost` instead of the time it takes.
    #[cfg(test)]
    pub(crate) fn set_cost_model(&mut self, cost: fn(Cookie) -> Duration) {
        self.clock = Clock::Model {
            cost,
            now: Duration::ZERO,
        };
        self.begin_window();
    }

    /// Starts the round's clocks and a window.
    fn begin_window(&mut self) {
        let now = self.clock.now();
        self.round_start = now;
        self.round_cpu_start = self.clock.cpu();
        self.window_start = now;
        self.window_frames = 0;
        self.window_misses = 0;
        self.window_binaries.clear();
    }

    /// Ends a window (of [`WINDOW_FRAMES`] DWARF frames or [`WINDOW_MISSES`]
    /// rule-cache misses): the round past its
    /// budget is marked, and the window's binaries are timed one by one
    /// if its frames cost more than [`DEMOTE_FRAME_COST`] on average.
    #[cold]
    fn end_window(&mut self) {
        let now = self.clock.now();
        let spent = now.saturating_sub(self.window_start);
        if spent > frame_cost_limit() * self.window_frames {
            for c in &self.window_binaries {
                if let Some(Ok(l)) = self.binaries.get_mut(c) {
                    if l.timed == 0 {
                        l.timed = TIMED_FRAMES;
                    }
                }
            }
        }
        // Past the budget in wall time, and in the thread's CPU time (a
        // system call, only in such long rounds): a stage that was
        // preempted on a busy machine has not spent its budget.
        if now.saturating_sub(self.round_start) >= self.round_budget
            && self.clock.cpu().saturating_sub(self.round_cpu_start) >= self.round_budget
        {
            self.over_budget = true;
        }
        self.window_start = now;
        self.window_frames = 0;
        self.window_misses = 0;
        self.window_binaries.clear();
    }

    /// Binaries demoted for their cost, and what it was.
    pub(crate) fn demotions(&self) -> &[(Cookie, String)] {
        &self.demotions
    }

    /// Demotes a binary whose frames cost too much: its sections are
    /// dropped and its frames stepped by the frame pointer from now on.
    #[cold]
    fn demote(&mut self, cookie: Cookie) {
        let Some(Ok(l)) = self.binaries.remove(&cookie) else {
            return;
        };
        self.held = self.held.saturating_sub(l.sections.bytes() as u64);
        self.stats.demoted += 1;
        if self.demotions.len() < MAX_REFUSALS_KEPT {
            self.demotions.push((
                cookie,
                format!(
                    "unwinding its frames took {} ms, {} µs each over {} frames: stepped by frame pointer since",
                    l.spent.as_millis(),
                    l.spent.as_micros() / u128::from(l.frames.max(1)),
                    l.frames
                ),
            ));
        }
        self.binaries.insert(cookie, Err(CfiMissing::Demoted));
    }

    pub(crate) fn stats(&self) -> UnwindStats {
        self.stats
    }

    /// Binaries whose unwind information was refused, and why.
    pub(crate) fn refusals(&self) -> &[(Cookie, String)] {
        &self.refusals
    }

    /// A new sync round: its wait budget starts again, and answers that
    /// came in since (also late ones of reads given up) are taken.
    pub(crate) fn begin_round(&mut self) {
        self.round_wait = CFI_ROUND_WAIT;
        self.over_budget = false;
        self.epilogues.clear();
        if self.jit_unwinders.len() > MAX_JIT_UNWINDERS {
            self.jit_unwinders.clear();
        }
        self.begin_window();
        for (c, a) in self.reader.poll(Duration::ZERO) {
            self.install(c, a);
        }
    }

    /// Rebuilds the cache and every unwinder when framehop's 16-bit
    /// generation counter could come round again.
    fn maybe_reset(&mut self) {
        if self.generations < GENERATIONS_BEFORE_RESET {
            return;
        }
        self.cache = CacheX86_64::new();
        self.empty = UnwinderX86_64::new();
        self.generations = 1;
        // Rebuilt when next needed.
        self.jit_unwinders.clear();
        for b in self.binaries.values_mut().flatten() {
            b.unwinder = b.sections.unwinder();
            self.generations += 2;
        }
        self.stats.resets += 1;
    }

    /// Reads (once) the unwind information of the binary `cookie`: asks
    /// for it the first time and waits up to [`CFI_FIRST_WAIT`]; later
    /// calls take what has come in since.
    fn load(&mut self, cookie: Cookie, source: impl FnOnce() -> Option<CfiSource>) {
        if self.binaries.contains_key(&cookie) {
            return;
        }
        if self.reader.is_pending(cookie) {
            for (c, a) in self.reader.poll(Duration::ZERO) {
                self.install(c, a);
            }
            return;
        }
        let Some(s) = source() else {
            return self.install(cookie, Err(CfiMissing::Unreadable));
        };
        if !self.reader.request(cookie, s) {
            return self.install(cookie, Err(CfiMissing::TimedOut));
        }
        let start = Instant::now();
        let deadline = start + CFI_FIRST_WAIT.min(self.round_wait);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            for (c, a) in self.reader.poll(left) {
                self.install(c, a);
            }
            if !self.reader.is_pending(cookie) || left.is_zero() {
                break;
            }
        }
        let waited = start.elapsed();
        self.round_wait = self.round_wait.saturating_sub(waited);
        // Waiting is not unwinding: the round's and window's clocks stop.
        self.round_start += waited;
        self.window_start += waited;
    }

    /// Takes a binary's answer into the table.
    fn install(&mut self, cookie: Cookie, answer: CfiAnswer) {
        match self.binaries.get(&cookie) {
            // A read given up after the timeout that answered after all.
            Some(Err(CfiMissing::TimedOut)) => {
                self.binaries.remove(&cookie);
                self.stats.unreadable = self.stats.unreadable.saturating_sub(1);
            }
            Some(_) => return,
            None => {}
        }
        self.maybe_reset();
        let entry = match answer {
            Ok(sections) => {
                let n = sections.bytes() as u64;
                if self.held + n > MAX_CFI_HELD {
                    self.binaries.retain(|_, b| b.is_err());
                    self.held = 0;
                    self.stats.flushes += 1;
                }
                self.held += n;
                self.stats.binaries += 1;
                self.stats.from_debug_file += u64::from(sections.from_debug_file);
                self.stats.bytes += n;
                self.generations += 2;
                let unwinder = sections.unwinder();
                Ok(Loaded {
                    sections,
                    unwinder,
                    timed: 0,
                    spent: Duration::ZERO,
                    frames: 0,
                })
            }
            Err(why) => {
                match &why {
                    CfiMissing::NoCfi => self.stats.without_cfi += 1,
                    CfiMissing::Refused(reason) => {
                        self.stats.refused += 1;
                        if self.refusals.len() < MAX_REFUSALS_KEPT {
                            self.refusals.push((cookie, reason.clone()));
                        }
                    }
                    CfiMissing::Unreadable | CfiMissing::TimedOut => self.stats.unreadable += 1,
                    CfiMissing::Demoted => {}
                }
                Err(why)
            }
        };
        self.binaries.insert(cookie, entry);
    }

    /// Unwinds one copied user stack, appending `PERF_CONTEXT_USER`, the
    /// user ip and the return addresses (innermost first) to `out`: the
    /// user part of a callchain, as the kernel writes it for frame
    /// pointers. `copy_size` is the size the events asked for (a stack
    /// needing bytes beyond a full copy was cut by it). `source` tells
    /// where a binary met for the first time is read from.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn unwind(
        &mut self,
        user: &UserStack<'_>,
        copy_size: u32,
        process: Option<&Process>,
        time: u64,
        mut source: impl FnMut(&Map) -> Option<CfiSource>,
        jit: &mut dyn JitFrames,
        out: &mut Vec<u64>,
    ) -> UnwindEnd {
        out.push(PERF_CONTEXT_USER);
        out.push(user.ip);
        if user.abi != ABI_64 {
            return UnwindEnd::Failed(broken::NOT_64_BIT);
        }
        self.stats.stacks += 1;
        let stack = user.stack;
        let sp0 = user.sp;
        let mut read_stack = |addr: u64| -> Result<u64, ()> {
            let off = usize::try_from(addr.checked_sub(sp0).ok_or(())?).map_err(|_| ())?;
            let b = stack.get(off..off.checked_add(8).ok_or(())?).ok_or(())?;
            Ok(u64::from_le_bytes(b.try_into().map_err(|_| ())?))
        };
        let mut regs = UnwindRegsX86_64::new(user.ip, user.sp, user.bp);
        let mut addr = FrameAddress::from_instruction_pointer(user.ip);
        let limit = out.len() + crate::MAX_STACK_FRAMES + 1;
        // The binary and own address of the frame `addr` was found from.
        let mut from: Option<(Cookie, u64)> = None;
        // Past the round's budget: every frame by its frame pointer.
        let mut fp_only = self.over_budget;
        self.stats.stacks_over_budget += u64::from(fp_only);
        while out.len() < limit {
            let map = process.and_then(|p| p.map_at(addr.address_for_lookup(), time));
            if map.is_none() {
                // Outside every mapping: the unwind has lost the real
                // frames (what follows would be stack data). Unless the
                // frame it came from is code its binary gives no unwind
                // information for although it has some (the dynamic
                // loader's `_start`, hand-written entry code): that is the
                // outermost frame, and this "caller" came from the
                // frame-pointer fallback. perf's stacks end there too.
                if self.is_entry_code(from) {
                    out.pop();
                    return UnwindEnd::Complete;
                }
                return UnwindEnd::Failed(broken::OUTSIDE_MAPPINGS);
            }
            let file = map.filter(|m| m.kind == MapKind::File);
            let mut bias = 0;
            // The binary whose unwind information steps this frame.
            let mut dwarf = None;
            if let Some(m) = file.filter(|_| !fp_only) {
                self.load(m.cookie, || source(m));
                match self.binaries.get(&m.cookie) {
                    Some(Ok(l)) => {
                        bias = l.sections.bias(m);
                        dwarf = Some(m.cookie);
                    }
                    None => self.stats.frames_while_loading += 1,
                    Some(Err(_)) => {}
                }
            }
            let moved = match addr {
                FrameAddress::InstructionPointer(a) => {
                    Some(FrameAddress::from_instruction_pointer(a.wrapping_sub(bias)))
                }
                FrameAddress::ReturnAddress(a) => {
                    FrameAddress::from_return_address(u64::from(a).wrapping_sub(bias))
                }
            };
            let Some(moved) = moved else {
                return UnwindEnd::Failed(broken::OUTSIDE_MAPPINGS);
            };
            from = file.map(|m| (m.cookie, moved.address_for_lookup()));
            let generated = map.is_some_and(|m| m.kind == MapKind::Anon) && !fp_only;
            let jit_step = if generated {
                self.jit_step(addr, &mut regs, time, jit, &mut read_stack)
            } else {
                None
            };
            let step = match (
                jit_step,
                dwarf.and_then(|c| Some((c, self.binaries.get_mut(&c)?))),
            ) {
                (Some(step), _) => step,
                (None, Some((c, Ok(l)))) => {
                    let t0 = (l.timed > 0).then(|| self.clock.cpu());
                    let hits = self.cache.stats().hit_count;
                    let step =
                        l.unwinder
                            .unwind_frame(moved, &mut regs, &mut self.cache, &mut read_stack);
                    self.window_misses += u32::from(self.cache.stats().hit_count == hits);
                    self.clock.stepped(c);
                    let mut demote = false;
                    if let Some(t0) = t0 {
                        l.spent += self.clock.cpu().saturating_sub(t0);
                        l.frames += 1;
                        l.timed -= 1;
                        let costly = l.spent.as_nanos()
                            > frame_cost_limit().as_nanos() * u128::from(l.frames);
                        demote = costly && l.spent > DEMOTE_AFTER;
                        if l.timed == 0 && !costly {
                            // Cleared.
                            l.spent = Duration::ZERO;
                            l.frames = 0;
                        }
                    }
                    if self.window_binaries.last() != Some(&c) {
                        self.window_binaries.push(c);
                    }
                    self.window_frames += 1;
                    if demote {
                        self.demote(c);
                    }
                    if self.window_frames >= WINDOW_FRAMES || self.window_misses >= WINDOW_MISSES {
                        self.end_window();
                        if self.over_budget && !fp_only {
                            fp_only = true;
                            self.stats.stacks_over_budget += 1;
                        }
                    }
                    step
                }
                (None, _) => {
                    self.empty
                        .unwind_frame(moved, &mut regs, &mut self.cache, &mut read_stack)
                }
            };
            match step {
                Ok(Some(ra)) => match FrameAddress::from_return_address(ra) {
                    Some(next) => {
                        self.stats.frames += 1;
                        out.push(ra);
                        addr = next;
                    }
                    None => return UnwindEnd::Complete,
                },
                Ok(None) => return UnwindEnd::Complete,
                Err(framehop::Error::CouldNotReadStack(at))
                    if stack.len() as u64 >= u64::from(copy_size)
                        && at >= sp0.saturating_add(stack.len() as u64) =>
                {
                    return UnwindEnd::Cut
                }
                // A step from entry code that fails is the end, as above.
                Err(_) if self.is_entry_code(from) => return UnwindEnd::Complete,
                Err(framehop::Error::CouldNotReadStack(_)) => {
                    return UnwindEnd::Failed(broken::STACK_UNREADABLE)
                }
                Err(_) => return UnwindEnd::Failed(broken::NO_RULE),
            }
        }
        UnwindEnd::Complete
    }

    /// Steps a frame of generated code by what its runtime said of it
    /// (`jit` module docs): its unwind information, else its epilogue.
    /// None: neither is known (the frame pointer then, as before).
    fn jit_step(
        &mut self,
        addr: FrameAddress,
        regs: &mut UnwindRegsX86_64,
        time: u64,
        jit: &mut dyn JitFrames,
        read_stack: &mut impl FnMut(u64) -> Result<u64, ()>,
    ) -> Option<Result<Option<u64>, framehop::Error>> {
        let lookup = addr.address_for_lookup();
        let info = jit.code_at(lookup, time);
        if let Some(JitCodeInfo {
            key,
            code,
            unwind: Some(unwind),
            ..
        }) = &info
        {
            if !self.jit_unwinders.contains_key(key) {
                self.maybe_reset();
                let built = match jit_sections(code.clone(), unwind) {
                    Ok(s) => {
                        self.generations += 2;
                        Some(s.unwinder())
                    }
                    Err(_) => {
                        self.stats.jit_unwind_refused += 1;
                        None
                    }
                };
                self.jit_unwinders.insert(*key, built);
            }
            if let Some(Some(u)) = self.jit_unwinders.get_mut(key) {
                let step = u.unwind_frame(addr, regs, &mut self.cache, read_stack);
                if step.is_ok() {
                    self.stats.jit_frames_cfi += 1;
                    return Some(step);
                }
            }
        }
        let ip = addr.address();
        let pid = jit.pid();
        let e = match self.epilogues.get(&(pid, ip)) {
            Some(e) => e.clone(),
            None => {
                let mut buf = [0u8; EPILOGUE_MAX_BYTES];
                let n = jit.read_memory(ip, time, &mut buf);
                let e = Epilogue::decode(&buf[..n], ip);
                if self.epilogues.len() >= MAX_EPILOGUES {
                    self.epilogues.clear();
                }
                self.epilogues.insert((pid, ip), e.clone());
                e
            }
        };
        let ra = e?.step(regs, read_stack)?;
        self.stats.jit_frames_epilogue += 1;
        Some(Ok(Some(ra)))
    }

    /// Whether `frame` (binary, own address) is code its binary has unwind
    /// information for, but not at that address (an FDE-less entry point).
    #[cold]
    fn is_entry_code(&mut self, frame: Option<(Cookie, u64)>) -> bool {
        let Some(key) = frame else {
            return false;
        };
        if let Some(&known) = self.entry_code.get(&key) {
            return known;
        }
        let Some(Ok(l)) = self.binaries.get(&key.0) else {
            return false;
        };
        let entry = l.sections.covers(key.1) == Some(false);
        if self.entry_code.len() >= ENTRY_CODE_CACHE {
            self.entry_code.clear();
        }
        self.entry_code.insert(key, entry);
        entry
    }
}

#[cfg(test)]
mod tests;
