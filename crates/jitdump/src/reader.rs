//! The incremental reader of one growing dump file.

use std::io;
use std::os::unix::fs::FileExt;

use crate::header::{Header, HEADER_SIZE};
use crate::record::{parse_at, Record, Timed, PREFIX_SIZE};
use crate::{Error, Limits};

/// The most bytes read in one `read_at` (between parses), so that a large
/// `max_bytes` does not make the buffer large.
const CHUNK: usize = 256 << 10;

/// Reads a dump the runtime is still writing: each [`DumpReader::read`]
/// goes on from where the last one stopped.
#[derive(Debug)]
pub struct DumpReader {
    limits: Limits,
    header: Option<Header>,
    /// The file offset of `buf[0]`: the next record's.
    offset: u64,
    /// Bytes read from `offset` on and not yet parsed (a partial record).
    buf: Vec<u8>,
    stats: ReadStats,
    /// An error met after records that were returned; the next read's.
    pending: Option<Error>,
    failed: bool,
}

/// What one [`DumpReader::read`] found.
#[derive(Debug, Default)]
pub struct ReadOutcome {
    /// The whole records read, in file order.
    pub records: Vec<Timed>,
    /// The read stopped at `max_bytes`, not at the file's end: read again.
    /// (When the file ends exactly there, the next read finds nothing and
    /// says `false`.)
    pub more: bool,
}

/// What a reader has read so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadStats {
    /// Bytes parsed: the header and whole records.
    pub bytes: u64,
    /// Code loads.
    pub loads: u64,
    /// Code moves.
    pub moves: u64,
    /// Debug infos.
    pub debug: u64,
    /// Unwinding infos.
    pub unwinding: u64,
    /// Records of unknown kinds (skipped).
    pub unknown: u64,
    /// Code loads whose code was over [`Limits::max_code`] and not kept.
    pub code_not_kept: u64,
}

impl DumpReader {
    /// A reader of a dump from its start.
    pub fn new(limits: Limits) -> Self {
        DumpReader {
            limits,
            header: None,
            offset: 0,
            buf: Vec::new(),
            stats: ReadStats::default(),
            pending: None,
            failed: false,
        }
    }

    /// The header, once read.
    pub fn header(&self) -> Option<&Header> {
        self.header.as_ref()
    }

    /// The next record's file offset (0 before the header is read).
    pub fn offset(&self) -> u64 {
        self.offset
    }

    /// What was read so far.
    pub fn stats(&self) -> &ReadStats {
        &self.stats
    }

    /// Reads from where the last read ended, at most `max_bytes` (but a
    /// whole record up to [`Limits::max_record`] when no record is whole
    /// within `max_bytes`), parses every whole record and returns them; a
    /// partial record at the end stays for the next call (the file grows).
    /// The header is read first, outside `max_bytes`; a file shorter than
    /// the header gives no records yet.
    ///
    /// Errors are final: records parsed before an error are returned, the
    /// error comes with the next call, and after it every call is
    /// [`Error::GivenUp`].
    pub fn read(&mut self, file: &impl FileExt, max_bytes: u64) -> Result<ReadOutcome, Error> {
        if let Some(e) = self.pending.take() {
            return Err(e);
        }
        if self.failed {
            return Err(Error::GivenUp);
        }
        let mut out = ReadOutcome::default();
        match self.read_inner(file, max_bytes, &mut out) {
            Ok(()) => Ok(out),
            Err(e) => {
                self.failed = true;
                self.buf = Vec::new();
                if out.records.is_empty() {
                    Err(e)
                } else {
                    self.pending = Some(e);
                    out.more = false;
                    Ok(out)
                }
            }
        }
    }

    fn read_inner(
        &mut self,
        file: &impl FileExt,
        max_bytes: u64,
        out: &mut ReadOutcome,
    ) -> Result<(), Error> {
        if self.header.is_none() && !self.read_header(file)? {
            return Ok(());
        }
        let mut read = 0u64;
        loop {
            self.parse_buffered(&mut out.records)?;
            let want = if read < max_bytes {
                usize::try_from(max_bytes - read)
                    .unwrap_or(usize::MAX)
                    .min(CHUNK)
            } else if out.records.is_empty() {
                // No record is whole within max_bytes: read on to the end
                // of the first one (its size is checked once its prefix
                // is there, so this stays under max_record).
                match self.buf.first_chunk::<PREFIX_SIZE>() {
                    None => PREFIX_SIZE - self.buf.len(),
                    Some(p) => {
                        let size = u32::from_le_bytes([p[4], p[5], p[6], p[7]]) as usize;
                        size.saturating_sub(self.buf.len()).min(CHUNK)
                    }
                }
            } else {
                out.more = true;
                return Ok(());
            };
            if want == 0 {
                return Ok(());
            }
            let got = self.fill(file, want)?;
            read += got as u64;
            if got < want {
                // The file's end, for now.
                return self.parse_buffered(&mut out.records);
            }
        }
    }

    /// Reads and checks the header; `false` while the file is shorter.
    fn read_header(&mut self, file: &impl FileExt) -> Result<bool, Error> {
        let mut h = [0u8; HEADER_SIZE];
        let n = read_full(file, &mut h, 0)?;
        if n < HEADER_SIZE {
            // Refuse what is surely not a dump now; wait for the rest.
            if n >= 4 {
                Header::parse(&h[..n]).map(|_| ()).or_else(|e| match e {
                    Error::BadHeader(_) => Ok(()),
                    e => Err(e),
                })?;
            }
            return Ok(false);
        }
        let header = Header::parse(&h)?;
        self.offset = header.total_size.into();
        self.stats.bytes = self.offset;
        self.header = Some(header);
        Ok(true)
    }

    /// Appends up to `want` bytes from the file after `buf`'s end.
    fn fill(&mut self, file: &impl FileExt, want: usize) -> Result<usize, Error> {
        let start = self.buf.len();
        self.buf.resize(start + want, 0);
        let at = self.offset.saturating_add(start as u64);
        let got = read_full(file, &mut self.buf[start..], at);
        self.buf.truncate(start + *got.as_ref().unwrap_or(&0));
        Ok(got?)
    }

    /// Parses the whole records in `buf` and drops their bytes.
    fn parse_buffered(&mut self, records: &mut Vec<Timed>) -> Result<(), Error> {
        let mut used = 0;
        let result = loop {
            match parse_at(&self.buf[used..], &self.limits, self.offset) {
                Ok(Some((timed, len))) => {
                    used += len;
                    self.offset += len as u64;
                    self.count(&timed, len);
                    records.push(timed);
                }
                Ok(None) => break Ok(()),
                Err(e) => break Err(e),
            }
        };
        self.buf.drain(..used);
        result
    }

    fn count(&mut self, timed: &Timed, len: usize) {
        let s = &mut self.stats;
        s.bytes += len as u64;
        match &timed.record {
            Record::CodeLoad(l) => {
                s.loads += 1;
                if l.code.is_none() {
                    s.code_not_kept += 1;
                }
            }
            Record::CodeMove(_) => s.moves += 1,
            Record::DebugInfo(_) => s.debug += 1,
            Record::UnwindingInfo(_) => s.unwinding += 1,
            Record::Unknown { .. } => s.unknown += 1,
            Record::Close => {}
        }
    }
}

/// Reads into `buf` at `at` until it is full or the file ends.
fn read_full(file: &impl FileExt, buf: &mut [u8], at: u64) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match file.read_at(&mut buf[n..], at.saturating_add(n as u64)) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}
