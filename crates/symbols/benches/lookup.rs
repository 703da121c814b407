//! Lookups per second on a large binary: this bench executable itself (criterion, rayon,
//! object, addr2line, std), symbolized through the public API.
//!
//! - `warm/100k_offsets`: `symbolize` of 100,000 distinct file offsets spread over the
//!   executable's text, cache warm (the steady state of a report). Throughput = lookups/s,
//!   each lookup being file offset → vaddr → symbol → result entry.
//! - `warm_debug_info/10k_offsets`: the same with DWARF lines and inlined frames.
//! - `cold/parse_and_lookup`: a fresh symbolizer each time: read + parse the binary, one lookup.
//! - `cold_debug_info/one_function`: a fresh symbolizer with DWARF each time, every byte of
//!   one function looked up (what `profreport --annotate=SYMBOL` asks): the binary's DWARF
//!   read as far as that function needs.
//!
//! Run: `cargo bench -p profkit-symbols --bench lookup`. `PROFKIT_BENCH_BINARY=PATH`
//! symbolizes that ELF file instead of the bench executable (so that two builds of the bench
//! can be compared on the same binary).

use std::hint::black_box;
use std::path::PathBuf;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use profkit_symbols::{BinaryRequest, KallsymsSource, Symbolizer, SymbolizerOptions};

/// The binary to symbolize and the file range of its code (offset, length): the file
/// `PROFKIT_BENCH_BINARY` names (its executable PT_LOAD), else this executable (its
/// executable mapping).
fn binary() -> (PathBuf, u64, u64) {
    if let Some(path) = std::env::var_os("PROFKIT_BENCH_BINARY") {
        use object::{Object, ObjectSegment, SegmentFlags};
        let data = std::fs::read(&path).unwrap();
        let file = object::File::parse(&*data).unwrap();
        let (off, len) = file
            .segments()
            .find(|s| matches!(s.flags(), SegmentFlags::Elf { p_flags } if p_flags & 1 != 0))
            .map(|s| s.file_range())
            .expect("an executable segment");
        return (PathBuf::from(path), off, len);
    }
    let exe = std::env::current_exe().unwrap();
    let canon = std::fs::canonicalize(&exe).unwrap();
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let (pgoff, len) = maps
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let path = f.get(5)?;
            if f[1].contains('x') && std::fs::canonicalize(path).ok()? == canon {
                let (s, e) = f[0].split_once('-')?;
                let (s, e) = (
                    u64::from_str_radix(s, 16).ok()?,
                    u64::from_str_radix(e, 16).ok()?,
                );
                Some((u64::from_str_radix(f[2], 16).ok()?, e - s))
            } else {
                None
            }
        })
        .next()
        .expect("executable mapping of the bench binary");
    (exe, pgoff, len)
}

/// The binary and `n` distinct file offsets inside its code.
fn targets(n: usize) -> (PathBuf, Vec<u64>) {
    let (exe, pgoff, len) = binary();
    // A fixed LCG so every run looks up the same offsets.
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut offsets: Vec<u64> = (0..n * 2)
        .map(|_| {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            pgoff + (x >> 11) % len
        })
        .collect();
    offsets.sort_unstable();
    offsets.dedup();
    offsets.truncate(n);
    (exe, offsets)
}

fn options(debug_info: bool) -> SymbolizerOptions {
    SymbolizerOptions {
        debug_info,
        kallsyms: KallsymsSource::None,
        debug_dirs: Vec::new(),
        ..SymbolizerOptions::default()
    }
}

fn bench(c: &mut Criterion) {
    let (exe, offsets) = targets(100_000);
    let request = BinaryRequest::elf(&exe);

    let symbolizer = Symbolizer::new(options(false)).unwrap();
    let warmup = symbolizer.symbolize(&request, &offsets);
    let named = warmup.offsets.iter().filter(|o| o.symbol.is_some()).count();
    eprintln!(
        "{}: {} offsets, {} named, {} distinct symbols hit",
        exe.display(),
        offsets.len(),
        named,
        warmup.symbols.len()
    );
    let mut group = c.benchmark_group("warm");
    group.throughput(Throughput::Elements(offsets.len() as u64));
    group.bench_function("100k_offsets", |b| {
        b.iter(|| black_box(symbolizer.symbolize(&request, black_box(&offsets))))
    });
    group.finish();

    let dbg = Symbolizer::new(options(true)).unwrap();
    let few: Vec<u64> = offsets.iter().copied().step_by(10).collect();
    dbg.symbolize(&request, &few);
    let mut group = c.benchmark_group("warm_debug_info");
    group.throughput(Throughput::Elements(few.len() as u64));
    group.sample_size(10);
    group.bench_function("10k_offsets", |b| {
        b.iter(|| black_box(dbg.symbolize(&request, black_box(&few))))
    });
    group.finish();

    let mut group = c.benchmark_group("cold");
    group.sample_size(10);
    group.bench_function("parse_and_lookup", |b| {
        b.iter_batched(
            || Symbolizer::new(options(false)).unwrap(),
            |s| black_box(s.symbolize(&request, &offsets[..1])),
            BatchSize::PerIteration,
        )
    });
    group.finish();

    // One function: every byte of the function at the middle offset (as its symbol says).
    let mid = warmup
        .offsets
        .iter()
        .skip(offsets.len() / 2)
        .find_map(|o| {
            let id = o.symbol?;
            Some((warmup.symbol(id).file_offset?, id))
        })
        .expect("a named function");
    let info = warmup.symbol(mid.1);
    let function: Vec<u64> = (mid.0..mid.0 + info.size.max(1)).collect();
    eprintln!("one function: {} ({} bytes)", info.name, info.size);
    let mut group = c.benchmark_group("cold_debug_info");
    group.sample_size(10);
    group.throughput(Throughput::Elements(function.len() as u64));
    group.bench_function("one_function", |b| {
        b.iter_batched(
            || Symbolizer::new(options(true)).unwrap(),
            |s| black_box(s.symbolize(&request, &function)),
            BatchSize::PerIteration,
        )
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
