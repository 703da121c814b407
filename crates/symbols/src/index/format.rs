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
//! All integers are little-endian. A reader (`read.rs`) checks the length against the
//! file's, then reads the head in one pass in file order for all the addresses it is
//! asked (holding only the starts whole), checks its CRC and the arrays (sorted, ends at
//! least starts, origins known), and keeps the records of the symbols hit; then reads
//! only their names (near ones in one read), each checked against its own CRC, its
//! range in the blob and UTF-8. So every byte used is checksummed, and a report reads
//! the names around the ones it shows, not all: Rust's libLLVM's entry is 54 MB, 49 MB
//! of them names, and read whole it cost a report of 20,000 offsets 45 ms, against
//! 10 ms so. Anything wrong is a [`Bad`], never a panic.

use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;

use crate::types::SymbolOrigin;

/// The first bytes of every entry.
pub(crate) const MAGIC: [u8; 8] = *b"PKSYMIDX";
/// The layout's version: an entry of another is rebuilt.
pub(crate) const VERSION: u32 = 1;
/// Bytes before the build-id.
pub(super) const HEADER: usize = 112;
/// Bytes of a symbol's name record.
pub(super) const NAME: usize = 16;
/// A shown length saying "the raw name".
pub(super) const SAME: u32 = u32::MAX;
/// The largest entry written or read (and the blob's offsets fit `u32`).
pub(crate) const MAX_ENTRY_BYTES: u64 = 256 << 20;

pub(super) const DEMANGLED: u32 = 1;
pub(super) const STRIPPED: u32 = 2;
pub(super) const ANY_FUNCTION: u32 = 4;
pub(super) const DEBUG: u32 = 8;
pub(super) const HAS_BUILD_ID: u32 = 16;

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

    pub(super) fn from_bytes(b: &[u8; 40]) -> Identity {
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

pub(super) fn origin_of(code: u8) -> Option<SymbolOrigin> {
    match code {
        0 => Some(SymbolOrigin::Symtab),
        1 => Some(SymbolOrigin::Dynsym),
        2 => Some(SymbolOrigin::DebugFile),
        _ => None,
    }
}

pub(super) fn pad8(n: usize) -> usize {
    n.next_multiple_of(8)
}

/// The length of the head (header, build-id and arrays) of an entry of `n` symbols
/// with a build-id of `id_len` bytes; its CRC and 4 zero bytes follow.
pub(super) fn head_len(id_len: usize, n: usize) -> usize {
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

pub(super) fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

pub(crate) use super::read::{decode, read, Index};

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::File;

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
        ix.symbols(which)
            .unwrap()
            .into_iter()
            .map(|(_, (r, s))| (s.unwrap_or_else(|| r.clone()), r))
            .map(|(s, r)| (r.into(), s.into()))
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
        let two = &ix.symbols(&[2]).unwrap()[0].0;
        assert_eq!(
            (two.index, two.start, two.end, two.origin),
            (2, 0x28, 0x30, SymbolOrigin::DebugFile)
        );
        // The layout drawn in table.rs.
        let name = |a| ix.lookup(a).unwrap().map(|i| names(&ix, &[i])[0].0.clone());
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
        assert_eq!(ix.lookup(0), Ok(None));
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
        assert_eq!(
            names(&ix, &[0, 2]),
            [pair("_ZN2ns1fEv", "ns::f()"), pair("hé", "hé")]
        );
        assert_eq!(ix.symbols(&[3]).unwrap_err(), Bad::Checksum);
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
        // Refused when opened, or by the pass that reads the head.
        let refused = |e: Vec<u8>| decode(e).and_then(|ix| ix.lookup(0x22)).unwrap_err();
        let mut flipped = good.clone();
        flipped[HEADER + 30] ^= 1;
        assert_eq!(refused(flipped), Bad::Checksum);
        // The header's facts too (an identity byte).
        let mut facts = good.clone();
        facts[20] ^= 1;
        assert_eq!(refused(facts), Bad::Checksum);
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
        assert_eq!(refused(unsorted), Bad::Layout("starts"));
        // An end before its start, checksum right.
        let mut ends = good.clone();
        ends[starts + 32..starts + 40].copy_from_slice(&0u64.to_le_bytes());
        fix_head_crc(&mut ends, 4);
        assert_eq!(refused(ends), Bad::Layout("ends"));
        // An unknown origin, checksum right.
        let mut origin = good.clone();
        origin[starts + 32 * 4 + 1] = 9;
        fix_head_crc(&mut origin, 4);
        assert_eq!(refused(origin), Bad::Layout("origin"));
        // A name out of the blob, checksum right: refused when it is asked for.
        let mut far = good.clone();
        let names_at = starts + 16 * 4;
        far[names_at..names_at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        fix_head_crc(&mut far, 4);
        let ix = decode(far).unwrap();
        assert_eq!(ix.symbols(&[0]).unwrap_err(), Bad::Layout("names"));
        assert!(ix.symbols(&[1]).is_ok());
        // A name's byte changed: its CRC says so.
        let mut name = good.clone();
        let at = head_crc_at(4) + 8;
        name[at] = b'X';
        let ix = decode(name).unwrap();
        assert_eq!(ix.symbols(&[0]).unwrap_err(), Bad::Checksum);
    }

    /// A table over many blocks of the pass (20,000 symbols: each array several 64 KiB
    /// blocks): every address answered as the table would, names and origins of the
    /// symbols hit right, read from a file.
    #[test]
    fn a_pass_over_many_blocks_answers_as_the_table() {
        let n = 20_000u64;
        let names: Vec<String> = (0..n).map(|i| format!("f{i}")).collect();
        // Every third symbol holds the next one (nested); all others disjoint.
        let syms: Vec<Symbol<'_>> = (0..n)
            .map(|i| Symbol {
                start: 100 * i,
                end: 100 * i + if i % 3 == 0 { 150 } else { 40 },
                raw: &names[i as usize],
                shown: None,
                origin: if i % 2 == 0 {
                    SymbolOrigin::Symtab
                } else {
                    SymbolOrigin::Dynsym
                },
            })
            .collect();
        let bytes = encode(&facts(), &syms).unwrap();
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("e.idx");
        std::fs::write(&path, &bytes).unwrap();
        let ix = read(File::open(&path).unwrap(), bytes.len() as u64).unwrap();
        let addrs: Vec<u64> = (0..n * 100).step_by(37).collect();
        // (Symbol i ends before the start of i + 2: only i and i - 1 can hold a.)
        let table = |a: u64| {
            let top = (a / 100).min(n - 1) as usize;
            (top.saturating_sub(2)..=top)
                .rev()
                .find(|&i| syms[i].start <= a && a < syms[i].end)
        };
        let mut want: Vec<usize> = addrs.iter().filter_map(|&a| table(a)).collect();
        want.sort_unstable();
        want.dedup();
        let got = ix.symbols_at(addrs.clone()).unwrap();
        assert_eq!(got.iter().map(|(h, _)| h.index).collect::<Vec<_>>(), want);
        for (h, (raw, shown)) in &got {
            let s = &syms[h.index];
            assert_eq!((h.start, h.end, h.origin), (s.start, s.end, s.origin));
            assert_eq!((&**raw, shown.as_deref()), (s.raw, None));
        }
    }

    proptest::proptest! {
        /// One pass answers every address as the table would (the innermost symbol:
        /// the last started that has not ended), in any order of the addresses, on
        /// tables of nested and disjoint symbols.
        #[test]
        fn a_pass_answers_as_the_table(
            spans in proptest::collection::vec((0u64..2000, 0u64..300), 0..200),
            addrs in proptest::collection::vec(0u64..2400, 0..300),
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
            let table = |a: u64| (0..syms.len()).rev().find(|&i| syms[i].start <= a && a < syms[i].end);
            let mut want: Vec<usize> = addrs.iter().filter_map(|&a| table(a)).collect();
            want.sort_unstable();
            want.dedup();
            let got: Vec<usize> = ix.symbols_at(addrs.clone()).unwrap().iter().map(|(h, _)| h.index).collect();
            proptest::prop_assert_eq!(got, want);
            for &a in addrs.iter().take(20) {
                proptest::prop_assert_eq!(ix.lookup(a).unwrap(), table(a), "{:#x}", a);
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
                let _ = ix.symbols_at(vec![addr, 0x22, 0x34]);
                let _ = ix.symbols(&[0, 1, 2, 3]);
            }
        }
    }
}
