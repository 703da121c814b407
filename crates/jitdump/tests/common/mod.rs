//! Helpers the test binaries share.
#![allow(dead_code)]

use std::sync::Arc;

use profkit_jitdump::{parse_record, DebugEntry, DumpWriter, Error, Header, Limits, Record, Timed};

/// Parses a whole dump held in memory with `parse_record`: the header,
/// then records until the bytes end (a partial tail gives no record).
pub fn parse_all(bytes: &[u8], limits: &Limits) -> Result<(Header, Vec<Timed>), Error> {
    let header = Header::parse(bytes)?;
    let mut at = header.total_size as usize;
    let mut out = Vec::new();
    while let Some((mut t, len)) = parse_record(bytes.get(at..).unwrap_or(&[]), limits)? {
        t.offset = at as u64;
        at += len;
        out.push(t);
    }
    Ok((header, out))
}

/// The variable bytes records hold: names, files (a shared one once),
/// code and unwinding data.
pub fn held_bytes(records: &[Timed]) -> usize {
    records
        .iter()
        .map(|t| match &t.record {
            Record::CodeLoad(l) => l.name.len() + l.code.as_ref().map_or(0, Vec::len),
            Record::DebugInfo(d) => {
                let mut n = 0;
                let mut prev: Option<&Arc<str>> = None;
                for e in &d.entries {
                    if !prev.is_some_and(|p| Arc::ptr_eq(p, &e.file)) {
                        n += e.file.len();
                    }
                    prev = Some(&e.file);
                }
                n
            }
            Record::UnwindingInfo(u) => u.data.len(),
            _ => 0,
        })
        .sum()
}

pub fn entry(addr: u64, line: u32, discrim: u32, file: &str) -> DebugEntry {
    DebugEntry {
        addr,
        line,
        discrim,
        file: Arc::from(file),
    }
}

/// A dump with every record kind.
pub fn sample_dump() -> DumpWriter {
    let mut w = DumpWriter::new(4242, 1000);
    w.unwinding_info(1001, &[1, 2, 3, 4, 5], &[9, 9, 9], 0x50)
        .debug_info(
            1002,
            0x7f00_0000_1000,
            &[
                entry(0x7f00_0000_1000, 10, 0, "/src/a.py"),
                entry(0x7f00_0000_1004, 11, 1, "/src/a.py"),
                entry(0x7f00_0000_1008, 3, 0, "/src/b.py"),
                entry(0x7f00_0000_100c, 4, 0, "/src/b.py"),
                entry(0x7f00_0000_1010, 12, 0, "/src/a.py"),
            ],
        )
        .code_load(
            1003,
            4242,
            4243,
            0x7f00_0000_1000,
            &[0x48, 0x83, 0xec, 0x08, 0xc3],
            1,
            "py::f:<string>",
        )
        .code_move(1004, 4242, 4244, 0x7f00_0000_1000, 0x7f00_0000_2000, 5, 1)
        .raw(&[
            7, 0, 0, 0, 24, 0, 0, 0, 0xed, 3, 0, 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8,
        ])
        .close(1006);
    w
}
