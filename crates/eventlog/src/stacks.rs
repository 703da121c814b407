//! [`StackTable`]: the reader's side of call stacks, collected from the
//! session's `StackDef` markers.

use std::collections::HashMap;

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
}

impl StackTable {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
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

    /// Takes the definition out of an [`Event::StackDef`]; other events
    /// are ignored. Returns true if the event was a `StackDef` of a new id.
    pub fn add(&mut self, ev: &Event) -> bool {
        match ev {
            Event::StackDef { id, frames } => self.insert(*id, frames.clone()),
            _ => false,
        }
    }

    /// Adds every definition of `other` (a per-chunk or per-thread table).
    pub fn merge(&mut self, other: StackTable) {
        self.conflicts += other.conflicts;
        for (id, frames) in other.stacks {
            self.insert(id, frames.into_vec());
        }
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
        assert!(!t.add(&Event::Sample { offset: 1 }));
        let mut u = StackTable::new();
        u.insert(2, vec![]);
        u.insert(1, vec![f(1), f(2)]);
        t.merge(u);
        assert_eq!((t.len(), t.frame_count(), t.conflicts()), (2, 2, 1));
        assert_eq!(t.get(2), Some(&[][..]));
        assert_eq!(t.get(3), None);
    }
}
