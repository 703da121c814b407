//! The symbol index (issue 32): a report through the binaries' indexes
//! (made after the first report by the builder it starts, read by the
//! next) prints exactly what a report that reads every symbol table prints
//! (`--no-cache`), byte for byte: on the golden sessions and on a real
//! recording (a gcc build of the workloads, system-wide: cc1, as, ld, libc,
//! the kernel).

use std::path::Path;
use std::process::Command;

use crate::util::*;
use profkit_testsupport::perf_ok;

/// profreport with `args` and its symbol indexes under `cache`.
fn with_cache(cache: &Path, args: &[&str]) -> Run {
    let o = Command::new(PROFREPORT)
        .args(args)
        .current_dir(cli_dir())
        .env("XDG_CACHE_HOME", cache)
        .env_remove("PROFKIT_SESSION_DIR")
        .env_remove("DEBUGINFOD_URLS")
        .output()
        .expect("running profreport");
    Run {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// The index entries under `cache`.
fn entries(cache: &Path) -> Vec<String> {
    let dir = cache.join("profkit/symbols");
    let mut v: Vec<String> = std::fs::read_dir(&dir)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.ends_with(".idx"))
                .collect()
        })
        .unwrap_or_default();
    v.sort();
    v
}

/// Cold (no index yet: answered without it, the entries left to the
/// builder), warm (every index made: `--build-index` waits for the builder
/// the cold report started, and builds what is left) and `--no-cache`: the
/// same bytes, stdout and stderr.
fn same_three_ways(cache: &Path, args: &[&str]) {
    let mut none = args.to_vec();
    none.push("--no-cache");
    let plain = with_cache(cache, &none).expect(0);
    let cold = with_cache(cache, args).expect(0);
    let mut build = args.to_vec();
    build.push("--build-index");
    let built = with_cache(cache, &build).expect(0);
    assert_eq!(built.stdout, "", "--build-index prints no report");
    let warm = with_cache(cache, args).expect(0);
    for (what, r) in [("cold", &cold), ("warm", &warm)] {
        assert_eq!(r.stdout, plain.stdout, "{what} index, {args:?}");
        assert_eq!(r.stderr, plain.stderr, "{what} index, {args:?}");
    }
}

#[test]
fn golden_reports_are_the_same_through_the_index() {
    let cache = tempdir();
    let cases: &[(&str, &[&str])] = &[
        ("ratio", &["-l"]),
        ("ratio", &["-l", "--format", "json"]),
        ("pinned", &["-l", "--separate=cpu"]),
        ("callgraph", &["-c"]),
        ("callgraph", &["-l", "--children"]),
        ("callgraph", &["--format", "collapsed"]),
        ("callgraph", &["--format", "script"]),
    ];
    for (session, args) in cases {
        let mut all: Vec<String> = fixture_args(session);
        all.extend(args.iter().map(|s| s.to_string()));
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        same_three_ways(cache.path(), &all);
    }
    let made = entries(cache.path());
    assert!(!made.is_empty(), "no index written");
    // --no-cache writes nothing.
    let none = tempdir();
    let mut all = fixture_args("ratio");
    all.extend(["-l".to_owned(), "--no-cache".to_owned()]);
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    with_cache(none.path(), &all).expect(0);
    assert!(entries(none.path()).is_empty());
}

/// A cold report answers at once and leaves the entries to a builder it
/// starts in the background: they appear with no other command, and the
/// next report reads them (a `--build-index` that finds them all writes
/// nothing more).
#[test]
fn a_cold_report_leaves_the_index_to_a_background_builder() {
    let cache = tempdir();
    let mut all = fixture_args("ratio");
    all.push("-l".to_owned());
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    let cold = with_cache(cache.path(), &all).expect(0);
    let until = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while entries(cache.path()).is_empty() {
        assert!(
            std::time::Instant::now() < until,
            "no entry written by the background builder in 120 s"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    // Wait for the background builder to end (it holds the lock).
    let mut build = all.clone();
    build.push("--build-index");
    with_cache(cache.path(), &build).expect(0);
    let made = entries(cache.path());
    let warm = with_cache(cache.path(), &all).expect(0);
    assert_eq!(warm.stdout, cold.stdout);
    assert_eq!(warm.stderr, cold.stderr);
    with_cache(cache.path(), &build).expect(0);
    assert_eq!(
        entries(cache.path()),
        made,
        "a warm report left more to build"
    );
}

/// A cache directory another user can write to is not used, and the
/// report says so once; its answers are still right.
#[test]
fn a_cache_directory_others_can_write_is_not_used() {
    use std::os::unix::fs::PermissionsExt;
    let cache = tempdir();
    let dir = cache.path().join("profkit/symbols");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let mut all = fixture_args("ratio");
    all.push("-l".to_owned());
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    let r = with_cache(cache.path(), &all).expect(0);
    assert!(
        r.stderr.contains("symbol index cache") && r.stderr.contains("writable by group or others"),
        "{}",
        r.stderr
    );
    assert_eq!(
        r.stderr.matches("symbol index cache").count(),
        1,
        "{}",
        r.stderr
    );
    assert!(entries(cache.path()).is_empty());
    let mut none = all.clone();
    none.push("--no-cache");
    assert_eq!(with_cache(cache.path(), &none).expect(0).stdout, r.stdout);
}

/// A real recording: gcc building the workloads, system-wide (cc1, as,
/// collect2, ld, libc, libbfd, the kernel): `-l`, `-c` and folded stacks
/// through the index equal the reports without it.
#[test]
fn live_a_gcc_build_reports_the_same_through_the_index() {
    let _rec = recording();
    if !perf_ok() {
        return;
    }
    let d = tempdir();
    let w = testdata().join("workloads");
    let script = format!(
        "for i in 1 2 3; do for f in {0}/callgraph.c {0}/qsort.c {0}/shares.c {0}/phases.c; do \
         cc -O2 -g -pthread -o {1}/out $f; done; done",
        w.display(),
        d.path().display()
    );
    let run = profctl(
        d.path(),
        &[
            "record",
            "-a",
            "-g",
            "-F",
            "2000",
            "--session-dir",
            "s",
            "--",
            "sh",
            "-c",
            &script,
        ],
    );
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let s = d.path().join("s");
    let sd = s.to_str().unwrap();
    let cache = tempdir();
    for args in [
        &["--session-dir", sd, "-l"][..],
        &["--session-dir", sd, "-c", "-t", "0.5"],
        &["--session-dir", sd, "--format", "collapsed"],
    ] {
        same_three_ways(cache.path(), args);
    }
    let made = entries(cache.path());
    assert!(made.len() >= 3, "{made:?}");
    let cc1 = with_cache(cache.path(), &["--session-dir", sd, "-l", "image:cc1"]).expect(0);
    assert!(cc1.stdout.lines().count() > 5, "{}", cc1.stdout);
}

/// `--build-index` writes the entries at once and prints no report; it
/// cannot go with `--no-cache` (exit 2, the flags named), and says so when
/// there is no cache directory to write (exit 2).
#[test]
fn build_index_writes_at_once_and_refuses_no_cache() {
    let cache = tempdir();
    let mut all = fixture_args("ratio");
    all.extend(["-l".to_owned(), "--build-index".to_owned()]);
    let all: Vec<&str> = all.iter().map(String::as_str).collect();
    let r = with_cache(cache.path(), &all).expect(0);
    assert_eq!(r.stdout, "");
    assert!(!entries(cache.path()).is_empty(), "no entry written");
    let mut refused = all.clone();
    refused.push("--no-cache");
    let r = with_cache(cache.path(), &refused);
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(
        r.stderr.contains("--build-index") && r.stderr.contains("--no-cache"),
        "{}",
        r.stderr
    );
    // Nowhere to write (no XDG_CACHE_HOME, no HOME): said, not a silent run.
    let o = Command::new(PROFREPORT)
        .args(&all)
        .current_dir(cli_dir())
        .env_remove("XDG_CACHE_HOME")
        .env_remove("HOME")
        .env_remove("PROFKIT_SESSION_DIR")
        .output()
        .expect("running profreport");
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("no symbol index cache")
            && err.contains("HOME")
            && err.contains("neither XDG_CACHE_HOME nor HOME is set"),
        "{err}"
    );
}
