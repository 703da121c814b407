//! Call-graph modes (`-g`, `--call-graph fp|dwarf[,SIZE]`, perf's
//! syntax) and the rings a session gets ([`RingChoice`]).

use crate::config::{Rate, StartConfig, DEFAULT_FREQUENCY};
use crate::error::{Error, Result};
use profkit_perf::{ring_plan, LockLimit, RingMode, RingNeed, RingPlan, MAX_USER_STACK};
use std::fmt;

/// How call graphs are recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CallGraph {
    /// The kernel's frame-pointer walk (`PERF_SAMPLE_CALLCHAIN`): `fp`,
    /// or `-g`.
    FramePointers,
    /// Each sample carries its user registers and the top `stack_size`
    /// bytes of its user stack, unwound with the binaries' DWARF CFI at
    /// sync time; the kernel part of the stack still comes from the
    /// kernel's callchain: `dwarf` or `dwarf,SIZE`.
    Dwarf {
        /// Bytes of user stack copied per sample: a multiple of 8, from 8
        /// to [`MAX_USER_STACK`].
        stack_size: u32,
    },
}

/// The stack bytes copied per sample by `--call-graph dwarf` (as perf).
pub const DEFAULT_DWARF_STACK: u32 = 8192;

impl CallGraph {
    /// Parses a `--call-graph` value: `fp`, `dwarf` (8192 bytes of stack)
    /// or `dwarf,SIZE`. The error names what is wrong and a value that
    /// works.
    pub fn parse(s: &str) -> Result<Self> {
        let bad = |why: String| Err(Error::CallGraph(why));
        let (mode, size) = match s.split_once(',') {
            Some((m, size)) => (m, Some(size)),
            None => (s, None),
        };
        match (mode, size) {
            ("fp", None) => Ok(CallGraph::FramePointers),
            ("fp", Some(size)) => bad(format!(
                "fp takes no stack size (a size is for dwarf: dwarf,{size})"
            )),
            ("dwarf", None) => Ok(CallGraph::Dwarf {
                stack_size: DEFAULT_DWARF_STACK,
            }),
            ("dwarf", Some(size)) => Ok(CallGraph::Dwarf {
                stack_size: stack_size(size)?,
            }),
            _ => bad(format!(
                "unknown call-graph mode '{mode}': use fp (frame pointers, as -g), dwarf \
                 ({DEFAULT_DWARF_STACK} bytes of user stack per sample, unwound with DWARF) or \
                 dwarf,SIZE"
            )),
        }
    }

    /// The mode `-g` and `--call-graph` ask for together: `-g` is `fp`,
    /// so it may come with `--call-graph fp` but not with `dwarf`.
    pub fn resolve(dash_g: bool, mode: Option<CallGraph>) -> Result<Option<CallGraph>> {
        match (dash_g, mode) {
            (false, m) => Ok(m),
            (true, None | Some(CallGraph::FramePointers)) => Ok(Some(CallGraph::FramePointers)),
            (true, Some(d)) => Err(Error::CallGraph(format!(
                "-g means frame-pointer call graphs (--call-graph fp), not --call-graph {d}: \
                 give --call-graph {d} alone"
            ))),
        }
    }

    /// Bytes of user stack copied per sample (0 for frame pointers).
    pub fn user_stack(self) -> u32 {
        match self {
            CallGraph::FramePointers => 0,
            CallGraph::Dwarf { stack_size } => stack_size,
        }
    }
}

impl std::str::FromStr for CallGraph {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self> {
        CallGraph::parse(s)
    }
}

/// `fp`, `dwarf,SIZE`: the `--call-graph` value.
impl fmt::Display for CallGraph {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CallGraph::FramePointers => f.write_str("fp"),
            CallGraph::Dwarf { stack_size } => write!(f, "dwarf,{stack_size}"),
        }
    }
}

fn stack_size(text: &str) -> Result<u32> {
    let bad = |why: String| Err(Error::CallGraph(why));
    if text.is_empty() {
        return bad(format!(
            "the stack size is missing after 'dwarf,': give bytes (e.g. dwarf,{DEFAULT_DWARF_STACK})"
        ));
    }
    let digits = text.bytes().all(|b| b.is_ascii_digit());
    let n = match text.parse::<u64>() {
        Ok(n) if digits => n,
        // Digits only, and still no u64: too large.
        Err(_) if digits => u64::MAX,
        _ => {
            return bad(format!(
            "the stack size '{text}' is not a number of bytes (e.g. dwarf,{DEFAULT_DWARF_STACK})"
        ))
        }
    };
    if n == 0 {
        return bad(format!(
            "the stack size must be at least 8 bytes (e.g. dwarf,{DEFAULT_DWARF_STACK})"
        ));
    }
    if n > u64::from(MAX_USER_STACK) {
        return bad(format!(
            "the stack size {text} is above the kernel's limit of {MAX_USER_STACK} bytes (use \
             dwarf,{MAX_USER_STACK} or less)"
        ));
    }
    if n % 8 != 0 {
        return bad(format!(
            "the stack size {n} must be a multiple of 8 (e.g. dwarf,{})",
            n.next_multiple_of(8)
        ));
    }
    Ok(n as u32)
}

/// The rings chosen at start when `--buffer-pages` is not given
/// ([`profkit_perf::ring_plan`]): from the CPUs opened, the rate (with a
/// period, `-c`, [`DEFAULT_FREQUENCY`] is assumed), what a sample carries
/// (flat, frame pointers, DWARF with its stack copy) and this user's
/// locked-memory limit. Its `Display` is the line `start` says.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RingChoice {
    /// The plan.
    pub plan: RingPlan,
    /// The rate is a period (`-c`): the plan's rate is the default rate,
    /// assumed.
    pub frequency_assumed: bool,
    /// With `--off-cpu` (and no `--off-cpu-pages`): data pages of each
    /// CPU's off-CPU ring ([`RingChoice::with_off_cpu`]).
    pub off_cpu_pages: Option<usize>,
}

impl RingChoice {
    /// The rings for `config` on this machine: its CPUs (`-C`, or every
    /// online one), rate and layout, within this process's locked-memory
    /// limit ([`LockLimit::of_process`]).
    pub fn for_start(config: &StartConfig) -> Result<Self> {
        let online = profkit_perf::online_cpus()?.len();
        let online = u32::try_from(online).unwrap_or(u32::MAX);
        Self::for_start_within(config, LockLimit::of_process(online))
    }

    /// [`RingChoice::for_start`] within `limit`.
    pub fn for_start_within(config: &StartConfig, limit: LockLimit) -> Result<Self> {
        let sampler = config.sampler_config()?;
        let cpus = u32::try_from(sampler.cpu_list()?.len()).unwrap_or(u32::MAX);
        Self::choose(
            config.rate,
            config.sync_interval_ms,
            RingMode::of(sampler.layout()),
            cpus,
            limit,
            profkit_perf::page_size(),
        )
    }

    /// The rings for `cpus` CPUs sampled at `rate`, `mode` samples, a
    /// round every `sync_interval_ms`, within `limit`; refused
    /// ([`profkit_perf::Error::LockedMemory`]) with what to raise or lower.
    pub fn choose(
        rate: Rate,
        sync_interval_ms: u64,
        mode: RingMode,
        cpus: u32,
        limit: LockLimit,
        page_size: usize,
    ) -> Result<Self> {
        let (rate_hz, frequency_assumed) = match rate {
            Rate::Frequency(f) => (f, false),
            Rate::Period(_) => (DEFAULT_FREQUENCY, true),
        };
        let need = RingNeed {
            cpus,
            rate_hz,
            mode,
            sync_interval_ms,
            page_size,
        };
        Ok(RingChoice {
            plan: ring_plan(need, limit)?,
            frequency_assumed,
            off_cpu_pages: None,
        })
    }

    /// Adds the off-CPU rings (`--off-cpu`): four times the sample rings
    /// (a switch storm fills a ring that much faster), halved until they
    /// fit in what the sample rings leave of the same limit (on 256 CPUs
    /// as root: 1 MiB rings, 386 MiB locked in all, where four times the
    /// sample rings would be 642 MiB); refused when not one page fits.
    /// Within a user's `perf_event_mlock_kb` the off-CPU rings are left as
    /// they were (four times the sample rings): the kernel charges what
    /// passes that allowance to the user's `RLIMIT_MEMLOCK`, which the
    /// plan does not know, and an unprivileged `--off-cpu` is refused
    /// for its want of kernel rights first.
    pub fn with_off_cpu(mut self) -> Result<Self> {
        if !matches!(self.plan.limit, LockLimit::Budget { .. }) {
            return Ok(self);
        }
        let plan = &self.plan;
        let page = plan.need.page_size.max(1) as u64;
        let cpus = u64::from(plan.need.cpus.max(1));
        let left = plan.limit.total_bytes().saturating_sub(plan.locked_bytes());
        // Each ring has a control page besides its data pages.
        let fits = (left / cpus / page).saturating_sub(1);
        let mut pages = (plan.pages as u64).saturating_mul(4).max(1);
        while pages > fits && pages > 1 {
            pages /= 2;
        }
        if pages > fits {
            return Err(profkit_perf::Error::LockedMemory {
                cpus: plan.need.cpus,
                allowed_bytes: left / cpus,
                needed_bytes: 2 * page,
                message: format!(
                    "--off-cpu needs a ring per CPU beside the sample rings, and the {} leaves \
                     no page for them after the {}: give a smaller --buffer-pages, or \
                     --off-cpu-pages N",
                    plan.limit, plan
                ),
            }
            .into());
        }
        self.off_cpu_pages = Some(pages as usize);
        Ok(self)
    }

    /// Data pages per ring.
    pub fn pages(&self) -> usize {
        self.plan.pages
    }

    /// What to say when the kernel refused these rings all the same: the
    /// plan counted on the whole allowance, which this user's other rings
    /// (another profkit or perf) share.
    pub fn kernel_refused(&self) -> String {
        format!(
            "the kernel refused the {}; this user's other perf rings (another profkit or perf \
             session) share {}: stop them, or give a smaller --buffer-pages",
            self.plan, self.plan.limit
        )
    }
}

/// `rings of 16 MiB × 2 CPUs = 32.0 MiB locked, because ...`, and when
/// the rate was assumed, that.
impl fmt::Display for RingChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.plan)?;
        if let Some(p) = self.off_cpu_pages {
            let bytes = p as u64 * self.plan.need.page_size as u64;
            let total =
                (p as u64 + 1) * self.plan.need.page_size as u64 * u64::from(self.plan.need.cpus);
            write!(
                f,
                "; off-CPU rings of {} KiB × {} CPUs = {:.1} MiB locked",
                bytes / 1024,
                self.plan.need.cpus,
                total as f64 / (1024.0 * 1024.0)
            )?;
        }
        if self.frequency_assumed {
            f.write_str(" (the rate is assumed: -c gives a period, not a rate)")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(s: &str) -> String {
        CallGraph::parse(s).unwrap_err().to_string()
    }

    #[test]
    fn perf_syntax_parses() {
        assert_eq!(CallGraph::parse("fp").unwrap(), CallGraph::FramePointers);
        assert_eq!(
            CallGraph::parse("dwarf").unwrap(),
            CallGraph::Dwarf { stack_size: 8192 }
        );
        assert_eq!(
            "dwarf,16384".parse::<CallGraph>().unwrap(),
            CallGraph::Dwarf { stack_size: 16384 }
        );
        assert_eq!(CallGraph::parse("dwarf,8").unwrap().user_stack(), 8);
        assert_eq!(CallGraph::parse("dwarf,65528").unwrap().user_stack(), 65528);
        assert_eq!(CallGraph::FramePointers.user_stack(), 0);
        for s in ["fp", "dwarf,8192", "dwarf,64"] {
            assert_eq!(CallGraph::parse(s).unwrap().to_string(), s);
        }
    }

    #[test]
    fn bad_sizes_say_what_is_wrong_and_what_works() {
        let e = err("dwarf,8190");
        assert!(e.contains("8190") && e.contains("multiple of 8"), "{e}");
        assert!(e.contains("dwarf,8192"), "{e}");
        let e = err("dwarf,4");
        assert!(e.contains("multiple of 8") && e.contains("dwarf,8)"), "{e}");
        let e = err("dwarf,0");
        assert!(e.contains("at least 8 bytes"), "{e}");
        let e = err("dwarf,65536");
        assert!(
            e.contains("65536") && e.contains("dwarf,65528 or less"),
            "{e}"
        );
        let e = err("dwarf,99999999999999999999");
        assert!(e.contains("above the kernel's limit"), "{e}");
        let e = err("dwarf,+8");
        assert!(e.contains("'+8' is not a number"), "{e}");
        let e = err("dwarf,8k");
        assert!(e.contains("'8k' is not a number of bytes"), "{e}");
        let e = err("dwarf,");
        assert!(e.contains("missing after 'dwarf,'"), "{e}");
        let e = err("dwarf,-8");
        assert!(e.contains("'-8' is not a number"), "{e}");
        assert!(CallGraph::parse("dwarf,8192").is_ok());
    }

    #[test]
    fn unknown_modes_name_the_accepted_ones() {
        for bad in [
            "lbr",
            "LBR",
            "Dwarf",
            "",
            "fp,",
            "dwarf8192",
            "frame-pointer",
        ] {
            let e = CallGraph::parse(bad).unwrap_err();
            assert!(e.is_usage(), "{bad}: {e}");
            let e = e.to_string();
            if bad.starts_with("fp,") {
                assert!(e.contains("fp takes no stack size"), "{bad}: {e}");
            } else {
                assert!(
                    e.contains("unknown call-graph mode")
                        && e.contains("fp")
                        && e.contains("dwarf,SIZE"),
                    "{bad}: {e}"
                );
            }
        }
        assert!(err("lbr").contains("'lbr'"));
        assert!(err("lbr,8").contains("'lbr'"));
        assert!(err("fp,8192").contains("dwarf,8192"));
    }

    #[test]
    fn dash_g_is_frame_pointers_and_refuses_dwarf() {
        let fp = Some(CallGraph::FramePointers);
        let dwarf = Some(CallGraph::Dwarf { stack_size: 4096 });
        assert_eq!(CallGraph::resolve(false, None).unwrap(), None);
        assert_eq!(CallGraph::resolve(true, None).unwrap(), fp);
        assert_eq!(CallGraph::resolve(true, fp).unwrap(), fp);
        assert_eq!(CallGraph::resolve(false, fp).unwrap(), fp);
        assert_eq!(CallGraph::resolve(false, dwarf).unwrap(), dwarf);
        let e = CallGraph::resolve(true, dwarf).unwrap_err();
        assert!(e.is_usage());
        let e = e.to_string();
        assert!(
            e.contains("-g means frame-pointer") && e.contains("--call-graph dwarf,4096 alone"),
            "{e}"
        );
    }

    const ROOT: LockLimit = LockLimit::Budget {
        bytes: profkit_perf::ROOT_LOCK_BUDGET,
    };

    #[test]
    fn the_rings_said_at_start() {
        let dwarf = RingMode::Dwarf { stack_bytes: 8192 };
        let r = RingChoice::choose(Rate::Frequency(4000), 250, dwarf, 2, ROOT, 4096).unwrap();
        assert_eq!((r.pages(), r.frequency_assumed), (4096, false));
        assert_eq!(
            r.to_string(),
            "rings of 16 MiB × 2 CPUs = 32.0 MiB locked, because dwarf,8192 samples (8352 \
             bytes each) at 4000 Hz fill a 16 MiB ring in 502.2 ms, two 250 ms sync intervals \
             or more, within profkit's budget of 512 MiB for a user the kernel does not limit"
        );
        // A period: the default rate assumed, and said.
        let r = RingChoice::choose(Rate::Period(100_000), 250, dwarf, 2, ROOT, 4096).unwrap();
        assert_eq!((r.plan.need.rate_hz, r.frequency_assumed), (4000, true));
        assert!(
            r.to_string()
                .ends_with("(the rate is assumed: -c gives a period, not a rate)"),
            "{r}"
        );
        // Without call graphs, on 256 CPUs: the default rings.
        let r = RingChoice::choose(Rate::Frequency(4000), 250, RingMode::Flat, 256, ROOT, 4096)
            .unwrap();
        assert_eq!(r.pages(), profkit_perf::DEFAULT_DATA_PAGES);
        assert!(r
            .to_string()
            .starts_with("rings of 512 KiB × 256 CPUs = 129 MiB locked"));
        // The sync interval counts: 1 s rounds want four times the ring.
        let r = RingChoice::choose(Rate::Frequency(4000), 1000, dwarf, 2, ROOT, 4096).unwrap();
        assert_eq!(r.pages(), 16384);
    }

    #[test]
    fn rings_past_the_allowance_are_refused_with_what_fits() {
        let dwarf = RingMode::Dwarf { stack_bytes: 8192 };
        let mlock = LockLimit::Mlock {
            kb_per_cpu: 516,
            online_cpus: 2,
        };
        let e = RingChoice::choose(Rate::Frequency(4000), 250, dwarf, 2, mlock, 4096).unwrap_err();
        assert!(!e.is_usage());
        let e = e.to_string();
        assert!(
            e.contains("kernel.perf_event_mlock_kb = 516 KiB per CPU allows rings of 512 KiB")
                && e.contains("raise kernel.perf_event_mlock_kb to 2052")
                && e.contains("lower -F to 1255"),
            "{e}"
        );
        let r = RingChoice::choose(Rate::Frequency(1255), 250, dwarf, 2, mlock, 4096).unwrap();
        assert_eq!(r.pages(), 128);
        assert!(r
            .kernel_refused()
            .starts_with("the kernel refused the rings of 512 KiB × 2 CPUs"));
    }

    #[test]
    fn the_rings_of_a_start_configuration() {
        let mut c = StartConfig {
            callgraph: true,
            user_stack: 8192,
            ..crate::config::tests::config()
        };
        let r = RingChoice::for_start_within(&c, ROOT).unwrap();
        let online = profkit_perf::online_cpus().unwrap().len() as u32;
        assert_eq!(r.plan.need.cpus, online);
        assert_eq!(r.plan.need.mode, RingMode::Dwarf { stack_bytes: 8192 });
        c.cpus = Some(vec![0]);
        c.user_stack = 0;
        let r = RingChoice::for_start_within(&c, ROOT).unwrap();
        assert_eq!(
            (r.plan.need.cpus, r.plan.need.mode),
            (1, RingMode::FramePointers)
        );
    }

    /// `--off-cpu` on 256 CPUs as root: the off-CPU rings are halved from
    /// four times the sample rings until both fit in the 512 MiB budget;
    /// with no room left they are refused with what to do.
    #[test]
    fn off_cpu_rings_fit_beside_the_sample_rings() {
        let budget = LockLimit::Budget { bytes: 512 << 20 };
        let r = RingChoice::choose(
            Rate::Frequency(4000),
            250,
            RingMode::Flat,
            256,
            budget,
            4096,
        )
        .unwrap()
        .with_off_cpu()
        .unwrap();
        let sample = r.plan.locked_bytes();
        let off = (r.off_cpu_pages.unwrap() as u64 + 1) * 4096 * 256;
        assert!(sample + off <= 512 << 20, "{sample} + {off}");
        assert_eq!(r.off_cpu_pages, Some(256), "1 MiB, not 4 x 512 KiB");
        assert!(
            r.to_string()
                .contains("off-CPU rings of 1024 KiB × 256 CPUs"),
            "{r}"
        );
        // Two CPUs: four times the sample rings, as before.
        let r = RingChoice::choose(Rate::Frequency(4000), 250, RingMode::Flat, 2, budget, 4096)
            .unwrap()
            .with_off_cpu()
            .unwrap();
        assert_eq!(r.off_cpu_pages, Some(4 * r.pages()));
        // A budget the sample rings take whole: refused, saying what to do.
        let tight = LockLimit::Budget {
            bytes: 2 * (128 + 1) * 4096,
        };
        let r =
            RingChoice::choose(Rate::Frequency(4000), 250, RingMode::Flat, 2, tight, 4096).unwrap();
        let e = r.with_off_cpu().unwrap_err().to_string();
        assert!(
            e.contains("--off-cpu-pages") && e.contains("--buffer-pages"),
            "{e}"
        );
        // A user's perf_event_mlock_kb: left as before (the kernel charges
        // the rest to RLIMIT_MEMLOCK).
        let user = LockLimit::Mlock {
            kb_per_cpu: 516,
            online_cpus: 2,
        };
        let r = RingChoice::choose(Rate::Frequency(4000), 250, RingMode::Flat, 2, user, 4096)
            .unwrap()
            .with_off_cpu()
            .unwrap();
        assert_eq!(r.off_cpu_pages, None);
    }
}
