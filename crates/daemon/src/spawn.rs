//! Starting the daemon as a background process (`profctl start`).

use std::io::{Read, Seek, SeekFrom};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use std::os::unix::process::CommandExt;

use crate::client::Client;
use crate::dir::{SessionDir, DAEMON_LOG};
use crate::error::{Error, Result};
use crate::lock::{daemon_state, DaemonState};
use crate::protocol::{Request, Response};
use crate::status::StatusReply;

/// How long [`spawn_daemon`] waits by default for the daemon to answer.
pub const DEFAULT_READY_TIMEOUT: Duration = Duration::from_secs(30);

/// How much of `daemon.log` an error quotes.
const LOG_TAIL_LINES: usize = 20;

/// Start `cmd` as the session's daemon in the background and wait until it
/// is ready.
///
/// `cmd` is the daemon's command line (program, arguments, environment),
/// chosen by the caller (typically `profctl` re-executing itself with a
/// hidden subcommand); this function sets its stdin to `/dev/null`, its
/// stdout and stderr to `DIR/daemon.log`, and puts it in a process group
/// of its own so the terminal's Ctrl-C does not reach it.
///
/// *Ready* means: the control socket answers `status` with the child's
/// pid (the daemon does this once [`Daemon::run`](crate::Daemon::run)
/// serves; no separate readiness channel is needed). If the child exits
/// first, the error is [`Error::DaemonExited`] quoting what it wrote to
/// `daemon.log` since the start, which is where its own error message
/// ends up. After `timeout` the child is killed and the error is
/// [`Error::ReadyTimeout`].
///
/// A daemon that already runs for `dir` is reported as
/// [`Error::AlreadyRunning`] before anything is started.
///
/// The returned [`Child`] may simply be dropped: that neither kills nor
/// waits for the daemon.
pub fn spawn_daemon(mut cmd: Command, dir: &SessionDir, timeout: Duration) -> Result<Child> {
    if let DaemonState::Running { pid } = daemon_state(dir.path())? {
        return Err(Error::AlreadyRunning {
            dir: dir.path().into(),
            pid,
        });
    }
    let log = dir.open_append(DAEMON_LOG)?;
    let log_start = log
        .metadata()
        .map_err(|e| Error::io("stat", dir.join(DAEMON_LOG), e))?
        .len();
    let log_err = log
        .try_clone()
        .map_err(|e| Error::io("duplicate descriptor of", dir.join(DAEMON_LOG), e))?;
    let exe = std::path::PathBuf::from(cmd.get_program());
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log_err)
        .process_group(0)
        .spawn()
        .map_err(|source| Error::Spawn { exe, source })?;
    let pid = child.id();

    let start = Instant::now();
    loop {
        match child.try_wait() {
            Ok(Some(status)) => {
                return Err(Error::DaemonExited {
                    status: status.to_string(),
                    log: log_tail(dir, log_start),
                })
            }
            Ok(None) => {}
            Err(e) => return Err(Error::io("wait for", format!("daemon pid {pid}"), e)),
        }
        let elapsed = start.elapsed();
        if elapsed >= timeout {
            let _ = child.kill();
            let _ = child.wait();
            return Err(Error::ReadyTimeout {
                pid,
                after: timeout,
                log: log_tail(dir, log_start),
            });
        }
        let budget = (timeout - elapsed).min(Duration::from_secs(2));
        if let Ok(Response::Ok(v)) = Client::connect(dir.path())
            .and_then(|c| c.request_with_timeout(Request::Status, budget))
        {
            // Another daemon may have won a race for the lock; then ours
            // exits with AlreadyRunning and the next try_wait reports it.
            if StatusReply::from_value(v).is_ok_and(|r| r.daemon.pid == pid) {
                return Ok(child);
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The last lines written to `daemon.log` after byte `from`.
fn log_tail(dir: &SessionDir, from: u64) -> String {
    let mut text = String::new();
    if let Ok(mut f) = dir.open_read(DAEMON_LOG) {
        if f.seek(SeekFrom::Start(from)).is_ok() {
            let mut bytes = Vec::new();
            let _ = f.take(1 << 20).read_to_end(&mut bytes);
            text = String::from_utf8_lossy(&bytes).into_owned();
        }
    }
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(LOG_TAIL_LINES)..].join("\n")
}
