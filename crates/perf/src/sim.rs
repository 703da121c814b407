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

use crate::record::{kind, misc, Layout};
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

fn push_u32(v: &mut Vec<u8>, x: u32) {
    v.extend_from_slice(&x.to_ne_bytes());
}
fn push_u64(v: &mut Vec<u8>, x: u64) {
    v.extend_from_slice(&x.to_ne_bytes());
}
fn push_str_padded(v: &mut Vec<u8>, s: &str) {
    v.extend_from_slice(s.as_bytes());
    v.push(0);
    while v.len() % 8 != 0 {
        v.push(0);
    }
}
fn push_trailer(v: &mut Vec<u8>, pid: u32, tid: u32, time: u64, cpu: u32) {
    push_u32(v, pid);
    push_u32(v, tid);
    push_u64(v, time);
    push_u32(v, cpu);
    push_u32(v, 0);
}

/// The fields every sample starts with in profkit's layout, and its
/// callchain when the layout has one.
fn sample_prefix(
    v: &mut Vec<u8>,
    cpu: u32,
    layout: Layout,
    (ip, pid, tid, time, period): (u64, u32, u32, u64, u64),
    callchain: &[u64],
) {
    push_u64(v, ip);
    push_u32(v, pid);
    push_u32(v, tid);
    push_u64(v, time);
    push_u32(v, cpu);
    push_u32(v, 0);
    push_u64(v, period);
    if layout.callchain {
        push_u64(v, callchain.len() as u64);
        for ip in callchain {
            push_u64(v, *ip);
        }
    }
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
            | SimRecord::Ksymbol { time, .. }
            | SimRecord::Cgroup { time, .. } => *time,
            SimRecord::CgroupSample { sample, .. } => sample.time(),
            SimRecord::Unknown { .. } => 0,
        }
    }

    /// Encodes the record as the kernel would for CPU `cpu` in `layout`:
    /// `(type, misc, body)`, body padded to a multiple of 8.
    pub fn encode(&self, cpu: u32, layout: Layout) -> (u32, u16, Vec<u8>) {
        let (cgroup, rec) = match self {
            SimRecord::CgroupSample { sample, cgroup } => (*cgroup, &**sample),
            other => (0, other),
        };
        let (k, m, mut v) = rec.encode_inner(cpu, layout);
        if k == kind::SAMPLE && layout.cgroup {
            push_u64(&mut v, cgroup);
        }
        (k, m, v)
    }

    fn encode_inner(&self, cpu: u32, layout: Layout) -> (u32, u16, Vec<u8>) {
        let mut v = Vec::with_capacity(64);
        match self {
            SimRecord::Sample {
                ip,
                pid,
                tid,
                time,
                kernel,
                period,
                callchain,
            } => {
                sample_prefix(
                    &mut v,
                    cpu,
                    layout,
                    (*ip, *pid, *tid, *time, *period),
                    callchain,
                );
                if layout.user_stack > 0 {
                    push_u64(&mut v, 0); // PERF_SAMPLE_REGS_ABI_NONE: no user context
                    push_u64(&mut v, 0); // no stack copied
                }
                let m = if *kernel { misc::KERNEL } else { misc::USER };
                (kind::SAMPLE, m, v)
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
                sample_prefix(
                    &mut v,
                    cpu,
                    layout,
                    (*ip, *pid, *tid, *time, *period),
                    callchain,
                );
                if layout.user_stack > 0 {
                    push_u64(&mut v, 2); // PERF_SAMPLE_REGS_ABI_64
                    for r in [*bp, *sp, *ip] {
                        push_u64(&mut v, r); // USER_REGS_MASK, in bit order
                    }
                    let size = layout.user_stack as usize;
                    push_u64(&mut v, size as u64);
                    let n = stack.len().min(size);
                    v.extend_from_slice(&stack[..n]);
                    v.resize(v.len() + size - n, 0xee); // stale bytes past dyn_size
                    push_u64(&mut v, n as u64);
                }
                (kind::SAMPLE, misc::USER, v)
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
            } => {
                push_u32(&mut v, *pid);
                push_u32(&mut v, *tid);
                push_u64(&mut v, *addr);
                push_u64(&mut v, *len);
                push_u64(&mut v, *pgoff);
                let mut m = misc::USER;
                match build_id {
                    Some(b) => {
                        let n = b.len().min(20);
                        v.push(n as u8);
                        v.extend_from_slice(&[0, 0, 0]);
                        let mut id = [0u8; 20];
                        id[..n].copy_from_slice(&b[..n]);
                        v.extend_from_slice(&id);
                        m |= misc::MMAP_BUILD_ID;
                    }
                    None => {
                        push_u32(&mut v, 8);
                        push_u32(&mut v, 1);
                        push_u64(&mut v, *ino);
                        push_u64(&mut v, 0);
                    }
                }
                push_u32(&mut v, *prot);
                push_u32(&mut v, libc::MAP_PRIVATE as u32);
                push_str_padded(&mut v, filename);
                push_trailer(&mut v, *pid, *tid, *time, cpu);
                (kind::MMAP2, m, v)
            }
            SimRecord::Comm {
                pid,
                tid,
                comm,
                exec,
                time,
            } => {
                push_u32(&mut v, *pid);
                push_u32(&mut v, *tid);
                push_str_padded(&mut v, comm);
                push_trailer(&mut v, *pid, *tid, *time, cpu);
                (kind::COMM, if *exec { misc::COMM_EXEC } else { 0 }, v)
            }
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
                push_u32(&mut v, *pid);
                push_u32(&mut v, *ppid);
                push_u32(&mut v, *tid);
                push_u32(&mut v, *ptid);
                push_u64(&mut v, *time);
                push_trailer(&mut v, *pid, *tid, *time, cpu);
                let k = if matches!(self, SimRecord::Fork { .. }) {
                    kind::FORK
                } else {
                    kind::EXIT
                };
                (k, 0, v)
            }
            SimRecord::Throttle { throttled, time } => {
                push_u64(&mut v, *time);
                push_u64(&mut v, 0);
                push_u64(&mut v, 0);
                push_trailer(&mut v, 0, 0, *time, cpu);
                (
                    if *throttled {
                        kind::THROTTLE
                    } else {
                        kind::UNTHROTTLE
                    },
                    0,
                    v,
                )
            }
            SimRecord::Switch {
                out,
                pid,
                tid,
                time,
            } => {
                push_u32(&mut v, *pid);
                push_u32(&mut v, *tid);
                push_trailer(&mut v, 0, 0, *time, cpu);
                (
                    kind::SWITCH_CPU_WIDE,
                    if *out { misc::SWITCH_OUT } else { 0 },
                    v,
                )
            }
            SimRecord::Ksymbol {
                addr,
                len,
                name,
                time,
            } => {
                push_u64(&mut v, *addr);
                push_u32(&mut v, *len);
                v.extend_from_slice(&1u16.to_ne_bytes());
                v.extend_from_slice(&0u16.to_ne_bytes());
                push_str_padded(&mut v, name);
                push_trailer(&mut v, 0, 0, *time, cpu);
                (kind::KSYMBOL, misc::KERNEL, v)
            }
            SimRecord::Cgroup { id, path, time } => {
                push_u64(&mut v, *id);
                push_str_padded(&mut v, path);
                push_trailer(&mut v, 0, 0, *time, cpu);
                (kind::CGROUP, 0, v)
            }
            SimRecord::CgroupSample { sample, .. } => sample.encode_inner(cpu, layout),
            SimRecord::Unknown { kind, len } => (*kind, 0, vec![0; len / 8 * 8]),
        }
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
            let mut v = Vec::with_capacity(40);
            push_u64(&mut v, 0);
            push_u64(&mut v, self.pending_lost);
            push_trailer(&mut v, 0, 0, self.now, self.cpu);
            self.write_record(kind::LOST, 0, &v);
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
