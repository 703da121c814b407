//! [`KeyCounts`]: samples per aggregation [`Key`], held as narrowly as the
//! keys allow. Most reports (`-l`, `--sort image`, one session, nothing
//! separated) keep only the binary and offset of a key: 24 bytes an entry
//! where the whole key takes 48. On a cargo build's 111,543 distinct
//! offsets the map was 6.4 MB of a `-l` report's 18 MB heap peak; narrow,
//! it is half of that (and fills with half the page faults).

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
        };
        *c = c.saturating_add(n);
    }

    /// Makes the map wide (whole keys), keeping its counts.
    fn widen(&mut self) {
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
        }
    }

    /// Every key and its count, in no order.
    pub fn iter(&self) -> Iter<'_> {
        match self {
            KeyCounts::Narrow(m) => Iter::Narrow(m.iter()),
            KeyCounts::Wide(m) => Iter::Wide(m.iter()),
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
    /// peak), and there are as many accumulators as workers.
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
        }
    }

    /// Reserves room for `n` more keys.
    pub fn reserve(&mut self, n: usize) {
        match self {
            KeyCounts::Narrow(m) => m.reserve(n),
            KeyCounts::Wide(m) => m.reserve(n),
        }
    }
}

/// [`KeyCounts::iter`].
pub(crate) enum Iter<'a> {
    Narrow(std::collections::hash_map::Iter<'a, (Cookie, u64), u64>),
    Wide(std::collections::hash_map::Iter<'a, Key, u64>),
}

impl Iterator for Iter<'_> {
    type Item = (Key, u64);

    #[inline]
    fn next(&mut self) -> Option<(Key, u64)> {
        match self {
            Iter::Narrow(i) => i.next().map(|(&(c, o), &n)| (Key::narrow(c, o), n)),
            Iter::Wide(i) => i.next().map(|(&k, &n)| (k, n)),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        match self {
            Iter::Narrow(i) => i.size_hint(),
            Iter::Wide(i) => i.size_hint(),
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
