//! Call-graph modes (`-g`, `--call-graph fp|dwarf[,SIZE]`, perf's
//! syntax) and the ring a DWARF call graph needs.

use crate::config::{Rate, DEFAULT_FREQUENCY};
use crate::error::{Error, Result};
use profkit_perf::{DEFAULT_DATA_PAGES, MAX_USER_STACK};
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

/// What a sample carries besides its stack copy in a DWARF call graph
/// (header, ids, time, registers, kernel callchain), rounded up: the
/// ring-size estimate's per-sample overhead.
pub const DWARF_SAMPLE_OVERHEAD: u64 = 160;

/// The largest ring [`DwarfRing::choose`] picks per CPU: 64 MiB (it is
/// locked memory, on every CPU).
pub const MAX_DWARF_RING_BYTES: u64 = 64 << 20;

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

/// The ring chosen per CPU for DWARF call graphs when `--buffer-pages` is
/// not given: room for two sync intervals of samples, each its stack copy
/// plus [`DWARF_SAMPLE_OVERHEAD`] bytes, in a power of two of pages, at
/// least [`DEFAULT_DATA_PAGES`] and otherwise at most
/// [`MAX_DWARF_RING_BYTES`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DwarfRing {
    /// Data pages per CPU (a power of two).
    pub pages: usize,
    /// The page size the pages are counted in.
    pub page_size: usize,
    /// Bytes of user stack per sample.
    pub stack_size: u32,
    /// Samples per second per CPU the ring is sized for.
    pub frequency: u64,
    /// The rate is a period (`-c`): `frequency` is the default rate,
    /// assumed.
    pub frequency_assumed: bool,
    /// Milliseconds between sync rounds.
    pub sync_interval_ms: u64,
    /// Two sync intervals of samples need more than
    /// [`MAX_DWARF_RING_BYTES`]: the ring is that cap, and may fill.
    pub capped: bool,
}

impl DwarfRing {
    /// The ring for `stack_size`-byte stacks at `rate` with a sync round
    /// every `sync_interval_ms` ms; with a period (`-c`) the rate is
    /// assumed to be [`DEFAULT_FREQUENCY`].
    pub fn choose(rate: Rate, sync_interval_ms: u64, stack_size: u32, page_size: usize) -> Self {
        let (frequency, frequency_assumed) = match rate {
            Rate::Frequency(f) => (f, false),
            Rate::Period(_) => (DEFAULT_FREQUENCY, true),
        };
        let page = page_size.max(1) as u128;
        let bytes = 2
            * u128::from(frequency)
            * u128::from(sync_interval_ms)
            * (u128::from(stack_size) + u128::from(DWARF_SAMPLE_OVERHEAD))
            / 1000;
        let need = bytes.div_ceil(page).max(1);
        let max = max_pages(page_size);
        let capped = need > max as u128;
        let pages = (need.min(max as u128) as usize)
            .next_power_of_two()
            .max(DEFAULT_DATA_PAGES);
        DwarfRing {
            pages,
            page_size,
            stack_size,
            frequency,
            frequency_assumed,
            sync_interval_ms,
            capped,
        }
    }

    /// The ring's data bytes per CPU.
    pub fn bytes(&self) -> u64 {
        self.pages as u64 * self.page_size as u64
    }

    /// The highest rate whose samples over two sync intervals fit in
    /// `pages` pages (0 if not even one sample a second does).
    pub fn frequency_fitting(&self, pages: usize) -> u64 {
        let per_interval = 2
            * u128::from(self.sync_interval_ms)
            * (u128::from(self.stack_size) + u128::from(DWARF_SAMPLE_OVERHEAD));
        let room = pages as u128 * self.page_size as u128 * 1000;
        (room / per_interval.max(1)).min(u128::from(u64::MAX)) as u64
    }

    /// What to do when this ring cannot be locked in memory (a user
    /// without root, `CAP_IPC_LOCK` or `perf_event_paranoid` -1 may lock
    /// `kernel.perf_event_mlock_kb`, given as `mlock_kb`, per CPU): the
    /// largest ring within that allowance and a rate it holds.
    pub fn mlock_advice(&self, mlock_kb: Option<u64>) -> String {
        let allowance = match mlock_kb {
            Some(kb) => format!("kernel.perf_event_mlock_kb is {kb} KiB per CPU"),
            None => "kernel.perf_event_mlock_kb could not be read".to_owned(),
        };
        // The allowance covers the ring's control page too.
        let fit = mlock_kb
            .map(|kb| (kb.saturating_mul(1024) / self.page_size.max(1) as u64).saturating_sub(1))
            .filter(|&p| p > 0)
            .map(|p| 1usize << (63 - p.leading_zeros()).min(16));
        let example = match fit {
            Some(pages) => match self.frequency_fitting(pages) {
                0 => format!(
                    "e.g. --buffer-pages {pages} with a smaller --call-graph dwarf,SIZE and -F"
                ),
                f => format!("e.g. --buffer-pages {pages} -F {f}"),
            },
            None => "a smaller --buffer-pages and a lower -F".to_owned(),
        };
        format!(
            "dwarf call graphs: the {} ring per CPU chosen for {}-byte stacks at {} Hz is more \
             memory than this user may lock ({allowance} without root or CAP_IPC_LOCK): run as \
             root, or choose a ring that fits and a rate it holds, {example}",
            size_text(self.bytes()),
            self.stack_size,
            self.frequency
        )
    }
}

/// `dwarf call graphs: 16 MiB ring per CPU (4096 pages) for 8192-byte
/// stacks at 4000 Hz`, and when the rate was assumed or the ring capped,
/// what that means.
impl fmt::Display for DwarfRing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "dwarf call graphs: {} ring per CPU ({} pages) for {}-byte stacks at {} Hz",
            size_text(self.bytes()),
            self.pages,
            self.stack_size,
            self.frequency
        )?;
        if self.frequency_assumed {
            f.write_str(" (assumed: -c gives a period, not a rate)")?;
        }
        if self.capped {
            write!(
                f,
                "; that is the {} cap, less than two sync rounds of samples need: if samples \
                 are lost, lower -F or --sync-interval, or copy less with dwarf,SIZE",
                size_text(MAX_DWARF_RING_BYTES)
            )?;
        }
        Ok(())
    }
}

/// The most pages [`DwarfRing::choose`] picks: [`MAX_DWARF_RING_BYTES`]
/// in pages (a power of two), and at most the perf layer's 65536.
fn max_pages(page_size: usize) -> usize {
    let pages = (MAX_DWARF_RING_BYTES / page_size.max(1) as u64).clamp(1, 1 << 16);
    1 << (63 - pages.leading_zeros())
}

/// `16 MiB`, `512 KiB`.
fn size_text(bytes: u64) -> String {
    if bytes >= 1 << 20 && bytes % (1 << 20) == 0 {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{} KiB", bytes.div_ceil(1024))
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

    #[test]
    fn the_dwarf_ring_holds_two_sync_intervals() {
        // 2 × 4000 × 0.25 × (8192 + 160) / 4096 = 4078.1 → 4096 pages.
        let r = DwarfRing::choose(Rate::Frequency(4000), 250, 8192, 4096);
        assert_eq!((r.pages, r.bytes(), r.capped), (4096, 16 << 20, false));
        assert_eq!(
            r.to_string(),
            "dwarf call graphs: 16 MiB ring per CPU (4096 pages) for 8192-byte stacks at 4000 Hz"
        );
        // Exactly 4096 pages (2 × 2048 × 1 s × 4096 bytes), and 8 bytes
        // more per sample: the next power of two.
        let r = DwarfRing::choose(Rate::Frequency(2048), 1000, 4096 - 160, 4096);
        assert_eq!(r.pages, 4096);
        let r = DwarfRing::choose(Rate::Frequency(2048), 1000, 4096 - 152, 4096);
        assert_eq!(r.pages, 8192);
        let r = DwarfRing::choose(Rate::Frequency(4000), 500, 8192, 4096);
        assert_eq!(r.pages, 8192); // 8156.3 pages
                                   // Low rates keep the default ring.
        let r = DwarfRing::choose(Rate::Frequency(10), 250, 8192, 4096);
        assert_eq!(r.pages, DEFAULT_DATA_PAGES);
        assert_eq!(
            r.to_string(),
            "dwarf call graphs: 512 KiB ring per CPU (128 pages) for 8192-byte stacks at 10 Hz"
        );
        let r = DwarfRing::choose(Rate::Frequency(100), 250, 8192, 4096);
        assert_eq!(r.pages, 128); // 102 pages
        let r = DwarfRing::choose(Rate::Frequency(200), 250, 8192, 4096);
        assert_eq!(r.pages, 256); // 204 pages
                                  // Other page sizes count the same bytes.
        let r = DwarfRing::choose(Rate::Frequency(4000), 250, 8192, 65536);
        assert_eq!((r.pages, r.bytes()), (256, 16 << 20));
    }

    #[test]
    fn a_period_assumes_the_default_rate() {
        let r = DwarfRing::choose(Rate::Period(100_000), 250, 8192, 4096);
        assert_eq!(
            (r.frequency, r.frequency_assumed, r.pages),
            (4000, true, 4096)
        );
        assert!(r.to_string().contains("at 4000 Hz (assumed: -c"), "{r}");
    }

    #[test]
    fn the_dwarf_ring_is_capped_at_64_mib() {
        let r = DwarfRing::choose(Rate::Frequency(4000), 250, 65528, 4096);
        assert_eq!((r.pages, r.bytes(), r.capped), (16384, 64 << 20, true));
        assert!(r.to_string().contains("64 MiB cap"), "{r}");
        // No overflow at absurd rates.
        let r = DwarfRing::choose(Rate::Frequency(u64::MAX), 60_000, MAX_USER_STACK, 4096);
        assert_eq!((r.pages, r.capped), (16384, true));
        // Never below the default ring, even where that is above the cap
        // (1 MiB pages).
        let r = DwarfRing::choose(Rate::Frequency(4000), 250, 8192, 1 << 20);
        assert_eq!((r.pages, r.bytes()), (DEFAULT_DATA_PAGES, 128 << 20));
        assert_eq!(max_pages(4096), 16384);
        assert_eq!(max_pages(16384), 4096);
        assert_eq!(max_pages(1), 1 << 16);
    }

    #[test]
    fn mlock_advice_names_a_ring_within_the_allowance_and_a_rate_it_holds() {
        let r = DwarfRing::choose(Rate::Frequency(4000), 250, 8192, 4096);
        // 516 KiB = 129 pages: the control page and 128 data pages; 128
        // pages hold 2 × 0.25 s × 125 Hz × 8352 bytes.
        assert_eq!(r.frequency_fitting(128), 125);
        assert_eq!(r.frequency_fitting(r.pages), 4017);
        let a = r.mlock_advice(Some(516));
        assert!(
            a.contains("16 MiB ring per CPU chosen for 8192-byte stacks at 4000 Hz")
                && a.contains("kernel.perf_event_mlock_kb is 516 KiB per CPU")
                && a.contains("run as root")
                && a.ends_with("e.g. --buffer-pages 128 -F 125"),
            "{a}"
        );
        assert!(r
            .mlock_advice(Some(2052))
            .ends_with("--buffer-pages 512 -F 502"));
        let a = r.mlock_advice(None);
        assert!(
            a.contains("could not be read")
                && a.ends_with("a smaller --buffer-pages and a lower -F"),
            "{a}"
        );
        assert!(r.mlock_advice(Some(4)).ends_with("a lower -F"));
        let big = DwarfRing::choose(Rate::Frequency(4000), 60_000, MAX_USER_STACK, 4096);
        assert!(big
            .mlock_advice(Some(8))
            .ends_with("--buffer-pages 1 with a smaller --call-graph dwarf,SIZE and -F"));
    }
}
