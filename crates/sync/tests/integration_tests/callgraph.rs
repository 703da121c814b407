//! Call graphs on SimRing: raw callchains in, resolved and deduplicated
//! stacks out, across rounds, dropped chunks and resets.

use crate::sim_stage;
use profkit_eventlog::{
    for_each_sample, Cookie, Event, ExpandedSample, Frame, LostKind, StackTable, COOKIE_UNKNOWN,
};
use profkit_perf::{Layout, SimRecord, SimRing, PERF_CONTEXT_KERNEL, PERF_CONTEXT_USER};
use profkit_sync::{
    dev_number, inode_cookie, kernel_entry, module_entry, KernelMaps, KernelModule, LoadedModule,
    SyncStage, SAMPLE_TIME_UNIT_NS,
};
use proptest::prelude::*;
use std::collections::{BTreeMap, HashMap, HashSet};

const G: Layout = Layout {
    callchain: true,
    user_stack: 0,
    cgroup: false,
};
const KTEXT: u64 = 0xffff_ffff_8100_0000;
const KLEN: u64 = 0x100_0000;
const MODBASE: u64 = 0xffff_ffff_c000_0000;
const MODLEN: u64 = 0x1_0000;

/// Process `p` (pid 100 + p) maps `m` (0..2): start, length, pgoff, inode.
fn map_of(p: usize, m: usize) -> (u64, u64, u64, u64) {
    (
        0x40_0000 + (p as u64) * 0x10_0000 + (m as u64) * 0x1_0000,
        0x8000,
        (m as u64) * 0x1000,
        (p * 2 + m) as u64 + 1,
    )
}

fn file_cookie(ino: u64) -> Cookie {
    inode_cookie(dev_number(8, 1), ino, 0)
}

/// A stage that knows the kernel text and one module, and rings whose
/// first round announced every mapping.
fn setup(ncpu: u32) -> (SyncStage, Vec<SimRing>, Cookie, Cookie) {
    let mut stage = sim_stage(G);
    let mut k = KernelMaps::default();
    k.text = Some((KTEXT, KTEXT + KLEN));
    let ke = kernel_entry(KTEXT, None);
    let kcookie = ke.cookie;
    k.kernel = Some(ke);
    let module = KernelModule {
        name: "m".into(),
        base: MODBASE,
        size: MODLEN,
    };
    let me = module_entry(&module, None);
    let mcookie = me.cookie;
    k.set_modules(vec![LoadedModule {
        module,
        cookie: mcookie,
    }]);
    stage.set_kernel(k);
    stage.add_cookie(me);
    let mut rings: Vec<SimRing> = (0..ncpu).map(|c| SimRing::new(c, 1 << 18, G)).collect();
    let mut t = 1;
    for p in 0..3 {
        for m in 0..2 {
            let (start, len, pgoff, ino) = map_of(p, m);
            assert!(rings[0].push(&SimRecord::Mmap2 {
                pid: 100 + p as u32,
                tid: 100 + p as u32,
                addr: start,
                len,
                pgoff,
                ino,
                build_id: None,
                prot: 5,
                filename: format!("/bin/f{ino}"),
                time: t,
            }));
            t += 1;
        }
    }
    (stage, rings, kcookie, mcookie)
}

/// A frame as the test produces it.
#[derive(Debug, Clone, Copy)]
enum Spec {
    /// In map `m` of the sample's process, at `frac / 8` of its length.
    User(usize, u8),
    /// Kernel text.
    Kernel(u8),
    /// The module.
    Module(u8),
    /// A kernel address outside text and modules (resolved to the kernel
    /// image with a wrapped offset).
    KernelOther(u8),
    /// A user address in no mapping (the frame-pointer walk went wrong).
    Garbage(u8),
}

struct Model {
    kcookie: Cookie,
    mcookie: Cookie,
}

impl Model {
    /// The address and the frame it must resolve to (None: unknown).
    fn addr(&self, p: usize, s: Spec) -> (u64, Option<Frame>) {
        let frac = |f: u8, len: u64| u64::from(f % 8) * (len / 8) + u64::from(f / 8) * 4;
        match s {
            Spec::User(m, f) => {
                let (start, len, pgoff, ino) = map_of(p, m % 2);
                let off = frac(f, len);
                (
                    start + off,
                    Some(Frame {
                        cookie: file_cookie(ino),
                        offset: pgoff + off,
                        kernel: false,
                    }),
                )
            }
            Spec::Kernel(f) => {
                let off = frac(f, KLEN);
                (
                    KTEXT + off,
                    Some(Frame {
                        cookie: self.kcookie,
                        offset: off,
                        kernel: true,
                    }),
                )
            }
            Spec::Module(f) => {
                let off = frac(f, MODLEN);
                (
                    MODBASE + off,
                    Some(Frame {
                        cookie: self.mcookie,
                        offset: off,
                        kernel: true,
                    }),
                )
            }
            Spec::KernelOther(f) => {
                let a = 0xffff_ffff_a000_0000 + u64::from(f) * 16;
                (
                    a,
                    Some(Frame {
                        cookie: self.kcookie,
                        offset: a.wrapping_sub(KTEXT),
                        kernel: true,
                    }),
                )
            }
            Spec::Garbage(f) => (0x7ffc_0000_0000 + u64::from(f) * 8, None),
        }
    }

    /// Resolves one context's specs the way the stage must: an unknown
    /// frame is kept once and ends the context.
    fn frames(&self, p: usize, specs: &[Spec], kernel: bool, out: &mut Vec<Frame>) {
        for &s in specs {
            match self.addr(p, s).1 {
                Some(f) => out.push(f),
                None => {
                    // A user frame outside every mapping says so.
                    out.push(Frame {
                        cookie: COOKIE_UNKNOWN,
                        offset: if kernel {
                            profkit_eventlog::broken::NOT_SAID
                        } else {
                            profkit_eventlog::broken::OUTSIDE_MAPPINGS
                        },
                        kernel,
                    });
                    return;
                }
            }
        }
    }
}

#[derive(Debug, Clone)]
enum Step {
    Sample {
        cpu: u32,
        p: usize,
        th: u32,
        /// Kernel-mode sample: the leaf and `kstack` are kernel frames.
        kernel: bool,
        leaf: Spec,
        kstack: Vec<Spec>,
        ustack: Vec<Spec>,
    },
    Round,
    /// A round whose chunk the event buffer could not take.
    DroppedRound,
    /// `profctl reset`: a round into the old file, then a new file.
    Reset,
}

fn small() -> impl Strategy<Value = u8> {
    // Mostly a few hot places, so that stacks repeat.
    prop_oneof![4 => 0u8..3, 1 => any::<u8>()]
}

fn uspec() -> impl Strategy<Value = Spec> {
    prop_oneof![
        8 => (0usize..2, small()).prop_map(|(m, f)| Spec::User(m, f)),
        1 => small().prop_map(Spec::Garbage),
    ]
}

fn kspec() -> impl Strategy<Value = Spec> {
    prop_oneof![
        6 => small().prop_map(Spec::Kernel),
        2 => small().prop_map(Spec::Module),
        1 => small().prop_map(Spec::KernelOther),
    ]
}

fn step(ncpu: u32) -> impl Strategy<Value = Step> {
    let sample = (
        0..ncpu,
        0usize..3,
        0u32..2,
        prop::bool::weighted(0.3),
        (0usize..2, small()),
        small(),
        prop::collection::vec(kspec(), 0..5),
        prop::collection::vec(uspec(), 0..6),
    )
        .prop_map(
            |(cpu, p, th, kernel, (m, f), kf, kstack, ustack)| Step::Sample {
                cpu,
                p,
                th,
                kernel,
                leaf: if kernel {
                    Spec::Kernel(kf)
                } else {
                    Spec::User(m, f)
                },
                kstack: if kernel { kstack } else { Vec::new() },
                ustack,
            },
        );
    prop_oneof![
        30 => sample,
        2 => Just(Step::Round),
        1 => Just(Step::DroppedRound),
        1 => Just(Step::Reset),
    ]
}

/// A session file's worth of chunk payloads, and the samples (with their
/// resolved callers) it must hold, per CPU.
#[derive(Default)]
struct File {
    chunks: Vec<Vec<u8>>,
    want: BTreeMap<u32, Vec<(ExpandedSample, Vec<Frame>)>>,
    /// Stacks of samples in dropped chunks (their definitions are written
    /// again with the next chunk, whether or not it uses them).
    dropped: HashSet<Vec<Frame>>,
}

/// Decodes a file's chunks: samples per CPU with their frames, the stack
/// definitions (id, frames) in order, and the cookies defined.
struct Decoded {
    got: BTreeMap<u32, Vec<(ExpandedSample, Vec<Frame>)>>,
    defs: Vec<(u32, Vec<Frame>)>,
    cookies: HashSet<Cookie>,
    table: StackTable,
}

fn decode_file(chunks: &[Vec<u8>]) -> Decoded {
    let mut samples = Vec::new();
    let mut defs = Vec::new();
    let mut cookies = HashSet::new();
    let mut table = StackTable::new();
    for c in chunks {
        for_each_sample(
            c,
            |s| samples.push(*s),
            |m| {
                table.add(&m);
                match m {
                    Event::StackDef { id, frames } => defs.push((id, frames)),
                    Event::CookieDef(e) => {
                        cookies.insert(e.cookie);
                    }
                    _ => {}
                }
            },
        )
        .unwrap();
    }
    let mut got: BTreeMap<u32, Vec<_>> = BTreeMap::new();
    for s in samples {
        let frames = match s.stack {
            None => Vec::new(),
            Some(id) => table
                .get(id)
                .unwrap_or_else(|| panic!("stack {id} used but not defined in its file"))
                .to_vec(),
        };
        let mut key = s;
        key.stack = None;
        got.entry(s.cpu).or_default().push((key, frames));
    }
    Decoded {
        got,
        defs,
        cookies,
        table,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Every file (a new one after each reset) gives back exactly the
    /// samples it received with their callers resolved, defines every
    /// stack it uses exactly once (again after a dropped chunk or a reset),
    /// stores identical stacks once, and defines every cookie its samples
    /// and frames use.
    #[test]
    fn stacks_come_back_resolved_and_stored_once_per_file(
        ncpu in 1u32..4,
        steps in (1u32..4).prop_flat_map(|n| prop::collection::vec(step(n), 1..250)),
    ) {
        let (mut stage, mut rings, kcookie, mcookie) = setup(ncpu);
        let model = Model { kcookie, mcookie };
        let mut files = vec![File::default()];
        let mut pending: BTreeMap<u32, Vec<(ExpandedSample, Vec<Frame>)>> = BTreeMap::new();
        let mut t = 100u64;
        files[0].chunks.push(stage.round(&mut rings, t).bytes);
        let mut unknown = 0u64;
        for st in steps {
            t += 1;
            match st {
                Step::Sample { cpu, p, th, kernel, leaf, kstack, ustack } => {
                    let cpu = cpu % ncpu;
                    let pid = 100 + p as u32;
                    let tid = pid + th * 1000;
                    let (ip, leaf_frame) = model.addr(p, leaf);
                    let leaf_frame = leaf_frame.unwrap();
                    let mut chain = Vec::new();
                    let mut want = Vec::new();
                    if kernel {
                        chain.push(PERF_CONTEXT_KERNEL);
                        chain.push(ip);
                        chain.extend(kstack.iter().map(|&s| model.addr(p, s).0));
                        model.frames(p, &kstack, true, &mut want);
                    }
                    if !kernel || !ustack.is_empty() {
                        chain.push(PERF_CONTEXT_USER);
                        if !kernel {
                            chain.push(ip);
                        }
                        chain.extend(ustack.iter().map(|&s| model.addr(p, s).0));
                        model.frames(p, &ustack, false, &mut want);
                    }
                    unknown += u64::from(want.iter().any(|f| f.cookie == COOKIE_UNKNOWN));
                    let rec = SimRecord::Sample {
                        ip, pid, tid, time: t, kernel, period: 1, callchain: chain,
                    };
                    prop_assert!(rings[cpu as usize].push(&rec));
                    let s = ExpandedSample {
                        cpu, pid, tid, kernel,
                        cookie: leaf_frame.cookie,
                        offset: leaf_frame.offset,
                        stack: None, cgroup: 0,
                        // The record's time, in the stage's ticks.
                        time: Some(t / SAMPLE_TIME_UNIT_NS * SAMPLE_TIME_UNIT_NS),
                    };
                    pending.entry(cpu).or_default().push((s, want));
                }
                Step::Round => {
                    let c = stage.round(&mut rings, t);
                    let f = files.last_mut().unwrap();
                    f.chunks.push(c.bytes);
                    for (cpu, v) in std::mem::take(&mut pending) {
                        f.want.entry(cpu).or_default().extend(v);
                    }
                }
                Step::DroppedRound => {
                    let c = stage.round(&mut rings, t);
                    stage.chunk_dropped(c, LostKind::Overflow);
                    let f = files.last_mut().unwrap();
                    for (_, frames) in std::mem::take(&mut pending).into_values().flatten() {
                        f.dropped.insert(frames);
                    }
                }
                Step::Reset => {
                    let c = stage.round(&mut rings, t);
                    let f = files.last_mut().unwrap();
                    f.chunks.push(c.bytes);
                    for (cpu, v) in std::mem::take(&mut pending) {
                        f.want.entry(cpu).or_default().extend(v);
                    }
                    stage.reset();
                    files.push(File::default());
                }
            }
        }
        let c = stage.round(&mut rings, t + 1);
        let f = files.last_mut().unwrap();
        f.chunks.push(c.bytes);
        for (cpu, v) in std::mem::take(&mut pending) {
            f.want.entry(cpu).or_default().extend(v);
        }

        for (i, f) in files.iter().enumerate() {
            let d = decode_file(&f.chunks);
            prop_assert_eq!(&d.got, &f.want, "file {}", i);
            // Each id defined once in the file, and no two ids for the
            // same frames (no flush happens at the default bound).
            let mut ids = HashSet::new();
            let mut stacks = HashSet::new();
            for (id, frames) in &d.defs {
                prop_assert!(ids.insert(*id), "stack {} defined twice in file {}", id, i);
                prop_assert!(!frames.is_empty());
                prop_assert!(stacks.insert(frames.clone()), "same frames under two ids in file {}", i);
            }
            prop_assert_eq!(d.table.conflicts(), 0);
            // Every stack the file's samples use is defined; the others
            // defined are those of dropped chunks (their definitions move
            // to the next chunk).
            let used: HashSet<Vec<Frame>> = f.want.values().flatten().map(|(_, fr)| fr.clone()).filter(|fr| !fr.is_empty()).collect();
            prop_assert!(used.is_subset(&stacks), "file {}", i);
            for fr in stacks.difference(&used) {
                prop_assert!(f.dropped.contains(fr), "file {}: a stack no sample used: {:?}", i, fr);
            }
            // Cookies of samples and of frames are defined in the file.
            for (s, frames) in f.want.values().flatten() {
                prop_assert!(d.cookies.contains(&s.cookie), "cookie {:#x} of a sample", s.cookie);
                for fr in frames {
                    prop_assert!(d.cookies.contains(&fr.cookie), "cookie {:#x} of a frame", fr.cookie);
                }
            }
        }
        // Samples with an unknown frame are counted (over all files: the
        // count restarts at reset, so compare only without resets).
        if files.len() == 1 {
            let counted: u64 = stage.accounting().iter().map(|a| a.stacks_unknown).sum();
            prop_assert_eq!(counted, unknown);
        }
        prop_assert_eq!(stage.stack_stats().flushes, 0);
    }
}

fn user_sample(pid: u32, ip: u64, callers: &[u64], t: u64) -> SimRecord {
    let mut chain = vec![PERF_CONTEXT_USER, ip];
    chain.extend_from_slice(callers);
    SimRecord::Sample {
        ip,
        pid,
        tid: pid,
        time: t,
        kernel: false,
        period: 1,
        callchain: chain,
    }
}

fn stack_defs(bytes: &[u8]) -> Vec<u32> {
    let mut v = Vec::new();
    for_each_sample(
        bytes,
        |_| {},
        |m| {
            if let Event::StackDef { id, .. } = m {
                v.push(id);
            }
        },
    )
    .unwrap();
    v
}

#[test]
fn many_repeated_stacks_are_stored_once() {
    let (mut stage, mut rings, ..) = setup(2);
    let (a, ..) = map_of(0, 0);
    let (b, ..) = map_of(0, 1);
    let stacks: Vec<Vec<u64>> = (0..5u64)
        .map(|i| {
            (0..12)
                .map(|d| a + 0x100 * d + i * 4)
                .chain([b + 0x40])
                .collect()
        })
        .collect();
    let mut all = Vec::new();
    let mut t = 100;
    all.push(stage.round(&mut rings, t));
    for _ in 0..20 {
        for i in 0..500u64 {
            t += 1;
            let cpu = (i % 2) as usize;
            let s = user_sample(100, a + 0x2000 + (i % 16) * 4, &stacks[(i % 5) as usize], t);
            assert!(rings[cpu].push(&s));
        }
        all.push(stage.round(&mut rings, t));
    }
    let defs: Vec<u32> = all.iter().flat_map(|c| stack_defs(&c.bytes)).collect();
    assert_eq!(defs, [0, 1, 2, 3, 4], "five stacks, each defined once");
    assert_eq!(stage.stack_stats().stacks, 5);
    assert_eq!(stage.stack_stats().frames, 5 * 13);
    // After the first round, a sample costs a few bytes: the stack id is a
    // delta against the last stack in the same binary; a byte more is its
    // time.
    let later: usize = all[2..].iter().map(|c| c.bytes.len()).sum();
    let per_sample = later as f64 / (19.0 * 500.0);
    assert!(per_sample < 5.0, "{per_sample:.2} bytes per sample");
}

#[test]
fn a_stack_defined_in_a_dropped_chunk_is_defined_again() {
    let (mut stage, mut rings, ..) = setup(1);
    let (a, ..) = map_of(1, 0);
    let callers = [a + 0x10, a + 0x20];
    stage.round(&mut rings, 100);
    rings[0].push(&user_sample(101, a, &callers, 101));
    let dropped = stage.round(&mut rings, 102);
    assert_eq!(stack_defs(&dropped.bytes), [0]);
    stage.chunk_dropped(dropped, LostKind::Overflow);
    rings[0].push(&user_sample(101, a + 4, &callers, 103));
    let next = stage.round(&mut rings, 104);
    assert_eq!(
        stack_defs(&next.bytes),
        [0],
        "re-emitted with the next chunk"
    );
    let third = {
        rings[0].push(&user_sample(101, a + 8, &callers, 105));
        stage.round(&mut rings, 106)
    };
    assert!(stack_defs(&third.bytes).is_empty(), "and only once");
    // Even when the next chunk does not use the stack.
    rings[0].push(&user_sample(101, a, &[a + 0x30], 107));
    let dropped = stage.round(&mut rings, 108);
    stage.chunk_dropped(dropped, LostKind::Overflow);
    let empty = stage.round(&mut rings, 109);
    assert_eq!(stack_defs(&empty.bytes), [1]);
}

#[test]
fn reset_defines_stacks_again_in_the_new_file() {
    let (mut stage, mut rings, ..) = setup(1);
    let (a, ..) = map_of(2, 1);
    stage.round(&mut rings, 100);
    rings[0].push(&user_sample(102, a, &[a + 0x10], 101));
    assert_eq!(stack_defs(&stage.round(&mut rings, 102).bytes), [0]);
    stage.reset();
    rings[0].push(&user_sample(102, a, &[a + 0x10], 103));
    let c = stage.round(&mut rings, 104);
    assert_eq!(stack_defs(&c.bytes), [0], "same id, defined again");
    let mut cookies = HashMap::new();
    for_each_sample(
        &c.bytes,
        |_| {},
        |m| {
            if let Event::CookieDef(e) = m {
                cookies.insert(e.cookie, e.path);
            }
        },
    )
    .unwrap();
    let (_, _, _, ino) = map_of(2, 1);
    assert!(cookies.contains_key(&file_cookie(ino)));
}

#[test]
fn unknown_frames_use_the_reserved_cookie_defined_once() {
    let (mut stage, mut rings, ..) = setup(1);
    let (a, ..) = map_of(0, 0);
    stage.round(&mut rings, 100);
    for i in 0..3 {
        rings[0].push(&user_sample(
            100,
            a,
            &[a + 0x10, 0x7ffc_0000_0000 + i * 8, a + 0x20],
            101 + i,
        ));
    }
    let c = stage.round(&mut rings, 110);
    let mut defs = Vec::new();
    let mut stacks = Vec::new();
    for_each_sample(
        &c.bytes,
        |s| stacks.push(s.stack),
        |m| match m {
            Event::CookieDef(e) if e.cookie == COOKIE_UNKNOWN => defs.push(e),
            Event::StackDef { frames, .. } => assert_eq!(frames.len(), 2),
            _ => {}
        },
    )
    .unwrap();
    assert_eq!(defs.len(), 1);
    assert_eq!(defs[0].path, "[unknown]");
    assert_eq!(defs[0].kind, profkit_eventlog::CookieKind::Other);
    // Different garbage addresses, same stack: the unknown frame has offset 0.
    assert_eq!(stacks, [Some(0); 3]);
    assert_eq!(stage.accounting()[0].stacks_unknown, 3);
}

#[test]
fn the_stack_table_stays_within_its_bound() {
    let (mut stage, mut rings, ..) = setup(1);
    let (a, ..) = map_of(0, 0);
    stage.set_stack_table_limit(4096);
    stage.round(&mut rings, 100);
    let mut t = 100;
    let mut chunks = Vec::new();
    for round in 0..4 {
        for i in 0..200u64 {
            t += 1;
            // 200 distinct stacks of 8 frames, the same ones every round.
            let callers: Vec<u64> = (0..8).map(|d| a + 0x100 * d + i * 4).collect();
            rings[0].push(&user_sample(100, a, &callers, t));
        }
        chunks.push(stage.round(&mut rings, t).bytes);
        let s = stage.stack_stats();
        assert!(s.bytes <= s.limit, "round {round}: {s:?}");
    }
    let s = stage.stack_stats();
    assert!(s.flushes > 0 && s.ids > 200, "{s:?}");
    // Nothing lost: every sample's stack resolves in the file.
    let mut table = StackTable::new();
    let mut n = 0;
    for c in &chunks {
        for_each_sample(
            c,
            |_| n += 1,
            |m| {
                table.add(&m);
            },
        )
        .unwrap();
    }
    assert_eq!(n, 800);
    assert_eq!(table.len() as u64, s.ids);
    assert_eq!(table.conflicts(), 0);
}
