//! Symbol tables read by range, for the offsets a report sampled: what a
//! report needs of an ELF file's symbols, without reading the file (with
//! `--debug-info`, `cache.rs` keeps the headers read here and the DWARF,
//! read by range too, and this reads the symbols for each request).
//!
//! A binary's code, data and DWARF are most of its bytes (librustc_driver:
//! 154 MB of which 24 MB are symbol tables; a profkit binary built with
//! debug info: 37 MB of which 1 MB). Reading whole files made a report of
//! a system-wide `cargo build` hold 450 MB. Here:
//!
//! - the ELF header, program headers, section headers (`profkit-elf`'s
//!   `Segments` and `Sections`), notes (`profkit_elf::build_id`) and
//!   `.gnu_debuglink` are read through a [`ReadCache`] (small ranges;
//!   `object`'s `ElfFile` would parse both symbol tables whole);
//! - `.symtab` and `.dynsym` (or a stripped binary's debug file's
//!   `.symtab`, found by build-id or debuglink and checked without being
//!   held) are streamed in 64 KiB blocks of whole 24-byte entries, three
//!   times: every function start (an unsized symbol ends at the next),
//!   then the starts of the symbols that cover a sampled address, then
//!   every symbol at those starts (aliases: the lowest rank wins, as in
//!   the whole-file path);
//! - only those symbols' names are read, by positioned reads.
//!
//! So a binary costs 8 bytes per function while it is read, plus the
//! symbols sampled, whatever its size; the image answers only for the
//! offsets it was read for and is not cached. With a symbol index
//! (`index/`), a binary without an entry is read once whole instead
//! ([`indexed::parse_full`]: one pass over each table, its string table read whole,
//! every name kept), and the entry written from that table answers the
//! next reports ([`indexed::parse_indexed`]); a table of every function answers each
//! address as the table read for it would (the same symbol wins at each
//! start, and a lookup takes the innermost symbol containing the address). Files this does not cover
//! (not ELF64 little-endian, relocatable `.ko`, extended section indices,
//! a debug file that is not ELF64) return `None` and are read whole as
//! before. Names are looked at only for the symbols kept:
//! on x86-64 the names the whole-file path drops (`$x`, `.L…`, empty)
//! belong to symbols `is_definition` already drops (size 0, NOTYPE).

use std::fs::File;
use std::io::{BufReader, Read};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use object::elf;
use object::{Endianness, ReadCache};

use crate::dwarf::DwarfSection;
use crate::elf::{debug_candidates, DebugCheck, ElfImage, LoadConfig, Sections};
use crate::error::Error;
use crate::index::{self, Facts, Found, Identity, Index, IndexStore};
use crate::table::{Candidate, Entry, SymbolTable};
use crate::types::SymbolOrigin;
use profkit_elf::{Sections as SectionHeaders, Segments};

/// The longest name read (a longer one is cut there).
const MAX_NAME: usize = 64 << 10;

/// Reads names (NUL-terminated) at file positions.
mod indexed;
use indexed::parse_indexed;

/// The file being symbolized, opened and checked by the caller: its path
/// (for messages and the debug file's search), the open file and its
/// `fstat`.
#[derive(Clone, Copy)]
pub(crate) struct Opened<'a> {
    pub path: &'a Path,
    pub file: &'a File,
    pub meta: &'a std::fs::Metadata,
}

struct NameReader<'a> {
    file: &'a File,
}

impl NameReader<'_> {
    /// The name at `pos` (lossy UTF-8; at most [`MAX_NAME`] bytes).
    fn read(&self, pos: u64) -> String {
        let mut out = Vec::new();
        let mut buf = [0u8; 256];
        while out.len() < MAX_NAME {
            let n = match self.file.read_at(&mut buf, pos + out.len() as u64) {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            match memchr::memchr(0, &buf[..n]) {
                Some(end) => {
                    out.extend_from_slice(&buf[..end]);
                    break;
                }
                None => out.extend_from_slice(&buf[..n]),
            }
        }
        out.truncate(MAX_NAME);
        String::from_utf8_lossy(&out).into_owned()
    }
}

/// One function symbol of a table, as the whole-file path's `collect`
/// chooses them (names aside).
#[derive(Clone, Copy)]
struct Func {
    start: u64,
    /// As recorded (0: unsized).
    size: u64,
    /// The end of its section: an unsized symbol's end is at most this.
    limit: u64,
    /// File position of the name.
    name_at: u64,
    origin: SymbolOrigin,
    /// Rank bits known from the entry (size 0, NOTYPE, binding).
    rank: u64,
}

/// A symbol table's place in the file and its string table's.
#[derive(Clone)]
struct Table {
    origin: SymbolOrigin,
    at: u64,
    size: u64,
    str_at: u64,
    str_size: u64,
}

/// What the headers of an ELF64 little-endian file say, read by range
/// through `object`'s low-level API (its `ElfFile` would read both symbol
/// tables whole to parse).
#[derive(Clone)]
pub(crate) struct Headers {
    pub build_id: Option<Vec<u8>>,
    pub debuglink: Option<(Vec<u8>, u32)>,
    relocatable: bool,
    segments: Segments,
    /// Every PT_LOAD's (address, size in memory), file bytes or not: what a separate debug
    /// file found by build-id must share with its binary ([`crate::elf::same_loads`]).
    pub loads: Vec<(u64, u64)>,
    layout: Sections,
    tables: Vec<Table>,
    extended_indices: bool,
    /// The `.debug_*` and `.zdebug_*` sections.
    pub dwarf: Vec<DwarfSection>,
}

impl Headers {
    /// True if [`parse`] reads this file's symbols by range (else it is read whole).
    pub fn by_range(&self) -> bool {
        !self.relocatable && !self.extended_indices
    }

    /// True if the file has a `.symtab` (not stripped).
    pub fn has_symtab(&self) -> bool {
        self.tables.iter().any(|t| t.origin == SymbolOrigin::Symtab)
    }
}

/// A binary's separate debug file, found and checked by [`find_debug_path`], held open.
#[derive(Clone)]
pub(crate) struct DebugFile {
    pub path: PathBuf,
    pub file: Arc<File>,
    pub len: u64,
    /// Its headers, if it is ELF64 little-endian.
    pub headers: Option<Headers>,
}

/// How [`parse`] gets a stripped binary's debug file.
#[derive(Clone, Copy)]
pub(crate) enum DebugLookup<'a> {
    /// Look for it ([`find_debug_path`]).
    Search,
    /// Already looked for (with `--debug-info`, where the DWARF needs it too): this one, or
    /// none.
    Found(Option<&'a DebugFile>),
}

/// The headers of `file`; `None` when it is not ELF64 little-endian (the
/// whole-file path reads it, and words any error).
pub(crate) fn headers(file: &File) -> Option<Headers> {
    let cache = ReadCache::new(file);
    let segments = Segments::parse(&cache).ok()?;
    let sections = SectionHeaders::parse(&cache).ok()?;
    if !sections.is_64() || sections.endian() != Endianness::Little {
        return None;
    }
    let build_id = profkit_elf::build_id(&cache);
    let loads = segments.layout();
    let debuglink = sections
        .by_name(".gnu_debuglink")
        .and_then(|s| sections.raw_data(&cache, s).ok())
        .and_then(|d| {
            let end = memchr::memchr(0, d)?;
            let at = (end + 1).next_multiple_of(4);
            let crc = u32::from_le_bytes(d.get(at..at + 4)?.try_into().ok()?);
            Some((d[..end].to_vec(), crc))
        });
    let all = sections.all();
    let layout = Sections::from_headers(all.iter().map(|s| (s.address, s.size, s.is_executable())));
    let dwarf = all
        .iter()
        .filter(|s| s.name.starts_with(b".debug_") || s.name.starts_with(b".zdebug_"))
        .map(|s| DwarfSection {
            name: String::from_utf8_lossy(&s.name).into_owned(),
            offset: s.offset,
            size: s.size,
            nobits: s.is_nobits(),
            compressed: s.is_compressed(),
        })
        .collect();
    let mut tables = Vec::new();
    for (kind, origin) in [
        (elf::SHT_SYMTAB, SymbolOrigin::Symtab),
        (elf::SHT_DYNSYM, SymbolOrigin::Dynsym),
    ] {
        let Some(s) = sections.by_kind(kind) else {
            continue;
        };
        let Some(strtab) = sections.get(s.link as usize) else {
            continue;
        };
        tables.push(Table {
            origin,
            at: s.offset,
            size: s.size,
            str_at: strtab.offset,
            str_size: strtab.size,
        });
    }
    Some(Headers {
        build_id,
        debuglink,
        relocatable: segments.is_relocatable(),
        segments,
        loads,
        layout,
        tables,
        extended_indices: all.iter().any(|s| s.kind == elf::SHT_SYMTAB_SHNDX),
        dwarf,
    })
}

/// Parses `file` (the regular file `path`, metadata `meta`, headers `h`
/// from [`headers`]) for the
/// symbols that cover the file offsets `wanted` (and their aliases),
/// reading only headers, the symbol tables and those symbols' names:
/// every wanted offset finds the symbol the whole table would give it.
/// A stripped binary's symbols come from its debug file, looked for as
/// `debug` says. `None` when it is a kind of file this does not cover (the
/// caller reads it whole).
///
/// With a symbol index (`index`, its directory usable), the binary's whole
/// table is read from its entry when there is one for this very file
/// ([`indexed::parse_indexed`]), else built once ([`indexed::parse_full`]) and written there;
/// the answers are the same.
pub(crate) fn parse(
    f: Opened<'_>,
    h: Headers,
    cfg: &LoadConfig<'_>,
    wanted: &[u64],
    debug: DebugLookup<'_>,
    index: Option<&IndexStore>,
) -> Result<Option<ElfImage>, Error> {
    if !h.by_range() {
        return Ok(None);
    }
    match index.filter(|store| store.usable()) {
        Some(store) => parse_indexed(store, f, h, cfg, wanted, debug),
        None => parse_ranged(f, h, cfg, wanted, debug),
    }
}

/// A stripped binary's debug file, and its `.symtab` to read.
struct DebugSymbols {
    found: Option<DebugFile>,
    /// The debug file's `.symtab` (origin [`SymbolOrigin::DebugFile`]) and its
    /// sections, when it has one.
    table: Option<(Sections, Table)>,
}

impl DebugSymbols {
    const NONE: DebugSymbols = DebugSymbols {
        found: None,
        table: None,
    };

    /// The identity of the debug file whose `.symtab` is read, if one is
    /// (`Err` when it cannot be told).
    fn identity(&self) -> Result<Option<Identity>, ()> {
        match (&self.found, &self.table) {
            (Some(d), Some(_)) => d
                .file
                .metadata()
                .map(|m| Some(Identity::of(&m)))
                .map_err(drop),
            _ => Ok(None),
        }
    }
}

/// A stripped binary's debug file, looked for or taken as `debug` says;
/// `None` when the whole-file path must read the binary (the debug file is
/// not ELF64 little-endian, or, looked for here, has no `.symtab`).
/// [`debug_symbols`] of the binary at `path` with headers `h`.
fn debug_symbols_of(
    path: &Path,
    h: &Headers,
    cfg: &LoadConfig<'_>,
    debug: DebugLookup<'_>,
) -> Option<DebugSymbols> {
    debug_symbols(
        path,
        h.build_id.as_deref(),
        h.debuglink.as_ref(),
        &h.loads,
        cfg,
        debug,
    )
}

fn debug_symbols(
    path: &Path,
    build_id: Option<&[u8]>,
    debuglink: Option<&(Vec<u8>, u32)>,
    loads: &[(u64, u64)],
    cfg: &LoadConfig<'_>,
    debug: DebugLookup<'_>,
) -> Option<DebugSymbols> {
    let searched = matches!(debug, DebugLookup::Search);
    let found = match debug {
        DebugLookup::Search => {
            let link = debuglink.map(|(name, crc)| (name.as_slice(), *crc));
            find_debug_path(
                path,
                build_id,
                link,
                loads,
                cfg.debug_dirs,
                cfg.debuginfod_cache,
            )
        }
        DebugLookup::Found(d) => d.cloned(),
    };
    let Some(found) = found else {
        return Some(DebugSymbols::NONE);
    };
    // Not ELF64 LE: the whole-file path reads both.
    let dh = found.headers.as_ref()?;
    let table = match dh.tables.iter().find(|t| t.origin == SymbolOrigin::Symtab) {
        Some(t) => {
            let mut t = t.clone();
            t.origin = SymbolOrigin::DebugFile;
            Some((dh.layout.clone(), t))
        }
        // The whole-file path words a debug file without symbols.
        None if searched => return None,
        // Found for its DWARF: no symbols from it.
        None => None,
    };
    Some(DebugSymbols {
        found: Some(found),
        table,
    })
}

/// The end of a table's string table (names at or past it are not read).
fn names_end(t: &Table) -> u64 {
    t.str_at.saturating_add(t.str_size)
}

/// The candidate for the function `f` named `name`, ending at `end` (from
/// all starts), unless the name is one the whole-file path drops.
fn candidate(f: &Func, name: String, end: u64) -> Option<Candidate> {
    if name.is_empty() || name.starts_with('$') || name.starts_with(".L") {
        return None;
    }
    let underscores = name.bytes().take_while(|&b| b == b'_').count().min(255) as u64;
    Some(Candidate {
        start: f.start,
        // The end the whole table gives it, from all starts.
        size: Some(end - f.start),
        limit: Some(f.limit),
        rank: f.rank | (underscores << 24) | (name.len().min(0xff_ffff) as u64),
        name: name.into_boxed_str(),
        origin: f.origin,
    })
}

/// The end of `f`: its own, or (unsized) the next of `starts` (sorted,
/// distinct), at most its section's end, at least one byte.
fn end_of(starts: &[u64], f: &Func) -> u64 {
    if f.size > 0 {
        return f.start.saturating_add(f.size);
    }
    let i = starts.partition_point(|&s| s <= f.start);
    let next = starts.get(i).copied().unwrap_or(u64::MAX);
    next.min(f.limit).max(f.start.saturating_add(1))
}

/// [`parse`] without an index: three streamed passes over the tables:
/// every function's start (an unsized symbol ends at the next start, so
/// all are needed), then the starts of the symbols covering a wanted
/// address, then every symbol at one of those starts (among aliases the
/// lowest rank wins, and that needs their names).
fn parse_ranged(
    f: Opened<'_>,
    h: Headers,
    cfg: &LoadConfig<'_>,
    wanted: &[u64],
    debug: DebugLookup<'_>,
) -> Result<Option<ElfImage>, Error> {
    let Opened { path, file, meta } = f;
    let io = |e| Error::io(path, e);
    let Headers {
        build_id,
        debuglink,
        segments,
        loads,
        layout,
        tables,
        ..
    } = h;

    // Pass 1: every start (and how many functions .symtab has).
    let mut starts = Vec::new();
    let mut from_symtab = 0;
    for t in &tables {
        for_each_function(file, t, &layout, meta.len(), |f| {
            starts.push(f.start);
            from_symtab += usize::from(t.origin == SymbolOrigin::Symtab);
        })
        .map_err(io)?;
    }
    // Stripped: a debug file's .symtab, read by range the same way.
    let mut ds = DebugSymbols::NONE;
    if from_symtab == 0 {
        let Some(d) = debug_symbols(
            path,
            build_id.as_deref(),
            debuglink.as_ref(),
            &loads,
            cfg,
            debug,
        ) else {
            return Ok(None);
        };
        if let (Some(found), Some((l, t))) = (&d.found, &d.table) {
            for_each_function(&found.file, t, l, found.len, |f| starts.push(f.start))
                .map_err(io)?;
        }
        ds = d;
    }
    // Every table to look in: (file, its section layout, its length, table).
    let mut sources: Vec<(&File, &Sections, u64, &Table)> = tables
        .iter()
        .map(|t| (file, &layout, meta.len(), t))
        .collect();
    if let (Some(d), Some((l, t))) = (&ds.found, &ds.table) {
        sources.push((&d.file, l, d.len, t));
    }
    let any_function = !starts.is_empty();
    starts.sort_unstable();
    starts.dedup();
    let mut want: Vec<u64> = wanted
        .iter()
        .filter_map(|&o| segments.to_vaddr(o))
        .collect();
    want.sort_unstable();
    want.dedup();

    // Pass 2: the starts of the symbols that cover a wanted address.
    let mut covering = Vec::new();
    for &(file, layout, len, t) in &sources {
        for_each_function(file, t, layout, len, |f| {
            let i = want.partition_point(|&w| w < f.start);
            if want.get(i).is_some_and(|&w| w < end_of(&starts, &f)) {
                covering.push(f.start);
            }
        })
        .map_err(io)?;
    }
    covering.sort_unstable();
    covering.dedup();

    // Pass 3: every symbol at those starts, in table order, named.
    let mut cands = Vec::new();
    for &(file, layout, len, t) in &sources {
        let names = NameReader { file };
        for_each_function(file, t, layout, len, |f| {
            if covering.binary_search(&f.start).is_err() || f.name_at >= names_end(t) {
                return;
            }
            cands.extend(candidate(&f, names.read(f.name_at), end_of(&starts, &f)));
        })
        .map_err(io)?;
    }
    drop(starts);
    let symbols = SymbolTable::build(cands);
    let sparse_note = (from_symtab == 0 && ds.found.is_none())
        .then(|| crate::elf::stripped_note(path, build_id.as_deref(), !any_function, cfg));
    Ok(Some(ElfImage {
        path: path.to_owned(),
        build_id,
        relocatable: false,
        segments,
        symbols,
        debug_file: ds.found.map(|d| d.path),
        sparse_note,
        notes: Vec::new(),
        dwarf: None,
        from_index: false,
    }))
}

/// The binary's separate debug file ([`debug_candidates`]), checked by
/// range (its build-id from its headers, and the binary's PT_LOAD layout
/// `loads`) or streamed (its CRC), not read whole.
pub(crate) fn find_debug_path(
    bin_path: &Path,
    build_id: Option<&[u8]>,
    debuglink: Option<(&[u8], u32)>,
    loads: &[(u64, u64)],
    debug_dirs: &[PathBuf],
    debuginfod_cache: Option<&Path>,
) -> Option<DebugFile> {
    for (candidate, check) in
        debug_candidates(bin_path, build_id, debuglink, debug_dirs, debuginfod_cache)
    {
        let Ok((f, m)) = crate::files::open_bounded(&candidate, crate::files::MAX_BINARY_BYTES)
        else {
            continue;
        };
        let found = match &check {
            DebugCheck::BuildId(id) => {
                let h = headers(&f);
                let ok = h.as_ref().is_some_and(|h| {
                    h.build_id.as_deref() == Some(id.as_slice())
                        && crate::elf::same_loads(loads, &h.loads)
                });
                ok.then_some(h)
            }
            DebugCheck::Crc(crc) => {
                let mut h = crc32fast::Hasher::new();
                let mut r = BufReader::with_capacity(64 << 10, (&f).take(m.len()));
                let mut buf = [0u8; 64 << 10];
                let ok = loop {
                    match r.read(&mut buf) {
                        Ok(0) => break h.finalize() == *crc,
                        Ok(n) => h.update(&buf[..n]),
                        Err(_) => break false,
                    }
                };
                ok.then(|| headers(&f))
            }
        };
        if let Some(headers) = found {
            return Some(DebugFile {
                path: candidate,
                file: Arc::new(f),
                len: m.len(),
                headers,
            });
        }
    }
    None
}

/// Streams the symbol table `t` (`Elf64_Sym` entries, 24 bytes each,
/// through a 64 KiB buffer) and calls `f` with each function symbol, as
/// the whole-file path's `collect` chooses them (`object`'s
/// `is_definition` and a Text or Unknown kind, in an executable section).
fn for_each_function(
    file: &File,
    t: &Table,
    layout: &Sections,
    file_len: u64,
    mut f: impl FnMut(Func),
) -> std::io::Result<()> {
    let size = t.size.min(file_len.saturating_sub(t.at));
    // Whole entries, 2,730 (64 KiB) at a time, by positioned reads.
    const BLOCK: usize = 24 * 2730;
    let mut buf = vec![0u8; BLOCK];
    let mut done = 0u64;
    while done + 24 <= size {
        let want = usize::try_from((size - done) / 24 * 24)
            .unwrap_or(BLOCK)
            .min(BLOCK);
        file.read_exact_at(&mut buf[..want], t.at + done)?;
        for (k, sym) in buf[..want].chunks_exact(24).enumerate() {
            if done == 0 && k == 0 {
                continue; // the null symbol
            }
            entry(sym, t, layout, &mut f);
        }
        done += want as u64;
    }
    Ok(())
}

/// One `Elf64_Sym` of [`for_each_function`].
#[inline]
fn entry(sym: &[u8], t: &Table, layout: &Sections, f: &mut impl FnMut(Func)) {
    let st_name = u32::from_le_bytes(sym[0..4].try_into().expect("4 bytes"));
    let st_info = sym[4];
    let st_shndx = u16::from_le_bytes(sym[6..8].try_into().expect("2 bytes"));
    let st_value = u64::from_le_bytes(sym[8..16].try_into().expect("8 bytes"));
    let st_size = u64::from_le_bytes(sym[16..24].try_into().expect("8 bytes"));
    let (bind, kind) = (st_info >> 4, st_info & 0xf);
    if st_shndx == elf::SHN_UNDEF || st_shndx >= elf::SHN_LORESERVE {
        return;
    }
    let notype = match kind {
        elf::STT_FUNC => false,
        elf::STT_NOTYPE if st_size != 0 => true,
        _ => return,
    };
    let Some(section) = layout.get(object::SectionIndex(usize::from(st_shndx))) else {
        return;
    };
    if !section.exec || st_name == 0 {
        return;
    }
    let binding = if bind == elf::STB_LOCAL { 2 } else { 0 };
    f(Func {
        start: st_value,
        size: st_size,
        limit: section.base + section.size,
        name_at: t.str_at + u64::from(st_name),
        origin: t.origin,
        rank: (u64::from(st_size == 0) << 40) | (u64::from(notype) << 36) | (binding << 32),
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg() -> LoadConfig<'static> {
        LoadConfig {
            debug_dirs: &[],
            debuginfod_cache: None,
            debug_info: false,
        }
    }

    /// The file offsets of every executable segment of `whole`, one in
    /// `step` bytes.
    fn offsets(whole: &ElfImage, step: usize) -> Vec<u64> {
        whole
            .segments
            .all()
            .iter()
            .flat_map(|s| (s.file_offset..s.file_offset + s.file_size).step_by(step))
            .collect()
    }

    /// Every wanted offset gets the same symbol (name, start, size, origin)
    /// from the table read by range as from the file read whole; returns
    /// how many were named and the ranged table's size.
    fn same_as_whole(path: &Path, step: usize) -> (usize, usize) {
        same_as_whole_with(path, step, &cfg())
    }

    fn same_as_whole_with(path: &Path, step: usize, cfg: &LoadConfig<'_>) -> (usize, usize) {
        let data = std::fs::read(path).unwrap();
        let whole = ElfImage::parse(path, &data, cfg).unwrap();
        let wanted = offsets(&whole, step);
        let (f, m) = crate::files::open_bounded(path, crate::files::MAX_BINARY_BYTES).unwrap();
        let ranged = parse(
            Opened {
                path,
                file: &f,
                meta: &m,
            },
            headers(&f).unwrap(),
            cfg,
            &wanted,
            DebugLookup::Search,
            None,
        )
        .unwrap()
        .expect("an ELF64 file");
        assert_eq!(ranged.build_id, whole.build_id);
        assert_eq!(ranged.sparse_note, whole.sparse_note);
        assert_eq!(ranged.debug_file, whole.debug_file);
        let mut named = 0;
        for &off in &wanted {
            let a = whole.to_vaddr(off);
            assert_eq!(a, ranged.to_vaddr(off));
            let pick = |img: &ElfImage| {
                a.and_then(|a| img.symbols.lookup(a)).map(|i| {
                    let e = img.symbols.entry(i);
                    (e.name.to_string(), e.start, e.size(), e.origin)
                })
            };
            let w = pick(&whole);
            assert_eq!(w, pick(&ranged), "{} at offset {off:#x}", path.display());
            named += usize::from(w.is_some());
        }
        (named, ranged.symbols.len())
    }

    #[test]
    fn a_table_read_by_range_names_every_wanted_address_as_the_whole_file() {
        // This test binary: a .symtab of thousands of Rust functions,
        // every address wanted (one in 61 bytes).
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        assert!(same_as_whole(&exe, 61).0 > 1000);
        // Shared libraries as distributions ship them (.dynsym only).
        for lib in [
            "/lib/x86_64-linux-gnu/libc.so.6",
            "/lib64/ld-linux-x86-64.so.2",
        ] {
            if Path::new(lib).exists() {
                same_as_whole(Path::new(lib), 61);
            }
        }
    }

    /// A whole table is read only while its names fit the bound given: this
    /// test binary's (thousands of Rust names) under a bound of 4 KiB is
    /// too large, under an entry's bound it is read.
    #[test]
    fn a_whole_table_past_its_bound_of_names_is_not_read() {
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let (f, m) = crate::files::open_bounded(&exe, crate::files::MAX_BINARY_BYTES).unwrap();
        let opened = Opened {
            path: &exe,
            file: &f,
            meta: &m,
        };
        let h = headers(&f).unwrap();
        let small = indexed::parse_full(opened, &h, &cfg(), DebugLookup::Search, 4096).unwrap();
        assert!(matches!(small, Some(indexed::Full::TooLarge)));
        let max = crate::index::format::MAX_ENTRY_BYTES;
        match indexed::parse_full(opened, &h, &cfg(), DebugLookup::Search, max).unwrap() {
            Some(indexed::Full::Table(t)) => assert!(t.symbols.len() > 1000),
            _ => panic!("the whole table not read"),
        }
    }

    #[test]
    fn a_table_read_by_range_holds_only_the_symbols_wanted() {
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let data = std::fs::read(&exe).unwrap();
        let whole = ElfImage::parse(&exe, &data, &cfg()).unwrap();
        // Three addresses: at most a few symbols (aliases included).
        let named: Vec<u64> = offsets(&whole, 61)
            .into_iter()
            .filter(|&o| {
                whole
                    .to_vaddr(o)
                    .and_then(|a| whole.symbols.lookup(a))
                    .is_some()
            })
            .collect();
        let some: Vec<u64> = named
            .iter()
            .step_by(named.len() / 3)
            .take(3)
            .copied()
            .collect();
        let (f, m) = crate::files::open_bounded(&exe, crate::files::MAX_BINARY_BYTES).unwrap();
        let ranged = parse(
            Opened {
                path: &exe,
                file: &f,
                meta: &m,
            },
            headers(&f).unwrap(),
            &cfg(),
            &some,
            DebugLookup::Search,
            None,
        )
        .unwrap()
        .unwrap();
        assert!(whole.symbols.len() > 1000);
        assert!(
            (1..=12).contains(&ranged.symbols.len()),
            "{} symbols kept for 3 addresses",
            ranged.symbols.len()
        );
        let none = parse(
            Opened {
                path: &exe,
                file: &f,
                meta: &m,
            },
            headers(&f).unwrap(),
            &cfg(),
            &[],
            DebugLookup::Search,
            None,
        )
        .unwrap()
        .unwrap();
        assert!(none.symbols.is_empty());
    }
}
