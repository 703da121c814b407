//! The [`Symbolizer`]: requests in, names out, one rayon task per binary.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use rayon::prelude::*;

use crate::cache::{Cache, CacheStats, Loaded};
use crate::demangle::display_name;
use crate::elf::{hex, ElfImage, LoadConfig};
use crate::error::Error;
use crate::index::IndexStore;
use crate::types::{
    BinaryKind, BinaryRequest, BinaryResult, KallsymsSource, SymbolId, SymbolRun, SymbolizerOptions,
};

mod anon;
mod builder;
mod kernel;

use anon::PerfMapState;
use builder::{Builder, SymKey};
use kernel::KernelSymbols;

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
        let b = match runs {
            Some(runs) => Builder::of_runs(demangle, runs),
            None => Builder::new(demangle, offsets.len()),
        }
        .deferring(&mut pending);
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
}

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

/// `recorded` as a relative path of its normal components only.
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
