//! Flat reports and call graphs of a fleet store, computed by its server.

use std::collections::HashMap;
use std::sync::Arc;

use profkit_fleet::{Client, Cut, FrameTotal, Key, Query};

use super::{base_query, fleet_err, from_line, header, selected, FleetOptions};
use crate::model::{
    CallArc, CallEntry, CallGraph, Column, Inclusive, PerColumn, Report, Row, RowExtra,
    ShownColumns, ThreadColumns,
};
use crate::ReportOptions;

use crate::callgraph::pct;

/// A stack entry (`NAME\tFUNCTION`) as (image, symbol): an empty
/// function is [`crate::NO_SYMBOLS`] (`[unknown]` in a frame no binary
/// holds); an entry without a tab (another exporter's) is all symbol.
pub(super) fn entry_names(entry: &str) -> (&str, Option<&str>) {
    match entry.split_once('\t') {
        Some((image, "")) => (image, None),
        Some((image, function)) => (image, Some(function)),
        None => ("", Some(entry)),
    }
}

fn shown_symbol(entry: &str) -> (String, String) {
    let (image, function) = entry_names(entry);
    let symbol = match function {
        Some(f) => f.to_owned(),
        None if image == crate::UNKNOWN_SYMBOL => crate::UNKNOWN_SYMBOL.to_owned(),
        None => crate::NO_SYMBOLS.to_owned(),
    };
    (image.to_owned(), symbol)
}

/// The report of the fleet store behind `client`: the rows `opts` asks for
/// (`-l`: per binary and function, else per binary; threads, CPUs, hosts
/// as `fleet` says; inclusive samples with `--children`; the call graph
/// with `-c`), computed by the server.
///
/// # Errors
/// The server cannot be asked or answers wrongly ([`crate::Error::Fleet`]),
/// or the options ask for what a fleet report cannot give.
pub fn fleet_report(
    client: &Client,
    fleet: &FleetOptions,
    opts: &ReportOptions,
) -> crate::Result<Report> {
    let graph = opts.callgraph || opts.children;
    if graph && (fleet.per_host || fleet.cpus || fleet.threads || opts.separate.cgroup) {
        return Err(crate::Error::Fleet(
            "--callgraph and --children from a fleet store work per function: without \
             --separate (select hosts with --host, CPUs and threads with cpu:, tgid:, tid: specs)"
                .to_owned(),
        ));
    }
    let mut group = Vec::new();
    if fleet.per_host {
        group.push(Key::Host);
    }
    if fleet.cpus {
        group.push(Key::Cpu);
    }
    if fleet.threads {
        group.extend([Key::Pid, Key::Tid, Key::Comm]);
    }
    if opts.separate.cgroup {
        group.push(Key::Cgroup);
    }
    group.push(Key::Binary);
    let symbols = opts.symbols || graph;
    if symbols {
        group.push(Key::Function);
    }
    if graph {
        // The sampled frame's entry: what the call graph's totals are by.
        group.push(Key::Leaf);
    }
    let base = base_query(client, fleet, opts)?;
    let query = Query {
        group: group.clone(),
        ..base.clone()
    };
    let (total, totals) = selected(client, &base)?;
    let found = client.query(&query).map_err(fleet_err)?;
    // With --children every function's inclusive samples (threshold 0: a
    // row's cut is by its own inclusive share, below).
    let all_frames = if opts.children {
        let cut = Cut {
            by_inclusive: true,
            threshold: 0.0,
            total,
        };
        client.call_graph_frames(&base, &cut).map_err(fleet_err)?.0
    } else {
        Vec::new()
    };
    let inclusive: HashMap<&str, &FrameTotal> =
        all_frames.iter().map(|f| (f.frame.as_str(), f)).collect();
    let mut rows = Vec::with_capacity(found.len());
    let mut leaves_seen = std::collections::HashSet::new();
    for r in found {
        let at = |k: Key| {
            group
                .iter()
                .position(|g| *g == k)
                .map(|i| r.keys[i].clone())
        };
        let binary = at(Key::Binary).unwrap_or_default();
        let image = if opts.long_filenames {
            binary.clone()
        } else {
            crate::spec::base_name(&binary).to_owned()
        };
        let percent = pct(r.samples, total);
        let mut row = flat_row(image, r.samples, percent);
        let app = at(Key::Host).map(Arc::from);
        row.symbol = at(Key::Function).filter(|f| !f.is_empty());
        let thread = ThreadColumns {
            tgid: at(Key::Pid).and_then(|p| p.parse().ok()),
            tid: at(Key::Tid).and_then(|p| p.parse().ok()),
            comm: at(Key::Comm),
            ..ThreadColumns::default()
        };
        if thread != ThreadColumns::default() {
            row.thread = Some(Box::new(thread));
        }
        let cgroup = at(Key::Cgroup).map(|c| if c.is_empty() { "[none]".to_owned() } else { c });
        if app.is_some() || cgroup.is_some() {
            row.extra = Some(Box::new(RowExtra {
                app,
                cgroup,
                ..RowExtra::default()
            }));
        }
        if opts.children {
            let leaf = at(Key::Leaf).unwrap_or_default();
            let t = inclusive.get(leaf.as_str()).map_or(r.samples, |f| f.total);
            if !leaves_seen.insert(leaf) {
                // Two rows of one entry (two paths of one file name): the
                // entry's inclusive samples go to the first.
                set_inclusive(&mut row, 0, total);
            } else {
                set_inclusive(&mut row, t, total);
            }
        }
        rows.push(row);
    }
    if opts.children {
        // Functions seen only as callers get rows too, as locally.
        for f in &all_frames {
            if leaves_seen.contains(&f.frame) || !wanted(&f.frame, opts) {
                continue;
            }
            let (image, symbol) = shown_symbol(&f.frame);
            let mut row = flat_row(image, 0, 0.0);
            row.symbol = Some(symbol);
            set_inclusive(&mut row, f.total, total);
            rows.push(row);
        }
    }
    let mut below = 0usize;
    crate::build::rows::sort_and_cut(&mut rows, opts, opts.children, &mut below);
    let callgraph = if opts.callgraph {
        Some(call_graph(client, &base, total, opts)?)
    } else {
        None
    };
    Ok(Report {
        header: header(total, &totals),
        columns: vec![Column::All],
        shown: ShownColumns {
            symbols,
            app: fleet.per_host,
            thread: fleet.threads,
            cgroup: opts.separate.cgroup,
            inclusive: opts.children,
            ..ShownColumns::default()
        },
        rows,
        rows_below_threshold: below,
        timeline: None,
        warnings: vec![from_line(client, &totals)],
        unnamed_binaries: Vec::new(),
        callgraph,
        stacks: None,
        annotations: None,
    })
}

/// Whether a function seen only as a caller passes the image specs (its
/// entry has the binary's shown name only).
fn wanted(entry: &str, opts: &ReportOptions) -> bool {
    opts.spec.wants_image(entry_names(entry).0, None)
}

fn flat_row(image: String, samples: u64, percent: f64) -> Row {
    Row {
        samples: PerColumn::from_elem(samples, 1),
        percent: PerColumn::from_elem(percent, 1),
        total: samples,
        total_percent: percent,
        ..Row::of_image(image)
    }
}

fn set_inclusive(row: &mut Row, n: u64, total: u64) {
    row.inclusive = Some(Box::new(Inclusive {
        samples: vec![n],
        percent: vec![pct(n, total)],
        total: n,
        total_percent: pct(n, total),
    }));
}

/// The caller/callee blocks, computed by the server: the functions the
/// threshold keeps (by self samples, or inclusive with `--children`), and
/// their arcs.
fn call_graph(
    client: &Client,
    base: &Query,
    total: u64,
    opts: &ReportOptions,
) -> crate::Result<CallGraph> {
    let cut = Cut {
        by_inclusive: opts.children,
        threshold: opts.threshold,
        total,
    };
    let (frames, below) = client.call_graph_frames(base, &cut).map_err(fleet_err)?;
    let names: Vec<String> = frames.iter().map(|f| f.frame.clone()).collect();
    let profkit_fleet::Arcs { callers, callees } =
        client.call_graph_arcs(base, &names).map_err(fleet_err)?;
    let mut arcs_in: HashMap<String, Vec<(String, u64)>> = HashMap::new();
    for (f, c, n) in callers {
        arcs_in.entry(f).or_default().push((c, n));
    }
    let mut arcs_out: HashMap<String, Vec<(String, u64)>> = HashMap::new();
    for (f, c, n) in callees {
        arcs_out.entry(f).or_default().push((c, n));
    }
    let arcs = |list: Option<Vec<(String, u64)>>, of: u64| -> Vec<CallArc> {
        let mut v: Vec<CallArc> = list
            .unwrap_or_default()
            .into_iter()
            .map(|(e, n)| {
                let (image, symbol) = shown_symbol(&e);
                CallArc {
                    image,
                    symbol,
                    inlined: false,
                    samples: n,
                    percent: pct(n, of),
                }
            })
            .collect();
        crate::callgraph::sort_arcs(&mut v);
        v
    };
    let mut entries: Vec<CallEntry> = frames
        .into_iter()
        .map(|f| {
            let (image, symbol) = shown_symbol(&f.frame);
            CallEntry {
                image,
                symbol,
                inlined: false,
                self_samples: f.self_samples,
                self_percent: pct(f.self_samples, total),
                total: f.total,
                total_percent: pct(f.total, total),
                callers: arcs(arcs_in.remove(&f.frame), f.total),
                callees: arcs(arcs_out.remove(&f.frame), f.total),
            }
        })
        .collect();
    crate::callgraph::sort_entries(&mut entries, opts.children);
    Ok(CallGraph {
        entries,
        below_threshold: usize::try_from(below).unwrap_or(usize::MAX),
        by_inclusive: opts.children,
    })
}
