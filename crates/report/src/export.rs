//! Folded stacks (`--format collapsed`) and flame graphs (`--format
//! flamegraph`, drawn by inferno) from a report's [`Stacks`].
//!
//! A folded line is Brendan Gregg's format, as `stackcollapse-perf.pl`
//! writes it: the process name, then the frames from the outermost caller
//! to the sampled function, separated by `;`, a space, and the samples:
//!
//! ```text
//! callgraph;_start;__libc_start_main;main;b;c;d 6012
//! ```
//!
//! A frame is its function's name; a frame in a binary whose symbols could
//! not be read is `[binary]` (e.g. `[libc.so.6]`), and a caller the
//! frame-pointer walk could not place is `[unknown]`. A frame inside
//! inlined code becomes its inline chain, outermost first, each inlined
//! function named `NAME (inlined)` as perf does:
//!
//! ```text
//! inline;main;inline::caller_once;inline::dispatch (inlined);inline::hot;inline::helper (inlined) 812
//! ```
//!
//! In an off-CPU report (`--off-cpu`) the count is the line's off-CPU time
//! in microseconds (to the nearest; a line under half a microsecond is
//! left out), and the flame graph is titled "Off-CPU Time Flame Graph"
//! with `us` as its count.

use std::io::{self, Write};

use crate::model::*;

fn no_stacks() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        "this output needs the report's call stacks (ReportOptions::stacks)",
    )
}

/// A location's text: its function, or `[binary]` when it has no name,
/// after its inlined functions (outermost first, `;`-separated); a name
/// never holds a `;` or a line break (they would split the line).
fn frame(st: &Stacks, loc: u32) -> String {
    let mut out = String::new();
    for f in st.frames_of(loc).rev() {
        let f = &st.functions[f as usize];
        let text = match &f.symbol {
            Symbol::NoSymbols => format!("[{}]", st.mappings[f.mapping as usize].name),
            _ => f.display_name(),
        };
        if !out.is_empty() {
            out.push(';');
        }
        out.push_str(&text.replace(';', ":").replace(['\n', '\r'], " "));
    }
    out
}

/// The folded lines of `column` (all columns with `None`), merged and in
/// byte order (as `stackcollapse` sorts them), with their counts (in an
/// off-CPU report, microseconds).
pub fn collapsed_lines(report: &Report, column: Option<usize>) -> io::Result<Vec<(String, u64)>> {
    let st = report.stacks.as_ref().ok_or_else(no_stacks)?;
    let mut names: Vec<Option<String>> = vec![None; st.locations.len()];
    // Merged in a hash map, sorted once at the end: lines are long and
    // share their beginnings (process;main;...), so each comparison of an
    // ordered map's lookup reads most of two lines.
    let mut lines: crate::hash::FxHashMap<String, u64> = Default::default();
    let mut line = String::new();
    for s in &st.samples {
        if column.is_some_and(|c| c != s.column) {
            continue;
        }
        line.clear();
        if s.process.contains([';', '\n', '\r', ' ']) {
            line.push_str(&s.process.replace(';', ":").replace(['\n', '\r', ' '], "_"));
        } else {
            line.push_str(&s.process);
        }
        for &loc in s.locations.iter().rev() {
            line.push(';');
            let name = names[loc as usize].get_or_insert_with(|| frame(st, loc));
            line.push_str(name);
        }
        match lines.get_mut(line.as_str()) {
            Some(n) => *n = n.saturating_add(s.count),
            None => {
                lines.insert(line.clone(), s.count);
            }
        }
    }
    let mut lines: Vec<(String, u64)> = lines.into_iter().collect();
    lines.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    if report.header.off_cpu.is_some() {
        return Ok(lines
            .into_iter()
            .map(|(l, ns)| (l, ns / 1000 + u64::from(ns % 1000 >= 500)))
            .filter(|&(_, us)| us > 0)
            .collect());
    }
    Ok(lines)
}

/// Writes the folded stacks of `column` (all columns with `None`).
pub fn write_collapsed(
    report: &Report,
    column: Option<usize>,
    w: &mut dyn Write,
) -> io::Result<()> {
    for (line, n) in collapsed_lines(report, column)? {
        writeln!(w, "{line} {n}")?;
    }
    Ok(())
}

/// Writes a flame graph (SVG) of `column` (all columns with `None`):
/// inferno's drawing of the folded stacks, titled with the event and the
/// column, with deterministic colours (a function keeps its colour across
/// runs and graphs).
pub fn write_flamegraph(
    report: &Report,
    column: Option<usize>,
    w: &mut dyn Write,
) -> io::Result<()> {
    let lines = collapsed_lines(report, column)?;
    let text: Vec<String> = lines.iter().map(|(l, n)| format!("{l} {n}")).collect();
    let h = &report.header;
    let what = match column.and_then(|c| report.columns.get(c)) {
        Some(Column::Cpu(cpu)) => format!(" on CPU {cpu}"),
        Some(Column::Cpus(a, b)) => format!(" on CPUs {a}-{b}"),
        _ => String::new(),
    };
    let samples: u64 = lines.iter().fold(0, |a, (_, n)| a.saturating_add(*n));
    let target = h
        .sessions
        .first()
        .map(|s| format!(", {}", s.target))
        .unwrap_or_default();
    let mut opts = inferno::flamegraph::Options::default();
    match h.off_cpu {
        Some(mode) => {
            opts.title = format!("Off-CPU Time Flame Graph{what}");
            opts.subtitle = Some(format!(
                "{}: {} ms{target}",
                crate::render::off_cpu_what(mode),
                crate::render::ms(samples.saturating_mul(1000))
            ));
            opts.count_name = "us".to_owned();
        }
        None => {
            opts.title = format!("profkit: {}{what}", h.event);
            opts.subtitle = Some(format!("{samples} samples{target}"));
            opts.count_name = "samples".to_owned();
        }
    }
    opts.hash = true;
    opts.deterministic = true;
    if text.is_empty() {
        // inferno refuses an empty input.
        return write_empty_svg(w);
    }
    inferno::flamegraph::from_lines(&mut opts, text.iter().map(String::as_str), w)
}

fn write_empty_svg(w: &mut dyn Write) -> io::Result<()> {
    writeln!(
        w,
        r#"<?xml version="1.0" standalone="no"?><svg version="1.1" width="1200" height="60" xmlns="http://www.w3.org/2000/svg"><text x="600" y="30" text-anchor="middle">no samples</text></svg>"#
    )
}
