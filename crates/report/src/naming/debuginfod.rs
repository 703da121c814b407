//! Debug files from debuginfod servers, for the binaries the local files
//! cannot name.
//!
//! The symbolizer looks in the client's cache itself
//! ([`SymbolizerOptions::debuginfod_cache`](profkit_symbols::SymbolizerOptions)),
//! so a warm report names everything on its first pass and asks no server.
//! What the first pass left unnamed, with a build-id the recorder tied to its
//! file, is fetched here, all binaries at once in parallel
//! ([`Client::fetch_many`]), and symbolized again:
//! - a stripped binary ([`BinaryResult::no_symbols`]): its debug file;
//! - with `--debug-info`, a binary without DWARF: its debug file;
//! - a binary gone from its recorded path, or changed there: the executable
//!   of that build-id (checked as any file found by build-id is: its size),
//!   and its debug file.
//!
//! A binary whose build-id is only a claim ([`BinaryRequest::unverified`]) is
//! never looked up: no file found by build-id may name it.
//!
//! What was done is kept in [`DebuginfodOutcome`] for the report's header and
//! its line about binaries without symbols.

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use profkit_debuginfod::{Client, Fetched, Kind};
use profkit_eventlog::Cookie;
use profkit_symbols::{BinaryKind, BinaryRequest, BinaryResult};
use serde::Serialize;

use crate::naming::symbolize::Want;
use crate::Progress;

/// A debuginfod client a report fetches with, and what it did.
#[derive(Clone)]
pub struct Debuginfod {
    client: Arc<Client>,
    outcome: Arc<Mutex<DebuginfodOutcome>>,
}

impl std::fmt::Debug for Debuginfod {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Debuginfod")
            .field("urls", &self.client.config().urls)
            .field("cache", &self.client.config().cache)
            .field("offline", &self.client.config().offline)
            .finish()
    }
}

/// Two handles are equal when they are the same client.
impl PartialEq for Debuginfod {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.client, &other.client)
    }
}

impl Eq for Debuginfod {}

/// What a report's debuginfod client did.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct DebuginfodOutcome {
    /// Servers configured (`DEBUGINFOD_URLS`).
    pub servers: usize,
    /// Whether servers could be asked (not `--offline`, some URL).
    pub network: bool,
    /// Binaries named (or given lines) by a file of the client's cache,
    /// fetched by this report or before.
    pub named: usize,
    /// Binaries looked up on the servers that no server has.
    pub not_found: usize,
    /// Files downloaded by this report.
    pub fetched: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Requests sent to servers.
    pub requests: u64,
    /// Answers refused: another build-id, over the size cap, a redirect
    /// elsewhere than http(s).
    pub refused: u64,
    /// Wall-clock seconds spent fetching.
    pub seconds: f64,
    /// The first few errors (a server down, a timeout), each once.
    pub errors: Vec<String>,
}

/// Errors kept in [`DebuginfodOutcome::errors`].
const MAX_ERRORS: usize = 4;

/// Binaries a report looks up on the servers at most: a local user who
/// runs ten thousand stripped programs of random build-ids does not make
/// root's report send ten thousand requests. Those with the most distinct
/// sampled offsets go first.
pub const MAX_LOOKUPS: usize = 1024;

impl Debuginfod {
    /// A report's handle on `client`.
    pub fn new(client: Client) -> Debuginfod {
        let outcome = DebuginfodOutcome {
            servers: client.config().urls.len(),
            network: client.config().network(),
            ..DebuginfodOutcome::default()
        };
        Debuginfod {
            client: Arc::new(client),
            outcome: Arc::new(Mutex::new(outcome)),
        }
    }

    /// The client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The client's cache directory.
    pub fn cache(&self) -> &Path {
        &self.client.config().cache
    }

    /// What was done so far.
    pub fn outcome(&self) -> DebuginfodOutcome {
        self.outcome
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn update(&self, f: impl FnOnce(&mut DebuginfodOutcome)) {
        f(&mut self.outcome.lock().unwrap_or_else(PoisonError::into_inner));
    }
}

/// What a binary's first answer lacks that a debuginfod server may have.
fn wants(req: &BinaryRequest, r: &BinaryResult, debug_info: bool) -> Vec<Kind> {
    if req.kind != BinaryKind::Elf || req.unverified {
        return Vec::new();
    }
    if req.build_id.as_ref().is_none_or(|id| id.is_empty()) {
        return Vec::new();
    }
    if r.path_used.is_none() {
        return vec![Kind::Executable, Kind::Debuginfo];
    }
    let no_dwarf = debug_info
        && r.debug_file_used.is_none()
        && r.warnings.iter().any(|w| w.starts_with("no DWARF for "));
    if r.no_symbols.is_some() || no_dwarf {
        return vec![Kind::Debuginfo];
    }
    Vec::new()
}

/// Whether `r` was named from a file of the cache at `cache`.
fn from_cache(r: &BinaryResult, cache: &Path) -> bool {
    [&r.debug_file_used, &r.path_used]
        .into_iter()
        .flatten()
        .any(|p| p.starts_with(cache))
}

/// Fetches what the first answers `done` of `requests` lack, and puts the
/// answers of `again` (the symbolizer run on the binaries something was
/// fetched for) in their place.
pub(crate) fn complete<'w, T>(
    d: &Debuginfod,
    requests: &[Want<'w>],
    done: &mut [(Cookie, T)],
    result_of: impl Fn(&T) -> &BinaryResult,
    debug_info: bool,
    progress: &dyn Progress,
    again: impl FnOnce(Vec<Want<'w>>) -> crate::Result<Vec<(Cookie, T)>>,
) -> crate::Result<()> {
    let cache = d.cache().to_owned();
    let by_cookie: std::collections::HashMap<Cookie, &Want<'w>> =
        requests.iter().map(|r| (r.0, r)).collect();
    let mut named = 0;
    // (distinct offsets, cookie, build-id, what is wanted)
    let mut candidates = Vec::new();
    for (cookie, t) in done.iter() {
        let r = result_of(t);
        if from_cache(r, &cache) {
            named += 1;
            continue;
        }
        let Some((_, req, offsets)) = by_cookie.get(cookie).copied() else {
            continue;
        };
        let kinds = wants(req, r, debug_info);
        if !kinds.is_empty() {
            let id = req.build_id.clone().unwrap_or_default();
            candidates.push((offsets.len(), *cookie, id, kinds));
        }
    }
    candidates.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let over = candidates.len().saturating_sub(MAX_LOOKUPS);
    candidates.truncate(MAX_LOOKUPS);
    let mut asked: Vec<(Vec<u8>, Kind)> = Vec::new();
    let mut of_cookie: Vec<(Cookie, std::ops::Range<usize>)> = Vec::new();
    for (_, cookie, id, kinds) in candidates {
        let start = asked.len();
        asked.extend(kinds.into_iter().map(|k| (id.clone(), k)));
        of_cookie.push((cookie, start..asked.len()));
    }
    d.update(|o| {
        o.named += named;
        if over > 0 {
            o.errors.push(format!(
                "{over} more binaries without symbols were not looked up (at most \
                 {MAX_LOOKUPS} per report)"
            ));
        }
    });
    if asked.is_empty() {
        return Ok(());
    }
    let started = Instant::now();
    let before = d.client.stats();
    let network = d.client.config().network();
    if network {
        progress.start("fetching debug files (debuginfod)", asked.len() as u64);
    }
    let last = std::sync::atomic::AtomicUsize::new(0);
    let answers = d.client.fetch_many(&asked, &|p| {
        let prev = last.fetch_max(p.done, std::sync::atomic::Ordering::Relaxed);
        if network && p.done > prev {
            progress.advance((p.done - prev) as u64);
        }
    });
    let after = d.client.stats();
    let mut redo = Vec::new();
    let mut not_found = 0;
    let mut errors = Vec::new();
    for (cookie, range) in of_cookie {
        let mut found = false;
        let mut missing = true;
        for a in &answers[range] {
            match a {
                Ok(Fetched::Found { .. }) => {
                    found = true;
                    missing = false;
                }
                Ok(Fetched::NotFound) => {}
                Err(e) => {
                    missing = false;
                    let e = e.to_string();
                    if errors.len() < MAX_ERRORS && !errors.contains(&e) {
                        errors.push(e);
                    }
                }
            }
        }
        if found {
            if let Some(r) = by_cookie.get(&cookie) {
                redo.push((*r).clone());
            }
        } else if missing && network {
            not_found += 1;
        }
    }
    let mut named = 0;
    if !redo.is_empty() {
        for (cookie, t) in again(redo)? {
            if let Some(slot) = done.iter_mut().find(|(c, _)| *c == cookie) {
                if from_cache(result_of(&t), &cache) {
                    named += 1;
                }
                slot.1 = t;
            }
        }
    }
    d.update(|o| {
        o.named += named;
        o.not_found += not_found;
        o.fetched += after.fetched.saturating_sub(before.fetched);
        o.bytes += after.bytes.saturating_sub(before.bytes);
        o.requests += after.requests.saturating_sub(before.requests);
        o.refused += after.refused.saturating_sub(before.refused);
        if after.requests > before.requests {
            o.seconds += started.elapsed().as_secs_f64();
        }
        for e in errors {
            if o.errors.len() < MAX_ERRORS && !o.errors.contains(&e) {
                o.errors.push(e);
            }
        }
    });
    Ok(())
}

/// The report's line about what debuginfod fetched (cold reports only: a
/// warm one asked nothing), with its first error; the other errors follow,
/// one line each (shown with `-v`).
pub(crate) fn fetch_lines(o: &DebuginfodOutcome) -> Vec<String> {
    if o.requests == 0 && o.errors.is_empty() {
        return Vec::new();
    }
    let mut line = if o.fetched > 0 {
        format!(
            "debuginfod: fetched {} file{} ({}) in {} for {} binar{}",
            o.fetched,
            if o.fetched == 1 { "" } else { "s" },
            mb(o.bytes),
            if o.seconds < 1.0 {
                format!("{} ms", ((o.seconds * 1000.0).round() as u64).max(1))
            } else {
                format!("{:.1} s", o.seconds)
            },
            o.named,
            if o.named == 1 { "y" } else { "ies" },
        )
    } else {
        format!(
            "debuginfod: nothing fetched ({} request{})",
            o.requests,
            if o.requests == 1 { "" } else { "s" }
        )
    };
    if o.not_found > 0 {
        line.push_str(&format!("; {} not on any server", o.not_found));
    }
    if o.refused > 0 {
        line.push_str(&format!("; {} answers refused", o.refused));
    }
    if let Some(first) = o.errors.first() {
        line.push_str(&format!("; {first}"));
        if o.errors.len() > 1 {
            line.push_str(&format!(" (and {} more: -v)", o.errors.len() - 1));
        }
    }
    let mut out = vec![line];
    out.extend(o.errors.iter().skip(1).map(|e| format!("debuginfod: {e}")));
    out
}

/// `bytes` in kB under a megabyte, else in MB with one decimal.
fn mb(bytes: u64) -> String {
    if bytes < 1_000_000 {
        format!("{} kB", bytes.div_ceil(1000))
    } else {
        format!("{:.1} MB", bytes as f64 / 1e6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unnamed() -> BinaryResult {
        BinaryResult {
            path_used: Some("/bin/x".into()),
            debug_file_used: None,
            warnings: Vec::new(),
            no_symbols: Some("no .symtab".into()),
            symbols: Vec::new(),
            offsets: Vec::new(),
        }
    }

    fn client(cache: &Path, offline: bool) -> Debuginfod {
        let cfg = profkit_debuginfod::Config {
            urls: vec!["http://127.0.0.1:9".into()],
            timeout: std::time::Duration::from_secs(1),
            max_size: None,
            max_time: None,
            cache: cache.to_owned(),
            verbose: false,
            offline,
        };
        Debuginfod::new(Client::new(cfg))
    }

    /// A cold report's line: what was fetched, what no server has, what
    /// was refused, the first error (the others on lines of their own); a
    /// warm report's: none.
    #[test]
    fn the_fetch_line_says_what_was_done_and_the_first_error() {
        assert!(fetch_lines(&DebuginfodOutcome::default()).is_empty());
        let cold = DebuginfodOutcome {
            named: 3,
            fetched: 4,
            bytes: 25_400_000,
            requests: 6,
            not_found: 2,
            seconds: 0.043,
            ..Default::default()
        };
        assert_eq!(
            fetch_lines(&cold),
            ["debuginfod: fetched 4 files (25.4 MB) in 43 ms for 3 binaries; 2 not on any server"]
        );
        let failed = DebuginfodOutcome {
            requests: 1,
            refused: 1,
            errors: vec![
                "https://x/: invalid peer certificate".into(),
                "second".into(),
            ],
            ..Default::default()
        };
        assert_eq!(
            fetch_lines(&failed),
            [
                "debuginfod: nothing fetched (1 request); 1 answers refused; \
                 https://x/: invalid peer certificate (and 1 more: -v)",
                "debuginfod: second"
            ]
        );
    }

    /// What is looked up: stripped ELF binaries with a build-id the
    /// recorder tied to a file, at most MAX_LOOKUPS of them, the most
    /// sampled first; never a claim, a build-id-less binary or a named one.
    #[test]
    fn lookups_are_bounded_and_skip_claims() {
        let dir = tempfile::tempdir().unwrap();
        let d = client(dir.path(), true);
        let n = MAX_LOOKUPS + 76;
        let mut requests = Vec::new();
        let mut done = Vec::new();
        for i in 0..n {
            let id = (i as u32 + 1).to_le_bytes().repeat(5);
            let req = BinaryRequest::elf(format!("/bin/x{i}")).with_build_id(id);
            requests.push((i as Cookie, req, vec![0; i % 7 + 1].into()));
            done.push((i as Cookie, unnamed()));
        }
        // A claim, a binary without build-id, a named one: not looked up.
        let c = n as Cookie;
        requests.push((
            c,
            BinaryRequest::elf("/bin/claim")
                .with_build_id(vec![7; 20])
                .unverified(),
            vec![0].into(),
        ));
        requests.push((c + 1, BinaryRequest::elf("/bin/noid"), vec![0].into()));
        requests.push((
            c + 2,
            BinaryRequest::elf("/bin/named").with_build_id(vec![8; 20]),
            vec![0].into(),
        ));
        done.push((c, unnamed()));
        done.push((c + 1, unnamed()));
        done.push((
            c + 2,
            BinaryResult {
                no_symbols: None,
                ..unnamed()
            },
        ));
        let mut redone = false;
        complete(
            &d,
            &requests,
            &mut done,
            |r| r,
            false,
            &crate::NoProgress,
            |_| {
                redone = true;
                Ok(Vec::new())
            },
        )
        .unwrap();
        assert!(!redone, "nothing was found, nothing is symbolized again");
        let st = d.client().stats();
        assert_eq!(st.not_found, MAX_LOOKUPS as u64);
        assert_eq!(st.requests, 0, "offline");
        let o = d.outcome();
        assert!(
            o.errors.iter().any(|e| e.starts_with("76 more binaries")),
            "{:?}",
            o.errors
        );
        assert_eq!((o.network, o.not_found), (false, 0));

        // The claim, the build-id-less and the named binary alone: one
        // lookup, for the one plain stripped binary among them.
        let d = client(dir.path(), true);
        let tail = requests.len() - 4;
        let mut done: Vec<_> = done.split_off(tail);
        complete(
            &d,
            &requests[tail..],
            &mut done,
            |r| r,
            false,
            &crate::NoProgress,
            |_| Ok(Vec::new()),
        )
        .unwrap();
        assert_eq!(d.client().stats().not_found, 1);
    }
}
