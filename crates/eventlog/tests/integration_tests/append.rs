//! Resuming a session after a crash.

use std::io::Write;

use profkit_eventlog::*;

use crate::util::*;

/// Writes `n` chunks and, if `torn`, half of another, then "crashes" (drops
/// the writer without a footer).
fn crashed_session(path: &std::path::Path, n: usize, torn: bool) -> (Vec<Vec<u8>>, u64) {
    let s = small_synth(n + 1, 150, 6);
    let ps = payloads(&s);
    let mut w = SessionWriter::create(path, &header()).unwrap();
    for (round, p) in ps[..n].iter().enumerate() {
        w.append_chunk(round as u64, 0, p).unwrap();
    }
    let good_len = w.len();
    drop(w);
    if torn {
        let mut f = std::fs::OpenOptions::new().append(true).open(path).unwrap();
        f.write_all(b"PKCK\x03\0\0\0\0\0\0\0partial frame hea")
            .unwrap();
    }
    (ps, good_len)
}

#[test]
fn open_append_after_crash_cuts_torn_tail_and_continues() {
    let dir = tempfile::tempdir().unwrap();
    let path = session_path(dir.path());
    let (ps, good_len) = crashed_session(&path, 3, true);
    let torn_len = std::fs::metadata(&path).unwrap().len();
    assert!(torn_len > good_len);

    let (mut w, resume) = SessionWriter::open_append(&path).unwrap();
    assert_eq!(resume.header, header());
    assert_eq!(resume.next_round, 3);
    assert_eq!(resume.chunks, 3);
    assert_eq!(resume.truncated, torn_len - good_len);
    assert!(resume.bad_chunks.is_empty());
    assert_eq!(w.len(), good_len);
    assert_eq!(std::fs::metadata(&path).unwrap().len(), good_len);

    w.append_chunk(resume.next_round, 0, &ps[3]).unwrap();
    w.write_footer(&SessionFooter {
        rounds: 4,
        ..Default::default()
    })
    .unwrap();
    let r = SessionReader::open(&path).unwrap();
    assert!(r.is_complete(), "{:?}", r.bad_chunks());
    assert_eq!(r.chunks().len(), 4);
    for (i, c) in r.chunks().iter().enumerate() {
        assert_eq!(r.payload(c), &ps[i][..]);
    }
}

#[test]
fn open_append_on_a_clean_unfinished_session() {
    let dir = tempfile::tempdir().unwrap();
    let path = session_path(dir.path());
    let (_, good_len) = crashed_session(&path, 2, false);
    let (w, resume) = SessionWriter::open_append(&path).unwrap();
    assert_eq!(
        (resume.next_round, resume.chunks, resume.truncated),
        (2, 2, 0)
    );
    assert_eq!(w.len(), good_len);
    assert_eq!(w.next_round(), 2);
}

#[test]
fn open_append_with_only_a_header() {
    let dir = tempfile::tempdir().unwrap();
    let path = session_path(dir.path());
    drop(SessionWriter::create(&path, &header()).unwrap());
    let (mut w, resume) = SessionWriter::open_append(&path).unwrap();
    assert_eq!((resume.next_round, resume.chunks), (0, 0));
    w.append_chunk(0, 0, b"").unwrap();
}

#[test]
fn open_append_keeps_chunks_after_a_corrupt_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = session_path(dir.path());
    let (ps, _) = crashed_session(&path, 4, true);
    let c1 = SessionReader::open(&path).unwrap().chunks()[1];
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[c1.payload_offset() as usize + 3] ^= 0x55;
    std::fs::write(&path, &bytes).unwrap();

    let (mut w, resume) = SessionWriter::open_append(&path).unwrap();
    assert_eq!(resume.next_round, 4);
    assert_eq!(resume.chunks, 3);
    assert_eq!(resume.bad_chunks.len(), 1);
    assert_eq!(resume.bad_chunks[0].offset, c1.offset);
    assert!(resume.truncated > 0);
    w.append_chunk(4, 0, &ps[4]).unwrap();
    let r = SessionReader::open(&path).unwrap();
    let rounds: Vec<u64> = r.chunks().iter().map(|c| c.round).collect();
    assert_eq!(rounds, [0, 2, 3, 4]);
    assert_eq!(r.bad_chunks().len(), 1);
}

#[test]
fn open_append_refuses_a_finished_session() {
    let dir = tempfile::tempdir().unwrap();
    let path = session_path(dir.path());
    let mut w = SessionWriter::create(&path, &header()).unwrap();
    w.append_chunk(0, 0, b"").unwrap();
    w.write_footer(&SessionFooter::default()).unwrap();
    let err = SessionWriter::open_append(&path).unwrap_err();
    assert!(matches!(err, Error::Finished { .. }), "{err}");
}

#[test]
fn open_append_cuts_a_torn_footer() {
    let dir = tempfile::tempdir().unwrap();
    let path = session_path(dir.path());
    let (_, good_len) = crashed_session(&path, 2, false);
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    f.write_all(b"PKFT\x40\0\0\0\x01\x02").unwrap();
    drop(f);
    let (mut w, resume) = SessionWriter::open_append(&path).unwrap();
    assert_eq!((resume.next_round, resume.truncated), (2, 10));
    assert_eq!(w.len(), good_len);
    w.write_footer(&SessionFooter::default()).unwrap();
    assert!(SessionReader::open(&path).unwrap().is_complete());
}
