//! The stage with JIT dumps: samples in a dump-owning process's
//! anonymous code under the dump's cookie, functions written when hit
//! (late ones when the runtime writes them), generations, bounds.

use super::super::*;
use profkit_eventlog::cookie::{anon_cookie, jit_cookie};
use profkit_eventlog::{decode_events, Cookie, CookieEntry, CookieKind, JitCode};
use profkit_jitdump::DumpWriter;
use profkit_perf::{SimRecord, SimRing};
use std::path::Path;

const PID: u32 = 100;
/// The device SimRing's MMAP2 records give (8:1).
const DEV: u64 = 8 << 32 | 1;
const CODE: u64 = 0x7f00_0000_0000;
/// Where the recording says the dump was: nowhere on this machine.
const DUMP: &str = "/nonexistent-profkit/jit-100.dump";

fn layout() -> Layout {
    Layout {
        callchain: false,
        user_stack: 0,
        cgroup: false,
    }
}

/// A stage that finds jitdumps in `dir` (as an import does).
fn stage_in(dir: &Path) -> SyncStage {
    SyncStage::with_probe(
        SyncOptions::new(layout()),
        crate::ImportProbe::new(vec![dir.to_path_buf()]),
    )
}

fn mmap(addr: u64, ino: u64, path: &str) -> SimRecord {
    SimRecord::Mmap2 {
        pid: PID,
        tid: PID,
        addr,
        len: 0x10000,
        pgoff: 0,
        ino,
        build_id: None,
        prot: 5,
        filename: path.into(),
        time: 1,
    }
}

fn sample(ip: u64, time: u64) -> SimRecord {
    SimRecord::Sample {
        ip,
        pid: PID,
        tid: PID,
        time,
        kernel: false,
        period: 1,
        callchain: vec![],
    }
}

/// Samples (cookie, offset) and JIT markers of a chunk.
fn read(chunk: &Chunk) -> (Vec<(Cookie, u64)>, Vec<JitCode>, Vec<CookieEntry>) {
    let (mut samples, mut code, mut defs) = (Vec::new(), Vec::new(), Vec::new());
    profkit_eventlog::for_each_sample(&chunk.bytes, |s| samples.push((s.cookie, s.offset)), |_| {})
        .unwrap();
    decode_events(&chunk.bytes, |e| match e {
        Event::JitCode(c) => code.push(c),
        Event::CookieDef(d) => defs.push(d),
        _ => {}
    })
    .unwrap();
    (samples, code, defs)
}

fn write(dir: &Path, w: &DumpWriter) {
    std::fs::write(dir.join("jit-100.dump"), w.bytes()).unwrap();
}

#[test]
fn jit_samples_are_named_by_the_dump_and_late_functions_come_later() {
    let d = tempfile::tempdir().unwrap();
    let mut w = DumpWriter::new(PID, 1);
    w.code_load(5, PID, PID, CODE + 0x10, &[0x90; 0x20], 1, "py::early:a.py");
    write(d.path(), &w);
    let mut stage = stage_in(d.path());
    let mut ring = SimRing::new(0, 1 << 16, layout());
    assert!(ring.push(&mmap(0x1000_0000, 9, DUMP)));
    assert!(ring.push(&mmap(CODE, 0, "//anon")));
    for (ip, t) in [(CODE + 0x18, 10), (CODE + 0x18, 11), (CODE + 0x108, 12)] {
        assert!(ring.push(&sample(ip, t)));
    }
    let c1 = stage.round(std::slice::from_mut(&mut ring), 20);
    let gen0 = jit_cookie(PID, DEV, 9, 0);
    let (samples, code, defs) = read(&c1);
    assert_eq!(
        samples,
        [
            (gen0, CODE + 0x18),
            (gen0, CODE + 0x18),
            (gen0, CODE + 0x108)
        ],
        "every sample in the anonymous code goes to the dump's cookie"
    );
    assert_eq!(code.len(), 1, "the described function hit, once");
    assert_eq!(
        (code[0].name.as_str(), code[0].addr),
        ("py::early:a.py", CODE + 0x10)
    );
    assert_eq!(code[0].code.as_deref(), Some(&[0x90u8; 0x20][..]));
    let def = defs
        .iter()
        .find(|e| e.cookie == gen0)
        .expect("its definition");
    assert_eq!((&def.kind, def.path.as_str()), (&CookieKind::Jit, DUMP));
    assert!(
        !defs
            .iter()
            .any(|e| e.path == DUMP && e.kind != CookieKind::Jit),
        "the dump file is not a binary of the process"
    );

    // The runtime flushes the rest: the function hit in round 1 is
    // written in round 2; one never hit is not written.
    w.code_load(
        13,
        PID,
        PID,
        CODE + 0x100,
        &[0xc3; 0x10],
        2,
        "py::late:a.py",
    );
    w.code_load(
        14,
        PID,
        PID,
        CODE + 0x200,
        &[0xc3; 0x10],
        3,
        "py::never:a.py",
    );
    write(d.path(), &w);
    let c2 = stage.round(std::slice::from_mut(&mut ring), 30);
    let (samples, code, _) = read(&c2);
    assert!(samples.is_empty());
    assert_eq!(code.len(), 1);
    assert_eq!(code[0].name, "py::late:a.py");
    assert_eq!(code[0].cookie, gen0);
    let st = stage.jit_stats();
    assert_eq!((st.dumps, st.functions, st.written), (1, 3, 2), "{st:?}");
    assert_eq!(st.undescribed, 0);
}

#[test]
fn code_put_where_code_was_starts_a_generation_and_samples_go_by_their_time() {
    let d = tempfile::tempdir().unwrap();
    let mut w = DumpWriter::new(PID, 1);
    w.code_load(5, PID, PID, CODE, &[0x90; 0x40], 1, "first");
    w.code_load(6, PID, PID, CODE + 0x100, &[0x90; 0x40], 3, "elsewhere");
    w.code_load(50, PID, PID, CODE + 0x20, &[0x90; 0x40], 2, "second");
    write(d.path(), &w);
    let mut stage = stage_in(d.path());
    let mut ring = SimRing::new(0, 1 << 16, layout());
    assert!(ring.push(&mmap(0x1000_0000, 9, DUMP)));
    assert!(ring.push(&mmap(CODE, 0, "//anon")));
    // The dump is read at the round's end: these wait for it.
    stage.round(std::slice::from_mut(&mut ring), 8);
    for (ip, t) in [(CODE + 0x30, 40), (CODE + 0x30, 60), (CODE + 0x110, 60)] {
        assert!(ring.push(&sample(ip, t)));
    }
    let c = stage.round(std::slice::from_mut(&mut ring), 100);
    let (gen0, gen1) = (jit_cookie(PID, DEV, 9, 0), jit_cookie(PID, DEV, 9, 1));
    let (samples, code, defs) = read(&c);
    // Code the new generation did not replace is still the older one's.
    assert_eq!(
        samples,
        [
            (gen0, CODE + 0x30),
            (gen1, CODE + 0x30),
            (gen0, CODE + 0x110)
        ]
    );
    let names: Vec<_> = code.iter().map(|c| (c.cookie, c.name.as_str())).collect();
    assert_eq!(
        names,
        [(gen0, "first"), (gen1, "second"), (gen0, "elsewhere")]
    );
    assert!(defs.iter().any(|e| e.cookie == gen1 && e.base == 1));
    assert_eq!(stage.jit_stats().generations, 1);
}

#[test]
fn a_process_without_a_dump_keeps_its_anonymous_cookie_and_a_bad_dump_ends_reading() {
    let d = tempfile::tempdir().unwrap();
    let mut w = DumpWriter::new(PID, 1);
    w.code_load(5, PID, PID, CODE, &[0x90; 0x40], 1, "ok");
    // A record claiming 3 GiB: reading ends here, what came before stays.
    w.raw(&[0, 0, 0, 0, 0, 0, 0, 0xc0, 0, 0, 0, 0, 0, 0, 0, 0]);
    write(d.path(), &w);
    let mut stage = stage_in(d.path());
    let mut ring = SimRing::new(0, 1 << 16, layout());
    assert!(ring.push(&mmap(CODE, 0, "//anon")));
    assert!(ring.push(&sample(CODE + 8, 3)));
    let (samples, ..) = read(&stage.round(std::slice::from_mut(&mut ring), 4));
    assert_eq!(samples, [(anon_cookie(PID), CODE + 8)]);
    assert!(ring.push(&mmap(0x1000_0000, 9, DUMP)));
    assert!(ring.push(&sample(CODE + 8, 5)));
    stage.round(std::slice::from_mut(&mut ring), 6);
    assert!(ring.push(&sample(CODE + 8, 7)));
    let (samples, code, _) = read(&stage.round(std::slice::from_mut(&mut ring), 8));
    assert_eq!(samples, [(jit_cookie(PID, DEV, 9, 0), CODE + 8)]);
    assert!(
        code.is_empty(),
        "written in the round before, with the first hit"
    );
    let st = stage.jit_stats();
    assert_eq!((st.functions, st.malformed), (1, 1), "{st:?}");
}

#[test]
fn a_dump_that_cannot_be_opened_is_counted_and_its_samples_stay_anonymous_offsets() {
    let d = tempfile::tempdir().unwrap();
    let mut stage = stage_in(d.path());
    let mut ring = SimRing::new(0, 1 << 16, layout());
    assert!(ring.push(&mmap(0x1000_0000, 9, DUMP)));
    assert!(ring.push(&mmap(CODE, 0, "//anon")));
    assert!(ring.push(&sample(CODE + 8, 3)));
    let c = stage.round(std::slice::from_mut(&mut ring), 4);
    let (samples, code, _) = read(&c);
    // Its cookie is the dump's: a report names it by the perf map, if any.
    assert_eq!(samples, [(jit_cookie(PID, DEV, 9, 0), CODE + 8)]);
    assert!(code.is_empty());
    assert_eq!(stage.jit_stats().unopened, 1);
}

/// A runtime that writes late (buffered) that code replaced code at an
/// address: samples already written under the old code are renamed to
/// the new when all of them came after it (a report names a cookie's
/// address by its later-timed marker), and keep the old name when most
/// came before.
#[test]
fn code_described_late_over_hit_code_renames_the_samples_that_came_after_it() {
    for (times, new_at, renamed) in [(&[60u64, 61][..], 50u64, true), (&[40, 60][..], 55, false)] {
        let d = tempfile::tempdir().unwrap();
        let mut w = DumpWriter::new(PID, 1);
        w.code_load(5, PID, PID, CODE, &[0x90; 0x40], 1, "old");
        write(d.path(), &w);
        let mut stage = stage_in(d.path());
        let mut ring = SimRing::new(0, 1 << 16, layout());
        assert!(ring.push(&mmap(0x1000_0000, 9, DUMP)));
        assert!(ring.push(&mmap(CODE, 0, "//anon")));
        stage.round(std::slice::from_mut(&mut ring), 8);
        for &t in times {
            assert!(ring.push(&sample(CODE + 8, t)));
        }
        let (samples, code, _) = read(&stage.round(std::slice::from_mut(&mut ring), 100));
        let gen0 = jit_cookie(PID, DEV, 9, 0);
        assert!(samples.iter().all(|s| s.0 == gen0));
        assert_eq!(code.len(), 1);
        // The runtime's buffer reaches the file only now.
        w.code_load(new_at, PID, PID, CODE, &[0xc3; 0x40], 2, "new");
        write(d.path(), &w);
        let (_, code, _) = read(&stage.round(std::slice::from_mut(&mut ring), 200));
        let under_old: Vec<_> = code
            .iter()
            .filter(|c| c.cookie == gen0)
            .map(|c| (c.name.as_str(), c.time))
            .collect();
        let st = stage.jit_stats();
        assert_eq!(st.generations_late, 1, "{st:?}");
        if renamed {
            assert_eq!(under_old, [("new", new_at)], "{times:?}");
            assert_eq!(st.late_renamed, 1);
        } else {
            assert!(under_old.is_empty(), "{times:?}: {under_old:?}");
            assert_eq!(st.late_renamed, 0);
        }
    }
}

/// A process that execs another program drops the dump its old program
/// mapped: the new program's anonymous code is its own again, unless its
/// own dump (mapped after the exec) is met first.
#[test]
fn an_exec_drops_the_old_programs_dump_but_not_one_mapped_after_it() {
    let d = tempfile::tempdir().unwrap();
    let mut w = DumpWriter::new(PID, 1);
    w.code_load(2, PID, PID, CODE, &[0x90; 0x40], 1, "old program");
    write(d.path(), &w);
    let exec = |time| SimRecord::Comm {
        pid: PID,
        tid: PID,
        comm: "next".into(),
        exec: true,
        time,
    };
    for (dump_at, stays) in [(1u64, false), (20, true)] {
        let mut stage = stage_in(d.path());
        let mut ring = SimRing::new(0, 1 << 16, layout());
        let mut m = mmap(0x1000_0000, 9, DUMP);
        if let SimRecord::Mmap2 { time, .. } = &mut m {
            *time = dump_at;
        }
        assert!(ring.push(&m));
        assert!(ring.push(&exec(10)));
        let mut code = mmap(CODE, 0, "//anon");
        if let SimRecord::Mmap2 { time, .. } = &mut code {
            *time = 11;
        }
        assert!(ring.push(&code));
        assert!(ring.push(&sample(CODE + 8, 30)));
        let (samples, ..) = read(&stage.round(std::slice::from_mut(&mut ring), 40));
        let want = if stays {
            jit_cookie(PID, DEV, 9, 0)
        } else {
            anon_cookie(PID)
        };
        assert_eq!(samples, [(want, CODE + 8)], "dump mapped at {dump_at}");
    }
}

/// Samples in code no record described yet, when the records come (late,
/// and one function replacing another there): every function there by
/// the samples' time is written under their cookie, the later named by a
/// report; one placed after them is not.
#[test]
fn samples_before_any_record_are_named_by_the_code_there_at_their_time() {
    for (t, want) in [(60u64, &["first", "second"][..]), (40, &["first"][..])] {
        let d = tempfile::tempdir().unwrap();
        let w = DumpWriter::new(PID, 1);
        write(d.path(), &w);
        let mut stage = stage_in(d.path());
        let mut ring = SimRing::new(0, 1 << 16, layout());
        assert!(ring.push(&mmap(0x1000_0000, 9, DUMP)));
        assert!(ring.push(&mmap(CODE, 0, "//anon")));
        assert!(ring.push(&sample(CODE + 8, t)));
        let (samples, code, _) = read(&stage.round(std::slice::from_mut(&mut ring), 70));
        let gen0 = jit_cookie(PID, DEV, 9, 0);
        assert_eq!(samples, [(gen0, CODE + 8)]);
        assert!(code.is_empty());
        let mut w = DumpWriter::new(PID, 1);
        w.code_load(5, PID, PID, CODE, &[0x90; 0x40], 1, "first");
        w.code_load(50, PID, PID, CODE, &[0x90; 0x40], 2, "second");
        write(d.path(), &w);
        let (_, code, _) = read(&stage.round(std::slice::from_mut(&mut ring), 80));
        let names: Vec<&str> = code
            .iter()
            .filter(|c| c.cookie == gen0)
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(names, want, "a sample at {t}");
    }
}

/// A dump that cannot be opened, met again with an identity (its record
/// gave none, `/proc` gives one): still one dump, one cookie.
#[test]
fn a_dump_met_again_with_its_identity_is_the_same_dump() {
    let d = tempfile::tempdir().unwrap();
    let mut j = crate::jit::JitDumps::default();
    assert!(j.notice(PID, DUMP, (0, 0), None, 1).is_some());
    assert!(j.notice(PID, DUMP, (DEV, 9), None, 2).is_none());
    let f = std::fs::File::create(d.path().join("x")).unwrap();
    assert!(j.notice(PID, DUMP, (DEV, 9), Some(f), 3).is_none());
    assert_eq!((j.stats.dumps, j.stats.unopened), (1, 1));
    // The first's identity unknown, any file at that path is taken as it;
    // another path is another dump.
    assert!(j.notice(PID, DUMP, (DEV, 10), None, 4).is_none());
    assert!(j
        .notice(PID, "/other/jit-100.dump", (DEV, 10), None, 5)
        .is_some());
    assert_eq!(j.stats.dumps, 2);
}

/// An import opens a dump at the path the recording names only if the
/// importing user owns it (a crafted perf.data may name anyone's file);
/// beside the perf.data file, as found.
#[test]
fn an_import_opens_a_recorded_path_only_of_its_own_user() {
    use crate::probe::HostProbe;
    let d = tempfile::tempdir().unwrap();
    let p = d.path().join("jit-7.dump");
    std::fs::write(&p, DumpWriter::new(7, 1).bytes()).unwrap();
    let path = p.to_str().unwrap();
    let mut recorded = crate::ImportProbe::new(Vec::new());
    assert!(
        recorded.open_jitdump(7, path, 0, 0).is_some(),
        "the user's own"
    );
    // Another user's (only root can give a file away: else not tried).
    if std::os::unix::fs::chown(&p, Some(65534), None).is_err() {
        return;
    }
    assert!(
        recorded.open_jitdump(7, path, 0, 0).is_none(),
        "another user's"
    );
    let mut beside = crate::ImportProbe::new(vec![d.path().to_path_buf()]);
    assert!(beside
        .open_jitdump(7, "/elsewhere/jit-7.dump", 0, 0)
        .is_some());
}
