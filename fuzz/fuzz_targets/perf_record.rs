//! Perf records: the parser on arbitrary bodies, and the ring walker on
//! arbitrary ring contents (through SimRing's raw producer).
#![no_main]
use libfuzzer_sys::fuzz_target;
use profkit_perf::{Layout, RawRecord, RecordRing, SimRing};

fuzz_target!(|data: &[u8]| {
    if data.len() < 8 {
        return;
    }
    let kind = u32::from_le_bytes([data[0], data[1], data[2], data[3]]) % 32;
    let misc = u16::from_le_bytes([data[4], data[5]]);
    let body = &data[8..];
    for callchain in [false, true] {
        let layout = Layout { callchain };
        let _ = layout.parse(RawRecord { kind, misc, body });
    }
    // Whole records through a small ring, wrapped at arbitrary points.
    let mut ring = SimRing::new(0, 256, Layout { callchain: true });
    for chunk in body.chunks(data[6] as usize % 64 + 8) {
        let n = chunk.len() / 8 * 8;
        ring.push_raw(kind, misc, &chunk[..n]);
        ring.read_records(|r| {
            let _ = Layout { callchain: true }.parse(r);
            data[7] % 3 != 0
        });
    }
});
