//! Reading perf.data with linux-perf-data: its records in time order, the
//! header facts (event, host, kernel release, command line, CPUs) and
//! the build-id table.

use linux_perf_data::linux_perf_event_reader::{
    AttrFlags, ContextSwitchRecord, CpuMode, Endianness, EventRecord, HardwareEventId,
    PerfEventAttr, PerfEventType, RecordParseInfo, RecordType, SampleFormat, SampleRecord,
    SamplingPolicy, SoftwareCounterType, TaskWasPreempted,
};
use linux_perf_data::{AttributeDescription, DsoKey, Feature, PerfFileReader, PerfFileRecord};
use profkit_eventlog::EventConfigDesc;
use profkit_perf::{Layout, SampleId, MAX_USER_STACK, USER_REGS_MASK};
use std::cell::RefCell;
use std::collections::HashMap;
use std::io::{BufReader, Read, Seek};
use std::rc::Rc;

use crate::compressed::{Stream, StreamReport};
use std::path::Path;

use crate::layout::{CpuQueues, FileId, MapRecord, PerfUser, Queue, PROT_EXEC};
use crate::offcpu::{is_dummy, Role};
use crate::{Error, ImportSummary, Result};

/// What the file says about itself, for the session header.
#[derive(Debug, Default, Clone)]
pub(crate) struct FileFacts {
    pub event: EventConfigDesc,
    pub host: String,
    pub kernel_release: String,
    pub cmdline: String,
    pub online_cpus: u32,
    /// `PERF_SAMPLE_CALLCHAIN` is in the main event's `sample_type`.
    pub callchain: bool,
    /// Bytes of user stack the samples are restated with
    /// (`Layout::user_stack`): the main event's `sample_stack_user` when
    /// it copies user stacks with BP, SP and IP (`--call-graph dwarf`).
    pub user_stack: u32,
    /// The file has off-CPU records to come: an event whose samples are
    /// switch-out stacks (`context-switches`, `sched:sched_switch`) or
    /// switch records (`--switch-events`).
    pub offcpu: bool,
    /// perf's `HEADER_CLOCK_DATA` (`perf record -k CLOCK`): the wall-clock
    /// time and the sample clock's time at one instant, in nanoseconds,
    /// when the main event's times are of that clock.
    pub clock: Option<(u64, u64)>,
}

impl FileFacts {
    /// The wall-clock time (Unix nanoseconds) of sample time `time`, by
    /// the file's clock data; `None` without it.
    pub fn wall_time(&self, time: u64) -> Option<u64> {
        let (wall, at) = self.clock?;
        let t = i128::from(wall) + i128::from(time) - i128::from(at);
        Some(u64::try_from(t.max(0)).unwrap_or(u64::MAX))
    }
}

/// One record of the file, handed on in profkit's layout.
pub(crate) trait Sink {
    /// The file's facts, before any record.
    fn start(&mut self, facts: &FileFacts, layout: Layout, queues: &mut CpuQueues);
    /// A record about to be queued at time `time` (0: none): the sink may
    /// end a round first.
    fn before(&mut self, time: u64, queues: &mut CpuQueues);
    /// The build-id perf knows for the file mapped as `path`.
    fn build_id(&mut self, path: &str, build_id: Vec<u8>);
}

mod open;
pub(crate) use open::*;

/// Reads every record of `reader` into `queues` (through `sink` for round
/// ends and build-ids), counting what could not be read in `summary`.
pub(crate) fn read<R: Read>(
    reader: PerfFileReader<R>,
    queues: &mut CpuQueues,
    sink: &mut impl Sink,
    summary: &mut ImportSummary,
) {
    let PerfFileReader {
        mut perf_file,
        mut record_iter,
    } = reader;
    let attrs = perf_file.event_attributes();
    let tracing = perf_file.feature_section_data(Feature::TRACING_DATA);
    let formats = tracing
        .map(crate::offcpu::sched_switch_formats)
        .unwrap_or_default();
    let roles: Vec<Role> = attrs.iter().map(|a| Role::of(a, &formats)).collect();
    // The main event, which the header describes and whose sample format
    // the layout follows: the first on-CPU one (not perf's `dummy`), else
    // the first off-CPU one, else the first.
    let main = (0..attrs.len())
        .find(|&i| roles[i] == Role::OnCpu && !is_dummy(&attrs[i]))
        .or_else(|| roles.iter().position(|r| r.is_offcpu()))
        .unwrap_or(0);
    let main_attr = attrs.get(main);
    // Switch records of the file's own (`--switch-events`): sched_switch
    // samples then give stacks only, not switches.
    let has_switch_records = attrs
        .iter()
        .any(|a| a.attributes().flags.contains(AttrFlags::CONTEXT_SWITCH));
    for r in &roles {
        if let Role::SchedSwitch(f) = r {
            if !f.from_file {
                summary.warnings.push(
                    "sched:sched_switch's format is not in the file's tracing data: \
                     its fields read at a 64-bit kernel's offsets"
                        .into(),
                );
                break;
            }
        }
    }
    let user_stack = match main_attr.map(|a| user_stack_of(a.attributes())) {
        Some(Ok(n)) => n,
        Some(Err(why)) => {
            summary.warnings.push(format!(
                "user stacks (--call-graph dwarf) not imported: {why}"
            ));
            0
        }
        None => 0,
    };
    let facts = FileFacts {
        event: main_attr
            .map(|a| event_desc(a, user_stack))
            .unwrap_or_default(),
        user_stack,
        callchain: main_attr.is_some_and(|a| {
            a.attributes()
                .sample_format
                .contains(SampleFormat::CALLCHAIN)
        }),
        offcpu: has_switch_records || roles.iter().any(|r| r.is_offcpu()),
        clock: perf_file
            .clock_data()
            .ok()
            .flatten()
            .filter(|_| {
                main_attr.is_some_and(|a| a.attributes().flags.contains(AttrFlags::USE_CLOCKID))
            })
            .map(|c| (c.wall_clock_ns, c.clockid_time_ns)),
        host: perf_file.hostname().ok().flatten().unwrap_or("").to_owned(),
        kernel_release: perf_file
            .os_release()
            .ok()
            .flatten()
            .unwrap_or("")
            .to_owned(),
        cmdline: perf_file
            .cmdline()
            .ok()
            .flatten()
            .map(|v| v.join(" "))
            .unwrap_or_default(),
        // What the file claims, bounded: CPUs beyond these are still
        // added as their records appear.
        online_cpus: perf_file
            .nr_cpus()
            .ok()
            .flatten()
            .map_or(0, |n| n.nr_cpus_online)
            .min(MAX_CLAIMED_CPUS),
    };
    // Header features newer than this import (perf's bits end at
    // HEADER_PMU_CAPS, 31): sections it does not read, said.
    let newer: Vec<u32> = perf_file
        .features()
        .iter()
        .map(|f| f.0)
        .filter(|&b| b > LAST_KNOWN_FEATURE)
        .collect();
    if !newer.is_empty() {
        summary.features_skipped = newer.len() as u64;
        summary.warnings.push(format!(
            "{} header features newer than this import not read (bits {newer:?})",
            newer.len()
        ));
    }
    let layout = Layout {
        callchain: facts.callchain,
        user_stack: facts.user_stack,
        cgroup: false,
    };
    sink.start(&facts, layout, queues);
    let build_ids: HashMap<DsoKey, Vec<u8>> =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            perf_file.build_ids().unwrap_or_default()
        }))
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, v.build_id))
        .collect();
    let mut told: HashMap<Vec<u8>, ()> = HashMap::new();
    let mut tell_build_id = |sink: &mut dyn FnMut(&str, Vec<u8>), path: &[u8], mode: CpuMode| {
        if told.insert(path.to_vec(), ()).is_some() {
            return;
        }
        if let Some(b) = DsoKey::detect(path, mode).and_then(|k| build_ids.get(&k)) {
            sink(&String::from_utf8_lossy(path), b.clone());
        }
    };
    let mut chain = Vec::new();
    let big = perf_file.endian() == Endianness::BigEndian;
    let mut tgids = Tgids::default();
    // Per CPU, the task the last sched_switch sample switched in.
    let mut cpu_next: HashMap<u32, u32> = HashMap::new();
    // A `[kernel.kallsyms]` mapping was queued (the file's, or the one put
    // before the first kernel sample of a file without one).
    let mut kernel_mapped = false;
    // A panic inside linux-perf-data (it asserts on some malformed
    // records) ends the read like a truncated file: keep what was read.
    let whole = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        loop {
            let record = match record_iter.next_record(&mut perf_file) {
                Ok(Some(r)) => r,
                Ok(None) => break,
                Err(_) => {
                    // A truncated file (perf killed): keep what was read.
                    summary.bad_records += 1;
                    break;
                }
            };
            let (record, attr_index) = match record {
                PerfFileRecord::EventRecord { record, attr_index } => (record, attr_index),
                PerfFileRecord::UserRecord(u) => {
                    // perf's own types end at COMPRESSED2 (83); simpleperf's
                    // start at 32768: between, a newer perf's, skipped.
                    if (LAST_PERF_USER_TYPE + 1..SIMPLEPERF_USER_TYPES)
                        .contains(&u.record_type.record_type().0)
                    {
                        summary.records_skipped += 1;
                    }
                    continue;
                }
            };
            let role = roles.get(attr_index).copied().unwrap_or(Role::OnCpu);
            // The reader's parsers assert on some malformed input: a panic
            // there is a bad record, not a failed report.
            let common = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                record.common_data().ok()
            }))
            .ok()
            .flatten();
            let mut id = SampleId {
                pid: common.as_ref().and_then(|c| c.pid).unwrap_or(-1) as u32,
                tid: common.as_ref().and_then(|c| c.tid).unwrap_or(-1) as u32,
                time: common.as_ref().and_then(|c| c.timestamp).unwrap_or(0),
                cpu: common.as_ref().and_then(|c| c.cpu).unwrap_or(0),
            };
            if record.record_type == RecordType::MMAP2 {
                let little = record.parse_info.endian == Endianness::LittleEndian;
                match parse_mmap2(&record.data.as_slice(), record.misc, little) {
                    Some((m, path)) => {
                        kernel_mapped |= path.starts_with(KERNEL_MAP);
                        tell_build_id(
                            &mut |p, b| sink.build_id(p, b),
                            &path,
                            CpuMode::from_misc(record.misc),
                        );
                        sink.before(id.time, queues);
                        queues.map(
                            &MapRecord {
                                filename: &path,
                                ..m
                            },
                            &id,
                        );
                    }
                    None => summary.bad_records += 1,
                }
                continue;
            }
            let parsed =
                match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| record.parse())) {
                    Ok(Ok(p)) => p,
                    _ => {
                        summary.bad_records += 1;
                        continue;
                    }
                };
            let cpumode = record.misc & profkit_perf::misc::CPUMODE_MASK;
            match parsed {
                EventRecord::Sample(s) => {
                    summary.samples += 1;
                    let (Some(ip), Some(pid), Some(tid)) = (s.ip, s.pid, s.tid) else {
                        summary.skipped += 1;
                        continue;
                    };
                    id = SampleId {
                        pid: pid as u32,
                        tid: tid as u32,
                        time: s.timestamp.unwrap_or(0),
                        cpu: s.cpu.unwrap_or(0),
                    };
                    chain.clear();
                    if let Some(c) = &s.callchain {
                        chain.extend((0..c.len()).filter_map(|i| c.get(i)));
                    }
                    let (body, stack);
                    let user = if layout.user_stack > 0 {
                        body = record.data.as_slice();
                        stack = s.user_stack.map(|(d, n)| (d.as_slice(), n));
                        perf_user(&s, &body, stack.as_ref(), &record.parse_info)
                    } else {
                        PerfUser::default()
                    };
                    tgids.note(id.pid, id.tid);
                    sink.before(id.time, queues);
                    if !kernel_mapped && is_kernel_mode(cpumode) {
                        kernel_mapped = true;
                        tell_build_id(&mut |p, b| sink.build_id(p, b), KERNEL_MAP, CpuMode::Kernel);
                        queues.map(&unknown_kernel_map(), &id);
                        let kernel = if facts.kernel_release.is_empty() {
                            "the recording's kernel".to_owned()
                        } else {
                            format!("kernel {} (the file's OS release)", facts.kernel_release)
                        };
                        summary.warnings.push(format!(
                            "the file has no kernel mapping ([kernel.kallsyms]_text): its kernel \
                             samples are counted as [kernel.kallsyms], at their addresses, \
                             unnamed; to name them, give --kallsyms FILE with the /proc/kallsyms \
                             of {kernel}"
                        ));
                    }
                    let to = if role.is_offcpu() {
                        summary.offcpu_samples += 1;
                        Queue::OffCpu
                    } else {
                        Queue::Sampled
                    };
                    if queues.sample(
                        to,
                        layout,
                        cpumode,
                        ip,
                        &id,
                        s.period.unwrap_or(1),
                        chain.iter().copied(),
                        &user,
                    ) && to == Queue::Sampled
                    {
                        summary.user_stacks += 1;
                    }
                    let Role::SchedSwitch(fields) = role else {
                        continue;
                    };
                    let raw = s.raw.map(|r| r.as_slice());
                    let Some(sw) = raw.and_then(|r| fields.decode(&r, big)) else {
                        summary.bad_records += 1;
                        continue;
                    };
                    if has_switch_records {
                        continue;
                    }
                    // The tracepoint fires in the task switching out, just
                    // before the switch: its switch-out, and the next
                    // task's switch-in, at the sample's time.
                    let out = SampleId {
                        pid: if sw.prev_pid == id.tid {
                            id.pid
                        } else {
                            tgids.of(sw.prev_pid)
                        },
                        tid: sw.prev_pid,
                        ..id
                    };
                    // Each CPU's samples chain: one's next task is the
                    // next one's prev. When not, the sample that switched
                    // prev in here is missing from the file (perf was
                    // seen to miss some 2 % of them, most leaving idle):
                    // prev came in after the CPU's last sample, and ran
                    // until now; its switch-in is put just before its
                    // switch-out (a wait's end is late by prev's run,
                    // short for a task that blocks), rather than its wait
                    // lost as unpaired.
                    if cpu_next.len() >= 1 << 16 && !cpu_next.contains_key(&id.cpu) {
                        // A forged file's CPU numbers: bounded.
                        cpu_next.clear();
                    }
                    let on_cpu = cpu_next.insert(id.cpu, sw.next_pid);
                    if sw.prev_pid != 0 && on_cpu.is_some_and(|t| t != sw.prev_pid) {
                        let came_in = SampleId {
                            time: id.time.saturating_sub(1),
                            ..out
                        };
                        queues.switch(false, false, None, &came_in);
                        summary.switches += 1;
                        summary.switches_inferred += 1;
                    }
                    // A dead task's last switch is no wait (its EXIT
                    // record may be lost; the stage drops it either way).
                    if sw.dead {
                        summary.switches_dead += 1;
                    } else {
                        queues.switch(true, sw.preempted, None, &out);
                        summary.switches += 1;
                    }
                    let next = SampleId {
                        pid: tgids.of(sw.next_pid),
                        tid: sw.next_pid,
                        ..id
                    };
                    queues.switch(false, false, None, &next);
                    summary.switches += 1;
                }
                EventRecord::ContextSwitch(c) => {
                    sink.before(id.time, queues);
                    let (out, preempt, other) = match c {
                        ContextSwitchRecord::Out {
                            next_pid,
                            next_tid,
                            preempted,
                        } => (
                            true,
                            preempted == TaskWasPreempted::Yes,
                            next_pid.zip(next_tid),
                        ),
                        ContextSwitchRecord::In { prev_pid, prev_tid } => {
                            (false, false, prev_pid.zip(prev_tid))
                        }
                    };
                    let other = other.map(|(p, t)| (p as u32, t as u32));
                    queues.switch(out, preempt, other, &id);
                    summary.switches += 1;
                }
                EventRecord::Mmap(m) => {
                    let path = m.path.as_slice();
                    kernel_mapped |= path.starts_with(KERNEL_MAP);
                    tell_build_id(&mut |p, b| sink.build_id(p, b), &path, m.cpu_mode);
                    sink.before(id.time, queues);
                    queues.map(
                        &MapRecord {
                            pid: m.pid as u32,
                            tid: m.tid as u32,
                            addr: m.address,
                            len: m.length,
                            pgoff: m.page_offset,
                            file_id: None,
                            prot: if m.is_executable { PROT_EXEC } else { 0 },
                            flags: 0,
                            filename: &path,
                            cpumode,
                        },
                        &id,
                    );
                }
                EventRecord::Comm(c) => {
                    tgids.note(c.pid as u32, c.tid as u32);
                    sink.before(id.time, queues);
                    let name = c.name.as_slice();
                    queues.comm(c.pid as u32, c.tid as u32, &name, c.is_execve, &id);
                }
                EventRecord::Fork(f) | EventRecord::Exit(f) => {
                    let fork = record.record_type == RecordType::FORK;
                    if id.time == 0 {
                        id.time = f.timestamp;
                    }
                    sink.before(id.time, queues);
                    let (pid, ppid) = (f.pid as u32, f.ppid as u32);
                    if fork {
                        tgids.note(pid, f.tid as u32);
                    }
                    queues.task(fork, pid, ppid, f.tid as u32, f.ptid as u32, &id);
                }
                EventRecord::Lost(l) => {
                    summary.lost = summary.lost.saturating_add(l.count);
                    sink.before(id.time, queues);
                    let to = if role.is_offcpu() {
                        Queue::OffCpu
                    } else {
                        Queue::Sampled
                    };
                    queues.lost(to, l.id, l.count, &id);
                    if to == Queue::Sampled && facts.offcpu {
                        // perf's rings are shared by its events and a LOST
                        // carries the id of whichever writes next: switch
                        // records may be among those lost. The off-CPU part
                        // then drops the waits open (count 0: nothing is
                        // counted twice).
                        queues.lost(Queue::OffCpu, l.id, 0, &id);
                    }
                }
                EventRecord::Throttle(t) | EventRecord::Unthrottle(t) => {
                    let throttled = record.record_type == RecordType::THROTTLE;
                    if id.time == 0 {
                        id.time = t.timestamp;
                    }
                    sink.before(id.time, queues);
                    queues.throttle(throttled, t.id, &id);
                }
                // A kernel record type newer than the reader knows: its
                // layout unknown, skipped, counted.
                EventRecord::Raw(_) => summary.records_skipped += 1,
                // Records profkit does not use (KSYMBOL, BPF_EVENT,
                // CGROUP, ...): well-formed, nothing to do.
                _ => {}
            }
        }
    }));
    if whole.is_err() {
        summary.bad_records += 1;
    }
}

/// perf's name of the kernel image (its mapping is `[kernel.kallsyms]_text`).
const KERNEL_MAP: &[u8] = b"[kernel.kallsyms]";

/// A sample `cpumode` the sync stage resolves among the kernel maps.
fn is_kernel_mode(cpumode: u16) -> bool {
    use profkit_perf::misc;
    matches!(
        cpumode,
        misc::KERNEL | misc::HYPERVISOR | misc::GUEST_KERNEL
    )
}

/// The kernel image of a file that maps none (perf recorded without access
/// to the kernel's addresses, or the mappings were left out): pid −1,
/// `_text` (its `pgoff`) unknown and taken as 0, so that a kernel sample's
/// offset is its address, and all of the upper half of the address space.
/// Its samples are the kernel's, unnamed (unless a kallsyms of the same
/// kernel is given), rather than lost for want of a mapping.
fn unknown_kernel_map() -> MapRecord<'static> {
    const UPPER_HALF: u64 = 1 << 63;
    MapRecord {
        pid: u32::MAX,
        tid: u32::MAX,
        addr: UPPER_HALF,
        len: u64::MAX - UPPER_HALF,
        pgoff: 0,
        file_id: None,
        prot: PROT_EXEC,
        flags: 0,
        filename: KERNEL_MAP,
        cpumode: profkit_perf::misc::KERNEL,
    }
}

/// perf's last user record type this import knows: `COMPRESSED2`.
const LAST_PERF_USER_TYPE: u32 = 83;
/// simpleperf's user record types start here.
const SIMPLEPERF_USER_TYPES: u32 = 32768;
/// perf's last header feature this import knows: `HEADER_PMU_CAPS`.
const LAST_KNOWN_FEATURE: u32 = 31;

/// The process (thread group) of each thread the file has named so far
/// (COMM, FORK, samples): a `sched_switch` sample names the tasks it
/// switches between by thread id only. At most [`Tgids::MAX`] threads
/// are remembered (then forgotten at once, and learnt again).
#[derive(Debug, Default)]
struct Tgids(HashMap<u32, u32>);

impl Tgids {
    const MAX: usize = 1 << 20;

    fn note(&mut self, pid: u32, tid: u32) {
        if pid == u32::MAX || tid == u32::MAX {
            return;
        }
        if self.0.len() >= Self::MAX && !self.0.contains_key(&tid) {
            self.0.clear();
        }
        self.0.insert(tid, pid);
    }

    /// `tid`'s process, or `tid` itself (a main thread's id is its
    /// process's) when the file never said.
    fn of(&self, tid: u32) -> u32 {
        self.0.get(&tid).copied().unwrap_or(tid)
    }
}

/// An `MMAP2` record, read here rather than by linux-perf-event-reader:
/// its parser asserts (panics) on a build-id length over 20, and a 6.18
/// kernel was seen setting the build-id bit of `misc` on records that
/// carry device and inode (while another event with `build_id` was open).
/// A "build-id" longer than 20 bytes is taken as the inode form.
fn parse_mmap2(b: &[u8], misc: u16, little: bool) -> Option<(MapRecord<'static>, Vec<u8>)> {
    let u32_at = |o: usize| -> Option<u32> {
        let a: [u8; 4] = b.get(o..o + 4)?.try_into().ok()?;
        Some(if little {
            u32::from_le_bytes(a)
        } else {
            u32::from_be_bytes(a)
        })
    };
    let u64_at = |o: usize| -> Option<u64> {
        let a: [u8; 8] = b.get(o..o + 8)?.try_into().ok()?;
        Some(if little {
            u64::from_le_bytes(a)
        } else {
            u64::from_be_bytes(a)
        })
    };
    const MISC_MMAP_BUILD_ID: u16 = 1 << 14;
    let size = *b.get(32)? as usize;
    let file_id = if misc & MISC_MMAP_BUILD_ID != 0 && size <= 20 {
        FileId::BuildId(b.get(36..36 + size)?.to_vec())
    } else {
        FileId::Inode {
            maj: u32_at(32)?,
            min: u32_at(36)?,
            ino: u64_at(40)?,
            generation: u64_at(48)?,
        }
    };
    let name = b.get(64..)?;
    let path = name[..memchr::memchr(0, name).unwrap_or(name.len())].to_vec();
    Some((
        MapRecord {
            pid: u32_at(0)?,
            tid: u32_at(4)?,
            addr: u64_at(8)?,
            len: u64_at(16)?,
            pgoff: u64_at(24)?,
            file_id: Some(file_id),
            prot: u32_at(56)?,
            flags: u32_at(60)?,
            filename: &[],
            cpumode: misc & profkit_perf::misc::CPUMODE_MASK,
        },
        path,
    ))
}

/// `PERF_REG_X86_BP`, `_SP`, `_IP`: the bits of [`USER_REGS_MASK`].
const REG_BP: u64 = 6;
const REG_SP: u64 = 7;
const REG_IP: u64 = 8;

/// The `Layout::user_stack` a file whose first event is `a` is restated
/// with: 0 when its samples copy no user stack; its `sample_stack_user`
/// (rounded up to a multiple of 8, at most [`MAX_USER_STACK`], as the
/// kernel and perf keep it anyway) when they copy one with BP, SP and IP;
/// why not, when they copy one that cannot be restated.
fn user_stack_of(a: &PerfEventAttr) -> std::result::Result<u32, String> {
    let f = a.sample_format;
    if !f.contains(SampleFormat::STACK_USER) {
        return Ok(0);
    }
    if !f.contains(SampleFormat::REGS_USER) || a.sample_regs_user & USER_REGS_MASK != USER_REGS_MASK
    {
        return Err(format!(
            "the samples copy user stacks without the BP, SP and IP registers (sample_regs_user {:#x})",
            if f.contains(SampleFormat::REGS_USER) {
                a.sample_regs_user
            } else {
                0
            }
        ));
    }
    if a.sample_stack_user == 0 {
        return Err("the samples copy 0 bytes of user stack".into());
    }
    Ok(a.sample_stack_user
        .checked_next_multiple_of(8)
        .unwrap_or(u32::MAX)
        .min(MAX_USER_STACK))
}

/// A sample's user registers and stack as perf wrote them; `stack` is the
/// sample's stack copy (a part of `body`, the sample's bytes) and its
/// `dyn_size`. Without a stack copy (a sample of another event) it has
/// neither: its ABI cannot be found, and without a stack it cannot be
/// unwound.
fn perf_user<'a>(
    s: &SampleRecord<'_>,
    body: &[u8],
    stack: Option<&'a (std::borrow::Cow<'_, [u8]>, u64)>,
    info: &RecordParseInfo,
) -> PerfUser<'a> {
    let Some((stack, dyn_size)) = stack.map(|(d, n)| (&d[..], *n)) else {
        return PerfUser::default();
    };
    let regs = s.user_regs.as_ref().and_then(|r| {
        let regs = [r.get(REG_BP)?, r.get(REG_SP)?, r.get(REG_IP)?];
        let big = info.endian == Endianness::BigEndian;
        let abi = regs_abi(body, stack, usize::from(info.user_regs_count), big)?;
        Some((abi, regs))
    });
    PerfUser {
        regs,
        stack,
        dyn_size,
    }
}

/// A sample's register ABI (`PERF_SAMPLE_REGS_ABI_*`), which
/// linux-perf-event-reader reads but does not keep: in the sample, the
/// ABI word, `nregs` registers and the stack's `size` word come right
/// before the stack copy, which is `stack` (a part of `body`). `None` if
/// `stack` is not within `body` (a sample without a stack copy) or the
/// `size` word before it does not match it.
fn regs_abi(body: &[u8], stack: &[u8], nregs: usize, big: bool) -> Option<u64> {
    let off = (stack.as_ptr() as usize).checked_sub(body.as_ptr() as usize)?;
    if off.checked_add(stack.len())? > body.len() {
        return None;
    }
    let size_at = off.checked_sub(8)?;
    if uint_at::<8>(body, size_at, big)? != stack.len() as u64 {
        return None;
    }
    uint_at::<8>(body, size_at.checked_sub(8 * (nregs + 1))?, big)
}

fn event_desc(attr: &AttributeDescription, user_stack: u32) -> EventConfigDesc {
    let a = attr.attributes();
    let (type_, config, default_name) = match a.type_ {
        PerfEventType::Software(c) => {
            let (n, name) = match c {
                SoftwareCounterType::CpuClock => (0, "cpu-clock"),
                SoftwareCounterType::TaskClock => (1, "task-clock"),
                SoftwareCounterType::PageFaults => (2, "page-faults"),
                SoftwareCounterType::ContextSwitches => (3, "context-switches"),
                SoftwareCounterType::CpuMigrations => (4, "cpu-migrations"),
                _ => (u64::MAX, "software"),
            };
            (1, n, name.to_owned())
        }
        PerfEventType::Hardware(h, _) => {
            let (n, name) = match h {
                HardwareEventId::CpuCycles => (0, "cycles"),
                HardwareEventId::Instructions => (1, "instructions"),
                HardwareEventId::CacheReferences => (2, "cache-references"),
                HardwareEventId::CacheMisses => (3, "cache-misses"),
                HardwareEventId::BranchInstructions => (4, "branch-instructions"),
                HardwareEventId::BranchMisses => (5, "branch-misses"),
                _ => (u64::MAX, "hardware"),
            };
            (0, n, name.to_owned())
        }
        PerfEventType::Tracepoint(id) => (2, id, format!("tracepoint:{id}")),
        ref other => (u32::MAX, 0, format!("{other:?}")),
    };
    let (frequency, period) = match a.sampling_policy {
        SamplingPolicy::Frequency(f) => (Some(f), None),
        SamplingPolicy::Period(p) => (None, Some(p.get())),
        SamplingPolicy::NoSampling => (None, None),
    };
    EventConfigDesc {
        name: attr.name().map_or(default_name, |n| {
            // perf writes "cpu-clock:u" / "cycles:ppp" for modifiers, and
            // "sched:sched_switch" (":u" after) for a tracepoint.
            let keep = if type_ == 2 { 2 } else { 1 };
            n.splitn(keep + 1, ':')
                .take(keep)
                .collect::<Vec<_>>()
                .join(":")
        }),
        type_,
        config,
        frequency,
        period,
        exclude_user: a.flags.contains(AttrFlags::EXCLUDE_USER),
        exclude_kernel: a.flags.contains(AttrFlags::EXCLUDE_KERNEL),
        callchain: a.sample_format.contains(SampleFormat::CALLCHAIN),
        user_stack,
        off_cpu: false,
        sample_times: a.sample_format.contains(SampleFormat::TIME),
        jit_code: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use profkit_perf::{RawRecord, Record};

    #[test]
    fn mmap2_with_an_overlong_build_id_is_the_inode_form() {
        let mut b = vec![0u8; 64];
        b[0..4].copy_from_slice(&42u32.to_le_bytes());
        b[8..16].copy_from_slice(&0x1000u64.to_le_bytes());
        b[32] = 200; // "build-id size" 200: really the major device number
        b[36..40].copy_from_slice(&3u32.to_le_bytes());
        b[40..48].copy_from_slice(&77u64.to_le_bytes());
        b[56..60].copy_from_slice(&5u32.to_le_bytes());
        b.extend_from_slice(b"/bin/x\0\0");
        let (m, path) = parse_mmap2(&b, 1 << 14, true).unwrap();
        assert_eq!(
            m.file_id,
            Some(FileId::Inode {
                maj: 200,
                min: 3,
                ino: 77,
                generation: 0
            })
        );
        assert_eq!(
            (m.pid, m.addr, m.prot, path.as_slice()),
            (42, 0x1000, 5, &b"/bin/x"[..])
        );
        let mut short = b.clone();
        short[32] = 4;
        let (m, _) = parse_mmap2(&short, 1 << 14, true).unwrap();
        assert_eq!(m.file_id, Some(FileId::BuildId(short[36..40].to_vec())));
        assert!(parse_mmap2(&b[..50], 0, true).is_none());
    }

    /// A perf.data file (little-endian) with one event (cpu-clock, a
    /// `PERF_ATTR_SIZE_VER3` attribute with `sample_regs_user` and
    /// `sample_stack_user`) and `samples`, the bodies of user-mode
    /// `PERF_RECORD_SAMPLE`s.
    fn perf_file(
        sample_type: u64,
        regs_user: u64,
        stack_user: u32,
        samples: &[Vec<u8>],
    ) -> Vec<u8> {
        const ATTR_SIZE: u64 = 96;
        let mut data = Vec::new();
        for body in samples {
            data.extend_from_slice(&9u32.to_le_bytes()); // PERF_RECORD_SAMPLE
            data.extend_from_slice(&profkit_perf::misc::USER.to_le_bytes());
            data.extend_from_slice(&u16::try_from(8 + body.len()).unwrap().to_le_bytes());
            data.extend_from_slice(body);
        }
        let mut f = Vec::new();
        let u64s = |f: &mut Vec<u8>, x: u64| f.extend_from_slice(&x.to_le_bytes());
        let u32s = |f: &mut Vec<u8>, x: u32| f.extend_from_slice(&x.to_le_bytes());
        let attr_entry = ATTR_SIZE + 16;
        f.extend_from_slice(b"PERFILE2");
        u64s(&mut f, 104);
        u64s(&mut f, attr_entry);
        u64s(&mut f, 104);
        u64s(&mut f, attr_entry);
        u64s(&mut f, 104 + attr_entry);
        u64s(&mut f, data.len() as u64);
        f.resize(f.len() + 16 + 32, 0); // no event types, no features
        u32s(&mut f, 1); // PERF_TYPE_SOFTWARE
        u32s(&mut f, ATTR_SIZE as u32);
        u64s(&mut f, 0); // cpu-clock
        u64s(&mut f, 1000); // sample_freq
        u64s(&mut f, sample_type);
        u64s(&mut f, 0); // read_format
        u64s(&mut f, 1 << 10 | 1 << 18); // freq, sample_id_all
        f.resize(f.len() + 32, 0); // wakeup, bp_type, config1, config2, branch_sample_type
        u64s(&mut f, regs_user);
        u32s(&mut f, stack_user);
        u32s(&mut f, 0); // clockid
        f.resize(f.len() + 16, 0); // the ids section: none
        f.extend_from_slice(&data);
        f
    }

    /// A sink that keeps the layout and facts it is given.
    #[derive(Default)]
    struct Keep(Option<(FileFacts, Layout)>);
    impl Sink for Keep {
        fn start(&mut self, facts: &FileFacts, layout: Layout, _: &mut CpuQueues) {
            self.0 = Some((facts.clone(), layout));
        }
        fn before(&mut self, _: u64, _: &mut CpuQueues) {}
        fn build_id(&mut self, _: &str, _: Vec<u8>) {}
    }

    fn import(file: &[u8]) -> (CpuQueues, Keep, ImportSummary) {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("perf.data");
        std::fs::write(&path, file).unwrap();
        let (mut q, mut sink, mut summary) = Default::default();
        let Ok(Opened::File(reader)) = open(&path) else {
            panic!("not a file-mode perf.data")
        };
        read(reader, &mut q, &mut sink, &mut summary);
        (q, sink, summary)
    }

    const IP: u64 = 1;
    const TID: u64 = 1 << 1;
    const TIME: u64 = 1 << 2;
    const ADDR: u64 = 1 << 3;
    const CPU: u64 = 1 << 7;
    const PERIOD: u64 = 1 << 8;
    const REGS_USER: u64 = 1 << 12;
    const STACK_USER: u64 = 1 << 13;
    const DATA_SRC: u64 = 1 << 15;
    /// perf's `--call-graph dwarf` register mask on x86-64.
    const PERF_REGS: u64 = 0xff0fff;

    /// A sample as perf writes it with `IP|TID|TIME|ADDR|CPU|PERIOD|
    /// REGS_USER|STACK_USER|DATA_SRC` and the registers of `mask`
    /// (register `i` holds `base + i`): `abi` 0 writes no registers, an
    /// empty `stack` no copy.
    fn perf_sample(mask: u64, abi: u64, base: u64, stack: &[u8], dyn_size: u64) -> Vec<u8> {
        // ip, pid 5 and tid 6, time, addr, cpu 2, period, abi
        let mut words = vec![0x40_1234, 5 | 6 << 32, 1000, 0xdead, 2, 1, abi];
        if abi != 0 {
            words.extend((0..64).filter(|i| mask & 1 << i != 0).map(|i| base + i));
        }
        words.push(stack.len() as u64);
        let mut v: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        v.extend_from_slice(stack);
        if !stack.is_empty() {
            v.extend_from_slice(&dyn_size.to_le_bytes());
        }
        v.extend_from_slice(&0x1e05u64.to_le_bytes()); // data_src
        v
    }

    /// A perf.data of `--call-graph dwarf` samples reaches the queues in
    /// profkit's layout: the attribute's stack size, each sample's ABI,
    /// BP, SP, IP and stack up to its `dyn_size`.
    #[test]
    fn dwarf_samples_are_restated_with_their_registers_and_stacks() {
        let st = IP | TID | TIME | ADDR | CPU | PERIOD | REGS_USER | STACK_USER | DATA_SRC;
        let stack: Vec<u8> = (0..64).map(|i| i as u8 ^ 0x5a).collect();
        let samples = [
            perf_sample(PERF_REGS, 2, 0x100, &stack, 48),
            // A 32-bit task, with a copy shorter than asked for.
            perf_sample(PERF_REGS, 1, 0x200, &stack[..16], 16),
            // A kernel thread: no user context.
            perf_sample(PERF_REGS, 0, 0, &[], 0),
            // A dyn_size beyond the copy.
            perf_sample(PERF_REGS, 2, 0x300, &stack, 4096),
        ];
        let (q, sink, summary) = import(&perf_file(st, PERF_REGS, 64, &samples));
        let (facts, layout) = sink.0.unwrap();
        assert_eq!(
            layout,
            Layout {
                callchain: false,
                user_stack: 64,
                cgroup: false,
            }
        );
        assert_eq!((facts.user_stack, facts.event.user_stack), (64, 64));
        assert_eq!(
            (summary.samples, summary.user_stacks, summary.bad_records),
            (4, 3, 0)
        );
        assert!(summary.warnings.is_empty(), "{:?}", summary.warnings);
        let got: Vec<_> = q
            .records(2)
            .iter()
            .map(|(kind, misc, body)| {
                let r = RawRecord {
                    kind: *kind,
                    misc: *misc,
                    body,
                };
                let Ok(Record::Sample(s)) = layout.parse(r) else {
                    panic!("{:?}", layout.parse(r))
                };
                assert_eq!(
                    (s.ip, s.pid, s.tid, s.time, s.cpu),
                    (0x40_1234, 5, 6, 1000, 2)
                );
                let abi = u64::from_ne_bytes(s.user_part[..8].try_into().unwrap());
                (abi, s.user().map(|u| (u.bp, u.sp, u.ip, u.stack.to_vec())))
            })
            .collect();
        assert_eq!(
            got,
            [
                (2, Some((0x106, 0x107, 0x108, stack[..48].to_vec()))),
                (1, Some((0x206, 0x207, 0x208, stack[..16].to_vec()))),
                (0, None),
                (2, Some((0x306, 0x307, 0x308, stack.clone()))),
            ]
        );
    }

    /// A file whose user stacks cannot be restated is imported without
    /// them, and says so; a stack size that is not a multiple of 8 is
    /// rounded up.
    #[test]
    fn user_stacks_that_cannot_be_restated_are_left_out_with_a_warning() {
        let st = IP | TID | TIME | ADDR | CPU | PERIOD | REGS_USER | STACK_USER | DATA_SRC;
        for (regs, size, want, warning) in [
            (
                PERF_REGS & !(1 << 6),
                64,
                0,
                Some("without the BP, SP and IP"),
            ),
            (PERF_REGS, 0, 0, Some("0 bytes of user stack")),
            (PERF_REGS, 60, 64, None),
        ] {
            let sample = perf_sample(regs, 2, 0x100, &[7; 64], 64);
            let (q, sink, summary) = import(&perf_file(st, regs, size, &[sample]));
            let (facts, layout) = sink.0.unwrap();
            assert_eq!((layout.user_stack, facts.event.user_stack), (want, want));
            match warning {
                Some(w) => {
                    assert_eq!(summary.warnings.len(), 1, "{:?}", summary.warnings);
                    assert!(summary.warnings[0].contains(w), "{:?}", summary.warnings);
                    assert_eq!(summary.user_stacks, 0);
                }
                None => {
                    assert!(summary.warnings.is_empty(), "{:?}", summary.warnings);
                    assert_eq!(summary.user_stacks, 1);
                }
            }
            let recs = q.records(2);
            let Ok(Record::Sample(s)) = layout.parse(RawRecord {
                kind: recs[0].0,
                misc: recs[0].1,
                body: &recs[0].2,
            }) else {
                panic!()
            };
            assert_eq!(s.ip, 0x40_1234);
            assert_eq!(s.user().is_some(), want > 0);
        }
    }

    /// A perf.data file (little-endian) with one event of `type_` and
    /// `config` sampling every event (period 1) with `sample_type`,
    /// `sample_id_all` and `flags`, the records `(type, misc, body)` and
    /// the feature sections `(bit, body)`, and an event description
    /// (`HEADER_EVENT_DESC`) naming it `name` if one is given.
    fn one_event_file(
        type_: u32,
        config: u64,
        sample_type: u64,
        flags: u64,
        name: Option<&str>,
        records: &[(u32, u16, Vec<u8>)],
        features: &[(u32, Vec<u8>)],
    ) -> Vec<u8> {
        const ATTR_SIZE: u64 = 64;
        let mut data = Vec::new();
        for (kind, misc, body) in records {
            assert_eq!(body.len() % 8, 0);
            data.extend_from_slice(&kind.to_le_bytes());
            data.extend_from_slice(&misc.to_le_bytes());
            data.extend_from_slice(&u16::try_from(8 + body.len()).unwrap().to_le_bytes());
            data.extend_from_slice(body);
        }
        let mut f = Vec::new();
        let u64s = |f: &mut Vec<u8>, x: u64| f.extend_from_slice(&x.to_le_bytes());
        let u32s = |f: &mut Vec<u8>, x: u32| f.extend_from_slice(&x.to_le_bytes());
        let attr_entry = ATTR_SIZE + 16;
        f.extend_from_slice(b"PERFILE2");
        u64s(&mut f, 104);
        u64s(&mut f, attr_entry);
        u64s(&mut f, 104);
        u64s(&mut f, attr_entry);
        u64s(&mut f, 104 + attr_entry);
        u64s(&mut f, data.len() as u64);
        u64s(&mut f, 0); // no event types
        u64s(&mut f, 0);
        let mut attr = Vec::new();
        u32s(&mut attr, type_);
        u32s(&mut attr, ATTR_SIZE as u32);
        u64s(&mut attr, config);
        u64s(&mut attr, 1); // sample_period
        u64s(&mut attr, sample_type);
        u64s(&mut attr, 0); // read_format
        u64s(&mut attr, flags | 1 << 18); // sample_id_all
        attr.resize(attr.len() + 16, 0); // wakeup, bp_type, config1
        let mut features = features.to_vec();
        if let Some(name) = name {
            let mut desc = Vec::new();
            u32s(&mut desc, 1);
            u32s(&mut desc, ATTR_SIZE as u32);
            desc.extend_from_slice(&attr);
            u32s(&mut desc, 0); // no ids
            let mut s = name.as_bytes().to_vec();
            s.resize((s.len() + 1).next_multiple_of(64), 0);
            u32s(&mut desc, s.len() as u32);
            desc.extend_from_slice(&s);
            features.push((EVENT_DESC_BIT, desc));
        }
        let mut bitmap = [0u64; 4];
        for (bit, _) in &features {
            bitmap[(*bit / 64) as usize] |= 1 << (bit % 64);
        }
        for w in bitmap {
            u64s(&mut f, w);
        }
        f.extend_from_slice(&attr);
        f.resize(f.len() + 16, 0); // the ids section: none
        f.extend_from_slice(&data);
        let mut body_at = f.len() as u64 + 16 * features.len() as u64;
        for (_, body) in &features {
            u64s(&mut f, body_at);
            u64s(&mut f, body.len() as u64);
            body_at += body.len() as u64;
        }
        for (_, body) in &features {
            f.extend_from_slice(body);
        }
        f
    }

    const CALLCHAIN: u64 = 1 << 5;
    const RAW: u64 = 1 << 10;
    const KERNEL_IP: u64 = 0xffff_ffff_8100_1234;

    fn words(w: &[u64]) -> Vec<u8> {
        w.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    /// A kernel-mode sample of `IP|TID|TIME|CPU|PERIOD|CALLCHAIN[|RAW]`
    /// in task `pid`/`tid` on `cpu`, with `raw` (if any) as its raw data.
    fn switch_sample(pid: u32, tid: u32, time: u64, cpu: u32, raw: Option<&[u8]>) -> Vec<u8> {
        let mut v = words(&[
            KERNEL_IP,
            u64::from(pid) | u64::from(tid) << 32,
            time,
            u64::from(cpu),
            1,
            2,
            profkit_perf::PERF_CONTEXT_KERNEL,
            KERNEL_IP,
        ]);
        if let Some(raw) = raw {
            let size = (4 + raw.len()).next_multiple_of(8) - 4;
            v.extend_from_slice(&(size as u32).to_le_bytes());
            v.extend_from_slice(raw);
            v.resize(v.len() + size - raw.len(), 0);
        }
        v
    }

    /// A `SWITCH_CPU_WIDE` body: the other task, then the trailer
    /// (`TID|TIME|CPU`).
    fn cpu_wide(other: (u32, u32), pid: u32, tid: u32, time: u64, cpu: u32) -> Vec<u8> {
        words(&[
            u64::from(other.0) | u64::from(other.1) << 32,
            u64::from(pid) | u64::from(tid) << 32,
            time,
            u64::from(cpu),
        ])
    }

    /// An OffCpu marker: (pid, tid, cpu, kind, count, total_ns).
    type Interval = (u32, u32, u32, profkit_eventlog::OffCpuKind, u64, u64);

    /// The OffCpu markers of a session, and the footer's (switch-outs,
    /// no-stack, unpaired).
    fn offcpu_markers(session: &Path) -> (Vec<Interval>, (u64, u64, u64)) {
        let r = profkit_eventlog::SessionReader::open(session).unwrap();
        assert!(r.header().event.off_cpu);
        let mut got = Vec::new();
        for c in r.chunks() {
            r.for_each_sample(
                c,
                |_| {},
                |m| {
                    if let profkit_eventlog::Event::OffCpu {
                        pid,
                        tid,
                        cpu,
                        kind,
                        count,
                        total_ns,
                        ..
                    } = m
                    {
                        got.push((pid, tid, cpu, kind, count, total_ns));
                    }
                },
            )
            .unwrap();
        }
        let acct = &r.footer().unwrap().accounting;
        let sum = |f: fn(&profkit_eventlog::CpuAccounting) -> u64| acct.iter().map(f).sum();
        (
            got,
            (
                sum(|a| a.offcpu_switches),
                sum(|a| a.offcpu_no_stack),
                sum(|a| a.offcpu_unpaired),
            ),
        )
    }

    const MS: u64 = 1_000_000;

    /// A `-e cs -c 1 -g --switch-events -a` file: its samples reach the
    /// off-CPU queue, its switch records too, as they are; imported, task
    /// 5/6's wait is one blocked interval, from the switch-out (whose
    /// stack it has) to its switch-in on the other CPU.
    #[test]
    fn context_switch_samples_and_switch_records_go_to_the_off_cpu_queue() {
        use profkit_eventlog::OffCpuKind;
        use profkit_perf::{kind, misc};
        let st = IP | TID | TIME | CPU | PERIOD | CALLCHAIN;
        let recs = [
            (
                kind::SAMPLE,
                misc::KERNEL,
                switch_sample(5, 6, 1000, 0, None),
            ),
            (
                kind::SWITCH_CPU_WIDE,
                misc::SWITCH_OUT,
                cpu_wide((0, 0), 5, 6, 1010, 0),
            ),
            (kind::SWITCH_CPU_WIDE, 0, cpu_wide((5, 6), 0, 0, 1011, 0)),
            // Preempted on CPU 1 at 7 ms, back at 8 ms.
            (
                kind::SAMPLE,
                misc::KERNEL,
                switch_sample(5, 6, 7 * MS, 1, None),
            ),
            (
                kind::SWITCH_CPU_WIDE,
                misc::SWITCH_OUT | misc::SWITCH_OUT_PREEMPT,
                cpu_wide((9, 9), 5, 6, 7 * MS + 5, 1),
            ),
            (kind::SWITCH_CPU_WIDE, 0, cpu_wide((0, 0), 5, 6, 5 * MS, 1)),
            (kind::SWITCH_CPU_WIDE, 0, cpu_wide((0, 0), 5, 6, 8 * MS, 0)),
            // The context-switch event lost 3 records on CPU 1.
            (kind::LOST, 0, words(&[7, 3, 0, 9 * MS, 1])),
        ];
        let file = one_event_file(1, 3, st, 1 << 26, None, &recs, &[]);
        let (q, sink, summary) = import(&file);
        let (facts, layout) = sink.0.unwrap();
        assert!(facts.offcpu && layout.callchain);
        assert_eq!(
            (facts.event.name.as_str(), facts.event.config),
            ("context-switches", 3)
        );
        assert_eq!(
            (summary.samples, summary.offcpu_samples, summary.switches),
            (2, 2, 5)
        );
        assert_eq!(summary.bad_records, 0);
        // On the sampled events' queue, only the kernel mapping put
        // before the first kernel sample (the file has none); the file's
        // records, in file order, on the off-CPU one.
        let kinds: Vec<u32> = q.records(0).iter().map(|(k, _, _)| *k).collect();
        assert_eq!(kinds, [kind::MMAP]);
        let parsed = |recs: Vec<(u32, u16, Vec<u8>)>| -> Vec<String> {
            recs.iter()
                .map(|(kind, misc, body)| {
                    let r = layout.parse(RawRecord {
                        kind: *kind,
                        misc: *misc,
                        body,
                    });
                    match r.unwrap() {
                        Record::Sample(s) => format!(
                            "sample {}/{} {} {:#x} {:?}",
                            s.pid,
                            s.tid,
                            s.time,
                            s.ip,
                            s.callchain.iter().collect::<Vec<_>>()
                        ),
                        Record::Switch {
                            out,
                            preempt,
                            next_prev,
                            sid,
                        } => format!(
                            "switch out={out} preempt={preempt} {}/{} {} {next_prev:?}",
                            sid.pid, sid.tid, sid.time
                        ),
                        other => format!("{other:?}"),
                    }
                })
                .collect()
        };
        assert_eq!(
            parsed(q.offcpu_records(0)),
            [
                format!(
                    "sample 5/6 1000 {KERNEL_IP:#x} [{}, {KERNEL_IP}]",
                    profkit_perf::PERF_CONTEXT_KERNEL
                ),
                "switch out=true preempt=false 5/6 1010 Some((0, 0))".into(),
                "switch out=false preempt=false 0/0 1011 Some((5, 6))".into(),
                "switch out=false preempt=false 5/6 8000000 Some((0, 0))".into(),
            ]
        );
        assert_eq!(q.offcpu_records(1).len(), 4);
        assert_eq!(summary.lost, 3);

        let d = tempfile::tempdir().unwrap();
        let data = d.path().join("perf.data");
        std::fs::write(&data, &file).unwrap();
        let session = d.path().join("s/session.pkl");
        crate::import_perf_data(&data, &session).unwrap();
        let (markers, (outs, no_stack, unpaired)) = offcpu_markers(&session);
        let r = profkit_eventlog::SessionReader::open(&session).unwrap();
        let acct = &r.footer().unwrap().accounting;
        let lost: Vec<_> = acct
            .iter()
            .map(|a| (a.cpu, a.offcpu_lost, a.lost_ring))
            .collect();
        assert_eq!(lost, [(0, 0, 0), (1, 3, 0)]);
        // The switch-in at 5 ms on CPU 1 (read before the file's 7 ms
        // switch-out) ends the first wait; the preemption, the second.
        assert_eq!(
            markers,
            [
                (5, 6, 0, OffCpuKind::Blocked, 1, 5 * MS - 1010),
                (5, 6, 1, OffCpuKind::Runnable, 1, MS - 5),
            ]
        );
        // Both switch-outs had their stacks; each switch-in of 5/6 ended
        // a wait (the records are paired in time order, not the file's).
        assert_eq!((outs, no_stack, unpaired), (2, 0, 0));
    }

    /// `sched_switch`'s format as perf copies it into the tracing data
    /// (with other text around it).
    fn tracing_data(id: u64) -> Vec<u8> {
        let mut t = b"\x17\x08Dtracing0.6\0\0\0\0\x08\0\0\0...sched\0\x01\0\0\0".to_vec();
        t.extend_from_slice(
            format!(
                "name: sched_switch\nID: {id}\nformat:\n\
                 \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
                 \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
                 \tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\
                 \tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n\
                 \tfield:int prev_prio;\toffset:28;\tsize:4;\tsigned:1;\n\
                 \tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;\n\
                 \tfield:char next_comm[16];\toffset:40;\tsize:16;\tsigned:0;\n\
                 \tfield:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;\n\
                 \tfield:int next_prio;\toffset:60;\tsize:4;\tsigned:1;\n\n\
                 print fmt: \"prev_comm=%s\", REC->prev_comm\n"
            )
            .as_bytes(),
        );
        t
    }

    fn sched_raw(prev: u32, state: u64, next: u32) -> Vec<u8> {
        let mut r = vec![0u8; 64];
        r[24..28].copy_from_slice(&prev.to_le_bytes());
        r[32..40].copy_from_slice(&state.to_le_bytes());
        r[56..60].copy_from_slice(&next.to_le_bytes());
        r
    }

    /// A `-e sched:sched_switch -g -a` file: each sample is its task's
    /// switch-out stack, then its switch-out (blocked, or runnable for
    /// R+) and the next task's switch-in at the sample's time, the next
    /// task's process from what the file said of it.
    #[test]
    fn sched_switch_samples_are_restated_as_stacks_and_switches() {
        use profkit_eventlog::OffCpuKind;
        use profkit_perf::{kind, misc};
        let st = IP | TID | TIME | CPU | PERIOD | CALLCHAIN | RAW;
        let sample = |pid, tid, time, cpu, raw: Vec<u8>| {
            (
                kind::SAMPLE,
                misc::KERNEL,
                switch_sample(pid, tid, time, cpu, Some(&raw)),
            )
        };
        let recs = [
            // 5/6 sleeps (S) on CPU 0 at 1 ms; CPU 1's idle task gives
            // way to it at 6 ms.
            sample(5, 6, MS, 0, sched_raw(6, 1, 0)),
            sample(0, 0, 6 * MS, 1, sched_raw(0, 0, 6)),
            // Preempted (R+) at 7 ms on CPU 1 by 9, back at 7.5 ms.
            sample(5, 6, 7 * MS, 1, sched_raw(6, 0x100, 9)),
            sample(9, 9, 7 * MS + MS / 2, 1, sched_raw(9, 1, 6)),
            // Sleeps on CPU 1 at 8 ms; at 8.5 ms it sleeps on CPU 0, whose
            // last sample switched to idle: the switch that put it there
            // is missing, and inferred.
            sample(5, 6, 8 * MS, 1, sched_raw(6, 1, 0)),
            sample(5, 6, 8 * MS + MS / 2, 0, sched_raw(6, 1, 0)),
            // A raw part too short: a bad record (its stack is kept).
            sample(5, 6, 9 * MS, 1, vec![0; 16]),
        ];
        let file = one_event_file(2, 372, st, 0, None, &recs, &[(1, tracing_data(372))]);
        let (q, sink, summary) = import(&file);
        let (facts, _) = sink.0.unwrap();
        assert!(facts.offcpu);
        assert_eq!(
            (
                facts.event.name.as_str(),
                facts.event.type_,
                facts.event.config
            ),
            ("tracepoint:372", 2, 372)
        );
        // Only that the file has no kernel mapping.
        assert_eq!(summary.warnings.len(), 1, "{:?}", summary.warnings);
        assert!(summary.warnings[0].contains("no kernel mapping"));
        assert_eq!(
            (
                summary.offcpu_samples,
                summary.switches,
                summary.switches_inferred,
                summary.bad_records
            ),
            (7, 13, 1, 1)
        );
        // sample, out, in on each CPU (and an inferred in).
        let kinds = |cpu| -> Vec<(u32, u16)> {
            q.offcpu_records(cpu)
                .iter()
                .map(|(k, m, _)| (*k, *m))
                .collect()
        };
        let (out, in_) = ((kind::SWITCH, misc::SWITCH_OUT), (kind::SWITCH, 0));
        let smp = (kind::SAMPLE, misc::KERNEL);
        assert_eq!(kinds(0), [smp, out, in_, smp, in_, out, in_]);
        let preempted = (kind::SWITCH, misc::SWITCH_OUT | misc::SWITCH_OUT_PREEMPT);
        // (The idle task's switch-out is R: the stage ignores tid 0.)
        assert_eq!(
            kinds(1),
            [smp, preempted, in_, smp, preempted, in_, smp, out, in_, smp, out, in_, smp]
        );

        let d = tempfile::tempdir().unwrap();
        let data = d.path().join("perf.data");
        std::fs::write(&data, &file).unwrap();
        let session = d.path().join("s/session.pkl");
        crate::import_perf_data(&data, &session).unwrap();
        let (markers, (outs, no_stack, _)) = offcpu_markers(&session);
        assert_eq!(
            markers,
            [
                // The wait from 1 ms, and the one from 8.5 ms, open at the
                // end of the file (the last record, 9 ms), closed there.
                (5, 6, 0, OffCpuKind::Blocked, 2, 5 * MS + MS / 2),
                // The wait from 8 ms, to the inferred switch-in.
                (5, 6, 1, OffCpuKind::Blocked, 1, MS / 2 - 1),
                (5, 6, 1, OffCpuKind::Runnable, 1, MS / 2),
                // 9's wait from 7.5 ms, closed at the end.
                (9, 9, 1, OffCpuKind::Blocked, 1, 3 * MS / 2),
            ]
        );
        assert_eq!((outs, no_stack), (5, 0));

        // Named sched:sched_switch, without its format in the file: the
        // 6.x layout, and a warning; the header keeps the name.
        let named = Some("sched:sched_switch");
        let file = one_event_file(2, 372, st, 0, named, &recs, &[(1, tracing_data(371))]);
        let (_, sink, summary) = import(&file);
        let (facts, _) = sink.0.unwrap();
        assert!(facts.offcpu);
        assert_eq!(facts.event.name, "sched:sched_switch");
        assert_eq!(summary.warnings.len(), 2, "{:?}", summary.warnings);
        assert!(summary.warnings[0].contains("sched_switch"));
        assert_eq!(summary.switches, 13);
        // Neither named nor described: another tracepoint, on-CPU samples.
        let file = one_event_file(2, 372, st, 0, None, &recs, &[(1, tracing_data(371))]);
        let (q, sink, summary) = import(&file);
        assert!(!sink.0.unwrap().0.offcpu);
        assert_eq!((summary.offcpu_samples, summary.switches), (0, 0));
        // (Two samples and the kernel mapping before them.)
        assert_eq!((q.records(0).len(), q.offcpu_records(0).len()), (3, 0));
    }
}
