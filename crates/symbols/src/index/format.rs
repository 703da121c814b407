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
//!      104     4  string blob length S
//!      108     4  zero
//!      112     B  build-id, then zeros to a multiple of 8
//!              8N starts (strictly increasing)
//!              8N ends (each at least its start)
//!             16N names: raw offset, raw length, shown offset, shown length (in the blob)
//!               N origins (0 .symtab, 1 .dynsym, 2 debug file), then zeros to a multiple of 8
//!               S string blob (UTF-8 names)
//!              4  CRC-32 of every byte before it
//! ```
//!
//! All integers are little-endian. [`decode`] checks every length and offset against the
//! bytes it has and answers [`Bad`] for anything else (never a panic); the names' UTF-8 is
//! checked when a name is used ([`Index::raw`]), so a report pays for the names it shows.

use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;

use crate::types::SymbolOrigin;

/// The first bytes of every entry.
pub(crate) const MAGIC: [u8; 8] = *b"PKSYMIDX";
/// The layout's version: an entry of another is rebuilt.
pub(crate) const VERSION: u32 = 1;
/// Bytes before the build-id.
const HEADER: usize = 112;
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

/// The entry for `facts` and `symbols` (sorted by start, one per start). `None` when
/// it would be over [`MAX_ENTRY_BYTES`] or a symbol cannot be stored.
pub(crate) fn encode(facts: &Facts, symbols: &[Symbol<'_>]) -> Option<Vec<u8>> {
    let n = symbols.len();
    let id = facts.build_id.as_deref().unwrap_or_default();
    let blob_len: usize = symbols
        .iter()
        .map(|s| s.raw.len() + s.shown.map_or(0, str::len))
        .sum();
    let total = HEADER + pad8(id.len()) + n * (8 + 8 + 16) + pad8(n) + blob_len + 4;
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
        let raw = (at, s.raw.len() as u32);
        at += raw.1;
        let shown = match s.shown {
            Some(d) => {
                let d = (at, d.len() as u32);
                at += d.1;
                d
            }
            None => raw,
        };
        for v in [raw.0, raw.1, shown.0, shown.1] {
            out.extend_from_slice(&v.to_le_bytes());
        }
    }
    for s in symbols {
        out.push(origin_code(s.origin)?);
    }
    out.resize(pad8(out.len()), 0);
    for s in symbols {
        out.extend_from_slice(s.raw.as_bytes());
        if let Some(d) = s.shown {
            out.extend_from_slice(d.as_bytes());
        }
    }
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    debug_assert_eq!(out.len(), total);
    Some(out)
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// A decoded entry: its bytes, checked, and where each array is in them.
pub(crate) struct Index {
    data: Vec<u8>,
    pub facts: Facts,
    n: usize,
    starts: usize,
    ends: usize,
    names: usize,
    origins: usize,
    blob: usize,
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

/// Checks the entry `data` (its length, magic, version, checksum, and every array and
/// name range against its length; starts strictly increasing, ends at least their
/// starts, origins known) and decodes its header.
pub(crate) fn decode(data: Vec<u8>) -> Result<Index, Bad> {
    if data.len() < HEADER + 4 {
        return Err(Bad::Truncated);
    }
    if data[..8] != MAGIC {
        return Err(Bad::Magic);
    }
    let version = u32_at(&data, 8);
    if version != VERSION {
        return Err(Bad::Version(version));
    }
    let body = data.len() - 4;
    if crc32fast::hash(&data[..body]) != u32_at(&data, body) {
        return Err(Bad::Checksum);
    }
    let flags = u32_at(&data, 12);
    if flags & !(DEMANGLED | STRIPPED | ANY_FUNCTION | DEBUG | HAS_BUILD_ID) != 0 {
        return Err(Bad::Layout("flags"));
    }
    let identity = |at: usize| Identity::from_bytes(data[at..at + 40].try_into().expect("40"));
    let (binary, debug) = (identity(16), identity(56));
    let id_len = u32_at(&data, 96) as usize;
    let n = u32_at(&data, 100) as usize;
    let blob_len = u32_at(&data, 104) as usize;
    // Every size is at most 2^32 - 1, so these sums cannot overflow a 64-bit usize.
    let starts = HEADER + pad8(id_len);
    let ends = starts + 8 * n;
    let names = ends + 8 * n;
    let origins = names + 16 * n;
    let blob = origins + pad8(n);
    if blob + blob_len != body {
        return Err(if blob + blob_len > body {
            Bad::Truncated
        } else {
            Bad::Layout("length")
        });
    }
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
        for pair in [0, 8] {
            let off = u32_at(&data, names + 16 * i + pair) as usize;
            let len = u32_at(&data, names + 16 * i + pair + 4) as usize;
            if off + len > blob_len {
                return Err(Bad::Layout("names"));
            }
        }
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
        data,
        facts,
        n,
        starts,
        ends,
        names,
        origins,
        blob,
        blob_len,
        max_end,
    })
}

impl Index {
    /// How many symbols.
    pub fn len(&self) -> usize {
        self.n
    }

    pub fn start(&self, i: usize) -> u64 {
        u64_at(&self.data, self.starts + 8 * i)
    }

    pub fn end(&self, i: usize) -> u64 {
        u64_at(&self.data, self.ends + 8 * i)
    }

    pub fn origin(&self, i: usize) -> SymbolOrigin {
        // Checked by `decode`.
        origin_of(self.data[self.origins + i]).unwrap_or(SymbolOrigin::Symtab)
    }

    fn name(&self, i: usize, pair: usize) -> Option<&str> {
        let off = u32_at(&self.data, self.names + 16 * i + pair) as usize;
        let len = u32_at(&self.data, self.names + 16 * i + pair + 4) as usize;
        let blob = &self.data[self.blob..self.blob + self.blob_len];
        std::str::from_utf8(blob.get(off..off + len)?).ok()
    }

    /// The raw name of symbol `i`; `None` if it is not UTF-8 (a damaged entry).
    pub fn raw(&self, i: usize) -> Option<&str> {
        self.name(i, 0)
    }

    /// The name to show of symbol `i` (the raw one unless demangled names are stored).
    pub fn shown(&self, i: usize) -> Option<&str> {
        self.name(i, 8)
    }

    /// The innermost symbol containing `addr`: the one `SymbolTable::lookup` would give.
    pub fn lookup(&self, addr: u64) -> Option<usize> {
        // partition_point(start <= addr)
        let (mut lo, mut hi) = (0, self.n);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.start(mid) <= addr {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
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

    #[test]
    fn an_entry_decodes_to_what_was_encoded_and_looks_up_as_the_table() {
        let ix = decode(sample()).unwrap();
        assert_eq!(ix.facts, facts());
        assert_eq!(ix.len(), 4);
        assert_eq!(ix.raw(0), Some("_ZN2ns1fEv"));
        assert_eq!(ix.shown(0), Some("ns::f()"));
        assert_eq!(ix.shown(1), Some("g"));
        assert_eq!(ix.raw(2), Some("hé"));
        assert_eq!(ix.origin(2), SymbolOrigin::DebugFile);
        // The layout drawn in table.rs.
        let name = |a| ix.lookup(a).and_then(|i| ix.raw(i));
        assert_eq!(name(0x0f), None);
        assert_eq!(name(0x22), Some("g"));
        assert_eq!(name(0x2a), Some("hé"));
        assert_eq!(name(0x34), Some("_ZN2ns1fEv"));
        assert_eq!(name(0x3c), None);
        assert_eq!(name(u64::MAX - 1), Some("i"));
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
        let body = v2.len() - 4;
        let crc = crc32fast::hash(&v2[..body]);
        v2[body..].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(decode(v2).unwrap_err(), Bad::Version(2));
        // A name out of the blob, checksum right: refused by the layout check.
        let mut far = good.clone();
        let names = HEADER + 24 + 16 * 4;
        far[names..names + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        let crc = crc32fast::hash(&far[..body]);
        far[body..].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(decode(far).unwrap_err(), Bad::Layout("names"));
    }

    proptest::proptest! {
        /// Any bytes, and any damage to a good entry with its checksum made right
        /// again: an error or an entry whose lookups stay in bounds, never a panic.
        #[test]
        fn decoding_never_panics(
            junk in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..400),
            at in 0usize..1000,
            byte in proptest::prelude::any::<u8>(),
            addr in proptest::prelude::any::<u64>(),
        ) {
            let _ = decode(junk);
            let mut e = sample();
            let body = e.len() - 4;
            let at = at % body;
            e[at] = byte;
            let crc = crc32fast::hash(&e[..body]);
            e[body..].copy_from_slice(&crc.to_le_bytes());
            if let Ok(ix) = decode(e) {
                if let Some(i) = ix.lookup(addr) {
                    let _ = (ix.raw(i), ix.shown(i), ix.origin(i), ix.start(i), ix.end(i));
                }
            }
        }
    }
}
