//! The session directory: created private, opened once, files inside opened
//! relative to its fd and never through a symbolic link.

use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use rustix::fs::{Access, AtFlags, Mode, OFlags};
use rustix::io::Errno;

use crate::error::{Error, Result};

/// The event log, written by the sampling engine (`profkit-eventlog`).
pub const SESSION_LOG: &str = profkit_eventlog::parts::CURRENT_PART;
/// The lock file: `flock`ed by the running daemon, holding its pid.
pub const LOCK_FILE: &str = profkit_eventlog::layout::LOCK_FILE;
/// The running daemon's pid; removed on a clean stop, so one left behind
/// without a lock holder means the daemon died.
pub const PID_FILE: &str = profkit_eventlog::layout::PID_FILE;
/// The control socket (mode 0600).
pub const CONTROL_SOCKET: &str = profkit_eventlog::layout::CONTROL_SOCKET;
/// The daemon's log (its stdout and stderr go there too).
pub const DAEMON_LOG: &str = profkit_eventlog::layout::DAEMON_LOG;

/// Permission bits of a session directory we create.
pub const DIR_MODE: u32 = 0o700;
/// Permission bits of files we create in it.
pub const FILE_MODE: u32 = 0o600;

/// Longest path `bind(2)`/`connect(2)` take for a Unix socket (`sun_path`
/// holds 108 bytes with the terminating NUL).
const SUN_PATH_MAX: usize = 107;

/// An open, validated session directory.
///
/// Holds a file descriptor of the directory, so everything inside is opened
/// relative to the directory we checked (`openat`), not by re-walking a path
/// that may have changed; every file is opened with `O_NOFOLLOW`.
///
/// Validation (both [`create`](Self::create) and [`open`](Self::open)):
/// the path itself is not a symbolic link, is a directory, is owned by the
/// effective uid, is not writable by group or others, and is writable by us.
#[derive(Debug)]
pub struct SessionDir {
    path: PathBuf,
    fd: OwnedFd,
    owner: u32,
}

impl SessionDir {
    /// Create `path` (and missing parents) with mode 0700 if needed, then
    /// open and validate it.
    ///
    /// An existing directory is used as it is if it passes validation; it
    /// is never `chmod`ed behind the user's back.
    pub fn create(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        if let Err(source) = std::fs::DirBuilder::new()
            .recursive(true)
            .mode(DIR_MODE)
            .create(path)
        {
            return Err(match std::fs::symlink_metadata(path) {
                Ok(m) if m.file_type().is_symlink() => Error::Symlink { path: path.into() },
                Ok(m) if !m.is_dir() => Error::NotADirectory { path: path.into() },
                _ if source.raw_os_error() == Some(Errno::NOTDIR.raw_os_error()) => {
                    Error::NotADirectory { path: path.into() }
                }
                _ => Error::CreateDir {
                    path: path.into(),
                    source,
                },
            });
        }
        Self::open(path)
    }

    /// Open and validate an existing session directory.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref();
        let fd = open_dir_nofollow(path)?;
        let st = rustix::fs::fstat(&fd).map_err(|e| Error::io("stat", path, e.into()))?;
        let uid = rustix::process::geteuid().as_raw();
        let owner = st.st_uid;
        if owner != uid {
            return Err(Error::NotOwned {
                path: path.into(),
                owner,
                uid,
            });
        }
        let mode = st.st_mode & 0o7777;
        if mode & 0o022 != 0 {
            return Err(Error::InsecureDir {
                path: path.into(),
                mode,
            });
        }
        // EACCESS: check with the effective uid (what open(2) will use).
        if let Err(e) = rustix::fs::accessat(
            &fd,
            ".",
            Access::WRITE_OK | Access::EXEC_OK,
            AtFlags::EACCESS,
        ) {
            return Err(Error::NotWritable {
                path: path.into(),
                source: e.into(),
            });
        }
        Ok(SessionDir {
            path: path.into(),
            fd,
            owner,
        })
    }

    /// The directory's path as given.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The uid that owns the directory (the effective uid that opened it).
    pub fn owner_uid(&self) -> u32 {
        self.owner
    }

    /// `path()/name`, for messages and for tools that want a path.
    pub fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// The directory's file descriptor.
    pub fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Another handle on the same held directory (its own descriptor).
    pub fn try_clone(&self) -> Result<Self> {
        Ok(SessionDir {
            path: self.path.clone(),
            fd: self
                .fd
                .try_clone()
                .map_err(|e| Error::io("duplicating the descriptor of", &self.path, e))?,
            owner: self.owner,
        })
    }

    /// `/proc/self/fd/N`: the held directory as a path, for code that
    /// takes paths (the session writer, sinks, extras). Names under it
    /// resolve in the directory this `SessionDir` validated and holds open,
    /// whatever has since been renamed, deleted or planted at
    /// [`SessionDir::path`]. Valid in this process while `self` lives.
    pub fn held_path(&self) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", self.fd.as_raw_fd()))
    }

    /// True once the held directory has been removed (its link count is
    /// 0), even if another directory was created at its path since.
    pub fn is_deleted(&self) -> bool {
        rustix::fs::fstat(&self.fd).map_or(true, |st| st.st_nlink == 0)
    }

    /// Open `name` for reading (no symlink followed).
    pub fn open_read(&self, name: &str) -> Result<File> {
        self.open_file(name, OFlags::RDONLY, "open")
    }

    /// Open `name` for appending, creating it with mode 0600 if missing.
    pub fn open_append(&self, name: &str) -> Result<File> {
        self.open_file(
            name,
            OFlags::WRONLY | OFlags::APPEND | OFlags::CREATE,
            "open",
        )
    }

    /// Create `name` (mode 0600) or truncate it, open for reading and
    /// writing (what the event log writer needs to rewrite its header).
    pub fn create_truncate(&self, name: &str) -> Result<File> {
        self.open_file(
            name,
            OFlags::RDWR | OFlags::CREATE | OFlags::TRUNC,
            "create",
        )
    }

    /// Open `name` for reading and writing, creating it (mode 0600) if
    /// missing, without truncating.
    pub fn open_rw(&self, name: &str) -> Result<File> {
        self.open_file(name, OFlags::RDWR | OFlags::CREATE, "open")
    }

    /// Remove `name`; `Ok(false)` if it did not exist.
    pub fn remove(&self, name: &str) -> Result<bool> {
        check_name(name)?;
        match rustix::fs::unlinkat(&self.fd, name, AtFlags::empty()) {
            Ok(()) => Ok(true),
            Err(Errno::NOENT) => Ok(false),
            Err(e) => Err(Error::io("remove", self.join(name), e.into())),
        }
    }

    /// Whether `name` exists (as anything, links included).
    pub fn exists(&self, name: &str) -> bool {
        check_name(name).is_ok()
            && rustix::fs::statat(&self.fd, name, AtFlags::SYMLINK_NOFOLLOW).is_ok()
    }

    /// Rename `from` to `to` inside the directory (atomic replace).
    pub(crate) fn rename(&self, from: &str, to: &str) -> Result<()> {
        check_name(from)?;
        check_name(to)?;
        rustix::fs::renameat(&self.fd, from, &self.fd, to)
            .map_err(|e| Error::io("rename", self.join(from), e.into()))
    }

    /// Set the permission bits of `name`.
    pub(crate) fn chmod(&self, name: &str, mode: u32) -> Result<()> {
        check_name(name)?;
        rustix::fs::chmodat(&self.fd, name, Mode::from_raw_mode(mode), AtFlags::empty())
            .map_err(|e| Error::io("chmod", self.join(name), e.into()))
    }

    /// The path to give `bind`/`connect` for socket `name` in this
    /// directory (see [`socket_address`]).
    pub(crate) fn socket_address(&self, name: &str) -> PathBuf {
        socket_address(&self.path, Some(self.fd.as_fd()), name)
    }

    fn open_file(&self, name: &str, flags: OFlags, what: &'static str) -> Result<File> {
        check_name(name)?;
        let flags = flags | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NOCTTY;
        match rustix::fs::openat(&self.fd, name, flags, Mode::from_raw_mode(FILE_MODE)) {
            Ok(fd) => Ok(File::from(fd)),
            Err(Errno::LOOP) => Err(Error::Symlink {
                path: self.join(name),
            }),
            Err(e @ (Errno::ACCESS | Errno::PERM | Errno::ROFS)) => Err(Error::NotWritable {
                path: self.join(name),
                source: e.into(),
            }),
            Err(e) => Err(Error::io(what, self.join(name), e.into())),
        }
    }
}

/// Open a directory without following a link at its last component.
pub(crate) fn open_dir_nofollow(path: &Path) -> Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    match rustix::fs::open(path, flags, Mode::empty()) {
        Ok(fd) => Ok(fd),
        Err(Errno::NOENT) => Err(Error::NoSuchDir { path: path.into() }),
        Err(Errno::LOOP | Errno::NOTDIR) => Err(match std::fs::symlink_metadata(path) {
            Ok(m) if m.file_type().is_symlink() => Error::Symlink { path: path.into() },
            _ => Error::NotADirectory { path: path.into() },
        }),
        Err(e) => Err(Error::io("open directory", path, e.into())),
    }
}

/// The path under which socket `name` in `dir` can be bound or reached.
///
/// `sun_path` holds at most 107 bytes. A longer path is reached through the
/// directory's descriptor as `/proc/self/fd/N/name`, which the kernel
/// resolves to the same directory, so deep session directories work too.
pub(crate) fn socket_address(dir: &Path, fd: Option<BorrowedFd<'_>>, name: &str) -> PathBuf {
    let plain = dir.join(name);
    match fd {
        Some(fd) if plain.as_os_str().len() > SUN_PATH_MAX => {
            PathBuf::from(format!("/proc/self/fd/{}/{name}", fd.as_raw_fd()))
        }
        _ => plain,
    }
}

fn check_name(name: &str) -> Result<()> {
    if name.is_empty() || name == "." || name == ".." || name.contains('/') || name.contains('\0') {
        return Err(Error::InvalidFileName { name: name.into() });
    }
    Ok(())
}

/// Read a decimal pid from the start of a small file; `None` if empty or
/// not a number.
pub(crate) fn parse_pid(text: &str) -> Option<u32> {
    text.split_whitespace().next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    #[test]
    fn create_makes_a_private_dir_and_open_accepts_it() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("a/b/session");
        let d = SessionDir::create(&p).unwrap();
        assert_eq!(std::fs::metadata(&p).unwrap().mode() & 0o777, 0o700);
        assert_eq!(d.path(), p);
        drop(d);
        SessionDir::open(&p).unwrap();
    }

    #[test]
    fn the_held_path_stays_in_the_validated_dir_after_a_swap() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("s");
        let d = SessionDir::create(&p).unwrap();
        let other = tmp.path().join("other");
        std::fs::create_dir(&other).unwrap();
        // Renamed away, a symlink to another directory in its place.
        std::fs::rename(&p, tmp.path().join("moved")).unwrap();
        std::os::unix::fs::symlink(&other, &p).unwrap();
        std::fs::write(d.held_path().join("session.pkl"), "x").unwrap();
        assert!(tmp.path().join("moved/session.pkl").exists());
        assert!(!other.join("session.pkl").exists());
        assert!(!d.is_deleted());
    }

    #[test]
    fn a_deleted_dir_is_seen_even_when_recreated() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("s");
        let d = SessionDir::create(&p).unwrap();
        assert!(!d.is_deleted());
        std::fs::remove_dir(&p).unwrap();
        std::fs::create_dir(&p).unwrap();
        assert!(d.is_deleted());
    }

    #[test]
    fn open_of_missing_dir_says_so() {
        let tmp = tempfile::tempdir().unwrap();
        let e = SessionDir::open(tmp.path().join("nope")).unwrap_err();
        assert!(matches!(e, Error::NoSuchDir { .. }), "{e}");
    }

    #[test]
    fn group_writable_dir_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let p = tmp.path().join("s");
        std::fs::create_dir(&p).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o770)).unwrap();
        let e = SessionDir::create(&p).unwrap_err();
        assert!(matches!(e, Error::InsecureDir { mode: 0o770, .. }), "{e}");
    }

    #[test]
    fn names_must_be_one_component() {
        let tmp = tempfile::tempdir().unwrap();
        let d = SessionDir::create(tmp.path().join("s")).unwrap();
        for bad in ["", ".", "..", "../x", "a/b"] {
            let e = d.open_append(bad).unwrap_err();
            assert!(matches!(e, Error::InvalidFileName { .. }), "{bad:?}: {e}");
        }
    }

    #[test]
    fn files_are_created_0600_and_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let d = SessionDir::create(tmp.path().join("s")).unwrap();
        d.create_truncate(SESSION_LOG).unwrap();
        let m = std::fs::metadata(d.join(SESSION_LOG)).unwrap();
        assert_eq!(m.mode() & 0o777, 0o600);
        assert!(d.exists(SESSION_LOG));
        assert!(d.remove(SESSION_LOG).unwrap());
        assert!(!d.remove(SESSION_LOG).unwrap());
    }

    #[test]
    fn long_socket_paths_go_through_proc() {
        let long = PathBuf::from(format!("/{}", "x".repeat(120)));
        let tmp = tempfile::tempdir().unwrap();
        let fd = open_dir_nofollow(tmp.path()).unwrap();
        let a = socket_address(&long, Some(fd.as_fd()), "control.sock");
        assert!(a.starts_with("/proc/self/fd/"), "{a:?}");
        let short = socket_address(Path::new("/tmp/s"), Some(fd.as_fd()), "control.sock");
        assert_eq!(short, Path::new("/tmp/s/control.sock"));
    }

    #[test]
    fn parse_pid_reads_first_number() {
        assert_eq!(parse_pid("123\n"), Some(123));
        assert_eq!(parse_pid(""), None);
        assert_eq!(parse_pid("x"), None);
    }
}
