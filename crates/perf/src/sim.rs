//! `SimRing`: an in-memory ring that follows the kernel's producer protocol,
//! for deterministic tests and benchmarks of everything downstream.
//!
//! The producer writes whole records at `head`, wrapping at the end of a
//! power-of-two buffer, and never onto unread data: when a record does not
//! fit it is dropped and counted. When space returns, the next write first
//! emits a `PERF_RECORD_LOST` carrying the count, as the kernel's
//! `perf_output_begin` does (and as MAGNeT's `MAGNET_LOST` did), so the
//! loss appears at its chronological place. `dropped()` is the counterpart of
//! the kernel's `PERF_FORMAT_LOST` read-back.

use crate::encode::{SampleParts, UserParts};
use crate::record::{misc, Comm, FileId, Layout, Mmap, Record, SampleId, Task};
use crate::ring::{split, walk, ReadStats, RecordRing};
use crate::RawRecord;

/// An owned record a test or benchmark can feed into a [`SimRing`] (or
/// encode to the exact bytes the kernel would write in profkit's layout).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SimRecord {
    /// A sample.
    Sample {
        /// Instruction pointer.
        ip: u64,
        /// Process id.
        pid: u32,
        /// Thread id.
        tid: u32,
        /// Time.
        time: u64,
        /// Kernel-mode sample.
        kernel: bool,
        /// Period.
        period: u64,
        /// Callchain entries (only encoded when the layout has callchains).
        callchain: Vec<u64>,
    },
    /// A user-mode sample with its user registers and stack bytes (encoded
    /// as such when the layout copies user stacks, [`Layout::user_stack`];
    /// else like [`SimRecord::Sample`]).
    UserSample {
        /// Instruction pointer (also the IP register).
        ip: u64,
        /// Process id.
        pid: u32,
        /// Thread id.
        tid: u32,
        /// Time.
        time: u64,
        /// Period.
        period: u64,
        /// Callchain entries (kernel part; only with a callchain layout).
        callchain: Vec<u64>,
        /// Frame pointer.
        bp: u64,
        /// Stack pointer.
        sp: u64,
        /// Stack bytes from `sp` up: the first `layout.user_stack` are
        /// copied, and the kernel's `dyn_size` is how many of them exist.
        stack: Vec<u8>,
    },
    /// MMAP2 in the inode form (`build_id: None`) or build-id form.
    Mmap2 {
        /// Process id.
        pid: u32,
        /// Thread id.
        tid: u32,
        /// Start.
        addr: u64,
        /// Length.
        len: u64,
        /// File offset.
        pgoff: u64,
        /// Inode number (inode form).
        ino: u64,
        /// Build-id (build-id form).
        build_id: Option<Vec<u8>>,
        /// PROT_* bits.
        prot: u32,
        /// Path.
        filename: String,
        /// Time.
        time: u64,
    },
    /// COMM.
    Comm {
        /// Process id.
        pid: u32,
        /// Thread id.
        tid: u32,
        /// Name.
        comm: String,
        /// Caused by exec.
        exec: bool,
        /// Time.
        time: u64,
    },
    /// FORK.
    Fork {
        /// Child pid.
        pid: u32,
        /// Parent pid.
        ppid: u32,
        /// Child tid.
        tid: u32,
        /// Parent tid.
        ptid: u32,
        /// Time.
        time: u64,
    },
    /// EXIT.
    Exit {
        /// Pid.
        pid: u32,
        /// Parent pid.
        ppid: u32,
        /// Tid.
        tid: u32,
        /// Parent tid.
        ptid: u32,
        /// Time.
        time: u64,
    },
    /// THROTTLE / UNTHROTTLE.
    Throttle {
        /// THROTTLE (true) or UNTHROTTLE.
        throttled: bool,
        /// Time.
        time: u64,
    },
    /// SWITCH_CPU_WIDE.
    Switch {
        /// Switch-out.
        out: bool,
        /// Next/prev pid.
        pid: u32,
        /// Next/prev tid.
        tid: u32,
        /// Time.
        time: u64,
    },
    /// SWITCH (a task-bound event's, as `--off-cpu` of a process writes
    /// it, and as CPU-wide records look to profkit): task `pid`/`tid`
    /// switched out (by preemption when `preempt`) or in.
    TaskSwitch {
        /// Switch-out.
        out: bool,
        /// Switched out while runnable.
        preempt: bool,
        /// Process id of the task switching.
        pid: u32,
        /// Thread id of the task switching.
        tid: u32,
        /// Time.
        time: u64,
    },
    /// KSYMBOL.
    Ksymbol {
        /// Address.
        addr: u64,
        /// Length.
        len: u32,
        /// Name.
        name: String,
        /// Time.
        time: u64,
    },
    /// A sample ([`SimRecord::Sample`] or [`SimRecord::UserSample`]) taken
    /// in cgroup `cgroup`: with [`Layout::cgroup`] its id ends the sample
    /// (other samples give 0 there); without, just the sample.
    CgroupSample {
        /// The sample.
        sample: Box<SimRecord>,
        /// The cgroup id.
        cgroup: u64,
    },
    /// CGROUP (`PERF_RECORD_CGROUP`): a cgroup was created.
    Cgroup {
        /// Cgroup id.
        id: u64,
        /// Path from the hierarchy's root.
        path: String,
        /// Time.
        time: u64,
    },
    /// A record type profkit does not know (to test that it is skipped).
    Unknown {
        /// Header type.
        kind: u32,
        /// Body length (multiple of 8).
        len: usize,
    },
}

impl SimRecord {
    /// The time this record carries (for LOST records written before it).
    pub fn time(&self) -> u64 {
        match self {
            SimRecord::Sample { time, .. }
            | SimRecord::UserSample { time, .. }
            | SimRecord::Mmap2 { time, .. }
            | SimRecord::Comm { time, .. }
            | SimRecord::Fork { time, .. }
            | SimRecord::Exit { time, .. }
            | SimRecord::Throttle { time, .. }
            | SimRecord::Switch { time, .. }
            | SimRecord::TaskSwitch { time, .. }
            | SimRecord::Ksymbol { time, .. }
            | SimRecord::Cgroup { time, .. } => *time,
            SimRecord::CgroupSample { sample, .. } => sample.time(),
            SimRecord::Unknown { .. } => 0,
        }
    }

    /// Encodes the record as the kernel would for CPU `cpu` in `layout`:
    /// `(type, misc, body)`, body padded to a multiple of 8.
    pub fn encode(&self, cpu: u32, layout: Layout) -> (u32, u16, Vec<u8>) {
        let mut v = Vec::with_capacity(64);
        let (k, m) = self.encode_as(cpu, layout, 0, &mut v);
        (k, m, v)
    }

    /// The record through [`Layout::encode`] / [`Layout::encode_sample`],
    /// a sample with cgroup id `cgroup`.
    fn encode_as(&self, cpu: u32, layout: Layout, cgroup: u64, v: &mut Vec<u8>) -> (u32, u16) {
        let at = |pid, tid, time| SampleId {
            pid,
            tid,
            time,
            cpu,
        };
        let rec = match self {
            SimRecord::Sample {
                ip,
                pid,
                tid,
                time,
                kernel,
                period,
                callchain,
            } => {
                let s = SampleParts {
                    ip: *ip,
                    pid: *pid,
                    tid: *tid,
                    time: *time,
                    cpu,
                    period: *period,
                    cpumode: if *kernel { misc::KERNEL } else { misc::USER },
                    cgroup,
                    // No user context: no registers, no stack copied.
                    user: UserParts::default(),
                };
                return layout.encode_sample(&s, callchain.iter().copied(), v);
            }
            SimRecord::UserSample {
                ip,
                pid,
                tid,
                time,
                period,
                callchain,
                bp,
                sp,
                stack,
            } => {
                let s = SampleParts {
                    ip: *ip,
                    pid: *pid,
                    tid: *tid,
                    time: *time,
                    cpu,
                    period: *period,
                    cpumode: misc::USER,
                    cgroup,
                    user: UserParts {
                        regs: Some((2, [*bp, *sp, *ip])), // PERF_SAMPLE_REGS_ABI_64
                        stack: Some(stack),
                        fill: 0xee, // stale bytes past dyn_size
                    },
                };
                return layout.encode_sample(&s, callchain.iter().copied(), v);
            }
            SimRecord::Mmap2 {
                pid,
                tid,
                addr,
                len,
                pgoff,
                ino,
                build_id,
                prot,
                filename,
                time,
            } => Record::Mmap(Mmap {
                pid: *pid,
                tid: *tid,
                addr: *addr,
                len: *len,
                pgoff: *pgoff,
                file_id: Some(match build_id {
                    Some(b) => FileId::BuildId(b),
                    None => FileId::Inode {
                        maj: 8,
                        min: 1,
                        ino: *ino,
                        generation: 0,
                    },
                }),
                prot: *prot,
                flags: libc::MAP_PRIVATE as u32,
                filename: filename.as_bytes(),
                misc: misc::USER,
                id: at(*pid, *tid, *time),
            }),
            SimRecord::Comm {
                pid,
                tid,
                comm,
                exec,
                time,
            } => Record::Comm(Comm {
                pid: *pid,
                tid: *tid,
                comm: comm.as_bytes(),
                exec: *exec,
                id: at(*pid, *tid, *time),
            }),
            SimRecord::Fork {
                pid,
                ppid,
                tid,
                ptid,
                time,
            }
            | SimRecord::Exit {
                pid,
                ppid,
                tid,
                ptid,
                time,
            } => {
                let t = Task {
                    pid: *pid,
                    ppid: *ppid,
                    tid: *tid,
                    ptid: *ptid,
                    time: *time,
                    id: at(*pid, *tid, *time),
                };
                if matches!(self, SimRecord::Fork { .. }) {
                    Record::Fork(t)
                } else {
                    Record::Exit(t)
                }
            }
            SimRecord::Throttle { throttled, time } => Record::Throttle {
                throttled: *throttled,
                time: *time,
                id: 0,
                sid: at(0, 0, *time),
            },
            SimRecord::Switch {
                out,
                pid,
                tid,
                time,
            } => Record::Switch {
                out: *out,
                preempt: false,
                next_prev: Some((*pid, *tid)),
                sid: at(0, 0, *time),
            },
            SimRecord::TaskSwitch {
                out,
                preempt,
                pid,
                tid,
                time,
            } => Record::Switch {
                out: *out,
                preempt: *preempt,
                next_prev: None,
                sid: at(*pid, *tid, *time),
            },
            SimRecord::Ksymbol {
                addr,
                len,
                name,
                time,
            } => Record::Ksymbol {
                addr: *addr,
                len: *len,
                ksym_type: 1, // PERF_RECORD_KSYMBOL_TYPE_BPF
                flags: 0,
                name: name.as_bytes(),
                sid: at(0, 0, *time),
            },
            SimRecord::Cgroup { id, path, time } => Record::Cgroup {
                id: *id,
                path: path.as_bytes(),
                sid: at(0, 0, *time),
            },
            SimRecord::CgroupSample { sample, cgroup } => {
                return sample.encode_as(cpu, layout, *cgroup, v);
            }
            SimRecord::Unknown { kind, len } => {
                v.resize(v.len() + len / 8 * 8, 0);
                return (*kind, 0);
            }
        };
        layout.encode(&rec, v)
    }
}

/// Size of the LOST record the producer writes (header + id + lost + trailer).
pub const LOST_RECORD_SIZE: usize = 8 + 16 + Layout::TRAILER;

/// An in-memory ring with the kernel's producer protocol. See the module docs.
#[derive(Debug, Clone)]
pub struct SimRing {
    cpu: u32,
    layout: Layout,
    buf: Vec<u8>,
    head: u64,
    tail: u64,
    pending_lost: u64,
    dropped: u64,
    lost_records: u64,
    now: u64,
    scratch: Vec<u8>,
}

impl SimRing {
    /// A ring of `size` bytes (a power of two, at least 64) for CPU `cpu`.
    ///
    /// # Panics
    /// If `size` is not a power of two or is below 64 (a test-setup bug).
    pub fn new(cpu: u32, size: usize, layout: Layout) -> Self {
        assert!(
            size.is_power_of_two() && size >= 64,
            "SimRing size must be a power of two >= 64"
        );
        Self {
            cpu,
            layout,
            buf: vec![0; size],
            head: 0,
            tail: 0,
            pending_lost: 0,
            dropped: 0,
            lost_records: 0,
            now: 0,
            scratch: Vec::new(),
        }
    }

    /// Records dropped for lack of space so far (the `PERF_FORMAT_LOST` count).
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// Dropped records not yet announced by a LOST record.
    pub fn pending_lost(&self) -> u64 {
        self.pending_lost
    }

    /// LOST records written so far.
    pub fn lost_records(&self) -> u64 {
        self.lost_records
    }

    fn free(&self) -> usize {
        self.buf.len() - (self.head - self.tail) as usize
    }

    fn write_bytes(&mut self, bytes: &[u8]) {
        let size = self.buf.len();
        let start = (self.head as usize) & (size - 1);
        let first = bytes.len().min(size - start);
        self.buf[start..start + first].copy_from_slice(&bytes[..first]);
        self.buf[..bytes.len() - first].copy_from_slice(&bytes[first..]);
        self.head += bytes.len() as u64;
    }

    fn write_record(&mut self, kind: u32, misc: u16, body: &[u8]) {
        let mut hdr = [0u8; 8];
        hdr[..4].copy_from_slice(&kind.to_ne_bytes());
        hdr[4..6].copy_from_slice(&misc.to_ne_bytes());
        hdr[6..8].copy_from_slice(&((8 + body.len()) as u16).to_ne_bytes());
        self.write_bytes(&hdr);
        self.write_bytes(body);
    }

    /// Produces one record (type, misc, body; body a multiple of 8 bytes).
    /// Returns false if it was dropped for lack of space.
    pub fn push_raw(&mut self, kind: u32, misc: u16, body: &[u8]) -> bool {
        debug_assert!(body.len() % 8 == 0);
        let need = 8 + body.len();
        let lost_need = if self.pending_lost > 0 {
            LOST_RECORD_SIZE
        } else {
            0
        };
        if need + lost_need > self.free() || need > u16::MAX as usize {
            self.pending_lost += 1;
            self.dropped += 1;
            return false;
        }
        if self.pending_lost > 0 {
            let lost = Record::Lost {
                id: 0,
                lost: self.pending_lost,
                sid: SampleId {
                    pid: 0,
                    tid: 0,
                    time: self.now,
                    cpu: self.cpu,
                },
            };
            let mut v = Vec::with_capacity(40);
            let (k, m) = self.layout.encode(&lost, &mut v);
            self.write_record(k, m, &v);
            self.pending_lost = 0;
            self.lost_records += 1;
        }
        self.write_record(kind, misc, body);
        true
    }

    /// Produces one record. Returns false if it was dropped for lack of space.
    pub fn push(&mut self, rec: &SimRecord) -> bool {
        self.now = self.now.max(rec.time());
        let (k, m, body) = rec.encode(self.cpu, self.layout);
        self.push_raw(k, m, &body)
    }
}

impl RecordRing for SimRing {
    fn cpu(&self) -> u32 {
        self.cpu
    }

    fn data_size(&self) -> usize {
        self.buf.len()
    }

    fn pending(&self) -> usize {
        (self.head - self.tail) as usize
    }

    fn read_records<F: FnMut(RawRecord<'_>) -> bool>(&mut self, f: F) -> ReadStats {
        let (start, first, second) = split(self.tail, self.head, self.buf.len());
        let stats = walk(
            &self.buf[start..start + first],
            &self.buf[..second],
            &mut self.scratch,
            f,
        );
        self.tail += stats.bytes;
        stats
    }
}
