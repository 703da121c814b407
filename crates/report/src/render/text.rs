//! The text report: opreport's header, columns, call-graph blocks and timeline.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io::{self, Write};

use super::*;
use crate::model::*;

fn rate(h: &Header) -> String {
    match (h.frequency, h.period) {
        (Some(f), _) => format!("sampled at {f} Hz per CPU"),
        (None, Some(p)) => format!("one sample every {p} events"),
        (None, None) => "rate unknown".to_owned(),
    }
}

/// "parts 4–9 of a rotated session; parts 1–3 were deleted (retention)",
/// for a session read from parts.
fn parts_line(info: &SessionInfo) -> Option<String> {
    let (first, last) = (info.first_part?, info.last_part?);
    let range = |a: u64, b: u64| {
        if a == b {
            format!("part {a}")
        } else {
            format!("parts {a}–{b}")
        }
    };
    if info.one_part {
        return Some(format!(
            "{} of a rotated session, read alone",
            range(first, last)
        ));
    }
    let mut line = format!("{} of a rotated session", range(first, last));
    if first > 1 {
        let _ = write!(
            line,
            "; {} {} deleted (retention)",
            range(1, first - 1),
            if first == 2 { "was" } else { "were" }
        );
    }
    let present = info.parts.unwrap_or(0);
    match info.parts_read {
        Some(n) if n < present => {
            let _ = write!(line, "; {n} of them read");
        }
        _ => {}
    }
    Some(line)
}

pub(crate) fn header_lines(h: &Header) -> String {
    let mut s = String::new();
    for info in &h.sessions {
        let rounds = match info.rounds {
            Some(r) => format!("{} chunks of {r} rounds read", info.chunks),
            None => format!("{} chunks read", info.chunks),
        };
        let _ = writeln!(
            s,
            "Session:  {} ({}; {}; {rounds})",
            profkit_eventlog::shown(&info.path),
            profkit_eventlog::shown(&info.state),
            profkit_eventlog::shown(&info.target)
        );
        if let Some(line) = parts_line(info) {
            let _ = writeln!(s, "          {line}");
        }
    }
    let call_graph = match h.call_graph {
        Some(m) => format!("; call graph: {m}"),
        None => String::new(),
    };
    let _ = writeln!(
        s,
        "Event:    {}, {}{call_graph}",
        profkit_eventlog::shown(&h.event),
        rate(h)
    );
    match h.cgroups {
        Some("proc") => {
            let _ = writeln!(
                s,
                "Cgroups:  read from /proc/PID/cgroup once per process (the kernel had no \
                 PERF_SAMPLE_CGROUP): a process that moved is counted in its first group"
            );
        }
        Some(_) => {
            let _ = writeln!(s, "Cgroups:  each sample's (PERF_SAMPLE_CGROUP)");
        }
        None => {}
    }
    let _ = writeln!(
        s,
        "Time:     {}, {:.3} s{}",
        format_utc(h.start_unix_ns),
        h.duration_ns as f64 / 1e9,
        if h.window {
            " (the --time window, to the sync interval; samples and losses are its own)"
        } else {
            ""
        }
    );
    let unreadable = match h.samples_unreadable {
        Some(0) => String::new(),
        Some(n) => format!("; {n} in unreadable chunks"),
        None if h.bad_chunks.iter().any(|b| !b.torn) => {
            "; an unknown number in unreadable chunks".to_owned()
        }
        None => String::new(),
    };
    match h.off_cpu {
        Some(mode) => {
            let _ = writeln!(
                s,
                "Counted:  {}, ms: {} in this report, {} read{unreadable}",
                off_cpu_what(mode),
                ms(h.total_samples),
                ms(h.samples_read)
            );
        }
        None => {
            let _ = writeln!(
                s,
                "Samples:  {} in this report, {} read{unreadable}",
                h.total_samples, h.samples_read
            );
        }
    }
    // Every CPU on a few; on many, the ones that lost most (at most
    // TEXT_CPU_COLUMNS) and a count of the rest (JSON keeps each).
    let shown = |c: &crate::model::CpuLoss| format!("cpu{} {} ({:.3} %)", c.cpu, c.lost, c.percent);
    let per_cpu: Vec<String> = if h.cpus.len() <= super::TEXT_CPU_COLUMNS {
        h.cpus.iter().map(shown).collect()
    } else {
        let mut worst: Vec<&crate::model::CpuLoss> = h.cpus.iter().filter(|c| c.lost > 0).collect();
        worst.sort_by(|a, b| b.lost.cmp(&a.lost).then(a.cpu.cmp(&b.cpu)));
        worst.truncate(super::TEXT_CPU_COLUMNS);
        worst.sort_by_key(|c| c.cpu);
        let rest = h.cpus.len() - worst.len();
        let lost_rest: u64 =
            h.cpus.iter().map(|c| c.lost).sum::<u64>() - worst.iter().map(|c| c.lost).sum::<u64>();
        let other = if worst.is_empty() { "" } else { "other " };
        let mut v: Vec<String> = worst.into_iter().map(shown).collect();
        v.push(format!("{rest} {other}CPUs {lost_rest}"));
        v
    };
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
    if let Some(line) = h
        .off_cpu_accounting
        .as_ref()
        .and_then(off_cpu_accounting_line)
    {
        let _ = writeln!(s, "Off-CPU:  {line}");
    }
    if !h.stacks.is_zero() {
        let st = &h.stacks;
        let _ = writeln!(
            s,
            "Stacks:   {} with an [unknown] frame, {} truncated (too deep), {} user stacks cut \
             at the copied size{}",
            st.unknown,
            st.truncated,
            st.user_stacks_cut,
            if st.user_stacks_cut > 0 {
                " (a larger --call-graph dwarf,SIZE keeps more)"
            } else {
                ""
            }
        );
    }
    for c in &h.cpus {
        if c.percent > 0.01 {
            let _ = writeln!(
                s,
                "warning: cpu{} lost {:.3} % of its samples ({} of {}): the profile of this CPU \
                 is incomplete; see --timeline for when",
                c.cpu,
                c.percent,
                c.lost,
                c.samples.saturating_add(c.lost)
            );
        }
    }
    for b in &h.bad_chunks {
        let what = if b.torn { "torn chunk" } else { "bad chunk" };
        let _ = writeln!(
            s,
            "{what}: {} chunk {} at byte {} ({} bytes): {}",
            profkit_eventlog::shown(&b.session),
            b.index,
            b.offset,
            b.len,
            profkit_eventlog::shown(&b.reason)
        );
    }
    s
}

/// A text table column.
struct Col<'a> {
    head: String,
    right: bool,
    min: usize,
    /// The cells, held (small tables)...
    cells: Vec<Cow<'a, str>>,
    /// ... or made from the rows, as many as said, each when it is measured
    /// and again when it is written: a report's thousands of rows make no
    /// list of cells (four columns of 9,465 rows held 2.6 MB at the heap's
    /// peak, the last thing a `-l` did).
    made: Option<Made<'a>>,
}

/// [`Col::made`]: how many cells, and how cell `r` is made.
type Made<'a> = (usize, Box<dyn Fn(usize) -> Cow<'a, str> + 'a>);

impl<'a> Col<'a> {
    fn new(head: &str, right: bool) -> Col<'a> {
        Col {
            head: head.to_owned(),
            right,
            min: 0,
            cells: Vec::new(),
            made: None,
        }
    }

    /// A column of `n` cells made by `cell`.
    fn made(head: &str, right: bool, n: usize, cell: impl Fn(usize) -> Cow<'a, str> + 'a) -> Self {
        Col {
            made: Some((n, Box::new(cell))),
            ..Col::new(head, right)
        }
    }

    fn len(&self) -> usize {
        self.made.as_ref().map_or(self.cells.len(), |(n, _)| *n)
    }

    /// Cell `r`.
    fn cell(&self, r: usize) -> Cow<'_, str> {
        match &self.made {
            Some((_, make)) => make(r),
            None => Cow::Borrowed(self.cells.get(r).map_or("", |c| c.as_ref())),
        }
    }
}

/// Formats a table: an optional line of labels over column groups and the
/// header line, and the [`Body`] that writes one line per row (streamed:
/// a report's thousands of lines are not held at once).
fn format_table<'c, 'a>(
    indent: &'c str,
    above: &[(usize, String)],
    cols: &'c [Col<'a>],
) -> (Vec<String>, Body<'c, 'a>) {
    // Each column's width (characters) over its cells as shown.
    let widths: Vec<usize> = cols
        .iter()
        .map(|c| {
            (0..c.len())
                .map(|r| shown_cell(&c.cell(r)).chars().count())
                .chain([c.head.chars().count(), c.min])
                .max()
                .unwrap_or(0)
        })
        .collect();
    let body = Body {
        indent,
        cols,
        widths,
    };
    let mut head = Vec::new();
    if !above.is_empty() {
        // Labels over groups of columns (cpu:N over each samples/% pair).
        let mut s = String::from(indent);
        let mut pos = 0usize;
        let starts: Vec<usize> = body
            .widths
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
    let mut s = String::new();
    body.line(
        &mut s,
        &mut cols
            .iter()
            .enumerate()
            .map(|(i, c)| (i, c.head.as_str(), c.head.chars().count())),
    );
    head.push(s);
    (head, body)
}

/// A cell on one line: names (commands, paths, symbols, cgroups) come
/// from untrusted processes and files, and a newline in one would add a
/// row of its own making.
fn shown_cell(cell: &str) -> Cow<'_, str> {
    profkit_eventlog::shown(cell)
}

/// A formatted table's rows, laid out by [`format_table`].
struct Body<'c, 'a> {
    indent: &'c str,
    cols: &'c [Col<'a>],
    widths: Vec<usize>,
}

impl Body<'_, '_> {
    /// One line of `cells` (column, text, its width in characters) into
    /// `s` (cleared first).
    fn line(&self, s: &mut String, cells: &mut dyn Iterator<Item = (usize, &str, usize)>) {
        s.clear();
        s.push_str(self.indent);
        let n = self.cols.len();
        let pad = |s: &mut String, n: usize| s.extend(std::iter::repeat_n(' ', n));
        for (i, cell, len) in cells {
            let gap = self.widths[i].saturating_sub(len);
            let last = i + 1 == n;
            if self.cols[i].right {
                pad(s, gap);
                s.push_str(cell);
            } else if last {
                s.push_str(cell);
            } else {
                s.push_str(cell);
                pad(s, gap);
            }
            if !last {
                s.push_str("  ");
            }
        }
        s.truncate(s.trim_end().len());
    }

    /// How many rows.
    fn len(&self) -> usize {
        self.cols.first().map_or(0, Col::len)
    }

    /// Writes row `r`'s line (and a newline), laid out in `s`.
    fn write_row(&self, w: &mut dyn Write, s: &mut String, r: usize) -> io::Result<()> {
        let cells: Vec<Cow<'_, str>> = self.cols.iter().map(|c| c.cell(r)).collect();
        let shown: Vec<Cow<'_, str>> = cells.iter().map(|c| shown_cell(c)).collect();
        self.line(
            s,
            &mut shown
                .iter()
                .enumerate()
                .map(|(i, c)| (i, c.as_ref(), c.chars().count())),
        );
        s.push('\n');
        w.write_all(s.as_bytes())
    }

    /// Writes every row's line.
    fn write_all(&self, w: &mut dyn Write) -> io::Result<()> {
        let mut s = String::new();
        (0..self.len()).try_for_each(|r| self.write_row(w, &mut s, r))
    }
}

fn write_lines(w: &mut dyn Write, lines: &[String]) -> io::Result<()> {
    for l in lines {
        w.write_all(l.as_bytes())?;
        w.write_all(b"\n")?;
    }
    Ok(())
}

fn pct(p: f64) -> String {
    format!("{p:.4}")
}

/// The columns of one table of rows.
fn table<'a>(
    report: &'a Report,
    rows: &'a [Row],
    image_head: &str,
) -> (Vec<Col<'a>>, Vec<(usize, String)>) {
    let l = report.shown;
    let h = &report.header;
    let (head, incl_head) = if h.off_cpu.is_some() {
        ("ms", "incl. ms")
    } else {
        ("samples", "inclusive")
    };
    let n = rows.len();
    // A column of a text of each row, borrowed.
    fn text<'a>(head: &str, rows: &'a [Row], f: impl Fn(&'a Row) -> &'a str + 'a) -> Col<'a> {
        Col::made(head, false, rows.len(), move |r| Cow::Borrowed(f(&rows[r])))
    }
    let mut cols = Vec::new();
    let mut labels = Vec::new();
    if l.address {
        cols.push(Col::made("vma", false, n, move |r| {
            rows[r]
                .vma
                .map_or_else(|| "-".into(), |v| format!("{v:016x}").into())
        }));
    }
    for (i, column) in report.columns.iter().enumerate() {
        match column {
            Column::Cpu(cpu) => labels.push((cols.len(), format!("cpu:{cpu}"))),
            Column::Cpus(a, b) => labels.push((cols.len(), format!("cpu:{a}-{b}"))),
            Column::All => {}
        }
        let mut p = Col::made("%", true, n, move |r| pct(rows[r].percent[i]).into());
        p.min = "100.0000".len();
        cols.push(Col::made(head, true, n, move |r| {
            amount(h, rows[r].samples[i]).into()
        }));
        cols.push(p);
        if l.inclusive {
            let mut p = Col::made("%", true, n, move |r| {
                pct(rows[r].inclusive_percent().get(i).copied().unwrap_or(0.0)).into()
            });
            p.min = "100.0000".len();
            cols.push(Col::made(incl_head, true, n, move |r| {
                amount(h, rows[r].inclusive_samples().get(i).copied().unwrap_or(0)).into()
            }));
            cols.push(p);
        }
    }
    if l.thread {
        let id = |v: Option<u32>| v.map_or_else(String::new, |v| v.to_string());
        let g = Col::made("tgid", true, n, move |r| id(rows[r].tgid()).into());
        let t = Col::made("tid", true, n, move |r| id(rows[r].tid()).into());
        // Ids inside a container's pid namespace, only when some row
        // has them: `ns 1/1` beside the host's 4242/4242.
        let ns = Col::made("ns tgid/tid", false, n, move |r| {
            let row = &rows[r];
            let id = |v: Option<u32>| v.map_or_else(|| "?".to_owned(), |v| v.to_string());
            if row.ns_tgid().is_some() || row.ns_tid().is_some() {
                format!("{}/{}", id(row.ns_tgid()), id(row.ns_tid())).into()
            } else {
                "".into()
            }
        });
        cols.extend([g, t]);
        if rows
            .iter()
            .any(|r| r.ns_tgid().is_some() || r.ns_tid().is_some())
        {
            cols.push(ns);
        }
        cols.push(text("command", rows, |r| r.comm().unwrap_or_default()));
    }
    if l.cgroup {
        cols.push(text("cgroup", rows, |r| r.cgroup().unwrap_or_default()));
    }
    if l.location {
        cols.push(text("linenr info", rows, |r| {
            r.location().unwrap_or("(no location)")
        }));
    }
    if l.app {
        cols.push(text("app name", rows, |r| r.app().map_or("", |a| a)));
    }
    cols.push(text(image_head, rows, |r| &*r.image));
    if l.symbols {
        cols.push(text("symbol name", rows, |r| {
            r.symbol.as_deref().unwrap_or_default()
        }));
    }
    (cols, labels)
}

/// The header lines and the blank line after them.
pub(crate) fn write_header(report: &Report, w: &mut dyn Write) -> io::Result<()> {
    w.write_all(header_lines(&report.header).as_bytes())?;
    writeln!(w)
}

/// The text report: header, then opreport's table (or the timeline).
pub fn write_text(report: &Report, w: &mut dyn Write) -> io::Result<()> {
    write_header(report, w)?;
    if let Some(t) = &report.timeline {
        return write_timeline_text(t, w);
    }
    if let Some(cg) = &report.callgraph {
        return write_callgraph_text(cg, &report.header, w);
    }
    if let Some(list) = &report.annotations {
        return super::annotate::write_annotations_text(report, list, w, false);
    }
    if report.rows.is_empty() {
        writeln!(w, "{}", nothing_matches(&report.header))?;
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
        let mut line = String::new();
        for (r, parent) in report.rows.iter().enumerate() {
            body.write_row(w, &mut line, r)?;
            let (cols, labels) = table(report, parent.children(), image_head);
            let (head, body) = format_table("        ", &labels, &cols);
            write_lines(w, &head[head.len() - 1..])?;
            body.write_all(w)?;
        }
    } else {
        let (cols, labels) = table(report, &report.rows, image_head);
        let (head, body) = format_table("", &labels, &cols);
        write_lines(w, &head)?;
        body.write_all(w)?;
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
fn write_callgraph_text(cg: &CallGraph, h: &Header, w: &mut dyn Write) -> io::Result<()> {
    if cg.entries.is_empty() {
        writeln!(w, "{}", nothing_matches(h))?;
        return Ok(());
    }
    let (head, incl_head) = if h.off_cpu.is_some() {
        ("ms", "incl. ms")
    } else {
        ("samples", "inclusive")
    };
    // One table so columns line up across blocks; indentation is part of
    // the first cell.
    let mut cols = vec![
        Col::new(head, false),
        Col::new("%", true),
        Col::new(incl_head, true),
        Col::new("%", true),
        Col::new("image name", false),
        Col::new("symbol name", false),
    ];
    cols[1].min = "100.0000".len();
    let mut kinds = Vec::new();
    let mut push = |cols: &mut Vec<Col>, cells: [String; 6], rule: bool| {
        for (c, v) in cols.iter_mut().zip(cells) {
            c.cells.push(v.into());
        }
        kinds.push(rule);
    };
    for e in &cg.entries {
        push(&mut cols, Default::default(), true);
        for a in &e.callers {
            push(
                &mut cols,
                [
                    format!("  {}", amount(h, a.samples)),
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
                amount(h, e.self_samples),
                pct(e.self_percent),
                amount(h, e.total),
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
                    format!("  {}", amount(h, n)),
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
    let mut line = String::new();
    for (r, is_rule) in kinds.into_iter().enumerate() {
        if is_rule {
            writeln!(w, "{rule}")?;
        } else {
            body.write_row(w, &mut line, r)?;
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

/// Said when no row is left.
fn nothing_matches(h: &Header) -> &'static str {
    if h.off_cpu.is_some() {
        "(no off-CPU time matches)"
    } else {
        "(no samples match)"
    }
}

fn rounds_label(l: &TimelineLine) -> String {
    if l.first_round == l.last_round {
        l.first_round.to_string()
    } else {
        format!("{}-{}", l.first_round, l.last_round)
    }
}

fn write_timeline_text(t: &Timeline, w: &mut dyn Write) -> io::Result<()> {
    let per = match t.step_ns {
        Some(step) => format!("{} s (by each sample's time)", step as f64 / 1e9),
        None if t.rounds_per_line == 1 => "one sync round".to_owned(),
        None => format!("{} sync rounds", t.rounds_per_line),
    };
    writeln!(w, "Timeline: samples and lost per CPU, {per} per line")?;
    for s in &t.sessions {
        if t.sessions.len() > 1 {
            writeln!(w, "\nSession {}", profkit_eventlog::shown(&s.session))?;
        }
        // At most TEXT_CPU_COLUMNS CPU columns: past it, contiguous CPUs
        // added up (JSON keeps every CPU).
        let per = t.cpus.len().div_ceil(super::TEXT_CPU_COLUMNS).max(1);
        let groups: Vec<std::ops::Range<usize>> = (0..t.cpus.len())
            .step_by(per)
            .map(|i| i..(i + per).min(t.cpus.len()))
            .collect();
        let mut cols = vec![Col::new("round", true), Col::new("time (s)", true)];
        for g in &groups {
            let name = match (t.cpus[g.start], t.cpus[g.end - 1]) {
                (a, b) if a == b => format!("cpu{a}"),
                (a, b) => format!("cpu{a}-{b}"),
            };
            cols.push(Col::new(&format!("{name} samples"), true));
            cols.push(Col::new(&format!("{name} lost"), true));
        }
        cols.push(Col::new("note", false));
        for l in &s.lines {
            cols[0].cells.push(rounds_label(l).into());
            cols[1].cells.push(format!("{:.3}", l.time_s).into());
            for (i, g) in groups.iter().enumerate() {
                let sum = |v: &[u64]| v[g.clone()].iter().sum::<u64>().to_string();
                cols[2 + 2 * i].cells.push(sum(&l.samples).into());
                cols[3 + 2 * i].cells.push(sum(&l.lost).into());
            }
            let note = if l.unreadable_chunks.is_empty() {
                String::new()
            } else {
                let list: Vec<String> = l.unreadable_chunks.iter().map(|c| c.to_string()).collect();
                format!("unreadable chunk {}", list.join(", "))
            };
            let n = cols.len();
            cols[n - 1].cells.push(note.into());
        }
        let (head, body) = format_table("", &[], &cols);
        write_lines(w, &head)?;
        body.write_all(w)?;
    }
    Ok(())
}
