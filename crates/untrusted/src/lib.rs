//! The one checked opener for files any local user may control, and the
//! one time-boxed worker ([`TimeBox`]) for reads of them that may hang.
//!
//! profkit runs as root and reads what every user controls: binaries at
//! the paths processes mapped, debug files found by build-id, source files
//! a binary's DWARF names, perf maps in `/tmp`, session files and perf.data
//! files handed to a report. Each such open goes through
//! [`open_untrusted`] with a [`Policy`] saying what the caller accepts,
//! so the rules are written once:
//!
//! - **Never blocks on open**: `O_NONBLOCK | O_NOCTTY` (a FIFO planted at a
//!   binary's path opens at once and is then refused; no terminal becomes
//!   the daemon's).
//! - **No planted link** where the policy says so ([`Policy::no_follow`]:
//!   `O_NOFOLLOW` on the last component, `ELOOP` reported as a link).
//! - **Checked on the descriptor, not the path** (no race between a check
//!   and the open): a regular file, or also a character device or FIFO where
//!   the caller named it itself ([`Policy::devices`]: `-o /dev/null`).
//! - **Owner** ([`Policy::owner`]): a perf map must belong to its process's
//!   user ([`Policy::owner_or_root`] also takes root's).
//! - **Size**: at most [`Policy::max_bytes`]; and not mostly holes
//!   ([`Policy::dense`]: a sparse 1 GiB "binary" would cost 1 GB to read).
//! - **Time box** ([`Policy::time_box`]): an open that could hang (a FUSE
//!   or NFS path) runs on a worker and is given up after the time; the
//!   worker is abandoned to it, and once [`MAX_STUCK`] are stuck, further
//!   time-boxed opens are refused at once rather than pile up threads.
//!   The worker is the crate's one time-boxed worker type, [`TimeBox`],
//!   which the sync stage's readers of mapped binaries use too.
//!
//! Every refusal is an `io::Error` whose inner error is a typed
//! [`Refusal`] naming what was wrong, so callers that speak `io::Result`
//! keep doing so and callers that care can match the reason. Like the
//! system's own errors, its text leaves the path to the caller (which puts
//! it in front, as for `NotFound`); the path is in the refusal's fields.
//!
//! ```
//! use profkit_untrusted::{open_untrusted, Policy, Refusal};
//! let policy = Policy::regular().no_follow().max_bytes(1 << 20);
//! let err = open_untrusted("/dev/zero".as_ref(), &policy).unwrap_err();
//! assert!(matches!(Refusal::of(&err), Some(Refusal::NotRegular { .. })));
//! let ok = open_untrusted("/etc/hostname".as_ref(), &Policy::regular());
//! assert!(ok.map_or(true, |o| o.meta.is_file()));
//! ```
//!
//! Files a user names for output (`-o`) have their own opener,
//! [`create_output`] and [`open_output`]: our own descriptors by name,
//! devices and FIFOs the user named, no planted link, no foreign file.
//!
//! # Not for
//!
//! Files profkit creates itself (the session directory's own files are
//! opened under its held descriptor by `profkit-daemon`), and `/proc` and
//! `/sys` pseudo-files whose size says 0 (accepted as regular files: their
//! readers bound what they read).

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod output;
pub use output::{create_output, named_descriptor, open_output, Output, OutputPath};

use std::fs::{File, Metadata};
use std::io::{self, Read};
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::LazyLock;
use std::time::Duration;

mod timebox;

pub use timebox::{Late, Running, TimeBox};

/// Files above this size must have at least half their bytes on disk when
/// [`Policy::dense`] is asked for.
pub const SPARSE_FROM: u64 = 64 << 20;

/// Time-boxed opens given up and still stuck, past which further
/// time-boxed opens are refused at once.
pub const MAX_STUCK: usize = 8;

/// What an open accepts. Start from [`Policy::regular`] and add rules.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Policy {
    no_follow: bool,
    devices: bool,
    max_bytes: Option<u64>,
    dense: bool,
    owner: Option<u32>,
    root_too: bool,
    time_box: Option<Duration>,
}

impl Policy {
    /// A regular file, links followed, any size and owner.
    pub fn regular() -> Policy {
        Policy::default()
    }

    /// Refuses a symbolic link as the last component (`O_NOFOLLOW`).
    pub fn no_follow(mut self) -> Policy {
        self.no_follow = true;
        self
    }

    /// Also accepts a character device or FIFO: a file the user named on
    /// the command line (`-o /dev/null`, `-o >(gzip)`); size rules then do
    /// not apply to it.
    pub fn devices(mut self) -> Policy {
        self.devices = true;
        self
    }

    /// At most `max` bytes.
    pub fn max_bytes(mut self, max: u64) -> Policy {
        self.max_bytes = Some(max);
        self
    }

    /// Refuses a file above [`SPARSE_FROM`] bytes with less than half of
    /// them on disk (mostly holes).
    pub fn dense(mut self) -> Policy {
        self.dense = true;
        self
    }

    /// Owned by `uid` (a perf map must be its process's user's own: not
    /// even a root-owned file, which a hard link could have put there).
    pub fn owner(mut self, uid: u32) -> Policy {
        self.owner = Some(uid);
        self.root_too = false;
        self
    }

    /// Owned by `uid` or by root.
    pub fn owner_or_root(mut self, uid: u32) -> Policy {
        self.owner = Some(uid);
        self.root_too = true;
        self
    }

    /// The open (and its checks) run on a worker and are given up after
    /// `limit`.
    pub fn time_box(mut self, limit: Duration) -> Policy {
        self.time_box = Some(limit);
        self
    }
}

/// Why a file was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Refusal {
    /// A symbolic link where none is accepted.
    #[error("a symbolic link (not followed)")]
    Link {
        /// The path opened.
        path: PathBuf,
    },
    /// A FIFO, device, socket or directory.
    #[error("not a regular file (a FIFO, device or directory)")]
    NotRegular {
        /// The path opened.
        path: PathBuf,
    },
    /// Larger than the policy's limit.
    #[error("{len} bytes, over the {max}-byte limit")]
    TooLarge {
        /// The path opened.
        path: PathBuf,
        /// Its size.
        len: u64,
        /// The limit.
        max: u64,
    },
    /// Mostly holes.
    #[error("a sparse file: {len} bytes of which {on_disk} on disk")]
    Sparse {
        /// The path opened.
        path: PathBuf,
        /// Its size.
        len: u64,
        /// Bytes allocated on disk.
        on_disk: u64,
    },
    /// Owned by another user than the one required.
    #[error("owned by uid {owner}, not by uid {wanted}")]
    Owner {
        /// The path opened.
        path: PathBuf,
        /// Its owner.
        owner: u32,
        /// Who should own it.
        wanted: u32,
    },
    /// The open did not finish within the time box.
    #[error("opening it took over {after:?} (given up)")]
    TimedOut {
        /// The path opened.
        path: PathBuf,
        /// The time box.
        after: Duration,
    },
    /// Too many earlier time-boxed opens are still stuck.
    #[error("not opened: {stuck} earlier opens are still stuck")]
    TooManyStuck {
        /// The path not opened.
        path: PathBuf,
        /// Opens stuck.
        stuck: usize,
    },
}

impl Refusal {
    /// The refusal inside an error from [`open_untrusted`], if it is one
    /// (else the error is the system's, e.g. `NotFound`).
    pub fn of(e: &io::Error) -> Option<&Refusal> {
        e.get_ref()?.downcast_ref::<Refusal>()
    }

    fn kind(&self) -> io::ErrorKind {
        match self {
            Refusal::Owner { .. } => io::ErrorKind::PermissionDenied,
            Refusal::TimedOut { .. } | Refusal::TooManyStuck { .. } => io::ErrorKind::TimedOut,
            _ => io::ErrorKind::InvalidInput,
        }
    }
}

impl From<Refusal> for io::Error {
    fn from(r: Refusal) -> io::Error {
        io::Error::new(r.kind(), r)
    }
}

/// An opened file with its metadata, read on the descriptor.
#[derive(Debug)]
pub struct Opened {
    /// The file.
    pub file: File,
    /// Its metadata when opened.
    pub meta: Metadata,
}

impl Opened {
    /// Reads the whole file, no further than the size it had when opened
    /// (a file growing meanwhile costs nothing more).
    ///
    /// # Errors
    /// Read errors.
    pub fn read_all(self) -> io::Result<Vec<u8>> {
        let len = self.meta.len();
        let mut data = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
        self.file.take(len).read_to_end(&mut data)?;
        Ok(data)
    }
}

/// Opens `path` for reading under `policy` (see the crate docs).
///
/// # Errors
/// The system's error (`NotFound`, `PermissionDenied`, …), or a
/// [`Refusal`] inside an `io::Error` ([`Refusal::of`]).
pub fn open_untrusted(path: &Path, policy: &Policy) -> io::Result<Opened> {
    let Some(limit) = policy.time_box else {
        return open_now(path, policy);
    };
    static OPENS: LazyLock<TimeBox> = LazyLock::new(|| TimeBox::new("profkit-open", MAX_STUCK, 0));
    let (p, pol) = (path.to_owned(), policy.clone());
    match OPENS.run(limit, move || open_now(&p, &pol)) {
        Ok(r) => r,
        Err(Late::TimedOut) => Err(Refusal::TimedOut {
            path: path.to_owned(),
            after: limit,
        }
        .into()),
        Err(Late::TooManyStuck { stuck }) => Err(Refusal::TooManyStuck {
            path: path.to_owned(),
            stuck,
        }
        .into()),
        // The worker ended without an answer (it panicked), or none started.
        Err(Late::NoWorker) => Err(io::Error::other(format!(
            "{}: the open failed on its worker",
            path.display()
        ))),
    }
}

fn open_now(path: &Path, policy: &Policy) -> io::Result<Opened> {
    let mut flags = libc::O_NONBLOCK | libc::O_NOCTTY;
    if policy.no_follow {
        flags |= libc::O_NOFOLLOW;
    }
    let file = match std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(flags)
        .open(path)
    {
        Ok(f) => f,
        Err(e) if policy.no_follow && e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(Refusal::Link {
                path: path.to_owned(),
            }
            .into())
        }
        Err(e) => return Err(e),
    };
    let meta = file.metadata()?;
    check(path, &meta, policy)?;
    Ok(Opened { file, meta })
}

/// The policy's checks on metadata read from a descriptor (for a file
/// opened otherwise, e.g. under a held directory).
///
/// # Errors
/// The [`Refusal`], inside an `io::Error`.
pub fn check(path: &Path, meta: &Metadata, policy: &Policy) -> io::Result<()> {
    let t = meta.file_type();
    let device = t.is_char_device() || t.is_fifo();
    if !(t.is_file() || (policy.devices && device)) {
        return Err(Refusal::NotRegular {
            path: path.to_owned(),
        }
        .into());
    }
    if let Some(wanted) = policy.owner {
        if meta.uid() != wanted && !(policy.root_too && meta.uid() == 0) {
            return Err(Refusal::Owner {
                path: path.to_owned(),
                owner: meta.uid(),
                wanted,
            }
            .into());
        }
    }
    if !t.is_file() {
        return Ok(());
    }
    let len = meta.len();
    if let Some(max) = policy.max_bytes {
        if len > max {
            return Err(Refusal::TooLarge {
                path: path.to_owned(),
                len,
                max,
            }
            .into());
        }
    }
    let on_disk = meta.blocks().saturating_mul(512);
    if policy.dense && len > SPARSE_FROM && on_disk < len / 2 {
        return Err(Refusal::Sparse {
            path: path.to_owned(),
            len,
            on_disk,
        }
        .into());
    }
    Ok(())
}

/// The bytes of `file` (of length `len`) that are data, not holes, as
/// `SEEK_DATA`/`SEEK_HOLE` say, counted over at most `max_extents` data
/// extents (the rest of the file is then taken as data). A file system
/// without hole support reports the whole file as data. Unlike the blocks
/// `stat` counts, this does not depend on compression or on data not yet
/// written out (ZFS counts those late).
///
/// # Errors
/// Seek errors other than "no more data".
pub fn data_bytes(file: &File, len: u64, max_extents: usize) -> io::Result<u64> {
    use rustix::fs::{seek, SeekFrom};
    // The file's offset is where it was, after.
    let pos = seek(file, SeekFrom::Current(0))?;
    let r = count_data(file, len, max_extents);
    seek(file, SeekFrom::Start(pos))?;
    r
}

fn count_data(file: &File, len: u64, max_extents: usize) -> io::Result<u64> {
    use rustix::fs::{seek, SeekFrom};
    let mut data = 0u64;
    let mut at = 0u64;
    for _ in 0..max_extents {
        if at >= len {
            return Ok(data);
        }
        let start = match seek(file, SeekFrom::Data(at)) {
            Ok(s) => s,
            // No data past `at`.
            Err(rustix::io::Errno::NXIO) => return Ok(data),
            Err(e) => return Err(e.into()),
        };
        let end = seek(file, SeekFrom::Hole(start))
            .map_err(io::Error::from)?
            .min(len);
        data += end.saturating_sub(start);
        at = end;
    }
    Ok(data + len.saturating_sub(at))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn refusal(path: &Path, policy: &Policy) -> Refusal {
        let e = open_untrusted(path, policy).unwrap_err();
        Refusal::of(&e)
            .cloned()
            .unwrap_or_else(|| panic!("not a refusal: {e}"))
    }

    #[test]
    fn fifos_links_devices_sparse_large_and_foreign_files_are_refused_without_blocking() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("fifo");
        assert!(std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
        // Would block forever without O_NONBLOCK: no writer.
        assert!(matches!(
            refusal(&fifo, &Policy::regular()),
            Refusal::NotRegular { .. }
        ));
        // A FIFO the user named is accepted where devices are.
        assert!(open_untrusted(&fifo, &Policy::regular().devices()).is_ok());
        assert!(open_untrusted("/dev/null".as_ref(), &Policy::regular().devices()).is_ok());
        assert!(matches!(
            refusal("/dev/null".as_ref(), &Policy::regular()),
            Refusal::NotRegular { .. }
        ));
        let file = d.path().join("f");
        std::fs::write(&file, b"12345").unwrap();
        let link = d.path().join("link");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        assert!(open_untrusted(&link, &Policy::regular()).is_ok());
        assert!(matches!(
            refusal(&link, &Policy::regular().no_follow()),
            Refusal::Link { .. }
        ));
        assert!(matches!(
            refusal(&file, &Policy::regular().max_bytes(4)),
            Refusal::TooLarge { len: 5, max: 4, .. }
        ));
        let o = open_untrusted(&file, &Policy::regular().max_bytes(5)).unwrap();
        assert_eq!(o.read_all().unwrap(), b"12345");
        let sparse = d.path().join("sparse");
        std::fs::File::create(&sparse)
            .unwrap()
            .set_len(SPARSE_FROM + 4096)
            .unwrap();
        assert!(matches!(
            refusal(&sparse, &Policy::regular().dense()),
            Refusal::Sparse { .. }
        ));
        assert!(open_untrusted(&sparse, &Policy::regular()).is_ok());
        // Owned by this test's user.
        let me = std::fs::metadata(&file).unwrap().uid();
        assert!(open_untrusted(&file, &Policy::regular().owner(me)).is_ok());
        if me != 0 {
            return;
        }
        std::os::unix::fs::chown(&file, Some(4242), None).unwrap();
        assert!(matches!(
            refusal(&file, &Policy::regular().owner(4343)),
            Refusal::Owner {
                owner: 4242,
                wanted: 4343,
                ..
            }
        ));
        assert!(open_untrusted(&file, &Policy::regular().owner(4242)).is_ok());
        let e = open_untrusted(&file, &Policy::regular().owner(4343)).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied);
        assert!(e.to_string().contains("owned by uid 4242"), "{e}");
        // Root's file: only where root's is accepted too.
        std::os::unix::fs::chown(&file, Some(0), None).unwrap();
        assert!(open_untrusted(&file, &Policy::regular().owner(4242)).is_err());
        assert!(open_untrusted(&file, &Policy::regular().owner_or_root(4242)).is_ok());
    }

    #[test]
    fn data_bytes_counts_data_not_holes() {
        use std::os::unix::fs::FileExt;
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        let f = File::create(&p).unwrap();
        f.write_all_at(&[1; 8192], 0).unwrap();
        f.write_all_at(&[2; 4096], 8 << 20).unwrap();
        f.set_len(16 << 20).unwrap();
        let f = File::open(&p).unwrap();
        let n = data_bytes(&f, 16 << 20, 64).unwrap();
        // At most a few blocks each (a file system may round up).
        assert!((12288..=1 << 20).contains(&n), "{n}");
        // Past the extents looked at, the rest counts as data.
        assert!(data_bytes(&f, 16 << 20, 1).unwrap() >= 8 << 20);
        let full = d.path().join("full");
        std::fs::write(&full, vec![1u8; 1 << 20]).unwrap();
        let mut f = File::open(&full).unwrap();
        assert_eq!(data_bytes(&f, 1 << 20, 64).unwrap(), 1 << 20);
        // Read on from where it was.
        let mut all = Vec::new();
        f.read_to_end(&mut all).unwrap();
        assert_eq!(all.len(), 1 << 20);
    }

    #[test]
    fn a_time_boxed_open_of_a_missing_file_says_so_at_once() {
        let p = Policy::regular().time_box(Duration::from_secs(5));
        let t = std::time::Instant::now();
        let e = open_untrusted("/nonexistent/x".as_ref(), &p).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        assert!(t.elapsed() < Duration::from_secs(5));
        let ok = open_untrusted("/etc/hostname".as_ref(), &p);
        assert!(ok.is_ok() || Refusal::of(&ok.unwrap_err()).is_none());
    }
}
