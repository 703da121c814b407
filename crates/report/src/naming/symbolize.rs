//! Symbolization after aggregation: each binary's *distinct* offsets (the
//! sampled ones and, with stacks, each caller frame at its call
//! instruction) are symbolized once, one symbolizer per distinct set of
//! session sources, the kernel and its modules (from kallsyms trimmed by
//! `profkit_symbols::trim_kallsyms`) in parallel with everything else.
//!
//! With call stacks and [`ReportOptions::inline`], the same lookups also
//! read each offset's inlined frames from DWARF (the symbolizer's
//! `debug_info`): the names are kept per binary, interned, and each offset
//! that is inside inlined code keeps its chain (innermost first), so the
//! call graph can expand a frame into its inline chain without asking the
//! symbolizer again: still one lookup per distinct (binary, offset).

use std::borrow::Cow;
use std::collections::HashMap;

use profkit_eventlog::{Cookie, CookieEntry, CookieKind, FileCheck};
use profkit_symbols::{
    BinaryKind, BinaryRequest, BinaryResult, KallsymsInput, KallsymsSource, KallsymsWanted,
    RecordedFile, SymbolId, Symbolizer, SymbolizerOptions, TrimmedKallsyms,
};

use crate::aggregate::{Aggregate, NO_STACK};
use crate::error::Result;
use crate::hash::FxHashMap;
use crate::options::{ReportOptions, SymbolSources};
use crate::session::Session;
use crate::spec::base_name;
use crate::Progress;

/// A binary to symbolize: its cookie, request and offsets (ascending,
/// distinct; a flat report's are its sorted counts' own).
pub(crate) type Want<'a> = (Cookie, BinaryRequest, Cow<'a, [u64]>);

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
    /// The runs' first offsets, sorted (apart from the rest of each run:
    /// the binary search of [`Resolved::symbol_of`] touches 8 bytes a run).
    run_starts: Vec<u64>,
    /// Each run's last offset and symbol; runs do not overlap.
    run_ends: Vec<(u64, Option<SymbolId>)>,
    /// With `--debug-info`: each symbol's source location.
    locations: HashMap<SymbolId, profkit_symbols::SourceLocation>,
    /// With inlined frames: the distinct inlined function names.
    inline_names: Vec<String>,
    /// With inlined frames: per offset inside inlined code, its inlined
    /// functions (indexes into `inline_names`), innermost first.
    inlined: FxHashMap<u64, Box<[u32]>>,
}

impl Resolved {
    /// `result.offsets` must be in increasing offset order (as requested).
    /// With `keep_inline`, the inlined frames of each offset are kept
    /// (those without a function name are left out).
    pub(crate) fn new(
        mut result: BinaryResult,
        locations: HashMap<SymbolId, profkit_symbols::SourceLocation>,
        keep_inline: bool,
    ) -> Resolved {
        let mut runs: Vec<(u64, u64, Option<SymbolId>)> = Vec::new();
        let mut inline_names: Vec<String> = Vec::new();
        let mut name_index: FxHashMap<String, u32> = FxHashMap::default();
        let mut inlined: FxHashMap<u64, Box<[u32]>> = FxHashMap::default();
        for o in &mut result.offsets {
            match runs.last_mut() {
                Some(last) if last.2 == o.symbol => last.1 = o.offset,
                _ => runs.push((o.offset, o.offset, o.symbol)),
            }
            if !keep_inline || o.inlined.is_empty() || o.symbol.is_none() {
                continue;
            }
            let chain: Box<[u32]> = o
                .inlined
                .iter_mut()
                .filter_map(|f| f.function.take())
                .map(|name| match name_index.get(&name) {
                    Some(&i) => i,
                    None => {
                        let i = inline_names.len() as u32;
                        inline_names.push(name.clone());
                        name_index.insert(name, i);
                        i
                    }
                })
                .collect();
            if !chain.is_empty() {
                inlined.insert(o.offset, chain);
            }
        }
        result.offsets = Vec::new();
        let (run_starts, run_ends) = runs.into_iter().map(|(a, b, id)| (a, (b, id))).unzip();
        Resolved {
            result,
            run_starts,
            run_ends,
            locations,
            inline_names,
            inlined,
        }
    }

    /// From [`profkit_symbols::Symbolizer::symbolize_runs`]'s answer (for
    /// offsets in increasing order): no inlined frames.
    pub(crate) fn from_runs(
        result: BinaryResult,
        runs: Vec<profkit_symbols::SymbolRun>,
        locations: HashMap<SymbolId, profkit_symbols::SourceLocation>,
    ) -> Resolved {
        let (run_starts, run_ends) = runs
            .into_iter()
            .map(|r| (r.first, (r.last, r.symbol)))
            .unzip();
        Resolved {
            result,
            run_starts,
            run_ends,
            locations,
            inline_names: Vec::new(),
            inlined: FxHashMap::default(),
        }
    }

    /// The inlined functions at `offset` (indexes for
    /// [`Resolved::inline_name`]), innermost first; empty outside inlined
    /// code or without inlined frames.
    pub(crate) fn inlined_at(&self, offset: u64) -> &[u32] {
        self.inlined.get(&offset).map_or(&[], |c| c)
    }

    /// The name of inlined function `i` (from [`Resolved::inlined_at`]).
    pub(crate) fn inline_name(&self, i: u32) -> &str {
        &self.inline_names[i as usize]
    }

    pub(crate) fn symbol_of(&self, offset: u64) -> Option<SymbolId> {
        let i = self
            .run_starts
            .partition_point(|&a| a <= offset)
            .checked_sub(1)?;
        let (last, id) = self.run_ends[i];
        if offset <= last {
            id
        } else {
            None
        }
    }

    pub(crate) fn location(&self, id: SymbolId, long: bool) -> Option<String> {
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

/// The symbolizer's request for cookie entry `e` of session `s`: with the
/// file the recorder identified behind it (a build-id is only a claim) and
/// the copy it kept of that file, if any.
pub(crate) fn request(e: &CookieEntry, s: Option<&Session>) -> BinaryRequest {
    let mut r = match e.kind {
        CookieKind::Kernel => BinaryRequest::kernel(e.base),
        CookieKind::Module => BinaryRequest::module(&e.path, e.base),
        CookieKind::Vdso => BinaryRequest::vdso(&e.path),
        // Jit: absolute addresses, as Anon's; what JitCode markers do not
        // name, the process's perf map may.
        CookieKind::Anon | CookieKind::Jit => {
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
    if e.kind == CookieKind::User {
        match e.file {
            FileCheck::File(i) => {
                r = r.with_file(RecordedFile {
                    inode: i.inode,
                    size: i.size,
                    mtime_ns: i.mtime_ns,
                    here: s.is_none_or(Session::recorded_here),
                });
                if let Some(k) = s.and_then(|s| s.kept_copy(e.cookie)) {
                    r = r.with_kept_copy(k);
                }
            }
            FileCheck::Unverified => r = r.unverified(),
            _ => {}
        }
    }
    r
}

/// Symbolizes the distinct offsets of every binary the aggregate holds:
/// the samples', and each caller frame's call instruction (its return
/// address − 1) and return address (a caller whose call instruction is in
/// no symbol is named by its return address, as perf does: the call
/// graphs' and the sample stream's rule).
///
/// # Errors
/// [`crate::Error::Symbols`] when a symbol source option is unusable.
pub(crate) fn symbolize(
    sessions: &[Session],
    agg: &Aggregate,
    opts: &ReportOptions,
    sources: &SymbolSources,
    progress: &dyn Progress,
    warnings: &mut Vec<String>,
) -> Result<FxHashMap<Cookie, Resolved>> {
    // Distinct offsets per binary: sorted counts' own, else gathered.
    let known = |c: &Cookie| {
        agg.cookies
            .get(c)
            .is_some_and(|(e, _, _)| e.kind != CookieKind::Other)
    };
    let sorted = agg.counts.sorted();
    let mut offsets: FxHashMap<Cookie, Vec<u64>> = FxHashMap::default();
    if sorted.is_none() {
        for k in agg.counts.keys() {
            // `Other` names no file (e.g. `[unknown]` stack frames): nothing to read.
            if known(&k.cookie) {
                offsets.entry(k.cookie).or_default().push(k.offset);
            }
        }
    }
    // Callers: each distinct stack's frames, at the call instruction (the
    // return address minus one).
    let mut seen: crate::hash::FxHashSet<(u32, u32)> = Default::default();
    for &(_, file, stack) in agg.stack_counts.keys() {
        if stack == NO_STACK || !seen.insert((file, stack)) {
            continue;
        }
        let Some(frames) = agg.stack_tables.get(&file).and_then(|t| t.get(stack)) else {
            continue;
        };
        for f in frames {
            if known(&f.cookie) {
                let v = offsets.entry(f.cookie).or_default();
                v.push(f.offset.saturating_sub(1));
                v.push(f.offset);
            }
        }
    }
    // Inlined frames come from DWARF: the symbolizer reads it for them
    // too, but only `--debug-info` shows source locations.
    let inline = opts.inline && opts.wants_stacks();
    let needs = Needs {
        debug_info: opts.debug_info,
        inline,
        raw_names: opts.annotate.is_some(),
    };
    // One symbolizer per distinct set of session-specific sources.
    let mut configs: Vec<SymbolizerOptions> = Vec::new();
    let mut config_of_session = Vec::new();
    for s in sessions {
        let o = symbolizer_options(s, opts, sources, opts.debug_info || inline);
        let i = match configs.iter().position(|c| *c == o) {
            Some(i) => i,
            None => {
                configs.push(o);
                configs.len() - 1
            }
        };
        config_of_session.push(i);
    }
    let mut groups: Vec<Vec<Want<'_>>> = configs.iter().map(|_| Vec::new()).collect();
    // Each binary's offsets: the sorted counts' as they are where no stack
    // adds any (a flat report's every binary), else merged and sorted.
    let mut cookies: Vec<(Cookie, Cow<'_, [u64]>)> = Vec::new();
    for (c, offs) in sorted.into_iter().flat_map(|s| s.binaries()) {
        if !known(&c) {
            continue;
        }
        match offsets.get_mut(&c) {
            Some(v) => v.extend_from_slice(offs),
            None => cookies.push((c, Cow::Borrowed(offs))),
        }
    }
    cookies.extend(offsets.into_iter().map(|(c, mut v)| {
        v.sort_unstable();
        v.dedup();
        (c, Cow::Owned(v))
    }));
    cookies.sort_unstable_by_key(|(c, _)| *c);
    // A Jit cookie's offsets that a JitCode covers are named by it; the
    // rest go to the symbolizer (the process's perf map, as for Anon).
    let mut jit_covered: FxHashMap<Cookie, Vec<u64>> = FxHashMap::default();
    for (c, mut offs) in cookies {
        let (entry, sess, _) = &agg.cookies[&c];
        if entry.kind == CookieKind::Jit {
            let (covered, rest): (Vec<u64>, Vec<u64>) =
                offs.iter().partition(|&&o| agg.jit.at(c, o).is_some());
            jit_covered.insert(c, covered);
            offs = Cow::Owned(rest);
            if offs.is_empty() {
                continue;
            }
        }
        let g = config_of_session[*sess as usize];
        groups[g].push((c, request(entry, sessions.get(*sess as usize)), offs));
    }
    if agg.jit.dropped > 0 {
        let w = format!(
            "{} JIT code markers were not read: over the report's bounds ({} markers, {} MiB); \
             their functions are named by perf map or shown as addresses",
            agg.jit.dropped,
            crate::naming::jit::MAX_JIT_MARKERS,
            crate::naming::jit::MAX_JIT_BYTES >> 20
        );
        if !warnings.contains(&w) {
            warnings.push(w);
        }
    }
    let jit = JitNaming {
        table: &agg.jit,
        covered: &jit_covered,
        demangle: opts.demangle,
        lines: opts.debug_info,
    };
    progress.start(
        "symbolizing binaries",
        groups.iter().map(|g| g.len() as u64).sum(),
    );
    let not_kept: Vec<_> = sessions.iter().map(Session::not_kept).collect();
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
        // What the local files leave unnamed is fetched and symbolized again.
        let other_requests = sources.debuginfod.as_ref().map(|_| other.clone());
        let index_note = std::sync::Mutex::new(None);
        let (kernel_done, other_done) = rayon::join(
            || {
                run_group(
                    kernel_cfg,
                    kernel,
                    Needs {
                        debug_info: false,
                        inline: false,
                        ..needs
                    },
                    &jit,
                    progress,
                    &index_note,
                )
            },
            || {
                run_group(
                    Ok(other_cfg.clone()),
                    other,
                    needs,
                    &jit,
                    progress,
                    &index_note,
                )
            },
        );
        let mut other_done = other_done?;
        if let (Some(d), Some(requests)) = (&sources.debuginfod, other_requests) {
            crate::naming::debuginfod::complete(
                d,
                &requests,
                &mut other_done,
                |r: &Resolved| &r.result,
                opts.debug_info,
                progress,
                |redo| {
                    run_group(
                        Ok(other_cfg.clone()),
                        redo,
                        needs,
                        &jit,
                        progress,
                        &index_note,
                    )
                },
            )?;
        }
        if let Some(w) = index_note.into_inner().ok().flatten() {
            if !warnings.contains(&w) {
                warnings.push(w);
            }
        }
        for (cookie, resolved) in kernel_done?.into_iter().chain(other_done) {
            for w in &resolved.result.warnings {
                // DWARF read only for inlined frames: a binary without it
                // is the common case (system libraries), not worth a word.
                if !opts.debug_info && w.starts_with("no DWARF for ") {
                    continue;
                }
                if !warnings.contains(w) {
                    warnings.push(w.clone());
                }
            }
            // A binary of another mount namespace the recorder could not
            // keep: say why.
            if resolved.result.path_used.is_none() {
                if let Some((e, sess, _)) = agg.cookies.get(&cookie) {
                    if let Some(why) = not_kept.get(*sess as usize).and_then(|m| m.get(&e.path)) {
                        warnings.push(format!(
                            "{}: not on the host, and the recorder could not keep it from its \
                             container: {why}",
                            e.path
                        ));
                    }
                }
            }
            out.insert(cookie, resolved);
        }
    }
    // Jit cookies whose every offset a JitCode names: nothing was asked.
    for &cookie in jit_covered.keys() {
        out.entry(cookie)
            .or_insert_with(|| jit.resolve(cookie, no_symbols(), HashMap::new()));
    }
    Ok(out)
}

/// How [`run_group`] names what `JitCode` markers cover.
struct JitNaming<'a> {
    table: &'a crate::naming::jit::JitTable,
    covered: &'a FxHashMap<Cookie, Vec<u64>>,
    demangle: bool,
    lines: bool,
}

impl JitNaming<'_> {
    /// `result` (the symbolizer's, for the offsets no marker covers) with
    /// the covered offsets of `cookie` added, if it is a Jit cookie.
    fn resolve(
        &self,
        cookie: Cookie,
        result: BinaryResult,
        mut locations: HashMap<SymbolId, profkit_symbols::SourceLocation>,
    ) -> Resolved {
        let result = match self.covered.get(&cookie) {
            Some(c) => self.table.name(
                cookie,
                c,
                result,
                self.demangle,
                self.lines.then_some(&mut locations),
            ),
            None => result,
        };
        Resolved::new(result, locations, false)
    }
}

/// A symbolizer's answer with nothing in it.
fn no_symbols() -> BinaryResult {
    BinaryResult {
        path_used: None,
        debug_file_used: None,
        warnings: Vec::new(),
        no_symbols: None,
        symbols: Vec::new(),
        offsets: Vec::new(),
    }
}

/// How session `s`'s binaries are found and named: its kallsyms copy,
/// perf maps and archived debug files, then the report's sources.
pub(crate) fn symbolizer_options(
    s: &Session,
    opts: &ReportOptions,
    sources: &SymbolSources,
    debug_info: bool,
) -> SymbolizerOptions {
    SymbolizerOptions {
        debug_info,
        demangle: opts.demangle,
        kallsyms: match (&sources.kallsyms, s.kallsyms_copy()) {
            (Some(k), _) => KallsymsSource::File(k.clone()),
            (None, Some(k)) => KallsymsSource::File(k),
            (None, None) => KallsymsSource::Live,
        },
        perf_map_dir: s.perf_map_dir(),
        debuginfod_cache: sources.debuginfod.as_ref().map(|d| d.cache().to_owned()),
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
        index_cache: sources.index_cache.clone(),
    }
}

/// The symbolizer options for the kernel and module requests of a group:
/// kallsyms trimmed to the lines these samples need (`profkit_symbols::trim_kallsyms`). A
/// file is streamed; the live one is read once, and only when the recorded
/// kernel build-id matches the running kernel's and addresses are not
/// hidden (else the symbolizer reads it itself, to say what is wrong).
fn kernel_options(
    cfg: &SymbolizerOptions,
    group: &[Want<'_>],
    live: &mut Option<Option<Vec<u8>>>,
) -> std::result::Result<SymbolizerOptions, profkit_symbols::Error> {
    let mut out = cfg.clone();
    if group.is_empty() {
        out.kallsyms = KallsymsSource::None;
        return Ok(out);
    }
    let mut wanted = KallsymsWanted::default();
    let mut kernel_ids = Vec::new();
    for (_, req, offs) in group {
        match req.kind {
            BinaryKind::Kernel => {
                wanted.kernel_base = req.base;
                wanted.kernel_offsets.extend(offs.iter());
                kernel_ids.push(req.build_id.clone());
            }
            _ => wanted
                .modules
                .entry(profkit_eventlog::module_name(&req.path.to_string_lossy()))
                .or_default()
                .extend(offs.iter().map(|&o| req.base.wrapping_add(o))),
        }
    }
    let trimmed = match &cfg.kallsyms {
        KallsymsSource::File(path) => {
            profkit_symbols::trim_kallsyms(KallsymsInput::File(path), &wanted)
        }
        KallsymsSource::Live => {
            let running = std::fs::read("/sys/kernel/notes")
                .ok()
                .and_then(|n| profkit_eventlog::build_id_from_notes(&n));
            let same_kernel = kernel_ids
                .iter()
                .all(|id| id.is_none() || running.is_none() || *id == running);
            let text = live.get_or_insert_with(|| std::fs::read("/proc/kallsyms").ok());
            match text {
                Some(t) if same_kernel => {
                    profkit_symbols::trim_kallsyms(KallsymsInput::Bytes(t), &wanted)
                }
                _ => return Ok(out),
            }
        }
        _ => return Ok(out),
    };
    // Hidden addresses, or a read error: the symbolizer reads the source
    // itself and words the warning.
    if let Ok(TrimmedKallsyms::Text(text)) = trimmed {
        out.kallsyms = KallsymsSource::Text(text);
    }
    Ok(out)
}

/// What a report reads of the symbols beside their names and starts.
#[derive(Clone, Copy)]
struct Needs {
    /// Each symbol's source location.
    debug_info: bool,
    /// Each offset's inlined frames.
    inline: bool,
    /// The names as stored in the binary (`--annotate` matches them):
    /// else they are given back as soon as a binary is symbolized (a warm
    /// `-l` of a cargo build held 1.1 MB of Rust and C++ mangled names
    /// nobody read, beside the names shown).
    raw_names: bool,
}

/// Symbolizes one group of requests with a symbolizer of its own, each
/// binary's answer kept as `needs` says.
fn run_group(
    cfg: std::result::Result<SymbolizerOptions, profkit_symbols::Error>,
    group: Vec<Want<'_>>,
    needs: Needs,
    jit: &JitNaming<'_>,
    progress: &dyn Progress,
    index_note: &std::sync::Mutex<Option<String>>,
) -> Result<Vec<(Cookie, Resolved)>> {
    let Needs {
        debug_info, inline, ..
    } = needs;
    if group.is_empty() {
        return Ok(Vec::new());
    }
    let sym = Symbolizer::new(cfg?)?;
    let n = group.len() as u64;
    // Each binary's answer made into its `Resolved` as soon as it is
    // symbolized: where per-offset answers are made at all (64 bytes an
    // offset, for inlined frames and JIT code), those of one binary at a
    // time per worker, not of all at once.
    use rayon::prelude::*;
    let out: Vec<(Cookie, Resolved)> = group
        .into_par_iter()
        .map(|(cookie, req, offsets)| {
            let jit_covered = jit.covered.contains_key(&cookie);
            // Without inlined frames, only each offset's symbol is wanted:
            // runs of them (a JIT cookie's answer is merged with its
            // markers' offset by offset).
            let (mut result, runs) = if inline || jit_covered {
                (sym.symbolize(&req, &offsets), None)
            } else {
                let (result, runs) = sym.symbolize_runs(&req, &offsets);
                (result, Some(runs))
            };
            drop(offsets);
            // A JIT cookie's symbols are matched with its markers by raw name.
            if !needs.raw_names && !jit_covered {
                for s in &mut result.symbols {
                    s.raw_name = String::new();
                }
            }
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
                            locations.insert(id, *l);
                        }
                    }
                }
            }
            let resolved = match runs {
                Some(runs) => Resolved::from_runs(result, runs, locations),
                None if jit_covered => jit.resolve(cookie, result, locations),
                None => Resolved::new(result, locations, inline),
            };
            (cookie, resolved)
        })
        .collect();
    if let Some(w) = sym.index_cache_warning() {
        if let Ok(mut n) = index_note.lock() {
            *n = Some(w);
        }
    }
    progress.advance(n);
    Ok(out)
}
