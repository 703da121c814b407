//! Renderers: text (opreport's layout, `text.rs`), JSON (one object,
//! `json.rs`) and CSV (`csv.rs`). Each writes to any `impl Write` and only
//! formats a [`Report`]; a broken pipe comes back as the `io::Error` it is,
//! for the caller to treat as success. The stack formats are `crate::export`'s
//! and `crate::pprof`'s. "No symbol" becomes text here and nowhere else.

mod annotate;
mod csv;
mod json;
mod text;

pub use csv::write_csv;
pub use json::{flat_rows, write_json};
pub(crate) use text::header_lines;
pub use text::write_text;

use std::io::{self, Write};

use crate::model::*;

/// A CSV field, quoted when it holds a comma, a quote or a line break
/// (RFC 4180).
pub(crate) fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_owned()
    }
}

/// Nanoseconds as milliseconds with three decimals (to the nearest µs):
/// `1234567` → `1.235`.
pub(crate) fn ms(ns: u64) -> String {
    let us = ns / 1000 + u64::from(ns % 1000 >= 500);
    format!("{}.{:03}", us / 1000, us % 1000)
}

/// A report figure as shown: samples, or off-CPU milliseconds.
pub(crate) fn amount(h: &Header, n: u64) -> String {
    if h.off_cpu.is_some() {
        ms(n)
    } else {
        n.to_string()
    }
}

/// What an off-CPU report counts: "off-CPU time (blocked)".
pub(crate) fn off_cpu_what(mode: crate::options::OffCpuMode) -> &'static str {
    match mode {
        crate::options::OffCpuMode::Blocked => "off-CPU time (blocked)",
        crate::options::OffCpuMode::Runnable => "off-CPU time (runnable: waiting for a CPU)",
        crate::options::OffCpuMode::All => "off-CPU time (blocked and runnable)",
    }
}

/// The footers' off-CPU counts that are not 0, in one line ("1200
/// switches, 600 intervals, 3 without a stack"); `None` when all are 0.
pub(crate) fn off_cpu_accounting_line(c: &OffCpuCounts) -> Option<String> {
    let parts: Vec<String> = [
        (c.switches, "switches"),
        (c.intervals, "intervals"),
        (c.lost, "switch records lost"),
        (c.kernel_lost, "lost by the kernel's count"),
        (c.no_stack, "intervals without a stack"),
        (c.unpaired, "unpaired switch-ins"),
        (c.dropped, "intervals dropped"),
    ]
    .iter()
    .filter(|(n, _)| *n != 0)
    .map(|(n, what)| format!("{n} {what}"))
    .collect();
    (!parts.is_empty()).then(|| parts.join(", "))
}

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

/// The most CPU columns a text report prints (`--separate=cpu`,
/// `--timeline`): past it, contiguous CPUs are added up in ranges; JSON
/// and CSV keep every CPU.
pub const TEXT_CPU_COLUMNS: usize = 8;

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

/// `s` with control characters (C0 but newline and tab, DEL, C1) shown as
/// `\x1b`: command names, paths and symbols come from untrusted
/// processes and files, and must not reach a terminal as escape sequences.
pub fn printable(s: &str) -> std::borrow::Cow<'_, str> {
    let bad = |c: char| c.is_control() && c != '\n' && c != '\t';
    if !s.chars().any(bad) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if bad(c) {
            out.push_str(&format!("\\x{:02x}", c as u32));
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// The first byte of `buf` that [`Printable`] must look at: a control
/// byte other than newline and tab, DEL, or 0xc2 (which may start a C1
/// control). Blocks of 32 bytes are tested without a branch a byte (the
/// compiler vectorizes it): the text of a large report is megabytes.
fn first_special(buf: &[u8]) -> Option<usize> {
    let special = |b: u8| (b < 0x20 && b != b'\n' && b != b'\t') | (b == 0x7f) | (b == 0xc2);
    let mut at = 0;
    for block in buf.chunks(32) {
        if block.iter().fold(false, |any, &b| any | special(b)) {
            return block.iter().position(|&b| special(b)).map(|i| at + i);
        }
        at += block.len();
    }
    None
}

/// A writer that passes text on with its control characters escaped as
/// [`printable`] does (for the text, CSV and folded outputs).
pub struct Printable<'a> {
    inner: &'a mut dyn Write,
    /// A 0xC2 byte seen last (a C1 control may follow in the next write).
    pending_c2: bool,
}

impl<'a> Printable<'a> {
    /// Wraps `inner`.
    pub fn new(inner: &'a mut dyn Write) -> Self {
        Printable {
            inner,
            pending_c2: false,
        }
    }
}

impl Write for Printable<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // Fast path: the printable run before the first byte that needs a
        // look (a control byte, or 0xc2 that may start a C1 control) goes
        // out as it is (a short write; `write_all` comes back for the rest).
        if !self.pending_c2 {
            match first_special(buf) {
                None => {
                    self.inner.write_all(buf)?;
                    return Ok(buf.len());
                }
                Some(0) => {}
                Some(i) => {
                    self.inner.write_all(&buf[..i])?;
                    return Ok(i);
                }
            }
        }
        let mut out = Vec::with_capacity(buf.len() + 8);
        for &b in buf {
            if std::mem::take(&mut self.pending_c2) {
                if (0x80..=0x9f).contains(&b) {
                    out.extend_from_slice(format!("\\x{b:02x}").as_bytes());
                    continue;
                }
                out.push(0xc2);
            }
            match b {
                b'\n' | b'\t' => out.push(b),
                0x00..=0x1f | 0x7f => out.extend_from_slice(format!("\\x{b:02x}").as_bytes()),
                0xc2 => self.pending_c2 = true,
                _ => out.push(b),
            }
        }
        self.inner.write_all(&out)?;
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        if std::mem::take(&mut self.pending_c2) {
            self.inner.write_all(&[0xc2])?;
        }
        self.inner.flush()
    }
}

impl Drop for Printable<'_> {
    fn drop(&mut self) {
        if self.pending_c2 {
            let _ = self.inner.write_all(&[0xc2]);
        }
    }
}

/// Writes `report` in `format`. The stack formats need a report built
/// with [`crate::ReportOptions::stacks`] (else an `InvalidInput` error);
/// a flame graph is of all columns together (see [`write_flamegraph`] for
/// one per CPU).
pub fn render(report: &Report, format: Format, w: &mut dyn Write) -> io::Result<()> {
    match format {
        Format::Text => write_text(report, &mut Printable::new(w)),
        Format::Json => write_json(report, w),
        Format::Csv => write_csv(report, &mut Printable::new(w)),
        Format::Collapsed => crate::export::write_collapsed(report, None, &mut Printable::new(w)),
        Format::Flamegraph => crate::export::write_flamegraph(report, None, w),
        Format::Pprof => crate::pprof::write_pprof(report, w),
    }
}

/// [`render`], with the hot lines of an annotation coloured as perf
/// colours them when `color` (text to a terminal).
pub fn render_colored(
    report: &Report,
    format: Format,
    w: &mut dyn Write,
    color: bool,
) -> io::Result<()> {
    match (&report.annotations, format, color) {
        (Some(list), Format::Text, true) => {
            text::write_header(report, &mut Printable::new(&mut *w))?;
            annotate::write_annotations_text(report, list, w, true)
        }
        _ => render(report, format, w),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_special_is_the_first_byte_printable_must_look_at_in_any_block() {
        let slow = |buf: &[u8]| {
            buf.iter()
                .position(|&b| matches!(b, 0x00..=0x08 | 0x0b..=0x1f | 0x7f | 0xc2))
        };
        let mut buf = vec![b'a'; 100];
        buf[40] = b'\n';
        buf[41] = b'\t';
        assert_eq!(first_special(&buf), None);
        for at in [0, 31, 32, 33, 63, 64, 99] {
            for b in [0x00u8, 0x08, 0x0b, 0x1f, 0x7f, 0xc2] {
                let mut v = buf.clone();
                v[at] = b;
                if at + 5 < v.len() {
                    v[at + 5] = 0x01;
                }
                assert_eq!(first_special(&v), slow(&v), "{b:#x} at {at}");
                assert_eq!(first_special(&v), Some(at));
            }
        }
        for b in 0..=255u8 {
            assert_eq!(first_special(&[b'x', b]), slow(&[b'x', b]), "{b:#x}");
        }
    }

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
