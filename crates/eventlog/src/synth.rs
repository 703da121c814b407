//! Deterministic synthetic sample streams shaped like a real system-wide
//! profile, for benchmarks and tests (here and in the crates downstream).
//!
//! The shape, per CPU and round: tasks run for ~`task_run` samples (uniform
//! in `1..2*task_run`), and within a task the binary changes every
//! ~`cookie_run` samples. Each cookie run is one of:
//!
//! | share | where | offsets |
//! |---|---|---|
//! | 35 % | the task's program, a hot loop | 8 distinct offsets in a 256-byte window, skewed |
//! | 20 % | the task's program | uniform over 2 MiB |
//! | 15 % | libc or another shared library | uniform over 2 MiB |
//! | 25 % | the kernel (kernel mode) | uniform over 32 MiB |
//! | 5 %  | a kernel module (kernel mode) | uniform over 1 MiB |
//!
//! Cookies are random 64-bit values, as a hash would give.

use crate::encode::ChunkEncoder;
use crate::error::Result;
use crate::event::{Cookie, CookieEntry, CookieKind, Event, ExpandedSample};
use crate::session::{CpuAccounting, SessionFooter};
use crate::writer::SessionWriter;

/// Shape of a synthetic stream.
#[derive(Debug, Clone)]
pub struct SynthConfig {
    /// Total samples.
    pub samples: usize,
    /// CPUs (0..cpus).
    pub cpus: u32,
    /// Samples per sync round (per chunk), over all CPUs.
    pub samples_per_round: usize,
    /// Mean samples between task switches on a CPU.
    pub task_run: u32,
    /// Mean samples between binary switches within a task.
    pub cookie_run: u32,
    /// Processes (each has 1 to 3 threads).
    pub processes: u32,
    /// Seed of the generator.
    pub seed: u64,
}

impl Default for SynthConfig {
    /// One million samples on 4 CPUs, 4000 samples per round (4 kHz × 4
    /// CPUs × 250 ms), task switch every ~50, binary switch every ~10.
    fn default() -> Self {
        SynthConfig {
            samples: 1_000_000,
            cpus: 4,
            samples_per_round: 4000,
            task_run: 50,
            cookie_run: 10,
            processes: 16,
            seed: 0x5eed_0ff1e,
        }
    }
}

/// A generated stream: samples in the order the sync stage would write
/// them, grouped into rounds, plus the binaries and tasks they refer to.
#[derive(Debug, Clone)]
pub struct SynthSession {
    /// Samples of each round, per CPU in CPU order within a round.
    pub rounds: Vec<Vec<ExpandedSample>>,
    /// Every binary.
    pub cookies: Vec<CookieEntry>,
    /// Every task: (pid, tid, comm).
    pub tasks: Vec<(u32, u32, String)>,
}

impl SynthSession {
    /// All samples, round after round.
    pub fn samples(&self) -> impl Iterator<Item = &ExpandedSample> {
        self.rounds.iter().flatten()
    }

    /// Number of samples.
    pub fn len(&self) -> usize {
        self.rounds.iter().map(Vec::len).sum()
    }

    /// True when there is no sample.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// splitmix64: small, fast, good enough for shaping test data.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }
}

struct Task {
    pid: u32,
    tid: u32,
    program: usize,
    hot_base: u64,
}

/// Generates a stream of the given shape.
pub fn realistic(cfg: &SynthConfig) -> SynthSession {
    let mut rng = Rng::new(cfg.seed);
    let mut cookies = Vec::new();
    let mut def = |rng: &mut Rng, kind: CookieKind, path: String, size: u64| {
        let mut cookie: Cookie = rng.next_u64();
        if cookie == crate::COOKIE_NONE {
            cookie = 1;
        }
        cookies.push((
            CookieEntry {
                cookie,
                kind,
                path,
                build_id: Some(rng.next_u64().to_le_bytes().repeat(2)[..16].to_vec()),
                dev: 0x803,
                inode: rng.below(1 << 24),
                generation: 0,
                base: 0,
                pid: None,
                file: Default::default(),
            },
            size,
        ));
        cookies.len() - 1
    };
    let kernel = def(
        &mut rng,
        CookieKind::Kernel,
        "[kernel.kallsyms]".into(),
        32 << 20,
    );
    let modules: Vec<usize> = (0..3)
        .map(|i| {
            def(
                &mut rng,
                CookieKind::Module,
                format!("/lib/modules/6.1.0/mod{i}.ko"),
                1 << 20,
            )
        })
        .collect();
    let libs: Vec<usize> = ["libc.so.6", "libm.so.6", "libstdc++.so.6", "libz.so.1"]
        .iter()
        .map(|l| {
            def(
                &mut rng,
                CookieKind::User,
                format!("/usr/lib/x86_64-linux-gnu/{l}"),
                2 << 20,
            )
        })
        .collect();
    let programs: Vec<usize> = (0..cfg.processes)
        .map(|i| {
            def(
                &mut rng,
                CookieKind::User,
                format!("/usr/bin/prog{i}"),
                2 << 20,
            )
        })
        .collect();

    let mut tasks = Vec::new();
    let mut task_names = Vec::new();
    for (i, &prog) in programs.iter().enumerate() {
        let pid = 1000 + rng.below(60_000) as u32;
        let threads = 1 + rng.below(3) as u32;
        for t in 0..threads {
            let tid = if t == 0 {
                pid
            } else {
                pid + 1 + rng.below(50) as u32
            };
            tasks.push(Task {
                pid,
                tid,
                program: prog,
                hot_base: rng.below((2 << 20) - 256),
            });
            task_names.push((pid, tid, format!("prog{i}")));
        }
    }

    let mut rounds = Vec::new();
    let mut left = cfg.samples;
    let cpus = cfg.cpus.max(1);
    let run = |rng: &mut Rng, mean: u32| 1 + rng.below(u64::from(2 * mean.max(1) - 1)) as usize;
    while left > 0 {
        let in_round = cfg.samples_per_round.max(1).min(left);
        left -= in_round;
        let mut round = Vec::with_capacity(in_round);
        for cpu in 0..cpus {
            let mut n =
                in_round / cpus as usize + usize::from((cpu as usize) < in_round % cpus as usize);
            while n > 0 {
                let task = &tasks[rng.below(tasks.len() as u64) as usize];
                let mut task_left = run(&mut rng, cfg.task_run).min(n);
                n -= task_left;
                let mut prev = usize::MAX;
                while task_left > 0 {
                    let k = run(&mut rng, cfg.cookie_run).min(task_left);
                    task_left -= k;
                    // A new run is in another binary than the last one, so
                    // binary switches come every ~cookie_run samples.
                    let (entry, kernel, hot) = loop {
                        let pick = match rng.below(100) {
                            0..=34 => (task.program, false, true),
                            35..=54 => (task.program, false, false),
                            55..=69 => (libs[rng.below(libs.len() as u64) as usize], false, false),
                            70..=94 => (kernel, true, false),
                            _ => (
                                modules[rng.below(modules.len() as u64) as usize],
                                true,
                                false,
                            ),
                        };
                        if pick.0 != prev {
                            break pick;
                        }
                    };
                    prev = entry;
                    let (ce, size) = &cookies[entry];
                    for _ in 0..k {
                        let offset = if hot {
                            // Skewed: slot i with weight ~ 1/(i+1).
                            let i = rng.below(8).min(rng.below(8));
                            task.hot_base + i * 24 + 4 * rng.below(2)
                        } else {
                            rng.below(*size)
                        };
                        round.push(ExpandedSample {
                            cpu,
                            pid: task.pid,
                            tid: task.tid,
                            kernel,
                            cookie: ce.cookie,
                            offset,
                            stack: None,
                            cgroup: 0,
                            time: None,
                        });
                    }
                }
            }
        }
        rounds.push(round);
    }
    SynthSession {
        rounds,
        cookies: cookies.into_iter().map(|(c, _)| c).collect(),
        tasks: task_names,
    }
}

/// Encodes every round of `s` the way the sync stage would: a `CookieDef`
/// before a cookie's first sample in the session, a `Comm` before a task's
/// first sample, then the samples. Calls `chunk(round, payload)` per round
/// and returns the per-CPU accounting.
pub fn encode_rounds(
    s: &SynthSession,
    mut chunk: impl FnMut(u64, &[u8]) -> Result<()>,
) -> Result<Vec<CpuAccounting>> {
    use std::collections::{HashMap, HashSet};
    let defs: HashMap<Cookie, &CookieEntry> = s.cookies.iter().map(|c| (c.cookie, c)).collect();
    let names: HashMap<(u32, u32), &str> = s
        .tasks
        .iter()
        .map(|(p, t, n)| ((*p, *t), n.as_str()))
        .collect();
    let mut defined = HashSet::new();
    let mut named = HashSet::new();
    let mut acct: Vec<CpuAccounting> = Vec::new();
    let mut enc = ChunkEncoder::new();
    for (round, samples) in s.rounds.iter().enumerate() {
        enc.clear();
        for x in samples {
            if defined.insert(x.cookie) {
                if let Some(e) = defs.get(&x.cookie) {
                    enc.event(&Event::CookieDef((*e).clone()));
                }
            }
            if named.insert((x.pid, x.tid)) {
                let comm = names
                    .get(&(x.pid, x.tid))
                    .copied()
                    .unwrap_or("?")
                    .to_owned();
                enc.event(&Event::Comm {
                    pid: x.pid,
                    tid: x.tid,
                    comm,
                    exec: false,
                    ns: None,
                });
            }
            enc.sample(x.cpu, x.pid, x.tid, x.kernel, x.cookie, x.offset);
        }
        for (cpu, n) in enc.per_cpu_samples() {
            let i = match acct.iter().position(|a| a.cpu == cpu) {
                Some(i) => i,
                None => {
                    acct.push(CpuAccounting {
                        cpu,
                        ..Default::default()
                    });
                    acct.len() - 1
                }
            };
            acct[i].samples_received += n;
            acct[i].samples_written += n;
        }
        chunk(round as u64, enc.bytes())?;
    }
    acct.sort_by_key(|a| a.cpu);
    Ok(acct)
}

/// Writes `s` as a whole session through `w` (chunks, then footer) and
/// returns the file's final length.
pub fn write_session(w: &mut SessionWriter, s: &SynthSession) -> Result<u64> {
    let start = w.next_round();
    let accounting = encode_rounds(s, |round, payload| {
        w.append_chunk(start + round, 1_000_000 * (start + round), payload)
            .map(|_| ())
    })?;
    w.write_footer(&SessionFooter {
        end_time_unix_ns: 1,
        end_monotonic_ns: 2,
        rounds: s.rounds.len() as u64,
        accounting,
    })?;
    Ok(w.len())
}
