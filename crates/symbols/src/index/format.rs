//! The bytes of one symbol index entry: a binary's whole function table as the by-range
//! path would build it, sorted by start, with raw and demangled names, and what is
//! needed to know it is the table of the very file being symbolized.
//!
//! ```text
//!   offset  size
//!        0     8  magic "PKSYMIDX"
//!        8     4  version (VERSION)
//!       12     4  flags: 1 demangled names, 2 stripped (no .symtab function),
//!                 4 any function, 8 a debug file's .symtab merged, 16 has a build-id
//!       16    40  the binary's identity: st_dev, st_ino, size, mtime ns, ctime ns
//!       56    40  the merged debug file's identity (zero without one)
//!       96     4  build-id length B
//!      100     4  symbols N
//!      104     4  name blob length S
//!      108     4  zero
//!      112     B  build-id, then zeros to a multiple of 8
//!              8N starts (strictly increasing)
//!              8N ends (each at least its start)
//!             16N names: blob offset, raw length, shown length (u32::MAX: the raw name),
//!                 CRC-32 of the symbol's name bytes (raw, then shown)
//!               N origins (0 .symtab, 1 .dynsym, 2 debug file), then zeros to a multiple of 8
//!              4  CRC-32 of every byte before it (the head), then 4 zero bytes
//!               S name blob: each symbol's raw name, then its shown name if not the raw one
//! ```
//!
//! All integers are little-endian. A reader takes the head (header and arrays: 37
//! bytes a symbol) whole and checks its CRC, its length against the file's, and the
//! arrays (sorted, ends at least starts, origins known); then reads only the names of
//! the symbols an address falls in ([`Index::names`]: near ones in one read), each
//! checked against its own CRC, its range in the blob and UTF-8. So every byte used is
//! checksummed, and a report reads the names around the ones it shows, not all: Rust's
//! libLLVM's entry is 54 MB, 49 MB of them names, and read whole it cost a report of
//! 20,000 offsets 45 ms, against 10 ms so. Anything wrong is a [`Bad`], never a panic.

use std::fs::{File, Metadata};
use std::os::unix::fs::{FileExt, MetadataExt};

use crate::types::SymbolOrigin;

/// The first bytes of every entry.
pub(crate) const MAGIC: [u8; 8] = *b"PKSYMIDX";
/// The layout's version: an entry of another is rebuilt.
pub(crate) const VERSION: u32 = 1;
/// Bytes before the build-id.
const HEADER: usize = 112;
/// Bytes of a symbol's name record.
const NAME: usize = 16;
/// A shown length saying "the raw name".
const SAME: u32 = u32::MAX;
/// The largest entry written or read (and the blob's offsets fit `u32`).
pub(crate) const MAX_ENTRY_BYTES: u64 = 256 << 20;

const DEMANGLED: u32 = 1;
const STRIPPED: u32 = 2;
const ANY_FUNCTION: u32 = 4;
const DEBUG: u32 = 8;
const HAS_BUILD_ID: u32 = 16;

/// What `fstat` says a file is: device, inode, size, mtime and ctime (which no user
/// can set: a file rewritten and given back its mtime still has a new ctime).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub(crate) struct Identity {
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
}

impl Identity {
    /// The identity of the file `meta` was read from (by `fstat`).
    pub fn of(meta: &Metadata) -> Identity {
        let ns = |s: i64, n: i64| s.saturating_mul(1_000_000_000).saturating_add(n);
        Identity {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime_ns: ns(meta.mtime(), meta.mtime_nsec()),
            ctime_ns: ns(meta.ctime(), meta.ctime_nsec()),
        }
    }

    pub fn to_bytes(self) -> [u8; 40] {
        let mut b = [0u8; 40];
        b[0..8].copy_from_slice(&self.dev.to_le_bytes());
        b[8..16].copy_from_slice(&self.ino.to_le_bytes());
        b[16..24].copy_from_slice(&self.size.to_le_bytes());
        b[24..32].copy_from_slice(&self.mtime_ns.to_le_bytes());
        b[32..40].copy_from_slice(&self.ctime_ns.to_le_bytes());
        b
    }

    fn from_bytes(b: &[u8; 40]) -> Identity {
        Identity {
            dev: u64_at(b, 0),
            ino: u64_at(b, 8),
            size: u64_at(b, 16),
            mtime_ns: u64_at(b, 24) as i64,
            ctime_ns: u64_at(b, 32) as i64,
        }
    }
}

/// What an entry says of its table besides the symbols.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Facts {
    /// The binary the table was read from.
    pub binary: Identity,
    pub build_id: Option<Vec<u8>>,
    /// The binary has no function in a `.symtab` of its own.
    pub stripped: bool,
    /// Some table (the binary's, or the debug file's) had a function.
    pub any_function: bool,
    /// The debug file whose `.symtab` was merged (a stripped binary's).
    pub debug: Option<Identity>,
    /// The names to show (demangled) are stored.
    pub demangled: bool,
}

/// One symbol to write.
pub(crate) struct Symbol<'a> {
    pub start: u64,
    pub end: u64,
    pub raw: &'a str,
    /// The demangled name, when it differs from the raw one.
    pub shown: Option<&'a str>,
    pub origin: SymbolOrigin,
}

/// Why an entry is not used.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Bad {
    /// Shorter than its layout says.
    Truncated,
    /// Not an entry.
    Magic,
    /// Another layout's.
    Version(u32),
    /// Its bytes are not the ones written.
    Checksum,
    /// A field out of range (what).
    Layout(&'static str),
}

fn origin_code(o: SymbolOrigin) -> Option<u8> {
    match o {
        SymbolOrigin::Symtab => Some(0),
        SymbolOrigin::Dynsym => Some(1),
        SymbolOrigin::DebugFile => Some(2),
        _ => None,
    }
}

fn origin_of(code: u8) -> Option<SymbolOrigin> {
    match code {
        0 => Some(SymbolOrigin::Symtab),
        1 => Some(SymbolOrigin::Dynsym),
        2 => Some(SymbolOrigin::DebugFile),
        _ => None,
    }
}

fn pad8(n: usize) -> usize {
    n.next_multiple_of(8)
}

/// The length of the head (header, build-id and arrays) of an entry of `n` symbols
/// with a build-id of `id_len` bytes; its CRC and 4 zero bytes follow.
fn head_len(id_len: usize, n: usize) -> usize {
    HEADER + pad8(id_len) + n * (8 + 8 + NAME) + pad8(n)
}

/// The entry for `facts` and `symbols` (sorted by start, one per start). `None` when
/// it would be over [`MAX_ENTRY_BYTES`] or a symbol cannot be stored.
pub(crate) fn encode(facts: &Facts, symbols: &[Symbol<'_>]) -> Option<Vec<u8>> {
    let n = symbols.len();
    let id = facts.build_id.as_deref().unwrap_or_default();
    let blob_len: usize = symbols
        .iter()
        .map(|s| s.raw.len() + s.shown.map_or(0, str::len))
        .sum();
    let head = head_len(id.len(), n);
    let total = head + 8 + blob_len;
    if total as u64 > MAX_ENTRY_BYTES {
        return None;
    }
    let mut flags = 0;
    for (bit, on) in [
        (DEMANGLED, facts.demangled),
        (STRIPPED, facts.stripped),
        (ANY_FUNCTION, facts.any_function),
        (DEBUG, facts.debug.is_some()),
        (HAS_BUILD_ID, facts.build_id.is_some()),
    ] {
        if on {
            flags |= bit;
        }
    }
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(&MAGIC);
    out.extend_from_slice(&VERSION.to_le_bytes());
    out.extend_from_slice(&flags.to_le_bytes());
    out.extend_from_slice(&facts.binary.to_bytes());
    out.extend_from_slice(&facts.debug.unwrap_or_default().to_bytes());
    out.extend_from_slice(&u32::try_from(id.len()).ok()?.to_le_bytes());
    out.extend_from_slice(&u32::try_from(n).ok()?.to_le_bytes());
    out.extend_from_slice(&u32::try_from(blob_len).ok()?.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.extend_from_slice(id);
    out.resize(pad8(out.len()), 0);
    for s in symbols {
        out.extend_from_slice(&s.start.to_le_bytes());
    }
    for s in symbols {
        out.extend_from_slice(&s.end.to_le_bytes());
    }
    let mut at = 0u32;
    for s in symbols {
        let raw_len = u32::try_from(s.raw.len()).ok()?;
        let shown_len = match s.shown {
            Some(d) => u32::try_from(d.len()).ok().filter(|&l| l != SAME)?,
            None => SAME,
        };
        let mut crc = crc32fast::Hasher::new();
        crc.update(s.raw.as_bytes());
        crc.update(s.shown.unwrap_or_default().as_bytes());
        for v in [at, raw_len, shown_len, crc.finalize()] {
            out.extend_from_slice(&v.to_le_bytes());
        }
        at += raw_len + if shown_len == SAME { 0 } else { shown_len };
    }
    for s in symbols {
        out.push(origin_code(s.origin)?);
    }
    out.resize(pad8(out.len()), 0);
    debug_assert_eq!(out.len(), head);
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    for s in symbols {
        out.extend_from_slice(s.raw.as_bytes());
        if let Some(d) = s.shown {
            out.extend_from_slice(d.as_bytes());
        }
    }
    debug_assert_eq!(out.len(), total);
    Some(out)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// A symbol's raw name and the name to show (the raw one unless demangled names are
/// stored).
pub(crate) type Names = (Box<str>, Box<str>);

/// Where the name blob is.
enum Blob {
    /// In the head's bytes (the whole entry was given), from this offset.
    Held(usize),
    /// In this file, from this position.
    File(File, u64),
}

/// A decoded entry: its head, checked, where each array is in it, and its names' blob.
pub(crate) struct Index {
    head: Vec<u8>,
    blob: Blob,
    pub facts: Facts,
    n: usize,
    starts: usize,
    ends: usize,
    names: usize,
    origins: usize,
    blob_len: usize,
    /// The running maximum of ends (see `table.rs`).
    max_end: Vec<u64>,
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index")
            .field("facts", &self.facts)
            .field("symbols", &self.n)
            .finish_non_exhaustive()
    }
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

/// Checks the whole entry `data` (as [`read`] does a file) and decodes it.
pub(crate) fn decode(data: Vec<u8>) -> Result<Index, Bad> {
    let (head, blob_len) = lengths(&data, data.len() as u64)?;
    check_head(&data[..head + 8])?;
    parse(data, Blob::Held(head + 8), head, blob_len)
}

/// Reads the entry `file` of `len` bytes: its head (checked), not its names (read
/// when asked, [`Index::names`]).
pub(crate) fn read(file: File, len: u64) -> Result<Index, Bad> {
    let mut header = [0u8; HEADER];
    if len < HEADER as u64 || file.read_exact_at(&mut header, 0).is_err() {
        return Err(Bad::Truncated);
    }
    let (head, blob_len) = lengths(&header, len)?;
    let mut data = vec![0u8; head + 8];
    file.read_exact_at(&mut data, 0)
        .map_err(|_| Bad::Truncated)?;
    check_head(&data)?;
    parse(data, Blob::File(file, (head + 8) as u64), head, blob_len)
}

/// The head's CRC (`data`: the head, its CRC and 4 zero bytes).
fn check_head(data: &[u8]) -> Result<(), Bad> {
    let head = data.len() - 8;
    if crc32fast::hash(&data[..head]) != u32_at(data, head) || u32_at(data, head + 4) != 0 {
        return Err(Bad::Checksum);
    }
    Ok(())
}

/// Decodes a head whose lengths and CRC are checked: the header's fields, and the
/// arrays (starts strictly increasing, ends at least their starts, origins known).
fn parse(data: Vec<u8>, blob: Blob, head: usize, blob_len: usize) -> Result<Index, Bad> {
    let flags = u32_at(&data, 12);
    if flags & !(DEMANGLED | STRIPPED | ANY_FUNCTION | DEBUG | HAS_BUILD_ID) != 0 {
        return Err(Bad::Layout("flags"));
    }
    let identity = |at: usize| Identity::from_bytes(data[at..at + 40].try_into().expect("40"));
    let (binary, debug) = (identity(16), identity(56));
    let id_len = u32_at(&data, 96) as usize;
    let n = u32_at(&data, 100) as usize;
    let starts = HEADER + pad8(id_len);
    let ends = starts + 8 * n;
    let names = ends + 8 * n;
    let origins = names + NAME * n;
    debug_assert_eq!(origins + pad8(n), head);
    let build_id = (flags & HAS_BUILD_ID != 0).then(|| data[HEADER..HEADER + id_len].to_vec());
    if build_id.is_none() && id_len != 0 {
        return Err(Bad::Layout("build-id"));
    }
    let mut max_end = Vec::with_capacity(n);
    let mut running = 0u64;
    let mut last = None;
    for i in 0..n {
        let start = u64_at(&data, starts + 8 * i);
        let end = u64_at(&data, ends + 8 * i);
        if last.is_some_and(|l| l >= start) {
            return Err(Bad::Layout("starts"));
        }
        if end < start {
            return Err(Bad::Layout("ends"));
        }
        last = Some(start);
        running = running.max(end);
        max_end.push(running);
        if origin_of(data[origins + i]).is_none() {
            return Err(Bad::Layout("origin"));
        }
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
        head: data,
        blob,
        facts,
        n,
        starts,
        ends,
        names,
        origins,
        blob_len,
        max_end,
    })
}

/// Names of near symbols are read together when the gap between them is at most this
/// (a read costs more than copying this much: on a VM of 2023, reading Rust's libLLVM's
/// names for 20,000 offsets took 26 ms a name at a time, 11 ms with gaps of 1 MB).
const NEAR: usize = 64 << 10;
/// ... and the read at most this long (unless one symbol's names are longer).
const MAX_READ: usize = 1 << 20;

/// Where the last [`Index::lookup_from`] ended: the address asked and how many
/// symbols start at or before it.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Cursor {
    valid: bool,
    addr: u64,
    at: usize,
}

impl Index {
    /// How many symbols.
    pub fn len(&self) -> usize {
        self.n
    }

    pub fn start(&self, i: usize) -> u64 {
        u64_at(&self.head, self.starts + 8 * i)
    }

    pub fn end(&self, i: usize) -> u64 {
        u64_at(&self.head, self.ends + 8 * i)
    }

    pub fn origin(&self, i: usize) -> SymbolOrigin {
        // Checked by `parse`.
        origin_of(self.head[self.origins + i]).unwrap_or(SymbolOrigin::Symtab)
    }

    /// Symbol `i`'s names' range in the blob, the raw name's length, the shown name's
    /// (`None`: the raw one) and their CRC; checked to be in the blob.
    #[allow(clippy::type_complexity)]
    fn name_record(&self, i: usize) -> Result<(usize, usize, usize, Option<usize>, u32), Bad> {
        let at = self.names + NAME * i;
        let off = u32_at(&self.head, at) as usize;
        let raw = u32_at(&self.head, at + 4) as usize;
        let shown = u32_at(&self.head, at + 8);
        let shown = (shown != SAME).then_some(shown as usize);
        let end = off + raw + shown.unwrap_or(0);
        if end > self.blob_len {
            return Err(Bad::Layout("names"));
        }
        Ok((off, end, raw, shown, u32_at(&self.head, at + 12)))
    }

    /// The blob's bytes `from..to` (checked to be in the blob), read into `buf` if they
    /// are in the file.
    fn blob_bytes<'a>(
        &'a self,
        from: usize,
        to: usize,
        buf: &'a mut Vec<u8>,
    ) -> Result<&'a [u8], Bad> {
        match &self.blob {
            Blob::Held(at) => Ok(&self.head[at + from..at + to]),
            Blob::File(file, at) => {
                buf.resize(to - from, 0);
                file.read_exact_at(buf, at + from as u64)
                    .map_err(|_| Bad::Truncated)?;
                Ok(buf)
            }
        }
    }

    /// The (raw, shown) names of the symbols `which` (ascending), each checked against
    /// its CRC and to be UTF-8; names of near symbols read at once.
    pub fn names(&self, which: &[usize]) -> Result<Vec<Names>, Bad> {
        let mut out = Vec::with_capacity(which.len());
        let mut buf = Vec::new();
        let mut k = 0;
        while k < which.len() {
            let (lo, mut hi, ..) = self.name_record(which[k])?;
            let mut j = k + 1;
            while let Some(&next) = which.get(j) {
                let (from, to, ..) = self.name_record(next)?;
                if from < hi || from - hi > NEAR || to - lo > MAX_READ {
                    break;
                }
                hi = to;
                j += 1;
            }
            let bytes = self.blob_bytes(lo, hi, &mut buf)?;
            for &i in &which[k..j] {
                let (from, to, raw, shown, crc) = self.name_record(i)?;
                let b = &bytes[from - lo..to - lo];
                if crc32fast::hash(b) != crc {
                    return Err(Bad::Checksum);
                }
                let text = |b: &[u8]| {
                    std::str::from_utf8(b)
                        .map(Box::<str>::from)
                        .map_err(|_| Bad::Layout("UTF-8"))
                };
                let raw_name = text(&b[..raw])?;
                let shown_name = match shown {
                    Some(_) => text(&b[raw..])?,
                    None => raw_name.clone(),
                };
                out.push((raw_name, shown_name));
            }
            k = j;
        }
        Ok(out)
    }

    /// The innermost symbol containing `addr`: the one `SymbolTable::lookup` would give.
    pub fn lookup(&self, addr: u64) -> Option<usize> {
        self.lookup_from(addr, &mut Cursor::default())
    }

    /// [`Index::lookup`], for addresses asked mostly in increasing order: `cursor`
    /// remembers the last answer's place, and the next address at or past the last one
    /// is searched from there, by galloping (a few probes near it instead of a binary
    /// search of the whole table, each probe a cache miss on a large one). Answers as
    /// [`Index::lookup`] does, in any order.
    pub fn lookup_from(&self, addr: u64, cursor: &mut Cursor) -> Option<usize> {
        // partition_point(start <= addr), in lo..hi
        let (mut lo, mut hi) = (0, self.n);
        if cursor.valid && addr >= cursor.addr {
            lo = cursor.at;
            let mut step = 1;
            while lo + step <= self.n && self.start(lo + step - 1) <= addr {
                lo += step;
                step *= 2;
            }
            hi = (lo + step).min(self.n);
        }
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.start(mid) <= addr {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        *cursor = Cursor {
            valid: true,
            addr,
            at: lo,
        };
        let mut i = lo;
        while i > 0 {
            i -= 1;
            if self.max_end[i] <= addr {
                return None;
            }
            if self.end(i) > addr {
                return Some(i);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts() -> Facts {
        Facts {
            binary: Identity {
                dev: 1,
                ino: 2,
                size: 3,
                mtime_ns: 4,
                ctime_ns: -5,
            },
            build_id: Some(vec![0xab; 20]),
            stripped: true,
            any_function: true,
            debug: Some(Identity {
                dev: 9,
                ..Identity::default()
            }),
            demangled: true,
        }
    }

    fn sample() -> Vec<u8> {
        let syms = [
            Symbol {
                start: 0x10,
                end: 0x38,
                raw: "_ZN2ns1fEv",
                shown: Some("ns::f()"),
                origin: SymbolOrigin::Symtab,
            },
            Symbol {
                start: 0x20,
                end: 0x24,
                raw: "g",
                shown: None,
                origin: SymbolOrigin::Dynsym,
            },
            Symbol {
                start: 0x28,
                end: 0x30,
                raw: "hé",
                shown: None,
                origin: SymbolOrigin::DebugFile,
            },
            Symbol {
                start: 0x40,
                end: u64::MAX,
                raw: "i",
                shown: None,
                origin: SymbolOrigin::Symtab,
            },
        ];
        encode(&facts(), &syms).unwrap()
    }

    fn names(ix: &Index, which: &[usize]) -> Vec<(String, String)> {
        ix.names(which)
            .unwrap()
            .into_iter()
            .map(|(r, s)| (r.into(), s.into()))
            .collect()
    }

    fn pair(r: &str, s: &str) -> (String, String) {
        (r.to_owned(), s.to_owned())
    }

    /// The position of the head's CRC in an entry of `n` symbols, 20-byte build-id.
    fn head_crc_at(n: usize) -> usize {
        head_len(20, n)
    }

    fn fix_head_crc(e: &mut [u8], n: usize) {
        let at = head_crc_at(n);
        let crc = crc32fast::hash(&e[..at]);
        e[at..at + 4].copy_from_slice(&crc.to_le_bytes());
    }

    #[test]
    fn an_entry_decodes_to_what_was_encoded_and_looks_up_as_the_table() {
        let ix = decode(sample()).unwrap();
        assert_eq!(ix.facts, facts());
        assert_eq!(ix.len(), 4);
        assert_eq!(
            names(&ix, &[0, 1, 2, 3]),
            [
                pair("_ZN2ns1fEv", "ns::f()"),
                pair("g", "g"),
                pair("hé", "hé"),
                pair("i", "i")
            ]
        );
        assert_eq!(names(&ix, &[1, 3]), [pair("g", "g"), pair("i", "i")]);
        assert_eq!(ix.origin(2), SymbolOrigin::DebugFile);
        // The layout drawn in table.rs.
        let name = |a| ix.lookup(a).map(|i| names(&ix, &[i])[0].0.clone());
        assert_eq!(name(0x0f), None);
        assert_eq!(name(0x22).as_deref(), Some("g"));
        assert_eq!(name(0x2a).as_deref(), Some("hé"));
        assert_eq!(name(0x34).as_deref(), Some("_ZN2ns1fEv"));
        assert_eq!(name(0x3c), None);
        assert_eq!(name(u64::MAX - 1).as_deref(), Some("i"));
        let empty = Facts {
            build_id: None,
            debug: None,
            ..facts()
        };
        let ix = decode(encode(&empty, &[]).unwrap()).unwrap();
        assert_eq!(ix.facts, empty);
        assert_eq!(ix.lookup(0), None);
    }

    #[test]
    fn an_entry_read_from_a_file_reads_only_its_head_and_the_names_asked() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("e.idx");
        let mut e = sample();
        // A name no one asks for, damaged: not noticed.
        let last = e.len() - 1;
        e[last] ^= 1;
        std::fs::write(&path, &e).unwrap();
        let f = File::open(&path).unwrap();
        let ix = read(f, e.len() as u64).unwrap();
        assert_eq!(ix.head.len(), head_crc_at(4) + 8);
        assert_eq!(
            names(&ix, &[0, 2]),
            [pair("_ZN2ns1fEv", "ns::f()"), pair("hé", "hé")]
        );
        assert_eq!(ix.names(&[3]).unwrap_err(), Bad::Checksum);
        // Another length than its header says.
        let f = File::open(&path).unwrap();
        assert_eq!(
            read(f, e.len() as u64 + 1).unwrap_err(),
            Bad::Layout("length")
        );
        std::fs::write(&path, &e[..e.len() - 1]).unwrap();
        let f = File::open(&path).unwrap();
        assert_eq!(read(f, e.len() as u64 - 1).unwrap_err(), Bad::Truncated);
    }

    #[test]
    fn damaged_entries_are_refused() {
        let good = sample();
        let mut flipped = good.clone();
        flipped[HEADER + 30] ^= 1;
        assert_eq!(decode(flipped).unwrap_err(), Bad::Checksum);
        for cut in [0, 10, HEADER, good.len() - 1] {
            assert!(decode(good[..cut].to_vec()).is_err(), "cut at {cut}");
        }
        let mut magic = good.clone();
        magic[0] = b'X';
        assert_eq!(decode(magic).unwrap_err(), Bad::Magic);
        // Another version, its checksum made right.
        let mut v2 = good.clone();
        v2[8..12].copy_from_slice(&2u32.to_le_bytes());
        fix_head_crc(&mut v2, 4);
        assert_eq!(decode(v2).unwrap_err(), Bad::Version(2));
        // Unsorted starts, checksum right.
        let mut unsorted = good.clone();
        let starts = HEADER + 24;
        unsorted[starts..starts + 8].copy_from_slice(&0x30u64.to_le_bytes());
        fix_head_crc(&mut unsorted, 4);
        assert_eq!(decode(unsorted).unwrap_err(), Bad::Layout("starts"));
        // A name out of the blob, checksum right: refused when it is asked for.
        let mut far = good.clone();
        let names_at = starts + 16 * 4;
        far[names_at..names_at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        fix_head_crc(&mut far, 4);
        let ix = decode(far).unwrap();
        assert_eq!(ix.names(&[0]).unwrap_err(), Bad::Layout("names"));
        assert!(ix.names(&[1]).is_ok());
        // A name's byte changed: its CRC says so.
        let mut name = good.clone();
        let at = head_crc_at(4) + 8;
        name[at] = b'X';
        let ix = decode(name).unwrap();
        assert_eq!(ix.names(&[0]).unwrap_err(), Bad::Checksum);
    }

    proptest::proptest! {
        /// Lookups through a cursor answer as plain ones, whatever the order of the
        /// addresses (mostly increasing, as a report asks, or not): on tables of nested
        /// and disjoint symbols.
        #[test]
        fn a_cursor_answers_as_a_lookup(
            spans in proptest::collection::vec((0u64..2000, 0u64..300), 0..200),
            mut addrs in proptest::collection::vec(0u64..2400, 0..300),
            sorted in proptest::prelude::any::<bool>(),
        ) {
            let mut spans: Vec<(u64, u64)> = spans;
            spans.sort_unstable();
            spans.dedup_by_key(|s| s.0);
            let names: Vec<String> = (0..spans.len()).map(|i| format!("f{i}")).collect();
            let syms: Vec<Symbol<'_>> = spans
                .iter()
                .zip(&names)
                .map(|(&(start, len), name)| Symbol {
                    start,
                    end: start + len,
                    raw: name,
                    shown: None,
                    origin: SymbolOrigin::Symtab,
                })
                .collect();
            let ix = decode(encode(&facts(), &syms).unwrap()).unwrap();
            if sorted {
                addrs.sort_unstable();
            }
            let mut cursor = Cursor::default();
            for a in addrs {
                proptest::prop_assert_eq!(ix.lookup_from(a, &mut cursor), ix.lookup(a), "{:#x}", a);
            }
        }

        /// Any bytes, and any damage to a good entry with its head's checksum made right
        /// again: an error or an entry whose lookups and names stay in bounds, never a
        /// panic.
        #[test]
        fn decoding_never_panics(
            junk in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..400),
            at in 0usize..1000,
            byte in proptest::prelude::any::<u8>(),
            addr in proptest::prelude::any::<u64>(),
        ) {
            let _ = decode(junk);
            let mut e = sample();
            let at = at % e.len();
            e[at] = byte;
            fix_head_crc(&mut e, 4);
            if let Ok(ix) = decode(e) {
                if let Some(i) = ix.lookup(addr) {
                    let _ = (ix.names(&[i]), ix.origin(i), ix.start(i), ix.end(i));
                }
                let _ = ix.names(&[0, 1, 2, 3]);
            }
        }
    }
}
