//! Issue 29: JIT dumps are files a local user writes and the root daemon
//! reads. A throwaway user tries to mislead it (map root's dump as its
//! own), fill it (a dump written as fast as a process can), and crash it
//! (a record that lies about its size); its own honest dump must still be
//! read. Live (root) tests.

use super::*;
use profkit_jitdump::DumpWriter;
use profkit_testsupport::ThrowawayUser;
use std::time::Instant;

/// A user's JIT: anonymous executable memory at `0x7e0000000000` (fixed,
/// so a planted dump can describe it) running a loop for 2 s, and a
/// jitdump named `jit-PID.dump` mapped as runtimes map theirs:
/// - `own`: its own dump in the working directory, naming `users_loop`;
/// - `root PATH`: maps PATH (root's dump, naming the same address);
/// - `flood`: its own dump, then tiny function records as fast as it can
///   write them, 2 million (some 120 MB: past every bound of a read);
/// - `lie`: its own dump whose second record claims 3 GiB.
///
/// Prints its pid.
const JITTER: &str = r#"#define _GNU_SOURCE
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
static uint64_t now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1000000000ull + t.tv_nsec; }
static void load(FILE *f, uint64_t addr, uint64_t size, uint64_t idx, const char *name, const unsigned char *code) {
    uint32_t id = 0, total = 16 + 8 + 32 + strlen(name) + 1 + size, pid = getpid();
    uint64_t t = now();
    fwrite(&id, 4, 1, f); fwrite(&total, 4, 1, f); fwrite(&t, 8, 1, f);
    fwrite(&pid, 4, 1, f); fwrite(&pid, 4, 1, f);
    fwrite(&addr, 8, 1, f); fwrite(&addr, 8, 1, f); fwrite(&size, 8, 1, f); fwrite(&idx, 8, 1, f);
    fwrite(name, strlen(name) + 1, 1, f); fwrite(code, size, 1, f);
}
int main(int argc, char **argv) {
    static const unsigned char code[] = {0x48, 0x89, 0xf8, 0x48, 0xff, 0xc8, 0x75, 0xfb, 0xc3};
    unsigned char *p = mmap((void *)0x7e0000000000ull, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
                            MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (p == MAP_FAILED) return 1;
    memcpy(p, code, sizeof code);
    char path[64];
    FILE *f = 0;
    int fd;
    if (!strcmp(argv[1], "root")) {
        fd = open(argv[2], O_RDONLY);
    } else {
        snprintf(path, sizeof path, "jit-%d.dump", (int)getpid());
        f = fopen(path, "w+");
        if (!f) return 2;
        struct { uint32_t magic, version, size, mach, pad, pid; uint64_t ts, flags; } h =
            {0x4A695444, 1, 40, 62, 0, (uint32_t)getpid(), now(), 0};
        fwrite(&h, sizeof h, 1, f);
        load(f, (uint64_t)p, sizeof code, 1, "users_loop", code);
        if (!strcmp(argv[1], "lie")) {
            uint32_t id = 0, total = 0xc0000000u; uint64_t t = now();
            fwrite(&id, 4, 1, f); fwrite(&total, 4, 1, f); fwrite(&t, 8, 1, f);
        }
        fflush(f);
        fd = fileno(f);
    }
    if (fd < 0 || mmap(0, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 0) == MAP_FAILED) return 3;
    printf("%d\n", (int)getpid());
    fflush(stdout);
    long (*fn)(long) = (long (*)(long))p;
    uint64_t end = now() + 2000000000ull, i = 2;
    while (now() < end) {
        if (!strcmp(argv[1], "flood") && i < 2000000) {
            for (int k = 0; k < 1000; k++, i++)
                load(f, 0x7f0000000000ull + i * 16, 9, i, "flood", code);
        }
        fn(100000);
    }
    if (f) fclose(f);
    return 0;
}
"#;

#[test]
fn a_users_jit_dumps_neither_mislead_nor_fill_nor_crash_the_daemon() {
    if !perf_ok() {
        return;
    }
    let Some(user) = ThrowawayUser::create() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let prog = super::hostile::cc(tmp.path(), "jitter", JITTER);
    // Root's own dump (world-readable), naming the user's fixed address.
    let rootdir = tmp.path().join("rootdump");
    std::fs::create_dir(&rootdir).unwrap();
    let mut w = DumpWriter::new(1, 1);
    w.code_load(2, 1, 1, 0x7e00_0000_0000, &[0xc3; 9], 1, "stolen_loop");
    let root_dump = rootdir.join("jit-1.dump");
    std::fs::write(&root_dump, w.bytes()).unwrap();
    use std::os::unix::fs::PermissionsExt;
    for d in [tmp.path(), rootdir.as_path()] {
        std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::fs::set_permissions(&root_dump, std::fs::Permissions::from_mode(0o644)).unwrap();
    let own = tmp.path().join("user");
    std::fs::create_dir(&own).unwrap();
    user.give(&own);

    let ds = tmp.path().join("s");
    let dss = ds.to_str().unwrap();
    let _stop = StopOnDrop(ds.clone());
    let o = profctl(
        tmp.path(),
        &["start", "-a", "-F", "1000", "--session-dir", dss],
    );
    assert!(o.status.success(), "{}", text(&o));
    let t = Instant::now();
    let kids: Vec<_> = ["own", "root", "flood", "lie"]
        .iter()
        .map(|mode| {
            user.command(&prog)
                .args([mode, root_dump.to_str().unwrap()])
                .current_dir(&own)
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for k in kids {
        let o = k.wait_with_output().unwrap();
        assert!(o.status.success(), "{o:?}");
    }
    // The exited processes' dumps are drained, a bounded piece a read.
    std::thread::sleep(Duration::from_millis(2500));
    let st = profctl(tmp.path(), &["status", "--json", "--session-dir", dss]);
    assert!(st.status.success(), "{}", text(&st));
    let s: serde_json::Value = serde_json::from_slice(&st.stdout).unwrap();
    // The daemon kept draining while the flood was read (a read of dumps
    // is bounded in bytes and time): no round near the 250 ms interval.
    let last_round_ms = s["last_round_ms"].as_f64().unwrap_or(0.0);
    assert!(last_round_ms < 200.0, "last round {last_round_ms} ms");
    let lost: u64 = s["cpus"]
        .as_array()
        .map(|c| c.iter().map(|c| c["lost"].as_u64().unwrap_or(0)).sum())
        .unwrap_or(0);
    assert_eq!(lost, 0, "{s:#}");
    let jit = &s["jit"];
    // Four mappings of a dump: root's refused (not the user's own), the
    // lying one ended at its lie, the flood read within its bounds.
    assert_eq!(jit["dumps"], 4, "{jit:#}");
    assert_eq!(
        jit["unopened"], 1,
        "root's dump, mapped by the user: {jit:#}"
    );
    assert!(jit["malformed"].as_u64().unwrap_or(0) >= 1, "{jit:#}");
    // The flood (120 MB) is read in bounded pieces, 10 ms of reading at a
    // time: not at once, whatever it holds.
    let read = jit["bytes"].as_u64().unwrap_or(u64::MAX);
    assert!(read < 100 << 20, "{read} bytes of dumps read: {jit:#}");
    let t_stop = Instant::now();
    let o = profctl(tmp.path(), &["stop", "--session-dir", dss]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        t_stop.elapsed() < Duration::from_secs(20),
        "stop took {:?}",
        t_stop.elapsed()
    );
    assert!(text(&o).contains("JIT dumps: 4 read"), "{}", text(&o));

    // The report names the user's loop from its own dump, never with
    // root's name for the same address.
    let rep = Command::new(env!("CARGO_BIN_EXE_profreport"))
        .args(["--session-dir", dss, "-l"])
        .output()
        .unwrap();
    let out = text(&rep);
    assert!(rep.status.success(), "{out}");
    assert!(out.contains("users_loop"), "{out}");
    assert!(!out.contains("stolen_loop"), "{out}");
    eprintln!(
        "jit hostile: {:?} in all, JIT {jit}, last round {last_round_ms} ms",
        t.elapsed()
    );
}
