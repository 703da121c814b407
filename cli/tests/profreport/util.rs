//! Running profreport and profctl, and the checked-in fixtures.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub const PROFREPORT: &str = env!("CARGO_BIN_EXE_profreport");
pub const PROFCTL: &str = env!("CARGO_BIN_EXE_profctl");

/// The package directory: tests run there, so session paths in the output
/// are the relative ones given (`../testdata/sessions/ratio/session.pkl`).
pub fn cli_dir() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// A session directory of `testdata/sessions/`, relative to [`cli_dir`].
pub fn session(name: &str) -> String {
    format!("../testdata/sessions/{name}")
}

/// Where the checked-in workload binary is.
pub const BIN_DIR: &str = "../testdata/sessions/bin";

/// The flags every fixture report needs: the workload found by build-id in
/// `testdata/sessions/bin`, and nothing else of this machine (the sysroot
/// holds no system libraries, so libc is "(no symbols)" everywhere).
pub fn fixture_args(name: &str) -> Vec<String> {
    vec![
        "--session-dir".into(),
        session(name),
        "--sysroot".into(),
        BIN_DIR.into(),
        "--search-dir".into(),
        BIN_DIR.into(),
    ]
}

/// What a run gave.
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// Panics with the output unless the exit status is `code`.
    #[track_caller]
    pub fn expect(self, code: i32) -> Run {
        assert_eq!(
            self.code, code,
            "exit status\nstdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self
    }

    /// The JSON output.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}):\n{}", self.stdout))
    }
}

fn from(o: Output) -> Run {
    Run {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// profreport with `args`, from the package directory.
pub fn profreport<S: AsRef<str>>(args: &[S]) -> Run {
    let o = Command::new(PROFREPORT)
        .args(args.iter().map(AsRef::as_ref))
        .current_dir(cli_dir())
        .env_remove("PROFKIT_SESSION_DIR")
        .env_remove("DEBUGINFOD_URLS")
        .output()
        .expect("running profreport");
    from(o)
}

/// profreport on a fixture session with extra `args`.
pub fn on_fixture(name: &str, args: &[&str]) -> Run {
    let mut all = fixture_args(name);
    all.extend(args.iter().map(|s| s.to_string()));
    profreport(&all)
}

/// profctl with `args` in `cwd`.
pub fn profctl(cwd: &Path, args: &[&str]) -> Run {
    let o = Command::new(PROFCTL)
        .args(args)
        .current_dir(cwd)
        .env_remove("PROFKIT_SESSION_DIR")
        .env_remove("PROFKIT_LOG")
        .output()
        .expect("running profctl");
    from(o)
}

/// The rows of a JSON report.
pub fn rows(v: &serde_json::Value) -> Vec<serde_json::Value> {
    v["rows"].as_array().cloned().unwrap_or_default()
}

/// Samples of the rows whose symbol is `symbol`, summed.
pub fn samples_of(v: &serde_json::Value, symbol: &str) -> u64 {
    rows(v)
        .iter()
        .filter(|r| r["symbol"] == symbol)
        .map(|r| r["samples"].as_u64().unwrap())
        .sum()
}

/// Percent of the row whose symbol is `symbol` (first such row).
pub fn percent_of(v: &serde_json::Value, symbol: &str) -> f64 {
    rows(v)
        .iter()
        .find(|r| r["symbol"] == symbol)
        .and_then(|r| r["percent"].as_f64())
        .unwrap_or_else(|| panic!("no row for {symbol}: {v:#}"))
}

/// Held by every test that records: a profkit session opens its events
/// with `build_id`, and a 6.18 kernel was seen marking a concurrent `perf
/// record`'s MMAP2 records as carrying build-ids when they carry inodes,
/// which perf 6.1 cannot read back. One recording at a time in this binary.
pub static RECORDING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Takes [`RECORDING`] (a test that panicked while holding it does not
/// poison the others).
pub fn recording() -> std::sync::MutexGuard<'static, ()> {
    RECORDING.lock().unwrap_or_else(|e| e.into_inner())
}

/// A scratch directory.
pub fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

/// The repository's `testdata/`, absolute.
pub fn testdata() -> PathBuf {
    cli_dir().join("../testdata")
}

/// A `--build-id` of its own for each build: two identical builds share a
/// build-id, hence a cookie, and the sync stage names a cookie after the
/// first path it saw the binary at — possibly another test's copy, deleted
/// by the time of the report (see `live.rs`).
pub fn unique_build_id() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    // 20 bytes, as GNU ld's own (perf.data keeps at most 20).
    format!(
        "-Wl,--build-id=0x{:08x}{:08x}{:024x}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed),
        nanos & ((1 << 96) - 1)
    )
}

/// Runs a compiler; false after [`skip`] says why it did not work.
pub fn compile(cmd: &mut Command, what: &str) -> bool {
    match cmd.status() {
        Ok(s) if s.success() => true,
        Ok(s) => profkit_testsupport::skip(format!("{what} failed ({s}): {cmd:?}")),
        Err(e) => profkit_testsupport::skip(format!("no {what} ({e})")),
    }
}

/// The JIT files a runtime writes to `/tmp` by its pid (`perf-PID.map`,
/// `jit-PID.dump`) now.
fn tmp_jit_files() -> std::collections::BTreeSet<PathBuf> {
    std::fs::read_dir("/tmp")
        .map(|d| {
            d.flatten()
                .map(|e| e.path())
                .filter(|p| {
                    p.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
                        (n.starts_with("perf-") && n.ends_with(".map"))
                            || (n.starts_with("jit-") && n.ends_with(".dump"))
                    })
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Removes, when dropped, the JIT files that appeared in `/tmp` since it
/// was made (by a runtime a test ran with `-X perf`, `--perf-basic-prof`
/// and the like). Left behind, root's stale `perf-PID.map` takes the name
/// a later process of another user with that pid needs (pids wrap at
/// 32768 here), and that process cannot write its map.
pub struct TmpJitFiles(std::collections::BTreeSet<PathBuf>);

impl TmpJitFiles {
    pub fn new() -> Self {
        TmpJitFiles(tmp_jit_files())
    }

    /// The ones that appeared since.
    pub fn new_ones(&self) -> Vec<PathBuf> {
        tmp_jit_files().difference(&self.0).cloned().collect()
    }
}

impl Drop for TmpJitFiles {
    fn drop(&mut self) {
        for p in self.new_ones() {
            let _ = std::fs::remove_file(p);
        }
    }
}
