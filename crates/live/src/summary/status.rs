//! `profctl status`: the daemon's state (running, stopping, died, not
//! running), what the session samples and its size, and while it runs the
//! recorder's [`Summary`], read from the daemon's reply.

use serde::{Deserialize, Serialize};

use super::text::{human_bytes, one_line};
use super::Summary;

/// What `profctl status` shows: the daemon's state, what it samples, the
/// session's size and, while it runs, the recorder's [`Summary`]. Its
/// serde form, the summary's keys at the top level, is `profctl status
/// --json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Status {
    /// `running`, `stopping`, `died` or `not running`.
    pub state: String,
    /// The daemon's pid, when known.
    pub pid: Option<u32>,
    /// The session directory, for display.
    pub session_dir: String,
    /// The sampled event's name (from the session header).
    pub event: Option<String>,
    /// Samples per second per CPU, in frequency mode.
    pub frequency_hz: Option<u64>,
    /// Events per sample, in period mode.
    pub period: Option<u64>,
    /// Milliseconds between sync rounds.
    pub sync_interval_ms: Option<f64>,
    /// Seconds since the daemon started.
    pub uptime_s: Option<f64>,
    /// The session file's size.
    pub session_file_bytes: Option<u64>,
    /// All files in the session directory.
    pub session_dir_bytes: Option<u64>,
    /// Rounds that failed.
    #[serde(default)]
    pub round_errors: u64,
    /// The last failed round's message.
    pub last_round_error: Option<String>,
    /// The recorder's counters (running only).
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<Summary>,
}

/// How much of a session file is read for its header.
const HEADER_READ: u64 = 64 << 10;

/// The header of the session file at `path`, if it can be read: a regular
/// file (opened without following a link, non-blocking), its first
/// [`HEADER_READ`] bytes.
fn read_header(path: &std::path::Path) -> Option<profkit_eventlog::SessionHeader> {
    use std::io::Read;
    let f =
        profkit_untrusted::open_untrusted(path, &profkit_untrusted::Policy::regular().no_follow())
            .ok()?
            .file;
    let mut data = Vec::new();
    f.take(HEADER_READ).read_to_end(&mut data).ok()?;
    profkit_eventlog::SessionReader::from_bytes(data, path)
        .ok()
        .map(|r| r.header().clone())
}

/// Bytes of the regular files under `dir` (links not followed; at most
/// 10,000 entries looked at).
fn dir_bytes(dir: &std::path::Path) -> Option<u64> {
    let mut total = 0;
    let mut budget = 10_000u32;
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).ok()?.flatten() {
            budget = budget.checked_sub(1)?;
            let Ok(m) = e.metadata() else { continue };
            if m.is_dir() {
                todo.push(e.path());
            } else if m.is_file() {
                total += m.len();
            }
        }
    }
    Some(total)
}

impl Status {
    /// The keys of `profctl status --json`, for its help (the test
    /// `every_status_json_key_is_in_the_help` keeps the two together).
    pub const JSON_KEYS: &'static str = "--json KEYS:
  state               running, stopping, died or not running
  pid                 the daemon's pid (null if unknown)
  session_dir         the session directory
  event, frequency_hz, period, sync_interval_ms   from the session header
  uptime_s            seconds since the daemon started
  session_file_bytes, session_dir_bytes           file sizes (bytes)
  round_errors, last_round_error                  failed sync rounds
  running only, the recorder's counters:
  rounds, last_round_ms, elapsed_s, bytes_written
  processes, threads_named, tasks_announced, stacks, stack_table_bytes
  cpus                [{cpu, samples, lost, lost_pct, lost_ring, lost_overflow,
                       lost_disk_full, lost_no_mapping, lost_no_task,
                       lost_reconcile, kernel_lost, throttle_events,
                       stacks_unknown, stacks_truncated, user_stacks_cut}]
  unwind, unwind_refused, unwind_demoted          DWARF unwinding
  build_ids_refused, files_unidentified, unattributed   build-id and unattributed notes
  off_cpu             {switches, intervals, lost, kernel_lost, no_stack, unpaired,
                       dropped, pending, open} with --off-cpu
  parts               {part, closed, closed_bytes, removed, rule, errors} of a
                      rotated session (--rotate, SIGHUP, profctl rotate)
  disk                {budget_bytes, budget_source, parts_bytes, extras_bytes,
                       refused: {REASON: N}, refused_named: [\"PATH (uid U): why\"]}";

    /// The status of `session_dir` in `state` (`not running`, `died`):
    /// the session's size, what the header says it samples.
    pub fn of_dir(state: &str, pid: Option<u32>, session_dir: &std::path::Path) -> Status {
        let file = session_dir.join(profkit_daemon::SESSION_LOG);
        let header = read_header(&file);
        Status {
            state: state.into(),
            pid,
            session_dir: session_dir.display().to_string(),
            event: header.as_ref().map(|h| h.event.name.clone()),
            frequency_hz: header.as_ref().and_then(|h| h.event.frequency),
            period: header.as_ref().and_then(|h| h.event.period),
            sync_interval_ms: header.as_ref().map(|h| f64::from(h.sync_interval_ms)),
            session_file_bytes: std::fs::symlink_metadata(&file)
                .ok()
                .filter(|m| m.is_file())
                .map(|m| m.len()),
            session_dir_bytes: dir_bytes(session_dir),
            ..Default::default()
        }
    }

    /// The status of a running daemon from its status reply
    /// ([`profkit_daemon::StatusReply`], whose engine half is a [`Summary`]);
    /// `stopping` when the engine has stopped.
    pub fn running(
        pid: Option<u32>,
        session_dir: &std::path::Path,
        reply: &profkit_daemon::StatusReply,
    ) -> Status {
        let mut s = Status::of_dir("running", pid, session_dir);
        let d = &reply.daemon;
        s.pid = s.pid.or(Some(d.pid));
        s.uptime_s = Some(d.uptime_s);
        s.sync_interval_ms = Some(d.sync_interval_ms);
        s.round_errors = d.round_errors;
        s.last_round_error = d.last_round_error.clone();
        s.summary = serde_json::from_value(reply.engine.clone()).ok();
        if s.summary.is_none() {
            s.state = "stopping".into();
        }
        s
    }

    /// `profctl status` for people: the state line, then (running) what is
    /// sampled, for how long, the session's size and
    /// [`Summary::status_text`].
    pub fn text(&self) -> String {
        let pid = self.pid.map(|p| p.to_string()).unwrap_or("?".into());
        let file = std::path::Path::new(&self.session_dir).join(profkit_daemon::SESSION_LOG);
        let mut out = match self.state.as_str() {
            "not running" => format!("profkit: no daemon running for {}\n", self.session_dir),
            "died" => format!(
                "profkit: the daemon (pid {pid}) died; its complete rounds are kept in {}\n",
                file.display()
            ),
            state => format!(
                "profkit: {state} (pid {pid}), session {}\n",
                self.session_dir
            ),
        };
        if self.state != "running" && self.state != "stopping" {
            return out;
        }
        let rate = match (self.frequency_hz, self.period) {
            (Some(f), _) => format!(" at {f} Hz"),
            (None, Some(p)) => format!(", one sample every {p} events"),
            _ => String::new(),
        };
        let sync = self
            .sync_interval_ms
            .map(|ms| format!(", sync every {ms} ms"))
            .unwrap_or_default();
        out.push_str(&format!(
            "event:    {}{rate}{sync}\n",
            self.event.as_deref().map(one_line).unwrap_or("?".into())
        ));
        if let Some(up) = self.uptime_s {
            out.push_str(&format!("uptime:   {up:.1} s\n"));
        }
        let size = |b: Option<u64>| b.map(human_bytes).unwrap_or("?".into());
        out.push_str(&format!(
            "session:  {} {}, directory {}\n",
            profkit_daemon::SESSION_LOG,
            size(self.session_file_bytes),
            size(self.session_dir_bytes)
        ));
        if let Some(s) = &self.summary {
            out.push_str(&s.status_text());
        }
        if self.round_errors > 0 {
            out.push_str(&format!(
                "note: {} rounds failed, the last: {}\n",
                self.round_errors,
                one_line(self.last_round_error.as_deref().unwrap_or("?"))
            ));
        }
        out
    }
}
