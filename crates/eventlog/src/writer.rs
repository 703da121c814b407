//! [`SessionWriter`]: appends chunks to a session file, one `write_all` per
//! chunk, and rolls a failed write back so no chunk ever follows a torn one.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::session::{
    encode_footer, encode_header, frame_header, parse_frame_header, scan, BadChunk, SessionFooter,
    SessionHeader, CHUNK_MAGIC, FRAME_HEADER_LEN, MAX_PAYLOAD_LEN,
};

/// What [`SessionWriter::open_append`] found in the file it resumes.
#[derive(Debug, Clone)]
pub struct Resume {
    /// The session's header.
    pub header: SessionHeader,
    /// The round after the last valid chunk (0 if there is none).
    pub next_round: u64,
    /// Valid chunks kept.
    pub chunks: u64,
    /// Bytes cut from the end (a torn chunk, or garbage after the last
    /// valid chunk).
    pub truncated: u64,
    /// Corrupt regions before the last valid chunk; they stay in the file
    /// and readers skip them.
    pub bad_chunks: Vec<BadChunk>,
}

/// Writes a session file.
///
/// All writes go through one `O_APPEND` descriptor, each chunk with a single
/// `write_all` of a prebuilt buffer, so a concurrent reader sees whole
/// chunks plus at most one partial chunk at the end (which it reports as a
/// torn tail). If a write fails (`ENOSPC`, `EIO`), the file is truncated back
/// to its length before the write and the error is returned as
/// [`Error::Io`]: the caller counts the loss and carries on. If that
/// truncation fails too, the writer remembers the length it must return to,
/// retries the truncation before the next write, and refuses to append
/// ([`Error::Poisoned`]) until it succeeds, so a later chunk never follows a
/// torn one. Should the process die in that state, the file ends in a torn
/// chunk, which readers report and [`SessionWriter::open_append`] cuts off.
#[derive(Debug)]
pub struct SessionWriter {
    file: File,
    path: PathBuf,
    /// File length after the last complete write.
    len: u64,
    last_round: Option<u64>,
    /// A failed write left bytes past `len` that could not be truncated.
    dirty: bool,
    /// Offset of the footer once written.
    footer_at: Option<u64>,
    buf: Vec<u8>,
}

impl SessionWriter {
    /// Creates a new session file (mode 0600; fails if it exists or is a
    /// symlink) and writes the header. If writing the header fails, the
    /// file is removed.
    pub fn create(path: impl AsRef<Path>, header: &SessionHeader) -> Result<Self> {
        let path = path.as_ref();
        let bytes = encode_header(header)?;
        let mut file = OpenOptions::new()
            .append(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path)
            .map_err(|e| Error::io("create", path, e))?;
        if let Err(e) = file.write_all(&bytes) {
            drop(file);
            // We created it (create_new), so it is ours to remove.
            let _ = std::fs::remove_file(path);
            return Err(Error::io("write header of", path, e));
        }
        Ok(SessionWriter {
            file,
            path: path.to_path_buf(),
            len: bytes.len() as u64,
            last_round: None,
            dirty: false,
            footer_at: None,
            buf: Vec::new(),
        })
    }

    /// Reopens a session after a crash: checks the header, verifies every
    /// chunk, cuts a torn tail back to the end of the last valid chunk and
    /// returns the writer with what it found. A session that already has a
    /// footer is refused ([`Error::Finished`]).
    ///
    /// Memory: chunks are verified one at a time; only if a corrupt region
    /// is met is the rest of the file read at once to resynchronise.
    pub fn open_append(path: impl AsRef<Path>) -> Result<(Self, Resume)> {
        let path = path.as_ref();
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path)
            .map_err(|e| Error::io("open for append", path, e))?;
        let file_len = file
            .metadata()
            .map_err(|e| Error::io("stat", path, e))?
            .len();

        // Header.
        let (header, _, hlen) = crate::session::read_header_from(&file, file_len, path)?;

        // Chunks, one at a time.
        let mut pos = hlen as u64;
        let mut last_round = None;
        let mut chunks = 0u64;
        let mut fh = [0u8; FRAME_HEADER_LEN];
        let mut payload = Vec::new();
        let mut cut = pos;
        let mut bad_chunks = Vec::new();
        loop {
            if pos + FRAME_HEADER_LEN as u64 > file_len {
                break;
            }
            file.read_exact_at(&mut fh, pos)
                .map_err(|e| Error::io("read", path, e))?;
            if fh[..4] != CHUNK_MAGIC {
                break;
            }
            let Ok(h) = parse_frame_header(&fh) else {
                break;
            };
            let end = pos + FRAME_HEADER_LEN as u64 + u64::from(h.len);
            if end > file_len {
                break;
            }
            // Length checked against the file before allocating.
            payload.resize(h.len as usize, 0);
            file.read_exact_at(&mut payload, pos + FRAME_HEADER_LEN as u64)
                .map_err(|e| Error::io("read", path, e))?;
            if crc32fast::hash(&payload) != h.payload_crc {
                break;
            }
            last_round = Some(h.round);
            chunks += 1;
            pos = end;
            cut = end;
        }
        if pos < file_len {
            // Something other than a valid chunk: scan the rest for later
            // valid chunks (a corrupt chunk in the middle) or a footer. A torn
            // footer (the writer died while finishing) is cut like a torn chunk.
            let mut rest = vec![0u8; (file_len - pos) as usize];
            file.read_exact_at(&mut rest, pos)
                .map_err(|e| Error::io("read", path, e))?;
            let s = scan(&rest, 0, pos, chunks);
            if let Some((_, offset)) = s.footer {
                return Err(Error::Finished {
                    path: path.to_path_buf(),
                    offset,
                });
            }
            if let Some(last) = s.chunks.last() {
                last_round = Some(last.round);
                chunks += s.chunks.len() as u64;
                cut = last.end();
                bad_chunks = s.bad.into_iter().filter(|b| b.offset < cut).collect();
            }
        }
        let truncated = file_len - cut;
        if truncated > 0 {
            file.set_len(cut)
                .map_err(|e| Error::io("truncate torn tail of", path, e))?;
        }
        let next_round = last_round.map_or(0, |r| r.saturating_add(1));
        let writer = SessionWriter {
            file,
            path: path.to_path_buf(),
            len: cut,
            last_round,
            dirty: false,
            footer_at: None,
            buf: Vec::new(),
        };
        Ok((
            writer,
            Resume {
                header,
                next_round,
                chunks,
                truncated,
                bad_chunks,
            },
        ))
    }

    /// The session file's path (as messages name it).
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Names the file `shown` in the messages of later errors: for a file
    /// opened through a held directory (`/proc/self/fd/N/...`) whose name
    /// to its user is another.
    pub fn shown_as(mut self, shown: &Path) -> Self {
        self.path = shown.to_path_buf();
        self
    }

    /// Bytes in the file (after the last complete write).
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Always false: a session has at least its header.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The smallest round [`SessionWriter::append_chunk`] accepts next.
    pub fn next_round(&self) -> u64 {
        self.last_round.map_or(0, |r| r.saturating_add(1))
    }

    /// Appends one chunk (frame + payload) with a single `write_all`.
    /// Returns the bytes written. `round` must be after the last round.
    pub fn append_chunk(&mut self, round: u64, time: u64, payload: &[u8]) -> Result<u64> {
        self.check_open()?;
        if payload.len() as u64 > MAX_PAYLOAD_LEN {
            return Err(Error::PayloadTooLarge {
                len: payload.len() as u64,
                max: MAX_PAYLOAD_LEN,
            });
        }
        if let Some(last) = self.last_round {
            if round <= last {
                return Err(Error::RoundNotIncreasing { round, last });
            }
        }
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        buf.extend_from_slice(&frame_header(round, time, payload));
        buf.extend_from_slice(payload);
        let r = self.write_whole(&buf, "write chunk to");
        self.buf = buf;
        let n = r?;
        self.last_round = Some(round);
        Ok(n)
    }

    /// Writes the footer; afterwards nothing more can be appended.
    pub fn write_footer(&mut self, footer: &SessionFooter) -> Result<u64> {
        self.check_open()?;
        let bytes = encode_footer(footer)?;
        let at = self.len;
        let n = self.write_whole(&bytes, "write footer to")?;
        self.footer_at = Some(at);
        Ok(n)
    }

    /// `fdatasync`: the chunks written so far reach the disk.
    pub fn sync_data(&self) -> Result<()> {
        self.file
            .sync_data()
            .map_err(|e| Error::io("fdatasync", &self.path, e))
    }

    fn check_open(&mut self) -> Result<()> {
        if let Some(offset) = self.footer_at {
            return Err(Error::Finished {
                path: self.path.clone(),
                offset,
            });
        }
        if self.dirty {
            // Retry the rollback of an earlier failed write.
            self.file
                .set_len(self.len)
                .map_err(|source| Error::Poisoned {
                    path: self.path.clone(),
                    len: self.len,
                    source,
                })?;
            self.dirty = false;
        }
        Ok(())
    }

    fn write_whole(&mut self, bytes: &[u8], op: &'static str) -> Result<u64> {
        match self.file.write_all(bytes) {
            Ok(()) => {
                self.len += bytes.len() as u64;
                Ok(bytes.len() as u64)
            }
            Err(e) => {
                if self.file.set_len(self.len).is_err() {
                    self.dirty = true;
                }
                Err(Error::io(op, &self.path, e))
            }
        }
    }
}
