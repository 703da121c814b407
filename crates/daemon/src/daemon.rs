//! The main loop: timer, wake fds, control requests, signals.
//!
//! # Implementation notes
//!
//! One thread, one `poll(2)` per iteration over, in this order: the signal
//! pipe, the listening socket, each accepted connection still sending its
//! request, and the engine's wake fds. The poll timeout is the time left
//! to the next timer tick (or to a connection's deadline, whichever is
//! first). Ticks keep their rhythm: the next deadline is the previous one
//! plus the interval, not "now" plus the interval, so a slow round does not
//! shift every later one. If a round overruns whole intervals, those ticks
//! are skipped (counted as `missed_ticks`), not replayed in a burst.
//!
//! ```text
//! t(ms)   0        250       500       750      1000
//! ticks   |---------|---------|---------|---------|
//! rounds           R1        R2   W    R3        R4     W: wake fd readable,
//!                                 ^ extra round, the ticks do not move
//! ```
//!
//! After a wake-triggered round the wake fds are left out of the poll set
//! for `min_wake_interval`, so a descriptor that stays readable cannot spin
//! the loop. Requests are answered between rounds; a client has
//! [`REQUEST_DEADLINE`] to send its line, and a slow one never blocks the
//! loop (connections are non-blocking until their request is complete).

use std::collections::HashSet;
use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixListener;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::io::Errno;
use serde_json::Value;

use crate::dir::{SessionDir, CONTROL_SOCKET};
use crate::engine::{error_message, Engine, EngineError};
use crate::error::{Error, Result};
use crate::lock::DaemonLock;
use crate::log::{Level, Logger};
use crate::protocol::{Request, Response, MAX_REQUEST_LINE};
use crate::signals::SignalPipe;
use crate::socket::{Conn, ControlSocket, ReadOutcome};
use crate::status::{DaemonStatus, Stats, StatusReply};

/// The default sync interval (OProfile's daemon drains every 250 ms too).
pub const DEFAULT_SYNC_INTERVAL: Duration = Duration::from_millis(250);
/// How long a client has to send its request line once connected.
pub const REQUEST_DEADLINE: Duration = Duration::from_secs(5);
/// Connections waiting for their request line at once; more are refused.
pub const MAX_PENDING_CONNECTIONS: usize = 16;

/// How the main loop runs.
#[derive(Debug, Clone)]
pub struct LoopOptions {
    /// Time between timer rounds (default 250 ms).
    pub sync_interval: Duration,
    /// Least time between two wake-fd rounds (default 10 ms), so a
    /// descriptor that stays readable cannot spin the loop.
    pub min_wake_interval: Duration,
    /// Install SIGTERM/SIGINT/SIGHUP handlers for the run (default true).
    /// Off for daemons run inside a bigger process, e.g. tests.
    pub handle_signals: bool,
    /// Log level; `None` (default) takes it from `PROFKIT_LOG`.
    pub log_level: Option<Level>,
    /// Also write log lines to stderr (`profctl start --foreground`).
    pub log_to_stderr: bool,
}

impl Default for LoopOptions {
    fn default() -> Self {
        LoopOptions {
            sync_interval: DEFAULT_SYNC_INTERVAL,
            min_wake_interval: Duration::from_millis(10),
            handle_signals: true,
            log_level: None,
            log_to_stderr: false,
        }
    }
}

/// A daemon that holds its session's lock and is ready to serve.
///
/// Split from [`Daemon::run`] so that the engine is built *under* the lock:
/// a second `profctl start` must fail before it truncates the running
/// session's `session.pkl`.
///
/// ```no_run
/// # fn build_engine(_: &profkit_daemon::SessionDir) -> profkit_daemon::testing::FakeEngine { unimplemented!() }
/// use profkit_daemon::{Daemon, LoopOptions, SessionDir};
///
/// let dir = SessionDir::create("profkit_data")?;
/// let daemon = Daemon::new(&dir, LoopOptions::default())?; // AlreadyRunning?
/// let mut engine = build_engine(&dir);                     // opens perf events, session.pkl
/// let summary = daemon.run(&mut engine)?;                  // until stop or SIGTERM
/// # Ok::<(), profkit_daemon::Error>(())
/// ```
#[derive(Debug)]
pub struct Daemon<'d> {
    dir: &'d SessionDir,
    lock: DaemonLock,
    log: Logger,
    opts: LoopOptions,
}

/// Take the lock of `dir`, serve, and drive `engine` until a stop request
/// or SIGTERM/SIGINT; returns the engine's stop summary.
///
/// Shorthand for [`Daemon::new`] then [`Daemon::run`] (prefer those when
/// building the engine has side effects in the session directory).
pub fn run(engine: &mut dyn Engine, opts: LoopOptions, dir: &SessionDir) -> Result<Value> {
    Daemon::new(dir, opts)?.run(engine)
}

impl<'d> Daemon<'d> {
    /// Take the session lock ([`Error::AlreadyRunning`] if a daemon holds it)
    /// and open `daemon.log`.
    pub fn new(dir: &'d SessionDir, opts: LoopOptions) -> Result<Daemon<'d>> {
        let mut log = Logger::open(dir)?;
        if let Some(level) = opts.log_level {
            log = log.with_level(level);
        }
        if opts.log_to_stderr {
            log = log.with_stderr();
        }
        let lock = DaemonLock::acquire(dir)?;
        log.info(format_args!(
            "daemon pid {} holds the lock of {}",
            lock.pid(),
            dir.path().display()
        ));
        if let Some(old) = lock.recovered_from() {
            log.info(format_args!(
                "recovered the stale lock of a daemon that died (pid {})",
                old.map_or_else(|| "unknown".to_owned(), |p| p.to_string())
            ));
        }
        Ok(Daemon {
            dir,
            lock,
            log,
            opts,
        })
    }

    /// The daemon's logger (`daemon.log`), for the caller's own lines.
    pub fn logger(&self) -> &Logger {
        &self.log
    }

    /// Our pid (as written in the lock).
    pub fn pid(&self) -> u32 {
        self.lock.pid()
    }

    /// Serve the control socket and drive `engine` until a `stop` request,
    /// SIGTERM/SIGINT or the engine's own end ([`Engine::finished`]); then `engine.stop()`, remove `control.sock` and
    /// `daemon.pid`, release the lock, and return the stop summary.
    ///
    /// Readiness: once the socket answers `status` (with this pid under
    /// `daemon.pid`), the daemon is running; [`spawn_daemon`](crate::spawn_daemon)
    /// waits for exactly that.
    pub fn run(self, engine: &mut dyn Engine) -> Result<Value> {
        let Daemon {
            dir,
            lock,
            log,
            opts,
        } = self;
        let setup = (|| -> Result<_> {
            let signals = if opts.handle_signals {
                Some(SignalPipe::install()?)
            } else {
                None
            };
            Ok((signals, ControlSocket::bind(dir, lock.pid())?))
        })();
        let (signals, socket) = match setup {
            Ok(parts) => parts,
            Err(e) => {
                // The engine is built (its session file open): finish it
                // even though we never served.
                log.error(format_args!("cannot serve: {e}; stopping the engine"));
                if let Err(m) = engine.stop() {
                    log.error(format_args!("engine stop failed: {}", error_message(&*m)));
                }
                return Err(e);
            }
        };
        log.info(format_args!(
            "serving {} (sync interval {} ms)",
            dir.join(CONTROL_SOCKET).display(),
            opts.sync_interval.as_millis()
        ));
        let mut state = LoopState::new(dir, &log, &opts, lock.pid());
        let (stop_conn, reason, loop_error) = match state.serve(engine, &socket, signals.as_ref()) {
            Ok(StopReason::Request(conn)) => (Some(conn), "a stop request", None),
            Ok(StopReason::Signal(name)) => (None, name, None),
            Ok(StopReason::Engine) => (None, "the engine's own end", None),
            Err(e) => {
                // The loop itself failed (poll): still stop the engine so
                // the session file gets its footer, then report the failure.
                log.error(format_args!("main loop failed: {e}"));
                (None, "a main loop failure", Some(e))
            }
        };
        log.info(format_args!("stopping on {reason}"));
        let stopped = engine.stop().map_err(|e| error_message(&*e));
        // Clean up before answering: once `profctl stop` returns, the
        // directory is free for the next start.
        drop(socket);
        drop(signals);
        drop(lock);
        let rounds = state.stats.rounds();
        match stopped {
            Ok(summary) => {
                log.info(format_args!(
                    "stopped after {rounds} rounds ({} failed): {summary}",
                    state.stats.round_errors
                ));
                if let Some(conn) = stop_conn {
                    conn.respond(&Response::Ok(summary.clone()), &log);
                }
                match loop_error {
                    Some(e) => Err(e),
                    None => Ok(summary),
                }
            }
            Err(message) => {
                log.error(format_args!("engine stop failed: {message}"));
                if let Some(conn) = stop_conn {
                    conn.respond(&Response::Error(message.clone()), &log);
                }
                Err(loop_error.unwrap_or(Error::Engine {
                    op: "stop",
                    message,
                }))
            }
        }
    }
}

/// Why the loop ended.
enum StopReason {
    Request(Conn),
    Signal(&'static str),
    /// [`Engine::finished`] said so (its reason is logged).
    Engine,
}

/// Why a round ran.
#[derive(Debug, Clone, Copy)]
enum Cause {
    Timer,
    Wake,
}

struct LoopState<'a> {
    dir: &'a SessionDir,
    log: &'a Logger,
    opts: &'a LoopOptions,
    pid: u32,
    started: Instant,
    started_unix: u64,
    stats: Stats,
    conns: Vec<Conn>,
    /// Wake fds that reported HUP/ERR/NVAL: not polled again.
    dead_wake_fds: HashSet<RawFd>,
    wake_fd_count: usize,
}

impl<'a> LoopState<'a> {
    fn new(dir: &'a SessionDir, log: &'a Logger, opts: &'a LoopOptions, pid: u32) -> Self {
        LoopState {
            dir,
            log,
            opts,
            pid,
            started: Instant::now(),
            started_unix: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            stats: Stats::default(),
            conns: Vec::new(),
            dead_wake_fds: HashSet::new(),
            wake_fd_count: 0,
        }
    }

    fn serve(
        &mut self,
        engine: &mut dyn Engine,
        socket: &ControlSocket<'_>,
        signals: Option<&SignalPipe>,
    ) -> Result<StopReason> {
        let interval = self.opts.sync_interval.max(Duration::from_millis(1));
        let mut next_tick = Instant::now() + interval;
        let mut wake_blocked_until = Instant::now();

        loop {
            let now = Instant::now();
            if now >= next_tick {
                self.round(engine, Cause::Timer);
                if let Some(why) = engine.finished() {
                    return Ok(self.engine_finished(why));
                }
                let (next, missed) = next_deadline(next_tick, interval, Instant::now());
                next_tick = next;
                if missed > 0 {
                    self.stats.missed_ticks += missed;
                    self.log
                        .debug(format_args!("round overran: skipped {missed} tick(s)"));
                }
                continue;
            }

            // Expire clients that never finished their request.
            let mut i = 0;
            while i < self.conns.len() {
                if self.conns[i].deadline <= now {
                    let c = self.conns.swap_remove(i);
                    self.log.warn(format_args!(
                        "client pid {} sent no complete request within {} s; closed",
                        c.pid,
                        REQUEST_DEADLINE.as_secs()
                    ));
                    c.respond(
                        &Response::Error("no request received in time".into()),
                        self.log,
                    );
                } else {
                    i += 1;
                }
            }

            let wake_allowed = now >= wake_blocked_until;
            let mut deadline = next_tick;
            if !wake_allowed {
                deadline = deadline.min(wake_blocked_until);
            }
            for c in &self.conns {
                deadline = deadline.min(c.deadline);
            }
            let timeout = deadline.saturating_duration_since(now);

            // Poll with everything borrowed, then act with nothing borrowed.
            let polled = {
                let wake: Vec<_> = if wake_allowed {
                    engine
                        .wake_fds()
                        .into_iter()
                        .filter(|fd| !self.dead_wake_fds.contains(&fd.as_raw_fd()))
                        .collect()
                } else {
                    Vec::new()
                };
                if wake_allowed {
                    self.wake_fd_count = wake.len();
                }
                let mut fds = Vec::with_capacity(2 + self.conns.len() + wake.len());
                if let Some(s) = signals {
                    fds.push(PollFd::from_borrowed_fd(s.fd(), PollFlags::IN));
                }
                fds.push(PollFd::new(&socket.listener, PollFlags::IN));
                for c in &self.conns {
                    fds.push(PollFd::new(&c.stream, PollFlags::IN));
                }
                for fd in &wake {
                    fds.push(PollFd::from_borrowed_fd(*fd, PollFlags::IN));
                }
                let ts = Timespec::try_from(timeout).unwrap_or(Timespec {
                    tv_sec: i64::MAX,
                    tv_nsec: 0,
                });
                match rustix::event::poll(&mut fds, Some(&ts)) {
                    Ok(_) => {}
                    Err(Errno::INTR) => continue,
                    Err(e) => return Err(Error::Poll { source: e.into() }),
                }
                let revents: Vec<PollFlags> = fds.iter().map(|f| f.revents()).collect();
                let mut it = revents.into_iter();
                let sig = signals.map(|_| it.next().unwrap_or_else(PollFlags::empty));
                let listen = it.next().unwrap_or_else(PollFlags::empty);
                let conns: Vec<PollFlags> = it.by_ref().take(self.conns.len()).collect();
                let wake_ready: Vec<(RawFd, PollFlags)> =
                    wake.iter().map(|fd| fd.as_raw_fd()).zip(it).collect();
                Polled {
                    signal: sig.is_some_and(|f| !f.is_empty()),
                    listen: !listen.is_empty(),
                    conns,
                    wake: wake_ready,
                }
            };

            if polled.signal {
                if let Some(s) = signals {
                    let arrived = s.take();
                    if arrived.hup {
                        match engine.rotate() {
                            Ok(v) => self.log.info(format!("SIGHUP: rotated: {v}")),
                            Err(m) => self
                                .log
                                .warn(format!("SIGHUP: not rotated: {}", error_message(&*m))),
                        }
                    }
                    if let Some(name) = arrived.stop {
                        for c in self.conns.drain(..) {
                            c.respond(&Response::Error("the daemon is stopping".into()), self.log);
                        }
                        return Ok(StopReason::Signal(name));
                    }
                }
            }

            // Requests first (they may be waiting), then new clients.
            let mut complete = Vec::new();
            for (i, flags) in polled.conns.iter().enumerate().rev() {
                if flags.is_empty() {
                    continue;
                }
                match self.conns[i].read_request() {
                    ReadOutcome::Pending => {}
                    ReadOutcome::Line(line) => {
                        let c = self.conns.swap_remove(i);
                        complete.push((c, line));
                    }
                    ReadOutcome::TooLong => {
                        let c = self.conns.swap_remove(i);
                        self.log.warn(format_args!(
                            "client pid {}: request longer than {MAX_REQUEST_LINE} bytes; closed",
                            c.pid
                        ));
                        c.respond(&Response::Error("request line too long".into()), self.log);
                    }
                    ReadOutcome::Closed => {
                        self.conns.swap_remove(i);
                    }
                }
            }
            if polled.listen {
                self.accept_all(&socket.listener);
            }

            let mut stop = None;
            for (conn, line) in complete {
                if let Some(why) = &conn.refusal {
                    self.stats.refused += 1;
                    self.log.warn(format_args!(
                        "refused client pid {} (uid {}): {why}",
                        conn.pid, conn.uid
                    ));
                    let response = Response::Error(why.clone());
                    conn.respond(&response, self.log);
                    continue;
                }
                if stop.is_some() {
                    conn.respond(&Response::Error("the daemon is stopping".into()), self.log);
                    continue;
                }
                match serde_json::from_slice::<Request>(&line) {
                    Ok(Request::Stop) => {
                        self.stats.requests += 1;
                        self.log.info(format_args!(
                            "stop requested by uid {} (pid {})",
                            conn.uid, conn.pid
                        ));
                        stop = Some(conn);
                    }
                    Ok(request) => {
                        self.stats.requests += 1;
                        let response = self.handle(engine, request, &conn);
                        conn.respond(&response, self.log);
                    }
                    Err(e) => {
                        self.log.warn(format_args!(
                            "client pid {} sent a malformed request: {e}",
                            conn.pid
                        ));
                        conn.respond(
                            &Response::Error(format!("malformed request: {e}")),
                            self.log,
                        );
                    }
                }
            }
            if let Some(conn) = stop {
                for c in self.conns.drain(..) {
                    c.respond(&Response::Error("the daemon is stopping".into()), self.log);
                }
                return Ok(StopReason::Request(conn));
            }

            let mut wake_round = false;
            for (fd, flags) in &polled.wake {
                if flags.intersects(PollFlags::HUP | PollFlags::ERR | PollFlags::NVAL) {
                    if self.dead_wake_fds.insert(*fd) {
                        self.log.info(format_args!(
                            "wake fd {fd} reported {flags:?}; no longer polled (the timer still drains it)"
                        ));
                    }
                    wake_round = true;
                } else if flags.contains(PollFlags::IN) {
                    wake_round = true;
                }
            }
            if wake_round {
                self.round(engine, Cause::Wake);
                wake_blocked_until = Instant::now() + self.opts.min_wake_interval;
                if let Some(why) = engine.finished() {
                    return Ok(self.engine_finished(why));
                }
            }
        }
    }

    /// The engine has nothing more to do: answer waiting clients and leave.
    fn engine_finished(&mut self, why: String) -> StopReason {
        self.log.info(format_args!("the engine finished: {why}"));
        for c in self.conns.drain(..) {
            c.respond(&Response::Error("the daemon is stopping".into()), self.log);
        }
        StopReason::Engine
    }

    fn accept_all(&mut self, listener: &UnixListener) {
        loop {
            let stream = match listener.accept() {
                Ok((stream, _)) => stream,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    // ECONNABORTED, EMFILE...: nothing to answer; try later.
                    self.log.warn(format_args!("accept failed: {e}"));
                    return;
                }
            };
            let (uid, pid) = match rustix::net::sockopt::socket_peercred(&stream) {
                Ok(cred) => (cred.uid.as_raw(), cred.pid.as_raw_nonzero().get()),
                Err(e) => {
                    self.log.warn(format_args!(
                        "cannot read the peer credentials of a client: {e}"
                    ));
                    continue;
                }
            };
            let refusal = authorize(uid, self.dir.owner_uid()).err();
            let conn = Conn {
                stream,
                buf: Vec::new(),
                deadline: Instant::now() + REQUEST_DEADLINE,
                uid,
                pid,
                refusal,
            };
            if self.conns.len() >= MAX_PENDING_CONNECTIONS {
                self.stats.refused += 1;
                self.log.warn(format_args!(
                    "refused client pid {pid}: {MAX_PENDING_CONNECTIONS} connections already pending"
                ));
                conn.respond(
                    &Response::Error("the daemon is busy; try again".into()),
                    self.log,
                );
                continue;
            }
            if let Err(e) = conn.stream.set_nonblocking(true) {
                self.log.warn(format_args!("client pid {pid}: {e}"));
                continue;
            }
            self.conns.push(conn);
        }
    }

    fn handle(&mut self, engine: &mut dyn Engine, request: Request, conn: &Conn) -> Response {
        self.log.info(format_args!(
            "{} requested by uid {} (pid {})",
            request.name(),
            conn.uid,
            conn.pid
        ));
        let failed = |log: &Logger, e: EngineError| {
            let message = error_message(&*e);
            log.warn(format_args!("{} failed: {message}", request.name()));
            Response::Error(message)
        };
        match request {
            Request::Status => Response::Ok(self.status(engine)),
            Request::Dump => match engine.dump() {
                Ok(()) => Response::Ok(self.status(engine)),
                Err(m) => failed(self.log, m),
            },
            Request::Reset => match engine.reset() {
                Ok(()) => Response::Ok(Value::Null),
                Err(m) => failed(self.log, m),
            },
            Request::Rotate => match engine.rotate() {
                Ok(v) => {
                    self.log.info(format!("rotated: {v}"));
                    Response::Ok(v)
                }
                Err(m) => failed(self.log, m),
            },
            Request::Stop => unreachable!("stop is handled by the loop"),
        }
    }

    fn status(&self, engine: &dyn Engine) -> Value {
        let s = &self.stats;
        let reply = StatusReply {
            daemon: DaemonStatus {
                pid: self.pid,
                uid: self.dir.owner_uid(),
                session_dir: self.dir.path().display().to_string(),
                started_unix: self.started_unix,
                uptime_s: self.started.elapsed().as_secs_f64(),
                sync_interval_ms: self.opts.sync_interval.as_secs_f64() * 1e3,
                rounds: s.rounds(),
                timer_rounds: s.timer_rounds,
                wake_rounds: s.wake_rounds,
                missed_ticks: s.missed_ticks,
                round_errors: s.round_errors,
                last_round_error: s.last_round_error.clone(),
                last_round_us: s.last_round.as_micros() as u64,
                max_round_us: s.max_round.as_micros() as u64,
                requests: s.requests,
                refused: s.refused,
                wake_fds: self.wake_fd_count,
                dead_wake_fds: self.dead_wake_fds.len(),
            },
            engine: engine.status(),
        };
        serde_json::to_value(reply).unwrap_or_default()
    }

    fn round(&mut self, engine: &mut dyn Engine, cause: Cause) {
        let t0 = Instant::now();
        let result = engine.round().map_err(|e| error_message(&*e));
        let took = t0.elapsed();
        for line in engine.take_log_lines() {
            self.log.info(line);
        }
        let s = &mut self.stats;
        match cause {
            Cause::Timer => s.timer_rounds += 1,
            Cause::Wake => s.wake_rounds += 1,
        }
        s.last_round = took;
        s.max_round = s.max_round.max(took);
        if let Err(message) = result {
            s.round_errors += 1;
            // Log the first, every change, and then sparsely (1, 2, 4, 8...)
            // so a persistent failure does not fill the disk at 4 lines/s.
            let changed = s.last_round_error.as_deref() != Some(message.as_str());
            if changed || s.round_errors.is_power_of_two() {
                self.log.warn(format_args!(
                    "sync round failed ({} so far): {message}",
                    s.round_errors
                ));
            }
            s.last_round_error = Some(message);
        }
        if self.log.enabled(Level::Debug) {
            self.log.debug(format_args!(
                "round {} ({cause:?}) took {} us",
                self.stats.rounds(),
                took.as_micros()
            ));
        }
    }
}

struct Polled {
    signal: bool,
    listen: bool,
    conns: Vec<PollFlags>,
    wake: Vec<(RawFd, PollFlags)>,
}

/// The tick after `tick`, keeping the rhythm: `tick + interval`, or if
/// that has already passed at `now`, the first later multiple; also how
/// many ticks were skipped.
fn next_deadline(tick: Instant, interval: Duration, now: Instant) -> (Instant, u64) {
    let next = tick + interval;
    if next > now {
        return (next, 0);
    }
    let missed = ((now - next).as_nanos() / interval.as_nanos()) as u64 + 1;
    let skip = u32::try_from(missed).unwrap_or(u32::MAX);
    (next + interval * skip, missed)
}

/// Only the daemon's owner or root may talk to it.
fn authorize(peer_uid: u32, owner_uid: u32) -> Result<(), String> {
    if peer_uid == owner_uid || peer_uid == 0 {
        Ok(())
    } else {
        Err(format!(
            "permission denied: uid {peer_uid} is neither the owner of this profkit daemon (uid {owner_uid}) nor root"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_owner_and_root_are_authorized() {
        assert!(authorize(1000, 1000).is_ok());
        assert!(authorize(0, 1000).is_ok());
        let e = authorize(65534, 1000).unwrap_err();
        assert!(e.contains("65534") && e.contains("uid 1000"), "{e}");
        assert!(authorize(65534, 0).is_err());
    }

    #[test]
    fn ticks_keep_their_rhythm() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        // A round that took 40 ms of a 250 ms interval: next tick at 250 ms
        // after the last one, not 250 ms after the round ended.
        assert_eq!(next_deadline(t0, ms(250), t0 + ms(40)), (t0 + ms(250), 0));
        // A tick already due when the round ends is skipped (that round
        // just drained everything), and counted.
        assert_eq!(next_deadline(t0, ms(250), t0 + ms(250)), (t0 + ms(500), 1));
        // A 600 ms round skips ticks 250 and 500, keeps the phase.
        assert_eq!(next_deadline(t0, ms(250), t0 + ms(600)), (t0 + ms(750), 2));
    }

    #[test]
    fn default_options_match_the_docs() {
        let o = LoopOptions::default();
        assert_eq!(o.sync_interval, Duration::from_millis(250));
        assert!(o.handle_signals);
        assert!(o.min_wake_interval < o.sync_interval);
    }
}
