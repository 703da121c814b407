//! Reading an entry (the layout is in `format.rs`): its header and build-id when
//! opened, then, for the addresses a report asks, one pass over its head in file order
//! with the head's CRC computed on the way. The starts and the ends are read side by
//! side, block by block, beside the addresses (asked in increasing order, each answered
//! by a sweep: a stack of the symbols open at it), so no array of the table is held;
//! of the name records and origins only those of the symbols hit are kept. A warm
//! report of a cargo build held libLLVM's and librustc_driver's heads whole before (37
//! bytes a symbol, and 8 more for a running maximum of ends): 11.8 MB, most of the
//! report's memory.
//!
//! Nothing of a head is used before its CRC is checked at the end of the pass, except
//! the header's facts (identity, build-id, flags), which a caller compares with the file
//! it opened: a damaged header is refused there or by the CRC. Anything wrong is a
//! [`Bad`], never a panic.

use std::fs::File;
use std::os::unix::fs::FileExt;

use super::format::{
    head_len, origin_of, pad8, u32_at, Bad, Facts, Identity, HEADER, MAGIC, NAME, SAME, VERSION,
};
use super::format::{ANY_FUNCTION, DEBUG, DEMANGLED, HAS_BUILD_ID, STRIPPED};
use crate::types::SymbolOrigin;

/// A symbol's raw name and the name to show when it is another (demangled names
/// stored, and this one differs from its raw name).
pub(crate) type Names = (Box<str>, Option<Box<str>>);

/// Where an entry's bytes are.
enum Src {
    /// The whole entry, in memory.
    Held(Vec<u8>),
    /// The entry's file.
    File(File),
}

impl Src {
    fn read(&self, at: usize, buf: &mut [u8]) -> Result<(), Bad> {
        match self {
            Src::Held(d) => {
                let s = d.get(at..at + buf.len()).ok_or(Bad::Truncated)?;
                buf.copy_from_slice(s);
                Ok(())
            }
            Src::File(f) => f.read_exact_at(buf, at as u64).map_err(|_| Bad::Truncated),
        }
    }
}

/// An opened entry: its facts (from its header), and where its head and names are.
pub(crate) struct Index {
    src: Src,
    pub facts: Facts,
    n: usize,
    /// The header and build-id (the head's first bytes, where its CRC starts).
    front: Vec<u8>,
    /// The head's length (its CRC and 4 zero bytes follow, then the names).
    head: usize,
    blob_len: usize,
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index")
            .field("facts", &self.facts)
            .field("symbols", &self.n)
            .finish_non_exhaustive()
    }
}

/// A symbol found by [`Index::symbols_at`]: its place in the table, range, origin and
/// names' record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Hit {
    pub index: usize,
    pub start: u64,
    pub end: u64,
    pub origin: SymbolOrigin,
    name: NameRecord,
}

/// Where a symbol's names are in the blob, the raw name's length, the shown name's
/// (`None`: the raw one), and their CRC.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct NameRecord {
    from: usize,
    to: usize,
    raw: usize,
    shown: Option<usize>,
    crc: u32,
}

/// The head's length and the blob's for an entry whose first [`HEADER`] bytes are
/// `header` and whose length is `total`: magic, version, and lengths that add up.
fn lengths(header: &[u8], total: u64) -> Result<(usize, usize), Bad> {
    if header.len() < HEADER || total < (HEADER + 8) as u64 {
        return Err(Bad::Truncated);
    }
    if header[..8] != MAGIC {
        return Err(Bad::Magic);
    }
    let version = u32_at(header, 8);
    if version != VERSION {
        return Err(Bad::Version(version));
    }
    // Every count is below 2^32, so these cannot overflow a 64-bit usize.
    let head = head_len(u32_at(header, 96) as usize, u32_at(header, 100) as usize);
    let blob = u32_at(header, 104) as usize;
    match ((head + 8 + blob) as u64).cmp(&total) {
        std::cmp::Ordering::Equal => Ok((head, blob)),
        std::cmp::Ordering::Greater => Err(Bad::Truncated),
        std::cmp::Ordering::Less => Err(Bad::Layout("length")),
    }
}

/// Opens the whole entry `data` (its head checked when a pass reads it).
pub(crate) fn decode(data: Vec<u8>) -> Result<Index, Bad> {
    let (head, blob_len) = lengths(&data, data.len() as u64)?;
    let front_len = HEADER + pad8(u32_at(&data, 96) as usize);
    let front = data[..front_len].to_vec();
    open(front, Src::Held(data), head, blob_len)
}

/// Opens the entry `file` of `len` bytes: its header and build-id only.
pub(crate) fn read(file: File, len: u64) -> Result<Index, Bad> {
    let mut header = [0u8; HEADER];
    if len < HEADER as u64 || file.read_exact_at(&mut header, 0).is_err() {
        return Err(Bad::Truncated);
    }
    let (head, blob_len) = lengths(&header, len)?;
    let mut front = vec![0u8; HEADER + pad8(u32_at(&header, 96) as usize)];
    file.read_exact_at(&mut front, 0)
        .map_err(|_| Bad::Truncated)?;
    open(front, Src::File(file), head, blob_len)
}

/// The header's fields (flags known, a build-id only with its flag).
fn open(front: Vec<u8>, src: Src, head: usize, blob_len: usize) -> Result<Index, Bad> {
    let flags = u32_at(&front, 12);
    if flags & !(DEMANGLED | STRIPPED | ANY_FUNCTION | DEBUG | HAS_BUILD_ID) != 0 {
        return Err(Bad::Layout("flags"));
    }
    let identity = |at: usize| Identity::from_bytes(front[at..at + 40].try_into().expect("40"));
    let (binary, debug) = (identity(16), identity(56));
    let id_len = u32_at(&front, 96) as usize;
    let n = u32_at(&front, 100) as usize;
    let build_id = (flags & HAS_BUILD_ID != 0).then(|| front[HEADER..HEADER + id_len].to_vec());
    if build_id.is_none() && id_len != 0 {
        return Err(Bad::Layout("build-id"));
    }
    let facts = Facts {
        binary,
        build_id,
        stripped: flags & STRIPPED != 0,
        any_function: flags & ANY_FUNCTION != 0,
        debug: (flags & DEBUG != 0).then_some(debug),
        demangled: flags & DEMANGLED != 0,
    };
    Ok(Index {
        src,
        facts,
        n,
        front,
        head,
        blob_len,
    })
}

/// The head after its front, read in order, a region (array) at a time in blocks, with
/// the CRC of every byte read.
struct Seq<'a> {
    src: &'a Src,
    next: usize,
    end: usize,
    buf: Vec<u8>,
    crc: crc32fast::Hasher,
}

impl<'a> Seq<'a> {
    /// A multiple of every item's size (8, 16, 1): no item is split between blocks.
    const BLOCK: usize = 64 << 10;

    fn new(ix: &'a Index) -> Seq<'a> {
        let mut crc = crc32fast::Hasher::new();
        crc.update(&ix.front);
        Seq {
            src: &ix.src,
            next: ix.front.len(),
            end: ix.head,
            buf: vec![0; Self::BLOCK],
            crc,
        }
    }

    /// The next `len` bytes, given to `each` block by block with the position in the
    /// region of the block's first byte.
    fn region(&mut self, len: usize, mut each: impl FnMut(usize, &[u8])) -> Result<(), Bad> {
        if len > self.end - self.next {
            return Err(Bad::Truncated);
        }
        let mut done = 0;
        while done < len {
            let n = Self::BLOCK.min(len - done);
            let block = &mut self.buf[..n];
            self.src.read(self.next, block)?;
            self.crc.update(block);
            each(done, block);
            self.next += n;
            done += n;
        }
        Ok(())
    }

    /// The next two regions of `len` bytes each, read side by side: `each`
    /// is given the blocks at the same position in both (items of both are
    /// paired), the CRC computed as if they were read one after the other.
    fn paired(&mut self, len: usize, mut each: impl FnMut(usize, &[u8], &[u8])) -> Result<(), Bad> {
        if len
            .checked_mul(2)
            .is_none_or(|both| both > self.end - self.next)
        {
            return Err(Bad::Truncated);
        }
        let mut second = vec![0u8; Self::BLOCK.min(len)];
        let mut crc2 = crc32fast::Hasher::new();
        let mut done = 0;
        while done < len {
            let n = Self::BLOCK.min(len - done);
            let (a, b) = (&mut self.buf[..n], &mut second[..n]);
            self.src.read(self.next + done, a)?;
            self.src.read(self.next + len + done, b)?;
            self.crc.update(a);
            crc2.update(b);
            each(done, a, b);
            done += n;
        }
        self.crc.combine(&crc2);
        self.next += 2 * len;
        Ok(())
    }
}

/// The little-endian `u64` items of `block`.
fn u64s(block: &[u8]) -> impl Iterator<Item = u64> + '_ {
    block
        .chunks_exact(8)
        .map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes")))
}

impl Index {
    /// How many symbols.
    pub fn len(&self) -> usize {
        self.n
    }

    /// One pass over the head: the innermost symbol containing each of `addrs` (as
    /// `SymbolTable::lookup` answers) and the symbols `also` (indexes), in index order,
    /// once each; after the whole head is read and its CRC, order (starts strictly
    /// increasing, ends at least their starts) and origins are checked.
    fn pass(&self, mut addrs: Vec<u64>, also: &[usize]) -> Result<Vec<Hit>, Bad> {
        let n = self.n;
        // Mostly sorted already (a report's offsets, in order): no copy.
        addrs.sort_unstable();
        addrs.dedup();
        let mut seq = Seq::new(self);
        // A layout error is said after the CRC: damage is a checksum error first.
        let mut bad: Option<Bad> = None;
        // The sweep: the symbols started at or before the address, those that ended
        // before it dropped from the top (they end before every later address too).
        // The innermost is the last one started that has not ended.
        let mut open: Vec<(usize, u64, u64)> = Vec::new();
        let mut wanted: Vec<(usize, u64, u64)> = Vec::new();
        fn answer(a: u64, open: &mut Vec<(usize, u64, u64)>, wanted: &mut Vec<(usize, u64, u64)>) {
            while open.last().is_some_and(|&(_, _, e)| e <= a) {
                open.pop();
            }
            if let Some(&top) = open.last() {
                // Sorted addresses mostly fall in the symbol of the one
                // before: kept once.
                if wanted.last() != Some(&top) {
                    wanted.push(top);
                }
            }
        }
        let (mut q, mut k) = (0, 0);
        let mut last = None;
        // Each symbol's start and end read side by side: no list of the
        // starts is held (8 bytes a symbol: 1.9 MB for librustc_driver's and
        // libLLVM's entries, given back after each pass but kept by the
        // allocator).
        seq.paired(8 * n, |at, starts, ends| {
            for (j, (start, end)) in (at / 8..).zip(u64s(starts).zip(u64s(ends))) {
                if last.is_some_and(|l| l >= start) {
                    bad.get_or_insert(Bad::Layout("starts"));
                }
                last = Some(start);
                if end < start {
                    bad.get_or_insert(Bad::Layout("ends"));
                }
                while let Some(&a) = addrs.get(q).filter(|&&a| a < start) {
                    answer(a, &mut open, &mut wanted);
                    q += 1;
                }
                // What ended by this start ends before every address still
                // to come (all at or past it): off the stack now, which
                // stays as deep as symbols nest, not as long as the table.
                while open.last().is_some_and(|&(_, _, e)| e <= start) {
                    open.pop();
                }
                open.push((j, start, end));
                while also.get(k).is_some_and(|&i| i < j) {
                    k += 1;
                }
                if also.get(k) == Some(&j) {
                    wanted.push((j, start, end));
                }
            }
        })?;
        for &a in &addrs[q..] {
            answer(a, &mut open, &mut wanted);
        }
        drop((open, addrs));
        wanted.sort_unstable();
        wanted.dedup();
        let mut hits: Vec<Hit> = wanted
            .iter()
            .map(|&(index, start, end)| Hit {
                index,
                start,
                end,
                origin: SymbolOrigin::Symtab,
                name: NameRecord::default(),
            })
            .collect();
        drop(wanted);
        // The hits' name records and origins; every origin checked.
        let mut h = 0;
        seq.region(NAME * n, |at, block| {
            let (first, past) = (at / NAME, (at + block.len()) / NAME);
            while let Some(x) = hits.get_mut(h).filter(|x| x.index < past) {
                let r = &block[(x.index - first) * NAME..][..NAME];
                let shown = u32_at(r, 8);
                let shown = (shown != SAME).then_some(shown as usize);
                let from = u32_at(r, 0) as usize;
                let raw = u32_at(r, 4) as usize;
                x.name = NameRecord {
                    from,
                    to: from + raw + shown.unwrap_or(0),
                    raw,
                    shown,
                    crc: u32_at(r, 12),
                };
                h += 1;
            }
        })?;
        let mut h = 0;
        seq.region(n, |at, block| {
            if block.iter().any(|&b| origin_of(b).is_none()) {
                bad.get_or_insert(Bad::Layout("origin"));
            }
            while let Some(x) = hits.get_mut(h).filter(|x| x.index < at + block.len()) {
                x.origin = origin_of(block[x.index - at]).unwrap_or(SymbolOrigin::Symtab);
                h += 1;
            }
        })?;
        seq.region(pad8(n) - n, |_, _| {})?;
        let mut tail = [0u8; 8];
        self.src.read(self.head, &mut tail)?;
        if seq.crc.finalize() != u32_at(&tail, 0) || u32_at(&tail, 4) != 0 {
            return Err(Bad::Checksum);
        }
        if let Some(b) = bad {
            return Err(b);
        }
        for x in &hits {
            if x.name.to > self.blob_len {
                return Err(Bad::Layout("names"));
            }
        }
        Ok(hits)
    }

    /// The symbols the addresses `addrs` fall in (innermost), with their names, in
    /// index order.
    pub fn symbols_at(&self, addrs: Vec<u64>) -> Result<Vec<(Hit, Names)>, Bad> {
        let hits = self.pass(addrs, &[])?;
        let names = self.names(&hits)?;
        Ok(hits.into_iter().zip(names).collect())
    }

    /// The symbols `which` (indexes, ascending), with their names.
    #[cfg(test)]
    pub fn symbols(&self, which: &[usize]) -> Result<Vec<(Hit, Names)>, Bad> {
        let hits = self.pass(Vec::new(), which)?;
        let names = self.names(&hits)?;
        Ok(hits.into_iter().zip(names).collect())
    }

    /// The innermost symbol containing `addr`, if any.
    #[cfg(test)]
    pub fn lookup(&self, addr: u64) -> Result<Option<usize>, Bad> {
        Ok(self.pass(vec![addr], &[])?.first().map(|h| h.index))
    }

    /// The names of `hits` (ascending), each checked against its CRC and to be UTF-8;
    /// names of near symbols read at once.
    fn names(&self, hits: &[Hit]) -> Result<Vec<Names>, Bad> {
        let at = self.head + 8;
        let mut out = Vec::with_capacity(hits.len());
        let mut buf = Vec::new();
        let mut k = 0;
        while k < hits.len() {
            let (lo, mut hi) = (hits[k].name.from, hits[k].name.to);
            let mut j = k + 1;
            while let Some(next) = hits.get(j).map(|h| h.name) {
                if next.from < hi || next.from - hi > NEAR || next.to - lo > MAX_READ {
                    break;
                }
                hi = next.to;
                j += 1;
            }
            if hi < lo {
                return Err(Bad::Layout("names"));
            }
            // Exactly this long: a doubled buffer was 2 MB a worker.
            buf.clear();
            buf.reserve_exact(hi - lo);
            buf.resize(hi - lo, 0);
            self.src.read(at + lo, &mut buf)?;
            for h in &hits[k..j] {
                let r = h.name;
                if r.from < lo || r.to > hi {
                    return Err(Bad::Layout("names"));
                }
                let b = &buf[r.from - lo..r.to - lo];
                if crc32fast::hash(b) != r.crc {
                    return Err(Bad::Checksum);
                }
                let text = |b: &[u8]| {
                    std::str::from_utf8(b)
                        .map(Box::<str>::from)
                        .map_err(|_| Bad::Layout("UTF-8"))
                };
                let raw_name = text(&b[..r.raw])?;
                // Not a copy of the raw name where it is the same: most C
                // and C++ tables' names were held twice.
                let shown_name = match r.shown {
                    Some(_) => Some(text(&b[r.raw..])?),
                    None => None,
                };
                out.push((raw_name, shown_name));
            }
            k = j;
        }
        Ok(out)
    }
}

/// Names of near symbols are read together when the gap between them is at most this
/// (a read costs more than copying this much: on a VM of 2023, reading Rust's libLLVM's
/// names for 20,000 offsets took 26 ms a name at a time, 11 ms with gaps of 1 MB).
const NEAR: usize = 64 << 10;
/// ... and the read at most this long (unless one symbol's names are longer): its
/// buffer is given back after each entry, and a megabyte was kept by the allocator.
const MAX_READ: usize = 256 << 10;
