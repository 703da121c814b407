//! `cargo bench -p profkit-report --bench parts`: a report on a long
//! rotated session costs its window, not the session. The session: 60
//! parts of 1 minute each (240 rounds of 250 ms, 2,000 samples a round:
//! 8,000 samples/s, 480,000 a part, 28.8 M in all) from
//! `profkit_eventlog::synth::realistic`, each part defining its binaries
//! and threads again as the recorder does. Cases, each the whole report
//! (opening included): the full session; `--time` of one minute in the
//! middle (minute 30: one part read, the others placed from their headers
//! and never opened); one part given alone, for comparison.

use criterion::{criterion_group, criterion_main, Criterion};
use profkit_eventlog::parts::{part_file_name, CURRENT_PART};
use profkit_eventlog::{synth, PartInfo, SessionFooter, SessionHeader, SessionWriter};
use profkit_report::*;

const PARTS: u64 = 60;
const ROUNDS: u64 = 240;
const ROUND_NS: u64 = 250_000_000;
const PER_ROUND: usize = 2_000;
const S0: u64 = 1_000_000_000;
const U0: u64 = 1_795_379_395_000_000_000;

fn write_parts(dir: &std::path::Path) -> u64 {
    let s = synth::realistic(&synth::SynthConfig {
        samples: ROUNDS as usize * PER_ROUND,
        samples_per_round: PER_ROUND,
        ..Default::default()
    });
    let part_ns = ROUNDS * ROUND_NS;
    for n in 1..=PARTS {
        let start = S0 + (n - 1) * part_ns;
        let header = SessionHeader {
            cpus: (0..4).collect(),
            start_monotonic_ns: start,
            start_time_unix_ns: U0 + (n - 1) * part_ns,
            sync_interval_ms: 250,
            part: Some(PartInfo {
                number: n,
                first_round: (n - 1) * ROUNDS,
                session_start_unix_ns: U0,
                session_start_monotonic_ns: S0,
            }),
            ..Default::default()
        };
        let name = if n == PARTS {
            CURRENT_PART.to_owned()
        } else {
            part_file_name(n)
        };
        let mut w = SessionWriter::create(dir.join(name), &header).unwrap();
        let first = (n - 1) * ROUNDS;
        let accounting = synth::encode_rounds(&s, |round, payload| {
            w.append_chunk(first + round, start + (round + 1) * ROUND_NS, payload)
                .map(|_| ())
        })
        .unwrap();
        w.write_footer(&SessionFooter {
            end_time_unix_ns: U0 + n * part_ns,
            end_monotonic_ns: start + part_ns,
            rounds: ROUNDS,
            accounting,
        })
        .unwrap();
    }
    s.len() as u64
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let per_part = write_parts(dir.path());
    let sources = SymbolSources {
        kallsyms: Some(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../../testdata/symbols/kallsyms"),
        ),
        ..Default::default()
    };
    let opts = ReportOptions {
        symbols: true,
        ..Default::default()
    };
    let minute = TimeSpec::parse("1800,1860").unwrap();
    let one_part = dir.path().join(part_file_name(PARTS / 2));
    let mut g = c.benchmark_group("report_60_parts_of_1_minute");
    g.sample_size(10);
    let report = |path: &std::path::Path, time: Option<&TimeSpec>| {
        let s = Session::open_window(path, time).unwrap();
        let o = ReportOptions {
            time: time.cloned(),
            ..opts.clone()
        };
        build_report(std::slice::from_ref(&s), &o, &sources, &NoProgress).unwrap()
    };
    g.bench_function("whole_session", |b| {
        b.iter(|| {
            let r = report(dir.path(), None);
            assert_eq!(r.header.total_samples, per_part * PARTS);
            r
        })
    });
    g.bench_function("time_window_1_minute", |b| {
        b.iter(|| {
            let r = report(dir.path(), Some(&minute));
            assert_eq!(r.header.sessions[0].parts_read, Some(1));
            assert_eq!(r.header.total_samples, per_part);
            r
        })
    });
    g.bench_function("one_part_alone", |b| {
        b.iter(|| {
            let r = report(&one_part, None);
            assert_eq!(r.header.total_samples, per_part);
            r
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
