//! profkit-fleet against scripted servers that lie and against a real
//! ClickHouse (testsupport's `ClickHouseServer`: skipped where it is not
//! installed, a failure under PROFKIT_REQUIRE_PERF=1).

mod docs;
mod hostile;
mod real;
mod server;

use profkit_fleet::{PartRows, SampleRow};

/// A part of `host`/`session`/`part` starting at `start_s` (seconds),
/// 10 s long, with `rows`.
pub fn part(host: &str, session: &str, part: u32, start_s: u64, rows: Vec<SampleRow>) -> PartRows {
    PartRows {
        host: host.into(),
        session: session.into(),
        part,
        start_unix_ns: start_s * 1_000_000_000,
        end_unix_ns: (start_s + 10) * 1_000_000_000,
        samples: rows.iter().map(|r| r.samples).sum(),
        lost: 3,
        rows,
    }
}

/// A row of `binary`/`function` with `samples` and a stack.
pub fn row(binary: &str, function: &str, samples: u64, stack: &[&str]) -> SampleRow {
    SampleRow {
        cpu: 1,
        pid: 100,
        tid: 101,
        comm: "worker".into(),
        process: "app".into(),
        cgroup: "/system.slice/app.service".into(),
        binary: binary.into(),
        build_id: "abcdef".into(),
        function: function.into(),
        offset: 0,
        stack: stack.iter().map(|s| s.to_string()).collect(),
        samples,
    }
}

#[test]
fn client_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<profkit_fleet::Client>();
}
