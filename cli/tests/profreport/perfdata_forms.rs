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
    }
}
