//! The start configuration: what `profctl start`/`record` asked for,
//! validated, and handed whole to the daemon process.

use crate::error::{Error, Result};
use profkit_eventlog::{CgroupSource, EventConfigDesc, SessionHeader};
use profkit_perf::{EventSpec, Sampler, SamplerConfig, Target};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

/// How often to sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Rate {
    /// Samples per second per CPU (`-F`).
    Frequency(u64),
    /// One sample every N events (`-c`).
    Period(u64),
}

/// Everything a live session is started with. The CLI builds it from its
/// flags, [`StartConfig::sampler_config`] validates it, and it travels to
/// the daemon child as one JSON argument ([`StartConfig::to_json`]); the
/// session directory is carried as bytes, so a path that is not UTF-8
/// arrives unchanged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StartConfig {
    /// The session directory.
    #[serde(with = "path_bytes")]
    pub session_dir: PathBuf,
    /// The event as the user spelled it (`cpu-clock`, `rHEX`, `TYPE:CONFIG`).
    pub event: String,
    /// Sampling rate.
    pub rate: Rate,
    /// Processes to sample (and their children); empty: the whole system.
    pub pids: Vec<i32>,
    /// Only these CPUs; `None`: all online CPUs.
    pub cpus: Option<Vec<u32>>,
    /// Record call graphs: frame pointers, or DWARF when `user_stack` is
    /// not 0 (which implies a call graph).
    pub callgraph: bool,
    /// DWARF call graphs: bytes of user stack copied per sample
    /// (`--call-graph dwarf,SIZE`); 0 for none.
    #[serde(default)]
    pub user_stack: u32,
    /// Milliseconds between sync rounds.
    pub sync_interval_ms: u64,
    /// Data pages per CPU ring (a power of two).
    pub buffer_pages: usize,
    /// Only user-space samples.
    pub user_only: bool,
    /// Only kernel samples.
    pub kernel_only: bool,
    /// Start the events at the target's `exec` (`profctl record`).
    pub enable_on_exec: bool,
    /// Record each sample's cgroup (`--cgroups`): `PERF_SAMPLE_CGROUP`,
    /// or `/proc/PID/cgroup` on kernels without it.
    #[serde(default)]
    pub cgroups: bool,
    /// Only this cgroup v2 (`-G PATH`, as in `/proc/PID/cgroup` or the
    /// directory's absolute path).
    #[serde(default)]
    pub cgroup: Option<PathBuf>,
    /// Rotation and retention (`--rotate`, `--keep`, `--max-disk`).
    #[serde(default)]
    pub parts: crate::parts::PartsConfig,
    /// The session's disk budget as `profctl start` resolved and stated
    /// it (`--max-disk`, or the default from the free space then); the
    /// daemon resolves it itself when absent.
    #[serde(default)]
    pub disk_budget: Option<crate::budget::BudgetLimit>,
    /// Record off-CPU intervals (`--off-cpu`): a switch-out stack and the
    /// switch-in time of every sampled task's context switch.
    #[serde(default)]
    pub off_cpu: bool,
    /// Data pages of each off-CPU ring (`--off-cpu-pages`); None: four
    /// times `buffer_pages`.
    #[serde(default)]
    pub off_cpu_pages: Option<usize>,
    /// `--export URL`: closed parts are pushed to a fleet store (the URL
    /// itself travels in the environment: [`crate::EXPORT_URL_ENV`]).
    #[serde(default)]
    pub export: Option<crate::export::ExportConfig>,
}

/// The default rate when neither `-F` nor `-c` is given.
pub const DEFAULT_FREQUENCY: u64 = 4000;

impl StartConfig {
    /// The sampler configuration, validated (a bad event, CPU list, rate or
    /// ring size is a [`profkit_perf::Error::Config`]).
    pub fn sampler_config(&self) -> Result<SamplerConfig> {
        let mut c = SamplerConfig::new(EventSpec::parse(&self.event)?);
        c.rate = match self.rate {
            Rate::Frequency(f) => profkit_perf::Rate::Frequency(f),
            Rate::Period(p) => profkit_perf::Rate::Period(p),
        };
        if !self.pids.is_empty() {
            c.target = Target::Pids(self.pids.clone());
        }
        c.cpus = self.cpus.clone();
        // With DWARF call graphs the callchain still gives the kernel part
        // of the stack (the user part is the copied stack's).
        c.callchain = self.callgraph || self.user_stack > 0;
        c.user_stack = self.user_stack;
        c.data_pages = self.buffer_pages;
        c.exclude_kernel = self.user_only;
        c.exclude_user = self.kernel_only;
        c.enable_on_exec = self.enable_on_exec;
        c.off_cpu = self.off_cpu;
        // A switch storm fills a ring four times as fast as sampling does.
        c.offcpu_pages = self
            .off_cpu_pages
            .unwrap_or(self.buffer_pages.saturating_mul(4));
        if self.cgroups {
            // PROFKIT_CGROUPS_FROM_PROC: the older kernels' way on this
            // one (the tests show it works where it is needed).
            c.cgroups = if profkit_perf::kernel_samples_cgroups()
                && std::env::var_os("PROFKIT_CGROUPS_FROM_PROC").is_none()
            {
                profkit_perf::CgroupRecording::Sample
            } else {
                profkit_perf::CgroupRecording::Proc
            };
        }
        if let Some(g) = &self.cgroup {
            c.cgroup_filter = Some(profkit_perf::cgroup_dir(g)?);
        }
        c.validate()?;
        Ok(c)
    }

    /// Opens the events once, here, where the user sees the message, and
    /// closes them again. Per-process sampling without the right to sample
    /// the kernel falls back to user space only (which works up to
    /// `perf_event_paranoid` 2): then `user_only` is set and the returned
    /// note says why kernel samples are missing.
    pub fn probe(&mut self) -> Result<Option<String>> {
        let c = self.sampler_config()?;
        match Sampler::open(&c) {
            Ok(s) => {
                drop(s);
                Ok(None)
            }
            Err(e) if is_permission(&e) && c.off_cpu => {
                // User-space-only sampling is no way out here: a switch
                // happens in the kernel, and its event cannot leave the
                // kernel out.
                Err(profkit_perf::Error::Config(format!(
                    "--off-cpu needs the right to sample the kernel (a context switch happens \
                     there): {}; it needs <= 1, or CAP_PERFMON. Run as root, grant CAP_PERFMON, \
                     or record without --off-cpu",
                    profkit_perf::read_sysctl("kernel.perf_event_paranoid")
                        .map(|p| format!("kernel.perf_event_paranoid is {p}"))
                        .unwrap_or_else(|| "kernel.perf_event_paranoid could not be read".into())
                ))
                .into())
            }
            Err(e)
                if is_permission(&e)
                    && !matches!(c.target, Target::SystemWide)
                    && !c.exclude_kernel =>
            {
                let mut user = c;
                user.exclude_kernel = true;
                // Refused again: the first refusal says why. Anything else
                // (a ring too large to lock) is the user-space events' own
                // problem, and hiding it behind the kernel's refusal would
                // send the user after the wrong cause.
                drop(Sampler::open(&user).map_err(|u| if is_permission(&u) { e } else { u })?);
                self.user_only = true;
                Ok(Some(format!(
                    "profkit: kernel samples excluded: {} (kernel samples of a process need <= 1, or CAP_PERFMON); recording user space only",
                    profkit_perf::read_sysctl("kernel.perf_event_paranoid")
                        .map(|p| format!("kernel.perf_event_paranoid is {p}"))
                        .unwrap_or_else(|| "kernel.perf_event_paranoid could not be read".into())
                )))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The configuration as one line of JSON (for the daemon's command line).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_default()
    }

    /// Reads [`to_json`](Self::to_json)'s output.
    pub fn from_json(text: &str) -> Result<Self> {
        serde_json::from_str(text).map_err(|source| Error::Config {
            text: text.chars().take(200).collect(),
            source,
        })
    }
}

fn is_permission(e: &profkit_perf::Error) -> bool {
    matches!(e, profkit_perf::Error::Open { source, .. }
        if source.kind() == std::io::ErrorKind::PermissionDenied)
}

/// The session header for a recording with sampler configuration `c`.
pub(crate) fn session_header(c: &SamplerConfig, sync_interval_ms: u64) -> Result<SessionHeader> {
    let (frequency, period) = match c.rate {
        profkit_perf::Rate::Frequency(f) => (Some(f), None),
        profkit_perf::Rate::Period(p) => (None, Some(p)),
    };
    let mut h = SessionHeader {
        host: std::fs::read_to_string("/proc/sys/kernel/hostname")
            .unwrap_or_default()
            .trim()
            .into(),
        kernel_release: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .unwrap_or_default()
            .trim()
            .into(),
        event: EventConfigDesc {
            name: c.event.name.clone(),
            type_: c.event.type_,
            config: c.event.config,
            frequency,
            period,
            exclude_user: c.exclude_user,
            exclude_kernel: c.exclude_kernel,
            callchain: c.callchain,
            user_stack: c.user_stack,
            off_cpu: c.off_cpu,
            sample_times: true,
            // A runtime may map a jitdump at any time: the sync stage
            // then writes its functions (version 7).
            jit_code: true,
        },
        cpus: c.cpu_list()?,
        start_time_unix_ns: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0),
        start_monotonic_ns: profkit_perf::monotonic_ns(),
        sync_interval_ms: sync_interval_ms as u32,
        target: match &c.target {
            Target::SystemWide if c.cgroup_filter.is_some() => format!(
                "cgroup {}",
                c.cgroup_filter
                    .as_deref()
                    .unwrap_or(std::path::Path::new(""))
                    .display()
            ),
            Target::SystemWide => "system-wide".into(),
            Target::Pids(p) => format!(
                "pid {}",
                p.iter()
                    .map(|p| p.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            ),
        },
        cgroups: match c.cgroups {
            profkit_perf::CgroupRecording::Off => CgroupSource::None,
            profkit_perf::CgroupRecording::Sample => CgroupSource::Sample,
            profkit_perf::CgroupRecording::Proc => CgroupSource::Proc,
        },
        part: None,
    };
    // A live session is part 1 of its parts from the start, so that a
    // rotation asked for later (SIGHUP, `profctl rotate`) numbers from it.
    h.part = Some(profkit_eventlog::PartInfo {
        number: 1,
        first_round: 0,
        session_start_unix_ns: h.start_time_unix_ns,
        session_start_monotonic_ns: h.start_monotonic_ns,
    });
    Ok(h)
}

/// A path as its bytes (Linux paths need not be UTF-8).
mod path_bytes {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::os::unix::ffi::{OsStrExt, OsStringExt};
    use std::path::{Path, PathBuf};

    pub fn serialize<S: Serializer>(p: &Path, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(p.as_os_str().as_bytes())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<PathBuf, D::Error> {
        let bytes = Vec::<u8>::deserialize(d)?;
        Ok(PathBuf::from(std::ffi::OsString::from_vec(bytes)))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::ffi::OsStr;
    use std::os::unix::ffi::OsStrExt;

    /// `profctl start`'s defaults (for the tests of this crate).
    pub(crate) fn config() -> StartConfig {
        StartConfig {
            cgroups: false,
            cgroup: None,
            session_dir: "profkit_data".into(),
            event: "cpu-clock".into(),
            rate: Rate::Frequency(DEFAULT_FREQUENCY),
            pids: vec![],
            cpus: None,
            callgraph: false,
            user_stack: 0,
            sync_interval_ms: 250,
            buffer_pages: profkit_perf::DEFAULT_DATA_PAGES,
            user_only: false,
            kernel_only: false,
            enable_on_exec: false,
            parts: Default::default(),
            disk_budget: None,
            off_cpu: false,
            off_cpu_pages: None,
            export: None,
        }
    }

    #[test]
    fn a_non_utf8_session_dir_crosses_json_unmangled() {
        let mut c = config();
        c.session_dir = PathBuf::from(OsStr::from_bytes(b"/tmp/pk-\xff\xfe-dir"));
        c.pids = vec![42, 43];
        c.cpus = Some(vec![0, 1]);
        c.rate = Rate::Period(10_000);
        c.callgraph = true;
        c.user_stack = 16384;
        c.parts = crate::parts::PartsConfig {
            rotate: Some(crate::parts::Rotate::Every(std::time::Duration::from_secs(
                3600,
            ))),
            keep: Some(24),
            max_disk: Some(10 << 30),
        };
        let text = c.to_json();
        assert!(!text.contains('\n'), "{text}");
        let back = StartConfig::from_json(&text).unwrap();
        assert_eq!(back, c);
        assert_eq!(
            back.session_dir.as_os_str().as_bytes(),
            b"/tmp/pk-\xff\xfe-dir"
        );
    }

    #[test]
    fn a_garbled_configuration_is_an_error_quoting_it() {
        let e = StartConfig::from_json("{\"event\": 3}").unwrap_err();
        assert!(matches!(e, Error::Config { .. }));
        assert!(e.to_string().contains("{\\\"event\\\": 3}"), "{e}");
    }

    #[test]
    fn sampler_config_carries_every_field_and_validates() {
        let mut c = config();
        c.pids = vec![7];
        c.user_only = true;
        c.callgraph = true;
        c.enable_on_exec = true;
        c.rate = Rate::Period(500);
        let s = c.sampler_config().unwrap();
        assert_eq!(s.target, Target::Pids(vec![7]));
        assert!(s.exclude_kernel && !s.exclude_user && s.callchain && s.enable_on_exec);
        assert_eq!(s.rate, profkit_perf::Rate::Period(500));

        assert_eq!(s.user_stack, 0);

        c.user_stack = 8192;
        let s = c.sampler_config().unwrap();
        assert!(
            s.callchain,
            "the kernel part of a DWARF stack is the callchain's"
        );
        assert_eq!(s.user_stack, 8192);
        assert_eq!(s.layout().user_stack, 8192);
        c.callgraph = false;
        assert!(c.sampler_config().unwrap().callchain);
        c.user_stack = 8190;
        assert!(c.sampler_config().unwrap_err().is_usage());
        c.user_stack = 0;

        c.buffer_pages = 3;
        let e = c.sampler_config().unwrap_err();
        assert!(e.is_usage(), "{e}");
        let mut c = config();
        c.event = "no-such-event".into();
        assert!(c.sampler_config().unwrap_err().is_usage());
    }

    #[test]
    fn the_header_describes_the_configuration() {
        let mut c = config();
        c.pids = vec![7, 8];
        c.cpus = Some(vec![0]);
        let h = session_header(&c.sampler_config().unwrap(), 100).unwrap();
        assert_eq!(h.target, "pid 7,8");
        assert_eq!(h.cpus, vec![0]);
        assert_eq!(h.sync_interval_ms, 100);
        assert_eq!(h.event.frequency, Some(DEFAULT_FREQUENCY));
        assert_eq!(h.event.period, None);
        assert_eq!(h.event.name, "cpu-clock");
        assert!(!h.event.callchain);
        assert_eq!(h.event.user_stack, 0);
        c.user_stack = 4096;
        let h = session_header(&c.sampler_config().unwrap(), 100).unwrap();
        assert!(h.event.callchain);
        assert_eq!(h.event.user_stack, 4096);
    }

    #[test]
    fn a_configuration_without_user_stack_reads_as_none() {
        // What a profctl from before DWARF call graphs handed its daemon.
        let mut v: serde_json::Value = serde_json::from_str(&config().to_json()).unwrap();
        v.as_object_mut().unwrap().remove("user_stack").unwrap();
        let c = StartConfig::from_json(&v.to_string()).unwrap();
        assert_eq!(c, config());
    }
}
