//! The cgroup of each sample: the id → path table (seeded by walking the
//! cgroup v2 hierarchy at start, then `PERF_RECORD_CGROUP` for cgroups
//! created during the session) and, on kernels without
//! `PERF_SAMPLE_CGROUP`, each process's cgroup from `/proc/PID/cgroup`.

use crate::process::IntMap;
use profkit_perf::CgroupRecording;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// The most cgroups the table holds (a walk stops there; a record past it
/// is not kept: its samples are reported under their id).
pub const MAX_CGROUPS: usize = 1 << 16;

/// The stage's cgroup state.
#[derive(Debug, Default)]
pub(crate) struct Cgroups {
    pub mode: CgroupRecording,
    pub(crate) paths: IntMap<u64, String>,
    /// Ids whose `CgroupDef` went into the current file.
    pub(crate) emitted: IntMap<u64, ()>,
    pub(crate) mount: Option<PathBuf>,
    /// Proc mode: each process's cgroup id (0: unknown).
    pub(crate) per_pid: IntMap<u32, u64>,
}

impl Cgroups {
    pub fn on(&self) -> bool {
        self.mode != CgroupRecording::Off
    }

    /// Walks the cgroup v2 hierarchy mounted at `mount` (or this system's)
    /// into the table.
    pub fn seed(&mut self, mount: Option<PathBuf>) {
        self.mount = mount.or_else(profkit_perf::cgroup2_mount);
        let Some(root) = self.mount.clone() else {
            return;
        };
        let mut todo = vec![(root, String::from("/"))];
        while let Some((dir, path)) = todo.pop() {
            if self.paths.len() >= MAX_CGROUPS {
                break;
            }
            let Ok(md) = std::fs::metadata(&dir) else {
                continue;
            };
            self.paths.insert(md.ino(), path.clone());
            let Ok(rd) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in rd.flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    let name = e.file_name().to_string_lossy().into_owned();
                    let child = if path == "/" {
                        format!("/{name}")
                    } else {
                        format!("{path}/{name}")
                    };
                    todo.push((e.path(), child));
                }
            }
        }
    }

    /// A `PERF_RECORD_CGROUP`.
    pub fn insert(&mut self, id: u64, path: &[u8]) {
        if self.paths.len() < MAX_CGROUPS || self.paths.contains_key(&id) {
            let mut p = String::from_utf8_lossy(path).into_owned();
            if p.len() > profkit_eventlog::MAX_CGROUP_PATH {
                let mut n = profkit_eventlog::MAX_CGROUP_PATH;
                while !p.is_char_boundary(n) {
                    n -= 1;
                }
                p.truncate(n);
            }
            self.paths.insert(id, p);
        }
    }

    /// The definition to write before the first sample in cgroup `id` of
    /// this file, if any. An id whose path is not known yet is not marked
    /// written: rings are drained one CPU after another, so a sample in a
    /// cgroup made during the session can be read before the
    /// `PERF_RECORD_CGROUP` naming it (another CPU's ring); the definition
    /// then follows at its next sample (reports collect definitions from
    /// the whole session).
    pub fn define(&mut self, id: u64) -> Option<(u64, String)> {
        if id == 0 || self.emitted.contains_key(&id) {
            return None;
        }
        let path = self.paths.get(&id)?.clone();
        self.emitted.insert(id, ());
        Some((id, path))
    }

    /// Forgets what the current file holds (a new file after reset).
    pub fn reset(&mut self) {
        self.emitted.clear();
    }

    /// Proc mode: the cgroup of process `pid`, read from
    /// `PROC/PID/cgroup` once.
    pub fn of_pid(&mut self, proc_root: &Path, pid: u32) -> u64 {
        if let Some(&id) = self.per_pid.get(&pid) {
            return id;
        }
        let id = self.read_pid(proc_root, pid).unwrap_or(0);
        if self.per_pid.len() >= MAX_CGROUPS {
            self.per_pid.clear();
        }
        self.per_pid.insert(pid, id);
        id
    }

    fn read_pid(&mut self, proc_root: &Path, pid: u32) -> Option<u64> {
        let text = std::fs::read_to_string(proc_root.join(pid.to_string()).join("cgroup")).ok()?;
        let path = text.lines().find_map(|l| l.strip_prefix("0::"))?.trim_end();
        let mount = self.mount.as_ref()?;
        let dir = mount.join(path.trim_start_matches('/'));
        let id = std::fs::metadata(dir).ok()?.ino();
        if !self.paths.contains_key(&id) {
            self.insert(id, path.as_bytes());
        }
        Some(id)
    }

    /// A process exited (proc mode forgets it).
    pub fn exit(&mut self, pid: u32) {
        self.per_pid.remove(&pid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_from_a_hierarchy_and_reads_proc_cgroup() {
        let d = tempfile::tempdir().unwrap();
        let mount = d.path().join("cg");
        std::fs::create_dir_all(mount.join("a/b")).unwrap();
        std::fs::create_dir_all(mount.join("c")).unwrap();
        let mut c = Cgroups {
            mode: CgroupRecording::Proc,
            ..Default::default()
        };
        c.seed(Some(mount.clone()));
        let ino = |p: &str| std::fs::metadata(mount.join(p)).unwrap().ino();
        assert_eq!(c.define(ino("a/b")), Some((ino("a/b"), "/a/b".into())));
        assert_eq!(c.define(ino("a/b")), None, "once per file");
        assert_eq!(c.define(ino("")), Some((ino(""), "/".into())));
        c.reset();
        assert!(c.define(ino("a/b")).is_some());
        let proc = d.path().join("proc");
        std::fs::create_dir_all(proc.join("42")).unwrap();
        std::fs::write(proc.join("42/cgroup"), "0::/c\n").unwrap();
        assert_eq!(c.of_pid(&proc, 42), ino("c"));
        assert_eq!(c.of_pid(&proc, 43), 0);
        // A sample before the record naming its cgroup (another CPU's
        // ring): defined once the path is known.
        assert_eq!(c.define(7), None);
        c.insert(7, b"/new");
        assert_eq!(c.define(7), Some((7, "/new".into())));
        assert_eq!(c.define(7), None);
        assert_eq!(c.define(0), None);
    }
}
