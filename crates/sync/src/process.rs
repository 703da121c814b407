//! The process table: every known process with its executable mappings,
//! kept current from MMAP2, COMM, FORK and EXIT records, and seeded from
//! `/proc` so processes that were already running resolve too.
//!
//! Mappings carry the time they appeared (`since`) and, once replaced or
//! torn down by exec, the time they ended (`until`), so a sample resolves
//! against the mapping that was live at its own timestamp even when the
//! sync stage sees records of different CPUs out of time order.

use profkit_eventlog::Cookie;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// HashMap keyed by small integers (pids, tids, cookies): rustc's Fx
/// hash, since the keys are our own integers and SipHash's flood
/// resistance would only cost time.
pub type IntMap<K, V> = HashMap<K, V, rustc_hash::FxBuildHasher>;

/// How addresses in a mapping become offsets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MapKind {
    /// A file: offset = pgoff + ip - start.
    File,
    /// Anonymous executable memory (JIT): offset = ip (absolute).
    Anon,
}

/// One executable mapping of a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Map {
    /// Start address.
    pub start: u64,
    /// End address (exclusive).
    pub end: u64,
    /// File offset of `start`.
    pub pgoff: u64,
    /// The binary.
    pub cookie: Cookie,
    /// How to compute offsets.
    pub kind: MapKind,
    /// Time it appeared (0: before the session).
    pub since: u64,
    /// Time it ended (`u64::MAX`: live).
    pub until: u64,
}

impl Map {
    /// The offset of `ip` (inside the mapping) in its binary.
    #[inline]
    pub fn offset(&self, ip: u64) -> u64 {
        match self.kind {
            MapKind::File => self.pgoff.wrapping_add(ip - self.start),
            MapKind::Anon => ip,
        }
    }
}

/// Non-overlapping mappings keyed by start address. A B-tree rather than
/// a sorted Vec: mappings arrive in any order (top-down is the kernel's
/// usual one), and insertion into the middle of a Vec made a table of
/// 100,000 mappings cost 4-9 s (`cargo bench -p profkit-sync --bench sync
/// -- map_table`).
pub type MapSet = BTreeMap<u64, Map>;

/// The mapping of `maps` that covers `ip`.
#[inline]
fn covering(maps: &MapSet, ip: u64) -> Option<&Map> {
    maps.range(..=ip)
        .next_back()
        .map(|(_, m)| m)
        .filter(|m| ip < m.end)
}

/// The lowest mapping of `maps` that overlaps `[start, end)`.
fn first_overlap(maps: &MapSet, start: u64, end: u64) -> Option<&Map> {
    covering(maps, start).or_else(|| maps.range(start..end).next().map(|(_, m)| m))
}

/// The first live mapping over `m`'s addresses that appeared after `m`.
fn first_newer_overlap(maps: &MapSet, m: &Map) -> Option<Map> {
    covering(maps, m.start)
        .into_iter()
        .chain(maps.range(m.start..m.end).map(|(_, o)| o))
        .find(|o| o.since > m.since)
        .copied()
}

/// A process.
#[derive(Debug, Clone, Default)]
pub struct Process {
    /// Command name of the main thread.
    pub comm: String,
    /// Live mappings, sorted by start, non-overlapping. Shared with the
    /// processes forked from this one until one of them maps something
    /// (a fork storm of a process with 10,000 mappings costs 10,000
    /// mappings, not 10,000 per child).
    live: Arc<MapSet>,
    /// Mappings that ended recently, kept for samples still in other rings.
    retired: Vec<(Map, u64)>,
    /// Whole address spaces that ended at once (exec; the parent's,
    /// for a child seen after its exec): (maps, end time, round), shared.
    retired_spaces: Vec<(Arc<MapSet>, u64, u64)>,
    /// Round in which its EXIT was seen.
    pub exited_round: Option<u64>,
    /// Time of its latest exec (a COMM record with the exec flag).
    exec_time: Option<u64>,
    /// The process it was forked from, and when.
    forked_from: Option<(u32, u64)>,
}

/// One sample that resolved to nothing (counted as `lost_no_mapping` or
/// `lost_no_task`), kept as an example so that the cause can be found:
/// the first [`UNATTRIBUTED_EXAMPLES`] of a session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnattributedSample {
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// The sampled address.
    pub ip: u64,
    /// Sample time.
    pub time: u64,
    /// Kernel mode.
    pub kernel: bool,
    /// The process had no mapping there, or was unknown.
    pub reason: Unresolved,
    /// The process's name, when known.
    pub comm: Option<String>,
}

/// How many generations of parents a forked child's sample may resolve
/// through ([`ProcessTable::resolve`]).
pub const FORK_GENERATIONS: usize = 4;

/// How many unattributed samples a stage keeps as examples.
pub const UNATTRIBUTED_EXAMPLES: usize = 16;

/// Why a user sample did not resolve.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unresolved {
    /// The process is unknown.
    NoTask,
    /// No mapping of the process covers the address.
    NoMapping,
}

impl Process {
    /// Adds a mapping at `time`; overlapping live mappings end at `time`.
    pub fn map(&mut self, m: Map, round: u64) {
        if m.end <= m.start {
            return; // covers nothing
        }
        // A mapping from before the latest exec (read late, see
        // `clear_maps`): it belongs to an address space that has ended.
        if let Some(exec) = self.exec_time.filter(|&e| m.since != 0 && m.since < e) {
            self.retired.push((Map { until: exec, ..m }, round));
            return;
        }
        // A mapping read after a newer one over the same addresses (JIT
        // code is announced again at each mprotect to executable; the two
        // records sat in different CPUs' rings): under the newer one it
        // ended when that began; only its other parts are live.
        if m.since != 0 {
            let newer = first_newer_overlap(&self.live, &m);
            if let Some(n) = newer {
                let (lo, hi) = (m.start.max(n.start), m.end.min(n.end));
                let part = |start: u64, end: u64| Map {
                    start,
                    end,
                    pgoff: m.pgoff.wrapping_add(start - m.start),
                    ..m
                };
                self.retired.push((
                    Map {
                        until: n.since,
                        ..part(lo, hi)
                    },
                    round,
                ));
                if m.start < lo {
                    self.map(part(m.start, lo), round);
                }
                if hi < m.end {
                    self.map(part(hi, m.end), round);
                }
                return;
            }
        }
        let time = m.since;
        let live = Arc::make_mut(&mut self.live);
        while let Some(at) = first_overlap(live, m.start, m.end).map(|o| o.start) {
            let old = live.remove(&at).expect("found above");
            let mut ended = old;
            ended.until = time;
            self.retired.push((ended, round));
            // Keep the parts of the old mapping outside the new one.
            if old.start < m.start {
                let mut left = old;
                left.end = m.start;
                live.insert(left.start, left);
            }
            if old.end > m.end {
                let mut right = old;
                right.pgoff = old.pgoff.wrapping_add(m.end - old.start);
                right.start = m.end;
                live.insert(right.start, right);
            }
        }
        live.insert(m.start, m);
    }

    /// Ends every live mapping at `time` (exec replaces the address space).
    ///
    /// A chain of execs (a shell shim exec'ing a shell exec'ing the real
    /// program within milliseconds) can migrate between CPUs, and the
    /// stage reads one CPU's ring before the other's: a newer exec and its
    /// mappings may come first. An older exec read after a newer one ends
    /// only the mappings from before it, not the newer address space.
    pub fn clear_maps(&mut self, time: u64, round: u64) {
        if self.exec_time.is_some_and(|e| e > time) {
            let live = Arc::make_mut(&mut self.live);
            let older: Vec<u64> = live
                .values()
                .filter(|m| m.since < time)
                .map(|m| m.start)
                .collect();
            for start in older {
                if let Some(mut m) = live.remove(&start) {
                    m.until = time;
                    self.retired.push((m, round));
                }
            }
            return;
        }
        self.exec_time = Some(time);
        let mut old = std::mem::take(&mut self.live);
        // Mappings made after the exec, read before it (the exec's COMM
        // sits in another CPU's ring, read later in the round): they are
        // the new address space, not the old one.
        if old.values().any(|m| m.since > time) {
            let all = Arc::make_mut(&mut old);
            let newer: Vec<u64> = all
                .values()
                .filter(|m| m.since > time)
                .map(|m| m.start)
                .collect();
            let live = Arc::make_mut(&mut self.live);
            for start in newer {
                if let Some(m) = all.remove(&start) {
                    live.insert(start, m);
                }
            }
        }
        if !old.is_empty() {
            self.retired_spaces.push((old, time, round));
        }
    }

    /// Resolves `ip` at `time` to (cookie, offset).
    #[inline]
    pub fn resolve(&self, ip: u64, time: u64) -> Option<(Cookie, u64)> {
        match self.lookup(ip, time) {
            Ok(m) => Some((m.cookie, m.offset(ip))),
            Err(other) => other,
        }
    }

    /// [`Process::resolve`], telling apart its first answer: `Ok` is the
    /// live mapping that covers `ip` and was already there at `time`, and
    /// any other address of that mapping resolves through it at that time
    /// too (call-chain frames reuse it without a lookup); `Err` holds any
    /// other answer.
    #[inline]
    pub fn lookup(&self, ip: u64, time: u64) -> Result<&Map, Option<(Cookie, u64)>> {
        let m = covering(&self.live, ip);
        match m {
            Some(m) if m.since <= time => Ok(m),
            _ => Err(self.resolve_slow(ip, time, m)),
        }
    }

    #[cold]
    fn resolve_slow(&self, ip: u64, time: u64, live: Option<&Map>) -> Option<(Cookie, u64)> {
        self.map_slow(ip, time, live)
            .map(|m| (m.cookie, m.offset(ip)))
    }

    /// The mapping that covered `ip` at `time`, by the rules of
    /// [`Process::resolve`] (the DWARF unwinder needs the mapping itself:
    /// where its binary was loaded).
    #[inline]
    pub fn map_at(&self, ip: u64, time: u64) -> Option<&Map> {
        let m = covering(&self.live, ip);
        match m {
            Some(m) if m.since <= time => Some(m),
            _ => self.map_slow(ip, time, m),
        }
    }

    #[cold]
    fn map_slow<'a>(&'a self, ip: u64, time: u64, live: Option<&'a Map>) -> Option<&'a Map> {
        // A retired mapping that was live at `time`.
        if let Some((m, _)) = self
            .retired
            .iter()
            .filter(|(m, _)| m.start <= ip && ip < m.end && m.since <= time && time < m.until)
            .max_by_key(|(m, _)| m.since)
        {
            return Some(m);
        }
        // A whole address space that ended (exec) after `time`.
        let mut best: Option<&Map> = None;
        for (maps, until, _) in &self.retired_spaces {
            if let Some(m) = covering(maps, ip) {
                if m.since <= time
                    && time < m.until.min(*until)
                    && best.is_none_or(|b| m.since >= b.since)
                {
                    best = Some(m);
                }
            }
        }
        if best.is_some() {
            return best;
        }
        // The live mapping appeared after the sample's time (clock skew
        // between CPUs, or a record order we could not see): still the best answer.
        live
    }

    /// Live mappings, by address.
    pub fn maps(&self) -> impl ExactSizeIterator<Item = &Map> {
        self.live.values()
    }

    /// Drops retired mappings that ended before round `keep_from`.
    pub fn prune(&mut self, keep_from: u64) {
        self.retired.retain(|(_, r)| *r >= keep_from);
        self.retired_spaces.retain(|(_, _, r)| *r >= keep_from);
    }
}

/// All processes and thread names.
#[derive(Debug, Default)]
pub struct ProcessTable {
    procs: IntMap<u32, Process>,
    /// tid -> (pid, comm), for threads whose name is known.
    threads: IntMap<u32, (u32, String)>,
    /// tids whose thread exited, with the round.
    exited_threads: IntMap<u32, u64>,
}

impl ProcessTable {
    /// The process `pid`, if known.
    pub fn get(&self, pid: u32) -> Option<&Process> {
        self.procs.get(&pid)
    }

    /// The process `pid`, created empty if unknown.
    pub fn entry(&mut self, pid: u32) -> &mut Process {
        self.procs.entry(pid).or_default()
    }

    /// Inserts (or replaces) a process.
    pub fn insert(&mut self, pid: u32, p: Process) {
        self.procs.insert(pid, p);
    }

    /// Number of processes held.
    pub fn len(&self) -> usize {
        self.procs.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.procs.is_empty()
    }

    /// Number of thread names held.
    pub fn thread_count(&self) -> usize {
        self.threads.len()
    }

    /// Resolves a user-space ip.
    #[inline]
    pub fn resolve(&self, pid: u32, ip: u64, time: u64) -> Result<(Cookie, u64), Unresolved> {
        let Some(p) = self.procs.get(&pid) else {
            return Err(Unresolved::NoTask);
        };
        if let Some(r) = p.resolve(ip, time) {
            return Ok(r);
        }
        self.inherited(p, ip, time).ok_or(Unresolved::NoMapping)
    }

    /// A forked child's address space is its parent's as of the fork until
    /// it execs; but the parent's MMAP2 records from before the fork may
    /// be read after the child's FORK (they sit in another CPU's ring), so
    /// the child's copy lacks them. Its samples there resolve through the
    /// parent at the fork time (up to [`FORK_GENERATIONS`] ancestors).
    /// Measured: the unattributed samples of a system-wide session with a
    /// cargo build, a fork loop and pyenv's shell shims were all of this
    /// kind (bash subshells in their parent's libraries).
    #[cold]
    fn inherited(&self, p: &Process, ip: u64, time: u64) -> Option<(Cookie, u64)> {
        let (mut cur, mut t) = (p, time);
        for _ in 0..FORK_GENERATIONS {
            let (ppid, forked) = cur.forked_from?;
            if cur.exec_time.is_some_and(|e| e <= t) || forked > t {
                return None;
            }
            let parent = self.procs.get(&ppid)?;
            if let Some(r) = parent.resolve(ip, forked) {
                return Some(r);
            }
            (cur, t) = (parent, forked);
        }
        None
    }

    /// Records a thread's name.
    pub fn set_comm(&mut self, pid: u32, tid: u32, comm: &str) {
        if pid == tid {
            self.entry(pid).comm = comm.to_string();
        }
        self.threads.insert(tid, (pid, comm.to_string()));
    }

    /// FORK: a new process (copying the parent's mappings and name) or a new thread.
    pub fn fork(&mut self, pid: u32, ppid: u32, tid: u32) {
        self.fork_at(pid, ppid, tid, u64::MAX, 0);
    }

    /// [`ProcessTable::fork`] of a FORK record taken at `time` in round
    /// `round`. Rings are drained CPU by CPU, and a FORK emitted after its
    /// CPU was drained waits for the next round, so the child's exec and
    /// first MMAP2 (on the CPU it ran on) may be handled before its FORK:
    /// - the child exec'd after `time`: its post-exec mappings stay live,
    ///   the parent's become the child's retired mappings, ended at the
    ///   exec, so samples from between fork and exec still resolve;
    /// - the child mapped something after `time` without an exec: the
    ///   parent's mappings, with the child's newer ones laid over them;
    /// - otherwise (nothing known after `time`, or pid reuse): a copy of
    ///   the parent.
    pub fn fork_at(&mut self, pid: u32, ppid: u32, tid: u32, time: u64, round: u64) {
        if pid == tid && (pid != ppid || !self.procs.contains_key(&pid)) {
            let parent = self.procs.get(&ppid);
            let parent_comm = parent.map(|p| p.comm.clone()).unwrap_or_default();
            let parent_live = parent.map(|p| p.live.clone()).unwrap_or_default();
            let known = self.procs.get(&pid);
            let exec_after = known
                .and_then(|p| p.exec_time)
                .filter(|&t| t >= time && time != u64::MAX);
            let newer: Vec<Map> = known
                .map(|p| {
                    p.live
                        .values()
                        .filter(|m| m.since >= time && m.since != 0)
                        .copied()
                        .collect()
                })
                .unwrap_or_default();
            if let Some(exec) = exec_after {
                let child = self.procs.entry(pid).or_default();
                if !parent_live.is_empty() {
                    child.retired_spaces.push((parent_live, exec, round));
                }
            } else if !newer.is_empty() {
                let child = self.procs.entry(pid).or_default();
                child.live = parent_live;
                for m in newer {
                    child.map(m, round);
                }
                if child.comm.is_empty() {
                    child.comm = parent_comm;
                }
            } else {
                self.procs.insert(
                    pid,
                    Process {
                        comm: parent_comm,
                        live: parent_live,
                        ..Process::default()
                    },
                );
            }
            if pid != ppid && time != u64::MAX {
                if let Some(child) = self.procs.get_mut(&pid) {
                    child.forked_from = Some((ppid, time));
                }
            }
        }
        // A new thread has no name of its own until a COMM record gives it
        // one: `comm()` falls back to its process's current name, so a
        // thread whose FORK is seen before its process's exec COMM (they
        // sit in different CPUs' rings) still gets the name after exec.
        // An entry left by an earlier task with the same tid goes.
        if self.threads.get(&tid).is_some_and(|(p, _)| *p != pid) {
            self.threads.remove(&tid);
        }
        self.exited_threads.remove(&tid);
    }

    /// EXIT of a thread, or of the process when `tid == pid`. The entry is
    /// kept until [`ProcessTable::end_round`] of the next round.
    pub fn exit(&mut self, pid: u32, tid: u32, round: u64) {
        if pid == tid {
            if let Some(p) = self.procs.get_mut(&pid) {
                p.exited_round = Some(round);
            }
        }
        self.exited_threads.insert(tid, round);
    }

    /// Forgets processes and threads whose exit was seen before `round`
    /// (every CPU has been drained past their exit since), and retired
    /// mappings older than that. Returns the tids it forgot (a process's
    /// pid among them), so callers can drop what they keep per task.
    pub fn end_round(&mut self, round: u64) -> Vec<u32> {
        let mut forgotten = Vec::new();
        self.procs.retain(|pid, p| {
            let keep = p.exited_round.is_none_or(|r| r + 1 > round);
            if !keep {
                forgotten.push(*pid);
            }
            keep
        });
        let threads = &mut self.threads;
        self.exited_threads.retain(|tid, r| {
            if *r < round {
                threads.remove(tid);
                forgotten.push(*tid);
                false
            } else {
                true
            }
        });
        for p in self.procs.values_mut() {
            p.prune(round.saturating_sub(1));
        }
        forgotten
    }

    /// The name a process has now (its main thread's), if known.
    pub fn process_comm(&self, pid: u32) -> Option<&str> {
        self.procs
            .get(&pid)
            .map(|p| p.comm.as_str())
            .filter(|c| !c.is_empty())
    }

    /// The name of thread `tid` when it has one of its own (from a COMM
    /// record or `/proc`); threads without one carry their process's name.
    pub fn thread_comm(&self, pid: u32, tid: u32) -> Option<&str> {
        self.threads
            .get(&tid)
            .filter(|(p, _)| *p == pid)
            .map(|(_, c)| c.as_str())
    }

    /// Adds mappings read from `/proc/PID/maps` that no live mapping of
    /// the process overlaps (recovery after lost MMAP2 records). Returns
    /// how many were added.
    pub fn add_missing_maps(
        &mut self,
        pid: u32,
        maps: impl IntoIterator<Item = Map>,
        round: u64,
    ) -> usize {
        let p = self.entry(pid);
        let mut n = 0;
        for m in maps {
            if first_overlap(&p.live, m.start, m.end).is_some() {
                continue;
            }
            p.map(m, round);
            n += 1;
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(start: u64, end: u64, cookie: Cookie, since: u64) -> Map {
        Map {
            start,
            end,
            pgoff: 0x1000,
            cookie,
            kind: MapKind::File,
            since,
            until: u64::MAX,
        }
    }

    #[test]
    fn mappings_in_any_order_split_what_they_cover_and_leave_the_rest() {
        let mut p = Process::default();
        // Top-down, as the kernel usually places them, then one over the
        // middle of three of them and one that starts inside a fourth.
        for i in (0..1000u64).rev() {
            p.map(m(0x10000 + i * 0x2000, 0x11000 + i * 0x2000, i, 0), 0);
        }
        assert_eq!(p.maps().len(), 1000);
        p.map(m(0x10800, 0x14800, 5000, 10), 1);
        p.map(m(0x30800, 0x31000, 6000, 10), 1);
        let ends: Vec<(u64, u64, u64)> = p
            .maps()
            .take(5)
            .map(|m| (m.start, m.end, m.cookie))
            .collect();
        assert_eq!(
            ends,
            [
                (0x10000, 0x10800, 0),
                (0x10800, 0x14800, 5000),
                (0x14800, 0x15000, 2),
                (0x16000, 0x17000, 3),
                (0x18000, 0x19000, 4),
            ]
        );
        // The right part keeps its file offset.
        assert_eq!(p.resolve(0x14900, 11), Some((2, 0x1900)));
        assert_eq!(p.resolve(0x30900, 11), Some((6000, 0x1100)));
        assert_eq!(p.resolve(0x30100, 11), Some((16, 0x1100)));
        // Before time 10 the old mappings answer; gaps answer nothing.
        assert_eq!(p.resolve(0x12100, 9), Some((1, 0x1100)));
        assert_eq!(p.resolve(0x15800, 11), None);
        assert_eq!(p.resolve(0x10000 + 999 * 0x2000, 11), Some((999, 0x1000)));
        assert_eq!(p.maps().len(), 1001);
    }

    #[test]
    fn resolves_file_offsets_and_replacements_by_time() {
        let mut p = Process::default();
        p.map(m(0x1000, 0x3000, 7, 0), 0);
        assert_eq!(p.resolve(0x1800, 5), Some((7, 0x1800)));
        assert_eq!(p.resolve(0x3000, 5), None);
        // A new mapping over the second half at time 10.
        p.map(m(0x2000, 0x4000, 9, 10), 1);
        assert_eq!(p.resolve(0x2800, 11), Some((9, 0x1800)));
        // A sample from before time 10 still resolves to the old mapping.
        assert_eq!(p.resolve(0x2800, 9), Some((7, 0x2800)));
        // The left part of the old mapping survives.
        assert_eq!(p.resolve(0x1800, 11), Some((7, 0x1800)));
        p.clear_maps(20, 2);
        assert_eq!(p.resolve(0x2800, 21), None);
        assert_eq!(p.resolve(0x2800, 15), Some((9, 0x1800)));
        p.prune(3);
        assert_eq!(p.resolve(0x2800, 15), None);
    }

    #[test]
    fn a_late_fork_keeps_what_was_learned_after_it() {
        let mut t = ProcessTable::default();
        t.entry(5).map(m(0x1000, 0x2000, 1, 0), 0);
        // The child's exec mapping (time 20) was handled before its FORK (time 10).
        t.entry(6).map(m(0x8000, 0x9000, 2, 20), 0);
        t.fork_at(6, 5, 6, 10, 0);
        assert_eq!(t.resolve(6, 0x8100, 21), Ok((2, 0x1100)));
        // A FORK after everything known of the pid (pid reuse): replaced.
        t.fork_at(6, 5, 6, 30, 0);
        assert_eq!(t.resolve(6, 0x8100, 31), Err(Unresolved::NoMapping));
        assert_eq!(t.resolve(6, 0x1100, 31), Ok((1, 0x1100)));
    }

    /// JIT code regions are re-announced (MMAP2 at each `mprotect` to
    /// executable), each time with the vma's extent then; two of them can
    /// be read out of order (other CPU's ring). The older one must not end
    /// the newer one, nor hide its parts outside the older's extent.
    #[test]
    fn an_older_mapping_read_after_a_newer_overlapping_one_keeps_the_newer() {
        let mut p = Process::default();
        // Newer (time 20), larger, read first.
        p.map(m(0x1000, 0x5000, 7, 20), 0);
        // Older (time 10), smaller, read after it.
        p.map(m(0x1000, 0x3000, 8, 10), 0);
        // After both: the newer one everywhere it covers.
        assert_eq!(p.resolve(0x4000, 30).map(|r| r.0), Some(7));
        assert_eq!(p.resolve(0x2000, 30).map(|r| r.0), Some(7));
        // Between them: the older one where it was.
        assert_eq!(p.resolve(0x2000, 15).map(|r| r.0), Some(8));
        // A newer, smaller one inside an older, larger one read late.
        let mut q = Process::default();
        q.map(m(0x2000, 0x3000, 7, 20), 0);
        q.map(m(0x1000, 0x5000, 8, 10), 0);
        assert_eq!(q.resolve(0x2800, 30).map(|r| r.0), Some(7));
        assert_eq!(q.resolve(0x4000, 30).map(|r| r.0), Some(8));
        assert_eq!(q.resolve(0x1800, 30).map(|r| r.0), Some(8));
        assert_eq!(q.resolve(0x2800, 15).map(|r| r.0), Some(8));
        // In order it was always so.
        let mut r = Process::default();
        r.map(m(0x1000, 0x3000, 8, 10), 0);
        r.map(m(0x1000, 0x5000, 7, 20), 0);
        assert_eq!(r.resolve(0x4000, 30).map(|r| r.0), Some(7));
        assert_eq!(r.resolve(0x2000, 15).map(|r| r.0), Some(8));
    }

    /// A task that execs on one CPU and maps its binaries (or JIT code)
    /// on another: the mappings can be read before the exec's COMM. They
    /// are the new program's, and stay live.
    #[test]
    fn mappings_read_before_their_exec_stay_live() {
        let mut p = Process::default();
        p.map(m(0x1000, 0x2000, 1, 5), 0); // the old program
        p.map(m(0x5000, 0x6000, 2, 20), 0); // the new one's, read first
        p.clear_maps(10, 0); // the exec, read late
        assert_eq!(p.resolve(0x5800, 30).map(|r| r.0), Some(2));
        assert_eq!(
            p.resolve(0x1800, 7).map(|r| r.0),
            Some(1),
            "before the exec"
        );
        assert_eq!(p.resolve(0x1800, 30), None, "the old program is gone");
        assert_eq!(p.maps().count(), 1);
    }

    #[test]
    fn an_older_exec_read_after_a_newer_one_keeps_both_address_spaces() {
        let mut p = Process::default();
        // The newer exec (time 40) and its library, read first...
        p.clear_maps(40, 0);
        p.map(m(0x1000, 0x2000, 1, 41), 0);
        // ...then the older exec (time 10) and its library, from the
        // other CPU's ring.
        p.clear_maps(10, 0);
        p.map(m(0x5000, 0x6000, 2, 11), 0);
        assert_eq!(p.resolve(0x1100, 45), Some((1, 0x1100)));
        assert_eq!(p.resolve(0x5100, 12), Some((2, 0x1100)));
        assert_eq!(p.resolve(0x5100, 45), None);
        assert_eq!(p.maps().count(), 1);
    }

    #[test]
    fn a_childs_sample_resolves_through_the_parent_mapping_read_after_its_fork() {
        let mut t = ProcessTable::default();
        t.entry(5).map(m(0x1000, 0x2000, 1, 0), 0);
        // The FORK (time 10) is read before the parent's library mapping
        // of time 3, which sat in another CPU's ring.
        t.fork_at(6, 5, 6, 10, 0);
        t.entry(5).map(m(0x4000, 0x5000, 2, 3), 0);
        assert_eq!(t.resolve(6, 0x4100, 12), Ok((2, 0x1100)));
        // A grandchild forked from the child at 11 sees it too.
        t.fork_at(7, 6, 7, 11, 0);
        assert_eq!(t.resolve(7, 0x4100, 12), Ok((2, 0x1100)));
        // After the child's exec, the parent's mappings are not its own.
        t.entry(6).clear_maps(20, 0);
        assert_eq!(t.resolve(6, 0x4100, 21), Err(Unresolved::NoMapping));
        // Nor before the fork, nor for an address the parent lacks.
        assert_eq!(t.resolve(7, 0x4100, 9), Err(Unresolved::NoMapping));
        assert_eq!(t.resolve(6, 0x7100, 12), Err(Unresolved::NoMapping));
    }

    #[test]
    fn a_late_fork_after_the_childs_exec_keeps_the_parents_code_until_the_exec() {
        let mut t = ProcessTable::default();
        t.entry(5).map(m(0x1000, 0x2000, 1, 0), 0);
        t.set_comm(5, 5, "sh");
        // The child's exec (time 20) and its new mapping (time 21) were
        // handled before its FORK (time 10), which came a round later.
        t.entry(6).clear_maps(20, 0);
        t.set_comm(6, 6, "true");
        t.entry(6).map(m(0x8000, 0x9000, 2, 21), 0);
        t.fork_at(6, 5, 6, 10, 1);
        // Between fork and exec the child ran the parent's code.
        assert_eq!(t.resolve(6, 0x1100, 15), Ok((1, 0x1100)));
        // After the exec, only its own.
        assert_eq!(t.resolve(6, 0x1100, 25), Err(Unresolved::NoMapping));
        assert_eq!(t.resolve(6, 0x8100, 25), Ok((2, 0x1100)));
        assert_eq!(t.process_comm(6), Some("true"));
    }

    #[test]
    fn a_late_fork_lays_the_childs_newer_mappings_over_the_parents() {
        let mut t = ProcessTable::default();
        t.entry(5).map(m(0x1000, 0x3000, 1, 0), 0);
        // The child mapped over the parent's second half (time 20) without
        // an exec; its FORK (time 10) is handled after.
        t.entry(6).map(m(0x2000, 0x3000, 2, 20), 0);
        t.fork_at(6, 5, 6, 10, 1);
        assert_eq!(t.resolve(6, 0x1100, 25), Ok((1, 0x1100)));
        assert_eq!(t.resolve(6, 0x2100, 25), Ok((2, 0x1100)));
        assert_eq!(t.resolve(6, 0x2100, 15), Ok((1, 0x2100)));
    }

    #[test]
    fn forks_share_the_parents_mappings_until_they_map_something() {
        let mut t = ProcessTable::default();
        for k in 0..10_000u64 {
            t.entry(1)
                .map(m(0x10_0000 + k * 0x2000, 0x10_1000 + k * 0x2000, k, 0), 0);
        }
        for child in 2..5_002 {
            t.fork_at(child, 1, child, 10, 0);
        }
        // One table for all 5,001 processes, not 5,001 copies.
        assert_eq!(Arc::strong_count(&t.get(1).unwrap().live), 5_001);
        assert_eq!(
            t.resolve(4_000, 0x10_0000 + 77 * 0x2000, 11),
            Ok((77, 0x1000))
        );
        // A child that maps gets its own copy; the others keep sharing.
        t.entry(2).map(m(0x9000_0000, 0x9000_1000, 99, 20), 0);
        assert_eq!(Arc::strong_count(&t.get(1).unwrap().live), 5_000);
        assert_eq!(t.resolve(2, 0x9000_0100, 21), Ok((99, 0x1100)));
        assert_eq!(t.resolve(3, 0x9000_0100, 21), Err(Unresolved::NoMapping));
        // An exec retires the shared table without copying it, and samples
        // from before the exec still resolve.
        t.entry(3).clear_maps(30, 0);
        assert_eq!(Arc::strong_count(&t.get(1).unwrap().live), 5_000);
        assert_eq!(t.resolve(3, 0x10_0000 + 5 * 0x2000, 25), Ok((5, 0x1000)));
        assert_eq!(
            t.resolve(3, 0x10_0000 + 5 * 0x2000, 35),
            Err(Unresolved::NoMapping)
        );
    }

    #[test]
    fn exited_processes_survive_one_more_round() {
        let mut t = ProcessTable::default();
        t.entry(5).map(m(0x1000, 0x2000, 1, 0), 0);
        t.set_comm(5, 5, "a");
        t.fork(6, 5, 6);
        assert_eq!(t.resolve(6, 0x1100, 1), Ok((1, 0x1100)));
        assert_eq!(t.process_comm(6), Some("a"));
        // A thread of 6 seen (FORK) before 6's exec COMM is named after the exec.
        t.fork(6, 6, 60);
        t.set_comm(6, 6, "after-exec");
        assert_eq!(
            (t.thread_comm(6, 60), t.process_comm(6)),
            (None, Some("after-exec"))
        );
        t.set_comm(6, 60, "renamed");
        assert_eq!(t.thread_comm(6, 60), Some("renamed"));
        t.exit(6, 6, 3);
        t.end_round(3);
        assert!(
            t.get(6).is_some(),
            "kept through the round its exit was seen"
        );
        t.end_round(4);
        assert!(t.get(6).is_none());
        assert_eq!(t.resolve(6, 0x1100, 1), Err(Unresolved::NoTask));
        assert_eq!(t.resolve(5, 0x9000, 1), Err(Unresolved::NoMapping));
    }
}
