//! JIT code from the perf map fixture, and anon ranges without one.

use profkit_symbols::{BinaryRequest, SymbolOrigin, SymbolizerOptions};

use crate::util::*;

fn opts() -> SymbolizerOptions {
    SymbolizerOptions {
        perf_map_dir: Some(testdata("")),
        ..isolated()
    }
}

#[test]
fn jit_addresses_resolve_from_the_sessions_perf_map() {
    let s = symbolizer(opts());
    let offsets = [
        0x7f3c_0000_1000,
        0x7f3c_0000_107f,
        0x7f3c_0000_1080,
        0x7f3c_0000_2010,
        0x7f3c_0000_3000,
    ];
    let r = s.symbolize(
        &BinaryRequest::anon(4242, 0x7f3c_0000_0000, 0x10000),
        &offsets,
    );
    let names: Vec<_> = (0..offsets.len()).map(|i| r.name_at(i)).collect();
    assert_eq!(
        names,
        [
            Some("LazyCompile:*fib /app/fib.js:3"),
            Some("LazyCompile:*fib /app/fib.js:3"),
            Some("Builtin:ArgumentsAdaptorTrampoline"),
            Some("ns::work(int)"),
            Some("anon (tgid:4242 range:0x7f3c00000000-0x7f3c00010000)"),
        ]
    );
    assert_eq!(r.symbol_at(0).unwrap().origin, SymbolOrigin::PerfMap);
    assert_eq!(r.symbol_at(0).unwrap().size, 0x80);
    assert_eq!(r.symbol_at(4).unwrap().origin, SymbolOrigin::Anon);
    assert_eq!(r.offsets[0].address, Some(0x7f3c_0000_1000));
    assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
    assert!(
        r.warnings[0].contains("1 malformed lines skipped"),
        "{:?}",
        r.warnings
    );
}

#[test]
fn anon_without_perf_map_is_an_anon_range_with_the_pid() {
    let s = symbolizer(opts());
    let r = s.symbolize(&BinaryRequest::anon(31337, 0x5000, 0), &[0x5010, 0x5100]);
    assert_eq!(r.name_at(0), Some("anon (tgid:31337 range:0x5010-0x5101)"));
    assert_eq!(r.offsets[0].symbol, r.offsets[1].symbol);
    assert!(r.warnings.is_empty());
}
