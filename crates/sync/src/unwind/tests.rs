use super::*;
use crate::process::Process;
use profkit_perf::PERF_CONTEXT_USER;
use std::path::Path;

fn testdata(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/unwind")
        .join(name)
}

/// A stack snapshot as `testdata/unwind/*.stack` holds it.
struct Snapshot {
    bt: Vec<String>,
    ip: u64,
    sp: u64,
    bp: u64,
    map: (u64, u64, u64),
    stack: Vec<u8>,
}

fn snapshot(name: &str) -> Snapshot {
    let text = std::fs::read_to_string(testdata(name)).unwrap();
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
    let mut s = Snapshot {
        bt: Vec::new(),
        ip: 0,
        sp: 0,
        bp: 0,
        map: (0, 0, 0),
        stack: Vec::new(),
    };
    let mut in_stack = false;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let w: Vec<&str> = line.split_whitespace().collect();
        match w.as_slice() {
            ["bt", names @ ..] => s.bt = names.iter().map(|n| n.to_string()).collect(),
            ["ip", v] => s.ip = hex(v),
            ["sp", v] => s.sp = hex(v),
            ["bp", v] => s.bp = hex(v),
            ["map", a, b, c] => s.map = (hex(a), hex(b), hex(c)),
            ["stack"] => in_stack = true,
            words if in_stack => {
                for v in words {
                    s.stack.extend_from_slice(&hex(v).to_le_bytes());
                }
            }
            _ => panic!("bad snapshot line {line:?}"),
        }
    }
    s
}

/// The function of the binary at `path` that file offset `off` is in.
fn function_at(path: &Path, off: u64) -> Option<String> {
    use object::{Object, ObjectSymbol};
    let data = std::fs::read(path).unwrap();
    let obj = object::File::parse(&*data).unwrap();
    let addr = profkit_elf::Segments::parse(&*data)
        .unwrap()
        .to_vaddr(off)?;
    obj.symbols()
        .find(|s| s.address() <= addr && addr < s.address() + s.size())
        .and_then(|s| s.name().ok().map(str::to_string))
}

/// Unwinds the snapshot's first `len` stack bytes, asked for with
/// `copy_size`: the return addresses' functions and how it ended.
fn unwind(s: &Snapshot, len: usize, copy_size: u32) -> (Vec<String>, UnwindEnd) {
    let bin = testdata("callgraph-O2-nofp");
    let map = Map {
        start: s.map.0,
        end: s.map.1,
        pgoff: s.map.2,
        cookie: 7,
        kind: MapKind::File,
        since: 0,
        until: u64::MAX,
    };
    let mut p = Process::default();
    p.map(map, 0);
    let mut u = DwarfUnwinder::default();
    let user = UserStack {
        abi: ABI_64,
        bp: s.bp,
        sp: s.sp,
        ip: s.ip,
        stack: &s.stack[..len],
    };
    let mut out = Vec::new();
    let source = |_: &Map| {
        Some(CfiSource::File {
            binary: MappedBinary {
                path: bin.clone(),
                map_file: None,
                identity: None,
            },
            build_id: None,
        })
    };
    let end = u.unwind(
        &user,
        copy_size,
        Some(&p),
        1,
        source,
        &mut NoJitFrames,
        &mut out,
    );
    assert_eq!(out[..2], [PERF_CONTEXT_USER, s.ip]);
    assert_eq!(u.stats().binaries, 1);
    let names = out[2..]
        .iter()
        .map(|&ra| match p.map_at(ra, 1) {
            Some(m) => function_at(&bin, m.offset(ra - 1)).unwrap_or("?".into()),
            None => format!("{ra:#x}"),
        })
        .collect();
    (names, end)
}

#[test]
fn a_recorded_stack_without_frame_pointers_unwinds_as_gdb_did() {
    let s = snapshot("callgraph-O2-nofp.stack");
    assert_eq!(s.bt, ["tick", "c", "b", "main"]);
    let (names, end) = unwind(&s, s.stack.len(), 8192);
    // gdb's callers, then main's caller in libc, which this process
    // table does not map: the unwind stops there, short.
    assert_eq!(names[..3], s.bt[1..]);
    assert_eq!(names.len(), 4, "{names:?}");
    assert!(names[3].starts_with("0x7f"), "{names:?}");
    assert!(matches!(end, UnwindEnd::Failed(_)), "{end:?}");
}

#[test]
fn a_stack_copy_too_short_for_the_next_frame_is_counted_as_cut() {
    let s = snapshot("callgraph-O2-nofp.stack");
    // tick and c keep nothing on the stack but their return address:
    // two words reach b; the third step needs the third word.
    let (names, end) = unwind(&s, 16, 16);
    assert_eq!(names, ["c", "b"]);
    assert_eq!(end, UnwindEnd::Cut);
    // The same 16 bytes, but all the kernel could copy (the stack's
    // top): not a cut, a failed step.
    let (names, end) = unwind(&s, 16, 8192);
    assert_eq!(names, ["c", "b"]);
    assert!(matches!(end, UnwindEnd::Failed(_)), "{end:?}");
}

#[test]
fn entry_code_without_unwind_information_is_told_apart() {
    // The dynamic loader's entry point (`_start`) has no FDE, its
    // other code has: the unwinder ends a stack there instead of
    // following the frame pointer into garbage.
    use object::{Object, ObjectSymbol};
    // The real file: the unwinder opens no path through a symlink.
    let ld = std::fs::canonicalize("/lib64/ld-linux-x86-64.so.2").unwrap();
    let data = std::fs::read(&ld).unwrap();
    let obj = object::File::parse(&*data).unwrap();
    let entry = obj.entry();
    let covered = obj
        .dynamic_symbols()
        .find(|s| s.name() == Ok("_dl_allocate_tls"))
        .map(|s| s.address() + 4)
        .expect("ld.so exports _dl_allocate_tls");
    let s = read_cfi(
        CfiSource::File {
            binary: MappedBinary {
                path: ld,
                map_file: None,
                identity: None,
            },
            build_id: None,
        },
        &DebugFrameSources::none(),
        &AtomicBool::new(false),
    )
    .unwrap();
    assert_eq!(s.covers(entry), Some(false), "entry {entry:#x}");
    assert_eq!(s.covers(covered), Some(true));
}

#[test]
fn refusals_are_counted_and_the_first_reasons_kept() {
    let mut u = DwarfUnwinder::default();
    for c in 0..(MAX_REFUSALS_KEPT as u64 + 3) {
        u.install(c, Err(CfiMissing::Refused(format!("reason {c}"))));
    }
    u.install(100, Err(CfiMissing::NoCfi));
    assert_eq!(u.stats().refused, MAX_REFUSALS_KEPT as u64 + 3);
    assert_eq!(u.stats().without_cfi, 1);
    assert_eq!(u.refusals().len(), MAX_REFUSALS_KEPT);
    assert_eq!(u.refusals()[1], (1, "reason 1".to_string()));
}
