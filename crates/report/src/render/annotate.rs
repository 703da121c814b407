//! `--annotate` as text (opannotate's and perf annotate's layout: samples
//! and percent of the function per line, then the line) and as JSON rows.

use std::io::{self, Write};

use serde::Serialize;

use crate::model::*;

/// Text of `s` with control characters written as `\xNN` (source files
/// are the user's, not ours: no terminal escapes from them).
fn plain(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_control() && c != '\t' {
            out.push_str(&format!("\\x{:02x}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// Percent of `n` in `of`.
fn pct(n: u64, of: u64) -> f64 {
    if of == 0 {
        0.0
    } else {
        100.0 * n as f64 / of as f64
    }
}

/// Column heads: `samples      %` per column (`cpuN` before them when the
/// report has CPU columns).
fn heads(columns: &[Column]) -> String {
    columns
        .iter()
        .map(|c| match c {
            Column::All => format!("{:>8} {:>7}", "samples", "%"),
            Column::Cpu(n) => format!("{:>8} {:>7}", format!("cpu{n}"), "%"),
            Column::Cpus(a, b) => format!("{:>8} {:>7}", format!("cpu{a}-{b}"), "%"),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The cells of one line: samples and percent of the function's samples
/// per column, blank where there are none.
fn cells(samples: &[u64], of: &[u64]) -> String {
    samples
        .iter()
        .zip(of)
        .map(|(&n, &t)| {
            if n == 0 {
                format!("{:>8} {:>7}", "", "")
            } else {
                format!("{n:>8} {:>7.2}", pct(n, t))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// perf's colours: red from 5 % of the function, green from 0.5 %.
fn paint(line: String, share: f64, color: bool) -> String {
    match (color, share) {
        (false, _) => line,
        (true, s) if s >= 5.0 => format!("\x1b[1;31m{line}\x1b[0m"),
        (true, s) if s >= 0.5 => format!("\x1b[32m{line}\x1b[0m"),
        _ => line,
    }
}

/// Writes the annotations (after the header the caller wrote). With
/// `color`, the hot lines are coloured as perf annotate colours them.
pub(crate) fn write_annotations_text(
    report: &Report,
    list: &[Annotation],
    w: &mut dyn Write,
    color: bool,
) -> io::Result<()> {
    if list.is_empty() {
        writeln!(
            w,
            "(no function to annotate: none at or above the threshold)"
        )?;
        return Ok(());
    }
    let head = heads(&report.columns);
    let blank = cells(
        &vec![0; report.columns.len()],
        &vec![0; report.columns.len()],
    );
    for a in list {
        let total: u64 = a.samples.iter().sum();
        let share: f64 = pct(total, report.header.total_samples);
        writeln!(
            w,
            "Annotation of {} in {}{}: {total} samples ({share:.2} % of the report), {:#x}, {} bytes",
            plain(&a.symbol),
            plain(&a.image),
            a.path
                .as_deref()
                .map_or(String::new(), |p| format!(" ({})", plain(p))),
            a.start,
            a.size
        )?;
        for n in &a.notes {
            writeln!(w, "note: {}", plain(n))?;
        }
        // Mixed (--source --assembly): the instructions under their source
        // lines, as perf annotate shows them; the lines' own samples are
        // in the line headers.
        let mixed = a.source.is_some() && a.assembly.is_some();
        if let (Some(src), false) = (&a.source, mixed) {
            for f in &src.files {
                writeln!(w)?;
                let found = f
                    .found
                    .as_ref()
                    .map_or(String::new(), |p| format!(" (read from {})", p.display()));
                writeln!(
                    w,
                    "{head}   line  source: {}{}",
                    plain(&f.file),
                    plain(&found)
                )?;
                for l in &f.lines {
                    if l.gap_before {
                        writeln!(w, "{blank}    ...")?;
                    }
                    let n: u64 = l.samples.iter().sum();
                    let mark = if l.inlined.is_empty() {
                        String::new()
                    } else {
                        format!("   [inlined: {}]", plain(&l.inlined.join(", ")))
                    };
                    let line = format!(
                        "{} {:>6}  {}{mark}",
                        cells(&l.samples, &a.samples),
                        l.line,
                        plain(l.text.as_deref().unwrap_or(""))
                    );
                    writeln!(w, "{}", paint(line, pct(n, total), color))?;
                }
            }
            let nl: u64 = src.without_line.iter().sum();
            if nl > 0 {
                writeln!(
                    w,
                    "{} (no line: {nl} samples)",
                    cells(&src.without_line, &a.samples)
                )?;
            }
        }
        if let Some(asm) = &a.assembly {
            writeln!(w)?;
            writeln!(w, "{head}  address  instruction")?;
            let mut last: Option<(&str, u32)> = None;
            for l in asm {
                if let (Some(file), Some(line)) = (l.file.as_deref(), l.line) {
                    if last != Some((file, line)) {
                        last = Some((file, line));
                        let inl = l
                            .inlined
                            .as_deref()
                            .map_or(String::new(), |f| format!("   [inlined: {}]", plain(f)));
                        let src = a.source.as_ref().and_then(|s| {
                            s.files
                                .iter()
                                .find(|f| f.file == file)?
                                .lines
                                .iter()
                                .find(|x| x.line == line)
                        });
                        let (cells_of, text) = match src {
                            Some(x) => (
                                cells(&x.samples, &a.samples),
                                x.text.as_deref().unwrap_or(""),
                            ),
                            None => (blank.clone(), ""),
                        };
                        let n: u64 = src.map_or(0, |x| x.samples.iter().sum());
                        let hdr = format!(
                            "{cells_of}  {}:{line}  {}{inl}",
                            plain(crate::spec::base_name(file)),
                            plain(text.trim())
                        );
                        writeln!(w, "{}", paint(hdr, pct(n, total), color && mixed))?;
                    }
                }
                let n: u64 = l.samples.iter().sum();
                let text = match &l.text {
                    Some(t) => {
                        let arrow = match (l.target, l.local_target) {
                            (Some(t), true) if t <= l.address => "  ↑",
                            (Some(_), true) => "  ↓",
                            _ => "",
                        };
                        format!("{}{arrow}", plain(t))
                    }
                    None => "(sampled address)".to_owned(),
                };
                let line = format!(
                    "{} {:>8x}:  {text}",
                    cells(&l.samples, &a.samples),
                    l.address
                );
                writeln!(w, "{}", paint(line, pct(n, total), color))?;
            }
        }
        writeln!(w)?;
    }
    Ok(())
}

/// One JSON row of an annotation: a source line or an instruction.
#[derive(Serialize)]
pub(crate) struct JsonAnnotationRow {
    function: String,
    image: String,
    file: Option<String>,
    line: Option<u32>,
    address: Option<String>,
    instruction: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    source: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    inlined: Option<String>,
    samples: u64,
    /// Of the function's samples.
    percent: f64,
    #[serde(skip_serializing_if = "Option::is_none")]
    cpu: Option<u32>,
}

impl JsonAnnotationRow {
    /// The row as a CSV line (the header is the field names, less
    /// `source`).
    pub(crate) fn csv_line(&self) -> String {
        use super::csv_field as f;
        let opt = |v: Option<String>| v.map_or_else(String::new, |s| f(&s));
        format!(
            "{},{},{},{},{},{},{},{},{:.4},{}",
            f(&self.function),
            f(&self.image),
            opt(self.file.clone()),
            self.line.map_or_else(String::new, |l| l.to_string()),
            opt(self.address.clone()),
            opt(self.instruction.clone()),
            opt(self.inlined.clone()),
            self.samples,
            self.percent,
            self.cpu.map_or_else(String::new, |c| c.to_string()),
        )
    }
}

/// The JSON rows of the annotations: per column (CPU), every source line
/// with samples or code, then every instruction.
pub(crate) fn json_rows(report: &Report, list: &[Annotation]) -> Vec<JsonAnnotationRow> {
    let round4 = |v: f64| (v * 1e4).round() / 1e4;
    let mut rows = Vec::new();
    for a in list {
        for (c, col) in report.columns.iter().enumerate() {
            // A range of CPUs (text only) has no one CPU to name.
            let cpu = match col {
                Column::All | Column::Cpus(..) => None,
                Column::Cpu(n) => Some(*n),
            };
            let of = a.samples.get(c).copied().unwrap_or(0);
            if let Some(src) = &a.source {
                for f in &src.files {
                    for l in f.lines.iter().filter(|l| l.has_code) {
                        let n = l.samples.get(c).copied().unwrap_or(0);
                        rows.push(JsonAnnotationRow {
                            function: a.symbol.clone(),
                            image: a.image.clone(),
                            file: Some(f.file.clone()),
                            line: Some(l.line),
                            address: None,
                            instruction: None,
                            source: l.text.clone(),
                            inlined: (!l.inlined.is_empty()).then(|| l.inlined.join(", ")),
                            samples: n,
                            percent: round4(pct(n, of)),
                            cpu,
                        });
                    }
                }
            }
            if let Some(asm) = &a.assembly {
                for l in asm {
                    let n = l.samples.get(c).copied().unwrap_or(0);
                    rows.push(JsonAnnotationRow {
                        function: a.symbol.clone(),
                        image: a.image.clone(),
                        file: l.file.clone(),
                        line: l.line,
                        address: Some(format!("{:#x}", l.address)),
                        instruction: l.text.clone(),
                        source: None,
                        inlined: l.inlined.clone(),
                        samples: n,
                        percent: round4(pct(n, of)),
                        cpu,
                    });
                }
            }
        }
    }
    rows
}
