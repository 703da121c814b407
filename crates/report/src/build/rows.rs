//! Rows: where each aggregated sample goes ([`Placer`]: its row key and
//! column, or nowhere when filtered out), how a row key becomes a named
//! [`Row`] ([`RowMaker`], nesting dependent images under their application
//! in an image summary), and the sort and threshold cut.

use std::cmp::Ordering;
use std::sync::Arc;

use profkit_eventlog::{Cookie, CookieKind};
use profkit_symbols::SymbolId;

use super::group::Grouped;
use crate::aggregate::summary::{percent, percents};
use crate::aggregate::Key;
use crate::hash::FxHashMap;
use crate::model::*;
use crate::naming::apps::{Comms, Images};
use crate::naming::symbolize::Resolved;
use crate::options::ReportOptions;
use crate::spec::SortKey;

/// A row before names: which (thread, app, binary, symbol) it counts.
/// `sym` is `None` for samples in no symbol (or an image summary's row).
/// `inlined` is 0, or for an inlined function's row (`--children`) 1 + its
/// index in the image's [`Resolved::inline_name`]s.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) struct RowKey {
    pub sess: u32,
    pub tgid: u32,
    pub tid: u32,
    pub cgroup: u64,
    pub app: Cookie,
    pub has_app: bool,
    pub image: Cookie,
    pub sym: Option<SymbolId>,
    pub inlined: u32,
}

/// Places aggregated samples in rows and columns.
pub(super) struct Placer<'a> {
    pub opts: &'a ReportOptions,
    pub images: &'a Images<'a>,
    pub apps: &'a FxHashMap<(u32, u32), Cookie>,
    pub symbols: &'a FxHashMap<Cookie, Resolved>,
    pub col_of: &'a FxHashMap<u32, usize>,
    pub cgroups: &'a CgroupNames,
}

/// Cgroups as rows know them: one key per path, whatever its ids (a group
/// removed and made again under the same path has a new id; sessions of
/// other hosts number theirs apart), `[none]` for samples without one,
/// `[cgroup ID]` for an id its session does not name.
pub(super) struct CgroupNames {
    /// (session, id) → key: the index of its path in `paths`.
    keys: FxHashMap<(u32, u64), u64>,
    /// Paths, sorted; `[none]` first (key 0).
    paths: Vec<String>,
}

/// Keys of ids without a path: the id with this bit set.
const UNNAMED_CGROUP: u64 = 1 << 63;

impl CgroupNames {
    pub(super) fn new(defs: &FxHashMap<(u32, u64), String>) -> CgroupNames {
        let mut paths: Vec<String> = defs.values().cloned().collect();
        paths.sort_unstable();
        paths.dedup();
        paths.insert(0, "[none]".to_owned());
        let index: FxHashMap<&str, u64> = paths
            .iter()
            .enumerate()
            .map(|(i, p)| (p.as_str(), i as u64))
            .collect();
        let keys = defs.iter().map(|(&k, p)| (k, index[p.as_str()])).collect();
        CgroupNames { keys, paths }
    }

    /// The row key of cgroup `id` of session `sess`.
    pub(super) fn key(&self, sess: u32, id: u64) -> u64 {
        if id == 0 {
            return 0;
        }
        self.keys
            .get(&(sess, id))
            .copied()
            .unwrap_or(UNNAMED_CGROUP | id)
    }

    /// The name shown for a row key.
    pub(super) fn name(&self, key: u64) -> String {
        if key & UNNAMED_CGROUP != 0 {
            format!("[cgroup {}]", key & !UNNAMED_CGROUP)
        } else {
            self.paths[key as usize].clone()
        }
    }
}

impl Placer<'_> {
    /// The application column a sample is attributed to, if any.
    fn attribute(&self, k: &Key, kind: Option<&CookieKind>) -> Option<Cookie> {
        let (opts, sep) = (self.opts, self.opts.separate);
        let app = self.apps.get(&(k.sess, k.pid)).copied();
        let in_kernel = matches!(kind, Some(CookieKind::Kernel | CookieKind::Module));
        if opts.app_column || sep.kernel || (sep.lib && !in_kernel) {
            Some(app.unwrap_or(k.cookie))
        } else if sep.lib {
            Some(k.cookie)
        } else {
            None
        }
    }

    /// Whether a sample's row is decided by its binary and symbol alone:
    /// nothing separated by task, cgroup, CPU or application, nothing
    /// filtered by task or cgroup (an image filter, with no application
    /// column, looks at the binary only). Then every key of a binary with
    /// the same symbol has the same row, in column 0.
    pub(super) fn by_binary_and_symbol(&self) -> bool {
        let (opts, sep) = (self.opts, self.opts.separate);
        !(sep.thread
            || sep.cgroup
            || sep.cpu
            || sep.lib
            || sep.kernel
            || opts.app_column
            || opts.exclude_dependent)
            && opts.spec.cgroups.is_empty()
    }

    /// Where a sample goes: its row and column, or nowhere (filtered out).
    pub(super) fn place(&self, k: &Key) -> Option<(RowKey, usize)> {
        let (opts, sep, images) = (self.opts, self.opts.separate, self.images);
        let entry = images.entry(k.cookie);
        if opts.exclude_dependent {
            let app = self.apps.get(&(k.sess, k.pid)).copied().unwrap_or(k.cookie);
            if app != k.cookie {
                return None;
            }
        }
        let app = self.attribute(k, entry.map(|e| &e.kind));
        if !opts.spec.images.is_empty() || !opts.spec.exclude_images.is_empty() {
            let app_path = app.map(|a| images.match_path(a));
            if !opts
                .spec
                .wants_image(&images.match_path(k.cookie), app_path.as_deref())
            {
                return None;
            }
        }
        let cgroup = self.cgroups.key(k.sess, k.cgroup);
        if !opts.spec.cgroups.is_empty() && !opts.spec.wants_cgroup(&self.cgroups.name(cgroup)) {
            return None;
        }
        let sym = if opts.symbols {
            self.symbols
                .get(&k.cookie)
                .and_then(|r| r.symbol_of(k.offset))
        } else {
            None
        };
        let key = RowKey {
            sess: if sep.thread { k.sess } else { 0 },
            tgid: if sep.thread { k.pid } else { 0 },
            tid: if sep.thread { k.tid } else { 0 },
            cgroup: if sep.cgroup { cgroup } else { 0 },
            app: app.unwrap_or(0),
            has_app: app.is_some(),
            image: k.cookie,
            sym,
            inlined: 0,
        };
        let col = if sep.cpu {
            *self.col_of.get(&k.cpu)?
        } else {
            0
        };
        Some((key, col))
    }
}

/// Puts each symbol's name in the rows that show it ([`RowMaker::rows`]'s
/// `named`): moved from the symbols into its last row, copied into the
/// others. The symbols' names are not read after (a `-l` of a cargo
/// build held 1.3 MB of names twice, at the heap's peak).
pub(super) fn give_names(
    rows: &mut [Row],
    named: &Named,
    symbols: &mut FxHashMap<Cookie, Resolved>,
) {
    let mut uses: FxHashMap<(Cookie, SymbolId), u32> = FxHashMap::default();
    uses.reserve(named.len());
    for n in named.iter().flatten() {
        *uses.entry(*n).or_insert(0) += 1;
    }
    for (row, n) in rows.iter_mut().zip(named) {
        let Some((cookie, id)) = *n else {
            continue;
        };
        let info = symbols
            .get_mut(&cookie)
            .and_then(|r| r.result.symbols.get_mut(id.0 as usize));
        let (Some(info), Some(left)) = (info, uses.get_mut(&(cookie, id))) else {
            continue;
        };
        *left -= 1;
        let name = &mut info.name;
        row.symbol = Some(match *left {
            0 => std::mem::take(name),
            _ => name.clone(),
        });
    }
}

/// Turns row keys into named rows.
pub(super) struct RowMaker<'a> {
    pub opts: &'a ReportOptions,
    pub shown: ShownColumns,
    pub images: &'a Images<'a>,
    pub comms: &'a Comms,
    pub cgroups: &'a CgroupNames,
    pub symbols: &'a FxHashMap<Cookie, Resolved>,
    pub inclusive: Option<&'a FxHashMap<RowKey, Vec<u64>>>,
    pub ncols: usize,
}

/// Each binary's (and application's) name, shared by its rows.
type ImageNames = FxHashMap<Cookie, Arc<str>>;

/// The symbol each row of a list shows, whose name [`give_names`] puts
/// in it.
pub(super) type Named = Vec<Option<(Cookie, SymbolId)>>;

impl RowMaker<'_> {
    /// The rows of `grouped`, nested under their application in an image
    /// summary with `--separate=lib|kernel`. Rows not nested are made
    /// without their symbols' names: those are for [`give_names`], once
    /// each symbol's last row is known (`Named`: empty for nested rows,
    /// named here).
    pub(super) fn rows(&self, grouped: Grouped, denom: &[u64]) -> (Vec<Row>, Named) {
        if !self.shown.nested {
            // Rows are independent (names and figures of their own): made on
            // every core, each into its place in one list of the exact
            // length, as the keys' list is (made from a map, the workers'
            // lists grew by doubling and were then copied into one: twice
            // the rows' bytes at the heap's peak).
            use rayon::prelude::*;
            let names = self.image_names(grouped.iter().map(|(k, _)| k));
            let named: Named = grouped
                .iter()
                .map(|(k, _)| {
                    let sym = k.sym.filter(|_| k.inlined == 0 && self.shown.symbols)?;
                    self.symbols
                        .contains_key(&k.image)
                        .then_some((k.image, sym))
                })
                .collect();
            let rows = grouped
                .into_par_iter()
                .map(|(k, s)| self.row(&names, &k, s, denom, false))
                .collect();
            return (rows, named);
        }
        let names = self.image_names(grouped.iter().map(|(k, _)| k));
        let mut parents: FxHashMap<RowKey, Grouped> = FxHashMap::default();
        for (key, samples) in grouped {
            let parent = RowKey {
                image: key.app,
                sym: None,
                ..key
            };
            parents.entry(parent).or_default().push((key, samples));
        }
        let rows = parents
            .into_iter()
            .map(|(pkey, children)| {
                let mut sums = PerColumn::from_elem(0u64, self.ncols);
                for (_, s) in &children {
                    for (a, b) in sums.iter_mut().zip(s) {
                        *a += b;
                    }
                }
                let child_denom = if self.opts.global_percent {
                    denom.to_vec()
                } else {
                    sums.to_vec()
                };
                let mut row = self.row(&names, &pkey, sums, denom, true);
                let extra = row.extra_mut();
                extra.app = None;
                extra.children = children
                    .into_iter()
                    .map(|(k, s)| self.row(&names, &k, s, &child_denom, true))
                    .collect();
                row
            })
            .collect();
        (rows, Vec::new())
    }

    /// The name of each binary and application of `keys` (and of the
    /// binaries nested rows are under), made once and shared by their
    /// rows.
    fn image_names<'k>(&self, keys: impl Iterator<Item = &'k RowKey>) -> ImageNames {
        let mut names = ImageNames::default();
        for k in keys {
            for c in [k.image, k.app] {
                names.entry(c).or_insert_with(|| self.images.name(c).into());
            }
        }
        names
    }

    /// One row, with its inclusive columns under `--children`; its
    /// symbol's name when `named` (else an empty one, for [`give_names`]).
    fn row(
        &self,
        names: &ImageNames,
        key: &RowKey,
        samples: PerColumn<u64>,
        denom: &[u64],
        named: bool,
    ) -> Row {
        let (opts, shown, sep) = (self.opts, self.shown, self.opts.separate);
        let name = |c: Cookie| -> Arc<str> {
            names
                .get(&c)
                .cloned()
                .unwrap_or_else(|| self.images.name(c).into())
        };
        if key.inlined != 0 {
            return self.inlined_row(name(key.image), key, samples, denom);
        }
        let sym = key
            .sym
            .and_then(|id| self.symbols.get(&key.image).map(|r| (r, id)));
        let ns = if sep.thread {
            self.comms.ns(key.sess, key.tgid, key.tid)
        } else {
            (None, None)
        };
        let extra = RowExtra {
            app: (shown.app && key.has_app).then(|| name(key.app)),
            location: if shown.location {
                sym.and_then(|(r, id)| r.location(id, opts.long_filenames))
            } else {
                None
            },
            cgroup: sep.cgroup.then(|| self.cgroups.name(key.cgroup)),
            children: Vec::new(),
        };
        let mut row = Row {
            percent: percents(&samples, denom).into(),
            total: samples.iter().sum(),
            total_percent: percent(samples.iter().sum(), denom.iter().sum()),
            samples,
            image: name(key.image),
            symbol: shown.symbols.then(|| {
                sym.map_or_else(
                    || Symbol::missing(key.image).to_string(),
                    |(r, id)| match named {
                        true => r.result.symbol(id).name.clone(),
                        false => String::new(),
                    },
                )
            }),
            // Kept without --show-address too: --sort vma needs it.
            vma: sym.map(|(r, id)| r.result.symbol(id).start),
            thread: sep.thread.then(|| {
                Box::new(ThreadColumns {
                    tgid: Some(key.tgid),
                    tid: Some(key.tid),
                    comm: Some(self.comms.name(key.sess, key.tgid, key.tid).to_owned()),
                    ns_tgid: ns.0,
                    ns_tid: ns.1,
                })
            }),
            extra: (extra != RowExtra::default()).then(|| Box::new(extra)),
            inlined: false,
            inclusive: None,
        };
        self.add_inclusive(&mut row, key, denom);
        row
    }

    /// The row of an inlined function (`--children`): no self samples, no
    /// address or source location of its own.
    fn inlined_row(
        &self,
        image: Arc<str>,
        key: &RowKey,
        samples: PerColumn<u64>,
        denom: &[u64],
    ) -> Row {
        let name = self
            .symbols
            .get(&key.image)
            .map(|r| r.inline_name(key.inlined - 1))
            .unwrap_or_default();
        let mut row = Row {
            percent: percents(&samples, denom).into(),
            total: samples.iter().sum(),
            total_percent: percent(samples.iter().sum(), denom.iter().sum()),
            samples,
            symbol: Some(format!("{name} (inlined)")),
            inlined: true,
            ..Row::of_image(image)
        };
        self.add_inclusive(&mut row, key, denom);
        row
    }

    fn add_inclusive(&self, row: &mut Row, key: &RowKey, denom: &[u64]) {
        if let Some(incl) = self.inclusive {
            let v = incl
                .get(key)
                .cloned()
                .unwrap_or_else(|| vec![0; self.ncols]);
            let total = v.iter().sum();
            row.inclusive = Some(Box::new(Inclusive {
                percent: percents(&v, denom),
                total,
                total_percent: percent(total, denom.iter().sum()),
                samples: v,
            }));
        }
    }
}

/// Puts `rows[order[i]]` at `i`, in place (each cycle of the permutation
/// followed once, by swaps).
fn permute<T>(rows: &mut [T], mut order: Vec<usize>) {
    for i in 0..rows.len() {
        let mut j = i;
        while order[j] != i {
            let k = order[j];
            rows.swap(j, k);
            order[j] = j;
            j = k;
        }
        order[j] = j;
    }
}

fn compare(a: &Row, b: &Row, key: SortKey, inclusive: bool) -> Ordering {
    let by_samples = if inclusive {
        b.inclusive_total()
            .cmp(&a.inclusive_total())
            .then(b.total.cmp(&a.total))
    } else {
        b.total.cmp(&a.total)
    };
    let tie = || {
        a.image
            .cmp(&b.image)
            .then_with(|| a.symbol.cmp(&b.symbol))
            .then_with(|| a.app().cmp(&b.app()))
            .then_with(|| a.tgid().cmp(&b.tgid()))
            .then_with(|| a.tid().cmp(&b.tid()))
            .then_with(|| a.comm().cmp(&b.comm()))
            .then_with(|| a.cgroup().cmp(&b.cgroup()))
    };
    match key {
        SortKey::Samples => by_samples.then_with(tie),
        SortKey::Image => a.image.cmp(&b.image).then(by_samples).then_with(tie),
        SortKey::Symbol => {
            let (na, nb) = (
                a.symbol.as_deref().unwrap_or(&a.image),
                b.symbol.as_deref().unwrap_or(&b.image),
            );
            na.cmp(nb).then(by_samples).then_with(tie)
        }
        SortKey::Vma => {
            let vma = |r: &Row| r.vma.or(r.symbol.as_ref().map(|_| u64::MAX));
            match (vma(a), vma(b)) {
                (Some(x), Some(y)) => x.cmp(&y),
                (Some(_), None) => Ordering::Less,
                (None, Some(_)) => Ordering::Greater,
                (None, None) => Ordering::Equal,
            }
            .then(by_samples)
            .then_with(tie)
        }
    }
}

/// Sorts rows (and nested rows) by `opts.sort` and drops those below the
/// threshold, counting them in `below`.
pub(crate) fn sort_and_cut(
    rows: &mut Vec<Row>,
    opts: &ReportOptions,
    inclusive: bool,
    below: &mut usize,
) {
    // Cut first: only what is printed is sorted.
    if opts.threshold > 0.0 {
        let before = rows.len();
        rows.retain(|r| {
            let p = if inclusive {
                r.inclusive_total_percent()
            } else {
                r.total_percent
            };
            p >= opts.threshold
        });
        *below += before - rows.len();
    }
    // The order sorted, then the rows moved once: a row is a few hundred
    // bytes, and a merge sort moves each one about log n times.
    let mut order: Vec<usize> = (0..rows.len()).collect();
    order.sort_by(|&a, &b| compare(&rows[a], &rows[b], opts.sort, inclusive));
    permute(rows, order);
    if opts.reverse {
        rows.reverse();
    }
    for r in rows.iter_mut() {
        if let Some(e) = r.extra.as_mut().filter(|e| !e.children.is_empty()) {
            sort_and_cut(&mut e.children, opts, inclusive, below);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::permute;

    /// In place, as taking `rows[order[i]]` for each `i` would: every
    /// permutation of up to 6 elements, and shuffled larger ones.
    #[test]
    fn permute_puts_each_row_where_the_order_says() {
        fn check(order: Vec<usize>) {
            let rows: Vec<usize> = (100..100 + order.len()).collect();
            let want: Vec<usize> = order.iter().map(|&i| rows[i]).collect();
            let mut got = rows.clone();
            permute(&mut got, order.clone());
            assert_eq!(got, want, "{order:?}");
        }
        fn all(n: usize, prefix: &mut Vec<usize>) {
            if prefix.len() == n {
                return check(prefix.clone());
            }
            for i in 0..n {
                if !prefix.contains(&i) {
                    prefix.push(i);
                    all(n, prefix);
                    prefix.pop();
                }
            }
        }
        for n in 0..=6 {
            all(n, &mut Vec::new());
        }
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for n in [100usize, 1000, 4099] {
            let mut order: Vec<usize> = (0..n).collect();
            for i in (1..n).rev() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                order.swap(i, (x % (i as u64 + 1)) as usize);
            }
            check(order);
        }
    }
}
