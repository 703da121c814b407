//! Source lines and inlined frames from DWARF, through addr2line.
//!
//! An ELF64 little-endian file's DWARF is read by range through [`DwarfReader`]
//! (`dwarf_reader.rs`): [`load_ranged`] makes each section a range of the open file, so a
//! lookup reads the unit headers, the line table and the DIEs of the unit it lands in, not
//! the file. Files read whole for other reasons ([`load`]) have their sections copied out.

use std::borrow::Cow;
use std::sync::Arc;

use object::{CompressionFormat, Object, ObjectSection};

use crate::demangle::display_name;
use crate::dwarf_reader::{DwarfReader, PagedFileHandle};
use crate::types::{InlinedFrame, SourceLocation};

/// DWARF bytes: a range of an open file read lazily, or a section held in memory.
pub(crate) type Reader = DwarfReader;

/// An addr2line context. It is `Send` but not `Sync` (it fills caches lazily), so the image
/// keeps it behind a mutex.
pub(crate) type Context = addr2line::Context<Reader>;

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

/// Loads `file`'s DWARF sections, copied (and decompressed) out of its bytes, into an
/// addr2line context.
pub(crate) fn load(file: &object::File<'_>) -> Result<Context, gimli::Error> {
    let endian = if file.is_little_endian() {
        gimli::RunTimeEndian::Little
    } else {
        gimli::RunTimeEndian::Big
    };
    let dwarf = gimli::Dwarf::load(|id| -> Result<Reader, gimli::Error> {
        let data: Cow<'_, [u8]> = match file.section_by_name(id.name()) {
            Some(section) => section.uncompressed_data().unwrap_or_default(),
            None => Cow::Borrowed(&[]),
        };
        Ok(DwarfReader::memory(Arc::from(&*data), endian))
    })?;
    addr2line::Context::from_dwarf(dwarf)
}

/// Loads the DWARF `sections` of the little-endian ELF file `file` into an addr2line
/// context that reads them by range, when asked. Compressed sections are decompressed into
/// memory here, one at a time; one that cannot be (unknown format, bad data, too large) is
/// taken as absent, as `load` does.
pub(crate) fn load_ranged(
    file: &Arc<PagedFileHandle>,
    sections: &[DwarfSection],
) -> Result<Context, gimli::Error> {
    let endian = gimli::RunTimeEndian::Little;
    let empty = || DwarfReader::memory(Arc::from(&[][..]), endian);
    let dwarf = gimli::Dwarf::load(|id| -> Result<Reader, gimli::Error> {
        let Some(s) = find(sections, id.name()) else {
            return Ok(empty());
        };
        if s.nobits || s.size == 0 {
            return Ok(empty());
        }
        let raw = DwarfReader::file(file, s.offset, s.size);
        let zdebug = s.name.starts_with(".zdebug_");
        if !s.compressed && !zdebug {
            return Ok(raw);
        }
        let bytes = gimli::Reader::to_slice(&raw)?;
        Ok(match decompress(&bytes, zdebug) {
            Some(data) => DwarfReader::memory(Arc::from(&*data), endian),
            None => empty(),
        })
    })?;
    addr2line::Context::from_dwarf(dwarf)
}

/// The bytes of a compressed section: `SHF_COMPRESSED` (an `Elf64_Chdr`, little-endian) or
/// GNU `.zdebug` (`ZLIB`, a big-endian size); `None` if that fails.
fn decompress(raw: &[u8], zdebug: bool) -> Option<Cow<'_, [u8]>> {
    let (format, data, size) = if zdebug {
        match raw.strip_prefix(b"ZLIB") {
            Some(rest) if rest.len() >= 8 => (
                CompressionFormat::Zlib,
                &rest[8..],
                u64::from_be_bytes(rest[..8].try_into().ok()?),
            ),
            // Not compressed after all.
            _ => return Some(Cow::Borrowed(raw)),
        }
    } else {
        let ch_type = u32::from_le_bytes(raw.get(..4)?.try_into().ok()?);
        let size = u64::from_le_bytes(raw.get(8..16)?.try_into().ok()?);
        let format = match ch_type {
            object::elf::ELFCOMPRESS_ZLIB => CompressionFormat::Zlib,
            object::elf::ELFCOMPRESS_ZSTD => CompressionFormat::Zstandard,
            _ => return None,
        };
        (format, raw.get(24..)?, size)
    };
    if size > MAX_DECOMPRESSED {
        return None;
    }
    object::CompressedData {
        format,
        data,
        uncompressed_size: size,
    }
    .decompress()
    .ok()
}

/// The source line at `vaddr` and the inlined frames there, innermost first.
///
/// addr2line yields frames innermost first, each with the location *inside* that frame's
/// function; the last one is the physical function. So frame 0's location is the line of the
/// address itself, and frame i+1's location is where frame i was inlined.
pub(crate) fn lookup(
    ctx: &Context,
    vaddr: u64,
    demangle_names: bool,
) -> Result<(Option<SourceLocation>, Vec<InlinedFrame>), gimli::Error> {
    let mut iter = ctx.find_frames(vaddr).skip_all_loads()?;
    let mut frames: Vec<(Option<String>, Option<SourceLocation>)> = Vec::new();
    while let Some(frame) = iter.next()? {
        let name = match &frame.function {
            Some(f) => Some(display_name(&f.raw_name()?, demangle_names)),
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
    let location = frames.first().and_then(|f| f.1.clone());
    let inlined = frames
        .windows(2)
        .map(|pair| InlinedFrame {
            function: pair[0].0.clone(),
            call_site: pair[1].1.clone(),
        })
        .collect();
    Ok((location, inlined))
}
