//! [`Client::fetch_many`]: many files, a few transfers at once.

use crate::{Client, Error, Fetched, Kind};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Mutex;

/// Transfers at once in [`Client::fetch_many`], at most.
pub const MAX_PARALLEL: usize = 8;

/// Where a [`Client::fetch_many`] stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    /// Wants finished (found, not found or failed).
    pub done: usize,
    /// Wants in all.
    pub total: usize,
    /// Bytes of the files found so far (cached ones included).
    pub bytes: u64,
}

impl Client {
    /// [`Client::fetch`] for each want, answers in the same order, on at
    /// most [`MAX_PARALLEL`] worker threads (`std::thread::scope`: the work
    /// waits on the network), or on the calling thread alone when there
    /// is no server (cache lookups only). `progress` is called after each want
    /// finishes, in order of `done` (the last call has `done == total`),
    /// from the worker that finished it.
    pub fn fetch_many(
        &self,
        wants: &[(Vec<u8>, Kind)],
        progress: &(dyn Fn(Progress) + Sync),
    ) -> Vec<Result<Fetched, Error>> {
        let total = wants.len();
        let next = AtomicUsize::new(0);
        let answers: Vec<Mutex<Option<Result<Fetched, Error>>>> =
            wants.iter().map(|_| Mutex::new(None)).collect();
        // (done, bytes), held while `progress` runs so calls come in order.
        let state = Mutex::new((0usize, 0u64));
        let work = || loop {
            let i = next.fetch_add(1, Relaxed);
            let Some((id, kind)) = wants.get(i) else {
                break;
            };
            let answer = self.fetch(id, kind);
            let got = match &answer {
                Ok(Fetched::Found { bytes, .. }) => *bytes,
                _ => 0,
            };
            *answers[i].lock().unwrap_or_else(|p| p.into_inner()) = Some(answer);
            let mut s = state.lock().unwrap_or_else(|p| p.into_inner());
            s.0 += 1;
            s.1 += got;
            progress(Progress {
                done: s.0,
                total,
                bytes: s.1,
            });
        };
        // With no server the wants are only looked up in the cache: no
        // waiting to overlap, and each thread would cost its own malloc
        // arena (a warm report's RSS grew by one per binary without
        // symbols).
        let workers = if self.cfg.urls.is_empty() {
            total.min(1)
        } else {
            total.min(MAX_PARALLEL)
        };
        std::thread::scope(|scope| {
            for _ in 1..workers {
                scope.spawn(work);
            }
            if workers > 0 {
                work();
            }
        });
        answers
            .into_iter()
            .map(|m| {
                m.into_inner()
                    .unwrap_or_else(|p| p.into_inner())
                    .unwrap_or(Ok(Fetched::NotFound))
            })
            .collect()
    }
}
