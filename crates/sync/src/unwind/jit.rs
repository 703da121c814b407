//! Stepping frames of generated code (JIT, trampolines), which no binary's
//! unwind sections describe.
//!
//! In order, for a frame in anonymous executable memory:
//!
//! 1. **The runtime's own unwind information**: a jitdump's
//!    `JIT_CODE_UNWINDING_INFO` (`.eh_frame` and `.eh_frame_hdr` for one
//!    function's code, Python 3.13's `-X perf_jit`, Java agents), handed to
//!    framehop as a module of its own at the code's address, checked first
//!    by `cfi_check` like a binary's ([`jit_sections`]).
//! 2. **The code's own epilogue** ([`Epilogue`]): from the frame's address,
//!    the instructions up to its `ret` are decoded (at most
//!    [`EPILOGUE_MAX_INSTRUCTIONS`] in [`EPILOGUE_MAX_BYTES`], straight
//!    line only: any branch, call or other write of `rsp` gives up), and
//!    what they do to `rsp` and `rbp` is done to the registers. A
//!    trampoline that keeps no frame pointer (Python 3.12's `-X perf`:
//!    `sub $8,%rsp; call *%rcx; add $8,%rsp; ret`) is stepped exactly, and
//!    DWARF continues in its caller with the registers right. The bytes
//!    come from the process's memory while it lives (`/proc/PID/mem`,
//!    through the stage's probe), else from its jitdump (an import).
//! 3. The frame pointer, as for any code without information.
//!
//! Not here: reading jitdump files (`crate::jit`), which code covers an
//! address at a sample's time (the [`JitFrames`] the stage hands in).

use super::sections::Data;
use super::CfiSections;
use crate::cfi_check::{check_cfi, framehop_bases, CfiSection};
use framehop::x86_64::UnwindRegsX86_64;
use iced_x86::{Code, Decoder, DecoderOptions, FlowControl, Instruction, OpKind, Register};
use std::ops::Range;

/// Most instructions an epilogue is decoded for.
pub(crate) const EPILOGUE_MAX_INSTRUCTIONS: usize = 16;
/// Most code bytes read for an epilogue.
pub(crate) const EPILOGUE_MAX_BYTES: usize = 64;

/// A runtime's unwind information for one function's code: `.eh_frame`
/// followed by `.eh_frame_hdr` (the last `hdr_len` bytes), as a
/// `JIT_CODE_UNWINDING_INFO` record carries them.
#[derive(Debug, Clone)]
pub(crate) struct JitUnwind {
    pub(crate) data: Data,
    pub(crate) hdr_len: usize,
}

/// What the stage knows of the generated code covering an address.
#[derive(Debug, Clone)]
pub(crate) struct JitCodeInfo {
    /// Names this code instance for the unwinder's caches (unique in the
    /// session: the same address with other code gets another key).
    pub(crate) key: u64,
    /// Where the code is.
    pub(crate) code: Range<u64>,
    /// Its unwind information, if the runtime gave some.
    pub(crate) unwind: Option<JitUnwind>,
}

/// The stage's view of a process's generated code, for the unwinder.
pub(crate) trait JitFrames {
    /// The process whose stack is unwound.
    fn pid(&self) -> u32;
    /// The described code covering `addr` at `time`, if any.
    fn code_at(&mut self, addr: u64, time: u64) -> Option<JitCodeInfo>;
    /// Reads the code at `addr` into `buf`: the process's memory while it
    /// lives, else its jitdump's copy; the number of bytes read (0: not
    /// readable).
    fn read_memory(&mut self, addr: u64, time: u64, buf: &mut [u8]) -> usize;
}

/// No generated code known, no memory read (tests).
#[cfg(test)]
pub(crate) struct NoJitFrames;

#[cfg(test)]
impl JitFrames for NoJitFrames {
    fn pid(&self) -> u32 {
        0
    }
    fn code_at(&mut self, _addr: u64, _time: u64) -> Option<JitCodeInfo> {
        None
    }
    fn read_memory(&mut self, _addr: u64, _time: u64, _buf: &mut [u8]) -> usize {
        0
    }
}

/// Why a runtime's unwind information is not used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum JitUnwindRefusal {
    /// The sizes do not fit (`.eh_frame_hdr` longer than the data).
    Sizes,
    /// No FDE in it.
    NoFde,
    /// The CFI check refused it.
    Check(String),
}

/// The unwind sections of a JIT function's code at `code`, from its
/// `.eh_frame` and `.eh_frame_hdr`. Where the runtime meant them to lie
/// relative to the code is not fixed by the jitdump format (perf inject
/// lays them after the code, aligned): the sections are placed so that
/// their first FDE starts at the code's start, which is what every such
/// runtime describes.
pub(crate) fn jit_sections(
    code: Range<u64>,
    unwind: &JitUnwind,
) -> Result<CfiSections, JitUnwindRefusal> {
    use gimli::{CieOrFde, EhFrame, LittleEndian, UnwindSection};
    let len = unwind.data.len();
    let eh_len = len
        .checked_sub(unwind.hdr_len)
        .ok_or(JitUnwindRefusal::Sizes)?;
    let eh = &unwind.data[..eh_len];
    let hdr = &unwind.data[eh_len..];
    // The first FDE's start, with .eh_frame at address 0.
    let bases0 = framehop_bases(0, eh_len as u64, 0, 0);
    let mut section = EhFrame::new(eh, LittleEndian);
    section.set_address_size(8);
    let mut entries = section.entries(&bases0);
    let mut first = None;
    for _ in 0..64 {
        match entries.next() {
            Ok(Some(CieOrFde::Fde(partial))) => {
                if let Ok(fde) = partial.parse(EhFrame::cie_from_offset) {
                    first = Some(fde.initial_address());
                }
                break;
            }
            Ok(Some(CieOrFde::Cie(_))) => continue,
            _ => break,
        }
    }
    let first = first.ok_or(JitUnwindRefusal::NoFde)?;
    let eh_start = code.start.wrapping_sub(first);
    let hdr_start = eh_start.wrapping_add(eh_len as u64);
    let bases = framehop_bases(eh_start, hdr_start, code.start, 0);
    let hdr_opt = (!hdr.is_empty()).then_some(hdr);
    check_cfi(CfiSection::EhFrame { hdr: hdr_opt }, eh, &bases)
        .map_err(|r| JitUnwindRefusal::Check(r.to_string()))?;
    let data: Data = eh.into();
    // framehop counts addresses from the module's base in 32 bits.
    let base_svma = code.start.min(eh_start);
    let top = code.end.max(hdr_start.saturating_add(hdr.len() as u64));
    if top
        .checked_sub(base_svma)
        .is_none_or(|span| span > u64::from(u32::MAX))
    {
        return Err(JitUnwindRefusal::Sizes);
    }
    Ok(CfiSections {
        base_svma,
        code: code.clone(),
        text_svma: Some(code),
        got_svma: None,
        eh_frame_svma: Some(eh_start..hdr_start),
        eh_frame: Some(data),
        eh_frame_hdr_svma: hdr_opt.map(|h| hdr_start..hdr_start.wrapping_add(h.len() as u64)),
        eh_frame_hdr: hdr_opt.map(Data::from),
        debug_frame: None,
        segments: Vec::new(),
        from_debug_file: false,
    })
}

/// One instruction of an epilogue, by what it does to `rsp` and `rbp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    /// `add rsp, n` / `lea rsp, [rsp+n]`.
    AddSp(u64),
    /// `pop rbp`.
    PopBp,
    /// `pop` of another register.
    Pop,
    /// `leave`.
    Leave,
    /// `mov rsp, rbp`.
    SpFromBp,
    /// `ret` / `ret n`.
    Ret(u16),
}

/// The straight-line code from an address to its `ret`, as what it does
/// to the stack: enough to step a frame that keeps no frame pointer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Epilogue {
    ops: Vec<Op>,
}

impl Epilogue {
    /// Decodes the code at `ip` (`bytes` start there) up to its `ret`;
    /// None when that is not a short straight line of understood
    /// instructions.
    pub(crate) fn decode(bytes: &[u8], ip: u64) -> Option<Epilogue> {
        let bytes = &bytes[..bytes.len().min(EPILOGUE_MAX_BYTES)];
        let mut decoder = Decoder::with_ip(64, bytes, ip, DecoderOptions::NONE);
        let mut ins = Instruction::default();
        let mut ops = Vec::new();
        while ops.len() < EPILOGUE_MAX_INSTRUCTIONS && decoder.can_decode() {
            decoder.decode_out(&mut ins);
            if ins.is_invalid() {
                return None;
            }
            let op = match ins.code() {
                Code::Retnq => Some(Op::Ret(0)),
                Code::Retnq_imm16 => Some(Op::Ret(ins.immediate16())),
                Code::Leaveq => Some(Op::Leave),
                Code::Pop_r64 if ins.op0_register() == Register::RBP => Some(Op::PopBp),
                Code::Pop_r64 => Some(Op::Pop),
                Code::Add_rm64_imm8 | Code::Add_rm64_imm32
                    if ins.op0_kind() == OpKind::Register
                        && ins.op0_register() == Register::RSP =>
                {
                    let n = ins.immediate(1) as i64;
                    Some(Op::AddSp(u64::try_from(n).ok()?))
                }
                Code::Mov_r64_rm64 | Code::Mov_rm64_r64
                    if ins.op0_kind() == OpKind::Register
                        && ins.op0_register() == Register::RSP
                        && ins.op1_kind() == OpKind::Register
                        && ins.op1_register() == Register::RBP =>
                {
                    Some(Op::SpFromBp)
                }
                Code::Lea_r64_m
                    if ins.op0_register() == Register::RSP
                        && ins.memory_base() == Register::RSP
                        && ins.memory_index() == Register::None =>
                {
                    Some(Op::AddSp(
                        u64::try_from(ins.memory_displacement64() as i64).ok()?,
                    ))
                }
                _ => {
                    // Anything else must leave rsp and rbp alone and
                    // not branch.
                    if ins.flow_control() != FlowControl::Next || writes_sp_or_bp(&ins) {
                        return None;
                    }
                    None
                }
            };
            if let Some(op) = op {
                ops.push(op);
                if matches!(op, Op::Ret(_)) {
                    return Some(Epilogue { ops });
                }
            }
        }
        None
    }

    /// Steps `regs` (at the epilogue's first instruction) to the caller:
    /// the return address, with `rsp` and `rbp` as the caller has them.
    pub(crate) fn step(
        &self,
        regs: &mut UnwindRegsX86_64,
        read: &mut impl FnMut(u64) -> Result<u64, ()>,
    ) -> Option<u64> {
        let (mut sp, mut bp) = (regs.sp(), regs.bp());
        for op in &self.ops {
            match *op {
                Op::AddSp(n) => sp = sp.checked_add(n)?,
                Op::PopBp => {
                    bp = read(sp).ok()?;
                    sp = sp.checked_add(8)?;
                }
                Op::Pop => sp = sp.checked_add(8)?,
                Op::Leave => {
                    sp = bp;
                    bp = read(sp).ok()?;
                    sp = sp.checked_add(8)?;
                }
                Op::SpFromBp => sp = bp,
                Op::Ret(n) => {
                    let ra = read(sp).ok()?;
                    sp = sp.checked_add(8)?.checked_add(u64::from(n))?;
                    regs.set_sp(sp);
                    regs.set_bp(bp);
                    regs.set_ip(ra);
                    return Some(ra);
                }
            }
        }
        None
    }
}

/// Whether `ins` writes `rsp` or `rbp` (other than the forms
/// [`Epilogue::decode`] understands).
fn writes_sp_or_bp(ins: &Instruction) -> bool {
    use iced_x86::InstructionInfoFactory;
    // Implicit stack use (push, pop of memory, enter...) too.
    if ins.stack_pointer_increment() != 0 {
        return true;
    }
    let mut factory = InstructionInfoFactory::new();
    let info = factory.info(ins);
    info.used_registers().iter().any(|r| {
        matches!(r.register().full_register(), Register::RSP | Register::RBP)
            && matches!(
                r.access(),
                iced_x86::OpAccess::Write
                    | iced_x86::OpAccess::CondWrite
                    | iced_x86::OpAccess::ReadWrite
                    | iced_x86::OpAccess::ReadCondWrite
            )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Python 3.12's `-X perf` and 3.13's `-X perf_jit` trampoline.
    const TRAMPOLINE: [u8; 11] = [
        0x48, 0x83, 0xec, 0x08, 0xff, 0xd1, 0x48, 0x83, 0xc4, 0x08, 0xc3,
    ];

    fn stack(words: &[u64], sp: u64) -> impl FnMut(u64) -> Result<u64, ()> + '_ {
        move |a| {
            let i = usize::try_from(a.checked_sub(sp).ok_or(())? / 8).map_err(|_| ())?;
            words.get(i).copied().ok_or(())
        }
    }

    #[test]
    fn a_trampoline_without_frame_pointer_steps_to_its_caller() {
        // Returned to just after `call *%rcx`: the `add $8,%rsp; ret` left.
        let e = Epilogue::decode(&TRAMPOLINE[6..], 0x1006).expect("an epilogue");
        let sp = 0x7000;
        let words = [0xdead, 0x5555_1234, 0x9999];
        let mut regs = UnwindRegsX86_64::new(0x1006, sp, 0x8888);
        let ra = e.step(&mut regs, &mut stack(&words, sp));
        assert_eq!(ra, Some(0x5555_1234));
        assert_eq!(regs.sp(), sp + 16);
        assert_eq!(regs.bp(), 0x8888, "rbp untouched");
    }

    #[test]
    fn frame_epilogues_restore_rbp() {
        // mov %rbp,%rsp; pop %rbp; ret
        let code = [0x48, 0x89, 0xec, 0x5d, 0xc3];
        let e = Epilogue::decode(&code, 0).unwrap();
        let bp = 0x7100;
        let words = [0x7200, 0x4444];
        let mut regs = UnwindRegsX86_64::new(0, 0x7000, bp);
        assert_eq!(e.step(&mut regs, &mut stack(&words, bp)), Some(0x4444));
        assert_eq!((regs.sp(), regs.bp()), (bp + 16, 0x7200));
        // leave; ret $16
        let e = Epilogue::decode(&[0xc9, 0xc2, 0x10, 0x00], 0).unwrap();
        let mut regs = UnwindRegsX86_64::new(0, 0x7000, bp);
        assert_eq!(e.step(&mut regs, &mut stack(&words, bp)), Some(0x4444));
        assert_eq!(regs.sp(), bp + 16 + 16);
        // Ordinary instructions that leave the stack alone are passed over.
        // mov %rbx,%rax; add $0x18,%rsp; pop %rbx; ret
        let code = [0x48, 0x89, 0xd8, 0x48, 0x83, 0xc4, 0x18, 0x5b, 0xc3];
        let e = Epilogue::decode(&code, 0).unwrap();
        let words = [0, 0, 0, 0x1, 0x3333];
        let mut regs = UnwindRegsX86_64::new(0, 0x7000, 5);
        assert_eq!(e.step(&mut regs, &mut stack(&words, 0x7000)), Some(0x3333));
        assert_eq!((regs.sp(), regs.bp()), (0x7000 + 40, 5));
    }

    #[test]
    fn branches_calls_and_other_stack_writes_give_up() {
        for code in [
            &[0xff, 0xd1, 0xc3][..],               // call *%rcx
            &[0x74, 0x00, 0xc3],                   // je
            &[0xeb, 0x00, 0xc3],                   // jmp
            &[0x48, 0x83, 0xec, 0x08, 0xc3],       // sub $8,%rsp
            &[0x50, 0xc3],                         // push %rax
            &[0x48, 0x89, 0xc5, 0xc3],             // mov %rax,%rbp
            &[0x48, 0x89, 0xc4, 0xc3],             // mov %rax,%rsp
            &[0x48, 0x83, 0xc4, 0x08],             // no ret in the bytes
            &[0x0f, 0x0b],                         // ud2
            &[0x90; 80],                           // past the bound
            &[0x48, 0x8d, 0x64, 0x24, 0xf8, 0xc3], // lea -8(%rsp),%rsp
        ] {
            assert_eq!(Epilogue::decode(code, 0x1000), None, "{code:x?}");
        }
    }

    #[test]
    fn python_313_unwind_information_places_its_fde_on_the_code() {
        // The .eh_frame and .eh_frame_hdr Python 3.13 writes for each
        // trampoline (from a real jit-PID.dump).
        let data = hex("1400000000000000017a5200017810011b0c070890010000\
             140000001c000000d0ffffff0b00000000440e10460e0800\
             011b033bccffffff01000000c0ffffffe8ffffff");
        let unwind = JitUnwind {
            data: data.into(),
            hdr_len: 20,
        };
        let code = 0x7f00_0000_1000..0x7f00_0000_100b;
        let s = jit_sections(code.clone(), &unwind).expect("accepted");
        assert_eq!(s.eh_frame_svma.as_ref().unwrap().start, code.start + 16);
        assert_eq!(s.covers(code.start + 6), Some(true));
        assert_eq!(s.covers(code.start + 11), Some(false));
        // framehop steps the return address after `call *%rcx`: CFA = rsp+16.
        let u = s.unwinder();
        let mut cache = framehop::x86_64::CacheX86_64::new();
        let sp = 0x7000;
        let words = [0, 0x5555_0000];
        let mut regs = UnwindRegsX86_64::new(code.start + 6, sp, 0x77);
        let ra = framehop::Unwinder::unwind_frame(
            &u,
            framehop::FrameAddress::from_return_address(code.start + 6).unwrap(),
            &mut regs,
            &mut cache,
            &mut stack(&words, sp),
        );
        assert_eq!(ra, Ok(Some(0x5555_0000)));
        assert_eq!(regs.sp(), sp + 16);
        // Garbage is refused, never handed to framehop.
        let junk = JitUnwind {
            data: vec![0xff; 40].into(),
            hdr_len: 8,
        };
        assert!(jit_sections(code.clone(), &junk).is_err());
        let short = JitUnwind {
            data: vec![0; 4].into(),
            hdr_len: 8,
        };
        assert_eq!(
            jit_sections(code, &short).unwrap_err(),
            JitUnwindRefusal::Sizes
        );
    }

    fn hex(s: &str) -> Vec<u8> {
        let s: String = s.split_whitespace().collect();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }
}
