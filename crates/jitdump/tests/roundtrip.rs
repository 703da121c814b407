//! Every record kind through `DumpWriter` and back through the parser.

mod common;

use std::sync::Arc;

use common::{entry, parse_all, sample_dump};
use profkit_jitdump::{
    parse_record, CodeLoad, CodeMove, DumpWriter, Limits, Record, UnwindingInfo,
};

#[test]
fn every_record_kind_round_trips() {
    let w = sample_dump();
    let (header, records) = parse_all(w.bytes(), &Limits::default()).unwrap();
    assert_eq!((header.version, header.total_size), (1, 40));
    assert_eq!(
        (header.elf_mach, header.pid, header.timestamp),
        (62, 4242, 1000)
    );
    assert!(!header.arch_timestamp());
    let times: Vec<u64> = records.iter().map(|t| t.time).collect();
    assert_eq!(times, [1001, 1002, 1003, 1004, 1005, 1006]);
    assert_eq!(records[0].offset, 40);

    let Record::UnwindingInfo(u) = &records[0].record else {
        panic!("{:?}", records[0])
    };
    assert_eq!(
        *u,
        UnwindingInfo {
            unwinding_size: 8,
            eh_frame_hdr_size: 3,
            mapped_size: 0x50,
            data: vec![1, 2, 3, 4, 5, 9, 9, 9],
        }
    );
    assert_eq!(u.eh_frame(), [1, 2, 3, 4, 5]);
    assert_eq!(u.eh_frame_hdr(), [9, 9, 9]);

    let Record::DebugInfo(d) = &records[1].record else {
        panic!("{:?}", records[1])
    };
    assert_eq!(d.code_addr, 0x7f00_0000_1000);
    assert_eq!(
        d.entries,
        [
            entry(0x7f00_0000_1000, 10, 0, "/src/a.py"),
            entry(0x7f00_0000_1004, 11, 1, "/src/a.py"),
            entry(0x7f00_0000_1008, 3, 0, "/src/b.py"),
            entry(0x7f00_0000_100c, 4, 0, "/src/b.py"),
            entry(0x7f00_0000_1010, 12, 0, "/src/a.py"),
        ]
    );

    assert_eq!(
        records[2].record,
        Record::CodeLoad(CodeLoad {
            pid: 4242,
            tid: 4243,
            vma: 0x7f00_0000_1000,
            code_addr: 0x7f00_0000_1000,
            code_size: 5,
            code_index: 1,
            name: "py::f:<string>".into(),
            code: Some(vec![0x48, 0x83, 0xec, 0x08, 0xc3]),
            // 16 (prefix) + 40 (fields) + the name and its NUL.
            code_offset: 56 + 15,
        })
    );
    assert_eq!(
        records[3].record,
        Record::CodeMove(CodeMove {
            pid: 4242,
            tid: 4244,
            vma: 0x7f00_0000_2000,
            old_code_addr: 0x7f00_0000_1000,
            new_code_addr: 0x7f00_0000_2000,
            code_size: 5,
            code_index: 1,
        })
    );
    assert_eq!(records[4].record, Record::Unknown { id: 7 });
    assert_eq!(records[5].record, Record::Close);
}

#[test]
fn same_file_entries_are_written_as_ff_and_share_the_previous_name() {
    let entries = [
        entry(1, 1, 0, "/src/a.py"),
        entry(2, 2, 0, "/src/a.py"),
        entry(3, 3, 0, "/src/a.py"),
    ];
    let mut w = DumpWriter::new(1, 0);
    w.debug_info(5, 1, &entries);
    let bytes = w.bytes();
    // One name written, then "\xff\0" twice.
    assert_eq!(bytes.windows(9).filter(|w| w == b"/src/a.py").count(), 1);
    assert_eq!(bytes.windows(2).filter(|w| w == b"\xff\0").count(), 2);
    let (_, records) = parse_all(bytes, &Limits::default()).unwrap();
    let Record::DebugInfo(d) = &records[0].record else {
        panic!()
    };
    assert_eq!(d.entries, entries);
    assert!(Arc::ptr_eq(&d.entries[0].file, &d.entries[2].file));
}

#[test]
fn a_first_entry_saying_same_file_is_malformed() {
    let mut w = DumpWriter::new(1, 0);
    // code_addr, nr_entry 1, entry { addr, line, discrim, "\xff\0" }, padding
    let mut body = vec![2, 0, 0, 0, 48, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    body.extend_from_slice(&1u64.to_le_bytes());
    body.extend_from_slice(&1u64.to_le_bytes());
    body.extend_from_slice(&[1, 0, 0, 0, 0, 0, 0, 0, 0xff, 0, 0, 0, 0, 0, 0, 0]);
    w.raw(&body);
    assert!(parse_all(w.bytes(), &Limits::default()).is_err());
}

#[test]
fn names_are_sanitised_and_cut() {
    let mut w = DumpWriter::new(1, 0);
    w.code_load(1, 1, 1, 0x1000, &[0xc3], 1, "a\nb\u{1b}[0m\u{7f}é€")
        .debug_info(2, 0x1000, &[entry(0x1000, 1, 0, "x\ty")]);
    let limits = Limits {
        max_name: 10,
        ..Limits::default()
    };
    let (_, records) = parse_all(w.bytes(), &limits).unwrap();
    let Record::CodeLoad(l) = &records[0].record else {
        panic!()
    };
    // "a?b?[0m?" is 8 bytes, "é" 2 more; "€" (3) would pass 10.
    assert_eq!(l.name, "a?b?[0m?é");
    let Record::DebugInfo(d) = &records[1].record else {
        panic!()
    };
    assert_eq!(&*d.entries[0].file, "x?y");
    // Invalid UTF-8 in a name (written raw) becomes '?', never longer.
    // A code load whose name is rewritten to 0xc3 0x28 0xff.
    let mut rec = DumpWriter::new(1, 0);
    rec.code_load(1, 1, 1, 0x1000, &[0xc3], 1, "abc");
    let mut r = rec.bytes()[40..].to_vec();
    r[56..59].copy_from_slice(&[0xc3, 0x28, 0xff]);
    let (t, _) = parse_record(&r, &Limits::default()).unwrap().unwrap();
    let Record::CodeLoad(l) = t.record else {
        panic!()
    };
    assert_eq!(l.name, "?(?");
}

#[test]
fn code_over_max_code_is_not_kept_but_the_record_is_valid() {
    let mut w = DumpWriter::new(1, 0);
    w.code_load(1, 1, 1, 0x1000, &[0x90; 100], 1, "big")
        .code_load(2, 1, 1, 0x2000, &[0x90; 10], 2, "small");
    let limits = Limits {
        max_code: 50,
        ..Limits::default()
    };
    let (_, records) = parse_all(w.bytes(), &limits).unwrap();
    let codes: Vec<_> = records
        .iter()
        .map(|t| match &t.record {
            Record::CodeLoad(l) => (l.code_size, l.code.as_ref().map(Vec::len)),
            r => panic!("{r:?}"),
        })
        .collect();
    assert_eq!(codes, [(100, None), (10, Some(10))]);
}
