//! Malformed perf.data (issue 13.8): clear errors or bounded work, never
//! a panic, an abort on allocation, or a hang; tables built from many
//! records stay cheap.

use crate::perf_data::{write_with_build_ids, write_with_features};
use profkit_eventlog::SessionReader;
use profkit_perf::Layout;
use std::path::Path;

fn sample_type() -> u64 {
    Layout {
        callchain: false,
        user_stack: 0,
        cgroup: false,
    }
    .sample_type()
}

/// The byte offset of the feature table of a file written by the test
/// writer (it follows the data section).
fn feature_table(f: &[u8]) -> usize {
    let at = |i: usize| u64::from_le_bytes(f[i * 8..i * 8 + 8].try_into().unwrap());
    (at(5) + at(6)) as usize
}

fn import(p: &Path) -> Result<profkit_import::ImportSummary, profkit_import::Error> {
    profkit_import::import_perf_data(p, &p.with_extension("s").join("session.pkl"))
}

#[test]
fn a_feature_section_claiming_more_than_the_file_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("perf.data");
    write_with_build_ids(&p, sample_type(), &[], &[(0, &[1, 2, 3], "/bin/x")]);
    let mut f = std::fs::read(&p).unwrap();
    let t = feature_table(&f);
    // Its size: 46 PB (a flipped byte did this; the reader allocated it).
    f[t + 8..t + 16].copy_from_slice(&(46u64 << 50).to_le_bytes());
    std::fs::write(&p, &f).unwrap();
    let e = import(&p).unwrap_err().to_string();
    assert!(e.contains("outside the file"), "{e}");
}

#[test]
fn event_descriptions_claiming_four_billion_events_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("perf.data");
    let mut desc = Vec::new();
    desc.extend_from_slice(&u32::MAX.to_le_bytes()); // nr
    desc.extend_from_slice(&128u32.to_le_bytes()); // attr_size
    desc.extend_from_slice(&[0u8; 128]);
    write_with_features(&p, sample_type(), &[], &[(12, desc)]);
    let e = import(&p).unwrap_err().to_string();
    assert!(e.contains("event descriptions"), "{e}");
}

#[test]
fn a_claim_of_four_billion_online_cpus_costs_nothing() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("perf.data");
    let mut nr = Vec::new();
    nr.extend_from_slice(&u32::MAX.to_le_bytes()); // available
    nr.extend_from_slice(&u32::MAX.to_le_bytes()); // online
    write_with_features(&p, sample_type(), &[], &[(7, nr)]);
    // Before: a loop over 0..0xffffffff CPUs (minutes).
    import(&p).unwrap();
    let r = SessionReader::open(p.with_extension("s").join("session.pkl")).unwrap();
    assert!(r.header().cpus.len() <= 8192, "{}", r.header().cpus.len());
}

#[test]
fn a_fifo_is_not_waited_on() {
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("perf.data");
    assert!(std::process::Command::new("mkfifo")
        .arg(&p)
        .status()
        .unwrap()
        .success());
    let e = import(&p).unwrap_err().to_string();
    assert!(e.contains("not a regular file"), "{e}");
}

#[test]
fn a_command_line_claiming_four_billion_strings_is_refused() {
    // Found by the import_perf_data fuzz target: linux-perf-data reserved
    // 29 GB for the claimed strings.
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("perf.data");
    let mut cmdline = Vec::new();
    cmdline.extend_from_slice(&0x6c6c_6c6cu32.to_le_bytes());
    cmdline.extend_from_slice(&[0u8; 12]);
    write_with_features(&p, sample_type(), &[], &[(11, cmdline)]);
    let e = import(&p).unwrap_err().to_string();
    assert!(e.contains("command line"), "{e}");
}

#[test]
fn an_auxtrace_record_claiming_terabytes_is_refused() {
    // Found by the import_perf_data fuzz target: linux-perf-data reserved
    // the trace data's claimed 140 TB.
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("perf.data");
    let mut body = vec![0u8; 40];
    body[..8].copy_from_slice(&(140u64 << 40).to_le_bytes());
    write_with_features(&p, sample_type(), &[(71, 0, body)], &[]);
    let e = import(&p).unwrap_err().to_string();
    assert!(e.contains("AUXTRACE"), "{e}");
}

/// 100,000 code mappings laid top-down (the kernel's order) and a storm of
/// 5,000 forks of that process, each child sampled once in its parent's
/// last mapping. Before: insertion into a sorted Vec (quadratic: seconds)
/// and a copy of the whole table per fork (gigabytes). The work is
/// measured by `cargo bench -p profkit-sync --bench sync -- map_table`;
/// this checks the answers.
#[test]
fn a_hundred_thousand_mappings_and_a_fork_storm_resolve() {
    use profkit_perf::SimRecord;
    let layout = Layout {
        callchain: false,
        user_stack: 0,
        cgroup: false,
    };
    const MAPS: u64 = 100_000;
    const FORKS: u32 = 5_000;
    let mut recs: Vec<SimRecord> = Vec::new();
    let mut t = 10;
    for i in (0..MAPS).rev() {
        t += 1;
        recs.push(SimRecord::Mmap2 {
            pid: 100,
            tid: 100,
            addr: 0x10_0000 + i * 0x2000,
            len: 0x1000,
            pgoff: 0,
            ino: 1 + i,
            build_id: None,
            prot: 5,
            filename: format!("/lib/l{i}.so"),
            time: t,
        });
    }
    for k in 0..FORKS {
        let child = 1000 + k;
        t += 1;
        recs.push(SimRecord::Fork {
            pid: child,
            ppid: 100,
            tid: child,
            ptid: 100,
            time: t,
        });
        t += 1;
        recs.push(SimRecord::Sample {
            ip: 0x10_0000 + (MAPS - 1 - u64::from(k)) * 0x2000 + 0x10,
            pid: child,
            tid: child,
            time: t,
            kernel: false,
            period: 1,
            callchain: vec![],
        });
    }
    let raw: Vec<_> = recs.iter().map(|r| r.encode(0, layout)).collect();
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("perf.data");
    crate::perf_data::write(&p, layout.sample_type(), &raw);
    let started = std::time::Instant::now();
    let s = import(&p).unwrap();
    eprintln!(
        "import of {MAPS} mappings and {FORKS} forks: {:?}",
        started.elapsed()
    );
    assert_eq!(
        (s.samples, s.written, s.no_mapping, s.no_task),
        (5_000, 5_000, 0, 0)
    );
    let r = SessionReader::open(p.with_extension("s").join("session.pkl")).unwrap();
    assert!(r.is_complete() && r.bad_chunks().is_empty());
}
