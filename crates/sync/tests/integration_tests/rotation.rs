//! Rotation: a recorder closes its part and goes on in a new file without
//! stopping the rings; every part is a whole session on its own.

use crate::sim_stage;
use profkit_eventlog::parts::{part_file_name, CURRENT_PART};
use profkit_eventlog::{Event, PartInfo, SessionHeader, SessionReader, StackTable};
use profkit_perf::{Layout, SimRecord, SimRing, PERF_CONTEXT_USER};
use profkit_sync::{FileSink, Recorder, RecorderOptions, SimRings};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

const G: Layout = Layout {
    callchain: true,
    user_stack: 0,
    cgroup: false,
};

fn header() -> SessionHeader {
    SessionHeader {
        cpus: vec![0, 1],
        start_time_unix_ns: 1_000,
        start_monotonic_ns: 7,
        part: Some(PartInfo {
            number: 1,
            first_round: 0,
            session_start_unix_ns: 1_000,
            session_start_monotonic_ns: 7,
        }),
        ..Default::default()
    }
}

/// A call-graph recorder over `ncpu` simulated rings writing part 1 of a
/// rotated session in `dir`.
fn recorder(dir: &Path, ncpu: u32) -> Recorder<SimRings> {
    let sink = FileSink::create(dir.join(CURRENT_PART), header()).unwrap();
    let rings: Vec<SimRing> = (0..ncpu).map(|c| SimRing::new(c, 1 << 18, G)).collect();
    Recorder::new(
        SimRings(rings),
        sim_stage(G),
        Box::new(sink),
        RecorderOptions::default(),
    )
    .unwrap()
}

/// What one part holds, read on its own.
struct Part {
    header: SessionHeader,
    samples: BTreeMap<u32, u64>,
    first_round: u64,
    written: BTreeMap<u32, u64>,
}

/// Reads a part alone and checks it needs nothing from another: every
/// sample's cookie, stack and task is defined in it before the report
/// would need it.
fn read_part(path: &Path) -> Part {
    let r = SessionReader::open(path).unwrap();
    assert!(r.bad_chunks().is_empty(), "{:?}", r.bad_chunks());
    let footer = r
        .footer()
        .expect("every closed part has its footer")
        .clone();
    let mut defined = BTreeSet::new();
    let mut named = BTreeSet::new();
    let mut used = Vec::new();
    let mut samples = BTreeMap::new();
    for c in r.chunks() {
        r.for_each_sample(
            c,
            |s| {
                *samples.entry(s.cpu).or_insert(0) += 1;
                used.push((s.cookie, s.stack, s.tid));
            },
            |m| match m {
                Event::CookieDef(e) => {
                    defined.insert(e.cookie);
                }
                Event::Comm { tid, .. } => {
                    named.insert(tid);
                }
                _ => {}
            },
        )
        .unwrap();
    }
    let stacks: StackTable = r.stack_table();
    for (cookie, stack, tid) in &used {
        assert!(
            defined.contains(cookie),
            "{path:?}: cookie {cookie:#x} undefined"
        );
        assert!(named.contains(tid), "{path:?}: task {tid} unnamed");
        let id = stack.expect("a call-graph sample");
        let frames = stacks
            .get(id)
            .unwrap_or_else(|| panic!("{path:?}: stack {id} undefined"));
        assert!(frames.iter().all(|f| defined.contains(&f.cookie)));
    }
    Part {
        header: r.header().clone(),
        first_round: r.chunks()[0].round,
        samples,
        written: footer
            .accounting
            .iter()
            .map(|a| (a.cpu, a.samples_written))
            .collect(),
    }
}

/// Feeds the rings of a [`recorder`]: one process, a thread per CPU, call
/// graphs of two frames; counts what it produced per CPU.
struct Feeder {
    t: u64,
    produced: Vec<u64>,
}

impl Feeder {
    /// Names the threads and maps the binary.
    fn new(rec: &mut Recorder<SimRings>) -> Feeder {
        let n = rec.source_mut().0.len();
        for c in 0..n {
            let r = &mut rec.source_mut().0[c];
            r.push(&SimRecord::Comm {
                pid: 5,
                tid: 5 + c as u32,
                comm: format!("w{c}"),
                exec: false,
                time: 1,
            });
            r.push(&SimRecord::Mmap2 {
                pid: 5,
                tid: 5,
                addr: 0x400000,
                len: 0x10000,
                pgoff: 0,
                ino: 9,
                build_id: None,
                prot: 5,
                filename: "/bin/f9".into(),
                time: 1,
            });
        }
        Feeder {
            t: 2,
            produced: vec![0; n],
        }
    }

    /// `n` samples on every CPU.
    fn feed(&mut self, rec: &mut Recorder<SimRings>, n: u64) {
        for i in 0..n {
            for (c, p) in self.produced.iter_mut().enumerate() {
                self.t += 1;
                let ip = 0x400000 + (i * 4099) % 0x10000;
                rec.source_mut().0[c].push(&SimRecord::Sample {
                    ip,
                    pid: 5,
                    tid: 5 + c as u32,
                    time: self.t,
                    kernel: false,
                    period: 1,
                    callchain: vec![PERF_CONTEXT_USER, ip, 0x400100 + i % 3],
                });
                *p += 1;
            }
        }
    }
}

#[test]
fn rotating_closes_each_part_whole_and_loses_nothing_between_parts() {
    let dir = tempfile::tempdir().unwrap();
    let mut rec = recorder(dir.path(), 2);
    let mut f = Feeder::new(&mut rec);
    // Samples still in the rings when a rotation starts go into the part
    // being closed; nothing falls between.
    f.feed(&mut rec, 100);
    rec.round();
    f.feed(&mut rec, 20);
    assert_eq!(rec.rotate(), Some(2));
    f.feed(&mut rec, 50);
    rec.round();
    assert_eq!(rec.rotate(), Some(4));
    f.feed(&mut rec, 30);
    let status = rec.stop().unwrap();
    let names = [
        part_file_name(1),
        part_file_name(2),
        CURRENT_PART.to_owned(),
    ];
    let parts: Vec<Part> = names
        .iter()
        .map(|n| read_part(&dir.path().join(n)))
        .collect();
    let cpu_counts = |p: &Part| {
        (0..2)
            .map(|c| p.samples.get(&c).copied().unwrap_or(0))
            .collect::<Vec<_>>()
    };
    assert_eq!(cpu_counts(&parts[0]), [120, 120]);
    assert_eq!(cpu_counts(&parts[1]), [50, 50]);
    assert_eq!(cpu_counts(&parts[2]), [30, 30]);
    for (i, p) in parts.iter().enumerate() {
        // Each footer counts its own part only.
        assert_eq!(p.written, p.samples, "part {}", i + 1);
        let info = p.header.part.expect("a part says its place");
        assert_eq!(info.number, i as u64 + 1);
        assert_eq!(info.first_round, p.first_round);
        assert_eq!(
            (info.session_start_unix_ns, info.session_start_monotonic_ns),
            (1_000, 7),
            "parts share the session's start"
        );
    }
    assert!(parts[1].header.start_monotonic_ns > parts[0].header.start_monotonic_ns);
    // The session's counts are all the parts'.
    for (c, a) in status.accounting.iter().enumerate() {
        assert_eq!(a.samples_written, f.produced[c]);
        assert_eq!(a.lost_total(), 0);
    }
}

#[test]
fn a_rotation_that_cannot_rename_keeps_writing_the_same_file() {
    let dir = tempfile::tempdir().unwrap();
    let mut rec = recorder(dir.path(), 1);
    // A directory where the closed part's name should go: rename fails.
    std::fs::create_dir(dir.path().join(part_file_name(1))).unwrap();
    std::fs::write(dir.path().join(part_file_name(1)).join("x"), b"x").unwrap();
    let mut f = Feeder::new(&mut rec);
    f.feed(&mut rec, 40);
    rec.round();
    assert_eq!(rec.rotate(), None, "not closed");
    f.feed(&mut rec, 60);
    rec.round();
    let st = rec.status();
    assert_eq!((st.buffer.rotations, st.buffer.rotate_errors), (1, 1));
    let err = st.buffer.last_error.unwrap();
    assert!(
        err.contains("still writing") && err.contains("session.000001.pkl"),
        "{err}"
    );
    rec.stop().unwrap();
    // The file goes on whole: its footer counts all of it, and its stacks
    // and definitions are the ones it had (read_part checks each).
    let p = read_part(&dir.path().join(CURRENT_PART));
    assert_eq!(p.samples.get(&0), Some(&100));
    assert_eq!(p.written, p.samples, "the footer counts the whole file");
    assert_eq!(p.header.part.unwrap().number, 1);
    let r = SessionReader::open(dir.path().join(CURRENT_PART)).unwrap();
    // Each stack id is defined once in the file: ids did not start over.
    let mut ids = Vec::new();
    for c in r.chunks() {
        r.for_each_sample(
            c,
            |_| {},
            |m| {
                if let Event::StackDef { id, .. } | Event::StackDefOn { id, .. } = m {
                    ids.push(id);
                }
            },
        )
        .unwrap();
    }
    let n = ids.len();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), n, "a stack id defined twice");
    assert_eq!(r.chunks().len(), 4, "all rounds in the one file");
}
