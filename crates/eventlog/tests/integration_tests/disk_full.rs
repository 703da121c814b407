//! A write that fails half-way (the file size limit stands in for a full
//! disk: both fail `write` part-way) is rolled back, and the session stays
//! readable with every chunk that was acknowledged.
//!
//! The limit is set with the shell's `ulimit -f` on a child copy of this
//! test binary, with SIGXFSZ ignored so the write fails with EFBIG instead
//! of killing the process.

use std::process::Command;

use profkit_eventlog::*;

use crate::util::*;

const CHILD_ENV: &str = "PROFKIT_EVENTLOG_FSIZE_CHILD";

#[test]
fn failed_write_is_rolled_back_and_writing_continues() {
    if let Ok(dir) = std::env::var(CHILD_ENV) {
        return child(std::path::Path::new(&dir));
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    // 64 blocks of 512 bytes = 32 KiB.
    let out = Command::new("sh")
        .arg("-c")
        .arg("trap '' XFSZ; ulimit -f 64 && exec \"$0\" --exact --nocapture --test-threads=1 disk_full::failed_write_is_rolled_back_and_writing_continues")
        .arg(&exe)
        .env(CHILD_ENV, dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("1 passed"), "child ran no test:\n{stdout}");

    // Back in the parent, without the limit: the file holds exactly the
    // acknowledged chunks.
    let acked: usize = std::fs::read_to_string(dir.path().join("acked"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let r = SessionReader::open(session_path(dir.path())).unwrap();
    assert!(r.bad_chunks().is_empty(), "{:?}", r.bad_chunks());
    assert_eq!(r.chunks().len(), acked);
    assert!(r.footer().is_none());
}

fn child(dir: &std::path::Path) {
    let path = session_path(dir);
    let s = small_synth(40, 400, 7);
    let ps = payloads(&s);
    let mut w = SessionWriter::create(&path, &header()).unwrap();
    let mut acked = 0;
    let mut failures = 0;
    let mut round = 0;
    for p in &ps {
        let before = w.len();
        match w.append_chunk(round, 0, p) {
            Ok(_) => acked += 1,
            Err(Error::Io { source, .. }) => {
                assert_eq!(source.raw_os_error(), Some(libc::EFBIG), "{source}");
                failures += 1;
                // Rolled back: nothing of the failed chunk is left.
                assert_eq!(w.len(), before);
                assert_eq!(std::fs::metadata(&path).unwrap().len(), before);
            }
            Err(e) => panic!("{e}"),
        }
        round += 1;
    }
    assert!(failures > 0, "the size limit was never hit");
    // Small chunks still fit after the failures: the writer carries on.
    loop {
        match w.append_chunk(round, 0, b"") {
            Ok(_) => acked += 1,
            Err(Error::Io { .. }) => break,
            Err(e) => panic!("{e}"),
        }
        round += 1;
        if acked > 10_000 {
            panic!("limit never reached with empty chunks");
        }
    }
    // The file is now within a frame header of the limit: a footer with
    // accounting does not fit either, and is rolled back too.
    let before = w.len();
    let footer = SessionFooter {
        rounds: round,
        accounting: vec![CpuAccounting::default(); 8],
        ..Default::default()
    };
    assert!(matches!(w.write_footer(&footer), Err(Error::Io { .. })));
    assert_eq!(std::fs::metadata(&path).unwrap().len(), before);
    std::fs::write(dir.join("acked"), acked.to_string()).unwrap();
}
