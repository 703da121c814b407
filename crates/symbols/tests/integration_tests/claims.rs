//! A build-id is a claim: two files linked with one build-id (`-Wl,--build-id=0x…`), a
//! file rebuilt since recording with the same build-id, a kept copy used for its own
//! cookie only.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use profkit_symbols::{BinaryRequest, BinaryResult, RecordedFile, SymbolizerOptions};

use crate::util::*;

const BID: &str = "0x5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a";

const GENUINE_C: &str = r#"
__attribute__((noinline)) int genuine_work(int x) { return x * 3 + 1; }
int main(int argc, char **argv) { (void)argv; return genuine_work(argc); }
"#;

/// Another program with the same entry layout, padded differently.
const FORGED_C: &str = r#"
__attribute__((noinline)) int FORGED_spin(int x) { for (volatile int i = 0; i < x; i++) {} return x; }
__attribute__((noinline)) int FORGED_more(int x) { return FORGED_spin(x) * 7; }
int main(int argc, char **argv) { (void)argv; return FORGED_more(argc); }
"#;

fn build(dir: &Path, name: &str, source: &str) -> PathBuf {
    let src = write(dir, &format!("{name}.c"), source);
    let bid = format!("-Wl,--build-id={BID}");
    compile("cc", &src, &dir.join(name), &["-O1", &bid])
}

fn recorded(bin: &Path) -> RecordedFile {
    let m = std::fs::metadata(bin).unwrap();
    RecordedFile {
        inode: m.ino(),
        size: m.size(),
        mtime_ns: m.mtime() * 1_000_000_000 + m.mtime_nsec(),
        here: true,
    }
}

fn one(opts: SymbolizerOptions, req: BinaryRequest, offsets: &[u64]) -> BinaryResult {
    symbolizer(opts)
        .symbolize_all(vec![(req, offsets.to_vec())])
        .remove(0)
}

fn off(bin: &Path, name: &str) -> u64 {
    file_offset(bin, sym(bin, name).vaddr)
}

/// The recorded path rebuilt after the recording, with the same build-id: refused with
/// a warning naming the path and why, not named with the new file's symbols. (Before, the
/// matching build-id was enough.)
#[test]
fn a_file_changed_since_recording_is_refused_though_its_build_id_matches() {
    let d = tempfile::tempdir().unwrap();
    let bin = build(d.path(), "app", GENUINE_C);
    let id = build_id(&bin);
    let was = recorded(&bin);
    let offsets = [off(&bin, "genuine_work")];
    let req = || {
        BinaryRequest::elf(&bin)
            .with_build_id(id.clone())
            .with_file(was)
    };
    let r = one(isolated(), req(), &offsets);
    assert_eq!(r.name_at(0), Some("genuine_work"), "{:?}", r.warnings);
    // Rebuilt in place from other code, same build-id.
    let forged = build(d.path(), "forged", FORGED_C);
    std::fs::copy(&forged, &bin).unwrap();
    assert_eq!(build_id(&bin), id);
    let r = one(isolated(), req(), &offsets);
    assert_eq!(r.name_at(0), None, "{:?}", r.symbols);
    assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
    let w = &r.warnings[0];
    assert!(w.starts_with("binary changed since recording: "), "{w}");
    assert!(w.contains(&bin.display().to_string()), "{w}");
    assert!(w.contains("not guessed"), "{w}");
    // The same program built again (another inode and mtime): not the recorded file.
    let again = build(d.path(), "again", GENUINE_C);
    std::fs::rename(&again, &bin).unwrap();
    let r = one(isolated(), req(), &offsets);
    assert_eq!(r.name_at(0), None);
    assert!(
        r.warnings[0].contains("changed since recording"),
        "{:?}",
        r.warnings
    );
}

/// Root's binary and a user's forgery claim one build-id. The forgery's kept copy names
/// the forgery's cookie only; root's cookie is named from its own file, and when that is
/// gone, not from the forgery found by build-id. (Before, whichever file the build-id
/// led to named both.)
#[test]
fn a_kept_copy_names_only_its_own_cookie() {
    let d = tempfile::tempdir().unwrap();
    let genuine = build(d.path(), "md5sum", GENUINE_C);
    let forged = build(d.path(), "forged", FORGED_C);
    let id = build_id(&genuine);
    assert_eq!(build_id(&forged), id);
    let (g_file, f_file) = (recorded(&genuine), recorded(&forged));
    assert_ne!(
        g_file.size, f_file.size,
        "the fixture's two programs differ in size"
    );
    // The session's debug dir, the forgery kept there the old way (by build-id) and the
    // new way (by its cookie).
    let debug = d.path().join("debug");
    let h: String = id.iter().map(|b| format!("{b:02x}")).collect();
    std::fs::create_dir_all(debug.join(".build-id").join(&h[..2])).unwrap();
    std::fs::copy(&forged, debug.join(".build-id").join(&h[..2]).join(&h[2..])).unwrap();
    let kept = debug.join(".kept/00000000000000f0");
    std::fs::create_dir_all(kept.parent().unwrap()).unwrap();
    std::fs::copy(&forged, &kept).unwrap();
    let opts = SymbolizerOptions {
        debug_dirs: vec![debug.clone()],
        ..isolated()
    };
    let g_off = [off(&genuine, "genuine_work")];
    let f_off = [off(&forged, "FORGED_spin")];
    // The forgery's cookie: its recorded path gone (a tmpfs of its own), its kept copy.
    let f_req = BinaryRequest::elf("/nonexistent/tmpfs/md5sum")
        .with_build_id(id.clone())
        .with_file(f_file)
        .with_kept_copy(&kept);
    let r = one(opts.clone(), f_req, &f_off);
    assert_eq!(r.name_at(0), Some("FORGED_spin"), "{:?}", r.warnings);
    // Root's cookie: its own file, even with the forgery's copy offered.
    let g_req = || {
        BinaryRequest::elf(&genuine)
            .with_build_id(id.clone())
            .with_file(g_file)
    };
    let r = one(opts.clone(), g_req().with_kept_copy(&kept), &g_off);
    assert_eq!(r.name_at(0), Some("genuine_work"), "{:?}", r.warnings);
    // Root's file gone: the forgery found by build-id does not name it.
    std::fs::remove_file(&genuine).unwrap();
    let r = one(opts.clone(), g_req(), &g_off);
    assert_eq!(r.name_at(0), None, "{:?}", r.symbols);
    assert!(
        r.symbols.iter().all(|s| !s.name.starts_with("FORGED")),
        "{:?}",
        r.symbols
    );
    // An unverified claim is named by nothing found by build-id either.
    let r = one(
        opts,
        BinaryRequest::elf("/nonexistent/x")
            .with_build_id(id)
            .unverified(),
        &f_off,
    );
    assert_eq!(r.name_at(0), None, "{:?}", r.symbols);
}

/// One symbolizer, two files claiming one build-id, with `--debug-info`: each file's
/// source lines are its own (the cache shares DWARF between paths of one file only, and
/// parsed images between files of one content).
#[test]
fn the_cache_does_not_share_one_files_dwarf_with_another_claiming_its_build_id() {
    let d = tempfile::tempdir().unwrap();
    let build_g = |name: &str, source: &str| {
        let src = write(d.path(), &format!("{name}.c"), source);
        let bid = format!("-Wl,--build-id={BID}");
        compile("cc", &src, &d.path().join(name), &["-O1", "-g", &bid])
    };
    let genuine = build_g("genuine", GENUINE_C);
    let forged = build_g("forged", FORGED_C);
    let s = symbolizer(SymbolizerOptions {
        debug_info: true,
        ..isolated()
    });
    let id = build_id(&genuine);
    let g = s.symbolize(
        &BinaryRequest::elf(&genuine)
            .with_build_id(id.clone())
            .with_file(recorded(&genuine)),
        &[off(&genuine, "genuine_work")],
    );
    let f = s.symbolize(
        &BinaryRequest::elf(&forged)
            .with_build_id(id)
            .with_file(recorded(&forged)),
        &[off(&forged, "FORGED_spin")],
    );
    assert_eq!(g.name_at(0), Some("genuine_work"));
    assert_eq!(f.name_at(0), Some("FORGED_spin"));
    let file = |r: &BinaryResult| r.offsets[0].location.as_ref().map(|l| l.file.clone());
    assert!(
        file(&g).is_some_and(|p| p.ends_with("genuine.c")),
        "{:?}",
        file(&g)
    );
    assert!(
        file(&f).is_some_and(|p| p.ends_with("forged.c")),
        "{:?}",
        file(&f)
    );
}

/// A stripped forgery claiming a binary's build-id is not named with that binary's separate
/// debug file (found by build-id under a debug dir): the debug file's PT_LOAD layout is not
/// the forgery's. The genuine stripped binary still is. (Before, any file with the build-id
/// got the debug file's symbols: a user's loop shown as `libc.so.6`'s functions where the
/// libc debug package is installed.)
#[test]
fn a_stripped_forgery_is_not_named_with_the_debug_file_of_the_build_id_it_claims() {
    let d = tempfile::tempdir().unwrap();
    let genuine = build(d.path(), "genuine", GENUINE_C);
    let forged = build(d.path(), "forged", FORGED_C);
    let id = build_id(&genuine);
    let h: String = id.iter().map(|b| format!("{b:02x}")).collect();
    let debug = d.path().join("debug");
    let at = debug.join(".build-id").join(&h[..2]);
    std::fs::create_dir_all(&at).unwrap();
    run(std::process::Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(&genuine)
        .arg(at.join(format!("{}.debug", &h[2..]))));
    let g_off = [off(&genuine, "genuine_work")];
    let f_off = [off(&forged, "FORGED_spin")];
    for bin in [&genuine, &forged] {
        run(std::process::Command::new("strip")
            .arg("--strip-all")
            .arg(bin));
    }
    for debug_info in [false, true] {
        let opts = SymbolizerOptions {
            debug_dirs: vec![debug.clone()],
            debug_info,
            ..isolated()
        };
        let r = one(
            opts.clone(),
            BinaryRequest::elf(&genuine).with_build_id(id.clone()),
            &g_off,
        );
        assert_eq!(r.name_at(0), Some("genuine_work"), "{:?}", r.warnings);
        let r = one(
            opts,
            BinaryRequest::elf(&forged).with_build_id(id.clone()),
            &f_off,
        );
        assert!(
            r.symbols
                .iter()
                .all(|s| s.name != "genuine_work" && s.name != "main"),
            "debug_info {debug_info}: {:?}",
            r.symbols
        );
    }
}
