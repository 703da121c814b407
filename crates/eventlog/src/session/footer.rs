//! The session footer: per-CPU accounting and end times, written at
//! stop, and its bytes. Layout in `docs/FORMAT.md`.

use serde::{Deserialize, Serialize};

use super::*;
use crate::codec::{push_struct, push_uvar, BodyReader};
use crate::error::{Error, Result};

/// Per-CPU accounting, written in the footer at stop. Fields are only ever
/// appended (see `docs/FORMAT.md`).
#[derive(Default, Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuAccounting {
    /// The CPU.
    pub cpu: u32,
    /// Samples read from the ring.
    pub samples_received: u64,
    /// Samples written to the session.
    pub samples_written: u64,
    /// Lost: kernel LOST records.
    pub lost_ring: u64,
    /// Lost: event buffer full.
    pub lost_overflow: u64,
    /// Lost: session write failed.
    pub lost_disk_full: u64,
    /// Lost: no mapping for the address.
    pub lost_no_mapping: u64,
    /// Lost: unknown task.
    pub lost_no_task: u64,
    /// Lost: kernel read-back count minus LOST records seen, at stop.
    pub lost_reconcile: u64,
    /// Ring records skipped (unparseable or uninteresting).
    pub records_skipped: u64,
    /// Throttle records seen.
    pub throttle_events: u64,
    /// `PERF_FORMAT_LOST` read-back.
    pub kernel_lost: u64,
    /// Call graphs: samples whose stack met a frame that resolved to no
    /// binary (kept as one `[unknown]` frame; the rest of that user or
    /// kernel part of the chain was dropped). Footer field since version 2.
    pub stacks_unknown: u64,
    /// Call graphs: samples whose stack was longer than the sync stage's
    /// bound and lost its outermost frames. Footer field since version 2.
    pub stacks_truncated: u64,
    /// DWARF call graphs: samples whose copied user stack (`--call-graph
    /// dwarf,SIZE`) ended before the unwinder reached the outermost frame;
    /// their stack ends with an `[unknown]` frame. Footer field appended in
    /// version 2.
    pub user_stacks_cut: u64,
    /// Off-CPU (version 5; the off-CPU fields are written only when one
    /// of them is not 0): switch-outs read from this CPU's off-CPU ring.
    pub offcpu_switches: u64,
    /// Off-CPU: intervals written (closed by a switch-in, at a rotation or
    /// at stop), counted on the CPU they began on.
    pub offcpu_intervals: u64,
    /// Off-CPU: records the kernel dropped from this CPU's off-CPU ring
    /// (its `PERF_RECORD_LOST` counts): switch-outs, switch-ins or stacks
    /// that never reached profkit.
    pub offcpu_lost: u64,
    /// Off-CPU: intervals written without their stack (the switch-out's
    /// stack sample was throttled or lost), shown as `[unknown]`.
    pub offcpu_no_stack: u64,
    /// Off-CPU: waits that could not be measured: switch-ins with no
    /// switch-out before them (the task was off its CPU when the session
    /// started, a new task's first run, or its switch-out was lost), and
    /// intervals open when the kernel dropped records (their switch-in
    /// may be among them).
    pub offcpu_unpaired: u64,
    /// Off-CPU: what profkit dropped: switch records over the sync
    /// stage's bounds (records waiting to be ordered, open intervals), and
    /// waits in rounds that could not be stored (event buffer full, disk
    /// full).
    pub offcpu_dropped: u64,
    /// Off-CPU: the kernel's `PERF_FORMAT_LOST` read-back of the off-CPU
    /// events at stop (its view of `offcpu_lost`, not added to it).
    pub offcpu_kernel_lost: u64,
}

impl CpuAccounting {
    /// These counts minus `earlier` (the same CPU's counts at an earlier
    /// time), field by field: what happened in between (a part of a
    /// rotated session).
    pub fn minus(&self, earlier: &CpuAccounting) -> CpuAccounting {
        CpuAccounting {
            cpu: self.cpu,
            samples_received: self
                .samples_received
                .saturating_sub(earlier.samples_received),
            samples_written: self.samples_written.saturating_sub(earlier.samples_written),
            lost_ring: self.lost_ring.saturating_sub(earlier.lost_ring),
            lost_overflow: self.lost_overflow.saturating_sub(earlier.lost_overflow),
            lost_disk_full: self.lost_disk_full.saturating_sub(earlier.lost_disk_full),
            lost_no_mapping: self.lost_no_mapping.saturating_sub(earlier.lost_no_mapping),
            lost_no_task: self.lost_no_task.saturating_sub(earlier.lost_no_task),
            lost_reconcile: self.lost_reconcile.saturating_sub(earlier.lost_reconcile),
            records_skipped: self.records_skipped.saturating_sub(earlier.records_skipped),
            throttle_events: self.throttle_events.saturating_sub(earlier.throttle_events),
            kernel_lost: self.kernel_lost.saturating_sub(earlier.kernel_lost),
            stacks_unknown: self.stacks_unknown.saturating_sub(earlier.stacks_unknown),
            stacks_truncated: self
                .stacks_truncated
                .saturating_sub(earlier.stacks_truncated),
            user_stacks_cut: self.user_stacks_cut.saturating_sub(earlier.user_stacks_cut),
            offcpu_switches: self.offcpu_switches.saturating_sub(earlier.offcpu_switches),
            offcpu_intervals: self
                .offcpu_intervals
                .saturating_sub(earlier.offcpu_intervals),
            offcpu_lost: self.offcpu_lost.saturating_sub(earlier.offcpu_lost),
            offcpu_no_stack: self.offcpu_no_stack.saturating_sub(earlier.offcpu_no_stack),
            offcpu_unpaired: self.offcpu_unpaired.saturating_sub(earlier.offcpu_unpaired),
            offcpu_dropped: self.offcpu_dropped.saturating_sub(earlier.offcpu_dropped),
            offcpu_kernel_lost: self
                .offcpu_kernel_lost
                .saturating_sub(earlier.offcpu_kernel_lost),
        }
    }

    /// Adds `n` samples lost for `kind` to the counter that accounts for
    /// that kind: the one place this rule is written. `Ring` and `Other`
    /// (`PERF_RECORD_LOST` and `PERF_RECORD_LOST_SAMPLES`: both dropped by
    /// the kernel) go to `lost_ring`; every other kind has its own counter.
    /// Only the loss is added: the sync stage counts a sample as received
    /// when it reads it; [`CpuAccounting::add_lost_marker`] rebuilds both
    /// from a session's markers.
    pub fn add_lost(&mut self, kind: crate::LostKind, n: u64) {
        use crate::LostKind as K;
        let counter = match kind {
            K::Ring | K::Other => &mut self.lost_ring,
            K::Overflow => &mut self.lost_overflow,
            K::DiskFull => &mut self.lost_disk_full,
            K::NoMapping => &mut self.lost_no_mapping,
            K::NoTask => &mut self.lost_no_task,
            K::Reconcile => &mut self.lost_reconcile,
        };
        *counter = counter.saturating_add(n);
    }

    /// Accounts a `Lost` marker read back from a session (rebuilding the
    /// accounting of a session whose recorder died): the loss, and, for
    /// samples profkit had read ([`crate::LostKind::was_received`]), their
    /// receipt, so `samples_received` = written + those losses as at stop.
    pub fn add_lost_marker(&mut self, kind: crate::LostKind, n: u64) {
        self.add_lost(kind, n);
        if kind.was_received() {
            self.samples_received = self.samples_received.saturating_add(n);
        }
    }

    /// All samples lost on this CPU, for every reason. `kernel_lost` is not
    /// added: it is the kernel's view of `lost_ring + lost_reconcile`.
    pub fn lost_total(&self) -> u64 {
        self.lost_ring
            .saturating_add(self.lost_overflow)
            .saturating_add(self.lost_disk_full)
            .saturating_add(self.lost_no_mapping)
            .saturating_add(self.lost_no_task)
            .saturating_add(self.lost_reconcile)
    }
}

/// The off-CPU counts of [`CpuAccounting`], summed (over CPUs, parts,
/// sessions): what `profctl stop`/`status` and reports show of an off-CPU
/// recording. Sums saturate (a footer is its file's word).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OffCpuCounts {
    /// Switch-outs read (`offcpu_switches`).
    pub switches: u64,
    /// Waits measured and written (`offcpu_intervals`).
    pub intervals: u64,
    /// Switch records the kernel dropped (`offcpu_lost`).
    pub lost: u64,
    /// The kernel's own count of them, read back at stop
    /// (`offcpu_kernel_lost`; its view of `lost`, not added to it).
    pub kernel_lost: u64,
    /// Waits written without their stack (`offcpu_no_stack`).
    pub no_stack: u64,
    /// Waits that could not be measured (`offcpu_unpaired`).
    pub unpaired: u64,
    /// What profkit dropped (`offcpu_dropped`).
    pub dropped: u64,
}

impl OffCpuCounts {
    /// Whether every count is 0.
    pub fn is_zero(&self) -> bool {
        *self == OffCpuCounts::default()
    }

    /// Adds one accounting entry's off-CPU counts.
    pub fn add(&mut self, a: &CpuAccounting) {
        let add = |to: &mut u64, n: u64| *to = to.saturating_add(n);
        add(&mut self.switches, a.offcpu_switches);
        add(&mut self.intervals, a.offcpu_intervals);
        add(&mut self.lost, a.offcpu_lost);
        add(&mut self.kernel_lost, a.offcpu_kernel_lost);
        add(&mut self.no_stack, a.offcpu_no_stack);
        add(&mut self.unpaired, a.offcpu_unpaired);
        add(&mut self.dropped, a.offcpu_dropped);
    }

    /// The sum over `accounting`.
    pub fn of<'a>(accounting: impl IntoIterator<Item = &'a CpuAccounting>) -> Self {
        let mut c = OffCpuCounts::default();
        for a in accounting {
            c.add(a);
        }
        c
    }
}

/// What the session file ends with, written at stop.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct SessionFooter {
    /// Wall-clock end time, ns since the Unix epoch.
    pub end_time_unix_ns: u64,
    /// End time on perf's clock.
    pub end_monotonic_ns: u64,
    /// Sync rounds run.
    pub rounds: u64,
    /// Per-CPU accounting.
    pub accounting: Vec<CpuAccounting>,
}

// ---------------------------------------------------------------- bytes

const ACCOUNTING_FIELDS: usize = 15;

/// The full footer bytes: magic, body length, body, CRC.
pub(crate) fn encode_footer(f: &SessionFooter) -> Result<Vec<u8>> {
    let mut body = Vec::new();
    push_uvar(&mut body, f.end_time_unix_ns);
    push_uvar(&mut body, f.end_monotonic_ns);
    push_uvar(&mut body, f.rounds);
    push_uvar(&mut body, f.accounting.len() as u64);
    for a in &f.accounting {
        push_struct(&mut body, |b| {
            let fields: [u64; ACCOUNTING_FIELDS] = [
                u64::from(a.cpu),
                a.samples_received,
                a.samples_written,
                a.lost_ring,
                a.lost_overflow,
                a.lost_disk_full,
                a.lost_no_mapping,
                a.lost_no_task,
                a.lost_reconcile,
                a.records_skipped,
                a.throttle_events,
                a.kernel_lost,
                a.stacks_unknown,
                a.stacks_truncated,
                a.user_stacks_cut,
            ];
            for v in fields {
                push_uvar(b, v);
            }
            // Appended in version 5, and only when one is not 0, so a
            // session without off-CPU keeps its bytes.
            let offcpu = [
                a.offcpu_switches,
                a.offcpu_intervals,
                a.offcpu_lost,
                a.offcpu_no_stack,
                a.offcpu_unpaired,
                a.offcpu_dropped,
                a.offcpu_kernel_lost,
            ];
            if offcpu.iter().any(|&v| v != 0) {
                for v in offcpu {
                    push_uvar(b, v);
                }
            }
        });
    }
    if body.len() > MAX_BODY_LEN as usize {
        return Err(Error::BodyTooLarge {
            what: "footer",
            len: body.len() as u64,
            max: MAX_BODY_LEN.into(),
        });
    }
    let mut out = Vec::with_capacity(8 + body.len() + 4);
    out.extend_from_slice(&FOOTER_MAGIC);
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&body);
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    Ok(out)
}

/// A field appended after version 1: 0 when the body ends before it.
fn appended_uvar(r: &mut BodyReader<'_>, field: &str) -> Result<u64> {
    if r.remaining() == 0 {
        Ok(0)
    } else {
        r.uvar(field)
    }
}

pub(crate) fn parse_footer_body(body: &[u8], base: u64) -> Result<SessionFooter> {
    let mut r = BodyReader::new(body, base, "footer");
    let end_time_unix_ns = r.uvar("end_time_unix_ns")?;
    let end_monotonic_ns = r.uvar("end_monotonic_ns")?;
    let rounds = r.uvar("rounds")?;
    let at = r.offset();
    let n = r.count("accounting", 1)?;
    if n > crate::MAX_HEADER_CPUS {
        return Err(crate::Error::malformed(
            "footer",
            at,
            format!(
                "accounting for {n} CPUs, more than Linux can have ({})",
                crate::MAX_HEADER_CPUS
            ),
        ));
    }
    let mut accounting = Vec::with_capacity(n);
    for _ in 0..n {
        let mut a = r.struct_body("accounting")?;
        accounting.push(CpuAccounting {
            cpu: a.u32var("cpu")?,
            samples_received: a.uvar("samples_received")?,
            samples_written: a.uvar("samples_written")?,
            lost_ring: a.uvar("lost_ring")?,
            lost_overflow: a.uvar("lost_overflow")?,
            lost_disk_full: a.uvar("lost_disk_full")?,
            lost_no_mapping: a.uvar("lost_no_mapping")?,
            lost_no_task: a.uvar("lost_no_task")?,
            lost_reconcile: a.uvar("lost_reconcile")?,
            records_skipped: a.uvar("records_skipped")?,
            throttle_events: a.uvar("throttle_events")?,
            kernel_lost: a.uvar("kernel_lost")?,
            // Fields appended after version 1: absent in older footers.
            stacks_unknown: appended_uvar(&mut a, "stacks_unknown")?,
            stacks_truncated: appended_uvar(&mut a, "stacks_truncated")?,
            user_stacks_cut: appended_uvar(&mut a, "user_stacks_cut")?,
            offcpu_switches: appended_uvar(&mut a, "offcpu_switches")?,
            offcpu_intervals: appended_uvar(&mut a, "offcpu_intervals")?,
            offcpu_lost: appended_uvar(&mut a, "offcpu_lost")?,
            offcpu_no_stack: appended_uvar(&mut a, "offcpu_no_stack")?,
            offcpu_unpaired: appended_uvar(&mut a, "offcpu_unpaired")?,
            offcpu_dropped: appended_uvar(&mut a, "offcpu_dropped")?,
            offcpu_kernel_lost: appended_uvar(&mut a, "offcpu_kernel_lost")?,
        });
    }
    Ok(SessionFooter {
        end_time_unix_ns,
        end_monotonic_ns,
        rounds,
        accounting,
    })
}
