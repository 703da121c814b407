//! A part of a session into fleet rows (counted, symbolized, bounded),
//! and the export of a session's parts.

use std::collections::HashMap;
use std::path::Path;

use profkit_fleet::{PartRows, SampleRow, MAX_ROWS};

use crate::stream::{FrameId, StreamInfo, StreamSample, StreamSink};
use crate::{NoProgress, ReportOptions, Session, SymbolSources};

/// One row's key while a part is counted: the thread's and process's
/// names, the sampled frame's name and the stack's entries by their
/// indexes in [`Counter`]'s interned tables (each frame of the stream
/// named once, not once per sample; frames of one name count as one, as
/// the rows show them).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct RowKey {
    cpu: u32,
    pid: u32,
    tid: u32,
    comm: u32,
    process: u32,
    /// Into `Counter::cgroups`.
    cgroup: u32,
    /// Into `Counter::leaves`; `u32::MAX`: no frame.
    leaf: u32,
    /// Into `Counter::entries`, innermost first.
    stack: Vec<u32>,
}

/// The sampled frame as a row names it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Leaf {
    /// Its binary's recorded path.
    binary: String,
    build_id: String,
    /// Empty when unnamed.
    function: String,
    /// The offset, when unnamed (0 otherwise).
    offset: u64,
}

/// Strings (or names) stored once, by index.
struct Interned<T> {
    index: HashMap<T, u32>,
    items: Vec<T>,
}

impl<T> Default for Interned<T> {
    fn default() -> Self {
        Interned {
            index: HashMap::new(),
            items: Vec::new(),
        }
    }
}

impl<T: Clone + Eq + std::hash::Hash> Interned<T> {
    fn id(&mut self, v: T) -> u32 {
        if let Some(&i) = self.index.get(&v) {
            return i;
        }
        let i = self.items.len() as u32;
        self.items.push(v.clone());
        self.index.insert(v, i);
        i
    }
}

impl Interned<String> {
    fn str_id(&mut self, v: &str) -> u32 {
        match self.index.get(v) {
            Some(&c) => c,
            None => self.id(v.to_owned()),
        }
    }
}

/// Counts a part's samples per [`RowKey`].
#[derive(Default)]
struct Counter {
    rows: HashMap<RowKey, u64>,
    names: Interned<String>,
    leaves: Interned<Leaf>,
    /// `NAME\tFUNCTION` (`NAME\t` unnamed): stack entries.
    entries: Interned<String>,
    /// Each frame met: its leaf and entry ids.
    frames: HashMap<FrameId, (u32, u32)>,
    /// Each (session, cgroup id) met: its name's id in `names`.
    cgroups: HashMap<(u32, u64), u32>,
    /// Cgroup names by (session, id), from the stream's start.
    cgroup_names: HashMap<(u32, u64), String>,
    samples: u64,
    lost: u64,
}

impl StreamSink for Counter {
    fn begin(&mut self, info: &StreamInfo<'_>) -> std::io::Result<()> {
        self.lost = info.header.lost_total;
        self.cgroup_names = info
            .cgroup_paths
            .iter()
            .map(|(&k, _)| (k, info.cgroup_name(k.0, k.1)))
            .collect();
        Ok(())
    }

    fn sample(&mut self, s: &StreamSample<'_>) -> std::io::Result<()> {
        let t = s.table;
        let mut stack = Vec::with_capacity(s.frames.len());
        let mut leaf = u32::MAX;
        for (i, &f) in s.frames.iter().enumerate() {
            // A frame's name is fixed once the stream has met it.
            let ids = match self.frames.get(&f) {
                Some(&ids) => ids,
                None => {
                    let frame = t.frame(f);
                    let image = t.image(frame.image);
                    let (function, offset) = match frame.symbol {
                        Some(id) => (t.symbol(id).name.clone(), 0),
                        None => (String::new(), frame.offset),
                    };
                    // Unnamed frames of a binary are one entry, as a local
                    // call graph and folded stacks show them.
                    let entry = format!("{}\t{function}", image.name);
                    let ids = (
                        self.leaves.id(Leaf {
                            binary: image.path.clone(),
                            build_id: image.build_id.clone().unwrap_or_default(),
                            function,
                            offset,
                        }),
                        self.entries.id(entry),
                    );
                    self.frames.insert(f, ids);
                    ids
                }
            };
            if i == 0 {
                leaf = ids.0;
            }
            // The sampled frame alone without call graphs: folded stacks
            // and flame graphs still have the function.
            stack.push(ids.1);
        }
        let cgroup = match self.cgroups.get(&(s.session, s.cgroup)) {
            Some(&c) => c,
            None => {
                let name = match (s.cgroup, self.cgroup_names.get(&(s.session, s.cgroup))) {
                    (0, _) => String::new(),
                    (_, Some(n)) => n.clone(),
                    (id, None) => format!("[cgroup {id}]"),
                };
                let c = self.names.id(name);
                self.cgroups.insert((s.session, s.cgroup), c);
                c
            }
        };
        let key = RowKey {
            cpu: s.cpu,
            pid: s.pid,
            tid: s.tid,
            comm: self.names.str_id(s.comm),
            process: self.names.str_id(s.process),
            cgroup,
            leaf,
            stack,
        };
        *self.rows.entry(key).or_default() += s.weight;
        self.samples += s.weight;
        Ok(())
    }
}

/// What folding a part's rows under the store's cap did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Folded {
    /// Rows merged into coarser ones (0: none).
    pub rows: u64,
    /// Their samples (all still counted, in the coarser rows).
    pub samples: u64,
}

/// The thread and process name of rows folded past their key.
pub const FOLDED: &str = "[folded]";

impl Counter {
    /// The counted rows, most samples first, at most `max`: past that the
    /// smallest rows are folded, coarser step by step until they fit
    /// (their stacks cut to the sampled frame; then their CPU, process,
    /// thread and cgroup merged as [`FOLDED`]; then their function too),
    /// so that no sample is lost and a part never exceeds what one INSERT
    /// stores atomically, whatever the threads and stacks a local user
    /// makes.
    fn into_rows(self, max: usize) -> (Vec<SampleRow>, Folded) {
        let mut keyed: Vec<(RowKey, u64)> = self.rows.into_iter().collect();
        keyed.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.stack.cmp(&b.0.stack)));
        let mut folded = Folded::default();
        let max = max.max(2);
        if keyed.len() > max {
            let keep = max / 2;
            let tail = keyed.split_off(keep);
            folded = Folded {
                rows: tail.len() as u64,
                samples: tail.iter().map(|r| r.1).sum(),
            };
            let folded_name = u32::MAX - 1;
            for level in 1..=3 {
                let mut coarse: HashMap<RowKey, u64> = HashMap::new();
                for (k, n) in &tail {
                    let mut k = k.clone();
                    k.stack.truncate(1);
                    if level >= 2 {
                        (k.cpu, k.pid, k.tid) = (0, 0, 0);
                        (k.comm, k.process, k.cgroup) = (folded_name, folded_name, folded_name);
                    }
                    if level == 3 {
                        (k.leaf, k.stack) = (u32::MAX - 1, Vec::new());
                    }
                    *coarse.entry(k).or_default() += n;
                }
                if keep + coarse.len() <= max || level == 3 {
                    let mut coarse: Vec<(RowKey, u64)> = coarse.into_iter().collect();
                    coarse.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.stack.cmp(&b.0.stack)));
                    keyed.extend(coarse);
                    break;
                }
            }
        }
        let unknown = Leaf {
            binary: crate::UNKNOWN_SYMBOL.to_owned(),
            build_id: String::new(),
            function: String::new(),
            offset: 0,
        };
        let folded_leaf = Leaf {
            binary: FOLDED.to_owned(),
            ..unknown.clone()
        };
        let name = |i: u32| match self.names.items.get(i as usize) {
            Some(n) => n.clone(),
            None => FOLDED.to_owned(),
        };
        let rows = keyed
            .into_iter()
            .map(|(k, samples)| {
                let leaf = match k.leaf {
                    l if l == u32::MAX - 1 => &folded_leaf,
                    l => self.leaves.items.get(l as usize).unwrap_or(&unknown),
                };
                SampleRow {
                    cpu: k.cpu,
                    pid: k.pid,
                    tid: k.tid,
                    comm: name(k.comm),
                    process: name(k.process),
                    cgroup: name(k.cgroup),
                    binary: leaf.binary.clone(),
                    build_id: leaf.build_id.clone(),
                    function: leaf.function.clone(),
                    offset: leaf.offset,
                    stack: k
                        .stack
                        .iter()
                        .map(|&e| self.entries.items[e as usize].clone())
                        .collect(),
                    samples,
                }
            })
            .collect();
        (rows, folded)
    }
}

/// The part of a session in the file `part` (a rotated session's
/// `session.NNNNNN.pkl`, or `session.pkl`), counted into fleet rows for
/// `host`, symbolized with `sources`, at most [`MAX_ROWS`] of them (see
/// [`Folded`]). The session id is the session's start (Unix ns, hex):
/// unique per host; the part number is the header's (1 for a session in
/// one file).
///
/// # Errors
/// The part cannot be read ([`crate::Error`]), or the stream fails.
pub fn part_rows(
    part: &Path,
    host: &str,
    sources: &SymbolSources,
) -> crate::Result<(PartRows, Folded)> {
    let reader = profkit_eventlog::SessionReader::open(part)?;
    let h = reader.header().clone();
    let dir = part.parent().unwrap_or(Path::new("."));
    let session = Session::from_reader(reader, dir);
    let (number, session_start) = match &h.part {
        Some(p) => (p.number, p.session_start_unix_ns),
        None => (1, h.start_time_unix_ns),
    };
    let end_monotonic = session.end_monotonic_ns();
    let opts = ReportOptions {
        symbols: true,
        stacks: true,
        ..ReportOptions::default()
    };
    let mut counter = Counter::default();
    crate::stream::stream(
        std::slice::from_ref(&session),
        &opts,
        sources,
        &NoProgress,
        &mut counter,
    )?;
    let (samples, lost) = (counter.samples, counter.lost);
    let (rows, folded) = counter.into_rows(MAX_ROWS);
    let rows = PartRows {
        host: if host.is_empty() {
            h.host.clone()
        } else {
            host.to_owned()
        },
        session: format!("{session_start:x}"),
        part: u32::try_from(number).unwrap_or(u32::MAX),
        start_unix_ns: h.start_time_unix_ns,
        end_unix_ns: h
            .start_time_unix_ns
            .saturating_add(end_monotonic.saturating_sub(h.start_monotonic_ns)),
        samples,
        lost,
        rows,
    };
    Ok((rows, folded))
}

/// What [`export_session`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExportSummary {
    /// Parts inserted by this run.
    pub inserted: u64,
    /// Parts the store already had (exported before: nothing sent twice).
    pub already: u64,
    /// Rows inserted.
    pub rows: u64,
    /// Bytes sent for them.
    pub bytes: u64,
    /// Samples of the parts inserted.
    pub samples: u64,
    /// Parts not exported because a recorder still writes them.
    pub still_recording: u64,
    /// Every part up to this number is in the store now (None: no part).
    pub through: Option<u64>,
    /// Rows folded into coarser ones to fit the store's cap ([`Folded`]).
    pub folded_rows: u64,
}

/// Exports every part of the session in `dir` to the fleet store behind
/// `client`, oldest first: each closed part of a rotated session, and the
/// last one unless `recording` (a recorder still writes it). A part the
/// store has is not sent again.
///
/// # Errors
/// A part cannot be read, or the store fails ([`crate::Error::Fleet`]):
/// the parts before it are in the store, a later run goes on from there.
pub fn export_session(
    client: &profkit_fleet::Client,
    dir: &Path,
    host: &str,
    sources: &SymbolSources,
    recording: bool,
) -> crate::Result<ExportSummary> {
    let fleet_err = |e: profkit_fleet::Error| crate::Error::Fleet(e.to_string());
    client.ensure_schema().map_err(fleet_err)?;
    let mut files: Vec<std::path::PathBuf> = profkit_eventlog::parts::closed_parts(dir)
        .map_err(|e| crate::Error::Fleet(format!("listing {}: {e}", dir.display())))?
        .into_iter()
        .map(|(_, p)| p)
        .collect();
    let mut out = ExportSummary::default();
    let last = dir.join(profkit_eventlog::parts::CURRENT_PART);
    if recording {
        out.still_recording += 1;
    } else if last.exists() {
        files.push(last);
    }
    for f in files {
        let (rows, folded) = part_rows(&f, host, sources)?;
        let number = u64::from(rows.part);
        match client.export_part(&rows).map_err(fleet_err)? {
            profkit_fleet::Exported::Inserted {
                rows: n,
                bytes_sent,
            } => {
                out.inserted += 1;
                out.rows += n;
                out.bytes += bytes_sent;
                out.samples += rows.samples;
                out.folded_rows += folded.rows;
            }
            profkit_fleet::Exported::AlreadyThere => out.already += 1,
        }
        out.through = Some(number);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A counter of `n` rows: row i has i + 1 samples, thread i % threads,
    /// leaf i % leaves, and a stack of its own.
    fn counter(n: u32, threads: u32, leaves: u32) -> Counter {
        let mut c = Counter::default();
        for l in 0..leaves {
            c.leaves.id(Leaf {
                binary: format!("/bin/b{l}"),
                build_id: String::new(),
                function: format!("f{l}"),
                offset: 0,
            });
        }
        let comm = c.names.str_id("w");
        for i in 0..n {
            let e = c.entries.id(format!("b\tf{i}"));
            let leaf = c.entries.id(format!("b{}\tf{}", i % leaves, i % leaves));
            let key = RowKey {
                cpu: 0,
                pid: 1,
                tid: i % threads,
                comm,
                process: comm,
                cgroup: comm,
                leaf: i % leaves,
                stack: vec![leaf, e],
            };
            c.rows.insert(key, u64::from(i) + 1);
            c.samples += u64::from(i) + 1;
        }
        c
    }

    fn check(c: Counter, max: usize) -> (Vec<SampleRow>, Folded) {
        let samples = c.samples;
        let (rows, folded) = c.into_rows(max);
        assert!(rows.len() <= max, "{} rows over {max}", rows.len());
        assert_eq!(rows.iter().map(|r| r.samples).sum::<u64>(), samples);
        (rows, folded)
    }

    #[test]
    fn rows_under_the_cap_are_kept_as_they_are() {
        let (rows, folded) = check(counter(10, 10, 10), 10);
        assert_eq!((rows.len(), folded), (10, Folded::default()));
        assert_eq!(rows[0].samples, 10, "most samples first");
        assert_eq!(rows[0].stack.len(), 2);
    }

    #[test]
    fn distinct_stacks_past_the_cap_lose_their_callers_first() {
        // 1,000 stacks over 3 threads and 2 functions under a cap of 600:
        // the 300 largest are kept, the 700 others become one row per
        // (thread, function) with the sampled frame.
        let (rows, folded) = check(counter(1000, 3, 2), 600);
        assert_eq!(folded.rows, 700);
        assert_eq!(folded.samples, (1..=700).sum::<u64>());
        assert_eq!(rows.len(), 300 + 6);
        assert!(rows[300..]
            .iter()
            .all(|r| r.stack.len() == 1 && r.comm == "w"));
    }

    #[test]
    fn distinct_threads_past_the_cap_are_merged_then_functions() {
        // Every row a thread of its own: threads merge as [folded].
        let (rows, _) = check(counter(1000, 1000, 4), 600);
        assert_eq!(rows.len(), 300 + 4);
        assert!(rows[300..]
            .iter()
            .all(|r| r.comm == FOLDED && r.process == FOLDED && r.tid == 0));
        // Every row a function of its own too: one row holds the rest.
        let (rows, _) = check(counter(1000, 1000, 1000), 600);
        assert_eq!(rows.len(), 301);
        assert_eq!(rows[300].binary, FOLDED);
        assert!(rows[300].stack.is_empty());
    }
}
