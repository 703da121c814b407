//! `profreport`'s progress bar.

use std::io::{self, IsTerminal};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use profkit_report::Progress;

/// A progress bar on stderr that appears only once the report has taken a
/// second, and only on a terminal.
pub(super) struct Bar {
    bar: ProgressBar,
    started: Instant,
    enabled: bool,
    shown: AtomicBool,
}

impl Bar {
    pub(super) fn new(enabled: bool) -> Bar {
        let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::hidden());
        if let Ok(style) = ProgressStyle::with_template("{spinner} {msg}: {pos}/{len} [{elapsed}]")
        {
            bar.set_style(style);
        }
        Bar {
            bar,
            started: Instant::now(),
            enabled: enabled && io::stderr().is_terminal(),
            shown: AtomicBool::new(false),
        }
    }

    fn maybe_show(&self) {
        if self.enabled
            && !self.shown.load(Ordering::Relaxed)
            && self.started.elapsed() > Duration::from_secs(1)
            && !self.shown.swap(true, Ordering::Relaxed)
        {
            self.bar.set_draw_target(ProgressDrawTarget::stderr());
            self.bar.enable_steady_tick(Duration::from_millis(100));
        }
    }
}

impl Progress for Bar {
    fn start(&self, phase: &'static str, total: u64) {
        self.bar.set_message(phase);
        self.bar.set_length(total);
        self.bar.set_position(0);
        self.maybe_show();
    }
    fn advance(&self, n: u64) {
        self.bar.inc(n);
        self.maybe_show();
    }
    fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
