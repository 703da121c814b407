//! `--format speedscope`: speedscope's file format (JSON), for https://www.speedscope.app, built on the stream ([`super::stream`] with a sink of its own).

use std::io::Write;

use super::StreamSummary;

/// Streams `sessions` as speedscope's file format (JSON), for https://www.speedscope.app, to `out`.
///
/// # Errors
/// As [`super::stream`].
pub fn write_speedscope(
    sessions: &[crate::Session],
    opts: &crate::ReportOptions,
    sources: &crate::SymbolSources,
    progress: &dyn crate::Progress,
    out: &mut dyn Write,
) -> crate::Result<StreamSummary> {
    let _ = (sessions, opts, sources, progress, out);
    Err(crate::Error::Conflict(
        "--format speedscope is not built yet".to_owned(),
    ))
}
