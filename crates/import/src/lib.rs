//! `profreport --import perf.data`: a `perf record` file fed through the
//! sync stage and written as an ordinary profkit session.
//!
//! This crate owns reading perf.data (with linux-perf-data: its record
//! sorter, its feature sections) and turning it into what the sync stage
//! reads from live rings. A perf.data file is just another source of
//! records: its `MMAP`/`MMAP2`, `COMM`, `FORK`, `EXIT`, `SAMPLE`, `LOST`,
//! `THROTTLE` and `UNTHROTTLE` records are restated in profkit's ring
//! layout, queued per CPU, and every round handed to
//! [`profkit_sync::SyncStage::record`], the entry the live rings' drain
//! uses. So the process table, the kernel maps, the cookie rules, the call
//! chain resolution (`resolve_chain`), the encoder and the accounting are
//! the sync stage's own, and the same recording imported or recorded live
//! gives the same session:
//!
//! - user code: (cookie, file offset) through the process table; the
//!   cookie from the `MMAP2` record's build-id, else perf's build-id table
//!   ([`profkit_sync::SyncStage::add_build_id`]), else device and inode;
//! - the kernel and modules: perf's `[kernel.kallsyms]_text` mapping
//!   (`pgoff` = the address of `_text`) and its pid −1 module mappings give
//!   the kernel maps that a live session reads from `/proc`, with the same
//!   cookies for the same kernel and modules; a file without the kernel
//!   mapping (perf without access to kernel addresses, another machine's
//!   recording) gets one before its first kernel sample, `_text` taken as
//!   0 and the build-id perf's table gives the kernel, so that its kernel
//!   samples are `[kernel.kallsyms]`'s, unnamed, not lost (with a line in
//!   [`ImportSummary::warnings`]);
//! - anonymous (JIT) code, `/memfd:` and perf-map code: the absolute
//!   address, owned by its process (`profkit_eventlog::is_anonymous_code`);
//! - a sample that resolves to nothing is counted as the live path counts
//!   it (`lost_no_mapping`, `lost_no_task`, with `Lost` markers); stacks
//!   met with an unknown frame or cut at 256 frames are counted in
//!   `stacks_unknown` and `stacks_truncated`;
//! - user stacks (`perf record --call-graph dwarf`): when the first
//!   event copies them with the BP, SP and IP registers, the layout copies
//!   `sample_stack_user` bytes (perf's 8192 by default; rounded up to a
//!   multiple of 8, at most `profkit_perf::MAX_USER_STACK`) and each
//!   sample is restated with perf's register ABI, BP, SP, IP and its stack
//!   up to perf's `dyn_size` (zero-padded to the layout's size): the sync
//!   stage takes them as it takes a live `--call-graph dwarf` session's
//!   samples. The session header's `user_stack` says the size, and
//!   [`ImportSummary::user_stacks`] counts the samples with one. perf's
//!   call chain of such a sample holds its kernel part only. A file whose
//!   user stacks cannot be restated (no BP, SP or IP among its registers,
//!   a size of 0) is imported without them, with a line in
//!   [`ImportSummary::warnings`]. A stripped binary without unwind tables of
//!   its own is unwound with its separate debug file's `.debug_frame`
//!   (`/usr/lib/debug` by default; [`ImportOptions::debug_frame`] adds a
//!   debuginfod cache or a fetch hook: [`import_perf_data_with`]).
//! - off-CPU time (see `offcpu.rs`): the samples of a `context-switches`
//!   event (`perf record -e cs -c 1 -g --switch-events`, what `profctl
//!   start --off-cpu` records) are switch-out stacks, and go with the
//!   `SWITCH`/`SWITCH_CPU_WIDE` records (and the off-CPU event's `LOST`
//!   records) to a second queue per CPU, handed to
//!   [`profkit_sync::SyncStage::record_offcpu`] after the round's other
//!   records, as a live round drains the off-CPU rings after the sampled
//!   ones. A `sched:sched_switch` sample (`perf record -e
//!   sched:sched_switch -g`) is its task's switch-out stack too, and its
//!   raw data (field offsets from the file's tracing data) is restated as
//!   the switch-out of `prev_pid` (runnable when `prev_state` is R or R+,
//!   else blocked) and, unless the file has switch records of its own
//!   (then they give the switches), the switch-in of `next_pid`, at the
//!   sample's time; `next_pid`'s process is the one the file's COMM, FORK
//!   or samples gave that thread, else its own id. A CPU's sample whose
//!   `prev_pid` is not its previous sample's `next_pid` (perf missed the
//!   switch between: some 2 % on a busy machine, most of them leaving
//!   idle) also gets `prev_pid`'s switch-in, 1 ns before its switch-out
//!   ([`ImportSummary::switches_inferred`]), so that its wait is ended
//!   late by its run rather than lost. Switch records alone
//!   (`--switch-events` beside an on-CPU event) give intervals without
//!   stacks. A session fed any of these says `event.off_cpu` (format
//!   version 5) and holds `OffCpu` markers; its event is the first
//!   on-CPU event's (perf's `dummy` aside), the off-CPU event's when
//!   there is none.
//!
//! The result is a session file like a recorded one: a header from perf's
//! feature sections, one chunk per round, a footer with the stage's
//! per-CPU accounting. The session's wall-clock start is the recording's
//! own when the file has it (`HEADER_CLOCK_DATA`, which `perf record -k
//! CLOCK` writes: the wall clock and the sample clock at one instant),
//! else the file's modification time (what `perf report --header` shows
//! as "captured on") less the sampled time span.
//!
//! # Design constraints
//!
//! - **One resolution path.** Nothing here resolves an address or derives
//!   a cookie; what the sync stage cannot take as a record (the build-id
//!   table) it takes through a documented entry of the stage.
//! - **Never the live system.** The stage runs with the
//!   [`profkit_sync::NullProbe`] (what [`SyncStage::new`] gives): a
//!   recording made elsewhere or earlier is not completed from this
//!   machine's `/proc` or files.
//! - **Rounds of 250 ms of sample time**, the live sync interval, so the
//!   stage's per-round rules (a sample whose mapping comes later in the
//!   round is retried at its end; an exited process lives one more round)
//!   act as they do live; a round also ends at 65 536 samples (off-CPU
//!   records count as samples) so that a burst (or a file without times)
//!   keeps chunks and memory bounded, and
//!   at 64 MiB of user stacks queued ([`ROUND_USER_STACK_BYTES`]): perf's
//!   8 KiB copies end a round at 8,192 samples, where 65 536 would hold
//!   512 MiB. Files without user stacks never reach that limit.
//! - **Compressed records** (`perf record -z`, see `compressed.rs`): the
//!   file is read from an unnamed temporary copy with its zstd stream
//!   expanded in place, at most [`MAX_RATIO`] times its data section and
//!   [`MAX_EXPANDED`] bytes in all (a zstd window at most [`MAX_WINDOW`]):
//!   past a bound the import is refused ([`Error::Compressed`]), the bound
//!   named.
//! - **Pipe mode** (`perf record -o -`, a 16-byte header, the attributes
//!   and features as HEADER_ATTR and HEADER_FEATURE records): read as a
//!   stream, from a file or from standard input (the path `-`), its
//!   memory one record, perf's rounds and the decoder's window; compressed
//!   records are expanded as they come, at most [`MAX_RATIO`] times the
//!   compressed bytes read so far (and 1 MiB); AUXTRACE and
//!   HEADER_TRACING_DATA records, whose data follows them in a pipe, are
//!   read past and counted ([`ImportSummary::records_skipped`]). A stream
//!   without clock data ends at the time of the import.
//! - **Newer than this import**: kernel record types linux-perf-data does
//!   not know, perf record types after `COMPRESSED2` (83) and header
//!   features after `HEADER_PMU_CAPS` (31) are skipped, never read as
//!   something else, and counted ([`ImportSummary::records_skipped`],
//!   [`ImportSummary::features_skipped`], with a warning).
//! - **Bad input is counted, not fatal, and costs what the file holds.**
//!   The file is opened non-blocking and must be a regular file; before
//!   linux-perf-data sees it, every header section and feature section
//!   must lie within the file and the event descriptions' counts within
//!   their section (the reader allocates claimed sizes up front: a flipped
//!   byte asked for 46 PB). A claimed CPU count is believed up to 8192. A
//!   panic inside the reader (it asserts on some malformed records) ends
//!   the read like a truncation, and a record that does not parse is
//!   counted in [`ImportSummary::bad_records`]; `MMAP2` records are parsed
//!   by hand (the reader panics on a build-id over 20 bytes, which a 6.18
//!   kernel was seen to claim on inode-form records). A truncated file
//!   gives what was read. 1,200 random byte flips of a real perf.data:
//!   no crash (before: 12 of 400 panicked or aborted).
//!
//! # Example
//!
//! ```no_run
//! let dir = std::env::temp_dir().join("imported");
//! std::fs::create_dir_all(&dir)?;
//! let summary = profkit_import::import_perf_data(
//!     std::path::Path::new("perf.data"),
//!     &dir.join("session.pkl"),
//! )?;
//! println!("{} of {} samples written", summary.written, summary.samples);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! # Not for
//!
//! Reports (profkit-report reads the session written here like any
//! other), or telling on-CPU events apart: the samples of every on-CPU event are
//! imported as the main one's (the layout, call chains included, follows
//! the main event's `sample_type`).

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod compressed;
mod error;
mod layout;
mod offcpu;
mod perf_data;

pub use compressed::{ExpandError, MAX_EXPANDED, MAX_RATIO, MAX_WINDOW};
pub use error::{Error, Result};

use layout::CpuQueues;
use perf_data::{FileFacts, Sink};
use profkit_eventlog::{SessionFooter, SessionHeader, SessionWriter};
use profkit_perf::Layout;
use profkit_sync::{ImportProbe, JitStats, SyncOptions, SyncStage};
use std::path::{Path, PathBuf};

pub use profkit_sync::{DebugFrameSources, FetchDebugFile};

/// Options of an import ([`import_perf_data_with`]).
#[derive(Clone, Debug, Default)]
pub struct ImportOptions {
    /// Where DWARF unwinding (`perf record --call-graph dwarf`) looks for
    /// the separate debug file of a binary without unwind tables of its
    /// own: `/usr/lib/debug` by default; a report may add a debuginfod
    /// cache and a fetch hook ([`DebugFrameSources::fetch`], given the
    /// build-id, returns a downloaded file's path; a read that calls it is
    /// given up after [`DebugFrameSources::fetch_timeout`]).
    pub debug_frame: DebugFrameSources,
}

/// Sample time a round covers: the live sync interval.
pub const ROUND_NS: u64 = 250_000_000;
/// Most samples in one round.
pub const ROUND_SAMPLES: usize = 65_536;
/// Most bytes of user stack (`--call-graph dwarf` copies) queued in one
/// round: perf's default copy of 8 KiB a sample ends a round at 8,192
/// samples, where [`ROUND_SAMPLES`] would queue 512 MiB. Files without
/// user stacks never reach it.
pub const ROUND_USER_STACK_BYTES: usize = 64 << 20;

/// What an import found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImportSummary {
    /// The session file written.
    pub session: PathBuf,
    /// Sample records in the file (off-CPU events' included).
    pub samples: u64,
    /// Samples written to the session.
    pub written: u64,
    /// Samples whose address was in no known mapping (`lost_no_mapping`).
    pub no_mapping: u64,
    /// Samples of a process the file never described (`lost_no_task`).
    pub no_task: u64,
    /// Samples without an ip, pid or tid (perf's `sample_type` lacked them).
    pub skipped: u64,
    /// Distinct call stacks.
    pub stacks: u64,
    /// Samples perf reported lost (`LOST` records).
    pub lost: u64,
    /// Records that could not be read.
    pub bad_records: u64,
    /// Records left out, well-formed but not read: AUXTRACE and a pipe's
    /// tracing data (with the data after them), and record types newer
    /// than this import knows.
    pub records_skipped: u64,
    /// Header features (feature sections, or a pipe's HEADER_FEATURE
    /// records) newer than this import knows, not read.
    pub features_skipped: u64,
    /// Rounds (chunks) written.
    pub rounds: u64,
    /// Samples written with user registers and a user stack
    /// (`--call-graph dwarf`), which the sync stage can unwind.
    pub user_stacks: u64,
    /// What the import left out of the session, and why, to be shown to
    /// the user (e.g. user stacks it could not restate).
    pub warnings: Vec<String>,
    /// Samples of an off-CPU event (`context-switches`,
    /// `sched:sched_switch`): switch-out stacks.
    pub offcpu_samples: u64,
    /// Context switches handed to the sync stage: the file's switch
    /// records, and two per `sched:sched_switch` sample (its task's
    /// switch-out and the next one's switch-in) when it has none, and
    /// those inferred ([`ImportSummary::switches_inferred`]).
    pub switches: u64,
    /// Switch-ins the file lacks, inferred from `sched:sched_switch`
    /// samples: a CPU's sample whose task is not the one its previous
    /// sample switched in (perf misses some), put just before that
    /// task's switch-out.
    pub switches_inferred: u64,
    /// `sched:sched_switch` samples of a dead task (`prev_state` X or Z):
    /// its last switch, no wait, so no switch-out.
    pub switches_dead: u64,
    /// The JIT dumps the recording's mappings named, found beside the
    /// perf.data file (or at their recorded paths), as the sync stage
    /// read them.
    pub jit: JitStats,
}

struct Importer {
    stage: Option<SyncStage>,
    layout: Layout,
    facts: FileFacts,
    round_end: Option<u64>,
    round_time: u64,
    first_time: Option<u64>,
    last_time: u64,
    chunks: Vec<(u64, u64, Vec<u8>)>,
    bad_records: u64,
    /// Where JIT dumps are looked for by name.
    jit_dirs: Vec<PathBuf>,
    debug_frame: DebugFrameSources,
}

impl Importer {
    fn new() -> Self {
        Importer {
            debug_frame: DebugFrameSources::default(),
            stage: None,
            layout: Layout {
                callchain: false,
                user_stack: 0,
                cgroup: false,
            },
            facts: FileFacts::default(),
            round_end: None,
            round_time: 0,
            first_time: None,
            last_time: 0,
            chunks: Vec::new(),
            bad_records: 0,
            jit_dirs: Vec::new(),
        }
    }

    /// Ends a round; `last`: the file's last, where nothing may wait.
    fn end_round(&mut self, queues: &mut CpuQueues, last: bool) {
        let Some(stage) = self.stage.as_mut() else {
            return;
        };
        stage.begin_round(self.round_time);
        self.bad_records += queues.feed(stage, self.layout);
        let chunk = if last {
            stage.finish_final_round()
        } else {
            stage.finish_round()
        };
        self.chunks.push((chunk.round, chunk.time, chunk.bytes));
    }
}

impl Sink for Importer {
    fn start(&mut self, facts: &FileFacts, layout: Layout, queues: &mut CpuQueues) {
        self.layout = layout;
        // JIT dumps are looked for beside the perf.data file, as `perf
        // inject --jit` finds them (then at their recorded paths).
        let mut stage = SyncStage::with_probe(
            SyncOptions {
                layout,
                debug_frame: self.debug_frame.clone(),
            },
            ImportProbe::new(self.jit_dirs.clone()),
        );
        // perf's nanoseconds, kept whole: `--format script` of an import
        // prints perf script's times and order.
        stage.set_time_unit(1);
        if facts.offcpu {
            // Exits are noted from the first round on (a task's last
            // switch-out is no wait), before any off-CPU record.
            stage.enable_offcpu();
        }
        self.stage = Some(stage);
        for cpu in 0..facts.online_cpus {
            queues.add_cpu(cpu);
        }
        self.facts = facts.clone();
    }

    fn before(&mut self, time: u64, queues: &mut CpuQueues) {
        if queues.samples() >= ROUND_SAMPLES || queues.user_stack_bytes() >= ROUND_USER_STACK_BYTES
        {
            self.end_round(queues, false);
        }
        if time == 0 {
            return;
        }
        match self.round_end {
            Some(end) if time >= end => {
                self.end_round(queues, false);
                self.round_end = Some(time.saturating_add(ROUND_NS));
            }
            Some(_) => {}
            None => self.round_end = Some(time.saturating_add(ROUND_NS)),
        }
        self.first_time.get_or_insert(time);
        self.last_time = self.last_time.max(time);
        self.round_time = self.round_time.max(time);
    }

    fn build_id(&mut self, path: &str, build_id: Vec<u8>) {
        if let Some(s) = self.stage.as_mut() {
            s.add_build_id(path, build_id);
        }
    }
}

/// Reads `perf_data` (a file written by `perf record`, in file or pipe
/// mode; `-`: standard input, in pipe mode) and writes it as a profkit
/// session file at `session` (which must not exist; its directory is
/// created).
///
/// # Errors
/// [`Error::Read`] when the file cannot be read, [`Error::NotPerfData`]
/// when it is not a perf.data file this import reads (a pipe-mode stream without attributes,
/// another format), [`Error::Compressed`] when its compressed records are
/// not zstd data or expand past a bound, [`Error::SessionDir`] or [`Error::Session`] when the
/// session cannot be written.
pub fn import_perf_data(perf_data: &Path, session: &Path) -> Result<ImportSummary> {
    import_perf_data_with(perf_data, session, &ImportOptions::default())
}

/// [`import_perf_data`] with `options` (where unwinding finds separate
/// debug files, and a hook that fetches them).
///
/// # Errors
/// As [`import_perf_data`].
pub fn import_perf_data_with(
    perf_data: &Path,
    session: &Path,
    options: &ImportOptions,
) -> Result<ImportSummary> {
    let reader = perf_data::open(perf_data)?;
    let mut imp = Importer::new();
    imp.debug_frame = options.debug_frame.clone();
    imp.jit_dirs.extend(perf_data.parent().map(|d| {
        if d.as_os_str().is_empty() {
            Path::new(".")
        } else {
            d
        }
        .to_path_buf()
    }));
    let mut queues = CpuQueues::default();
    let mut summary = ImportSummary::default();
    match reader {
        perf_data::Opened::File(r) => perf_data::read(r, &mut queues, &mut imp, &mut summary),
        perf_data::Opened::Pipe(r, report) => {
            perf_data::read(r, &mut queues, &mut imp, &mut summary);
            let mut report = report.borrow_mut();
            if let Some(source) = report.failure.take() {
                return Err(Error::Compressed {
                    path: perf_data.to_path_buf(),
                    source,
                });
            }
            summary.records_skipped += report.skipped;
        }
    }
    if summary.records_skipped > 0 {
        summary.warnings.push(format!(
            "{} records not read (AUXTRACE, tracing data in a pipe, record types \
             newer than this import): skipped",
            summary.records_skipped
        ));
    }
    // The file's modification time (perf's "captured on"); a stream's
    // (standard input's) ends now.
    let mtime_unix_ns = if perf_data.as_os_str() == perf_data::STDIN {
        Some(std::time::SystemTime::now())
    } else {
        std::fs::metadata(perf_data)
            .ok()
            .and_then(|m| m.modified().ok())
    }
    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
    .map_or(0, |d| d.as_nanos() as u64);
    imp.end_round(&mut queues, true);
    summary.bad_records += imp.bad_records;
    let Some(stage) = imp.stage.take() else {
        return Err(Error::NotPerfData {
            path: perf_data.to_path_buf(),
            message: "no event attributes".into(),
        });
    };

    let accounting = stage.accounting();
    for a in &accounting {
        summary.written += a.samples_written;
        summary.no_mapping += a.lost_no_mapping;
        summary.no_task += a.lost_no_task;
    }
    summary.stacks = stage.stack_stats().stacks as u64;
    summary.rounds = stage.rounds();

    let first = imp.first_time.unwrap_or(0);
    let span = imp.last_time.saturating_sub(first);
    // The recording's own time when the file has it (`perf record -k`
    // writes the wall clock beside the sample clock), else the file's
    // modification time (perf's "captured on") less the sampled span.
    let start_time_unix_ns = imp
        .facts
        .wall_time(first)
        .unwrap_or_else(|| mtime_unix_ns.saturating_sub(span));
    let end_time_unix_ns = start_time_unix_ns.saturating_add(span);
    let mut cpus: Vec<u32> = accounting.iter().map(|a| a.cpu).collect();
    cpus.extend(0..imp.facts.online_cpus);
    cpus.sort_unstable();
    cpus.dedup();
    let cmdline = &imp.facts.cmdline;
    let mut header = SessionHeader {
        host: std::mem::take(&mut imp.facts.host),
        kernel_release: std::mem::take(&mut imp.facts.kernel_release),
        event: std::mem::take(&mut imp.facts.event),
        cpus,
        start_time_unix_ns,
        start_monotonic_ns: first,
        sync_interval_ms: (ROUND_NS / 1_000_000) as u32,
        target: if cmdline.is_empty() {
            format!("perf.data {}", perf_data.display())
        } else {
            format!("perf.data {} ({cmdline})", perf_data.display())
        },
        cgroups: Default::default(),
        part: None,
    };
    if let Some(parent) = session.parent() {
        std::fs::create_dir_all(parent).map_err(|source| Error::SessionDir {
            path: parent.to_path_buf(),
            source,
        })?;
    }
    // Off-CPU records were fed: the session holds intervals (version 5).
    header.event.off_cpu = queues.offcpu_fed() > 0;
    // JIT dumps were met: the session may hold JIT code (version 7).
    let jit = stage.jit_stats();
    header.event.jit_code = jit.dumps > 0;
    summary.jit = jit;
    let mut w = SessionWriter::create(session, &header)?;
    for (round, time, bytes) in &imp.chunks {
        w.append_chunk(*round, (*time).max(first), bytes)?;
    }
    w.write_footer(&SessionFooter {
        end_time_unix_ns,
        end_monotonic_ns: imp.last_time,
        rounds: summary.rounds,
        accounting,
    })?;
    summary.session = session.to_path_buf();
    Ok(summary)
}

#[cfg(test)]
mod tests {
    use super::*;
    use layout::{PerfUser, Queue};
    use profkit_perf::{misc, SampleId};

    /// Rounds (chunks) `n` samples at one time make, each with `stack`
    /// (none if empty) as its user stack.
    fn rounds(layout: Layout, n: usize, stack: &[u8]) -> usize {
        let mut imp = Importer::new();
        let mut q = CpuQueues::default();
        imp.start(&FileFacts::default(), layout, &mut q);
        let id = SampleId {
            pid: 1,
            tid: 1,
            time: 1000,
            cpu: 0,
        };
        let user = PerfUser {
            regs: Some((2, [1, 2, 3])),
            stack,
            dyn_size: stack.len() as u64,
        };
        for _ in 0..n {
            imp.before(id.time, &mut q);
            q.sample(
                Queue::Sampled,
                layout,
                misc::USER,
                0x1000,
                &id,
                1,
                [].into_iter(),
                &user,
            );
        }
        imp.end_round(&mut q, true);
        imp.chunks.len()
    }

    /// A round ends at ROUND_SAMPLES samples, and at
    /// ROUND_USER_STACK_BYTES of user stacks: 8,192 perf-sized (8 KiB)
    /// copies, not 512 MiB of them.
    #[test]
    fn a_round_ends_at_its_samples_or_user_stack_bytes() {
        let dwarf = Layout {
            callchain: true,
            user_stack: 8192,
            cgroup: false,
        };
        let per_round = ROUND_USER_STACK_BYTES / 8192;
        assert_eq!(per_round, 8192);
        assert_eq!(rounds(dwarf, per_round, &[1; 8192]), 1);
        assert_eq!(rounds(dwarf, per_round + 1, &[1; 8192]), 2);
        assert_eq!(rounds(dwarf, 2 * per_round + 1, &[1; 8192]), 3);
        // Samples without a stack copy count by number only.
        assert_eq!(rounds(dwarf, per_round + 1, &[]), 1);
        assert_eq!(rounds(dwarf, ROUND_SAMPLES + 1, &[]), 2);
        let flat = Layout::default();
        assert_eq!(rounds(flat, ROUND_SAMPLES, &[]), 1);
        assert_eq!(rounds(flat, ROUND_SAMPLES + 1, &[]), 2);
    }

    #[test]
    fn a_file_that_is_not_perf_data_is_an_import_error() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("x");
        std::fs::write(&f, b"not perf data at all, not at all").unwrap();
        let e = import_perf_data(&f, &d.path().join("s/session.pkl")).unwrap_err();
        assert!(matches!(e, Error::NotPerfData { .. }), "{e:?}");
        assert!(e.to_string().contains("not a perf.data file"), "{e}");
        let e = import_perf_data(&d.path().join("absent"), &d.path().join("t")).unwrap_err();
        assert!(matches!(e, Error::Read { .. }), "{e:?}");
        assert!(e.to_string().contains("absent"), "{e}");
    }
}
