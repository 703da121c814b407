//! From sessions to a [`Report`], in named steps: check the sessions can be
//! merged, plan what the aggregation keeps ([`plan`]), aggregate in
//! parallel, summarize (header, or the timeline), name (thread names,
//! binaries, applications, symbols), group samples into rows
//! ([`rows::Placer`]), build the stacks and inclusive samples when asked,
//! then percentages, rows, sort and cut ([`rows`]).

mod group;
pub(crate) mod rows;

use std::borrow::Cow;
use std::collections::BTreeSet;

use profkit_eventlog::Cookie;

use crate::aggregate::summary::{header, timeline, timeline_every};
use crate::aggregate::{aggregate, Aggregate, KeyShape, MAX_TIMELINE_LINES, NO_STACK};
use crate::callgraph;
use crate::error::{Error, Result};
use crate::hash::FxHashMap;
use crate::model::*;
use crate::naming::apps::{find_apps, Comms, Images};
use crate::naming::symbolize::{symbolize, Resolved};
use crate::options::{ReportOptions, SymbolSources};
use crate::session::{check_merge, Session};
use crate::Progress;
use group::{group_rows, Grouped};
use rows::{sort_and_cut, CgroupNames, Placer, RowKey, RowMaker};

/// Builds a report over one session, or several merged.
///
/// # Errors
/// [`Error::MergeMismatch`] when merged sessions sampled different events;
/// [`Error::Conflict`] when call-graph output is combined with a
/// separation it cannot show; [`Error::Symbols`] when a symbol source
/// option is unusable.
pub fn build_report(
    sessions: &[Session],
    opts: &ReportOptions,
    sources: &SymbolSources,
    progress: &dyn Progress,
) -> Result<Report> {
    build(Sessions::Lent(sessions), opts, sources, progress)
}

/// [`build_report`] of sessions given to it: their chunks' bytes are given
/// back once every sample is counted, before the binaries are named and
/// the rows made (a cargo build's flat log was 1.3 MB of a warm `-l`'s
/// 9 MB heap peak; the bench's 10 M-sample one is 30 MB).
///
/// # Errors
/// As [`build_report`].
pub fn build_report_owned(
    sessions: Vec<Session>,
    opts: &ReportOptions,
    sources: &SymbolSources,
    progress: &dyn Progress,
) -> Result<Report> {
    build(Sessions::Given(sessions), opts, sources, progress)
}

/// The sessions a report is built from: lent (read to the end), or given
/// (their chunk bytes given back when counted).
enum Sessions<'a> {
    Lent(&'a [Session]),
    Given(Vec<Session>),
}

impl Sessions<'_> {
    fn get(&self) -> &[Session] {
        match self {
            Sessions::Lent(s) => s,
            Sessions::Given(v) => v,
        }
    }
}

fn build(
    mut held: Sessions<'_>,
    opts: &ReportOptions,
    sources: &SymbolSources,
    progress: &dyn Progress,
) -> Result<Report> {
    let sessions = held.get();
    let mut warnings = Vec::new();
    check_merge(sessions, &mut warnings)?;
    if opts.off_cpu.is_some() {
        check_off_cpu(sessions)?;
    }
    let plan = plan(opts)?;
    let opts = &*plan.opts;
    let no_cgroups = sessions
        .iter()
        .all(|s| s.reader().header().cgroups == profkit_eventlog::CgroupSource::None);
    if (opts.separate.cgroup || !opts.spec.cgroups.is_empty()) && no_cgroups {
        warnings.push(
            "no cgroups in this session: record with `profctl start --cgroups` to see them; \
             every sample is shown as [none]"
                .to_owned(),
        );
    }
    if opts.inline && !plan.with_stacks {
        warnings.push(
            "--inline expands call stacks: it only changes -c, --children, collapsed stacks, \
             flame graphs and pprof"
                .to_owned(),
        );
    }
    if let Some(step) = opts.timeline_every {
        check_timeline_step(sessions, step, opts.time.as_ref())?;
    }
    if opts.time.is_some() && untimed(sessions) {
        warnings.push(
            "this session was written before samples had their own time: the --time window \
             takes each sync round whose middle is in it (exact to half a round)"
                .to_owned(),
        );
    }
    let mut agg = aggregate(
        sessions,
        plan.shape,
        &opts.spec,
        opts.time.as_ref(),
        progress,
    );
    // Every sample is counted, and what later steps read of a session is
    // its header, footer, chunk list and files kept beside it: the chunks'
    // bytes are not read again.
    if let Sessions::Given(v) = &mut held {
        v.iter_mut().for_each(Session::release_chunks);
    }
    let sessions = held.get();
    if plan.with_stacks {
        agg.fold_stacks();
    }
    // Every count is in: each binary's offsets in order, for the
    // symbolizer to take as they are.
    agg.counts.sort();
    if agg.weight_budget.as_ref().is_some_and(|b| b.clamped()) {
        warnings.push(off_cpu_clamped_warning());
    }
    let (mut header, read_per_cpu) = header(
        sessions,
        &agg,
        opts.time.is_some(),
        opts.off_cpu,
        &mut warnings,
    );
    if opts.wants_timeline() {
        return Ok(timeline_report(
            sessions, &agg, opts, header, warnings, progress,
        ));
    }

    // Naming.
    let comms = Comms::new(&agg);
    let images = Images::new(
        &agg.cookies,
        &agg.counts,
        opts.long_filenames,
        &mut warnings,
    );
    let apps = if plan.needs_pid {
        find_apps(&agg, &comms)
    } else {
        FxHashMap::default()
    };
    let mut symbols = if opts.symbols {
        symbolize(sessions, &agg, opts, sources, progress, &mut warnings)?
    } else {
        FxHashMap::default()
    };
    if let Some(d) = sources.debuginfod.as_ref().filter(|_| opts.symbols) {
        let outcome = d.outcome();
        // First: what a cold report fetched is worth seeing among the
        // three lines.
        let lines = crate::naming::debuginfod::fetch_lines(&outcome);
        warnings.splice(0..0, lines);
        // Said when there was something to say: servers configured, or a
        // binary named from the cache.
        if outcome.servers > 0 || outcome.named > 0 || !outcome.errors.is_empty() {
            header.debuginfod = Some(outcome);
        }
    }

    // Rows before names.
    let (columns, col_of) = columns(sessions, &agg, opts);
    warnings.extend(cpu_groups_note(&columns));
    let cgroup_names = CgroupNames::new(&agg.cgroups);
    let ncols = columns.len();
    let placer = Placer {
        opts,
        images: &images,
        apps: &apps,
        symbols: &symbols,
        col_of: &col_of,
        cgroups: &cgroup_names,
    };
    let mut grouped = group_rows(&agg.counts, &placer, ncols);

    // Call stacks: symbolized once per distinct location, then merged.
    if plan.with_stacks {
        if let Some(w) = broken_stacks(&agg, &images) {
            warnings.push(w);
        }
    }
    let stack_data = plan.with_stacks.then(|| {
        stacks(
            &agg,
            opts,
            &symbols,
            &images,
            &comms,
            &placer,
            &mut warnings,
        )
    });
    // With --children, functions seen only as callers get rows too.
    let inclusive = match (&stack_data, opts.children) {
        (Some(st), true) => Some(inclusive_rows(st, opts, &images, &mut grouped, ncols)),
        _ => None,
    };

    // Denominators.
    let local: Vec<u64> = (0..ncols)
        .map(|c| grouped.iter().map(|(_, v)| v[c]).sum())
        .collect();
    let global: Vec<u64> = columns
        .iter()
        .map(|c| match c {
            Column::All => read_per_cpu.values().sum(),
            Column::Cpu(cpu) => read_per_cpu.get(cpu).copied().unwrap_or(0),
            Column::Cpus(a, b) => read_per_cpu.range(a..=b).map(|(_, n)| n).sum(),
        })
        .collect();
    let denom = if opts.global_percent { &global } else { &local };
    let total_samples: u64 = local.iter().sum();
    let annotations = match &opts.annotate {
        Some(a) => Some(annotations(
            &crate::annotate::Context {
                sessions,
                agg: &agg,
                opts,
                annotate: a,
                sources,
                symbols: &symbols,
                images: &images,
                denom,
            },
            &grouped,
            &placer,
            ncols,
        )?),
        None => None,
    };

    // The counts are in rows now: their memory (3.3 MB for a cargo
    // build's -l, beside which the rows were made at the heap's peak) is
    // given back first.
    let unnamed = unnamed_binaries(&agg, &symbols);
    agg.counts = crate::aggregate::KeyCounts::default();
    agg.stack_counts = FxHashMap::default();

    let columns_shown = shown_columns(opts, inclusive.is_some());
    let maker = RowMaker {
        opts,
        shown: columns_shown,
        images: &images,
        comms: &comms,
        cgroups: &cgroup_names,
        symbols: &symbols,
        inclusive: inclusive.as_ref(),
        ncols,
    };
    let (mut rows, named) = maker.rows(grouped, denom);
    rows::give_names(&mut rows, &named, &mut symbols);
    drop(named);
    let mut below = 0usize;
    sort_and_cut(&mut rows, opts, columns_shown.inclusive, &mut below);
    let callgraph = match (&stack_data, opts.callgraph) {
        (Some(st), true) => Some(callgraph::call_graph(
            st,
            total_samples,
            opts.threshold,
            opts.children,
        )),
        _ => None,
    };
    progress.finish();
    header.total_samples = total_samples;
    Ok(Report {
        header,
        columns,
        shown: columns_shown,
        rows,
        rows_below_threshold: below,
        timeline: None,
        unnamed_binaries: unnamed,
        warnings,
        callgraph,
        stacks: if opts.stacks {
            stack_data.map(|s| s.stacks)
        } else {
            None
        },
        annotations,
    })
}

/// [`Error::NoOffCpu`] for the first session recorded without `--off-cpu`.
pub(crate) fn check_off_cpu(sessions: &[Session]) -> Result<()> {
    match sessions.iter().find(|s| !s.reader().header().event.off_cpu) {
        Some(s) => Err(Error::NoOffCpu {
            path: s.reader().path().to_owned(),
        }),
        None => Ok(()),
    }
}

/// Said when a forged session's off-CPU times were not all counted.
pub(crate) fn off_cpu_clamped_warning() -> String {
    format!(
        "the off-CPU intervals of this session add up to more than {} ns (146 years): the file's \
         times are not plausible, and those past that sum are not counted",
        crate::aggregate::OFF_CPU_TOTAL_MAX
    )
}

/// `--annotate`: the chosen functions' samples per offset, annotated.
fn annotations(
    cx: &crate::annotate::Context<'_>,
    grouped: &Grouped,
    placer: &Placer<'_>,
    ncols: usize,
) -> Result<Vec<Annotation>> {
    use profkit_symbols::SymbolId;
    let mut funcs: FxHashMap<(Cookie, SymbolId), Vec<u64>> = FxHashMap::default();
    for (k, v) in grouped {
        if let (Some(s), 0) = (k.sym, k.inlined) {
            let f = funcs.entry((k.image, s)).or_insert_with(|| vec![0; ncols]);
            for (t, n) in f.iter_mut().zip(v) {
                *t += n;
            }
        }
    }
    let chosen = crate::annotate::choose(funcs, cx.annotate, cx.opts, cx.symbols, cx.denom)?;
    let want: crate::hash::FxHashSet<(Cookie, SymbolId)> =
        chosen.iter().map(|c| (c.cookie, c.sym)).collect();
    let mut offsets: FxHashMap<(Cookie, SymbolId), crate::annotate::Offsets> = FxHashMap::default();
    for (k, n) in cx.agg.counts.iter() {
        let Some((key, col)) = placer.place(&k) else {
            continue;
        };
        let Some(s) = key.sym else {
            continue;
        };
        if want.contains(&(key.image, s)) {
            offsets
                .entry((key.image, s))
                .or_default()
                .entry(k.offset)
                .or_insert_with(|| vec![0; ncols])[col] += n;
        }
    }
    Ok(crate::annotate::annotate(cx, chosen, &mut offsets))
}

/// What the aggregation must keep for `opts`.
struct Plan<'a> {
    /// The options, with `symbols` set when stacks imply it.
    opts: Cow<'a, ReportOptions>,
    shape: KeyShape,
    with_stacks: bool,
    /// Samples must keep their process (applications, threads).
    needs_pid: bool,
}

/// Checks the options go together and decides the aggregation key.
fn plan(opts: &ReportOptions) -> Result<Plan<'_>> {
    if opts.off_cpu.is_some() && (opts.wants_timeline() || opts.annotate.is_some()) {
        return Err(Error::Conflict(
            "--off-cpu counts time where threads switched out: --timeline and --annotate count \
             samples and do not show it"
                .to_owned(),
        ));
    }
    let with_stacks = opts.wants_stacks() && !opts.wants_timeline();
    if with_stacks && (opts.children || opts.callgraph) {
        let sep = opts.separate;
        if sep.thread || sep.by_app() || opts.app_column {
            return Err(Error::Conflict(
                "--callgraph and --children work per function: they cannot be combined with \
                 --separate=thread, lib or kernel, or --app (use --separate=cpu, or a tgid:/tid: \
                 spec to look at one process)"
                    .to_owned(),
            ));
        }
    }
    let opts = if (with_stacks || opts.annotate.is_some()) && !opts.symbols {
        Cow::Owned(ReportOptions {
            symbols: true,
            ..opts.clone()
        })
    } else {
        Cow::Borrowed(opts)
    };
    let sep = opts.separate;
    let needs_pid = sep.by_app() || opts.app_column || opts.exclude_dependent || sep.thread;
    let shape = if opts.wants_timeline() {
        KeyShape {
            buckets: opts.timeline_every,
            ..KeyShape::default()
        }
    } else {
        KeyShape {
            offset: opts.symbols,
            pid: needs_pid || with_stacks,
            tid: sep.thread,
            cpu: sep.cpu,
            cgroup: sep.cgroup || !opts.spec.cgroups.is_empty(),
            stacks: with_stacks,
            off_cpu: opts.off_cpu,
            buckets: None,
        }
    };
    Ok(Plan {
        opts,
        shape,
        with_stacks,
        needs_pid,
    })
}

/// True when a part of these sessions has samples without their own time
/// (written before format version 6, or imported without times).
pub(crate) fn untimed(sessions: &[Session]) -> bool {
    sessions
        .iter()
        .flat_map(|s| s.parts())
        .any(|p| !p.reader().header().event.sample_times)
}

/// Refuses a `--timeline` step that would make more than
/// [`MAX_TIMELINE_LINES`] lines over a session (or the `--time` window).
fn check_timeline_step(
    sessions: &[Session],
    step: u64,
    window: Option<&crate::window::TimeSpec>,
) -> Result<()> {
    if step == 0 {
        return Err(Error::Conflict(
            "--timeline needs a step of at least 1 ns".to_owned(),
        ));
    }
    for s in sessions {
        let (start, unix) = s.start();
        let end = s.end_monotonic_ns().max(start);
        let (lo, hi) = window.map_or((start, end), |w| w.resolve(start, unix, end));
        let span = hi.min(end).saturating_sub(lo.max(start));
        let lines = span / step + 1;
        if lines > MAX_TIMELINE_LINES {
            return Err(Error::Conflict(format!(
                "--timeline with {} s per line makes {lines} lines over {:.3} s of {}, more \
                 than {MAX_TIMELINE_LINES}: choose a longer step, or a --time window",
                step as f64 / 1e9,
                span as f64 / 1e9,
                s.reader().path().display()
            )));
        }
    }
    Ok(())
}

/// A `--timeline` report: the header and the timeline, no rows.
fn timeline_report(
    sessions: &[Session],
    agg: &Aggregate,
    opts: &ReportOptions,
    mut header: Header,
    mut warnings: Vec<String>,
    progress: &dyn Progress,
) -> Report {
    let timeline = match opts.timeline_every {
        Some(step) => {
            if untimed(sessions) {
                warnings.push(
                    "this session was written before samples had their own time: each of its \
                     samples is placed at the middle of its sync round"
                        .to_owned(),
                );
            }
            timeline_every(sessions, agg, step, &opts.spec)
        }
        None => timeline(sessions, agg, opts.timeline.unwrap_or(1).max(1), &opts.spec),
    };
    header.total_samples = agg
        .chunks
        .iter()
        .flat_map(|c| c.kept.iter().map(|&(_, n)| n))
        .sum();
    progress.finish();
    Report {
        header,
        columns: vec![Column::All],
        shown: ShownColumns::default(),
        rows: Vec::new(),
        rows_below_threshold: 0,
        timeline: Some(timeline),
        warnings,
        unnamed_binaries: Vec::new(),
        callgraph: None,
        stacks: None,
        annotations: None,
    }
}

/// The binaries whose samples found no name for want of symbols, with
/// those samples (each sample's own location; callers are not counted),
/// most first.
fn unnamed_binaries(agg: &Aggregate, symbols: &FxHashMap<Cookie, Resolved>) -> Vec<UnnamedBinary> {
    let mut unnamed: FxHashMap<Cookie, u64> = FxHashMap::default();
    for (k, n) in agg.counts.iter() {
        if let Some(r) = symbols.get(&k.cookie) {
            if r.result.no_symbols.is_some() && r.symbol_of(k.offset).is_none() {
                *unnamed.entry(k.cookie).or_default() += n;
            }
        }
    }
    let mut out: Vec<UnnamedBinary> = unnamed
        .into_iter()
        .filter_map(|(c, samples)| {
            let note = symbols.get(&c)?.result.no_symbols.clone()?;
            let path = agg.cookies.get(&c).map(|(e, _, _)| e.path.clone())?;
            Some(UnnamedBinary {
                path,
                samples,
                note,
            })
        })
        .collect();
    out.sort_by(|a, b| b.samples.cmp(&a.samples).then_with(|| a.path.cmp(&b.path)));
    out
}

/// The sample columns (one per CPU with `--separate=cpu`), and each CPU's
/// column index.
fn columns(
    sessions: &[Session],
    agg: &Aggregate,
    opts: &ReportOptions,
) -> (Vec<Column>, FxHashMap<u32, usize>) {
    let columns: Vec<Column> = if opts.separate.cpu {
        let mut cpus: BTreeSet<u32> = sessions
            .iter()
            .flat_map(|s| s.claimed_cpus().iter().copied())
            .collect();
        cpus.extend(agg.counts.keys().map(|k| k.cpu));
        if !opts.spec.cpus.is_empty() {
            cpus.retain(|c| opts.spec.cpus.contains(c));
        }
        match opts.cpu_columns {
            Some(max) if cpus.len() > max.max(1) => {
                let cpus: Vec<u32> = cpus.into_iter().collect();
                let per = cpus.len().div_ceil(max.max(1));
                let mut col_of = FxHashMap::default();
                let columns = cpus
                    .chunks(per)
                    .enumerate()
                    .map(|(i, group)| {
                        for &c in group {
                            col_of.insert(c, i);
                        }
                        Column::Cpus(group[0], group[group.len() - 1])
                    })
                    .collect();
                return (columns, col_of);
            }
            _ => cpus.into_iter().map(Column::Cpu).collect(),
        }
    } else {
        vec![Column::All]
    };
    let col_of = columns
        .iter()
        .enumerate()
        .filter_map(|(i, c)| match c {
            Column::Cpu(cpu) => Some((*cpu, i)),
            _ => None,
        })
        .collect();
    (columns, col_of)
}

/// The note of a report whose CPUs were added up in ranges.
fn cpu_groups_note(columns: &[Column]) -> Option<String> {
    let ranges: Vec<String> = columns
        .iter()
        .filter_map(|c| match c {
            Column::Cpus(a, b) => Some(format!("{a}-{b}")),
            _ => None,
        })
        .collect();
    (!ranges.is_empty()).then(|| {
        format!(
            "{} CPU columns, each CPUs added up ({}): give cpu:LIST (or record with -C) for one \
             column per CPU, or --format json or csv, which keep every CPU",
            ranges.len(),
            ranges.join(", ")
        )
    })
}

/// The symbolized stacks (and a warning when the session has none but the
/// output needs them).
fn stacks(
    agg: &Aggregate,
    opts: &ReportOptions,
    symbols: &FxHashMap<Cookie, Resolved>,
    images: &Images<'_>,
    comms: &Comms,
    placer: &Placer<'_>,
    warnings: &mut Vec<String>,
) -> callgraph::Built {
    if agg.stack_tables.values().all(|t| t.is_empty()) && (opts.callgraph || opts.children) {
        warnings.push(
            "no call stacks in this session: record with `profctl record -g` (or `start -g`) \
             to see callers, callees and inclusive samples; only the sampled functions are \
             shown"
                .to_owned(),
        );
    }
    let unresolved: u64 = agg.stack_tables.values().map(|t| t.unresolved()).sum();
    if unresolved > 0 {
        warnings.push(format!(
            "{unresolved} call stacks of this session could not be resolved (defined on a \
             missing or later stack, longer than 256 frames, or past the {} frames that the \
             files read justify in memory): their samples are shown without callers",
            agg.stack_budget
                .as_ref()
                .map_or(profkit_eventlog::ON_FRAME_BUDGET, |b| b.size())
        ));
    }
    callgraph::build_stacks(
        agg,
        symbols,
        images,
        comms,
        |k| placer.place(k).map(|(_, col)| col),
        opts.separate.thread,
        warnings,
    )
}

/// Where the samples' stacks broke: a stack that ends with the sync
/// stage's `[unknown]` frame broke after the frame before it (its binary)
/// for the reason the frame's offset gives (`profkit_eventlog::broken`).
/// "120 samples' stacks break before their outermost frame: 80 after
/// libpython3.13.so.1.0 (no unwind rule), 40 after [anon] (...)", the
/// first [`BROKEN_SHOWN`] places by samples; None when none broke.
fn broken_stacks(agg: &Aggregate, images: &Images<'_>) -> Option<String> {
    use profkit_eventlog::{broken, COOKIE_UNKNOWN};
    let mut by: FxHashMap<(Cookie, u64), u64> = FxHashMap::default();
    let mut total = 0u64;
    for (&(key, file, id), &n) in &agg.stack_counts {
        if id == NO_STACK {
            continue;
        }
        let Some(frames) = agg.stack_tables.get(&file).and_then(|t| t.get(id)) else {
            continue;
        };
        let Some(k) = frames.iter().position(|f| f.cookie == COOKIE_UNKNOWN) else {
            continue;
        };
        let after = if k == 0 {
            key.cookie
        } else {
            frames[k - 1].cookie
        };
        *by.entry((after, frames[k].offset)).or_default() += n;
        total += n;
    }
    if total == 0 {
        return None;
    }
    let mut places: Vec<_> = by.into_iter().collect();
    places.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let shown: Vec<String> = places
        .iter()
        .take(BROKEN_SHOWN)
        .map(|((c, why), n)| format!("{n} after {} ({})", images.name(*c), broken::why(*why)))
        .collect();
    Some(format!(
        "{total} samples' stacks break before their outermost frame (shown as [unknown]): {}{}",
        shown.join(", "),
        if places.len() > BROKEN_SHOWN {
            format!(", and {} more places", places.len() - BROKEN_SHOWN)
        } else {
            String::new()
        }
    ))
}

/// Places of broken stacks a warning names.
const BROKEN_SHOWN: usize = 3;

/// Inclusive samples per function row (`--children`); functions seen only
/// as callers get an (empty) self row in `grouped`.
fn inclusive_rows(
    st: &callgraph::Built,
    opts: &ReportOptions,
    images: &Images<'_>,
    grouped: &mut Grouped,
    ncols: usize,
) -> FxHashMap<RowKey, Vec<u64>> {
    let mut have: crate::hash::FxHashSet<RowKey> = grouped.iter().map(|(k, _)| *k).collect();
    let incl = callgraph::inclusive(st, ncols);
    let filtered = !opts.spec.images.is_empty() || !opts.spec.exclude_images.is_empty();
    let mut out = FxHashMap::default();
    for (f, v) in incl {
        let (cookie, sym, inlined) = st.keys[f as usize];
        let key = RowKey {
            sess: 0,
            tgid: 0,
            tid: 0,
            cgroup: 0,
            app: 0,
            has_app: false,
            image: cookie,
            sym,
            inlined,
        };
        if filtered && !opts.spec.wants_image(&images.match_path(cookie), None) {
            continue;
        }
        if have.insert(key) {
            grouped.push((key, PerColumn::from_elem(0, ncols)));
        }
        out.insert(key, v);
    }
    out
}

/// Which optional columns the rows carry.
fn shown_columns(opts: &ReportOptions, inclusive: bool) -> ShownColumns {
    let sep = opts.separate;
    ShownColumns {
        symbols: opts.symbols,
        app: opts.symbols && sep.by_app() || opts.app_column,
        thread: sep.thread,
        cgroup: sep.cgroup,
        address: opts.symbols && opts.show_address,
        location: opts.symbols && opts.debug_info,
        nested: !opts.symbols && sep.by_app() && !opts.app_column,
        inclusive,
    }
}
