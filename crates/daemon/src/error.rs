//! The crate's one error type.

use std::io;
use std::path::PathBuf;
use std::time::Duration;

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong in the daemon machinery.
///
/// Every message names the path or pid involved and, where there is one, what
/// the user can do about it; `profctl` prints them as they are.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The session directory (or a parent) could not be created.
    #[error("cannot create session directory {path}: {source}")]
    CreateDir {
        /// The session directory.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },

    /// A file (or something else) is where the session directory should be.
    #[error("{path} exists but is not a directory; remove it or choose another --session-dir")]
    NotADirectory {
        /// The offending path.
        path: PathBuf,
    },

    /// The session directory does not exist (and we were asked not to create it).
    #[error("session directory {path} does not exist; run `profctl start` first or pass the right --session-dir")]
    NoSuchDir {
        /// The session directory.
        path: PathBuf,
    },

    /// A symbolic link where profkit expected a real directory or file.
    ///
    /// profkit never follows links inside (or as) the session directory, so a
    /// link planted there cannot redirect its writes.
    #[error("refusing to use {path}: it is a symbolic link (profkit does not follow links in the session directory); remove it, or pass the real path")]
    Symlink {
        /// The link.
        path: PathBuf,
    },

    /// The session directory belongs to another user.
    #[error("refusing to use session directory {path}: it is owned by uid {owner}, not by you (uid {uid}); choose another --session-dir")]
    NotOwned {
        /// The session directory.
        path: PathBuf,
        /// Its owner.
        owner: u32,
        /// Our effective uid.
        uid: u32,
    },

    /// The session directory is writable by group or others.
    #[error("refusing to use session directory {path}: it is writable by group or others (mode {mode:04o}); run `chmod go-w {path}` or choose another --session-dir")]
    InsecureDir {
        /// The session directory.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },

    /// We cannot write into the session directory.
    #[error("session directory {path} is not writable: {source}; fix its permissions or choose another --session-dir")]
    NotWritable {
        /// The session directory.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },

    /// A name given to [`SessionDir`](crate::SessionDir) was not a plain file name.
    #[error(
        "invalid file name {name:?} in a session directory: expected one plain path component"
    )]
    InvalidFileName {
        /// The name.
        name: String,
    },

    /// A file or directory operation failed.
    #[error("cannot {what} {path}: {source}")]
    Io {
        /// What we were doing ("open", "read", "remove", ...).
        what: &'static str,
        /// The path involved.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },

    /// Another daemon holds the session lock.
    #[error("a profkit daemon ({}) is already running for {dir}; stop it with `profctl stop` or use another --session-dir", fmt_pid(*.pid))]
    AlreadyRunning {
        /// The session directory.
        dir: PathBuf,
        /// The running daemon's pid, if it could be read from the lock file.
        pid: Option<u32>,
    },

    /// No daemon for this session directory: no control socket.
    #[error("no profkit daemon is running for {dir} (no control socket); start one with `profctl start`")]
    NotRunning {
        /// The session directory.
        dir: PathBuf,
    },

    /// A daemon holds the lock but is not serving its socket yet.
    #[error("the profkit daemon for {dir} ({}) is still starting (no control socket yet); try again in a moment", fmt_pid(*.pid))]
    Starting {
        /// The session directory.
        dir: PathBuf,
        /// The starting daemon's pid, if known.
        pid: Option<u32>,
    },

    /// The control socket exists but nobody listens on it.
    #[error("the profkit daemon for {dir} ({}) is not running: its control socket exists but refuses connections, so it probably died; see {dir}/daemon.log, then `profctl start` again", fmt_pid(*.pid))]
    DaemonDied {
        /// The session directory.
        dir: PathBuf,
        /// The pid it left in `daemon.pid`, if any.
        pid: Option<u32>,
    },

    /// Connecting to the control socket failed for another reason.
    #[error("cannot connect to the profkit daemon at {path}: {source}{}", if .source.kind() == std::io::ErrorKind::PermissionDenied { "; only the user who started the daemon (or root) may control it" } else { "" })]
    Connect {
        /// The socket path.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },

    /// The process listening on the control socket is neither ours nor
    /// root's: not a profkit daemon this user started.
    #[error("the control socket at {path} is served by uid {uid}, not by you (uid {me}) or root: not talking to it; check who put it there")]
    ForeignServer {
        /// The socket path.
        path: PathBuf,
        /// The server's uid (SO_PEERCRED).
        uid: u32,
        /// Our effective uid.
        me: u32,
    },

    /// The daemon did not answer in time.
    #[error("the profkit daemon for {dir} did not answer `{request}` within {} s; see {dir}/daemon.log", .after.as_secs_f64())]
    Timeout {
        /// The session directory.
        dir: PathBuf,
        /// The request name.
        request: &'static str,
        /// How long we waited.
        after: Duration,
    },

    /// The daemon closed the connection without an answer.
    #[error("the profkit daemon for {dir} closed the connection without answering `{request}` (it may have crashed); see {dir}/daemon.log")]
    ConnectionClosed {
        /// The session directory.
        dir: PathBuf,
        /// The request name.
        request: &'static str,
    },

    /// Sending a request or reading the answer failed.
    #[error("talking to the profkit daemon for {dir} (`{request}`) failed: {source}")]
    Transport {
        /// The session directory.
        dir: PathBuf,
        /// The request name.
        request: &'static str,
        /// The underlying error.
        source: io::Error,
    },

    /// The peer sent something that is not the control protocol.
    #[error("malformed control message from {peer}: {detail}")]
    Protocol {
        /// Who sent it ("the daemon for DIR", "client pid N").
        peer: String,
        /// What was wrong.
        detail: String,
    },

    /// The daemon answered a request with an error.
    #[error("the profkit daemon refused or failed `{request}`: {message}")]
    Request {
        /// The request name.
        request: &'static str,
        /// The daemon's message.
        message: String,
    },

    /// Creating, binding or listening on the control socket failed.
    #[error("cannot set up the control socket {path}: {source}")]
    Socket {
        /// The socket path.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },

    /// Installing signal handlers failed.
    #[error("cannot install signal handlers: {source}")]
    Signals {
        /// The underlying error.
        source: io::Error,
    },

    /// `poll(2)` failed in the main loop.
    #[error("poll failed in the daemon main loop: {source}")]
    Poll {
        /// The underlying error.
        source: io::Error,
    },

    /// The sampling engine failed an operation the daemon cannot go on without.
    #[error("sampling engine failed to {op}: {message}")]
    Engine {
        /// The operation ("stop", ...).
        op: &'static str,
        /// The engine's message.
        message: String,
    },

    /// The daemon process could not be started.
    #[error("cannot start the profkit daemon {exe}: {source}")]
    Spawn {
        /// The program.
        exe: PathBuf,
        /// The underlying error.
        source: io::Error,
    },

    /// The daemon exited before it became ready.
    #[error("the profkit daemon exited before it was ready ({status}){}", fmt_log(.log))]
    DaemonExited {
        /// How it exited.
        status: String,
        /// What it wrote to `daemon.log` meanwhile (last lines).
        log: String,
    },

    /// The daemon did not become ready in time (it was killed).
    #[error("the profkit daemon (pid {pid}) did not become ready within {} s and was killed{}", .after.as_secs_f64(), fmt_log(.log))]
    ReadyTimeout {
        /// Its pid.
        pid: u32,
        /// How long we waited.
        after: Duration,
        /// What it wrote to `daemon.log` meanwhile (last lines).
        log: String,
    },
}

fn fmt_pid(pid: Option<u32>) -> String {
    match pid {
        Some(pid) => format!("pid {pid}"),
        None => "pid unknown".to_owned(),
    }
}

fn fmt_log(log: &str) -> String {
    let log = log.trim_end();
    if log.is_empty() {
        String::new()
    } else {
        format!("; its log says:\n{log}")
    }
}

impl Error {
    pub(crate) fn io(what: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        Error::Io {
            what,
            path: path.into(),
            source,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_path_pid_and_fix() {
        let e = Error::AlreadyRunning {
            dir: "/tmp/s".into(),
            pid: Some(42),
        };
        let m = e.to_string();
        assert!(m.contains("pid 42") && m.contains("/tmp/s") && m.contains("profctl stop"));

        let e = Error::InsecureDir {
            path: "/tmp/s".into(),
            mode: 0o777,
        };
        assert!(e.to_string().contains("mode 0777"), "{e}");

        let e = Error::Connect {
            path: "/s/control.sock".into(),
            source: io::Error::from(io::ErrorKind::PermissionDenied),
        };
        assert!(e.to_string().contains("or root"), "{e}");

        let e = Error::DaemonExited {
            status: "exit status: 1".into(),
            log: "error: no perf\n".into(),
        };
        assert!(
            e.to_string().ends_with("its log says:\nerror: no perf"),
            "{e}"
        );
    }
}
