//! The sync stage's mapping records: which cookie and kind of mapping a
//! `/proc/PID/maps` line or an MMAP/MMAP2 record gets (a file's cookie is
//! decided by the resolving part, `stage/resolving.rs`; the derivation
//! itself is the format's, `profkit_eventlog::cookie`), and the kernel
//! maps from perf's pid −1 mappings.

use super::SyncStage;
use crate::process::{Map, MapKind, Process};
use crate::procfs::{dev_number, KernelModule, ProcProcess};
use profkit_eventlog::{is_anonymous_code, module_name, Event};
use profkit_perf::{FileId, Mmap};

impl SyncStage {
    /// The table's form of `/proc/PID/maps` lines: cookies assigned,
    /// present since before anything this session saw.
    pub(super) fn proc_maps(&mut self, p: &ProcProcess) -> Vec<Map> {
        // Read now: an exec record older than this read (read later, from
        // another CPU's ring) is older than what `/proc` showed.
        let now = profkit_perf::monotonic_ns();
        for m in p
            .maps
            .iter()
            .filter(|m| crate::jit::is_jitdump_path(&m.path))
        {
            self.notice_jitdump(p.pid, &m.path, Some((m.dev, m.inode)), m.start, m.end, now);
        }
        p.maps
            .iter()
            .filter(|m| !crate::jit::is_jitdump_path(&m.path))
            .map(|m| {
                let (cookie, kind) = if m.path == "[vdso]" {
                    (self.res.vdso(), MapKind::File)
                } else if is_anonymous_code(&m.path) || m.inode == 0 {
                    (self.res.anon(p.pid), MapKind::Anon)
                } else {
                    (
                        self.res.file_cookie(
                            &m.path,
                            None,
                            m.dev,
                            m.inode,
                            0,
                            Some((p.pid, m.start, m.end)),
                        ),
                        MapKind::File,
                    )
                };
                Map {
                    start: m.start,
                    end: m.end,
                    pgoff: m.pgoff,
                    cookie,
                    kind,
                    since: 0,
                    until: u64::MAX,
                }
            })
            .collect()
    }

    pub(super) fn add_proc_process(&mut self, p: ProcProcess) {
        let mut proc_ = Process::default();
        proc_.comm = p.comm.clone();
        for m in self.proc_maps(&p) {
            proc_.map(m, self.round);
        }
        self.procs.insert(p.pid, proc_);
        self.procs.set_comm(p.pid, p.pid, &p.comm);
        for (tid, c) in &p.threads {
            self.procs.set_comm(p.pid, *tid, c);
        }
    }

    /// A kernel-side mapping: perf's `[kernel.kallsyms]_text` (its `pgoff`
    /// is the address of `_text`, which kernel offsets are taken from) or,
    /// with pid −1, a module. The kernel writes neither into a live ring
    /// (a live stage reads them from `/proc`); perf.data files carry them.
    pub(super) fn on_kernel_mmap(&mut self, m: &Mmap<'_>, path: &str) {
        let end = m.addr.saturating_add(m.len);
        let bid = self.res.build_ids.get(path).cloned();
        let e = if path.starts_with("[kernel.kallsyms]") {
            self.res.kernel.set_text(m.pgoff, end, bid)
        } else if m.pid == u32::MAX && !path.starts_with("[kernel") {
            let module = KernelModule {
                name: module_name(path),
                base: m.addr,
                size: m.len,
            };
            self.res.kernel.add_module(module, bid).1
        } else {
            return;
        };
        self.res.known.insert(e.cookie, e);
    }

    pub(super) fn on_mmap(&mut self, m: &Mmap<'_>) {
        if m.prot & libc::PROT_EXEC as u32 == 0 || m.len == 0 {
            return;
        }
        self.off.forget_stacks();
        let path = String::from_utf8_lossy(m.filename).into_owned();
        if m.pid == u32::MAX
            || m.misc & profkit_perf::misc::CPUMODE_MASK == profkit_perf::misc::KERNEL
        {
            self.on_kernel_mmap(m, &path);
            return;
        }
        self.ensure_process(m.pid);
        if crate::jit::is_jitdump_path(&path) {
            let identity = match m.file_id {
                Some(FileId::Inode { maj, min, ino, .. }) => Some((dev_number(maj, min), ino)),
                _ => None,
            };
            let end = m.addr.saturating_add(m.len);
            self.notice_jitdump(m.pid, &path, identity, m.addr, end, m.id.time);
            return;
        }
        let (cookie, kind) = if path == "[vdso]" {
            (self.res.vdso(), MapKind::File)
        } else if is_anonymous_code(&path) {
            (self.res.anon(m.pid), MapKind::Anon)
        } else {
            match m.file_id {
                Some(FileId::BuildId(b)) => (
                    self.res.file_cookie(
                        &path,
                        Some(b),
                        0,
                        0,
                        0,
                        Some((m.pid, m.addr, m.addr.saturating_add(m.len))),
                    ),
                    MapKind::File,
                ),
                Some(FileId::Inode {
                    maj,
                    min,
                    ino,
                    generation,
                }) => (
                    self.res.file_cookie(
                        &path,
                        None,
                        dev_number(maj, min),
                        ino,
                        generation,
                        Some((m.pid, m.addr, m.addr.saturating_add(m.len))),
                    ),
                    MapKind::File,
                ),
                None => (
                    self.res.file_cookie(
                        &path,
                        None,
                        0,
                        0,
                        0,
                        Some((m.pid, m.addr, m.addr.saturating_add(m.len))),
                    ),
                    MapKind::File,
                ),
            }
        };
        let map = Map {
            start: m.addr,
            end: m.addr.saturating_add(m.len),
            pgoff: m.pgoff,
            cookie,
            kind,
            since: m.id.time,
            until: u64::MAX,
        };
        self.procs.entry(m.pid).map(map, self.round);
        self.ensure_defined(cookie);
        self.marker(Event::ModuleLoad {
            cookie,
            start: map.start,
            end: map.end,
            pgoff: m.pgoff,
            pid: Some(m.pid),
        });
    }
}
