//! A real `perf record --call-graph dwarf` file: its samples' user
//! registers and stacks reach the sync stage in profkit's layout, and the
//! session says how much stack each sample copied; the sync stage unwinds
//! them, so the callers of the workload's hot function are named through
//! code without frame pointers, in the workload's known ratio. Skipped with a printed
//! reason when perf or a C compiler is missing or perf events cannot be
//! opened, unless PROFKIT_REQUIRE_PERF=1 (CI), where that is a failure.

use profkit_eventlog::SessionReader;
use profkit_testsupport::{function_ranges, perf_ok, skip};
use std::path::{Path, PathBuf};
use std::process::Command;

fn testdata() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata")
}

/// testdata/workloads/callgraph.c built into `dir` without frame
/// pointers: its user stacks can be walked with its CFI only.
fn build_callgraph(dir: &Path) -> Option<PathBuf> {
    let out = dir.join("callgraph");
    let src = testdata().join("workloads/callgraph.c");
    let status = Command::new("cc")
        .args([
            "-O1",
            "-g",
            "-fomit-frame-pointer",
            "-fno-optimize-sibling-calls",
        ])
        .arg("-o")
        .arg(&out)
        .arg(&src)
        .status();
    match status {
        Ok(s) if s.success() => Some(out),
        Ok(s) => {
            skip(format!("cc failed on {} ({s})", src.display()));
            None
        }
        Err(e) => {
            skip(format!("no C compiler (cc: {e})"));
            None
        }
    }
}

#[test]
fn a_dwarf_perf_data_is_imported_with_its_user_stacks() {
    let perf = std::env::var("PERF").unwrap_or_else(|_| "/usr/bin/perf".into());
    if !Path::new(&perf).exists() {
        skip(format!("no perf at {perf} (set PERF=...)"));
        return;
    }
    if !perf_ok() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let Some(workload) = build_callgraph(d.path()) else {
        return;
    };
    let data = d.path().join("dwarf.data");
    // 125 rounds of callgraph: about 1 s of CPU, some 1,000 samples.
    let out = Command::new(&perf)
        .args(["record", "-q", "--no-buildid", "-e", "cpu-clock"])
        .args(["--call-graph", "dwarf", "-F", "1000", "-o"])
        .arg(&data)
        .arg("--")
        .arg(&workload)
        .arg("125")
        .current_dir(d.path())
        .output()
        .unwrap();
    if !out.status.success() || !data.exists() {
        skip(format!(
            "perf record --call-graph dwarf failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
        return;
    }
    let bytes = std::fs::metadata(&data).unwrap().len();
    let session = d.path().join("s/session.pkl");
    let t = std::time::Instant::now();
    let summary = profkit_import::import_perf_data(&data, &session).unwrap();
    eprintln!(
        "{bytes} bytes of perf.data imported in {:?}: {summary:?}",
        t.elapsed()
    );
    assert!(summary.samples >= 300, "{summary:?}");
    assert_eq!(
        (summary.bad_records, summary.skipped),
        (0, 0),
        "{summary:?}"
    );
    assert!(summary.warnings.is_empty(), "{:?}", summary.warnings);
    // Every sample of the workload's thread has its user context (kernel
    // mode ones too: the registers it entered the kernel with).
    assert!(
        summary.user_stacks * 10 > summary.samples * 9,
        "{} of {} samples with user stacks",
        summary.user_stacks,
        summary.samples
    );
    assert!(summary.written * 10 > summary.samples * 9, "{summary:?}");
    let r = SessionReader::open(&session).unwrap();
    assert_eq!(r.header().event.user_stack, 8192);
    assert!(r.header().event.callchain);

    // c's samples, unwound at import: c <- a|b <- main, b twice a's share.
    let ranges = function_ranges(&workload, &["c", "a", "b", "main"]);
    let caller_in = |off: u64, i: usize| {
        let off = off.wrapping_sub(1);
        ranges[i].0 <= off && off < ranges[i].1
    };
    let table = r.stack_table();
    let mut prog = None;
    let mut samples = Vec::new();
    for c in r.chunks() {
        r.for_each_sample(
            c,
            |s| samples.push(*s),
            |m| match m {
                profkit_eventlog::Event::CookieDef(e) if Path::new(&e.path) == workload => {
                    prog = Some(e.cookie)
                }
                _ => {}
            },
        )
        .unwrap();
    }
    let prog = prog.expect("the workload's cookie is defined");
    let in_c: Vec<_> = samples
        .iter()
        .filter(|s| {
            s.cookie == prog && !s.kernel && ranges[0].0 <= s.offset && s.offset < ranges[0].1
        })
        .collect();
    let (mut to_main, mut via_a, mut via_b) = (0, 0, 0);
    for s in &in_c {
        let frames = s.stack.and_then(|id| table.get(id)).unwrap_or(&[]);
        let has = |i| {
            frames
                .iter()
                .any(|f| f.cookie == prog && !f.kernel && caller_in(f.offset, i))
        };
        to_main += usize::from(has(3));
        via_a += usize::from(has(1));
        via_b += usize::from(has(2));
    }
    eprintln!(
        "{} samples in c: {to_main} reach main, {via_a} via a, {via_b} via b",
        in_c.len()
    );
    assert!(in_c.len() >= 300, "{} samples in c", in_c.len());
    assert!(
        to_main * 100 >= in_c.len() * 95,
        "{to_main} of {} reach main",
        in_c.len()
    );
    let share = via_a as f64 / (via_a + via_b) as f64;
    assert!((share - 1.0 / 3.0).abs() < 0.05, "a's share {share:.3}");
}
