//! Signals as a pollable descriptor (self-pipe via `signal-hook`).
//!
//! SIGTERM and SIGINT mean "stop cleanly"; a second one while the daemon is
//! already stopping takes the default action (the process dies; the next
//! start recovers the stale lock), so a hung stop can still be interrupted.
//! SIGHUP asks the engine to rotate its session (as logrotate expects of a
//! daemon); an engine that cannot rotate says why in the log.

use std::io::Read;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::SigId;

use crate::error::{Error, Result};

/// Which signals arrived since the last [`SignalPipe::take`].
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Arrived {
    pub stop: Option<&'static str>,
    pub hup: bool,
}

/// Handlers installed for the life of this value.
pub(crate) struct SignalPipe {
    rx: UnixStream,
    term: Arc<AtomicBool>,
    int: Arc<AtomicBool>,
    hup: Arc<AtomicBool>,
    ids: Vec<SigId>,
}

impl SignalPipe {
    pub(crate) fn install() -> Result<SignalPipe> {
        let wrap = |source| Error::Signals { source };
        let (rx, tx) = UnixStream::pair().map_err(wrap)?;
        rx.set_nonblocking(true).map_err(wrap)?;
        tx.set_nonblocking(true).map_err(wrap)?;
        let mut pipe = SignalPipe {
            rx,
            term: Arc::default(),
            int: Arc::default(),
            hup: Arc::default(),
            ids: Vec::new(),
        };
        let result = (|| -> std::io::Result<()> {
            for (sig, flag) in [(SIGTERM, &pipe.term), (SIGINT, &pipe.int)] {
                // Order matters: the conditional default runs first, so it
                // sees the flag as the *previous* signal left it.
                pipe.ids
                    .push(signal_hook::flag::register_conditional_default(
                        sig,
                        flag.clone(),
                    )?);
                pipe.ids
                    .push(signal_hook::flag::register(sig, flag.clone())?);
                pipe.ids.push(signal_hook::low_level::pipe::register(
                    sig,
                    tx.try_clone()?,
                )?);
            }
            pipe.ids
                .push(signal_hook::flag::register(SIGHUP, pipe.hup.clone())?);
            pipe.ids
                .push(signal_hook::low_level::pipe::register(SIGHUP, tx)?);
            Ok(())
        })();
        result.map_err(wrap)?;
        Ok(pipe)
    }

    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        self.rx.as_fd()
    }

    /// Drain the pipe and report what arrived. A stop signal stays
    /// recorded (so a second one takes the default action).
    pub(crate) fn take(&self) -> Arrived {
        let mut buf = [0u8; 64];
        while matches!((&self.rx).read(&mut buf), Ok(n) if n > 0) {}
        let stop = if self.term.load(Ordering::SeqCst) {
            Some("SIGTERM")
        } else if self.int.load(Ordering::SeqCst) {
            Some("SIGINT")
        } else {
            None
        };
        Arrived {
            stop,
            hup: self.hup.swap(false, Ordering::SeqCst),
        }
    }
}

impl Drop for SignalPipe {
    fn drop(&mut self) {
        for id in self.ids.drain(..) {
            signal_hook::low_level::unregister(id);
        }
    }
}
