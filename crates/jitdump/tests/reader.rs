//! `DumpReader` on a file that grows, and its bounds.

mod common;

use std::cell::Cell;
use std::io::Write;
use std::os::unix::fs::FileExt;

use common::{parse_all, sample_dump};
use profkit_jitdump::{DumpReader, DumpWriter, Error, Limits, Timed};

/// A file that counts the bytes read from it.
struct Counting<'a> {
    bytes: &'a [u8],
    read: Cell<u64>,
    max_one: Cell<usize>,
}

impl<'a> Counting<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Counting {
            bytes,
            read: Cell::new(0),
            max_one: Cell::new(0),
        }
    }
}

impl FileExt for Counting<'_> {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
        let start = (offset as usize).min(self.bytes.len());
        let n = buf.len().min(self.bytes.len() - start);
        buf[..n].copy_from_slice(&self.bytes[start..start + n]);
        self.read.set(self.read.get() + n as u64);
        self.max_one.set(self.max_one.get().max(buf.len()));
        Ok(n)
    }

    fn write_at(&self, _: &[u8], _: u64) -> std::io::Result<usize> {
        unreachable!()
    }
}

fn read_to_end(r: &mut DumpReader, file: &impl FileExt, max_bytes: u64) -> Vec<Timed> {
    let mut got = Vec::new();
    loop {
        let o = r.read(file, max_bytes).unwrap();
        got.extend(o.records);
        if !o.more {
            return got;
        }
    }
}

#[test]
fn a_file_growing_byte_by_byte_gives_the_records_of_one_read() {
    let w = sample_dump();
    let all = w.bytes();
    let (_, expected) = parse_all(all, &Limits::default()).unwrap();
    let mut file = tempfile::NamedTempFile::new().unwrap();
    let mut r = DumpReader::new(Limits::default());
    let mut got = Vec::new();
    for (i, b) in all.iter().enumerate() {
        file.write_all(&[*b]).unwrap();
        file.flush().unwrap();
        got.extend(read_to_end(&mut r, file.as_file(), 1 << 20));
        assert!(r.offset() <= i as u64 + 1);
    }
    assert!(r.header().is_some());
    assert_eq!(got, expected);
    assert_eq!(r.offset(), all.len() as u64);
    assert_eq!(r.stats().bytes, all.len() as u64);
}

#[test]
fn a_file_growing_by_half_records_gives_the_records_of_one_read() {
    let mut w = sample_dump();
    for i in 0..20 {
        w.code_load(
            2000 + i,
            1,
            2,
            0x1000 * i,
            &vec![0xcc; i as usize * 7],
            i,
            "f",
        );
    }
    let all = w.bytes();
    let (_, expected) = parse_all(all, &Limits::default()).unwrap();
    let mut file = tempfile::NamedTempFile::new().unwrap();
    let mut r = DumpReader::new(Limits::default());
    let mut got = Vec::new();
    let mut at = 0;
    let mut step = 3;
    while at < all.len() {
        let end = (at + step).min(all.len());
        file.write_all(&all[at..end]).unwrap();
        at = end;
        step = step * 7 % 61 + 1;
        got.extend(read_to_end(&mut r, file.as_file(), 50));
    }
    assert_eq!(got, expected);
    let s = r.stats();
    assert_eq!(
        (s.loads, s.moves, s.debug, s.unwinding, s.unknown),
        (21, 1, 1, 1, 1)
    );
}

#[test]
fn max_bytes_is_respected() {
    let mut w = DumpWriter::new(1, 0);
    for i in 0..100u64 {
        w.code_load(i, 1, 2, 0x1000 * i, &[0x90; 40], i, "function");
    }
    let all = w.bytes();
    let file = Counting::new(all);
    let mut r = DumpReader::new(Limits::default());
    let mut calls = 0;
    let mut got = Vec::new();
    loop {
        let before = file.read.get();
        let o = r.read(&file, 300).unwrap();
        let read = file.read.get() - before;
        // The header (40) is read outside max_bytes, once.
        assert!(read <= 300 + if calls == 0 { 40 } else { 0 }, "{read}");
        calls += 1;
        got.extend(o.records);
        if !o.more {
            break;
        }
    }
    assert_eq!(got.len(), 100);
    // Each record is 16 + 40 + 9 + 40 = 105 bytes: ~300/105 a call.
    assert!(calls >= 100 * 105 / 300, "{calls} calls");
}

#[test]
fn a_record_larger_than_max_bytes_is_read_whole_and_no_more() {
    let mut w = DumpWriter::new(1, 0);
    w.code_load(1, 1, 2, 0x1000, &[0x90; 5000], 1, "big")
        .code_load(2, 1, 2, 0x2000, &[0x90; 5000], 2, "big2");
    let all = w.bytes();
    let file = Counting::new(all);
    let mut r = DumpReader::new(Limits::default());
    let o = r.read(&file, 10).unwrap();
    assert_eq!(o.records.len(), 1);
    assert!(o.more);
    let first_len = 16 + 40 + 4 + 5000;
    assert_eq!(file.read.get(), 40 + first_len);
    let o = r.read(&file, 0).unwrap();
    assert_eq!(o.records.len(), 1);
    assert_eq!(file.read.get(), all.len() as u64);
    // No more than max(max_bytes, max_record) in one read_at, nor in a call.
    let limits = Limits {
        max_record: 6000,
        ..Limits::default()
    };
    let file = Counting::new(all);
    let mut r = DumpReader::new(limits);
    assert_eq!(r.read(&file, 1).unwrap().records.len(), 1);
    assert!(file.read.get() <= 40 + 6000);
    assert!(file.max_one.get() <= 6000);
}

#[test]
fn errors_are_final_and_records_before_them_kept() {
    let mut w = sample_dump();
    // A record claiming 8 bytes, less than its prefix.
    w.raw(&[0, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    let file = Counting::new(w.bytes());
    let mut r = DumpReader::new(Limits::default());
    let o = r.read(&file, 1 << 20).unwrap();
    assert_eq!(o.records.len(), 6);
    assert!(!o.more);
    let e = r.read(&file, 1 << 20).unwrap_err();
    assert!(matches!(e, Error::Malformed { .. }), "{e}");
    assert!(
        e.to_string().contains(&format!("offset {}", r.offset())),
        "{e}"
    );
    assert!(matches!(r.read(&file, 1 << 20), Err(Error::GivenUp)));
}

#[test]
fn a_short_file_waits_but_a_wrong_magic_is_refused_at_once() {
    let w = sample_dump();
    let file = Counting::new(&w.bytes()[..20]);
    let mut r = DumpReader::new(Limits::default());
    let o = r.read(&file, 100).unwrap();
    assert!(o.records.is_empty() && !o.more && r.header().is_none());
    let file = Counting::new(b"\x7fELF\x02\x01");
    let mut r = DumpReader::new(Limits::default());
    assert!(matches!(r.read(&file, 100), Err(Error::NotJitdump)));
    assert!(matches!(r.read(&file, 100), Err(Error::GivenUp)));
    let file = Counting::new(b"JiTD\x01\0\0\0");
    let mut r = DumpReader::new(Limits::default());
    assert!(matches!(r.read(&file, 100), Err(Error::OtherEndian)));
}
