//! A sorted, immutable address → symbol table with binary-search lookup.
//!
//! # Implementation notes
//!
//! Entries are sorted by start. Sizes are honoured: a lookup past an entry's end does not
//! return it. Entries may overlap (a label inside a function, perf-map code replaced at the
//! same address), so a lookup cannot stop at the nearest start below the address; it walks
//! back while an earlier entry could still reach the address, which `max_end` (the running
//! maximum of ends) bounds:
//!
//! ```text
//!   start:   0x10      0x20  0x28       0x40
//!   entry:   [--f (0x10..0x38)------]
//!                      [g ]  (0x20..0x24)
//!                            [h  ]      (0x28..0x30)
//!                                       [i ...
//!   lookup(0x34): nearest start ≤ 0x34 is h (ends 0x30, miss) → g (miss) → f (hit)
//!   lookup(0x3c): h, then max_end before h is 0x38 ≤ 0x3c → stop: no symbol
//! ```
//!
//! For non-overlapping tables (the usual case) a lookup is one binary search and one check.

use crate::types::SymbolOrigin;

/// A symbol offered to the table builder.
#[derive(Clone, Debug)]
pub(crate) struct Candidate {
    pub start: u64,
    /// Recorded size; `None` (or `Some(0)`) means "up to the next symbol or `limit`".
    pub size: Option<u64>,
    /// Upper bound for an inferred end (end of the section, `_etext`, …).
    pub limit: Option<u64>,
    pub name: Box<str>,
    pub origin: SymbolOrigin,
    /// Among candidates with the same start, the lowest rank is kept.
    pub rank: u64,
}

/// One symbol of a table.
#[derive(Clone, Debug)]
pub(crate) struct Entry {
    pub start: u64,
    pub end: u64,
    pub name: Box<str>,
    pub origin: SymbolOrigin,
}

impl Entry {
    /// This entry's range and origin, with no name.
    pub fn clone_range(&self) -> Entry {
        Entry {
            name: Box::default(),
            ..*self
        }
    }

    /// The size to report: the recorded or inferred size, 0 if unbounded.
    pub fn size(&self) -> u64 {
        if self.end == u64::MAX {
            0
        } else {
            self.end - self.start
        }
    }
}

/// The table. Cheap to share (`Send + Sync`, immutable).
#[derive(Clone, Debug, Default)]
pub(crate) struct SymbolTable {
    entries: Vec<Entry>,
    max_end: Vec<u64>,
    /// The names to show when demangling is on, one per entry (`None`: the raw
    /// name), when they were demangled ahead (a symbol index's); else the raw
    /// names are demangled when shown.
    shown: Option<Vec<Option<Box<str>>>>,
}

impl SymbolTable {
    /// Sorts, de-duplicates same-start candidates (lowest rank wins) and fixes inferred ends.
    pub fn build(mut cands: Vec<Candidate>) -> Self {
        cands.sort_by(|a, b| a.start.cmp(&b.start).then(a.rank.cmp(&b.rank)));
        cands.dedup_by(|later, kept| later.start == kept.start);
        let n = cands.len();
        let mut entries = Vec::with_capacity(n);
        for i in 0..n {
            let c = &cands[i];
            let end = match c.size {
                Some(size) if size > 0 => c.start.saturating_add(size),
                _ => {
                    let next = cands.get(i + 1).map_or(u64::MAX, |next| next.start);
                    let end = next.min(c.limit.unwrap_or(u64::MAX));
                    // A limit at or below the start (bad section data) still gives one byte.
                    end.max(c.start.saturating_add(1))
                }
            };
            entries.push((c.start, end, c.origin));
        }
        // The names moved, not copied: a whole table's names were held twice.
        let entries = entries
            .into_iter()
            .zip(cands)
            .map(|((start, end, origin), c)| Entry {
                start,
                end,
                name: c.name,
                origin,
            })
            .collect();
        Self::from_sorted(entries, None)
    }

    /// A table of entries already built (sorted by start, one per start), with their
    /// names to show when demangling is on (`shown`, one per entry) if known.
    pub fn from_sorted(entries: Vec<Entry>, shown: Option<Vec<Option<Box<str>>>>) -> Self {
        debug_assert!(entries.windows(2).all(|w| w[0].start < w[1].start));
        debug_assert!(shown.as_ref().is_none_or(|s| s.len() == entries.len()));
        let mut max_end = Vec::with_capacity(entries.len());
        let mut running = 0u64;
        for e in &entries {
            running = running.max(e.end);
            max_end.push(running);
        }
        SymbolTable {
            entries,
            max_end,
            shown,
        }
    }

    /// The index of the innermost entry containing `addr`.
    pub fn lookup(&self, addr: u64) -> Option<usize> {
        let mut i = self.entries.partition_point(|e| e.start <= addr);
        while i > 0 {
            i -= 1;
            if self.max_end[i] <= addr {
                return None;
            }
            if self.entries[i].end > addr {
                return Some(i);
            }
        }
        None
    }

    /// The entry at `index` (from [`SymbolTable::lookup`]).
    pub fn entry(&self, index: usize) -> &Entry {
        &self.entries[index]
    }

    /// The demangled name of entry `index`, when it was demangled ahead.
    pub fn shown(&self, index: usize) -> Option<&str> {
        let shown = self.shown.as_ref()?.get(index)?;
        Some(shown.as_deref().unwrap_or(&self.entries[index].name))
    }

    /// Entry `index`'s raw name and, when demangled ahead, its name to show
    /// ([`SymbolTable::shown`]), taken out of the table: its name is empty
    /// after. For a table made for one answer, whose every entry is named
    /// once (an index entry's symbols for the offsets asked), so that the
    /// names are held once, not twice.
    pub fn take_names(&mut self, index: usize) -> (String, Option<String>) {
        let shown = self
            .shown
            .as_mut()
            .and_then(|s| s.get_mut(index))
            .map(|s| s.take());
        let raw = std::mem::take(&mut self.entries[index].name).into_string();
        let shown = shown.map(|s| s.map_or_else(|| raw.clone(), str::into_string));
        (raw, shown)
    }

    /// Every entry, in start order.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_demangled_ahead_are_shown_and_taken_once_raw_where_the_same() {
        let e = |start: u64, name: &str| Entry {
            start,
            end: start + 8,
            name: name.into(),
            origin: SymbolOrigin::Symtab,
        };
        let mut t = SymbolTable::from_sorted(
            vec![e(0, "_ZN1a1bE"), e(16, "memcpy")],
            Some(vec![Some("a::b".into()), None]),
        );
        assert_eq!(t.shown(0), Some("a::b"));
        assert_eq!(t.shown(1), Some("memcpy"), "the same: the raw name");
        assert_eq!(t.take_names(1), ("memcpy".into(), Some("memcpy".into())));
        assert_eq!(t.take_names(0), ("_ZN1a1bE".into(), Some("a::b".into())));
        assert_eq!(t.lookup(17), Some(1), "ranges kept once names are taken");
        let mut plain = SymbolTable::from_sorted(vec![e(0, "f")], None);
        assert_eq!(plain.shown(0), None);
        assert_eq!(plain.take_names(0), ("f".into(), None));
    }

    fn cand(start: u64, size: Option<u64>, name: &str, rank: u64) -> Candidate {
        Candidate {
            start,
            size,
            limit: None,
            name: name.into(),
            origin: SymbolOrigin::Symtab,
            rank,
        }
    }

    fn name(t: &SymbolTable, addr: u64) -> Option<&str> {
        t.lookup(addr).map(|i| &*t.entry(i).name)
    }

    #[test]
    fn sizes_are_honoured() {
        let t = SymbolTable::build(vec![
            cand(0x10, Some(4), "a", 0),
            cand(0x20, Some(8), "b", 0),
        ]);
        assert_eq!(name(&t, 0x0f), None);
        assert_eq!(name(&t, 0x10), Some("a"));
        assert_eq!(name(&t, 0x13), Some("a"));
        assert_eq!(name(&t, 0x14), None, "one past a's end is not a");
        assert_eq!(name(&t, 0x27), Some("b"));
        assert_eq!(name(&t, 0x28), None);
    }

    #[test]
    fn unsized_symbols_extend_to_next_or_limit() {
        let mut last = cand(0x30, None, "c", 0);
        last.limit = Some(0x38);
        let t = SymbolTable::build(vec![
            cand(0x10, None, "a", 0),
            cand(0x20, Some(4), "b", 0),
            last,
        ]);
        assert_eq!(name(&t, 0x1f), Some("a"));
        assert_eq!(name(&t, 0x37), Some("c"));
        assert_eq!(name(&t, 0x38), None);
        assert_eq!(t.entry(0).size(), 0x10);
    }

    #[test]
    fn overlapping_entries_resolve_to_innermost_and_walk_back() {
        // The layout drawn in the module docs.
        let t = SymbolTable::build(vec![
            cand(0x10, Some(0x28), "f", 0),
            cand(0x20, Some(4), "g", 0),
            cand(0x28, Some(8), "h", 0),
            cand(0x40, Some(8), "i", 0),
        ]);
        assert_eq!(name(&t, 0x22), Some("g"));
        assert_eq!(name(&t, 0x2a), Some("h"));
        assert_eq!(name(&t, 0x34), Some("f"));
        assert_eq!(name(&t, 0x3c), None);
        assert_eq!(name(&t, 0x41), Some("i"));
    }

    #[test]
    fn same_start_keeps_lowest_rank() {
        let t = SymbolTable::build(vec![
            cand(0x10, Some(4), "weak_alias", 2),
            cand(0x10, Some(4), "global", 1),
        ]);
        assert_eq!(t.len(), 1);
        assert_eq!(name(&t, 0x11), Some("global"));
    }

    #[test]
    fn empty_table_finds_nothing() {
        let t = SymbolTable::build(Vec::new());
        assert!(t.is_empty());
        assert_eq!(t.lookup(0), None);
        assert_eq!(t.lookup(u64::MAX), None);
    }
}
