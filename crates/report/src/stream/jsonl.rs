//! `--format jsonl`: one JSON object per line, in time order.
//!
//! ```text
//! {"type":"sample","time_ns":26788125274113,"cpu":1,"pid":23941,"tid":23941,"comm":"busy","process":"busy","image":"busy","symbol":"leaf","stack":[{"image":"busy","symbol":"leaf","offset":4421},{"image":"busy","symbol":"main","offset":4493},…]}
//! {"type":"off_cpu","time_ns":…,"cpu":0,"pid":…,"tid":…,"comm":"…","process":"…","kind":"blocked","count":3,"total_ns":1250000,"image":"[kernel.kallsyms]","symbol":"__schedule","stack":[…]}
//! {"type":"lost","time_ns":…,"cpu":1,"kind":"Ring","count":12}
//! {"type":"part","time_ns":…,"number":2,"path":"…/session.000002.pkl"}
//! {"type":"summary","samples":…,"off_cpu":…,"round_middle":…,"out_of_order":…,"notes":[…]}
//! ```
//!
//! A sample: `time_ns` (CLOCK_MONOTONIC, perf's clock), `"time_exact":
//! false` only when the sample was placed at its round's middle (sessions
//! written before per-sample times), `cpu`, `pid`, `tid`, `comm` (the
//! thread's name), `process` (its process's), `image` and `symbol` of the
//! sampled instruction (`symbol` null when unnamed), and `stack`, innermost
//! first (the sampled instruction first), each frame `{"image", "symbol",
//! "offset"}` plus `"address"` where the session tells it (the kernel) and
//! `"kernel": true` for kernel frames. A caller's `offset` is its return
//! address's. An off-CPU aggregate (`profctl start --off-cpu`) is at its
//! round's time (the intervals ended in that round). The last line is the
//! summary. Strings are JSON-escaped (control characters as `\u00XX`, DEL
//! and C1 controls too, so a hostile name cannot reach a terminal as an
//! escape sequence); memory is constant: each frame's text is built once.

use std::io::{self, Write};

use super::names::{FrameId, FrameTable};
use super::script::dec_digits;
use super::{StreamMarker, StreamOffCpu, StreamSample, StreamSink, StreamSummary};

/// Writes JSON lines; see the module documentation.
pub struct JsonlSink<W: Write> {
    out: W,
    /// Each frame's object, built when first needed.
    frames: Vec<Option<Box<[u8]>>>,
    /// Each frame's `"image":…,"symbol":…` pair, for the top-level fields.
    heads: Vec<Option<Box<[u8]>>>,
    buf: Vec<u8>,
}

/// Appends `s` as a JSON string (quoted, escaped).
pub(super) fn push_json_str(v: &mut Vec<u8>, s: &str) {
    v.push(b'"');
    let b = s.as_bytes();
    let mut start = 0;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let c1 = c == 0xc2 && b.get(i + 1).is_some_and(|&n| (0x80..0xa0).contains(&n));
        if c >= 0x20 && c != b'"' && c != b'\\' && c != 0x7f && !c1 {
            i += 1;
            continue;
        }
        v.extend_from_slice(&b[start..i]);
        let code = if c1 {
            u32::from(b[i + 1])
        } else {
            u32::from(c)
        };
        match c {
            b'"' => v.extend_from_slice(b"\\\""),
            b'\\' => v.extend_from_slice(b"\\\\"),
            b'\n' => v.extend_from_slice(b"\\n"),
            b'\r' => v.extend_from_slice(b"\\r"),
            b'\t' => v.extend_from_slice(b"\\t"),
            _ => {
                v.extend_from_slice(b"\\u00");
                v.push(b"0123456789abcdef"[(code >> 4) as usize]);
                v.push(b"0123456789abcdef"[(code & 0xf) as usize]);
            }
        }
        i += if c1 { 2 } else { 1 };
        start = i;
    }
    v.extend_from_slice(&b[start..]);
    v.push(b'"');
}

#[inline]
fn push_num(v: &mut Vec<u8>, x: u64) {
    let mut d = [0u8; 20];
    v.extend_from_slice(dec_digits(x, &mut d));
}

/// `,"key":` before a value.
#[inline]
fn key(v: &mut Vec<u8>, k: &str) {
    v.extend_from_slice(b",\"");
    v.extend_from_slice(k.as_bytes());
    v.extend_from_slice(b"\":");
}

fn frame_json(table: &FrameTable, id: FrameId) -> Box<[u8]> {
    let f = table.frame(id);
    let mut v = Vec::with_capacity(64);
    v.extend_from_slice(b"{\"image\":");
    push_json_str(&mut v, &table.image(f.image).name);
    key(&mut v, "symbol");
    match table.symbol_name(f) {
        Some(s) => push_json_str(&mut v, s),
        None => v.extend_from_slice(b"null"),
    }
    key(&mut v, "offset");
    push_num(&mut v, f.offset);
    if let Some(a) = f.address {
        key(&mut v, "address");
        push_num(&mut v, a);
    }
    if f.kernel {
        key(&mut v, "kernel");
        v.extend_from_slice(b"true");
    }
    v.push(b'}');
    v.into_boxed_slice()
}

fn head_json(table: &FrameTable, id: FrameId) -> Box<[u8]> {
    let f = table.frame(id);
    let mut v = Vec::with_capacity(48);
    key(&mut v, "image");
    push_json_str(&mut v, &table.image(f.image).name);
    key(&mut v, "symbol");
    match table.symbol_name(f) {
        Some(s) => push_json_str(&mut v, s),
        None => v.extend_from_slice(b"null"),
    }
    v.into_boxed_slice()
}

fn cached(
    cache: &mut Vec<Option<Box<[u8]>>>,
    id: FrameId,
    make: impl FnOnce() -> Box<[u8]>,
) -> &[u8] {
    let i = id as usize;
    if i >= cache.len() {
        cache.resize(i + 1, None);
    }
    cache[i].get_or_insert_with(make)
}

impl<W: Write> JsonlSink<W> {
    /// A sink writing to `out` (buffer it).
    pub fn new(out: W) -> Self {
        JsonlSink {
            out,
            frames: Vec::new(),
            heads: Vec::new(),
            buf: Vec::with_capacity(4096),
        }
    }

    /// The writer back.
    pub fn into_inner(self) -> W {
        self.out
    }

    /// The common part of samples and off-CPU objects: from `,"cpu"` on.
    #[allow(clippy::too_many_arguments)]
    fn task(buf: &mut Vec<u8>, cpu: u32, pid: u32, tid: u32, comm: &str, process: &str) {
        key(buf, "cpu");
        push_num(buf, u64::from(cpu));
        key(buf, "pid");
        push_num(buf, u64::from(pid));
        key(buf, "tid");
        push_num(buf, u64::from(tid));
        key(buf, "comm");
        push_json_str(buf, comm);
        key(buf, "process");
        push_json_str(buf, process);
    }

    fn stack(&mut self, buf: &mut Vec<u8>, frames: &[FrameId], table: &FrameTable) {
        if let Some(&leaf) = frames.first() {
            buf.extend_from_slice(cached(&mut self.heads, leaf, || head_json(table, leaf)));
        }
        key(buf, "stack");
        buf.push(b'[');
        for (i, &id) in frames.iter().enumerate() {
            if i > 0 {
                buf.push(b',');
            }
            buf.extend_from_slice(cached(&mut self.frames, id, || frame_json(table, id)));
        }
        buf.push(b']');
    }
}

impl<W: Write> StreamSink for JsonlSink<W> {
    fn sample(&mut self, s: &StreamSample<'_>) -> io::Result<()> {
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        buf.extend_from_slice(b"{\"type\":\"sample\",\"time_ns\":");
        push_num(&mut buf, s.time_ns);
        if !s.time_exact {
            key(&mut buf, "time_exact");
            buf.extend_from_slice(b"false");
        }
        Self::task(&mut buf, s.cpu, s.pid, s.tid, s.comm, s.process);
        self.stack(&mut buf, s.frames, s.table);
        buf.extend_from_slice(b"}\n");
        let r = self.out.write_all(&buf);
        self.buf = buf;
        r
    }

    fn off_cpu(&mut self, o: &StreamOffCpu<'_>) -> io::Result<()> {
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        buf.extend_from_slice(b"{\"type\":\"off_cpu\",\"time_ns\":");
        push_num(&mut buf, o.time_ns);
        Self::task(&mut buf, o.cpu, o.pid, o.tid, o.comm, o.process);
        key(&mut buf, "kind");
        push_json_str(&mut buf, o.kind.name());
        key(&mut buf, "count");
        push_num(&mut buf, o.count);
        key(&mut buf, "total_ns");
        push_num(&mut buf, o.total_ns);
        self.stack(&mut buf, o.frames, o.table);
        buf.extend_from_slice(b"}\n");
        let r = self.out.write_all(&buf);
        self.buf = buf;
        r
    }

    fn marker(&mut self, m: &StreamMarker<'_>) -> io::Result<()> {
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        match *m {
            StreamMarker::Lost {
                time_ns,
                cpu,
                kind,
                count,
                ..
            } => {
                buf.extend_from_slice(b"{\"type\":\"lost\",\"time_ns\":");
                push_num(&mut buf, time_ns);
                key(&mut buf, "cpu");
                push_num(&mut buf, u64::from(cpu));
                key(&mut buf, "kind");
                push_json_str(&mut buf, &format!("{kind:?}"));
                key(&mut buf, "count");
                push_num(&mut buf, count);
            }
            StreamMarker::PartStart {
                time_ns,
                number,
                path,
                ..
            } => {
                buf.extend_from_slice(b"{\"type\":\"part\",\"time_ns\":");
                push_num(&mut buf, time_ns);
                key(&mut buf, "number");
                push_num(&mut buf, number);
                key(&mut buf, "path");
                push_json_str(&mut buf, &path.to_string_lossy());
            }
        }
        buf.extend_from_slice(b"}\n");
        let r = self.out.write_all(&buf);
        self.buf = buf;
        r
    }

    fn end(&mut self, s: &StreamSummary) -> io::Result<()> {
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        buf.extend_from_slice(b"{\"type\":\"summary\",\"samples\":");
        push_num(&mut buf, s.samples);
        key(&mut buf, "off_cpu");
        push_num(&mut buf, s.off_cpu);
        key(&mut buf, "markers");
        push_num(&mut buf, s.markers);
        key(&mut buf, "round_middle");
        push_num(&mut buf, s.round_middle);
        key(&mut buf, "out_of_order");
        push_num(&mut buf, s.out_of_order);
        key(&mut buf, "notes");
        buf.push(b'[');
        for (i, n) in s.notes().iter().enumerate() {
            if i > 0 {
                buf.push(b',');
            }
            push_json_str(&mut buf, n);
        }
        buf.extend_from_slice(b"]}\n");
        self.out.write_all(&buf)?;
        self.buf = buf;
        self.out.flush()
    }
}

/// Streams `sessions` as JSON lines to `out`.
///
/// # Errors
/// As [`super::stream`].
pub fn write_jsonl(
    sessions: &[crate::Session],
    opts: &crate::ReportOptions,
    sources: &crate::SymbolSources,
    progress: &dyn crate::Progress,
    out: &mut dyn Write,
) -> crate::Result<StreamSummary> {
    let mut sink = JsonlSink::new(io::BufWriter::with_capacity(1 << 20, out));
    super::stream(sessions, opts, sources, progress, &mut sink)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_strings_are_valid_json() {
        for s in [
            "plain",
            "quote\" backslash\\ end",
            "nl\ncr\rtab\t",
            "\u{0}\u{1}\u{1f}\u{7f}",
            "esc \u{1b}[2J",
            "c1 \u{85}\u{9f} and é ✓ 😀",
            "\u{fffd}\u{fffd} lossy",
            "",
        ] {
            let mut v = Vec::new();
            push_json_str(&mut v, s);
            let text = String::from_utf8(v).expect("UTF-8");
            assert!(
                !text.bytes().any(|b| b < 0x20 || b == 0x7f),
                "{text:?} holds a raw control byte"
            );
            assert!(
                !text.contains('\u{85}') && !text.contains('\u{9f}'),
                "{text:?}"
            );
            let back: String = serde_json::from_str(&text).expect(&text);
            assert_eq!(back, s);
        }
    }
}
