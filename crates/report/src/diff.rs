//! `profreport --diff OLD NEW`: per symbol, how its share of the samples
//! changed between two reports, largest change first.
//!
//! Rows are matched by name (application, binary, symbol), not by address
//! or cookie, so a rebuilt binary still lines up with its old self. A
//! share is of each report's own samples, so the changes add up to zero
//! (up to rows below the threshold).

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::sync::Arc;

use serde::Serialize;

use crate::model::*;
use crate::render::{csv_field, Format};

/// One symbol in both reports (or in one of them, with 0 in the other).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DiffRow {
    /// The application (with `--app` or `--separate=lib,kernel`).
    pub app: Option<String>,
    /// The binary.
    pub image: String,
    /// The symbol (None in an image summary).
    pub symbol: Option<String>,
    /// Samples in the old report.
    pub old_samples: u64,
    /// Share of the old report, in percent.
    pub old_percent: f64,
    /// Samples in the new report.
    pub new_samples: u64,
    /// Share of the new report, in percent.
    pub new_percent: f64,
    /// `new_percent - old_percent`, in percentage points.
    pub change: f64,
}

/// The comparison of two reports.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Diff {
    /// The old report's header.
    pub old: Header,
    /// The new report's header.
    pub new: Header,
    /// Rows, largest absolute change first.
    pub rows: Vec<DiffRow>,
    /// Rows whose change was below the threshold.
    pub below_threshold: usize,
}

type DiffKey = (Option<Arc<str>>, Arc<str>, Option<String>);

fn shares(r: &Report) -> BTreeMap<DiffKey, (u64, f64)> {
    let mut out: BTreeMap<DiffKey, (u64, f64)> = BTreeMap::new();
    let mut add = |row: &Row, app: Option<&Arc<str>>| {
        let key = (
            row.app().or(app).cloned(),
            row.image.clone(),
            row.symbol.clone(),
        );
        let e = out.entry(key).or_insert((0, 0.0));
        e.0 += row.total;
        e.1 += row.total_percent;
    };
    for row in &r.rows {
        if row.children().is_empty() {
            add(row, None);
        } else {
            for c in row.children() {
                add(c, Some(&row.image));
            }
        }
    }
    out
}

/// Compares two reports built with the same options (and no threshold:
/// a row cut from one would look like a change). Rows whose absolute
/// change is below `threshold` points are left out.
pub fn diff_reports(old: &Report, new: &Report, threshold: f64) -> Diff {
    let a = shares(old);
    let mut b = shares(new);
    let mut rows = Vec::new();
    let mut push = |key: DiffKey, (os, op): (u64, f64), (ns, np): (u64, f64)| {
        rows.push(DiffRow {
            app: key.0.as_deref().map(str::to_owned),
            image: key.1.to_string(),
            symbol: key.2,
            old_samples: os,
            old_percent: op,
            new_samples: ns,
            new_percent: np,
            change: np - op,
        });
    };
    for (key, o) in a {
        let n = b.remove(&key).unwrap_or((0, 0.0));
        push(key, o, n);
    }
    for (key, n) in b {
        push(key, (0, 0.0), n);
    }
    rows.sort_by(|x, y| {
        y.change
            .abs()
            .total_cmp(&x.change.abs())
            .then_with(|| y.new_samples.cmp(&x.new_samples))
            .then_with(|| (&x.image, &x.symbol).cmp(&(&y.image, &y.symbol)))
    });
    let before = rows.len();
    rows.retain(|r| r.change.abs() >= threshold && (r.old_samples > 0 || r.new_samples > 0));
    Diff {
        old: old.header.clone(),
        new: new.header.clone(),
        below_threshold: before - rows.len(),
        rows,
    }
}

fn describe(h: &Header) -> String {
    let paths: Vec<std::borrow::Cow<'_, str>> = h
        .sessions
        .iter()
        .map(|s| profkit_eventlog::shown(&s.path))
        .collect();
    match h.off_cpu {
        Some(mode) => format!(
            "{} ({}: {} ms)",
            paths.join(" + "),
            crate::render::off_cpu_what(mode),
            crate::render::ms(h.total_samples)
        ),
        None => format!("{} ({} samples)", paths.join(" + "), h.total_samples),
    }
}

/// Writes a diff as text (a table), JSON (one object: `old`, `new`,
/// `rows`) or CSV. The stack formats do not apply.
pub fn write_diff(d: &Diff, format: Format, w: &mut dyn Write) -> io::Result<()> {
    // Off-CPU diffs (`--off-cpu`): figures are ns, shown in ms (JSON keeps
    // ns, its headers say `off_cpu` and `unit`-less figures are ns).
    let off = d.old.off_cpu.is_some();
    let amount = |n: u64| crate::render::amount(&d.old, n);
    match format {
        Format::Json => {
            serde_json::to_writer_pretty(&mut *w, d).map_err(io::Error::from)?;
            writeln!(w)
        }
        Format::Csv => {
            if off {
                writeln!(
                    w,
                    "change,old_percent,new_percent,old_off_cpu_ms,new_off_cpu_ms,app,image,symbol"
                )?;
            } else {
                writeln!(
                    w,
                    "change,old_percent,new_percent,old_samples,new_samples,app,image,symbol"
                )?;
            }
            for r in &d.rows {
                writeln!(
                    w,
                    "{:.4},{:.4},{:.4},{},{},{},{},{}",
                    r.change,
                    r.old_percent,
                    r.new_percent,
                    amount(r.old_samples),
                    amount(r.new_samples),
                    csv_field(r.app.as_deref().unwrap_or("")),
                    csv_field(&r.image),
                    csv_field(r.symbol.as_deref().unwrap_or(""))
                )?;
            }
            Ok(())
        }
        Format::Text => {
            // Names on one line each (a newline in one would add a row).
            use profkit_eventlog::shown;
            writeln!(w, "Old:      {}", describe(&d.old))?;
            writeln!(w, "New:      {}", describe(&d.new))?;
            writeln!(
                w,
                "Change:   share of the new report minus share of the old, in points"
            )?;
            writeln!(w)?;
            if d.rows.is_empty() {
                return writeln!(
                    w,
                    "{}",
                    if off {
                        "(no off-CPU time matches)"
                    } else {
                        "(no samples match)"
                    }
                );
            }
            let app = d.rows.iter().any(|r| r.app.is_some());
            let sym = d.rows.iter().any(|r| r.symbol.is_some());
            let iw = d
                .rows
                .iter()
                .map(|r| shown(&r.image).chars().count())
                .max()
                .unwrap_or(0)
                .max("image".len());
            let aw = d
                .rows
                .iter()
                .map(|r| r.app.as_deref().map_or(0, |a| shown(a).chars().count()))
                .max()
                .unwrap_or(0)
                .max("app name".len());
            let (old_head, new_head) = if off {
                ("old ms", "new ms")
            } else {
                ("old samples", "new samples")
            };
            let mut head = format!(
                "{:>9}  {:>8}  {:>8}  {:>11}  {:>11}  ",
                "change", "old %", "new %", old_head, new_head
            );
            if app {
                head.push_str(&format!("{:<aw$}  ", "app name"));
            }
            head.push_str(&format!("{:<iw$}", "image"));
            if sym {
                head.push_str("  symbol name");
            }
            writeln!(w, "{}", head.trim_end())?;
            for r in &d.rows {
                let mut line = format!(
                    "{:>+9.4}  {:>8.4}  {:>8.4}  {:>11}  {:>11}  ",
                    r.change,
                    r.old_percent,
                    r.new_percent,
                    amount(r.old_samples),
                    amount(r.new_samples)
                );
                if app {
                    line.push_str(&format!("{:<aw$}  ", shown(r.app.as_deref().unwrap_or(""))));
                }
                line.push_str(&format!("{:<iw$}", shown(&r.image)));
                if let Some(s) = &r.symbol {
                    line.push_str("  ");
                    line.push_str(&shown(s));
                }
                writeln!(w, "{}", line.trim_end())?;
            }
            if d.below_threshold > 0 {
                writeln!(
                    w,
                    "({} rows below the threshold not shown)",
                    d.below_threshold
                )?;
            }
            Ok(())
        }
        other => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("--diff writes text, json or csv, not {other:?}"),
        )),
    }
}
