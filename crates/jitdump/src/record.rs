//! The records and the parser of one record.

use std::sync::Arc;

use crate::text::sanitise;
use crate::{Error, Limits};

/// The size of a record's prefix: `id u32, total_size u32, timestamp u64`.
pub const PREFIX_SIZE: usize = 16;

pub(crate) const JIT_CODE_LOAD: u32 = 0;
pub(crate) const JIT_CODE_MOVE: u32 = 1;
pub(crate) const JIT_CODE_DEBUG_INFO: u32 = 2;
pub(crate) const JIT_CODE_CLOSE: u32 = 3;
pub(crate) const JIT_CODE_UNWINDING_INFO: u32 = 4;

/// The fixed part of a code load's body: pid, tid, vma, code_addr,
/// code_size, code_index.
const CODE_LOAD_FIXED: usize = 40;
/// The body of a code move.
const CODE_MOVE_FIXED: usize = 48;
/// The fixed part of a debug info's body: code_addr, nr_entry.
const DEBUG_INFO_FIXED: usize = 16;
/// The fixed part of a debug entry: addr, line, discrim.
const DEBUG_ENTRY_FIXED: usize = 16;
/// The fixed part of an unwinding info's body: unwinding_size,
/// eh_frame_hdr_size, mapped_size.
const UNWINDING_FIXED: usize = 24;

/// A record with its prefix's timestamp and where it was in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Timed {
    /// The prefix's timestamp (the clock the header's
    /// [`crate::Header::arch_timestamp`] says).
    pub time: u64,
    /// The record's file offset ([`DumpReader`](crate::DumpReader)); 0 from
    /// [`parse_record`].
    pub offset: u64,
    /// The record.
    pub record: Record,
}

/// One record of a dump.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// Code was compiled (`JIT_CODE_LOAD`).
    CodeLoad(CodeLoad),
    /// Code was moved (`JIT_CODE_MOVE`).
    CodeMove(CodeMove),
    /// Source lines of the next code load (`JIT_CODE_DEBUG_INFO`).
    DebugInfo(DebugInfo),
    /// `.eh_frame` of the next code load (`JIT_CODE_UNWINDING_INFO`).
    UnwindingInfo(UnwindingInfo),
    /// The runtime closed the dump (`JIT_CODE_CLOSE`).
    Close,
    /// A record kind this crate does not know, skipped by its size.
    Unknown {
        /// Its id.
        id: u32,
    },
}

/// `JIT_CODE_LOAD`: code at `code_addr`, named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeLoad {
    /// The process.
    pub pid: u32,
    /// The thread that compiled it.
    pub tid: u32,
    /// The code's virtual address (the same as `code_addr` in practice).
    pub vma: u64,
    /// Where the code is.
    pub code_addr: u64,
    /// Its size in bytes.
    pub code_size: u64,
    /// A unique index of this code.
    pub code_index: u64,
    /// Its name, sanitised: at most [`Limits::max_name`] bytes, invalid
    /// UTF-8 and control characters as `?`.
    pub name: String,
    /// The code bytes, `None` when `code_size` is over [`Limits::max_code`].
    pub code: Option<Vec<u8>>,
    /// Where the code bytes start, from the record's start (a reader that
    /// keeps no bytes, `Limits::max_code` 0, reads them from the file
    /// later: at [`Timed::offset`] plus this).
    pub code_offset: u64,
}

/// `JIT_CODE_MOVE`: code moved from `old_code_addr` to `new_code_addr`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeMove {
    /// The process.
    pub pid: u32,
    /// The thread that moved it.
    pub tid: u32,
    /// The code's virtual address.
    pub vma: u64,
    /// Where it was.
    pub old_code_addr: u64,
    /// Where it is.
    pub new_code_addr: u64,
    /// Its size in bytes.
    pub code_size: u64,
    /// Its index (as in its [`CodeLoad`]).
    pub code_index: u64,
}

/// `JIT_CODE_DEBUG_INFO`: the source lines of the code at `code_addr`
/// (written before its [`CodeLoad`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DebugInfo {
    /// The code these lines describe.
    pub code_addr: u64,
    /// The lines, in file order.
    pub entries: Vec<DebugEntry>,
}

/// One line of a [`DebugInfo`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DebugEntry {
    /// The first code address of the line.
    pub addr: u64,
    /// The line number (from 1).
    pub line: u32,
    /// The column discriminator (0 by default).
    pub discrim: u32,
    /// The source file, sanitised as code names are. An entry written as
    /// `"\xff\0"` ("the same file as the previous entry") shares the
    /// previous entry's name, so a record's names are never more bytes
    /// than the record.
    pub file: Arc<str>,
}

/// `JIT_CODE_UNWINDING_INFO`: the `.eh_frame` and `.eh_frame_hdr` of the
/// next [`CodeLoad`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnwindingInfo {
    /// The bytes of `.eh_frame` and `.eh_frame_hdr` together.
    pub unwinding_size: u64,
    /// The bytes of `.eh_frame_hdr` (the last of `data`).
    pub eh_frame_hdr_size: u64,
    /// The size the sections take when mapped.
    pub mapped_size: u64,
    /// `.eh_frame` then `.eh_frame_hdr`, `unwinding_size` bytes.
    pub data: Vec<u8>,
}

impl UnwindingInfo {
    /// The `.eh_frame` bytes.
    pub fn eh_frame(&self) -> &[u8] {
        let split = self.data.len().saturating_sub(self.hdr_len());
        &self.data[..split]
    }

    /// The `.eh_frame_hdr` bytes.
    pub fn eh_frame_hdr(&self) -> &[u8] {
        let split = self.data.len().saturating_sub(self.hdr_len());
        &self.data[split..]
    }

    fn hdr_len(&self) -> usize {
        usize::try_from(self.eh_frame_hdr_size).unwrap_or(usize::MAX)
    }
}

/// Parses the record at the start of `buf`.
///
/// `Ok(None)`: `buf` does not hold a whole record yet (the runtime may
/// still be writing it). `Ok(Some((record, len)))`: `len` is the prefix's
/// `total_size`, where the next record starts; `record.offset` is 0.
/// Once the prefix is there its size is checked: under [`PREFIX_SIZE`]
/// is [`Error::Malformed`], over [`Limits::max_record`]
/// [`Error::RecordTooLarge`] (offsets in errors are from `buf`'s start).
pub fn parse_record(buf: &[u8], limits: &Limits) -> Result<Option<(Timed, usize)>, Error> {
    parse_at(buf, limits, 0)
}

pub(crate) fn parse_at(
    buf: &[u8],
    limits: &Limits,
    offset: u64,
) -> Result<Option<(Timed, usize)>, Error> {
    let Some(prefix) = buf.first_chunk::<PREFIX_SIZE>() else {
        return Ok(None);
    };
    let mut p = Cursor::new(prefix, offset);
    let (id, size, time) = (p.u32()?, p.u32()?, p.u64()?);
    if (size as usize) < PREFIX_SIZE {
        return Err(Error::Malformed {
            offset,
            what: "a record smaller than its 16-byte prefix",
        });
    }
    if size > limits.max_record {
        return Err(Error::RecordTooLarge {
            offset,
            size: size.into(),
            max: limits.max_record.into(),
        });
    }
    // u32 fits in usize on every target this builds for (64-bit Linux);
    // on others a size that does not fit is simply never present.
    let Ok(len) = usize::try_from(size) else {
        return Ok(None);
    };
    let Some(body) = buf.get(PREFIX_SIZE..len) else {
        return Ok(None);
    };
    let mut c = Cursor::new(body, offset);
    let record = match id {
        JIT_CODE_LOAD => Record::CodeLoad(code_load(&mut c, limits)?),
        JIT_CODE_MOVE => Record::CodeMove(code_move(&mut c)?),
        JIT_CODE_DEBUG_INFO => Record::DebugInfo(debug_info(&mut c, limits)?),
        JIT_CODE_CLOSE => Record::Close,
        JIT_CODE_UNWINDING_INFO => Record::UnwindingInfo(unwinding_info(&mut c, limits)?),
        id => Record::Unknown { id },
    };
    Ok(Some((
        Timed {
            time,
            offset,
            record,
        },
        len,
    )))
}

fn code_load(c: &mut Cursor<'_>, limits: &Limits) -> Result<CodeLoad, Error> {
    c.need(CODE_LOAD_FIXED, "a code load shorter than its fixed fields")?;
    let (pid, tid) = (c.u32()?, c.u32()?);
    let (vma, code_addr, code_size, code_index) = (c.u64()?, c.u64()?, c.u64()?, c.u64()?);
    let name = c.name(limits.max_name, "a code load's name without its NUL")?;
    if code_size > c.left() as u64 {
        return Err(c.malformed("a code load's code_size larger than the record"));
    }
    let code_offset = (PREFIX_SIZE + c.consumed()) as u64;
    let code = if code_size > limits.max_code {
        None
    } else {
        // code_size <= the bytes left, so it fits in usize.
        Some(c.bytes(code_size as usize, "code")?.to_vec())
    };
    Ok(CodeLoad {
        pid,
        tid,
        vma,
        code_addr,
        code_size,
        code_index,
        name,
        code,
        code_offset,
    })
}

fn code_move(c: &mut Cursor<'_>) -> Result<CodeMove, Error> {
    c.need(CODE_MOVE_FIXED, "a code move shorter than its fields")?;
    Ok(CodeMove {
        pid: c.u32()?,
        tid: c.u32()?,
        vma: c.u64()?,
        old_code_addr: c.u64()?,
        new_code_addr: c.u64()?,
        code_size: c.u64()?,
        code_index: c.u64()?,
    })
}

fn debug_info(c: &mut Cursor<'_>, limits: &Limits) -> Result<DebugInfo, Error> {
    c.need(
        DEBUG_INFO_FIXED,
        "a debug info shorter than its fixed fields",
    )?;
    let code_addr = c.u64()?;
    let nr_entry = c.u64()?;
    // Each entry is at least its fixed fields and a NUL.
    if nr_entry > (c.left() / (DEBUG_ENTRY_FIXED + 1)) as u64 {
        return Err(c.malformed("a debug info claiming more entries than its bytes hold"));
    }
    if nr_entry > limits.max_debug_entries {
        return Err(c.malformed("a debug info with more entries than the limit"));
    }
    // nr_entry <= the bytes left / 17, so it fits in usize.
    let mut entries: Vec<DebugEntry> = Vec::with_capacity(nr_entry as usize);
    for _ in 0..nr_entry {
        c.need(DEBUG_ENTRY_FIXED, "a debug entry past the record's end")?;
        let (addr, line, discrim) = (c.u64()?, c.u32()?, c.u32()?);
        let raw = c.raw_name("a debug entry's file name without its NUL")?;
        let file = if raw == [0xff] {
            match entries.last() {
                Some(prev) => Arc::clone(&prev.file),
                None => {
                    return Err(c.malformed("the first debug entry says \"same file as before\""))
                }
            }
        } else {
            Arc::from(sanitise(raw, limits.max_name))
        };
        entries.push(DebugEntry {
            addr,
            line,
            discrim,
            file,
        });
    }
    Ok(DebugInfo { code_addr, entries })
}

fn unwinding_info(c: &mut Cursor<'_>, limits: &Limits) -> Result<UnwindingInfo, Error> {
    c.need(
        UNWINDING_FIXED,
        "an unwinding info shorter than its fixed fields",
    )?;
    let (unwinding_size, eh_frame_hdr_size, mapped_size) = (c.u64()?, c.u64()?, c.u64()?);
    if eh_frame_hdr_size > unwinding_size {
        return Err(c.malformed("an unwinding info's eh_frame_hdr_size over its unwinding_size"));
    }
    if unwinding_size > c.left() as u64 {
        return Err(c.malformed("an unwinding info's unwinding_size larger than the record"));
    }
    if unwinding_size > limits.max_unwind {
        return Err(c.malformed("an unwinding info larger than the limit"));
    }
    // unwinding_size <= the bytes left, so it fits in usize.
    let data = c.bytes(unwinding_size as usize, "unwinding data")?.to_vec();
    Ok(UnwindingInfo {
        unwinding_size,
        eh_frame_hdr_size,
        mapped_size,
        data,
    })
}

/// Reads a record's body front to back; every read is checked.
struct Cursor<'a> {
    rest: &'a [u8],
    offset: u64,
    /// The body's length.
    len: usize,
}

impl<'a> Cursor<'a> {
    fn new(bytes: &'a [u8], offset: u64) -> Self {
        Cursor {
            rest: bytes,
            offset,
            len: bytes.len(),
        }
    }

    /// Bytes of the body read so far.
    fn consumed(&self) -> usize {
        self.len - self.rest.len()
    }

    fn malformed(&self, what: &'static str) -> Error {
        Error::Malformed {
            offset: self.offset,
            what,
        }
    }

    fn left(&self) -> usize {
        self.rest.len()
    }

    fn need(&self, n: usize, what: &'static str) -> Result<(), Error> {
        if self.rest.len() < n {
            Err(self.malformed(what))
        } else {
            Ok(())
        }
    }

    fn bytes(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], Error> {
        self.need(n, what)?;
        let (head, rest) = self.rest.split_at(n);
        self.rest = rest;
        Ok(head)
    }

    fn u32(&mut self) -> Result<u32, Error> {
        let b = self.bytes(4, "a field past the record's end")?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    fn u64(&mut self) -> Result<u64, Error> {
        let lo = self.u32()?;
        let hi = self.u32()?;
        Ok(u64::from(lo) | u64::from(hi) << 32)
    }

    /// The bytes up to the next NUL, which is consumed too.
    fn raw_name(&mut self, what: &'static str) -> Result<&'a [u8], Error> {
        let Some(end) = self.rest.iter().position(|&b| b == 0) else {
            return Err(self.malformed(what));
        };
        let name = &self.rest[..end];
        self.rest = &self.rest[end + 1..];
        Ok(name)
    }

    fn name(&mut self, max: usize, what: &'static str) -> Result<String, Error> {
        Ok(sanitise(self.raw_name(what)?, max))
    }
}
