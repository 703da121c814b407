//! Sessions into fleet rows, and fleet rows back into reports.
//!
//! A fleet store (ClickHouse, through `profkit-fleet`) keeps each part of
//! each host's sessions as rows aggregated per (CPU, process, thread,
//! command, cgroup, binary, function, stack), symbolized here, on the host
//! that has the binaries ([`part_rows`]: the sample stream of the part,
//! counted, at most [`profkit_fleet::MAX_ROWS`] rows). A report of the
//! fleet ([`fleet_report`], [`fleet_stacks`]) is computed by the server
//! (`GROUP BY` over those rows, call graphs by `arrayJoin` over the
//! stacks): the client receives only the rows it prints, and builds the
//! same `Report` a local report builds, so every renderer (text, JSON,
//! CSV, collapsed, flame graph, pprof) serves both.
//!
//! Names are the report's: the binary's recorded path (shown by its file
//! name), the function the sampled instruction is in (empty when unnamed:
//! shown as [`crate::NO_SYMBOLS`], with the offset kept in the row), the
//! cgroup's path, and frames innermost first as `NAME\tFUNCTION` (the
//! binary's shown name; the function empty when unnamed, one entry per
//! binary as local call graphs show them; the sampled frame alone for a
//! session without call graphs).

mod report;
mod rows;
mod stacks;

pub use report::fleet_report;
pub use rows::{export_session, part_rows, ExportSummary, Folded, FOLDED};
pub use stacks::{fleet_stacks, fleet_write_stacks};

use profkit_fleet::Query;

use crate::ReportOptions;

/// What a fleet report shows (`profreport --from`).
#[derive(Clone, Debug, Default)]
pub struct FleetOptions {
    /// Only hosts matching this glob (`--host`).
    pub hosts: Option<String>,
    /// Only parts overlapping this window, Unix ns.
    pub window: Option<(u64, u64)>,
    /// Only samples in binaries whose build-id starts with one of these
    /// (`--diff build:ID`).
    pub build_ids: Vec<String>,
    /// One row per thread (`--separate=thread`).
    pub threads: bool,
    /// One row per CPU (`--separate=cpu`: rows, not columns).
    pub cpus: bool,
    /// One row per host (`--separate=host`): the host is shown in the
    /// application column.
    pub per_host: bool,
}

/// One side of a fleet `--diff`: words separated by spaces, each
/// `host:GLOB`, `time:WINDOW` (as `--time`) or `build:HEX` (samples in
/// binaries whose build-id starts with it); a word without a tag is a
/// host glob. `"host:web-* time:0,3600"` is the web hosts' first hour.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DiffSide {
    /// `host:`.
    pub hosts: Option<String>,
    /// `time:`.
    pub time: Option<crate::TimeSpec>,
    /// `build:`.
    pub build_ids: Vec<String>,
}

impl DiffSide {
    /// Parses a side.
    ///
    /// # Errors
    /// [`crate::Error::Fleet`] saying which word is wrong and what a side
    /// takes.
    pub fn parse(side: &str) -> crate::Result<DiffSide> {
        let mut d = DiffSide::default();
        let bad = |why: String| {
            crate::Error::Fleet(format!(
                "bad --diff side '{side}': {why}; a side is words separated by spaces: \
                 host:GLOB, time:WINDOW (as --time), build:HEX (a build-id or its start), \
                 e.g. \"host:web-* time:0,3600\""
            ))
        };
        for word in side.split_whitespace() {
            match word.split_once(':') {
                Some(("host", g)) if !g.is_empty() => d.hosts = Some(g.to_owned()),
                Some(("time", w)) => {
                    d.time = Some(crate::TimeSpec::parse(w).map_err(|e| bad(e.to_string()))?)
                }
                Some(("build", b))
                    if !b.is_empty()
                        && b.len() <= 80
                        && b.bytes().all(|c| c.is_ascii_hexdigit()) =>
                {
                    d.build_ids.push(b.to_ascii_lowercase())
                }
                Some(("build", b)) => return Err(bad(format!("'{b}' is not a hex build-id"))),
                None => d.hosts = Some(word.to_owned()),
                Some(_) => return Err(bad(format!("'{word}' has no known tag"))),
            }
        }
        if d == DiffSide::default() {
            return Err(bad("it is empty".to_owned()));
        }
        Ok(d)
    }

    /// The fleet and report options of this side, from those of the
    /// whole report: its hosts, window and builds replace theirs.
    pub fn apply(
        &self,
        fleet: &FleetOptions,
        opts: &ReportOptions,
    ) -> (FleetOptions, ReportOptions) {
        let mut f = fleet.clone();
        let mut o = opts.clone();
        if self.hosts.is_some() {
            f.hosts = self.hosts.clone();
        }
        if self.time.is_some() {
            o.time = self.time.clone();
        }
        if !self.build_ids.is_empty() {
            f.build_ids = self.build_ids.clone();
        }
        (f, o)
    }
}

fn fleet_err(e: profkit_fleet::Error) -> crate::Error {
    crate::Error::Fleet(e.to_string())
}

/// The store's query for `fleet` and the report options `opts`: the host
/// glob, the profile specs (`image:`, `image-exclude:`, `cpu:`, `tgid:`,
/// `tid:`, `cgroup:`), the builds, and a `--time` window resolved against
/// the selected parts' first start and last end (`totals` of the query
/// without it).
fn base_query(
    client: &profkit_fleet::Client,
    fleet: &FleetOptions,
    opts: &ReportOptions,
) -> crate::Result<Query> {
    let spec = &opts.spec;
    let globs = |v: &[crate::spec::Glob]| v.iter().map(|g| g.to_string()).collect::<Vec<_>>();
    let mut q = Query {
        hosts: fleet.hosts.clone(),
        from_unix_ns: fleet.window.map(|w| w.0),
        to_unix_ns: fleet.window.map(|w| w.1),
        group: Vec::new(),
        binaries: globs(&spec.images),
        exclude_binaries: globs(&spec.exclude_images),
        cpus: spec.cpus.iter().copied().collect(),
        pids: spec.tgids.iter().copied().collect(),
        tids: spec.tids.iter().copied().collect(),
        cgroups: globs(&spec.cgroups),
        build_ids: fleet.build_ids.clone(),
        limit: None,
    };
    if let Some(t) = &opts.time {
        let all = client.totals(&q).map_err(fleet_err)?;
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

/// The samples `query` selects and what their parts lost: the parts'
/// totals, or with sample filters (specs, builds) the sum the server
/// computes of the selected rows.
fn selected(
    client: &profkit_fleet::Client,
    query: &Query,
) -> crate::Result<(u64, profkit_fleet::Totals)> {
    let totals = client.totals(query).map_err(fleet_err)?;
    if !query.filters_samples() {
        return Ok((totals.samples, totals));
    }
    let all = Query {
        group: Vec::new(),
        limit: None,
        ..query.clone()
    };
    let n = client
        .query(&all)
        .map_err(fleet_err)?
        .first()
        .map_or(0, |r| r.samples);
    Ok((n, totals))
}

/// The line saying where a fleet report came from.
fn from_line(client: &profkit_fleet::Client, totals: &profkit_fleet::Totals) -> String {
    format!(
        "from {}: {} parts of {} host{}",
        client.target().redacted(),
        totals.parts,
        totals.hosts,
        if totals.hosts == 1 { "" } else { "s" }
    )
}

/// A fleet report's header.
fn header(total: u64, totals: &profkit_fleet::Totals) -> crate::Header {
    crate::Header {
        event: "cpu-clock".to_owned(),
        start_unix_ns: totals.start_unix_ns,
        duration_ns: totals.end_unix_ns.saturating_sub(totals.start_unix_ns),
        samples_read: total,
        total_samples: total,
        lost_total: totals.lost,
        lost_percent: if totals.samples + totals.lost == 0 {
            0.0
        } else {
            totals.lost as f64 * 100.0 / (totals.samples + totals.lost) as f64
        },
        lost_source: "fleet".to_owned(),
        ..crate::Header::default()
    }
}

#[cfg(test)]
mod tests;
