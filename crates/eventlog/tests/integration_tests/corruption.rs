//! Damaged files: torn tails, flipped bytes, foreign files, future versions.

use std::io::Write;

use profkit_eventlog::*;

use crate::util::*;

fn write_chunks(path: &std::path::Path, n: usize) -> Vec<Vec<ExpandedSample>> {
    let s = small_synth(n, 200, 3);
    let mut w = SessionWriter::create(path, &header()).unwrap();
    for (round, p) in payloads(&s).iter().enumerate() {
        w.append_chunk(round as u64, 0, p).unwrap();
    }
    s.rounds
}

#[test]
fn torn_tail_is_reported_not_misread() {
    let dir = tempfile::tempdir().unwrap();
    let path = session_path(dir.path());
    let want = write_chunks(&path, 3);
    let good_len = std::fs::metadata(&path).unwrap().len();
    // Half of a fourth chunk, as if the writer died in its write.
    let s = small_synth(1, 200, 9);
    let p = &payloads(&s)[0];
    let mut frame = Vec::new();
    {
        let tmp = tempfile::tempdir().unwrap();
        let tp = session_path(tmp.path());
        let mut w = SessionWriter::create(&tp, &header()).unwrap();
        let start = w.len();
        w.append_chunk(3, 0, p).unwrap();
        frame.extend_from_slice(&std::fs::read(&tp).unwrap()[start as usize..]);
    }
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    f.write_all(&frame[..frame.len() / 2]).unwrap();
    drop(f);

    let r = SessionReader::open(&path).unwrap();
    assert_eq!(read_samples(&r), want);
    assert_eq!(r.bad_chunks().len(), 1);
    let b = &r.bad_chunks()[0];
    assert!(b.is_torn_tail(), "{b}");
    assert_eq!((b.index, b.offset), (3, good_len));
    assert!(b.to_string().contains("torn tail"), "{b}");
    assert!(r.footer().is_none());
}

#[test]
fn flipped_byte_in_chunk_2_of_4_costs_only_that_chunk() {
    let dir = tempfile::tempdir().unwrap();
    let path = session_path(dir.path());
    let want = write_chunks(&path, 4);
    let clean = SessionReader::open(&path).unwrap();
    let c2 = clean.chunks()[1];

    let mut bytes = std::fs::read(&path).unwrap();
    let victim = c2.payload_offset() as usize + c2.len as usize / 2;
    bytes[victim] ^= 0x10;
    std::fs::write(&path, &bytes).unwrap();

    let r = SessionReader::open(&path).unwrap();
    let rounds: Vec<u64> = r.chunks().iter().map(|c| c.round).collect();
    assert_eq!(rounds, [0, 2, 3]);
    let got = read_samples(&r);
    assert_eq!(got, [want[0].clone(), want[2].clone(), want[3].clone()]);
    assert_eq!(r.bad_chunks().len(), 1);
    let b = &r.bad_chunks()[0];
    assert_eq!((b.index, b.offset), (1, c2.offset));
    assert!(
        matches!(b.reason, BadReason::PayloadCrc { round: 1, .. }),
        "{b}"
    );
    let msg = b.to_string();
    assert!(
        msg.contains("chunk 1") && msg.contains(&format!("byte {}", c2.offset)),
        "{msg}"
    );
}

#[test]
fn flipped_byte_in_frame_header_resyncs() {
    let dir = tempfile::tempdir().unwrap();
    let path = session_path(dir.path());
    let want = write_chunks(&path, 4);
    let c2 = SessionReader::open(&path).unwrap().chunks()[1];
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[c2.offset as usize + 22] ^= 0xff; // the payload length
    std::fs::write(&path, &bytes).unwrap();
    let r = SessionReader::open(&path).unwrap();
    assert_eq!(
        read_samples(&r),
        [want[0].clone(), want[2].clone(), want[3].clone()]
    );
    assert!(matches!(
        r.bad_chunks()[0].reason,
        BadReason::FrameHeaderCrc { .. }
    ));
}

#[test]
fn wrong_magic_is_not_a_session() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notes.txt");
    std::fs::write(&path, "these are not the samples you are looking for").unwrap();
    let err = SessionReader::open(&path).unwrap_err();
    assert!(matches!(err, Error::NotASession { .. }), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("not a profkit session") && msg.contains("notes.txt"),
        "{msg}"
    );
    assert!(matches!(
        SessionWriter::open_append(&path),
        Err(Error::NotASession { .. })
    ));
}

#[test]
fn future_version_names_both_versions() {
    let dir = tempfile::tempdir().unwrap();
    let path = session_path(dir.path());
    write_chunks(&path, 1);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[8..10].copy_from_slice(&(FORMAT_VERSION + 1).to_le_bytes());
    std::fs::write(&path, &bytes).unwrap();
    let err = SessionReader::open(&path).unwrap_err();
    match &err {
        Error::UnsupportedVersion {
            found, min, max, ..
        } => {
            assert_eq!(
                (*found, *min, *max),
                (FORMAT_VERSION + 1, MIN_READ_VERSION, FORMAT_VERSION)
            );
        }
        e => panic!("{e}"),
    }
    let msg = err.to_string();
    assert!(
        msg.contains(&format!("version {}", FORMAT_VERSION + 1)),
        "{msg}"
    );
    assert!(
        msg.contains(&format!("{MIN_READ_VERSION} to {FORMAT_VERSION}")),
        "{msg}"
    );
    assert!(matches!(
        SessionWriter::open_append(&path),
        Err(Error::UnsupportedVersion { .. })
    ));
}

#[test]
fn empty_file_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = session_path(dir.path());
    std::fs::write(&path, b"").unwrap();
    let err = SessionReader::open(&path).unwrap_err();
    assert!(matches!(err, Error::EmptyFile { .. }), "{err}");
    assert!(err.to_string().contains("empty file"), "{err}");
    assert!(matches!(
        SessionWriter::open_append(&path),
        Err(Error::EmptyFile { .. })
    ));
}

#[test]
fn missing_file_is_an_io_error_naming_the_path() {
    let err = SessionReader::open("/nonexistent/profkit/session.pkl").unwrap_err();
    assert!(matches!(err, Error::Io { op: "open", .. }), "{err}");
    assert!(
        err.to_string().contains("/nonexistent/profkit/session.pkl"),
        "{err}"
    );
}

#[test]
fn every_single_byte_flip_is_caught_or_harmless() {
    // Flip each byte of a small session in turn: the reader never panics,
    // never returns a chunk whose payload differs from what was written.
    let dir = tempfile::tempdir().unwrap();
    let path = session_path(dir.path());
    let s = small_synth(3, 20, 4);
    let mut w = SessionWriter::create(&path, &header()).unwrap();
    profkit_eventlog::synth::write_session(&mut w, &s).unwrap();
    let clean = std::fs::read(&path).unwrap();
    let good = SessionReader::from_bytes(clean.clone(), "clean").unwrap();
    let payload_of_round = |round: u64| {
        let c = good.chunks().iter().find(|c| c.round == round).unwrap();
        good.payload(c).to_vec()
    };
    for i in 0..clean.len() {
        let mut b = clean.clone();
        b[i] ^= 0x01;
        if let Ok(r) = SessionReader::from_bytes(b, "flip") {
            for c in r.chunks() {
                assert_eq!(r.payload(c), payload_of_round(c.round), "flip at {i}");
            }
            assert!(
                r.chunks().len() >= 2,
                "flip at {i} lost more than one chunk"
            );
        }
    }
}

#[test]
fn a_fifo_or_a_link_to_dev_zero_is_refused_without_hanging() {
    let d = tempfile::tempdir().unwrap();
    let fifo = d.path().join("session.pkl");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    // Nobody writes: a blocking open would wait forever.
    let e = SessionReader::open(&fifo).unwrap_err().to_string();
    assert!(e.contains("not a regular file"), "{e}");
    let zero = d.path().join("zero.pkl");
    std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
    // An endless read before.
    let e = SessionReader::open(&zero).unwrap_err().to_string();
    assert!(e.contains("not a regular file"), "{e}");
    // A 1 TB hole (found by the session_dir fuzz target: the reader
    // reserved it all and aborted).
    let sparse = d.path().join("sparse.pkl");
    std::fs::File::create(&sparse)
        .unwrap()
        .set_len(1 << 40)
        .unwrap();
    let e = SessionReader::open(&sparse).unwrap_err().to_string();
    assert!(e.contains("sparse"), "{e}");
    // A 16 MiB part that is a 4 KiB header and holes (issue 25): refused
    // too, and a written session of that size is not.
    let holes = d.path().join("holes.pkl");
    std::fs::write(&holes, vec![1u8; 4096]).unwrap();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&holes)
        .unwrap()
        .set_len(16 << 20)
        .unwrap();
    let e = SessionReader::open(&holes).unwrap_err().to_string();
    assert!(e.contains("sparse"), "{e}");
    let full = d.path().join("full.pkl");
    std::fs::write(&full, vec![1u8; 16 << 20]).unwrap();
    let e = SessionReader::open(&full).unwrap_err().to_string();
    assert!(!e.contains("sparse"), "{e}");
}
