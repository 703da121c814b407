//! [`ChunkEncoder`]: turns samples and markers into a chunk payload.

use crate::codec::{put_uvar, tag, uvar_len, zigzag, COOKIE_SLOTS, MAX_TIME_UNIT_NS, MAX_VARINT};
use crate::event::{Cookie, Event, ExpandedSample};
use crate::markers::push_marker;

/// How [`ChunkEncoder`] spells a sample's offset.
///
/// The decoder reads all three; the choice only changes the size.
/// Measured on the realistic stream of [`crate::synth`] (see `docs/FORMAT.md`),
/// `Adaptive` is the smallest and is the default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OffsetCoding {
    /// Always the absolute offset (`SAMPLE`).
    Absolute,
    /// Always the zigzag delta against the previous offset in the same
    /// cookie slot (`SAMPLE_DELTA`).
    Delta,
    /// Per sample, whichever of the two is shorter (absolute on a tie).
    #[default]
    Adaptive,
}

/// Builds one chunk payload: the event stream of one sync round.
///
/// [`ChunkEncoder::sample`] is the hot path: it emits `CpuSwitch`,
/// `TaskSwitch`, `Mode` and `CookieSwitch` only when the value differs from
/// the encoder's state, then the sample. It does not allocate once the
/// buffer has grown to the round's size (the buffer is kept across
/// [`ChunkEncoder::clear`]).
///
/// The encoder also counts samples per CPU (`cpu_samples`,
/// `per_cpu_samples`), so the sync stage need not count again.
///
/// ```
/// use profkit_eventlog::{ChunkEncoder, Event, LostKind};
/// let mut enc = ChunkEncoder::new();
/// enc.sample(0, 100, 100, false, 0xfeed, 0x1234);
/// enc.event(&Event::Lost { cpu: 0, kind: LostKind::Ring, count: 3 });
/// assert_eq!(enc.samples(), 1);
/// assert_eq!(enc.cpu_samples(0), 1);
/// assert!(!enc.bytes().is_empty());
/// ```
#[derive(Debug, Clone)]
pub struct ChunkEncoder {
    buf: Vec<u8>,
    cpu: Option<u32>,
    task: Option<(u32, u32)>,
    kernel: Option<bool>,
    cookie: Option<Cookie>,
    /// The cgroup of the samples that follow (`CgroupSwitch`), unset by a
    /// CPU switch.
    cgroup: Option<u64>,
    /// Slot of `cookie` (meaningful when `cookie` is set).
    cur_slot: usize,
    slots: [Cookie; COOKIE_SLOTS],
    last_off: [u64; COOKIE_SLOTS],
    /// Last stack id per cookie slot (the base of stack-id deltas).
    last_stack: [u32; COOKIE_SLOTS],
    filled: usize,
    next_slot: usize,
    coding: OffsetCoding,
    samples: u64,
    /// Samples since the current CPU was set, not yet folded into `per_cpu`.
    run: u64,
    per_cpu: Vec<(u32, u64)>,
    /// Sample times: ns per tick, whether this chunk's `TimeUnit` is
    /// written, the next sample's time (set by [`ChunkEncoder::time`]),
    /// and the CPU run's last time and step (ticks), as the decoder keeps
    /// them.
    time_unit: u64,
    next_unit: u64,
    unit_written: bool,
    next_time: Option<u64>,
    have_time: bool,
    last_time: i64,
    last_step: i64,
}

/// Sample times at or past this (2⁶² ns, 146 years of uptime) are written
/// as this: it keeps every time residual within an i64.
pub const MAX_SAMPLE_TIME_NS: u64 = (1 << 62) - 1;

impl Default for ChunkEncoder {
    fn default() -> Self {
        Self::new()
    }
}

impl ChunkEncoder {
    /// An empty encoder.
    pub fn new() -> Self {
        Self::with_capacity(0)
    }

    /// An empty encoder whose buffer holds `bytes` before it grows.
    pub fn with_capacity(bytes: usize) -> Self {
        ChunkEncoder {
            buf: Vec::with_capacity(bytes),
            cpu: None,
            task: None,
            kernel: None,
            cookie: None,
            cgroup: None,
            cur_slot: 0,
            slots: [0; COOKIE_SLOTS],
            last_off: [0; COOKIE_SLOTS],
            last_stack: [0; COOKIE_SLOTS],
            filled: 0,
            next_slot: 0,
            coding: OffsetCoding::default(),
            samples: 0,
            run: 0,
            per_cpu: Vec::new(),
            time_unit: 1,
            next_unit: 1,
            unit_written: false,
            next_time: None,
            have_time: false,
            last_time: 0,
            last_step: 0,
        }
    }

    /// Sets the resolution of sample times, in ns per tick (clamped to
    /// `1..=`[`MAX_TIME_UNIT_NS`]; 1 until set): a chunk's first timed
    /// sample is preceded by a `TimeUnit` when it is not 1. Coarser ticks
    /// cost fewer bytes (docs/FORMAT.md, Measurements). Takes effect at
    /// the next [`ChunkEncoder::clear`] once this chunk has a timed sample.
    pub fn set_time_unit(&mut self, ns: u64) {
        self.next_unit = ns.clamp(1, MAX_TIME_UNIT_NS);
        if !self.unit_written {
            self.time_unit = self.next_unit;
        }
    }

    /// The time of the next sample (CLOCK_MONOTONIC ns, rounded down to
    /// the time unit; at most [`MAX_SAMPLE_TIME_NS`]): that sample is
    /// written with a timed tag. Samples without a time before them are
    /// written as before.
    #[inline(always)]
    pub fn time(&mut self, ns: u64) {
        self.next_time = Some(ns);
    }

    /// Chooses how sample offsets are spelled (for measurements; the
    /// default is the smallest).
    pub fn set_offset_coding(&mut self, coding: OffsetCoding) {
        self.coding = coding;
    }

    /// Starts a new chunk: forgets bytes, state and counts, keeps the buffer.
    pub fn clear(&mut self) {
        self.buf.clear();
        self.cpu = None;
        self.task = None;
        self.kernel = None;
        self.cookie = None;
        self.cgroup = None;
        self.cur_slot = 0;
        self.filled = 0;
        self.next_slot = 0;
        self.samples = 0;
        self.run = 0;
        self.per_cpu.clear();
        self.time_unit = self.next_unit;
        self.unit_written = false;
        self.next_time = None;
        self.have_time = false;
    }

    /// The payload so far.
    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }

    /// True when nothing was encoded since the last clear.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Samples encoded since the last clear.
    pub fn samples(&self) -> u64 {
        self.samples
    }

    /// Samples encoded for `cpu` since the last clear.
    pub fn cpu_samples(&self, cpu: u32) -> u64 {
        let folded = self
            .per_cpu
            .iter()
            .find(|(c, _)| *c == cpu)
            .map_or(0, |(_, n)| *n);
        folded + if self.cpu == Some(cpu) { self.run } else { 0 }
    }

    /// `(cpu, samples)` for every CPU that has samples, sorted by CPU.
    /// Samples passed as `Event::Sample` before any CPU was set are counted
    /// only in [`ChunkEncoder::samples`].
    pub fn per_cpu_samples(&self) -> Vec<(u32, u64)> {
        let mut v = self.per_cpu.clone();
        if let Some(cpu) = self.cpu {
            add_count(&mut v, cpu, self.run);
        }
        v.retain(|&(_, n)| n > 0);
        v.sort_unstable();
        v
    }

    /// Writes whichever state switches a sample in this state needs.
    #[inline(always)]
    fn switch_to(&mut self, cpu: u32, pid: u32, tid: u32, kernel: bool, cookie: Cookie) {
        if self.cpu != Some(cpu) {
            self.set_cpu(cpu);
        }
        if self.task != Some((pid, tid)) {
            self.set_task(pid, tid);
        }
        if self.kernel != Some(kernel) {
            self.set_mode(kernel);
        }
        if self.cookie != Some(cookie) {
            self.set_cookie(cookie);
        }
    }

    /// Encodes one sample, preceded by whichever state changes it needs.
    #[inline]
    pub fn sample(
        &mut self,
        cpu: u32,
        pid: u32,
        tid: u32,
        kernel: bool,
        cookie: Cookie,
        offset: u64,
    ) {
        self.switch_to(cpu, pid, tid, kernel, cookie);
        self.put_sample(offset);
    }

    /// Encodes one sample whose callers are the session's stack `stack`
    /// (see [`Event::StackDef`]), preceded by whichever state changes it
    /// needs. Same cost as [`ChunkEncoder::sample`] plus, usually, nothing
    /// (the same stack as the last sample in this binary) or one or two
    /// bytes (a stack id delta).
    #[inline]
    #[allow(clippy::too_many_arguments)]
    pub fn sample_with_stack(
        &mut self,
        cpu: u32,
        pid: u32,
        tid: u32,
        kernel: bool,
        cookie: Cookie,
        offset: u64,
        stack: u32,
    ) {
        self.switch_to(cpu, pid, tid, kernel, cookie);
        self.put_stack_sample(offset, stack);
    }

    /// Sets the cgroup of the samples that follow (0: none), writing a
    /// `CgroupSwitch` only when it differs from the encoder's state (a CPU
    /// switch unsets it). A session that records no cgroups never calls
    /// this, and its chunks hold no cgroup byte.
    #[inline]
    pub fn cgroup(&mut self, id: u64) {
        if self.cgroup != Some(id) {
            self.set_cgroup(id);
        }
    }

    #[cold]
    #[inline(never)]
    fn set_cgroup(&mut self, id: u64) {
        self.cgroup = Some(id);
        let mut tmp = [0u8; 1 + MAX_VARINT];
        tmp[0] = tag::CGROUP_SWITCH;
        let n = put_uvar(&mut tmp, 1, id);
        self.buf.extend_from_slice(&tmp[..n]);
    }

    /// Encodes a sample from its expanded form: [`ChunkEncoder::sample`]
    /// or [`ChunkEncoder::sample_with_stack`] depending on `s.stack`.
    #[inline]
    pub fn expanded(&mut self, s: &ExpandedSample) {
        if s.cgroup != 0 || self.cgroup.is_some_and(|c| c != 0) {
            if self.cpu != Some(s.cpu) {
                self.set_cpu(s.cpu);
            }
            self.cgroup(s.cgroup);
        }
        if let Some(t) = s.time {
            self.time(t);
        }
        match s.stack {
            None => self.sample(s.cpu, s.pid, s.tid, s.kernel, s.cookie, s.offset),
            Some(stack) => {
                self.sample_with_stack(s.cpu, s.pid, s.tid, s.kernel, s.cookie, s.offset, stack)
            }
        }
    }

    /// Encodes any event. State events (`CpuSwitch`, `TaskSwitch`, `Mode`,
    /// `CookieSwitch`) are always written and update the encoder's state;
    /// `Sample` and `StackSample` sample at the current state (which the
    /// expander rejects if incomplete: prefer [`ChunkEncoder::sample`]);
    /// markers are written as is.
    pub fn event(&mut self, ev: &Event) {
        match *ev {
            Event::CpuSwitch { cpu } => self.set_cpu(cpu),
            Event::TaskSwitch { pid, tid } => self.set_task(pid, tid),
            Event::Mode { kernel } => self.set_mode(kernel),
            Event::CookieSwitch { cookie } => self.set_cookie(cookie),
            Event::CgroupSwitch { id } => self.set_cgroup(id),
            Event::Sample { offset, time } => {
                self.next_time = time;
                self.put_sample(offset)
            }
            Event::StackSample {
                offset,
                stack,
                time,
            } => {
                self.next_time = time;
                self.put_stack_sample(offset, stack)
            }
            _ => push_marker(&mut self.buf, ev),
        }
    }

    /// Appends the time operand of a timed sample at `tmp[n..]` (the tag
    /// at `tmp[0]` becomes its timed form) and moves the time state on.
    #[inline(always)]
    fn put_time<const N: usize>(&mut self, tmp: &mut [u8; N], n: usize, ns: u64) -> usize {
        tmp[0] += tag::TIMED;
        // t and the last time are in 0..2^62, so the step is in
        // (-2^62, 2^62), the prediction in (-2^62, 2^63) and the residual
        // in (-2^63, 2^62]: all fit an i64.
        let t = (ns.min(MAX_SAMPLE_TIME_NS) / self.time_unit) as i64;
        let r = if self.have_time {
            let pred = self.last_time + self.last_step;
            self.last_step = t - self.last_time;
            t - pred
        } else {
            self.have_time = true;
            self.last_step = 0;
            t
        };
        self.last_time = t;
        put_uvar(tmp, n, zigzag(r))
    }

    /// Writes this chunk's `TimeUnit`, once, before its first timed sample.
    #[cold]
    #[inline(never)]
    fn put_time_unit(&mut self) {
        self.unit_written = true;
        if self.time_unit != 1 {
            let mut tmp = [0u8; 1 + MAX_VARINT];
            tmp[0] = tag::TIME_UNIT;
            let n = put_uvar(&mut tmp, 1, self.time_unit);
            self.buf.extend_from_slice(&tmp[..n]);
            self.have_time = false;
        }
    }

    #[inline(always)]
    fn put_sample(&mut self, offset: u64) {
        let time = self.next_time.take();
        if time.is_some() && !self.unit_written {
            self.put_time_unit();
        }
        let mut tmp = [0u8; 1 + 2 * MAX_VARINT];
        let n = if self.cookie.is_some() {
            let slot = self.cur_slot % COOKIE_SLOTS;
            let prev = std::mem::replace(&mut self.last_off[slot], offset);
            let delta = zigzag(offset.wrapping_sub(prev) as i64);
            let use_delta = match self.coding {
                OffsetCoding::Adaptive => uvar_len(delta) < uvar_len(offset),
                OffsetCoding::Delta => true,
                OffsetCoding::Absolute => false,
            };
            if use_delta {
                tmp[0] = tag::SAMPLE_DELTA;
                put_uvar(&mut tmp, 1, delta)
            } else {
                tmp[0] = tag::SAMPLE;
                put_uvar(&mut tmp, 1, offset)
            }
        } else {
            tmp[0] = tag::SAMPLE;
            put_uvar(&mut tmp, 1, offset)
        };
        let n = match time {
            Some(ns) => self.put_time(&mut tmp, n, ns),
            None => n,
        };
        self.buf.extend_from_slice(&tmp[..n]);
        self.samples += 1;
        self.run += 1;
    }

    #[inline(always)]
    fn put_stack_sample(&mut self, offset: u64, stack: u32) {
        let time = self.next_time.take();
        if time.is_some() && !self.unit_written {
            self.put_time_unit();
        }
        let mut tmp = [0u8; 1 + 3 * MAX_VARINT];
        let n = if self.cookie.is_some() {
            let slot = self.cur_slot % COOKIE_SLOTS;
            let prev = std::mem::replace(&mut self.last_off[slot], offset);
            let prev_stack = std::mem::replace(&mut self.last_stack[slot], stack);
            let delta = zigzag(offset.wrapping_sub(prev) as i64);
            let use_delta = match self.coding {
                OffsetCoding::Adaptive => uvar_len(delta) < uvar_len(offset),
                OffsetCoding::Delta => true,
                OffsetCoding::Absolute => false,
            };
            let same = stack == prev_stack;
            tmp[0] = match (same, use_delta) {
                (false, false) => tag::STACK_SAMPLE,
                (false, true) => tag::STACK_SAMPLE_DELTA,
                (true, false) => tag::STACK_SAMPLE_SAME,
                (true, true) => tag::STACK_SAMPLE_SAME_DELTA,
            };
            let n = put_uvar(&mut tmp, 1, if use_delta { delta } else { offset });
            if same {
                n
            } else {
                put_uvar(&mut tmp, n, stack_delta(prev_stack, stack))
            }
        } else {
            // No cookie slot: absolute offset, stack delta against 0.
            tmp[0] = tag::STACK_SAMPLE;
            let n = put_uvar(&mut tmp, 1, offset);
            put_uvar(&mut tmp, n, stack_delta(0, stack))
        };
        let n = match time {
            Some(ns) => self.put_time(&mut tmp, n, ns),
            None => n,
        };
        self.buf.extend_from_slice(&tmp[..n]);
        self.samples += 1;
        self.run += 1;
    }

    #[cold]
    #[inline(never)]
    fn set_cpu(&mut self, cpu: u32) {
        if let Some(old) = self.cpu {
            if self.run > 0 {
                add_count(&mut self.per_cpu, old, self.run);
            }
        }
        self.run = 0;
        self.cpu = Some(cpu);
        self.have_time = false;
        self.task = None;
        self.kernel = None;
        self.cookie = None;
        self.cgroup = None;
        let mut tmp = [0u8; 1 + MAX_VARINT];
        tmp[0] = tag::CPU_SWITCH;
        let n = put_uvar(&mut tmp, 1, u64::from(cpu));
        self.buf.extend_from_slice(&tmp[..n]);
    }

    #[inline(never)]
    fn set_task(&mut self, pid: u32, tid: u32) {
        self.task = Some((pid, tid));
        let mut tmp = [0u8; 1 + 2 * MAX_VARINT];
        tmp[0] = tag::TASK_SWITCH;
        let n = put_uvar(&mut tmp, 1, u64::from(pid));
        let n = put_uvar(&mut tmp, n, zigzag(i64::from(tid) - i64::from(pid)));
        self.buf.extend_from_slice(&tmp[..n]);
    }

    #[inline(never)]
    fn set_mode(&mut self, kernel: bool) {
        self.kernel = Some(kernel);
        self.buf.push(if kernel {
            tag::MODE_KERNEL
        } else {
            tag::MODE_USER
        });
    }

    #[inline(never)]
    fn set_cookie(&mut self, cookie: Cookie) {
        self.cookie = Some(cookie);
        if let Some(slot) = self.slots[..self.filled].iter().position(|&c| c == cookie) {
            self.cur_slot = slot;
            self.buf.push(tag::COOKIE_REF_BASE + slot as u8);
            return;
        }
        // Not in a slot: spell it out; it takes the next slot, FIFO.
        let slot = self.next_slot;
        self.next_slot = (slot + 1) % COOKIE_SLOTS;
        self.filled = (self.filled + 1).min(COOKIE_SLOTS);
        self.slots[slot] = cookie;
        self.last_off[slot] = 0;
        self.last_stack[slot] = 0;
        self.cur_slot = slot;
        let mut tmp = [0u8; 9];
        tmp[0] = tag::COOKIE_SWITCH;
        tmp[1..].copy_from_slice(&cookie.to_le_bytes());
        self.buf.extend_from_slice(&tmp);
    }
}

/// The zigzag delta from stack id `prev` to `stack` (both u32, so the
/// difference always fits an i64).
#[inline(always)]
pub(crate) fn stack_delta(prev: u32, stack: u32) -> u64 {
    zigzag(i64::from(stack) - i64::from(prev))
}

fn add_count(v: &mut Vec<(u32, u64)>, cpu: u32, n: u64) {
    match v.iter_mut().find(|(c, _)| *c == cpu) {
        Some((_, count)) => *count += n,
        None => v.push((cpu, n)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cgroup example in docs/FORMAT.md, byte for byte.
    #[test]
    fn golden_bytes_of_the_format_md_cgroup_example() {
        let mut enc = ChunkEncoder::new();
        enc.event(&Event::CgroupDef {
            id: 2345,
            path: "/a".into(),
        });
        enc.event(&Event::CpuSwitch { cpu: 2 });
        enc.cgroup(2345);
        enc.sample(2, 812, 812, false, 0x1122_3344_5566_7788, 0x1000);
        enc.cgroup(2345); // unchanged: nothing written
        enc.sample(2, 813, 813, false, 0x1122_3344_5566_7788, 0x1008);
        enc.cgroup(0);
        enc.sample(2, 900, 900, false, 0x1122_3344_5566_7788, 0x1010);
        #[rustfmt::skip]
        let want: &[u8] = &[
            0x27, 0x05, 0xa9, 0x12, 0x02, b'/', b'a', // CgroupDef 2345 "/a"
            0x01, 0x02,                               // CpuSwitch 2
            0x06, 0xa9, 0x12,                         // CgroupSwitch 2345
            0x02, 0xac, 0x06, 0x00,                   // TaskSwitch 812
            0x03,                                     // Mode user
            0x05, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11,
            0x10, 0x80, 0x20,                         // Sample 0x1000
            0x02, 0xad, 0x06, 0x00,                   // TaskSwitch 813
            0x11, 0x10,                               // Sample +8
            0x06, 0x00,                               // CgroupSwitch none
            0x02, 0x84, 0x07, 0x00,                   // TaskSwitch 900
            0x11, 0x10,                               // Sample +8
        ];
        assert_eq!(enc.bytes(), want);
        let got: Vec<ExpandedSample> = crate::Expander::new(enc.bytes())
            .filter_map(|e| match e.unwrap() {
                crate::Expanded::Sample(s) => Some(s),
                _ => None,
            })
            .collect();
        assert_eq!(
            got.iter().map(|s| (s.pid, s.cgroup)).collect::<Vec<_>>(),
            [(812, 2345), (813, 2345), (900, 0)]
        );
        // A CPU switch unsets the cgroup.
        let mut p = enc.bytes().to_vec();
        p.extend_from_slice(&[0x01, 0x03, 0x02, 0x01, 0x00, 0x03, 0x40, 0x10, 0x01]);
        let mut last = None;
        crate::for_each_sample(&p, |s| last = Some(*s), |_| {}).unwrap();
        assert_eq!(last.map(|s| (s.cpu, s.cgroup)), Some((3, 0)));
    }

    /// A session without cgroups holds no cgroup byte: the encoder's
    /// cgroup state costs nothing until used.
    #[test]
    fn samples_without_cgroups_are_unchanged() {
        let mut a = ChunkEncoder::new();
        let mut b = ChunkEncoder::new();
        for i in 0..100u64 {
            a.sample((i % 2) as u32, 7, 7, false, 9, i);
            b.expanded(&ExpandedSample {
                cpu: (i % 2) as u32,
                pid: 7,
                tid: 7,
                kernel: false,
                cookie: 9,
                offset: i,
                stack: None,
                cgroup: 0,
                time: None,
            });
        }
        assert_eq!(a.bytes(), b.bytes());
    }

    /// The example in docs/FORMAT.md, byte for byte.
    #[test]
    fn golden_bytes_of_the_format_md_example() {
        let user: Cookie = 0x1122_3344_5566_7788;
        let kernel: Cookie = 0xffff_0000_0000_0001;
        let mut enc = ChunkEncoder::new();
        enc.sample(2, 812, 812, false, user, 0x1000);
        enc.sample(2, 812, 812, false, user, 0x1008);
        enc.sample(2, 812, 812, true, kernel, 0x12345);
        enc.sample(2, 812, 812, false, user, 0x1010);
        enc.event(&Event::Lost {
            cpu: 2,
            kind: crate::LostKind::Ring,
            count: 300,
        });
        #[rustfmt::skip]
        let want: &[u8] = &[
            0x01, 0x02,                                           // CpuSwitch cpu=2
            0x02, 0xac, 0x06, 0x00,                               // TaskSwitch pid=812, tid-pid=0
            0x03,                                                 // Mode user
            0x05, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, // CookieSwitch -> slot 0
            0x10, 0x80, 0x20,                                     // Sample 0x1000
            0x11, 0x10,                                           // Sample delta +8 = 0x1008
            0x04,                                                 // Mode kernel
            0x05, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0xff, 0xff, // CookieSwitch -> slot 1
            0x10, 0xc5, 0xc6, 0x04,                               // Sample 0x12345
            0x03,                                                 // Mode user
            0x40,                                                 // CookieSwitch by slot 0
            0x11, 0x10,                                           // Sample delta +8 = 0x1010
            0x23, 0x04, 0x02, 0x00, 0xac, 0x02,                   // Lost cpu=2 Ring count=300
        ];
        assert_eq!(enc.bytes(), want);
    }

    /// The sample-time example in docs/FORMAT.md, byte for byte, and what
    /// it decodes to.
    #[test]
    fn golden_bytes_of_the_format_md_time_example() {
        let user: Cookie = 0x1122_3344_5566_7788;
        let mut enc = ChunkEncoder::new();
        enc.set_time_unit(100);
        for (t, off) in [
            (1_000_000_000, 0x1000),
            (1_000_250_000, 0x1008),
            (1_000_500_100, 0x1010),
            (1_000_750_000, 0x1018),
        ] {
            enc.time(t);
            enc.sample(0, 7, 7, false, user, off);
        }
        // A CPU switch: the next time is absolute again.
        enc.time(1_000_100_000);
        enc.sample(1, 7, 8, false, user, 0x2000);
        // A sample without a time.
        enc.sample(1, 7, 8, false, user, 0x2000);
        #[rustfmt::skip]
        let want: &[u8] = &[
            0x01, 0x00,                                           // CpuSwitch cpu=0
            0x02, 0x07, 0x00,                                     // TaskSwitch pid=7, tid=7
            0x03,                                                 // Mode user
            0x05, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, // CookieSwitch -> slot 0
            0x07, 0x64,                                           // TimeUnit 100 ns
            0x16, 0x80, 0x20, 0x80, 0xda, 0xc4, 0x09,             // Sample 0x1000 at 10,000,000 ticks
            0x17, 0x10, 0x88, 0x27,                               // +8, time 10,000,000 + 0 + 2,500
            0x17, 0x10, 0x02,                                     // +8, time 10,002,500 + 2,500 + 1
            0x17, 0x10, 0x03,                                     // +8, time 10,005,001 + 2,501 - 2
            0x01, 0x01,                                           // CpuSwitch cpu=1
            0x02, 0x07, 0x02,                                     // TaskSwitch pid=7, tid=8
            0x03,                                                 // Mode user
            0x40,                                                 // CookieSwitch by slot 0
            0x16, 0x80, 0x40, 0xd0, 0xe9, 0xc4, 0x09,             // Sample 0x2000 at 10,001,000 ticks
            0x11, 0x00,                                           // Sample delta 0, no time
        ];
        assert_eq!(enc.bytes(), want);
        let times: Vec<Option<u64>> = crate::Expander::new(enc.bytes())
            .filter_map(|e| match e.unwrap() {
                crate::Expanded::Sample(s) => Some(s.time),
                _ => None,
            })
            .collect();
        assert_eq!(
            times,
            [
                Some(1_000_000_000),
                Some(1_000_250_000),
                Some(1_000_500_100),
                Some(1_000_750_000),
                Some(1_000_100_000),
                None
            ]
        );
    }

    #[test]
    fn golden_bytes_of_the_format_md_jit_example() {
        use crate::event::{JitCode, JitLine};
        let def = crate::cookie::jit_entry(7, "/tmp/jit-7.dump", 0x803, 12, 0);
        let jit = def.cookie;
        let mut enc = ChunkEncoder::new();
        enc.event(&Event::CookieDef(def.clone()));
        enc.sample(0, 7, 7, false, jit, 0x10004);
        enc.sample(0, 7, 7, false, jit, 0x10006);
        enc.event(&Event::JitCode(JitCode {
            cookie: jit,
            addr: 0x10000,
            size: 8,
            index: 1,
            time: 1_000_000_000,
            name: "py::f:/t.py".into(),
            code: Some(vec![0x55, 0x48, 0x89, 0xe5, 0x90, 0x5d, 0xc3, 0x90]),
            files: vec!["/t.py".into()],
            lines: vec![
                JitLine {
                    offset: 0,
                    line: 1,
                    discrim: 0,
                    file: 0,
                },
                JitLine {
                    offset: 4,
                    line: 2,
                    discrim: 0,
                    file: 0,
                },
            ],
        }));
        #[rustfmt::skip]
        let want: &[u8] = &[
            0x21, 0x21,                                           // CookieDef: body of 33 bytes
            0x63, 0xc6, 0xee, 0x39, 0x6a, 0xc8, 0x81, 0xd9,       //   cookie jit_cookie(7, 0x803, 12, 0)
            0x06,                                                 //   kind 6 (Jit)
            0x0f, b'/', b't', b'm', b'p', b'/', b'j', b'i', b't', //   path "/tmp/jit-7.dump"
            b'-', b'7', b'.', b'd', b'u', b'm', b'p',
            0x00,                                                 //   no build-id
            0x83, 0x10, 0x0c, 0x00,                               //   dev 0x803, inode 12, generation 0
            0x00,                                                 //   base: JIT generation 0
            0x01, 0x07,                                           //   pid 7
            0x01, 0x00,                                           // CpuSwitch cpu=0
            0x02, 0x07, 0x00,                                     // TaskSwitch pid=7
            0x03,                                                 // Mode user
            0x05, 0x63, 0xc6, 0xee, 0x39, 0x6a, 0xc8, 0x81, 0xd9, // CookieSwitch jit -> slot 0
            0x10, 0x84, 0x80, 0x04,                               // Sample 0x10004 (an address)
            0x11, 0x04,                                           // Sample delta +2 = 0x10006
            0x29, 0x38,                                           // JitCode: body of 56 bytes
            0x63, 0xc6, 0xee, 0x39, 0x6a, 0xc8, 0x81, 0xd9,       //   cookie
            0x80, 0x80, 0x04, 0x08, 0x01,                         //   addr 0x10000, size 8, index 1
            0x80, 0x94, 0xeb, 0xdc, 0x03,                         //   time 1,000,000,000 ns
            0x0b, b'p', b'y', b':', b':', b'f', b':', b'/', b't', //   name "py::f:/t.py"
            b'.', b'p', b'y',
            0x01, 0x08,                                           //   code: 8 bytes
            0x55, 0x48, 0x89, 0xe5, 0x90, 0x5d, 0xc3, 0x90,
            0x01, 0x05, b'/', b't', b'.', b'p', b'y',             //   1 file: "/t.py"
            0x02,                                                 //   2 lines:
            0x00, 0x01, 0x00, 0x00,                               //     +0 = 0: line 1, discrim 0, file 0
            0x04, 0x02, 0x00, 0x00,                               //     +4 = 4: line 2, discrim 0, file 0
        ];
        assert_eq!(enc.bytes(), want);
        assert_eq!(jit, 0xd981_c86a_39ee_c663);
        let mut evs = Vec::new();
        crate::decode_events(want, |e| evs.push(e)).unwrap();
        assert_eq!(evs[0], Event::CookieDef(def));
        assert!(matches!(&evs[evs.len() - 1], Event::JitCode(j) if j.lines[1].offset == 4));
    }

    /// A chunk's time state is its own: each chunk decodes alone, and bad
    /// units and times are errors, never panics.
    #[test]
    fn time_units_and_times_are_checked() {
        use crate::codec::{push_uvar, tag};
        use crate::decode::decode_events;
        let mut enc = ChunkEncoder::new();
        enc.set_time_unit(1000);
        enc.time(5_000_123);
        enc.sample(0, 1, 1, false, 9, 1);
        let first = enc.bytes().to_vec();
        enc.clear();
        enc.time(7_000_000);
        enc.sample(0, 1, 1, false, 9, 1);
        let mut got = Vec::new();
        for chunk in [&first[..], enc.bytes()] {
            decode_events(chunk, |e| {
                if let Event::Sample { time, .. } = e {
                    got.push(time)
                }
            })
            .unwrap();
        }
        assert_eq!(got, [Some(5_000_000), Some(7_000_000)]);
        // A time past MAX_SAMPLE_TIME_NS is kept as that.
        let mut enc = ChunkEncoder::new();
        enc.time(u64::MAX);
        enc.sample(0, 1, 1, false, 9, 1);
        let mut t = None;
        decode_events(enc.bytes(), |e| {
            if let Event::Sample { time, .. } = e {
                t = time
            }
        })
        .unwrap();
        assert_eq!(t, Some(MAX_SAMPLE_TIME_NS));
        // Units 0 and over a second are refused, naming the value.
        for u in [0, MAX_TIME_UNIT_NS + 1, u64::MAX] {
            let mut p = vec![tag::TIME_UNIT];
            push_uvar(&mut p, u);
            let e = decode_events(&p, |_| {}).unwrap_err().to_string();
            assert!(
                e.contains("ns per tick") && e.contains(&u.to_string()),
                "{e}"
            );
        }
        // Times that leave 0..2^64 ns: below zero, past 2^64 / unit, and
        // a prediction pushed out by the previous step.
        let state = [tag::CPU_SWITCH, 0, tag::TASK_SWITCH, 1, 0, tag::MODE_USER];
        let timed = |unit: u64, rs: &[i64]| {
            let mut p = state.to_vec();
            p.push(tag::TIME_UNIT);
            push_uvar(&mut p, unit);
            for &r in rs {
                p.extend_from_slice(&[tag::SAMPLE + tag::TIMED, 0]);
                push_uvar(&mut p, zigzag(r));
            }
            decode_events(&p, |_| {})
        };
        assert!(timed(1, &[5, 1, 1]).is_ok());
        for rs in [
            &[-1][..],
            &[i64::MAX, i64::MAX],
            &[
                (u64::MAX / 1000 / 2) as i64,
                (u64::MAX / 1000 / 2) as i64,
                0,
            ],
        ] {
            let e = timed(1000, rs).unwrap_err().to_string();
            assert!(e.contains("sample time"), "{rs:?}: {e}");
        }
    }

    /// The call-graph example in docs/FORMAT.md, byte for byte.
    #[test]
    fn golden_bytes_of_the_format_md_stack_example() {
        use crate::event::Frame;
        let prog: Cookie = 0x1122_3344_5566_7788;
        let libc: Cookie = 0xaabb_ccdd_eeff_0011;
        let user = |cookie, offset| Frame {
            cookie,
            offset,
            kernel: false,
        };
        let mut enc = ChunkEncoder::new();
        enc.event(&Event::StackDef {
            id: 5,
            frames: vec![user(prog, 0x2004), user(prog, 0x2210), user(libc, 0x29d90)],
        });
        enc.sample_with_stack(2, 812, 812, false, prog, 0x1000, 5);
        enc.sample_with_stack(2, 812, 812, false, prog, 0x1008, 5);
        enc.sample_with_stack(2, 812, 812, false, prog, 0x1010, 7);
        enc.sample_with_stack(2, 812, 812, false, prog, 0x40, 7);
        enc.sample_with_stack(2, 812, 812, false, prog, 0x48, 5);
        #[rustfmt::skip]
        let want: &[u8] = &[
            0x25, 0x1d,                                           // StackDef, body of 29 bytes
            0x05, 0x02,                                           //   id 5, 2 runs
            0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11,       //   run: cookie prog
            0x00, 0x02, 0x84, 0x40, 0x90, 0x44,                   //     user, 2 frames: 0x2004 0x2210
            0x11, 0x00, 0xff, 0xee, 0xdd, 0xcc, 0xbb, 0xaa,       //   run: cookie libc
            0x00, 0x01, 0x90, 0xbb, 0x0a,                         //     user, 1 frame: 0x29d90
            0x01, 0x02,                                           // CpuSwitch cpu=2
            0x02, 0xac, 0x06, 0x00,                               // TaskSwitch pid=812
            0x03,                                                 // Mode user
            0x05, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22, 0x11, // CookieSwitch prog -> slot 0
            0x12, 0x80, 0x20, 0x0a,                               // 0x1000, stack 0 + 5 = 5
            0x15, 0x10,                                           // +8 = 0x1008, same stack 5
            0x13, 0x10, 0x04,                                     // +8 = 0x1010, stack 5 + 2 = 7
            0x14, 0x40,                                           // 0x40, same stack 7
            0x12, 0x48, 0x03,                                     // 0x48, stack 7 - 2 = 5
        ];
        assert_eq!(enc.bytes(), want);
        let mut got = Vec::new();
        crate::for_each_sample(enc.bytes(), |s| got.push((s.offset, s.stack)), |_| {}).unwrap();
        assert_eq!(
            got,
            [
                (0x1000, Some(5)),
                (0x1008, Some(5)),
                (0x1010, Some(7)),
                (0x40, Some(7)),
                (0x48, Some(5))
            ]
        );
    }

    #[test]
    fn crc_is_ieee() {
        // The check value of CRC-32/ISO-HDLC, as docs/FORMAT.md says.
        assert_eq!(crc32fast::hash(b"123456789"), 0xcbf4_3926);
    }
}
