//! The session reader on arbitrary files: open, scan, decode every chunk.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(r) = profkit_eventlog::SessionReader::from_bytes(data, "fuzz") {
        for c in r.chunks() {
            let _ = r.for_each_sample(c, |_| {}, |_| {});
        }
        let _ = r.footer();
        let _ = r.bad_chunks();
    }
});
