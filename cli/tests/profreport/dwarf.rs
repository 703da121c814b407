//! Live, DWARF call graphs: workloads built without frame pointers are
//! recorded with `profctl record --call-graph dwarf` (8192 bytes of user
//! stack per sample, unwound at sync time from each binary's .eh_frame),
//! and every report that shows stacks (collapsed stacks, the flame graph,
//! inclusive shares) must name the callers in the workloads' known ratios.
//!
//! - `qsort.c`: a comparator called back from glibc's qsort;
//! - `libhot.c` + `shlib_main.c`: a hot path in a shared library;
//! - `inline.rs`: a Rust program whose hot code is inlined.
//!
//! Gated like `live.rs`: skipped with a printed reason when perf events
//! cannot be opened or there is no compiler, a failure under
//! PROFKIT_REQUIRE_PERF=1.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::*;

use profkit_testsupport::perf_ok;

/// `cc -O2 -fomit-frame-pointer ARGS` in `dir`, with a build-id of its own.
fn cc(dir: &Path, args: &[&str]) -> bool {
    compile(
        Command::new("cc")
            .args(["-O2", "-fomit-frame-pointer", &unique_build_id()])
            .args(args)
            .current_dir(dir),
        "C compiler (cc)",
    )
}

/// A workload source of `testdata/workloads/`, absolute.
fn workload(name: &str) -> PathBuf {
    testdata().join("workloads").join(name)
}

/// `profctl record --call-graph dwarf -F 4000 -- CMD` in `dir`, into
/// `dir/s`.
fn record_dwarf(dir: &Path, cmd: &[&str]) {
    let mut all = vec![
        "record",
        "--call-graph",
        "dwarf",
        "-F",
        "4000",
        "--session-dir",
        "s",
        "--",
    ];
    all.extend_from_slice(cmd);
    let run = profctl(dir, &all);
    assert_eq!(
        run.code, 0,
        "profctl record --call-graph dwarf: {}{}",
        run.stdout, run.stderr
    );
}

/// profreport on `dir/s` with `args`.
fn report(dir: &Path, args: &[&str]) -> Run {
    let s = dir.join("s");
    let mut all = vec!["--session-dir", s.to_str().unwrap()];
    all.extend_from_slice(args);
    profreport(&all).expect(0)
}

/// The folded stacks of `dir/s`, outermost frame (the command name) first,
/// with their sample counts.
fn collapsed(dir: &Path) -> Vec<(Vec<String>, u64)> {
    collapsed_with(dir, &[])
}

/// [`collapsed`] with more arguments (`--inline`).
fn collapsed_with(dir: &Path, more: &[&str]) -> Vec<(Vec<String>, u64)> {
    let mut args = vec!["--format", "collapsed"];
    args.extend_from_slice(more);
    let run = report(dir, &args);
    run.stdout
        .lines()
        .map(|l| {
            let (stack, n) = l
                .rsplit_once(' ')
                .unwrap_or_else(|| panic!("not a folded stack: {l:?}"));
            let n = n.parse().unwrap_or_else(|e| panic!("count of {l:?}: {e}"));
            (stack.split(';').map(str::to_owned).collect(), n)
        })
        .collect()
}

/// `-l --children` as JSON: inclusive samples per symbol.
fn inclusive(dir: &Path) -> (serde_json::Value, BTreeMap<String, u64>) {
    inclusive_with(dir, &[])
}

/// [`inclusive`] with more arguments (`--inline`).
fn inclusive_with(dir: &Path, more: &[&str]) -> (serde_json::Value, BTreeMap<String, u64>) {
    let mut args = vec!["-l", "--children", "--format", "json"];
    args.extend_from_slice(more);
    let v = report(dir, &args).json();
    let mut by = BTreeMap::new();
    for r in rows(&v) {
        *by.entry(r["symbol"].as_str().unwrap().to_owned())
            .or_default() += r["inclusive"].as_u64().unwrap();
    }
    (v, by)
}

/// Session bytes per sample of `dir/s`.
fn bytes_per_sample(dir: &Path, samples: u64) -> f64 {
    let len = std::fs::metadata(dir.join("s/session.pkl")).unwrap().len();
    len as f64 / samples.max(1) as f64
}

/// Every `<title>` of an SVG (a frame's "NAME (N samples, P%)"), checking
/// on the way that the whole document parses as XML.
fn svg_titles(svg: &str) -> Vec<String> {
    use quick_xml::events::Event;
    let mut r = quick_xml::Reader::from_str(svg);
    let mut titles = Vec::new();
    let mut in_title = false;
    loop {
        match r
            .read_event()
            .unwrap_or_else(|e| panic!("SVG does not parse at byte {}: {e}", r.buffer_position()))
        {
            Event::Start(e) => {
                in_title = e.name().as_ref() == b"title";
                if in_title {
                    titles.push(String::new());
                }
            }
            Event::End(_) => in_title = false,
            Event::Text(t) if in_title => {
                titles
                    .last_mut()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(t.as_ref()));
            }
            Event::GeneralRef(g) if in_title => {
                let g = String::from_utf8_lossy(g.as_ref()).into_owned();
                titles.last_mut().unwrap().push_str(&format!("&{g};"));
            }
            Event::Eof => break,
            _ => {}
        }
    }
    titles
}

/// A flame-graph title split into the frame's name and its samples.
fn frame_of(title: &str) -> Option<(&str, u64)> {
    let (name, rest) = title.rsplit_once(" (")?;
    let n = rest.split_once(" samples")?.0.replace(',', "");
    Some((name, n.parse().ok()?))
}

/// `part` of `whole`, in percent.
fn pct(part: u64, whole: u64) -> f64 {
    part as f64 * 100.0 / whole.max(1) as f64
}

/// qsort.c through glibc's qsort (built without frame pointers, like
/// glibc): the comparator's stacks read main → sort_once|sort_twice →
/// qsort_r → msort_with_tmp… → by_key in the collapsed output and the flame
/// graph, and sort_once : sort_twice is 1 : 2.
#[test]
fn live_dwarf_qsort_collapsed_stacks_flame_graph_and_inclusive_shares() {
    let _rec = recording();
    if !perf_ok() {
        return;
    }
    let d = tempdir();
    let src = workload("qsort.c");
    if !cc(d.path(), &["-o", "qsort", src.to_str().unwrap()]) {
        return;
    }
    // About 2 s of work: ~8000 samples at 4 kHz, so the sampling error of a
    // 1/3 share is about half a point.
    let exe = d.path().join("qsort");
    record_dwarf(d.path(), &[exe.to_str().unwrap(), "80"]);

    // Collapsed stacks through the comparator. glibc 2.36's qsort jumps to
    // qsort_r (a tail call, so qsort is not on the stack); an older or
    // newer one may keep it: allowed, not required.
    let stacks = collapsed(d.path());
    let (mut in_cmp, mut good, mut once, mut twice) = (0u64, 0u64, 0u64, 0u64);
    let mut bad: Vec<(String, u64)> = Vec::new();
    for (frames, n) in &stacks {
        let Some(k) = frames.iter().position(|f| f == "by_key") else {
            continue;
        };
        in_cmp += n;
        let reads_right = frames[..k].iter().rposition(|f| f == "main").and_then(|m| {
            let (caller, mut rest) = frames.get(m + 1..k)?.split_first()?;
            let caller = caller.as_str();
            if rest.first().is_some_and(|f| f == "qsort") {
                rest = &rest[1..];
            }
            let ok = matches!(caller, "sort_once" | "sort_twice")
                && rest.first().is_some_and(|f| f == "qsort_r")
                && rest.len() >= 2
                && rest[1..].iter().all(|f| f.starts_with("msort_with_tmp"));
            ok.then_some(caller)
        });
        match reads_right {
            Some("sort_once") => once += n,
            Some(_) => twice += n,
            None => bad.push((frames.join(";"), *n)),
        }
        good += u64::from(reads_right.is_some()) * n;
    }

    let (v, incl) = inclusive(d.path());
    let total = v["total_samples"].as_u64().unwrap();
    let lost = v["lost"]["total"].as_u64().unwrap_or(0);
    let i = |s: &str| incl.get(s).copied().unwrap_or(0);
    let (s_once, s_twice) = (i("sort_once"), i("sort_twice"));
    let incl_once = pct(s_once, s_once + s_twice);
    let stack_once = pct(once, once + twice);
    bad.sort_by_key(|s| std::cmp::Reverse(s.1));
    eprintln!(
        "qsort dwarf: {total} samples ({lost} lost), {:.2} session bytes/sample; \
         by_key in {in_cmp}: {good} ({:.2} %) read main → sort_* → qsort_r → msort_with_tmp… → by_key, \
         {once} via sort_once ({stack_once:.2} %), {twice} via sort_twice; \
         inclusive sort_once {s_once}, sort_twice {s_twice} (sort_once {incl_once:.2} % of both), \
         main {}, qsort_r {}, by_key {}; other by_key stacks: {:?}",
        bytes_per_sample(d.path(), total),
        pct(good, in_cmp),
        i("main"),
        i("qsort_r"),
        i("by_key"),
        &bad[..bad.len().min(3)],
    );
    assert!(in_cmp > 1000, "only {in_cmp} samples in by_key");
    assert!(
        good as f64 >= in_cmp as f64 * 0.95,
        "{good} of {in_cmp} by_key samples read main → sort_* → qsort_r → msort_with_tmp… → by_key; \
         others: {bad:?}"
    );
    assert!(
        (stack_once - 100.0 / 3.0).abs() <= 3.0,
        "by_key via sort_once: {stack_once:.2} % (want 33.3 ± 3)"
    );
    // Inclusive shares: all the sorting (by_key and msort) is under one of
    // the two callers, 1 : 2.
    assert!(
        (incl_once - 100.0 / 3.0).abs() <= 3.0,
        "inclusive sort_once {s_once}, sort_twice {s_twice}: {incl_once:.2} % (want 33.3 ± 3)"
    );
    assert!(
        (pct(s_twice, s_once + s_twice) - 200.0 / 3.0).abs() <= 3.0,
        "inclusive sort_twice"
    );

    // The flame graph has the same frames, and by_key's boxes add up to its
    // inclusive samples.
    let svg_path = d.path().join("x.svg");
    report(
        d.path(),
        &["--format", "flamegraph", "-o", svg_path.to_str().unwrap()],
    );
    let svg = std::fs::read_to_string(&svg_path).unwrap();
    let frames: Vec<(String, u64)> = svg_titles(&svg)
        .iter()
        .filter_map(|t| frame_of(t).map(|(s, n)| (s.to_owned(), n)))
        .collect();
    let has = |p: &dyn Fn(&str) -> bool| frames.iter().any(|(s, _)| p(s));
    for name in ["main", "sort_once", "sort_twice", "qsort_r", "by_key"] {
        assert!(has(&|s| s == name), "no {name} frame in the flame graph");
    }
    assert!(
        has(&|s| s.starts_with("msort_with_tmp")),
        "no msort_with_tmp* frame in the flame graph"
    );
    let boxes: u64 = frames
        .iter()
        .filter(|(s, _)| s == "by_key")
        .map(|(_, n)| n)
        .sum();
    eprintln!(
        "qsort dwarf: flame graph {} bytes, {} frames; by_key boxes add up to {boxes}",
        svg.len(),
        frames.len()
    );
    assert_eq!(
        boxes,
        i("by_key"),
        "by_key's boxes against its inclusive samples"
    );
}

/// libhot.so's hot path (built without frame pointers, called through the
/// PLT from a program built without them): its samples reach main through
/// outer_a (1 call a round) and outer_b (2 calls).
#[test]
fn live_dwarf_shared_library_hot_path_reaches_main_callers_1_to_2() {
    let _rec = recording();
    if !perf_ok() {
        return;
    }
    let d = tempdir();
    let (lib, prog) = (workload("libhot.c"), workload("shlib_main.c"));
    if !cc(
        d.path(),
        &["-shared", "-fPIC", "-o", "libhot.so", lib.to_str().unwrap()],
    ) || !cc(
        d.path(),
        &[
            "-o",
            "shlib_main",
            prog.to_str().unwrap(),
            "-L.",
            "-lhot",
            "-Wl,-rpath,$ORIGIN",
        ],
    ) {
        return;
    }
    // About 2 s of work (10 ms a round): ~8000 samples at 4 kHz.
    let exe = d.path().join("shlib_main");
    record_dwarf(d.path(), &[exe.to_str().unwrap(), "200"]);

    let (v, incl) = inclusive(d.path());
    let total = v["total_samples"].as_u64().unwrap();
    let lost = v["lost"]["total"].as_u64().unwrap_or(0);
    // The hot functions are the library's.
    for f in ["hot_entry", "hot_inner"] {
        let image = rows(&v)
            .iter()
            .find(|r| r["symbol"] == f)
            .map(|r| r["image"].clone())
            .unwrap_or_else(|| panic!("no row for {f}; warnings {}", v["warnings"]));
        assert_eq!(image, "libhot.so", "{f}'s image");
    }
    let (own_entry, own_inner) = (samples_of(&v, "hot_entry"), samples_of(&v, "hot_inner"));
    let i = |s: &str| incl.get(s).copied().unwrap_or(0);
    let (a, b) = (i("outer_a"), i("outer_b"));

    // Folded stacks through the library: main → outer_a|outer_b →
    // hot_entry, then hot_inner if the sample is in it.
    let (mut in_lib, mut good, mut via_a, mut via_b) = (0u64, 0u64, 0u64, 0u64);
    let mut bad: Vec<(String, u64)> = Vec::new();
    for (frames, n) in collapsed(d.path()) {
        let Some(e) = frames.iter().position(|f| f == "hot_entry") else {
            continue;
        };
        in_lib += n;
        let inner_ok = frames
            .iter()
            .position(|f| f == "hot_inner")
            .is_none_or(|k| k == e + 1);
        let caller = (e >= 2 && frames[e - 2] == "main" && inner_ok)
            .then(|| frames[e - 1].as_str())
            .filter(|c| matches!(*c, "outer_a" | "outer_b"));
        match caller {
            Some("outer_a") => via_a += n,
            Some(_) => via_b += n,
            None => bad.push((frames.join(";"), n)),
        }
        good += u64::from(caller.is_some()) * n;
    }
    bad.sort_by_key(|s| std::cmp::Reverse(s.1));
    let incl_a = pct(a, a + b);
    let stack_a = pct(via_a, via_a + via_b);
    let entry_share = pct(own_entry, own_entry + own_inner);
    eprintln!(
        "shlib dwarf: {total} samples ({lost} lost), {:.2} session bytes/sample; \
         library: hot_inner {own_inner}, hot_entry {own_entry} self ({entry_share:.2} % in hot_entry); \
         {good} of {in_lib} ({:.2} %) read main → outer_* → hot_entry, \
         {via_a} via outer_a ({stack_a:.2} %), {via_b} via outer_b; \
         inclusive outer_a {a}, outer_b {b} (outer_a {incl_a:.2} %), main {}, hot_entry {}; \
         other stacks: {:?}",
        bytes_per_sample(d.path(), total),
        pct(good, in_lib),
        i("main"),
        i("hot_entry"),
        &bad[..bad.len().min(3)],
    );
    assert!(in_lib > 1000, "only {in_lib} samples in the library");
    assert!(
        good as f64 >= in_lib as f64 * 0.95,
        "{good} of {in_lib} library samples reach main through outer_a|outer_b; others: {bad:?}"
    );
    assert!(
        (stack_a - 100.0 / 3.0).abs() <= 3.0,
        "via outer_a {via_a}, via outer_b {via_b}: {stack_a:.2} % (want 33.3 ± 3)"
    );
    assert!(
        (incl_a - 100.0 / 3.0).abs() <= 3.0,
        "inclusive outer_a {a}, outer_b {b}: {incl_a:.2} % (want 33.3 ± 3)"
    );
    // hot_entry runs an eighth of hot_inner's loop itself: 1/9 of the
    // library's time, with a frame of its own (rbx pushed).
    assert!(
        (entry_share - 100.0 / 9.0).abs() <= 3.0,
        "hot_entry's own share {entry_share:.2} % (want 11.1 ± 3)"
    );
}

/// inline.rs, built by rustc without frame pointers: `hot` (its work all
/// inlined from `helper`) reaches `inline::main` through the Rust runtime's
/// frames and through its callers (which reach it through the inlined
/// `dispatch`) 1 : 2; `-l --debug-info` puts `hot` at its source line.
///
/// Inlined code is counted in the function it was inlined into (`-l
/// --debug-info` gives the line of the symbol's start; stacks without
/// `--inline` have no inlined frames); with `--inline`, stacks show
/// `inline::helper (inlined)` right inside `inline::hot` and
/// `inline::dispatch (inlined)` between the callers and `hot`, as perf
/// does, and `--children` counts them as functions.
#[test]
fn live_dwarf_rust_inlined_code_counts_in_its_function_and_reaches_main() {
    let _rec = recording();
    if !perf_ok() {
        return;
    }
    let d = tempdir();
    let src = workload("inline.rs");
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let link_arg = format!("link-arg={}", unique_build_id());
    if !compile(
        Command::new(&rustc)
            .args([
                "--edition",
                "2021",
                "-C",
                "opt-level=2",
                "-C",
                "debuginfo=2",
                "-C",
                "force-frame-pointers=no",
                "-C",
                &link_arg,
                "-o",
                "inline",
            ])
            .arg(&src)
            .current_dir(d.path()),
        "Rust compiler (rustc)",
    ) {
        return;
    }
    // About 2 s of work (10 ms a round): ~8000 samples at 4 kHz.
    let exe = d.path().join("inline");
    record_dwarf(d.path(), &[exe.to_str().unwrap(), "200"]);

    // -l --debug-info: hot at the line of `fn hot`, holding nearly all of
    // the program's samples (helper's code is hot's).
    let text = std::fs::read_to_string(&src).unwrap();
    let line = 1 + text
        .lines()
        .position(|l| l.starts_with("fn hot("))
        .expect("fn hot in inline.rs");
    let v = report(d.path(), &["-l", "--debug-info", "--format", "json"]).json();
    let total = v["total_samples"].as_u64().unwrap();
    let lost = v["lost"]["total"].as_u64().unwrap_or(0);
    let hot = rows(&v)
        .into_iter()
        .find(|r| r["symbol"] == "inline::hot")
        .unwrap_or_else(|| panic!("no row for inline::hot; warnings {}", v["warnings"]));
    let in_prog: u64 = rows(&v)
        .iter()
        .filter(|r| r["image"] == "inline")
        .map(|r| r["samples"].as_u64().unwrap())
        .sum();
    let own = hot["samples"].as_u64().unwrap();
    let location = hot["location"].as_str().unwrap_or("").to_owned();
    let named_inlined: Vec<String> = rows(&v)
        .iter()
        .filter_map(|r| r["symbol"].as_str())
        .filter(|s| s.contains("helper") || s.contains("dispatch"))
        .map(str::to_owned)
        .collect();

    // Stacks with --inline: main (the C entry) … std's runtime …
    // inline::main → caller_once|caller_twice → dispatch (inlined) → hot →
    // helper (inlined) (→ what std inlined into helper).
    let plain = collapsed(d.path());
    let plain_inlined: u64 = plain
        .iter()
        .filter(|(f, _)| f.iter().any(|x| x.ends_with(" (inlined)")))
        .map(|(_, n)| n)
        .sum();
    let stacks = collapsed_with(d.path(), &["--inline"]);
    let shown = |name: &str| {
        stacks
            .iter()
            .filter(|(f, _)| f.iter().any(|x| x == name))
            .map(|(_, n)| n)
            .sum::<u64>()
    };
    let (dispatch_frames, helper_frames) = (
        shown("inline::dispatch (inlined)"),
        shown("inline::helper (inlined)"),
    );
    let (mut in_hot, mut good, mut once, mut twice) = (0u64, 0u64, 0u64, 0u64);
    let (mut in_helper, mut in_loop, mut via_dispatch) = (0u64, 0u64, 0u64);
    let mut inner_other: Vec<(String, u64)> = Vec::new();
    let mut bad: Vec<(String, u64)> = Vec::new();
    for (frames, n) in &stacks {
        let Some(h) = frames.iter().position(|f| f == "inline::hot") else {
            continue;
        };
        in_hot += n;
        match frames.get(h + 1).map(String::as_str) {
            Some("inline::helper (inlined)") => in_helper += n,
            // The `for` loop's counter: Range's next, inlined into hot.
            Some(f) if f.contains("Range") && f.ends_with("::next (inlined)") => in_loop += n,
            other => inner_other.push((other.unwrap_or("").to_owned(), *n)),
        }
        let mut up = h;
        let dispatched = up > 0 && frames[up - 1] == "inline::dispatch (inlined)";
        if dispatched {
            up -= 1;
        }
        let caller = (up >= 2
            && frames[up - 2] == "inline::main"
            && frames[..up - 2].iter().any(|f| f == "main"))
        .then(|| frames[up - 1].as_str())
        .filter(|c| matches!(*c, "inline::caller_once" | "inline::caller_twice"));
        match caller {
            Some("inline::caller_once") => once += n,
            Some(_) => twice += n,
            None => bad.push((frames.join(";"), *n)),
        }
        good += u64::from(caller.is_some()) * n;
        via_dispatch += u64::from(caller.is_some() && dispatched) * n;
    }
    bad.sort_by_key(|s| std::cmp::Reverse(s.1));
    let (_, incl) = inclusive_with(d.path(), &["--inline"]);
    let i = |s: &str| incl.get(s).copied().unwrap_or(0);
    let (c1, c2) = (i("inline::caller_once"), i("inline::caller_twice"));
    let incl_once = pct(c1, c1 + c2);
    let stack_once = pct(once, once + twice);
    eprintln!(
        "inline dwarf: {total} samples ({lost} lost), {:.2} session bytes/sample; \
         -l -g: inline::hot {own} of the program's {in_prog} ({:.2} %) at {location:?} (fn hot is line {line}); \
         rows naming helper/dispatch: {named_inlined:?}; --inline: stacks with an inline::dispatch (inlined) frame {dispatch_frames}, \
         with inline::helper (inlined) {helper_frames}, helper right inside hot {in_helper} of {in_hot} ({:.2} %), \
         Range::next (inlined) right inside hot {in_loop}, others {:?}; \
         {good} of {in_hot} hot stacks ({:.2} %) read main … inline::main → caller_* → [dispatch] → hot, \
         {via_dispatch} through dispatch (inlined); {once} via caller_once ({stack_once:.2} %), {twice} via caller_twice; \
         inclusive caller_once {c1}, caller_twice {c2} (caller_once {incl_once:.2} %), inline::main {}, main {}, \
         helper (inlined) {}, dispatch (inlined) {}; without --inline, stacks with an inlined frame: {plain_inlined}; \
         other stacks: {:?}",
        bytes_per_sample(d.path(), total),
        pct(own, in_prog),
        pct(in_helper, in_hot),
        &inner_other[..inner_other.len().min(3)],
        pct(good, in_hot),
        i("inline::main"),
        i("main"),
        i("inline::helper (inlined)"),
        i("inline::dispatch (inlined)"),
        &bad[..bad.len().min(3)],
    );
    assert_eq!(plain_inlined, 0, "inlined frames without --inline");
    assert!(
        location.ends_with(&format!("inline.rs:{line}")),
        "inline::hot at {location:?}, want inline.rs:{line}"
    );
    assert!(
        own as f64 >= in_prog as f64 * 0.95,
        "inline::hot has {own} of the program's {in_prog} samples"
    );
    assert!(in_hot > 1000, "only {in_hot} samples in inline::hot");
    assert!(
        good as f64 >= in_hot as f64 * 0.95,
        "{good} of {in_hot} samples in hot read main … inline::main → caller_* → hot; others: {bad:?}"
    );
    assert!(
        (stack_once - 100.0 / 3.0).abs() <= 3.0,
        "hot via caller_once {once}, via caller_twice {twice}: {stack_once:.2} % (want 33.3 ± 3)"
    );
    assert!(
        (incl_once - 100.0 / 3.0).abs() <= 3.0,
        "inclusive caller_once {c1}, caller_twice {c2}: {incl_once:.2} % (want 33.3 ± 3)"
    );
    // The inlined frames, required: helper right inside hot (or, for the
    // few samples on the loop counter's increment, which DWARF and
    // addr2line place in Range::next inlined into hot, that), dispatch
    // between the caller and hot; --children counts them as functions.
    assert!(
        (in_helper + in_loop) as f64 >= in_hot as f64 * 0.95,
        "inline::helper (inlined) right inside inline::hot in {in_helper} of {in_hot} samples, \
         Range::next (inlined) in {in_loop}"
    );
    assert!(
        in_helper as f64 >= in_hot as f64 * 0.85,
        "inline::helper (inlined) right inside inline::hot in {in_helper} of {in_hot} samples"
    );
    assert!(
        via_dispatch as f64 >= in_hot as f64 * 0.95,
        "inline::dispatch (inlined) between caller_* and hot in {via_dispatch} of {in_hot} \
         samples; others: {bad:?}"
    );
    assert!(
        i("inline::helper (inlined)") as f64 >= in_hot as f64 * 0.85,
        "inclusive inline::helper (inlined) {} of {in_hot}",
        i("inline::helper (inlined)")
    );
}
