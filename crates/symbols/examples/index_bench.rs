//! Symbolizing a report's offsets in large binaries without the symbol index, with it
//! cold (the entry built, demangled and written) and warm (the entry read), each time by
//! a new symbolizer, as each report makes its own.
//!
//! ```text
//! cargo run --release -p profkit-symbols --example index_bench -- [--offsets N] [--runs R] [--warm-only] [BINARY...]
//! ```
//!
//! `--warm-only` times the warm runs only (the entry made once first), for a profiler.
//!
//! Default binaries: the largest libLLVM in /usr/lib/x86_64-linux-gnu if there is one, and
//! libc and libstdc++. N offsets (default 2,000) are spread evenly over each binary's
//! executable segment (as samples of a busy library land all over its code). Each
//! figure is the median of R runs (default 7), files in the page cache (one run first).
//! The index lives in a temporary directory.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use object::{Object, ObjectSegment, SegmentFlags};
use profkit_symbols::{
    BinaryRequest, IndexCacheOptions, KallsymsSource, Symbolizer, SymbolizerOptions,
};

fn default_binaries() -> Vec<PathBuf> {
    let dir = Path::new("/usr/lib/x86_64-linux-gnu");
    let mut llvm: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    let n = p
                        .file_name()
                        .unwrap_or_default()
                        .to_string_lossy()
                        .into_owned();
                    n.starts_with("libLLVM") && n.contains(".so") && !p.is_symlink()
                })
                .collect()
        })
        .unwrap_or_default();
    llvm.sort();
    let mut out: Vec<PathBuf> = llvm.pop().into_iter().collect();
    out.extend(
        ["libc.so.6", "libstdc++.so.6"]
            .iter()
            .map(|n| dir.join(n))
            .filter(|p| p.exists()),
    );
    out
}

/// `n` file offsets spread over the executable segment of `bin`.
fn offsets(bin: &Path, n: usize) -> Vec<u64> {
    let data = std::fs::read(bin).expect("readable binary");
    let file = object::File::parse(&*data).expect("an ELF file");
    let (off, len) = file
        .segments()
        .find(|s| matches!(s.flags(), SegmentFlags::Elf { p_flags } if p_flags & 1 != 0))
        .map(|s| s.file_range())
        .expect("an executable segment");
    let step = (len / n as u64).max(1);
    (0..n as u64)
        .map(|i| off + i * step + (i * 7) % step)
        .collect()
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

fn main() {
    let mut args = std::env::args().skip(1);
    let (mut n, mut runs, mut bins, mut warm_only) = (2_000usize, 7usize, Vec::new(), false);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--offsets" => {
                n = args
                    .next()
                    .and_then(|v| v.parse().ok())
                    .expect("--offsets N")
            }
            "--runs" => runs = args.next().and_then(|v| v.parse().ok()).expect("--runs R"),
            "--warm-only" => warm_only = true,
            _ => bins.push(PathBuf::from(a)),
        }
    }
    if bins.is_empty() {
        bins = default_binaries();
    }
    let base = SymbolizerOptions {
        kallsyms: KallsymsSource::None,
        ..SymbolizerOptions::default()
    };
    let tmp = std::env::temp_dir().join(format!("profkit-index-bench-{}", std::process::id()));
    let indexed = |dir: &Path| SymbolizerOptions {
        index_cache: Some(IndexCacheOptions::new(dir)),
        ..base.clone()
    };
    let once = |opts: &SymbolizerOptions, req: &BinaryRequest, offs: &[u64]| {
        let s = Symbolizer::new(opts.clone()).expect("options");
        let t = Instant::now();
        let r = s.symbolize(req, offs);
        (t.elapsed(), r, s.cache_stats())
    };
    println!(
        "{n} offsets per binary, median of {runs} runs, a new symbolizer each run (demangled names)"
    );
    for bin in &bins {
        let offs = offsets(bin, n);
        let req = BinaryRequest::elf(bin);
        let size = std::fs::metadata(bin).map(|m| m.len()).unwrap_or(0);
        // Page cache warm; the answer to compare with.
        let (_, want, _) = once(&base, &req, &offs);
        let timed = if warm_only { 1 } else { runs };
        let plain = median((0..timed).map(|_| once(&base, &req, &offs).0).collect());
        let dir = tmp.join(bin.file_name().unwrap_or_default());
        let cold = median(
            (0..timed)
                .map(|_| {
                    let _ = std::fs::remove_dir_all(&dir);
                    let (t, r, s) = once(&indexed(&dir), &req, &offs);
                    assert_eq!(r, want, "cold index answer differs");
                    assert_eq!(s.index_written, 1, "{s:?}");
                    t
                })
                .collect(),
        );
        let entry: u64 = std::fs::read_dir(&dir)
            .map(|d| {
                d.filter_map(|e| e.ok()?.metadata().ok())
                    .map(|m| m.len())
                    .sum()
            })
            .unwrap_or(0);
        let warm = median(
            (0..runs)
                .map(|_| {
                    let (t, r, s) = once(&indexed(&dir), &req, &offs);
                    assert_eq!(r, want, "warm index answer differs");
                    assert_eq!(s.index_hits, 1, "{s:?}");
                    t
                })
                .collect(),
        );
        println!(
            "{} ({:.1} MB, {} symbols named): no index {}, index cold {}, warm {} ({:.1}x), entry {:.1} MB",
            bin.display(),
            size as f64 / 1e6,
            want.symbols.len(),
            ms(plain),
            ms(cold),
            ms(warm),
            plain.as_secs_f64() / warm.as_secs_f64(),
            entry as f64 / 1e6,
        );
    }
    let _ = std::fs::remove_dir_all(&tmp);
}
