//! One test per flag and per profile spec tag (ripgrep's habit), on the
//! checked-in sessions: `ratio` (one thread; f_a 2/3, f_b 1/3) and
//! `pinned` (f_cpu0 on CPU 0, f_cpu1 on CPU 1).

use std::os::unix::fs::FileTypeExt;
use std::path::Path;

use profkit_eventlog::*;

use crate::util::*;

fn json(session: &str, args: &[&str]) -> serde_json::Value {
    let mut a = args.to_vec();
    a.extend(["--format", "json"]);
    on_fixture(session, &a).expect(0).json()
}

/// (tgid, tid of the thread running `symbol`) in the pinned session.
fn thread_of(symbol: &str) -> (u64, u64) {
    let v = json("pinned", &["-l", "--separate=thread"]);
    let r = rows(&v)
        .into_iter()
        .find(|r| r["symbol"] == symbol)
        .unwrap();
    (r["tgid"].as_u64().unwrap(), r["tid"].as_u64().unwrap())
}

#[test]
fn default_is_an_image_summary() {
    let v = json("ratio", &[]);
    let r = rows(&v);
    assert_eq!(r[0]["image"], "shares");
    assert_eq!(r[0]["symbol"], serde_json::Value::Null);
    assert!(r[0]["percent"].as_f64().unwrap() > 95.0);
    assert_eq!(v["event"], "cpu-clock");
    assert_eq!(v["frequency"], 1000);
}

#[test]
fn flag_symbols() {
    for flag in ["-l", "--symbols"] {
        let v = json("ratio", &[flag]);
        assert!(samples_of(&v, "f_a") > samples_of(&v, "f_b"));
        assert!(samples_of(&v, "f_b") > 0);
    }
}

#[test]
fn flag_app() {
    let run = on_fixture("ratio", &["-l", "--app"]).expect(0);
    assert!(run.stdout.contains("app name"), "{}", run.stdout);
    let v = json("ratio", &["-l", "--app"]);
    let fa = rows(&v).into_iter().find(|r| r["symbol"] == "f_a").unwrap();
    assert_eq!(fa["app"], "shares");
    // The kernel samples of the workload are attributed to it too.
    assert!(rows(&v)
        .iter()
        .any(|r| r["image"] == "[kernel.kallsyms]" && r["app"] == "shares"));
}

#[test]
fn flag_separate_none_is_the_default() {
    assert_eq!(
        on_fixture("ratio", &["-l", "--separate=none"])
            .expect(0)
            .stdout,
        on_fixture("ratio", &["-l"]).expect(0).stdout
    );
}

#[test]
fn flag_separate_cpu() {
    let v = json("pinned", &["-l", "--separate=cpu"]);
    for r in rows(&v) {
        assert!(r["cpu"].is_u64(), "{r}");
    }
    let run = on_fixture("pinned", &["-l", "--separate=cpu"]).expect(0);
    assert!(run.stdout.contains("cpu:0") && run.stdout.contains("cpu:1"));
}

#[test]
fn flag_separate_thread() {
    let v = json("pinned", &["-l", "--separate=thread"]);
    let (g0, t0) = thread_of("f_cpu0");
    let (g1, t1) = thread_of("f_cpu1");
    assert_eq!(g0, g1, "one process");
    assert_ne!(t0, t1, "two threads");
    assert!(rows(&v).iter().all(|r| r["comm"].is_string()));
}

#[test]
fn flag_separate_lib() {
    let run = on_fixture("ratio", &["--separate=lib"]).expect(0);
    assert!(run.stdout.contains("application"), "{}", run.stdout);
    let v = json("ratio", &["--separate=lib"]);
    // Dependent rows carry their application.
    assert!(rows(&v)
        .iter()
        .any(|r| r["image"] == "shares" && r["app"] == "shares"));
}

#[test]
fn flag_separate_kernel() {
    let v = json("ratio", &["--separate=kernel"]);
    assert!(
        rows(&v)
            .iter()
            .any(|r| r["image"] == "[kernel.kallsyms]" && r["app"] == "shares"),
        "{v:#}"
    );
    let v = json("ratio", &["--separate=lib"]);
    assert!(!rows(&v)
        .iter()
        .any(|r| r["image"] == "[kernel.kallsyms]" && r["app"] == "shares"));
}

#[test]
fn flag_separate_all() {
    let v = json("pinned", &["-l", "--separate=all"]);
    let r = &rows(&v)[0];
    assert!(
        r["cpu"].is_u64() && r["tid"].is_u64() && r["app"].is_string(),
        "{r}"
    );
}

#[test]
fn spec_cpu() {
    let v = json("pinned", &["-l", "cpu:1"]);
    assert_eq!(samples_of(&v, "f_cpu0"), 0);
    assert!(samples_of(&v, "f_cpu1") > 0);
    let v = json("pinned", &["-l", "cpu:0,1"]);
    assert!(samples_of(&v, "f_cpu0") > 0 && samples_of(&v, "f_cpu1") > 0);
}

#[test]
fn spec_tgid() {
    let (g, _) = thread_of("f_cpu0");
    let v = json("pinned", &["-l", &format!("tgid:{g}")]);
    assert_eq!(v["total_samples"], v["samples_read"]);
    let v = json("pinned", &["-l", &format!("tgid:{}", g + 1)]);
    assert_eq!(v["total_samples"], 0);
}

#[test]
fn spec_tid() {
    let (_, t1) = thread_of("f_cpu1");
    let v = json("pinned", &["-l", &format!("tid:{t1}")]);
    assert_eq!(samples_of(&v, "f_cpu0"), 0);
    assert!(samples_of(&v, "f_cpu1") > 0);
}

#[test]
fn spec_image() {
    let v = json("ratio", &["-l", "image:shares"]);
    assert!(rows(&v).iter().all(|r| r["image"] == "shares"));
    let pct = percent_of(&v, "f_a") + percent_of(&v, "f_b");
    assert!(pct > 99.0, "{pct}");
    let v = json("ratio", &["-l", "image:*kallsyms*"]);
    assert!(rows(&v).iter().all(|r| r["image"] == "[kernel.kallsyms]"));
    // A bare word is an image, as in opreport.
    let v = json("ratio", &["-l", "shares"]);
    assert!(rows(&v).iter().all(|r| r["image"] == "shares"));
}

#[test]
fn spec_image_exclude() {
    let v = json("ratio", &["-l", "image-exclude:shares"]);
    assert!(rows(&v).iter().all(|r| r["image"] != "shares"));
}

#[test]
fn flag_threshold() {
    let run = on_fixture("ratio", &["-l", "--threshold", "10"]).expect(0);
    let v = json("ratio", &["-l", "-t", "10"]);
    let symbols: Vec<_> = rows(&v).iter().map(|r| r["symbol"].clone()).collect();
    assert_eq!(symbols, ["f_a", "f_b"]);
    assert!(run.stdout.contains("below the threshold"), "{}", run.stdout);
}

#[test]
fn flag_sort() {
    let order = |key: &str| -> Vec<String> {
        rows(&json("ratio", &["-l", "image:shares", "--sort", key]))
            .iter()
            .map(|r| r["symbol"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(order("samples")[..2], ["f_a", "f_b"]);
    let by_name = order("symbol");
    let mut sorted = by_name.clone();
    sorted.sort();
    assert_eq!(by_name, sorted);
    // By address: ascending vma, whatever the samples (the kernel's high
    // addresses come after the workload's).
    let v = json("ratio", &["-l", "-w", "--sort", "vma"]);
    let vmas: Vec<u64> = rows(&v)
        .iter()
        .map(|r| {
            u64::from_str_radix(r["vma"].as_str().unwrap().trim_start_matches("0x"), 16).unwrap()
        })
        .collect();
    assert!(
        vmas.len() > 2 && vmas.windows(2).all(|w| w[0] <= w[1]),
        "{vmas:x?}"
    );
    // Without -w the addresses are not shown but still order the rows.
    let with_w: Vec<String> = rows(&v)
        .iter()
        .map(|r| r["symbol"].as_str().unwrap().to_owned())
        .collect();
    let mut all = vec!["-l", "--sort", "vma"];
    all.extend(["--format", "json"]);
    let without_w: Vec<String> = rows(&on_fixture("ratio", &all).expect(0).json())
        .iter()
        .map(|r| r["symbol"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(with_w, without_w);
    let images: Vec<String> = rows(&json("ratio", &["--sort", "image"]))
        .iter()
        .map(|r| r["image"].as_str().unwrap().to_owned())
        .collect();
    let mut sorted = images.clone();
    sorted.sort();
    assert_eq!(images, sorted);
}

#[test]
fn flag_reverse() {
    let fwd = rows(&json("ratio", &["-l"]));
    let mut rev = rows(&json("ratio", &["-l", "--reverse"]));
    rev.reverse();
    assert_eq!(fwd, rev);
}

#[test]
fn flag_demangle() {
    // A JIT sample named by a perf map holding a C++ name.
    let d = tempdir();
    let header = SessionHeader {
        event: EventConfigDesc {
            name: "cpu-clock".into(),
            frequency: Some(99),
            ..Default::default()
        },
        cpus: vec![0],
        ..Default::default()
    };
    let mut w = SessionWriter::create(d.path().join("session.pkl"), &header).unwrap();
    let mut enc = ChunkEncoder::new();
    enc.event(&Event::CookieDef(CookieEntry {
        cookie: 5,
        kind: CookieKind::Anon,
        path: "//anon".into(),
        build_id: None,
        dev: 0,
        inode: 0,
        generation: 0,
        base: 0,
        pid: Some(4242),
        file: Default::default(),
    }));
    enc.sample(0, 4242, 4242, false, 5, 0x7f3c_0000_2010);
    w.append_chunk(0, 1, enc.bytes()).unwrap();
    drop(w);
    std::fs::copy(
        testdata().join("symbols/perf-4242.map"),
        d.path().join("perf-4242.map"),
    )
    .unwrap();
    let dir = d.path().to_str().unwrap();
    let run = profreport(&["--session-dir", dir, "-l", "--demangle=none"]).expect(0);
    assert!(run.stdout.contains("_ZN2ns4workEi"), "{}", run.stdout);
    let run = profreport(&["--session-dir", dir, "-l", "--demangle=normal"]).expect(0);
    assert!(run.stdout.contains("ns::work(int)"), "{}", run.stdout);
    let run = profreport(&["--session-dir", dir, "-l"]).expect(0);
    assert!(run.stdout.contains("ns::work(int)"), "{}", run.stdout);
}

#[test]
fn flag_show_address() {
    let run = on_fixture("ratio", &["-l", "--show-address", "image:shares"]).expect(0);
    assert!(run.stdout.contains("vma"), "{}", run.stdout);
    let v = json("ratio", &["-l", "-w", "image:shares"]);
    let fa = rows(&v).into_iter().find(|r| r["symbol"] == "f_a").unwrap();
    assert!(fa["vma"].as_str().unwrap().starts_with("0x"), "{fa}");
}

#[test]
fn flag_global_percent() {
    let local = json("ratio", &["-l", "image-exclude:shares"]);
    let global = json("ratio", &["-l", "image-exclude:shares", "--global-percent"]);
    let sum = |v: &serde_json::Value| -> f64 {
        rows(v).iter().map(|r| r["percent"].as_f64().unwrap()).sum()
    };
    assert!((sum(&local) - 100.0).abs() < 0.01, "{}", sum(&local));
    assert!(sum(&global) < 10.0, "{}", sum(&global));
}

#[test]
fn flag_exclude_dependent() {
    let v = json("ratio", &["-l", "--exclude-dependent"]);
    assert!(rows(&v).iter().all(|r| r["image"] == "shares"), "{v:#}");
    let v = json("ratio", &["-x"]);
    assert_eq!(rows(&v).len(), 1);
}

#[test]
fn flag_debug_info() {
    let run = on_fixture("ratio", &["-l", "--debug-info", "image:shares"]).expect(0);
    assert!(run.stdout.contains("linenr info"), "{}", run.stdout);
    assert!(run.stdout.contains("shares.c:"), "{}", run.stdout);
    let v = json("ratio", &["-l", "-g", "image:shares"]);
    let fa = rows(&v).into_iter().find(|r| r["symbol"] == "f_a").unwrap();
    assert!(
        fa["location"].as_str().unwrap().starts_with("shares.c:"),
        "{fa}"
    );
}

#[test]
fn flag_long_filenames() {
    let run = on_fixture("ratio", &["-f"]).expect(0);
    assert!(
        run.stdout.contains("/tmp/profkit-golden."),
        "{}",
        run.stdout
    );
    let run = on_fixture("ratio", &[]).expect(0);
    assert!(!run.stdout.contains("/tmp/profkit-golden."));
}

#[test]
fn flag_timeline() {
    let v = json("ratio", &["--timeline"]);
    let lines = v["timeline"]["sessions"][0]["lines"]
        .as_array()
        .unwrap()
        .clone();
    assert!(lines.len() >= 3, "{v:#}");
    let v2 = json("ratio", &["--timeline=2"]);
    let lines2 = v2["timeline"]["sessions"][0]["lines"].as_array().unwrap();
    assert_eq!(lines2.len(), lines.len().div_ceil(2));
    let total = |ls: &[serde_json::Value]| -> u64 {
        ls.iter()
            .flat_map(|l| l["samples"].as_array().unwrap().clone())
            .map(|n| n.as_u64().unwrap())
            .sum()
    };
    assert_eq!(total(&lines), total(lines2));
    assert_eq!(total(&lines), v["samples_read"].as_u64().unwrap());
    let run = on_fixture("ratio", &["--timeline"]).expect(0);
    assert!(run.stdout.contains("cpu0 samples") && run.stdout.contains("cpu1 lost"));
}

#[test]
fn flag_format() {
    json("ratio", &["-l"]);
    let csv = on_fixture("ratio", &["-l", "--format", "csv"])
        .expect(0)
        .stdout;
    assert!(csv.starts_with(
        "samples,percent,cpu,tgid,tid,ns_tgid,ns_tid,comm,cgroup,app,image,symbol,vma,location\n"
    ));
    assert!(csv.contains(",shares,f_a,"), "{csv}");
    let text = on_fixture("ratio", &["-l", "--format", "text"])
        .expect(0)
        .stdout;
    assert!(text.contains("symbol name"));
}

#[test]
fn flag_session_dir_takes_a_directory_or_the_file() {
    let a = on_fixture("ratio", &["-l"]).expect(0).stdout;
    let b = profreport(&[
        "--session-dir",
        "../testdata/sessions/ratio/session.pkl",
        "--sysroot",
        BIN_DIR,
        "--search-dir",
        BIN_DIR,
        "-l",
    ])
    .expect(0)
    .stdout;
    assert_eq!(a, b);
}

#[test]
fn env_session_dir() {
    let o = std::process::Command::new(PROFREPORT)
        .args(["--sysroot", BIN_DIR, "--search-dir", BIN_DIR])
        .current_dir(cli_dir())
        .env("PROFKIT_SESSION_DIR", session("ratio"))
        .output()
        .unwrap();
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).contains("shares"));
}

#[test]
fn flag_merge() {
    let one = json("ratio", &[]);
    let v = json("ratio", &["--merge", "../testdata/sessions/ratio"]);
    assert_eq!(
        v["total_samples"].as_u64().unwrap(),
        2 * one["total_samples"].as_u64().unwrap()
    );
    // Without --session-dir, only the merged ones.
    let run = profreport(&[
        "--merge",
        "../testdata/sessions/ratio",
        "../testdata/sessions/pinned",
        "--sysroot",
        BIN_DIR,
        "--search-dir",
        BIN_DIR,
        "-l",
        "--format",
        "json",
    ])
    .expect(0);
    let v = run.json();
    assert_eq!(v["sessions"].as_array().unwrap().len(), 2);
    assert!(samples_of(&v, "f_a") > 0 && samples_of(&v, "f_cpu1") > 0);
}

#[test]
fn flag_kallsyms() {
    // The ratio session's own copy and the same file given explicitly agree.
    let a = on_fixture("ratio", &["-l"]).expect(0).stdout;
    let b = on_fixture(
        "ratio",
        &["-l", "--kallsyms", "../testdata/sessions/ratio/kallsyms"],
    )
    .expect(0)
    .stdout;
    assert_eq!(a, b);
    // A kallsyms of another kernel: its _text differs, which is said.
    let run = on_fixture(
        "ratio",
        &["-l", "--kallsyms", "../testdata/symbols/kallsyms"],
    )
    .expect(0);
    assert!(run.stderr.contains("kernel relocated"), "{}", run.stderr);
}

#[test]
fn flag_sysroot_and_search_dir() {
    // Without them, the recorded path is gone: offsets, and a warning naming it.
    let run = profreport(&["--session-dir", &session("ratio"), "-l"]).expect(0);
    assert!(run.stdout.contains("(no symbols)"), "{}", run.stdout);
    assert!(
        run.stderr.contains("/tmp/profkit-golden."),
        "{}",
        run.stderr
    );
    // --search-dir alone finds it by build-id.
    let run = profreport(&[
        "--session-dir",
        &session("ratio"),
        "-l",
        "--search-dir",
        BIN_DIR,
    ])
    .expect(0);
    assert!(run.stdout.contains("f_a"), "{}", run.stdout);
}

/// Copies a fixture session into `dir` as an unpacked `profctl archive`:
/// the binary under `debug/.build-id/ab/cdef…`.
fn unpack_as_archive(name: &str, dir: &Path) {
    let src = testdata().join("sessions").join(name);
    std::fs::copy(src.join("session.pkl"), dir.join("session.pkl")).unwrap();
    std::fs::copy(src.join("kallsyms"), dir.join("kallsyms")).unwrap();
    let bin = std::fs::read(testdata().join("sessions/bin/shares")).unwrap();
    let id = build_id(&bin);
    let hex: String = id.iter().map(|b| format!("{b:02x}")).collect();
    let at = dir.join("debug/.build-id").join(&hex[..2]);
    std::fs::create_dir_all(&at).unwrap();
    std::fs::write(at.join(&hex[2..]), bin).unwrap();
}

/// The GNU build-id note of an ELF file (enough of a parser for the fixture).
fn build_id(elf: &[u8]) -> Vec<u8> {
    let pat = b"GNU\0";
    let at = elf
        .windows(4)
        .enumerate()
        .find(|(i, w)| *w == pat && *i >= 12 && elf[i - 4..*i] == [3, 0, 0, 0] && elf[i - 8] == 20)
        .map(|(i, _)| i)
        .expect("build-id note");
    elf[at + 4..at + 24].to_vec()
}

#[test]
fn archives_are_searched_by_build_id_and_flag_debug_dir() {
    let d = tempdir();
    unpack_as_archive("ratio", d.path());
    let dir = d.path().to_str().unwrap();
    let run = profreport(&["--session-dir", dir, "-l"]).expect(0);
    assert!(run.stdout.contains("f_a"), "{}\n{}", run.stdout, run.stderr);
    // --debug-dir pointing at the same tree works for a session without it.
    let e = tempdir();
    std::fs::copy(d.path().join("session.pkl"), e.path().join("session.pkl")).unwrap();
    let debug = d.path().join("debug");
    let run = profreport(&[
        "--session-dir",
        e.path().to_str().unwrap(),
        "-l",
        "--debug-dir",
        debug.to_str().unwrap(),
    ])
    .expect(0);
    assert!(run.stdout.contains("f_a"), "{}\n{}", run.stdout, run.stderr);
}

#[test]
fn flag_no_progress() {
    on_fixture("ratio", &["--no-progress"]).expect(0);
}

#[test]
fn help_lists_specs_and_examples() {
    let run = profreport(&["--help"]).expect(0);
    assert!(run.stdout.contains("image-exclude:GLOB"));
    assert!(run.stdout.contains("EXAMPLES"));
}

#[test]
fn bad_values_exit_2_with_one_line_naming_value_and_choices() {
    let cases: &[(&[&str], &[&str])] = &[
        (&["--separate=cpu,bogus"], &["'bogus'", "thread"]),
        (
            &["--sort", "size"],
            &["'size'", "samples, symbol, image, vma"],
        ),
        (&["--format", "xml"], &["'xml'", "text, json, csv"]),
        (&["--demangle", "fancy"], &["'fancy'", "none, normal"]),
        (&["--threshold", "200"], &["'200'", "0 to 100"]),
        (&["--timeline=0"], &["'0'", "1 or more"]),
        (
            &["event:cycles"],
            &["'event:cycles'", "cpu, tgid, tid, image, image-exclude"],
        ),
        (&["cpu:x"], &["'x'", "numbers or ranges"]),
        (&["tgid:"], &["'tgid:'", "needs a value"]),
        (&["image:[oops"], &["'[oops'", "unclosed"]),
        (&["--show-address"], &["--symbols"]),
        (&["--debug-info"], &["--symbols"]),
        (
            &["--kallsyms", "/nonexistent/kallsyms"],
            &["/nonexistent/kallsyms", "not a file"],
        ),
        (
            &["--sysroot", "/nonexistent"],
            &["/nonexistent", "not a directory"],
        ),
        (
            &["--search-dir", "/nonexistent"],
            &["/nonexistent", "not a directory"],
        ),
        (
            &["--debug-dir", "/nonexistent"],
            &["/nonexistent", "not a directory"],
        ),
        (&["--bogus-flag"], &["--bogus-flag"]),
    ];
    for (args, needles) in cases {
        let mut all = vec!["--session-dir", "../testdata/sessions/ratio"];
        all.extend_from_slice(args);
        let run = profreport(&all).expect(2);
        assert_eq!(run.stderr.lines().count(), 1, "{args:?}: {}", run.stderr);
        for n in *needles {
            assert!(
                run.stderr.contains(n),
                "{args:?}: {n} not in {}",
                run.stderr
            );
        }
        assert!(run.stdout.is_empty());
    }
}

#[test]
fn no_session_exits_1_and_says_how_to_make_one() {
    let d = tempdir();
    let run = profreport(&["--session-dir", d.path().to_str().unwrap()]).expect(1);
    assert!(run.stderr.contains("profctl record"), "{}", run.stderr);
    assert!(run.stderr.contains(d.path().to_str().unwrap()));
}

#[test]
fn not_a_session_exits_1_naming_the_file() {
    let d = tempdir();
    std::fs::write(d.path().join("session.pkl"), b"hello world, not a session").unwrap();
    let run = profreport(&["--session-dir", d.path().to_str().unwrap()]).expect(1);
    assert!(
        run.stderr.contains("not a profkit session"),
        "{}",
        run.stderr
    );
}

#[test]
fn a_wrong_version_names_both_versions() {
    let d = tempdir();
    let mut bytes = std::fs::read(testdata().join("sessions/ratio/session.pkl")).unwrap();
    bytes[8] = 77;
    std::fs::write(d.path().join("session.pkl"), bytes).unwrap();
    let run = profreport(&["--session-dir", d.path().to_str().unwrap()]).expect(1);
    assert!(run.stderr.contains("version 77"), "{}", run.stderr);
    assert!(
        run.stderr
            .contains(&format!("versions {MIN_READ_VERSION} to {FORMAT_VERSION}")),
        "{}",
        run.stderr
    );
}

#[test]
fn torn_and_corrupt_sessions_name_the_chunk_on_stderr_and_in_the_header() {
    for name in ["torn", "corrupt"] {
        let run = on_fixture(name, &["-l"]).expect(0);
        let line = run
            .stdout
            .lines()
            .find(|l| l.contains(" chunk ") && l.contains(" at byte "))
            .unwrap_or_else(|| panic!("{name}: no chunk line in\n{}", run.stdout));
        assert!(run.stderr.contains("at byte"), "{name}: {}", run.stderr);
        assert!(run.stdout.contains("f_a"), "{name}: the rest is reported");
        if name == "torn" {
            assert!(line.starts_with("torn chunk:"), "{line}");
            assert!(run.stdout.contains("not stopped cleanly"));
        } else {
            assert!(line.starts_with("bad chunk:"), "{line}");
            assert!(
                run.stdout.contains("in unreadable chunks"),
                "{}",
                run.stdout
            );
        }
    }
}

/// Writes `dir/session.pkl`: one CPU at 99 Hz, binary `i + 1` (cookie)
/// of `kind` at each path of `bins` with its number of samples (at offset
/// `offset`), in one chunk.
fn session_of_binaries(dir: &Path, kind: CookieKind, bins: &[(String, u64)], offset: u64) {
    let header = SessionHeader {
        event: EventConfigDesc {
            name: "cpu-clock".into(),
            frequency: Some(99),
            ..Default::default()
        },
        cpus: vec![0],
        ..Default::default()
    };
    let mut w = SessionWriter::create(dir.join("session.pkl"), &header).unwrap();
    let mut enc = ChunkEncoder::new();
    for (i, (path, samples)) in bins.iter().enumerate() {
        let cookie = i as u64 + 1;
        enc.event(&Event::CookieDef(CookieEntry {
            cookie,
            kind: kind.clone(),
            path: path.clone(),
            build_id: None,
            dev: 0,
            inode: 0,
            generation: 0,
            base: 0,
            pid: None,
            file: Default::default(),
        }));
        for _ in 0..*samples {
            enc.sample(0, 1, 1, false, cookie, offset);
        }
    }
    w.append_chunk(0, 1, enc.bytes()).unwrap();
}

#[test]
fn a_closed_stdout_is_success() {
    // A report far larger than a pipe's buffer, whose reader goes away.
    let d = tempdir();
    let bins: Vec<(String, u64)> = (1..=5000)
        .map(|i| {
            (
                format!("[binary number {i} with a long name to fill the pipe quickly]"),
                1,
            )
        })
        .collect();
    session_of_binaries(d.path(), CookieKind::Other, &bins, 0);
    let mut child = std::process::Command::new(PROFREPORT)
        .args(["--session-dir", d.path().to_str().unwrap()])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut first = [0u8; 16];
    std::io::Read::read_exact(&mut out, &mut first).unwrap();
    drop(out);
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
}

#[test]
fn flag_verbose_prints_every_warning() {
    // Twelve binaries that do not exist: twelve warnings.
    let d = tempdir();
    let bins: Vec<(String, u64)> = (1..=12)
        .map(|i| (format!("/nonexistent/bin{i}"), 1))
        .collect();
    session_of_binaries(d.path(), CookieKind::User, &bins, 0x10);
    let dir = d.path().to_str().unwrap();
    let run = profreport(&["--session-dir", dir, "-l"]).expect(0);
    assert_eq!(run.stderr.matches("warning:").count(), 3, "{}", run.stderr);
    assert!(run.stderr.contains("10 more warnings (-v shows them all)"));
    let run = profreport(&["--session-dir", dir, "-l", "--verbose"]).expect(0);
    assert_eq!(run.stderr.matches("warning:").count(), 12, "{}", run.stderr);
}

/// Issue 26.3: a system-wide session meets many binaries without symbols.
/// Twelve stripped programs and five missing ones: three warning lines by
/// default, the first counting the twelve with their share of samples;
/// `-v` lists all seventeen.
#[test]
fn many_binaries_without_symbols_are_one_warning_line() {
    let d = tempdir();
    let Some(built) = crate::live::build_workload(d.path(), "spin", &["-pthread"]) else {
        return;
    };
    let strip = std::process::Command::new("strip").arg(&built).status();
    assert!(
        strip.is_ok_and(|s| s.success()),
        "strip (binutils) is needed"
    );
    // tool1 has 12 samples, tool12 one: the biggest are named.
    let bins: Vec<(String, u64)> = (1..=17u64)
        .map(|i| {
            if i <= 12 {
                let p = d.path().join(format!("tool{i}"));
                std::fs::copy(&built, &p).unwrap();
                (p.display().to_string(), 13 - i)
            } else {
                (format!("/nonexistent/bin{i}"), 1)
            }
        })
        .collect();
    session_of_binaries(d.path(), CookieKind::User, &bins, 0x10);
    let dir = d.path().to_str().unwrap();
    let run = profreport(&["--session-dir", dir, "-l"]).expect(0);
    let lines: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.contains("warning:"))
        .collect();
    assert_eq!(lines.len(), 3, "{}", run.stderr);
    // 78 of 83 samples; tool1 has 12, tool2 11, tool3 10.
    assert!(
        lines[0].contains(
            "12 binaries have no symbols: 78 samples (94.0 %) shown as offsets, \
             most in tool1 (14.5 %), tool2 (13.3 %), tool3 (12.0 %)"
        ),
        "{}",
        lines[0]
    );
    assert!(
        lines[2].contains("4 more warnings (-v shows them all)"),
        "{}",
        lines[2]
    );
    let run = profreport(&["--session-dir", dir, "-l", "-v"]).expect(0);
    assert_eq!(run.stderr.matches("warning:").count(), 17, "{}", run.stderr);
    assert_eq!(
        run.stderr.matches("has no .symtab").count(),
        12,
        "{}",
        run.stderr
    );
    let json = profreport(&["--session-dir", dir, "-l", "--format", "json"])
        .expect(0)
        .json();
    let unnamed = json["unnamed_binaries"].as_array().unwrap();
    assert_eq!(unnamed.len(), 12);
    assert_eq!(unnamed[0]["samples"], 12);
}

#[test]
fn an_empty_session_file_exits_1_saying_so() {
    let d = tempdir();
    std::fs::write(d.path().join("session.pkl"), b"").unwrap();
    let run = profreport(&["--session-dir", d.path().to_str().unwrap()]).expect(1);
    assert!(
        run.stderr.to_lowercase().contains("empty"),
        "{}",
        run.stderr
    );
}

#[test]
fn samples_whose_cookie_definition_is_missing_are_shown_and_named() {
    // A session whose cookie table never made it to the file (its chunk
    // was lost): the samples still count, under a name that says why.
    let d = tempdir();
    let header = SessionHeader {
        event: EventConfigDesc {
            name: "cpu-clock".into(),
            frequency: Some(99),
            ..Default::default()
        },
        cpus: vec![0],
        ..Default::default()
    };
    let mut w = SessionWriter::create(d.path().join("session.pkl"), &header).unwrap();
    let mut enc = ChunkEncoder::new();
    for i in 0..10u64 {
        enc.sample(0, 7, 7, false, 0x4242, 0x100 + i);
    }
    w.append_chunk(0, 1, enc.bytes()).unwrap();
    drop(w);
    let run = profreport(&["--session-dir", d.path().to_str().unwrap()]).expect(0);
    assert!(run.stdout.contains("10"), "{}", run.stdout);
    let all = format!("{}{}", run.stdout, run.stderr);
    assert!(all.contains("definition was not read"), "{all}");
}

#[test]
fn output_never_goes_through_a_planted_link_or_into_someone_elses_file() {
    let d = tempfile::tempdir().unwrap();
    let target = d.path().join("target");
    std::fs::write(&target, "keep").unwrap();
    let link = d.path().join("report.txt");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let r = on_fixture("ratio", &["-o", link.to_str().unwrap()]).expect(1);
    assert!(r.stderr.contains("symbolic link"), "{}", r.stderr);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
    // A file of ours is replaced; one of another user is not touched.
    let mine = d.path().join("mine.txt");
    std::fs::write(&mine, "old").unwrap();
    on_fixture("ratio", &["-o", mine.to_str().unwrap()]).expect(0);
    assert!(std::fs::read_to_string(&mine).unwrap().contains("shares"));
    let theirs = d.path().join("theirs.txt");
    std::fs::write(&theirs, "theirs").unwrap();
    if std::os::unix::fs::chown(&theirs, Some(65534), None).is_ok() {
        let r = on_fixture("ratio", &["-o", theirs.to_str().unwrap()]).expect(1);
        assert!(r.stderr.contains("belongs to uid 65534"), "{}", r.stderr);
        assert_eq!(std::fs::read_to_string(&theirs).unwrap(), "theirs");
    }
}

/// Devices, our standard output and FIFOs the user named are ordinary
/// outputs (issue 26.2: they were refused as "not a regular file"); none is
/// replaced by a regular file.
#[test]
fn output_to_dev_null_dev_stdout_and_a_fifo_works() {
    on_fixture("ratio", &["-o", "/dev/null"]).expect(0);
    assert!(std::fs::metadata("/dev/null")
        .unwrap()
        .file_type()
        .is_char_device());
    let r = on_fixture("ratio", &["-o", "/dev/stdout"]).expect(0);
    assert!(r.stdout.contains("shares"), "{}", r.stdout);
    let d = tempfile::tempdir().unwrap();
    let fifo = d.path().join("report.fifo");
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
    )
    .unwrap();
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read_to_string(fifo).unwrap())
    };
    on_fixture("ratio", &["-o", fifo.to_str().unwrap()]).expect(0);
    assert!(reader.join().unwrap().contains("shares"));
    assert!(std::fs::symlink_metadata(&fifo)
        .unwrap()
        .file_type()
        .is_fifo());
    // A FIFO another user planted is refused at once (nothing waits on it).
    let theirs = d.path().join("theirs.fifo");
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        &theirs,
        rustix::fs::Mode::from_raw_mode(0o666),
    )
    .unwrap();
    if std::os::unix::fs::chown(&theirs, Some(65534), None).is_ok() {
        let r = on_fixture("ratio", &["-o", theirs.to_str().unwrap()]).expect(1);
        assert!(r.stderr.contains("belongs to uid 65534"), "{}", r.stderr);
    }
}

#[test]
fn a_crashed_imports_scratch_dir_is_swept_by_the_next() {
    let d = tempfile::tempdir().unwrap();
    let tmp = d.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    // Left by a profreport that crashed (no such pid).
    let stale = tmp.join("profreport-import-4000000000-0");
    std::fs::create_dir(&stale).unwrap();
    std::fs::write(stale.join("session.pkl"), "x").unwrap();
    let data = d.path().join("perf.data");
    std::fs::write(&data, b"PERFILE2 but not really a perf.data file").unwrap();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_profreport"))
        .args(["--import"])
        .arg(&data)
        .env("TMPDIR", &tmp)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert!(!stale.exists(), "a crashed run's scratch dir was left");
    assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), 0);
}

#[test]
fn flag_annotate_reads_an_archives_binary() {
    let d = tempdir();
    unpack_as_archive("ratio", d.path());
    let dir = d.path().to_str().unwrap();
    let run = profreport(&["--session-dir", dir, "--annotate=f_a", "--assembly"]).expect(0);
    assert!(
        run.stdout.contains("Annotation of f_a in shares"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("imul"),
        "{}\n{}",
        run.stdout,
        run.stderr
    );
}

#[test]
fn flag_annotate_of_an_unknown_symbol_names_the_closest() {
    let run = on_fixture("ratio", &["--annotate=f_c"]).expect(1);
    assert!(
        run.stderr
            .contains("no sampled function of that name; the closest: f_a, f_b"),
        "{}",
        run.stderr
    );
}

#[test]
fn flag_annotate_without_debug_info_says_what_is_missing() {
    let d = tempdir();
    let bin = d.path().join("shares");
    std::fs::copy(testdata().join("sessions/bin/shares"), &bin).unwrap();
    match std::process::Command::new("objcopy")
        .arg("--strip-debug")
        .arg(&bin)
        .status()
    {
        Ok(s) if s.success() => {}
        other => {
            profkit_testsupport::skip(format!("objcopy --strip-debug failed: {other:?}"));
            return;
        }
    }
    let dir = d.path().to_str().unwrap();
    let run = profreport(&[
        "--session-dir",
        &session("ratio"),
        "--sysroot",
        dir,
        "--search-dir",
        dir,
        "--annotate=f_a",
    ])
    .expect(0);
    assert!(
        run.stdout
            .contains("no source lines (build with -g, or install the binary's debug symbols"),
        "{}",
        run.stdout
    );
    assert!(
        run.stdout.contains("instruction"),
        "falls back to instructions: {}",
        run.stdout
    );
}

#[test]
fn flag_annotate_options_need_annotate_and_a_known_syntax() {
    on_fixture("ratio", &["--source-dir", "/tmp"]).expect(2);
    on_fixture("ratio", &["--assembly"]).expect(2);
    let run = on_fixture("ratio", &["--annotate=f_a", "-M", "arm"]).expect(2);
    assert!(
        run.stderr
            .contains("att (objdump's and perf's default) or intel"),
        "{}",
        run.stderr
    );
}

#[test]
fn flag_annotate_as_csv_and_not_as_stacks() {
    let csv = on_fixture(
        "ratio",
        &["--annotate=f_b", "--assembly", "--format", "csv"],
    )
    .expect(0)
    .stdout;
    assert!(
        csv.starts_with(
            "function,image,file,line,address,instruction,inlined,samples,percent,cpu\n"
        ),
        "{csv}"
    );
    let rows: u64 = csv
        .lines()
        .skip(1)
        .map(|l| l.rsplit(',').nth(2).unwrap().parse::<u64>().unwrap())
        .sum();
    assert_eq!(rows, 299, "f_b's samples, one row per instruction: {csv}");
    let run = on_fixture("ratio", &["--annotate=f_b", "--format", "collapsed"]).expect(2);
    assert!(
        run.stderr.contains("written as text, json or csv"),
        "{}",
        run.stderr
    );
}

#[test]
fn flag_time_selects_a_window_and_bad_windows_exit_2() {
    let all = on_fixture("ratio", &["--format", "json"]).expect(0).json();
    let half = on_fixture("ratio", &["--time", "0%-50%", "--format", "json"])
        .expect(0)
        .json();
    let rest = on_fixture("ratio", &["--time", "50%-100%", "--format", "json"])
        .expect(0)
        .json();
    let n = |v: &serde_json::Value| v["total_samples"].as_u64().unwrap();
    assert_eq!(n(&half) + n(&rest), n(&all), "the two halves add up");
    assert!(n(&half) > 0 && n(&rest) > 0);
    assert_eq!(half["window"], true);
    assert!(all.get("window").is_none());
    for bad in ["20,10", "", "10", "10%/0", "x,2", "25:61:00,"] {
        let run = on_fixture("ratio", &["--time", bad]).expect(2);
        assert!(
            run.stderr.contains(&format!("'{bad}'")),
            "{bad}: {}",
            run.stderr
        );
    }
}
