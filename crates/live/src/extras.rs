//! Session extras: what a later report needs that the system will not keep.

use profkit_eventlog::{CookieKind, Event, SessionReader};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Name of the kernel symbol table's copy in the session directory.
pub const KALLSYMS_COPY: &str = "kallsyms";

/// Where the extras are copied from (the real system by default; tests
/// point these at fake files).
#[derive(Debug, Clone)]
pub struct ExtrasSources {
    /// The kernel's symbol table (`/proc/kallsyms`).
    pub kallsyms: PathBuf,
    /// Where JIT runtimes write `perf-PID.map` (`/tmp`).
    pub perf_map_dir: PathBuf,
}

impl Default for ExtrasSources {
    fn default() -> Self {
        ExtrasSources {
            kallsyms: "/proc/kallsyms".into(),
            perf_map_dir: "/tmp".into(),
        }
    }
}

/// Whether `name` is a session extra (an archive packs these).
pub fn is_extra(name: &str) -> bool {
    name == KALLSYMS_COPY || (name.starts_with("perf-") && name.ends_with(".map"))
}

/// Copies next to `session` (the session file) the kernel's symbol table
/// (root-only, 0600) and the JIT maps of sampled processes with anonymous
/// code (`perf-PID.map` vanishes with them). Best effort: a missing source
/// is skipped, and a copy is all or nothing (a partial one would mislead a
/// report). Returns the names copied.
pub fn save_session_extras(session: &Path, from: &ExtrasSources) -> Vec<String> {
    let mut saved = Vec::new();
    let Some(dir) = session.parent() else {
        return saved;
    };
    let mut copy = |src: &Path, name: &str| {
        if copy_whole(src, &dir.join(name)) {
            saved.push(name.to_owned());
        }
    };
    copy(&from.kallsyms, KALLSYMS_COPY);
    let Ok(r) = SessionReader::open(session) else {
        return saved;
    };
    let mut pids = BTreeSet::new();
    for c in r.chunks() {
        let _ = r.for_each_sample(
            c,
            |_| {},
            |m| {
                if let Event::CookieDef(e) = m {
                    if e.kind == CookieKind::Anon {
                        pids.extend(e.pid);
                    }
                }
            },
        );
    }
    for pid in pids {
        let name = format!("perf-{pid}.map");
        copy(&from.perf_map_dir.join(&name), &name);
    }
    saved
}

/// Copies `from` to a new 0600 file `to` (replacing it, never following a
/// link); removes the copy if it could not be completed.
fn copy_whole(from: &Path, to: &Path) -> bool {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let Ok(data) = std::fs::read(from) else {
        return false;
    };
    let _ = std::fs::remove_file(to);
    let Ok(mut f) = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(to)
    else {
        return false;
    };
    if f.write_all(&data).and_then(|_| f.sync_all()).is_err() {
        let _ = std::fs::remove_file(to);
        return false;
    }
    true
}
