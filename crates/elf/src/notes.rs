//! The GNU build-id note, read by range.

use object::elf;
use object::read::elf::{FileHeader, ProgramHeader, SectionHeader};
use object::{Endianness, FileKind, ReadRef};

/// Note sections (or segments) looked at for the build-id.
pub const MAX_NOTE_AREAS: usize = 16;

/// Bytes of one note section (or segment) read; a bigger one is skipped.
pub const MAX_NOTE_BYTES: u64 = 64 << 10;

/// The GNU build-id of the ELF file in `data`, reading the headers and
/// the notes only: the first `NT_GNU_BUILD_ID` note of the `SHT_NOTE`
/// sections, or of the `PT_NOTE` segments when the file has no section
/// headers (as `object`'s `Object::build_id`). `None` when there is none,
/// or the headers or notes are malformed.
pub fn build_id<'data, R: ReadRef<'data>>(data: R) -> Option<Vec<u8>> {
    match FileKind::parse(data).ok()? {
        FileKind::Elf32 => of::<elf::FileHeader32<Endianness>, R>(data),
        FileKind::Elf64 => of::<elf::FileHeader64<Endianness>, R>(data),
        _ => None,
    }
}

fn of<'data, Elf, R>(data: R) -> Option<Vec<u8>>
where
    Elf: FileHeader<Endian = Endianness>,
    R: ReadRef<'data>,
{
    let header = Elf::parse(data).ok()?;
    let endian = header.endian().ok()?;
    let is_build_id = |n: &object::read::elf::Note<'_, Elf>| -> bool {
        n.name() == elf::ELF_NOTE_GNU && n.n_type(endian) == elf::NT_GNU_BUILD_ID
    };
    // A crafted file could hold thousands of note sections, each spanning
    // the whole file: only the first few small ones are read (the build-id
    // note is 36 bytes in a section of its own), and a malformed one is
    // skipped, not the end of the search.
    let small = |size: u64| size <= MAX_NOTE_BYTES;
    let sections = header.sections(endian, data).ok()?;
    let areas: Vec<_> = if !sections.is_empty() {
        sections
            .iter()
            .filter(|s| s.sh_type(endian) == elf::SHT_NOTE && small(s.sh_size(endian).into()))
            .take(MAX_NOTE_AREAS)
            .filter_map(|s| s.notes(endian, data).ok().flatten())
            .collect()
    } else {
        header
            .program_headers(endian, data)
            .ok()?
            .iter()
            .filter(|p| p.p_type(endian) == elf::PT_NOTE && small(p.p_filesz(endian).into()))
            .take(MAX_NOTE_AREAS)
            .filter_map(|p| p.notes(endian, data).ok().flatten())
            .collect()
    };
    for mut notes in areas {
        while let Ok(Some(n)) = notes.next() {
            if is_build_id(&n) {
                return Some(n.desc().to_vec());
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use object::Object;

    #[test]
    fn the_build_id_read_by_range_is_objects() {
        let exe = std::env::current_exe().unwrap();
        let data = std::fs::read(&exe).unwrap();
        let whole = object::File::parse(&*data).unwrap().build_id().unwrap();
        assert!(whole.is_some(), "test binaries are linked with a build-id");
        assert_eq!(build_id(&*data).as_deref(), whole);
        let f = std::fs::File::open(&exe).unwrap();
        let cache = object::ReadCache::new(f);
        assert_eq!(build_id(&cache).as_deref(), whole);
        assert_eq!(build_id(&b"#!/bin/sh\n"[..]), None);
    }

    /// Three thousand note sections over one megabyte of zeros (before:
    /// each read whole and cached, 3.4 GB and 8 s when their ranges
    /// differ): only the first [`MAX_NOTE_AREAS`] of at most
    /// [`MAX_NOTE_BYTES`] are read; a build-id note in a small section is
    /// found, the same note in a section over the bound is not.
    #[test]
    fn crafted_note_sections_are_bounded() {
        let f = crate::sections::tests::crafted(3_000, 8, elf::SHT_NOTE, &vec![0u8; 1 << 20]);
        let cache = object::ReadCache::new(std::io::Cursor::new(&f));
        assert_eq!(build_id(&cache), None);
        let mut note = Vec::new();
        note.extend_from_slice(&4u32.to_le_bytes());
        note.extend_from_slice(&4u32.to_le_bytes());
        note.extend_from_slice(&elf::NT_GNU_BUILD_ID.to_le_bytes());
        note.extend_from_slice(b"GNU\0");
        note.extend_from_slice(&[1, 2, 3, 4]);
        let f = crate::sections::tests::crafted(5, 8, elf::SHT_NOTE, &note);
        assert_eq!(build_id(&f[..]).as_deref(), Some(&[1u8, 2, 3, 4][..]));
        // The same note in a section over the bound is not read.
        let mut big = note.clone();
        big.resize(MAX_NOTE_BYTES as usize + 4, 0);
        let f = crate::sections::tests::crafted(5, 8, elf::SHT_NOTE, &big);
        assert_eq!(build_id(&f[..]), None);
    }
}
