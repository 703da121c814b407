//! The session header: what was recorded and how (event, CPUs, times,
//! target, cgroup source), and its bytes. Layout in `docs/FORMAT.md`.

use serde::{Deserialize, Serialize};

use super::*;
use crate::codec::{push_bool, push_str, push_struct, push_uvar, BodyReader};
use crate::error::{Error, Result};
/// The sampled event, as configured.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct EventConfigDesc {
    /// Event name as the user wrote it (`cpu-clock`, `cycles`, `r1234`).
    pub name: String,
    /// `perf_event_attr.type`.
    pub type_: u32,
    /// `perf_event_attr.config`.
    pub config: u64,
    /// Sampling frequency in Hz, in frequency mode.
    pub frequency: Option<u64>,
    /// Sampling period, in period mode.
    pub period: Option<u64>,
    /// User mode excluded.
    pub exclude_user: bool,
    /// Kernel mode excluded.
    pub exclude_kernel: bool,
    /// Call chains requested.
    pub callchain: bool,
    /// Bytes of user stack copied per sample for DWARF unwinding
    /// (`--call-graph dwarf,SIZE`); 0: frame-pointer call chains or none.
    /// Header field appended in version 2, written only when not 0.
    pub user_stack: u32,
    /// Off-CPU intervals recorded (`--off-cpu`): the session holds
    /// `OffCpu` markers. Header field appended in version 5, written only
    /// when true (and then `user_stack` is written even when 0).
    pub off_cpu: bool,
    /// Samples carry their own time (format version 6: the timed sample
    /// tags `0x16`-`0x1B`). Header field appended in version 6, written
    /// only when true (and then `user_stack` and `off_cpu` are written
    /// even when 0 and false). False: every sample's time is its round's.
    pub sample_times: bool,
    /// The session may hold JIT code: `Jit` cookies (kind 6) and
    /// `JitCode` markers (tag `0x29`), format version 7. Header field
    /// appended in version 7, written only when true (and then
    /// `user_stack`, `off_cpu` and `sample_times` are written even when 0
    /// and false).
    pub jit_code: bool,
}

/// What the session file starts with.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct SessionHeader {
    /// Host name.
    pub host: String,
    /// `uname -r`.
    pub kernel_release: String,
    /// The sampled event.
    pub event: EventConfigDesc,
    /// The CPUs sampled.
    pub cpus: Vec<u32>,
    /// Wall-clock start time, ns since the Unix epoch.
    pub start_time_unix_ns: u64,
    /// Start time on perf's clock (CLOCK_MONOTONIC), which sample times use.
    pub start_monotonic_ns: u64,
    /// Sync round interval.
    pub sync_interval_ms: u32,
    /// What was profiled: `system-wide`, `pid 123`, `command ls -l`.
    pub target: String,
    /// How samples' cgroups were recorded (since version 4; absent, read
    /// as [`CgroupSource::None`], in sessions without cgroups).
    pub cgroups: CgroupSource,
    /// Which part of a rotated session this file is (`profctl start
    /// --rotate`); None for a session in one file. An appended field: older
    /// readers skip it.
    pub part: Option<PartInfo>,
}

/// The place of one file among the parts of a rotated session: each part
/// is a complete session of its own (header, chunks, footer), and the
/// parts of one session share its start.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PartInfo {
    /// The part's number, from 1, in the order written.
    pub number: u64,
    /// Round number of the part's first chunk (round numbers go on across
    /// parts).
    pub first_round: u64,
    /// The whole session's start, wall clock, ns since the epoch (the
    /// first part's `start_time_unix_ns`, even once that part is deleted).
    pub session_start_unix_ns: u64,
    /// The whole session's start on perf's clock.
    pub session_start_monotonic_ns: u64,
}

/// How a session recorded the cgroup of each sample (header field
/// `cgroups`, a `u8`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub enum CgroupSource {
    /// Not recorded (0; the field is not written).
    #[default]
    None,
    /// The kernel's `PERF_SAMPLE_CGROUP` per sample, paths from
    /// `PERF_RECORD_CGROUP` and the hierarchy at start (1).
    Sample,
    /// `/proc/PID/cgroup`, read once per process, on kernels without
    /// `PERF_SAMPLE_CGROUP` (2).
    Proc,
}

impl CgroupSource {
    /// The header's byte.
    pub fn code(self) -> u8 {
        match self {
            CgroupSource::None => 0,
            CgroupSource::Sample => 1,
            CgroupSource::Proc => 2,
        }
    }

    /// The source of a header byte; None for unknown values.
    pub fn from_code(c: u8) -> Option<Self> {
        Some(match c {
            0 => CgroupSource::None,
            1 => CgroupSource::Sample,
            2 => CgroupSource::Proc,
            _ => return None,
        })
    }
}

impl SessionHeader {
    /// The format version a session with this header is written in: 2 when
    /// call chains were requested (`event.callchain`: its chunks hold stack
    /// tags, which readers of version 1 cannot decode, so they must refuse
    /// the file up front), else 1 (readable by every build); higher
    /// versions for what later ones added, the highest first: 7 with JIT
    /// code (`event.jit_code`), 6 with sample times, 5 with off-CPU
    /// intervals, 4 with cgroups, 3 with DWARF call graphs.
    pub fn format_version(&self) -> u16 {
        if self.event.jit_code {
            7
        } else if self.event.sample_times {
            6
        } else if self.event.off_cpu {
            5
        } else if self.cgroups != CgroupSource::None {
            4
        } else if self.event.user_stack > 0 {
            3
        } else if self.event.callchain {
            2
        } else {
            1
        }
    }
}

// ---------------------------------------------------------------- bytes

/// The full header bytes: magic, version, body length, body, CRC.
pub(crate) fn encode_header(h: &SessionHeader) -> Result<Vec<u8>> {
    let mut body = Vec::new();
    push_str(&mut body, &h.host);
    push_str(&mut body, &h.kernel_release);
    push_struct(&mut body, |b| {
        let e = &h.event;
        push_str(b, &e.name);
        push_uvar(b, u64::from(e.type_));
        push_uvar(b, e.config);
        push_opt_u64(b, e.frequency);
        push_opt_u64(b, e.period);
        push_bool(b, e.exclude_user);
        push_bool(b, e.exclude_kernel);
        push_bool(b, e.callchain);
        if e.user_stack != 0 || e.off_cpu || e.sample_times || e.jit_code {
            push_uvar(b, u64::from(e.user_stack));
        }
        if e.off_cpu || e.sample_times || e.jit_code {
            push_bool(b, e.off_cpu);
        }
        if e.sample_times || e.jit_code {
            push_bool(b, e.sample_times);
        }
        if e.jit_code {
            push_bool(b, true);
        }
    });
    push_uvar(&mut body, h.cpus.len() as u64);
    for &c in &h.cpus {
        push_uvar(&mut body, u64::from(c));
    }
    push_uvar(&mut body, h.start_time_unix_ns);
    push_uvar(&mut body, h.start_monotonic_ns);
    push_uvar(&mut body, u64::from(h.sync_interval_ms));
    push_str(&mut body, &h.target);
    if h.cgroups != CgroupSource::None || h.part.is_some() {
        body.push(h.cgroups.code());
    }
    if let Some(p) = &h.part {
        push_struct(&mut body, |b| {
            push_uvar(b, p.number);
            push_uvar(b, p.first_round);
            push_uvar(b, p.session_start_unix_ns);
            push_uvar(b, p.session_start_monotonic_ns);
        });
    }
    if body.len() > MAX_BODY_LEN as usize {
        return Err(Error::BodyTooLarge {
            what: "header",
            len: body.len() as u64,
            max: MAX_BODY_LEN.into(),
        });
    }
    let mut out = Vec::with_capacity(HEADER_PREFIX_LEN + body.len() + 4);
    out.extend_from_slice(&FILE_MAGIC);
    out.extend_from_slice(&h.format_version().to_le_bytes());
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(&body);
    let crc = crc32fast::hash(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    Ok(out)
}

fn push_opt_u64(out: &mut Vec<u8>, v: Option<u64>) {
    match v {
        None => out.push(0),
        Some(x) => {
            out.push(1);
            push_uvar(out, x);
        }
    }
}

/// Checks magic and version of the first bytes, and returns how many bytes
/// the whole header takes. `data` may be just the first
/// [`HEADER_PREFIX_LEN`] bytes; `file_len` is the whole file's length.
pub(crate) fn header_extent(data: &[u8], file_len: u64, path: &Path) -> Result<(u16, usize)> {
    if file_len == 0 {
        return Err(Error::EmptyFile {
            path: path.to_path_buf(),
        });
    }
    let n = data.len().min(FILE_MAGIC.len());
    if data[..n] != FILE_MAGIC[..n] {
        return Err(Error::NotASession {
            path: path.to_path_buf(),
            found: data[..n].to_vec(),
        });
    }
    if data.len() < HEADER_PREFIX_LEN {
        return Err(Error::TruncatedHeader {
            path: path.to_path_buf(),
            len: file_len,
            needed: HEADER_PREFIX_LEN as u64,
        });
    }
    let version = u16::from_le_bytes([data[8], data[9]]);
    if !(MIN_READ_VERSION..=FORMAT_VERSION).contains(&version) {
        return Err(Error::UnsupportedVersion {
            path: path.to_path_buf(),
            found: version,
            min: MIN_READ_VERSION,
            max: FORMAT_VERSION,
        });
    }
    let body_len = u32::from_le_bytes([data[10], data[11], data[12], data[13]]);
    let needed = HEADER_PREFIX_LEN as u64 + u64::from(body_len) + 4;
    if body_len > MAX_BODY_LEN || needed > file_len {
        return Err(Error::TruncatedHeader {
            path: path.to_path_buf(),
            len: file_len,
            needed,
        });
    }
    Ok((version, needed as usize))
}

/// Reads and parses the header of the session file `f` (at its start,
/// `file_len` bytes long): its first [`HEADER_PREFIX_LEN`] bytes, then the
/// rest of the extent they give, and nothing more; returns the header, the
/// format version and its length. The one header read of the reader
/// ([`crate::read_header`]) and the appending writer.
pub(crate) fn read_header_from(
    mut f: impl std::io::Read,
    file_len: u64,
    path: &Path,
) -> Result<(SessionHeader, u16, usize)> {
    use std::io::Read;
    let read = |e| Error::io("read", path, e);
    let mut data = Vec::with_capacity(HEADER_PREFIX_LEN);
    (&mut f)
        .take(HEADER_PREFIX_LEN as u64)
        .read_to_end(&mut data)
        .map_err(read)?;
    let (_, extent) = header_extent(&data, file_len, path)?;
    (&mut f)
        .take((extent - data.len()) as u64)
        .read_to_end(&mut data)
        .map_err(read)?;
    parse_header(&data, path)
}

/// Parses the header at the start of `data` (which holds at least the
/// extent returned by [`header_extent`]).
pub(crate) fn parse_header(data: &[u8], path: &Path) -> Result<(SessionHeader, u16, usize)> {
    let (version, end) = header_extent(data, data.len() as u64, path)?;
    let crc_at = end - 4;
    let stored = u32::from_le_bytes([
        data[crc_at],
        data[crc_at + 1],
        data[crc_at + 2],
        data[crc_at + 3],
    ]);
    let computed = crc32fast::hash(&data[..crc_at]);
    if stored != computed {
        return Err(Error::HeaderCrc {
            path: path.to_path_buf(),
            stored,
            computed,
            end: crc_at as u64,
        });
    }
    let mut r = BodyReader::new(
        &data[HEADER_PREFIX_LEN..crc_at],
        HEADER_PREFIX_LEN as u64,
        "header",
    );
    let host = r.string("host")?;
    let kernel_release = r.string("kernel_release")?;
    let mut e = r.struct_body("event")?;
    let event = EventConfigDesc {
        name: e.string("event.name")?,
        type_: e.u32var("event.type_")?,
        config: e.uvar("event.config")?,
        frequency: e.option("event.frequency", |r| r.uvar("event.frequency"))?,
        period: e.option("event.period", |r| r.uvar("event.period"))?,
        exclude_user: e.bool("event.exclude_user")?,
        exclude_kernel: e.bool("event.exclude_kernel")?,
        callchain: e.bool("event.callchain")?,
        user_stack: if e.remaining() == 0 {
            0
        } else {
            e.u32var("event.user_stack")?
        },
        off_cpu: e.remaining() > 0 && e.bool("event.off_cpu")?,
        sample_times: e.remaining() > 0 && e.bool("event.sample_times")?,
        jit_code: e.remaining() > 0 && e.bool("event.jit_code")?,
    };
    // A header listing more CPUs than Linux can have is not believed: its
    // list is read past and left empty (the report then gives columns to
    // the CPUs with data). Kept, 16 M claimed CPUs cost 64 MB per part
    // (issue 25).
    let n = r.count("cpus", 1)?;
    let mut cpus = Vec::with_capacity(n.min(crate::MAX_HEADER_CPUS));
    for _ in 0..n {
        let cpu = r.u32var("cpus")?;
        if n <= crate::MAX_HEADER_CPUS {
            cpus.push(cpu);
        }
    }
    let header = SessionHeader {
        host,
        kernel_release,
        event,
        cpus,
        start_time_unix_ns: r.uvar("start_time_unix_ns")?,
        start_monotonic_ns: r.uvar("start_monotonic_ns")?,
        sync_interval_ms: r.u32var("sync_interval_ms")?,
        target: r.string("target")?,
        cgroups: if r.remaining() == 0 {
            CgroupSource::None
        } else {
            let at = r.offset();
            let c = r.u8("cgroups")?;
            CgroupSource::from_code(c).ok_or_else(|| {
                Error::malformed(
                    "header",
                    at,
                    format!("unknown cgroup source {c} (this build knows 0..=2)"),
                )
            })?
        },
        part: None,
    };
    let header = SessionHeader {
        part: if r.remaining() == 0 {
            None
        } else {
            let mut p = r.struct_body("part")?;
            Some(PartInfo {
                number: p.uvar("part.number")?,
                first_round: p.uvar("part.first_round")?,
                session_start_unix_ns: p.uvar("part.session_start_unix_ns")?,
                session_start_monotonic_ns: p.uvar("part.session_start_monotonic_ns")?,
            })
        },
        ..header
    };
    Ok((header, version, end))
}
