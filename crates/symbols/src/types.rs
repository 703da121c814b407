//! The input and output types of the symbolizer.

use std::fmt;
use std::path::PathBuf;

use crate::index::IndexCacheOptions;

/// What a cookie names, and so what a sample offset means.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum BinaryKind {
    /// A user-space ELF file (executable or shared library). Offsets are *file* offsets
    /// (`pgoff + ip - map_start`), mapped to virtual addresses through the PT_LOAD headers.
    Elf,
    /// The vDSO. Offsets are file offsets into the vDSO image, as for [`BinaryKind::Elf`]. If
    /// `path` is not an existing file (it is usually `[vdso]`), this process's own vDSO is used,
    /// checked against the recorded build-id when there is one.
    Vdso,
    /// The kernel image. The address is `base + offset`, `base` being the recorded address of
    /// `_text`; symbols come from kallsyms.
    Kernel,
    /// A kernel module. The address is `base + offset`, `base` being the module's load address
    /// (from `/proc/modules`); symbols come from kallsyms entries tagged `[module]`, else from
    /// the `.ko` file at `path`.
    Module,
    /// Anonymous memory (JIT code, `//anon`, heap). Offsets are absolute addresses, looked up in
    /// the process's perf map (`perf-PID.map`), else reported as an `anon` range.
    Anon,
}

/// One binary to symbolize, as described by a cookie of the event log.
///
/// Build one with a constructor ([`BinaryRequest::elf`], [`BinaryRequest::kernel`], …) and the
/// `with_*` methods; the fields are public so a cookie table converts field by field.
///
/// The device number that cookies carry is deliberately absent: perf reports it as major/minor
/// while `stat` encodes it differently per filesystem (overlayfs, btrfs subvolumes), so it would
/// flag unchanged files as changed. The build-id, else the inode, decides.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct BinaryRequest {
    /// What the cookie names.
    pub kind: BinaryKind,
    /// The recorded path (for modules: the `.ko` path or the module name, e.g. `[ext4]`).
    pub path: PathBuf,
    /// The build-id recorded with the mapping, if any. When set, a file whose build-id differs
    /// is reported as changed and not used.
    pub build_id: Option<Vec<u8>>,
    /// The inode recorded with the mapping. Checked only when there is no recorded build-id
    /// and no sysroot (a copy under a sysroot has its own inode).
    pub inode: Option<u64>,
    /// Kernel: the recorded address of `_text`. Module: the load address. Anon: the start of
    /// the mapping (used to name the `anon` range). Unused for ELF and vDSO.
    pub base: u64,
    /// Anon: the length of the mapping, 0 if unknown. Unused otherwise.
    pub len: u64,
    /// The process, for anon code (selects `perf-PID.map`).
    pub pid: Option<u32>,
    /// ELF: the file the recorder identified behind the cookie's mappings. When set, a
    /// build-id is only the file's claim: the recorded path is used only if it is still
    /// that file (inode, size and mtime; the size alone under a sysroot or for a session
    /// recorded elsewhere, [`RecordedFile::here`]), a file found by
    /// build-id only if its size matches, and otherwise the binary is refused as changed
    /// since recording.
    pub file: Option<RecordedFile>,
    /// ELF: a copy the recorder kept of that very file (a session's `debug/.kept/COOKIE`),
    /// tried first; used only together with [`BinaryRequest::file`].
    pub kept_copy: Option<PathBuf>,
    /// ELF: the recorded build-id is a claim whose file the recorder could not identify:
    /// only the recorded path (with that build-id) may name it, never a file found
    /// elsewhere by build-id.
    pub unverified: bool,
}

/// What the recorder saw of a file (see [`BinaryRequest::file`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RecordedFile {
    /// Inode number.
    pub inode: u64,
    /// Size in bytes.
    pub size: u64,
    /// Modification time, nanoseconds since the epoch.
    pub mtime_ns: i64,
    /// Recorded on this machine, so its inode and mtime mean something here (a session
    /// from another host is checked by size and build-id, as under a sysroot).
    pub here: bool,
}

impl BinaryRequest {
    fn new(kind: BinaryKind, path: PathBuf) -> Self {
        BinaryRequest {
            kind,
            path,
            build_id: None,
            inode: None,
            base: 0,
            len: 0,
            pid: None,
            file: None,
            kept_copy: None,
            unverified: false,
        }
    }

    /// A user-space ELF file at `path`; offsets are file offsets.
    pub fn elf(path: impl Into<PathBuf>) -> Self {
        Self::new(BinaryKind::Elf, path.into())
    }

    /// The vDSO; `path` is usually `[vdso]`, or a copy of the image saved with the session.
    pub fn vdso(path: impl Into<PathBuf>) -> Self {
        Self::new(BinaryKind::Vdso, path.into())
    }

    /// The kernel, whose `_text` was at `text_base` when recorded.
    pub fn kernel(text_base: u64) -> Self {
        let mut r = Self::new(BinaryKind::Kernel, PathBuf::from("[kernel.kallsyms]"));
        r.base = text_base;
        r
    }

    /// A kernel module named by `name_or_path` (`ext4`, `[ext4]` or a `.ko` path) loaded at
    /// `base`.
    pub fn module(name_or_path: impl Into<PathBuf>, base: u64) -> Self {
        let mut r = Self::new(BinaryKind::Module, name_or_path.into());
        r.base = base;
        r
    }

    /// Anonymous memory of process `pid`, mapped at `start` for `len` bytes (0 if unknown).
    pub fn anon(pid: u32, start: u64, len: u64) -> Self {
        let mut r = Self::new(BinaryKind::Anon, PathBuf::from("//anon"));
        r.pid = Some(pid);
        r.base = start;
        r.len = len;
        r
    }

    /// Sets the recorded build-id.
    pub fn with_build_id(mut self, build_id: impl Into<Vec<u8>>) -> Self {
        self.build_id = Some(build_id.into());
        self
    }

    /// Sets the recorded inode.
    pub fn with_inode(mut self, inode: u64) -> Self {
        self.inode = Some(inode);
        self
    }

    /// Sets the file the recorder identified (see [`BinaryRequest::file`]).
    pub fn with_file(mut self, file: RecordedFile) -> Self {
        self.file = Some(file);
        self
    }

    /// Sets the kept copy of the recorded file (see [`BinaryRequest::kept_copy`]).
    pub fn with_kept_copy(mut self, path: impl Into<PathBuf>) -> Self {
        self.kept_copy = Some(path.into());
        self
    }

    /// Marks the build-id as an unverified claim (see [`BinaryRequest::unverified`]).
    pub fn unverified(mut self) -> Self {
        self.unverified = true;
        self
    }

    /// Sets the process id.
    pub fn with_pid(mut self, pid: u32) -> Self {
        self.pid = Some(pid);
        self
    }
}

/// Where kernel symbols come from.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum KallsymsSource {
    /// This machine's `/proc/kallsyms`, with `/proc/sys/kernel/kptr_restrict` for the warning
    /// and `/sys/kernel/notes` for the kernel build-id check.
    #[default]
    Live,
    /// A copy saved with the session.
    File(PathBuf),
    /// Kallsyms text held in memory (tests, or a session format that embeds it).
    Text(String),
    /// No kernel symbols: kernel and module samples go to `[kernel]` / `[module]`.
    None,
}

/// How a [`Symbolizer`](crate::Symbolizer) finds and shows names. Fixed for its lifetime,
/// since the cache depends on it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SymbolizerOptions {
    /// Resolve source lines and inlined frames from DWARF (`--debug-info`). Costs memory: the
    /// DWARF sections of each binary are kept in the cache.
    pub debug_info: bool,
    /// Show demangled names (Rust legacy and v0, C++) in [`SymbolInfo::name`]; when false the
    /// raw names are shown. [`SymbolInfo::raw_name`] is always the raw one.
    pub demangle: bool,
    /// Where kernel symbols come from.
    pub kallsyms: KallsymsSource,
    /// Directory of perf map copies (`perf-PID.map`) saved with the session. `None` reads
    /// `/tmp/perf-PID.map` live (only right while the process still runs).
    pub perf_map_dir: Option<PathBuf>,
    /// Roots of separate debug files, searched by build-id (`.build-id/ab/cdef….debug`) and by
    /// debuglink (`DIR/<binary's directory>/<name>`). Default: `/usr/lib/debug`.
    pub debug_dirs: Vec<PathBuf>,
    /// A debuginfod client cache (elfutils' layout: `CACHE/<build-id>/debuginfo` and
    /// `…/executable`), searched after the debug dirs for a debug file and, for a binary
    /// missing at its recorded path, for the binary itself, by build-id, with the same checks
    /// as the debug dirs (the build-id, the PT_LOAD layout, the recorded size). Nothing here
    /// downloads: `profkit-debuginfod` fills the cache. Default: none.
    pub debuginfod_cache: Option<PathBuf>,
    /// Prefix put before every recorded absolute path (like perf's `--symfs`), for reports
    /// made on another machine. Debug dirs are not prefixed.
    pub sysroot: Option<PathBuf>,
    /// Directories searched for a file of the same name when the recorded path is missing or
    /// changed; a candidate is used only if it has the recorded build-id.
    pub search_dirs: Vec<PathBuf>,
    /// A symbol index kept across reports ([`IndexCacheOptions`]; e.g. in
    /// [`IndexCacheOptions::default_dir`]): the first symbolization that reads an ELF64
    /// binary's function table by range (its own, or a stripped binary's debug file's)
    /// writes the whole table, demangled, as one checksummed entry for that very file
    /// (build-id and `fstat` identity); later ones binary-search the entry instead of
    /// streaming the symbol tables and demangling. The answers are the same as without.
    /// Default: none (nothing written).
    pub index_cache: Option<IndexCacheOptions>,
}

impl Default for SymbolizerOptions {
    fn default() -> Self {
        SymbolizerOptions {
            debug_info: false,
            demangle: true,
            kallsyms: KallsymsSource::Live,
            perf_map_dir: None,
            debug_dirs: vec![PathBuf::from("/usr/lib/debug")],
            debuginfod_cache: None,
            sysroot: None,
            search_dirs: Vec::new(),
            index_cache: None,
        }
    }
}

/// Where a symbol's name was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum SymbolOrigin {
    /// The binary's `.symtab`.
    Symtab,
    /// The binary's `.dynsym` (exported names only).
    Dynsym,
    /// A separate debug file's `.symtab`.
    DebugFile,
    /// Kallsyms (kernel or module).
    Kallsyms,
    /// A kernel module's `.ko` file.
    ModuleFile,
    /// A perf map (JIT code).
    PerfMap,
    /// Not a symbol: an anonymous range, named after the process and range.
    Anon,
    /// Not a symbol: kernel addresses were hidden or unavailable, so everything is `[kernel]`
    /// (or `[module]`).
    KernelUnresolved,
}

/// Index of a symbol in [`BinaryResult::symbols`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SymbolId(pub u32);

/// A function (or JIT blob, or stand-in range) that at least one offset fell in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SymbolInfo {
    /// The name to show: demangled, or raw if demangling is off or fails.
    pub name: String,
    /// The name as stored in the binary.
    pub raw_name: String,
    /// Start address: link-time virtual address for ELF, kernel address for kernel and
    /// modules, absolute address for perf-map and anon entries, section-layout offset for a
    /// `.ko` file.
    pub start: u64,
    /// Size in bytes: the symbol's recorded size, else the distance to the next symbol. 0 when
    /// unknown (the last kallsyms symbol of a module, `[kernel]`).
    pub size: u64,
    /// File offset of `start`, for ELF symbols inside a PT_LOAD segment.
    pub file_offset: Option<u64>,
    /// Where the name came from.
    pub origin: SymbolOrigin,
}

/// A source position from DWARF.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SourceLocation {
    /// The source file, as recorded (usually absolute).
    pub file: String,
    /// The line, if known.
    pub line: Option<u32>,
}

impl fmt::Display for SourceLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line {
            Some(line) => write!(f, "{}:{line}", self.file),
            None => f.write_str(&self.file),
        }
    }
}

/// One inlined function at an address, innermost first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InlinedFrame {
    /// The inlined function (demangled per the options).
    pub function: Option<String>,
    /// Where it was inlined into its caller (the next frame out, or the symbol's function).
    pub call_site: Option<SourceLocation>,
}

/// What one requested offset resolved to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OffsetInfo {
    /// The offset as requested.
    pub offset: u64,
    /// The address looked up: ELF virtual address, kernel address, or the absolute address
    /// for anon code. `None` when an ELF file offset is outside every PT_LOAD segment or the
    /// binary could not be used.
    pub address: Option<u64>,
    /// The symbol, an index into [`BinaryResult::symbols`].
    pub symbol: Option<SymbolId>,
    /// With `debug_info`: the source line of the address itself (inside the innermost
    /// inlined function, if any). Boxed: a report holds an answer for each of up to
    /// millions of offsets, most without one.
    pub location: Option<Box<SourceLocation>>,
    /// With `debug_info`: the inlined functions at the address, innermost first. Empty when
    /// nothing was inlined there; the outermost function is the symbol itself.
    pub inlined: Vec<InlinedFrame>,
}

/// The answer for one [`BinaryRequest`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BinaryResult {
    /// The file symbols were read from, if any (after sysroot, search and build-id lookup).
    pub path_used: Option<PathBuf>,
    /// The separate debug file symbols or DWARF came from, if one was used.
    pub debug_file_used: Option<PathBuf>,
    /// Messages for the report, each once per binary: "binary changed since recording: …",
    /// "… not found; samples shown as offsets", "kernel addresses hidden …".
    pub warnings: Vec<String>,
    /// Set when some offsets found no name because the binary has no symbol
    /// table of its own (stripped, at most exported names) and no debug
    /// file was found: the note saying so (path, build-id, where debug
    /// files were looked for). Apart from [`BinaryResult::warnings`] because
    /// a system-wide report meets dozens of such binaries: a report counts
    /// them in one line and lists them on demand.
    pub no_symbols: Option<String>,
    /// The distinct symbols hit, referenced by [`OffsetInfo::symbol`].
    pub symbols: Vec<SymbolInfo>,
    /// One entry per requested offset, in request order.
    pub offsets: Vec<OffsetInfo>,
}

/// Requested offsets, consecutive in the request, that share their symbol
/// (or all have none): [`crate::Symbolizer::symbolize_runs`]'s answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SymbolRun {
    /// The run's first offset.
    pub first: u64,
    /// The run's last offset.
    pub last: u64,
    /// The symbol of every offset of the run.
    pub symbol: Option<SymbolId>,
}

impl BinaryResult {
    /// The symbol with this id.
    ///
    /// # Panics
    /// If `id` did not come from this result.
    pub fn symbol(&self, id: SymbolId) -> &SymbolInfo {
        &self.symbols[id.0 as usize]
    }

    /// The symbol of the `i`th requested offset, if it resolved.
    pub fn symbol_at(&self, i: usize) -> Option<&SymbolInfo> {
        let id = self.offsets.get(i)?.symbol?;
        Some(self.symbol(id))
    }

    /// The display name of the `i`th requested offset, if it resolved.
    pub fn name_at(&self, i: usize) -> Option<&str> {
        self.symbol_at(i).map(|s| s.name.as_str())
    }
}
