//! A debuginfod client: fetches a binary's separate debug file, its
//! executable, or one of its source files by build-id from the servers
//! `DEBUGINFOD_URLS` names, into the cache gdb and perf share.
//!
//! It owns the protocol of elfutils' debuginfod (`GET
//! URL/buildid/HEXID/debuginfo`, `…/executable`, `…/source/ABSPATH`),
//! its configuration variables ([`Config::from_vars`]) and its cache
//! layout (`CACHE/HEXID/debuginfo`, negative entries, `cache_miss_s`: see
//! the `cache` module's notes), so a file one tool fetched serves the
//! others.
//!
//! ```no_run
//! use profkit_debuginfod::{Client, Config, Fetched, Kind};
//! let client = Client::new(Config::from_env()?);
//! let id = [0x12, 0x34, 0x56, 0x78];
//! match client.fetch(&id, &Kind::Debuginfo)? {
//!     Fetched::Found { path, .. } => println!("debug file at {}", path.display()),
//!     Fetched::NotFound => println!("no server has it"),
//! }
//! # Ok::<(), profkit_debuginfod::Error>(())
//! ```
//!
//! # Design constraints
//!
//! - **A server's answer is a claim.** A debug file or executable is
//!   streamed into a temporary file (`O_CREAT | O_EXCL`, mode 0600, in the
//!   build-id directory), capped in size ([`Config::max_size`], else
//!   [`MAX_ELF_BYTES`] / [`MAX_SOURCE_BYTES`]) and time, and its ELF
//!   build-id note (read by range, never the whole file) must be the one
//!   asked for; else it is refused ([`Error::WrongBuildId`]), removed, and
//!   the next server asked. Nothing unchecked enters the cache. Sources
//!   carry no build-id: they are only size-capped.
//! - **Atomic publication.** A checked file is published with
//!   `hard_link(tmp, final)`, which never overwrites: when another process
//!   won the race, its file is checked and used.
//! - **The cache is checked too.** Its root must be a directory of the
//!   effective user's, not group/world-writable ([`Error::Cache`]); each
//!   entry is opened through `profkit_untrusted::open_untrusted` (regular
//!   file, no link, ours, dense, size cap) and an ELF entry's build-id
//!   re-read. An entry failing that is ignored (removed when ours) and
//!   fetched again.
//! - **Negative cache, as elfutils.** When every server says 404, an empty
//!   mode-0000 file at the entry's path says "not found" for
//!   `CACHE/cache_miss_s` seconds (600): a second run asks no server about
//!   binaries none has.
//! - **Bounded network.** Connect, answer and every body read within
//!   [`Config::timeout`]; the whole file within [`Config::max_time`]; at
//!   most [`MAX_REDIRECTS`] redirects, to http or https URLs only; at most
//!   [`MAX_PARALLEL`] transfers at once in [`Client::fetch_many`] (threads,
//!   not rayon: the work waits on the network, not the CPU). A server that
//!   timed out or refused the connection is not asked again by the client.
//! - **Bounded disk.** Each file is capped; a client given a budget
//!   ([`Client::with_budget`], [`RUN_BUDGET`] for profkit's tools) downloads
//!   no more than that in all: the build-ids asked for are whatever local
//!   users' programs claim.
//! - **Servers in order.** The first 200 with the right content wins. A
//!   404, a refused or a failed answer moves on to the next server
//!   (elfutils asks all at once and takes the first answer, even a wrong
//!   one).
//! - http and https (rustls with the system's roots, through
//!   rustls-platform-verifier); proxies from the usual variables.
//!
//! # Not for
//!
//! Serving files (that is `debuginfod` itself), cleaning the cache (gdb's
//! and elfutils' clients do it by `cache_clean_interval_s`), finding debug
//! files locally (`/usr/lib/debug/.build-id` belongs to the symbolizer),
//! or IMA signature checks (the build-id check stands in for them).

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod cache;
mod config;
mod error;
mod http;
mod many;

pub use cache::{source_name, CACHE_MISS_FILE, DEFAULT_CACHE_MISS};
pub use config::{Config, DEFAULT_TIMEOUT};
pub use error::Error;
pub use http::{escape_source, MAX_REDIRECTS};
pub use many::{Progress, MAX_PARALLEL};

use cache::{Entry, TempGuard};
use std::fs;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

/// Largest debug file or executable accepted when [`Config::max_size`]
/// is unset (4 GiB: the biggest distributions' debug files stay below).
pub const MAX_ELF_BYTES: u64 = 4 << 30;

/// Largest source file accepted when [`Config::max_size`] is unset.
pub const MAX_SOURCE_BYTES: u64 = 64 << 20;

/// What one run of a tool (a report, an archive) downloads at most, all
/// files together ([`Client::with_budget`]): the largest distribution debug
/// files are 1 to 2 GB, and a report of a whole machine needs a few dozen.
pub const RUN_BUDGET: u64 = 16 << 30;

/// Longest build-id accepted, in bytes.
pub const MAX_BUILD_ID: usize = 64;

/// What to fetch for a build-id.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// The separate debug file (`/debuginfo`).
    Debuginfo,
    /// The executable or library itself (`/executable`).
    Executable,
    /// A source file, by the absolute path its DWARF records (`/source/…`).
    Source(String),
}

impl Kind {
    fn is_elf(&self) -> bool {
        !matches!(self, Kind::Source(_))
    }
}

/// The outcome of a fetch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Fetched {
    /// The file, in the cache.
    Found {
        /// Its path in the cache.
        path: PathBuf,
        /// Already there (no transfer).
        from_cache: bool,
        /// The server base URL it came from (`None` from the cache).
        server: Option<String>,
        /// Its size.
        bytes: u64,
    },
    /// Every server said 404, or a fresh negative entry says so, or no
    /// network was allowed and nothing is cached.
    NotFound,
}

/// What a client did so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// HTTP requests sent (each redirect hop counts).
    pub requests: u64,
    /// Body bytes received.
    pub bytes: u64,
    /// Files fetched and published into the cache.
    pub fetched: u64,
    /// Fetches answered by a cached file.
    pub cache_hits: u64,
    /// Fetches ending in [`Fetched::NotFound`].
    pub not_found: u64,
    /// Answers refused: wrong build-id, too large, bad or too many redirects.
    pub refused: u64,
    /// Answers failed: no connection, timeout, bad status, malformed.
    pub failed: u64,
}

#[derive(Default)]
struct Counters {
    requests: AtomicU64,
    bytes: AtomicU64,
    fetched: AtomicU64,
    cache_hits: AtomicU64,
    not_found: AtomicU64,
    refused: AtomicU64,
    failed: AtomicU64,
}

/// A debuginfod client (`Send + Sync`: share it between threads).
pub struct Client {
    cfg: Config,
    /// Made at the first request: a warm report never sets up HTTP or TLS.
    agent: std::sync::OnceLock<ureq::Agent>,
    n: Counters,
    /// Servers that timed out or could not be reached, with why: not asked
    /// again by this client (a report meeting a dead server would otherwise
    /// wait [`Config::timeout`] once per binary).
    down: std::sync::Mutex<std::collections::HashMap<String, String>>,
    /// Bytes this client downloads at most, all files together
    /// ([`Client::with_budget`]).
    budget: u64,
}

/// The lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

enum Look {
    Hit(u64),
    Missing,
    Nothing,
}

impl Client {
    /// A client with `cfg` (no I/O until asked).
    pub fn new(cfg: Config) -> Client {
        Client {
            agent: std::sync::OnceLock::new(),
            cfg,
            n: Counters::default(),
            down: Default::default(),
            budget: u64::MAX,
        }
    }

    /// This client downloads at most `bytes`, all files together (a
    /// transfer that passes it is cut and refused, [`Error::OverBudget`],
    /// and no more are started): a report that runs as root on the
    /// build-ids any local user's programs claim must not fill root's disk
    /// with their debug files. What was fetched stays in the cache, so the
    /// next run goes on from there.
    pub fn with_budget(mut self, bytes: u64) -> Client {
        self.budget = bytes;
        self
    }

    /// Its settings.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// The counters so far.
    pub fn stats(&self) -> Stats {
        let n = &self.n;
        Stats {
            requests: n.requests.load(Relaxed),
            bytes: n.bytes.load(Relaxed),
            fetched: n.fetched.load(Relaxed),
            cache_hits: n.cache_hits.load(Relaxed),
            not_found: n.not_found.load(Relaxed),
            refused: n.refused.load(Relaxed),
            failed: n.failed.load(Relaxed),
        }
    }

    /// The size cap for `kind`.
    pub fn max_bytes(&self, kind: &Kind) -> u64 {
        self.cfg.max_size.unwrap_or(if kind.is_elf() {
            MAX_ELF_BYTES
        } else {
            MAX_SOURCE_BYTES
        })
    }

    /// The cache path of `kind` for `build_id` (whether present or not).
    ///
    /// # Errors
    /// [`Error::BadBuildId`], [`Error::BadSourcePath`].
    pub fn cache_path(&self, build_id: &[u8], kind: &Kind) -> Result<PathBuf, Error> {
        check_request(build_id, kind)?;
        Ok(self
            .cfg
            .cache
            .join(hex(build_id))
            .join(cache::file_name(kind)))
    }

    /// The URL of `kind` for `build_id` on server `base`.
    pub fn url(base: &str, build_id: &[u8], kind: &Kind) -> String {
        let id = hex(build_id);
        match kind {
            Kind::Debuginfo => format!("{base}/buildid/{id}/debuginfo"),
            Kind::Executable => format!("{base}/buildid/{id}/executable"),
            Kind::Source(p) => format!("{base}/buildid/{id}/source/{}", escape_source(p)),
        }
    }

    /// A verified, usable cached file of `kind` for `build_id`, without
    /// touching the network (a bad entry is ignored, and removed if ours).
    pub fn cached(&self, build_id: &[u8], kind: &Kind) -> Option<PathBuf> {
        let path = self.cache_path(build_id, kind).ok()?;
        let meta = fs::metadata(&self.cfg.cache).ok()?;
        if !meta.is_dir() || meta.uid() != cache::euid() || meta.mode() & 0o022 != 0 {
            return None;
        }
        match self.look(&path, build_id, kind) {
            Look::Hit(_) => Some(path),
            _ => None,
        }
    }

    /// The file of `kind` for `build_id`: from the cache, else (when
    /// [`Config::network`]) from the first server that has it.
    ///
    /// # Errors
    /// A bad request ([`Error::BadBuildId`], [`Error::BadSourcePath`]), an
    /// unusable cache ([`Error::Cache`], [`Error::Io`]), or, when no server
    /// had the file and at least one did not simply say 404, the first
    /// server's error.
    pub fn fetch(&self, build_id: &[u8], kind: &Kind) -> Result<Fetched, Error> {
        let path = self.cache_path(build_id, kind)?;
        // Without a network nothing is created: a report with no server
        // leaves no cache directory behind.
        let exists = cache::existing_root(&self.cfg.cache)?;
        if !exists && !self.cfg.network() {
            self.n.not_found.fetch_add(1, Relaxed);
            return Ok(Fetched::NotFound);
        }
        cache::root(&self.cfg.cache)?;
        match self.look(&path, build_id, kind) {
            Look::Hit(bytes) => {
                self.n.cache_hits.fetch_add(1, Relaxed);
                return Ok(Fetched::Found {
                    path,
                    from_cache: true,
                    server: None,
                    bytes,
                });
            }
            Look::Missing => {
                self.say(format_args!(
                    "{}: not found (negative cache entry)",
                    path.display()
                ));
                self.n.not_found.fetch_add(1, Relaxed);
                return Ok(Fetched::NotFound);
            }
            Look::Nothing => {}
        }
        if !self.cfg.network() {
            self.n.not_found.fetch_add(1, Relaxed);
            return Ok(Fetched::NotFound);
        }
        let dir = cache::id_dir(&self.cfg.cache, build_id)?;
        let mut first_error = None;
        for base in &self.cfg.urls {
            let url = Client::url(base, build_id, kind);
            if let Some(why) = self.is_down(base) {
                first_error.get_or_insert(Error::Http {
                    url,
                    why: format!("not asked again after: {why}"),
                });
                continue;
            }
            match self.download(&dir, &path, &url, build_id, kind) {
                Ok(Some(bytes)) => {
                    return Ok(Fetched::Found {
                        path,
                        from_cache: false,
                        server: Some(base.clone()),
                        bytes,
                    })
                }
                Ok(None) => {}
                Err(e @ (Error::Io { .. } | Error::Cache { .. })) => return Err(e),
                Err(e) => {
                    let counter = if e.is_refusal() {
                        &self.n.refused
                    } else {
                        &self.n.failed
                    };
                    counter.fetch_add(1, Relaxed);
                    self.say(format_args!("{e}"));
                    if matches!(e, Error::OverBudget { .. }) {
                        return Err(e);
                    }
                    if matches!(
                        e,
                        Error::Unreachable { .. }
                            | Error::TimedOut {
                                what: "no connection" | "no answer",
                                ..
                            }
                    ) {
                        self.mark_down(base, &e);
                    }
                    first_error.get_or_insert(e);
                }
            }
        }
        if let Some(e) = first_error {
            return Err(e);
        }
        cache::write_missing(&dir, &path)?;
        self.n.not_found.fetch_add(1, Relaxed);
        Ok(Fetched::NotFound)
    }

    /// Why `base` is not asked any more, if it is not.
    fn is_down(&self, base: &str) -> Option<String> {
        let down = self.down.lock().unwrap_or_else(|e| e.into_inner());
        down.get(base).cloned()
    }

    fn mark_down(&self, base: &str, e: &Error) {
        let mut down = self.down.lock().unwrap_or_else(|e| e.into_inner());
        down.entry(base.to_owned()).or_insert_with(|| e.to_string());
    }

    fn say(&self, what: std::fmt::Arguments<'_>) {
        if self.cfg.verbose {
            eprintln!("debuginfod: {what}");
        }
    }

    /// What the cache holds at `path`; a bad entry is removed if ours.
    fn look(&self, path: &Path, build_id: &[u8], kind: &Kind) -> Look {
        match cache::entry(&self.cfg.cache, path) {
            Entry::Absent => Look::Nothing,
            Entry::Missing => Look::Missing,
            Entry::Expired => {
                remove_if_ours(path);
                Look::Nothing
            }
            Entry::Present => match cache::open_entry(path, self.max_bytes(kind)) {
                Ok(opened) => match cache::verify(&opened, build_id, kind) {
                    Ok(()) => Look::Hit(opened.meta.len()),
                    Err(found) => {
                        self.say(format_args!(
                            "{}: build-id {} in the cache, not {}: ignored",
                            path.display(),
                            found.as_deref().map_or("none".into(), hex),
                            hex(build_id)
                        ));
                        remove_if_ours(path);
                        Look::Nothing
                    }
                },
                Err(e) if e.kind() == io::ErrorKind::NotFound => Look::Nothing,
                Err(e) => {
                    self.say(format_args!("{}: {e}: ignored", path.display()));
                    remove_if_ours(path);
                    Look::Nothing
                }
            },
        }
    }

    /// Downloads `url` into a temporary file in `dir`, checks it and
    /// publishes it at `path`. `Ok(None)`: 404.
    fn download(
        &self,
        dir: &Path,
        path: &Path,
        url: &str,
        build_id: &[u8],
        kind: &Kind,
    ) -> Result<Option<u64>, Error> {
        let (tmp, mut file) = cache::temp(dir)?;
        let _guard = TempGuard(Some(tmp.clone()));
        let count = http::Count {
            requests: &self.n.requests,
            bytes: &self.n.bytes,
            budget: self.budget,
        };
        let answer = http::get(
            self.agent.get_or_init(|| http::agent(&self.cfg)),
            &self.cfg,
            url,
            self.max_bytes(kind),
            &mut file,
            &count,
        )?;
        let http::Answer::Body { bytes, url: at } = answer else {
            self.say(format_args!("{url}: not found (404)"));
            return Ok(None);
        };
        if kind.is_elf() {
            let found = cache::file_build_id(&file);
            if found.as_deref() != Some(build_id) {
                return Err(Error::WrongBuildId {
                    url: at,
                    found: found.as_deref().map_or("none".into(), hex),
                });
            }
        }
        drop(file);
        for _ in 0..2 {
            match fs::hard_link(&tmp, path) {
                Ok(()) => {
                    self.n.fetched.fetch_add(1, Relaxed);
                    self.say(format_args!(
                        "{at}: {bytes} bytes, cached at {}",
                        path.display()
                    ));
                    return Ok(Some(bytes));
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                    // Another process published first: theirs if it checks out.
                    if let Look::Hit(bytes) = self.look(path, build_id, kind) {
                        return Ok(Some(bytes));
                    }
                    remove_if_ours(path);
                }
                Err(source) => {
                    return Err(Error::Io {
                        path: path.to_owned(),
                        source,
                    })
                }
            }
        }
        Err(Error::Cache {
            path: path.to_owned(),
            why: "an unusable file is in the way and cannot be removed; remove it".into(),
        })
    }
}

/// Removes `path` (never following a link) if it is the effective user's.
fn remove_if_ours(path: &Path) {
    if fs::symlink_metadata(path).is_ok_and(|m| m.uid() == cache::euid()) {
        let _ = fs::remove_file(path);
    }
}

fn check_request(build_id: &[u8], kind: &Kind) -> Result<(), Error> {
    if build_id.is_empty() || build_id.len() > MAX_BUILD_ID {
        return Err(Error::BadBuildId {
            len: build_id.len(),
        });
    }
    if let Kind::Source(p) = kind {
        let bad = |why| {
            Err(Error::BadSourcePath {
                path: p.clone(),
                why,
            })
        };
        if !p.starts_with('/') {
            return bad("not an absolute path (debuginfod serves sources by the absolute path DWARF records)");
        }
        if p.contains('\0') {
            return bad("holds a NUL byte");
        }
        // NAME_MAX: elfutils 0.188 would fail on such a name too.
        if cache::source_name(p).len() > 255 {
            return bad("too long for a cache file name once escaped (over 255 bytes)");
        }
    }
    Ok(())
}
