//! Issue 13: local users and crafted files against the root daemon and
//! `profctl`. Live (root) tests.

use super::*;
use std::os::unix::fs::OpenOptionsExt;
use std::time::Instant;

/// `O_NONBLOCK` on Linux.
const O_NONBLOCK: i32 = 0o4000;

/// Compiles `src` (C) into `dir/name`; panics with the compiler's output.
fn cc(dir: &Path, name: &str, src: &str) -> PathBuf {
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, src).unwrap();
    let out = dir.join(name);
    let o = Command::new("cc")
        .args(["-O1", "-o"])
        .arg(&out)
        .arg(&c)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    out
}

/// Opens and closes the write end of `fifo` without blocking: a reader
/// stuck in open(2) on it gets EOF and goes on.
fn release(fifo: &Path) {
    let _ = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(O_NONBLOCK)
        .open(fifo);
}

#[test]
fn a_fifo_planted_at_a_mapped_binarys_path_does_not_freeze_the_daemon() {
    if !perf_ok() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    // Maps a file with no build-id as code, renames it and puts a FIFO at
    // its old path before the daemon's next round reads that path; then
    // keeps the CPU busy for 3 s.
    let prog = cc(
        tmp.path(),
        "planter",
        r#"#include <fcntl.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
int main(int argc, char **argv) {
    char moved[4096];
    snprintf(moved, sizeof moved, "%s.moved", argv[1]);
    int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0755);
    if (fd < 0 || ftruncate(fd, 8192)) return 1;
    if (mmap(0, 8192, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0) == MAP_FAILED) return 2;
    if (rename(argv[1], moved) || mkfifo(argv[1], 0644)) return 3;
    volatile unsigned long x = 0;
    time_t end = time(0) + 3;
    while (time(0) < end) x++;
    return 0;
}
"#,
    );
    let ds = tmp.path().join("s");
    let dss = ds.to_str().unwrap();
    let _stop = StopOnDrop(ds.clone());
    let o = profctl(
        tmp.path(),
        &["start", "-a", "-F", "1000", "--session-dir", dss],
    );
    assert!(o.status.success(), "{}", text(&o));
    let planted = tmp.path().join("victim");
    let mut child = Command::new(&prog).arg(&planted).spawn().unwrap();
    std::thread::sleep(Duration::from_millis(1200));
    let t = Instant::now();
    let status = profctl(tmp.path(), &["status", "--session-dir", dss]);
    let took = t.elapsed();
    // Whatever happened, let a stuck daemon go before asserting.
    release(&planted);
    assert!(
        status.status.success(),
        "status failed while a FIFO sat at a mapped path: {}",
        text(&status)
    );
    assert!(
        took < Duration::from_secs(3),
        "status took {took:?}: the daemon was not draining"
    );
    assert!(child.wait().unwrap().success());
    let o = profctl(tmp.path(), &["stop", "--session-dir", dss]);
    release(&planted);
    assert!(o.status.success(), "{}", text(&o));
    // The planter's own samples were kept: nothing stalled the rings.
    let r = SessionReader::open(session(tmp.path())).unwrap();
    for a in &r.footer().unwrap().accounting {
        assert!(
            a.lost_ring + a.lost_overflow <= a.samples_received / 100,
            "cpu {}: {a:?}",
            a.cpu
        );
    }
}
