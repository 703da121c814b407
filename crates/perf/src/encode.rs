//! Writing records in profkit's layout: the inverse of [`Layout::parse`].
//!
//! The one writer of the layout, for everything that restates records
//! rather than reading them from the kernel: [`SimRing`](crate::SimRing)
//! (tests and benchmarks) and `profkit-import` (perf.data's records). Each
//! field goes where the parser reads it; strings are NUL-terminated and
//! padded to 8 bytes, as the kernel writes them; `sample_id_all` trailers
//! are `{pid, tid}`, `time`, `{cpu, 0}`.
//!
//! [`Layout::encode`] writes a [`Record`] as the parser gives it out, so
//! `parse(encode(r)) == r` for every record in the parser's normal form (a
//! string without a NUL, a build-id of at most 20 bytes, `misc` bits that
//! agree with the record: the tests below check it over generated records
//! of every layout). [`Layout::encode_sample`] writes a sample from a
//! writer's parts: its call chain as entries and its user registers and
//! stack as [`UserParts`], which [`Sample`](crate::Sample) keeps as bytes.

use crate::record::{kind, misc, FileId, Layout, Record, SampleId};

/// A sample as a writer holds it, for [`Layout::encode_sample`]: the
/// fields of a [`Sample`](crate::Sample) but its call chain (given apart,
/// as entries) and its user registers and stack (as parts, not bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SampleParts<'a> {
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
    /// `misc & CPUMODE_MASK` (other bits are not written).
    pub cpumode: u16,
    /// The cgroup id, written with [`Layout::cgroup`].
    pub cgroup: u64,
    /// The user registers and stack, written with [`Layout::user_stack`].
    pub user: UserParts<'a>,
}

/// A sample's user registers and stack copy, as a layout with
/// [`Layout::user_stack`] holds them (read back with
/// [`Sample::user`](crate::Sample::user)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct UserParts<'a> {
    /// The registers' ABI (`PERF_SAMPLE_REGS_ABI_*`) and BP, SP, IP
    /// ([`USER_REGS_MASK`](crate::USER_REGS_MASK)'s order). `None`, or an
    /// ABI of 0: no user context (a kernel thread), an ABI of 0 and no
    /// registers written.
    pub regs: Option<(u64, [u64; 3])>,
    /// The stack bytes copied from SP up. `None`: no copy (a size of 0).
    /// `Some`: a copy of [`Layout::user_stack`] bytes, these cut at that
    /// size, then [`UserParts::fill`] up to it, and a `dyn_size` of how
    /// many are these.
    pub stack: Option<&'a [u8]>,
    /// The byte written past `dyn_size` (where the kernel leaves stale
    /// bytes).
    pub fill: u8,
}

impl UserParts<'_> {
    /// The stack bytes a sample written in `layout` holds (its
    /// `dyn_size`): `stack`'s, cut at [`Layout::user_stack`].
    pub fn copied(&self, layout: Layout) -> usize {
        self.stack
            .map_or(0, |s| s.len().min(layout.user_stack as usize))
    }
}

fn u16s(v: &mut Vec<u8>, x: u16) {
    v.extend_from_slice(&x.to_ne_bytes());
}
fn u32s(v: &mut Vec<u8>, x: u32) {
    v.extend_from_slice(&x.to_ne_bytes());
}
fn u64s(v: &mut Vec<u8>, x: u64) {
    v.extend_from_slice(&x.to_ne_bytes());
}

/// `s`, a NUL, and NULs up to 8-byte alignment of the body (from `start`).
fn cstr(v: &mut Vec<u8>, start: usize, s: &[u8]) {
    v.extend_from_slice(s);
    v.push(0);
    let pad = (8 - (v.len() - start) % 8) % 8;
    v.resize(v.len() + pad, 0);
}

fn trailer(v: &mut Vec<u8>, id: &SampleId) {
    u32s(v, id.pid);
    u32s(v, id.tid);
    u64s(v, id.time);
    u32s(v, id.cpu);
    u32s(v, 0);
}

impl Layout {
    /// Appends the body of `rec` to `body` as the kernel writes it in this
    /// layout and returns the header's `(type, misc)`: the inverse of
    /// [`Layout::parse`] (see the module docs). Records other than samples
    /// are written the same in every layout.
    ///
    /// The header's `misc` is the record's (`cpumode` for a sample, `misc`
    /// for a mapping), with the bits the parser reads set from the record:
    /// `COMM_EXEC`, `SWITCH_OUT[_PREEMPT]`, `MMAP_BUILD_ID` for a build-id,
    /// `MMAP_DATA` for an MMAP without `PROT_EXEC`. A file id of `None` is
    /// written as MMAP (no file id, no prot or flags), a [`Record::Switch`]
    /// with `next_prev` as `SWITCH_CPU_WIDE`, a KSYMBOL with the kernel's
    /// cpumode, a [`Record::Unknown`] with an empty body. A sample's call
    /// chain and user part are copied as they are: they must be in this
    /// layout (as the parser gives them out of it).
    pub fn encode(&self, rec: &Record<'_>, body: &mut Vec<u8>) -> (u32, u16) {
        let start = body.len();
        let v = body;
        match *rec {
            Record::Sample(ref s) => {
                let callchain = s.callchain.as_bytes();
                self.sample(
                    v,
                    (s.ip, s.pid, s.tid, s.time, s.cpu, s.period),
                    |v| {
                        u64s(v, callchain.len() as u64 / 8);
                        v.extend_from_slice(callchain);
                    },
                    |v| v.extend_from_slice(s.user_part),
                    s.cgroup,
                );
                (kind::SAMPLE, s.cpumode & misc::CPUMODE_MASK)
            }
            Record::Mmap(ref m) => {
                u32s(v, m.pid);
                u32s(v, m.tid);
                u64s(v, m.addr);
                u64s(v, m.len);
                u64s(v, m.pgoff);
                let mut bits = m.misc;
                let k = match m.file_id {
                    Some(FileId::BuildId(b)) => {
                        let n = b.len().min(20);
                        v.push(n as u8);
                        v.extend_from_slice(&[0; 3]);
                        v.extend_from_slice(&b[..n]);
                        v.resize(v.len() + (20 - n), 0);
                        bits |= misc::MMAP_BUILD_ID;
                        kind::MMAP2
                    }
                    Some(FileId::Inode {
                        maj,
                        min,
                        ino,
                        generation,
                    }) => {
                        u32s(v, maj);
                        u32s(v, min);
                        u64s(v, ino);
                        u64s(v, generation);
                        bits &= !misc::MMAP_BUILD_ID;
                        kind::MMAP2
                    }
                    None => {
                        // MMAP: no identity, and no prot (a data mapping
                        // says so in misc).
                        if m.prot & libc::PROT_EXEC as u32 == 0 {
                            bits |= misc::MMAP_DATA;
                        } else {
                            bits &= !misc::MMAP_DATA;
                        }
                        kind::MMAP
                    }
                };
                if k == kind::MMAP2 {
                    u32s(v, m.prot);
                    u32s(v, m.flags);
                }
                cstr(v, start, m.filename);
                trailer(v, &m.id);
                (k, bits)
            }
            Record::Comm(ref c) => {
                u32s(v, c.pid);
                u32s(v, c.tid);
                cstr(v, start, c.comm);
                trailer(v, &c.id);
                (kind::COMM, if c.exec { misc::COMM_EXEC } else { 0 })
            }
            Record::Fork(ref t) | Record::Exit(ref t) => {
                u32s(v, t.pid);
                u32s(v, t.ppid);
                u32s(v, t.tid);
                u32s(v, t.ptid);
                u64s(v, t.time);
                trailer(v, &t.id);
                let k = if matches!(rec, Record::Fork(_)) {
                    kind::FORK
                } else {
                    kind::EXIT
                };
                (k, 0)
            }
            Record::Lost { id, lost, ref sid } => {
                u64s(v, id);
                u64s(v, lost);
                trailer(v, sid);
                (kind::LOST, 0)
            }
            Record::Throttle {
                throttled,
                time,
                id,
                ref sid,
            } => {
                u64s(v, time);
                u64s(v, id);
                u64s(v, 0); // stream_id
                trailer(v, sid);
                let k = if throttled {
                    kind::THROTTLE
                } else {
                    kind::UNTHROTTLE
                };
                (k, 0)
            }
            Record::Switch {
                out,
                preempt,
                next_prev,
                ref sid,
            } => {
                let k = match next_prev {
                    Some((pid, tid)) => {
                        u32s(v, pid);
                        u32s(v, tid);
                        kind::SWITCH_CPU_WIDE
                    }
                    None => kind::SWITCH,
                };
                trailer(v, sid);
                let mut bits = 0;
                if out {
                    bits |= misc::SWITCH_OUT;
                }
                if preempt {
                    bits |= misc::SWITCH_OUT_PREEMPT;
                }
                (k, bits)
            }
            Record::Ksymbol {
                addr,
                len,
                ksym_type,
                flags,
                name,
                ref sid,
            } => {
                u64s(v, addr);
                u32s(v, len);
                u16s(v, ksym_type);
                u16s(v, flags);
                cstr(v, start, name);
                trailer(v, sid);
                (kind::KSYMBOL, misc::KERNEL)
            }
            Record::Cgroup { id, path, ref sid } => {
                u64s(v, id);
                cstr(v, start, path);
                trailer(v, sid);
                (kind::CGROUP, 0)
            }
            Record::LostSamples { lost, ref sid } => {
                u64s(v, lost);
                trailer(v, sid);
                (kind::LOST_SAMPLES, 0)
            }
            Record::Unknown { kind } => (kind, 0),
        }
    }

    /// Appends the body of the sample `s` with call chain `callchain`
    /// (written when the layout has call chains) to `body` and returns the
    /// header's `(type, misc)`: [`Layout::encode`] of the sample whose
    /// parts these are.
    pub fn encode_sample(
        &self,
        s: &SampleParts<'_>,
        callchain: impl ExactSizeIterator<Item = u64>,
        body: &mut Vec<u8>,
    ) -> (u32, u16) {
        let size = self.user_stack as usize;
        let user = &s.user;
        self.sample(
            body,
            (s.ip, s.pid, s.tid, s.time, s.cpu, s.period),
            |v| {
                u64s(v, callchain.len() as u64);
                for a in callchain {
                    u64s(v, a);
                }
            },
            |v| {
                match user.regs.filter(|&(abi, _)| abi != 0) {
                    Some((abi, regs)) => {
                        u64s(v, abi);
                        for r in regs {
                            u64s(v, r);
                        }
                    }
                    None => u64s(v, 0),
                }
                match user.stack {
                    None => u64s(v, 0),
                    Some(stack) => {
                        let n = stack.len().min(size);
                        u64s(v, size as u64);
                        v.extend_from_slice(&stack[..n]);
                        v.resize(v.len() + (size - n), user.fill);
                        u64s(v, n as u64);
                    }
                }
            },
            s.cgroup,
        );
        (kind::SAMPLE, s.cpumode & misc::CPUMODE_MASK)
    }

    /// A sample's body: the fixed fields, then the call chain and the user
    /// part when the layout has them, then the cgroup id when it has one
    /// (the kernel's order, see [`Layout::parse`]).
    #[inline]
    fn sample(
        &self,
        v: &mut Vec<u8>,
        (ip, pid, tid, time, cpu, period): (u64, u32, u32, u64, u32, u64),
        callchain: impl FnOnce(&mut Vec<u8>),
        user: impl FnOnce(&mut Vec<u8>),
        cgroup: u64,
    ) {
        u64s(v, ip);
        u32s(v, pid);
        u32s(v, tid);
        u64s(v, time);
        u32s(v, cpu);
        u32s(v, 0);
        u64s(v, period);
        if self.callchain {
            callchain(v);
        }
        if self.user_stack > 0 {
            user(v);
        }
        if self.cgroup {
            u64s(v, cgroup);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{Comm, Mmap, RawRecord, Sample, Task, UserStack};
    use proptest::prelude::*;

    /// The layouts profkit opens events with and the import writes: with
    /// or without call chains, user stacks (sizes a multiple of 8) and
    /// cgroup ids, in every combination.
    fn layouts() -> impl Strategy<Value = Layout> {
        (
            any::<bool>(),
            prop_oneof![Just(0u32), (1u32..=128).prop_map(|n| n * 8)],
            any::<bool>(),
        )
            .prop_map(|(callchain, user_stack, cgroup)| Layout {
                callchain,
                user_stack,
                cgroup,
            })
    }

    fn sid() -> impl Strategy<Value = SampleId> {
        (any::<u32>(), any::<u32>(), any::<u64>(), any::<u32>()).prop_map(
            |(pid, tid, time, cpu)| SampleId {
                pid,
                tid,
                time,
                cpu,
            },
        )
    }

    /// A name as the parser gives it out: no NUL.
    fn name() -> impl Strategy<Value = Vec<u8>> {
        proptest::collection::vec(1u8..=255, 0..40)
    }

    /// The owned data of one non-sample record (a [`Record`] borrows).
    #[derive(Debug, Clone)]
    enum Owned {
        Mmap {
            fields: (u32, u32, u64, u64, u64, u32, u32),
            /// 0: MMAP, 1: inode, 2: build-id.
            form: u8,
            inode: (u32, u32, u64, u64),
            build_id: Vec<u8>,
            cpumode: u16,
            filename: Vec<u8>,
            id: SampleId,
        },
        Comm(u32, u32, Vec<u8>, bool, SampleId),
        Task(bool, (u32, u32, u32, u32, u64), SampleId),
        Lost(u64, u64, SampleId),
        Throttle(bool, u64, u64, SampleId),
        Switch(bool, bool, Option<(u32, u32)>, SampleId),
        Ksymbol(u64, u32, u16, u16, Vec<u8>, SampleId),
        Cgroup(u64, Vec<u8>, SampleId),
        LostSamples(u64, SampleId),
        Unknown(u32),
    }

    fn owned() -> impl Strategy<Value = Owned> {
        prop_oneof![
            (
                any::<(u32, u32, u64, u64, u64, u32, u32)>(),
                0u8..3,
                any::<(u32, u32, u64, u64)>(),
                proptest::collection::vec(any::<u8>(), 0..=20),
                0u16..=7,
                name(),
                sid()
            )
                .prop_map(|(fields, form, inode, build_id, cpumode, filename, id)| {
                    Owned::Mmap {
                        fields,
                        form,
                        inode,
                        build_id,
                        cpumode,
                        filename,
                        id,
                    }
                }),
            (any::<u32>(), any::<u32>(), name(), any::<bool>(), sid())
                .prop_map(|(p, t, n, e, s)| Owned::Comm(p, t, n, e, s)),
            (any::<bool>(), any::<(u32, u32, u32, u32, u64)>(), sid())
                .prop_map(|(f, t, s)| Owned::Task(f, t, s)),
            (any::<u64>(), any::<u64>(), sid()).prop_map(|(i, l, s)| Owned::Lost(i, l, s)),
            (any::<bool>(), any::<u64>(), any::<u64>(), sid())
                .prop_map(|(t, time, i, s)| Owned::Throttle(t, time, i, s)),
            (
                any::<bool>(),
                any::<bool>(),
                any::<Option<(u32, u32)>>(),
                sid()
            )
                .prop_map(|(o, p, n, s)| Owned::Switch(o, p, n, s)),
            (
                any::<u64>(),
                any::<u32>(),
                any::<u16>(),
                any::<u16>(),
                name(),
                sid()
            )
                .prop_map(|(a, l, t, f, n, s)| Owned::Ksymbol(a, l, t, f, n, s)),
            (any::<u64>(), name(), sid()).prop_map(|(i, p, s)| Owned::Cgroup(i, p, s)),
            (any::<u64>(), sid()).prop_map(|(l, s)| Owned::LostSamples(l, s)),
            // Types the parser does not know.
            (64u32..100_000).prop_map(Owned::Unknown),
        ]
    }

    impl Owned {
        /// The record, in the parser's normal form.
        fn record(&self) -> Record<'_> {
            match self {
                Owned::Mmap {
                    fields: (pid, tid, addr, len, pgoff, prot, flags),
                    form,
                    inode: (maj, min, ino, generation),
                    build_id,
                    cpumode,
                    filename,
                    id,
                } => {
                    let exec = libc::PROT_EXEC as u32;
                    let (file_id, prot, flags, misc) = match form {
                        0 if prot & exec != 0 => (None, exec, 0, *cpumode),
                        0 => (None, 0, 0, cpumode | misc::MMAP_DATA),
                        1 => (
                            Some(FileId::Inode {
                                maj: *maj,
                                min: *min,
                                ino: *ino,
                                generation: *generation,
                            }),
                            *prot,
                            *flags,
                            *cpumode,
                        ),
                        _ => (
                            Some(FileId::BuildId(build_id)),
                            *prot,
                            *flags,
                            cpumode | misc::MMAP_BUILD_ID,
                        ),
                    };
                    Record::Mmap(Mmap {
                        pid: *pid,
                        tid: *tid,
                        addr: *addr,
                        len: *len,
                        pgoff: *pgoff,
                        file_id,
                        prot,
                        flags,
                        filename,
                        misc,
                        id: *id,
                    })
                }
                Owned::Comm(pid, tid, comm, exec, id) => Record::Comm(Comm {
                    pid: *pid,
                    tid: *tid,
                    comm,
                    exec: *exec,
                    id: *id,
                }),
                Owned::Task(fork, (pid, ppid, tid, ptid, time), id) => {
                    let t = Task {
                        pid: *pid,
                        ppid: *ppid,
                        tid: *tid,
                        ptid: *ptid,
                        time: *time,
                        id: *id,
                    };
                    if *fork {
                        Record::Fork(t)
                    } else {
                        Record::Exit(t)
                    }
                }
                Owned::Lost(id, lost, sid) => Record::Lost {
                    id: *id,
                    lost: *lost,
                    sid: *sid,
                },
                Owned::Throttle(throttled, time, id, sid) => Record::Throttle {
                    throttled: *throttled,
                    time: *time,
                    id: *id,
                    sid: *sid,
                },
                Owned::Switch(out, preempt, next_prev, sid) => Record::Switch {
                    out: *out,
                    preempt: *preempt,
                    next_prev: *next_prev,
                    sid: *sid,
                },
                Owned::Ksymbol(addr, len, ksym_type, flags, name, sid) => Record::Ksymbol {
                    addr: *addr,
                    len: *len,
                    ksym_type: *ksym_type,
                    flags: *flags,
                    name,
                    sid: *sid,
                },
                Owned::Cgroup(id, path, sid) => Record::Cgroup {
                    id: *id,
                    path,
                    sid: *sid,
                },
                Owned::LostSamples(lost, sid) => Record::LostSamples {
                    lost: *lost,
                    sid: *sid,
                },
                Owned::Unknown(kind) => Record::Unknown { kind: *kind },
            }
        }
    }

    /// A sample's parts, call chain and stack bytes.
    type SampleCase = (
        (u64, u32, u32, u64, u32, u64, u16, u64),
        Vec<u64>,
        Option<(u64, [u64; 3])>,
        Option<Vec<u8>>,
        u8,
    );

    fn sample_case() -> impl Strategy<Value = SampleCase> {
        (
            (
                any::<u64>(),
                any::<u32>(),
                any::<u32>(),
                any::<u64>(),
                any::<u32>(),
                any::<u64>(),
                0u16..=7,
                any::<u64>(),
            ),
            proptest::collection::vec(any::<u64>(), 0..20),
            // ABI 0 given with registers is written as no user context.
            proptest::option::of((0u64..=2, any::<[u64; 3]>())),
            proptest::option::of(proptest::collection::vec(any::<u8>(), 0..1100)),
            any::<u8>(),
        )
    }

    fn parse<'a>(layout: Layout, (kind, misc): (u32, u16), body: &'a [u8]) -> Record<'a> {
        assert_eq!(body.len() % 8, 0, "bodies are 8-byte multiples");
        layout
            .parse(RawRecord { kind, misc, body })
            .unwrap_or_else(|e| panic!("{e}: {body:02x?}"))
    }

    proptest! {
        /// parse ∘ encode is the identity on records in the parser's
        /// normal form, whatever the layout (non-sample records do not
        /// depend on it), and the bytes are where the parser looks.
        #[test]
        fn parse_of_encode_is_the_identity(layout in layouts(), o in owned(), junk in name()) {
            let rec = o.record();
            let mut body = Vec::new();
            let head = layout.encode(&rec, &mut body);
            prop_assert_eq!(parse(layout, head, &body), rec);
            // Appending to a buffer that holds something (a queue) writes
            // the same body.
            let mut after = junk.clone();
            prop_assert_eq!(layout.encode(&rec, &mut after), head);
            prop_assert_eq!(&after[junk.len()..], &body[..]);
        }

        /// A sample written from its parts parses back as those parts in
        /// every layout in use (call chain, user registers and stack cut
        /// at the layout's size, cgroup id), and written again as the
        /// parsed record gives the same bytes: encode ∘ parse is the
        /// identity on the encoder's output, parse ∘ encode on the parser's.
        #[test]
        fn samples_parse_back_as_their_parts(layout in layouts(), case in sample_case()) {
            let ((ip, pid, tid, time, cpu, period, cpumode, cgroup), chain, regs, stack, fill) = case;
            let parts = SampleParts {
                ip, pid, tid, time, cpu, period, cpumode, cgroup,
                user: UserParts { regs, stack: stack.as_deref(), fill },
            };
            let mut body = Vec::new();
            let head = layout.encode_sample(&parts, chain.iter().copied(), &mut body);
            prop_assert_eq!(head, (kind::SAMPLE, cpumode));
            let rec = parse(layout, head, &body);
            let Record::Sample(s) = rec else {
                panic!("{rec:?}")
            };
            prop_assert_eq!(
                (s.ip, s.pid, s.tid, s.time, s.cpu, s.period, s.cpumode),
                (ip, pid, tid, time, cpu, period, cpumode)
            );
            prop_assert_eq!(s.cgroup, if layout.cgroup { cgroup } else { 0 });
            let want_chain = if layout.callchain { chain.clone() } else { vec![] };
            prop_assert_eq!(s.callchain.iter().collect::<Vec<_>>(), want_chain);
            let n = parts.user.copied(layout);
            let want_user = match regs {
                Some((abi, [bp, sp, ip])) if abi != 0 && layout.user_stack > 0 => Some(UserStack {
                    abi,
                    bp,
                    sp,
                    ip,
                    stack: stack.as_deref().map_or(&[][..], |s| &s[..n]),
                }),
                _ => None,
            };
            prop_assert_eq!(s.user(), want_user);
            if layout.user_stack > 0 {
                // abi[, 3 registers], size[, the layout's size of bytes, dyn_size].
                let regs_len = if want_user.is_some() { 32 } else { 8 };
                let stack_len = if stack.is_some() { 8 + layout.user_stack as usize + 8 } else { 8 };
                prop_assert_eq!(s.user_part.len(), regs_len + stack_len);
            } else {
                prop_assert!(s.user_part.is_empty());
            }
            let mut again = Vec::new();
            prop_assert_eq!(layout.encode(&rec, &mut again), head);
            prop_assert_eq!(&again, &body);
            prop_assert_eq!(parse(layout, head, &again), rec);
        }
    }

    /// In the plain layout a sample is its 40 bytes of fixed fields: no
    /// call chain, user part or cgroup id is written.
    #[test]
    fn a_sample_in_the_plain_layout_is_forty_bytes() {
        let layout = Layout::default();
        let mut body = Vec::new();
        let parts = SampleParts {
            ip: 0xffff_ffff_8100_0000,
            cpumode: misc::KERNEL,
            ..SampleParts::default()
        };
        let head = layout.encode_sample(&parts, [1u64].into_iter(), &mut body);
        assert_eq!(body.len(), 40);
        let Record::Sample(Sample { ip, .. }) = parse(layout, head, &body) else {
            panic!()
        };
        assert_eq!(ip, 0xffff_ffff_8100_0000);
    }
}
