//! The one error type of this crate. Every message names the offending value
//! (byte offset, tag, version, chunk index) so a user can find the bad byte
//! with `xxd -s`.

use std::io;
use std::path::PathBuf;

/// Everything that can go wrong while encoding, decoding, writing or reading
/// a session.
///
/// Offsets in decoding errors are relative to what was being decoded: the
/// chunk payload for stream errors, the file for header and footer errors.
/// [`Error::InChunk`] wraps a payload error with the chunk's index, round and
/// file offset.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A system call on the session file failed (`ENOSPC` comes back here, so
    /// the daemon can count the loss and carry on).
    #[error("{op} {}: {source}", path.display())]
    Io {
        /// What was being done: `"create"`, `"open"`, `"write chunk"`, ...
        op: &'static str,
        /// The session file.
        path: PathBuf,
        /// The underlying error; match on `source.raw_os_error()` for errno.
        source: io::Error,
    },
    /// The file is empty: it was created but its header never reached the disk.
    #[error("{}: empty file (0 bytes), not a profkit session: the recorder may have died before writing the header", path.display())]
    EmptyFile {
        /// The file.
        path: PathBuf,
    },
    /// The file does not start with the profkit magic.
    #[error("{}: not a profkit session: it starts with {found:02x?}, a session starts with \"PROFKIT\\0\"", path.display())]
    NotASession {
        /// The file.
        path: PathBuf,
        /// Its first (up to 8) bytes.
        found: Vec<u8>,
    },
    /// The file was written by a format version this build cannot read.
    #[error("{}: session format version {found}; this build of profkit reads versions {min} to {max}: use a newer profkit", path.display())]
    UnsupportedVersion {
        /// The file.
        path: PathBuf,
        /// The version stored in the file.
        found: u16,
        /// Oldest version this build reads.
        min: u16,
        /// Newest version this build reads.
        max: u16,
    },
    /// The file ends inside the session header.
    #[error("{}: session header truncated: the file has {len} bytes, the header needs {needed}", path.display())]
    TruncatedHeader {
        /// The file.
        path: PathBuf,
        /// File length.
        len: u64,
        /// Bytes the header needs.
        needed: u64,
    },
    /// The session header's CRC does not match its bytes.
    #[error("{}: session header corrupt: CRC32 stored {stored:#010x}, computed {computed:#010x} over bytes 0..{end}", path.display())]
    HeaderCrc {
        /// The file.
        path: PathBuf,
        /// CRC stored in the file.
        stored: u32,
        /// CRC of the bytes.
        computed: u32,
        /// Offset where the CRC is stored.
        end: u64,
    },
    /// A header, footer or record body is malformed (after its CRC matched,
    /// so this is a writer bug or a deliberate forgery).
    #[error("malformed {what} at byte {offset}: {reason}")]
    Malformed {
        /// What was being decoded: `"header"`, `"footer"`, `"CookieDef"`, ...
        what: &'static str,
        /// Byte offset of the bad field.
        offset: u64,
        /// What was wrong with it.
        reason: String,
    },
    /// A chunk payload holds a tag this build does not know or that is
    /// reserved for a later format version.
    #[error("unknown event tag {tag:#04x}{} at byte {offset} of the chunk payload", reserved_name(*tag))]
    UnknownTag {
        /// The tag byte.
        tag: u8,
        /// Its offset in the payload.
        offset: u64,
    },
    /// A chunk payload ends in the middle of an event.
    #[error("chunk payload truncated inside {what} at byte {offset} (payload is {len} bytes)")]
    Truncated {
        /// The event or field being read.
        what: &'static str,
        /// Offset where reading stopped.
        offset: u64,
        /// Payload length.
        len: u64,
    },
    /// A varint is longer than 10 bytes or overflows 64 bits.
    #[error("bad varint at byte {offset}: more than 64 bits")]
    BadVarint {
        /// Offset of its first byte.
        offset: u64,
    },
    /// A cookie back-reference names a slot no cookie was put into.
    #[error("cookie reference to empty slot {slot} at byte {offset} (only {filled} slots filled in this chunk)")]
    EmptyCookieSlot {
        /// The slot.
        slot: u8,
        /// Offset of the tag.
        offset: u64,
        /// Slots filled so far in the chunk.
        filled: usize,
    },
    /// A sample appears before the state it needs was set in this chunk.
    #[error(
        "sample at byte {offset} of the chunk payload before any {missing} was set in the chunk"
    )]
    SampleWithoutState {
        /// Offset of the sample tag.
        offset: u64,
        /// `"cpu"`, `"task"`, `"mode"` or `"cookie"`.
        missing: &'static str,
    },
    /// A payload decoding error, with the chunk it happened in.
    #[error("chunk {index} (round {round}, file offset {file_offset}): {source}")]
    InChunk {
        /// The chunk's index (see [`crate::ChunkRef::index`]).
        index: u64,
        /// The chunk's round.
        round: u64,
        /// File offset of the chunk frame.
        file_offset: u64,
        /// The payload error.
        source: Box<Error>,
    },
    /// A chunk payload is larger than a frame can describe.
    #[error("chunk payload of {len} bytes exceeds the frame limit of {max} bytes")]
    PayloadTooLarge {
        /// Payload length.
        len: u64,
        /// The limit.
        max: u64,
    },
    /// A header or footer body is larger than the format allows.
    #[error("{what} body of {len} bytes exceeds the limit of {max} bytes")]
    BodyTooLarge {
        /// `"header"` or `"footer"`.
        what: &'static str,
        /// Body length.
        len: u64,
        /// The limit.
        max: u64,
    },
    /// `append_chunk` was called with a round not after the last one written.
    #[error("round {round} is not after the last written round {last}")]
    RoundNotIncreasing {
        /// The round passed in.
        round: u64,
        /// The last round in the file.
        last: u64,
    },
    /// The session already has a footer: nothing may follow it.
    #[error("{}: session already finished (it has a footer at byte {offset}); nothing can be appended", path.display())]
    Finished {
        /// The file.
        path: PathBuf,
        /// Offset of the footer.
        offset: u64,
    },
    /// An earlier write failed and truncating the partial bytes failed too;
    /// the writer refuses to append after a torn chunk.
    #[error("{}: an earlier write failed and could not be rolled back to byte {len}: {source}", path.display())]
    Poisoned {
        /// The file.
        path: PathBuf,
        /// The length the file should be truncated to.
        len: u64,
        /// The truncate error.
        source: io::Error,
    },
}

fn reserved_name(tag: u8) -> &'static str {
    match tag {
        0x00 => " (zero byte: zero-filled or overwritten data?)",
        _ => "",
    }
}

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn io(op: &'static str, path: &std::path::Path, source: io::Error) -> Self {
        Error::Io {
            op,
            path: path.to_path_buf(),
            source,
        }
    }

    pub(crate) fn malformed(what: &'static str, offset: u64, reason: impl Into<String>) -> Self {
        Error::Malformed {
            what,
            offset,
            reason: reason.into(),
        }
    }
}
