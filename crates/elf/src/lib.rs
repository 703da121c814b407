//! The facts about an ELF file that more than one part of profkit needs,
//! each read once and by range: the PT_LOAD segments and the mapping
//! between file offsets and link-time addresses ([`Segments`]), the GNU
//! build-id note ([`build_id`]), the section headers and one section's
//! bytes, decompressed ([`Sections`]), and this process's vDSO image
//! ([`read_own_vdso`]).
//!
//! The sync stage (unwinding: a mapping's load bias; cookies: build-ids),
//! the symbolizer (file offsets to the addresses symbols and DWARF use;
//! where the symbol tables and DWARF sections are) and annotation (an address range back to the file bytes to
//! disassemble) all meet ELF at these points; before this crate each had
//! its own copy, and the copies had begun to differ (one took the last
//! build-id note of a section, another the first).
//!
//! ```text
//!   file:   0x0000 [ .text  p_offset=0x1000 p_filesz=0x800 ] 0x1800
//!   vaddr:         [ 0x401000 (non-PIE)  or  0x1000 (PIE)  ]
//!   file offset 0x1234 ↔ vaddr = p_vaddr + (0x1234 - 0x1000)
//! ```
//!
//! # Design constraints
//!
//! - **By range.** Everything takes an `object::ReadRef`: a byte slice
//!   when the caller holds the file, or an `object::ReadCache` over an
//!   open file, through which only the ranges parsed are read (the ELF
//!   header, program headers, section headers, notes), never the symbol
//!   tables (`object::File::parse` would read both whole). Nothing here
//!   reads a whole file.
//! - **ELF32 and ELF64, either byte order.** The callers decide what they
//!   support beyond that (annotation: x86; unwinding: x86-64).
//! - **Hostile headers.** Files may belong to any user: sums of header
//!   values wrap or saturate instead of overflowing, and a malformed file
//!   is a typed [`Error`], never a panic.
//! - **No paths, no opening.** Callers open files (through
//!   `profkit-untrusted` or the sync stage's `map_files` opener) and add
//!   the path to their own errors.
//!
//! # Not for
//!
//! Symbols and DWARF (`profkit-symbols`), unwind sections
//! (`profkit-sync` reads them through [`Sections`] and checks them),
//! disassembly (`profkit-annotate`), and deciding what a
//! build-id means for a cookie (`profkit-eventlog`).

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod error;
mod notes;
mod sections;
mod segments;
mod vdso;

pub use error::Error;
pub use notes::{build_id, MAX_NOTE_AREAS, MAX_NOTE_BYTES};
pub use sections::{Section, Sections, MAX_NAME, MAX_SECTIONS};
pub use segments::{Segment, Segments};
pub use vdso::{read_own_vdso, MAX_VDSO_BYTES};
