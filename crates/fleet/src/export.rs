//! A part's rows, and their idempotent export.

use crate::schema::{names, PARTS, PARTS_COLUMNS, SAMPLES, SAMPLES_COLUMNS};
use crate::{tsv, Client, Error};
use std::time::{SystemTime, UNIX_EPOCH};

/// The most rows one part may have: ClickHouse applies an INSERT of fewer
/// than `max_insert_block_size` (1,048,576) rows as one block, atomically.
pub const MAX_ROWS: usize = 1_048_575;

/// One part of one session of one host, as rows (aggregated by the
/// caller: one row per distinct key and stack).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct PartRows {
    /// The recording host.
    pub host: String,
    /// The session id, unique per host.
    pub session: String,
    /// The part's number within the session.
    pub part: u32,
    /// The part's start, Unix ns.
    pub start_unix_ns: u64,
    /// The part's end, Unix ns.
    pub end_unix_ns: u64,
    /// All samples of the part: the sum of the rows' samples.
    pub samples: u64,
    /// Samples the kernel lost.
    pub lost: u64,
    /// The rows.
    pub rows: Vec<SampleRow>,
}

impl PartRows {
    /// `"{host}/{session}/{part}"`: the key that makes the export
    /// idempotent.
    pub fn part_id(&self) -> String {
        format!("{}/{}/{}", self.host, self.session, self.part)
    }
}

/// One row: a sample key and how many samples it has.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SampleRow {
    /// CPU (at most 65535: the column is UInt16).
    pub cpu: u32,
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Thread name.
    pub comm: String,
    /// The process's name (its main thread's).
    pub process: String,
    /// Cgroup: profkit's export gives its path (`/system.slice/x.service`;
    /// `[cgroup ID]` when the session never named it; empty without one).
    pub cgroup: String,
    /// Image path, or `[kernel.kallsyms]`.
    pub binary: String,
    /// Build-id, hex; may be empty.
    pub build_id: String,
    /// Function; empty when unnamed.
    pub function: String,
    /// For unnamed rows the offset in the binary; 0 otherwise.
    pub offset: u64,
    /// Frames, leaf first (`NAME\tFUNCTION`: the binary's shown name and
    /// the function, empty when unnamed, or as the caller gives them;
    /// profkit's export gives the sampled frame alone without call
    /// graphs).
    pub stack: Vec<String>,
    /// Samples.
    pub samples: u64,
}

/// What [`Client::export_part`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exported {
    /// The rows were sent and verified, the part recorded.
    Inserted {
        /// Rows inserted.
        rows: u64,
        /// Bytes of the rows' INSERT body.
        bytes_sent: u64,
    },
    /// The part was there already (an earlier export, perhaps completed
    /// now): nothing was duplicated.
    AlreadyThere,
}

impl Client {
    /// Exports `part` once, whatever happened before: (1) a part listed in
    /// `profkit_parts` is [`Exported::AlreadyThere`]; (2) a part whose
    /// rows are in `profkit_samples` but which is not listed (an earlier
    /// export stopped between its two INSERTs) is listed when the rows'
    /// count and samples are the part's ([`Error::Inconsistent`] if not);
    /// (3) otherwise its rows go in one INSERT (one block: atomic), are
    /// counted back (a server that said 200 but stored something else is
    /// caught), and then the part is listed.
    ///
    /// Retrying is the caller's: call again later (after
    /// [`Error::is_unreachable`], say); a repeated call never duplicates.
    /// Two exporters must not export the same part at the same time.
    pub fn export_part(&self, part: &PartRows) -> Result<Exported, Error> {
        let part_id = part.part_id();
        check(part, &part_id)?;
        let db = &self.target().database;
        let id = tsv::quote(&part_id);
        let listed = self.select(
            &format!("SELECT count() FROM {db}.{PARTS} WHERE part_id = {id} FORMAT TabSeparated"),
            1,
            "the parts check",
        )?;
        if self.one_number(&listed, "the parts check")? > 0 {
            return Ok(Exported::AlreadyThere);
        }
        let (rows, samples) = (part.rows.len() as u64, part.samples);
        let (stored_rows, stored_samples) = self.stored(&id)?;
        if stored_rows > 0 {
            if (stored_rows, stored_samples) != (rows, samples) {
                return Err(Error::Inconsistent {
                    target: self.target().redacted(),
                    part_id,
                    stored_rows,
                    stored_samples,
                    rows,
                    samples,
                });
            }
            self.list(part, rows)?;
            return Ok(Exported::AlreadyThere);
        }
        let data = sample_rows(part, &part_id);
        if rows > 0 {
            self.insert(
                &format!(
                    "INSERT INTO {db}.{SAMPLES} ({}) FORMAT TabSeparated",
                    names(SAMPLES_COLUMNS)
                ),
                data.as_bytes(),
                "the samples INSERT",
            )?;
            let got = self.stored(&id)?;
            if got != (rows, samples) {
                return Err(self.bad(
                    "the samples INSERT",
                    format!(
                        "{rows} rows with {samples} samples sent, {} rows with {} samples stored",
                        got.0, got.1
                    ),
                ));
            }
        }
        self.list(part, rows)?;
        Ok(Exported::Inserted {
            rows,
            bytes_sent: data.len() as u64,
        })
    }

    fn stored(&self, id: &str) -> Result<(u64, u64), Error> {
        let db = &self.target().database;
        let what = "the samples check";
        let r = self.select(
            &format!(
                "SELECT count(), sum(samples) FROM {db}.{SAMPLES} WHERE part_id = {id} FORMAT TabSeparated"
            ),
            2,
            what,
        )?;
        match r.as_slice() {
            [row] => Ok((
                tsv::number(&row[0]).map_err(|w| self.bad(what, w))?,
                tsv::number(&row[1]).map_err(|w| self.bad(what, w))?,
            )),
            r => Err(self.bad(what, format!("{} lines, 1 expected", r.len()))),
        }
    }

    pub(crate) fn one_number(&self, r: &[Vec<Vec<u8>>], what: &'static str) -> Result<u64, Error> {
        match r {
            [row] => tsv::number(&row[0]).map_err(|w| self.bad(what, w)),
            r => Err(self.bad(what, format!("{} lines, 1 expected", r.len()))),
        }
    }

    fn list(&self, part: &PartRows, rows: u64) -> Result<(), Error> {
        let db = &self.target().database;
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let mut line = String::new();
        for s in [&part.part_id(), &part.host, &part.session] {
            tsv::escape_into(&mut line, s);
            line.push('\t');
        }
        line.push_str(&format!(
            "{}\t{}\t{}\t{}\t{}\t{}\t{rows}\t{now}\n",
            part.part,
            part.start_unix_ns / 1_000_000_000,
            part.start_unix_ns,
            part.end_unix_ns,
            part.samples,
            part.lost
        ));
        self.insert(
            &format!(
                "INSERT INTO {db}.{PARTS} ({}) FORMAT TabSeparated",
                names(PARTS_COLUMNS)
            ),
            line.as_bytes(),
            "the parts INSERT",
        )
    }
}

fn check(part: &PartRows, part_id: &str) -> Result<(), Error> {
    let bad = |why: String| {
        Err(Error::BadPart {
            part_id: part_id.to_owned(),
            why,
        })
    };
    if part.host.is_empty() || part.session.is_empty() {
        return bad("an empty host or session".into());
    }
    if part.rows.len() > MAX_ROWS {
        return bad(format!(
            "{} rows, over the {MAX_ROWS} one INSERT applies atomically (aggregate the rows: one per distinct key and stack)",
            part.rows.len()
        ));
    }
    let sum = part
        .rows
        .iter()
        .try_fold(0u64, |a, r| a.checked_add(r.samples));
    if sum != Some(part.samples) {
        return bad(format!(
            "its rows hold {sum:?} samples, the part says {}",
            part.samples
        ));
    }
    if part.end_unix_ns < part.start_unix_ns {
        return bad("it ends before it starts".into());
    }
    // DateTime holds seconds up to 2106 (UInt32).
    if part.start_unix_ns / 1_000_000_000 > u64::from(u32::MAX) {
        return bad("a start past 2106".into());
    }
    if let Some(r) = part.rows.iter().find(|r| r.cpu > u32::from(u16::MAX)) {
        return bad(format!("cpu {} over 65535", r.cpu));
    }
    Ok(())
}

fn sample_rows(part: &PartRows, part_id: &str) -> String {
    let mut head = String::new();
    for s in [&part.host, &part.session] {
        tsv::escape_into(&mut head, s);
        head.push('\t');
    }
    head.push_str(&format!("{}\t", part.part));
    tsv::escape_into(&mut head, part_id);
    head.push_str(&format!(
        "\t{}\t{}\t{}\t",
        part.start_unix_ns / 1_000_000_000,
        part.start_unix_ns,
        part.end_unix_ns
    ));
    let mut out = String::new();
    for r in &part.rows {
        out.push_str(&head);
        out.push_str(&format!("{}\t{}\t{}\t", r.cpu, r.pid, r.tid));
        for s in [
            &r.comm,
            &r.process,
            &r.cgroup,
            &r.binary,
            &r.build_id,
            &r.function,
        ] {
            tsv::escape_into(&mut out, s);
            out.push('\t');
        }
        out.push_str(&format!("{}\t", r.offset));
        tsv::array_into(&mut out, &r.stack);
        out.push_str(&format!("\t{}\n", r.samples));
    }
    out
}
