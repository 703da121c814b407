//! perf.data's records restated in the one layout the sync stage parses.
//!
//! perf.data records have whatever `sample_type` perf chose (and a
//! `sample_id_all` trailer to match); profkit's rings have one fixed layout
//! (`IP|TID|TIME|CPU|PERIOD[|CALLCHAIN][|REGS_USER|STACK_USER]`, trailer
//! `{pid, tid, time, cpu}`, see `profkit_perf::Layout`). Each record the
//! import keeps is written here in that layout by `profkit_perf`'s encoder
//! (`Layout::encode`, `Layout::encode_sample`: the inverse of the parser,
//! and `SimRing`'s writer too), into the queue of the CPU it was recorded
//! on, and a round later parsed by `Layout::parse` and
//! handed to `SyncStage::record`: from there on an imported record and a
//! live one take the same path.
//!
//! A sample's user registers and stack (`--call-graph dwarf`) are written
//! in profkit's form: `PERF_SAMPLE_REGS_USER` with
//! `profkit_perf::USER_REGS_MASK` (bp, sp, ip), then
//! `PERF_SAMPLE_STACK_USER` of `Layout::user_stack` bytes, perf's copy cut
//! at its `dyn_size` and zero-padded, so the record is well-formed whatever
//! size perf copied.

use profkit_perf::{Comm, Layout, Mmap, RawRecord, Record, SampleId, SampleParts, Task, UserParts};
use profkit_sync::SyncStage;
use std::collections::BTreeMap;

/// How a mapping names its file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum FileId {
    /// Device and inode.
    Inode {
        maj: u32,
        min: u32,
        ino: u64,
        generation: u64,
    },
    /// A GNU build-id (at most 20 bytes).
    BuildId(Vec<u8>),
}

/// A mapping record's fields.
#[derive(Debug, Clone)]
pub(crate) struct MapRecord<'a> {
    pub pid: u32,
    pub tid: u32,
    pub addr: u64,
    pub len: u64,
    pub pgoff: u64,
    /// `None` for an MMAP record (no file identity).
    pub file_id: Option<FileId>,
    pub prot: u32,
    pub flags: u32,
    pub filename: &'a [u8],
    /// The record's cpumode bits.
    pub cpumode: u16,
}

/// A perf sample's user registers and stack (`--call-graph dwarf`), as
/// perf recorded them.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct PerfUser<'a> {
    /// perf's register ABI (`PERF_SAMPLE_REGS_ABI_*`) and BP, SP, IP;
    /// `None` when the sample has no user context (ABI 0).
    pub regs: Option<(u64, [u64; 3])>,
    /// perf's stack copy, all its `size` bytes (not yet cut at
    /// `dyn_size`); empty when the sample has none.
    pub stack: &'a [u8],
    /// perf's `dyn_size`: how many of `stack`'s bytes were copied.
    pub dyn_size: u64,
}

/// One round's records per CPU, in profkit's layout: those of the
/// sampled events (and the side-band records), and, apart, the off-CPU
/// records (switch-out stacks and switches) for
/// `SyncStage::record_offcpu`, as a live `--off-cpu` session has a second
/// ring per CPU.
#[derive(Debug, Default)]
pub(crate) struct CpuQueues {
    queues: BTreeMap<u32, Vec<u8>>,
    /// The CPUs drained every round ([`CpuQueues::add_cpu`]); any other
    /// CPU's queue lives only in the rounds it has records.
    every_round: std::collections::BTreeSet<u32>,
    offcpu: BTreeMap<u32, Vec<u8>>,
    samples: usize,
    offcpu_records: usize,
    offcpu_fed: u64,
    user_stack_bytes: usize,
}

/// Which of a CPU's queues a record goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Queue {
    /// The sampled events' (`SyncStage::record`).
    Sampled,
    /// The off-CPU records' (`SyncStage::record_offcpu`).
    OffCpu,
}

const ENTRY_HEADER: usize = 12;

impl CpuQueues {
    /// Makes `cpu` drained every round, records or not (as a live session
    /// drains every CPU's ring).
    pub fn add_cpu(&mut self, cpu: u32) {
        self.queues.entry(cpu).or_default();
        self.every_round.insert(cpu);
    }

    /// Samples queued in this round, off-CPU records included.
    pub fn samples(&self) -> usize {
        self.samples + self.offcpu_records
    }

    /// Records handed to `SyncStage::record_offcpu` so far, all rounds.
    pub fn offcpu_fed(&self) -> u64 {
        self.offcpu_fed
    }

    /// Bytes of user stack queued in this round: `Layout::user_stack` for
    /// each sample with a stack copy.
    pub fn user_stack_bytes(&self) -> usize {
        self.user_stack_bytes
    }

    /// Queues the record `write` appends (through `profkit_perf`'s
    /// encoder, which returns its type and misc) on `cpu`'s queue.
    fn push(&mut self, to: Queue, cpu: u32, write: impl FnOnce(&mut Vec<u8>) -> (u32, u16)) {
        let q = match to {
            Queue::Sampled => self.queues.entry(cpu).or_default(),
            Queue::OffCpu => {
                self.offcpu_records += 1;
                self.offcpu.entry(cpu).or_default()
            }
        };
        let at = q.len();
        q.extend_from_slice(&[0; ENTRY_HEADER]);
        let (kind, misc) = write(q);
        let len = (q.len() - at - ENTRY_HEADER) as u32;
        q[at..at + 4].copy_from_slice(&kind.to_ne_bytes());
        q[at + 4..at + 6].copy_from_slice(&misc.to_ne_bytes());
        q[at + 8..at + 12].copy_from_slice(&len.to_ne_bytes());
    }

    /// Queues a sample; `callchain` is written when `layout` has call
    /// chains (empty if the sample had none), `user` when it copies user
    /// stacks: the ABI (0 without registers), BP, SP and IP, then
    /// `layout.user_stack` bytes of stack (perf's up to its `dyn_size`,
    /// zeros after) and the `dyn_size` that says how many are real, or a
    /// size of 0 when perf copied no stack. True if the sample was written
    /// with registers and a stack of at least one byte (one the sync stage
    /// can unwind). `to`: the sampled events' queue, or the off-CPU one
    /// for a switch-out's stack.
    #[allow(clippy::too_many_arguments)]
    pub fn sample(
        &mut self,
        to: Queue,
        layout: Layout,
        cpumode: u16,
        ip: u64,
        id: &SampleId,
        period: u64,
        callchain: impl ExactSizeIterator<Item = u64>,
        user: &PerfUser<'_>,
    ) -> bool {
        let regs = user.regs.filter(|&(abi, _)| abi != 0);
        let stack = (!user.stack.is_empty()).then(|| {
            let dyn_size = usize::try_from(user.dyn_size).unwrap_or(usize::MAX);
            &user.stack[..dyn_size.min(user.stack.len())]
        });
        let parts = SampleParts {
            ip,
            pid: id.pid,
            tid: id.tid,
            time: id.time,
            cpu: id.cpu,
            period,
            cpumode,
            cgroup: 0,
            user: UserParts {
                regs,
                stack,
                fill: 0,
            },
        };
        let mut unwindable = false;
        if layout.user_stack > 0 && stack.is_some() {
            self.user_stack_bytes += layout.user_stack as usize;
            unwindable = regs.is_some() && parts.user.copied(layout) > 0;
        }
        if to == Queue::Sampled {
            self.samples += 1;
        }
        self.push(to, id.cpu, |q| layout.encode_sample(&parts, callchain, q));
        unwindable
    }

    /// Queues a mapping (MMAP2 with a file identity, MMAP without).
    pub fn map(&mut self, m: &MapRecord<'_>, id: &SampleId) {
        let rec = Record::Mmap(Mmap {
            pid: m.pid,
            tid: m.tid,
            addr: m.addr,
            len: m.len,
            pgoff: m.pgoff,
            file_id: m.file_id.as_ref().map(|f| match f {
                FileId::Inode {
                    maj,
                    min,
                    ino,
                    generation,
                } => profkit_perf::FileId::Inode {
                    maj: *maj,
                    min: *min,
                    ino: *ino,
                    generation: *generation,
                },
                FileId::BuildId(b) => profkit_perf::FileId::BuildId(b),
            }),
            prot: m.prot,
            flags: m.flags,
            filename: m.filename,
            misc: m.cpumode,
            id: *id,
        });
        self.record(&rec, id);
    }

    /// Queues a COMM.
    pub fn comm(&mut self, pid: u32, tid: u32, name: &[u8], exec: bool, id: &SampleId) {
        let rec = Record::Comm(Comm {
            pid,
            tid,
            comm: name,
            exec,
            id: *id,
        });
        self.record(&rec, id);
    }

    /// Queues a FORK (`fork`) or EXIT.
    pub fn task(&mut self, fork: bool, pid: u32, ppid: u32, tid: u32, ptid: u32, id: &SampleId) {
        let t = Task {
            pid,
            ppid,
            tid,
            ptid,
            time: id.time,
            id: *id,
        };
        self.record(
            &if fork {
                Record::Fork(t)
            } else {
                Record::Exit(t)
            },
            id,
        );
    }

    /// Queues a LOST on `to`: the off-CPU queue for an off-CPU event's
    /// losses (`offcpu_lost`), else the sampled one.
    pub fn lost(&mut self, to: Queue, event_id: u64, count: u64, id: &SampleId) {
        let rec = Record::Lost {
            id: event_id,
            lost: count,
            sid: *id,
        };
        self.push(to, id.cpu, |q| Layout::default().encode(&rec, q));
    }

    /// Queues a THROTTLE (`throttled`) or UNTHROTTLE.
    pub fn throttle(&mut self, throttled: bool, event_id: u64, id: &SampleId) {
        let rec = Record::Throttle {
            throttled,
            time: id.time,
            id: event_id,
            sid: *id,
        };
        self.record(&rec, id);
    }

    /// Queues a context switch on the off-CPU queue of `id.cpu`: `out`
    /// (`preempt`: the task was still runnable) or in, of the task
    /// `id.pid`/`id.tid`; `next_prev`, a CPU-wide record's other task.
    pub fn switch(
        &mut self,
        out: bool,
        preempt: bool,
        next_prev: Option<(u32, u32)>,
        id: &SampleId,
    ) {
        let rec = Record::Switch {
            out,
            preempt: out && preempt,
            next_prev,
            sid: *id,
        };
        self.push(Queue::OffCpu, id.cpu, |q| Layout::default().encode(&rec, q));
    }

    /// Queues `rec` on the queue of the CPU it was recorded on (`id.cpu`).
    fn record(&mut self, rec: &Record<'_>, id: &SampleId) {
        // Non-sample records do not depend on the layout.
        self.push(Queue::Sampled, id.cpu, |q| Layout::default().encode(rec, q));
    }

    /// Hands every queued record to `stage`, CPU by CPU (each CPU's
    /// records in file order), as `SyncStage::drain` hands a ring's; then
    /// the off-CPU records, CPU by CPU, to `SyncStage::record_offcpu`, as
    /// a live round drains the off-CPU rings after the sampled ones (so a
    /// switch-out's stack meets the mappings of its round). Returns the
    /// number of records that did not parse (none, unless this module
    /// wrote one wrong). The queues are emptied.
    pub fn feed(&mut self, stage: &mut SyncStage, layout: Layout) -> u64 {
        let mut bad = 0;
        // A CPU met only in the file's records (a forged file may name a
        // new one per record) is drained in the rounds it has records, not
        // every round after: rounds × CPUs grew quadratically.
        let every_round = &self.every_round;
        self.queues.retain(|cpu, q| {
            stage.begin_cpu(*cpu);
            bad += each_record(q, layout, |r| stage.record(*cpu, r));
            q.clear();
            every_round.contains(cpu)
        });
        for (cpu, q) in std::mem::take(&mut self.offcpu) {
            bad += each_record(&q, layout, |r| stage.record_offcpu(cpu, r));
        }
        self.offcpu_fed += self.offcpu_records as u64;
        self.samples = 0;
        self.offcpu_records = 0;
        self.user_stack_bytes = 0;
        bad
    }
}

/// Parses the records of one queue in `layout` and hands each to `f`;
/// returns how many did not parse.
fn each_record(q: &[u8], layout: Layout, mut f: impl FnMut(&Record<'_>)) -> u64 {
    let mut bad = 0;
    let mut at = 0;
    while at + ENTRY_HEADER <= q.len() {
        let word = |o: usize| u32::from_ne_bytes([q[o], q[o + 1], q[o + 2], q[o + 3]]);
        let kind = word(at);
        let misc = u16::from_ne_bytes([q[at + 4], q[at + 5]]);
        let len = word(at + 8) as usize;
        let body = &q[at + ENTRY_HEADER..at + ENTRY_HEADER + len];
        at += ENTRY_HEADER + len;
        match layout.parse(RawRecord { kind, misc, body }) {
            Ok(r) => f(&r),
            Err(_) => bad += 1,
        }
    }
    bad
}

/// `PROT_EXEC`.
pub(crate) const PROT_EXEC: u32 = 4;

#[cfg(test)]
impl CpuQueues {
    /// The records queued for `cpu`: (type, misc, body).
    pub fn records(&self, cpu: u32) -> Vec<(u32, u16, Vec<u8>)> {
        self.queues
            .get(&cpu)
            .map_or_else(Vec::new, |b| Self::split(b))
    }

    /// The off-CPU records queued for `cpu`: (type, misc, body).
    pub fn offcpu_records(&self, cpu: u32) -> Vec<(u32, u16, Vec<u8>)> {
        self.offcpu
            .get(&cpu)
            .map_or_else(Vec::new, |b| Self::split(b))
    }

    fn split(bytes: &[u8]) -> Vec<(u32, u16, Vec<u8>)> {
        let mut recs = Vec::new();
        let mut at = 0;
        while at < bytes.len() {
            let kind = u32::from_ne_bytes(bytes[at..at + 4].try_into().unwrap());
            let misc = u16::from_ne_bytes(bytes[at + 4..at + 6].try_into().unwrap());
            let len = u32::from_ne_bytes(bytes[at + 8..at + 12].try_into().unwrap()) as usize;
            recs.push((kind, misc, bytes[at + 12..at + 12 + len].to_vec()));
            at += 12 + len;
        }
        recs
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use profkit_perf::{misc, FileId as PFileId};

    /// Every kind of record written here parses back, field for field.
    #[test]
    fn records_parse_back_in_profkits_layout() {
        let layout = Layout {
            callchain: true,
            user_stack: 0,
            cgroup: false,
        };
        let id = SampleId {
            pid: 7,
            tid: 8,
            time: 99,
            cpu: 3,
        };
        let mut q = CpuQueues::default();
        q.sample(
            Queue::Sampled,
            layout,
            misc::KERNEL,
            0xffff_1234,
            &id,
            5,
            [1u64, 2, 3].into_iter(),
            &PerfUser::default(),
        );
        q.map(
            &MapRecord {
                pid: 7,
                tid: 7,
                addr: 0x1000,
                len: 0x2000,
                pgoff: 0x3000,
                file_id: Some(FileId::BuildId(vec![0xab; 24])),
                prot: 5,
                flags: 2,
                filename: b"/bin/x",
                cpumode: misc::USER,
            },
            &id,
        );
        q.comm(7, 8, b"worker", true, &id);
        q.task(true, 7, 1, 9, 8, &id);
        q.lost(Queue::Sampled, 4, 17, &id);
        q.throttle(false, 4, &id);
        let recs = q.records(3);
        let parsed: Vec<Record<'_>> = recs
            .iter()
            .map(|(kind, misc, body)| {
                layout
                    .parse(RawRecord {
                        kind: *kind,
                        misc: *misc,
                        body,
                    })
                    .unwrap()
            })
            .collect();
        let Record::Sample(s) = parsed[0] else {
            panic!("{:?}", parsed[0])
        };
        assert_eq!(
            (s.ip, s.pid, s.tid, s.time, s.cpu, s.period),
            (0xffff_1234, 7, 8, 99, 3, 5)
        );
        assert!(s.is_kernel());
        assert_eq!(s.callchain.iter().collect::<Vec<_>>(), [1, 2, 3]);
        let Record::Mmap(m) = parsed[1] else {
            panic!("{:?}", parsed[1])
        };
        assert_eq!(
            (m.addr, m.len, m.pgoff, m.prot),
            (0x1000, 0x2000, 0x3000, 5)
        );
        assert_eq!(m.file_id, Some(PFileId::BuildId(&[0xab; 20])));
        assert_eq!((m.filename, m.id), (&b"/bin/x"[..], id));
        let Record::Comm(c) = parsed[2] else {
            panic!("{:?}", parsed[2])
        };
        assert_eq!((c.pid, c.tid, c.comm, c.exec), (7, 8, &b"worker"[..], true));
        let Record::Fork(t) = parsed[3] else {
            panic!("{:?}", parsed[3])
        };
        assert_eq!((t.pid, t.ppid, t.tid, t.ptid, t.time), (7, 1, 9, 8, 99));
        assert!(matches!(
            parsed[4],
            Record::Lost {
                id: 4,
                lost: 17,
                ..
            }
        ));
        assert!(matches!(
            parsed[5],
            Record::Throttle {
                throttled: false,
                time: 99,
                ..
            }
        ));
    }

    /// perf's user registers and stack, restated, parse back as the same
    /// registers and the stack up to perf's `dyn_size`, whatever size perf
    /// copied; a sample without them parses as one without a user context.
    #[test]
    fn user_stacks_parse_back_cut_at_dyn_size() {
        let layout = Layout {
            callchain: true,
            user_stack: 64,
            cgroup: false,
        };
        let id = SampleId {
            pid: 7,
            tid: 8,
            time: 99,
            cpu: 1,
        };
        let perf_stack: Vec<u8> = (1..=96).collect();
        let regs = Some((2, [0x7ffe_0100, 0x7ffe_0000, 0x40_1234]));
        // (perf's part, the ABI and stack bytes expected back (`None`: no
        // user context), whether it can be unwound)
        let cases = [
            // perf copied as much as the layout: cut at dyn_size.
            (
                PerfUser {
                    regs,
                    stack: &perf_stack[..64],
                    dyn_size: 40,
                },
                Some((2, 40)),
                true,
            ),
            // perf copied less (the kernel shortens a copy that would
            // not fit a record): padded to the layout's size.
            (
                PerfUser {
                    regs: Some((1, [1, 2, 3])),
                    stack: &perf_stack[..24],
                    dyn_size: 24,
                },
                Some((1, 24)),
                true,
            ),
            // perf copied more, and claims more than it copied.
            (
                PerfUser {
                    regs,
                    stack: &perf_stack,
                    dyn_size: 1 << 40,
                },
                Some((2, 64)),
                true,
            ),
            // The copy failed at once: registers, no stack bytes.
            (
                PerfUser {
                    regs,
                    stack: &perf_stack[..64],
                    dyn_size: 0,
                },
                Some((2, 0)),
                false,
            ),
            // No user context (a kernel thread): no registers, no stack.
            (PerfUser::default(), None, false),
            // ABI 0 given with registers: none written.
            (
                PerfUser {
                    regs: Some((0, [1, 2, 3])),
                    stack: &[],
                    dyn_size: 0,
                },
                None,
                false,
            ),
        ];
        let mut q = CpuQueues::default();
        let mut unwindable = Vec::new();
        for (user, _, _) in &cases {
            let chain = [profkit_perf::PERF_CONTEXT_KERNEL, 0xffff_1000];
            unwindable.push(q.sample(
                Queue::Sampled,
                layout,
                misc::USER,
                0x40_1234,
                &id,
                1,
                chain.into_iter(),
                user,
            ));
        }
        assert_eq!(q.samples(), cases.len());
        // Four samples with a stack copy, of the layout's size each.
        assert_eq!(q.user_stack_bytes(), 4 * 64);
        let recs = q.records(1);
        assert_eq!(recs.len(), cases.len());
        for (i, ((user, want, can), (kind, misc, body))) in cases.iter().zip(&recs).enumerate() {
            assert_eq!(unwindable[i], *can, "case {i}");
            let r = RawRecord {
                kind: *kind,
                misc: *misc,
                body,
            };
            let Ok(Record::Sample(s)) = layout.parse(r) else {
                panic!("case {i}: {:?}", layout.parse(r))
            };
            assert_eq!(
                (s.ip, s.pid, s.tid, s.time, s.period),
                (0x40_1234, 7, 8, 99, 1)
            );
            assert_eq!(s.callchain.len(), 2, "case {i}");
            let abi = u64::from_ne_bytes(s.user_part[..8].try_into().unwrap());
            match *want {
                Some((want_abi, n)) => {
                    let (_, [bp, sp, ip]) = user.regs.unwrap();
                    let u = s.user().unwrap_or_else(|| panic!("case {i}"));
                    assert_eq!((abi, u.bp, u.sp, u.ip), (want_abi, bp, sp, ip), "case {i}");
                    assert_eq!(u.stack, &user.stack[..n], "case {i}");
                    // abi, 3 registers, size, 64 bytes, dyn_size: the
                    // record is as long as the layout says.
                    assert_eq!(s.user_part.len(), 8 * 5 + 64 + 8, "case {i}");
                }
                None => {
                    assert_eq!(s.user(), None, "case {i}");
                    assert_eq!(s.user_part, &[0u8; 16][..], "case {i}: abi 0, size 0");
                }
            }
        }
        // Bytes past dyn_size are zeros, not perf's.
        let (_, _, body) = &recs[0];
        let stack_at = body.len() - 8 - 64;
        assert_eq!(&body[stack_at + 40..stack_at + 64], &[0u8; 24][..]);
    }
}

#[cfg(test)]
mod bounds {
    use super::*;
    use profkit_sync::{SyncOptions, SyncStage};

    /// A CPU met only in a file's records lives in the rounds it has
    /// records: a forged file naming a new CPU per record made every later
    /// round walk all of them (rounds × CPUs). The CPUs the file's header
    /// lists are drained every round.
    #[test]
    fn a_cpu_met_only_in_records_is_not_drained_every_round_after() {
        let layout = Layout::default();
        let mut stage = SyncStage::new(SyncOptions::new(layout));
        let mut q = CpuQueues::default();
        q.add_cpu(0);
        for cpu in 1..1000 {
            let id = SampleId {
                pid: 1,
                tid: 1,
                time: u64::from(cpu),
                cpu,
            };
            q.switch(true, false, None, &id);
            q.record(
                &Record::Throttle {
                    throttled: true,
                    time: u64::from(cpu),
                    id: 0,
                    sid: id,
                },
                &id,
            );
            stage.begin_round(u64::from(cpu));
            q.feed(&mut stage, layout);
            stage.finish_round();
            assert_eq!(q.queues.len(), 1, "round {cpu}");
            assert!(q.offcpu.is_empty(), "round {cpu}");
        }
        assert!(q.queues.contains_key(&0));
    }
}
