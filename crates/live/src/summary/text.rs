//! The summary for people: `profctl status`'s table and notes, and the
//! summary `profctl stop` and `profctl record` print.

use std::fmt::Write;

use super::{CpuSummary, PartsSummary, Summary};

impl PartsSummary {
    /// One line for people.
    pub fn text(&self) -> String {
        let mut out = format!(
            "parts:    part {} being written, {} closed ({})",
            self.part,
            self.closed,
            human_bytes(self.closed_bytes)
        );
        if self.removed > 0 {
            out.push_str(&format!(", {} deleted by retention", self.removed));
        }
        if let Some(r) = &self.rule {
            out.push_str(&format!("; {}", one_line(r)));
        }
        out.push('\n');
        for e in &self.errors {
            out.push_str(&format!("note: parts: {}\n", one_line(e)));
        }
        if let Some(x) = &self.export {
            out.push_str(&format!(
                "export:   every part through {} in the store, {} waiting; {} exports, {} failed",
                x.through, x.waiting, x.attempts, x.failures
            ));
            if x.dropped > 0 {
                out.push_str(&format!(
                    ", {} deleted by retention before their export",
                    x.dropped
                ));
            }
            if let Some(ms) = x.retry_in_ms {
                out.push_str(&format!("; next try in {:.1} s", ms as f64 / 1e3));
            }
            out.push('\n');
            if let Some(e) = &x.last_error {
                out.push_str(&format!("note: export: {}\n", one_line(e)));
            }
        }
        out
    }
}

/// The loss kinds of one CPU that are not zero, `ring 3, no task 1`.
fn loss_kinds(c: &CpuSummary) -> String {
    [
        ("ring", c.lost_ring),
        ("event buffer", c.lost_overflow),
        ("disk", c.lost_disk_full),
        ("no mapping", c.lost_no_mapping),
        ("no task", c.lost_no_task),
        ("unreported", c.lost_reconcile),
    ]
    .iter()
    .filter(|(_, n)| *n > 0)
    .map(|(k, n)| format!("{k} {n}"))
    .collect::<Vec<_>>()
    .join(", ")
}

/// Bytes as people read them: `812 B`, `4.0 KiB`, `1.2 MiB`, `3.40 GiB`.
pub(crate) fn human_bytes(n: u64) -> String {
    const K: f64 = 1024.0;
    let f = n as f64;
    if f < K {
        format!("{n} B")
    } else if f < K * K {
        format!("{:.1} KiB", f / K)
    } else if f < K * K * K {
        format!("{:.1} MiB", f / (K * K))
    } else {
        format!("{:.2} GiB", f / (K * K * K))
    }
}

/// Lines from a daemon, each without control characters.
pub(super) fn one_lines(s: &str) -> String {
    s.lines().map(|l| one_line(l) + "\n").collect()
}

/// Text from a daemon or a session, one line, without control characters.
pub(super) fn one_line(s: &str) -> String {
    profkit_eventlog::shown(s).into_owned()
}

impl Summary {
    /// The counters as `profctl status` prints them: rounds and the last
    /// round's duration, a per-CPU table (samples, lost, lost %, the loss
    /// kinds that are not zero), then one line per note (unattributed
    /// samples, throttling, DWARF unwinding, cut stacks, unread
    /// build-ids). Text for people: no JSON.
    pub fn status_text(&self) -> String {
        let mut out = String::new();
        let (samples, lost) = (self.samples(), self.lost());
        let n = samples + lost;
        let pct = |lost: u64, n: u64| {
            if n > 0 {
                100.0 * lost as f64 / n as f64
            } else {
                0.0
            }
        };
        out.push_str(&format!(
            "rounds:   {} (last took {:.1} ms), {} written\n",
            self.rounds,
            self.last_round_ms,
            human_bytes(self.bytes_written)
        ));
        if let Some(p) = &self.parts {
            out.push_str(&p.text());
        }
        if let Some(d) = &self.disk {
            out.push_str(&one_lines(&d.text()));
        }
        out.push_str(&format!(
            "samples:  {samples}, lost {lost} ({:.3}%)\n",
            pct(lost, n)
        ));
        if let Some(o) = &self.off_cpu {
            out.push_str(&format!(
                "off-cpu:  {} ({} switch records waiting, {} waits going on)\n",
                o.line()
                    .trim_start_matches("profkit: off-CPU: ")
                    .trim_end_matches('.'),
                o.pending,
                o.open
            ));
        }
        let rows: Vec<[String; 5]> = self
            .cpus
            .iter()
            .map(|c| {
                [
                    c.cpu.to_string(),
                    c.samples.to_string(),
                    c.lost.to_string(),
                    format!("{:.3}", c.lost_pct),
                    loss_kinds(c),
                ]
            })
            .collect();
        let head = ["cpu", "samples", "lost", "lost %", "losses"];
        let mut w = head.map(str::len);
        for r in &rows {
            for (w, cell) in w.iter_mut().zip(r) {
                *w = (*w).max(cell.len());
            }
        }
        let line = |r: [&str; 5]| {
            let s = format!(
                "  {:>w0$}  {:>w1$}  {:>w2$}  {:>w3$}  {}",
                r[0],
                r[1],
                r[2],
                r[3],
                r[4],
                w0 = w[0],
                w1 = w[1],
                w2 = w[2],
                w3 = w[3]
            );
            format!("{}\n", s.trim_end())
        };
        if !rows.is_empty() {
            out.push_str(&line(head));
            for r in &rows {
                out.push_str(&line([&r[0], &r[1], &r[2], &r[3], &r[4]]));
            }
        }
        let unattributed = self.unattributed();
        if unattributed > 0 {
            out.push_str(&format!(
                "note: {unattributed} samples unattributed (no mapping or no task)\n"
            ));
        }
        if let Some(t) = self.throttled() {
            out.push_str(&format!(
                "note: the kernel throttled sampling ({t}): fewer samples than asked for\n"
            ));
        }
        let u = &self.unwind;
        if u.stacks > 0 {
            out.push_str(&format!(
                "note: DWARF: {} user stacks unwound, {:.1} frames each, {} binaries ({} of unwind information)\n",
                u.stacks,
                u.frames as f64 / u.stacks as f64,
                u.binaries,
                human_bytes(u.bytes)
            ));
        }
        if u.from_debug_file > 0 {
            out.push_str(&format!(
                "note: DWARF: {} binaries unwound with their separate debug file's .debug_frame\n",
                u.from_debug_file
            ));
        }
        if u.without_cfi + u.unreadable + u.refused > 0 {
            out.push_str(&format!(
                "note: DWARF: binaries stepped by frame pointer: {} without unwind information, {} unreadable, {} refused\n",
                u.without_cfi, u.unreadable, u.refused
            ));
        }
        if u.frames_while_loading > 0 {
            out.push_str(&format!(
                "note: DWARF: {} frames stepped by frame pointer while unwind information loaded\n",
                u.frames_while_loading
            ));
        }
        if u.demoted > 0 {
            out.push_str(&format!(
                "note: DWARF: {} binaries stepped by frame pointer since their unwinding cost too much\n",
                u.demoted
            ));
        }
        for d in &self.unwind_demoted {
            out.push_str(&format!("note: DWARF: demoted {}\n", one_line(d)));
        }
        if u.stacks_over_budget > 0 {
            out.push_str(&format!(
                "note: DWARF: {} user stacks stepped by frame pointer past a round's unwinding budget\n",
                u.stacks_over_budget
            ));
        }
        let cut: u64 = self.cpus.iter().map(|c| c.user_stacks_cut).sum();
        if cut > 0 {
            out.push_str(&format!(
                "note: {cut} user stacks deeper than the copied stack bytes\n"
            ));
        }
        let refused: u64 = self.build_ids_refused.iter().sum();
        if refused > 0 {
            out.push_str(&format!(
                "note: build-ids not read for {refused} mapped binaries\n"
            ));
        }
        if self.files_unidentified > 0 {
            out.push_str(&format!(
                "note: {} mappings claimed a build-id whose file could not be identified\n",
                self.files_unidentified
            ));
        }
        out
    }
}

impl Summary {
    /// What `profctl stop` and `profctl record` print at the end: samples,
    /// losses and rounds per CPU, the session's size and bytes per sample,
    /// its parts, then a line per note (throttling, containers' binaries
    /// kept, copies refused, the disk budget, build-ids not read, DWARF
    /// unwinding, cut stacks, CPUs that lost samples).
    pub fn stop_text(&self) -> String {
        let s = self;
        let mut out = String::new();
        let session = s.session.clone().unwrap_or_default();
        let (samples, lost, unattributed) = (s.samples(), s.lost(), s.unattributed());
        let per: Vec<String> = s
            .cpus
            .iter()
            .map(|c| {
                format!(
                    "cpu{} {} ({} lost, {:.3}%)",
                    c.cpu, c.samples, c.lost, c.lost_pct
                )
            })
            .collect();
        let of_which = if unattributed > 0 {
            format!(" ({unattributed} of them unattributed: no mapping or no task)")
        } else {
            String::new()
        };
        let _ = writeln!(
 out,
        "profkit: recorded {:.1} s, {samples} samples and {lost} lost{of_which} in {} rounds: {}. Session {} ({} bytes, {:.2} bytes/sample).",
        session.duration_s,
        s.rounds,
        per.join(", "),
        if session.session.is_empty() { "?" } else { &session.session },
        session.session_bytes,
        if samples > 0 { session.session_bytes as f64 / samples as f64 } else { 0.0 }
    );
        if let Some(p) = &s.parts {
            let first = p.part.saturating_sub(p.closed);
            let files = match p.closed {
                0 => "session.pkl".to_owned(),
                _ => format!("session.{first:06}.pkl … session.pkl"),
            };
            let _ = writeln!(
                out,
                "profkit: the session is in parts {first}–{} ({files}; their bytes above){}; \
             profreport reads them as one.",
                p.part,
                match p.removed {
                    0 => String::new(),
                    n => format!(
                        ", {n} older deleted by retention (their samples are counted above)"
                    ),
                }
            );
            if let Some(x) = &p.export {
                let _ = writeln!(
                    out,
                    "profkit: export: every part through {} in the store{}{}{}",
                    x.through,
                    match x.failures {
                        0 => String::new(),
                        n => format!(
                            " ({n} of {} exports failed and were tried again)",
                            x.attempts
                        ),
                    },
                    match x.waiting {
                        0 => String::new(),
                        n => format!(
                            "; {n} parts wait on disk: run `profctl export` when the store is back"
                        ),
                    },
                    match &x.last_error {
                        Some(e) => format!(" ({})", one_line(e)),
                        None => String::new(),
                    }
                );
            }
        }
        if let Some(o) = &s.off_cpu {
            let _ = writeln!(out, "{}", o.line());
        }
        if let Some(j) = &s.jit {
            for l in j.lines() {
                let _ = writeln!(out, "{l}");
            }
        }
        if let Some(throttled) = s.throttled() {
            let _ = writeln!(
 out,
            "warning: the kernel throttled sampling ({}): it caps interrupts at kernel.perf_event_max_sample_rate = {} Hz (and perf_cpu_time_max_percent), so those periods hold fewer samples than asked for; lower -F/-c or raise the sysctl",
            throttled,
            profkit_perf::read_sysctl("kernel.perf_event_max_sample_rate").map(|v| v.to_string()).unwrap_or("?".into())
        );
        }
        let k = &session.kept;
        if k.binaries + k.perf_maps > 0 {
            let _ = writeln!(
 out,
            "containers: kept {} binaries ({:.1} MiB) that the host cannot reach at their recorded paths, and {} JIT maps from other pid namespaces, in the session",
            k.binaries,
            k.binary_bytes as f64 / (1 << 20) as f64,
            k.perf_maps
        );
        }
        for r in &session.extras_refused {
            let _ = writeln!(out, "note: not copied into the session: {}", one_line(r));
        }
        if let Some(d) = &s.disk {
            // Its refusals name users' paths: each line on one line.
            for line in d.text().lines() {
                let _ = writeln!(out, "{}", one_line(line));
            }
        }
        let [unopenable, not_regular, other_file, timed_out] = s.build_ids_refused;
        if not_regular + other_file + timed_out > 0 {
            let _ = writeln!(
 out,"note: build-ids not read for {} mapped binaries ({not_regular} not a regular file, {other_file} another file than the one mapped, {timed_out} timed out; {unopenable} unopenable): they are identified by device and inode", not_regular + other_file + timed_out + unopenable);
        }
        if s.files_unidentified > 0 {
            let _ = writeln!(
 out,"note: {} mappings claimed a build-id whose file could not be identified (gone, refused or timed out): their samples are named by the recorded path only, never with another file's symbols", s.files_unidentified);
        }
        let u = &s.unwind;
        if u.stacks > 0 {
            let _ = writeln!(
 out,
            "DWARF call graphs: {} user stacks unwound at sync time ({:.1} frames each) with the unwind information of {} binaries ({:.1} MiB read)",
            u.stacks,
            u.frames as f64 / u.stacks as f64,
            u.binaries,
            u.bytes as f64 / (1 << 20) as f64
        );
            if u.jit_frames_cfi + u.jit_frames_epilogue > 0 {
                let _ = writeln!(
                    out,
                    "note: {} frames of generated code stepped with their runtime's unwind information (jitdump), {} by decoding their epilogue (trampolines without a frame pointer)",
                    u.jit_frames_cfi, u.jit_frames_epilogue
                );
            }
            if u.from_debug_file > 0 {
                let _ = writeln!(
                    out,
                    "note: {} binaries without unwind tables of their own were unwound with their separate debug file's .debug_frame",
                    u.from_debug_file
                );
            }
            if u.frames_while_loading > 0 {
                let _ = writeln!(
 out,"note: {} frames were stepped by their frame pointer while their binary's unwind information was being read", u.frames_while_loading);
            }
            if u.without_cfi + u.unreadable + u.refused > 0 {
                let _ = writeln!(
 out,"note: {} binaries were stepped through by their frame pointer: {} without unwind information, {} unreadable or slower than 1 s, {} refused as hostile or corrupt", u.without_cfi + u.unreadable + u.refused, u.without_cfi, u.unreadable, u.refused);
            }
            for r in &s.unwind_refused {
                let _ = writeln!(out, "note: unwind information refused: {}", one_line(r));
            }
            if u.demoted > 0 {
                let _ = writeln!(
 out,"note: {} binaries were stepped through by their frame pointer for the rest of the session because unwinding their frames cost too much", u.demoted);
            }
            for d in &s.unwind_demoted {
                let _ = writeln!(out, "note: demoted: {}", one_line(d));
            }
            if u.stacks_over_budget > 0 {
                let _ = writeln!(
 out,"note: {} user stacks (or their rest) were stepped by their frame pointer because their sync round had spent its unwinding budget", u.stacks_over_budget);
            }
        }
        let cut: u64 = s.cpus.iter().map(|c| c.user_stacks_cut).sum();
        if cut > 0 {
            let _ = writeln!(
 out,"note: {cut} user stacks were deeper than the copied stack bytes and end with [unknown]: raise --call-graph dwarf,SIZE (at most 65528) to see them whole");
        }
        for c in &s.cpus {
            if c.lost_pct > 0.01 {
                let _ = writeln!(
 out,"warning: cpu {} lost {:.3}% of its samples (ring {}, event buffer {}, disk {}, no mapping {}, no task {}, unreported by LOST records {})",
                c.cpu, c.lost_pct, c.lost_ring, c.lost_overflow, c.lost_disk_full, c.lost_no_mapping, c.lost_no_task, c.lost_reconcile);
            }
        }
        out
    }
}

impl super::OffCpuSummary {
    /// One line for `stop` and `status`: what was measured, and every
    /// count of what was not.
    pub fn line(&self) -> String {
        let c = &self.counts;
        let mut not = Vec::new();
        if c.lost > 0 {
            not.push(format!(
                "{} switch records dropped by the kernel (ring full: raise --buffer-pages)",
                c.lost.max(c.kernel_lost)
            ));
        }
        if c.no_stack > 0 {
            not.push(format!("{} waits without their stack", c.no_stack));
        }
        if c.unpaired > 0 {
            not.push(format!(
                "{} not measurable (begun before the session, a new task's first run, or across a kernel drop)",
                c.unpaired
            ));
        }
        if c.dropped > 0 {
            not.push(format!(
                "{} switch records over the sync stage's bounds",
                c.dropped
            ));
        }
        format!(
            "profkit: off-CPU: {} switch-outs, {} waits measured{}{}.",
            c.switches,
            c.intervals,
            if not.is_empty() { "" } else { "; " },
            not.join(", ")
        )
    }
}
