//! Golden outputs: each case runs profreport on a checked-in session and
//! compares stdout with `testdata/golden/NAME`. `PROFKIT_BLESS=1` writes
//! the files instead (review the diff before committing).

use crate::util::*;

fn check(golden: &str, session: &str, args: &[&str]) {
    let run = on_fixture(session, args).expect(0);
    let path = testdata().join("golden").join(golden);
    if std::env::var("PROFKIT_BLESS").as_deref() == Ok("1") {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &run.stdout).unwrap();
        eprintln!("blessed {}", path.display());
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; run with PROFKIT_BLESS=1 to create it",
            path.display()
        )
    });
    if run.stdout != want {
        let first = run
            .stdout
            .lines()
            .zip(want.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| run.stdout.lines().count().min(want.lines().count()));
        panic!(
            "{} differs from the output (first at line {}); PROFKIT_BLESS=1 regenerates it\n\
             --- expected\n{want}\n--- got\n{}\n--- stderr\n{}",
            path.display(),
            first + 1,
            run.stdout,
            run.stderr
        );
    }
}

macro_rules! golden {
    ($name:ident, $file:expr, $session:expr, [$($arg:expr),*]) => {
        #[test]
        fn $name() {
            check($file, $session, &[$($arg),*]);
        }
    };
}

golden!(golden_ratio_images, "ratio.txt", "ratio", []);
golden!(golden_ratio_symbols, "ratio-l.txt", "ratio", ["-l"]);
golden!(
    golden_ratio_symbols_json,
    "ratio-l.json",
    "ratio",
    ["-l", "--format", "json"]
);
golden!(
    golden_ratio_symbols_csv,
    "ratio-l.csv",
    "ratio",
    ["-l", "--format", "csv"]
);
golden!(
    golden_ratio_separate_lib,
    "ratio-lib.txt",
    "ratio",
    ["--separate=lib"]
);
golden!(
    golden_ratio_timeline,
    "ratio-timeline.txt",
    "ratio",
    ["--timeline"]
);
golden!(
    golden_pinned_separate_cpu,
    "pinned-cpu.txt",
    "pinned",
    ["-l", "--separate=cpu"]
);
golden!(
    golden_pinned_separate_cpu_json,
    "pinned-cpu.json",
    "pinned",
    ["-l", "--separate=cpu", "--format", "json"]
);
golden!(
    golden_pinned_separate_thread,
    "pinned-thread.txt",
    "pinned",
    ["-l", "--separate=thread"]
);
golden!(
    golden_pinned_debug_info_and_addresses,
    "pinned-g.txt",
    "pinned",
    ["-l", "-g", "-w", "image:shares"]
);
golden!(golden_torn_session, "torn.txt", "torn", ["-l"]);
golden!(golden_corrupt_session, "corrupt.txt", "corrupt", ["-l"]);
golden!(
    golden_merged_sessions,
    "merged.txt",
    "ratio",
    ["-l", "--merge", "../testdata/sessions/pinned"]
);
golden!(
    golden_callgraph_blocks,
    "callgraph-c.txt",
    "callgraph",
    ["-c"]
);
golden!(
    golden_callgraph_children,
    "callgraph-children.txt",
    "callgraph",
    ["-l", "--children"]
);
golden!(
    golden_callgraph_collapsed,
    "callgraph-collapsed.txt",
    "callgraph",
    ["--format", "collapsed"]
);
golden!(
    golden_callgraph_csv,
    "callgraph-c.csv",
    "callgraph",
    ["-c", "--format", "csv"]
);

// --annotate: per source line (sources found with --source-dir: the path
// recorded in the binary is the build machine's), per instruction, mixed,
// Intel syntax, per CPU, every function above a threshold, and JSON.
golden!(
    golden_annotate_source,
    "annotate-f_a.txt",
    "ratio",
    ["--annotate=f_a", "--source-dir", "../testdata/workloads"]
);
golden!(
    golden_annotate_source_json,
    "annotate-f_a.json",
    "ratio",
    [
        "--annotate=f_a",
        "--source-dir",
        "../testdata/workloads",
        "--format",
        "json"
    ]
);
golden!(
    golden_annotate_assembly,
    "annotate-f_a-asm.txt",
    "ratio",
    ["--annotate=f_a", "--assembly"]
);
golden!(
    golden_annotate_mixed,
    "annotate-f_a-mixed.txt",
    "ratio",
    [
        "--annotate=f_a",
        "--source",
        "--assembly",
        "--source-dir",
        "../testdata/workloads"
    ]
);
golden!(
    golden_annotate_intel,
    "annotate-f_b-intel.txt",
    "ratio",
    ["--annotate=f_b", "--assembly", "-M", "intel"]
);
golden!(
    golden_annotate_separate_cpu,
    "annotate-pinned-cpu.txt",
    "pinned",
    [
        "--annotate=f_cpu0",
        "--separate=cpu",
        "--source-dir",
        "../testdata/workloads"
    ]
);
golden!(
    golden_annotate_above_threshold,
    "annotate-threshold.txt",
    "ratio",
    [
        "--annotate",
        "-t",
        "10",
        "--source-dir",
        "../testdata/workloads"
    ]
);
