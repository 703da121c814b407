//! The symbol index: each binary's whole function table, read once, kept in
//! a cache directory so that later reports of the same file binary-search it instead of
//! streaming its symbol tables and demangling (issue 32).
//!
//! An entry answers for one file only. Its name is the file's build-id (hex; a binary
//! without one: a hash of its path) and a hash of its identity (`st_dev`, `st_ino`, size,
//! mtime, ctime), and it holds that identity and build-id, compared on every read with the
//! `fstat` of the file the symbolizer opened (after the symbolizer's own checks, which the
//! index never replaces). Another file claiming the same build-id (any file can be linked
//! with libc's) has another identity, so another entry: it neither reads nor overwrites
//! libc's. A stripped binary's entry holds its debug file's `.symtab` too, and that file's
//! identity, compared with the debug file found for this report.
//!
//! The directory is the user's (created 0700; refused, and said once, when it is not
//! owned by the effective uid or is writable by group or others); an entry is read only if
//! it is a regular file of ours, not group/world-writable, opened without following a link
//! (`O_NOFOLLOW`, under the held directory), at most [`format::MAX_ENTRY_BYTES`], and then
//! only if its checksum, version, layout and identity are right: anything else is counted
//! as rejected and rebuilt. Entries are written whole to an `O_EXCL` 0600 temporary and
//! renamed over the name, so readers (two reports at once, rayon tasks) see old or new,
//! never half. After a write, the oldest entries (by mtime; a hit refreshes it) are deleted
//! while the directory holds more than `max_bytes`. A write that fails (full disk,
//! read-only directory) leaves the report as it would be without the index.

pub(crate) mod format;
mod read;

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

use rustix::fs::{AtFlags, Mode, OFlags};

pub(crate) use format::{Facts, Identity, Index};

/// Where and how large the symbol index may be ([`SymbolizerOptions::index_cache`]).
///
/// [`SymbolizerOptions::index_cache`]: crate::SymbolizerOptions::index_cache
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexCacheOptions {
    /// The directory of entries: created 0700 when missing, and not used at all when it
    /// is not owned by the effective uid or is writable by group or others.
    pub dir: PathBuf,
    /// At most this many bytes of entries: after a write the oldest entries (by mtime,
    /// which a read refreshes) are deleted until the rest fit, and an entry larger than
    /// this is not written (so built again by the next report: entries are about 37
    /// bytes a function plus its raw name: a few hundred KB for libc, tens of MB for
    /// librustc_driver and Rust's libLLVM).
    pub max_bytes: u64,
    /// Misses are answered by range, as without an index, and counted
    /// ([`builds_deferred`]) instead of building the whole table now: a
    /// report that wants its output first leaves the entries to a builder
    /// run after it (`profreport --build-index`, which the report starts in
    /// the background). Off, the first report that misses builds them.
    pub defer_builds: bool,
}

/// Misses this process answered by range and left to a builder
/// ([`IndexCacheOptions::defer_builds`]): nonzero means a builder run would
/// write entries.
static DEFERRED: AtomicUsize = AtomicUsize::new(0);

/// How many index misses this process left to a builder
/// ([`IndexCacheOptions::defer_builds`]), over all symbolizers.
pub fn builds_deferred() -> usize {
    DEFERRED.load(Ordering::Relaxed)
}

impl IndexCacheOptions {
    /// The default size bound: 1 GiB.
    pub const DEFAULT_MAX_BYTES: u64 = 1 << 30;

    /// `$XDG_CACHE_HOME/profkit/symbols`, else `$HOME/.cache/profkit/symbols`; `None`
    /// when neither is set to an absolute path (a relative `XDG_CACHE_HOME` is ignored,
    /// as the XDG base directory specification says).
    pub fn default_dir() -> Option<PathBuf> {
        let abs = |v: Option<std::ffi::OsString>| {
            v.map(PathBuf::from)
                .filter(|p| p.is_absolute() && !p.as_os_str().is_empty())
        };
        abs(std::env::var_os("XDG_CACHE_HOME"))
            .or_else(|| abs(std::env::var_os("HOME")).map(|h| h.join(".cache")))
            .map(|c| c.join("profkit").join("symbols"))
    }

    /// The options for `dir` with [`IndexCacheOptions::DEFAULT_MAX_BYTES`].
    pub fn new(dir: impl Into<PathBuf>) -> IndexCacheOptions {
        IndexCacheOptions {
            dir: dir.into(),
            max_bytes: Self::DEFAULT_MAX_BYTES,
            defer_builds: false,
        }
    }
}

/// Counters of the index, read into [`crate::CacheStats`].
#[derive(Default)]
pub(crate) struct Counters {
    pub hits: AtomicUsize,
    pub written: AtomicUsize,
    pub rejected: AtomicUsize,
    pub evicted: AtomicUsize,
    pub not_written: AtomicUsize,
}

/// The directory, held open, or why it is not used.
type Dir = Result<File, String>;

/// The index of one symbolizer: its options, its directory (checked once, when first
/// needed) and counters. `Sync`.
pub(crate) struct IndexStore {
    opts: IndexCacheOptions,
    /// Demangled names are wanted: stored when building, used when reading (an entry
    /// without them serves too: the names shown are demangled then).
    pub demangle: bool,
    dir: OnceLock<Dir>,
    /// Cleared after a write failed for want of room or permission: then misses are
    /// answered without building the whole table.
    writable: AtomicBool,
    euid: u32,
    seq: AtomicU64,
    pub counters: Counters,
}

/// What a read of an entry found.
pub(crate) enum Found {
    /// A checked entry for this very file.
    Hit(Box<Index>),
    /// None.
    Miss,
    /// One that must not be used (counted): rebuild it.
    Rejected,
}

/// Temporaries older than this are left-overs of a crash, deleted by eviction.
const STALE_TEMPORARY: Duration = Duration::from_secs(3600);
/// Entries are `ID-IDENTITY.idx`; temporaries `.tmp-PID-N`.
const SUFFIX: &str = ".idx";
const TEMP_PREFIX: &str = ".tmp-";

/// FNV-1a, 64 bits: a stable hash for entry names (never trusted: the entry's contents
/// are compared).
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

impl IndexStore {
    pub fn new(opts: IndexCacheOptions, demangle: bool) -> IndexStore {
        IndexStore {
            opts,
            demangle,
            dir: OnceLock::new(),
            writable: AtomicBool::new(true),
            euid: rustix::process::geteuid().as_raw(),
            seq: AtomicU64::new(0),
            counters: Counters::default(),
        }
    }

    /// The directory, made and checked when first asked for.
    fn dir(&self) -> &Dir {
        self.dir.get_or_init(|| open_dir(&self.opts.dir, self.euid))
    }

    /// Why the directory is not used, if it is not.
    pub fn refused(&self) -> Option<&str> {
        self.dir().as_ref().err().map(String::as_str)
    }

    /// True if the directory was looked at and refused (without looking at it now).
    pub fn dir_checked_and_refused(&self) -> bool {
        self.dir.get().is_some_and(Result::is_err)
    }

    /// True if the directory is used.
    pub fn usable(&self) -> bool {
        self.dir().is_ok()
    }

    /// True if misses should build and write entries.
    pub fn writable(&self) -> bool {
        self.usable() && self.writable.load(Ordering::Relaxed)
    }

    /// True (and counted) if a miss that could be written is left to a
    /// builder instead ([`IndexCacheOptions::defer_builds`]).
    pub fn defer(&self) -> bool {
        let defer = self.opts.defer_builds && self.writable();
        if defer {
            DEFERRED.fetch_add(1, Ordering::Relaxed);
        }
        defer
    }

    /// The entry name of the file at `path` with identity `id` and build-id `build_id`.
    pub fn entry_name(path: &Path, build_id: Option<&[u8]>, id: &Identity) -> String {
        let who = match build_id {
            Some(b) if !b.is_empty() && b.len() <= 64 => crate::elf::hex(b),
            Some(b) => format!("long-{:016x}", fnv(b)),
            None => {
                use std::os::unix::ffi::OsStrExt;
                format!("nobid-{:016x}", fnv(path.as_os_str().as_bytes()))
            }
        };
        format!("{who}-{:016x}{SUFFIX}", fnv(&id.to_bytes()))
    }

    /// Reads the entry `name` and checks it is the one for the file of identity `id` and
    /// build-id `build_id` (raw names serve demangled reports too: the names shown are
    /// demangled then).
    pub fn read(&self, name: &str, id: &Identity, build_id: Option<&[u8]>) -> Found {
        let Ok(dir) = self.dir() else {
            return Found::Miss;
        };
        let reject = || {
            self.counters.rejected.fetch_add(1, Ordering::Relaxed);
            Found::Rejected
        };
        let (file, meta) = match crate::files::open_in_dir(
            dir,
            &self.opts.dir,
            name,
            format::MAX_ENTRY_BYTES,
            self.euid,
        ) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Found::Miss,
            // A link, not a regular file, another owner, too large, unreadable.
            Err(_) => return reject(),
        };
        if meta.mode() & 0o022 != 0 {
            return reject();
        }
        // Recently used: the last to be evicted.
        let _ = file.set_modified(SystemTime::now());
        let index = match format::read(file, meta.len()) {
            Ok(ix) => ix,
            Err(_) => return reject(),
        };
        let f = &index.facts;
        if f.binary != *id || f.build_id.as_deref() != build_id {
            return reject();
        }
        Found::Hit(Box::new(index))
    }

    /// Counts an entry not written because its table is larger than an
    /// entry holds.
    pub fn count_not_written(&self) {
        self.counters.not_written.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts an entry found but not usable after all (its debug file is another).
    pub fn count_rejected(&self) {
        self.counters.rejected.fetch_add(1, Ordering::Relaxed);
    }

    pub fn count_hit(&self) {
        self.counters.hits.fetch_add(1, Ordering::Relaxed);
    }

    /// Writes the entry `name` (`bytes`): a temporary of ours, renamed over the name.
    /// Then evicts the oldest entries past `max_bytes`. Failures are counted.
    pub fn write(&self, name: &str, bytes: Option<&[u8]>) {
        let not_written = || {
            self.counters.not_written.fetch_add(1, Ordering::Relaxed);
        };
        let Ok(dir) = self.dir() else { return };
        let Some(bytes) = bytes.filter(|b| b.len() as u64 <= self.opts.max_bytes) else {
            return not_written();
        };
        let temp = format!(
            "{TEMP_PREFIX}{}-{}",
            std::process::id(),
            self.seq.fetch_add(1, Ordering::Relaxed)
        );
        let result = (|| -> std::io::Result<()> {
            let fd = rustix::fs::openat(
                dir,
                temp.as_str(),
                OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::from_raw_mode(0o600),
            )?;
            let written = File::from(fd).write_all(bytes);
            if written.is_ok() {
                rustix::fs::renameat(dir, temp.as_str(), dir, name)?;
            }
            written
        })();
        match result {
            Ok(()) => {
                self.counters.written.fetch_add(1, Ordering::Relaxed);
                self.evict(dir);
            }
            Err(e) => {
                let _ = rustix::fs::unlinkat(dir, temp.as_str(), AtFlags::empty());
                // No room or no permission: it will not be better for this report.
                if matches!(
                    e.raw_os_error(),
                    Some(libc::EROFS | libc::EACCES | libc::EPERM | libc::ENOSPC | libc::EDQUOT)
                ) {
                    self.writable.store(false, Ordering::Relaxed);
                }
                not_written();
            }
        }
    }

    /// Deletes the oldest entries (by mtime) while the entries (regular files of ours
    /// named as entries) hold more than `max_bytes`; and temporaries left by a crash.
    fn evict(&self, dir: &File) {
        // (Its own open of the directory: its own position in the listing.)
        let Ok(listing) = rustix::fs::Dir::read_from(dir) else {
            return;
        };
        let now = SystemTime::now();
        let mut entries = Vec::new();
        let mut total = 0u64;
        for e in listing.flatten() {
            let Ok(name) = e.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            let temporary = name.starts_with(TEMP_PREFIX);
            if !temporary && (name.starts_with('.') || !name.ends_with(SUFFIX)) {
                continue;
            }
            let Ok(st) = rustix::fs::statat(dir, name.as_str(), AtFlags::SYMLINK_NOFOLLOW) else {
                continue;
            };
            let regular = rustix::fs::FileType::from_raw_mode(st.st_mode)
                == rustix::fs::FileType::RegularFile;
            if !regular || st.st_uid != self.euid {
                continue;
            }
            let mtime = (st.st_mtime, st.st_mtime_nsec);
            if temporary {
                let at = SystemTime::UNIX_EPOCH
                    + Duration::from_secs(u64::try_from(mtime.0).unwrap_or(0));
                if now
                    .duration_since(at)
                    .is_ok_and(|age| age > STALE_TEMPORARY)
                {
                    let _ = rustix::fs::unlinkat(dir, name.as_str(), AtFlags::empty());
                }
                continue;
            }
            let size = st.st_size as u64;
            total = total.saturating_add(size);
            entries.push((mtime, name, size));
        }
        if total <= self.opts.max_bytes {
            return;
        }
        entries.sort();
        for (_, name, size) in entries {
            if total <= self.opts.max_bytes {
                break;
            }
            if rustix::fs::unlinkat(dir, name.as_str(), AtFlags::empty()).is_ok() {
                total -= size;
                self.counters.evicted.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// The lock a builder run holds while it writes entries
/// ([`IndexCacheOptions::defer_builds`]): one builder at a time per cache
/// directory, so reports run back to back do not start one each.
#[derive(Debug)]
pub struct BuilderLock {
    _file: File,
}

/// Takes the builder lock of `opts`'s directory (`.build.lock` in it, a
/// regular file of ours opened without following a link); `wait`: until the
/// builder holding it is done, else not at all. `None` when another builder
/// holds it (without `wait`), or the directory is not used (then there is
/// nothing to build).
pub fn builder_lock(opts: &IndexCacheOptions, wait: bool) -> Option<BuilderLock> {
    let euid = rustix::process::geteuid().as_raw();
    let dir = open_dir(&opts.dir, euid).ok()?;
    let fd = rustix::fs::openat(
        &dir,
        ".build.lock",
        OFlags::RDWR | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC,
        Mode::from_raw_mode(0o600),
    )
    .ok()?;
    let st = rustix::fs::fstat(&fd).ok()?;
    if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::RegularFile
        || st.st_uid != euid
    {
        return None;
    }
    let how = if wait {
        rustix::fs::FlockOperation::LockExclusive
    } else {
        rustix::fs::FlockOperation::NonBlockingLockExclusive
    };
    rustix::fs::flock(&fd, how).ok()?;
    Some(BuilderLock {
        _file: File::from(fd),
    })
}

/// Makes `path` (0700, parents too) if missing, opens it without following a link, and
/// checks it is a directory owned by `euid`, not writable by group or others.
fn open_dir(path: &Path, euid: u32) -> Dir {
    let shown = path.display();
    if let Err(e) = std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(path)
    {
        return Err(format!(
            "symbol index cache {shown} not used: cannot create it: {e}"
        ));
    }
    let dir = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
        .map_err(|e| {
            // O_NOFOLLOW | O_DIRECTORY on a link: ELOOP or ENOTDIR.
            let link = std::fs::symlink_metadata(path).is_ok_and(|m| m.is_symlink());
            let why = if link {
                "a symbolic link".to_owned()
            } else {
                e.to_string()
            };
            format!("symbol index cache {shown} not used: {why}")
        })?;
    let meta = dir
        .metadata()
        .map_err(|e| format!("symbol index cache {shown} not used: {e}"))?;
    if !meta.is_dir() {
        return Err(format!(
            "symbol index cache {shown} not used: not a directory"
        ));
    }
    if meta.uid() != euid {
        return Err(format!(
            "symbol index cache {shown} not used: owned by uid {}, not by uid {euid}",
            meta.uid()
        ));
    }
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Err(format!(
            "symbol index cache {shown} not used: writable by group or others (mode {mode:04o})"
        ));
    }
    Ok(dir)
}
