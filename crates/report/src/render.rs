//! Renderers: text (opreport's layout), JSON (one object) and CSV. Each
//! writes to any `impl Write` and only formats a [`Report`]; a broken pipe
//! comes back as the `io::Error` it is, for the caller to treat as success.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{self, Write};

use serde::Serialize;

use crate::model::*;

/// Text of a row or frame whose address is in no symbol of a readable
/// binary, or in a binary that could not be read.
pub const NO_SYMBOLS: &str = "(no symbols)";
/// Text of a frame in no known binary.
pub const UNKNOWN_SYMBOL: &str = "[unknown]";

impl std::fmt::Display for Symbol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Symbol::Named(name) => name,
            Symbol::NoSymbols => NO_SYMBOLS,
            Symbol::Unknown => UNKNOWN_SYMBOL,
        })
    }
}

/// Output formats.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Format {
    /// opreport-style columns.
    #[default]
    Text,
    /// One JSON object.
    Json,
    /// Comma-separated values with a header line.
    Csv,
    /// Brendan Gregg's folded stacks: one line per distinct stack, frames
    /// outermost first separated by `;`, then a space and the count.
    Collapsed,
    /// A flame graph (SVG, drawn by inferno).
    Flamegraph,
    /// pprof's profile.proto, gzip-compressed.
    Pprof,
}

impl Format {
    /// The values `--format` accepts.
    pub const ALLOWED: &'static str = "one of text, json, csv, collapsed, flamegraph, pprof";

    /// True for the formats drawn from call stacks (they need
    /// [`crate::ReportOptions::stacks`]).
    pub fn needs_stacks(self) -> bool {
        matches!(self, Format::Collapsed | Format::Flamegraph | Format::Pprof)
    }

    /// True for output that is not text (pprof's gzip).
    pub fn is_binary(self) -> bool {
        self == Format::Pprof
    }
}

impl std::str::FromStr for Format {
    type Err = crate::Error;
    fn from_str(s: &str) -> crate::Result<Self> {
        Ok(match s {
            "text" => Format::Text,
            "json" => Format::Json,
            "csv" => Format::Csv,
            "collapsed" | "folded" => Format::Collapsed,
            "flamegraph" | "svg" => Format::Flamegraph,
            "pprof" => Format::Pprof,
            _ => {
                return Err(crate::Error::BadValue {
                    option: "--format",
                    value: s.to_owned(),
                    allowed: Self::ALLOWED.to_owned(),
                })
            }
        })
    }
}

/// Writes `report` in `format`. The stack formats need a report built
/// with [`crate::ReportOptions::stacks`] (else an `InvalidInput` error);
/// a flame graph is of all columns together (see [`write_flamegraph`] for
/// one per CPU).
pub fn render(report: &Report, format: Format, w: &mut dyn Write) -> io::Result<()> {
    match format {
        Format::Text => write_text(report, w),
        Format::Json => write_json(report, w),
        Format::Csv => write_csv(report, w),
        Format::Collapsed => crate::export::write_collapsed(report, None, w),
        Format::Flamegraph => crate::export::write_flamegraph(report, None, w),
        Format::Pprof => crate::pprof::write_pprof(report, w),
    }
}

/// `2026-11-22 20:29:55 UTC` from ns since the Unix epoch.
pub fn format_utc(unix_ns: u64) -> String {
    let secs = unix_ns / 1_000_000_000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

fn rate(h: &Header) -> String {
    match (h.frequency, h.period) {
        (Some(f), _) => format!("sampled at {f} Hz per CPU"),
        (None, Some(p)) => format!("one sample every {p} events"),
        (None, None) => "rate unknown".to_owned(),
    }
}

fn header_lines(h: &Header) -> String {
    let mut s = String::new();
    for info in &h.sessions {
        let rounds = match info.rounds {
            Some(r) => format!("{} chunks of {r} rounds read", info.chunks),
            None => format!("{} chunks read", info.chunks),
        };
        let _ = writeln!(
            s,
            "Session:  {} ({}; {}; {rounds})",
            info.path, info.state, info.target
        );
    }
    let _ = writeln!(s, "Event:    {}, {}", h.event, rate(h));
    let _ = writeln!(
        s,
        "Time:     {}, {:.3} s",
        format_utc(h.start_unix_ns),
        h.duration_ns as f64 / 1e9
    );
    let unreadable = match h.samples_unreadable {
        Some(0) => String::new(),
        Some(n) => format!("; {n} in unreadable chunks"),
        None if h.bad_chunks.iter().any(|b| !b.torn) => {
            "; an unknown number in unreadable chunks".to_owned()
        }
        None => String::new(),
    };
    let _ = writeln!(
        s,
        "Samples:  {} in this report, {} read{unreadable}",
        h.total_samples, h.samples_read
    );
    let per_cpu: Vec<String> = h
        .cpus
        .iter()
        .map(|c| format!("cpu{} {} ({:.3} %)", c.cpu, c.lost, c.percent))
        .collect();
    let _ = writeln!(
        s,
        "Lost:     {} ({:.3} %, from the {}): {}",
        h.lost_total,
        h.lost_percent,
        h.lost_source,
        if per_cpu.is_empty() {
            "no CPU".to_owned()
        } else {
            per_cpu.join(", ")
        }
    );
    for c in &h.cpus {
        if c.percent > 0.01 {
            let _ = writeln!(
                s,
                "warning: cpu{} lost {:.3} % of its samples ({} of {}): the profile of this CPU \
                 is incomplete; see --timeline for when",
                c.cpu,
                c.percent,
                c.lost,
                c.samples + c.lost
            );
        }
    }
    for b in &h.bad_chunks {
        let what = if b.torn { "torn chunk" } else { "bad chunk" };
        let _ = writeln!(
            s,
            "{what}: {} chunk {} at byte {} ({} bytes): {}",
            b.session, b.index, b.offset, b.len, b.reason
        );
    }
    s
}

/// A text table column.
struct Col {
    head: String,
    right: bool,
    min: usize,
    cells: Vec<String>,
}

impl Col {
    fn new(head: &str, right: bool) -> Col {
        Col {
            head: head.to_owned(),
            right,
            min: 0,
            cells: Vec::new(),
        }
    }
}

/// Formats a table: an optional line of labels over column groups, the
/// header line, then one line per row.
fn format_table(
    indent: &str,
    above: &[(usize, String)],
    cols: &[Col],
) -> (Vec<String>, Vec<String>) {
    let widths: Vec<usize> = cols
        .iter()
        .map(|c| {
            c.cells
                .iter()
                .map(|s| s.chars().count())
                .chain([c.head.chars().count(), c.min])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let line = |cells: &mut dyn Iterator<Item = (usize, &str)>| -> String {
        let mut s = String::from(indent);
        let n = cols.len();
        for (i, cell) in cells {
            let width = widths[i];
            let last = i + 1 == n;
            if cols[i].right {
                let _ = write!(s, "{cell:>width$}");
            } else if last {
                s.push_str(cell);
            } else {
                let _ = write!(s, "{cell:<width$}");
            }
            if !last {
                s.push_str("  ");
            }
        }
        s.truncate(s.trim_end().len());
        s
    };
    let mut head = Vec::new();
    if !above.is_empty() {
        // Labels over groups of columns (cpu:N over each samples/% pair).
        let mut s = String::from(indent);
        let mut pos = 0usize;
        let starts: Vec<usize> = widths
            .iter()
            .scan(0usize, |acc, w| {
                let at = *acc;
                *acc += w + 2;
                Some(at)
            })
            .collect();
        for (col, label) in above {
            let at = starts[*col];
            if at > pos {
                s.push_str(&" ".repeat(at - pos));
                pos = at;
            }
            s.push_str(label);
            pos += label.chars().count();
        }
        head.push(s.trim_end().to_owned());
    }
    head.push(line(
        &mut cols.iter().enumerate().map(|(i, c)| (i, c.head.as_str())),
    ));
    let rows = cols.first().map_or(0, |c| c.cells.len());
    let body = (0..rows)
        .map(|r| {
            line(
                &mut cols
                    .iter()
                    .enumerate()
                    .map(|(i, c)| (i, c.cells[r].as_str())),
            )
        })
        .collect();
    (head, body)
}

fn write_lines(w: &mut dyn Write, lines: &[String]) -> io::Result<()> {
    for l in lines {
        writeln!(w, "{l}")?;
    }
    Ok(())
}

fn pct(p: f64) -> String {
    format!("{p:.4}")
}

/// The columns of one table of rows.
fn table(report: &Report, rows: &[Row], image_head: &str) -> (Vec<Col>, Vec<(usize, String)>) {
    let l = report.shown;
    let mut cols = Vec::new();
    let mut labels = Vec::new();
    if l.address {
        let mut c = Col::new("vma", false);
        c.cells = rows
            .iter()
            .map(|r| {
                r.vma
                    .map_or_else(|| "-".to_owned(), |v| format!("{v:016x}"))
            })
            .collect();
        cols.push(c);
    }
    for (i, column) in report.columns.iter().enumerate() {
        if let Column::Cpu(cpu) = column {
            labels.push((cols.len(), format!("cpu:{cpu}")));
        }
        let mut s = Col::new("samples", true);
        let mut p = Col::new("%", true);
        p.min = "100.0000".len();
        for r in rows {
            s.cells.push(r.samples[i].to_string());
            p.cells.push(pct(r.percent[i]));
        }
        cols.push(s);
        cols.push(p);
        if l.inclusive {
            let mut s = Col::new("inclusive", true);
            let mut p = Col::new("%", true);
            p.min = "100.0000".len();
            for r in rows {
                s.cells
                    .push(r.inclusive.get(i).copied().unwrap_or(0).to_string());
                p.cells
                    .push(pct(r.inclusive_percent.get(i).copied().unwrap_or(0.0)));
            }
            cols.push(s);
            cols.push(p);
        }
    }
    if l.thread {
        let mut g = Col::new("tgid", true);
        let mut t = Col::new("tid", true);
        let mut c = Col::new("command", false);
        for r in rows {
            g.cells
                .push(r.tgid.map_or_else(String::new, |v| v.to_string()));
            t.cells
                .push(r.tid.map_or_else(String::new, |v| v.to_string()));
            c.cells.push(r.comm.clone().unwrap_or_default());
        }
        cols.extend([g, t, c]);
    }
    if l.location {
        let mut c = Col::new("linenr info", false);
        c.cells = rows
            .iter()
            .map(|r| r.location.clone().unwrap_or_else(|| "(no location)".into()))
            .collect();
        cols.push(c);
    }
    if l.app {
        let mut c = Col::new("app name", false);
        c.cells = rows
            .iter()
            .map(|r| r.app.clone().unwrap_or_default())
            .collect();
        cols.push(c);
    }
    let mut c = Col::new(image_head, false);
    c.cells = rows.iter().map(|r| r.image.clone()).collect();
    cols.push(c);
    if l.symbols {
        let mut c = Col::new("symbol name", false);
        c.cells = rows
            .iter()
            .map(|r| r.symbol.clone().unwrap_or_default())
            .collect();
        cols.push(c);
    }
    (cols, labels)
}

/// The text report: header, then opreport's table (or the timeline).
pub fn write_text(report: &Report, w: &mut dyn Write) -> io::Result<()> {
    w.write_all(header_lines(&report.header).as_bytes())?;
    writeln!(w)?;
    if let Some(t) = &report.timeline {
        return write_timeline_text(t, w);
    }
    if let Some(cg) = &report.callgraph {
        return write_callgraph_text(cg, w);
    }
    if report.rows.is_empty() {
        writeln!(w, "(no samples match)")?;
        return Ok(());
    }
    let image_head = if report.shown.symbols {
        "image name"
    } else {
        "image"
    };
    if report.shown.nested {
        // opreport's layout: each application, then its images indented.
        let (cols, labels) = table(report, &report.rows, "application");
        let (head, body) = format_table("", &labels, &cols);
        write_lines(w, &head)?;
        for (parent, line) in report.rows.iter().zip(&body) {
            writeln!(w, "{line}")?;
            let (cols, labels) = table(report, &parent.children, image_head);
            let (head, body) = format_table("        ", &labels, &cols);
            write_lines(w, &head[head.len() - 1..])?;
            write_lines(w, &body)?;
        }
    } else {
        let (cols, labels) = table(report, &report.rows, image_head);
        let (head, body) = format_table("", &labels, &cols);
        write_lines(w, &head)?;
        write_lines(w, &body)?;
    }
    if report.rows_below_threshold > 0 {
        writeln!(
            w,
            "({} rows below the threshold not shown)",
            report.rows_below_threshold
        )?;
    }
    Ok(())
}

/// opreport's call-graph layout: per function a block of its callers
/// (indented), the function itself, then its callees (indented, `[self]`
/// among them). Caller and callee percentages are of the function's
/// inclusive samples; the function's own line has its share of all
/// samples (self, then inclusive).
fn write_callgraph_text(cg: &CallGraph, w: &mut dyn Write) -> io::Result<()> {
    if cg.entries.is_empty() {
        writeln!(w, "(no samples match)")?;
        return Ok(());
    }
    // One table so columns line up across blocks; indentation is part of
    // the first cell.
    let mut cols = vec![
        Col::new("samples", false),
        Col::new("%", true),
        Col::new("inclusive", true),
        Col::new("%", true),
        Col::new("image name", false),
        Col::new("symbol name", false),
    ];
    cols[1].min = "100.0000".len();
    let mut kinds = Vec::new();
    let mut push = |cols: &mut Vec<Col>, cells: [String; 6], rule: bool| {
        for (c, v) in cols.iter_mut().zip(cells) {
            c.cells.push(v);
        }
        kinds.push(rule);
    };
    for e in &cg.entries {
        push(&mut cols, Default::default(), true);
        for a in &e.callers {
            push(
                &mut cols,
                [
                    format!("  {}", a.samples),
                    pct(a.percent),
                    String::new(),
                    String::new(),
                    a.image.clone(),
                    a.symbol.clone(),
                ],
                false,
            );
        }
        push(
            &mut cols,
            [
                e.self_samples.to_string(),
                pct(e.self_percent),
                e.total.to_string(),
                pct(e.total_percent),
                e.image.clone(),
                e.symbol.clone(),
            ],
            false,
        );
        let mut callees: Vec<(u64, f64, String, String)> = e
            .callees
            .iter()
            .map(|a| (a.samples, a.percent, a.image.clone(), a.symbol.clone()))
            .collect();
        if e.self_samples > 0 {
            let p = if e.total == 0 {
                0.0
            } else {
                e.self_samples as f64 * 100.0 / e.total as f64
            };
            callees.push((
                e.self_samples,
                p,
                e.image.clone(),
                format!("{} [self]", e.symbol),
            ));
            callees.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.3.cmp(&b.3)));
        }
        for (n, p, image, symbol) in callees {
            push(
                &mut cols,
                [
                    format!("  {n}"),
                    pct(p),
                    String::new(),
                    String::new(),
                    image,
                    symbol,
                ],
                false,
            );
        }
    }
    let (head, body) = format_table("", &[], &cols);
    write_lines(w, &head)?;
    let rule = "-".repeat(79);
    for (line, is_rule) in body.iter().zip(kinds) {
        if is_rule {
            writeln!(w, "{rule}")?;
        } else {
            writeln!(w, "{line}")?;
        }
    }
    writeln!(w, "{rule}")?;
    if cg.below_threshold > 0 {
        writeln!(
            w,
            "({} functions below the threshold not shown)",
            cg.below_threshold
        )?;
    }
    Ok(())
}

fn rounds_label(l: &TimelineLine) -> String {
    if l.first_round == l.last_round {
        l.first_round.to_string()
    } else {
        format!("{}-{}", l.first_round, l.last_round)
    }
}

fn write_timeline_text(t: &Timeline, w: &mut dyn Write) -> io::Result<()> {
    let per = if t.rounds_per_line == 1 {
        "one sync round".to_owned()
    } else {
        format!("{} sync rounds", t.rounds_per_line)
    };
    writeln!(w, "Timeline: samples and lost per CPU, {per} per line")?;
    for s in &t.sessions {
        if t.sessions.len() > 1 {
            writeln!(w, "\nSession {}", s.session)?;
        }
        let mut cols = vec![Col::new("round", true), Col::new("time (s)", true)];
        for cpu in &t.cpus {
            cols.push(Col::new(&format!("cpu{cpu} samples"), true));
            cols.push(Col::new(&format!("cpu{cpu} lost"), true));
        }
        cols.push(Col::new("note", false));
        for l in &s.lines {
            cols[0].cells.push(rounds_label(l));
            cols[1].cells.push(format!("{:.3}", l.time_s));
            for (i, _) in t.cpus.iter().enumerate() {
                cols[2 + 2 * i].cells.push(l.samples[i].to_string());
                cols[3 + 2 * i].cells.push(l.lost[i].to_string());
            }
            let note = if l.unreadable_chunks.is_empty() {
                String::new()
            } else {
                let list: Vec<String> = l.unreadable_chunks.iter().map(|c| c.to_string()).collect();
                format!("unreadable chunk {}", list.join(", "))
            };
            let n = cols.len();
            cols[n - 1].cells.push(note);
        }
        let (head, body) = format_table("", &[], &cols);
        write_lines(w, &head)?;
        write_lines(w, &body)?;
    }
    Ok(())
}

// ---------------------------------------------------------------- JSON

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
    cpu: Option<u32>,
    tgid: Option<u32>,
    tid: Option<u32>,
    comm: Option<String>,
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
    total_samples: u64,
    samples_read: u64,
    samples_unreadable: Option<u64>,
    lost: JsonLost,
    start_time: String,
    start_time_unix_ns: u64,
    duration_s: f64,
    sessions: &'a [SessionInfo],
    bad_chunks: &'a [BadChunkInfo],
    warnings: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    rows: Option<Vec<JsonRow>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    timeline: Option<&'a Timeline>,
    #[serde(skip_serializing_if = "Option::is_none")]
    callgraph: Option<&'a CallGraph>,
}

fn round4(p: f64) -> f64 {
    (p * 1e4).round() / 1e4
}

/// The rows as flat records, in print order: with `--separate=cpu`, one
/// per (row, CPU) that has samples; a nested parent row comes before its
/// dependents, which carry the parent as their `app`.
pub fn flat_rows(report: &Report) -> Vec<(Row, Option<u32>)> {
    let mut out = Vec::new();
    let mut push = |r: &Row, app: Option<&str>| {
        for (i, col) in report.columns.iter().enumerate() {
            let cpu = match col {
                Column::All => None,
                Column::Cpu(c) => Some(*c),
            };
            let incl = r.inclusive.get(i).copied().unwrap_or(0);
            if cpu.is_some() && r.samples[i] == 0 && incl == 0 {
                continue;
            }
            let mut flat = r.clone();
            flat.children = Vec::new();
            flat.samples = vec![r.samples[i]];
            flat.percent = vec![r.percent[i]];
            flat.total = r.samples[i];
            if report.shown.inclusive {
                flat.inclusive = vec![r.inclusive[i]];
                flat.inclusive_percent = vec![r.inclusive_percent[i]];
                flat.inclusive_total = r.inclusive[i];
                flat.inclusive_total_percent = r.inclusive_percent[i];
            }
            if let Some(a) = app {
                flat.app = Some(a.to_owned());
            }
            out.push((flat, cpu));
        }
    };
    for r in &report.rows {
        push(r, None);
        for c in &r.children {
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
                samples: r.samples[0],
                percent: round4(r.percent[0]),
                image: r.image,
                app: r.app,
                symbol: r.symbol,
                cpu,
                tgid: r.tgid,
                tid: r.tid,
                comm: r.comm,
                vma: report
                    .shown
                    .address
                    .then(|| r.vma.map(|v| format!("{v:#x}")))
                    .flatten(),
                location: if report.shown.location {
                    r.location
                } else {
                    None
                },
                inclusive: report.shown.inclusive.then_some(r.inclusive_total),
                inclusive_percent: report
                    .shown
                    .inclusive
                    .then(|| round4(r.inclusive_total_percent)),
            })
            .collect()
    });
    let j = JsonReport {
        event: &h.event,
        frequency: h.frequency,
        period: h.period,
        total_samples: h.total_samples,
        samples_read: h.samples_read,
        samples_unreadable: h.samples_unreadable,
        lost: JsonLost {
            total: h.lost_total,
            percent: round4(h.lost_percent),
            source: h.lost_source.clone(),
            per_cpu: h.cpus.iter().map(|c| (c.cpu, c.lost)).collect(),
        },
        start_time: format_utc(h.start_unix_ns),
        start_time_unix_ns: h.start_unix_ns,
        duration_s: (h.duration_ns as f64 / 1e6).round() / 1e3,
        sessions: &h.sessions,
        bad_chunks: &h.bad_chunks,
        warnings: &report.warnings,
        rows,
        timeline: report.timeline.as_ref(),
        callgraph: report.callgraph.as_ref(),
    };
    serde_json::to_writer_pretty(&mut *w, &j).map_err(io::Error::from)?;
    writeln!(w)
}

// ---------------------------------------------------------------- CSV

/// A CSV field, quoted when it holds a comma, a quote or a line break
/// (RFC 4180).
pub(crate) fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}

/// The CSV report: a header line, then one line per flat row (as JSON), or
/// per (timeline line, CPU) with `--timeline`.
pub fn write_csv(report: &Report, w: &mut dyn Write) -> io::Result<()> {
    if let Some(t) = &report.timeline {
        writeln!(w, "session,first_round,last_round,time_s,cpu,samples,lost")?;
        for s in &t.sessions {
            for l in &s.lines {
                for (i, cpu) in t.cpus.iter().enumerate() {
                    writeln!(
                        w,
                        "{},{},{},{:.3},{cpu},{},{}",
                        csv_field(&s.session),
                        l.first_round,
                        l.last_round,
                        l.time_s,
                        l.samples[i],
                        l.lost[i]
                    )?;
                }
            }
        }
        return Ok(());
    }
    if let Some(cg) = &report.callgraph {
        writeln!(
            w,
            "function_image,function_symbol,relation,samples,percent,image,symbol"
        )?;
        for e in &cg.entries {
            let (fi, fs) = (csv_field(&e.image), csv_field(&e.symbol));
            let mut line = |rel: &str, n: u64, p: f64, image: &str, symbol: &str| {
                writeln!(
                    w,
                    "{fi},{fs},{rel},{n},{p:.4},{},{}",
                    csv_field(image),
                    csv_field(symbol)
                )
            };
            for a in &e.callers {
                line("caller", a.samples, a.percent, &a.image, &a.symbol)?;
            }
            line("self", e.self_samples, e.self_percent, &e.image, &e.symbol)?;
            line("total", e.total, e.total_percent, &e.image, &e.symbol)?;
            for a in &e.callees {
                line("callee", a.samples, a.percent, &a.image, &a.symbol)?;
            }
        }
        return Ok(());
    }
    let incl_head = if report.shown.inclusive {
        ",inclusive,inclusive_percent"
    } else {
        ""
    };
    writeln!(
        w,
        "samples,percent,cpu,tgid,tid,comm,app,image,symbol,vma,location{incl_head}"
    )?;
    let opt = |v: Option<u32>| v.map_or_else(String::new, |v| v.to_string());
    for (r, cpu) in flat_rows(report) {
        let incl = if report.shown.inclusive {
            format!(",{},{:.4}", r.inclusive_total, r.inclusive_total_percent)
        } else {
            String::new()
        };
        writeln!(
            w,
            "{},{:.4},{},{},{},{},{},{},{},{},{}{incl}",
            r.samples[0],
            r.percent[0],
            opt(cpu),
            opt(r.tgid),
            opt(r.tid),
            csv_field(r.comm.as_deref().unwrap_or("")),
            csv_field(r.app.as_deref().unwrap_or("")),
            csv_field(&r.image),
            csv_field(r.symbol.as_deref().unwrap_or("")),
            r.vma
                .filter(|_| report.shown.address)
                .map_or_else(String::new, |v| format!("{v:#x}")),
            csv_field(r.location.as_deref().unwrap_or("")),
        )?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_dates() {
        assert_eq!(format_utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(
            format_utc(1_795_379_395_837_827_650),
            "2026-11-22 20:29:55 UTC"
        );
        assert_eq!(
            format_utc(951_782_400 * 1_000_000_000),
            "2000-02-29 00:00:00 UTC"
        );
    }

    #[test]
    fn csv_quoting() {
        assert_eq!(csv_field("a,b"), "\"a,b\"");
        assert_eq!(csv_field("say \"x\""), "\"say \"\"x\"\"\"");
        assert_eq!(csv_field("plain"), "plain");
    }
}
