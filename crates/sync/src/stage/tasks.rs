//! The sync stage's tasks: processes and threads as the records and
//! `/proc` describe them, and their names in the log. Seeding from `/proc`,
//! COMM/FORK/EXIT records, the `Comm` markers written once per task (with
//! a container task's own pid/tid), and `/proc` reads (through the
//! stage's probe) for processes the records have not described. The
//! tables of tasks stay fields of `SyncStage` itself.

use super::SyncStage;
use crate::probe::Probed;
use profkit_eventlog::Event;
use profkit_perf::{Comm, Task};

impl SyncStage {
    /// Seeds the tables from `/proc` and `/sys`: running processes with
    /// their executable mappings and thread names, the kernel and modules.
    pub fn seed_from_proc(&mut self) {
        self.seed_kernel();
        if self.res.cgroups.on() {
            self.seed_cgroups(None);
        }
        for p in self.res.probe.processes() {
            self.add_proc_process(p);
        }
    }

    /// Like [`SyncStage::seed_from_proc`] for a per-process session: the
    /// kernel and modules, and only these processes (others, met later
    /// through FORK records or samples, are read when first needed).
    pub fn seed_pids(&mut self, pids: &[u32]) {
        self.seed_kernel();
        if self.res.cgroups.on() {
            self.seed_cgroups(None);
        }
        for &pid in pids {
            if let Probed::Found(p) = self.res.probe.process(pid) {
                self.add_proc_process(p);
            }
        }
    }

    /// Writes, once per task, the names a report needs: the process's
    /// name, and a thread's own name when it has one (a thread without one
    /// is shown with its process's name, whatever that is at the end: a
    /// thread seen before its process's exec gets the post-exec name).
    pub(super) fn announce(&mut self, pid: u32, tid: u32) {
        if self.announced.insert(pid, ()).is_none() {
            if let Some(c) = self.procs.process_comm(pid) {
                let comm = c.to_string();
                let ns = self.ns_of(pid, pid);
                self.marker(Event::Comm {
                    pid,
                    tid: pid,
                    comm,
                    exec: false,
                    ns,
                });
            }
        }
        if tid != pid && self.announced.insert(tid, ()).is_none() {
            // A thread with no name of its own is named only when it has
            // ids of its own to write (another pid namespace); it has its
            // process's name then (threads do not outlive an exec).
            let ns = self.ns_of(pid, tid);
            let comm = match self.procs.thread_comm(pid, tid) {
                Some(c) => Some(c.to_string()),
                None if ns.is_some() => self.procs.process_comm(pid).map(str::to_string),
                None => None,
            };
            if let Some(comm) = comm {
                self.marker(Event::Comm {
                    pid,
                    tid,
                    comm,
                    exec: false,
                    ns,
                });
            }
        }
    }

    /// A task's ids in its own pid namespace when that is not the
    /// recorder's, read from `/proc` while the task lives (live sessions
    /// only: through the probe).
    #[cold]
    pub(super) fn ns_of(&mut self, pid: u32, tid: u32) -> Option<profkit_eventlog::NsTask> {
        self.res.probe.ns_task(pid, tid)
    }

    /// Once per process and round, for a sample nothing resolves: reads
    /// `/proc/PID/maps` and adds the mappings the table lacks (their MMAP2
    /// records were lost in a full ring, or came before the session).
    /// Whether anything was read (once per process per round): a sample
    /// that did not resolve is worth a second try only then.
    pub(super) fn refresh_from_proc(&mut self, pid: u32) -> bool {
        if self.refreshed.insert(pid, ()).is_some() {
            return false;
        }
        let Probed::Found(p) = self.res.probe.process(pid) else {
            return false;
        };
        let maps = self.proc_maps(&p);
        if self.procs.get(pid).is_none() {
            self.procs.set_comm(pid, pid, &p.comm);
        }
        self.procs.add_missing_maps(pid, maps, self.round);
        self.no_proc.remove(&pid);
        true
    }

    pub(super) fn ensure_process(&mut self, pid: u32) -> bool {
        if self.procs.get(pid).is_some() {
            return true;
        }
        if self.no_proc.contains_key(&pid) {
            return false;
        }
        match self.res.probe.process(pid) {
            Probed::Found(p) => {
                self.add_proc_process(p);
                true
            }
            Probed::Absent => {
                self.no_proc.insert(pid, ());
                false
            }
            Probed::Unknown => false,
        }
    }

    /// A COMM record: an exec ends the old address space; the newest name
    /// (by time, whatever the order rings are read in) is written.
    pub(super) fn on_comm(&mut self, c: &Comm<'_>) {
        if c.exec {
            self.jit.exec(c.pid, c.id.time);
            self.off.forget_stacks();
            self.ensure_process(c.pid);
            self.procs.entry(c.pid).clear_maps(c.id.time, self.round);
        }
        // Names: the newest wins, whatever the order rings are
        // read in (the maps above have their own time rules).
        let newest = self.comm_time.entry(c.tid).or_insert(0);
        if c.id.time < *newest {
            return;
        }
        *newest = c.id.time;
        let comm = String::from_utf8_lossy(c.comm).into_owned();
        self.procs.set_comm(c.pid, c.tid, &comm);
        self.no_proc.remove(&c.pid);
        self.announced.insert(c.tid, ());
        let ns = self.ns_of(c.pid, c.tid);
        self.marker(Event::Comm {
            pid: c.pid,
            tid: c.tid,
            comm,
            exec: c.exec,
            ns,
        });
    }

    /// A FORK record: a new process or thread.
    pub(super) fn on_fork(&mut self, t: &Task) {
        self.offcpu_fork(t.tid, t.time);
        if t.pid == t.tid {
            self.jit.pid_reused(t.pid);
        }
        if t.pid == t.ppid {
            self.ensure_process(t.pid);
        } else {
            self.ensure_process(t.ppid);
        }
        // A COMM newer than this FORK was read first (the child renamed
        // itself and ran on a CPU whose ring was drained earlier): the
        // name it gave stays; the fork must not put the parent's back.
        let renamed = match self.comm_time.get(&t.tid) {
            Some(&named) if named > t.id.time && t.id.time != u64::MAX => {
                self.procs.thread_comm(t.pid, t.tid).map(str::to_string)
            }
            _ => None,
        };
        self.procs
            .fork_at(t.pid, t.ppid, t.tid, t.id.time, self.round);
        self.no_proc.remove(&t.pid);
        match renamed {
            Some(comm) => self.procs.set_comm(t.pid, t.tid, &comm),
            None => {
                self.announced.remove(&t.tid);
            }
        }
    }

    /// An EXIT record.
    pub(super) fn on_exit(&mut self, t: &Task) {
        self.offcpu_exit(t.tid, t.time);
        if t.pid == t.tid {
            self.res.cgroups.exit(t.pid);
            self.res.probe.exited(t.pid);
            self.jit.exited(t.pid, self.round);
        }
        self.procs.exit(t.pid, t.tid, self.round)
    }
}
