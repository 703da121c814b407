//! Live kernel, DWARF call graphs of a stripped binary built without
//! unwind tables (its `.eh_frame` only the start files' `_start`): its
//! `.debug_frame` is only in its separate debug file.
//! With the debug file under a debug directory, the leaf's stacks reach
//! `main` through its caller; without, they break.

use crate::decode;
use crate::live::{record_command_with, user_cookie};
use profkit_perf::{EventSpec, Rate, SamplerConfig};
use profkit_sync::DebugFrameSources;
use profkit_testsupport::function_ranges;
use std::path::{Path, PathBuf};

/// `leaf` keeps data on its stack (its return address is not at sp), and
/// no function keeps a frame pointer: only the CFI steps out of it.
const PROGRAM: &str = r#"
__attribute__((noinline)) long leaf(long n) {
    volatile long buf[4] = {0};
    for (long i = 0; i < n; i++) buf[i & 3] += i * i;
    return buf[0] + buf[3];
}
__attribute__((noinline)) long caller(long n) { long r = leaf(n); return r ^ (n << 1); }
int main(int argc, char **argv) {
    long rounds = 0, total = 0;
    for (const char *p = argc > 1 ? argv[1] : "1"; *p; p++) rounds = rounds * 10 + (*p - '0');
    for (long k = 0; k < rounds; k++) total += caller(100000 + (k & 1));
    return (int)(total & 1);
}
"#;

/// The stripped binary, the unstripped one (for its symbols: same
/// layout), the debug file and the build-id.
fn build(dir: &Path) -> (PathBuf, PathBuf, PathBuf, Vec<u8>) {
    // As built: the start files' `.eh_frame` (for `_start`) stays, as in
    // every real binary built without unwind tables.
    let s = profkit_testsupport::split_without_unwind_tables(dir, "prog", PROGRAM, &[], true);
    (s.stripped, s.full, s.debug, s.build_id)
}

/// Records `bin` with `sources`: the leaf's samples of the second half of
/// the run, and how many of their stacks reach main through caller; the
/// unwinder's counters.
fn record(
    dir: &Path,
    name: &str,
    bin: &Path,
    full: &Path,
    sources: DebugFrameSources,
) -> Option<(usize, usize, profkit_sync::UnwindStats)> {
    let ranges = function_ranges(full, &["leaf", "caller", "main"]);
    let caller_in = |off: u64, i: usize| {
        let o = off.wrapping_sub(1);
        ranges[i].0 <= o && o < ranges[i].1
    };
    let mut config = SamplerConfig::new(EventSpec::parse("cpu-clock").unwrap());
    config.rate = Rate::Frequency(1000);
    config.callchain = true;
    config.user_stack = 8192;
    config.data_pages = 1024;
    let session = dir.join(name);
    // About 2 s: the stacks unwound by frame pointer while the binary's
    // tables are still being read (`frames_while_loading`, longer under a
    // loaded machine: 278 stacks in a CI run of 1 s) stay a small share.
    let run = record_command_with(&config, &session, bin, "30000", sources)?;
    let r = profkit_eventlog::SessionReader::open(&session).unwrap();
    let s = decode(&session);
    let table = r.stack_table();
    let prog = user_cookie(&s, bin).expect("the program's cookie is defined");
    // (time, reaches main through caller) of each leaf sample.
    let mut leaves: Vec<(u64, bool)> = Vec::new();
    for x in s.samples.iter().filter(|x| {
        x.pid == run.pid
            && !x.kernel
            && x.cookie == prog
            && ranges[0].0 <= x.offset
            && x.offset < ranges[0].1
    }) {
        let ours = |i: usize| {
            x.stack.and_then(|id| table.get(id)).is_some_and(|frames| {
                frames
                    .iter()
                    .any(|f| f.cookie == prog && !f.kernel && caller_in(f.offset, i))
            })
        };
        leaves.push((x.time.unwrap_or(0), ours(1) && ours(2)));
    }
    leaves.sort_unstable();
    // The second half of the run: the binary's tables are read by then
    // however loaded the machine (a CI run under the whole suite's load
    // read them 0.4 s late: the samples before were stepped by frame
    // pointer, which this program does not keep).
    let late = &leaves[leaves.len() / 2..];
    let (leaf, through) = (late.len(), late.iter().filter(|l| l.1).count());
    eprintln!(
        "{name}: {} leaf samples, {} reach main through caller; of the second half {through} of \
         {leaf}; {:?}",
        leaves.len(),
        leaves.iter().filter(|l| l.1).count(),
        run.unwind
    );
    Some((leaf, through, run.unwind))
}

#[test]
fn dwarf_stacks_of_a_stripped_binary_unwind_with_its_separate_debug_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (bin, full, debug, id) = build(d);
    let root = d.join("debug");
    let at = profkit_eventlog::build_id_path(&root, &id, ".debug");
    std::fs::create_dir_all(at.parent().unwrap()).unwrap();
    std::fs::copy(&debug, &at).unwrap();
    let with = DebugFrameSources {
        debug_dirs: vec![root],
        ..DebugFrameSources::none()
    };
    let Some((leaf, through, unwind)) = record(d, "with.pkl", &bin, &full, with) else {
        return;
    };
    assert!(leaf > 200, "only {leaf} leaf samples");
    assert!(
        through as f64 >= leaf as f64 * 0.95,
        "with the debug file: {through} of {leaf} leaf samples reach main"
    );
    assert!(unwind.from_debug_file >= 1, "{unwind:?}");
    let Some((leaf, through, unwind)) =
        record(d, "without.pkl", &bin, &full, DebugFrameSources::none())
    else {
        return;
    };
    assert!(leaf > 200, "only {leaf} leaf samples");
    assert!(
        (through as f64) < leaf as f64 * 0.5,
        "without the debug file: {through} of {leaf} leaf samples reach main"
    );
    assert_eq!(unwind.from_debug_file, 0, "{unwind:?}");
}
