//! The cgroup of each sample: the id → path table (seeded by walking the
//! cgroup v2 hierarchy at start, then `PERF_RECORD_CGROUP` for cgroups
//! created during the session) and, on kernels without
//! `PERF_SAMPLE_CGROUP`, each process's cgroup from `/proc/PID/cgroup`.
//!
//! The table forgets. The kernel says when a cgroup is made, never when
//! it is removed, and any user with a delegated subtree can make and
//! remove 70,000 in six seconds (issue 25): a table that only grew was full
//! for the rest of the run, and root's cgroups made later showed as
//! `[cgroup N]`. So each entry remembers when a sample last used it; a
//! full table drops the half used longest ago (one pass per
//! [`MAX_CGROUPS`]` / 2` insertions, so an insertion costs O(log n)
//! amortized), and a sample in a cgroup the table does not know has its
//! path read again from the hierarchy: a breadth-first walk of directory
//! entries alone (no `stat`), at most one per [`REREAD_EVERY`], looking
//! only for the ids wanted.

use crate::probe::{HostProbe, Probed};
use crate::process::IntMap;
use profkit_perf::CgroupRecording;
use std::os::unix::fs::{DirEntryExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The most cgroups the table holds: a full table drops the half used
/// longest ago (a walk stops there).
pub const MAX_CGROUPS: usize = 1 << 16;

/// The least time between two walks of the hierarchy for cgroups whose
/// paths the table does not hold (dropped, or made before a record named
/// them).
pub const REREAD_EVERY: Duration = Duration::from_secs(2);

/// Ids waiting for a walk, at most.
const MAX_WANTED: usize = 4096;

/// A cgroup's path and when a sample last used it.
#[derive(Debug)]
pub(crate) struct Entry {
    path: String,
    /// The table's use clock at its last use (insertion counts as one).
    used: u64,
}

/// The stage's cgroup state.
#[derive(Debug, Default)]
pub(crate) struct Cgroups {
    pub mode: CgroupRecording,
    pub(crate) paths: IntMap<u64, Entry>,
    /// Ids whose `CgroupDef` went into the current file.
    pub(crate) emitted: IntMap<u64, ()>,
    pub(crate) mount: Option<PathBuf>,
    /// Proc mode: each process's cgroup id (0: unknown).
    pub(crate) per_pid: IntMap<u32, u64>,
    /// The use clock: one tick per use of an entry.
    pub(crate) clock: u64,
    /// Ids met in samples whose paths are not known, for the next walk.
    pub(crate) wanted: IntMap<u64, ()>,
    /// When the hierarchy was last walked for wanted ids.
    pub(crate) last_walk: Option<Instant>,
    /// Entries dropped to make room.
    pub(crate) evicted: u64,
    /// Paths found again by a walk.
    pub(crate) reread: u64,
    /// The id of the last [`Cgroups::define`] that found it defined in
    /// this file (0: none): the next samples of the same cgroup, the
    /// common case, cost one comparison.
    pub(crate) last: u64,
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
            self.put(md.ino(), path.clone());
            let Ok(rd) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in rd.flatten() {
                if e.file_type().is_ok_and(|t| t.is_dir()) {
                    let name = e.file_name().to_string_lossy().into_owned();
                    todo.push((e.path(), child_path(&path, &name)));
                }
            }
        }
    }

    /// A `PERF_RECORD_CGROUP`.
    pub fn insert(&mut self, id: u64, path: &[u8]) {
        let mut p = String::from_utf8_lossy(path).into_owned();
        if p.len() > profkit_eventlog::MAX_CGROUP_PATH {
            let mut n = profkit_eventlog::MAX_CGROUP_PATH;
            while !p.is_char_boundary(n) {
                n -= 1;
            }
            p.truncate(n);
        }
        self.put(id, p);
    }

    /// Puts `id` in the table, making room first if it is full.
    fn put(&mut self, id: u64, path: String) {
        if self.paths.len() >= MAX_CGROUPS && !self.paths.contains_key(&id) {
            self.evict_older_half();
        }
        self.clock += 1;
        self.wanted.remove(&id);
        self.paths.insert(
            id,
            Entry {
                path,
                used: self.clock,
            },
        );
    }

    /// Drops the half of the table used longest ago (and their
    /// definitions' marks: one used again is defined again, harmlessly).
    fn evict_older_half(&mut self) {
        // The cgroup of the latest samples was used just now (its samples
        // in a row took the fast path without a tick).
        if let Some(e) = self.paths.get_mut(&self.last) {
            e.used = self.clock;
        }
        let mut used: Vec<u64> = self.paths.values().map(|e| e.used).collect();
        let mid = used.len() / 2;
        let (_, &mut cut, _) = used.select_nth_unstable(mid);
        let before = self.paths.len();
        self.last = 0;
        let emitted = &mut self.emitted;
        self.paths.retain(|id, e| {
            let keep = e.used > cut;
            if !keep {
                emitted.remove(id);
            }
            keep
        });
        self.evicted += (before - self.paths.len()) as u64;
    }

    /// The definition to write before the first sample in cgroup `id` of
    /// this file, if any. An id whose path is not known yet is not marked
    /// written: rings are drained one CPU after another, so a sample in a
    /// cgroup made during the session can be read before the
    /// `PERF_RECORD_CGROUP` naming it (another CPU's ring); the definition
    /// then follows at its next sample (reports collect definitions from
    /// the whole session). A cgroup the table dropped (or never saw) is
    /// looked for in the hierarchy ([`REREAD_EVERY`] at most).
    pub fn define(&mut self, id: u64) -> Option<(u64, String)> {
        if id == 0 || id == self.last {
            return None;
        }
        self.clock += 1;
        match self.paths.get_mut(&id) {
            Some(e) => {
                e.used = self.clock;
                if self.emitted.contains_key(&id) {
                    self.last = id;
                    return None;
                }
            }
            None => {
                self.want(id);
                self.paths.get(&id)?;
            }
        }
        self.emitted.insert(id, ());
        self.last = id;
        Some((id, self.paths[&id].path.clone()))
    }

    /// Notes `id` as wanted and walks for the wanted ids when the last
    /// walk is old enough.
    fn want(&mut self, id: u64) {
        if self.mount.is_none() {
            return;
        }
        if self.wanted.len() < MAX_WANTED {
            self.wanted.insert(id, ());
        }
        if self.last_walk.is_some_and(|t| t.elapsed() < REREAD_EVERY) {
            return;
        }
        self.last_walk = Some(Instant::now());
        let Some(root) = self.mount.as_deref() else {
            return;
        };
        let found = find_ids(root, &self.wanted);
        // Ids not found are gone (or not made yet): a later sample asks
        // again.
        self.wanted.clear();
        for (id, path) in found {
            self.reread += 1;
            self.put(id, path);
        }
    }

    /// Forgets what the current file holds (a new file after reset).
    pub fn reset(&mut self) {
        self.emitted.clear();
        self.last = 0;
    }

    /// Proc mode: the cgroup of process `pid`, read from
    /// `PROC/PID/cgroup` once through `probe` (0 if it could not be read);
    /// None if the probe does not look at the host.
    pub fn of_pid(&mut self, probe: &mut dyn HostProbe, pid: u32) -> Option<u64> {
        if let Some(&id) = self.per_pid.get(&pid) {
            return Some(id);
        }
        let id = match probe.cgroup(pid, self.mount.as_deref()) {
            Probed::Found((id, path)) => {
                if !self.paths.contains_key(&id) {
                    self.insert(id, path.as_bytes());
                }
                id
            }
            Probed::Absent => 0,
            Probed::Unknown => return None,
        };
        if self.per_pid.len() >= MAX_CGROUPS {
            self.per_pid.clear();
        }
        self.per_pid.insert(pid, id);
        Some(id)
    }

    /// A process exited (proc mode forgets it).
    pub fn exit(&mut self, pid: u32) {
        self.per_pid.remove(&pid);
    }
}

/// `parent`'s child `name`, as cgroup paths are spelled (`/a/b`).
fn child_path(parent: &str, name: &str) -> String {
    if parent == "/" {
        format!("/{name}")
    } else {
        format!("{parent}/{name}")
    }
}

/// The paths of the `wanted` ids under `root`: directory entries read
/// (their inode numbers are the cgroup ids), never `stat`ed; breadth first
/// (the system's services sit two levels down, a user's delegated subtree
/// deeper, so a user's thousands of groups cannot hide them), at most
/// [`MAX_CGROUPS`] directories, and it stops once all are found.
fn find_ids(root: &Path, wanted: &IntMap<u64, ()>) -> Vec<(u64, String)> {
    let mut found = Vec::new();
    if wanted.is_empty() {
        return found;
    }
    if let Ok(md) = std::fs::metadata(root) {
        if wanted.contains_key(&md.ino()) {
            found.push((md.ino(), "/".to_owned()));
        }
    }
    let mut todo = std::collections::VecDeque::from([(root.to_path_buf(), String::from("/"))]);
    let mut dirs = 0usize;
    while let Some((dir, path)) = todo.pop_front() {
        dirs += 1;
        if dirs > MAX_CGROUPS || found.len() >= wanted.len() {
            break;
        }
        let Ok(rd) = std::fs::read_dir(&dir) else {
            continue;
        };
        for e in rd.flatten() {
            if !e.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let name = e.file_name().to_string_lossy().into_owned();
            let child = child_path(&path, &name);
            if wanted.contains_key(&e.ino()) {
                found.push((e.ino(), child.clone()));
            }
            todo.push_back((e.path(), child));
        }
    }
    found
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
        let mut probe = crate::ProcfsProbe::new(crate::ProcPaths {
            proc_root: proc,
            ..Default::default()
        });
        assert_eq!(c.of_pid(&mut probe, 42), Some(ino("c")));
        assert_eq!(c.of_pid(&mut probe, 43), Some(0));
        assert_eq!(c.of_pid(&mut crate::NullProbe, 44), None);
        // A sample before the record naming its cgroup (another CPU's
        // ring): defined once the path is known.
        assert_eq!(c.define(7), None);
        c.insert(7, b"/new");
        assert_eq!(c.define(7), Some((7, "/new".into())));
        assert_eq!(c.define(7), None);
        assert_eq!(c.define(0), None);
    }

    /// Issue 25 (7): 70,000 mkdir/rmdir by one user filled the table for
    /// the rest of the run; root's cgroups made later were `[cgroup N]`.
    #[test]
    fn a_full_table_drops_the_entries_used_longest_ago() {
        let mut c = Cgroups {
            mode: CgroupRecording::Sample,
            ..Default::default()
        };
        c.insert(1, b"/system.slice/ssh.service");
        // Root's busy cgroup keeps being used while a user churns.
        for i in 0..70_000u64 {
            c.insert(1_000_000 + i, format!("/user.slice/churn/{i}").as_bytes());
            if i % 1000 == 0 {
                c.define(1);
            }
        }
        assert!(c.paths.len() <= MAX_CGROUPS);
        assert!(c.evicted > 0);
        // A cgroup root makes now is named, and the busy one kept its path.
        c.insert(5, b"/system.slice/new.service");
        assert_eq!(c.define(5), Some((5, "/system.slice/new.service".into())));
        assert!(c.paths.contains_key(&1), "the cgroup in use stays");
        // Eviction is amortized: well under one pass per insertion.
        assert!(c.evicted >= 70_000 - MAX_CGROUPS as u64);
    }

    #[test]
    fn a_dropped_cgroup_is_read_again_from_the_hierarchy() {
        let d = tempfile::tempdir().unwrap();
        let mount = d.path().join("cg");
        std::fs::create_dir_all(mount.join("sys/app")).unwrap();
        let mut c = Cgroups {
            mode: CgroupRecording::Sample,
            ..Default::default()
        };
        c.seed(Some(mount.clone()));
        let app = std::fs::metadata(mount.join("sys/app")).unwrap().ino();
        // Dropped (as a full table would) after its definition was written.
        assert!(c.define(app).is_some());
        c.paths.remove(&app);
        c.emitted.remove(&app);
        c.last = 0;
        assert_eq!(c.define(app), Some((app, "/sys/app".into())));
        assert_eq!(c.reread, 1);
        // Made after the seed, no record yet: found by the next walk, but
        // not before REREAD_EVERY has passed since the last one.
        std::fs::create_dir_all(mount.join("late")).unwrap();
        let late = std::fs::metadata(mount.join("late")).unwrap().ino();
        assert_eq!(c.define(late), None, "one walk per REREAD_EVERY");
        c.last_walk = Some(Instant::now() - REREAD_EVERY);
        assert_eq!(c.define(late), Some((late, "/late".into())));
        assert_eq!(c.reread, 2);
    }
}
