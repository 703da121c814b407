//! The sync stage's accounting part ([`Accounting`]): per-CPU counts of
//! everything the kernel produced (written, lost by kind, throttled,
//! skipped), the part of a rotated session they began at, losses waiting
//! for a marker (this round's unresolved samples, dropped chunks'
//! samples), and the first samples nothing resolved, as examples.
//!
//! Off-CPU intervals (a later issue) would count their own losses here.

use super::SyncStage;
use crate::process::{UnattributedSample, Unresolved};
use profkit_eventlog::{CpuAccounting, Event, LostKind};
use std::collections::BTreeMap;

/// Why a sample of this round was not resolved (a key of
/// [`Accounting::round_lost`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum LostKindKey {
    NoMapping,
    NoTask,
}

impl LostKindKey {
    pub(super) fn of(why: Unresolved) -> Self {
        match why {
            Unresolved::NoTask => LostKindKey::NoTask,
            Unresolved::NoMapping => LostKindKey::NoMapping,
        }
    }

    pub(super) fn kind(self) -> LostKind {
        match self {
            LostKindKey::NoMapping => LostKind::NoMapping,
            LostKindKey::NoTask => LostKind::NoTask,
        }
    }
}

/// See the module docs.
#[derive(Debug, Default)]
pub(super) struct Accounting {
    /// Per CPU, the session's counts.
    pub(super) acct: BTreeMap<u32, CpuAccounting>,
    /// `acct` when the current part of a rotated session began.
    pub(super) part_base: BTreeMap<u32, CpuAccounting>,
    /// The round the current part began with.
    pub(super) part_first_round: u64,
    /// Losses of dropped chunks, written first thing next round.
    pub(super) pending_lost: Vec<(u32, LostKind, u64)>,
    /// This round's samples that resolved to nothing, per CPU and why.
    pub(super) round_lost: BTreeMap<(u32, LostKindKey), u64>,
    /// The loss markers this round's chunk carries from dropped ones.
    pub(super) carried_lost: Vec<(u32, LostKind, u64)>,
    /// The first samples that resolved to nothing, as examples.
    pub(super) unattributed: Vec<UnattributedSample>,
}

impl Accounting {
    #[inline]
    pub(super) fn cpu(&mut self, cpu: u32) -> &mut CpuAccounting {
        self.acct.entry(cpu).or_insert_with(|| CpuAccounting {
            cpu,
            ..Default::default()
        })
    }

    pub(super) fn add_pending_lost(&mut self, cpu: u32, kind: LostKind, n: u64) {
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
}

impl SyncStage {
    #[inline]
    pub(super) fn acct(&mut self, cpu: u32) -> &mut CpuAccounting {
        self.acc.cpu(cpu)
    }

    /// Per-CPU accounting so far.
    pub fn accounting(&self) -> Vec<CpuAccounting> {
        self.acc.acct.values().cloned().collect()
    }

    /// Per-CPU accounting of the current part of a rotated session (all
    /// of it without rotation): what the part's footer says, so that the
    /// parts' footers add up to the session's counts.
    pub fn part_accounting(&self) -> Vec<CpuAccounting> {
        self.acc
            .acct
            .values()
            .map(|a| match self.acc.part_base.get(&a.cpu) {
                Some(b) => a.minus(b),
                None => a.clone(),
            })
            .collect()
    }

    /// Rounds of the current part.
    pub fn part_rounds(&self) -> u64 {
        self.round - self.acc.part_first_round
    }

    /// Records that a chunk could not be stored (event buffer full, or the
    /// write failed): its samples move from written to lost, and its
    /// metadata and a LOST marker per CPU go into the next chunk.
    pub fn chunk_dropped(&mut self, chunk: super::Chunk, kind: LostKind) {
        for (cpu, k, n) in chunk.carried_lost {
            self.acc.add_pending_lost(cpu, k, n);
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
            self.acc.add_pending_lost(cpu, kind, n);
        }
        for &(cpu, n) in &chunk.offcpu {
            let a = self.acct(cpu);
            a.offcpu_intervals -= n.min(a.offcpu_intervals);
            a.offcpu_dropped = a.offcpu_dropped.saturating_add(n);
        }
        // Cookie definitions must reach the log before samples using them
        // in later chunks: re-emit the dropped chunk's metadata.
        self.out.pending_meta.extend(chunk.meta);
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
                self.out.enc.event(&Event::Lost {
                    cpu,
                    kind: LostKind::Reconcile,
                    count: diff,
                });
            }
        }
    }

    /// A LOST record (or lost samples): counted, and a marker at its place.
    pub(super) fn lost(&mut self, cpu: u32, kind: LostKind, count: u64) {
        self.acct(cpu).add_lost(kind, count);
        self.out.enc.event(&Event::Lost { cpu, kind, count });
    }

    /// The first samples of the session that resolved to nothing (at most
    /// [`crate::UNATTRIBUTED_EXAMPLES`]), to tell where they come from.
    pub fn unattributed_examples(&self) -> &[UnattributedSample] {
        &self.acc.unattributed
    }

    #[cold]
    pub(super) fn keep_unattributed(
        &mut self,
        pid: u32,
        tid: u32,
        ip: u64,
        time: u64,
        kernel: bool,
        reason: Unresolved,
    ) {
        if self.acc.unattributed.len() < crate::UNATTRIBUTED_EXAMPLES {
            let comm = self.procs.process_comm(pid).map(str::to_string);
            self.acc.unattributed.push(UnattributedSample {
                pid,
                tid,
                ip,
                time,
                kernel,
                reason,
                comm,
            });
        }
    }
}
