//! The data model: what a chunk's event stream means, independent of its bytes.

use serde::{Deserialize, Serialize};

/// A stable binary id, computed by the sync stage; this crate only carries it.
pub type Cookie = u64;

/// Reserved cookie: "no binary". Never assigned to a real binary.
pub const COOKIE_NONE: Cookie = 0;

/// Reserved cookie: a call-stack frame whose address did not resolve to
/// any known binary (its offset is 0, or why the stack broke there:
/// [`broken`]). Never assigned to a real binary; the
/// sync stage defines it with a `CookieDef` (path `[unknown]`, kind
/// [`CookieKind::Other`]) before the first stack that uses it.
pub const COOKIE_UNKNOWN: Cookie = u64::MAX;

/// Why a stack broke, as the offset of its [`COOKIE_UNKNOWN`] frame says
/// (0: not said: sessions before it, imports' frame-pointer chains). A
/// report counts broken stacks by these and by the binary of the frame
/// before. No version bump: an older reader shows the frame as
/// `[unknown]` whatever its offset.
pub mod broken {
    /// Not said.
    pub const NOT_SAID: u64 = 0;
    /// The unwinder had no rule for the frame (no unwind information, and
    /// the frame pointer led nowhere).
    pub const NO_RULE: u64 = 1;
    /// The next return address was in no mapping (the unwind had lost the
    /// real frames).
    pub const OUTSIDE_MAPPINGS: u64 = 2;
    /// The stack bytes the next step needed could not be read (and the
    /// copy was not cut by its size).
    pub const STACK_UNREADABLE: u64 = 3;
    /// A 32-bit task (not unwound).
    pub const NOT_64_BIT: u64 = 4;
    /// The copied user stack ended before the outermost frame
    /// (`--call-graph dwarf,SIZE` copies more).
    pub const CUT: u64 = 5;

    /// A person's words for `offset`.
    pub fn why(offset: u64) -> &'static str {
        match offset {
            NO_RULE => "no unwind rule",
            OUTSIDE_MAPPINGS => "return address outside every mapping",
            STACK_UNREADABLE => "stack bytes unreadable",
            NOT_64_BIT => "32-bit task",
            CUT => "stack copy too short",
            _ => "not said",
        }
    }
}

/// One frame of a call stack, resolved at sync time like a sample.
///
/// Frames are return addresses (the instruction after a call), as the
/// kernel's frame-pointer walk gives them: a symbolizer looks up
/// `offset - 1` to name the call site.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Frame {
    /// Binary ([`COOKIE_UNKNOWN`] when the address did not resolve).
    pub cookie: Cookie,
    /// Offset within the binary, as for a sample's offset (0 for unknown frames).
    pub offset: u64,
    /// A kernel frame (kernel image or module) rather than a user one.
    pub kernel: bool,
}

/// How cookies are derived: FNV-1a over a domain tag and the parts (each
/// followed by a separator byte, so ("ab", "c") and ("a", "bc") differ),
/// never one of the reserved values [`COOKIE_NONE`] and `COOKIE_UNKNOWN`.
///
/// Part of the format's contract rather than of the recorder: every writer
/// of sessions (the sync stage, `profreport --import`) derives the same
/// cookie for the same binary, so sessions merge. The tags in use:
/// `build-id(-file, -unverified)`, `inode`, `anon`, `jit`, `vdso`,
/// `kernel(-build-id)`, `module(-build-id)`, each fed by one function of
/// [`crate::cookie`].
pub fn cookie_hash(tag: &str, parts: &[&[u8]]) -> Cookie {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut feed = |b: &[u8]| {
        for &x in b {
            h ^= x as u64;
            h = h.wrapping_mul(0x0000_0100_0000_01b3);
        }
        h ^= 0xff;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    };
    feed(tag.as_bytes());
    for p in parts {
        feed(p);
    }
    if h == COOKIE_NONE || h == crate::COOKIE_UNKNOWN {
        1
    } else {
        h
    }
}

/// What kind of code a cookie names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum CookieKind {
    /// A user-space ELF file (executable or shared object).
    User,
    /// The kernel image (`vmlinux`, offsets relative to [`CookieEntry::base`]).
    Kernel,
    /// A kernel module (offsets relative to its load address).
    Module,
    /// Anonymous executable memory (JIT), owned by [`CookieEntry::pid`].
    Anon,
    /// The vDSO.
    Vdso,
    /// Anything else.
    Other,
    /// A process's JIT code described by a jitdump file (`jit-PID.dump`,
    /// format version 7): offsets are absolute addresses, as for
    /// [`CookieKind::Anon`], named by the session's [`Event::JitCode`]
    /// markers. [`CookieEntry::path`] is the dump file's path as the
    /// process mapped it, `pid` the process, `dev`/`inode` the dump
    /// file's, and [`CookieEntry::base`] the JIT generation (a new cookie
    /// each time the runtime reuses addresses, so within one cookie the
    /// functions never overlap). See [`crate::cookie::jit_entry`].
    Jit,
}

impl LostKind {
    /// True for samples profkit read before losing them (unresolved, or
    /// in a round that could not be stored): they count in
    /// `samples_received` as well as in their loss counter. Ring, Reconcile
    /// and Other are the kernel's losses: those samples never reached us.
    pub fn was_received(self) -> bool {
        matches!(
            self,
            LostKind::NoMapping | LostKind::NoTask | LostKind::Overflow | LostKind::DiskFull
        )
    }
}

/// Everything a report needs to find the binary behind a cookie.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CookieEntry {
    /// The cookie this entry defines.
    pub cookie: Cookie,
    /// What kind of code it is.
    pub kind: CookieKind,
    /// Path of the binary (`[kernel.kallsyms]`, `[vdso]`, a module name, ...).
    pub path: String,
    /// GNU build-id, when known.
    pub build_id: Option<Vec<u8>>,
    /// Device number of the file.
    pub dev: u64,
    /// Inode number of the file.
    pub inode: u64,
    /// Inode generation.
    pub generation: u64,
    /// Kernel/module: the load address offsets are relative to; Jit: the
    /// JIT generation (offsets are absolute addresses); else 0.
    pub base: u64,
    /// Anon and Jit: the owning process.
    pub pid: Option<u32>,
    /// Which file backed the mappings of this cookie, as the sync stage
    /// saw it (appended field; [`FileCheck::NotRecorded`] for sessions
    /// written before it, for imports and for non-file cookies). A report
    /// uses a file for this cookie only if it is that file.
    pub file: FileCheck,
}

/// What a user-file cookie's entry says about the file that backed its
/// mappings: the answer to "is this candidate file the one that was
/// sampled" (a build-id is the file's claim, not its identity).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum FileCheck {
    /// Nothing recorded (sessions before this field, imports, kernel,
    /// modules, anonymous code): files are found as before, by path and
    /// build-id.
    #[default]
    NotRecorded,
    /// The mapped file, identified at sync time through the mapping.
    File(FileIdentity),
    /// A build-id claim whose file could not be identified (its process
    /// gone and its path not the host's): no file found by build-id alone
    /// may name it.
    Unverified,
}

impl FileCheck {
    /// The identity, when one was recorded.
    pub fn identity(&self) -> Option<&FileIdentity> {
        match self {
            FileCheck::File(i) => Some(i),
            _ => None,
        }
    }
}

/// A file as `fstat` saw it when the sync stage first met its mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct FileIdentity {
    /// Device number (major << 32 | minor, as cookies encode it).
    pub dev: u64,
    /// Inode number.
    pub inode: u64,
    /// Size in bytes.
    pub size: u64,
    /// Modification time, nanoseconds since the epoch.
    pub mtime_ns: i64,
}

/// Why samples were lost.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum LostKind {
    /// The kernel reported a `PERF_RECORD_LOST` (ring full).
    Ring,
    /// The event buffer was full.
    Overflow,
    /// Writing the session failed (disk full).
    DiskFull,
    /// No mapping covered the sample's address.
    NoMapping,
    /// The sample's task was unknown.
    NoTask,
    /// Kernel read-back lost count minus the LOST records seen, at stop.
    Reconcile,
    /// Anything else.
    Other,
}

/// Why a task was off its CPU (an [`Event::OffCpu`]'s kind).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum OffCpuKind {
    /// It blocked: slept, waited for I/O, a lock, a pipe (code 0).
    Blocked,
    /// It was preempted while runnable and waited for a CPU (code 1).
    Runnable,
}

impl OffCpuKind {
    /// The marker's byte.
    pub fn code(self) -> u8 {
        match self {
            OffCpuKind::Blocked => 0,
            OffCpuKind::Runnable => 1,
        }
    }

    /// The kind of a marker byte; None for unknown values.
    pub fn from_code(c: u8) -> Option<Self> {
        match c {
            0 => Some(OffCpuKind::Blocked),
            1 => Some(OffCpuKind::Runnable),
            _ => None,
        }
    }

    /// How reports name it.
    pub fn name(self) -> &'static str {
        match self {
            OffCpuKind::Blocked => "blocked",
            OffCpuKind::Runnable => "runnable",
        }
    }
}

/// A task's process and thread ids as it sees them in its own pid
/// namespace (the last fields of `NSpid:` in `/proc/PID/status` and
/// `/proc/PID/task/TID/status`): a container's init is `1/1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct NsTask {
    /// The process id in the task's pid namespace.
    pub pid: u32,
    /// The thread id in the task's pid namespace.
    pub tid: u32,
}

/// One function of a runtime's JIT code, as its jitdump file describes it
/// (an [`Event::JitCode`] marker, format version 7).
///
/// Bounds (a reader refuses a marker over them as malformed):
/// [`crate::MAX_JIT_NAME`], [`crate::MAX_JIT_CODE`],
/// [`crate::MAX_JIT_FILES`] (each file name at most
/// [`crate::MAX_JIT_NAME`] bytes), [`crate::MAX_JIT_LINES`].
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct JitCode {
    /// The [`CookieKind::Jit`] cookie whose samples this names.
    pub cookie: Cookie,
    /// The code's address: the cookie's offsets `addr..addr + size`.
    pub addr: u64,
    /// The code's size in bytes.
    pub size: u64,
    /// The runtime's `code_index` for it.
    pub index: u64,
    /// When the runtime loaded it (CLOCK_MONOTONIC ns, the dump's
    /// timestamp): of two functions covering an address, the later names it.
    pub time: u64,
    /// The runtime's name for it, as given (`py::f:/tmp/x.py`,
    /// `JS:*fib /tmp/x.js:3`).
    pub name: String,
    /// The code bytes (`len == size`), when kept.
    pub code: Option<Vec<u8>>,
    /// The source files [`JitLine::file`] indexes.
    pub files: Vec<String>,
    /// Source lines, sorted by offset, each within `0..size`.
    pub lines: Vec<JitLine>,
}

/// One source line of a [`JitCode`]: the code from `offset` (up to the
/// next entry's) comes from `files[file]`, line `line`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct JitLine {
    /// Offset from [`JitCode::addr`].
    pub offset: u64,
    /// Line number.
    pub line: u32,
    /// DWARF discriminator (0: none).
    pub discrim: u32,
    /// Index into [`JitCode::files`].
    pub file: u32,
}

/// One event of a chunk's stream.
///
/// `CpuSwitch`, `TaskSwitch`, `Mode` and `CookieSwitch` change the decoding
/// state; `Sample` and `StackSample` are expanded against it; all others are
/// markers that carry their own data. See [`crate::Expander`].
///
/// Variants are only ever added (`StackSample` and `StackDef` came with
/// format version 2): a `match` outside this crate should keep a `_` arm.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Event {
    /// Samples that follow were taken on `cpu`. Unsets task, mode and cookie.
    CpuSwitch {
        /// The CPU.
        cpu: u32,
    },
    /// Samples that follow belong to this task.
    TaskSwitch {
        /// Process id.
        pid: u32,
        /// Thread id.
        tid: u32,
    },
    /// Samples that follow were taken in kernel (`true`) or user mode.
    Mode {
        /// Kernel mode.
        kernel: bool,
    },
    /// Samples that follow fall in this cookie's binary.
    CookieSwitch {
        /// The cookie.
        cookie: Cookie,
    },
    /// Samples that follow were taken in the cgroup `id` (the cgroup v2
    /// id, its directory's inode number; 0: no cgroup). Unset by
    /// `CpuSwitch`. Since version 4.
    CgroupSwitch {
        /// The cgroup id.
        id: u64,
    },
    /// A sample at this offset within the current cookie's binary.
    Sample {
        /// Offset in the binary (file offset, or relative to `base`).
        offset: u64,
        /// When it was taken (CLOCK_MONOTONIC ns): a timed tag (version
        /// 6). An encoder writes it rounded down to its time unit.
        time: Option<u64>,
    },
    /// A sample at this offset whose callers are the stack `stack` (defined
    /// by a [`Event::StackDef`] somewhere in the session). Since version 2.
    StackSample {
        /// Offset in the binary (file offset, or relative to `base`).
        offset: u64,
        /// Session-wide stack id.
        stack: u32,
        /// When it was taken, as for [`Event::Sample`].
        time: Option<u64>,
    },
    /// A task got a name (`exec` true when it came from an exec).
    Comm {
        /// Process id.
        pid: u32,
        /// Thread id.
        tid: u32,
        /// The new name.
        comm: String,
        /// Whether the name change came from `execve`.
        exec: bool,
        /// The task's ids in its own pid namespace, when that is not the
        /// recorder's (a container's `1/1`); appended to the body, read as
        /// None when absent.
        ns: Option<NsTask>,
    },
    /// Defines a cookie (written once per session, before its first use is
    /// needed by a report).
    CookieDef(CookieEntry),
    /// A module or mapping was loaded at `start..end` (`pid` None: a kernel
    /// module).
    ModuleLoad {
        /// The binary.
        cookie: Cookie,
        /// Start address.
        start: u64,
        /// End address (exclusive).
        end: u64,
        /// File offset of `start`.
        pgoff: u64,
        /// Owning process; None for kernel modules.
        pid: Option<u32>,
    },
    /// `count` samples were lost on `cpu` for this reason.
    Lost {
        /// The CPU.
        cpu: u32,
        /// Why.
        kind: LostKind,
        /// How many.
        count: u64,
    },
    /// Defines stack `id`: the callers of a sample, innermost first (the
    /// sampled instruction itself is not a frame: it is the sample's own
    /// cookie and offset). Written once per session, before the first
    /// chunk that needs it is complete; ids are session-wide. Since version 2.
    StackDef {
        /// The stack id samples refer to.
        id: u32,
        /// Caller frames, innermost (the sampled function's caller) first.
        frames: Vec<Frame>,
    },
    /// Defines stack `id` as `frames` (innermost first) followed by the
    /// frames of stack `parent`, defined earlier in the session (`parent <
    /// id`): a stack sharing its outer part with one already written costs
    /// only its own frames. Written for DWARF call graphs, whose deep,
    /// varied stacks (recursion) share long outer parts. Since version 3.
    StackDefOn {
        /// The stack id samples refer to.
        id: u32,
        /// The stack whose frames follow `frames`.
        parent: u32,
        /// This stack's own innermost frames.
        frames: Vec<Frame>,
    },
    /// Names cgroup `id`: its path from the root of the cgroup v2
    /// hierarchy (`/`, `/system.slice/x.service`). Written once per
    /// session, before the first chunk that needs it is complete. Since
    /// version 4.
    CgroupDef {
        /// The cgroup id.
        id: u64,
        /// Its path (at most [`crate::MAX_CGROUP_PATH`] bytes).
        path: String,
    },
    /// Off-CPU time (`profctl start --off-cpu`, version 5): `count`
    /// intervals of task `pid`/`tid` off its CPU, `total_ns` nanoseconds in
    /// all, that began with a switch-out on `cpu` at the code
    /// `cookie`+`offset` (mode `kernel`) called from stack `stack`, of
    /// `kind`. The sync stage writes one per (task, stack, kind, CPU,
    /// cgroup) and round, in the round the intervals ended (closed at
    /// stop and at a rotation). Carries its own data: the expansion state
    /// is not read or changed.
    OffCpu {
        /// The CPU the task switched out on.
        cpu: u32,
        /// Process id.
        pid: u32,
        /// Thread id.
        tid: u32,
        /// Blocked (sleeping) or runnable (preempted, waiting for a CPU).
        kind: OffCpuKind,
        /// The switch-out's own address was a kernel one.
        kernel: bool,
        /// Binary of the switch-out address ([`COOKIE_UNKNOWN`] with
        /// offset 0 when its stack was not recorded: throttled or lost).
        cookie: Cookie,
        /// Offset of the switch-out address in that binary.
        offset: u64,
        /// Its callers, as a sample's (session file's stack table).
        stack: Option<u32>,
        /// The cgroup id (0: none or not recorded).
        cgroup: u64,
        /// Intervals summed here (at least 1).
        count: u64,
        /// Their total length, ns.
        total_ns: u64,
    },
    /// A function of a runtime's JIT code (its name, code bytes and
    /// source lines), for the [`CookieKind::Jit`] cookie it names. A
    /// metadata marker, like [`Event::CookieDef`]: the runtime writes its
    /// dump late, so it may come in a later chunk (or part) than the
    /// samples it names; a report collects them from all chunks. Since
    /// version 7.
    JitCode(JitCode),
    /// The kernel throttled (or unthrottled) sampling on `cpu`.
    Throttle {
        /// The CPU.
        cpu: u32,
        /// perf clock time of the record.
        time: u64,
        /// `true` for throttle, `false` for unthrottle.
        throttled: bool,
    },
}

impl Event {
    /// True for the events that change the expansion state (`CpuSwitch`,
    /// `TaskSwitch`, `Mode`, `CookieSwitch`).
    pub fn is_state(&self) -> bool {
        matches!(
            self,
            Event::CpuSwitch { .. }
                | Event::TaskSwitch { .. }
                | Event::Mode { .. }
                | Event::CookieSwitch { .. }
                | Event::CgroupSwitch { .. }
        )
    }

    /// True for samples (`Sample`, `StackSample`).
    pub fn is_sample(&self) -> bool {
        matches!(self, Event::Sample { .. } | Event::StackSample { .. })
    }

    /// True for markers: events that are neither state changes nor samples.
    pub fn is_marker(&self) -> bool {
        !self.is_state() && !self.is_sample()
    }

    /// True for the metadata markers a report collects from every chunk
    /// before naming (and a writer restates in each part, or a merge keeps
    /// whatever chunk holds them): `CookieDef`, `StackDef`, `StackDefOn`,
    /// `CgroupDef`, `JitCode`.
    pub fn is_definition(&self) -> bool {
        matches!(
            self,
            Event::CookieDef(_)
                | Event::StackDef { .. }
                | Event::StackDefOn { .. }
                | Event::CgroupDef { .. }
                | Event::JitCode(_)
        )
    }
}

/// A sample with the full state it was taken in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ExpandedSample {
    /// CPU.
    pub cpu: u32,
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Kernel mode.
    pub kernel: bool,
    /// Binary.
    pub cookie: Cookie,
    /// Offset within the binary.
    pub offset: u64,
    /// The sample's callers: a stack id of the session's stack table
    /// (see [`crate::StackTable`]); `None` for a sample recorded without
    /// call graph, or whose call chain had no caller frame.
    pub stack: Option<u32>,
    /// The cgroup the sample was taken in (its id; named by an
    /// [`Event::CgroupDef`]); 0 when the session does not record cgroups.
    pub cgroup: u64,
    /// When the sample was taken: CLOCK_MONOTONIC nanoseconds (perf's
    /// clock), from a timed sample tag (version 6). None for a sample
    /// written without its time (sessions before version 6): a report
    /// then places it at its round's middle and says so.
    pub time: Option<u64>,
}
