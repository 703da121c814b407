//! A test-only perf.data writer: the file header (`PERFILE2`), one
//! `perf_event_attr` (cpu-clock at a frequency, or another event, the
//! given `sample_type`, `sample_id_all`), a data section of records exactly as the kernel
//! wrote them into a ring, and optionally perf's build-id table (the
//! `HEADER_BUILD_ID` feature section). Enough for linux-perf-data to read;
//! no other feature sections, so the import finds no host or CPU count.

use std::path::Path;

/// `PERF_RECORD_LOST`.
pub const LOST: u32 = 2;
const ATTR_SIZE: u64 = 64; // PERF_ATTR_SIZE_VER0
const HEADER_SIZE: u64 = 104;
const FLAG_FREQ: u64 = 1 << 10;
const FLAG_SAMPLE_ID_ALL: u64 = 1 << 18;

/// One record: (type, misc, body), body a multiple of 8 bytes.
pub type RawRec = (u32, u16, Vec<u8>);

/// One build-id table entry: (`misc`: the cpumode of the file, its
/// build-id, its path as perf names it).
pub type BuildIdEntry<'a> = (u16, &'a [u8], &'a str);

/// Writes `records` (in this order) as a perf.data file whose one event
/// samples with `sample_type`.
pub fn write(path: &Path, sample_type: u64, records: &[RawRec]) {
    write_with_build_ids(path, sample_type, records, &[]);
}

/// [`write`], with perf's build-id table when `build_ids` is not empty.
pub fn write_with_build_ids(
    path: &Path,
    sample_type: u64,
    records: &[RawRec],
    build_ids: &[BuildIdEntry<'_>],
) {
    let mut features = Vec::new();
    if !build_ids.is_empty() {
        let mut table = Vec::new();
        let u32s = |f: &mut Vec<u8>, x: u32| f.extend_from_slice(&x.to_le_bytes());
        for (misc, id, file) in build_ids {
            let mut name = file.as_bytes().to_vec();
            name.push(0);
            name.resize(name.len().next_multiple_of(64), 0);
            let size = 8 + 4 + 24 + name.len();
            u32s(&mut table, 67); // PERF_RECORD_HEADER_BUILD_ID
            table.extend_from_slice(&(misc | 1 << 15).to_le_bytes()); // MISC_BUILD_ID_SIZE
            table.extend_from_slice(&u16::try_from(size).unwrap().to_le_bytes());
            u32s(&mut table, u32::MAX); // pid -1
            let mut bid = [0u8; 24];
            bid[..id.len()].copy_from_slice(id);
            bid[20] = id.len() as u8;
            table.extend_from_slice(&bid);
            table.extend_from_slice(&name);
        }
        features.push((2, table)); // HEADER_BUILD_ID
    }
    write_with_features(path, sample_type, records, &features);
}

/// The one event of a file: `perf_event_attr`'s type, config, sample
/// period or frequency and flags (`sample_id_all` is always set).
#[derive(Debug, Clone, Copy)]
pub struct Attr {
    /// `PERF_TYPE_*`.
    pub type_: u32,
    /// The event of that type.
    pub config: u64,
    /// The sample period, or frequency with `FLAG_FREQ` in `flags`.
    pub period_or_freq: u64,
    /// `perf_event_attr`'s flag bits.
    pub flags: u64,
}

/// cpu-clock at 4000 Hz, the event of [`write`].
pub const CPU_CLOCK: Attr = Attr {
    type_: 1,
    config: 0,
    period_or_freq: 4000,
    flags: FLAG_FREQ,
};

/// `context-switches` every switch, with the switch records
/// (`context_switch`): `perf record -e cs -c 1 --switch-events`.
pub const CONTEXT_SWITCHES: Attr = Attr {
    type_: 1,
    config: 3,
    period_or_freq: 1,
    flags: 1 << 26,
};

/// [`write`], with feature sections `(bit, body)` in increasing bit order.
pub fn write_with_features(
    path: &Path,
    sample_type: u64,
    records: &[RawRec],
    features: &[(u32, Vec<u8>)],
) {
    write_event(path, CPU_CLOCK, sample_type, records, features);
}

/// [`write_with_features`] for the event `attr`.
pub fn write_event(
    path: &Path,
    attr: Attr,
    sample_type: u64,
    records: &[RawRec],
    features: &[(u32, Vec<u8>)],
) {
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
    let mut bitmap = [0u64; 4];
    for (bit, _) in features {
        bitmap[(*bit / 64) as usize] |= 1 << (bit % 64);
    }
    for w in bitmap {
        u64s(&mut f, w);
    }
    assert_eq!(f.len() as u64, HEADER_SIZE);
    // perf_event_attr, version 0.
    u32s(&mut f, attr.type_);
    u32s(&mut f, ATTR_SIZE as u32);
    u64s(&mut f, attr.config);
    u64s(&mut f, attr.period_or_freq);
    u64s(&mut f, sample_type);
    u64s(&mut f, 0); // read_format
    u64s(&mut f, attr.flags | FLAG_SAMPLE_ID_ALL);
    u32s(&mut f, 0); // wakeup_events
    u32s(&mut f, 0); // bp_type
    u64s(&mut f, 0); // config1
    u64s(&mut f, 0); // ids section: none
    u64s(&mut f, 0);
    assert_eq!(f.len() as u64, data_at);
    f.extend_from_slice(&data);
    // The feature sections' index follows the data, then their bodies.
    let mut body_at = f.len() as u64 + 16 * features.len() as u64;
    for (_, body) in features {
        u64s(&mut f, body_at);
        u64s(&mut f, body.len() as u64);
        body_at += body.len() as u64;
    }
    for (_, body) in features {
        f.extend_from_slice(body);
    }
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
