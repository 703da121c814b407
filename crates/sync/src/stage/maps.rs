//! The sync stage's mapping records: which cookie and kind of mapping a
//! `/proc/PID/maps` line or an MMAP/MMAP2 record gets (the derivation
//! itself is the format's, `profkit_eventlog::cookie`), and the kernel
//! maps from perf's pid −1 mappings.

use super::SyncStage;
use crate::probe::{MappedFile, Probed};
use crate::process::{Map, MapKind, Process};
use crate::procfs::{dev_number, KernelModule, ProcProcess};
use profkit_eventlog::{
    anon_entry, claimed_file_entry, file_entry, is_anonymous_code, module_name, vdso_entry, Cookie,
    Event,
};
use profkit_perf::{FileId, Mmap};

impl SyncStage {
    /// The table's form of `/proc/PID/maps` lines: cookies assigned,
    /// present since before anything this session saw.
    pub(super) fn proc_maps(&mut self, p: &ProcProcess) -> Vec<Map> {
        p.maps
            .iter()
            .map(|m| {
                let (cookie, kind) = if m.path == "[vdso]" {
                    (self.vdso(), MapKind::File)
                } else if is_anonymous_code(&m.path) || m.inode == 0 {
                    (self.anon(p.pid), MapKind::Anon)
                } else {
                    (
                        self.file_cookie(
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

    /// The cookie of a file-backed mapping of `path`, known by build-id
    /// (from the record) or by device/inode/generation (then its build-id
    /// is read); `mapped_by` is (pid, start, end) of a mapping of it.
    ///
    /// When the probe identifies files (a live session) a build-id is a
    /// claim: the file behind the mapping is identified and the cookie is
    /// the plain one only for the first file identified with that build-id
    /// ([`SyncStage::claimed_cookie`]).
    pub(super) fn file_cookie(
        &mut self,
        path: &str,
        build_id: Option<&[u8]>,
        dev: u64,
        ino: u64,
        gen: u64,
        mapped_by: Option<(u32, u64, u64)>,
    ) -> Cookie {
        let identified = (dev, ino, gen) != (0, 0, 0);
        if let Some(b) = build_id {
            if !b.is_empty() {
                let kernel_id = identified.then_some((dev, ino));
                if let Some(c) = self.claimed_cookie(path, b, kernel_id, gen, mapped_by) {
                    return c;
                }
            }
            let e = file_entry(path, Some(b.to_vec()), dev, ino, gen);
            return self.define_file(e, path, b, None, mapped_by);
        }
        // Without any identity (an MMAP rather than MMAP2 record), files
        // cannot share the (dev, inode) cache: each path is looked up.
        if identified {
            if let Some(&c) = self.file_cookies.get(&(dev, ino, gen)) {
                return c;
            }
        }
        // Same cookie whichever way the binary was first seen: a build-id
        // known from elsewhere, else the file's own when the kernel did not
        // give one.
        let bid = match self.build_ids.get(path) {
            Some(b) => Some(b.clone()),
            None => self.probe.build_id(&MappedFile {
                path,
                identity: identified.then_some((dev, ino)),
                mapped_by,
            }),
        };
        let claimed = match bid.as_deref() {
            Some(b) if !b.is_empty() => {
                self.claimed_cookie(path, b, identified.then_some((dev, ino)), gen, mapped_by)
            }
            _ => None,
        };
        let c = match claimed {
            Some(c) => c,
            None => {
                let e = file_entry(path, bid.clone(), dev, ino, gen);
                let c = e.cookie;
                if let std::collections::hash_map::Entry::Vacant(v) = self.known.entry(c) {
                    v.insert(e);
                    let identity = identified.then_some((dev, ino));
                    self.check_reach(path, bid.as_deref(), identity, mapped_by, c);
                }
                c
            }
        };
        if identified {
            self.file_cookies.insert((dev, ino, gen), c);
        }
        c
    }

    /// The cookie of a mapping whose file claims build-id `b`: the file is
    /// identified (through the mapping, time-boxed; `kernel_id` is the
    /// device/inode the kernel gave, if any); the first file identified
    /// with `b` holds `b`'s plain cookie, any other file gets its own, and
    /// a file not identified an unverified one. Each is defined with its
    /// own entry (and so its own unwind tables and kept copy). None when
    /// the probe does not identify files: the build-id is taken at its
    /// word.
    fn claimed_cookie(
        &mut self,
        path: &str,
        b: &[u8],
        kernel_id: Option<(u64, u64)>,
        gen: u64,
        mapped_by: Option<(u32, u64, u64)>,
    ) -> Option<Cookie> {
        let binary = MappedFile {
            path,
            identity: kernel_id,
            mapped_by,
        };
        let file = match self.probe.identify(&binary, b) {
            Probed::Found(i) => Some(i),
            Probed::Absent => None,
            Probed::Unknown => return None,
        };
        let holder = match file {
            Some(i) => *self.claims.entry(b.to_vec()).or_insert(i) == i,
            None => false,
        };
        let e = claimed_file_entry(path, b.to_vec(), file, holder, gen);
        let identity = file.map(|i| (i.dev, i.inode)).or(kernel_id);
        Some(self.define_file(e, path, b, identity, mapped_by))
    }

    /// Keeps `e`, the entry of a file with build-id `b` met at `path`, if
    /// its cookie is new (and checks whether the host reaches it); else,
    /// until its definition is written, prefers a path that still exists
    /// (identical copies or the same file by another path: a link, a
    /// rename).
    /// Returns its cookie.
    fn define_file(
        &mut self,
        e: profkit_eventlog::CookieEntry,
        path: &str,
        b: &[u8],
        identity: Option<(u64, u64)>,
        mapped_by: Option<(u32, u64, u64)>,
    ) -> Cookie {
        let c = e.cookie;
        match self.known.get_mut(&c) {
            Some(old)
                if old.path != path
                    && !self.emitted.contains(c)
                    && self.probe.exists(&old.path) == Some(false)
                    && self.probe.exists(path) == Some(true) =>
            {
                old.path = path.to_string();
            }
            Some(_) => {}
            None => {
                self.known.insert(c, e);
                self.check_reach(path, Some(b), identity, mapped_by, c);
            }
        }
        c
    }

    /// A binary met for the first time: if its recorded path does not
    /// lead the host to it (another mount namespace), the probe queues
    /// it, opened through the process's `map_files`, to be kept in the
    /// session under its cookie (`crate::reach`).
    fn check_reach(
        &mut self,
        path: &str,
        build_id: Option<&[u8]>,
        identity: Option<(u64, u64)>,
        mapped_by: Option<(u32, u64, u64)>,
        cookie: Cookie,
    ) {
        let file = MappedFile {
            path,
            identity,
            mapped_by,
        };
        self.probe.reach(&file, build_id, cookie);
    }

    pub(super) fn vdso(&mut self) -> Cookie {
        let e = vdso_entry();
        let c = e.cookie;
        self.known.entry(c).or_insert(e);
        c
    }

    pub(super) fn anon(&mut self, pid: u32) -> Cookie {
        let e = anon_entry(pid);
        let c = e.cookie;
        if let std::collections::hash_map::Entry::Vacant(v) = self.known.entry(c) {
            v.insert(e);
            // Who owns the process, while it is alive: its JIT map is
            // copied at stop only if that user owns the file.
            if let Some(uid) = self.probe.owner(pid) {
                self.anon_owners.insert(pid, uid);
            }
        }
        c
    }

    /// A kernel-side mapping: perf's `[kernel.kallsyms]_text` (its `pgoff`
    /// is the address of `_text`, which kernel offsets are taken from) or,
    /// with pid −1, a module. The kernel writes neither into a live ring
    /// (a live stage reads them from `/proc`); perf.data files carry them.
    pub(super) fn on_kernel_mmap(&mut self, m: &Mmap<'_>, path: &str) {
        let end = m.addr.saturating_add(m.len);
        let bid = self.build_ids.get(path).cloned();
        let e = if path.starts_with("[kernel.kallsyms]") {
            self.kernel.set_text(m.pgoff, end, bid)
        } else if m.pid == u32::MAX && !path.starts_with("[kernel") {
            let module = KernelModule {
                name: module_name(path),
                base: m.addr,
                size: m.len,
            };
            self.kernel.add_module(module, bid).1
        } else {
            return;
        };
        self.known.insert(e.cookie, e);
    }

    pub(super) fn on_mmap(&mut self, m: &Mmap<'_>) {
        if m.prot & libc::PROT_EXEC as u32 == 0 || m.len == 0 {
            return;
        }
        let path = String::from_utf8_lossy(m.filename).into_owned();
        if m.pid == u32::MAX
            || m.misc & profkit_perf::misc::CPUMODE_MASK == profkit_perf::misc::KERNEL
        {
            self.on_kernel_mmap(m, &path);
            return;
        }
        self.ensure_process(m.pid);
        let (cookie, kind) = if path == "[vdso]" {
            (self.vdso(), MapKind::File)
        } else if is_anonymous_code(&path) {
            (self.anon(m.pid), MapKind::Anon)
        } else {
            match m.file_id {
                Some(FileId::BuildId(b)) => (
                    self.file_cookie(
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
                    self.file_cookie(
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
                    self.file_cookie(
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
