//! Sync throughput on SimRing: samples per second per core through a whole
//! round (drain, parse, resolve, encode), its ratio to a plain copy of the
//! same ring bytes, and encoded bytes per sample; without and with call
//! graphs (`-g`).
//!
//! And with DWARF call graphs (`sync_dwarf`): a stack recorded by gdb
//! (testdata/unwind) unwound through its binary's `.eh_frame` for every
//! sample, the cost the daemon pays per sample at sync time.
//!
//! And the live mapping path (`sync_live_mmaps`): MMAP2 records carrying
//! build-ids in a live session (`/proc` read, here a fake one whose
//! `map_files` entries are hard links to four shared files), where each
//! mapping's file is identified (a build-id is a claim): the cost per
//! executable mapping a process makes.
//!
//! And JIT dumps (`jit`): a node-like jitdump taken in by the stage, the
//! cost per function a runtime's dump puts on the daemon.
//!
//! Run: `cargo bench -p profkit-sync --bench sync`
//!
//! After measuring, it prints the size of sessions recorded from the
//! call-graph stream (see [`CallGraphStream`]), everything counted.

use common::{kernel_maps, mmaps, recorded_stack, CallGraphStream, Rng};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use profkit_eventlog::Event;
use profkit_perf::{Layout, RecordRing, SimRecord, SimRing};
use profkit_sync::{Map, MapKind, Process, SyncOptions, SyncStage};
use std::hint::black_box;

mod common;

const RING: usize = 8 << 20;

fn stage(layout: Layout) -> SyncStage {
    SyncStage::new(SyncOptions::new(layout))
}

/// A stage that knows 8 processes with 4 mappings each (like a desktop's
/// hot processes), and one ring full of their samples: the task changes
/// about every 50 samples, the binary about every 10.
fn setup() -> (SyncStage, SimRing, u64) {
    let layout = Layout {
        callchain: false,
        user_stack: 0,
        cgroup: false,
    };
    let mut stage = stage(layout);
    let mut ring = SimRing::new(0, RING, layout);
    let mut t = 1;
    mmaps(&mut ring, &mut t);
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

/// Like [`setup`], with call graphs: one ring full of [`CallGraphStream`]
/// samples, and a stage that has seen the stream's stacks once (steady state).
fn setup_g() -> (SyncStage, SimRing, u64) {
    let layout = Layout {
        callchain: true,
        user_stack: 0,
        cgroup: false,
    };
    let mut stage = stage(layout);
    kernel_maps(&mut stage);
    let mut ring = SimRing::new(0, RING, layout);
    let mut t = 1;
    mmaps(&mut ring, &mut t);
    stage.round(std::slice::from_mut(&mut ring), t);
    let mut gen = CallGraphStream::new(1);
    let mut n = 0;
    while ring.push(&gen.sample(0)) {
        n += 1;
    }
    let mut warm = ring.clone();
    stage.round(std::slice::from_mut(&mut warm), 0);
    (stage, ring, n)
}

/// Records `samples` samples of the call-graph stream on 4 CPUs, 4000
/// per round (4 kHz x 4 CPUs x 250 ms), and counts every byte a session
/// file would hold: 32-byte chunk frames and payloads (samples, stack,
/// cookie and task definitions, module loads), plus header and footer.
fn session_size(callchain: bool, samples: usize) -> (u64, u64, u64, u64, usize) {
    let layout = Layout {
        callchain,
        user_stack: 0,
        cgroup: false,
    };
    let mut stage = stage(layout);
    kernel_maps(&mut stage);
    let mut rings: Vec<SimRing> = (0..4).map(|c| SimRing::new(c, 8 << 20, layout)).collect();
    let mut t = 1;
    mmaps(&mut rings[0], &mut t);
    let mut gen = CallGraphStream::new(4);
    let (mut file, mut written, mut defs, mut def_bytes) = (100u64, 0u64, 0u64, 0u64);
    let mut done = 0;
    while done < samples {
        for i in 0..4000.min(samples - done) {
            let cpu = i % 4;
            assert!(rings[cpu].push(&gen.sample(cpu)));
        }
        done += 4000;
        let c = stage.round(&mut rings, 0);
        file += 32 + c.bytes.len() as u64;
        written += c.samples();
        for m in &c.meta {
            if let Event::StackDef { frames, .. } = m {
                defs += 1;
                let mut e = profkit_eventlog::ChunkEncoder::new();
                e.event(&Event::StackDef {
                    id: 0,
                    frames: frames.clone(),
                });
                def_bytes += e.bytes().len() as u64;
            }
        }
    }
    let st = stage.stack_stats();
    (file, written, defs, def_bytes, st.stacks)
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

    let (stage, ring, n) = setup_g();
    let bytes = ring.pending();
    let chunk = {
        let (mut s2, mut r, _) = setup_g();
        let chunk = s2.round(std::slice::from_mut(&mut r), 0);
        eprintln!(
            "sync -g: {} samples, {} ring bytes -> {} encoded bytes = {:.2} bytes/sample \
             (stacks already defined), {} stacks in the table",
            n,
            bytes,
            chunk.bytes.len(),
            chunk.bytes.len() as f64 / chunk.samples() as f64,
            s2.stack_stats().stacks,
        );
        chunk
    };
    let mut g = c.benchmark_group("sync_g");
    g.throughput(Throughput::Elements(n));
    let mut stage = stage;
    g.bench_function("round", |b| {
        b.iter_batched(
            || ring.clone(),
            |mut r| black_box(stage.round(std::slice::from_mut(&mut r), 0).bytes.len()),
            BatchSize::LargeInput,
        )
    });
    // What a report pays per stack sample: expanding the chunk.
    g.bench_function("decode", |b| {
        b.iter(|| {
            let mut x = 0u64;
            profkit_eventlog::for_each_sample(
                black_box(&chunk.bytes),
                |s| x = x.wrapping_add(u64::from(s.stack.unwrap_or(0))),
                |_| {},
            )
            .unwrap();
            black_box(x)
        })
    });
    g.finish();

    // Last, so that its allocations do not disturb the throughput runs
    // (run first, they made the plain round measure 10 % slower).
    for (callchain, n) in [(false, 1_000_000), (true, 100_000), (true, 1_000_000)] {
        let (file, written, defs, def_bytes, _) = session_size(callchain, n);
        eprintln!(
            "session{}: {written} samples -> {file} bytes = {:.2} bytes/sample \
             ({defs} stack definitions, {:.2} bytes/sample of them)",
            if callchain { " -g" } else { "" },
            file as f64 / written as f64,
            def_bytes as f64 / written as f64,
        );
    }
}

/// DWARF call graphs: a stage that has read the recorded stack's binary,
/// and one ring full of samples carrying that stack (512 bytes each).
fn setup_dwarf() -> (SyncStage, SimRing, u64) {
    let layout = Layout {
        callchain: true,
        user_stack: 512,
        cgroup: false,
    };
    let bin = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/unwind/callgraph-O2-nofp");
    let build_id = profkit_sync::binfile::read_build_id_at(&bin).expect("a build-id");
    let (ip, sp, bp, start, end, pgoff, stack) = recorded_stack();
    let mut stage = stage(layout);
    let mut ring = SimRing::new(0, RING, layout);
    assert!(ring.push(&SimRecord::Mmap2 {
        pid: 77,
        tid: 77,
        addr: start,
        len: end - start,
        pgoff,
        ino: 0,
        build_id: Some(build_id),
        prot: 5,
        filename: bin.to_str().unwrap().into(),
        time: 1,
    }));
    stage.round(std::slice::from_mut(&mut ring), 2);
    let mut n = 0;
    while ring.push(&SimRecord::UserSample {
        ip,
        pid: 77,
        tid: 77,
        time: 3,
        period: 1,
        callchain: vec![],
        bp,
        sp,
        stack: stack.clone(),
    }) {
        n += 1;
    }
    let mut warm = ring.clone();
    stage.round(std::slice::from_mut(&mut warm), 0);
    assert_eq!(stage.unwind_stats().binaries, 1);
    (stage, ring, n)
}

fn dwarf(c: &mut Criterion) {
    let (mut stage, ring, n) = setup_dwarf();
    let before = stage.unwind_stats();
    let chunk = stage.round(std::slice::from_mut(&mut ring.clone()), 0);
    let after = stage.unwind_stats();
    eprintln!(
        "sync dwarf: {n} samples of {} ring bytes each -> {:.2} encoded bytes/sample, \
         {:.1} frames unwound per sample",
        ring.pending() as u64 / n,
        chunk.bytes.len() as f64 / chunk.samples() as f64,
        (after.frames - before.frames) as f64 / n as f64,
    );
    let mut g = c.benchmark_group("sync_dwarf");
    g.throughput(Throughput::Elements(n));
    g.bench_function("round", |b| {
        b.iter_batched(
            || ring.clone(),
            |mut r| black_box(stage.round(std::slice::from_mut(&mut r), 0).bytes.len()),
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

/// 100,000 mappings of one process, the way a hostile or unusual
/// workload can lay them out (issue 13.8): a whole table must cost
/// about n log n, whatever the order.
fn map_table(c: &mut Criterion) {
    const N: u64 = 100_000;
    let map = |start: u64, since: u64| Map {
        start,
        end: start + 0x1000,
        pgoff: 0,
        cookie: start,
        kind: MapKind::File,
        since,
        until: u64::MAX,
    };
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut shuffled: Vec<u64> = (0..N).collect();
    for i in (1..shuffled.len()).rev() {
        shuffled.swap(i, rng.below(i as u64 + 1) as usize);
    }
    let orders: [(&str, Vec<u64>); 4] = [
        ("ascending", (0..N).map(|i| 0x10000 + i * 0x2000).collect()),
        (
            "descending",
            (0..N).rev().map(|i| 0x10000 + i * 0x2000).collect(),
        ),
        (
            "random",
            shuffled.iter().map(|i| 0x10000 + i * 0x2000).collect(),
        ),
        ("same_address", vec![0x10000; N as usize]),
    ];
    let mut g = c.benchmark_group("map_table");
    g.throughput(Throughput::Elements(N));
    for (name, starts) in &orders {
        g.bench_function(*name, |b| {
            b.iter(|| {
                let mut p = Process::default();
                for (t, &s) in starts.iter().enumerate() {
                    p.map(map(s, t as u64), 0);
                }
                // And resolve each address once, at a time it was live.
                let mut hits = 0u64;
                for (t, &s) in starts.iter().enumerate().step_by(97) {
                    hits += p.resolve(s + 8, t as u64).is_some() as u64;
                }
                let n = p.maps().len();
                black_box((n, hits))
            })
        });
    }
    g.finish();
}

/// 64 processes each mapping the same 4 shared objects (by build-id), as
/// a live session sees execs: one round of their MMAP2 records and a
/// sample each, on a fresh stage.
fn live_mmaps(c: &mut Criterion) {
    const PROCS: u32 = 64;
    let d = tempfile::tempdir().unwrap();
    let shared: Vec<std::path::PathBuf> = (0..4)
        .map(|i| {
            let p = d.path().join(format!("lib{i}.so"));
            std::fs::write(&p, vec![i as u8; 4096 * (i + 1)]).unwrap();
            p
        })
        .collect();
    let proc_root = d.path().join("proc");
    // Processes gone before their records are read: no `/proc` entry.
    let gone_root = d.path().join("gone-proc");
    std::fs::create_dir_all(&gone_root).unwrap();
    for p in 0..PROCS {
        let dir = proc_root.join((2000 + p).to_string());
        std::fs::create_dir_all(dir.join("map_files")).unwrap();
        std::fs::write(dir.join("comm"), "app\n").unwrap();
        std::fs::write(dir.join("maps"), "").unwrap();
        for (m, lib) in shared.iter().enumerate() {
            let start = 0x400000 + m as u64 * 0x1000000;
            let name = format!("{start:x}-{:x}", start + 0x200000);
            std::fs::hard_link(lib, dir.join("map_files").join(name)).unwrap();
        }
    }
    let layout = Layout {
        callchain: false,
        user_stack: 0,
        cgroup: false,
    };
    let ring = || {
        let mut ring = SimRing::new(0, RING, layout);
        let mut t = 1;
        for p in 0..PROCS {
            for m in 0..4u64 {
                assert!(ring.push(&SimRecord::Mmap2 {
                    pid: 2000 + p,
                    tid: 2000 + p,
                    addr: 0x400000 + m * 0x1000000,
                    len: 0x200000,
                    pgoff: 0,
                    ino: 0,
                    build_id: Some(vec![m as u8 + 1; 20]),
                    prot: 5,
                    filename: format!("/usr/lib/lib{m}.so"),
                    time: t,
                }));
                t += 1;
            }
            assert!(ring.push(&SimRecord::Sample {
                ip: 0x400100,
                pid: 2000 + p,
                tid: 2000 + p,
                time: t,
                kernel: false,
                period: 1,
                callchain: vec![],
            }));
            t += 1;
        }
        ring
    };
    let live_stage = |root: &std::path::Path| {
        SyncStage::with_probe(
            SyncOptions::new(layout),
            profkit_sync::ProcfsProbe::new(profkit_sync::ProcPaths {
                proc_root: root.to_path_buf(),
                sys_root: d.path().join("sys"),
            }),
        )
    };
    let mut g = c.benchmark_group("sync_live_mmaps");
    g.throughput(Throughput::Elements(u64::from(PROCS) * 4));
    for (name, root) in [("round", &proc_root), ("gone", &gone_root)] {
        g.bench_function(name, |b| {
            b.iter_batched(
                || (live_stage(root), ring()),
                |(mut st, ring)| black_box(st.round(&mut [ring], 1 << 40).bytes.len()),
                BatchSize::SmallInput,
            )
        });
    }
    g.finish();
}

/// A node-like jitdump (`node --perf-prof` on 100k functions: each an
/// unwinding-info record and a code load with some 900 code bytes and a
/// 30-byte name), taken in by the stage from its mapping to its end: the
/// cost per function a runtime's dump puts on the daemon, whatever is hit.
fn jit(c: &mut Criterion) {
    const FUNCS: u64 = 20_000;
    let d = tempfile::tempdir().unwrap();
    let mut w = profkit_jitdump::DumpWriter::new(7, 1);
    let eh = [0u8; 48];
    let hdr = [0u8; 20];
    let code = [0x90u8; 900];
    for i in 0..FUNCS {
        w.unwinding_info(2 * i + 2, &eh, &hdr, 80);
        w.code_load(
            2 * i + 3,
            7,
            7,
            0x7f00_0000_0000 + i * 1024,
            &code,
            i,
            &format!("JS:~fn{i} /srv/app/lib/module.js:1:1"),
        );
    }
    std::fs::write(d.path().join("jit-7.dump"), w.bytes()).unwrap();
    let bytes = w.bytes().len() as u64;
    let layout = Layout {
        callchain: false,
        user_stack: 0,
        cgroup: false,
    };
    let ring = || {
        let mut r = SimRing::new(0, 1 << 16, layout);
        assert!(r.push(&SimRecord::Mmap2 {
            pid: 7,
            tid: 7,
            addr: 0x1000_0000,
            len: 4096,
            pgoff: 0,
            ino: 3,
            build_id: None,
            prot: 5,
            filename: "/tmp/jit-7.dump".into(),
            time: 1,
        }));
        r
    };
    let stage = || {
        SyncStage::with_probe(
            SyncOptions::new(layout),
            profkit_sync::ImportProbe::new(vec![d.path().to_path_buf()]),
        )
    };
    let mut g = c.benchmark_group("jit");
    g.throughput(Throughput::Bytes(bytes));
    g.bench_function("dump_20k_functions", |b| {
        b.iter_batched(
            || (stage(), ring()),
            |(mut st, ring)| {
                st.round(&mut [ring], 10);
                let n = st.finish_final_round().bytes.len();
                assert_eq!(st.jit_stats().functions, FUNCS);
                black_box(n)
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(20).measurement_time(std::time::Duration::from_secs(4));
    targets = bench, dwarf, map_table, live_mmaps, jit
}
criterion_main!(benches);
