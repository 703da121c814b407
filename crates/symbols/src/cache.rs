//! The parse cache: each ELF file is parsed once per [`Symbolizer`](crate::Symbolizer), keyed
//! by what `stat` says about the file (so a replaced file is re-read) and by build-id (so the
//! same binary reached through two paths is parsed once).
//!
//! What is kept depends on `--debug-info`. Without it, nothing: an ELF64 file's symbol
//! tables are read by range for each request's offsets (`elf_range.rs`). With it, an ELF64
//! little-endian file's headers and its DWARF (its own or its debug file's), read by range
//! when lookups ask (`dwarf_reader.rs`), are kept, and its symbol tables are read by range for
//! each request as without. Other files are read whole and parsed once. With a symbol index
//! ([`crate::SymbolizerOptions::index_cache`]), the symbol tables of an ELF64 file are
//! read from its index entry when there is one for that very file (`index/`), else read
//! whole once and written there; in memory nothing more is kept.
//!
//! Each key owns a `OnceLock`: when two rayon tasks want the same file, one parses and the
//! other waits for its result instead of parsing it again.

use std::collections::HashMap;
use std::fs::File;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use crate::dwarf;
use crate::dwarf_reader::{PagedFile, PagedFileHandle};
use crate::elf::{build_id_of, no_dwarf_note, ElfImage, LoadConfig};
use crate::elf_range::{self, DebugFile, DebugLookup, Headers};
use crate::error::Error;
use crate::index::IndexStore;

/// Identity of a file on disk as far as `stat` can tell.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct FileKey {
    path: PathBuf,
    dev: u64,
    inode: u64,
    size: u64,
    mtime: (i64, i64),
}

/// What a file turned out to be.
#[derive(Clone)]
enum Cached {
    /// Parsed (possibly shared with another path of the same build-id).
    Parsed(Arc<ElfImage>),
    /// With `--debug-info`, an ELF64 little-endian file: its headers and DWARF are kept,
    /// its symbol tables are read by range for each request.
    Ranged(Arc<RangedFile>),
    /// Read but not parsed, because its build-id was not the one wanted.
    BuildIdOnly(Option<Vec<u8>>),
    /// Unusable: why (shared, as every load of the file answers with it).
    Failed(Arc<Error>),
}

/// What `--debug-info` keeps of a file read by range.
struct RangedFile {
    headers: Headers,
    dwarf: Arc<DwarfPart>,
}

/// A binary's DWARF, read by range: shared by every file of the same build-id (and with
/// or without DWARF of its own).
struct DwarfPart {
    /// The separate debug file was looked for (the binary has no DWARF or no `.symtab`).
    debug_searched: bool,
    debug: Option<DebugFile>,
    context: Option<Arc<dwarf::Dwarf>>,
    /// "no DWARF for …", or the DWARF parser's complaint.
    notes: Vec<String>,
}

/// The outcome of [`Cache::load`].
pub(crate) enum Loaded {
    /// The file, parsed; with what `stat` says of it now.
    Image(Arc<ElfImage>, FileStat),
    /// The file exists but has another build-id (`now`); it was not parsed.
    WrongBuildId { now: Option<Vec<u8>> },
}

/// A loaded file's inode, size and mtime, to compare with what was recorded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FileStat {
    pub inode: u64,
    pub size: u64,
    pub mtime_ns: i64,
}

impl FileStat {
    fn of(meta: &std::fs::Metadata) -> FileStat {
        FileStat {
            inode: meta.ino(),
            size: meta.size(),
            mtime_ns: meta
                .mtime()
                .saturating_mul(1_000_000_000)
                .saturating_add(meta.mtime_nsec()),
        }
    }
}

/// Counters, for tests and `--verbose` reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Parses of ELF files since the symbolizer was made. Without `--debug-info`, every
    /// request's read of a binary's symbol tables by range (they are not kept); with it, a
    /// binary's headers and DWARF once (kept: its symbol tables are still read by range for
    /// each request, which is not counted), or a file read whole once.
    pub binaries_parsed: usize,
    /// Files the cache knows about (parsed, rejected by build-id, or failed).
    pub files_cached: usize,
    /// Bytes of DWARF read from files by range (through the page cache), all files together.
    pub dwarf_bytes_read: u64,
    /// With a symbol index ([`SymbolizerOptions::index_cache`]): requests whose binary's
    /// symbols came from its index entry (no symbol table read, no demangling; not
    /// counted in `binaries_parsed`).
    ///
    /// [`SymbolizerOptions::index_cache`]: crate::SymbolizerOptions::index_cache
    pub index_hits: usize,
    /// Index entries written (a binary's whole table, read and demangled once).
    pub index_written: usize,
    /// Index entries found but not used, and built again: damaged (checksum, layout,
    /// truncated), of another version, of another file (identity, build-id, debug file),
    /// without the demangled names asked for, not a regular file of ours (a link, another
    /// owner), or writable by group or others.
    pub index_rejected: usize,
    /// Index entries deleted to keep the directory within its `max_bytes`.
    pub index_evicted: usize,
    /// Index entries not written: larger than `max_bytes` (or the format's 256 MiB), or
    /// the write failed (a full disk, a read-only directory: then this symbolizer stops
    /// building entries, and answers as without an index).
    pub index_not_written: usize,
    /// The index directory was refused (not owned by the effective uid, writable by
    /// group or others, a link, or it could not be made): no index read or written;
    /// [`Symbolizer::index_cache_warning`](crate::Symbolizer::index_cache_warning) says why.
    pub index_dir_refused: bool,
}

/// A build-id and a digest of the file's bytes.
type ContentKey = (Vec<u8>, u64);

/// A build-id, whether the file has DWARF of its own, and the file (device, inode, size,
/// mtime).
type SharedKey = (Vec<u8>, bool, (u64, u64, u64, i64, i64));

#[derive(Default)]
pub(crate) struct Cache {
    /// The symbol index, when the options ask for one.
    index: Option<IndexStore>,
    by_file: Mutex<HashMap<FileKey, Arc<OnceLock<Cached>>>>,
    /// Parsed images shared between files of one content: by (build-id, digest of the
    /// bytes). A build-id alone is a claim any file can make.
    by_build_id: Mutex<HashMap<ContentKey, Arc<ElfImage>>>,
    /// DWARF read by range, by (build-id, has DWARF of its own, the file's device, inode,
    /// size and mtime): shared by the paths of one file, never by two files claiming one
    /// build-id.
    dwarf_by_build_id: Mutex<HashMap<SharedKey, Arc<DwarfPart>>>,
    parses: AtomicUsize,
    dwarf_read: Arc<AtomicU64>,
}

impl Cache {
    /// A cache with the symbol index `index`, if any.
    pub fn new(index: Option<IndexStore>) -> Cache {
        Cache {
            index,
            ..Cache::default()
        }
    }

    /// The symbol index, if there is one.
    pub fn index(&self) -> Option<&IndexStore> {
        self.index.as_ref()
    }

    /// Loads `path` for the file offsets `wanted`, when `expect` is given only if it has
    /// that build-id. An ELF64 file's symbol tables are read by range for just the symbols
    /// `wanted` needs (`elf_range.rs`), for each request; with `--debug-info` its headers
    /// and DWARF (read by range, when asked) are kept, as is any other file read whole and
    /// parsed, and read again only if the file changes on disk. An error's `Display` is the
    /// warning to show; it is shared, as a file's failure is kept like its image.
    pub fn load(
        &self,
        path: &Path,
        expect: Option<&[u8]>,
        cfg: &LoadConfig<'_>,
        wanted: &[u64],
    ) -> Result<Loaded, Arc<Error>> {
        let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
        if !meta.is_file() {
            return Err(Arc::new(Error::Io {
                path: path.to_owned(),
                source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file"),
            }));
        }
        let (file, meta) = crate::files::open_bounded(path, crate::files::MAX_BINARY_BYTES)
            .map_err(|e| Error::io(path, e))?;
        if !cfg.debug_info {
            match self.read_by_range(path, &file, &meta, expect, cfg, wanted) {
                Some(Cached::Parsed(image)) => {
                    return Ok(Loaded::Image(image, FileStat::of(&meta)))
                }
                Some(Cached::BuildIdOnly(now)) => return Ok(Loaded::WrongBuildId { now }),
                Some(Cached::Failed(e)) => return Err(e),
                Some(Cached::Ranged(_)) | None => {}
            }
        }
        let key = FileKey {
            path: path.to_owned(),
            dev: meta.dev(),
            inode: meta.ino(),
            size: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
        };
        let cell = {
            let mut map = self.by_file.lock().unwrap_or_else(PoisonError::into_inner);
            let cell = map.entry(key).or_default();
            // A cached "wrong build-id" answer is only good for the same expectation.
            if let Some(Cached::BuildIdOnly(now)) = cell.get() {
                let still_wrong = expect.is_some_and(|want| now.as_deref() != Some(want));
                if !still_wrong {
                    *cell = Arc::default();
                }
            }
            Arc::clone(cell)
        };
        let cached = cell.get_or_init(|| self.read(path, &file, &meta, expect, cfg));
        // A file shared by build-id, or parsed before for no expectation, may not have the
        // one wanted.
        let wrong = |now: Option<&Vec<u8>>| {
            expect
                .is_some_and(|want| now.map(Vec::as_slice) != Some(want))
                .then(|| Loaded::WrongBuildId { now: now.cloned() })
        };
        match cached {
            Cached::Parsed(image) => Ok(wrong(image.build_id.as_ref())
                .unwrap_or_else(|| Loaded::Image(Arc::clone(image), FileStat::of(&meta)))),
            Cached::Ranged(r) => match wrong(r.headers.build_id.as_ref()) {
                Some(w) => Ok(w),
                None => {
                    let image = self.ranged_image(path, &file, &meta, r, cfg, wanted)?;
                    Ok(Loaded::Image(Arc::new(image), FileStat::of(&meta)))
                }
            },
            Cached::BuildIdOnly(now) => Ok(Loaded::WrongBuildId { now: now.clone() }),
            Cached::Failed(e) => Err(Arc::clone(e)),
        }
    }

    /// Reads the opened file `path` for the cache: with `--debug-info` by range if it is
    /// ELF64 little-endian, else whole.
    fn read(
        &self,
        path: &Path,
        file: &File,
        meta: &std::fs::Metadata,
        expect: Option<&[u8]>,
        cfg: &LoadConfig<'_>,
    ) -> Cached {
        if cfg.debug_info {
            if let Some(cached) = self.read_dwarf_by_range(path, file, meta, expect, cfg) {
                return cached;
            }
        }
        let mut data = vec![0u8; meta.len() as usize];
        if let Err(e) = file.read_exact_at(&mut data, 0) {
            return Cached::Failed(Arc::new(Error::io(path, e)));
        }
        let build_id = match build_id_of(path, &data) {
            Ok(id) => id,
            Err(e) => return Cached::Failed(Arc::new(e)),
        };
        if let Some(want) = expect {
            if build_id.as_deref() != Some(want) {
                return Cached::BuildIdOnly(build_id);
            }
        }
        if let Some(id) = &build_id {
            let map = self
                .by_build_id
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if let Some(image) = map.get(&(id.clone(), digest(&data))) {
                return Cached::Parsed(Arc::clone(image));
            }
        }
        match self.parse(path, &data, cfg) {
            Ok(image) => Cached::Parsed(image),
            Err(e) => Cached::Failed(Arc::new(e)),
        }
    }

    /// With `--debug-info`: the headers of the ELF64 little-endian file `path` and its DWARF
    /// (its own, else its debug file's, found by build-id or debuglink), made ready to be
    /// read by range; nothing else of the file is read. `None` for a file that must be
    /// read whole (not ELF64 little-endian, relocatable, extended section indices, or a
    /// debug file that is not ELF64 little-endian).
    fn read_dwarf_by_range(
        &self,
        path: &Path,
        file: &File,
        meta: &std::fs::Metadata,
        expect: Option<&[u8]>,
        cfg: &LoadConfig<'_>,
    ) -> Option<Cached> {
        let headers = elf_range::headers(file)?;
        if !headers.by_range() {
            return None;
        }
        if let Some(want) = expect {
            if headers.build_id.as_deref() != Some(want) {
                return Some(Cached::BuildIdOnly(headers.build_id));
            }
        }
        let own = dwarf::has_dwarf_sections(&headers.dwarf);
        let file_id = (
            meta.dev(),
            meta.ino(),
            meta.size(),
            meta.mtime(),
            meta.mtime_nsec(),
        );
        let shared_key = headers.build_id.clone().map(|id| (id, own, file_id));
        if let Some(k) = &shared_key {
            let map = self
                .dwarf_by_build_id
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if let Some(part) = map.get(k) {
                let dwarf = Arc::clone(part);
                return Some(Cached::Ranged(Arc::new(RangedFile { headers, dwarf })));
            }
        }
        let debug_searched = !own || !headers.has_symtab();
        let debug = if debug_searched {
            let link = headers
                .debuglink
                .as_ref()
                .map(|(name, crc)| (name.as_slice(), *crc));
            elf_range::find_debug_path(
                path,
                headers.build_id.as_deref(),
                link,
                &headers.loads,
                cfg.debug_dirs,
                cfg.debuginfod_cache,
            )
        } else {
            None
        };
        if debug.as_ref().is_some_and(|d| d.headers.is_none()) {
            return None;
        }
        let mut notes = Vec::new();
        // (the file, its length, its DWARF sections, its path)
        let source = if own {
            match file.try_clone() {
                Ok(f) => Some((Arc::new(f), meta.len(), &headers.dwarf, path.to_owned())),
                Err(e) => {
                    notes.push(Error::io(path, e).to_string());
                    None
                }
            }
        } else {
            debug.as_ref().and_then(|d| {
                let h = d.headers.as_ref()?;
                dwarf::has_dwarf_sections(&h.dwarf)
                    .then(|| (Arc::clone(&d.file), d.len, &h.dwarf, d.path.clone()))
            })
        };
        let context = match source {
            Some((f, len, sections, from)) => {
                let paged = PagedFile::new(f, len, Arc::clone(&self.dwarf_read));
                let handle = PagedFileHandle::new(paged, gimli::RunTimeEndian::Little);
                match dwarf::load_ranged(&handle, sections) {
                    Ok(d) => Some(Arc::new(d)),
                    Err(source) => {
                        notes.push(Error::Dwarf { path: from, source }.to_string());
                        None
                    }
                }
            }
            None => {
                if notes.is_empty() {
                    notes.push(no_dwarf_note(path, cfg));
                }
                None
            }
        };
        self.parses.fetch_add(1, Ordering::Relaxed);
        let mut part = Arc::new(DwarfPart {
            debug_searched,
            debug,
            context,
            notes,
        });
        if let Some(k) = shared_key {
            let mut map = self
                .dwarf_by_build_id
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            part = Arc::clone(map.entry(k).or_insert(part));
        }
        Some(Cached::Ranged(Arc::new(RangedFile {
            headers,
            dwarf: part,
        })))
    }

    /// The image of the file `path` of `ranged` for the offsets `wanted`: its symbol tables
    /// read by range now, its DWARF the one kept.
    fn ranged_image(
        &self,
        path: &Path,
        file: &File,
        meta: &std::fs::Metadata,
        ranged: &RangedFile,
        cfg: &LoadConfig<'_>,
        wanted: &[u64],
    ) -> Result<ElfImage, Error> {
        let part = &ranged.dwarf;
        let lookup = if part.debug_searched {
            DebugLookup::Found(part.debug.as_ref())
        } else {
            DebugLookup::Search
        };
        match elf_range::parse(
            elf_range::Opened { path, file, meta },
            ranged.headers.clone(),
            cfg,
            wanted,
            lookup,
            self.index.as_ref(),
        ) {
            Ok(Some(mut image)) => {
                if image.debug_file.is_none() {
                    image.debug_file = part.debug.as_ref().map(|d| d.path.clone());
                }
                image.notes.clone_from(&part.notes);
                image.dwarf.clone_from(&part.context);
                Ok(image)
            }
            // `read_dwarf_by_range` took only files this reads.
            Ok(None) => Err(Error::NotReadByRange {
                path: path.to_owned(),
            }),
            Err(e) => Err(e),
        }
    }

    /// The image of the opened file `path` with just the symbols the file offsets `wanted`
    /// need, read by range (`elf_range.rs`); not kept, since it answers only for `wanted`.
    /// `None` for a file that must be read whole.
    fn read_by_range(
        &self,
        path: &Path,
        file: &File,
        meta: &std::fs::Metadata,
        expect: Option<&[u8]>,
        cfg: &LoadConfig<'_>,
        wanted: &[u64],
    ) -> Option<Cached> {
        // Not ELF64 little-endian: the whole-file path reads it.
        let headers = crate::elf_range::headers(file)?;
        if let Some(want) = expect {
            if headers.build_id.as_deref() != Some(want) {
                return Some(Cached::BuildIdOnly(headers.build_id));
            }
        }
        let index = self.index.as_ref();
        match crate::elf_range::parse(
            crate::elf_range::Opened { path, file, meta },
            headers,
            cfg,
            wanted,
            DebugLookup::Search,
            index,
        ) {
            Ok(Some(image)) => {
                if !image.from_index {
                    self.parses.fetch_add(1, Ordering::Relaxed);
                }
                Some(Cached::Parsed(Arc::new(image)))
            }
            Ok(None) => None,
            Err(e) => Some(Cached::Failed(Arc::new(e))),
        }
    }

    /// Counts a parse and shares the image by build-id and content (`data`'s digest).
    fn keep(&self, image: ElfImage, data: &[u8]) -> Arc<ElfImage> {
        let image = Arc::new(image);
        self.parses.fetch_add(1, Ordering::Relaxed);
        if let Some(id) = &image.build_id {
            let mut map = self
                .by_build_id
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            return Arc::clone(map.entry((id.clone(), digest(data))).or_insert(image));
        }
        image
    }

    /// Parses bytes that have no file key (the vDSO), sharing by build-id and content.
    pub fn parse(
        &self,
        path: &Path,
        data: &[u8],
        cfg: &LoadConfig<'_>,
    ) -> Result<Arc<ElfImage>, Error> {
        Ok(self.keep(ElfImage::parse(path, data, cfg)?, data))
    }

    pub fn stats(&self) -> CacheStats {
        let mut stats = CacheStats {
            binaries_parsed: self.parses.load(Ordering::Relaxed),
            files_cached: self
                .by_file
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .len(),
            dwarf_bytes_read: self.dwarf_read.load(Ordering::Relaxed),
            ..CacheStats::default()
        };
        if let Some(ix) = &self.index {
            let c = &ix.counters;
            stats.index_hits = c.hits.load(Ordering::Relaxed);
            stats.index_written = c.written.load(Ordering::Relaxed);
            stats.index_rejected = c.rejected.load(Ordering::Relaxed);
            stats.index_evicted = c.evicted.load(Ordering::Relaxed);
            stats.index_not_written = c.not_written.load(Ordering::Relaxed);
            stats.index_dir_refused = ix.dir_checked_and_refused();
        }
        stats
    }
}

/// A digest of a file's bytes, for sharing parsed images between copies of one content.
fn digest(data: &[u8]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    data.hash(&mut h);
    h.finish()
}
