//! Unit tests of the sync stage that need its `/proc` seeding.

use super::*;
use crate::procfs::dev_number;
use crate::{KernelMaps, ProcPaths};
use profkit_eventlog::cookie::{anon_cookie, inode_cookie};
use profkit_eventlog::{Cookie, CookieEntry};
use profkit_perf::{SimRecord, SimRing};

/// A live-style stage (procfs on, flat samples) whose `/proc` and `/sys`
/// are under `root`.
fn stage_over(root: &std::path::Path) -> (Layout, SyncStage) {
    let layout = Layout {
        callchain: false,
        user_stack: 0,
        cgroup: false,
    };
    let stage = SyncStage::with_probe(
        SyncOptions::new(layout),
        crate::ProcfsProbe::new(ProcPaths {
            proc_root: root.join("proc"),
            sys_root: root.join("sys"),
        }),
    );
    (layout, stage)
}

/// One rule for anonymous code on both paths: a memfd, `/dev/zero`
/// and an unnamed mapping are the process's anonymous code (absolute
/// offsets) whether the stage met them in `/proc/PID/maps` or in an
/// MMAP2 record; a file is a file either way.
#[test]
fn proc_maps_and_mmap2_records_agree_on_anonymous_code() {
    let d = tempfile::tempdir().unwrap();
    let p42 = d.path().join("proc/42");
    std::fs::create_dir_all(&p42).unwrap();
    std::fs::write(p42.join("comm"), "jit\n").unwrap();
    std::fs::write(
        p42.join("maps"),
        "00400000-00410000 r-xp 00000000 08:01 5 /bin/app\n\
         7f0000000000-7f0000010000 r-xp 00000000 00:01 77 /memfd:jit (deleted)\n\
         7f1000000000-7f1000010000 rwxp 00000000 00:00 0 \n\
         7f2000000000-7f2000010000 r-xp 00000000 00:05 3 /dev/zero (deleted)\n",
    )
    .unwrap();
    let (layout, mut stage) = stage_over(d.path());
    stage.seed_pids(&[42]);
    let mut ring = SimRing::new(0, 1 << 16, layout);
    let mmap = |pid, addr, ino, path: &str| SimRecord::Mmap2 {
        pid,
        tid: pid,
        addr,
        len: 0x10000,
        pgoff: 0,
        ino,
        build_id: None,
        prot: 5,
        filename: path.into(),
        time: 1,
    };
    for r in [
        mmap(43, 0x40_0000, 5, "/bin/app"),
        mmap(43, 0x7f00_0000_0000, 77, "/memfd:jit (deleted)"),
        mmap(43, 0x7f10_0000_0000, 0, "//anon"),
        mmap(43, 0x7f20_0000_0000, 3, "/dev/zero (deleted)"),
    ] {
        assert!(ring.push(&r));
    }
    let addrs = [
        0x40_0010,
        0x7f00_0000_0020,
        0x7f10_0000_0030,
        0x7f20_0000_0040,
    ];
    for pid in [42, 43] {
        for ip in addrs {
            assert!(ring.push(&SimRecord::Sample {
                ip,
                pid,
                tid: pid,
                time: 2,
                kernel: false,
                period: 1,
                callchain: vec![],
            }));
        }
    }
    let chunk = stage.round(&mut [ring], 3);
    let mut got = Vec::new();
    profkit_eventlog::for_each_sample(
        &chunk.bytes,
        |s| got.push((s.pid, s.cookie, s.offset)),
        |_| {},
    )
    .unwrap();
    let want = |pid: u32| {
        vec![
            (pid, inode_cookie(dev_number(8, 1), 5, 0), 0x10),
            (pid, anon_cookie(pid), 0x7f00_0000_0020),
            (pid, anon_cookie(pid), 0x7f10_0000_0030),
            (pid, anon_cookie(pid), 0x7f20_0000_0040),
        ]
    };
    assert_eq!(got, [want(42), want(43)].concat());
}

/// Samples that resolve to nothing are counted, and the first ones kept as
/// examples (pid, address, why, name) so that their cause can be found.
#[test]
fn unattributed_samples_are_kept_as_examples_up_to_the_bound() {
    let layout = Layout {
        callchain: false,
        user_stack: 0,
        cgroup: false,
    };
    let mut stage = SyncStage::new(SyncOptions::new(layout));
    let mut ring = SimRing::new(0, 1 << 20, layout);
    assert!(ring.push(&SimRecord::Comm {
        pid: 7,
        tid: 7,
        comm: "sh".into(),
        exec: false,
        time: 1,
    }));
    for i in 0..40u64 {
        assert!(ring.push(&SimRecord::Sample {
            ip: 0x5000 + i,
            pid: if i == 0 { 8 } else { 7 },
            tid: if i == 0 { 8 } else { 7 },
            time: 2 + i,
            kernel: false,
            period: 1,
            callchain: vec![],
        }));
    }
    stage.round(std::slice::from_mut(&mut ring), 100);
    stage.finish_final_round();
    let ex = stage.unattributed_examples();
    assert_eq!(ex.len(), crate::UNATTRIBUTED_EXAMPLES);
    assert_eq!(
        (ex[0].pid, ex[0].ip, ex[0].reason, ex[0].comm.as_deref()),
        (8, 0x5000, Unresolved::NoTask, None)
    );
    assert_eq!(
        (ex[1].pid, ex[1].ip, ex[1].reason, ex[1].comm.as_deref()),
        (7, 0x5001, Unresolved::NoMapping, Some("sh"))
    );
    let a = stage.accounting();
    assert_eq!(a[0].lost_no_mapping + a[0].lost_no_task, 40);
}

/// Samples carry their cgroup: a `CgroupDef` once per cgroup (from the
/// seeded hierarchy, or a `PERF_RECORD_CGROUP`), a `CgroupSwitch` only
/// when it changes; and a session without cgroups has no cgroup byte.
#[test]
fn samples_carry_their_cgroup_and_each_is_defined_once() {
    let d = tempfile::tempdir().unwrap();
    let mount = d.path().join("cg");
    std::fs::create_dir_all(mount.join("a")).unwrap();
    let a = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(mount.join("a")).unwrap());
    let run = |cgroup: bool| {
        let layout = Layout {
            callchain: false,
            user_stack: 0,
            cgroup,
        };
        let mut stage = SyncStage::new(SyncOptions::new(layout));
        stage.seed_cgroups(Some(mount.clone()));
        let mut k = KernelMaps::default();
        let e = k.set_text(0xffff_ffff_8100_0000, 0xffff_ffff_8200_0000, None);
        stage.add_cookie(e);
        stage.set_kernel(k);
        let mut ring = SimRing::new(0, 1 << 16, layout);
        assert!(ring.push(&SimRecord::Cgroup {
            id: 99,
            path: "/b".into(),
            time: 1,
        }));
        for (i, cg) in [a, a, 99, 99, a].into_iter().enumerate() {
            assert!(ring.push(&SimRecord::CgroupSample {
                sample: Box::new(SimRecord::Sample {
                    ip: 0xffff_ffff_8100_0010 + i as u64,
                    pid: 7 + i as u32,
                    tid: 7 + i as u32,
                    time: 2,
                    kernel: true,
                    period: 1,
                    callchain: vec![],
                }),
                cgroup: cg,
            }));
        }
        let chunk = stage.round(&mut [ring], 3);
        let mut got = Vec::new();
        let mut defs = Vec::new();
        profkit_eventlog::for_each_sample(
            &chunk.bytes,
            |s| got.push(s.cgroup),
            |m| {
                if let Event::CgroupDef { id, path } = m {
                    defs.push((id, path))
                }
            },
        )
        .unwrap();
        (got, defs, chunk.bytes)
    };
    let (got, defs, bytes) = run(true);
    assert_eq!(got, [a, a, 99, 99, a]);
    assert_eq!(defs, [(a, "/a".to_string()), (99, "/b".to_string())]);
    let switches = bytes
        .iter()
        .filter(|&&b| b == profkit_eventlog::tag::CGROUP_SWITCH)
        .count();
    assert!(switches >= 3, "{switches}");
    let (got, defs, plain) = run(false);
    assert_eq!(got, [0; 5]);
    assert!(defs.is_empty());
    assert!(plain.len() < bytes.len());
}

/// Rings are drained one after the other: `sh` exec'ing `node` on another
/// CPU may be read after node's exec. The newest name wins, and a task in
/// another pid namespace (fake `/proc`) carries its ids there.
#[test]
fn the_newest_exec_names_a_task_and_container_tasks_carry_their_ns_ids() {
    let d = tempfile::tempdir().unwrap();
    let proc = d.path().join("proc");
    for (dir, ns) in [("self", "pid:[1]"), ("50", "pid:[9]")] {
        std::fs::create_dir_all(proc.join(dir).join("ns")).unwrap();
        std::os::unix::fs::symlink(ns, proc.join(dir).join("ns/pid")).unwrap();
    }
    std::fs::create_dir_all(proc.join("50/task/50")).unwrap();
    std::fs::write(
        proc.join("50/task/50/status"),
        "NStgid:\t50\t1\nNSpid:\t50\t1\n",
    )
    .unwrap();
    let layout = Layout {
        callchain: false,
        user_stack: 0,
        cgroup: false,
    };
    let mut stage = SyncStage::with_probe(
        SyncOptions::new(layout),
        crate::ProcfsProbe::new(ProcPaths {
            proc_root: proc.clone(),
            sys_root: d.path().join("sys"),
        }),
    );
    let exec = |name: &str, time| SimRecord::Comm {
        pid: 50,
        tid: 50,
        comm: name.into(),
        exec: true,
        time,
    };
    let mut cpu0 = SimRing::new(0, 1 << 16, layout);
    let mut cpu1 = SimRing::new(1, 1 << 16, layout);
    assert!(cpu0.push(&exec("node", 20)));
    assert!(cpu1.push(&exec("sh", 10)));
    let chunk = stage.round(&mut [cpu0, cpu1], 30);
    let mut comms = Vec::new();
    profkit_eventlog::decode_events(&chunk.bytes, |e| {
        if let Event::Comm { comm, ns, .. } = e {
            comms.push((comm, ns));
        }
    })
    .unwrap();
    assert_eq!(
        comms,
        [(
            "node".to_owned(),
            Some(profkit_eventlog::NsTask { pid: 1, tid: 1 })
        )]
    );
}

/// A program that execs on CPU 1 and maps its code on CPU 0: CPU 0's ring
/// is drained first, so the mapping is read before the exec. Samples after
/// both resolve (before the fix, the exec retired the new mapping with the
/// old program: every later sample was "no mapping").
#[test]
fn a_mapping_read_before_its_exec_still_resolves_later_samples() {
    let layout = Layout {
        callchain: false,
        user_stack: 0,
        cgroup: false,
    };
    let mut stage = SyncStage::new(SyncOptions::new(layout));
    let mut cpu0 = SimRing::new(0, 1 << 16, layout);
    let mut cpu1 = SimRing::new(1, 1 << 16, layout);
    assert!(cpu0.push(&SimRecord::Mmap2 {
        pid: 50,
        tid: 50,
        addr: 0x7f00_0000_0000,
        len: 0x10000,
        pgoff: 0,
        ino: 0,
        build_id: None,
        prot: 7,
        filename: "//anon".into(),
        time: 20,
    }));
    assert!(cpu1.push(&SimRecord::Comm {
        pid: 50,
        tid: 50,
        comm: "node".into(),
        exec: true,
        time: 10,
    }));
    assert!(cpu1.push(&SimRecord::Sample {
        ip: 0x7f00_0000_0040,
        pid: 50,
        tid: 50,
        time: 30,
        kernel: false,
        period: 1,
        callchain: vec![],
    }));
    let chunk = stage.round(&mut [cpu0, cpu1], 40);
    stage.finish_final_round();
    let mut got = Vec::new();
    profkit_eventlog::for_each_sample(&chunk.bytes, |s| got.push((s.pid, s.offset)), |_| {})
        .unwrap();
    assert_eq!(got, [(50, 0x7f00_0000_0040)]);
    assert_eq!(stage.accounting()[0].lost_no_mapping, 0);
}

/// A fake `/proc` where processes 50 and 51 each map, at 0x400000, a file
/// of their own (`map_files`), both claiming build-id `BID`: root's
/// `/usr/bin/md5sum` (4 KiB) and a user's forgery (one byte more).
fn claimed_build_id_round(first: u32) -> (Vec<Event>, Vec<(u32, Cookie)>, SyncStage) {
    const BID: [u8; 20] = [0x5a; 20];
    let d = tempfile::tempdir().unwrap();
    for (pid, len) in [(50u32, 4096usize), (51, 4097)] {
        let mf = d.path().join(format!("proc/{pid}/map_files"));
        std::fs::create_dir_all(&mf).unwrap();
        std::fs::write(mf.join("400000-410000"), vec![pid as u8; len]).unwrap();
        std::fs::write(d.path().join(format!("proc/{pid}/comm")), "x\n").unwrap();
        std::fs::write(d.path().join(format!("proc/{pid}/maps")), "").unwrap();
    }
    let (layout, mut stage) = stage_over(d.path());
    let mut ring = SimRing::new(0, 1 << 16, layout);
    let second = if first == 50 { 51 } else { 50 };
    for pid in [first, second] {
        let path = if pid == 50 {
            "/usr/bin/md5sum"
        } else {
            "/tmp/forged"
        };
        assert!(ring.push(&SimRecord::Mmap2 {
            pid,
            tid: pid,
            addr: 0x40_0000,
            len: 0x10000,
            pgoff: 0,
            ino: 0,
            build_id: Some(BID.to_vec()),
            prot: 5,
            filename: path.into(),
            time: 1,
        }));
    }
    for pid in [50, 51, 50, 51] {
        assert!(ring.push(&SimRecord::Sample {
            ip: 0x40_0100,
            pid,
            tid: pid,
            time: 2,
            kernel: false,
            period: 1,
            callchain: vec![],
        }));
    }
    let chunk = stage.round(&mut [ring], 3);
    let mut events = Vec::new();
    profkit_eventlog::decode_events(&chunk.bytes, |e| events.push(e)).unwrap();
    let mut samples = Vec::new();
    profkit_eventlog::for_each_sample(&chunk.bytes, |s| samples.push((s.pid, s.cookie)), |_| {})
        .unwrap();
    (events, samples, stage)
}

/// Two files claiming one build-id are two cookies, each defined with its
/// own file, and each process's samples go to its own file's cookie;
/// whichever comes first holds the plain cookie. (Before, both were
/// `build_id_cookie(BID)`, defined once with the first file's path.)
#[test]
fn two_files_claiming_one_build_id_are_two_cookies_either_order() {
    use profkit_eventlog::{cookie::build_id_cookie, FileCheck};
    for first in [50u32, 51] {
        let (events, samples, stage) = claimed_build_id_round(first);
        let defs: Vec<CookieEntry> = events
            .into_iter()
            .filter_map(|e| match e {
                Event::CookieDef(e) if e.kind == profkit_eventlog::CookieKind::User => Some(e),
                _ => None,
            })
            .collect();
        assert_eq!(defs.len(), 2, "{defs:?}");
        let def = |path: &str| defs.iter().find(|e| e.path == path).unwrap().clone();
        let (root, user) = (def("/usr/bin/md5sum"), def("/tmp/forged"));
        assert_ne!(root.cookie, user.cookie);
        let size = |e: &CookieEntry| match e.file {
            FileCheck::File(i) => i.size,
            other => panic!("{other:?}"),
        };
        assert_eq!((size(&root), size(&user)), (4096, 4097));
        let plain = build_id_cookie(&[0x5a; 20]);
        let holder = if first == 50 { &root } else { &user };
        assert_eq!(holder.cookie, plain, "the first file identified holds it");
        assert_eq!(
            samples,
            [
                (50, root.cookie),
                (51, user.cookie),
                (50, root.cookie),
                (51, user.cookie)
            ]
        );
        // Unwind tables are read and cached per cookie, from the file its
        // entry names (device and inode checked): per verified file.
        let at = |e: &CookieEntry, pid: u32| {
            let m = stage
                .processes()
                .get(pid)
                .unwrap()
                .map_at(0x40_0100, 2)
                .unwrap();
            assert_eq!(m.cookie, e.cookie);
            match crate::unwind::source_of(e, m, pid, None) {
                Some(crate::unwind::CfiSource::File { binary, .. }) => binary.identity,
                _ => panic!("a file"),
            }
        };
        let ident = |e: &CookieEntry| e.file.identity().map(|i| (i.dev, i.inode));
        assert_eq!(at(&root, 50), ident(&root));
        assert_eq!(at(&user, 51), ident(&user));
        assert_ne!(ident(&root), ident(&user));
    }
}

/// A claim whose file cannot be identified (the process gone, the path
/// not on the host) never takes the plain cookie.
#[test]
fn an_unidentified_claim_is_not_the_build_ids_cookie() {
    use profkit_eventlog::{cookie::build_id_cookie, FileCheck};
    let d = tempfile::tempdir().unwrap();
    let (_, mut stage) = stage_over(d.path());
    let c = stage.res.file_cookie(
        "/nonexistent/x",
        Some(&[7; 20]),
        0,
        0,
        0,
        Some((9, 0x1000, 0x2000)),
    );
    assert_ne!(c, build_id_cookie(&[7; 20]));
    assert_eq!(stage.res.known[&c].file, FileCheck::Unverified);
}

/// The gdb-recorded stack of `testdata/unwind` (an -O2 binary without
/// frame pointers): a stage that knows the binary's mapping in pid 77,
/// and the sample carrying that stack.
fn recorded_dwarf_stage() -> (SyncStage, SimRing, SimRecord) {
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
    let layout = Layout {
        callchain: true,
        user_stack: 512,
        cgroup: false,
    };
    let bin = dir.join("callgraph-O2-nofp");
    let mut stage = SyncStage::new(SyncOptions::new(layout));
    let mut ring = SimRing::new(0, 4 << 20, layout);
    assert!(ring.push(&SimRecord::Mmap2 {
        pid: 77,
        tid: 77,
        addr: m[0],
        len: m[1] - m[0],
        pgoff: m[2],
        ino: 0,
        build_id: crate::binfile::read_build_id_at(&bin),
        prot: 5,
        filename: bin.to_str().unwrap().into(),
        time: 1,
    }));
    stage.round(std::slice::from_mut(&mut ring), 2);
    let sample = SimRecord::UserSample {
        ip: r[0],
        pid: 77,
        tid: 77,
        time: 3,
        period: 1,
        callchain: vec![],
        bp: r[2],
        sp: r[1],
        stack,
    };
    (stage, ring, sample)
}

/// Issue 25.1: the work of unwinding is bounded per round and per binary,
/// whatever a binary's unwind information costs. Frames are charged by a
/// cost model here (no timing in tests): past the round's budget the rest
/// of the round's stacks are stepped by frame pointer, counted, and the
/// next round unwinds again; a binary whose frames cost too much on
/// average is demoted for the session, counted and named.
#[test]
fn unwinding_is_bounded_per_round_and_a_costly_binary_is_demoted() {
    use crate::unwind::{frame_cost_limit, DEMOTE_AFTER, WINDOW_FRAMES};
    let round = |stage: &mut SyncStage, ring: &mut SimRing, sample: &SimRecord, n: usize| {
        for _ in 0..n {
            assert!(ring.push(sample));
        }
        stage.round(std::slice::from_mut(ring), 4).samples()
    };

    // Cheap frames (half the demotion cost), a budget of 10 of them: the
    // clock is looked at every WINDOW_FRAMES frames (or WINDOW_MISSES
    // rule-cache misses: the first stack's 4).
    let (mut stage, mut ring, sample) = recorded_dwarf_stage();
    let u = stage.unwinder_mut();
    u.set_cost_model(|_| frame_cost_limit() / 2);
    u.set_round_budget(frame_cost_limit() / 2 * 10);
    assert_eq!(round(&mut stage, &mut ring, &sample, 1), 1);
    let one = stage.unwind_stats();
    assert_eq!(one.stacks_over_budget, 0);
    // The stack unwinds through tick, c, b and main, into libc (not
    // mapped here): 4 frames stepped by DWARF.
    assert_eq!(one.frames, 4, "{one:?}");
    assert_eq!(round(&mut stage, &mut ring, &sample, 20), 20);
    let s = stage.unwind_stats();
    // The window ends with the last frame of stack 8: that stack's rest
    // and the 12 after it are stepped by frame pointer.
    let dwarf_stacks = u64::from(WINDOW_FRAMES) / 4;
    assert_eq!(s.stacks_over_budget, 20 - dwarf_stacks + 1, "{s:?}");
    // The next round has its budget again.
    assert_eq!(round(&mut stage, &mut ring, &sample, 20), 20);
    let t = stage.unwind_stats();
    assert_eq!(t.stacks_over_budget, 2 * s.stacks_over_budget, "{t:?}");
    assert_eq!(t.stacks, 41);
    assert_eq!((t.demoted, t.binaries), (0, 1));
    assert!(stage.unwind_demotions().is_empty());

    // Frames costing twice the demotion cost: the first window (the first
    // stack's 4 misses) makes the binary suspect, its frames are timed from then on, and it is
    // demoted once DEMOTE_AFTER is spent, within the round's budget; its
    // frames cost nothing after.
    let (mut stage, mut ring, sample) = recorded_dwarf_stage();
    stage
        .unwinder_mut()
        .set_cost_model(|_| frame_cost_limit() * 2);
    let timed_to_demote =
        (DEMOTE_AFTER.as_nanos() / (frame_cost_limit() * 2).as_nanos()) as u64 + 1;
    let n = 300; // more stacks than it takes (at most 4 + 1001 frames)
    assert_eq!(round(&mut stage, &mut ring, &sample, n), n as u64);
    let s = stage.unwind_stats();
    assert_eq!((s.demoted, s.stacks_over_budget), (1, 0), "{s:?}");
    let named = stage.unwind_demotions();
    assert_eq!(named.len(), 1);
    let each = (frame_cost_limit() * 2).as_micros();
    assert!(
        named[0].contains(&format!(
            "testdata/unwind/callgraph-O2-nofp: unwinding its frames took 20 ms, {each} µs each"
        )),
        "{named:?}"
    );
    assert!(
        named[0].contains(&format!("over {timed_to_demote} frames")),
        "{named:?}"
    );
    // Demoted for good: later rounds neither demote again nor spend.
    assert_eq!(round(&mut stage, &mut ring, &sample, n), n as u64);
    let t = stage.unwind_stats();
    assert_eq!((t.demoted, t.stacks_over_budget), (1, 0), "{t:?}");
    assert_eq!(t.stacks, 2 * n as u64);
}

/// A child renamed right after `fork` (`prctl(PR_SET_NAME)`, no exec):
/// its COMM may sit in one CPU's ring and its FORK in another's, read
/// after it. Its name follows time whichever ring is read first: every
/// name written for it, in this round and the next, is its own.
#[test]
fn a_child_renamed_after_fork_keeps_its_name_whatever_the_ring_order() {
    let layout = Layout {
        callchain: false,
        user_stack: 0,
        cgroup: false,
    };
    let parent = SimRecord::Comm {
        pid: 40,
        tid: 40,
        comm: "forker".into(),
        exec: true,
        time: 1,
    };
    let fork = SimRecord::Fork {
        pid: 41,
        ppid: 40,
        tid: 41,
        ptid: 40,
        time: 5,
    };
    let rename = SimRecord::Comm {
        pid: 41,
        tid: 41,
        comm: "child".into(),
        exec: false,
        time: 6,
    };
    let sample = |pid, time| SimRecord::Sample {
        ip: 0x1000,
        pid,
        tid: pid,
        time,
        kernel: false,
        period: 1,
        callchain: Vec::new(),
    };
    for fork_first in [true, false] {
        let d = tempfile::tempdir().unwrap();
        let (_, mut stage) = stage_over(d.path());
        let mut forks = SimRing::new(0, 1 << 16, layout);
        let mut child = SimRing::new(1, 1 << 16, layout);
        let code = SimRecord::Mmap2 {
            pid: 40,
            tid: 40,
            addr: 0x1000,
            len: 0x1000,
            pgoff: 0,
            ino: 9,
            build_id: None,
            prot: 5,
            filename: "/bin/forker".into(),
            time: 2,
        };
        for r in [&parent, &code, &fork] {
            assert!(forks.push(r));
        }
        for r in [&rename, &sample(41, 7)] {
            assert!(child.push(r));
        }
        let mut rings = if fork_first {
            [forks, child]
        } else {
            [child, forks]
        };
        let mut names = Vec::new();
        for (round, end) in [(0, 10), (1, 20)] {
            if round == 1 {
                assert!(rings[0].push(&sample(40, 14)));
                assert!(rings[0].push(&sample(41, 15)));
            }
            let chunk = stage.round(&mut rings, end);
            profkit_eventlog::decode_events(&chunk.bytes, |e| {
                if let Event::Comm { tid: 41, comm, .. } = e {
                    names.push(comm);
                }
            })
            .unwrap();
        }
        assert!(!names.is_empty(), "fork first: {fork_first}");
        assert!(
            names.iter().all(|n| n == "child"),
            "fork first: {fork_first}: {names:?}"
        );
    }
}

/// 256 CPUs of which 4 hold records: the round's chunk has a CPU-switch
/// marker for those 4 only, each before its CPU's events, and a round of
/// empty rings writes nothing at all; every CPU is in the accounting.
#[test]
fn idle_cpus_write_nothing_in_a_round() {
    let layout = Layout::default();
    let mut stage = SyncStage::new(SyncOptions::new(layout));
    let mut rings: Vec<SimRing> = (0..256).map(|c| SimRing::new(c, 4096, layout)).collect();
    let busy = [0u32, 64, 128, 255];
    rings[0].push(&SimRecord::Mmap2 {
        pid: 10,
        tid: 10,
        addr: 0x400000,
        len: 0x1000,
        pgoff: 0,
        ino: 5,
        build_id: None,
        prot: 5,
        filename: "/bin/x".into(),
        time: 1,
    });
    for (i, &c) in busy.iter().enumerate() {
        rings[c as usize].push(&SimRecord::Sample {
            ip: 0x400100 + i as u64,
            pid: 10,
            tid: 10,
            time: 2 + i as u64,
            kernel: false,
            period: 1,
            callchain: vec![],
        });
    }
    let chunk = stage.round(&mut rings, 10);
    assert_eq!(chunk.samples(), 4);
    let mut switches = Vec::new();
    let mut cur = None;
    let mut samples_on = Vec::new();
    profkit_eventlog::decode_events(&chunk.bytes, |e| match e {
        Event::CpuSwitch { cpu } => {
            switches.push(cpu);
            cur = Some(cpu);
        }
        Event::Sample { .. } => samples_on.push(cur),
        _ => {}
    })
    .unwrap();
    assert_eq!(switches, busy);
    assert_eq!(samples_on, busy.map(Some));
    assert_eq!(stage.accounting().len(), 256);
    // Nothing to read anywhere: nothing written.
    let chunk = stage.round(&mut rings, 20);
    assert!(chunk.bytes.is_empty(), "{:?}", chunk.bytes);
    assert_eq!(stage.accounting().len(), 256);
}
