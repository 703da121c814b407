//! Throttling is reported, not hidden. This lowers the kernel's
//! `perf_event_max_sample_rate` for a moment, so it lives in its own test
//! binary (cargo runs test binaries one after another) and restores the
//! value however the test ends.

use profkit_testsupport::skip;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

const PROFCTL: &str = env!("CARGO_BIN_EXE_profctl");
const SYSCTL: &str = "/proc/sys/kernel/perf_event_max_sample_rate";

struct Restore(String);

impl Drop for Restore {
    fn drop(&mut self) {
        let _ = std::fs::write(SYSCTL, &self.0);
    }
}

/// Stops the daemon when the test ends, however it ends.
struct StopOnDrop(std::path::PathBuf);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        let _ = Command::new(PROFCTL)
            .arg("stop")
            .arg("--session-dir")
            .arg(&self.0)
            .output();
    }
}

#[test]
fn sampling_faster_than_the_kernel_allows_is_reported_as_throttling() {
    let old = match std::fs::read_to_string(SYSCTL) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("SKIP: cannot read {SYSCTL}: {e}");
            return;
        }
    };
    if std::fs::write(SYSCTL, "1000").is_err() {
        skip(format_args!("{SYSCTL} cannot be lowered (needs root)"));
        return;
    }
    let _restore = Restore(old);
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("s");
    let _stop = StopOnDrop(d.clone());
    let d = d.to_str().unwrap();
    // Period 200 µs of cpu-clock = 5 kHz, five times the lowered maximum.
    let o = Command::new(PROFCTL)
        .args(["start", "-c", "200000", "--session-dir", d])
        .output()
        .unwrap();
    if !o.status.success() {
        let t = String::from_utf8_lossy(&o.stderr).to_string();
        if t.contains("no permission") {
            skip(t);
            return;
        }
        panic!("start failed: {t}");
    }
    let mut busy = Command::new("taskset")
        .args(["-c", "0", "sh", "-c", "while :; do :; done"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let o = Command::new(PROFCTL)
        .args(["stop", "--session-dir", d])
        .output()
        .unwrap();
    let _ = busy.kill();
    let _ = busy.wait();
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        o.status.success(),
        "{out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(
        out.contains("throttled sampling") && out.contains("cpu0"),
        "{out}"
    );
    let r = profkit_eventlog::SessionReader::open(Path::new(d).join("session.pkl")).unwrap();
    let footer = r.footer().unwrap();
    let throttles: u64 = footer.accounting.iter().map(|a| a.throttle_events).sum();
    assert!(throttles > 0);
    // ...and each is in the log at its place.
    let mut markers = 0u64;
    for c in r.chunks() {
        r.for_each_sample(
            c,
            |_| {},
            |m| {
                if let profkit_eventlog::Event::Throttle {
                    throttled: true, ..
                } = m
                {
                    markers += 1;
                }
            },
        )
        .unwrap();
    }
    assert_eq!(markers, throttles);
}
