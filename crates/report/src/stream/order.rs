//! The reorder buffer: a min-heap on (time, CPU, arrival) that turns the
//! chunks' ring order into time order with bounded memory.
//!
//! ```text
//!  chunk k−1 │ cpu0 ▁▂▃▄▅  cpu1 ▁▂▃▄▅▆      (each CPU a run in ring order)
//!  chunk k   │ cpu0   ▅▆▇█  cpu1  ▆▇█        (drained later: overlaps k−1 a little)
//!            └──────────┴───────────► time
//!                  t(k−1)        t(k)
//!  after chunk k is read: release everything older than t(k−1)
//! ```
//!
//! An item older than the last one released cannot be put back in order:
//! it is released at once and counted. The heap never holds more than
//! [`REORDER_MAX`] items: past that the oldest is released early (a forged
//! chunk of a billion samples costs the bound, not a billion entries).

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// The most items the reorder buffer holds (about 50 MiB of items; a
/// 64-CPU machine sampling at 4 kHz fills two 250 ms rounds with 128 Ki).
pub const REORDER_MAX: usize = 1 << 19;

/// What the buffer needs of an item: its order key.
pub(super) trait Timed {
    /// (time, CPU, arrival), compared in that order.
    fn key(&self) -> (u64, u32, u64);
}

struct Entry<T>(T);

impl<T: Timed> PartialEq for Entry<T> {
    fn eq(&self, other: &Self) -> bool {
        self.0.key() == other.0.key()
    }
}
impl<T: Timed> Eq for Entry<T> {}
impl<T: Timed> PartialOrd for Entry<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl<T: Timed> Ord for Entry<T> {
    fn cmp(&self, other: &Self) -> Ordering {
        // Reversed: BinaryHeap is a max-heap.
        other.0.key().cmp(&self.0.key())
    }
}

/// Items in, items out in time order; see the module notes.
pub(super) struct ReorderBuffer<T> {
    heap: BinaryHeap<Entry<T>>,
    cap: usize,
    /// The time of the last item released.
    released: Option<u64>,
    /// Items released after a later one.
    pub out_of_order: u64,
    /// The most items held at once.
    pub peak: usize,
}

impl<T: Timed> ReorderBuffer<T> {
    pub(super) fn new(cap: usize) -> Self {
        ReorderBuffer {
            heap: BinaryHeap::new(),
            cap: cap.max(1),
            released: None,
            out_of_order: 0,
            peak: 0,
        }
    }

    /// Takes `item`; whatever must leave now (an item too late for its
    /// place, or the oldest when the buffer is full) goes to `out`.
    #[inline]
    pub(super) fn push<E>(
        &mut self,
        item: T,
        out: &mut impl FnMut(T) -> Result<(), E>,
    ) -> Result<(), E> {
        let t = item.key().0;
        if self.released.is_some_and(|r| t < r) {
            self.out_of_order += 1;
            return out(item);
        }
        if self.heap.len() >= self.cap {
            if let Some(Entry(first)) = self.heap.pop() {
                self.note(first.key().0);
                out(first)?;
            }
            // The new one may now be older than what was just released.
            if self.released.is_some_and(|r| t < r) {
                self.out_of_order += 1;
                return out(item);
            }
        }
        self.heap.push(Entry(item));
        self.peak = self.peak.max(self.heap.len());
        Ok(())
    }

    /// Releases every item older than `horizon` (`u64::MAX`: all).
    pub(super) fn release_before<E>(
        &mut self,
        horizon: u64,
        out: &mut impl FnMut(T) -> Result<(), E>,
    ) -> Result<(), E> {
        while self.heap.peek().is_some_and(|e| e.0.key().0 < horizon) {
            let Some(Entry(first)) = self.heap.pop() else {
                break;
            };
            self.note(first.key().0);
            out(first)?;
        }
        Ok(())
    }

    /// Releases everything.
    pub(super) fn release_all<E>(
        &mut self,
        out: &mut impl FnMut(T) -> Result<(), E>,
    ) -> Result<(), E> {
        while let Some(Entry(first)) = self.heap.pop() {
            self.note(first.key().0);
            out(first)?;
        }
        Ok(())
    }

    /// Forgets the released time (a new session, whose clock is its own).
    pub(super) fn restart(&mut self) {
        self.released = None;
    }

    /// Items held.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.heap.len()
    }

    #[inline]
    fn note(&mut self, t: u64) {
        self.released = Some(self.released.map_or(t, |r| r.max(t)));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    struct It(u64, u32, u64);
    impl Timed for It {
        fn key(&self) -> (u64, u32, u64) {
            (self.0, self.1, self.2)
        }
    }

    fn run(items: &[It], cap: usize, horizon_every: Option<(usize, u64)>) -> (Vec<It>, u64, usize) {
        let mut b = ReorderBuffer::new(cap);
        let mut out = Vec::new();
        let mut sink = |i: It| -> Result<(), ()> {
            out.push(i);
            Ok(())
        };
        for (n, &i) in items.iter().enumerate() {
            b.push(i, &mut sink).unwrap();
            if let Some((every, lag)) = horizon_every {
                if (n + 1) % every == 0 {
                    b.release_before(i.0.saturating_sub(lag), &mut sink)
                        .unwrap();
                }
            }
            assert!(b.len() <= cap);
        }
        b.release_all(&mut sink).unwrap();
        (out, b.out_of_order, b.peak)
    }

    #[test]
    fn interleaved_runs_come_out_sorted() {
        // Two CPUs' runs, each in order, the second overlapping the first.
        let mut items = Vec::new();
        for t in 0..100u64 {
            items.push(It(t * 10, 0, t));
        }
        for t in 0..100u64 {
            items.push(It(t * 10 + 5, 1, 100 + t));
        }
        let (out, late, _) = run(&items, 1000, None);
        assert_eq!(late, 0);
        assert_eq!(out.len(), 200);
        assert!(out.windows(2).all(|w| w[0].key() <= w[1].key()));
    }

    #[test]
    fn equal_times_go_by_cpu_then_arrival() {
        let items = [It(5, 1, 0), It(5, 0, 1), It(5, 1, 2), It(5, 0, 3)];
        let (out, _, _) = run(&items, 10, None);
        assert_eq!(out, [It(5, 0, 1), It(5, 0, 3), It(5, 1, 0), It(5, 1, 2)]);
    }

    #[test]
    fn late_items_are_counted_and_memory_stays_bounded() {
        // Adversarial: strictly decreasing times, far more than the cap.
        let n = 10_000u64;
        let items: Vec<It> = (0..n).map(|i| It(n - i, 0, i)).collect();
        let (out, late, peak) = run(&items, 64, None);
        assert_eq!(out.len(), n as usize, "nothing is dropped");
        assert!(peak <= 64, "{peak}");
        // Once the buffer is full every new (older) item is late.
        assert_eq!(late, n - 64);
        // Released after a horizon, an older item is late too.
        let items = [It(10, 0, 0), It(20, 0, 1), It(5, 0, 2), It(15, 0, 3)];
        let mut b = ReorderBuffer::new(100);
        let mut out = Vec::new();
        let mut sink = |i: It| -> Result<(), ()> {
            out.push(i.0);
            Ok(())
        };
        b.push(items[0], &mut sink).unwrap();
        b.push(items[1], &mut sink).unwrap();
        b.release_before(15, &mut sink).unwrap();
        b.push(items[2], &mut sink).unwrap();
        b.push(items[3], &mut sink).unwrap();
        b.release_all(&mut sink).unwrap();
        assert_eq!(out, [10, 5, 15, 20]);
        assert_eq!(b.out_of_order, 1);
    }

    #[test]
    fn random_order_within_the_bound_is_sorted_exactly() {
        // A run that is shuffled only within windows of 50: a buffer of 64
        // with no horizon sorts it completely.
        let mut items: Vec<It> = (0..5000u64).map(|i| It(i, 0, i)).collect();
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for chunk in items.chunks_mut(50) {
            for i in (1..chunk.len()).rev() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                chunk.swap(i, (x % (i as u64 + 1)) as usize);
            }
        }
        let (out, late, peak) = run(&items, 64, None);
        assert_eq!(late, 0);
        assert!(peak <= 64);
        assert!(out.windows(2).all(|w| w[0].0 < w[1].0));
    }
}
