//! The sync stage's resolving part ([`Resolving`]): what an address
//! resolves against besides the process table — the kernel maps, every
//! cookie the stage knows and which of them the current file has defined,
//! files' cookies (by device/inode, by build-id and its claims), the owners
//! of processes with anonymous code, samples' cgroups — and the
//! [`HostProbe`] through which the stage reads the machine. The cookie of
//! a file-backed mapping is decided here (the derivation itself is the
//! format's, `profkit_eventlog::cookie`).
//!
//! JIT dumps (a later issue) would resolve here: their code regions
//! become cookies like anonymous code's, the dump files read through the
//! probe.

use super::SyncStage;
use crate::cgroups::Cgroups;
use crate::cookies::CookieTable;
use crate::kernel::KernelMaps;
use crate::probe::{HostProbe, MappedFile, Probed};
use crate::process::IntMap;
use profkit_eventlog::{
    anon_entry, claimed_file_entry, file_entry, unknown_entry, vdso_entry, Cookie, CookieEntry,
};
use std::collections::HashMap;

/// See the module docs.
#[derive(Debug)]
pub(super) struct Resolving {
    /// The kernel's text and modules.
    pub(super) kernel: KernelMaps,
    /// Every cookie met, with its definition.
    pub(super) known: IntMap<Cookie, CookieEntry>,
    /// The cookies whose definitions the current file holds.
    pub(super) emitted: CookieTable,
    /// Files' cookies by (device, inode, generation).
    pub(super) file_cookies: IntMap<(u64, u64, u64), Cookie>,
    /// The owner (uid) of each process with anonymous code, read from
    /// `/proc/PID` when its first anonymous mapping was seen.
    pub(super) anon_owners: IntMap<u32, u32>,
    /// Per build-id: the file holding its plain cookie in this session
    /// (the first identified with it; see `profkit_eventlog::cookie`).
    pub(super) claims: HashMap<Vec<u8>, profkit_eventlog::FileIdentity>,
    /// Build-ids known by mapping path from outside the records.
    pub(super) build_ids: HashMap<String, Vec<u8>>,
    /// Samples' cgroups (off unless asked for).
    pub(super) cgroups: Cgroups,
    /// What the stage reads from the machine (nothing for imports).
    pub(super) probe: Box<dyn HostProbe>,
}

impl Resolving {
    pub(super) fn new(probe: Box<dyn HostProbe>, layout_cgroup: bool) -> Self {
        let mut known = IntMap::default();
        let unknown = unknown_entry();
        known.insert(unknown.cookie, unknown);
        Resolving {
            kernel: KernelMaps::default(),
            known,
            emitted: CookieTable::default(),
            file_cookies: IntMap::default(),
            anon_owners: IntMap::default(),
            claims: HashMap::new(),
            build_ids: HashMap::new(),
            cgroups: Cgroups {
                mode: if layout_cgroup {
                    profkit_perf::CgroupRecording::Sample
                } else {
                    profkit_perf::CgroupRecording::Off
                },
                ..Default::default()
            },
            probe,
        }
    }

    /// `cookie`'s definition if the current file does not hold it yet
    /// (it is counted as held from now on).
    #[inline]
    pub(super) fn undefined_entry(&mut self, cookie: Cookie) -> Option<CookieEntry> {
        if self.emitted.contains(cookie) {
            return None;
        }
        let e = self.known.get(&cookie).cloned()?;
        self.emitted.define(e.clone());
        Some(e)
    }

    /// The cookie of a file-backed mapping of `path`, known by build-id
    /// (from the record) or by device/inode/generation (then its build-id
    /// is read); `mapped_by` is (pid, start, end) of a mapping of it.
    ///
    /// When the probe identifies files (a live session) a build-id is a
    /// claim: the file behind the mapping is identified and the cookie is
    /// the plain one only for the first file identified with that build-id
    /// ([`Resolving::claimed_cookie`]).
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
        e: CookieEntry,
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
}

impl SyncStage {
    /// How samples' cgroups are recorded: [`CgroupRecording::Sample`]
    /// (the default when the layout has `PERF_SAMPLE_CGROUP`) takes each
    /// sample's id; `Proc` reads `/proc/PID/cgroup` once per process (older
    /// kernels; through the stage's [`HostProbe`]: none with
    /// [`crate::NullProbe`]); `Off` writes none. Set
    /// it before seeding: seeding walks the cgroup v2 hierarchy for the
    /// paths of the cgroups that exist already.
    ///
    /// [`CgroupRecording::Sample`]: profkit_perf::CgroupRecording::Sample
    pub fn set_cgroups(&mut self, mode: profkit_perf::CgroupRecording) {
        self.res.cgroups.mode = mode;
    }

    /// Seeds the cgroup id → path table from the cgroup v2 hierarchy
    /// mounted at `mount` (`None`: this system's, from
    /// `/proc/self/mountinfo`); the seeding functions do it for live
    /// sessions that record cgroups.
    pub fn seed_cgroups(&mut self, mount: Option<std::path::PathBuf>) {
        self.res.cgroups.seed(mount);
    }

    pub(super) fn seed_kernel(&mut self) {
        let res = &mut self.res;
        if let Some(kernel) = res.probe.kernel() {
            res.kernel = kernel;
            if let Some(k) = res.kernel.kernel.clone() {
                res.known.insert(k.cookie, k);
            }
        }
        for (_, e) in res.probe.new_modules(&mut res.kernel) {
            res.known.insert(e.cookie, e);
        }
    }

    /// Sets the kernel layout directly (tests, or a caller that read it).
    pub fn set_kernel(&mut self, kernel: KernelMaps) {
        if let Some(k) = &kernel.kernel {
            self.res.known.insert(k.cookie, k.clone());
        }
        self.res.kernel = kernel;
    }

    /// Makes `build_id` the build-id of the file mapped as `path` (as a
    /// mapping record names it: `/usr/lib/libc.so.6`, `[kernel.kallsyms]_text`,
    /// a module's `.ko` path), for mappings whose record does not carry
    /// one: perf.data's build-id table. Used before reading the file.
    pub fn add_build_id(&mut self, path: &str, build_id: Vec<u8>) {
        if !build_id.is_empty() {
            self.res.build_ids.insert(path.to_string(), build_id);
        }
    }

    /// Defines a cookie the stage may meet (tests: module cookies).
    pub fn add_cookie(&mut self, e: CookieEntry) {
        self.res.known.insert(e.cookie, e);
    }

    /// The uid that owned process `pid` when its first anonymous code
    /// mapping was seen (live sessions only).
    pub fn anon_owner(&self, pid: u32) -> Option<u32> {
        self.res.anon_owners.get(&pid).copied()
    }

    /// Every (pid, uid) of [`SyncStage::anon_owner`].
    pub fn anon_owners(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.res.anon_owners.iter().map(|(&p, &u)| (p, u))
    }

    /// Binaries the host cannot reach at their recorded paths, to keep
    /// in the session (a handle on the probe's queue; see `reach`).
    pub fn keep_queue(&self) -> crate::reach::KeepQueue {
        self.res.probe.keep_queue()
    }

    /// Build-ids of mapped binaries not read, by reason (see
    /// [`crate::RecorderStatus::build_ids_refused`]).
    pub fn build_id_refusals(&self) -> [u64; 4] {
        self.res.probe.build_id_refusals()
    }

    /// Mappings claiming a build-id whose file could not be identified
    /// (gone, refused or timed out): their cookie is the claim's
    /// `build-id-unverified` one, named only by their recorded path (see
    /// [`crate::RecorderStatus::files_unidentified`]).
    pub fn files_unidentified(&self) -> u64 {
        self.res.probe.files_unidentified()
    }
}
