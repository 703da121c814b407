//! From sessions to a [`Report`]: aggregate in parallel, attribute samples
//! to applications, symbolize the distinct offsets of each binary once,
//! group into rows, compute percentages, sort and cut.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;

use profkit_eventlog::{Cookie, CookieEntry, CookieKind, COOKIE_UNKNOWN};
use profkit_symbols::{
    BinaryKind, BinaryRequest, BinaryResult, KallsymsSource, SymbolId, Symbolizer,
    SymbolizerOptions,
};

use crate::callgraph;
use crate::error::{Error, Result};
use crate::hash::FxHashMap;
use crate::kallsyms;
use crate::load::{aggregate, Aggregate, Key, KeyShape, Liveness, Session, NO_STACK};
use crate::model::*;
use crate::spec::{base_name, ProfileSpec, Separate, SortKey};
use crate::Progress;

/// What to report: the flags of `profreport`, validated.
#[derive(Clone, Debug, PartialEq)]
pub struct ReportOptions {
    /// One row per symbol (`-l`) instead of per binary.
    pub symbols: bool,
    /// What to separate by.
    pub separate: Separate,
    /// Show the application column (`--app`): the executable of the
    /// process each sample was taken in.
    pub app_column: bool,
    /// Which samples to look at.
    pub spec: ProfileSpec,
    /// Leave out rows below this percentage.
    pub threshold: f64,
    /// Row order.
    pub sort: SortKey,
    /// Reverse the row order.
    pub reverse: bool,
    /// Demangle C++ and Rust names.
    pub demangle: bool,
    /// Show each symbol's start address.
    pub show_address: bool,
    /// Percentages of the whole session(s), not of this report's samples.
    pub global_percent: bool,
    /// Only samples in the executable of the process they were taken in
    /// (no libraries, no kernel).
    pub exclude_dependent: bool,
    /// Show each symbol's source file and line.
    pub debug_info: bool,
    /// Full paths of binaries instead of file names.
    pub long_filenames: bool,
    /// Instead of rows: samples and losses per CPU per this many rounds.
    pub timeline: Option<u32>,
    /// Caller/callee blocks per function (`--callgraph`); implies
    /// `symbols`.
    pub callgraph: bool,
    /// Inclusive samples per row (`--children`): the samples whose call
    /// stack holds the row's function; rows are sorted and cut by them.
    /// Implies `symbols`.
    pub children: bool,
    /// Keep the symbolized stacks in [`Report::stacks`] (for the collapsed,
    /// flame graph and pprof outputs). Implies `symbols`.
    pub stacks: bool,
}

impl ReportOptions {
    /// True when the report needs each sample's call stack.
    pub fn wants_stacks(&self) -> bool {
        self.callgraph || self.children || self.stacks
    }
}

impl Default for ReportOptions {
    fn default() -> Self {
        ReportOptions {
            symbols: false,
            separate: Separate::default(),
            app_column: false,
            spec: ProfileSpec::default(),
            threshold: 0.0,
            sort: SortKey::Samples,
            reverse: false,
            demangle: true,
            show_address: false,
            global_percent: false,
            exclude_dependent: false,
            debug_info: false,
            long_filenames: false,
            timeline: None,
            callgraph: false,
            children: false,
            stacks: false,
        }
    }
}

/// Where binaries and kernel symbols are found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SymbolSources {
    /// A kallsyms file for every session (else each session's `kallsyms`
    /// copy, else the live `/proc/kallsyms`).
    pub kallsyms: Option<PathBuf>,
    /// Prefix for every recorded path (a copy of the recording machine's
    /// files).
    pub sysroot: Option<PathBuf>,
    /// Directories searched by file name for a binary with the recorded
    /// build-id, when the recorded path is missing or changed.
    pub search_dirs: Vec<PathBuf>,
    /// Roots of separate debug files (empty: `/usr/lib/debug`).
    pub debug_dirs: Vec<PathBuf>,
}

pub(crate) const NO_SYMBOL: u32 = u32::MAX;
/// Text of a row whose samples have no symbol.
pub const NO_SYMBOLS: &str = "(no symbols)";

/// Builds a report over one session, or several merged.
///
/// # Errors
/// [`Error::MergeMismatch`] when merged sessions sampled different events;
/// [`Error::Symbols`] when a symbol source option is unusable.
pub fn build_report(
    sessions: &[Session],
    opts: &ReportOptions,
    sources: &SymbolSources,
    progress: &dyn Progress,
) -> Result<Report> {
    let mut warnings = Vec::new();
    check_merge(sessions, &mut warnings)?;
    let with_stacks = opts.wants_stacks() && opts.timeline.is_none();
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
    let owned;
    let opts = if with_stacks && !opts.symbols {
        owned = ReportOptions {
            symbols: true,
            ..opts.clone()
        };
        &owned
    } else {
        opts
    };
    let sep = opts.separate;
    let needs_pid = sep.by_app() || opts.app_column || opts.exclude_dependent || sep.thread;
    let shape = if opts.timeline.is_some() {
        KeyShape::default()
    } else {
        KeyShape {
            offset: opts.symbols,
            pid: needs_pid || with_stacks,
            tid: sep.thread,
            cpu: sep.cpu,
            stacks: with_stacks,
        }
    };
    let mut agg = aggregate(sessions, shape, &opts.spec, progress);
    if with_stacks {
        agg.fold_stacks();
    }
    let (header, read_per_cpu) = header(sessions, &agg, &mut warnings);
    if let Some(per) = opts.timeline {
        let timeline = timeline(sessions, &agg, per.max(1), &opts.spec);
        let mut header = header;
        header.total_samples = agg
            .chunks
            .iter()
            .flat_map(|c| c.kept.iter().map(|&(_, n)| n))
            .sum();
        progress.finish();
        return Ok(Report {
            header,
            columns: vec![Column::All],
            layout: Layout::default(),
            rows: Vec::new(),
            rows_below_threshold: 0,
            timeline: Some(timeline),
            warnings,
            callgraph: None,
            stacks: None,
        });
    }

    let comms = Comms::new(&agg);
    let images = Images::new(&agg, opts.long_filenames, &mut warnings);
    let apps = if needs_pid {
        find_apps(&agg, &comms)
    } else {
        FxHashMap::default()
    };
    let symbols = if opts.symbols {
        symbolize(sessions, &agg, opts, sources, progress, &mut warnings)?
    } else {
        FxHashMap::default()
    };

    // Columns.
    let columns: Vec<Column> = if sep.cpu {
        let mut cpus: BTreeSet<u32> = sessions
            .iter()
            .flat_map(|s| s.reader().header().cpus.iter().copied())
            .collect();
        cpus.extend(agg.counts.keys().map(|k| k.cpu));
        if !opts.spec.cpus.is_empty() {
            cpus.retain(|c| opts.spec.cpus.contains(c));
        }
        cpus.into_iter().map(Column::Cpu).collect()
    } else {
        vec![Column::All]
    };
    let col_of: FxHashMap<u32, usize> = columns
        .iter()
        .enumerate()
        .filter_map(|(i, c)| match c {
            Column::Cpu(cpu) => Some((*cpu, i)),
            Column::All => None,
        })
        .collect();

    // Group samples into rows.
    let attribute = |k: &Key, kind: Option<&CookieKind>| -> Option<Cookie> {
        let app = apps.get(&(k.sess, k.pid)).copied();
        let in_kernel = matches!(kind, Some(CookieKind::Kernel | CookieKind::Module));
        if opts.app_column || sep.kernel || (sep.lib && !in_kernel) {
            Some(app.unwrap_or(k.cookie))
        } else if sep.lib {
            Some(k.cookie)
        } else {
            None
        }
    };
    // Where a sample goes: its row and column, or nowhere (filtered out).
    let place = |k: &Key| -> Option<(RowKey, usize)> {
        let entry = images.entry(k.cookie);
        if opts.exclude_dependent {
            let app = apps.get(&(k.sess, k.pid)).copied().unwrap_or(k.cookie);
            if app != k.cookie {
                return None;
            }
        }
        let app = attribute(k, entry.map(|e| &e.kind));
        if !opts.spec.images.is_empty() || !opts.spec.exclude_images.is_empty() {
            let app_path = app.map(|a| images.match_path(a));
            if !opts
                .spec
                .wants_image(&images.match_path(k.cookie), app_path.as_deref())
            {
                return None;
            }
        }
        let sym = if opts.symbols {
            symbols
                .get(&k.cookie)
                .and_then(|r| r.symbol_of(k.offset))
                .map_or(NO_SYMBOL, |id| id.0)
        } else {
            NO_SYMBOL
        };
        let key = RowKey {
            sess: if sep.thread { k.sess } else { 0 },
            tgid: if sep.thread { k.pid } else { 0 },
            tid: if sep.thread { k.tid } else { 0 },
            app: app.unwrap_or(0),
            has_app: app.is_some(),
            image: k.cookie,
            sym,
        };
        let col = if sep.cpu { *col_of.get(&k.cpu)? } else { 0 };
        Some((key, col))
    };
    let mut grouped: FxHashMap<RowKey, Vec<u64>> = FxHashMap::default();
    let ncols = columns.len();
    for (k, &n) in &agg.counts {
        if let Some((key, col)) = place(k) {
            grouped.entry(key).or_insert_with(|| vec![0; ncols])[col] += n;
        }
    }

    // Call stacks: symbolized once per distinct location, then merged.
    if with_stacks
        && agg.stack_tables.values().all(|t| t.is_empty())
        && (opts.callgraph || opts.children)
    {
        warnings.push(
            "no call stacks in this session: record with `profctl record -g` (or `start -g`) \
             to see callers, callees and inclusive samples; only the sampled functions are \
             shown"
                .to_owned(),
        );
    }
    let stack_data = if with_stacks {
        let built = callgraph::build_stacks(
            &agg,
            &symbols,
            &images,
            &comms,
            |k| place(k).map(|(_, col)| col),
            sep.thread,
            &mut warnings,
        );
        Some(built)
    } else {
        None
    };
    // With --children, functions seen only as callers get rows too.
    let inclusive: Option<FxHashMap<RowKey, Vec<u64>>> = match (&stack_data, opts.children) {
        (Some(st), true) => {
            let incl = callgraph::inclusive(st, ncols);
            let mut out = FxHashMap::default();
            for (f, v) in incl {
                let (cookie, sym) = st.keys[f as usize];
                let key = RowKey {
                    sess: 0,
                    tgid: 0,
                    tid: 0,
                    app: 0,
                    has_app: false,
                    image: cookie,
                    sym,
                };
                let filtered = !opts.spec.images.is_empty() || !opts.spec.exclude_images.is_empty();
                if filtered && !opts.spec.wants_image(&images.match_path(cookie), None) {
                    continue;
                }
                grouped.entry(key).or_insert_with(|| vec![0; ncols]);
                out.insert(key, v);
            }
            Some(out)
        }
        _ => None,
    };

    // Denominators.
    let local: Vec<u64> = (0..ncols)
        .map(|c| grouped.values().map(|v| v[c]).sum())
        .collect();
    let global: Vec<u64> = columns
        .iter()
        .map(|c| match c {
            Column::All => read_per_cpu.values().sum(),
            Column::Cpu(cpu) => read_per_cpu.get(cpu).copied().unwrap_or(0),
        })
        .collect();
    let denom = if opts.global_percent { &global } else { &local };
    let total_samples: u64 = local.iter().sum();

    let layout = Layout {
        symbols: opts.symbols,
        app: opts.symbols && sep.by_app() || opts.app_column,
        thread: sep.thread,
        address: opts.symbols && opts.show_address,
        location: opts.symbols && opts.debug_info,
        nested: !opts.symbols && sep.by_app() && !opts.app_column,
        inclusive: inclusive.is_some(),
    };

    let make_row = |key: &RowKey, samples: Vec<u64>, denom: &[u64]| -> Row {
        let sym = (key.sym != NO_SYMBOL)
            .then(|| symbols.get(&key.image))
            .flatten()
            .map(|r| (r, SymbolId(key.sym)));
        Row {
            percent: percents(&samples, denom),
            total: samples.iter().sum(),
            total_percent: percent(samples.iter().sum(), denom.iter().sum()),
            samples,
            app: (layout.app && key.has_app).then(|| images.name(key.app)),
            image: images.name(key.image),
            symbol: layout.symbols.then(|| {
                sym.map_or_else(
                    || {
                        if key.image == COOKIE_UNKNOWN {
                            "[unknown]".to_owned()
                        } else {
                            NO_SYMBOLS.to_owned()
                        }
                    },
                    |(r, id)| r.result.symbol(id).name.clone(),
                )
            }),
            // Kept without --show-address too: --sort vma needs it.
            vma: sym.map(|(r, id)| r.result.symbol(id).start),
            location: if layout.location {
                sym.and_then(|(r, id)| r.location(id, opts.long_filenames))
            } else {
                None
            },
            tgid: sep.thread.then_some(key.tgid),
            tid: sep.thread.then_some(key.tid),
            comm: sep
                .thread
                .then(|| comms.name(key.sess, key.tgid, key.tid).to_owned()),
            children: Vec::new(),
            inclusive: Vec::new(),
            inclusive_percent: Vec::new(),
            inclusive_total: 0,
            inclusive_total_percent: 0.0,
        }
    };
    let make_row = |key: &RowKey, samples: Vec<u64>, denom: &[u64]| -> Row {
        let mut row = make_row(key, samples, denom);
        if let Some(incl) = &inclusive {
            let v = incl.get(key).cloned().unwrap_or_else(|| vec![0; ncols]);
            row.inclusive_percent = percents(&v, denom);
            row.inclusive_total = v.iter().sum();
            row.inclusive_total_percent = percent(row.inclusive_total, denom.iter().sum());
            row.inclusive = v;
        }
        row
    };

    let mut rows: Vec<Row> = if layout.nested {
        let mut parents: FxHashMap<RowKey, Vec<(RowKey, Vec<u64>)>> = FxHashMap::default();
        for (key, samples) in grouped {
            let parent = RowKey {
                image: key.app,
                sym: NO_SYMBOL,
                ..key
            };
            parents.entry(parent).or_default().push((key, samples));
        }
        parents
            .into_iter()
            .map(|(pkey, children)| {
                let mut sums = vec![0u64; ncols];
                for (_, s) in &children {
                    for (a, b) in sums.iter_mut().zip(s) {
                        *a += b;
                    }
                }
                let child_denom = if opts.global_percent {
                    denom.clone()
                } else {
                    sums.clone()
                };
                let mut row = make_row(&pkey, sums, denom);
                row.app = None;
                row.children = children
                    .into_iter()
                    .map(|(k, s)| make_row(&k, s, &child_denom))
                    .collect();
                row
            })
            .collect()
    } else {
        grouped
            .into_iter()
            .map(|(k, s)| make_row(&k, s, denom))
            .collect()
    };

    let mut below = 0usize;
    sort_and_cut(&mut rows, opts, layout.inclusive, &mut below);
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
    let mut header = header;
    header.total_samples = total_samples;
    Ok(Report {
        header,
        columns,
        layout,
        rows,
        rows_below_threshold: below,
        timeline: None,
        warnings,
        callgraph,
        stacks: if opts.stacks {
            stack_data.map(|s| s.stacks)
        } else {
            None
        },
    })
}

fn percent(n: u64, of: u64) -> f64 {
    if of == 0 {
        0.0
    } else {
        n as f64 * 100.0 / of as f64
    }
}

fn percents(samples: &[u64], denom: &[u64]) -> Vec<f64> {
    samples
        .iter()
        .zip(denom)
        .map(|(&n, &d)| percent(n, d))
        .collect()
}

fn compare(a: &Row, b: &Row, key: SortKey, inclusive: bool) -> Ordering {
    let by_samples = if inclusive {
        b.inclusive_total
            .cmp(&a.inclusive_total)
            .then(b.total.cmp(&a.total))
    } else {
        b.total.cmp(&a.total)
    };
    let tie = || {
        a.image
            .cmp(&b.image)
            .then_with(|| a.symbol.cmp(&b.symbol))
            .then_with(|| a.app.cmp(&b.app))
            .then_with(|| a.tgid.cmp(&b.tgid))
            .then_with(|| a.tid.cmp(&b.tid))
            .then_with(|| a.comm.cmp(&b.comm))
    };
    match key {
        SortKey::Samples => by_samples.then_with(tie),
        SortKey::Image => a.image.cmp(&b.image).then(by_samples).then_with(tie),
        SortKey::Symbol => {
            let name = |r: &Row| r.symbol.clone().unwrap_or_else(|| r.image.clone());
            name(a).cmp(&name(b)).then(by_samples).then_with(tie)
        }
        SortKey::Vma => {
            let vma = |r: &Row| r.vma.or(r.symbol.as_ref().map(|_| u64::MAX));
            match (vma(a), vma(b)) {
                (Some(x), Some(y)) => x.cmp(&y),
                (Some(_), None) => Ordering::Less,
                (None, Some(_)) => Ordering::Greater,
                (None, None) => Ordering::Equal,
            }
            .then(by_samples)
            .then_with(tie)
        }
    }
}

fn sort_and_cut(rows: &mut Vec<Row>, opts: &ReportOptions, inclusive: bool, below: &mut usize) {
    rows.sort_by(|a, b| compare(a, b, opts.sort, inclusive));
    if opts.reverse {
        rows.reverse();
    }
    if opts.threshold > 0.0 {
        let before = rows.len();
        rows.retain(|r| {
            let p = if inclusive {
                r.inclusive_total_percent
            } else {
                r.total_percent
            };
            p >= opts.threshold
        });
        *below += before - rows.len();
    }
    for r in rows.iter_mut() {
        if !r.children.is_empty() {
            sort_and_cut(&mut r.children, opts, inclusive, below);
        }
    }
}

/// A row before names: which (thread, app, binary, symbol) it counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct RowKey {
    sess: u32,
    tgid: u32,
    tid: u32,
    app: Cookie,
    has_app: bool,
    image: Cookie,
    sym: u32,
}

// ---------------------------------------------------------------- header

fn check_merge(sessions: &[Session], warnings: &mut Vec<String>) -> Result<()> {
    let Some(first) = sessions.first() else {
        return Ok(());
    };
    let e0 = &first.reader().header().event;
    for s in &sessions[1..] {
        let e = &s.reader().header().event;
        if (e.type_, e.config, &e.name) != (e0.type_, e0.config, &e0.name) {
            return Err(Error::MergeMismatch {
                first_path: first.reader().path().to_path_buf(),
                first: e0.name.clone(),
                second_path: s.reader().path().to_path_buf(),
                second: e.name.clone(),
            });
        }
        if (e.frequency, e.period) != (e0.frequency, e0.period) {
            warnings.push(format!(
                "merged sessions sample at different rates ({} and {}): a sample stands for a \
                 different amount of time in each",
                rate(e0.frequency, e0.period),
                rate(e.frequency, e.period)
            ));
        }
    }
    Ok(())
}

fn rate(frequency: Option<u64>, period: Option<u64>) -> String {
    match (frequency, period) {
        (Some(f), _) => format!("{f} Hz"),
        (None, Some(p)) => format!("period {p}"),
        (None, None) => "unknown rate".to_owned(),
    }
}

/// The header, and the samples read per CPU (the global denominators).
fn header(
    sessions: &[Session],
    agg: &Aggregate,
    warnings: &mut Vec<String>,
) -> (Header, BTreeMap<u32, u64>) {
    let mut infos = Vec::new();
    let mut bad = Vec::new();
    let mut read_per_cpu: BTreeMap<u32, u64> = BTreeMap::new();
    let mut cpus: BTreeMap<u32, (u64, u64)> = BTreeMap::new();
    let mut start = u64::MAX;
    let mut end = 0u64;
    let mut unreadable = Some(0u64);
    let (mut with_footer, mut without_footer) = (0, 0);
    let mut problems = false;
    for (i, s) in sessions.iter().enumerate() {
        let r = s.reader();
        let h = r.header();
        let path = r.path().display().to_string();
        let stats = agg.chunks.iter().filter(|c| c.sess == i as u32);
        let mut read_here: BTreeMap<u32, u64> = BTreeMap::new();
        let mut lost_here: BTreeMap<u32, u64> = BTreeMap::new();
        let mut last_time = h.start_monotonic_ns;
        for c in stats {
            for &(cpu, n) in &c.read {
                *read_here.entry(cpu).or_insert(0) += n;
            }
            for &(cpu, n) in &c.lost {
                *lost_here.entry(cpu).or_insert(0) += n;
            }
            last_time = last_time.max(c.time);
        }
        for (&cpu, &n) in &read_here {
            *read_per_cpu.entry(cpu).or_insert(0) += n;
        }
        let read_total: u64 = read_here.values().sum();
        let errors: Vec<_> = agg.errors.iter().filter(|e| e.sess == i as u32).collect();
        let end_mono = match r.footer() {
            Some(f) => {
                with_footer += 1;
                for a in &f.accounting {
                    let e = cpus.entry(a.cpu).or_insert((0, 0));
                    e.0 += a.samples_written;
                    e.1 += a.lost_total();
                }
                let written: u64 = f.accounting.iter().map(|a| a.samples_written).sum();
                if let Some(u) = unreadable.as_mut() {
                    *u += written.saturating_sub(read_total);
                }
                f.end_monotonic_ns.max(last_time)
            }
            None => {
                without_footer += 1;
                for (&cpu, &n) in &read_here {
                    cpus.entry(cpu).or_insert((0, 0)).0 += n;
                }
                for (&cpu, &n) in &lost_here {
                    cpus.entry(cpu).or_insert((0, 0)).1 += n;
                }
                let running = s.liveness() == Liveness::Running;
                let missing = r
                    .bad_chunks()
                    .iter()
                    .any(|b| !(b.is_torn_tail() && running));
                if missing || !errors.is_empty() {
                    unreadable = None;
                }
                last_time
            }
        };
        for &cpu in &h.cpus {
            cpus.entry(cpu).or_insert((0, 0));
        }
        start = start.min(h.start_time_unix_ns);
        end = end.max(
            h.start_time_unix_ns
                .saturating_add(end_mono.saturating_sub(h.start_monotonic_ns)),
        );
        let running = s.liveness() == Liveness::Running;
        let state = match (r.footer(), s.liveness()) {
            (Some(_), _) => "stopped".to_owned(),
            (None, Liveness::Running) => format!(
                "running: reading the {} complete chunks so far",
                r.chunks().len()
            ),
            (None, Liveness::NotRunning) => {
                "not stopped cleanly: no footer, the recorder was killed or crashed".to_owned()
            }
            (None, Liveness::Unknown) => {
                "no footer: still running, or the recorder was killed".to_owned()
            }
        };
        for b in r.bad_chunks() {
            let torn = b.is_torn_tail();
            bad.push(BadChunkInfo {
                session: path.clone(),
                index: b.index,
                offset: b.offset,
                len: b.len,
                reason: b.reason.to_string(),
                torn,
            });
            if torn && running {
                continue; // a chunk being written: expected, not a problem
            }
            problems = true;
            let what = if torn {
                "torn chunk (the recorder stopped while writing it); not read"
            } else {
                "unreadable; skipped"
            };
            warnings.push(format!("{path}: {b}: {what}"));
        }
        for e in errors {
            problems = true;
            bad.push(BadChunkInfo {
                session: path.clone(),
                index: e.index,
                offset: e.offset,
                len: 0,
                reason: format!(
                    "decoding stopped ({}); {} samples before it were read",
                    e.message, e.samples_before
                ),
                torn: false,
            });
            warnings.push(format!(
                "{path}: chunk {} at byte {}: decoding stopped: {}; the {} samples before the \
                 bad byte are reported, the rest of the chunk is skipped",
                e.index, e.offset, e.message, e.samples_before
            ));
        }
        infos.push(SessionInfo {
            path,
            state,
            target: h.target.clone(),
            host: h.host.clone(),
            chunks: r.chunks().len() as u64,
            rounds: r.footer().map(|f| f.rounds),
        });
    }
    bad.sort_by(|a, b| (&a.session, a.index).cmp(&(&b.session, b.index)));
    let samples_read: u64 = read_per_cpu.values().sum();
    if problems {
        match unreadable {
            Some(n) if n > 0 => warnings.push(format!(
                "{n} samples are in unreadable chunks and not in this report (footer counts \
                 minus samples read)"
            )),
            None => warnings.push(
                "an unknown number of samples are in unreadable chunks (the session has no \
                 footer to count them)"
                    .to_owned(),
            ),
            _ => {}
        }
    }
    let cpus: Vec<CpuLoss> = cpus
        .into_iter()
        .map(|(cpu, (samples, lost))| CpuLoss {
            cpu,
            samples,
            lost,
            percent: percent(lost, samples + lost),
        })
        .collect();
    let lost_total: u64 = cpus.iter().map(|c| c.lost).sum();
    let all: u64 = cpus.iter().map(|c| c.samples).sum::<u64>() + lost_total;
    let first = sessions.first().map(|s| s.reader().header());
    let header = Header {
        sessions: infos,
        event: first.map(|h| h.event.name.clone()).unwrap_or_default(),
        frequency: first.and_then(|h| h.event.frequency),
        period: first.and_then(|h| h.event.period),
        start_unix_ns: if start == u64::MAX { 0 } else { start },
        duration_ns: end.saturating_sub(start),
        samples_read,
        total_samples: 0,
        samples_unreadable: unreadable,
        cpus,
        lost_total,
        lost_percent: percent(lost_total, all),
        lost_source: match (with_footer, without_footer) {
            (_, 0) => "footer",
            (0, _) => "markers",
            _ => "footer and markers",
        }
        .to_owned(),
        bad_chunks: bad,
    };
    (header, read_per_cpu)
}

// ---------------------------------------------------------------- timeline

fn timeline(sessions: &[Session], agg: &Aggregate, per: u32, spec: &ProfileSpec) -> Timeline {
    let mut cpus: BTreeSet<u32> = sessions
        .iter()
        .flat_map(|s| s.reader().header().cpus.iter().copied())
        .collect();
    for c in &agg.chunks {
        cpus.extend(c.read.iter().map(|&(cpu, _)| cpu));
        cpus.extend(c.lost.iter().map(|&(cpu, _)| cpu));
    }
    if !spec.cpus.is_empty() {
        cpus.retain(|c| spec.cpus.contains(c));
    }
    let cpus: Vec<u32> = cpus.into_iter().collect();
    let idx: HashMap<u32, usize> = cpus.iter().enumerate().map(|(i, &c)| (c, i)).collect();
    let mut out = Vec::new();
    for (i, s) in sessions.iter().enumerate() {
        let start = s.reader().header().start_monotonic_ns;
        let mut lines: BTreeMap<u64, TimelineLine> = BTreeMap::new();
        let per = u64::from(per);
        let new_line = |bucket: u64| TimelineLine {
            first_round: bucket * per,
            last_round: bucket * per + per - 1,
            time_s: 0.0,
            samples: vec![0; cpus.len()],
            lost: vec![0; cpus.len()],
            unreadable_chunks: Vec::new(),
        };
        let mut seen_last: BTreeMap<u64, u64> = BTreeMap::new();
        let mut chunks: Vec<_> = agg.chunks.iter().filter(|c| c.sess == i as u32).collect();
        chunks.sort_by_key(|c| c.round);
        for c in chunks {
            let line = lines
                .entry(c.round / per)
                .or_insert_with(|| new_line(c.round / per));
            line.time_s = line.time_s.max(c.time.saturating_sub(start) as f64 / 1e9);
            let last = seen_last.entry(c.round / per).or_insert(c.round);
            *last = (*last).max(c.round);
            for &(cpu, n) in &c.kept {
                if let Some(&j) = idx.get(&cpu) {
                    line.samples[j] += n;
                }
            }
            for &(cpu, n) in &c.lost {
                if let Some(&j) = idx.get(&cpu) {
                    line.lost[j] += n;
                }
            }
        }
        for b in s.reader().bad_chunks() {
            if let profkit_eventlog::BadReason::PayloadCrc { round, .. } = b.reason {
                lines
                    .entry(round / per)
                    .or_insert_with(|| new_line(round / per))
                    .unreadable_chunks
                    .push(b.index);
                let last = seen_last.entry(round / per).or_insert(round);
                *last = (*last).max(round);
            }
        }
        for (bucket, line) in lines.iter_mut() {
            line.last_round = seen_last.get(bucket).copied().unwrap_or(line.first_round);
        }
        out.push(SessionTimeline {
            session: s.reader().path().display().to_string(),
            lines: lines.into_values().collect(),
        });
    }
    Timeline {
        rounds_per_line: per,
        cpus,
        sessions: out,
    }
}

// ---------------------------------------------------------------- names

/// Thread names, last one in file order winning.
pub(crate) struct Comms {
    by_tid: HashMap<(u32, u32, u32), String>,
    exec: HashMap<(u32, u32), String>,
}

impl Comms {
    fn new(agg: &Aggregate) -> Comms {
        let mut marks: Vec<_> = agg.comms.iter().collect();
        marks.sort_by_key(|m| (m.sess, m.chunk, m.seq));
        let mut by_tid = HashMap::new();
        let mut exec = HashMap::new();
        for m in marks {
            by_tid.insert((m.sess, m.pid, m.tid), m.comm.clone());
            if m.exec && m.pid == m.tid {
                exec.insert((m.sess, m.pid), m.comm.clone());
            }
        }
        Comms { by_tid, exec }
    }

    /// The name of a thread (else of its process, else `?`).
    pub(crate) fn name(&self, sess: u32, pid: u32, tid: u32) -> &str {
        self.by_tid
            .get(&(sess, pid, tid))
            .or_else(|| self.by_tid.get(&(sess, pid, pid)))
            .map_or("?", String::as_str)
    }

    /// The name a process's executable should have: its name at exec, else
    /// its main thread's name.
    fn process(&self, sess: u32, pid: u32) -> Option<&str> {
        self.exec
            .get(&(sess, pid))
            .or_else(|| self.by_tid.get(&(sess, pid, pid)))
            .map(String::as_str)
    }
}

/// Display names of binaries.
pub(crate) struct Images<'a> {
    agg: &'a Aggregate,
    long: bool,
}

impl<'a> Images<'a> {
    fn new(agg: &'a Aggregate, long: bool, warnings: &mut Vec<String>) -> Images<'a> {
        let mut unknown: BTreeMap<Cookie, u64> = BTreeMap::new();
        for (k, &n) in &agg.counts {
            if !agg.cookies.contains_key(&k.cookie) {
                *unknown.entry(k.cookie).or_insert(0) += n;
            }
        }
        for (c, n) in unknown {
            warnings.push(format!(
                "{n} samples in a binary whose definition was not read (cookie {c:#018x}; it was \
                 in an unreadable chunk): shown as {}",
                unknown_name(c)
            ));
        }
        Images { agg, long }
    }

    pub(crate) fn entry(&self, c: Cookie) -> Option<&'a CookieEntry> {
        self.agg.cookies.get(&c).map(|(e, _, _)| e)
    }

    /// The name shown for a binary.
    pub(crate) fn name(&self, c: Cookie) -> String {
        match self.entry(c) {
            None if c == COOKIE_UNKNOWN => "[unknown]".to_owned(),
            None => unknown_name(c),
            Some(e) => match e.kind {
                CookieKind::Anon => match e.pid {
                    Some(p) => format!("anon (tgid:{p})"),
                    None => "anon".to_owned(),
                },
                _ if self.long => e.path.clone(),
                _ => base_name(&e.path).to_owned(),
            },
        }
    }

    /// The name image globs are matched against: the full path.
    fn match_path(&self, c: Cookie) -> String {
        match self.entry(c) {
            Some(e) if e.kind != CookieKind::Anon => e.path.clone(),
            _ => self.name(c),
        }
    }
}

fn unknown_name(c: Cookie) -> String {
    format!("[unknown binary {c:#018x}]")
}

/// The application of each (session, pid): the user binary whose file
/// name starts with the process's name (the kernel's `comm` is the
/// executable's file name, cut to 15 bytes), preferring one the process
/// mapped; else the process's most sampled user binary that is not a
/// shared library; else none (kernel threads).
fn find_apps(agg: &Aggregate, comms: &Comms) -> FxHashMap<(u32, u32), Cookie> {
    let is_user = |c: &Cookie| {
        agg.cookies
            .get(c)
            .is_some_and(|(e, _, _)| e.kind == CookieKind::User)
    };
    // (sess, pid) → cookie → (samples, mapped)
    let mut cands: HashMap<(u32, u32), BTreeMap<Cookie, (u64, bool)>> = HashMap::new();
    for &(sess, pid, cookie) in &agg.maps {
        if is_user(&cookie) {
            cands
                .entry((sess, pid))
                .or_default()
                .entry(cookie)
                .or_default()
                .1 = true;
        }
    }
    for (k, &n) in &agg.counts {
        if is_user(&k.cookie) {
            cands
                .entry((k.sess, k.pid))
                .or_default()
                .entry(k.cookie)
                .or_default()
                .0 += n;
        }
    }
    let mut apps = FxHashMap::default();
    for ((sess, pid), list) in cands {
        let path = |c: &Cookie| agg.cookies.get(c).map_or("", |(e, _, _)| e.path.as_str());
        let comm = comms.process(sess, pid).filter(|c| !c.is_empty());
        let by_name = comm.and_then(|comm| {
            list.iter()
                .filter(|(c, _)| base_name(path(c)).starts_with(comm))
                .max_by_key(|(c, &(n, mapped))| (mapped, n, std::cmp::Reverse(**c)))
                .map(|(c, _)| *c)
        });
        let chosen = by_name.or_else(|| {
            list.iter()
                .filter(|(c, _)| !base_name(path(c)).contains(".so"))
                .max_by_key(|(c, &(n, _))| (n, std::cmp::Reverse(**c)))
                .map(|(c, _)| *c)
        });
        if let Some(c) = chosen {
            apps.insert((sess, pid), c);
        }
    }
    apps
}

// ---------------------------------------------------------------- symbols

/// One binary's symbolization: its symbols (and with `--debug-info` their
/// source locations), and which symbol each sampled offset is in, as runs
/// of consecutive sampled offsets with the same symbol.
///
/// Runs instead of one entry per offset: a binary can have a million
/// distinct sampled offsets but only hundreds of symbols, so the lookup for
/// each aggregated sample is a binary search in a table that stays in
/// cache (a search over per-offset entries was 95 % of a synthetic
/// report's time, every probe a cache miss).
pub(crate) struct Resolved {
    /// The symbolizer's answer, its per-offset entries dropped.
    pub(crate) result: BinaryResult,
    /// (first offset, last offset, symbol), sorted, not overlapping.
    runs: Vec<(u64, u64, Option<SymbolId>)>,
    /// With `--debug-info`: each symbol's source location.
    locations: HashMap<SymbolId, profkit_symbols::SourceLocation>,
}

impl Resolved {
    /// `result.offsets` must be in increasing offset order (as requested).
    fn new(
        mut result: BinaryResult,
        locations: HashMap<SymbolId, profkit_symbols::SourceLocation>,
    ) -> Resolved {
        let mut runs: Vec<(u64, u64, Option<SymbolId>)> = Vec::new();
        for o in &result.offsets {
            match runs.last_mut() {
                Some(last) if last.2 == o.symbol => last.1 = o.offset,
                _ => runs.push((o.offset, o.offset, o.symbol)),
            }
        }
        result.offsets = Vec::new();
        Resolved {
            result,
            runs,
            locations,
        }
    }

    pub(crate) fn symbol_of(&self, offset: u64) -> Option<SymbolId> {
        let i = self
            .runs
            .partition_point(|r| r.0 <= offset)
            .checked_sub(1)?;
        let (_, last, id) = self.runs[i];
        if offset <= last {
            id
        } else {
            None
        }
    }

    fn location(&self, id: SymbolId, long: bool) -> Option<String> {
        let loc = self.locations.get(&id)?;
        let file = if long {
            loc.file.as_str()
        } else {
            base_name(&loc.file)
        };
        Some(match loc.line {
            Some(l) => format!("{file}:{l}"),
            None => file.to_owned(),
        })
    }
}

fn request(e: &CookieEntry) -> BinaryRequest {
    let mut r = match e.kind {
        CookieKind::Kernel => BinaryRequest::kernel(e.base),
        CookieKind::Module => BinaryRequest::module(&e.path, e.base),
        CookieKind::Vdso => BinaryRequest::vdso(&e.path),
        CookieKind::Anon => {
            let mut r = BinaryRequest::anon(e.pid.unwrap_or(0), 0, 0);
            r.pid = e.pid;
            return r;
        }
        CookieKind::User | CookieKind::Other => BinaryRequest::elf(&e.path),
    };
    if let Some(b) = &e.build_id {
        r = r.with_build_id(b.clone());
    } else if e.inode != 0 && e.kind == CookieKind::User {
        r = r.with_inode(e.inode);
    }
    r
}

fn symbolize(
    sessions: &[Session],
    agg: &Aggregate,
    opts: &ReportOptions,
    sources: &SymbolSources,
    progress: &dyn Progress,
    warnings: &mut Vec<String>,
) -> Result<FxHashMap<Cookie, Resolved>> {
    // Distinct offsets per binary.
    let mut offsets: FxHashMap<Cookie, Vec<u64>> = FxHashMap::default();
    for k in agg.counts.keys() {
        // `Other` names no file (e.g. `[unknown]` stack frames): nothing to read.
        let known = agg
            .cookies
            .get(&k.cookie)
            .is_some_and(|(e, _, _)| e.kind != CookieKind::Other);
        if known {
            offsets.entry(k.cookie).or_default().push(k.offset);
        }
    }
    // Callers: each distinct stack's frames, at the call instruction (the
    // return address minus one).
    let mut seen: crate::hash::FxHashSet<(u32, u32)> = Default::default();
    for &(k, stack) in agg.stack_counts.keys() {
        if stack == NO_STACK || !seen.insert((k.sess, stack)) {
            continue;
        }
        let Some(frames) = agg.stack_tables.get(&k.sess).and_then(|t| t.get(stack)) else {
            continue;
        };
        for f in frames {
            let known = agg
                .cookies
                .get(&f.cookie)
                .is_some_and(|(e, _, _)| e.kind != CookieKind::Other);
            if known {
                offsets
                    .entry(f.cookie)
                    .or_default()
                    .push(f.offset.saturating_sub(1));
            }
        }
    }
    // One symbolizer per distinct set of session-specific sources.
    let mut configs: Vec<SymbolizerOptions> = Vec::new();
    let mut config_of_session = Vec::new();
    for s in sessions {
        let o = SymbolizerOptions {
            debug_info: opts.debug_info,
            demangle: opts.demangle,
            kallsyms: match (&sources.kallsyms, s.kallsyms_copy()) {
                (Some(k), _) => KallsymsSource::File(k.clone()),
                (None, Some(k)) => KallsymsSource::File(k),
                (None, None) => KallsymsSource::Live,
            },
            perf_map_dir: s.perf_map_dir(),
            debug_dirs: s
                .archive_debug_dir()
                .into_iter()
                .chain(if sources.debug_dirs.is_empty() {
                    SymbolizerOptions::default().debug_dirs
                } else {
                    sources.debug_dirs.clone()
                })
                .collect(),
            sysroot: sources.sysroot.clone(),
            search_dirs: sources.search_dirs.clone(),
        };
        let i = match configs.iter().position(|c| *c == o) {
            Some(i) => i,
            None => {
                configs.push(o);
                configs.len() - 1
            }
        };
        config_of_session.push(i);
    }
    let mut groups: Vec<Vec<(Cookie, BinaryRequest, Vec<u64>)>> =
        configs.iter().map(|_| Vec::new()).collect();
    let mut cookies: Vec<(Cookie, Vec<u64>)> = offsets.into_iter().collect();
    cookies.sort_unstable_by_key(|(c, _)| *c);
    for (c, mut offs) in cookies {
        offs.sort_unstable();
        offs.dedup();
        let (entry, sess, _) = &agg.cookies[&c];
        let g = config_of_session[*sess as usize];
        groups[g].push((c, request(entry), offs));
    }
    progress.start(
        "symbolizing binaries",
        groups.iter().map(|g| g.len() as u64).sum(),
    );
    let mut out = FxHashMap::default();
    let mut live_kallsyms: Option<Option<Vec<u8>>> = None;
    for (cfg, group) in configs.into_iter().zip(groups) {
        // The kernel and its modules on one side (kallsyms), everything else
        // on the other, in parallel: trimming kallsyms is the longest step.
        let (kernel, other): (Vec<_>, Vec<_>) = group
            .into_iter()
            .partition(|(_, r, _)| matches!(r.kind, BinaryKind::Kernel | BinaryKind::Module));
        let kernel_cfg = kernel_options(&cfg, &kernel, &mut live_kallsyms);
        let other_cfg = SymbolizerOptions {
            kallsyms: KallsymsSource::None,
            ..cfg
        };
        let (kernel_done, other_done) = rayon::join(
            || run_group(kernel_cfg, kernel, false, progress),
            || run_group(Ok(other_cfg), other, opts.debug_info, progress),
        );
        for (cookie, resolved) in kernel_done?.into_iter().chain(other_done?) {
            for w in &resolved.result.warnings {
                if !warnings.contains(w) {
                    warnings.push(w.clone());
                }
            }
            out.insert(cookie, resolved);
        }
    }
    Ok(out)
}

/// The symbolizer options for the kernel and module requests of a group:
/// kallsyms trimmed to the lines these samples need (see `kallsyms.rs`). A
/// file is streamed; the live one is read once, and only when the recorded
/// kernel build-id matches the running kernel's and addresses are not
/// hidden (else the symbolizer reads it itself, to say what is wrong).
fn kernel_options(
    cfg: &SymbolizerOptions,
    group: &[(Cookie, BinaryRequest, Vec<u64>)],
    live: &mut Option<Option<Vec<u8>>>,
) -> std::result::Result<SymbolizerOptions, profkit_symbols::Error> {
    let mut out = cfg.clone();
    if group.is_empty() {
        out.kallsyms = KallsymsSource::None;
        return Ok(out);
    }
    let mut wanted = kallsyms::Wanted::default();
    let mut kernel_ids = Vec::new();
    for (_, req, offs) in group {
        match req.kind {
            BinaryKind::Kernel => {
                wanted.kernel_base = req.base;
                wanted.kernel_offsets.extend(offs);
                kernel_ids.push(req.build_id.clone());
            }
            _ => wanted
                .modules
                .entry(kallsyms::module_name(&req.path.to_string_lossy()))
                .or_default()
                .extend(offs.iter().map(|&o| req.base.wrapping_add(o))),
        }
    }
    let trimmed = match &cfg.kallsyms {
        KallsymsSource::File(path) => kallsyms::trim(kallsyms::Source::File(path), &wanted),
        KallsymsSource::Live => {
            let running = std::fs::read("/sys/kernel/notes")
                .ok()
                .and_then(|n| kallsyms::build_id_from_notes(&n));
            let same_kernel = kernel_ids
                .iter()
                .all(|id| id.is_none() || running.is_none() || *id == running);
            let text = live.get_or_insert_with(|| std::fs::read("/proc/kallsyms").ok());
            match text {
                Some(t) if same_kernel => kallsyms::trim(kallsyms::Source::Bytes(t), &wanted),
                _ => return Ok(out),
            }
        }
        _ => return Ok(out),
    };
    // Hidden addresses, or a read error: the symbolizer reads the source
    // itself and words the warning.
    if let Ok(kallsyms::Trimmed::Text(text)) = trimmed {
        out.kallsyms = KallsymsSource::Text(text);
    }
    Ok(out)
}

/// Symbolizes one group of requests with a symbolizer of its own; with
/// `debug_info`, also each symbol's source location.
fn run_group(
    cfg: std::result::Result<SymbolizerOptions, profkit_symbols::Error>,
    group: Vec<(Cookie, BinaryRequest, Vec<u64>)>,
    debug_info: bool,
    progress: &dyn Progress,
) -> Result<Vec<(Cookie, Resolved)>> {
    if group.is_empty() {
        return Ok(Vec::new());
    }
    let sym = Symbolizer::new(cfg?)?;
    let (keys, reqs): (Vec<_>, Vec<_>) = group
        .into_iter()
        .map(|(c, r, o)| ((c, r.clone()), (r, o)))
        .unzip();
    let results = sym.symbolize_all(reqs);
    progress.advance(keys.len() as u64);
    let mut out = Vec::with_capacity(keys.len());
    for ((cookie, req), result) in keys.into_iter().zip(results) {
        let mut locations = HashMap::new();
        if debug_info && matches!(req.kind, BinaryKind::Elf | BinaryKind::Vdso) {
            let starts: Vec<(SymbolId, u64)> = result
                .symbols
                .iter()
                .enumerate()
                .filter_map(|(i, s)| Some((SymbolId(i as u32), s.file_offset?)))
                .collect();
            let at: Vec<u64> = starts.iter().map(|&(_, o)| o).collect();
            if !at.is_empty() {
                let lines = sym.symbolize(&req, &at);
                for ((id, _), info) in starts.into_iter().zip(lines.offsets) {
                    if let Some(l) = info.location {
                        locations.insert(id, l);
                    }
                }
            }
        }
        out.push((cookie, Resolved::new(result, locations)));
    }
    Ok(out)
}
