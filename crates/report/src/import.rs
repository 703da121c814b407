//! `profreport --import perf.data`: a `perf record` file turned into a
//! profkit session, so every report (flat, `-l`, `--separate`, call graphs,
//! folded stacks, flame graphs, pprof, `--diff`, `--merge`) works on it
//! unchanged.
//!
//! This is the sync stage's resolution done after the fact, on perf's
//! records in time order (linux-perf-data sorts them by round): a process
//! table built from `MMAP`/`MMAP2`, `COMM`, `FORK` records resolves every
//! sample and call-chain address to (binary, offset), exactly as profkit
//! records them:
//!
//! - user code: offset = `ip − start + pgoff` (the file offset); the
//!   binary's cookie comes from its build-id (the `MMAP2` record's, else
//!   perf's build-id table), else from device and inode, with the sync
//!   stage's hash, so an imported session and a recorded one name the same
//!   binary alike and merge;
//! - the kernel: perf's `[kernel.kallsyms]_text` mapping carries the
//!   address of `_text` in `pgoff`: offset = `ip − _text`; modules:
//!   offset from their load address; symbols come from kallsyms (the live
//!   one, or `--kallsyms`), as for a profkit session without a copy;
//! - anonymous (JIT) memory: the absolute address, owned by its process;
//! - an address in no mapping: the reserved `[unknown]` binary (perf
//!   reports these as `[unknown]` too), so totals match perf's;
//! - call chains: the sync stage's rules (the sampled ip is not a frame;
//!   an unresolvable frame becomes `[unknown]` and ends its user or kernel
//!   part; at most 256 frames), stacks stored once each.
//!
//! The result is written as an ordinary session file (chunks of 65 536
//! samples, a footer with per-CPU accounting: samples and `LOST` records).
//! perf.data has no wall-clock start: it is taken as the file's
//! modification time less the sampled time span.

use std::collections::{BTreeMap, HashMap};
use std::io::BufReader;
use std::path::{Path, PathBuf};

use linux_perf_data::linux_perf_event_reader::{
    CpuMode, Endianness, EventRecord, HardwareEventId, Mmap2FileId, Mmap2InodeAndVersion,
    PerfEventType, RecordType, SamplingPolicy, SoftwareCounterType,
};
use linux_perf_data::{DsoKey, PerfFileReader, PerfFileRecord};
use profkit_eventlog::{
    cookie_hash, ChunkEncoder, Cookie, CookieEntry, CookieKind, CpuAccounting, Event,
    EventConfigDesc, Frame, LostKind, SessionFooter, SessionHeader, SessionWriter, COOKIE_UNKNOWN,
};

use crate::error::{Error, Result};
use crate::load::SESSION_FILE;

/// Samples per chunk of the imported session.
const CHUNK_SAMPLES: u64 = 65_536;
/// Most caller frames kept per stack (as the sync stage).
const MAX_STACK_FRAMES: usize = 256;
const PERF_CONTEXT_MAX: u64 = -4095i64 as u64;
const PERF_CONTEXT_KERNEL: u64 = -128i64 as u64;
const PERF_CONTEXT_USER: u64 = -512i64 as u64;
const PROT_EXEC: u32 = 4;

/// What an import found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImportSummary {
    /// The session file written.
    pub session: PathBuf,
    /// Samples written.
    pub samples: u64,
    /// Samples whose address was in no known mapping (as `[unknown]`).
    pub unresolved: u64,
    /// Samples skipped: guest or hypervisor mode, or no ip.
    pub skipped: u64,
    /// Samples with a call stack.
    pub with_stack: u64,
    /// Distinct stacks.
    pub stacks: u64,
    /// Samples perf reported lost (`LOST` records).
    pub lost: u64,
    /// Records that could not be parsed.
    pub bad_records: u64,
}

#[derive(Clone, Copy, Debug)]
struct Map {
    start: u64,
    end: u64,
    pgoff: u64,
    cookie: Cookie,
    /// Offsets are absolute addresses (anonymous memory).
    absolute: bool,
}

impl Map {
    fn offset(&self, ip: u64) -> u64 {
        if self.absolute {
            ip
        } else {
            ip.wrapping_sub(self.start).wrapping_add(self.pgoff)
        }
    }
}

/// Mappings sorted by start, not overlapping.
#[derive(Clone, Debug, Default)]
struct Maps(Vec<Map>);

impl Maps {
    fn insert(&mut self, m: Map) {
        self.0.retain(|o| o.end <= m.start || o.start >= m.end);
        let at = self.0.partition_point(|o| o.start < m.start);
        self.0.insert(at, m);
    }

    fn resolve(&self, ip: u64) -> Option<(Cookie, u64)> {
        let i = self.0.partition_point(|m| m.start <= ip).checked_sub(1)?;
        let m = &self.0[i];
        (ip < m.end).then(|| (m.cookie, m.offset(ip)))
    }
}

struct Importer {
    build_ids: HashMap<DsoKey, Vec<u8>>,
    entries: HashMap<Cookie, CookieEntry>,
    defined: std::collections::HashSet<Cookie>,
    procs: HashMap<i32, Maps>,
    kernel: Maps,
    comms: HashMap<i32, String>,
    stacks: HashMap<Vec<Frame>, u32>,
    enc: ChunkEncoder,
    in_chunk: u64,
    chunk_time: u64,
    chunks: Vec<(u64, Vec<u8>)>,
    acct: BTreeMap<u32, CpuAccounting>,
    summary: ImportSummary,
    first_time: Option<u64>,
    last_time: u64,
    frames: Vec<Frame>,
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `ext4` from `/lib/modules/…/ext4.ko.xz` or `[ext4]`, with `-` as `_`
/// (kallsyms' spelling).
fn module_name(path: &str) -> String {
    let base = path.rsplit('/').next().unwrap_or(path);
    let base = base.trim_start_matches('[').trim_end_matches(']');
    let stem = base.split(".ko").next().unwrap_or(base);
    stem.replace('-', "_")
}

impl Importer {
    fn define(&mut self, cookie: Cookie) {
        if self.defined.insert(cookie) {
            if let Some(e) = self.entries.get(&cookie) {
                self.enc.event(&Event::CookieDef(e.clone()));
            }
        }
    }

    fn entry(&mut self, e: CookieEntry) -> Cookie {
        let c = e.cookie;
        self.entries.entry(c).or_insert(e);
        c
    }

    fn build_id(&self, path: &[u8], mode: CpuMode) -> Option<Vec<u8>> {
        let key = DsoKey::detect(path, mode)?;
        self.build_ids.get(&key).cloned()
    }

    #[allow(clippy::too_many_arguments)]
    fn mmap(
        &mut self,
        pid: i32,
        start: u64,
        len: u64,
        pgoff: u64,
        path: &[u8],
        mode: CpuMode,
        file_id: Option<&Mmap2FileId>,
        exec: bool,
    ) {
        if !exec || len == 0 {
            return;
        }
        let end = start.saturating_add(len);
        let p = lossy(path);
        let kernel_side = pid == -1 || matches!(mode, CpuMode::Kernel);
        if p.starts_with("[kernel.kallsyms]") {
            let build_id = self.build_id(path, CpuMode::Kernel);
            let cookie = match &build_id {
                Some(b) => cookie_hash("kernel-build-id", &[b]),
                None => cookie_hash("kernel", &[&pgoff.to_le_bytes()]),
            };
            let c = self.entry(CookieEntry {
                cookie,
                kind: CookieKind::Kernel,
                path: "[kernel.kallsyms]".into(),
                build_id,
                dev: 0,
                inode: 0,
                generation: 0,
                base: pgoff,
                pid: None,
            });
            // Offsets are from _text (pgoff), the mapping may start below.
            self.kernel.insert(Map {
                start,
                end,
                pgoff: start.wrapping_sub(pgoff),
                cookie: c,
                absolute: false,
            });
            return;
        }
        if kernel_side && pid == -1 {
            let name = module_name(&p);
            let build_id = self.build_id(path, CpuMode::Kernel);
            let cookie = match &build_id {
                Some(b) => cookie_hash("module-build-id", &[b]),
                None => cookie_hash("module", &[name.as_bytes(), &start.to_le_bytes()]),
            };
            let c = self.entry(CookieEntry {
                cookie,
                kind: CookieKind::Module,
                path: format!("[{name}]"),
                build_id,
                dev: 0,
                inode: 0,
                generation: 0,
                base: start,
                pid: None,
            });
            self.kernel.insert(Map {
                start,
                end,
                pgoff: 0,
                cookie: c,
                absolute: false,
            });
            return;
        }
        let anon = p == "//anon"
            || p.starts_with("[anon")
            || p.starts_with("/memfd:")
            || p.starts_with("/tmp/perf-")
            || p == "[heap]"
            || p == "[stack]";
        let (cookie, absolute) = if anon {
            let cookie = cookie_hash("anon", &[&(pid as u32).to_le_bytes()]);
            let c = self.entry(CookieEntry {
                cookie,
                kind: CookieKind::Anon,
                path: "//anon".into(),
                build_id: None,
                dev: 0,
                inode: 0,
                generation: 0,
                base: 0,
                pid: Some(pid as u32),
            });
            (c, true)
        } else if p == "[vdso]" {
            let build_id = self.build_id(path, CpuMode::User);
            let c = self.entry(CookieEntry {
                cookie: cookie_hash("vdso", &[]),
                kind: CookieKind::Vdso,
                path: p.clone(),
                build_id,
                dev: 0,
                inode: 0,
                generation: 0,
                base: 0,
                pid: None,
            });
            (c, false)
        } else if p.starts_with('[') {
            // [vsyscall], [uprobes]: nothing to name.
            return;
        } else {
            let (mut build_id, mut dev, mut inode, mut generation) = (None, 0, 0, 0);
            match file_id {
                Some(Mmap2FileId::BuildId(b)) if !b.is_empty() => build_id = Some(b.clone()),
                Some(Mmap2FileId::InodeAndVersion(i)) => {
                    dev = (u64::from(i.major) << 32) | u64::from(i.minor);
                    inode = i.inode;
                    generation = i.inode_generation;
                }
                _ => {}
            }
            if build_id.is_none() {
                build_id = self.build_id(path, CpuMode::User);
            }
            let cookie = match &build_id {
                Some(b) => cookie_hash("build-id", &[b]),
                None => cookie_hash(
                    "inode",
                    &[
                        &dev.to_le_bytes(),
                        &inode.to_le_bytes(),
                        &generation.to_le_bytes(),
                    ],
                ),
            };
            let c = self.entry(CookieEntry {
                cookie,
                kind: CookieKind::User,
                path: p.clone(),
                build_id,
                dev,
                inode,
                generation,
                base: 0,
                pid: None,
            });
            (c, false)
        };
        self.procs.entry(pid).or_default().insert(Map {
            start,
            end,
            pgoff,
            cookie,
            absolute,
        });
        if !anon {
            self.define(cookie);
            self.enc.event(&Event::ModuleLoad {
                cookie,
                start,
                end,
                pgoff,
                pid: Some(pid as u32),
            });
        }
    }

    fn resolve(&self, pid: i32, ip: u64, kernel: bool) -> Option<(Cookie, u64)> {
        if kernel {
            self.kernel.resolve(ip)
        } else {
            self.procs.get(&pid)?.resolve(ip)
        }
    }

    /// The sync stage's `resolve_chain`, on perf's callchain.
    fn chain(&mut self, pid: i32, ip: u64, kernel: bool, chain: impl Iterator<Item = u64>) {
        let mut out = std::mem::take(&mut self.frames);
        out.clear();
        let mut ctx_kernel = Some(kernel);
        let mut first = true;
        let mut cut = false;
        let mut unknown = false;
        let mut truncated = false;
        for addr in chain {
            if addr >= PERF_CONTEXT_MAX {
                ctx_kernel = match addr {
                    PERF_CONTEXT_KERNEL => Some(true),
                    PERF_CONTEXT_USER => Some(false),
                    _ => None,
                };
                cut = false;
                continue;
            }
            if std::mem::take(&mut first) && addr == ip {
                continue;
            }
            let Some(k) = ctx_kernel else { continue };
            if cut {
                continue;
            }
            if out.len() == MAX_STACK_FRAMES {
                truncated = true;
                break;
            }
            out.push(match self.resolve(pid, addr, k) {
                Some((cookie, offset)) => Frame {
                    cookie,
                    offset,
                    kernel: k,
                },
                None => {
                    unknown = true;
                    cut = true;
                    Frame {
                        cookie: COOKIE_UNKNOWN,
                        offset: 0,
                        kernel: k,
                    }
                }
            });
        }
        let _ = (unknown, truncated);
        self.frames = out;
    }

    fn flush(&mut self) {
        if self.in_chunk > 0 || !self.enc.is_empty() {
            self.chunks
                .push((self.chunk_time, self.enc.bytes().to_vec()));
            self.enc.clear();
            self.in_chunk = 0;
            // A new chunk decodes on its own, but cookie definitions are
            // session-wide: they stay defined.
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn sample(
        &mut self,
        cpu: u32,
        pid: i32,
        tid: i32,
        ip: u64,
        mode: CpuMode,
        time: Option<u64>,
        chain: Option<Vec<u64>>,
    ) {
        let acct = self.acct.entry(cpu).or_insert_with(|| CpuAccounting {
            cpu,
            ..Default::default()
        });
        acct.samples_received += 1;
        let kernel = match mode {
            CpuMode::Kernel => true,
            CpuMode::User => false,
            _ => {
                acct.records_skipped += 1;
                self.summary.skipped += 1;
                return;
            }
        };
        acct.samples_written += 1;
        if let Some(t) = time {
            self.first_time.get_or_insert(t);
            self.last_time = self.last_time.max(t);
            self.chunk_time = self.chunk_time.max(t);
        }
        let (cookie, offset) = match self.resolve(pid, ip, kernel) {
            Some(r) => r,
            None => {
                self.summary.unresolved += 1;
                self.entries
                    .entry(COOKIE_UNKNOWN)
                    .or_insert_with(unknown_entry);
                (COOKIE_UNKNOWN, 0)
            }
        };
        let mut stack = None;
        if let Some(chain) = chain {
            self.chain(pid, ip, kernel, chain.into_iter());
            let mut unknown = false;
            for i in 0..self.frames.len() {
                let c = self.frames[i].cookie;
                if c == COOKIE_UNKNOWN {
                    unknown = true;
                    self.entries
                        .entry(COOKIE_UNKNOWN)
                        .or_insert_with(unknown_entry);
                }
                self.define(c);
            }
            if unknown {
                if let Some(a) = self.acct.get_mut(&cpu) {
                    a.stacks_unknown += 1;
                }
            }
            if !self.frames.is_empty() {
                let next = self.stacks.len() as u32;
                let id = match self.stacks.get(&self.frames) {
                    Some(&id) => id,
                    None => {
                        self.stacks.insert(self.frames.clone(), next);
                        self.enc.event(&Event::StackDef {
                            id: next,
                            frames: self.frames.clone(),
                        });
                        next
                    }
                };
                stack = Some(id);
                self.summary.with_stack += 1;
            }
        }
        self.define(cookie);
        let (pid, tid) = (pid as u32, tid as u32);
        match stack {
            Some(id) => self
                .enc
                .sample_with_stack(cpu, pid, tid, kernel, cookie, offset, id),
            None => self.enc.sample(cpu, pid, tid, kernel, cookie, offset),
        }
        self.summary.samples += 1;
        self.in_chunk += 1;
        if self.in_chunk >= CHUNK_SAMPLES {
            self.flush();
        }
    }
}

fn unknown_entry() -> CookieEntry {
    CookieEntry {
        cookie: COOKIE_UNKNOWN,
        kind: CookieKind::Other,
        path: "[unknown]".into(),
        build_id: None,
        dev: 0,
        inode: 0,
        generation: 0,
        base: 0,
        pid: None,
    }
}

/// An `MMAP2` record, read here rather than by linux-perf-event-reader:
/// its parser asserts (panics) on a build-id length over 20, and a 6.18
/// kernel was seen setting the build-id bit of `misc` on records that
/// carry device and inode (while another event with `build_id` was open).
/// A "build-id" longer than 20 bytes is taken as the inode form.
struct Mmap2 {
    pid: i32,
    start: u64,
    len: u64,
    pgoff: u64,
    file_id: Mmap2FileId,
    prot: u32,
    path: Vec<u8>,
}

fn parse_mmap2(b: &[u8], misc: u16, little: bool) -> Option<Mmap2> {
    let u32_at = |o: usize| -> Option<u32> {
        let a: [u8; 4] = b.get(o..o + 4)?.try_into().ok()?;
        Some(if little {
            u32::from_le_bytes(a)
        } else {
            u32::from_be_bytes(a)
        })
    };
    let u64_at = |o: usize| -> Option<u64> {
        let a: [u8; 8] = b.get(o..o + 8)?.try_into().ok()?;
        Some(if little {
            u64::from_le_bytes(a)
        } else {
            u64::from_be_bytes(a)
        })
    };
    const MISC_MMAP_BUILD_ID: u16 = 1 << 14;
    let size = *b.get(32)? as usize;
    let file_id = if misc & MISC_MMAP_BUILD_ID != 0 && size <= 20 {
        Mmap2FileId::BuildId(b.get(36..36 + size)?.to_vec())
    } else {
        Mmap2FileId::InodeAndVersion(Mmap2InodeAndVersion {
            major: u32_at(32)?,
            minor: u32_at(36)?,
            inode: u64_at(40)?,
            inode_generation: u64_at(48)?,
        })
    };
    let name = b.get(64..)?;
    let path = name[..memchr::memchr(0, name).unwrap_or(name.len())].to_vec();
    Some(Mmap2 {
        pid: u32_at(0)? as i32,
        start: u64_at(8)?,
        len: u64_at(16)?,
        pgoff: u64_at(24)?,
        file_id,
        prot: u32_at(56)?,
        path,
    })
}

fn event_desc(attr: &linux_perf_data::AttributeDescription) -> EventConfigDesc {
    let a = attr.attributes();
    let (type_, config, default_name) = match a.type_ {
        PerfEventType::Software(c) => {
            let (n, name) = match c {
                SoftwareCounterType::CpuClock => (0, "cpu-clock"),
                SoftwareCounterType::TaskClock => (1, "task-clock"),
                SoftwareCounterType::PageFaults => (2, "page-faults"),
                SoftwareCounterType::ContextSwitches => (3, "context-switches"),
                SoftwareCounterType::CpuMigrations => (4, "cpu-migrations"),
                _ => (u64::MAX, "software"),
            };
            (1, n, name.to_owned())
        }
        PerfEventType::Hardware(h, _) => {
            let (n, name) = match h {
                HardwareEventId::CpuCycles => (0, "cycles"),
                HardwareEventId::Instructions => (1, "instructions"),
                HardwareEventId::CacheReferences => (2, "cache-references"),
                HardwareEventId::CacheMisses => (3, "cache-misses"),
                HardwareEventId::BranchInstructions => (4, "branch-instructions"),
                HardwareEventId::BranchMisses => (5, "branch-misses"),
                _ => (u64::MAX, "hardware"),
            };
            (0, n, name.to_owned())
        }
        PerfEventType::Tracepoint(id) => (2, id, format!("tracepoint:{id}")),
        ref other => (u32::MAX, 0, format!("{other:?}")),
    };
    let (frequency, period) = match a.sampling_policy {
        SamplingPolicy::Frequency(f) => (Some(f), None),
        SamplingPolicy::Period(p) => (None, Some(p.get())),
        SamplingPolicy::NoSampling => (None, None),
    };
    EventConfigDesc {
        name: attr.name().map_or(default_name, |n| {
            // perf writes "cpu-clock:u" / "cycles:ppp" for modifiers.
            n.split(':').next().unwrap_or(n).to_owned()
        }),
        type_,
        config,
        frequency,
        period,
        exclude_user: a
            .flags
            .contains(linux_perf_data::linux_perf_event_reader::AttrFlags::EXCLUDE_USER),
        exclude_kernel: a
            .flags
            .contains(linux_perf_data::linux_perf_event_reader::AttrFlags::EXCLUDE_KERNEL),
        callchain: a
            .sample_format
            .contains(linux_perf_data::linux_perf_event_reader::SampleFormat::CALLCHAIN),
    }
}

fn import_error(path: &Path, message: impl std::fmt::Display) -> Error {
    Error::Import {
        path: path.to_path_buf(),
        message: message.to_string(),
    }
}

/// Reads `perf_data` (a file written by `perf record`) and writes it as a
/// profkit session in `dir` (`dir/session.pkl`, which must not exist).
///
/// # Errors
/// [`Error::Import`] when the file cannot be read or is not a perf.data
/// file (pipe-mode output and compressed (`-z`) records are not read);
/// [`Error::Session`] when the session cannot be written.
pub fn import_perf_data(perf_data: &Path, dir: &Path) -> Result<ImportSummary> {
    let file = std::fs::File::open(perf_data).map_err(|e| import_error(perf_data, e))?;
    let mtime_unix_ns = file
        .metadata()
        .ok()
        .and_then(|m| m.modified().ok())
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos() as u64);
    let PerfFileReader {
        mut perf_file,
        mut record_iter,
    } = PerfFileReader::parse_file(BufReader::new(file))
        .map_err(|e| import_error(perf_data, format!("not a perf.data file: {e}")))?;
    let attrs = perf_file.event_attributes();
    let event = attrs.first().map(event_desc).unwrap_or_default();
    if attrs.len() > 1 {
        // Samples of every event are imported as the first one's.
    }
    let build_ids: HashMap<DsoKey, Vec<u8>> = perf_file
        .build_ids()
        .unwrap_or_default()
        .into_iter()
        .map(|(k, v)| (k, v.build_id))
        .collect();
    let host = perf_file.hostname().ok().flatten().unwrap_or("").to_owned();
    let kernel_release = perf_file
        .os_release()
        .ok()
        .flatten()
        .unwrap_or("")
        .to_owned();
    let cmdline = perf_file
        .cmdline()
        .ok()
        .flatten()
        .map(|v| v.join(" "))
        .unwrap_or_default();
    let online = perf_file
        .nr_cpus()
        .ok()
        .flatten()
        .map_or(0, |n| n.nr_cpus_online);

    let mut imp = Importer {
        build_ids,
        entries: HashMap::new(),
        defined: Default::default(),
        procs: HashMap::new(),
        kernel: Maps::default(),
        comms: HashMap::new(),
        stacks: HashMap::new(),
        enc: ChunkEncoder::new(),
        in_chunk: 0,
        chunk_time: 0,
        chunks: Vec::new(),
        acct: BTreeMap::new(),
        summary: ImportSummary::default(),
        first_time: None,
        last_time: 0,
        frames: Vec::new(),
    };
    loop {
        let record = match record_iter.next_record(&mut perf_file) {
            Ok(Some(r)) => r,
            Ok(None) => break,
            Err(e) => {
                // A truncated file (perf killed): keep what was read.
                imp.summary.bad_records += 1;
                let _ = e;
                break;
            }
        };
        let PerfFileRecord::EventRecord { record, .. } = record else {
            continue;
        };
        let common = record.common_data().ok();
        if record.record_type == RecordType::MMAP2 {
            let little = record.parse_info.endian == Endianness::LittleEndian;
            match parse_mmap2(&record.data.as_slice(), record.misc, little) {
                Some(m) => imp.mmap(
                    m.pid,
                    m.start,
                    m.len,
                    m.pgoff,
                    &m.path,
                    CpuMode::from_misc(record.misc),
                    Some(&m.file_id),
                    m.prot & PROT_EXEC != 0,
                ),
                None => imp.summary.bad_records += 1,
            }
            continue;
        }
        // The parser asserts on some malformed input: a panic there is a
        // bad record, not a failed report.
        let parsed = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| record.parse()))
        {
            Ok(Ok(p)) => p,
            _ => {
                imp.summary.bad_records += 1;
                continue;
            }
        };
        match parsed {
            EventRecord::Sample(s) => {
                let (Some(ip), Some(pid), Some(tid)) = (s.ip, s.pid, s.tid) else {
                    imp.summary.skipped += 1;
                    continue;
                };
                let chain = s
                    .callchain
                    .as_ref()
                    .map(|c| (0..c.len()).filter_map(|i| c.get(i)).collect::<Vec<u64>>());
                imp.sample(
                    s.cpu.unwrap_or(0),
                    pid,
                    tid,
                    ip,
                    s.cpu_mode,
                    s.timestamp,
                    chain,
                );
            }
            EventRecord::Mmap(m) => {
                let path = m.path.as_slice();
                imp.mmap(
                    m.pid,
                    m.address,
                    m.length,
                    m.page_offset,
                    &path,
                    m.cpu_mode,
                    None,
                    m.is_executable,
                );
            }
            EventRecord::Comm(c) => {
                let name = lossy(&c.name.as_slice());
                if c.is_execve && c.pid == c.tid {
                    // exec replaces the address space; mappings follow.
                    imp.procs.remove(&c.pid);
                }
                imp.comms.insert(c.tid, name.clone());
                imp.enc.event(&Event::Comm {
                    pid: c.pid as u32,
                    tid: c.tid as u32,
                    comm: name,
                    exec: c.is_execve,
                });
            }
            EventRecord::Fork(f) => {
                if f.pid != f.ppid {
                    if let Some(maps) = imp.procs.get(&f.ppid).cloned() {
                        imp.procs.insert(f.pid, maps);
                    }
                }
                if let Some(name) = imp.comms.get(&f.ptid).cloned() {
                    imp.comms.insert(f.tid, name.clone());
                    imp.enc.event(&Event::Comm {
                        pid: f.pid as u32,
                        tid: f.tid as u32,
                        comm: name,
                        exec: false,
                    });
                }
            }
            EventRecord::Lost(l) => {
                let cpu = common.and_then(|c| c.cpu).unwrap_or(0);
                imp.summary.lost += l.count;
                imp.acct
                    .entry(cpu)
                    .or_insert_with(|| CpuAccounting {
                        cpu,
                        ..Default::default()
                    })
                    .lost_ring += l.count;
                imp.enc.event(&Event::Lost {
                    cpu,
                    kind: LostKind::Ring,
                    count: l.count,
                });
            }
            EventRecord::Throttle(t) | EventRecord::Unthrottle(t) => {
                let cpu = common.and_then(|c| c.cpu).unwrap_or(0);
                imp.acct
                    .entry(cpu)
                    .or_insert_with(|| CpuAccounting {
                        cpu,
                        ..Default::default()
                    })
                    .throttle_events += 1;
                let _ = t;
            }
            _ => {}
        }
    }
    imp.flush();
    imp.summary.stacks = imp.stacks.len() as u64;

    let first = imp.first_time.unwrap_or(0);
    let span = imp.last_time.saturating_sub(first);
    let mut cpus: Vec<u32> = imp.acct.keys().copied().collect();
    for c in 0..online {
        if !cpus.contains(&c) {
            cpus.push(c);
        }
    }
    cpus.sort_unstable();
    let header = SessionHeader {
        host,
        kernel_release,
        event,
        cpus,
        start_time_unix_ns: mtime_unix_ns.saturating_sub(span),
        start_monotonic_ns: first,
        sync_interval_ms: 0,
        target: if cmdline.is_empty() {
            format!("perf.data {}", perf_data.display())
        } else {
            format!("perf.data {} ({cmdline})", perf_data.display())
        },
    };
    std::fs::create_dir_all(dir).map_err(|e| import_error(dir, e))?;
    let path = dir.join(SESSION_FILE);
    let mut w = SessionWriter::create(&path, &header)?;
    let rounds = imp.chunks.len() as u64;
    for (round, (time, bytes)) in imp.chunks.iter().enumerate() {
        w.append_chunk(round as u64, (*time).max(first), bytes)?;
    }
    w.write_footer(&SessionFooter {
        end_time_unix_ns: mtime_unix_ns,
        end_monotonic_ns: imp.last_time,
        rounds,
        accounting: imp.acct.into_values().collect(),
    })?;
    imp.summary.session = path;
    Ok(imp.summary)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn module_names_are_kallsyms_names() {
        assert_eq!(
            module_name("/lib/modules/6.1/kernel/fs/ext4/ext4.ko.xz"),
            "ext4"
        );
        assert_eq!(module_name("[snd-seq-device]"), "snd_seq_device");
    }

    #[test]
    fn mappings_replace_what_they_overlap() {
        let mut m = Maps::default();
        let map = |start, end, cookie| Map {
            start,
            end,
            pgoff: 0x1000,
            cookie,
            absolute: false,
        };
        m.insert(map(0x1000, 0x3000, 1));
        m.insert(map(0x5000, 0x6000, 2));
        assert_eq!(m.resolve(0x1010), Some((1, 0x1010)));
        assert_eq!(m.resolve(0x4000), None);
        m.insert(map(0x2000, 0x5800, 3));
        assert_eq!(m.resolve(0x1010), None);
        assert_eq!(m.resolve(0x5010), Some((3, 0x4010)));
        assert_eq!(m.resolve(0x5900), None);
    }

    #[test]
    fn a_file_that_is_not_perf_data_is_an_import_error() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("x");
        std::fs::write(&f, b"not perf data at all, not at all").unwrap();
        let e = import_perf_data(&f, &d.path().join("s")).unwrap_err();
        assert!(e.to_string().contains("not a perf.data file"), "{e}");
    }
}
