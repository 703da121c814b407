//! The sync stage: per-CPU rings merged into one global event buffer.
//!
//! This crate owns OProfile's `buffer_sync` moved onto perf rings:
//!
//! - [`SyncStage`]: one round drains every CPU's ring in turn into one
//!   [`Chunk`] of the event log, writing a CPU-switch marker first, then
//!   task/mode/cookie switches only when they change, then compact samples
//!   already resolved to (cookie, offset) through the process table
//!   ([`ProcessTable`], seeded from `/proc`, kept current from MMAP2, COMM,
//!   FORK and EXIT) and the kernel's text and modules ([`KernelMaps`]);
//!   module loads, LOST records, throttling and samples that could not be
//!   resolved all become markers at their place, and every sample the
//!   kernel produced is counted in [`profkit_eventlog::CpuAccounting`].
//!   Every record, whatever its source, enters through one entry,
//!   [`SyncStage::record`]: [`SyncStage::drain`] parses a ring's records
//!   into it, and `profkit-import` hands it a perf.data file's records, so
//!   a recording imported and one made live are resolved by the same code.
//!   The kernel maps come from `/proc` live, or from perf's
//!   `[kernel.kallsyms]_text` and pid −1 module mappings in a file
//!   ([`KernelMaps::set_text`], [`KernelMaps::add_module`]); build-ids a
//!   file knows besides its records come in through
//!   [`SyncStage::add_build_id`].
//! - Cookies: how each kind of binary's cookie is derived, and which
//!   mapping paths are anonymous code, is the format's
//!   ([`profkit_eventlog::cookie`]; the functions are re-exported here);
//!   this crate decides which binary an address falls in, reads build-ids
//!   of mapped files, and writes each cookie's definition once. In a live
//!   session a build-id is a claim, not an identity: the file behind each
//!   mapping with one is identified (device, inode, size, mtime, through
//!   `/proc/PID/map_files`, time-boxed: `binfile::identify`), the first
//!   file identified with a build-id gets its plain cookie and any other
//!   file its own, each defined with its file (`FileCheck`), so a file
//!   linked with libc's build-id cannot lend its samples libc's name nor
//!   take libc's, and unwind tables, read and cached per cookie, are per
//!   verified file. Imports have no file to identify and keep the plain
//!   cookie.
//!   With call graphs, every frame of a sample's callchain is resolved the
//!   same way ([`resolve_chain`]: kernel frames through the kernel maps,
//!   user frames through the process table at the sample's time, an
//!   unresolvable frame kept as `[unknown]`), and identical stacks share
//!   one session-wide id whose `StackDef` is written once, lazily, like a
//!   cookie definition ([`StackStats`] documents the table's memory bound).
//!   With DWARF call graphs (`Layout::user_stack`), a sample's copied
//!   user registers and stack are unwound right here (`unwind`, with
//!   framehop and each binary's `.eh_frame`/`.debug_frame`, read once per
//!   session and checked first; a binary with neither takes the
//!   `.debug_frame` of its separate debug file, found by build-id through
//!   [`DebugFrameSources`]) into return addresses that resolve like
//!   frame-pointer ones; the stack bytes never leave the stage
//!   ([`UnwindStats`]).
//! - [`EventBuffer`]: the bounded in-memory global event buffer between the
//!   sync stage (producer, never blocks) and the writer thread (consumer),
//!   and [`Recorder`], which ties rings, stage, buffer and writer together
//!   for the daemon, and closes one part of a rotated session and starts
//!   the next without stopping the rings ([`Recorder::rotate`],
//!   [`SyncStage::new_part`], [`ChunkSink::rotate`]).
//!
//! # Design constraints
//!
//! - Works the same on real rings and on `SimRing` (generic over
//!   [`profkit_perf::RecordRing`]); everything below the rings is testable
//!   without a kernel.
//! - The producer never blocks on the disk: a full event buffer drops the
//!   round's samples into a named counter (lost to overflow) and writes a
//!   LOST marker where space returned; nothing is silently lost.
//! - No `unsafe`; no I/O on the hot path except first sight of an unknown
//!   process (one `/proc/PID/maps` read) or binary (one build-id read), and
//!   none at all with the [`NullProbe`] (tests, imports): everything the
//!   stage reads from the machine goes through one [`HostProbe`]
//!   ([`ProcfsProbe`] for live sessions, [`SyncStage::with_probe`]).
//! - Paths in records are names users control: a binary's build-id is read
//!   through [`binfile`] (the mapped file itself, no symlinks, no blocking,
//!   at most 100 ms on a worker), so no user can stall or redirect the
//!   stage.
//! - The no-call-graph path pays nothing for call graphs (one predictable
//!   branch per sample): ≥ 20 M samples/s per core on the sync bench.
//!
//! # Example
//!
//! ```
//! use profkit_perf::{Layout, SimRecord, SimRing};
//! use profkit_sync::{SyncOptions, SyncStage};
//!
//! let layout = Layout { callchain: false, user_stack: 0,     cgroup: false, };
//! let mut stage = SyncStage::new(SyncOptions::new(layout));
//! let mut rings = vec![SimRing::new(0, 4096, layout)];
//! rings[0].push(&SimRecord::Mmap2 {
//!     pid: 10, tid: 10, addr: 0x400000, len: 0x1000, pgoff: 0, ino: 5, build_id: None,
//!     prot: 5, filename: "/bin/x".into(), time: 1,
//! });
//! rings[0].push(&SimRecord::Sample {
//!     ip: 0x400123, pid: 10, tid: 10, time: 2, kernel: false, period: 1, callchain: vec![],
//! });
//! let chunk = stage.round(&mut rings, 3);
//! assert_eq!(chunk.samples(), 1);
//! let mut offsets = Vec::new();
//! profkit_eventlog::for_each_sample(&chunk.bytes, |s| offsets.push(s.offset), |_| {}).unwrap();
//! assert_eq!(offsets, [0x123]);
//! ```
//!
//! # Not for
//!
//! Opening events (profkit-perf), the file format and cookie derivation
//! (profkit-eventlog), reading perf.data (profkit-import), symbol names
//! (profkit-symbols), or the daemon's process life (profkit-daemon).
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod binfile;
mod buffer;
mod cfi_check;
mod cgroups;
mod cookies;
mod error;
mod jit;
mod kernel;
mod probe;
mod process;
mod procfs;
pub mod reach;
mod recorder;
mod stacks;
mod stage;
mod unwind;

/// The resolution the sync stage writes sample times in (ns per tick of
/// the chunk's `TimeUnit`): see docs/FORMAT.md, "Sample times", for the
/// bytes per sample each resolution costs on real recordings.
pub const SAMPLE_TIME_UNIT_NS: u64 = 100;

pub use buffer::{BufferState, ChunkSink, EventBuffer, FileSink, NextPart, Rotated};
pub use cgroups::MAX_CGROUPS;
pub use cookies::{
    anon_cookie, build_id_cookie, build_id_from_notes, cookie_hash, file_entry, inode_cookie,
    read_build_id, unknown_entry, vdso_cookie, CookieTable,
};
pub use error::{Error, Result};
pub use jit::{
    is_jitdump_path, JitStats, JIT_EXIT_ROUNDS, JIT_MAX_DUMPS, JIT_MAX_DUMP_BYTES,
    JIT_MAX_FUNCTIONS, JIT_MAX_HELD_BYTES, JIT_MAX_MARKER_BYTES, JIT_MAX_MARKER_BYTES_PER_DUMP,
    JIT_MAX_PENDING_HITS, JIT_READ_AT_END, JIT_READ_PER_CALL, JIT_READ_PER_ROUND, JIT_READ_TIME,
    JIT_READ_TIME_AT_END,
};
pub use kernel::{kernel_entry, module_entry, KernelMaps, LoadedModule};
pub use probe::{HostProbe, ImportProbe, MappedFile, NullProbe, Probed, ProcfsProbe};
pub use process::{
    IntMap, Map, MapKind, Process, ProcessTable, UnattributedSample, Unresolved,
    UNATTRIBUTED_EXAMPLES,
};
pub use procfs::{
    dev_number, parse_kernel_text, parse_maps, parse_modules, read_all_processes, read_process,
    KernelModule, ProcMap, ProcPaths, ProcProcess,
};
pub use recorder::{
    Recorder, RecorderOptions, RecorderStatus, RingSource, SimOffCpuRings, SimRings,
};
pub use stacks::{
    resolve_chain, ChainInfo, StackStats, DEFAULT_STACK_TABLE_BYTES, MAX_STACK_FRAMES,
};
pub use stage::{
    Chunk, OffCpuSizes, SyncOptions, SyncStage, TableSizes, HORIZON_MARGIN_NS, MAX_OPEN,
    MAX_PENDING,
};
pub use unwind::{
    DebugFrameSources, FetchDebugFile, UnwindStats, CFI_FIRST_WAIT, CFI_ROUND_WAIT, CFI_TIMEOUT,
    DEFAULT_FETCH_TIMEOUT, DEMOTE_AFTER, DEMOTE_FRAME_COST, MAX_CFI_HELD, MAX_CFI_SECTION,
    MAX_DEBUG_FILE_BYTES, SYSTEM_DEBUG_DIR, UNWIND_ROUND_BUDGET, WINDOW_FRAMES, WINDOW_MISSES,
};
