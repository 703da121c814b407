//! profkit-live without perf_event_open: the engine over simulated rings,
//! the footer reserve, session extras, crash finalisation and archives.

use profkit_daemon::Engine;
use profkit_eventlog::{
    file_entry, ChunkEncoder, CpuAccounting, Event, SessionFooter, SessionHeader, SessionReader,
    SessionWriter,
};
use profkit_live::{
    archive, finalize_dead, ExtrasSources, LiveEngine, ReservedSink, Summary, KALLSYMS_COPY,
    RESERVE_BYTES, RESERVE_FILE,
};
use profkit_perf::{Layout, SimRecord, SimRing};
use profkit_sync::{
    ChunkSink, FileSink, Recorder, RecorderOptions, SimRings, SyncOptions, SyncStage,
};
use std::path::{Path, PathBuf};
use std::time::Duration;

const LAYOUT: Layout = Layout {
    callchain: false,
    user_stack: 0,
    cgroup: false,
};

fn stage() -> SyncStage {
    SyncStage::new(SyncOptions::new(LAYOUT))
}

fn mmap(pid: u32, addr: u64, filename: &str, time: u64) -> SimRecord {
    SimRecord::Mmap2 {
        pid,
        tid: pid,
        addr,
        len: 0x1000,
        pgoff: 0,
        ino: u64::from(pid),
        build_id: None,
        prot: libc::PROT_EXEC as u32,
        filename: filename.into(),
        time,
    }
}

fn sample(pid: u32, ip: u64, time: u64) -> SimRecord {
    SimRecord::Sample {
        ip,
        pid,
        tid: pid,
        time,
        kernel: false,
        period: 1,
        callchain: vec![],
    }
}

/// Two CPUs: pid 10 runs /bin/app (3 samples on CPU 0), pid 20 JIT code in
/// an anonymous mapping (2 samples on CPU 1) and one sample nothing maps.
fn rings() -> Vec<SimRing> {
    let mut r0 = SimRing::new(0, 1 << 16, LAYOUT);
    r0.push(&mmap(10, 0x40_0000, "/bin/app", 1));
    for t in 2..5 {
        r0.push(&sample(10, 0x40_0100, t));
    }
    let mut r1 = SimRing::new(1, 1 << 16, LAYOUT);
    r1.push(&mmap(20, 0x7000_0000, "//anon", 1));
    r1.push(&sample(20, 0x7000_0010, 2));
    r1.push(&sample(20, 0x7000_0020, 3));
    r1.push(&sample(20, 0x9000_0000, 4)); // no mapping
    vec![r0, r1]
}

struct Setup {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    session: PathBuf,
    extras: ExtrasSources,
}

/// A session directory, and fake extras: a kallsyms file and the JIT map
/// of pid 20 (and one of pid 99, which sampled nothing).
fn setup() -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("s");
    std::fs::create_dir(&dir).unwrap();
    let src = tmp.path().join("src");
    std::fs::create_dir(&src).unwrap();
    std::fs::write(src.join("kallsyms"), "ffffffff81000000 T _text\n").unwrap();
    std::fs::write(src.join("perf-20.map"), "70000000 100 jitted\n").unwrap();
    std::fs::write(src.join("perf-99.map"), "70000000 100 other\n").unwrap();
    let fake_proc = tmp.path().join("proc");
    std::fs::create_dir_all(fake_proc.join("20")).unwrap();
    let session = dir.join("session.pkl");
    Setup {
        _tmp: tmp,
        dir,
        session,
        extras: ExtrasSources {
            kallsyms: src.join("kallsyms"),
            // pid 20's owner: whoever runs the test, who wrote its map.
            proc_root: fake_proc,
            perf_map_dir: src,
        },
    }
}

fn header() -> SessionHeader {
    SessionHeader {
        cpus: vec![0, 1],
        ..Default::default()
    }
}

fn engine(s: &Setup) -> LiveEngine<SimRings> {
    engine_in(&s.dir).with_extras(s.extras.clone())
}

/// An engine over [`rings`] writing `dir/session.pkl` (with its reserve).
fn engine_in(dir: &std::path::Path) -> LiveEngine<SimRings> {
    let sink = ReservedSink::create(
        FileSink::create(dir.join("session.pkl"), header()).unwrap(),
        dir.join(RESERVE_FILE),
    )
    .unwrap();
    let rec = Recorder::new(
        SimRings(rings()),
        stage(),
        Box::new(sink),
        RecorderOptions::default(),
    )
    .unwrap();
    LiveEngine::new(rec, dir.join("session.pkl"))
}

fn cpu(sum: &Summary, c: u32) -> &profkit_live::CpuSummary {
    sum.cpus.iter().find(|x| x.cpu == c).unwrap()
}

#[test]
fn the_engine_records_rounds_and_stop_gives_footer_summary_and_extras() {
    let s = setup();
    let mut e = engine(&s);
    assert!(s.dir.join(RESERVE_FILE).exists());
    e.round().unwrap();
    assert!(e.finished().is_none());
    let status: Summary = serde_json::from_value(e.status()).unwrap();
    assert_eq!(status.rounds, 1);
    assert!(status.session.is_none(), "status has no session fields");
    let sum: Summary = serde_json::from_value(e.stop().unwrap()).unwrap();
    assert_eq!(sum.rounds, 2, "one round and stop's");
    assert_eq!((cpu(&sum, 0).samples, cpu(&sum, 0).lost), (3, 0));
    assert_eq!((cpu(&sum, 1).samples, cpu(&sum, 1).lost_no_mapping), (2, 1));
    let done = sum.session.as_ref().expect("stop has the session fields");
    assert_eq!(done.session, s.session.display().to_string());
    assert_eq!(
        done.session_bytes,
        std::fs::metadata(&s.session).unwrap().len()
    );
    // The footer holds what the summary says; the reserve is gone.
    let r = SessionReader::open(&s.session).unwrap();
    let f = r.footer().expect("a footer");
    assert_eq!(f.accounting[1].samples_received, 3);
    assert_eq!(f.accounting[1].lost_no_mapping, 1);
    assert!(!s.dir.join(RESERVE_FILE).exists());
    // Extras: kallsyms, and the JIT map of the process with anonymous code
    // only.
    // (trimmed to what the samples need: none is in the kernel here).
    let k = std::fs::read_to_string(s.dir.join(KALLSYMS_COPY)).unwrap();
    let (first, rest) = k.split_once('\n').unwrap();
    assert!(
        first.starts_with("# profkit kallsyms, trimmed at stop"),
        "{k}"
    );
    assert_eq!(rest, "ffffffff81000000 T _text\n");
    assert!(s.dir.join("perf-20.map").exists());
    assert!(!s.dir.join("perf-99.map").exists());
    // Stopping twice is an error, not a panic.
    assert!(e.stop().is_err());
}

#[test]
fn a_deleted_session_dir_finishes_the_engine_and_stop_still_ends_the_recording() {
    let s = setup();
    let mut e = engine(&s).with_dir_check_interval(Duration::ZERO);
    e.round().unwrap();
    assert!(e.finished().is_none());
    std::fs::remove_dir_all(&s.dir).unwrap();
    e.round().unwrap();
    let why = e.finished().expect("the engine says it is finished");
    assert!(why.contains("was removed"), "{why}");
    assert!(why.contains(&s.dir.display().to_string()), "{why}");
    // The daemon then stops it: the footer goes into the (unlinked) file,
    // and every sample is counted.
    let sum: Summary = serde_json::from_value(e.stop().unwrap()).unwrap();
    assert_eq!(sum.samples(), 5);
}

#[test]
fn the_reserve_holds_its_bytes_until_the_footer() {
    let s = setup();
    let reserve = s.dir.join(RESERVE_FILE);
    let mut sink = ReservedSink::create(
        FileSink::create(s.session.clone(), header()).unwrap(),
        reserve.clone(),
    )
    .unwrap();
    assert_eq!(
        std::fs::metadata(&reserve).unwrap().len(),
        RESERVE_BYTES as u64
    );
    sink.write_chunk(0, 1, ChunkEncoder::new().bytes()).unwrap();
    assert!(reserve.exists(), "kept while recording");
    sink.finish(&SessionFooter::default()).unwrap();
    assert!(!reserve.exists(), "released for the footer");
    assert!(SessionReader::open(&s.session).unwrap().footer().is_some());
    // A reserve path through a symlink is refused, not followed.
    let target = s.dir.join("target");
    std::fs::write(&target, "keep").unwrap();
    let link = s.dir.join("link.reserve");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let _ = ReservedSink::create(
        FileSink::create(s.dir.join("other.pkl"), header()).unwrap(),
        link,
    );
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
}

/// Rounds of the [`rings`] scenario written by hand, without a footer: a
/// daemon that died. Returns the accounting `stop` would have written.
fn died_after_rounds(s: &Setup) -> Vec<CpuAccounting> {
    let mut w = SessionWriter::create(&s.session, &header()).unwrap();
    let mut st = stage();
    let mut rings = rings();
    let c = st.round(&mut rings, 10);
    w.append_chunk(c.round, c.time, &c.bytes).unwrap();
    st.begin_round(20);
    let c = st.finish_final_round();
    w.append_chunk(c.round, c.time, &c.bytes).unwrap();
    w.sync_data().unwrap();
    std::fs::write(s.dir.join(RESERVE_FILE), vec![0u8; 4096]).unwrap();
    st.accounting()
}

#[test]
fn a_dead_daemons_session_gets_the_footer_stop_would_have_written() {
    let s = setup();
    let live = died_after_rounds(&s);
    let fin = finalize_dead(&s.dir, &s.extras).unwrap();
    assert_eq!((fin.rounds, fin.truncated), (2, 0));
    let r = SessionReader::open(&s.session).unwrap();
    let footer = r.footer().expect("footer written").clone();
    for (got, want) in footer.accounting.iter().zip(&live) {
        let key = |a: &CpuAccounting| {
            (
                a.cpu,
                a.samples_received,
                a.samples_written,
                a.lost_no_mapping,
                a.lost_no_task,
                a.lost_ring,
                a.lost_overflow,
            )
        };
        assert_eq!(key(got), key(want));
    }
    assert_eq!(footer.accounting.len(), 2);
    assert_eq!(fin.summary.samples(), 5);
    assert!(!s.dir.join(RESERVE_FILE).exists(), "reserve released");
    assert!(s.dir.join("perf-20.map").exists(), "extras saved");
}

/// Killed during a rotation, after the part was renamed and before the
/// next one started: the renamed part is the one finished.
#[test]
fn a_daemon_killed_mid_rotation_gets_its_last_part_finished() {
    let s = setup();
    died_after_rounds(&s);
    let part = s.dir.join(profkit_eventlog::parts::part_file_name(3));
    std::fs::rename(&s.session, &part).unwrap();
    let fin = finalize_dead(&s.dir, &s.extras).unwrap();
    assert_eq!((fin.rounds, fin.summary.samples()), (2, 5));
    let r = SessionReader::open(&part).unwrap();
    assert!(r.is_complete(), "the part got its footer");
    assert!(!s.session.exists());
    assert!(fin
        .summary
        .session
        .unwrap()
        .session
        .ends_with("session.000003.pkl"));
}

#[test]
fn a_torn_last_round_is_cut_and_named() {
    let s = setup();
    died_after_rounds(&s);
    let len = std::fs::metadata(&s.session).unwrap().len();
    // Half a chunk frame at the end: the daemon died while writing.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&s.session)
        .unwrap();
    std::io::Write::write_all(&mut f, &[0x50, 0x4b, 0x43, 0x48, 9, 9, 9]).unwrap();
    drop(f);
    let fin = finalize_dead(&s.dir, &s.extras).unwrap();
    assert_eq!((fin.rounds, fin.truncated), (2, 7));
    let r = SessionReader::open(&s.session).unwrap();
    assert!(r.is_complete() && r.bad_chunks().is_empty());
    assert!(std::fs::metadata(&s.session).unwrap().len() > len);
}

/// A session whose only binary cookies are `bins` (path, recorded build-id).
fn session_with_binaries(s: &Setup, bins: &[(&Path, Vec<u8>)]) {
    let mut w = SessionWriter::create(&s.session, &header()).unwrap();
    let mut enc = ChunkEncoder::new();
    for (p, id) in bins {
        enc.event(&Event::CookieDef(file_entry(
            &p.display().to_string(),
            Some(id.clone()),
            0,
            0,
            0,
        )));
    }
    w.append_chunk(0, 1, enc.bytes()).unwrap();
    w.write_footer(&SessionFooter::default()).unwrap();
    std::fs::write(s.dir.join(KALLSYMS_COPY), "k").unwrap();
    std::fs::write(s.dir.join("perf-20.map"), "m").unwrap();
    std::fs::write(s.dir.join("unrelated.txt"), "u").unwrap();
}

fn tar_names(p: &Path) -> Vec<String> {
    let mut a = tar::Archive::new(std::fs::File::open(p).unwrap());
    let mut names: Vec<String> = a
        .entries()
        .unwrap()
        .map(|e| e.unwrap().path().unwrap().display().to_string())
        .collect();
    names.sort();
    names
}

#[test]
fn an_archive_packs_the_session_extras_and_binaries_by_build_id() {
    let s = setup();
    let exe = std::env::current_exe().unwrap();
    let id = profkit_sync::read_build_id(&exe).expect("the test binary has a build-id");
    let h: String = id.iter().map(|b| format!("{b:02x}")).collect();
    let gone = s.dir.join("gone");
    session_with_binaries(&s, &[(&exe, id.clone()), (&gone, vec![1, 2, 3, 4])]);
    // A separate debug file for the test binary, as under /usr/lib/debug.
    let debug = s.dir.join("debugdir");
    let by_id = debug.join(".build-id").join(&h[..2]);
    std::fs::create_dir_all(&by_id).unwrap();
    std::fs::write(by_id.join(format!("{}.debug", &h[2..])), "d").unwrap();
    let out = s.dir.join("a.tar");
    let done = archive(&s.dir, &out, &debug).unwrap();
    assert_eq!(done.binaries, 1);
    assert_eq!(done.skipped.len(), 1);
    assert!(
        done.skipped[0].contains("gone") && done.skipped[0].contains("missing"),
        "{:?}",
        done.skipped
    );
    let bin = format!("debug/.build-id/{}/{}", &h[..2], &h[2..]);
    let mut want = vec![
        "session.pkl".to_owned(),
        KALLSYMS_COPY.to_owned(),
        "perf-20.map".to_owned(),
        bin.clone(),
        format!("{bin}.debug"),
    ];
    want.sort();
    assert_eq!(tar_names(&out), want);
    assert_eq!(
        done.bytes,
        std::fs::metadata(&exe).unwrap().len() + std::fs::metadata(&s.session).unwrap().len() + 3
    );
}

/// A binary the daemon kept in the session (a container's, unreachable
/// from the host at its recorded path) goes into the archive by build-id.
#[test]
fn an_archive_packs_a_binary_kept_in_the_session_when_its_path_is_gone() {
    let s = setup();
    let exe = std::env::current_exe().unwrap();
    let id = profkit_sync::read_build_id(&exe).expect("the test binary has a build-id");
    let h: String = id.iter().map(|b| format!("{b:02x}")).collect();
    let in_container = s.dir.join("container-only/app");
    session_with_binaries(&s, &[(&in_container, id.clone())]);
    let kept_dir = s.dir.join("debug/.build-id").join(&h[..2]);
    std::fs::create_dir_all(&kept_dir).unwrap();
    std::fs::copy(&exe, kept_dir.join(&h[2..])).unwrap();
    let out = s.dir.join("a.tar");
    let done = archive(&s.dir, &out, &s.dir.join("no-debug")).unwrap();
    assert_eq!(
        (done.binaries, done.skipped.len()),
        (1, 0),
        "{:?}",
        done.skipped
    );
    assert!(tar_names(&out).contains(&format!("debug/.build-id/{}/{}", &h[..2], &h[2..])));
}

/// Two files claiming one build-id, each identified by the recorder:
/// each is packed under its own cookie (root's from its path, the
/// forgery from the copy kept of it), never one for both under the
/// build-id; a file changed since recording and an unverified claim are
/// left out with why.
#[test]
fn an_archive_packs_each_file_claiming_a_build_id_under_its_cookie() {
    use profkit_eventlog::{claimed_file_entry, FileIdentity};
    use std::os::unix::fs::MetadataExt;
    let s = setup();
    let exe = std::env::current_exe().unwrap();
    let id = profkit_sync::read_build_id(&exe).expect("the test binary has a build-id");
    let ident = |p: &Path| {
        let m = std::fs::metadata(p).unwrap();
        FileIdentity {
            dev: 1,
            inode: m.ino(),
            size: m.size(),
            mtime_ns: m.mtime() * 1_000_000_000 + m.mtime_nsec(),
        }
    };
    let genuine = claimed_file_entry(
        &exe.display().to_string(),
        id.clone(),
        Some(ident(&exe)),
        true,
        0,
    );
    let forged_src = s.dir.join("forged-src");
    std::fs::write(&forged_src, b"\x7fELF forged, another size").unwrap();
    let forged = claimed_file_entry(
        "/ns-only/md5sum",
        id.clone(),
        Some(ident(&forged_src)),
        false,
        0,
    );
    let kept = s.dir.join(format!("debug/.kept/{:016x}", forged.cookie));
    std::fs::create_dir_all(kept.parent().unwrap()).unwrap();
    std::fs::copy(&forged_src, &kept).unwrap();
    let mut touched = ident(&exe);
    touched.mtime_ns += 1;
    let changed = claimed_file_entry(
        &exe.display().to_string(),
        id.clone(),
        Some(touched),
        false,
        0,
    );
    let unverified = claimed_file_entry("/gone/x", id.clone(), None, false, 0);
    let mut w = SessionWriter::create(&s.session, &header()).unwrap();
    let mut enc = ChunkEncoder::new();
    for e in [&genuine, &forged, &changed, &unverified] {
        enc.event(&Event::CookieDef(e.clone()));
    }
    w.append_chunk(0, 1, enc.bytes()).unwrap();
    w.write_footer(&SessionFooter::default()).unwrap();
    let out = s.dir.join("a.tar");
    let done = archive(&s.dir, &out, &s.dir.join("no-debug")).unwrap();
    let names = tar_names(&out);
    let under = |c: u64| format!("debug/.kept/{c:016x}");
    assert!(names.contains(&under(genuine.cookie)), "{names:?}");
    assert!(names.contains(&under(forged.cookie)), "{names:?}");
    assert!(
        !names.iter().any(|n| n.starts_with("debug/.build-id")),
        "{names:?}"
    );
    assert_eq!(done.binaries, 2, "{:?}", done.skipped);
    assert_eq!(done.skipped.len(), 2, "{:?}", done.skipped);
    assert!(
        done.skipped
            .iter()
            .any(|s| s.contains("changed since recording")),
        "{:?}",
        done.skipped
    );
    assert!(
        done.skipped
            .iter()
            .any(|s| s.contains("/gone/x") && s.contains("not identified")),
        "{:?}",
        done.skipped
    );
}

#[test]
fn an_archive_skips_a_binary_that_changed_since_recording() {
    let s = setup();
    let exe = std::env::current_exe().unwrap();
    session_with_binaries(&s, &[(&exe, vec![9; 20])]);
    let done = archive(&s.dir, &s.dir.join("a.tar"), &s.dir.join("nodebug")).unwrap();
    assert_eq!(done.binaries, 0);
    assert!(
        done.skipped[0].contains("changed since recording"),
        "{:?}",
        done.skipped
    );
}

#[test]
fn stop_refuses_a_planted_jit_map_and_says_so() {
    let s = setup();
    // A FIFO where pid 20's JIT map should be: stop must not wait on it.
    let map = s.extras.perf_map_dir.join("perf-20.map");
    std::fs::remove_file(&map).unwrap();
    assert!(std::process::Command::new("mkfifo")
        .arg(&map)
        .status()
        .unwrap()
        .success());
    let mut e = engine(&s);
    let sum: Summary = serde_json::from_value(e.stop().unwrap()).unwrap();
    let refused = &sum.session.unwrap().extras_refused;
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert!(
        refused[0].contains("perf-20.map: not a regular file"),
        "{refused:?}"
    );
    assert!(!s.dir.join("perf-20.map").exists());
    assert!(s.dir.join(KALLSYMS_COPY).exists());
}

#[test]
fn a_daemon_killed_after_its_footer_leaves_a_session_stop_reports_as_finished() {
    let s = setup();
    let live = died_after_rounds(&s);
    // The footer was written, then the daemon was killed.
    {
        let (mut w, _) = SessionWriter::open_append(&s.session).unwrap();
        w.write_footer(&SessionFooter {
            rounds: 2,
            accounting: live.clone(),
            ..Default::default()
        })
        .unwrap();
    }
    let before = std::fs::read(&s.session).unwrap();
    let fin = finalize_dead(&s.dir, &s.extras).unwrap();
    assert!(fin.already_complete);
    assert_eq!(
        std::fs::read(&s.session).unwrap(),
        before,
        "nothing rewritten"
    );
    assert_eq!(fin.summary.samples(), 5);
    assert_eq!(fin.summary.rounds, 2);
    assert!(!s.dir.join(RESERVE_FILE).exists());
    // And again: finalizing is idempotent.
    assert!(finalize_dead(&s.dir, &s.extras).unwrap().already_complete);
}

/// An engine working in `s.dir` through its held descriptor.
fn held_engine(s: &Setup) -> LiveEngine<SimRings> {
    let dir = profkit_daemon::SessionDir::open(&s.dir).unwrap();
    engine_in(&dir.held_path())
        .with_session_dir(dir)
        .with_extras(s.extras.clone())
        .with_dir_check_interval(Duration::ZERO)
}

#[test]
fn a_session_dir_swapped_for_a_link_during_the_run_gets_nothing() {
    let s = setup();
    std::fs::set_permissions(&s.dir, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let mut e = held_engine(&s);
    e.round().unwrap();
    // A user who owns the parent renames the directory and puts a link to
    // another directory at its path before stop.
    let moved = s.dir.with_file_name("moved");
    std::fs::rename(&s.dir, &moved).unwrap();
    let elsewhere = s.dir.with_file_name("elsewhere");
    std::fs::create_dir(&elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &s.dir).unwrap();
    e.round().unwrap();
    assert!(e.finished().is_none(), "renamed is not deleted");
    let sum: Summary = serde_json::from_value(e.stop().unwrap()).unwrap();
    assert_eq!(sum.samples(), 5);
    // Footer, reserve release and extras happened in the held directory.
    assert!(SessionReader::open(moved.join("session.pkl"))
        .unwrap()
        .footer()
        .is_some());
    assert!(moved.join(KALLSYMS_COPY).exists());
    assert_eq!(
        std::fs::read_dir(&elsewhere).unwrap().count(),
        0,
        "root wrote into the directory the link points to"
    );
    // The summary names the directory as the user named it.
    assert_eq!(
        sum.session.unwrap().session,
        s.dir.join("session.pkl").display().to_string()
    );
}

#[test]
fn a_session_dir_deleted_and_recreated_still_ends_the_engine() {
    let s = setup();
    std::fs::set_permissions(&s.dir, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let mut e = held_engine(&s);
    e.round().unwrap();
    std::fs::remove_dir_all(&s.dir).unwrap();
    std::fs::create_dir(&s.dir).unwrap();
    e.round().unwrap();
    assert!(
        e.finished().is_some(),
        "a new directory at the path is not ours"
    );
    assert!(e.stop().is_ok());
}

#[test]
fn an_archive_never_reads_through_links_or_writes_into_an_existing_file() {
    let s = setup();
    std::fs::set_permissions(&s.dir, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let exe = std::env::current_exe().unwrap();
    session_with_binaries(&s, &[]);
    // A planted link among the extras, to a secret.
    let secret = s.dir.parent().unwrap().join("shadow");
    std::fs::write(&secret, "root:$6$secret").unwrap();
    std::fs::remove_file(s.dir.join(KALLSYMS_COPY)).unwrap();
    std::os::unix::fs::symlink(&secret, s.dir.join(KALLSYMS_COPY)).unwrap();
    // An existing output file, with a second name to watch its content,
    // and a link at another output name.
    let out = s.dir.parent().unwrap().join("a.tar");
    std::fs::write(&out, "someone else's").unwrap();
    let watch = s.dir.parent().unwrap().join("watch");
    std::fs::hard_link(&out, &watch).unwrap();
    let done = archive(&s.dir, &out, &s.dir.join("nodebug")).unwrap();
    assert!(
        done.skipped
            .iter()
            .any(|x| x.contains("kallsyms") && x.contains("symbolic link")),
        "{:?}",
        done.skipped
    );
    let names = tar_names(&out);
    assert!(!names.contains(&KALLSYMS_COPY.to_owned()), "{names:?}");
    assert_eq!(std::fs::read_to_string(&watch).unwrap(), "someone else's");
    use std::os::unix::fs::MetadataExt;
    assert_eq!(std::fs::metadata(&out).unwrap().mode() & 0o777, 0o600);
    let target = s.dir.parent().unwrap().join("target");
    std::fs::write(&target, "keep").unwrap();
    let link_out = s.dir.parent().unwrap().join("b.tar");
    std::os::unix::fs::symlink(&target, &link_out).unwrap();
    let e = profkit_daemon::error_message(
        &archive(&s.dir, &link_out, &s.dir.join("nodebug")).unwrap_err(),
    );
    assert!(e.contains("symbolic link"), "{e}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
    let _ = exe;
}

/// A device or FIFO named as the archive is streamed to, never replaced by
/// a regular file (before, `-o /dev/null` renamed the archive over root's
/// `/dev/null`); a FIFO planted by another user is refused.
#[test]
fn an_archive_streams_into_a_fifo_or_device_and_never_replaces_it() {
    use std::os::unix::fs::FileTypeExt;
    let s = setup();
    std::fs::set_permissions(&s.dir, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    session_with_binaries(&s, &[]);
    archive(&s.dir, Path::new("/dev/null"), &s.dir.join("nodebug")).unwrap();
    assert!(std::fs::metadata("/dev/null")
        .unwrap()
        .file_type()
        .is_char_device());
    let fifo = s.dir.parent().unwrap().join("a.fifo");
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
    )
    .unwrap();
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read(fifo).unwrap())
    };
    archive(&s.dir, &fifo, &s.dir.join("nodebug")).unwrap();
    let bytes = reader.join().unwrap();
    let names: Vec<String> = tar::Archive::new(&bytes[..])
        .entries()
        .unwrap()
        .map(|e| e.unwrap().path().unwrap().display().to_string())
        .collect();
    assert!(
        names.contains(&profkit_daemon::SESSION_LOG.to_owned()),
        "{names:?}"
    );
    assert!(std::fs::symlink_metadata(&fifo)
        .unwrap()
        .file_type()
        .is_fifo());
    let theirs = s.dir.parent().unwrap().join("theirs.fifo");
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        &theirs,
        rustix::fs::Mode::from_raw_mode(0o666),
    )
    .unwrap();
    if std::os::unix::fs::chown(&theirs, Some(65534), None).is_ok() {
        let e = profkit_daemon::error_message(
            &archive(&s.dir, &theirs, &s.dir.join("nodebug")).unwrap_err(),
        );
        assert!(e.contains("owned by uid 65534"), "{e}");
    }
}

#[test]
fn an_archive_of_a_directory_others_can_write_is_refused() {
    let s = setup();
    session_with_binaries(&s, &[]);
    std::fs::set_permissions(&s.dir, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let e = archive(
        &s.dir,
        &s.dir.with_file_name("x.tar"),
        &s.dir.join("nodebug"),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("writable"), "{e}");
}

/// Issue 25: under `--max-disk` the parts fit in what the copies leave of
/// it (before, retention counted the parts alone), and status says so.
#[test]
fn retention_under_max_disk_leaves_room_for_the_copies() {
    use profkit_live::{BudgetLimit, DiskBudget, PartsConfig};
    let parts_left = |extras: u64| {
        let tmp = tempfile::tempdir().unwrap();
        let max = 4 << 10;
        let budget = DiskBudget::new(BudgetLimit::resolve(Some(max), tmp.path()));
        let mut e = engine_in(tmp.path())
            .with_parts(PartsConfig {
                rotate: None,
                keep: None,
                max_disk: Some(max),
            })
            .with_budget(budget.clone());
        if extras > 0 {
            budget.charge(0, extras).unwrap();
        }
        for _ in 0..12 {
            e.round().unwrap();
            e.rotate().unwrap();
        }
        let st = e.status();
        let d = &st["disk"];
        assert_eq!(d["budget_bytes"], max);
        assert_eq!(d["extras_bytes"], extras);
        let closed: u64 = profkit_eventlog::parts::closed_parts(tmp.path())
            .unwrap()
            .iter()
            .map(|(_, p)| std::fs::metadata(p).unwrap().len())
            .sum();
        let current = std::fs::metadata(tmp.path().join("session.pkl"))
            .unwrap()
            .len();
        // Counted at the last rotation (the part's bytes as the recorder
        // counts them).
        let counted = d["parts_bytes"].as_u64().unwrap();
        assert!(
            counted >= closed && counted <= closed + current,
            "{counted}"
        );
        assert!(
            closed + current <= max - extras,
            "{closed} + {current} with {extras} of copies"
        );
        e.stop().unwrap();
        closed
    };
    let alone = parts_left(0);
    let with_copies = parts_left(2 << 10);
    assert!(with_copies < alone, "{with_copies} against {alone}");
}
