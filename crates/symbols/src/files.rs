//! Reading the files a report names: binaries, debug files, kallsyms and
//! perf maps, which may belong to untrusted users. One rule for all:
//! opened non-blocking (a FIFO open returns at once), checked on the
//! opened descriptor to be a regular file, refused when larger than the
//! caller's limit or when mostly holes (a sparse 1 GiB "binary" would cost
//! 1 GB of memory), and read no further than the size it had when opened.
//! The checks are `profkit-untrusted`'s ([`open_untrusted`]).

use profkit_untrusted::{open_untrusted, Policy};
use std::io::{self, Read};
use std::path::Path;

/// Largest binary or debug file read (whole) for symbols.
pub const MAX_BINARY_BYTES: u64 = 4 << 30;
/// Largest kallsyms or perf map read.
pub const MAX_TEXT_BYTES: u64 = 256 << 20;

/// Opens `path` for reading if it is a regular file (procfs files are:
/// their size says 0, so the caller bounds what it reads).
pub fn open_regular(path: &Path) -> io::Result<(std::fs::File, std::fs::Metadata)> {
    let o = open_untrusted(path, &Policy::regular())?;
    Ok((o.file, o.meta))
}

/// Opens the regular file `path` if it is at most `max` bytes and not
/// mostly holes.
pub fn open_bounded(path: &Path, max: u64) -> io::Result<(std::fs::File, std::fs::Metadata)> {
    let o = open_untrusted(path, &Policy::regular().max_bytes(max).dense())?;
    Ok((o.file, o.meta))
}

/// Opens `name` in the held directory `dir` (the directory `dir_path`, for messages)
/// for reading, as [`open_untrusted`] would: non-blocking, not a symbolic link
/// (`O_NOFOLLOW`), then checked on the descriptor to be a regular file of at most `max`
/// bytes owned by `owner` (the symbol index's entries, `index/`).
pub fn open_in_dir(
    dir: &std::fs::File,
    dir_path: &Path,
    name: &str,
    max: u64,
    owner: u32,
) -> io::Result<(std::fs::File, std::fs::Metadata)> {
    use rustix::fs::{Mode, OFlags};
    let flags =
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let file = match rustix::fs::openat(dir, name, flags, Mode::empty()) {
        Ok(fd) => std::fs::File::from(fd),
        Err(e) if e == rustix::io::Errno::LOOP => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a symbolic link (not followed)",
            ))
        }
        Err(e) => return Err(e.into()),
    };
    let meta = file.metadata()?;
    let path = dir_path.join(name);
    profkit_untrusted::check(&path, &meta, &Policy::regular().max_bytes(max).owner(owner))?;
    Ok((file, meta))
}

/// Reads the regular file `path` whole, if [`open_bounded`] accepts it.
pub fn read_regular(path: &Path, max: u64) -> io::Result<Vec<u8>> {
    let (f, m) = open_bounded(path, max)?;
    let len = m.len();
    let mut data = Vec::with_capacity(len as usize);
    f.take(len).read_to_end(&mut data)?;
    Ok(data)
}

/// [`read_regular`] as UTF-8 text (lossy).
pub fn read_regular_text(path: &Path, max: u64) -> io::Result<String> {
    let data = read_regular(path, max)?;
    Ok(String::from_utf8(data)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifos_devices_sparse_and_oversized_files_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("fifo");
        assert!(std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
        let e = read_regular(&fifo, MAX_BINARY_BYTES).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
        let e = read_regular(Path::new("/dev/zero"), MAX_BINARY_BYTES).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
        let sparse = d.path().join("sparse");
        std::fs::File::create(&sparse)
            .unwrap()
            .set_len(1 << 30)
            .unwrap();
        let e = read_regular(&sparse, MAX_BINARY_BYTES).unwrap_err();
        assert!(e.to_string().contains("sparse"), "{e}");
        let small = d.path().join("small");
        std::fs::write(&small, b"0123456789").unwrap();
        assert_eq!(read_regular(&small, 10).unwrap(), b"0123456789");
        let e = read_regular(&small, 9).unwrap_err();
        assert!(e.to_string().contains("over the 9-byte limit"), "{e}");
    }
}
