//! PT_LOAD segments, and file offsets to link-time addresses and back.
//!
//! Sessions store samples as file offsets within a binary, so PIE and
//! non-PIE are one case: an offset is mapped through the PT_LOAD header
//! whose file bytes hold it to the link-time address that symbols, DWARF
//! and unwind tables use.

use object::elf;
use object::read::elf::{FileHeader, ProgramHeader};
use object::{Endianness, FileKind, ReadRef};

use crate::Error;

/// A PT_LOAD header: file bytes `file_offset..file_offset + file_size` are
/// mapped at `vaddr`, and the segment spans `mem_size` bytes in memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// `p_offset`.
    pub file_offset: u64,
    /// `p_filesz` (0 for a segment of `.bss` alone: it holds no file offset).
    pub file_size: u64,
    /// `p_vaddr`, the link-time address.
    pub vaddr: u64,
    /// `p_memsz`.
    pub mem_size: u64,
    /// `p_flags` has `PF_X`.
    pub executable: bool,
}

impl Segment {
    /// `vaddr..vaddr + len` lies within this segment's file bytes.
    #[inline]
    pub fn holds(&self, vaddr: u64, len: u64) -> bool {
        vaddr >= self.vaddr && {
            let into = vaddr - self.vaddr;
            into < self.file_size && len <= self.file_size - into
        }
    }

    /// File offset `offset` is one of this segment's file bytes.
    #[inline]
    pub fn holds_offset(&self, offset: u64) -> bool {
        offset >= self.file_offset && offset - self.file_offset < self.file_size
    }
}

/// An ELF file's machine, type and PT_LOAD headers: what mapping many file
/// offsets to addresses (or back) needs, from one read of the ELF header
/// and program headers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Segments {
    machine: u16,
    relocatable: bool,
    loads: Vec<Segment>,
}

impl Segments {
    /// Reads the ELF header and program headers of the ELF32 or ELF64 file
    /// in `data` (through an `object::ReadCache`, a few hundred bytes).
    ///
    /// # Errors
    /// [`Error::NotElf`], or [`Error::Parse`] for malformed headers.
    pub fn parse<'data, R: ReadRef<'data>>(data: R) -> Result<Segments, Error> {
        match FileKind::parse(data)? {
            FileKind::Elf32 => {
                let h = elf::FileHeader32::<Endianness>::parse(data)?;
                Ok(Segments::from_header(h, h.endian()?, data)?)
            }
            FileKind::Elf64 => {
                let h = elf::FileHeader64::<Endianness>::parse(data)?;
                Ok(Segments::from_header(h, h.endian()?, data)?)
            }
            other => Err(Error::NotElf {
                kind: format!("{other:?}"),
            }),
        }
    }

    /// The segments of an ELF header the caller has parsed already.
    ///
    /// # Errors
    /// Malformed program headers.
    pub fn from_header<'data, Elf, R>(
        header: &Elf,
        endian: Elf::Endian,
        data: R,
    ) -> object::Result<Segments>
    where
        Elf: FileHeader,
        R: ReadRef<'data>,
    {
        let loads = header
            .program_headers(endian, data)?
            .iter()
            .filter(|p| p.p_type(endian) == elf::PT_LOAD)
            .map(|p| Segment {
                file_offset: p.p_offset(endian).into(),
                file_size: p.p_filesz(endian).into(),
                vaddr: p.p_vaddr(endian).into(),
                mem_size: p.p_memsz(endian).into(),
                executable: p.p_flags(endian) & elf::PF_X != 0,
            })
            .collect();
        Ok(Segments {
            machine: header.e_machine(endian),
            relocatable: header.e_type(endian) == elf::ET_REL,
            loads,
        })
    }

    /// `e_machine`.
    pub fn machine(&self) -> u16 {
        self.machine
    }

    /// An `ET_REL` object (a kernel module's `.ko`): no segments; its
    /// offsets are not mapped here.
    pub fn is_relocatable(&self) -> bool {
        self.relocatable
    }

    /// Every PT_LOAD header, in header order.
    pub fn all(&self) -> &[Segment] {
        &self.loads
    }

    /// True if some PT_LOAD has file bytes (so file offsets can be mapped).
    pub fn has_file_bytes(&self) -> bool {
        self.loads.iter().any(|s| s.file_size > 0)
    }

    /// Every PT_LOAD's (address, size in memory), file bytes or not: the
    /// layout a separate debug file shares with its binary.
    pub fn layout(&self) -> Vec<(u64, u64)> {
        self.loads.iter().map(|s| (s.vaddr, s.mem_size)).collect()
    }

    /// The link-time address of file offset `offset`, through the first
    /// PT_LOAD whose file bytes hold it; `None` if none does.
    #[inline]
    pub fn to_vaddr(&self, offset: u64) -> Option<u64> {
        self.loads
            .iter()
            .find(|s| s.holds_offset(offset))
            .map(|s| s.vaddr.wrapping_add(offset - s.file_offset))
    }

    /// The inverse of [`Segments::to_vaddr`]: the file offset of link-time
    /// address `vaddr`, through the first PT_LOAD whose file bytes are
    /// mapped there.
    #[inline]
    pub fn to_file_offset(&self, vaddr: u64) -> Option<u64> {
        self.loads
            .iter()
            .find(|s| s.holds(vaddr, 0))
            .map(|s| s.file_offset.wrapping_add(vaddr - s.vaddr))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(file_offset: u64, file_size: u64, vaddr: u64) -> Segment {
        Segment {
            file_offset,
            file_size,
            vaddr,
            mem_size: file_size,
            executable: true,
        }
    }

    #[test]
    fn offsets_map_through_the_segment_that_holds_them_and_back() {
        let s = Segments {
            machine: elf::EM_X86_64,
            relocatable: false,
            loads: vec![
                seg(0, 0x800, 0),
                seg(0x1000, 0x800, 0x401000),
                seg(0x2000, 0, 0x600000),
            ],
        };
        assert_eq!(s.to_vaddr(0x1234), Some(0x401234));
        assert_eq!(s.to_file_offset(0x401234), Some(0x1234));
        assert_eq!(s.to_vaddr(0x1800), None);
        assert_eq!(s.to_vaddr(0x2000), None, "no file bytes");
        assert_eq!(s.to_file_offset(0x600000), None);
        assert!(s.has_file_bytes());
        // Hostile values wrap rather than overflow.
        let h = Segments {
            loads: vec![seg(0, u64::MAX, u64::MAX)],
            ..Segments::default()
        };
        assert_eq!(h.to_vaddr(2), Some(1));
    }

    #[test]
    fn this_executable_maps_as_object_says() {
        use object::{Object, ObjectSegment};
        let data = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let obj = object::File::parse(&*data).unwrap();
        let s = Segments::parse(&*data).unwrap();
        assert_eq!(s.machine(), elf::EM_X86_64);
        assert!(!s.is_relocatable());
        let theirs: Vec<(u64, u64, u64)> = obj
            .segments()
            .map(|g| (g.file_range().0, g.file_range().1, g.address()))
            .collect();
        let ours: Vec<(u64, u64, u64)> = s
            .all()
            .iter()
            .map(|g| (g.file_offset, g.file_size, g.vaddr))
            .collect();
        assert_eq!(ours, theirs);
        assert!(s.all().iter().any(|g| g.executable));
        let e = Segments::parse(&b"#!/bin/sh\necho this is not ELF\n"[..]).unwrap_err();
        assert!(matches!(e, Error::Parse(_)), "{e}");
    }
}
