//! The viewers' formats (`stream/firefox.rs`, `stream/speedscope.rs`) on
//! the standard session: threads and samples per thread equal the
//! report's (`--separate=thread`), per CPU with `--separate=cpu`, and the
//! frames, libraries and markers are there.

use std::collections::BTreeMap;

use super::offcpu::off_session;
use super::parts::flat_parts;
use super::*;
use crate::stream::firefox::write_firefox;
use crate::stream::speedscope::{write_speedscope, OFF_CPU_BLOCKED};

/// Samples per (pid, tid).
type Counts = BTreeMap<(u32, u32), u64>;

fn report_counts(path: &std::path::Path, mut opts: ReportOptions) -> Counts {
    opts.separate.thread = true;
    let r = report_with(path, opts);
    let mut counts = Counts::new();
    for row in &r.rows {
        *counts
            .entry((row.tgid().unwrap(), row.tid().unwrap()))
            .or_default() += row.total;
    }
    counts
}

fn firefox(path: &std::path::Path, opts: &ReportOptions) -> serde_json::Value {
    let s = Session::open(path).unwrap();
    let mut out = Vec::new();
    write_firefox(&[s], opts, &sources(), &NoProgress, &mut out).unwrap();
    serde_json::from_slice(&out).expect("JSON")
}

fn speedscope(path: &std::path::Path, opts: &ReportOptions) -> serde_json::Value {
    let s = Session::open(path).unwrap();
    let mut out = Vec::new();
    write_speedscope(&[s], opts, &sources(), &NoProgress, &mut out).unwrap();
    serde_json::from_slice(&out).expect("JSON")
}

fn fx_id(v: &serde_json::Value) -> u32 {
    v.as_str()
        .unwrap()
        .split('.')
        .next()
        .unwrap()
        .parse()
        .unwrap()
}

/// Samples per (pid, tid) of a Firefox profile, its session events track
/// left out.
fn firefox_counts(v: &serde_json::Value) -> Counts {
    let mut counts = Counts::new();
    for t in v["threads"].as_array().unwrap() {
        if t["name"] == "session events" {
            continue;
        }
        let n = t["samples"]["length"].as_u64().unwrap();
        assert!(counts
            .insert((fx_id(&t["pid"]), fx_id(&t["tid"])), n)
            .is_none());
    }
    counts
}

/// Every string the functions of a Firefox profile are named by.
fn firefox_functions(v: &serde_json::Value) -> Vec<String> {
    let mut names = Vec::new();
    for t in v["threads"].as_array().unwrap() {
        let strings = t["stringArray"].as_array().unwrap();
        for i in t["funcTable"]["name"].as_array().unwrap() {
            names.push(
                strings[i.as_u64().unwrap() as usize]
                    .as_str()
                    .unwrap()
                    .to_owned(),
            );
        }
    }
    names
}

/// Samples per profile name of a speedscope file.
fn speedscope_counts(v: &serde_json::Value) -> BTreeMap<String, u64> {
    v["profiles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let n = p["samples"].as_array().unwrap().len();
            assert_eq!(p["weights"].as_array().unwrap().len(), n);
            (p["name"].as_str().unwrap().to_owned(), n as u64)
        })
        .collect()
}

#[test]
fn firefox_threads_and_their_samples_are_the_reports() {
    let d = tempfile::tempdir().unwrap();
    let path = standard(d.path(), true);
    let expected = report_counts(&path, ReportOptions::default());
    assert_eq!(expected.values().sum::<u64>(), 23);
    let v = firefox(&path, &ReportOptions::default());
    assert_eq!(firefox_counts(&v), expected);
    // Weight 1 a sample, the period (1 ms at 1000 Hz) as CPU delta (µs).
    for t in v["threads"].as_array().unwrap() {
        let s = &t["samples"];
        assert!(s["weight"].as_array().unwrap().iter().all(|w| w == 1));
        assert!(s["threadCPUDelta"]
            .as_array()
            .unwrap()
            .iter()
            .all(|d| d == 1000));
    }
    // Threads named by the session: app's worker.
    assert!(v["threads"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["name"] == "worker" && t["tid"] == "11"));
    // Kernel functions named by our symbolization, the binaries listed.
    let funcs = firefox_functions(&v);
    assert!(funcs.iter().any(|f| f == "do_one_initcall"), "{funcs:?}");
    let libs: Vec<&str> = v["libs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["path"].as_str().unwrap())
        .collect();
    for lib in ["/usr/bin/app", "/usr/lib/libc.so.6", "[kernel.kallsyms]"] {
        assert!(libs.contains(&lib), "{lib} not in {libs:?}");
    }
    assert_eq!(v["meta"]["symbolicated"], true);
    // The loss of round 1 on CPU 1.
    let events = v["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "session events")
        .expect("session events");
    let strings = events["stringArray"].as_array().unwrap();
    let markers: Vec<(&str, &str)> = (0..events["markers"]["length"].as_u64().unwrap() as usize)
        .map(|i| {
            let m = &events["markers"];
            let s = |v: &serde_json::Value| strings[v.as_u64().unwrap() as usize].as_str().unwrap();
            (s(&m["name"][i]), s(&m["data"][i]["detail"]))
        })
        .collect();
    assert_eq!(
        markers,
        [("Lost samples", "CPU 1: 5 lost (kernel ring full)")]
    );
}

#[test]
fn firefox_separate_cpu_is_one_track_per_cpu() {
    let d = tempfile::tempdir().unwrap();
    let path = standard(d.path(), true);
    let mut opts = ReportOptions::default();
    opts.separate.cpu = true;
    let v = firefox(&path, &opts);
    let mut per_cpu = BTreeMap::new();
    for t in v["threads"].as_array().unwrap() {
        if t["name"] != "session events" {
            per_cpu.insert(
                t["processName"].as_str().unwrap().to_owned(),
                t["samples"]["length"].as_u64().unwrap(),
            );
        }
    }
    assert_eq!(
        per_cpu,
        BTreeMap::from([("CPU 0".to_owned(), 14), ("CPU 1".to_owned(), 9)])
    );
    // Each stack rooted in its task.
    assert!(firefox_functions(&v).iter().any(|f| f == "worker (10/11)"));
}

#[test]
fn firefox_spec_and_window_are_honoured() {
    let d = tempfile::tempdir().unwrap();
    let path = standard(d.path(), true);
    let opts = ReportOptions {
        spec: ProfileSpec::parse(&["tgid:10".to_owned()]).unwrap(),
        ..Default::default()
    };
    let v = firefox(&path, &opts);
    assert_eq!(firefox_counts(&v), report_counts(&path, opts));
    assert!(firefox_counts(&v).keys().all(|&(pid, _)| pid == 10));
    // The second round only: other's 4 samples and node's 2.
    let opts = ReportOptions {
        time: Some(TimeSpec::parse("0.25,").unwrap()),
        ..Default::default()
    };
    let v = firefox(&path, &opts);
    assert_eq!(
        firefox_counts(&v),
        Counts::from([((20, 20), 4), ((4242, 4242), 2)])
    );
    assert_eq!(firefox_counts(&v), report_counts(&path, opts));
}

#[test]
fn speedscope_profiles_and_their_samples_are_the_reports() {
    let d = tempfile::tempdir().unwrap();
    let path = standard(d.path(), true);
    let v = speedscope(&path, &ReportOptions::default());
    let expected: BTreeMap<String, u64> = {
        let r = {
            let mut opts = ReportOptions::default();
            opts.separate.thread = true;
            report_with(&path, opts)
        };
        let mut m = BTreeMap::new();
        for row in &r.rows {
            let name = format!(
                "{} ({}/{})",
                row.comm().unwrap(),
                row.tgid().unwrap(),
                row.tid().unwrap()
            );
            *m.entry(name).or_default() += row.total;
        }
        m
    };
    assert_eq!(speedscope_counts(&v), expected);
    assert_eq!(
        v["$schema"],
        "https://www.speedscope.app/file-format-schema.json"
    );
    let frames = v["shared"]["frames"].as_array().unwrap();
    let mut total = 0;
    for p in v["profiles"].as_array().unwrap() {
        assert_eq!(p["type"], "sampled");
        assert_eq!(p["unit"], "nanoseconds");
        let weights = p["weights"].as_array().unwrap();
        assert!(weights.iter().all(|w| w == 1_000_000));
        let sum: u64 = weights.iter().map(|w| w.as_u64().unwrap()).sum();
        assert_eq!(p["endValue"].as_u64(), Some(sum));
        for s in p["samples"].as_array().unwrap() {
            for f in s.as_array().unwrap() {
                assert!((f.as_u64().unwrap() as usize) < frames.len());
            }
        }
        total += weights.len();
    }
    assert_eq!(total, 23);
    // Heaviest first.
    assert_eq!(v["profiles"][0]["name"], "app (10/10)");
    assert!(frames
        .iter()
        .any(|f| f["name"] == "do_one_initcall ([kernel.kallsyms])"));
    assert!(frames.iter().any(|f| f["file"] == "/usr/lib/libc.so.6"));
}

#[test]
fn speedscope_off_cpu_is_time_at_the_switch_out_stack() {
    let d = tempfile::tempdir().unwrap();
    let path = off_session(d.path());
    let mut opts = ReportOptions {
        off_cpu: Some(OffCpuMode::All),
        ..Default::default()
    };
    let v = speedscope(&path, &opts);
    let weights = |p: &serde_json::Value| -> u64 {
        p["weights"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w.as_u64().unwrap())
            .sum()
    };
    let total: u64 = v["profiles"].as_array().unwrap().iter().map(weights).sum();
    // 3 + 1.5 + 2 + 0.5 ms, as the report counts it.
    assert_eq!(total, 7_000_000);
    assert_eq!(total, report_with(&path, opts.clone()).header.total_samples);
    // Blocked only: 3 + 1.5 + 0.5 ms.
    opts.off_cpu = Some(OffCpuMode::Blocked);
    let v = speedscope(&path, &opts);
    let total: u64 = v["profiles"].as_array().unwrap().iter().map(weights).sum();
    assert_eq!(total, 5_000_000);
    assert_eq!(total, report_with(&path, opts).header.total_samples);
    assert!(v["shared"]["frames"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f["name"] == OFF_CPU_BLOCKED));
}

#[test]
fn firefox_off_cpu_is_interval_markers_beside_the_samples() {
    let d = tempfile::tempdir().unwrap();
    let path = off_session(d.path());
    let v = firefox(&path, &ReportOptions::default());
    // The samples are the report's on-CPU samples.
    assert_eq!(
        firefox_counts(&v),
        report_counts(&path, ReportOptions::default())
    );
    let categories: Vec<&str> = v["meta"]["categories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    let off_cpu = categories.iter().position(|&c| c == "Off-CPU").unwrap();
    let mut ms = 0.0;
    let mut markers = 0;
    for t in v["threads"].as_array().unwrap() {
        let m = &t["markers"];
        for (i, data) in m["data"].as_array().unwrap().iter().enumerate() {
            if data["type"] == "ProfkitOffCpu" {
                assert_eq!(m["category"][i], off_cpu);
                let (start, end) = (
                    m["startTime"][i].as_f64().unwrap(),
                    m["endTime"][i].as_f64().unwrap(),
                );
                assert!((end - start - data["time"].as_f64().unwrap()).abs() < 1e-6);
                ms += data["time"].as_f64().unwrap();
                markers += 1;
            }
        }
    }
    assert_eq!(markers, 4);
    assert!((ms - 7.0).abs() < 1e-9, "{ms} ms");
}

#[test]
fn firefox_rotated_session_is_one_profile_with_its_part_starts() {
    let d = tempfile::tempdir().unwrap();
    flat_parts(d.path(), 1..=3);
    let s = Session::open(d.path()).unwrap();
    let mut out = Vec::new();
    write_firefox(
        &[s],
        &ReportOptions::default(),
        &sources(),
        &NoProgress,
        &mut out,
    )
    .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let s = Session::open(d.path()).unwrap();
    let mut opts = ReportOptions::default();
    opts.separate.thread = true;
    let r = build_report(&[s], &opts, &sources(), &NoProgress).unwrap();
    // 12 rounds of r + 1 samples.
    assert_eq!(r.header.total_samples, 78);
    assert_eq!(firefox_counts(&v), Counts::from([((10, 10), 78)]));
    let events = v["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "session events")
        .expect("session events");
    let strings = events["stringArray"].as_array().unwrap();
    let details: Vec<&str> = events["markers"]["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            strings[d["detail"].as_u64().unwrap() as usize]
                .as_str()
                .unwrap()
        })
        .collect();
    assert_eq!(
        details,
        [
            "part 1: session.000001.pkl",
            "part 2: session.000002.pkl",
            "part 3: session.pkl"
        ]
    );
}

#[test]
fn a_thread_renamed_by_exec_is_shown_by_its_new_name() {
    let d = tempfile::tempdir().unwrap();
    let path = write_session(
        d.path(),
        &[
            (
                vec![
                    def(APP, CookieKind::User, "/usr/bin/app", 0, None),
                    comm(10, 10, "sh", true),
                ],
                vec![(0, 10, 10, false, APP, 0x100, 2)],
            ),
            (
                vec![comm(10, 10, "app", true)],
                vec![(0, 10, 10, false, APP, 0x100, 3)],
            ),
        ],
        None,
    );
    let v = speedscope(&path, &ReportOptions::default());
    assert_eq!(
        speedscope_counts(&v),
        BTreeMap::from([("app (10/10)".to_owned(), 5)])
    );
    let v = firefox(&path, &ReportOptions::default());
    let t = &v["threads"][0];
    assert_eq!(
        (&t["name"], &t["processName"]),
        (&"app".into(), &"app".into())
    );
    assert_eq!(t["samples"]["length"], 5);
}

#[test]
fn merged_sessions_are_processes_of_their_own_each_from_time_zero() {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let (pa, pb) = (standard(a.path(), true), standard(b.path(), true));
    let open = || [Session::open(&pa).unwrap(), Session::open(&pb).unwrap()];
    let mut out = Vec::new();
    write_firefox(
        &open(),
        &ReportOptions::default(),
        &sources(),
        &NoProgress,
        &mut out,
    )
    .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let threads: Vec<&serde_json::Value> = v["threads"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["name"] != "session events")
        .collect();
    // 5 threads a session; the second's pids made unique by the crate ("10.1").
    assert_eq!(threads.len(), 10);
    let total: u64 = threads
        .iter()
        .map(|t| t["samples"]["length"].as_u64().unwrap())
        .sum();
    assert_eq!(total, 46);
    let app: Vec<f64> = threads
        .iter()
        .filter(|t| fx_id(&t["tid"]) == 10)
        .map(|t| t["registerTime"].as_f64().unwrap())
        .collect();
    assert_eq!(app.len(), 2);
    assert_eq!(app[0], app[1], "each session from its own start");

    let mut out = Vec::new();
    write_speedscope(
        &open(),
        &ReportOptions::default(),
        &sources(),
        &NoProgress,
        &mut out,
    )
    .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let counts = speedscope_counts(&v);
    assert_eq!(counts.len(), 10);
    assert_eq!(counts["app (10/10)"], counts["app (10/10) [session 2]"]);
}
