//! A rotated session's directory of parts (`profctl start --rotate`),
//! written here with profkit-eventlog: `--session-dir` reports it as one
//! session, the header says which parts it read; one part file given is
//! reported alone; `--time` counts from the session's start.

use std::path::Path;

use profkit_eventlog::parts::{part_file_name, CURRENT_PART};
use profkit_eventlog::{
    ChunkEncoder, CookieEntry, CookieKind, CpuAccounting, Event, EventConfigDesc, PartInfo,
    SessionFooter, SessionHeader, SessionWriter,
};

use crate::util::*;

const S0: u64 = 1_000_000_000;
const U0: u64 = 1_795_379_395_000_000_000;
const PART_NS: u64 = 60_000_000_000;

/// Part `number` (60 s, 4 rounds of 15 s; `number * 10` samples of
/// /usr/bin/app per round), the newest as `session.pkl`, each with its
/// own footer.
fn write_part(dir: &Path, number: u64, newest: bool) {
    let start = S0 + (number - 1) * PART_NS;
    let header = SessionHeader {
        host: "test".into(),
        event: EventConfigDesc {
            name: "cpu-clock".into(),
            frequency: Some(1000),
            ..Default::default()
        },
        cpus: vec![0],
        start_time_unix_ns: U0 + (number - 1) * PART_NS,
        start_monotonic_ns: start,
        sync_interval_ms: 15_000,
        target: "system-wide".into(),
        part: Some(PartInfo {
            number,
            first_round: (number - 1) * 4,
            session_start_unix_ns: U0,
            session_start_monotonic_ns: S0,
        }),
        ..Default::default()
    };
    let name = if newest {
        CURRENT_PART.to_owned()
    } else {
        part_file_name(number)
    };
    let mut w = SessionWriter::create(dir.join(name), &header).unwrap();
    for j in 0..4u64 {
        let mut enc = ChunkEncoder::new();
        if j == 0 {
            enc.event(&Event::CookieDef(CookieEntry {
                cookie: 7,
                kind: CookieKind::User,
                path: "/usr/bin/app".into(),
                build_id: None,
                dev: 0,
                inode: 0,
                generation: 0,
                base: 0,
                pid: None,
                file: Default::default(),
            }));
        }
        for _ in 0..number * 10 {
            enc.sample(0, 10, 10, false, 7, 0x100);
        }
        w.append_chunk(
            (number - 1) * 4 + j,
            start + (j + 1) * 15_000_000_000,
            enc.bytes(),
        )
        .unwrap();
    }
    w.write_footer(&SessionFooter {
        end_time_unix_ns: U0 + number * PART_NS,
        end_monotonic_ns: start + PART_NS,
        rounds: 4,
        accounting: vec![CpuAccounting {
            cpu: 0,
            samples_written: number * 40,
            ..Default::default()
        }],
    })
    .unwrap();
}

/// Parts 3..=5 of a session whose parts 1 and 2 were deleted.
fn parts_dir() -> tempfile::TempDir {
    let d = tempdir();
    for n in 3..=5 {
        write_part(d.path(), n, n == 5);
    }
    d
}

#[test]
fn parts_of_a_session_dir_are_one_session_in_text_and_json() {
    let d = parts_dir();
    let dir = d.path().to_str().unwrap();
    let run = profreport(&["--session-dir", dir]).expect(0);
    assert!(
        run.stdout
            .contains("parts 3–5 of a rotated session; parts 1–2 were deleted (retention)"),
        "{}",
        run.stdout
    );
    assert_eq!(run.stdout.matches("Session:").count(), 1, "{}", run.stdout);
    assert!(run.stdout.contains("480 in this report"), "{}", run.stdout);
    assert!(run.stderr.is_empty(), "{}", run.stderr);
    let j = profreport(&["--session-dir", dir, "--format", "json"])
        .expect(0)
        .json();
    assert_eq!(j["total_samples"], 480);
    let s = &j["sessions"][0];
    assert_eq!(
        (
            &s["parts"],
            &s["first_part"],
            &s["last_part"],
            &s["parts_read"]
        ),
        (&3.into(), &3.into(), &5.into(), &3.into())
    );
    assert_eq!(j["sessions"].as_array().unwrap().len(), 1);
}

#[test]
fn one_part_file_is_reported_alone() {
    let d = parts_dir();
    let part = d.path().join(part_file_name(4));
    let j = profreport(&["--session-dir", part.to_str().unwrap(), "--format", "json"])
        .expect(0)
        .json();
    assert_eq!(j["total_samples"], 160);
    assert_eq!(j["sessions"][0]["one_part"], true);
    assert_eq!(j["sessions"][0]["first_part"], 4);
    // A directory that does not exist is still "no session here".
    let missing = d.path().join("nothing");
    let run = profreport(&["--session-dir", missing.to_str().unwrap()]).expect(1);
    assert!(
        run.stderr.contains("no profkit session here"),
        "{}",
        run.stderr
    );
}

#[test]
fn parts_time_counts_from_the_sessions_start() {
    let d = parts_dir();
    let dir = d.path().to_str().unwrap();
    // Minute 4 of the session (180 to 240 s) is part 4: 160 samples.
    let j = profreport(&[
        "--session-dir",
        dir,
        "--time",
        "180,240",
        "--format",
        "json",
    ])
    .expect(0)
    .json();
    assert_eq!(j["total_samples"], 160);
    assert_eq!(j["sessions"][0]["parts_read"], 1);
    // The last fifth of 0..300 s is part 5.
    let j = profreport(&[
        "--session-dir",
        dir,
        "--time",
        "80%-100%",
        "--format",
        "json",
    ])
    .expect(0)
    .json();
    assert_eq!(j["total_samples"], 200);
}

#[test]
fn merged_rotated_sessions_add_up() {
    let (a, b) = (parts_dir(), parts_dir());
    let j = profreport(&[
        "--merge",
        a.path().to_str().unwrap(),
        b.path().to_str().unwrap(),
        "--format",
        "json",
    ])
    .expect(0)
    .json();
    assert_eq!(j["total_samples"], 960);
    assert_eq!(j["sessions"].as_array().unwrap().len(), 2);
}

#[test]
fn diff_and_per_cpu_reports_read_every_part() {
    let (a, b) = (parts_dir(), parts_dir());
    write_part(b.path(), 2, false);
    let j = profreport(&[
        "--diff",
        a.path().to_str().unwrap(),
        b.path().to_str().unwrap(),
        "--format",
        "json",
    ])
    .expect(0)
    .json();
    assert_eq!(j["old"]["total_samples"], 480, "{j}");
    assert_eq!(j["new"]["total_samples"], 560, "{j}");
    let j = profreport(&[
        "--session-dir",
        b.path().to_str().unwrap(),
        "--separate=cpu",
        "--format",
        "json",
    ])
    .expect(0)
    .json();
    assert_eq!(j["total_samples"], 560);
    assert_eq!(j["sessions"][0]["first_part"], 2);
}
