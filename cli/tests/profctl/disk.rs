//! Issue 25, item 3: what a local user makes the root daemon write stays
//! within the session's disk budget. Live (root) tests, with the
//! throwaway user; each fails on the code before the budget (the figures
//! it wrote are in docs/RELIABILITY.md).

use super::*;
use profkit_testsupport::{skip, ThrowawayUser};
use std::time::Instant;

/// One of these tests at a time: each runs many processes or writes much.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner())
}

/// A test directory outside `/tmp` (a private tmpfs mounted on `/tmp`
/// in a namespace would hide it), traversable by the throwaway user.
fn var_tmp() -> tempfile::TempDir {
    use std::os::unix::fs::PermissionsExt;
    let d = tempfile::Builder::new()
        .prefix("pk-disk-")
        .tempdir_in("/var/tmp")
        .unwrap();
    std::fs::set_permissions(d.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
    d
}

fn unshare_ok() -> bool {
    match Command::new("unshare").args(["-m", "true"]).status() {
        Ok(s) if s.success() => true,
        Ok(s) => skip(format!("unshare -m true failed ({s})")),
        Err(e) => skip(format!("no unshare ({e})")),
    }
}

/// Compiles `src` (C) into `dir/name`, readable and runnable by all.
fn cc_with(dir: &Path, name: &str, src: &str, flags: &[&str]) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, src).unwrap();
    let out = dir.join(name);
    let o = Command::new("cc")
        .args(["-O1", "-o"])
        .arg(&out)
        .arg(&c)
        .args(flags)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    std::fs::set_permissions(&out, std::fs::Permissions::from_mode(0o755)).unwrap();
    out
}

/// Bytes on disk of everything under `dir` (`du -s -B1`), and their
/// apparent size (`--apparent-size`).
fn du(dir: &Path) -> (u64, u64) {
    let run = |apparent: bool| {
        let mut c = Command::new("du");
        c.args(["-s", "-B1"]);
        if apparent {
            c.arg("--apparent-size");
        }
        let o = c.arg(dir).output().unwrap();
        String::from_utf8_lossy(&o.stdout)
            .split_whitespace()
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or(u64::MAX)
    };
    (run(false), run(true))
}

/// The daemon's pid from `profctl start`'s output.
fn daemon_pid(o: &Output) -> String {
    let t = text(o);
    t.split("daemon pid ")
        .nth(1)
        .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
        .unwrap_or_else(|| panic!("no daemon pid in {t}"))
        .to_owned()
}

/// Bytes the process has written through write(2) (`wchar`).
fn written_by(pid: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/io"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("wchar: "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

/// Busy for 0.2 s in a binary of its own build-id, then asleep for 2 s
/// (its mapping is what the daemon keeps it for; the tests around it need
/// the CPUs).
const BUSY: &str = r#"#include <time.h>
#include <unistd.h>
volatile unsigned long sink;
int main(void) {
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    do {
        for (int i = 0; i < 100000; i++) sink += i;
        clock_gettime(CLOCK_MONOTONIC, &b);
    } while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) < 200000000L);
    sleep(2);
    return 0;
}
"#;

/// Six sparse 511 MiB ELF files (a few KiB of data each), the user's, run
/// from a tmpfs only their mount namespace sees: the daemon keeps each
/// with its holes (before: 2 GiB written, the per-run cap).
#[test]
fn sparse_container_binaries_cost_their_data() {
    let _one = one_at_a_time();
    if !perf_ok() || !unshare_ok() {
        return;
    }
    let Some(user) = ThrowawayUser::create() else {
        return;
    };
    let tmp = var_tmp();
    let mut script = format!(
        "set -e; mount -t tmpfs -o mode=0755 ns-only {m}; ",
        m = tmp.path().join("mnt").display()
    );
    std::fs::create_dir(tmp.path().join("mnt")).unwrap();
    for i in 0..6 {
        let id = format!("-Wl,--build-id=0x25{i:02}{:016x}", std::process::id());
        let bin = cc_with(tmp.path(), &format!("busy{i}"), BUSY, &[&id]);
        let inside = tmp.path().join(format!("mnt/busy{i}"));
        script.push_str(&format!(
            "cp {b} {x}; truncate -s 511M {x}; chown {u} {x}; ",
            b = bin.display(),
            x = inside.display(),
            u = user.uid
        ));
    }
    for i in 0..6 {
        script.push_str(&format!(
            "setpriv --reuid={u} --regid={g} --clear-groups {x} & ",
            u = user.uid,
            g = user.gid,
            x = tmp.path().join(format!("mnt/busy{i}")).display()
        ));
    }
    script.push_str("wait");
    let ds = tmp.path().join("s");
    let dss = ds.to_str().unwrap();
    let _stop = StopOnDrop(ds.clone());
    let t = Instant::now();
    let o = profctl(
        tmp.path(),
        &["start", "-a", "-F", "1000", "--session-dir", dss],
    );
    assert!(o.status.success(), "{}", text(&o));
    let st = Command::new("unshare")
        .args(["-m", "sh", "-c", &script])
        .status()
        .unwrap();
    assert!(st.success(), "{script}");
    let o = profctl(tmp.path(), &["stop", "--session-dir", dss]);
    let took = t.elapsed();
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    let (on_disk, apparent) = du(&ds);
    eprintln!("six sparse 511 MiB binaries: session {on_disk} bytes on disk, {apparent} apparent, {took:?}");
    assert!(
        out.contains("containers: kept 6 binaries"),
        "all six kept: {out}"
    );
    assert!(on_disk < 16 << 20, "{on_disk} bytes on disk: {out}");
    assert!(took < Duration::from_secs(60), "{took:?}");
}

/// A JIT: anonymous code it runs, and its map `/tmp/perf-PID.map` with the
/// real line and N more; `big N`: written once; `regrow N`: truncated and
/// written again all the time; `sparse`: one line, then 255 MiB of hole.
/// Runs its code for 0.2 s (`sparse`; else 20 ms), then lives 2 s (3 s
/// for regrow), rewriting a regrown map every 100 ms; prints its pid.
/// Follows [`hostile::OWN_PERF_MAP`].
const JIT: &str = r#"#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
static void write_map(const char *path, unsigned char *p, long n) {
    FILE *f = fopen(path, "w");
    if (!f) exit(2);
    fprintf(f, "%lx 9 jitted_loop\n", (unsigned long)p);
    for (long i = 0; i < n; i++)
        fprintf(f, "%lx 40 LazyCompile:~generated_function_%ld some/file.js:%ld:1\n",
                (unsigned long)p + 4096 + i * 64, i, i);
    fclose(f);
}
int main(int argc, char **argv) {
    char path[64];
    own_perf_map(path, sizeof path, argv);
    static const unsigned char code[] = {0x48, 0x89, 0xf8, 0x48, 0xff, 0xc8, 0x75, 0xfb, 0xc3};
    unsigned char *p = mmap(0, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
                            MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 1;
    memcpy(p, code, sizeof code);
    long n = argc > 2 ? atol(argv[2]) : 0;
    int regrow = !strcmp(argv[1], "regrow");
    if (!strcmp(argv[1], "sparse")) {
        write_map(path, p, 0);
        if (truncate(path, 255L << 20)) return 3;
    } else {
        write_map(path, p, n);
    }
    printf("%d\n", (int)getpid());
    fflush(stdout);
    long (*fn)(long) = (long (*)(long))p;
    /* Samples in its code matter for the host's maps (copied at stop for
       the processes sampled there); the others are kept for the mapping. */
    long busy_ns = regrow || n ? 20000000L : 200000000L;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    do {
        fn(1000000);
        clock_gettime(CLOCK_MONOTONIC, &b);
    } while ((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) < busy_ns);
    time_t end = time(0) + (regrow ? 3 : 2);
    while (time(0) < end) {
        if (regrow) write_map(path, p, n);
        usleep(100000);
    }
    return 0;
}
"#;

/// `prog ARGS` as `user`, pid 1 of its own pid and mount namespaces with a
/// private tmpfs on `/tmp` (where it writes its map).
fn jit_in_namespace(user: &ThrowawayUser, prog: &Path, args: &str) -> Command {
    let script = format!(
        "mount -t tmpfs -o mode=1777 ns-tmp /tmp && exec setpriv --reuid={} --regid={} --clear-groups {} {args}",
        user.uid,
        user.gid,
        prog.display()
    );
    let mut c = Command::new("unshare");
    c.args(["-p", "-f", "-m", "--mount-proc", "sh", "-c", &script])
        .stdout(Stdio::null());
    c
}

/// Sizes of the session's copied JIT maps.
fn maps_bytes(ds: &Path) -> u64 {
    std::fs::read_dir(ds)
        .unwrap()
        .flatten()
        .filter(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.starts_with("perf-") && n.ends_with(".map")
        })
        .map(|e| e.metadata().map_or(0, |m| m.len()))
        .sum()
}

/// Fourteen processes of one user in their own pid namespaces, 2.2 MiB
/// of map each: under `--max-disk 16M` their copies stop at the user's
/// quarter, 4 MiB, and the refusals are counted and named (before: each
/// copied, 31 MiB, and 256 MiB each would have been taken).
#[test]
fn namespaced_jit_maps_of_one_user_stop_at_its_share() {
    let _one = one_at_a_time();
    if !perf_ok() || !unshare_ok() {
        return;
    }
    let Some(user) = ThrowawayUser::create() else {
        return;
    };
    let tmp = var_tmp();
    let prog = cc_with(
        tmp.path(),
        "jit",
        &format!("{}{JIT}", hostile::OWN_PERF_MAP),
        &[],
    );
    let ds = tmp.path().join("s");
    let dss = ds.to_str().unwrap();
    let _stop = StopOnDrop(ds.clone());
    let t = Instant::now();
    let o = profctl(
        tmp.path(),
        &[
            "start",
            "-a",
            "-F",
            "1000",
            "--max-disk",
            "16M",
            "--session-dir",
            dss,
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("disk budget 16.0 MiB (--max-disk)"),
        "{}",
        text(&o)
    );
    let mut kids: Vec<Child> = (0..14)
        .map(|_| jit_in_namespace(&user, &prog, "big 30000").spawn().unwrap())
        .collect();
    for k in &mut kids {
        assert!(k.wait().unwrap().success());
    }
    let status = profctl(tmp.path(), &["status", "--session-dir", dss]);
    let o = profctl(tmp.path(), &["stop", "--session-dir", dss]);
    let took = t.elapsed();
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    let maps = maps_bytes(&ds);
    let (on_disk, _) = du(&ds);
    eprintln!("14 namespaced 2.2 MiB maps, --max-disk 16M: maps {maps} bytes, session {on_disk} on disk, {took:?}");
    assert!(maps <= 4 << 20, "{maps} bytes of maps: {out}");
    assert!(maps >= 2 << 20, "not even one map kept: {out}");
    assert!(
        out.contains("copies refused (user_share "),
        "refusals counted: {out}"
    );
    assert!(
        out.contains(&format!("(uid {}): ", user.uid)) && out.contains("quarter"),
        "refusals named: {out}"
    );
    assert!(text(&status).contains("disk: "), "{}", text(&status));
    assert!(took < Duration::from_secs(60), "{took:?}");
}

/// Two namespaced processes truncating their 2.2 MiB maps to nothing and
/// writing them again every 100 ms for 3 s: the daemon writes their lines
/// once (before: the whole map again each round it shrank).
#[test]
fn namespaced_jit_maps_truncated_and_regrown_are_written_once() {
    let _one = one_at_a_time();
    if !perf_ok() || !unshare_ok() {
        return;
    }
    let Some(user) = ThrowawayUser::create() else {
        return;
    };
    let tmp = var_tmp();
    let prog = cc_with(
        tmp.path(),
        "jit",
        &format!("{}{JIT}", hostile::OWN_PERF_MAP),
        &[],
    );
    let ds = tmp.path().join("s");
    let dss = ds.to_str().unwrap();
    let _stop = StopOnDrop(ds.clone());
    let t = Instant::now();
    let o = profctl(
        tmp.path(),
        &["start", "-a", "-F", "1000", "--session-dir", dss],
    );
    assert!(o.status.success(), "{}", text(&o));
    let daemon = daemon_pid(&o);
    let before = written_by(&daemon);
    let mut kids: Vec<Child> = (0..2)
        .map(|_| {
            jit_in_namespace(&user, &prog, "regrow 30000")
                .spawn()
                .unwrap()
        })
        .collect();
    for k in &mut kids {
        assert!(k.wait().unwrap().success());
    }
    // Their exits seen, their maps read to the end.
    std::thread::sleep(Duration::from_secs(1));
    let during = written_by(&daemon) - before;
    let o = profctl(tmp.path(), &["stop", "--session-dir", dss]);
    let took = t.elapsed();
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    let maps = maps_bytes(&ds);
    eprintln!("2 namespaced 2.2 MiB maps regrown for 3 s: daemon wrote {during} bytes, maps {maps} bytes, {took:?}");
    assert!((4 << 20..=5 << 20).contains(&maps), "{maps}: {out}");
    assert!(
        during < maps + (1 << 20),
        "the daemon wrote {during} bytes for {maps} bytes of maps: {out}"
    );
    assert!(took < Duration::from_secs(60), "{took:?}");
}

/// Six of the user's host processes with sparse 255 MiB
/// `/tmp/perf-PID.map`s: copied at stop by their lines (before: 1.5 GiB).
#[test]
fn sparse_host_perf_maps_cost_their_lines() {
    let _one = one_at_a_time();
    if !perf_ok() {
        return;
    }
    let Some(user) = ThrowawayUser::create() else {
        return;
    };
    let tmp = var_tmp();
    let prog = cc_with(
        tmp.path(),
        "jit",
        &format!("{}{JIT}", hostile::OWN_PERF_MAP),
        &[],
    );
    let ds = tmp.path().join("s");
    let dss = ds.to_str().unwrap();
    let _stop = StopOnDrop(ds.clone());
    let t = Instant::now();
    let o = profctl(
        tmp.path(),
        &["start", "-a", "-F", "1000", "--session-dir", dss],
    );
    assert!(o.status.success(), "{}", text(&o));
    let kids: Vec<Child> = (0..6)
        .map(|_| {
            user.command(&prog)
                .arg("sparse")
                .stdout(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut maps = Vec::new();
    for k in kids {
        let o = k.wait_with_output().unwrap();
        assert!(o.status.success(), "{o:?}");
        let pid = String::from_utf8_lossy(&o.stdout).trim().to_owned();
        maps.push(PathBuf::from(format!("/tmp/perf-{pid}.map")));
    }
    struct Remove(Vec<PathBuf>);
    impl Drop for Remove {
        fn drop(&mut self) {
            for p in &self.0 {
                let _ = std::fs::remove_file(p);
            }
        }
    }
    let _remove = Remove(maps.clone());
    let o = profctl(tmp.path(), &["stop", "--session-dir", dss]);
    let took = t.elapsed();
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    let (on_disk, apparent) = du(&ds);
    eprintln!("six sparse 255 MiB host maps: session {on_disk} bytes on disk, {apparent} apparent, {took:?}");
    for m in &maps {
        let kept = ds.join(m.file_name().unwrap());
        assert_eq!(
            std::fs::read_to_string(&kept)
                .unwrap_or_default()
                .lines()
                .count(),
            1,
            "{} not kept as its one line: {out}",
            kept.display()
        );
    }
    assert!(
        apparent < 16 << 20 && on_disk < 16 << 20,
        "{on_disk}/{apparent}: {out}"
    );
    assert!(took < Duration::from_secs(60), "{took:?}");
}

/// A start in a directory an earlier session used begins clean: its
/// kept binaries, JIT maps and kallsyms are gone (before: they piled up
/// over restarts, outside any cap, and a reused pid got an old map).
#[test]
fn a_restart_begins_without_the_earlier_sessions_extras() {
    let _one = one_at_a_time();
    if !perf_ok() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("s");
    let dss = ds.to_str().unwrap();
    let _stop = StopOnDrop(ds.clone());
    let o = profctl(
        tmp.path(),
        &["start", "-a", "-F", "200", "--session-dir", dss],
    );
    assert!(o.status.success(), "{}", text(&o));
    let o = profctl(tmp.path(), &["stop", "--session-dir", dss]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(ds.join("kallsyms").exists());
    // What an earlier session keeps besides its parts.
    std::fs::create_dir_all(ds.join("debug/.build-id/ab")).unwrap();
    std::fs::write(ds.join("debug/.build-id/ab/cdef"), vec![1u8; 1 << 20]).unwrap();
    std::fs::write(ds.join("debug/not-kept"), "/x: no build-id\n").unwrap();
    std::fs::write(ds.join("perf-4242.map"), "1000 10 old_jit\n").unwrap();
    let o = profctl(
        tmp.path(),
        &["start", "-a", "-F", "200", "--session-dir", dss],
    );
    assert!(o.status.success(), "{}", text(&o));
    for gone in ["debug", "perf-4242.map", "kallsyms"] {
        assert!(
            !ds.join(gone).exists(),
            "{gone} left from the earlier session"
        );
    }
    let o = profctl(tmp.path(), &["stop", "--session-dir", dss]);
    assert!(o.status.success(), "{}", text(&o));
}
