//! Drain + parse throughput on SimRing, and the hand-written parser against
//! linux-perf-event-reader on the same records.
//!
//! Run: `cargo bench -p profkit-perf --bench parse`

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use linux_perf_event_reader::{
    Endianness, EventRecord, PerfEventAttr, RawData, RawEventRecord, RecordParseInfo, RecordType,
};
use profkit_perf::{Layout, Record, RecordRing, SimRecord, SimRing};
use std::hint::black_box;

const RING: usize = 4 << 20;

/// A ring full of samples (a realistic mix: mostly samples, a few task records).
fn filled(layout: Layout) -> (SimRing, u64) {
    let mut ring = SimRing::new(0, RING, layout);
    let mut n = 0u64;
    let mut t = 0u64;
    loop {
        t += 1;
        let rec = if t % 500 == 0 {
            SimRecord::Comm {
                pid: 42,
                tid: 43,
                comm: "worker".into(),
                exec: false,
                time: t,
            }
        } else {
            SimRecord::Sample {
                ip: 0x401000 + (t * 7919) % 0x20000,
                pid: 42 + (t / 50 % 3) as u32,
                tid: 43,
                time: t,
                kernel: t % 3 == 0,
                period: 250000,
                callchain: vec![0x401000, 0x402000, 0x403000, 0x7f00_0000_1000],
            }
        };
        if !ring.push(&rec) {
            break;
        }
        n += 1;
    }
    (ring, n)
}

/// The attr bytes linux-perf-event-reader needs to know our layout.
fn reader_attr(layout: Layout) -> PerfEventAttr {
    let mut a = [0u8; 128];
    a[0..4].copy_from_slice(&1u32.to_le_bytes()); // type: software
    a[4..8].copy_from_slice(&128u32.to_le_bytes()); // size
    a[16..24].copy_from_slice(&4000u64.to_le_bytes()); // sample_freq
    a[24..32].copy_from_slice(&layout.sample_type().to_le_bytes());
    let flags: u64 = (1 << 10) | (1 << 18); // freq | sample_id_all
    a[40..48].copy_from_slice(&flags.to_le_bytes());
    PerfEventAttr::parse::<_, byteorder::LittleEndian>(&a[..])
        .expect("attr parses")
        .0
}

fn bench(c: &mut Criterion) {
    for callchain in [false, true] {
        let layout = Layout {
            callchain,
            user_stack: 0,
            cgroup: false,
        };
        let (ring, n) = filled(layout);
        let info = RecordParseInfo::new(&reader_attr(layout), Endianness::LittleEndian);
        let mut g = c.benchmark_group(if callchain {
            "drain_parse_g"
        } else {
            "drain_parse"
        });
        g.throughput(Throughput::Elements(n));
        g.bench_function("profkit", |b| {
            b.iter_batched(
                || ring.clone(),
                |mut r| {
                    let mut sum = 0u64;
                    r.read_records(|raw| {
                        if let Ok(Record::Sample(s)) = layout.parse(raw) {
                            sum = sum.wrapping_add(s.ip ^ s.tid as u64);
                            sum = sum.wrapping_add(s.callchain.iter().fold(0, |a, x| a ^ x));
                        }
                        true
                    });
                    black_box(sum)
                },
                BatchSize::LargeInput,
            )
        });
        g.bench_function("linux-perf-event-reader", |b| {
            b.iter_batched(
                || ring.clone(),
                |mut r| {
                    let mut sum = 0u64;
                    r.read_records(|raw| {
                        let rec = RawEventRecord::new(
                            RecordType(raw.kind),
                            raw.misc,
                            RawData::Single(raw.body),
                            info,
                        );
                        if let Ok(EventRecord::Sample(s)) = rec.parse() {
                            sum = sum.wrapping_add(s.ip.unwrap_or(0) ^ s.tid.unwrap_or(0) as u64);
                            if let Some(cc) = s.callchain {
                                sum = sum.wrapping_add(
                                    (0..cc.len()).fold(0, |a, i| a ^ cc.get(i).unwrap_or(0)),
                                );
                            }
                        }
                        true
                    });
                    black_box(sum)
                },
                BatchSize::LargeInput,
            )
        });
        g.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(std::time::Duration::from_secs(3));
    targets = bench
}
criterion_main!(benches);
