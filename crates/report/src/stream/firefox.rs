//! `--format firefox`: the Firefox Profiler's processed profile format,
//! written with `fxprof-processed-profile` (samply's crate), for
//! <https://profiler.firefox.com> ("Load a profile from file").
//!
//! - One process per pid, one thread track per thread (the stream's names:
//!   a process is named by its main thread), each thread's samples in time
//!   order, each of weight 1 with a CPU delta of the sample's period for a
//!   time event (`cpu-clock`, `task-clock`; the nominal interval otherwise).
//! - Frames named by our own symbolization: every binary is a library
//!   (path, name, its GNU build-id as code id and, as samply does, its first
//!   16 bytes as the Breakpad debug id) whose symbol table holds the names
//!   of the frames the samples met, at their relative addresses (a user
//!   binary's file offsets; a kernel image's offsets from its lowest sampled
//!   one), so the call tree shows each function with its library, and the
//!   profile is marked symbolicated (the profiler asks no symbol server).
//!   A frame whose address does not fit the format's 32-bit relative
//!   addresses is a label `symbol (image)`.
//! - Off-CPU time (sessions recorded with `--off-cpu`): interval markers
//!   on the task's track, category "Off-CPU", named "Blocked (off-CPU)" or
//!   "Runnable (off-CPU)", one per aggregated record of the stream (a
//!   task's intervals of one kind and switch-out stack ended in one sync
//!   round): drawn ending at the round's time and as long as their sum,
//!   with their count and the switch-out stack. Markers, not samples, so
//!   the samples stay what the report counts.
//! - Session events: sync rounds that lost samples (per CPU, with the
//!   count and why) and the start of each part of a rotated session, as
//!   instant markers on a track "session events" of a process "profkit".
//! - `--separate=cpu`: one track per CPU instead (a process `CPU n` each),
//!   every stack rooted in a frame naming its task, `comm (pid/tid)`.
//! - `--merge`: each session's threads are processes of their own (the
//!   crate makes a pid met again unique, `1234.1`), each session's times
//!   counted from its own start (the sessions' clocks need not be
//!   comparable: other machines, other boots).
//!
//! # Memory
//!
//! The profile lives in memory until the end (the format indexes stacks
//! per thread). While reading, a sample costs 24 bytes (its time, its CPU
//! delta and a node of one stack prefix tree shared by all threads), each
//! distinct frame and stack once; the profile is then built thread by
//! thread, each thread's samples freed once added, and serialized straight
//! to the output.

use std::collections::HashMap;
use std::io::{self, Write};
use std::sync::Arc;

use fxprof_processed_profile::{
    debugid::DebugId, CategoryColor, CategoryHandle, CpuDelta, Frame, FrameFlags, FrameInfo,
    LibraryInfo, MarkerFieldFlags, MarkerFieldFormat, MarkerTiming, Profile, ReferenceTimestamp,
    SamplingInterval, StackHandle, StaticSchemaMarker, StaticSchemaMarkerField, StringHandle,
    Symbol, SymbolTable, Timestamp,
};
use profkit_eventlog::{LostKind, OffCpuKind};

use crate::hash::FxHashMap;
use crate::{Progress, ReportOptions, Session, SymbolSources};

use super::speedscope::{dense, thread_label, StackTrie, ROOT};
use super::{
    stream, FrameId, FrameTable, ImageId, StreamInfo, StreamMarker, StreamOffCpu, StreamSample,
    StreamSink, StreamSummary, SymbolId,
};

/// Writes `sessions` as a Firefox Profiler profile (processed format, JSON)
/// to `out` (`profreport --format firefox`), with the report's specs,
/// `--time`, `--merge` and parts.
///
/// # Errors
/// As [`stream`]; a write error is [`crate::Error::Output`].
pub fn write_firefox(
    sessions: &[Session],
    opts: &ReportOptions,
    sources: &SymbolSources,
    progress: &dyn Progress,
    out: &mut dyn Write,
) -> crate::Result<StreamSummary> {
    let mut sink = Firefox::new(io::BufWriter::with_capacity(1 << 16, out), opts);
    sink.starts = sessions.iter().map(|s| s.start().0).collect();
    stream(sessions, opts, sources, progress, &mut sink)
}

/// What one of our frame indices stands for.
enum FrameMeta {
    /// Code in a binary: its offset as the stream gives it, its name.
    Code {
        lib: u32,
        offset: u64,
        /// Named at return address − 1 (a caller).
        return_address: bool,
        kernel: bool,
        /// Our symbol index.
        symbol: Option<u32>,
    },
    /// A frame of our own (the task under `--separate=cpu`).
    Label(String),
}

/// A binary the stream met.
struct Lib {
    name: String,
    path: String,
    build_id: Option<String>,
    kernel: bool,
}

/// One sample as kept until the end.
struct Sample {
    time_ns: u64,
    cpu_delta_ns: u64,
    node: u32,
}

/// One aggregated off-CPU record as kept until the end.
struct OffCpu {
    time_ns: u64,
    total_ns: u64,
    count: u64,
    blocked: bool,
    node: u32,
}

/// A track: a thread, or a CPU, of one session (`--merge`).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum TrackKey {
    Thread { session: u32, pid: u32, tid: u32 },
    Cpu { session: u32, cpu: u32 },
}

impl TrackKey {
    /// The key of the track's process.
    fn process(self) -> TrackKey {
        match self {
            TrackKey::Thread { session, pid, .. } => TrackKey::Thread {
                session,
                pid,
                tid: pid,
            },
            k @ TrackKey::Cpu { .. } => k,
        }
    }
}

/// A thread's (or CPU's) samples and markers.
struct Track {
    key: TrackKey,
    name: String,
    process_name: String,
    first_ns: u64,
    samples: Vec<Sample>,
    off_cpu: Vec<OffCpu>,
}

/// A marker of the whole session.
enum SessionEvent {
    Lost {
        time_ns: u64,
        cpu: u32,
        kind: LostKind,
        count: u64,
    },
    PartStart {
        time_ns: u64,
        number: u64,
        path: String,
    },
}

/// The Firefox sink: gathers the stream, builds the profile and writes it
/// at the end ([`write_firefox`] drives it).
pub struct Firefox<W: Write> {
    out: W,
    event: String,
    /// A time event's period in ns: each sample's CPU delta.
    period_ns: Option<u64>,
    /// The nominal time between samples, ns.
    interval_ns: u64,
    /// The first session's start, CLOCK_MONOTONIC ns.
    start_ns: u64,
    start_unix_ns: u64,
    /// Each session's start, CLOCK_MONOTONIC ns (`--merge`).
    starts: Vec<u64>,
    by_cpu: bool,
    frames: Vec<FrameMeta>,
    frame_ids: FxHashMap<FrameId, u32>,
    /// Keyed by names from the session, so not the Fx hasher.
    labels: HashMap<String, u32>,
    symbols: Vec<String>,
    symbol_ids: FxHashMap<SymbolId, u32>,
    libs: Vec<Lib>,
    lib_ids: FxHashMap<ImageId, u32>,
    trie: StackTrie,
    tracks: Vec<Track>,
    track_ids: FxHashMap<TrackKey, usize>,
    session: Vec<SessionEvent>,
}

impl<W: Write> Firefox<W> {
    /// A sink writing to `out`, honouring `opts.separate.cpu`.
    pub fn new(out: W, opts: &ReportOptions) -> Self {
        Self {
            out,
            event: String::new(),
            period_ns: None,
            interval_ns: 1_000_000,
            start_ns: 0,
            start_unix_ns: 0,
            starts: Vec::new(),
            by_cpu: opts.separate.cpu,
            frames: Vec::new(),
            frame_ids: FxHashMap::default(),
            labels: HashMap::new(),
            symbols: Vec::new(),
            symbol_ids: FxHashMap::default(),
            libs: Vec::new(),
            lib_ids: FxHashMap::default(),
            trie: StackTrie::default(),
            tracks: Vec::new(),
            track_ids: FxHashMap::default(),
            session: Vec::new(),
        }
    }

    /// Our index of the stream's frame `id`, its binary and symbol copied
    /// the first time.
    fn frame(&mut self, table: &FrameTable, id: FrameId) -> io::Result<u32> {
        if let Some(&i) = self.frame_ids.get(&id) {
            return Ok(i);
        }
        let i = dense(self.frames.len(), "frames")?;
        let f = table.frame(id);
        let lib = match self.lib_ids.get(&f.image) {
            Some(&l) => l,
            None => {
                let l = dense(self.libs.len(), "binaries")?;
                let image = table.image(f.image);
                self.libs.push(Lib {
                    name: image.name.clone(),
                    path: image.path.clone(),
                    build_id: image.build_id.clone(),
                    kernel: image.kernel,
                });
                self.lib_ids.insert(f.image, l);
                l
            }
        };
        let symbol = match f.symbol {
            Some(s) => Some(match self.symbol_ids.get(&s) {
                Some(&ours) => ours,
                None => {
                    let ours = dense(self.symbols.len(), "symbols")?;
                    self.symbols.push(table.symbol(s).name.clone());
                    self.symbol_ids.insert(s, ours);
                    ours
                }
            }),
            None => None,
        };
        self.frames.push(FrameMeta::Code {
            lib,
            offset: f.offset,
            return_address: f.return_address,
            kernel: f.kernel,
            symbol,
        });
        self.frame_ids.insert(id, i);
        Ok(i)
    }

    fn label(&mut self, label: &str) -> io::Result<u32> {
        if let Some(&i) = self.labels.get(label) {
            return Ok(i);
        }
        let i = dense(self.frames.len(), "frames")?;
        self.frames.push(FrameMeta::Label(label.to_owned()));
        self.labels.insert(label.to_owned(), i);
        Ok(i)
    }

    /// The track and stack node of an item: `frames` innermost first, under
    /// the task's frame per CPU.
    #[allow(clippy::too_many_arguments)]
    fn place(
        &mut self,
        (session, cpu, pid, tid): (u32, u32, u32, u32),
        comm: &str,
        process: &str,
        time_ns: u64,
        table: &FrameTable,
        frames: &[FrameId],
    ) -> io::Result<(usize, u32)> {
        let key = if self.by_cpu {
            TrackKey::Cpu { session, cpu }
        } else {
            TrackKey::Thread { session, pid, tid }
        };
        let mut node = ROOT;
        if self.by_cpu {
            let f = self.label(&thread_label(comm, pid, tid))?;
            node = self.trie.child(node, f)?;
        }
        for &id in frames.iter().rev() {
            let f = self.frame(table, id)?;
            node = self.trie.child(node, f)?;
        }
        let tracks = &mut self.tracks;
        let t = *self.track_ids.entry(key).or_insert_with(|| {
            let name = match key {
                TrackKey::Cpu { cpu, .. } => format!("CPU {cpu}"),
                TrackKey::Thread { .. } => comm.to_owned(),
            };
            tracks.push(Track {
                key,
                process_name: match key {
                    TrackKey::Cpu { .. } => name.clone(),
                    TrackKey::Thread { .. } => process.to_owned(),
                },
                name,
                first_ns: time_ns,
                samples: Vec::new(),
                off_cpu: Vec::new(),
            });
            tracks.len() - 1
        });
        let track = &mut self.tracks[t];
        track.first_ns = track.first_ns.min(time_ns);
        if let TrackKey::Thread { .. } = key {
            // The latest names win (a thread renamed by exec).
            if track.name != comm {
                comm.clone_into(&mut track.name);
            }
            if track.process_name != process {
                process.clone_into(&mut track.process_name);
            }
        }
        Ok((t, node))
    }

    /// A stream time as kept: ns since its session's start (merged
    /// sessions need not share a clock: each starts at 0).
    fn rel(&self, session: u32, time_ns: u64) -> u64 {
        let start = self.starts.get(session as usize).copied();
        time_ns.saturating_sub(start.unwrap_or(self.start_ns))
    }

    /// Builds the profile and writes it.
    fn finish(&mut self) -> io::Result<()> {
        let mut profile = Profile::new(
            &format!("profkit: {}", self.event),
            ReferenceTimestamp::from_millis_since_unix_epoch(self.start_unix_ns as f64 / 1e6),
            SamplingInterval::from_nanos(self.interval_ns.max(1)),
        );
        profile.set_os_name("Linux");
        profile.set_symbolicated(true);
        let user = profile.add_category("User", CategoryColor::Yellow);
        let kernel = profile.add_category("Kernel", CategoryColor::Orange);
        let off_cpu = profile.add_category("Off-CPU", CategoryColor::Blue);
        let other = CategoryHandle::OTHER;

        // Relative addresses: a user binary's file offsets as they are; a
        // kernel image's from its lowest sampled offset (so they fit 32 bits).
        let mut bases: Vec<u64> = self
            .libs
            .iter()
            .map(|l| if l.kernel { u64::MAX } else { 0 })
            .collect();
        for f in &self.frames {
            if let FrameMeta::Code { lib, offset, .. } = *f {
                let b = &mut bases[lib as usize];
                *b = (*b).min(offset);
            }
        }
        let rva = |lib: u32, offset: u64| -> Option<u32> {
            u32::try_from(offset.checked_sub(bases[lib as usize])?).ok()
        };
        // Each frame's name at the address the profile looks it up at
        // (a caller's return address − 1): exact, whatever the symbol's
        // extent; the profile's functions are (name, library) pairs.
        let mut tables: Vec<Vec<Symbol>> = self.libs.iter().map(|_| Vec::new()).collect();
        for f in &self.frames {
            if let FrameMeta::Code {
                lib,
                offset,
                return_address,
                symbol: Some(s),
                ..
            } = *f
            {
                if let Some(r) = rva(lib, offset) {
                    tables[lib as usize].push(Symbol {
                        address: r.saturating_sub(u32::from(return_address)),
                        size: Some(1),
                        name: self.symbols[s as usize].clone(),
                    });
                }
            }
        }
        let libs: Vec<_> = self
            .libs
            .iter()
            .zip(tables)
            .map(|(lib, symbols)| {
                let build_id = lib.build_id.as_deref().and_then(unhex);
                profile.add_lib(LibraryInfo {
                    name: lib.name.clone(),
                    debug_name: lib.name.clone(),
                    path: lib.path.clone(),
                    debug_path: lib.path.clone(),
                    debug_id: build_id.as_deref().map_or_else(DebugId::nil, debug_id),
                    code_id: build_id.is_some().then(|| lib.build_id.clone()).flatten(),
                    arch: None,
                    symbol_table: Some(Arc::new(SymbolTable::new(symbols))),
                })
            })
            .collect();
        let frame_info = |profile: &mut Profile, f: &FrameMeta| -> FrameInfo {
            let (frame, category) = match *f {
                FrameMeta::Code {
                    lib,
                    offset,
                    return_address,
                    kernel: k,
                    symbol,
                } => {
                    let frame = match rva(lib, offset) {
                        Some(r) if return_address => {
                            Frame::RelativeAddressFromReturnAddress(libs[lib as usize], r)
                        }
                        Some(r) => {
                            Frame::RelativeAddressFromInstructionPointer(libs[lib as usize], r)
                        }
                        None => {
                            let image = &self.libs[lib as usize].name;
                            let label = match symbol {
                                Some(s) => format!("{} ({image})", self.symbols[s as usize]),
                                None => format!("{image}+{offset:#x}"),
                            };
                            Frame::Label(profile.intern_string(&label))
                        }
                    };
                    (frame, if k { kernel } else { user })
                }
                FrameMeta::Label(ref label) => (Frame::Label(profile.intern_string(label)), other),
            };
            FrameInfo {
                frame,
                category_pair: category.into(),
                flags: FrameFlags::empty(),
            }
        };

        // Processes and threads, in order of their first item.
        let mut order: Vec<usize> = (0..self.tracks.len()).collect();
        order.sort_by_key(|&t| (self.tracks[t].first_ns, t));
        let mut processes = FxHashMap::default();
        let mut threads = Vec::with_capacity(order.len());
        for &t in &order {
            let track = &self.tracks[t];
            let start = Timestamp::from_nanos_since_reference(track.first_ns);
            let (pid, tid) = match track.key {
                TrackKey::Thread { pid, tid, .. } => (pid, tid),
                TrackKey::Cpu { cpu, .. } => (cpu, cpu),
            };
            let process = *processes
                .entry(track.key.process())
                .or_insert_with(|| profile.add_process(&track.process_name, pid, start));
            let thread = profile.add_thread(process, tid, start, pid == tid);
            profile.set_thread_name(thread, &track.name);
            if track.key == track.key.process() {
                // A process is named by its main thread.
                profile.set_process_name(process, &track.process_name);
            }
            threads.push((t, thread));
        }

        let off_cpu_names = [
            profile.intern_string("Blocked (off-CPU)"),
            profile.intern_string("Runnable (off-CPU)"),
        ];
        let off_cpu_kinds = [
            profile.intern_string("blocked"),
            profile.intern_string("runnable"),
        ];
        let mut memo: FxHashMap<u32, StackHandle> = FxHashMap::default();
        let mut path = Vec::new();
        for (t, thread) in threads {
            memo.clear();
            let samples = std::mem::take(&mut self.tracks[t].samples);
            let off = std::mem::take(&mut self.tracks[t].off_cpu);
            // A node's stack handle in this thread, interned from the first
            // node this thread already has.
            let mut stack_of = |profile: &mut Profile, node: u32| -> Option<StackHandle> {
                path.clear();
                let mut n = node;
                let mut parent = None;
                while n != ROOT {
                    if let Some(&h) = memo.get(&n) {
                        parent = Some(h);
                        break;
                    }
                    path.push(n);
                    n = self.trie.node(n).0;
                }
                for &n in path.iter().rev() {
                    let info = frame_info(profile, &self.frames[self.trie.node(n).1 as usize]);
                    let frame = profile.intern_frame(thread, info);
                    let h = profile.intern_stack(thread, parent, frame);
                    memo.insert(n, h);
                    parent = Some(h);
                }
                parent
            };
            for s in &samples {
                let stack = stack_of(&mut profile, s.node);
                let time = Timestamp::from_nanos_since_reference(s.time_ns);
                profile.add_sample(thread, time, stack, CpuDelta::from_nanos(s.cpu_delta_ns), 1);
            }
            drop(samples);
            for o in &off {
                let stack = stack_of(&mut profile, o.node);
                let end = o.time_ns;
                let start = end.saturating_sub(o.total_ns);
                let k = usize::from(!o.blocked);
                let m = profile.add_marker(
                    thread,
                    MarkerTiming::Interval(
                        Timestamp::from_nanos_since_reference(start),
                        Timestamp::from_nanos_since_reference(end),
                    ),
                    OffCpuMarker {
                        name: off_cpu_names[k],
                        category: off_cpu,
                        kind: off_cpu_kinds[k],
                        ms: o.total_ns as f64 / 1e6,
                        count: o.count as f64,
                    },
                );
                profile.set_marker_stack(thread, m, stack);
            }
        }

        if !self.session.is_empty() {
            let first = self.session.iter().map(SessionEvent::time_ns).min();
            let start = Timestamp::from_nanos_since_reference(first.unwrap_or(0));
            let process = profile.add_process("profkit", 0, start);
            let thread = profile.add_thread(process, 0, start, false);
            profile.set_thread_name(thread, "session events");
            for e in &self.session {
                let time =
                    MarkerTiming::Instant(Timestamp::from_nanos_since_reference(e.time_ns()));
                let marker = match e {
                    SessionEvent::Lost {
                        cpu, kind, count, ..
                    } => SessionMarker {
                        name: profile.intern_string("Lost samples"),
                        detail: profile.intern_string(&format!(
                            "CPU {cpu}: {count} lost ({})",
                            lost_reason(*kind)
                        )),
                        count: *count as f64,
                        category: other,
                    },
                    SessionEvent::PartStart { number, path, .. } => SessionMarker {
                        name: profile.intern_string("Part starts"),
                        detail: profile.intern_string(&format!("part {number}: {path}")),
                        count: *number as f64,
                        category: other,
                    },
                };
                profile.add_marker(thread, time, marker);
            }
        }
        serde_json::to_writer(&mut self.out, &profile).map_err(io::Error::from)?;
        self.out.write_all(b"\n")?;
        self.out.flush()
    }
}

impl SessionEvent {
    fn time_ns(&self) -> u64 {
        match *self {
            SessionEvent::Lost { time_ns, .. } | SessionEvent::PartStart { time_ns, .. } => time_ns,
        }
    }
}

/// Why samples were lost, in a marker.
fn lost_reason(kind: LostKind) -> &'static str {
    match kind {
        LostKind::Ring => "kernel ring full",
        LostKind::Overflow => "event buffer full",
        LostKind::DiskFull => "disk full",
        LostKind::NoMapping => "no mapping",
        LostKind::NoTask => "unknown task",
        LostKind::Reconcile => "kernel count at stop",
        LostKind::Other => "other",
    }
}

/// Lower-case hex to bytes; `None` if it is not hex.
fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// An ELF build-id as a Breakpad debug id: its first 16 bytes (zero-padded)
/// read as a little-endian GUID, age 0 (samply's rule).
fn debug_id(build_id: &[u8]) -> DebugId {
    let mut guid = [0u8; 16];
    let n = build_id.len().min(16);
    guid[..n].copy_from_slice(&build_id[..n]);
    DebugId::from_guid_age(&guid, 0).unwrap_or_else(|_| DebugId::nil())
}

/// A task's off-CPU time in one round, of one kind and stack.
struct OffCpuMarker {
    name: StringHandle,
    category: CategoryHandle,
    kind: StringHandle,
    ms: f64,
    count: f64,
}

impl StaticSchemaMarker for OffCpuMarker {
    const UNIQUE_MARKER_TYPE_NAME: &'static str = "ProfkitOffCpu";
    const DESCRIPTION: Option<&'static str> = Some(
        "Off-CPU time of this task in one sync round (profctl start --off-cpu): \
         its intervals of one kind and switch-out stack, summed",
    );
    const CHART_LABEL: Option<&'static str> = Some("{marker.data.kind}");
    const TABLE_LABEL: Option<&'static str> =
        Some("{marker.data.kind}: {marker.data.time} in {marker.data.count} intervals");
    const FIELDS: &'static [StaticSchemaMarkerField] = &[
        StaticSchemaMarkerField {
            key: "kind",
            label: "Kind",
            format: MarkerFieldFormat::String,
            flags: MarkerFieldFlags::SEARCHABLE,
        },
        StaticSchemaMarkerField {
            key: "time",
            label: "Off-CPU time",
            format: MarkerFieldFormat::Duration,
            flags: MarkerFieldFlags::empty(),
        },
        StaticSchemaMarkerField {
            key: "count",
            label: "Intervals",
            format: MarkerFieldFormat::Integer,
            flags: MarkerFieldFlags::empty(),
        },
    ];

    fn name(&self, _profile: &mut Profile) -> StringHandle {
        self.name
    }

    fn category(&self, _profile: &mut Profile) -> CategoryHandle {
        self.category
    }

    fn string_field_value(&self, _field_index: u32) -> StringHandle {
        self.kind
    }

    fn number_field_value(&self, field_index: u32) -> f64 {
        if field_index == 1 {
            self.ms
        } else {
            self.count
        }
    }
}

/// A round's loss on one CPU, or a part's start.
struct SessionMarker {
    name: StringHandle,
    detail: StringHandle,
    count: f64,
    category: CategoryHandle,
}

impl StaticSchemaMarker for SessionMarker {
    const UNIQUE_MARKER_TYPE_NAME: &'static str = "ProfkitSession";
    const DESCRIPTION: Option<&'static str> = Some(
        "A sync round that lost samples on a CPU, or the start of a part of a rotated session",
    );
    const CHART_LABEL: Option<&'static str> = Some("{marker.data.detail}");
    const TABLE_LABEL: Option<&'static str> = Some("{marker.name}: {marker.data.detail}");
    const FIELDS: &'static [StaticSchemaMarkerField] = &[
        StaticSchemaMarkerField {
            key: "detail",
            label: "Detail",
            format: MarkerFieldFormat::String,
            flags: MarkerFieldFlags::SEARCHABLE,
        },
        StaticSchemaMarkerField {
            key: "count",
            label: "Count",
            format: MarkerFieldFormat::Integer,
            flags: MarkerFieldFlags::empty(),
        },
    ];

    fn name(&self, _profile: &mut Profile) -> StringHandle {
        self.name
    }

    fn category(&self, _profile: &mut Profile) -> CategoryHandle {
        self.category
    }

    fn string_field_value(&self, _field_index: u32) -> StringHandle {
        self.detail
    }

    fn number_field_value(&self, _field_index: u32) -> f64 {
        self.count
    }
}

impl<W: Write> StreamSink for Firefox<W> {
    fn begin(&mut self, info: &StreamInfo<'_>) -> io::Result<()> {
        info.event.clone_into(&mut self.event);
        self.period_ns = info.period_ns;
        let frequency = info.header.frequency.filter(|&f| f > 0);
        self.interval_ns = info
            .period_ns
            .or_else(|| frequency.map(|f| 1_000_000_000 / f))
            .unwrap_or(1_000_000);
        self.start_ns = info.start_monotonic_ns;
        self.start_unix_ns = info.start_unix_ns;
        Ok(())
    }

    fn sample(&mut self, s: &StreamSample<'_>) -> io::Result<()> {
        let time_ns = self.rel(s.session, s.time_ns);
        let (t, node) = self.place(
            (s.session, s.cpu, s.pid, s.tid),
            s.comm,
            s.process,
            time_ns,
            s.table,
            s.frames,
        )?;
        let cpu_delta_ns = s.period_ns.unwrap_or(self.interval_ns);
        self.tracks[t].samples.push(Sample {
            time_ns,
            cpu_delta_ns,
            node,
        });
        Ok(())
    }

    fn off_cpu(&mut self, o: &StreamOffCpu<'_>) -> io::Result<()> {
        let time_ns = self.rel(o.session, o.time_ns);
        let (t, node) = self.place(
            (o.session, o.cpu, o.pid, o.tid),
            o.comm,
            o.process,
            time_ns,
            o.table,
            o.frames,
        )?;
        self.tracks[t].off_cpu.push(OffCpu {
            time_ns,
            total_ns: o.total_ns,
            count: o.count,
            blocked: o.kind == OffCpuKind::Blocked,
            node,
        });
        Ok(())
    }

    fn marker(&mut self, m: &StreamMarker<'_>) -> io::Result<()> {
        match *m {
            StreamMarker::Lost {
                session,
                time_ns,
                cpu,
                kind,
                count,
            } => self.session.push(SessionEvent::Lost {
                time_ns: self.rel(session, time_ns),
                cpu,
                kind,
                count,
            }),
            StreamMarker::PartStart {
                session,
                time_ns,
                number,
                path,
            } => self.session.push(SessionEvent::PartStart {
                time_ns: self.rel(session, time_ns),
                number,
                path: path
                    .file_name()
                    .unwrap_or(path.as_os_str())
                    .to_string_lossy()
                    .into_owned(),
            }),
        }
        Ok(())
    }

    fn end(&mut self, _summary: &StreamSummary) -> io::Result<()> {
        self.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_ids_become_breakpad_debug_ids_as_samply_writes_them() {
        let id = unhex("0102030405060708090a0b0c0d0e0f1011121314").unwrap();
        assert_eq!(id.len(), 20);
        assert_eq!(
            debug_id(&id).breakpad().to_string(),
            "0403020106050807090A0B0C0D0E0F100"
        );
        // Shorter than 16 bytes: zero-padded.
        assert_eq!(
            debug_id(&[0xab; 8]).breakpad().to_string(),
            "ABABABABABABABAB00000000000000000"
        );
        assert_eq!(unhex("0a0B"), Some(vec![0x0a, 0x0b]));
        assert_eq!(unhex("abc"), None);
        assert_eq!(unhex("zz"), None);
        assert_eq!(unhex("é0"), None);
    }
}
