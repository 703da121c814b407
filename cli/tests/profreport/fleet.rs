//! Live, root: a recording in 1-second parts (`profctl record --rotate
//! 1s`) exported to a real ClickHouse (Debian's clickhouse-server 18.16,
//! started here on 127.0.0.1 with a data directory of its own):
//! - `profreport --from URL -l` equals the local `-l` report exactly: the
//!   total and every function's samples;
//! - `profctl export` of the same session again sends nothing and changes
//!   nothing;
//! - `--host`, `--separate=host`, `--format collapsed` and `json` answer
//!   from the server;
//! - a server that lies (garbage answers) is an error, not a panic, and the
//!   store's password never shows.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpListener;

use crate::live::build_workload;
use crate::util::*;
use profkit_testsupport::perf_ok;

/// Samples per (image, symbol) of a JSON `-l` report, and its total.
fn per_function(v: &serde_json::Value) -> (BTreeMap<(String, String), u64>, u64) {
    let mut m = BTreeMap::new();
    for r in rows(v) {
        let image = r["image"].as_str().unwrap_or_default().to_owned();
        let symbol = r["symbol"].as_str().unwrap_or("(none)").to_owned();
        *m.entry((image, symbol)).or_default() += r["samples"].as_u64().unwrap_or(0);
    }
    (m, v["total_samples"].as_u64().unwrap_or(0))
}

#[test]
fn live_a_rotated_session_exported_reports_the_same_from_clickhouse() {
    let _rec = recording();
    if !perf_ok() {
        return;
    }
    let Some(ch) = profkit_testsupport::ClickHouseServer::start("profkit") else {
        return;
    };
    let d = tempdir();
    let Some(loops) = build_workload(d.path(), "loops", &[]) else {
        return;
    };
    crate::live::record_with(
        d.path(),
        &["--rotate", "1s"],
        &[loops.to_str().unwrap(), "500"],
    );
    let s = d.path().join("s");
    let parts = profkit_eventlog::parts::closed_parts(&s).unwrap().len() + 1;
    assert!(parts >= 2, "{parts} parts");
    let sd = s.to_str().unwrap();

    // Export every part.
    let first = profctl(
        d.path(),
        &["export", "--session-dir", sd, &ch.url, "--host", "web-1"],
    )
    .expect(0);
    assert!(
        first.stdout.contains(&format!("exported {parts} parts")),
        "{}{}",
        first.stdout,
        first.stderr
    );

    // The same report, computed by the server.
    let local = profreport(&["--session-dir", sd, "-l", "--format", "json"])
        .expect(0)
        .json();
    let fleet = profreport(&["--from", &ch.url, "-l", "--format", "json"])
        .expect(0)
        .json();
    let (lm, lt) = per_function(&local);
    let (fm, ft) = per_function(&fleet);
    eprintln!("local total {lt}, fleet total {ft}, {} functions", lm.len());
    assert!(lt > 1000, "too few samples: {lt}");
    assert_eq!(ft, lt, "totals");
    assert_eq!(fm, lm, "every function");

    // Again: nothing sent, nothing changed.
    let again = profctl(
        d.path(),
        &["export", "--session-dir", sd, &ch.url, "--host", "web-1"],
    )
    .expect(0);
    assert!(
        again.stdout.contains(&format!(
            "exported 0 parts (0 samples, 0 rows, 0 bytes) to {}; {parts} were there already",
            ch.url
        )),
        "{}",
        again.stdout
    );
    let fleet2 = profreport(&["--from", &ch.url, "-l", "--format", "json"])
        .expect(0)
        .json();
    assert_eq!(per_function(&fleet2), (fm.clone(), ft));

    // A second host: per host rows, and a host glob.
    profctl(
        d.path(),
        &["export", "--session-dir", sd, &ch.url, "--host", "db-1"],
    )
    .expect(0);
    let both = profreport(&["--from", &ch.url, "--format", "json"])
        .expect(0)
        .json();
    assert_eq!(both["total_samples"].as_u64(), Some(2 * lt));
    let web = profreport(&["--from", &ch.url, "--host", "web-*", "--format", "json"])
        .expect(0)
        .json();
    assert_eq!(web["total_samples"].as_u64(), Some(lt));
    let per_host = profreport(&["--from", &ch.url, "--separate=host", "--format", "csv"]).expect(0);
    assert!(per_host.stdout.contains("web-1") && per_host.stdout.contains("db-1"));

    // Folded stacks from the server: every sample once per host.
    let folded = profreport(&[
        "--from",
        &ch.url,
        "--host",
        "web-1",
        "--format",
        "collapsed",
    ])
    .expect(0);
    let n: u64 = folded
        .stdout
        .lines()
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<u64>().ok())
        .sum();
    assert_eq!(n, lt, "{}", folded.stdout);
    // An image spec, a time window (parts overlapping its first second),
    // cgroups by id; specs the store cannot answer are refused.
    let only = profreport(&[
        "--from",
        &ch.url,
        "--host",
        "web-1",
        "-l",
        "image:loops",
        "--format",
        "json",
    ])
    .expect(0)
    .json();
    let (om, ot) = per_function(&only);
    assert!(om.keys().all(|(i, _)| i == "loops"), "{om:?}");
    let local_loops: u64 = lm
        .iter()
        .filter(|((i, _), _)| i == "loops")
        .map(|(_, n)| n)
        .sum();
    assert_eq!(om.values().sum::<u64>(), local_loops, "{om:?} {lm:?}");
    assert_eq!(ot, lt, "the total stays the store's");
    let first = profreport(&[
        "--from", &ch.url, "--host", "web-1", "--time", "0,1", "--format", "json",
    ])
    .expect(0)
    .json();
    let ft1 = first["total_samples"].as_u64().unwrap();
    assert!(ft1 > 0 && ft1 < lt, "{ft1} of {lt}");
    let cg = profreport(&["--from", &ch.url, "--separate=cgroup", "--format", "csv"]).expect(0);
    assert!(
        cg.stdout.contains("[cgroup ") || cg.stdout.contains("[none]"),
        "{}",
        cg.stdout
    );
    let refused = profreport(&["--from", &ch.url, "tgid:1"]);
    assert_eq!(refused.code, 1);
    assert!(refused.stderr.contains("image:GLOB"), "{}", refused.stderr);
    let svg = profreport(&["--from", &ch.url, "--format", "flamegraph"]).expect(0);
    assert!(svg.stdout.contains("<svg") && svg.stdout.contains("two_loops"));

    // Between two hosts that ran the same: no change anywhere.
    let diff = profreport(&[
        "--from", &ch.url, "--diff", "web-1", "db-1", "--format", "json",
    ])
    .expect(0)
    .json();
    let changes: Vec<f64> = diff["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["change"].as_f64())
        .collect();
    assert!(!changes.is_empty(), "{diff:#}");
    assert!(changes.iter().all(|d| d.abs() < 1e-9), "{diff:#}");
}

/// A server that answers garbage to everything.
fn liar() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            let mut buf = [0u8; 8192];
            let _ = s.read(&mut buf);
            let body = "<html>not ClickHouse</html>\n\u{1}\u{2}garbage\tx\ty\n";
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

#[test]
fn a_server_that_answers_garbage_is_an_error_and_the_password_never_shows() {
    let url = format!("clickhouse://profkit:s3cret-pw@127.0.0.1:{}/db", liar());
    let r = profreport(&["--from", &url, "-l"]);
    assert_eq!(r.code, 1, "{}{}", r.stdout, r.stderr);
    assert!(!r.stderr.contains("s3cret-pw"), "{}", r.stderr);
    assert!(!r.stderr.contains("panicked"), "{}", r.stderr);
    assert!(r.stderr.contains("127.0.0.1"), "{}", r.stderr);
    let r = profreport(&["--from", "mysql://x/y", "-l"]);
    assert_ne!(r.code, 0);
    assert!(r.stderr.contains("clickhouse://"), "{}", r.stderr);
}

/// `profctl record --rotate 1s --export URL`: each part goes to the store
/// as it closes, the last at stop; the store is killed for three seconds in
/// the middle and started again: the parts of those seconds wait on disk,
/// are retried, and every part arrives once (the fleet's `-l` equals the
/// local one). The URL's password shows in no process title.
#[test]
fn live_export_while_recording_survives_the_store_going_down() {
    let _rec = recording();
    if !perf_ok() {
        return;
    }
    let Some(mut ch) = profkit_testsupport::ClickHouseServer::start("live") else {
        return;
    };
    let d = tempdir();
    let Some(loops) = build_workload(d.path(), "loops", &[]) else {
        return;
    };
    let url = ch.url.clone();
    let outage = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(1500));
        ch.stop();
        std::thread::sleep(std::time::Duration::from_secs(3));
        ch.restart();
        ch
    });
    let run = profctl(
        d.path(),
        &[
            "record",
            "-F",
            "4000",
            "--session-dir",
            "s",
            "--rotate",
            "1s",
            "--export",
            &url,
            "--export-host",
            "live-1",
            "--",
            loops.to_str().unwrap(),
            "1000",
        ],
    );
    let _ch = outage.join().unwrap();
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    assert!(
        run.stdout.contains("profkit: export: every part through")
            && run.stdout.contains("exports failed and were tried again")
            && !run.stdout.contains("wait on disk"),
        "{}",
        run.stdout
    );
    assert!(!run.stdout.contains(&url) && !run.stderr.contains(&url));
    let s = d.path().join("s");
    let log = std::fs::read_to_string(s.join("export.log")).unwrap_or_default();
    let sd = s.to_str().unwrap();
    let local = profreport(&["--session-dir", sd, "-l", "--format", "json"])
        .expect(0)
        .json();
    let fleet = profreport(&["--from", &url, "-l", "--format", "json"])
        .expect(0)
        .json();
    let (lm, lt) = per_function(&local);
    let (fm, ft) = per_function(&fleet);
    eprintln!("local {lt}, fleet {ft}; last export log: {log}");
    assert!(lt > 3000, "too few samples: {lt}");
    assert_eq!((fm, ft), (lm, lt), "every part once");
    let parts = profkit_eventlog::parts::closed_parts(&s).unwrap().len() + 1;
    let warning = fleet["warnings"][0].as_str().unwrap_or_default().to_owned();
    assert!(
        warning.contains(&format!("{parts} parts of 1 host")),
        "{warning}"
    );
}
