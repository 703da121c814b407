//! `profreport --import` on arbitrary bytes: the perf.data checks, the
//! linux-perf-data reader under them, the sync stage, the session written,
//! and reading that session back. Never a panic, an abort or a hang.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(dir) = tempfile::tempdir() else { return };
    let p = dir.path().join("perf.data");
    if std::fs::write(&p, data).is_err() {
        return;
    }
    let session = dir.path().join("s").join("session.pkl");
    if profkit_import::import_perf_data(&p, &session).is_ok() {
        let r = profkit_eventlog::SessionReader::open(&session).expect("the import's own session reads");
        for c in r.chunks() {
            r.for_each_sample(c, |_| {}, |_| {}).expect("the import's own chunks decode");
        }
    }
});
