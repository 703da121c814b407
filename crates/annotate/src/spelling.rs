//! Instruction text as objdump writes it.
//!
//! iced-x86's GAS and Intel formatters, set up for objdump's number style, agree with
//! `objdump -d` on nearly everything compilers emit; [`Writer`] mends the rest, each rule
//! with the objdump output it reproduces (see the table test below):
//!
//! - prefix bytes that change nothing are words before the mnemonic: `data16`, `addr32`,
//!   `rex.W` (the TLS sequence `data16 data16 rex.W call __tls_get_addr`), a padding NOP's
//!   segment (`cs nopw`), and in 64-bit mode a cs/ds/es/ss override (`ds mov …`);
//! - F3/F2 are `repz`/`repnz` except on movs/stos/lods/ins/outs (`rep stos`), whose string
//!   operands name their segments (`%es:(%rdi)`);
//! - no size suffix on `call`, `jmp`, `push`, `pop` through memory at the default size;
//! - `shr %rax` for the D1 encoding, `imul $7,%eax,%eax` with both registers, the x87
//!   `%st(1)` that iced leaves implied, `fwait` + `fnstcw` read as one `fstcw`.
//!
//! Checked against binutils 2.40 on 19.5 million instructions of this system's
//! libraries and executables, objdump and this crate agree on every address, and on
//! every mnemonic and operand outside these leftovers: VIA PadLock names (`xcryptecb`
//! for objdump's `xcrypt-ecb`), port operands (`%dx` for `(%dx)`), and bytes that are
//! data in `.text` (a SIB byte without index, `(%rcx,)` for `(%rcx,%riz,2)`). Intel
//! syntax follows objdump's `-M intel` less closely (`rep stosq QWORD PTR es:[rdi]` for
//! `rep stos QWORD PTR es:[rdi],rax`).

use iced_x86::{
    Code as Op, Decoder, DecoderOptions, FlowControl, Formatter, GasFormatter, Instruction,
    IntelFormatter, MemorySizeOptions, Mnemonic, OpKind, Register,
};

/// How instructions are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Syntax {
    /// AT&T, as `objdump -d` and `perf annotate` print by default: `mov    %rsp,%rbp`.
    #[default]
    Att,
    /// Intel, as `objdump -d -M intel`: `mov    rbp,rsp`.
    Intel,
}

/// A formatter set up to print as objdump does: lower-case hex with a `0x` prefix, no
/// decimal for small numbers, no leading zeros on branch targets, `0x0(%rax,%rax,1)` for an
/// encoded zero displacement, useless prefixes shown (`repz ret`),
/// and objdump's upper-case `QWORD PTR` on every memory operand in Intel syntax.
fn formatter(syntax: Syntax) -> Box<dyn Formatter> {
    let mut f: Box<dyn Formatter> = match syntax {
        Syntax::Att => Box::new(GasFormatter::new()),
        Syntax::Intel => Box::new(IntelFormatter::new()),
    };
    let o = f.options_mut();
    o.set_hex_prefix("0x");
    o.set_hex_suffix("");
    o.set_uppercase_hex(false);
    o.set_small_hex_numbers_in_decimal(false);
    o.set_branch_leading_zeros(false);
    o.set_show_branch_size(false);
    o.set_rip_relative_addresses(true);
    o.set_show_zero_displacements(true);
    o.set_show_useless_prefixes(true);
    o.set_uppercase_keywords(syntax == Syntax::Intel);
    if syntax == Syntax::Intel {
        o.set_memory_size_options(MemorySizeOptions::Always);
    }
    f
}

/// Reused buffers and the formatter: one `text` allocation per instruction.
pub(crate) struct Writer {
    fmt: Box<dyn Formatter>,
    syntax: Syntax,
    /// The decoder's bitness (32 or 64).
    bits: u32,
    mnemonic: String,
    operands: String,
}

impl Writer {
    pub(crate) fn new(syntax: Syntax, bits: u32) -> Writer {
        Writer {
            fmt: formatter(syntax),
            syntax,
            bits,
            mnemonic: String::new(),
            operands: String::new(),
        }
    }

    /// `instr` has a segment prefix that changes nothing (and is not `notrack`, or one
    /// naming a string operand's segment).
    fn ignored_segment(&self, instr: &Instruction) -> bool {
        let seg = instr.segment_prefix();
        let flat = matches!(
            seg,
            Register::CS | Register::DS | Register::ES | Register::SS
        );
        seg != Register::None
            && (instr.mnemonic() == Mnemonic::Nop
                || (self.bits == 64
                    && flat
                    && !is_string_op(instr)
                    && !matches!(
                        instr.flow_control(),
                        FlowControl::IndirectBranch | FlowControl::IndirectCall
                    )))
    }

    /// `instr` (whose bytes are `bytes`) as objdump writes it: prefixes and mnemonic padded
    /// to 6 columns and a space, then the operands, then `  # 0x…` for a RIP-relative
    /// operand. iced-x86's formatter is close; the rest is mended here.
    pub(crate) fn text(&mut self, instr: &Instruction, bytes: &[u8]) -> String {
        let att = self.syntax == Syntax::Att;
        let o = self.fmt.options_mut();
        // objdump writes a scale of 1 when there is an index (`(%rdi,%rax,1)`); the option
        // would also write `(%rdi,)` without one.
        o.set_always_show_scale(instr.memory_index() != Register::None);
        // objdump names the segments of string operands: `stos %rax,%es:(%rdi)`.
        o.set_always_show_segment_register(is_string_op(instr));
        self.mnemonic.clear();
        self.operands.clear();
        self.fmt.format_mnemonic(instr, &mut self.mnemonic);
        self.fmt.format_all_operands(instr, &mut self.operands);

        let mut text = String::with_capacity(self.mnemonic.len() + self.operands.len() + 24);
        let mut operands = self.operands.as_str();
        // Prefix bytes that change nothing, as objdump names them: the TLS sequences'
        // `data16 lea …` and `data16 data16 rex.W call __tls_get_addr`, `addr32 call`.
        let mut scratch = Instruction::default();
        let (data16, addr32, rex) = redundant_prefixes(instr, bytes, self.bits, &mut scratch);
        for _ in 0..data16 {
            text.push_str("data16 ");
        }
        for _ in 0..addr32 {
            text.push_str("addr32 ");
        }
        // A segment prefix that does nothing is a word before the mnemonic, not part of the
        // operand: a padding NOP's (`cs nopw 0x0(%rax,%rax,1)`), or in 64-bit mode cs, ds,
        // es and ss (`ds mov 0x18(%rsi),%rdx`).
        if self.ignored_segment(instr) {
            let seg = register_name(instr.segment_prefix());
            let written = if att {
                format!("%{seg}:")
            } else {
                format!("{seg}:")
            };
            if let Some(at) = operands.find(&written) {
                text.push_str(&seg);
                text.push(' ');
                self.operands.replace_range(at..at + written.len(), "");
                operands = self.operands.as_str();
            }
        }
        if let Some(rex) = rex {
            text.push_str("rex");
            if rex & 0xf != 0 {
                text.push('.');
                for (bit, letter) in [(8, 'W'), (4, 'R'), (2, 'X'), (1, 'B')] {
                    if rex & bit != 0 {
                        text.push(letter);
                    }
                }
            }
            text.push(' ');
        }
        let mut words = self.mnemonic.split(' ').peekable();
        while let Some(word) = words.next() {
            if words.peek().is_some() {
                // A prefix: objdump's names for F3 and F2.
                text.push_str(match word {
                    "repe" => "repz",
                    "repne" => "repnz",
                    "rep" if !is_rep_string_op(instr) => "repz",
                    w => w,
                });
                text.push(' ');
            } else if att && default_size_in_memory(instr) {
                // iced writes `callq *0x10(%rip)`, `pushq 0x8(%rsp)`; objdump (binutils 2.37
                // on) `call`, `push`.
                text.push_str(word.strip_suffix(['q', 'l']).unwrap_or(word));
            } else {
                text.push_str(word);
            }
        }
        let one;
        if imul_folded(instr, &mut *self.fmt) {
            // The register written twice, as objdump does: `imul $0x7,%eax,%eax`.
            one = match (att, operands.rsplit_once(','), operands.split_once(',')) {
                (true, Some((_, reg)), _) => format!("{operands},{reg}"),
                (false, _, Some((reg, rest))) => format!("{reg},{reg},{rest}"),
                _ => operands.to_owned(),
            };
            operands = &one;
        } else if shift_by_implicit_one(instr) {
            // D0/D1 shifts by 1: objdump writes `shr %rax` and `shr rax,1`.
            operands = if att {
                operands.strip_prefix("$0x1,").unwrap_or(operands)
            } else {
                match operands.strip_suffix(",0x1") {
                    Some(rest) => {
                        one = format!("{rest},1");
                        &one
                    }
                    None => operands,
                }
            };
        }
        let x87;
        if self.fmt.operand_count(instr) < instr.op_count() {
            if let Some(ops) = x87_implicit_operands(instr, att) {
                // iced leaves out `%st(1)` where it is implied; objdump writes it.
                x87 = ops;
                operands = &x87;
            }
        }
        pad_into(&mut text, operands);
        if instr.is_ip_rel_memory_operand() {
            text.push_str(&format!("  # {:#x}", instr.ip_rel_memory_address()));
        }
        text
    }

    /// The no-wait x87 control instruction `instr` (see [`is_no_wait_x87_control`]) after
    /// an `fwait`, as objdump writes the pair: `fnstcw 0x2(%rsp)` becomes `fstcw 0x2(%rsp)`.
    pub(crate) fn waiting_text(&mut self, instr: &Instruction, bytes: &[u8]) -> String {
        let text = self.text(instr, bytes);
        match text.split_once(' ') {
            Some((m, ops)) => pad(&m.replacen("fn", "f", 1), ops.trim_start()),
            None => text.replacen("fn", "f", 1),
        }
    }
}

/// `mnemonic` padded to 6 columns, a space, `operands` (objdump's layout).
fn pad(mnemonic: &str, operands: &str) -> String {
    let mut text = mnemonic.to_owned();
    pad_into(&mut text, operands);
    text
}

/// Appends `operands` to the mnemonic in `text`, as [`pad`].
fn pad_into(text: &mut String, operands: &str) {
    if !operands.is_empty() {
        while text.len() < 6 {
            text.push(' ');
        }
        text.push(' ');
        text.push_str(operands);
    }
}

/// The operands objdump writes for an x87 instruction between `%st` and `%st(i)` whose
/// operands iced leaves out: `fxch %st(1)`, `fcom %st(1)`, `faddp %st,%st(1)`.
fn x87_implicit_operands(instr: &Instruction, att: bool) -> Option<String> {
    let st = |i: u32| {
        let r = instr.op_register(i);
        (instr.op_kind(i) == OpKind::Register && (Register::ST0..=Register::ST7).contains(&r))
            .then(|| r as u32 - Register::ST0 as u32)
    };
    let name = |n: u32| {
        let pct = if att { "%" } else { "" };
        if n == 0 {
            format!("{pct}st")
        } else {
            format!("{pct}st({n})")
        }
    };
    match (instr.op_count(), st(0), st(1)) {
        (2, Some(0), Some(i)) => Some(name(i)),
        (2, Some(i), Some(0)) if att => Some(format!("{},{}", name(0), name(i))),
        (2, Some(i), Some(0)) => Some(format!("{},{}", name(i), name(0))),
        _ => None,
    }
}

/// The no-wait x87 control instructions that objdump merges with a preceding `fwait`.
pub(crate) fn is_no_wait_x87_control(instr: &Instruction) -> bool {
    matches!(
        instr.mnemonic(),
        Mnemonic::Fnstcw
            | Mnemonic::Fnstsw
            | Mnemonic::Fnclex
            | Mnemonic::Fninit
            | Mnemonic::Fnsave
            | Mnemonic::Fnstenv
            | Mnemonic::Fneni
            | Mnemonic::Fndisi
            | Mnemonic::Fnsetpm
    )
}

/// Whether a legacy prefix byte.
fn is_legacy_prefix(b: u8) -> bool {
    matches!(
        b,
        0x26 | 0x2e | 0x36 | 0x3e | 0x64 | 0x65 | 0x66 | 0x67 | 0xf0 | 0xf2 | 0xf3
    )
}

/// The operand-size (0x66) and address-size (0x67) prefixes of `instr` (whose bytes are
/// `bytes`) that change nothing, and its REX byte if that changes nothing. A prefix kind
/// changes nothing when the bytes without it decode to the same instruction (decoded at
/// an address that keeps the same end, so relative targets compare equal); when dropping
/// them all changes the instruction, one of them was needed.
fn redundant_prefixes(
    instr: &Instruction,
    bytes: &[u8],
    bits: u32,
    scratch: &mut Instruction,
) -> (usize, usize, Option<u8>) {
    let legacy = bytes.iter().take_while(|&&b| is_legacy_prefix(b)).count();
    let rex = bytes
        .get(legacy)
        .copied()
        .filter(|&b| bits == 64 && (0x40..=0x4f).contains(&b) && legacy + 1 < bytes.len());
    let count = |p: u8| bytes[..legacy].iter().filter(|&&b| b == p).count();
    let (n66, n67) = (count(0x66), count(0x67));
    if n66 == 0 && n67 == 0 && rex.is_none() {
        return (0, 0, None);
    }
    let mut same_without = |drop: &dyn Fn(usize, u8) -> bool| {
        let mut kept = [0u8; 16];
        let mut n = 0;
        for (i, &b) in bytes.iter().enumerate() {
            if !drop(i, b) {
                kept[n] = b;
                n += 1;
            }
        }
        let ip = instr.ip().wrapping_add((bytes.len() - n) as u64);
        let mut d = Decoder::with_ip(bits, &kept[..n], ip, DecoderOptions::NONE);
        d.decode_out(scratch);
        !scratch.is_invalid() && scratch.len() == n && *scratch == *instr
    };
    let unused = |n: usize, same: bool| if same { n } else { n.saturating_sub(1) };
    let data16 = if n66 > 0 {
        unused(n66, same_without(&|i, b| i < legacy && b == 0x66))
    } else {
        0
    };
    let addr32 = if n67 > 0 {
        unused(n67, same_without(&|i, b| i < legacy && b == 0x67))
    } else {
        0
    };
    let rex = rex.filter(|_| same_without(&|i, _| i == legacy));
    (data16, addr32, rex)
}

/// `cs`, `ds`, … (lower case, as both syntaxes write segment registers).
fn register_name(r: Register) -> String {
    format!("{r:?}").to_ascii_lowercase()
}

/// An instruction with a string operand (`movs`, `stos`, `lods`, `cmps`, `scas`, `ins`,
/// `outs`).
fn is_string_op(instr: &Instruction) -> bool {
    (0..instr.op_count()).any(|i| {
        matches!(
            instr.op_kind(i),
            OpKind::MemorySegSI
                | OpKind::MemorySegESI
                | OpKind::MemorySegRSI
                | OpKind::MemorySegDI
                | OpKind::MemorySegEDI
                | OpKind::MemorySegRDI
                | OpKind::MemoryESDI
                | OpKind::MemoryESEDI
                | OpKind::MemoryESRDI
        )
    })
}

/// A string instruction whose F3 prefix objdump calls `rep` (the others' is `repz`).
fn is_rep_string_op(instr: &Instruction) -> bool {
    is_string_op(instr)
        && !matches!(
            instr.mnemonic(),
            Mnemonic::Cmpsb
                | Mnemonic::Cmpsw
                | Mnemonic::Cmpsd
                | Mnemonic::Cmpsq
                | Mnemonic::Scasb
                | Mnemonic::Scasw
                | Mnemonic::Scasd
                | Mnemonic::Scasq
        )
}

/// `call`/`jmp` near, `push`/`pop` through memory, with the mode's default operand size.
fn default_size_in_memory(instr: &Instruction) -> bool {
    matches!(
        instr.code(),
        Op::Call_rm64
            | Op::Jmp_rm64
            | Op::Push_rm64
            | Op::Pop_rm64
            | Op::Call_rm32
            | Op::Jmp_rm32
            | Op::Push_rm32
            | Op::Pop_rm32
    ) && instr.op0_kind() == OpKind::Memory
}

/// `imul $imm,%eax,%eax`, which iced writes as `imul $imm,%eax` and objdump does not.
fn imul_folded(instr: &Instruction, fmt: &mut dyn Formatter) -> bool {
    instr.mnemonic() == Mnemonic::Imul
        && instr.op_count() == 3
        && instr.op0_kind() == OpKind::Register
        && instr.op1_kind() == OpKind::Register
        && instr.op0_register() == instr.op1_register()
        && fmt.operand_count(instr) == 2
}

/// A rotate or shift encoded as "by 1" (opcode D0/D1), whose 1 is implicit.
fn shift_by_implicit_one(instr: &Instruction) -> bool {
    use Op::*;
    matches!(
        instr.code(),
        Rol_rm8_1
            | Ror_rm8_1
            | Rcl_rm8_1
            | Rcr_rm8_1
            | Shl_rm8_1
            | Shr_rm8_1
            | Sal_rm8_1
            | Sar_rm8_1
            | Rol_rm16_1
            | Ror_rm16_1
            | Rcl_rm16_1
            | Rcr_rm16_1
            | Shl_rm16_1
            | Shr_rm16_1
            | Sal_rm16_1
            | Sar_rm16_1
            | Rol_rm32_1
            | Ror_rm32_1
            | Rcl_rm32_1
            | Rcr_rm32_1
            | Shl_rm32_1
            | Shr_rm32_1
            | Sal_rm32_1
            | Sar_rm32_1
            | Rol_rm64_1
            | Ror_rm64_1
            | Rcl_rm64_1
            | Rcr_rm64_1
            | Shl_rm64_1
            | Shr_rm64_1
            | Sal_rm64_1
            | Sar_rm64_1
    )
}

#[cfg(test)]
mod tests {
    use crate::{annotate_instructions, Bitness, Code, Syntax};

    /// Where iced-x86's formatter and objdump differ, the text is objdump's (binutils
    /// 2.40, `objdump -D -b binary -m i386:x86-64 [-M intel]`); `None`: Intel differs.
    #[test]
    fn instructions_are_spelled_as_objdump_spells_them() {
        #[rustfmt::skip]
        let cases: &[(&[u8], Bitness, &str, Option<&str>)] = &[
            (&[0x66, 0x2e, 0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0], Bitness::Bits64,
             "cs nopw 0x0(%rax,%rax,1)", Some("cs nop WORD PTR [rax+rax*1+0x0]")),
            (&[0x66, 0x66, 0x2e, 0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0], Bitness::Bits64,
             "data16 cs nopw 0x0(%rax,%rax,1)", Some("data16 cs nop WORD PTR [rax+rax*1+0x0]")),
            // The TLS general-dynamic sequence and a relaxed GOT call.
            (&[0x66, 0x48, 0x8d, 0x3d, 0x10, 0, 0, 0], Bitness::Bits64,
             "data16 lea 0x10(%rip),%rdi  # 0x18", Some("data16 lea rdi,[rip+0x10]  # 0x18")),
            (&[0x66, 0x66, 0x48, 0xe8, 0x10, 0, 0, 0], Bitness::Bits64,
             "data16 data16 rex.W call 0x18", Some("data16 data16 rex.W call 0x18")),
            (&[0x67, 0xe8, 0x10, 0, 0, 0], Bitness::Bits64, "addr32 call 0x16", Some("addr32 call 0x16")),
            (&[0xf3, 0xc3], Bitness::Bits64, "repz ret", Some("repz ret")),
            (&[0xf3, 0xa6], Bitness::Bits64, "repz cmpsb %es:(%rdi),%ds:(%rsi)", None),
            (&[0xf3, 0x48, 0xab], Bitness::Bits64, "rep stos %rax,%es:(%rdi)", None),
            (&[0xff, 0x15, 0xf0, 0x0f, 0, 0], Bitness::Bits64,
             "call   *0xff0(%rip)  # 0xff6", Some("call   QWORD PTR [rip+0xff0]  # 0xff6")),
            (&[0xff, 0x74, 0x24, 0x08], Bitness::Bits64, "push   0x8(%rsp)", Some("push   QWORD PTR [rsp+0x8]")),
            (&[0x48, 0xd1, 0xe8], Bitness::Bits64, "shr    %rax", Some("shr    rax,1")),
            (&[0x48, 0xc1, 0xe8, 0x01], Bitness::Bits64, "shr    $0x1,%rax", Some("shr    rax,0x1")),
            (&[0x69, 0xc0, 0x6d, 0x4e, 0xc6, 0x41], Bitness::Bits64,
             "imul   $0x41c64e6d,%eax,%eax", Some("imul   eax,eax,0x41c64e6d")),
            (&[0xde, 0xc1], Bitness::Bits64, "faddp  %st,%st(1)", Some("faddp  st(1),st")),
            (&[0xd9, 0xc9], Bitness::Bits64, "fxch   %st(1)", Some("fxch   st(1)")),
            (&[0xd8, 0xd1], Bitness::Bits64, "fcom   %st(1)", Some("fcom   st(1)")),
            (&[0x9b, 0xd9, 0x7c, 0x24, 0x02], Bitness::Bits64, "fstcw  0x2(%rsp)", Some("fstcw  WORD PTR [rsp+0x2]")),
            (&[0x3e, 0x48, 0x8b, 0x46, 0x18], Bitness::Bits64,
             "ds mov 0x18(%rsi),%rax", Some("ds mov rax,QWORD PTR [rsi+0x18]")),
            (&[0x3e, 0x8b, 0x06], Bitness::Bits32, "mov    %ds:(%esi),%eax", Some("mov    eax,DWORD PTR ds:[esi]")),
            (&[0x3e, 0xff, 0xe0], Bitness::Bits64, "notrack jmp *%rax", Some("notrack jmp rax")),
            (&[0xf2, 0xff, 0xe0], Bitness::Bits64, "bnd jmp *%rax", Some("bnd jmp rax")),
            (&[0x64, 0x48, 0x8b, 0x04, 0x25, 0x28, 0, 0, 0], Bitness::Bits64, "mov    %fs:0x28,%rax", None),
            (&[0x66, 0x0f, 0xef, 0xc0], Bitness::Bits64, "pxor   %xmm0,%xmm0", Some("pxor   xmm0,xmm0")),
            (&[0x40, 0x88, 0xc6], Bitness::Bits64, "mov    %al,%sil", Some("mov    sil,al")),
            (&[0x40, 0x50], Bitness::Bits64, "rex push %rax", Some("rex push rax")),
        ];
        for &(bytes, bitness, att, intel) in cases {
            let code = Code {
                bytes: bytes.to_vec(),
                vaddr: 0,
                bitness,
            };
            for (syntax, want) in [(Syntax::Att, Some(att)), (Syntax::Intel, intel)] {
                let l = annotate_instructions(&code, &[], syntax);
                assert_eq!(l.insns.len(), 1, "{bytes:02x?} {syntax:?}: {l:?}");
                assert_eq!(usize::from(l.insns[0].len), bytes.len(), "{bytes:02x?}");
                if let Some(want) = want {
                    assert_eq!(l.insns[0].text, want, "{bytes:02x?} {syntax:?}");
                }
            }
        }
    }

    #[test]
    fn fwait_stays_alone_unless_a_no_wait_control_instruction_follows() {
        // fwait ; nop ; ds fwait ; then a truncated add (32-bit): no merge, nothing lost.
        let code = Code {
            bytes: vec![0x9b, 0x90, 0x3e, 0x9b, 0x00],
            vaddr: 0x100,
            bitness: Bitness::Bits32,
        };
        let l = annotate_instructions(&code, &[(0x103, 1)], Syntax::Att);
        let got: Vec<(u64, u8, &str)> = l
            .insns
            .iter()
            .map(|i| (i.addr, i.len, i.text.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                (0x100, 1, "fwait"),
                (0x101, 1, "nop"),
                (0x102, 2, "ds fwait"),
                (0x104, 1, "(bad)")
            ]
        );
        assert_eq!(l.insns[2].samples, 1);
    }
}
