//! [`Builder`]: one [`BinaryResult`] as a resolver makes it, each symbol
//! interned once, answers per offset or as runs of one symbol.

use std::collections::HashMap;

use crate::demangle::display_name;
use crate::table::{Entry, SymbolTable};
use crate::types::{BinaryResult, OffsetInfo, SymbolId, SymbolInfo, SymbolOrigin, SymbolRun};

/// Keys of the symbols a result interns: which table, which entry.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum SymKey {
    Table(usize),
    PerfMap(usize),
    StandIn,
}

/// Accumulates one [`BinaryResult`].
pub(super) struct Builder<'r> {
    demangle: bool,
    pub(super) result: BinaryResult,
    ids: HashMap<SymKey, SymbolId>,
    /// Runs instead of per-offset answers ([`Symbolizer::symbolize_runs`]):
    /// then `result.offsets` stays empty, each answer is folded in here and
    /// `scratch` takes what a resolver would add to it.
    runs: Option<&'r mut Vec<SymbolRun>>,
    scratch: OffsetInfo,
    /// The last key interned and its id: sorted offsets mostly fall in
    /// the symbol of the one before (no hashing for them).
    last: Option<(SymKey, SymbolId)>,
    /// Symbols interned with their raw name, to demangle when the
    /// resolver is done ([`Symbolizer::run`]: all at once, on every core).
    pending: Option<&'r mut Vec<SymbolId>>,
}

impl<'r> Builder<'r> {
    pub(super) fn new(demangle: bool, capacity: usize) -> Builder<'r> {
        Builder {
            demangle,
            result: BinaryResult {
                path_used: None,
                debug_file_used: None,
                warnings: Vec::new(),
                no_symbols: None,
                symbols: Vec::new(),
                offsets: Vec::with_capacity(capacity),
            },
            ids: HashMap::new(),
            last: None,
            pending: None,
            runs: None,
            scratch: OffsetInfo {
                offset: 0,
                address: None,
                symbol: None,
                location: None,
                inlined: Vec::new(),
            },
        }
    }

    /// A builder of runs ([`Symbolizer::symbolize_runs`]).
    pub(super) fn of_runs(demangle: bool, runs: &'r mut Vec<SymbolRun>) -> Builder<'r> {
        Builder {
            runs: Some(runs),
            ..Builder::new(demangle, 0)
        }
    }

    /// This builder, leaving the names a table does not hold demangled to
    /// `pending` (demangled when the resolver is done).
    pub(super) fn deferring(self, pending: &'r mut Vec<SymbolId>) -> Builder<'r> {
        Builder {
            pending: Some(pending),
            ..self
        }
    }

    /// Whether per-offset details (source lines, inlined frames) are
    /// wanted: not by a builder of runs.
    pub(super) fn wants_details(&self) -> bool {
        self.runs.is_none()
    }

    pub(super) fn warn(&mut self, msg: impl Into<String>) {
        let msg = msg.into();
        if !self.result.warnings.contains(&msg) {
            self.result.warnings.push(msg);
        }
    }

    fn intern(&mut self, key: SymKey, make: impl FnOnce() -> SymbolInfo) -> SymbolId {
        if let Some((k, id)) = self.last {
            if k == key {
                return id;
            }
        }
        let symbols = &mut self.result.symbols;
        let id = *self.ids.entry(key).or_insert_with(|| {
            let id = SymbolId(symbols.len() as u32);
            symbols.push(make());
            id
        });
        self.last = Some((key, id));
        id
    }

    /// Interns entry `index` of `table`; `file_offset` maps its start back to the file.
    pub(super) fn intern_entry(
        &mut self,
        key: SymKey,
        table: &SymbolTable,
        index: usize,
        file_offset: impl FnOnce(u64) -> Option<u64>,
    ) -> SymbolId {
        let e = table.entry(index);
        let names = || (e.name.to_string(), table.shown(index).map(str::to_owned));
        self.intern_named(key, e, file_offset, names)
    }

    /// Interns the symbol `e` as `key` when `key` is new: its start's file
    /// offset by `file_offset`, its raw name and its name demangled ahead
    /// (if it was) by `names`.
    pub(super) fn intern_named(
        &mut self,
        key: SymKey,
        e: &Entry,
        file_offset: impl FnOnce(u64) -> Option<u64>,
        names: impl FnOnce() -> (String, Option<String>),
    ) -> SymbolId {
        let demangle = self.demangle;
        let defer = self.pending.is_some();
        let mut deferred = false;
        let (start, size, origin) = (e.start, e.size(), e.origin);
        let id = self.intern(key, || {
            let (raw_name, shown) = names();
            SymbolInfo {
                name: match shown {
                    Some(shown) if demangle => shown,
                    _ if demangle && defer => {
                        deferred = true;
                        String::new()
                    }
                    _ => display_name(&raw_name, demangle),
                },
                raw_name,
                start,
                size,
                file_offset: file_offset(start),
                origin,
            }
        });
        if deferred {
            if let Some(p) = self.pending.as_deref_mut() {
                p.push(id);
            }
        }
        id
    }

    pub(super) fn stand_in(
        &mut self,
        name: String,
        start: u64,
        size: u64,
        origin: SymbolOrigin,
    ) -> SymbolId {
        self.intern(SymKey::StandIn, || SymbolInfo {
            raw_name: name.clone(),
            name,
            start,
            size,
            file_offset: None,
            origin,
        })
    }

    pub(super) fn push(
        &mut self,
        offset: u64,
        address: Option<u64>,
        symbol: Option<SymbolId>,
    ) -> &mut OffsetInfo {
        if let Some(runs) = &mut self.runs {
            match runs.last_mut() {
                Some(r) if r.symbol == symbol => r.last = offset,
                _ => runs.push(SymbolRun {
                    first: offset,
                    last: offset,
                    symbol,
                }),
            }
            self.scratch.offset = offset;
            self.scratch.address = address;
            self.scratch.symbol = symbol;
            return &mut self.scratch;
        }
        self.result.offsets.push(OffsetInfo {
            offset,
            address,
            symbol,
            location: None,
            inlined: Vec::new(),
        });
        self.result.offsets.last_mut().expect("just pushed")
    }

    /// Every offset unresolved (the binary could not be used).
    pub(super) fn unresolved(mut self, offsets: &[u64]) -> BinaryResult {
        for &off in offsets {
            self.push(off, None, None);
        }
        self.result
    }
}
