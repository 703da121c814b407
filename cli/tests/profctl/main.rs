//! profctl end to end: the built binary against the live kernel.
//!
//! Tests that need perf_event_open skip with a printed reason when it is
//! unavailable, unless PROFKIT_REQUIRE_PERF=1 (CI), where they fail.
//! The tests are in the modules below, by topic; the helpers they share
//! are here.

mod archive;
mod churn;
mod disk;
mod errors;
mod full_disk;
mod hostile;
mod jit_hostile;
mod lifecycle;
mod record;
mod rotation;
mod service;
mod unprivileged;

use profkit_eventlog::{Event, LostKind, SessionReader};
use profkit_testsupport::perf_ok;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

#[path = "../common/profctl.rs"]
mod common;
use common::{profctl, text, StopOnDrop, PROFCTL};

fn busy_on(cpu: u32) -> Child {
    Command::new("taskset")
        .args(["-c", &cpu.to_string(), "sh", "-c", "while :; do :; done"])
        .stdout(Stdio::null())
        .spawn()
        .expect("taskset")
}

fn session(dir: &Path) -> PathBuf {
    dir.join("s").join("session.pkl")
}

struct Decoded {
    per_cpu_pid: BTreeMap<(u32, u32), u64>,
    lost_markers: std::collections::HashMap<(u32, LostKind), u64>,
    comms: BTreeMap<u32, String>,
}

fn decode(path: &Path) -> (SessionReader, Decoded) {
    let r = SessionReader::open(path).unwrap();
    let mut d = Decoded {
        per_cpu_pid: BTreeMap::new(),
        lost_markers: Default::default(),
        comms: BTreeMap::new(),
    };
    for c in r.chunks() {
        r.for_each_sample(
            c,
            |s| *d.per_cpu_pid.entry((s.cpu, s.pid)).or_default() += 1,
            |m| match m {
                Event::Lost { cpu, kind, count } => {
                    *d.lost_markers.entry((cpu, kind)).or_default() += count
                }
                Event::Comm { tid, comm, .. } => {
                    d.comms.insert(tid, comm);
                }
                _ => {}
            },
        )
        .unwrap();
    }
    (r, d)
}

/// Unmounts a tmpfs when the test ends, however it ends.
struct Mount(PathBuf);

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// A 1 MiB tmpfs at `tmp/mnt`, unmounted when the guard drops; None (with
/// the reason printed) where it cannot be mounted.
fn small_tmpfs(tmp: &Path) -> Option<Mount> {
    if rustix::process::geteuid().as_raw() != 0 {
        eprintln!("SKIP: mounting a small tmpfs needs root");
        return None;
    }
    let mnt = tmp.join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let ok = Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs"])
        .arg(&mnt)
        .status();
    if !ok.map(|s| s.success()).unwrap_or(false) {
        eprintln!("SKIP: cannot mount a tmpfs here");
        return None;
    }
    Some(Mount(mnt))
}

/// Fills the file system of `dir` to the last block.
fn fill(dir: &Path) {
    use std::io::Write;
    let mut f = std::fs::File::create(dir.join("fill")).unwrap();
    let block = vec![0u8; 4096];
    while f.write_all(&block).is_ok() {}
}

/// `profctl status --json`: one JSON object on stdout.
fn status_json(dir: &Path, ds: &str) -> serde_json::Value {
    let o = profctl(dir, &["status", "--json", "--session-dir", ds]);
    assert!(o.status.success(), "{}", text(&o));
    let t = String::from_utf8_lossy(&o.stdout).to_string();
    serde_json::from_str(&t).unwrap_or_else(|e| panic!("status JSON: {e}: {t}"))
}

/// Runs profctl as uid 65534 in a directory it owns.
fn as_nobody(dir: &Path, args: &[&str]) -> Option<Output> {
    let paranoid = profkit_perf::read_sysctl("kernel.perf_event_paranoid");
    if !Path::new("/usr/bin/setpriv").exists()
        || rustix::process::geteuid().as_raw() != 0
        || paranoid.is_none_or(|p| p < 1)
    {
        eprintln!("SKIP: needs root, setpriv and perf_event_paranoid >= 1 (paranoid {paranoid:?})");
        return None;
    }
    // The binary must be reachable by nobody.
    let bin = dir.join("profctl");
    std::fs::copy(PROFCTL, &bin).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::chown(dir, Some(65534), Some(65534)).unwrap();
    Some(
        Command::new("/usr/bin/setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "--inh-caps=-all",
            ])
            .arg(&bin)
            .args(args)
            .current_dir(dir)
            .env("HOME", dir)
            .output()
            .unwrap(),
    )
}
