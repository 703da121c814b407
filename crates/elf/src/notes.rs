//! The GNU build-id note, read by range.

use object::elf;
use object::read::elf::{FileHeader, ProgramHeader, SectionHeader};
use object::{Endianness, FileKind, ReadRef};

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
    let sections = header.sections(endian, data).ok()?;
    if !sections.is_empty() {
        for s in sections.iter() {
            if let Some(mut notes) = s.notes(endian, data).ok()? {
                while let Some(n) = notes.next().ok()? {
                    if is_build_id(&n) {
                        return Some(n.desc().to_vec());
                    }
                }
            }
        }
    } else {
        for p in header.program_headers(endian, data).ok()? {
            if let Some(mut notes) = p.notes(endian, data).ok()? {
                while let Some(n) = notes.next().ok()? {
                    if is_build_id(&n) {
                        return Some(n.desc().to_vec());
                    }
                }
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
}
