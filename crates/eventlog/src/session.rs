//! The session file: chunk frames and the scanner that finds them (and
//! resynchronises after corruption); the header (`header`) and footer
//! (`footer`) in their own modules. Layout in `docs/FORMAT.md` and in the
//! crate docs.

use std::path::Path;

mod footer;
mod header;
pub(crate) use footer::{encode_footer, parse_footer_body};
pub use footer::{CpuAccounting, OffCpuCounts, SessionFooter};
pub(crate) use header::{encode_header, parse_header, read_header_from};
pub use header::{CgroupSource, EventConfigDesc, PartInfo, SessionHeader};

/// First 8 bytes of every session file.
pub const FILE_MAGIC: [u8; 8] = *b"PROFKIT\0";
/// Newest format version this build writes (and reads). Version 2 added
/// call stacks (`StackSample`, `StackDef`); a session is written in the
/// lowest version that can hold it ([`SessionHeader::format_version`]), so
/// sessions without call graphs are still version 1.
pub const FORMAT_VERSION: u16 = 7;
/// Oldest format version this build reads.
pub const MIN_READ_VERSION: u16 = 1;
/// Magic of a chunk frame.
pub const CHUNK_MAGIC: [u8; 4] = *b"PKCK";
/// Magic of the footer.
pub const FOOTER_MAGIC: [u8; 4] = *b"PKFT";
/// Bytes of a chunk frame header (before the payload).
pub const FRAME_HEADER_LEN: usize = 32;
/// Bytes of the fixed part of the session header before its body.
pub const HEADER_PREFIX_LEN: usize = 14;
/// Largest header or footer body accepted (a sanity limit on forged lengths).
pub const MAX_BODY_LEN: u32 = 16 << 20;
/// Largest chunk payload a frame can hold.
pub const MAX_PAYLOAD_LEN: u64 = u32::MAX as u64;
/// The most CPUs a header's list or a footer's accounting is believed
/// about: Linux's largest `NR_CPUS`. A header listing more is read with an
/// empty list (CPUs unknown); a footer accounting for more is malformed.
pub const MAX_HEADER_CPUS: usize = 8192;

/// A valid chunk found in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ChunkRef {
    /// Position among the file's frames and corrupt regions, from 0.
    pub index: u64,
    /// Sync round number.
    pub round: u64,
    /// Monotonic time of the round, ns.
    pub time: u64,
    /// File offset of the frame header.
    pub offset: u64,
    /// Payload length.
    pub len: u32,
}

impl ChunkRef {
    /// File offset of the payload.
    pub fn payload_offset(&self) -> u64 {
        self.offset + FRAME_HEADER_LEN as u64
    }

    /// File offset just after the chunk.
    pub fn end(&self) -> u64 {
        self.payload_offset() + u64::from(self.len)
    }
}

/// Why a region of the file is not a valid chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BadReason {
    /// No frame or footer magic where one should start.
    BadMagic {
        /// The bytes found instead (up to 4).
        found: Vec<u8>,
    },
    /// The frame header's CRC does not match: its length cannot be trusted,
    /// so the reader scanned forward for the next valid frame.
    FrameHeaderCrc {
        /// CRC stored in the frame.
        stored: u32,
        /// CRC of the frame header bytes.
        computed: u32,
    },
    /// The payload's CRC does not match (the frame header is intact, so the
    /// round is known and the next frame follows directly).
    PayloadCrc {
        /// The chunk's round.
        round: u64,
        /// CRC stored in the frame.
        stored: u32,
        /// CRC of the payload bytes.
        computed: u32,
    },
    /// The frame or footer runs past the end of the file: it is being
    /// written right now, or the writer crashed in the middle of it.
    TornTail {
        /// Bytes the frame needs from its start.
        needed: u64,
        /// Bytes there are.
        available: u64,
    },
    /// The footer is corrupt.
    BadFooter {
        /// What is wrong.
        detail: String,
    },
    /// Bytes after the footer.
    AfterFooter,
}

impl std::fmt::Display for BadReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BadReason::BadMagic { found } => write!(f, "no frame magic (found {found:02x?})"),
            BadReason::FrameHeaderCrc { stored, computed } => {
                write!(f, "frame header CRC mismatch (stored {stored:#010x}, computed {computed:#010x})")
            }
            BadReason::PayloadCrc { round, stored, computed } => write!(
                f,
                "payload CRC mismatch in round {round} (stored {stored:#010x}, computed {computed:#010x})"
            ),
            BadReason::TornTail { needed, available } => write!(
                f,
                "torn tail: frame needs {needed} bytes, {available} present (being written, or cut short by a crash)"
            ),
            BadReason::BadFooter { detail } => write!(f, "corrupt footer: {detail}"),
            BadReason::AfterFooter => write!(f, "data after the footer"),
        }
    }
}

/// A region of the file that is not a valid chunk.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadChunk {
    /// Position among the file's frames and corrupt regions, from 0 (the
    /// same numbering as [`ChunkRef::index`]).
    pub index: u64,
    /// File offset where the region starts.
    pub offset: u64,
    /// Bytes skipped: to the next valid frame, the footer or the end.
    pub len: u64,
    /// Why.
    pub reason: BadReason,
}

impl BadChunk {
    /// True for an incomplete frame at the end of the file (a chunk being
    /// written, or a crash): not corruption.
    pub fn is_torn_tail(&self) -> bool {
        matches!(self.reason, BadReason::TornTail { .. })
    }
}

impl std::fmt::Display for BadChunk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "chunk {} at byte {} ({} bytes): {}",
            self.index, self.offset, self.len, self.reason
        )
    }
}

// ---------------------------------------------------------------- frames

/// The 32 bytes of a chunk frame header.
pub(crate) fn frame_header(round: u64, time: u64, payload: &[u8]) -> [u8; FRAME_HEADER_LEN] {
    let mut h = [0u8; FRAME_HEADER_LEN];
    h[0..4].copy_from_slice(&CHUNK_MAGIC);
    h[4..12].copy_from_slice(&round.to_le_bytes());
    h[12..20].copy_from_slice(&time.to_le_bytes());
    h[20..24].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    h[24..28].copy_from_slice(&crc32fast::hash(payload).to_le_bytes());
    let hcrc = crc32fast::hash(&h[..28]);
    h[28..32].copy_from_slice(&hcrc.to_le_bytes());
    h
}

fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn le64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

/// A chunk frame header whose own CRC checked.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FrameHeader {
    pub round: u64,
    pub time: u64,
    pub len: u32,
    pub payload_crc: u32,
}

/// Parses a 32-byte frame header: `Err((stored, computed))` on CRC mismatch.
pub(crate) fn parse_frame_header(h: &[u8]) -> std::result::Result<FrameHeader, (u32, u32)> {
    let stored = le32(h, 28);
    let computed = crc32fast::hash(&h[..28]);
    if stored != computed {
        return Err((stored, computed));
    }
    Ok(FrameHeader {
        round: le64(h, 4),
        time: le64(h, 12),
        len: le32(h, 20),
        payload_crc: le32(h, 24),
    })
}

/// What starts at a position of the file.
#[derive(Debug)]
pub(crate) enum Found {
    Chunk(ChunkRef),
    /// Frame header intact, payload corrupt; `len` is the whole frame.
    BadPayload {
        len: u64,
        reason: BadReason,
    },
    /// Incomplete at the end of the data.
    Torn {
        needed: u64,
        available: u64,
    },
    Footer {
        footer: SessionFooter,
        len: u64,
    },
    /// Not a frame (or an unusable one): resynchronise.
    Invalid(BadReason),
}

/// Looks at `data[pos..]`; offsets reported are `base + pos`. A footer
/// candidate's CRC is only computed while `budget` (bytes) lasts, and
/// costs it: a file of footer magics each claiming a long body would
/// otherwise cost its length squared (8 MiB: 36 s).
pub(crate) fn probe(data: &[u8], pos: usize, base: u64, budget: &mut u64) -> Found {
    let rest = &data[pos..];
    let m = rest.len().min(4);
    let is_chunk = rest[..m] == CHUNK_MAGIC[..m];
    let is_footer = rest[..m] == FOOTER_MAGIC[..m];
    if !is_chunk && !is_footer {
        return Found::Invalid(BadReason::BadMagic {
            found: rest[..m].to_vec(),
        });
    }
    if is_chunk {
        if rest.len() < FRAME_HEADER_LEN {
            return Found::Torn {
                needed: FRAME_HEADER_LEN as u64,
                available: rest.len() as u64,
            };
        }
        let fh = match parse_frame_header(&rest[..FRAME_HEADER_LEN]) {
            Ok(fh) => fh,
            Err((stored, computed)) => {
                return Found::Invalid(BadReason::FrameHeaderCrc { stored, computed })
            }
        };
        let total = FRAME_HEADER_LEN as u64 + u64::from(fh.len);
        if total > rest.len() as u64 {
            return Found::Torn {
                needed: total,
                available: rest.len() as u64,
            };
        }
        let payload = &rest[FRAME_HEADER_LEN..total as usize];
        let computed = crc32fast::hash(payload);
        if computed != fh.payload_crc {
            return Found::BadPayload {
                len: total,
                reason: BadReason::PayloadCrc {
                    round: fh.round,
                    stored: fh.payload_crc,
                    computed,
                },
            };
        }
        return Found::Chunk(ChunkRef {
            index: 0,
            round: fh.round,
            time: fh.time,
            offset: base + pos as u64,
            len: fh.len,
        });
    }
    // Footer: magic, len u32, body, crc u32.
    if rest.len() < 8 {
        return Found::Torn {
            needed: 8,
            available: rest.len() as u64,
        };
    }
    let body_len = le32(rest, 4);
    if body_len > MAX_BODY_LEN {
        return Found::Invalid(BadReason::BadFooter {
            detail: format!("body length {body_len} over the limit of {MAX_BODY_LEN}"),
        });
    }
    let total = 8 + u64::from(body_len) + 4;
    if total > rest.len() as u64 {
        return Found::Torn {
            needed: total,
            available: rest.len() as u64,
        };
    }
    if total > *budget {
        return Found::Invalid(BadReason::BadFooter {
            detail: "not checked: too many footer candidates in this file".into(),
        });
    }
    *budget -= total;
    let crc_at = total as usize - 4;
    let stored = le32(rest, crc_at);
    let computed = crc32fast::hash(&rest[..crc_at]);
    if stored != computed {
        return Found::Invalid(BadReason::BadFooter {
            detail: format!("CRC stored {stored:#010x}, computed {computed:#010x}"),
        });
    }
    match parse_footer_body(&rest[8..crc_at], base + pos as u64 + 8) {
        Ok(footer) => Found::Footer { footer, len: total },
        Err(e) => Found::Invalid(BadReason::BadFooter {
            detail: e.to_string(),
        }),
    }
}

/// The result of scanning the frames of a file (or of a tail of it).
#[derive(Debug, Default)]
pub(crate) struct Scan {
    pub chunks: Vec<ChunkRef>,
    pub bad: Vec<BadChunk>,
    /// The footer and its file offset.
    pub footer: Option<(SessionFooter, u64)>,
    /// Bytes hashed checking footer candidates (bounded, see [`probe`]).
    pub footer_bytes_checked: u64,
}

/// Scans `data` (which starts at file offset `base`) from `pos` to the end;
/// indices start at `first_index`.
pub(crate) fn scan(data: &[u8], mut pos: usize, base: u64, first_index: u64) -> Scan {
    let mut s = Scan::default();
    let mut index = first_index;
    // Footer checks may hash twice the file plus one largest footer: a
    // genuine footer is always checked, the scan stays linear.
    let initial = 2 * data.len() as u64 + u64::from(MAX_BODY_LEN) + 12;
    let mut budget = initial;
    while pos < data.len() {
        let at = base + pos as u64;
        match probe(data, pos, base, &mut budget) {
            Found::Chunk(mut c) => {
                c.index = index;
                pos = (c.end() - base) as usize;
                s.chunks.push(c);
            }
            Found::BadPayload { len, reason } => {
                s.bad.push(BadChunk {
                    index,
                    offset: at,
                    len,
                    reason,
                });
                pos += len as usize;
            }
            Found::Torn { needed, available } => {
                s.bad.push(BadChunk {
                    index,
                    offset: at,
                    len: available,
                    reason: BadReason::TornTail { needed, available },
                });
                break;
            }
            Found::Footer { footer, len } => {
                s.footer = Some((footer, at));
                pos += len as usize;
                if pos < data.len() {
                    let rest = (data.len() - pos) as u64;
                    s.bad.push(BadChunk {
                        index: index + 1,
                        offset: base + pos as u64,
                        len: rest,
                        reason: BadReason::AfterFooter,
                    });
                }
                break;
            }
            Found::Invalid(reason) => {
                let next = resync(data, pos + 1, base, &mut budget);
                s.bad.push(BadChunk {
                    index,
                    offset: at,
                    len: (next - pos) as u64,
                    reason,
                });
                pos = next;
            }
        }
        index += 1;
    }
    s.footer_bytes_checked = initial - budget;
    s
}

/// The first position at or after `from` where a frame whose header CRC
/// checks (or a valid footer) starts, or `data.len()`. A partial frame
/// header at the very end is not trusted here (it could be payload bytes).
fn resync(data: &[u8], from: usize, base: u64, budget: &mut u64) -> usize {
    let mut p = from;
    while p + 4 <= data.len() {
        match data[p..].iter().position(|&b| b == b'P') {
            None => break,
            Some(i) => p += i,
        }
        if p + 4 > data.len() {
            break;
        }
        let m = &data[p..p + 4];
        if m == CHUNK_MAGIC || m == FOOTER_MAGIC {
            match probe(data, p, base, budget) {
                Found::Chunk(_) | Found::BadPayload { .. } | Found::Footer { .. } => return p,
                // A torn chunk is only believed when its header CRC checked.
                Found::Torn { needed, .. }
                    if m == CHUNK_MAGIC && needed > FRAME_HEADER_LEN as u64 =>
                {
                    return p
                }
                _ => {}
            }
        }
        p += 1;
    }
    data.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{push_struct, push_uvar};
    use crate::error::Error;
    use crate::{ChunkEncoder, Event, LostKind, SessionReader};
    use proptest::prelude::*;

    #[test]
    fn markers_read_back_keep_received_equal_to_written_plus_what_profkit_lost() {
        let mut a = CpuAccounting {
            samples_written: 100,
            samples_received: 100,
            ..Default::default()
        };
        for (k, n) in [
            (LostKind::Ring, 1),
            (LostKind::Overflow, 20),
            (LostKind::DiskFull, 300),
            (LostKind::NoMapping, 4_000),
            (LostKind::NoTask, 50_000),
            (LostKind::Reconcile, 600_000),
            (LostKind::Other, 7_000_000),
        ] {
            a.add_lost_marker(k, n);
        }
        assert_eq!(a.samples_received, 100 + 20 + 300 + 4_000 + 50_000);
        assert_eq!(
            a.samples_received,
            a.samples_written
                + a.lost_overflow
                + a.lost_disk_full
                + a.lost_no_mapping
                + a.lost_no_task
        );
        assert_eq!((a.lost_ring, a.lost_reconcile), (7_000_001, 600_000));
    }

    #[test]
    fn each_lost_kind_adds_to_its_own_counter() {
        let kinds = [
            LostKind::Ring,
            LostKind::Overflow,
            LostKind::DiskFull,
            LostKind::NoMapping,
            LostKind::NoTask,
            LostKind::Reconcile,
            LostKind::Other,
        ];
        let mut a = CpuAccounting::default();
        for (i, k) in kinds.into_iter().enumerate() {
            a.add_lost(k, 1 << i);
        }
        assert_eq!(a.lost_ring, 1 | 1 << 6);
        assert_eq!(a.lost_overflow, 1 << 1);
        assert_eq!(a.lost_disk_full, 1 << 2);
        assert_eq!(a.lost_no_mapping, 1 << 3);
        assert_eq!(a.lost_no_task, 1 << 4);
        assert_eq!(a.lost_reconcile, 1 << 5);
        assert_eq!(a.lost_total(), (1 << 7) - 1);
        assert_eq!((a.samples_received, a.kernel_lost), (0, 0));
        a.add_lost(LostKind::Ring, u64::MAX);
        assert_eq!(a.lost_ring, u64::MAX);
    }

    pub(crate) fn header() -> SessionHeader {
        SessionHeader {
            host: "box".into(),
            kernel_release: "6.1.0-18-amd64".into(),
            event: EventConfigDesc {
                name: "cpu-clock".into(),
                type_: 1,
                config: 0,
                frequency: Some(4000),
                period: None,
                exclude_user: false,
                exclude_kernel: true,
                callchain: false,
                user_stack: 0,
                off_cpu: false,
                sample_times: false,
                jit_code: false,
            },
            cpus: vec![0, 1, 2, 3],
            start_time_unix_ns: 1_700_000_000_000_000_000,
            start_monotonic_ns: 123_456_789,
            sync_interval_ms: 250,
            target: "command ls -l".into(),
            cgroups: Default::default(),
            part: None,
        }
    }

    fn footer() -> SessionFooter {
        SessionFooter {
            end_time_unix_ns: 1_700_000_010_000_000_000,
            end_monotonic_ns: 10_123_456_789,
            rounds: 4,
            accounting: vec![
                CpuAccounting {
                    cpu: 0,
                    samples_received: 10,
                    samples_written: 9,
                    lost_overflow: 1,
                    ..Default::default()
                },
                CpuAccounting {
                    cpu: 3,
                    samples_received: u64::MAX,
                    samples_written: 1,
                    lost_ring: 2,
                    lost_overflow: 3,
                    lost_disk_full: 4,
                    lost_no_mapping: 5,
                    lost_no_task: 6,
                    lost_reconcile: 7,
                    records_skipped: 8,
                    throttle_events: 9,
                    kernel_lost: 10,
                    stacks_unknown: 11,
                    stacks_truncated: 12,
                    user_stacks_cut: 13,
                    ..Default::default()
                },
            ],
        }
    }

    fn payload(round: u64) -> Vec<u8> {
        let mut enc = ChunkEncoder::new();
        for i in 0..(3 + round * 5) {
            enc.sample(
                (i % 2) as u32,
                100 + round as u32,
                100,
                i % 3 == 0,
                0xc0de + (i % 4),
                i * 1000 + round,
            );
        }
        enc.event(&Event::Lost {
            cpu: 0,
            kind: LostKind::Overflow,
            count: round,
        });
        enc.bytes().to_vec()
    }

    #[test]
    fn footer_candidates_cost_a_bounded_number_of_bytes() {
        // 8 MiB of footer magics, each claiming a body that reaches the
        // end of the file (so each would be hashed whole): before, 36 s.
        let mut data = session_bytes(2, false);
        let start = data.len();
        let len = start + (8 << 20);
        while data.len() + 12 <= len {
            let at = data.len();
            let body = (len - at - 12) as u32;
            data.extend_from_slice(&FOOTER_MAGIC);
            data.extend_from_slice(&body.to_le_bytes());
            data.extend_from_slice(&[0u8; 4]);
        }
        let hlen = session_bytes(0, false).len();
        let s = scan(&data, hlen, 0, 0);
        assert_eq!(s.chunks.len(), 2);
        assert!(s.footer.is_none());
        assert!(
            s.footer_bytes_checked <= 2 * data.len() as u64 + u64::from(MAX_BODY_LEN) + 12,
            "{} bytes hashed for a {}-byte file",
            s.footer_bytes_checked,
            data.len()
        );
        // A genuine footer after all that is still found.
        let mut ok = session_bytes(3, true);
        let s = scan(&ok, hlen, 0, 0);
        assert!(s.footer.is_some());
        ok.truncate(ok.len() - 1);
        assert!(scan(&ok, hlen, 0, 0).footer.is_none());
    }

    /// A session in memory: header, `n` chunks, optional footer.
    pub(crate) fn session_bytes(n: u64, with_footer: bool) -> Vec<u8> {
        let mut out = encode_header(&header()).unwrap();
        for round in 0..n {
            let p = payload(round);
            out.extend_from_slice(&frame_header(round, round * 10, &p));
            out.extend_from_slice(&p);
        }
        if with_footer {
            out.extend_from_slice(&encode_footer(&footer()).unwrap());
        }
        out
    }

    #[test]
    fn header_and_footer_round_trip() {
        let bytes = session_bytes(4, true);
        let r = SessionReader::from_bytes(bytes, "mem").unwrap();
        assert_eq!(r.header(), &header());
        assert_eq!(r.footer(), Some(&footer()));
        assert_eq!(r.version(), 1, "no call graphs: still version 1");
        assert_eq!(r.chunks().len(), 4);
        assert!(r.is_complete(), "{:?}", r.bad_chunks());
        for (i, c) in r.chunks().iter().enumerate() {
            assert_eq!(
                (c.index, c.round, c.time),
                (i as u64, i as u64, i as u64 * 10)
            );
            assert_eq!(r.payload(c), payload(i as u64));
        }
        // Optional fields both ways.
        let mut h = header();
        h.event.frequency = None;
        h.event.period = Some(u64::MAX);
        h.cpus.clear();
        let bytes = encode_header(&h).unwrap();
        assert_eq!(parse_header(&bytes, Path::new("x")).unwrap().0, h);
        // Call graphs requested: version 2.
        h.event.callchain = true;
        let bytes = encode_header(&h).unwrap();
        assert_eq!(bytes[8..10], [2, 0]);
        assert_eq!(
            parse_header(&bytes, Path::new("x")).unwrap(),
            (h.clone(), 2, bytes.len())
        );
        // DWARF call graphs: the stack size is appended to the event, and
        // only then (a frame-pointer header is byte for byte as before);
        // version 3 (stacks may be defined on a parent, `StackDefOn`).
        let fp_len = bytes.len();
        h.event.user_stack = 8192;
        let bytes = encode_header(&h).unwrap();
        assert_eq!(bytes.len(), fp_len + 2);
        assert_eq!(bytes[8..10], [3, 0]);
        assert_eq!(
            parse_header(&bytes, Path::new("x")).unwrap(),
            (h, 3, bytes.len())
        );
    }

    /// Issue 25 (6): part headers claiming 16 M CPUs (the zero bytes of a
    /// sparse file) cost 64 MB each in memory.
    #[test]
    fn a_header_listing_more_cpus_than_linux_has_is_read_with_none() {
        let mut h = header();
        h.cpus = (0..MAX_HEADER_CPUS as u32).collect();
        let bytes = encode_header(&h).unwrap();
        assert_eq!(parse_header(&bytes, Path::new("x")).unwrap().0, h);
        h.cpus = vec![0; 1 << 20];
        let bytes = encode_header(&h).unwrap();
        let (back, _, len) = parse_header(&bytes, Path::new("x")).unwrap();
        assert!(back.cpus.is_empty() && back.cpus.capacity() <= MAX_HEADER_CPUS);
        assert_eq!(len, bytes.len(), "the list is read past, not misread");
        assert_eq!(back.start_time_unix_ns, h.start_time_unix_ns);
        // A footer accounting for more CPUs than that is not a footer.
        let f = SessionFooter {
            accounting: vec![CpuAccounting::default(); MAX_HEADER_CPUS + 1],
            ..footer()
        };
        let body = encode_footer(&f).unwrap();
        let err = parse_footer_body(&body[8..body.len() - 4], 0).unwrap_err();
        assert!(
            err.to_string().contains("more than Linux can have"),
            "{err}"
        );
    }

    #[test]
    fn version_1_footers_read_the_appended_fields_as_zero() {
        // A version 1 writer wrote 12 accounting fields.
        let f = footer();
        let mut body = Vec::new();
        push_uvar(&mut body, f.end_time_unix_ns);
        push_uvar(&mut body, f.end_monotonic_ns);
        push_uvar(&mut body, f.rounds);
        push_uvar(&mut body, f.accounting.len() as u64);
        for a in &f.accounting {
            push_struct(&mut body, |b| {
                for v in [
                    u64::from(a.cpu),
                    a.samples_received,
                    a.samples_written,
                    a.lost_ring,
                    a.lost_overflow,
                    a.lost_disk_full,
                    a.lost_no_mapping,
                    a.lost_no_task,
                    a.lost_reconcile,
                    a.records_skipped,
                    a.throttle_events,
                    a.kernel_lost,
                ] {
                    push_uvar(b, v);
                }
            });
        }
        let got = parse_footer_body(&body, 0).unwrap();
        let mut want = f;
        for a in &mut want.accounting {
            a.stacks_unknown = 0;
            a.stacks_truncated = 0;
            a.user_stacks_cut = 0;
        }
        assert_eq!(got, want);
    }

    /// The layouts in docs/FORMAT.md, byte for byte.
    #[test]
    fn golden_header_frame_and_footer() {
        let h = encode_header(&SessionHeader::default()).unwrap();
        #[rustfmt::skip]
        let want_prefix: &[u8] = &[
            b'P', b'R', b'O', b'F', b'K', b'I', b'T', 0, // magic
            0x01, 0x00,                                  // version 1
            0x10, 0x00, 0x00, 0x00,                      // body length 16
            0x00,                                        // host ""
            0x00,                                        // kernel_release ""
            0x08, 0, 0, 0, 0, 0, 0, 0, 0,                // event: struct of 8 bytes
            0x00,                                        // cpus: none
            0x00, 0x00, 0x00,                            // start_time, start_monotonic, sync_interval
            0x00,                                        // target ""
        ];
        assert_eq!(&h[..h.len() - 4], want_prefix);
        assert_eq!(h[h.len() - 4..], crc32fast::hash(want_prefix).to_le_bytes());

        let f = frame_header(7, 9, b"abc");
        assert_eq!(&f[0..4], b"PKCK");
        assert_eq!(f[4..12], 7u64.to_le_bytes());
        assert_eq!(f[12..20], 9u64.to_le_bytes());
        assert_eq!(f[20..24], 3u32.to_le_bytes());
        assert_eq!(f[24..28], 0x3524_41c2u32.to_le_bytes()); // CRC32("abc")
        assert_eq!(f[28..32], crc32fast::hash(&f[..28]).to_le_bytes());

        let ft = encode_footer(&SessionFooter::default()).unwrap();
        assert_eq!(&ft[..12], b"PKFT\x04\0\0\0\0\0\0\0");
        assert_eq!(ft[12..], crc32fast::hash(&ft[..12]).to_le_bytes());
    }

    #[test]
    fn lost_total_adds_every_reason_but_kernel_lost() {
        let a = &footer().accounting[1];
        assert_eq!(a.lost_total(), 2 + 3 + 4 + 5 + 6 + 7);
        let big = CpuAccounting {
            lost_ring: u64::MAX,
            lost_overflow: 1,
            ..Default::default()
        };
        assert_eq!(big.lost_total(), u64::MAX);
    }

    #[test]
    fn appended_accounting_fields_are_ignored_by_this_reader() {
        // A newer writer appended a 16th field to each accounting record and
        // a field at the end of the footer body: this reader still reads it.
        let f = footer();
        let mut body = Vec::new();
        push_uvar(&mut body, f.end_time_unix_ns);
        push_uvar(&mut body, f.end_monotonic_ns);
        push_uvar(&mut body, f.rounds);
        push_uvar(&mut body, f.accounting.len() as u64);
        for a in &f.accounting {
            push_struct(&mut body, |b| {
                for v in [
                    u64::from(a.cpu),
                    a.samples_received,
                    a.samples_written,
                    a.lost_ring,
                    a.lost_overflow,
                    a.lost_disk_full,
                    a.lost_no_mapping,
                    a.lost_no_task,
                    a.lost_reconcile,
                    a.records_skipped,
                    a.throttle_events,
                    a.kernel_lost,
                    a.stacks_unknown,
                    a.stacks_truncated,
                    a.user_stacks_cut,
                    a.offcpu_switches,
                    a.offcpu_intervals,
                    a.offcpu_lost,
                    a.offcpu_no_stack,
                    a.offcpu_unpaired,
                    a.offcpu_dropped,
                    a.offcpu_kernel_lost,
                    424_242, // the new field
                ] {
                    push_uvar(b, v);
                }
            });
        }
        push_uvar(&mut body, 99); // a new footer field
        assert_eq!(parse_footer_body(&body, 0).unwrap(), f);
    }

    #[test]
    fn truncation_at_every_length_gives_a_prefix_of_chunks() {
        let full = session_bytes(4, true);
        let hlen = encode_header(&header()).unwrap().len();
        let good = SessionReader::from_bytes(full.clone(), "full").unwrap();
        let all: Vec<ChunkRef> = good.chunks().to_vec();
        for len in 0..=full.len() {
            let cut = &full[..len];
            match SessionReader::from_bytes(cut, "cut") {
                Err(e) => {
                    assert!(len < hlen, "len {len}: {e}");
                    if len == 0 {
                        assert!(matches!(e, Error::EmptyFile { .. }), "{e}");
                    } else {
                        assert!(matches!(e, Error::TruncatedHeader { .. }), "len {len}: {e}");
                    }
                }
                Ok(r) => {
                    assert!(len >= hlen);
                    let n = r.chunks().len();
                    assert_eq!(r.chunks(), &all[..n], "len {len}");
                    // Anything left over is one torn tail, never corruption.
                    let ends_at = r.chunks().last().map_or(hlen as u64, |c| c.end());
                    if r.footer().is_some() {
                        assert_eq!(len, full.len());
                    } else if ends_at == len as u64 {
                        assert!(r.bad_chunks().is_empty(), "len {len}: {:?}", r.bad_chunks());
                    } else {
                        assert_eq!(r.bad_chunks().len(), 1, "len {len}");
                        assert!(
                            r.bad_chunks()[0].is_torn_tail(),
                            "len {len}: {}",
                            r.bad_chunks()[0]
                        );
                        assert_eq!(r.bad_chunks()[0].offset, ends_at);
                    }
                }
            }
        }
    }

    #[test]
    fn an_off_cpu_session_is_version_5_and_its_counts_round_trip() {
        let mut h = header();
        let plain = encode_header(&h).unwrap();
        h.event.off_cpu = true;
        let bytes = encode_header(&h).unwrap();
        assert_eq!(u16::from_le_bytes([bytes[8], bytes[9]]), 5);
        // user_stack (0) and the off_cpu flag appended to the event struct.
        assert_eq!(bytes.len(), plain.len() + 2);
        let (back, v, _) = parse_header(&bytes, Path::new("s")).unwrap();
        assert_eq!((back, v), (h, 5));
        // The footer's off-CPU counts: absent when all 0 (bytes as before),
        // read back when written.
        let mut f = footer();
        let plain = encode_footer(&f).unwrap();
        f.accounting[0].offcpu_switches = 0;
        assert_eq!(encode_footer(&f).unwrap(), plain);
        f.accounting[1].offcpu_switches = 1;
        f.accounting[1].offcpu_intervals = 2;
        f.accounting[1].offcpu_lost = 3;
        f.accounting[1].offcpu_no_stack = 4;
        f.accounting[1].offcpu_unpaired = 5;
        f.accounting[1].offcpu_dropped = 6;
        f.accounting[1].offcpu_kernel_lost = 7;
        let bytes = encode_footer(&f).unwrap();
        assert_eq!(bytes.len(), plain.len() + 7);
        let body = &bytes[8..bytes.len() - 4];
        assert_eq!(parse_footer_body(body, 8).unwrap(), f);
    }

    /// `jit_code` makes version 7 whatever else is set; without it a
    /// header keeps its version and its bytes.
    #[test]
    fn a_jit_session_is_version_7_and_others_keep_their_bytes() {
        let h = header();
        let plain = encode_header(&h).unwrap();
        for (off_cpu, sample_times) in [(false, false), (true, false), (false, true), (true, true)]
        {
            let mut o = h.clone();
            o.event.off_cpu = off_cpu;
            o.event.sample_times = sample_times;
            let before = encode_header(&o).unwrap();
            assert_ne!(o.format_version(), 7);
            o.event.jit_code = true;
            let bytes = encode_header(&o).unwrap();
            assert_eq!(u16::from_le_bytes([bytes[8], bytes[9]]), 7);
            assert_eq!(o.format_version(), 7);
            let (back, v, _) = parse_header(&bytes, Path::new("f")).unwrap();
            assert_eq!((back, v), (o.clone(), 7));
            // The event struct grows to its jit_code byte: user_stack,
            // off_cpu and sample_times written before it.
            assert_eq!(bytes.len(), plain.len() + 4);
            assert!(bytes.len() > before.len());
        }
        assert_eq!(FORMAT_VERSION, 7);
        assert_eq!(h.format_version(), 1);
    }

    #[test]
    fn a_cgroup_session_is_version_4_and_others_keep_their_bytes() {
        let h = header();
        let plain = encode_header(&h).unwrap();
        assert_eq!(u16::from_le_bytes([plain[8], plain[9]]), h.format_version());
        assert_ne!(h.format_version(), 4);
        for src in [CgroupSource::Sample, CgroupSource::Proc] {
            let c = SessionHeader {
                cgroups: src,
                ..h.clone()
            };
            let bytes = encode_header(&c).unwrap();
            assert_eq!(u16::from_le_bytes([bytes[8], bytes[9]]), 4);
            // One byte more than the same header without cgroups.
            assert_eq!(bytes.len(), plain.len() + 1);
            let (back, v, _) = parse_header(&bytes, Path::new("f")).unwrap();
            assert_eq!((back, v), (c, 4));
        }
        // An unknown source is an error naming it.
        let mut bad = SessionHeader {
            cgroups: CgroupSource::Sample,
            ..h.clone()
        };
        bad.target = String::new();
        let mut bytes = encode_header(&bad).unwrap();
        let at = bytes.len() - 5;
        bytes[at] = 9;
        let n = bytes.len() - 4;
        let crc = crc32fast::hash(&bytes[..n]);
        bytes[n..].copy_from_slice(&crc.to_le_bytes());
        let err = parse_header(&bytes, Path::new("f"))
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown cgroup source 9"), "{err}");
    }

    /// A part of a rotated session carries its place as an appended
    /// field: older readers skip it, the version stays the session's, and
    /// a header-only read gives the same header as the whole file.
    #[test]
    fn a_parts_header_carries_its_place_without_a_new_version() {
        let h = header();
        let plain = encode_header(&h).unwrap();
        let part = PartInfo {
            number: 3,
            first_round: 4711,
            session_start_unix_ns: 1_699_999_000_000_000_000,
            session_start_monotonic_ns: 99,
        };
        for cgroups in [CgroupSource::None, CgroupSource::Proc] {
            let p = SessionHeader {
                part: Some(part),
                cgroups,
                ..h.clone()
            };
            let bytes = encode_header(&p).unwrap();
            assert_eq!(u16::from_le_bytes([bytes[8], bytes[9]]), p.format_version());
            let (back, _, _) = parse_header(&bytes, Path::new("f")).unwrap();
            assert_eq!(back, p);
            // A reader of the fields before it sees a whole header ending
            // where the cgroup byte ends: the rest is an appended struct.
            assert!(bytes.len() > plain.len() + 1);
        }
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("session.000003.pkl");
        let p = SessionHeader {
            part: Some(part),
            ..h.clone()
        };
        let mut w = crate::SessionWriter::create(&f, &p).unwrap();
        w.append_chunk(4711, 5, &[crate::codec::tag::CPU_SWITCH, 0])
            .unwrap();
        drop(w);
        let (only, v) = crate::read_header(&f).unwrap();
        assert_eq!((only, v), (p.clone(), p.format_version()));
        assert_eq!(crate::SessionReader::open(&f).unwrap().header(), &p);
        // Not a session, and not a regular file: errors, not hangs.
        std::fs::write(d.path().join("x"), b"hello").unwrap();
        assert!(crate::read_header(&d.path().join("x")).is_err());
        assert!(crate::read_header(d.path()).is_err());
    }

    #[test]
    fn hostile_cgroup_defs_are_bounded() {
        use crate::codec::{push_uvar, tag};
        // A path over the limit is malformed, not allocated and kept.
        let mut p = vec![tag::CGROUP_DEF];
        let mut body = Vec::new();
        push_uvar(&mut body, 5);
        push_uvar(&mut body, (crate::MAX_CGROUP_PATH + 1) as u64);
        body.extend(std::iter::repeat_n(b'a', crate::MAX_CGROUP_PATH + 1));
        push_uvar(&mut p, body.len() as u64);
        p.extend_from_slice(&body);
        let err = crate::decode_events(&p, |_| {}).unwrap_err().to_string();
        assert!(err.contains("CgroupDef") && err.contains("4096"), "{err}");
        // A length beyond the payload is truncation, not an allocation.
        let p = [tag::CGROUP_DEF, 0x05, 0x01, 0xff, 0xff, 0xff, 0x0f];
        assert!(crate::decode_events(&p, |_| {}).is_err());
        // A huge id is fine (u64); an overlong varint is not.
        let p = [
            tag::CGROUP_SWITCH,
            0xff,
            0xff,
            0xff,
            0xff,
            0xff,
            0xff,
            0xff,
            0xff,
            0xff,
            0x7f,
        ];
        assert!(crate::decode_events(&p, |_| {}).is_err());
        let p = [tag::CGROUP_SWITCH];
        assert!(crate::decode_events(&p, |_| {}).is_err());
    }

    #[test]
    fn header_errors() {
        let p = Path::new("f");
        let full = session_bytes(0, false);
        assert!(matches!(parse_header(&[], p), Err(Error::EmptyFile { .. })));
        let err = parse_header(b"\x7fELF\x02\x01\x01\x00rest-of-an-elf-file", p).unwrap_err();
        assert!(err.to_string().contains("not a profkit session"), "{err}");
        let mut future = full.clone();
        future[8..10].copy_from_slice(&8u16.to_le_bytes());
        let err = parse_header(&future, p).unwrap_err();
        assert!(
            matches!(
                err,
                Error::UnsupportedVersion {
                    found: 8,
                    min: 1,
                    max: 7,
                    ..
                }
            ),
            "{err}"
        );
        assert!(
            err.to_string().contains("version 8") && err.to_string().contains("1 to 7"),
            "{err}"
        );
        let mut flipped = full.clone();
        flipped[20] ^= 1;
        assert!(matches!(
            parse_header(&flipped, p),
            Err(Error::HeaderCrc { .. })
        ));
        let mut huge = full.clone();
        huge[10..14].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            parse_header(&huge, p),
            Err(Error::TruncatedHeader { .. })
        ));
    }

    #[test]
    fn corrupt_frame_header_resyncs_to_next_frame() {
        let full = session_bytes(4, true);
        let good = SessionReader::from_bytes(full.clone(), "full").unwrap();
        let c1 = good.chunks()[1];
        // Corrupt chunk 1's length field: header CRC fails, reader scans on.
        let mut bad = full.clone();
        bad[c1.offset as usize + 21] ^= 0x40;
        let r = SessionReader::from_bytes(bad, "bad").unwrap();
        let rounds: Vec<u64> = r.chunks().iter().map(|c| c.round).collect();
        assert_eq!(rounds, [0, 2, 3]);
        assert_eq!(r.bad_chunks().len(), 1);
        let b = &r.bad_chunks()[0];
        assert_eq!(
            (b.index, b.offset, b.len),
            (1, c1.offset, c1.end() - c1.offset)
        );
        assert!(matches!(b.reason, BadReason::FrameHeaderCrc { .. }), "{b}");
        assert!(r.footer().is_some());
        // Garbage magic also resyncs.
        let mut bad = full.clone();
        bad[c1.offset as usize] = b'X';
        let r = SessionReader::from_bytes(bad, "bad").unwrap();
        assert_eq!(r.chunks().len(), 3);
        assert!(matches!(
            r.bad_chunks()[0].reason,
            BadReason::BadMagic { .. }
        ));
        // Bytes after the footer.
        let mut extra = full.clone();
        extra.extend_from_slice(b"junk");
        let r = SessionReader::from_bytes(extra, "x").unwrap();
        assert_eq!(r.chunks().len(), 4);
        assert!(r.footer().is_some() && !r.is_complete());
        assert_eq!(r.bad_chunks()[0].reason, BadReason::AfterFooter);
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        #[test]
        fn reader_never_panics_on_mutations(
            flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..6),
            cut in any::<prop::sample::Index>(),
            chunks in 0u64..5,
        ) {
            let mut bytes = session_bytes(chunks, true);
            for (i, x) in flips {
                let i = i.index(bytes.len());
                bytes[i] ^= x;
            }
            let len = cut.index(bytes.len() + 1);
            bytes.truncate(len);
            if let Ok(r) = SessionReader::from_bytes(&bytes[..], "fuzz") {
                for c in r.chunks() {
                    // A chunk whose CRC checks decodes (mutations that keep
                    // the CRC right are astronomically unlikely here).
                    let _ = r.for_each_sample(c, |_| {}, |_| {});
                    prop_assert!(c.end() <= len as u64);
                }
                for b in r.bad_chunks() {
                    prop_assert!(b.offset + b.len <= len as u64, "{}", b);
                    let _ = b.to_string();
                }
            }
        }

        #[test]
        fn reader_never_panics_on_random_frames(body in prop::collection::vec(any::<u8>(), 0..300), magic_at in prop::collection::vec(any::<prop::sample::Index>(), 0..4)) {
            let mut bytes = session_bytes(0, false);
            let start = bytes.len();
            bytes.extend_from_slice(&body);
            for m in magic_at {
                if body.len() >= 4 {
                    let i = start + m.index(body.len() - 3);
                    let magic = if i % 2 == 0 { CHUNK_MAGIC } else { FOOTER_MAGIC };
                    bytes[i..i + 4].copy_from_slice(&magic);
                }
            }
            let r = SessionReader::from_bytes(&bytes[..], "fuzz").unwrap();
            let covered: u64 = r.chunks().iter().map(|c| c.end() - c.offset).sum::<u64>()
                + r.bad_chunks().iter().map(|b| b.len).sum::<u64>();
            prop_assert!(covered <= body.len() as u64);
        }
    }
}
