//! Helpers shared by the tests.

use std::path::{Path, PathBuf};

use profkit_eventlog::synth::{self, SynthConfig, SynthSession};
use profkit_eventlog::*;

pub fn header() -> SessionHeader {
    SessionHeader {
        host: "testhost".into(),
        kernel_release: "6.1.0".into(),
        event: EventConfigDesc {
            name: "cpu-clock".into(),
            type_: 1,
            config: 0,
            frequency: Some(4000),
            period: None,
            exclude_user: false,
            exclude_kernel: false,
            callchain: false,
            user_stack: 0,
            off_cpu: false,
            sample_times: false,
            jit_code: false,
        },
        cpus: vec![0, 1, 2, 3],
        start_time_unix_ns: 1_700_000_000_000_000_000,
        start_monotonic_ns: 42,
        sync_interval_ms: 100,
        target: "system-wide".into(),
        cgroups: Default::default(),
        part: None,
    }
}

pub fn small_synth(rounds: usize, per_round: usize, seed: u64) -> SynthSession {
    synth::realistic(&SynthConfig {
        samples: rounds * per_round,
        samples_per_round: per_round,
        seed,
        ..SynthConfig::default()
    })
}

pub fn session_path(dir: &Path) -> PathBuf {
    dir.join("session.pkl")
}

/// Every sample of every valid chunk, in order, checking that decoding
/// never fails on a chunk whose CRC checked.
pub fn read_samples<B: AsRef<[u8]>>(r: &SessionReader<B>) -> Vec<Vec<ExpandedSample>> {
    r.chunks()
        .iter()
        .map(|c| {
            let mut v = Vec::new();
            r.for_each_sample(c, |s| v.push(*s), |_| {}).unwrap();
            v
        })
        .collect()
}

/// Encoded payloads of a synthetic session, one per round.
pub fn payloads(s: &SynthSession) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    synth::encode_rounds(s, |_, p| {
        out.push(p.to_vec());
        Ok(())
    })
    .unwrap();
    out
}
