//! Off-CPU recordings in perf.data: which events' samples are switch-out
//! stacks, and what a `sched:sched_switch` sample says.
//!
//! Two `perf record` recipes give off-CPU time, and both are restated for
//! [`profkit_sync::SyncStage::record_offcpu`], the entry a live
//! `--off-cpu` session's context-switch rings use:
//!
//! ```text
//!  perf record -e cs -c 1 -g --switch-events -a        (as profctl --off-cpu records)
//!    SAMPLE of context-switches (stack of X)   ─► record_offcpu: X's switch-out stack
//!    SWITCH[_CPU_WIDE] out / in                ─► record_offcpu: as they are
//!
//!  perf record -e sched:sched_switch -g -a              (a tracepoint, no switch records)
//!    SAMPLE of sched_switch (stack of prev)    ─► record_offcpu: prev's switch-out stack
//!      raw: prev_pid, prev_state, next_pid     ─► Switch out (prev_pid, preempted when
//!                                                 prev_state is R) and Switch in
//!                                                 (next_pid), both at the sample's time
//! ```
//!
//! The tracepoint's field offsets are read from the event's format in the
//! file's tracing data (`HEADER_TRACING_DATA`, the text of
//! `/sys/kernel/tracing/events/sched/sched_switch/format` that perf
//! copies); a file without it is read with the layout of 64-bit kernels
//! (8 bytes of common fields, `prev_comm[16]`, `prev_pid`, `prev_prio`,
//! `prev_state` as a `long`, `next_comm[16]`, `next_pid`, `next_prio`),
//! with a warning.
//!
//! A CPU's `sched_switch` samples chain (one's `next_pid` is the next
//! one's `prev_pid`); where they do not, perf missed the switch between
//! (seen for some 2 % of a busy machine's switches, most of them out of
//! idle), and `prev_pid`'s switch-in is inferred just before its
//! switch-out (see `perf_data.rs`). The same rule gives a per-task
//! recording (no `-a`: only the task's own switch-outs are sampled) its
//! waits, each ended late by the task's run before its next switch-out
//! and the first on each CPU lost: `-a` is the recipe.

use linux_perf_data::linux_perf_event_reader::{PerfEventType, SoftwareCounterType};
use linux_perf_data::AttributeDescription;

/// What the samples of one event of the file are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    /// On-CPU samples (cpu-clock, cycles, ...): `SyncStage::record`.
    OnCpu,
    /// `context-switches` (`PERF_COUNT_SW_CONTEXT_SWITCHES`): each sample
    /// is the stack of the task switching out.
    ContextSwitch,
    /// `sched:sched_switch`: a switch-out stack, and the switch in its
    /// raw data.
    SchedSwitch(SchedSwitchFields),
}

impl Role {
    /// The role of `attr` in a file whose sched_switch formats (from its
    /// tracing data, [`sched_switch_formats`]) are `formats`.
    pub(crate) fn of(attr: &AttributeDescription, formats: &SchedSwitchFormats<'_>) -> Role {
        match attr.attributes().type_ {
            PerfEventType::Software(SoftwareCounterType::ContextSwitches) => Role::ContextSwitch,
            PerfEventType::Tracepoint(id) => {
                let format = formats.get(&id).copied();
                if format.is_some() || attr.name() == Some("sched:sched_switch") {
                    Role::SchedSwitch(
                        format
                            .and_then(SchedSwitchFields::from_format)
                            .unwrap_or_default(),
                    )
                } else {
                    Role::OnCpu
                }
            }
            _ => Role::OnCpu,
        }
    }

    /// True for the events whose samples are switch-out stacks.
    pub(crate) fn is_offcpu(self) -> bool {
        self != Role::OnCpu
    }
}

/// True for perf's `dummy` event (the side-band records' carrier, which
/// samples nothing).
pub(crate) fn is_dummy(attr: &AttributeDescription) -> bool {
    matches!(
        attr.attributes().type_,
        PerfEventType::Software(SoftwareCounterType::Dummy)
    )
}

/// One field of a tracepoint's raw data: its offset and size in bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Field {
    offset: usize,
    size: usize,
}

impl Field {
    /// The field's value in `raw` (sign-extended when `signed`), in the
    /// file's byte order (`big`): `None` if `raw` is too short or the size
    /// is not 4 or 8.
    fn read(self, raw: &[u8], big: bool, signed: bool) -> Option<u64> {
        let b = raw.get(self.offset..self.offset.checked_add(self.size)?)?;
        Some(match self.size {
            4 => {
                let a: [u8; 4] = b.try_into().ok()?;
                let v = if big {
                    u32::from_be_bytes(a)
                } else {
                    u32::from_le_bytes(a)
                };
                if signed {
                    v as i32 as i64 as u64
                } else {
                    u64::from(v)
                }
            }
            8 => {
                let a: [u8; 8] = b.try_into().ok()?;
                if big {
                    u64::from_be_bytes(a)
                } else {
                    u64::from_le_bytes(a)
                }
            }
            _ => return None,
        })
    }
}

/// Where `sched_switch`'s fields are in a sample's raw data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SchedSwitchFields {
    prev_pid: Field,
    prev_state: Field,
    next_pid: Field,
    /// Read from the file's tracing data (not the assumed layout).
    pub from_file: bool,
}

impl Default for SchedSwitchFields {
    /// The layout of Linux 4.x to 6.x on 64-bit machines.
    fn default() -> Self {
        SchedSwitchFields {
            prev_pid: Field {
                offset: 24,
                size: 4,
            },
            prev_state: Field {
                offset: 32,
                size: 8,
            },
            next_pid: Field {
                offset: 56,
                size: 4,
            },
            from_file: false,
        }
    }
}

/// `prev_state` bits below `TASK_REPORT_MAX` (0x100 since Linux 4.14):
/// a state (S, D, T, t, X, Z, P, I). None of them set: the task was
/// running (R), preempted (R+, `TASK_REPORT_MAX`) or yielding.
const STATE_BITS: u64 = 0xff;

/// One `sched_switch` sample's switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SchedSwitch {
    /// The task switching out (a thread id).
    pub prev_pid: u32,
    /// It was still runnable (preempted), not waiting.
    pub preempted: bool,
    /// It was dead (`X`, `EXIT_DEAD`, or `Z`, `EXIT_ZOMBIE`): its last
    /// switch-out, not a wait.
    pub dead: bool,
    /// The task switching in (a thread id).
    pub next_pid: u32,
}

/// `prev_state`'s `EXIT_DEAD` (X) and `EXIT_ZOMBIE` (Z) bits.
const DEAD_BITS: u64 = 0x10 | 0x20;

impl SchedSwitchFields {
    /// The fields of a format's text (`field:pid_t prev_pid;\toffset:24;\t
    /// size:4;...` lines): `None` unless `prev_pid`, `prev_state` and
    /// `next_pid` are there with sizes of 4 or 8.
    fn from_format(text: &[u8]) -> Option<Self> {
        let text = std::str::from_utf8(text).ok()?;
        let (mut prev_pid, mut prev_state, mut next_pid) = (None, None, None);
        for line in text.lines() {
            let Some(rest) = line.trim().strip_prefix("field:") else {
                continue;
            };
            let mut parts = rest.split(';').map(str::trim);
            let decl = parts.next()?;
            let name = decl.rsplit(' ').next()?.split('[').next()?;
            let (mut offset, mut size) = (None, None);
            for p in parts {
                if let Some(v) = p.strip_prefix("offset:") {
                    offset = v.parse::<usize>().ok();
                } else if let Some(v) = p.strip_prefix("size:") {
                    size = v.parse::<usize>().ok().filter(|s| *s == 4 || *s == 8);
                }
            }
            let field = offset
                .zip(size)
                .map(|(offset, size)| Field { offset, size });
            match name {
                "prev_pid" => prev_pid = field,
                "prev_state" => prev_state = field,
                "next_pid" => next_pid = field,
                _ => {}
            }
        }
        Some(SchedSwitchFields {
            prev_pid: prev_pid?,
            prev_state: prev_state?,
            next_pid: next_pid?,
            from_file: true,
        })
    }

    /// The switch a sample's raw data (`PERF_SAMPLE_RAW`) describes, in
    /// the file's byte order (`big`); `None` if it is too short.
    pub(crate) fn decode(&self, raw: &[u8], big: bool) -> Option<SchedSwitch> {
        let state = self.prev_state.read(raw, big, true)?;
        Some(SchedSwitch {
            prev_pid: self.prev_pid.read(raw, big, false)? as u32,
            preempted: state & STATE_BITS == 0,
            dead: state & DEAD_BITS != 0,
            next_pid: self.next_pid.read(raw, big, false)? as u32,
        })
    }
}

/// The most bytes of a format's text read (sched_switch's is about 1.5 KB
/// with its print format).
const MAX_FORMAT: usize = 8192;

/// The `sched_switch` formats of a file, by tracepoint ID.
pub(crate) type SchedSwitchFormats<'a> = std::collections::HashMap<u64, &'a [u8]>;

/// At most this many `sched_switch` formats are taken from a file's
/// tracing data (a real one has one).
const MAX_FORMATS: usize = 64;

/// The `sched_switch` formats in perf's tracing data, by their ID: each
/// text from `name:` up to its print format. One pass over the data
/// (before: one per tracepoint attribute, so a forged file of many
/// attributes and a large section cost their product).
pub(crate) fn sched_switch_formats(tracing: &[u8]) -> SchedSwitchFormats<'_> {
    let needle = b"name: sched_switch\nID: ";
    let mut out = SchedSwitchFormats::new();
    for at in memchr::memmem::find_iter(tracing, needle) {
        if out.len() >= MAX_FORMATS {
            break;
        }
        let rest = &tracing[at..];
        let rest = &rest[..rest.len().min(MAX_FORMAT)];
        let digits = &rest[needle.len()..];
        let n = digits.iter().take_while(|b| b.is_ascii_digit()).count();
        if n == 0 || digits.get(n) != Some(&b'\n') {
            continue;
        }
        let Some(id) = std::str::from_utf8(&digits[..n])
            .ok()
            .and_then(|d| d.parse::<u64>().ok())
        else {
            continue;
        };
        let end = memchr::memmem::find(rest, b"print fmt:").unwrap_or(rest.len());
        out.entry(id).or_insert(&rest[..end]);
    }
    out
}

/// The text of the `sched_switch` format whose ID is `id` in perf's
/// tracing data (tests).
#[cfg(test)]
fn sched_switch_format(tracing: &[u8], id: u64) -> Option<&[u8]> {
    sched_switch_formats(tracing).get(&id).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This machine's format (Linux 6.18), as perf copies it.
    const FORMAT: &str = "name: sched_switch\nID: 372\nformat:\n\
        \tfield:unsigned short common_type;\toffset:0;\tsize:2;\tsigned:0;\n\
        \tfield:unsigned char common_flags;\toffset:2;\tsize:1;\tsigned:0;\n\
        \tfield:unsigned char common_preempt_count;\toffset:3;\tsize:1;\tsigned:0;\n\
        \tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;\n\n\
        \tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;\n\
        \tfield:pid_t prev_pid;\toffset:24;\tsize:4;\tsigned:1;\n\
        \tfield:int prev_prio;\toffset:28;\tsize:4;\tsigned:1;\n\
        \tfield:long prev_state;\toffset:32;\tsize:8;\tsigned:1;\n\
        \tfield:char next_comm[16];\toffset:40;\tsize:16;\tsigned:0;\n\
        \tfield:pid_t next_pid;\toffset:56;\tsize:4;\tsigned:1;\n\
        \tfield:int next_prio;\toffset:60;\tsize:4;\tsigned:1;\n\n\
        print fmt: \"prev_comm=%s prev_pid=%d\", REC->prev_comm, REC->prev_pid\n";

    fn raw(prev_pid: u32, state: u64, next_pid: u32) -> Vec<u8> {
        let mut r = vec![0u8; 64];
        r[8..14].copy_from_slice(b"napper");
        r[24..28].copy_from_slice(&prev_pid.to_le_bytes());
        r[32..40].copy_from_slice(&state.to_le_bytes());
        r[56..60].copy_from_slice(&next_pid.to_le_bytes());
        r
    }

    #[test]
    fn the_format_is_found_by_id_and_its_fields_read() {
        let mut tracing = b"\x17\x08Dtracing0.6\0...sched\0".to_vec();
        tracing.extend_from_slice(FORMAT.replace("372", "371").as_bytes());
        tracing.extend_from_slice(FORMAT.as_bytes());
        let text = sched_switch_format(&tracing, 372).unwrap();
        assert!(text.starts_with(b"name: sched_switch\nID: 372\n"));
        assert!(!text.windows(10).any(|w| w == b"print fmt:"));
        assert!(sched_switch_format(&tracing, 373).is_none());
        let f = SchedSwitchFields::from_format(text).unwrap();
        assert_eq!(
            f,
            SchedSwitchFields {
                from_file: true,
                ..Default::default()
            }
        );
        // Another layout: a 32-bit kernel's `long`, other offsets.
        let other = FORMAT
            .replace(
                "long prev_state;\toffset:32;\tsize:8",
                "long prev_state;\toffset:30;\tsize:4",
            )
            .replace("next_pid;\toffset:56", "next_pid;\toffset:50");
        let f = SchedSwitchFields::from_format(other.as_bytes()).unwrap();
        assert_eq!(
            f.prev_state,
            Field {
                offset: 30,
                size: 4
            }
        );
        assert_eq!(
            f.next_pid,
            Field {
                offset: 50,
                size: 4
            }
        );
        // A field missing: no layout from the file.
        let missing = FORMAT.replace("next_pid", "next_tid");
        assert_eq!(SchedSwitchFields::from_format(missing.as_bytes()), None);
    }

    /// R+ (preempted, `TASK_REPORT_MAX`) and R are runnable; S, D, I
    /// (idle kernel threads) and the rest are waits; X and Z are a dead
    /// task's last switch.
    #[test]
    fn prev_state_r_is_preempted_and_any_state_bit_is_a_wait() {
        let f = SchedSwitchFields::default();
        for (state, preempted, dead) in [
            (0, true, false),
            (0x100, true, false),
            (0x1, false, false),
            (0x2, false, false),
            (0x80, false, false),
            (0x10, false, true),
            (0x20, false, true),
            (0x101, false, false),
        ] {
            assert_eq!(
                f.decode(&raw(4242, state, 7), false),
                Some(SchedSwitch {
                    prev_pid: 4242,
                    preempted,
                    dead,
                    next_pid: 7
                }),
                "{state:#x}"
            );
        }
        assert_eq!(f.decode(&raw(1, 1, 2)[..59], false), None);
        // Big-endian files read their fields in their order.
        let mut big = vec![0u8; 64];
        big[24..28].copy_from_slice(&9u32.to_be_bytes());
        big[32..40].copy_from_slice(&1u64.to_be_bytes());
        big[56..60].copy_from_slice(&3u32.to_be_bytes());
        assert_eq!(
            f.decode(&big, true),
            Some(SchedSwitch {
                prev_pid: 9,
                preempted: false,
                dead: false,
                next_pid: 3
            })
        );
    }
}
