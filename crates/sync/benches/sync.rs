//! Sync throughput on SimRing: samples per second per core through a whole
//! round (drain, parse, resolve, encode), its ratio to a plain copy of the
//! same ring bytes, and encoded bytes per sample.
//!
//! Run: `cargo bench -p profkit-sync --bench sync`

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use profkit_perf::{Layout, RecordRing, SimRecord, SimRing};
use profkit_sync::{SyncOptions, SyncStage};
use std::hint::black_box;

const RING: usize = 8 << 20;

/// A stage that knows 8 processes with 4 mappings each (like a desktop's
/// hot processes), and one ring full of their samples: the task changes
/// about every 50 samples, the binary about every 10.
fn setup() -> (SyncStage, SimRing, u64) {
    let layout = Layout { callchain: false };
    let mut stage = SyncStage::new(SyncOptions {
        layout,
        paths: Default::default(),
        use_procfs: false,
    });
    let mut ring = SimRing::new(0, RING, layout);
    let mut t = 1;
    for p in 0..8u32 {
        for m in 0..4u64 {
            ring.push(&SimRecord::Mmap2 {
                pid: 1000 + p,
                tid: 1000 + p,
                addr: 0x400000 + m * 0x1000000,
                len: 0x200000,
                pgoff: 0,
                ino: (p as u64) * 4 + m + 1,
                build_id: None,
                prot: 5,
                filename: format!("/usr/lib/lib{p}_{m}.so"),
                time: t,
            });
            t += 1;
        }
    }
    stage.round(std::slice::from_mut(&mut ring), t);
    let mut n = 0u64;
    let mut x = 12345u64;
    loop {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let p = ((n / 50) % 8) as u32;
        let m = (n / 10) % 4;
        let ip = 0x400000 + m * 0x1000000 + ((x >> 33) % 0x4000) * 16;
        t += 1;
        if !ring.push(&SimRecord::Sample {
            ip,
            pid: 1000 + p,
            tid: 1000 + p,
            time: t,
            kernel: false,
            period: 1,
            callchain: vec![],
        }) {
            break;
        }
        n += 1;
    }
    (stage, ring, n)
}

fn bench(c: &mut Criterion) {
    let (stage, ring, n) = setup();
    let bytes = ring.pending();
    {
        let (mut s2, mut r, _) = setup();
        let chunk = s2.round(std::slice::from_mut(&mut r), 0);
        eprintln!(
            "sync: {} samples, {} ring bytes -> {} encoded bytes = {:.2} bytes/sample",
            n,
            bytes,
            chunk.bytes.len(),
            chunk.bytes.len() as f64 / chunk.samples() as f64
        );
    }
    let mut g = c.benchmark_group("sync");
    g.throughput(Throughput::Elements(n));
    let mut stage = stage;
    g.bench_function("round", |b| {
        b.iter_batched(
            || ring.clone(),
            |mut r| black_box(stage.round(std::slice::from_mut(&mut r), 0).bytes.len()),
            BatchSize::LargeInput,
        )
    });
    let src = vec![7u8; bytes];
    g.bench_function("memcpy_same_bytes", |b| {
        b.iter_batched(
            || vec![0u8; bytes],
            |mut dst| {
                dst.copy_from_slice(black_box(&src));
                black_box(dst)
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(std::time::Duration::from_secs(4));
    targets = bench
}
criterion_main!(benches);
