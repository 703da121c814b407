//! `profreport --wall`: where each thread's wall-clock time went, for a
//! session recorded with `profctl start --off-cpu`: on its CPU (samples ×
//! the time a sample stands for), blocked, and runnable but waiting for a
//! CPU, per (command, pid, tid), most time first.
//!
//! It is three passes of the one aggregation ([`crate::aggregate`]): the
//! samples, then the blocked and the runnable intervals as off-CPU
//! weights, each keyed by (pid, tid), so `cpu:`, `tgid:` and `tid:` specs,
//! `--time` windows, rotated parts and `--merge` work as in every other
//! report. Image and cgroup specs do not apply (a thread's time is not
//! split by binary here).
//!
//! The on-CPU figure is a time only when a sample stands for a known time:
//! a `cpu-clock` or `task-clock` session, at a frequency *f* (10⁹/*f* ns a
//! sample) or a period *p* (*p* ns). For any other event the column counts
//! samples, and the total is the off-CPU time alone.

use std::io::{self, Write};

use serde::Serialize;

use crate::aggregate::summary::header;
use crate::aggregate::{aggregate, Aggregate, KeyShape};
use crate::build::{check_off_cpu, off_cpu_clamped_warning};
use crate::error::Result;
use crate::hash::FxHashMap;
use crate::model::Header;
use crate::naming::apps::Comms;
use crate::options::{OffCpuMode, ReportOptions};
use crate::render::{csv_field, ms, Format};
use crate::session::{check_merge, Session};
use crate::Progress;

/// One thread's time.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WallRow {
    /// Its process.
    pub tgid: u32,
    /// The thread.
    pub tid: u32,
    /// Its name (the thread's own, else its process's).
    pub comm: String,
    /// Samples taken while it ran.
    pub samples: u64,
    /// Time on its CPU, ns (`samples` × a sample's time); `None` when the
    /// event's samples are not a time.
    pub on_cpu_ns: Option<u64>,
    /// Time blocked (sleeping: I/O, locks, pipes, timers), ns.
    pub blocked_ns: u64,
    /// Time runnable, waiting for a CPU, ns.
    pub runnable_ns: u64,
    /// `on_cpu_ns` (when a time) + `blocked_ns` + `runnable_ns`.
    pub total_ns: u64,
}

/// A `--wall` report.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WallReport {
    /// The sessions' header (samples, losses, off-CPU accounting).
    pub header: Header,
    /// What one sample stands for, ns; `None` when the event is not a
    /// clock (the on-CPU column is then samples).
    pub ns_per_sample: Option<u64>,
    /// Threads, most total time first.
    pub rows: Vec<WallRow>,
    /// Problems worth telling.
    pub warnings: Vec<String>,
}

/// The time a sample of this session stands for, ns: a `cpu-clock` or
/// `task-clock` session's period, or 10⁹ / its frequency.
fn ns_per_sample(h: &Header) -> Option<u64> {
    if h.event != "cpu-clock" && h.event != "task-clock" {
        return None;
    }
    match (h.frequency, h.period) {
        (Some(f), _) if f > 0 => Some(1_000_000_000 / f),
        (None, Some(p)) if p > 0 => Some(p),
        _ => None,
    }
}

/// Builds the `--wall` report of `sessions` (all recorded with
/// `--off-cpu`); of `opts` only the spec's `cpu:`, `tgid:` and `tid:` and
/// `time` are used.
///
/// # Errors
/// [`crate::Error::NoOffCpu`] for a session recorded without
/// `--off-cpu`; [`crate::Error::MergeMismatch`] as for any report.
pub fn build_wall(
    sessions: &[Session],
    opts: &ReportOptions,
    progress: &dyn Progress,
) -> Result<WallReport> {
    let mut warnings = Vec::new();
    check_merge(sessions, &mut warnings)?;
    check_off_cpu(sessions)?;
    let shape = KeyShape {
        pid: true,
        tid: true,
        ..KeyShape::default()
    };
    let pass = |off_cpu: Option<OffCpuMode>| {
        aggregate(
            sessions,
            KeyShape { off_cpu, ..shape },
            &opts.spec,
            opts.time.as_ref(),
            progress,
        )
    };
    let on = pass(None);
    let blocked = pass(Some(OffCpuMode::Blocked));
    let runnable = pass(Some(OffCpuMode::Runnable));
    if [&blocked, &runnable]
        .iter()
        .any(|a| a.weight_budget.as_ref().is_some_and(|b| b.clamped()))
    {
        warnings.push(off_cpu_clamped_warning());
    }
    let (mut h, _) = header(sessions, &on, opts.time.is_some(), None, &mut warnings);
    let per = ns_per_sample(&h);
    let comms = Comms::new(&on);

    // (session, pid, tid) → [samples, blocked ns, runnable ns]
    let mut threads: FxHashMap<(u32, u32, u32), [u64; 3]> = FxHashMap::default();
    let mut add = |agg: &Aggregate, i: usize| {
        for (k, n) in agg.counts.iter() {
            let e = threads.entry((k.sess, k.pid, k.tid)).or_default();
            e[i] = e[i].saturating_add(n);
        }
    };
    add(&on, 0);
    add(&blocked, 1);
    add(&runnable, 2);
    h.total_samples = threads.values().fold(0, |a, v| a.saturating_add(v[0]));
    let mut rows: Vec<WallRow> = threads
        .into_iter()
        .map(|((sess, tgid, tid), [samples, b, r])| {
            let on_cpu_ns = per.map(|p| samples.saturating_mul(p));
            WallRow {
                tgid,
                tid,
                comm: comms.name(sess, tgid, tid).to_owned(),
                samples,
                on_cpu_ns,
                blocked_ns: b,
                runnable_ns: r,
                total_ns: on_cpu_ns.unwrap_or(0).saturating_add(b).saturating_add(r),
            }
        })
        .collect();
    rows.sort_by(|a, b| {
        b.total_ns
            .cmp(&a.total_ns)
            .then(b.samples.cmp(&a.samples))
            .then((a.tgid, a.tid).cmp(&(b.tgid, b.tid)))
            .then(a.comm.cmp(&b.comm))
    });
    progress.finish();
    Ok(WallReport {
        header: h,
        ns_per_sample: per,
        rows,
        warnings,
    })
}

#[derive(Serialize)]
struct JsonWall<'a> {
    event: &'a str,
    /// `ns`: every `*_ns` figure.
    unit: &'static str,
    /// `ns` when the on-CPU column is a time, else `samples`.
    on_cpu_unit: &'static str,
    ns_per_sample: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    off_cpu_accounting: Option<crate::model::OffCpuCounts>,
    total_samples: u64,
    duration_s: f64,
    sessions: &'a [crate::model::SessionInfo],
    warnings: &'a [String],
    threads: &'a [WallRow],
}

/// Writes a `--wall` report as text (the header, then a table), JSON (one
/// object, `threads` its rows, times in ns) or CSV (times in ms).
pub fn write_wall(r: &WallReport, format: Format, w: &mut dyn Write) -> io::Result<()> {
    let h = &r.header;
    match format {
        Format::Json => {
            let j = JsonWall {
                event: &h.event,
                unit: "ns",
                on_cpu_unit: if r.ns_per_sample.is_some() {
                    "ns"
                } else {
                    "samples"
                },
                ns_per_sample: r.ns_per_sample,
                off_cpu_accounting: h.off_cpu_accounting,
                total_samples: h.total_samples,
                duration_s: (h.duration_ns as f64 / 1e6).round() / 1e3,
                sessions: &h.sessions,
                warnings: &r.warnings,
                threads: &r.rows,
            };
            serde_json::to_writer_pretty(&mut *w, &j).map_err(io::Error::from)?;
            writeln!(w)
        }
        Format::Csv => {
            writeln!(
                w,
                "tgid,tid,comm,samples,on_cpu_ms,blocked_ms,runnable_ms,total_ms"
            )?;
            for t in &r.rows {
                writeln!(
                    w,
                    "{},{},{},{},{},{},{},{}",
                    t.tgid,
                    t.tid,
                    csv_field(&t.comm),
                    t.samples,
                    t.on_cpu_ns.map(ms).unwrap_or_default(),
                    ms(t.blocked_ns),
                    ms(t.runnable_ns),
                    ms(t.total_ns)
                )?;
            }
            Ok(())
        }
        Format::Text => {
            w.write_all(crate::render::header_lines(h).as_bytes())?;
            match r.ns_per_sample {
                Some(p) => writeln!(
                    w,
                    "Wall:     per thread: on its CPU (samples × {} ms), blocked, runnable (waiting \
                     for a CPU), ms",
                    ms(p)
                )?,
                None => writeln!(
                    w,
                    "Wall:     per thread, ms; {} samples are not a time: the on-CPU column counts \
                     samples, and the total is off-CPU time only",
                    profkit_eventlog::shown(&h.event)
                )?,
            }
            writeln!(w)?;
            if r.rows.is_empty() {
                return writeln!(w, "(no threads match)");
            }
            let on_head = if r.ns_per_sample.is_some() {
                "on-CPU ms"
            } else {
                "on-CPU samples"
            };
            let cells: Vec<[String; 7]> = r
                .rows
                .iter()
                .map(|t| {
                    [
                        t.on_cpu_ns.map_or_else(|| t.samples.to_string(), ms),
                        ms(t.blocked_ns),
                        ms(t.runnable_ns),
                        ms(t.total_ns),
                        t.tgid.to_string(),
                        t.tid.to_string(),
                        profkit_eventlog::shown(&t.comm).into_owned(),
                    ]
                })
                .collect();
            let heads = [
                on_head,
                "blocked ms",
                "runnable ms",
                "total ms",
                "tgid",
                "tid",
                "command",
            ];
            let widths: Vec<usize> = (0..7)
                .map(|i| {
                    cells
                        .iter()
                        .map(|c| c[i].chars().count())
                        .chain([heads[i].len()])
                        .max()
                        .unwrap_or(0)
                })
                .collect();
            let line = |c: &[&str]| {
                let mut s = String::new();
                for (i, v) in c.iter().enumerate() {
                    let width = widths[i];
                    if i == 6 {
                        s.push_str(v);
                    } else {
                        s.push_str(&format!("{v:>width$}  "));
                    }
                }
                s.trim_end().to_owned()
            };
            writeln!(w, "{}", line(&heads))?;
            for c in &cells {
                let v: Vec<&str> = c.iter().map(String::as_str).collect();
                writeln!(w, "{}", line(&v))?;
            }
            Ok(())
        }
        other => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("--wall writes text, json or csv, not {other:?}"),
        )),
    }
}
