//! A test-only perf.data writer: the file header (`PERFILE2`), one
//! `perf_event_attr` (cpu-clock at a frequency, the given `sample_type`,
//! `sample_id_all`), and a data section of records exactly as the kernel
//! wrote them into a ring. Enough for linux-perf-data to read; no feature
//! sections, so the import finds no host, CPU count or build-id table.

use std::path::Path;

/// `PERF_RECORD_LOST`.
pub const LOST: u32 = 2;
const ATTR_SIZE: u64 = 64; // PERF_ATTR_SIZE_VER0
const HEADER_SIZE: u64 = 104;
const FLAG_FREQ: u64 = 1 << 10;
const FLAG_SAMPLE_ID_ALL: u64 = 1 << 18;

/// One record: (type, misc, body), body a multiple of 8 bytes.
pub type RawRec = (u32, u16, Vec<u8>);

/// Writes `records` (in this order) as a perf.data file whose one event
/// samples with `sample_type`.
pub fn write(path: &Path, sample_type: u64, records: &[RawRec]) {
    let mut data = Vec::new();
    for (kind, misc, body) in records {
        assert_eq!(body.len() % 8, 0);
        data.extend_from_slice(&kind.to_le_bytes());
        data.extend_from_slice(&misc.to_le_bytes());
        data.extend_from_slice(&u16::try_from(8 + body.len()).unwrap().to_le_bytes());
        data.extend_from_slice(body);
    }
    let attr_entry = ATTR_SIZE + 16; // the attr, then its ids section
    let attrs_at = HEADER_SIZE;
    let data_at = attrs_at + attr_entry;
    let mut f = Vec::new();
    let u64s = |f: &mut Vec<u8>, x: u64| f.extend_from_slice(&x.to_le_bytes());
    let u32s = |f: &mut Vec<u8>, x: u32| f.extend_from_slice(&x.to_le_bytes());
    f.extend_from_slice(b"PERFILE2");
    u64s(&mut f, HEADER_SIZE);
    u64s(&mut f, attr_entry);
    u64s(&mut f, attrs_at);
    u64s(&mut f, attr_entry);
    u64s(&mut f, data_at);
    u64s(&mut f, data.len() as u64);
    u64s(&mut f, 0); // event types: none
    u64s(&mut f, 0);
    for _ in 0..4 {
        u64s(&mut f, 0); // no feature sections
    }
    assert_eq!(f.len() as u64, HEADER_SIZE);
    // perf_event_attr, version 0.
    u32s(&mut f, 1); // PERF_TYPE_SOFTWARE
    u32s(&mut f, ATTR_SIZE as u32);
    u64s(&mut f, 0); // PERF_COUNT_SW_CPU_CLOCK
    u64s(&mut f, 4000); // sample_freq
    u64s(&mut f, sample_type);
    u64s(&mut f, 0); // read_format
    u64s(&mut f, FLAG_FREQ | FLAG_SAMPLE_ID_ALL);
    u32s(&mut f, 0); // wakeup_events
    u32s(&mut f, 0); // bp_type
    u64s(&mut f, 0); // config1
    u64s(&mut f, 0); // ids section: none
    u64s(&mut f, 0);
    assert_eq!(f.len() as u64, data_at);
    f.extend_from_slice(&data);
    std::fs::write(path, f).unwrap();
}

/// A `PERF_RECORD_LOST` body for CPU `cpu` (with its `sample_id_all`
/// trailer in profkit's layout, which is this file's too).
pub fn lost_body(count: u64, time: u64, cpu: u32) -> Vec<u8> {
    let mut v = Vec::new();
    v.extend_from_slice(&0u64.to_ne_bytes()); // event id
    v.extend_from_slice(&count.to_ne_bytes());
    v.extend_from_slice(&0u32.to_ne_bytes()); // pid
    v.extend_from_slice(&0u32.to_ne_bytes()); // tid
    v.extend_from_slice(&time.to_ne_bytes());
    v.extend_from_slice(&cpu.to_ne_bytes());
    v.extend_from_slice(&0u32.to_ne_bytes());
    v
}
