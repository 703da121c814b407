//! `--format firefox`: the Firefox Profiler's processed profile format (JSON), for https://profiler.firefox.com, built on the stream ([`super::stream`] with a sink of its own).

use std::io::Write;

use super::StreamSummary;

/// Streams `sessions` as the Firefox Profiler's processed profile format (JSON), for https://profiler.firefox.com, to `out`.
///
/// # Errors
/// As [`super::stream`].
pub fn write_firefox(
    sessions: &[crate::Session],
    opts: &crate::ReportOptions,
    sources: &crate::SymbolSources,
    progress: &dyn crate::Progress,
    out: &mut dyn Write,
) -> crate::Result<StreamSummary> {
    let _ = (sessions, opts, sources, progress, out);
    Err(crate::Error::Conflict(
        "--format firefox is not built yet".to_owned(),
    ))
}
