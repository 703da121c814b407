//! A function's bytes read from an ELF file by range: the ELF header, the program
//! headers, then the code, and nothing else.
//!
//! # Implementation notes
//!
//! Addresses and file offsets meet through the PT_LOAD headers, read by
//! `profkit-elf` as for every other crate (sessions store samples as file offsets, so PIE
//! and non-PIE are one case):
//!
//! ```text
//!   file:   0x0000 [ .text  p_offset=0x1000 p_filesz=0x800 ] 0x1800
//!   vaddr:         [ 0x401000 (non-PIE)  or  0x1000 (PIE)  ]
//!   file offset 0x1234 ↔ vaddr = p_vaddr + (0x1234 - 0x1000)
//! ```
//!
//! Headers are parsed by `profkit-elf` on a [`ReadCache`], which reads only the ranges
//! the parser asks for (`object`'s `ElfFile` would read the symbol tables); the code is
//! then read with one positioned read from the same descriptor.
//!
//! Files may belong to untrusted users, so the rules of `profkit-symbols`' `files.rs`
//! apply: opened non-blocking (a FIFO's open returns at once), and refused unless the
//! opened descriptor is a regular file. No size limit on the file is needed since it is
//! never read whole; the read itself is capped at [`MAX_CODE_BYTES`], and every sum of
//! header values is checked for overflow.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use object::elf;
use object::{ReadCache, ReadRef};

use crate::disasm::{Bitness, Code};
use crate::error::{Error, Result};

/// The most code [`read_code`] reads at once (1 MiB; the largest functions of a large
/// C++ or Rust binary are a few hundred KiB).
pub const MAX_CODE_BYTES: u64 = 1 << 20;

pub use profkit_elf::Segment;

/// An ELF file's machine and PT_LOAD segments (`profkit-elf`'s, with the
/// path for messages), for mapping many sampled file offsets to addresses
/// with one read of the headers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Segments {
    path: PathBuf,
    segments: profkit_elf::Segments,
}

impl Segments {
    /// Reads the ELF header and program headers of `path` (a few hundred bytes).
    pub fn read(path: &Path) -> Result<Segments> {
        let file = open_regular(path)?;
        Ok(parse(&file, path)?.0)
    }

    /// Every PT_LOAD segment, in header order (one without file bytes holds
    /// no offset).
    pub fn segments(&self) -> &[Segment] {
        self.segments.all()
    }

    /// The link-time address of file offset `offset`, through the PT_LOAD segment whose
    /// file bytes hold it; `None` if none does.
    pub fn to_vaddr(&self, offset: u64) -> Option<u64> {
        self.segments.to_vaddr(offset)
    }

    /// [`Segments::to_vaddr`], or [`Error::OffsetNotMapped`].
    pub fn vaddr_of(&self, offset: u64) -> Result<u64> {
        self.to_vaddr(offset).ok_or_else(|| Error::OffsetNotMapped {
            path: self.path.clone(),
            offset,
        })
    }

    /// The mode x86 code in this file runs in, or [`Error::UnsupportedMachine`].
    fn bitness(&self) -> Result<Bitness> {
        match self.segments.machine() {
            elf::EM_X86_64 => Ok(Bitness::Bits64),
            elf::EM_386 => Ok(Bitness::Bits32),
            m => Err(Error::UnsupportedMachine {
                path: self.path.clone(),
                machine: machine_name(m),
            }),
        }
    }

    /// Where `vaddr..vaddr + len` lies in the file: the file offset of `vaddr`.
    fn code_offset(&self, vaddr: u64, len: u64) -> Result<u64> {
        let all = self.segments.all();
        if let Some(s) = all.iter().find(|s| s.executable && s.holds(vaddr, len)) {
            // Saturating: a hostile p_offset near 2^64 then fails the length check.
            return Ok(s.file_offset.saturating_add(vaddr - s.vaddr));
        }
        let why = if !self.segments.has_file_bytes() {
            ": the file has no PT_LOAD segments (a relocatable object?)"
        } else if all.iter().any(|s| s.holds(vaddr, len)) {
            ": it is in a segment that is not executable"
        } else if all.iter().any(|s| s.holds(vaddr, 1)) {
            ": it runs past the end of the segment it starts in"
        } else {
            ": no segment holds that address"
        };
        Err(Error::NotInExecutableSegment {
            path: self.path.clone(),
            vaddr,
            len,
            why,
        })
    }
}

/// The link-time address of file offset `offset` in the ELF file `path` (how sessions
/// store samples: offsets within the binary), through its PT_LOAD headers. For many
/// offsets, read [`Segments`] once.
pub fn file_offset_to_vaddr(path: &Path, offset: u64) -> Result<u64> {
    Segments::read(path)?.vaddr_of(offset)
}

/// Reads the `len` bytes of code at link-time address `vaddr` of the ELF file `path`
/// (x86-64 or i386): its headers, then those bytes, nothing else. The range must lie in
/// the file bytes of one executable PT_LOAD segment, and be 1 to [`MAX_CODE_BYTES`]
/// bytes long.
pub fn read_code(path: &Path, vaddr: u64, len: u64) -> Result<Code> {
    read_code_from(open_regular(path)?, path, vaddr, len)
}

/// [`read_code`] on an open file, or any reader (tests count what it reads).
pub(crate) fn read_code_from<R: Read + Seek>(
    file: R,
    path: &Path,
    vaddr: u64,
    len: u64,
) -> Result<Code> {
    if len == 0 {
        return Err(Error::EmptyRange { vaddr });
    }
    if len > MAX_CODE_BYTES {
        return Err(Error::TooLong {
            vaddr,
            len,
            max: MAX_CODE_BYTES,
        });
    }
    let (segments, mut file, file_len) = parse(file, path)?;
    let bitness = segments.bitness()?;
    let offset = segments.code_offset(vaddr, len)?;
    let needed = offset.saturating_add(len);
    if needed > file_len {
        return Err(Error::Truncated {
            path: path.to_owned(),
            file_len,
            needed,
        });
    }
    let io = |source| Error::Io {
        path: path.to_owned(),
        source,
    };
    // `len` is at most MAX_CODE_BYTES, so this fits in usize.
    let mut bytes = vec![0; len as usize];
    file.seek(SeekFrom::Start(offset)).map_err(io)?;
    file.read_exact(&mut bytes).map_err(io)?;
    Ok(Code {
        bytes,
        vaddr,
        bitness,
    })
}

/// Opens `path` non-blocking and checks that the descriptor is a regular file.
fn open_regular(path: &Path) -> Result<File> {
    let io = |source| Error::Io {
        path: path.to_owned(),
        source,
    };
    use profkit_untrusted::{open_untrusted, Policy, Refusal};
    match open_untrusted(path, &Policy::regular()) {
        Ok(o) => Ok(o.file),
        Err(e) if matches!(Refusal::of(&e), Some(Refusal::NotRegular { .. })) => {
            Err(Error::NotRegularFile {
                path: path.to_owned(),
            })
        }
        Err(e) => Err(io(e)),
    }
}

/// Parses the headers of `file` by range; gives the reader back with the file's length.
fn parse<R: Read + Seek>(file: R, path: &Path) -> Result<(Segments, R, u64)> {
    let cache = ReadCache::new(file);
    let segments = match profkit_elf::Segments::parse(&cache) {
        Ok(s) => s,
        Err(profkit_elf::Error::NotElf { kind }) => {
            return Err(Error::UnsupportedMachine {
                path: path.to_owned(),
                machine: format!("a non-ELF file ({kind})"),
            })
        }
        Err(profkit_elf::Error::Parse(source)) => {
            return Err(Error::Elf {
                path: path.to_owned(),
                source,
            })
        }
        Err(e) => {
            return Err(Error::Io {
                path: path.to_owned(),
                source: std::io::Error::other(e),
            })
        }
    };
    let file_len = (&cache).len().unwrap_or(0);
    let segments = Segments {
        path: path.to_owned(),
        segments,
    };
    Ok((segments, cache.into_inner(), file_len))
}

/// A readable name for an ELF `e_machine`.
fn machine_name(m: u16) -> String {
    let name = match m {
        elf::EM_AARCH64 => "aarch64",
        elf::EM_ARM => "arm",
        elf::EM_RISCV => "riscv",
        elf::EM_PPC => "powerpc",
        elf::EM_PPC64 => "powerpc64",
        elf::EM_S390 => "s390",
        elf::EM_MIPS => "mips",
        elf::EM_SPARCV9 => "sparc64",
        elf::EM_LOONGARCH => "loongarch",
        elf::EM_BPF => "bpf",
        _ => return format!("ELF machine {m}"),
    };
    name.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;

    /// A reader that counts the bytes read through it.
    struct Counting<R> {
        inner: R,
        read: u64,
        calls: u64,
    }

    impl<R: Read> Read for Counting<R> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = self.inner.read(buf)?;
            self.read += n as u64;
            self.calls += 1;
            Ok(n)
        }
    }

    impl<R: Seek> Seek for Counting<R> {
        fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
            self.inner.seek(pos)
        }
    }

    /// A sized function of this test executable: (vaddr, size, file offset, the file).
    fn a_function_of_this_executable() -> (u64, u64, u64, PathBuf, Vec<u8>) {
        use object::{Object, ObjectSection, ObjectSymbol};
        let exe = std::env::current_exe().unwrap();
        let data = std::fs::read(&exe).unwrap();
        let obj = object::File::parse(&data[..]).unwrap();
        let (addr, size, off) = obj
            .symbols()
            .filter(|s| s.kind() == object::SymbolKind::Text && s.size() >= 64)
            .find_map(|s| {
                let sec = obj.section_by_index(s.section_index()?).ok()?;
                let (sec_off, _) = sec.file_range()?;
                Some((
                    s.address(),
                    s.size(),
                    sec_off + (s.address() - sec.address()),
                ))
            })
            .expect("a sized function symbol in the test executable");
        let exe_bytes = data[off as usize..(off + size) as usize].to_vec();
        (addr, size, off, exe, exe_bytes)
    }

    #[test]
    fn read_code_reads_the_headers_and_the_function_and_nothing_else() {
        let (vaddr, size, _, exe, expected) = a_function_of_this_executable();
        let mut counting = Counting {
            inner: File::open(&exe).unwrap(),
            read: 0,
            calls: 0,
        };
        let code = read_code_from(&mut counting, &exe, vaddr, size).unwrap();
        assert_eq!(code.bytes, expected);
        assert_eq!((code.vaddr, code.bitness), (vaddr, Bitness::Bits64));
        // File magic (16), the ELF header (64), the program headers (56 each), the code.
        let data = std::fs::read(&exe).unwrap();
        let phnum = u64::from(u16::from_le_bytes([data[56], data[57]]));
        let budget = 16 + 64 + 56 * phnum + size;
        assert!(
            counting.read <= budget,
            "read {} bytes in {} reads for a {size}-byte function; budget {budget}",
            counting.read,
            counting.calls
        );
        assert!(counting.read >= size);
    }

    #[test]
    fn file_offsets_map_to_the_addresses_of_this_executable() {
        let (vaddr, size, off, exe, _) = a_function_of_this_executable();
        assert_eq!(file_offset_to_vaddr(&exe, off).unwrap(), vaddr);
        let segs = Segments::read(&exe).unwrap();
        assert_eq!(segs.to_vaddr(off + size - 1), Some(vaddr + size - 1));
        assert!(segs.segments().iter().any(|s| s.executable));
        let e = file_offset_to_vaddr(&exe, u64::MAX).unwrap_err();
        assert!(
            matches!(
                e,
                Error::OffsetNotMapped {
                    offset: u64::MAX,
                    ..
                }
            ),
            "{e}"
        );
    }

    #[test]
    fn ranges_outside_executable_segments_too_long_or_empty_are_refused() {
        let (vaddr, _, _, exe, _) = a_function_of_this_executable();
        let e = read_code(&exe, vaddr, MAX_CODE_BYTES + 1).unwrap_err();
        assert!(e.to_string().contains("over the 1048576-byte limit"), "{e}");
        let e = read_code(&exe, vaddr, 0).unwrap_err();
        assert!(matches!(e, Error::EmptyRange { .. }), "{e}");
        let e = read_code(&exe, 0xdead_0000_0000, 16).unwrap_err();
        assert!(
            e.to_string().contains("no segment holds that address"),
            "{e}"
        );
        // The ELF header is mapped by the first PT_LOAD, which is read-only in a PIE
        // linked with separate code (the default on x86-64 Linux).
        let segs = Segments::read(&exe).unwrap();
        let ro = segs
            .segments()
            .iter()
            .find(|s| !s.executable)
            .expect("a non-executable PT_LOAD");
        let e = read_code(&exe, ro.vaddr, 16).unwrap_err();
        assert!(e.to_string().contains("not executable"), "{e}");
        let x = segs.segments().iter().find(|s| s.executable).unwrap();
        let e = read_code(&exe, x.vaddr + x.file_size - 4, 16).unwrap_err();
        assert!(e.to_string().contains("runs past the end"), "{e}");
    }

    #[test]
    fn fifos_directories_and_non_elf_files_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("fifo");
        assert!(std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
        // Opening a FIFO without a writer would block without O_NONBLOCK.
        let e = read_code(&fifo, 0x1000, 16).unwrap_err();
        assert!(matches!(e, Error::NotRegularFile { .. }), "{e}");
        let e = read_code(d.path(), 0x1000, 16).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
        let text = d.path().join("text");
        std::fs::write(&text, b"#!/bin/sh\necho this is not ELF\n").unwrap();
        let e = read_code(&text, 0x1000, 16).unwrap_err();
        assert!(matches!(e, Error::Elf { .. }), "{e}");
        let e = read_code(&d.path().join("missing"), 0x1000, 16).unwrap_err();
        assert!(matches!(e, Error::Io { .. }), "{e}");
    }

    /// A minimal ELF64 little-endian executable: header, one PT_LOAD (R+X) mapping the
    /// whole file at 0x400000, then `code`.
    fn tiny_elf64(machine: u16, code: &[u8]) -> Vec<u8> {
        let total = (64 + 56 + code.len()) as u64;
        elf64_with_segment(machine, code, 0, 0x400000, total)
    }

    /// [`tiny_elf64`] with the PT_LOAD's `p_offset`, `p_vaddr` and `p_filesz` given.
    fn elf64_with_segment(
        machine: u16,
        code: &[u8],
        p_offset: u64,
        p_vaddr: u64,
        p_filesz: u64,
    ) -> Vec<u8> {
        let mut f = vec![0u8; 64 + 56];
        f[..4].copy_from_slice(b"\x7fELF");
        f[4] = 2; // ELFCLASS64
        f[5] = 1; // little-endian
        f[6] = 1; // EV_CURRENT
        f[16..18].copy_from_slice(&2u16.to_le_bytes()); // ET_EXEC
        f[18..20].copy_from_slice(&machine.to_le_bytes());
        f[20..24].copy_from_slice(&1u32.to_le_bytes());
        f[32..40].copy_from_slice(&64u64.to_le_bytes()); // e_phoff
        f[52..54].copy_from_slice(&64u16.to_le_bytes()); // e_ehsize
        f[54..56].copy_from_slice(&56u16.to_le_bytes()); // e_phentsize
        f[56..58].copy_from_slice(&1u16.to_le_bytes()); // e_phnum
        let p = &mut f[64..];
        p[..4].copy_from_slice(&elf::PT_LOAD.to_le_bytes());
        p[4..8].copy_from_slice(&(elf::PF_R | elf::PF_X).to_le_bytes());
        p[8..16].copy_from_slice(&p_offset.to_le_bytes());
        p[16..24].copy_from_slice(&p_vaddr.to_le_bytes());
        p[24..32].copy_from_slice(&p_vaddr.to_le_bytes()); // p_paddr
        p[32..40].copy_from_slice(&p_filesz.to_le_bytes());
        p[40..48].copy_from_slice(&p_filesz.to_le_bytes()); // p_memsz
        f.extend_from_slice(code);
        f
    }

    #[test]
    fn a_minimal_x86_64_file_reads_back_and_other_machines_are_named() {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("tiny");
        std::fs::write(&path, tiny_elf64(elf::EM_X86_64, &[0x90, 0xc3])).unwrap();
        let code = read_code(&path, 0x400078, 2).unwrap();
        assert_eq!(code.bytes, [0x90, 0xc3]);
        assert_eq!(file_offset_to_vaddr(&path, 0x79).unwrap(), 0x400079);

        std::fs::write(&path, tiny_elf64(elf::EM_AARCH64, &[0; 8])).unwrap();
        let e = read_code(&path, 0x400078, 4).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("disassembly of aarch64 is not supported"),
            "{e}"
        );
        // Offsets still map: the machine matters only for decoding.
        assert_eq!(file_offset_to_vaddr(&path, 0x78).unwrap(), 0x400078);

        // Headers promising more bytes than the file has.
        let mut short = tiny_elf64(elf::EM_X86_64, &[0x90; 32]);
        short.truncate(short.len() - 16);
        std::fs::write(&path, short).unwrap();
        let e = read_code(&path, 0x400078, 32).unwrap_err();
        assert!(matches!(e, Error::Truncated { .. }), "{e}");
    }

    proptest::proptest! {
        /// Hostile program headers (offsets and sizes near 2^64, ranges past the end of
        /// the file) give errors, never a panic or a wrong read.
        #[test]
        fn hostile_segments_never_panic_or_read_outside_the_file(
            p_offset in proptest::prop_oneof![0u64..256, u64::MAX - 512.., proptest::num::u64::ANY],
            p_vaddr in proptest::prop_oneof![0x400000u64..0x400100, u64::MAX - 512.., proptest::num::u64::ANY],
            p_filesz in proptest::prop_oneof![0u64..512, u64::MAX - 512.., proptest::num::u64::ANY],
            vaddr_off in 0u64..300,
            len in 0u64..300,
        ) {
            let code: Vec<u8> = (0..64u8).collect();
            let file = elf64_with_segment(elf::EM_X86_64, &code, p_offset, p_vaddr, p_filesz);
            let d = tempfile::tempdir().unwrap();
            let path = d.path().join("hostile");
            std::fs::write(&path, &file).unwrap();
            let vaddr = p_vaddr.wrapping_add(vaddr_off);
            if let Ok(c) = read_code(&path, vaddr, len) {
                let at = (p_offset + vaddr_off) as usize;
                proptest::prop_assert_eq!(&c.bytes[..], &file[at..at + len as usize]);
            }
            let _ = file_offset_to_vaddr(&path, p_offset.wrapping_add(vaddr_off));
        }
    }
}
