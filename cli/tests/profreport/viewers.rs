//! `--format firefox` and `--format speedscope`: the threads and each
//! thread's sample count equal what the report counts with
//! `--separate=thread`, on a session written here and on one recorded
//! live; the speedscope output validates against the schema speedscope's
//! npm package ships (`dist/release/file-format-schema.json`), with a real
//! JSON-schema validator (the `jsonschema` crate).
//!
//! The package is fetched once with `npm pack speedscope@SPEEDSCOPE` into
//! `target/tmp/` (scripts/test.sh does it before the tests; a test run
//! alone does it itself): without npm, or offline on a clean checkout, the
//! schema test fails and says why.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use profkit_eventlog::*;
use profkit_testsupport::perf_ok;

use crate::live::{build_workload, record_with};
use crate::util::*;

/// The speedscope release whose schema the output is checked against.
pub const SPEEDSCOPE: &str = "1.25.0";

const APP: Cookie = 0xa;
const KERNEL: Cookie = 0xc;
const KBASE: u64 = 0xffff_ffff_a000_0000;
/// In testdata/symbols/kallsyms.
const SCHEDULE: u64 = 0x250;
const SCHEDULE_RET: u64 = 0x211;
const MAIN_RET: u64 = 0x61;
const KALLSYMS: &str = "../testdata/symbols/kallsyms";

/// Per (pid, tid): samples.
type Counts = BTreeMap<(u32, u32), u64>;

/// The unpacked speedscope package (`…/package`), fetched with npm the
/// first time (once per test binary; unpacked beside and renamed into
/// place, so a run stopped half-way leaves no half package).
fn speedscope_package() -> PathBuf {
    static PACKAGE: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    PACKAGE.get_or_init(fetch_speedscope).clone()
}

fn fetch_speedscope() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("speedscope-{SPEEDSCOPE}"));
    let package = dir.join("package");
    if package
        .join("dist/release/file-format-schema.json")
        .is_file()
    {
        return package;
    }
    std::fs::create_dir_all(&dir).expect("creating the npm cache directory");
    let tgz = format!("speedscope-{SPEEDSCOPE}.tgz");
    let pack = Command::new("npm")
        .args(["pack", "--silent", &format!("speedscope@{SPEEDSCOPE}")])
        .current_dir(&dir)
        .output();
    match pack {
        Ok(o) if o.status.success() => {}
        Ok(o) => panic!(
            "`npm pack speedscope@{SPEEDSCOPE}` failed in {} ({}): {}\n(scripts/test.sh installs npm \
             and fetches the package; the registry must be reachable once)",
            dir.display(),
            o.status,
            String::from_utf8_lossy(&o.stderr)
        ),
        Err(e) => panic!(
            "no npm to fetch speedscope's schema ({e}): run scripts/test.sh, which installs it \
             (apt-get install npm)"
        ),
    }
    let scratch = dir.join(format!("unpack-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).unwrap();
    let untar = Command::new("tar")
        .args(["xzf", &format!("../{tgz}")])
        .current_dir(&scratch)
        .status()
        .expect("running tar");
    assert!(untar.success(), "unpacking {tgz} in {}", dir.display());
    if !package.exists() {
        std::fs::rename(scratch.join("package"), &package).expect("moving the package into place");
    }
    let _ = std::fs::remove_dir_all(&scratch);
    package
}

/// Validates `v` against speedscope's own schema; panics with every error.
fn validate_speedscope(v: &serde_json::Value) {
    let path = speedscope_package().join("dist/release/file-format-schema.json");
    let schema: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).expect("reading the schema")).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("speedscope's schema compiles");
    let errors: Vec<String> = validator
        .iter_errors(v)
        .take(10)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "not a speedscope file ({}):\n{}",
        path.display(),
        errors.join("\n")
    );
    // And the schema does reject what is not one: no test that cannot fail.
    let mut broken = v.clone();
    broken["profiles"][0]["samples"] = serde_json::json!("not a list");
    assert!(!validator.is_valid(&broken), "the schema accepts anything");
}

/// The report's samples per thread (`-l --separate=thread`, JSON).
fn report_counts(args: &[String]) -> Counts {
    let mut all = args.to_vec();
    all.extend(["--separate=thread", "--format", "json"].map(String::from));
    let v = profreport(&all).expect(0).json();
    let mut counts = Counts::new();
    for r in rows(&v) {
        let key = (
            r["tgid"].as_u64().unwrap() as u32,
            r["tid"].as_u64().unwrap() as u32,
        );
        *counts.entry(key).or_default() += r["samples"].as_u64().unwrap();
    }
    counts
}

/// `profreport ARGS --format FMT -o FILE`, parsed.
fn viewer(args: &[String], format: &str, file: &Path) -> serde_json::Value {
    let mut all = args.to_vec();
    all.extend(["--format", format, "-o"].map(String::from));
    all.push(file.display().to_string());
    profreport(&all).expect(0);
    serde_json::from_slice(&std::fs::read(file).unwrap())
        .unwrap_or_else(|e| panic!("{format} output is not JSON: {e}"))
}

/// A pid or tid of the Firefox format (`"1234"`, or `"1234.1"` when reused).
fn fx_id(v: &serde_json::Value) -> u32 {
    let s = v.as_str().expect("pid/tid strings");
    s.split('.').next().unwrap().parse().unwrap()
}

/// Samples per (pid, tid) of a Firefox profile, with its checks: each
/// thread's samples in time order, of weight 1; the session events track
/// left out.
fn firefox_counts(v: &serde_json::Value) -> Counts {
    let mut counts = Counts::new();
    for t in v["threads"].as_array().expect("threads") {
        if t["processName"] == "profkit" && t["name"] == "session events" {
            continue;
        }
        let samples = &t["samples"];
        let n = samples["length"].as_u64().unwrap();
        let deltas = samples["timeDeltas"].as_array().unwrap();
        assert_eq!(deltas.len() as u64, n);
        assert!(
            deltas.iter().all(|d| d.as_f64().unwrap() >= 0.0),
            "samples out of time order"
        );
        assert!(samples["weight"].as_array().unwrap().iter().all(|w| w == 1));
        let old = counts.insert((fx_id(&t["pid"]), fx_id(&t["tid"])), n);
        assert!(old.is_none(), "two tracks for one thread: {}", t["tid"]);
    }
    counts
}

/// Samples per (pid, tid) of a speedscope file, with its checks: samples
/// and weights of one length, frame indices in range, the end value the
/// weights' sum.
fn speedscope_counts(v: &serde_json::Value) -> Counts {
    let frames = v["shared"]["frames"].as_array().unwrap().len() as u64;
    let mut counts = Counts::new();
    for p in v["profiles"].as_array().unwrap() {
        let name = p["name"].as_str().unwrap();
        let ids = &name[name.rfind('(').expect("comm (pid/tid)") + 1..name.len() - 1];
        let (pid, tid) = ids.split_once('/').unwrap();
        let samples = p["samples"].as_array().unwrap();
        let weights = p["weights"].as_array().unwrap();
        assert_eq!(samples.len(), weights.len(), "{name}");
        assert!(samples
            .iter()
            .flat_map(|s| s.as_array().unwrap())
            .all(|f| f.as_u64().unwrap() < frames));
        let sum: u64 = weights.iter().map(|w| w.as_u64().unwrap()).sum();
        assert_eq!(p["endValue"].as_u64(), Some(sum), "{name}");
        counts.insert(
            (pid.parse().unwrap(), tid.parse().unwrap()),
            samples.len() as u64,
        );
    }
    counts
}

/// Thread 10 "app" and 11 "worker" of process 10, thread 20 of "other",
/// over two rounds: kernel samples with a stack (schedule ← its caller ←
/// do_one_initcall) and user samples in /opt/app, and a loss.
fn write_session(dir: &Path) {
    let header = SessionHeader {
        event: EventConfigDesc {
            name: "cpu-clock".into(),
            frequency: Some(1000),
            callchain: true,
            ..Default::default()
        },
        cpus: vec![0, 1],
        start_time_unix_ns: 1_795_379_395_000_000_000,
        start_monotonic_ns: 1_000_000_000,
        sync_interval_ms: 250,
        target: "system-wide".into(),
        ..Default::default()
    };
    let mut w = SessionWriter::create(dir.join("session.pkl"), &header).unwrap();
    let def = |cookie, kind, path: &str, base| {
        Event::CookieDef(CookieEntry {
            cookie,
            kind,
            path: path.into(),
            build_id: None,
            dev: 0,
            inode: 0,
            generation: 0,
            base,
            pid: None,
            file: Default::default(),
        })
    };
    let kframe = |offset| Frame {
        cookie: KERNEL,
        offset,
        kernel: true,
    };
    let mut enc = ChunkEncoder::new();
    enc.event(&def(KERNEL, CookieKind::Kernel, "[kernel.kallsyms]", KBASE));
    enc.event(&def(APP, CookieKind::User, "/opt/app", 0));
    for (pid, tid, name) in [(10, 10, "app"), (10, 11, "worker"), (20, 20, "other")] {
        enc.event(&Event::Comm {
            pid,
            tid,
            exec: pid == tid,
            comm: name.into(),
            ns: None,
        });
    }
    enc.event(&Event::StackDef {
        id: 1,
        frames: vec![kframe(SCHEDULE_RET), kframe(MAIN_RET)],
    });
    for _ in 0..5 {
        enc.sample_with_stack(0, 10, 10, true, KERNEL, SCHEDULE, 1);
    }
    for _ in 0..3 {
        enc.sample(1, 10, 11, false, APP, 0x1234);
    }
    enc.sample(1, 20, 20, false, APP, 0x1300);
    w.append_chunk(0, 1_250_000_000, enc.bytes()).unwrap();
    let mut enc = ChunkEncoder::new();
    enc.event(&Event::Lost {
        cpu: 1,
        kind: LostKind::Ring,
        count: 2,
    });
    for _ in 0..2 {
        enc.sample(0, 10, 11, false, APP, 0x1234);
    }
    for _ in 0..4 {
        enc.sample_with_stack(1, 20, 20, true, KERNEL, SCHEDULE, 1);
    }
    w.append_chunk(1, 1_500_000_000, enc.bytes()).unwrap();
    w.write_footer(&SessionFooter {
        end_time_unix_ns: 1_795_379_395_500_000_000,
        end_monotonic_ns: 1_500_000_000,
        rounds: 2,
        accounting: vec![
            CpuAccounting {
                cpu: 0,
                samples_written: 7,
                ..Default::default()
            },
            CpuAccounting {
                cpu: 1,
                samples_written: 8,
                lost_ring: 2,
                ..Default::default()
            },
        ],
    })
    .unwrap();
}

fn written_args(dir: &Path) -> Vec<String> {
    vec![
        "--session-dir".into(),
        dir.display().to_string(),
        "--kallsyms".into(),
        KALLSYMS.into(),
        "--no-progress".into(),
    ]
}

#[test]
fn viewers_firefox_threads_and_counts_equal_the_report_on_a_written_session() {
    let d = tempdir();
    write_session(d.path());
    let args = written_args(d.path());
    let expected = report_counts(&args);
    assert_eq!(
        expected,
        Counts::from([((10, 10), 5), ((10, 11), 5), ((20, 20), 5)])
    );
    let v = viewer(&args, "firefox", &d.path().join("p.json"));
    assert_eq!(firefox_counts(&v), expected);
    // Named by our symbolization, with the libraries and the loss.
    let threads = v["threads"].as_array().unwrap();
    let names: Vec<&str> = threads
        .iter()
        .flat_map(|t| {
            let strings = t["stringArray"].as_array().unwrap();
            t["funcTable"]["name"]
                .as_array()
                .unwrap()
                .iter()
                .map(move |i| strings[i.as_u64().unwrap() as usize].as_str().unwrap())
        })
        .collect();
    assert!(names.contains(&"schedule"), "{names:?}");
    let libs: Vec<&str> = v["libs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["path"].as_str().unwrap())
        .collect();
    assert!(
        libs.contains(&"[kernel.kallsyms]") && libs.contains(&"/opt/app"),
        "{libs:?}"
    );
    let events = threads
        .iter()
        .find(|t| t["name"] == "session events")
        .expect("a session events track");
    assert_eq!(events["markers"]["length"], 1);
    assert_eq!(v["meta"]["symbolicated"], true);
}

#[test]
fn viewers_speedscope_validates_and_counts_equal_the_report_on_a_written_session() {
    let d = tempdir();
    write_session(d.path());
    let args = written_args(d.path());
    let v = viewer(&args, "speedscope", &d.path().join("s.json"));
    validate_speedscope(&v);
    assert_eq!(speedscope_counts(&v), report_counts(&args));
    // Weights: 1 ms a sample at 1000 Hz, in ns.
    let p = &v["profiles"][0];
    assert_eq!(p["unit"], "nanoseconds");
    assert!(p["weights"]
        .as_array()
        .unwrap()
        .iter()
        .all(|w| w == 1_000_000));
    // Root first: do_one_initcall's frame, then schedule's caller, then schedule.
    let frames = v["shared"]["frames"].as_array().unwrap();
    let name = |i: &serde_json::Value| frames[i.as_u64().unwrap() as usize]["name"].clone();
    let app = v["profiles"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "app (10/10)")
        .expect("app's profile");
    let stack = app["samples"][0].as_array().unwrap();
    assert_eq!(stack.len(), 3);
    assert_eq!(name(&stack[2]), "schedule ([kernel.kallsyms])");
}

#[test]
fn viewers_speedscope_separate_cpu_is_one_profile_per_cpu() {
    let d = tempdir();
    write_session(d.path());
    let mut args = written_args(d.path());
    args.push("--separate=cpu".into());
    let v = viewer(&args, "speedscope", &d.path().join("s.json"));
    validate_speedscope(&v);
    let mut per_cpu: BTreeMap<String, usize> = BTreeMap::new();
    for p in v["profiles"].as_array().unwrap() {
        per_cpu.insert(
            p["name"].as_str().unwrap().to_owned(),
            p["samples"].as_array().unwrap().len(),
        );
        // Every stack rooted in its task.
        let frames = v["shared"]["frames"].as_array().unwrap();
        for s in p["samples"].as_array().unwrap() {
            let root = &frames[s[0].as_u64().unwrap() as usize]["name"];
            assert!(root.as_str().unwrap().ends_with(')'), "{root}");
        }
    }
    assert_eq!(
        per_cpu,
        BTreeMap::from([("CPU 0".to_owned(), 7), ("CPU 1".to_owned(), 8)])
    );
}

#[test]
fn viewers_live_firefox_and_speedscope_threads_and_counts_equal_the_report() {
    let _rec = recording();
    if !perf_ok() {
        return;
    }
    let d = tempdir();
    let Some(shares) = build_workload(d.path(), "shares", &["-pthread"]) else {
        return;
    };
    record_with(
        d.path(),
        &["-g"],
        &[shares.to_str().unwrap(), "ratio", "60"],
    );
    let args = vec![
        "--session-dir".to_owned(),
        d.path().join("s").display().to_string(),
        "--no-progress".to_owned(),
    ];
    let expected = report_counts(&args);
    assert!(
        expected.values().sum::<u64>() > 500,
        "too few samples: {expected:?}"
    );
    let fx = viewer(&args, "firefox", &d.path().join("p.json"));
    assert_eq!(firefox_counts(&fx), expected);
    let ss = viewer(&args, "speedscope", &d.path().join("s.json"));
    validate_speedscope(&ss);
    assert_eq!(speedscope_counts(&ss), expected);
    // The workload's functions are named, in both.
    let text = std::fs::read_to_string(d.path().join("s.json")).unwrap();
    assert!(text.contains("f_a (shares)"), "f_a not named");
    let text = std::fs::read_to_string(d.path().join("p.json")).unwrap();
    assert!(text.contains("\"f_a\""), "f_a not named");
    // --separate=cpu: a track per CPU, each with the report's samples on it.
    let mut all = args.clone();
    all.extend(["-l", "--separate=cpu", "--format", "json"].map(String::from));
    let mut per_cpu: BTreeMap<String, u64> = BTreeMap::new();
    for r in rows(&profreport(&all).expect(0).json()) {
        let cpu = r["cpu"].as_u64().expect("a cpu per row");
        *per_cpu.entry(format!("CPU {cpu}")).or_default() += r["samples"].as_u64().unwrap();
    }
    let mut by_cpu = args.clone();
    by_cpu.push("--separate=cpu".into());
    let v = viewer(&by_cpu, "firefox", &d.path().join("cpu.json"));
    let tracks: BTreeMap<String, u64> = v["threads"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["name"] != "session events")
        .map(|t| {
            (
                t["processName"].as_str().unwrap().to_owned(),
                t["samples"]["length"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(tracks, per_cpu);
    // The workload is in the library list with its build-id.
    let lib = fx["libs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["name"] == "shares")
        .expect("shares in the libraries");
    assert_eq!(lib["path"], shares.to_str().unwrap());
    let code_id = lib["codeId"].as_str().expect("a code id");
    assert_eq!(code_id.len(), 40, "{code_id}");
    assert_ne!(lib["breakpadId"], "000000000000000000000000000000000");
}

#[test]
fn viewers_take_separate_cpu_and_speedscope_off_cpu_and_refuse_the_rest() {
    let d = tempdir();
    write_session(d.path());
    let args = written_args(d.path());
    let run = |extra: &[&str]| {
        let mut all = args.clone();
        all.extend(extra.iter().map(|s| s.to_string()));
        all.extend([
            "-o".to_owned(),
            d.path().join("out.json").display().to_string(),
        ]);
        profreport(&all)
    };
    run(&["--format", "firefox", "--separate=cpu"]).expect(0);
    run(&["--format", "speedscope", "--separate=thread"]).expect(0);
    let r = run(&["--format", "firefox", "--separate=lib"]).expect(2);
    assert!(r.stderr.contains("--separate=cpu"), "{}", r.stderr);
    let r = run(&["--format", "firefox", "--off-cpu"]).expect(2);
    assert!(r.stderr.contains("interval markers"), "{}", r.stderr);
    // speedscope takes --off-cpu, and says when the session has none.
    let r = run(&["--format", "speedscope", "--off-cpu"]).expect(1);
    assert!(r.stderr.contains("without --off-cpu"), "{}", r.stderr);
    let r = run(&["--format", "script", "--separate=cpu"]).expect(2);
    assert!(r.stderr.contains("not a report of rows"), "{}", r.stderr);
}
