//! The one checked opener for files a user names for output (`profreport
//! -o`, `profctl archive -o`).
//!
//! Root writes where the user says, in directories other users may write
//! to (`/tmp`), so the path may hold what someone else planted. The rules:
//!
//! - **Our own descriptors by name**: `/dev/stdout`, `/dev/stderr`,
//!   `/dev/fd/N` and `/proc/self/fd/N` (what `-o >(gzip > x.gz)` passes)
//!   are the descriptors the invoking shell set up, whatever they lead to:
//!   1 and 2 are written as they are (appending keeps `>>` an append);
//!   another N is reopened through `/proc/self/fd/N` with `O_APPEND`.
//! - **No link is followed anywhere else** (`O_NOFOLLOW`): a link planted
//!   at `/tmp/report.txt` pointing at `/etc/shadow` is refused untouched.
//! - **Streams the user named are written, not replaced**: a character
//!   device (`/dev/null`; only root can make one), or a FIFO, pipe or
//!   socket of the user's own. Opening never blocks on a FIFO planted by
//!   someone else; a FIFO of the user's own with no reader yet is waited
//!   for, as a shell's `>` would.
//! - **A regular file must be the user's own**; an absent one is created
//!   with `O_EXCL` (a file planted between the check and the create is
//!   then met and checked, not truncated blindly).
//! - Block devices and directories are refused.
//!
//! Checks are made on the descriptor, after the open, so nothing can be
//! swapped between a check and the use.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::Path;

use crate::Refusal;

/// What a path named for output is, opened for writing and checked.
#[derive(Debug)]
pub enum OutputPath {
    /// Nothing is there yet.
    Absent,
    /// A regular file of the user's own, not truncated.
    File(File),
    /// Somewhere to stream to: a device, pipe, FIFO or one of our own
    /// descriptors. It is written as it is: never truncated, renamed over
    /// or replaced.
    Stream(Output),
}

/// An output opened by [`open_output`] or [`create_output`].
#[derive(Debug)]
pub enum Output {
    /// A file (regular, device, pipe or FIFO).
    File(File),
    /// Our standard output.
    Stdout(io::Stdout),
    /// Our standard error.
    Stderr(io::Stderr),
}

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Output::File(f) => f.write(buf),
            Output::Stdout(s) => s.write(buf),
            Output::Stderr(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Output::File(f) => f.flush(),
            Output::Stdout(s) => s.flush(),
            Output::Stderr(s) => s.flush(),
        }
    }
}

/// The descriptor a path names by convention (`/dev/stdout`, `/dev/fd/3`,
/// `/proc/self/fd/3`), if it is one of those spellings.
pub fn named_descriptor(path: &Path) -> Option<u32> {
    let s = path.to_str()?;
    match s {
        "/dev/stdout" => return Some(1),
        "/dev/stderr" => return Some(2),
        _ => {}
    }
    let n = s
        .strip_prefix("/dev/fd/")
        .or_else(|| s.strip_prefix("/proc/self/fd/"))?;
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    n.parse().ok()
}

/// Opens what `path` names for output without creating or truncating
/// anything, and checks it (the rules in the module's doc).
///
/// # Errors
/// [`Refusal::Link`] or [`Refusal::Owner`] inside an `io::Error`, an
/// `InvalidInput` error for a block device, or the system's error
/// (`IsADirectory`, `PermissionDenied`, ...).
pub fn open_output(path: &Path) -> io::Result<OutputPath> {
    if let Some(fd) = named_descriptor(path) {
        return own_descriptor(path, fd).map(OutputPath::Stream);
    }
    let opened = OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path);
    let file = match opened {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(OutputPath::Absent),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(Refusal::Link { path: path.into() }.into())
        }
        // A FIFO with no reader yet: wait for one only if it is ours.
        Err(e) if e.raw_os_error() == Some(libc::ENXIO) => return fifo_of_ours(path),
        Err(e) => return Err(e),
    };
    check_opened(path, file)
}

/// [`open_output`], creating an absent file (mode 0666 less the umask) and
/// truncating a regular one: what `-o FILE` means for a report.
///
/// # Errors
/// As [`open_output`], and the system's error creating or truncating.
pub fn create_output(path: &Path) -> io::Result<Output> {
    // Two tries: an absent file may be planted between the check and the
    // exclusive create; the second look checks what was planted.
    for _ in 0..2 {
        match open_output(path)? {
            OutputPath::Stream(s) => return Ok(s),
            OutputPath::File(f) => {
                f.set_len(0)?;
                return Ok(Output::File(f));
            }
            OutputPath::Absent => {
                match OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
                    .open(path)
                {
                    Ok(f) => return Ok(Output::File(f)),
                    Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                    Err(e) => return Err(e),
                }
            }
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        "created by someone else while being created",
    ))
}

/// Our descriptor `fd` named as `path`.
fn own_descriptor(path: &Path, fd: u32) -> io::Result<Output> {
    match fd {
        1 => return Ok(Output::Stdout(io::stdout())),
        2 => return Ok(Output::Stderr(io::stderr())),
        _ => {}
    }
    // Through /proc, which reopens what descriptor N is; appending, so
    // a `3>>log` stays an append and a `3>log` (empty) is written from 0.
    let reopened = OpenOptions::new()
        .append(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(format!("/proc/self/fd/{fd}"))
        .map_err(|e| {
            if e.kind() == io::ErrorKind::NotFound {
                io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("descriptor {fd} is not open in this process"),
                )
            } else {
                e
            }
        })?;
    match check_opened(path, reopened)? {
        OutputPath::File(f) => Ok(Output::File(f)),
        OutputPath::Stream(s) => Ok(s),
        OutputPath::Absent => unreachable!("check_opened never says absent"),
    }
}

/// A FIFO at `path` with no reader: opened blocking (waiting for a
/// reader) if it is ours, refused if not; re-checked on the descriptor.
fn fifo_of_ours(path: &Path) -> io::Result<OutputPath> {
    let meta = std::fs::symlink_metadata(path)?;
    let me = rustix::process::geteuid().as_raw();
    if !meta.file_type().is_fifo() {
        return Err(io::Error::from_raw_os_error(libc::ENXIO));
    }
    if meta.uid() != me {
        return Err(Refusal::Owner {
            path: path.into(),
            owner: meta.uid(),
            wanted: me,
        }
        .into());
    }
    let f = OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NOCTTY | libc::O_CLOEXEC)
        .open(path)?;
    check_opened(path, f)
}

/// The checks on an opened descriptor; a stream is made blocking again.
fn check_opened(path: &Path, file: File) -> io::Result<OutputPath> {
    let meta = file.metadata()?;
    let ft = meta.file_type();
    let me = rustix::process::geteuid().as_raw();
    let owner_is_me = || -> io::Result<()> {
        if meta.uid() == me {
            Ok(())
        } else {
            Err(Refusal::Owner {
                path: path.into(),
                owner: meta.uid(),
                wanted: me,
            }
            .into())
        }
    };
    if ft.is_file() {
        owner_is_me()?;
        return Ok(OutputPath::File(file));
    }
    if ft.is_fifo() || ft.is_socket() {
        owner_is_me()?;
    } else if !ft.is_char_device() {
        // A block device: a report is never written over a disk.
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "a block device: reports are not written over disks",
        ));
    }
    let flags = rustix::fs::fcntl_getfl(&file)?;
    rustix::fs::fcntl_setfl(&file, flags - rustix::fs::OFlags::NONBLOCK)?;
    Ok(OutputPath::Stream(Output::File(file)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn refusal(e: &io::Error) -> &Refusal {
        Refusal::of(e).unwrap_or_else(|| panic!("not a refusal: {e}"))
    }

    #[test]
    fn descriptor_names_are_recognised_and_nothing_else() {
        for (p, fd) in [
            ("/dev/stdout", Some(1)),
            ("/dev/stderr", Some(2)),
            ("/dev/fd/63", Some(63)),
            ("/proc/self/fd/4", Some(4)),
            ("/dev/fd/", None),
            ("/dev/fd/6x", None),
            ("/dev/fd/../stdout", None),
            ("/proc/1/fd/3", None),
            ("/dev/null", None),
        ] {
            assert_eq!(named_descriptor(Path::new(p)), fd, "{p}");
        }
    }

    #[test]
    fn dev_null_is_a_stream_and_is_not_replaced() {
        let mut out = create_output(Path::new("/dev/null")).unwrap();
        out.write_all(b"report").unwrap();
        assert!(std::fs::metadata("/dev/null")
            .unwrap()
            .file_type()
            .is_char_device());
    }

    #[test]
    fn an_absent_file_is_created_and_an_own_file_truncated() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("out.txt");
        assert!(matches!(open_output(&p).unwrap(), OutputPath::Absent));
        create_output(&p).unwrap().write_all(b"long text").unwrap();
        create_output(&p).unwrap().write_all(b"short").unwrap();
        assert_eq!(std::fs::read_to_string(&p).unwrap(), "short");
    }

    #[test]
    fn a_planted_link_is_refused_and_its_target_untouched() {
        let d = tempfile::tempdir().unwrap();
        let target = d.path().join("precious");
        std::fs::write(&target, "keep").unwrap();
        let link = d.path().join("out.txt");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let e = create_output(&link).unwrap_err();
        assert!(matches!(refusal(&e), Refusal::Link { .. }), "{e}");
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
    }

    #[test]
    fn a_fifo_of_ours_with_a_reader_is_streamed_to() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("fifo");
        rustix::fs::mkfifoat(rustix::fs::CWD, &p, rustix::fs::Mode::from_raw_mode(0o600)).unwrap();
        let reader = {
            let p = p.clone();
            std::thread::spawn(move || {
                let mut s = String::new();
                File::open(p).unwrap().read_to_string(&mut s).unwrap();
                s
            })
        };
        // No reader may be there yet: the open waits for it.
        let mut out = create_output(&p).unwrap();
        assert!(matches!(out, Output::File(_)));
        out.write_all(b"through the fifo").unwrap();
        drop(out);
        assert_eq!(reader.join().unwrap(), "through the fifo");
        assert!(std::fs::symlink_metadata(&p).unwrap().file_type().is_fifo());
    }

    /// Root writing where a throwaway user (uid 65534) planted a file or a
    /// FIFO of their own: refused, the file untouched.
    #[test]
    fn foreign_files_and_fifos_are_refused() {
        let d = tempfile::tempdir().unwrap();
        let file = d.path().join("planted.txt");
        std::fs::write(&file, "theirs").unwrap();
        let fifo = d.path().join("planted.fifo");
        rustix::fs::mkfifoat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::Mode::from_raw_mode(0o666),
        )
        .unwrap();
        for p in [&file, &fifo] {
            if std::os::unix::fs::lchown(p, Some(65534), Some(65534)).is_err() {
                return; // not root: nobody else's file can be made here
            }
        }
        for p in [&file, &fifo] {
            let e = create_output(p).unwrap_err();
            assert!(
                matches!(refusal(&e), Refusal::Owner { owner: 65534, .. }),
                "{}: {e}",
                p.display()
            );
        }
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "theirs");
    }

    #[test]
    fn a_directory_is_refused() {
        let d = tempfile::tempdir().unwrap();
        let e = create_output(d.path()).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::IsADirectory, "{e}");
    }

    #[test]
    fn an_unopened_descriptor_name_says_so() {
        let e = create_output(Path::new("/dev/fd/999")).unwrap_err();
        assert!(e.to_string().contains("descriptor 999 is not open"), "{e}");
    }
}
