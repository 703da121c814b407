//! Opening sessions and the parallel pass over their chunks: every valid
//! chunk is decoded on a rayon worker into per-worker hash maps keyed by
//! (cookie, offset) and whatever the report separates by; the maps are then
//! merged (rayon `fold`/`reduce`). Markers (cookie definitions, thread
//! names, mappings, losses) are collected on the side with their chunk
//! index, so file order can be restored after the parallel pass.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use profkit_eventlog::{ChunkRef, Cookie, CookieEntry, Event, SessionReader, StackTable};
use rayon::prelude::*;

use crate::error::{Error, Result};
use crate::hash::FxHashMap;
use crate::spec::ProfileSpec;
use crate::Progress;

/// The file name of the session log inside a session directory.
pub const SESSION_FILE: &str = "session.pkl";
/// The kallsyms copy a session directory may hold (used instead of the
/// live `/proc/kallsyms` when present).
pub const KALLSYMS_FILE: &str = "kallsyms";
/// Where `profctl archive` puts the sampled binaries and debug files, by
/// build-id (`debug/.build-id/ab/cdef…`); searched automatically.
pub const ARCHIVE_DEBUG_DIR: &str = "debug";

/// Whether the recorder of a session is still running, as far as the
/// caller knows (the report only reads bytes; the command line asks the
/// daemon's lock).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Liveness {
    /// Not known.
    #[default]
    Unknown,
    /// A recorder holds the session: a torn tail is a chunk being written.
    Running,
    /// Nothing records into it: a missing footer means the recorder died.
    NotRunning,
}

/// One opened session: its directory (for the kallsyms copy and perf maps)
/// and its checked file.
#[derive(Debug)]
pub struct Session {
    dir: PathBuf,
    reader: SessionReader,
    liveness: Liveness,
}

impl Session {
    /// Opens the session in `dir` (`dir/session.pkl`); `dir` may also name
    /// the session file itself.
    ///
    /// # Errors
    /// [`Error::NoSession`] when there is no session file; [`Error::Session`]
    /// when it cannot be read or is not a session of a version this build
    /// reads (the message names both versions).
    pub fn open(dir: impl AsRef<Path>) -> Result<Session> {
        let given = dir.as_ref();
        let (dir, file) = if given.is_file() {
            let parent = given
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            (parent.to_path_buf(), given.to_path_buf())
        } else {
            (given.to_path_buf(), given.join(SESSION_FILE))
        };
        if !file.exists() {
            return Err(Error::NoSession {
                dir: given.to_path_buf(),
                file,
            });
        }
        let reader = SessionReader::open(&file)?;
        Ok(Session {
            dir,
            reader,
            liveness: Liveness::Unknown,
        })
    }

    /// A session already read (tests, or bytes from elsewhere); `dir` is
    /// where its kallsyms copy and perf maps would be.
    pub fn from_reader(reader: SessionReader, dir: impl Into<PathBuf>) -> Session {
        Session {
            dir: dir.into(),
            reader,
            liveness: Liveness::Unknown,
        }
    }

    /// Says whether a recorder still writes this session.
    pub fn set_liveness(&mut self, liveness: Liveness) {
        self.liveness = liveness;
    }

    /// The session directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The reader.
    pub fn reader(&self) -> &SessionReader {
        &self.reader
    }

    /// What the caller said about the recorder.
    pub fn liveness(&self) -> Liveness {
        self.liveness
    }

    /// The kallsyms copy saved with the session, if there is one.
    pub fn kallsyms_copy(&self) -> Option<PathBuf> {
        let p = self.dir.join(KALLSYMS_FILE);
        p.is_file().then_some(p)
    }

    /// The `debug/` directory of an unpacked `profctl archive` (binaries and
    /// debug files under `.build-id/`), if the session directory has one.
    pub fn archive_debug_dir(&self) -> Option<PathBuf> {
        let p = self.dir.join(ARCHIVE_DEBUG_DIR);
        p.join(".build-id").is_dir().then_some(p)
    }

    /// The session directory, if it holds perf maps (`perf-PID.map`).
    pub fn perf_map_dir(&self) -> Option<PathBuf> {
        let rd = std::fs::read_dir(&self.dir).ok()?;
        let has_map = rd.flatten().any(|e| {
            let n = e.file_name();
            let n = n.to_string_lossy();
            n.starts_with("perf-") && n.ends_with(".map")
        });
        has_map.then(|| self.dir.clone())
    }
}

/// Which sample fields the aggregation keeps (the others are zeroed, so
/// the maps stay as small as the report allows).
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct KeyShape {
    pub offset: bool,
    pub pid: bool,
    pub tid: bool,
    pub cpu: bool,
    /// Keep each sample's stack id (call graphs): samples go to
    /// [`Aggregate::stack_counts`] instead of [`Aggregate::counts`], and
    /// the `StackDef` markers to [`Aggregate::stack_tables`].
    pub stacks: bool,
}

/// "No stack" in a [`StackKey`]: the sample had no caller frame.
pub(crate) const NO_STACK: u32 = u32::MAX;

/// An aggregation key with call graphs: the sample's key and its stack id
/// (session-wide within `key.sess`), or [`NO_STACK`].
pub(crate) type StackKey = (Key, u32);

/// An aggregation key.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Key {
    pub sess: u32,
    pub cpu: u32,
    pub pid: u32,
    pub tid: u32,
    pub cookie: Cookie,
    pub offset: u64,
}

/// Per-chunk figures, for the timeline and for losses when there is no
/// footer.
#[derive(Clone, Debug, Default)]
pub(crate) struct ChunkStat {
    pub sess: u32,
    pub round: u64,
    pub time: u64,
    /// (cpu, samples read) for every sample decoded.
    pub read: Vec<(u32, u64)>,
    /// (cpu, samples kept) for samples that passed the CPU/task spec.
    pub kept: Vec<(u32, u64)>,
    /// (cpu, samples lost) from Lost markers.
    pub lost: Vec<(u32, u64)>,
}

/// A chunk whose frame checked but whose payload could not be decoded to
/// the end (a writer bug or a forged file).
#[derive(Clone, Debug)]
pub(crate) struct DecodeError {
    pub sess: u32,
    pub index: u64,
    pub offset: u64,
    pub samples_before: u64,
    pub message: String,
}

/// A thread name, with where it was found.
#[derive(Clone, Debug)]
pub(crate) struct CommMark {
    pub sess: u32,
    pub chunk: u64,
    pub seq: u32,
    pub pid: u32,
    pub tid: u32,
    pub exec: bool,
    pub comm: String,
}

/// What the parallel pass produces.
#[derive(Default)]
pub(crate) struct Aggregate {
    pub counts: FxHashMap<Key, u64>,
    /// With [`KeyShape::stacks`]: counts per (key, stack id). `counts` is
    /// derived from it after the parallel pass ([`Aggregate::fold_stacks`]).
    pub stack_counts: FxHashMap<StackKey, u64>,
    /// With [`KeyShape::stacks`]: each session's stack table.
    pub stack_tables: BTreeMap<u32, StackTable>,
    /// Cookie → (entry, session, chunk index) of its first definition.
    pub cookies: FxHashMap<Cookie, (CookieEntry, u32, u64)>,
    pub comms: Vec<CommMark>,
    /// (session, pid, cookie) of every user mapping announced.
    pub maps: Vec<(u32, u32, Cookie)>,
    pub chunks: Vec<ChunkStat>,
    pub errors: Vec<DecodeError>,
}

impl Aggregate {
    fn merge(mut self, mut other: Aggregate) -> Aggregate {
        if other.counts.len() > self.counts.len() {
            std::mem::swap(&mut self.counts, &mut other.counts);
        }
        self.counts.reserve(other.counts.len());
        for (k, v) in other.counts {
            *self.counts.entry(k).or_insert(0) += v;
        }
        if other.stack_counts.len() > self.stack_counts.len() {
            std::mem::swap(&mut self.stack_counts, &mut other.stack_counts);
        }
        self.stack_counts.reserve(other.stack_counts.len());
        for (k, v) in other.stack_counts {
            *self.stack_counts.entry(k).or_insert(0) += v;
        }
        for (sess, table) in other.stack_tables {
            match self.stack_tables.get_mut(&sess) {
                Some(t) => t.merge(table),
                None => {
                    self.stack_tables.insert(sess, table);
                }
            }
        }
        for (c, (e, s, i)) in other.cookies {
            match self.cookies.get(&c) {
                Some(&(_, s0, i0)) if (s0, i0) <= (s, i) => {}
                _ => {
                    self.cookies.insert(c, (e, s, i));
                }
            }
        }
        self.comms.append(&mut other.comms);
        self.maps.append(&mut other.maps);
        self.chunks.append(&mut other.chunks);
        self.errors.append(&mut other.errors);
        self
    }

    /// Fills `counts` from `stack_counts` (the flat view of a call-graph
    /// aggregation), so everything that does not look at stacks works the
    /// same either way.
    pub fn fold_stacks(&mut self) {
        let mut counts = FxHashMap::default();
        counts.reserve(self.stack_counts.len());
        for (&(k, _), &n) in &self.stack_counts {
            *counts.entry(k).or_insert(0) += n;
        }
        self.counts = counts;
    }
}

/// Counts per CPU in a small vector indexed by CPU (CPU numbers are
/// small); forged huge numbers go to a side map instead of a huge vector.
#[derive(Default)]
struct CpuCounts {
    dense: Vec<u64>,
    sparse: BTreeMap<u32, u64>,
}

impl CpuCounts {
    const DENSE_MAX: u32 = 1 << 14;

    #[inline]
    fn add(&mut self, cpu: u32, n: u64) {
        if cpu < Self::DENSE_MAX {
            let i = cpu as usize;
            if i >= self.dense.len() {
                self.dense.resize(i + 1, 0);
            }
            self.dense[i] += n;
        } else {
            *self.sparse.entry(cpu).or_insert(0) += n;
        }
    }

    fn into_pairs(self) -> Vec<(u32, u64)> {
        let mut v: Vec<(u32, u64)> = self
            .dense
            .into_iter()
            .enumerate()
            .filter(|&(_, n)| n > 0)
            .map(|(c, n)| (c as u32, n))
            .collect();
        v.extend(self.sparse);
        v
    }
}

/// Decodes every valid chunk of every session in parallel and aggregates.
pub(crate) fn aggregate(
    sessions: &[Session],
    shape: KeyShape,
    spec: &ProfileSpec,
    progress: &dyn Progress,
) -> Aggregate {
    let work: Vec<(u32, &SessionReader, &ChunkRef)> = sessions
        .iter()
        .enumerate()
        .flat_map(|(i, s)| {
            s.reader
                .chunks()
                .iter()
                .map(move |c| (i as u32, &s.reader, c))
        })
        .collect();
    progress.start("decoding chunks", work.len() as u64);
    let filter_task = !(spec.cpus.is_empty() && spec.tgids.is_empty() && spec.tids.is_empty());
    // Few, large accumulators: each one's map is merged into another at the
    // end, and with high-cardinality keys (a million distinct offsets)
    // merging costs as much as filling.
    let min_len = work.len() / (4 * rayon::current_num_threads()).max(1);
    work.par_iter()
        .with_min_len(min_len.max(1))
        .fold(Aggregate::default, |mut acc, &(sess, reader, chunk)| {
            decode_chunk(&mut acc, sess, reader, chunk, shape, spec, filter_task);
            progress.advance(1);
            acc
        })
        .reduce(Aggregate::default, Aggregate::merge)
}

/// Counts per (key, stack id), with the same one-entry cache.
struct StackSink<'a> {
    counts: &'a mut FxHashMap<StackKey, u64>,
    last: Option<(StackKey, u64)>,
}

impl StackSink<'_> {
    #[inline(always)]
    fn add(&mut self, key: Key, stack: Option<u32>) {
        let key = (key, stack.unwrap_or(NO_STACK));
        match &mut self.last {
            Some((k, n)) if *k == key => *n += 1,
            _ => {
                if let Some((k, n)) = self.last.take() {
                    *self.counts.entry(k).or_insert(0) += n;
                }
                self.last = Some((key, 1));
            }
        }
    }
    fn flush(&mut self) {
        if let Some((k, n)) = self.last.take() {
            *self.counts.entry(k).or_insert(0) += n;
        }
    }
}

fn decode_chunk(
    acc: &mut Aggregate,
    sess: u32,
    reader: &SessionReader,
    chunk: &ChunkRef,
    shape: KeyShape,
    spec: &ProfileSpec,
    filter_task: bool,
) {
    if shape.stacks {
        let mut table = acc.stack_tables.remove(&sess).unwrap_or_default();
        let mut sink = StackSink {
            counts: &mut acc.stack_counts,
            last: None,
        };
        let marks = decode_into(
            &mut sink,
            &mut table,
            sess,
            reader,
            chunk,
            shape,
            spec,
            filter_task,
        );
        acc.stack_tables.insert(sess, table);
        acc.add_marks(marks, sess, chunk);
    } else {
        decode_flat(acc, sess, reader, chunk, shape, spec, filter_task);
    }
}

/// What one chunk gave besides its samples.
struct Marks {
    read: CpuCounts,
    kept: CpuCounts,
    lost: CpuCounts,
    cookies: Vec<CookieEntry>,
    comms: Vec<CommMark>,
    maps: Vec<(u32, u32, Cookie)>,
    result: profkit_eventlog::Result<u64>,
}

impl Aggregate {
    fn add_marks(&mut self, m: Marks, sess: u32, chunk: &ChunkRef) {
        let Marks {
            read,
            kept,
            lost,
            cookies,
            mut comms,
            mut maps,
            result,
        } = m;
        for e in cookies {
            match self.cookies.get(&e.cookie) {
                Some(&(_, s0, i0)) if (s0, i0) <= (sess, chunk.index) => {}
                _ => {
                    self.cookies.insert(e.cookie, (e, sess, chunk.index));
                }
            }
        }
        self.comms.append(&mut comms);
        self.maps.append(&mut maps);
        let read = read.into_pairs();
        if let Err(e) = result {
            self.errors.push(DecodeError {
                sess,
                index: chunk.index,
                offset: chunk.offset,
                samples_before: read.iter().map(|&(_, n)| n).sum(),
                message: e.to_string(),
            });
        }
        self.chunks.push(ChunkStat {
            sess,
            round: chunk.round,
            time: chunk.time,
            read,
            kept: kept.into_pairs(),
            lost: lost.into_pairs(),
        });
    }
}

#[allow(clippy::too_many_arguments)]
fn decode_into(
    sink: &mut StackSink<'_>,
    table: &mut StackTable,
    sess: u32,
    reader: &SessionReader,
    chunk: &ChunkRef,
    shape: KeyShape,
    spec: &ProfileSpec,
    filter_task: bool,
) -> Marks {
    let mut read = CpuCounts::default();
    let mut kept = CpuCounts::default();
    let mut lost = CpuCounts::default();
    let mut seq = 0u32;
    let mut cookies = Vec::new();
    let mut comms = Vec::new();
    let mut maps = Vec::new();
    let result = reader.for_each_sample(
        chunk,
        |s| {
            read.add(s.cpu, 1);
            if filter_task && !spec.wants_task(s.cpu, s.pid, s.tid) {
                return;
            }
            kept.add(s.cpu, 1);
            let key = Key {
                sess,
                cpu: if shape.cpu { s.cpu } else { 0 },
                pid: if shape.pid { s.pid } else { 0 },
                tid: if shape.tid { s.tid } else { 0 },
                cookie: s.cookie,
                offset: if shape.offset { s.offset } else { 0 },
            };
            sink.add(key, s.stack);
        },
        |m| match m {
            Event::CookieDef(e) => cookies.push(e),
            Event::Comm {
                pid,
                tid,
                comm,
                exec,
            } => {
                seq += 1;
                comms.push(CommMark {
                    sess,
                    chunk: chunk.index,
                    seq,
                    pid,
                    tid,
                    exec,
                    comm,
                });
            }
            Event::ModuleLoad {
                cookie,
                pid: Some(pid),
                ..
            } => maps.push((sess, pid, cookie)),
            Event::Lost { cpu, count, .. } => lost.add(cpu, count),
            Event::StackDef { id, frames } => {
                table.insert(id, frames);
            }
            _ => {}
        },
    );
    sink.flush();
    Marks {
        read,
        kept,
        lost,
        cookies,
        comms,
        maps,
        result,
    }
}

/// The flat pass, exactly as before call graphs (measured: routing it
/// through the generic [`decode_into`] cost 4 % on the image summary).
fn decode_flat(
    acc: &mut Aggregate,
    sess: u32,
    reader: &SessionReader,
    chunk: &ChunkRef,
    shape: KeyShape,
    spec: &ProfileSpec,
    filter_task: bool,
) {
    let mut read = CpuCounts::default();
    let mut kept = CpuCounts::default();
    let mut lost = CpuCounts::default();
    let counts = &mut acc.counts;
    let mut seq = 0u32;
    let mut cookies = Vec::new();
    let mut comms = Vec::new();
    let mut maps = Vec::new();
    // A one-entry cache in front of the map: consecutive samples of a hot
    // loop often share their key.
    let mut last: Option<(Key, u64)> = None;
    let result = reader.for_each_sample(
        chunk,
        |s| {
            read.add(s.cpu, 1);
            if filter_task && !spec.wants_task(s.cpu, s.pid, s.tid) {
                return;
            }
            kept.add(s.cpu, 1);
            let key = Key {
                sess,
                cpu: if shape.cpu { s.cpu } else { 0 },
                pid: if shape.pid { s.pid } else { 0 },
                tid: if shape.tid { s.tid } else { 0 },
                cookie: s.cookie,
                offset: if shape.offset { s.offset } else { 0 },
            };
            match &mut last {
                Some((k, n)) if *k == key => *n += 1,
                _ => {
                    if let Some((k, n)) = last.take() {
                        *counts.entry(k).or_insert(0) += n;
                    }
                    last = Some((key, 1));
                }
            }
        },
        |m| match m {
            Event::CookieDef(e) => cookies.push(e),
            Event::Comm {
                pid,
                tid,
                comm,
                exec,
            } => {
                seq += 1;
                comms.push(CommMark {
                    sess,
                    chunk: chunk.index,
                    seq,
                    pid,
                    tid,
                    exec,
                    comm,
                });
            }
            Event::ModuleLoad {
                cookie,
                pid: Some(pid),
                ..
            } => maps.push((sess, pid, cookie)),
            Event::Lost { cpu, count, .. } => lost.add(cpu, count),
            _ => {}
        },
    );
    if let Some((k, n)) = last {
        *counts.entry(k).or_insert(0) += n;
    }
    for e in cookies {
        match acc.cookies.get(&e.cookie) {
            Some(&(_, s0, i0)) if (s0, i0) <= (sess, chunk.index) => {}
            _ => {
                acc.cookies.insert(e.cookie, (e, sess, chunk.index));
            }
        }
    }
    acc.comms.append(&mut comms);
    acc.maps.append(&mut maps);
    let read = read.into_pairs();
    if let Err(e) = result {
        acc.errors.push(DecodeError {
            sess,
            index: chunk.index,
            offset: chunk.offset,
            samples_before: read.iter().map(|&(_, n)| n).sum(),
            message: e.to_string(),
        });
    }
    acc.chunks.push(ChunkStat {
        sess,
        round: chunk.round,
        time: chunk.time,
        read,
        kept: kept.into_pairs(),
        lost: lost.into_pairs(),
    });
}
