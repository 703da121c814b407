//! The consumer side of a perf ring: walking records between tail and head.
//!
//! # Implementation notes
//!
//! The kernel is the producer and owns `data_head`; we are the consumer and
//! own `data_tail`. Offsets grow forever; the position in the buffer is the
//! offset modulo the (power of two) data size.
//!
//! ```text
//!   data area (size S)                       offsets (monotonic)
//!   +-------------------------------------+
//!   |rec C (2nd half)| free |rec A|rec B|r|  tail ........ head
//!   +-------------------------------------+   |<- readable ->|
//!                           ^tail%S   ^       kernel writes only at/after head,
//!                                             and only up to tail + S
//! ```
//!
//! One drain: load `data_head` (Acquire), walk records in `[tail, head)`,
//! handing each to the caller (a record that wraps the end of the buffer is
//! copied into a scratch buffer so it arrives whole); stop early if the caller
//! says so; then store `data_tail = tail + consumed` (Release). Records the
//! caller did not take stay for the next drain — the OProfile rule "only
//! update the tail iterator to how much we actually read". No slice into the
//! ring outlives the walk: the tail store happens after the walk returns.

use crate::record::RawRecord;

/// What one drain did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ReadStats {
    /// Records handed to the caller and consumed.
    pub records: u64,
    /// Bytes consumed (the tail advanced by this much).
    pub bytes: u64,
    /// The caller stopped before the head was reached.
    pub stopped_early: bool,
    /// The ring held a header with an impossible size; everything from there
    /// up to the head was discarded (and counted in `corrupt_bytes`).
    pub corrupt_bytes: u64,
}

/// A ring of perf records that can be drained: the real per-CPU mmap ring
/// ([`crate::PerfRing`]) or the in-memory [`crate::SimRing`].
pub trait RecordRing {
    /// The CPU this ring belongs to.
    fn cpu(&self) -> u32;
    /// Size of the data area in bytes.
    fn data_size(&self) -> usize;
    /// Bytes written by the producer and not yet consumed.
    fn pending(&self) -> usize;
    /// Hands each record in `[tail, head)` to `f` in order; `f` returns
    /// `true` to consume the record and go on, `false` to stop (that record
    /// stays unread). Then advances the tail past the consumed records.
    fn read_records<F: FnMut(RawRecord<'_>) -> bool>(&mut self, f: F) -> ReadStats;
}

/// Walks the readable bytes given as the part up to the end of the buffer
/// (`first`) and the part wrapped to its start (`second`).
///
/// Returns the stats; `stats.bytes` is how far the tail may advance.
pub(crate) fn walk<F: FnMut(RawRecord<'_>) -> bool>(
    first: &[u8],
    second: &[u8],
    scratch: &mut Vec<u8>,
    mut f: F,
) -> ReadStats {
    let total = first.len() + second.len();
    let mut pos = 0usize;
    let mut stats = ReadStats::default();
    let byte_at = |i: usize| -> u8 {
        if i < first.len() {
            first[i]
        } else {
            second[i - first.len()]
        }
    };
    while pos < total {
        if total - pos < 8 {
            stats.corrupt_bytes = (total - pos) as u64;
            pos = total;
            break;
        }
        let mut hdr = [0u8; 8];
        if pos + 8 <= first.len() {
            hdr.copy_from_slice(&first[pos..pos + 8]);
        } else if pos >= first.len() {
            let p = pos - first.len();
            hdr.copy_from_slice(&second[p..p + 8]);
        } else {
            for (i, h) in hdr.iter_mut().enumerate() {
                *h = byte_at(pos + i);
            }
        }
        let kind = u32::from_ne_bytes([hdr[0], hdr[1], hdr[2], hdr[3]]);
        let misc = u16::from_ne_bytes([hdr[4], hdr[5]]);
        let size = u16::from_ne_bytes([hdr[6], hdr[7]]) as usize;
        if size < 8 || size > total - pos {
            // A header the kernel would never write: do not guess where the
            // next record starts; discard up to head and report it.
            stats.corrupt_bytes = (total - pos) as u64;
            pos = total;
            break;
        }
        let start = pos + 8;
        let end = pos + size;
        let body: &[u8] = if end <= first.len() {
            &first[start..end]
        } else if start >= first.len() {
            &second[start - first.len()..end - first.len()]
        } else {
            scratch.clear();
            scratch.extend_from_slice(&first[start..]);
            scratch.extend_from_slice(&second[..end - first.len()]);
            &scratch[..]
        };
        if !f(RawRecord { kind, misc, body }) {
            stats.stopped_early = true;
            break;
        }
        stats.records += 1;
        pos = end;
    }
    stats.bytes = pos as u64;
    stats
}

/// Splits the readable region `[tail, head)` of a buffer of `size` bytes
/// (a power of two) into the part before the end and the wrapped part, as
/// `(start, first_len, second_len)`.
pub(crate) fn split(tail: u64, head: u64, size: usize) -> (usize, usize, usize) {
    let avail = head.wrapping_sub(tail) as usize;
    let start = (tail as usize) & (size - 1);
    let first = avail.min(size - start);
    (start, first, avail - first)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(kind: u32, body: &[u8]) -> Vec<u8> {
        let size = 8 + body.len();
        let mut v = Vec::new();
        v.extend_from_slice(&kind.to_ne_bytes());
        v.extend_from_slice(&0u16.to_ne_bytes());
        v.extend_from_slice(&(size as u16).to_ne_bytes());
        v.extend_from_slice(body);
        v
    }

    #[test]
    fn walks_across_the_split_and_stops_where_told() {
        let mut all = rec(1, &[1; 8]);
        all.extend(rec(2, &[2; 16]));
        all.extend(rec(3, &[3; 8]));
        // Split in the middle of the second record's body.
        let (a, b) = all.split_at(24);
        let mut scratch = Vec::new();
        let mut seen = Vec::new();
        let s = walk(a, b, &mut scratch, |r| {
            seen.push((r.kind, r.body.to_vec()));
            true
        });
        assert_eq!(s.records, 3);
        assert_eq!(s.bytes as usize, all.len());
        assert_eq!(seen[1], (2, vec![2; 16]));
        let s = walk(a, b, &mut scratch, |r| r.kind != 2);
        assert_eq!((s.records, s.bytes, s.stopped_early), (1, 16, true));
    }

    #[test]
    fn impossible_header_is_reported_not_followed() {
        let mut all = rec(1, &[1; 8]);
        all.extend_from_slice(&[9, 0, 0, 0, 0, 0, 4, 0]); // size 4 < 8
        let s = walk(&all, &[], &mut Vec::new(), |_| true);
        assert_eq!((s.records, s.corrupt_bytes, s.bytes), (1, 8, 24));
    }

    #[test]
    fn split_handles_wrap() {
        assert_eq!(split(0, 16, 64), (0, 16, 0));
        assert_eq!(split(56, 72, 64), (56, 8, 8));
        assert_eq!(split(64 + 8, 64 + 8, 64), (8, 0, 0));
    }
}
