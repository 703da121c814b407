//! `profreport`: opreport-style reports of a profkit session.
//! Flags and glue only: the work is in `profkit-report`.
#![forbid(unsafe_code)]

mod builder;
mod flags;
mod progress;
mod scratch;

use flags::{validate, Config, Opt};
use progress::Bar;
use scratch::Scratch;

use std::io::{self, BufWriter, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, Result};
use profkit_daemon::{daemon_state, DaemonState};
use profkit_report::stream::write_stream;
use profkit_report::{
    build_report, build_report_owned, diff_reports, printable, render_colored, write_diff,
    write_flamegraph, Column, Format, Liveness, Report, ReportOptions, Session, TimeSpec,
    SESSION_FILE,
};

fn liveness(dir: &Path) -> Liveness {
    let dir = if dir.is_file() {
        dir.parent().unwrap_or(Path::new("."))
    } else {
        dir
    };
    match daemon_state(dir) {
        Ok(DaemonState::Running { .. }) => Liveness::Running,
        Ok(_) => Liveness::NotRunning,
        Err(_) => Liveness::Unknown,
    }
}

/// Opens a session (all parts of a rotated one; with `--time`, only the
/// parts the window needs).
fn open(dir: &Path, window: Option<&TimeSpec>) -> Result<Session> {
    let mut s = Session::open_window(dir, window)
        .with_context(|| format!("reading the session in {}", dir.display()))?;
    s.set_liveness(liveness(dir));
    Ok(s)
}

fn print_warnings(report: &Report, verbose: bool) {
    for line in report.warning_lines(verbose) {
        eprintln!("profreport: warning: {}", profkit_eventlog::shown(&line));
    }
}

/// Where output goes: standard output, or what `-o` names, opened by the
/// one checked opener for outputs ([`profkit_untrusted::create_output`]:
/// `/dev/null`, `/dev/stdout`, a pipe or FIFO of ours are written; a
/// planted link or another user's file is refused untouched).
fn output(path: Option<&Path>) -> Result<Box<dyn Write>> {
    let Some(p) = path else {
        return Ok(Box::new(BufWriter::new(io::stdout().lock())));
    };
    let out = profkit_untrusted::create_output(p).map_err(|e| {
        let what = profkit_untrusted::Refusal::of(&e).map(|r| match r {
            profkit_untrusted::Refusal::Link { .. } => {
                "is a symbolic link: give the path of a file, a device or a FIFO (or leave out -o for standard output)".to_string()
            }
            profkit_untrusted::Refusal::Owner { owner, .. } => format!(
                "belongs to uid {owner}, not to you (uid {}): remove it or choose another name",
                rustix::process::geteuid().as_raw()
            ),
            r => format!("is {r}"),
        });
        match what {
            Some(w) => anyhow::anyhow!("{} {w}", p.display()),
            None => anyhow::Error::new(e).context(format!("creating {}", p.display())),
        }
    })?;
    Ok(Box::new(BufWriter::new(out)))
}

/// `out.svg` → `out-cpu3.svg`.
fn per_cpu_path(path: &Path, cpu: u32) -> PathBuf {
    let stem = path
        .file_stem()
        .map_or_else(|| "flamegraph".into(), |s| s.to_string_lossy().into_owned());
    let name = match path.extension() {
        Some(ext) => format!("{stem}-cpu{cpu}.{}", ext.to_string_lossy()),
        None => format!("{stem}-cpu{cpu}"),
    };
    path.with_file_name(name)
}

/// `--from URL`: the report of a fleet store, computed by its server.
fn run_fleet(cfg: &Config, url: &str, fleet: &profkit_report::fleet::FleetOptions) -> Result<()> {
    let target = profkit_fleet::Target::parse(url)?;
    let client = profkit_fleet::Client::new(target);
    let mut out = output(cfg.output.as_deref())?;
    if cfg.format.needs_stacks() {
        profkit_report::fleet::fleet_write_stacks(
            &client,
            fleet,
            &cfg.options,
            cfg.format,
            &mut out,
        )?;
        out.flush()?;
        return Ok(());
    }
    // --diff OLD NEW: between hosts, time ranges or builds.
    if let Some((old, new)) = &cfg.diff {
        let of = |side: &Path| -> Result<profkit_report::Report> {
            let side = profkit_report::fleet::DiffSide::parse(&side.to_string_lossy())?;
            let (f, opts) = side.apply(fleet, &cfg.options);
            let opts = ReportOptions {
                symbols: true,
                threshold: 0.0,
                ..opts
            };
            Ok(profkit_report::fleet::fleet_report(&client, &f, &opts)?)
        };
        let d = diff_reports(&of(old)?, &of(new)?, cfg.options.threshold);
        write_diff(&d, cfg.format, &mut out)?;
        out.flush()?;
        return Ok(());
    }
    let report = profkit_report::fleet::fleet_report(&client, fleet, &cfg.options)?;
    print_warnings(&report, cfg.verbose);
    render_colored(&report, cfg.format, &mut out, false)?;
    out.flush()?;
    Ok(())
}

fn run(cfg: Config) -> Result<()> {
    if let Some((url, fleet)) = &cfg.from {
        return run_fleet(&cfg, url, fleet);
    }
    // --build-index: held to the end of the run.
    let _builder = if cfg.build_index {
        match builder::enter(cfg.sources.index_cache.as_ref()) {
            Some(lock) => lock,
            None => return Ok(()),
        }
    } else {
        None
    };
    let output = |path: Option<&Path>| -> Result<Box<dyn Write>> {
        if cfg.build_index {
            return Ok(Box::new(io::sink()));
        }
        output(path)
    };
    let bar = Bar::new(cfg.progress);
    if let Some((old, new)) = &cfg.diff {
        let old_s = open(old, None)?;
        let new_s = open(new, None)?;
        let old_r = build_report(
            std::slice::from_ref(&old_s),
            &ReportOptions {
                threshold: 0.0,
                ..cfg.options.clone()
            },
            &cfg.sources,
            &bar,
        )
        .with_context(|| format!("building the report of {}", old.display()))?;
        let new_r = build_report(
            std::slice::from_ref(&new_s),
            &ReportOptions {
                threshold: 0.0,
                ..cfg.options.clone()
            },
            &cfg.sources,
            &bar,
        )
        .with_context(|| format!("building the report of {}", new.display()))?;
        print_warnings(&old_r, cfg.verbose);
        print_warnings(&new_r, cfg.verbose);
        let d = diff_reports(&old_r, &new_r, cfg.options.threshold);
        let mut out = output(cfg.output.as_deref())?;
        write_diff(&d, cfg.format, &mut out)?;
        out.flush()?;
        return Ok(());
    }
    let mut sessions = Vec::new();
    for dir in &cfg.dirs {
        sessions.push(open(dir, cfg.options.time.as_ref())?);
    }
    let _scratch = match &cfg.import {
        Some(perf_data) => {
            let scratch = Scratch::new()?;
            let options = import_options(&cfg.sources);
            let summary = profkit_import::import_perf_data_with(
                perf_data,
                &scratch.0.join(SESSION_FILE),
                &options,
            )
            .with_context(|| format!("importing {}", perf_data.display()))?;
            if summary.bad_records > 0 {
                eprintln!(
                    "profreport: warning: {}: {} records could not be read (a truncated file?)",
                    perf_data.display(),
                    summary.bad_records
                );
            }
            if summary.skipped > 0 {
                eprintln!(
                    "profreport: warning: {}: {} samples without an ip or thread skipped",
                    perf_data.display(),
                    summary.skipped
                );
            }
            for w in &summary.warnings {
                eprintln!(
                    "profreport: warning: {}: {}",
                    perf_data.display(),
                    profkit_eventlog::shown(w)
                );
            }
            let mut s = Session::open(&scratch.0).context("reading the imported session")?;
            s.set_liveness(Liveness::NotRunning);
            sessions.push(s);
            Some(scratch)
        }
        None => None,
    };
    if let Some(f) = cfg.stream {
        let mut out = output(cfg.output.as_deref())?;
        let summary = write_stream(f, &sessions, &cfg.options, &cfg.sources, &bar, &mut out)
            .with_context(|| format!("writing --format {}", f.name()))?;
        out.flush()?;
        let notes = summary.notes();
        let shown = if cfg.verbose { notes.len() } else { 10 };
        for n in notes.iter().take(shown) {
            eprintln!("profreport: warning: {}", profkit_eventlog::shown(n));
        }
        if notes.len() > shown {
            eprintln!(
                "profreport: warning: {} more (-v shows them)",
                notes.len() - shown
            );
        }
        return Ok(());
    }
    if cfg.wall {
        let wall = profkit_report::build_wall(&sessions, &cfg.options, &bar)
            .context("building the --wall report")?;
        for w in &wall.warnings {
            eprintln!("profreport: warning: {}", profkit_eventlog::shown(w));
        }
        let mut out = output(cfg.output.as_deref())?;
        profkit_report::write_wall(&wall, cfg.format, &mut out)?;
        out.flush()?;
        return Ok(());
    }
    let report = build_report_owned(sessions, &cfg.options, &cfg.sources, &bar)
        .context("building the report")?;
    print_warnings(&report, cfg.verbose);
    if cfg.format == Format::Flamegraph && cfg.options.separate.cpu && !cfg.build_index {
        let base = cfg.output.as_deref().unwrap_or(Path::new("flamegraph.svg"));
        for (i, col) in report.columns.iter().enumerate() {
            let Column::Cpu(cpu) = col else { continue };
            let path = per_cpu_path(base, *cpu);
            let mut out = output(Some(&path))?;
            write_flamegraph(&report, Some(i), &mut out)?;
            out.flush()?;
            eprintln!("profreport: wrote {}", path.display());
        }
        return Ok(());
    }
    let mut out = output(cfg.output.as_deref())?;
    let color = cfg.output.is_none()
        && io::stdout().is_terminal()
        && std::env::var_os("NO_COLOR").is_none();
    render_colored(&report, cfg.format, &mut out, color)?;
    out.flush()?;
    Ok(())
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<io::Error>()
            .is_some_and(|io| io.kind() == io::ErrorKind::BrokenPipe)
    })
}

#[path = "../../shared/usage.rs"]
mod usage;

fn main() -> ExitCode {
    // Before anything is allocated: large blocks go back when freed, so
    // each phase's peak is its own (docs/PERFORMANCE.md, issue 32).
    profkit_perf::return_freed_blocks();
    let opt: Opt = match usage::parse_or_exit("profreport") {
        Ok(opt) => opt,
        Err(code) => return code,
    };
    let cfg = match validate(opt) {
        Ok(cfg) => cfg,
        Err(msg) => {
            eprintln!("profreport: {}", printable(&msg));
            return ExitCode::from(2);
        }
    };
    let build_later = !cfg.build_index && cfg.sources.index_cache.is_some();
    let result = run(cfg);
    if build_later && result.as_ref().err().is_none_or(is_broken_pipe) {
        builder::start_if_needed();
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("profreport: {}", printable(&usage::error_text(&e)));
            ExitCode::from(1)
        }
    }
}

/// How an import's DWARF unwinding finds the debug file of a binary without
/// unwind tables: the debug dirs, the debuginfod cache, then its servers
/// (unless offline).
fn import_options(sources: &profkit_report::SymbolSources) -> profkit_import::ImportOptions {
    let mut f = profkit_import::DebugFrameSources::default();
    if !sources.debug_dirs.is_empty() {
        f.debug_dirs = sources.debug_dirs.clone();
    }
    if let Some(d) = &sources.debuginfod {
        f.debuginfod_cache = Some(d.cache().to_owned());
        f.fetch_timeout = d.client().config().max_time.unwrap_or(f.fetch_timeout);
        let d = d.clone();
        f.fetch = Some(std::sync::Arc::new(move |id: &[u8]| {
            match d.client().fetch(id, &profkit_debuginfod::Kind::Debuginfo) {
                Ok(profkit_debuginfod::Fetched::Found { path, .. }) => Some(path),
                _ => None,
            }
        }));
    }
    profkit_import::ImportOptions { debug_frame: f }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_consistent() {
        Opt::command().debug_assert();
    }

    #[test]
    fn per_cpu_flame_graphs_are_named_after_the_output() {
        assert_eq!(
            per_cpu_path(Path::new("d/out.svg"), 3),
            PathBuf::from("d/out-cpu3.svg")
        );
        assert_eq!(per_cpu_path(Path::new("out"), 0), PathBuf::from("out-cpu0"));
    }
}
