//! Decoding a chunk payload: [`ChunkDecoder`] (events), [`Expander`]
//! (samples with full state, markers in place) and [`for_each_sample`] (the
//! fast path for aggregation).

use crate::codec::{read_uvar, tag, unzigzag, VarintError, COOKIE_SLOTS, MAX_TIME_UNIT_NS};
use crate::error::{Error, Result};
use crate::event::{Cookie, Event, ExpandedSample};
use crate::markers::read_marker;

/// One decoded step, before state is applied. Markers stay as bytes until
/// the caller wants an [`Event`], so the sample path never builds one.
enum Step<'a> {
    Cpu(u32),
    Task(u32, u32),
    Mode(bool),
    Cookie(Cookie),
    Cgroup(u64),
    /// A `TimeUnit`: only the core's time state changes.
    TimeUnit,
    /// A sample: offset and, for a timed tag, time (ns).
    Sample(u64, Option<u64>),
    /// A stack sample: offset, stack id and, for a timed tag, time (ns).
    StackSample(u64, u32, Option<u64>),
    Marker {
        tag: u8,
        body: &'a [u8],
        at: usize,
    },
}

/// The byte-level decoder: position plus the chunk-local cookie slots.
struct Core<'a> {
    buf: &'a [u8],
    pos: usize,
    slots: [Cookie; COOKIE_SLOTS],
    last_off: [u64; COOKIE_SLOTS],
    last_stack: [u32; COOKIE_SLOTS],
    filled: usize,
    next_slot: usize,
    cur_slot: Option<usize>,
    /// Sample times: ns per tick, and the CPU run's last time and last
    /// step (ticks), which predict the next time; `have_time` false after
    /// a CpuSwitch or TimeUnit (the next time is absolute).
    time_unit: u64,
    /// The largest time in ticks: below 2^63, and times `time_unit` below
    /// 2^64 ns.
    max_ticks: i64,
    have_time: bool,
    last_time: i64,
    last_step: i64,
}

impl<'a> Core<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Core {
            buf,
            pos: 0,
            slots: [0; COOKIE_SLOTS],
            last_off: [0; COOKIE_SLOTS],
            last_stack: [0; COOKIE_SLOTS],
            filled: 0,
            next_slot: 0,
            cur_slot: None,
            time_unit: 1,
            max_ticks: i64::MAX,
            have_time: false,
            last_time: 0,
            last_step: 0,
        }
    }

    /// The time operand of a timed sample tag (at `at`): a zigzag residual
    /// against last time + last step (or, first in a CPU run, the time
    /// itself), in ticks of `time_unit`; returns nanoseconds.
    #[inline(always)]
    fn time(&mut self, at: usize) -> Result<u64> {
        let r = unzigzag(self.uvar("sample time")?);
        let t = if self.have_time {
            // Both in 0..2^63: the step fits an i64, the sums may not.
            self.last_time
                .checked_add(self.last_step)
                .and_then(|p| p.checked_add(r))
        } else {
            Some(r)
        };
        let t = match t {
            Some(t) if (0..=self.max_ticks).contains(&t) => t,
            _ => return Err(self.bad_time(r, at)),
        };
        self.last_step = if self.have_time {
            t - self.last_time
        } else {
            0
        };
        self.have_time = true;
        self.last_time = t;
        Ok(t as u64 * self.time_unit)
    }

    #[cold]
    fn bad_time(&self, r: i64, at: usize) -> Error {
        let pred = if self.have_time {
            format!("{} + {} + ", self.last_time, self.last_step)
        } else {
            String::new()
        };
        Error::malformed(
            "sample time",
            at as u64,
            format!(
                "{pred}{r} ticks of {} ns is not a time in 0..2^63 ticks and 0..2^64 ns",
                self.time_unit
            ),
        )
    }

    /// The operands of `0x10` / `0x11` (the tag at `at` is read).
    #[inline(always)]
    fn plain_sample(&mut self, t: u8, at: usize) -> Result<u64> {
        if t == tag::SAMPLE {
            let off = self.uvar("Sample")?;
            if let Some(s) = self.cur_slot {
                self.last_off[s % COOKIE_SLOTS] = off;
            }
            return Ok(off);
        }
        let d = self.uvar("Sample")?;
        let Some(s) = self.cur_slot else {
            return Err(Error::SampleWithoutState {
                offset: at as u64,
                missing: "cookie",
            });
        };
        let slot = &mut self.last_off[s % COOKIE_SLOTS];
        let off = slot.wrapping_add(unzigzag(d) as u64);
        *slot = off;
        Ok(off)
    }

    /// A timed sample tag (`0x16`..=`0x1B`): its untimed form, then the time.
    #[inline(always)]
    fn timed_sample(&mut self, t: u8, at: usize) -> Result<Step<'a>> {
        let t = t - tag::TIMED;
        Ok(if t <= tag::SAMPLE_DELTA {
            let off = self.plain_sample(t, at)?;
            Step::Sample(off, Some(self.time(at)?))
        } else {
            let (off, stack) = self.stack_sample(t, at)?;
            Step::StackSample(off, stack, Some(self.time(at)?))
        })
    }

    #[inline(always)]
    fn uvar(&mut self, what: &'static str) -> Result<u64> {
        match read_uvar(self.buf, self.pos) {
            Ok((v, next)) => {
                self.pos = next;
                Ok(v)
            }
            Err(e) => Err(self.varint_error(e, what)),
        }
    }

    #[cold]
    fn varint_error(&self, e: VarintError, what: &'static str) -> Error {
        match e {
            VarintError::Truncated => Error::Truncated {
                what,
                offset: self.pos as u64,
                len: self.buf.len() as u64,
            },
            VarintError::Overflow => Error::BadVarint {
                offset: self.pos as u64,
            },
        }
    }

    fn u32var(&mut self, what: &'static str, at: usize) -> Result<u32> {
        let v = self.uvar(what)?;
        u32::try_from(v)
            .map_err(|_| Error::malformed(what, at as u64, format!("{v} does not fit 32 bits")))
    }

    /// The operands of the four StackSample tags (the tag at `at` is read).
    #[inline(always)]
    fn stack_sample(&mut self, t: u8, at: usize) -> Result<(u64, u32)> {
        let delta_off = t == tag::STACK_SAMPLE_DELTA || t == tag::STACK_SAMPLE_SAME_DELTA;
        let same = t == tag::STACK_SAMPLE_SAME || t == tag::STACK_SAMPLE_SAME_DELTA;
        let v = self.uvar("StackSample")?;
        let Some(s) = self.cur_slot else {
            if delta_off || same {
                return Err(Error::SampleWithoutState {
                    offset: at as u64,
                    missing: "cookie",
                });
            }
            let d = self.uvar("StackSample")?;
            return Ok((v, add_stack_delta(0, d, at)?));
        };
        let s = s % COOKIE_SLOTS;
        let off = if delta_off {
            self.last_off[s].wrapping_add(unzigzag(v) as u64)
        } else {
            v
        };
        self.last_off[s] = off;
        let stack = if same {
            self.last_stack[s]
        } else {
            let d = self.uvar("StackSample")?;
            add_stack_delta(self.last_stack[s], d, at)?
        };
        self.last_stack[s] = stack;
        Ok((off, stack))
    }

    /// Decodes the next step; `Ok(None)` at the end of the payload.
    #[inline(always)]
    fn step(&mut self) -> Result<Option<Step<'a>>> {
        let at = self.pos;
        let Some(&t) = self.buf.get(at) else {
            return Ok(None);
        };
        self.pos += 1;
        let step = match t {
            tag::SAMPLE | tag::SAMPLE_DELTA => Step::Sample(self.plain_sample(t, at)?, None),
            tag::STACK_SAMPLE..=tag::STACK_SAMPLE_SAME_DELTA => {
                let (off, stack) = self.stack_sample(t, at)?;
                Step::StackSample(off, stack, None)
            }
            tag::TIMED_SAMPLE..=tag::TIMED_STACK_SAMPLE_SAME_DELTA => self.timed_sample(t, at)?,
            tag::COOKIE_REF_BASE..=tag::COOKIE_REF_LAST => {
                let slot = usize::from(t - tag::COOKIE_REF_BASE);
                if slot >= self.filled {
                    return Err(Error::EmptyCookieSlot {
                        slot: slot as u8,
                        offset: at as u64,
                        filled: self.filled,
                    });
                }
                self.cur_slot = Some(slot);
                Step::Cookie(self.slots[slot])
            }
            tag::COOKIE_SWITCH => {
                let Some(b) = self.buf.get(self.pos..self.pos + 8) else {
                    return Err(Error::Truncated {
                        what: "CookieSwitch",
                        offset: self.pos as u64,
                        len: self.buf.len() as u64,
                    });
                };
                let mut a = [0u8; 8];
                a.copy_from_slice(b);
                self.pos += 8;
                let cookie = u64::from_le_bytes(a);
                let slot = self.next_slot;
                self.next_slot = (slot + 1) % COOKIE_SLOTS;
                self.filled = (self.filled + 1).min(COOKIE_SLOTS);
                self.slots[slot] = cookie;
                self.last_off[slot] = 0;
                self.last_stack[slot] = 0;
                self.cur_slot = Some(slot);
                Step::Cookie(cookie)
            }
            tag::CGROUP_SWITCH => Step::Cgroup(self.uvar("CgroupSwitch")?),
            tag::MODE_USER => Step::Mode(false),
            tag::MODE_KERNEL => Step::Mode(true),
            tag::TASK_SWITCH => {
                let pid = self.u32var("TaskSwitch", at)?;
                let d = unzigzag(self.uvar("TaskSwitch")?);
                let tid = i64::from(pid)
                    .checked_add(d)
                    .and_then(|t| u32::try_from(t).ok())
                    .ok_or_else(|| {
                        Error::malformed(
                            "TaskSwitch",
                            at as u64,
                            format!("pid {pid} + tid delta {d} is not a u32"),
                        )
                    })?;
                Step::Task(pid, tid)
            }
            tag::CPU_SWITCH => {
                let cpu = self.u32var("CpuSwitch", at)?;
                self.cur_slot = None;
                self.have_time = false;
                Step::Cpu(cpu)
            }
            tag::TIME_UNIT => {
                let u = self.uvar("TimeUnit")?;
                if !(1..=MAX_TIME_UNIT_NS).contains(&u) {
                    return Err(Error::malformed(
                        "TimeUnit",
                        at as u64,
                        format!("{u} ns per tick is not in 1..={MAX_TIME_UNIT_NS}"),
                    ));
                }
                self.time_unit = u;
                self.max_ticks = (u64::MAX / u).min(i64::MAX as u64) as i64;
                self.have_time = false;
                Step::TimeUnit
            }
            tag::COMM
            | tag::COOKIE_DEF
            | tag::MODULE_LOAD
            | tag::LOST
            | tag::THROTTLE
            | tag::STACK_DEF
            | tag::STACK_DEF_ON
            | tag::CGROUP_DEF
            | tag::OFF_CPU
            | tag::JIT_CODE => {
                let len = self.uvar("marker length")?;
                let start = self.pos;
                let avail = (self.buf.len() - start) as u64;
                if len > avail {
                    return Err(Error::Truncated {
                        what: "marker body",
                        offset: start as u64,
                        len: self.buf.len() as u64,
                    });
                }
                self.pos = start + len as usize;
                Step::Marker {
                    tag: t,
                    body: &self.buf[start..self.pos],
                    at: start,
                }
            }
            _ => {
                return Err(Error::UnknownTag {
                    tag: t,
                    offset: at as u64,
                })
            }
        };
        Ok(Some(step))
    }
}

/// `prev + unzigzag(d)`, which must be a u32 stack id.
#[inline(always)]
fn add_stack_delta(prev: u32, d: u64, at: usize) -> Result<u32> {
    let d = unzigzag(d);
    i64::from(prev)
        .checked_add(d)
        .and_then(|v| u32::try_from(v).ok())
        .ok_or_else(|| {
            Error::malformed(
                "StackSample",
                at as u64,
                format!("stack id {prev} + delta {d} is not a u32"),
            )
        })
}

/// Iterates over the events of one chunk payload. Stops after the first
/// error (which it yields).
///
/// Cookie back-references and offset and stack-id deltas are resolved: the
/// events are the logical stream ([`Event::CookieSwitch`] with the full
/// cookie, [`Event::Sample`] and [`Event::StackSample`] with the absolute
/// offset and stack id).
pub struct ChunkDecoder<'a> {
    core: Core<'a>,
    failed: bool,
}

impl<'a> ChunkDecoder<'a> {
    /// A decoder over `payload`.
    pub fn new(payload: &'a [u8]) -> Self {
        ChunkDecoder {
            core: Core::new(payload),
            failed: false,
        }
    }

    /// Byte offset of the next event in the payload.
    pub fn position(&self) -> usize {
        self.core.pos
    }

    /// The next event, `Ok(None)` at the end.
    pub fn next_event(&mut self) -> Result<Option<Event>> {
        if self.failed {
            return Ok(None);
        }
        let mut step = self.core.step();
        while let Ok(Some(Step::TimeUnit)) = step {
            step = self.core.step();
        }
        let r = match step {
            Ok(None) => Ok(None),
            Ok(Some(step)) => Ok(Some(match step {
                Step::Cpu(cpu) => Event::CpuSwitch { cpu },
                Step::Task(pid, tid) => Event::TaskSwitch { pid, tid },
                Step::Mode(kernel) => Event::Mode { kernel },
                Step::Cookie(cookie) => Event::CookieSwitch { cookie },
                Step::Cgroup(id) => Event::CgroupSwitch { id },
                Step::TimeUnit => unreachable!("time units are skipped above"),
                Step::Sample(offset, time) => Event::Sample { offset, time },
                Step::StackSample(offset, stack, time) => Event::StackSample {
                    offset,
                    stack,
                    time,
                },
                Step::Marker { tag, body, at } => match read_marker(tag, body, at as u64) {
                    Ok(ev) => ev,
                    Err(e) => {
                        self.failed = true;
                        return Err(e);
                    }
                },
            })),
            Err(e) => Err(e),
        };
        if r.is_err() {
            self.failed = true;
        }
        r
    }
}

impl Iterator for ChunkDecoder<'_> {
    type Item = Result<Event>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_event().transpose()
    }
}

/// Calls `f` with every event of `payload`, in order. On error, the events
/// before it were already delivered.
pub fn decode_events(payload: &[u8], mut f: impl FnMut(Event)) -> Result<()> {
    let mut d = ChunkDecoder::new(payload);
    while let Some(ev) = d.next_event()? {
        f(ev);
    }
    Ok(())
}

/// What the [`Expander`] turns the stream into.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expanded {
    /// A sample with its full state.
    Sample(ExpandedSample),
    /// A marker (`Comm`, `CookieDef`, `ModuleLoad`, `Lost`, `Throttle`,
    /// `StackDef`), passed through in its place.
    Marker(Event),
}

const HAVE_CPU: u8 = 1;
const HAVE_TASK: u8 = 2;
const HAVE_MODE: u8 = 4;
const HAVE_COOKIE: u8 = 8;
const HAVE_ALL: u8 = HAVE_CPU | HAVE_TASK | HAVE_MODE | HAVE_COOKIE;

/// The expansion state: the current sample fields and which are set.
struct State {
    cur: ExpandedSample,
    have: u8,
}

impl State {
    fn new() -> Self {
        State {
            cur: ExpandedSample::default(),
            have: 0,
        }
    }

    /// Applies a state step; returns the sample offset for sample steps.
    #[inline(always)]
    fn apply(&mut self, step: &Step<'_>, at: usize) -> Result<bool> {
        match *step {
            Step::Sample(offset, time) => {
                if self.have != HAVE_ALL {
                    return Err(self.missing(at));
                }
                self.cur.offset = offset;
                self.cur.stack = None;
                self.cur.time = time;
                return Ok(true);
            }
            Step::StackSample(offset, stack, time) => {
                if self.have != HAVE_ALL {
                    return Err(self.missing(at));
                }
                self.cur.offset = offset;
                self.cur.stack = Some(stack);
                self.cur.time = time;
                return Ok(true);
            }
            Step::Cookie(c) => {
                self.cur.cookie = c;
                self.have |= HAVE_COOKIE;
            }
            Step::Mode(k) => {
                self.cur.kernel = k;
                self.have |= HAVE_MODE;
            }
            Step::Cgroup(id) => self.cur.cgroup = id,
            Step::Task(pid, tid) => {
                self.cur.pid = pid;
                self.cur.tid = tid;
                self.have |= HAVE_TASK;
            }
            Step::Cpu(cpu) => {
                self.cur.cpu = cpu;
                self.cur.cgroup = 0;
                self.have = HAVE_CPU;
            }
            Step::Marker { .. } | Step::TimeUnit => {}
        }
        Ok(false)
    }

    #[cold]
    fn missing(&self, at: usize) -> Error {
        let missing = if self.have & HAVE_CPU == 0 {
            "cpu"
        } else if self.have & HAVE_TASK == 0 {
            "task"
        } else if self.have & HAVE_MODE == 0 {
            "mode"
        } else {
            "cookie"
        };
        Error::SampleWithoutState {
            offset: at as u64,
            missing,
        }
    }
}

/// Expands one chunk payload into samples with their full state, passing
/// markers through in their places. State starts unset; a sample before
/// cpu, task, mode and cookie are all set is an error
/// ([`Error::SampleWithoutState`]). Stops after the first error.
pub struct Expander<'a> {
    core: Core<'a>,
    state: State,
    failed: bool,
}

impl<'a> Expander<'a> {
    /// An expander over `payload`.
    pub fn new(payload: &'a [u8]) -> Self {
        Expander {
            core: Core::new(payload),
            state: State::new(),
            failed: false,
        }
    }

    fn next_inner(&mut self) -> Result<Option<Expanded>> {
        loop {
            let at = self.core.pos;
            let Some(step) = self.core.step()? else {
                return Ok(None);
            };
            if let Step::Marker { tag, body, at } = step {
                return Ok(Some(Expanded::Marker(read_marker(tag, body, at as u64)?)));
            }
            if self.state.apply(&step, at)? {
                return Ok(Some(Expanded::Sample(self.state.cur)));
            }
        }
    }
}

impl Iterator for Expander<'_> {
    type Item = Result<Expanded>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let r = self.next_inner();
        if r.is_err() {
            self.failed = true;
        }
        r.transpose()
    }
}

/// The fast path: calls `on_sample` for every sample of `payload` with its
/// full state (its stack id too, for stack samples) and `on_marker` for
/// every marker (stack definitions included: feed them to a
/// [`crate::StackTable`]), in stream order, without building an [`Event`]
/// per sample. Returns the number of samples.
///
/// On error, everything before the bad byte was already delivered; a
/// caller that aggregates and wants all-or-nothing per chunk should
/// aggregate into a per-chunk scratch first.
///
/// ```
/// use profkit_eventlog::{for_each_sample, ChunkEncoder};
/// let mut enc = ChunkEncoder::new();
/// enc.sample(1, 7, 7, true, 42, 0x100);
/// let mut total = 0;
/// let n = for_each_sample(enc.bytes(), |s| total += s.offset, |_marker| {}).unwrap();
/// assert_eq!((n, total), (1, 0x100));
/// ```
pub fn for_each_sample(
    payload: &[u8],
    mut on_sample: impl FnMut(&ExpandedSample),
    mut on_marker: impl FnMut(Event),
) -> Result<u64> {
    let mut core = Core::new(payload);
    let mut state = State::new();
    let mut n = 0u64;
    loop {
        let at = core.pos;
        let Some(step) = core.step()? else {
            return Ok(n);
        };
        if let Step::Marker { tag, body, at } = step {
            on_marker(read_marker(tag, body, at as u64)?);
        } else if state.apply(&step, at)? {
            n += 1;
            on_sample(&state.cur);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{push_uvar, tag};
    use crate::encode::{ChunkEncoder, OffsetCoding};
    use crate::event::{CookieEntry, CookieKind, Frame, LostKind, COOKIE_UNKNOWN};
    use proptest::prelude::*;

    fn events(payload: &[u8]) -> Vec<Event> {
        let mut v = Vec::new();
        decode_events(payload, |e| v.push(e)).unwrap();
        v
    }

    fn all_markers() -> Vec<Event> {
        vec![
            Event::Comm {
                pid: 1,
                tid: 2,
                comm: "bash".into(),
                exec: true,
                ns: None,
            },
            Event::Comm {
                pid: u32::MAX,
                tid: 0,
                comm: String::new(),
                exec: false,
                ns: Some(crate::NsTask {
                    pid: u32::MAX,
                    tid: 0,
                }),
            },
            Event::Comm {
                pid: 7,
                tid: 7,
                comm: "wörk ✓".into(),
                exec: false,
                ns: Some(crate::NsTask { pid: 1, tid: 2 }),
            },
            Event::CookieDef(CookieEntry {
                cookie: u64::MAX,
                kind: CookieKind::Kernel,
                path: "[kernel.kallsyms]".into(),
                build_id: Some(vec![0xab; 20]),
                dev: 0,
                inode: u64::MAX,
                generation: 3,
                base: 0xffff_ffff_8100_0000,
                pid: None,
                file: Default::default(),
            }),
            Event::CookieDef(CookieEntry {
                cookie: 5,
                kind: CookieKind::Anon,
                path: "//anon".into(),
                build_id: Some(Vec::new()),
                dev: 1,
                inode: 2,
                generation: 0,
                base: 0,
                pid: Some(u32::MAX),
                file: Default::default(),
            }),
            Event::CookieDef(CookieEntry {
                cookie: 6,
                kind: CookieKind::Vdso,
                path: "[vdso]".into(),
                build_id: None,
                dev: 0,
                inode: 0,
                generation: 0,
                base: 0,
                pid: Some(12),
                file: Default::default(),
            }),
            Event::ModuleLoad {
                cookie: 9,
                start: 0x1000,
                end: 0x2000,
                pgoff: 0,
                pid: None,
            },
            Event::ModuleLoad {
                cookie: u64::MAX,
                start: u64::MAX,
                end: 0,
                pgoff: u64::MAX,
                pid: Some(0),
            },
            Event::Lost {
                cpu: 3,
                kind: LostKind::Ring,
                count: 10,
            },
            Event::Lost {
                cpu: u32::MAX,
                kind: LostKind::Reconcile,
                count: u64::MAX,
            },
            Event::Throttle {
                cpu: 0,
                time: 123,
                throttled: true,
            },
            Event::Throttle {
                cpu: 1,
                time: u64::MAX,
                throttled: false,
            },
            Event::OffCpu {
                cpu: 1,
                pid: 100,
                tid: 101,
                kind: crate::OffCpuKind::Blocked,
                kernel: true,
                cookie: 0xfeed,
                offset: 0x1234,
                stack: Some(7),
                cgroup: 0,
                count: 3,
                total_ns: 90_000_000,
            },
            Event::OffCpu {
                cpu: u32::MAX,
                pid: u32::MAX,
                tid: 0,
                kind: crate::OffCpuKind::Runnable,
                kernel: false,
                cookie: u64::MAX,
                offset: u64::MAX,
                stack: None,
                cgroup: u64::MAX,
                count: u64::MAX,
                total_ns: u64::MAX,
            },
        ]
    }

    #[test]
    fn every_event_round_trips() {
        let mut all = vec![
            Event::CpuSwitch { cpu: 0 },
            Event::CpuSwitch { cpu: u32::MAX },
            Event::TaskSwitch {
                pid: 0,
                tid: u32::MAX,
            },
            Event::TaskSwitch {
                pid: u32::MAX,
                tid: 0,
            },
            Event::TaskSwitch { pid: 5, tid: 5 },
            Event::Mode { kernel: true },
            Event::Mode { kernel: false },
            Event::CookieSwitch { cookie: 0 },
            Event::Sample {
                offset: 0,
                time: None,
            },
            Event::Sample {
                offset: u64::MAX,
                time: None,
            },
            Event::CookieSwitch { cookie: u64::MAX },
            Event::Sample {
                offset: 1,
                time: None,
            },
            Event::Sample {
                offset: u64::MAX,
                time: None,
            },
            Event::CookieSwitch { cookie: 0 }, // by slot reference now
            Event::Sample {
                offset: 2,
                time: None,
            },
        ];
        all.extend(all_markers());
        for ev in &all {
            // Each alone (samples need no state at the event level)...
            let mut enc = ChunkEncoder::new();
            enc.event(ev);
            assert_eq!(events(enc.bytes()), std::slice::from_ref(ev), "{ev:?}");
        }
        // ...and all in one stream.
        let mut enc = ChunkEncoder::new();
        for ev in &all {
            enc.event(ev);
        }
        assert_eq!(events(enc.bytes()), all);
        let decoded: Vec<Event> = ChunkDecoder::new(enc.bytes()).map(Result::unwrap).collect();
        assert_eq!(decoded, all);
    }

    #[test]
    fn a_comms_namespace_ids_are_an_appended_field() {
        let comm = |ns| Event::Comm {
            pid: 300,
            tid: 301,
            comm: "sh".into(),
            exec: true,
            ns,
        };
        let bytes = |ev: &Event| {
            let mut enc = ChunkEncoder::new();
            enc.event(ev);
            enc.bytes().to_vec()
        };
        // Without: the version-1 body, byte for byte.
        let plain = bytes(&comm(None));
        assert_eq!(
            plain,
            [0x20, 0x08, 0xac, 0x02, 0xad, 0x02, 0x01, 0x02, b's', b'h']
        );
        // With: the same fields, then presence, ns pid, ns tid.
        let with = bytes(&comm(Some(crate::NsTask { pid: 1, tid: 2 })));
        assert_eq!(with[2..10], plain[2..]);
        assert_eq!(with[..2], [0x20, 0x0b]);
        assert_eq!(with[10..], [0x01, 0x01, 0x02]);
        assert_eq!(
            events(&with),
            [comm(Some(crate::NsTask { pid: 1, tid: 2 }))]
        );
        // A reader ignores what follows the fields it knows (a newer
        // writer's further appended fields).
        let mut newer = with.clone();
        newer[1] += 2;
        newer.extend_from_slice(&[0x05, 0x06]);
        assert_eq!(
            events(&newer),
            [comm(Some(crate::NsTask { pid: 1, tid: 2 }))]
        );
    }

    #[test]
    fn sample_writes_only_changed_state() {
        let mut enc = ChunkEncoder::new();
        enc.sample(0, 10, 10, false, 100, 1);
        enc.sample(0, 10, 10, false, 100, 2);
        enc.sample(0, 10, 11, false, 100, 3);
        enc.sample(0, 10, 11, true, 200, 4);
        enc.sample(1, 10, 11, true, 200, 5);
        use Event::*;
        assert_eq!(
            events(enc.bytes()),
            [
                CpuSwitch { cpu: 0 },
                TaskSwitch { pid: 10, tid: 10 },
                Mode { kernel: false },
                CookieSwitch { cookie: 100 },
                Sample {
                    offset: 1,
                    time: None
                },
                Sample {
                    offset: 2,
                    time: None
                },
                TaskSwitch { pid: 10, tid: 11 },
                Sample {
                    offset: 3,
                    time: None
                },
                Mode { kernel: true },
                CookieSwitch { cookie: 200 },
                Sample {
                    offset: 4,
                    time: None
                },
                // A CPU switch unsets everything, so all of it comes again.
                CpuSwitch { cpu: 1 },
                TaskSwitch { pid: 10, tid: 11 },
                Mode { kernel: true },
                CookieSwitch { cookie: 200 },
                Sample {
                    offset: 5,
                    time: None
                },
            ]
        );
        assert_eq!(enc.samples(), 5);
        assert_eq!(enc.per_cpu_samples(), [(0, 4), (1, 1)]);
        assert_eq!(enc.cpu_samples(0), 4);
        assert_eq!(enc.cpu_samples(1), 1);
        assert_eq!(enc.cpu_samples(2), 0);
    }

    #[test]
    fn cookie_slot_references_are_one_byte() {
        let mut enc = ChunkEncoder::new();
        enc.sample(0, 1, 1, false, 0xaaaa_aaaa_aaaa, 0);
        enc.sample(0, 1, 1, false, 0xbbbb_bbbb_bbbb, 0);
        let before = enc.bytes().len();
        enc.sample(0, 1, 1, false, 0xaaaa_aaaa_aaaa, 0);
        // slot reference (1 byte) + sample tag + 1-byte offset
        assert_eq!(enc.bytes().len() - before, 3);
        assert_eq!(enc.bytes()[before], tag::COOKIE_REF_BASE);
    }

    #[test]
    fn cookie_slots_evict_fifo() {
        let mut enc = ChunkEncoder::new();
        let n = crate::codec::COOKIE_SLOTS as u64 * 2 + 5;
        let mut want = Vec::new();
        for round in 0..3 {
            for c in 0..n {
                let cookie = c * 0x1_0000_0001 + 7;
                enc.sample(0, 1, 1, false, cookie, c + round);
                want.push((cookie, c + round));
            }
        }
        let got: Vec<(u64, u64)> = expand(enc.bytes())
            .unwrap()
            .into_iter()
            .map(|s| (s.cookie, s.offset))
            .collect();
        assert_eq!(got, want);
    }

    fn expand(payload: &[u8]) -> Result<Vec<ExpandedSample>> {
        let mut v = Vec::new();
        for_each_sample(payload, |s| v.push(*s), |_| {})?;
        Ok(v)
    }

    #[test]
    fn delta_offsets_resolve_per_cookie() {
        for coding in [
            OffsetCoding::Absolute,
            OffsetCoding::Delta,
            OffsetCoding::Adaptive,
        ] {
            let mut enc = ChunkEncoder::new();
            enc.set_offset_coding(coding);
            let seq = [
                (1, 0x10_0000),
                (1, 0x10_0008),
                (2, 0x1f_ffff),
                (1, 0x10_0004),
                (2, 0),
                (1, u64::MAX),
                (1, 0),
            ];
            for &(c, off) in &seq {
                enc.sample(3, 9, 9, false, c, off);
            }
            let got: Vec<(u64, u64)> = expand(enc.bytes())
                .unwrap()
                .iter()
                .map(|s| (s.cookie, s.offset))
                .collect();
            assert_eq!(got, seq, "{coding:?}");
        }
        // A hot loop is cheaper in delta form.
        let size = |coding| {
            let mut enc = ChunkEncoder::new();
            enc.set_offset_coding(coding);
            for i in 0..100u64 {
                enc.sample(0, 1, 1, false, 1, 0x1f_0000 + (i % 4) * 8);
            }
            enc.bytes().len()
        };
        assert!(size(OffsetCoding::Adaptive) < size(OffsetCoding::Absolute));
    }

    #[test]
    fn unknown_and_reserved_tags_are_rejected_with_offset() {
        for t in [tag::INVALID, 0x1c, 0x2a, 0x08, 0x1f, 0x3f, 0x80, 0xff] {
            let mut enc = ChunkEncoder::new();
            enc.sample(0, 1, 1, false, 1, 1);
            let at = enc.bytes().len() as u64;
            let mut p = enc.bytes().to_vec();
            p.push(t);
            p.extend_from_slice(&[0; 16]);
            let err = decode_events(&p, |_| {}).unwrap_err();
            assert!(
                matches!(err, Error::UnknownTag { tag, offset } if tag == t && offset == at),
                "{err}"
            );
            let msg = err.to_string();
            assert!(
                msg.contains(&format!("{t:#04x}")) && msg.contains(&format!("byte {at}")),
                "{msg}"
            );
            assert!(matches!(expand(&p), Err(Error::UnknownTag { .. })));
            assert!(Expander::new(&p).any(|r| r.is_err()));
        }
        let err = decode_events(&[0x00, 0, 0], |_| {}).unwrap_err();
        assert!(err.to_string().contains("zero byte"), "{err}");
    }

    #[test]
    fn sample_before_state_is_an_error() {
        let mut enc = ChunkEncoder::new();
        enc.event(&Event::CpuSwitch { cpu: 1 });
        enc.event(&Event::TaskSwitch { pid: 1, tid: 1 });
        enc.event(&Event::Sample {
            offset: 5,
            time: None,
        });
        let err = expand(enc.bytes()).unwrap_err();
        assert!(
            matches!(
                err,
                Error::SampleWithoutState {
                    missing: "mode",
                    offset: 5
                }
            ),
            "{err}"
        );
        // The event-level decoder has no such rule.
        assert_eq!(events(enc.bytes()).len(), 3);
    }

    #[test]
    fn malformed_payloads_are_errors() {
        // Reference to an empty slot.
        let err = decode_events(&[tag::COOKIE_REF_BASE + 3], |_| {}).unwrap_err();
        assert!(
            matches!(
                err,
                Error::EmptyCookieSlot {
                    slot: 3,
                    offset: 0,
                    filled: 0
                }
            ),
            "{err}"
        );
        // Truncated varint.
        let err = decode_events(&[tag::SAMPLE, 0x80], |_| {}).unwrap_err();
        assert!(matches!(err, Error::Truncated { offset: 1, .. }), "{err}");
        // Truncated cookie.
        let err = decode_events(&[tag::COOKIE_SWITCH, 1, 2], |_| {}).unwrap_err();
        assert!(
            matches!(
                err,
                Error::Truncated {
                    what: "CookieSwitch",
                    ..
                }
            ),
            "{err}"
        );
        // Marker length past the payload.
        let mut p = vec![tag::COMM];
        push_uvar(&mut p, 1 << 40);
        assert!(matches!(
            decode_events(&p, |_| {}),
            Err(Error::Truncated { .. })
        ));
        // CPU beyond 32 bits.
        let mut p = vec![tag::CPU_SWITCH];
        push_uvar(&mut p, 1 << 33);
        assert!(matches!(
            decode_events(&p, |_| {}),
            Err(Error::Malformed {
                what: "CpuSwitch",
                ..
            })
        ));
        // Delta before any cookie.
        assert!(matches!(
            decode_events(&[tag::SAMPLE_DELTA, 2], |_| {}),
            Err(Error::SampleWithoutState {
                missing: "cookie",
                ..
            })
        ));
        // Bad lost kind inside a well-framed marker.
        let p = [tag::LOST, 3, 1, 99, 1];
        let err = decode_events(&p, |_| {}).unwrap_err();
        assert!(err.to_string().contains("unknown lost kind 99"), "{err}");
        // Bad UTF-8 in a comm.
        let p = [tag::COMM, 6, 1, 1, 0, 2, 0xff, 0xfe];
        assert!(matches!(
            decode_events(&p, |_| {}),
            Err(Error::Malformed { what: "Comm", .. })
        ));
    }

    #[test]
    fn malformed_stack_samples_are_errors() {
        // "Same stack" or an offset delta needs a current cookie slot.
        for t in [
            tag::STACK_SAMPLE_DELTA,
            tag::STACK_SAMPLE_SAME,
            tag::STACK_SAMPLE_SAME_DELTA,
        ] {
            assert!(
                matches!(
                    decode_events(&[t, 2, 2], |_| {}),
                    Err(Error::SampleWithoutState {
                        missing: "cookie",
                        offset: 0
                    })
                ),
                "{t:#x}"
            );
        }
        // Without a slot, 0x12 is absolute against stack 0.
        assert_eq!(
            events(&[tag::STACK_SAMPLE, 5, 8]),
            [Event::StackSample {
                offset: 5,
                stack: 4,
                time: None
            }]
        );
        // A stack id delta that leaves 0..2^32.
        let err = decode_events(&[tag::STACK_SAMPLE, 5, 1], |_| {}).unwrap_err();
        assert!(
            matches!(
                err,
                Error::Malformed {
                    what: "StackSample",
                    offset: 0,
                    ..
                }
            ),
            "{err}"
        );
        let mut p = vec![tag::STACK_SAMPLE, 0];
        push_uvar(&mut p, crate::codec::zigzag(1 << 32));
        assert!(decode_events(&p, |_| {}).is_err());
        // Truncated stack operand.
        assert!(matches!(
            decode_events(&[tag::STACK_SAMPLE, 5], |_| {}),
            Err(Error::Truncated { .. })
        ));
        // A StackDef whose run count cannot fit its body.
        let p = [tag::STACK_DEF, 3, 1, 0x7f, 0];
        let err = decode_events(&p, |_| {}).unwrap_err();
        assert!(
            matches!(
                err,
                Error::Malformed {
                    what: "StackDef",
                    ..
                }
            ),
            "{err}"
        );
        // A frame count past the body.
        let mut body = vec![1, 1];
        body.extend_from_slice(&[0; 8]);
        body.extend_from_slice(&[0, 9, 1]);
        let mut p = vec![tag::STACK_DEF, body.len() as u8];
        p.extend_from_slice(&body);
        let err = decode_events(&p, |_| {}).unwrap_err();
        assert!(err.to_string().contains("run.frames"), "{err}");
        // A million frames in one megabyte: over the format's limit, refused
        // before anything is reserved for them.
        let n = 1_000_000usize;
        let mut body = Vec::new();
        crate::codec::push_uvar(&mut body, 7); // id
        crate::codec::push_uvar(&mut body, 1); // runs
        body.extend_from_slice(&[0x11; 8]); // cookie
        body.push(0); // user
        crate::codec::push_uvar(&mut body, n as u64);
        body.resize(body.len() + n, 1); // offsets of one byte
        let mut p = vec![tag::STACK_DEF];
        crate::codec::push_uvar(&mut p, body.len() as u64);
        p.extend_from_slice(&body);
        let err = decode_events(&p, |_| {}).unwrap_err();
        assert!(err.to_string().contains("more than 256 frames"), "{err}");
        // 256 is fine.
        let frames = vec![
            Frame {
                cookie: 1,
                offset: 2,
                kernel: false
            };
            crate::MAX_STACK_FRAMES
        ];
        let mut enc = crate::ChunkEncoder::new();
        enc.event(&Event::StackDef { id: 1, frames });
        decode_events(enc.bytes(), |_| {}).unwrap();
    }

    #[test]
    fn stack_defs_group_frames_into_runs() {
        let f = |cookie, offset, kernel| Frame {
            cookie,
            offset,
            kernel,
        };
        let frames = vec![
            f(1, 10, true),
            f(1, 11, true),
            f(1, 12, false), // same cookie, other mode: a new run
            f(2, 0, false),
            f(1, 13, false),
            f(1, 14, false),
        ];
        let ev = Event::StackDef { id: 300, frames };
        let mut enc = ChunkEncoder::new();
        enc.event(&ev);
        // tag, len, id (2), runs = 4, then 4 runs of 10 bytes + offsets.
        assert_eq!(enc.bytes()[4], 4);
        assert_eq!(enc.bytes().len(), 2 + 2 + 1 + 4 * 10 + 6);
        assert_eq!(events(enc.bytes()), [ev]);
        let empty = Event::StackDef {
            id: 0,
            frames: vec![],
        };
        let mut enc = ChunkEncoder::new();
        enc.event(&empty);
        assert_eq!(enc.bytes(), [tag::STACK_DEF, 2, 0, 0]);
        assert_eq!(events(enc.bytes()), [empty]);
    }

    #[test]
    fn clear_starts_an_independent_chunk() {
        let mut enc = ChunkEncoder::new();
        enc.sample(0, 1, 1, false, 77, 1);
        enc.clear();
        assert!(enc.is_empty());
        assert_eq!(enc.samples(), 0);
        enc.sample(0, 1, 1, false, 77, 2);
        assert_eq!(
            expand(enc.bytes()).unwrap(),
            [ExpandedSample {
                cpu: 0,
                pid: 1,
                tid: 1,
                kernel: false,
                cookie: 77,
                offset: 2,
                stack: None,
                cgroup: 0,
                time: None,
            }]
        );
        assert_eq!(enc.per_cpu_samples(), [(0, 1)]);
    }

    // ------------------------------------------------------------ proptests

    #[derive(Debug, Clone)]
    enum Op {
        Sample(ExpandedSample),
        /// An explicit state event through `event()`.
        State(Event),
        /// `event(&Event::Sample)` or `event(&Event::StackSample)` (only
        /// issued when the state is complete).
        RawSample(u64, Option<u32>),
        Marker(Event),
    }

    fn arb_cookie() -> impl Strategy<Value = u64> {
        prop_oneof![
            4 => (0u64..6).prop_map(|i| i.wrapping_mul(0x9e37_79b9_7f4a_7c15)),
            1 => (0u64..150).prop_map(|i| i.wrapping_mul(0x1234_5678_9abc_def1)),
            1 => any::<u64>(),
        ]
    }

    fn arb_offset() -> impl Strategy<Value = u64> {
        prop_oneof![0u64..256, 0u64..(2 << 20), 0u64..(32 << 20), any::<u64>()]
    }

    fn arb_stack() -> impl Strategy<Value = Option<u32>> {
        prop_oneof![
            3 => Just(None),
            3 => (0u32..4).prop_map(Some),
            1 => (0u32..5000).prop_map(Some),
            1 => any::<u32>().prop_map(Some),
            1 => prop_oneof![Just(0), Just(u32::MAX)].prop_map(Some),
        ]
    }

    fn arb_sample() -> impl Strategy<Value = ExpandedSample> {
        (
            prop_oneof![4 => 0u32..4, 1 => any::<u32>()],
            prop_oneof![4 => 0u32..5, 1 => any::<u32>()],
            prop_oneof![3 => Just(None), 1 => any::<u32>().prop_map(Some)],
            any::<bool>(),
            arb_cookie(),
            arb_offset(),
            arb_stack(),
            // Mostly close times (as a CPU's samples are), sometimes any.
            prop_oneof![
                1 => Just(None),
                4 => (0u64..1 << 20).prop_map(|t| Some((1 << 40) + t * 997)),
                1 => any::<u64>().prop_map(Some),
            ],
        )
            .prop_map(|(cpu, pid, tid, kernel, cookie, offset, stack, time)| {
                ExpandedSample {
                    cpu,
                    pid,
                    tid: tid.unwrap_or(pid),
                    kernel,
                    cookie,
                    offset,
                    stack,
                    // Cgroups change now and then, sometimes to none.
                    cgroup: (cookie ^ offset) % 4,
                    time,
                }
            })
    }

    fn arb_frame() -> impl Strategy<Value = Frame> {
        (
            prop_oneof![3 => 0u64..3, 1 => Just(COOKIE_UNKNOWN), 1 => any::<u64>()],
            arb_offset(),
            any::<bool>(),
        )
            .prop_map(|(cookie, offset, kernel)| Frame {
                cookie,
                offset,
                kernel,
            })
    }

    fn arb_state() -> impl Strategy<Value = Event> {
        prop_oneof![
            (0u32..4).prop_map(|cpu| Event::CpuSwitch { cpu }),
            (0u32..5, 0u32..5).prop_map(|(pid, tid)| Event::TaskSwitch { pid, tid }),
            any::<bool>().prop_map(|kernel| Event::Mode { kernel }),
            arb_cookie().prop_map(|cookie| Event::CookieSwitch { cookie }),
        ]
    }

    fn arb_marker() -> impl Strategy<Value = Event> {
        let markers = all_markers();
        prop_oneof![
            (0..markers.len()).prop_map(move |i| markers[i].clone()),
            (
                any::<u32>(),
                any::<u32>(),
                ".{0,20}",
                any::<bool>(),
                proptest::option::of((any::<u32>(), any::<u32>()))
            )
                .prop_map(|(pid, tid, comm, exec, ns)| Event::Comm {
                    pid,
                    tid,
                    comm,
                    exec,
                    ns: ns.map(|(pid, tid)| crate::NsTask { pid, tid }),
                }),
            (any::<u32>(), any::<u64>()).prop_map(|(cpu, count)| Event::Lost {
                cpu,
                kind: LostKind::NoTask,
                count
            }),
            (any::<u32>(), prop::collection::vec(arb_frame(), 0..40))
                .prop_map(|(id, frames)| Event::StackDef { id, frames }),
            (
                any::<u32>(),
                any::<u32>(),
                prop::collection::vec(arb_frame(), 0..40)
            )
                .prop_map(|(id, parent, frames)| Event::StackDefOn {
                    id,
                    parent,
                    frames
                }),
        ]
    }

    fn arb_op() -> impl Strategy<Value = Op> {
        prop_oneof![
            20 => arb_sample().prop_map(Op::Sample),
            3 => arb_state().prop_map(Op::State),
            2 => (arb_offset(), arb_stack()).prop_map(|(o, s)| Op::RawSample(o, s)),
            2 => arb_marker().prop_map(Op::Marker),
        ]
    }

    fn arb_coding() -> impl Strategy<Value = OffsetCoding> {
        prop_oneof![
            Just(OffsetCoding::Adaptive),
            Just(OffsetCoding::Absolute),
            Just(OffsetCoding::Delta)
        ]
    }

    /// Encodes `ops`; returns what expansion must give (times as the
    /// encoder keeps them: at most `MAX_SAMPLE_TIME_NS`, rounded down to
    /// `unit`).
    fn run_ops_in(enc: &mut ChunkEncoder, ops: &[Op], unit: u64) -> Vec<Expanded> {
        enc.set_time_unit(unit);
        let mut want = run_ops(enc, ops);
        for e in &mut want {
            if let Expanded::Sample(s) = e {
                s.time = s
                    .time
                    .map(|t| t.min(crate::encode::MAX_SAMPLE_TIME_NS) / unit * unit);
            }
        }
        want
    }

    /// Encodes `ops`; returns what expansion must give (times whole).
    fn run_ops(enc: &mut ChunkEncoder, ops: &[Op]) -> Vec<Expanded> {
        let mut want = Vec::new();
        // The model of the state: (cpu, task, mode, cookie).
        type Model = (Option<u32>, Option<(u32, u32)>, Option<bool>, Option<u64>);
        let mut m: Model = (None, None, None, None);
        // The cgroup state: 0 until set, unset by a CPU switch.
        let mut cg = 0u64;
        for op in ops {
            match op {
                Op::Sample(s) => {
                    enc.expanded(s);
                    cg = s.cgroup;
                    m = (
                        Some(s.cpu),
                        Some((s.pid, s.tid)),
                        Some(s.kernel),
                        Some(s.cookie),
                    );
                    want.push(Expanded::Sample(*s));
                }
                Op::State(ev) => {
                    enc.event(ev);
                    match *ev {
                        Event::CpuSwitch { cpu } => {
                            m = (Some(cpu), None, None, None);
                            cg = 0;
                        }
                        Event::TaskSwitch { pid, tid } => m.1 = Some((pid, tid)),
                        Event::Mode { kernel } => m.2 = Some(kernel),
                        Event::CookieSwitch { cookie } => m.3 = Some(cookie),
                        _ => unreachable!(),
                    }
                }
                Op::RawSample(offset, stack) => {
                    if let (Some(cpu), Some((pid, tid)), Some(kernel), Some(cookie)) = m {
                        enc.event(&match *stack {
                            None => Event::Sample {
                                offset: *offset,
                                time: None,
                            },
                            Some(stack) => Event::StackSample {
                                offset: *offset,
                                stack,
                                time: None,
                            },
                        });
                        want.push(Expanded::Sample(ExpandedSample {
                            cpu,
                            pid,
                            tid,
                            kernel,
                            cookie,
                            offset: *offset,
                            stack: *stack,
                            cgroup: cg,
                            time: None,
                        }));
                    }
                }
                Op::Marker(ev) => {
                    enc.event(ev);
                    want.push(Expanded::Marker(ev.clone()));
                }
            }
        }
        want
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn encode_expand_round_trip(
            ops in prop::collection::vec(arb_op(), 0..300),
            coding in arb_coding(),
            unit in prop_oneof![Just(1u64), Just(100), Just(1000), 1..=crate::codec::MAX_TIME_UNIT_NS],
        ) {
            let mut enc = ChunkEncoder::new();
            enc.set_offset_coding(coding);
            let want = run_ops_in(&mut enc, &ops, unit);
            let n_samples = want.iter().filter(|e| matches!(e, Expanded::Sample(_))).count() as u64;

            // Pull-style expander.
            let got: Vec<Expanded> = Expander::new(enc.bytes()).collect::<Result<_>>().unwrap();
            prop_assert_eq!(&got, &want);

            // Fast path.
            let fast = std::cell::RefCell::new(Vec::new());
            let mut markers = Vec::new();
            let n = for_each_sample(enc.bytes(), |s| fast.borrow_mut().push(Expanded::Sample(*s)), |m| {
                markers.push(m.clone());
                fast.borrow_mut().push(Expanded::Marker(m));
            }).unwrap();
            prop_assert_eq!(&fast.into_inner(), &want);
            prop_assert_eq!(n, n_samples);
            prop_assert_eq!(enc.samples(), n_samples);

            // Per-CPU counts match the samples.
            let mut per_cpu = std::collections::BTreeMap::new();
            for e in &want {
                if let Expanded::Sample(s) = e {
                    *per_cpu.entry(s.cpu).or_insert(0u64) += 1;
                }
            }
            prop_assert_eq!(enc.per_cpu_samples(), per_cpu.into_iter().collect::<Vec<_>>());

            // Event level: markers appear in the same order.
            let evs = events(enc.bytes());
            let ev_markers: Vec<Event> = evs.into_iter().filter(Event::is_marker).collect();
            prop_assert_eq!(ev_markers, markers);

            // Re-encoding the decoded events gives the same samples.
            let mut again = ChunkEncoder::new();
            again.set_time_unit(unit);
            decode_events(enc.bytes(), |e| again.event(&e)).unwrap();
            let got2: Vec<Expanded> = Expander::new(again.bytes()).collect::<Result<_>>().unwrap();
            prop_assert_eq!(got2, want);
        }

        #[test]
        fn decoding_arbitrary_bytes_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
            let _ = decode_events(&bytes, |_| {});
            let _ = for_each_sample(&bytes, |_| {}, |_| {});
            for r in Expander::new(&bytes) {
                let _ = r;
            }
        }

        #[test]
        fn decoding_mutated_streams_never_panics(
            ops in prop::collection::vec(arb_op(), 1..100),
            flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
            cut in any::<prop::sample::Index>(),
        ) {
            let mut enc = ChunkEncoder::new();
            run_ops(&mut enc, &ops);
            let mut p = enc.bytes().to_vec();
            prop_assume!(!p.is_empty());
            for (i, x) in flips {
                let i = i.index(p.len());
                p[i] ^= x;
            }
            p.truncate(cut.index(p.len() + 1));
            let _ = decode_events(&p, |_| {});
            let _ = for_each_sample(&p, |_| {}, |_| {});
            let _ = Expander::new(&p).count();
        }
    }
}
