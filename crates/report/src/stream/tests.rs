//! Tests of the stream over sessions written here: order across CPUs and
//! chunks, round-middle times and their note, specs and `--time`, stacks
//! and frame ids, off-CPU items and markers, hostile names, forged files.

use std::io;
use std::path::{Path, PathBuf};

use profkit_eventlog::*;

use super::core::stream_with;
use super::*;
use crate::{NoProgress, ProfileSpec, ReportOptions, Session, SymbolSources, TimeSpec};

const APP: Cookie = 0xa;
const KERNEL: Cookie = 0xc;
const KBASE: u64 = 0xffff_ffff_a000_0000;
/// The session's start on the monotonic clock.
const START: u64 = 1_000_000_000;
const ROUND: u64 = 250_000_000;

fn def(cookie: Cookie, kind: CookieKind, path: &str, base: u64) -> Event {
    Event::CookieDef(CookieEntry {
        cookie,
        kind,
        path: path.into(),
        build_id: None,
        dev: 0,
        inode: 0,
        generation: 0,
        base,
        pid: None,
        file: Default::default(),
    })
}

fn comm(pid: u32, tid: u32, name: &str) -> Event {
    Event::Comm {
        pid,
        tid,
        comm: name.into(),
        exec: pid == tid,
        ns: None,
    }
}

fn sources() -> SymbolSources {
    SymbolSources {
        kallsyms: Some(
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata/symbols/kallsyms"),
        ),
        ..Default::default()
    }
}

/// Writes a session whose chunks are (time, encoder).
fn write(dir: &Path, callchain: bool, off_cpu: bool, chunks: Vec<(u64, ChunkEncoder)>) -> PathBuf {
    write_with(dir, callchain, off_cpu, false, chunks)
}

/// [`write`], with per-sample times (format version 6) when `timed`.
fn write_with(
    dir: &Path,
    callchain: bool,
    off_cpu: bool,
    timed: bool,
    chunks: Vec<(u64, ChunkEncoder)>,
) -> PathBuf {
    let header = SessionHeader {
        host: "test".into(),
        event: EventConfigDesc {
            name: "cpu-clock".into(),
            frequency: Some(1000),
            callchain,
            off_cpu,
            sample_times: timed,
            ..Default::default()
        },
        cpus: vec![0, 1],
        start_time_unix_ns: 1_795_379_395_000_000_000,
        start_monotonic_ns: START,
        sync_interval_ms: 250,
        target: "command app".into(),
        ..Default::default()
    };
    let path = dir.join(crate::SESSION_FILE);
    let mut w = SessionWriter::create(&path, &header).unwrap();
    for (round, (time, enc)) in chunks.into_iter().enumerate() {
        w.append_chunk(round as u64, time, enc.bytes()).unwrap();
    }
    path
}

fn defs(enc: &mut ChunkEncoder) {
    enc.event(&def(APP, CookieKind::User, "/usr/bin/app", 0));
    enc.event(&def(KERNEL, CookieKind::Kernel, "[kernel.kallsyms]", KBASE));
}

/// What a sink was given, owned.
#[derive(Clone, Debug, PartialEq)]
enum Got {
    Sample {
        t: u64,
        exact: bool,
        cpu: u32,
        tid: u32,
        comm: String,
        process: String,
        /// (id, image path, symbol, offset, return address)
        frames: Vec<(FrameId, String, Option<String>, u64, bool)>,
    },
    Off {
        t: u64,
        tid: u32,
        kind: OffCpuKind,
        total_ns: u64,
        frames: Vec<FrameId>,
    },
    Lost {
        t: u64,
        cpu: u32,
        count: u64,
    },
}

#[derive(Default)]
struct Rec {
    began: Option<(String, Option<u64>, bool, bool)>,
    items: Vec<Got>,
    ended: Option<StreamSummary>,
}

impl StreamSink for Rec {
    fn begin(&mut self, i: &StreamInfo<'_>) -> io::Result<()> {
        assert!(self.began.is_none(), "begin twice");
        self.began = Some((
            i.event.to_owned(),
            i.period_ns,
            i.round_middle,
            i.call_graph,
        ));
        Ok(())
    }
    fn sample(&mut self, s: &StreamSample<'_>) -> io::Result<()> {
        assert_eq!(s.weight, 1);
        let frames = s
            .frames()
            .map(|(id, f)| {
                (
                    id,
                    s.table.image(f.image).path.clone(),
                    s.table.symbol_name(f).map(str::to_owned),
                    f.offset,
                    f.return_address,
                )
            })
            .collect();
        self.items.push(Got::Sample {
            t: s.time_ns,
            exact: s.time_exact,
            cpu: s.cpu,
            tid: s.tid,
            comm: s.comm.to_owned(),
            process: s.process.to_owned(),
            frames,
        });
        Ok(())
    }
    fn off_cpu(&mut self, o: &StreamOffCpu<'_>) -> io::Result<()> {
        self.items.push(Got::Off {
            t: o.time_ns,
            tid: o.tid,
            kind: o.kind,
            total_ns: o.total_ns,
            frames: o.frames.to_vec(),
        });
        Ok(())
    }
    fn marker(&mut self, m: &StreamMarker<'_>) -> io::Result<()> {
        if let StreamMarker::Lost {
            time_ns,
            cpu,
            count,
            ..
        } = *m
        {
            self.items.push(Got::Lost {
                t: time_ns,
                cpu,
                count,
            });
        }
        Ok(())
    }
    fn end(&mut self, s: &StreamSummary) -> io::Result<()> {
        self.ended = Some(s.clone());
        Ok(())
    }
}

fn run(path: &Path, opts: &ReportOptions) -> (Rec, StreamSummary) {
    run_capped(path, opts, REORDER_MAX)
}

fn run_capped(path: &Path, opts: &ReportOptions, cap: usize) -> (Rec, StreamSummary) {
    let s = Session::open(path).unwrap();
    let mut rec = Rec::default();
    let summary = stream_with(&[s], opts, &sources(), &NoProgress, &mut rec, cap).unwrap();
    assert_eq!(rec.ended.as_ref(), Some(&summary), "end gets the summary");
    (rec, summary)
}

/// (time, cpu, tid) of the samples.
fn samples(rec: &Rec) -> Vec<(u64, u32, u32)> {
    rec.items
        .iter()
        .filter_map(|g| match g {
            Got::Sample { t, cpu, tid, .. } => Some((*t, *cpu, *tid)),
            _ => None,
        })
        .collect()
}

/// Two rounds, each with a run per CPU, CPU 1 drained first in the
/// second.
fn two_rounds(dir: &Path) -> PathBuf {
    let mut c0 = ChunkEncoder::new();
    defs(&mut c0);
    c0.event(&comm(10, 10, "app"));
    c0.event(&comm(10, 11, "worker"));
    c0.event(&comm(20, 20, "other"));
    for _ in 0..3 {
        c0.sample(0, 10, 10, false, APP, 0x100);
    }
    for _ in 0..2 {
        c0.sample(1, 10, 11, true, KERNEL, 0x210);
    }
    let mut c1 = ChunkEncoder::new();
    c1.sample(1, 20, 20, false, APP, 0x200);
    c1.sample(0, 10, 10, false, APP, 0x100);
    c1.event(&Event::Lost {
        cpu: 1,
        kind: LostKind::Ring,
        count: 7,
    });
    write(
        dir,
        false,
        false,
        vec![(START + ROUND, c0), (START + 2 * ROUND, c1)],
    )
}

#[test]
fn samples_come_in_time_order_across_cpus_and_chunks_at_their_round_middles() {
    let d = tempfile::tempdir().unwrap();
    let p = two_rounds(d.path());
    let (rec, summary) = run(&p, &ReportOptions::default());
    let (m0, m1) = (START + ROUND / 2, START + ROUND + ROUND / 2);
    assert_eq!(
        samples(&rec),
        [
            (m0, 0, 10),
            (m0, 0, 10),
            (m0, 0, 10),
            (m0, 1, 11),
            (m0, 1, 11),
            (m1, 0, 10),
            (m1, 1, 20),
        ]
    );
    // The loss of round 2 at its round's time, after its samples.
    assert_eq!(
        rec.items.last(),
        Some(&Got::Lost {
            t: START + 2 * ROUND,
            cpu: 1,
            count: 7
        })
    );
    assert!(rec.items.iter().all(|g| match g {
        Got::Sample { exact, .. } => !exact,
        _ => true,
    }));
    let (event, period, round_middle, cg) = rec.began.clone().unwrap();
    assert_eq!(
        (event.as_str(), period, round_middle, cg),
        ("cpu-clock", Some(1_000_000), true, false)
    );
    assert_eq!(
        (summary.samples, summary.samples_read, summary.round_middle),
        (7, 7, 7)
    );
    assert_eq!((summary.markers, summary.out_of_order), (1, 0));
    let notes = summary.notes();
    assert_eq!(
        notes[0],
        "this session was written before per-sample times: each sample is placed at the middle \
         of its 250 ms round"
    );
}

#[test]
fn names_threads_and_frames() {
    let d = tempfile::tempdir().unwrap();
    let p = two_rounds(d.path());
    let (rec, _) = run(&p, &ReportOptions::default());
    let Got::Sample {
        comm,
        process,
        frames,
        ..
    } = &rec.items[3]
    else {
        panic!("{:?}", rec.items[3]);
    };
    assert_eq!((comm.as_str(), process.as_str()), ("worker", "app"));
    assert_eq!(
        (frames[0].1.as_str(), frames[0].2.as_deref()),
        ("[kernel.kallsyms]", Some("schedule"))
    );
    // The same (binary, offset) has the same id every time; another has another.
    let ids: Vec<FrameId> = rec
        .items
        .iter()
        .filter_map(|g| match g {
            Got::Sample { frames, .. } => Some(frames[0].0),
            _ => None,
        })
        .collect();
    assert_eq!(ids[0], ids[1]);
    assert_eq!(ids[0], ids[5]);
    assert_ne!(ids[0], ids[3]);
    assert_ne!(ids[0], ids[6]);
}

#[test]
fn specs_and_time_windows_filter() {
    let d = tempfile::tempdir().unwrap();
    let p = two_rounds(d.path());
    let with = |words: &[&str], time: Option<&str>| {
        let opts = ReportOptions {
            spec: ProfileSpec::parse(words).unwrap(),
            time: time.map(|t| TimeSpec::parse(t).unwrap()),
            ..ReportOptions::default()
        };
        let (rec, summary) = run(&p, &opts);
        assert_eq!(summary.samples_read, 7, "every sample is read");
        samples(&rec)
            .into_iter()
            .map(|(_, cpu, tid)| (cpu, tid))
            .collect::<Vec<_>>()
    };
    assert_eq!(with(&["tgid:20"], None), [(1, 20)]);
    assert_eq!(with(&["tid:11"], None), [(1, 11), (1, 11)]);
    assert_eq!(with(&["cpu:0"], None), [(0, 10), (0, 10), (0, 10), (0, 10)]);
    assert_eq!(with(&["image:app"], None).len(), 5);
    assert_eq!(with(&["image-exclude:app"], None), [(1, 11), (1, 11)]);
    // Round 1's middle is at 0.125 s, round 2's at 0.375 s.
    assert_eq!(with(&[], Some("0.25,")), [(0, 10), (1, 20)]);
    assert_eq!(with(&[], Some(",0.25")).len(), 5);
    assert_eq!(with(&["tgid:10"], Some("0.25,")), [(0, 10)]);
    // The loss of a round outside the window is not streamed.
    let opts = ReportOptions {
        time: Some(TimeSpec::parse(",0.25").unwrap()),
        ..ReportOptions::default()
    };
    let (rec, summary) = run(&p, &opts);
    assert!(!rec.items.iter().any(|g| matches!(g, Got::Lost { .. })));
    assert_eq!(summary.markers, 0);
}

#[test]
fn stacks_are_named_innermost_first_with_callers_at_their_call() {
    let d = tempfile::tempdir().unwrap();
    let mut c0 = ChunkEncoder::new();
    defs(&mut c0);
    c0.event(&comm(10, 10, "app"));
    // schedule (0x200) called from do_one_initcall (0x50..): return
    // addresses 0x201 (its call at 0x200, schedule) and 0x60.
    let f = |offset| Frame {
        cookie: KERNEL,
        offset,
        kernel: true,
    };
    c0.event(&Event::StackDef {
        id: 1,
        frames: vec![f(0x201), f(0x60)],
    });
    c0.event(&Event::StackDefOn {
        id: 2,
        parent: 1,
        frames: vec![f(0x381)],
    });
    c0.sample_with_stack(0, 10, 10, true, KERNEL, 0x380, 1);
    c0.sample_with_stack(1, 10, 10, true, KERNEL, 0x380, 2);
    c0.sample(1, 10, 10, true, KERNEL, 0x201);
    let p = write(d.path(), true, false, vec![(START + ROUND, c0)]);
    let (rec, _) = run(&p, &ReportOptions::default());
    assert!(rec.began.as_ref().unwrap().3, "call graph");
    let frames: Vec<Vec<(Option<String>, u64, bool)>> = rec
        .items
        .iter()
        .filter_map(|g| match g {
            Got::Sample { frames, .. } => Some(
                frames
                    .iter()
                    .map(|(_, _, s, o, r)| (s.clone(), *o, *r))
                    .collect(),
            ),
            _ => None,
        })
        .collect();
    let s = |n: &str| Some(n.to_owned());
    assert_eq!(
        frames,
        [
            vec![
                (s("local_helper"), 0x380, false),
                (s("schedule"), 0x201, true),
                (s("do_one_initcall"), 0x60, true),
            ],
            vec![
                (s("local_helper"), 0x380, false),
                (s("local_helper"), 0x381, true),
                (s("schedule"), 0x201, true),
                (s("do_one_initcall"), 0x60, true),
            ],
            // Sampled at 0x201 itself: named there (schedule), and not the
            // same frame as the return address 0x201.
            vec![(s("schedule"), 0x201, false)],
        ]
    );
    let ids = |i: usize, j: usize| match &rec.items[i] {
        Got::Sample { frames, .. } => frames[j].0,
        _ => unreachable!(),
    };
    assert_eq!(ids(0, 1), ids(1, 2));
    assert_ne!(ids(0, 1), ids(2, 0));
}

#[test]
fn off_cpu_items_come_at_their_rounds_time_with_their_stack() {
    let d = tempfile::tempdir().unwrap();
    let mut c0 = ChunkEncoder::new();
    defs(&mut c0);
    c0.event(&comm(10, 10, "app"));
    c0.event(&Event::StackDef {
        id: 1,
        frames: vec![Frame {
            cookie: KERNEL,
            offset: 0x60,
            kernel: true,
        }],
    });
    c0.sample(0, 10, 10, false, APP, 0x100);
    c0.event(&Event::OffCpu {
        cpu: 0,
        pid: 10,
        tid: 10,
        kind: OffCpuKind::Blocked,
        kernel: true,
        cookie: KERNEL,
        offset: 0x200,
        stack: Some(1),
        cgroup: 0,
        count: 2,
        total_ns: 5_000_000,
    });
    let mut c1 = ChunkEncoder::new();
    c1.sample(1, 10, 10, false, APP, 0x100);
    let p = write(
        d.path(),
        true,
        true,
        vec![(START + ROUND, c0), (START + 2 * ROUND, c1)],
    );
    let (rec, summary) = run(&p, &ReportOptions::default());
    assert_eq!((summary.samples, summary.off_cpu), (2, 1));
    let kinds: Vec<(&str, u64)> = rec
        .items
        .iter()
        .map(|g| match g {
            Got::Sample { t, .. } => ("sample", *t),
            Got::Off { t, .. } => ("off", *t),
            Got::Lost { t, .. } => ("lost", *t),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            ("sample", START + ROUND / 2),
            ("off", START + ROUND),
            ("sample", START + ROUND + ROUND / 2)
        ]
    );
    let Got::Off {
        tid,
        kind,
        total_ns,
        frames,
        ..
    } = &rec.items[1]
    else {
        unreachable!()
    };
    assert_eq!(
        (*tid, *kind, *total_ns, frames.len()),
        (10, OffCpuKind::Blocked, 5_000_000, 2)
    );
}

#[test]
fn forged_chunk_times_are_counted_out_of_order_and_a_full_buffer_stays_bounded() {
    let d = tempfile::tempdir().unwrap();
    // Chunk times 10 s, 100 s, 1 s, 1 s: the last round's samples (at the
    // middle of 100 s and 1 s) come after the buffer released later ones.
    let s = 1_000_000_000u64;
    let mut chunks = Vec::new();
    for (i, t) in [10 * s, 100 * s, s, s].into_iter().enumerate() {
        let mut enc = ChunkEncoder::new();
        if i == 0 {
            defs(&mut enc);
        }
        for _ in 0..3 {
            enc.sample(0, 10, 10, false, APP, 0x100 + i as u64);
        }
        chunks.push((t, enc));
    }
    // And one chunk of many samples for a buffer of 16.
    let mut big = ChunkEncoder::new();
    for i in 0..5_000u64 {
        big.sample((i % 4) as u32, 10, 10, false, APP, 0x100);
    }
    chunks.push((200 * s, big));
    let p = write(d.path(), false, false, chunks);
    let (rec, summary) = run_capped(&p, &ReportOptions::default(), 16);
    assert_eq!(summary.samples, 12 + 5_000, "nothing is dropped");
    assert_eq!(samples(&rec).len(), 5_012);
    assert!(summary.reorder_peak <= 16, "{}", summary.reorder_peak);
    assert_eq!(summary.out_of_order, 3);
    assert!(summary.notes()[1].contains("3 items arrived after later ones"));
    // Without the small cap, the big chunk is in CPU order.
    let (rec, summary) = run(&p, &ReportOptions::default());
    assert_eq!(summary.out_of_order, 3);
    let big: Vec<u32> = samples(&rec)[12..].iter().map(|&(_, c, _)| c).collect();
    assert!(big.windows(2).all(|w| w[0] <= w[1]));
}

#[test]
fn hostile_names_stay_one_line_in_jsonl_and_one_block_in_script() {
    let d = tempfile::tempdir().unwrap();
    let mut c0 = ChunkEncoder::new();
    defs(&mut c0);
    let evil = "a\"b\\c\nd\te\u{1b}[2J\u{7f}\u{85}";
    c0.event(&comm(10, 10, evil));
    c0.event(&def(0xe, CookieKind::User, "/tmp/x\n\"y\\", 0));
    c0.sample(0, 10, 10, false, APP, 0x100);
    c0.sample(0, 10, 10, false, 0xe, 0x10);
    let p = write(d.path(), true, false, vec![(START + ROUND, c0)]);
    let s = Session::open(&p).unwrap();
    let mut out = Vec::new();
    write_jsonl(
        std::slice::from_ref(&s),
        &ReportOptions::default(),
        &sources(),
        &NoProgress,
        &mut out,
    )
    .unwrap();
    let text = String::from_utf8(out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 3, "{text}");
    for l in &lines {
        assert!(!l.bytes().any(|b| b < 0x20 || b == 0x7f), "{l}");
        let v: serde_json::Value = serde_json::from_str(l).unwrap();
        if v["type"] == "sample" {
            assert_eq!(v["comm"], evil);
            assert_eq!(v["time_exact"], false);
        }
    }
    let v: serde_json::Value = serde_json::from_str(lines[1]).unwrap();
    assert_eq!(v["stack"][0]["image"], "x\n\"y\\");
    let mut out = Vec::new();
    write_script(
        std::slice::from_ref(&s),
        &ReportOptions::default(),
        &sources(),
        &NoProgress,
        &mut out,
    )
    .unwrap();
    let text = String::from_utf8(out).unwrap();
    assert_eq!(
        text,
        "a\"b\\c\\x0ad\\x09e\\x1b[2J\\x7f\\xc2\\x85    10/10    [000]     1.125000: cpu-clock: \n\
         \t             100 [unknown] (/usr/bin/app)\n\
         \n\
         a\"b\\c\\x0ad\\x09e\\x1b[2J\\x7f\\xc2\\x85    10/10    [000]     1.125000: cpu-clock: \n\
         \t              10 [unknown] (/tmp/x\\x0a\"y\\)\n\
         \n"
    );
}

#[test]
fn a_chunk_forged_with_invalid_utf8_streams_up_to_its_bad_byte() {
    let d = tempfile::tempdir().unwrap();
    let mut c0 = ChunkEncoder::new();
    defs(&mut c0);
    c0.event(&comm(10, 10, "app"));
    c0.sample(0, 10, 10, false, APP, 0x100);
    c0.event(&comm(10, 10, "QQQQ"));
    c0.sample(0, 10, 10, false, APP, 0x100);
    let mut bytes = c0.bytes().to_vec();
    let at = bytes.windows(4).position(|w| w == b"QQQQ").unwrap();
    bytes[at..at + 4].copy_from_slice(&[0xff, 0xfe, 0xc3, 0x28]);
    let header = SessionHeader {
        event: EventConfigDesc {
            name: "cpu-clock".into(),
            frequency: Some(1000),
            ..Default::default()
        },
        cpus: vec![0],
        start_monotonic_ns: START,
        sync_interval_ms: 250,
        ..Default::default()
    };
    let path = d.path().join(crate::SESSION_FILE);
    let mut w = SessionWriter::create(&path, &header).unwrap();
    w.append_chunk(0, START + ROUND, &bytes).unwrap();
    drop(w);
    let (rec, summary) = run(&path, &ReportOptions::default());
    assert_eq!(samples(&rec).len(), 1);
    assert!(
        summary.warnings.iter().any(|w| w.contains("UTF-8")),
        "{:?}",
        summary.warnings
    );
}

#[test]
fn an_empty_session_begins_and_ends() {
    let d = tempfile::tempdir().unwrap();
    let p = write(d.path(), false, false, vec![]);
    let (rec, summary) = run(&p, &ReportOptions::default());
    assert!(rec.began.is_some() && rec.items.is_empty());
    assert_eq!(summary.samples, 0);
    assert!(summary.notes().is_empty());
}

/// Two rounds with exact times: each CPU's run in ring order, CPU 1's
/// first run reaching past round 1's time (drained later), and a sample of
/// round 1 deferred to round 2.
fn timed_rounds(dir: &Path) -> PathBuf {
    let ms = 1_000_000u64;
    let at = |enc: &mut ChunkEncoder, t: u64, cpu: u32, tid: u32| {
        enc.time(START + t * ms);
        enc.sample(cpu, 10, tid, false, APP, 0x100 + t);
    };
    let mut c0 = ChunkEncoder::new();
    defs(&mut c0);
    c0.event(&comm(10, 10, "app"));
    c0.event(&comm(10, 11, "worker"));
    for t in [10, 30, 50, 240] {
        at(&mut c0, t, 0, 10);
    }
    for t in [20, 40, 245, 252] {
        at(&mut c0, t, 1, 11);
    }
    let mut c1 = ChunkEncoder::new();
    for t in [251, 270, 490] {
        at(&mut c1, t, 0, 10);
    }
    for t in [255, 480, 499] {
        at(&mut c1, t, 1, 11);
    }
    at(&mut c1, 45, 0, 10); // deferred
    write_with(
        dir,
        false,
        false,
        true,
        vec![(START + ROUND, c0), (START + 2 * ROUND, c1)],
    )
}

#[test]
fn exact_times_put_samples_in_time_order_across_cpus_and_chunks() {
    let d = tempfile::tempdir().unwrap();
    let p = timed_rounds(d.path());
    let (rec, summary) = run(&p, &ReportOptions::default());
    let ms: Vec<u64> = samples(&rec)
        .iter()
        .map(|&(t, _, _)| (t - START) / 1_000_000)
        .collect();
    assert_eq!(
        ms,
        [10, 20, 30, 40, 45, 50, 240, 245, 251, 252, 255, 270, 480, 490, 499]
    );
    assert!(rec
        .items
        .iter()
        .all(|g| matches!(g, Got::Sample { exact: true, .. })));
    assert!(!rec.began.as_ref().unwrap().2, "no round middles");
    assert_eq!((summary.round_middle, summary.out_of_order), (0, 0));
    let notes = summary.notes();
    assert!(
        !notes
            .iter()
            .any(|n| n.contains("per-sample times") || n.contains("arrived after")),
        "{notes:?}"
    );
}

#[test]
fn an_exact_time_window_is_exact_per_sample() {
    let d = tempfile::tempdir().unwrap();
    let p = timed_rounds(d.path());
    let window = |w: &str| {
        let opts = ReportOptions {
            time: Some(TimeSpec::parse(w).unwrap()),
            ..ReportOptions::default()
        };
        let (rec, _) = run(&p, &opts);
        samples(&rec)
            .iter()
            .map(|&(t, _, _)| (t - START) / 1_000_000)
            .collect::<Vec<u64>>()
    };
    // Seconds from the start: [0.045, 0.252) cuts through both rounds.
    assert_eq!(window("0.045,0.252"), [45, 50, 240, 245, 251]);
    assert_eq!(window("0.49,"), [490, 499]);
}

#[test]
fn exact_times_out_of_order_beyond_a_small_buffer_are_counted_not_held() {
    let d = tempfile::tempdir().unwrap();
    // One chunk whose times go down: a forged file.
    let mut c0 = ChunkEncoder::new();
    defs(&mut c0);
    for i in 0..1_000u64 {
        c0.time(START + (1_000 - i) * 1_000);
        c0.sample(0, 10, 10, false, APP, 0x100);
    }
    let p = write_with(d.path(), false, false, true, vec![(START + ROUND, c0)]);
    let (rec, summary) = run_capped(&p, &ReportOptions::default(), 8);
    assert_eq!(summary.samples, 1_000);
    assert_eq!(samples(&rec).len(), 1_000);
    assert!(summary.reorder_peak <= 8);
    assert_eq!(summary.out_of_order, 1_000 - 8);
    // With the full buffer, the same chunk comes out sorted.
    let (rec, summary) = run(&p, &ReportOptions::default());
    assert_eq!(summary.out_of_order, 0);
    let t: Vec<u64> = samples(&rec).iter().map(|s| s.0).collect();
    assert!(t.windows(2).all(|w| w[0] <= w[1]));
}
