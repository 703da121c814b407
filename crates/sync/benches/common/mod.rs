//! What the sync benches share: the mappings of 8 processes, a
//! call-graph stream shaped like a desktop's, the kernel maps it samples,
//! and the gdb-recorded stack of testdata/unwind.
#![allow(dead_code)]

use profkit_perf::{SimRecord, SimRing, PERF_CONTEXT_KERNEL, PERF_CONTEXT_USER};
use profkit_sync::{kernel_entry, module_entry, KernelMaps, KernelModule, LoadedModule, SyncStage};

/// The mappings of the 8 processes (4 per process, 2 MiB each).
pub fn mmaps(ring: &mut SimRing, t: &mut u64) {
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

// ------------------------------------------------------------ call graphs

pub const KTEXT: u64 = 0xffff_ffff_8100_0000;
pub const KLEN: u64 = 32 << 20;
pub const MODBASE: u64 = 0xffff_ffff_c000_0000;
pub const MODLEN: u64 = 1 << 20;

/// splitmix64.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next()) * u128::from(n)) >> 64) as u64
    }
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
}

/// A call tree: node `i` is a call site (a return address) whose caller is
/// `parent[i]`; the stack of a node is the path to the root, innermost
/// first. Node 0..base form one chain (`_start`, `__libc_start_main`,
/// `main`, a run loop, ...); later nodes hang under a random earlier node,
/// which gives depths of about `base + ln(nodes)`.
pub struct Tree {
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
pub struct CallGraphStream {
    rng: Rng,
    users: Vec<Tree>,
    kernel: Tree,
    /// Per CPU: current (process, node, kernel node, samples left in task,
    /// samples left in run).
    cpus: Vec<(usize, usize, Option<usize>, u32, u32)>,
    t: u64,
}

impl CallGraphStream {
    pub fn new(cpus: usize) -> Self {
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
    pub fn sample(&mut self, cpu: usize) -> SimRecord {
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

pub fn kernel_maps(stage: &mut SyncStage) {
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

/// The gdb-recorded stack of testdata/unwind: (ip, sp, bp, mapping
/// start, end, pgoff, stack bytes).
pub fn recorded_stack() -> (u64, u64, u64, u64, u64, u64, Vec<u8>) {
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
