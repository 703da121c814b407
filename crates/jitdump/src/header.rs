//! The file header.

use crate::Error;

/// The magic, "JiTD" read as a little-endian `u32` (bytes `44 54 69 4a`).
pub const MAGIC: u32 = 0x4A69_5444;
/// The size of the header this crate reads (and the smallest `total_size`).
pub const HEADER_SIZE: usize = 40;
/// The largest header `total_size` accepted (records start there).
pub const MAX_HEADER_SIZE: u32 = 4096;

/// The file header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// The format version (1 today; 0 is refused).
    pub version: u32,
    /// The header's size: the first record starts at this offset.
    pub total_size: u32,
    /// The ELF machine of the code (62: x86-64).
    pub elf_mach: u32,
    /// The process that wrote the dump.
    pub pid: u32,
    /// When the dump was started.
    pub timestamp: u64,
    /// Flags; bit 0: timestamps are the architecture's counter, not
    /// `CLOCK_MONOTONIC`.
    pub flags: u64,
}

impl Header {
    /// Parses the header from the file's first bytes (at least
    /// [`HEADER_SIZE`]; the bytes up to `total_size` need not be there).
    pub fn parse(bytes: &[u8]) -> Result<Header, Error> {
        if let Some(magic) = bytes.first_chunk::<4>() {
            let magic = u32::from_le_bytes(*magic);
            if magic == MAGIC.swap_bytes() {
                return Err(Error::OtherEndian);
            }
            if magic != MAGIC {
                return Err(Error::NotJitdump);
            }
        }
        let Some(h) = bytes.first_chunk::<HEADER_SIZE>() else {
            return Err(Error::BadHeader(format!(
                "{} bytes, shorter than the {HEADER_SIZE}-byte header",
                bytes.len()
            )));
        };
        let u32_at = |at: usize| u32::from_le_bytes([h[at], h[at + 1], h[at + 2], h[at + 3]]);
        let u64_at = |at: usize| u64::from(u32_at(at)) | u64::from(u32_at(at + 4)) << 32;
        let header = Header {
            version: u32_at(4),
            total_size: u32_at(8),
            elf_mach: u32_at(12),
            pid: u32_at(20),
            timestamp: u64_at(24),
            flags: u64_at(32),
        };
        if header.version == 0 {
            return Err(Error::BadHeader("version 0".into()));
        }
        if !(HEADER_SIZE as u32..=MAX_HEADER_SIZE).contains(&header.total_size) {
            return Err(Error::BadHeader(format!(
                "header size {} (not {HEADER_SIZE}..={MAX_HEADER_SIZE})",
                header.total_size
            )));
        }
        Ok(header)
    }

    /// Whether the timestamps are the architecture's counter (flags bit 0)
    /// rather than `CLOCK_MONOTONIC`.
    pub fn arch_timestamp(&self) -> bool {
        self.flags & 1 != 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(version: u32, total_size: u32, flags: u64) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&MAGIC.to_le_bytes());
        b.extend_from_slice(&version.to_le_bytes());
        b.extend_from_slice(&total_size.to_le_bytes());
        b.extend_from_slice(&62u32.to_le_bytes());
        b.extend_from_slice(&0u32.to_le_bytes());
        b.extend_from_slice(&1234u32.to_le_bytes());
        b.extend_from_slice(&99u64.to_le_bytes());
        b.extend_from_slice(&flags.to_le_bytes());
        b
    }

    #[test]
    fn parses_fields_and_flag() {
        let h = Header::parse(&header(1, 40, 1)).unwrap();
        assert_eq!(
            h,
            Header {
                version: 1,
                total_size: 40,
                elf_mach: 62,
                pid: 1234,
                timestamp: 99,
                flags: 1
            }
        );
        assert!(h.arch_timestamp());
        assert!(!Header::parse(&header(1, 4096, 2)).unwrap().arch_timestamp());
    }

    #[test]
    fn refuses_bad_headers() {
        assert!(matches!(
            Header::parse(&header(0, 40, 0)),
            Err(Error::BadHeader(_))
        ));
        for size in [0, 39, 4097, u32::MAX] {
            assert!(matches!(
                Header::parse(&header(1, size, 0)),
                Err(Error::BadHeader(_))
            ));
        }
        let mut swapped = header(1, 40, 0);
        swapped[..4].reverse();
        assert!(matches!(Header::parse(&swapped), Err(Error::OtherEndian)));
        assert!(matches!(
            Header::parse(b"\x7fELF and more bytes than forty, surely, yes"),
            Err(Error::NotJitdump)
        ));
        assert!(matches!(
            Header::parse(&header(1, 40, 0)[..39]),
            Err(Error::BadHeader(_))
        ));
        assert!(matches!(Header::parse(b""), Err(Error::BadHeader(_))));
    }
}
