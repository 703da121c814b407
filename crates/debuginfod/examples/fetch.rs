//! Fetches the debug file of every build-id (hex, one per line) on standard
//! input, as configured by the `DEBUGINFOD_*` variables, all at once
//! (`Client::fetch_many`) or with `--one-by-one` one after another (what a
//! client without parallel fetches does), and prints the time taken and
//! the client's counters. `scripts/bench/debuginfod.sh` times it.
//!
//! ```text
//! DEBUGINFOD_URLS=http://127.0.0.1:8002 cargo run --release -p profkit-debuginfod \
//!     --example fetch [--one-by-one] < ids
//! ```

use std::io::BufRead;
use std::time::Instant;

use profkit_debuginfod::{Client, Config, Kind};

fn unhex(s: &str) -> Option<Vec<u8>> {
    let s = s.trim();
    if s.len() % 2 != 0 || s.is_empty() {
        return None;
    }
    (0..s.len() / 2)
        .map(|i| u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok())
        .collect()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let one_by_one = std::env::args().any(|a| a == "--one-by-one");
    let client = Client::new(Config::from_env()?);
    let wants: Vec<(Vec<u8>, Kind)> = std::io::stdin()
        .lock()
        .lines()
        .map_while(Result::ok)
        .filter_map(|l| unhex(&l))
        .map(|id| (id, Kind::Debuginfo))
        .collect();
    let t = Instant::now();
    let answers = if one_by_one {
        wants.iter().map(|(id, k)| client.fetch(id, k)).collect()
    } else {
        client.fetch_many(&wants, &|_| {})
    };
    let took = t.elapsed();
    let errors = answers.iter().filter(|a| a.is_err()).count();
    let st = client.stats();
    println!(
        "{} build-ids in {:.3} s: {} fetched ({} bytes), {} from the cache, {} not found, {} errors",
        wants.len(),
        took.as_secs_f64(),
        st.fetched,
        st.bytes,
        st.cache_hits,
        st.not_found,
        errors
    );
    Ok(())
}
