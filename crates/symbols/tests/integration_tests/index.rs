//! The symbol index (issue 32): a binary's whole function table written once to a cache
//! directory, read by later symbolizers of the same file. Every answer is compared with
//! the answer without an index (the same `BinaryResult`, field for field) on real
//! binaries: this machine's libc, libstdc++ and libLLVM, a Rust program built here, the
//! test executable, a stripped binary with its debug file; then the entry is damaged,
//! given away, made a link, forged, evicted, and its directory refused or read-only.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Command;

use profkit_symbols::{
    BinaryRequest, BinaryResult, CacheStats, IndexCacheOptions, SymbolRun, Symbolizer,
    SymbolizerOptions,
};

use crate::elf::{split, Fixture};
use crate::util::*;

const LIBC: &str = "/usr/lib/x86_64-linux-gnu/libc.so.6";
const NOBODY: u32 = 65534;

/// Options with the index in `dir` (and `max_bytes`).
fn with_index(base: &SymbolizerOptions, dir: &Path, max_bytes: u64) -> SymbolizerOptions {
    SymbolizerOptions {
        index_cache: Some(IndexCacheOptions {
            dir: dir.to_owned(),
            max_bytes,
            defer_builds: false,
        }),
        ..base.clone()
    }
}

/// Symbolizes `reqs` with a fresh symbolizer; its results and stats.
fn run_once(
    opts: &SymbolizerOptions,
    reqs: &[(BinaryRequest, Vec<u64>)],
) -> (Vec<BinaryResult>, CacheStats) {
    let s = Symbolizer::new(opts.clone()).unwrap();
    let r = s.symbolize_all(reqs.to_vec());
    (r, s.cache_stats())
}

/// File offsets worth asking in `bin`: for every symbol `nm` lists (both tables) its
/// first byte, its last, one past it and its middle, and one offset in 97 of every
/// PT_LOAD (code, data, and gaps), at most `cap` of those.
fn offsets(bin: &Path, cap: usize) -> Vec<u64> {
    let loads = loads(bin);
    let to_off = |v: u64| {
        loads
            .iter()
            .find(|&&(_, lv, size)| v >= lv && v < lv + size)
            .map(|&(off, lv, _)| off + (v - lv))
    };
    let mut out = Vec::new();
    for dynamic in [false, true] {
        let syms = Command::new("nm")
            .args(["-S", "--defined-only"])
            .args(dynamic.then_some("-D"))
            .arg(bin)
            .output()
            .unwrap();
        for l in String::from_utf8_lossy(&syms.stdout).lines() {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() != 4 {
                continue;
            }
            let (Ok(v), Ok(size)) = (u64::from_str_radix(f[0], 16), u64::from_str_radix(f[1], 16))
            else {
                continue;
            };
            for a in [v, v + size.saturating_sub(1), v + size, v + size / 2] {
                out.extend(to_off(a));
            }
        }
    }
    let mut spread: Vec<u64> = loads
        .iter()
        .flat_map(|&(off, _, size)| (off..off + size).step_by(97))
        .collect();
    let step = spread.len().div_ceil(cap).max(1);
    out.extend(spread.drain(..).step_by(step));
    out
}

/// Entries (`*.idx`) in `dir`.
fn entries(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "idx"))
        .collect();
    v.sort();
    v
}

/// Everything in `dir` that is not an entry (temporaries left behind).
fn others(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            n.starts_with('.') || !n.ends_with(".idx")
        })
        .collect()
}

/// The one entry of `dir`.
fn only_entry(dir: &Path) -> PathBuf {
    let e = entries(dir);
    assert_eq!(e.len(), 1, "{e:?}");
    e.into_iter().next().unwrap()
}

/// Asserts `reqs` give `want` with a fresh symbolizer of `opts`; returns its stats.
fn same(
    want: &[BinaryResult],
    opts: &SymbolizerOptions,
    reqs: &[(BinaryRequest, Vec<u64>)],
    what: &str,
) -> CacheStats {
    let (got, stats) = run_once(opts, reqs);
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(want) {
        assert_eq!(g.warnings, w.warnings, "{what}");
        assert_eq!(g.no_symbols, w.no_symbols, "{what}");
        assert_eq!(g.path_used, w.path_used, "{what}");
        assert_eq!(g.debug_file_used, w.debug_file_used, "{what}");
        assert_eq!(g.symbols.len(), w.symbols.len(), "{what}");
        for (k, (a, b)) in g.offsets.iter().zip(&w.offsets).enumerate() {
            assert_eq!(a, b, "{what}: offset #{k} {:#x}", b.offset);
            if let Some(id) = a.symbol {
                assert_eq!(g.symbol(id), w.symbol(id), "{what}: offset {:#x}", b.offset);
            }
        }
        assert_eq!(g, w, "{what}");
    }
    // The answer as runs: the same, the offsets' symbols folded.
    let s = Symbolizer::new(opts.clone()).unwrap();
    for ((req, offsets), w) in reqs.iter().zip(want) {
        let (result, runs) = s.symbolize_runs(req, offsets);
        let mut expected: Vec<SymbolRun> = Vec::new();
        for o in &w.offsets {
            match expected.last_mut() {
                Some(r) if r.symbol == o.symbol => r.last = o.offset,
                _ => expected.push(SymbolRun {
                    first: o.offset,
                    last: o.offset,
                    symbol: o.symbol,
                }),
            }
        }
        assert_eq!(runs, expected, "{what} (runs)");
        assert!(runs.len() < offsets.len(), "{what}: {} runs", runs.len());
        assert_eq!(
            result,
            BinaryResult {
                offsets: Vec::new(),
                ..w.clone()
            },
            "{what} (runs)"
        );
    }
    stats
}

/// Cold (entry written) then warm (entry read, nothing parsed, nothing written): both
/// answer as without the index. Returns (cold, warm) stats.
fn cold_then_warm(
    base: &SymbolizerOptions,
    dir: &Path,
    reqs: &[(BinaryRequest, Vec<u64>)],
    what: &str,
) -> (CacheStats, CacheStats) {
    let (want, _) = run_once(base, reqs);
    let opts = with_index(base, dir, IndexCacheOptions::DEFAULT_MAX_BYTES);
    let cold = same(&want, &opts, reqs, &format!("{what} (cold)"));
    assert_eq!(cold.index_written, reqs.len(), "{what}: {cold:?}");
    assert_eq!(cold.index_hits, 0, "{what}: {cold:?}");
    let warm = same(&want, &opts, reqs, &format!("{what} (warm)"));
    assert_eq!(warm.index_hits, reqs.len(), "{what}: {warm:?}");
    assert_eq!(warm.index_written, 0, "{what}: {warm:?}");
    assert_eq!(warm.index_rejected, 0, "{what}: {warm:?}");
    if !base.debug_info {
        // (With DWARF, its headers are read once per symbolizer, as before.)
        assert_eq!(warm.binaries_parsed, 0, "{what}: {warm:?}");
    }
    assert!(others(dir).is_empty(), "{:?}", others(dir));
    (cold, warm)
}

fn one_req(bin: &Path, cap: usize) -> Vec<(BinaryRequest, Vec<u64>)> {
    vec![(BinaryRequest::elf(bin), offsets(bin, cap))]
}

/// The largest C++ library here: libLLVM if installed, else libstdc++.
fn large_cpp_library() -> Option<PathBuf> {
    let dir = Path::new("/usr/lib/x86_64-linux-gnu");
    let mut llvm: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy().into_owned();
            n.starts_with("libLLVM") && n.contains(".so") && !p.is_symlink()
        })
        .collect();
    llvm.sort();
    llvm.pop()
        .or_else(|| Some(dir.join("libstdc++.so.6")).filter(|p| p.exists()))
}

#[test]
fn index_answers_as_without_it_on_system_libraries() {
    let d = tempfile::tempdir().unwrap();
    let mut libs = vec![PathBuf::from(LIBC)];
    libs.extend(
        [
            "/usr/lib/x86_64-linux-gnu/libstdc++.so.6",
            "/lib64/ld-linux-x86-64.so.2",
        ]
        .map(PathBuf::from)
        .into_iter()
        .filter(|p| p.exists()),
    );
    libs.extend(large_cpp_library());
    libs.dedup();
    for lib in &libs {
        let reqs = one_req(lib, 100_000);
        let dir = d.path().join(lib.file_name().unwrap());
        cold_then_warm(&isolated(), &dir, &reqs, &lib.display().to_string());
        // Raw names too, in a directory of its own.
        let raw = SymbolizerOptions {
            demangle: false,
            ..isolated()
        };
        let dir = d.path().join(format!(
            "raw-{}",
            lib.file_name().unwrap().to_string_lossy()
        ));
        cold_then_warm(&raw, &dir, &reqs, &format!("{} raw", lib.display()));
    }
}

#[test]
fn index_answers_as_without_it_on_rust_binaries() {
    let d = tempfile::tempdir().unwrap();
    // This test executable: thousands of Rust functions in a .symtab.
    let exe = std::env::current_exe().unwrap();
    cold_then_warm(
        &isolated(),
        &d.path().join("exe"),
        &one_req(&exe, 100_000),
        "exe",
    );
    // A Rust program built here, legacy and v0 mangling.
    let src = write(
        d.path(),
        "prog.rs",
        r#"
#[inline(never)]
pub fn generic<T: std::fmt::Debug>(x: T) -> String { format!("{x:?}") }
#[inline(never)]
fn hot(x: u64) -> u64 { std::hint::black_box(x).wrapping_mul(31) }
fn main() {
    println!("{} {} {}", hot(3), generic(1u8), generic("s"));
}
"#,
    );
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    for (name, extra) in [
        ("legacy", None),
        ("v0", Some("-Csymbol-mangling-version=v0")),
    ] {
        let bin = d.path().join(name);
        let mut cmd = Command::new(&rustc);
        cmd.args(["--edition=2021", "-O", "-g", "-o"])
            .arg(&bin)
            .arg(&src);
        if let Some(e) = extra {
            // v0 is stable on recent toolchains; on older ones it needs -Z.
            cmd.arg(e);
        }
        if !cmd.status().unwrap().success() {
            assert!(extra.is_some(), "rustc failed");
            eprintln!("SKIP: rustc does not take {extra:?}");
            continue;
        }
        let reqs = one_req(&bin, 50_000);
        cold_then_warm(
            &isolated(),
            &d.path().join(format!("ix-{name}")),
            &reqs,
            name,
        );
        // With DWARF too: the table part comes from the index, lines as before.
        let dbg = SymbolizerOptions {
            debug_info: true,
            ..isolated()
        };
        let few: Vec<(BinaryRequest, Vec<u64>)> = reqs
            .iter()
            .map(|(r, o)| (r.clone(), o.iter().step_by(37).copied().collect()))
            .collect();
        cold_then_warm(&dbg, &d.path().join(format!("dbg-{name}")), &few, name);
    }
}

#[test]
fn index_answers_as_without_it_for_a_stripped_binary_and_its_debug_file() {
    let f = Fixture::new();
    let (full, stripped, debug) = split(&f, "ixs", &["-O1", "-g"]);
    let id = build_id(&stripped);
    // The debug file where debug dirs find it by build-id.
    let dd = f.dir.join("debugdir");
    let h: String = id.iter().map(|b| format!("{b:02x}")).collect();
    let at = dd
        .join(".build-id")
        .join(&h[..2])
        .join(format!("{}.debug", &h[2..]));
    std::fs::create_dir_all(at.parent().unwrap()).unwrap();
    std::fs::copy(&debug, &at).unwrap();
    let base = SymbolizerOptions {
        debug_dirs: vec![dd.clone()],
        ..isolated()
    };
    // Offsets from the unstripped binary's symbols (the same layout).
    let reqs = vec![(BinaryRequest::elf(&stripped), offsets(&full, 10_000))];
    let dir = f.dir.join("ix");
    let (want, _) = run_once(&base, &reqs);
    assert_eq!(want[0].debug_file_used.as_deref(), Some(at.as_path()));
    assert!(want[0].symbols.iter().any(|s| s.name == "alpha"));
    cold_then_warm(&base, &dir, &reqs, "stripped, debug file by build-id");
    let dbg = SymbolizerOptions {
        debug_info: true,
        ..base.clone()
    };
    let few = vec![(
        reqs[0].0.clone(),
        reqs[0].1.iter().step_by(7).copied().collect(),
    )];
    cold_then_warm(&dbg, &f.dir.join("ix-dbg"), &few, "stripped, --debug-info");
    let opts = with_index(&base, &dir, IndexCacheOptions::DEFAULT_MAX_BYTES);

    // Another debug file there now (a copy: another inode): the entry is not used.
    std::fs::remove_file(&at).unwrap();
    std::fs::copy(&debug, &at).unwrap();
    let (want, _) = run_once(&base, &reqs);
    let s = same(&want, &opts, &reqs, "debug file replaced");
    assert_eq!(
        (s.index_rejected, s.index_written, s.index_hits),
        (1, 1, 0),
        "{s:?}"
    );
    let s = same(&want, &opts, &reqs, "debug file replaced, warm");
    assert_eq!(s.index_hits, 1, "{s:?}");

    // No debug file any more: the note on stripped binaries, as without the index.
    std::fs::remove_file(&at).unwrap();
    let (want, _) = run_once(&base, &reqs);
    assert!(want[0].no_symbols.is_some());
    let s = same(&want, &opts, &reqs, "debug file gone");
    assert_eq!((s.index_rejected, s.index_written), (1, 1), "{s:?}");
    let s = same(&want, &opts, &reqs, "debug file gone, warm");
    assert_eq!(s.index_hits, 1, "{s:?}");

    // Found by debuglink (no build-id), beside the binary.
    let (lfull, linked, ldebug) = split(&f, "ixl", &["-O1", "-g", "-Wl,--build-id=none"]);
    run(Command::new("objcopy")
        .arg(format!("--add-gnu-debuglink={}", ldebug.display()))
        .arg(&linked));
    let reqs = vec![(BinaryRequest::elf(&linked), offsets(&lfull, 10_000))];
    let (want, _) = run_once(&isolated(), &reqs);
    assert_eq!(want[0].debug_file_used.as_deref(), Some(ldebug.as_path()));
    cold_then_warm(
        &isolated(),
        &f.dir.join("ix-link"),
        &reqs,
        "stripped, debuglink",
    );
}

#[test]
fn one_raw_entry_serves_demangled_and_raw_reports() {
    let d = tempfile::tempdir().unwrap();
    let lib = Path::new("/usr/lib/x86_64-linux-gnu/libstdc++.so.6");
    let lib = if lib.exists() { lib } else { Path::new(LIBC) };
    let reqs = one_req(lib, 20_000);
    let raw = SymbolizerOptions {
        demangle: false,
        ..isolated()
    };
    let (want_raw, _) = run_once(&raw, &reqs);
    let (want, _) = run_once(&isolated(), &reqs);
    let dir = d.path().join("ix");
    let s = same(
        &want_raw,
        &with_index(&raw, &dir, 1 << 30),
        &reqs,
        "raw, cold",
    );
    assert_eq!(s.index_written, 1);
    // Entries hold raw names: demangled names wanted are the hits',
    // demangled when shown, from the same entry.
    let s = same(
        &want,
        &with_index(&isolated(), &dir, 1 << 30),
        &reqs,
        "demangled from a raw entry",
    );
    assert_eq!(
        (s.index_hits, s.index_rejected, s.index_written),
        (1, 0, 0),
        "{s:?}"
    );
    // One entry serves both.
    let s = same(
        &want,
        &with_index(&isolated(), &dir, 1 << 30),
        &reqs,
        "warm",
    );
    assert_eq!(s.index_hits, 1, "{s:?}");
    let s = same(
        &want_raw,
        &with_index(&raw, &dir, 1 << 30),
        &reqs,
        "raw, warm",
    );
    assert_eq!(s.index_hits, 1, "{s:?}");
    assert_eq!(entries(&dir).len(), 1);
}

/// An entry built by a demangling report holds the demangled names (shown
/// as stored by the next one) and serves a report without demangling too.
#[test]
fn one_demangled_entry_serves_demangled_and_raw_reports() {
    let d = tempfile::tempdir().unwrap();
    let lib = large_cpp_library().unwrap_or_else(|| PathBuf::from(LIBC));
    let reqs = one_req(&lib, 20_000);
    let raw = SymbolizerOptions {
        demangle: false,
        ..isolated()
    };
    let (want_raw, _) = run_once(&raw, &reqs);
    let (want, _) = run_once(&isolated(), &reqs);
    assert_ne!(want, want_raw, "{}: nothing to demangle", lib.display());
    let dir = d.path().join("ix");
    let (cold, _) = cold_then_warm(&isolated(), &dir, &reqs, "demangled");
    assert_eq!(cold.index_written, 1);
    let s = same(&want_raw, &with_index(&raw, &dir, 1 << 30), &reqs, "raw");
    assert_eq!(
        (s.index_hits, s.index_rejected, s.index_written),
        (1, 0, 0),
        "{s:?}"
    );
}

/// With `defer_builds` a miss is answered by range, as without the index:
/// nothing written, counted for a builder; the builder's run (not
/// deferring) writes the entry the next report reads.
#[test]
fn a_deferred_miss_answers_without_writing_and_counts() {
    let d = tempfile::tempdir().unwrap();
    let reqs = one_req(Path::new(LIBC), 5_000);
    let (want, _) = run_once(&isolated(), &reqs);
    let dir = d.path().join("ix");
    let mut deferred = with_index(&isolated(), &dir, 1 << 30);
    if let Some(c) = deferred.index_cache.as_mut() {
        c.defer_builds = true;
    }
    let before = profkit_symbols::builds_deferred();
    let s = same(&want, &deferred, &reqs, "deferred");
    assert_eq!((s.index_written, s.index_hits), (0, 0), "{s:?}");
    assert!(entries(&dir).is_empty());
    assert!(profkit_symbols::builds_deferred() > before);
    // The builder: not deferring, one at a time.
    let lock = profkit_symbols::builder_lock(deferred.index_cache.as_ref().unwrap(), false)
        .expect("the builder lock");
    assert!(
        profkit_symbols::builder_lock(deferred.index_cache.as_ref().unwrap(), false).is_none(),
        "a second builder took the lock"
    );
    let s = same(
        &want,
        &with_index(&isolated(), &dir, 1 << 30),
        &reqs,
        "builder",
    );
    assert_eq!(s.index_written, 1, "{s:?}");
    drop(lock);
    let s = same(&want, &deferred, &reqs, "after the builder");
    assert_eq!((s.index_hits, s.index_written), (1, 0), "{s:?}");
}

/// The builder lock is a regular file of ours in the directory: a link
/// planted in its place (its target left alone) or a FIFO is not taken, so
/// no builder runs there; a directory not used has no builder either.
#[test]
fn the_builder_lock_is_a_regular_file_of_ours_or_not_taken() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().join("ix");
    let opts = IndexCacheOptions::new(&dir);
    let lock = profkit_symbols::builder_lock(&opts, false).expect("the lock");
    drop(lock);
    let path = dir.join(".build.lock");
    assert!(std::fs::symlink_metadata(&path).unwrap().is_file());
    // A link to a file elsewhere.
    std::fs::remove_file(&path).unwrap();
    let target = d.path().join("target");
    std::fs::write(&target, b"keep").unwrap();
    std::os::unix::fs::symlink(&target, &path).unwrap();
    assert!(profkit_symbols::builder_lock(&opts, false).is_none());
    assert!(profkit_symbols::builder_lock(&opts, true).is_none());
    assert_eq!(std::fs::read(&target).unwrap(), b"keep");
    // A FIFO (opened without blocking, then refused).
    std::fs::remove_file(&path).unwrap();
    assert!(Command::new("mkfifo")
        .arg(&path)
        .status()
        .unwrap()
        .success());
    assert!(profkit_symbols::builder_lock(&opts, true).is_none());
    // A directory others can write to: not used, no lock.
    std::fs::remove_file(&path).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    assert!(profkit_symbols::builder_lock(&opts, false).is_none());
}

/// A small C program's requests, its no-index answers, and a directory with its entry.
struct Small {
    _f: Fixture,
    dir: PathBuf,
    reqs: Vec<(BinaryRequest, Vec<u64>)>,
    want: Vec<BinaryResult>,
}

impl Small {
    fn new() -> Small {
        let f = Fixture::new();
        let bin = f.build("small", &["-O1"]);
        let reqs = one_req(&bin, 5_000);
        let dir = f.dir.join("ix");
        let (want, _) = run_once(&isolated(), &reqs);
        cold_then_warm(&isolated(), &dir, &reqs, "small");
        Small {
            _f: f,
            dir,
            reqs,
            want,
        }
    }

    fn opts(&self) -> SymbolizerOptions {
        with_index(&isolated(), &self.dir, 1 << 30)
    }

    /// The entry damaged by `damage` is rejected and rebuilt (same answers), then used.
    fn rejected_then_rebuilt(&self, what: &str) {
        let s = same(&self.want, &self.opts(), &self.reqs, what);
        assert_eq!(
            (s.index_rejected, s.index_written, s.index_hits),
            (1, 1, 0),
            "{what}: {s:?}"
        );
        let e = only_entry(&self.dir);
        let m = std::fs::symlink_metadata(&e).unwrap();
        assert!(m.is_file());
        assert_eq!(m.uid(), rustix_euid());
        assert_eq!(m.mode() & 0o777, 0o600, "{what}");
        let s = same(&self.want, &self.opts(), &self.reqs, what);
        assert_eq!(s.index_hits, 1, "{what}: {s:?}");
    }
}

fn rustix_euid() -> u32 {
    // The tests' own uid (they do not change it).
    std::fs::metadata("/proc/self").unwrap().uid()
}

/// The length of the head of the entry `bytes` (112 bytes, the build-id padded to 8,
/// then 33 bytes a symbol, padded to 8), where its CRC is.
fn head_of(bytes: &[u8]) -> usize {
    let u32_at = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
    let (id, n) = (u32_at(96), u32_at(100));
    112 + id.next_multiple_of(8) + 32 * n + n.next_multiple_of(8)
}

/// Replaces the CRC of the head (of length `head`) by the right one for its bytes (so
/// that only the damage done is wrong).
fn fix_checksum(bytes: &mut [u8], head: usize) {
    let crc = crc32(&bytes[..head]);
    bytes[head..head + 4].copy_from_slice(&crc.to_le_bytes());
}

/// CRC-32 (IEEE), bit by bit: the tests' own, not the crate's.
fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

#[test]
fn damaged_entries_are_rejected_and_rebuilt() {
    let s = Small::new();
    let e = only_entry(&s.dir);
    let good = std::fs::read(&e).unwrap();
    assert_eq!(&good[..8], b"PKSYMIDX");
    // A byte flipped in the head (a start), and in the names (of a symbol asked for:
    // they all are).
    for at in [120, good.len() - 10] {
        let mut b = good.clone();
        b[at] ^= 0x20;
        std::fs::write(&e, &b).unwrap();
        s.rejected_then_rebuilt(&format!("flipped byte at {at}"));
    }
    // Truncated, at several places.
    for cut in [0, 7, 100, good.len() / 2, good.len() - 1] {
        std::fs::write(&e, &good[..cut]).unwrap();
        s.rejected_then_rebuilt(&format!("truncated at {cut}"));
    }
    // Another version (its checksum right).
    let mut b = good.clone();
    b[8..12].copy_from_slice(&999u32.to_le_bytes());
    fix_checksum(&mut b, head_of(&good));
    std::fs::write(&e, &b).unwrap();
    s.rejected_then_rebuilt("version 999");
    // Counts far past the end (checksum right): bounds-checked.
    let mut b = good.clone();
    b[100..104].copy_from_slice(&u32::MAX.to_le_bytes());
    fix_checksum(&mut b, head_of(&good));
    std::fs::write(&e, &b).unwrap();
    s.rejected_then_rebuilt("huge count");
    // Another identity (a mtime one off, checksum right).
    let mut b = good.clone();
    let m = i64::from_le_bytes(b[40..48].try_into().unwrap()) + 1;
    b[40..48].copy_from_slice(&m.to_le_bytes());
    fix_checksum(&mut b, head_of(&good));
    std::fs::write(&e, &b).unwrap();
    s.rejected_then_rebuilt("identity");
    // Junk of the right name.
    std::fs::write(&e, vec![0xa5; 5000]).unwrap();
    s.rejected_then_rebuilt("junk");
}

#[test]
fn entries_not_ours_alone_are_rejected() {
    let s = Small::new();
    let e = only_entry(&s.dir);
    // Group-writable.
    std::fs::set_permissions(&e, std::fs::Permissions::from_mode(0o620)).unwrap();
    s.rejected_then_rebuilt("group-writable");
    std::fs::set_permissions(&e, std::fs::Permissions::from_mode(0o606)).unwrap();
    s.rejected_then_rebuilt("world-writable");
    // A link to a good entry (kept elsewhere): not followed, and what it points at is
    // left alone.
    let kept = s.dir.parent().unwrap().join("kept.idx");
    std::fs::copy(&e, &kept).unwrap();
    let before = std::fs::read(&kept).unwrap();
    std::fs::remove_file(&e).unwrap();
    std::os::unix::fs::symlink(&kept, &e).unwrap();
    s.rejected_then_rebuilt("symlink");
    assert_eq!(std::fs::read(&kept).unwrap(), before);
    // Another user's (a FIFO too).
    match std::os::unix::fs::chown(&e, Some(NOBODY), Some(NOBODY)) {
        Ok(()) => s.rejected_then_rebuilt("owned by nobody"),
        Err(err) => {
            assert_ne!(rustix_euid(), 0, "root cannot chown: {err}");
            eprintln!("SKIP: not root, cannot give the entry away: {err}");
        }
    }
    std::fs::remove_file(&e).unwrap();
    run(Command::new("mkfifo").arg(&e));
    s.rejected_then_rebuilt("fifo");
}

#[test]
fn a_directory_not_ours_alone_is_not_used_and_said_so() {
    let f = Fixture::new();
    let bin = f.build("dirs", &["-O1"]);
    let reqs = one_req(&bin, 2_000);
    let (want, _) = run_once(&isolated(), &reqs);
    let check = |dir: &Path, why: &str| {
        let opts = with_index(&isolated(), dir, 1 << 30);
        let s = Symbolizer::new(opts.clone()).unwrap();
        let got = s.symbolize_all(reqs.clone());
        assert_eq!(got, want, "{why}");
        let stats = s.cache_stats();
        assert!(stats.index_dir_refused, "{why}: {stats:?}");
        assert_eq!(stats.index_written + stats.index_hits, 0, "{why}");
        let w = s.index_cache_warning().expect("a warning");
        assert!(w.contains(&dir.display().to_string()), "{w}");
        assert!(w.contains(why), "{w}");
        if dir.is_dir() && !dir.is_symlink() {
            assert!(entries(dir).is_empty());
        }
    };
    // Group-writable.
    let gw = f.dir.join("gw");
    std::fs::create_dir(&gw).unwrap();
    std::fs::set_permissions(&gw, std::fs::Permissions::from_mode(0o770)).unwrap();
    check(&gw, "writable by group or others (mode 0770)");
    // A link to a good directory.
    let good = f.dir.join("good");
    std::fs::create_dir(&good).unwrap();
    let link = f.dir.join("link");
    std::os::unix::fs::symlink(&good, &link).unwrap();
    check(&link, "a symbolic link");
    assert!(entries(&good).is_empty());
    // Not a directory.
    let file = f.dir.join("file");
    std::fs::write(&file, b"x").unwrap();
    check(&file, "cannot create it");
    // Another user's.
    let theirs = f.dir.join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    match std::os::unix::fs::chown(&theirs, Some(NOBODY), Some(NOBODY)) {
        Ok(()) => check(&theirs, &format!("owned by uid {NOBODY}")),
        Err(err) => {
            assert_ne!(rustix_euid(), 0, "root cannot chown: {err}");
            eprintln!("SKIP: not root, cannot give the directory away: {err}");
        }
    }
    // Made when missing, 0700, parents too.
    let made = f.dir.join("a/b/symbols");
    let opts = with_index(&isolated(), &made, 1 << 30);
    let s = Symbolizer::new(opts).unwrap();
    assert_eq!(s.symbolize_all(reqs.clone()), want);
    assert_eq!(s.index_cache_warning(), None);
    for d in [&made, &f.dir.join("a/b"), &f.dir.join("a")] {
        assert_eq!(
            std::fs::metadata(d).unwrap().mode() & 0o777,
            0o700,
            "{}",
            d.display()
        );
    }
    assert_eq!(entries(&made).len(), 1);
}

/// Writes `bin` again with its GNU build-id note's bytes replaced by `id` (same length).
fn forge_build_id(bin: &Path, id: &[u8], out: &Path) {
    let own = build_id(bin);
    assert_eq!(own.len(), id.len(), "build-ids of one length");
    let mut data = std::fs::read(bin).unwrap();
    let at = data
        .windows(own.len())
        .position(|w| w == own.as_slice())
        .expect("the build-id bytes in the file");
    data[at..at + id.len()].copy_from_slice(id);
    std::fs::write(out, data).unwrap();
    assert_eq!(build_id(out), id);
}

#[test]
fn a_forged_build_id_neither_uses_nor_poisons_the_genuine_entry() {
    let f = Fixture::new();
    let libc = Path::new(LIBC);
    let id = build_id(libc);
    let own = f.build("forged-src", &["-O1", "-Wl,--build-id=sha1"]);
    let forged = f.dir.join("forged");
    forge_build_id(&own, &id, &forged);
    let dir = f.dir.join("ix");
    let libc_reqs = one_req(libc, 20_000);
    let forged_reqs = one_req(&forged, 5_000);
    // Claiming libc's build-id as the recorder saw it.
    let claimed: Vec<(BinaryRequest, Vec<u64>)> = forged_reqs
        .iter()
        .map(|(r, o)| (r.clone().with_build_id(id.clone()), o.clone()))
        .collect();
    let (want_libc, _) = run_once(&isolated(), &libc_reqs);
    let (want_forged, _) = run_once(&isolated(), &claimed);
    assert!(want_forged[0].symbols.iter().any(|s| s.name == "alpha"));
    cold_then_warm(&isolated(), &dir, &libc_reqs, "libc");
    let genuine = only_entry(&dir);
    let before = (
        std::fs::read(&genuine).unwrap(),
        std::fs::metadata(&genuine).unwrap().ino(),
    );
    // The forgery: its own answers, its own entry, libc's left alone.
    let opts = with_index(&isolated(), &dir, 1 << 30);
    let s = same(&want_forged, &opts, &claimed, "forged, cold");
    assert_eq!(
        (s.index_hits, s.index_rejected, s.index_written),
        (0, 0, 1),
        "{s:?}"
    );
    let s = same(&want_forged, &opts, &claimed, "forged, warm");
    assert_eq!(s.index_hits, 1, "{s:?}");
    assert_eq!(entries(&dir).len(), 2);
    let after = (
        std::fs::read(&genuine).unwrap(),
        std::fs::metadata(&genuine).unwrap().ino(),
    );
    assert_eq!(before, after, "libc's entry untouched");
    let s = same(&want_libc, &opts, &libc_reqs, "libc after the forgery");
    assert_eq!(s.index_hits, 1, "{s:?}");
    // The forgery's entry put under libc's name (as if its identity hash collided):
    // libc's identity is not in it, so it is rejected and libc's rebuilt.
    let forged_entry = entries(&dir).into_iter().find(|e| *e != genuine).unwrap();
    std::fs::rename(&forged_entry, &genuine).unwrap();
    let s = same(
        &want_libc,
        &opts,
        &libc_reqs,
        "libc, the forgery's entry in its place",
    );
    assert_eq!((s.index_rejected, s.index_written), (1, 1), "{s:?}");
    let s = same(&want_libc, &opts, &libc_reqs, "libc, rebuilt");
    assert_eq!(s.index_hits, 1, "{s:?}");
}

#[test]
fn entries_past_the_size_bound_are_evicted_oldest_first() {
    let f = Fixture::new();
    let bins: Vec<PathBuf> = (0..3)
        .map(|i| f.build(&format!("ev{i}"), &["-O1", &format!("-DVARIANT={i}")]))
        .collect();
    let dir = f.dir.join("ix");
    // Each entry's size, from a directory without a bound.
    let sizes: Vec<u64> = bins
        .iter()
        .map(|b| {
            let d = f.dir.join(format!(
                "probe-{}",
                b.file_name().unwrap().to_string_lossy()
            ));
            run_once(&with_index(&isolated(), &d, 1 << 30), &one_req(b, 100));
            std::fs::metadata(only_entry(&d)).unwrap().len()
        })
        .collect();
    // Room for the last two.
    let max = sizes[1] + sizes[2];
    let opts = with_index(&isolated(), &dir, max);
    // A temporary left by a crash two hours ago goes; one being written stays; a file
    // of another user's is neither counted nor deleted.
    std::fs::create_dir(&dir).unwrap();
    let (stale, fresh, theirs) = (
        dir.join(".tmp-1-1"),
        dir.join(".tmp-2-2"),
        dir.join("ffff-0000000000000000.idx"),
    );
    for t in [&stale, &fresh, &theirs] {
        std::fs::write(t, vec![0u8; 4096]).unwrap();
    }
    std::fs::File::options()
        .write(true)
        .open(&stale)
        .unwrap()
        .set_modified(std::time::SystemTime::now() - std::time::Duration::from_secs(7200))
        .unwrap();
    let foreign = std::os::unix::fs::chown(&theirs, Some(NOBODY), Some(NOBODY)).is_ok();
    if !foreign {
        std::fs::remove_file(&theirs).unwrap();
    }
    let mut evicted = 0;
    for (i, b) in bins.iter().enumerate() {
        let reqs = one_req(b, 1_000);
        let (want, _) = run_once(&isolated(), &reqs);
        let s = same(&want, &opts, &reqs, "eviction");
        assert_eq!(s.index_written, 1);
        evicted += s.index_evicted;
        if i == 0 {
            // Older by a minute than the others (mtime order is what counts).
            let e = entries(&dir).into_iter().find(|e| *e != theirs).unwrap();
            let old = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
            std::fs::File::options()
                .write(true)
                .open(&e)
                .unwrap()
                .set_modified(old)
                .unwrap();
        }
    }
    assert_eq!(evicted, 1);
    assert!(!stale.exists() && fresh.exists());
    std::fs::remove_file(&fresh).unwrap();
    if foreign {
        assert!(theirs.exists());
        std::fs::remove_file(&theirs).unwrap();
    }
    let left = entries(&dir);
    assert_eq!(left.len(), 2, "{left:?}");
    let total: u64 = left
        .iter()
        .map(|e| std::fs::metadata(e).unwrap().len())
        .sum();
    assert!(total <= max);
    // The first binary's entry went: it is a miss again.
    let reqs = one_req(&bins[0], 1_000);
    let s = run_once(&opts, &reqs).1;
    assert_eq!((s.index_hits, s.index_written), (0, 1), "{s:?}");
    // An entry larger than the bound is not written; the answer is the same.
    let tiny = f.dir.join("tiny");
    let (want, _) = run_once(&isolated(), &reqs);
    let s = same(
        &want,
        &with_index(&isolated(), &tiny, 100),
        &reqs,
        "too large",
    );
    assert_eq!((s.index_written, s.index_not_written), (0, 1), "{s:?}");
    assert!(entries(&tiny).is_empty() && others(&tiny).is_empty());
}

/// Mounts a tmpfs (options `opts`) on `dir`; false if this machine does not let us.
fn mount_tmpfs(dir: &Path, opts: &str) -> bool {
    quiet(
        Command::new("mount")
            .args(["-t", "tmpfs", "-o", opts, "tmpfs"])
            .arg(dir),
    )
}

fn quiet(cmd: &mut Command) -> bool {
    cmd.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Undoes what made a directory read-only, when dropped.
enum ReadOnly {
    Mount(PathBuf),
    Immutable(PathBuf),
    Mode(PathBuf),
}

impl Drop for ReadOnly {
    fn drop(&mut self) {
        match self {
            ReadOnly::Mount(d) => {
                quiet(Command::new("umount").arg(&*d));
            }
            ReadOnly::Immutable(d) => {
                quiet(Command::new("chattr").arg("-i").arg(&*d));
            }
            ReadOnly::Mode(d) => {
                let _ = std::fs::set_permissions(&*d, std::fs::Permissions::from_mode(0o700));
            }
        }
    }
}

/// Makes the directory `dir` (ours, 0700, entries kept) read-only even for root: bound
/// read-only on itself, else immutable (`chattr +i`), else (not root) mode 0500. `None`
/// (after saying why) when this machine allows none of them.
fn make_read_only(dir: &Path) -> Option<ReadOnly> {
    let bound = quiet(Command::new("mount").arg("--bind").arg(dir).arg(dir));
    if bound {
        let ro = ReadOnly::Mount(dir.to_owned());
        if quiet(
            Command::new("mount")
                .args(["-o", "remount,bind,ro"])
                .arg(dir),
        ) {
            return Some(ro);
        }
    }
    if quiet(Command::new("chattr").arg("+i").arg(dir)) {
        return Some(ReadOnly::Immutable(dir.to_owned()));
    }
    if rustix_euid() != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o500)).unwrap();
        return Some(ReadOnly::Mode(dir.to_owned()));
    }
    eprintln!("SKIP: root, and neither a read-only bind mount nor chattr +i works here");
    None
}

#[test]
fn a_read_only_directory_still_symbolizes() {
    let f = Fixture::new();
    let libc = Path::new(LIBC);
    let reqs = vec![
        (BinaryRequest::elf(libc), offsets(libc, 5_000)),
        (
            BinaryRequest::elf(f.build("ro", &["-O1"])),
            offsets(libc, 100),
        ),
    ];
    let (want, _) = run_once(&isolated(), &reqs);
    let dir = f.dir.join("ix");
    let opts = with_index(&isolated(), &dir, 1 << 30);
    let s = same(&want, &opts, &reqs, "writable");
    assert_eq!(s.index_written, 2, "{s:?}");
    // Read-only now: entries are read, none written.
    let Some(ro) = make_read_only(&dir) else {
        return;
    };
    let s = same(&want, &opts, &reqs, "read-only, warm");
    assert_eq!((s.index_hits, s.index_written), (2, 0), "{s:?}");
    // A damaged entry cannot be replaced: the answers are still the same.
    drop(ro);
    let e = entries(&dir);
    std::fs::write(&e[0], b"junk").unwrap();
    let Some(ro) = make_read_only(&dir) else {
        return;
    };
    let s = same(&want, &opts, &reqs, "read-only, damaged");
    assert_eq!((s.index_hits, s.index_rejected), (1, 1), "{s:?}");
    assert_eq!((s.index_written, s.index_not_written), (0, 1), "{s:?}");
    drop(ro);
    // An empty read-only directory: nothing written, all answered, the first failure
    // stops this symbolizer's building.
    let empty = f.dir.join("empty");
    std::fs::create_dir(&empty).unwrap();
    std::fs::set_permissions(&empty, std::fs::Permissions::from_mode(0o700)).unwrap();
    let Some(_ro) = make_read_only(&empty) else {
        return;
    };
    let opts = with_index(&isolated(), &empty, 1 << 30);
    let s = same(&want, &opts, &reqs, "read-only, empty");
    assert_eq!((s.index_hits, s.index_written), (0, 0), "{s:?}");
    assert!((1..=2).contains(&s.index_not_written), "{s:?}");
    assert!(others(&empty).is_empty() && entries(&empty).is_empty());
}

#[test]
fn a_full_directory_still_symbolizes() {
    let f = Fixture::new();
    let libc = Path::new(LIBC);
    let reqs = vec![(BinaryRequest::elf(libc), offsets(libc, 5_000))];
    let (want, _) = run_once(&isolated(), &reqs);
    let dir = f.dir.join("ix");
    std::fs::create_dir(&dir).unwrap();
    // 8 KiB: no room for libc's entry.
    if !mount_tmpfs(&dir, "mode=0700,size=8k") {
        eprintln!("SKIP: cannot mount a tmpfs here");
        return;
    }
    let _unmount = ReadOnly::Mount(dir.clone());
    let opts = with_index(&isolated(), &dir, 1 << 30);
    let s = same(&want, &opts, &reqs, "full");
    assert_eq!((s.index_written, s.index_not_written), (0, 1), "{s:?}");
    assert!(
        others(&dir).is_empty(),
        "temporaries removed: {:?}",
        others(&dir)
    );
    assert!(entries(&dir).is_empty());
}

#[test]
fn reports_at_once_share_the_directory() {
    let d = tempfile::tempdir().unwrap();
    let libc = Path::new(LIBC);
    let reqs: Vec<(BinaryRequest, Vec<u64>)> = (0..6)
        .map(|i| {
            let o = offsets(libc, 3_000);
            (
                BinaryRequest::elf(libc),
                o.into_iter().skip(i).step_by(6).collect(),
            )
        })
        .collect();
    let (want, _) = run_once(&isolated(), &reqs);
    let opts = with_index(&isolated(), d.path(), 1 << 30);
    std::thread::scope(|s| {
        for _ in 0..3 {
            s.spawn(|| same(&want, &opts, &reqs, "at once"));
        }
    });
    only_entry(d.path());
    assert!(others(d.path()).is_empty(), "{:?}", others(d.path()));
    let s = same(&want, &opts, &reqs, "after");
    assert_eq!(s.index_hits, 6, "{s:?}");
}

#[test]
fn the_default_directory_follows_xdg_then_home() {
    // Read only: the variables are the process's, shared with other tests.
    let want = match (std::env::var_os("XDG_CACHE_HOME"), std::env::var_os("HOME")) {
        (Some(x), _) if Path::new(&x).is_absolute() => {
            Some(PathBuf::from(x).join("profkit/symbols"))
        }
        (_, Some(h)) if Path::new(&h).is_absolute() => {
            Some(PathBuf::from(h).join(".cache/profkit/symbols"))
        }
        _ => None,
    };
    assert_eq!(IndexCacheOptions::default_dir(), want);
    assert_eq!(IndexCacheOptions::DEFAULT_MAX_BYTES, 1 << 30);
    assert_eq!(IndexCacheOptions::new("/x").max_bytes, 1 << 30);
    assert_eq!(SymbolizerOptions::default().index_cache, None);
}
