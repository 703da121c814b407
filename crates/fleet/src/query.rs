//! Reports computed by the server: grouped sums, stacks, totals.

use crate::schema::{PARTS, SAMPLES};
use crate::{tsv, Client, Error};

/// What to report on. The default selects everything, grouped by nothing
/// (one row: all samples).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Query {
    /// Hosts whose name matches this glob (`*` any run, `?` one
    /// character; everything else literal).
    pub hosts: Option<String>,
    /// Parts that end at or after this (Unix ns).
    pub from_unix_ns: Option<u64>,
    /// Parts that start before this (Unix ns).
    pub to_unix_ns: Option<u64>,
    /// The keys rows are grouped by, in the order [`Row::keys`] has them.
    pub group: Vec<Key>,
    /// Binaries matching one of these globs: one with a `/` against the
    /// path, any other against the path or the file name (as
    /// `image:GLOB`). Empty: every binary.
    pub binaries: Vec<String>,
    /// Not the binaries matching one of these globs (`image-exclude:`).
    pub exclude_binaries: Vec<String>,
    /// Only these CPUs (`cpu:`; empty: all).
    pub cpus: Vec<u32>,
    /// Only these processes (`tgid:`; empty: all).
    pub pids: Vec<u32>,
    /// Only these threads (`tid:`; empty: all).
    pub tids: Vec<u32>,
    /// Only samples in a cgroup whose path matches one of these globs
    /// (`cgroup:`; `[none]` stands for samples without a cgroup).
    pub cgroups: Vec<String>,
    /// Only samples in binaries whose build-id starts with one of these
    /// (hex, any case; `--diff build:ID`).
    pub build_ids: Vec<String>,
    /// At most this many rows (the largest).
    pub limit: Option<usize>,
}

impl Query {
    /// Whether the query selects some samples of the parts and not others
    /// (binaries, CPUs, processes, threads, cgroups, builds): then the
    /// parts' totals are not the selection's.
    pub fn filters_samples(&self) -> bool {
        !(self.binaries.is_empty()
            && self.exclude_binaries.is_empty()
            && self.cpus.is_empty()
            && self.pids.is_empty()
            && self.tids.is_empty()
            && self.cgroups.is_empty()
            && self.build_ids.is_empty())
    }
}

/// Which functions a call graph shows ([`Client::call_graph_frames`]): a
/// frame's share of `total` samples (inclusive with `by_inclusive`, else
/// its own) at least `threshold` percent, as a local report cuts them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cut {
    /// Compare the inclusive samples (`--children`), else the frame's own.
    pub by_inclusive: bool,
    /// Percent.
    pub threshold: f64,
    /// The report's samples the percentages are of.
    pub total: u64,
}

impl Cut {
    /// Whether a function's block is shown: its share at least the
    /// threshold (and, cut by its own samples with a threshold, some own
    /// samples), as a local report cuts them.
    pub fn keeps(&self, f: &FrameTotal) -> bool {
        let n = if self.by_inclusive {
            f.total
        } else {
            f.self_samples
        };
        let share = if self.total == 0 {
            0.0
        } else {
            n as f64 * 100.0 / self.total as f64
        };
        share >= self.threshold
            && (self.by_inclusive || f.self_samples > 0 || self.threshold <= 0.0)
    }
}

/// The arcs of a call graph's functions ([`Client::call_graph_arcs`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Arcs {
    /// (function, caller, samples).
    pub callers: Vec<(String, String, u64)>,
    /// (function, callee, samples).
    pub callees: Vec<(String, String, u64)>,
}

/// One function of a call graph: a distinct stack entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrameTotal {
    /// The stack entry (`NAME\tFUNCTION`).
    pub frame: String,
    /// Samples taken in it (it is the stack's first entry).
    pub self_samples: u64,
    /// Samples whose stack holds it (once per sample, recursive or not).
    pub total: u64,
}

/// One row of [`Client::stacks`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StackRow {
    /// The keys' values, in [`Query::group`] order.
    pub keys: Vec<String>,
    /// The frames, leaf first.
    pub stack: Vec<String>,
    /// Samples.
    pub samples: u64,
}

/// A column to group by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Key {
    /// The host.
    Host,
    /// The CPU.
    Cpu,
    /// The process id.
    Pid,
    /// The thread id.
    Tid,
    /// The thread name.
    Comm,
    /// The process's name.
    Process,
    /// The cgroup.
    Cgroup,
    /// The binary's path (or `[kernel.kallsyms]`).
    Binary,
    /// The function, as stored (empty for unnamed rows: add
    /// [`Key::Offset`] to tell them apart).
    Function,
    /// The offset of unnamed rows (0 for named ones).
    Offset,
    /// The sampled frame's stack entry (the stack's first; empty for a
    /// row without frames).
    Leaf,
}

impl Key {
    fn column(self) -> &'static str {
        match self {
            Key::Host => "host",
            Key::Cpu => "cpu",
            Key::Pid => "pid",
            Key::Tid => "tid",
            Key::Comm => "comm",
            Key::Process => "process",
            Key::Cgroup => "cgroup",
            Key::Binary => "binary",
            Key::Function => "function",
            Key::Offset => "offset",
            Key::Leaf => "stack[1]",
        }
    }
}

/// One report row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    /// The keys' values, in [`Query::group`] order (numbers in decimal).
    pub keys: Vec<String>,
    /// Samples.
    pub samples: u64,
}

/// What the parts a query selects add up to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Totals {
    /// Samples.
    pub samples: u64,
    /// Samples lost.
    pub lost: u64,
    /// Parts.
    pub parts: u64,
    /// Distinct hosts.
    pub hosts: u64,
    /// The earliest part's start (0 without parts).
    pub start_unix_ns: u64,
    /// The latest part's end (0 without parts).
    pub end_unix_ns: u64,
}

/// A glob as a LIKE pattern, as a SQL literal: `*` → `%`, `?` → `_`,
/// `%` `_` `\` escaped.
pub fn like(glob: &str) -> String {
    let mut p = String::with_capacity(glob.len() + 4);
    for c in glob.chars() {
        match c {
            '*' => p.push('%'),
            '?' => p.push('_'),
            '%' | '_' | '\\' => {
                p.push('\\');
                p.push(c);
            }
            c => p.push(c),
        }
    }
    tsv::quote(&p)
}

/// The conditions on the columns both tables have (host, start, start_ns,
/// end_ns).
fn part_conditions(q: &Query) -> Vec<String> {
    let mut c = Vec::new();
    if let Some(h) = &q.hosts {
        c.push(format!("host LIKE {}", like(h)));
    }
    if let Some(f) = q.from_unix_ns {
        c.push(format!("end_ns >= {f}"));
    }
    if let Some(t) = q.to_unix_ns {
        let secs = (t / 1_000_000_000).min(u64::from(u32::MAX));
        c.push(format!("start_ns < {t}"));
        c.push(format!("start <= toDateTime({secs})"));
    }
    c
}

fn and(c: &[String]) -> String {
    if c.is_empty() {
        "1".to_owned()
    } else {
        c.join(" AND ")
    }
}

impl Client {
    /// Creates the database and the two tables if they do not exist
    /// ([`schema`](crate::schema)); running it again is fine.
    pub fn ensure_schema(&self) -> Result<(), Error> {
        let db = &self.target().database;
        let run = |s: &str| {
            let body = self.run(s, "the schema")?;
            if !body.iter().all(u8::is_ascii_whitespace) {
                return Err(self.bad("the schema", format!("answered {}", tsv::excerpt(&body))));
            }
            Ok(())
        };
        for s in crate::schema::statements(db) {
            run(&s)?;
        }
        // Tables made before the process column (18.16 has no ADD COLUMN
        // IF NOT EXISTS): their rows read '' there.
        let has = self.select(
            &format!(
                "SELECT count() FROM system.columns WHERE database = {} AND table = '{SAMPLES}' \
                 AND name = 'process' FORMAT TabSeparated",
                tsv::quote(db)
            ),
            1,
            "the schema",
        )?;
        if self.one_number(&has, "the schema")? == 0 {
            run(&format!(
                "ALTER TABLE {db}.{SAMPLES} ADD COLUMN process String AFTER comm"
            ))?;
        }
        Ok(())
    }

    fn sample_where(&self, q: &Query) -> String {
        let db = &self.target().database;
        let mut c = part_conditions(q);
        let binary = |b: &String| {
            let p = like(b);
            if b.contains('/') {
                format!("binary LIKE {p}")
            } else {
                format!("binary LIKE {p} OR replaceRegexpOne(binary, '^.*/', '') LIKE {p}")
            }
        };
        let any = |v: Vec<String>| format!("({})", v.join(" OR "));
        if !q.binaries.is_empty() {
            c.push(any(q.binaries.iter().map(binary).collect()));
        }
        if !q.exclude_binaries.is_empty() {
            c.push(format!(
                "NOT {}",
                any(q.exclude_binaries.iter().map(binary).collect())
            ));
        }
        let numbers = |col: &str, v: &[u32]| {
            let list: Vec<String> = v.iter().map(u32::to_string).collect();
            format!("{col} IN ({})", list.join(", "))
        };
        if !q.cpus.is_empty() {
            c.push(numbers("cpu", &q.cpus));
        }
        if !q.pids.is_empty() {
            c.push(numbers("pid", &q.pids));
        }
        if !q.tids.is_empty() {
            c.push(numbers("tid", &q.tids));
        }
        if !q.cgroups.is_empty() {
            c.push(any(q
                .cgroups
                .iter()
                .map(|g| format!("if(cgroup = '', '[none]', cgroup) LIKE {}", like(g)))
                .collect()));
        }
        if !q.build_ids.is_empty() {
            c.push(any(q
                .build_ids
                .iter()
                .map(|b| {
                    format!(
                        "startsWith(build_id, {})",
                        tsv::quote(&b.to_ascii_lowercase())
                    )
                })
                .collect()));
        }
        // GLOBAL: the subquery runs once, also when the tables are Distributed.
        c.push(format!(
            "part_id GLOBAL IN (SELECT part_id FROM {db}.{PARTS})"
        ));
        and(&c)
    }

    /// The samples the query selects, summed by its `group` keys: ordered
    /// by samples (descending), then keys; at most `limit` rows. Only
    /// parts whose export completed count. No group: one row, no keys.
    pub fn query(&self, q: &Query) -> Result<Vec<Row>, Error> {
        let db = &self.target().database;
        let n = q.group.len();
        let keys: Vec<String> = (0..n).map(|i| format!("k{i}")).collect();
        // The sum first: no line of the answer starts with a string (one
        // reading "Code: 1, e.displayText() = …" would pass for an
        // exception).
        let select: String = q
            .group
            .iter()
            .zip(&keys)
            .map(|(k, a)| format!(", {} AS {a}", k.column()))
            .collect();
        let mut sql = format!(
            "SELECT sum(samples) AS s{select} FROM {db}.{SAMPLES} WHERE {}",
            self.sample_where(q)
        );
        if n > 0 {
            sql.push_str(&format!(
                " GROUP BY {0} ORDER BY s DESC, {0}",
                keys.join(", ")
            ));
        }
        if let Some(l) = q.limit {
            sql.push_str(&format!(" LIMIT {l}"));
        }
        sql.push_str(" FORMAT TabSeparated");
        let what = "the report query";
        let rows = self.select(&sql, n + 1, what)?;
        rows.iter()
            .map(|r| {
                Ok(Row {
                    keys: r[1..].iter().map(|f| tsv::unescape(f)).collect(),
                    samples: tsv::number(&r[0]).map_err(|w| self.bad(what, w))?,
                })
            })
            .collect()
    }

    /// The distinct stacks (frames leaf first, as exported; the sampled
    /// frame alone for samples without a call graph) of the samples the
    /// query selects, per value of its `group` keys, with their samples:
    /// ordered by samples (descending), then keys and stack; at most
    /// `limit`. For a folded flame graph, reverse each stack and join it
    /// with `;`.
    pub fn stacks(&self, q: &Query) -> Result<Vec<StackRow>, Error> {
        let db = &self.target().database;
        let n = q.group.len();
        let keys: String = q
            .group
            .iter()
            .enumerate()
            .map(|(i, k)| format!(", {} AS k{i}", k.column()))
            .collect();
        let by: String = (0..n).map(|i| format!("k{i}, ")).collect();
        let mut sql = format!(
            "SELECT sum(samples) AS s, stack{keys} FROM {db}.{SAMPLES} WHERE {} \
             GROUP BY {by}stack ORDER BY s DESC, {by}stack",
            self.sample_where(q)
        );
        if let Some(l) = q.limit {
            sql.push_str(&format!(" LIMIT {l}"));
        }
        sql.push_str(" FORMAT TabSeparated");
        let what = "the stacks query";
        let rows = self.select(&sql, n + 2, what)?;
        rows.iter()
            .map(|r| {
                let stack = tsv::parse_array(&r[1]).ok_or_else(|| {
                    self.bad(
                        what,
                        format!("not an array of strings: {}", tsv::excerpt(&r[1])),
                    )
                })?;
                Ok(StackRow {
                    keys: r[2..].iter().map(|f| tsv::unescape(f)).collect(),
                    stack,
                    samples: tsv::number(&r[0]).map_err(|w| self.bad(what, w))?,
                })
            })
            .collect()
    }

    /// Each distinct stack entry of the selected samples, once per sample
    /// at its innermost occurrence (`e`, its position `i`, 1 = the sampled
    /// frame), as a subquery over `stack` and `samples`.
    fn entries_sql(&self, q: &Query, extra: &str) -> String {
        let db = &self.target().database;
        format!(
            "SELECT arrayJoin(arrayDistinct(stack)) AS e, indexOf(stack, e) AS i{extra}, samples \
             FROM {db}.{SAMPLES} WHERE {}",
            self.sample_where(q)
        )
    }

    /// The functions of a call graph, computed by the server: each
    /// distinct stack entry of the selected samples with its own and
    /// inclusive samples (one pass over the rows), those `cut` keeps (most
    /// inclusive samples first), and how many it left out. `group` and
    /// `limit` do not apply.
    pub fn call_graph_frames(&self, q: &Query, cut: &Cut) -> Result<(Vec<FrameTotal>, u64), Error> {
        let sql = format!(
            "SELECT t, s, e FROM (SELECT e, sum(samples) AS t, sumIf(samples, i = 1) AS s \
             FROM ({}) GROUP BY e) ORDER BY t DESC, e FORMAT TabSeparated",
            self.entries_sql(q, "")
        );
        let what = "the call graph query";
        let rows = self.select(&sql, 3, what)?;
        let mut frames = Vec::new();
        let mut below = 0u64;
        for r in &rows {
            let f = FrameTotal {
                total: tsv::number(&r[0]).map_err(|w| self.bad(what, w))?,
                self_samples: tsv::number(&r[1]).map_err(|w| self.bad(what, w))?,
                frame: tsv::unescape(&r[2]),
            };
            if cut.keeps(&f) {
                frames.push(f);
            } else {
                below += 1;
            }
        }
        Ok((frames, below))
    }

    /// The arcs of the functions `frames`, computed by the server in one
    /// pass: (function, caller, samples), the caller the frame just outside
    /// the function's innermost occurrence; and (function, callee,
    /// samples), the frame just inside (none where it is the sampled
    /// frame). Each list is ordered by function, then samples (most
    /// first).
    pub fn call_graph_arcs(&self, q: &Query, frames: &[String]) -> Result<Arcs, Error> {
        if frames.is_empty() {
            return Ok(Arcs::default());
        }
        // The functions by name when the list is short enough for a query
        // (ClickHouse's max_query_size is 256 KiB by default); else all,
        // and the others dropped here.
        let list: Vec<String> = frames.iter().map(|f| tsv::quote(f)).collect();
        let bytes: usize = list.iter().map(|f| f.len() + 2).sum();
        let filter = if bytes <= 128 << 10 {
            format!(" WHERE e IN ({})", list.join(", "))
        } else {
            String::new()
        };
        let sql = format!(
            "SELECT sum(samples) AS n, e, o, c FROM ({}){filter} GROUP BY e, o, c \
             FORMAT TabSeparated",
            self.entries_sql(
                q,
                ", if(i < length(stack), stack[i + 1], '') AS o, \
                 if(i > 1, stack[i - 1], '') AS c"
            )
        );
        let what = "the call graph query";
        let rows = self.select(&sql, 4, what)?;
        let wanted: std::collections::HashSet<&str> = frames.iter().map(String::as_str).collect();
        let mut callers: std::collections::HashMap<(String, String), u64> = Default::default();
        let mut callees: std::collections::HashMap<(String, String), u64> = Default::default();
        for r in &rows {
            let n = tsv::number(&r[0]).map_err(|w| self.bad(what, w))?;
            let e = tsv::unescape(&r[1]);
            if !wanted.contains(e.as_str()) {
                continue;
            }
            // '' is no frame: the outermost (no caller), the sampled one
            // (no callee). A stored frame is never '': it names its binary.
            let (o, c) = (tsv::unescape(&r[2]), tsv::unescape(&r[3]));
            if !o.is_empty() {
                *callers.entry((e.clone(), o)).or_default() += n;
            }
            if !c.is_empty() {
                *callees.entry((e, c)).or_default() += n;
            }
        }
        let sorted = |m: std::collections::HashMap<(String, String), u64>| {
            let mut v: Vec<(String, String, u64)> =
                m.into_iter().map(|((a, b), n)| (a, b, n)).collect();
            v.sort_by(|x, y| {
                x.0.cmp(&y.0)
                    .then(y.2.cmp(&x.2))
                    .then_with(|| x.1.cmp(&y.1))
            });
            v
        };
        Ok(Arcs {
            callers: sorted(callers),
            callees: sorted(callees),
        })
    }

    /// The parts the query's hosts and time window select (its `group`,
    /// `binaries` and `limit` do not apply): their samples and lost
    /// samples, how many parts and hosts, the time they span.
    pub fn totals(&self, q: &Query) -> Result<Totals, Error> {
        let db = &self.target().database;
        // One row per part_id even if a part were listed twice.
        let sql = format!(
            "SELECT sum(s), sum(l), count(), uniqExact(h), min(a), max(b) FROM \
             (SELECT part_id, any(host) AS h, any(samples) AS s, any(lost) AS l, \
             any(start_ns) AS a, any(end_ns) AS b FROM {db}.{PARTS} WHERE {} GROUP BY part_id) \
             FORMAT TabSeparated",
            and(&part_conditions(q))
        );
        let what = "the totals query";
        let rows = self.select(&sql, 6, what)?;
        let [r] = rows.as_slice() else {
            return Err(self.bad(what, format!("{} lines, 1 expected", rows.len())));
        };
        let n = |i: usize| tsv::number(&r[i]).map_err(|w| self.bad(what, w));
        let parts = n(2)?;
        Ok(Totals {
            samples: n(0)?,
            lost: n(1)?,
            parts,
            hosts: n(3)?,
            start_unix_ns: if parts > 0 { n(4)? } else { 0 },
            end_unix_ns: if parts > 0 { n(5)? } else { 0 },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::like;

    #[test]
    fn globs_become_escaped_like_patterns() {
        assert_eq!(like("web-*"), "'web-%'");
        assert_eq!(like("a?_%\\'"), "'a_\\\\_\\\\%\\\\\\\\\\''");
    }
}
