//! Call stacks after aggregation: the symbolized [`Stacks`] of a report,
//! the inclusive samples of each function (`--children`), and the
//! caller/callee blocks of `--callgraph`.
//!
//! # Implementation notes
//!
//! The parallel pass counts samples per (key, stack id), where the key is
//! the flat report's (cookie, offset[, cpu, pid, tid]) and the stack id
//! names the sample's callers in its session's stack table. Nothing is
//! named per sample: each distinct stack is turned into location indexes
//! once (a cache per (session, stack id)), each distinct (binary, offset)
//! becomes one [`Location`] looked up once, and samples whose locations,
//! column and thread agree are merged:
//!
//! ```text
//!  (key{cookie,offset,cpu,pid}, stack 7) ×120 ─┐   stack 7 = [ret c→d, ret b→c, ret main→b]
//!  (key{cookie,offset',cpu,pid}, stack 7) ×30 ─┤       frames at return address − 1
//!                                              ▼
//!  locations: leaf(offset) leaf(offset') c+0x12 b+0x40 main+0x2a   (one symbol lookup each)
//!  StackSample { column, pid, [leaf, c, b, main], 120 }   (and one for offset' if it is
//!                                                          in another function; else merged)
//! ```
//!
//! A function's inclusive samples are those whose stack holds it at least
//! once (a recursive function counts once per sample). Its caller in a
//! sample is the frame just outside its innermost occurrence, its callee
//! the frame just inside; a sample where it is the sampled function counts
//! as `[self]`. So callees plus self add up to the inclusive samples, and
//! callers add up to them less the samples where the function is the
//! outermost frame.

use profkit_eventlog::{Cookie, CookieKind};

use profkit_symbols::SymbolId;

use crate::aggregate::{Aggregate, Key, NO_STACK};
use crate::hash::{FxHashMap, FxHashSet};
use crate::model::*;
use crate::naming::apps::{Comms, Images};
use crate::naming::symbolize::Resolved;

/// [`Stacks`] plus, per function, the (cookie, symbol id, inlined) it
/// stands for (so `--children` can find the function's row): `inlined` is 0
/// for a symbol, else 1 + the inlined function's index in the binary's
/// [`Resolved::inline_name`]s (its symbol id is then `None`).
pub(crate) struct Built {
    pub stacks: Stacks,
    pub keys: Vec<FnKey>,
}

/// (cookie, symbol id, inlined): see [`Built::keys`].
pub(crate) type FnKey = (Cookie, Option<SymbolId>, u32);

struct Builder<'a> {
    symbols: &'a FxHashMap<Cookie, Resolved>,
    images: &'a Images<'a>,
    out: Stacks,
    keys: Vec<FnKey>,
    mapping_of: FxHashMap<Cookie, u32>,
    function_of: FxHashMap<(Cookie, Option<SymbolId>), u32>,
    inlined_of: FxHashMap<(Cookie, u32), u32>,
    /// (cookie, offset, the offset it is named at).
    location_of: FxHashMap<(Cookie, u64, u64), u32>,
}

impl Builder<'_> {
    fn mapping(&mut self, cookie: Cookie) -> u32 {
        if let Some(&m) = self.mapping_of.get(&cookie) {
            return m;
        }
        let entry = self.images.entry(cookie);
        let m = Mapping {
            path: entry.map_or_else(
                || self.images.name(cookie),
                |e| {
                    if e.kind == CookieKind::Anon {
                        self.images.name(cookie)
                    } else {
                        e.path.clone()
                    }
                },
            ),
            name: self.images.name(cookie),
            build_id: entry
                .and_then(|e| e.build_id.as_ref())
                .map(|b| b.iter().map(|x| format!("{x:02x}")).collect()),
            kernel: entry
                .is_some_and(|e| matches!(e.kind, CookieKind::Kernel | CookieKind::Module)),
            base: entry.map_or(0, |e| e.base),
        };
        let i = self.out.mappings.len() as u32;
        self.out.mappings.push(m);
        self.mapping_of.insert(cookie, i);
        i
    }

    /// A caller's location, at its call instruction (`ret` − 1), named
    /// there, or by its return address when the call instruction is in no
    /// symbol (as the sample stream and perf name callers: the first user
    /// frame of a kernel sample is the exact user ip, often a function's
    /// first instruction).
    fn caller(&mut self, cookie: Cookie, ret: u64) -> u32 {
        let at = ret.saturating_sub(1);
        let by_ret = self
            .symbols
            .get(&cookie)
            .is_some_and(|r| r.symbol_of(at).is_none() && r.symbol_of(ret).is_some());
        self.location_named(cookie, at, if by_ret { ret } else { at })
    }

    fn location(&mut self, cookie: Cookie, offset: u64) -> u32 {
        self.location_named(cookie, offset, offset)
    }

    /// The location at `offset`, named by the symbol at `name_at`.
    fn location_named(&mut self, cookie: Cookie, offset: u64, name_at: u64) -> u32 {
        if let Some(&l) = self.location_of.get(&(cookie, offset, name_at)) {
            return l;
        }
        let resolved = self.symbols.get(&cookie);
        let sym = resolved.and_then(|r| r.symbol_of(name_at));
        let function = match self.function_of.get(&(cookie, sym)) {
            Some(&f) => f,
            None => {
                let mapping = self.mapping(cookie);
                let info = sym.and_then(|id| resolved.map(|r| r.result.symbol(id)));
                let symbol = match info {
                    Some(i) => Symbol::Named(i.name.clone()),
                    None => Symbol::missing(cookie),
                };
                let f = self.out.functions.len() as u32;
                self.out.functions.push(Function {
                    symbol,
                    mapping,
                    start: info.map(|i| i.start),
                    inlined: false,
                });
                self.keys.push((cookie, sym, 0));
                self.function_of.insert((cookie, sym), f);
                f
            }
        };
        // Its inline chain: one function per distinct inlined name.
        let mut inlined = Vec::new();
        if let Some(r) = resolved.filter(|_| sym.is_some()) {
            for &i in r.inlined_at(name_at) {
                let f = match self.inlined_of.get(&(cookie, i)) {
                    Some(&f) => f,
                    None => {
                        let f = self.out.functions.len() as u32;
                        self.out.functions.push(Function {
                            symbol: Symbol::Named(r.inline_name(i).to_owned()),
                            mapping: self.function_mapping(function),
                            start: None,
                            inlined: true,
                        });
                        self.keys.push((cookie, None, i + 1));
                        self.inlined_of.insert((cookie, i), f);
                        f
                    }
                };
                inlined.push(f);
            }
        }
        let l = self.out.locations.len() as u32;
        self.out.locations.push(Location {
            mapping: self.function_mapping(function),
            offset,
            function,
            inlined,
        });
        self.location_of.insert((cookie, offset, name_at), l);
        l
    }

    fn function_mapping(&self, f: u32) -> u32 {
        self.out.functions[f as usize].mapping
    }
}

/// (column, session, pid, tid, leaf location, caller list id).
type MergeKey = (usize, u32, u32, u32, u32, u32);

/// Symbolizes and merges the stack samples of `agg` (whose
/// `stack_counts` and `stack_tables` are filled). `column` places a key
/// (None: filtered out); `by_thread` keeps thread ids apart.
pub(crate) fn build_stacks(
    agg: &Aggregate,
    symbols: &FxHashMap<Cookie, Resolved>,
    images: &Images<'_>,
    comms: &Comms,
    column: impl Fn(&Key) -> Option<usize>,
    by_thread: bool,
    warnings: &mut Vec<String>,
) -> Built {
    let mut b = Builder {
        symbols,
        images,
        out: Stacks::default(),
        keys: Vec::new(),
        mapping_of: FxHashMap::default(),
        function_of: FxHashMap::default(),
        inlined_of: FxHashMap::default(),
        location_of: FxHashMap::default(),
    };
    // Each distinct resolved caller list is held once (`lists`) and keys refer
    // to it by index: a frame list is not copied per (key, stack) while
    // merging, only once per merged sample at the end.
    // (The list and its map entry share one allocation.)
    let empty: std::rc::Rc<[u32]> = std::rc::Rc::from(Vec::new());
    let mut lists: Vec<std::rc::Rc<[u32]>> = vec![empty.clone()];
    let mut list_id: FxHashMap<std::rc::Rc<[u32]>, u32> = FxHashMap::default();
    list_id.insert(empty, 0);
    let mut frames_of: FxHashMap<(u32, u32), u32> = FxHashMap::default();
    // (column, session, pid, tid, leaf, caller list) per (key, stack),
    // merged after sorting: a Vec of 32-byte entries rather than a map.
    let mut merged: Vec<(MergeKey, u64)> = Vec::new();
    let mut undefined = 0u64;
    let mut undefined_ids: FxHashSet<(u32, u32)> = FxHashSet::default();
    // Deterministic order: the map's order would make location ids (and
    // so pprof bytes) differ from run to run.
    let mut keys: Vec<(&(Key, u32, u32), &u64)> = agg.stack_counts.iter().collect();
    keys.sort_unstable_by(|a, b| a.0.cmp(b.0));
    // Stack ids are per file (part): looked up in their file's table.
    for (&(k, file, stack), &n) in keys {
        let Some(col) = column(&k) else {
            continue;
        };
        let leaf = b.location(k.cookie, k.offset);
        let mut list = 0;
        if stack != NO_STACK {
            let id = match frames_of.get(&(file, stack)) {
                Some(&id) => id,
                None => {
                    let f: Vec<u32> = match agg.stack_tables.get(&file).and_then(|t| t.get(stack)) {
                        Some(frames) => frames
                            .iter()
                            .map(|f| b.caller(f.cookie, f.offset))
                            .collect(),
                        None => {
                            undefined_ids.insert((file, stack));
                            Vec::new()
                        }
                    };
                    let id = match list_id.get(f.as_slice()) {
                        Some(&id) => id,
                        None => {
                            let id = lists.len() as u32;
                            let shared: std::rc::Rc<[u32]> = std::rc::Rc::from(f);
                            lists.push(shared.clone());
                            list_id.insert(shared, id);
                            id
                        }
                    };
                    frames_of.insert((file, stack), id);
                    id
                }
            };
            if id == 0 && undefined_ids.contains(&(file, stack)) {
                undefined += n;
            }
            list = id;
        }
        let tid = if by_thread { k.tid } else { 0 };
        merged.push(((col, k.sess, k.pid, tid, leaf, list), n));
    }
    drop(list_id);
    if undefined > 0 {
        warnings.push(format!(
            "{undefined} samples refer to {} call stacks whose definition was not read (in an \
             unreadable chunk): they are shown without callers",
            undefined_ids.len()
        ));
    }
    // Sorted before the samples are made: by (column, pid, tid, locations)
    // compared in place (leaf, then the shared caller list), the session
    // last so the order is total; moving 24-byte keys, not samples.
    merged.sort_unstable_by(
        |((c1, s1, p1, t1, l1, f1), _), ((c2, s2, p2, t2, l2, f2), _)| {
            (c1, p1, t1, l1)
                .cmp(&(c2, p2, t2, l2))
                .then_with(|| lists[*f1 as usize].cmp(&lists[*f2 as usize]))
                .then(s1.cmp(s2))
        },
    );
    // Equal keys are now adjacent: add them up.
    merged.dedup_by(|later, kept| {
        let same = later.0 == kept.0;
        if same {
            kept.1 += later.1;
        }
        same
    });
    let samples: Vec<StackSample> = merged
        .into_iter()
        .map(|((column, sess, pid, tid, leaf, list), count)| {
            let frames = &lists[list as usize];
            let mut locations = Vec::with_capacity(1 + frames.len());
            locations.push(leaf);
            locations.extend_from_slice(frames);
            StackSample {
                column,
                pid,
                tid,
                process: comms.name(sess, pid, pid).to_owned(),
                locations,
                count,
            }
        })
        .collect();
    b.out.samples = samples;
    Built {
        stacks: b.out,
        keys: b.keys,
    }
}

/// Calls `f(function, position)` for each distinct function of a sample's
/// stack, at its innermost occurrence (`funcs` is leaf first).
fn distinct(funcs: &[u32], stamp: &mut [u32], round: u32, mut f: impl FnMut(usize)) {
    for (i, &func) in funcs.iter().enumerate() {
        let s = &mut stamp[func as usize];
        if *s != round {
            *s = round;
            f(i);
        }
    }
}

/// The functions of a sample's stack, innermost first: each location's
/// inlined functions, then its own.
fn functions_of(st: &Stacks, s: &StackSample, out: &mut Vec<u32>) {
    out.clear();
    out.extend(s.locations.iter().flat_map(|&l| st.frames_of(l)));
}

/// Inclusive samples per function and column: the samples whose stack
/// holds the function.
pub(crate) fn inclusive(b: &Built, ncols: usize) -> Vec<(u32, Vec<u64>)> {
    let st = &b.stacks;
    let mut incl: Vec<Vec<u64>> = vec![Vec::new(); st.functions.len()];
    let mut stamp = vec![0u32; st.functions.len()];
    let mut funcs = Vec::new();
    for (round, s) in st.samples.iter().enumerate() {
        functions_of(st, s, &mut funcs);
        distinct(&funcs, &mut stamp, round as u32 + 1, |i| {
            let v = &mut incl[funcs[i] as usize];
            if v.is_empty() {
                v.resize(ncols, 0);
            }
            if let Some(c) = v.get_mut(s.column) {
                *c += s.count;
            }
        });
    }
    incl.into_iter()
        .enumerate()
        .filter(|(_, v)| !v.is_empty())
        .map(|(f, v)| (f as u32, v))
        .collect()
}

/// A block's callers or callees in print order: most samples first, then
/// by name.
pub(crate) fn sort_arcs(v: &mut [CallArc]) {
    v.sort_by(|a, b| {
        b.samples
            .cmp(&a.samples)
            .then_with(|| (&a.symbol, &a.image).cmp(&(&b.symbol, &b.image)))
    });
}

/// The blocks in print order: most samples first (own, or inclusive with
/// `by_inclusive`), then by name.
pub(crate) fn sort_entries(entries: &mut [CallEntry], by_inclusive: bool) {
    entries.sort_by(|a, b| {
        let key = |e: &CallEntry| {
            if by_inclusive {
                (e.total, e.self_samples)
            } else {
                (e.self_samples, e.total)
            }
        };
        key(b)
            .cmp(&key(a))
            .then_with(|| (&a.symbol, &a.image).cmp(&(&b.symbol, &b.image)))
    });
}

pub(crate) fn pct(n: u64, of: u64) -> f64 {
    if of == 0 {
        0.0
    } else {
        n as f64 * 100.0 / of as f64
    }
}

/// The caller/callee blocks: one per function whose share (self, or
/// inclusive with `by_inclusive`) reaches `threshold` percent of `total`.
pub(crate) fn call_graph(b: &Built, total: u64, threshold: f64, by_inclusive: bool) -> CallGraph {
    let st = &b.stacks;
    let nf = st.functions.len();
    let mut own = vec![0u64; nf];
    let mut incl = vec![0u64; nf];
    let mut callers: FxHashMap<(u32, u32), u64> = FxHashMap::default();
    let mut callees: FxHashMap<(u32, u32), u64> = FxHashMap::default();
    let mut stamp = vec![0u32; nf];
    let mut funcs = Vec::new();
    for (round, s) in st.samples.iter().enumerate() {
        functions_of(st, s, &mut funcs);
        let n = s.count;
        own[funcs[0] as usize] += n;
        distinct(&funcs, &mut stamp, round as u32 + 1, |i| {
            let f = funcs[i];
            incl[f as usize] += n;
            if let Some(&caller) = funcs.get(i + 1) {
                *callers.entry((f, caller)).or_insert(0) += n;
            }
            if i > 0 {
                *callees.entry((f, funcs[i - 1])).or_insert(0) += n;
            }
        });
    }
    let name = |f: u32| {
        let func = &st.functions[f as usize];
        (
            st.mappings[func.mapping as usize].name.clone(),
            func.display_name(),
            func.inlined,
        )
    };
    let mut arcs_in: FxHashMap<u32, Vec<(u32, u64)>> = FxHashMap::default();
    for ((f, c), n) in callers {
        arcs_in.entry(f).or_default().push((c, n));
    }
    let mut arcs_out: FxHashMap<u32, Vec<(u32, u64)>> = FxHashMap::default();
    for ((f, c), n) in callees {
        arcs_out.entry(f).or_default().push((c, n));
    }
    let arcs = |list: Option<Vec<(u32, u64)>>, of: u64| -> Vec<CallArc> {
        let mut v: Vec<CallArc> = list
            .unwrap_or_default()
            .into_iter()
            .map(|(f, n)| {
                let (image, symbol, inlined) = name(f);
                CallArc {
                    image,
                    symbol,
                    inlined,
                    samples: n,
                    percent: pct(n, of),
                }
            })
            .collect();
        sort_arcs(&mut v);
        v
    };
    let mut entries = Vec::new();
    let mut below = 0usize;
    for f in 0..nf as u32 {
        let (s, t) = (own[f as usize], incl[f as usize]);
        if t == 0 {
            continue;
        }
        let share = pct(if by_inclusive { t } else { s }, total);
        if share < threshold || (!by_inclusive && s == 0 && threshold > 0.0) {
            below += 1;
            continue;
        }
        let (image, symbol, inlined) = name(f);
        entries.push(CallEntry {
            image,
            symbol,
            inlined,
            self_samples: s,
            self_percent: pct(s, total),
            total: t,
            total_percent: pct(t, total),
            callers: arcs(arcs_in.remove(&f), t),
            callees: arcs(arcs_out.remove(&f), t),
        });
    }
    sort_entries(&mut entries, by_inclusive);
    CallGraph {
        entries,
        below_threshold: below,
        by_inclusive,
    }
}
