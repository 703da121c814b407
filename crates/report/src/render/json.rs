//! The JSON report: one object.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::sync::Arc;

use serde::Serialize;

use super::*;
use crate::model::*;

#[derive(Serialize)]
struct JsonLost {
    total: u64,
    percent: f64,
    source: String,
    per_cpu: BTreeMap<u32, u64>,
}

#[derive(Serialize)]
struct JsonRow {
    samples: u64,
    percent: f64,
    image: String,
    app: Option<String>,
    symbol: Option<String>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    inlined: bool,
    cpu: Option<u32>,
    tgid: Option<u32>,
    tid: Option<u32>,
    comm: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ns_tgid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    ns_tid: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cgroup: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    vma: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    location: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    inclusive: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    inclusive_percent: Option<f64>,
}

#[derive(Serialize)]
struct JsonReport<'a> {
    event: &'a str,
    frequency: Option<u64>,
    period: Option<u64>,
    call_graph: Option<CallGraphMode>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cgroups: Option<&'static str>,
    /// `"ns"` in an off-CPU report: every figure is nanoseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    unit: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    off_cpu: Option<crate::options::OffCpuMode>,
    #[serde(skip_serializing_if = "Option::is_none")]
    off_cpu_accounting: Option<OffCpuCounts>,
    total_samples: u64,
    samples_read: u64,
    samples_unreadable: Option<u64>,
    lost: JsonLost,
    #[serde(skip_serializing_if = "StackCounts::is_zero")]
    stacks: StackCounts,
    start_time: String,
    start_time_unix_ns: u64,
    duration_s: f64,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    window: bool,
    sessions: &'a [SessionInfo],
    bad_chunks: &'a [BadChunkInfo],
    warnings: &'a [String],
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    unnamed_binaries: &'a [UnnamedBinary],
    /// What the debuginfod client did (reports that had one).
    #[serde(skip_serializing_if = "Option::is_none")]
    debuginfod: Option<&'a crate::DebuginfodOutcome>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rows: Option<Vec<JsonRow>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    timeline: Option<&'a Timeline>,
    #[serde(skip_serializing_if = "Option::is_none")]
    callgraph: Option<&'a CallGraph>,
    #[serde(skip_serializing_if = "Option::is_none")]
    annotations: Option<Vec<JsonAnnotation<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    annotation_rows: Option<Vec<super::annotate::JsonAnnotationRow>>,
}

/// An annotated function, without its lines (those are `annotation_rows`).
#[derive(Serialize)]
struct JsonAnnotation<'a> {
    function: &'a str,
    image: &'a str,
    path: Option<&'a str>,
    start: String,
    size: u64,
    samples: u64,
    percent: f64,
    notes: &'a [String],
}

fn round4(p: f64) -> f64 {
    (p * 1e4).round() / 1e4
}

/// The rows as flat records, in print order: with `--separate=cpu`, one
/// per (row, CPU) that has samples; a nested parent row comes before its
/// dependents, which carry the parent as their `app`.
pub fn flat_rows(report: &Report) -> Vec<(Row, Option<u32>)> {
    let mut out = Vec::new();
    let mut push = |r: &Row, app: Option<&Arc<str>>| {
        for (i, col) in report.columns.iter().enumerate() {
            // A range of CPUs (text only) has no one CPU to name.
            let cpu = match col {
                Column::All | Column::Cpus(..) => None,
                Column::Cpu(c) => Some(*c),
            };
            let incl = r.inclusive_samples().get(i).copied().unwrap_or(0);
            if cpu.is_some() && r.samples[i] == 0 && incl == 0 {
                continue;
            }
            let mut flat = r.clone();
            if let Some(e) = flat.extra.as_mut() {
                e.children = Vec::new();
            }
            flat.samples = PerColumn::from_elem(r.samples[i], 1);
            flat.percent = PerColumn::from_elem(r.percent[i], 1);
            flat.total = r.samples[i];
            if let Some(all) = r.inclusive.as_ref().filter(|_| report.shown.inclusive) {
                flat.inclusive = Some(Box::new(Inclusive {
                    samples: vec![all.samples[i]],
                    percent: vec![all.percent[i]],
                    total: all.samples[i],
                    total_percent: all.percent[i],
                }));
            }
            if let Some(a) = app {
                flat.extra_mut().app = Some(a.clone());
            }
            out.push((flat, cpu));
        }
    };
    for r in &report.rows {
        push(r, None);
        for c in r.children() {
            push(c, Some(&r.image));
        }
    }
    out
}

/// The JSON report: one object (see the crate docs for its keys).
pub fn write_json(report: &Report, w: &mut dyn Write) -> io::Result<()> {
    let h = &report.header;
    let rows = report.timeline.is_none().then(|| {
        flat_rows(report)
            .into_iter()
            .map(|(r, cpu)| JsonRow {
                tgid: r.tgid(),
                tid: r.tid(),
                comm: r.comm().map(str::to_owned),
                ns_tgid: r.ns_tgid(),
                ns_tid: r.ns_tid(),
                inclusive: report.shown.inclusive.then(|| r.inclusive_total()),
                inclusive_percent: report
                    .shown
                    .inclusive
                    .then(|| round4(r.inclusive_total_percent())),
                samples: r.samples[0],
                percent: round4(r.percent[0]),
                image: r.image.to_string(),
                app: r.app().map(|a| a.to_string()),
                inlined: r.inlined,
                cpu,
                cgroup: r.cgroup().map(str::to_owned),
                vma: report
                    .shown
                    .address
                    .then(|| r.vma.map(|v| format!("{v:#x}")))
                    .flatten(),
                location: if report.shown.location {
                    r.location().map(str::to_owned)
                } else {
                    None
                },
                // Last: the name is moved out of the row.
                symbol: r.symbol,
            })
            .collect()
    });
    let j = JsonReport {
        event: &h.event,
        frequency: h.frequency,
        period: h.period,
        call_graph: h.call_graph,
        cgroups: h.cgroups,
        unit: h.off_cpu.map(|_| "ns"),
        off_cpu: h.off_cpu,
        off_cpu_accounting: h.off_cpu_accounting,
        total_samples: h.total_samples,
        samples_read: h.samples_read,
        samples_unreadable: h.samples_unreadable,
        lost: JsonLost {
            total: h.lost_total,
            percent: round4(h.lost_percent),
            source: h.lost_source.clone(),
            per_cpu: h.cpus.iter().map(|c| (c.cpu, c.lost)).collect(),
        },
        stacks: h.stacks,
        start_time: format_utc(h.start_unix_ns),
        start_time_unix_ns: h.start_unix_ns,
        duration_s: (h.duration_ns as f64 / 1e6).round() / 1e3,
        window: h.window,
        sessions: &h.sessions,
        bad_chunks: &h.bad_chunks,
        warnings: &report.warnings,
        unnamed_binaries: &report.unnamed_binaries,
        debuginfod: h.debuginfod.as_ref(),
        rows,
        timeline: report.timeline.as_ref(),
        callgraph: report.callgraph.as_ref(),
        annotations: report.annotations.as_ref().map(|list| {
            list.iter()
                .map(|a| {
                    let n: u64 = a.samples.iter().sum();
                    JsonAnnotation {
                        function: &a.symbol,
                        image: &a.image,
                        path: a.path.as_deref(),
                        start: format!("{:#x}", a.start),
                        size: a.size,
                        samples: n,
                        percent: round4(crate::aggregate::summary::percent(n, h.total_samples)),
                        notes: &a.notes,
                    }
                })
                .collect()
        }),
        annotation_rows: report
            .annotations
            .as_ref()
            .map(|list| super::annotate::json_rows(report, list)),
    };
    serde_json::to_writer_pretty(&mut *w, &j).map_err(io::Error::from)?;
    writeln!(w)
}
