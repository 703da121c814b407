//! [`KeyCounts`]: samples per aggregation [`Key`], held as narrowly as the
//! keys allow. Most reports (`-l`, `--sort image`, one session, nothing
//! separated) keep only the binary and offset of a key, and keep them per
//! binary ([`PerBinary`]): a table of offsets for each binary, 16 bytes an
//! entry where the whole key takes 48. On a cargo build's 111,543 distinct
//! offsets one map of whole keys was 6.4 MB of a `-l` report's 18 MB heap
//! peak, one of (binary, offset) keys 3.2 MB a worker (and as much again
//! while it grew); per binary, each table grows alone. Once every chunk
//! is counted, narrow counts are [`KeyCounts::sort`]ed into arrays: 16
//! bytes a key, each binary's offsets in order, which the symbolizer takes
//! as they are.

use profkit_eventlog::Cookie;

use super::Key;
use crate::hash::FxHashMap;

/// Counts per [`Key`]: narrow (binary, offset) while every key added has
/// its other fields zero, the whole key from the first one that does not
/// (the map is then widened, once).
#[derive(Clone, Debug)]
pub(crate) enum KeyCounts {
    Narrow(PerBinary),
    Wide(FxHashMap<Key, u64>),
    Sorted(Sorted),
}

/// Narrow counts: each binary's offsets and their counts, one table per
/// binary.
#[derive(Clone, Debug, Default)]
pub(crate) struct PerBinary {
    /// Each binary's place in `maps`.
    index: FxHashMap<Cookie, usize>,
    /// Each binary, in the order first met, with its counts by offset.
    maps: Vec<(Cookie, FxHashMap<u64, u64>)>,
    /// The binary of the last key added and its place: a session's samples
    /// come in runs of one binary.
    last: Option<(Cookie, usize)>,
    /// Keys over every binary.
    len: usize,
}

impl PerBinary {
    /// Adds `n` to the count of `offset` in `cookie`, saturating.
    #[inline]
    fn add(&mut self, cookie: Cookie, offset: u64, n: u64) {
        let i = match self.last {
            Some((c, i)) if c == cookie => i,
            _ => {
                let maps = &mut self.maps;
                let i = *self.index.entry(cookie).or_insert_with(|| {
                    maps.push((cookie, FxHashMap::default()));
                    maps.len() - 1
                });
                self.last = Some((cookie, i));
                i
            }
        };
        use std::collections::hash_map::Entry;
        match self.maps[i].1.entry(offset) {
            Entry::Occupied(e) => {
                let c = e.into_mut();
                *c = c.saturating_add(n);
            }
            Entry::Vacant(e) => {
                e.insert(n);
                self.len += 1;
            }
        }
    }

    /// Every (binary, offset) and its count, binary by binary.
    fn iter(&self) -> NarrowIter<'_> {
        NarrowIter {
            maps: self.maps.iter(),
            cur: None,
            left: self.len,
        }
    }

    /// Adds every count of `other`: a binary only one of them has is
    /// taken whole, a binary both have is added into the larger table.
    fn merge(&mut self, other: PerBinary) {
        for (cookie, mut theirs) in other.maps {
            match self.index.get(&cookie) {
                None => {
                    self.index.insert(cookie, self.maps.len());
                    self.len += theirs.len();
                    self.maps.push((cookie, theirs));
                }
                Some(&i) => {
                    let mine = &mut self.maps[i].1;
                    self.len -= mine.len();
                    if theirs.len() > mine.len() {
                        std::mem::swap(mine, &mut theirs);
                    }
                    for (o, n) in theirs {
                        let c = mine.entry(o).or_insert(0);
                        *c = c.saturating_add(n);
                    }
                    self.len += mine.len();
                }
            }
        }
    }
}

/// [`PerBinary::iter`].
pub(crate) struct NarrowIter<'a> {
    maps: std::slice::Iter<'a, (Cookie, FxHashMap<u64, u64>)>,
    cur: Option<(Cookie, std::collections::hash_map::Iter<'a, u64, u64>)>,
    left: usize,
}

impl Iterator for NarrowIter<'_> {
    type Item = (Cookie, u64, u64);

    #[inline]
    fn next(&mut self) -> Option<(Cookie, u64, u64)> {
        loop {
            if let Some((c, it)) = &mut self.cur {
                if let Some((&o, &n)) = it.next() {
                    self.left -= 1;
                    return Some((*c, o, n));
                }
            }
            let (c, m) = self.maps.next()?;
            self.cur = Some((*c, m.iter()));
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

/// Narrow counts in key order: per binary (ascending), its offsets
/// (ascending, distinct) and their counts.
#[derive(Clone, Debug, Default)]
pub(crate) struct Sorted {
    /// Each binary and the end of its keys in `offsets`.
    binaries: Vec<(Cookie, usize)>,
    offsets: Vec<u64>,
    counts: Vec<u64>,
}

impl Sorted {
    /// The counts of `m`, sorted: binary by binary (ascending), each
    /// binary's table given back once its keys are placed.
    fn of(m: PerBinary) -> Sorted {
        let mut maps = m.maps;
        maps.sort_unstable_by_key(|&(c, _)| c);
        let mut s = Sorted {
            binaries: Vec::with_capacity(maps.len()),
            offsets: Vec::with_capacity(m.len),
            counts: Vec::with_capacity(m.len),
        };
        let mut pairs: Vec<(u64, u64)> = Vec::new();
        for (cookie, table) in maps {
            pairs.clear();
            pairs.extend(table);
            pairs.sort_unstable_by_key(|&(o, _)| o);
            s.offsets.extend(pairs.iter().map(|&(o, _)| o));
            s.counts.extend(pairs.iter().map(|&(_, n)| n));
            s.binaries.push((cookie, s.offsets.len()));
        }
        s
    }

    /// Binary `b`'s keys: their range in `offsets`.
    fn range(&self, b: usize) -> std::ops::Range<usize> {
        let start = b.checked_sub(1).map_or(0, |p| self.binaries[p].1);
        start..self.binaries[b].1
    }

    /// The binaries, each with its offsets (ascending, distinct).
    pub fn binaries(&self) -> impl Iterator<Item = (Cookie, &[u64])> + '_ {
        (0..self.binaries.len()).map(|b| (self.binaries[b].0, &self.offsets[self.range(b)]))
    }

    /// The keys from the `lo`-th to before the `hi`-th, in order.
    fn iter_range(&self, lo: usize, hi: usize) -> SortedIter<'_> {
        SortedIter {
            s: self,
            i: lo,
            hi,
            b: self.binaries.partition_point(|&(_, end)| end <= lo),
        }
    }

    fn into_map(self) -> PerBinary {
        let mut m = PerBinary::default();
        for (k, n) in self.iter_range(0, self.offsets.len()) {
            m.add(k.cookie, k.offset, n);
        }
        m
    }
}

/// [`Sorted::iter_range`].
pub(crate) struct SortedIter<'a> {
    s: &'a Sorted,
    i: usize,
    hi: usize,
    /// The binary of the `i`-th key.
    b: usize,
}

impl Iterator for SortedIter<'_> {
    type Item = (Key, u64);

    #[inline]
    fn next(&mut self) -> Option<(Key, u64)> {
        if self.i >= self.hi {
            return None;
        }
        while self.s.binaries[self.b].1 <= self.i {
            self.b += 1;
        }
        let k = Key::narrow(self.s.binaries[self.b].0, self.s.offsets[self.i]);
        let n = self.s.counts[self.i];
        self.i += 1;
        Some((k, n))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.hi - self.i;
        (n, Some(n))
    }
}

impl Default for KeyCounts {
    fn default() -> Self {
        KeyCounts::Narrow(PerBinary::default())
    }
}

impl Key {
    /// The key of `cookie` and `offset` with every other field zero.
    #[inline]
    pub(crate) fn narrow(cookie: Cookie, offset: u64) -> Key {
        Key {
            sess: 0,
            cpu: 0,
            pid: 0,
            tid: 0,
            cookie,
            offset,
            cgroup: 0,
        }
    }

    /// Whether only the binary and offset are set.
    #[inline]
    fn is_narrow(&self) -> bool {
        self.sess == 0 && self.cpu == 0 && self.pid == 0 && self.tid == 0 && self.cgroup == 0
    }
}

impl KeyCounts {
    /// Adds `n` to `k`'s count, saturating (counts and off-CPU weights are
    /// the file's word).
    #[inline]
    pub fn add(&mut self, k: Key, n: u64) {
        let c = match self {
            KeyCounts::Narrow(m) if k.is_narrow() => return m.add(k.cookie, k.offset, n),
            KeyCounts::Narrow(_) => {
                self.widen();
                return self.add(k, n);
            }
            KeyCounts::Wide(m) => m.entry(k).or_insert(0),
            KeyCounts::Sorted(_) => {
                self.unsort();
                return self.add(k, n);
            }
        };
        *c = c.saturating_add(n);
    }

    /// Sorts narrow counts into arrays ([`Sorted`]): for when every count
    /// is in (wide ones stay as they are). Counts added after are taken
    /// back into a map first.
    pub fn sort(&mut self) {
        if let KeyCounts::Narrow(m) = self {
            *self = KeyCounts::Sorted(Sorted::of(std::mem::take(m)));
        }
    }

    /// The sorted counts, when [`KeyCounts::sort`] made them.
    pub fn sorted(&self) -> Option<&Sorted> {
        match self {
            KeyCounts::Sorted(s) => Some(s),
            _ => None,
        }
    }

    /// Sorted counts made a map again.
    fn unsort(&mut self) {
        if let KeyCounts::Sorted(s) = self {
            *self = KeyCounts::Narrow(std::mem::take(s).into_map());
        }
    }

    /// Makes the map wide (whole keys), keeping its counts.
    fn widen(&mut self) {
        self.unsort();
        if let KeyCounts::Narrow(m) = self {
            let mut wide = FxHashMap::default();
            wide.reserve(m.len);
            wide.extend(m.iter().map(|(c, o, n)| (Key::narrow(c, o), n)));
            *self = KeyCounts::Wide(wide);
        }
    }

    pub fn len(&self) -> usize {
        match self {
            KeyCounts::Narrow(m) => m.len,
            KeyCounts::Wide(m) => m.len(),
            KeyCounts::Sorted(s) => s.offsets.len(),
        }
    }

    /// Every key and its count, in no order (in key order when sorted).
    pub fn iter(&self) -> Iter<'_> {
        match self {
            KeyCounts::Narrow(m) => Iter::Narrow(m.iter()),
            KeyCounts::Wide(m) => Iter::Wide(m.iter()),
            KeyCounts::Sorted(s) => Iter::Sorted(s.iter_range(0, s.offsets.len())),
        }
    }

    /// Every key, in no order.
    pub fn keys(&self) -> impl Iterator<Item = Key> + '_ {
        self.iter().map(|(k, _)| k)
    }

    /// Folds every key and its count into accumulators made by
    /// `identity`, on every core; the accumulators, one per worker, are for
    /// the caller to merge. Each worker walks the whole map and folds the
    /// keys whose hash falls to it: no list of the entries is made (that
    /// was 16 bytes a key, 1.8 MB for a cargo build's -l, at the heap's
    /// peak), and there are as many accumulators as workers. Sorted counts
    /// are cut into as many runs of keys, each folded in order.
    pub fn par_fold<T, I, F>(&self, identity: I, fold: F) -> Vec<T>
    where
        T: Send,
        I: Fn() -> T + Sync + Send,
        F: Fn(T, Key, u64) -> T + Sync + Send,
    {
        use rayon::prelude::*;
        let workers = if self.len() < 8192 {
            1
        } else {
            rayon::current_num_threads().max(1) as u64
        };
        // Which worker folds a key: its binary and offset mixed (the
        // golden-ratio multiply), the high half taken modulo the workers.
        let mine = |w: u64, cookie: Cookie, offset: u64| {
            let h = (cookie ^ offset).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32;
            workers == 1 || h % workers == w
        };
        if let KeyCounts::Sorted(s) = self {
            let n = s.offsets.len() as u64;
            return (0..workers)
                .into_par_iter()
                .map(|w| {
                    let (lo, hi) = (n * w / workers, n * (w + 1) / workers);
                    s.iter_range(lo as usize, hi as usize)
                        .fold(identity(), |t, (k, n)| fold(t, k, n))
                })
                .collect();
        }
        (0..workers)
            .into_par_iter()
            .map(|w| {
                let mut t = identity();
                for (k, n) in self.iter() {
                    if mine(w, k.cookie, k.offset) {
                        t = fold(t, k, n);
                    }
                }
                t
            })
            .collect()
    }

    /// Adds every count of `other` (the larger map is kept and the smaller
    /// added into it; no reserve for all of the other: most of its keys
    /// are already there, the hot ones, and reserving for them doubled the
    /// peak).
    pub fn merge(&mut self, mut other: KeyCounts) {
        if other.len() > self.len() {
            std::mem::swap(self, &mut other);
        }
        match other {
            KeyCounts::Narrow(m) => {
                if let KeyCounts::Narrow(mine) = self {
                    return mine.merge(m);
                }
                for (c, o, n) in m.iter() {
                    self.add(Key::narrow(c, o), n);
                }
            }
            KeyCounts::Wide(m) => {
                for (k, n) in m {
                    self.add(k, n);
                }
            }
            KeyCounts::Sorted(s) => {
                for (k, n) in s.iter_range(0, s.offsets.len()) {
                    self.add(k, n);
                }
            }
        }
    }

    /// Reserves room for `n` more keys.
    pub fn reserve(&mut self, n: usize) {
        match self {
            // Per binary: which tables the keys go to is not known.
            KeyCounts::Narrow(_) => {}
            KeyCounts::Wide(m) => m.reserve(n),
            // Counts added are taken back into a map, which grows then.
            KeyCounts::Sorted(_) => {}
        }
    }
}

/// [`KeyCounts::iter`].
pub(crate) enum Iter<'a> {
    Narrow(NarrowIter<'a>),
    Wide(std::collections::hash_map::Iter<'a, Key, u64>),
    Sorted(SortedIter<'a>),
}

impl Iterator for Iter<'_> {
    type Item = (Key, u64);

    #[inline]
    fn next(&mut self) -> Option<(Key, u64)> {
        match self {
            Iter::Narrow(i) => i.next().map(|(c, o, n)| (Key::narrow(c, o), n)),
            Iter::Wide(i) => i.next().map(|(&k, &n)| (k, n)),
            Iter::Sorted(i) => i.next(),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            Iter::Narrow(i) => i.size_hint(),
            Iter::Wide(i) => i.size_hint(),
            Iter::Sorted(i) => i.size_hint(),
        }
    }
}

impl ExactSizeIterator for Iter<'_> {}

impl FromIterator<(Key, u64)> for KeyCounts {
    fn from_iter<I: IntoIterator<Item = (Key, u64)>>(iter: I) -> Self {
        let mut c = KeyCounts::default();
        for (k, n) in iter {
            c.add(k, n);
        }
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wide(pid: u32, offset: u64) -> Key {
        Key {
            pid,
            ..Key::narrow(7, offset)
        }
    }

    #[test]
    fn narrow_keys_stay_narrow_and_a_wide_one_widens_keeping_every_count() {
        let mut c = KeyCounts::default();
        c.add(Key::narrow(7, 16), 2);
        c.add(Key::narrow(7, 16), 3);
        c.add(Key::narrow(8, 16), u64::MAX);
        c.add(Key::narrow(8, 16), 1);
        assert!(matches!(c, KeyCounts::Narrow(_)));
        c.add(wide(3, 16), 4);
        assert!(matches!(c, KeyCounts::Wide(_)));
        c.add(Key::narrow(7, 16), 1);
        let mut got: Vec<(Key, u64)> = c.iter().collect();
        got.sort();
        assert_eq!(
            got,
            [
                (Key::narrow(7, 16), 6),
                (Key::narrow(8, 16), u64::MAX),
                (wide(3, 16), 4),
            ]
        );
    }

    #[test]
    fn par_fold_folds_every_key_once_narrow_or_wide() {
        for n in [10u64, 20_000] {
            let mut c: KeyCounts = (0..n).map(|i| (Key::narrow(i % 7, i * 3), i + 1)).collect();
            for wide_too in [false, true] {
                if wide_too {
                    c.add(wide(5, 1), 9);
                }
                let mut want: Vec<(Key, u64)> = c.iter().collect();
                want.sort();
                let mut got: Vec<(Key, u64)> = c
                    .par_fold(Vec::new, |mut v, k, n| {
                        v.push((k, n));
                        v
                    })
                    .into_iter()
                    .flatten()
                    .collect();
                got.sort();
                assert_eq!(got, want, "{n} keys, wide: {wide_too}");
            }
        }
    }

    #[test]
    fn sorted_counts_keep_every_count_in_key_order_and_take_more_after() {
        // Keys given in no order, several binaries, one key given twice.
        let keys: Vec<(Key, u64)> = (0..5000u64)
            .map(|i| {
                (
                    Key::narrow((i * 7919 % 5) as Cookie + 3, i * 2654 % 9973),
                    i + 1,
                )
            })
            .chain([(Key::narrow(4, 5), 10)])
            .collect();
        let mut c: KeyCounts = keys.iter().copied().collect();
        let mut want: Vec<(Key, u64)> = c.iter().collect();
        want.sort();
        c.sort();
        let s = c.sorted().expect("narrow counts sort");
        assert_eq!(c.iter().collect::<Vec<_>>(), want, "in key order");
        assert_eq!(c.len(), want.len());
        let mut from_binaries = Vec::new();
        for (cookie, offs) in s.binaries() {
            assert!(offs.windows(2).all(|w| w[0] < w[1]), "{cookie}: ascending");
            from_binaries.extend(offs.iter().map(|&o| (cookie, o)));
        }
        let keys_only: Vec<(Cookie, u64)> =
            want.iter().map(|(k, _)| (k.cookie, k.offset)).collect();
        assert_eq!(from_binaries, keys_only);
        let folded: Vec<(Key, u64)> = c
            .par_fold(Vec::new, |mut v, k, n| {
                v.push((k, n));
                v
            })
            .into_iter()
            .flatten()
            .collect();
        assert_eq!(folded, want, "runs of keys, folded in order");
        // Counts added after sorting: taken back into a map, none lost.
        c.add(Key::narrow(4, 5), 1);
        c.add(wide(2, 1), 1);
        assert!(c.sorted().is_none());
        let mut got: Vec<(Key, u64)> = c.iter().collect();
        got.sort();
        let mut want2 = want.clone();
        for (k, n) in &mut want2 {
            if *k == Key::narrow(4, 5) {
                *n += 1;
            }
        }
        want2.push((wide(2, 1), 1));
        want2.sort();
        assert_eq!(got, want2);
        // Merged both ways.
        let mut sorted = KeyCounts::default();
        sorted.add(Key::narrow(1, 1), 2);
        sorted.sort();
        let mut narrow = KeyCounts::default();
        narrow.add(Key::narrow(1, 1), 3);
        narrow.add(Key::narrow(1, 2), 1);
        let mut a = narrow.clone();
        a.merge(sorted.clone());
        sorted.merge(narrow);
        for m in [a, sorted] {
            let mut v: Vec<(Key, u64)> = m.iter().collect();
            v.sort();
            assert_eq!(v, [(Key::narrow(1, 1), 5), (Key::narrow(1, 2), 1)]);
        }
    }

    /// Per binary: a binary only one side has is taken whole, one both
    /// have is added key by key (saturating), and the key count follows.
    #[test]
    fn narrow_counts_merge_binary_by_binary_and_count_their_keys() {
        let a: KeyCounts = [
            (Key::narrow(1, 10), 1),
            (Key::narrow(1, 11), u64::MAX),
            (Key::narrow(2, 10), 4),
        ]
        .into_iter()
        .collect();
        let b: KeyCounts = [
            (Key::narrow(1, 11), 5),
            (Key::narrow(1, 12), 6),
            (Key::narrow(3, 10), 7),
            (Key::narrow(3, 11), 8),
        ]
        .into_iter()
        .collect();
        let want = [
            (Key::narrow(1, 10), 1),
            (Key::narrow(1, 11), u64::MAX),
            (Key::narrow(1, 12), 6),
            (Key::narrow(2, 10), 4),
            (Key::narrow(3, 10), 7),
            (Key::narrow(3, 11), 8),
        ];
        for (x, y) in [(a.clone(), b.clone()), (b, a)] {
            let mut m = x;
            m.merge(y);
            assert!(matches!(m, KeyCounts::Narrow(_)));
            assert_eq!(m.len(), want.len());
            assert_eq!(m.iter().len(), want.len());
            let mut got: Vec<(Key, u64)> = m.iter().collect();
            got.sort();
            assert_eq!(got, want);
            m.sort();
            assert_eq!(m.iter().collect::<Vec<_>>(), want, "sorted after merging");
        }
    }

    #[test]
    fn merging_narrow_into_wide_and_wide_into_narrow_gives_the_same_counts() {
        let a: KeyCounts = [(Key::narrow(1, 1), 1), (Key::narrow(1, 2), 2)]
            .into_iter()
            .collect();
        let b: KeyCounts = [(wide(9, 1), 5), (Key::narrow(1, 2), 3)]
            .into_iter()
            .collect();
        let sorted = |c: KeyCounts| {
            let mut v: Vec<(Key, u64)> = c.iter().collect();
            v.sort();
            v
        };
        let mut ab = a.clone();
        ab.merge(b.clone());
        let mut ba = b;
        ba.merge(a);
        assert_eq!(sorted(ab.clone()), sorted(ba));
        assert_eq!(
            sorted(ab),
            [
                (Key::narrow(1, 1), 1),
                (Key::narrow(1, 2), 5),
                (wide(9, 1), 5)
            ]
        );
    }
}
