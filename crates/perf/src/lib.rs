//! Per-CPU perf sample rings: opening events, mapping rings, and draining
//! them with the kernel's head/tail protocol.
//!
//! This crate owns the first stage of profkit's pipeline (OProfile's per-CPU
//! sample buffers, moved onto `perf_event_open`):
//!
//! - [`SamplerConfig`] / [`EventSpec`]: a validated description of what to
//!   sample (event, frequency or period, target, exclusions, callchains,
//!   and for DWARF unwinding a copy of the user registers and stack:
//!   `user_stack`, [`USER_REGS_MASK`]; parsed as [`Sample::user`]).
//! - [`Sampler`]: one event per online CPU (per CPU and process with
//!   `-p`), opened disabled and enabled together, each with its own mmap
//!   ring ([`PerfRing`]); lost counts read back with `PERF_FORMAT_LOST`.
//! - [`ring_plan`]: how large each CPU's ring is ([`RingPlan`]), from
//!   the CPUs, the rate, what a sample carries ([`RingMode`]) and the
//!   locked-memory limit ([`LockLimit`]: `perf_event_mlock_kb` per CPU, or
//!   [`ROOT_LOCK_BUDGET`] for a user the kernel does not limit); a plan
//!   that would drain more often than every [`MIN_DRAIN_MS`] is refused
//!   with what to raise.
//! - [`CpuTopology`], [`online_cpus_in`]: the CPUs sysfs lists, under a
//!   root a test can fake (`online`, `possible`).
//! - [`RecordRing`]: the consumer API shared by [`PerfRing`] and
//!   [`SimRing`], handing out whole records and advancing the tail only past
//!   what the caller consumed.
//! - [`Layout::parse`]: typed records ([`Record`]) for every type the kernel
//!   sends with our attributes; [`Layout::encode`] (and
//!   [`Layout::encode_sample`] from a writer's [`SampleParts`]) its
//!   inverse, the one writer of the layout ([`SimRing`], `profkit-import`).
//! - [`explain_open_error`] and friends: errno translated into cause + fix.
//!
//! # Design constraints
//!
//! - This is the only profkit crate with `unsafe`. All of it is in
//!   `sampler.rs` (syscalls, ioctls, the mapped control page),
//!   `error.rs` (`sysconf`, `clock_gettime`), `cgroup.rs` (`statfs`) and `malloc.rs`
//!   ([`return_freed_blocks`]: glibc's `mallopt`, for the report binary,
//!   which may not hold `unsafe` itself); every block has a `// SAFETY:` note and every
//!   access to `data_head`/`data_tail` an `// ATOMICS:` note naming the
//!   kernel barrier it pairs with.
//! - Non-overwrite rings only (writable mapping): the kernel never writes over
//!   unread data, it drops and counts instead, and tells us with a LOST
//!   record where space returned.
//! - Parsing never panics on malformed input: a short record is an error the
//!   caller counts; an impossible header ends the drain and is reported.
//! - Record parsing is hand-written for the one layout we request (fixed
//!   offsets); `benches/parse.rs` compares it with `linux-perf-event-reader`
//!   (see docs/ARCHITECTURE.md for the figures and the decision).
//!
//! # Example
//!
//! ```
//! use profkit_perf::{Layout, Record, RecordRing, SimRecord, SimRing};
//!
//! let layout = Layout { callchain: false, user_stack: 0,     cgroup: false, };
//! let mut ring = SimRing::new(0, 4096, layout);
//! ring.push(&SimRecord::Sample {
//!     ip: 0x401000, pid: 7, tid: 7, time: 1, kernel: false, period: 1, callchain: vec![],
//! });
//! let mut ips = Vec::new();
//! ring.read_records(|raw| {
//!     if let Ok(Record::Sample(s)) = layout.parse(raw) {
//!         ips.push(s.ip);
//!     }
//!     true
//! });
//! assert_eq!(ips, [0x401000]);
//! assert_eq!(ring.pending(), 0);
//! ```
//!
//! # Not for
//!
//! Counting mode, hardware tracing (AUX), BPF, or overwrite (flight
//! recorder) rings; and not for merging CPUs or resolving addresses — that is
//! `profkit-sync`.
#![deny(missing_docs)]

mod cgroup;
mod config;
mod encode;
mod error;
mod malloc;
mod plan;
mod record;
mod ring;
mod sampler;
mod sim;

pub use cgroup::{
    cgroup2_mount, cgroup2_mount_in, cgroup_dir, is_cgroup2_dir, CgroupRecording,
    CGROUP2_SUPER_MAGIC,
};
pub use config::{
    format_cpu_list, online_cpus, online_cpus_in, parse_cpu_list, CpuTopology, EventSpec, Rate,
    SamplerConfig, Target, DEFAULT_DATA_PAGES, KNOWN_EVENTS, MAX_USER_STACK, SYSFS_CPU_DIR,
};
pub use encode::{SampleParts, UserParts};
pub use error::{
    explain_mmap_error, explain_open_error, monotonic_ns, page_size, read_sysctl, Error,
    OpenContext, Result,
};
pub use malloc::{return_freed_blocks, MAPPED_APART_FROM};
pub use plan::{
    ring_plan, LockLimit, RingMode, RingNeed, RingPlan, RingReason, DEFAULT_MLOCK_KB,
    DWARF_SAMPLE_OVERHEAD, FLAT_SAMPLE_BYTES, FP_FRAMES, MAX_RING_BYTES, MIN_DRAIN_MS,
    ROOT_LOCK_BUDGET,
};
pub use record::{
    kind, misc, Callchain, Comm, FileId, Layout, Mmap, ParseError, RawRecord, Record, Sample,
    SampleId, Task, UserStack, PERF_CONTEXT_KERNEL, PERF_CONTEXT_MAX, PERF_CONTEXT_USER,
    USER_REGS_MASK,
};
pub use ring::{ReadStats, RecordRing};
pub use sampler::{kernel_samples_cgroups, PerfRing, Sampler};
pub use sim::{SimRecord, SimRing, LOST_RECORD_SIZE};
