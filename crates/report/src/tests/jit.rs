//! JIT code (format version 7): samples in a `Jit` cookie named by the
//! session's `JitCode` markers, wherever they come (the same chunk, a
//! later one, a later part), by generation, with lines and annotation,
//! through the flat report, the call graph and `--format script`.

use super::*;
use crate::stream::{write_stream, StreamFormat};

const PID: u32 = 77;
const DEV: u64 = 0x803;
const INODE: u64 = 12;
const DUMP: &str = "/tmp/jit-77.dump";
/// f_three: push %rbp; mov %rsp,%rbp; nop; pop %rbp; ret; nop.
const F: u64 = 0x7f00_0000_1000;
const F_CODE: [u8; 8] = [0x55, 0x48, 0x89, 0xe5, 0x90, 0x5d, 0xc3, 0x90];
const F_NAME: &str = "py::f_three:/tmp/work.py";
const G: u64 = 0x7f00_0000_2000;
const G_NAME: &str = "JS:*fib /tmp/x.js:3";

fn jit(generation: u64) -> Cookie {
    cookie::jit_cookie(PID, DEV, INODE, generation)
}

fn jit_def(generation: u64) -> Event {
    Event::CookieDef(jit_entry(PID, DUMP, DEV, INODE, generation))
}

fn f_three(generation: u64) -> Event {
    Event::JitCode(JitCode {
        cookie: jit(generation),
        addr: F,
        size: 8,
        index: 1,
        time: 1_100_000_000,
        name: F_NAME.into(),
        code: Some(F_CODE.to_vec()),
        files: vec!["/tmp/work.py".into()],
        lines: vec![
            JitLine {
                offset: 0,
                line: 1,
                discrim: 0,
                file: 0,
            },
            JitLine {
                offset: 4,
                line: 2,
                discrim: 0,
                file: 0,
            },
        ],
    })
}

fn g() -> Event {
    Event::JitCode(JitCode {
        cookie: jit(0),
        addr: G,
        size: 0x40,
        index: 2,
        time: 1_200_000_000,
        name: G_NAME.into(),
        code: None,
        ..Default::default()
    })
}

fn jit_event(callchain: bool) -> EventConfigDesc {
    EventConfigDesc {
        name: "cpu-clock".into(),
        frequency: Some(1000),
        callchain,
        jit_code: true,
        ..Default::default()
    }
}

fn find(r: &Report, image: &str, sym: &str) -> Option<u64> {
    rows(r)
        .iter()
        .find(|(i, s, _)| i == image && s.as_deref() == Some(sym))
        .map(|x| x.2)
}

fn symbols() -> ReportOptions {
    ReportOptions {
        symbols: true,
        ..Default::default()
    }
}

/// f_three's marker with its samples, g's in the chunk after its samples,
/// and an address no marker covers.
fn one_file(dir: &std::path::Path) -> PathBuf {
    write_session_of(
        dir,
        jit_event(false),
        &[
            (
                vec![jit_def(0), comm(PID, PID, "python3", true), f_three(0)],
                vec![
                    (0, PID, PID, false, jit(0), F + 4, 3),
                    (0, PID, PID, false, jit(0), F + 6, 2),
                    (1, PID, PID, false, jit(0), G + 0x10, 4),
                    (1, PID, PID, false, jit(0), 0x7f00_0000_9010, 1),
                ],
            ),
            (vec![g()], vec![]),
        ],
        None,
    )
}

#[test]
fn jit_samples_are_named_by_markers_of_the_same_and_a_later_chunk() {
    let d = tempfile::tempdir().unwrap();
    let path = one_file(d.path());
    assert_eq!(read_header(&path).unwrap().1, 7);
    let r = report_with(d.path(), symbols());
    assert_eq!(find(&r, "jit-77.dump", F_NAME), Some(5), "{:?}", rows(&r));
    assert_eq!(find(&r, "jit-77.dump", G_NAME), Some(4), "{:?}", rows(&r));
    // No marker and no perf map: not named.
    assert!(
        !rows(&r)
            .iter()
            .any(|(_, s, _)| s.as_deref().is_some_and(|s| s.contains("perfmap"))),
        "{:?}",
        rows(&r)
    );
    assert_eq!(r.header.total_samples, 10);
    // The long form shows the dump's path.
    let long = report_with(
        d.path(),
        ReportOptions {
            long_filenames: true,
            ..symbols()
        },
    );
    assert_eq!(find(&long, DUMP, F_NAME), Some(5), "{:?}", rows(&long));
}

#[test]
fn an_address_no_marker_covers_is_named_by_the_perf_map() {
    let d = tempfile::tempdir().unwrap();
    one_file(d.path());
    std::fs::write(
        d.path().join(format!("perf-{PID}.map")),
        "7f0000009000 100 perfmap_fn\n7f0000001000 8 not_this_one\n",
    )
    .unwrap();
    let r = report_with(d.path(), symbols());
    assert_eq!(
        find(&r, "jit-77.dump", "perfmap_fn"),
        Some(1),
        "{:?}",
        rows(&r)
    );
    // What a marker covers stays the marker's.
    assert_eq!(find(&r, "jit-77.dump", F_NAME), Some(5), "{:?}", rows(&r));
    assert_eq!(find(&r, "jit-77.dump", "not_this_one"), None);
}

#[test]
fn two_generations_name_the_same_address_differently() {
    let d = tempfile::tempdir().unwrap();
    let newer = match f_three(1) {
        Event::JitCode(mut j) => {
            j.name = "py::f_new:/tmp/work.py".into();
            j.time = 1_300_000_000;
            Event::JitCode(j)
        }
        _ => unreachable!(),
    };
    write_session_of(
        d.path(),
        jit_event(false),
        &[(
            vec![jit_def(0), jit_def(1), f_three(0), newer],
            vec![
                (0, PID, PID, false, jit(0), F + 4, 3),
                (0, PID, PID, false, jit(1), F + 4, 7),
            ],
        )],
        None,
    );
    let r = report_with(d.path(), symbols());
    assert_eq!(find(&r, "jit-77.dump", F_NAME), Some(3), "{:?}", rows(&r));
    assert_eq!(
        find(&r, "jit-77.dump", "py::f_new:/tmp/work.py"),
        Some(7),
        "{:?}",
        rows(&r)
    );
}

#[test]
fn a_marker_in_a_later_part_names_the_samples_of_an_earlier_one() {
    let d = tempfile::tempdir().unwrap();
    let ev = jit_event(false);
    parts::write_part(
        d.path(),
        1,
        false,
        &ev,
        &[(
            vec![jit_def(0)],
            vec![(0, PID, PID, false, jit(0), F + 4, 1, None)],
        )],
        true,
    );
    parts::write_part(
        d.path(),
        2,
        true,
        &ev,
        &[(vec![jit_def(0), f_three(0)], vec![])],
        false,
    );
    let r = report_with(d.path(), symbols());
    assert_eq!(find(&r, "jit-77.dump", F_NAME), Some(1), "{:?}", rows(&r));
    // A --time window on the first part alone still reads the second's
    // definitions (and only counts the first's samples).
    let s = Session::open_window(d.path(), Some(&TimeSpec::parse("0,5").unwrap())).unwrap();
    assert_eq!(s.parts().len(), 2);
    let r = build_report(
        &[s],
        &ReportOptions {
            time: Some(TimeSpec::parse("0,5").unwrap()),
            ..symbols()
        },
        &sources(),
        &NoProgress,
    )
    .unwrap();
    assert_eq!(find(&r, "jit-77.dump", F_NAME), Some(1), "{:?}", rows(&r));
}

#[test]
fn line_output_gives_a_jit_functions_line() {
    let d = tempfile::tempdir().unwrap();
    one_file(d.path());
    let r = report_with(
        d.path(),
        ReportOptions {
            debug_info: true,
            ..symbols()
        },
    );
    let row = r
        .rows
        .iter()
        .find(|x| x.symbol.as_deref() == Some(F_NAME))
        .unwrap();
    assert_eq!(row.location(), Some("work.py:1"), "{row:?}");
}

#[test]
fn annotate_disassembles_the_markers_code_with_samples_and_lines() {
    let d = tempfile::tempdir().unwrap();
    one_file(d.path());
    let src = d.path().join("src");
    std::fs::create_dir(&src).unwrap();
    std::fs::write(src.join("work.py"), "def f_three():\n    return 3\n").unwrap();
    let annotate = |assembly: bool, source: bool| {
        let r = report_with(
            d.path(),
            ReportOptions {
                annotate: Some(AnnotateOptions {
                    symbol: Some(F_NAME.into()),
                    assembly,
                    source,
                    source_dirs: vec![src.clone()],
                    ..Default::default()
                }),
                ..Default::default()
            },
        );
        r.annotations.unwrap().remove(0)
    };
    let a = annotate(true, false);
    assert_eq!((a.symbol.as_str(), &*a.image), (F_NAME, "jit-77.dump"));
    assert_eq!((a.start, a.size, a.path.as_deref()), (F, 8, Some(DUMP)));
    let insns: Vec<(u64, &str, u64, Option<u32>)> = a
        .assembly
        .as_ref()
        .unwrap()
        .iter()
        .map(|i| (i.address, i.text.as_deref().unwrap(), i.samples[0], i.line))
        .collect();
    assert_eq!(
        insns,
        [
            (F, "push   %rbp", 0, Some(1)),
            (F + 1, "mov    %rsp,%rbp", 0, Some(1)),
            (F + 4, "nop", 3, Some(2)),
            (F + 5, "pop    %rbp", 0, Some(2)),
            (F + 6, "ret", 2, Some(2)),
            (F + 7, "nop", 0, Some(2)),
        ],
        "{:?}",
        a.notes
    );
    // The source: line 2 has all five samples, its text read from
    // --source-dir.
    let a = annotate(false, true);
    let src = a.source.as_ref().unwrap();
    let file = &src.files[0];
    assert_eq!(file.file, "/tmp/work.py");
    let lines: Vec<(u32, Option<&str>, u64)> = file
        .lines
        .iter()
        .map(|l| (l.line, l.text.as_deref(), l.samples[0]))
        .collect();
    assert_eq!(
        lines,
        [(1, Some("def f_three():"), 0), (2, Some("    return 3"), 5)],
        "{:?}",
        a.notes
    );
    // A function whose code was not kept: its samples per address.
    let r = report_with(
        d.path(),
        ReportOptions {
            annotate: Some(AnnotateOptions {
                symbol: Some(G_NAME.into()),
                ..Default::default()
            }),
            ..Default::default()
        },
    );
    let a = &r.annotations.as_ref().unwrap()[0];
    assert!(
        a.notes.iter().any(|n| n.contains("did not keep")),
        "{:?}",
        a.notes
    );
    let per: Vec<(u64, u64)> = a
        .assembly
        .as_ref()
        .unwrap()
        .iter()
        .map(|i| (i.address, i.samples[0]))
        .collect();
    assert_eq!(per, [(G + 0x10, 4)]);
}

/// A JIT function called by another: its name in the call graph and in
/// `--format script`, both through the same naming.
#[test]
fn jit_names_reach_the_call_graph_and_the_script_output() {
    let d = tempfile::tempdir().unwrap();
    let header = SessionHeader {
        host: "test".into(),
        event: jit_event(true),
        cpus: vec![0],
        start_monotonic_ns: 1_000_000_000,
        sync_interval_ms: 250,
        target: "command python3".into(),
        ..Default::default()
    };
    let path = d.path().join(SESSION_FILE);
    let mut w = SessionWriter::create(&path, &header).unwrap();
    let mut enc = ChunkEncoder::new();
    for m in [jit_def(0), comm(PID, PID, "python3", true), f_three(0), g()] {
        enc.event(&m);
    }
    // f_three called from g (return address inside g).
    enc.event(&Event::StackDef {
        id: 1,
        frames: vec![Frame {
            cookie: jit(0),
            offset: G + 0x11,
            kernel: false,
        }],
    });
    for _ in 0..3 {
        enc.sample_with_stack(0, PID, PID, false, jit(0), F + 4, 1);
    }
    w.append_chunk(0, 1_250_000_000, enc.bytes()).unwrap();
    drop(w);
    let r = report_with(
        d.path(),
        ReportOptions {
            callgraph: true,
            ..Default::default()
        },
    );
    let cg = r.callgraph.as_ref().unwrap();
    let f = cg.entries.iter().find(|e| e.symbol == F_NAME).unwrap();
    let callers: Vec<(&str, u64)> = f
        .callers
        .iter()
        .map(|a| (a.symbol.as_str(), a.samples))
        .collect();
    assert_eq!(callers, [(G_NAME, 3)]);
    let s = Session::open(d.path()).unwrap();
    let mut out = Vec::new();
    write_stream(
        StreamFormat::Script,
        &[s],
        &ReportOptions::default(),
        &sources(),
        &NoProgress,
        &mut out,
    )
    .unwrap();
    let text = String::from_utf8(out).unwrap();
    assert_eq!(text.matches(F_NAME).count(), 3, "{text}");
    assert_eq!(text.matches(G_NAME).count(), 3, "{text}");
    assert!(text.contains("jit-77.dump"), "{text}");
}

/// A marker over the format's bounds is a malformed chunk: the report
/// names it and goes on with the other chunks.
#[test]
fn a_hostile_marker_is_refused_with_a_clear_error() {
    let d = tempfile::tempdir().unwrap();
    let header = SessionHeader {
        event: jit_event(false),
        cpus: vec![0],
        ..Default::default()
    };
    let path = d.path().join(SESSION_FILE);
    let mut w = SessionWriter::create(&path, &header).unwrap();
    let mut good = ChunkEncoder::new();
    good.event(&jit_def(0));
    good.event(&f_three(0));
    good.sample(0, PID, PID, false, jit(0), F + 4);
    w.append_chunk(0, 1, good.bytes()).unwrap();
    // A JitCode claiming 2^40 lines in a few bytes, written by hand.
    let mut bad = ChunkEncoder::new();
    bad.sample(0, PID, PID, false, jit(0), F + 4);
    let mut p = bad.bytes().to_vec();
    let mut body = jit(0).to_le_bytes().to_vec();
    body.extend_from_slice(&[0x80, 0x20, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00]);
    body.extend_from_slice(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x20]);
    p.push(tag::JIT_CODE);
    p.push(body.len() as u8);
    p.extend_from_slice(&body);
    w.append_chunk(1, 2, &p).unwrap();
    drop(w);
    let r = report_with(d.path(), symbols());
    assert_eq!(find(&r, "jit-77.dump", F_NAME), Some(2), "{:?}", rows(&r));
    let warned = r.warnings.join("\n");
    assert!(
        warned.contains("malformed JitCode") && warned.contains("lines"),
        "{warned}"
    );
}

/// Past the report's bounds, markers are counted and named in a warning,
/// and their addresses fall back to the perf map.
#[test]
fn markers_past_the_reports_bounds_are_counted_in_a_warning() {
    let d = tempfile::tempdir().unwrap();
    one_file(d.path());
    std::fs::write(
        d.path().join(format!("perf-{PID}.map")),
        "7f0000002000 40 fib_from_the_perf_map\n",
    )
    .unwrap();
    // No room at all (which of several markers would fit first depends
    // on how the chunks are shared among workers).
    crate::naming::jit::TEST_BOUNDS.with(|b| b.set(Some((0, 1 << 20))));
    let r = report_with(d.path(), symbols());
    crate::naming::jit::TEST_BOUNDS.with(|b| b.set(None));
    assert_eq!(find(&r, "jit-77.dump", F_NAME), None, "{:?}", rows(&r));
    assert_eq!(find(&r, "jit-77.dump", G_NAME), None, "{:?}", rows(&r));
    assert_eq!(
        find(&r, "jit-77.dump", "fib_from_the_perf_map"),
        Some(4),
        "{:?}",
        rows(&r)
    );
    let warned = r.warnings.join("\n");
    assert!(
        warned.contains("2 JIT code markers were not read: over the report's bounds"),
        "{warned}"
    );
    // Within the bounds, no such warning.
    let r = report_with(d.path(), symbols());
    assert_eq!(find(&r, "jit-77.dump", G_NAME), Some(4), "{:?}", rows(&r));
    assert!(!r.warnings.join("\n").contains("JIT code markers"));
}

/// A session of version 6 (no JIT) still reads as before.
#[test]
fn a_version_6_session_still_reads() {
    let d = tempfile::tempdir().unwrap();
    let path = write_session_of(
        d.path(),
        EventConfigDesc {
            name: "cpu-clock".into(),
            sample_times: true,
            ..Default::default()
        },
        &[(
            vec![def(APP, CookieKind::User, "/usr/bin/app", 0, None)],
            vec![(0, 10, 10, false, APP, 0x100, 2)],
        )],
        None,
    );
    assert_eq!(read_header(&path).unwrap().1, 6);
    let r = report_with(d.path(), ReportOptions::default());
    assert_eq!(r.header.total_samples, 2);
}

/// The parts read after a `--time` window for late JIT definitions are
/// bounded: those starting more than `JIT_DEFINITIONS_AFTER_NS` after it
/// are not opened (a window of a week-long session does not read the
/// rest of the week).
#[test]
fn a_time_window_reads_later_parts_only_within_the_bound() {
    let d = tempfile::tempdir().unwrap();
    let ev = jit_event(false);
    // 10 s parts: the window is the first; part 62 starts 610 s in.
    let last = 2 + crate::JIT_DEFINITIONS_AFTER_NS / 10_000_000_000;
    for n in 1..=last {
        let rounds = if n == 1 {
            vec![(
                vec![jit_def(0)],
                vec![(0, PID, PID, false, jit(0), F + 4, 1, None)],
            )]
        } else {
            vec![(vec![jit_def(0)], vec![])]
        };
        parts::write_part(d.path(), n, n == last, &ev, &rounds, n != last);
    }
    let s = Session::open_window(d.path(), Some(&TimeSpec::parse("0,5").unwrap())).unwrap();
    let numbers: Vec<u64> = s.parts().iter().filter_map(|p| p.number()).collect();
    assert_eq!(numbers.first(), Some(&1));
    assert_eq!(
        numbers.len() as u64,
        last - 1,
        "the part starting past the bound is not read: {numbers:?}"
    );
}
