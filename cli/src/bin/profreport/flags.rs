//! `profreport`'s command line: the flags, their value parsers and the
//! checks clap cannot make ([`validate`]), which turn them into a
//! [`Config`] or a usage error (exit 2).

use std::io::{self, IsTerminal};
use std::path::PathBuf;

use clap::Parser;
use profkit_report::stream::StreamFormat;
use profkit_report::{
    AnnotateOptions, Format, OffCpuMode, ProfileSpec, ReportOptions, Separate, SortKey,
    SymbolSources, TimeSpec,
};

const AFTER_HELP: &str = "PROFILE SPECS (positional, combinable; OProfile's syntax):
  cpu:0,1,4-7          only samples taken on these CPUs
  tgid:N[,M]           only these processes
  tid:N[,M]            only these threads
  image:GLOB[,GLOB]    only these binaries (matched against the file name, or the full path
                       when the glob has a '/'); with --separate=lib also their libraries
  image-exclude:GLOB   not these binaries
  A word without a tag is an image: `profreport /usr/bin/foo` = `image:/usr/bin/foo`.

EXIT STATUS:
  0  report written (also when stdout was closed early, e.g. by `head`)
  1  no session, or it cannot be read
  2  bad command line (flag value or profile spec)

EXAMPLES:
  profreport                           binaries, most samples first (./profkit_data)
  profreport -l image:myapp            functions of myapp
  profreport -l --separate=cpu         one samples/% column pair per CPU
  profreport --separate=kernel         libraries and kernel under each application
  profreport -l --separate=thread tgid:1234
  profreport --timeline=4              samples and losses per CPU per second (4 rounds)
  profreport --timeline=10ms           ... per 10 ms, each sample by its own time
  profreport -l --format json > r.json
  profreport --merge run1 run2 -l      two sessions added up

CALL GRAPHS (sessions recorded with `profctl record -g` or `--call-graph dwarf`):
  profreport -c                        callers and callees of each function (opreport -c)
  profreport -c -t 1 --children        ... functions with at least 1 % inclusive, by inclusive share
  profreport -l --children             flat profile with an inclusive column (perf report --children)
  profreport --format collapsed        folded stacks, for flamegraph.pl and friends
  profreport --format collapsed --inline   ... with inlined functions as frames, `NAME (inlined)`
  profreport --format flamegraph > out.svg
  profreport --format flamegraph --separate=cpu -o out.svg   out-cpu0.svg, out-cpu1.svg, ...
  profreport --format pprof > profile.pb.gz                   go tool pprof, Pyroscope, Parca
  profreport --merge host1 host2 host3 --format pprof -o fleet.pb.gz

SAMPLE STREAMS (every sample in time order, with its thread, time and call stack):
  profreport --format script           perf script's text (-F comm,pid,tid,cpu,time,event,ip,sym,dso):
                                       stackcollapse-perf.pl, FlameGraph and perf script readers take it
  profreport --format script | stackcollapse-perf.pl | flamegraph.pl > out.svg
  profreport --format jsonl tgid:1234 --time 10,20 > s.jsonl   one JSON object per sample (jq, pandas)
  profreport --format firefox -o profile.json   for https://profiler.firefox.com (Load a profile from file)
  profreport --format speedscope -o s.json      for https://www.speedscope.app (or npx speedscope s.json)
  profreport --format firefox --separate=cpu -o cpus.json   one track per CPU, stacks under their task
  profreport --format speedscope --off-cpu -o s.json        off-CPU time (sessions recorded with --off-cpu)
  (profile specs, --time, --merge, --import and -o apply; sessions written before per-sample
  times place each sample at the middle of its sync round, and say so)

OFF-CPU TIME (sessions recorded with `profctl start --off-cpu`):
  profreport --off-cpu -l              where threads blocked: off-CPU ms per function (blocked)
  profreport --off-cpu=runnable -l     ... time spent runnable, waiting for a CPU
  profreport --off-cpu=all -c          callers of the switch-outs, blocked and runnable
  profreport --off-cpu --format flamegraph > offcpu.svg        Off-CPU Time Flame Graph (us)
  profreport --wall                    per thread: on-CPU, blocked and runnable ms, and their sum

OTHER INPUTS:
  profreport --import perf.data -l     a `perf record` file, with every report above
  profreport --diff OLD_DIR NEW_DIR    per symbol, the change in share, largest first";

/// Parses `--separate` (clap calls this, so a bad value exits 2 with the message).
fn separate(s: &str) -> Result<Separate, String> {
    Separate::parse(s).map_err(|e| e.to_string())
}

/// `--separate`: a report's separations, and `host` (fleet reports only).
#[derive(Clone, Debug)]
struct SeparateArg {
    sep: Separate,
    host: bool,
}

/// Parses `--separate` with `host` among the words.
fn separate_arg(s: &str) -> Result<SeparateArg, String> {
    let host = s.split(',').any(|w| w.trim() == "host");
    let rest: Vec<&str> = s.split(',').filter(|w| w.trim() != "host").collect();
    let sep = if rest.is_empty() {
        Separate::default()
    } else {
        separate(&rest.join(","))?
    };
    Ok(SeparateArg { sep, host })
}

fn sort_key(s: &str) -> Result<SortKey, String> {
    s.parse().map_err(|e: profkit_report::Error| e.to_string())
}

/// What `--format` asks for: a report, or a stream of samples.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OutFormat {
    Report(Format),
    Stream(StreamFormat),
}

fn format(s: &str) -> Result<OutFormat, String> {
    if let Ok(f) = s.parse::<StreamFormat>() {
        return Ok(OutFormat::Stream(f));
    }
    s.parse()
        .map(OutFormat::Report)
        .map_err(|e: profkit_report::Error| {
            format!("{e}, or a stream of samples: {}", StreamFormat::ALLOWED)
        })
}

fn demangle(s: &str) -> Result<bool, String> {
    match s {
        "none" => Ok(false),
        "normal" | "smart" => Ok(true),
        _ => Err(format!(
            "bad value '{s}' for --demangle: one of none, normal"
        )),
    }
}

fn threshold(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim_end_matches('%')
        .parse()
        .map_err(|_| format!("bad value '{s}' for --threshold: a percentage from 0 to 100"))?;
    if (0.0..=100.0).contains(&v) {
        Ok(v)
    } else {
        Err(format!(
            "bad value '{s}' for --threshold: a percentage from 0 to 100"
        ))
    }
}

fn time_window(s: &str) -> Result<TimeSpec, String> {
    TimeSpec::parse(s).map_err(|e| e.to_string())
}

fn asm_syntax(s: &str) -> Result<bool, String> {
    match s {
        "att" => Ok(false),
        "intel" => Ok(true),
        _ => Err(format!(
            "bad value '{s}' for --asm-syntax: att (objdump's and perf's default) or intel"
        )),
    }
}

fn off_cpu_mode(s: &str) -> Result<OffCpuMode, String> {
    OffCpuMode::parse(s).map_err(|e| e.to_string())
}

/// A `--timeline` step: sync rounds per line, or a time per line.
#[derive(Clone, Copy, Debug, PartialEq)]
enum TimelineStep {
    Rounds(u32),
    Every(u64),
}

fn timeline_step(s: &str) -> Result<TimelineStep, String> {
    let bad = || {
        format!(
            "bad value '{s}' for --timeline: a number of sync rounds per line (1 or more), or a \
             time per line with its unit (500us, 10ms, 1s, 1.5s)"
        )
    };
    if let Ok(n) = s.parse::<u32>() {
        return if n > 0 {
            Ok(TimelineStep::Rounds(n))
        } else {
            Err(bad())
        };
    }
    let (num, scale) = [
        ("ns", 1.0),
        ("us", 1e3),
        ("µs", 1e3),
        ("ms", 1e6),
        ("s", 1e9),
    ]
    .iter()
    .find_map(|&(unit, scale)| s.strip_suffix(unit).map(|n| (n, scale)))
    .ok_or_else(bad)?;
    match num.parse::<f64>() {
        Ok(v) if v.is_finite() && v * scale >= 1.0 && v * scale < 1e18 => {
            Ok(TimelineStep::Every((v * scale).round() as u64))
        }
        _ => Err(bad()),
    }
}

#[derive(Parser, Debug)]
#[command(
    name = "profreport",
    version,
    about = "Report a profkit session: binaries, symbols, per CPU or thread (opreport-style)",
    after_help = AFTER_HELP
)]
pub(super) struct Opt {
    /// Profile specs: cpu:LIST tgid:LIST tid:LIST image:GLOB image-exclude:GLOB.
    #[arg(value_name = "SPEC")]
    specs: Vec<String>,
    /// Session directory (or its session.pkl) [default: profkit_data]. A rotated session's
    /// parts (session.NNNNNN.pkl) are read as one session; name a part file to read it alone.
    #[arg(long, env = "PROFKIT_SESSION_DIR", value_name = "DIR")]
    session_dir: Option<PathBuf>,
    /// Report from a fleet store (ClickHouse) instead of a session:
    /// clickhouse://[USER[:PASS]@]HOST[:PORT]/DATABASE; the server computes the rows.
    /// With -l, -c, --children, --separate=cpu,thread,cgroup,host, --host, specs, --time,
    /// every --format, and --diff OLD NEW where a side is words "host:GLOB time:WINDOW
    /// build:HEX" (a bare word is a host glob).
    #[arg(long, value_name = "URL", conflicts_with_all = ["session_dir", "merge", "import", "timeline", "annotate", "off_cpu", "wall"])]
    from: Option<String>,
    /// With --from: only hosts matching this glob (* and ?).
    #[arg(long, value_name = "GLOB", requires = "from")]
    host: Option<String>,
    /// Report these sessions added up (with --session-dir, that one too);
    /// it takes every word up to the next flag, so put specs before it.
    #[arg(long, num_args = 1.., value_name = "DIR")]
    merge: Vec<PathBuf>,
    /// One row per symbol instead of per binary.
    #[arg(short = 'l', long)]
    symbols: bool,
    /// Add the application column: the executable of the process.
    #[arg(long)]
    app: bool,
    /// Split by cpu, thread, lib, kernel, all or none (comma list).
    #[arg(long, value_name = "LIST", value_parser = separate_arg, default_value = "none")]
    separate: SeparateArg,
    /// Leave out rows below PCT percent.
    #[arg(short = 't', long, value_name = "PCT", value_parser = threshold, default_value = "0")]
    threshold: f64,
    /// Order rows by samples, symbol, image or vma.
    #[arg(short = 's', long, value_name = "KEY", value_parser = sort_key, default_value = "samples")]
    sort: SortKey,
    /// Reverse the order.
    #[arg(short = 'r', long, alias = "reverse-sort")]
    reverse: bool,
    /// Demangle C++ and Rust names: none or normal.
    #[arg(short = 'D', long, value_name = "MODE", value_parser = demangle, default_value = "normal",
          action = clap::ArgAction::Set)]
    demangle: bool,
    /// Show each symbol's start address (with -l).
    #[arg(short = 'w', long, requires = "symbols")]
    show_address: bool,
    /// Percentages of the whole session, not of the samples shown.
    #[arg(long)]
    global_percent: bool,
    /// Only samples in the processes' own executables (no libraries, no kernel).
    #[arg(short = 'x', long)]
    exclude_dependent: bool,
    /// Show each symbol's source file:line (with -l).
    #[arg(short = 'g', long, requires = "symbols")]
    debug_info: bool,
    /// Full paths of binaries.
    #[arg(short = 'f', long)]
    long_filenames: bool,
    /// Samples and losses per CPU per sync round, per N rounds, or per
    /// time step (10ms, 1s: each sample in the line of its own time).
    #[arg(long, value_name = "N|TIME", num_args = 0..=1, default_missing_value = "1", value_parser = timeline_step,
          conflicts_with_all = ["symbols", "separate", "sort", "threshold"])]
    timeline: Option<TimelineStep>,
    /// Output format: text, json, csv, collapsed (folded stacks), flamegraph (SVG) or
    /// pprof (gzipped profile.proto); or every sample in time order: script (perf script's
    /// text), jsonl (JSON lines), firefox (Firefox Profiler) or speedscope.
    #[arg(long, value_name = "FMT", value_parser = format, default_value = "text")]
    format: OutFormat,
    /// Call graph: each function with its callers and callees (needs a session recorded with -g
    /// or --call-graph).
    #[arg(short = 'c', long, conflicts_with = "timeline")]
    callgraph: bool,
    /// Inclusive samples (the function and everything it called) per symbol; sort and cut by them.
    #[arg(long, conflicts_with = "timeline")]
    children: bool,
    /// Expand call-graph frames into their inlined functions, as perf's --inline: stacks, -c
    /// and --children show each function inlined into a frame as a frame of its own,
    /// `NAME (inlined)`, from the binary's DWARF (or its debug file). Costs time and memory:
    /// binaries are read whole.
    #[arg(long, conflicts_with = "timeline")]
    inline: bool,
    /// Annotate SYMBOL (or every function above --threshold): samples per source line, and per
    /// instruction with --assembly (opannotate, perf annotate).
    #[arg(long, value_name = "SYMBOL", num_args = 0..=1, default_missing_value = "",
          conflicts_with_all = ["timeline", "callgraph", "children", "diff"])]
    annotate: Option<String>,
    /// With --annotate: samples per source line (the default where line information is found).
    #[arg(long, requires = "annotate")]
    source: bool,
    /// With --annotate: samples per instruction (with --source: instructions under their lines).
    #[arg(long, requires = "annotate")]
    assembly: bool,
    /// With --annotate: look here first for source files (the recorded path under DIR, then
    /// its shorter tails: DIR/src/x.c, DIR/x.c). A file at its recorded path is shown only if
    /// the binary's owner could read it; files under DIR are shown as found.
    #[arg(long = "source-dir", value_name = "DIR", requires = "annotate")]
    source_dirs: Vec<PathBuf>,
    /// With --annotate --assembly: att (objdump's and perf's default) or intel.
    #[arg(short = 'M', long = "asm-syntax", value_name = "SYNTAX", value_parser = asm_syntax,
          default_value = "att", requires = "annotate", action = clap::ArgAction::Set)]
    intel: bool,
    /// Only the samples of a window of time: START,END in seconds from the session's start
    /// (10,20; 10,; ,20), wall-clock UTC (2026-11-26 10:00:00,2026-11-26 10:05:00 or
    /// 10:00:00,10:05:00), or percent of the session (10%-20%; 10%/2: the second tenth).
    /// Exact to the sync round (a round counts where its middle falls).
    #[arg(long, value_name = "WINDOW", value_parser = time_window, conflicts_with = "diff")]
    time: Option<TimeSpec>,
    /// Count off-CPU time instead of samples: each interval a thread spent off its CPU, at the
    /// place it switched out, weighted by its length (ms). KIND: blocked (slept: I/O, locks;
    /// the default), runnable (preempted, waiting for a CPU) or all. Works with every view
    /// (-l, -c, --children, --separate, specs, --time, json, csv, collapsed in us, flamegraph,
    /// pprof, --diff, --merge). Needs a session recorded with `profctl start --off-cpu`.
    #[arg(long = "off-cpu", value_name = "KIND", num_args = 0..=1, require_equals = true,
          default_missing_value = "blocked", value_parser = off_cpu_mode,
          conflicts_with_all = ["timeline", "annotate"])]
    off_cpu: Option<OffCpuMode>,
    /// Per thread (command, pid, tid): on-CPU ms (samples × the sampling period), blocked ms,
    /// runnable ms and their sum, most first. Needs a session recorded with
    /// `profctl start --off-cpu`.
    #[arg(long, conflicts_with_all = ["off_cpu", "timeline", "annotate", "callgraph", "children",
          "diff", "symbols", "separate"])]
    wall: bool,
    /// Write the report to FILE instead of standard output (with --format flamegraph
    /// --separate=cpu: one FILE-cpuN.svg per CPU).
    #[arg(short = 'o', long, value_name = "FILE")]
    output: Option<PathBuf>,
    /// Read a perf.data file (written by `perf record`; `-`: standard input, from `perf record -o -`) as the session.
    #[arg(long, value_name = "PERF_DATA", conflicts_with = "session_dir")]
    import: Option<PathBuf>,
    /// Per symbol, the change in share from the OLD session to the NEW one.
    #[arg(long, num_args = 2, value_names = ["OLD_DIR", "NEW_DIR"],
          conflicts_with_all = ["merge", "session_dir", "import", "timeline", "callgraph", "children"])]
    diff: Vec<PathBuf>,
    /// Kernel symbols from this kallsyms file (default: the session's copy, else /proc/kallsyms).
    #[arg(long, value_name = "FILE")]
    kallsyms: Option<PathBuf>,
    /// Look for recorded binaries under this directory (like perf's --symfs).
    #[arg(long, value_name = "DIR")]
    sysroot: Option<PathBuf>,
    /// Look here, by file name and build-id, for binaries missing or changed since recording.
    #[arg(long = "search-dir", value_name = "DIR")]
    search_dirs: Vec<PathBuf>,
    /// Separate debug files under this root (default /usr/lib/debug).
    #[arg(long = "debug-dir", value_name = "DIR")]
    debug_dirs: Vec<PathBuf>,
    /// Never ask a debuginfod server (DEBUGINFOD_URLS) for debug files; files it fetched
    /// before (its cache) are still used.
    #[arg(long)]
    offline: bool,
    /// Read every binary's symbol tables, as if for the first time: neither use nor write the
    /// symbol indexes kept in $XDG_CACHE_HOME/profkit/symbols (~/.cache/profkit/symbols).
    #[arg(long)]
    no_cache: bool,
    /// The symbol indexes' total size (512M, 2G); the oldest are deleted past it [default: 1G].
    #[arg(long, value_name = "SIZE", value_parser = profkit_live::parse_size, conflicts_with = "no_cache")]
    cache_size: Option<u64>,
    /// Write the symbol index of every binary this report names, now, and print no report.
    /// (A report that found an index missing answers without it and starts this, in the
    /// background, after its output.)
    #[arg(long, conflicts_with_all = ["no_cache", "import", "from"])]
    build_index: bool,
    /// No progress bar.
    #[arg(long)]
    no_progress: bool,
    /// Print every warning (default: the first 10, then a count).
    #[arg(short = 'v', long)]
    verbose: bool,
}

/// A validated command line.
pub(super) struct Config {
    /// `--from`: a fleet store, and what to ask it.
    pub(super) from: Option<(String, profkit_report::fleet::FleetOptions)>,
    pub(super) dirs: Vec<PathBuf>,
    pub(super) import: Option<PathBuf>,
    pub(super) diff: Option<(PathBuf, PathBuf)>,
    pub(super) output: Option<PathBuf>,
    pub(super) options: ReportOptions,
    pub(super) sources: SymbolSources,
    pub(super) format: Format,
    /// A stream of samples instead of a report.
    pub(super) stream: Option<StreamFormat>,
    pub(super) wall: bool,
    /// `--build-index`: symbolize for the index, output nothing.
    pub(super) build_index: bool,
    pub(super) progress: bool,
    pub(super) verbose: bool,
}

/// Validation that clap cannot do: profile specs. Errors are usage errors.
pub(super) fn validate(opt: Opt) -> Result<Config, String> {
    // Index misses are built now by `--build-index`, and by an import
    // (whose session is gone when its report ends); else after the output.
    let defer_index = !opt.build_index && opt.import.is_none();
    if opt.build_index && profkit_report::IndexCacheOptions::default_dir().is_none() {
        return Err(
            "--build-index: there is no symbol index cache to write: neither \
                     XDG_CACHE_HOME nor HOME is set to an absolute path (set one of them)"
                .to_owned(),
        );
    }
    let spec = ProfileSpec::parse(&opt.specs).map_err(|e| e.to_string())?;
    // `host` is a column of fleet reports only.
    let per_host = opt.separate.host;
    if per_host && opt.from.is_none() {
        return Err(
            "bad value 'host' for --separate: rows per host come from a fleet store (--from URL)"
                .to_owned(),
        );
    }
    let separate_value = opt.separate.sep;
    let from = opt.from.clone().map(|url| {
        (
            url,
            profkit_report::fleet::FleetOptions {
                hosts: opt.host.clone(),
                window: None,
                build_ids: Vec::new(),
                threads: separate_value.thread,
                cpus: separate_value.cpu,
                per_host,
            },
        )
    });
    if let Some(k) = &opt.kallsyms {
        if !k.is_file() {
            return Err(format!(
                "bad value '{}' for --kallsyms: not a file (give a kallsyms copy, or /proc/kallsyms)",
                k.display()
            ));
        }
    }
    let dirs = opt.sysroot.iter().map(|d| ("--sysroot", d));
    let dirs = dirs.chain(opt.search_dirs.iter().map(|d| ("--search-dir", d)));
    for (flag, d) in dirs.chain(opt.debug_dirs.iter().map(|d| ("--debug-dir", d))) {
        if !d.is_dir() {
            return Err(format!(
                "bad value '{}' for {flag}: not a directory",
                d.display()
            ));
        }
    }
    if let Some(p) = &opt.import {
        // `-`: standard input (`perf record -o - ... | profreport --import -`).
        if p.as_os_str() != "-" && !p.is_file() {
            return Err(format!(
                "bad value '{}' for --import: not a file (give a perf.data written by `perf record`, or - for standard input)",
                p.display()
            ));
        }
    }
    let (format, stream) = match opt.format {
        OutFormat::Report(f) => (f, None),
        OutFormat::Stream(f) => (Format::Text, Some(f)),
    };
    if let Some(f) = stream {
        stream_conflicts(&opt, f)?;
    }
    if (opt.callgraph || opt.children)
        && (opt.separate.sep.thread || opt.separate.sep.by_app() || opt.app)
    {
        return Err(
            "--callgraph and --children work per function: they cannot be combined with \
             --separate=thread, lib or kernel, or --app (use --separate=cpu, or a tgid:/tid: spec)"
                .to_owned(),
        );
    }
    let diff = match opt.diff.as_slice() {
        [a, b] => {
            if !matches!(format, Format::Text | Format::Json | Format::Csv) {
                return Err("--diff writes text, json or csv".to_owned());
            }
            if opt.separate.sep.cpu || opt.separate.sep.thread {
                return Err(
                    "--diff compares shares per symbol: --separate=cpu or thread do not apply"
                        .to_owned(),
                );
            }
            Some((a.clone(), b.clone()))
        }
        _ => None,
    };
    if format == Format::Flamegraph && opt.separate.sep.cpu && opt.output.is_none() {
        return Err(
            "--format flamegraph --separate=cpu writes one SVG per CPU: name them with -o FILE \
             (FILE-cpuN.svg)"
                .to_owned(),
        );
    }
    if format.needs_stacks() && opt.annotate.is_some() {
        return Err(format!(
            "--annotate lists lines and instructions: it is written as text, json or csv, not {}",
            opt.format_name()
        ));
    }
    if opt.wall && !matches!(format, Format::Text | Format::Json | Format::Csv) {
        return Err("--wall writes text, json or csv".to_owned());
    }
    if format.needs_stacks() && opt.timeline.is_some() {
        return Err(format!(
            "--timeline cannot be written as {}",
            opt.format_name()
        ));
    }
    if format.is_binary() && opt.output.is_none() && io::stdout().is_terminal() {
        return Err(
            "--format pprof writes gzip bytes: redirect them (> profile.pb.gz) or use -o FILE"
                .to_owned(),
        );
    }
    let symbols = opt.symbols || diff.is_some();
    let mut dirs = Vec::new();
    if (opt.merge.is_empty() && opt.import.is_none()) || opt.session_dir.is_some() {
        dirs.push(
            opt.session_dir
                .unwrap_or_else(|| PathBuf::from("profkit_data")),
        );
    }
    dirs.extend(opt.merge);
    Ok(Config {
        from,
        dirs,
        import: opt.import,
        diff,
        output: opt.output,
        options: ReportOptions {
            symbols,
            separate: separate_value,
            app_column: opt.app,
            spec,
            threshold: opt.threshold,
            sort: opt.sort,
            reverse: opt.reverse,
            demangle: opt.demangle,
            show_address: opt.show_address,
            global_percent: opt.global_percent,
            exclude_dependent: opt.exclude_dependent,
            debug_info: opt.debug_info,
            long_filenames: opt.long_filenames,
            timeline: match opt.timeline {
                Some(TimelineStep::Rounds(n)) => Some(n),
                _ => None,
            },
            timeline_every: match opt.timeline {
                Some(TimelineStep::Every(ns)) => Some(ns),
                _ => None,
            },
            callgraph: opt.callgraph,
            children: opt.children,
            stacks: format.needs_stacks(),
            inline: opt.inline,
            annotate: opt.annotate.map(|s| AnnotateOptions {
                symbol: (!s.is_empty()).then_some(s),
                source: opt.source,
                assembly: opt.assembly,
                source_dirs: opt.source_dirs,
                intel: opt.intel,
            }),
            time: opt.time,
            off_cpu: opt.off_cpu,
            // Text stays readable on many CPUs; JSON and CSV keep each.
            cpu_columns: (format == Format::Text && stream.is_none())
                .then_some(profkit_report::TEXT_CPU_COLUMNS),
        },
        sources: SymbolSources {
            kallsyms: opt.kallsyms,
            sysroot: opt.sysroot,
            search_dirs: opt.search_dirs,
            debug_dirs: opt.debug_dirs,
            debuginfod: Some(debuginfod(opt.offline)?),
            index_cache: index_cache(opt.no_cache, opt.cache_size, defer_index),
        },
        format,
        stream,
        wall: opt.wall,
        build_index: opt.build_index,
        progress: !opt.no_progress,
        verbose: opt.verbose,
    })
}

/// Where symbol indexes are kept (none with `--no-cache`, or without a
/// home or XDG cache directory); `defer`: a miss is left to a builder run
/// after the report.
pub(super) fn index_cache(
    no_cache: bool,
    size: Option<u64>,
    defer: bool,
) -> Option<profkit_report::IndexCacheOptions> {
    if no_cache {
        return None;
    }
    let mut c =
        profkit_report::IndexCacheOptions::new(profkit_report::IndexCacheOptions::default_dir()?);
    if let Some(s) = size {
        c.max_bytes = s;
    }
    c.defer_builds = defer;
    Some(c)
}

/// The report's debuginfod client, configured as elfutils' is (the
/// `DEBUGINFOD_*` variables); `offline`: it asks no server.
fn debuginfod(offline: bool) -> Result<profkit_report::Debuginfod, String> {
    let cfg = profkit_debuginfod::Config::from_env().map_err(|e| e.to_string())?;
    Ok(profkit_report::Debuginfod::new(
        profkit_debuginfod::Client::new(profkit_debuginfod::Config { offline, ..cfg })
            .with_budget(profkit_debuginfod::RUN_BUDGET),
    ))
}

/// Refuses what a stream of samples cannot honour: report shapes (rows,
/// columns, thresholds, call-graph blocks, timelines), and what it does
/// not do (inlined frames, off-CPU weighting: an `--off-cpu` session's
/// off-CPU time is streamed as items of its own). The viewers' formats
/// take `--separate=cpu` (one track or profile per CPU; `thread`, their
/// default, is accepted), and speedscope `--off-cpu[=KIND]` (off-CPU time
/// instead of samples, as the report).
fn stream_conflicts(opt: &Opt, f: StreamFormat) -> Result<(), String> {
    let name = f.name();
    let viewer = matches!(f, StreamFormat::Firefox | StreamFormat::Speedscope);
    let separate_taken = viewer
        && Separate {
            cpu: false,
            thread: false,
            ..opt.separate.sep
        } == Separate::default();
    let refused: [(bool, &str); 17] = [
        (opt.timeline.is_some(), "--timeline"),
        (opt.callgraph, "--callgraph"),
        (opt.children, "--children"),
        (opt.annotate.is_some(), "--annotate"),
        (opt.wall, "--wall"),
        (!opt.diff.is_empty(), "--diff"),
        (
            opt.separate.sep != Separate::default() && !separate_taken,
            "--separate",
        ),
        (opt.app, "--app"),
        (opt.threshold != 0.0, "--threshold"),
        (opt.sort != SortKey::Samples, "--sort"),
        (opt.reverse, "--reverse"),
        (opt.show_address, "--show-address"),
        (opt.global_percent, "--global-percent"),
        (opt.exclude_dependent, "--exclude-dependent"),
        (opt.debug_info, "--debug-info"),
        (opt.inline, "--inline"),
        (
            opt.off_cpu.is_some() && f != StreamFormat::Speedscope,
            "--off-cpu",
        ),
    ];
    if let Some((_, flag)) = refused.iter().find(|(given, _)| *given) {
        let why = match *flag {
            "--off-cpu" if f == StreamFormat::Firefox => {
                "the Firefox profile always shows the off-CPU time of a session recorded with \
                 --off-cpu, as interval markers on each thread beside its samples"
            }
            "--off-cpu" => {
                "a stream gives the off-CPU time of a session recorded with --off-cpu as items \
                 of their own, beside the samples"
            }
            "--separate" if viewer => "it takes --separate=cpu (one track per CPU) only",
            "--inline" => "a stream gives the frames as recorded, without inlined functions",
            "--timeline" => "a stream is already in time order (use --time START,END for a window)",
            _ => "it is every sample in time order, not a report of rows",
        };
        return Err(format!(
            "--format {name} cannot be combined with {flag}: {why}"
        ));
    }
    Ok(())
}

impl Opt {
    fn format_name(&self) -> &'static str {
        match self.format {
            OutFormat::Report(Format::Collapsed) => "collapsed stacks",
            OutFormat::Report(Format::Flamegraph) => "a flame graph",
            OutFormat::Report(Format::Pprof) => "pprof",
            OutFormat::Stream(f) => f.name(),
            _ => "text",
        }
    }
}
