//! What profkit's tests share: the one rule for tests that need the real
//! kernel.
//!
//! Tests that open perf events, lower a sysctl or run `perf` need root (or
//! `perf_event_paranoid <= 0`). Where that is missing they print why and
//! pass, so a developer without root can still run the suite; under
//! `PROFKIT_REQUIRE_PERF=1` (CI, which runs as root) the same condition is
//! a failure, so nothing real-kernel is silently skipped there.
//!
//! # Design constraints
//!
//! - A dev-dependency only: no library or binary of profkit links it.
//! - One spelling of the rule ([`skip`]), whatever the reason to skip.
//!
//! It also makes the unprivileged local user that the tests of issue 13
//! attack the root daemon as ([`ThrowawayUser`]): created for one test,
//! removed with its processes when the test ends.
//!
//! And a throwaway ClickHouse server ([`ClickHouseServer`]) for the
//! fleet export's tests: skipped, by the same rule, where
//! `clickhouse-server` is not installed.
//!
//! Not for: fixtures or workloads (each test crate builds its own).
//!
//! # Example
//!
//! ```
//! use profkit_testsupport::{open_or_skip, perf_required};
//! let config = profkit_perf::SamplerConfig::new(profkit_perf::EventSpec::parse("cpu-clock").unwrap());
//! match open_or_skip(&config) {
//!     Some(sampler) => assert!(!sampler.rings().is_empty()),
//!     None => assert!(!perf_required()), // skipped (and said why)
//! }
//! ```

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod clickhouse;
pub use clickhouse::{ClickHouseServer, CLICKHOUSE_SERVER, CLUSTER, READY_TIMEOUT};

use profkit_perf::{EventSpec, Sampler, SamplerConfig};
use std::fmt::Display;

/// The environment variable that turns a skip into a failure.
pub const REQUIRE_PERF: &str = "PROFKIT_REQUIRE_PERF";

/// Whether real-kernel tests must run (`PROFKIT_REQUIRE_PERF=1`).
pub fn perf_required() -> bool {
    std::env::var(REQUIRE_PERF).as_deref() == Ok("1")
}

/// Skips a test for `why`: prints `SKIP: why` and returns `false`, or
/// panics when [`perf_required`].
///
/// # Panics
/// Under `PROFKIT_REQUIRE_PERF=1`, always.
#[track_caller]
pub fn skip(why: impl Display) -> bool {
    if perf_required() {
        panic!("{REQUIRE_PERF}=1 but {why}");
    }
    eprintln!("SKIP: {why}");
    false
}

/// Opens `config`, or returns `None` after [`skip`] says why it could not.
///
/// # Panics
/// Under `PROFKIT_REQUIRE_PERF=1`, when the events cannot be opened.
#[track_caller]
pub fn open_or_skip(config: &SamplerConfig) -> Option<Sampler> {
    match Sampler::open(config) {
        Ok(s) => Some(s),
        Err(e) => {
            skip(format_args!("perf events cannot be opened: {e}"));
            None
        }
    }
}

/// True if system-wide `cpu-clock` sampling works here; otherwise
/// [`skip`]s (and returns false).
///
/// # Panics
/// Under `PROFKIT_REQUIRE_PERF=1`, when it does not work.
#[track_caller]
pub fn perf_ok() -> bool {
    let spec = EventSpec::parse("cpu-clock").expect("cpu-clock is a known event");
    open_or_skip(&SamplerConfig::new(spec)).is_some()
}

/// A system user created for one test (`useradd --system`, no home, no
/// login shell) and removed when dropped, its processes killed first: the
/// unprivileged local user of the hostile-input tests (issue 13).
#[derive(Debug)]
pub struct ThrowawayUser {
    /// Its name (`pkt-PID-N`).
    pub name: String,
    /// Its uid.
    pub uid: u32,
    /// Its primary gid.
    pub gid: u32,
}

impl ThrowawayUser {
    /// Creates the user, or returns `None` after [`skip`] says why not
    /// (not root, or `useradd`/`setpriv` missing).
    ///
    /// # Panics
    /// Under `PROFKIT_REQUIRE_PERF=1`, when it cannot be created.
    #[track_caller]
    pub fn create() -> Option<Self> {
        use std::os::unix::fs::MetadataExt;
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let euid = std::fs::metadata("/proc/self").map(|m| m.uid()).ok();
        if euid != Some(0) {
            skip("creating a throwaway user needs root");
            return None;
        }
        let name = format!(
            "pkt-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        let made = std::process::Command::new("useradd")
            .args([
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
            ])
            .arg(&name)
            .output();
        match made {
            Ok(o) if o.status.success() => {}
            Ok(o) => {
                skip(format_args!(
                    "useradd {name} failed: {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                ));
                return None;
            }
            Err(e) => {
                skip(format_args!("useradd cannot run: {e}"));
                return None;
            }
        }
        let id = |flag: &str| -> Option<u32> {
            let o = std::process::Command::new("id")
                .arg(flag)
                .arg(&name)
                .output()
                .ok()?;
            String::from_utf8_lossy(&o.stdout).trim().parse().ok()
        };
        let (Some(uid), Some(gid)) = (id("-u"), id("-g")) else {
            let _ = std::process::Command::new("userdel").arg(&name).status();
            skip(format_args!("id cannot tell the ids of {name}"));
            return None;
        };
        if !std::path::Path::new("/usr/bin/setpriv").exists() {
            let _ = std::process::Command::new("userdel").arg(&name).status();
            skip("setpriv (util-linux) is not installed");
            return None;
        }
        Some(ThrowawayUser { name, uid, gid })
    }

    /// `program` to be run as this user (through `setpriv`, with no
    /// supplementary groups).
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> std::process::Command {
        let mut c = std::process::Command::new("/usr/bin/setpriv");
        c.arg(format!("--reuid={}", self.uid))
            .arg(format!("--regid={}", self.gid))
            .arg("--clear-groups")
            .arg("--")
            .arg(program);
        c
    }

    /// Gives `path` to this user (`chown`).
    ///
    /// # Panics
    /// When `chown` fails.
    pub fn give(&self, path: &std::path::Path) {
        std::os::unix::fs::chown(path, Some(self.uid), Some(self.gid))
            .unwrap_or_else(|e| panic!("chown {} to {}: {e}", path.display(), self.name));
    }
}

impl Drop for ThrowawayUser {
    fn drop(&mut self) {
        let _ = std::process::Command::new("pkill")
            .args(["-KILL", "-U"])
            .arg(self.uid.to_string())
            .status();
        let _ = std::process::Command::new("userdel")
            .arg(&self.name)
            .status();
    }
}

/// File-offset ranges `[start, end)` of the named functions of an ELF
/// file (its symbol table): where samples and frames of those functions
/// fall. Panics on a missing symbol (a fixture that did not build right).
pub fn function_ranges(path: &std::path::Path, names: &[&str]) -> Vec<(u64, u64)> {
    use object::{Object, ObjectSegment, ObjectSymbol};
    let data = std::fs::read(path).unwrap();
    let obj = object::File::parse(&*data).unwrap();
    names
        .iter()
        .map(|name| {
            let sym = obj
                .symbols()
                .find(|s| s.name() == Ok(name))
                .unwrap_or_else(|| panic!("no symbol {name}"));
            let seg = obj
                .segments()
                .find(|g| g.address() <= sym.address() && sym.address() < g.address() + g.size())
                .unwrap();
            let start = sym.address() - seg.address() + seg.file_range().0;
            (start, start + sym.size())
        })
        .collect()
}

/// A C program built without unwind tables and split (see
/// [`split_without_unwind_tables`]).
#[derive(Debug, Clone)]
pub struct SplitBinary {
    /// The stripped binary: no `.eh_frame`, no `.debug_frame`, no symbols.
    pub stripped: std::path::PathBuf,
    /// The binary before stripping (its symbols: the same layout).
    pub full: std::path::PathBuf,
    /// Its separate debug file (`objcopy --only-keep-debug`): the
    /// `.debug_frame` is only there.
    pub debug: std::path::PathBuf,
    /// Its build-id.
    pub build_id: Vec<u8>,
}

/// Builds `source` as `dir/NAME` with `cc -O2 -g -fomit-frame-pointer
/// -fno-asynchronous-unwind-tables -fno-unwind-tables` (and `extra`),
/// unless `keep_start_eh_frame` drops the `.eh_frame` the C runtime's start
/// files bring (`_start`'s, all a real such binary has), splits the debug
/// file off and strips the binary. Panics when a tool fails.
pub fn split_without_unwind_tables(
    dir: &std::path::Path,
    name: &str,
    source: &str,
    extra: &[&str],
    keep_start_eh_frame: bool,
) -> SplitBinary {
    use std::process::Command;
    fn run(cmd: &mut Command) {
        let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
        assert!(out.status.success(), "{cmd:?}: {out:?}");
    }
    let src = dir.join(format!("{name}.c"));
    std::fs::write(&src, source).unwrap();
    let full = dir.join(format!("{name}.full"));
    run(Command::new("cc")
        .args([
            "-O2",
            "-g",
            "-fomit-frame-pointer",
            "-fno-asynchronous-unwind-tables",
            "-fno-unwind-tables",
        ])
        .args(extra)
        .arg("-o")
        .arg(&full)
        .arg(&src));
    if !keep_start_eh_frame {
        run(Command::new("objcopy")
            .args([
                "--remove-section",
                ".eh_frame",
                "--remove-section",
                ".eh_frame_hdr",
            ])
            .arg(&full));
    }
    let debug = dir.join(format!("{name}.debug"));
    run(Command::new("objcopy")
        .arg("--only-keep-debug")
        .arg(&full)
        .arg(&debug));
    let stripped = dir.join(name);
    run(Command::new("strip")
        .args(["--strip-all", "-o"])
        .arg(&stripped)
        .arg(&full));
    let data = std::fs::read(&stripped).unwrap();
    let file = object::File::parse(&*data).expect("an ELF file");
    let build_id = object::Object::build_id(&file)
        .ok()
        .flatten()
        .expect("a build-id")
        .to_vec();
    SplitBinary {
        stripped,
        full,
        debug,
        build_id,
    }
}
