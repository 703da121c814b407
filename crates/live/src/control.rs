//! What `profctl` asks a running daemon, typed: each request checks first
//! that the daemon did not die (its session is then finished with
//! [`crate::finalize_dead`] instead), and each answer is read back into its
//! type ([`Status`], [`Summary`], [`Rotation`]) rather than by key.

use std::path::Path;

use profkit_daemon::{daemon_state, Client, DaemonState, Request, StatusReply};
use serde_json::Value;

use crate::error::{Error, Result};
use crate::parts::Rotation;
use crate::summary::{Status, Summary};

/// Sends `request` to the daemon of `session_dir` and returns its answer.
///
/// # Errors
/// [`Error::DaemonDied`] when the daemon died; the daemon's own errors
/// (none running, no permission, a failed request).
pub fn request(session_dir: &Path, request: Request) -> Result<Value> {
    if let DaemonState::Dead { pid } = daemon_state(session_dir)? {
        return Err(Error::DaemonDied {
            dir: session_dir.into(),
            pid,
        });
    }
    Ok(Client::connect(session_dir)?
        .request(request)?
        .into_result(request)?)
}

fn reply<T: serde::de::DeserializeOwned>(what: &'static str, v: Value) -> Result<T> {
    serde_json::from_value(v).map_err(|source| Error::Reply { what, source })
}

/// Stops the daemon of `session_dir`: its stop summary.
///
/// # Errors
/// As [`request`], and [`Error::Reply`] for an answer that is not a summary.
pub fn stop(session_dir: &Path) -> Result<Summary> {
    reply("stop summary", request(session_dir, Request::Stop)?)
}

/// Closes the current part of the session and starts the next.
///
/// # Errors
/// As [`request`], and [`Error::Reply`] for an answer that is not a rotation.
pub fn rotate(session_dir: &Path) -> Result<Rotation> {
    reply("rotation", request(session_dir, Request::Rotate)?)
}

/// `profctl status`: from the daemon when one runs, else from the session
/// directory (`not running`, `died`).
///
/// # Errors
/// As [`request`] for a running daemon, and [`Error::Reply`] for an answer
/// that is not a status reply.
pub fn status(session_dir: &Path) -> Result<Status> {
    Ok(match daemon_state(session_dir)? {
        DaemonState::NotRunning => Status::of_dir("not running", None, session_dir),
        DaemonState::Dead { pid } => Status::of_dir("died", pid, session_dir),
        DaemonState::Running { pid } => {
            let v = request(session_dir, Request::Status)?;
            let r: StatusReply = reply("status reply", v)?;
            Status::running(pid, session_dir, &r)
        }
    })
}
