//! [`KeyCounts`]: samples per aggregation [`Key`], held as narrowly as the
//! keys allow. Most reports (`-l`, `--sort image`, one session, nothing
//! separated) keep only the binary and offset of a key: 24 bytes an entry
//! where the whole key takes 48. On a cargo build's 111,543 distinct
//! offsets the map was 6.4 MB of a `-l` report's 18 MB heap peak; narrow,
//! it is half of that (and fills with half the page faults). Once every
//! chunk is counted, narrow counts are [`KeyCounts::sort`]ed into arrays:
//! 16 bytes a key, each binary's offsets in order, which the symbolizer
//! takes as they are.

use profkit_eventlog::Cookie;

use super::Key;
use crate::hash::FxHashMap;

/// Counts per [`Key`]: narrow (binary, offset) while every key added has
/// its other fields zero, the whole key from the first one that does not
/// (the map is then widened, once).
#[derive(Clone, Debug)]
pub(crate) enum KeyCounts {
    Narrow(FxHashMap<(Cookie, u64), u64>),
    Wide(FxHashMap<Key, u64>),
    Sorted(Sorted),
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
    /// The counts of `m`, sorted: placed by binary while `m` is read (its
    /// table and one array of its entries held at once, 16 bytes a key),
    /// then each binary's sorted.
    fn of(m: FxHashMap<(Cookie, u64), u64>) -> Sorted {
        let mut per: FxHashMap<Cookie, usize> = FxHashMap::default();
        for &(c, _) in m.keys() {
            *per.entry(c).or_insert(0) += 1;
        }
        let mut binaries: Vec<(Cookie, usize)> = per.into_iter().collect();
        binaries.sort_unstable();
        let mut next: FxHashMap<Cookie, usize> = FxHashMap::default();
        let mut end = 0;
        for b in &mut binaries {
            next.insert(b.0, end);
            end += b.1;
            b.1 = end;
        }
        let mut pairs = vec![(0u64, 0u64); m.len()];
        for ((c, o), n) in m {
            if let Some(i) = next.get_mut(&c) {
                pairs[*i] = (o, n);
                *i += 1;
            }
        }
        let mut s = Sorted {
            binaries,
            offsets: Vec::new(),
            counts: Vec::new(),
        };
        for b in 0..s.binaries.len() {
            pairs[s.range(b)].sort_unstable_by_key(|&(o, _)| o);
        }
        s.offsets = pairs.iter().map(|&(o, _)| o).collect();
        s.counts = pairs.iter().map(|&(_, n)| n).collect();
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

    fn into_map(self) -> FxHashMap<(Cookie, u64), u64> {
        let mut m = FxHashMap::default();
        m.reserve(self.offsets.len());
        for (k, n) in self.iter_range(0, self.offsets.len()) {
            m.insert((k.cookie, k.offset), n);
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
        KeyCounts::Narrow(FxHashMap::default())
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
            KeyCounts::Narrow(m) if k.is_narrow() => m.entry((k.cookie, k.offset)).or_insert(0),
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
            wide.reserve(m.len());
            wide.extend(m.drain().map(|((c, o), n)| (Key::narrow(c, o), n)));
            *self = KeyCounts::Wide(wide);
        }
    }

    pub fn len(&self) -> usize {
        match self {
            KeyCounts::Narrow(m) => m.len(),
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
                for ((c, o), n) in m {
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
            KeyCounts::Narrow(m) => m.reserve(n),
            KeyCounts::Wide(m) => m.reserve(n),
            // Counts added are taken back into a map, which grows then.
            KeyCounts::Sorted(_) => {}
        }
    }
}

/// [`KeyCounts::iter`].
pub(crate) enum Iter<'a> {
    Narrow(std::collections::hash_map::Iter<'a, (Cookie, u64), u64>),
    Wide(std::collections::hash_map::Iter<'a, Key, u64>),
    Sorted(SortedIter<'a>),
}

impl Iterator for Iter<'_> {
    type Item = (Key, u64);

    #[inline]
    fn next(&mut self) -> Option<(Key, u64)> {
        match self {
            Iter::Narrow(i) => i.next().map(|(&(c, o), &n)| (Key::narrow(c, o), n)),
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
