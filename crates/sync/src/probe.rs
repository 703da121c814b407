//! What the sync stage reads from the machine it runs on, behind one
//! trait, [`HostProbe`]: `/proc/PID` (maps, names, threads, owner, pid
//! namespace, cgroup), the kernel's text and modules (`/proc/kallsyms`,
//! `/proc/modules`, `/sys`), and mapped files (build-ids, identities,
//! whether the host reaches them at their recorded paths).
//!
//! [`ProcfsProbe`] is the live one: the `/proc` and `/sys` of
//! [`ProcPaths`], the time-boxed readers of `crate::binfile` and the
//! reachability checks of `crate::reach`, with their counters.
//! [`NullProbe`] knows nothing (every answer is [`Probed::Unknown`] or
//! none): the stage then resolves from its records alone, as it must for
//! an imported perf.data file (never the live `/proc` for a recording made
//! elsewhere or earlier) and for tests over `SimRing`s.
//!
//! Not here: what the stage makes of the answers (cookies, claims,
//! tables: `crate::stage`), and the parsing of `/proc` text
//! (`crate::procfs`).

use crate::binfile::{BuildIdReader, IdentityReader, MappedBinary};
use crate::kernel::{KernelMaps, LoadedModule};
use crate::procfs::{read_all_processes, read_process, ProcPaths, ProcProcess};
use crate::reach::{KeepQueue, NsTasks, Reacher};
use profkit_eventlog::{Cookie, CookieEntry, FileIdentity, NsTask};
use std::fmt;
use std::path::Path;

/// An answer from the host: found, known not to be there, or not asked
/// (a probe that does not look, [`NullProbe`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probed<T> {
    /// The host has it.
    Found(T),
    /// The host was asked and has nothing (gone, unreadable, refused).
    Absent,
    /// This probe does not look at the host.
    Unknown,
}

/// A mapped file as a mapping record names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MappedFile<'a> {
    /// The path the record gave.
    pub path: &'a str,
    /// The device (as `procfs::dev_number` encodes it) and inode the
    /// kernel gave, when it gave them.
    pub identity: Option<(u64, u64)>,
    /// (pid, start, end) of a mapping of it, when known: a live process's
    /// `map_files` entry reaches the very file mapped.
    pub mapped_by: Option<(u32, u64, u64)>,
}

/// Everything the sync stage reads from the machine. Each method answers
/// for the host as it is now; a probe that does not look answers
/// [`Probed::Unknown`] or nothing, and the stage goes by its records.
pub trait HostProbe: fmt::Debug + Send {
    /// The kernel's text and build-id (`/proc/kallsyms`, `/sys/kernel/notes`),
    /// without modules; None: not looked at (the stage keeps its own).
    fn kernel(&mut self) -> Option<KernelMaps>;

    /// Modules loaded since the last look (`/proc/modules`), recorded in
    /// `kernel`'s module list; none when not looked at.
    fn new_modules(&mut self, kernel: &mut KernelMaps) -> Vec<(LoadedModule, CookieEntry)>;

    /// Every running process with its maps and thread names.
    fn processes(&mut self) -> Vec<ProcProcess>;

    /// Process `pid` with its maps and thread names.
    fn process(&mut self, pid: u32) -> Probed<ProcProcess>;

    /// The uid owning process `pid`.
    fn owner(&mut self, pid: u32) -> Option<u32>;

    /// Task `tid` of process `pid`'s ids in its own pid namespace, if that
    /// is not the recorder's.
    fn ns_task(&mut self, pid: u32, tid: u32) -> Option<NsTask>;

    /// Process `pid`'s cgroup v2 (`/proc/PID/cgroup`) as (id: the
    /// directory's inode under `mount`, path).
    fn cgroup(&mut self, pid: u32, mount: Option<&Path>) -> Probed<(u64, String)>;

    /// Forgets what was learnt of process `pid` (it exited; its pid may
    /// name another process next).
    fn exited(&mut self, pid: u32);

    /// The build-id of a mapped file (read without trusting its path);
    /// None: it has none, or it was not read.
    fn build_id(&mut self, file: &MappedFile<'_>) -> Option<Vec<u8>>;

    /// The identity of the file behind a mapping claiming build-id
    /// `claim`; [`Probed::Unknown`]: files are not identified, a build-id
    /// is then taken at its word.
    fn identify(&mut self, file: &MappedFile<'_>, claim: &[u8]) -> Probed<FileIdentity>;

    /// Whether `path` exists on the host; None: not looked at.
    fn exists(&self, path: &str) -> Option<bool>;

    /// A binary met for the first time (cookie `cookie`): if the host
    /// cannot reach it at its recorded path (another mount namespace),
    /// queue it to be kept in the session (`crate::reach`).
    fn reach(&mut self, file: &MappedFile<'_>, build_id: Option<&[u8]>, cookie: Cookie);

    /// Reads process `pid`'s memory at `addr` into `buf`: the code of
    /// generated functions, for the unwinder (`unwind::jit`). The number
    /// of bytes read; 0: not read (gone, refused, or a probe that does not
    /// look).
    fn read_memory(&mut self, pid: u32, addr: u64, buf: &mut [u8]) -> usize {
        let _ = (pid, addr, buf);
        0
    }

    /// Opens the jitdump file process `pid` maps at `start..end` (named
    /// `path` by its mapping), through that mapping, checked as any file a
    /// user controls: a regular file, owned by the process's user, not
    /// mostly holes. With its (device, inode). None: not opened (gone,
    /// refused, or a probe that does not look).
    fn open_jitdump(
        &mut self,
        pid: u32,
        path: &str,
        start: u64,
        end: u64,
    ) -> Option<(std::fs::File, (u64, u64))> {
        let _ = (pid, path, start, end);
        None
    }

    /// Where processes' `map_files` are (`/proc`), for reading mapped
    /// binaries' unwind tables through them; None: not looked at.
    fn proc_root(&self) -> Option<&Path>;

    /// Build-ids not read, by reason (see
    /// [`crate::RecorderStatus::build_ids_refused`]).
    fn build_id_refusals(&self) -> [u64; 4];

    /// Mappings claiming a build-id whose file could not be identified.
    fn files_unidentified(&self) -> u64;

    /// The queue of binaries to keep in the session (see `crate::reach`).
    fn keep_queue(&self) -> KeepQueue;
}

/// The live probe: this machine's `/proc` and `/sys` (or those under
/// [`ProcPaths`], for tests), mapped files read through time-boxed workers.
#[derive(Debug)]
pub struct ProcfsProbe {
    paths: ProcPaths,
    /// Reads mapped binaries' build-ids without trusting their paths.
    build_id_reader: BuildIdReader,
    /// Identifies the files behind mappings whose build-id is known.
    identity_reader: IdentityReader,
    /// Binaries the host cannot reach at their recorded paths (containers).
    reach: Reacher,
    /// Tasks' ids in their own pid namespaces (containers).
    ns_tasks: NsTasks,
    /// Processes' `/proc/PID/mem`, open (None: could not be opened).
    mem: rustc_hash::FxHashMap<u32, Option<std::fs::File>>,
}

/// How long opening a jitdump may take.
const JITDUMP_OPEN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1);

/// Most `/proc/PID/mem` files held open at once.
const MAX_MEM_FILES: usize = 64;

impl Default for ProcfsProbe {
    /// `/proc` and `/sys`.
    fn default() -> Self {
        Self::new(ProcPaths::default())
    }
}

impl ProcfsProbe {
    /// A probe of the `/proc` and `/sys` at `paths`.
    pub fn new(paths: ProcPaths) -> Self {
        ProcfsProbe {
            paths,
            build_id_reader: BuildIdReader::default(),
            identity_reader: IdentityReader::default(),
            reach: Reacher::default(),
            ns_tasks: NsTasks::default(),
            mem: Default::default(),
        }
    }

    fn mapped_binary(&self, f: &MappedFile<'_>) -> MappedBinary {
        MappedBinary {
            path: f.path.into(),
            map_file: f.mapped_by.map(|(pid, start, end)| {
                self.paths
                    .proc_root
                    .join(format!("{pid}/map_files/{start:x}-{end:x}"))
            }),
            identity: f.identity,
        }
    }
}

impl HostProbe for ProcfsProbe {
    fn kernel(&mut self) -> Option<KernelMaps> {
        Some(KernelMaps::read(&self.paths))
    }

    fn new_modules(&mut self, kernel: &mut KernelMaps) -> Vec<(LoadedModule, CookieEntry)> {
        kernel.refresh_modules(&self.paths)
    }

    fn processes(&mut self) -> Vec<ProcProcess> {
        read_all_processes(&self.paths.proc_root)
    }

    fn process(&mut self, pid: u32) -> Probed<ProcProcess> {
        match read_process(&self.paths.proc_root, pid) {
            Some(p) => Probed::Found(p),
            None => Probed::Absent,
        }
    }

    fn owner(&mut self, pid: u32) -> Option<u32> {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(self.paths.proc_root.join(pid.to_string()))
            .ok()
            .map(|m| m.uid())
    }

    fn ns_task(&mut self, pid: u32, tid: u32) -> Option<NsTask> {
        self.ns_tasks.of(&self.paths.proc_root, pid, tid)
    }

    fn cgroup(&mut self, pid: u32, mount: Option<&Path>) -> Probed<(u64, String)> {
        use std::os::unix::fs::MetadataExt;
        let read = || {
            let text =
                std::fs::read_to_string(self.paths.proc_root.join(pid.to_string()).join("cgroup"))
                    .ok()?;
            let path = text.lines().find_map(|l| l.strip_prefix("0::"))?.trim_end();
            let dir = mount?.join(path.trim_start_matches('/'));
            let id = std::fs::metadata(dir).ok()?.ino();
            Some((id, path.to_string()))
        };
        match read() {
            Some(c) => Probed::Found(c),
            None => Probed::Absent,
        }
    }

    fn exited(&mut self, pid: u32) {
        self.ns_tasks.exit(pid);
        self.mem.remove(&pid);
    }

    fn build_id(&mut self, file: &MappedFile<'_>) -> Option<Vec<u8>> {
        let b = self.mapped_binary(file);
        self.build_id_reader.read(b).ok().flatten()
    }

    fn identify(&mut self, file: &MappedFile<'_>, claim: &[u8]) -> Probed<FileIdentity> {
        let b = self.mapped_binary(file);
        match self.identity_reader.read(b, Some(claim)) {
            Some(i) => Probed::Found(i),
            None => Probed::Absent,
        }
    }

    fn exists(&self, path: &str) -> Option<bool> {
        Some(Path::new(path).exists())
    }

    fn reach(&mut self, file: &MappedFile<'_>, build_id: Option<&[u8]>, cookie: Cookie) {
        let b = self.mapped_binary(file);
        self.reach.check(b, build_id, cookie);
    }

    fn proc_root(&self) -> Option<&Path> {
        Some(&self.paths.proc_root)
    }

    fn open_jitdump(
        &mut self,
        pid: u32,
        _path: &str,
        start: u64,
        end: u64,
    ) -> Option<(std::fs::File, (u64, u64))> {
        use profkit_untrusted::{open_untrusted, Policy};
        use std::os::unix::fs::MetadataExt;
        let uid = self.owner(pid)?;
        let policy = Policy::regular()
            .owner(uid)
            .max_bytes(crate::jit::JIT_MAX_DUMP_BYTES)
            .dense()
            .time_box(JITDUMP_OPEN_TIMEOUT);
        let mapped = self
            .paths
            .proc_root
            .join(format!("{pid}/map_files/{start:x}-{end:x}"));
        let o = open_untrusted(&mapped, &policy).ok()?;
        let id = (crate::binfile::dev_of(o.meta.dev()), o.meta.ino());
        Some((o.file, id))
    }

    fn read_memory(&mut self, pid: u32, addr: u64, buf: &mut [u8]) -> usize {
        use std::os::unix::fs::FileExt;
        if !self.mem.contains_key(&pid) && self.mem.len() >= MAX_MEM_FILES {
            self.mem.clear();
        }
        let root = &self.paths.proc_root;
        let file = self
            .mem
            .entry(pid)
            .or_insert_with(|| std::fs::File::open(root.join(format!("{pid}/mem"))).ok());
        let Some(f) = file else {
            return 0;
        };
        // Addresses past i64::MAX are not user memory (and pread refuses
        // such offsets).
        if addr > i64::MAX as u64 {
            return 0;
        }
        f.read_at(buf, addr).unwrap_or(0)
    }

    fn build_id_refusals(&self) -> [u64; 4] {
        self.build_id_reader.refused
    }

    fn files_unidentified(&self) -> u64 {
        self.identity_reader.unidentified
    }

    fn keep_queue(&self) -> KeepQueue {
        self.reach.queue.clone()
    }
}

/// The probe of a stage that must not look at this machine (an imported
/// recording, tests): it knows nothing, so everything comes from the
/// records.
#[derive(Debug, Default, Clone, Copy)]
pub struct NullProbe;

impl HostProbe for NullProbe {
    fn kernel(&mut self) -> Option<KernelMaps> {
        None
    }

    fn new_modules(&mut self, _: &mut KernelMaps) -> Vec<(LoadedModule, CookieEntry)> {
        Vec::new()
    }

    fn processes(&mut self) -> Vec<ProcProcess> {
        Vec::new()
    }

    fn process(&mut self, _: u32) -> Probed<ProcProcess> {
        Probed::Unknown
    }

    fn owner(&mut self, _: u32) -> Option<u32> {
        None
    }

    fn ns_task(&mut self, _: u32, _: u32) -> Option<NsTask> {
        None
    }

    fn cgroup(&mut self, _: u32, _: Option<&Path>) -> Probed<(u64, String)> {
        Probed::Unknown
    }

    fn exited(&mut self, _: u32) {}

    fn build_id(&mut self, _: &MappedFile<'_>) -> Option<Vec<u8>> {
        None
    }

    fn identify(&mut self, _: &MappedFile<'_>, _: &[u8]) -> Probed<FileIdentity> {
        Probed::Unknown
    }

    fn exists(&self, _: &str) -> Option<bool> {
        None
    }

    fn reach(&mut self, _: &MappedFile<'_>, _: Option<&[u8]>, _: Cookie) {}

    fn proc_root(&self) -> Option<&Path> {
        None
    }

    fn build_id_refusals(&self) -> [u64; 4] {
        [0; 4]
    }

    fn files_unidentified(&self) -> u64 {
        0
    }

    fn keep_queue(&self) -> KeepQueue {
        KeepQueue::default()
    }
}

/// The probe of an imported recording: a [`NullProbe`] that also opens the
/// JIT dumps the recording's mappings name, as `perf inject --jit` finds
/// them: in the directories given (the perf.data file's own first), by the
/// dump's file name, else at the path the recording gave if the importing
/// user owns the file there. Each is opened by the checked opener (a
/// regular file reached without a link, bounded, not mostly holes).
#[derive(Debug, Default, Clone)]
pub struct ImportProbe {
    null: NullProbe,
    jit_dirs: Vec<std::path::PathBuf>,
}

impl ImportProbe {
    /// A probe looking for JIT dumps in `jit_dirs`, then at their recorded
    /// paths.
    pub fn new(jit_dirs: Vec<std::path::PathBuf>) -> Self {
        ImportProbe {
            null: NullProbe,
            jit_dirs,
        }
    }
}

impl HostProbe for ImportProbe {
    fn kernel(&mut self) -> Option<KernelMaps> {
        self.null.kernel()
    }
    fn new_modules(&mut self, k: &mut KernelMaps) -> Vec<(LoadedModule, CookieEntry)> {
        self.null.new_modules(k)
    }
    fn processes(&mut self) -> Vec<ProcProcess> {
        self.null.processes()
    }
    fn process(&mut self, pid: u32) -> Probed<ProcProcess> {
        self.null.process(pid)
    }
    fn owner(&mut self, pid: u32) -> Option<u32> {
        self.null.owner(pid)
    }
    fn ns_task(&mut self, pid: u32, tid: u32) -> Option<NsTask> {
        self.null.ns_task(pid, tid)
    }
    fn cgroup(&mut self, pid: u32, mount: Option<&Path>) -> Probed<(u64, String)> {
        self.null.cgroup(pid, mount)
    }
    fn exited(&mut self, pid: u32) {
        self.null.exited(pid)
    }
    fn build_id(&mut self, f: &MappedFile<'_>) -> Option<Vec<u8>> {
        self.null.build_id(f)
    }
    fn identify(&mut self, f: &MappedFile<'_>, claim: &[u8]) -> Probed<FileIdentity> {
        self.null.identify(f, claim)
    }
    fn exists(&self, path: &str) -> Option<bool> {
        self.null.exists(path)
    }
    fn reach(&mut self, f: &MappedFile<'_>, b: Option<&[u8]>, c: Cookie) {
        self.null.reach(f, b, c)
    }
    fn open_jitdump(
        &mut self,
        _pid: u32,
        path: &str,
        _start: u64,
        _end: u64,
    ) -> Option<(std::fs::File, (u64, u64))> {
        use profkit_untrusted::{open_untrusted, Policy};
        use std::os::unix::fs::MetadataExt;
        let name = Path::new(path).file_name()?;
        let policy = Policy::regular()
            .no_follow()
            .max_bytes(crate::jit::JIT_MAX_DUMP_BYTES)
            .dense()
            .time_box(JITDUMP_OPEN_TIMEOUT);
        // Beside the recording: the directory its user chose. At the path
        // the recording names (a file that anyone may have written, and a
        // crafted recording may name any): only a file of the user who
        // imports.
        let recorded = Policy::regular()
            .no_follow()
            .owner(rustix::process::geteuid().as_raw())
            .max_bytes(crate::jit::JIT_MAX_DUMP_BYTES)
            .dense()
            .time_box(JITDUMP_OPEN_TIMEOUT);
        let candidates = self.jit_dirs.iter().map(|d| (d.join(name), &policy)).chain(
            Path::new(path)
                .is_absolute()
                .then(|| (path.into(), &recorded)),
        );
        for (c, policy) in candidates {
            if let Ok(o) = open_untrusted(&c, policy) {
                let id = (crate::binfile::dev_of(o.meta.dev()), o.meta.ino());
                return Some((o.file, id));
            }
        }
        None
    }
    fn proc_root(&self) -> Option<&Path> {
        self.null.proc_root()
    }
    fn build_id_refusals(&self) -> [u64; 4] {
        self.null.build_id_refusals()
    }
    fn files_unidentified(&self) -> u64 {
        self.null.files_unidentified()
    }
    fn keep_queue(&self) -> KeepQueue {
        self.null.keep_queue()
    }
}
