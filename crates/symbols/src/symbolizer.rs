//! The [`Symbolizer`]: requests in, names out, one rayon task per binary.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use rayon::prelude::*;

use crate::cache::{Cache, CacheStats, Loaded};
use crate::demangle::display_name;
use crate::elf::{hex, ElfImage, LoadConfig};
use crate::error::Error;
use crate::index::IndexStore;
use crate::kallsyms::Kallsyms;
use crate::perfmap::PerfMap;
use crate::table::{Entry, SymbolTable};
use crate::types::{
    BinaryKind, BinaryRequest, BinaryResult, KallsymsSource, OffsetInfo, SymbolId, SymbolInfo,
    SymbolOrigin, SymbolRun, SymbolizerOptions,
};
use profkit_eventlog::{build_id_from_notes, module_name};

/// Turns (binary, offsets) into symbols. Build one per report and reuse it: it caches every
/// parsed binary, kallsyms and perf map, and is `Sync`, so one instance serves all threads.
pub struct Symbolizer {
    opts: SymbolizerOptions,
    cache: Cache,
    kernel: OnceLock<KernelSymbols>,
    perf_maps: Mutex<HashMap<u32, Arc<PerfMapState>>>,
    vdso: OnceLock<Result<Arc<ElfImage>, Error>>,
}

impl std::fmt::Debug for Symbolizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Symbolizer")
            .field("opts", &self.opts)
            .field("cache", &self.cache.stats())
            .finish_non_exhaustive()
    }
}

/// Kallsyms as loaded once, with the words to say when it cannot be used.
struct KernelSymbols {
    symbols: Result<Kallsyms, Error>,
    /// What to say when addresses are hidden.
    hidden_warning: String,
    /// The running kernel's build-id (live source only).
    build_id: Option<Vec<u8>>,
}

struct PerfMapState {
    map: Option<PerfMap>,
    warning: Option<String>,
}

/// Keys of the symbols a result interns: which table, which entry.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
enum SymKey {
    Table(usize),
    PerfMap(usize),
    StandIn,
}

/// Accumulates one [`BinaryResult`].
struct Builder<'r> {
    demangle: bool,
    result: BinaryResult,
    ids: HashMap<SymKey, SymbolId>,
    /// Runs instead of per-offset answers ([`Symbolizer::symbolize_runs`]):
    /// then `result.offsets` stays empty, each answer is folded in here and
    /// `scratch` takes what a resolver would add to it.
    runs: Option<&'r mut Vec<SymbolRun>>,
    scratch: OffsetInfo,
    /// The last key interned and its id: sorted offsets mostly fall in
    /// the symbol of the one before (no hashing for them).
    last: Option<(SymKey, SymbolId)>,
    /// Symbols interned with their raw name, to demangle when the
    /// resolver is done ([`Symbolizer::run`]: all at once, on every core).
    pending: Option<&'r mut Vec<SymbolId>>,
}

impl<'r> Builder<'r> {
    fn new(demangle: bool, capacity: usize) -> Builder<'r> {
        Builder {
            demangle,
            result: BinaryResult {
                path_used: None,
                debug_file_used: None,
                warnings: Vec::new(),
                no_symbols: None,
                symbols: Vec::new(),
                offsets: Vec::with_capacity(capacity),
            },
            ids: HashMap::new(),
            last: None,
            pending: None,
            runs: None,
            scratch: OffsetInfo {
                offset: 0,
                address: None,
                symbol: None,
                location: None,
                inlined: Vec::new(),
            },
        }
    }

    /// A builder of runs ([`Symbolizer::symbolize_runs`]).
    fn of_runs(demangle: bool, runs: &'r mut Vec<SymbolRun>) -> Builder<'r> {
        Builder {
            runs: Some(runs),
            ..Builder::new(demangle, 0)
        }
    }

    /// Whether per-offset details (source lines, inlined frames) are
    /// wanted: not by a builder of runs.
    fn wants_details(&self) -> bool {
        self.runs.is_none()
    }

    fn warn(&mut self, msg: impl Into<String>) {
        let msg = msg.into();
        if !self.result.warnings.contains(&msg) {
            self.result.warnings.push(msg);
        }
    }

    fn intern(&mut self, key: SymKey, make: impl FnOnce() -> SymbolInfo) -> SymbolId {
        if let Some((k, id)) = self.last {
            if k == key {
                return id;
            }
        }
        let symbols = &mut self.result.symbols;
        let id = *self.ids.entry(key).or_insert_with(|| {
            let id = SymbolId(symbols.len() as u32);
            symbols.push(make());
            id
        });
        self.last = Some((key, id));
        id
    }

    /// Interns entry `index` of `table`; `file_offset` maps its start back to the file.
    fn intern_entry(
        &mut self,
        key: SymKey,
        table: &SymbolTable,
        index: usize,
        file_offset: impl FnOnce(u64) -> Option<u64>,
    ) -> SymbolId {
        let e = table.entry(index);
        let names = || (e.name.to_string(), table.shown(index).map(str::to_owned));
        self.intern_named(key, e, file_offset, names)
    }

    /// Interns the symbol `e` as `key` when `key` is new: its start's file
    /// offset by `file_offset`, its raw name and its name demangled ahead
    /// (if it was) by `names`.
    fn intern_named(
        &mut self,
        key: SymKey,
        e: &Entry,
        file_offset: impl FnOnce(u64) -> Option<u64>,
        names: impl FnOnce() -> (String, Option<String>),
    ) -> SymbolId {
        let demangle = self.demangle;
        let defer = self.pending.is_some();
        let mut deferred = false;
        let (start, size, origin) = (e.start, e.size(), e.origin);
        let id = self.intern(key, || {
            let (raw_name, shown) = names();
            SymbolInfo {
                name: match shown {
                    Some(shown) if demangle => shown,
                    _ if demangle && defer => {
                        deferred = true;
                        String::new()
                    }
                    _ => display_name(&raw_name, demangle),
                },
                raw_name,
                start,
                size,
                file_offset: file_offset(start),
                origin,
            }
        });
        if deferred {
            if let Some(p) = self.pending.as_deref_mut() {
                p.push(id);
            }
        }
        id
    }

    fn stand_in(&mut self, name: String, start: u64, size: u64, origin: SymbolOrigin) -> SymbolId {
        self.intern(SymKey::StandIn, || SymbolInfo {
            raw_name: name.clone(),
            name,
            start,
            size,
            file_offset: None,
            origin,
        })
    }

    fn push(
        &mut self,
        offset: u64,
        address: Option<u64>,
        symbol: Option<SymbolId>,
    ) -> &mut OffsetInfo {
        if let Some(runs) = &mut self.runs {
            match runs.last_mut() {
                Some(r) if r.symbol == symbol => r.last = offset,
                _ => runs.push(SymbolRun {
                    first: offset,
                    last: offset,
                    symbol,
                }),
            }
            self.scratch.offset = offset;
            self.scratch.address = address;
            self.scratch.symbol = symbol;
            return &mut self.scratch;
        }
        self.result.offsets.push(OffsetInfo {
            offset,
            address,
            symbol,
            location: None,
            inlined: Vec::new(),
        });
        self.result.offsets.last_mut().expect("just pushed")
    }

    /// Every offset unresolved (the binary could not be used).
    fn unresolved(mut self, offsets: &[u64]) -> BinaryResult {
        for &off in offsets {
            self.push(off, None, None);
        }
        self.result
    }
}

impl Symbolizer {
    /// Makes a symbolizer, checking the options that name files.
    ///
    /// # Errors
    /// [`Error::BadOption`] if `kallsyms` names a file that does not exist, or if
    /// `perf_map_dir` or `sysroot` is given but is not a directory.
    pub fn new(opts: SymbolizerOptions) -> Result<Symbolizer, Error> {
        if let KallsymsSource::File(path) = &opts.kallsyms {
            if !path.is_file() {
                return Err(Error::BadOption {
                    option: "kallsyms",
                    path: path.clone(),
                    problem: "is not a file (give the kallsyms copy saved with the session)",
                });
            }
        }
        for (option, dir) in [
            ("perf_map_dir", &opts.perf_map_dir),
            ("sysroot", &opts.sysroot),
        ] {
            if let Some(dir) = dir {
                if !dir.is_dir() {
                    return Err(Error::BadOption {
                        option,
                        path: dir.clone(),
                        problem: "is not a directory",
                    });
                }
            }
        }
        let index = opts
            .index_cache
            .clone()
            .map(|o| IndexStore::new(o, opts.demangle));
        Ok(Symbolizer {
            opts,
            cache: Cache::new(index),
            kernel: OnceLock::new(),
            perf_maps: Mutex::default(),
            vdso: OnceLock::new(),
        })
    }

    /// The options this symbolizer was made with.
    pub fn options(&self) -> &SymbolizerOptions {
        &self.opts
    }

    /// How much parsing the cache has saved so far.
    pub fn cache_stats(&self) -> CacheStats {
        self.cache.stats()
    }

    /// With [`SymbolizerOptions::index_cache`]: why the index directory is not used, if
    /// it is not (not owned by the effective uid, writable by group or others, a link, or
    /// it could not be made), to be said once per report. Looks at the directory (making
    /// it) if no symbolization has yet.
    pub fn index_cache_warning(&self) -> Option<String> {
        self.cache.index()?.refused().map(str::to_owned)
    }

    /// Symbolizes every request, one rayon task per binary. Results are in request order.
    /// Never fails: problems become [`BinaryResult::warnings`] and unresolved offsets.
    pub fn symbolize_all(&self, requests: Vec<(BinaryRequest, Vec<u64>)>) -> Vec<BinaryResult> {
        requests
            .into_par_iter()
            .map(|(request, offsets)| self.symbolize(&request, &offsets))
            .collect()
    }

    /// Symbolizes the offsets of one binary on the calling thread.
    pub fn symbolize(&self, request: &BinaryRequest, offsets: &[u64]) -> BinaryResult {
        self.run(request, offsets, None)
    }

    /// As [`Symbolizer::symbolize`], but the answer for the offsets is
    /// only their symbols, as runs of offsets consecutive in `offsets`
    /// that share one ([`BinaryResult::offsets`] is left empty): no
    /// addresses, source lines or inlined frames, whatever
    /// [`SymbolizerOptions::debug_info`] says. A run takes 24 bytes where
    /// an answer per offset takes 64, and on sorted offsets neighbours
    /// mostly share their function (libLLVM's 56,619 sampled offsets in a
    /// cargo build: 4,728 symbols).
    pub fn symbolize_runs(
        &self,
        request: &BinaryRequest,
        offsets: &[u64],
    ) -> (BinaryResult, Vec<SymbolRun>) {
        let mut runs = Vec::new();
        let result = self.run(request, offsets, Some(&mut runs));
        (result, runs)
    }

    /// Symbolizes with a builder of per-offset answers, or of `runs`.
    fn run(
        &self,
        request: &BinaryRequest,
        offsets: &[u64],
        runs: Option<&mut Vec<SymbolRun>>,
    ) -> BinaryResult {
        let mut pending = Vec::new();
        let demangle = self.opts.demangle;
        let b = Builder {
            pending: Some(&mut pending),
            ..match runs {
                Some(runs) => Builder::of_runs(demangle, runs),
                None => Builder::new(demangle, offsets.len()),
            }
        };
        let mut result = match request.kind {
            BinaryKind::Elf => self.symbolize_elf(b, request, offsets),
            BinaryKind::Vdso => self.symbolize_vdso(b, request, offsets),
            BinaryKind::Kernel => self.symbolize_kernel(b, request, offsets),
            BinaryKind::Module => self.symbolize_module(b, request, offsets),
            BinaryKind::Anon => self.symbolize_anon(b, request, offsets),
        };
        // The names a table did not hold demangled, demangled on every
        // core: a cold report of a cargo build demangles 4,728 C++ names
        // of libLLVM, 15 ms on one.
        let symbols = &mut result.symbols;
        let mut named: Vec<(SymbolId, String)> = pending
            .par_iter()
            .with_min_len(64)
            .map(|&id| (id, display_name(&symbols[id.0 as usize].raw_name, true)))
            .collect();
        for (id, name) in named.drain(..) {
            symbols[id.0 as usize].name = name;
        }
        result
    }

    fn load_config(&self) -> LoadConfig<'_> {
        LoadConfig {
            debug_dirs: &self.opts.debug_dirs,
            debuginfod_cache: self.opts.debuginfod_cache.as_deref(),
            debug_info: self.opts.debug_info,
        }
    }

    /// Where a recorded absolute path is on this machine (under the sysroot, if any). A
    /// recorded path is the session's word: under a sysroot, `..` and `.` components are
    /// dropped so it cannot climb out of the sysroot.
    fn host_path(&self, recorded: &Path) -> PathBuf {
        match &self.opts.sysroot {
            Some(root) => root.join(within_root(recorded)),
            None => recorded.to_owned(),
        }
    }

    /// Other places a file with build-id `id` may be: the search dirs by file name, the
    /// debug dirs' `.build-id/ab/cdef…` links to the binary itself, and the debuginfod
    /// cache's `ID/executable`.
    fn build_id_candidates(&self, recorded: &Path, id: &[u8]) -> Vec<PathBuf> {
        let mut out = Vec::new();
        if let Some(name) = recorded.file_name() {
            out.extend(self.opts.search_dirs.iter().map(|d| d.join(name)));
        }
        if id.len() >= 2 {
            let h = hex(id);
            out.extend(
                self.opts
                    .debug_dirs
                    .iter()
                    .map(|d| d.join(".build-id").join(&h[..2]).join(&h[2..])),
            );
            if let Some(cache) = &self.opts.debuginfod_cache {
                out.push(crate::elf::debuginfod_path(cache, id, "executable"));
            }
        }
        out
    }

    /// Finds the file for an ELF request and checks it is the recorded one; the image
    /// answers at least for `offsets`.
    fn find_elf(
        &self,
        req: &BinaryRequest,
        offsets: &[u64],
        b: &mut Builder,
    ) -> Option<Arc<ElfImage>> {
        let cfg = self.load_config();
        let path = self.host_path(&req.path);
        let expect = req.build_id.as_deref();
        // A copy the recorder kept of the very file behind this cookie.
        if let (Some(kept), Some(f)) = (&req.kept_copy, &req.file) {
            match self.cache.load(kept, expect, &cfg, offsets) {
                Ok(Loaded::Image(image, now)) if now.size == f.size => return Some(image),
                Ok(_) => b.warn(format!(
                    "{} is not the copy kept of {} (another size or build-id); not used",
                    kept.display(),
                    req.path.display()
                )),
                Err(_) => {}
            }
        }
        // (what is wrong with `path`, is it a change rather than a missing file)
        let problem: (String, bool) = match self.cache.load(&path, expect, &cfg, offsets) {
            Ok(Loaded::Image(image, now)) => {
                // Inodes only mean something for the recorded file itself, not a sysroot copy.
                let on_host = self.opts.sysroot.is_none();
                let check_inode = expect.is_none() && on_host;
                match (req.file, req.inode) {
                    (Some(f), _) => match changed(&f, &now, on_host && f.here) {
                        Some(why) => (
                            format!("binary changed since recording: {} ({why})", path.display()),
                            true,
                        ),
                        None => return Some(image),
                    },
                    (None, Some(recorded)) if check_inode && recorded != now.inode => {
                        let path = path.display();
                        let inode = now.inode;
                        let msg = format!(
                            "binary changed since recording: {path} (inode recorded {recorded}, \
                             now {inode})"
                        );
                        (msg, true)
                    }
                    _ => return Some(image),
                }
            }
            Ok(Loaded::WrongBuildId { now }) => (
                format!(
                    "binary changed since recording: {} (build-id recorded {}, now {})",
                    path.display(),
                    hex(expect.unwrap_or_default()),
                    now.as_deref().map_or_else(|| "none".to_owned(), hex)
                ),
                true,
            ),
            Err(e) => (e.to_string(), false),
        };
        // A file found by build-id alone: never for an unverified claim, and for a
        // recorded file only one of its size.
        if let Some(id) = expect.filter(|_| !req.unverified) {
            for candidate in self.build_id_candidates(&req.path, id) {
                if let Ok(Loaded::Image(image, now)) =
                    self.cache.load(&candidate, Some(id), &cfg, offsets)
                {
                    if image.has_segments() && req.file.is_none_or(|f| f.size == now.size) {
                        let what = if problem.1 {
                            problem.0.clone()
                        } else {
                            format!("{} is missing or unreadable", path.display())
                        };
                        b.warn(format!(
                            "{what}; using {}, which has the recorded build-id",
                            candidate.display()
                        ));
                        return Some(image);
                    }
                }
            }
        }
        b.warn(if problem.1 {
            format!("{}; samples shown as offsets, not guessed", problem.0)
        } else {
            problem.0
        });
        None
    }

    fn symbolize_elf(&self, mut b: Builder, req: &BinaryRequest, offsets: &[u64]) -> BinaryResult {
        match self.find_elf(req, offsets, &mut b) {
            Some(image) => self.resolve_in_image(b, image, offsets),
            None => b.unresolved(offsets),
        }
    }

    /// Resolves file offsets (or module-text offsets) in a parsed image.
    /// An image no one else holds (read for these offsets) gives its names
    /// to the symbols interned, not copies of them.
    fn resolve_in_image(
        &self,
        mut b: Builder,
        mut image: Arc<ElfImage>,
        offsets: &[u64],
    ) -> BinaryResult {
        let mut own = Arc::get_mut(&mut image).map(|im| std::mem::take(&mut im.symbols));
        let image = &*image;
        b.result.path_used = Some(image.path.clone());
        b.result.debug_file_used.clone_from(&image.debug_file);
        for note in &image.notes {
            b.warn(note.clone());
        }
        let mut unnamed = false;
        let mut dwarf_error = None;
        let mut lines = match (&image.dwarf, self.opts.debug_info && b.wants_details()) {
            (Some(dwarf), true) => {
                let vaddrs: Vec<Option<u64>> =
                    offsets.iter().map(|&off| image.to_vaddr(off)).collect();
                dwarf.lookup_all(&vaddrs, self.opts.demangle)
            }
            _ => Vec::new(),
        };
        for (k, &off) in offsets.iter().enumerate() {
            let vaddr = image.to_vaddr(off);
            let table = own.as_ref().unwrap_or(&image.symbols);
            let symbol = vaddr
                .and_then(|a| table.lookup(a))
                .map(|i| match own.as_mut() {
                    Some(t) => {
                        let e = t.entry(i).clone_range();
                        let at = |s| image.to_file_offset(s);
                        b.intern_named(SymKey::Table(i), &e, at, || t.take_names(i))
                    }
                    None => b.intern_entry(SymKey::Table(i), &image.symbols, i, |s| {
                        image.to_file_offset(s)
                    }),
                });
            unnamed |= vaddr.is_some() && symbol.is_none();
            let info = b.push(off, vaddr, symbol);
            match lines.get_mut(k).and_then(Option::take) {
                Some(Ok((location, inlined))) => {
                    info.location = location.map(Box::new);
                    info.inlined = inlined;
                }
                Some(Err(e)) => {
                    dwarf_error.get_or_insert(e);
                }
                None => {}
            }
        }
        if let Some(source) = dwarf_error {
            let path = image
                .debug_file
                .clone()
                .unwrap_or_else(|| image.path.clone());
            b.warn(Error::Dwarf { path, source }.to_string());
        }
        if unnamed {
            if let Some(note) = &image.sparse_note {
                b.result.no_symbols = Some(note.clone());
            }
        }
        b.result
    }

    fn symbolize_vdso(&self, mut b: Builder, req: &BinaryRequest, offsets: &[u64]) -> BinaryResult {
        if self.host_path(&req.path).is_file() {
            return self.symbolize_elf(b, req, offsets);
        }
        let image = self.vdso.get_or_init(|| {
            let data = profkit_elf::read_own_vdso().map_err(|e| Error::Vdso {
                what: match e {
                    profkit_elf::Error::Vdso { what } => what,
                    other => other.to_string(),
                },
            })?;
            self.cache
                .parse(Path::new("[vdso]"), &data, &self.load_config())
        });
        match image {
            Ok(image) => {
                match &req.build_id {
                    Some(want) if image.build_id.as_deref() != Some(want.as_slice()) => {
                        b.warn(format!(
                        "binary changed since recording: [vdso] (build-id recorded {}, now {}; \
                         the kernel changed); samples shown as offsets, not guessed",
                        hex(want),
                        image.build_id.as_deref().map_or_else(|| "none".to_owned(), hex)
                    ));
                        b.unresolved(offsets)
                    }
                    _ => self.resolve_in_image(b, Arc::clone(image), offsets),
                }
            }
            Err(e) => {
                b.warn(e.to_string());
                b.unresolved(offsets)
            }
        }
    }

    fn kernel_symbols(&self) -> &KernelSymbols {
        self.kernel.get_or_init(|| {
            let advice = "kernel samples attributed to [kernel]";
            let (text, hidden_warning, build_id) = match &self.opts.kallsyms {
                KallsymsSource::Live => {
                    let level = std::fs::read_to_string("/proc/sys/kernel/kptr_restrict")
                        .map_or_else(|_| "?".to_owned(), |s| s.trim().to_owned());
                    let notes = std::fs::read("/sys/kernel/notes").ok();
                    (
                        std::fs::read_to_string("/proc/kallsyms")
                            .map_err(|e| Error::io("/proc/kallsyms", e)),
                        format!(
                            "kernel addresses hidden (kptr_restrict={level}): {advice}; run the \
                             report as root or set sysctl kernel.kptr_restrict=0"
                        ),
                        notes.as_deref().and_then(build_id_from_notes),
                    )
                }
                KallsymsSource::File(path) => (
                    crate::files::read_regular_text(path, crate::files::MAX_TEXT_BYTES)
                        .map_err(|e| Error::io(path, e)),
                    format!(
                        "kernel addresses hidden in {} (all zero: kptr_restrict was set or it \
                         was copied without root): {advice}",
                        path.display()
                    ),
                    None,
                ),
                KallsymsSource::Text(text) => (
                    Ok(text.clone()),
                    format!(
                        "kernel addresses hidden (all zero in the given kallsyms, \
                         kptr_restrict): {advice}"
                    ),
                    None,
                ),
                KallsymsSource::None => (Err(Error::NoKallsyms), String::new(), None),
            };
            KernelSymbols {
                symbols: text.map(|t| Kallsyms::parse(&t)),
                hidden_warning,
                build_id,
            }
        })
    }

    /// The table to use for the kernel or a module, or the warning saying why there is none.
    fn kallsyms_usable(&self) -> Result<&Kallsyms, String> {
        let k = self.kernel_symbols();
        match &k.symbols {
            Ok(ks) if ks.hidden => Err(k.hidden_warning.clone()),
            Ok(ks) => Ok(ks),
            Err(e) => Err(format!("{e}; kernel samples attributed to [kernel]")),
        }
    }

    fn symbolize_kernel(
        &self,
        mut b: Builder,
        req: &BinaryRequest,
        offsets: &[u64],
    ) -> BinaryResult {
        let k = self.kernel_symbols();
        let usable = match (&req.build_id, &k.build_id) {
            (Some(want), Some(now)) if want != now => Err(format!(
                "kernel changed since recording (build-id recorded {}, now {}): kernel samples \
                 attributed to [kernel]; give the kallsyms saved with the session",
                hex(want),
                hex(now)
            )),
            _ => self.kallsyms_usable(),
        };
        let ks = match usable {
            Ok(ks) => ks,
            Err(msg) => {
                b.warn(msg);
                let id = b.stand_in("[kernel]".to_owned(), 0, 0, SymbolOrigin::KernelUnresolved);
                for &off in offsets {
                    b.push(off, None, Some(id));
                }
                return b.result;
            }
        };
        if ks.skipped > 0 {
            b.warn(format!("kallsyms: {} malformed lines skipped", ks.skipped));
        }
        let base = match ks.text {
            Some(text) if req.base != 0 && text != req.base => {
                b.warn(format!(
                    "kernel relocated since recording (_text recorded {:#x}, kallsyms has {text:#x}): \
                     offsets taken from kallsyms' _text; if the kernel itself changed, use the \
                     kallsyms saved with the session",
                    req.base
                ));
                text
            }
            Some(text) if req.base == 0 => text,
            _ => req.base,
        };
        for &off in offsets {
            let addr = base.wrapping_add(off);
            let symbol = ks
                .kernel
                .lookup(addr)
                .map(|i| b.intern_entry(SymKey::Table(i), &ks.kernel, i, |_| None));
            b.push(off, Some(addr), symbol);
        }
        b.result
    }

    fn symbolize_module(
        &self,
        mut b: Builder,
        req: &BinaryRequest,
        offsets: &[u64],
    ) -> BinaryResult {
        let name = module_name(&req.path.to_string_lossy());
        let kallsyms = self.kallsyms_usable();
        if let Ok(Some(table)) = kallsyms.as_ref().map(|ks| ks.modules.get(&name)) {
            for &off in offsets {
                let addr = req.base.wrapping_add(off);
                let symbol = table
                    .lookup(addr)
                    .map(|i| b.intern_entry(SymKey::Table(i), table, i, |_| None));
                b.push(off, Some(addr), symbol);
            }
            return b.result;
        }
        // Not in kallsyms: try the .ko file.
        let ko = self.host_path(&req.path);
        let is_ko = ko.extension().is_some_and(|e| e == "ko");
        if is_ko && ko.is_file() {
            match self
                .cache
                .load(&ko, req.build_id.as_deref(), &self.load_config(), offsets)
            {
                Ok(Loaded::Image(image, _)) if image.relocatable => {
                    b.warn(format!(
                        "module {name} not in kallsyms; names read from {} assuming the \
                         kernel's section layout",
                        ko.display()
                    ));
                    return self.resolve_in_image(b, image, offsets);
                }
                Ok(Loaded::Image(..)) => {
                    b.warn(format!(
                        "{} is not a relocatable module object",
                        ko.display()
                    ));
                }
                Ok(Loaded::WrongBuildId { now }) => b.warn(format!(
                    "binary changed since recording: {} (build-id recorded {}, now {}); \
                     samples shown as offsets, not guessed",
                    ko.display(),
                    hex(req.build_id.as_deref().unwrap_or_default()),
                    now.as_deref().map_or_else(|| "none".to_owned(), hex)
                )),
                Err(e) => b.warn(e.to_string()),
            }
            return b.unresolved(offsets);
        }
        match kallsyms {
            Err(msg) => {
                b.warn(msg);
                let id = b.stand_in(
                    format!("[{name}]"),
                    req.base,
                    0,
                    SymbolOrigin::KernelUnresolved,
                );
                for &off in offsets {
                    b.push(off, None, Some(id));
                }
                b.result
            }
            Ok(_) => {
                let hint = if req.path.to_string_lossy().ends_with(".ko.xz")
                    || req.path.to_string_lossy().ends_with(".ko.zst")
                    || req.path.to_string_lossy().ends_with(".ko.gz")
                {
                    " (compressed .ko files are not read: decompress it)"
                } else {
                    ""
                };
                b.warn(format!(
                    "module {name} is neither in kallsyms nor at {}{hint}; samples shown as offsets",
                    ko.display()
                ));
                b.unresolved(offsets)
            }
        }
    }

    fn perf_map(&self, pid: u32) -> Arc<PerfMapState> {
        let mut maps = self
            .perf_maps
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let state = maps.entry(pid).or_insert_with(|| {
            let dir = self
                .opts
                .perf_map_dir
                .as_deref()
                .unwrap_or(Path::new("/tmp"));
            let path = dir.join(format!("perf-{pid}.map"));
            Arc::new(
                match crate::files::read_regular_text(&path, crate::files::MAX_TEXT_BYTES) {
                    Ok(text) => {
                        let map = PerfMap::parse(&text);
                        let warning = (map.skipped > 0).then(|| {
                            format!(
                                "{}: {} malformed lines skipped",
                                path.display(),
                                map.skipped
                            )
                        });
                        PerfMapState {
                            map: Some(map),
                            warning,
                        }
                    }
                    // No map is the normal case for anon memory that is not JIT code.
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => PerfMapState {
                        map: None,
                        warning: None,
                    },
                    Err(e) => PerfMapState {
                        map: None,
                        warning: Some(Error::io(&path, e).to_string()),
                    },
                },
            )
        });
        Arc::clone(state)
    }

    fn symbolize_anon(&self, mut b: Builder, req: &BinaryRequest, offsets: &[u64]) -> BinaryResult {
        let state = req.pid.map(|pid| self.perf_map(pid));
        if let Some(w) = state.as_ref().and_then(|s| s.warning.clone()) {
            b.warn(w);
        }
        let map = state.as_ref().and_then(|s| s.map.as_ref());
        let (start, end) = if req.len > 0 {
            (req.base, req.base.saturating_add(req.len))
        } else {
            let lo = offsets.iter().copied().min().unwrap_or(0);
            let hi = offsets.iter().copied().max().unwrap_or(0);
            (lo, hi.saturating_add(1))
        };
        let who = req
            .pid
            .map_or_else(|| "tgid:?".to_owned(), |p| format!("tgid:{p}"));
        let anon_name = format!("anon ({who} range:{start:#x}-{end:#x})");
        for &addr in offsets {
            let symbol = match map.and_then(|m| m.table.lookup(addr).map(|i| (m, i))) {
                Some((m, i)) => b.intern_entry(SymKey::PerfMap(i), &m.table, i, |_| None),
                None => b.stand_in(anon_name.clone(), start, end - start, SymbolOrigin::Anon),
            };
            b.push(addr, Some(addr), Some(symbol));
        }
        b.result
    }
}

/// `recorded` as a relative path of its normal components only.
/// How the file `now` differs from the recorded `f` (None: it does not): inode, size
/// and mtime on the recording host, the size alone under a sysroot (a copy has its own
/// inode, and its mtime unless copied with it).
fn changed(
    f: &crate::types::RecordedFile,
    now: &crate::cache::FileStat,
    on_host: bool,
) -> Option<String> {
    if f.size != now.size {
        return Some(format!("size recorded {}, now {}", f.size, now.size));
    }
    if on_host && f.inode != now.inode {
        return Some(format!("inode recorded {}, now {}", f.inode, now.inode));
    }
    if on_host && f.mtime_ns != now.mtime_ns {
        return Some("modified since".into());
    }
    None
}

fn within_root(recorded: &Path) -> PathBuf {
    recorded
        .components()
        .filter_map(|c| match c {
            std::path::Component::Normal(n) => Some(n),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recorded_path_cannot_climb_out_of_the_sysroot() {
        assert_eq!(
            within_root(Path::new("/usr/../../../etc/shadow")),
            PathBuf::from("usr/etc/shadow")
        );
        assert_eq!(
            within_root(Path::new("/./lib/x.so")),
            PathBuf::from("lib/x.so")
        );
        assert_eq!(within_root(Path::new("../..")), PathBuf::new());
    }

    fn assert_sync_send<T: Sync + Send>() {}

    #[test]
    fn symbolizer_is_sync_and_send() {
        assert_sync_send::<Symbolizer>();
    }

    #[test]
    fn bad_options_are_rejected_with_the_path() {
        let opts = SymbolizerOptions {
            kallsyms: KallsymsSource::File("/nonexistent/kallsyms".into()),
            ..SymbolizerOptions::default()
        };
        let err = Symbolizer::new(opts).unwrap_err();
        assert!(err.to_string().contains("/nonexistent/kallsyms"), "{err}");
        let opts = SymbolizerOptions {
            perf_map_dir: Some("/nonexistent/maps".into()),
            ..SymbolizerOptions::default()
        };
        assert!(matches!(
            Symbolizer::new(opts),
            Err(Error::BadOption {
                option: "perf_map_dir",
                ..
            })
        ));
    }

    #[test]
    fn missing_binary_is_a_warning_not_a_failure() {
        let s = Symbolizer::new(SymbolizerOptions::default()).unwrap();
        let r = s.symbolize(&BinaryRequest::elf("/x/y"), &[1, 2]);
        assert_eq!(
            r.warnings,
            [
                "/x/y not found; samples shown as offsets (restore the file, or give a sysroot or \
              search directory holding a copy)"
            ]
        );
        assert_eq!(r.offsets.len(), 2);
        assert!(r
            .offsets
            .iter()
            .all(|o| o.symbol.is_none() && o.address.is_none()));
    }

    #[test]
    fn anon_without_perf_map_names_pid_and_range() {
        let dir = std::env::temp_dir();
        let s = Symbolizer::new(SymbolizerOptions {
            perf_map_dir: Some(dir),
            ..SymbolizerOptions::default()
        })
        .unwrap();
        let r = s.symbolize(
            &BinaryRequest::anon(999_999_999, 0x1000, 0x2000),
            &[0x1800, 0x2000],
        );
        assert_eq!(
            r.name_at(0),
            Some("anon (tgid:999999999 range:0x1000-0x3000)")
        );
        assert_eq!(r.offsets[0].symbol, r.offsets[1].symbol);
        assert_eq!(r.symbols.len(), 1);
    }

    #[test]
    fn kallsyms_none_attributes_to_kernel() {
        let s = Symbolizer::new(SymbolizerOptions {
            kallsyms: KallsymsSource::None,
            ..SymbolizerOptions::default()
        })
        .unwrap();
        let r = s.symbolize(&BinaryRequest::kernel(0xffffffff81000000), &[0x10]);
        assert_eq!(r.name_at(0), Some("[kernel]"));
        assert!(r.warnings[0].contains("[kernel]"), "{:?}", r.warnings);
        // Said once (it used to be said twice).
        assert_eq!(
            r.warnings[0],
            "kernel symbols not loaded (no kallsyms given); kernel samples attributed to [kernel]"
        );
    }

    #[test]
    fn a_binary_that_cannot_be_loaded_says_why_with_a_typed_error() {
        let s = Symbolizer::new(SymbolizerOptions::default()).unwrap();
        let cfg = s.load_config();
        let missing = Path::new("/nonexistent/profkit/app");
        let e = s.cache.load(missing, None, &cfg, &[0]).err().unwrap();
        assert!(
            matches!(&*e, Error::NotFound { path } if path == missing),
            "{e:?}"
        );
        let d = tempfile::tempdir().unwrap();
        let e = s.cache.load(d.path(), None, &cfg, &[0]).err().unwrap();
        assert!(matches!(&*e, Error::Io { .. }), "{e:?}");
        assert!(e.to_string().contains("not a regular file"), "{e}");
        let junk = d.path().join("junk");
        std::fs::write(&junk, b"not an ELF file").unwrap();
        let e = s.cache.load(&junk, None, &cfg, &[0]).err().unwrap();
        assert!(matches!(&*e, Error::Elf { .. }), "{e:?}");
        // Kept: the same error answers the next load.
        let again = s.cache.load(&junk, None, &cfg, &[0]).err().unwrap();
        assert!(Arc::ptr_eq(&e, &again));
    }
}
