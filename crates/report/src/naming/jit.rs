//! JIT code named by the session's `JitCode` markers (format version 7).
//!
//! A runtime writes its jitdump file late, so a function's marker may come
//! in a later chunk, even a later part, than its samples: the aggregation
//! collects every chunk's `JitCode` markers on the side (the marker
//! callback, never the per-sample path), and [`JitTable::build`] then
//! takes identical ones once and lays each `Jit` cookie's functions out as
//! ranges: an address is named by the function covering it, the later
//! `time` where two do (a writer never lets them overlap within one
//! cookie; a forged file may).
//!
//! ```text
//!   markers, painted oldest first:   [ f  t=1 )
//!                                          [ g  t=2      )
//!   ranges kept:                     [ f )[ g  t=2      )
//! ```
//!
//! The markers held are bounded ([`JitBudget`]): at most
//! [`MAX_JIT_MARKERS`] markers and [`MAX_JIT_BYTES`] bytes (code, names,
//! files and lines) in a report, shared by every worker; the rest are
//! counted and named in a warning, and their addresses fall back to the
//! perf map or an address.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use profkit_eventlog::{Cookie, JitCode, JitLine};
use profkit_symbols::{OffsetInfo, SourceLocation, SymbolId, SymbolInfo, SymbolOrigin};

use crate::hash::FxHashMap;

/// The most `JitCode` markers a report holds.
pub(crate) const MAX_JIT_MARKERS: u64 = 4 << 20;

/// The most bytes of `JitCode` markers a report holds (code bytes, names,
/// file names, lines as held in memory).
pub(crate) const MAX_JIT_BYTES: u64 = 512 << 20;

/// What is left of a report's JIT bounds, shared by every worker.
#[derive(Debug)]
pub(crate) struct JitBudget {
    markers: AtomicU64,
    bytes: AtomicU64,
    dropped: AtomicU64,
}

#[cfg(test)]
thread_local! {
    /// Tests: the bounds of the budgets made on this thread (markers,
    /// bytes), instead of [`MAX_JIT_MARKERS`] and [`MAX_JIT_BYTES`].
    pub(crate) static TEST_BOUNDS: std::cell::Cell<Option<(u64, u64)>> =
        const { std::cell::Cell::new(None) };
}

impl Default for JitBudget {
    fn default() -> Self {
        #[cfg(test)]
        if let Some((m, b)) = TEST_BOUNDS.with(std::cell::Cell::get) {
            return JitBudget::new(m, b);
        }
        JitBudget::new(MAX_JIT_MARKERS, MAX_JIT_BYTES)
    }
}

impl JitBudget {
    pub(crate) fn new(markers: u64, bytes: u64) -> JitBudget {
        JitBudget {
            markers: AtomicU64::new(markers),
            bytes: AtomicU64::new(bytes),
            dropped: AtomicU64::new(0),
        }
    }

    /// Takes one marker of `j`'s size from the budget; false (and counted)
    /// when it does not fit.
    pub(crate) fn take(&self, j: &JitCode) -> bool {
        let need = held_bytes(j);
        let took_marker = self
            .markers
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |m| m.checked_sub(1))
            .is_ok();
        if took_marker {
            if self
                .bytes
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |b| {
                    b.checked_sub(need)
                })
                .is_ok()
            {
                return true;
            }
            self.markers.fetch_add(1, Ordering::Relaxed);
        }
        self.dropped.fetch_add(1, Ordering::Relaxed);
        false
    }

    /// Markers not held for want of budget.
    pub(crate) fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

/// What a marker costs to hold.
fn held_bytes(j: &JitCode) -> u64 {
    let files: usize = j.files.iter().map(|f| f.len() + 24).sum();
    (std::mem::size_of::<JitCode>()
        + j.name.len()
        + j.code.as_ref().map_or(0, Vec::len)
        + files
        + j.lines.len() * std::mem::size_of::<JitLine>()) as u64
}

/// One cookie's functions and which of them names each address.
#[derive(Debug, Default)]
struct CookieCode {
    /// The distinct markers, oldest first.
    code: Vec<JitCode>,
    /// (start, end exclusive, index into `code`): sorted, not overlapping.
    ranges: Vec<(u64, u64, usize)>,
}

/// Every `Jit` cookie's functions, from all chunks of all parts read.
#[derive(Debug, Default)]
pub(crate) struct JitTable {
    cookies: FxHashMap<Cookie, CookieCode>,
    /// Markers not held: over [`MAX_JIT_MARKERS`] or [`MAX_JIT_BYTES`].
    pub(crate) dropped: u64,
}

impl JitTable {
    /// The table of the markers collected (in any order, duplicates
    /// included).
    pub(crate) fn build(mut markers: Vec<JitCode>, dropped: u64) -> JitTable {
        // Oldest first; ties in a fixed order, so a report is the same
        // however the chunks were shared among workers.
        markers.sort_by(|a, b| a.time.cmp(&b.time).then_with(|| order(a, b)));
        markers.dedup();
        let mut cookies: FxHashMap<Cookie, CookieCode> = FxHashMap::default();
        for j in markers {
            cookies.entry(j.cookie).or_default().code.push(j);
        }
        for c in cookies.values_mut() {
            let mut painted: BTreeMap<u64, (u64, usize)> = BTreeMap::new();
            for (i, j) in c.code.iter().enumerate() {
                if j.size > 0 {
                    paint(&mut painted, j.addr, j.addr.saturating_add(j.size), i);
                }
            }
            c.ranges = painted.into_iter().map(|(s, (e, i))| (s, e, i)).collect();
        }
        JitTable { cookies, dropped }
    }

    /// The function that names address `addr` of cookie `cookie`.
    pub(crate) fn at(&self, cookie: Cookie, addr: u64) -> Option<&JitCode> {
        let c = self.cookies.get(&cookie)?;
        let i = c.ranges.partition_point(|r| r.0 <= addr).checked_sub(1)?;
        let (_, end, j) = c.ranges[i];
        (addr < end).then(|| &c.code[j])
    }

    /// The function a symbol made by [`JitTable::name`] stands for: the
    /// newest with its start, size and name (only a forged file has two).
    pub(crate) fn of_symbol(&self, cookie: Cookie, s: &SymbolInfo) -> Option<&JitCode> {
        self.cookies
            .get(&cookie)?
            .code
            .iter()
            .rev()
            .find(|j| j.addr == s.start && j.size == s.size && j.name == s.raw_name)
    }

    /// Names the sorted, distinct `offsets` of `cookie` that a function
    /// covers; `others`, the symbolizer's answer for the rest (the perf
    /// map's, sorted), gets them added (symbols after its own), its
    /// offsets kept in order. With `lines`, each function's source
    /// location (its first line) goes into `locations`.
    pub(crate) fn name(
        &self,
        cookie: Cookie,
        covered: &[u64],
        mut others: profkit_symbols::BinaryResult,
        demangle: bool,
        locations: Option<&mut std::collections::HashMap<SymbolId, SourceLocation>>,
    ) -> profkit_symbols::BinaryResult {
        let mut ids: FxHashMap<*const JitCode, SymbolId> = FxHashMap::default();
        let mut mine = Vec::with_capacity(covered.len());
        let mut locs = Vec::new();
        for &o in covered {
            let Some(j) = self.at(cookie, o) else {
                continue;
            };
            let id = *ids.entry(j as *const JitCode).or_insert_with(|| {
                let id = SymbolId(others.symbols.len() as u32);
                others.symbols.push(SymbolInfo {
                    name: display_name(&j.name, demangle),
                    raw_name: j.name.clone(),
                    start: j.addr,
                    size: j.size,
                    file_offset: None,
                    origin: SymbolOrigin::PerfMap,
                });
                if let Some((file, line)) = line_at(j, 0).or_else(|| first_line(j)) {
                    locs.push((
                        id,
                        SourceLocation {
                            file: file.to_owned(),
                            line: Some(line),
                        },
                    ));
                }
                id
            });
            mine.push(OffsetInfo {
                offset: o,
                address: Some(o),
                symbol: Some(id),
                location: None,
                inlined: Vec::new(),
            });
        }
        if let Some(l) = locations {
            l.extend(locs);
        }
        let theirs = std::mem::take(&mut others.offsets);
        let mut merged = Vec::with_capacity(theirs.len() + mine.len());
        let (mut a, mut b) = (theirs.into_iter().peekable(), mine.into_iter().peekable());
        loop {
            let take_a = match (a.peek(), b.peek()) {
                (Some(x), Some(y)) => x.offset <= y.offset,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => break,
            };
            merged.extend(if take_a { a.next() } else { b.next() });
        }
        others.offsets = merged;
        others
    }
}

/// A total order on markers of the same time (any fixed one will do).
fn order(a: &JitCode, b: &JitCode) -> std::cmp::Ordering {
    (
        a.cookie, a.addr, a.size, a.index, &a.name, &a.code, &a.files,
    )
        .cmp(&(
            b.cookie, b.addr, b.size, b.index, &b.name, &b.code, &b.files,
        ))
        .then_with(|| {
            let key = |l: &JitLine| (l.offset, l.line, l.discrim, l.file);
            a.lines.iter().map(key).cmp(b.lines.iter().map(key))
        })
}

/// Marks `start..end` as named by `i`, over whatever named it before.
fn paint(map: &mut BTreeMap<u64, (u64, usize)>, start: u64, end: u64, i: usize) {
    // A range that starts before and reaches in: cut it at `start`, and
    // keep what it had past `end`.
    if let Some((&s, &(e, k))) = map.range(..start).next_back() {
        if e > start {
            map.insert(s, (start, k));
            if e > end {
                map.insert(end, (e, k));
            }
        }
    }
    // Ranges that start inside: gone, but for what one had past `end`.
    let inside: Vec<u64> = map.range(start..end).map(|(&s, _)| s).collect();
    for s in inside {
        if let Some((e, k)) = map.remove(&s) {
            if e > end {
                map.insert(end, (e, k));
            }
        }
    }
    map.insert(start, (end, i));
}

/// The source line of `offset` (from the function's start): the last line
/// entry at or before it.
pub(crate) fn line_at(j: &JitCode, offset: u64) -> Option<(&str, u32)> {
    let i = j
        .lines
        .partition_point(|l| l.offset <= offset)
        .checked_sub(1)?;
    let l = j.lines[i];
    Some((j.files.get(l.file as usize)?.as_str(), l.line))
}

fn first_line(j: &JitCode) -> Option<(&str, u32)> {
    let l = j.lines.first()?;
    Some((j.files.get(l.file as usize)?.as_str(), l.line))
}

/// The runtime's name as given; demangled only when it is a C++ or Rust
/// mangled name (`_Z…`, `_R…`) and demangling is on.
fn display_name(raw: &str, demangle: bool) -> String {
    if demangle && (raw.starts_with("_Z") || raw.starts_with("_R")) {
        if let Some(d) = profkit_symbols::demangle(raw) {
            return d;
        }
    }
    raw.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn f(cookie: Cookie, addr: u64, size: u64, time: u64, name: &str) -> JitCode {
        JitCode {
            cookie,
            addr,
            size,
            time,
            name: name.into(),
            ..Default::default()
        }
    }

    #[test]
    fn later_functions_win_where_they_overlap() {
        let t = JitTable::build(
            vec![
                f(1, 0x100, 0x100, 2, "g"),
                f(1, 0x80, 0x100, 1, "f"),
                f(1, 0x180, 0x10, 3, "h"),
                f(1, 0x100, 0x100, 2, "g"),
                f(2, 0x100, 0x10, 0, "other"),
            ],
            0,
        );
        let name = |c, a| t.at(c, a).map(|j| j.name.as_str());
        assert_eq!(name(1, 0x7f), None);
        assert_eq!(name(1, 0x80), Some("f"));
        assert_eq!(name(1, 0xff), Some("f"));
        assert_eq!(name(1, 0x100), Some("g"));
        assert_eq!(name(1, 0x17f), Some("g"));
        assert_eq!(name(1, 0x180), Some("h"));
        assert_eq!(name(1, 0x190), Some("g"));
        assert_eq!(name(1, 0x1ff), Some("g"));
        assert_eq!(name(1, 0x200), None);
        assert_eq!(name(2, 0x100), Some("other"));
        assert_eq!(name(3, 0x100), None);
        // Identical markers were taken once.
        assert_eq!(t.cookies[&1].code.len(), 3);
        // An older function under a newer one: the newer wins everywhere.
        let t = JitTable::build(
            vec![f(1, 0x100, 0x10, 5, "new"), f(1, 0x0, 0x1000, 1, "old")],
            0,
        );
        assert_eq!(t.at(1, 0x108).unwrap().name, "new");
        assert_eq!(t.at(1, 0x110).unwrap().name, "old");
        assert_eq!(t.at(1, 0xff).unwrap().name, "old");
    }

    #[test]
    fn lines_are_the_last_entry_at_or_before() {
        let mut j = f(1, 0x100, 0x10, 0, "f");
        j.files = vec!["a.py".into(), "b.py".into()];
        j.lines = vec![
            JitLine {
                offset: 2,
                line: 10,
                discrim: 0,
                file: 0,
            },
            JitLine {
                offset: 8,
                line: 20,
                discrim: 0,
                file: 1,
            },
        ];
        assert_eq!(line_at(&j, 0), None);
        assert_eq!(first_line(&j), Some(("a.py", 10)));
        assert_eq!(line_at(&j, 2), Some(("a.py", 10)));
        assert_eq!(line_at(&j, 7), Some(("a.py", 10)));
        assert_eq!(line_at(&j, 8), Some(("b.py", 20)));
        assert_eq!(line_at(&j, 0xf), Some(("b.py", 20)));
    }

    #[test]
    fn the_budget_bounds_markers_and_bytes() {
        let b = JitBudget::new(2, 1 << 20);
        let j = f(1, 0, 1, 0, "f");
        assert!(b.take(&j) && b.take(&j) && !b.take(&j));
        assert_eq!(b.dropped(), 1);
        let b = JitBudget::new(10, 1000);
        let mut big = f(1, 0, 2000, 0, "f");
        big.code = Some(vec![0; 2000]);
        assert!(!b.take(&big));
        assert!(
            b.take(&j),
            "a marker over the bytes left does not use up a marker"
        );
        assert_eq!(b.dropped(), 1);
    }

    #[test]
    fn names_are_shown_as_given_unless_mangled() {
        assert_eq!(
            display_name("py::f_three:/tmp/work.py", true),
            "py::f_three:/tmp/work.py"
        );
        assert_eq!(
            display_name("JS:*fib /tmp/x.js:3", true),
            "JS:*fib /tmp/x.js:3"
        );
        assert_eq!(display_name("_ZN2ns4workEi", true), "ns::work(int)");
        assert_eq!(display_name("_ZN2ns4workEi", false), "_ZN2ns4workEi");
    }
}
