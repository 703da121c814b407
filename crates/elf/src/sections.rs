//! Section headers read by range, and one section's bytes (decompressed)
//! read by range: what the unwinder needs of `.eh_frame` and friends, and
//! what the symbolizer needs to find the symbol tables, `.gnu_debuglink`
//! and the DWARF sections, without `object::File::parse` (which reads both
//! symbol tables whole).

use std::borrow::Cow;

use object::elf;
use object::read::elf::{FileHeader, SectionHeader};
use object::{CompressedFileRange, CompressionFormat, Endianness, FileKind, ReadRef};

use crate::Error;

/// One section header, with its name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Section {
    /// Its index in the section header table.
    pub index: usize,
    /// Its name (empty if the name table does not give one).
    pub name: Vec<u8>,
    /// `sh_type`.
    pub kind: u32,
    /// `sh_flags`.
    pub flags: u64,
    /// `sh_addr`: its link-time address.
    pub address: u64,
    /// `sh_offset`.
    pub offset: u64,
    /// `sh_size` (compressed size for a compressed section).
    pub size: u64,
    /// `sh_link`.
    pub link: u32,
}

impl Section {
    /// `address..address + size` (saturating).
    pub fn range(&self) -> std::ops::Range<u64> {
        self.address..self.address.saturating_add(self.size)
    }

    /// `SHF_EXECINSTR`.
    pub fn is_executable(&self) -> bool {
        self.flags & u64::from(elf::SHF_EXECINSTR) != 0
    }

    /// `SHF_COMPRESSED`.
    pub fn is_compressed(&self) -> bool {
        self.flags & u64::from(elf::SHF_COMPRESSED) != 0
    }

    /// `SHT_NOBITS`: no bytes in the file.
    pub fn is_nobits(&self) -> bool {
        self.kind == elf::SHT_NOBITS
    }
}

/// An ELF file's section headers, in index order, read by range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sections {
    is_64: bool,
    endian: Endianness,
    sections: Vec<Section>,
}

impl Sections {
    /// Reads the section headers and their names of the ELF32 or ELF64
    /// file in `data`.
    ///
    /// # Errors
    /// [`Error::NotElf`], or [`Error::Parse`] for malformed headers.
    pub fn parse<'data, R: ReadRef<'data>>(data: R) -> Result<Sections, Error> {
        match FileKind::parse(data)? {
            FileKind::Elf32 => Ok(of::<elf::FileHeader32<Endianness>, R>(data, false)?),
            FileKind::Elf64 => Ok(of::<elf::FileHeader64<Endianness>, R>(data, true)?),
            other => Err(Error::NotElf {
                kind: format!("{other:?}"),
            }),
        }
    }

    /// An ELF64 file.
    pub fn is_64(&self) -> bool {
        self.is_64
    }

    /// Its byte order.
    pub fn endian(&self) -> Endianness {
        self.endian
    }

    /// Every section header, in index order (index 0, the null section,
    /// included).
    pub fn all(&self) -> &[Section] {
        &self.sections
    }

    /// The first section named `name`; for a `.debug_*` name, else its
    /// GNU-compressed `.zdebug_*` twin (as `object`'s `section_by_name`).
    pub fn by_name(&self, name: &str) -> Option<&Section> {
        let find = |n: &[u8]| self.sections.iter().find(|s| s.name == n);
        find(name.as_bytes()).or_else(|| {
            let rest = name.strip_prefix(".debug_")?;
            find(format!(".zdebug_{rest}").as_bytes())
        })
    }

    /// The first section of type `kind`.
    pub fn by_kind(&self, kind: u32) -> Option<&Section> {
        self.sections.iter().find(|s| s.kind == kind)
    }

    /// The section at `index`.
    pub fn get(&self, index: usize) -> Option<&Section> {
        self.sections.get(index)
    }

    /// The bytes of section `s` of the file in `data`, decompressed if it
    /// is compressed (`SHF_COMPRESSED` zlib or zstd, or a GNU `.zdebug_*`);
    /// empty for `SHT_NOBITS` (as `object`'s `uncompressed_data`).
    ///
    /// # Errors
    /// [`Error::Malformed`] or [`Error::Parse`]: the bytes are past the end
    /// of the file, or do not decompress.
    pub fn data<'data, R: ReadRef<'data>>(
        &self,
        data: R,
        s: &Section,
    ) -> Result<Cow<'data, [u8]>, Error> {
        Ok(self.file_range(data, s)?.data(data)?.decompress()?)
    }

    /// The bytes of section `s` in the file in `data` as they are there
    /// (not decompressed; empty for `SHT_NOBITS`).
    ///
    /// # Errors
    /// [`Error::Malformed`]: past the end of the file.
    pub fn raw_data<'data, R: ReadRef<'data>>(
        &self,
        data: R,
        s: &Section,
    ) -> Result<&'data [u8], Error> {
        if s.is_nobits() {
            return Ok(&[]);
        }
        data.read_bytes_at(s.offset, s.size)
            .map_err(|()| Error::Malformed("Invalid ELF section size or offset"))
    }

    /// Where `s`'s bytes are and how they are compressed.
    fn file_range<'data, R: ReadRef<'data>>(
        &self,
        data: R,
        s: &Section,
    ) -> Result<CompressedFileRange, Error> {
        let bad = Error::Malformed;
        if s.is_compressed() {
            if s.is_nobits() {
                return Err(bad("Invalid ELF compressed section type"));
            }
            let e = self.endian;
            let (kind, uncompressed_size, header_len) = if self.is_64 {
                let h = data
                    .read_at::<elf::CompressionHeader64<Endianness>>(s.offset)
                    .map_err(|()| bad("Invalid ELF compressed section offset"))?;
                (h.ch_type.get(e), h.ch_size.get(e), 24)
            } else {
                let h = data
                    .read_at::<elf::CompressionHeader32<Endianness>>(s.offset)
                    .map_err(|()| bad("Invalid ELF compressed section offset"))?;
                (h.ch_type.get(e), u64::from(h.ch_size.get(e)), 12)
            };
            let format = match kind {
                elf::ELFCOMPRESS_ZLIB => CompressionFormat::Zlib,
                elf::ELFCOMPRESS_ZSTD => CompressionFormat::Zstandard,
                _ => return Err(bad("Unsupported ELF compression type")),
            };
            return Ok(CompressedFileRange {
                format,
                offset: s.offset.saturating_add(header_len),
                compressed_size: s
                    .size
                    .checked_sub(header_len)
                    .ok_or_else(|| bad("Invalid ELF compressed section size"))?,
                uncompressed_size,
            });
        }
        if s.name.starts_with(b".zdebug_") && !s.is_nobits() {
            // GNU style: "ZLIB", then the size as a big-endian u64.
            let header = data
                .read_bytes_at(s.offset, 12)
                .map_err(|()| bad("GNU compressed section is too short"))?;
            if header[..8] != *b"ZLIB\0\0\0\0" {
                return Err(bad("Invalid GNU compressed section header"));
            }
            let size = u32::from_be_bytes([header[8], header[9], header[10], header[11]]);
            return Ok(CompressedFileRange {
                format: CompressionFormat::Zlib,
                offset: s.offset.saturating_add(12),
                compressed_size: s
                    .size
                    .checked_sub(12)
                    .ok_or_else(|| bad("GNU compressed section is too short"))?,
                uncompressed_size: u64::from(size),
            });
        }
        Ok(CompressedFileRange::none(
            (!s.is_nobits()).then_some((s.offset, s.size)),
        ))
    }
}

fn of<'data, Elf, R>(data: R, is_64: bool) -> object::Result<Sections>
where
    Elf: FileHeader<Endian = Endianness>,
    R: ReadRef<'data>,
{
    let header = Elf::parse(data)?;
    let endian = header.endian()?;
    let table = header.sections(endian, data)?;
    let sections = table
        .iter()
        .enumerate()
        .map(|(index, s)| Section {
            index,
            name: table
                .section_name(endian, s)
                .map(<[u8]>::to_vec)
                .unwrap_or_default(),
            kind: s.sh_type(endian),
            flags: s.sh_flags(endian).into(),
            address: s.sh_addr(endian).into(),
            offset: s.sh_offset(endian).into(),
            size: s.sh_size(endian).into(),
            link: s.sh_link(endian),
        })
        .collect();
    Ok(Sections {
        is_64,
        endian,
        sections,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use object::{Object, ObjectSection};

    #[test]
    fn sections_and_their_bytes_are_objects() {
        let data = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        let obj = object::File::parse(&*data).unwrap();
        let f = std::fs::File::open(std::env::current_exe().unwrap()).unwrap();
        let cache = object::ReadCache::new(f);
        let ours = Sections::parse(&cache).unwrap();
        assert!(ours.is_64());
        for name in [
            ".eh_frame",
            ".eh_frame_hdr",
            ".text",
            ".got",
            ".debug_info",
            ".bss",
        ] {
            let theirs = obj.section_by_name(name);
            let mine = ours.by_name(name);
            assert_eq!(theirs.is_some(), mine.is_some(), "{name}");
            let (Some(t), Some(m)) = (theirs, mine) else {
                continue;
            };
            assert_eq!((t.address(), t.size()), (m.address, m.size), "{name}");
            if m.size < 1 << 20 {
                let want = t.uncompressed_data().unwrap();
                assert_eq!(ours.data(&cache, m).unwrap(), want, "{name}");
            }
        }
        assert!(ours.by_kind(elf::SHT_SYMTAB).is_some());
        assert!(Sections::parse(&b"\x7fELF"[..]).is_err());
    }

    /// `data` with one compressed section, `SHF_COMPRESSED` or GNU style.
    fn compressed(gnu: bool) -> (Sections, Vec<u8>, Vec<u8>) {
        let plain: Vec<u8> = (0..4000u32).flat_map(|i| (i % 251).to_le_bytes()).collect();
        let mut z = flate2_free_zlib(&plain);
        let mut file = Vec::new();
        let (flags, name) = if gnu {
            file.extend_from_slice(b"ZLIB\0\0\0\0");
            file.extend_from_slice(&(plain.len() as u32).to_be_bytes());
            (0, b".zdebug_frame".to_vec())
        } else {
            let mut h = [0u8; 24];
            h[..4].copy_from_slice(&elf::ELFCOMPRESS_ZLIB.to_le_bytes());
            h[8..16].copy_from_slice(&(plain.len() as u64).to_le_bytes());
            file.extend_from_slice(&h);
            (u64::from(elf::SHF_COMPRESSED), b".debug_frame".to_vec())
        };
        file.append(&mut z);
        let s = Section {
            index: 1,
            name,
            kind: elf::SHT_PROGBITS,
            flags,
            address: 0,
            offset: 0,
            size: file.len() as u64,
            link: 0,
        };
        let table = Sections {
            is_64: true,
            endian: Endianness::Little,
            sections: vec![s],
        };
        (table, file, plain)
    }

    /// A stored (uncompressed) zlib stream: no compressor needed.
    fn flate2_free_zlib(data: &[u8]) -> Vec<u8> {
        let mut out = vec![0x78, 0x01];
        for (i, block) in data.chunks(65535).enumerate() {
            let last = (i + 1) * 65535 >= data.len();
            out.push(u8::from(last));
            let n = block.len() as u16;
            out.extend_from_slice(&n.to_le_bytes());
            out.extend_from_slice(&(!n).to_le_bytes());
            out.extend_from_slice(block);
        }
        let (mut a, mut b) = (1u32, 0u32);
        for &x in data {
            a = (a + u32::from(x)) % 65521;
            b = (b + a) % 65521;
        }
        out.extend_from_slice(&((b << 16) | a).to_be_bytes());
        out
    }

    #[test]
    fn compressed_sections_are_decompressed_both_ways() {
        for gnu in [false, true] {
            let (table, file, plain) = compressed(gnu);
            let s = table.by_name(".debug_frame").unwrap();
            assert_eq!(table.data(&*file, s).unwrap(), plain, "gnu: {gnu}");
            // Cut short: an error, not a panic.
            assert!(table.data(&file[..20], s).is_err());
        }
    }
}
