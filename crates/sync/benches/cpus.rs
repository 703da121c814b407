//! Many CPUs by simulation (issue 33): `SimRing`s for N CPUs, sized by
//! `profkit_perf::ring_plan` for root's budget, fed at a realistic rate
//! and drained by the real recorder (sync stage, event buffer, writer
//! thread, `FileSink`) into a temporary directory, one round per drain
//! interval of simulated time. The samples are made between rounds, by
//! a cheap generator, outside the measured time.
//!
//! One line per case:
//!
//! ```text
//! cpus N MODE: round MS ms (p99 MS), CPU% of one core, RSS +MiB, B/sample; ...
//! ```
//!
//! - round: wall time of `Recorder::round` (drain, parse, resolve, encode,
//!   hand the chunk to the writer), median and 99th percentile of the
//!   rounds;
//! - CPU%: the round thread's CPU time in rounds over the simulated time
//!   (rounds × drain interval), and the writer thread's the same way;
//! - RSS: the process's peak resident memory over the recorder's life
//!   less its resident memory before the recorder was made (the rings,
//!   already touched, and the generator are in the second figure): the
//!   recorder's own peak (`VmHWM` reset through `/proc/self/clear_refs`);
//! - B/sample: the session file's bytes over the samples it holds;
//! - then the rings (size, drain interval, the round time past which a
//!   ring would overflow at that rate: `RingPlan::loss_after_round_ms`)
//!   and the samples lost (every kind, from the footer's accounting).
//!
//! Modes: `flat` (every CPU busy, no call graphs), `fp` (frame-pointer
//! call chains, the sync bench's call-graph stream), `dwarf` (8 KiB user
//! stacks, the gdb-recorded stack of testdata/unwind unwound for every
//! sample), `idle` (a quarter of the CPUs busy, flat; the others one
//! kernel sample a second, as a halted CPU gives a PMU event), `churn`
//! (flat, and each CPU starts a process with 6 mappings every 100 ms,
//! which exits 100 ms later), `quiet` (every CPU idle so).
//!
//! Run: `scripts/bench.sh cpus`, or one case per process:
//! `PROFKIT_CPUS_CASES=256:flat cargo bench -p profkit-sync --bench cpus`.
//! Knobs: `PROFKIT_CPUS_CASES` (`N:MODE,...`; every N of 2, 16, 64, 256
//! with every mode by default), `PROFKIT_CPUS_SECONDS` (simulated seconds
//! per case, 10), `PROFKIT_CPUS_RATE` (Hz per CPU, 4000),
//! `PROFKIT_CPUS_BUDGET_MIB` (the locked-memory budget planned within,
//! root's 512 MiB by default).

use common::{kernel_maps, mmaps, recorded_stack, CallGraphStream, Rng, KTEXT};
use profkit_eventlog::{EventConfigDesc, SessionHeader};
use profkit_perf::{
    monotonic_ns, ring_plan, Layout, LockLimit, RecordRing, RingMode, RingNeed, RingPlan,
    SimRecord, SimRing, ROOT_LOCK_BUDGET,
};
use profkit_sync::{FileSink, Recorder, RecorderOptions, SimRings, SyncOptions, SyncStage};
use std::time::{Duration, Instant};

mod common;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Flat,
    Fp,
    Dwarf,
    Idle,
    Churn,
    Quiet,
}

const MODES: [Mode; 6] = [
    Mode::Flat,
    Mode::Fp,
    Mode::Dwarf,
    Mode::Idle,
    Mode::Churn,
    Mode::Quiet,
];

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Flat => "flat",
            Mode::Fp => "fp",
            Mode::Dwarf => "dwarf",
            Mode::Idle => "idle",
            Mode::Churn => "churn",
            Mode::Quiet => "quiet",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        MODES.into_iter().find(|m| m.name() == s)
    }

    fn layout(self) -> Layout {
        match self {
            Mode::Fp => Layout {
                callchain: true,
                user_stack: 0,
                cgroup: false,
            },
            Mode::Dwarf => Layout {
                callchain: true,
                user_stack: DWARF_STACK,
                cgroup: false,
            },
            _ => Layout::default(),
        }
    }
}

const DWARF_STACK: u32 = 8192;

/// How long each CPU's own short-lived process lives (churn).
const CHURN_MS: u64 = 100;

/// The processes of the churn: pids from here on, never reused.
const CHURN_PID0: u32 = 100_000;

/// The DWARF processes (each maps the recorded stack's binary).
const DWARF_PID0: u32 = 2000;

/// Everything that makes samples for one case.
struct Gen {
    mode: Mode,
    rng: Rng,
    /// Per CPU: samples so far.
    n: Vec<u64>,
    fp: Option<CallGraphStream>,
    /// DWARF: per process, the encoded sample (kind, misc, body) and where
    /// its time is in the body.
    dwarf: Vec<(u32, u16, Vec<u8>)>,
    dwarf_time_at: usize,
    /// Churn: per CPU, its own process (pid, samples left) and the next pid.
    own: Vec<Option<(u32, u64)>>,
    next_pid: u32,
    rate: u64,
}

impl Gen {
    fn new(mode: Mode, cpus: usize, rate: u64) -> Self {
        Gen {
            mode,
            rng: Rng(0x5eed_0033),
            n: vec![0; cpus],
            fp: (mode == Mode::Fp).then(|| CallGraphStream::new(cpus)),
            dwarf: Vec::new(),
            dwarf_time_at: 0,
            own: vec![None; cpus],
            next_pid: CHURN_PID0,
            rate,
        }
    }

    /// The records every case starts with (on CPU 0's ring): the 8
    /// processes' mappings, and with DWARF the recorded stack's binary in
    /// 8 processes of its own.
    fn setup(&mut self, ring: &mut SimRing, t: &mut u64) {
        mmaps(ring, t);
        if self.mode != Mode::Dwarf {
            return;
        }
        let bin = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../testdata/unwind/callgraph-O2-nofp");
        let build_id = profkit_sync::binfile::read_build_id_at(&bin).expect("a build-id");
        let (ip, sp, bp, start, end, pgoff, stack) = recorded_stack();
        let layout = self.mode.layout();
        for p in 0..8 {
            let pid = DWARF_PID0 + p;
            assert!(ring.push(&SimRecord::Mmap2 {
                pid,
                tid: pid,
                addr: start,
                len: end - start,
                pgoff,
                ino: 0,
                build_id: Some(build_id.clone()),
                prot: 5,
                filename: bin.to_str().unwrap().into(),
                time: *t,
            }));
            *t += 1;
            let sample = |time| SimRecord::UserSample {
                ip,
                pid,
                tid: pid,
                time,
                period: 1,
                callchain: vec![],
                bp,
                sp,
                stack: stack.clone(),
            };
            let (k, m, body) = sample(0x1122_3344_5566_7788).encode(0, layout);
            self.dwarf_time_at = body
                .windows(8)
                .position(|w| w == 0x1122_3344_5566_7788u64.to_ne_bytes())
                .expect("the time in the sample");
            self.dwarf.push((k, m, body));
        }
    }

    fn busy(&self, cpu: usize) -> bool {
        match self.mode {
            Mode::Idle => cpu % 4 == 0,
            Mode::Quiet => false,
            _ => true,
        }
    }

    /// Pushes `count` samples of CPU `cpu`, spread over `span` ns from
    /// `from`. A sample the ring has no room for is dropped and counted
    /// by the ring (reported as lost): the simulation's finding.
    fn fill(&mut self, ring: &mut SimRing, cpu: usize, from: u64, count: u64, span: u64) {
        for i in 0..count {
            self.push(ring, cpu, from + i * span / count);
        }
    }

    fn push(&mut self, ring: &mut SimRing, cpu: usize, time: u64) -> bool {
        let n = self.n[cpu];
        self.n[cpu] += 1;
        if !self.busy(cpu) {
            return ring.push(&SimRecord::Sample {
                ip: KTEXT + 0x1000,
                pid: 0,
                tid: 0,
                time,
                kernel: true,
                period: 1,
                callchain: vec![],
            });
        }
        match self.mode {
            Mode::Fp => {
                let mut s = self.fp.as_mut().unwrap().sample(cpu);
                if let SimRecord::Sample { time: t, .. } = &mut s {
                    *t = time;
                }
                ring.push(&s)
            }
            Mode::Dwarf => {
                let p = ((n / 50 + cpu as u64) % 8) as usize;
                let (k, m, body) = &mut self.dwarf[p];
                body[self.dwarf_time_at..self.dwarf_time_at + 8]
                    .copy_from_slice(&time.to_ne_bytes());
                ring.push_raw(*k, *m, body)
            }
            Mode::Churn => {
                if let Some(own) = self.churn(ring, cpu, time) {
                    if n % 2 == 0 {
                        let ip = self.ip(n);
                        return ring.push(&SimRecord::Sample {
                            ip,
                            pid: own,
                            tid: own,
                            time,
                            kernel: false,
                            period: 1,
                            callchain: vec![],
                        });
                    }
                }
                self.flat(ring, cpu, n, time)
            }
            Mode::Flat | Mode::Idle | Mode::Quiet => self.flat(ring, cpu, n, time),
        }
    }

    /// An address in one of the 4 mappings: the binary changes about
    /// every 10 samples (as the sync bench's stream).
    fn ip(&mut self, n: u64) -> u64 {
        let m = (n / 10) % 4;
        0x400000 + m * 0x1000000 + self.rng.below(0x4000) * 16
    }

    /// A sample of one of the 8 long-lived processes (the task changes
    /// about every 50 samples).
    fn flat(&mut self, ring: &mut SimRing, cpu: usize, n: u64, time: u64) -> bool {
        let p = ((n / 50 + cpu as u64) % 8) as u32;
        let ip = self.ip(n);
        ring.push(&SimRecord::Sample {
            ip,
            pid: 1000 + p,
            tid: 1000 + p,
            time,
            kernel: false,
            period: 1,
            callchain: vec![],
        })
    }

    /// Churn: CPU `cpu`'s own process, a new one (FORK, exec COMM, 6
    /// MMAP2) when the last has lived `CHURN_MS` (its EXIT first).
    fn churn(&mut self, ring: &mut SimRing, cpu: usize, time: u64) -> Option<u32> {
        let life = self.rate * CHURN_MS / 1000;
        match &mut self.own[cpu] {
            Some((pid, left)) if *left > 0 => {
                *left -= 1;
                return Some(*pid);
            }
            Some((pid, _)) => {
                let pid = *pid;
                ring.push(&SimRecord::Exit {
                    pid,
                    ppid: 1000,
                    tid: pid,
                    ptid: 1000,
                    time,
                });
            }
            None => {}
        }
        let pid = self.next_pid;
        self.next_pid += 1;
        ring.push(&SimRecord::Fork {
            pid,
            ppid: 1000,
            tid: pid,
            ptid: 1000,
            time,
        });
        ring.push(&SimRecord::Comm {
            pid,
            tid: pid,
            comm: format!("job{}", pid % 40),
            exec: true,
            time,
        });
        for m in 0..6u64 {
            // The program (one of 40), then shared libraries.
            let (filename, ino) = if m == 0 {
                (
                    format!("/usr/bin/job{}", pid % 40),
                    5000 + u64::from(pid % 40),
                )
            } else {
                (format!("/usr/lib/libshared{m}.so"), 6000 + m)
            };
            ring.push(&SimRecord::Mmap2 {
                pid,
                tid: pid,
                addr: 0x400000 + m * 0x1000000,
                len: 0x200000,
                pgoff: 0,
                ino,
                build_id: None,
                prot: 5,
                filename,
                time,
            });
        }
        self.own[cpu] = Some((pid, life));
        Some(pid)
    }
}

/// Writes records that fill the ring and reads them back, so that its
/// pages are resident before the recorder's memory is measured.
fn touch(ring: &mut SimRing) {
    let body = vec![0u8; 4096 - 8];
    while ring.data_size() - ring.pending() >= 4096 {
        assert!(ring.push_raw(0x7fff, 0, &body));
    }
    ring.read_records(|_| true);
    assert_eq!(ring.dropped(), 0);
}

fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn thread_cpu() -> Duration {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// CPU time of this process's thread named `name` (its schedstat).
fn named_thread_cpu(name: &str) -> Duration {
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return Duration::ZERO;
    };
    for e in dir.flatten() {
        let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
        if comm.trim_end() == name {
            let s = std::fs::read_to_string(e.path().join("schedstat")).unwrap_or_default();
            let ns = s.split_whitespace().next().and_then(|v| v.parse().ok());
            return Duration::from_nanos(ns.unwrap_or(0));
        }
    }
    Duration::ZERO
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

struct Outcome {
    line: String,
}

fn run(cpus: u32, mode: Mode, rate: u64, plan: &RingPlan, seconds: f64) -> Outcome {
    let layout = mode.layout();
    let interval_ns = (plan.drain_every_ms() * 1e6) as u64;
    let rounds = ((seconds * 1e9) / interval_ns as f64).ceil().max(1.0) as u64;
    let ring_bytes = plan.ring_bytes() as usize;
    let mut rings: Vec<SimRing> = (0..cpus)
        .map(|c| SimRing::new(c, ring_bytes, layout))
        .collect();
    rings.iter_mut().for_each(touch);
    let mut gen = Gen::new(mode, cpus as usize, rate);
    let t0 = monotonic_ns();
    let mut t = t0;
    gen.setup(&mut rings[0], &mut t);
    let dir = tempfile::tempdir().unwrap();
    let header = SessionHeader {
        cpus: (0..cpus).collect(),
        sync_interval_ms: plan.drain_every_ms().round() as u32,
        event: EventConfigDesc {
            name: "cpu-clock".into(),
            frequency: Some(rate),
            callchain: layout.callchain,
            user_stack: layout.user_stack,
            sample_times: true,
            ..Default::default()
        },
        ..Default::default()
    };

    // The recorder's memory from here on.
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    let rss0 = status_kib("VmRSS:");
    let mut stage = SyncStage::new(SyncOptions::new(layout));
    kernel_maps(&mut stage);
    let sink = FileSink::create(dir.path().join("session.pkl"), header).unwrap();
    let mut rec = Recorder::new(
        SimRings(rings),
        stage,
        Box::new(sink),
        RecorderOptions::default(),
    )
    .unwrap();
    let mut wall = Vec::with_capacity(rounds as usize);
    let mut cpu = Duration::ZERO;
    let idle_rate = 1; // Hz
    for r in 0..rounds {
        let from = t + r * interval_ns;
        // Samples per CPU this round, at the rate (fractions carried).
        let at = |k: u64, hz: u64| {
            (u128::from(k) * u128::from(interval_ns) * u128::from(hz) / 1_000_000_000) as u64
        };
        let busy_n = at(r + 1, rate) - at(r, rate);
        let idle_n = at(r + 1, idle_rate) - at(r, idle_rate);
        for c in 0..cpus as usize {
            let n = if gen.busy(c) { busy_n } else { idle_n };
            gen.fill(&mut rec.source_mut().0[c], c, from, n, interval_ns);
        }
        let c0 = thread_cpu();
        let w0 = Instant::now();
        rec.round();
        wall.push(w0.elapsed().as_secs_f64() * 1e3);
        cpu += thread_cpu() - c0;
    }
    let writer = named_thread_cpu("profkit-writer");
    let status = rec.stop().unwrap();
    let hwm = status_kib("VmHWM:");
    let file = std::fs::metadata(dir.path().join("session.pkl"))
        .unwrap()
        .len();
    let written: u64 = status.accounting.iter().map(|a| a.samples_written).sum();
    let received: u64 = status.accounting.iter().map(|a| a.samples_received).sum();
    let lost: u64 = status
        .accounting
        .iter()
        .map(profkit_eventlog::CpuAccounting::lost_total)
        .sum();
    let sim_s = rounds as f64 * interval_ns as f64 / 1e9;
    let mut sorted = wall.clone();
    sorted.sort_by(f64::total_cmp);
    let name = if rate == 4000 {
        mode.name().to_owned()
    } else {
        format!("{}@{rate}Hz", mode.name())
    };
    let line = format!(
        "cpus {cpus} {name}: round {:.2} ms (p99 {:.2}), {:.2}% of one core (writer {:.2}%), \
         RSS +{:.1} MiB, {:.2} B/sample; {} samples/round, {} rounds of {:.1} ms, rings {} KiB \
         ({:.1} MiB locked; loss if a round > {:.0} ms), lost {lost} of {received}",
        percentile(&sorted, 0.5),
        percentile(&sorted, 0.99),
        cpu.as_secs_f64() * 100.0 / sim_s,
        writer.as_secs_f64() * 100.0 / sim_s,
        hwm.saturating_sub(rss0) as f64 / 1024.0,
        file as f64 / written.max(1) as f64,
        received / rounds,
        rounds,
        interval_ns as f64 / 1e6,
        ring_bytes / 1024,
        plan.locked_bytes() as f64 / (1u64 << 20) as f64,
        plan.loss_after_round_ms(),
    );
    Outcome { line }
}

fn main() {
    let rate: u64 = std::env::var("PROFKIT_CPUS_RATE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(4000);
    let seconds: f64 = std::env::var("PROFKIT_CPUS_SECONDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10.0);
    let budget_mib: Option<u64> = std::env::var("PROFKIT_CPUS_BUDGET_MIB")
        .ok()
        .and_then(|v| v.parse().ok());
    let cases: Vec<(u32, Mode)> = match std::env::var("PROFKIT_CPUS_CASES") {
        Ok(list) => list
            .split(',')
            .filter(|c| !c.is_empty())
            .map(|c| {
                let (n, m) = c.split_once(':').expect("N:MODE");
                (
                    n.parse().expect("a CPU count"),
                    Mode::parse(m)
                        .unwrap_or_else(|| panic!("mode {m}: one of flat, fp, dwarf, idle, churn")),
                )
            })
            .collect(),
        Err(_) => [2, 16, 64, 256]
            .into_iter()
            .flat_map(|n| MODES.map(|m| (n, m)))
            .collect(),
    };
    for (cpus, mode) in cases {
        let need = |rate_hz| RingNeed {
            cpus,
            rate_hz,
            mode: RingMode::of(mode.layout()),
            sync_interval_ms: 250,
            page_size: profkit_perf::page_size(),
        };
        let limit = LockLimit::Budget {
            bytes: budget_mib.map_or(ROOT_LOCK_BUDGET, |m| m << 20),
        };
        let (rate, plan) = match ring_plan(need(rate), limit) {
            Ok(p) => (rate, p),
            Err(e) => {
                println!("cpus {cpus} {}: no rings at {rate} Hz: {e}", mode.name());
                // The highest rate the budget plans for, simulated instead.
                let (mut lo, mut hi) = (0, rate);
                while lo + 1 < hi {
                    let mid = (lo + hi) / 2;
                    if ring_plan(need(mid), limit).is_ok() {
                        lo = mid;
                    } else {
                        hi = mid;
                    }
                }
                match ring_plan(need(lo), limit) {
                    Ok(p) => (lo, p),
                    Err(_) => continue,
                }
            }
        };
        println!("{}", run(cpus, mode, rate, &plan, seconds).line);
    }
}
