//! Prints, for a session file, its samples, how many carry a time, its
//! payload bytes per sample, and how evenly the times are spread: the
//! figures behind docs/FORMAT.md's "Sample times".
//!
//! `cargo run --release -p profkit-eventlog --example sample_times -- DIR/session.pkl`

use profkit_eventlog::{Expanded, Expander, SessionReader};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args()
        .nth(1)
        .ok_or("usage: sample_times SESSION.pkl")?;
    let r = SessionReader::open(&path)?;
    let (mut samples, mut timed, mut payload, mut backwards) = (0u64, 0u64, 0u64, 0u64);
    let mut last: std::collections::HashMap<u32, u64> = Default::default();
    for c in r.chunks() {
        let p = r.payload(c);
        payload += p.len() as u64;
        last.clear();
        for e in Expander::new(p) {
            if let Expanded::Sample(s) = e? {
                samples += 1;
                if let Some(t) = s.time {
                    timed += 1;
                    if last.insert(s.tid, t).is_some_and(|prev| prev > t) {
                        backwards += 1;
                    }
                }
            }
        }
    }
    println!(
        "version {} samples {samples} timed {timed} payload {payload} bytes ({:.3} bytes/sample), file {} bytes ({:.3} bytes/sample); a thread's time went back {backwards} times within a chunk",
        r.version(),
        payload as f64 / samples.max(1) as f64,
        r.bytes().len(),
        r.bytes().len() as f64 / samples.max(1) as f64
    );
    Ok(())
}
