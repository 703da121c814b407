//! `profreport --import` on arbitrary bytes: the perf.data checks, the
//! linux-perf-data reader under them, the sync stage, the session written,
//! and reading that session back. Never a panic, an abort or a hang.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // linux-perf-data's parsers panic on some malformed records; the import
    // catches those (a bad record, not a crash). libfuzzer-sys's panic hook
    // would abort on them even when caught: a quiet hook instead, so that
    // only a panic that escapes the import fails the run.
    static QUIET: std::sync::Once = std::sync::Once::new();
    QUIET.call_once(|| std::panic::set_hook(Box::new(|_| {})));
    let Ok(dir) = tempfile::tempdir() else { return };
    let p = dir.path().join("perf.data");
    if std::fs::write(&p, data).is_err() {
        return;
    }
    let session = dir.path().join("s").join("session.pkl");
    if profkit_import::import_perf_data(&p, &session).is_ok() {
        let r = profkit_eventlog::SessionReader::open(&session)
            .expect("the import's own session reads");
        for c in r.chunks() {
            r.for_each_sample(c, |_| {}, |_| {})
                .expect("the import's own chunks decode");
        }
    }
});
