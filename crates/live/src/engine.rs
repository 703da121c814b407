//! The daemon's engine: a [`Recorder`] behind [`profkit_daemon::Engine`],
//! its footer-reserve sink, and the daemon process's body.

use crate::budget::{BudgetLimit, DiskBudget};
use crate::config::{session_header, StartConfig};
use crate::error::{Error, Result};
use crate::extras::{save_session_extras, ExtrasSources};
use crate::keep::{Keeper, KEEP_STOP_WAIT};
use crate::parts::{apply_retention, PartsConfig, Rotate, Rotation};
use crate::summary::{PartsSummary, SessionSummary, Summary};
use profkit_daemon::{Daemon, Engine, EngineError, LoopOptions, SessionDir, SESSION_LOG};
use profkit_eventlog::SessionFooter;
use profkit_perf::{Sampler, Target};
use profkit_sync::{
    ChunkSink, FileSink, Recorder, RecorderOptions, RingSource, SimRings, SyncOptions, SyncStage,
};
use serde_json::{json, Value};
use std::os::fd::BorrowedFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Space kept aside on the session's file system (in this file of the
/// session directory) so that `stop` can write the footer, with the loss
/// accounting, even after the disk filled up.
pub const RESERVE_FILE: &str = "footer.reserve";
/// Size of [`RESERVE_FILE`].
pub const RESERVE_BYTES: usize = 256 << 10;

/// How often a running engine checks that its session directory exists.
pub const DIR_CHECK_INTERVAL: Duration = Duration::from_secs(2);

/// A sink plus a reserve file that is released right before the footer is
/// written.
#[derive(Debug)]
pub struct ReservedSink<S> {
    inner: S,
    reserve: PathBuf,
}

impl<S: ChunkSink> ReservedSink<S> {
    /// Creates `reserve` (0600, replacing an old one, never through a link)
    /// holding [`RESERVE_BYTES`] bytes, synced, in front of `inner`.
    pub fn create(inner: S, reserve: PathBuf) -> Result<Self> {
        make_reserve(&reserve)?;
        Ok(Self { inner, reserve })
    }
}

/// The smallest reserve made again after a rotation on a full disk.
const MIN_RESERVE_BYTES: usize = 16 << 10;

fn make_reserve(reserve: &Path) -> Result<()> {
    make_reserve_of(reserve, RESERVE_BYTES)
}

fn make_reserve_of(reserve: &Path, size: usize) -> Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let _ = std::fs::remove_file(reserve);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(reserve)
        .map_err(|e| Error::io("creating", reserve, e))?;
    if let Err(e) = f.write_all(&vec![0u8; size]).and_then(|_| f.sync_all()) {
        // A tiny disk: leave no partial reserve behind.
        drop(f);
        let _ = std::fs::remove_file(reserve);
        return Err(Error::io("reserving 256 KiB for the footer in", reserve, e));
    }
    Ok(())
}

impl<S: ChunkSink> ChunkSink for ReservedSink<S> {
    fn write_chunk(&mut self, round: u64, time: u64, payload: &[u8]) -> profkit_sync::Result<u64> {
        self.inner.write_chunk(round, time, payload)
    }
    fn finish(&mut self, footer: &SessionFooter) -> profkit_sync::Result<()> {
        let _ = std::fs::remove_file(&self.reserve);
        self.inner.finish(footer)
    }
    fn restart(&mut self) -> profkit_sync::Result<()> {
        self.inner.restart()
    }
    /// The closing part's footer gets the reserve as at stop; the reserve
    /// is made again for the next part (on a full disk it cannot be: the
    /// next footer then has what space there is).
    fn rotate(
        &mut self,
        next: &profkit_sync::NextPart,
    ) -> profkit_sync::Result<profkit_sync::Rotated> {
        let _ = std::fs::remove_file(&self.reserve);
        let r = self.inner.rotate(next);
        // On a full disk the footer and the new header took some of the
        // space freed: a smaller reserve still holds a footer (a few
        // hundred bytes for a few CPUs). Not a failed rotation when none
        // fits: the next writes count the full disk.
        let mut size = RESERVE_BYTES;
        while size >= MIN_RESERVE_BYTES && make_reserve_of(&self.reserve, size).is_err() {
            size /= 2;
        }
        r
    }
}

/// A ring source the daemon can poll: descriptors that become readable
/// when a ring passes its watermark.
pub trait WakeSource: RingSource {
    /// The wake descriptors (see [`Engine::wake_fds`]).
    fn wake_fds(&self) -> Vec<BorrowedFd<'_>>;
}

impl WakeSource for Sampler {
    fn wake_fds(&self) -> Vec<BorrowedFd<'_>> {
        self.rings()
            .iter()
            .chain(self.offcpu_rings())
            .map(|r| r.fd())
            .collect()
    }
}

/// Simulated rings have no descriptors: the timer alone drives them.
impl WakeSource for SimRings {
    fn wake_fds(&self) -> Vec<BorrowedFd<'_>> {
        Vec::new()
    }
}

/// The live recording as the daemon drives it.
///
/// Once its session directory is gone (checked every
/// [`DIR_CHECK_INTERVAL`]), no client can reach the daemon (the control
/// socket went with it): the engine then says it is
/// [`finished`](Engine::finished) and the daemon stops it like on a stop
/// request, so the footer is still written.
pub struct LiveEngine<S: WakeSource> {
    rec: Option<Recorder<S>>,
    started: Instant,
    /// The session file as the engine opens it (under the held directory).
    session: PathBuf,
    /// The session file as the user named it (messages, summaries).
    display: PathBuf,
    /// The held session directory, when the engine was given one.
    dir: Option<SessionDir>,
    last_dir_check: Instant,
    dir_check_interval: Duration,
    dir_gone: bool,
    extras: ExtrasSources,
    /// Copies binaries and JIT maps of other namespaces (made at the
    /// first round).
    keeper: Option<Keeper>,
    /// Rotation and retention.
    parts: PartsConfig,
    /// When the time rule next closes the part.
    next_rotation: Option<Instant>,
    /// What status and stop say of the parts.
    parts_state: PartsSummary,
    /// What the daemon should log (automatic rotations).
    log_lines: Vec<String>,
    /// What everything the session writes counts against.
    budget: DiskBudget,
    /// `--export`: the children that push closed parts to a fleet store.
    exporter: Option<crate::export::Exporter>,
}

impl<S: WakeSource> std::fmt::Debug for LiveEngine<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveEngine")
            .field("session", &self.session)
            .field("stopped", &self.rec.is_none())
            .field("dir_gone", &self.dir_gone)
            .finish_non_exhaustive()
    }
}

impl<S: WakeSource> LiveEngine<S> {
    /// Drives `rec`, which writes the session file `session`.
    pub fn new(rec: Recorder<S>, session: PathBuf) -> Self {
        LiveEngine {
            rec: Some(rec),
            started: Instant::now(),
            display: session.clone(),
            dir: None,
            last_dir_check: Instant::now(),
            dir_check_interval: DIR_CHECK_INTERVAL,
            dir_gone: false,
            extras: ExtrasSources::default(),
            keeper: None,
            parts: PartsConfig::default(),
            next_rotation: None,
            parts_state: PartsSummary {
                part: 1,
                ..Default::default()
            },
            log_lines: Vec::new(),
            budget: DiskBudget::new(BudgetLimit::resolve(
                None,
                session.parent().unwrap_or(Path::new(".")),
            )),
            session,
            exporter: None,
        }
    }

    /// Pushes each closed part, and the last one at stop, to a fleet
    /// store with `exporter` (`--export`).
    pub fn with_exporter(mut self, exporter: crate::export::Exporter) -> Self {
        self.exporter = Some(exporter);
        self
    }

    /// The closed parts' numbers (for the exporter): retention deletes the
    /// oldest, so they are the `closed` numbers before the current part's.
    fn closed_numbers(&self) -> std::ops::Range<u64> {
        let p = &self.parts_state;
        p.part.saturating_sub(p.closed)..p.part
    }

    /// Status and stop: the parts, with the export's state.
    fn parts_summary(&self) -> PartsSummary {
        let mut p = self.parts_state.clone();
        p.export = self.exporter.as_ref().map(|e| e.state());
        p
    }

    /// Counts everything the session writes against `budget` (by
    /// default: the default budget of the session's file system).
    pub fn with_budget(mut self, budget: DiskBudget) -> Self {
        self.budget = budget;
        self
    }

    /// The session's disk budget.
    pub fn budget(&self) -> &DiskBudget {
        &self.budget
    }

    /// The parts' rules with `--max-disk` lowered by what the extras
    /// took: they must fit in it too.
    fn parts_rules(&self) -> PartsConfig {
        let mut cfg = self.parts;
        cfg.max_disk = cfg.max_disk.map(|m| self.budget.parts_room(m));
        cfg
    }

    /// Rotates and deletes parts as `cfg` says.
    pub fn with_parts(mut self, cfg: PartsConfig) -> Self {
        self.parts = cfg;
        self.parts_state.rule = cfg.describe();
        self.next_rotation = match cfg.rotate {
            Some(Rotate::Every(d)) => Instant::now().checked_add(d),
            _ => None,
        };
        self
    }

    /// Whether the session has (or is set to have) parts.
    fn has_parts(&self) -> bool {
        self.parts != PartsConfig::default() || self.parts_state.part > 1
    }

    /// Closes the current part and starts the next (`why`: what asked),
    /// then applies retention. Answers the new part's number and what
    /// was deleted.
    pub fn rotate_now(&mut self, why: &str) -> Result<Rotation> {
        let rec = self.rec.as_mut().ok_or(Error::Stopped)?;
        let failed_before = rec.buffer_state().rotate_errors;
        let t0 = Instant::now();
        let first_round = rec.rotate();
        let took_ms = t0.elapsed().as_secs_f64() * 1e3;
        let st = rec.buffer_state();
        if let Some(Rotate::Every(d)) = self.parts.rotate {
            let now = Instant::now();
            // The next part starts from this rotation's deadline, so parts
            // do not drift by a round each; a late one starts afresh.
            let next = self.next_rotation.and_then(|t| t.checked_add(d));
            self.next_rotation = match next {
                Some(t) if t > now => Some(t),
                _ => now.checked_add(d),
            };
        }
        let error = (st.rotate_errors > failed_before).then(|| st.last_error.unwrap_or_default());
        if let Some(e) = &error {
            self.note_parts_error(e.clone());
        }
        let Some(first_round) = first_round else {
            return Err(Error::Sync(profkit_sync::Error::Sink(format!(
                "the {why} rotation failed: {}",
                error.unwrap_or_default()
            ))));
        };
        self.parts_state.part += 1;
        if let Some(e) = &mut self.exporter {
            e.part_closed();
        }
        let removed = self.retain(st.part_bytes);
        Ok(Rotation {
            part: self.parts_state.part,
            first_round,
            why: why.to_owned(),
            removed,
            took_ms: (took_ms * 100.0).round() / 100.0,
            error,
        })
    }

    fn note_parts_error(&mut self, e: String) {
        let errs = &mut self.parts_state.errors;
        if errs.len() >= 4 {
            errs.remove(0);
        }
        errs.push(e);
    }

    /// Deletes closed parts beyond `--keep`/`--max-disk` and counts what
    /// is left. Returns the parts deleted.
    fn retain(&mut self, current_bytes: u64) -> Vec<u64> {
        let Some(dir) = self.session.parent().map(Path::to_path_buf) else {
            return Vec::new();
        };
        // The recorder counts the rounds written; the part's file holds its
        // header too (all of it right after a rotation).
        let current_bytes =
            std::fs::metadata(&self.session).map_or(current_bytes, |m| m.len().max(current_bytes));
        let r = apply_retention(&dir, &self.parts_rules(), current_bytes);
        self.budget
            .set_parts(r.closed_bytes().saturating_add(current_bytes));
        self.parts_state.closed = r.closed.len() as u64;
        self.parts_state.closed_bytes = r.closed_bytes();
        self.parts_state.removed += r.removed.len() as u64;
        for e in r.errors {
            self.note_parts_error(format!("deleting a part: {e}"));
        }
        if let Some(e) = &mut self.exporter {
            e.removed(&r.removed);
        }
        r.removed
    }

    /// After each round: a rotation the rule asks for, and the disk limit.
    fn parts_round(&mut self) {
        // Nothing to look at without a rule (SIGHUP rotations need none).
        if self.parts.rotate.is_none() && self.parts.max_disk.is_none() {
            return;
        }
        let Some(rec) = self.rec.as_ref() else { return };
        let part_bytes = rec.part_bytes();
        let due = match self.parts.rotate {
            Some(Rotate::Every(_)) => self.next_rotation.is_some_and(|t| Instant::now() >= t),
            Some(Rotate::Size(b)) => part_bytes >= b,
            None => false,
        };
        if due {
            let why = match self.parts.rotate {
                Some(Rotate::Size(_)) => "size",
                _ => "time",
            };
            let line = match self.rotate_now(why) {
                Ok(r) => format!("rotated: {}", r.to_value()),
                Err(e) => e.to_string(),
            };
            self.log_lines.push(line);
        } else if self.parts_rules().max_disk.is_some_and(|m| {
            self.parts_state.closed_bytes + part_bytes > m && self.parts_state.closed > 0
        }) {
            let removed = self.retain(part_bytes);
            if !removed.is_empty() {
                self.log_lines
                    .push(format!("--max-disk: deleted parts {removed:?}"));
            }
        }
    }

    /// Works in the held directory `dir` ([`SessionDir::held_path`]): the
    /// session file, its extras and the deletion check go through its
    /// descriptor, never again through its path, which a user owning a
    /// parent directory could swap for a link elsewhere.
    pub fn with_session_dir(mut self, dir: SessionDir) -> Self {
        self.session = dir.held_path().join(SESSION_LOG);
        self.display = dir.join(SESSION_LOG);
        self.dir = Some(dir);
        self
    }

    /// Checks the session directory every `interval` instead (tests).
    pub fn with_dir_check_interval(mut self, interval: Duration) -> Self {
        self.dir_check_interval = interval;
        self
    }

    /// Copies the session extras from `from` at stop (tests).
    pub fn with_extras(mut self, from: ExtrasSources) -> Self {
        self.extras = from;
        self
    }

    /// The recorder, until stopped.
    pub fn recorder(&self) -> Option<&Recorder<S>> {
        self.rec.as_ref()
    }

    fn check_dir(&mut self) -> bool {
        if !self.dir_gone && self.last_dir_check.elapsed() >= self.dir_check_interval {
            self.last_dir_check = Instant::now();
            self.dir_gone = match &self.dir {
                // Deleted, even if re-created at the same path since.
                Some(d) => d.is_deleted(),
                None => self
                    .session
                    .parent()
                    .is_some_and(|d| std::fs::symlink_metadata(d).is_err()),
            };
        }
        self.dir_gone
    }

    fn rec(&mut self) -> Result<&mut Recorder<S>> {
        self.rec.as_mut().ok_or(Error::Stopped)
    }

    /// The typed stop: final drain, footer, extras, summary.
    pub fn finish(&mut self) -> Result<Summary> {
        let rec = self.rec.take().ok_or(Error::Stopped)?;
        let owners: std::collections::HashMap<u32, u32> = rec.stage().anon_owners().collect();
        let owner_list: Vec<(u32, u32)> = owners.iter().map(|(&p, &u)| (p, u)).collect();
        self.keep_round(&rec);
        let st = rec.stop()?;
        let mut extras = save_session_extras(
            &self.session,
            &self.extras,
            &|pid| {
                owners
                    .get(&pid)
                    .copied()
                    .or_else(|| self.extras.live_process_owner(pid))
            },
            &self.budget,
        );
        // After the host's JIT maps: a namespaced process's own map wins.
        let mut kept = Default::default();
        if let Some(k) = &mut self.keeper {
            k.finish(KEEP_STOP_WAIT, &owner_list, &extras);
            if let Some(dir) = self.session.parent() {
                if let Err(why) =
                    crate::keep::write_not_kept(dir, &k.binaries_refused, &self.budget)
                {
                    extras.refused.push(format!(
                        "the list of binaries not kept ({}): {why}",
                        crate::keep::NOT_KEPT_FILE
                    ));
                }
            }
            extras.refused.append(&mut k.refused);
            kept = k.kept.clone();
            extras.refused.extend(k.kept.notes());
        }
        let mut s = Summary::of_recorder(&st);
        // The last part is closed: every part not in the store yet goes.
        let closed = self.closed_numbers();
        if let Some(e) = &mut self.exporter {
            e.finish(crate::export::STOP_WAIT, closed, self.parts_state.part);
        }
        if self.has_parts() || self.exporter.is_some() {
            s.parts = Some(self.parts_summary());
        }
        let session_bytes = std::fs::metadata(&self.session)
            .map(|m| m.len())
            .unwrap_or(0)
            + self.parts_state.closed_bytes;
        self.budget.set_parts(session_bytes);
        s.disk = Some(self.budget.summary());
        s.session = Some(SessionSummary {
            duration_s: self.started.elapsed().as_secs_f64(),
            session: self.display.display().to_string(),
            // With parts: all of them.
            session_bytes,
            extras_refused: extras.refused,
            kept,
        });
        Ok(s)
    }

    /// Hands the keeper what this round found (binaries other mount
    /// namespaces hide, JIT maps in other pid namespaces).
    fn keep_round(&mut self, rec: &Recorder<S>) {
        if self.keeper.is_none() {
            let Some(dir) = self.session.parent() else {
                return;
            };
            self.keeper = Some(Keeper::new(
                dir.to_path_buf(),
                rec.stage().keep_queue(),
                self.extras.proc_root.clone(),
                self.budget.clone(),
            ));
        }
        if let Some(k) = &mut self.keeper {
            k.round(rec.stage());
        }
    }
}

impl<S: WakeSource> Engine for LiveEngine<S> {
    fn wake_fds(&self) -> Vec<BorrowedFd<'_>> {
        self.rec
            .as_ref()
            .map(|r| r.source().wake_fds())
            .unwrap_or_default()
    }
    fn round(&mut self) -> std::result::Result<(), EngineError> {
        if self.check_dir() {
            // Nothing more to do here: the daemon asks `finished` next and
            // stops us; stop drains what the rings hold.
            return Ok(());
        }
        let mut rec = self.rec.take().ok_or(Error::Stopped)?;
        rec.round();
        self.keep_round(&rec);
        self.budget
            .set_parts(self.parts_state.closed_bytes + rec.part_bytes());
        self.rec = Some(rec);
        self.parts_round();
        let closed = self.closed_numbers();
        if let Some(e) = &mut self.exporter {
            e.round(closed);
        }
        Ok(())
    }
    fn dump(&mut self) -> std::result::Result<(), EngineError> {
        Ok(self.rec()?.dump().map_err(Error::from)?)
    }
    fn status(&self) -> Value {
        match &self.rec {
            Some(r) => {
                let mut s = Summary::of_recorder(&r.status());
                if self.has_parts() || self.exporter.is_some() {
                    s.parts = Some(self.parts_summary());
                }
                s.disk = Some(self.budget.summary());
                s.to_value()
            }
            None => json!({"stopped": true}),
        }
    }
    fn rotate(&mut self) -> std::result::Result<Value, EngineError> {
        Ok(self.rotate_now("requested")?.to_value())
    }
    fn take_log_lines(&mut self) -> Vec<String> {
        std::mem::take(&mut self.log_lines)
    }
    fn reset(&mut self) -> std::result::Result<(), EngineError> {
        self.rec()?.reset().map_err(Error::from)?;
        // The sink started over at part 1 and deleted the closed parts.
        self.parts_state.part = 1;
        self.parts_state.closed = 0;
        self.parts_state.closed_bytes = 0;
        Ok(())
    }
    fn finished(&mut self) -> Option<String> {
        self.dir_gone.then(|| {
            format!(
                "the session directory {} was removed; stopping",
                self.display
                    .parent()
                    .map(Path::display)
                    .map(|d| d.to_string())
                    .unwrap_or_default()
            )
        })
    }
    fn stop(&mut self) -> std::result::Result<Value, EngineError> {
        Ok(self.finish()?.to_value())
    }
}

/// The daemon process's body: takes the session's lock, opens the events,
/// starts the session file (replacing an old one) with its footer reserve,
/// and serves until stopped.
pub fn run_daemon(cfg: &StartConfig) -> Result<()> {
    run_daemon_with(cfg, false)
}

/// [`run_daemon`]; `foreground`: log lines go to stderr too (`profctl
/// start --foreground`, under a service manager).
pub fn run_daemon_with(cfg: &StartConfig, foreground: bool) -> Result<()> {
    let url = std::env::var(crate::export::EXPORT_URL_ENV).ok();
    run_daemon_exporting(cfg, foreground, url)
}

/// [`run_daemon_with`], with the fleet store's URL for `--export`
/// (`cfg.export`) given rather than read from [`crate::EXPORT_URL_ENV`]
/// (`start --foreground`: the daemon is this process).
pub fn run_daemon_exporting(
    cfg: &StartConfig,
    foreground: bool,
    export_url: Option<String>,
) -> Result<()> {
    let c = cfg.sampler_config()?;
    let dir = SessionDir::open(&cfg.session_dir)?;
    // Small rings at high rates fill in milliseconds: answer a watermark
    // wake-up within a millisecond rather than the daemon's 10 ms default.
    let opts = LoopOptions {
        sync_interval: Duration::from_millis(cfg.sync_interval_ms),
        min_wake_interval: Duration::from_millis(1),
        log_to_stderr: foreground,
        ..Default::default()
    };
    let daemon = Daemon::new(&dir, opts)?;
    let sampler = Sampler::open(&c)?;
    let mut stage = SyncStage::with_probe(
        SyncOptions {
            layout: sampler.layout(),
            // DWARF unwinding takes a stripped binary's `.debug_frame` from
            // the system's debug files only: the daemon never fetches, and
            // reads no user's debuginfod cache.
            debug_frame: profkit_sync::DebugFrameSources {
                debug_dirs: vec![profkit_sync::SYSTEM_DEBUG_DIR.into()],
                debuginfod_cache: None,
                fetch: None,
                fetch_timeout: profkit_sync::DEFAULT_FETCH_TIMEOUT,
            },
        },
        profkit_sync::ProcfsProbe::default(),
    );
    stage.set_cgroups(c.cgroups);
    if c.off_cpu {
        stage.enable_offcpu();
    }
    match &c.target {
        Target::SystemWide => stage.seed_from_proc(),
        Target::Pids(p) => stage.seed_pids(&p.iter().map(|&p| p as u32).collect::<Vec<_>>()),
    }
    // Every file of the session is opened under the held directory, never
    // again through its path (a parent directory a user owns could have it
    // swapped for a link elsewhere).
    let held = dir.held_path();
    let session = held.join(SESSION_LOG);
    dir.remove(SESSION_LOG)?;
    // Parts of an earlier session here would read as this one's.
    for (_, p) in profkit_eventlog::parts::closed_parts(&held)
        .map_err(|e| Error::io("listing", dir.path(), e))?
    {
        std::fs::remove_file(&p).map_err(|e| Error::io("removing an old part", &p, e))?;
    }
    // So would its extras (and they would not count against this
    // session's budget, and a reused pid would pick up an old JIT map).
    remove_old_extras(&held)?;
    let budget = DiskBudget::new(
        cfg.disk_budget
            .clone()
            .unwrap_or_else(|| BudgetLimit::resolve(cfg.parts.max_disk, &held)),
    );
    let header = session_header(&c, cfg.sync_interval_ms)?;
    let sink = ReservedSink::create(
        FileSink::create(session.clone(), header)?.shown_as(dir.join(SESSION_LOG)),
        held.join(RESERVE_FILE),
    )?;
    let rec = Recorder::new(sampler, stage, Box::new(sink), RecorderOptions::default())
        .map_err(|e| Error::io("starting the writer thread for", dir.join(SESSION_LOG), e))?;
    if !c.enable_on_exec {
        rec.source().enable()?;
    }
    let mut engine = LiveEngine::new(rec, session)
        .with_session_dir(dir.try_clone()?)
        .with_parts(cfg.parts)
        .with_budget(budget);
    if let (Some(export), Some(url)) = (&cfg.export, export_url) {
        let program = std::env::current_exe()
            .map_err(|e| Error::io("finding the program for", &cfg.session_dir, e))?;
        engine = engine.with_exporter(crate::export::Exporter::new(
            program,
            cfg.session_dir.clone(),
            export.clone(),
            url,
        ));
    }
    daemon.run(&mut engine)?;
    Ok(())
}

/// Removes what an earlier session left in the session directory `dir`
/// besides its parts: `debug/` (binaries kept from containers,
/// `debug/not-kept`), the JIT maps and kallsyms copied at stop (a link
/// at any of those names is removed, never followed).
pub(crate) fn remove_old_extras(dir: &Path) -> Result<()> {
    for e in std::fs::read_dir(dir)
        .map_err(|e| Error::io("listing", dir, e))?
        .flatten()
    {
        let name = e.file_name();
        let Some(name) = name.to_str() else { continue };
        let p = e.path();
        let is_dir = std::fs::symlink_metadata(&p).is_ok_and(|m| m.is_dir());
        let removed = match name {
            profkit_eventlog::layout::DEBUG_DIR if is_dir => std::fs::remove_dir_all(&p),
            n if profkit_eventlog::SessionLayout::is_extra(n) => std::fs::remove_file(&p),
            _ => continue,
        };
        match removed {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io("removing an earlier session's", &p, e)),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 25: a start removes what an earlier session left besides its
    /// parts (today's code left debug/ and perf-*.map to pile up over
    /// restarts, uncounted, and a reused pid picked up an old map).
    #[test]
    fn an_earlier_sessions_extras_are_removed_and_nothing_else() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path();
        std::fs::create_dir_all(p.join("debug/.build-id/ab")).unwrap();
        std::fs::write(p.join("debug/.build-id/ab/cdef"), "elf").unwrap();
        std::fs::write(p.join("debug/not-kept"), "/x: why\n").unwrap();
        std::fs::write(p.join("perf-4242.map"), "1000 10 old\n").unwrap();
        std::fs::write(p.join("kallsyms"), "# old\n").unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("keep-me"), "x").unwrap();
        std::os::unix::fs::symlink(outside.path(), p.join("perf-1.map")).unwrap();
        for keep in ["daemon.log", "notes.txt", "session.000001.pkl"] {
            std::fs::write(p.join(keep), "x").unwrap();
        }
        remove_old_extras(p).unwrap();
        let mut left: Vec<String> = std::fs::read_dir(p)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left, ["daemon.log", "notes.txt", "session.000001.pkl"]);
        assert!(
            outside.path().join("keep-me").exists(),
            "a link was followed"
        );
    }
}
