//! Live, root: a recording in 1-second parts (`profctl record --rotate
//! 1s`) exported to a real ClickHouse (Debian's clickhouse-server 18.16,
//! started here on 127.0.0.1 with a data directory of its own):
//! - `profreport --from URL -l` equals the local `-l` report exactly: the
//!   total and every function's samples;
//! - `profctl export` of the same session again sends nothing and changes
//!   nothing;
//! - `--host`, `--separate=host|cgroup`, specs, `--format collapsed`,
//!   `flamegraph`, `pprof` and `json`, `-c` and `--children` answer from
//!   the server, and equal the local reports (folded lines, call-graph
//!   blocks and inclusive samples exactly);
//! - `--diff` between hosts, time ranges and builds;
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
        &["--rotate", "1s", "-g", "--cgroups"],
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
    // Stack formats, call graphs, specs and cgroups: as the local reports.
    same_as_local(&ch.url, sd, lt);
    // A time window (parts overlapping its first second).
    let first = profreport(&[
        "--from", &ch.url, "--host", "web-1", "--time", "0,1", "--format", "json",
    ])
    .expect(0)
    .json();
    let ft1 = first["total_samples"].as_u64().unwrap();
    assert!(ft1 > 0 && ft1 < lt, "{ft1} of {lt}");
    let refused = profreport(&["--from", &ch.url, "-c", "--separate=host"]);
    assert_eq!(refused.code, 1);
    assert!(
        refused.stderr.contains("per function"),
        "{}",
        refused.stderr
    );
    let svg = profreport(&["--from", &ch.url, "--format", "flamegraph"]).expect(0);
    assert!(svg.stdout.contains("<svg") && svg.stdout.contains("two_loops"));

    // Between builds: the loops binary of both hosts, no change.
    let id: String = crate::debuginfod::build_id_of(&loops)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let web_build = format!("host:web-1 build:{}", &id[..12]);
    let db_build = format!("host:db-1 build:{}", id.to_uppercase());
    let diff = profreport(&[
        "--from", &ch.url, "--diff", &web_build, &db_build, "--format", "json",
    ])
    .expect(0)
    .json();
    let symbols: Vec<&str> = diff["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["image"].as_str())
        .collect();
    assert!(
        !symbols.is_empty() && symbols.iter().all(|i| *i == "loops"),
        "{diff:#}"
    );
    // Between time ranges of one host: both halves ran the same loops.
    let halves = profreport(&[
        "--from",
        &ch.url,
        "--diff",
        "host:web-1 time:0%-50%",
        "host:web-1 time:50%-100%",
    ])
    .expect(0);
    assert!(halves.stdout.contains("two_loops"), "{}", halves.stdout);
    let bad = profreport(&["--from", &ch.url, "--diff", "web-1", "colour:red"]);
    assert_eq!(bad.code, 1);
    assert!(
        bad.stderr.contains("host:GLOB, time:WINDOW"),
        "{}",
        bad.stderr
    );

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

/// JSON of a `profreport` run.
fn json(args: &[&str]) -> serde_json::Value {
    let mut all = args.to_vec();
    all.extend(["--format", "json"]);
    profreport(&all).expect(0).json()
}

/// The call graph of a JSON report: per (image, symbol), its self and
/// inclusive samples and its arcs.
type Arcs = Vec<(String, String, u64)>;
fn call_graph(v: &serde_json::Value) -> BTreeMap<(String, String), (u64, u64, Arcs, Arcs)> {
    let arcs = |a: &serde_json::Value| -> Arcs {
        let mut v: Arcs = a
            .as_array()
            .unwrap()
            .iter()
            .map(|x| {
                (
                    x["image"].as_str().unwrap().to_owned(),
                    x["symbol"].as_str().unwrap().to_owned(),
                    x["samples"].as_u64().unwrap(),
                )
            })
            .collect();
        v.sort();
        v
    };
    v["callgraph"]["entries"]
        .as_array()
        .unwrap_or_else(|| panic!("no call graph: {v:#}"))
        .iter()
        .map(|e| {
            (
                (
                    e["image"].as_str().unwrap().to_owned(),
                    e["symbol"].as_str().unwrap().to_owned(),
                ),
                (
                    e["self_samples"].as_u64().unwrap(),
                    e["total"].as_u64().unwrap(),
                    arcs(&e["callers"]),
                    arcs(&e["callees"]),
                ),
            )
        })
        .collect()
}

/// Inclusive samples per (image, symbol) of a JSON `--children` report.
fn inclusive(v: &serde_json::Value) -> BTreeMap<(String, String), (u64, u64)> {
    rows(v)
        .iter()
        .map(|r| {
            (
                (
                    r["image"].as_str().unwrap().to_owned(),
                    r["symbol"].as_str().unwrap_or("(none)").to_owned(),
                ),
                (
                    r["samples"].as_u64().unwrap(),
                    r["inclusive"].as_u64().unwrap(),
                ),
            )
        })
        .collect()
}

fn with<'a>(head: &[&'a str], args: &[&'a str]) -> Vec<&'a str> {
    let mut all = head.to_vec();
    all.extend_from_slice(args);
    all
}

/// Host web-1 of the store at `url` holds the session `sd` of `total`
/// samples: the fleet's folded stacks, call graph, inclusive samples,
/// specs, cgroups and pprof are the local ones.
fn same_as_local(url: &str, sd: &str, total: u64) {
    let lh = ["--session-dir", sd];
    let fh = ["--from", url, "--host", "web-1"];
    // Folded stacks: line for line (process, frames, counts).
    let lc = profreport(&with(&lh, &["--format", "collapsed"]))
        .expect(0)
        .stdout;
    let fc = profreport(&with(&fh, &["--format", "collapsed"]))
        .expect(0)
        .stdout;
    assert!(lc.lines().count() > 3, "{lc}");
    assert!(
        lc.lines().any(|l| l.matches(';').count() >= 3),
        "no stacks: {lc}"
    );
    assert_eq!(fc, lc, "folded stacks");
    // Call graphs: every block, every arc.
    let lg = call_graph(&json(&with(&lh, &["-c", "-t", "0"])));
    let fg = call_graph(&json(&with(&fh, &["-c", "-t", "0"])));
    assert!(lg.len() > 3, "{lg:?}");
    assert_eq!(fg, lg, "call graphs");
    let lg = call_graph(&json(&with(&lh, &["-c", "--children", "-t", "1"])));
    let fg = call_graph(&json(&with(&fh, &["-c", "--children", "-t", "1"])));
    assert_eq!(fg, lg, "call graphs by inclusive samples, cut at 1 %");
    // --children: every function's own and inclusive samples.
    let li = inclusive(&json(&with(&lh, &["--children", "-t", "0"])));
    let fi = inclusive(&json(&with(&fh, &["--children", "-t", "0"])));
    assert!(li.values().any(|(s, i)| *s == 0 && *i > 0), "{li:?}");
    assert_eq!(fi, li, "inclusive samples");
    // Specs, as locally: samples per function and the total.
    for spec in ["image:loops", "image-exclude:loops", "cpu:0", "cgroup:/*"] {
        let (lm, lt) = per_function(&json(&with(&lh, &["-l", spec])));
        let (fm, ft) = per_function(&json(&with(&fh, &["-l", spec])));
        assert_eq!((fm, ft), (lm, lt), "{spec}");
    }
    let pid = rows(&json(&with(&lh, &["--separate=thread", "image:loops"])))[0]["tgid"]
        .as_u64()
        .unwrap()
        .to_string();
    let spec = format!("tgid:{pid}");
    assert_eq!(
        per_function(&json(&with(&fh, &["-l", &spec]))),
        per_function(&json(&with(&lh, &["-l", &spec]))),
        "{spec}"
    );
    // Cgroups by path.
    let cgroups = |v: &serde_json::Value| {
        let mut c: Vec<(String, u64)> = rows(v)
            .iter()
            .map(|r| {
                (
                    r["cgroup"].as_str().unwrap().to_owned(),
                    r["samples"].as_u64().unwrap(),
                )
            })
            .collect();
        c.sort();
        c
    };
    let lcg = cgroups(&json(&with(&lh, &["--separate=cgroup", "image:loops"])));
    let fcg = cgroups(&json(&with(&fh, &["--separate=cgroup", "image:loops"])));
    assert!(lcg.iter().all(|(c, _)| c.starts_with('/')), "{lcg:?}");
    assert_eq!(fcg, lcg, "cgroups");
    // pprof: every sample, the same functions.
    let out = tempdir();
    let pb = out.path().join("fleet.pb.gz");
    profreport(&with(
        &fh,
        &["--format", "pprof", "-o", pb.to_str().unwrap()],
    ))
    .expect(0);
    let p = profkit_report::pprof::read_pprof(&std::fs::read(&pb).unwrap()).unwrap();
    let n: i64 = p.sample.iter().map(|s| s.value[0]).sum();
    assert_eq!(n as u64, total, "pprof samples");
    assert!(p.string_table.iter().any(|s| s == "two_loops"));
}
