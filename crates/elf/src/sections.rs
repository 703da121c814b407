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

/// Section headers a file may have: linked programs have dozens, a kernel
/// module or an object built with `-ffunction-sections` thousands; more is
/// a crafted file (each header kept costs about 100 bytes).
pub const MAX_SECTIONS: usize = 1 << 16;

/// Bytes of a section's name kept: every name looked up (`.eh_frame_hdr`,
/// `.gnu_debuglink`, `.zdebug_frame`, ...) is shorter; without a bound,
/// every header could name one 4 KiB string and a 12 MB file cost 800 MB.
pub const MAX_NAME: usize = 64;

/// Bytes of a section name table read: a real one takes a few hundred
/// bytes to a few KiB; a bigger one leaves the sections unnamed.
pub const MAX_NAME_TABLE: u64 = 1 << 20;

/// One section header, with its name (its first [`MAX_NAME`] bytes).
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
            FileKind::Elf32 => of::<elf::FileHeader32<Endianness>, R>(data, false),
            FileKind::Elf64 => of::<elf::FileHeader64<Endianness>, R>(data, true),
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
    /// empty for `SHT_NOBITS` (as `object`'s `uncompressed_data`). At most
    /// `max` bytes: a section declaring more is refused before anything is
    /// read, and one decompressing to more than it declared (a zstd stream
    /// of RLE blocks makes gigabytes of a few kilobytes) is refused once it
    /// has produced one byte more than its declared size.
    ///
    /// # Errors
    /// [`Error::TooLarge`]; [`Error::Malformed`] or [`Error::Parse`]: the
    /// bytes are past the end of the file, or do not decompress to the size
    /// declared.
    pub fn data<'data, R: ReadRef<'data>>(
        &self,
        data: R,
        s: &Section,
        max: u64,
    ) -> Result<Cow<'data, [u8]>, Error> {
        let range = self.file_range(data, s)?;
        if range.uncompressed_size > max {
            return Err(Error::TooLarge {
                what: "section of",
                size: range.uncompressed_size,
                max,
            });
        }
        let compressed = range.data(data)?;
        if range.format != CompressionFormat::Zstandard {
            // Zlib: object decompresses into the declared size's capacity
            // and no further.
            return Ok(compressed.decompress()?);
        }
        bounded_zstd(compressed.data, range.uncompressed_size).map(Cow::Owned)
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

/// The zstd frames in `input`, decompressed, which must make exactly
/// `size` bytes: decoding stops one byte past it.
fn bounded_zstd(mut input: &[u8], size: u64) -> Result<Vec<u8>, Error> {
    use std::io::Read;
    let bad = || Error::Malformed("Invalid zstd compressed data");
    let mut out = Vec::new();
    out.try_reserve_exact(usize::try_from(size).map_err(|_| bad())?)
        .map_err(|_| bad())?;
    while !input.is_empty() {
        let decoder = match ruzstd::StreamingDecoder::new(&mut input) {
            Ok(d) => d,
            Err(ruzstd::frame_decoder::FrameDecoderError::ReadFrameHeaderError(
                ruzstd::frame::ReadFrameHeaderError::SkipFrame { length, .. },
            )) => {
                input = input.get(length as usize..).ok_or_else(bad)?;
                continue;
            }
            Err(_) => return Err(bad()),
        };
        let room = (size + 1).saturating_sub(out.len() as u64);
        decoder
            .take(room)
            .read_to_end(&mut out)
            .map_err(|_| bad())?;
        if out.len() as u64 > size {
            return Err(Error::Malformed(
                "zstd compressed data makes more than its declared size",
            ));
        }
    }
    if out.len() as u64 != size {
        return Err(Error::Malformed(
            "zstd compressed data makes less than its declared size",
        ));
    }
    Ok(out)
}

fn of<'data, Elf, R>(data: R, is_64: bool) -> Result<Sections, Error>
where
    Elf: FileHeader<Endian = Endianness>,
    R: ReadRef<'data>,
{
    let header = Elf::parse(data)?;
    let endian = header.endian()?;
    // Counted before the table is read: with extended numbering the count
    // is only bounded by the file's size.
    let count = header.shnum(endian, data)?;
    if count > MAX_SECTIONS {
        return Err(Error::TooLarge {
            what: "section headers:",
            size: count as u64,
            max: MAX_SECTIONS as u64,
        });
    }
    let table = header.sections(endian, data)?;
    // The names, from the name table read once (not a cached read per
    // name: up to 4 KiB each, at as many offsets as a crafted table gives).
    let names: &[u8] = header
        .shstrndx(endian, data)
        .ok()
        .and_then(|i| table.section(object::SectionIndex(i as usize)).ok())
        .filter(|h| h.sh_size(endian).into() <= MAX_NAME_TABLE)
        .and_then(|h| h.data(endian, data).ok())
        .unwrap_or(&[]);
    let name_at = |offset: u32| -> Vec<u8> {
        let rest = names.get(offset as usize..).unwrap_or(&[]);
        let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
        rest[..end.min(MAX_NAME)].to_vec()
    };
    let sections = table
        .iter()
        .enumerate()
        .map(|(index, s)| Section {
            index,
            name: name_at(s.sh_name(endian)),
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
pub(crate) mod tests {
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
                assert_eq!(ours.data(&cache, m, u64::MAX).unwrap(), want, "{name}");
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
            assert_eq!(
                table.data(&*file, s, u64::MAX).unwrap(),
                plain,
                "gnu: {gnu}"
            );
            // Cut short: an error, not a panic.
            assert!(table.data(&file[..20], s, u64::MAX).is_err());
        }
    }

    /// An ELF64 little-endian file of section headers only: `count`
    /// headers (`e_shnum` 0 and the count in section 0's `sh_size`, as
    /// for extended numbering), section 1 a name table holding one
    /// `name_len`-byte name at offset 1, every other section named by it
    /// and of type `kind` over `data` appended at the end.
    pub(crate) fn crafted(count: usize, name_len: usize, kind: u32, data: &[u8]) -> Vec<u8> {
        let shoff = 64u64;
        let names_at = shoff + 64 * count as u64;
        let data_at = names_at + name_len as u64 + 2;
        let mut f = vec![0u8; 64];
        f[..4].copy_from_slice(b"\x7fELF");
        (f[4], f[5], f[6]) = (2, 1, 1);
        f[16..18].copy_from_slice(&2u16.to_le_bytes());
        f[18..20].copy_from_slice(&62u16.to_le_bytes());
        f[20..24].copy_from_slice(&1u32.to_le_bytes());
        f[40..48].copy_from_slice(&shoff.to_le_bytes());
        f[52..54].copy_from_slice(&64u16.to_le_bytes());
        f[58..60].copy_from_slice(&64u16.to_le_bytes());
        f[62..64].copy_from_slice(&1u16.to_le_bytes());
        for i in 0..count {
            let mut h = [0u8; 64];
            match i {
                0 => h[32..40].copy_from_slice(&(count as u64).to_le_bytes()),
                1 => {
                    h[4..8].copy_from_slice(&elf::SHT_STRTAB.to_le_bytes());
                    h[24..32].copy_from_slice(&names_at.to_le_bytes());
                    h[32..40].copy_from_slice(&(name_len as u64 + 2).to_le_bytes());
                }
                _ => {
                    h[0..4].copy_from_slice(&1u32.to_le_bytes());
                    h[4..8].copy_from_slice(&kind.to_le_bytes());
                    h[24..32].copy_from_slice(&data_at.to_le_bytes());
                    h[32..40].copy_from_slice(&(data.len() as u64).to_le_bytes());
                    h[48..56].copy_from_slice(&4u64.to_le_bytes());
                }
            }
            f.extend_from_slice(&h);
        }
        f.push(0);
        f.extend(std::iter::repeat_n(b'A', name_len));
        f.push(0);
        f.extend_from_slice(data);
        f
    }

    /// A throwaway user's binary whose every section header names one
    /// 4,000-byte string (before: each name copied whole, 806 MB for a
    /// 12 MB file): names are kept to their first bytes; and more headers
    /// than any real file has are refused before the table is read.
    #[test]
    fn crafted_section_tables_are_bounded() {
        let f = crafted(2_000, 4_000, elf::SHT_PROGBITS, &[]);
        let cache = object::ReadCache::new(std::io::Cursor::new(&f));
        let s = Sections::parse(&cache).unwrap();
        assert_eq!(s.all().len(), 2_000);
        assert!(s.all()[2..].iter().all(|x| x.name.len() == MAX_NAME));
        let f = crafted(MAX_SECTIONS + 1, 1, elf::SHT_PROGBITS, &[]);
        let e = Sections::parse(&f[..]).unwrap_err();
        assert!(
            matches!(e, Error::TooLarge { size, .. } if size == MAX_SECTIONS as u64 + 1),
            "{e}"
        );
    }

    /// zstd frames of RLE blocks: 16 KB that would make a gigabyte. Decoding
    /// stops one byte past the declared size (before: all of it was made,
    /// 770 MB, and only then compared); a declared size over the caller's
    /// bound is refused before anything is decoded.
    #[test]
    fn a_zstd_bomb_stops_at_its_declared_size() {
        let mut z = vec![0x28, 0xB5, 0x2F, 0xFD, 0x00, 0x38];
        let blocks = 8_192;
        for i in 0..blocks {
            let last = u32::from(i + 1 == blocks);
            let h: u32 = last | (1 << 1) | ((128 * 1024) << 3);
            z.extend_from_slice(&h.to_le_bytes()[..3]);
            z.push(0xAA);
        }
        let e = bounded_zstd(&z, 16).unwrap_err();
        assert!(e.to_string().contains("more than its declared size"), "{e}");
        // A compressed section declaring 2^40 bytes, against a 1 MiB bound.
        let mut chdr = Vec::new();
        chdr.extend_from_slice(&elf::ELFCOMPRESS_ZSTD.to_le_bytes());
        chdr.extend_from_slice(&0u32.to_le_bytes());
        chdr.extend_from_slice(&(1u64 << 40).to_le_bytes());
        chdr.extend_from_slice(&1u64.to_le_bytes());
        chdr.extend_from_slice(&z);
        let f = crafted(3, 12, elf::SHT_PROGBITS, &chdr);
        let table = Sections::parse(&f[..]).unwrap();
        let mut s = table.all()[2].clone();
        s.flags |= u64::from(elf::SHF_COMPRESSED);
        let e = table.data(&f[..], &s, 1 << 20).unwrap_err();
        assert!(
            matches!(e, Error::TooLarge { size, .. } if size == 1 << 40),
            "{e}"
        );
    }
}
