//! `profctl`: starts, stops and queries a profkit sampling daemon.
//! Flags and glue only: the work is in the profkit crates.
#![forbid(unsafe_code)]

use anyhow::{anyhow, bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use profkit_daemon::{
    daemon_state, spawn_daemon, Client, Daemon, DaemonState, Engine, LoopOptions, Request,
    SessionDir, DEFAULT_READY_TIMEOUT, SESSION_LOG,
};
use profkit_eventlog::{EventConfigDesc, SessionHeader};
use profkit_perf::{parse_cpu_list, EventSpec, Rate, Sampler, SamplerConfig, Target};
use profkit_sync::{ChunkSink, FileSink, Recorder, RecorderOptions, SyncOptions, SyncStage};
use serde_json::{json, Value};
use std::os::fd::BorrowedFd;
use std::path::PathBuf;
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const EXIT_CODES: &str = "EXIT STATUS:\n  0  success\n  1  the operation failed (no daemon, no permission, I/O error)\n  2  bad command line\n  record: the recorded command's own exit status\n\nEXAMPLES:\n  profctl start -F 1000            sample the whole system at 1 kHz into ./profkit_data\n  profctl dump; profctl status     flush to disk now; show counters\n  profctl stop                     finish and print the summary\n  profctl record -- make -j2       profile one command and its children";

#[derive(Parser, Debug)]
#[command(name = "profctl", version, about = "Control profkit's system-wide sampling daemon", after_help = EXIT_CODES)]
struct Opt {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Args, Debug, Clone)]
struct DirArg {
    /// Session directory (like operf's oprofile_data).
    #[arg(long, env = "PROFKIT_SESSION_DIR", default_value = "profkit_data")]
    session_dir: PathBuf,
}

#[derive(Args, Debug, Clone)]
struct StartArgs {
    #[command(flatten)]
    dir: DirArg,
    /// Event: cpu-clock, task-clock, cycles, instructions, ..., rHEX or TYPE:CONFIG.
    #[arg(short = 'e', long, default_value = "cpu-clock")]
    event: String,
    /// Samples per second per CPU.
    #[arg(short = 'F', long, conflicts_with = "period")]
    freq: Option<u64>,
    /// One sample every N events.
    #[arg(short = 'c', long)]
    period: Option<u64>,
    /// Sample the whole system (the default for start).
    #[arg(short = 'a', long, conflicts_with = "pid")]
    all_cpus: bool,
    /// Sample these processes (and their children).
    #[arg(short = 'p', long, value_delimiter = ',')]
    pid: Vec<i32>,
    /// Only these CPUs (e.g. 0-3,6).
    #[arg(short = 'C', long)]
    cpu: Option<String>,
    /// Record callchains.
    #[arg(short = 'g')]
    callgraph: bool,
    /// Milliseconds between sync rounds.
    #[arg(long, default_value_t = 250, value_parser = clap::value_parser!(u64).range(10..=60000))]
    sync_interval: u64,
    /// Data pages per CPU ring (power of two).
    #[arg(long, default_value_t = profkit_perf::DEFAULT_DATA_PAGES)]
    buffer_pages: usize,
    /// Only user-space samples.
    #[arg(long, conflicts_with = "kernel_only")]
    user_only: bool,
    /// Only kernel samples.
    #[arg(long)]
    kernel_only: bool,
    /// Internal: start events at the target's exec (used by record).
    #[arg(long, hide = true)]
    enable_on_exec: bool,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Start sampling in the background; returns once sampling is live.
    Start(StartArgs),
    /// Stop: final drain, reconcile lost counts, write the footer, print a summary.
    Stop(DirArg),
    /// Force a sync round now; returns once it is on disk.
    Dump(DirArg),
    /// Show whether a daemon runs and its counters.
    Status(DirArg),
    /// Discard the samples so far.
    Reset {
        #[command(flatten)]
        dir: DirArg,
        /// Do not ask.
        #[arg(long)]
        yes: bool,
    },
    /// Start, run CMD, stop when it exits; exits with CMD's status.
    Record {
        #[command(flatten)]
        args: StartArgs,
        /// The command and its arguments.
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// Pack the session and every binary and debug file it samples (keyed
    /// by build-id) into a tar, so a report elsewhere symbolizes the same.
    Archive {
        #[command(flatten)]
        dir: DirArg,
        /// The tar file to write.
        #[arg(short = 'o', long)]
        output: PathBuf,
    },
    #[command(name = "__daemon", hide = true)]
    Daemon(StartArgs),
}

fn config(a: &StartArgs) -> Result<SamplerConfig> {
    let mut c = SamplerConfig::new(EventSpec::parse(&a.event)?);
    c.rate = match (a.freq, a.period) {
        (_, Some(p)) => Rate::Period(p),
        (Some(f), None) => Rate::Frequency(f),
        (None, None) => Rate::Frequency(4000),
    };
    if !a.pid.is_empty() {
        c.target = Target::Pids(a.pid.clone());
    }
    if let Some(cpus) = &a.cpu {
        c.cpus = Some(parse_cpu_list(cpus)?);
    }
    c.callchain = a.callgraph;
    c.data_pages = a.buffer_pages;
    c.exclude_kernel = a.user_only;
    c.exclude_user = a.kernel_only;
    c.enable_on_exec = a.enable_on_exec;
    c.validate()?;
    Ok(c)
}

fn is_permission(e: &profkit_perf::Error) -> bool {
    matches!(e, profkit_perf::Error::Open { source, .. }
        if source.kind() == std::io::ErrorKind::PermissionDenied)
}

fn forward_args(a: &StartArgs, pid_override: Option<u32>) -> Vec<String> {
    let mut v = vec![
        "__daemon".to_string(),
        "--session-dir".into(),
        a.dir.session_dir.display().to_string(),
    ];
    v.extend(["-e".into(), a.event.clone()]);
    if let Some(f) = a.freq {
        v.extend(["-F".into(), f.to_string()]);
    }
    if let Some(p) = a.period {
        v.extend(["-c".into(), p.to_string()]);
    }
    match pid_override {
        Some(p) => v.extend(["-p".into(), p.to_string(), "--enable-on-exec".into()]),
        None if !a.pid.is_empty() => v.extend([
            "-p".into(),
            a.pid
                .iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join(","),
        ]),
        None => {}
    }
    if let Some(c) = &a.cpu {
        v.extend(["-C".into(), c.clone()]);
    }
    if a.callgraph {
        v.push("-g".into());
    }
    v.extend(["--sync-interval".into(), a.sync_interval.to_string()]);
    v.extend(["--buffer-pages".into(), a.buffer_pages.to_string()]);
    if a.user_only {
        v.push("--user-only".into());
    }
    if a.kernel_only {
        v.push("--kernel-only".into());
    }
    v
}

/// Starts the daemon and waits until sampling is live.
fn start(a: &StartArgs, pid_override: Option<u32>) -> Result<u32> {
    let mut c = config(a)?;
    if let Some(p) = pid_override {
        c.target = Target::Pids(vec![p as i32]);
        c.enable_on_exec = true;
    }
    // Check permissions and the event here, where the user sees the message.
    let mut kernel_note = None;
    match Sampler::open(&c) {
        Ok(s) => drop(s),
        Err(e)
            if is_permission(&e)
                && !matches!(c.target, Target::SystemWide)
                && !c.exclude_kernel =>
        {
            // Per-process sampling of user space works up to paranoid 2:
            // fall back to it and say why kernel samples are missing.
            c.exclude_kernel = true;
            drop(Sampler::open(&c).map_err(|_| e)?);
            kernel_note = Some(format!(
                "profkit: kernel samples excluded: {} (kernel samples of a process need <= 1, or CAP_PERFMON); recording user space only",
                profkit_perf::read_sysctl("kernel.perf_event_paranoid")
                    .map(|p| format!("kernel.perf_event_paranoid is {p}"))
                    .unwrap_or_else(|| "kernel.perf_event_paranoid could not be read".into())
            ));
        }
        Err(e) => return Err(e.into()),
    }
    if let Some(n) = &kernel_note {
        eprintln!("{n}");
    }
    let mut a = a.clone();
    a.user_only |= c.exclude_kernel;
    let a = &a;
    let dir = SessionDir::create(&a.dir.session_dir)?;
    let mut cmd = Command::new(std::env::current_exe().context("finding profctl's own path")?);
    cmd.args(forward_args(a, pid_override));
    let child = spawn_daemon(cmd, &dir, DEFAULT_READY_TIMEOUT)?;
    Ok(child.id())
}

/// Space kept aside on the session's file system so that `stop` can write
/// the footer (with the loss accounting) even after the disk filled up.
const RESERVE_FILE: &str = "footer.reserve";
const RESERVE_BYTES: usize = 256 << 10;

/// The session file plus a reserve file that is released right before
/// the footer is written.
struct ReservedSink {
    inner: FileSink,
    reserve: PathBuf,
}

impl ReservedSink {
    fn create(inner: FileSink, reserve: PathBuf) -> Result<Self> {
        use std::io::Write;
        use std::os::unix::fs::OpenOptionsExt;
        let _ = std::fs::remove_file(&reserve);
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&reserve)
            .with_context(|| format!("creating {}", reserve.display()))?;
        f.write_all(&vec![0u8; RESERVE_BYTES])
            .and_then(|_| f.sync_all())
            .with_context(|| {
                format!(
                    "reserving {} KiB for the footer in {}",
                    RESERVE_BYTES >> 10,
                    reserve.display()
                )
            })?;
        Ok(Self { inner, reserve })
    }
}

impl ChunkSink for ReservedSink {
    fn write_chunk(&mut self, round: u64, time: u64, payload: &[u8]) -> profkit_sync::Result<u64> {
        self.inner.write_chunk(round, time, payload)
    }
    fn finish(&mut self, footer: &profkit_eventlog::SessionFooter) -> profkit_sync::Result<()> {
        let _ = std::fs::remove_file(&self.reserve);
        self.inner.finish(footer)
    }
    fn restart(&mut self) -> profkit_sync::Result<()> {
        self.inner.restart()
    }
}

struct LiveEngine {
    rec: Option<Recorder<Sampler>>,
    started: Instant,
    session: PathBuf,
    last_dir_check: Instant,
}

impl LiveEngine {
    /// Whether the session directory is still there. Checked every two
    /// seconds: a daemon whose directory was deleted can no longer be
    /// reached (its control socket went with it), so it stops by itself.
    fn dir_gone(&mut self) -> bool {
        if self.last_dir_check.elapsed() < Duration::from_secs(2) {
            return false;
        }
        self.last_dir_check = Instant::now();
        self.session
            .parent()
            .is_some_and(|d| std::fs::symlink_metadata(d).is_err())
    }
}

/// One CPU's accounting as `status` and `stop` report it.
fn cpu_json(a: &profkit_eventlog::CpuAccounting) -> Value {
    let n = a.samples_written + a.lost_total();
    json!({"cpu": a.cpu, "samples": a.samples_written, "lost": a.lost_total(),
           "lost_pct": if n > 0 { 100.0 * a.lost_total() as f64 / n as f64 } else { 0.0 },
           "lost_ring": a.lost_ring, "lost_overflow": a.lost_overflow, "lost_disk_full": a.lost_disk_full,
           "lost_no_mapping": a.lost_no_mapping, "lost_no_task": a.lost_no_task, "lost_reconcile": a.lost_reconcile,
           "kernel_lost": a.kernel_lost, "throttle_events": a.throttle_events})
}

fn acct_json(st: &profkit_sync::RecorderStatus) -> Value {
    let cpus: Vec<Value> = st.accounting.iter().map(cpu_json).collect();
    json!({"rounds": st.rounds, "bytes_written": st.buffer.bytes_written, "last_round_ms": st.last_round.as_secs_f64() * 1e3,
           "elapsed_s": st.elapsed.as_secs_f64(), "processes": st.processes,
           "threads_named": st.tables.threads, "tasks_announced": st.tables.announced,
           "stacks": st.stacks.stacks, "stack_table_bytes": st.stacks.bytes, "cpus": cpus})
}

impl Engine for LiveEngine {
    fn wake_fds(&self) -> Vec<BorrowedFd<'_>> {
        self.rec
            .as_ref()
            .map(|r| r.source().rings().iter().map(|r| r.fd()).collect())
            .unwrap_or_default()
    }
    fn round(&mut self) -> Result<(), String> {
        if self.dir_gone() {
            if let Some(rec) = self.rec.take() {
                let _ = rec.stop();
            }
            eprintln!("profkit daemon: the session directory was removed; stopping");
            std::process::exit(0);
        }
        self.rec.as_mut().ok_or("stopped")?.round();
        Ok(())
    }
    fn dump(&mut self) -> Result<(), String> {
        self.rec
            .as_mut()
            .ok_or("stopped")?
            .dump()
            .map_err(|e| e.to_string())
    }
    fn status(&self) -> Value {
        match &self.rec {
            Some(r) => acct_json(&r.status()),
            None => json!({"stopped": true}),
        }
    }
    fn reset(&mut self) -> Result<(), String> {
        self.rec
            .as_mut()
            .ok_or("stopped")?
            .reset()
            .map_err(|e| e.to_string())
    }
    fn stop(&mut self) -> Result<Value, String> {
        let rec = self.rec.take().ok_or("already stopped")?;
        let st = rec.stop().map_err(|e| e.to_string())?;
        save_session_extras(&self.session);
        let mut v = acct_json(&st);
        v["duration_s"] = json!(self.started.elapsed().as_secs_f64());
        v["session"] = json!(self.session.display().to_string());
        v["session_bytes"] = json!(std::fs::metadata(&self.session)
            .map(|m| m.len())
            .unwrap_or(0));
        Ok(v)
    }
}

/// Copies what a later report needs and the system will not keep: the
/// kernel's symbol table (root-only, 0600) and the JIT maps of sampled
/// processes with anonymous code (`/tmp/perf-PID.map` vanishes with them).
fn save_session_extras(session: &std::path::Path) {
    let Some(dir) = session.parent() else { return };
    let copy = |from: &std::path::Path, name: &str| {
        if let Ok(data) = std::fs::read(from) {
            use std::io::Write;
            use std::os::unix::fs::OpenOptionsExt;
            let _ = std::fs::remove_file(dir.join(name));
            if let Ok(mut f) = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(dir.join(name))
            {
                // A partial copy would mislead a report: keep all or nothing.
                if f.write_all(&data).and_then(|_| f.sync_all()).is_err() {
                    let _ = std::fs::remove_file(dir.join(name));
                }
            }
        }
    };
    copy(std::path::Path::new("/proc/kallsyms"), "kallsyms");
    let Ok(r) = profkit_eventlog::SessionReader::open(session) else {
        return;
    };
    let mut pids = std::collections::BTreeSet::new();
    for c in r.chunks() {
        let _ = r.for_each_sample(
            c,
            |_| {},
            |m| {
                if let profkit_eventlog::Event::CookieDef(e) = m {
                    if e.kind == profkit_eventlog::CookieKind::Anon {
                        pids.extend(e.pid);
                    }
                }
            },
        );
    }
    for pid in pids {
        let name = format!("perf-{pid}.map");
        copy(&std::path::Path::new("/tmp").join(&name), &name);
    }
}

/// Finishes the session of a daemon that died: keeps every complete round,
/// cuts a torn one, rebuilds the accounting from the log, writes the footer.
fn finalize_dead(dir: &DirArg) -> Result<Value> {
    let sdir = SessionDir::open(&dir.session_dir)?;
    // Takes over the stale lock (and cleans it up when dropped).
    let _lock = profkit_daemon::DaemonLock::acquire(&sdir)?;
    let path = sdir.join(SESSION_LOG);
    // Free the space kept for this footer.
    let _ = std::fs::remove_file(sdir.join(RESERVE_FILE));
    let (mut w, resume) = profkit_eventlog::SessionWriter::open_append(&path)
        .with_context(|| format!("reopening {}", path.display()))?;
    let r = profkit_eventlog::SessionReader::open(&path)?;
    let mut acct: std::collections::BTreeMap<u32, profkit_eventlog::CpuAccounting> = r
        .header()
        .cpus
        .iter()
        .map(|&c| {
            (
                c,
                profkit_eventlog::CpuAccounting {
                    cpu: c,
                    ..Default::default()
                },
            )
        })
        .collect();
    let mut last_time = r.header().start_monotonic_ns;
    for c in r.chunks() {
        last_time = last_time.max(c.time);
        let mut per_cpu: std::collections::BTreeMap<u32, u64> = Default::default();
        let mut lost = Vec::new();
        r.for_each_sample(
            c,
            |s| *per_cpu.entry(s.cpu).or_default() += 1,
            |m| {
                if let profkit_eventlog::Event::Lost { cpu, kind, count } = m {
                    lost.push((cpu, kind, count));
                }
            },
        )?;
        for (cpu, n) in per_cpu {
            let a = acct
                .entry(cpu)
                .or_insert_with(|| profkit_eventlog::CpuAccounting {
                    cpu,
                    ..Default::default()
                });
            a.samples_written += n;
            a.samples_received += n;
        }
        for (cpu, kind, n) in lost {
            let a = acct
                .entry(cpu)
                .or_insert_with(|| profkit_eventlog::CpuAccounting {
                    cpu,
                    ..Default::default()
                });
            use profkit_eventlog::LostKind as K;
            match kind {
                K::Ring | K::Other => a.lost_ring += n,
                K::Overflow => a.lost_overflow += n,
                K::DiskFull => a.lost_disk_full += n,
                K::NoMapping => {
                    a.lost_no_mapping += n;
                    a.samples_received += n
                }
                K::NoTask => {
                    a.lost_no_task += n;
                    a.samples_received += n
                }
                K::Reconcile => a.lost_reconcile += n,
            }
        }
    }
    let footer = profkit_eventlog::SessionFooter {
        end_time_unix_ns: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0),
        end_monotonic_ns: last_time,
        rounds: resume.chunks,
        accounting: acct.values().cloned().collect(),
    };
    w.write_footer(&footer)?;
    w.sync_data()?;
    save_session_extras(&path);
    let samples: u64 = footer.accounting.iter().map(|a| a.samples_written).sum();
    let cpus: Vec<Value> = footer.accounting.iter().map(cpu_json).collect();
    eprintln!(
        "profkit: the daemon had died; finalized {} complete rounds ({samples} samples){}; samples still in the rings and in the round being written when it died (at most one round) are lost and not counted",
        resume.chunks,
        if resume.truncated > 0 { format!(", cut a torn last round of {} bytes", resume.truncated) } else { String::new() }
    );
    Ok(json!({"rounds": resume.chunks, "cpus": cpus,
              "duration_s": (last_time.saturating_sub(r.header().start_monotonic_ns)) as f64 / 1e9,
              "session": path.display().to_string(),
              "session_bytes": std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0)}))
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Writes the session (log, kallsyms copy, perf maps) and the binaries and
/// debug files it refers to into a tar: `debug/.build-id/ab/cdef…` for each
/// binary with its recorded build-id, `….debug` for its separate debug file.
/// `profreport` uses `DIR/debug` as a debug directory when it exists.
fn archive(dir: &DirArg, output: &std::path::Path) -> Result<()> {
    if let DaemonState::Running { .. } = daemon_state(&dir.session_dir)? {
        bail!(
            "a daemon is still recording into {}: run `profctl stop` first",
            dir.session_dir.display()
        );
    }
    let session = dir.session_dir.join(SESSION_LOG);
    let r = profkit_eventlog::SessionReader::open(&session)?;
    let mut entries: std::collections::BTreeMap<String, profkit_eventlog::CookieEntry> =
        Default::default();
    for c in r.chunks() {
        let _ = r.for_each_sample(
            c,
            |_| {},
            |m| {
                if let profkit_eventlog::Event::CookieDef(e) = m {
                    if matches!(e.kind, profkit_eventlog::CookieKind::User) {
                        entries.insert(e.path.clone(), e);
                    }
                }
            },
        );
    }
    let file = {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(output)
            .with_context(|| format!("creating {}", output.display()))?
    };
    let mut tar = tar::Builder::new(std::io::BufWriter::new(file));
    tar.mode(tar::HeaderMode::Deterministic);
    let add = |tar: &mut tar::Builder<_>, from: &std::path::Path, name: &str| -> Result<u64> {
        let data = std::fs::read(from).with_context(|| format!("reading {}", from.display()))?;
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o600);
        h.set_cksum();
        tar.append_data(&mut h, name, &data[..])
            .with_context(|| format!("writing {}", output.display()))?;
        Ok(data.len() as u64)
    };
    let mut total = add(&mut tar, &session, SESSION_LOG)?;
    if let Ok(rd) = std::fs::read_dir(&dir.session_dir) {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name == "kallsyms" || (name.starts_with("perf-") && name.ends_with(".map")) {
                total += add(&mut tar, &e.path(), &name)?;
            }
        }
    }
    let (mut packed, mut skipped) = (0, Vec::new());
    for (path, e) in &entries {
        let Some(id) = e.build_id.as_deref().filter(|b| b.len() > 1) else {
            skipped.push(format!("{path} (no build-id recorded)"));
            continue;
        };
        let h = hex(id);
        let p = std::path::Path::new(path);
        match profkit_sync::read_build_id(p) {
            Some(now) if now == id => {
                total += add(
                    &mut tar,
                    p,
                    &format!("debug/.build-id/{}/{}", &h[..2], &h[2..]),
                )?;
                packed += 1;
            }
            Some(_) => skipped.push(format!("{path} (changed since recording)")),
            None => skipped.push(format!("{path} (missing or unreadable)")),
        }
        let dbg = std::path::Path::new("/usr/lib/debug/.build-id")
            .join(&h[..2])
            .join(format!("{}.debug", &h[2..]));
        if dbg.exists() {
            total += add(
                &mut tar,
                &dbg,
                &format!("debug/.build-id/{}/{}.debug", &h[..2], &h[2..]),
            )?;
        }
    }
    tar.into_inner()
        .and_then(|mut w| std::io::Write::flush(&mut w))
        .with_context(|| format!("writing {}", output.display()))?;
    println!(
        "profkit: archived the session and {packed} binaries ({total} bytes) into {}; unpack it anywhere and run `profreport --session-dir DIR`",
        output.display()
    );
    for s in skipped {
        println!("note: not archived: {s}");
    }
    Ok(())
}

fn run_daemon(a: &StartArgs) -> Result<()> {
    let c = config(a)?;
    let dir = SessionDir::open(&a.dir.session_dir)?;
    // Small rings at high rates fill in milliseconds: answer a watermark
    // wake-up within a millisecond rather than the daemon's 10 ms default.
    let opts = LoopOptions {
        sync_interval: Duration::from_millis(a.sync_interval),
        min_wake_interval: Duration::from_millis(1),
        ..Default::default()
    };
    let daemon = Daemon::new(&dir, opts)?;
    let sampler = Sampler::open(&c)?;
    let mut stage = SyncStage::new(SyncOptions {
        layout: sampler.layout(),
        paths: Default::default(),
        use_procfs: true,
    });
    match &c.target {
        Target::SystemWide => stage.seed_from_proc(),
        Target::Pids(p) => stage.seed_pids(&p.iter().map(|&p| p as u32).collect::<Vec<_>>()),
    }
    let session = dir.join(SESSION_LOG);
    match std::fs::remove_file(&session) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("removing the old {}", session.display())),
    }
    let (frequency, period) = match c.rate {
        Rate::Frequency(f) => (Some(f), None),
        Rate::Period(p) => (None, Some(p)),
    };
    let header = SessionHeader {
        host: std::fs::read_to_string("/proc/sys/kernel/hostname")
            .unwrap_or_default()
            .trim()
            .into(),
        kernel_release: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .unwrap_or_default()
            .trim()
            .into(),
        event: EventConfigDesc {
            name: c.event.name.clone(),
            type_: c.event.type_,
            config: c.event.config,
            frequency,
            period,
            exclude_user: c.exclude_user,
            exclude_kernel: c.exclude_kernel,
            callchain: c.callchain,
        },
        cpus: c.cpu_list()?,
        start_time_unix_ns: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0),
        start_monotonic_ns: profkit_perf::monotonic_ns(),
        sync_interval_ms: a.sync_interval as u32,
        target: match &c.target {
            Target::SystemWide => "system-wide".into(),
            Target::Pids(p) => format!(
                "pid {}",
                p.iter()
                    .map(|p| p.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            ),
        },
    };
    let sink = ReservedSink::create(
        FileSink::create(session.clone(), header)?,
        dir.join(RESERVE_FILE),
    )?;
    let rec = Recorder::new(sampler, stage, Box::new(sink), RecorderOptions::default())?;
    if !c.enable_on_exec {
        rec.source().enable()?;
    }
    let mut engine = LiveEngine {
        rec: Some(rec),
        started: Instant::now(),
        session,
        last_dir_check: Instant::now(),
    };
    daemon.run(&mut engine)?;
    Ok(())
}

fn print_summary(v: &Value) {
    let dur = v["duration_s"].as_f64().unwrap_or(0.0);
    let bytes = v["session_bytes"].as_u64().unwrap_or(0);
    let cpus = v["cpus"].as_array().cloned().unwrap_or_default();
    let samples: u64 = cpus.iter().filter_map(|c| c["samples"].as_u64()).sum();
    let lost: u64 = cpus.iter().filter_map(|c| c["lost"].as_u64()).sum();
    let per: Vec<String> = cpus
        .iter()
        .map(|c| {
            format!(
                "cpu{} {} ({} lost, {:.3}%)",
                c["cpu"],
                c["samples"],
                c["lost"],
                c["lost_pct"].as_f64().unwrap_or(0.0)
            )
        })
        .collect();
    let unattributed: u64 = cpus
        .iter()
        .map(|c| {
            c["lost_no_mapping"].as_u64().unwrap_or(0) + c["lost_no_task"].as_u64().unwrap_or(0)
        })
        .sum();
    let of_which = if unattributed > 0 {
        format!(" ({unattributed} of them unattributed: no mapping or no task)")
    } else {
        String::new()
    };
    println!(
        "profkit: recorded {dur:.1} s, {samples} samples and {lost} lost{of_which} in {} rounds: {}. Session {} ({bytes} bytes, {:.2} bytes/sample).",
        v["rounds"],
        per.join(", "),
        v["session"].as_str().unwrap_or("?"),
        if samples > 0 { bytes as f64 / samples as f64 } else { 0.0 }
    );
    let throttled: Vec<String> = cpus
        .iter()
        .filter(|c| c["throttle_events"].as_u64().unwrap_or(0) > 0)
        .map(|c| format!("cpu{} {}x", c["cpu"], c["throttle_events"]))
        .collect();
    if !throttled.is_empty() {
        println!(
            "warning: the kernel throttled sampling ({}): it caps interrupts at kernel.perf_event_max_sample_rate = {} Hz (and perf_cpu_time_max_percent), so those periods hold fewer samples than asked for; lower -F/-c or raise the sysctl",
            throttled.join(", "),
            profkit_perf::read_sysctl("kernel.perf_event_max_sample_rate").map(|v| v.to_string()).unwrap_or("?".into())
        );
    }
    for c in &cpus {
        if c["lost_pct"].as_f64().unwrap_or(0.0) > 0.01 {
            println!("warning: cpu {} lost {:.3}% of its samples (ring {}, event buffer {}, disk {}, no mapping {}, no task {}, unreported by LOST records {})",
                c["cpu"], c["lost_pct"].as_f64().unwrap_or(0.0), c["lost_ring"], c["lost_overflow"], c["lost_disk_full"], c["lost_no_mapping"], c["lost_no_task"], c["lost_reconcile"]);
        }
    }
}

fn request(dir: &DirArg, r: Request) -> Result<Value> {
    if let DaemonState::Dead { pid } = daemon_state(&dir.session_dir)? {
        bail!(
            "the profkit daemon for {} (pid {}) died; its complete rounds are in {}",
            dir.session_dir.display(),
            pid.map(|p| p.to_string()).unwrap_or("?".into()),
            dir.session_dir.join(SESSION_LOG).display()
        );
    }
    Ok(Client::connect(&dir.session_dir)?
        .request(r)?
        .into_result(r)?)
}

fn wait_stopped(pid: u32) -> Result<()> {
    let stat = format!("/proc/{pid}/stat");
    for _ in 0..500 {
        let s = std::fs::read_to_string(&stat).with_context(|| {
            format!("the command (pid {pid}) exited before it could be profiled")
        })?;
        if s.rsplit(')')
            .next()
            .is_some_and(|r| r.trim_start().starts_with('T'))
        {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    Err(anyhow!(
        "the command (pid {pid}) did not reach its start point"
    ))
}

fn record(a: &StartArgs, command: &[String]) -> Result<ExitCode> {
    let which = Command::new("sh")
        .arg("-c")
        .arg("command -v \"$1\"")
        .arg("sh")
        .arg(&command[0])
        .output()?;
    if !which.status.success() {
        bail!("command not found: {}", command[0]);
    }
    let system_wide = a.all_cpus;
    let mut child;
    if system_wide {
        start(a, None)?;
        child = Command::new(&command[0])
            .args(&command[1..])
            .spawn()
            .with_context(|| format!("running {}", command[0]))?;
    } else {
        // The shell stops itself; we open events on it with enable_on_exec;
        // it continues into exec, where sampling begins.
        child = Command::new("sh")
            .arg("-c")
            .arg("kill -STOP $$; exec \"$@\"")
            .arg("sh")
            .args(command)
            .spawn()
            .context("starting the command")?;
        wait_stopped(child.id())?;
        if let Err(e) = start(a, Some(child.id())) {
            let _ = child.kill();
            return Err(e);
        }
        let pid =
            rustix::process::Pid::from_raw(child.id() as i32).ok_or_else(|| anyhow!("bad pid"))?;
        rustix::process::kill_process(pid, rustix::process::Signal::CONT)
            .context("resuming the command")?;
    }
    let status = child.wait()?;
    let v = request(&a.dir, Request::Stop)?;
    print_summary(&v);
    Ok(match status.code() {
        Some(c) => ExitCode::from(c as u8),
        None => ExitCode::from(128 + rustix_signal(&status)),
    })
}

fn rustix_signal(s: &std::process::ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt;
    s.signal().unwrap_or(0) as u8
}

fn run(opt: Opt) -> Result<ExitCode> {
    match opt.cmd {
        Cmd::Start(a) => {
            let pid = start(&a, None)?;
            println!(
                "profkit: sampling started (daemon pid {pid}, session {})",
                a.dir.session_dir.display()
            );
        }
        Cmd::Daemon(a) => run_daemon(&a)?,
        Cmd::Stop(d) => match daemon_state(&d.session_dir)? {
            DaemonState::Dead { .. } => print_summary(&finalize_dead(&d)?),
            _ => print_summary(&request(&d, Request::Stop)?),
        },
        Cmd::Dump(d) => {
            request(&d, Request::Dump)?;
            println!(
                "profkit: dumped; everything sampled so far is in {}",
                d.session_dir.join(SESSION_LOG).display()
            );
        }
        Cmd::Status(d) => match daemon_state(&d.session_dir)? {
            DaemonState::NotRunning => {
                println!("profkit: no daemon running for {}", d.session_dir.display())
            }
            DaemonState::Dead { pid } => println!(
                "profkit: the daemon (pid {}) died; its complete rounds are kept in {}",
                pid.map(|p| p.to_string()).unwrap_or("?".into()),
                d.session_dir.join(SESSION_LOG).display()
            ),
            DaemonState::Running { pid } => {
                let v = request(&d, Request::Status)?;
                println!(
                    "profkit: running (pid {})",
                    pid.map(|p| p.to_string()).unwrap_or("?".into())
                );
                println!("{}", serde_json::to_string_pretty(&v)?);
            }
        },
        Cmd::Reset { dir, yes } => {
            if !yes {
                bail!("reset discards every sample so far: confirm with `profctl reset --yes`");
            }
            request(&dir, Request::Reset)?;
            println!("profkit: samples discarded; recording continues");
        }
        Cmd::Record { args, command } => return record(&args, &command),
        Cmd::Archive { dir, output } => archive(&dir, &output)?,
    }
    Ok(ExitCode::SUCCESS)
}

fn main() -> ExitCode {
    let opt = Opt::parse();
    match run(opt) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("profctl: {e:#}");
            // A bad value on the command line is a usage error, like clap's.
            let usage = e.chain().any(|c| {
                matches!(c.downcast_ref::<profkit_perf::Error>(), Some(profkit_perf::Error::Config(_)))
                    || matches!(c.downcast_ref::<profkit_perf::Error>(),
                        Some(profkit_perf::Error::Open { source, .. }) if source.raw_os_error() == Some(libc::ESRCH))
                    || matches!(c.downcast_ref::<profkit_daemon::Error>(),
                        Some(profkit_daemon::Error::NotADirectory { .. }))
            });
            ExitCode::from(if usage { 2 } else { 1 })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_consistent() {
        Opt::command().debug_assert();
    }
}
