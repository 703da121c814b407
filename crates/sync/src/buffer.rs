//! The global event buffer: a bounded queue of encoded rounds between the
//! sync stage (producer) and the writer thread (consumer).
//!
//! Mutual exclusion is one mutex held only to push or pop (never during a
//! write); sequencing is a condition variable, so the writer sleeps until a
//! round is ready and wakes at once when one is (seed 000's two
//! requirements). Unlike seed 000's monitor, the producer never waits for
//! space: [`EventBuffer::try_push`] hands a round back when the buffer is
//! full, and the sync stage counts it as lost to overflow. Unlike seed 001,
//! nothing assumes the consumer keeps up.

use crate::error::{Error, Result};
use crate::stage::Chunk;
use profkit_eventlog::parts::{closed_parts, part_file_name};
use profkit_eventlog::{PartInfo, SessionFooter, SessionHeader, SessionWriter};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;

/// Where the writer thread puts rounds: the session file, or a test sink.
pub trait ChunkSink: Send {
    /// Appends one round. Returns bytes written.
    fn write_chunk(&mut self, round: u64, time: u64, payload: &[u8]) -> Result<u64>;
    /// Writes the footer and flushes.
    fn finish(&mut self, footer: &SessionFooter) -> Result<()>;
    /// Starts over with an empty session (`profctl reset`).
    fn restart(&mut self) -> Result<()>;
    /// Closes the current part of a rotated session with `next.footer`
    /// and goes on in a new part ([`FileSink`]: the file is renamed
    /// [`part_file_name`] and a new one started). An error means the part
    /// was not closed: the session goes on in the same file. The default
    /// cannot rotate.
    fn rotate(&mut self, next: &NextPart) -> Result<Rotated> {
        let _ = next;
        Err(Error::Sink("this sink cannot rotate".into()))
    }
}

/// What a sink's rotation did, once the part was closed.
#[derive(Debug)]
pub enum Rotated {
    /// The part is closed and the next begun.
    Cleanly,
    /// The part is closed, but writing its footer or starting the next
    /// part's file failed (a next part not started is tried again at the
    /// next write).
    WithError(Error),
}

/// What closes one part of a rotated session and starts the next.
#[derive(Debug, Clone)]
pub struct NextPart {
    /// The closing part's footer.
    pub footer: SessionFooter,
    /// The new part's first round.
    pub first_round: u64,
    /// The new part's start, wall clock (ns since the epoch).
    pub start_unix_ns: u64,
    /// The new part's start on perf's clock.
    pub start_monotonic_ns: u64,
}

/// The session file as a sink.
#[derive(Debug)]
pub struct FileSink {
    path: PathBuf,
    /// The name messages give it (`path` unless [`FileSink::shown_as`]).
    shown: PathBuf,
    header: SessionHeader,
    /// The first part's header (`profctl reset` starts over with it).
    first_header: SessionHeader,
    /// None after a rotation could not start the new part's file: the
    /// next write tries again.
    writer: Option<SessionWriter>,
}

impl FileSink {
    /// Creates the session file with its header.
    pub fn create(
        path: PathBuf,
        header: SessionHeader,
    ) -> std::result::Result<Self, profkit_eventlog::Error> {
        let writer = SessionWriter::create(&path, &header)?;
        Ok(Self {
            shown: path.clone(),
            path,
            first_header: header.clone(),
            header,
            writer: Some(writer),
        })
    }

    /// Names the file `shown` in every later error (it was created through
    /// a held directory, `/proc/self/fd/N/...`).
    pub fn shown_as(mut self, shown: PathBuf) -> Self {
        self.writer = self.writer.map(|w| w.shown_as(&shown));
        self.shown = shown;
        self
    }

    fn writer(&mut self) -> Result<&mut SessionWriter> {
        if self.writer.is_none() {
            let w = SessionWriter::create(&self.path, &self.header)
                .map_err(|source| self.error("creating", source))?
                .shown_as(&self.shown);
            self.writer = Some(w);
        }
        Ok(self.writer.as_mut().expect("just made"))
    }

    /// The part being written (1 without rotation).
    pub fn part(&self) -> u64 {
        self.header.part.map_or(1, |p| p.number)
    }
}

impl FileSink {
    fn error(&self, action: &'static str, source: profkit_eventlog::Error) -> Error {
        Error::Session {
            action,
            path: self.shown.clone(),
            source,
        }
    }
}

impl ChunkSink for FileSink {
    fn write_chunk(&mut self, round: u64, time: u64, payload: &[u8]) -> Result<u64> {
        self.writer()?
            .append_chunk(round, time, payload)
            .map_err(|source| self.error("writing a round to", source))
    }
    fn finish(&mut self, footer: &SessionFooter) -> Result<()> {
        let w = self.writer()?;
        let r = w.write_footer(footer).and_then(|_| w.sync_data());
        r.map_err(|source| self.error("writing the footer of", source))
    }
    fn restart(&mut self) -> Result<()> {
        self.writer = None;
        std::fs::remove_file(&self.path).map_err(|source| Error::Remove {
            path: self.shown.clone(),
            source,
        })?;
        // Earlier parts are samples so far too.
        if let Some(dir) = self.path.parent() {
            for (_, p) in closed_parts(dir).unwrap_or_default() {
                let _ = std::fs::remove_file(p);
            }
        }
        self.header = self.first_header.clone();
        self.writer()?;
        Ok(())
    }
    /// Renames the file to its part's name first (so a failure there
    /// leaves it whole and being written), then writes its footer and
    /// starts the next part's file; the closed part is synced last, so a
    /// reader listing the directory sees no `session.pkl` only for as
    /// long as two small writes take.
    fn rotate(&mut self, next: &NextPart) -> Result<Rotated> {
        let number = self.part();
        let closed = self.path.with_file_name(part_file_name(number));
        let shown_closed = self.shown.with_file_name(part_file_name(number));
        if let Some(mut w) = self.writer.take() {
            if let Err(source) = std::fs::rename(&self.path, &closed) {
                self.writer = Some(w);
                return Err(Error::Rename {
                    from: self.shown.clone(),
                    to: shown_closed,
                    source,
                });
            }
            w = w.shown_as(&shown_closed);
            let footer = w.write_footer(&next.footer);
            let session = self.header.part.map_or(
                (
                    self.header.start_time_unix_ns,
                    self.header.start_monotonic_ns,
                ),
                |p| (p.session_start_unix_ns, p.session_start_monotonic_ns),
            );
            self.header.start_time_unix_ns = next.start_unix_ns;
            self.header.start_monotonic_ns = next.start_monotonic_ns;
            self.header.part = Some(PartInfo {
                number: number + 1,
                first_round: next.first_round,
                session_start_unix_ns: session.0,
                session_start_monotonic_ns: session.1,
            });
            let created = self.writer().map(|_| ());
            let closed = footer
                .and_then(|_| w.sync_data())
                .map_err(|source| Error::Session {
                    action: "writing the footer of",
                    path: shown_closed,
                    source,
                });
            Ok(match closed.and(created) {
                Ok(()) => Rotated::Cleanly,
                Err(e) => Rotated::WithError(e),
            })
        } else {
            // The last rotation could not start this part's file: nothing
            // to close; it is started now or at the next write.
            Ok(match self.writer() {
                Ok(_) => Rotated::Cleanly,
                Err(e) => Rotated::WithError(e),
            })
        }
    }
}

enum Item {
    Chunk(Chunk),
    Restart,
    Rotate(Box<NextPart>),
    Finish(Box<SessionFooter>),
}

#[derive(Default)]
struct State {
    queue: VecDeque<Item>,
    queued_bytes: usize,
    part_bytes: u64,
    rotations: u64,
    rotate_errors: u64,
    /// Whether the last rotation closed the part.
    last_rotated: bool,
    /// Highest round the writer has finished with (written or failed).
    done_round: Option<u64>,
    bytes_written: u64,
    chunks_written: u64,
    failed: Vec<Chunk>,
    last_error: Option<String>,
    /// The writer has handled the footer; its result until taken.
    finished: bool,
    finish_result: Option<Result<()>>,
    closed: bool,
}

/// What the buffer and its writer have done so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BufferState {
    /// Bytes waiting in the buffer.
    pub queued_bytes: usize,
    /// Bytes the writer has written.
    pub bytes_written: u64,
    /// Bytes written to the current part of a rotated session (all of
    /// them without rotation).
    pub part_bytes: u64,
    /// Chunks written.
    pub chunks_written: u64,
    /// The last write error, if any.
    pub last_error: Option<String>,
    /// Rotations the writer has done (tried).
    pub rotations: u64,
    /// Rotations that failed (the message is in `last_error`).
    pub rotate_errors: u64,
}

/// The bounded global event buffer. See the module docs.
pub struct EventBuffer {
    state: Mutex<State>,
    ready: Condvar,
    done: Condvar,
    capacity: usize,
}

impl std::fmt::Debug for EventBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventBuffer")
            .field("capacity", &self.capacity)
            .finish()
    }
}

impl EventBuffer {
    /// A buffer holding at most `capacity` bytes of encoded rounds.
    pub fn new(capacity: usize) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(State::default()),
            ready: Condvar::new(),
            done: Condvar::new(),
            capacity,
        })
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic in the writer must not take the daemon down with it.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues a round without waiting. When it does not fit, the round
    /// comes back (the caller counts it as lost to overflow). A round
    /// larger than the whole buffer is accepted when the buffer is empty.
    // The chunk comes back whole when refused (its counts become losses);
    // boxing it would cost an allocation every round for the rare case.
    #[allow(clippy::result_large_err)]
    pub fn try_push(&self, chunk: Chunk) -> Result<(), Chunk> {
        let mut s = self.lock();
        let n = chunk.bytes.len();
        if s.closed || (s.queued_bytes + n > self.capacity && !s.queue.is_empty()) {
            return Err(chunk);
        }
        s.queued_bytes += n;
        s.queue.push_back(Item::Chunk(chunk));
        drop(s);
        self.ready.notify_one();
        Ok(())
    }

    fn push_wait(&self, item: Item) {
        let mut s = self.lock();
        let n = match &item {
            Item::Chunk(c) => c.bytes.len(),
            _ => 0,
        };
        while s.queued_bytes + n > self.capacity && !s.queue.is_empty() {
            s = self.done.wait(s).unwrap_or_else(|p| p.into_inner());
        }
        s.queued_bytes += n;
        s.queue.push_back(item);
        drop(s);
        self.ready.notify_one();
    }

    /// Queues a round, waiting for space (stop and dump only: the daemon
    /// is no longer racing the kernel then).
    pub fn push_blocking(&self, chunk: Chunk) {
        self.push_wait(Item::Chunk(chunk));
    }

    /// Asks the writer to close the current part and start the next
    /// ([`ChunkSink::rotate`]), after the rounds queued so far; returns
    /// once the writer has done it (or failed: see
    /// [`BufferState::rotate_errors`]).
    /// Returns whether the part was closed.
    pub fn rotate(&self, next: NextPart) -> bool {
        let before = self.lock().rotations;
        self.push_wait(Item::Rotate(Box::new(next)));
        let mut s = self.lock();
        while s.rotations == before && !s.closed {
            s = self.done.wait(s).unwrap_or_else(|p| p.into_inner());
        }
        s.rotations != before && s.last_rotated
    }

    /// Asks the writer to start the session over.
    pub fn restart(&self) {
        self.push_wait(Item::Restart);
    }

    /// Waits until the writer is done with round `round` (written or failed).
    pub fn wait_done(&self, round: u64) {
        let mut s = self.lock();
        while s.done_round.is_none_or(|r| r < round) && !(s.closed && s.queue.is_empty()) {
            s = self.done.wait(s).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Rounds whose write failed since the last call.
    pub fn take_failed(&self) -> Vec<Chunk> {
        std::mem::take(&mut self.lock().failed)
    }

    /// [`BufferState::part_bytes`] alone, without copying the rest.
    pub fn part_bytes(&self) -> u64 {
        self.lock().part_bytes
    }

    /// Counters.
    pub fn state(&self) -> BufferState {
        let s = self.lock();
        BufferState {
            queued_bytes: s.queued_bytes,
            bytes_written: s.bytes_written,
            part_bytes: s.part_bytes,
            rotations: s.rotations,
            rotate_errors: s.rotate_errors,
            chunks_written: s.chunks_written,
            last_error: s.last_error.clone(),
        }
    }

    /// Queues the footer, waits for the writer to write it, and closes.
    /// The sink's error comes back to the first caller only.
    pub fn finish(&self, footer: SessionFooter) -> Result<()> {
        self.push_wait(Item::Finish(Box::new(footer)));
        let mut s = self.lock();
        while !s.finished {
            s = self.done.wait(s).unwrap_or_else(|p| p.into_inner());
        }
        s.closed = true;
        self.ready.notify_all();
        s.finish_result.take().unwrap_or(Ok(()))
    }

    /// Starts the writer thread draining into `sink`.
    pub fn spawn_writer(
        self: &Arc<Self>,
        mut sink: Box<dyn ChunkSink>,
    ) -> std::io::Result<JoinHandle<()>> {
        let buf = Arc::clone(self);
        std::thread::Builder::new()
            .name("profkit-writer".into())
            .spawn(move || loop {
                let item = {
                    let mut s = buf.lock();
                    while s.queue.is_empty() && !s.closed {
                        s = buf.ready.wait(s).unwrap_or_else(|p| p.into_inner());
                    }
                    match s.queue.pop_front() {
                        Some(i) => i,
                        None => return,
                    }
                };
                match item {
                    Item::Chunk(c) => {
                        let r = sink.write_chunk(c.round, c.time, &c.bytes);
                        let mut s = buf.lock();
                        s.queued_bytes -= c.bytes.len();
                        s.done_round = Some(c.round);
                        match r {
                            Ok(n) => {
                                s.bytes_written += n;
                                s.part_bytes += n;
                                s.chunks_written += 1;
                            }
                            Err(e) => {
                                s.last_error = Some(e.to_string());
                                s.failed.push(c);
                            }
                        }
                    }
                    Item::Restart => {
                        let r = sink.restart();
                        let mut s = buf.lock();
                        s.bytes_written = 0;
                        s.part_bytes = 0;
                        s.chunks_written = 0;
                        if let Err(e) = r {
                            s.last_error = Some(e.to_string());
                        }
                    }
                    Item::Rotate(next) => {
                        let r = sink.rotate(&next);
                        let mut s = buf.lock();
                        s.rotations += 1;
                        s.last_rotated = r.is_ok();
                        if s.last_rotated {
                            s.part_bytes = 0;
                        }
                        if let Err(e) | Ok(Rotated::WithError(e)) = r {
                            s.rotate_errors += 1;
                            s.last_error = Some(e.to_string());
                        }
                    }
                    Item::Finish(f) => {
                        let r = sink.finish(&f);
                        let mut s = buf.lock();
                        s.finished = true;
                        s.finish_result = Some(r);
                    }
                }
                buf.done.notify_all();
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sink made through a held directory names the user's path in its
    /// errors, not `/proc/self/fd/N/...`.
    #[test]
    fn a_sink_shown_under_another_name_uses_it_in_errors() {
        let d = tempfile::tempdir().unwrap();
        let real = d.path().join("session.pkl");
        let shown = PathBuf::from("/home/user/profkit_data/session.pkl");
        let mut sink = FileSink::create(real.clone(), SessionHeader::default())
            .unwrap()
            .shown_as(shown.clone());
        std::fs::remove_file(&real).unwrap();
        let e = sink.restart().unwrap_err().to_string();
        assert!(e.contains(shown.to_str().unwrap()), "{e}");
        assert!(!e.contains(real.to_str().unwrap()), "{e}");
    }
}
