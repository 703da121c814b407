//! Parsing of the records the kernel writes into a ring, for the one layout
//! profkit asks for (see [`Layout`]).
//!
//! The parser reads fixed offsets: with `sample_type = IP | TID | TIME | CPU |
//! PERIOD [| CALLCHAIN]` and `sample_id_all`, every field's position is known,
//! so a sample is a handful of bounds-checked loads (see the `parse` bench for
//! the comparison with `linux-perf-event-reader`). A record too short for its
//! type is an error the caller counts and skips; it never panics.

use perf_event_open_sys::bindings as b;

/// `perf_event_header.type` values this parser understands.
pub mod kind {
    use super::b;
    /// `PERF_RECORD_MMAP`.
    pub const MMAP: u32 = b::PERF_RECORD_MMAP;
    /// `PERF_RECORD_LOST`.
    pub const LOST: u32 = b::PERF_RECORD_LOST;
    /// `PERF_RECORD_COMM`.
    pub const COMM: u32 = b::PERF_RECORD_COMM;
    /// `PERF_RECORD_EXIT`.
    pub const EXIT: u32 = b::PERF_RECORD_EXIT;
    /// `PERF_RECORD_THROTTLE`.
    pub const THROTTLE: u32 = b::PERF_RECORD_THROTTLE;
    /// `PERF_RECORD_UNTHROTTLE`.
    pub const UNTHROTTLE: u32 = b::PERF_RECORD_UNTHROTTLE;
    /// `PERF_RECORD_FORK`.
    pub const FORK: u32 = b::PERF_RECORD_FORK;
    /// `PERF_RECORD_SAMPLE`.
    pub const SAMPLE: u32 = b::PERF_RECORD_SAMPLE;
    /// `PERF_RECORD_MMAP2`.
    pub const MMAP2: u32 = b::PERF_RECORD_MMAP2;
    /// `PERF_RECORD_LOST_SAMPLES`.
    pub const LOST_SAMPLES: u32 = b::PERF_RECORD_LOST_SAMPLES;
    /// `PERF_RECORD_SWITCH`.
    pub const SWITCH: u32 = b::PERF_RECORD_SWITCH;
    /// `PERF_RECORD_SWITCH_CPU_WIDE`.
    pub const SWITCH_CPU_WIDE: u32 = b::PERF_RECORD_SWITCH_CPU_WIDE;
    /// `PERF_RECORD_KSYMBOL`.
    pub const KSYMBOL: u32 = b::PERF_RECORD_KSYMBOL;
    /// `PERF_RECORD_CGROUP` (kernel 5.7+): a cgroup was created.
    pub const CGROUP: u32 = b::PERF_RECORD_CGROUP;
}

/// `misc` bits.
pub mod misc {
    use super::b;
    /// Mask of the CPU mode bits.
    pub const CPUMODE_MASK: u16 = b::PERF_RECORD_MISC_CPUMODE_MASK as u16;
    /// Sample taken in kernel mode.
    pub const KERNEL: u16 = b::PERF_RECORD_MISC_KERNEL as u16;
    /// Sample taken in user mode.
    pub const USER: u16 = b::PERF_RECORD_MISC_USER as u16;
    /// Hypervisor mode.
    pub const HYPERVISOR: u16 = b::PERF_RECORD_MISC_HYPERVISOR as u16;
    /// Guest kernel.
    pub const GUEST_KERNEL: u16 = b::PERF_RECORD_MISC_GUEST_KERNEL as u16;
    /// Guest user.
    pub const GUEST_USER: u16 = b::PERF_RECORD_MISC_GUEST_USER as u16;
    /// COMM record caused by exec.
    pub const COMM_EXEC: u16 = b::PERF_RECORD_MISC_COMM_EXEC as u16;
    /// Switch-out (for SWITCH records).
    pub const SWITCH_OUT: u16 = b::PERF_RECORD_MISC_SWITCH_OUT as u16;
    /// Switch-out by preemption.
    pub const SWITCH_OUT_PREEMPT: u16 = b::PERF_RECORD_MISC_SWITCH_OUT_PREEMPT as u16;
    /// MMAP2 carries a build-id instead of inode data.
    pub const MMAP_BUILD_ID: u16 = b::PERF_RECORD_MISC_MMAP_BUILD_ID as u16;
    /// MMAP of a data (non-executable) mapping.
    pub const MMAP_DATA: u16 = b::PERF_RECORD_MISC_MMAP_DATA as u16;
}

/// Callchain context markers (`PERF_CONTEXT_*`): values >= this are markers.
pub const PERF_CONTEXT_MAX: u64 = b::PERF_CONTEXT_MAX;
/// Callchain marker: following frames are kernel frames.
pub const PERF_CONTEXT_KERNEL: u64 = b::PERF_CONTEXT_KERNEL;
/// Callchain marker: following frames are user frames.
pub const PERF_CONTEXT_USER: u64 = b::PERF_CONTEXT_USER;

/// A record as it sits in the ring: header fields and the body after the
/// 8-byte `perf_event_header`. A record that wrapped the end of the ring
/// arrives whole (copied into a scratch buffer).
#[derive(Debug, Clone, Copy)]
pub struct RawRecord<'a> {
    /// `perf_event_header.type`.
    pub kind: u32,
    /// `perf_event_header.misc`.
    pub misc: u16,
    /// The bytes after the header.
    pub body: &'a [u8],
}

/// The record layout profkit opens its events with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Layout {
    /// `PERF_SAMPLE_CALLCHAIN` is part of `sample_type`.
    pub callchain: bool,
    /// Bytes of user stack each sample copies, with the user registers an
    /// x86-64 unwinder needs ([`USER_REGS_MASK`]: bp, sp, ip): then
    /// `PERF_SAMPLE_REGS_USER` and `PERF_SAMPLE_STACK_USER` are part of
    /// `sample_type`. 0: neither (frame-pointer call graphs or none).
    pub user_stack: u32,
    /// `PERF_SAMPLE_CGROUP` is part of `sample_type` (kernel 5.7+): each
    /// sample ends with the id of its task's cgroup v2 (the cgroup
    /// directory's inode number), and the events are opened with
    /// `attr.cgroup` for the `PERF_RECORD_CGROUP` id → path records.
    pub cgroup: bool,
}

/// `sample_regs_user` for DWARF unwinding on x86-64: BP, SP and IP (bits
/// 6, 7 and 8 of `arch/x86/include/uapi/asm/perf_regs.h`); a sample holds
/// them in bit order.
pub const USER_REGS_MASK: u64 = 1 << 6 | 1 << 7 | 1 << 8;

/// The user registers and stack bytes of a sample taken with
/// [`Layout::user_stack`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UserStack<'a> {
    /// The registers' ABI as the kernel gave it: 2 (`PERF_SAMPLE_REGS_ABI_64`)
    /// for a 64-bit task, 1 (`_32`) for a 32-bit one.
    pub abi: u64,
    /// Frame pointer (BP).
    pub bp: u64,
    /// Stack pointer (SP): `stack` starts here.
    pub sp: u64,
    /// Instruction pointer (IP).
    pub ip: u64,
    /// The stack from `sp` up, as far as the kernel could copy it (its
    /// `dyn_size`; bytes past it are stale and are not here).
    pub stack: &'a [u8],
}

impl Layout {
    /// Samples carry a call stack: a callchain, a copied user stack, or both.
    #[inline]
    pub fn has_stacks(&self) -> bool {
        self.callchain || self.user_stack > 0
    }

    /// `sample_type` bits for this layout.
    pub fn sample_type(&self) -> u64 {
        let mut t = (b::PERF_SAMPLE_IP
            | b::PERF_SAMPLE_TID
            | b::PERF_SAMPLE_TIME
            | b::PERF_SAMPLE_CPU
            | b::PERF_SAMPLE_PERIOD) as u64;
        if self.callchain {
            t |= b::PERF_SAMPLE_CALLCHAIN as u64;
        }
        if self.user_stack > 0 {
            t |= (b::PERF_SAMPLE_REGS_USER | b::PERF_SAMPLE_STACK_USER) as u64;
        }
        if self.cgroup {
            t |= b::PERF_SAMPLE_CGROUP as u64;
        }
        t
    }

    /// Length of the `sample_id_all` trailer of non-sample records:
    /// `{pid, tid}`, `time`, `{cpu, res}`.
    pub const TRAILER: usize = 24;
}

/// The `sample_id_all` trailer: who and when, for non-sample records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SampleId {
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// perf clock time, ns.
    pub time: u64,
    /// CPU the record was written on.
    pub cpu: u32,
}

/// A sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample<'a> {
    /// Instruction pointer.
    pub ip: u64,
    /// Process id (tgid).
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// perf clock time, ns.
    pub time: u64,
    /// CPU.
    pub cpu: u32,
    /// Event period this sample stands for.
    pub period: u64,
    /// `misc & CPUMODE_MASK`.
    pub cpumode: u16,
    /// The callchain, if the layout has one.
    pub callchain: Callchain<'a>,
    /// The user registers and stack part (checked; read with
    /// [`Sample::user`]): empty unless the layout copies user stacks.
    pub user_part: &'a [u8],
    /// The id of the task's cgroup (v2) with [`Layout::cgroup`], else 0
    /// (the kernel gives 0 too when it has no cgroup for the task).
    pub cgroup: u64,
}

impl<'a> Sample<'a> {
    /// The user registers and stack, if the layout copies them and the
    /// sample was taken with a user context (not in a kernel thread).
    /// (Kept as bytes in the record, checked by the parser and read here,
    /// so samples of other layouts stay as small as before.)
    pub fn user(&self) -> Option<UserStack<'a>> {
        if self.user_part.is_empty() {
            return None;
        }
        user_stack(self.user_part, 0).flatten()
    }

    /// True for samples taken in kernel (or guest kernel / hypervisor) mode.
    pub fn is_kernel(&self) -> bool {
        matches!(
            self.cpumode,
            misc::KERNEL | misc::HYPERVISOR | misc::GUEST_KERNEL
        )
    }
}

/// A callchain: `nr` u64 frames, context markers included, as the kernel wrote them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Callchain<'a>(&'a [u8]);

impl<'a> Callchain<'a> {
    /// Number of entries (markers included).
    pub fn len(&self) -> usize {
        self.0.len() / 8
    }
    /// True when there are no entries.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    /// The entries as the record holds them: `len()` native-endian u64s.
    pub(crate) fn as_bytes(&self) -> &'a [u8] {
        self.0
    }
    /// The entries in order (innermost first), markers included.
    pub fn iter(&self) -> impl Iterator<Item = u64> + 'a {
        self.0
            .chunks_exact(8)
            .map(|c| u64::from_ne_bytes(c.try_into().unwrap_or([0; 8])))
    }
}

/// How an MMAP2 record identifies the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileId<'a> {
    /// Device and inode (classic form).
    Inode {
        /// Major device number.
        maj: u32,
        /// Minor device number.
        min: u32,
        /// Inode number.
        ino: u64,
        /// Inode generation.
        generation: u64,
    },
    /// The file's GNU build-id (kernel 5.12+ with `build_id` set).
    BuildId(&'a [u8]),
}

/// A new mapping (MMAP2, or MMAP converted with unknown file id).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mmap<'a> {
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Start address.
    pub addr: u64,
    /// Length in bytes.
    pub len: u64,
    /// File offset of `addr`.
    pub pgoff: u64,
    /// File identity, when the record carries one.
    pub file_id: Option<FileId<'a>>,
    /// `PROT_*` bits (MMAP2 only; MMAP records are executable maps: `PROT_EXEC`).
    pub prot: u32,
    /// `MAP_*` bits.
    pub flags: u32,
    /// Path (without the NUL padding).
    pub filename: &'a [u8],
    /// The raw `misc` (kernel/user, data mapping).
    pub misc: u16,
    /// Trailer.
    pub id: SampleId,
}

/// COMM: a task's command name changed (exec or prctl).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Comm<'a> {
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// The new name (without NUL padding).
    pub comm: &'a [u8],
    /// True when caused by exec.
    pub exec: bool,
    /// Trailer.
    pub id: SampleId,
}

/// FORK or EXIT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Task {
    /// Process id.
    pub pid: u32,
    /// Parent process id.
    pub ppid: u32,
    /// Thread id.
    pub tid: u32,
    /// Parent thread id.
    pub ptid: u32,
    /// Time.
    pub time: u64,
    /// Trailer.
    pub id: SampleId,
}

/// A parsed record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Record<'a> {
    /// PERF_RECORD_SAMPLE.
    Sample(Sample<'a>),
    /// PERF_RECORD_MMAP2 (or MMAP).
    Mmap(Mmap<'a>),
    /// PERF_RECORD_COMM.
    Comm(Comm<'a>),
    /// PERF_RECORD_FORK.
    Fork(Task),
    /// PERF_RECORD_EXIT.
    Exit(Task),
    /// PERF_RECORD_LOST: the kernel dropped `lost` records for lack of space.
    Lost {
        /// Event id.
        id: u64,
        /// Number of records dropped.
        lost: u64,
        /// Trailer.
        sid: SampleId,
    },
    /// PERF_RECORD_THROTTLE / UNTHROTTLE.
    Throttle {
        /// True for THROTTLE, false for UNTHROTTLE.
        throttled: bool,
        /// Time.
        time: u64,
        /// Id of the event throttled.
        id: u64,
        /// Trailer.
        sid: SampleId,
    },
    /// PERF_RECORD_SWITCH / SWITCH_CPU_WIDE.
    Switch {
        /// Switch-out (true) or switch-in (false).
        out: bool,
        /// Switch-out by preemption.
        preempt: bool,
        /// For CPU-wide records, the next (on out) or previous (on in) task.
        next_prev: Option<(u32, u32)>,
        /// Trailer.
        sid: SampleId,
    },
    /// PERF_RECORD_KSYMBOL: a kernel symbol (BPF, out-of-line code) appeared or went.
    Ksymbol {
        /// Address.
        addr: u64,
        /// Length.
        len: u32,
        /// `PERF_RECORD_KSYMBOL_TYPE_*`.
        ksym_type: u16,
        /// Flags (bit 0: unregister).
        flags: u16,
        /// Name.
        name: &'a [u8],
        /// Trailer.
        sid: SampleId,
    },
    /// PERF_RECORD_CGROUP: a cgroup (v2) was created; its id (the inode
    /// number of its directory, as samples give it) and its path from the
    /// root of the cgroup v2 hierarchy (`/` for the root, `/a/b`).
    Cgroup {
        /// Cgroup id.
        id: u64,
        /// Path (without the NUL padding).
        path: &'a [u8],
        /// Trailer.
        sid: SampleId,
    },
    /// PERF_RECORD_LOST_SAMPLES (hardware samples lost, e.g. PEBS).
    LostSamples {
        /// Number lost.
        lost: u64,
        /// Trailer.
        sid: SampleId,
    },
    /// Any other type: skipped by callers, and counted.
    Unknown {
        /// The header type.
        kind: u32,
    },
}

/// A record too short for its type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("malformed perf record of type {kind}: body of {len} bytes is too short")]
pub struct ParseError {
    /// The header type.
    pub kind: u32,
    /// Body length.
    pub len: usize,
}

#[inline(always)]
fn u64_at(b: &[u8], off: usize) -> Option<u64> {
    Some(u64::from_ne_bytes(b.get(off..off + 8)?.try_into().ok()?))
}

#[inline(always)]
fn u32_at(b: &[u8], off: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(off..off + 4)?.try_into().ok()?))
}

#[inline(always)]
fn u16_at(b: &[u8], off: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(off..off + 2)?.try_into().ok()?))
}

fn cstr(b: &[u8]) -> &[u8] {
    match b.iter().position(|&c| c == 0) {
        Some(n) => &b[..n],
        None => b,
    }
}

/// The `PERF_SAMPLE_REGS_USER` and `PERF_SAMPLE_STACK_USER` parts of a
/// sample body from `at`: `abi`, then (abi not 0) the [`USER_REGS_MASK`]
/// registers; `size`, then (size not 0) `size` bytes and `dyn_size`.
/// `Some(None)` for a sample without a user context; `None` if malformed.
/// Out of line: the parser of every other layout stays as small as before.
#[inline(never)]
fn user_stack(body: &[u8], at: usize) -> Option<Option<UserStack<'_>>> {
    let abi = u64_at(body, at)?;
    let (regs, at) = if abi != 0 {
        let r = (
            u64_at(body, at + 8)?,
            u64_at(body, at + 16)?,
            u64_at(body, at + 24)?,
        );
        (Some(r), at + 32)
    } else {
        (None, at + 8)
    };
    let size = usize::try_from(u64_at(body, at)?).ok()?;
    let stack = if size > 0 {
        let data = body.get(at + 8..(at + 8).checked_add(size)?)?;
        let dyn_size = u64_at(body, at + 8 + size)?;
        &data[..usize::try_from(dyn_size).ok()?.min(size)]
    } else {
        &[]
    };
    Some(regs.map(|(bp, sp, ip)| UserStack {
        abi,
        bp,
        sp,
        ip,
        stack,
    }))
}

fn trailer(body: &[u8]) -> Option<(SampleId, &[u8])> {
    let n = body.len().checked_sub(Layout::TRAILER)?;
    let t = &body[n..];
    Some((
        SampleId {
            pid: u32_at(t, 0)?,
            tid: u32_at(t, 4)?,
            time: u64_at(t, 8)?,
            cpu: u32_at(t, 16)?,
        },
        &body[..n],
    ))
}

impl Layout {
    /// Parses one record. Unknown types come back as [`Record::Unknown`].
    #[inline]
    pub fn parse<'a>(&self, r: RawRecord<'a>) -> Result<Record<'a>, ParseError> {
        let err = ParseError {
            kind: r.kind,
            len: r.body.len(),
        };
        self.parse_inner(r).ok_or(err)
    }

    #[inline]
    fn parse_inner<'a>(&self, r: RawRecord<'a>) -> Option<Record<'a>> {
        let body = r.body;
        Some(match r.kind {
            kind::SAMPLE => {
                // PERF_SAMPLE_CGROUP comes after every other field of this
                // layout (the kernel's order: ... STACK_USER, WEIGHT,
                // DATA_SRC, TRANSACTION, REGS_INTR, PHYS_ADDR, CGROUP):
                // the last 8 bytes of the body.
                let (body, cgroup) = if self.cgroup {
                    let n = body.len().checked_sub(8)?;
                    (&body[..n], u64_at(body, n)?)
                } else {
                    (body, 0)
                };
                let callchain = if self.callchain {
                    let nr = usize::try_from(u64_at(body, 40)?).ok()?;
                    let bytes = nr.checked_mul(8)?;
                    Callchain(body.get(48..48usize.checked_add(bytes)?)?)
                } else {
                    Callchain::default()
                };
                let user_part: &[u8] = if self.user_stack > 0 {
                    let end = if self.callchain {
                        48 + callchain.0.len()
                    } else {
                        40
                    };
                    user_stack(body, end)?;
                    &body[end..]
                } else {
                    &[]
                };
                Record::Sample(Sample {
                    ip: u64_at(body, 0)?,
                    pid: u32_at(body, 8)?,
                    tid: u32_at(body, 12)?,
                    time: u64_at(body, 16)?,
                    cpu: u32_at(body, 24)?,
                    period: u64_at(body, 32)?,
                    cpumode: r.misc & misc::CPUMODE_MASK,
                    callchain,
                    user_part,
                    cgroup,
                })
            }
            kind::MMAP2 => {
                let (id, rest) = trailer(body)?;
                let file_id = if r.misc & misc::MMAP_BUILD_ID != 0 {
                    let n = (*rest.get(32)? as usize).min(20);
                    FileId::BuildId(rest.get(36..36 + n)?)
                } else {
                    FileId::Inode {
                        maj: u32_at(rest, 32)?,
                        min: u32_at(rest, 36)?,
                        ino: u64_at(rest, 40)?,
                        generation: u64_at(rest, 48)?,
                    }
                };
                Record::Mmap(Mmap {
                    pid: u32_at(rest, 0)?,
                    tid: u32_at(rest, 4)?,
                    addr: u64_at(rest, 8)?,
                    len: u64_at(rest, 16)?,
                    pgoff: u64_at(rest, 24)?,
                    file_id: Some(file_id),
                    prot: u32_at(rest, 56)?,
                    flags: u32_at(rest, 60)?,
                    filename: cstr(rest.get(64..)?),
                    misc: r.misc,
                    id,
                })
            }
            kind::MMAP => {
                let (id, rest) = trailer(body)?;
                Record::Mmap(Mmap {
                    pid: u32_at(rest, 0)?,
                    tid: u32_at(rest, 4)?,
                    addr: u64_at(rest, 8)?,
                    len: u64_at(rest, 16)?,
                    pgoff: u64_at(rest, 24)?,
                    file_id: None,
                    prot: if r.misc & misc::MMAP_DATA != 0 {
                        0
                    } else {
                        libc::PROT_EXEC as u32
                    },
                    flags: 0,
                    filename: cstr(rest.get(32..)?),
                    misc: r.misc,
                    id,
                })
            }
            kind::COMM => {
                let (id, rest) = trailer(body)?;
                Record::Comm(Comm {
                    pid: u32_at(rest, 0)?,
                    tid: u32_at(rest, 4)?,
                    comm: cstr(rest.get(8..)?),
                    exec: r.misc & misc::COMM_EXEC != 0,
                    id,
                })
            }
            kind::FORK | kind::EXIT => {
                let (id, rest) = trailer(body)?;
                let t = Task {
                    pid: u32_at(rest, 0)?,
                    ppid: u32_at(rest, 4)?,
                    tid: u32_at(rest, 8)?,
                    ptid: u32_at(rest, 12)?,
                    time: u64_at(rest, 16)?,
                    id,
                };
                if r.kind == kind::FORK {
                    Record::Fork(t)
                } else {
                    Record::Exit(t)
                }
            }
            kind::LOST => {
                let (sid, rest) = trailer(body)?;
                Record::Lost {
                    id: u64_at(rest, 0)?,
                    lost: u64_at(rest, 8)?,
                    sid,
                }
            }
            kind::THROTTLE | kind::UNTHROTTLE => {
                let (sid, rest) = trailer(body)?;
                Record::Throttle {
                    throttled: r.kind == kind::THROTTLE,
                    time: u64_at(rest, 0)?,
                    id: u64_at(rest, 8)?,
                    sid,
                }
            }
            kind::SWITCH | kind::SWITCH_CPU_WIDE => {
                let (sid, rest) = trailer(body)?;
                let next_prev = if r.kind == kind::SWITCH_CPU_WIDE {
                    Some((u32_at(rest, 0)?, u32_at(rest, 4)?))
                } else {
                    None
                };
                Record::Switch {
                    out: r.misc & misc::SWITCH_OUT != 0,
                    preempt: r.misc & misc::SWITCH_OUT_PREEMPT != 0,
                    next_prev,
                    sid,
                }
            }
            kind::KSYMBOL => {
                let (sid, rest) = trailer(body)?;
                Record::Ksymbol {
                    addr: u64_at(rest, 0)?,
                    len: u32_at(rest, 8)?,
                    ksym_type: u16_at(rest, 12)?,
                    flags: u16_at(rest, 14)?,
                    name: cstr(rest.get(16..)?),
                    sid,
                }
            }
            kind::CGROUP => {
                let (sid, rest) = trailer(body)?;
                Record::Cgroup {
                    id: u64_at(rest, 0)?,
                    path: cstr(rest.get(8..)?),
                    sid,
                }
            }
            kind::LOST_SAMPLES => {
                let (sid, rest) = trailer(body)?;
                Record::LostSamples {
                    lost: u64_at(rest, 0)?,
                    sid,
                }
            }
            other => Record::Unknown { kind: other },
        })
    }
}
