//! Sessions into fleet rows, and fleet rows back into reports.
//!
//! A fleet store (ClickHouse, through `profkit-fleet`) keeps each part of
//! each host's sessions as rows aggregated per (CPU, process, thread,
//! command, cgroup, binary, function, stack), symbolized here, on the host
//! that has the binaries ([`part_rows`]: the sample stream of the part,
//! counted). A report of the fleet ([`fleet_report`]) is computed by the
//! server (`GROUP BY` over those rows): the client receives only the rows
//! it prints, and builds the same [`Report`] a local report builds, so every
//! renderer (text, JSON, CSV) serves both.
//!
//! Names are the report's: the binary's recorded path (shown by its file
//! name), the function the sampled instruction is in (empty when unnamed:
//! shown as [`crate::NO_SYMBOLS`], with the offset kept in the row), and
//! frames innermost first as `NAME\tFUNCTION` (`NAME\t+0xOFFSET` unnamed;
//! the sampled frame alone for a session without call graphs).

use std::collections::HashMap;
use std::path::Path;

use profkit_fleet::{Key, PartRows, Query, SampleRow};

use crate::model::{Column, Header, Report, Row, ShownColumns};
use crate::stream::{FrameId, StreamInfo, StreamSample, StreamSink};
use crate::{NoProgress, ReportOptions, Session, SymbolSources};

/// One row's key while a part is counted: the thread's name, the sampled
/// frame's name and the stack's entries by their indexes in [`Counter`]'s
/// interned tables (each frame of the stream named once, not once per
/// sample; frames of one name count as one, as the rows show them).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct RowKey {
    cpu: u32,
    pid: u32,
    tid: u32,
    comm: u32,
    cgroup: u64,
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

/// Counts a part's samples per [`RowKey`].
#[derive(Default)]
struct Counter {
    rows: HashMap<RowKey, u64>,
    comms: Interned<String>,
    leaves: Interned<Leaf>,
    /// `NAME\tFUNCTION` (`NAME\t+0xOFFSET` unnamed): stack entries.
    entries: Interned<String>,
    /// Each frame met: its leaf and entry ids.
    frames: HashMap<FrameId, (u32, u32)>,
    samples: u64,
    lost: u64,
}

impl StreamSink for Counter {
    fn begin(&mut self, info: &StreamInfo<'_>) -> std::io::Result<()> {
        self.lost = info.header.lost_total;
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
                    let (function, offset, entry) = match frame.symbol {
                        Some(id) => {
                            let name = &t.symbol(id).name;
                            (name.clone(), 0, format!("{}\t{name}", image.name))
                        }
                        None => (
                            String::new(),
                            frame.offset,
                            format!("{}\t+0x{:x}", image.name, frame.offset),
                        ),
                    };
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
        let comm = match self.comms.index.get(s.comm) {
            Some(&c) => c,
            None => self.comms.id(s.comm.to_owned()),
        };
        let key = RowKey {
            cpu: s.cpu,
            pid: s.pid,
            tid: s.tid,
            comm,
            cgroup: s.cgroup,
            leaf,
            stack,
        };
        *self.rows.entry(key).or_default() += s.weight;
        self.samples += s.weight;
        Ok(())
    }
}

impl Counter {
    /// The counted rows, most samples first.
    fn into_rows(self) -> Vec<SampleRow> {
        let unknown = Leaf {
            binary: crate::UNKNOWN_SYMBOL.to_owned(),
            build_id: String::new(),
            function: String::new(),
            offset: 0,
        };
        let mut rows: Vec<SampleRow> = self
            .rows
            .into_iter()
            .map(|(k, samples)| {
                let leaf = self.leaves.items.get(k.leaf as usize).unwrap_or(&unknown);
                SampleRow {
                    cpu: k.cpu,
                    pid: k.pid,
                    tid: k.tid,
                    comm: self.comms.items[k.comm as usize].clone(),
                    cgroup: if k.cgroup == 0 {
                        String::new()
                    } else {
                        k.cgroup.to_string()
                    },
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
        rows.sort_by_key(|r| std::cmp::Reverse(r.samples));
        rows
    }
}

/// The part of a session in the file `part` (a rotated session's
/// `session.NNNNNN.pkl`, or `session.pkl`), counted into fleet rows for
/// `host`, symbolized with `sources`. The session id is the session's
/// start (Unix ns, hex): unique per host; the part number is the header's
/// (1 for a session in one file).
///
/// # Errors
/// The part cannot be read ([`crate::Error`]), or the stream fails.
pub fn part_rows(part: &Path, host: &str, sources: &SymbolSources) -> crate::Result<PartRows> {
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
    let rows = counter.into_rows();
    Ok(PartRows {
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
    })
}

/// What a fleet report shows (`profreport --from`).
#[derive(Clone, Debug, Default)]
pub struct FleetOptions {
    /// Only hosts matching this glob (`--host`).
    pub hosts: Option<String>,
    /// Only parts overlapping this window, Unix ns.
    pub window: Option<(u64, u64)>,
    /// One row per thread (`--separate=thread`).
    pub threads: bool,
    /// One row per CPU (`--separate=cpu`: rows, not columns).
    pub cpus: bool,
    /// One row per host (`--separate=host`): the host is shown in the
    /// application column.
    pub per_host: bool,
}

/// The store's query for `fleet` and the report options `opts`: the host
/// glob, an `image:` spec (one glob: other specs are refused), and a
/// `--time` window, resolved against the selected parts' first start and
/// last end (`totals` of the query without it).
fn base_query(
    client: &profkit_fleet::Client,
    fleet: &FleetOptions,
    opts: &ReportOptions,
) -> crate::Result<Query> {
    let spec = &opts.spec;
    if !spec.cpus.is_empty()
        || !spec.tgids.is_empty()
        || !spec.tids.is_empty()
        || !spec.exclude_images.is_empty()
        || !spec.cgroups.is_empty()
        || spec.images.len() > 1
    {
        return Err(crate::Error::Fleet(
            "a report from a fleet store takes one image:GLOB spec, no other (cpu:, tgid:, \
             tid:, image-exclude:, cgroup: are not supported with --from)"
                .to_owned(),
        ));
    }
    let mut q = Query {
        hosts: fleet.hosts.clone(),
        from_unix_ns: fleet.window.map(|w| w.0),
        to_unix_ns: fleet.window.map(|w| w.1),
        group: Vec::new(),
        binaries: spec.images.first().map(|g| g.to_string()),
        limit: None,
    };
    if let Some(t) = &opts.time {
        let all = client
            .totals(&q)
            .map_err(|e| crate::Error::Fleet(e.to_string()))?;
        let (start, end) = (all.start_unix_ns, all.end_unix_ns);
        let at = |s: f64| start.saturating_add((s.max(0.0) * 1e9) as u64);
        let (from, to) = match *t {
            crate::TimeSpec::Seconds(a, b) => (a.map(at), b.map(at)),
            crate::TimeSpec::Wall(a, b) => (a, b),
            crate::TimeSpec::TimeOfDay(a, b) => {
                let day = start - start % 86_400_000_000_000;
                (a.map(|a| day + a), b.map(|b| day + b))
            }
            crate::TimeSpec::Percent(p, r) => {
                let len = end.saturating_sub(start) as f64;
                (
                    Some(start + (len * p / 100.0) as u64),
                    Some(start + (len * r / 100.0) as u64),
                )
            }
        };
        q.from_unix_ns = from.or(q.from_unix_ns);
        q.to_unix_ns = to.or(q.to_unix_ns);
    }
    Ok(q)
}

/// The report of the fleet store behind `client`: the rows `opts` asks for
/// (`-l`: per binary and function, else per binary; threads, CPUs, hosts
/// as `fleet` says), computed by the server.
///
/// # Errors
/// The server cannot be asked or answers wrongly ([`crate::Error::Fleet`]).
pub fn fleet_report(
    client: &profkit_fleet::Client,
    fleet: &FleetOptions,
    opts: &ReportOptions,
) -> crate::Result<Report> {
    let mut group = Vec::new();
    if fleet.per_host {
        group.push(Key::Host);
    }
    if fleet.cpus {
        group.push(Key::Cpu);
    }
    if fleet.threads {
        group.extend([Key::Pid, Key::Tid, Key::Comm]);
    }
    if opts.separate.cgroup {
        group.push(Key::Cgroup);
    }
    group.push(Key::Binary);
    if opts.symbols {
        group.push(Key::Function);
    }
    let query = Query {
        group: group.clone(),
        ..base_query(client, fleet, opts)?
    };
    let fleet_err = |e: profkit_fleet::Error| crate::Error::Fleet(e.to_string());
    let totals = client.totals(&query).map_err(fleet_err)?;
    let found = client.query(&query).map_err(fleet_err)?;
    let total = totals.samples;
    let pct = |n: u64| {
        if total == 0 {
            0.0
        } else {
            n as f64 * 100.0 / total as f64
        }
    };
    let mut rows = Vec::with_capacity(found.len());
    let mut below = 0usize;
    for r in found {
        let at = |k: Key| {
            group
                .iter()
                .position(|g| *g == k)
                .map(|i| r.keys[i].clone())
        };
        let binary = at(Key::Binary).unwrap_or_default();
        let percent = pct(r.samples);
        if percent < opts.threshold {
            below += 1;
            continue;
        }
        let image = if opts.long_filenames {
            binary.clone()
        } else {
            crate::spec::base_name(&binary).to_owned()
        };
        rows.push(Row {
            samples: vec![r.samples],
            percent: vec![percent],
            total: r.samples,
            total_percent: percent,
            app: at(Key::Host),
            image,
            symbol: at(Key::Function).filter(|f| !f.is_empty()),
            inlined: false,
            vma: None,
            location: None,
            tgid: at(Key::Pid).and_then(|p| p.parse().ok()),
            tid: at(Key::Tid).and_then(|p| p.parse().ok()),
            comm: at(Key::Comm),
            ns_tgid: None,
            ns_tid: None,
            // The cgroup's id: the store keeps ids, not paths.
            cgroup: at(Key::Cgroup).map(|c| {
                if c.is_empty() {
                    "[none]".to_owned()
                } else {
                    format!("[cgroup {c}]")
                }
            }),
            children: Vec::new(),
            inclusive: Vec::new(),
            inclusive_percent: Vec::new(),
            inclusive_total: 0,
            inclusive_total_percent: 0.0,
        });
    }
    let header = Header {
        event: "cpu-clock".to_owned(),
        start_unix_ns: totals.start_unix_ns,
        duration_ns: totals.end_unix_ns.saturating_sub(totals.start_unix_ns),
        samples_read: total,
        total_samples: total,
        lost_total: totals.lost,
        lost_percent: if total + totals.lost == 0 {
            0.0
        } else {
            totals.lost as f64 * 100.0 / (total + totals.lost) as f64
        },
        lost_source: "fleet".to_owned(),
        ..Header::default()
    };
    Ok(Report {
        header,
        columns: vec![Column::All],
        shown: ShownColumns {
            symbols: opts.symbols,
            app: fleet.per_host,
            thread: fleet.threads,
            cgroup: opts.separate.cgroup,
            ..ShownColumns::default()
        },
        rows,
        rows_below_threshold: below,
        timeline: None,
        warnings: vec![format!(
            "from {}: {} parts of {} host{}",
            client.target().redacted(),
            totals.parts,
            totals.hosts,
            if totals.hosts == 1 { "" } else { "s" }
        )],
        unnamed_binaries: Vec::new(),
        callgraph: None,
        stacks: None,
        annotations: None,
    })
}

/// The fleet's stacks as folded lines (`frame;frame;… N`, outermost frame
/// first, the `--format collapsed` of a local report), computed by the
/// server.
///
/// # Errors
/// As [`fleet_report`].
pub fn fleet_collapsed(
    client: &profkit_fleet::Client,
    fleet: &FleetOptions,
    opts: &ReportOptions,
    out: &mut dyn std::io::Write,
) -> crate::Result<()> {
    for line in folded(client, fleet, opts)? {
        writeln!(out, "{line}").map_err(crate::Error::Output)?;
    }
    Ok(())
}

/// The fleet's stacks as a flame graph (inferno), computed by the server.
///
/// # Errors
/// As [`fleet_report`].
pub fn fleet_flamegraph(
    client: &profkit_fleet::Client,
    fleet: &FleetOptions,
    opts: &ReportOptions,
    out: &mut dyn std::io::Write,
) -> crate::Result<()> {
    let lines = folded(client, fleet, opts)?;
    let mut opts = inferno::flamegraph::Options::default();
    opts.title = format!(
        "Flame Graph: {}{}",
        client.target().redacted(),
        fleet
            .hosts
            .as_ref()
            .map(|h| format!(", hosts {h}"))
            .unwrap_or_default()
    );
    if lines.is_empty() {
        return writeln!(
            out,
            "<svg xmlns=\"http://www.w3.org/2000/svg\"><text>no samples</text></svg>"
        )
        .map_err(crate::Error::Output);
    }
    inferno::flamegraph::from_lines(&mut opts, lines.iter().map(String::as_str), out)
        .map_err(|e| crate::Error::Output(std::io::Error::other(e.to_string())))
}

/// The folded lines of the fleet's stacks.
fn folded(
    client: &profkit_fleet::Client,
    fleet: &FleetOptions,
    opts: &ReportOptions,
) -> crate::Result<Vec<String>> {
    let query = base_query(client, fleet, opts)?;
    let stacks = client
        .stacks(&query)
        .map_err(|e| crate::Error::Fleet(e.to_string()))?;
    Ok(stacks
        .into_iter()
        .map(|(frames, n)| {
            let line: Vec<String> = frames
                .iter()
                .rev()
                .map(|f| match f.split_once('\t') {
                    Some((_, function)) => function.replace(';', ":"),
                    None => f.replace(';', ":"),
                })
                .collect();
            format!("{} {n}", line.join(";"))
        })
        .collect())
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
        let rows = part_rows(&f, host, sources)?;
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
            }
            profkit_fleet::Exported::AlreadyThere => out.already += 1,
        }
        out.through = Some(number);
    }
    Ok(out)
}
