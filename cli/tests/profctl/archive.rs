//! `profctl archive` and the session's extras: an archived session
//! symbolizes elsewhere, and the trimmed kallsyms names what the whole
//! table does.

use super::*;

/// `profctl archive` of the session `ds` (it must say "archived"),
/// unpacked into `tmp/elsewhere`, which it returns.
fn archive_and_unpack(tmp: &Path, ds: &Path) -> PathBuf {
    let tar_path = tmp.join("session.tar");
    let o = profctl(
        tmp,
        &[
            "archive",
            "--session-dir",
            ds.to_str().unwrap(),
            "-o",
            tar_path.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("archived"), "{}", text(&o));
    let there = tmp.join("elsewhere");
    std::fs::create_dir(&there).unwrap();
    assert!(Command::new("tar")
        .arg("-xf")
        .arg(&tar_path)
        .arg("-C")
        .arg(&there)
        .status()
        .unwrap()
        .success());
    there
}

#[test]
fn an_archived_session_symbolizes_elsewhere_after_the_binary_is_gone() {
    if !perf_ok() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let bin_dir = tmp.path().join("bin");
    std::fs::create_dir(&bin_dir).unwrap();
    let src = bin_dir.join("travel.c");
    std::fs::write(
        &src,
        "volatile unsigned long sink;\n\
         __attribute__((noinline)) void tick(void) { sink++; }\n\
         __attribute__((noinline)) unsigned long travelling_hot_function(unsigned long n) {\n\
           unsigned long x = 1; for (unsigned long i = 0; i < n; i++) { x = x * 6364136223846793005UL + i; if ((i & 0xffff) == 0) tick(); } return x; }\n\
         int main(void) { sink = travelling_hot_function(300000000UL); return 0; }\n",
    )
    .unwrap();
    let prog = bin_dir.join("travel");
    let ok = Command::new("cc")
        .args([
            "-O1",
            "-g",
            "-fno-omit-frame-pointer",
            "-Wl,--build-id",
            "-o",
        ])
        .arg(&prog)
        .arg(&src)
        .status()
        .unwrap();
    assert!(ok.success());
    let ds = tmp.path().join("s");
    let o = profctl(
        tmp.path(),
        &[
            "record",
            "-F",
            "2000",
            "--session-dir",
            ds.to_str().unwrap(),
            "--",
            prog.to_str().unwrap(),
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    // Elsewhere: unpack, and the original binary is gone.
    let there = archive_and_unpack(tmp.path(), &ds);
    std::fs::remove_dir_all(&bin_dir).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_profreport"))
        .args(["-l", "--no-progress", "--session-dir"])
        .arg(&there)
        .output()
        .unwrap();
    let out = text(&o);
    assert!(o.status.success(), "{out}");
    let line = out
        .lines()
        .find(|l| l.contains("travelling_hot_function"))
        .unwrap_or_else(|| panic!("no symbol in: {out}"));
    let pct: f64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert!(pct > 50.0, "{line}");
}

/// Issue 14: the session keeps only the kallsyms lines its kernel samples
/// and frames need, and names every one of them as the whole table does:
/// `-l` and `-c` of a `-g` session with many kernel samples are the same
/// with the trimmed copy, with the whole live table (`--kallsyms
/// /proc/kallsyms`), and from an unpacked archive of the session.
#[test]
fn the_trimmed_kallsyms_names_every_kernel_sample_and_frame_as_the_whole_table() {
    if !perf_ok() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let ds = tmp.path().join("s");
    // dd with one-byte blocks: mostly system calls, in the kernel.
    let o = profctl(
        tmp.path(),
        &[
            "record",
            "-g",
            "-F",
            "2000",
            "--session-dir",
            ds.to_str().unwrap(),
            "--",
            "dd",
            "if=/dev/zero",
            "of=/dev/null",
            "bs=1",
            "count=3000000",
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    let copy = std::fs::read_to_string(ds.join("kallsyms")).unwrap();
    let full = std::fs::read_to_string("/proc/kallsyms").unwrap();
    assert!(
        copy.starts_with("# profkit kallsyms, trimmed at stop"),
        "{}",
        copy.lines().next().unwrap_or("")
    );
    assert!(
        copy.len() * 20 < full.len(),
        "trimmed copy {} bytes, whole table {}",
        copy.len(),
        full.len()
    );
    let report = |dir: &Path, extra: &[&str]| {
        let o = Command::new(env!("CARGO_BIN_EXE_profreport"))
            .args(["--no-progress", "--session-dir"])
            .arg(dir)
            .args(extra)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", text(&o));
        // All but the line naming the session file.
        String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter(|l| !l.starts_with("Session:"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let there = archive_and_unpack(tmp.path(), &ds);
    for mode in [&["-l"][..], &["-c"][..]] {
        let trimmed = report(&ds, mode);
        let whole = report(&ds, &[mode, &["--kallsyms", "/proc/kallsyms"]].concat());
        let unpacked = report(&there, mode);
        let kernel_rows = trimmed
            .lines()
            .filter(|l| l.contains("[kernel.kallsyms]") && !l.contains("[kernel.kallsyms] +0x"))
            .count();
        assert!(
            kernel_rows >= 3,
            "few named kernel rows ({mode:?}):\n{trimmed}"
        );
        assert_eq!(
            trimmed, whole,
            "{mode:?}: the trimmed copy names differently"
        );
        assert_eq!(
            trimmed, unpacked,
            "{mode:?}: the unpacked archive names differently"
        );
    }
}
