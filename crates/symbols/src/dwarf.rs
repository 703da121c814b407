//! Source lines and inlined frames from DWARF, through addr2line.

use std::borrow::Cow;
use std::sync::Arc;

use object::{Object, ObjectSection};

use crate::demangle::display_name;
use crate::types::{InlinedFrame, SourceLocation};

/// Owned, shareable DWARF bytes: sections are copied (and decompressed) out of the file so
/// the file's bytes need not be kept.
pub(crate) type Reader = gimli::EndianArcSlice<gimli::RunTimeEndian>;

/// An addr2line context. It is `Send` but not `Sync` (it fills caches lazily), so the image
/// keeps it behind a mutex.
pub(crate) type Context = addr2line::Context<Reader>;

/// True if `file` carries its own DWARF.
pub(crate) fn has_dwarf(file: &object::File<'_>) -> bool {
    file.section_by_name(".debug_info")
        .is_some_and(|s| s.size() > 0 && s.kind() != object::SectionKind::UninitializedData)
}

/// Loads `file`'s DWARF sections into an addr2line context.
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
        Ok(Reader::new(Arc::from(&*data), endian))
    })?;
    addr2line::Context::from_dwarf(dwarf)
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
