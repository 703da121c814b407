//! `cargo bench -p profkit-report --bench aggregate`: a whole report over
//! `profkit_eventlog::synth::realistic` (1 M samples on 4 CPUs, 250 chunks,
//! 16 processes, binaries that do not exist here, so symbolization costs
//! only the lookups): the image summary, the symbol summary, and the
//! symbol summary split per CPU and per thread.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use profkit_eventlog::{synth, SessionHeader, SessionWriter};
use profkit_report::*;

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(SESSION_FILE);
    let s = synth::realistic(&synth::SynthConfig::default());
    let header = SessionHeader {
        cpus: (0..4).collect(),
        ..Default::default()
    };
    let mut w = SessionWriter::create(&path, &header).unwrap();
    synth::write_session(&mut w, &s).unwrap();
    drop(w);
    let session = Session::open(dir.path()).unwrap();
    // A tiny kallsyms, so the kernel's share is lookups, not reading 5 MB.
    let sources = SymbolSources {
        kallsyms: Some(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../testdata/symbols/kallsyms"),
        ),
        ..Default::default()
    };
    let mut g = c.benchmark_group("report_1M_samples");
    g.throughput(Throughput::Elements(s.len() as u64));
    g.sample_size(20);
    let cases = [
        ("images", ReportOptions::default()),
        (
            "symbols",
            ReportOptions {
                symbols: true,
                ..Default::default()
            },
        ),
        (
            "symbols_cpu_thread",
            ReportOptions {
                symbols: true,
                separate: Separate::parse("cpu,thread").unwrap(),
                ..Default::default()
            },
        ),
    ];
    for (name, opts) in cases {
        g.bench_function(name, |b| {
            b.iter(|| {
                let r = build_report(std::slice::from_ref(&session), &opts, &sources, &NoProgress)
                    .unwrap();
                assert_eq!(r.header.total_samples, s.len() as u64);
                r
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
