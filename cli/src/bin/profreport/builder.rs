//! The symbol index's background builder. A report whose binaries had no
//! index entry answers without one (by range, as `--no-cache` does), and
//! after its output starts `profreport --build-index` with its own
//! arguments: that run symbolizes the same binaries with the misses built
//! and written (names demangled once, into the entry), outputs nothing,
//! at the lowest CPU priority, one builder per cache directory at a time.
//! So a cold report costs what a report without the index costs, and the
//! next one finds the entries.

use std::process::{Command, Stdio};

use profkit_report::{builder_lock, builds_deferred, BuilderLock, IndexCacheOptions};

/// Starts the builder if this process left index misses to it. Detached:
/// its own process group (a Ctrl-C at the terminal is for the report), no
/// standard input or output, no debuginfod server, not waited for. A
/// builder that cannot start leaves the next report to answer without the
/// index again. `--build-index` goes first: after a `--`, it would be a
/// profile spec.
pub(super) fn start_if_needed() {
    if builds_deferred() == 0 {
        return;
    }
    let Ok(exe) = std::env::current_exe() else {
        return;
    };
    use std::os::unix::process::CommandExt;
    let _ = Command::new(exe)
        .arg("--build-index")
        .args(std::env::args_os().skip(1))
        .env(BACKGROUND, "1")
        // What the report fetched is in the debuginfod cache; the builder
        // asks no server (in the background, unasked).
        .env_remove("DEBUGINFOD_URLS")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn();
}

/// Set in the environment of a builder a report started.
const BACKGROUND: &str = "PROFKIT_INDEX_BUILDER";

/// Enters builder mode (`--build-index`): the cache directory's builder
/// lock, and for a builder a report started the lowest CPU priority. That
/// one gives way to a builder already running (whose entries the next
/// report reads); one run by hand waits for it, so that the entries are
/// there when it returns. `None`: a background builder with nothing to do
/// (no usable cache directory, or a builder at work); `Some(None)`: a run
/// by hand without the lock (no usable cache directory: the report says
/// why).
pub(super) fn enter(cache: Option<&IndexCacheOptions>) -> Option<Option<BuilderLock>> {
    let background = std::env::var_os(BACKGROUND).is_some();
    let lock = cache.and_then(|c| builder_lock(c, !background));
    if background {
        lock.as_ref()?;
        let _ = rustix::process::setpriority_process(None, 19);
    }
    Some(lock)
}
