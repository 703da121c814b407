//! Unwind tables from a binary's separate debug file.
//!
//! A binary built without unwind tables (`-fno-asynchronous-unwind-tables
//! -fno-unwind-tables`) has its CFI in `.debug_frame` only, and stripping
//! moves that into its separate debug file (`objcopy --only-keep-debug`),
//! which distributions ship under `/usr/lib/debug/.build-id/ab/cdef….debug`
//! and debuginfod servers serve. When a binary whose build-id is known has
//! neither `.eh_frame` nor `.debug_frame`, or an `.eh_frame` that describes
//! only the start files' `_start` (all such a binary gets from gcc:
//! `sections::scant_eh_frame`; it is kept when no debug file serves), its
//! `.debug_frame` is taken
//! from the first usable debug file of, in order ([`DebugFrameSources`]):
//!
//! 1. each of `debug_dirs`: `DIR/.build-id/ab/cdef….debug`
//!    (`profkit_eventlog::build_id_path`; links followed: distributions
//!    link these names to the files, and the directories are root's);
//! 2. the debuginfod client cache: `CACHE/<hex build-id>/debuginfo`
//!    (elfutils' layout), no link as the last component, owned by the
//!    effective user;
//! 3. the fetch hook's answer (a report's import downloads it; the live
//!    daemon never fetches), no link as the last component, owned by the
//!    effective user or root. A read that calls the hook is given up after
//!    `fetch_timeout` instead of [`super::CFI_TIMEOUT`] (counted as timed
//!    out, like any read given up).
//!
//! Every file is opened through `profkit_untrusted::open_untrusted`
//! (regular, non-blocking, at most [`MAX_DEBUG_FILE_BYTES`], not mostly
//! holes) and read by range (headers, then `.debug_frame` only). A build-id
//! is a claim: the debug file must carry the binary's build-id note and
//! the binary's executable PT_LOAD layout (addresses and sizes in memory:
//! `--only-keep-debug` keeps the program headers) or it is not used; one
//! with the build-id but another layout is refused (counted in
//! `UnwindStats::refused`, its reason kept) when no other file serves.
//! Everything else comes from the binary itself: its load segments (the
//! mapping's bias), its code range and its section addresses (a debug
//! file's `.text` is `SHT_NOBITS`). The `.debug_frame` then goes through
//! the same check (`cfi_check`) as a binary's own.

use super::sections::Parsed;
use super::{CfiAnswer, CfiMissing, CfiSections};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// A fetcher of separate debug files: given a build-id, the path of a
/// debug file for it (downloaded from a debuginfod server, say), or None.
/// It runs on the unwind-section reader's thread and may take seconds.
pub type FetchDebugFile = Arc<dyn Fn(&[u8]) -> Option<PathBuf> + Send + Sync>;

/// The system's root of separate debug files.
pub const SYSTEM_DEBUG_DIR: &str = "/usr/lib/debug";

/// [`DebugFrameSources::fetch_timeout`]'s default.
pub const DEFAULT_FETCH_TIMEOUT: Duration = Duration::from_secs(30);

/// Largest separate debug file opened (only its headers and
/// `.debug_frame` are read).
pub const MAX_DEBUG_FILE_BYTES: u64 = 4 << 30;

/// Where the unwinder looks for the separate debug file of a binary that
/// has no unwind tables of its own (module docs), in
/// `SyncOptions::debug_frame`.
#[derive(Clone)]
pub struct DebugFrameSources {
    /// Roots of separate debug files, looked in by build-id
    /// (`DIR/.build-id/ab/cdef….debug`). Default: `/usr/lib/debug`.
    pub debug_dirs: Vec<PathBuf>,
    /// A debuginfod client cache (`CACHE/<hex build-id>/debuginfo`), whose
    /// files must belong to the effective user. Default: None.
    pub debuginfod_cache: Option<PathBuf>,
    /// Asked for a debug file when the directories and cache have none.
    /// Default: None (the live daemon never fetches).
    pub fetch: Option<FetchDebugFile>,
    /// The time box of a read that calls `fetch` (other reads keep
    /// [`super::CFI_TIMEOUT`]). Default: [`DEFAULT_FETCH_TIMEOUT`].
    pub fetch_timeout: Duration,
}

impl Default for DebugFrameSources {
    fn default() -> Self {
        DebugFrameSources {
            debug_dirs: vec![PathBuf::from(SYSTEM_DEBUG_DIR)],
            debuginfod_cache: None,
            fetch: None,
            fetch_timeout: DEFAULT_FETCH_TIMEOUT,
        }
    }
}

impl DebugFrameSources {
    /// Looks nowhere: binaries' own unwind tables only.
    pub fn none() -> Self {
        DebugFrameSources {
            debug_dirs: Vec::new(),
            ..Default::default()
        }
    }
}

impl std::fmt::Debug for DebugFrameSources {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DebugFrameSources")
            .field("debug_dirs", &self.debug_dirs)
            .field("debuginfod_cache", &self.debuginfod_cache)
            .field("fetch", &self.fetch.as_ref().map(|_| "<hook>"))
            .field("fetch_timeout", &self.fetch_timeout)
            .finish()
    }
}

/// Lowercase hex, as elfutils names its cache's directories.
fn hex(build_id: &[u8]) -> String {
    build_id.iter().map(|b| format!("{b:02x}")).collect()
}

/// The unwind sections of the binary `bin` (bytes `data`, build-id `id`,
/// without CFI of its own) with the `.debug_frame` of its separate debug
/// file (module docs); `fetching` is set once the hook is called.
pub(super) fn debug_frame_of<'d, R: object::ReadRef<'d>>(
    bin: &Parsed,
    data: R,
    id: &[u8],
    sources: &DebugFrameSources,
    fetching: &AtomicBool,
) -> CfiAnswer {
    use profkit_untrusted::Policy;
    if id.len() < 2 {
        return Err(CfiMissing::NoCfi);
    }
    let euid = rustix::process::geteuid().as_raw();
    let sized = Policy::regular().max_bytes(MAX_DEBUG_FILE_BYTES).dense();
    let mut refused = None;
    let mut try_one = |path: &Path, policy: &Policy| -> Option<CfiSections> {
        match from_file(bin, data, id, path, policy) {
            Ok(s) => Some(s),
            Err(why @ CfiMissing::Refused(_)) => {
                refused.get_or_insert(why);
                None
            }
            Err(_) => None,
        }
    };
    for dir in &sources.debug_dirs {
        let path = profkit_eventlog::build_id_path(dir, id, ".debug");
        if let Some(s) = try_one(&path, &sized) {
            return Ok(s);
        }
    }
    if let Some(cache) = &sources.debuginfod_cache {
        let path = cache.join(hex(id)).join("debuginfo");
        if let Some(s) = try_one(&path, &sized.clone().no_follow().owner(euid)) {
            return Ok(s);
        }
    }
    if let Some(fetch) = &sources.fetch {
        // From here on the read has the hook's time box (reading what it
        // fetched included).
        fetching.store(true, Ordering::Release);
        if let Some(path) = fetch(id) {
            if let Some(s) = try_one(&path, &sized.clone().no_follow().owner_or_root(euid)) {
                return Ok(s);
            }
        }
    }
    Err(refused.unwrap_or(CfiMissing::NoCfi))
}

/// The binary's sections with the `.debug_frame` of the debug file at
/// `path`, if that is the binary's (module docs): `Unreadable` when it
/// cannot be opened or is another binary's, `Refused` when it claims the
/// build-id with another layout, `NoCfi` when it has no `.debug_frame`.
fn from_file<'d, R: object::ReadRef<'d>>(
    bin: &Parsed,
    data: R,
    id: &[u8],
    path: &Path,
    policy: &profkit_untrusted::Policy,
) -> CfiAnswer {
    let opened =
        profkit_untrusted::open_untrusted(path, policy).map_err(|_| CfiMissing::Unreadable)?;
    let debug = object::read::ReadCache::new(opened.file);
    if profkit_elf::build_id(&debug).as_deref() != Some(id) {
        return Err(CfiMissing::Unreadable);
    }
    let parsed = Parsed::parse(&debug)?;
    let want = bin.code_layout();
    if want.is_empty() || parsed.code_layout() != want {
        return Err(CfiMissing::Refused(format!(
            "its separate debug file {} has its build-id but not its code's layout (not used)",
            path.display()
        )));
    }
    bin.assemble(data, Some((&parsed, &debug)))
}

#[cfg(test)]
mod tests;
