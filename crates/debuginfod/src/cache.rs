//! The cache: elfutils' layout, checked entries, atomic publication and
//! the negative cache.
//!
//! ```text
//!   CACHE/                      0700, ours, not group/world-writable
//!     cache_miss_s              seconds a "not found" is believed (600)
//!     HEXID/                    0700
//!       debuginfo               0600, build-id checked before publication
//!       executable
//!       source##usr##src##a.c   a source, its path escaped
//!       debuginfo               or an empty 0000 file: "no server has it"
//!       .profkit-tmp.XXXXXXXX   a download in progress (O_EXCL, 0600)
//! ```

use crate::{hex, Error, Kind};
use profkit_untrusted::{open_untrusted, Opened, Policy};
use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// Seconds a negative entry is believed when the cache has no
/// `cache_miss_s` file (elfutils' `cache_miss_default_s`).
pub const DEFAULT_CACHE_MISS: Duration = Duration::from_secs(600);

/// The file in the cache root holding the negative entries' lifetime.
pub const CACHE_MISS_FILE: &str = "cache_miss_s";

/// The name of a source's cache file: `source` followed by its path
/// escaped as elfutils 0.188 does (debuginfod-client.c,
/// `debuginfod_query_server`: "copy the filename to suffix, s,/,#,g"):
/// each `/` becomes `##` and each `#` becomes `#_`, so the name holds no
/// `/` and cannot leave the build-id directory, and distinct paths give
/// distinct names. (elfutils 0.192 changed to a hashed name for long
/// paths; gdb and perf of Debian bookworm use this one.)
pub fn source_name(path: &str) -> String {
    let mut name = String::with_capacity(6 + path.len() + 8);
    name.push_str("source");
    for c in path.chars() {
        match c {
            '/' => name.push_str("##"),
            '#' => name.push_str("#_"),
            c => name.push(c),
        }
    }
    name
}

/// The file name of `kind` in its build-id directory.
pub fn file_name(kind: &Kind) -> String {
    match kind {
        Kind::Debuginfo => "debuginfo".into(),
        Kind::Executable => "executable".into(),
        Kind::Source(p) => source_name(p),
    }
}

/// The effective user, who must own the cache and its files.
pub fn euid() -> u32 {
    rustix::process::geteuid().as_raw()
}

/// The cache root, created 0700 if missing; refused if it is not a
/// directory, not ours, or group/world-writable.
pub fn root(cache: &Path) -> Result<(), Error> {
    if let Err(e) = DirBuilder::new().recursive(true).mode(0o700).create(cache) {
        return Err(Error::Cache {
            path: cache.to_owned(),
            why: format!(
                "cannot create it ({e}); set DEBUGINFOD_CACHE_PATH to a directory of yours"
            ),
        });
    }
    let meta = fs::metadata(cache).map_err(|source| Error::Io {
        path: cache.to_owned(),
        source,
    })?;
    private_dir(cache, &meta)
}

/// The cache root if it exists (nothing is created): `Ok(false)` when it
/// does not; refused as [`root`] refuses.
pub fn existing_root(cache: &Path) -> Result<bool, Error> {
    match fs::metadata(cache) {
        Ok(meta) => private_dir(cache, &meta).map(|()| true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(source) => Err(Error::Io {
            path: cache.to_owned(),
            source,
        }),
    }
}

fn private_dir(path: &Path, meta: &fs::Metadata) -> Result<(), Error> {
    let why = if !meta.is_dir() {
        "not a directory".to_owned()
    } else if meta.uid() != euid() {
        format!("owned by uid {}, not by uid {}", meta.uid(), euid())
    } else if meta.mode() & 0o022 != 0 {
        format!("mode {:o}: others may write in it", meta.mode() & 0o7777)
    } else {
        return Ok(());
    };
    Err(Error::Cache {
        path: path.to_owned(),
        why: format!(
            "{why}; not used (chmod 700 it, or set DEBUGINFOD_CACHE_PATH to a private directory)"
        ),
    })
}

/// The build-id directory, created 0700 if missing and checked.
pub fn id_dir(cache: &Path, build_id: &[u8]) -> Result<PathBuf, Error> {
    let dir = cache.join(hex(build_id));
    match DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(source) => return Err(Error::Io { path: dir, source }),
    }
    let meta = fs::symlink_metadata(&dir).map_err(|source| Error::Io {
        path: dir.clone(),
        source,
    })?;
    private_dir(&dir, &meta)?;
    Ok(dir)
}

/// What the final path of an entry holds.
pub enum Entry {
    /// Nothing.
    Absent,
    /// A fresh negative entry: no server had it.
    Missing,
    /// A negative entry older than `cache_miss_s`: to ask again.
    Expired,
    /// Something else: a file to check.
    Present,
}

/// What is at `path` (not following a link).
pub fn entry(cache: &Path, path: &Path) -> Entry {
    let Ok(meta) = fs::symlink_metadata(path) else {
        return Entry::Absent;
    };
    if !meta.is_file() || meta.len() != 0 || meta.mode() & 0o777 != 0 || meta.uid() != euid() {
        return Entry::Present;
    }
    let age = meta
        .modified()
        .ok()
        .and_then(|m| SystemTime::now().duration_since(m).ok())
        .unwrap_or(Duration::ZERO);
    if age < cache_miss(cache) {
        Entry::Missing
    } else {
        Entry::Expired
    }
}

/// The negative entries' lifetime: `CACHE/cache_miss_s` (created with the
/// default if missing, as elfutils' `debuginfod_config_cache` does).
/// elfutils believes an entry while `now - mtime <= cache_miss_s` in
/// whole seconds; here while its age is below it, so 0 means "always ask".
pub fn cache_miss(cache: &Path) -> Duration {
    let path = cache.join(CACHE_MISS_FILE);
    let policy = Policy::regular().no_follow().owner(euid()).max_bytes(64);
    match open_untrusted(&path, &policy) {
        Ok(o) => o
            .read_all()
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .and_then(|s| s.trim().parse::<u64>().ok())
            .map_or(DEFAULT_CACHE_MISS, Duration::from_secs),
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            let _ = create_new(&path, 0o600).and_then(|mut f| {
                io::Write::write_all(
                    &mut f,
                    format!("{}\n", DEFAULT_CACHE_MISS.as_secs()).as_bytes(),
                )
            });
            DEFAULT_CACHE_MISS
        }
        Err(_) => DEFAULT_CACHE_MISS,
    }
}

/// Creates `path` with `O_CREAT | O_EXCL` (never an existing file or a
/// link's target) and `mode`.
pub fn create_new(path: &Path, mode: u32) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(mode)
        .open(path)
}

/// A temporary file in `dir`, with a name nobody can guess in advance.
pub fn temp(dir: &Path) -> Result<(PathBuf, File), Error> {
    use std::hash::{BuildHasher, Hasher};
    let mut last = None;
    for attempt in 0..16u32 {
        let mut h = std::collections::hash_map::RandomState::new().build_hasher();
        h.write_u32(attempt);
        h.write_u32(std::process::id());
        let path = dir.join(format!(".profkit-tmp.{:016x}", h.finish()));
        match create_new(&path, 0o600) {
            Ok(f) => return Ok((path, f)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => last = Some(e),
            Err(source) => return Err(Error::Io { path, source }),
        }
    }
    Err(Error::Io {
        path: dir.to_owned(),
        source: last.unwrap_or_else(|| io::Error::other("no temporary name free")),
    })
}

/// Removes a temporary file when dropped, unless kept.
pub struct TempGuard(pub Option<PathBuf>);

impl Drop for TempGuard {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = fs::remove_file(p);
        }
    }
}

/// Opens a cache file under the untrusted rules: a regular file, no
/// link, ours, dense, at most `max` bytes.
pub fn open_entry(path: &Path, max: u64) -> io::Result<Opened> {
    let policy = Policy::regular()
        .no_follow()
        .owner(euid())
        .dense()
        .max_bytes(max);
    open_untrusted(path, &policy)
}

/// The build-id of the ELF file `file`, reading its headers and notes only.
pub fn file_build_id(file: &File) -> Option<Vec<u8>> {
    let cache = object::ReadCache::new(file);
    profkit_elf::build_id(&cache)
}

/// Whether an opened entry is usable for `kind`: an ELF one must carry
/// `build_id`.
pub fn verify(opened: &Opened, build_id: &[u8], kind: &Kind) -> Result<(), Option<Vec<u8>>> {
    if matches!(kind, Kind::Source(_)) {
        return Ok(());
    }
    match file_build_id(&opened.file) {
        Some(found) if found == build_id => Ok(()),
        other => Err(other),
    }
}

/// Writes the negative entry at `path`: an empty file of mode 0000,
/// replacing an expired one.
pub fn write_missing(dir: &Path, path: &Path) -> Result<(), Error> {
    let (tmp, file) = temp(dir)?;
    let guard = TempGuard(Some(tmp.clone()));
    let io = |source| Error::Io {
        path: tmp.clone(),
        source,
    };
    file.set_permissions(fs::Permissions::from_mode(0o000))
        .map_err(io)?;
    drop(file);
    match fs::hard_link(&tmp, path) {
        Ok(()) => {}
        // Someone published meanwhile (a file, or their own negative entry).
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(source) => {
            return Err(Error::Io {
                path: path.to_owned(),
                source,
            })
        }
    }
    drop(guard);
    Ok(())
}
