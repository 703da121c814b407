//! Call stacks at sync time: a raw `PERF_SAMPLE_CALLCHAIN` becomes caller
//! frames resolved like samples ([`resolve_chain`]), and identical stacks
//! share one session-wide id ([`StackIds`]).
//!
//! # Implementation notes
//!
//! What the kernel writes, innermost first, for a kernel-mode sample of a
//! user process (a user-mode sample has only the second half):
//!
//! ```text
//!  [CONTEXT_KERNEL] ip k1 k2 ... [CONTEXT_USER] u0 u1 u2 ... (garbage)
//!                   ^^ the sample's own ip: dropped (it is the sample)
//!                      k1.. kernel callers: resolved through KernelMaps
//!                                            u0 = user ip at kernel entry
//!                                            u1.. return addresses from the
//!                                            frame-pointer walk: resolved
//!                                            through the process table at
//!                                            the sample's time
//! ```
//!
//! A frame that resolves to no binary becomes one `[unknown]` frame and the
//! rest of that context (user or kernel part) is dropped: a return address
//! outside every executable mapping means the frame-pointer walk left the
//! real frames (code built without frame pointers), and what follows is
//! stack data, not callers. Keeping those addresses would make almost every
//! such stack distinct: on a recorded cargo + cc1plus + python workload the
//! table would hold 4.3x more stacks (22 744 against 5 321 for 83 266
//! samples).

use crate::kernel::KernelMaps;
use crate::process::{Map, Process};
use profkit_eventlog::{Frame, COOKIE_UNKNOWN};
use profkit_perf::{PERF_CONTEXT_KERNEL, PERF_CONTEXT_MAX, PERF_CONTEXT_USER};
use std::collections::HashMap;

/// Most caller frames kept per stack; the outermost frames of a longer
/// stack are dropped and the sample counted in
/// [`profkit_eventlog::CpuAccounting::stacks_truncated`]. The kernel's own
/// default bound (`kernel.perf_event_max_stack`) is 127. The format's
/// limit: readers refuse longer stack definitions.
pub use profkit_eventlog::MAX_STACK_FRAMES;

/// Default bound of the stack table's memory, see [`StackStats`].
pub const DEFAULT_STACK_TABLE_BYTES: usize = 32 << 20;

/// Bytes a table entry costs besides its frames (boxed-slice key, id,
/// emitted flag, hash-table control byte and slack), for the memory bound.
const ENTRY_OVERHEAD: usize = 48;

/// What [`resolve_chain`] met besides frames.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ChainInfo {
    /// A frame resolved to no binary (kept as one `[unknown]` frame).
    pub unknown: bool,
    /// More than [`MAX_STACK_FRAMES`] frames: the outermost were dropped.
    pub truncated: bool,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Ctx {
    Kernel,
    User,
    /// Guest or hypervisor frames: not ours to resolve, skipped.
    Skip,
}

/// Resolves a raw callchain (innermost first, context markers included)
/// into caller frames, appended to `out` (cleared first).
///
/// The first non-marker entry is dropped when it equals the sample's `ip`
/// (the kernel always starts a chain with it); so `out` holds the callers
/// only and is empty for a sample with no caller. User entries resolve
/// through `process` at `time`, kernel entries through `kernel`; entries
/// before the first context marker belong to the sample's own mode.
pub fn resolve_chain(
    chain: impl Iterator<Item = u64>,
    ip: u64,
    sample_kernel: bool,
    process: Option<&Process>,
    kernel: &KernelMaps,
    time: u64,
    out: &mut Vec<Frame>,
) -> ChainInfo {
    out.clear();
    let mut info = ChainInfo::default();
    let mut ctx = if sample_kernel {
        Ctx::Kernel
    } else {
        Ctx::User
    };
    let mut first = true;
    // Set after an unknown frame: skip to the next context marker.
    let mut cut = false;
    // The live mapping the last user frame resolved through.
    let mut last: Option<&Map> = None;
    for addr in chain {
        if addr >= PERF_CONTEXT_MAX {
            ctx = match addr {
                PERF_CONTEXT_KERNEL => Ctx::Kernel,
                PERF_CONTEXT_USER => Ctx::User,
                _ => Ctx::Skip,
            };
            cut = false;
            continue;
        }
        if std::mem::take(&mut first) && addr == ip {
            continue;
        }
        if cut || ctx == Ctx::Skip {
            continue;
        }
        if out.len() == MAX_STACK_FRAMES {
            info.truncated = true;
            break;
        }
        let is_kernel = ctx == Ctx::Kernel;
        let resolved = if is_kernel {
            kernel.resolve(addr)
        } else if let Some(m) = last.filter(|m| m.start <= addr && addr < m.end) {
            // Callers often sit in the binary of the frame before.
            Some((m.cookie, m.offset(addr)))
        } else {
            process.and_then(|p| match p.lookup(addr, time) {
                Ok(m) => {
                    last = Some(m);
                    Some((m.cookie, m.offset(addr)))
                }
                Err(other) => other,
            })
        };
        out.push(match resolved {
            Some((cookie, offset)) => Frame {
                cookie,
                offset,
                kernel: is_kernel,
            },
            None => {
                info.unknown = true;
                cut = true;
                Frame {
                    cookie: COOKIE_UNKNOWN,
                    // Why the stack broke here (a kernel address in no
                    // known text is not said).
                    offset: if is_kernel {
                        profkit_eventlog::broken::NOT_SAID
                    } else {
                        profkit_eventlog::broken::OUTSIDE_MAPPINGS
                    },
                    kernel: is_kernel,
                }
            }
        });
    }
    info
}

/// The stack table's counters (`SyncStage::stack_stats`).
///
/// **Memory bound.** The table holds each distinct stack once, costing
/// about 24 bytes per frame plus 48 per stack. When a new stack would take
/// it past its bound ([`DEFAULT_STACK_TABLE_BYTES`], 32 MiB: some 100 000
/// stacks of 10 frames), the table is emptied (`flushes` counts it) and
/// starts again. Nothing is lost: ids keep increasing, so a stack seen
/// again gets a new id and a new `StackDef`; the file grows by those
/// definitions, the daemon's memory does not. Past 2³² − 1 ids in one
/// session (billions of definitions) samples are written without a stack.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StackStats {
    /// Distinct stacks in the table now.
    pub stacks: usize,
    /// Frames held, over those stacks.
    pub frames: usize,
    /// Bytes the table accounts for (the quantity bounded).
    pub bytes: usize,
    /// The bound.
    pub limit: usize,
    /// Stack ids handed out this session (including before flushes).
    pub ids: u64,
    /// Times the table was emptied at its bound.
    pub flushes: u64,
}

#[derive(Debug, Clone, Copy)]
struct Entry {
    id: u32,
    /// The epoch its `StackDef` was last written in (0: never).
    emitted: u32,
}

/// The sync stage's stack table: frames → session-wide id, and whether the
/// id's `StackDef` was written to the current session file.
#[derive(Debug)]
pub(crate) struct StackIds {
    map: HashMap<Box<[Frame]>, Entry, rustc_hash::FxBuildHasher>,
    next_id: u64,
    frames: usize,
    bytes: usize,
    limit: usize,
    /// Bumped by `reset` (a new session file): every id needs its
    /// definition again. Starts at 1 so that `emitted == 0` means never.
    epoch: u32,
    flushes: u64,
}

impl Default for StackIds {
    fn default() -> Self {
        Self {
            map: HashMap::default(),
            next_id: 0,
            frames: 0,
            bytes: 0,
            limit: DEFAULT_STACK_TABLE_BYTES,
            epoch: 1,
            flushes: 0,
        }
    }
}

impl StackIds {
    /// The id of `frames` (non-empty), and whether its `StackDef` must be
    /// written now (first use in this session file). `None` once the id
    /// space is exhausted.
    #[inline]
    pub(crate) fn id(&mut self, frames: &[Frame]) -> Option<(u32, bool)> {
        if let Some(e) = self.map.get_mut(frames) {
            let define = e.emitted != self.epoch;
            e.emitted = self.epoch;
            return Some((e.id, define));
        }
        self.insert(frames)
    }

    #[cold]
    fn insert(&mut self, frames: &[Frame]) -> Option<(u32, bool)> {
        let id = u32::try_from(self.next_id).ok()?;
        let cost = ENTRY_OVERHEAD + std::mem::size_of_val(frames);
        if self.bytes + cost > self.limit && !self.map.is_empty() {
            self.map = HashMap::default();
            self.frames = 0;
            self.bytes = 0;
            self.flushes += 1;
        }
        self.next_id += 1;
        self.frames += frames.len();
        self.bytes += cost;
        self.map.insert(
            frames.into(),
            Entry {
                id,
                emitted: self.epoch,
            },
        );
        Some((id, true))
    }

    /// The stack to define stack `id` (`frames`) on (`StackDefOn`): the
    /// longest proper outer part of `frames` that is itself a stack already
    /// defined in this session file, with a smaller id; and that part's
    /// length. Probes each suffix (at most `MAX_STACK_FRAMES` lookups, on
    /// a new definition only).
    #[cold]
    pub(crate) fn parent_of(&self, id: u32, frames: &[Frame]) -> Option<(u32, usize)> {
        let n = frames.len();
        (1..n).rev().find_map(|m| {
            self.map
                .get(&frames[n - m..])
                .filter(|e| e.emitted == self.epoch && e.id < id)
                .map(|e| (e.id, m))
        })
    }

    /// A new session file: every stack is defined again when next used.
    pub(crate) fn reset(&mut self) {
        self.epoch = self.epoch.wrapping_add(1).max(1);
        if self.epoch == 1 {
            // Wrapped (after 4 billion resets): clear the flags by hand.
            for e in self.map.values_mut() {
                e.emitted = 0;
            }
        }
    }

    /// A new part of a rotated session: nothing of the old table is
    /// needed (a part never refers to another's stacks), so the table
    /// starts empty and ids start from 0 again, which also keeps a
    /// weeks-long recording from running out of ids.
    pub(crate) fn restart(&mut self) {
        *self = StackIds {
            limit: self.limit,
            flushes: self.flushes,
            ..StackIds::default()
        };
    }

    pub(crate) fn set_limit(&mut self, bytes: usize) {
        self.limit = bytes;
    }

    pub(crate) fn stats(&self) -> StackStats {
        StackStats {
            stacks: self.map.len(),
            frames: self.frames,
            bytes: self.bytes,
            limit: self.limit,
            ids: self.next_id,
            flushes: self.flushes,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::{Map, MapKind};
    use profkit_eventlog::CookieEntry;

    const K: u64 = 0xffff_ffff_8100_0000;

    fn kernel() -> KernelMaps {
        let mut k = KernelMaps::default();
        k.text = Some((K, K + 0x100_0000));
        k.kernel = Some(CookieEntry {
            cookie: 77,
            kind: profkit_eventlog::CookieKind::Kernel,
            path: "[kernel.kallsyms]".into(),
            build_id: None,
            dev: 0,
            inode: 0,
            generation: 0,
            base: K,
            pid: None,
            file: Default::default(),
        });
        k
    }

    fn process() -> Process {
        let mut p = Process::default();
        p.map(
            Map {
                start: 0x40_0000,
                end: 0x50_0000,
                pgoff: 0x1000,
                cookie: 5,
                kind: MapKind::File,
                since: 0,
                until: u64::MAX,
            },
            0,
        );
        p
    }

    fn user(offset: u64) -> Frame {
        Frame {
            cookie: 5,
            offset,
            kernel: false,
        }
    }

    fn kern(offset: u64) -> Frame {
        Frame {
            cookie: 77,
            offset,
            kernel: true,
        }
    }

    const UNK_USER: Frame = Frame {
        cookie: COOKIE_UNKNOWN,
        offset: profkit_eventlog::broken::OUTSIDE_MAPPINGS,
        kernel: false,
    };

    #[test]
    fn kernel_sample_with_user_part() {
        let chain = [
            PERF_CONTEXT_KERNEL,
            K + 0x10, // the ip itself
            K + 0x20,
            K + 0x30,
            PERF_CONTEXT_USER,
            0x40_0100,
            0x40_0200,
        ];
        let mut out = Vec::new();
        let p = process();
        let info = resolve_chain(
            chain.into_iter(),
            K + 0x10,
            true,
            Some(&p),
            &kernel(),
            1,
            &mut out,
        );
        assert_eq!(info, ChainInfo::default());
        assert_eq!(out, [kern(0x20), kern(0x30), user(0x1100), user(0x1200)]);
    }

    #[test]
    fn unknown_user_frame_cuts_the_rest_of_its_context() {
        let chain = [
            PERF_CONTEXT_USER,
            0x40_0010,
            0x40_0100,
            0x7fff_0000, // stack data: the walk went wrong here
            0x40_0200,   // so this is garbage, dropped
            0,
        ];
        let mut out = Vec::new();
        let p = process();
        let info = resolve_chain(
            chain.into_iter(),
            0x40_0010,
            false,
            Some(&p),
            &kernel(),
            1,
            &mut out,
        );
        assert_eq!(
            info,
            ChainInfo {
                unknown: true,
                truncated: false
            }
        );
        assert_eq!(out, [user(0x1100), UNK_USER]);
        // Unknown process: one unknown frame.
        let info = resolve_chain(
            chain.into_iter(),
            0x40_0010,
            false,
            None,
            &kernel(),
            1,
            &mut out,
        );
        assert!(info.unknown);
        assert_eq!(out, [UNK_USER]);
    }

    #[test]
    fn first_entry_is_dropped_only_when_it_is_the_ip_and_guest_frames_are_skipped() {
        let p = process();
        let mut out = Vec::new();
        // No leading marker, first entry is not the ip: kept, in the sample's mode.
        resolve_chain(
            [0x40_0100, 0x40_0200].into_iter(),
            0x40_0010,
            false,
            Some(&p),
            &kernel(),
            1,
            &mut out,
        );
        assert_eq!(out, [user(0x1100), user(0x1200)]);
        // A sample with no caller.
        resolve_chain(
            [PERF_CONTEXT_USER, 0x40_0010].into_iter(),
            0x40_0010,
            false,
            Some(&p),
            &kernel(),
            1,
            &mut out,
        );
        assert!(out.is_empty());
        // Guest context: skipped until the next known context.
        let guest = PERF_CONTEXT_MAX + 1;
        resolve_chain(
            [
                PERF_CONTEXT_KERNEL,
                K,
                K + 8,
                guest,
                0x1234,
                PERF_CONTEXT_USER,
                0x40_0100,
            ]
            .into_iter(),
            K,
            true,
            Some(&p),
            &kernel(),
            1,
            &mut out,
        );
        assert_eq!(out, [kern(8), user(0x1100)]);
    }

    #[test]
    fn long_chains_are_truncated() {
        let p = process();
        let mut out = Vec::new();
        let chain = std::iter::once(PERF_CONTEXT_USER).chain((0..1000u64).map(|i| 0x40_0000 + i));
        let info = resolve_chain(chain, 0x40_0000, false, Some(&p), &kernel(), 1, &mut out);
        assert!(info.truncated);
        assert_eq!(out.len(), MAX_STACK_FRAMES);
        assert_eq!(out[0], user(0x1001));
    }

    #[test]
    fn ids_are_stable_defined_once_per_epoch_and_bounded() {
        let mut t = StackIds::default();
        let a = [user(1), user(2)];
        let b = [user(1)];
        assert_eq!(t.id(&a), Some((0, true)));
        assert_eq!(t.id(&b), Some((1, true)));
        assert_eq!(t.id(&a), Some((0, false)));
        t.reset();
        assert_eq!(t.id(&a), Some((0, true)));
        assert_eq!(t.id(&a), Some((0, false)));
        assert_eq!(t.id(&b), Some((1, true)));
        let s = t.stats();
        assert_eq!((s.stacks, s.frames, s.ids, s.flushes), (2, 3, 2, 0));
        assert_eq!(
            s.bytes,
            2 * ENTRY_OVERHEAD + 3 * std::mem::size_of::<Frame>()
        );
        // A bound that holds two stacks: the third flushes the table, and
        // a stack seen again gets a new id (and a new definition).
        t.set_limit(s.bytes + 1);
        let c = [user(3)];
        assert_eq!(t.id(&c), Some((2, true)));
        assert_eq!(t.stats().flushes, 1);
        assert_eq!(t.stats().stacks, 1);
        assert_eq!(t.id(&a), Some((3, true)));
        assert!(t.stats().bytes <= t.stats().limit);
        // Exhausted id space.
        t.next_id = u64::from(u32::MAX) + 1;
        assert_eq!(t.id(&[user(9)]), None);
        assert_eq!(t.id(&c), Some((2, false)), "known stacks keep their id");
    }

    #[test]
    fn a_stack_is_defined_on_its_longest_outer_part_written_in_this_file() {
        let mut ids = StackIds::default();
        let s = |o: &[u64]| o.iter().map(|&x| user(x)).collect::<Vec<_>>();
        let (outer, _) = ids.id(&s(&[3, 2, 1])).unwrap();
        let (mid, _) = ids.id(&s(&[2, 1])).unwrap();
        let (deep, _) = ids.id(&s(&[5, 4, 3, 2, 1])).unwrap();
        // [2, 1] has a larger id than [3, 2, 1]: not its parent.
        assert_eq!(ids.parent_of(outer, &s(&[3, 2, 1])), None);
        assert_eq!(ids.parent_of(deep, &s(&[5, 4, 3, 2, 1])), Some((outer, 3)));
        assert_eq!(ids.parent_of(mid, &s(&[2, 1])), None);
        // A new file: nothing is written in it yet, so no parent.
        ids.reset();
        assert_eq!(ids.parent_of(deep, &s(&[5, 4, 3, 2, 1])), None);
        assert_eq!(ids.id(&s(&[3, 2, 1])), Some((outer, true)));
        assert_eq!(ids.parent_of(deep, &s(&[5, 4, 3, 2, 1])), Some((outer, 3)));
    }
}
