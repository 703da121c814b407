//! Validated sampling configuration: which event, how often, on what.

use crate::error::{read_sysctl, Error, Result};
use perf_event_open_sys::bindings as b;
use std::path::Path;

/// A parsed event name: the `type`/`config` pair of `perf_event_attr`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventSpec {
    /// The name as the user wrote it (kept for messages and the session header).
    pub name: String,
    /// `perf_event_attr.type`.
    pub type_: u32,
    /// `perf_event_attr.config`.
    pub config: u64,
}

/// Event names this build knows, with their type and config. Users may also
/// write `rNNNN` (raw PMU config, hex) or `TYPE:CONFIG` (both decimal or 0x hex).
pub const KNOWN_EVENTS: &[(&str, u32, u64)] = &[
    (
        "cpu-clock",
        b::PERF_TYPE_SOFTWARE,
        b::PERF_COUNT_SW_CPU_CLOCK as u64,
    ),
    (
        "task-clock",
        b::PERF_TYPE_SOFTWARE,
        b::PERF_COUNT_SW_TASK_CLOCK as u64,
    ),
    (
        "page-faults",
        b::PERF_TYPE_SOFTWARE,
        b::PERF_COUNT_SW_PAGE_FAULTS as u64,
    ),
    (
        "context-switches",
        b::PERF_TYPE_SOFTWARE,
        b::PERF_COUNT_SW_CONTEXT_SWITCHES as u64,
    ),
    (
        "cpu-migrations",
        b::PERF_TYPE_SOFTWARE,
        b::PERF_COUNT_SW_CPU_MIGRATIONS as u64,
    ),
    (
        "cycles",
        b::PERF_TYPE_HARDWARE,
        b::PERF_COUNT_HW_CPU_CYCLES as u64,
    ),
    (
        "cpu-cycles",
        b::PERF_TYPE_HARDWARE,
        b::PERF_COUNT_HW_CPU_CYCLES as u64,
    ),
    (
        "instructions",
        b::PERF_TYPE_HARDWARE,
        b::PERF_COUNT_HW_INSTRUCTIONS as u64,
    ),
    (
        "cache-references",
        b::PERF_TYPE_HARDWARE,
        b::PERF_COUNT_HW_CACHE_REFERENCES as u64,
    ),
    (
        "cache-misses",
        b::PERF_TYPE_HARDWARE,
        b::PERF_COUNT_HW_CACHE_MISSES as u64,
    ),
    (
        "branches",
        b::PERF_TYPE_HARDWARE,
        b::PERF_COUNT_HW_BRANCH_INSTRUCTIONS as u64,
    ),
    (
        "branch-instructions",
        b::PERF_TYPE_HARDWARE,
        b::PERF_COUNT_HW_BRANCH_INSTRUCTIONS as u64,
    ),
    (
        "branch-misses",
        b::PERF_TYPE_HARDWARE,
        b::PERF_COUNT_HW_BRANCH_MISSES as u64,
    ),
    (
        "bus-cycles",
        b::PERF_TYPE_HARDWARE,
        b::PERF_COUNT_HW_BUS_CYCLES as u64,
    ),
    (
        "ref-cycles",
        b::PERF_TYPE_HARDWARE,
        b::PERF_COUNT_HW_REF_CPU_CYCLES as u64,
    ),
];

fn parse_num(s: &str) -> Option<u64> {
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u64::from_str_radix(h, 16).ok()
    } else {
        s.parse().ok()
    }
}

impl EventSpec {
    /// Parses an event name: a known name, `rHEX`, or `TYPE:CONFIG`.
    pub fn parse(name: &str) -> Result<Self> {
        let n = name.trim();
        if let Some(&(_, t, c)) = KNOWN_EVENTS.iter().find(|(k, _, _)| *k == n) {
            return Ok(Self {
                name: n.to_string(),
                type_: t,
                config: c,
            });
        }
        if let Some(hex) = n.strip_prefix('r') {
            if let Ok(c) = u64::from_str_radix(hex, 16) {
                return Ok(Self {
                    name: n.to_string(),
                    type_: b::PERF_TYPE_RAW,
                    config: c,
                });
            }
        }
        if let Some((t, c)) = n.split_once(':') {
            if let (Some(t), Some(c)) = (parse_num(t), parse_num(c)) {
                if let Ok(t) = u32::try_from(t) {
                    return Ok(Self {
                        name: n.to_string(),
                        type_: t,
                        config: c,
                    });
                }
            }
        }
        let names: Vec<&str> = KNOWN_EVENTS.iter().map(|e| e.0).collect();
        Err(Error::Config(format!(
            "unknown event '{n}': use one of {}, a raw event rHEX, or TYPE:CONFIG",
            names.join(", ")
        )))
    }

    /// True for kernel software events (always available, no PMU needed).
    pub fn is_software(&self) -> bool {
        self.type_ == b::PERF_TYPE_SOFTWARE
    }
}

/// How often to sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rate {
    /// Samples per second per CPU (`-F`); the kernel adjusts the period.
    Frequency(u64),
    /// One sample every N events (`-c`).
    Period(u64),
}

/// What to sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Every process on the selected CPUs (pid = -1).
    SystemWide,
    /// These processes and, through `inherit`, every task they create.
    Pids(Vec<i32>),
}

/// A validated configuration for [`crate::Sampler::open`].
#[derive(Debug, Clone)]
pub struct SamplerConfig {
    /// The event to sample on.
    pub event: EventSpec,
    /// Frequency or period.
    pub rate: Rate,
    /// System-wide or a set of processes.
    pub target: Target,
    /// CPUs to open on; `None` means every online CPU.
    pub cpus: Option<Vec<u32>>,
    /// Drop user-space samples.
    pub exclude_user: bool,
    /// Drop kernel samples.
    pub exclude_kernel: bool,
    /// Record callchains (frame-pointer based, `PERF_SAMPLE_CALLCHAIN`).
    pub callchain: bool,
    /// Data pages per ring (power of two).
    pub data_pages: usize,
    /// Start the events only when the target process calls exec (for `record`).
    pub enable_on_exec: bool,
    /// Bytes of user stack to copy with the user registers per sample, for
    /// DWARF unwinding (`Layout::user_stack`); 0 for none. A multiple of 8,
    /// at most [`MAX_USER_STACK`].
    pub user_stack: u32,
    /// How each sample's cgroup is recorded ([`crate::CgroupRecording::Sample`]
    /// adds `PERF_SAMPLE_CGROUP` to the layout).
    pub cgroups: crate::CgroupRecording,
    /// Only tasks of this cgroup v2 directory (`-G`, as
    /// [`crate::cgroup_dir`] resolved it): the per-CPU events are opened
    /// with `PERF_FLAG_PID_CGROUP` on it. Only with [`Target::SystemWide`].
    pub cgroup_filter: Option<std::path::PathBuf>,
    /// Off-CPU recording (`--off-cpu`): a second event per CPU, the
    /// software `context-switches` event with period 1 and this layout
    /// (the stack at every switch-out), with the switch records
    /// (`context_switch`), in a ring of its own
    /// ([`crate::Sampler::offcpu_rings_mut`]).
    pub off_cpu: bool,
    /// Data pages of each off-CPU ring (power of two): a switch storm
    /// writes some 250 bytes per switch.
    pub offcpu_pages: usize,
}

/// The largest user-stack copy per sample: the kernel keeps a sample under
/// 64 KiB (its size is a u16), so perf caps `--call-graph dwarf,SIZE` at
/// 65528 bytes.
pub const MAX_USER_STACK: u32 = 65528;

/// Default data pages per CPU ring: 128 pages = 512 KiB with 4 KiB pages.
///
/// A sample record without callchain is 48 bytes, so 250 ms at 10 kHz is
/// 120 KiB: the default ring holds four sync intervals, and the watermark
/// (half the ring) wakes the reader long before it fills. 128 pages also
/// fits the unprivileged `perf_event_mlock_kb` default of 516 KiB per CPU.
pub const DEFAULT_DATA_PAGES: usize = 128;

impl SamplerConfig {
    /// A configuration with profkit's defaults: cpu-clock at 4000 Hz,
    /// system-wide, every online CPU, user and kernel, no callchain.
    pub fn new(event: EventSpec) -> Self {
        Self {
            event,
            rate: Rate::Frequency(4000),
            target: Target::SystemWide,
            cpus: None,
            exclude_user: false,
            exclude_kernel: false,
            callchain: false,
            data_pages: DEFAULT_DATA_PAGES,
            enable_on_exec: false,
            user_stack: 0,
            cgroups: crate::CgroupRecording::Off,
            off_cpu: false,
            offcpu_pages: DEFAULT_DATA_PAGES * 4,
            cgroup_filter: None,
        }
    }

    /// The record layout events opened with this configuration write.
    pub fn layout(&self) -> crate::Layout {
        crate::Layout {
            callchain: self.callchain,
            user_stack: self.user_stack,
            cgroup: self.cgroups == crate::CgroupRecording::Sample,
        }
    }

    /// Checks everything that can be checked without opening an event
    /// (a `-C` list against this machine's CPUs).
    pub fn validate(&self) -> Result<()> {
        self.validate_in(Path::new("/"))
    }

    /// [`SamplerConfig::validate`] with the CPU lists read under
    /// `sysfs_root` (`/` for this machine): tests give a fake topology.
    pub fn validate_in(&self, sysfs_root: &Path) -> Result<()> {
        match self.rate {
            Rate::Frequency(0) => {
                return Err(Error::Config("frequency must be at least 1 Hz".into()))
            }
            Rate::Period(0) => return Err(Error::Config("period must be at least 1".into())),
            Rate::Frequency(f) => {
                if let Some(max) = read_sysctl("kernel.perf_event_max_sample_rate") {
                    if f > max as u64 {
                        return Err(Error::Config(format!(
                            "frequency {f} Hz is above the kernel's maximum sample rate {max} Hz \
                             (kernel.perf_event_max_sample_rate): use -F {max} or lower, or \
                             raise the sysctl"
                        )));
                    }
                }
            }
            // The kernel refuses periods with the top bit set (EINVAL).
            Rate::Period(p) if p > i64::MAX as u64 => {
                return Err(Error::Config(format!(
                    "period {p} is too large: at most {} events per sample",
                    i64::MAX
                )))
            }
            Rate::Period(_) => {}
        }
        if self.exclude_user && self.exclude_kernel {
            return Err(Error::Config(
                "--user-only and --kernel-only exclude each other".into(),
            ));
        }
        if self.user_stack % 8 != 0 || self.user_stack > MAX_USER_STACK {
            return Err(Error::Config(format!(
                "user stack size {} must be a multiple of 8 and at most {MAX_USER_STACK} bytes",
                self.user_stack
            )));
        }
        if self.off_cpu
            && (self.offcpu_pages == 0
                || !self.offcpu_pages.is_power_of_two()
                || self.offcpu_pages > 1 << 18)
        {
            return Err(Error::Config(format!(
                "off-CPU ring pages (--off-cpu-pages, by default 4 x --buffer-pages) must be a \
                 power of two up to 262144, not {}",
                self.offcpu_pages
            )));
        }
        if self.data_pages == 0 || !self.data_pages.is_power_of_two() {
            return Err(Error::Config(format!(
                "buffer pages must be a power of two (1, 2, 4, ... 65536), not {}",
                self.data_pages
            )));
        }
        if self.data_pages > 1 << 16 {
            return Err(Error::Config(format!(
                "buffer pages {} is too large: at most 65536 per CPU",
                self.data_pages
            )));
        }
        if let Target::Pids(p) = &self.target {
            if p.is_empty() {
                return Err(Error::Config("no process ids given".into()));
            }
            if let Some(bad) = p.iter().find(|&&p| p <= 0) {
                return Err(Error::Config(format!(
                    "invalid pid {bad}: must be positive"
                )));
            }
            let mut seen = std::collections::BTreeSet::new();
            if let Some(dup) = p.iter().find(|&&p| !seen.insert(p)) {
                return Err(Error::Config(format!("pid {dup} is given more than once")));
            }
        }
        if let Some(dir) = &self.cgroup_filter {
            if !matches!(self.target, Target::SystemWide) {
                return Err(Error::Config(
                    "-G (one cgroup) samples every process of the cgroup: it cannot be \
                     combined with -p or a command"
                        .into(),
                ));
            }
            if !crate::is_cgroup2_dir(dir) {
                return Err(Error::Config(format!(
                    "-G {}: not a cgroup v2 directory",
                    dir.display()
                )));
            }
        }
        if let Some(cpus) = &self.cpus {
            if cpus.is_empty() {
                return Err(Error::Config("empty CPU list".into()));
            }
            CpuTopology::read_in(sysfs_root)?.check(cpus)?;
        }
        Ok(())
    }

    /// The CPUs this configuration opens on: `-C`'s list, or every online
    /// CPU of this machine.
    pub fn cpu_list(&self) -> Result<Vec<u32>> {
        self.cpu_list_in(Path::new("/"))
    }

    /// [`SamplerConfig::cpu_list`] with the online list read under
    /// `sysfs_root`.
    pub fn cpu_list_in(&self, sysfs_root: &Path) -> Result<Vec<u32>> {
        match &self.cpus {
            Some(c) => Ok(c.clone()),
            None => online_cpus_in(sysfs_root),
        }
    }
}

/// Parses a kernel CPU list such as `0-3,5,7-8` (the one id-list parser,
/// [`profkit_eventlog::parse_id_list`]).
pub fn parse_cpu_list(s: &str) -> Result<Vec<u32>> {
    profkit_eventlog::parse_id_list(s)
        .map_err(|e| Error::Config(format!("bad CPU list '{s}': {e}; expected e.g. 0-3,5")))
}

/// Formats a CPU list the way the kernel does (`0-3,5`).
pub fn format_cpu_list(cpus: &[u32]) -> String {
    profkit_eventlog::format_id_list(cpus)
}

/// Where the kernel lists its CPUs, under a sysfs root.
pub const SYSFS_CPU_DIR: &str = "sys/devices/system/cpu";

/// The online CPUs, from `/sys/devices/system/cpu/online`.
pub fn online_cpus() -> Result<Vec<u32>> {
    online_cpus_in(Path::new("/"))
}

/// The online CPUs listed under `sysfs_root` (`/` for this machine;
/// tests give a directory holding a fake `sys/devices/system/cpu/online`).
pub fn online_cpus_in(sysfs_root: &Path) -> Result<Vec<u32>> {
    read_cpu_file(sysfs_root, "online")
}

fn read_cpu_file(sysfs_root: &Path, name: &str) -> Result<Vec<u32>> {
    let path = sysfs_root.join(SYSFS_CPU_DIR).join(name);
    let s = std::fs::read_to_string(&path)
        .map_err(|e| Error::Config(format!("cannot read {}: {e}", path.display())))?;
    parse_cpu_list(&s)
}

/// The machine's CPUs as the kernel lists them: those online now (the
/// ones profkit opens an event on by default) and those that may ever be
/// (`possible`: online, offline and hot-pluggable), so that a `-C` list
/// naming an offline CPU and one naming a CPU this machine cannot have
/// are told apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CpuTopology {
    /// `online`, ascending.
    pub online: Vec<u32>,
    /// `possible`, ascending (the online list when the kernel has no
    /// `possible` file).
    pub possible: Vec<u32>,
}

impl CpuTopology {
    /// This machine's CPUs.
    pub fn read() -> Result<Self> {
        Self::read_in(Path::new("/"))
    }

    /// The CPUs listed under `sysfs_root` (see [`online_cpus_in`]).
    pub fn read_in(sysfs_root: &Path) -> Result<Self> {
        let online = online_cpus_in(sysfs_root)?;
        let possible = match read_cpu_file(sysfs_root, "possible") {
            Ok(p) => p,
            Err(_) => online.clone(),
        };
        Ok(CpuTopology { online, possible })
    }

    /// Checks a `-C` list: every CPU in it online. The error names the
    /// first that is not, whether it is offline or not on this machine,
    /// and the online list.
    pub fn check(&self, cpus: &[u32]) -> Result<()> {
        let Some(&c) = cpus.iter().find(|c| self.online.binary_search(c).is_err()) else {
            return Ok(());
        };
        let online = format_cpu_list(&self.online);
        Err(Error::Config(if self.possible.binary_search(&c).is_ok() {
            format!("cpu {c} is not online (offline now); online CPUs: {online}")
        } else {
            format!(
                "cpu {c} is not online: this machine has no cpu {c} (possible: {}); online \
                 CPUs: {online}",
                format_cpu_list(&self.possible)
            )
        }))
    }
}

/// A fake sysfs root whose `sys/devices/system/cpu` lists `online` and
/// (if given) `possible`, in a directory of its own under the temporary
/// directory (removed by the caller).
#[cfg(test)]
pub(crate) fn fake_sysfs(name: &str, online: &str, possible: Option<&str>) -> std::path::PathBuf {
    let root = std::env::temp_dir().join(format!("profkit-{name}-{}", std::process::id()));
    let dir = root.join(SYSFS_CPU_DIR);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("online"), format!("{online}\n")).unwrap();
    if let Some(p) = possible {
        std::fs::write(dir.join("possible"), format!("{p}\n")).unwrap();
    }
    root
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fake_256_cpu_topology_with_an_offline_hole() {
        let root = fake_sysfs("topology", "0-63,65-255", Some("0-255"));
        let t = CpuTopology::read_in(&root).unwrap();
        assert_eq!((t.online.len(), t.possible.len()), (255, 256));
        assert!(!t.online.contains(&64) && t.online.contains(&255));
        assert_eq!(online_cpus_in(&root).unwrap(), t.online);
        // No -C: every online CPU, the hole left out.
        let mut c = SamplerConfig::new(EventSpec::parse("cpu-clock").unwrap());
        c.validate_in(&root).unwrap();
        assert_eq!(c.cpu_list_in(&root).unwrap(), t.online);
        // -C lists: online ones are kept as given.
        c.cpus = Some(parse_cpu_list("0-3,128-255").unwrap());
        c.validate_in(&root).unwrap();
        assert_eq!(c.cpu_list_in(&root).unwrap().len(), 132);
        // The hole is offline, 256 is not on this machine at all.
        c.cpus = Some(parse_cpu_list("60-70").unwrap());
        assert_eq!(
            c.validate_in(&root).unwrap_err().to_string(),
            "invalid sampling configuration: cpu 64 is not online (offline now); online CPUs: \
             0-63,65-255"
        );
        c.cpus = Some(parse_cpu_list("250-300").unwrap());
        assert_eq!(
            c.validate_in(&root).unwrap_err().to_string(),
            "invalid sampling configuration: cpu 256 is not online: this machine has no cpu 256 \
             (possible: 0-255); online CPUs: 0-63,65-255"
        );
        std::fs::remove_dir_all(&root).unwrap();

        // Without a `possible` file, the online list stands for it.
        let root = fake_sysfs("topology-old", "0-255", None);
        let t = CpuTopology::read_in(&root).unwrap();
        assert_eq!(t.possible, t.online);
        std::fs::remove_dir_all(&root).unwrap();
        // Without sysfs, the path is named.
        let e = CpuTopology::read_in(&root).unwrap_err().to_string();
        assert!(e.contains("sys/devices/system/cpu/online"), "{e}");
        c.cpus = Some(vec![0]);
        assert!(c.validate_in(&root).is_err());
        assert!(c.cpu_list_in(&root).is_ok(), "-C needs no sysfs read");
    }

    #[test]
    fn parses_known_raw_and_typed_events() {
        let e = EventSpec::parse("cpu-clock").unwrap();
        assert_eq!((e.type_, e.config), (1, 0));
        let e = EventSpec::parse("r1a2").unwrap();
        assert_eq!((e.type_, e.config), (4, 0x1a2));
        let e = EventSpec::parse("1:0x1").unwrap();
        assert_eq!((e.type_, e.config), (1, 1));
        let err = EventSpec::parse("bogus").unwrap_err().to_string();
        assert!(
            err.contains("'bogus'") && err.contains("cpu-clock"),
            "{err}"
        );
    }

    #[test]
    fn validate_rejects_bad_values() {
        let mut c = SamplerConfig::new(EventSpec::parse("cpu-clock").unwrap());
        c.validate().unwrap();
        c.rate = Rate::Frequency(0);
        assert!(c.validate().is_err());
        c.rate = Rate::Frequency(u64::MAX);
        let e = c.validate().unwrap_err().to_string();
        assert!(e.contains("maximum sample rate"), "{e}");
        c.rate = Rate::Period(10000);
        c.user_stack = 8190;
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("multiple of 8"));
        c.user_stack = 65536;
        assert!(c.validate().is_err());
        c.user_stack = 8192;
        c.validate().unwrap();
        c.data_pages = 3;
        assert!(c
            .validate()
            .unwrap_err()
            .to_string()
            .contains("power of two"));
        c.data_pages = 8;
        c.exclude_kernel = true;
        c.exclude_user = true;
        assert!(c.validate().is_err());
        c.exclude_user = false;
        c.cpus = Some(vec![100000]);
        assert!(c.validate().unwrap_err().to_string().contains("not online"));
    }

    #[test]
    fn cpu_lists_round_trip() {
        assert_eq!(
            parse_cpu_list("0-3,5,7-8\n").unwrap(),
            vec![0, 1, 2, 3, 5, 7, 8]
        );
        assert_eq!(format_cpu_list(&[0, 1, 2, 3, 5, 7, 8]), "0-3,5,7-8");
        assert!(parse_cpu_list("3-1").is_err());
        assert!(parse_cpu_list("x").is_err());
        assert!(!online_cpus().unwrap().is_empty());
    }
}
