//! One daemon per session directory: `flock` on `daemon.lock`.
//!
//! The lock is an advisory `flock(LOCK_EX|LOCK_NB)` on `daemon.lock`, taken
//! for the daemon's whole life. The kernel drops it when the holder's file
//! descriptor closes, which includes every way a process can die, so a lock
//! file left by a dead daemon is simply free again: recovering a stale lock
//! needs no pid guessing. The holder writes its pid into the lock file (for
//! "already running (pid N)") and into `daemon.pid`; a clean stop removes
//! `daemon.pid`, so a `daemon.pid` without a lock holder means the daemon
//! died ([`DaemonState::Dead`]). `daemon.lock` itself is never removed:
//! unlinking a lock file lets two processes lock two different inodes.

use std::fs::File;
use std::io::{Read, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rustix::fs::{AtFlags, FlockOperation, Mode, OFlags};
use rustix::io::Errno;

use crate::dir::{
    open_dir_nofollow, parse_pid, SessionDir, CONTROL_SOCKET, FILE_MODE, LOCK_FILE, PID_FILE,
};
use crate::error::{Error, Result};

/// How long `acquire` keeps retrying a busy lock: long enough to ride out
/// a [`daemon_state`] probe (which holds a shared lock for microseconds),
/// short enough not to matter when a daemon really runs.
const BUSY_RETRY: Duration = Duration::from_millis(50);
/// How long we wait for a fresh holder to write its pid.
const PID_WAIT: Duration = Duration::from_millis(500);

/// Whether a daemon runs for a session directory (see [`daemon_state`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DaemonState {
    /// A process holds the lock.
    Running {
        /// Its pid, as written in the lock file (`None` if unreadable).
        pid: Option<u32>,
    },
    /// Nobody holds the lock but `daemon.pid` is there: the daemon died
    /// without cleaning up (killed, crashed). The next start recovers.
    Dead {
        /// The pid it left in `daemon.pid`, if readable.
        pid: Option<u32>,
    },
    /// No daemon, and none died.
    NotRunning,
}

/// The session lock, held for the daemon's life.
///
/// Dropping it removes `daemon.pid`, empties the lock file and releases
/// the lock (by closing the file).
#[derive(Debug)]
pub struct DaemonLock {
    file: File,
    dir_fd: OwnedFd,
    dir: PathBuf,
    pid: u32,
    stale: Option<Option<u32>>,
}

impl DaemonLock {
    /// Take the lock of `dir` for this process.
    ///
    /// Fails with [`Error::AlreadyRunning`] (with the holder's pid) if a
    /// daemon holds it. A lock left by a dead daemon is taken over; see
    /// [`recovered_from`](Self::recovered_from). On success the pid is in
    /// `daemon.lock` and `daemon.pid`, and a stale `control.sock` is gone.
    pub fn acquire(dir: &SessionDir) -> Result<DaemonLock> {
        let file = dir.open_rw(LOCK_FILE)?;
        let start = Instant::now();
        loop {
            match rustix::fs::flock(&file, FlockOperation::NonBlockingLockExclusive) {
                Ok(()) => break,
                Err(Errno::WOULDBLOCK) if start.elapsed() < BUSY_RETRY => {
                    std::thread::sleep(Duration::from_millis(5));
                }
                Err(Errno::WOULDBLOCK) => {
                    return Err(Error::AlreadyRunning {
                        dir: dir.path().into(),
                        pid: wait_for_pid(&file),
                    })
                }
                Err(e) => return Err(Error::io("lock", dir.join(LOCK_FILE), e.into())),
            }
        }
        let pid = std::process::id();
        let stale = read_small(dir.as_fd(), PID_FILE).map(|t| parse_pid(&t));

        let lock_path = dir.join(LOCK_FILE);
        let text = format!("{pid}\n");
        // Write first, then cut: a reader never sees an empty file.
        file.write_all_at(text.as_bytes(), 0)
            .and_then(|()| file.set_len(text.len() as u64))
            .map_err(|e| Error::io("write", &lock_path, e))?;

        // Write daemon.pid whole or not at all: readers never see it empty.
        let tmp = format!("{PID_FILE}.tmp");
        dir.create_truncate(&tmp)?
            .write_all(format!("{pid}\n").as_bytes())
            .map_err(|e| Error::io("write", dir.join(&tmp), e))?;
        dir.rename(&tmp, PID_FILE)?;
        dir.remove(CONTROL_SOCKET)?;

        let dir_fd = dir
            .as_fd()
            .try_clone_to_owned()
            .map_err(|e| Error::io("duplicate descriptor of", dir.path(), e))?;
        Ok(DaemonLock {
            file,
            dir_fd,
            dir: dir.path().into(),
            pid,
            stale,
        })
    }

    /// Our pid, as written in the lock.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// `Some(pid)` if the lock was recovered from a daemon that died (its
    /// `daemon.pid` was still there); the inner `None` if that file held no
    /// readable pid.
    pub fn recovered_from(&self) -> Option<Option<u32>> {
        self.stale
    }

    /// The session directory this lock is for.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for DaemonLock {
    fn drop(&mut self) {
        // Only remove daemon.pid if it is still ours.
        if read_small(self.dir_fd.as_fd(), PID_FILE).and_then(|t| parse_pid(&t)) == Some(self.pid) {
            let _ = rustix::fs::unlinkat(&self.dir_fd, PID_FILE, AtFlags::empty());
        }
        let _ = self.file.set_len(0);
        let _ = rustix::fs::flock(&self.file, FlockOperation::Unlock);
    }
}

/// Whether a daemon runs for the session directory at `dir`.
///
/// Read-only and usable by any user who can read the directory (root asking
/// about a user's daemon, say); it creates nothing. A missing directory is
/// [`DaemonState::NotRunning`].
pub fn daemon_state(dir: &Path) -> Result<DaemonState> {
    let dir_fd = match open_dir_nofollow(dir) {
        Ok(fd) => fd,
        Err(Error::NoSuchDir { .. }) => return Ok(DaemonState::NotRunning),
        Err(e) => return Err(e),
    };
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NOCTTY;
    match rustix::fs::openat(&dir_fd, LOCK_FILE, flags, Mode::from_raw_mode(FILE_MODE)) {
        Ok(fd) => {
            let file = File::from(fd);
            // A shared lock only conflicts with the daemon's exclusive one;
            // `DaemonLock::acquire` retries briefly, so this probe cannot make
            // a concurrent start fail.
            match rustix::fs::flock(&file, FlockOperation::NonBlockingLockShared) {
                Ok(()) => {
                    let _ = rustix::fs::flock(&file, FlockOperation::Unlock);
                }
                Err(Errno::WOULDBLOCK) => {
                    return Ok(DaemonState::Running {
                        pid: wait_for_pid(&file),
                    })
                }
                Err(e) => return Err(Error::io("lock", dir.join(LOCK_FILE), e.into())),
            }
        }
        Err(Errno::NOENT) => {}
        Err(Errno::LOOP) => {
            return Err(Error::Symlink {
                path: dir.join(LOCK_FILE),
            })
        }
        Err(e) => return Err(Error::io("open", dir.join(LOCK_FILE), e.into())),
    }
    Ok(match read_small(dir_fd.as_fd(), PID_FILE) {
        Some(text) => DaemonState::Dead {
            pid: parse_pid(&text),
        },
        None => DaemonState::NotRunning,
    })
}

/// The pid in a lock file whose holder may have only just locked it.
fn wait_for_pid(file: &File) -> Option<u32> {
    let start = Instant::now();
    loop {
        let mut buf = [0u8; 32];
        if let Ok(n) = file.read_at(&mut buf, 0) {
            if let Some(pid) = std::str::from_utf8(&buf[..n]).ok().and_then(parse_pid) {
                return Some(pid);
            }
        }
        if start.elapsed() >= PID_WAIT {
            return None;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Contents of a small file in `dir` (no link followed); `None` if absent
/// or unreadable.
pub(crate) fn read_small(dir: BorrowedFd<'_>, name: &str) -> Option<String> {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NOCTTY;
    let fd = rustix::fs::openat(dir, name, flags, Mode::empty()).ok()?;
    let mut text = String::new();
    File::from(fd).take(4096).read_to_string(&mut text).ok()?;
    Some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_acquire_fails_with_first_pid_and_drop_releases() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = SessionDir::create(tmp.path().join("s")).unwrap();
        let first = DaemonLock::acquire(&dir).unwrap();
        assert_eq!(first.recovered_from(), None);
        assert_eq!(
            daemon_state(dir.path()).unwrap(),
            DaemonState::Running {
                pid: Some(std::process::id())
            }
        );
        match DaemonLock::acquire(&dir).unwrap_err() {
            Error::AlreadyRunning { pid, .. } => assert_eq!(pid, Some(std::process::id())),
            e => panic!("unexpected {e}"),
        }
        drop(first);
        assert!(!dir.exists(PID_FILE));
        assert_eq!(daemon_state(dir.path()).unwrap(), DaemonState::NotRunning);
        DaemonLock::acquire(&dir).unwrap();
    }

    #[test]
    fn leftover_pid_file_is_dead_then_recovered() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = SessionDir::create(tmp.path().join("s")).unwrap();
        dir.create_truncate(PID_FILE)
            .unwrap()
            .write_all(b"999999\n")
            .unwrap();
        dir.create_truncate(LOCK_FILE)
            .unwrap()
            .write_all(b"999999\n")
            .unwrap();
        assert_eq!(
            daemon_state(dir.path()).unwrap(),
            DaemonState::Dead { pid: Some(999999) }
        );
        let lock = DaemonLock::acquire(&dir).unwrap();
        assert_eq!(lock.recovered_from(), Some(Some(999999)));
        let pid_text = read_small(dir.as_fd(), PID_FILE).unwrap();
        assert_eq!(parse_pid(&pid_text), Some(std::process::id()));
    }

    #[test]
    fn state_of_missing_dir_is_not_running() {
        let tmp = tempfile::tempdir().unwrap();
        assert_eq!(
            daemon_state(&tmp.path().join("nothing")).unwrap(),
            DaemonState::NotRunning
        );
    }
}
