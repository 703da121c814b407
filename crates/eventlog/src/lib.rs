//! The event stream and the session file of profkit.
//!
//! This crate owns the bytes between the sync stage and the report: the
//! event codes and their encoding ([`ChunkEncoder`], [`ChunkDecoder`],
//! [`Expander`], [`for_each_sample`]), the chunk framing, the session file
//! ([`SessionWriter`], [`SessionReader`]) with its [`SessionHeader`],
//! [`SessionFooter`] and per-CPU [`CpuAccounting`], the cookie table
//! entries ([`CookieEntry`]) that tie a sample's [`Cookie`] to a binary,
//! and call stacks: samples that refer to a session-wide stack id
//! ([`ChunkEncoder::sample_with_stack`], [`ExpandedSample::stack`]) and the
//! [`Event::StackDef`] markers that define each stack's [`Frame`]s once
//! (or [`Event::StackDefOn`], version 3: its own frames on an older
//! stack), collected by readers into a [`StackTable`]. Since version 6 each
//! sample may carry its own time ([`ChunkEncoder::time`],
//! [`ExpandedSample::time`]: CLOCK_MONOTONIC ns, delta-coded against the
//! CPU run's last time and step, in the chunk's `TimeUnit` ticks). Since
//! version 7 a session may hold JIT code: [`CookieKind::Jit`] cookies
//! (a runtime's code described by its jitdump file, offsets absolute
//! addresses) and the [`Event::JitCode`] markers naming each function
//! (name, code bytes, source lines; bounded by [`MAX_JIT_NAME`],
//! [`MAX_JIT_CODE`], [`MAX_JIT_FILES`], [`MAX_JIT_LINES`]). The
//! byte-exact specification is `docs/FORMAT.md`.
//!
//! Cookie derivation is part of the format too ([`cookie`]): the cookie and
//! [`CookieEntry`] of each kind of code (user file, kernel, module,
//! anonymous memory, vDSO, `[unknown]`), the rule for which mapping paths
//! are anonymous code ([`is_anonymous_code`]), kallsyms' spelling of module
//! names ([`module_name`]) and build-ids from ELF notes
//! ([`build_id_from_notes`]), so every writer of sessions (the sync stage,
//! `profkit-import`) names a binary alike. Which [`CpuAccounting`] counter a
//! [`LostKind`] adds to is [`CpuAccounting::add_lost`].
//! The files of a session directory are named in one place,
//! [`SessionLayout`] (with the `.build-id` path rule, [`build_id_path`]).
//! Names in a session are untrusted text; [`shown`] is the one rule for
//! showing one on a line of text (every control character escaped,
//! newlines included).
//!
//! # Design constraints
//!
//! - **Byte-consuming only.** No `perf_event`, no `/proc`, no threads: the
//!   same code reads a live session and a recorded one in `testdata/`.
//! - **The hot path is the sync stage's.** [`ChunkEncoder::sample`] writes a
//!   sample plus only the state that changed, without allocating: 110 M
//!   samples/s on the 2-core development VM (target was 50 M/s);
//!   [`for_each_sample`] decodes and expands 1 M samples in 6.8 ms on one
//!   core (target: well under 20 ms).
//! - **Small.** 4.18 bytes per sample on the realistic stream of [`synth`]
//!   (task change every ~50 samples, binary change every ~10), counting
//!   everything in the session file (target was 7). A sample's offset is
//!   written absolute or as a zigzag delta against the previous offset in
//!   the same binary, whichever is shorter ([`OffsetCoding::Adaptive`]):
//!   measured smaller than absolute-only (4.61) and delta-only (4.29).
//!   bincode 1.3.3 (varint) of the same [`Event`] stream takes 7.34 bytes
//!   per sample and decodes at half the speed, so the stream is hand laid
//!   out; header, footer and cookie bodies use the same LEB128 scheme (not
//!   bincode) so one page, `docs/FORMAT.md`, describes every byte and
//!   appended fields stay readable both ways. Numbers and command there.
//!   With call graphs, 7.0 bytes per sample on the sync bench's realistic
//!   stream and 8.7 on a recorded build (target was 12; `perf.data` took
//!   140 on the same build): a stack is stored once per session as runs of
//!   frames, and a sample names it with nothing ("same stack as the last
//!   sample in this binary") or a one- or two-byte id delta.
//! - **Every chunk stands alone.** A chunk is one sync round; decoding state
//!   starts unset in each, so chunks decode in parallel and a corrupt chunk
//!   costs only itself.
//! - **Untrusted input.** A reader never panics on a corrupt or truncated
//!   file, checks every length before allocating, rejects unknown tags with
//!   the tag and byte offset, and tells a torn tail (a chunk being written
//!   or cut by a crash) from corruption.
//! - **Crash- and disk-full-safe writing.** One `write_all` per chunk on an
//!   `O_APPEND` descriptor; a failed write is truncated away, so a later
//!   chunk never follows a torn one.
//!
//! # Example
//!
//! ```
//! use profkit_eventlog::*;
//!
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("session.pkl");
//! let header = SessionHeader { target: "system-wide".into(), cpus: vec![0, 1], ..Default::default() };
//! let mut w = SessionWriter::create(&path, &header)?;
//!
//! // One sync round: two samples on CPU 1 and a marker.
//! let mut enc = ChunkEncoder::new();
//! enc.sample(1, 42, 42, false, 0xc0ffee, 0x1000);
//! enc.event(&Event::Lost { cpu: 1, kind: LostKind::Ring, count: 5 });
//! enc.sample(1, 42, 43, true, 0xbeef, 0xffff);
//! w.append_chunk(0, 123_456, enc.bytes())?;
//! w.write_footer(&SessionFooter { rounds: 1, ..Default::default() })?;
//!
//! // Read it back.
//! let r = SessionReader::open(&path)?;
//! assert_eq!(r.header(), &header);
//! assert!(r.is_complete());
//! let chunk = &r.chunks()[0];
//! let mut got = Vec::new();
//! let mut markers = Vec::new();
//! r.for_each_sample(chunk, |s| got.push(*s), |m| markers.push(m))?;
//! assert_eq!(got[1], ExpandedSample { cpu: 1, pid: 42, tid: 43, kernel: true, cookie: 0xbeef, offset: 0xffff, stack: None, cgroup: 0, time: None });
//! assert_eq!(markers, [Event::Lost { cpu: 1, kind: LostKind::Ring, count: 5 }]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # What it is not for
//!
//! It does not decide which mapping a sample falls in (the sync stage
//! does; this crate only says what cookie a binary gets), resolve symbols, or
//! manage the session directory. It is not a general trace format: there
//! are no timestamps per sample (a chunk has the time of its round), and
//! events can only be read in stream order within a chunk. It does not
//! follow a growing file: [`SessionReader::open`] takes a snapshot.
//! Stacks are not chunk-local: a report resolves stack ids after reading
//! every chunk's definitions (chunks still decode independently).
//!
//! # Implementation notes
//!
//! The file, front to back (all fixed-width integers little-endian, varints
//! LEB128; exact layout in `docs/FORMAT.md`):
//!
//! ```text
//!  offset 0
//!  +----------------------------------------------------------------+
//!  | "PROFKIT\0" | version u16 | body_len u32 | header body | CRC32  |  header
//!  +----------------------------------------------------------------+
//!  | "PKCK" | round u64 | time u64 | len u32 | payload CRC32 | hdr CRC32 |  chunk frame (32 B)
//!  | payload: len bytes of ChunkEncoder output                      |  round 0
//!  +----------------------------------------------------------------+
//!  | "PKCK" | ...                                                  |  round 1
//!  | ...                                                            |
//!  +----------------------------------------------------------------+
//!  | "PKFT" | body_len u32 | footer body | CRC32                     |  footer (at stop)
//!  +----------------------------------------------------------------+
//! ```
//!
//! A payload is a sequence of tagged events. State events are written only
//! when the state changes, and a binary seen earlier in the chunk is named
//! by a one-byte slot reference instead of its 8-byte cookie:
//!
//! ```text
//!  CPU 2, task 812, user, libc   sample  sample   kernel  sample  back to libc  sample
//!  [01 02][02 ac06 00][03][05 <8 B>][10 ..][11 ..][04][05 <8 B>][10 ..][03][40][11 ..]
//!                          slot 0 ^                    slot 1 ^          ^ ref slot 0
//! ```
//!
//! With call graphs (format version 2) a sample names its callers by a
//! session-wide stack id, defined once by a `StackDef` marker; each cookie
//! slot also remembers its last stack id, so a run of samples on one stack
//! costs no id at all:
//!
//! ```text
//!  [25 len id runs (cookie kernel n offsets...)...]  StackDef 5, in the first chunk that uses it
//!  ... [05 <8 B>][12 off 0a][15 d][15 d][13 d 04] ...
//!       slot 0    ^stack 0+5 ^same  ^same ^stack 5+2
//! ```
//!
//! The reader scans frames in order; a frame whose header CRC fails makes
//! it search forward for the next `PKCK`/`PKFT` whose CRC checks; a frame
//! whose payload CRC fails is skipped by its (CRC-checked) length.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod codec;
pub mod cookie;
mod decode;
mod encode;
mod error;
mod event;
mod idlist;
pub mod layout;
mod markers;
pub mod parts;
mod reader;
mod session;
mod shown;
mod stacks;
pub mod synth;
mod writer;

pub use codec::{tag, COOKIE_SLOTS};
pub use cookie::{
    anon_entry, build_id_from_notes, claimed_file_entry, file_entry, is_anonymous_code, jit_entry,
    kernel_entry, module_entry, module_name, unknown_entry, vdso_entry,
};
pub use decode::{decode_events, for_each_sample, ChunkDecoder, Expanded, Expander};
pub use encode::{ChunkEncoder, OffsetCoding};
pub use error::{Error, Result};
pub use event::{
    cookie_hash, Cookie, CookieEntry, CookieKind, Event, ExpandedSample, FileCheck, FileIdentity,
    Frame, JitCode, JitLine, LostKind, NsTask, OffCpuKind, COOKIE_NONE, COOKIE_UNKNOWN,
};
pub use idlist::{format_id_list, parse_id_list, IdListError};
pub use layout::{build_id_path, SessionLayout};
pub use markers::{
    MAX_CGROUP_PATH, MAX_JIT_CODE, MAX_JIT_FILES, MAX_JIT_LINES, MAX_JIT_NAME, MAX_STACK_FRAMES,
};
pub use reader::{read_header, SessionReader};
pub use session::{
    BadChunk, BadReason, CgroupSource, ChunkRef, CpuAccounting, EventConfigDesc, OffCpuCounts,
    PartInfo, SessionFooter, SessionHeader, CHUNK_MAGIC, FILE_MAGIC, FOOTER_MAGIC, FORMAT_VERSION,
    FRAME_HEADER_LEN, MAX_HEADER_CPUS, MAX_PAYLOAD_LEN, MIN_READ_VERSION,
};
pub use shown::shown;
pub use stacks::{FrameBudget, StackTable, ON_FRAME_BUDGET};
pub use writer::{Resume, SessionWriter};
