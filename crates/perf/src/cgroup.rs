//! cgroup v2: where the hierarchy is mounted, which directory a `-G` path
//! names, and how each sample's cgroup is recorded.

use crate::error::{Error, Result};
use std::path::{Path, PathBuf};

/// `statfs.f_type` of a cgroup v2 file system (`CGROUP2_SUPER_MAGIC`).
pub const CGROUP2_SUPER_MAGIC: i64 = 0x6367_7270;

/// How a session records the cgroup of each sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CgroupRecording {
    /// Not at all.
    #[default]
    Off,
    /// `PERF_SAMPLE_CGROUP` in every sample and `PERF_RECORD_CGROUP` for
    /// the cgroups created during the session (kernel 5.7+).
    Sample,
    /// The fallback for older kernels: the sync stage reads
    /// `/proc/PID/cgroup` once per process (a process that moves to another
    /// cgroup later keeps its first one).
    Proc,
}

/// The mount point of the cgroup v2 hierarchy, from `mountinfo` (the
/// text of `/proc/self/mountinfo`): the first `cgroup2` mount.
pub fn cgroup2_mount_in(mountinfo: &str) -> Option<PathBuf> {
    mountinfo.lines().find_map(|line| {
        let (pre, post) = line.split_once(" - ")?;
        if post.split_whitespace().next()? != "cgroup2" {
            return None;
        }
        let mount = pre.split_whitespace().nth(4)?;
        Some(PathBuf::from(unescape_mountinfo(mount)))
    })
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape_mountinfo(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The cgroup v2 mount point of this system (from `/proc/self/mountinfo`).
pub fn cgroup2_mount() -> Option<PathBuf> {
    cgroup2_mount_in(&std::fs::read_to_string("/proc/self/mountinfo").ok()?)
}

/// True when `dir` is a directory on a cgroup v2 file system.
pub fn is_cgroup2_dir(dir: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return false;
    };
    let mut st: libc::statfs = unsafe_zeroed_statfs();
    // SAFETY:
    // - `c` is a NUL-terminated path and `st` a writable statfs for the
    //   call; no pointer is kept.
    let r = unsafe { libc::statfs(c.as_ptr(), &mut st) };
    // f_type is i64 on x86-64 but narrower elsewhere.
    #[allow(clippy::unnecessary_cast)]
    let fs = st.f_type as i64;
    r == 0 && fs == CGROUP2_SUPER_MAGIC && dir.is_dir()
}

fn unsafe_zeroed_statfs() -> libc::statfs {
    // SAFETY:
    // - statfs is a plain C struct of integers, valid when all zero.
    unsafe { std::mem::zeroed() }
}

/// The cgroup directory `-G PATH` names, as perf reads it: a path under
/// the cgroup v2 mount (`/a/b` or `a/b`, as `/proc/PID/cgroup` spells
/// it), or the directory's absolute path. An error says why when it is
/// not a cgroup v2 directory.
pub fn cgroup_dir(path: &Path) -> Result<PathBuf> {
    let mount = cgroup2_mount();
    let rel = path.strip_prefix("/").unwrap_or(path);
    let mut tried = Vec::new();
    if let Some(m) = &mount {
        let under = m.join(rel);
        if is_cgroup2_dir(&under) {
            return Ok(under);
        }
        tried.push(under);
    }
    if path.is_absolute() && is_cgroup2_dir(path) {
        return Ok(path.to_path_buf());
    }
    Err(Error::Config(match mount {
        None => format!(
            "-G {}: no cgroup v2 hierarchy is mounted (profkit samples cgroups of the \
             unified hierarchy only)",
            path.display()
        ),
        Some(m) => format!(
            "-G {}: not a cgroup v2 directory (tried {}; the cgroup v2 hierarchy is mounted \
             at {}): give the cgroup's path as in /proc/PID/cgroup, e.g. /system.slice",
            path.display(),
            tried
                .iter()
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", "),
            m.display()
        ),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_cgroup2_mount() {
        let mi = "24 30 0:22 / /sys rw,nosuid shared:7 - sysfs sysfs rw\n\
                  35 24 0:30 / /sys/fs/cgroup rw shared:9 - cgroup cgroup rw,memory\n\
                  36 24 0:31 / /sys/fs/cgroup/uni\\040fied rw shared:10 - cgroup2 cgroup2 rw\n";
        assert_eq!(
            cgroup2_mount_in(mi),
            Some(PathBuf::from("/sys/fs/cgroup/uni fied"))
        );
        assert_eq!(
            cgroup2_mount_in("1 2 0:1 / / rw - ext4 /dev/sda rw\n"),
            None
        );
        assert_eq!(cgroup2_mount_in("garbage\n - \n"), None);
    }

    #[test]
    fn a_path_that_is_no_cgroup_is_refused_with_the_reason() {
        let e = cgroup_dir(Path::new("/no/such/profkit-cgroup"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("-G /no/such/profkit-cgroup"), "{e}");
        let e = cgroup_dir(Path::new("/tmp")).unwrap_err().to_string();
        assert!(
            e.contains("not a cgroup v2 directory") || e.contains("no cgroup v2"),
            "{e}"
        );
        if let Some(m) = cgroup2_mount() {
            assert_eq!(cgroup_dir(Path::new("/")).unwrap(), m.join(""));
            assert_eq!(cgroup_dir(&m).unwrap(), m);
        }
    }
}
