//! The stage's side of JIT dumps (`crate::jit`): noticing a dump's
//! mapping (and reading it at once), reading the dumps at the start and
//! the end of each round, and giving
//! samples and frames in a dump-owning process's anonymous code the
//! dump's cookie, with the hit function's marker written first.

use super::SyncStage;
use profkit_eventlog::{Cookie, Event, Frame};

impl SyncStage {
    /// What the stage did with runtimes' JIT dumps.
    pub fn jit_stats(&self) -> crate::JitStats {
        self.jit.stats.clone()
    }

    /// A mapping of `path` (a `jit-*.dump`) by process `pid` at
    /// `start..end`: the dump is opened through that mapping and followed.
    pub(super) fn notice_jitdump(
        &mut self,
        pid: u32,
        path: &str,
        identity: Option<(u64, u64)>,
        start: u64,
        end: u64,
        since: u64,
    ) {
        let opened = self.res.probe.open_jitdump(pid, path, start, end);
        // The mapping's identity (the recording machine's, for an import)
        // names the cookie; the opened file's when the record had none.
        let (file, identity) = match opened {
            Some((f, id)) => (Some(f), identity.unwrap_or(id)),
            None => (None, identity.unwrap_or((0, 0))),
        };
        if let Some(e) = self.jit.notice(pid, path, identity, file, since) {
            self.res.known.insert(e.cookie, e);
            let out = self.jit.read_new(pid);
            self.write_jit(out);
        }
    }

    /// Reads what the dumps gained (to their end at the session's end)
    /// and writes the functions pending hits now name.
    pub(super) fn read_jit(&mut self, at_end: bool) {
        if self.jit.is_empty() {
            self.jit.new_read();
            return;
        }
        let out = self.jit.read(at_end, self.round);
        self.write_jit(out);
    }

    /// Takes in what a read of the dumps gave: new generations' cookies,
    /// and the markers of functions hit.
    fn write_jit(&mut self, out: crate::jit::JitOutput) {
        for e in out.cookies {
            self.res.known.insert(e.cookie, e);
        }
        for code in out.code {
            self.ensure_defined(code.cookie);
            self.marker(Event::JitCode(code));
        }
    }

    /// The cookie of a user sample or frame of `pid` at `addr`: a
    /// dump-owning process's anonymous code goes to its dump's cookie
    /// (the function's marker written first, once per file); anything
    /// else keeps `cookie`.
    #[inline]
    pub(super) fn jit_cookie(&mut self, pid: u32, cookie: Cookie, addr: u64, time: u64) -> Cookie {
        if !self.jit.has(pid) {
            return cookie;
        }
        match self.jit.resolve(pid, cookie, addr, time) {
            Some((c, marker)) => {
                if let Some(m) = marker {
                    self.ensure_defined(c);
                    self.marker(Event::JitCode(m));
                }
                c
            }
            None => cookie,
        }
    }

    /// [`SyncStage::jit_cookie`] for each user frame of a stack.
    pub(super) fn jit_frames(&mut self, pid: u32, time: u64, frames: &mut [Frame]) {
        if !self.jit.has(pid) {
            return;
        }
        for f in frames.iter_mut().filter(|f| !f.kernel) {
            f.cookie = self.jit_cookie(pid, f.cookie, f.offset, time);
        }
    }
}

#[cfg(test)]
#[path = "jit_tests.rs"]
mod tests;
