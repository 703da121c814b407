//! Live kernel: a helper process dlopen()s a library mid-run; its samples
//! after the load resolve to the library's cookie, and the module-load
//! marker precedes them. And call graphs of a frame-pointer program.

use crate::decode;
use profkit_eventlog::{CookieKind, Event, SessionHeader};
use profkit_perf::{EventSpec, Rate, SamplerConfig};
use profkit_sync::{FileSink, Recorder, RecorderOptions, SyncOptions, SyncStage};
use profkit_testsupport::function_ranges;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

fn cc(args: &[&str]) -> bool {
    Command::new("cc")
        .args(args)
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

#[test]
fn samples_after_dlopen_resolve_to_the_library() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let lib_c = d.join("hot.c");
    std::fs::write(
        &lib_c,
        "volatile unsigned long sink;\n\
         unsigned long hot_spin(unsigned long n) { unsigned long x = 0; for (unsigned long i = 0; i < n; i++) { x = x * 6364136223846793005UL + i; } sink = x; return x; }\n",
    )
    .unwrap();
    let main_c = d.join("main.c");
    std::fs::write(
        &main_c,
        "#include <dlfcn.h>\n#include <stdio.h>\n#include <unistd.h>\n\
         int main(int argc, char **argv) { usleep(300000);\n\
         void *h = dlopen(argv[1], RTLD_NOW); if (!h) { fprintf(stderr, \"%s\\n\", dlerror()); return 2; }\n\
         unsigned long (*f)(unsigned long) = (unsigned long (*)(unsigned long))dlsym(h, \"hot_spin\");\n\
         f(400000000UL); return 0; }\n",
    )
    .unwrap();
    let lib = d.join("libhot.so");
    let exe = d.join("dlopener");
    if !cc(&[
        "-O1",
        "-shared",
        "-fPIC",
        "-Wl,--build-id",
        "-o",
        lib.to_str().unwrap(),
        lib_c.to_str().unwrap(),
    ]) || !cc(&[
        "-O1",
        "-o",
        exe.to_str().unwrap(),
        main_c.to_str().unwrap(),
        "-ldl",
    ]) {
        panic!("cc could not build the dlopen fixture");
    }

    let mut config = SamplerConfig::new(EventSpec::parse("cpu-clock").unwrap());
    config.rate = Rate::Frequency(1000);
    let Some(sampler) = profkit_testsupport::open_or_skip(&config) else {
        return;
    };
    let layout = sampler.layout();
    let mut stage = SyncStage::with_probe(
        SyncOptions::new(layout),
        profkit_sync::ProcfsProbe::default(),
    );
    stage.seed_from_proc();
    let sink = FileSink::create(d.join("session.pkl"), SessionHeader::default()).unwrap();
    let mut rec =
        Recorder::new(sampler, stage, Box::new(sink), RecorderOptions::default()).unwrap();
    rec.source_mut().enable().unwrap();
    let mut child = Command::new(&exe).arg(&lib).spawn().unwrap();
    let pid = child.id();
    loop {
        std::thread::sleep(Duration::from_millis(250));
        rec.round();
        if let Some(st) = child.try_wait().unwrap() {
            assert!(st.success(), "the fixture failed: {st}");
            break;
        }
    }
    rec.stop().unwrap();

    let s = decode(&d.join("session.pkl"));
    let lib_cookie = user_cookie(&s, &lib).expect("the library's cookie is defined");
    let ours: Vec<_> = s
        .samples
        .iter()
        .filter(|x| x.pid == pid && !x.kernel)
        .collect();
    let in_lib = ours.iter().filter(|x| x.cookie == lib_cookie).count();
    assert!(
        in_lib as f64 >= ours.len() as f64 * 0.8 && in_lib > 50,
        "{in_lib} of {} user samples of the helper in libhot.so",
        ours.len()
    );
    // The module-load marker of the library comes before its first sample.
    let load_seen = std::cell::Cell::new(false);
    let mut ok = false;
    let r = profkit_eventlog::SessionReader::open(d.join("session.pkl")).unwrap();
    'outer: for c in r.chunks() {
        let mut first_sample_before_load = false;
        r.for_each_sample(
            c,
            |x| {
                if x.cookie == lib_cookie && !load_seen.get() {
                    first_sample_before_load = true;
                }
                if x.cookie == lib_cookie && load_seen.get() {
                    ok = true;
                }
            },
            |m| {
                if matches!(m, Event::ModuleLoad { cookie, pid: Some(p), .. } if cookie == lib_cookie && p == pid) {
                    load_seen.set(true);
                }
            },
        )
        .unwrap();
        assert!(
            !first_sample_before_load,
            "a library sample came before its module-load marker"
        );
        if ok {
            break 'outer;
        }
    }
    assert!(ok);
    // The library's offsets fall inside the file.
    let len = std::fs::metadata(&lib).unwrap().len();
    assert!(ours
        .iter()
        .filter(|x| x.cookie == lib_cookie)
        .all(|x| x.offset < len));
}

/// Live kernel, call graphs: a frame-pointer program spends its time in
/// `c`, called from `a` and from `b`; the recorded stacks of `c`'s samples
/// name `a` or `b` as caller, then `main`, all in the program's binary.
#[test]
fn call_stacks_of_a_frame_pointer_program_name_its_callers() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let src = d.join("cg.c");
    // `c` is not a leaf (it calls `helper`), so gcc gives it a frame even
    // where it would omit the frame of a leaf.
    std::fs::write(
        &src,
        "#include <stdlib.h>\n\
         volatile unsigned long sink;\n\
         __attribute__((noinline)) unsigned long helper(unsigned long x) { return x * 6364136223846793005UL + 1442695040888963407UL; }\n\
         __attribute__((noinline)) unsigned long c(unsigned long n) { unsigned long x = n; for (unsigned long i = 0; i < n; i++) x = helper(x) ^ i; return x; }\n\
         __attribute__((noinline)) unsigned long a(unsigned long n) { unsigned long r = c(n); sink = r; return r + 1; }\n\
         __attribute__((noinline)) unsigned long b(unsigned long n) { unsigned long r = c(n * 2); sink = r; return r + 2; }\n\
         int main(int argc, char **argv) { unsigned long n = strtoul(argv[1], 0, 10), t = 0;\n\
         for (int k = 0; k < 10; k++) { t += a(n); t += b(n); } sink = t; return 0; }\n",
    )
    .unwrap();
    let exe = d.join("cg");
    if !cc(&[
        "-O1",
        "-fno-omit-frame-pointer",
        "-o",
        exe.to_str().unwrap(),
        src.to_str().unwrap(),
    ]) {
        panic!("cc could not build the call-graph fixture");
    }
    let ranges = function_ranges(&exe, &["c", "a", "b", "main"]);
    let within = |off: u64, i: usize| ranges[i].0 <= off && off < ranges[i].1;
    // A return address may be one past its function's last call.
    let caller_in = |off: u64, i: usize| within(off.wrapping_sub(1), i);

    let mut config = SamplerConfig::new(EventSpec::parse("cpu-clock").unwrap());
    config.rate = Rate::Frequency(1000);
    config.callchain = true;
    let session = d.join("session.pkl");
    let Some(run) = record_command(&config, &session, &exe, "30000000") else {
        return;
    };
    let (pid, status) = (run.pid, run.status);

    let r = profkit_eventlog::SessionReader::open(&session).unwrap();
    assert_eq!(r.version(), 2);
    let s = decode(&session);
    let table = r.stack_table();
    assert_eq!(table.conflicts(), 0);
    let prog = user_cookie(&s, &exe).expect("the program's cookie is defined");
    let in_c: Vec<_> = s
        .samples
        .iter()
        .filter(|x| x.pid == pid && !x.kernel && x.cookie == prog && within(x.offset, 0))
        .collect();
    let (mut via_a, mut via_b) = (0, 0);
    for x in &in_c {
        let Some(frames) = x.stack.and_then(|id| table.get(id)) else {
            continue;
        };
        if frames.len() < 2 || frames[..2].iter().any(|f| f.cookie != prog || f.kernel) {
            continue;
        }
        if caller_in(frames[1].offset, 3) {
            if caller_in(frames[0].offset, 1) {
                via_a += 1;
            } else if caller_in(frames[0].offset, 2) {
                via_b += 1;
            }
        }
    }
    let total: u64 = status.accounting.iter().map(|a| a.samples_written).sum();
    let len = std::fs::metadata(&session).unwrap().len();
    let def_bytes: usize = table
        .iter()
        .map(|(id, frames)| {
            let mut enc = profkit_eventlog::ChunkEncoder::new();
            enc.event(&Event::StackDef {
                id,
                frames: frames.to_vec(),
            });
            enc.bytes().len()
        })
        .sum();
    eprintln!(
        "live -g: {} samples in c: {via_a} via a, {via_b} via b; session {len} bytes, \
         {total} samples, {:.2} bytes/sample ({} stacks: {:.2} bytes/sample)",
        in_c.len(),
        len as f64 / total as f64,
        table.len(),
        def_bytes as f64 / total as f64,
    );
    let ours: Vec<_> = s.samples.iter().filter(|x| x.pid == pid).collect();
    let mut by_cookie = std::collections::BTreeMap::new();
    for x in &ours {
        *by_cookie.entry((x.cookie == prog, x.kernel)).or_insert(0) += 1;
    }
    assert!(
        in_c.len() > 100,
        "only {} samples in c; the fixture's samples by (in the program, kernel): {by_cookie:?}; \
         accounting {:?}",
        in_c.len(),
        status.accounting
    );
    assert!(
        (via_a + via_b) as f64 >= in_c.len() as f64 * 0.9,
        "{via_a} + {via_b} of {} samples in c have c <- a|b <- main",
        in_c.len()
    );
    // b does twice a's work.
    assert!(via_a > 10 && via_b > via_a, "a: {via_a}, b: {via_b}");
}

/// The cookie a session defines for the user binary at `path`.
pub(crate) fn user_cookie(s: &crate::Decoded, path: &Path) -> Option<u64> {
    s.markers.iter().find_map(|(_, m)| match m {
        Event::CookieDef(e) if e.kind == CookieKind::User && Path::new(&e.path) == path => {
            Some(e.cookie)
        }
        _ => None,
    })
}

/// Live kernel, DWARF call graphs: the bundled qsort workload, built
/// without frame pointers (like glibc, which its comparator is called
/// from), sorts once from `sort_once` and twice from `sort_twice` a round.
/// Unwound at sync time, the comparator's samples reach `main` through
/// glibc's qsort and split 1 : 2 between the callers; no stack bytes reach
/// the session.
#[test]
fn dwarf_call_stacks_through_glibc_qsort_reach_main_in_the_known_ratio() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/workloads/qsort.c");
    let exe = d.join("qsort");
    if !cc(&[
        "-O2",
        "-fomit-frame-pointer",
        "-o",
        exe.to_str().unwrap(),
        src.to_str().unwrap(),
    ]) {
        panic!("cc could not build the qsort fixture");
    }
    let ranges = function_ranges(&exe, &["by_key", "sort_once", "sort_twice", "main"]);
    let within = |off: u64, i: usize| ranges[i].0 <= off && off < ranges[i].1;
    let caller_in = |off: u64, i: usize| within(off.wrapping_sub(1), i);

    let mut config = SamplerConfig::new(EventSpec::parse("cpu-clock").unwrap());
    config.rate = Rate::Frequency(1000);
    config.callchain = true;
    config.user_stack = 8192;
    config.data_pages = 4096;
    let session = d.join("session.pkl");
    let Some(run) = record_command(&config, &session, &exe, "80") else {
        return;
    };
    let (pid, status, unwind, slowest) = (run.pid, run.status, run.unwind, run.slowest);

    let r = profkit_eventlog::SessionReader::open(&session).unwrap();
    assert_eq!(r.header().event.user_stack, 8192);
    assert_eq!(r.version(), 3);
    let s = decode(&session);
    let table = r.stack_table();
    // The recursion's stacks are written on their outer parts.
    let on = s
        .markers
        .iter()
        .filter(|(_, m)| matches!(m, Event::StackDefOn { .. }))
        .count();
    assert!(
        on > 0 && table.unresolved() == 0,
        "{on} StackDefOn, {} unresolved",
        table.unresolved()
    );
    let prog = user_cookie(&s, &exe).expect("the program's cookie is defined");
    let in_cmp: Vec<_> = s
        .samples
        .iter()
        .filter(|x| x.pid == pid && !x.kernel && x.cookie == prog && within(x.offset, 0))
        .collect();
    let (mut to_main, mut once, mut twice) = (0, 0, 0);
    for x in &in_cmp {
        let Some(frames) = x.stack.and_then(|id| table.get(id)) else {
            continue;
        };
        let ours = |i: usize| {
            frames
                .iter()
                .any(|f| f.cookie == prog && !f.kernel && caller_in(f.offset, i))
        };
        to_main += usize::from(ours(3));
        once += usize::from(ours(1));
        twice += usize::from(ours(2));
    }
    let total: u64 = status.accounting.iter().map(|a| a.samples_written).sum();
    let lost: u64 = status.accounting.iter().map(|a| a.lost_total()).sum();
    let cut: u64 = status.accounting.iter().map(|a| a.user_stacks_cut).sum();
    let unknown: u64 = status.accounting.iter().map(|a| a.stacks_unknown).sum();
    let len = std::fs::metadata(&session).unwrap().len();
    eprintln!(
        "live dwarf: {} comparator samples: {to_main} reach main, {once} via sort_once, \
         {twice} via sort_twice; session {len} bytes, {total} samples ({:.2} bytes/sample), \
         {lost} lost, {cut} stacks cut, {unknown} unknown; slowest round {slowest:?}; \
         unwinder {unwind:?}",
        in_cmp.len(),
        len as f64 / total as f64,
    );
    assert!(
        in_cmp.len() > 200,
        "only {} comparator samples",
        in_cmp.len()
    );
    assert!(
        to_main as f64 >= in_cmp.len() as f64 * 0.95,
        "{to_main} of {} comparator samples reach main",
        in_cmp.len()
    );
    let share = once as f64 / (once + twice) as f64;
    assert!(
        (share - 1.0 / 3.0).abs() < 0.03,
        "sort_once's share {share:.3} (want 1/3): {once} once, {twice} twice"
    );
    // Whole-system losses to unresolvable samples of other processes may
    // happen; none to a full ring or buffer.
    let ring: u64 = status
        .accounting
        .iter()
        .map(|a| a.lost_ring + a.lost_overflow + a.kernel_lost)
        .sum();
    assert_eq!(ring, 0, "{:?}", status.accounting);
    assert!(unwind.binaries >= 2, "{unwind:?}");
}

/// What [`record_command`] saw.
pub(crate) struct Run {
    pub(crate) pid: u32,
    pub(crate) status: profkit_sync::RecorderStatus,
    /// The unwinder's counters just before stop.
    pub(crate) unwind: profkit_sync::UnwindStats,
    /// The longest sync round.
    pub(crate) slowest: Duration,
}

/// Records the whole system with `config` into `session` (a header saying
/// its call-graph mode) while `exe arg` runs, a round every 250 ms as the
/// daemon does; None when the events cannot be opened and the test may
/// skip (`open_or_skip`).
fn record_command(config: &SamplerConfig, session: &Path, exe: &Path, arg: &str) -> Option<Run> {
    record_command_with(config, session, exe, arg, Default::default())
}

/// One whole-system DWARF recording at a time: two at once (two copies
/// of every user stack, two stages unwinding them) cut the qsort test's
/// stacks on a 2-core machine.
static RECORDING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// [`record_command`], the stage looking for separate debug files in
/// `debug_frame`.
pub(crate) fn record_command_with(
    config: &SamplerConfig,
    session: &Path,
    exe: &Path,
    arg: &str,
    debug_frame: profkit_sync::DebugFrameSources,
) -> Option<Run> {
    let _one = RECORDING.lock().unwrap_or_else(|e| e.into_inner());
    let sampler = profkit_testsupport::open_or_skip(config)?;
    let layout = sampler.layout();
    assert_eq!(
        (layout.callchain, layout.user_stack),
        (config.callchain, config.user_stack)
    );
    let mut stage = SyncStage::with_probe(
        SyncOptions {
            layout,
            debug_frame,
        },
        profkit_sync::ProcfsProbe::default(),
    );
    stage.seed_from_proc();
    let mut header = SessionHeader::default();
    header.event.callchain = config.callchain;
    header.event.user_stack = config.user_stack;
    let sink = FileSink::create(session.to_path_buf(), header).unwrap();
    let mut rec =
        Recorder::new(sampler, stage, Box::new(sink), RecorderOptions::default()).unwrap();
    rec.source_mut().enable().unwrap();
    let mut child = Command::new(exe).arg(arg).spawn().unwrap();
    let pid = child.id();
    let mut slowest = Duration::ZERO;
    loop {
        std::thread::sleep(Duration::from_millis(250));
        let t = std::time::Instant::now();
        rec.round();
        slowest = slowest.max(t.elapsed());
        if let Some(st) = child.try_wait().unwrap() {
            assert!(st.success(), "the fixture failed: {st}");
            break;
        }
    }
    let unwind = rec.stage().unwind_stats();
    let status = rec.stop().unwrap();
    Some(Run {
        pid,
        status,
        unwind,
        slowest,
    })
}
