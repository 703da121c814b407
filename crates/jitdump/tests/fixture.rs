//! A real dump: Python 3.13's `-X perf_jit` (see testdata/jitdump/README.md).

mod common;

use std::fs::File;

use common::parse_all;
use profkit_jitdump::{DumpReader, Limits, Record};

const DUMP: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../testdata/jitdump/python3.13.dump"
);

#[test]
fn python313_dump_parses_fully() {
    let bytes = std::fs::read(DUMP).unwrap();
    let (header, records) = parse_all(&bytes, &Limits::default()).unwrap();
    // Python 3.13.0 leaves elf_mach 0 (and pad1 0x1a1a1a1a).
    assert_eq!(
        (header.version, header.total_size, header.elf_mach),
        (1, 40, 0)
    );
    // Every byte is in a whole record: the dump ends on a record's end.
    let last = records.last().unwrap();
    let Record::CodeLoad(l) = &last.record else {
        panic!("{last:?}")
    };
    assert_eq!(
        last.offset as usize + 16 + 40 + l.name.len() + 1 + l.code_size as usize,
        bytes.len()
    );

    let loads: Vec<_> = records
        .iter()
        .enumerate()
        .filter_map(|(i, t)| match &t.record {
            Record::CodeLoad(l) => Some((i, l)),
            _ => None,
        })
        .collect();
    assert!(loads.len() > 10, "{} code loads", loads.len());
    let (_, f_three) = loads
        .iter()
        .find(|(_, l)| l.name == "py::f_three:<string>")
        .expect("the code load of f_three");
    assert_eq!(
        f_three.code.as_deref(),
        Some(&[0x48, 0x83, 0xec, 0x08, 0xff, 0xd1, 0x48, 0x83, 0xc4, 0x08, 0xc3][..])
    );
    assert_eq!(f_three.code_addr, f_three.vma);
    assert_eq!(f_three.pid, header.pid);
    // Python writes the unwinding info of each trampoline just before it.
    for (i, l) in &loads {
        let Some(Record::UnwindingInfo(u)) = i.checked_sub(1).map(|p| &records[p].record) else {
            panic!("no unwinding info before {}", l.name)
        };
        assert!(u.eh_frame_hdr_size > 0 && u.eh_frame_hdr_size < u.unwinding_size);
        assert_eq!(u.data.len() as u64, u.unwinding_size);
        assert_eq!(u.eh_frame_hdr()[0], 1, "eh_frame_hdr version 1");
    }
    // Timestamps do not go back.
    assert!(records.windows(2).all(|w| w[0].time <= w[1].time));
}

#[test]
fn python313_dump_through_the_reader() {
    let bytes = std::fs::read(DUMP).unwrap();
    let (_, expected) = parse_all(&bytes, &Limits::default()).unwrap();
    let file = File::open(DUMP).unwrap();
    let mut r = DumpReader::new(Limits::default());
    let mut got = Vec::new();
    loop {
        let o = r.read(&file, 4096).unwrap();
        got.extend(o.records);
        if !o.more {
            break;
        }
    }
    assert_eq!(got, expected);
    assert_eq!(r.offset(), bytes.len() as u64);
    let s = r.stats();
    assert_eq!(s.bytes, bytes.len() as u64);
    assert_eq!(s.loads, s.unwinding);
    assert_eq!((s.moves, s.debug, s.unknown, s.code_not_kept), (0, 0, 0, 0));
}
