//! [`SessionReader`]: reads a session file, finds its chunks, reports the
//! bad ones, and hands out payloads for (parallel) decoding.

use std::io::Read;
use std::path::{Path, PathBuf};

use crate::decode::{for_each_sample, ChunkDecoder};
use crate::error::{Error, Result};
use crate::event::{Event, ExpandedSample};
use crate::session::{
    parse_header, scan, BadChunk, ChunkRef, SessionFooter, SessionHeader, FRAME_HEADER_LEN,
};
use crate::stacks::StackTable;

/// A session file, read and checked.
///
/// Opening reads the whole file (a snapshot: chunks appended later are not
/// seen; open again to see them), checks the header, and scans every frame,
/// verifying each CRC. Corrupt regions are listed in
/// [`SessionReader::bad_chunks`] and skipped; the reader never panics on a
/// corrupt file and never allocates more than the file's size because of a
/// length field in it.
///
/// The reader is `Sync` when its storage is, so the report can decode
/// chunks in parallel:
///
/// ```no_run
/// # use profkit_eventlog::SessionReader;
/// let r = SessionReader::open("session.pkl")?;
/// let total: u64 = r.chunks().iter().map(|c| r.for_each_sample(c, |_| {}, |_| {}).unwrap_or(0)).sum();
/// # Ok::<(), profkit_eventlog::Error>(())
/// ```
///
/// [`SessionReader::from_bytes`] accepts any byte storage (a `Vec`, a
/// memory map owned by a crate allowed `unsafe`, a test buffer).
#[derive(Debug)]
pub struct SessionReader<B = Vec<u8>> {
    data: B,
    path: PathBuf,
    version: u16,
    header: SessionHeader,
    header_len: u64,
    chunks: Vec<ChunkRef>,
    bad: Vec<BadChunk>,
    footer: Option<(SessionFooter, u64)>,
}

impl SessionReader<Vec<u8>> {
    /// Gives back the file's bytes, for a reader whose chunks are all read:
    /// its header, footer and chunk list stay, every chunk's payload is
    /// empty after (a report of a large session held its log through
    /// naming and rows).
    pub fn release_data(&mut self) {
        self.data = Vec::new();
    }

    /// Reads and checks the session file at `path`. It must be a regular
    /// file: it is opened non-blocking (a FIFO does not hang the reader)
    /// and checked on the opened descriptor, so a FIFO or a link to
    /// `/dev/zero` is an error, not a hang or an endless read; no more
    /// than the size it had when opened is read.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        Self::open_shown(path.as_ref(), path.as_ref())
    }

    /// [`SessionReader::open`] of `path`, naming `shown` in every message:
    /// for a file opened through a held directory (`/proc/self/fd/N/...`)
    /// whose user-facing name is another.
    pub fn open_shown(path: &Path, shown: &Path) -> Result<Self> {
        let (f, meta) = open_regular(path, shown)?;
        let path = shown;
        let len = meta.len();
        // A session is written, never sparse: a file that is mostly holes
        // would cost its claimed size in memory (a 1 TB hole aborted; nine
        // 16 MB parts of 12 KB on disk cost 145 MB, issue 25). Above 1 MiB
        // at least half must be data by SEEK_DATA/SEEK_HOLE (not by the
        // blocks stat counts, which compression and data not yet written
        // out make smaller); above 64 MiB half its blocks too, as before,
        // for file systems that report no holes.
        use std::os::unix::fs::MetadataExt;
        let mut on_disk = meta.blocks().saturating_mul(512);
        let blocks_short = len > 64 << 20 && on_disk < len / 2;
        if len > 1 << 20 && !blocks_short {
            on_disk = profkit_untrusted::data_bytes(&f, len, 4096).unwrap_or(len);
        }
        if blocks_short || (len > 1 << 20 && on_disk < len / 2) {
            return Err(Error::io(
                "open",
                path,
                std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    format!("a sparse file ({len} bytes, {on_disk} on disk): not a session"),
                ),
            ));
        }
        let mut data = Vec::with_capacity(usize::try_from(len.min(1 << 30)).unwrap_or(0));
        f.take(len)
            .read_to_end(&mut data)
            .map_err(|e| Error::io("read", path, e))?;
        Self::from_bytes(data, path)
    }
}

/// Opens `path` for reading as a session file must be: non-blocking (a
/// FIFO does not hang the reader) and checked on the opened descriptor to
/// be a regular file; messages name `shown`.
fn open_regular(path: &Path, shown: &Path) -> Result<(std::fs::File, std::fs::Metadata)> {
    let o = profkit_untrusted::open_untrusted(path, &profkit_untrusted::Policy::regular())
        .map_err(|e| Error::io("open", shown, e))?;
    Ok((o.file, o.meta))
}

/// Reads only the header of the session file at `path` (and its format
/// version): what a reader needs to place a part of a rotated session in
/// time without reading its chunks. The same checks as
/// [`SessionReader::open`]: a regular file, opened non-blocking.
///
/// # Errors
/// As [`SessionReader::open`] for the header: not a session, a version
/// this build does not read, a truncated or corrupt header.
pub fn read_header(path: &Path) -> Result<(SessionHeader, u16)> {
    let (f, meta) = open_regular(path, path)?;
    let (h, version, _) = crate::session::read_header_from(&f, meta.len(), path)?;
    Ok((h, version))
}

impl<B: AsRef<[u8]>> SessionReader<B> {
    /// Checks and scans a session held in `data`; `path` is only used in
    /// messages.
    pub fn from_bytes(data: B, path: impl AsRef<Path>) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        let bytes = data.as_ref();
        let (header, version, hlen) = parse_header(bytes, &path)?;
        let s = scan(bytes, hlen, 0, 0);
        Ok(SessionReader {
            data,
            path,
            version,
            header,
            header_len: hlen as u64,
            chunks: s.chunks,
            bad: s.bad,
            footer: s.footer,
        })
    }

    /// The file's path (as given).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The format version the file was written with.
    pub fn version(&self) -> u16 {
        self.version
    }

    /// The session header.
    pub fn header(&self) -> &SessionHeader {
        &self.header
    }

    /// Length of the header in bytes (the first chunk starts here).
    pub fn header_len(&self) -> u64 {
        self.header_len
    }

    /// The valid chunks, in file order.
    pub fn chunks(&self) -> &[ChunkRef] {
        &self.chunks
    }

    /// The corrupt or incomplete regions, in file order.
    pub fn bad_chunks(&self) -> &[BadChunk] {
        &self.bad
    }

    /// The footer, if the session was stopped cleanly.
    pub fn footer(&self) -> Option<&SessionFooter> {
        self.footer.as_ref().map(|(f, _)| f)
    }

    /// File offset of the footer.
    pub fn footer_offset(&self) -> Option<u64> {
        self.footer.as_ref().map(|(_, o)| *o)
    }

    /// True when the session has a footer and no bad region: it was stopped
    /// cleanly and nothing is missing.
    pub fn is_complete(&self) -> bool {
        self.footer.is_some() && self.bad.is_empty()
    }

    /// The file's bytes.
    pub fn bytes(&self) -> &[u8] {
        self.data.as_ref()
    }

    /// The payload of a chunk of this reader. A [`ChunkRef`] from another
    /// file that does not fit this one gives an empty slice.
    pub fn payload(&self, c: &ChunkRef) -> &[u8] {
        let start = c.offset as usize + FRAME_HEADER_LEN;
        let end = start.saturating_add(c.len as usize);
        self.data.as_ref().get(start..end).unwrap_or(&[])
    }

    /// The events of a chunk.
    pub fn events(&self, c: &ChunkRef) -> ChunkDecoder<'_> {
        ChunkDecoder::new(self.payload(c))
    }

    /// [`crate::for_each_sample`] on a chunk, with errors wrapped in
    /// [`Error::InChunk`] naming the chunk.
    pub fn for_each_sample(
        &self,
        c: &ChunkRef,
        on_sample: impl FnMut(&ExpandedSample),
        on_marker: impl FnMut(Event),
    ) -> Result<u64> {
        for_each_sample(self.payload(c), on_sample, on_marker).map_err(|e| Error::InChunk {
            index: c.index,
            round: c.round,
            file_offset: c.offset,
            source: Box::new(e),
        })
    }

    /// The session's stack table: every [`Event::StackDef`] of every good
    /// chunk. A chunk that fails to decode contributes the definitions
    /// before its bad byte (the failure itself is reported by
    /// [`SessionReader::for_each_sample`] on that chunk). Empty for a
    /// session recorded without call graphs.
    pub fn stack_table(&self) -> StackTable {
        let mut t = StackTable::new();
        for c in &self.chunks {
            let _ = for_each_sample(
                self.payload(c),
                |_| {},
                |m| {
                    t.add(&m);
                },
            );
        }
        t.settle();
        t
    }
}
