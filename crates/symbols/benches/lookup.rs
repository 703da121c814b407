//! Lookups per second on a large binary: this bench executable itself (criterion, rayon,
//! object, addr2line, std), symbolized through the public API.
//!
//! - `warm/100k_offsets`: `symbolize` of 100,000 distinct file offsets spread over the
//!   executable's text, cache warm (the steady state of a report). Throughput = lookups/s,
//!   each lookup being file offset → vaddr → symbol → result entry.
//! - `warm_debug_info/10k_offsets`: the same with DWARF lines and inlined frames.
//! - `cold/parse_and_lookup`: a fresh symbolizer each time: read + parse the binary, one lookup.
//!
//! Run: `cargo bench -p profkit-symbols --bench lookup`

use std::hint::black_box;
use std::path::PathBuf;

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use profkit_symbols::{BinaryRequest, KallsymsSource, Symbolizer, SymbolizerOptions};

/// This executable and `n` distinct file offsets inside its executable mapping.
fn targets(n: usize) -> (PathBuf, Vec<u64>) {
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
}

criterion_group!(benches, bench);
criterion_main!(benches);
