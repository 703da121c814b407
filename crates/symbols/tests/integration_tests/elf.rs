//! C fixtures built with the system compiler: PIE and non-PIE, with and without `-g`,
//! stripped with a separate debug file, a shared library, changed binaries, the cache.

use std::path::{Path, PathBuf};
use std::process::Command;

use profkit_symbols::{BinaryRequest, BinaryResult, SymbolOrigin, SymbolizerOptions};
use tempfile::TempDir;

use crate::util::*;

pub(crate) const FIXTURE_C: &str = r#"
__attribute__((noinline)) int alpha(int x) { return x * 3 + 1; } /* LINE_ALPHA */

/* Aligned so that a gap of padding follows alpha: an offset there is no symbol's. */
__attribute__((noinline, aligned(64))) int beta(int x) {
    int s = 0;
    for (int i = 0; i < x; i++) s += alpha(i);
    return s;
}

static __attribute__((noinline)) int gamma_static(int x) { return beta(x) ^ 0x55; }

static inline __attribute__((always_inline)) int inlined_helper(int x) {
    volatile int v = x; /* LINE_HELPER */
    return v * v + 7;
}

__attribute__((noinline)) int uses_inline(int x) {
    return inlined_helper(x) /* LINE_CALL */ + 1;
}

int main(int argc, char **argv) {
    (void)argv;
    return gamma_static(argc) + uses_inline(argc);
}
"#;

const LIB_C: &str = r#"
static __attribute__((noinline)) int lib_internal(int x) { return x * 5 - 2; }
__attribute__((noinline)) int lib_fn(int x) { return lib_internal(x) + 11; }
__attribute__((noinline, aligned(64))) int lib_other(int x) { return lib_fn(x) * 2; }
"#;

pub(crate) struct Fixture {
    _dir: TempDir,
    pub(crate) dir: PathBuf,
}

impl Fixture {
    pub(crate) fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().to_owned();
        write(&path, "fixture.c", FIXTURE_C);
        write(&path, "lib.c", LIB_C);
        Fixture {
            _dir: dir,
            dir: path,
        }
    }

    pub(crate) fn build(&self, name: &str, args: &[&str]) -> PathBuf {
        compile(
            "cc",
            &self.dir.join("fixture.c"),
            &self.dir.join(name),
            args,
        )
    }
}

/// The file offset of `name` plus `delta`, computed from `nm` and `readelf` on `bin`.
pub(crate) fn offset_of(bin: &Path, name: &str, delta: u64) -> u64 {
    file_offset(bin, sym(bin, name).vaddr + delta)
}

pub(crate) fn one(opts: SymbolizerOptions, req: BinaryRequest, offsets: &[u64]) -> BinaryResult {
    symbolizer(opts)
        .symbolize_all(vec![(req, offsets.to_vec())])
        .remove(0)
}

fn check_names(bin: &Path) {
    let offsets = [
        offset_of(bin, "alpha", 0),
        offset_of(bin, "alpha", 1),
        offset_of(bin, "beta", 4),
        offset_of(bin, "gamma_static", 0),
        offset_of(bin, "main", 2),
    ];
    let r = one(isolated(), BinaryRequest::elf(bin), &offsets);
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    let names: Vec<_> = (0..offsets.len()).map(|i| r.name_at(i)).collect();
    assert_eq!(
        names,
        [
            Some("alpha"),
            Some("alpha"),
            Some("beta"),
            Some("gamma_static"),
            Some("main")
        ]
    );
    // Same symbol, same id: the report aggregates by it.
    assert_eq!(r.offsets[0].symbol, r.offsets[1].symbol);
    assert_eq!(r.symbols.len(), 4);
    let alpha = r.symbol_at(0).unwrap();
    let nm_alpha = sym(bin, "alpha");
    assert_eq!((alpha.start, alpha.size), (nm_alpha.vaddr, nm_alpha.size));
    assert_eq!(alpha.file_offset, Some(offsets[0]));
    assert_eq!(alpha.origin, SymbolOrigin::Symtab);
    assert_eq!(r.offsets[2].address, Some(sym(bin, "beta").vaddr + 4));
}

#[test]
fn non_pie_executable_names_known_offsets() {
    let f = Fixture::new();
    let bin = f.build("nopie", &["-O1", "-no-pie", "-fno-pie"]);
    assert!(sym(&bin, "alpha").vaddr >= 0x400000, "non-PIE links high");
    check_names(&bin);
}

#[test]
fn pie_executable_names_known_offsets() {
    let f = Fixture::new();
    let bin = f.build("pie", &["-O1", "-fPIE", "-pie"]);
    assert!(sym(&bin, "alpha").vaddr < 0x400000, "PIE links at 0");
    check_names(&bin);
}

#[test]
fn offset_past_a_functions_end_is_not_that_function() {
    let f = Fixture::new();
    let bin = f.build("gap", &["-O1"]);
    let alpha = sym(&bin, "alpha");
    let beta = sym(&bin, "beta");
    let end = alpha.vaddr + alpha.size;
    assert!(end < beta.vaddr, "fixture must leave padding after alpha");
    let offsets = [file_offset(&bin, end - 1), file_offset(&bin, end)];
    let r = one(isolated(), BinaryRequest::elf(&bin), &offsets);
    assert_eq!(r.name_at(0), Some("alpha"));
    assert_eq!(r.name_at(1), None, "padding after alpha");
    assert!(r.offsets[1].address.is_some());
}

#[test]
fn offset_outside_every_segment_has_no_address() {
    let f = Fixture::new();
    let bin = f.build("outside", &["-O1"]);
    let len = std::fs::metadata(&bin).unwrap().len();
    let r = one(isolated(), BinaryRequest::elf(&bin), &[len + 0x1000]);
    assert_eq!(r.offsets[0].address, None);
    assert_eq!(r.offsets[0].symbol, None);
}

#[test]
fn debug_info_gives_lines_and_inlined_frames() {
    let f = Fixture::new();
    let bin = f.build("dbg", &["-O2", "-g"]);
    let opts = SymbolizerOptions {
        debug_info: true,
        ..isolated()
    };
    let s = symbolizer(opts);
    let r = s.symbolize(&BinaryRequest::elf(&bin), &[offset_of(&bin, "alpha", 0)]);
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    let loc = r.offsets[0].location.as_ref().expect("alpha has a line");
    assert!(loc.file.ends_with("fixture.c"), "{loc}");
    assert_eq!(loc.line, Some(line_of(FIXTURE_C, "LINE_ALPHA")));
    assert!(r.offsets[0].inlined.is_empty());

    // Some address of uses_inline is inside the inlined helper.
    let uses = sym(&bin, "uses_inline");
    let offsets: Vec<u64> = (0..uses.size)
        .map(|d| file_offset(&bin, uses.vaddr + d))
        .collect();
    let r = s.symbolize(&BinaryRequest::elf(&bin), &offsets);
    let hit = r
        .offsets
        .iter()
        .find(|o| !o.inlined.is_empty())
        .expect("an address of uses_inline is in inlined_helper");
    assert_eq!(r.symbol(hit.symbol.unwrap()).name, "uses_inline");
    assert_eq!(hit.inlined.len(), 1);
    let frame = &hit.inlined[0];
    assert_eq!(frame.function.as_deref(), Some("inlined_helper"));
    assert_eq!(
        frame.call_site.as_ref().and_then(|c| c.line),
        Some(line_of(FIXTURE_C, "LINE_CALL"))
    );
    let inner_line = hit.location.as_ref().and_then(|l| l.line).unwrap();
    let helper = line_of(FIXTURE_C, "LINE_HELPER");
    assert!(
        (helper..=helper + 1).contains(&inner_line),
        "line {inner_line}"
    );
}

#[test]
fn debug_info_without_dwarf_says_so_once() {
    let f = Fixture::new();
    let bin = f.build("nodbg", &["-O1"]);
    let opts = SymbolizerOptions {
        debug_info: true,
        ..isolated()
    };
    let off = offset_of(&bin, "alpha", 0);
    let r = one(opts, BinaryRequest::elf(&bin), &[off, off + 1]);
    assert_eq!(r.name_at(0), Some("alpha"));
    assert_eq!(r.offsets[0].location, None);
    assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
    assert!(r.warnings[0].contains("no DWARF"), "{:?}", r.warnings);
}

/// Builds `-g` `name`, splits it into a stripped binary and a debug file; returns both.
pub(crate) fn split(f: &Fixture, name: &str, args: &[&str]) -> (PathBuf, PathBuf, PathBuf) {
    let full = f.build(name, args);
    let debug = f.dir.join(format!("{name}.debug"));
    run(Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(&full)
        .arg(&debug));
    let stripped = f.dir.join(format!("{name}.stripped"));
    run(Command::new("strip")
        .arg("--strip-all")
        .arg("-o")
        .arg(&stripped)
        .arg(&full));
    (full, stripped, debug)
}

#[test]
fn stripped_binary_finds_debug_file_by_build_id() {
    let f = Fixture::new();
    let (full, stripped, debug) = split(&f, "bid", &["-O1", "-g"]);
    let id = build_id(&stripped);
    let h: String = id.iter().map(|b| format!("{b:02x}")).collect();
    let debug_root = f.dir.join("debug");
    let placed = debug_root
        .join(".build-id")
        .join(&h[..2])
        .join(format!("{}.debug", &h[2..]));
    std::fs::create_dir_all(placed.parent().unwrap()).unwrap();
    std::fs::rename(&debug, &placed).unwrap();
    let offsets = [
        offset_of(&full, "alpha", 1),
        offset_of(&full, "gamma_static", 0),
    ];

    // Without the debug dir: no names, and a note that says what to install.
    let r = one(isolated(), BinaryRequest::elf(&stripped), &offsets);
    assert_eq!(r.name_at(0), None);
    assert!(
        r.no_symbols
            .as_deref()
            .is_some_and(|w| w.contains("no .symtab") && w.contains(&h)),
        "{:?}",
        r.no_symbols
    );

    let opts = SymbolizerOptions {
        debug_info: true,
        debug_dirs: vec![debug_root],
        ..isolated()
    };
    let r = one(
        opts,
        BinaryRequest::elf(&stripped).with_build_id(id),
        &offsets,
    );
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    assert_eq!(r.name_at(0), Some("alpha"));
    assert_eq!(r.name_at(1), Some("gamma_static"));
    assert_eq!(r.symbol_at(0).unwrap().origin, SymbolOrigin::DebugFile);
    assert_eq!(r.debug_file_used.as_deref(), Some(placed.as_path()));
    assert_eq!(r.path_used.as_deref(), Some(stripped.as_path()));
    let line = r.offsets[0].location.as_ref().and_then(|l| l.line);
    assert_eq!(line, Some(line_of(FIXTURE_C, "LINE_ALPHA")));
}

#[test]
fn stripped_binary_finds_debug_file_by_debuglink() {
    let f = Fixture::new();
    let (full, stripped, debug) = split(&f, "link", &["-O1", "-g", "-Wl,--build-id=none"]);
    run(Command::new("objcopy")
        .current_dir(&f.dir)
        .arg("--add-gnu-debuglink=link.debug")
        .arg(&stripped));
    let dot_debug = f.dir.join(".debug");
    std::fs::create_dir(&dot_debug).unwrap();
    std::fs::rename(&debug, dot_debug.join("link.debug")).unwrap();
    let r = one(
        isolated(),
        BinaryRequest::elf(&stripped),
        &[offset_of(&full, "beta", 3)],
    );
    assert_eq!(r.name_at(0), Some("beta"));
    assert_eq!(r.debug_file_used, Some(dot_debug.join("link.debug")));

    // A debug file whose CRC does not match is not used.
    std::fs::write(dot_debug.join("link.debug"), b"not the debug file").unwrap();
    let r = one(
        isolated(),
        BinaryRequest::elf(&stripped),
        &[offset_of(&full, "beta", 3)],
    );
    assert_eq!(r.name_at(0), None);
}

#[test]
fn shared_library_function_and_stripped_library() {
    let f = Fixture::new();
    let lib = compile(
        "cc",
        &f.dir.join("lib.c"),
        &f.dir.join("libfix.so"),
        &["-O1", "-shared", "-fPIC"],
    );
    let offsets = [
        offset_of(&lib, "lib_fn", 2),
        offset_of(&lib, "lib_internal", 1),
    ];
    let r = one(isolated(), BinaryRequest::elf(&lib), &offsets);
    assert_eq!(r.name_at(0), Some("lib_fn"));
    assert_eq!(r.name_at(1), Some("lib_internal"));

    // Stripped: .dynsym still names exported lib_fn; static lib_internal falls between
    // sized exported symbols, so it is unnamed rather than misattributed.
    let stripped = f.dir.join("libfix.stripped.so");
    run(Command::new("strip")
        .arg("--strip-all")
        .arg("-o")
        .arg(&stripped)
        .arg(&lib));
    let r = one(isolated(), BinaryRequest::elf(&stripped), &offsets);
    assert_eq!(r.name_at(0), Some("lib_fn"));
    assert_eq!(r.symbol_at(0).unwrap().origin, SymbolOrigin::Dynsym);
    assert_eq!(r.name_at(1), None);
    assert!(
        r.no_symbols
            .as_deref()
            .is_some_and(|w| w.contains("only exported names")),
        "{:?}",
        r.no_symbols
    );
}

#[test]
fn changed_build_id_is_reported_and_not_guessed() {
    let f = Fixture::new();
    let bin = f.build("changed", &["-O1"]);
    let recorded = vec![0xab; 20];
    let req = BinaryRequest::elf(&bin).with_build_id(recorded);
    let r = one(
        isolated(),
        req,
        &[offset_of(&bin, "alpha", 0), offset_of(&bin, "beta", 0)],
    );
    assert!(r.offsets.iter().all(|o| o.symbol.is_none()));
    assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
    let w = &r.warnings[0];
    assert!(w.starts_with("binary changed since recording: "), "{w}");
    assert!(w.contains(&bin.display().to_string()), "{w}");
    assert!(w.contains("abababab"), "{w}");
    let now: String = build_id(&bin).iter().map(|b| format!("{b:02x}")).collect();
    assert!(w.contains(&now), "{w}");
}

#[test]
fn changed_inode_is_reported_when_no_build_id_was_recorded() {
    use std::os::unix::fs::MetadataExt;
    let f = Fixture::new();
    let bin = f.build("inode", &["-O1"]);
    let ino = std::fs::metadata(&bin).unwrap().ino();
    let off = offset_of(&bin, "alpha", 0);
    let r = one(isolated(), BinaryRequest::elf(&bin).with_inode(ino), &[off]);
    assert_eq!(r.name_at(0), Some("alpha"));
    let r = one(
        isolated(),
        BinaryRequest::elf(&bin).with_inode(ino + 1),
        &[off],
    );
    assert_eq!(r.name_at(0), None);
    assert!(
        r.warnings[0].contains("binary changed since recording"),
        "{:?}",
        r.warnings
    );
    assert!(
        r.warnings[0].contains(&format!("inode recorded {}", ino + 1)),
        "{:?}",
        r.warnings
    );
}

#[test]
fn missing_binary_with_recorded_build_id_is_found_in_search_dir() {
    let f = Fixture::new();
    let bin = f.build("moved", &["-O1"]);
    let off = offset_of(&bin, "alpha", 0);
    let id = build_id(&bin);
    let elsewhere = f.dir.join("copies");
    std::fs::create_dir(&elsewhere).unwrap();
    std::fs::rename(&bin, elsewhere.join("moved")).unwrap();
    let opts = SymbolizerOptions {
        search_dirs: vec![elsewhere.clone()],
        ..isolated()
    };
    let r = one(
        opts.clone(),
        BinaryRequest::elf(&bin).with_build_id(id),
        &[off],
    );
    assert_eq!(r.name_at(0), Some("alpha"));
    assert!(
        r.warnings[0].contains("which has the recorded build-id"),
        "{:?}",
        r.warnings
    );
    // Without a recorded build-id nothing is guessed.
    let r = one(opts, BinaryRequest::elf(&bin), &[off]);
    assert_eq!(r.name_at(0), None);
    assert!(
        r.warnings[0].contains("not found; samples shown as offsets"),
        "{:?}",
        r.warnings
    );
}

#[test]
fn sysroot_prefixes_recorded_paths() {
    let f = Fixture::new();
    let bin = f.build("rooted", &["-O1"]);
    let root = f.dir.join("root");
    std::fs::create_dir_all(root.join("usr/bin")).unwrap();
    std::fs::copy(&bin, root.join("usr/bin/rooted")).unwrap();
    let opts = SymbolizerOptions {
        sysroot: Some(root),
        ..isolated()
    };
    let r = one(
        opts,
        BinaryRequest::elf("/usr/bin/rooted"),
        &[offset_of(&bin, "alpha", 0)],
    );
    assert_eq!(r.name_at(0), Some("alpha"));
}

/// With `--debug-info` a binary is read whole (DWARF needs it) and parsed
/// once per symbolizer. (Without, each request reads only the symbol
/// tables by range, for its offsets: see the next test.)
#[test]
fn cache_parses_each_binary_once_across_calls_and_threads() {
    let f = Fixture::new();
    let a = f.build("a", &["-O1"]);
    let lib = compile(
        "cc",
        &f.dir.join("lib.c"),
        &f.dir.join("libc2.so"),
        &["-O1", "-shared", "-fPIC"],
    );
    let s = symbolizer(SymbolizerOptions {
        debug_info: true,
        ..isolated()
    });
    let oa = offset_of(&a, "alpha", 0);
    let ol = offset_of(&lib, "lib_fn", 0);
    let requests = || {
        vec![
            (BinaryRequest::elf(&a), vec![oa]),
            (BinaryRequest::elf(&lib), vec![ol]),
            (BinaryRequest::elf(&a).with_pid(2), vec![oa + 1]),
            (BinaryRequest::elf(&lib).with_pid(3), vec![ol + 1]),
        ]
    };
    let first = s.symbolize_all(requests());
    assert_eq!(s.cache_stats().binaries_parsed, 2);
    let second = s.symbolize_all(requests());
    assert_eq!(
        s.cache_stats().binaries_parsed,
        2,
        "a report reusing the symbolizer re-parses nothing"
    );
    assert_eq!(first, second);
    assert_eq!(first[0].name_at(0), Some("alpha"));
    assert_eq!(first[3].name_at(0), Some("lib_fn"));

    // A copy with the same build-id at another path is another file: a build-id is a
    // claim any file can make, so DWARF read by range is shared only by one file's paths.
    let copy = f.dir.join("a-copy");
    std::fs::copy(&a, &copy).unwrap();
    let r = s.symbolize(&BinaryRequest::elf(&copy), &[oa]);
    assert_eq!(r.name_at(0), Some("alpha"));
    assert_eq!(s.cache_stats().binaries_parsed, 3);
    let link = f.dir.join("a-link");
    std::fs::hard_link(&a, &link).unwrap();
    let r = s.symbolize(&BinaryRequest::elf(&link), &[oa]);
    assert_eq!(r.name_at(0), Some("alpha"));
    assert_eq!(s.cache_stats().binaries_parsed, 3, "one file, two paths");

    // A rebuilt file at the same path is re-read.
    std::thread::sleep(std::time::Duration::from_millis(20));
    f.build("a", &["-O2", "-fno-inline"]);
    assert_ne!(build_id(&a), build_id(&copy));
    let r = s.symbolize(&BinaryRequest::elf(&a), &[offset_of(&a, "beta", 0)]);
    assert_eq!(r.name_at(0), Some("beta"));
    assert_eq!(s.cache_stats().binaries_parsed, 4);
}

/// Without `--debug-info` each request reads its binary's symbol tables by
/// range for just its offsets: the same answers as with the whole file,
/// and a rebuilt binary is seen at once.
#[test]
fn without_debug_info_each_request_reads_only_what_its_offsets_need() {
    let f = Fixture::new();
    let a = f.build("a", &["-O1"]);
    let oa = offset_of(&a, "alpha", 0);
    let ob = offset_of(&a, "beta", 0);
    let ranged = symbolizer(isolated());
    let whole = symbolizer(SymbolizerOptions {
        debug_info: true,
        ..isolated()
    });
    let r = ranged.symbolize(&BinaryRequest::elf(&a), &[oa, ob, oa + 1]);
    let w = whole.symbolize(&BinaryRequest::elf(&a), &[oa, ob, oa + 1]);
    assert_eq!(
        (r.name_at(0), r.name_at(1), r.name_at(2)),
        (Some("alpha"), Some("beta"), Some("alpha"))
    );
    assert_eq!(r.symbols.len(), 2);
    for (x, y) in r.symbols.iter().zip(&w.symbols) {
        assert_eq!(
            (&x.name, x.start, x.size, x.file_offset),
            (&y.name, y.start, y.size, y.file_offset)
        );
    }
    assert_eq!(ranged.cache_stats().binaries_parsed, 1);
    let _ = ranged.symbolize(&BinaryRequest::elf(&a), &[oa]);
    assert_eq!(
        ranged.cache_stats().binaries_parsed,
        2,
        "not kept: read again"
    );
}

#[test]
fn not_an_elf_file_is_a_warning() {
    let f = Fixture::new();
    let r = one(
        isolated(),
        BinaryRequest::elf(f.dir.join("fixture.c")),
        &[0],
    );
    assert_eq!(r.name_at(0), None);
    assert!(
        r.warnings[0].contains("not a readable ELF file"),
        "{:?}",
        r.warnings
    );
}

/// Per address: its line, and its inlined frames (function, line of the call).
type Lines = Vec<(Option<u32>, Vec<(Option<String>, Option<u32>)>)>;

/// The lines and inlined frames of `uses_inline` in `bin`, with `--debug-info`.
fn inline_lines(bin: &Path) -> Lines {
    let uses = sym(bin, "uses_inline");
    let offsets: Vec<u64> = (0..uses.size)
        .map(|d| file_offset(bin, uses.vaddr + d))
        .collect();
    let r = one(
        SymbolizerOptions {
            debug_info: true,
            ..isolated()
        },
        BinaryRequest::elf(bin),
        &offsets,
    );
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    r.offsets
        .iter()
        .map(|o| {
            (
                o.location.as_ref().and_then(|l| l.line),
                o.inlined
                    .iter()
                    .map(|f| {
                        (
                            f.function.clone(),
                            f.call_site.as_ref().and_then(|c| c.line),
                        )
                    })
                    .collect(),
            )
        })
        .collect()
}

/// DWARF in compressed sections (`SHF_COMPRESSED` from `-gz=zlib`, GNU `.zdebug_*` from
/// `-gz=zlib-gnu`) gives the lines and inlined frames the same build gives uncompressed.
#[test]
fn compressed_debug_sections_give_the_same_lines() {
    let f = Fixture::new();
    let plain = f.build("plain", &["-O2", "-g"]);
    let want = inline_lines(&plain);
    assert!(want.iter().any(|(_, inl)| !inl.is_empty()), "{want:?}");
    for (name, flag, section) in [
        ("gz", "-gz=zlib", ".debug_info"),
        ("zdebug", "-gz=zlib-gnu", ".zdebug_info"),
    ] {
        let bin = f.build(name, &["-O2", "-g", flag]);
        let headers = run(Command::new("readelf").arg("-SW").arg(&bin));
        let line = headers
            .lines()
            .find(|l| l.contains(&format!("{section} ")))
            .unwrap_or_else(|| panic!("{flag}: no {section} in {headers}"));
        if flag == "-gz=zlib" {
            assert!(line.contains(" C "), "not compressed: {line}");
        }
        assert_eq!(inline_lines(&bin), want, "{flag}");
    }
}

/// A `.debug_info` section header that points past the end of the file (a truncated or
/// forged binary) is a warning; names are still given, nothing panics.
#[test]
fn dwarf_past_the_end_of_the_file_is_a_warning() {
    let f = Fixture::new();
    let bin = f.build("forged", &["-O1", "-g"]);
    let mut data = std::fs::read(&bin).unwrap();
    // Elf64_Ehdr: e_shoff at 0x28, e_shentsize at 0x3a, e_shnum at 0x3c, e_shstrndx at 0x3e;
    // Elf64_Shdr: sh_name at 0, sh_offset at 0x18, sh_size at 0x20.
    let u16_at = |d: &[u8], at: usize| u16::from_le_bytes([d[at], d[at + 1]]) as usize;
    let u64_at = |d: &[u8], at: usize| u64::from_le_bytes(d[at..at + 8].try_into().unwrap());
    let shoff = u64_at(&data, 0x28) as usize;
    let (entsize, count, strndx) = (
        u16_at(&data, 0x3a),
        u16_at(&data, 0x3c),
        u16_at(&data, 0x3e),
    );
    let strtab = u64_at(&data, shoff + strndx * entsize + 0x18) as usize;
    let info = (0..count)
        .map(|i| shoff + i * entsize)
        .find(|&h| {
            let name = strtab + u32::from_le_bytes(data[h..h + 4].try_into().unwrap()) as usize;
            data[name..].starts_with(b".debug_info\0")
        })
        .expect("a .debug_info section");
    let len = data.len() as u64;
    data[info + 0x18..info + 0x20].copy_from_slice(&(len - 64).to_le_bytes());
    data[info + 0x20..info + 0x28].copy_from_slice(&(1u64 << 20).to_le_bytes());
    std::fs::write(&bin, &data).unwrap();
    let r = one(
        SymbolizerOptions {
            debug_info: true,
            ..isolated()
        },
        BinaryRequest::elf(&bin),
        &[offset_of(&bin, "alpha", 0), offset_of(&bin, "beta", 0)],
    );
    assert_eq!((r.name_at(0), r.name_at(1)), (Some("alpha"), Some("beta")));
    assert!(r.offsets.iter().all(|o| o.location.is_none()));
    assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
    assert!(
        r.warnings[0].starts_with("bad DWARF in "),
        "{:?}",
        r.warnings
    );
}

/// A stripped binary's DWARF comes from the debug file its debuglink names, read by range.
#[test]
fn debug_info_from_a_debug_file_found_by_debuglink() {
    let f = Fixture::new();
    let (full, stripped, debug) = split(&f, "dlink", &["-O1", "-g", "-Wl,--build-id=none"]);
    run(Command::new("objcopy")
        .current_dir(&f.dir)
        .arg("--add-gnu-debuglink=dlink.debug")
        .arg(&stripped));
    let r = one(
        SymbolizerOptions {
            debug_info: true,
            ..isolated()
        },
        BinaryRequest::elf(&stripped),
        &[offset_of(&full, "alpha", 0)],
    );
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    assert_eq!(r.name_at(0), Some("alpha"));
    assert_eq!(r.debug_file_used, Some(debug));
    let line = r.offsets[0].location.as_ref().and_then(|l| l.line);
    assert_eq!(line, Some(line_of(FIXTURE_C, "LINE_ALPHA")));
}
