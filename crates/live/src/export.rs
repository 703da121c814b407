//! `profctl start --export URL`: each closed part of a rotated session,
//! and the last part at stop, pushed to a fleet store.
//!
//! The daemon does not export itself: it links no HTTP client and no
//! symbolizer for reports, and a slow or dead store must never hold up a
//! round. It runs `profctl __export` (the same code as `profctl export`)
//! as a child after a part closes, one at a time, and looks at how it
//! ended on the next rounds. The store's URL, with its credentials, goes
//! to the daemon and to each child in the environment
//! ([`EXPORT_URL_ENV`]), never in arguments (process titles), the start
//! configuration, logs or status; the child's errors name the store
//! redacted.
//!
//! Parts wait on disk until exported: a failed export is tried again
//! after 1 s, 2 s, 4 s … at most [`MAX_BACKOFF`], each time for every part
//! not yet in the store (the store keeps a part once, whatever happens).
//! They count against `--max-disk` like every part; one deleted by the
//! retention rules before it was exported is counted
//! ([`ExportState::dropped`]). `status` says how many wait
//! ([`ExportState::waiting`]). At stop the last part is exported too,
//! within [`STOP_WAIT`]; what is left waits for `profctl export`.
//!
//! Each export writes [`EXPORT_STATE_FILE`] in the session directory: the
//! newest part number up to which every part is in the store.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

/// The environment variable that carries the store's URL to the daemon
/// and its export children.
pub const EXPORT_URL_ENV: &str = "PROFKIT_EXPORT_URL";
/// What an export writes in the session directory: `{"through": N}`.
pub const EXPORT_STATE_FILE: &str = "export.state";
/// The export children's standard error (the newest attempt's).
pub const EXPORT_LOG_FILE: &str = "export.log";
/// The longest wait between two attempts.
pub const MAX_BACKOFF: Duration = Duration::from_secs(300);
/// How long the stop waits for the last export.
pub const STOP_WAIT: Duration = Duration::from_secs(30);
/// The longest one export child may run: past it, it is killed, counted as
/// a failure and tried again after the backoff (the parts it did export
/// stay exported). Symbolizing a part is bounded per binary, but a host
/// whose binaries stall every read must not hold every later part back
/// unseen.
pub const MAX_EXPORT_TIME: Duration = Duration::from_secs(600);

/// `--export`: where the rows go is in [`EXPORT_URL_ENV`]; this is the
/// rest.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExportConfig {
    /// The host name stored with the rows (default: the session's).
    #[serde(default)]
    pub host: Option<String>,
}

/// What status and stop say of the export.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExportState {
    /// Every part up to this number is in the store (0: none yet).
    pub through: u64,
    /// Closed parts not in the store yet.
    pub waiting: u64,
    /// Exports run.
    pub attempts: u64,
    /// Of them, failed.
    pub failures: u64,
    /// Parts deleted by the retention rules before they were exported.
    pub dropped: u64,
    /// The newest failure's message (the store's URL redacted).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    /// Milliseconds until the next attempt, when one waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_in_ms: Option<u64>,
}

/// The newest part number up to which every part is in the store, as the
/// last export in `dir` wrote it (0 when none did).
pub fn exported_through(dir: &Path) -> u64 {
    #[derive(Deserialize)]
    struct State {
        through: u64,
    }
    let policy = profkit_untrusted::Policy::regular()
        .no_follow()
        .max_bytes(4096);
    profkit_untrusted::open_untrusted(&dir.join(EXPORT_STATE_FILE), &policy)
        .ok()
        .and_then(|o| o.read_all().ok())
        .and_then(|b| serde_json::from_slice::<State>(&b).ok())
        .map_or(0, |s| s.through)
}

/// Writes [`EXPORT_STATE_FILE`] in `dir` (beside, then renamed over).
///
/// # Errors
/// The file cannot be written.
pub fn write_exported_through(dir: &Path, through: u64) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = dir.join(format!(".{EXPORT_STATE_FILE}.{}", std::process::id()));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&tmp)?;
    std::io::Write::write_all(&mut f, format!("{{\"through\":{through}}}\n").as_bytes())?;
    drop(f);
    std::fs::rename(&tmp, dir.join(EXPORT_STATE_FILE)).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}

impl std::fmt::Debug for Exporter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exporter")
            .field("dir", &self.dir)
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

/// Runs the export children of a recording session.
pub struct Exporter {
    program: PathBuf,
    /// The store's URL, credentials included: only ever in the children's
    /// environment.
    url: String,
    dir: PathBuf,
    config: ExportConfig,
    child: Option<Child>,
    /// When the running child started.
    started: Instant,
    /// [`MAX_EXPORT_TIME`], shorter in tests.
    max_time: Duration,
    /// A part closed since the last export that succeeded.
    wanted: bool,
    next_try: Instant,
    backoff: Duration,
    state: ExportState,
}

impl Exporter {
    /// Exports the parts of the session in `dir` with `program __export`
    /// to the store at `url`.
    pub fn new(program: PathBuf, dir: PathBuf, config: ExportConfig, url: String) -> Exporter {
        let through = exported_through(&dir);
        Exporter {
            program,
            url,
            dir,
            config,
            child: None,
            started: Instant::now(),
            max_time: MAX_EXPORT_TIME,
            wanted: false,
            next_try: Instant::now(),
            backoff: Duration::from_secs(1),
            state: ExportState {
                through,
                ..ExportState::default()
            },
        }
    }

    /// Kills an export child after `max` instead of [`MAX_EXPORT_TIME`].
    pub fn with_max_time(mut self, max: Duration) -> Exporter {
        self.max_time = max;
        self
    }

    /// A part was closed (a rotation): export at the next chance.
    pub fn part_closed(&mut self) {
        self.wanted = true;
    }

    /// The retention rules deleted the parts `numbers`.
    pub fn removed(&mut self, numbers: &[u64]) {
        let through = self.state.through;
        self.state.dropped += numbers.iter().filter(|&&n| n > through).count() as u64;
    }

    /// After each round: how the running export ended, and a new one if
    /// one is due. `closed`: the closed parts' numbers now on disk.
    pub fn round(&mut self, closed: std::ops::Range<u64>) {
        self.poll();
        if self.child.is_none() && self.wanted && Instant::now() >= self.next_try {
            self.spawn(false);
        }
        self.count_waiting(closed);
    }

    fn count_waiting(&mut self, closed: std::ops::Range<u64>) {
        self.state.waiting = closed
            .end
            .saturating_sub(closed.start.max(self.state.through + 1));
    }

    /// What status says.
    pub fn state(&self) -> ExportState {
        let mut s = self.state.clone();
        if self.child.is_none() && self.wanted {
            s.retry_in_ms = Some(
                self.next_try
                    .saturating_duration_since(Instant::now())
                    .as_millis() as u64,
            );
        }
        s
    }

    /// At stop, after the last part (number `last`) is closed: waits for a
    /// running export, then exports everything left, the last part
    /// included, within `wait`; returns what stop says.
    pub fn finish(
        &mut self,
        wait: Duration,
        closed: std::ops::Range<u64>,
        last: u64,
    ) -> ExportState {
        let deadline = Instant::now() + wait;
        if self.wait_until(deadline) {
            self.spawn(true);
            self.wait_until(deadline);
        }
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
            self.state.failures += 1;
            self.state.last_error = Some(format!(
                "the export at stop took longer than {}s; run `profctl export` to finish it",
                wait.as_secs()
            ));
        }
        self.count_waiting(closed);
        if last > self.state.through {
            self.state.waiting += 1;
        }
        self.wanted = false;
        self.state.clone()
    }

    /// Waits for the running export until `deadline`: true when none runs.
    fn wait_until(&mut self, deadline: Instant) -> bool {
        while self.child.is_some() {
            self.poll();
            if self.child.is_none() {
                break;
            }
            if Instant::now() >= deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        true
    }

    fn spawn(&mut self, last: bool) {
        let log = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(self.dir.join(EXPORT_LOG_FILE));
        let mut cmd = Command::new(&self.program);
        cmd.arg("__export").arg("--session-dir").arg(&self.dir);
        cmd.env(EXPORT_URL_ENV, &self.url);
        if last {
            cmd.arg("--last");
        }
        if let Some(h) = &self.config.host {
            cmd.arg("--host").arg(h);
        }
        cmd.stdin(Stdio::null()).stdout(Stdio::null());
        match log {
            Ok(f) => cmd.stderr(f),
            Err(_) => cmd.stderr(Stdio::null()),
        };
        self.state.attempts += 1;
        self.wanted = false;
        match cmd.spawn() {
            Ok(c) => {
                self.child = Some(c);
                self.started = Instant::now();
            }
            Err(e) => self.failed(format!("cannot run {}: {e}", self.program.display())),
        }
    }

    fn poll(&mut self) {
        let Some(c) = self.child.as_mut() else { return };
        match c.try_wait() {
            Ok(None) if self.started.elapsed() >= self.max_time => {
                let _ = c.kill();
                let _ = c.wait();
                self.child = None;
                self.state.through = exported_through(&self.dir).max(self.state.through);
                self.failed(format!(
                    "an export ran longer than {} s and was stopped; it is tried again later \
                     (see {} in the session directory)",
                    self.max_time.as_secs(),
                    EXPORT_LOG_FILE
                ));
            }
            Ok(None) => {}
            Ok(Some(st)) => {
                self.child = None;
                self.state.through = exported_through(&self.dir).max(self.state.through);
                if st.success() {
                    self.backoff = Duration::from_secs(1);
                    self.state.last_error = None;
                } else {
                    let log = log_tail(&self.dir.join(EXPORT_LOG_FILE));
                    let why = log
                        .lines()
                        .rev()
                        .find(|l| !l.trim().is_empty())
                        .unwrap_or("the export failed")
                        .to_owned();
                    self.failed(why);
                }
            }
            Err(e) => {
                self.child = None;
                self.failed(format!("waiting for the export: {e}"));
            }
        }
    }

    fn failed(&mut self, why: String) {
        self.state.failures += 1;
        self.state.last_error = Some(why);
        self.wanted = true;
        self.next_try = Instant::now() + self.backoff;
        self.backoff = (self.backoff * 2).min(MAX_BACKOFF);
    }
}

/// The last 4 KiB of the export child's stderr (its last line is the
/// error; what comes before is not read).
fn log_tail(path: &Path) -> String {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut f) = std::fs::File::open(path) else {
        return String::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = f.seek(SeekFrom::Start(len.saturating_sub(4096)));
    let mut buf = Vec::new();
    let _ = f.take(4096).read_to_end(&mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Waiting parts are the closed ones past `export.state`; a part
    /// deleted by retention before its export is counted as dropped; a
    /// program that cannot run is a failure with a retry, and stop counts
    /// the last part as waiting.
    #[test]
    fn waiting_dropped_and_a_failed_start_are_counted() {
        let d = tempfile::tempdir().unwrap();
        write_exported_through(d.path(), 2).unwrap();
        let mut e = Exporter::new(
            d.path().join("no-such-profctl"),
            d.path().to_owned(),
            ExportConfig::default(),
            "clickhouse://127.0.0.1:9/x".into(),
        );
        assert_eq!(e.state().through, 2);
        e.round(1..5);
        assert_eq!(e.state().waiting, 2, "parts 3 and 4");
        e.removed(&[1, 2, 3]);
        assert_eq!(e.state().dropped, 1, "part 3 was not exported");
        e.part_closed();
        e.round(4..6);
        let s = e.state();
        assert_eq!((s.attempts, s.failures, s.waiting), (1, 1, 2));
        assert!(s.last_error.unwrap().contains("cannot run"));
        assert!(s.retry_in_ms.is_some());
        let s = e.finish(Duration::from_millis(10), 4..6, 6);
        assert_eq!(s.waiting, 3, "4, 5 and the last part");
    }

    /// An export child that hangs is killed after the time box, counted
    /// as a failure with a retry, and the next one starts after the
    /// backoff.
    #[test]
    fn a_hung_export_is_killed_and_tried_again() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let prog = d.path().join("hangs");
        std::fs::write(&prog, "#!/bin/sh\nexec sleep 60\n").unwrap();
        std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o755)).unwrap();
        let mut e = Exporter::new(
            prog,
            d.path().to_owned(),
            ExportConfig::default(),
            "clickhouse://127.0.0.1:9/x".into(),
        )
        .with_max_time(Duration::from_millis(200));
        e.part_closed();
        e.round(1..2);
        assert_eq!(e.state().attempts, 1);
        let t = Instant::now();
        while e.state().failures == 0 {
            assert!(t.elapsed() < Duration::from_secs(20), "never killed");
            std::thread::sleep(Duration::from_millis(50));
            e.round(1..2);
        }
        let s = e.state();
        assert!(s.last_error.unwrap().contains("ran longer than"));
        assert!(s.retry_in_ms.is_some());
        assert_eq!(s.waiting, 1);
        // After the backoff (1 s) it is tried again.
        std::thread::sleep(Duration::from_millis(1100));
        e.round(1..2);
        assert_eq!(e.state().attempts, 2);
        e.finish(Duration::from_millis(10), 1..2, 2);
    }
}
