//! Keeping what a container takes with it: binaries the host cannot reach
//! at their recorded paths, and JIT maps in a container's own `/tmp`.
//!
//! The sync stage finds the binaries (`profkit_sync::reach`) and queues
//! them already opened through `/proc/PID/map_files`; each round the
//! engine hands them to one copier thread, which writes each as
//! `debug/.build-id/ab/cdef…` in the session directory (where reports look
//! for a binary by build-id) unless one is there already. Regular files
//! only, at most [`BINARY_KEEP_MAX_BYTES`] each and
//! [`BINARIES_KEPT_MAX_BYTES`] per session; a binary over a cap is named
//! in the stop summary with why.
//!
//! Processes with anonymous code in another pid namespace than the
//! daemon's get their `tmp/perf-NSPID.map` (inside their root, no links)
//! copied as `perf-HOSTPID.map` while they live: checked each round and
//! copied again when it grew, and once more at stop for those still alive,
//! with the host's rules (regular file, owned by the process's owner, at
//! most `PERF_MAP_MAX_BYTES`). A process whose map is gone or whose
//! process exited is no longer looked at.
//!
//! All file work happens on the copier thread, so a slow or stuck file
//! system never stalls the rounds; at stop the engine waits at most
//! [`KEEP_STOP_WAIT`] for it.

use crate::extras::{check_opened, write_new, PERF_MAP_MAX_BYTES};
use profkit_sync::reach::{
    foreign_ns_pid, open_perf_map_in_root, perf_map_in_root, KeepQueue, KeptBinary,
};
use profkit_sync::SyncStage;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::io::{Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::time::{Duration, Instant};

/// The largest binary kept in a session.
pub const BINARY_KEEP_MAX_BYTES: u64 = 512 << 20;
/// All binaries kept in one session together.
pub const BINARIES_KEPT_MAX_BYTES: u64 = 2 << 30;
/// Processes newly classified (own pid namespace or not) per round.
pub const NS_PROCESSES_PER_ROUND: usize = 64;
/// How long stop waits for copies still under way.
pub const KEEP_STOP_WAIT: Duration = Duration::from_secs(10);

/// What was kept from other namespaces (the stop summary's `kept`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeptSummary {
    /// Binaries copied into `debug/.build-id/` (unreachable from the host).
    pub binaries: u64,
    /// Their bytes.
    pub binary_bytes: u64,
    /// JIT maps copied from processes in other pid namespaces (copies
    /// again of a grown map count once).
    pub perf_maps: u64,
}

enum Job {
    Binary(KeptBinary),
    PerfMap { pid: u32, ns_pid: u32, owner: u32 },
}

enum Done {
    Binary(Result<u64, String>),
    /// `Ok(Some(len))`: copied; `Ok(None)`: not grown; `Err(None)`: gone.
    PerfMap {
        pid: u32,
        res: Result<Option<u64>, Option<String>>,
    },
}

#[derive(Debug, Default)]
struct NsMap {
    ns_pid: u32,
    owner: u32,
    copied: u64,
    in_flight: bool,
    gone: bool,
    counted: bool,
}

/// The engine's side: one copier thread, what it was asked, what it did.
pub(crate) struct Keeper {
    tx: Option<Sender<Job>>,
    rx: Receiver<Done>,
    queue: KeepQueue,
    proc_root: PathBuf,
    /// Processes with anonymous code by pid: `None` in the daemon's pid
    /// namespace (or unknown), else their map's state.
    ns: HashMap<u32, Option<NsMap>>,
    pending: usize,
    pub(crate) kept: KeptSummary,
    pub(crate) refused: Vec<String>,
}

impl Keeper {
    /// A keeper writing into `dir` (the held session directory), taking
    /// binaries from `queue`, reading processes in `proc_root`.
    pub(crate) fn new(dir: PathBuf, queue: KeepQueue, proc_root: PathBuf) -> Self {
        let (tx, jobs) = channel::<Job>();
        let (done, rx) = channel::<Done>();
        let root = proc_root.clone();
        let spawned = std::thread::Builder::new()
            .name("profkit-keep".into())
            .spawn(move || {
                let mut budget = BINARIES_KEPT_MAX_BYTES;
                for j in jobs {
                    let d = match j {
                        Job::Binary(b) => Done::Binary(keep_binary(&dir, b, &mut budget)),
                        Job::PerfMap { pid, ns_pid, owner } => Done::PerfMap {
                            pid,
                            res: copy_ns_perf_map(&dir, &root, pid, ns_pid, owner),
                        },
                    };
                    if done.send(d).is_err() {
                        return;
                    }
                }
            });
        Keeper {
            tx: spawned.is_ok().then_some(tx),
            rx,
            queue,
            proc_root,
            ns: HashMap::new(),
            pending: 0,
            kept: KeptSummary::default(),
            refused: Vec::new(),
        }
    }

    fn send(&mut self, j: Job) {
        let unsent = match &self.tx {
            Some(tx) => tx.send(j).err().map(|e| e.0),
            None => Some(j),
        };
        match unsent {
            None => self.pending += 1,
            Some(Job::Binary(b)) => self
                .refused
                .push(format!("{}: the copier thread is not running", b.path)),
            Some(Job::PerfMap { .. }) => {}
        }
    }

    fn collect(&mut self, d: Done) {
        self.pending = self.pending.saturating_sub(1);
        match d {
            Done::Binary(Ok(n)) => {
                if n > 0 {
                    self.kept.binaries += 1;
                    self.kept.binary_bytes += n;
                }
            }
            Done::Binary(Err(why)) => self.refused.push(why),
            Done::PerfMap { pid, res } => {
                let Some(Some(m)) = self.ns.get_mut(&pid) else {
                    return;
                };
                m.in_flight = false;
                match res {
                    Ok(Some(len)) => {
                        m.copied = len;
                        if !m.counted {
                            m.counted = true;
                            self.kept.perf_maps += 1;
                        }
                    }
                    Ok(None) => {}
                    Err(None) => m.gone = true,
                    Err(Some(why)) => {
                        m.gone = true;
                        self.refused.push(why);
                    }
                }
            }
        }
    }

    /// Once per round: collects finished copies, hands over the binaries
    /// the stage queued, and asks for the JIT maps of processes in other
    /// pid namespaces (unless one is being copied).
    pub(crate) fn round(&mut self, stage: &SyncStage) {
        while let Ok(d) = self.rx.try_recv() {
            self.collect(d);
        }
        self.take_binaries();
        let mut classified = 0;
        let owners: Vec<(u32, u32)> = stage.anon_owners().collect();
        for (pid, owner) in owners {
            if !self.ns.contains_key(&pid) {
                if classified >= NS_PROCESSES_PER_ROUND {
                    continue;
                }
                classified += 1;
                let m = foreign_ns_pid(&self.proc_root, pid).map(|ns_pid| NsMap {
                    ns_pid,
                    owner,
                    ..Default::default()
                });
                self.ns.insert(pid, m);
            }
            self.ask_perf_map(pid);
        }
    }

    fn take_binaries(&mut self) {
        let (bins, refused) = self.queue.take();
        self.refused.extend(refused);
        for b in bins {
            self.send(Job::Binary(b));
        }
    }

    fn ask_perf_map(&mut self, pid: u32) {
        let Some(Some(m)) = self.ns.get_mut(&pid) else {
            return;
        };
        if m.in_flight || m.gone {
            return;
        }
        m.in_flight = true;
        let (ns_pid, owner) = (m.ns_pid, m.owner);
        self.send(Job::PerfMap { pid, ns_pid, owner });
    }

    /// At stop, after the last drain: the binaries it queued, the JIT maps
    /// of processes still alive; then waits at most `wait` for the copier.
    pub(crate) fn finish(&mut self, wait: Duration) {
        while let Ok(d) = self.rx.try_recv() {
            self.collect(d);
        }
        self.take_binaries();
        let pids: Vec<u32> = self.ns.keys().copied().collect();
        for pid in pids {
            self.ask_perf_map(pid);
        }
        self.tx = None;
        let deadline = Instant::now() + wait;
        while self.pending > 0 {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(left) {
                Ok(d) => self.collect(d),
                Err(_) => break,
            }
        }
        if self.pending > 0 {
            self.refused.push(format!(
                "{} copies of binaries or JIT maps from other namespaces were still under way after {wait:?}: left out",
                self.pending
            ));
        }
    }
}

/// Copies a binary into `DIR/debug/.build-id/ab/cdef…`. `Ok(0)`: one is
/// there already.
fn keep_binary(dir: &Path, mut b: KeptBinary, budget: &mut u64) -> Result<u64, String> {
    let what = |why: String| {
        format!(
            "{}: kept from another mount namespace failed: {why}",
            b.path
        )
    };
    if b.build_id.len() < 2 {
        return Err(what("its build-id is too short to name it".into()));
    }
    let hex: String = b.build_id.iter().map(|x| format!("{x:02x}")).collect();
    let m = b.file.metadata().map_err(|e| what(e.to_string()))?;
    if !m.file_type().is_file() {
        return Err(what("not a regular file".into()));
    }
    let len = m.len();
    if len > BINARY_KEEP_MAX_BYTES {
        return Err(what(format!(
            "{len} bytes, over the {BINARY_KEEP_MAX_BYTES}-byte limit per binary"
        )));
    }
    if len > *budget {
        return Err(what(format!(
            "{len} bytes, over what is left of the {BINARIES_KEPT_MAX_BYTES}-byte limit per session"
        )));
    }
    let mut d = dir.to_path_buf();
    for part in ["debug", ".build-id", &hex[..2]] {
        d.push(part);
        make_dir(&d).map_err(what)?;
    }
    let to = d.join(&hex[2..]);
    if std::fs::symlink_metadata(&to).is_ok_and(|m| m.file_type().is_file()) {
        return Ok(0);
    }
    b.file
        .seek(SeekFrom::Start(0))
        .map_err(|e| what(e.to_string()))?;
    write_new(&to, &mut b.file, len).map_err(what)?;
    *budget -= len;
    Ok(len)
}

/// Creates `d` (0700) unless it is there; it must be a directory, not a
/// link (the session directory is its owner's alone, `SessionDir::open`).
fn make_dir(d: &Path) -> Result<(), String> {
    use std::os::unix::fs::DirBuilderExt;
    match std::fs::DirBuilder::new().mode(0o700).create(d) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("creating {}: {e}", d.display())),
    }
    match std::fs::symlink_metadata(d) {
        Ok(m) if m.file_type().is_dir() => Ok(()),
        Ok(_) => Err(format!("{} is not a directory", d.display())),
        Err(e) => Err(format!("{}: {e}", d.display())),
    }
}

/// Copies a pid-namespaced process's `tmp/perf-NSPID.map` (in its root)
/// to `DIR/perf-PID.map` if it grew since `copied`... see [`Done`].
fn copy_ns_perf_map(
    dir: &Path,
    proc_root: &Path,
    pid: u32,
    ns_pid: u32,
    owner: u32,
) -> Result<Option<u64>, Option<String>> {
    let rel = perf_map_in_root(ns_pid);
    let shown = proc_root.join(format!("{pid}/root")).join(&rel);
    let f = match open_perf_map_in_root(proc_root, pid, &rel) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(None),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(Some(format!(
                "{}: a symbolic link on the way",
                shown.display()
            )))
        }
        Err(e) => return Err(Some(format!("{}: {e}", shown.display()))),
    };
    let f = check_opened(f, Some(Some(owner)), PERF_MAP_MAX_BYTES)
        .map_err(|why| Some(format!("{}: {why}", shown.display())))?;
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let to = dir.join(format!("perf-{pid}.map"));
    let have = std::fs::symlink_metadata(&to).map(|m| m.len()).unwrap_or(0);
    if len <= have {
        return Ok(None);
    }
    write_new(&to, f, PERF_MAP_MAX_BYTES)
        .map_err(|why| Some(format!("{}: {why}", shown.display())))?;
    Ok(Some(len))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn a_kept_binary_lands_under_its_build_id_once() {
        let d = tempfile::tempdir().unwrap();
        let src = d.path().join("app");
        std::fs::write(&src, b"\x7fELF not really").unwrap();
        let kept = |budget: &mut u64| {
            let mut f = std::fs::File::open(&src).unwrap();
            // The stage read its build-id through it: not at offset 0.
            f.seek(SeekFrom::Start(5)).unwrap();
            keep_binary(
                d.path(),
                KeptBinary {
                    path: "/ns/app".into(),
                    build_id: vec![0xab, 0xcd, 0xef],
                    file: f,
                    host: profkit_sync::reach::HostView::Missing,
                },
                budget,
            )
        };
        let mut budget = 100;
        assert_eq!(kept(&mut budget), Ok(15));
        assert_eq!(budget, 85);
        let to = d.path().join("debug/.build-id/ab/cdef");
        assert_eq!(std::fs::read(&to).unwrap(), b"\x7fELF not really");
        assert_eq!(std::fs::metadata(&to).unwrap().mode() & 0o777, 0o600);
        assert_eq!(kept(&mut budget), Ok(0), "already kept");
        std::fs::remove_file(&to).unwrap();
        let mut small = 10;
        let e = kept(&mut small).unwrap_err();
        assert!(e.contains("per session"), "{e}");
        // A link where a directory should be: refused, not followed.
        let d2 = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(d.path(), d2.path().join("debug")).unwrap();
        let f = std::fs::File::open(&src).unwrap();
        let e = keep_binary(
            d2.path(),
            KeptBinary {
                path: "/ns/app".into(),
                build_id: vec![0x11, 0x22],
                file: f,
                host: profkit_sync::reach::HostView::Missing,
            },
            &mut budget,
        )
        .unwrap_err();
        assert!(e.contains("not a directory"), "{e}");
    }

    #[test]
    fn a_namespaced_perf_map_is_copied_when_it_grew() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path();
        let root = p.join("root");
        std::fs::create_dir_all(root.join("tmp")).unwrap();
        std::fs::create_dir_all(p.join("proc/20")).unwrap();
        std::os::unix::fs::symlink(&root, p.join("proc/20/root")).unwrap();
        let out = p.join("session");
        std::fs::create_dir(&out).unwrap();
        let map = root.join("tmp/perf-3.map");
        std::fs::write(&map, "1000 10 a\n").unwrap();
        let me = std::fs::metadata(&map).unwrap().uid();
        let proc_root = p.join("proc");
        let copy = |owner| copy_ns_perf_map(&out, &proc_root, 20, 3, owner);
        assert_eq!(copy(me), Ok(Some(10)));
        assert_eq!(copy(me), Ok(None), "not grown");
        std::fs::write(&map, "1000 10 a\n2000 10 b\n").unwrap();
        assert_eq!(copy(me), Ok(Some(20)));
        assert_eq!(
            std::fs::read_to_string(out.join("perf-20.map")).unwrap(),
            "1000 10 a\n2000 10 b\n"
        );
        let e = copy(me + 1).unwrap_err().unwrap();
        assert!(e.contains("not by the process's user"), "{e}");
        std::fs::remove_file(&map).unwrap();
        assert_eq!(copy(me), Err(None), "gone: skipped silently");
    }
}
