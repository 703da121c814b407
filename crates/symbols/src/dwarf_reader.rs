//! A lazy [`gimli::Reader`] over a file: DWARF is read by range, when addr2line asks for it,
//! instead of copying every section out of a file read whole.
//!
//! A section is a range of the file (its offset and size). Reads go through a bounded page
//! cache shared by every reader of the file ([`PagedFile`]): pages of [`PAGE`] bytes, read by
//! positioned reads (`FileExt::read_at`, no `mmap`: the crate has no `unsafe`), at most
//! [`BUDGET`] bytes held, the least recently used half dropped when full (and all of them
//! after each batch of lookups, `dwarf.rs`). A reader also keeps a copy of the
//! [`WINDOW`] bytes it read last and after, so that reading on (a DIE, a LEB128, a line
//! program opcode) takes no lock; a copy rather than the page, because addr2line keeps
//! readers it has read from (unit headers), and a clone keeps none.
//!
//! Other sources serve the same reader type: a section held in memory
//! ([`DwarfReader::memory`]: files read whole, which are not ELF64 little-endian, `.ko`
//! modules, the vDSO), a compressed section (`SHF_COMPRESSED`, `.zdebug_*`) decompressed
//! whole at its first read ([`DwarfReader::compressed`]), and a view of a section with some
//! ranges replaced ([`DwarfReader::patched`]: `.debug_info` with units hidden).
//!
//! Errors are gimli errors, never panics: a read past the end of the file (a truncated file,
//! a section header pointing outside it) is `UnexpectedEof`, an I/O error or a section that
//! does not decompress is `Io`.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use gimli::{Error, ReaderOffsetId, RunTimeEndian};

/// Bytes per page of the cache.
pub(crate) const PAGE: usize = 8 << 10;
/// Most bytes of pages a file's cache holds.
pub(crate) const BUDGET: usize = 2 << 20;

/// An open file read by pages, shared by all the readers of its sections.
pub(crate) struct PagedFile {
    file: Arc<File>,
    /// The file's size when opened: a read past it is an error, not a short page.
    len: u64,
    page: usize,
    budget: usize,
    pages: Mutex<Pages>,
    /// Bytes read from the file are added here (a counter shared across files).
    read: Arc<AtomicU64>,
}

#[derive(Default)]
struct Pages {
    map: HashMap<u64, (Arc<[u8]>, u64)>,
    tick: u64,
    held: usize,
}

impl PagedFile {
    /// Reads `file` (of `len` bytes) through a cache of [`BUDGET`] bytes of [`PAGE`]-byte
    /// pages; bytes read are also added to `counter`.
    pub fn new(file: Arc<File>, len: u64, counter: Arc<AtomicU64>) -> PagedFile {
        PagedFile::with_pages(file, len, PAGE, BUDGET, counter)
    }

    /// [`PagedFile::new`] with another page size and budget (tests).
    pub fn with_pages(
        file: Arc<File>,
        len: u64,
        page: usize,
        budget: usize,
        counter: Arc<AtomicU64>,
    ) -> PagedFile {
        let page = page.max(1);
        PagedFile {
            file,
            len,
            page,
            budget: budget.max(page),
            pages: Mutex::default(),
            read: counter,
        }
    }

    /// The page holding file position `pos` (the last page is short).
    fn page_at(&self, pos: u64) -> Result<Chunk, Error> {
        if pos >= self.len {
            return Err(Error::UnexpectedEof(ReaderOffsetId(pos)));
        }
        let index = pos / self.page as u64;
        let start = index * self.page as u64;
        let mut pages = self.pages.lock().unwrap_or_else(PoisonError::into_inner);
        pages.tick += 1;
        let tick = pages.tick;
        if let Some((data, used)) = pages.map.get_mut(&index) {
            *used = tick;
            return Ok(Chunk::whole(start, Arc::clone(data)));
        }
        let n = (self.len - start).min(self.page as u64) as usize;
        let mut buf = vec![0u8; n];
        match self.file.read_exact_at(&mut buf, start) {
            Ok(()) => {}
            // Shorter than when it was opened.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                return Err(Error::UnexpectedEof(ReaderOffsetId(pos)))
            }
            Err(_) => return Err(Error::Io),
        }
        self.read.fetch_add(n as u64, Ordering::Relaxed);
        if pages.held + n > self.budget {
            evict(&mut pages);
        }
        let data: Arc<[u8]> = buf.into();
        pages.held += n;
        pages.map.insert(index, (Arc::clone(&data), tick));
        Ok(Chunk::whole(start, data))
    }

    /// Reads `buf.len()` bytes at `pos` past the cache (a few bytes far apart: unit
    /// headers).
    fn peek(&self, pos: u64, buf: &mut [u8]) -> Result<(), Error> {
        if pos.saturating_add(buf.len() as u64) > self.len {
            return Err(Error::UnexpectedEof(ReaderOffsetId(pos)));
        }
        match self.file.read_exact_at(buf, pos) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                return Err(Error::UnexpectedEof(ReaderOffsetId(pos)))
            }
            Err(_) => return Err(Error::Io),
        }
        self.read.fetch_add(buf.len() as u64, Ordering::Relaxed);
        Ok(())
    }
}

/// Drops the least recently used half of the pages.
fn evict(pages: &mut Pages) {
    let mut ticks: Vec<u64> = pages.map.values().map(|&(_, t)| t).collect();
    if ticks.is_empty() {
        return;
    }
    let mid = ticks.len() / 2;
    let (_, &mut cut, _) = ticks.select_nth_unstable(mid);
    pages.map.retain(|_, &mut (_, t)| t > cut);
    pages.held = pages.map.values().map(|(d, _)| d.len()).sum();
}

/// Bytes `data[from..from + len]`, at positions `pos..pos + len` of a source.
#[derive(Clone)]
struct Chunk {
    pos: u64,
    data: Arc<[u8]>,
    from: usize,
    len: usize,
}

impl Chunk {
    fn whole(pos: u64, data: Arc<[u8]>) -> Chunk {
        let len = data.len();
        Chunk {
            pos,
            data,
            from: 0,
            len,
        }
    }

    /// The bytes from position `at` to the end of the chunk, if it holds `at`.
    #[inline]
    fn from(&self, at: u64) -> Option<&[u8]> {
        let i = at.checked_sub(self.pos)?;
        (i < self.len as u64).then(|| &self.data[self.from + i as usize..self.from + self.len])
    }
}

/// Where a reader's bytes are.
enum Source {
    File(PagedFile),
    /// A section decompressed (or copied) into memory; `id` keeps its offset ids apart from
    /// other sections'.
    Memory {
        data: Arc<[u8]>,
        id: u64,
    },
    /// A compressed section of a file, decompressed into memory at its first read (`None`
    /// inside when that failed); `id` as for `Memory`.
    Compressed {
        raw: DwarfReader,
        format: object::CompressionFormat,
        size: u64,
        data: OnceLock<Option<Arc<[u8]>>>,
        id: u64,
    },
    /// `base` with some ranges replaced (sorted, apart): a view of a section in which the
    /// units not wanted are hidden behind made-up headers (`dwarf.rs`).
    Patched {
        base: Arc<Source>,
        patches: Vec<(u64, Arc<[u8]>)>,
    },
}

impl Source {
    /// The bytes around `pos` that one read can take.
    fn chunk(&self, pos: u64) -> Result<Chunk, Error> {
        match self {
            Source::File(f) => f.page_at(pos),
            Source::Memory { data, id } => {
                if pos >= data.len() as u64 {
                    return Err(Error::UnexpectedEof(ReaderOffsetId(id + pos)));
                }
                Ok(Chunk::whole(0, Arc::clone(data)))
            }
            Source::Compressed {
                raw,
                format,
                size,
                data,
                id,
            } => {
                let data = data
                    .get_or_init(|| decompress(raw, *format, *size))
                    .as_ref()
                    .ok_or(Error::Io)?;
                if pos >= data.len() as u64 {
                    return Err(Error::UnexpectedEof(ReaderOffsetId(id + pos)));
                }
                Ok(Chunk::whole(0, Arc::clone(data)))
            }
            Source::Patched { base, patches } => {
                let i = patches.partition_point(|(at, _)| *at <= pos);
                let prev_end = match i.checked_sub(1).map(|k| &patches[k]) {
                    Some((at, bytes)) if pos - at < bytes.len() as u64 => {
                        return Ok(Chunk::whole(*at, Arc::clone(bytes)));
                    }
                    Some((at, bytes)) => at + bytes.len() as u64,
                    None => 0,
                };
                let mut c = base.chunk(pos)?;
                // Cut off what the patches around `pos` replace.
                if c.pos < prev_end {
                    let cut = (prev_end - c.pos) as usize;
                    c.pos += cut as u64;
                    c.from += cut;
                    c.len -= cut;
                }
                if let Some((next, _)) = patches.get(i) {
                    c.len = c.len.min((next - c.pos) as usize);
                }
                Ok(c)
            }
        }
    }

    /// Reads `buf.len()` bytes at `pos`, past the page cache.
    fn peek(&self, pos: u64, buf: &mut [u8]) -> Result<(), Error> {
        match self {
            Source::File(f) => f.peek(pos, buf),
            _ => {
                let mut done = 0;
                while done < buf.len() {
                    let c = self.chunk(pos + done as u64)?;
                    let bytes = c.from(pos + done as u64).expect("the chunk holds it");
                    let n = bytes.len().min(buf.len() - done);
                    buf[done..done + n].copy_from_slice(&bytes[..n]);
                    done += n;
                }
                Ok(())
            }
        }
    }

    fn id_base(&self) -> u64 {
        match self {
            Source::File(_) => 0,
            Source::Memory { id, .. } | Source::Compressed { id, .. } => *id,
            Source::Patched { base, .. } => base.id_base(),
        }
    }
}

/// The bytes of the compressed section `raw` (compressed bytes only), `size` of them once
/// decompressed; `None` if that fails.
fn decompress(
    raw: &DwarfReader,
    format: object::CompressionFormat,
    size: u64,
) -> Option<Arc<[u8]>> {
    let bytes = gimli::Reader::to_slice(raw).ok()?;
    let data = object::CompressedData {
        format,
        data: &bytes,
        uncompressed_size: size,
    }
    .decompress()
    .ok()?;
    (data.len() as u64 == size).then(|| Arc::from(&*data))
}

/// Bytes of a window.
const WINDOW: usize = 512;

/// [`WINDOW`] bytes (fewer at the end of a chunk) at `pos..pos + len`.
struct Window {
    pos: u64,
    len: usize,
    buf: Box<[u8; WINDOW]>,
}

impl Window {
    /// The bytes from `at` to the end of the window, if it holds `at`.
    #[inline]
    fn from(&self, at: u64) -> Option<&[u8]> {
        let i = at.checked_sub(self.pos)?;
        (i < self.len as u64).then(|| &self.buf[i as usize..self.len])
    }
}

/// Offset ids of in-memory sections start at 2^63, 2^40 apart.
static NEXT_MEMORY_ID: AtomicU64 = AtomicU64::new(0);

fn next_memory_id() -> u64 {
    let n = NEXT_MEMORY_ID.fetch_add(1, Ordering::Relaxed) & ((1 << 23) - 1);
    (1 << 63) | (n << 40)
}

/// A range of a DWARF section, read lazily. Cloning it is cheap (an `Arc` and three words).
pub(crate) struct DwarfReader {
    source: Arc<Source>,
    /// Position of the next byte in the source (file position, or index in memory).
    pos: u64,
    len: u64,
    endian: RunTimeEndian,
    /// A copy of the bytes read last and after, so that reading on (a DIE, a LEB128, a
    /// line-program opcode) takes no lock. A copy, not the page: addr2line keeps readers
    /// it has read from (unit headers), and those would pin their pages.
    window: Option<Window>,
}

impl Clone for DwarfReader {
    /// The clone does not keep the last page: stored readers would otherwise pin pages.
    fn clone(&self) -> DwarfReader {
        DwarfReader {
            source: Arc::clone(&self.source),
            pos: self.pos,
            len: self.len,
            endian: self.endian,
            window: None,
        }
    }
}

impl fmt::Debug for DwarfReader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match &*self.source {
            Source::File(_) => "file",
            Source::Memory { .. } => "memory",
            Source::Compressed { .. } => "compressed",
            Source::Patched { .. } => "patched",
        };
        f.debug_struct("DwarfReader")
            .field("source", &kind)
            .field("pos", &self.pos)
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

impl DwarfReader {
    /// Bytes `offset..offset+len` of `file` (they need not be in it: reading past its end
    /// is an error).
    pub fn file(file: &Arc<PagedFileHandle>, offset: u64, len: u64) -> DwarfReader {
        DwarfReader {
            source: Arc::clone(&file.0),
            pos: offset,
            len,
            endian: RunTimeEndian::Little,
            window: None,
        }
        .with_endian(file.1)
    }

    /// `data`, held in memory.
    pub fn memory(data: Arc<[u8]>, endian: RunTimeEndian) -> DwarfReader {
        let len = data.len() as u64;
        DwarfReader {
            source: Arc::new(Source::Memory {
                data,
                id: next_memory_id(),
            }),
            pos: 0,
            len,
            endian,
            window: None,
        }
    }

    /// A section of `size` bytes once decompressed from the bytes of `raw` (`format`),
    /// decompressed at its first read; a read fails if that does.
    pub fn compressed(
        raw: DwarfReader,
        format: object::CompressionFormat,
        size: u64,
    ) -> DwarfReader {
        let endian = raw.endian;
        DwarfReader {
            source: Arc::new(Source::Compressed {
                raw,
                format,
                size,
                data: OnceLock::new(),
                id: next_memory_id(),
            }),
            pos: 0,
            len: size,
            endian,
            window: None,
        }
    }

    fn with_endian(mut self, endian: RunTimeEndian) -> DwarfReader {
        self.endian = endian;
        self
    }

    fn eof(&self) -> Error {
        Error::UnexpectedEof(gimli::Reader::offset_id(self))
    }

    /// Calls `f` with the bytes of `pos..pos+len` in order, a chunk at a time, until it
    /// returns `Some`.
    fn scan<T>(&self, mut f: impl FnMut(u64, &[u8]) -> Option<T>) -> Result<Option<T>, Error> {
        let end = self.pos + self.len;
        let mut pos = self.pos;
        let mut fetched;
        while pos < end {
            let bytes = match self.window.as_ref().and_then(|w| w.from(pos)) {
                Some(b) => b,
                None => {
                    fetched = self.source.chunk(pos)?;
                    fetched.from(pos).ok_or(Error::Io)?
                }
            };
            let n = (end - pos).min(bytes.len() as u64) as usize;
            if let Some(t) = f(pos - self.pos, &bytes[..n]) {
                return Ok(Some(t));
            }
            pos += n as u64;
        }
        Ok(None)
    }

    /// Reads `buf.len()` bytes at `at` bytes from the reader's position, past the page
    /// cache, without moving.
    pub fn peek(&self, at: u64, buf: &mut [u8]) -> gimli::Result<()> {
        if at.saturating_add(buf.len() as u64) > self.len {
            return Err(self.eof());
        }
        self.source.peek(self.pos + at, buf)
    }

    /// A view of this reader (a whole section) in which `patches` (offsets in it, sorted,
    /// apart, inside it) replace its bytes.
    pub fn patched(&self, patches: Vec<(u64, Arc<[u8]>)>) -> DwarfReader {
        let patches = patches
            .into_iter()
            .map(|(at, bytes)| (self.pos + at, bytes))
            .collect();
        DwarfReader {
            source: Arc::new(Source::Patched {
                base: Arc::clone(&self.source),
                patches,
            }),
            pos: self.pos,
            len: self.len,
            endian: self.endian,
            window: None,
        }
    }

    /// All the remaining bytes, copied.
    fn bytes(&self) -> Result<Vec<u8>, Error> {
        let mut out = Vec::with_capacity(usize::try_from(self.len).map_err(|_| Error::Io)?);
        self.scan(|_, chunk| {
            out.extend_from_slice(chunk);
            None::<()>
        })?;
        Ok(out)
    }

    /// The remaining bytes if they are in memory.
    fn in_memory(&self) -> Option<&[u8]> {
        match &*self.source {
            Source::Memory { data, .. } => {
                Some(&data[self.pos as usize..(self.pos + self.len) as usize])
            }
            Source::File(_) | Source::Compressed { .. } | Source::Patched { .. } => None,
        }
    }
}

/// A [`PagedFile`] with the byte order of the DWARF in it.
pub(crate) struct PagedFileHandle(Arc<Source>, RunTimeEndian);

impl PagedFileHandle {
    pub fn new(file: PagedFile, endian: RunTimeEndian) -> Arc<PagedFileHandle> {
        Arc::new(PagedFileHandle(Arc::new(Source::File(file)), endian))
    }

    /// Drops every page held (readers read them again when asked).
    pub fn clear(&self) {
        if let Source::File(f) = &*self.0 {
            *f.pages.lock().unwrap_or_else(PoisonError::into_inner) = Pages::default();
        }
    }
}

impl gimli::Reader for DwarfReader {
    type Endian = RunTimeEndian;
    type Offset = usize;

    #[inline]
    fn endian(&self) -> RunTimeEndian {
        self.endian
    }

    #[inline]
    fn len(&self) -> usize {
        self.len as usize
    }

    #[inline]
    fn empty(&mut self) {
        self.len = 0;
    }

    #[inline]
    fn truncate(&mut self, len: usize) -> gimli::Result<()> {
        if (len as u64) > self.len {
            return Err(self.eof());
        }
        self.len = len as u64;
        Ok(())
    }

    #[inline]
    fn offset_from(&self, base: &DwarfReader) -> usize {
        self.pos.wrapping_sub(base.pos) as usize
    }

    #[inline]
    fn offset_id(&self) -> ReaderOffsetId {
        ReaderOffsetId(self.source.id_base() + self.pos)
    }

    fn lookup_offset_id(&self, id: ReaderOffsetId) -> Option<usize> {
        let at = self.source.id_base() + self.pos;
        (id.0 >= at && id.0 - at <= self.len).then(|| (id.0 - at) as usize)
    }

    fn find(&self, byte: u8) -> gimli::Result<usize> {
        self.scan(|at, chunk| memchr::memchr(byte, chunk).map(|i| at as usize + i))?
            .ok_or_else(|| self.eof())
    }

    #[inline]
    fn skip(&mut self, len: usize) -> gimli::Result<()> {
        if (len as u64) > self.len {
            return Err(self.eof());
        }
        self.pos += len as u64;
        self.len -= len as u64;
        Ok(())
    }

    fn split(&mut self, len: usize) -> gimli::Result<DwarfReader> {
        if (len as u64) > self.len {
            return Err(self.eof());
        }
        let mut head = self.clone();
        head.len = len as u64;
        self.pos += len as u64;
        self.len -= len as u64;
        Ok(head)
    }

    fn to_slice(&self) -> gimli::Result<Cow<'_, [u8]>> {
        match self.in_memory() {
            Some(s) => Ok(Cow::Borrowed(s)),
            None => self.bytes().map(Cow::Owned),
        }
    }

    fn to_string(&self) -> gimli::Result<Cow<'_, str>> {
        match self.in_memory() {
            Some(s) => std::str::from_utf8(s)
                .map(Cow::Borrowed)
                .map_err(|_| Error::BadUtf8),
            None => String::from_utf8(self.bytes()?)
                .map(Cow::Owned)
                .map_err(|_| Error::BadUtf8),
        }
    }

    fn to_string_lossy(&self) -> gimli::Result<Cow<'_, str>> {
        match self.in_memory() {
            Some(s) => Ok(String::from_utf8_lossy(s)),
            None => {
                let bytes = self.bytes()?;
                Ok(Cow::Owned(match String::from_utf8(bytes) {
                    Ok(s) => s,
                    Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
                }))
            }
        }
    }

    #[inline]
    fn read_u8(&mut self) -> gimli::Result<u8> {
        if self.len > 0 {
            if let Some(&b) = self.window.as_ref().and_then(|w| w.from(self.pos)?.first()) {
                self.pos += 1;
                self.len -= 1;
                return Ok(b);
            }
        }
        let mut b = [0u8];
        self.read_slice(&mut b)?;
        Ok(b[0])
    }

    fn read_slice(&mut self, buf: &mut [u8]) -> gimli::Result<()> {
        if buf.len() as u64 > self.len {
            return Err(self.eof());
        }
        let mut done = 0;
        while done < buf.len() {
            let pos = self.pos + done as u64;
            let left = buf.len() - done;
            if let Some(bytes) = self.window.as_ref().and_then(|w| w.from(pos)) {
                let n = bytes.len().min(left);
                buf[done..done + n].copy_from_slice(&bytes[..n]);
                done += n;
                continue;
            }
            let chunk = self.source.chunk(pos)?;
            let bytes = chunk.from(pos).ok_or(Error::Io)?;
            if left >= WINDOW {
                // A long read: straight from the chunk.
                let n = bytes.len().min(left);
                buf[done..done + n].copy_from_slice(&bytes[..n]);
                done += n;
                continue;
            }
            let w = self.window.get_or_insert_with(|| Window {
                pos: 0,
                len: 0,
                buf: Box::new([0; WINDOW]),
            });
            let n = bytes.len().min(WINDOW);
            w.buf[..n].copy_from_slice(&bytes[..n]);
            w.pos = pos;
            w.len = n;
        }
        self.pos += buf.len() as u64;
        self.len -= buf.len() as u64;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gimli::{EndianSlice, Reader};
    use proptest::prelude::*;
    use std::io::Write;

    /// `data` in a temporary file, read through pages of `page` bytes, `budget` bytes
    /// at most; with the count of bytes read.
    fn paged(
        data: &[u8],
        page: usize,
        budget: usize,
    ) -> (
        Arc<PagedFileHandle>,
        Arc<AtomicU64>,
        tempfile::NamedTempFile,
    ) {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(data).unwrap();
        let file = Arc::new(File::open(f.path()).unwrap());
        let read = Arc::new(AtomicU64::new(0));
        let pf = PagedFile::with_pages(file, data.len() as u64, page, budget, Arc::clone(&read));
        (PagedFileHandle::new(pf, RunTimeEndian::Little), read, f)
    }

    /// One step applied to both readers.
    #[derive(Clone, Debug)]
    enum Op {
        Skip(usize),
        Split(usize),
        Truncate(usize),
        ReadU8,
        ReadU32,
        ReadUleb,
        ReadSlice(usize),
        ReadNullTerminated,
        Find(u8),
        ToSlice,
        ToStringLossy,
        Clone,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (0usize..600).prop_map(Op::Skip),
            (0usize..900).prop_map(Op::Split),
            (0usize..3000).prop_map(Op::Truncate),
            Just(Op::ReadU8),
            Just(Op::ReadU32),
            Just(Op::ReadUleb),
            (0usize..300).prop_map(Op::ReadSlice),
            Just(Op::ReadNullTerminated),
            any::<u8>().prop_map(Op::Find),
            Just(Op::ToSlice),
            Just(Op::ToStringLossy),
            Just(Op::Clone),
        ]
    }

    /// What an operation gave, comparable across reader types (errors by kind only: offset
    /// ids differ by design).
    fn outcome<R: Reader<Offset = usize>>(r: &mut R, op: &Op) -> Result<Vec<u8>, String> {
        let e = |e: gimli::Error| format!("{:?}", std::mem::discriminant(&e));
        Ok(match op {
            Op::Skip(n) => r.skip(*n).map(|()| vec![]).map_err(e)?,
            Op::Split(n) => r.split(*n).map_err(e)?.to_slice().map_err(e)?.into_owned(),
            Op::Truncate(n) => r.truncate(*n).map(|()| vec![]).map_err(e)?,
            Op::ReadU8 => vec![r.read_u8().map_err(e)?],
            Op::ReadU32 => r.read_u32().map_err(e)?.to_le_bytes().to_vec(),
            Op::ReadUleb => r.read_uleb128().map_err(e)?.to_le_bytes().to_vec(),
            Op::ReadSlice(n) => {
                let mut buf = vec![0u8; *n];
                r.read_slice(&mut buf).map_err(e)?;
                buf
            }
            Op::ReadNullTerminated => r
                .read_null_terminated_slice()
                .map_err(e)?
                .to_slice()
                .map_err(e)?
                .into_owned(),
            Op::Find(b) => r.find(*b).map_err(e)?.to_le_bytes().to_vec(),
            Op::ToSlice => r.to_slice().map_err(e)?.into_owned(),
            Op::ToStringLossy => r.to_string_lossy().map_err(e)?.as_bytes().to_vec(),
            Op::Clone => {
                *r = r.clone();
                vec![]
            }
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(300))]

        /// Any sequence of operations gives the same bytes, lengths, offsets and errors as
        /// an `EndianSlice` over the same bytes, whatever the page size and budget (pages
        /// smaller than the reads, reads across page boundaries, evictions).
        #[test]
        fn lazy_reader_agrees_with_endian_slice(
            data in proptest::collection::vec(any::<u8>(), 0..2500),
            section_start in 0usize..300,
            page in prop_oneof![Just(1usize), Just(7), Just(64), Just(4096)],
            budget in prop_oneof![Just(1usize), Just(200), Just(1 << 20)],
            ops in proptest::collection::vec(op(), 1..40),
        ) {
            let start = section_start.min(data.len());
            let (file, _, _tmp) = paged(&data, page, budget);
            let mut lazy = DwarfReader::file(&file, start as u64, (data.len() - start) as u64);
            let mut slice = EndianSlice::new(&data[start..], RunTimeEndian::Little);
            let base_lazy = lazy.clone();
            let base_slice = slice;
            let mut mem = DwarfReader::memory(data[start..].into(), RunTimeEndian::Little);
            let base_mem = mem.clone();
            for op in &ops {
                let want = outcome(&mut slice, op);
                prop_assert_eq!(&outcome(&mut lazy, op), &want, "{:?}", op);
                prop_assert_eq!(&outcome(&mut mem, op), &want, "{:?} (memory)", op);
                prop_assert_eq!(lazy.len(), slice.len());
                prop_assert_eq!(lazy.offset_from(&base_lazy), Reader::offset_from(&slice, &base_slice));
                prop_assert_eq!(mem.offset_from(&base_mem), Reader::offset_from(&slice, &base_slice));
                let id = lazy.offset_id();
                prop_assert_eq!(base_lazy.lookup_offset_id(id), Some(lazy.offset_from(&base_lazy)));
                prop_assert_eq!(base_mem.lookup_offset_id(base_lazy.offset_id()), None);
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        /// A patched view (of a file or of memory) reads as the bytes with the patches
        /// written over them, patches and pages cutting each other anywhere; `peek` agrees.
        #[test]
        fn a_patched_view_reads_as_the_patched_bytes(
            data in proptest::collection::vec(any::<u8>(), 1..2500),
            mut cuts in proptest::collection::vec((0usize..2500, 1usize..40), 0..8),
            page in prop_oneof![Just(1usize), Just(7), Just(64), Just(4096)],
            ops in proptest::collection::vec(op(), 1..40),
            peek_at in 0usize..2500,
        ) {
            cuts.sort_unstable();
            let mut patches: Vec<(u64, Arc<[u8]>)> = Vec::new();
            let mut patched = data.clone();
            let mut free_from = 0;
            for (start, len) in cuts {
                if start < free_from || start >= data.len() {
                    continue;
                }
                let len = len.min(data.len() - start);
                let bytes: Vec<u8> = (0..len).map(|i| (start + i) as u8 ^ 0x5a).collect();
                patched[start..start + len].copy_from_slice(&bytes);
                patches.push((start as u64, bytes.into()));
                free_from = start + len;
            }
            let (file, _, _tmp) = paged(&data, page, 1 << 20);
            let from_file = DwarfReader::file(&file, 0, data.len() as u64);
            let in_memory = DwarfReader::memory(data.clone().into(), RunTimeEndian::Little);
            for base in [from_file, in_memory] {
                let mut lazy = base.patched(patches.clone());
                let mut slice = EndianSlice::new(&patched, RunTimeEndian::Little);
                let at = peek_at.min(data.len() - 1);
                let mut got = vec![0u8; (data.len() - at).min(50)];
                lazy.peek(at as u64, &mut got).unwrap();
                prop_assert_eq!(&got[..], &patched[at..at + got.len()]);
                for op in &ops {
                    prop_assert_eq!(outcome(&mut lazy, op), outcome(&mut slice, op), "{:?}", op);
                    prop_assert_eq!(lazy.len(), slice.len());
                }
            }
        }
    }

    #[test]
    fn a_section_past_the_end_of_the_file_is_an_error_not_a_panic() {
        let data: Vec<u8> = (0..100u8).collect();
        let (file, _, tmp) = paged(&data, 16, 64);
        let mut r = DwarfReader::file(&file, 90, 50);
        let mut buf = [0u8; 10];
        r.read_slice(&mut buf).unwrap();
        assert_eq!(buf[0], 90);
        assert!(matches!(r.read_u8(), Err(Error::UnexpectedEof(_))));
        assert!(matches!(r.to_slice(), Err(Error::UnexpectedEof(_))));
        assert!(matches!(r.find(0xff), Err(Error::UnexpectedEof(_))));
        // Truncated after it was opened: the missing page is an error too.
        let r2 = DwarfReader::file(&file, 0, 100);
        tmp.as_file().set_len(20).unwrap();
        assert!(r2.to_slice().is_err());
    }

    #[test]
    fn the_cache_holds_at_most_its_budget_and_counts_what_it_reads() {
        let data = vec![7u8; 100_000];
        let (file, read, _tmp) = paged(&data, 1000, 10_000);
        let mut r = DwarfReader::file(&file, 0, data.len() as u64);
        let mut buf = vec![0u8; data.len()];
        r.read_slice(&mut buf).unwrap();
        assert_eq!(read.load(Ordering::Relaxed), 100_000);
        let Source::File(f) = &*file.0 else { panic!() };
        let held = f.pages.lock().unwrap().held;
        assert!(held <= 10_000, "{held}");
        // A small read of a cached page reads nothing more.
        let mut again = DwarfReader::file(&file, 99_500, 10);
        again.read_slice(&mut [0u8; 10]).unwrap();
        assert_eq!(read.load(Ordering::Relaxed), 100_000);
    }
}
