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
    // With and without callchains and user stacks (the stack size from
    // the input, any multiple of 8 up to 512).
    let user = (u32::from(data[6]) % 65) * 8;
    for callchain in [false, true] {
        for user_stack in [0, user] {
            for cgroup in [false, true] {
                let layout = Layout {
                    callchain,
                    user_stack,
                    cgroup,
                };
                if let Ok(profkit_perf::Record::Sample(s)) =
                    layout.parse(RawRecord { kind, misc, body })
                {
                    let _ = s.user();
                }
            }
        }
    }
    // Whole records through a small ring, wrapped at arbitrary points.
    let layout = Layout {
        callchain: true,
        user_stack: 0,
        cgroup: false,
    };
    let mut ring = SimRing::new(0, 256, layout);
    for chunk in body.chunks(data[6] as usize % 64 + 8) {
        let n = chunk.len() / 8 * 8;
        ring.push_raw(kind, misc, &chunk[..n]);
        ring.read_records(|r| {
            let _ = layout.parse(r);
            data[7] % 3 != 0
        });
    }
});
