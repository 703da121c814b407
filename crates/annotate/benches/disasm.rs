//! Disassembly with counts of a 4 KiB function, the size of a large hot function.
//!
//! - `annotate/att_4KiB_1000_samples`: [`annotate_instructions`] on 4,096 bytes of a
//!   typical gcc -O2 instruction mix (1,124 instructions) with 1,000 sample
//!   addresses (950 inside, 50 outside), AT&T syntax. Throughput = bytes decoded.
//! - `annotate/intel_4KiB_1000_samples`: the same in Intel syntax.
//! - `read_code/4KiB`: [`read_code`] of 4 KiB of this bench executable's text (headers and
//!   the range, page cache warm).
//!
//! Run: `cargo bench -p profkit-annotate --bench disasm`

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use profkit_annotate::{annotate_instructions, read_code, Bitness, Code, Segments, Syntax};

/// Instructions as gcc -O2 emits them (x86-64), cycled to fill the function.
const MIX: &[&[u8]] = &[
    &[0x55],                                     // push %rbp
    &[0x48, 0x89, 0xe5],                         // mov %rsp,%rbp
    &[0x48, 0x8b, 0x47, 0x08],                   // mov 0x8(%rdi),%rax
    &[0x8b, 0x05, 0x10, 0x2f, 0x00, 0x00],       // mov 0x2f10(%rip),%eax
    &[0x48, 0x8d, 0x3d, 0x20, 0x0e, 0x00, 0x00], // lea 0xe20(%rip),%rdi
    &[0x01, 0xf8],                               // add %edi,%eax
    &[0x48, 0x83, 0xc4, 0x18],                   // add $0x18,%rsp
    &[0x39, 0xd1],                               // cmp %edx,%ecx
    &[0x75, 0xf0],                               // jne .-14
    &[0x0f, 0x8e, 0x40, 0x01, 0x00, 0x00],       // jle .+0x146
    &[0xe8, 0x00, 0x10, 0x00, 0x00],             // call .+0x1005
    &[0xf2, 0x0f, 0x59, 0xc1],                   // mulsd %xmm1,%xmm0
    &[0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00],       // nopw 0x0(%rax,%rax,1)
    &[0x41, 0x8b, 0x44, 0x24, 0x10],             // mov 0x10(%r12),%eax
    &[0xc5, 0xf8, 0x77],                         // vzeroupper
    &[0x5d],                                     // pop %rbp
    &[0xc3],                                     // ret
];

fn function_4k() -> Code {
    let mut bytes = Vec::with_capacity(4096);
    for insn in MIX.iter().cycle() {
        if bytes.len() + insn.len() > 4096 {
            break;
        }
        bytes.extend_from_slice(insn);
    }
    bytes.resize(4096, 0x90);
    Code {
        bytes,
        vaddr: 0x401000,
        bitness: Bitness::Bits64,
    }
}

/// 1,000 (address, count) pairs: 950 spread over the code, 50 past its end.
fn samples(code: &Code) -> Vec<(u64, u64)> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    (0..1000)
        .map(|i| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Every 20th sample lies in the next 4 KiB, past the function's end.
            let past = if i % 20 == 0 { 4096 } else { 0 };
            (code.vaddr + past + x % 4096, 1 + x % 7)
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let code = function_4k();
    let samples = samples(&code);
    let check = annotate_instructions(&code, &samples, Syntax::Att);
    assert_eq!(check.insns.len(), 1124);
    let past_end = samples.iter().filter(|s| s.0 >= code.vaddr + 4096);
    assert_eq!(past_end.clone().count(), 50);
    assert_eq!(check.outside, past_end.map(|s| s.1).sum::<u64>());
    let mut g = c.benchmark_group("annotate");
    g.throughput(Throughput::Bytes(code.bytes.len() as u64));
    for (name, syntax) in [
        ("att_4KiB_1000_samples", Syntax::Att),
        ("intel_4KiB_1000_samples", Syntax::Intel),
    ] {
        g.bench_function(name, |b| {
            b.iter(|| annotate_instructions(black_box(&code), black_box(&samples), syntax))
        });
    }
    g.finish();

    let exe = std::env::current_exe().unwrap();
    let text = *Segments::read(&exe)
        .unwrap()
        .segments()
        .iter()
        .find(|s| s.executable && s.file_size >= 8192)
        .expect("an executable segment of 8 KiB or more");
    let mut g = c.benchmark_group("read_code");
    g.throughput(Throughput::Bytes(4096));
    g.bench_function("4KiB", |b| {
        b.iter(|| read_code(black_box(&exe), text.vaddr + 4096, 4096).unwrap())
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
