//! `profreport --import` on the forms of perf.data that `perf record`
//! writes beyond a plain file: pipe mode read from standard input
//! (`perf record -o - ... | profreport --import -`), compressed, and
//! another machine's recording without kernel mappings
//! (linux-perf-data's fixtures in `testdata/perf-data`).

use crate::util::{profreport, testdata};
use std::io::Write;
use std::process::{Command, Stdio};

fn fixture(name: &str) -> String {
    testdata()
        .join("perf-data")
        .join(name)
        .to_str()
        .unwrap()
        .to_owned()
}

/// profreport `args` with `input` on its standard input: (status, stdout,
/// stderr).
fn with_stdin(args: &[&str], input: &[u8]) -> (i32, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_profreport"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let input = input.to_vec();
    let writer = std::thread::spawn(move || {
        // profreport may stop reading early (a refused file): a broken
        // pipe then is not the test's failure.
        let _ = stdin.write_all(&input);
    });
    let o = child.wait_with_output().unwrap();
    writer.join().unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The report's rows (after the "samples ... image" heading).
fn rows(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .skip_while(|l| !l.starts_with("samples"))
        .map(str::to_owned)
        .collect()
}

/// `--import -`: a `perf record -z -o -` stream on standard input gives
/// the report the same stream read from its file gives: all 8 samples,
/// in the kernel, none lost. A file-mode perf.data on standard input is
/// refused, saying why.
#[test]
fn import_dash_reads_a_pipe_mode_stream_from_standard_input() {
    let path = fixture("sleep.compressed.pipe.data");
    let bytes = std::fs::read(&path).unwrap();
    let (code, stdout, stderr) = with_stdin(&["--import", "-"], &bytes);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("Samples:  8 in this report, 8 read"),
        "{stdout}"
    );
    assert!(stdout.contains("Lost:     0 "), "{stdout}");
    let from_file = profreport(&["--import", &path]).expect(0);
    assert_eq!(rows(&stdout), rows(&from_file.stdout));
    assert!(rows(&stdout)
        .iter()
        .any(|r| r.contains("[kernel.kallsyms]")));

    let file_mode = std::fs::read(fixture("sleep.data")).unwrap();
    let (code, _, stderr) = with_stdin(&["--import", "-"], &file_mode);
    assert_eq!(code, 1, "{stderr}");
    assert!(
        stderr.contains("a file-mode perf.data cannot be read from standard input"),
        "{stderr}"
    );
}

/// Another machine's recordings, compressed (`-z`, both record types) or
/// not, two without kernel mappings (said): every sample imported, none
/// lost.
#[test]
fn import_reads_compressed_files_and_keeps_kernel_samples_without_mappings() {
    for (name, samples, unmapped) in [
        ("sleep.data", 7, true),
        ("sleep.compressed.data", 8, false),
        ("sleep.compressed2.data", 7, true),
    ] {
        let run = profreport(&["--import", &fixture(name)]).expect(0);
        assert!(
            run.stdout.contains(&format!(
                "Samples:  {samples} in this report, {samples} read"
            )),
            "{name}: {}",
            run.stdout
        );
        assert!(
            run.stdout.contains("Lost:     0 "),
            "{name}: {}",
            run.stdout
        );
        assert_eq!(
            run.stderr.contains("no kernel mapping"),
            unmapped,
            "{name}: {}",
            run.stderr
        );
        if unmapped {
            // Which kernel it came from, and how to name its symbols.
            assert!(
                run.stderr.contains("(the file's OS release)")
                    && run.stderr.contains("give --kallsyms FILE"),
                "{name}: {}",
                run.stderr
            );
        }
    }
}

/// (percent, symbol) rows of a JSON `-l` report.
fn shares(v: &serde_json::Value) -> Vec<(f64, String)> {
    crate::util::rows(v)
        .iter()
        .map(|r| {
            (
                r["percent"].as_f64().unwrap_or(0.0),
                r["symbol"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

/// Live, root: the known-ratio workload recorded by perf three ways, a
/// plain file, `-z` (zstd-compressed records) and `-o -` (pipe mode,
/// written to a file and read again from standard input): each import
/// gives perf report's shares of the same file within a point, for every
/// symbol of 5 % or more.
#[test]
fn live_compressed_and_pipe_recordings_import_as_perf_reads_them() {
    let _rec = crate::util::recording();
    let perf = std::env::var("PERF").unwrap_or_else(|_| "/usr/bin/perf".into());
    if !std::path::Path::new(&perf).exists() {
        eprintln!("SKIP: no perf at {perf} (set PERF=...)");
        return;
    }
    if !profkit_testsupport::perf_ok() {
        return;
    }
    let d = crate::util::tempdir();
    let Some(shares_bin) = crate::live::build_shares(d.path()) else {
        return;
    };
    let cmd = [shares_bin.to_str().unwrap(), "ratio", "60"];
    let base = ["-q", "-e", "cpu-clock", "-F", "4000", "--no-bpf-event"];
    let mut checked = 0;
    for (name, extra) in [("plain.data", &[][..]), ("z.data", &["-z"][..])] {
        let data = d.path().join(name);
        let mut args: Vec<&str> = base.to_vec();
        args.extend_from_slice(extra);
        args.extend(["-o", data.to_str().unwrap(), "--"]);
        args.extend(cmd);
        if !crate::live::perf_record(&perf, d.path(), &data, &args) {
            return;
        }
        let Some(theirs) = crate::live::perf_report(&perf, &data) else {
            return;
        };
        let ours = shares(
            &profreport(&["--import", data.to_str().unwrap(), "-l", "--format", "json"])
                .expect(0)
                .json(),
        );
        checked += compare(name, &ours, &theirs);
    }
    // Pipe mode: perf writes the stream to its standard output.
    let pipe = d.path().join("pipe.data");
    let out = Command::new(&perf)
        .arg("record")
        .args(base)
        .args(["--no-buildid", "-o", "-", "--"])
        .args(cmd)
        .current_dir(d.path())
        .stderr(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success() && !out.stdout.is_empty(),
        "perf record -o -"
    );
    std::fs::write(&pipe, &out.stdout).unwrap();
    let Some(theirs) = crate::live::perf_report(&perf, &pipe) else {
        return;
    };
    let from_file = profreport(&["--import", pipe.to_str().unwrap(), "-l", "--format", "json"])
        .expect(0)
        .json();
    checked += compare("pipe.data", &shares(&from_file), &theirs);
    let (code, stdout, stderr) =
        with_stdin(&["--import", "-", "-l", "--format", "json"], &out.stdout);
    assert_eq!(code, 0, "{stderr}");
    let from_stdin: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    assert_eq!(
        shares(&from_stdin),
        shares(&from_file),
        "standard input and the file"
    );
    assert!(checked >= 3, "{checked} symbols compared");
}

/// The symbols of 5 % or more in `theirs` (perf report) are in `ours`
/// within a point; how many were compared.
fn compare(name: &str, ours: &[(f64, String)], theirs: &[(f64, String)]) -> usize {
    eprintln!("{name}: perf {:?}", &theirs[..theirs.len().min(3)]);
    eprintln!("{name}: ours {:?}", &ours[..ours.len().min(3)]);
    let mut n = 0;
    for (p, s) in theirs.iter().filter(|(p, _)| *p >= 5.0) {
        let mine = ours
            .iter()
            .find(|(_, o)| o == s)
            .unwrap_or_else(|| panic!("{name}: {s} not in {ours:?}"))
            .0;
        assert!(
            (mine - p).abs() <= 1.0,
            "{name}: {s} {mine} % against perf's {p} %"
        );
        n += 1;
    }
    assert!(n > 0, "{name}: nothing of 5 % or more in {theirs:?}");
    n
}
