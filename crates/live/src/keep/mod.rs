//! Keeping what a container takes with it: binaries the host cannot reach
//! at their recorded paths, and JIT maps in a container's own `/tmp`.
//!
//! The sync stage finds the binaries (`profkit_sync::reach`) and queues
//! them already opened through `/proc/PID/map_files`; each round the
//! engine hands them to one copier thread, which writes each as
//! `debug/.kept/COOKIE` (16 hex digits) in the session directory unless
//! one is there already: keyed by the cookie of the very file copied, not
//! by its build-id, which any other file may claim too (a report names
//! only that cookie's samples with the copy). Regular files only, at most
//! [`BINARY_KEEP_MAX_BYTES`] each; copied by their data (holes and
//! all-zero blocks stay holes), charged to the session's [`DiskBudget`] as
//! the file owner's by their blocks on disk before they are written, and
//! at most [`BINARIES_KEPT_MAX_BYTES`] on disk per session; a binary over
//! a cap is named in the stop summary with why.
//!
//! Processes with anonymous code in another pid namespace than the
//! daemon's get their `tmp/perf-NSPID.map` (inside their root, no links)
//! kept as `perf-HOSTPID.map`, with the host's rules (regular file, owned
//! by the process's owner, at most `PERF_MAP_MAX_BYTES`). The first time
//! the map opens, its descriptor is held (at most [`MAX_HELD_PERF_MAPS`],
//! and a quarter of the daemon's open-file limit): each round the new
//! perf map lines it grew by are appended to the copy (`jitmap`: parsed,
//! bounded per line and per map, a line kept once even when the map is
//! truncated and written again; [`PERF_MAP_LINES_HELD_MAX`] lines
//! remembered over all maps), charged to the [`DiskBudget`] as the
//! process owner's, and when the process exits (its
//! EXIT seen by the sync stage, or its `/proc/PID/root` gone) and at stop
//! the rest is read through the descriptor, which keeps the file readable
//! after the process's mount namespace and its tmpfs `/tmp` are gone,
//! and it is closed. A map that opens while the held descriptors are at
//! their bound is opened again each round and read on the same way (what
//! it gains in its process's last round is then lost), and counted. A map not there yet
//! at a look (a runtime may map its first code before it makes its map)
//! is looked for again each round while the process lives, the first
//! [`TMP_DIR_LOOKS`] times in its `tmp` directory held open (within the
//! same bound), so a map made just before the process exits is still
//! found. What cannot be kept at all is counted in [`KeptSummary`]:
//! processes with samples in anonymous code that exited before a round
//! looked at them (their pid namespace is unknown then: the sync stage
//! learns of a process only when it drains its records, every round),
//! processes in another pid namespace that exited before their map could
//! be opened, and those whose root never had one while they ran.
//!
//! All file work, `/proc` reads included, happens on two threads, one
//! copying binaries and one keeping JIT maps (a large binary's copy does
//! not delay the first look at a short-lived process's map), so a slow or
//! stuck file system never stalls the rounds; at stop the engine waits at
//! most [`KEEP_STOP_WAIT`] for them.

mod binaries;
mod maps;

pub(crate) use binaries::write_not_kept;
use binaries::*;
use maps::*;

use crate::budget::{on_disk, DiskBudget, Refusal};
use crate::extras::{check_metadata, check_opened, write_new, SavedExtras, PERF_MAP_MAX_BYTES};
use crate::jitmap::{MapCopy, PERF_MAP_READ_PER_LOOK};
use profkit_sync::reach::{
    foreign_ns_pid, open_perf_map_in_root, perf_map_in_root, KeepQueue, KeptBinary,
};
use profkit_sync::SyncStage;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::time::{Duration, Instant};

/// Where kept binaries go in the session's `debug/`, each named by its
/// cookie in 16 hex digits (kept in step with `profkit_report`).
pub const KEPT_DIR: &str = profkit_eventlog::layout::KEPT_DIR;
/// The largest binary kept in a session.
pub const BINARY_KEEP_MAX_BYTES: u64 = 512 << 20;
/// All binaries kept in one session together.
pub const BINARIES_KEPT_MAX_BYTES: u64 = 2 << 30;
/// Lines of JIT maps the map thread remembers at once (to tell a line
/// already kept), all maps together: past it, new lines are not kept.
pub const PERF_MAP_LINES_HELD_MAX: u64 = 2 << 20;
/// First looks at JIT maps taken before one other look, at most.
const FIRST_LOOKS_IN_A_ROW: usize = 16;
/// Processes newly classified (own pid namespace or not) per round.
pub const NS_PROCESSES_PER_ROUND: usize = 64;
/// How long stop waits for copies still under way.
pub const KEEP_STOP_WAIT: Duration = Duration::from_secs(10);
/// JIT maps of other pid namespaces held open at once, at most (fewer
/// when a quarter of the daemon's open-file limit is less); `tmp`
/// directories held count too.
pub const MAX_HELD_PERF_MAPS: usize = 1024;
/// Looks for which a process's `tmp` directory is held while its map is
/// not there yet: a map made after the first look is found through it
/// even if its process exits before the next.
pub const TMP_DIR_LOOKS: u32 = 4;

/// What was kept from other namespaces (the stop summary's `kept`), and
/// what of their JIT maps could not be.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeptSummary {
    /// Binaries copied into `debug/.kept/` (unreachable from the host).
    pub binaries: u64,
    /// Their bytes on disk (their holes are holes in the copy too).
    pub binary_bytes: u64,
    /// JIT maps copied from processes in other pid namespaces (a map
    /// copied again or read on counts once).
    pub perf_maps: u64,
    /// Of those, maps never held open (the bound was reached): copied
    /// whole each round they grew, so what their process wrote after the
    /// last copy is missing.
    #[serde(default)]
    pub perf_maps_not_held: u64,
    /// Processes with samples in anonymous code that exited before a sync
    /// round looked at them (so their pid namespace is unknown) and whose
    /// `/tmp/perf-PID.map` the host does not have.
    #[serde(default)]
    pub perf_maps_unlooked: u64,
    /// Processes in other pid namespaces with samples in anonymous code
    /// that exited before their first look could open their map.
    #[serde(default)]
    pub perf_maps_exited: u64,
    /// Processes in other pid namespaces with samples in anonymous code
    /// whose root had no `tmp/perf-NSPID.map` whenever it was looked at
    /// while they lived.
    #[serde(default)]
    pub perf_maps_absent: u64,
}

impl KeptSummary {
    /// What of the JIT maps could not be kept, one sentence each, to
    /// follow "not copied into the session: " (empty if nothing).
    pub fn notes(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.perf_maps_unlooked > 0 {
            out.push(format!(
                "the JIT maps of {} processes with samples in anonymous code, if they wrote any: they exited before a sync round looked at them and the host's /tmp has no perf-PID.map of theirs (one written in another pid or mount namespace went with it)",
                self.perf_maps_unlooked
            ));
        }
        if self.perf_maps_exited > 0 {
            out.push(format!(
                "the JIT maps of {} processes in other pid namespaces with samples in anonymous code: they exited before a sync round could open them",
                self.perf_maps_exited
            ));
        }
        if self.perf_maps_absent > 0 {
            out.push(format!(
                "the JIT maps of {} processes in other pid namespaces with samples in anonymous code: their root had no tmp/perf-NSPID.map whenever it was looked at while they ran",
                self.perf_maps_absent
            ));
        }
        if self.perf_maps_not_held > 0 {
            out.push(format!(
                "perhaps the end of {} JIT maps from other pid namespaces: more maps were held open than the daemon holds (at most {MAX_HELD_PERF_MAPS}), so they were copied each round instead, without what their process wrote after the last copy",
                self.perf_maps_not_held
            ));
        }
        out
    }
}

/// A binary not kept: why, and whether the disk budget refused it (then
/// it is named there, not again among the refusals).
type NotKept = (String, bool);

enum Done {
    Binary(Result<u64, NotKept>),
    PerfMap(MapDone),
}

/// What the first look found about a process.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Not answered yet.
    #[default]
    Asked,
    HostNs,
    Vanished,
    Foreign,
}

/// The engine's view of a process with anonymous code.
#[derive(Debug, Default)]
struct NsProcess {
    owner: u32,
    kind: Kind,
    ns_pid: Option<u32>,
    /// Looks sent and not answered.
    in_flight: u32,
    /// No look is sent any more (the last one was, or it is gone).
    done: bool,
    copied: bool,
    ever_held: bool,
    crowded: bool,
    refused: bool,
    /// Looked at while alive.
    seen_alive: bool,
}

/// The engine's side: a binary copier thread and a JIT map thread, what
/// they were asked, what they did.
pub(crate) struct Keeper {
    binaries: Option<Sender<KeptBinary>>,
    maps: Option<Sender<MapJob>>,
    rx: Receiver<Done>,
    queue: KeepQueue,
    /// Processes with anonymous code by pid.
    ns: HashMap<u32, NsProcess>,
    pending: usize,
    pub(crate) kept: KeptSummary,
    pub(crate) refused: Vec<String>,
    /// Binaries other mount namespaces hide that could not be kept,
    /// `PATH: why` (also in `refused`), for the session's
    /// [`NOT_KEPT_FILE`].
    pub(crate) binaries_refused: Vec<String>,
}

/// The session file naming, one per line as `PATH: why`, the binaries of
/// other mount namespaces that could not be kept: reports add the reason
/// to "PATH not found".
pub const NOT_KEPT_FILE: &str = "debug/not-kept";
/// At most this many lines are written to [`NOT_KEPT_FILE`].
pub const NOT_KEPT_LINES: usize = 1000;

impl Keeper {
    /// A keeper writing into `dir` (the held session directory), taking
    /// binaries from `queue`, reading processes in `proc_root`.
    pub(crate) fn new(
        dir: PathBuf,
        queue: KeepQueue,
        proc_root: PathBuf,
        budget: DiskBudget,
    ) -> Self {
        let (btx, bjobs) = channel::<KeptBinary>();
        let (mtx, mjobs) = channel::<MapJob>();
        let (done, rx) = channel::<Done>();
        let bdone = done.clone();
        let bdir = dir.clone();
        let bbudget = budget.clone();
        let binaries = std::thread::Builder::new()
            .name("profkit-keep".into())
            .spawn(move || {
                let mut left = BINARIES_KEPT_MAX_BYTES;
                for b in bjobs {
                    let d = Done::Binary(keep_binary(&bdir, b, &mut left, &bbudget));
                    if bdone.send(d).is_err() {
                        return;
                    }
                }
            });
        let maps = std::thread::Builder::new()
            .name("profkit-keep-jit".into())
            .spawn(move || {
                let mut r = MapReader::new(dir, proc_root, held_limit(), budget);
                // First looks (nothing of the map opened or read yet) go
                // before the others: they open and hold the map before its
                // process exits, and read little. Every
                // [`FIRST_LOOKS_IN_A_ROW`]th job is another, so a stream
                // of new processes does not hold back the reads.
                let (mut first, mut rest) = (VecDeque::new(), VecDeque::new());
                let mut in_a_row = 0;
                loop {
                    let mut got = Vec::new();
                    if first.is_empty() && rest.is_empty() {
                        match mjobs.recv() {
                            Ok(j) => got.push(j),
                            Err(_) => return,
                        }
                    }
                    got.extend(mjobs.try_iter());
                    for j in got {
                        if r.is_new(j.pid) {
                            first.push_back(j);
                        } else {
                            rest.push_back(j);
                        }
                    }
                    let j = if in_a_row >= FIRST_LOOKS_IN_A_ROW && !rest.is_empty() {
                        in_a_row = 0;
                        rest.pop_front()
                    } else {
                        in_a_row += 1;
                        first.pop_front().or_else(|| rest.pop_front())
                    };
                    let Some(j) = j else {
                        continue;
                    };
                    if done.send(Done::PerfMap(r.look(&j))).is_err() {
                        return;
                    }
                }
            });
        Keeper {
            binaries: binaries.is_ok().then_some(btx),
            maps: maps.is_ok().then_some(mtx),
            rx,
            queue,
            ns: HashMap::new(),
            pending: 0,
            kept: KeptSummary::default(),
            refused: Vec::new(),
            binaries_refused: Vec::new(),
        }
    }

    fn send_binary(&mut self, b: KeptBinary) {
        let unsent = match &self.binaries {
            Some(tx) => tx.send(b).err().map(|e| e.0),
            None => Some(b),
        };
        match unsent {
            None => self.pending += 1,
            Some(b) => self
                .refused
                .push(format!("{}: the copier thread is not running", b.path)),
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
            Done::Binary(Err((why, by_budget))) => {
                self.binaries_refused.push(why.clone());
                if !by_budget {
                    self.refused.push(why);
                }
            }
            Done::PerfMap(m) => self.collect_map(m),
        }
    }

    fn collect_map(&mut self, m: MapDone) {
        let Some(p) = self.ns.get_mut(&m.pid) else {
            return;
        };
        p.in_flight = p.in_flight.saturating_sub(1);
        if m.ns_pid.is_some() {
            p.ns_pid = m.ns_pid;
            p.kind = Kind::Foreign;
        }
        p.ever_held |= m.held;
        p.crowded |= m.crowded;
        p.seen_alive |= m.alive;
        if !m.again {
            p.done = true;
        }
        match m.seen {
            Seen::HostNs => p.kind = Kind::HostNs,
            Seen::Vanished => p.kind = Kind::Vanished,
            Seen::NoMap | Seen::Unchanged => {}
            Seen::Copied => {
                if !p.copied {
                    p.copied = true;
                    self.kept.perf_maps += 1;
                }
            }
            Seen::Refused(why) => {
                p.refused = true;
                self.refused.push(why);
            }
            Seen::OverBudget => p.refused = true,
        }
    }

    /// Once per round: collects finished copies, hands over the binaries
    /// the stage queued, and asks for the JIT maps of processes with
    /// anonymous code (classified on the map thread at their first look;
    /// unless a look is under way): a last look for those that exited.
    pub(crate) fn round(&mut self, stage: &SyncStage) {
        let table = stage.processes();
        let owners: Vec<(u32, u32, bool)> = stage
            .anon_owners()
            .map(|(pid, owner)| {
                let exited = table.get(pid).is_none_or(|p| p.exited_round.is_some());
                (pid, owner, exited)
            })
            .collect();
        self.round_with(&owners);
    }

    /// [`Keeper::round`] for (pid, owner, exited) of every process with
    /// anonymous code.
    fn round_with(&mut self, owners: &[(u32, u32, bool)]) {
        while let Ok(d) = self.rx.try_recv() {
            self.collect(d);
        }
        self.take_binaries();
        let mut classified = 0;
        for &(pid, owner, exited) in owners {
            if let std::collections::hash_map::Entry::Vacant(e) = self.ns.entry(pid) {
                if classified >= NS_PROCESSES_PER_ROUND {
                    continue;
                }
                classified += 1;
                e.insert(NsProcess {
                    owner,
                    ..Default::default()
                });
            }
            self.ask_perf_map(pid, exited, false);
        }
    }

    fn take_binaries(&mut self) {
        let (bins, refused) = self.queue.take();
        self.binaries_refused.extend(refused.iter().cloned());
        self.refused.extend(refused);
        for b in bins {
            self.send_binary(b);
        }
    }

    /// Sends a look at `pid`'s map unless none is wanted, or (unless
    /// `anyway`) one is under way; `last`: the process exited or the
    /// session stops.
    fn ask_perf_map(&mut self, pid: u32, last: bool, anyway: bool) {
        let Some(p) = self.ns.get_mut(&pid) else {
            return;
        };
        if p.done || matches!(p.kind, Kind::HostNs | Kind::Vanished) {
            return;
        }
        if p.in_flight > 0 && !anyway {
            return;
        }
        let j = MapJob {
            pid,
            owner: p.owner,
            ns_pid: p.ns_pid,
            last,
        };
        if last {
            p.done = true;
        }
        let sent = self.maps.as_ref().is_some_and(|tx| tx.send(j).is_ok());
        if sent {
            p.in_flight += 1;
            self.pending += 1;
        } else {
            p.done = true;
        }
    }

    /// At stop, after the last drain and the host's JIT maps
    /// (`extras`): the binaries it queued, a last look at every process
    /// with anonymous code not done with (`owners`: those the stage knew
    /// before the last drain), waiting at most `wait` for both threads;
    /// then counts what could not be kept.
    pub(crate) fn finish(&mut self, wait: Duration, owners: &[(u32, u32)], extras: &SavedExtras) {
        while let Ok(d) = self.rx.try_recv() {
            self.collect(d);
        }
        self.take_binaries();
        for &(pid, owner) in owners {
            self.ns.entry(pid).or_insert_with(|| NsProcess {
                owner,
                ..Default::default()
            });
        }
        let pids: Vec<u32> = self.ns.keys().copied().collect();
        for pid in pids {
            self.ask_perf_map(pid, true, true);
        }
        self.binaries = None;
        self.maps = None;
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
        self.count_missed(extras);
    }

    /// Counts the sampled processes with anonymous code whose JIT map
    /// could not be kept, and the maps never held open.
    fn count_missed(&mut self, extras: &SavedExtras) {
        let k = &mut self.kept;
        for &pid in &extras.perf_maps_missing {
            match self.ns.get(&pid).map(|p| p.kind) {
                None | Some(Kind::Asked | Kind::Vanished) => k.perf_maps_unlooked += 1,
                Some(Kind::Foreign) => match &self.ns[&pid] {
                    p if p.copied || p.refused => {}
                    p if p.seen_alive => k.perf_maps_absent += 1,
                    _ => k.perf_maps_exited += 1,
                },
                Some(Kind::HostNs) => {}
            }
        }
        k.perf_maps_not_held = self
            .ns
            .values()
            .filter(|p| p.copied && p.crowded && !p.ever_held)
            .count() as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::budget::BudgetLimit;
    use std::io::{Seek, SeekFrom};
    use std::os::unix::fs::MetadataExt;

    fn budget_of(total: u64) -> DiskBudget {
        DiskBudget::new(BudgetLimit {
            total,
            source: "test".into(),
        })
    }

    #[test]
    fn binaries_not_kept_are_listed_for_reports() {
        let d = tempfile::tempdir().unwrap();
        let b = budget_of(1 << 30);
        write_not_kept(d.path(), &[], &b).unwrap();
        assert!(!d.path().join("debug").exists(), "nothing refused, no file");
        let many: Vec<String> = (0..NOT_KEPT_LINES + 5)
            .map(|i| format!("/ns/app{i}: no build-id\nsecond line"))
            .collect();
        write_not_kept(d.path(), &many, &b).unwrap();
        let text = std::fs::read_to_string(d.path().join(NOT_KEPT_FILE)).unwrap();
        assert_eq!(text.lines().count(), NOT_KEPT_LINES);
        assert_eq!(
            text.lines().next(),
            Some("/ns/app0: no build-id second line")
        );
    }

    #[test]
    fn a_directory_of_the_session_is_made_once_and_never_through_a_link() {
        let d = tempfile::tempdir().unwrap();
        let sub = d.path().join("debug");
        make_dir(&sub).unwrap();
        make_dir(&sub).unwrap();
        assert_eq!(std::fs::metadata(&sub).unwrap().mode() & 0o777, 0o700);
        let link = d.path().join("link");
        std::os::unix::fs::symlink(&sub, &link).unwrap();
        let e = make_dir(&link).unwrap_err();
        assert!(matches!(e, KeepError::NotADirectory { .. }), "{e:?}");
        assert_eq!(
            e.to_string(),
            format!("{} is not a directory", link.display())
        );
        let e = make_dir(&d.path().join("none/deeper")).unwrap_err();
        assert!(matches!(e, KeepError::Create { .. }), "{e:?}");
        assert!(e.to_string().starts_with("creating "), "{e}");
    }

    #[test]
    fn a_kept_binary_lands_under_its_cookie_once() {
        let d = tempfile::tempdir().unwrap();
        let src = d.path().join("app");
        std::fs::write(&src, b"\x7fELF not really").unwrap();
        let b = budget_of(1 << 30);
        let kept = |budget: &mut u64| {
            let mut f = std::fs::File::open(&src).unwrap();
            // The stage read its build-id through it: not at offset 0.
            f.seek(SeekFrom::Start(5)).unwrap();
            keep_binary(
                d.path(),
                KeptBinary {
                    path: "/ns/app".into(),
                    build_id: vec![0xab, 0xcd, 0xef],
                    cookie: 0xabcdef,
                    file: f,
                    host: profkit_sync::reach::HostView::Missing,
                },
                budget,
                &b,
            )
        };
        let mut budget = 1 << 20;
        // Its bytes on disk: a block.
        assert_eq!(kept(&mut budget), Ok(4096));
        assert_eq!(budget, (1 << 20) - 4096);
        assert_eq!(b.extras(), 4096);
        let to = d.path().join("debug/.kept/0000000000abcdef");
        assert_eq!(std::fs::read(&to).unwrap(), b"\x7fELF not really");
        assert_eq!(std::fs::metadata(&to).unwrap().mode() & 0o777, 0o600);
        assert_eq!(kept(&mut budget), Ok(0), "already kept");
        std::fs::remove_file(&to).unwrap();
        let mut small = 10;
        let (e, by_budget) = kept(&mut small).unwrap_err();
        assert!(e.contains("per session") && !by_budget, "{e}");
        // A link where a directory should be: refused, not followed.
        let d2 = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(d.path(), d2.path().join("debug")).unwrap();
        let f = std::fs::File::open(&src).unwrap();
        let e = keep_binary(
            d2.path(),
            KeptBinary {
                path: "/ns/app".into(),
                build_id: vec![0x11, 0x22],
                cookie: 0x1122,
                file: f,
                host: profkit_sync::reach::HostView::Missing,
            },
            &mut budget,
            &b,
        )
        .unwrap_err()
        .0;
        assert!(e.contains("not a directory"), "{e}");
    }

    /// A fake `/proc` with processes in another pid namespace: each
    /// `PROC/PID/root` a link to `ROOTS/PID` (with a `tmp`), seeing
    /// itself as `ns_pid`.
    struct FakeProcs {
        _d: tempfile::TempDir,
        proc_root: PathBuf,
        session: PathBuf,
        roots: PathBuf,
        me: u32,
    }

    impl FakeProcs {
        fn new() -> Self {
            let d = tempfile::tempdir().unwrap();
            let p = d.path().to_path_buf();
            let proc_root = p.join("proc");
            std::fs::create_dir_all(proc_root.join("self/ns")).unwrap();
            std::os::unix::fs::symlink("pid:[1]", proc_root.join("self/ns/pid")).unwrap();
            let session = p.join("session");
            std::fs::create_dir(&session).unwrap();
            let me = std::fs::metadata(&session).unwrap().uid();
            FakeProcs {
                _d: d,
                proc_root,
                session,
                roots: p.join("roots"),
                me,
            }
        }

        /// Process `pid`, `ns_pid` in its pid namespace (`pid:[2]`; `1`
        /// when `ns_pid` is `None`); returns its map's path in its root.
        fn process(&self, pid: u32, ns_pid: Option<u32>) -> PathBuf {
            let dir = self.proc_root.join(pid.to_string());
            std::fs::create_dir_all(dir.join("ns")).unwrap();
            let ns = if ns_pid.is_some() {
                "pid:[2]"
            } else {
                "pid:[1]"
            };
            std::os::unix::fs::symlink(ns, dir.join("ns/pid")).unwrap();
            let seen = ns_pid.unwrap_or(pid);
            std::fs::write(dir.join("status"), format!("NSpid:\t{pid}\t{seen}\n")).unwrap();
            let root = self.roots.join(pid.to_string());
            std::fs::create_dir_all(root.join("tmp")).unwrap();
            std::os::unix::fs::symlink(&root, dir.join("root")).unwrap();
            root.join(format!("tmp/perf-{seen}.map"))
        }

        /// The process exits: its `/proc` entry and its root (its tmpfs)
        /// go, the map with them.
        fn exit(&self, pid: u32) {
            std::fs::remove_dir_all(self.proc_root.join(pid.to_string())).unwrap();
            std::fs::remove_dir_all(self.roots.join(pid.to_string())).unwrap();
        }

        fn reader(&self, max_held: usize) -> MapReader {
            MapReader::new(
                self.session.clone(),
                self.proc_root.clone(),
                max_held,
                budget_of(1 << 30),
            )
        }

        fn kept(&self, pid: u32) -> String {
            std::fs::read_to_string(self.session.join(format!("perf-{pid}.map"))).unwrap()
        }
    }

    /// Looks at `pid` until its map is read to its end (a look reads a
    /// part of a big map): what the last look saw.
    fn settle(r: &mut MapReader, pid: u32, owner: u32) -> Seen {
        for _ in 0..100 {
            match look(r, pid, owner, false).0 {
                Seen::Copied => continue,
                seen => return seen,
            }
        }
        panic!("{pid}: still copying after 100 looks");
    }

    fn look(r: &mut MapReader, pid: u32, owner: u32, last: bool) -> (Seen, bool, bool) {
        let d = r.look(&MapJob {
            pid,
            owner,
            ns_pid: None,
            last,
        });
        (d.seen, d.held, d.again)
    }

    /// Without a held descriptor (none may be held), today's rules: the
    /// map is copied again each look it grew, refused when another user
    /// owns it, and a missing one is looked for again while the process
    /// lives.
    #[test]
    fn a_namespaced_perf_map_is_copied_when_it_grew() {
        let f = FakeProcs::new();
        let map = f.process(20, Some(3));
        let mut r = f.reader(0);
        let me = f.me;
        assert_eq!(look(&mut r, 20, me, false), (Seen::NoMap, false, true));
        std::fs::write(&map, "1000 10 a\n").unwrap();
        assert_eq!(look(&mut r, 20, me, false), (Seen::Copied, false, true));
        assert_eq!(look(&mut r, 20, me, false), (Seen::Unchanged, false, true));
        std::fs::write(&map, "1000 10 a\n2000 10 b\n").unwrap();
        assert_eq!(look(&mut r, 20, me, false), (Seen::Copied, false, true));
        assert_eq!(f.kept(20), "1000 10 a\n2000 10 b\n");
        let (seen, _, again) = look(&mut r, 20, me + 1, false);
        assert!(
            matches!(&seen, Seen::Refused(e) if e.contains("not by the process's user")),
            "{seen:?}"
        );
        assert!(!again);
        // In the daemon's own pid namespace: the host's /tmp is its.
        f.process(30, None);
        assert_eq!(look(&mut r, 30, me, false), (Seen::HostNs, false, false));
        // Gone before its namespace could be told.
        assert_eq!(look(&mut r, 40, me, false), (Seen::Vanished, false, false));
        // Gone once known: not looked for again.
        f.exit(20);
        let d = r.look(&MapJob {
            pid: 20,
            owner: me,
            ns_pid: Some(3),
            last: false,
        });
        assert_eq!((d.seen, d.again), (Seen::NoMap, false));
    }

    /// The map's descriptor is held after the first copy: lines written
    /// after the last look, even after the file is unlinked and the
    /// process's root and `/proc` entry are gone, are read through it.
    #[test]
    fn a_held_perf_map_is_read_to_its_end_after_its_root_is_gone() {
        use std::io::Write;
        let f = FakeProcs::new();
        let map = f.process(20, Some(3));
        let mut w = std::fs::File::create(&map).unwrap();
        w.write_all(b"1000 10 a\n").unwrap();
        let mut r = f.reader(4);
        assert_eq!(look(&mut r, 20, f.me, false), (Seen::Copied, true, true));
        w.write_all(b"2000 10 b\n").unwrap();
        assert_eq!(look(&mut r, 20, f.me, false), (Seen::Copied, true, true));
        assert_eq!(look(&mut r, 20, f.me, false), (Seen::Unchanged, true, true));
        assert_eq!(f.kept(20), "1000 10 a\n2000 10 b\n");
        // Its last round: more code, then it exits and its tmpfs goes.
        w.write_all(b"3000 10 c\n").unwrap();
        f.exit(20);
        assert!(!map.exists() && !f.proc_root.join("20").exists());
        w.write_all(b"4000 10 d\n").unwrap();
        drop(w);
        // Its exit not told (a lost EXIT record): its gone root says so.
        assert_eq!(look(&mut r, 20, f.me, false), (Seen::Copied, false, false));
        assert_eq!(f.kept(20), "1000 10 a\n2000 10 b\n3000 10 c\n4000 10 d\n");
        assert!(r.held.is_empty(), "closed");

        // Told by the stage (`last`) while its root is still there.
        let map = f.process(21, Some(4));
        std::fs::write(&map, "1000 10 a\n").unwrap();
        assert_eq!(look(&mut r, 21, f.me, false), (Seen::Copied, true, true));
        std::fs::write(&map, "1000 10 a\n2000 10 bb\n").unwrap();
        // A copy that is not the one written (truncated here) is written
        // again whole rather than appended to.
        std::fs::write(f.session.join("perf-21.map"), "10").unwrap();
        assert_eq!(look(&mut r, 21, f.me, true), (Seen::Copied, false, false));
        assert_eq!(f.kept(21), "1000 10 a\n2000 10 bb\n");
        assert!(r.held.is_empty());
    }

    /// A map not there at the first look is looked for in the process's
    /// `tmp` directory held open, for a few looks: found there after the
    /// directory left the process's root and the process exited.
    #[test]
    fn a_map_made_after_the_first_look_is_found_through_the_held_tmp_directory() {
        let f = FakeProcs::new();
        let map = f.process(20, Some(3));
        let mut r = f.reader(4);
        assert_eq!(look(&mut r, 20, f.me, false), (Seen::NoMap, false, true));
        assert!(r.tmp_dirs.contains_key(&20));
        std::fs::write(&map, "1000 10 a\n").unwrap();
        // Its mount goes with its namespace: the directory is elsewhere.
        let moved = f.roots.join("moved-tmp");
        std::fs::rename(f.roots.join("20/tmp"), &moved).unwrap();
        f.exit(20);
        let d = r.look(&MapJob {
            pid: 20,
            owner: f.me,
            ns_pid: Some(3),
            last: false,
        });
        assert_eq!((d.seen, d.held, d.again), (Seen::Copied, false, false));
        assert_eq!(f.kept(20), "1000 10 a\n");
        assert!(r.tmp_dirs.is_empty() && r.no_map_looks.is_empty());

        // A process that never writes one: its directory is let go.
        f.process(21, Some(4));
        for _ in 0..TMP_DIR_LOOKS {
            assert_eq!(look(&mut r, 21, f.me, false), (Seen::NoMap, false, true));
            assert!(r.tmp_dirs.contains_key(&21));
        }
        assert_eq!(look(&mut r, 21, f.me, false), (Seen::NoMap, false, true));
        assert!(r.tmp_dirs.is_empty());
        // Held directories count against the bound.
        let mut one = f.reader(1);
        f.process(22, Some(5));
        assert_eq!(look(&mut one, 22, f.me, false), (Seen::NoMap, false, true));
        std::fs::write(f.process(23, Some(6)), "1000 10 a\n").unwrap();
        let d = one.look(&MapJob {
            pid: 23,
            owner: f.me,
            ns_pid: None,
            last: false,
        });
        assert_eq!((d.seen, d.held, d.crowded), (Seen::Copied, false, true));
    }

    /// Gives `p` to a user other than root when the tests run as root
    /// (root's files are bounded by the copies' half only); its owner.
    fn not_root(p: &Path) -> u32 {
        let uid = std::fs::metadata(p).unwrap().uid();
        if uid != 0 {
            return uid;
        }
        std::os::unix::fs::chown(p, Some(4242), None).unwrap();
        4242
    }

    /// Issue 25: a sparse binary of 511 MiB with 16 KiB of data costs
    /// its data: written with its holes, charged by its blocks (today's
    /// code wrote all 511 MiB, six of them 3 GiB).
    #[test]
    fn a_sparse_binary_is_kept_with_its_holes_and_charged_its_data() {
        use std::os::unix::fs::FileExt;
        let d = tempfile::tempdir().unwrap();
        let b = budget_of(64 << 20);
        let mut left = BINARIES_KEPT_MAX_BYTES;
        for i in 0..6u8 {
            let src = d.path().join(format!("app{i}"));
            let f = File::create(&src).unwrap();
            f.write_all_at(&[0x7f, b'E', b'L', b'F', i], 0).unwrap();
            f.write_all_at(&[i + 1; 12 << 10], 64 << 10).unwrap();
            f.set_len(511 << 20).unwrap();
            drop(f);
            let n = keep_binary(
                d.path(),
                KeptBinary {
                    path: format!("/ns/app{i}"),
                    build_id: vec![0xab, i],
                    cookie: 0xab00 + u64::from(i),
                    file: File::open(&src).unwrap(),
                    host: profkit_sync::reach::HostView::Missing,
                },
                &mut left,
                &b,
            )
            .unwrap();
            assert!(n <= 32 << 10, "{n} bytes on disk");
            let to =
                profkit_eventlog::SessionLayout::new(d.path()).kept_copy(0xab00 + u64::from(i));
            let m = std::fs::metadata(&to).unwrap();
            assert_eq!(m.len(), 511 << 20);
            assert!(m.blocks() * 512 <= 32 << 10, "{} on disk", m.blocks() * 512);
            let mut head = [0u8; 5];
            File::open(&to)
                .unwrap()
                .read_exact_at(&mut head, 0)
                .unwrap();
            assert_eq!(head, [0x7f, b'E', b'L', b'F', i]);
        }
        assert!(b.extras() <= 6 * (32 << 10), "{}", b.extras());
        // Real data over the user's quarter is refused, named, not
        // written.
        let big = d.path().join("big");
        std::fs::write(&big, vec![1u8; 17 << 20]).unwrap();
        not_root(&big);
        let (e, by_budget) = keep_binary(
            d.path(),
            KeptBinary {
                path: "/ns/big".into(),
                build_id: vec![0xcd, 0x01],
                cookie: 0xcd01,
                file: File::open(&big).unwrap(),
                host: profkit_sync::reach::HostView::Missing,
            },
            &mut left,
            &b,
        )
        .unwrap_err();
        assert!(by_budget && e.contains("quarter of the 64.0 MiB"), "{e}");
        assert!(!profkit_eventlog::SessionLayout::new(d.path())
            .kept_copy(0xcd01)
            .exists());
        let s = b.summary();
        assert_eq!(s.refused.get("user_share"), Some(&1));
        assert!(s.refused_named[0].starts_with("/ns/big (uid "), "{s:?}");
    }

    /// Issue 25: a namespaced map truncated and written again each round
    /// costs only its new lines; its copy is appended to, never written
    /// again whole (today's code replaced it each round it shrank: 1.1 GiB
    /// in 8 s for two processes).
    #[test]
    fn a_namespaced_map_truncated_and_regrown_is_not_copied_again() {
        use std::io::Write;
        let f = FakeProcs::new();
        let map = f.process(20, Some(3));
        let body: String = (0..2000)
            .map(|i| format!("{:x} 40 LazyCompile:~f{i} a.js:1:1\n", 0x10000 + i * 64))
            .collect();
        std::fs::write(&map, &body).unwrap();
        for max_held in [4, 0] {
            let mut r = f.reader(max_held);
            let _ = std::fs::remove_file(f.session.join("perf-20.map"));
            assert_eq!(look(&mut r, 20, f.me, false).0, Seen::Copied);
            assert_eq!(settle(&mut r, 20, f.me), Seen::Unchanged);
            let kept = f.session.join("perf-20.map");
            let ino = std::fs::metadata(&kept).unwrap().ino();
            let charged = r.budget.extras();
            for round in 0..10 {
                let mut w = std::fs::OpenOptions::new().write(true).open(&map).unwrap();
                w.set_len(0).unwrap();
                w.write_all(body.as_bytes()).unwrap();
                if round == 5 {
                    w.write_all(b"ffff0 10 LazyCompile:~late a.js:9:9\n")
                        .unwrap();
                }
                let (seen, _, _) = look(&mut r, 20, f.me, false);
                let want = if round == 5 {
                    Seen::Copied
                } else {
                    Seen::Unchanged
                };
                assert_eq!(seen, want, "round {round}, held {max_held}");
            }
            assert_eq!(
                std::fs::metadata(&kept).unwrap().ino(),
                ino,
                "written again"
            );
            assert_eq!(
                f.kept(20),
                format!("{body}ffff0 10 LazyCompile:~late a.js:9:9\n")
            );
            let late = "ffff0 10 LazyCompile:~late a.js:9:9\n".len() as u64;
            assert_eq!(r.budget.extras(), charged + late);
        }
    }

    /// Issue 25: fourteen namespaced processes of one user with big maps
    /// take at most the user's quarter of the budget; the rest is refused
    /// and counted (today's code copied each, up to 256 MiB, no total).
    #[test]
    fn namespaced_maps_of_one_user_stop_at_its_share() {
        let f = FakeProcs::new();
        let line = |i: u32| format!("{:x} 40 {}\n", 0x10000 + i * 64, "n".repeat(90));
        let body: String = (0..10_000).map(line).collect(); // 1 MiB
        let mut r = MapReader::new(
            f.session.clone(),
            f.proc_root.clone(),
            16,
            budget_of(16 << 20),
        );
        let mut refused = 0;
        let mut owner = f.me;
        for pid in 100..114 {
            let map = f.process(pid, Some(1));
            std::fs::write(&map, &body).unwrap();
            owner = not_root(&map);
            if settle(&mut r, pid, owner) == Seen::OverBudget {
                refused += 1;
            }
        }
        let s = r.budget.summary();
        assert!(s.extras_bytes <= 4 << 20, "{s:?}");
        let fit = (4 << 20) / (body.len() as u64 + 4096);
        assert_eq!(refused, 14 - fit, "{s:?}");
        assert_eq!(s.refused.get("user_share"), Some(&refused));
        assert!(
            s.refused_named[0].contains(&format!("(uid {owner}): ")),
            "{s:?}"
        );
        let on_disk: u64 = std::fs::read_dir(&f.session)
            .unwrap()
            .flatten()
            .map(|e| e.metadata().unwrap().len())
            .sum();
        assert!(on_disk <= 4 << 20, "{on_disk}");
    }

    /// At most `max_held` maps are held; the others are copied as before
    /// (and said to be crowded out), and held once a descriptor is free.
    #[test]
    fn held_perf_maps_are_bounded() {
        let f = FakeProcs::new();
        let mut r = f.reader(2);
        for pid in [20, 21, 22] {
            std::fs::write(f.process(pid, Some(pid - 10)), "1000 10 a\n").unwrap();
        }
        let mut held = Vec::new();
        for pid in [20, 21, 22] {
            let d = r.look(&MapJob {
                pid,
                owner: f.me,
                ns_pid: None,
                last: false,
            });
            assert_eq!(d.seen, Seen::Copied);
            held.push((d.held, d.crowded));
        }
        assert_eq!(held, [(true, false), (true, false), (false, true)]);
        assert_eq!(r.held.len(), 2);
        assert_eq!(f.kept(22), "1000 10 a\n");
        // 20 exits: 22 is held at its next look.
        assert_eq!(
            look(&mut r, 20, f.me, true),
            (Seen::Unchanged, false, false)
        );
        assert_eq!(look(&mut r, 22, f.me, false), (Seen::Unchanged, true, true));
        assert_eq!(r.held.len(), 2);
        assert!(r.held.contains_key(&22));
    }

    /// The engine's side end to end over both threads: a map kept to its
    /// end after its process exited, a map never written, a process that
    /// exited before its first look; counted, and said.
    #[test]
    fn the_keeper_reads_held_maps_at_exit_and_counts_what_it_could_not_keep() {
        use std::io::Write;
        let f = FakeProcs::new();
        let map = f.process(20, Some(3));
        f.process(21, Some(4)); // never writes a map
        f.process(22, None); // the daemon's pid namespace
        f.process(26, Some(6));
        // A zombie: its pid namespace is known, its root is gone.
        std::fs::remove_file(f.proc_root.join("26/root")).unwrap();
        let mut w = std::fs::File::create(&map).unwrap();
        w.write_all(b"1000 10 a\n").unwrap();
        let mut k = Keeper::new(
            f.session.clone(),
            KeepQueue::default(),
            f.proc_root.clone(),
            budget_of(1 << 30),
        );
        let wait_idle = |k: &mut Keeper| {
            let deadline = Instant::now() + Duration::from_secs(10);
            while k.pending > 0 && Instant::now() < deadline {
                if let Ok(d) = k.rx.recv_timeout(Duration::from_millis(100)) {
                    k.collect(d);
                }
            }
            assert_eq!(k.pending, 0);
        };
        let me = f.me;
        k.round_with(&[(20, me, false), (21, me, false), (22, me, false)]);
        wait_idle(&mut k);
        assert_eq!(k.kept.perf_maps, 1);
        w.write_all(b"2000 10 b\n").unwrap();
        f.exit(20);
        w.write_all(b"3000 10 c\n").unwrap();
        // The stage saw 20 exit; 23 exited before anything looked.
        k.round_with(&[
            (20, me, true),
            (21, me, false),
            (22, me, false),
            (23, me, true),
            (26, me, true),
        ]);
        wait_idle(&mut k);
        assert_eq!(f.kept(20), "1000 10 a\n2000 10 b\n3000 10 c\n");
        // Sampled in anonymous code, no map in the host's /tmp (24 exited
        // before the stage could read its owner).
        let extras = SavedExtras {
            perf_maps_missing: vec![20, 21, 22, 23, 24, 26],
            ..Default::default()
        };
        // 24: exited before the stage could read its owner.
        k.finish(Duration::from_secs(10), &[(20, me), (21, me)], &extras);
        assert!(k.refused.is_empty(), "{:?}", k.refused);
        assert_eq!(
            k.kept,
            KeptSummary {
                perf_maps: 1,
                perf_maps_unlooked: 2,
                perf_maps_exited: 1,
                perf_maps_absent: 1,
                ..Default::default()
            }
        );
        let notes = k.kept.notes();
        assert_eq!(notes.len(), 3, "{notes:?}");
        assert!(
            notes[0].starts_with("the JIT maps of 2 processes with samples in anonymous code"),
            "{notes:?}"
        );
        assert!(
            notes[1].ends_with("they exited before a sync round could open them"),
            "{notes:?}"
        );
        assert!(notes[2].contains("no tmp/perf-NSPID.map"), "{notes:?}");
    }

    #[test]
    fn the_held_bound_is_a_quarter_of_the_open_file_limit_at_most() {
        let n = held_limit();
        assert!(n > 0 && n <= MAX_HELD_PERF_MAPS, "{n}");
    }
}
