//! Hostile dumps: truncated, lying sizes, the other byte order, arbitrary
//! and mutated bytes. Never a panic; what records hold is never more than
//! the input.

mod common;

use std::os::unix::fs::FileExt;

use common::{held_bytes, parse_all, sample_dump};
use profkit_jitdump::{parse_record, DumpReader, DumpWriter, Error, Header, Limits, Record};
use proptest::prelude::*;

/// A record: prefix { id, total_size, time } and body.
fn record(id: u32, total_size: u32, body: &[u8]) -> Vec<u8> {
    let mut r = Vec::new();
    r.extend_from_slice(&id.to_le_bytes());
    r.extend_from_slice(&total_size.to_le_bytes());
    r.extend_from_slice(&7u64.to_le_bytes());
    r.extend_from_slice(body);
    r
}

fn sized(id: u32, body: &[u8]) -> Vec<u8> {
    record(id, 16 + body.len() as u32, body)
}

fn malformed(buf: &[u8]) -> &'static str {
    match parse_record(buf, &Limits::default()) {
        Err(Error::Malformed { offset: 0, what }) => what,
        r => panic!("not malformed: {r:?}"),
    }
}

#[test]
fn a_dump_cut_at_every_byte_gives_a_prefix_of_its_records_and_no_error() {
    let w = sample_dump();
    let all = w.bytes();
    let (_, full) = parse_all(all, &Limits::default()).unwrap();
    for cut in 40..=all.len() {
        let (_, records) = parse_all(&all[..cut], &Limits::default()).unwrap();
        assert_eq!(records, full[..records.len()], "cut at {cut}");
        let whole = full.iter().filter(|t| (t.offset as usize) < cut).count();
        assert!(
            records.len() == whole || records.len() + 1 == whole,
            "cut at {cut}"
        );
    }
    // And record by record: a partial record is None, never an error.
    let first = &all[40..];
    let (_, len) = parse_record(first, &Limits::default()).unwrap().unwrap();
    for cut in 0..len {
        assert!(parse_record(&first[..cut], &Limits::default())
            .unwrap()
            .is_none());
    }
}

#[test]
fn record_sizes_that_lie() {
    for size in [0u32, 8, 15] {
        assert!(malformed(&record(0, size, &[0; 64])).contains("prefix"));
    }
    let e = parse_record(&record(0, u32::MAX, &[]), &Limits::default()).unwrap_err();
    assert!(
        matches!(e, Error::RecordTooLarge { offset: 0, size, max } if size == u32::MAX as u64 && max == 16 << 20)
    );
    assert_eq!(
        e.to_string(),
        "jitdump record at offset 0 claims 3.9 GiB (more than 16 MiB): the file is not a jitdump or is corrupt"
    );
    // Fixed fields past the record's end.
    assert!(malformed(&sized(0, &[0; 39])).contains("code load"));
    assert!(malformed(&sized(1, &[0; 47])).contains("code move"));
    assert!(malformed(&sized(2, &[0; 15])).contains("debug info"));
    assert!(malformed(&sized(4, &[0; 23])).contains("unwinding"));
    // A close and an unknown record of any size are fine.
    assert!(parse_record(&sized(3, &[1, 2, 3]), &Limits::default())
        .unwrap()
        .is_some());
    assert!(parse_record(&sized(99, &[]), &Limits::default())
        .unwrap()
        .is_some());
}

fn code_load_body(code_size: u64, name: &[u8], code: &[u8]) -> Vec<u8> {
    let mut b = vec![0u8; 24];
    b.extend_from_slice(&code_size.to_le_bytes());
    b.extend_from_slice(&1u64.to_le_bytes());
    b.extend_from_slice(name);
    b.extend_from_slice(code);
    b
}

#[test]
fn code_load_sizes_that_lie() {
    assert!(malformed(&sized(0, &code_load_body(12, b"f\0", &[0; 11]))).contains("code_size"));
    assert!(
        malformed(&sized(0, &code_load_body(u64::MAX, b"f\0", &[0; 11]))).contains("code_size")
    );
    assert!(malformed(&sized(0, &code_load_body(0, b"no nul", &[]))).contains("NUL"));
    // Fits exactly; padding after the code is allowed.
    assert!(parse_record(
        &sized(0, &code_load_body(11, b"f\0", &[0; 11])),
        &Limits::default()
    )
    .unwrap()
    .is_some());
    assert!(parse_record(
        &sized(0, &code_load_body(3, b"f\0", &[0; 11])),
        &Limits::default()
    )
    .unwrap()
    .is_some());
}

#[test]
fn debug_info_entry_counts_that_lie() {
    let body = |nr: u64, rest: &[u8]| {
        let mut b = 0x1000u64.to_le_bytes().to_vec();
        b.extend_from_slice(&nr.to_le_bytes());
        b.extend_from_slice(rest);
        b
    };
    let one = [&[0u8; 16][..], b"a.py\0"].concat();
    assert!(malformed(&sized(2, &body(u64::MAX, &one))).contains("more entries than its bytes"));
    assert!(malformed(&sized(2, &body(2, &one))).contains("more entries than its bytes"));
    // Enough bytes for two by count, but the second has no NUL.
    let two = [&one[..], &[1u8; 17][..]].concat();
    assert!(malformed(&sized(2, &body(2, &two))).contains("NUL"));
    // Over max_debug_entries.
    let many: Vec<u8> = one.iter().copied().cycle().take(one.len() * 10).collect();
    let limits = Limits {
        max_debug_entries: 9,
        ..Limits::default()
    };
    assert!(matches!(
        parse_record(&sized(2, &body(10, &many)), &limits),
        Err(Error::Malformed { what, .. }) if what.contains("limit")
    ));
    assert!(
        parse_record(&sized(2, &body(10, &many)), &Limits::default())
            .unwrap()
            .is_some()
    );
}

#[test]
fn unwinding_sizes_that_lie() {
    let body = |size: u64, hdr: u64, data: &[u8]| {
        let mut b = size.to_le_bytes().to_vec();
        b.extend_from_slice(&hdr.to_le_bytes());
        b.extend_from_slice(&0x50u64.to_le_bytes());
        b.extend_from_slice(data);
        b
    };
    assert!(malformed(&sized(4, &body(8, 9, &[0; 8]))).contains("eh_frame_hdr_size"));
    assert!(malformed(&sized(4, &body(9, 4, &[0; 8]))).contains("unwinding_size"));
    assert!(malformed(&sized(4, &body(u64::MAX, 4, &[0; 8]))).contains("unwinding_size"));
    let limits = Limits {
        max_unwind: 7,
        ..Limits::default()
    };
    assert!(matches!(
        parse_record(&sized(4, &body(8, 4, &[0; 8])), &limits),
        Err(Error::Malformed { what, .. }) if what.contains("limit")
    ));
    let (t, _) = parse_record(&sized(4, &body(8, 8, &[0; 8])), &Limits::default())
        .unwrap()
        .unwrap();
    let Record::UnwindingInfo(u) = t.record else {
        panic!()
    };
    assert!(u.eh_frame().is_empty() && u.eh_frame_hdr().len() == 8);
}

#[test]
fn the_other_byte_order_is_refused() {
    let mut b = sample_dump().bytes().to_vec();
    b[..4].reverse();
    assert!(matches!(Header::parse(&b), Err(Error::OtherEndian)));
    let err = Error::OtherEndian.to_string();
    assert!(err.contains("other byte order"), "{err}");
}

/// Parses `bytes` both ways (parse_record from every plausible start, the
/// reader over a file) and checks the bounds.
fn check(bytes: &[u8], max_bytes: u64) {
    let limits = Limits {
        max_record: 4096,
        max_name: 64,
        max_code: 256,
        max_debug_entries: 64,
        max_unwind: 256,
    };
    for start in [0, 40] {
        let mut rest = bytes.get(start..).unwrap_or(&[]);
        let mut records = Vec::new();
        while let Ok(Some((t, len))) = parse_record(rest, &limits) {
            assert!((16..=rest.len()).contains(&len));
            rest = &rest[len..];
            records.push(t);
        }
        assert!(held_bytes(&records) <= bytes.len());
    }
    let _ = Header::parse(bytes);
    let mut file = tempfile::tempfile().unwrap();
    std::io::Write::write_all(&mut file, bytes).unwrap();
    let mut r = DumpReader::new(limits);
    let mut records = Vec::new();
    for _ in 0..bytes.len() + 2 {
        match r.read(&file, max_bytes) {
            Ok(o) => {
                records.extend(o.records);
                if !o.more {
                    break;
                }
            }
            Err(_) => break,
        }
    }
    // Records start at the header's total_size, which may be past the end.
    let records_start = r.header().map_or(0, |h| u64::from(h.total_size));
    assert!(r.offset() <= (bytes.len() as u64).max(records_start));
    assert!(held_bytes(&records) <= bytes.len());
    let _ = file.read_at(&mut [0], 0);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..600), max_bytes in 0u64..300) {
        check(&bytes, max_bytes);
        // And behind a valid header.
        let mut dump = DumpWriter::new(1, 0);
        dump.raw(&bytes);
        check(dump.bytes(), max_bytes);
    }

    #[test]
    fn mutated_dumps_never_panic(
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..8),
        cut in any::<prop::sample::Index>(),
        max_bytes in 0u64..300,
    ) {
        let mut bytes = sample_dump().bytes().to_vec();
        for (at, v) in flips {
            let i = at.index(bytes.len());
            bytes[i] = v;
        }
        let cut = cut.index(bytes.len() + 1);
        check(&bytes[..cut], max_bytes);
        check(&bytes, max_bytes);
    }
}
