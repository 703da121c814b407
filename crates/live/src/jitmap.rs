//! JIT maps (`perf-PID.map`) kept by their lines, not their bytes: a map
//! is a file its process's user writes, read as root and copied into
//! root's session, so what is copied is what it is worth.
//!
//! - Parsed line by line: a line is `START SIZE NAME` (hexadecimal start
//!   and size, a name without control characters), at most
//!   [`PERF_MAP_LINE_MAX`] bytes; anything else is not copied (counted).
//!   Holes are skipped unread (a line across one is not a line).
//! - Each map keeps at most [`PERF_MAP_KEPT_MAX_LINES`] lines and
//!   [`PERF_MAP_KEPT_MAX_BYTES`]; lines past those are counted, not kept.
//! - Read on from where the last read ended, at most
//!   [`PERF_MAP_READ_PER_LOOK`] a look while the process lives: only new
//!   complete lines are appended. A map that shrank (truncated and written again) or was
//!   replaced is read from its start again, but a line already kept is
//!   never written twice (a keyed 64-bit hash of every kept line), so a
//!   truncate-and-regrow loop costs nothing new per round.

use crate::sparse::for_each_data;
use std::collections::HashSet;
use std::fs::File;
use std::hash::{BuildHasher, RandomState};
use std::os::unix::fs::{FileExt, MetadataExt};

/// Bytes before where a read ended compared at the next.
const TAIL: u64 = 64;

/// The longest line kept (newline included).
pub const PERF_MAP_LINE_MAX: usize = 4096;
/// Lines kept of one map, at most.
pub const PERF_MAP_KEPT_MAX_LINES: u64 = 256 << 10;
/// Bytes kept of one map, at most.
pub const PERF_MAP_KEPT_MAX_BYTES: u64 = 32 << 20;
/// Bytes of a map read at one look while its process lives (the rest at
/// the next looks, all of it at its last): one big map does not keep the
/// map thread from its first look at other processes.
pub const PERF_MAP_READ_PER_LOOK: u64 = 1 << 20;

/// One map's copy: what was read of it and which lines were kept.
#[derive(Debug)]
pub(crate) struct MapCopy {
    keys: RandomState,
    seen: HashSet<u64>,
    /// The source's (device, inode) when last read.
    identity: Option<(u64, u64)>,
    /// The source read up to here, and its last bytes before there (a
    /// map written again to a size past it is told by them).
    read_to: u64,
    tail: Vec<u8>,
    /// The line read so far past the last newline (at most the line
    /// bound), and whether it is already not a line (too long, a hole).
    line: Vec<u8>,
    broken: bool,
    /// Lines and bytes kept (handed out by [`MapCopy::read_new`]).
    pub(crate) kept_lines: u64,
    pub(crate) kept_bytes: u64,
    /// Lines not copied: not a map line, or too long.
    pub(crate) lines_refused: u64,
    /// Lines not kept because the map's bounds (or the caller's) were met.
    pub(crate) lines_over: u64,
    /// Lines seen again after the map shrank or was replaced.
    pub(crate) lines_again: u64,
    /// Bytes in the copy on disk.
    pub(crate) written: u64,
    /// The last read stopped at a line that did not fit in its room.
    pub(crate) full: bool,
    /// The room of the read under way.
    room: u64,
}

impl Default for MapCopy {
    fn default() -> Self {
        MapCopy {
            keys: RandomState::new(),
            seen: HashSet::new(),
            identity: None,
            read_to: 0,
            tail: Vec::new(),
            line: Vec::new(),
            broken: false,
            kept_lines: 0,
            kept_bytes: 0,
            lines_refused: 0,
            lines_over: 0,
            lines_again: 0,
            written: 0,
            full: false,
            room: u64::MAX,
        }
    }
}

/// Whether `l` (without its newline) is a perf map line: hexadecimal
/// start and size, a name.
pub(crate) fn is_map_line(l: &[u8]) -> bool {
    fn hex(t: &[u8]) -> bool {
        let t = match t {
            [b'0', b'x' | b'X', rest @ ..] => rest,
            _ => t,
        };
        if t.is_empty() || t.len() > 16 {
            return false;
        }
        let mut i = 0;
        while i < t.len() {
            if !t[i].is_ascii_hexdigit() {
                return false;
            }
            i += 1;
        }
        true
    }
    let Some(a) = memchr::memchr(b' ', l) else {
        return false;
    };
    let Some(b) = memchr::memchr(b' ', &l[a + 1..]).map(|b| a + 1 + b) else {
        return false;
    };
    let name = &l[b + 1..];
    // No NUL (a hole's zeros), CR or ESC (a terminal's controls) in a
    // name; reports print names through `printable` besides.
    hex(&l[..a])
        && hex(&l[a + 1..b])
        && !name.is_empty()
        && memchr::memchr3(0, b'\r', 0x1b, name).is_none()
}

impl MapCopy {
    /// Forgets what was read and kept (the copy on disk is to be written
    /// again from nothing); the hash keys stay.
    pub(crate) fn reset(&mut self) {
        let keys = std::mem::replace(&mut self.keys, RandomState::new());
        *self = MapCopy {
            keys,
            ..Default::default()
        };
    }

    /// The new lines of `src` since the last read, each with its newline
    /// (`last`: the process is gone or the session stops, so an
    /// unterminated last line counts too), at most `lines_left` of them
    /// (taken from it; the caller's bound over all maps). A map that
    /// shrank or is another file than last time is read from its start,
    /// its lines already kept left out.
    ///
    /// At most `max` bytes are read (whole pieces of up to 64 KiB: a bit
    /// more), the rest at the next read; a `last` read reads to the end.
    /// New lines take at most `room` bytes: at the first that does not
    /// fit, reading stops and [`MapCopy::full`] says so (the rest is not
    /// read at all).
    pub(crate) fn read_new(
        &mut self,
        src: &File,
        last: bool,
        lines_left: &mut u64,
        max: u64,
        room: u64,
    ) -> std::io::Result<Vec<u8>> {
        let max = if last { u64::MAX } else { max };
        self.full = false;
        self.room = room;
        let m = src.metadata()?;
        let id = (m.dev(), m.ino());
        let len = m.len();
        let rewritten = len >= self.read_to && !self.tail.is_empty() && {
            let mut now = vec![0u8; self.tail.len()];
            src.read_exact_at(&mut now, self.read_to - self.tail.len() as u64)
                .map_or(true, |_| now != self.tail)
        };
        if self.identity != Some(id) || len < self.read_to || rewritten {
            self.identity = Some(id);
            self.read_to = 0;
            self.line.clear();
            self.broken = false;
        }
        let mut out = Vec::new();
        let mut at = self.read_to;
        let mut budget = max;
        let reached = for_each_data(src, self.read_to, len, |off, bytes| {
            if off > at {
                // A hole: no line goes across one.
                self.broken = true;
                self.line.clear();
            }
            at = off + bytes.len() as u64;
            let mut start = 0;
            for nl in memchr::memchr_iter(b'\n', bytes).map(Some).chain([None]) {
                let (body, ends) = match nl {
                    Some(i) => (&bytes[start..i], true),
                    None => (&bytes[start..], false),
                };
                if let Some(i) = nl {
                    start = i + 1;
                }
                if self.full {
                    break;
                }
                if !self.broken {
                    if self.line.len() + body.len() < PERF_MAP_LINE_MAX {
                        self.line.extend_from_slice(body);
                    } else {
                        self.broken = true;
                        self.line.clear();
                    }
                }
                if ends {
                    self.end_line(&mut out, lines_left);
                }
            }
            budget = budget.saturating_sub(bytes.len() as u64);
            budget > 0 && !self.full
        })?;
        if reached >= len && len > at && !self.line.is_empty() {
            // A hole at the end.
            self.broken = true;
            self.line.clear();
        }
        self.read_to = reached.min(len);
        let k = self.read_to.min(TAIL);
        self.tail.resize(k as usize, 0);
        if src.read_exact_at(&mut self.tail, self.read_to - k).is_err() {
            self.tail.clear();
        }
        if self.full {
            return Ok(out);
        }
        if last && self.read_to >= len && (!self.line.is_empty() || self.broken) {
            self.end_line(&mut out, lines_left);
        }
        Ok(out)
    }

    fn end_line(&mut self, out: &mut Vec<u8>, lines_left: &mut u64) {
        let line = std::mem::take(&mut self.line);
        let broken = std::mem::replace(&mut self.broken, false);
        if broken || !is_map_line(&line) {
            if broken || !line.is_empty() {
                self.lines_refused += 1;
            }
            return;
        }
        let h = self.keys.hash_one(&line);
        if self.seen.contains(&h) {
            self.lines_again += 1;
            return;
        }
        let n = line.len() as u64 + 1;
        if out.len() as u64 + n > self.room {
            self.full = true;
            return;
        }
        if self.kept_lines >= PERF_MAP_KEPT_MAX_LINES
            || self.kept_bytes + n > PERF_MAP_KEPT_MAX_BYTES
            || *lines_left == 0
        {
            self.lines_over += 1;
            return;
        }
        *lines_left -= 1;
        self.seen.insert(h);
        self.kept_lines += 1;
        self.kept_bytes += n;
        out.extend_from_slice(&line);
        out.push(b'\n');
        self.line = line;
        self.line.clear();
    }

    /// Takes back lines handed out by the last [`MapCopy::read_new`] that
    /// could not be written (`out`): they may be kept at a later read.
    pub(crate) fn unkeep(&mut self, out: &[u8], lines_left: &mut u64) {
        for l in out.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            if self.seen.remove(&self.keys.hash_one(l)) {
                self.kept_lines -= 1;
                self.kept_bytes -= l.len() as u64 + 1;
                *lines_left += 1;
            }
        }
    }

    /// A note on what was not copied of it (for its refusal), if anything.
    pub(crate) fn note(&self) -> Option<String> {
        let mut v = Vec::new();
        if self.lines_refused > 0 {
            v.push(format!(
                "{} lines not perf map lines or longer than {PERF_MAP_LINE_MAX} bytes",
                self.lines_refused
            ));
        }
        if self.lines_over > 0 {
            v.push(format!(
                "{} lines past the bounds of a map ({PERF_MAP_KEPT_MAX_LINES} lines, {PERF_MAP_KEPT_MAX_BYTES} bytes) or of all maps",
                self.lines_over
            ));
        }
        (!v.is_empty()).then(|| v.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn read(c: &mut MapCopy, f: &File, last: bool) -> String {
        let mut left = u64::MAX;
        String::from_utf8(c.read_new(f, last, &mut left, u64::MAX, u64::MAX).unwrap()).unwrap()
    }

    #[test]
    fn lines_are_parsed_and_bounded() {
        assert!(is_map_line(b"7f00 10 LazyCompile:~f a.js:1:1"));
        assert!(is_map_line(b"0x7f00 0x10 f"));
        assert!(!is_map_line(b"7f00 10 "));
        assert!(!is_map_line(b"zz 10 f"));
        assert!(!is_map_line(b"7f00 10 f\0g"));
        assert!(!is_map_line(b""));
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("m");
        let mut w = File::create(&p).unwrap();
        let long = format!("1 1 {}\n", "x".repeat(PERF_MAP_LINE_MAX));
        write!(w, "1000 10 a\ngarbage\n{long}2000 10 b\n3000 10 c").unwrap();
        let f = File::open(&p).unwrap();
        let mut c = MapCopy::default();
        assert_eq!(read(&mut c, &f, false), "1000 10 a\n2000 10 b\n");
        assert_eq!(c.lines_refused, 2);
        // The unterminated last line waits for its newline, or the end.
        writeln!(w, "0 d").unwrap();
        assert_eq!(read(&mut c, &f, false), "3000 10 c0 d\n");
        assert_eq!(read(&mut c, &f, true), "");
        write!(w, "4000 10 e").unwrap();
        assert_eq!(read(&mut c, &f, true), "4000 10 e\n");
        assert!(c.note().unwrap().contains("2 lines not perf map lines"));
    }

    /// Truncated to nothing and written again each round: nothing new is
    /// kept but what is new.
    #[test]
    fn a_map_truncated_and_regrown_costs_only_its_new_lines() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("m");
        let body: String = (0..1000)
            .map(|i| format!("{:x} 10 f{i}\n", 0x1000 + i * 16))
            .collect();
        std::fs::write(&p, &body).unwrap();
        let f = File::open(&p).unwrap();
        let mut c = MapCopy::default();
        assert_eq!(read(&mut c, &f, false), body);
        for round in 0..20 {
            let w = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
            w.set_len(0).unwrap();
            (&w).write_all(body.as_bytes()).unwrap();
            if round == 10 {
                (&w).write_all(b"ffff 10 new\n").unwrap();
            }
            let got = read(&mut c, &f, false);
            assert_eq!(got, if round == 10 { "ffff 10 new\n" } else { "" });
        }
        assert_eq!(c.kept_lines, 1001);
        // Written again to the same size with other lines: they are read.
        let w = std::fs::OpenOptions::new().write(true).open(&p).unwrap();
        w.set_len(0).unwrap();
        let other = body.replace("f999\n", "g999\n");
        (&w).write_all(other.as_bytes()).unwrap();
        assert_eq!(
            read(&mut c, &f, false),
            format!("{:x} 10 g999\n", 0x1000 + 999 * 16)
        );
        assert!(c.lines_again >= 1000, "{}", c.lines_again);
        // Replaced by another file of the same lines: nothing new either.
        std::fs::remove_file(&p).unwrap();
        std::fs::write(&p, &body).unwrap();
        assert_eq!(read(&mut c, &File::open(&p).unwrap(), true), "");
    }

    /// A read takes at most its bound; the next goes on from there.
    #[test]
    fn a_big_map_is_read_over_several_reads() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("m");
        let body: String = (0..40_000)
            .map(|i| format!("{:x} 40 f{i}\n", 0x1000 + i * 64))
            .collect();
        std::fs::write(&p, &body).unwrap();
        let f = File::open(&p).unwrap();
        let mut c = MapCopy::default();
        let mut left = u64::MAX;
        let mut got = Vec::new();
        let mut reads = 0;
        while got.len() < body.len() {
            got.extend(
                c.read_new(&f, false, &mut left, 64 << 10, u64::MAX)
                    .unwrap(),
            );
            reads += 1;
            assert!(reads < 100);
        }
        assert!(reads >= body.len() / (64 << 10), "{reads}");
        assert_eq!(String::from_utf8(got).unwrap(), body);
    }

    #[test]
    fn a_sparse_map_is_read_by_its_data_and_bounded() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("m");
        let f = File::create(&p).unwrap();
        f.set_len(255 << 20).unwrap();
        f.write_all_at(b"1000 10 a\n", 0).unwrap();
        f.write_all_at(b"x 2000 10 b\n3000 10 c\n", 128 << 20)
            .unwrap();
        let f = File::open(&p).unwrap();
        let mut c = MapCopy::default();
        let t = std::time::Instant::now();
        // The line across the hole is no line; the one after it is.
        assert_eq!(read(&mut c, &f, true), "1000 10 a\n3000 10 c\n");
        assert!(t.elapsed() < std::time::Duration::from_secs(2));
        // The line across the hole, and the zeros after the last line.
        assert_eq!(c.lines_refused, 2);
        // The caller's bound over all maps, and taking lines back.
        let mut c = MapCopy::default();
        let mut left = 1;
        let out = c.read_new(&f, true, &mut left, 0, u64::MAX).unwrap();
        assert_eq!(out, b"1000 10 a\n");
        assert_eq!((left, c.lines_over), (0, 1));
        c.unkeep(&out, &mut left);
        assert_eq!((left, c.kept_lines, c.kept_bytes), (1, 0, 0));
    }
}
