//! Checking a binary's DWARF CFI before framehop may evaluate it.
//!
//! framehop 0.13.3 evaluates the DWARF expressions of call frame
//! information (`DW_CFA_def_cfa_expression`, `DW_CFA_expression`,
//! `DW_CFA_val_expression`) with `gimli::Evaluation::evaluate()` and no
//! iteration limit. A DWARF expression may branch (`DW_OP_skip`,
//! `DW_OP_bra`), so a binary whose `.eh_frame` or `.debug_frame` holds an
//! expression that jumps back to itself makes that evaluation loop forever,
//! and with it the profiling daemon. Every binary a system-wide session
//! samples is untrusted input; real compilers' CFI never branches (glibc's
//! `__restore_rt` expressions are `DW_OP_breg7 N` and `DW_OP_deref`, the
//! PLT's and libmvec's constants, arithmetic and even a comparison, never
//! a branch; none of 7878 expressions in 1876 binaries surveyed does).
//!
//! This module owns the refusal: [`check_cfi`] walks one CFI section the
//! way framehop will read it and refuses it if any expression framehop
//! could evaluate branches, is longer than [`MAX_EXPRESSION_BYTES`], or
//! does not decode. A refused section must not be handed to framehop (the
//! binary is then not unwound); an accepted one cannot make framehop's
//! evaluation loop: without a branch, evaluation runs each operation of
//! an expression at most once, in order, so it ends within the expression's
//! length.
//!
//! # What is checked: everything framehop can reach
//!
//! - Every CIE and FDE of the walk gimli's `entries()` does, which is how
//!   framehop indexes `.debug_frame` and an `.eh_frame` without
//!   `.eh_frame_hdr`. An error of that walk (an entry that does not parse,
//!   an FDE whose CIE does not parse) refuses the whole section: past it,
//!   we do not know where the entries are (framehop's own index gives up
//!   there too).
//! - For each FDE, the CIE its CIE pointer names, wherever it is (a hostile
//!   FDE may name a CIE the walk never visits, e.g. one hidden inside
//!   another entry's bytes); each CIE is checked once.
//! - With an `.eh_frame_hdr`, framehop does not walk `.eh_frame` at all: it
//!   takes the FDE offset from the header's search table, which may point
//!   anywhere, also behind the zero terminator or inside another entry. So
//!   every table entry's FDE (and its CIE) is checked too; an entry that
//!   does not lead to a parsable FDE refuses the section. The header must be
//!   the very bytes framehop gets ([`CfiSection::EhFrame`]), and the
//!   [`BaseAddresses`] the ones framehop computes ([`framehop_bases`]):
//!   pointers decode differently otherwise.
//! - An instruction stream that stops at an undecodable instruction is
//!   checked up to there and accepted ([`CfiStats::truncated_streams`]):
//!   gimli's unwind table stops at the same instruction with an error, so
//!   nothing after it is ever evaluated. (This keeps e.g. AArch64
//!   pointer-authentication CFI, which framehop parses with gimli's default
//!   vendor and so cannot use, from refusing the other FDEs.)
//!
//! Expressions are decoded with the encoding of their CIE and the address
//! size framehop uses (8, little-endian), so the operations seen here are
//! the ones evaluation would run.
//!
//! # Bounds
//!
//! Sections (and headers) larger than [`MAX_SECTION_BYTES`] are refused
//! unread, and the check stops with a refusal after [`MAX_WORK`] steps
//! (entries parsed, header entries, instructions and operations decoded,
//! 64 bytes of a CIE parsed): the walk alone is linear in the section, but
//! header entries and CIE pointers may point at overlapping entries. Each
//! CIE is parsed once (gimli would parse an FDE's CIE anew for each FDE,
//! and a CIE may be long: its augmentation string can be "zSSSS…").
//!
//! A CIE or FDE longer than [`MAX_ENTRY_BYTES`] is refused too, and so is
//! an FDE whose instructions with its CIE's initial instructions number
//! more than [`MAX_ENTRY_INSTRUCTIONS`] (65,536; the most in a survey of
//! 1870 real binaries was 13,365). This is not about hanging but about
//! framehop's cost per frame: on every rule-cache miss it parses the FDE
//! and its CIE and runs their instructions from the start up to the row of
//! the address (its cache holds 509 rules, so a recursion through a few
//! thousand call sites misses on every frame). Bytes alone do not bound
//! that: 250,000 one-byte `DW_CFA_nop`s fit in [`MAX_ENTRY_BYTES`] and cost
//! 1.2-1.5 ms per lookup in a release build (issue 25.1). The instruction bound
//! caps one lookup, at about 0.3-0.4 ms for nops and 4-9 ms for the costliest
//! instructions measured (65,000 rule changes in a row of 190 registers;
//! 30,000 `DW_CFA_remember_state`/`restore_state` pairs, each copying a
//! row): gimli keeps at most 192 register rules and 4 remembered rows, so
//! every instruction costs a bounded amount. What many lookups cost is
//! bounded by the unwinder's round budget and per-binary demotion
//! (`crate::unwind`): a binary of such FDEs is demoted after a few frames.
//! Counting instructions here, rather than patching framehop, keeps
//! framehop unmodified: the bound it lacks (work per lookup) follows from
//! the length of what it evaluates.

use gimli::{
    BaseAddresses, CallFrameInstruction, CommonInformationEntry, DebugFrame, EhFrame, EhFrameHdr,
    EhFrameOffset, Encoding, EndianSlice, FrameDescriptionEntry, LittleEndian, Operation,
    PartialFrameDescriptionEntry, Pointer, UnwindExpression, UnwindOffset, UnwindSection,
};
use rustc_hash::{FxHashMap, FxHashSet};
use std::fmt;

/// Sections (and `.eh_frame_hdr`s) larger than this are refused unread.
pub const MAX_SECTION_BYTES: usize = 256 << 20;
/// The longest CIE or FDE accepted, in bytes (its length field's value).
/// framehop parses an FDE and its CIE, and runs their instructions, for
/// every frame it unwinds; the longest on a survey of 1876 binaries
/// (Debian 12, x86-64) was 20 KiB.
pub const MAX_ENTRY_BYTES: usize = 256 << 10;
/// The most CFI instructions accepted in one FDE with its CIE's initial
/// instructions. framehop asks gimli for the row of an address on every
/// rule-cache miss, and gimli runs the CIE's and then the FDE's
/// instructions from their start up to that row: this bounds the cost of
/// one lookup. The most in a survey of this machine's 1870 binaries
/// (Debian 12, x86-64: gcc-12's lto-dump; 5287 next, 2236 after) was
/// 13,365; this is about 5 times that.
pub const MAX_ENTRY_INSTRUCTIONS: u64 = 1 << 16;
/// The longest CFI expression accepted, in bytes. The longest met in the
/// survey was 14 bytes (libmvec's stack realignment; the PLT's are 11).
pub const MAX_EXPRESSION_BYTES: usize = 256;
/// Steps (entries parsed, header entries, instructions and expression
/// operations decoded) after which a check gives up and refuses. The most
/// a real binary took in the survey was 3.3 M (Rust's 200 MB libLLVM,
/// 30 ms in a release build), so this is about 0.6 s at worst.
pub const MAX_WORK: u64 = 64_000_000;

/// The address size framehop parses CFI with.
const ADDRESS_SIZE: u8 = 8;

type Reader<'d> = EndianSlice<'d, LittleEndian>;

/// Which CFI section is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CfiSection<'a> {
    /// `.eh_frame`, with `hdr` the `.eh_frame_hdr` bytes when framehop gets
    /// them too (framehop then finds FDEs through the header's table, so
    /// every FDE it names is checked).
    EhFrame {
        /// The `.eh_frame_hdr` section handed to framehop, if any.
        hdr: Option<&'a [u8]>,
    },
    /// `.debug_frame`, uncompressed (framehop reads it only when there is
    /// no `.eh_frame`).
    DebugFrame,
}

impl CfiSection<'_> {
    /// The section's name, as refusals show it.
    pub fn name(&self) -> &'static str {
        match self {
            CfiSection::EhFrame { .. } => ".eh_frame",
            CfiSection::DebugFrame => ".debug_frame",
        }
    }
}

/// The base addresses framehop 0.13.3 decodes pointers with: the SVMAs of
/// `.eh_frame`, `.eh_frame_hdr`, `.text` and `.got`, 0 for a section the
/// binary lacks. Pass these to [`check_cfi`].
pub fn framehop_bases(eh_frame: u64, eh_frame_hdr: u64, text: u64, got: u64) -> BaseAddresses {
    BaseAddresses::default()
        .set_eh_frame(eh_frame)
        .set_eh_frame_hdr(eh_frame_hdr)
        .set_text(text)
        .set_got(got)
}

/// What an accepted section held (for tests and a debug line).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CfiStats {
    /// Distinct CIEs checked.
    pub cies: u64,
    /// FDEs of the walk.
    pub fdes: u64,
    /// Entries of `.eh_frame_hdr`'s search table.
    pub hdr_entries: u64,
    /// FDEs reached through `.eh_frame_hdr` but not by the walk (0 for
    /// what linkers write).
    pub hdr_only_fdes: u64,
    /// CFI instructions decoded (a CIE's once).
    pub instructions: u64,
    /// DWARF expressions decoded.
    pub expressions: u64,
    /// The longest expression, in bytes.
    pub max_expression_bytes: u64,
    /// The longest CIE or FDE, in bytes.
    pub max_entry_bytes: u64,
    /// The most instructions one lookup runs: an FDE's and its CIE's.
    pub max_entry_instructions: u64,
    /// CIE/FDE instruction streams ending at an undecodable instruction.
    pub truncated_streams: u64,
}

/// A CIE or FDE, by its offset in the section.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Entry {
    /// An FDE.
    Fde(u64),
    /// A CIE met in the walk.
    Cie(u64),
    /// A CIE, checked as the one an FDE names.
    CieOf {
        /// The CIE.
        cie: u64,
        /// The FDE naming it.
        fde: u64,
    },
}

impl fmt::Display for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Entry::Fde(o) => write!(f, "FDE {o:#x}"),
            Entry::Cie(o) => write!(f, "CIE {o:#x}"),
            Entry::CieOf { cie, fde } => write!(f, "CIE {cie:#x} (of FDE {fde:#x})"),
        }
    }
}

/// Why a section was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Reason {
    /// Larger than [`MAX_SECTION_BYTES`].
    #[error("is {len} bytes, more than {max}", max = MAX_SECTION_BYTES)]
    TooLarge {
        /// Its size.
        len: usize,
    },
    /// Its `.eh_frame_hdr` is larger than [`MAX_SECTION_BYTES`].
    #[error("has a {len}-byte .eh_frame_hdr, more than {max}", max = MAX_SECTION_BYTES)]
    HdrTooLarge {
        /// The header's size.
        len: usize,
    },
    /// An expression branches (`DW_OP_skip`, `DW_OP_bra`).
    #[error("CFI expression uses {op} at {at}")]
    Branch {
        /// The operation's name.
        op: &'static str,
        /// Where the expression is.
        at: Entry,
    },
    /// An expression longer than [`MAX_EXPRESSION_BYTES`].
    #[error("CFI expression of {len} bytes (more than {max}) at {at}", max = MAX_EXPRESSION_BYTES)]
    LongExpression {
        /// Its length.
        len: usize,
        /// Where it is.
        at: Entry,
    },
    /// A CIE or FDE longer than [`MAX_ENTRY_BYTES`].
    #[error("{at} is {len} bytes long (more than {max})", max = MAX_ENTRY_BYTES)]
    LongEntry {
        /// Its length.
        len: usize,
        /// Which.
        at: Entry,
    },
    /// An FDE whose instructions and its CIE's are more than
    /// [`MAX_ENTRY_INSTRUCTIONS`] (each lookup may run them all).
    #[error("{at} has {count} CFI instructions with its CIE's (more than {max})", max = MAX_ENTRY_INSTRUCTIONS)]
    CostlyEntry {
        /// Its instructions and its CIE's.
        count: u64,
        /// Which.
        at: Entry,
    },
    /// An expression's operations do not decode.
    #[error("CFI expression does not decode at {at}: {error}")]
    BadExpression {
        /// Where it is.
        at: Entry,
        /// gimli's error.
        error: gimli::Error,
    },
    /// The walk met an entry that does not parse (or an FDE whose CIE does
    /// not).
    #[error("entry {} does not parse: {error}", after_text(*after))]
    BadEntry {
        /// The offset of the last good entry before it.
        after: Option<u64>,
        /// gimli's error.
        error: gimli::Error,
    },
    /// The `.eh_frame_hdr` header does not parse.
    #[error("has an .eh_frame_hdr that does not parse: {error}")]
    BadHdr {
        /// gimli's error.
        error: gimli::Error,
    },
    /// A search table entry does not lead to an FDE.
    #[error("has an .eh_frame_hdr whose entry {index} names no FDE: {what}")]
    BadHdrEntry {
        /// The table entry.
        index: u64,
        /// What is wrong with it.
        what: String,
    },
    /// Checking would take more than [`MAX_WORK`] steps.
    #[error("takes more than {max} steps to check", max = MAX_WORK)]
    TooMuchWork,
}

fn after_text(after: Option<u64>) -> String {
    match after {
        Some(o) => format!("after {o:#x}"),
        None => "at 0x0".to_string(),
    }
}

/// A section [`check_cfi`] refused: not to be handed to framehop. Shows as
/// a warning line, e.g. "`.eh_frame` CFI expression uses DW_OP_skip at FDE
/// 0x1234: not unwound".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{section}` {reason}: not unwound")]
pub struct CfiRefusal {
    /// ".eh_frame" or ".debug_frame".
    pub section: &'static str,
    /// Why.
    pub reason: Reason,
}

/// Checks one CFI section of a binary (`data`, its bytes as framehop will
/// get them) before framehop may use it; see the module documentation for
/// what is checked. `bases` are the ones framehop decodes pointers with
/// ([`framehop_bases`]). Call it once per section handed to framehop
/// (`.eh_frame` with its `.eh_frame_hdr`, or `.debug_frame`); a refusal
/// means the section must not be handed over. Never panics; linear in the
/// section's size and bounded by [`MAX_WORK`].
pub fn check_cfi(
    section: CfiSection<'_>,
    data: &[u8],
    bases: &BaseAddresses,
) -> Result<CfiStats, CfiRefusal> {
    check_within(section, data, bases, MAX_WORK)
}

/// [`check_cfi`] giving up after `max_work` steps.
fn check_within(
    section: CfiSection<'_>,
    data: &[u8],
    bases: &BaseAddresses,
    max_work: u64,
) -> Result<CfiStats, CfiRefusal> {
    let name = section.name();
    let refuse = |reason| CfiRefusal {
        section: name,
        reason,
    };
    if data.len() > MAX_SECTION_BYTES {
        return Err(refuse(Reason::TooLarge { len: data.len() }));
    }
    let reader = EndianSlice::new(data, LittleEndian);
    match section {
        CfiSection::EhFrame { hdr } => {
            if let Some(hdr) = hdr {
                if hdr.len() > MAX_SECTION_BYTES {
                    return Err(refuse(Reason::HdrTooLarge { len: hdr.len() }));
                }
            }
            let mut eh_frame = EhFrame::from(reader);
            eh_frame.set_address_size(ADDRESS_SIZE);
            let mut checker = Checker::new(eh_frame, bases, max_work);
            let walked = checker.walk().map_err(refuse)?;
            if let Some(hdr) = hdr {
                checker.check_hdr(hdr, &walked).map_err(refuse)?;
            }
            Ok(checker.stats)
        }
        CfiSection::DebugFrame => {
            let mut debug_frame = DebugFrame::from(reader);
            debug_frame.set_address_size(ADDRESS_SIZE);
            let mut checker = Checker::new(debug_frame, bases, max_work);
            checker.walk().map_err(refuse)?;
            Ok(checker.stats)
        }
    }
}

/// One section's check in progress.
struct Checker<'b, 'd, S> {
    section: S,
    bases: &'b BaseAddresses,
    stats: CfiStats,
    /// The CIEs checked so far, by offset. FDEs take their CIE from here:
    /// gimli would parse it again for each FDE.
    cies: FxHashMap<u64, CommonInformationEntry<Reader<'d>>>,
    /// The initial instructions of each CIE checked, by offset.
    cie_instructions: FxHashMap<u64, u64>,
    /// Steps taken, and allowed.
    work: u64,
    max_work: u64,
}

impl<'b, 'd, S: UnwindSection<Reader<'d>>> Checker<'b, 'd, S> {
    fn new(section: S, bases: &'b BaseAddresses, max_work: u64) -> Self {
        Checker {
            section,
            bases,
            stats: CfiStats::default(),
            cies: FxHashMap::default(),
            cie_instructions: FxHashMap::default(),
            work: 0,
            max_work,
        }
    }

    fn charge(&mut self, steps: u64) -> Result<(), Reason> {
        self.work += steps;
        if self.work > self.max_work {
            return Err(Reason::TooMuchWork);
        }
        Ok(())
    }

    fn step(&mut self) -> Result<(), Reason> {
        self.charge(1)
    }

    fn check_len(&mut self, len: usize, at: Entry) -> Result<(), Reason> {
        if len > MAX_ENTRY_BYTES {
            return Err(Reason::LongEntry { len, at });
        }
        self.stats.max_entry_bytes = self.stats.max_entry_bytes.max(len as u64);
        Ok(())
    }

    /// Walks the entries, checking each CIE and FDE (and each FDE's CIE);
    /// returns the FDE offsets, ascending.
    fn walk(&mut self) -> Result<Vec<u64>, Reason> {
        let section = self.section.clone();
        let bases = self.bases;
        let mut entries = section.entries(bases);
        let mut fdes = Vec::new();
        let mut last = None;
        loop {
            self.step()?;
            let entry = match entries.next() {
                Ok(Some(entry)) => entry,
                Ok(None) => break,
                Err(error) => return Err(Reason::BadEntry { after: last, error }),
            };
            match entry {
                gimli::CieOrFde::Cie(cie) => {
                    let offset = cie.offset() as u64;
                    last = Some(offset);
                    if !self.cies.contains_key(&offset) {
                        self.check_cie(&cie, Entry::Cie(offset))?;
                        self.cies.insert(offset, cie);
                    }
                }
                gimli::CieOrFde::Fde(partial) => {
                    let offset = partial.offset() as u64;
                    let fde = self
                        .parse_fde(&partial)?
                        .map_err(|error| Reason::BadEntry { after: last, error })?;
                    last = Some(offset);
                    self.check_fde(&fde)?;
                    self.stats.fdes += 1;
                    fdes.push(offset);
                }
            }
        }
        Ok(fdes)
    }

    /// Parses an FDE no longer than [`MAX_ENTRY_BYTES`], its CIE from the
    /// cache when checked already.
    fn parse_fde(
        &mut self,
        partial: &PartialFrameDescriptionEntry<'_, S, Reader<'d>>,
    ) -> Result<gimli::Result<FrameDescriptionEntry<Reader<'d>>>, Reason> {
        self.check_len(partial.entry_len(), Entry::Fde(partial.offset() as u64))?;
        let cies = &self.cies;
        Ok(partial.parse(|section: &S, bases, offset| {
            match cies.get(&(UnwindOffset::into(offset) as u64)) {
                Some(cie) => Ok(cie.clone()),
                None => section.cie_from_offset(bases, offset),
            }
        }))
    }

    /// Checks an FDE's instructions and, unless already checked, its CIE's.
    fn check_fde(&mut self, fde: &FrameDescriptionEntry<Reader<'d>>) -> Result<(), Reason> {
        let offset = fde.offset() as u64;
        let cie = fde.cie();
        let cie_offset = cie.offset() as u64;
        if !self.cies.contains_key(&cie_offset) {
            let at = Entry::CieOf {
                cie: cie_offset,
                fde: offset,
            };
            self.check_cie(cie, at)?;
            self.cies.insert(cie_offset, cie.clone());
        }
        let section = self.section.clone();
        let instructions = fde.instructions(&section, self.bases);
        let at = Entry::Fde(offset);
        let count = self.check_instructions(instructions, cie.encoding(), at)?
            + self.cie_instructions.get(&cie_offset).copied().unwrap_or(0);
        if count > MAX_ENTRY_INSTRUCTIONS {
            return Err(Reason::CostlyEntry { count, at });
        }
        self.stats.max_entry_instructions = self.stats.max_entry_instructions.max(count);
        Ok(())
    }

    /// Checks a CIE just parsed (its parse, linear in its length, is
    /// charged here).
    fn check_cie(
        &mut self,
        cie: &CommonInformationEntry<Reader<'d>>,
        at: Entry,
    ) -> Result<(), Reason> {
        self.check_len(cie.entry_len(), at)?;
        self.charge(cie.entry_len() as u64 / 64)?;
        self.stats.cies += 1;
        let section = self.section.clone();
        let instructions = cie.instructions(&section, self.bases);
        let count = self.check_instructions(instructions, cie.encoding(), at)?;
        self.cie_instructions.insert(cie.offset() as u64, count);
        Ok(())
    }

    /// Checks an instruction stream; returns how many instructions
    /// evaluation may run (up to an undecodable one).
    fn check_instructions(
        &mut self,
        mut instructions: gimli::CallFrameInstructionIter<'_, Reader<'d>>,
        encoding: Encoding,
        at: Entry,
    ) -> Result<u64, Reason> {
        let mut count = 0;
        loop {
            self.step()?;
            let instruction = match instructions.next() {
                Ok(Some(instruction)) => instruction,
                Ok(None) => return Ok(count),
                Err(_) => {
                    // gimli's unwind table stops here with an error too:
                    // nothing after this instruction is ever evaluated.
                    self.stats.truncated_streams += 1;
                    return Ok(count);
                }
            };
            count += 1;
            self.stats.instructions += 1;
            match instruction {
                CallFrameInstruction::DefCfaExpression { expression }
                | CallFrameInstruction::Expression { expression, .. }
                | CallFrameInstruction::ValExpression { expression, .. } => {
                    self.check_expression(expression, encoding, at)?;
                }
                _ => {}
            }
        }
    }

    fn check_expression(
        &mut self,
        expression: UnwindExpression<usize>,
        encoding: Encoding,
        at: Entry,
    ) -> Result<(), Reason> {
        self.stats.expressions += 1;
        let len = expression.length;
        if len > MAX_EXPRESSION_BYTES {
            return Err(Reason::LongExpression { len, at });
        }
        self.stats.max_expression_bytes = self.stats.max_expression_bytes.max(len as u64);
        let expression = expression
            .get(&self.section)
            .map_err(|error| Reason::BadExpression { at, error })?;
        let mut operations = expression.operations(encoding);
        loop {
            self.step()?;
            match operations.next() {
                Ok(None) => return Ok(()),
                Ok(Some(Operation::Skip { .. })) => {
                    return Err(Reason::Branch {
                        op: "DW_OP_skip",
                        at,
                    })
                }
                Ok(Some(Operation::Bra { .. })) => {
                    return Err(Reason::Branch {
                        op: "DW_OP_bra",
                        at,
                    })
                }
                Ok(Some(_)) => {}
                Err(error) => return Err(Reason::BadExpression { at, error }),
            }
        }
    }
}

impl<'d> Checker<'_, 'd, EhFrame<Reader<'d>>> {
    /// Checks every FDE `.eh_frame_hdr`'s search table names that the walk
    /// did not (`walked`: its FDE offsets, ascending), as framehop's lookup
    /// would parse it.
    fn check_hdr(&mut self, hdr: &'d [u8], walked: &[u64]) -> Result<(), Reason> {
        let hdr = EhFrameHdr::new(hdr, LittleEndian)
            .parse(self.bases, ADDRESS_SIZE)
            .map_err(|error| Reason::BadHdr { error })?;
        let eh_frame_ptr = match hdr.eh_frame_ptr() {
            Pointer::Direct(p) => p,
            Pointer::Indirect(_) => {
                return Err(Reason::BadHdr {
                    error: gimli::Error::UnsupportedPointerEncoding,
                })
            }
        };
        let Some(table) = hdr.table() else {
            // No table: framehop finds no FDE through this header.
            return Ok(());
        };
        let mut hdr_only = FxHashSet::default();
        let mut entries = table.iter(self.bases);
        let mut next_index = 0;
        loop {
            self.step()?;
            let index = next_index;
            next_index += 1;
            let bad = |what: String| Reason::BadHdrEntry { index, what };
            let fde_ptr = match entries.next() {
                Ok(Some((_, fde_ptr))) => fde_ptr,
                Ok(None) => return Ok(()),
                Err(error) => return Err(bad(error.to_string())),
            };
            self.stats.hdr_entries += 1;
            let Pointer::Direct(fde_ptr) = fde_ptr else {
                return Err(bad("an indirect pointer".into()));
            };
            // gimli's `pointer_to_offset` subtracts unchecked (a panic in a
            // debug build, a wrapped offset in release).
            let Some(offset) = fde_ptr.checked_sub(eh_frame_ptr) else {
                return Err(bad(format!("{fde_ptr:#x} is before .eh_frame")));
            };
            if walked.binary_search(&offset).is_ok() || hdr_only.contains(&offset) {
                continue;
            }
            let Ok(offset_usize) = usize::try_from(offset) else {
                return Err(bad(format!("offset {offset:#x} is out of range")));
            };
            let fde = self
                .section
                .partial_fde_from_offset(self.bases, EhFrameOffset(offset_usize))
                .map_err(|error| bad(format!("FDE {offset:#x}: {error}")))?;
            let fde = self
                .parse_fde(&fde)?
                .map_err(|error| bad(format!("FDE {offset:#x}: {error}")))?;
            self.check_fde(&fde)?;
            hdr_only.insert(offset);
            self.stats.hdr_only_fdes += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use object::{Object, ObjectSection};
    use proptest::prelude::*;
    use std::path::Path;
    use std::time::{Duration, Instant};

    // ---- Real binaries ----

    /// The CFI sections of one ELF file, as the caller will hold them.
    struct Elf {
        eh_frame: Option<Vec<u8>>,
        hdr: Option<Vec<u8>>,
        debug_frame: Option<Vec<u8>>,
        bases: BaseAddresses,
    }

    fn read_elf(path: &Path) -> Option<Elf> {
        let bytes = std::fs::read(path).ok()?;
        let file = object::File::parse(&*bytes).ok()?;
        let addr = |name| file.section_by_name(name).map_or(0, |s| s.address());
        let data = |name| {
            let section = file.section_by_name(name)?;
            let data = section.uncompressed_data().ok()?;
            (!data.is_empty()).then(|| data.into_owned())
        };
        Some(Elf {
            eh_frame: data(".eh_frame"),
            hdr: data(".eh_frame_hdr"),
            debug_frame: data(".debug_frame"),
            bases: framehop_bases(
                addr(".eh_frame"),
                addr(".eh_frame_hdr"),
                addr(".text"),
                addr(".got"),
            ),
        })
    }

    type Checked = (&'static str, Result<CfiStats, CfiRefusal>, Duration);

    /// Checks each CFI section of `path` (`.eh_frame` with and without its
    /// header, `.debug_frame`), timed.
    fn check_elf(path: &Path) -> Option<Vec<Checked>> {
        let elf = read_elf(path)?;
        let timed = |section, data: &[u8]| {
            let start = Instant::now();
            let result = check_cfi(section, data, &elf.bases);
            (result, start.elapsed())
        };
        let mut out = Vec::new();
        if let Some(eh_frame) = &elf.eh_frame {
            let (r, t) = timed(CfiSection::EhFrame { hdr: None }, eh_frame);
            out.push((".eh_frame", r, t));
            if let Some(hdr) = &elf.hdr {
                let (r, t) = timed(CfiSection::EhFrame { hdr: Some(hdr) }, eh_frame);
                out.push((".eh_frame+hdr", r, t));
            }
        }
        if let Some(debug_frame) = &elf.debug_frame {
            let (r, t) = timed(CfiSection::DebugFrame, debug_frame);
            out.push((".debug_frame", r, t));
        }
        Some(out)
    }

    /// Checks `path`, asserts every section is accepted, prints the stats;
    /// returns the stats of `.eh_frame` with its header (or the first).
    fn assert_accepted(path: &Path) -> CfiStats {
        let checked = check_elf(path).unwrap_or_else(|| panic!("{}: not an ELF", path.display()));
        assert!(!checked.is_empty(), "{}: no CFI", path.display());
        for (what, result, time) in &checked {
            match result {
                Ok(stats) => println!("{} {what}: {stats:?} in {time:?}", path.display()),
                Err(refusal) => panic!("{} {what}: {refusal}", path.display()),
            }
        }
        let main = checked
            .iter()
            .find(|(what, ..)| *what == ".eh_frame+hdr")
            .unwrap_or(&checked[0]);
        *main.1.as_ref().unwrap()
    }

    fn python() -> Option<std::path::PathBuf> {
        [
            "/usr/bin/python3",
            "/usr/local/bin/python3",
            "/usr/bin/python",
        ]
        .iter()
        .find_map(|p| std::fs::canonicalize(p).ok())
    }

    #[test]
    fn libc_is_accepted_and_has_expressions() {
        let stats = assert_accepted(Path::new("/lib/x86_64-linux-gnu/libc.so.6"));
        assert!(stats.fdes > 1000, "{stats:?}");
        // The `__restore_rt` signal frame (a CFA expression and one
        // expression per saved register) and the PLT's CFA expressions.
        assert!(stats.expressions > 0, "{stats:?}");
        assert_eq!(stats.hdr_only_fdes, 0);
        assert_eq!(stats.hdr_entries, stats.fdes);
    }

    #[test]
    fn system_binaries_are_accepted() {
        assert_accepted(Path::new("/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"));
        let stdcxx = Path::new("/usr/lib/x86_64-linux-gnu/libstdc++.so.6");
        if stdcxx.exists() {
            assert_accepted(stdcxx);
        }
        if let Some(python) = python() {
            assert_accepted(&python);
        }
        let me = std::env::current_exe().unwrap();
        let stats = assert_accepted(&me);
        assert!(stats.fdes > 1000, "{stats:?}");
    }

    /// Every ELF file in the usual directories (and a few big ones):
    /// accepted, with totals and the slowest scan printed. Run with
    /// `cargo test --release -p profkit-sync --lib cfi_check::tests::survey
    /// -- --ignored --nocapture`.
    #[test]
    #[ignore = "survey of the machine's binaries; slow in a debug build"]
    fn survey() {
        let mut paths = Vec::new();
        for dir in [
            "/usr/bin",
            "/usr/sbin",
            "/usr/lib/x86_64-linux-gnu",
            "/usr/libexec",
        ] {
            if let Ok(entries) = std::fs::read_dir(dir) {
                paths.extend(entries.flatten().map(|e| e.path()));
            }
        }
        if let Ok(extra) = std::env::var("CFI_SURVEY_EXTRA") {
            paths.extend(extra.split(':').map(std::path::PathBuf::from));
        }
        paths.sort();
        paths.dedup();
        let (mut files, mut total) = (0, CfiStats::default());
        let mut slowest = (Duration::ZERO, String::new());
        for path in &paths {
            if !path.is_file() {
                continue;
            }
            let Some(checked) = check_elf(path) else {
                continue;
            };
            files += 1;
            for (what, result, time) in checked {
                match result {
                    Err(refusal) => println!("REFUSED {} {what}: {refusal}", path.display()),
                    Ok(s) => {
                        // The unusual and the slow.
                        if s.truncated_streams > 0
                            || s.hdr_only_fdes > 0
                            || s.max_expression_bytes > 11
                            || s.max_entry_bytes > 1024
                            || s.max_entry_instructions > 1024
                            || what == ".debug_frame"
                            || time > Duration::from_millis(10)
                        {
                            println!("{} {what}: {s:?} in {time:?}", path.display());
                        }
                        if what != ".eh_frame" {
                            total.cies += s.cies;
                            total.fdes += s.fdes;
                            total.hdr_entries += s.hdr_entries;
                            total.instructions += s.instructions;
                            total.expressions += s.expressions;
                            total.truncated_streams += s.truncated_streams;
                            total.max_expression_bytes =
                                total.max_expression_bytes.max(s.max_expression_bytes);
                            total.max_entry_bytes = total.max_entry_bytes.max(s.max_entry_bytes);
                            total.max_entry_instructions =
                                total.max_entry_instructions.max(s.max_entry_instructions);
                        }
                    }
                }
                if time > slowest.0 {
                    slowest = (time, format!("{} {what}", path.display()));
                }
            }
        }
        println!("{files} ELF files, totals {total:?}; slowest {slowest:?}");
    }

    // ---- Hand-made sections ----

    const DW_CFA_DEF_CFA: u8 = 0x0c;
    const DW_CFA_OFFSET_R16: u8 = 0x80 | 16;
    const DW_CFA_DEF_CFA_EXPRESSION: u8 = 0x0f;
    const DW_CFA_EXPRESSION: u8 = 0x10;
    const DW_CFA_VAL_EXPRESSION: u8 = 0x16;
    const DW_OP_DEREF: u8 = 0x06;
    const DW_OP_PLUS_UCONST: u8 = 0x23;
    const DW_OP_LIT1: u8 = 0x31;
    const DW_OP_BREG7: u8 = 0x77;
    const DW_OP_NOP: u8 = 0x96;
    /// `DW_OP_skip -3`: a jump back to itself.
    const SKIP_TO_SELF: [u8; 3] = [0x2f, 0xfd, 0xff];
    /// `DW_OP_lit1; DW_OP_bra -4`: back to the `lit1`, forever.
    const BRA_LOOP: [u8; 4] = [DW_OP_LIT1, 0x28, 0xfc, 0xff];
    /// `rsp + 8`, dereferenced: what a signal frame's CFA looks like.
    const BENIGN: [u8; 3] = [DW_OP_BREG7, 8, DW_OP_DEREF];

    /// `DW_CFA_def_cfa_expression` (or another expression instruction
    /// `op`, for register 16) with `expr`.
    fn expr_insn(op: u8, expr: &[u8]) -> Vec<u8> {
        let mut v = vec![op];
        if op != DW_CFA_DEF_CFA_EXPRESSION {
            v.push(16);
        }
        assert!(expr.len() < 0x4000);
        if expr.len() < 0x80 {
            v.push(expr.len() as u8);
        } else {
            v.extend([(expr.len() & 0x7f) as u8 | 0x80, (expr.len() >> 7) as u8]);
        }
        v.extend(expr);
        v
    }

    /// Length-prefixed entry, padded with `DW_CFA_nop` to a multiple of 8.
    fn entry(mut body: Vec<u8>) -> Vec<u8> {
        while (body.len() + 4) % 8 != 0 {
            body.push(0);
        }
        let mut v = (body.len() as u32).to_le_bytes().to_vec();
        v.extend(body);
        v
    }

    /// An `.eh_frame` CIE ("zR", absolute 8-byte pointers, CFA = rsp + 8,
    /// return address at CFA - 8).
    fn eh_cie(instructions: &[u8]) -> Vec<u8> {
        let mut body = vec![0, 0, 0, 0, 1, b'z', b'R', 0, 1, 0x78, 16, 1, 0x00];
        body.extend([DW_CFA_DEF_CFA, 7, 8, DW_CFA_OFFSET_R16, 1]);
        body.extend(instructions);
        entry(body)
    }

    /// An `.eh_frame` FDE to be placed at `at`, its CIE at `cie`.
    fn eh_fde(at: usize, cie: usize, pc: u64, instructions: &[u8]) -> Vec<u8> {
        let mut body = ((at + 4 - cie) as u32).to_le_bytes().to_vec();
        body.extend(pc.to_le_bytes());
        body.extend(0x100u64.to_le_bytes());
        body.push(0);
        body.extend(instructions);
        entry(body)
    }

    /// A CIE and one FDE with `instructions`, and the terminator.
    fn eh_frame(instructions: &[u8]) -> Vec<u8> {
        let mut v = eh_cie(&[]);
        v.extend(eh_fde(v.len(), 0, 0x1000, instructions));
        v.extend([0; 4]);
        v
    }

    fn check_eh(data: &[u8]) -> Result<CfiStats, CfiRefusal> {
        check_cfi(
            CfiSection::EhFrame { hdr: None },
            data,
            &BaseAddresses::default(),
        )
    }

    fn reason(result: Result<CfiStats, CfiRefusal>) -> Reason {
        result.expect_err("accepted").reason
    }

    #[test]
    fn benign_expressions_are_accepted() {
        let mut insns = expr_insn(DW_CFA_DEF_CFA_EXPRESSION, &BENIGN);
        insns.extend(expr_insn(
            DW_CFA_EXPRESSION,
            &[DW_OP_BREG7, 0x10, DW_OP_PLUS_UCONST, 8],
        ));
        insns.extend(expr_insn(DW_CFA_VAL_EXPRESSION, &[DW_OP_NOP; 256]));
        let stats = check_eh(&eh_frame(&insns)).unwrap();
        assert_eq!(
            (
                stats.cies,
                stats.fdes,
                stats.expressions,
                stats.max_expression_bytes
            ),
            (1, 1, 3, 256)
        );
    }

    #[test]
    fn backward_skip_is_refused() {
        let data = eh_frame(&expr_insn(DW_CFA_DEF_CFA_EXPRESSION, &SKIP_TO_SELF));
        let refusal = check_eh(&data).unwrap_err();
        assert_eq!(
            refusal.reason,
            Reason::Branch {
                op: "DW_OP_skip",
                at: Entry::Fde(0x18)
            }
        );
        assert_eq!(
            refusal.to_string(),
            "`.eh_frame` CFI expression uses DW_OP_skip at FDE 0x18: not unwound"
        );
    }

    #[test]
    fn bra_is_refused_in_every_expression_instruction() {
        for op in [
            DW_CFA_DEF_CFA_EXPRESSION,
            DW_CFA_EXPRESSION,
            DW_CFA_VAL_EXPRESSION,
        ] {
            // After a benign expression, in the FDE...
            let mut insns = expr_insn(DW_CFA_EXPRESSION, &BENIGN);
            insns.extend(expr_insn(op, &BRA_LOOP));
            let err = check_eh(&eh_frame(&insns)).unwrap_err();
            assert!(err.to_string().contains("DW_OP_bra at FDE 0x18"), "{err}");
            // ... and in the CIE.
            let mut data = eh_cie(&expr_insn(op, &BRA_LOOP));
            data.extend([0; 4]);
            assert_eq!(
                reason(check_eh(&data)),
                Reason::Branch {
                    op: "DW_OP_bra",
                    at: Entry::Cie(0)
                }
            );
        }
        // A forward skip is refused as well: no real CFI branches.
        let forward = [0x2f, 1, 0, DW_OP_NOP, DW_OP_LIT1];
        let data = eh_frame(&expr_insn(DW_CFA_DEF_CFA_EXPRESSION, &forward));
        assert!(matches!(reason(check_eh(&data)), Reason::Branch { .. }));
    }

    #[test]
    fn long_and_undecodable_expressions_are_refused() {
        let data = eh_frame(&expr_insn(DW_CFA_EXPRESSION, &[DW_OP_NOP; 257]));
        assert_eq!(
            reason(check_eh(&data)),
            Reason::LongExpression {
                len: 257,
                at: Entry::Fde(0x18)
            }
        );
        // DW_OP_addr with 2 of its 8 address bytes; opcode 0xff unknown.
        for expr in [&[0x03, 1, 2][..], &[BENIGN[0], BENIGN[1], 0xff]] {
            let data = eh_frame(&expr_insn(DW_CFA_VAL_EXPRESSION, expr));
            let reason = reason(check_eh(&data));
            assert!(
                matches!(
                    reason,
                    Reason::BadExpression {
                        at: Entry::Fde(0x18),
                        ..
                    }
                ),
                "{reason}"
            );
        }
    }

    /// The hang is real: gimli's evaluation of these expressions never
    /// completes; here it is stopped by an iteration limit framehop does not
    /// set.
    #[test]
    fn branching_expressions_loop_in_gimli() {
        let encoding = Encoding {
            format: gimli::Format::Dwarf32,
            version: 1,
            address_size: 8,
        };
        for expr in [&SKIP_TO_SELF[..], &BRA_LOOP] {
            let mut eval = gimli::Evaluation::new(EndianSlice::new(expr, LittleEndian), encoding);
            eval.set_max_iterations(1000);
            assert_eq!(eval.evaluate(), Err(gimli::Error::TooManyIterations));
        }
        // A benign one completes (after asking for rsp and the memory at rsp + 8).
        let mut eval = gimli::Evaluation::new(EndianSlice::new(&BENIGN, LittleEndian), encoding);
        eval.set_max_iterations(1000);
        let mut result = eval.evaluate().unwrap();
        loop {
            result = match result {
                gimli::EvaluationResult::Complete => break,
                gimli::EvaluationResult::RequiresRegister { .. } => eval
                    .resume_with_register(gimli::Value::Generic(0x7000))
                    .unwrap(),
                gimli::EvaluationResult::RequiresMemory { address, .. } => {
                    assert_eq!(address, 0x7008);
                    eval.resume_with_memory(gimli::Value::Generic(0x8000))
                        .unwrap()
                }
                other => panic!("{other:?}"),
            };
        }
    }

    /// An FDE may name a CIE the walk never visits: here one hidden in the
    /// previous FDE's instructions, behind an undecodable instruction.
    #[test]
    fn a_hidden_cie_is_checked() {
        let mut data = eh_cie(&[]);
        let carrier = data.len();
        let hidden_cie = eh_cie(&expr_insn(DW_CFA_DEF_CFA_EXPRESSION, &SKIP_TO_SELF));
        // 0x3f (DW_CFA_hi_user) does not decode: the carrier's instruction
        // stream ends there.
        let mut carrier_insns = vec![0x3f, 0, 0, 0];
        carrier_insns.extend(&hidden_cie);
        data.extend(eh_fde(carrier, 0, 0x1000, &carrier_insns));
        let hidden_at = carrier + 4 + 4 + 8 + 8 + 1 + 4;
        assert_eq!(
            data[hidden_at..hidden_at + hidden_cie.len()],
            hidden_cie[..]
        );
        let fde = data.len();
        data.extend(eh_fde(fde, hidden_at, 0x2000, &[]));
        data.extend([0; 4]);
        assert_eq!(
            reason(check_eh(&data)),
            Reason::Branch {
                op: "DW_OP_skip",
                at: Entry::CieOf {
                    cie: hidden_at as u64,
                    fde: fde as u64
                }
            }
        );
        // Without the last FDE, the hidden CIE is unreachable and the
        // carrier's truncated stream is accepted.
        let mut data = data[..fde].to_vec();
        data.extend([0; 4]);
        let stats = check_eh(&data).unwrap();
        assert_eq!((stats.cies, stats.fdes, stats.truncated_streams), (1, 1, 1));
    }

    /// An `.eh_frame_hdr` (absolute udata4 pointers) whose table names
    /// `(pc, fde address)` pairs, `.eh_frame` being at `EH_FRAME`.
    fn hdr(entries: &[(u32, u32)]) -> Vec<u8> {
        let mut v = vec![1, 0x03, 0x03, 0x03];
        v.extend(EH_FRAME.to_le_bytes());
        v.extend((entries.len() as u32).to_le_bytes());
        for (pc, fde) in entries {
            v.extend(pc.to_le_bytes());
            v.extend(fde.to_le_bytes());
        }
        v
    }
    const EH_FRAME: u32 = 0x10000;

    /// With `.eh_frame_hdr`, framehop reaches FDEs the walk does not: here
    /// one behind the zero terminator.
    #[test]
    fn an_fde_behind_the_terminator_is_checked_through_the_header() {
        let mut data = eh_frame(&[]);
        let hidden = data.len();
        let bad = expr_insn(DW_CFA_DEF_CFA_EXPRESSION, &SKIP_TO_SELF);
        data.extend(eh_fde(hidden, 0, 0x2000, &bad));
        let bases = BaseAddresses::default();
        let walk_only = check_cfi(CfiSection::EhFrame { hdr: None }, &data, &bases).unwrap();
        assert_eq!(walk_only.fdes, 1);

        let good = hdr(&[(0x1000, EH_FRAME + 0x18)]);
        let stats = check_cfi(CfiSection::EhFrame { hdr: Some(&good) }, &data, &bases).unwrap();
        assert_eq!((stats.hdr_entries, stats.hdr_only_fdes), (1, 0));

        let table = hdr(&[
            (0x1000, EH_FRAME + 0x18),
            (0x2000, EH_FRAME + hidden as u32),
        ]);
        let err = check_cfi(CfiSection::EhFrame { hdr: Some(&table) }, &data, &bases);
        assert_eq!(
            reason(err),
            Reason::Branch {
                op: "DW_OP_skip",
                at: Entry::Fde(hidden as u64)
            }
        );

        // Entries naming no FDE: before the section, past it, mid-entry.
        for fde in [EH_FRAME - 8, EH_FRAME + 0x1000, EH_FRAME + 0x19] {
            let table = hdr(&[(0x1000, fde)]);
            let err = check_cfi(CfiSection::EhFrame { hdr: Some(&table) }, &data, &bases);
            assert!(
                matches!(reason(err), Reason::BadHdrEntry { index: 0, .. }),
                "{fde:#x}"
            );
        }
        // A table longer than its bytes.
        let mut table = hdr(&[(0x1000, EH_FRAME + 0x18)]);
        table[8] = 2;
        let err = check_cfi(CfiSection::EhFrame { hdr: Some(&table) }, &data, &bases);
        assert!(matches!(reason(err), Reason::BadHdrEntry { index: 1, .. }));
    }

    /// A `.debug_frame` CIE (version 1, no augmentation) and FDE.
    fn debug_frame(instructions: &[u8]) -> Vec<u8> {
        let mut v = entry(vec![
            0xff,
            0xff,
            0xff,
            0xff,
            1,
            0,
            1,
            0x78,
            16,
            DW_CFA_DEF_CFA,
            7,
            8,
        ]);
        let mut body = 0u32.to_le_bytes().to_vec();
        body.extend(0x1000u64.to_le_bytes());
        body.extend(0x100u64.to_le_bytes());
        body.extend(instructions);
        v.extend(entry(body));
        v
    }

    #[test]
    fn debug_frame_is_checked() {
        let bases = BaseAddresses::default();
        let ok = debug_frame(&expr_insn(DW_CFA_EXPRESSION, &BENIGN));
        let stats = check_cfi(CfiSection::DebugFrame, &ok, &bases).unwrap();
        assert_eq!((stats.cies, stats.fdes, stats.expressions), (1, 1, 1));
        let bad = debug_frame(&expr_insn(DW_CFA_VAL_EXPRESSION, &BRA_LOOP));
        let err = check_cfi(CfiSection::DebugFrame, &bad, &bases).unwrap_err();
        assert_eq!(
            err.to_string(),
            "`.debug_frame` CFI expression uses DW_OP_bra at FDE 0x10: not unwound"
        );
    }

    #[test]
    fn oversized_sections_are_refused_unread() {
        let big = vec![0u8; MAX_SECTION_BYTES + 1];
        let bases = BaseAddresses::default();
        assert_eq!(
            reason(check_cfi(CfiSection::DebugFrame, &big, &bases)),
            Reason::TooLarge { len: big.len() }
        );
        let small = eh_frame(&[]);
        let err = check_cfi(CfiSection::EhFrame { hdr: Some(&big) }, &small, &bases);
        assert_eq!(reason(err), Reason::HdrTooLarge { len: big.len() });
    }

    #[test]
    fn overlong_entries_are_refused() {
        // DW_CFA_nop after DW_CFA_nop: harmless, but framehop would run
        // them all on every lookup.
        let data = eh_frame(&vec![0; MAX_ENTRY_BYTES]);
        let len = data.len() - 0x18 - 4 - 4; // less the CIE, length, terminator
        assert_eq!(
            reason(check_eh(&data)),
            Reason::LongEntry {
                len,
                at: Entry::Fde(0x18)
            }
        );
        let mut data = eh_cie(&vec![0; MAX_ENTRY_BYTES]);
        data.extend([0; 4]);
        assert!(matches!(
            reason(check_eh(&data)),
            Reason::LongEntry {
                at: Entry::Cie(0),
                ..
            }
        ));
    }

    /// Issue 25.1: one FDE of 250,000 `DW_CFA_nop` (250 KB, under
    /// MAX_ENTRY_BYTES, no expression) costs framehop 250,000 instructions
    /// on every rule-cache miss: refused for its instruction count, with
    /// its CIE's counted in.
    #[test]
    fn an_fde_with_too_many_instructions_is_refused() {
        let data = eh_frame(&vec![0; 250_000]);
        assert!(data.len() < MAX_ENTRY_BYTES);
        let err = check_eh(&data).unwrap_err();
        let Reason::CostlyEntry { count, at } = err.reason else {
            panic!("{err}");
        };
        assert_eq!(at, Entry::Fde(0x18));
        // The FDE's nops and padding, the CIE's 2 instructions and 2 nops.
        assert!((250_004..250_012).contains(&count), "{count}");
        assert!(err.to_string().contains("FDE 0x18 has"), "{err}");

        // Just under the bound: accepted, and the count reported.
        let max = MAX_ENTRY_INSTRUCTIONS as usize;
        let stats = check_eh(&eh_frame(&vec![0; max - 16])).unwrap();
        assert!(
            (max as u64 - 12..=max as u64).contains(&stats.max_entry_instructions),
            "{stats:?}"
        );
        // The CIE's instructions count for each of its FDEs.
        let mut data = eh_cie(&vec![0; max - 16]);
        data.extend(eh_fde(data.len(), 0, 0x1000, &[0; 32]));
        data.extend([0; 4]);
        assert!(matches!(
            reason(check_eh(&data)),
            Reason::CostlyEntry {
                at: Entry::Fde(_),
                ..
            }
        ));
    }

    /// The budget: a long CIE shared by many FDEs is parsed (and charged)
    /// once; a section needing more steps than allowed is refused.
    #[test]
    fn work_is_bounded() {
        // "zSSS…": a valid augmentation string 100 KiB long (1600 steps
        // to parse, 3.2 M if parsed for each of the 2000 FDEs; each FDE
        // takes 9 steps: the entry, 7 instructions with padding, the end).
        let mut body = vec![0, 0, 0, 0, 1, b'z'];
        body.extend([b'S'; 100 << 10]);
        body.extend([0, 1, 0x78, 16, 0, DW_CFA_DEF_CFA, 7, 8]);
        let mut data = entry(body);
        for i in 0..2000 {
            data.extend(eh_fde(data.len(), 0, 0x1000 + i * 0x100, &[0x41]));
        }
        data.extend([0; 4]);
        let bases = BaseAddresses::default();
        let stats = check_within(CfiSection::EhFrame { hdr: None }, &data, &bases, 25_000).unwrap();
        assert_eq!((stats.cies, stats.fdes), (1, 2000));
        let err = check_within(CfiSection::EhFrame { hdr: None }, &data, &bases, 15_000);
        assert_eq!(reason(err), Reason::TooMuchWork);

        // A header naming one FDE a million times costs a step each.
        let table = hdr(&vec![(0x1000, EH_FRAME + 0x18); 1 << 20]);
        let data = eh_frame(&[]);
        let section = CfiSection::EhFrame { hdr: Some(&table) };
        let stats = check_within(section, &data, &bases, 1 << 21).unwrap();
        assert_eq!((stats.hdr_entries, stats.hdr_only_fdes), (1 << 20, 0));
        let err = check_within(section, &data, &bases, 1 << 19);
        assert_eq!(reason(err), Reason::TooMuchWork);
    }

    /// Cut anywhere, a section is refused unless the cut falls between
    /// entries.
    #[test]
    fn truncated_sections_are_refused() {
        let mut insns = expr_insn(DW_CFA_DEF_CFA_EXPRESSION, &BENIGN);
        insns.extend([0x41, 0x0e, 0x10]); // advance_loc 1; def_cfa_offset 16
        let data = eh_frame(&insns);
        let fde = eh_cie(&[]).len();
        let end = data.len() - 4;
        for cut in 0..data.len() {
            let result = check_eh(&data[..cut]);
            if [0, fde, end].contains(&cut) {
                assert!(result.is_ok(), "cut {cut}: {result:?}");
            } else {
                assert!(
                    matches!(reason(result), Reason::BadEntry { .. }),
                    "cut {cut}"
                );
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Garbage never panics, in either section or the header.
        #[test]
        fn garbage_never_panics(
            data in proptest::collection::vec(any::<u8>(), 0..600),
            hdr in proptest::option::of(proptest::collection::vec(any::<u8>(), 0..64)),
            debug in any::<bool>(),
            base in any::<u64>(),
        ) {
            let bases = framehop_bases(base, base.wrapping_add(0x100), base / 2, base / 3);
            let section = if debug {
                CfiSection::DebugFrame
            } else {
                CfiSection::EhFrame { hdr: hdr.as_deref() }
            };
            let _ = check_cfi(section, &data, &bases);
        }

        /// Nor do corruptions of a well-formed section or of a header naming
        /// its FDE.
        #[test]
        fn corrupted_sections_never_panic(
            flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
            in_hdr in any::<bool>(),
        ) {
            let mut insns = expr_insn(DW_CFA_DEF_CFA_EXPRESSION, &BENIGN);
            insns.extend(expr_insn(DW_CFA_EXPRESSION, &[DW_OP_BREG7, 0x10, DW_OP_PLUS_UCONST, 8]));
            let mut data = eh_frame(&insns);
            let mut table = hdr(&[(0x1000, EH_FRAME + 0x18)]);
            for (at, byte) in flips {
                let target = if in_hdr { &mut table } else { &mut data };
                let i = at.index(target.len());
                target[i] = byte;
            }
            let bases = BaseAddresses::default();
            let _ = check_cfi(CfiSection::EhFrame { hdr: Some(&table) }, &data, &bases);
            let _ = check_cfi(CfiSection::DebugFrame, &data, &bases);
        }
    }
}
