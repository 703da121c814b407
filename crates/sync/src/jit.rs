//! JIT dump files (`jit-PID.dump`) at sync time: what a runtime said about
//! the code it generated (Python 3.13's `-X perf_jit`, node's
//! `--perf-prof`, Java agents), read while the session records, so that
//! samples and stack frames in that code are named, annotated and unwound
//! with no step after recording (perf needs `perf record -k 1` and `perf
//! inject --jit`).
//!
//! - **Noticed by its mapping.** A runtime maps its dump (executable, so
//!   that the kernel reports it); an MMAP record (or a `/proc/PID/maps`
//!   line at start) whose file is named `jit-*.dump` makes the process's
//!   dump followed. The file is opened through the process's own mapping
//!   (`/proc/PID/map_files`: a container's `/tmp` too), checked by the
//!   probe (a regular file, its process's user's own), and held open.
//! - **Read as it grows, bounded.** Each round reads on from where the
//!   last read ended, at its start (so that its samples know the code
//!   written before them) and at its end (so that its hits are named in
//!   its own chunk): at most [`JIT_READ_PER_ROUND`] bytes of a dump while
//!   its process lives, and all that its runtime flushed at exit (Python
//!   holds 4 KiB of records, node 2 MB) in at most [`JIT_EXIT_ROUNDS`] after;
//!   at most [`JIT_READ_PER_CALL`] bytes and [`JIT_READ_TIME`] for all
//!   dumps a read, whatever their number, and [`JIT_READ_AT_END`] and
//!   [`JIT_READ_TIME_AT_END`] at the session's end. A dump is
//!   read no further than [`JIT_MAX_DUMP_BYTES`]; a malformed record ends
//!   its reading (counted). A pid met again (a new process) ends its old
//!   dump at once.
//! - **Generations.** A sample's code is found by its address among the
//!   functions the dump has described. A runtime that puts new code where
//!   other code was (a load or move onto a described range) starts a new
//!   generation from that record's time, with a cookie of its own
//!   (`profkit_eventlog::cookie::jit_cookie`), so that within a cookie no
//!   two functions overlap and a report names each offset once. A sample
//!   resolves to the function placed last before its time that covers its
//!   address, in whichever generation. One written before the record of
//!   newer code at its address was read went to the older code; when that
//!   record comes and all (or, by their first and last times, most) of the
//!   older code's hits came after it, the new function's marker is written
//!   under the older cookie too, and a report names those addresses by
//!   the later-timed marker ([`JitStats::late_renamed`] of
//!   [`JitStats::generations_late`]). A process that execs drops its old
//!   program's dump.
//! - **Written when hit.** The session gets a function's name, code bytes
//!   and lines (`Event::JitCode`) only when a sample or a frame hits it,
//!   once per session file (the rest are counted). A hit on an address
//!   the dump has not described yet (the runtime has not flushed) is kept
//!   ([`JIT_MAX_PENDING_HITS`] per dump), and the function's marker comes
//!   with the chunk of the round that reads it: reports collect markers
//!   from every chunk.
//! - **Bounded memory.** At most [`JIT_MAX_DUMPS`] dumps followed,
//!   [`JIT_MAX_FUNCTIONS`] functions held, [`JIT_MAX_HELD_BYTES`] bytes of
//!   names, source lines and unwind information (identical unwind information shared:
//!   node's 200 k functions have 6 kinds); past them functions are counted,
//!   not held. Code bytes are not held: a function's are read from its
//!   dump (held open until its process is forgotten) when it is written.
//!   What is written is bounded too: [`JIT_MAX_MARKER_BYTES_PER_DUMP`] of
//!   markers a dump and [`JIT_MAX_MARKER_BYTES`] in all a session file.
//!
//! Not here: parsing the files (`profkit-jitdump`), stepping frames with
//! what is held (`crate::unwind::jit`), naming (reports).

use crate::unwind::{JitCodeInfo, JitUnwind};
use profkit_eventlog::cookie::{anon_cookie, jit_cookie, jit_entry};
use profkit_eventlog::{Cookie, CookieEntry, JitCode, JitLine};
use profkit_jitdump::{DumpReader, Limits, Record, Timed};
use rustc_hash::{FxHashMap, FxHashSet};
use std::collections::BTreeMap;
use std::fs::File;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Bytes of one dump read at a time while its process lives.
pub const JIT_READ_PER_ROUND: u64 = 4 << 20;
/// Bytes of all dumps read at a time (twice a round), whatever the number
/// of dumps or their size (dumps past it wait for the next read).
pub const JIT_READ_PER_CALL: u64 = 16 << 20;
/// Time the stage may spend reading dumps at a time (twice a round),
/// whatever their bytes: a release build takes in some 450 MB/s of node's
/// dump (a few MB a read), an unoptimized one a tenth of that.
pub const JIT_READ_TIME: Duration = Duration::from_millis(10);
/// Bytes of all dumps read at the session's end.
pub const JIT_READ_AT_END: u64 = 256 << 20;
/// Time the stage may spend reading dumps at the session's end.
pub const JIT_READ_TIME_AT_END: Duration = Duration::from_secs(2);
/// Bytes read in one piece (the reader's buffer; the time is checked
/// between pieces).
const JIT_READ_PIECE: u64 = 256 << 10;
/// Rounds an exited process's dump is read on for at most (its runtime
/// flushed at exit), [`JIT_READ_TIME`] twice a round, before it is given
/// up (a minute at the default interval).
pub const JIT_EXIT_ROUNDS: u64 = 240;
/// A dump is read no further than this.
pub const JIT_MAX_DUMP_BYTES: u64 = 4 << 30;
/// Dumps followed at once, each held open: a quarter of the usual
/// open-file limit of 1024 (JIT maps being copied hold up to another
/// quarter).
pub const JIT_MAX_DUMPS: usize = 256;
/// Functions held, over all dumps: some 340 bytes each in the daemon
/// (measured: 512 Ki of them made 180 MB), so at most some 90 MB; node on
/// 100 k `new Function`s describes 202 k. Their names and unwind
/// information count in [`JIT_MAX_HELD_BYTES`] too.
pub const JIT_MAX_FUNCTIONS: u64 = 256 << 10;
/// Bytes of names, source lines and unwind information held, over all
/// dumps (code bytes are read from the dumps when needed, never held).
pub const JIT_MAX_HELD_BYTES: u64 = 64 << 20;
/// How far below a new function's start a function hit earlier is looked
/// for (one that started further down and reaches into it is not).
const SCAN_BACK: u64 = 64 << 10;

/// A dump with this many functions is freed on a thread of its own.
const FREE_ELSEWHERE: usize = 16 << 10;

/// Generations of one dump: past them, code put where code was replaces
/// it in the newest generation (its older samples then named by the new
/// code).
pub const JIT_MAX_GENERATIONS: usize = 1024;
/// Bytes of `JitCode` markers one dump may write to a session file (its
/// functions' names, code and lines): a user's runtime cannot fill root's
/// disk through the functions it makes its samples hit. Past it its
/// functions are counted, not written (their samples show as addresses).
pub const JIT_MAX_MARKER_BYTES_PER_DUMP: u64 = 32 << 20;
/// Bytes of `JitCode` markers all dumps may write to a session file.
pub const JIT_MAX_MARKER_BYTES: u64 = 256 << 20;
/// Addresses hit but not described yet, kept per dump.
pub const JIT_MAX_PENDING_HITS: usize = 65_536;

/// Whether a mapped file's path names a jitdump (`jit-*.dump`).
pub fn is_jitdump_path(path: &str) -> bool {
    let name = path.rsplit('/').next().unwrap_or(path);
    name.len() > "jit-.dump".len() && name.starts_with("jit-") && name.ends_with(".dump")
}

/// What the sync stage did with JIT dumps.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JitStats {
    /// Dumps followed.
    pub dumps: u64,
    /// Dumps that could not be opened (gone, refused by the checks).
    pub unopened: u64,
    /// Dumps not followed: [`JIT_MAX_DUMPS`] were already.
    pub over_dumps: u64,
    /// Dumps whose reading ended at a malformed record, or at
    /// [`JIT_MAX_DUMP_BYTES`].
    pub malformed: u64,
    /// Bytes read.
    pub bytes: u64,
    /// Functions described (loads and moves).
    pub functions: u64,
    /// Functions not held: [`JIT_MAX_FUNCTIONS`].
    pub functions_over: u64,
    /// Functions written without their code bytes (over the format's
    /// 1 MiB, or not readable from their dump): no annotation.
    pub code_not_held: u64,
    /// Functions written to the session (hit by samples or frames).
    pub written: u64,
    /// Generations started (a runtime reusing addresses).
    pub generations: u64,
    /// Functions replaced by code whose record was read after samples of
    /// a later time had been written under them.
    pub generations_late: u64,
    /// Of those, the ones whose samples were then named by the new code
    /// (all, or most by their times, came after it).
    pub late_renamed: u64,
    /// Addresses hit that no described function covered when the dump was
    /// read to its end (or the session stopped).
    pub undescribed: u64,
    /// Hits not kept: [`JIT_MAX_PENDING_HITS`].
    pub hits_dropped: u64,
    /// Functions hit but not written: the markers' bytes bounds
    /// ([`JIT_MAX_MARKER_BYTES_PER_DUMP`], [`JIT_MAX_MARKER_BYTES`]).
    pub markers_over: u64,
    /// Dumps given up before their end: their process exited
    /// [`JIT_EXIT_ROUNDS`] ago (or its pid was reused) and what its
    /// runtime wrote was not read yet.
    pub unread_at_exit: u64,
}

/// A debug-info record's lines: (the code's address, files, lines).
type Lines = (u64, Arc<[String]>, Arc<[JitLine]>);

/// Samples at an address no function described when they were written.
#[derive(Debug, Clone, Copy)]
struct Pending {
    first: u64,
    last: u64,
    named: bool,
}

/// One function a dump described.
#[derive(Debug, Clone)]
struct Func {
    size: u64,
    index: u64,
    time: u64,
    name: Arc<str>,
    /// Where its code bytes are in the dump (read when the function is
    /// written: a runtime's code is mostly never hit, and node's dumps are
    /// 90 % code bytes).
    code_at: u64,
    unwind: Option<JitUnwind>,
    files: Arc<[String]>,
    lines: Arc<[JitLine]>,
    /// Unique in the session: the unwinder's cache key.
    key: u64,
    /// Written to the current session file.
    written: bool,
    /// Samples and frames resolved to it, and the first and last of
    /// their times.
    hits: u64,
    first_hit: u64,
    last_hit: u64,
}

#[derive(Debug)]
struct Generation {
    start: u64,
    cookie: Cookie,
    funcs: BTreeMap<u64, Func>,
}

impl Generation {
    fn covering(&self, addr: u64) -> Option<(u64, &Func)> {
        let (&a, f) = self.funcs.range(..=addr).next_back()?;
        (addr - a < f.size).then_some((a, f))
    }

    fn overlaps(&self, addr: u64, size: u64) -> bool {
        let end = addr.saturating_add(size.max(1));
        self.funcs
            .range(..end)
            .next_back()
            .is_some_and(|(&a, f)| a.saturating_add(f.size.max(1)) > addr)
    }
}

impl Dump {
    /// The function at `addr` at `time`: the one placed last before
    /// `time` that covers it, as (generation, its start). A generation
    /// holds the functions placed while it was the newest, so a function
    /// of an older one still covers the addresses no later one took.
    fn find(&self, addr: u64, time: u64) -> Option<(usize, u64)> {
        let newest = self.gens.partition_point(|g| g.start <= time).max(1) - 1;
        (0..=newest).rev().find_map(|gi| {
            let (a, f) = self.gens[gi].covering(addr)?;
            // Placed in this generation after `time`: not there yet.
            (f.time <= time || gi == 0).then_some((gi, a))
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Its process lives: read a round's share.
    Open,
    /// Its process exited: read on to its end (its runtime flushed).
    Exited,
    /// Read to its end (or given up): nothing more.
    Done,
}

#[derive(Debug)]
struct Dump {
    path: String,
    pid: u32,
    dev: u64,
    inode: u64,
    file: Option<File>,
    reader: DumpReader,
    state: State,
    pending_unwind: Option<JitUnwind>,
    pending_debug: Option<Lines>,
    gens: Vec<Generation>,
    /// Addresses hit while no function described them, by (address, the
    /// generation whose cookie those samples went to): the first and last
    /// of their times, and whether a function has named them since.
    hits: BTreeMap<(u64, usize), Pending>,
    /// (generation, function key) of the markers written for pending hits.
    hits_named: FxHashSet<(usize, u64)>,
    /// Functions hit so far: (start, generation) → end.
    hit_funcs: BTreeMap<(u64, usize), u64>,
    /// The round its process exited in.
    exit_round: Option<u64>,
    /// When its mapping was made (0: before the session).
    since: u64,
    /// Its process's anonymous code's cookie (what its samples in JIT code
    /// resolve to before they are the dump's).
    anon: Cookie,
    /// Bytes of markers it wrote to this session file.
    marker_used: u64,
    /// Records read, to be taken.
    records: Vec<Timed>,
}

/// The JIT dumps of the processes the stage follows.
#[derive(Debug, Default)]
pub(crate) struct JitDumps {
    by_pid: FxHashMap<u32, Dump>,
    functions: u64,
    held: u64,
    unwind_shared: FxHashSet<Arc<[u8]>>,
    next_key: u64,
    /// Bytes of markers all dumps wrote to this session file.
    marker_used: u64,
    /// What first reads of dumps just noticed may still take until the
    /// next read of all (many processes mapping dumps in one round share
    /// one read's time).
    new_left: Duration,
    pub(crate) stats: JitStats,
}

/// What reading the dumps produced for the stage to write: cookies that
/// need defining and functions hit.
#[derive(Debug, Default)]
pub(crate) struct JitOutput {
    pub(crate) cookies: Vec<CookieEntry>,
    pub(crate) code: Vec<JitCode>,
}

impl JitDumps {
    /// A read of all dumps (or the time for one, when there are none):
    /// dumps noticed until the next one may take a read's time.
    pub(crate) fn new_read(&mut self) {
        self.new_left = JIT_READ_TIME;
    }

    /// Whether no dump is followed.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.by_pid.is_empty()
    }

    /// Whether process `pid` has a dump followed.
    #[inline]
    pub(crate) fn has(&self, pid: u32) -> bool {
        !self.by_pid.is_empty() && self.by_pid.contains_key(&pid)
    }

    /// Starts following the dump `path` of process `pid` (`file`: opened
    /// by the probe; None: it could not be). The cookie entry of its
    /// first generation is returned for the stage to hold.
    pub(crate) fn notice(
        &mut self,
        pid: u32,
        path: &str,
        identity: (u64, u64),
        file: Option<File>,
        since: u64,
    ) -> Option<CookieEntry> {
        if let Some(d) = self.by_pid.get(&pid) {
            // The same mapping met again (a `/proc` read after its record;
            // a build-id MMAP2 record gives no identity, and an unopened
            // dump has none of its own).
            let unknown = (0, 0);
            let same =
                (d.dev, d.inode) == identity || identity == unknown || (d.dev, d.inode) == unknown;
            if same && d.path == path {
                return None;
            }
        }
        if !self.by_pid.contains_key(&pid) && self.by_pid.len() >= JIT_MAX_DUMPS {
            self.stats.over_dumps += 1;
            return None;
        }
        if file.is_none() {
            self.stats.unopened += 1;
        }
        self.stats.dumps += 1;
        let (dev, inode) = identity;
        let entry = jit_entry(pid, path, dev, inode, 0);
        let d = Dump {
            path: path.to_owned(),
            pid,
            dev,
            inode,
            state: if file.is_some() {
                State::Open
            } else {
                State::Done
            },
            file,
            // Code bytes are read from the file when written, not held.
            reader: DumpReader::new(Limits {
                max_code: 0,
                ..Limits::default()
            }),
            pending_unwind: None,
            pending_debug: None,
            gens: vec![Generation {
                start: 0,
                cookie: entry.cookie,
                funcs: BTreeMap::new(),
            }],
            hits: BTreeMap::new(),
            hits_named: FxHashSet::default(),
            hit_funcs: BTreeMap::new(),
            exit_round: None,
            since,
            anon: anon_cookie(pid),
            marker_used: 0,
            records: Vec::new(),
        };
        if let Some(old) = self.by_pid.insert(pid, d) {
            self.forget(old);
        }
        Some(entry)
    }

    fn forget(&mut self, d: Dump) {
        let mut n = 0usize;
        for g in &d.gens {
            for f in g.funcs.values() {
                self.functions = self.functions.saturating_sub(1);
                self.held = self.held.saturating_sub(held_of(f));
                n += 1;
            }
        }
        // Freeing half a million functions takes some 100 ms: not on the
        // stage's thread.
        if n >= FREE_ELSEWHERE {
            let _ = std::thread::Builder::new()
                .name("profkit-jit-free".into())
                .spawn(move || drop(d));
        }
    }

    /// Process `pid` exited in round `round`: its dump is read to the end
    /// at that round's end, and forgotten two rounds later (samples it
    /// left in rings drained later still find it).
    pub(crate) fn exited(&mut self, pid: u32, round: u64) {
        if let Some(d) = self.by_pid.get_mut(&pid) {
            if d.state == State::Open {
                d.state = State::Exited;
            }
            d.exit_round.get_or_insert(round);
        }
    }

    /// A new session file: every function is written again when next hit.
    pub(crate) fn reset(&mut self) {
        self.marker_used = 0;
        for d in self.by_pid.values_mut() {
            d.marker_used = 0;
            d.hits_named.clear();
            for g in &mut d.gens {
                for f in g.funcs.values_mut() {
                    f.written = false;
                }
            }
        }
    }

    /// Reads what the dumps gained (to their end when `at_end`: the
    /// session stops) and returns the functions that pending hits now
    /// name, with the cookies of new generations.
    pub(crate) fn read(&mut self, at_end: bool, round: u64) -> JitOutput {
        let mut out = JitOutput::default();
        self.new_read();
        let mut pids: Vec<u32> = self.by_pid.keys().copied().collect();
        // A fair share of the read's budget: dumps in a different order
        // each round.
        pids.sort_unstable();
        if !pids.is_empty() {
            let n = pids.len();
            pids.rotate_left(usize::try_from(round).unwrap_or(0) % n);
        }
        let mut left = if at_end {
            JIT_READ_AT_END
        } else {
            JIT_READ_PER_CALL
        };
        let deadline = Instant::now()
            + if at_end {
                JIT_READ_TIME_AT_END
            } else {
                JIT_READ_TIME
            };
        for pid in pids {
            let Some(mut d) = self.by_pid.remove(&pid) else {
                continue;
            };
            // Read to its end (and its samples' rounds past), or read on
            // for too long: forgotten.
            let retire = d.exit_round.is_some_and(|r| {
                (d.state == State::Done && round >= r.saturating_add(2))
                    || round >= r.saturating_add(JIT_EXIT_ROUNDS)
            });
            // A live process's dump gets its share; an exited one's (or
            // any at the end) what is left, in pieces, while time is left.
            let mut share = if d.state == State::Exited || at_end {
                left
            } else {
                left.min(JIT_READ_PER_ROUND)
            };
            let mut more = true;
            while d.state != State::Done && share > 0 && more && Instant::now() < deadline {
                let (read, m) = self.read_dump(&mut d, share.min(JIT_READ_PIECE));
                more = m;
                left = left.saturating_sub(read);
                share = share.saturating_sub(read.max(1));
                let records = std::mem::take(&mut d.records);
                self.take_records(&mut d, records, &mut out);
            }
            if d.state != State::Done && (at_end || (d.state == State::Exited && !more)) {
                if more {
                    // Given up with bytes left: counted.
                    self.stats.unread_at_exit += 1;
                }
                d.state = State::Done;
            }
            if retire {
                // Gone from the stage's tables: its pid may name another
                // process next.
                self.retire(d);
                continue;
            }
            if at_end || d.state == State::Done {
                // Nothing more will describe these.
                self.stats.undescribed += d.hits.values().filter(|h| !h.named).count() as u64;
                d.hits.clear();
            }
            self.by_pid.insert(pid, d);
        }
        out
    }

    /// A first read of process `pid`'s dump, just noticed (what its
    /// runtime wrote before its mapping was read: all of it, in an
    /// imported recording), within what is left of one read's time for
    /// all dumps noticed since the last read.
    pub(crate) fn read_new(&mut self, pid: u32) -> JitOutput {
        let mut out = JitOutput::default();
        let Some(mut d) = self.by_pid.remove(&pid) else {
            return out;
        };
        let start = Instant::now();
        let deadline = start + self.new_left;
        let mut left = JIT_READ_PER_CALL;
        let mut more = true;
        while d.state != State::Done && left > 0 && more && Instant::now() < deadline {
            let (read, m) = self.read_dump(&mut d, left.min(JIT_READ_PIECE));
            more = m;
            left = left.saturating_sub(read.max(1));
            let records = std::mem::take(&mut d.records);
            self.take_records(&mut d, records, &mut out);
        }
        self.new_left = self.new_left.saturating_sub(start.elapsed());
        self.by_pid.insert(pid, d);
        out
    }

    /// Process `pid` is met again (a fork or a mapping of a new process
    /// under its pid): a dump of the exited one ends now.
    pub(crate) fn pid_reused(&mut self, pid: u32) {
        if self
            .by_pid
            .get(&pid)
            .is_some_and(|d| d.exit_round.is_some())
        {
            if let Some(d) = self.by_pid.remove(&pid) {
                self.retire(d);
            }
        }
    }

    /// Process `pid` exec'd a new program at `time`: a dump its old
    /// program mapped is its no more (the new one maps its own).
    pub(crate) fn exec(&mut self, pid: u32, time: u64) {
        if self.by_pid.get(&pid).is_some_and(|d| d.since < time) {
            if let Some(d) = self.by_pid.remove(&pid) {
                self.retire(d);
            }
        }
    }

    fn retire(&mut self, d: Dump) {
        if d.state != State::Done {
            self.stats.unread_at_exit += 1;
        }
        self.stats.undescribed += d.hits.values().filter(|h| !h.named).count() as u64;
        self.forget(d);
    }

    /// Reads at most `budget` bytes of `d` into its pending records:
    /// (bytes read, whether it stopped at the budget).
    fn read_dump(&mut self, d: &mut Dump, budget: u64) -> (u64, bool) {
        let Some(file) = d.file.as_ref() else {
            return (0, false);
        };
        let left = JIT_MAX_DUMP_BYTES.saturating_sub(d.reader.offset());
        if left == 0 {
            self.stats.malformed += 1;
            d.state = State::Done;
            return (0, false);
        }
        let before = d.reader.stats().bytes;
        let got = d.reader.read(file, budget.min(left));
        let read = d.reader.stats().bytes.saturating_sub(before);
        self.stats.bytes += read;
        match got {
            Ok(o) => {
                d.records = o.records;
                (read, o.more)
            }
            Err(_) => {
                self.stats.malformed += 1;
                d.state = State::Done;
                (read, false)
            }
        }
    }

    fn take_records(&mut self, d: &mut Dump, records: Vec<Timed>, out: &mut JitOutput) {
        for t in records {
            self.take(d, t.time, t.offset, t.record, out);
        }
    }

    fn take(&mut self, d: &mut Dump, time: u64, offset: u64, rec: Record, out: &mut JitOutput) {
        match rec {
            Record::UnwindingInfo(u) => {
                let hdr_len = usize::try_from(u.eh_frame_hdr_size).unwrap_or(usize::MAX);
                d.pending_unwind = self
                    .share_unwind(u.data)
                    .map(|data| JitUnwind { data, hdr_len });
            }
            Record::DebugInfo(info) => {
                d.pending_debug = Some(lines_of(info));
            }
            Record::CodeLoad(l) => {
                let code_at = offset.saturating_add(l.code_offset);
                let unwind = d.pending_unwind.take();
                let debug = d.pending_debug.take().filter(|x| x.0 == l.code_addr);
                let (files, lines) = debug.map_or_else(
                    || (Arc::from(Vec::new()), Arc::from(Vec::new())),
                    |(_, f, l)| (f, l),
                );
                let f = Func {
                    size: l.code_size,
                    index: l.code_index,
                    time,
                    name: Arc::from(l.name),
                    code_at,
                    unwind,
                    files,
                    lines,
                    key: 0,
                    written: false,
                    hits: 0,
                    first_hit: u64::MAX,
                    last_hit: 0,
                };
                self.held = self.held.saturating_add(held_of(&f));
                self.place(d, time, l.code_addr, f, out);
            }
            Record::CodeMove(m) => {
                let g = d.gens.last().expect("a dump has a generation");
                let moved = g
                    .funcs
                    .get(&m.old_code_addr)
                    .filter(|f| f.index == m.code_index)
                    .cloned();
                if let Some(mut f) = moved {
                    f.time = time;
                    f.written = false;
                    (f.hits, f.first_hit, f.last_hit) = (0, u64::MAX, 0);
                    self.held = self.held.saturating_add(held_of(&f));
                    self.place(d, time, m.new_code_addr, f, out);
                }
            }
            Record::Close | Record::Unknown { .. } => {}
        }
    }

    /// Puts function `f` at `addr` from `time`: in the current generation,
    /// or a new one if it lands on described code.
    fn place(&mut self, d: &mut Dump, time: u64, addr: u64, mut f: Func, out: &mut JitOutput) {
        if f.size == 0 {
            return;
        }
        if self.functions >= JIT_MAX_FUNCTIONS || self.held > JIT_MAX_HELD_BYTES {
            self.stats.functions_over += 1;
            self.held = self.held.saturating_sub(held_of(&f));
            return;
        }
        self.stats.functions += 1;
        self.functions += 1;
        self.next_key += 1;
        f.key = self.next_key;
        self.correct_late(d, time, addr, &f, out);
        if d.gens.len() < JIT_MAX_GENERATIONS
            && d.gens.last().is_some_and(|g| g.overlaps(addr, f.size))
        {
            let n = d.gens.len() as u64;
            let e = jit_entry(d.pid, &d.path, d.dev, d.inode, n);
            self.stats.generations += 1;
            d.gens.push(Generation {
                start: time,
                cookie: jit_cookie(d.pid, d.dev, d.inode, n),
                funcs: BTreeMap::new(),
            });
            out.cookies.push(e);
        }
        // Samples written before any function described their address,
        // under the cookie of their time, are named by the functions
        // described there since (written under that cookie; a report
        // names an address by the later-timed of them).
        let end = addr.saturating_add(f.size);
        let mut under: Vec<usize> = Vec::new();
        for (&(_, gi), h) in d.hits.range_mut((addr, 0)..(end, 0)) {
            // The first function described there names them (whatever its
            // time: nothing better is known of that code); a later one
            // only if it was there by the last of them and all or most
            // of them (by their first and last times) came after it.
            let after = h.last.saturating_sub(f.time.max(h.first));
            let span = h.last.saturating_sub(h.first).max(1);
            if !h.named || (f.time <= h.last && (h.first >= f.time || after * 2 > span)) {
                h.named = true;
                if !under.contains(&gi) {
                    under.push(gi);
                }
            }
        }
        for gi in under {
            if d.hits_named.insert((gi, f.key)) {
                let used = (&mut self.marker_used, &mut d.marker_used);
                let cookie = d.gens[gi].cookie;
                out.code.extend(marker(
                    cookie,
                    addr,
                    &f,
                    d.file.as_ref(),
                    &mut self.stats,
                    used,
                ));
            }
        }
        let g = d.gens.last_mut().expect("a dump has a generation");
        g.funcs.insert(addr, f);
    }

    /// Function `f`, at `addr` from `time`, replaces code that samples of
    /// a later time were already written under (its runtime wrote the
    /// record late): when those samples are all (or, by their first and
    /// last times, mostly) after `time`, `f`'s marker is written under the
    /// older code's cookie too, whose later-timed marker a report names
    /// those addresses by. Counted: `generations_late`, `late_renamed`.
    fn correct_late(&mut self, d: &mut Dump, time: u64, addr: u64, f: &Func, out: &mut JitOutput) {
        let end = addr.saturating_add(f.size);
        let mut fix: Vec<usize> = Vec::new();
        // Only functions hit can have had samples written under them.
        let hit: Vec<(u64, usize)> = d
            .hit_funcs
            .range(..(end, 0))
            .rev()
            .take_while(|((a, _), _)| *a >= addr.saturating_sub(SCAN_BACK))
            .take(256)
            .filter(|(_, &e)| e > addr)
            .map(|(&k, _)| k)
            .collect();
        for (a, gi) in hit {
            if let Some(old) = d.gens[gi].funcs.get(&a) {
                if old.hits == 0 || old.last_hit < time {
                    continue;
                }
                self.stats.generations_late += 1;
                // The share of its hits after `time`, were they spread
                // evenly between its first and last.
                let span = old.last_hit.saturating_sub(old.first_hit).max(1);
                let after = old.last_hit.saturating_sub(time.max(old.first_hit));
                if old.first_hit >= time || after * 2 > span {
                    fix.push(gi);
                }
            }
        }
        fix.sort_unstable();
        fix.dedup();
        for gi in fix {
            let used = (&mut self.marker_used, &mut d.marker_used);
            let cookie = d.gens[gi].cookie;
            if let Some(m) = marker(cookie, addr, f, d.file.as_ref(), &mut self.stats, used) {
                self.stats.late_renamed += 1;
                out.code.push(m);
            }
        }
    }

    fn share_unwind(&mut self, data: Vec<u8>) -> Option<Arc<[u8]>> {
        if let Some(shared) = self.unwind_shared.get(&data[..]) {
            return Some(shared.clone());
        }
        let n = data.len() as u64;
        if self.held.saturating_add(n) > JIT_MAX_HELD_BYTES || self.unwind_shared.len() >= 1 << 16 {
            return None;
        }
        self.held += n;
        let a: Arc<[u8]> = data.into();
        self.unwind_shared.insert(a.clone());
        Some(a)
    }

    /// The cookie a sample (or frame) of process `pid` at `addr`, `time`
    /// in anonymous code (`cookie`, its anonymous code's) belongs to, and
    /// the function's marker if this is its first hit in the session file.
    /// None: `pid` has no dump, or `cookie` is not its anonymous code's.
    pub(crate) fn resolve(
        &mut self,
        pid: u32,
        cookie: Cookie,
        addr: u64,
        time: u64,
    ) -> Option<(Cookie, Option<JitCode>)> {
        let d = self.by_pid.get_mut(&pid)?;
        if cookie != d.anon {
            return None;
        }
        match d.find(addr, time) {
            Some((gi, a)) => {
                let g = &mut d.gens[gi];
                let cookie = g.cookie;
                let f = g.funcs.get_mut(&a)?;
                if f.hits == 0 && d.hit_funcs.len() < JIT_MAX_PENDING_HITS {
                    d.hit_funcs.insert((a, gi), a.saturating_add(f.size));
                }
                f.hits += 1;
                f.first_hit = f.first_hit.min(time);
                f.last_hit = f.last_hit.max(time);
                if f.written {
                    return Some((cookie, None));
                }
                f.written = true;
                let used = (&mut self.marker_used, &mut d.marker_used);
                let m = marker(cookie, a, f, d.file.as_ref(), &mut self.stats, used);
                Some((cookie, m))
            }
            None => {
                // Not described (yet): the generation of its time.
                let gi = d.gens.partition_point(|g| g.start <= time).max(1) - 1;
                let cookie = d.gens[gi].cookie;
                if d.state != State::Done {
                    let room = d.hits.len() < JIT_MAX_PENDING_HITS;
                    match d.hits.get_mut(&(addr, gi)) {
                        Some(h) => {
                            h.first = h.first.min(time);
                            h.last = h.last.max(time);
                        }
                        None if room => {
                            let h = Pending {
                                first: time,
                                last: time,
                                named: false,
                            };
                            d.hits.insert((addr, gi), h);
                        }
                        None => self.stats.hits_dropped += 1,
                    }
                }
                Some((cookie, None))
            }
        }
    }

    /// Reads the code of process `pid`'s described function at `addr` from
    /// its dump into `buf` (an import's: no process to read); the bytes
    /// read.
    pub(crate) fn read_code(&self, pid: u32, addr: u64, time: u64, buf: &mut [u8]) -> usize {
        use std::os::unix::fs::FileExt;
        let Some(d) = self.by_pid.get(&pid) else {
            return 0;
        };
        let Some((gi, a)) = d.find(addr, time) else {
            return 0;
        };
        let (Some(f), Some(file)) = (d.gens[gi].funcs.get(&a), d.file.as_ref()) else {
            return 0;
        };
        let at = addr - a;
        let n = usize::try_from((f.size - at).min(buf.len() as u64)).unwrap_or(0);
        file.read_at(&mut buf[..n], f.code_at + at).unwrap_or(0)
    }

    /// What the unwinder may use of the function covering `addr` in
    /// process `pid` at `time`.
    pub(crate) fn code_at(&self, pid: u32, addr: u64, time: u64) -> Option<JitCodeInfo> {
        let d = self.by_pid.get(&pid)?;
        let (gi, a) = d.find(addr, time)?;
        let f = d.gens[gi].funcs.get(&a)?;
        Some(JitCodeInfo {
            key: f.key,
            code: a..a.saturating_add(f.size),
            unwind: f.unwind.clone(),
        })
    }
}

mod markers;
use markers::{held_of, lines_of, marker};

#[cfg(test)]
mod tests;
