//! Errors of the perf layer, each carrying the cause and what to do about it.

use std::io;

/// Everything that can go wrong while configuring, opening or reading events.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The configuration itself is wrong (checked before any syscall).
    #[error("invalid sampling configuration: {0}")]
    Config(String),
    /// `perf_event_open` failed; `message` explains the cause and the fix.
    #[error("{message}")]
    Open {
        /// CPU the event was opened on (`None` for a per-task event on any CPU).
        cpu: Option<u32>,
        /// The errno the kernel returned.
        source: io::Error,
        /// The human explanation: cause and fix.
        message: String,
    },
    /// Mapping the ring buffer failed.
    #[error("{message}")]
    Mmap {
        /// CPU whose ring could not be mapped.
        cpu: u32,
        /// The errno of the failed mmap.
        source: io::Error,
        /// The human explanation: cause and fix.
        message: String,
    },
    /// The rings the locked-memory limit allows would fill faster than the
    /// daemon can drain them ([`crate::ring_plan`]); `message` says what to
    /// raise or lower.
    #[error("{message}")]
    LockedMemory {
        /// CPUs the rings were planned for.
        cpus: u32,
        /// Ring bytes per CPU the limit allows.
        allowed_bytes: u64,
        /// Ring bytes per CPU that would drain no more often than
        /// [`crate::MIN_DRAIN_MS`].
        needed_bytes: u64,
        /// Cause and fix.
        message: String,
    },
    /// An ioctl or read on an event fd failed.
    #[error("{op} on the event for cpu {cpu} failed: {source}")]
    Io {
        /// What was being done (`"enable"`, `"read lost count"`, ...).
        op: &'static str,
        /// CPU of the event.
        cpu: u32,
        /// The underlying error.
        source: io::Error,
    },
}

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What the caller was doing when `perf_event_open` failed: enough to explain
/// the errno in terms the user can act on.
#[derive(Debug, Clone)]
pub struct OpenContext<'a> {
    /// Event name as the user wrote it (`cpu-clock`, `cycles`, `r1234`).
    pub event: &'a str,
    /// True when sampling every process (pid = -1).
    pub system_wide: bool,
    /// True when kernel samples were requested (exclude_kernel = 0).
    pub kernel: bool,
    /// Requested frequency, if frequency mode.
    pub frequency: Option<u64>,
    /// The pid being opened, if any.
    pub pid: Option<i32>,
    /// Current `kernel.perf_event_paranoid`, if it could be read.
    pub paranoid: Option<i32>,
    /// Current `kernel.perf_event_max_sample_rate`, if it could be read.
    pub max_sample_rate: Option<u64>,
}

/// Reads an integer sysctl such as `/proc/sys/kernel/perf_event_paranoid`.
pub fn read_sysctl(name: &str) -> Option<i64> {
    let path = format!("/proc/sys/{}", name.replace('.', "/"));
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

impl OpenContext<'_> {
    /// Fills the sysctl fields from `/proc/sys`.
    pub fn with_sysctls(mut self) -> Self {
        self.paranoid = read_sysctl("kernel.perf_event_paranoid").map(|v| v as i32);
        self.max_sample_rate = read_sysctl("kernel.perf_event_max_sample_rate").map(|v| v as u64);
        self
    }
}

fn paranoid_text(p: Option<i32>) -> String {
    match p {
        Some(p) => format!("kernel.perf_event_paranoid is {p}"),
        None => "kernel.perf_event_paranoid could not be read".to_string(),
    }
}

/// Turns a `perf_event_open` errno into a message naming the cause and the fix.
///
/// This is the seam the tests use to check each message without needing the
/// kernel to fail in that way.
pub fn explain_open_error(errno: i32, ctx: &OpenContext<'_>) -> String {
    let ev = ctx.event;
    match errno {
        libc::EACCES | libc::EPERM => {
            let need = if ctx.system_wide {
                "system-wide sampling needs perf_event_paranoid <= 0 (or CAP_PERFMON / root)"
            } else if ctx.kernel {
                "kernel samples of a process need perf_event_paranoid <= 1 (or CAP_PERFMON); \
                 user-space-only sampling (--user-only) works up to level 2"
            } else {
                "sampling your own processes needs perf_event_paranoid <= 2"
            };
            format!(
                "no permission to open event '{ev}': {}; {need}. Fix: run as root, grant \
                 CAP_PERFMON (setcap cap_perfmon+ep), or lower the level with \
                 `sysctl kernel.perf_event_paranoid=-1`",
                paranoid_text(ctx.paranoid)
            )
        }
        libc::ENOENT | libc::EOPNOTSUPP => format!(
            "event '{ev}' is not supported on this machine (no such PMU or counter here; \
             virtual machines usually have no hardware PMU): use a software event such as \
             `-e cpu-clock`"
        ),
        libc::ENODEV => {
            format!("event '{ev}' is not available on this CPU (ENODEV): use `-e cpu-clock`")
        }
        libc::EINVAL => {
            if let (Some(f), Some(max)) = (ctx.frequency, ctx.max_sample_rate) {
                if f > max {
                    return format!(
                        "frequency {f} Hz is above the kernel's maximum sample rate {max} Hz \
                         (kernel.perf_event_max_sample_rate): use -F {max} or lower, or raise \
                         the sysctl"
                    );
                }
            }
            format!(
                "the kernel rejected the settings for event '{ev}' (EINVAL){}: check the event \
                 name, frequency/period and exclusion flags",
                ctx.max_sample_rate
                    .map(|m| format!("; the maximum sample rate here is {m} Hz"))
                    .unwrap_or_default()
            )
        }
        libc::EMFILE | libc::ENFILE => "too many open files: profkit needs one descriptor per CPU \
             and per process sampled; raise the limit with `ulimit -n 65536`"
            .to_string(),
        libc::ESRCH => match ctx.pid {
            Some(pid) => format!("no such process: pid {pid} does not exist (or has exited)"),
            None => "no such process (ESRCH)".to_string(),
        },
        libc::EBUSY => format!(
            "event '{ev}' is busy: another tool holds the counter exclusively; stop it and retry"
        ),
        _ => format!(
            "perf_event_open for event '{ev}' failed: {}",
            std::io::Error::from_raw_os_error(errno)
        ),
    }
}

/// Turns an mmap errno on a perf fd into a message naming the cause and the fix.
pub fn explain_mmap_error(errno: i32, cpu: u32, pages: usize) -> String {
    let kib = pages * page_size() / 1024;
    match errno {
        libc::EPERM | libc::ENOMEM => {
            let limit = read_sysctl("kernel.perf_event_mlock_kb")
                .map(|v| format!("{v} KiB"))
                .unwrap_or_else(|| "unknown".into());
            format!(
                "could not map the {pages}-page ({kib} KiB) ring for cpu {cpu}: it exceeds the \
                 locked-memory allowance (kernel.perf_event_mlock_kb = {limit} per CPU, plus \
                 RLIMIT_MEMLOCK); use a smaller --buffer-pages, or raise \
                 `sysctl kernel.perf_event_mlock_kb` / `ulimit -l`"
            )
        }
        _ => format!(
            "could not map the {pages}-page ring for cpu {cpu}: {}",
            std::io::Error::from_raw_os_error(errno)
        ),
    }
}

/// The system page size.
pub fn page_size() -> usize {
    // SAFETY:
    // - sysconf takes no pointers and has no preconditions.
    let v = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if v > 0 {
        v as usize
    } else {
        4096
    }
}

/// Current `CLOCK_MONOTONIC` time in ns: the clock profkit's events are
/// opened with (`use_clockid`), so round times compare with sample times.
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY:
    // - `ts` is a valid, writable timespec on our stack for the call.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    if r != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> OpenContext<'static> {
        OpenContext {
            event: "cpu-clock",
            system_wide: true,
            kernel: true,
            frequency: Some(4000),
            pid: None,
            paranoid: Some(2),
            max_sample_rate: Some(100000),
        }
    }

    #[test]
    fn eacces_names_paranoid_level_and_fix() {
        let m = explain_open_error(libc::EACCES, &ctx());
        assert!(m.contains("perf_event_paranoid is 2"), "{m}");
        assert!(m.contains("sysctl kernel.perf_event_paranoid"), "{m}");
        assert!(m.contains("system-wide"), "{m}");
    }

    #[test]
    fn enoent_suggests_cpu_clock() {
        let mut c = ctx();
        c.event = "cycles";
        let m = explain_open_error(libc::ENOENT, &c);
        assert!(m.contains("'cycles'") && m.contains("-e cpu-clock"), "{m}");
    }

    #[test]
    fn einval_shows_max_rate() {
        let mut c = ctx();
        c.frequency = Some(200000);
        let m = explain_open_error(libc::EINVAL, &c);
        assert!(m.contains("100000") && m.contains("200000"), "{m}");
    }

    #[test]
    fn esrch_and_emfile() {
        let mut c = ctx();
        c.pid = Some(999999);
        assert!(explain_open_error(libc::ESRCH, &c).contains("999999"));
        assert!(explain_open_error(libc::EMFILE, &c).contains("ulimit -n"));
    }

    #[test]
    fn mmap_eperm_names_mlock_sysctl() {
        let m = explain_mmap_error(libc::EPERM, 1, 1024);
        assert!(
            m.contains("perf_event_mlock_kb") && m.contains("--buffer-pages"),
            "{m}"
        );
    }
}
