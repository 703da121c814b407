//! Reading a mapped binary's build-id without trusting its path.
//!
//! The daemon runs as root and samples every user's processes; the paths
//! in MMAP2 records and `/proc/PID/maps` are names those users control. A
//! plain `open(path)` would block on a FIFO planted at a renamed binary's
//! old path (the daemon stops draining), follow a symlink to a device
//! node, or read another file than the one mapped. So:
//!
//! - the binary is opened through `/proc/PID/map_files/START-END` when the
//!   mapping's process is known and alive: the kernel hands over the very
//!   file mapped, whatever its name has become;
//! - otherwise through its path with `openat2(RESOLVE_NO_SYMLINKS |
//!   RESOLVE_NO_MAGICLINKS)` (a kernel-given path never needs a symlink),
//!   `O_NONBLOCK` (a FIFO open returns at once) and `O_NOCTTY`;
//! - either way the opened file must be a regular file and, when the
//!   kernel gave the mapping's device and inode, that file;
//! - the read runs on a worker thread and is waited for at most
//!   [`BUILD_ID_TIMEOUT`] (a FUSE file system can make any read wait): a
//!   late answer is dropped, and after [`MAX_STUCK_READS`] reads that never
//!   came back no further build-id is read this session. A binary whose
//!   build-id was not read gets its device/inode cookie, as one without a
//!   build-id does.
//!
//! The same opens identify the file behind a mapping ([`identify`]: its
//! device, inode, size and mtime), which decides its cookie when other
//! files claim its build-id (`profkit_eventlog::cookie`, "A build-id is a
//! claim"), on a worker of its own ([`IdentityReader`]) with the same
//! bounds.

use profkit_eventlog::FileIdentity;
use profkit_untrusted::TimeBox;
use rustix::fs::{Mode, OFlags, ResolveFlags, CWD};
use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How long the sync stage waits for one build-id.
pub const BUILD_ID_TIMEOUT: Duration = Duration::from_millis(100);
/// Reads that never came back before build-id reading stops.
pub const MAX_STUCK_READS: u32 = 4;

/// Where a mapped binary is and what it must be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MappedBinary {
    /// The path the kernel gave.
    pub path: PathBuf,
    /// `/proc/PID/map_files/START-END` of a process that maps it, if known.
    pub map_file: Option<PathBuf>,
    /// The device (as `procfs::dev_number` encodes it) and inode the
    /// kernel gave, when it gave them.
    pub identity: Option<(u64, u64)>,
}

/// Why a build-id was not read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// Not there, not readable, or reached through a symlink.
    Unopenable,
    /// A FIFO, device, socket or directory.
    NotRegular,
    /// Another file than the one the kernel said is mapped.
    OtherFile,
    /// The read did not finish in time (or reading is off after too many).
    TimedOut,
}

/// Opens a binary as described in the module docs; never blocks on a
/// FIFO or follows a symlink in `path`.
pub fn open_mapped(b: &MappedBinary) -> Result<File, Refused> {
    let last = match open_map_file(b) {
        Some(Ok(f)) => return Ok(f),
        Some(Err(e)) => e,
        None => Refused::Unopenable,
    };
    match open_path(b) {
        Err(Refused::Unopenable) => Err(last),
        r => r,
    }
}

/// The mapping's file through `map_files` (None: no such entry to open).
fn open_map_file(b: &MappedBinary) -> Option<Result<File, Refused>> {
    let mf = b.map_file.as_ref()?;
    // The magic link is the point here: no RESOLVE_NO_MAGICLINKS.
    let fd = rustix::fs::open(
        mf,
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    Some(check(File::from(fd), b.identity))
}

/// The file at the mapping's path, opened without links, non-blocking.
fn open_path(b: &MappedBinary) -> Result<File, Refused> {
    let fd = rustix::fs::openat2(
        CWD,
        &b.path,
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
    )
    .map_err(|_| Refused::Unopenable)?;
    check(File::from(fd), b.identity)
}

/// The identity of an opened file (device in `procfs::dev_number`'s
/// encoding, as cookies carry it).
pub fn identity_of(f: &File) -> Option<FileIdentity> {
    let m = f.metadata().ok()?;
    Some(FileIdentity {
        dev: dev_of(m.dev()),
        inode: m.ino(),
        size: m.size(),
        mtime_ns: m
            .mtime()
            .saturating_mul(1_000_000_000)
            .saturating_add(m.mtime_nsec()),
    })
}

/// Which file backs mapping `b`, whose build-id is claimed to be `claim`:
/// the file `map_files` hands over while the process lives (the very file
/// mapped); else the file at its path, opened as [`open_mapped`] opens it,
/// only if it has the claimed build-id (a file put there since, such as a
/// package upgrade's, is not the one mapped). None: not identified.
pub fn identify(b: &MappedBinary, claim: Option<&[u8]>) -> Option<FileIdentity> {
    if let Some(Ok(f)) = open_map_file(b) {
        return identity_of(&f);
    }
    let f = open_path(b).ok()?;
    if let Some(want) = claim {
        if build_id_of(f.try_clone().ok()?).as_deref() != Some(want) {
            return None;
        }
    }
    identity_of(&f)
}

/// [`identify`] through `map_files` alone, on this thread: one `statx`
/// that follows the magic link to the very file mapped, with
/// `AT_STATX_DONT_SYNC` (a network or FUSE file system answers from its
/// cache, never waits on its server). Like the stage's own reads of
/// `/proc/PID/maps`, it takes the process's memory-map lock for reading
/// only. None: no such entry (the process is gone), not a regular file,
/// or not the device/inode the kernel gave.
pub fn identify_mapped(b: &MappedBinary) -> Option<FileIdentity> {
    use rustix::fs::{AtFlags, FileType, StatxFlags};
    let mf = b.map_file.as_ref()?;
    let st = rustix::fs::statx(
        CWD,
        mf,
        AtFlags::STATX_DONT_SYNC,
        StatxFlags::TYPE | StatxFlags::INO | StatxFlags::SIZE | StatxFlags::MTIME,
    )
    .ok()?;
    if FileType::from_raw_mode(st.stx_mode.into()) != FileType::RegularFile {
        return None;
    }
    let i = FileIdentity {
        dev: crate::procfs::dev_number(st.stx_dev_major, st.stx_dev_minor),
        inode: st.stx_ino,
        size: st.stx_size,
        mtime_ns: st
            .stx_mtime
            .tv_sec
            .saturating_mul(1_000_000_000)
            .saturating_add(i64::from(st.stx_mtime.tv_nsec)),
    };
    match b.identity {
        Some(kernel) if kernel != (i.dev, i.inode) => None,
        _ => Some(i),
    }
}

/// [`identify`] on a worker thread, each answer waited for at most
/// [`BUILD_ID_TIMEOUT`] (`profkit_untrusted::TimeBox`).
///
/// What the worker found at a path for a claimed build-id, or that it
/// found nothing, is remembered (at most [`PATHS_REMEMBERED`] paths, then
/// it starts over): exec chains
/// and short-lived processes, gone before their mappings are read, map the
/// same few files again and again, and one read of each path serves them
/// all, as one look at the path would. (A file put at the path later with
/// the same claim takes the first one's cookie; where a user can write,
/// that is one of the user's own files.)
#[derive(Debug)]
pub struct IdentityReader {
    worker: TimeBox,
    timeout: Duration,
    by_path: std::collections::HashMap<(PathBuf, Vec<u8>), Option<FileIdentity>>,
    /// Mappings whose file was not identified (gone, refused, timed out).
    pub unidentified: u64,
}

/// Paths an [`IdentityReader`] remembers before it starts over.
pub const PATHS_REMEMBERED: usize = 4096;

impl Default for IdentityReader {
    fn default() -> Self {
        IdentityReader {
            worker: TimeBox::new("profkit-identity", MAX_STUCK_READS as usize, 1),
            timeout: BUILD_ID_TIMEOUT,
            by_path: Default::default(),
            unidentified: 0,
        }
    }
}

impl IdentityReader {
    /// The identity of the file behind `b`, claimed to have build-id
    /// `claim`: through `map_files` on this thread ([`identify_mapped`])
    /// while the process lives, else [`identify`] on the worker.
    pub fn read(&mut self, b: MappedBinary, claim: Option<&[u8]>) -> Option<FileIdentity> {
        if let Some(i) = identify_mapped(&b) {
            return Some(i);
        }
        let key = (b.path.clone(), claim.unwrap_or_default().to_vec());
        let r = match self.by_path.get(&key) {
            Some(&known) if b.identity.is_none() => known,
            _ => {
                let claim = claim.map(<[u8]>::to_vec);
                let r = self
                    .worker
                    .run(self.timeout, move || identify(&b, claim.as_deref()))
                    .ok()
                    .flatten();
                if self.by_path.len() >= PATHS_REMEMBERED {
                    self.by_path.clear();
                }
                self.by_path.insert(key, r);
                r
            }
        };
        if r.is_none() {
            self.unidentified += 1;
        }
        r
    }
}

fn check(f: File, identity: Option<(u64, u64)>) -> Result<File, Refused> {
    let m = f.metadata().map_err(|_| Refused::Unopenable)?;
    if !m.file_type().is_file() {
        return Err(Refused::NotRegular);
    }
    if let Some((dev, ino)) = identity {
        if (dev_of(m.dev()), m.ino()) != (dev, ino) {
            return Err(Refused::OtherFile);
        }
    }
    Ok(f)
}

/// `st_dev` in `procfs::dev_number`'s encoding (major << 32 | minor).
pub(crate) fn dev_of(st_dev: u64) -> u64 {
    let major = ((st_dev >> 32) & 0xffff_f000) | ((st_dev >> 8) & 0xfff);
    let minor = ((st_dev >> 12) & 0xffff_ff00) | (st_dev & 0xff);
    crate::procfs::dev_number(major as u32, minor as u32)
}

/// The GNU build-id of an opened ELF file, reading only headers and notes
/// (`profkit_elf::build_id`).
pub fn build_id_of(f: File) -> Option<Vec<u8>> {
    profkit_elf::build_id(&object::read::ReadCache::new(f))
}

type Answer = Result<Option<Vec<u8>>, Refused>;

/// Build-id reads on a worker thread, each waited for at most a timeout
/// (`profkit_untrusted::TimeBox`: a read that times out is given up and
/// its thread left to it; after [`MAX_STUCK_READS`] given up and still
/// stuck no more reads are made; a thread that answers takes the next
/// read).
#[derive(Debug)]
pub struct BuildIdReader {
    worker: TimeBox,
    timeout: Duration,
    /// The read made on the worker ([`open_mapped`] + [`build_id_of`]).
    read: fn(MappedBinary) -> Answer,
    /// Reads refused, by reason (unopenable, not regular, other file, timed out).
    pub refused: [u64; 4],
}

impl Default for BuildIdReader {
    fn default() -> Self {
        Self::new(BUILD_ID_TIMEOUT)
    }
}

impl BuildIdReader {
    /// A reader that waits at most `timeout` per build-id.
    pub fn new(timeout: Duration) -> Self {
        BuildIdReader {
            worker: TimeBox::new("profkit-buildid", MAX_STUCK_READS as usize, 1),
            timeout,
            read: |b| open_mapped(&b).map(build_id_of),
            refused: [0; 4],
        }
    }

    /// The build-id of `b`: `Ok(None)` for a binary without one.
    pub fn read(&mut self, b: MappedBinary) -> Answer {
        let read = self.read;
        let r = self
            .worker
            .run(self.timeout, move || read(b))
            .unwrap_or(Err(Refused::TimedOut));
        if let Err(why) = r {
            self.refused[why as usize] += 1;
        }
        r
    }
}

/// [`open_mapped`] + [`build_id_of`] on this thread, for a path alone (no
/// process, no identity): for callers that are not the daemon's sync loop.
pub fn read_build_id_at(path: &Path) -> Option<Vec<u8>> {
    open_mapped(&MappedBinary {
        path: path.into(),
        map_file: None,
        identity: None,
    })
    .ok()
    .and_then(build_id_of)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn at(p: &Path) -> MappedBinary {
        MappedBinary {
            path: p.into(),
            map_file: None,
            identity: None,
        }
    }

    #[test]
    fn a_fifo_a_symlink_and_another_file_are_refused_without_blocking() {
        let d = tempfile::tempdir().unwrap();
        let fifo = d.path().join("fifo");
        let st = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(st.success());
        // Nobody ever opens the other end: a plain open would block here.
        assert_eq!(open_mapped(&at(&fifo)).err(), Some(Refused::NotRegular));
        let exe = std::env::current_exe().unwrap();
        let link = d.path().join("link");
        symlink(&exe, &link).unwrap();
        assert_eq!(open_mapped(&at(&link)).err(), Some(Refused::Unopenable));
        let dir_link = d.path().join("dirlink");
        symlink(exe.parent().unwrap(), &dir_link).unwrap();
        let through = dir_link.join(exe.file_name().unwrap());
        assert_eq!(open_mapped(&at(&through)).err(), Some(Refused::Unopenable));
        assert_eq!(
            open_mapped(&at(Path::new("/dev/null"))).err(),
            Some(Refused::NotRegular)
        );
        // The right path, but not the file the kernel said.
        let m = std::fs::metadata(&exe).unwrap();
        let wrong = MappedBinary {
            identity: Some((dev_of(m.dev()), m.ino() + 1)),
            ..at(&exe)
        };
        assert_eq!(open_mapped(&wrong).err(), Some(Refused::OtherFile));
        let right = MappedBinary {
            identity: Some((dev_of(m.dev()), m.ino())),
            ..at(&exe)
        };
        assert!(open_mapped(&right).is_ok());
    }

    /// This test's own executable, as the stage sees a mapping of it: its
    /// executable mapping through `/proc/self/map_files`, its path gone.
    fn own_mapping() -> (PathBuf, MappedBinary) {
        let exe = std::env::current_exe().unwrap();
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        let line = maps
            .lines()
            .find(|l| l.ends_with(exe.to_str().unwrap()) && l.split(' ').nth(1) == Some("r-xp"))
            .expect("the test binary is mapped");
        let range = line.split(' ').next().unwrap();
        let b = MappedBinary {
            path: "/nonexistent/renamed".into(),
            map_file: Some(format!("/proc/self/map_files/{range}").into()),
            identity: None,
        };
        (exe, b)
    }

    #[test]
    fn map_files_give_the_mapped_file_whatever_its_path_became() {
        // This test's own executable, through /proc/self/map_files: find
        // an executable mapping of it in /proc/self/maps.
        let (exe, b) = own_mapping();
        let want = build_id_of(File::open(&exe).unwrap());
        assert!(want.is_some(), "the test binary is linked with a build-id");
        assert_eq!(open_mapped(&b).ok().and_then(build_id_of), want);
    }

    /// The file behind a mapping is the same whichever way it is
    /// identified: `statx` through `map_files` on the stage's thread, or
    /// `fstat` of the file opened on the worker.
    #[test]
    fn a_mapping_is_identified_alike_through_statx_and_fstat() {
        let (exe, b) = own_mapping();
        let want = identity_of(&File::open(&exe).unwrap()).unwrap();
        assert_eq!(identify_mapped(&b), Some(want));
        assert_eq!(identify(&b, None), Some(want));
        // Not the device/inode the kernel gave: not identified.
        let other = MappedBinary {
            identity: Some((want.dev, want.inode + 1)),
            ..b.clone()
        };
        assert_eq!(identify_mapped(&other), None);
        // The process gone: the path, only with the claimed build-id.
        let gone = MappedBinary {
            path: exe.clone(),
            map_file: Some("/proc/self/map_files/0-1".into()),
            identity: None,
        };
        assert_eq!(identify_mapped(&gone), None);
        let bid = build_id_of(File::open(&exe).unwrap()).unwrap();
        assert_eq!(identify(&gone, Some(&bid)), Some(want));
        assert_eq!(identify(&gone, Some(&[1, 2, 3])), None);
    }

    /// Gone processes' mappings: one look at each path for a claim serves
    /// every later mapping of it (exec chains), found or not.
    #[test]
    fn a_path_is_looked_at_once_per_claim_for_gone_processes() {
        let d = tempfile::tempdir().unwrap();
        let exe = std::env::current_exe().unwrap();
        let copy = d.path().join("app");
        std::fs::copy(&exe, &copy).unwrap();
        let bid = build_id_of(File::open(&copy).unwrap()).unwrap();
        let gone = |p: &Path| MappedBinary {
            path: p.into(),
            map_file: Some("/proc/self/map_files/0-1".into()),
            identity: None,
        };
        let mut r = IdentityReader {
            timeout: Duration::from_secs(10),
            ..IdentityReader::default()
        };
        let first = r.read(gone(&copy), Some(&bid));
        assert_eq!(first, identity_of(&File::open(&copy).unwrap()));
        std::fs::remove_file(&copy).unwrap();
        assert_eq!(r.read(gone(&copy), Some(&bid)), first, "remembered");
        assert_eq!(r.read(gone(&copy), Some(&[1, 2])), None, "another claim");
        assert_eq!(r.unidentified, 1);
    }

    #[test]
    fn slow_reads_time_out_and_the_worker_is_reused_once_it_answers() {
        // A read that cannot finish in no time: times out, worker busy.
        // (Build-ids are read by range, in microseconds: the read is made
        // slow here.)
        let mut r = BuildIdReader {
            read: |b| {
                std::thread::sleep(Duration::from_millis(100));
                open_mapped(&b).map(build_id_of)
            },
            ..BuildIdReader::new(Duration::ZERO)
        };
        let exe = std::env::current_exe().unwrap();
        assert_eq!(r.read(at(&exe)), Err(Refused::TimedOut));
        // Once it has answered, the same worker serves the next read.
        std::thread::sleep(Duration::from_millis(500));
        r.timeout = Duration::from_secs(10);
        let want = build_id_of(File::open(&exe).unwrap());
        assert_eq!(r.read(at(&exe)), Ok(want));
        assert_eq!(r.worker.stuck(), 0);
        // A reader with time gets the answer.
        let mut r = BuildIdReader::new(Duration::from_secs(10));
        let want = build_id_of(File::open(&exe).unwrap());
        assert_eq!(r.read(at(&exe)), Ok(want));
        let d = tempfile::tempdir().unwrap();
        assert_eq!(r.read(at(d.path())), Err(Refused::NotRegular));
        assert_eq!(r.refused, [0, 1, 0, 0]);
    }
}
