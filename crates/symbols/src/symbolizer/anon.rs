//! Anonymous memory: a process's perf map (`perf-PID.map`, read once per
//! process), else the mapping's range as a stand-in name.

use std::path::Path;
use std::sync::{Arc, PoisonError};

use super::builder::{Builder, SymKey};
use super::Symbolizer;
use crate::error::Error;
use crate::perfmap::PerfMap;
use crate::types::{BinaryRequest, BinaryResult, SymbolOrigin};

pub(super) struct PerfMapState {
    map: Option<PerfMap>,
    warning: Option<String>,
}

impl Symbolizer {
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

    pub(super) fn symbolize_anon(
        &self,
        mut b: Builder,
        req: &BinaryRequest,
        offsets: &[u64],
    ) -> BinaryResult {
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
