//! `perf record -z`: the data section's `PERF_RECORD_COMPRESSED` (81) and
//! `PERF_RECORD_COMPRESSED2` (83) records hold zstd frames whose
//! decompressed bytes, end to end, are the records perf would have written
//! (a record may span two of them: perf compresses the whole recording as
//! one zstd stream, flushed at each record's end). Before linux-perf-data
//! reads the file, it is copied to an unnamed temporary file with those
//! records expanded in place, each where it was among the records perf
//! left uncompressed (`FINISHED_ROUND`), and the feature sections after
//! the data moved with it.
//!
//! A crafted file must not expand without limit: the decompressed bytes
//! are bounded by [`MAX_RATIO`] times the data section's size, and by
//! [`MAX_EXPANDED`] in all, and a frame's window by [`MAX_WINDOW`]; past a
//! bound the import is refused, the bound named.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use zstd::stream::raw::{DParameter, Decoder, InBuffer, Operation, OutBuffer};

/// `PERF_RECORD_COMPRESSED`: the body is zstd data.
const RECORD_COMPRESSED: u32 = 81;
/// `PERF_RECORD_COMPRESSED2`: the body is the zstd data's size, then it
/// (then padding).
const RECORD_COMPRESSED2: u32 = 83;
/// `PERF_RECORD_AUXTRACE`: trace data of the size its body says follows.
const RECORD_AUXTRACE: u32 = 71;
/// `HEADER_COMPRESSED`'s bit in the feature bitmap: perf sets it with `-z`.
pub(crate) const COMPRESSED_BIT: u32 = 27;

/// Most decompressed bytes per byte of the data section: perf's level 1
/// makes some 5 to 30 of each.
pub const MAX_RATIO: u64 = 256;
/// Most decompressed bytes in all (4 GiB).
pub const MAX_EXPANDED: u64 = 4 << 30;
/// Largest zstd window the stream may ask for (zstd's own default limit,
/// 128 MiB): the decoder keeps that much.
pub const MAX_WINDOW: u64 = 1 << 27;

/// What stops an expansion.
#[derive(Debug, thiserror::Error)]
pub enum ExpandError {
    /// A bound was passed.
    #[error(
        "its compressed records expand past {limit} bytes (at most {MAX_RATIO} times \
         its data section's {data} bytes, and at most {MAX_EXPANDED} bytes)"
    )]
    TooLarge {
        /// The bound that applied.
        limit: u64,
        /// The data section's size.
        data: u64,
    },
    /// A stream's bound was passed.
    #[error(
        "its compressed records expand past {limit} bytes (at most {MAX_RATIO} times \
         the {compressed} compressed bytes read so far, and 1 MiB)"
    )]
    StreamTooLarge {
        /// The bound then.
        limit: u64,
        /// Compressed bytes read so far.
        compressed: u64,
    },
    /// Not zstd data perf writes.
    #[error("a compressed record at byte {at}: {why}")]
    Bad {
        /// The record's offset in the file.
        at: u64,
        /// What is wrong.
        why: String,
    },
    /// The temporary copy could not be written or the file read.
    #[error("expanding its compressed records: {0}")]
    Io(#[from] std::io::Error),
}

fn uint(b: &[u8], big: bool) -> u64 {
    b.iter().enumerate().fold(0u64, |v, (i, &x)| {
        let shift = 8 * if big { b.len() - 1 - i } else { i };
        v | u64::from(x) << shift
    })
}

fn put(v: u64, n: usize, big: bool) -> Vec<u8> {
    let b = v.to_le_bytes();
    let mut out = b[..n].to_vec();
    if big {
        out.reverse();
    }
    out
}

/// Copies `f` (a perf.data file of `len` bytes whose 104-byte header is
/// `h`, its sections checked to lie within it) to a temporary file with
/// its compressed records expanded; returns it, at its start.
pub(crate) fn expand(
    f: &mut File,
    len: u64,
    h: &[u8; 104],
    big: bool,
) -> Result<File, ExpandError> {
    let at = |i: usize| uint(&h[i * 8..i * 8 + 8], big);
    let (data_off, data_size) = (at(5), at(6));
    let data_end = data_off.saturating_add(data_size);
    let limit = MAX_RATIO.saturating_mul(data_size).min(MAX_EXPANDED);
    let mut out = BufWriter::new(tempfile::tempfile()?);
    f.seek(SeekFrom::Start(0))?;
    let mut r = BufReader::with_capacity(1 << 16, &mut *f);
    // Everything before the data (header, attributes, their ids) as is.
    std::io::copy(&mut (&mut r).take(data_off), &mut out)?;
    let mut pos = data_off;
    let mut expanded = 0u64;
    // One stream for the whole data section: perf compresses every record
    // with the same context, flushed at each record's end.
    let mut decoder = Decoder::new()?;
    decoder.set_parameter(DParameter::WindowLogMax(MAX_WINDOW.ilog2()))?;
    let mut chunk = vec![0u8; 1 << 16];
    let mut body = Vec::new();
    while pos + 8 <= data_end {
        let mut rh = [0u8; 8];
        r.read_exact(&mut rh)?;
        let kind = uint(&rh[..4], big) as u32;
        let size = uint(&rh[6..8], big);
        if size < 8 || pos + size > data_end {
            // Not a record: copied as it is, for the reader to judge.
            out.write_all(&rh)?;
            std::io::copy(&mut (&mut r).take(data_end - pos - 8), &mut out)?;
            pos = data_end;
            break;
        }
        body.resize((size - 8) as usize, 0);
        r.read_exact(&mut body)?;
        let frames = match kind {
            RECORD_COMPRESSED => Some(&body[..]),
            RECORD_COMPRESSED2 => {
                let n = body.get(..8).map(|b| uint(b, big));
                Some(
                    n.and_then(|n| body.get(8..8usize.checked_add(usize::try_from(n).ok()?)?))
                        .ok_or_else(|| ExpandError::Bad {
                            at: pos,
                            why: "its data size lies beyond the record".into(),
                        })?,
                )
            }
            _ => None,
        };
        match frames {
            Some(input) => {
                let mut inb = InBuffer::around(input);
                loop {
                    let mut outb = OutBuffer::around(&mut chunk[..]);
                    decoder
                        .run(&mut inb, &mut outb)
                        .map_err(|e| ExpandError::Bad {
                            at: pos,
                            why: format!("zstd data does not decode: {e}"),
                        })?;
                    let n = outb.pos();
                    expanded += n as u64;
                    if expanded > limit {
                        return Err(ExpandError::TooLarge {
                            limit,
                            data: data_size,
                        });
                    }
                    out.write_all(&chunk[..n])?;
                    // Done when the input is read and the output was not
                    // cut short by the chunk's size.
                    if inb.pos() == input.len() && n < chunk.len() {
                        break;
                    }
                }
            }
            None => {
                out.write_all(&rh)?;
                out.write_all(&body)?;
                if kind == RECORD_AUXTRACE && body.len() >= 8 {
                    // Its trace data (within the section: checked before).
                    let aux = uint(&body[..8], big).min(data_end - pos - size);
                    std::io::copy(&mut (&mut r).take(aux), &mut out)?;
                    pos += aux;
                }
            }
        }
        pos += size;
    }
    if pos < data_end {
        std::io::copy(&mut (&mut r).take(data_end - pos), &mut out)?;
    }
    let new_end = out.stream_position()?;
    // The feature table, its sections after the data moved as the data's
    // end moved, then the rest of the file as it is.
    let bits = (0..256usize)
        .filter(|b| at(9 + b / 64) >> (b % 64) & 1 == 1)
        .count() as u64;
    let mut table = vec![0u8; (bits * 16) as usize];
    r.read_exact(&mut table)?;
    for e in table.chunks_exact_mut(16) {
        let off = uint(&e[..8], big);
        if off >= data_end {
            let moved = off - data_end + new_end;
            e[..8].copy_from_slice(&put(moved, 8, big));
        }
    }
    out.write_all(&table)?;
    let rest = len.saturating_sub(data_end + bits * 16);
    std::io::copy(&mut r.take(rest), &mut out)?;
    let mut out = out.into_inner().map_err(|e| e.into_error())?;
    out.seek(SeekFrom::Start(48))?;
    out.write_all(&put(new_end - data_off, 8, big))?;
    out.seek(SeekFrom::Start(0))?;
    Ok(out)
}

/// `PERF_RECORD_HEADER_TRACING_DATA`: in a pipe, the tracing data of the
/// size its body says follows the record.
const RECORD_TRACING_DATA: u32 = 66;

/// What a [`Stream`] met that the reader is not to see: why it stopped
/// (the reader sees only an error), and what it left out.
#[derive(Debug, Default)]
pub(crate) struct StreamReport {
    /// Why the stream was cut short, if it was.
    pub failure: Option<ExpandError>,
    /// Records left out, with the bytes after them: AUXTRACE (with its
    /// trace data) and HEADER_TRACING_DATA (with the tracing data).
    pub skipped: u64,
}

/// A pipe-mode perf.data stream (`perf record -o -`) as linux-perf-data is
/// to read it: compressed records expanded in place, as they come, and
/// the records whose body is followed by more data (AUXTRACE's trace
/// data, HEADER_TRACING_DATA's tracing data, which the reader would take
/// for records or allocate as claimed) left out, counted. Memory: one
/// record, the decoder's window. The decompressed bytes are bounded by
/// [`MAX_RATIO`] times the compressed bytes read so far (plus 1 MiB): a
/// stream has no length to bound it by, and keeps nothing.
pub(crate) struct Stream<R> {
    inner: R,
    big: bool,
    started: bool,
    /// Bytes read from `inner` so far.
    at: u64,
    /// Bytes to hand on before the next record: a record, or a partial
    /// one the stream ended in.
    pending: Vec<u8>,
    pending_at: usize,
    /// The compressed record being decoded, and how far.
    zbody: Vec<u8>,
    zat: Option<usize>,
    decoder: Decoder<'static>,
    compressed: u64,
    expanded: u64,
    report: std::rc::Rc<std::cell::RefCell<StreamReport>>,
}

impl<R: Read> Stream<R> {
    /// `inner` from its start (the 16-byte pipe header); what it met goes
    /// to `report`.
    pub(crate) fn new(
        inner: R,
        report: std::rc::Rc<std::cell::RefCell<StreamReport>>,
    ) -> std::io::Result<Self> {
        let mut decoder = Decoder::new()?;
        decoder.set_parameter(DParameter::WindowLogMax(MAX_WINDOW.ilog2()))?;
        Ok(Stream {
            inner,
            big: false,
            started: false,
            at: 0,
            pending: Vec::new(),
            pending_at: 0,
            zbody: Vec::new(),
            zat: None,
            decoder,
            compressed: 0,
            expanded: 0,
            report,
        })
    }

    /// Reads up to `buf.len()` bytes (fewer only at the end).
    fn fill(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let mut n = 0;
        while n < buf.len() {
            match self.inner.read(&mut buf[n..]) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        self.at += n as u64;
        Ok(n)
    }

    fn fail(&self, e: ExpandError) -> std::io::Error {
        let msg = e.to_string();
        self.report.borrow_mut().failure = Some(e);
        std::io::Error::new(std::io::ErrorKind::InvalidData, msg)
    }

    /// Reads the next record into `pending` (or decoding state); false at
    /// the stream's end.
    fn next_record(&mut self) -> std::io::Result<bool> {
        self.pending.clear();
        self.pending_at = 0;
        if !self.started {
            // The pipe header: magic and its size, 16 (more from a newer
            // perf: read past, and the size said 16).
            self.started = true;
            let mut h = [0u8; 16];
            let n = self.fill(&mut h)?;
            self.big = &h[..8] == b"2ELIFREP";
            if n == 16 {
                let extra = uint(&h[8..], self.big).saturating_sub(16);
                let skipped =
                    std::io::copy(&mut (&mut self.inner).take(extra), &mut std::io::sink())?;
                self.at += skipped;
                h[8..].copy_from_slice(&put(16, 8, self.big));
            }
            self.pending.extend_from_slice(&h[..n]);
            return Ok(n > 0);
        }
        let mut h = [0u8; 8];
        let n = self.fill(&mut h)?;
        if n < 8 {
            self.pending.extend_from_slice(&h[..n]);
            return Ok(n > 0);
        }
        let kind = uint(&h[..4], self.big) as u32;
        let size = uint(&h[6..8], self.big) as usize;
        let start = self.at - 8;
        let mut body = std::mem::take(&mut self.zbody);
        body.resize(size.saturating_sub(8), 0);
        let got = self.fill(&mut body)?;
        body.truncate(got);
        if size < 8 || got < size - 8 {
            // Not a record, or cut short: handed on for the reader to judge.
            self.pending.extend_from_slice(&h);
            self.pending.extend_from_slice(&body);
            self.zbody = body;
            return Ok(true);
        }
        match kind {
            RECORD_COMPRESSED | RECORD_COMPRESSED2 => {
                let (from, to) = if kind == RECORD_COMPRESSED {
                    (0, body.len())
                } else {
                    let n = body.get(..8).map(|b| uint(b, self.big));
                    match n.and_then(|n| usize::try_from(n).ok()?.checked_add(8)) {
                        Some(end) if end <= body.len() => (8, end),
                        _ => {
                            return Err(self.fail(ExpandError::Bad {
                                at: start,
                                why: "its data size lies beyond the record".into(),
                            }))
                        }
                    }
                };
                body.truncate(to);
                body.drain(..from);
                self.compressed += body.len() as u64;
                self.zbody = body;
                self.zat = Some(0);
            }
            RECORD_AUXTRACE | RECORD_TRACING_DATA => {
                // The data after the record: AUXTRACE's size is its body's
                // first u64, HEADER_TRACING_DATA's its first u32 (padded
                // to 8 bytes). Read past, in small steps.
                let after = if kind == RECORD_AUXTRACE {
                    body.get(..8).map(|b| uint(b, self.big))
                } else {
                    body.get(..4).map(|b| uint(b, self.big).next_multiple_of(8))
                };
                let after = after.unwrap_or(0);
                let skipped =
                    std::io::copy(&mut (&mut self.inner).take(after), &mut std::io::sink())?;
                self.at += skipped;
                self.report.borrow_mut().skipped += 1;
                self.zbody = body;
            }
            _ => {
                self.pending.extend_from_slice(&h);
                self.pending.extend_from_slice(&body);
                self.zbody = body;
            }
        }
        Ok(true)
    }
}

impl<R: Read> Read for Stream<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            if self.pending_at < self.pending.len() {
                let n = buf.len().min(self.pending.len() - self.pending_at);
                buf[..n].copy_from_slice(&self.pending[self.pending_at..self.pending_at + n]);
                self.pending_at += n;
                return Ok(n);
            }
            if let Some(zat) = self.zat {
                let mut inb = InBuffer::around(&self.zbody[zat..]);
                let mut outb = OutBuffer::around(&mut *buf);
                let run = self.decoder.run(&mut inb, &mut outb);
                let (used, n) = (inb.pos(), outb.pos());
                if let Err(e) = run {
                    let at = self.at;
                    return Err(self.fail(ExpandError::Bad {
                        at,
                        why: format!("zstd data does not decode: {e}"),
                    }));
                }
                let zat = zat + used;
                self.zat = Some(zat);
                self.expanded += n as u64;
                let limit = MAX_RATIO.saturating_mul(self.compressed) + (1 << 20);
                if self.expanded > limit {
                    return Err(self.fail(ExpandError::StreamTooLarge {
                        limit,
                        compressed: self.compressed,
                    }));
                }
                if n > 0 {
                    return Ok(n);
                }
                if zat >= self.zbody.len() {
                    self.zat = None;
                }
                // (No output and input left: the decoder wants more than
                // this record holds; the next record brings it.)
                if used == 0 {
                    self.zat = None;
                }
                continue;
            }
            if !self.next_record()? {
                return Ok(0);
            }
        }
    }
}
