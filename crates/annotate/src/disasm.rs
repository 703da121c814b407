//! Disassembly of one function's bytes with iced-x86, and samples per instruction.
//!
//! # Implementation notes
//!
//! The bytes are decoded linearly from the start, as objdump does; an undecodable byte
//! becomes a one-byte `(bad)` and decoding resumes at the next byte, so every byte of
//! the code belongs to exactly one instruction and the instruction list is sorted by
//! address. A sample then finds its instruction by binary search on the offset from the
//! start of the code:
//!
//! ```text
//!   code.vaddr = 0x1000
//!   insns:   0x1000 push (1)  0x1001 mov (3)  0x1004 jne (2)  0x1006 ret (1)
//!   sample 0x1005 → offset 5 → last insn starting at or before 5 → jne (covers 4..6)
//!   sample 0x1007 → offset 7 ≥ 7 bytes → outside
//! ```
//!
//! O(n) to decode, O(s log n) to place s samples; the formatter is built once per call.

use iced_x86::{Decoder, DecoderOptions, FlowControl, Instruction, Mnemonic, OpKind};

use crate::spelling::{self, Syntax, Writer};

/// Which mode the code runs in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Bitness {
    /// 32-bit protected mode: ELF32 `EM_386`.
    Bits32,
    /// 64-bit long mode: ELF64 `EM_X86_64` (and the x32 ABI's ELF32 `EM_X86_64`).
    Bits64,
}

impl Bitness {
    /// 32 or 64.
    pub fn bits(self) -> u32 {
        match self {
            Bitness::Bits32 => 32,
            Bitness::Bits64 => 64,
        }
    }
}

/// A function's machine code: `bytes` are what is mapped at `vaddr` (link-time address).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Code {
    /// The bytes, from `vaddr` on.
    pub bytes: Vec<u8>,
    /// The link-time virtual address of `bytes[0]` (the address symbols and DWARF use).
    pub vaddr: u64,
    /// The mode to decode in.
    pub bitness: Bitness,
}

impl Code {
    /// Code held in memory rather than read from an ELF file (a runtime's JIT code, whose
    /// bytes a session keeps): `bytes` at address `vaddr`, decoded in `bitness`. The same
    /// checks as [`crate::read_code`]: 1 to [`crate::MAX_CODE_BYTES`] bytes, and the range
    /// must not run past the end of the address space.
    ///
    /// ```
    /// use profkit_annotate::{annotate_instructions, Bitness, Code, Syntax};
    ///
    /// let code = Code::from_bytes(vec![0x55, 0xc3], 0x7f00_0000_1000, Bitness::Bits64)?;
    /// let l = annotate_instructions(&code, &[(0x7f00_0000_1001, 4)], Syntax::Att);
    /// assert_eq!((l.insns[1].text.as_str(), l.insns[1].samples), ("ret", 4));
    /// assert!(Code::from_bytes(vec![], 0x1000, Bitness::Bits64).is_err());
    /// # Ok::<(), profkit_annotate::Error>(())
    /// ```
    ///
    /// # Errors
    /// [`crate::Error::EmptyRange`] for no bytes, [`crate::Error::TooLong`] for more than
    /// [`crate::MAX_CODE_BYTES`] or a range past the end of the address space.
    pub fn from_bytes(bytes: Vec<u8>, vaddr: u64, bitness: Bitness) -> crate::Result<Code> {
        let len = bytes.len() as u64;
        if len == 0 {
            return Err(crate::Error::EmptyRange { vaddr });
        }
        if len > crate::MAX_CODE_BYTES || vaddr.checked_add(len).is_none() {
            return Err(crate::Error::TooLong {
                vaddr,
                len,
                max: crate::MAX_CODE_BYTES,
            });
        }
        Ok(Code {
            bytes,
            vaddr,
            bitness,
        })
    }
}

/// What an instruction does to the flow of control (from iced-x86's `FlowControl`), so a
/// renderer can draw jump arrows and mark calls and returns without parsing mnemonics.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Flow {
    /// Continues with the next instruction.
    Next,
    /// Direct unconditional jump (`jmp 0x…`); [`Insn::target`] is set.
    Jump,
    /// Direct conditional jump (`jcc`, `loop`, `jrcxz`); [`Insn::target`] is set.
    ConditionalJump,
    /// Jump through a register or memory (`jmp *%rax`, a switch's table).
    IndirectJump,
    /// Direct call; [`Insn::target`] is set.
    Call,
    /// Call through a register or memory (PLT-less calls, virtual calls).
    IndirectCall,
    /// `ret` and the like.
    Return,
    /// `int`, `int3`, `syscall`, `sysenter` and the like.
    Interrupt,
    /// `xbegin` (with its abort target in [`Insn::target`]), `xabort`, `xend`.
    Transaction,
    /// Raises an exception by design (`ud2`, `ud0`).
    Trap,
    /// An undecodable byte (`(bad)`).
    Bad,
}

/// One decoded instruction and the samples that fell on it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Insn {
    /// Its address (link-time).
    pub addr: u64,
    /// Its length in bytes: 1 to 15, or 16 for an `fwait` read with the instruction after
    /// it as objdump does (`fstcw`).
    pub len: u8,
    /// Prefixes and mnemonic, padded to 6 columns and a space, then the operands, as
    /// objdump writes them (see `spelling.rs` for the few places where iced-x86 and objdump
    /// differ): `jne    0x1136`, `lock cmpxchg %ecx,(%rdx)`. A direct branch's operand is
    /// its absolute target (`0x…`, the number in [`Insn::target`]), where objdump adds
    /// `<symbol+off>` and `perf annotate` an offset: naming it is the renderer's job. A
    /// RIP-relative operand is written as objdump does, `0x2ed6(%rip)`, followed by
    /// `  # 0x4010` with the address it names. Undecodable bytes are `(bad)`.
    pub text: String,
    /// Samples whose address lies within `addr..addr + len`.
    pub samples: u64,
    /// What it does to the flow of control.
    pub flow: Flow,
    /// The target of a direct jump, call or `xbegin`.
    pub target: Option<u64>,
    /// `target` lies inside the code disassembled (a jump within the function: the
    /// renderer draws an arrow, or a label, instead of naming a symbol).
    pub local_target: bool,
}

/// The instructions of a [`Code`] and where its samples fell.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Listing {
    /// Every instruction, by address; together they cover every byte of the code.
    pub insns: Vec<Insn>,
    /// The samples given whose address is not inside the code.
    pub outside: u64,
}

impl Listing {
    /// The index of the instruction covering `addr`, if any (for a jump arrow's end, say).
    pub fn insn_at(&self, addr: u64) -> Option<usize> {
        let base = self.insns.first()?.addr;
        position(&self.insns, base, addr.wrapping_sub(base))
    }

    /// All samples given: those on instructions plus [`Listing::outside`].
    pub fn total_samples(&self) -> u64 {
        self.insns
            .iter()
            .fold(self.outside, |t, i| t.saturating_add(i.samples))
    }
}

/// The index of the instruction covering offset `off` from `base`.
fn position(insns: &[Insn], base: u64, off: u64) -> Option<usize> {
    let after = insns.partition_point(|i| i.addr.wrapping_sub(base) <= off);
    let i = after.checked_sub(1)?;
    (off - insns[i].addr.wrapping_sub(base) < u64::from(insns[i].len)).then_some(i)
}

/// Disassembles `code` and counts `samples` (`(vaddr, count)` pairs, any order, repeats
/// allowed) on the instructions they fall in; samples outside the code go to
/// [`Listing::outside`]. Never fails and never panics: bytes that do not decode become
/// one-byte `(bad)` instructions.
///
/// ```
/// use profkit_annotate::{annotate_instructions, Bitness, Code, Flow, Syntax};
///
/// // loop: dec %ecx ; jne loop ; ret
/// let code = Code { bytes: vec![0xff, 0xc9, 0x75, 0xfc, 0xc3], vaddr: 0x1000, bitness: Bitness::Bits64 };
/// let listing = annotate_instructions(&code, &[(0x1003, 5), (0x1000, 2), (0x2000, 1)], Syntax::Att);
/// assert_eq!(listing.insns[1].text, "jne    0x1000");
/// assert_eq!((listing.insns[1].flow, listing.insns[1].target, listing.insns[1].local_target),
///            (Flow::ConditionalJump, Some(0x1000), true));
/// assert_eq!(listing.insns.iter().map(|i| i.samples).collect::<Vec<_>>(), [2, 5, 0]);
/// assert_eq!(listing.outside, 1);
/// ```
pub fn annotate_instructions(code: &Code, samples: &[(u64, u64)], syntax: Syntax) -> Listing {
    let mut insns = decode(code, syntax);
    let mut outside = 0u64;
    let size = code.bytes.len() as u64;
    for &(addr, count) in samples {
        let off = addr.wrapping_sub(code.vaddr);
        match (off < size)
            .then(|| position(&insns, code.vaddr, off))
            .flatten()
        {
            Some(i) => insns[i].samples = insns[i].samples.saturating_add(count),
            None => outside = outside.saturating_add(count),
        }
    }
    Listing { insns, outside }
}

/// Decodes every byte of `code` into instructions, samples zero.
fn decode(code: &Code, syntax: Syntax) -> Vec<Insn> {
    let mut writer = Writer::new(syntax, code.bitness.bits());
    let end = code.vaddr.wrapping_add(code.bytes.len() as u64);
    let local = |t: u64| t.wrapping_sub(code.vaddr) < end.wrapping_sub(code.vaddr);
    let mut decoder = Decoder::with_ip(
        code.bitness.bits(),
        &code.bytes,
        code.vaddr,
        DecoderOptions::NONE,
    );
    let mut insns = Vec::with_capacity(code.bytes.len() / 4 + 1);
    let mut instr = Instruction::default();
    while decoder.can_decode() {
        let pos = decoder.position();
        decoder.decode_out(&mut instr);
        let addr = code.vaddr.wrapping_add(pos as u64);
        if instr.is_invalid() {
            insns.push(Insn {
                addr,
                len: 1,
                text: "(bad)".to_owned(),
                samples: 0,
                flow: Flow::Bad,
                target: None,
                local_target: false,
            });
            // `pos < len` since `can_decode` held, so `pos + 1` is a valid position.
            if decoder.set_position(pos + 1).is_err() {
                break;
            }
            decoder.set_ip(addr.wrapping_add(1));
            continue;
        }
        let mut text = writer.text(&instr, &code.bytes[pos..pos + instr.len()]);
        let mut len = instr.len();
        if instr.mnemonic() == Mnemonic::Wait && decoder.can_decode() {
            // objdump reads `fwait` + `fnstcw` as one `fstcw` (9B is then a prefix).
            let mut next = Instruction::default();
            decoder.decode_out(&mut next);
            let after = pos + instr.len();
            if !next.is_invalid() && spelling::is_no_wait_x87_control(&next) {
                text = writer.waiting_text(&next, &code.bytes[after..after + next.len()]);
                len += next.len();
            } else if decoder.set_position(after).is_ok() {
                decoder.set_ip(addr.wrapping_add(after as u64 - pos as u64));
            } else {
                break;
            }
        }
        let target = matches!(
            instr.op0_kind(),
            OpKind::NearBranch16 | OpKind::NearBranch32 | OpKind::NearBranch64
        )
        .then(|| instr.near_branch_target());
        insns.push(Insn {
            addr,
            // An x86 instruction is at most 15 bytes (16 with a merged fwait).
            len: len as u8,
            text,
            samples: 0,
            flow: flow(instr.flow_control()),
            target,
            local_target: target.is_some_and(local),
        });
    }
    insns
}

fn flow(f: FlowControl) -> Flow {
    match f {
        FlowControl::Next => Flow::Next,
        FlowControl::UnconditionalBranch => Flow::Jump,
        FlowControl::ConditionalBranch => Flow::ConditionalJump,
        FlowControl::IndirectBranch => Flow::IndirectJump,
        FlowControl::Call => Flow::Call,
        FlowControl::IndirectCall => Flow::IndirectCall,
        FlowControl::Return => Flow::Return,
        FlowControl::Interrupt => Flow::Interrupt,
        FlowControl::XbeginXabortXend => Flow::Transaction,
        FlowControl::Exception => Flow::Trap,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code64(bytes: &[u8], vaddr: u64) -> Code {
        Code {
            bytes: bytes.to_vec(),
            vaddr,
            bitness: Bitness::Bits64,
        }
    }

    fn texts(l: &Listing) -> Vec<&str> {
        l.insns.iter().map(|i| i.text.as_str()).collect()
    }

    /// `for (i = n; i; i--) s += i; return s;` as gcc -O2 emits it, with a backward jne.
    const LOOP: &[u8] = &[
        0x31, 0xc0, // 0x1000 xor %eax,%eax
        0x85, 0xff, // 0x1002 test %edi,%edi
        0x74, 0x08, // 0x1004 je 0x100e
        0x01, 0xf8, // 0x1006 add %edi,%eax
        0x83, 0xef, 0x01, // 0x1008 sub $0x1,%edi
        0x75, 0xf9, // 0x100b jne 0x1006
        0xc3, // 0x100d ret
        0xc3, // 0x100e ret
    ];

    #[test]
    fn a_loop_with_a_backward_jcc_decodes_with_local_targets_in_att() {
        let l = annotate_instructions(&code64(LOOP, 0x1000), &[], Syntax::Att);
        assert_eq!(
            texts(&l),
            [
                "xor    %eax,%eax",
                "test   %edi,%edi",
                "je     0x100e",
                "add    %edi,%eax",
                "sub    $0x1,%edi",
                "jne    0x1006",
                "ret",
                "ret",
            ]
        );
        let addrs: Vec<u64> = l.insns.iter().map(|i| i.addr).collect();
        assert_eq!(
            addrs,
            [0x1000, 0x1002, 0x1004, 0x1006, 0x1008, 0x100b, 0x100d, 0x100e]
        );
        let jne = &l.insns[5];
        assert_eq!(
            (jne.len, jne.flow, jne.target, jne.local_target),
            (2, Flow::ConditionalJump, Some(0x1006), true)
        );
        // A forward jump to the last byte is still local.
        assert_eq!(
            (l.insns[2].target, l.insns[2].local_target),
            (Some(0x100e), true)
        );
        assert_eq!(l.insns[6].flow, Flow::Return);
        assert_eq!(l.insns[3].flow, Flow::Next);
        assert_eq!(l.insns[3].target, None);
    }

    #[test]
    fn intel_syntax_puts_destination_first() {
        let l = annotate_instructions(&code64(LOOP, 0x1000), &[], Syntax::Intel);
        assert_eq!(l.insns[3].text, "add    eax,edi");
        assert_eq!(l.insns[4].text, "sub    edi,0x1");
        assert_eq!(l.insns[5].text, "jne    0x1006");
    }

    #[test]
    fn samples_land_on_the_instruction_covering_them_and_the_rest_are_outside() {
        let samples = [
            (0x1000, 1),  // first byte of xor
            (0x1009, 10), // inside sub (0x1008..0x100b)
            (0x100b, 3),  // jne
            (0x100c, 4),  // jne, second byte
            (0x100e, 7),  // last byte of the code
            (0x100f, 100),
            (0x0fff, 1000),
            (0x1009, 10), // repeats add up
            (u64::MAX, 1),
        ];
        let l = annotate_instructions(&code64(LOOP, 0x1000), &samples, Syntax::Att);
        let counts: Vec<u64> = l.insns.iter().map(|i| i.samples).collect();
        assert_eq!(counts, [1, 0, 0, 0, 20, 7, 0, 7]);
        assert_eq!(l.outside, 1101);
        assert_eq!(l.total_samples(), 1136);
        assert_eq!(l.insn_at(0x100c), Some(5));
        assert_eq!(l.insn_at(0x100f), None);
        assert_eq!(l.insn_at(0x0fff), None);
    }

    #[test]
    fn calls_know_their_targets_and_whether_they_leave_the_function() {
        let bytes = [
            0xe8, 0xfb, 0x0f, 0x00, 0x00, // 0x401000 call 0x402000 (outside)
            0xe8, 0xf6, 0xff, 0xff, 0xff, // 0x401005 call 0x401000 (itself: recursion)
            0xff, 0xd0, // 0x40100a call *%rax
            0xff, 0x25, 0x10, 0x00, 0x00, 0x00, // 0x40100c jmp *0x10(%rip)
            0xe9, 0x00, 0x00, 0x00, 0x00, // 0x401012 jmp 0x401017 (just past the end)
        ];
        let l = annotate_instructions(&code64(&bytes, 0x401000), &[], Syntax::Att);
        assert_eq!(l.insns[0].text, "call   0x402000");
        assert_eq!(
            (l.insns[0].flow, l.insns[0].target, l.insns[0].local_target),
            (Flow::Call, Some(0x402000), false)
        );
        assert_eq!(
            (l.insns[1].target, l.insns[1].local_target),
            (Some(0x401000), true)
        );
        assert_eq!(l.insns[2].text, "call   *%rax");
        assert_eq!(
            (l.insns[2].flow, l.insns[2].target),
            (Flow::IndirectCall, None)
        );
        assert_eq!(l.insns[3].text, "jmp    *0x10(%rip)  # 0x401022");
        assert_eq!(
            (l.insns[3].flow, l.insns[3].target),
            (Flow::IndirectJump, None)
        );
        assert_eq!(
            (l.insns[4].flow, l.insns[4].target, l.insns[4].local_target),
            (Flow::Jump, Some(0x401017), false)
        );
    }

    #[test]
    fn i386_code_decodes_in_32_bit_mode() {
        // push %ebp ; mov %esp,%ebp ; call 0x8049010 ; inc %eax (0x40 is a REX prefix in 64-bit) ; ret
        let bytes = [0x55, 0x89, 0xe5, 0xe8, 0x08, 0x00, 0x00, 0x00, 0x40, 0xc3];
        let code = Code {
            bytes: bytes.to_vec(),
            vaddr: 0x8049000,
            bitness: Bitness::Bits32,
        };
        let l = annotate_instructions(&code, &[], Syntax::Att);
        assert_eq!(
            texts(&l),
            [
                "push   %ebp",
                "mov    %esp,%ebp",
                "call   0x8049010",
                "inc    %eax",
                "ret"
            ]
        );
    }

    #[test]
    fn bad_bytes_become_one_byte_bad_instructions_and_decoding_resumes() {
        // 0x06 (push %es) is invalid in 64-bit mode; a truncated mov at the end.
        let bytes = [0x06, 0x90, 0x06, 0x06, 0xc3, 0x48, 0x8b];
        let l = annotate_instructions(
            &code64(&bytes, 0x2000),
            &[(0x2002, 1), (0x2006, 2)],
            Syntax::Att,
        );
        assert_eq!(
            texts(&l),
            ["(bad)", "nop", "(bad)", "(bad)", "ret", "(bad)", "(bad)"]
        );
        let lens: Vec<u8> = l.insns.iter().map(|i| i.len).collect();
        assert_eq!(lens, [1, 1, 1, 1, 1, 1, 1]);
        assert_eq!(l.insns[0].flow, Flow::Bad);
        assert_eq!(
            (l.insns[2].samples, l.insns[6].samples, l.outside),
            (1, 2, 0)
        );
    }

    #[test]
    fn empty_code_puts_every_sample_outside() {
        let l = annotate_instructions(&code64(&[], 0x1000), &[(0x1000, 3)], Syntax::Att);
        assert!(l.insns.is_empty());
        assert_eq!(l.outside, 3);
        assert_eq!(l.insn_at(0x1000), None);
    }

    #[test]
    fn code_at_the_top_of_the_address_space_does_not_wrap_into_local_targets() {
        // jmp to 0 from the last two bytes of the address space: target wraps to 0.
        let l = annotate_instructions(
            &code64(&[0xeb, 0x00], u64::MAX - 1),
            &[(u64::MAX, 1), (0, 1)],
            Syntax::Att,
        );
        assert_eq!(l.insns.len(), 1);
        assert_eq!(l.insns[0].samples, 1);
        assert_eq!(l.outside, 1);
        assert!(!l.insns[0].local_target);
    }

    proptest::proptest! {
        #[test]
        fn random_bytes_never_panic_and_cover_every_byte(
            bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..256),
            vaddr in proptest::num::u64::ANY,
            is64 in proptest::bool::ANY,
            intel in proptest::bool::ANY,
            samples in proptest::collection::vec((0u64..300, 0u64..5), 0..20),
        ) {
            let code = Code {
                bytes: bytes.clone(),
                vaddr,
                bitness: if is64 { Bitness::Bits64 } else { Bitness::Bits32 },
            };
            let samples: Vec<(u64, u64)> =
                samples.iter().map(|&(o, c)| (vaddr.wrapping_add(o), c)).collect();
            let syntax = if intel { Syntax::Intel } else { Syntax::Att };
            let l = annotate_instructions(&code, &samples, syntax);
            let mut off = 0u64;
            for i in &l.insns {
                proptest::prop_assert_eq!(i.addr, vaddr.wrapping_add(off));
                proptest::prop_assert!((1..=16).contains(&i.len));
                proptest::prop_assert!(!i.text.is_empty());
                off += u64::from(i.len);
            }
            proptest::prop_assert_eq!(off, bytes.len() as u64);
            let given: u64 = samples.iter().map(|s| s.1).sum();
            proptest::prop_assert_eq!(l.total_samples(), given);
            let inside: u64 = samples
                .iter()
                .filter(|s| s.0.wrapping_sub(vaddr) < bytes.len() as u64)
                .map(|s| s.1)
                .sum();
            proptest::prop_assert_eq!(l.outside, given - inside);
        }
    }
}
