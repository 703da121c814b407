//! `profctl`: starts, stops and queries a profkit sampling daemon.
//! Flags and glue only: the work is in the profkit crates.
#![forbid(unsafe_code)]

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand};
use profkit_daemon::{
    daemon_state, spawn_daemon, DaemonState, Request, SessionDir, DEFAULT_READY_TIMEOUT,
    SESSION_LOG,
};
use profkit_live::{
    control, finalize_dead, parse_keep, parse_size, perf_is_usage, run_daemon, BudgetLimit,
    CallGraph, ExtrasSources, PartsConfig, Rate, RecordRun, RingChoice, Rotate, StartConfig,
    Summary, DEFAULT_FREQUENCY, SYSTEM_DEBUG_DIR,
};
use profkit_perf::parse_cpu_list;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, ExitCode};

const EXIT_CODES: &str = "EXIT STATUS:\n  0  success\n  1  the operation failed (no daemon, no permission, I/O error)\n  2  bad command line\n  record: the recorded command's own exit status\n\nEXAMPLES:\n  profctl start -F 1000            sample the whole system at 1 kHz into ./profkit_data\n  profctl dump; profctl status     flush to disk now; show counters\n  profctl stop                     finish and print the summary\n  profctl record -- make -j2       profile one command and its children
  profctl record --call-graph dwarf -- ./app   with call graphs, also through code built without frame pointers";

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
    /// Record call graphs with frame pointers (the same as --call-graph fp).
    #[arg(short = 'g')]
    callgraph: bool,
    /// Record call graphs: fp (frame pointers), dwarf (copy 8192 bytes of
    /// user stack per sample, unwound with DWARF) or dwarf,SIZE (SIZE bytes, a
    /// multiple of 8 up to 65528).
    #[arg(long, value_name = "MODE", value_parser = call_graph)]
    call_graph: Option<CallGraph>,
    /// Milliseconds between sync rounds.
    #[arg(long, default_value_t = 250, value_parser = clap::value_parser!(u64).range(10..=60000))]
    sync_interval: u64,
    /// Data pages per CPU ring (power of two) [default: room for two sync
    /// intervals of samples, at least 128 pages, at most 64 MiB, within the
    /// locked-memory limit shared by the CPUs (root: 512 MiB); said at start].
    #[arg(long, value_name = "N")]
    buffer_pages: Option<usize>,
    /// Data pages of each CPU's off-CPU ring (power of two) [default: 4x
    /// --buffer-pages]: a switch storm writes some 250 bytes per switch.
    #[arg(long, value_name = "N", requires = "off_cpu")]
    off_cpu_pages: Option<usize>,
    /// Push each closed part (and the last one at stop) to a fleet store:
    /// clickhouse://[USER[:PASS]@]HOST[:PORT]/DATABASE; parts wait on disk while
    /// it is down (see `status`). The URL is kept out of the process list and logs.
    #[arg(long, value_name = "URL")]
    export: Option<String>,
    /// With --export: the host name stored with the rows [default: this host's].
    #[arg(long, value_name = "NAME", requires = "export")]
    export_host: Option<String>,
    /// Only user-space samples.
    #[arg(long, conflicts_with = "kernel_only")]
    user_only: bool,
    /// Only kernel samples.
    #[arg(long)]
    kernel_only: bool,
    /// Internal: start events at the target's exec (used by record).
    #[arg(long, hide = true)]
    enable_on_exec: bool,
    /// Record each sample's cgroup (v2), for `profreport --separate=cgroup`
    /// (PERF_SAMPLE_CGROUP, kernel 5.7+; else /proc/PID/cgroup per process).
    #[arg(long)]
    cgroups: bool,
    /// Also record where tasks wait (perf's flag name): at every context
    /// switch of a sampled task, its stack at the switch-out and the time
    /// it came back, so `profreport --off-cpu` shows blocked time and
    /// `--wall` each thread's on-CPU, blocked and runnable time. Implies
    /// -g (frame pointers) unless --call-graph is given.
    #[arg(long)]
    off_cpu: bool,
    /// Sample only the tasks of this cgroup v2 (a path as in
    /// /proc/PID/cgroup, e.g. /system.slice, or the directory), as perf's -G.
    #[arg(
        short = 'G',
        long = "cgroup",
        value_name = "PATH",
        conflicts_with = "pid"
    )]
    cgroup: Option<std::path::PathBuf>,
    /// Split the session into parts: close the current part after a time
    /// (30s, 10m, 1h, 1d) or a size (100M, 1G) and go on in a new one
    /// without a gap, as perf's --switch-output. Each part is a complete
    /// session (session.NNNNNN.pkl; session.pkl is the one being written);
    /// profreport reads them all as one. SIGHUP or `profctl rotate` rotates
    /// now.
    #[arg(long, value_name = "TIME|SIZE", value_parser = Rotate::parse)]
    rotate: Option<Rotate>,
    /// Keep at most N parts (the one being written included), deleting the
    /// oldest at each rotation, as perf's --switch-max-files.
    #[arg(long, value_name = "N", value_parser = parse_keep)]
    keep: Option<u32>,
    /// The session's disk budget (500M, 10G): the parts' total is kept
    /// within it by deleting the oldest closed parts (the part being
    /// written is never deleted), and copies (binaries kept from
    /// containers, JIT maps, kallsyms) count against it too, at most half
    /// of it, one user's at most a quarter. Default: 10 % of the free
    /// space at start, at most 4G, for copies only.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    max_disk: Option<u64>,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Start sampling in the background; returns once sampling is live.
    Start {
        #[command(flatten)]
        args: StartArgs,
        /// Run the daemon in this process, for a service manager: no fork,
        /// log lines on stderr, SIGTERM or SIGINT (or `profctl stop`) stops
        /// it cleanly with the footer written. See scripts/profkit.service.
        #[arg(long)]
        foreground: bool,
    },
    /// Stop: final drain, reconcile lost counts, write the footer, print a summary.
    Stop(DirArg),
    /// Force a sync round now; returns once it is on disk.
    Dump(DirArg),
    /// Show whether a daemon runs, what it samples and its counters.
    #[command(after_help = profkit_live::Status::JSON_KEYS)]
    Status {
        #[command(flatten)]
        dir: DirArg,
        /// One JSON object instead of text (keys below).
        #[arg(long)]
        json: bool,
    },
    /// Close the current part of the session and go on in a new one now
    /// (as SIGHUP to the daemon; see start --rotate).
    Rotate(DirArg),
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
    /// Push every part of a session to a fleet store (ClickHouse), symbolized
    /// here: each part once, whatever happens (run it again: nothing is sent
    /// twice). Parts a recorder still writes wait for the next run.
    Export {
        #[command(flatten)]
        dir: DirArg,
        /// The store: clickhouse://[USER[:PASS]@]HOST[:PORT]/DATABASE (http),
        /// clickhouses://… (https).
        url: String,
        /// The host name stored with the rows (default: the session's).
        #[arg(long)]
        host: Option<String>,
    },
    /// Pack the session and every binary and debug file it samples (keyed
    /// by build-id) into a tar, so a report elsewhere symbolizes the same.
    Archive {
        #[command(flatten)]
        dir: DirArg,
        /// The tar file to write.
        #[arg(short = 'o', long)]
        output: PathBuf,
        /// Never ask a debuginfod server (DEBUGINFOD_URLS) for the debug files of
        /// stripped binaries; those it fetched before (its cache) are still packed.
        #[arg(long)]
        offline: bool,
    },
    /// Internal: `--export`'s child: `export` of the daemon's session, the
    /// store's URL in the environment (PROFKIT_EXPORT_URL).
    #[command(name = "__export", hide = true)]
    ExportChild {
        #[command(flatten)]
        dir: DirArg,
        /// The host name stored with the rows.
        #[arg(long)]
        host: Option<String>,
        /// The daemon has stopped: its last part goes too.
        #[arg(long)]
        last: bool,
    },
    /// Internal: the daemon process; its start configuration as JSON.
    #[command(name = "__daemon", hide = true)]
    Daemon { config: String },
}

/// Parses `--call-graph` (clap calls this, so a bad value exits 2 with the message).
fn call_graph(s: &str) -> Result<CallGraph, String> {
    CallGraph::parse(s).map_err(|e| e.to_string())
}

/// The domain configuration of `start`/`record`: everything the daemon
/// child needs, validated here where the user sees the message; and the
/// rings chosen when `--buffer-pages` is not given.
fn start_config(
    a: &StartArgs,
    pid_override: Option<u32>,
) -> Result<(StartConfig, Option<RingChoice>)> {
    let call_graph = CallGraph::resolve(a.callgraph, a.call_graph)?;
    let rate = match (a.freq, a.period) {
        (_, Some(p)) => Rate::Period(p),
        (Some(f), None) => Rate::Frequency(f),
        (None, None) => Rate::Frequency(DEFAULT_FREQUENCY),
    };
    let mut c = StartConfig {
        session_dir: a.dir.session_dir.clone(),
        event: a.event.clone(),
        rate,
        pids: a.pid.clone(),
        cpus: a.cpu.as_deref().map(parse_cpu_list).transpose()?,
        // Off-CPU time is only useful with the stack that waited: frame
        // pointers unless --call-graph says otherwise.
        callgraph: call_graph.is_some() || a.off_cpu,
        user_stack: call_graph.map_or(0, CallGraph::user_stack),
        sync_interval_ms: a.sync_interval,
        buffer_pages: a.buffer_pages.unwrap_or(profkit_perf::DEFAULT_DATA_PAGES),
        user_only: a.user_only,
        kernel_only: a.kernel_only,
        enable_on_exec: a.enable_on_exec,
        cgroups: a.cgroups,
        cgroup: a.cgroup.clone(),
        parts: PartsConfig {
            rotate: a.rotate,
            keep: a.keep,
            max_disk: a.max_disk,
        },
        disk_budget: None,
        off_cpu: a.off_cpu,
        off_cpu_pages: a.off_cpu_pages,
        export: a.export.as_ref().map(|_| profkit_live::ExportConfig {
            host: a.export_host.clone(),
        }),
    };
    if let Some(p) = pid_override {
        c.pids = vec![p as i32];
        c.enable_on_exec = true;
    }
    c.sampler_config()?;
    let ring = match a.buffer_pages {
        None => {
            let r = RingChoice::for_start(&c)?;
            // The off-CPU rings share the limit with the sample rings.
            Some(if c.off_cpu && c.off_cpu_pages.is_none() {
                r.with_off_cpu()?
            } else {
                r
            })
        }
        Some(_) => None,
    };
    if let Some(r) = &ring {
        c.buffer_pages = r.pages();
        if r.off_cpu_pages.is_some() {
            c.off_cpu_pages = r.off_cpu_pages;
        }
    }
    Ok((c, ring))
}

/// Starts the daemon and waits until sampling is live.
fn start(a: &StartArgs, pid_override: Option<u32>) -> Result<u32> {
    let c = prepare(a, pid_override)?;
    let dir = SessionDir::create(&c.session_dir)?;
    let mut cmd = Command::new(std::env::current_exe().context("finding profctl's own path")?);
    cmd.arg("__daemon").arg(c.to_json());
    if let Some(url) = &a.export {
        // Checked here; the daemon and its export children get it in their
        // environment, never in their arguments (process titles).
        profkit_fleet::Target::parse(url)?;
        cmd.env(profkit_live::EXPORT_URL_ENV, url);
    }
    let child = spawn_daemon(cmd, &dir, DEFAULT_READY_TIMEOUT)?;
    Ok(child.id())
}

/// `start --foreground`: the daemon in this process until stopped.
fn start_foreground(a: &StartArgs) -> Result<()> {
    let c = prepare(a, None)?;
    let dir = SessionDir::create(&c.session_dir)?;
    // Said before announcing anything (the daemon would refuse too).
    if let DaemonState::Running { pid } = daemon_state(dir.path())? {
        return Err(profkit_daemon::Error::AlreadyRunning {
            dir: dir.path().into(),
            pid,
        }
        .into());
    }
    eprintln!(
        "profkit: sampling in the foreground (pid {}, session {}); SIGTERM, Ctrl-C or `profctl \
         stop` ends it",
        std::process::id(),
        c.session_dir.display()
    );
    profkit_live::run_daemon_exporting(&c, true, a.export.clone())?;
    eprintln!(
        "profkit: stopped; session {}",
        c.session_dir.join(SESSION_LOG).display()
    );
    Ok(())
}

/// The checked configuration of `start` (events probed, notes printed).
fn prepare(a: &StartArgs, pid_override: Option<u32>) -> Result<StartConfig> {
    let (mut c, ring) = start_config(a, pid_override)?;
    if let Some(r) = &ring {
        eprintln!("profkit: {r}");
    }
    if c.parts.rotate.is_none() && (c.parts.keep.is_some() || c.parts.max_disk.is_some()) {
        eprintln!(
            "profkit: note: --keep and --max-disk delete closed parts; without --rotate a part \
             closes only on SIGHUP or `profctl rotate`, so until then the session grows as one file"
        );
    }
    let note = match (c.probe(), ring) {
        (Err(e), Some(r)) if e.is_locked_memory() => {
            return Err(anyhow::Error::new(e).context(r.kernel_refused()));
        }
        (probed, _) => probed?,
    };
    if let Some(note) = note {
        eprintln!("{note}");
    }
    // Resolved here, where it is said, and used as said by the daemon.
    let budget = BudgetLimit::resolve(c.parts.max_disk, &c.session_dir);
    eprintln!("profkit: {}", budget.describe());
    c.disk_budget = Some(budget);
    if c.cgroups {
        match c.sampler_config()?.cgroups {
            profkit_perf::CgroupRecording::Proc => eprintln!(
                "profkit: cgroups read from /proc/PID/cgroup once per process (the kernel has no \
                 PERF_SAMPLE_CGROUP, Linux 5.7+): a process that moves is counted in its first group"
            ),
            _ => eprintln!("profkit: cgroups: each sample's, from the kernel (PERF_SAMPLE_CGROUP)"),
        }
    }
    Ok(c)
}

/// Finishes a dead daemon's session and says what was kept.
fn finalize(dir: &DirArg) -> Result<Summary> {
    let f = finalize_dead(&dir.session_dir, &ExtrasSources::default())?;
    if f.already_complete {
        eprintln!(
            "profkit: the daemon had died after finishing the session ({} rounds, footer written); nothing was lost at stop",
            f.rounds
        );
        return Ok(f.summary);
    }
    eprintln!(
        "profkit: the daemon had died; finalized {} complete rounds ({} samples){}; samples still in the rings and in the round being written when it died (at most one round) are lost and not counted",
        f.rounds,
        f.summary.samples(),
        if f.truncated > 0 { format!(", cut a torn last round of {} bytes", f.truncated) } else { String::new() }
    );
    Ok(f.summary)
}

fn archive(dir: &DirArg, output: &std::path::Path, offline: bool) -> Result<()> {
    let cfg = profkit_debuginfod::Config::from_env()?;
    let debug = debug_files::ArchiveDebugFiles {
        dir: PathBuf::from(SYSTEM_DEBUG_DIR),
        client: profkit_debuginfod::Client::new(profkit_debuginfod::Config { offline, ..cfg })
            .with_budget(profkit_debuginfod::RUN_BUDGET),
    };
    let a = profkit_live::archive_with(&dir.session_dir, output, &debug)?;
    // The archive itself may be on standard output (`-o /dev/stdout`):
    // the summary then goes to standard error.
    let mut said: Box<dyn std::io::Write> =
        if profkit_untrusted::named_descriptor(output) == Some(1) {
            Box::new(std::io::stderr())
        } else {
            Box::new(std::io::stdout())
        };
    writeln!(
        said,
        "profkit: archived the session, {} binaries and {} debug files ({} bytes) into {}; unpack it anywhere and run `profreport --session-dir DIR`",
        a.binaries,
        a.debug_files,
        a.bytes,
        output.display()
    )?;
    let st = debug.client.stats();
    if st.requests > 0 {
        writeln!(
            said,
            "profkit: debuginfod: fetched {} debug files ({} bytes) in {} requests",
            st.fetched, st.bytes, st.requests
        )?;
    }
    for s in a.skipped {
        writeln!(said, "note: not archived: {}", profkit_eventlog::shown(&s))?;
    }
    Ok(())
}

/// `profctl export` (and `--export`'s child, `last`: the daemon has
/// closed its last part and waits for this before it exits).
fn export(dir: &DirArg, url: &str, host: Option<&str>, last: bool) -> Result<()> {
    let target = profkit_fleet::Target::parse(url)?;
    let shown = target.redacted();
    let client = profkit_fleet::Client::new(target);
    let recording = !last
        && matches!(
            profkit_daemon::daemon_state(&dir.session_dir)?,
            profkit_daemon::DaemonState::Running { .. }
        );
    // Each rotation meets the same binaries: their symbol indexes make the
    // later parts' exports cheap.
    let sources = profkit_report::SymbolSources {
        index_cache: profkit_report::IndexCacheOptions::default_dir()
            .map(profkit_report::IndexCacheOptions::new),
        ..profkit_report::SymbolSources::default()
    };
    let done = profkit_report::fleet::export_session(
        &client,
        &dir.session_dir,
        host.unwrap_or(""),
        &sources,
        recording,
    )
    .with_context(|| format!("exporting {} to {shown}", dir.session_dir.display()))?;
    if let Some(through) = done.through {
        profkit_live::write_exported_through(&dir.session_dir, through).with_context(|| {
            format!(
                "writing {} in {}",
                profkit_live::EXPORT_STATE_FILE,
                dir.session_dir.display()
            )
        })?;
    }
    println!(
        "profkit: exported {} parts ({} samples, {} rows, {} bytes) to {shown}; {} were there already{}",
        done.inserted,
        done.samples,
        done.rows,
        done.bytes,
        done.already,
        if done.still_recording > 0 {
            "; the part being recorded waits for the next export"
        } else {
            ""
        }
    );
    if done.folded_rows > 0 {
        println!(
            "profkit: {} rows of parts past the store's {} rows per part were folded into \
             coarser ones (their samples kept; threads or stacks merged as {})",
            done.folded_rows,
            profkit_fleet::MAX_ROWS,
            profkit_report::fleet::FOLDED
        );
    }
    Ok(())
}

/// `profctl record`: the command under a session of its own
/// ([`profkit_live::record`]), its exit status as ours.
fn record(a: &StartArgs, command: &[String]) -> Result<ExitCode> {
    // The flags, checked before the command is started (the events are
    // opened on it later).
    start_config(a, None)?;
    let run = RecordRun {
        session_dir: &a.dir.session_dir,
        command,
        system_wide: a.all_cpus,
    };
    let (status, summary) = profkit_live::record(&run, |pid| start(a, pid))?;
    print!("{}", summary.stop_text());
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
        Cmd::Start {
            args: a,
            foreground: true,
        } => start_foreground(&a)?,
        Cmd::Start { args: a, .. } => {
            let pid = start(&a, None)?;
            let parts = PartsConfig {
                rotate: a.rotate,
                keep: a.keep,
                max_disk: a.max_disk,
            };
            println!(
                "profkit: sampling started (daemon pid {pid}, session {}){}",
                a.dir.session_dir.display(),
                parts
                    .describe()
                    .map(|d| format!("; {d}"))
                    .unwrap_or_default()
            );
        }
        Cmd::Daemon { config } => run_daemon(&StartConfig::from_json(&config)?)?,
        Cmd::Stop(d) => match daemon_state(&d.session_dir)? {
            DaemonState::Dead { .. } => print!("{}", finalize(&d)?.stop_text()),
            _ => print!("{}", control::stop(&d.session_dir)?.stop_text()),
        },
        Cmd::Dump(d) => {
            control::request(&d.session_dir, Request::Dump)?;
            println!(
                "profkit: dumped; everything sampled so far is in {}",
                d.session_dir.join(SESSION_LOG).display()
            );
        }
        Cmd::Status { dir: d, json } => {
            let status = control::status(&d.session_dir)?;
            if json {
                println!("{}", serde_json::to_string(&status)?);
            } else {
                print!("{}", status.text());
            }
        }
        Cmd::Rotate(d) => {
            let r = control::rotate(&d.session_dir)?;
            println!(
                "profkit: now writing part {} in {}{}",
                r.part,
                d.session_dir.join(SESSION_LOG).display(),
                match r.removed.len() {
                    0 => String::new(),
                    n => format!("; {n} old parts deleted (retention)"),
                }
            );
        }
        Cmd::Reset { dir, yes } => {
            if !yes {
                bail!("reset discards every sample so far: confirm with `profctl reset --yes`");
            }
            control::request(&dir.session_dir, Request::Reset)?;
            println!("profkit: samples discarded; recording continues");
        }
        Cmd::Record { args, command } => {
            if !args.pid.is_empty() {
                eprintln!(
                    "profctl: record profiles the command it runs; -p/--pid is for `profctl start -p PID` (see profctl --help)"
                );
                return Ok(ExitCode::from(2));
            }
            return record(&args, &command);
        }
        Cmd::Export { dir, url, host } => export(&dir, &url, host.as_deref(), false)?,
        Cmd::ExportChild { dir, host, last } => {
            let url = std::env::var(profkit_live::EXPORT_URL_ENV)
                .context("__export: no store URL in the environment")?;
            export(&dir, &url, host.as_deref(), last)?
        }
        Cmd::Archive {
            dir,
            output,
            offline,
        } => archive(&dir, &output, offline)?,
    }
    Ok(ExitCode::SUCCESS)
}

#[path = "../shared/debug_files.rs"]
mod debug_files;
#[path = "../shared/usage.rs"]
mod usage;

fn main() -> ExitCode {
    let opt: Opt = match usage::parse_or_exit("profctl") {
        Ok(opt) => opt,
        Err(code) => return code,
    };
    match run(opt) {
        Ok(c) => c,
        Err(e) => {
            eprintln!(
                "profctl: {}",
                profkit_report::printable(&usage::error_text(&e))
            );
            // A bad value on the command line is a usage error, like clap's
            // (exit 2). Anything wrong with what is on disk (a session
            // directory that is missing, a file, not a session) is not:
            // exit 1, whatever the cause, as profreport does.
            let usage = e.chain().any(|c| {
                c.downcast_ref::<profkit_perf::Error>()
                    .is_some_and(perf_is_usage)
                    || c.downcast_ref::<profkit_live::Error>()
                        .is_some_and(|e| e.is_usage())
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
