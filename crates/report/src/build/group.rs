//! Grouping: every aggregated key's samples added to its row's column.
//! The general path places each key ([`Placer::place`]) and adds it in a
//! map of rows; where a row is decided by the binary and the symbol alone
//! (`-l`, the image summary: nothing separated by task, cgroup, CPU or
//! application), keys are counted per binary in an array indexed by
//! symbol instead, with no row key made or hashed per key. Either way the
//! rows come out as one list of the exact length ([`Grouped`]): the
//! [`super::rows::RowMaker`] makes a row of each in place.

use profkit_eventlog::Cookie;

use super::rows::{Placer, RowKey};
use crate::aggregate::{Key, KeyCounts};
use crate::hash::FxHashMap;
use crate::model::PerColumn;
use crate::naming::symbolize::Resolved;

/// Each row's key and its samples per column, every key once.
pub(super) type Grouped = Vec<(RowKey, PerColumn<u64>)>;

/// Each aggregated key's samples added to its row's column, on every
/// core: a key's row is a few hash lookups and a binary search, and a
/// report has hundreds of thousands of keys but few rows, so the per-worker
/// maps are small to merge.
pub(super) fn group_rows(counts: &KeyCounts, placer: &Placer<'_>, ncols: usize) -> Grouped {
    use rayon::prelude::*;
    if placer.by_binary_and_symbol() {
        return group_by_symbol(counts, placer, ncols);
    }
    fn add(
        placer: &Placer<'_>,
        ncols: usize,
        mut m: FxHashMap<RowKey, Vec<u64>>,
        k: &Key,
        n: u64,
    ) -> FxHashMap<RowKey, Vec<u64>> {
        if let Some((key, col)) = placer.place(k) {
            m.entry(key).or_insert_with(|| vec![0; ncols])[col] += n;
        }
        m
    }
    let grouped = counts.par_fold(FxHashMap::default, |m, k, n| add(placer, ncols, m, &k, n));
    let merged: FxHashMap<RowKey, Vec<u64>> =
        grouped
            .into_par_iter()
            .reduce(FxHashMap::default, |mut a, mut b| {
                if b.len() > a.len() {
                    std::mem::swap(&mut a, &mut b);
                }
                for (key, v) in b {
                    let t = a.entry(key).or_insert_with(|| vec![0; ncols]);
                    for (x, y) in t.iter_mut().zip(v) {
                        *x += y;
                    }
                }
                a
            });
    merged.into_iter().map(|(k, v)| (k, v.into())).collect()
}

/// One binary's samples in [`group_by_symbol`].
struct BySymbol<'p> {
    /// Its row without a symbol; `None`: its samples are filtered out.
    row: Option<RowKey>,
    /// Its symbols, when the report names them.
    resolved: Option<&'p Resolved>,
    /// Samples without a symbol (0), then per symbol id (`id + 1`); `None`
    /// where no key fell (a key of no samples still makes its row).
    counts: Vec<Option<u64>>,
}

/// [`group_rows`] where [`Placer::by_binary_and_symbol`]: per binary, the
/// row of its first key (which says whether its samples count at all) and
/// a count per symbol.
fn group_by_symbol<'p>(counts: &KeyCounts, placer: &Placer<'p>, ncols: usize) -> Grouped {
    use rayon::prelude::*;
    type Acc<'p> = FxHashMap<Cookie, BySymbol<'p>>;
    let symbols: &'p FxHashMap<Cookie, Resolved> = placer.symbols;
    let add = |mut m: Acc<'p>, k: Key, n: u64| -> Acc<'p> {
        let b = m.entry(k.cookie).or_insert_with(|| {
            let resolved = if placer.opts.symbols {
                symbols.get(&k.cookie)
            } else {
                None
            };
            BySymbol {
                row: placer.place(&k).map(|(row, _)| RowKey { sym: None, ..row }),
                resolved,
                counts: vec![None; resolved.map_or(0, |r| r.result.symbols.len()) + 1],
            }
        });
        if b.row.is_some() {
            let i = b
                .resolved
                .and_then(|r| r.symbol_of(k.offset))
                .map_or(0, |id| id.0 as usize + 1);
            if i >= b.counts.len() {
                b.counts.resize(i + 1, None);
            }
            let c = b.counts[i].get_or_insert(0);
            *c += n;
        }
        m
    };
    let merge = |mut a: Acc<'p>, b: Acc<'p>| -> Acc<'p> {
        for (cookie, y) in b {
            match a.get_mut(&cookie) {
                None => {
                    a.insert(cookie, y);
                }
                Some(x) => {
                    if x.counts.len() < y.counts.len() {
                        x.counts.resize(y.counts.len(), None);
                    }
                    for (s, t) in x.counts.iter_mut().zip(y.counts) {
                        if let Some(t) = t {
                            *s.get_or_insert(0) += t;
                        }
                    }
                }
            }
        }
        a
    };
    let per_binary: Acc<'p> = counts
        .par_fold(FxHashMap::default, add)
        .into_par_iter()
        .reduce(FxHashMap::default, merge);
    // Sized once, and a list, not a map: for a cargo build's `-l`, a map
    // of its 9,465 rows was 1.3 MB (grown by doubling, both tables held at
    // the step past 8,192), the list is 0.8 MB.
    let mut out = Vec::with_capacity(
        per_binary
            .values()
            .filter(|b| b.row.is_some())
            .map(|b| b.counts.iter().filter(|c| c.is_some()).count())
            .sum(),
    );
    for b in per_binary.into_values() {
        let Some(row) = b.row else {
            continue;
        };
        for (i, c) in b.counts.into_iter().enumerate() {
            let Some(c) = c else {
                continue;
            };
            let sym = i
                .checked_sub(1)
                .map(|i| profkit_symbols::SymbolId(i as u32));
            let mut v = PerColumn::from_elem(0, ncols);
            v[0] = c;
            out.push((RowKey { sym, ..row }, v));
        }
    }
    out
}
