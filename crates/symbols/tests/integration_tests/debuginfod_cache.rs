//! A debuginfod client's cache (elfutils' layout, `CACHE/<build-id>/debuginfo` and
//! `…/executable`) as a source of debug files and of binaries missing at their path, with
//! the same checks as the debug dirs.

use std::path::{Path, PathBuf};

use profkit_symbols::{BinaryRequest, RecordedFile, SymbolOrigin, SymbolizerOptions};

use crate::elf::{offset_of, one, split, Fixture, FIXTURE_C};
use crate::util::*;

fn hex(id: &[u8]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

/// Puts `file` in `cache` as the `kind` of build-id `id`.
fn place(cache: &Path, id: &[u8], kind: &str, file: &Path) -> PathBuf {
    let dir = cache.join(hex(id));
    std::fs::create_dir_all(&dir).unwrap();
    let to = dir.join(kind);
    std::fs::copy(file, &to).unwrap();
    to
}

fn with_cache(cache: &Path, debug_info: bool) -> SymbolizerOptions {
    SymbolizerOptions {
        debug_info,
        debuginfod_cache: Some(cache.to_owned()),
        ..isolated()
    }
}

#[test]
fn a_stripped_binary_is_named_from_the_debuginfod_cache() {
    let f = Fixture::new();
    let (full, stripped, debug) = split(&f, "dcache", &["-O1", "-g"]);
    let id = build_id(&stripped);
    let cache = f.dir.join("cache");
    let offsets = [
        offset_of(&full, "alpha", 1),
        offset_of(&full, "gamma_static", 0),
    ];
    let req = || BinaryRequest::elf(&stripped).with_build_id(id.clone());

    // An empty cache: unnamed, as without one.
    std::fs::create_dir_all(&cache).unwrap();
    let r = one(with_cache(&cache, false), req(), &offsets);
    assert_eq!(r.name_at(0), None);
    let note = r.no_symbols.as_deref().unwrap();
    assert!(
        note.contains(&format!("nor in the debuginfod cache {}", cache.display())),
        "{note}"
    );

    // The debug file in the cache: named, with lines under --debug-info, as
    // from /usr/lib/debug.
    let placed = place(&cache, &id, "debuginfo", &debug);
    for debug_info in [false, true] {
        let r = one(with_cache(&cache, debug_info), req(), &offsets);
        assert_eq!(r.name_at(0), Some("alpha"), "{:?}", r.warnings);
        assert_eq!(r.name_at(1), Some("gamma_static"));
        assert_eq!(r.symbol_at(0).unwrap().origin, SymbolOrigin::DebugFile);
        assert_eq!(r.debug_file_used.as_deref(), Some(placed.as_path()));
        assert!(r.no_symbols.is_none());
        if debug_info {
            let line = r.offsets[0].location.as_ref().and_then(|l| l.line);
            assert_eq!(line, Some(line_of(FIXTURE_C, "LINE_ALPHA")));
        }
    }
    // Without the option the cache is not looked at.
    let r = one(isolated(), req(), &offsets);
    assert_eq!(r.name_at(0), None);
}

#[test]
fn a_wrong_file_in_the_cache_is_not_used() {
    let f = Fixture::new();
    let (full, stripped, _debug) = split(&f, "dlie", &["-O1", "-g"]);
    let (_, _, other_debug) = split(&f, "dother", &["-O2", "-g", "-DOTHER=1"]);
    let id = build_id(&stripped);
    let cache = f.dir.join("cache");
    let offsets = [offset_of(&full, "alpha", 1)];
    let req = || BinaryRequest::elf(&stripped).with_build_id(id.clone());

    // Another program's debug file planted under this build-id: its
    // build-id differs, so it names nothing.
    place(&cache, &id, "debuginfo", &other_debug);
    let r = one(with_cache(&cache, false), req(), &offsets);
    assert_eq!(r.name_at(0), None);
    assert_eq!(r.debug_file_used, None);

    // Garbage and an empty file (elfutils' negative-cache entry): nothing.
    let p = place(&cache, &id, "debuginfo", &other_debug);
    std::fs::write(&p, b"").unwrap();
    let r = one(with_cache(&cache, false), req(), &offsets);
    assert_eq!(r.name_at(0), None);
    std::fs::write(&p, b"\x7fELF garbage").unwrap();
    let r = one(with_cache(&cache, true), req(), &offsets);
    assert_eq!(r.name_at(0), None);
}

#[test]
fn a_binary_gone_from_its_path_is_read_from_the_cached_executable() {
    let f = Fixture::new();
    let bin = f.build("gone", &["-O1"]);
    let id = build_id(&bin);
    let meta = std::fs::metadata(&bin).unwrap();
    let cache = f.dir.join("cache");
    let off = offset_of(&bin, "alpha", 1);
    let kept = f.dir.join("kept");
    std::fs::copy(&bin, &kept).unwrap();
    std::fs::remove_file(&bin).unwrap();
    let recorded = RecordedFile {
        inode: 1,
        size: meta.len(),
        mtime_ns: 0,
        here: false,
    };
    let req = || {
        BinaryRequest::elf(&bin)
            .with_build_id(id.clone())
            .with_file(recorded)
    };
    let r = one(with_cache(&cache, false), req(), &[off]);
    assert_eq!(r.name_at(0), None);

    let placed = place(&cache, &id, "executable", &kept);
    let r = one(with_cache(&cache, false), req(), &[off]);
    assert_eq!(r.name_at(0), Some("alpha"), "{:?}", r.warnings);
    assert_eq!(r.path_used.as_deref(), Some(placed.as_path()));

    // A file of another size under that build-id is not the recorded one.
    let mut grown = std::fs::read(&kept).unwrap();
    grown.extend_from_slice(&[0; 4096]);
    std::fs::write(&placed, grown).unwrap();
    let r = one(with_cache(&cache, false), req(), &[off]);
    assert_eq!(r.name_at(0), None);
}
