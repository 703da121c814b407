//! The control socket and its clients: `control.sock` bound 0600 under a
//! temporary name and renamed into place, and each accepted connection
//! read without blocking the loop, answered with a bounded write.

use std::io::{self, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::time::{Duration, Instant};

use crate::dir::{SessionDir, CONTROL_SOCKET};
use crate::error::{Error, Result};
use crate::log::Logger;
use crate::protocol::{Response, MAX_REQUEST_LINE};

/// How long answering one client may block the loop.
const WRITE_TIMEOUT: Duration = Duration::from_secs(2);

/// The listening socket; removes `control.sock` when dropped.
pub(crate) struct ControlSocket<'d> {
    pub listener: UnixListener,
    dir: &'d SessionDir,
}

impl<'d> ControlSocket<'d> {
    /// Bind under a temporary name, make it 0600, then rename it into
    /// place, so `control.sock` never exists with a looser mode and never
    /// exists without a listener behind it.
    pub fn bind(dir: &'d SessionDir, pid: u32) -> Result<ControlSocket<'d>> {
        let tmp = format!("{CONTROL_SOCKET}.{pid}.tmp");
        dir.remove(&tmp)?;
        let addr = dir.socket_address(&tmp);
        let socket_err = |source| Error::Socket {
            path: dir.join(CONTROL_SOCKET),
            source,
        };
        let listener = UnixListener::bind(&addr).map_err(socket_err)?;
        let placed = dir
            .chmod(&tmp, 0o600)
            .and_then(|()| dir.rename(&tmp, CONTROL_SOCKET));
        if let Err(e) = placed {
            let _ = dir.remove(&tmp);
            return Err(e);
        }
        listener.set_nonblocking(true).map_err(socket_err)?;
        Ok(ControlSocket { listener, dir })
    }
}

impl Drop for ControlSocket<'_> {
    fn drop(&mut self) {
        let _ = self.dir.remove(CONTROL_SOCKET);
    }
}

/// An accepted client that has not finished sending its request.
pub(crate) struct Conn {
    pub stream: UnixStream,
    pub buf: Vec<u8>,
    pub deadline: Instant,
    pub uid: u32,
    pub pid: i32,
    /// Set for a peer that may not talk to us: its request is read (so it
    /// gets the answer instead of a broken pipe) and refused.
    pub refusal: Option<String>,
}

impl Conn {
    /// Write the answer (blocking, bounded by [`WRITE_TIMEOUT`]) and close.
    pub fn respond(self, response: &Response, log: &Logger) {
        let mut stream = self.stream;
        let result = stream
            .set_nonblocking(false)
            .and_then(|()| stream.set_write_timeout(Some(WRITE_TIMEOUT)))
            .and_then(|()| stream.write_all(response.to_line().as_bytes()));
        if let Err(e) = result {
            log.debug(format_args!(
                "could not answer client pid {}: {e}",
                self.pid
            ));
        }
    }

    /// Read what is available. `Some(line)` once the request is complete.
    pub fn read_request(&mut self) -> ReadOutcome {
        let mut chunk = [0u8; 1024];
        loop {
            match self.stream.read(&mut chunk) {
                Ok(0) => {
                    return if self.buf.is_empty() {
                        ReadOutcome::Closed
                    } else {
                        ReadOutcome::Line(std::mem::take(&mut self.buf))
                    }
                }
                Ok(n) => {
                    self.buf.extend_from_slice(&chunk[..n]);
                    if let Some(end) = self.buf.iter().position(|&b| b == b'\n') {
                        self.buf.truncate(end);
                        return ReadOutcome::Line(std::mem::take(&mut self.buf));
                    }
                    if self.buf.len() >= MAX_REQUEST_LINE {
                        return ReadOutcome::TooLong;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return ReadOutcome::Pending,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return ReadOutcome::Closed,
            }
        }
    }
}

pub(crate) enum ReadOutcome {
    Pending,
    Line(Vec<u8>),
    TooLong,
    Closed,
}
