//! This process's vDSO image, for `[vdso]` samples recorded on this
//! machine (the symbolizer names them, the unwinder reads its CFI).
//!
//! The vDSO is not a file: its bytes are read from `/proc/self/mem` at the
//! range `/proc/self/maps` names `[vdso]`. (Plain reads of our own memory
//! through procfs: no `unsafe` needed.) It is the kernel's, the same for
//! every 64-bit process; whether it is the one a session recorded is the
//! caller's to check (by build-id), since a report may run under another
//! kernel than the recording.

use std::io::{Read, Seek, SeekFrom};

use crate::Error;

/// The largest vDSO read (they are a few pages).
pub const MAX_VDSO_BYTES: u64 = 1 << 20;

fn err(what: impl Into<String>) -> Error {
    Error::Vdso { what: what.into() }
}

/// The vDSO's start and end in this process, from `/proc/self/maps`-format text.
fn find_range(maps: &str) -> Option<(u64, u64)> {
    let line = maps.lines().find(|l| l.trim_end().ends_with("[vdso]"))?;
    let range = line.split_whitespace().next()?;
    let (start, end) = range.split_once('-')?;
    Some((
        u64::from_str_radix(start, 16).ok()?,
        u64::from_str_radix(end, 16).ok()?,
    ))
}

/// The bytes of this process's vDSO (at most [`MAX_VDSO_BYTES`]).
///
/// # Errors
/// [`Error::Vdso`], saying which step failed.
pub fn read_own_vdso() -> Result<Vec<u8>, Error> {
    let maps = std::fs::read_to_string("/proc/self/maps")
        .map_err(|e| err(format!("/proc/self/maps: {e}")))?;
    let (start, end) = find_range(&maps).ok_or_else(|| err("no [vdso] line in /proc/self/maps"))?;
    let len = end.saturating_sub(start);
    if len > MAX_VDSO_BYTES {
        return Err(err(format!(
            "vDSO range too large: {len} bytes, over {MAX_VDSO_BYTES}"
        )));
    }
    let len = usize::try_from(len).map_err(|_| err("vDSO range too large"))?;
    let mut mem =
        std::fs::File::open("/proc/self/mem").map_err(|e| err(format!("/proc/self/mem: {e}")))?;
    mem.seek(SeekFrom::Start(start))
        .map_err(|e| err(format!("seek to {start:#x} in /proc/self/mem: {e}")))?;
    let mut data = vec![0; len];
    mem.read_exact(&mut data).map_err(|e| {
        err(format!(
            "read {len} bytes at {start:#x} from /proc/self/mem: {e}"
        ))
    })?;
    Ok(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_vdso_line() {
        let maps = "55d0c0a00000-55d0c0a21000 r--p 00000000 08:01 123 /usr/bin/x\n\
                    7ffd1b5f1000-7ffd1b5f3000 r-xp 00000000 00:00 0                          [vdso]\n";
        assert_eq!(find_range(maps), Some((0x7ffd1b5f1000, 0x7ffd1b5f3000)));
        assert_eq!(find_range("nothing"), None);
    }

    #[test]
    fn reads_own_vdso_as_elf() {
        let data = read_own_vdso().expect("this test process has a vDSO");
        assert_eq!(&data[..4], b"\x7fELF");
        assert!(crate::Segments::parse(&*data).unwrap().has_file_bytes());
    }
}
