//! Disassembly for profkit's annotation (`profreport --annotate`, like `perf annotate` and
//! `opannotate --assembly`): a function's machine code read from its binary by range,
//! decoded, and the samples of a session counted per instruction.
//!
//! This crate owns:
//! - reading the bytes of one function from an ELF file ([`read_code`]): the ELF header
//!   and program headers, then the function's range through the executable PT_LOAD segment
//!   that holds it, and nothing more; or taking code held in memory with its address
//!   ([`Code::from_bytes`]: a runtime's JIT code, whose bytes the session keeps);
//! - mapping the file offsets that sessions store to link-time addresses through the
//!   PT_LOAD headers ([`file_offset_to_vaddr`], or [`Segments`] for many offsets), with
//!   `profkit-elf`'s one rule that `profkit-symbols` and `profkit-sync` use too, so PIE and
//!   non-PIE are one case;
//! - decoding x86-64 and i386 code with iced-x86 and formatting it in AT&T (as objdump and
//!   perf print by default) or Intel syntax ([`annotate_instructions`]);
//! - counting samples per instruction, with each direct branch's target and whether it
//!   stays in the function ([`Insn::target`], [`Insn::local_target`]), the data a renderer
//!   needs to draw jump arrows.
//!
//! # Design constraints
//!
//! - **Pure consumer of bytes.** Input is a path and an address range, or a [`Code`] built
//!   by hand; nothing here reads sessions, talks to perf, or knows symbol names. The caller
//!   (`crates/report`) finds the function's range through `profkit-symbols` and renders.
//! - **Read what is needed, not whole files.** A function costs its headers (a few hundred
//!   bytes) and its own bytes, at most [`MAX_CODE_BYTES`]; nothing is memory-mapped, so no
//!   `unsafe`.
//! - **Untrusted files.** A binary may belong to another user: it is opened non-blocking and
//!   must be a regular file; header values are checked for overflow, and a range outside the
//!   file's executable segments or past its end is a typed [`Error`], not a short read.
//! - **Never panic on bytes.** Whatever the bytes, disassembly succeeds: an undecodable byte
//!   is a one-byte `(bad)` instruction, as in objdump, and decoding resumes after it
//!   (property-tested on random bytes).
//! - **Agree with objdump.** A listing reads like `objdump -d`, which is what `perf
//!   annotate` shows: same instruction boundaries (`fwait` + `fnstcw` is one `fstcw`), same
//!   mnemonics, prefixes and operands. iced-x86's formatter does most of it; `spelling.rs`
//!   mends the rest, rule by rule. The integration tests compare whole functions of C
//!   programs (PIE, non-PIE with CET, i386) instruction by instruction; a one-off run over
//!   19.5 million instructions of this system's libraries found differences only in
//!   VIA PadLock names, port operands and data decoded as code.
//! - **Data for a renderer, not a rendering.** Each [`Insn`] carries its samples, its
//!   [`Flow`] and its direct target; arrows, labels, percentages and symbol names are the
//!   report's.
//!
//! # Example
//!
//! ```
//! use profkit_annotate::{annotate_instructions, Bitness, Code, Syntax};
//!
//! // push %rbp ; mov %rsp,%rbp ; pop %rbp ; ret
//! let code = Code { bytes: vec![0x55, 0x48, 0x89, 0xe5, 0x5d, 0xc3], vaddr: 0x1120, bitness: Bitness::Bits64 };
//! let listing = annotate_instructions(&code, &[(0x1121, 3), (0x1125, 1)], Syntax::Att);
//! let lines: Vec<String> = listing
//!     .insns
//!     .iter()
//!     .map(|i| format!("{:>4} {:x}: {}", i.samples, i.addr, i.text))
//!     .collect();
//! assert_eq!(lines, ["   0 1120: push   %rbp", "   3 1121: mov    %rsp,%rbp",
//!                    "   0 1124: pop    %rbp", "   1 1125: ret"]);
//! ```
//!
//! # Not for
//!
//! Reading DWARF and symbol names: `profkit-symbols` has them (this crate only lays out the
//! lines it is given, [`source_listing`]). Architectures other
//! than x86 (an aarch64 binary is [`Error::UnsupportedMachine`]); relocatable objects and
//! kernel modules (`.ko`, no program headers); recovering code that linear decoding
//! misreads (data inside `.text`, as with hand-written assembly) — the listing shows what
//! objdump would.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod disasm;
mod elf;
mod error;
mod source;
mod spelling;

pub use disasm::{annotate_instructions, Bitness, Code, Flow, Insn, Listing};
pub use elf::{file_offset_to_vaddr, read_code, Segment, Segments, MAX_CODE_BYTES};
pub use error::{Error, Result};
pub use source::{
    find_source, source_listing, source_listing_fetching, LineInfo, SourceFile, SourceLine,
    SourceListing, SourceReader, FILLED_GAP, MAX_SOURCE_BYTES,
};
pub use spelling::Syntax;
