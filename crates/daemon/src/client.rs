//! The client side of the control socket (`profctl stop/dump/status/reset`).

use std::io::{self, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::dir::{open_dir_nofollow, socket_address, CONTROL_SOCKET};
use crate::error::{Error, Result};
use crate::lock::{daemon_state, DaemonState};
use crate::protocol::{Request, Response, MAX_RESPONSE_LINE};

/// A connection to a session's daemon; carries exactly one request.
///
/// ```no_run
/// use profkit_daemon::{Client, Request};
///
/// let summary = Client::connect("profkit_data")?
///     .request(Request::Stop)?
///     .into_result(Request::Stop)?;
/// println!("{summary:#}");
/// # Ok::<(), profkit_daemon::Error>(())
/// ```
#[derive(Debug)]
pub struct Client {
    dir: PathBuf,
    stream: UnixStream,
}

impl Client {
    /// Connect to the daemon of the session directory `dir`.
    ///
    /// The errors tell the user what is going on: [`Error::NotRunning`] (no
    /// socket), [`Error::Starting`] (a daemon holds the lock but does not
    /// serve yet), [`Error::DaemonDied`] (socket or pid file left behind by
    /// a daemon that is gone), [`Error::Connect`] (e.g. permission denied).
    pub fn connect(dir: impl AsRef<Path>) -> Result<Client> {
        let dir = dir.as_ref();
        // Keep the directory fd open while connecting: long paths are
        // reached through /proc/self/fd/N.
        let dir_fd = match open_dir_nofollow(dir) {
            Ok(fd) => Some(fd),
            Err(Error::NoSuchDir { .. }) => return Err(Error::NotRunning { dir: dir.into() }),
            Err(_) => None,
        };
        let addr = socket_address(dir, dir_fd.as_ref().map(|f| f.as_fd()), CONTROL_SOCKET);
        match UnixStream::connect(&addr) {
            Ok(stream) => {
                // Only a server run by us or by root is believed: another
                // user's process at our socket path gets no request.
                let me = rustix::process::geteuid().as_raw();
                let uid = rustix::net::sockopt::socket_peercred(&stream)
                    .map(|c| c.uid.as_raw())
                    .map_err(|e| Error::Connect {
                        path: dir.join(CONTROL_SOCKET),
                        source: e.into(),
                    })?;
                if uid != me && uid != 0 {
                    return Err(Error::ForeignServer {
                        path: dir.join(CONTROL_SOCKET),
                        uid,
                        me,
                    });
                }
                Ok(Client {
                    dir: dir.into(),
                    stream,
                })
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound => Err(match daemon_state(dir) {
                Ok(DaemonState::Running { pid }) => Error::Starting {
                    dir: dir.into(),
                    pid,
                },
                Ok(DaemonState::Dead { pid }) => Error::DaemonDied {
                    dir: dir.into(),
                    pid,
                },
                _ => Error::NotRunning { dir: dir.into() },
            }),
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                let pid = match daemon_state(dir) {
                    Ok(DaemonState::Running { pid } | DaemonState::Dead { pid }) => pid,
                    _ => None,
                };
                Err(Error::DaemonDied {
                    dir: dir.into(),
                    pid,
                })
            }
            Err(source) => Err(Error::Connect {
                path: dir.join(CONTROL_SOCKET),
                source,
            }),
        }
    }

    /// Send `request` and wait for the answer, at most
    /// [`Request::timeout`].
    pub fn request(self, request: Request) -> Result<Response> {
        self.request_with_timeout(request, request.timeout())
    }

    /// Send `request` and wait for the answer, at most `timeout`.
    pub fn request_with_timeout(mut self, request: Request, timeout: Duration) -> Result<Response> {
        let deadline = Instant::now() + timeout;
        let name = request.name();
        let transport = |dir: &Path, source: io::Error| -> Error {
            match source.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => Error::Timeout {
                    dir: dir.into(),
                    request: name,
                    after: timeout,
                },
                io::ErrorKind::ConnectionReset
                | io::ErrorKind::BrokenPipe
                | io::ErrorKind::UnexpectedEof => Error::ConnectionClosed {
                    dir: dir.into(),
                    request: name,
                },
                _ => Error::Transport {
                    dir: dir.into(),
                    request: name,
                    source,
                },
            }
        };

        let remaining = |deadline: Instant| {
            deadline
                .saturating_duration_since(Instant::now())
                .max(Duration::from_millis(1))
        };
        // A daemon that refuses us may answer and close before reading
        // our line; then the write fails but the answer is there to read.
        let written = self
            .stream
            .set_write_timeout(Some(remaining(deadline)))
            .and_then(|()| self.stream.write_all(request.to_line().as_bytes()));
        let _ = self.stream.shutdown(std::net::Shutdown::Write);

        let mut buf = Vec::new();
        let mut chunk = [0u8; 8192];
        let read: io::Result<()> = loop {
            if Instant::now() >= deadline {
                break Err(io::ErrorKind::TimedOut.into());
            }
            if let Err(e) = self.stream.set_read_timeout(Some(remaining(deadline))) {
                break Err(e);
            }
            match self.stream.read(&mut chunk) {
                Ok(0) => break Ok(()),
                Ok(n) => {
                    buf.extend_from_slice(&chunk[..n]);
                    if buf.contains(&b'\n') {
                        break Ok(());
                    }
                    if buf.len() > MAX_RESPONSE_LINE {
                        return Err(self.protocol_error("response line too long".into()));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => break Err(e),
            }
        };
        let complete = buf.contains(&b'\n');
        match (written, read) {
            // Nothing came back: the write error explains it best.
            (Err(e), _) if buf.is_empty() => return Err(transport(&self.dir, e)),
            (_, Err(e)) if !complete => return Err(transport(&self.dir, e)),
            _ => {}
        }
        if buf.is_empty() {
            return Err(Error::ConnectionClosed {
                dir: self.dir.clone(),
                request: name,
            });
        }
        let line = match buf.iter().position(|&b| b == b'\n') {
            Some(end) => &buf[..end],
            None => &buf[..],
        };
        serde_json::from_slice(line).map_err(|e| {
            self.protocol_error(format!(
                "{e} in {:?}",
                String::from_utf8_lossy(&line[..line.len().min(200)])
            ))
        })
    }

    fn protocol_error(&self, detail: String) -> Error {
        Error::Protocol {
            peer: format!("the daemon for {}", self.dir.display()),
            detail,
        }
    }
}
