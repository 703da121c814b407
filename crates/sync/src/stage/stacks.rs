//! The sync stage's call stacks: a sample's callchain, with DWARF call
//! graphs its copied user stack unwound first (`crate::unwind`), resolved
//! into frames and a session-wide stack id whose definition is written
//! once per file (`StackDefOn` on an outer part already written, for
//! DWARF stacks).

use super::SyncStage;
use crate::stacks::{resolve_chain, StackStats, MAX_STACK_FRAMES};
use crate::unwind::{source_of, UnwindEnd, UnwindStats};
use profkit_eventlog::{broken, Event, Frame, COOKIE_UNKNOWN};
use profkit_perf::{UserStack, PERF_CONTEXT_USER};

/// A deferred sample's user registers and stack, owned.
#[derive(Debug, Clone)]
pub(super) struct DeferredUser {
    abi: u64,
    bp: u64,
    sp: u64,
    ip: u64,
    stack: Vec<u8>,
}

impl DeferredUser {
    pub(super) fn new(u: &UserStack<'_>) -> Self {
        DeferredUser {
            abi: u.abi,
            bp: u.bp,
            sp: u.sp,
            ip: u.ip,
            stack: u.stack.to_vec(),
        }
    }

    pub(super) fn get(&self) -> UserStack<'_> {
        UserStack {
            abi: self.abi,
            bp: self.bp,
            sp: self.sp,
            ip: self.ip,
            stack: &self.stack,
        }
    }
}

impl SyncStage {
    /// Resolves a sample's callers from its raw `chain` into
    /// `self.out.frames` (empty when it has no caller). `end`: how the
    /// DWARF unwind of its user part ended (`Complete` for frame
    /// pointers). `count`: an on-CPU sample, whose unknown, truncated and
    /// cut stacks are counted in the CPU's accounting.
    #[allow(clippy::too_many_arguments)]
    fn frames_of(
        &mut self,
        cpu: u32,
        pid: u32,
        ip: u64,
        time: u64,
        kernel: bool,
        chain: impl Iterator<Item = u64>,
        end: UnwindEnd,
        count: bool,
    ) {
        let mut frames = std::mem::take(&mut self.out.frames);
        let mut info = resolve_chain(
            chain,
            ip,
            kernel,
            self.procs.get(pid),
            &self.res.kernel,
            time,
            &mut frames,
        );
        if end != UnwindEnd::Complete && !info.truncated {
            // An unwind that stopped short: the stack ends with `[unknown]`
            // (unless it already does).
            if frames.last().is_none_or(|f| f.cookie != COOKIE_UNKNOWN)
                && frames.len() < MAX_STACK_FRAMES
            {
                frames.push(Frame {
                    cookie: COOKIE_UNKNOWN,
                    offset: match end {
                        UnwindEnd::Failed(why) => why,
                        UnwindEnd::Cut => broken::CUT,
                        UnwindEnd::Complete => broken::NOT_SAID,
                    },
                    kernel: false,
                });
            }
            match end {
                UnwindEnd::Cut if count => self.acct(cpu).user_stacks_cut += 1,
                UnwindEnd::Cut => {}
                _ => info.unknown = true,
            }
        }
        self.jit_frames(pid, time, &mut frames);
        if count && (info.unknown || info.truncated) {
            let a = self.acct(cpu);
            a.stacks_unknown += u64::from(info.unknown);
            a.stacks_truncated += u64::from(info.truncated);
        }
        self.out.frames = frames;
    }

    /// The stack id of `frames` (its definition written first if this
    /// session file has not had it yet); None for no frames, or once the
    /// id space is exhausted.
    pub(super) fn stack_id(&mut self, frames: &[Frame]) -> Option<u32> {
        if frames.is_empty() {
            return None;
        }
        match self.out.stacks.id(frames) {
            Some((id, true)) => {
                self.define_stack(id, frames);
                Some(id)
            }
            Some((id, false)) => Some(id),
            None => None,
        }
    }

    /// The stack id of a sample's callers ([`SyncStage::frames_with_user`],
    /// then [`SyncStage::stack_id`]): with DWARF call graphs the kernel
    /// part of `chain` (a user part in it is dropped), then the user stack
    /// unwound here.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn stack_with_user(
        &mut self,
        cpu: u32,
        pid: u32,
        ip: u64,
        time: u64,
        kernel: bool,
        chain: impl Iterator<Item = u64>,
        user: Option<&UserStack<'_>>,
    ) -> Option<u32> {
        self.frames_with_user(cpu, pid, ip, time, kernel, chain, user, true);
        let frames = std::mem::take(&mut self.out.frames);
        let stack = self.stack_id(&frames);
        self.out.frames = frames;
        stack
    }

    /// The frames of [`SyncStage::stack_with_user`], left in
    /// `self.out.frames` (off-CPU switch-outs keep them until their
    /// interval ends). `count`: see [`SyncStage::frames_of`].
    #[allow(clippy::too_many_arguments)]
    pub(super) fn frames_with_user(
        &mut self,
        cpu: u32,
        pid: u32,
        ip: u64,
        time: u64,
        kernel: bool,
        chain: impl Iterator<Item = u64>,
        user: Option<&UserStack<'_>>,
        count: bool,
    ) {
        let Some(u) = user.filter(|_| self.opts.layout.user_stack > 0) else {
            return self.frames_of(
                cpu,
                pid,
                ip,
                time,
                kernel,
                chain,
                UnwindEnd::Complete,
                count,
            );
        };
        let mut c = std::mem::take(&mut self.out.chain);
        c.clear();
        c.extend(chain.take_while(|&a| a != PERF_CONTEXT_USER));
        let sources = &self.opts.debug_frame;
        let unwinder = self.unwinder.get_or_insert_with(|| {
            Box::new(crate::unwind::DwarfUnwinder::new(
                crate::unwind::CFI_TIMEOUT,
                sources.clone(),
            ))
        });
        let known = &self.res.known;
        let probe = &mut self.res.probe;
        let proc_root = probe.proc_root().map(|p| p.to_path_buf());
        let mut jit = ProcessJit {
            pid,
            probe,
            dumps: &self.jit,
        };
        let end = unwinder.unwind(
            u,
            self.opts.layout.user_stack,
            self.procs.get(pid),
            time,
            |m| {
                known
                    .get(&m.cookie)
                    .and_then(|e| source_of(e, m, pid, proc_root.as_deref()))
            },
            &mut jit,
            &mut c,
        );
        self.frames_of(cpu, pid, ip, time, kernel, c.iter().copied(), end, count);
        self.out.chain = c;
    }

    /// Binaries whose unwind information failed the CFI check, as
    /// `PATH: reason` (the first few; `UnwindStats::refused` counts all).
    pub fn unwind_refusals(&self) -> Vec<String> {
        self.unwinder.as_ref().map_or_else(Vec::new, |u| {
            u.refusals()
                .iter()
                .map(|(c, why)| {
                    let path = self.res.known.get(c).map_or("?", |e| e.path.as_str());
                    format!("{path}: {why}")
                })
                .collect()
        })
    }

    /// Binaries demoted to frame-pointer stepping because their frames
    /// cost too much to unwind, as `PATH: cost` (the first few;
    /// `UnwindStats::demoted` counts all).
    pub fn unwind_demotions(&self) -> Vec<String> {
        self.unwinder.as_ref().map_or_else(Vec::new, |u| {
            u.demotions()
                .iter()
                .map(|(c, why)| {
                    let path = self.res.known.get(c).map_or("?", |e| e.path.as_str());
                    format!("{path}: {why}")
                })
                .collect()
        })
    }

    /// The DWARF unwinder, made now if it was not (tests set its budget
    /// and clock).
    #[cfg(test)]
    pub(crate) fn unwinder_mut(&mut self) -> &mut crate::unwind::DwarfUnwinder {
        let sources = &self.opts.debug_frame;
        self.unwinder.get_or_insert_with(|| {
            Box::new(crate::unwind::DwarfUnwinder::new(
                crate::unwind::CFI_TIMEOUT,
                sources.clone(),
            ))
        })
    }

    /// The DWARF unwinder's counters (zero without DWARF call graphs).
    pub fn unwind_stats(&self) -> UnwindStats {
        self.unwinder
            .as_ref()
            .map_or_else(UnwindStats::default, |u| u.stats())
    }

    /// The stack table's counters.
    pub fn stack_stats(&self) -> StackStats {
        self.out.stacks.stats()
    }

    /// Bounds the stack table's memory (default
    /// [`crate::DEFAULT_STACK_TABLE_BYTES`]); see [`StackStats`] for what
    /// happens at the bound.
    pub fn set_stack_table_limit(&mut self, bytes: usize) {
        self.out.stacks.set_limit(bytes);
    }

    /// Writes a `StackDef`, after the definitions of the cookies it uses.
    #[cold]
    fn define_stack(&mut self, id: u32, frames: &[Frame]) {
        let mut last = None;
        for f in frames {
            if last != Some(f.cookie) {
                last = Some(f.cookie);
                self.ensure_defined(f.cookie);
            }
        }
        // DWARF stacks are deep and varied (recursion): each is written on
        // the longest outer part already written (`StackDefOn`, version 3).
        let parent = if self.opts.layout.user_stack > 0 {
            self.out.stacks.parent_of(id, frames)
        } else {
            None
        };
        self.marker(match parent {
            Some((parent, shared)) => Event::StackDefOn {
                id,
                parent,
                frames: frames[..frames.len() - shared].to_vec(),
            },
            None => Event::StackDef {
                id,
                frames: frames.to_vec(),
            },
        });
    }
}

/// A process's generated code as the unwinder sees it: its memory read
/// through the stage's probe.
struct ProcessJit<'a> {
    pid: u32,
    probe: &'a mut Box<dyn crate::probe::HostProbe>,
    dumps: &'a crate::jit::JitDumps,
}

impl crate::unwind::JitFrames for ProcessJit<'_> {
    fn pid(&self) -> u32 {
        self.pid
    }

    fn code_at(&mut self, addr: u64, time: u64) -> Option<crate::unwind::JitCodeInfo> {
        self.dumps.code_at(self.pid, addr, time)
    }

    fn read_memory(&mut self, addr: u64, time: u64, buf: &mut [u8]) -> usize {
        match self.probe.read_memory(self.pid, addr, buf) {
            0 => self.dumps.read_code(self.pid, addr, time, buf),
            n => n,
        }
    }
}
