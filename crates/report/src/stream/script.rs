//! `--format script`: what `perf script -F comm,pid,tid,cpu,time,event,ip,sym,dso`
//! prints (perf 6.1's `builtin-script.c`), sample by sample in time order.
//!
//! With call stacks (sessions recorded with `-g` or `--call-graph`), a
//! header line, one line per frame (innermost first), and a blank line:
//!
//! ```text
//! busy 23941/23941 [001] 26788.125274: cpu-clock:
//! <TAB>            1145 leaf (/tmp/pscr/busy)
//! <TAB>            118d main (/tmp/pscr/busy)
//! <TAB>           2724a __libc_start_call_main (/usr/lib/x86_64-linux-gnu/libc.so.6)
//!
//! ```
//!
//! (`<TAB>` is a tab.) Without, one line per sample, the command right-aligned in 16 columns:
//!
//! ```text
//!             busy 25461/25461 [001] 26819.633040: cpu-clock:  ffffffff81360092 handle_softirqs ([kernel.kallsyms])
//! ```
//!
//! The header is perf's: the command (`%s`, or `%16s` without stacks),
//! `%5d/%-5d` process and thread ids, `[%03d]` CPU, the time as
//! `seconds.microseconds` (truncated) right-aligned in 12 columns, the
//! event and a colon. A frame line is a tab, the address in 16 columns of
//! hex, the symbol (`[unknown]` when unnamed) and the binary's path in
//! parentheses (`[unknown]` for none). Addresses are perf's for call
//! stacks: the kernel's own addresses, and for user code the offset in its
//! binary (perf's map-relative ip). Where perf prints a user sample's
//! absolute address (no call stacks) or a caller it could not place, this
//! prints the offset in the binary (0 for the latter): the session keeps
//! (binary, offset), not addresses. Control characters in commands,
//! symbols and paths (from untrusted processes and files) are written as
//! `\xNN` so each sample stays one block. Off-CPU aggregates and markers
//! are not printed (they are in `--format jsonl`).

use std::io::{self, Write};

use super::names::{FrameId, FrameTable, StreamFrame};
use super::{StreamInfo, StreamSample, StreamSink, StreamSummary};

/// Writes perf script's text; see the module documentation.
pub struct ScriptSink<W: Write> {
    out: W,
    /// `event: ` (with the colon and space).
    event: Vec<u8>,
    callchain: bool,
    /// Each frame's line (`\t<ip> sym (dso)\n`, or without the tab and
    /// with the ip in its own 16 columns for lines without stacks), built
    /// when first needed.
    lines: Vec<Option<Box<[u8]>>>,
    buf: Vec<u8>,
    /// The last command seen, and its cleaned text.
    comm: String,
    comm_text: Vec<u8>,
}

impl<W: Write> ScriptSink<W> {
    /// A sink writing to `out` (buffer it: each sample is a few writes).
    pub fn new(out: W) -> Self {
        ScriptSink {
            out,
            event: b"cpu-clock: ".to_vec(),
            callchain: false,
            lines: Vec::new(),
            buf: Vec::with_capacity(4096),
            comm: String::new(),
            comm_text: Vec::new(),
        }
    }

    /// The writer back.
    pub fn into_inner(self) -> W {
        self.out
    }
}

/// Frame `id`'s line, built on first use.
#[inline]
fn line<'l>(
    lines: &'l mut Vec<Option<Box<[u8]>>>,
    callchain: bool,
    id: FrameId,
    table: &FrameTable,
) -> &'l [u8] {
    let i = id as usize;
    if i >= lines.len() {
        lines.resize(i + 1, None);
    }
    lines[i].get_or_insert_with(|| frame_line(table, table.frame(id), callchain))
}

/// A frame's line after the header (or in the call stack).
fn frame_line(table: &FrameTable, f: &StreamFrame, callchain: bool) -> Box<[u8]> {
    let mut v = Vec::with_capacity(64);
    if callchain {
        v.push(b'\t');
    }
    let ip = f.address.unwrap_or(f.offset);
    let mut hex = [0u8; 16];
    let digits = hex_digits(ip, &mut hex);
    v.extend(std::iter::repeat_n(
        b' ',
        16usize.saturating_sub(digits.len()),
    ));
    v.extend_from_slice(digits);
    v.push(b' ');
    match table.symbol_name(f) {
        Some(name) => push_clean(&mut v, name),
        None => v.extend_from_slice(b"[unknown]"),
    }
    v.extend_from_slice(b" (");
    push_clean(&mut v, &table.image(f.image).path);
    v.extend_from_slice(b")\n");
    v.into_boxed_slice()
}

/// `x` in lower-case hex, no leading zeros ("0" for 0), in `buf`.
#[inline]
fn hex_digits(mut x: u64, buf: &mut [u8; 16]) -> &[u8] {
    let mut i = 16;
    loop {
        i -= 1;
        buf[i] = b"0123456789abcdef"[(x & 0xf) as usize];
        x >>= 4;
        if x == 0 {
            break;
        }
    }
    &buf[i..]
}

/// `x` in decimal, in `buf`.
#[inline]
pub(super) fn dec_digits(mut x: u64, buf: &mut [u8; 20]) -> &[u8] {
    let mut i = 20;
    loop {
        i -= 1;
        buf[i] = b'0' + (x % 10) as u8;
        x /= 10;
        if x == 0 {
            break;
        }
    }
    &buf[i..]
}

/// Whether `s` needs escaping: a C0 control, DEL or a C1 control (UTF-8
/// `C2 80`..`C2 9F`).
#[inline]
fn needs_cleaning(s: &str) -> bool {
    let b = s.as_bytes();
    b.iter().enumerate().any(|(i, &c)| {
        c < 0x20
            || c == 0x7f
            || (c == 0xc2 && b.get(i + 1).is_some_and(|&n| (0x80..0xa0).contains(&n)))
    })
}

/// Appends `s`, control characters as `\xNN` (C1 ones as `\xc2\xNN`).
fn push_clean(v: &mut Vec<u8>, s: &str) {
    if !needs_cleaning(s) {
        v.extend_from_slice(s.as_bytes());
        return;
    }
    for ch in s.chars() {
        if ch.is_control() {
            let mut b = [0u8; 4];
            for &x in ch.encode_utf8(&mut b).as_bytes() {
                v.extend_from_slice(b"\\x");
                v.push(b"0123456789abcdef"[(x >> 4) as usize]);
                v.push(b"0123456789abcdef"[(x & 0xf) as usize]);
            }
        } else {
            let mut b = [0u8; 4];
            v.extend_from_slice(ch.encode_utf8(&mut b).as_bytes());
        }
    }
}

/// Appends `digits` right-aligned in `width` columns.
#[inline]
fn push_right(v: &mut Vec<u8>, digits: &[u8], width: usize) {
    v.extend(std::iter::repeat_n(
        b' ',
        width.saturating_sub(digits.len()),
    ));
    v.extend_from_slice(digits);
}

impl<W: Write> StreamSink for ScriptSink<W> {
    fn begin(&mut self, info: &StreamInfo<'_>) -> io::Result<()> {
        self.callchain = info.call_graph;
        self.event.clear();
        push_clean(&mut self.event, info.event);
        self.event.extend_from_slice(b": ");
        Ok(())
    }

    fn sample(&mut self, s: &StreamSample<'_>) -> io::Result<()> {
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        let mut num = [0u8; 20];
        // comm, cleaned once per distinct name in a row
        if s.comm != self.comm || self.comm_text.is_empty() {
            self.comm.clear();
            self.comm.push_str(s.comm);
            self.comm_text.clear();
            push_clean(&mut self.comm_text, s.comm);
        }
        if !self.callchain && self.comm_text.len() < 16 {
            buf.extend(std::iter::repeat_n(b' ', 16 - self.comm_text.len()));
        }
        buf.extend_from_slice(&self.comm_text);
        buf.push(b' ');
        // %5d/%-5d
        push_right(&mut buf, dec_digits(u64::from(s.pid), &mut num), 5);
        buf.push(b'/');
        let tid = dec_digits(u64::from(s.tid), &mut num);
        let pad = 5usize.saturating_sub(tid.len());
        buf.extend_from_slice(tid);
        buf.extend(std::iter::repeat_n(b' ', pad));
        // [%03d]
        buf.extend_from_slice(b" [");
        let cpu = dec_digits(u64::from(s.cpu), &mut num);
        buf.extend(std::iter::repeat_n(b'0', 3usize.saturating_sub(cpu.len())));
        buf.extend_from_slice(cpu);
        buf.extend_from_slice(b"] ");
        // %12s of sec.usec
        let secs = s.time_ns / 1_000_000_000;
        let usecs = (s.time_ns % 1_000_000_000) / 1_000;
        let mut t = [0u8; 28];
        let sd = dec_digits(secs, &mut num);
        let mut n = sd.len();
        t[..n].copy_from_slice(sd);
        t[n] = b'.';
        n += 1;
        let ud = dec_digits(usecs, &mut num);
        for _ in ud.len()..6 {
            t[n] = b'0';
            n += 1;
        }
        t[n..n + ud.len()].copy_from_slice(ud);
        n += ud.len();
        push_right(&mut buf, &t[..n], 12);
        buf.extend_from_slice(b": ");
        buf.extend_from_slice(&self.event);
        // Frame lines go straight to the writer (one copy of each).
        let r = if self.callchain {
            buf.push(b'\n');
            (|| {
                self.out.write_all(&buf)?;
                for &id in s.frames {
                    self.out
                        .write_all(line(&mut self.lines, true, id, s.table))?;
                }
                self.out.write_all(b"\n")
            })()
        } else {
            buf.push(b' ');
            match s.frames.first() {
                Some(&id) => buf.extend_from_slice(line(&mut self.lines, false, id, s.table)),
                None => buf.push(b'\n'),
            }
            self.out.write_all(&buf)
        };
        self.buf = buf;
        r
    }

    fn end(&mut self, _summary: &StreamSummary) -> io::Result<()> {
        self.out.flush()
    }
}

/// Streams `sessions` as perf script's text to `out`.
///
/// # Errors
/// As [`super::stream`].
pub fn write_script(
    sessions: &[crate::Session],
    opts: &crate::ReportOptions,
    sources: &crate::SymbolSources,
    progress: &dyn crate::Progress,
    out: &mut dyn Write,
) -> crate::Result<StreamSummary> {
    let mut sink = ScriptSink::new(io::BufWriter::with_capacity(1 << 20, out));
    super::stream(sessions, opts, sources, progress, &mut sink)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_and_cleaning() {
        let mut h = [0u8; 16];
        assert_eq!(hex_digits(0, &mut h), b"0");
        assert_eq!(
            hex_digits(0xffff_ffff_8136_0092, &mut h),
            b"ffffffff81360092"
        );
        let mut d = [0u8; 20];
        assert_eq!(dec_digits(0, &mut d), b"0");
        assert_eq!(dec_digits(u64::MAX, &mut d), b"18446744073709551615");
        let mut v = Vec::new();
        push_clean(&mut v, "a\nb\t\u{1b}[31m\u{85}é ok");
        assert_eq!(
            String::from_utf8(v).unwrap(),
            "a\\x0ab\\x09\\x1b[31m\\xc2\\x85é ok"
        );
        assert!(!needs_cleaning("llvm::Loop<a, b>::analyze é"));
    }
}
