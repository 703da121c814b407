//! Real binaries built by the system C compiler, disassembled by [`read_code`] +
//! [`annotate_instructions`] and by `objdump -d --no-show-raw-insn`: every sized function
//! must agree instruction by instruction (address, mnemonic with its prefixes, operands,
//! branch targets). Skipped, with the reason printed, when `cc`, `nm` or `objdump` is
//! missing, when objdump predates binutils 2.37 (it wrote `callq`/`retq`), or, for i386,
//! when the compiler cannot build 32-bit code.

use std::path::{Path, PathBuf};
use std::process::Command;

use object::{Object, ObjectSection, ObjectSymbol};
use profkit_annotate::{
    annotate_instructions, file_offset_to_vaddr, read_code, Bitness, Flow, Insn, Segments, Syntax,
};

const PROGRAM: &str = include_str!("program.c");
const FREESTANDING: &str = include_str!("freestanding.c");

/// Runs a tool; `None` (with the reason printed) when it cannot be run or fails.
fn run(tool: &str, args: &[&str]) -> Option<String> {
    match Command::new(tool).args(args).output() {
        Ok(o) if o.status.success() => Some(String::from_utf8_lossy(&o.stdout).into_owned()),
        Ok(o) => {
            eprintln!(
                "skipped: {tool} {args:?} failed: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            None
        }
        Err(e) => {
            eprintln!("skipped: cannot run {tool}: {e}");
            None
        }
    }
}

/// True if objdump is binutils 2.37 or later (earlier ones write `callq`, `retq`).
fn objdump_is_recent() -> bool {
    let Some(v) = run("objdump", &["--version"]) else {
        return false;
    };
    let first = v.lines().next().unwrap_or_default();
    let version: Vec<u32> = first
        .rsplit(' ')
        .next()
        .unwrap_or_default()
        .split('.')
        .map_while(|p| p.parse().ok())
        .collect();
    let recent = version.len() >= 2 && (version[0], version[1]) >= (2, 37);
    if !recent {
        eprintln!("skipped: {first:?} is older than binutils 2.37");
    }
    recent
}

/// Compiles `source` with `cc -O2 flags…` into `dir/name`; `None` if that fails.
fn build(dir: &Path, name: &str, source: &str, flags: &[&str]) -> Option<PathBuf> {
    if !objdump_is_recent() {
        return None;
    }
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, source).unwrap();
    let out = dir.join(name);
    let mut args = vec!["-O2", "-o", out.to_str().unwrap(), src.to_str().unwrap()];
    args.extend_from_slice(flags);
    run("cc", &args)?;
    Some(out)
}

/// Sized text symbols from `nm -S`: (name, vaddr, size).
fn functions(bin: &Path) -> Option<Vec<(String, u64, u64)>> {
    let out = run("nm", &["-S", bin.to_str().unwrap()])?;
    Some(
        out.lines()
            .filter_map(|l| match l.split_whitespace().collect::<Vec<_>>()[..] {
                [addr, size, "T" | "t", name] => Some((
                    name.to_owned(),
                    u64::from_str_radix(addr, 16).ok()?,
                    u64::from_str_radix(size, 16).ok()?,
                )),
                _ => None,
            })
            .filter(|f| f.2 > 0)
            .collect(),
    )
}

/// `objdump -d` of `start..start+size`: (address, text) per instruction, comments cut.
fn objdump(bin: &Path, start: u64, size: u64) -> Option<Vec<(u64, String)>> {
    let out = run(
        "objdump",
        &[
            "-d",
            "-w",
            "--no-show-raw-insn",
            &format!("--start-address={start:#x}"),
            &format!("--stop-address={:#x}", start + size),
            bin.to_str().unwrap(),
        ],
    )?;
    Some(
        out.lines()
            .filter_map(|l| {
                let (addr, text) = l.split_once(":\t")?;
                let text = text.split(" #").next().unwrap_or(text).trim();
                Some((u64::from_str_radix(addr.trim(), 16).ok()?, text.to_owned()))
            })
            .collect(),
    )
}

/// The prefix words and mnemonic of an instruction's text, and the rest (operands).
fn split(text: &str) -> (String, String) {
    const PREFIXES: &[&str] = &[
        "rep", "repz", "repnz", "lock", "notrack", "bnd", "data16", "addr32", "cs", "ds", "es",
        "ss", "fs", "gs", "rex", "rex.W", "xacquire", "xrelease",
    ];
    let mut words = text.split_whitespace();
    let mut mnemonic = Vec::new();
    for w in words.by_ref() {
        mnemonic.push(w);
        if !PREFIXES.contains(&w) {
            break;
        }
    }
    (mnemonic.join(" "), words.collect::<Vec<_>>().join(" "))
}

/// Checks every sized function of `bin` against objdump; returns the functions checked
/// and their instructions, or `None` if a tool was missing.
fn compare(bin: &Path, bitness: Bitness) -> Option<Vec<(String, u64, Vec<Insn>)>> {
    let mut checked = Vec::new();
    for (name, start, size) in functions(bin)? {
        let theirs = objdump(bin, start, size)?;
        let code = read_code(bin, start, size).unwrap();
        assert_eq!((code.bitness, code.bytes.len() as u64), (bitness, size));
        let ours = annotate_instructions(&code, &[], Syntax::Att).insns;
        let ours_text: Vec<String> = ours
            .iter()
            .map(|i| format!("{:x}: {}", i.addr, i.text))
            .collect();
        let theirs_text: Vec<String> = theirs.iter().map(|(a, t)| format!("{a:x}: {t}")).collect();
        let context = || {
            format!(
                "{name} in {}:\nours:\n{}\nobjdump:\n{}",
                bin.display(),
                ours_text.join("\n"),
                theirs_text.join("\n")
            )
        };
        assert_eq!(
            ours.len(),
            theirs.len(),
            "instruction count of {}",
            context()
        );
        for (o, (addr, text)) in ours.iter().zip(&theirs) {
            assert_eq!(o.addr, *addr, "address in {}", context());
            // Our comment (`  # 0x4010`) names the address objdump's (`# 4010 <x>`) does.
            let without_comment = o.text.split("  # ").next().unwrap_or_default();
            let ((om, ours_ops), (tm, tops)) = (split(without_comment), split(text));
            assert_eq!(om, tm, "mnemonic at {addr:#x} in {}", context());
            match o.target {
                // objdump: `1356 <classify+0x86>`; ours: `0x1356`.
                Some(t) => {
                    let theirs_target = tops
                        .split(' ')
                        .next()
                        .and_then(|h| u64::from_str_radix(h, 16).ok());
                    assert_eq!(
                        Some(t),
                        theirs_target,
                        "target at {addr:#x} in {}",
                        context()
                    );
                    assert_eq!(ours_ops, format!("{t:#x}"), "at {addr:#x} in {}", context());
                    let inside = t >= start && t < start + size;
                    assert_eq!(
                        o.local_target,
                        inside,
                        "local_target at {addr:#x} in {}",
                        context()
                    );
                }
                None => assert_eq!(ours_ops, tops, "operands at {addr:#x} in {}", context()),
            }
        }
        checked.push((name, start, ours));
    }
    Some(checked)
}

fn find<'a>(checked: &'a [(String, u64, Vec<Insn>)], name: &str) -> &'a (String, u64, Vec<Insn>) {
    checked.iter().find(|f| f.0 == name).unwrap_or_else(|| {
        panic!(
            "no function {name} among {:?}",
            checked.iter().map(|f| &f.0).collect::<Vec<_>>()
        )
    })
}

#[test]
fn every_function_of_a_pie_c_program_disassembles_as_objdump_does() {
    let dir = tempfile::tempdir().unwrap();
    let Some(bin) = build(dir.path(), "pie", PROGRAM, &["-fpie", "-pie"]) else {
        return;
    };
    let Some(checked) = compare(&bin, Bitness::Bits64) else {
        return;
    };
    assert!(checked.len() >= 10, "{} functions checked", checked.len());
    // The switch is a jump through a table; fib calls itself (a local target) and loops.
    let (_, _, classify) = find(&checked, "classify");
    assert!(classify.iter().any(|i| i.flow == Flow::IndirectJump));
    let (_, fib_start, fib) = find(&checked, "fib");
    assert!(fib
        .iter()
        .any(|i| i.flow == Flow::Call && i.target == Some(*fib_start) && i.local_target));
    assert!(fib
        .iter()
        .any(|i| i.flow == Flow::ConditionalJump && i.local_target));
    // Calls into the PLT leave the function.
    let (_, _, cmpstr) = find(&checked, "cmpstr");
    assert!(cmpstr
        .iter()
        .any(|i| i.flow == Flow::Call && !i.local_target));
    let (_, _, zero) = find(&checked, "zero");
    assert!(
        zero.iter().any(|i| i.text.starts_with("rep stos")),
        "{zero:?}"
    );
}

#[test]
fn a_non_pie_program_with_cet_disassembles_as_objdump_does() {
    let dir = tempfile::tempdir().unwrap();
    let flags = ["-fno-pie", "-no-pie", "-fcf-protection=full"];
    let Some(bin) = build(dir.path(), "nopie", PROGRAM, &flags) else {
        return;
    };
    let Some(checked) = compare(&bin, Bitness::Bits64) else {
        return;
    };
    let (_, _, main) = find(&checked, "main");
    assert_eq!(main[0].text, "endbr64");
}

#[test]
fn i386_functions_disassemble_as_objdump_does() {
    let dir = tempfile::tempdir().unwrap();
    let flags = ["-m32", "-nostdlib", "-static", "-fno-pie", "-no-pie"];
    let Some(bin) = build(dir.path(), "i386", FREESTANDING, &flags) else {
        return;
    };
    let Some(checked) = compare(&bin, Bitness::Bits32) else {
        return;
    };
    assert!(checked.len() >= 4, "{} functions checked", checked.len());
    let (_, _, fib) = find(&checked, "fib");
    assert!(fib.iter().any(|i| i.text.starts_with("adc")), "{fib:?}");
}

/// Sessions store samples as file offsets: map them through the PT_LOAD headers and they
/// must land on the instructions at the addresses the symbol table gives, in a PIE
/// (offset == address in the first segments) and a non-PIE (0x400000 apart).
#[test]
fn sampled_file_offsets_map_to_the_instructions_of_pie_and_non_pie_binaries() {
    let dir = tempfile::tempdir().unwrap();
    for (name, flags) in [
        ("pie", &["-fpie", "-pie"][..]),
        ("nopie", &["-fno-pie", "-no-pie"][..]),
    ] {
        let Some(bin) = build(dir.path(), name, PROGRAM, flags) else {
            return;
        };
        let data = std::fs::read(&bin).unwrap();
        let obj = object::File::parse(&data[..]).unwrap();
        let sym = obj
            .symbols()
            .find(|s| s.name() == Ok("dot"))
            .expect("dot in the symbol table");
        let sec = obj.section_by_index(sym.section_index().unwrap()).unwrap();
        let offset = sec.file_range().unwrap().0 + (sym.address() - sec.address());
        if name == "nopie" {
            assert!(
                sym.address() >= 0x400000 && offset < 0x400000,
                "{name}: {:#x} at {offset:#x}",
                sym.address()
            );
        }
        assert_eq!(
            file_offset_to_vaddr(&bin, offset).unwrap(),
            sym.address(),
            "{name}"
        );

        let code = read_code(&bin, sym.address(), sym.size()).unwrap();
        let insns = annotate_instructions(&code, &[], Syntax::Att).insns;
        // One sample on each instruction's last byte, by file offset; two outside.
        let segments = Segments::read(&bin).unwrap();
        let mut offsets: Vec<u64> = insns
            .iter()
            .map(|i| offset + (i.addr - sym.address()) + u64::from(i.len) - 1)
            .collect();
        offsets.push(offset + sym.size());
        offsets.push(offset - 1);
        let samples: Vec<(u64, u64)> = offsets
            .iter()
            .map(|&o| (segments.to_vaddr(o).unwrap(), 1))
            .collect();
        let listing = annotate_instructions(&code, &samples, Syntax::Att);
        assert!(
            listing.insns.iter().all(|i| i.samples == 1),
            "{name}: {listing:?}"
        );
        assert_eq!(listing.outside, 2, "{name}");
    }
}
