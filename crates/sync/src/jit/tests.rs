use super::*;
use profkit_jitdump::DumpWriter;

/// A dump of `n` functions of 64 code bytes each (some 130 bytes a
/// record), opened.
fn dump(dir: &std::path::Path, pid: u32, n: u64) -> File {
    let mut w = DumpWriter::new(pid, 1);
    for i in 0..n {
        w.code_load(i + 2, pid, pid, 0x1000 + i * 64, &[0x90; 64], i, "f");
    }
    let p = dir.join(format!("jit-{pid}.dump"));
    std::fs::write(&p, w.bytes()).unwrap();
    File::open(p).unwrap()
}

#[test]
fn reads_are_bounded_per_dump_and_per_call_and_exited_dumps_drain_then_go() {
    let d = tempfile::tempdir().unwrap();
    let mut j = JitDumps::default();
    // Six dumps of about 4 MiB each.
    let per = (4 << 20) / 130;
    for pid in 1..=6 {
        let f = dump(d.path(), pid, per);
        assert!(j
            .notice(pid, "/tmp/jit.dump", (1, u64::from(pid)), Some(f), 0)
            .is_some());
    }
    let one = j.read(false, 1);
    assert!(one.code.is_empty(), "nothing was hit");
    let first = j.stats.bytes;
    // Bounded by bytes, or sooner by time (an unoptimized build).
    assert!(
        first > 0 && first <= JIT_READ_PER_CALL + (1 << 10),
        "one read: {first} bytes"
    );
    for pid in 1..=6 {
        let off = j.by_pid[&pid].reader.offset();
        assert!(off <= JIT_READ_PER_ROUND + 256, "dump {pid} read to {off}");
    }
    // An exited process's dump is read on beyond the per-dump share
    // until its end, then forgotten.
    j.exited(3, 2);
    for r in 2..=2 + JIT_EXIT_ROUNDS {
        j.read(false, r);
    }
    assert!(!j.by_pid.contains_key(&3), "retired after its rounds");
    assert_eq!(j.stats.unread_at_exit, 0, "{:?}", j.stats);
    // A pid met again ends its old process's dump at once, counted if
    // unread.
    j.exited(4, 20);
    j.pid_reused(4);
    assert!(!j.has(4));
    assert_eq!(j.stats.unread_at_exit, 1);
    // A live process's pid met again (a thread's fork record) keeps it.
    j.pid_reused(5);
    assert!(j.has(5));
    // The end of the session reads the rest, within its own bound.
    j.read(true, 30);
    assert_eq!(j.stats.malformed, 0);
    for pid in [1, 2, 5, 6] {
        let len = std::fs::metadata(d.path().join(format!("jit-{pid}.dump")))
            .unwrap()
            .len();
        assert_eq!(j.by_pid[&pid].reader.offset(), len, "dump {pid} read whole");
    }
    // 1, 2, 3, 5 and 6 whole, and the part of 4 read before it went.
    assert!(j.stats.functions >= per * 5, "{:?}", j.stats);
}

#[test]
fn held_functions_and_bytes_are_bounded_and_counted() {
    let mut j = JitDumps {
        held: JIT_MAX_HELD_BYTES - 100,
        ..Default::default()
    };
    let d = tempfile::tempdir().unwrap();
    let f = dump(d.path(), 9, 10);
    j.notice(9, "/tmp/jit-9.dump", (1, 9), Some(f), 0);
    j.read(true, 1);
    // Their names fit (code bytes are not held: read when written).
    assert_eq!(j.stats.functions, 10, "{:?}", j.stats);
    assert!(j.held <= JIT_MAX_HELD_BYTES, "{}", j.held);
    let anon = profkit_eventlog::cookie::anon_cookie(9);
    let (cookie, m) = j.resolve(9, anon, 0x1000 + 64 * 3 + 5, 50).unwrap();
    let m = m.expect("its first hit writes it");
    assert_eq!((m.cookie, m.addr), (cookie, 0x1000 + 64 * 3));
    assert_eq!(
        m.code.as_deref(),
        Some(&[0x90u8; 64][..]),
        "read from the dump"
    );
    // Past the bound (names count too), functions are not held at all.
    j.held = JIT_MAX_HELD_BYTES + 1;
    let f = dump(d.path(), 10, 10);
    j.notice(10, "/tmp/jit-10.dump", (1, 10), Some(f), 0);
    j.read(true, 2);
    assert_eq!(
        (j.stats.functions, j.stats.functions_over),
        (10, 10),
        "{:?}",
        j.stats
    );
    assert!(j.code_at(10, 0x1000, 5).is_none());
}

/// A runtime whose samples hit function after function of 1 MiB (its own
/// dump says so) makes the daemon write at most its share of markers to
/// root's session file; the rest are counted. A new file starts afresh.
#[test]
fn markers_written_are_bounded_per_dump_and_per_file() {
    let d = tempfile::tempdir().unwrap();
    let mut w = DumpWriter::new(11, 1);
    let big = vec![0x90u8; 1 << 20];
    for i in 0..40u64 {
        w.code_load(i + 2, 11, 11, 0x10_0000_0000 + (i << 21), &big, i, "big");
    }
    let p = d.path().join("jit-11.dump");
    std::fs::write(&p, w.bytes()).unwrap();
    let mut j = JitDumps::default();
    j.notice(
        11,
        "/tmp/jit-11.dump",
        (1, 11),
        Some(File::open(&p).unwrap()),
        0,
    );
    j.read(true, 1);
    let anon = profkit_eventlog::cookie::anon_cookie(11);
    // Not its anonymous code: not the dump's.
    assert!(j.resolve(11, anon ^ 1, 0x10_0000_0008, 100).is_none());
    let written = |j: &mut JitDumps| {
        (0..40u64)
            .filter(|i| {
                let (_, m) = j
                    .resolve(11, anon, 0x10_0000_0008 + (i << 21), 100)
                    .unwrap();
                m.is_some()
            })
            .count() as u64
    };
    let n = written(&mut j);
    // 32 MiB a dump: 31 functions of 1 MiB and their names.
    assert_eq!(
        n,
        (JIT_MAX_MARKER_BYTES_PER_DUMP >> 20) - 1,
        "{:?}",
        j.stats
    );
    assert_eq!(j.stats.markers_over, 40 - n);
    j.reset();
    assert_eq!(written(&mut j), n, "a new session file writes them again");
}
