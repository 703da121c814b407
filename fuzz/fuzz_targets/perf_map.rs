//! JIT perf maps and kallsyms texts.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let probes: Vec<u64> = data
        .chunks(8)
        .map(|c| c.iter().fold(0u64, |a, &b| a << 8 | b as u64))
        .collect();
    profkit_symbols::fuzzing::perf_map(&text, &probes);
    profkit_symbols::fuzzing::kallsyms(&text);
});
