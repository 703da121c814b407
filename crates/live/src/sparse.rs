//! Reading files by their data, not their size: a sparse file's holes
//! (`SEEK_DATA`/`SEEK_HOLE`) are skipped, never read or written.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

/// Bytes read at once.
const CHUNK: usize = 64 << 10;

/// The next run of data of `f` at or after `off` and before `end`:
/// `(start, stop)`, or None when only holes are left. Where the file
/// system cannot tell holes, the rest is one run.
pub(crate) fn next_data(f: &File, off: u64, end: u64) -> io::Result<Option<(u64, u64)>> {
    use rustix::fs::{seek, SeekFrom};
    if off >= end {
        return Ok(None);
    }
    let start = match seek(f, SeekFrom::Data(off)) {
        Ok(s) => s,
        Err(rustix::io::Errno::NXIO) => return Ok(None),
        Err(rustix::io::Errno::INVAL | rustix::io::Errno::OPNOTSUPP) => {
            return Ok(Some((off, end)))
        }
        Err(e) => return Err(e.into()),
    };
    if start >= end {
        return Ok(None);
    }
    let stop = match seek(f, SeekFrom::Hole(start)) {
        Ok(h) => h.min(end),
        Err(_) => end,
    };
    Ok(Some((start, stop.max(start))))
}

/// Calls `each(offset, bytes)` for the data of `f` in `[from, end)`, in
/// order, in pieces of at most 64 KiB (a piece after a skipped hole starts
/// past it); stops early when `each` says false or the file ends sooner.
/// Returns the offset read up to.
pub(crate) fn for_each_data(
    f: &File,
    from: u64,
    end: u64,
    mut each: impl FnMut(u64, &[u8]) -> bool,
) -> io::Result<u64> {
    let mut buf = vec![0u8; CHUNK];
    let mut off = from;
    while let Some((start, stop)) = next_data(f, off, end)? {
        let mut at = start;
        while at < stop {
            let want = ((stop - at) as usize).min(CHUNK);
            let n = f.read_at(&mut buf[..want], at)?;
            if n == 0 {
                return Ok(at);
            }
            if !each(at, &buf[..n]) {
                return Ok(at + n as u64);
            }
            at += n as u64;
        }
        off = stop;
    }
    Ok(end)
}

/// Copies the first `len` bytes of `src` into the empty `dst` with holes
/// where `src` has holes or all-zero 4 KiB blocks; fails (leaving `dst`
/// for the caller to remove) once more than `max_data` bytes of data
/// would be written. Returns the data bytes written.
pub(crate) fn copy_sparse(src: &File, dst: &File, len: u64, max_data: u64) -> io::Result<u64> {
    let mut written = 0u64;
    let mut err = None;
    for_each_data(src, 0, len, |at, bytes| {
        for (i, block) in bytes.chunks(4096).enumerate() {
            if block.iter().all(|&b| b == 0) {
                continue;
            }
            written += block.len() as u64;
            if written > max_data {
                err = Some(io::Error::other(format!(
                    "more than the {max_data} bytes of data its blocks on disk said"
                )));
                return false;
            }
            if let Err(e) = dst.write_all_at(block, at + (i * 4096) as u64) {
                err = Some(e);
                return false;
            }
        }
        true
    })?;
    if let Some(e) = err {
        return Err(e);
    }
    dst.set_len(len)?;
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn holes_and_zero_blocks_are_not_written() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("sparse");
        let f = File::create(&p).unwrap();
        f.set_len(511 << 20).unwrap();
        f.write_all_at(b"\x7fELF head", 0).unwrap();
        f.write_all_at(&[0u8; 8192], 1 << 20).unwrap(); // written zeros
        f.write_all_at(b"tail", (511 << 20) - 4).unwrap();
        drop(f);
        let src = File::open(&p).unwrap();
        let q = d.path().join("copy");
        let dst = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&q)
            .unwrap();
        let n = copy_sparse(&src, &dst, 511 << 20, 1 << 20).unwrap();
        assert_eq!(n, 8192, "two 4 KiB blocks of data");
        let m = std::fs::metadata(&q).unwrap();
        assert_eq!(m.len(), 511 << 20);
        assert!(
            m.blocks() * 512 <= 64 << 10,
            "{} bytes on disk",
            m.blocks() * 512
        );
        let back = std::fs::read(&q).unwrap();
        assert_eq!(&back[..9], b"\x7fELF head");
        assert_eq!(&back[back.len() - 4..], b"tail");
        // A bound on the data written holds.
        let q2 = d.path().join("copy2");
        let dst = File::create(&q2).unwrap();
        let e = copy_sparse(&src, &dst, 511 << 20, 4096).unwrap_err();
        assert!(e.to_string().contains("more than"), "{e}");
    }

    #[test]
    fn data_pieces_skip_holes() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("sparse");
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&p)
            .unwrap();
        f.set_len(64 << 20).unwrap();
        f.write_all_at(b"a\n", 0).unwrap();
        f.write_all_at(b"b\n", 32 << 20).unwrap();
        let mut seen = 0u64;
        let mut pieces = Vec::new();
        let to = for_each_data(&f, 0, 64 << 20, |at, b| {
            seen += b.len() as u64;
            pieces.push(at);
            true
        })
        .unwrap();
        assert_eq!(to, 64 << 20);
        assert!(
            seen <= 2 << 20,
            "read {seen} bytes of a 64 MiB file with 2 of data"
        );
        assert_eq!(pieces[0], 0);
        assert!(pieces
            .iter()
            .any(|&a| (32 << 20..(32 << 20) + 4096).contains(&a)));
    }
}
