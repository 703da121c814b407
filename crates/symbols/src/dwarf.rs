//! Source lines and inlined frames from DWARF, through addr2line.
//!
//! An ELF64 little-endian file's DWARF is read by range through [`DwarfReader`]
//! (`dwarf_reader.rs`): [`load_ranged`] makes each section a range of the open file. Files
//! read whole for other reasons ([`load`]) have their sections copied out. Either way
//! lookups go through a [`Dwarf`], which reads only the units they land in.
//!
//! # Contexts over the units looked up
//!
//! An `addr2line::Context` reads, when it is made, every unit's header, abbreviations, root
//! entry (name, directory, ranges) and line-program header: on a 98 MB debug build of
//! profreport, 29 MB of reads in 3,500 places and 40 ms before the first lookup. So a
//! [`Dwarf`] first finds the units an address is in through `.debug_aranges`, and makes a
//! context over just those units: it sees `.debug_info` through a view in which every
//! other stretch of units is hidden behind one made-up DWARF 4 unit header (of that
//! stretch's length, its abbreviations past the end of `.debug_abbrev`), which addr2line
//! skips as a unit it cannot parse, reading nothing of what it hides. Offsets are unchanged,
//! so references within the units shown work as in a context over all units.
//!
//! ```text
//!  .debug_info  [unit 0][unit 1][unit 2 ........][unit 3][unit 4]
//!  view         [hidden: 0-1   ][unit 2 ........][hidden: 3-4   ]   (2 holds the address)
//! ```
//!
//! An address in no range of `.debug_aranges` is looked up in one context over the units it
//! does not list (rustc leaves out its allocator shim and units without code), found once
//! by reading each unit header's first bytes past the page cache; when it lists them all,
//! such an address is in no unit. An error in a context (a reference, `DW_FORM_ref_addr`,
//! into a unit it hides: LTO builds, compiler_builtins) makes a new context over the
//! address's units and the units they refer to, transitively (their entries are read for
//! it), once per unit, up to 256 units. What none of these answers (an error still, no frame
//! in a unit `.debug_aranges` names, a header that cannot be read) goes to one context over
//! all units, made the first time it is needed; a binary without `.debug_aranges` (clang's
//! default) uses only that one. So every answer is the one a context over all units gives
//! (`tests::unit_contexts_answer_as_a_context_over_all_units`), as long as
//! `.debug_aranges` agrees with the units' own ranges. Each batch of lookups makes at most
//! one context for the units it needs that no context shows yet.

use std::borrow::Cow;
use std::collections::hash_map::Entry;
use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};

use gimli::Section;
use object::{CompressionFormat, Object, ObjectSection};

use crate::demangle::display_name;
use crate::dwarf_reader::{DwarfReader, PagedFileHandle};
use crate::types::{InlinedFrame, SourceLocation};

/// DWARF bytes: a range of an open file read lazily, or a section held in memory.
pub(crate) type Reader = DwarfReader;

/// An addr2line context. It is `Send` but not `Sync` (it fills caches lazily), so a
/// [`Dwarf`] keeps its contexts behind a mutex.
pub(crate) type Context = addr2line::Context<Reader>;

/// What a lookup gives: the source line of the address and the inlined frames there.
pub(crate) type Frames = (Option<SourceLocation>, Vec<InlinedFrame>);

/// Largest section decompressed (a bigger claimed size is taken as no section).
const MAX_DECOMPRESSED: u64 = 1 << 30;

/// A `.debug_*` (or `.zdebug_*`) section of a file, from its section header.
#[derive(Clone, Debug)]
pub(crate) struct DwarfSection {
    pub name: String,
    pub offset: u64,
    pub size: u64,
    /// `SHT_NOBITS` (a debug file's stripped copy): no bytes.
    pub nobits: bool,
    /// `SHF_COMPRESSED`: an `Elf64_Chdr`, then compressed bytes.
    pub compressed: bool,
}

/// True if `file` carries its own DWARF.
pub(crate) fn has_dwarf(file: &object::File<'_>) -> bool {
    file.section_by_name(".debug_info")
        .is_some_and(|s| s.size() > 0 && s.kind() != object::SectionKind::UninitializedData)
}

/// True if `sections` (from the section headers) hold DWARF.
pub(crate) fn has_dwarf_sections(sections: &[DwarfSection]) -> bool {
    find(sections, ".debug_info").is_some_and(|s| s.size > 0 && !s.nobits)
}

/// The section `name` (`.debug_x`), else its GNU-compressed `.zdebug_x`.
fn find<'a>(sections: &'a [DwarfSection], name: &str) -> Option<&'a DwarfSection> {
    sections.iter().find(|s| s.name == name).or_else(|| {
        let z = format!(".z{}", name.strip_prefix('.')?);
        sections.iter().find(|s| s.name == z)
    })
}

/// Loads `file`'s DWARF sections, copied (and decompressed) out of its bytes.
pub(crate) fn load(file: &object::File<'_>) -> Result<Dwarf, gimli::Error> {
    let endian = if file.is_little_endian() {
        gimli::RunTimeEndian::Little
    } else {
        gimli::RunTimeEndian::Big
    };
    let sections = gimli::DwarfSections::load(|id| -> Result<Reader, gimli::Error> {
        let data: Cow<'_, [u8]> = match file.section_by_name(id.name()) {
            Some(section) => section.uncompressed_data().unwrap_or_default(),
            None => Cow::Borrowed(&[]),
        };
        Ok(DwarfReader::memory(Arc::from(&*data), endian))
    })?;
    Ok(Dwarf::new(sections, None))
}

/// Loads the DWARF `sections` of the little-endian ELF file `file`, to be read by range
/// when lookups ask. A compressed section is decompressed into memory at its first read
/// (most lookups never read `.debug_loc` or `.debug_loclists`); one whose header says a
/// format not known or a size over 1 GiB is taken as absent, as `load` does.
pub(crate) fn load_ranged(
    file: &Arc<PagedFileHandle>,
    sections: &[DwarfSection],
) -> Result<Dwarf, gimli::Error> {
    let endian = gimli::RunTimeEndian::Little;
    let empty = || DwarfReader::memory(Arc::from(&[][..]), endian);
    let sections = gimli::DwarfSections::load(|id| -> Result<Reader, gimli::Error> {
        let Some(s) = find(sections, id.name()) else {
            return Ok(empty());
        };
        if s.nobits || s.size == 0 {
            return Ok(empty());
        }
        let mut raw = DwarfReader::file(file, s.offset, s.size);
        let zdebug = s.name.starts_with(".zdebug_");
        if !s.compressed && !zdebug {
            return Ok(raw);
        }
        // The compression header: `ZLIB` and a big-endian size, or an `Elf64_Chdr`.
        let mut h = [0u8; 24];
        let n = h.len().min(s.size as usize);
        raw.peek(0, &mut h[..n])?;
        let (format, size, skip) = if zdebug {
            if n < 12 || &h[..4] != b"ZLIB" {
                return Ok(raw); // not compressed after all
            }
            let size = u64::from_be_bytes(h[4..12].try_into().expect("8 bytes"));
            (CompressionFormat::Zlib, size, 12)
        } else {
            if n < 24 {
                return Ok(empty());
            }
            let format = match u32::from_le_bytes(h[..4].try_into().expect("4 bytes")) {
                object::elf::ELFCOMPRESS_ZLIB => CompressionFormat::Zlib,
                object::elf::ELFCOMPRESS_ZSTD => CompressionFormat::Zstandard,
                _ => return Ok(empty()),
            };
            let size = u64::from_le_bytes(h[8..16].try_into().expect("8 bytes"));
            (format, size, 24)
        };
        if size > MAX_DECOMPRESSED {
            return Ok(empty());
        }
        gimli::Reader::skip(&mut raw, skip)?;
        Ok(DwarfReader::compressed(raw, format, size))
    })?;
    Ok(Dwarf::new(sections, Some(Arc::clone(file))))
}

/// A binary's DWARF sections and the addr2line contexts made over them (see the module
/// documentation). `Sync`: lookups take a mutex.
pub(crate) struct Dwarf {
    sections: gimli::DwarfSections<Reader>,
    /// The file the sections are read from by range, if they are.
    file: Option<Arc<PagedFileHandle>>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// `.debug_aranges`, read at the first lookup; `None` inside when it has nothing.
    index: Option<Option<Index>>,
    /// Every unit's offset and whether addr2line wants ranges for it, read when first
    /// needed; `None` inside when a header cannot be read.
    units: Option<Option<Vec<(u64, bool)>>>,
    /// Contexts over some units each, and which one shows a unit.
    parts: Vec<Part>,
    by_unit: HashMap<u64, usize>,
    /// Units no context could be made for (left to the full context).
    failed: HashSet<u64>,
    /// Units whose references were followed (or that was tried).
    closed: HashSet<u64>,
    /// Where to look up an address in no range of `.debug_aranges`; known after the first.
    outside: Option<Outside>,
    /// The context over all units, made when first needed.
    full: Option<Result<Context, gimli::Error>>,
    /// Function names as shown, by the offset id of their DWARF string: a name is read and
    /// demangled once, not once per address.
    names: HashMap<u64, String>,
}

/// A context over some units.
struct Part {
    ctx: Context,
    units: Vec<u64>,
}

/// Most units a context is made over when following references; past that, the full
/// context answers.
const MAX_CLOSURE: usize = 256;

/// Address ranges of units, from `.debug_aranges`.
struct Index {
    /// (begin, end, unit offset in `.debug_info`), by begin.
    ranges: Vec<(u64, u64, u64)>,
    /// The largest end among `ranges[..=i]`.
    max_end: Vec<u64>,
    /// The units listed, and where their sets are in `.debug_aranges` (offset, length).
    units: HashMap<u64, Vec<(u64, u64)>>,
}

/// Where an address in no range of `.debug_aranges` may be.
#[derive(Clone, Copy)]
enum Outside {
    /// Every unit that has code is listed: in no unit.
    Nowhere,
    /// In the units not listed (rustc lists neither its allocator shim nor units without
    /// code): in the context `parts[i]` over them.
    Part(usize),
    /// Not known (a unit header could not be read): the full context says.
    Unknown,
}

impl Index {
    /// Reads `.debug_aranges`; `None` when it lists no range.
    fn read(sections: &gimli::DwarfSections<Reader>) -> Option<Index> {
        let mut ranges = Vec::new();
        let mut units: HashMap<u64, Vec<(u64, u64)>> = HashMap::new();
        let mut headers = sections.debug_aranges.headers();
        while let Ok(Some(header)) = headers.next() {
            let unit = header.debug_info_offset().0 as u64;
            let length =
                header.length() as u64 + u64::from(header.encoding().format.initial_length_size());
            units
                .entry(unit)
                .or_default()
                .push((header.offset().0 as u64, length));
            let mut entries = header.entries();
            while let Ok(Some(entry)) = entries.next() {
                let r = entry.range();
                if r.end > r.begin {
                    ranges.push((r.begin, r.end, unit));
                }
            }
        }
        if ranges.is_empty() {
            return None;
        }
        ranges.sort_unstable();
        let max_end = ranges
            .iter()
            .scan(0, |m, r| {
                *m = r.1.max(*m);
                Some(*m)
            })
            .collect();
        Some(Index {
            ranges,
            max_end,
            units,
        })
    }

    /// The units whose ranges hold `addr`, in order of range start.
    fn units_at(&self, addr: u64) -> Vec<u64> {
        let mut out = Vec::new();
        let mut i = self.ranges.partition_point(|r| r.0 <= addr);
        while i > 0 && self.max_end[i - 1] > addr {
            i -= 1;
            let (begin, end, unit) = self.ranges[i];
            if begin <= addr && addr < end && !out.contains(&unit) {
                out.push(unit);
            }
        }
        out.reverse();
        out
    }
}

impl Dwarf {
    pub fn new(
        sections: gimli::DwarfSections<Reader>,
        file: Option<Arc<PagedFileHandle>>,
    ) -> Dwarf {
        Dwarf {
            sections,
            file,
            state: Mutex::default(),
        }
    }

    /// The source line and inlined frames at each address (`None` for `None`), as a context
    /// over all units gives them. The pages read for them are dropped after: a report's
    /// memory is then one batch's pages, not one budget per binary.
    pub fn lookup_all(
        &self,
        addrs: &[Option<u64>],
        demangle: bool,
    ) -> Vec<Option<Result<Frames, gimli::Error>>> {
        let out = self.lookup_batch(addrs, demangle);
        if let Some(f) = &self.file {
            f.clear();
        }
        out
    }

    fn lookup_batch(
        &self,
        addrs: &[Option<u64>],
        demangle: bool,
    ) -> Vec<Option<Result<Frames, gimli::Error>>> {
        let mut guard = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let st = &mut *guard;
        let index = st.index.get_or_insert_with(|| Index::read(&self.sections));
        let units: Vec<Vec<u64>> = addrs
            .iter()
            .map(|a| match (a, &*index) {
                (Some(a), Some(index)) => index.units_at(*a),
                _ => Vec::new(),
            })
            .collect();
        // One new context over the units wanted that none shows yet.
        let new: BTreeSet<u64> = units
            .iter()
            .flatten()
            .filter(|u| !st.by_unit.contains_key(u) && !st.failed.contains(u))
            .copied()
            .collect();
        if !new.is_empty() {
            let new: Vec<u64> = new.into_iter().collect();
            if self.add_part(st, new.clone()).is_none() {
                st.failed.extend(new);
            }
        }
        addrs
            .iter()
            .zip(&units)
            .map(|(addr, units)| Some(self.lookup_one(st, (*addr)?, units, demangle)))
            .collect()
    }

    /// `addr`, in the ranges of `units` in `.debug_aranges`.
    fn lookup_one(
        &self,
        st: &mut State,
        addr: u64,
        units: &[u64],
        demangle: bool,
    ) -> Result<Frames, gimli::Error> {
        let mut parts: Vec<usize> = units
            .iter()
            .filter_map(|u| st.by_unit.get(u))
            .copied()
            .collect();
        parts.dedup();
        for p in parts {
            if let Ok(Some(frames)) = self.ask(st, p, units, addr, demangle) {
                return Ok(frames);
            }
        }
        if units.is_empty() {
            match self.outside(st) {
                Outside::Nowhere => return Ok((None, Vec::new())),
                Outside::Part(p) => {
                    let units = st.parts[p].units.clone();
                    if let Ok(found) = self.ask(st, p, &units, addr, demangle) {
                        return Ok(found.unwrap_or_default());
                    }
                }
                Outside::Unknown => {}
            }
        }
        let full = st
            .full
            .get_or_insert_with(|| Context::from_dwarf(self.sections.borrow(|r| r.clone())));
        match full {
            Ok(ctx) => frames(ctx, addr, demangle, &mut st.names).map(Option::unwrap_or_default),
            Err(e) => Err(*e),
        }
    }

    /// `addr`, in `units`, in the context `parts[p]`; on an error (a reference into a unit
    /// it does not show: LTO, compiler_builtins), once, in a new context over `units` and
    /// the units they refer to.
    fn ask(
        &self,
        st: &mut State,
        p: usize,
        units: &[u64],
        addr: u64,
        demangle: bool,
    ) -> Result<Option<Frames>, gimli::Error> {
        match frames(&st.parts[p].ctx, addr, demangle, &mut st.names) {
            Err(e) if units.iter().any(|u| !st.closed.contains(u)) => {
                st.closed.extend(units);
                let mut units = units.to_vec();
                units.sort_unstable();
                match self.closure(st, &units) {
                    Some(all) if all.len() > units.len() => match self.add_part(st, all) {
                        Some(q) => frames(&st.parts[q].ctx, addr, demangle, &mut st.names),
                        None => Err(e),
                    },
                    _ => Err(e),
                }
            }
            r => r,
        }
    }

    /// Makes a context over `units` (sorted), which shows them from now on; its index.
    fn add_part(&self, st: &mut State, units: Vec<u64>) -> Option<usize> {
        let ctx = self
            .part(&units, st.index.as_ref().and_then(Option::as_ref))
            .ok()?;
        let p = st.parts.len();
        st.by_unit.extend(units.iter().map(|&u| (u, p)));
        st.parts.push(Part { ctx, units });
        Some(p)
    }

    /// `units` and the units they refer to (`DW_FORM_ref_addr`), and those refer to, sorted;
    /// `None` when a unit cannot be read or there are more than [`MAX_CLOSURE`].
    fn closure(&self, st: &mut State, units: &[u64]) -> Option<Vec<u64>> {
        let info = self.sections.debug_info.reader();
        let starts: &Vec<(u64, bool)> =
            st.units.get_or_insert_with(|| scan_units(info)).as_ref()?;
        let mut all: BTreeSet<u64> = units.iter().copied().collect();
        let mut todo: Vec<u64> = units.to_vec();
        while let Some(unit) = todo.pop() {
            for target in self.refs_of(unit).ok()? {
                let i = starts
                    .partition_point(|&(s, _)| s <= target)
                    .checked_sub(1)?;
                if all.insert(starts[i].0) {
                    todo.push(starts[i].0);
                }
            }
            if all.len() > MAX_CLOSURE {
                return None;
            }
        }
        Some(all.into_iter().collect())
    }

    /// The `.debug_info` offsets the entries of the unit at `unit` refer to by
    /// `DW_FORM_ref_addr` (other units, usually).
    fn refs_of(&self, unit: u64) -> Result<Vec<u64>, gimli::Error> {
        let dwarf = self.sections.borrow(|r| r.clone());
        let offset = gimli::DebugInfoOffset(
            usize::try_from(unit).map_err(|_| gimli::Error::OffsetOutOfBounds)?,
        );
        let header = dwarf.debug_info.header_from_offset(offset)?;
        let abbrevs = dwarf.abbreviations(&header)?;
        let mut entries = header.entries_raw(&abbrevs, None)?;
        let mut out = Vec::new();
        while !entries.is_empty() {
            let Some(abbrev) = entries.read_abbreviation()? else {
                continue;
            };
            for spec in abbrev.attributes() {
                if spec.form() == gimli::DW_FORM_ref_addr {
                    if let gimli::AttributeValue::DebugInfoRef(o) =
                        entries.read_attribute(*spec)?.value()
                    {
                        out.push(o.0 as u64);
                    }
                } else {
                    entries.skip_attributes(std::slice::from_ref(spec))?;
                }
            }
        }
        Ok(out)
    }

    /// Where to look up addresses in no range of `.debug_aranges` (made once).
    fn outside(&self, st: &mut State) -> Outside {
        if let Some(o) = st.outside {
            return o;
        }
        let info = self.sections.debug_info.reader();
        let unlisted: Option<Vec<u64>> =
            match (&st.index, st.units.get_or_insert_with(|| scan_units(info))) {
                (Some(Some(index)), Some(units)) => Some(
                    units
                        .iter()
                        .filter(|&&(u, ranges)| ranges && !index.units.contains_key(&u))
                        .map(|&(u, _)| u)
                        .collect(),
                ),
                _ => None,
            };
        let o = match unlisted {
            None => Outside::Unknown,
            Some(units) if units.is_empty() => Outside::Nowhere,
            Some(units) => match self.part(&units, st.index.as_ref().and_then(Option::as_ref)) {
                Ok(ctx) => {
                    st.parts.push(Part { ctx, units });
                    Outside::Part(st.parts.len() - 1)
                }
                Err(_) => Outside::Unknown,
            },
        };
        st.outside = Some(o);
        o
    }

    /// A context over the units at `units` (sorted offsets in `.debug_info`) alone. It sees
    /// of `.debug_aranges` only their sets (from `index`), copied: addr2line reads every
    /// set's header when it makes a context.
    fn part(&self, units: &[u64], index: Option<&Index>) -> Result<Context, gimli::Error> {
        let info = self.sections.debug_info.reader();
        let total = gimli::Reader::len(info) as u64;
        let mut patches = Vec::new();
        let mut at = 0u64;
        for &unit in units {
            if unit < at {
                return Err(gimli::Error::OffsetOutOfBounds);
            }
            let offset = gimli::DebugInfoOffset(
                usize::try_from(unit).map_err(|_| gimli::Error::OffsetOutOfBounds)?,
            );
            let header = self.sections.debug_info.header_from_offset(offset)?;
            hide(&mut patches, at, unit)?;
            at = unit + header.length_including_self() as u64;
        }
        if at > total {
            return Err(gimli::Error::OffsetOutOfBounds);
        }
        hide(&mut patches, at, total)?;
        let mut aranges = Vec::new();
        for unit in units {
            for &(offset, length) in index.and_then(|i| i.units.get(unit)).into_iter().flatten() {
                let mut r = self.sections.debug_aranges.reader().clone();
                gimli::Reader::skip(&mut r, offset as usize)?;
                let set = gimli::Reader::split(&mut r, length as usize)?;
                aranges.extend_from_slice(&gimli::Reader::to_slice(&set)?);
            }
        }
        let endian = gimli::Reader::endian(info);
        let mut dwarf = self.sections.borrow(|r| r.clone());
        dwarf.debug_info = gimli::DebugInfo::from(info.patched(patches));
        dwarf.debug_aranges =
            gimli::DebugAranges::from(DwarfReader::memory(aranges.into(), endian));
        Context::from_dwarf(dwarf)
    }
}

/// Hides `.debug_info` bytes `from..to` (whole units) behind one made-up unit header: DWARF
/// 4, that long, its abbreviations past the end of any `.debug_abbrev`, so that addr2line
/// skips it as a unit it cannot parse without reading what it covers.
fn hide(patches: &mut Vec<(u64, Arc<[u8]>)>, from: u64, to: u64) -> Result<(), gimli::Error> {
    let len = to - from;
    let mut h = Vec::with_capacity(23);
    if len == 0 {
        return Ok(());
    } else if len < 11 {
        // Not whole units.
        return Err(gimli::Error::OffsetOutOfBounds);
    } else if len - 4 < 0xffff_fff0 {
        h.extend_from_slice(&((len - 4) as u32).to_le_bytes());
        h.extend_from_slice(&4u16.to_le_bytes());
        h.extend_from_slice(&u32::MAX.to_le_bytes());
    } else {
        h.extend_from_slice(&u32::MAX.to_le_bytes());
        h.extend_from_slice(&(len - 12).to_le_bytes());
        h.extend_from_slice(&4u16.to_le_bytes());
        h.extend_from_slice(&u64::MAX.to_le_bytes());
    }
    h.push(8); // address size
    patches.push((from, h.into()));
    Ok(())
}

/// Every unit of `info`: its offset, and whether addr2line wants ranges for it (`None` if
/// a header cannot be read). Reads the first bytes of each unit header (length, version,
/// DWARF 5 unit type), past the page cache. DWARF 5 type and partial units have no ranges;
/// a DWARF 4 partial unit cannot be told from a compile unit by its header and is taken as
/// one.
fn scan_units(info: &Reader) -> Option<Vec<(u64, bool)>> {
    let total = gimli::Reader::len(info) as u64;
    let mut out = Vec::new();
    let mut at = 0u64;
    while at < total {
        let mut h = [0u8; 15];
        let n = (total - at).min(h.len() as u64) as usize;
        info.peek(at, &mut h[..n]).ok()?;
        if n < 4 {
            return None;
        }
        let len32 = u32::from_le_bytes(h[..4].try_into().expect("4 bytes"));
        let (len, v) = match len32 {
            0xffff_ffff if n >= 12 => (
                u64::from_le_bytes(h[4..12].try_into().expect("8 bytes")).checked_add(12)?,
                12,
            ),
            0..0xffff_fff0 => (u64::from(len32) + 4, 4),
            _ => return None,
        };
        let version = h.get(v..v + 2).map(|b| u16::from_le_bytes([b[0], b[1]]));
        let unit_type = h.get(v + 2).copied();
        let has_ranges = match (version, unit_type) {
            (Some(5), Some(t)) => !matches!(
                gimli::DwUt(t),
                gimli::DW_UT_type | gimli::DW_UT_split_type | gimli::DW_UT_partial
            ),
            _ => true,
        };
        out.push((at, has_ranges));
        at = at.checked_add(len)?;
    }
    Some(out)
}

/// The source line at `vaddr` and the inlined frames there, innermost first; `None` when
/// `ctx` has no frame there (no function, no line).
///
/// addr2line yields frames innermost first, each with the location *inside* that frame's
/// function; the last one is the physical function. So frame 0's location is the line of the
/// address itself, and frame i+1's location is where frame i was inlined.
fn frames(
    ctx: &Context,
    vaddr: u64,
    demangle_names: bool,
    names: &mut HashMap<u64, String>,
) -> Result<Option<Frames>, gimli::Error> {
    let mut iter = ctx.find_frames(vaddr).skip_all_loads()?;
    let mut frames: Vec<(Option<String>, Option<SourceLocation>)> = Vec::new();
    while let Some(frame) = iter.next()? {
        let name = match &frame.function {
            Some(f) => Some(match names.entry(gimli::Reader::offset_id(&f.name).0) {
                Entry::Occupied(e) => e.get().clone(),
                Entry::Vacant(e) => e
                    .insert(display_name(&f.raw_name()?, demangle_names))
                    .clone(),
            }),
            None => None,
        };
        let location = frame.location.as_ref().and_then(|l| {
            Some(SourceLocation {
                file: l.file?.to_owned(),
                line: l.line,
            })
        });
        frames.push((name, location));
    }
    if frames.is_empty() {
        return Ok(None);
    }
    let location = frames.first().and_then(|f| f.1.clone());
    let inlined = frames
        .windows(2)
        .map(|pair| InlinedFrame {
            function: pair[0].0.clone(),
            call_site: pair[1].1.clone(),
        })
        .collect();
    Ok(Some((location, inlined)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dwarf_reader::PagedFile;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// This test binary's DWARF, read by range (with the count of bytes read), and its
    /// `.text` (address, size).
    fn own_dwarf() -> (Dwarf, Arc<AtomicU64>, u64, (u64, u64)) {
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let (file, meta) =
            crate::files::open_bounded(&exe, crate::files::MAX_BINARY_BYTES).unwrap();
        let headers = crate::elf_range::headers(&file).expect("an ELF64 LE test binary");
        assert!(
            has_dwarf_sections(&headers.dwarf),
            "the test binary has DWARF"
        );
        let read = Arc::new(AtomicU64::new(0));
        let paged = PagedFile::new(Arc::new(file), meta.len(), Arc::clone(&read));
        let handle = PagedFileHandle::new(paged, gimli::RunTimeEndian::Little);
        let dwarf = load_ranged(&handle, &headers.dwarf).unwrap();
        let data = std::fs::read(&exe).unwrap();
        let obj = object::File::parse(&*data).unwrap();
        let text = obj.section_by_name(".text").unwrap();
        (dwarf, read, meta.len(), (text.address(), text.size()))
    }

    fn full(dwarf: &Dwarf) -> Context {
        Context::from_dwarf(dwarf.sections.borrow(|r| r.clone())).unwrap()
    }

    /// Lookups through contexts over the units they land in (and over the units
    /// `.debug_aranges` does not list, for the addresses outside it) give what one context
    /// over all units gives, at addresses all over `.text`, without making that context.
    #[test]
    fn unit_contexts_answer_as_a_context_over_all_units() {
        let (dwarf, _, _, (text, size)) = own_dwarf();
        let addrs: Vec<Option<u64>> = (text..text + size).step_by(331).map(Some).collect();
        let got = dwarf.lookup_all(&addrs, true);
        let all = full(&dwarf);
        let mut with_lines = 0;
        for (a, g) in addrs.iter().zip(got) {
            let want = frames(&all, a.unwrap(), true, &mut HashMap::new())
                .unwrap()
                .unwrap_or_default();
            let g = g.unwrap().unwrap();
            assert_eq!(g, want, "at {:#x}", a.unwrap());
            with_lines += usize::from(g.0.is_some());
        }
        assert!(
            with_lines > addrs.len() / 2,
            "{with_lines} of {}",
            addrs.len()
        );
        let st = dwarf.state.lock().unwrap();
        assert!(st.full.is_none(), "the context over all units was made");
        let Some(Some(index)) = &st.index else {
            panic!("rustc writes .debug_aranges");
        };
        // rustc leaves some units out of .debug_aranges (the allocator shim): they are
        // looked up in a context of their own.
        assert!(index.ranges.len() > 100);
        assert!(matches!(
            st.outside,
            Some(Outside::Part(_) | Outside::Nowhere)
        ));
    }

    /// Without `.debug_aranges` every lookup goes to the context over all units.
    #[test]
    fn without_aranges_the_context_over_all_units_answers() {
        let (mut dwarf, _, _, (text, size)) = own_dwarf();
        dwarf.sections.debug_aranges = gimli::DebugAranges::from(DwarfReader::memory(
            Arc::from(&[][..]),
            gimli::RunTimeEndian::Little,
        ));
        let addrs: Vec<Option<u64>> = (text..text + size).step_by(4099).map(Some).collect();
        let got = dwarf.lookup_all(&addrs, false);
        let all = full(&dwarf);
        for (a, g) in addrs.iter().zip(got) {
            let want = frames(&all, a.unwrap(), false, &mut HashMap::new())
                .unwrap()
                .unwrap_or_default();
            assert_eq!(g.unwrap().unwrap(), want);
        }
        assert!(dwarf.state.lock().unwrap().full.is_some());
    }

    /// One function's lookups read its unit and `.debug_aranges`, a few per cent of a
    /// binary of tens of megabytes.
    #[test]
    fn one_function_reads_a_small_part_of_the_file() {
        let (dwarf, read, len, _) = own_dwarf();
        let f = own_dwarf as fn() -> _ as usize as u64;
        // The link-time address of this function: the binary is PIE, so take its offset
        // from this process's mapping of the text.
        let (_, offset) = file_offset_in_self(f);
        let data = std::fs::read(std::fs::read_link("/proc/self/exe").unwrap()).unwrap();
        let vaddr = profkit_elf::Segments::parse(&*data)
            .unwrap()
            .to_vaddr(offset)
            .unwrap();
        let addrs: Vec<Option<u64>> = (vaddr..vaddr + 64).map(Some).collect();
        let got = dwarf.lookup_all(&addrs, true);
        let loc = got[0].clone().unwrap().unwrap().0.expect("a line");
        assert!(loc.file.ends_with("dwarf.rs"), "{loc}");
        let read = read.load(Ordering::Relaxed);
        eprintln!("{read} bytes of DWARF read of a {len}-byte file");
        assert!(read < len / 20, "{read} bytes read of {len}");
    }

    /// The file offset of `addr` in this process.
    fn file_offset_in_self(addr: u64) -> (String, u64) {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        for line in maps.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (start, end) = f[0].split_once('-').unwrap();
            let start = u64::from_str_radix(start, 16).unwrap();
            let end = u64::from_str_radix(end, 16).unwrap();
            if (start..end).contains(&addr) {
                let pgoff = u64::from_str_radix(f[2], 16).unwrap();
                return (f[5].to_owned(), addr - start + pgoff);
            }
        }
        panic!("{addr:#x} not mapped");
    }
}
