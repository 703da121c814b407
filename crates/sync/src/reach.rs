//! Binaries and JIT maps the host cannot see where the records say:
//! containers.
//!
//! A process in its own mount namespace maps binaries by paths of that
//! namespace (`/app/server` on a tmpfs mounted only there); a report,
//! reading the host's file system, finds nothing there or another file. A
//! process in its own pid namespace writes its JIT map as
//! `/tmp/perf-NSPID.map` in its own `/tmp`, named by the pid it sees.
//!
//! - **Binaries.** When the sync stage first meets a binary, it asks (on
//!   a time-boxed worker, [`REACH_TIMEOUT`]) whether the recorded path,
//!   opened from the host the way [`open_mapped`] opens it, is the mapped
//!   file ([`host_view`]: the same device/inode when the kernel gave them,
//!   else the same build-id). If not, and the binary has a build-id, the
//!   mapped file is opened through `/proc/PID/map_files/START-END` while
//!   the process lives, its build-id checked, and the open file queued in
//!   a [`KeepQueue`]: the live engine copies it into the session as
//!   `debug/.kept/COOKIE` (16 hex digits), where reports look for the
//!   binary of that cookie only: a build-id is a claim, and another file
//!   claiming the same one has another cookie (`profkit_eventlog::cookie`).
//!   Holding the descriptor keeps the file readable after the
//!   process, its namespace and its tmpfs are gone. A binary that cannot
//!   be kept is queued with the reason instead.
//! - **JIT maps.** [`ns_pid`] reads the pid a process sees (the last field
//!   of `NSpid:` in `/proc/PID/status`) and [`open_perf_map_in_root`] opens
//!   its `tmp/perf-NSPID.map` inside `/proc/PID/root` with
//!   `RESOLVE_IN_ROOT` and no symlinks at all, non-blocking: a container's
//!   links cannot lead the daemon out of the container's root.

use crate::binfile::{build_id_of, open_mapped, MappedBinary, Refused, MAX_STUCK_READS};
use profkit_eventlog::NsTask;
use profkit_untrusted::TimeBox;
use rustix::fs::{Mode, OFlags, ResolveFlags};
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// How long the sync stage waits for one "is it the same file on the
/// host" answer.
pub const REACH_TIMEOUT: Duration = Duration::from_millis(100);
/// Binaries waiting to be copied at once (the rest are named as refused).
pub const MAX_QUEUED: usize = 64;
/// Binaries checked per session (each costs an open and maybe a build-id
/// read on the worker; a system with more distinct binaries keeps only
/// the first ones).
pub const MAX_CHECKED: usize = 16_384;

/// What the host sees at a binary's recorded path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostView {
    /// The mapped file itself.
    Same,
    /// Nothing (or nothing openable without symlinks).
    Missing,
    /// Another file (another inode or build-id), or not a regular file.
    Other,
}

/// Whether `path`, opened from the host as [`open_mapped`] opens it (no
/// symlinks, non-blocking, regular files only), is the mapped file: the
/// kernel's device/inode when given, else the build-id `want`. With
/// neither, an openable regular file counts as the same.
pub fn host_view(path: &Path, identity: Option<(u64, u64)>, want: Option<&[u8]>) -> HostView {
    let b = MappedBinary {
        path: path.into(),
        map_file: None,
        identity,
    };
    match open_mapped(&b) {
        Err(Refused::Unopenable) | Err(Refused::TimedOut) => HostView::Missing,
        Err(Refused::NotRegular) | Err(Refused::OtherFile) => HostView::Other,
        Ok(f) => match (identity, want) {
            (Some(_), _) | (None, None) => HostView::Same,
            (None, Some(w)) => {
                if build_id_of(f).as_deref() == Some(w) {
                    HostView::Same
                } else {
                    HostView::Other
                }
            }
        },
    }
}

/// A binary to copy into the session: opened through `map_files`, its
/// build-id checked.
#[derive(Debug)]
pub struct KeptBinary {
    /// The recorded path (the process's view).
    pub path: String,
    /// Its build-id (what it claims to be).
    pub build_id: Vec<u8>,
    /// Its cookie, the name it is kept under: the copy names this cookie's
    /// samples only, not every file claiming the build-id.
    pub cookie: profkit_eventlog::Cookie,
    /// The mapped file (read from offset 0).
    pub file: File,
    /// What the host has at `path`.
    pub host: HostView,
}

#[derive(Debug, Default)]
struct Queued {
    binaries: Vec<KeptBinary>,
    refused: Vec<String>,
}

/// Binaries found unreachable from the host, shared between the sync
/// stage (which fills it) and whoever copies them (the live engine). A
/// clone is another handle on the same queue.
#[derive(Debug, Clone, Default)]
pub struct KeepQueue(Arc<Mutex<Queued>>);

impl KeepQueue {
    /// Takes what was queued: binaries to copy, and binaries that cannot
    /// be kept, each as `PATH: why`.
    pub fn take(&self) -> (Vec<KeptBinary>, Vec<String>) {
        let mut q = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        (
            std::mem::take(&mut q.binaries),
            std::mem::take(&mut q.refused),
        )
    }

    fn push(&self, r: Reached, path: &str) {
        let mut q = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match r {
            Reached::Same => {}
            Reached::Keep(b) if q.binaries.len() < MAX_QUEUED => q.binaries.push(b),
            Reached::Keep(_) => q.refused.push(format!(
                "{path}: not on the host, and over {MAX_QUEUED} binaries were waiting to be copied"
            )),
            Reached::Refused(why) => q.refused.push(format!("{path}: {why}")),
        }
    }
}

/// A binary to check: where it is, what it must be.
#[derive(Debug)]
struct Query {
    binary: MappedBinary,
    build_id: Option<Vec<u8>>,
    cookie: profkit_eventlog::Cookie,
}

#[derive(Debug)]
enum Reached {
    Same,
    Keep(KeptBinary),
    Refused(String),
}

fn missing_or_other(h: HostView) -> &'static str {
    match h {
        HostView::Missing => "not found on the host (another mount namespace?)",
        _ => "another file at that path on the host",
    }
}

fn reach(q: Query) -> Reached {
    let path = &q.binary.path;
    let host = host_view(path, q.binary.identity, q.build_id.as_deref());
    if host == HostView::Same {
        return Reached::Same;
    }
    let where_ = missing_or_other(host);
    let Some(want) = q.build_id else {
        return Reached::Refused(format!(
            "{where_}, and it has no build-id (or it could not be read), so it could not be kept"
        ));
    };
    if q.binary.map_file.is_none() {
        return Reached::Refused(format!("{where_}, and no live process maps it"));
    }
    let f = match open_mapped(&q.binary) {
        Ok(f) => f,
        Err(why) => {
            return Reached::Refused(format!(
                "{where_}, and its mapping could not be opened ({why:?})"
            ))
        }
    };
    let Ok(dup) = f.try_clone() else {
        return Reached::Refused(format!("{where_}, and its descriptor could not be kept"));
    };
    if build_id_of(dup).as_deref() != Some(&want[..]) {
        return Reached::Refused(format!(
            "{where_}, and the mapped file no longer has the recorded build-id"
        ));
    }
    Reached::Keep(KeptBinary {
        path: path.display().to_string(),
        build_id: want,
        cookie: q.cookie,
        file: f,
        host,
    })
}

/// The sync stage's side: checks each new binary once, on a worker.
#[derive(Debug)]
pub(crate) struct Reacher {
    worker: TimeBox,
    timeout: Duration,
    checked: HashSet<profkit_eventlog::Cookie>,
    count: usize,
    pub(crate) queue: KeepQueue,
}

impl Default for Reacher {
    fn default() -> Self {
        Reacher {
            worker: TimeBox::new("profkit-reach", MAX_STUCK_READS as usize, 1),
            timeout: REACH_TIMEOUT,
            checked: HashSet::new(),
            count: 0,
            queue: KeepQueue::default(),
        }
    }
}

impl Reacher {
    /// Checks `binary` (claiming `build_id`, with cookie `cookie`) unless
    /// its cookie was checked already, queueing it if the host cannot
    /// reach it. Files without build-id nor identity (one cookie for all)
    /// are checked per path.
    pub(crate) fn check(
        &mut self,
        binary: MappedBinary,
        build_id: Option<&[u8]>,
        cookie: profkit_eventlog::Cookie,
    ) {
        let key = match (build_id, binary.identity) {
            (None, None) => crate::cookies::cookie_hash(
                "reach-path",
                &[binary.path.as_os_str().as_encoded_bytes()],
            ),
            _ => cookie,
        };
        if self.count >= MAX_CHECKED || !self.checked.insert(key) {
            return;
        }
        self.count += 1;
        let path = binary.path.display().to_string();
        let q = Query {
            binary,
            build_id: build_id.map(<[u8]>::to_vec),
            cookie,
        };
        match self.worker.run(self.timeout, move || reach(q)) {
            Ok(r) => self.queue.push(r, &path),
            Err(late) => {
                let why = match late {
                    profkit_untrusted::Late::TimedOut => format!(
                        "checking whether the host sees it took over {:?}",
                        self.timeout
                    ),
                    other => format!("checking whether the host sees it: {other}"),
                };
                self.queue.push(Reached::Refused(why), &path)
            }
        }
    }
}

/// The pid a process sees in its own pid namespace: the last field of the
/// `NSpid:` line of its `/proc/PID/status` (kernels before 4.1 have none).
pub fn ns_pid(status: &str) -> Option<u32> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("NSpid:"))?
        .split_whitespace()
        .last()?
        .parse()
        .ok()
}

/// A task's process and thread ids in its own pid namespace: the last
/// fields of `NStgid:` and `NSpid:` in its `/proc/PID/task/TID/status`.
pub fn ns_task(status: &str) -> Option<NsTask> {
    let last = |key: &str| -> Option<u32> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))?
            .split_whitespace()
            .last()?
            .parse()
            .ok()
    };
    Some(NsTask {
        pid: last("NStgid:")?,
        tid: last("NSpid:")?,
    })
}

/// Processes remembered by [`NsTasks`] before it starts over (exits of
/// processes never sampled are not always seen).
pub const NS_TASKS_HELD: usize = 65_536;

/// Which tasks live in another pid namespace than the recorder's, and
/// their ids there (thread rows show them beside the host's). One
/// `readlink` of `/proc/PID/ns/pid` per process, one status read per task
/// of a process in another namespace; nothing for the others.
#[derive(Debug, Default)]
pub struct NsTasks {
    /// The recorder's own pid namespace (`/proc/self/ns/pid`), once read.
    mine: Option<Option<PathBuf>>,
    /// Per process: whether it is in another pid namespace.
    foreign: HashMap<u32, bool>,
}

impl NsTasks {
    /// The ids task `tid` of process `pid` has in its own pid namespace,
    /// if that is not the recorder's (None too when `/proc` no longer has
    /// the task).
    pub fn of(&mut self, proc_root: &Path, pid: u32, tid: u32) -> Option<NsTask> {
        let mine = self
            .mine
            .get_or_insert_with(|| std::fs::read_link(proc_root.join("self/ns/pid")).ok())
            .clone()?;
        if self.foreign.len() >= NS_TASKS_HELD {
            self.foreign.clear();
        }
        let foreign = match self.foreign.get(&pid) {
            Some(&f) => f,
            None => {
                let theirs = std::fs::read_link(proc_root.join(format!("{pid}/ns/pid"))).ok()?;
                let f = theirs != mine;
                self.foreign.insert(pid, f);
                f
            }
        };
        if !foreign {
            return None;
        }
        let status =
            std::fs::read_to_string(proc_root.join(format!("{pid}/task/{tid}/status"))).ok()?;
        ns_task(&status)
    }

    /// Process `pid` exited: its pid may name another process next.
    pub fn exit(&mut self, pid: u32) {
        self.foreign.remove(&pid);
    }
}

/// Where a process in another pid namespace writes its JIT map, relative
/// to its root: `tmp/perf-NSPID.map`.
pub fn perf_map_in_root(ns_pid: u32) -> PathBuf {
    format!("tmp/perf-{ns_pid}.map").into()
}

/// If `pid` lives in another pid namespace than this process: the pid it
/// sees there (`None`: the same namespace, or unknown).
pub fn foreign_ns_pid(proc_root: &Path, pid: u32) -> Option<u32> {
    let mine = std::fs::read_link(proc_root.join("self/ns/pid")).ok()?;
    let theirs = std::fs::read_link(proc_root.join(format!("{pid}/ns/pid"))).ok()?;
    if mine == theirs {
        return None;
    }
    let status = std::fs::read_to_string(proc_root.join(format!("{pid}/status"))).ok()?;
    ns_pid(&status)
}

/// Opens `rel` inside the root directory of process `pid`
/// (`PROC/PID/root`), resolved as if that were `/` (`RESOLVE_IN_ROOT`),
/// through no symlink at all, non-blocking (a FIFO open returns at once).
/// The caller checks what it opened (regular file, owner, size).
pub fn open_perf_map_in_root(proc_root: &Path, pid: u32, rel: &Path) -> std::io::Result<File> {
    let root = rustix::fs::open(
        proc_root.join(format!("{pid}/root")),
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let fd = rustix::fs::openat2(
        &root,
        rel,
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::IN_ROOT | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
    )?;
    Ok(File::from(fd))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn ns_pid_is_the_last_nspid_field() {
        let s = "Name:\tnode\nTgid:\t4242\nNSpid:\t4242\t17\t1\nPPid:\t1\n";
        assert_eq!(ns_pid(s), Some(1));
        assert_eq!(ns_pid("Name:\tsh\nNSpid:\t99\n"), Some(99));
        assert_eq!(ns_pid("Name:\told kernel\nPid:\t5\n"), None);
        assert_eq!(ns_pid("NSpid:\t\n"), None);
        assert_eq!(perf_map_in_root(17), PathBuf::from("tmp/perf-17.map"));
    }

    #[test]
    fn ns_task_reads_the_innermost_tgid_and_pid() {
        let s = "Name:\tworker\nTgid:\t4242\nNStgid:\t4242\t17\nPid:\t4250\n\
                 NSpid:\t4250\t25\nPPid:\t1\n";
        assert_eq!(ns_task(s), Some(NsTask { pid: 17, tid: 25 }));
        assert_eq!(ns_task("NSpid:\t9\n"), None, "no NStgid (before 4.1)");
    }

    #[test]
    fn ns_tasks_reads_only_tasks_of_other_namespaces_in_a_fake_proc() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path();
        for (dir, ns) in [("self", "pid:[1]"), ("10", "pid:[1]"), ("20", "pid:[2]")] {
            std::fs::create_dir_all(p.join(dir).join("ns")).unwrap();
            std::os::unix::fs::symlink(ns, p.join(dir).join("ns/pid")).unwrap();
        }
        for (task, status) in [
            ("10/task/11", "NStgid:\t10\nNSpid:\t11\n"),
            ("20/task/21", "NStgid:\t20\t1\nNSpid:\t21\t2\n"),
        ] {
            std::fs::create_dir_all(p.join(task)).unwrap();
            std::fs::write(p.join(task).join("status"), status).unwrap();
        }
        let mut ns = NsTasks::default();
        assert_eq!(ns.of(p, 10, 11), None, "the recorder's own namespace");
        assert_eq!(ns.of(p, 20, 21), Some(NsTask { pid: 1, tid: 2 }));
        assert_eq!(ns.of(p, 20, 22), None, "a task /proc no longer has");
        assert_eq!(ns.of(p, 30, 30), None, "a process /proc no longer has");
        // Remembered per process until it exits: pid 20 reused in the
        // recorder's namespace is read again.
        std::fs::remove_file(p.join("20/ns/pid")).unwrap();
        std::os::unix::fs::symlink("pid:[1]", p.join("20/ns/pid")).unwrap();
        assert_eq!(ns.of(p, 20, 21), Some(NsTask { pid: 1, tid: 2 }));
        ns.exit(20);
        assert_eq!(ns.of(p, 20, 21), None);
        // No /proc/self: nothing is known.
        let empty = tempfile::tempdir().unwrap();
        assert_eq!(NsTasks::default().of(empty.path(), 20, 21), None);
    }

    #[test]
    fn foreign_ns_pid_compares_namespaces_in_a_fake_proc() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path();
        for (dir, ns) in [("self", "pid:[1]"), ("10", "pid:[1]"), ("20", "pid:[2]")] {
            std::fs::create_dir_all(p.join(dir).join("ns")).unwrap();
            std::os::unix::fs::symlink(ns, p.join(dir).join("ns/pid")).unwrap();
        }
        std::fs::write(p.join("10/status"), "NSpid:\t10\n").unwrap();
        std::fs::write(p.join("20/status"), "NSpid:\t20\t3\n").unwrap();
        assert_eq!(foreign_ns_pid(p, 10), None, "the daemon's own namespace");
        assert_eq!(foreign_ns_pid(p, 20), Some(3));
        assert_eq!(foreign_ns_pid(p, 30), None, "gone");
    }

    #[test]
    fn perf_maps_are_opened_inside_the_root_without_links() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path();
        let root = p.join("root-of-20");
        std::fs::create_dir_all(root.join("tmp")).unwrap();
        std::fs::create_dir_all(p.join("20")).unwrap();
        std::os::unix::fs::symlink(&root, p.join("20/root")).unwrap();
        std::fs::write(root.join("tmp/perf-3.map"), "1000 10 js\n").unwrap();
        let f = open_perf_map_in_root(p, 20, &perf_map_in_root(3)).unwrap();
        assert_eq!(std::io::read_to_string(f).unwrap(), "1000 10 js\n");
        // A link inside the container's root is refused, wherever it points.
        std::fs::write(p.join("secret"), "x").unwrap();
        std::os::unix::fs::symlink(p.join("secret"), root.join("tmp/perf-4.map")).unwrap();
        assert!(open_perf_map_in_root(p, 20, &perf_map_in_root(4)).is_err());
        std::os::unix::fs::symlink("../../secret", root.join("tmp/perf-5.map")).unwrap();
        assert!(open_perf_map_in_root(p, 20, &perf_map_in_root(5)).is_err());
        // `..` cannot climb out of the root either.
        assert!(open_perf_map_in_root(p, 20, Path::new("../secret")).is_err());
    }

    fn exe_identity() -> (PathBuf, (u64, u64), Vec<u8>) {
        let exe = std::env::current_exe().unwrap();
        let m = std::fs::metadata(&exe).unwrap();
        let st_dev = m.dev();
        let major = ((st_dev >> 32) & 0xffff_f000) | ((st_dev >> 8) & 0xfff);
        let minor = ((st_dev >> 12) & 0xffff_ff00) | (st_dev & 0xff);
        let dev = crate::procfs::dev_number(major as u32, minor as u32);
        let bid = build_id_of(File::open(&exe).unwrap()).expect("test binary has a build-id");
        (exe, (dev, m.ino()), bid)
    }

    #[test]
    fn the_host_sees_the_same_file_missing_or_another() {
        let (exe, id, bid) = exe_identity();
        assert_eq!(host_view(&exe, Some(id), None), HostView::Same);
        assert_eq!(host_view(&exe, None, Some(&bid)), HostView::Same);
        assert_eq!(
            host_view(&exe, Some((id.0, id.1 + 1)), None),
            HostView::Other
        );
        assert_eq!(host_view(&exe, None, Some(&[1, 2, 3])), HostView::Other);
        let gone = Path::new("/nonexistent/app");
        assert_eq!(host_view(gone, Some(id), None), HostView::Missing);
        assert_eq!(host_view(gone, None, Some(&bid)), HostView::Missing);
    }

    /// The stage's decision end to end, with a fake `map_files` entry: a
    /// recorded path the host lacks is kept through the mapping; one the
    /// host has is not; one without build-id is named with the reason.
    #[test]
    fn unreachable_binaries_are_queued_with_their_mapped_file() {
        let (exe, id, bid) = exe_identity();
        let mut r = Reacher {
            timeout: Duration::from_secs(10),
            ..Reacher::default()
        };
        let q = r.queue.clone();
        // Reachable from the host: nothing queued.
        let mut host = Reacher {
            timeout: Duration::from_secs(10),
            ..Reacher::default()
        };
        let hq = host.queue.clone();
        host.check(
            MappedBinary {
                path: exe.clone(),
                map_file: Some(exe.clone()),
                identity: Some(id),
            },
            Some(&bid),
            1,
        );
        let (kept, refused) = hq.take();
        assert!(kept.is_empty() && refused.is_empty(), "{refused:?}");
        // Missing on the host: kept through the mapping (here the file).
        let b = MappedBinary {
            path: "/ns-only/app".into(),
            map_file: Some(exe.clone()),
            identity: None,
        };
        r.check(b.clone(), Some(&bid), 2);
        r.check(b, Some(&bid), 2); // once per cookie
        let (kept, refused) = q.take();
        assert!(refused.is_empty(), "{refused:?}");
        assert_eq!(kept.len(), 1);
        assert_eq!(
            (
                kept[0].path.as_str(),
                &kept[0].build_id,
                kept[0].cookie,
                kept[0].host
            ),
            ("/ns-only/app", &bid, 2, HostView::Missing)
        );
        // Another file under the recorded build-id: refused, named.
        r.check(
            MappedBinary {
                path: "/ns-only/other".into(),
                map_file: Some(exe.clone()),
                identity: None,
            },
            Some(&[9, 9, 9]),
            3,
        );
        // No build-id: cannot be kept, named with why.
        r.check(
            MappedBinary {
                path: "/ns-only/nobid".into(),
                map_file: Some(exe),
                identity: Some((1, 2)),
            },
            None,
            4,
        );
        let (kept, refused) = q.take();
        assert!(kept.is_empty());
        assert_eq!(refused.len(), 2, "{refused:?}");
        assert!(refused[0].starts_with("/ns-only/other: not found on the host"));
        assert!(refused[0].contains("no longer has the recorded build-id"));
        assert!(refused[1].contains("no build-id"), "{}", refused[1]);
    }
}
