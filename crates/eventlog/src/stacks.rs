//! [`StackTable`]: the reader's side of call stacks, collected from the
//! session's `StackDef` and `StackDefOn` markers.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::event::{Event, Frame};

/// A session's stack table: stack id → caller frames (innermost first),
/// built from the [`Event::StackDef`] markers of every chunk.
///
/// Stack ids are session-wide and a definition may sit in any chunk before
/// or after the samples that use it (the sync stage writes it in the first
/// chunk that uses the stack, or in the next chunk when that one was
/// dropped), so a report decodes chunks (in parallel if it likes), feeds
/// each `StackDef` here, and resolves sample stacks once all chunks are
/// read. [`crate::SessionReader::stack_table`] does the collecting pass
/// on its own.
///
/// ```
/// use profkit_eventlog::{for_each_sample, ChunkEncoder, Event, Frame, StackTable};
/// let caller = Frame { cookie: 0xc0ffee, offset: 0x1234, kernel: false };
/// let mut enc = ChunkEncoder::new();
/// enc.event(&Event::StackDef { id: 7, frames: vec![caller] });
/// enc.sample_with_stack(0, 42, 42, false, 0xc0ffee, 0x1000, 7);
///
/// let mut table = StackTable::new();
/// let mut stacks = Vec::new();
/// for_each_sample(enc.bytes(), |s| stacks.push(s.stack), |m| { table.add(&m); }).unwrap();
/// assert_eq!(stacks, [Some(7)]);
/// assert_eq!(table.get(7), Some(&[caller][..]));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StackTable {
    stacks: HashMap<u32, Box<[Frame]>>,
    frames: usize,
    conflicts: u64,
    /// `StackDefOn` definitions whose parent is not (yet) known: (id,
    /// parent, own frames). Resolved as parents arrive (another chunk's
    /// table merged in).
    pending: Vec<(u32, u32, Box<[Frame]>)>,
    /// Frames held for `StackDefOn` stacks (bounded by [`ON_FRAME_BUDGET`]).
    on_frames: usize,
    /// `StackDefOn` definitions refused: a parent not before the child,
    /// more than `MAX_STACK_FRAMES` frames in all, or past the budget.
    refused: u64,
    /// The budget shared with other tables of the same reader (one
    /// report's workers and parts), when there is one; else this table's
    /// own [`ON_FRAME_BUDGET`].
    budget: Option<FrameBudget>,
}

/// Frames that the `StackDefOn` stacks of several [`StackTable`]s may hold
/// together: one report decodes chunks on several workers and reads
/// several parts, each into tables of its own, and their stacks are all
/// held at once, so one budget must cover them all (a per-table budget let
/// a 10 MB file cost 2.97 GB, issue 25). Clones share the budget.
#[derive(Debug, Clone)]
pub struct FrameBudget {
    left: Arc<AtomicUsize>,
    size: usize,
}

impl FrameBudget {
    /// A budget of `frames` frames.
    pub fn new(frames: usize) -> Self {
        FrameBudget {
            left: Arc::new(AtomicUsize::new(frames)),
            size: frames,
        }
    }

    /// The frames it started with.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The budget a reader of `bytes` bytes of session files is given:
    /// what the files justify (16 frames per byte, plus 1 M), never more
    /// than [`ON_FRAME_BUDGET`]. A `StackDefOn` of a few own frames takes
    /// 20-35 bytes and may hold up to 256 frames: deep recursion through
    /// many call paths (interpreters, recursive descent) needs 5-10 frames
    /// per byte, so 16 leaves room; the cap is what bounds a crafted file.
    pub fn for_bytes(bytes: u64) -> Self {
        let justified = bytes.saturating_mul(16).saturating_add(1 << 20);
        Self::new(
            usize::try_from(justified)
                .unwrap_or(usize::MAX)
                .min(ON_FRAME_BUDGET),
        )
    }

    /// Frames left.
    pub fn remaining(&self) -> usize {
        self.left.load(Ordering::Relaxed)
    }

    /// Takes `n` frames if that many are left.
    fn take(&self, n: usize) -> bool {
        self.left
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |left| {
                left.checked_sub(n)
            })
            .is_ok()
    }
}

impl PartialEq for FrameBudget {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.left, &other.left)
    }
}

impl Eq for FrameBudget {}

/// Most frames a table holds for stacks defined on a parent
/// (`StackDefOn`): such a definition costs its own frames in the file but
/// all of its frames in memory, so a crafted file could otherwise make a
/// report hold 256 frames per few bytes. 16 M frames (about 400 MiB);
/// a 10-second DWARF session of a recursive sort holds 0.2 M.
pub const ON_FRAME_BUDGET: usize = 1 << 24;

impl StackTable {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// An empty table whose `StackDefOn` stacks draw on `budget`, shared
    /// with the other tables given it (instead of a budget of its own).
    pub fn with_budget(budget: FrameBudget) -> Self {
        StackTable {
            budget: Some(budget),
            ..Self::default()
        }
    }

    /// Defines stack `id`. Returns true if the id was new. A session defines
    /// an id again after `profctl reset` or a dropped chunk, always with the
    /// same frames; a definition with *different* frames (a writer bug or a
    /// forged file) keeps the first and is counted in
    /// [`StackTable::conflicts`].
    pub fn insert(&mut self, id: u32, frames: Vec<Frame>) -> bool {
        match self.stacks.get(&id) {
            Some(old) => {
                if **old != *frames {
                    self.conflicts += 1;
                }
                false
            }
            None => {
                self.frames += frames.len();
                self.stacks.insert(id, frames.into_boxed_slice());
                true
            }
        }
    }

    /// Defines stack `id` as `frames` followed by stack `parent`'s frames
    /// ([`Event::StackDefOn`]). Held back until the parent is known (it
    /// may come from another chunk: [`StackTable::merge`] resolves it).
    /// Returns true if the id was new and could be resolved now.
    pub fn insert_on(&mut self, id: u32, parent: u32, frames: Vec<Frame>) -> bool {
        if parent >= id {
            self.refused += 1;
            return false;
        }
        if self.stacks.contains_key(&parent) {
            self.resolve(id, parent, &frames)
        } else {
            self.pending.push((id, parent, frames.into_boxed_slice()));
            false
        }
    }

    fn resolve(&mut self, id: u32, parent: u32, own: &[Frame]) -> bool {
        let Some(p) = self.stacks.get(&parent) else {
            return false;
        };
        // Defined already (again after a reset, or in another table merged
        // in): nothing more is held, so nothing is charged or refused; a
        // different definition counts as a conflict.
        if let Some(old) = self.stacks.get(&id) {
            let same = old.len() == own.len() + p.len()
                && old[..own.len()] == *own
                && old[own.len()..] == **p;
            if !same {
                self.conflicts += 1;
            }
            return false;
        }
        let n = own.len() + p.len();
        let within = match &self.budget {
            _ if n > crate::MAX_STACK_FRAMES => false,
            Some(b) => b.take(n),
            None => self.on_frames + n <= ON_FRAME_BUDGET,
        };
        if !within {
            self.refused += 1;
            return false;
        }
        let mut all = Vec::with_capacity(n);
        all.extend_from_slice(own);
        all.extend_from_slice(p);
        let new = self.insert(id, all);
        if new {
            self.on_frames += n;
        }
        new
    }

    /// Resolves the held-back definitions whose parents are known now
    /// (parents have smaller ids: one pass in id order). A reader that
    /// fed definitions in any order calls it once all are in.
    pub fn settle(&mut self) {
        if self.pending.is_empty() {
            return;
        }
        let mut pending = std::mem::take(&mut self.pending);
        pending.sort_unstable_by_key(|&(id, _, _)| id);
        for (id, parent, own) in pending {
            if self.stacks.contains_key(&parent) {
                self.resolve(id, parent, &own);
            } else {
                self.pending.push((id, parent, own));
            }
        }
    }

    /// Takes the definition out of an [`Event::StackDef`] or
    /// [`Event::StackDefOn`]; other events are ignored. Returns true if the
    /// event defined a new id (now).
    pub fn add(&mut self, ev: &Event) -> bool {
        match ev {
            Event::StackDef { id, frames } => self.insert(*id, frames.clone()),
            Event::StackDefOn { id, parent, frames } => {
                self.insert_on(*id, *parent, frames.clone())
            }
            _ => false,
        }
    }

    /// Adds every definition of `other` (a per-chunk or per-thread table),
    /// and resolves the definitions either held back for a parent the
    /// other has.
    pub fn merge(&mut self, other: StackTable) {
        self.conflicts += other.conflicts;
        self.refused += other.refused;
        // The other's stacks on a parent are held now by this table: they
        // count against its own budget (a shared budget was charged when
        // they were resolved).
        self.on_frames = self.on_frames.saturating_add(other.on_frames);
        if self.budget.is_none() {
            self.budget = other.budget.clone();
        }
        for (id, frames) in other.stacks {
            self.insert(id, frames.into_vec());
        }
        self.pending.extend(other.pending);
        self.settle();
    }

    /// `StackDefOn` definitions not resolved: refused (see
    /// [`ON_FRAME_BUDGET`]) or whose parent was never defined. Samples
    /// using them have no stack. 0 in a well-formed session.
    pub fn unresolved(&self) -> u64 {
        self.refused + self.pending.len() as u64
    }

    /// The caller frames of stack `id`, innermost first.
    pub fn get(&self, id: u32) -> Option<&[Frame]> {
        self.stacks.get(&id).map(|f| &**f)
    }

    /// Number of stacks.
    pub fn len(&self) -> usize {
        self.stacks.len()
    }

    /// True when no stack is defined.
    pub fn is_empty(&self) -> bool {
        self.stacks.is_empty()
    }

    /// Frames held, over all stacks.
    pub fn frame_count(&self) -> usize {
        self.frames
    }

    /// Redefinitions of an id with different frames (see
    /// [`StackTable::insert`]); 0 in a well-formed session.
    pub fn conflicts(&self) -> u64 {
        self.conflicts
    }

    /// Every stack, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &[Frame])> {
        self.stacks.iter().map(|(&id, f)| (id, &**f))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(offset: u64) -> Frame {
        Frame {
            cookie: 9,
            offset,
            kernel: false,
        }
    }

    #[test]
    fn first_definition_wins_and_conflicts_are_counted() {
        let mut t = StackTable::new();
        assert!(t.insert(1, vec![f(1), f(2)]));
        assert!(!t.insert(1, vec![f(1), f(2)]));
        assert_eq!(t.conflicts(), 0);
        assert!(!t.add(&Event::StackDef {
            id: 1,
            frames: vec![f(3)]
        }));
        assert_eq!(t.conflicts(), 1);
        assert_eq!(t.get(1), Some(&[f(1), f(2)][..]));
        assert!(!t.add(&Event::Sample {
            offset: 1,
            time: None
        }));
        let mut u = StackTable::new();
        u.insert(2, vec![]);
        u.insert(1, vec![f(1), f(2)]);
        t.merge(u);
        assert_eq!((t.len(), t.frame_count(), t.conflicts()), (2, 2, 1));
        assert_eq!(t.get(2), Some(&[][..]));
        assert_eq!(t.get(3), None);
    }

    /// Issue 25 (6): tables of one report (per worker, per part) share
    /// one budget, so merging them cannot hold more than it.
    #[test]
    fn tables_sharing_a_budget_hold_at_most_the_budget_together() {
        let budget = FrameBudget::new(1000);
        let parent: Vec<Frame> = (0..200).map(f).collect();
        let mut tables: Vec<StackTable> = (0..4)
            .map(|_| {
                let mut t = StackTable::with_budget(budget.clone());
                t.insert(1, parent.clone());
                for id in 2..10 {
                    t.insert_on(id, 1, vec![f(id as u64)]);
                }
                t
            })
            .collect();
        // 4 tables x 8 stacks x 201 frames asked; 4 fit in 1000 frames.
        let mut all = tables.remove(0);
        for t in tables {
            all.merge(t);
        }
        let resolved = (2..10).filter(|&id| all.get(id).is_some()).count();
        assert_eq!(budget.remaining(), 1000 - 4 * 201);
        assert_eq!(resolved, 4, "first come, first served across tables");
        assert_eq!(all.unresolved(), 4 * 8 - 4);
        // Without a shared budget, a merged table still counts what it
        // holds: its own budget is not started afresh.
        let mut a = StackTable::new();
        a.insert(1, parent.clone());
        a.insert_on(2, 1, vec![f(2)]);
        let mut b = StackTable::new();
        b.merge(a);
        assert_eq!(b.on_frames, 201);
        assert_eq!(FrameBudget::for_bytes(0).remaining(), 1 << 20);
        // A definition met again is not charged again.
        let budget = FrameBudget::new(300);
        let mut t = StackTable::with_budget(budget.clone());
        t.insert(1, parent.clone());
        assert!(t.insert_on(2, 1, vec![f(2)]));
        assert!(!t.insert_on(2, 1, vec![f(2)]));
        assert_eq!(
            (budget.remaining(), t.unresolved(), t.conflicts()),
            (99, 0, 0)
        );
        assert_eq!(
            FrameBudget::for_bytes(u64::MAX).remaining(),
            ON_FRAME_BUDGET
        );
    }

    #[test]
    fn stacks_defined_on_a_parent_resolve_in_any_order_and_bad_ones_are_counted() {
        let on = |id, parent, frames| Event::StackDefOn { id, parent, frames };
        // In stream order: resolved at once, own frames then the parent's.
        let mut t = StackTable::new();
        assert!(t.add(&Event::StackDef {
            id: 1,
            frames: vec![f(10), f(11)]
        }));
        assert!(t.add(&on(2, 1, vec![f(20)])));
        assert!(t.add(&on(3, 2, vec![f(30), f(31)])));
        assert_eq!(t.get(3), Some(&[f(30), f(31), f(20), f(10), f(11)][..]));
        // A chunk decoded before its parents' chunk: held, then resolved
        // by the merge (either way round) or by settle.
        let mut late = StackTable::new();
        late.add(&on(5, 4, vec![f(50)]));
        late.add(&on(4, 3, vec![f(40)]));
        assert_eq!((late.get(5), late.unresolved()), (None, 2));
        let mut first = t.clone();
        first.merge(late.clone());
        late.merge(t.clone());
        for u in [&first, &late] {
            assert_eq!(
                u.get(5),
                Some(&[f(50), f(40), f(30), f(31), f(20), f(10), f(11)][..])
            );
            assert_eq!(u.unresolved(), 0);
        }
        // A parent that is not older, a parent never defined, and more
        // frames than the format allows: refused or left unresolved,
        // counted, never a stack.
        let mut bad = t.clone();
        bad.add(&on(6, 6, vec![f(1)]));
        bad.add(&on(7, 100, vec![f(1)]));
        bad.add(&on(8, 3, vec![f(1); crate::MAX_STACK_FRAMES]));
        bad.settle();
        assert_eq!((bad.get(6), bad.get(7), bad.get(8)), (None, None, None));
        assert_eq!(bad.unresolved(), 3);
    }
}
