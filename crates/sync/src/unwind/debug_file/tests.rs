//! Separate debug files, with real binaries built here: a program compiled
//! without unwind tables, stripped, its `.debug_frame` only in its debug
//! file.

use super::*;
use crate::binfile::MappedBinary;
use crate::unwind::sections::{read_cfi, CfiSource, Loader};
use std::process::Command;
use std::time::Instant;

const PROGRAM: &str = r#"
__attribute__((noinline)) long leaf(long n) {
    volatile long buf[4] = {0};
    for (long i = 0; i < n; i++) buf[i & 3] += i * i;
    return buf[0] + buf[3];
}
__attribute__((noinline)) long caller(long n) { long r = leaf(n); return r ^ (n << 1); }
int main(int argc, char **argv) { (void)argv; return (int)caller(argc * 1000); }
"#;

/// Another program, linked with `build_id`: another code layout.
const OTHER: &str = r#"
__attribute__((noinline)) long f(long n) { volatile long s = 0; for (long i = 0; i < n; i++) s += i; return s; }
__attribute__((noinline)) long g(long n) { volatile long s = 0; for (long i = 0; i < n; i++) s ^= i * 3; return s; }
__attribute__((noinline)) long h(long n) { volatile long s = 1; for (long i = 0; i < n; i++) s *= i | 1; return s; }
int main(int argc, char **argv) { (void)argv; return (int)(f(argc) + g(argc) + h(argc)); }
"#;

/// A stripped binary without unwind tables and its debug file, built in
/// `dir` from `source`, linked with `build_id` if given: (binary, debug
/// file, build-id).
fn split_binary(
    dir: &Path,
    name: &str,
    source: &str,
    build_id: Option<&[u8]>,
) -> (PathBuf, PathBuf, Vec<u8>) {
    let flag = build_id.map(|id| format!("-Wl,--build-id=0x{}", hex(id)));
    let extra: Vec<&str> = flag.iter().map(String::as_str).collect();
    let s = profkit_testsupport::split_without_unwind_tables(dir, name, source, &extra, false);
    (s.stripped, s.debug, s.build_id)
}

/// Puts `debug` at `root/.build-id/ab/cdef….debug` for `id`.
fn place(root: &Path, id: &[u8], debug: &Path) -> PathBuf {
    let at = profkit_eventlog::build_id_path(root, id, ".debug");
    std::fs::create_dir_all(at.parent().unwrap()).unwrap();
    std::fs::copy(debug, &at).unwrap();
    at
}

fn source(bin: &Path, id: &[u8]) -> CfiSource {
    CfiSource::File {
        binary: MappedBinary {
            path: bin.to_path_buf(),
            map_file: None,
            identity: None,
        },
        build_id: Some(id.to_vec()),
    }
}

fn read(bin: &Path, id: &[u8], sources: &DebugFrameSources) -> CfiAnswer {
    read_cfi(source(bin, id), sources, &AtomicBool::new(false))
}

fn dirs(dirs: &[&Path]) -> DebugFrameSources {
    DebugFrameSources {
        debug_dirs: dirs.iter().map(|d| d.to_path_buf()).collect(),
        ..DebugFrameSources::none()
    }
}

#[test]
fn a_stripped_binary_takes_its_debug_frame_from_its_debug_file_by_build_id() {
    let d = tempfile::tempdir().unwrap();
    let (bin, debug, id) = split_binary(d.path(), "prog", PROGRAM, None);
    // Neither table in the binary itself.
    assert_eq!(
        crate::unwind::sections_of(&*std::fs::read(&bin).unwrap()).unwrap_err(),
        CfiMissing::NoCfi
    );
    let root = d.path().join("debug");
    assert_eq!(
        read(&bin, &id, &dirs(&[&root])).unwrap_err(),
        CfiMissing::NoCfi
    );
    place(&root, &id, &debug);
    // Looked for in every directory, in order.
    let empty = d.path().join("empty");
    let s = read(&bin, &id, &dirs(&[&empty, &root])).unwrap();
    assert!(s.from_debug_file);
    assert!(s.eh_frame.is_none() && s.debug_frame.is_some());
    // The binary's own layout: its code range and segments.
    let own = profkit_elf::Segments::parse(&*std::fs::read(&bin).unwrap()).unwrap();
    let text = own.all().iter().find(|s| s.executable).unwrap();
    assert_eq!(s.code, text.vaddr..text.vaddr + text.mem_size);
    assert_eq!(
        s.segments[0],
        (text.file_offset, text.vaddr, text.file_size)
    );
    // An FDE covers leaf: the unwinder steps it.
    assert!(s.text_svma.is_some());
    // Not looked for without the directory, nor without a known build-id.
    assert_eq!(
        read(&bin, &id, &DebugFrameSources::none()).unwrap_err(),
        CfiMissing::NoCfi
    );
    let no_id = CfiSource::File {
        binary: MappedBinary {
            path: bin.clone(),
            map_file: None,
            identity: None,
        },
        build_id: None,
    };
    let r = read_cfi(no_id, &dirs(&[&root]), &AtomicBool::new(false));
    assert_eq!(r.unwrap_err(), CfiMissing::NoCfi);
}

/// A real binary built without unwind tables keeps the start files'
/// `.eh_frame` (`_start` only): too scant, so its debug file's
/// `.debug_frame` serves when there is one; a binary with full tables keeps
/// its own even with a debug file at hand.
#[test]
fn a_scant_eh_frame_gives_way_to_the_debug_files_debug_frame() {
    let d = tempfile::tempdir().unwrap();
    let s = profkit_testsupport::split_without_unwind_tables(d.path(), "crt", PROGRAM, &[], true);
    let (bin, id) = (&s.stripped, &s.build_id);
    let own = read(bin, id, &DebugFrameSources::none()).unwrap();
    assert!(own.eh_frame.is_some() && !own.from_debug_file);
    assert!(
        crate::unwind::sections::scant_eh_frame(&own),
        "{} bytes of .eh_frame",
        own.bytes()
    );
    let root = d.path().join("debug");
    place(&root, id, &s.debug);
    let from_debug = read(bin, id, &dirs(&[&root])).unwrap();
    assert!(from_debug.from_debug_file);
    assert!(from_debug.eh_frame.is_none() && from_debug.debug_frame.is_some());
    // A debug file of another layout: the binary's own, as before.
    let (_, other_debug, _) = split_binary(d.path(), "other", OTHER, Some(id));
    let bad = d.path().join("bad");
    place(&bad, id, &other_debug);
    let kept = read(bin, id, &dirs(&[&bad])).unwrap();
    assert!(kept.eh_frame.is_some() && !kept.from_debug_file);

    // Full unwind tables (gcc's default): its own, debug file or not.
    let full = d.path().join("full");
    let src = d.path().join("crt.c");
    let ok = Command::new("cc")
        .args(["-O2", "-g", "-o"])
        .arg(&full)
        .arg(&src)
        .status()
        .unwrap();
    assert!(ok.success());
    let full_id = profkit_elf::build_id(&*std::fs::read(&full).unwrap()).unwrap();
    let full_debug = d.path().join("full.debug");
    let ok = Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(&full)
        .arg(&full_debug)
        .status()
        .unwrap();
    assert!(ok.success());
    place(&root, &full_id, &full_debug);
    let own = read(&full, &full_id, &dirs(&[&root])).unwrap();
    assert!(!crate::unwind::sections::scant_eh_frame(&own));
    assert!(own.eh_frame.is_some() && !own.from_debug_file);
}

#[test]
fn a_debug_file_with_the_build_id_but_another_layout_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let (bin, debug, id) = split_binary(d.path(), "prog", PROGRAM, None);
    let (_, other_debug, other_id) = split_binary(d.path(), "other", OTHER, Some(&id));
    assert_eq!(other_id, id, "linked with the same build-id");
    let root = d.path().join("debug");
    place(&root, &id, &other_debug);
    let r = read(&bin, &id, &dirs(&[&root]));
    assert!(
        matches!(&r, Err(CfiMissing::Refused(why)) if why.contains("layout")),
        "{r:?}"
    );
    // The right one in a later directory is used.
    let good = d.path().join("good");
    place(&good, &id, &debug);
    assert!(
        read(&bin, &id, &dirs(&[&root, &good]))
            .unwrap()
            .from_debug_file
    );
    // Another binary's debug file (another build-id) at the name: not used.
    let (_, third_debug, _) = split_binary(d.path(), "third", OTHER, None);
    let wrong = d.path().join("wrong");
    place(&wrong, &id, &third_debug);
    assert_eq!(
        read(&bin, &id, &dirs(&[&wrong])).unwrap_err(),
        CfiMissing::NoCfi
    );
}

#[test]
fn the_debuginfod_cache_is_read_without_links_and_only_the_users_own_files() {
    use std::os::unix::fs::{chown, symlink};
    let d = tempfile::tempdir().unwrap();
    let (bin, debug, id) = split_binary(d.path(), "prog", PROGRAM, None);
    let cache = d.path().join("cache");
    let entry = cache.join(hex(&id));
    std::fs::create_dir_all(&entry).unwrap();
    let sources = DebugFrameSources {
        debuginfod_cache: Some(cache.clone()),
        ..DebugFrameSources::none()
    };
    // A link planted as the cache's file is not followed.
    symlink(&debug, entry.join("debuginfo")).unwrap();
    assert_eq!(read(&bin, &id, &sources).unwrap_err(), CfiMissing::NoCfi);
    std::fs::remove_file(entry.join("debuginfo")).unwrap();
    std::fs::copy(&debug, entry.join("debuginfo")).unwrap();
    assert!(read(&bin, &id, &sources).unwrap().from_debug_file);
    // Another user's file in the cache is refused.
    if !rustix::process::geteuid().is_root() {
        eprintln!("skipped: chown to another user needs root");
        return;
    }
    chown(entry.join("debuginfo"), Some(65534), Some(65534)).unwrap();
    assert_eq!(read(&bin, &id, &sources).unwrap_err(), CfiMissing::NoCfi);
    // The same file in a debug directory (root's, links followed) is used.
    let root = d.path().join("debug");
    let at = profkit_eventlog::build_id_path(&root, &id, ".debug");
    std::fs::create_dir_all(at.parent().unwrap()).unwrap();
    symlink(entry.join("debuginfo"), &at).unwrap();
    let both = DebugFrameSources {
        debug_dirs: vec![root],
        ..sources
    };
    assert!(read(&bin, &id, &both).unwrap().from_debug_file);
}

/// A fetch hook that hands out `path` after `delay`, counting its calls.
fn hook(path: PathBuf, delay: Duration, want: Vec<u8>) -> FetchDebugFile {
    Arc::new(move |id: &[u8]| {
        assert_eq!(id, want);
        std::thread::sleep(delay);
        Some(path.clone())
    })
}

/// Reads `bin` on a [`Loader`] with `sources`: the answer and how long it
/// took to come.
fn load(bin: &Path, id: &[u8], sources: DebugFrameSources) -> (CfiAnswer, Duration) {
    let mut l = Loader::new(crate::unwind::CFI_TIMEOUT, sources);
    let t = Instant::now();
    assert!(l.request(1, source(bin, id)));
    loop {
        if let Some((c, a)) = l.poll(Duration::from_millis(20)).pop() {
            assert_eq!(c, 1);
            return (a, t.elapsed());
        }
        assert!(t.elapsed() < Duration::from_secs(20), "no answer");
    }
}

#[test]
fn a_fetch_hook_is_asked_last_and_given_its_own_time_box() {
    let d = tempfile::tempdir().unwrap();
    let (bin, debug, id) = split_binary(d.path(), "prog", PROGRAM, None);
    // Slower than CFI_TIMEOUT, within fetch_timeout: its answer is used.
    let slow = Duration::from_millis(1300);
    assert!(slow > crate::unwind::CFI_TIMEOUT);
    let sources = DebugFrameSources {
        fetch: Some(hook(debug.clone(), slow, id.clone())),
        fetch_timeout: Duration::from_secs(10),
        ..DebugFrameSources::none()
    };
    let (a, took) = load(&bin, &id, sources.clone());
    assert!(a.unwrap().from_debug_file);
    assert!(took >= slow, "{took:?}");
    // A hook past fetch_timeout: the read is given up at that time,
    // timed out, and the stage goes on.
    let stuck = DebugFrameSources {
        fetch: Some(hook(debug.clone(), Duration::from_secs(5), id.clone())),
        fetch_timeout: Duration::from_millis(300),
        ..DebugFrameSources::none()
    };
    let (a, took) = load(&bin, &id, stuck);
    assert_eq!(a.unwrap_err(), CfiMissing::TimedOut);
    assert!(took < Duration::from_secs(2), "{took:?}");
    // The hook is not called when a directory has the file.
    let root = d.path().join("debug");
    place(&root, &id, &debug);
    let never: FetchDebugFile = Arc::new(|_: &[u8]| panic!("the hook was called"));
    let first = DebugFrameSources {
        debug_dirs: vec![root],
        fetch: Some(never),
        ..DebugFrameSources::none()
    };
    assert!(read(&bin, &id, &first).unwrap().from_debug_file);
}
