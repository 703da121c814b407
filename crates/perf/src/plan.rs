//! How large each CPU's ring is: [`ring_plan`], from the number of CPUs,
//! the sampling rate, what a sample carries ([`RingMode`]) and how much
//! memory may be locked ([`LockLimit`]).
//!
//! A ring is locked memory on every CPU, so what holds on 2 CPUs does not
//! on 256: a `--call-graph dwarf` ring that holds two sync intervals of
//! 8 KiB stacks at 4 kHz is 16 MiB, 4 GiB on 256 CPUs. The plan:
//!
//! 1. The ring wanted: two sync intervals of samples at the rate (the
//!    watermark, at half the ring, then wakes the daemon about when the
//!    timer would), at least [`crate::DEFAULT_DATA_PAGES`], at most
//!    [`MAX_RING_BYTES`], a power of two of pages.
//! 2. The ring allowed: the limit shared by the CPUs, each ring's control
//!    page counted (the kernel counts it), rounded down to a power of two.
//! 3. The smaller of the two. If it holds less than two sync intervals,
//!    the daemon drains when the watermark says (half the ring: every
//!    [`RingPlan::drain_every_ms`]), more often than the timer; if that is
//!    more often than every [`MIN_DRAIN_MS`], the plan is refused with
//!    what to raise ([`Error::LockedMemory`]).
//!
//! The sizes of samples are estimates ([`RingMode::record_bytes`]): exact
//! for flat samples, 64 frames for frame-pointer call chains, the stack
//! copy plus [`DWARF_SAMPLE_OVERHEAD`] for DWARF.

use crate::error::{Error, Result};
use std::fmt;
use std::path::Path;

/// What each sample carries, for its size in the ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RingMode {
    /// No call graph: ip, pid/tid, time, cpu, period.
    Flat,
    /// Frame-pointer call chains (`-g`).
    FramePointers,
    /// DWARF call graphs: the user registers and `stack_bytes` of user
    /// stack per sample, and the kernel's callchain.
    Dwarf {
        /// Bytes of user stack copied per sample.
        stack_bytes: u32,
    },
}

/// A flat sample record: header, ip, pid/tid, time, cpu, period.
pub const FLAT_SAMPLE_BYTES: u64 = 48;

/// Frames a frame-pointer call chain is sized for: deep C++ or Rust stacks
/// reach 40 to 60 frames; the kernel stops at `perf_event_max_stack`
/// (127 by default), which few stacks reach.
pub const FP_FRAMES: u64 = 64;

/// What a DWARF sample carries besides its stack copy (header, ids, time,
/// registers, sizes, the kernel's callchain), rounded up.
pub const DWARF_SAMPLE_OVERHEAD: u64 = 160;

/// The largest ring [`ring_plan`] picks per CPU.
pub const MAX_RING_BYTES: u64 = 64 << 20;

/// The total locked memory profkit plans for when the kernel sets no
/// limit (root, `CAP_IPC_LOCK`, or `perf_event_paranoid` -1): 512 MiB,
/// control pages included. A 2-CPU machine never reaches it; 256 CPUs
/// with DWARF call graphs would want 4 GiB.
pub const ROOT_LOCK_BUDGET: u64 = 512 << 20;

/// The kernel's default `perf_event_mlock_kb`, assumed when it cannot be
/// read: 512 KiB of data and the control page.
pub const DEFAULT_MLOCK_KB: u64 = 516;

/// The most often a plan has the daemon drain (ms between rounds): the
/// daemon blocks wake-ups for 10 ms after a woken round
/// (`min_wake_interval`), and a ring drained every 25 ms still has 25 ms
/// of room left when its watermark wakes the daemon.
pub const MIN_DRAIN_MS: u64 = 25;

impl RingMode {
    /// The mode of a record layout: DWARF when it copies user stacks,
    /// frame pointers when it has a callchain alone, else flat.
    pub fn of(layout: crate::Layout) -> Self {
        if layout.user_stack > 0 {
            RingMode::Dwarf {
                stack_bytes: layout.user_stack,
            }
        } else if layout.callchain {
            RingMode::FramePointers
        } else {
            RingMode::Flat
        }
    }

    /// Bytes one sample takes in the ring (an estimate with call graphs,
    /// see the module docs).
    pub fn record_bytes(self) -> u64 {
        match self {
            RingMode::Flat => FLAT_SAMPLE_BYTES,
            // nr, then the frames (with the context markers among them).
            RingMode::FramePointers => FLAT_SAMPLE_BYTES + 8 + 8 * FP_FRAMES,
            RingMode::Dwarf { stack_bytes } => u64::from(stack_bytes) + DWARF_SAMPLE_OVERHEAD,
        }
    }
}

/// `flat`, `fp`, `dwarf,8192`.
impl fmt::Display for RingMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RingMode::Flat => f.write_str("flat"),
            RingMode::FramePointers => f.write_str("fp"),
            RingMode::Dwarf { stack_bytes } => write!(f, "dwarf,{stack_bytes}"),
        }
    }
}

/// How much memory the rings may lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockLimit {
    /// A user the kernel limits: `kernel.perf_event_mlock_kb` KiB per
    /// online CPU (the kernel lets a user lock that many times the online
    /// CPUs, control pages included, summed over the user's rings;
    /// `RLIMIT_MEMLOCK` on top of it is not counted on).
    Mlock {
        /// `kernel.perf_event_mlock_kb`.
        kb_per_cpu: u64,
        /// CPUs online (the kernel's multiplier).
        online_cpus: u32,
    },
    /// A user the kernel does not limit: profkit's own budget, total
    /// bytes ([`ROOT_LOCK_BUDGET`] by default).
    Budget {
        /// Bytes, control pages included.
        bytes: u64,
    },
}

impl LockLimit {
    /// The limit of this process under the `/proc` at `proc_root`: a
    /// budget of [`ROOT_LOCK_BUDGET`] for a user the kernel does not limit
    /// (effective uid 0, `CAP_IPC_LOCK` in effect, or
    /// `kernel.perf_event_paranoid` -1), else `perf_event_mlock_kb`
    /// ([`DEFAULT_MLOCK_KB`] if it cannot be read) times `online_cpus`.
    pub fn of_process_in(proc_root: &Path, online_cpus: u32) -> Self {
        let status = std::fs::read_to_string(proc_root.join("self/status")).unwrap_or_default();
        let sysctl = |name: &str| {
            std::fs::read_to_string(proc_root.join("sys/kernel").join(name))
                .ok()
                .and_then(|s| s.trim().parse::<i64>().ok())
        };
        let field = |name: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(name))
                .map(str::split_whitespace)
        };
        // Uid: real, effective, saved, filesystem.
        let root = field("Uid:")
            .and_then(|mut w| w.nth(1))
            .is_some_and(|u| u == "0");
        // CAP_IPC_LOCK is capability 14.
        let ipc_lock = field("CapEff:")
            .and_then(|mut w| w.next())
            .and_then(|h| u64::from_str_radix(h, 16).ok())
            .is_some_and(|caps| caps & (1 << 14) != 0);
        let unlimited = sysctl("perf_event_paranoid") == Some(-1);
        if root || ipc_lock || unlimited {
            return LockLimit::Budget {
                bytes: ROOT_LOCK_BUDGET,
            };
        }
        LockLimit::Mlock {
            kb_per_cpu: sysctl("perf_event_mlock_kb")
                .and_then(|kb| u64::try_from(kb).ok())
                .unwrap_or(DEFAULT_MLOCK_KB),
            online_cpus,
        }
    }

    /// The limit of this process (see [`LockLimit::of_process_in`]).
    pub fn of_process(online_cpus: u32) -> Self {
        Self::of_process_in(Path::new("/proc"), online_cpus)
    }

    /// Bytes that may be locked in all.
    pub fn total_bytes(&self) -> u64 {
        match *self {
            LockLimit::Mlock {
                kb_per_cpu,
                online_cpus,
            } => kb_per_cpu
                .saturating_mul(1024)
                .saturating_mul(u64::from(online_cpus)),
            LockLimit::Budget { bytes } => bytes,
        }
    }
}

/// `kernel.perf_event_mlock_kb = 516 KiB per CPU`, `a budget of 512 MiB`.
impl fmt::Display for LockLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            LockLimit::Mlock { kb_per_cpu, .. } => {
                write!(f, "kernel.perf_event_mlock_kb = {kb_per_cpu} KiB per CPU")
            }
            LockLimit::Budget { bytes } => write!(
                f,
                "profkit's budget of {} for a user the kernel does not limit",
                size_text(bytes)
            ),
        }
    }
}

/// What [`ring_plan`] is asked for besides the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingNeed {
    /// CPUs a ring is opened on.
    pub cpus: u32,
    /// Samples per second per CPU.
    pub rate_hz: u64,
    /// What a sample carries.
    pub mode: RingMode,
    /// Milliseconds between the daemon's timed rounds.
    pub sync_interval_ms: u64,
    /// The page size rings are counted in.
    pub page_size: usize,
}

impl RingNeed {
    /// `cpus` at `rate_hz` in `mode`, with the daemon's 250 ms sync
    /// interval and this machine's page size.
    pub fn new(cpus: u32, rate_hz: u64, mode: RingMode) -> Self {
        RingNeed {
            cpus,
            rate_hz,
            mode,
            sync_interval_ms: 250,
            page_size: crate::page_size(),
        }
    }

    /// Ring bytes one CPU's samples fill per second.
    pub fn bytes_per_second(&self) -> u64 {
        self.rate_hz.saturating_mul(self.mode.record_bytes())
    }

    /// Bytes of samples over `ms` milliseconds.
    fn bytes_over(&self, ms: u64) -> u128 {
        u128::from(self.bytes_per_second()) * u128::from(ms) / 1000
    }
}

/// Why the rings are the size they are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RingReason {
    /// Two sync intervals of samples (at least the default ring), within
    /// the limit.
    TwoIntervals,
    /// Smaller than wanted, for the limit or the per-ring cap; still two
    /// sync intervals of samples.
    Limited,
    /// Less than two sync intervals of samples: the daemon drains when
    /// the watermark (half the ring) wakes it.
    Watermark,
}

/// The rings [`ring_plan`] chose. Its `Display` is the line said at start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RingPlan {
    /// What was asked.
    pub need: RingNeed,
    /// The limit planned within.
    pub limit: LockLimit,
    /// Data pages per CPU (a power of two).
    pub pages: usize,
    /// The data pages wanted per CPU (step 1 of the module docs, before
    /// the cap).
    pub wanted_pages: u64,
    /// The ring is [`MAX_RING_BYTES`], smaller than wanted and than the
    /// limit allows.
    pub capped: bool,
    /// Why this size.
    pub reason: RingReason,
}

impl RingPlan {
    /// Data bytes of one ring.
    pub fn ring_bytes(&self) -> u64 {
        self.pages as u64 * self.need.page_size as u64
    }

    /// Locked bytes of all rings, control pages included.
    pub fn locked_bytes(&self) -> u64 {
        (self.pages as u64 + 1) * self.need.page_size as u64 * u64::from(self.need.cpus)
    }

    /// Milliseconds one ring takes to fill at the rate.
    pub fn fill_ms(&self) -> f64 {
        match self.need.bytes_per_second() {
            0 => f64::INFINITY,
            b => self.ring_bytes() as f64 * 1000.0 / b as f64,
        }
    }

    /// Milliseconds between rounds: the sync interval, or sooner when the
    /// watermark (half the ring) is reached first.
    pub fn drain_every_ms(&self) -> f64 {
        (self.fill_ms() / 2.0).min(self.need.sync_interval_ms as f64)
    }

    /// The longest a round may take before a ring drained last in it
    /// overflows: the ring's fill time less the time between rounds.
    pub fn loss_after_round_ms(&self) -> f64 {
        self.fill_ms() - self.drain_every_ms()
    }
}

/// `rings of 512 KiB × 256 CPUs = 129 MiB locked, because ...`.
impl fmt::Display for RingPlan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = &self.need;
        write!(
            f,
            "rings of {} × {} CPUs = {} locked, because {} samples ({} bytes each) at {} Hz \
             fill a {} ring in {}",
            size_text(self.ring_bytes()),
            n.cpus,
            size_text(self.locked_bytes()),
            n.mode,
            n.mode.record_bytes(),
            n.rate_hz,
            size_text(self.ring_bytes()),
            ms_text(self.fill_ms()),
        )?;
        let wanted = self.wanted_pages.saturating_mul(n.page_size as u64);
        match self.reason {
            RingReason::TwoIntervals => write!(
                f,
                ", two {} ms sync intervals or more, within {}",
                n.sync_interval_ms, self.limit
            ),
            RingReason::Limited => write!(
                f,
                ", two {} ms sync intervals or more ({} wanted; {} allows this)",
                n.sync_interval_ms,
                size_text(wanted),
                self.limit_or_cap()
            ),
            RingReason::Watermark => write!(
                f,
                ", less than two {} ms sync intervals ({} wanted; {} allows this): drained \
                 when half full, every {}",
                n.sync_interval_ms,
                size_text(wanted),
                self.limit_or_cap(),
                ms_text(self.drain_every_ms())
            ),
        }
    }
}

impl RingPlan {
    fn limit_or_cap(&self) -> String {
        if self.capped {
            format!("the {} cap per ring", size_text(MAX_RING_BYTES))
        } else {
            self.limit.to_string()
        }
    }
}

/// The largest power of two at most `n` (0 for 0).
fn floor_pow2(n: u64) -> u64 {
    match n {
        0 => 0,
        n => 1 << (63 - n.leading_zeros()),
    }
}

/// The rings for `need` within `limit` (see the module docs). Refused
/// ([`Error::LockedMemory`], saying what to raise or lower) when the rings
/// the limit allows would have the daemon drain more often than every
/// [`MIN_DRAIN_MS`], or hold less than two samples.
pub fn ring_plan(need: RingNeed, limit: LockLimit) -> Result<RingPlan> {
    let page = need.page_size.max(1) as u64;
    let cpus = u64::from(need.cpus.max(1));
    let max_pages = floor_pow2((MAX_RING_BYTES / page).clamp(1, 1 << 16));
    let two = need.bytes_over(2 * need.sync_interval_ms);
    let two_pages = two.div_ceil(u128::from(page)).max(1);
    // Past 2^40 pages nothing is planned anyway.
    let wanted = (two_pages.min(1 << 40) as u64)
        .next_power_of_two()
        .max(crate::DEFAULT_DATA_PAGES as u64);
    // Each ring locks its pages and its control page.
    let allowed = floor_pow2((limit.total_bytes() / cpus / page).saturating_sub(1));
    let pages = wanted.min(max_pages).min(allowed);
    let plan = RingPlan {
        need,
        limit,
        pages: pages as usize,
        wanted_pages: wanted,
        capped: pages == max_pages && pages < wanted.min(allowed),
        reason: if u128::from(pages) >= two_pages {
            if pages == wanted {
                RingReason::TwoIntervals
            } else {
                RingReason::Limited
            }
        } else {
            RingReason::Watermark
        },
    };
    let record = need.mode.record_bytes();
    if pages == 0 || plan.ring_bytes() < 2 * record || plan.drain_every_ms() < MIN_DRAIN_MS as f64 {
        return Err(refusal(&plan, allowed));
    }
    Ok(plan)
}

/// What to raise or lower when the limit's rings would drain too often.
fn refusal(plan: &RingPlan, allowed: u64) -> Error {
    let n = &plan.need;
    let page = n.page_size.max(1) as u64;
    // The ring that drains every MIN_DRAIN_MS at the rate: it fills in
    // twice that.
    let ring = n
        .bytes_over(2 * MIN_DRAIN_MS)
        .max(2 * u128::from(n.mode.record_bytes()))
        .div_ceil(u128::from(page))
        .max(1);
    let ring_pages = (ring.min(1 << 16) as u64).next_power_of_two();
    let ring_bytes = ring_pages * page;
    let total = (ring_pages + 1) * page * u64::from(n.cpus);
    let raise = match plan.limit {
        LockLimit::Mlock { online_cpus, .. } => {
            // The kernel's allowance is per online CPU, for all rings.
            let kb = total.div_ceil(1024).div_ceil(u64::from(online_cpus.max(1)));
            format!(
                "raise kernel.perf_event_mlock_kb to {kb} for rings of {} ({} in all), or run as \
                 root",
                size_text(ring_bytes),
                size_text(total)
            )
        }
        LockLimit::Budget { .. } => format!(
            "give --buffer-pages {ring_pages} for rings of {} ({} in all, past the budget)",
            size_text(ring_bytes),
            size_text(total)
        ),
    };
    // The rate the allowed ring holds for MIN_DRAIN_MS drains.
    let allowed_bytes = allowed * page;
    let record = u128::from(n.mode.record_bytes());
    let rate = if u128::from(allowed_bytes) < 2 * record {
        0
    } else {
        (u128::from(allowed_bytes) * 1000 / (2 * u128::from(MIN_DRAIN_MS) * record)) as u64
    };
    let lower = match (rate, n.mode) {
        (0, RingMode::Dwarf { .. }) => "copy less stack with --call-graph dwarf,SIZE".to_owned(),
        (0, _) => "record on fewer CPUs (-C)".to_owned(),
        (r, RingMode::Dwarf { .. }) => {
            format!("lower -F to {r}, copy less with --call-graph dwarf,SIZE, or use -C")
        }
        (r, _) => format!("lower -F to {r} or record on fewer CPUs (-C)"),
    };
    Error::LockedMemory {
        message: format!(
            "{} samples ({} bytes each) at {} Hz on {} CPUs: {} allows rings of {} per CPU, \
             which fill in {} and would be drained every {} (at least {MIN_DRAIN_MS} ms between \
             rounds is needed); {raise}; or {lower}",
            n.mode,
            n.mode.record_bytes(),
            n.rate_hz,
            n.cpus,
            plan.limit,
            size_text(allowed_bytes),
            ms_text(plan.fill_ms()),
            ms_text(plan.drain_every_ms()),
        ),
        cpus: n.cpus,
        allowed_bytes,
        needed_bytes: ring_bytes,
    }
}

/// `16 MiB`, `516 KiB`, `1.5 GiB`, `256.2 MiB`.
pub(crate) fn size_text(bytes: u64) -> String {
    const MIB: u64 = 1 << 20;
    const GIB: u64 = 1 << 30;
    if bytes >= GIB {
        if bytes % (GIB / 4) == 0 {
            format!("{} GiB", bytes as f64 / GIB as f64)
        } else {
            format!("{:.1} GiB", bytes as f64 / GIB as f64)
        }
    } else if bytes >= MIB && bytes % MIB == 0 {
        format!("{} MiB", bytes / MIB)
    } else if bytes >= 10 * MIB {
        format!("{:.1} MiB", bytes as f64 / MIB as f64)
    } else {
        format!("{} KiB", bytes.div_ceil(1024))
    }
}

/// `2.7 s`, `62.8 ms`.
fn ms_text(ms: f64) -> String {
    if !ms.is_finite() {
        "never".to_owned()
    } else if ms >= 1000.0 {
        format!("{:.1} s", ms / 1000.0)
    } else {
        format!("{ms:.1} ms")
    }
}

#[cfg(test)]
mod tests;
