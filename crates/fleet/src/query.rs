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
    /// Binaries matching this glob: one with a `/` against the path, any
    /// other against the path or the file name (as `image:GLOB`).
    pub binaries: Option<String>,
    /// At most this many rows (the largest).
    pub limit: Option<usize>,
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
    /// The cgroup.
    Cgroup,
    /// The binary's path (or `[kernel.kallsyms]`).
    Binary,
    /// The function, as stored (empty for unnamed rows: add
    /// [`Key::Offset`] to tell them apart).
    Function,
    /// The offset of unnamed rows (0 for named ones).
    Offset,
}

impl Key {
    fn column(self) -> &'static str {
        match self {
            Key::Host => "host",
            Key::Cpu => "cpu",
            Key::Pid => "pid",
            Key::Tid => "tid",
            Key::Comm => "comm",
            Key::Cgroup => "cgroup",
            Key::Binary => "binary",
            Key::Function => "function",
            Key::Offset => "offset",
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
        for s in crate::schema::statements(&self.target().database) {
            let body = self.run(&s, "the schema")?;
            if !body.iter().all(u8::is_ascii_whitespace) {
                return Err(self.bad("the schema", format!("answered {}", tsv::excerpt(&body))));
            }
        }
        Ok(())
    }

    fn sample_where(&self, q: &Query) -> String {
        let db = &self.target().database;
        let mut c = part_conditions(q);
        if let Some(b) = &q.binaries {
            let p = like(b);
            c.push(if b.contains('/') {
                format!("binary LIKE {p}")
            } else {
                format!("(binary LIKE {p} OR replaceRegexpOne(binary, '^.*/', '') LIKE {p})")
            });
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

    /// The distinct stacks (frames leaf first, as exported; empty for
    /// samples without a call graph) of the samples the query selects,
    /// with their samples: ordered by samples (descending), at most
    /// `limit`. `group` is ignored. For a folded flame graph, reverse
    /// each stack and join it with `;`.
    pub fn stacks(&self, q: &Query) -> Result<Vec<(Vec<String>, u64)>, Error> {
        let db = &self.target().database;
        let mut sql = format!(
            "SELECT stack, sum(samples) AS s FROM {db}.{SAMPLES} WHERE {} GROUP BY stack ORDER BY s DESC, stack",
            self.sample_where(q)
        );
        if let Some(l) = q.limit {
            sql.push_str(&format!(" LIMIT {l}"));
        }
        sql.push_str(" FORMAT TabSeparated");
        let what = "the stacks query";
        let rows = self.select(&sql, 2, what)?;
        rows.iter()
            .map(|r| {
                let stack = tsv::parse_array(&r[0]).ok_or_else(|| {
                    self.bad(
                        what,
                        format!("not an array of strings: {}", tsv::excerpt(&r[0])),
                    )
                })?;
                Ok((stack, tsv::number(&r[1]).map_err(|w| self.bad(what, w))?))
            })
            .collect()
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
