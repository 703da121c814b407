//! The sync stage's emitting part ([`Emitting`]): the chunk encoder and
//! what it has written — the current CPU, task and cookie (a switch only
//! on change), the chunk's metadata (kept to re-emit if it is dropped) and
//! that of dropped chunks waiting, the session-wide stack table, scratch
//! for one sample's frames — and the stage's writes through it: samples,
//! cookie definitions once per file, cgroup switches.
//!
//! Off-CPU intervals (a later issue) would be written here: a switch-out
//! stack through the same stack table, an interval per thread as its own
//! event after the task switch.

use super::SyncStage;
use crate::stacks::StackIds;
use profkit_eventlog::{ChunkEncoder, Cookie, Event, Frame};

/// See the module docs.
#[derive(Debug)]
pub(super) struct Emitting {
    /// The chunk being written.
    pub(super) enc: ChunkEncoder,
    /// Metadata events of the chunk being written.
    pub(super) meta: Vec<Event>,
    /// Metadata of dropped chunks, written again first thing next round.
    pub(super) pending_meta: Vec<Event>,
    /// The session-wide stack ids and which the current file defines.
    pub(super) stacks: StackIds,
    pub(super) cur_cpu: Option<u32>,
    pub(super) cur_tid: Option<u32>,
    pub(super) cur_cookie: Option<Cookie>,
    /// Scratch for one sample's resolved frames.
    pub(super) frames: Vec<Frame>,
    /// Scratch for one sample's callchain with its unwound user part.
    pub(super) chain: Vec<u64>,
}

impl Emitting {
    pub(super) fn new() -> Self {
        let mut enc = ChunkEncoder::with_capacity(1 << 20);
        enc.set_time_unit(crate::SAMPLE_TIME_UNIT_NS);
        Emitting {
            enc,
            meta: Vec::new(),
            pending_meta: Vec::new(),
            stacks: StackIds::default(),
            cur_cpu: None,
            cur_tid: None,
            cur_cookie: None,
            frames: Vec::new(),
            chain: Vec::new(),
        }
    }

    /// Writes `e`, kept as the chunk's metadata if it defines something.
    pub(super) fn marker(&mut self, e: Event) {
        self.enc.event(&e);
        if matches!(
            e,
            Event::CookieDef(_)
                | Event::Comm { .. }
                | Event::ModuleLoad { .. }
                | Event::StackDef { .. }
                | Event::StackDefOn { .. }
                | Event::CgroupDef { .. }
                | Event::JitCode(_)
        ) {
            self.meta.push(e);
        }
    }
}

impl SyncStage {
    #[inline]
    pub(super) fn marker(&mut self, e: Event) {
        self.out.marker(e);
    }

    #[inline]
    pub(super) fn switch_cpu(&mut self, cpu: u32) {
        self.out.enc.event(&Event::CpuSwitch { cpu });
        self.acct(cpu);
        self.out.cur_cpu = Some(cpu);
        self.out.cur_tid = None;
        self.out.cur_cookie = None;
    }

    pub(super) fn ensure_defined(&mut self, cookie: Cookie) {
        if let Some(e) = self.res.undefined_entry(cookie) {
            self.marker(Event::CookieDef(e));
        }
    }

    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub(super) fn emit_sample(
        &mut self,
        cpu: u32,
        pid: u32,
        tid: u32,
        kernel: bool,
        cookie: Cookie,
        off: u64,
        stack: Option<u32>,
        cgroup: u64,
        time: u64,
    ) {
        let cookie = if kernel {
            cookie
        } else {
            self.jit_cookie(pid, cookie, off, time)
        };
        if self.out.cur_cpu != Some(cpu) {
            self.switch_cpu(cpu);
        }
        if self.res.cgroups.on() {
            self.set_cgroup(pid, cgroup);
        }
        if self.out.cur_tid != Some(tid) {
            self.out.cur_tid = Some(tid);
            self.announce(pid, tid);
        }
        if self.out.cur_cookie != Some(cookie) {
            self.out.cur_cookie = Some(cookie);
            self.ensure_defined(cookie);
        }
        // 0: the record had no time (an imported perf.data file without
        // PERF_SAMPLE_TIME); the sample keeps its round's time.
        if time != 0 {
            self.out.enc.time(time);
        }
        match stack {
            None => self.out.enc.sample(cpu, pid, tid, kernel, cookie, off),
            Some(id) => self
                .out
                .enc
                .sample_with_stack(cpu, pid, tid, kernel, cookie, off, id),
        }
    }

    /// The cgroup state for a sample of `pid` (whose sample gave `id`):
    /// its definition first, once per file.
    #[inline(never)]
    fn set_cgroup(&mut self, pid: u32, id: u64) {
        let res = &mut self.res;
        let id = if res.cgroups.mode == profkit_perf::CgroupRecording::Proc {
            res.cgroups.of_pid(res.probe.as_mut(), pid).unwrap_or(id)
        } else {
            id
        };
        if let Some((id, path)) = self.res.cgroups.define(id) {
            self.marker(Event::CgroupDef { id, path });
        }
        self.out.enc.cgroup(id);
    }
}
