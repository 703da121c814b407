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

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use profkit_eventlog::Event;
use profkit_perf::{
    Layout, RecordRing, SimRecord, SimRing, PERF_CONTEXT_KERNEL, PERF_CONTEXT_USER,
};
use profkit_sync::{
    kernel_entry, module_entry, KernelMaps, KernelModule, LoadedModule, Map, MapKind, Process,
    SyncOptions, SyncStage,
};
use std::hint::black_box;

const RING: usize = 8 << 20;

fn stage(layout: Layout) -> SyncStage {
    SyncStage::new(SyncOptions::new(layout))
}

/// The mappings of the 8 processes (4 per process, 2 MiB each).
fn mmaps(ring: &mut SimRing, t: &mut u64) {
    for p in 0..8u32 {
        for m in 0..4u64 {
            assert!(ring.push(&SimRecord::Mmap2 {
                pid: 1000 + p,
                tid: 1000 + p,
                addr: 0x400000 + m * 0x1000000,
                len: 0x200000,
                pgoff: 0,
                ino: (p as u64) * 4 + m + 1,
                build_id: None,
                prot: 5,
                filename: format!("/usr/lib/lib{p}_{m}.so"),
                time: *t,
            }));
            *t += 1;
        }
    }
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

// ------------------------------------------------------------ call graphs

const KTEXT: u64 = 0xffff_ffff_8100_0000;
const KLEN: u64 = 32 << 20;
const MODBASE: u64 = 0xffff_ffff_c000_0000;
const MODLEN: u64 = 1 << 20;

/// splitmix64.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(n)) >> 64) as u64
    }
    fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
}

/// A call tree: node `i` is a call site (a return address) whose caller is
/// `parent[i]`; the stack of a node is the path to the root, innermost
/// first. Node 0..base form one chain (`_start`, `__libc_start_main`,
/// `main`, a run loop, ...); later nodes hang under a random earlier node,
/// which gives depths of about `base + ln(nodes)`.
struct Tree {
    parent: Vec<usize>,
    addr: Vec<u64>,
    /// Hot spot of samples under this node (a leaf function's loop).
    leaf: Vec<u64>,
    /// The user stack breaks below this node (a frame without frame
    /// pointer): `Some(depth)` frames are good, then garbage.
    broken: Vec<Option<usize>>,
}

impl Tree {
    fn new(
        rng: &mut Rng,
        nodes: usize,
        base: usize,
        place: &mut dyn FnMut(&mut Rng, u64) -> u64,
        broken: f64,
    ) -> Tree {
        let mut t = Tree {
            parent: Vec::new(),
            addr: Vec::new(),
            leaf: Vec::new(),
            broken: Vec::new(),
        };
        for i in 0..nodes {
            let parent = if i == 0 {
                0
            } else if i < base {
                i - 1
            } else {
                base - 1 + rng.below((i - base + 1) as u64) as usize
            };
            let near = if i == 0 { 0 } else { t.addr[parent] };
            t.parent.push(parent);
            t.addr.push(place(rng, near));
            t.leaf.push(place(rng, near));
            t.broken.push(if rng.chance(broken) {
                Some(rng.below(4) as usize)
            } else {
                None
            });
        }
        t
    }

    /// Appends the stack of `node` (innermost first) to `out`.
    fn stack(&self, mut node: usize, out: &mut Vec<u64>, garbage: u64) {
        let start = out.len();
        loop {
            out.push(self.addr[node]);
            if let Some(d) = self.broken[node] {
                if out.len() - start > d {
                    out.push(garbage);
                    out.push(garbage ^ 0x58);
                    return;
                }
            }
            if node == 0 {
                return;
            }
            node = self.parent[node];
        }
    }
}

/// A system-wide call-graph stream shaped like the non-call-graph one
/// (8 processes, task change every ~50 samples, binary change every ~10)
/// with stacks:
///
/// - each process has a call tree of 400 call sites over its 4 binaries
///   (a 10-frame common chain, then a random tree: 10 to 25 frames, ~16
///   on average); a run of ~10 samples sits in one node's hot spot (one
///   stack, offsets within 256 bytes), nodes picked with a skew (the
///   popular tenth of the nodes gets about a third of the runs);
/// - 25 % of the runs are kernel-mode: a kernel stack from a tree of 150
///   call sites (5 % in a module; 6-frame common chain, ~10 frames), then
///   the user stack of a node that made the system call;
/// - 20 % of the user nodes have a broken frame-pointer chain (code
///   without frame pointers, as in distribution builds): their walk turns
///   to stack addresses after 1 to 4 frames.
struct CallGraphStream {
    rng: Rng,
    users: Vec<Tree>,
    kernel: Tree,
    /// Per CPU: current (process, node, kernel node, samples left in task,
    /// samples left in run).
    cpus: Vec<(usize, usize, Option<usize>, u32, u32)>,
    t: u64,
}

impl CallGraphStream {
    fn new(cpus: usize) -> Self {
        let mut rng = Rng(0x5eed_ca11);
        let users = (0..8)
            .map(|_| {
                let mut place = |rng: &mut Rng, near: u64| {
                    // Mostly the caller's binary, sometimes another one.
                    let m = if near != 0 && rng.chance(0.7) {
                        (near - 0x400000) / 0x1000000
                    } else {
                        rng.below(4)
                    };
                    0x400000 + m * 0x1000000 + rng.below(0x200000 - 0x100) / 16 * 16
                };
                Tree::new(&mut rng, 400, 10, &mut place, 0.2)
            })
            .collect();
        let mut kplace = |rng: &mut Rng, _near: u64| {
            if rng.chance(0.05) {
                MODBASE + rng.below(MODLEN - 0x100) / 16 * 16
            } else {
                KTEXT + rng.below(KLEN - 0x100) / 16 * 16
            }
        };
        let kernel = Tree::new(&mut rng, 150, 6, &mut kplace, 0.0);
        CallGraphStream {
            rng,
            users,
            kernel,
            cpus: vec![(0, 0, None, 0, 0); cpus],
            t: 1000,
        }
    }

    fn pick(&mut self, n: usize) -> usize {
        // Skewed: the minimum of two uniform draws.
        self.rng.below(n as u64).min(self.rng.below(n as u64)) as usize
    }

    /// The next sample on `cpu`.
    fn sample(&mut self, cpu: usize) -> SimRecord {
        let (mut p, mut node, mut knode, mut task_left, mut run_left) = self.cpus[cpu];
        if task_left == 0 {
            p = self.rng.below(8) as usize;
            task_left = 1 + self.rng.below(99) as u32;
            run_left = 0;
        }
        if run_left == 0 {
            node = self.pick(400);
            knode = self.rng.chance(0.25).then(|| self.pick(150));
            run_left = 1 + self.rng.below(19) as u32;
        }
        task_left -= 1;
        run_left -= 1;
        self.cpus[cpu] = (p, node, knode, task_left, run_left);
        self.t += 1;
        let jitter = self.rng.below(64) * 4;
        let garbage = 0x7ffc_0000_0000 + self.rng.below(1 << 20) * 8;
        let user = &self.users[p];
        let mut chain = Vec::with_capacity(40);
        let (ip, kernel) = match knode {
            Some(k) => {
                let ip = self.kernel.leaf[k] + jitter;
                chain.push(PERF_CONTEXT_KERNEL);
                chain.push(ip);
                self.kernel.stack(k, &mut chain, 0);
                chain.push(PERF_CONTEXT_USER);
                user.stack(node, &mut chain, garbage);
                (ip, true)
            }
            None => {
                let ip = user.leaf[node] + jitter;
                chain.push(PERF_CONTEXT_USER);
                chain.push(ip);
                user.stack(node, &mut chain, garbage);
                (ip, false)
            }
        };
        SimRecord::Sample {
            ip,
            pid: 1000 + p as u32,
            tid: 1000 + p as u32,
            time: self.t,
            kernel,
            period: 1,
            callchain: chain,
        }
    }
}

fn kernel_maps(stage: &mut SyncStage) {
    let mut k = KernelMaps::default();
    k.text = Some((KTEXT, KTEXT + KLEN));
    k.kernel = Some(kernel_entry(KTEXT, None));
    let module = KernelModule {
        name: "m".into(),
        base: MODBASE,
        size: MODLEN,
    };
    let e = module_entry(&module, None);
    k.set_modules(vec![LoadedModule {
        module,
        cookie: e.cookie,
    }]);
    stage.set_kernel(k);
    stage.add_cookie(e);
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

/// The gdb-recorded stack of testdata/unwind: (ip, sp, bp, mapping
/// start, end, pgoff, stack bytes).
fn recorded_stack() -> (u64, u64, u64, u64, u64, u64, Vec<u8>) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../testdata/unwind");
    let text = std::fs::read_to_string(dir.join("callgraph-O2-nofp.stack")).unwrap();
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
    let (mut r, mut m, mut stack) = ([0; 3], [0; 3], Vec::new());
    let mut in_stack = false;
    for l in text.lines().filter(|l| !l.starts_with('#')) {
        let w: Vec<&str> = l.split_whitespace().collect();
        match w[0] {
            "ip" => r[0] = hex(w[1]),
            "sp" => r[1] = hex(w[1]),
            "bp" => r[2] = hex(w[1]),
            "map" => m = [hex(w[1]), hex(w[2]), hex(w[3])],
            "stack" => in_stack = true,
            _ if in_stack => w.iter().for_each(|v| stack.extend(hex(v).to_le_bytes())),
            _ => {}
        }
    }
    (r[0], r[1], r[2], m[0], m[1], m[2], stack)
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
