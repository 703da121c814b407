//! [`SessionLayout`]: the one place that names every file of a session
//! directory, and the `.build-id` path rule.
//!
//! ```text
//! DIR/
//!   session.pkl                 the part being written (a session in one file)
//!   session.NNNNNN.pkl          closed parts of a rotated session (parts)
//!   kallsyms                    the kernel's symbols, trimmed to the session's addresses
//!   perf-PID.map                JIT maps of the sampled processes, copied
//!   debug/.kept/COOKIE          binaries the host could not reach, kept by the recorder
//!                               (by cookie: a copy names only its own file's samples)
//!   debug/.build-id/ab/cdef…    binaries and debug files packed by `profctl archive`
//!   debug/not-kept              PATH: why, for binaries that could not be kept
//!   daemon.lock daemon.pid control.sock daemon.log footer.reserve   the recorder's own
//! ```
//!
//! The recorder writes these names, the reports and `profctl archive` read
//! them; a start removes an earlier session's files by the same names.

use std::path::{Path, PathBuf};

use crate::parts::{part_file_name, CURRENT_PART};

/// The kallsyms copy.
pub const KALLSYMS_FILE: &str = "kallsyms";
/// The directory of kept binaries and debug files (by build-id).
pub const DEBUG_DIR: &str = "debug";
/// The directory in [`DEBUG_DIR`] of binaries the recorder kept, each
/// named by its cookie (16 hex digits).
pub const KEPT_DIR: &str = ".kept";
/// Binaries of other mount namespaces the recorder could not keep, one
/// `PATH: why` line each.
pub const NOT_KEPT_FILE: &str = "debug/not-kept";
/// The lock file: `flock`ed by the running daemon, holding its pid.
pub const LOCK_FILE: &str = "daemon.lock";
/// The running daemon's pid; removed on a clean stop.
pub const PID_FILE: &str = "daemon.pid";
/// The control socket.
pub const CONTROL_SOCKET: &str = "control.sock";
/// The daemon's log.
pub const DAEMON_LOG: &str = "daemon.log";
/// Space set aside so that a full disk still lets the footer be written.
pub const RESERVE_FILE: &str = "footer.reserve";

/// The files of session directory `dir`, by what they are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionLayout {
    dir: PathBuf,
}

impl SessionLayout {
    /// The layout of the session directory `dir`.
    pub fn new(dir: impl Into<PathBuf>) -> SessionLayout {
        SessionLayout { dir: dir.into() }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// `session.pkl`: the part being written, or the whole session.
    pub fn current_part(&self) -> PathBuf {
        self.dir.join(CURRENT_PART)
    }

    /// Closed part `number` (`session.NNNNNN.pkl`).
    pub fn part(&self, number: u64) -> PathBuf {
        self.dir.join(part_file_name(number))
    }

    /// The kallsyms copy.
    pub fn kallsyms(&self) -> PathBuf {
        self.dir.join(KALLSYMS_FILE)
    }

    /// The copy of process `pid`'s JIT map (`perf-PID.map`, the pid as the
    /// host numbers it).
    pub fn perf_map(&self, pid: u32) -> PathBuf {
        self.dir.join(perf_map_name(pid))
    }

    /// The directory of kept binaries (`debug`).
    pub fn debug_dir(&self) -> PathBuf {
        self.dir.join(DEBUG_DIR)
    }

    /// Where an archive packs a binary with `build_id`
    /// (`debug/.build-id/ab/cdef…`).
    pub fn archived_binary(&self, build_id: &[u8]) -> PathBuf {
        build_id_path(&self.debug_dir(), build_id, "")
    }

    /// The directory of the recorder's kept copies (`debug/.kept`).
    pub fn kept_dir(&self) -> PathBuf {
        self.debug_dir().join(KEPT_DIR)
    }

    /// The copy the recorder kept of cookie `cookie`'s file
    /// (`debug/.kept/COOKIE`).
    pub fn kept_copy(&self, cookie: crate::Cookie) -> PathBuf {
        self.kept_dir().join(kept_name(cookie))
    }

    /// The list of binaries that could not be kept.
    pub fn not_kept(&self) -> PathBuf {
        self.dir.join(NOT_KEPT_FILE)
    }

    /// The daemon's log.
    pub fn daemon_log(&self) -> PathBuf {
        self.dir.join(DAEMON_LOG)
    }

    /// Whether `name` (a file directly in the directory) is one of the
    /// extras a recording writes beside its parts (kallsyms, JIT maps, the
    /// kept binaries' directory): what a new start removes.
    pub fn is_extra(name: &str) -> bool {
        name == DEBUG_DIR || Self::is_copied_file(name)
    }

    /// Whether `name` is one of the files a recording copies into the
    /// directory (the kallsyms copy, `perf-PID.map`): what an archive packs
    /// beside the parts.
    pub fn is_copied_file(name: &str) -> bool {
        name == KALLSYMS_FILE || parse_perf_map_name(name).is_some()
    }
}

/// A kept copy's file name: its cookie, 16 hex digits.
pub fn kept_name(cookie: crate::Cookie) -> String {
    format!("{cookie:016x}")
}

/// `perf-PID.map`, the name perf and the runtimes give a JIT map.
pub fn perf_map_name(pid: u32) -> String {
    format!("perf-{pid}.map")
}

/// The pid of a `perf-PID.map` name.
pub fn parse_perf_map_name(name: &str) -> Option<u32> {
    let digits = name.strip_prefix("perf-")?.strip_suffix(".map")?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    // The name a pid has, only: `perf-0042.map` is not pid 42's.
    let pid: u32 = digits.parse().ok()?;
    (pid.to_string() == digits).then_some(pid)
}

/// The `.build-id` rule of gdb, perf and debuginfod: `ROOT/.build-id/ab/
/// cdef…SUFFIX` for build-id `abcdef…` (SUFFIX `.debug` for a debug file,
/// empty for the binary). A build-id shorter than 2 bytes gives
/// `ROOT/.build-id/` + its hex (never used to find anything).
pub fn build_id_path(root: &Path, build_id: &[u8], suffix: &str) -> PathBuf {
    let hex: String = build_id.iter().map(|b| format!("{b:02x}")).collect();
    let (head, tail) = hex.split_at(hex.len().min(2));
    root.join(".build-id")
        .join(head)
        .join(format!("{tail}{suffix}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_the_build_id_rule() {
        let l = SessionLayout::new("/s");
        assert_eq!(l.current_part(), Path::new("/s/session.pkl"));
        assert_eq!(l.part(7), Path::new("/s/session.000007.pkl"));
        assert_eq!(l.kallsyms(), Path::new("/s/kallsyms"));
        assert_eq!(l.perf_map(42), Path::new("/s/perf-42.map"));
        assert_eq!(
            l.archived_binary(&[0xab, 0xcd, 0xef]),
            Path::new("/s/debug/.build-id/ab/cdef")
        );
        assert_eq!(
            l.kept_copy(0xabc),
            Path::new("/s/debug/.kept/0000000000000abc")
        );
        assert_eq!(
            build_id_path(Path::new("/usr/lib/debug"), &[0x01, 0x02], ".debug"),
            Path::new("/usr/lib/debug/.build-id/01/02.debug")
        );
        assert_eq!(l.not_kept(), Path::new("/s/debug/not-kept"));
        for extra in ["kallsyms", "debug", "perf-1.map", "perf-4294967295.map"] {
            assert!(SessionLayout::is_extra(extra), "{extra}");
        }
        for other in [
            "session.pkl",
            "perf-.map",
            "perf-1.map.tmp",
            "perf-x.map",
            "daemon.log",
        ] {
            assert!(!SessionLayout::is_extra(other), "{other}");
        }
    }
}
