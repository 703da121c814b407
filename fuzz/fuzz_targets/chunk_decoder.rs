//! A chunk payload: the event decoder, the expander and the fast path.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = profkit_eventlog::decode_events(data, |_| {});
    let _ = profkit_eventlog::for_each_sample(data, |_| {}, |_| {});
    for e in profkit_eventlog::Expander::new(data) {
        if e.is_err() {
            break;
        }
    }
});
