//! `--format pprof`: a report's stacks as pprof's `profile.proto`,
//! gzip-compressed, for `go tool pprof`, Pyroscope, Parca and the other
//! fleet tools that ingest it.
//!
//! The messages are written out by hand from
//! `github.com/google/pprof/proto/profile.proto` with `prost`'s derive (no
//! `protoc`, no build script); only the fields we fill are declared, with
//! their numbers from the `.proto`. Decoders skip what they do not know,
//! so these types also decode any pprof file (the tests use them so).
//!
//! # What goes where
//!
//! | profile.proto | from |
//! |---|---|
//! | `sample_type` | `samples/count`, and `cpu/nanoseconds` when the session's rate gives a sample's worth of time (frequency *f*: 10⁹/*f* ns; a period of a `*-clock` event: the period in ns); another event's period becomes `EVENT/events` |
//! | `sample` | one per distinct (stack, column, thread) of [`Stacks`]; locations innermost first; labels `pid`, `tid` (with `--separate=thread`), `cpu` (with `--separate=cpu`), `comm` |
//! | `mapping` | one per binary: `filename` the recorded path, `build_id` in hex, `has_functions` set (names come symbolized) |
//! | `location` | one per distinct (binary, offset), its `line`s the inlined functions there innermost first then the symbol (`has_inline_frames` on the mapping when any location of it has inlined functions): kernel and module addresses are real (`base + offset`); a user binary's offsets (file offsets) are placed in a range of their own, `memory_start` = a synthetic base, `file_offset` 0, so `address − memory_start` is the file offset |
//! | `function` | one per symbol and per inlined function, `name` and `system_name` the shown name (`[binary]` for code of a binary without symbols, as in folded stacks; an inlined function without perf's ` (inlined)`, which pprof shows by itself) |
//! | `time_nanos`, `duration_nanos`, `period` | the session's start, length and a sample's worth |
//! | off-CPU reports (`--off-cpu`) | one `sample_type`, `off_cpu/nanoseconds`, each sample's value its off-CPU time; no period |
//! | `comment` | the sessions' targets and hosts |

use std::collections::HashMap;
use std::io::{self, Write};

use prost::Message;

use crate::model::*;

/// `profile.proto`'s `Profile` (the fields profkit writes).
#[derive(Clone, PartialEq, Message)]
pub struct Profile {
    /// What each value of a sample is.
    #[prost(message, repeated, tag = "1")]
    pub sample_type: Vec<ValueType>,
    /// The samples.
    #[prost(message, repeated, tag = "2")]
    pub sample: Vec<Sample>,
    /// The binaries.
    #[prost(message, repeated, tag = "3")]
    pub mapping: Vec<Mapping>,
    /// The code locations.
    #[prost(message, repeated, tag = "4")]
    pub location: Vec<Location>,
    /// The functions.
    #[prost(message, repeated, tag = "5")]
    pub function: Vec<Function>,
    /// Every string; index 0 is "".
    #[prost(string, repeated, tag = "6")]
    pub string_table: Vec<String>,
    /// Start, ns since the Unix epoch.
    #[prost(int64, tag = "9")]
    pub time_nanos: i64,
    /// Length, ns.
    #[prost(int64, tag = "10")]
    pub duration_nanos: i64,
    /// What `period` counts.
    #[prost(message, optional, tag = "11")]
    pub period_type: Option<ValueType>,
    /// Events per sample.
    #[prost(int64, tag = "12")]
    pub period: i64,
    /// Free-form comments (string table indexes).
    #[prost(int64, repeated, tag = "13")]
    pub comment: Vec<i64>,
    /// The sample type shown by default (a string table index of a type).
    #[prost(int64, tag = "14")]
    pub default_sample_type: i64,
}

/// `ValueType`: a type and a unit, as string table indexes.
#[derive(Clone, PartialEq, Message)]
pub struct ValueType {
    /// `samples`, `cpu`, …
    #[prost(int64, tag = "1")]
    pub r#type: i64,
    /// `count`, `nanoseconds`, …
    #[prost(int64, tag = "2")]
    pub unit: i64,
}

/// `Sample`: a stack and its values.
#[derive(Clone, PartialEq, Message)]
pub struct Sample {
    /// Location ids, innermost (the sampled one) first.
    #[prost(uint64, repeated, tag = "1")]
    pub location_id: Vec<u64>,
    /// One per `sample_type`.
    #[prost(int64, repeated, tag = "2")]
    pub value: Vec<i64>,
    /// Labels.
    #[prost(message, repeated, tag = "3")]
    pub label: Vec<Label>,
}

/// `Label`: a string or numeric label of a sample.
#[derive(Clone, PartialEq, Message)]
pub struct Label {
    /// Key (string table index).
    #[prost(int64, tag = "1")]
    pub key: i64,
    /// String value (string table index), or 0.
    #[prost(int64, tag = "2")]
    pub str: i64,
    /// Numeric value.
    #[prost(int64, tag = "3")]
    pub num: i64,
}

/// `Mapping`: a binary.
#[derive(Clone, PartialEq, Message)]
pub struct Mapping {
    /// Id (from 1).
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// Start address.
    #[prost(uint64, tag = "2")]
    pub memory_start: u64,
    /// End address (exclusive).
    #[prost(uint64, tag = "3")]
    pub memory_limit: u64,
    /// File offset of `memory_start`.
    #[prost(uint64, tag = "4")]
    pub file_offset: u64,
    /// Path (string table index).
    #[prost(int64, tag = "5")]
    pub filename: i64,
    /// Build-id (string table index).
    #[prost(int64, tag = "6")]
    pub build_id: i64,
    /// Locations carry function names.
    #[prost(bool, tag = "7")]
    pub has_functions: bool,
    /// Locations carry file names.
    #[prost(bool, tag = "8")]
    pub has_filenames: bool,
    /// Locations carry line numbers.
    #[prost(bool, tag = "9")]
    pub has_line_numbers: bool,
    /// Locations carry inlined frames.
    #[prost(bool, tag = "10")]
    pub has_inline_frames: bool,
}

/// `Location`: an address and what it is in.
#[derive(Clone, PartialEq, Message)]
pub struct Location {
    /// Id (from 1).
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// Its mapping's id.
    #[prost(uint64, tag = "2")]
    pub mapping_id: u64,
    /// The address.
    #[prost(uint64, tag = "3")]
    pub address: u64,
    /// Functions at the address (innermost inlined first, the symbol last).
    #[prost(message, repeated, tag = "4")]
    pub line: Vec<Line>,
}

/// `Line`: a function (and source line) at a location.
#[derive(Clone, PartialEq, Message)]
pub struct Line {
    /// The function's id.
    #[prost(uint64, tag = "1")]
    pub function_id: u64,
    /// Source line, 0 if unknown.
    #[prost(int64, tag = "2")]
    pub line: i64,
}

/// `Function`: a named function.
#[derive(Clone, PartialEq, Message)]
pub struct Function {
    /// Id (from 1).
    #[prost(uint64, tag = "1")]
    pub id: u64,
    /// Name shown (string table index).
    #[prost(int64, tag = "2")]
    pub name: i64,
    /// Name in the binary (string table index).
    #[prost(int64, tag = "3")]
    pub system_name: i64,
    /// Source file (string table index), 0 if unknown.
    #[prost(int64, tag = "4")]
    pub filename: i64,
    /// First line, 0 if unknown.
    #[prost(int64, tag = "5")]
    pub start_line: i64,
}

impl Profile {
    /// The string at `i` of the string table ("" when out of range).
    pub fn string(&self, i: i64) -> &str {
        usize::try_from(i)
            .ok()
            .and_then(|i| self.string_table.get(i))
            .map_or("", String::as_str)
    }
}

/// Builds the string table: index 0 is "".
struct Strings {
    table: Vec<String>,
    index: HashMap<String, i64>,
}

impl Strings {
    fn new() -> Strings {
        Strings {
            table: vec![String::new()],
            index: HashMap::from([(String::new(), 0)]),
        }
    }

    fn get(&mut self, s: &str) -> i64 {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        let i = self.table.len() as i64;
        self.table.push(s.to_owned());
        self.index.insert(s.to_owned(), i);
        i
    }
}

/// Where a user binary's synthetic range starts: binary `i` (from 0) at
/// `(i + 1) << USER_RANGE_BITS`.
const USER_RANGE_BITS: u32 = 36;

fn clamp_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

/// A sample's worth: (value type, unit, amount per sample), if the rate
/// says it.
fn period_of(h: &Header) -> Option<(String, String, u64)> {
    let clock = h.event.ends_with("-clock");
    match (h.frequency, h.period) {
        (Some(f), _) if f > 0 => Some(("cpu".into(), "nanoseconds".into(), 1_000_000_000 / f)),
        (None, Some(p)) if clock => Some(("cpu".into(), "nanoseconds".into(), p)),
        (None, Some(p)) => Some((h.event.clone(), "events".into(), p)),
        _ => None,
    }
}

/// The report's stacks as a `Profile` (not yet encoded).
pub fn to_profile(report: &Report) -> io::Result<Profile> {
    let st = report.stacks.as_ref().ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            "pprof output needs the report's call stacks (ReportOptions::stacks)",
        )
    })?;
    let h = &report.header;
    let mut strings = Strings::new();
    let (ty, unit) = match h.off_cpu {
        Some(_) => ("off_cpu", "nanoseconds"),
        None => ("samples", "count"),
    };
    let mut p = Profile {
        sample_type: vec![ValueType {
            r#type: strings.get(ty),
            unit: strings.get(unit),
        }],
        time_nanos: clamp_i64(h.start_unix_ns),
        duration_nanos: clamp_i64(h.duration_ns),
        ..Default::default()
    };
    let period = period_of(h).filter(|_| h.off_cpu.is_none());
    if let Some((ty, unit, amount)) = &period {
        let vt = ValueType {
            r#type: strings.get(ty),
            unit: strings.get(unit),
        };
        p.sample_type.push(vt.clone());
        p.period_type = Some(vt);
        p.period = clamp_i64(*amount);
    }
    for s in &h.sessions {
        let c = format!("profkit session {} ({}; host {})", s.path, s.target, s.host);
        p.comment.push(strings.get(&c));
    }

    // Mappings: real addresses for the kernel and modules, a range of
    // their own for every other binary.
    let mut max_offset = vec![0u64; st.mappings.len()];
    let mut inline_frames = vec![false; st.mappings.len()];
    for l in &st.locations {
        let m = &mut max_offset[l.mapping as usize];
        *m = (*m).max(l.offset);
        inline_frames[l.mapping as usize] |= !l.inlined.is_empty();
    }
    let mut starts = Vec::with_capacity(st.mappings.len());
    let mut user_index = 0u64;
    for (i, m) in st.mappings.iter().enumerate() {
        let start = if m.kernel {
            m.base
        } else {
            user_index += 1;
            user_index << USER_RANGE_BITS
        };
        starts.push(start);
        let span = max_offset[i].saturating_add(1);
        let span = if m.kernel {
            span
        } else {
            span.min(1 << USER_RANGE_BITS)
        };
        p.mapping.push(Mapping {
            id: i as u64 + 1,
            memory_start: start,
            memory_limit: start.saturating_add(span),
            file_offset: 0,
            filename: strings.get(&m.path),
            build_id: m.build_id.as_deref().map_or(0, |b| strings.get(b)),
            has_functions: true,
            has_inline_frames: inline_frames[i],
            ..Default::default()
        });
    }
    for (i, f) in st.functions.iter().enumerate() {
        // As in folded stacks: a binary without symbols is `[binary]`, so
        // tools that merge functions by name keep binaries apart.
        let name = match &f.symbol {
            Symbol::NoSymbols => {
                strings.get(&format!("[{}]", st.mappings[f.mapping as usize].name))
            }
            s => strings.get(&s.to_string()),
        };
        p.function.push(Function {
            id: i as u64 + 1,
            name,
            system_name: name,
            ..Default::default()
        });
    }
    for (i, l) in st.locations.iter().enumerate() {
        let m = l.mapping as usize;
        let offset = if st.mappings[m].kernel {
            l.offset
        } else {
            l.offset.min((1 << USER_RANGE_BITS) - 1)
        };
        p.location.push(Location {
            id: i as u64 + 1,
            mapping_id: m as u64 + 1,
            address: starts[m].wrapping_add(offset),
            line: l
                .inlined
                .iter()
                .chain(std::iter::once(&l.function))
                .map(|&f| Line {
                    function_id: u64::from(f) + 1,
                    line: 0,
                })
                .collect(),
        });
    }
    let (k_pid, k_tid, k_cpu, k_comm) = (
        strings.get("pid"),
        strings.get("tid"),
        strings.get("cpu"),
        strings.get("comm"),
    );
    for s in &st.samples {
        let mut value = vec![clamp_i64(s.count)];
        if let Some((_, _, amount)) = &period {
            value.push(clamp_i64(s.count.saturating_mul(*amount)));
        }
        let mut label = vec![Label {
            key: k_pid,
            str: 0,
            num: i64::from(s.pid),
        }];
        if s.tid != 0 {
            label.push(Label {
                key: k_tid,
                str: 0,
                num: i64::from(s.tid),
            });
        }
        if let Some(Column::Cpu(cpu)) = report.columns.get(s.column) {
            label.push(Label {
                key: k_cpu,
                str: 0,
                num: i64::from(*cpu),
            });
        }
        label.push(Label {
            key: k_comm,
            str: strings.get(&s.process),
            num: 0,
        });
        p.sample.push(Sample {
            location_id: s.locations.iter().map(|&l| u64::from(l) + 1).collect(),
            value,
            label,
        });
    }
    p.string_table = strings.table;
    Ok(p)
}

/// Writes the report's stacks as a gzip-compressed `profile.proto`.
pub fn write_pprof(report: &Report, w: &mut dyn Write) -> io::Result<()> {
    let profile = to_profile(report)?;
    let mut gz = flate2::write::GzEncoder::new(w, flate2::Compression::default());
    gz.write_all(&profile.encode_to_vec())?;
    gz.finish()?;
    Ok(())
}

/// Decodes a pprof file (gzip-compressed or not).
pub fn read_pprof(bytes: &[u8]) -> io::Result<Profile> {
    let raw;
    let data = if bytes.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        io::Read::read_to_end(&mut flate2::read::GzDecoder::new(bytes), &mut out)?;
        raw = out;
        &raw[..]
    } else {
        bytes
    };
    Profile::decode(data).map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))
}
