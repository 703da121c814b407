//! Forms of perf.data that `perf record` writes beyond a plain file of
//! this machine: a recording without kernel mappings (another machine's,
//! or made without access to the kernel's addresses).

use crate::perf_data::{self, RawRec};
use profkit_eventlog::{kernel_entry, SessionReader};
use profkit_perf::{Layout, SimRecord};

const KTEXT: u64 = 0xffff_ffff_8100_0000;
const APP: u64 = 0x40_0000;

fn sample(ip: u64, kernel: bool, time: u64) -> SimRecord {
    SimRecord::Sample {
        ip,
        pid: 100,
        tid: 100,
        time,
        kernel,
        period: 1,
        callchain: vec![],
    }
}

fn app_map(time: u64) -> SimRecord {
    SimRecord::Mmap2 {
        pid: 100,
        tid: 100,
        addr: APP,
        len: 0x10000,
        pgoff: 0,
        ino: 5,
        build_id: None,
        prot: 5,
        filename: "/bin/app".into(),
        time,
    }
}

/// The (cookie, offset) of every sample of a session.
fn samples(session: &std::path::Path) -> Vec<(u64, u64)> {
    let r = SessionReader::open(session).unwrap();
    let mut got = Vec::new();
    for c in r.chunks() {
        r.for_each_sample(c, |s| got.push((s.cookie, s.offset)), |_| {})
            .unwrap();
    }
    got
}

/// A file without a `[kernel.kallsyms]` mapping (perf's fixture
/// `sleep.data` of linux-perf-data: 5 of its 7 samples in the kernel):
/// its kernel samples are the kernel image's, at their addresses (`_text`
/// unknown), with the build-id perf's table gives the kernel, and none is
/// lost for want of a mapping; the summary says why they are unnamed.
#[test]
fn kernel_samples_of_a_file_without_kernel_mappings_are_the_kernels() {
    let layout = Layout::default();
    let kernel_id = [0x11u8; 20];
    let recs: Vec<RawRec> = [
        app_map(1),
        sample(KTEXT + 0x20, true, 2),
        sample(APP + 0x10, false, 3),
        sample(KTEXT + 0x40, true, 4),
    ]
    .iter()
    .map(|r| r.encode(0, layout))
    .collect();
    let d = tempfile::tempdir().unwrap();
    for (name, ids) in [
        (
            "with-id",
            vec![(
                profkit_perf::misc::KERNEL,
                &kernel_id[..],
                "[kernel.kallsyms]",
            )],
        ),
        ("without-id", vec![]),
    ] {
        let data = d.path().join(format!("{name}.data"));
        perf_data::write_with_build_ids(&data, layout.sample_type(), &recs, &ids);
        let session = d.path().join(format!("{name}.pkl"));
        let summary = profkit_import::import_perf_data(&data, &session).unwrap();
        assert_eq!(
            (summary.samples, summary.written, summary.no_mapping),
            (3, 3, 0),
            "{name}"
        );
        assert_eq!(summary.warnings.len(), 1, "{:?}", summary.warnings);
        assert!(
            summary.warnings[0].contains("[kernel.kallsyms]"),
            "{:?}",
            summary.warnings
        );
        let kernel = kernel_entry(0, ids.first().map(|(_, id, _)| id.to_vec())).cookie;
        let got = samples(&session);
        assert_eq!(got[0], (kernel, KTEXT + 0x20), "{name}");
        assert_ne!(got[1].0, kernel);
        assert_eq!(got[2], (kernel, KTEXT + 0x40), "{name}");
        let acct = SessionReader::open(&session)
            .unwrap()
            .footer()
            .unwrap()
            .accounting
            .clone();
        assert_eq!(acct.iter().map(|a| a.lost_no_mapping).sum::<u64>(), 0);
    }

    // With perf's kernel mapping, its `_text` as before, and no warning.
    let mut with_map: Vec<RawRec> = vec![SimRecord::Mmap2 {
        pid: u32::MAX,
        tid: u32::MAX,
        addr: KTEXT,
        len: 0x100_0000,
        pgoff: KTEXT,
        ino: 0,
        build_id: None,
        prot: 5,
        filename: "[kernel.kallsyms]_text".into(),
        time: 1,
    }
    .encode(0, layout)];
    with_map.extend(recs.iter().cloned());
    let data = d.path().join("mapped.data");
    perf_data::write(&data, layout.sample_type(), &with_map);
    let session = d.path().join("mapped.pkl");
    let summary = profkit_import::import_perf_data(&data, &session).unwrap();
    assert!(summary.warnings.is_empty(), "{:?}", summary.warnings);
    let got = samples(&session);
    assert_eq!(got[0], (kernel_entry(KTEXT, None).cookie, 0x20));
}

/// `HEADER_CLOCK_DATA`'s bit in perf's feature bitmap.
const CLOCK_DATA: u32 = 29;
/// `perf_event_attr.use_clockid`.
const USE_CLOCKID: u64 = 1 << 25;

/// The session's wall-clock start and end: the recording's own when the
/// file has perf's clock data (`perf record -k monotonic`: the wall clock
/// and the sample clock at one instant), else the file's modification
/// time less the sampled span; never the time of the import.
#[test]
fn the_session_keeps_the_recordings_own_time() {
    let layout = Layout::default();
    const S: u64 = 1_000_000_000;
    let recs: Vec<RawRec> = [
        app_map(50 * S),
        sample(APP + 0x10, false, 50 * S),
        sample(APP + 0x20, false, 52 * S),
    ]
    .iter()
    .map(|r| r.encode(0, layout))
    .collect();
    // At sample-clock time 40 s, the wall clock said 1,700,000,000 s.
    const WALL: u64 = 1_700_000_000 * S;
    let mut clock = Vec::new();
    clock.extend_from_slice(&1u32.to_le_bytes()); // version
    clock.extend_from_slice(&1u32.to_le_bytes()); // CLOCK_MONOTONIC
    clock.extend_from_slice(&WALL.to_le_bytes());
    clock.extend_from_slice(&(40 * S).to_le_bytes());
    let attr = perf_data::Attr {
        flags: perf_data::CPU_CLOCK.flags | USE_CLOCKID,
        ..perf_data::CPU_CLOCK
    };
    let d = tempfile::tempdir().unwrap();
    let times = |name: &str, attr, features: &[(u32, Vec<u8>)]| {
        let data = d.path().join(format!("{name}.data"));
        perf_data::write_event(&data, attr, layout.sample_type(), &recs, features);
        // Written an hour after the recording's clock data says.
        let mtime = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_700_003_600);
        std::fs::File::options()
            .write(true)
            .open(&data)
            .unwrap()
            .set_modified(mtime)
            .unwrap();
        let session = d.path().join(format!("{name}.pkl"));
        profkit_import::import_perf_data(&data, &session).unwrap();
        let r = SessionReader::open(&session).unwrap();
        (
            r.header().start_time_unix_ns,
            r.footer().unwrap().end_time_unix_ns,
        )
    };
    let with_clock = times("clock", attr, &[(CLOCK_DATA, clock.clone())]);
    assert_eq!(with_clock, (WALL + 10 * S, WALL + 12 * S));
    // Without clock data, or with times of another clock than its own:
    // the modification time ends the span.
    let end = 1_700_003_600 * S;
    assert_eq!(
        times("mtime", perf_data::CPU_CLOCK, &[]),
        (end - 2 * S, end)
    );
    assert_eq!(
        times("other-clock", perf_data::CPU_CLOCK, &[(CLOCK_DATA, clock)]),
        (end - 2 * S, end)
    );
}

/// `PERF_RECORD_COMPRESSED2`, `PERF_RECORD_FINISHED_ROUND`.
const COMPRESSED2: u32 = 83;
const FINISHED_ROUND: u32 = 68;
/// `HEADER_COMPRESSED`'s bit.
const COMPRESSED_BIT: u32 = 27;

/// `records` as perf writes them, one after another.
fn raw_bytes(records: &[RawRec]) -> Vec<u8> {
    let mut v = Vec::new();
    for (kind, misc, body) in records {
        v.extend_from_slice(&kind.to_le_bytes());
        v.extend_from_slice(&misc.to_le_bytes());
        v.extend_from_slice(&u16::try_from(8 + body.len()).unwrap().to_le_bytes());
        v.extend_from_slice(body);
    }
    v
}

/// A `COMPRESSED2` record of `zstd` (its size, the data, padding).
fn compressed2(zstd: &[u8]) -> RawRec {
    let mut body = (zstd.len() as u64).to_le_bytes().to_vec();
    body.extend_from_slice(zstd);
    body.resize(body.len().next_multiple_of(8), 0);
    (COMPRESSED2, 0, body)
}

/// `parts` compressed as perf does: one zstd stream, flushed at the end
/// of each part, each part's output one record.
fn compress_stream(parts: &[&[u8]]) -> Vec<RawRec> {
    use std::io::Write;
    let mut enc = zstd::stream::write::Encoder::new(Vec::new(), 1).unwrap();
    let mut recs = Vec::new();
    for part in parts {
        enc.write_all(part).unwrap();
        enc.flush().unwrap();
        recs.push(compressed2(&std::mem::take(enc.get_mut())));
    }
    recs
}

/// `perf record -z`: the records perf compressed (one stream, a record
/// cut across two compressed records, a FINISHED_ROUND after a round) give
/// the session the same records uncompressed give.
#[test]
fn compressed_records_give_what_the_same_records_give_uncompressed() {
    let layout = Layout::default();
    let recs: Vec<RawRec> = [
        app_map(1),
        sample(APP + 0x10, false, 2),
        sample(KTEXT + 0x20, true, 3),
        sample(APP + 0x30, false, 4),
        sample(APP + 0x40, false, 5),
    ]
    .iter()
    .map(|r| r.encode(0, layout))
    .collect();
    let d = tempfile::tempdir().unwrap();
    let plain = d.path().join("plain.data");
    perf_data::write(&plain, layout.sample_type(), &recs);
    let plain_session = d.path().join("plain.pkl");
    let want = profkit_import::import_perf_data(&plain, &plain_session).unwrap();
    assert_eq!(want.written, 4);

    let bytes = raw_bytes(&recs);
    // perf's rounds end between records, its compressed records anywhere.
    let cut = raw_bytes(&recs[..2]).len() + 12; // within the third record
    let round = raw_bytes(&recs[..4]).len();
    let mut z = compress_stream(&[&bytes[..cut], &bytes[cut..round], &bytes[round..]]);
    z.insert(2, (FINISHED_ROUND, 0, vec![]));
    let compressed = d.path().join("z.data");
    // perf's HEADER_COMPRESSED: version, type (zstd), level, ratio, mmap length.
    let info: Vec<u8> = [1u32, 1, 1, 10]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .chain(65536u64.to_le_bytes())
        .collect();
    perf_data::write_with_features(
        &compressed,
        layout.sample_type(),
        &z,
        &[(COMPRESSED_BIT, info.clone())],
    );
    let session = d.path().join("z.pkl");
    let got = profkit_import::import_perf_data(&compressed, &session).unwrap();
    assert_eq!(
        (got.samples, got.written, got.bad_records, got.no_mapping),
        (want.samples, want.written, 0, want.no_mapping)
    );
    assert_eq!(samples(&session), samples(&plain_session));

    // Not zstd data: refused, the record named.
    let junk = d.path().join("junk.data");
    perf_data::write_with_features(
        &junk,
        layout.sample_type(),
        &[compressed2(&[0x55; 40])],
        &[(COMPRESSED_BIT, info)],
    );
    let e = profkit_import::import_perf_data(&junk, &d.path().join("j.pkl")).unwrap_err();
    assert!(
        matches!(e, profkit_import::Error::Compressed { .. }),
        "{e:?}"
    );
    assert!(e.to_string().contains("does not decode"), "{e}");
}

/// A zstd bomb (a few hundred bytes that expand to 64 MiB of zeros) is
/// refused with the bound it passed named: 256 times the data section,
/// at most 4 GiB.
#[test]
fn a_compressed_record_expanding_past_its_bound_is_refused() {
    let layout = Layout::default();
    let zeros = vec![0u8; 64 << 20];
    let z = compress_stream(&[&zeros]);
    let data_size = raw_bytes(&z).len() as u64;
    assert!(data_size < 16 << 10, "{data_size}");
    let d = tempfile::tempdir().unwrap();
    let bomb = d.path().join("bomb.data");
    perf_data::write_with_features(
        &bomb,
        layout.sample_type(),
        &z,
        &[(COMPRESSED_BIT, vec![0; 24])],
    );
    let e = profkit_import::import_perf_data(&bomb, &d.path().join("b.pkl")).unwrap_err();
    let text = e.to_string();
    assert!(
        matches!(e, profkit_import::Error::Compressed { .. }),
        "{e:?}"
    );
    let limit = profkit_import::MAX_RATIO * data_size;
    assert!(
        text.contains(&format!("expand past {limit} bytes"))
            && text.contains(&format!("{} times", profkit_import::MAX_RATIO))
            && text.contains(&profkit_import::MAX_EXPANDED.to_string()),
        "{text}"
    );
}

/// linux-perf-data's fixtures (another machine's `perf record sleep 1`),
/// in `testdata/perf-data`.
fn fixture(name: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/perf-data")
        .join(name)
}

/// Another machine's recordings, as perf 6.x writes them: every sample
/// imported (the kernel's unnamed, none lost), the recording's own time
/// (its clock data: `-k monotonic`), compressed or not.
#[test]
fn linux_perf_data_fixtures_import_whole() {
    let d = tempfile::tempdir().unwrap();
    // Samples, and the first record's wall-clock second by the file's
    // clock data (2025-11-08 12:23:01 UTC for sleep.data).
    for (name, samples, start) in [
        ("sleep.data", 7, 1_762_604_581),
        ("sleep.compressed.data", 8, 1_767_545_149),
        ("sleep.compressed2.data", 7, 1_762_604_578),
    ] {
        let session = d.path().join(format!("{name}.pkl"));
        let s = profkit_import::import_perf_data(&fixture(name), &session).unwrap();
        assert_eq!(
            (s.samples, s.written, s.no_mapping, s.no_task, s.bad_records),
            (samples, samples, 0, 0, 0),
            "{name}"
        );
        let r = SessionReader::open(&session).unwrap();
        assert_eq!(
            r.header().start_time_unix_ns / 1_000_000_000,
            start,
            "{name}"
        );
    }
}

/// A pipe-mode stream (`perf record -o -`): the 16-byte header, the
/// event's attribute as a HEADER_ATTR record (cpu-clock at 4000 Hz with
/// `sample_type`, one id), then `records`.
fn pipe_stream(sample_type: u64, records: &[RawRec]) -> Vec<u8> {
    let mut v = b"PERFILE2".to_vec();
    v.extend_from_slice(&16u64.to_le_bytes());
    let mut attr = Vec::new();
    attr.extend_from_slice(&1u32.to_le_bytes()); // PERF_TYPE_SOFTWARE
    attr.extend_from_slice(&64u32.to_le_bytes()); // PERF_ATTR_SIZE_VER0
    for w in [0u64, 4000, sample_type, 0, 1 << 10 | 1 << 18, 0, 0] {
        attr.extend_from_slice(&w.to_le_bytes());
    }
    attr.extend_from_slice(&7u64.to_le_bytes()); // its one id
    let mut all = vec![(64u32, 0u16, attr)]; // PERF_RECORD_HEADER_ATTR
    all.extend(records.iter().cloned());
    v.extend_from_slice(&raw_bytes(&all));
    v
}

/// Pipe mode, from a file: the records a file-mode file gives, compressed
/// or not; AUXTRACE and HEADER_TRACING_DATA records (with the data that
/// follows them in a pipe) skipped and counted; a zstd bomb refused with
/// the stream's bound named. linux-perf-data's `-z -o -` fixture gives
/// what its file-mode twin gives.
#[test]
fn pipe_mode_streams_give_what_files_give() {
    let layout = Layout::default();
    let recs: Vec<RawRec> = [
        app_map(1),
        sample(APP + 0x10, false, 2),
        sample(KTEXT + 0x20, true, 3),
        sample(APP + 0x30, false, 4),
    ]
    .iter()
    .map(|r| r.encode(0, layout))
    .collect();
    let d = tempfile::tempdir().unwrap();
    let plain = d.path().join("plain.data");
    perf_data::write(&plain, layout.sample_type(), &recs);
    let plain_session = d.path().join("plain.pkl");
    profkit_import::import_perf_data(&plain, &plain_session).unwrap();
    let want = samples(&plain_session);
    assert_eq!(want.len(), 3);

    // AUXTRACE (size 24 of trace data after it), HEADER_TRACING_DATA
    // (13 bytes, padded to 16, after it): their data is not records.
    let mut aux = 24u64.to_le_bytes().to_vec();
    aux.resize(40, 0);
    let with_extras = |mut v: Vec<u8>| {
        v.extend_from_slice(&raw_bytes(&[(71, 0, aux.clone())]));
        v.extend_from_slice(&[0xff; 24]);
        v.extend_from_slice(&raw_bytes(&[(66, 0, 13u64.to_le_bytes().to_vec())]));
        v.extend_from_slice(&[0xee; 16]);
        v
    };
    let bytes = raw_bytes(&recs);
    let cut = raw_bytes(&recs[..2]).len() + 12;
    let zrecs = compress_stream(&[&bytes[..cut], &bytes[cut..]]);
    for (name, stream) in [
        (
            "pipe",
            with_extras(pipe_stream(layout.sample_type(), &recs)),
        ),
        (
            "zpipe",
            with_extras(pipe_stream(layout.sample_type(), &zrecs)),
        ),
    ] {
        let path = d.path().join(format!("{name}.data"));
        std::fs::write(&path, stream).unwrap();
        let session = d.path().join(format!("{name}.pkl"));
        let s = profkit_import::import_perf_data(&path, &session).unwrap();
        assert_eq!(
            (s.written, s.bad_records, s.records_skipped),
            (3, 0, 2),
            "{name}"
        );
        assert!(
            s.warnings.iter().any(|w| w.contains("2 records not read")),
            "{:?}",
            s.warnings
        );
        assert_eq!(samples(&session), want, "{name}");
    }

    // 64 MiB of FINISHED_ROUND records (well-formed, so the reader reads
    // on) from a few kilobytes.
    let rounds = raw_bytes(&[(FINISHED_ROUND, 0, vec![])]).repeat(8 << 20);
    let bomb = compress_stream(&[&rounds]);
    assert!(raw_bytes(&bomb).len() < 16 << 10);
    let path = d.path().join("bomb.data");
    std::fs::write(&path, pipe_stream(layout.sample_type(), &bomb)).unwrap();
    let e = profkit_import::import_perf_data(&path, &d.path().join("b.pkl")).unwrap_err();
    assert!(
        matches!(e, profkit_import::Error::Compressed { .. }),
        "{e:?}"
    );
    let text = e.to_string();
    assert!(
        text.contains("expand past") && text.contains("256 times the"),
        "{text}"
    );

    // The fixtures: two runs of `perf record -z sleep 1` on one machine,
    // one to a pipe; both 8 samples in the kernel (one image: its cookie
    // by the same build-id), none lost.
    let twin = |name: &str| {
        let session = d.path().join(format!("{name}.fixture.pkl"));
        let s = profkit_import::import_perf_data(&fixture(name), &session).unwrap();
        let mut cookies: Vec<u64> = samples(&session).iter().map(|&(c, _)| c).collect();
        cookies.dedup();
        (s.samples, s.written, s.no_mapping, s.bad_records, cookies)
    };
    let pipe = twin("sleep.compressed.pipe.data");
    assert_eq!(
        (pipe.0, pipe.1, pipe.2, pipe.3, pipe.4.len()),
        (8, 8, 0, 0, 1)
    );
    assert_eq!(pipe, twin("sleep.compressed.data"));
}

/// Record types and header features newer than this import (a kernel
/// record type 30, a perf record type 90, feature bit 40) are skipped and
/// counted, said in a warning, never read as something else: the samples
/// around them import as without them.
#[test]
fn newer_record_types_and_features_are_skipped_with_a_count() {
    let layout = Layout::default();
    let known: Vec<RawRec> = [
        app_map(1),
        sample(APP + 0x10, false, 2),
        sample(APP + 0x20, false, 4),
    ]
    .iter()
    .map(|r| r.encode(0, layout))
    .collect();
    let mut recs = known.clone();
    recs.insert(2, (30, 0, vec![0; 32]));
    recs.insert(2, (90, 0, vec![0xab; 16]));
    let d = tempfile::tempdir().unwrap();
    let plain = d.path().join("plain.data");
    perf_data::write(&plain, layout.sample_type(), &known);
    let plain_session = d.path().join("plain.pkl");
    profkit_import::import_perf_data(&plain, &plain_session).unwrap();

    let newer = d.path().join("newer.data");
    perf_data::write_with_features(&newer, layout.sample_type(), &recs, &[(40, vec![7; 24])]);
    let session = d.path().join("newer.pkl");
    let s = profkit_import::import_perf_data(&newer, &session).unwrap();
    assert_eq!(
        (
            s.written,
            s.bad_records,
            s.records_skipped,
            s.features_skipped
        ),
        (2, 0, 2, 1)
    );
    assert!(
        s.warnings.iter().any(|w| w.contains("2 records not read"))
            && s.warnings.iter().any(|w| w.contains("(bits [40])")),
        "{:?}",
        s.warnings
    );
    assert_eq!(samples(&session), samples(&plain_session));
}
