//! The parse cache: each ELF file is parsed once per [`Symbolizer`](crate::Symbolizer), keyed
//! by what `stat` says about the file (so a replaced file is re-read) and by build-id (so the
//! same binary reached through two paths is parsed once).
//!
//! Each key owns a `OnceLock`: when two rayon tasks want the same file, one parses and the
//! other waits for its result instead of parsing it again.

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use crate::elf::{build_id_of, ElfImage, LoadConfig};
use crate::error::Error;

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
#[derive(Clone, Debug)]
enum Cached {
    /// Parsed (possibly shared with another path of the same build-id).
    Parsed(Arc<ElfImage>),
    /// Read but not parsed, because its build-id was not the one wanted.
    BuildIdOnly(Option<Vec<u8>>),
    /// Unusable; the message says why.
    Failed(String),
}

/// The outcome of [`Cache::load`].
pub(crate) enum Loaded {
    /// The file, parsed; with its inode now.
    Image(Arc<ElfImage>, u64),
    /// The file exists but has another build-id (`now`); it was not parsed.
    WrongBuildId { now: Option<Vec<u8>> },
}

/// Counters, for tests and `--verbose` reports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Full parses of ELF files (symbol tables built) since the symbolizer was made.
    pub binaries_parsed: usize,
    /// Files the cache knows about (parsed, rejected by build-id, or failed).
    pub files_cached: usize,
}

#[derive(Default)]
pub(crate) struct Cache {
    by_file: Mutex<HashMap<FileKey, Arc<OnceLock<Cached>>>>,
    by_build_id: Mutex<HashMap<Vec<u8>, Arc<ElfImage>>>,
    parses: AtomicUsize,
}

impl Cache {
    /// Loads `path` for the file offsets `wanted`, when `expect` is given only if it has
    /// that build-id. Without `--debug-info` an ELF64 file is read by range for just the
    /// symbols `wanted` needs (`elf_range.rs`), each time; else it is read whole and parsed
    /// once, only if it is new (or changed on disk). Errors are the warning text to show.
    pub fn load(
        &self,
        path: &Path,
        expect: Option<&[u8]>,
        cfg: &LoadConfig<'_>,
        wanted: &[u64],
    ) -> Result<Loaded, String> {
        let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e).to_string())?;
        if !meta.is_file() {
            return Err(Error::Io {
                path: path.to_owned(),
                source: std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file"),
            }
            .to_string());
        }
        match self.read_by_range(path, expect, cfg, wanted) {
            Some(Cached::Parsed(image)) => return Ok(Loaded::Image(image, meta.ino())),
            Some(Cached::BuildIdOnly(now)) => return Ok(Loaded::WrongBuildId { now }),
            Some(Cached::Failed(msg)) => return Err(msg),
            None => {}
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
        let cached = cell.get_or_init(|| self.read(path, expect, cfg));
        match cached {
            Cached::Parsed(image) => match expect {
                Some(want) if image.build_id.as_deref() != Some(want) => Ok(Loaded::WrongBuildId {
                    now: image.build_id.clone(),
                }),
                _ => Ok(Loaded::Image(Arc::clone(image), meta.ino())),
            },
            Cached::BuildIdOnly(now) => Ok(Loaded::WrongBuildId { now: now.clone() }),
            Cached::Failed(msg) => Err(msg.clone()),
        }
    }

    fn read(&self, path: &Path, expect: Option<&[u8]>, cfg: &LoadConfig<'_>) -> Cached {
        let data = match crate::files::read_regular(path, crate::files::MAX_BINARY_BYTES) {
            Ok(data) => data,
            Err(e) => return Cached::Failed(Error::io(path, e).to_string()),
        };
        let build_id = match build_id_of(path, &data) {
            Ok(id) => id,
            Err(e) => return Cached::Failed(e.to_string()),
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
            if let Some(image) = map.get(id) {
                return Cached::Parsed(Arc::clone(image));
            }
        }
        match self.parse(path, &data, cfg) {
            Ok(image) => Cached::Parsed(image),
            Err(e) => Cached::Failed(e.to_string()),
        }
    }

    /// The image of `path` with just the symbols the file offsets `wanted` need, read by
    /// range (`elf_range.rs`); not kept, since it answers only for `wanted`. `None` for a
    /// file that must be read whole.
    fn read_by_range(
        &self,
        path: &Path,
        expect: Option<&[u8]>,
        cfg: &LoadConfig<'_>,
        wanted: &[u64],
    ) -> Option<Cached> {
        if cfg.debug_info {
            return None;
        }
        let (file, meta) = match crate::files::open_bounded(path, crate::files::MAX_BINARY_BYTES) {
            Ok(f) => f,
            Err(e) => return Some(Cached::Failed(Error::io(path, e).to_string())),
        };
        // Not ELF64 little-endian: the whole-file path reads it.
        let headers = crate::elf_range::headers(&file)?;
        if let Some(want) = expect {
            if headers.build_id.as_deref() != Some(want) {
                return Some(Cached::BuildIdOnly(headers.build_id));
            }
        }
        match crate::elf_range::parse(path, &file, &meta, headers, cfg, wanted) {
            Ok(Some(image)) => {
                self.parses.fetch_add(1, Ordering::Relaxed);
                Some(Cached::Parsed(Arc::new(image)))
            }
            Ok(None) => None,
            Err(e) => Some(Cached::Failed(e.to_string())),
        }
    }

    /// Counts a parse and shares the image by build-id.
    fn keep(&self, image: ElfImage) -> Arc<ElfImage> {
        let image = Arc::new(image);
        self.parses.fetch_add(1, Ordering::Relaxed);
        if let Some(id) = &image.build_id {
            let mut map = self
                .by_build_id
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            return Arc::clone(map.entry(id.clone()).or_insert(image));
        }
        image
    }

    /// Parses bytes that have no file key (the vDSO), sharing by build-id.
    pub fn parse(
        &self,
        path: &Path,
        data: &[u8],
        cfg: &LoadConfig<'_>,
    ) -> Result<Arc<ElfImage>, Error> {
        Ok(self.keep(ElfImage::parse(path, data, cfg)?))
    }

    pub fn stats(&self) -> CacheStats {
        CacheStats {
            binaries_parsed: self.parses.load(Ordering::Relaxed),
            files_cached: self
                .by_file
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .len(),
        }
    }
}
