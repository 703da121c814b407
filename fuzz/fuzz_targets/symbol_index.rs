//! A symbol index entry (issue 32), as a report reads it from a cache a
//! local user may have written into: decoded, looked up, its names read.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let probes: Vec<u64> = data
        .chunks(8)
        .take(64)
        .map(|c| c.iter().fold(0u64, |a, &b| a << 8 | b as u64))
        .collect();
    profkit_symbols::fuzzing::symbol_index(data, &probes);
});
