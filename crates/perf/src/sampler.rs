//! Opening the per-CPU events and mapping their rings: the live-kernel half.
//!
//! This module holds all of profkit's `unsafe`: the `perf_event_open`
//! syscall, the ioctls, and the loads and stores of `data_head`/`data_tail`
//! in the shared control page.

use crate::config::{Rate, SamplerConfig, Target};
use crate::error::{explain_mmap_error, explain_open_error, page_size, Error, OpenContext, Result};
use crate::record::{Layout, RawRecord};
use crate::ring::{split, walk, ReadStats, RecordRing};
use memmap2::{MmapOptions, MmapRaw};
use perf_event_open_sys::bindings as b;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};

/// Builds the `perf_event_attr` for a configuration.
fn make_attr(config: &SamplerConfig, with_build_id: bool, data_bytes: usize) -> b::perf_event_attr {
    let mut attr = b::perf_event_attr {
        type_: config.event.type_,
        size: std::mem::size_of::<b::perf_event_attr>() as u32,
        config: config.event.config,
        sample_type: config.layout().sample_type(),
        read_format: b::PERF_FORMAT_LOST as u64,
        ..Default::default()
    };
    match config.rate {
        Rate::Frequency(f) => {
            attr.__bindgen_anon_1.sample_freq = f;
            attr.set_freq(1);
        }
        Rate::Period(p) => attr.__bindgen_anon_1.sample_period = p,
    }
    attr.set_disabled(1);
    attr.set_exclude_user(config.exclude_user as u64);
    attr.set_exclude_kernel(config.exclude_kernel as u64);
    attr.set_exclude_hv(1);
    set_user_stack(&mut attr, config);
    attr.set_mmap(1);
    attr.set_mmap2(1);
    attr.set_build_id(with_build_id as u64);
    attr.set_comm(1);
    attr.set_comm_exec(1);
    attr.set_task(1);
    attr.set_sample_id_all(1);
    // No switch records here: only the off-CPU event needs them, and in a
    // switch storm they would fill this ring and cost on-CPU samples.
    attr.set_ksymbol(1);
    if config.layout().cgroup {
        // PERF_RECORD_CGROUP for every cgroup created from now on.
        attr.set_cgroup(1);
    }
    set_clock_and_target(&mut attr, config, data_bytes);
    attr
}

/// DWARF unwinding: the user part of the stack comes from the copied
/// registers and stack, not the frame-pointer walk (as `perf record
/// --call-graph dwarf`).
fn set_user_stack(attr: &mut b::perf_event_attr, config: &SamplerConfig) {
    if config.user_stack > 0 {
        attr.sample_regs_user = crate::USER_REGS_MASK;
        attr.sample_stack_user = config.user_stack;
        if config.callchain {
            attr.set_exclude_callchain_user(1);
        }
    }
}

/// What every event of a session shares: times on CLOCK_MONOTONIC (they
/// compare with the sync stage's round times and the session header's
/// start time), a wake-up at half of a ring of `data_bytes`, children
/// followed for processes, and the start at the target's exec.
fn set_clock_and_target(attr: &mut b::perf_event_attr, config: &SamplerConfig, data_bytes: usize) {
    attr.set_use_clockid(1);
    attr.clockid = libc::CLOCK_MONOTONIC;
    attr.set_watermark(1);
    attr.__bindgen_anon_2.wakeup_watermark = (data_bytes / 2) as u32;
    if matches!(config.target, Target::Pids(_)) {
        attr.set_inherit(1);
    }
    if config.enable_on_exec {
        attr.set_enable_on_exec(1);
    }
}

/// The off-CPU event's attr (`--off-cpu`): the software
/// `context-switches` event with period 1 and the sampled event's layout
/// (its sample is taken at every switch-out, in the task switching out,
/// with its stack), plus the switch records (`context_switch`: a switch-out
/// with the preempt bit, and the switch-in that ends the interval). No
/// mapping or task records: the sampled event's ring has them.
fn make_offcpu_attr(config: &SamplerConfig, data_bytes: usize) -> b::perf_event_attr {
    let mut attr = b::perf_event_attr {
        type_: b::PERF_TYPE_SOFTWARE,
        size: std::mem::size_of::<b::perf_event_attr>() as u32,
        config: b::PERF_COUNT_SW_CONTEXT_SWITCHES as u64,
        sample_type: config.layout().sample_type(),
        read_format: b::PERF_FORMAT_LOST as u64,
        ..Default::default()
    };
    attr.__bindgen_anon_1.sample_period = 1;
    attr.set_disabled(1);
    // The switch happens in the kernel: excluding the kernel would drop
    // every sample (the kernel checks the mode of the scheduler's own
    // registers). A user-only session leaves out the kernel frames instead.
    if config.exclude_kernel {
        attr.set_exclude_callchain_kernel(1);
    }
    attr.set_exclude_hv(1);
    set_user_stack(&mut attr, config);
    attr.set_sample_id_all(1);
    attr.set_context_switch(1);
    set_clock_and_target(&mut attr, config, data_bytes);
    attr
}

fn open_one(attr: &mut b::perf_event_attr, pid: i32, cpu: i32) -> io::Result<OwnedFd> {
    open_flags(attr, pid, cpu, 0)
}

fn open_flags(
    attr: &mut b::perf_event_attr,
    pid: i32,
    cpu: i32,
    flags: u32,
) -> io::Result<OwnedFd> {
    // SAFETY:
    // - `attr` is a fully initialised perf_event_attr whose `size` field is
    //   the size of the struct we pass, so the kernel reads only valid memory.
    // - group_fd -1 and FD_CLOEXEC are valid arguments; no pointers are retained.
    let fd = unsafe {
        perf_event_open_sys::perf_event_open(
            attr,
            pid,
            cpu,
            -1,
            (b::PERF_FLAG_FD_CLOEXEC | flags) as libc::c_ulong,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY:
    // - `fd` was just returned by perf_event_open, is valid, and is owned by
    //   nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn ioctl_simple(fd: BorrowedFd<'_>, which: u32) -> io::Result<()> {
    // SAFETY:
    // - ENABLE/DISABLE take an integer argument (0: this event only) and no
    //   pointers; `fd` is a live perf event fd borrowed for the call.
    let r = unsafe {
        match which {
            0 => perf_event_open_sys::ioctls::ENABLE(fd.as_raw_fd(), 0),
            _ => perf_event_open_sys::ioctls::DISABLE(fd.as_raw_fd(), 0),
        }
    };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// One CPU's mapped ring: the control page plus `2^n` data pages.
pub struct PerfRing {
    cpu: u32,
    fd: OwnedFd,
    map: MmapRaw,
    data_offset: usize,
    data_size: usize,
    tail: u64,
    scratch: Vec<u8>,
}

impl std::fmt::Debug for PerfRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PerfRing")
            .field("cpu", &self.cpu)
            .field("data_size", &self.data_size)
            .field("tail", &self.tail)
            .finish()
    }
}

impl PerfRing {
    fn map(cpu: u32, fd: OwnedFd, pages: usize) -> Result<Self> {
        let ps = page_size();
        let len = (pages + 1) * ps;
        let map = MmapOptions::new()
            .len(len)
            .map_raw(fd.as_raw_fd())
            .map_err(|e| Error::Mmap {
                cpu,
                message: explain_mmap_error(e.raw_os_error().unwrap_or(0), cpu, pages),
                source: e,
            })?;
        let mut ring = Self {
            cpu,
            fd,
            map,
            data_offset: ps,
            data_size: pages * ps,
            tail: 0,
            scratch: Vec::new(),
        };
        // Kernels since 4.1 publish the data area's offset and size in the
        // control page; trust them when they are consistent with the map.
        let page = ring.map.as_ptr() as *const b::perf_event_mmap_page;
        // SAFETY:
        // - The mapping is at least one page long and starts with the
        //   kernel's perf_event_mmap_page; data_offset/data_size are written
        //   once by the kernel at mmap time and never change, so plain reads
        //   through a raw pointer (no reference) race with nothing.
        let (off, size, tail) = unsafe {
            (
                std::ptr::addr_of!((*page).data_offset).read_volatile(),
                std::ptr::addr_of!((*page).data_size).read_volatile(),
                std::ptr::addr_of!((*page).data_tail).read_volatile(),
            )
        };
        if off as usize == ps && size as usize == pages * ps {
            ring.data_offset = off as usize;
            ring.data_size = size as usize;
        }
        ring.tail = tail;
        Ok(ring)
    }

    fn head_ptr(&self) -> &AtomicU64 {
        let page = self.map.as_ptr() as *const b::perf_event_mmap_page;
        // SAFETY:
        // - data_head is an 8-byte-aligned u64 inside the mapped control
        //   page, which lives as long as `self.map` (the borrow of self).
        // - It is only ever accessed atomically (by us here, and by the
        //   kernel with smp_store_release / local64 ops), so viewing it as an
        //   AtomicU64 is sound.
        unsafe { AtomicU64::from_ptr(std::ptr::addr_of!((*page).data_head) as *mut u64) }
    }

    fn tail_ptr(&self) -> &AtomicU64 {
        let page = self.map.as_ptr() as *const b::perf_event_mmap_page;
        // SAFETY:
        // - data_tail is an aligned u64 in the mapped control page, alive as
        //   long as `self.map`; the kernel only reads it (READ_ONCE), we are
        //   its only writer, and we access it only atomically.
        unsafe { AtomicU64::from_ptr(std::ptr::addr_of!((*page).data_tail) as *mut u64) }
    }

    /// The event fd (pollable: readable when the ring passes its watermark).
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

impl RecordRing for PerfRing {
    fn cpu(&self) -> u32 {
        self.cpu
    }

    fn data_size(&self) -> usize {
        self.data_size
    }

    fn pending(&self) -> usize {
        // ATOMICS: Acquire pairs with the kernel's smp_wmb (B) before its
        // store of data_head in perf_output_put_handle.
        let head = self.head_ptr().load(Ordering::Acquire);
        head.wrapping_sub(self.tail) as usize
    }

    fn read_records<F: FnMut(RawRecord<'_>) -> bool>(&mut self, f: F) -> ReadStats {
        // ATOMICS: Acquire pairs with the kernel's smp_wmb (B) between its
        // record writes and its store of data_head (perf_output_put_handle);
        // every byte in [tail, head) is therefore visible to us (C).
        let head = self.head_ptr().load(Ordering::Acquire);
        let avail = head.wrapping_sub(self.tail) as usize;
        if avail == 0 {
            return ReadStats::default();
        }
        if avail > self.data_size {
            // The kernel never overruns the tail in non-overwrite mode; if it
            // ever appears to, resynchronise instead of reading garbage.
            let stats = ReadStats {
                corrupt_bytes: avail as u64,
                bytes: avail as u64,
                ..Default::default()
            };
            self.tail = head;
            // ATOMICS: Release pairs with the kernel's READ_ONCE(data_tail) + smp_mb (A).
            self.tail_ptr().store(self.tail, Ordering::Release);
            return stats;
        }
        let (start, first, second) = split(self.tail, head, self.data_size);
        let stats = {
            let base = self.map.as_ptr();
            // SAFETY:
            // - [data_offset, data_offset + data_size) lies inside the mapping
            //   (it was sized (pages + 1) * page_size and checked above).
            // - The two slices cover exactly [tail, head) modulo the size:
            //   bytes the kernel finished writing before publishing `head`
            //   (Acquire above) and that it will not touch again until we
            //   advance data_tail past them, which happens only after these
            //   slices are dropped at the end of this block.
            let (a, z) = unsafe {
                let data = base.add(self.data_offset);
                (
                    std::slice::from_raw_parts(data.add(start), first),
                    std::slice::from_raw_parts(data, second),
                )
            };
            walk(a, z, &mut self.scratch, f)
        };
        self.tail = self.tail.wrapping_add(stats.bytes);
        // ATOMICS: Release orders our reads of the records before the tail
        // store (D); pairs with the kernel's READ_ONCE(data_tail) + smp_mb
        // (A) in perf_output_begin, so it never overwrites unread bytes.
        self.tail_ptr().store(self.tail, Ordering::Release);
        stats
    }
}

/// Per-CPU events for one sampling session.
#[derive(Debug)]
pub struct Sampler {
    rings: Vec<PerfRing>,
    /// Extra fds (per-pid events redirected into the CPU's ring).
    extra: Vec<(u32, OwnedFd)>,
    /// `--off-cpu`: one ring per CPU for the context-switch event (its own
    /// ring, so a switch storm costs no on-CPU sample), in CPU order.
    offcpu: Vec<PerfRing>,
    /// Extra off-CPU fds (per-pid events redirected into the CPU's
    /// off-CPU ring).
    offcpu_extra: Vec<(u32, OwnedFd)>,
    layout: Layout,
}

/// The error of an event that did not open: `what` is (event name, kernel
/// sampled, frequency), for the explanation.
fn open_error(
    e: io::Error,
    (event, kernel, frequency): (&str, bool, Option<u64>),
    pid: i32,
    cpu: u32,
    cgroup: bool,
) -> Error {
    let ctx = OpenContext {
        event,
        system_wide: pid == -1 || cgroup,
        kernel,
        frequency,
        pid: (pid > 0 && !cgroup).then_some(pid),
        paranoid: None,
        max_sample_rate: None,
    }
    .with_sysctls();
    Error::Open {
        cpu: Some(cpu),
        message: explain_open_error(e.raw_os_error().unwrap_or(0), &ctx),
        source: e,
    }
}

/// Opens an event per CPU and pid (`open(pid, cpu)`) and maps one ring
/// of `pages` per CPU: the first pid's event owns the ring, the others'
/// output is redirected into it (`SET_OUTPUT`). The rings in CPU order,
/// and the redirected events' fds.
#[allow(clippy::type_complexity)]
fn per_cpu_rings(
    cpus: &[u32],
    pids: &[i32],
    pages: usize,
    mut open: impl FnMut(i32, u32) -> Result<OwnedFd>,
) -> Result<(Vec<PerfRing>, Vec<(u32, OwnedFd)>)> {
    let mut rings = Vec::with_capacity(cpus.len());
    let mut extra = Vec::new();
    for &cpu in cpus {
        let mut first: Option<OwnedFd> = None;
        for &pid in pids {
            let fd = open(pid, cpu)?;
            match &first {
                None => first = Some(fd),
                Some(owner) => {
                    // SAFETY:
                    // - SET_OUTPUT takes the fd of another event on the
                    //   same CPU; both fds are alive for the call.
                    let r = unsafe {
                        perf_event_open_sys::ioctls::SET_OUTPUT(fd.as_raw_fd(), owner.as_raw_fd())
                    };
                    if r < 0 {
                        return Err(Error::Io {
                            op: "redirect output (SET_OUTPUT)",
                            cpu,
                            source: io::Error::last_os_error(),
                        });
                    }
                    extra.push((cpu, fd));
                }
            }
        }
        let fd = first.expect("at least one pid per cpu");
        rings.push(PerfRing::map(cpu, fd, pages)?);
    }
    Ok((rings, extra))
}

impl Sampler {
    /// Opens one event per CPU (per CPU and process with [`Target::Pids`]),
    /// maps one ring per CPU, and leaves everything disabled.
    pub fn open(config: &SamplerConfig) -> Result<Self> {
        config.validate()?;
        let cpus = config.cpu_list()?;
        let pids: Vec<i32> = match &config.target {
            Target::SystemWide => vec![-1],
            Target::Pids(p) => p.clone(),
        };
        // -G: the cgroup directory's fd stands for the pid, with
        // PERF_FLAG_PID_CGROUP (per CPU only, as perf does).
        let cgroup_fd = match &config.cgroup_filter {
            Some(dir) => Some(std::fs::File::open(dir).map_err(|e| {
                Error::Config(format!("-G {}: cannot open the cgroup: {e}", dir.display()))
            })?),
            None => None,
        };
        let (pids, open_flag) = match &cgroup_fd {
            Some(f) => (vec![f.as_raw_fd()], b::PERF_FLAG_PID_CGROUP),
            None => (pids, 0),
        };
        let data_bytes = config.data_pages * page_size();
        let cgroup = cgroup_fd.is_some();
        let frequency = match config.rate {
            Rate::Frequency(f) => Some(f),
            Rate::Period(_) => None,
        };
        let mut with_build_id = true;
        let (rings, extra) = per_cpu_rings(&cpus, &pids, config.data_pages, |pid, cpu| {
            let mut attr = make_attr(config, with_build_id, data_bytes);
            let mut res = open_flags(&mut attr, pid, cpu as i32, open_flag);
            if with_build_id && matches!(&res, Err(e) if e.raw_os_error() == Some(libc::EINVAL)) {
                // Kernels before 5.12 reject build_id: fall back to inode-form MMAP2.
                let mut attr = make_attr(config, false, data_bytes);
                if let Ok(fd) = open_flags(&mut attr, pid, cpu as i32, open_flag) {
                    with_build_id = false;
                    res = Ok(fd);
                }
            }
            res.map_err(|e| {
                let what = (&config.event.name[..], !config.exclude_kernel, frequency);
                open_error(e, what, pid, cpu, cgroup)
            })
        })?;
        let (offcpu, offcpu_extra) = if config.off_cpu {
            let bytes = config.offcpu_pages * page_size();
            per_cpu_rings(&cpus, &pids, config.offcpu_pages, |pid, cpu| {
                let mut attr = make_offcpu_attr(config, bytes);
                open_flags(&mut attr, pid, cpu as i32, open_flag).map_err(|e| {
                    let what = ("context-switches (--off-cpu)", true, None);
                    open_error(e, what, pid, cpu, cgroup)
                })
            })?
        } else {
            (Vec::new(), Vec::new())
        };
        Ok(Self {
            rings,
            extra,
            offcpu,
            offcpu_extra,
            layout: config.layout(),
        })
    }

    /// The off-CPU rings (`--off-cpu`), one per CPU in CPU order; empty
    /// without off-CPU recording.
    pub fn offcpu_rings(&self) -> &[PerfRing] {
        &self.offcpu
    }

    /// The off-CPU rings, mutable, for draining.
    pub fn offcpu_rings_mut(&mut self) -> &mut [PerfRing] {
        &mut self.offcpu
    }

    /// The rings and the off-CPU rings, both mutable, each in CPU order.
    pub fn all_rings_mut(&mut self) -> (&mut [PerfRing], &mut [PerfRing]) {
        (&mut self.rings, &mut self.offcpu)
    }

    /// Each CPU's lost count of the off-CPU events (`PERF_FORMAT_LOST`),
    /// summed over the events writing into that CPU's off-CPU ring; empty
    /// without off-CPU recording.
    pub fn offcpu_lost_counts(&self) -> Result<Vec<(u32, u64)>> {
        let mut out: Vec<(u32, u64)> = self.offcpu.iter().map(|r| (r.cpu, 0)).collect();
        let fds = self
            .offcpu
            .iter()
            .map(|r| (r.cpu, r.fd.as_fd()))
            .chain(self.offcpu_extra.iter().map(|(c, fd)| (*c, fd.as_fd())));
        for (cpu, fd) in fds {
            let lost = read_lost(fd).map_err(|source| Error::Io {
                op: "read off-CPU lost count",
                cpu,
                source,
            })?;
            if let Some(e) = out.iter_mut().find(|e| e.0 == cpu) {
                e.1 += lost;
            }
        }
        Ok(out)
    }

    /// The record layout these events write.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    fn all_fds(&self) -> impl Iterator<Item = (u32, BorrowedFd<'_>)> {
        self.sampled_fds().chain(
            self.offcpu
                .iter()
                .map(|r| (r.cpu, r.fd.as_fd()))
                .chain(self.offcpu_extra.iter().map(|(c, fd)| (*c, fd.as_fd()))),
        )
    }

    /// The sampled event's fds (not the off-CPU ones).
    fn sampled_fds(&self) -> impl Iterator<Item = (u32, BorrowedFd<'_>)> {
        self.rings
            .iter()
            .map(|r| (r.cpu, r.fd.as_fd()))
            .chain(self.extra.iter().map(|(c, fd)| (*c, fd.as_fd())))
    }

    /// Enables every event (as close together as the kernel allows).
    pub fn enable(&self) -> Result<()> {
        for (cpu, fd) in self.all_fds() {
            ioctl_simple(fd, 0).map_err(|source| Error::Io {
                op: "enable",
                cpu,
                source,
            })?;
        }
        Ok(())
    }

    /// Disables every event. Records already in the rings stay there.
    pub fn disable(&self) -> Result<()> {
        for (cpu, fd) in self.all_fds() {
            ioctl_simple(fd, 1).map_err(|source| Error::Io {
                op: "disable",
                cpu,
                source,
            })?;
        }
        Ok(())
    }

    /// The rings, one per CPU, in CPU order.
    pub fn rings(&self) -> &[PerfRing] {
        &self.rings
    }

    /// The rings, mutable, for draining.
    pub fn rings_mut(&mut self) -> &mut [PerfRing] {
        &mut self.rings
    }

    /// Reads each CPU's lost count (`PERF_FORMAT_LOST`), summed over the
    /// events writing into that CPU's ring: `(cpu, lost)` in CPU order.
    pub fn lost_counts(&self) -> Result<Vec<(u32, u64)>> {
        let mut out: Vec<(u32, u64)> = self.rings.iter().map(|r| (r.cpu, 0)).collect();
        for (cpu, fd) in self.sampled_fds() {
            let lost = read_lost(fd).map_err(|source| Error::Io {
                op: "read lost count",
                cpu,
                source,
            })?;
            if let Some(e) = out.iter_mut().find(|e| e.0 == cpu) {
                e.1 += lost;
            }
        }
        Ok(out)
    }
}

/// True when the kernel can give each sample's cgroup
/// (`PERF_SAMPLE_CGROUP`, Linux 5.7+): a disabled dummy event on this
/// thread asking for it opens. False only when the kernel refuses the
/// bit (EINVAL); any other refusal (no permission) is the real events'
/// problem and answers true, so their own open says why.
pub fn kernel_samples_cgroups() -> bool {
    let mut attr = b::perf_event_attr {
        type_: b::PERF_TYPE_SOFTWARE,
        size: std::mem::size_of::<b::perf_event_attr>() as u32,
        config: b::PERF_COUNT_SW_DUMMY as u64,
        sample_type: (b::PERF_SAMPLE_IP | b::PERF_SAMPLE_CGROUP) as u64,
        ..Default::default()
    };
    attr.set_disabled(1);
    attr.set_cgroup(1);
    attr.set_exclude_kernel(1);
    attr.set_exclude_hv(1);
    match open_one(&mut attr, 0, -1) {
        Ok(_) => true,
        Err(e) => e.raw_os_error() != Some(libc::EINVAL),
    }
}

/// Reads `{ value, lost }` from an event opened with `PERF_FORMAT_LOST`.
fn read_lost(fd: BorrowedFd<'_>) -> io::Result<u64> {
    let mut buf = [0u64; 2];
    // SAFETY:
    // - `buf` is 16 writable bytes, exactly what read_format = LOST yields
    //   (value, lost); the fd is alive for the call.
    let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr() as *mut libc::c_void, 16) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    if n != 16 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("read {n} bytes of the event count, expected 16"),
        ));
    }
    Ok(buf[1])
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The per-CPU open loop over a fake 256-CPU topology with an offline
    /// CPU (64): one open and one ring per online CPU, in CPU order, each
    /// ring knowing its CPU. The "events" are a file of a control page and
    /// one data page (mapped as the kernel's ring would be, and empty).
    #[test]
    fn one_ring_per_online_cpu_of_a_fake_256_cpu_topology() {
        let root = crate::config::fake_sysfs("opens", "0-63,65-255", Some("0-255"));
        let config = SamplerConfig::new(crate::EventSpec::parse("cpu-clock").unwrap());
        let cpus = config.cpu_list_in(&root).unwrap();
        let ring_file = root.join("ring");
        std::fs::File::create(&ring_file)
            .unwrap()
            .set_len(2 * page_size() as u64)
            .unwrap();
        let mut opened = Vec::new();
        let (mut rings, extra) = per_cpu_rings(&cpus, &[-1], 1, |pid, cpu| {
            opened.push((pid, cpu));
            let f = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open(&ring_file)
                .map_err(|source| Error::Io {
                    op: "open a fake ring",
                    cpu,
                    source,
                })?;
            Ok(OwnedFd::from(f))
        })
        .unwrap();
        assert_eq!(opened.len(), 255);
        assert!(opened.iter().all(|&(pid, _)| pid == -1));
        assert!(extra.is_empty());
        let ring_cpus: Vec<u32> = rings.iter().map(|r| r.cpu()).collect();
        assert_eq!(ring_cpus, cpus);
        assert!(!ring_cpus.contains(&64) && ring_cpus[254] == 255);
        for r in &mut rings {
            assert_eq!((r.data_size(), r.pending()), (page_size(), 0));
            assert_eq!(r.read_records(|_| true).records, 0);
        }
        // An open failing on one CPU is that CPU's error, not a panic or
        // a ring short.
        let e = per_cpu_rings(&cpus, &[-1], 1, |_, cpu| {
            Err(Error::Io {
                op: "open",
                cpu,
                source: io::Error::from_raw_os_error(libc::ENODEV),
            })
        })
        .unwrap_err();
        assert!(matches!(e, Error::Io { cpu: 0, .. }), "{e}");
        drop(rings);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
