//! Encode and decode throughput and bytes per sample of the chunk stream on
//! the realistic synthetic stream of `profkit_eventlog::synth` (1 M samples,
//! 4 CPUs, 4000 samples per round, task switch every ~50 samples, binary
//! switch every ~10), hand layout against bincode 1.3.3 (varint) of the
//! `Event` enum.
//!
//! `cargo bench -p profkit-eventlog --bench encode`
//!
//! Sizes are printed first (they do not depend on timing); results are in
//! `docs/FORMAT.md`.

use std::hint::black_box;

use bincode::Options;
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use profkit_eventlog::synth::{self, SynthConfig, SynthSession};
use profkit_eventlog::*;

fn bincode_opts() -> impl Options + Copy {
    bincode::DefaultOptions::new().with_varint_encoding()
}

fn header() -> SessionHeader {
    SessionHeader {
        host: "benchhost".into(),
        kernel_release: "6.1.0-18-amd64".into(),
        event: EventConfigDesc {
            name: "cpu-clock".into(),
            type_: 1,
            frequency: Some(4000),
            ..Default::default()
        },
        cpus: vec![0, 1, 2, 3],
        sync_interval_ms: 250,
        target: "system-wide".into(),
        ..Default::default()
    }
}

/// Encodes every round with `coding`; returns the payloads.
fn encode_all(s: &SynthSession, coding: OffsetCoding) -> Vec<Vec<u8>> {
    // Same markers as `synth::encode_rounds`, with a chosen offset coding.
    let mut out = Vec::new();
    synth::encode_rounds(s, |_, p| {
        out.push(p.to_vec());
        Ok(())
    })
    .unwrap();
    if coding == OffsetCoding::default() {
        return out;
    }
    // Re-encode the same logical events with the other coding.
    out.iter()
        .map(|p| {
            let mut enc = ChunkEncoder::new();
            enc.set_offset_coding(coding);
            decode_events(p, |e| enc.event(&e)).unwrap();
            enc.bytes().to_vec()
        })
        .collect()
}

/// The logical events of each round (what bincode serialises).
fn events_of(payloads: &[Vec<u8>]) -> Vec<Vec<Event>> {
    payloads
        .iter()
        .map(|p| {
            let mut v = Vec::new();
            decode_events(p, |e| v.push(e)).unwrap();
            v
        })
        .collect()
}

fn bincode_encode(events: &[Event], out: &mut Vec<u8>) {
    let opts = bincode_opts();
    for e in events {
        opts.serialize_into(&mut *out, e).unwrap();
    }
}

/// Decodes a bincode chunk and expands it like `for_each_sample`.
fn bincode_expand(mut bytes: &[u8], mut on_sample: impl FnMut(&ExpandedSample)) -> u64 {
    let opts = bincode_opts();
    let mut cur = ExpandedSample::default();
    let mut n = 0;
    while !bytes.is_empty() {
        let e: Event = opts.deserialize_from(&mut bytes).unwrap();
        match e {
            Event::CpuSwitch { cpu } => cur.cpu = cpu,
            Event::TaskSwitch { pid, tid } => {
                cur.pid = pid;
                cur.tid = tid;
            }
            Event::Mode { kernel } => cur.kernel = kernel,
            Event::CookieSwitch { cookie } => cur.cookie = cookie,
            Event::Sample { offset, time: None } => {
                cur.offset = offset;
                n += 1;
                on_sample(&cur);
            }
            _ => {}
        }
    }
    n
}

/// Bytes of a whole session file whose chunk payloads are `payloads`.
fn session_bytes(payloads: &[Vec<u8>], rounds: u64) -> u64 {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.pkl");
    let mut w = SessionWriter::create(&path, &header()).unwrap();
    for (i, p) in payloads.iter().enumerate() {
        w.append_chunk(i as u64, i as u64, p).unwrap();
    }
    let accounting = (0..4)
        .map(|cpu| CpuAccounting {
            cpu,
            ..Default::default()
        })
        .collect();
    w.write_footer(&SessionFooter {
        rounds,
        accounting,
        ..Default::default()
    })
    .unwrap();
    w.len()
}

fn report_sizes(s: &SynthSession) {
    let n = s.len() as f64;
    eprintln!("stream: {} samples in {} rounds", s.len(), s.rounds.len());
    for coding in [
        OffsetCoding::Absolute,
        OffsetCoding::Delta,
        OffsetCoding::Adaptive,
    ] {
        let ps = encode_all(s, coding);
        let payload: usize = ps.iter().map(Vec::len).sum();
        let file = session_bytes(&ps, s.rounds.len() as u64);
        eprintln!(
            "hand {coding:?}: payload {:.3} B/sample, session file {:.3} B/sample ({file} bytes)",
            payload as f64 / n,
            file as f64 / n
        );
    }
    let ps = encode_all(s, OffsetCoding::default());
    let evs = events_of(&ps);
    let bps: Vec<Vec<u8>> = evs
        .iter()
        .map(|e| {
            let mut b = Vec::new();
            bincode_encode(e, &mut b);
            b
        })
        .collect();
    let payload: usize = bps.iter().map(Vec::len).sum();
    let file = session_bytes(&bps, s.rounds.len() as u64);
    eprintln!(
        "bincode 1.3.3 varint Event: payload {:.3} B/sample, session file {:.3} B/sample ({file} bytes)",
        payload as f64 / n,
        file as f64 / n
    );
    // Smaller rounds cost more: every chunk restates CPU, task, mode and
    // spells out each cookie once.
    for per_round in [400, 40_000] {
        let small = synth::realistic(&SynthConfig {
            samples_per_round: per_round,
            ..SynthConfig::default()
        });
        let ps = encode_all(&small, OffsetCoding::default());
        let file = session_bytes(&ps, small.rounds.len() as u64);
        eprintln!(
            "hand Adaptive, {per_round} samples per round: session file {:.3} B/sample",
            file as f64 / n
        );
    }
    // Shape check: how often state changes.
    let (mut tasks, mut cookies) = (0usize, 0usize);
    for e in evs.iter().flatten() {
        match e {
            Event::TaskSwitch { .. } => tasks += 1,
            Event::CookieSwitch { .. } => cookies += 1,
            _ => {}
        }
    }
    eprintln!(
        "samples per task switch {:.1}, per cookie switch {:.1}",
        n / tasks as f64,
        n / cookies as f64
    );
}

fn benches(c: &mut Criterion) {
    let s = synth::realistic(&SynthConfig::default());
    report_sizes(&s);
    let n = s.len() as u64;
    let ps = encode_all(&s, OffsetCoding::default());
    let evs = events_of(&ps);
    let bps: Vec<Vec<u8>> = evs
        .iter()
        .map(|e| {
            let mut b = Vec::new();
            bincode_encode(e, &mut b);
            b
        })
        .collect();

    let mut g = c.benchmark_group("encode");
    g.throughput(Throughput::Elements(n));
    g.sample_size(20);
    let mut enc = ChunkEncoder::with_capacity(64 << 10);
    g.bench_function("hand_sample", |b| {
        b.iter(|| {
            let mut bytes = 0;
            for round in &s.rounds {
                enc.clear();
                for x in round {
                    enc.sample(x.cpu, x.pid, x.tid, x.kernel, x.cookie, x.offset);
                }
                bytes += black_box(enc.bytes()).len();
            }
            bytes
        })
    });
    let mut out = Vec::with_capacity(64 << 10);
    g.bench_function("bincode_events", |b| {
        b.iter(|| {
            let mut bytes = 0;
            for round in &evs {
                out.clear();
                bincode_encode(round, &mut out);
                bytes += black_box(&out).len();
            }
            bytes
        })
    });
    g.finish();

    let mut g = c.benchmark_group("decode");
    g.throughput(Throughput::Elements(n));
    g.sample_size(20);
    g.bench_function("hand_for_each_sample", |b| {
        b.iter(|| {
            let mut acc = 0u64;
            for p in &ps {
                for_each_sample(
                    p,
                    |x| acc = acc.wrapping_add(x.offset ^ x.cookie ^ u64::from(x.tid)),
                    |_| {},
                )
                .unwrap();
            }
            acc
        })
    });
    g.bench_function("hand_expander", |b| {
        b.iter(|| {
            let mut acc = 0u64;
            for p in &ps {
                for e in Expander::new(p) {
                    if let Expanded::Sample(x) = e.unwrap() {
                        acc = acc.wrapping_add(x.offset ^ x.cookie ^ u64::from(x.tid));
                    }
                }
            }
            acc
        })
    });
    g.bench_function("hand_decode_events", |b| {
        b.iter(|| {
            let mut k = 0usize;
            for p in &ps {
                decode_events(p, |e| k += matches!(e, Event::Sample { .. }) as usize).unwrap();
            }
            k
        })
    });
    g.bench_function("bincode_expand", |b| {
        b.iter(|| {
            let mut acc = 0u64;
            for p in &bps {
                bincode_expand(p, |x| {
                    acc = acc.wrapping_add(x.offset ^ x.cookie ^ u64::from(x.tid))
                });
            }
            acc
        })
    });
    g.finish();

    // The reader's scan (CRC of every frame) on the whole session.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("session.pkl");
    let mut w = SessionWriter::create(&path, &header()).unwrap();
    synth::write_session(&mut w, &s).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let mut g = c.benchmark_group("reader");
    g.throughput(Throughput::Bytes(bytes.len() as u64));
    g.sample_size(20);
    g.bench_function("scan_session", |b| {
        b.iter_batched(
            || bytes.clone(),
            |data| {
                SessionReader::from_bytes(data, "bench")
                    .unwrap()
                    .chunks()
                    .len()
            },
            BatchSize::LargeInput,
        )
    });
    g.finish();
}

criterion_group!(encode, benches);
criterion_main!(encode);
