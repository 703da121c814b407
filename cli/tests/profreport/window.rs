//! Live, root: `--time` on a recording with a steady load (two_loops of
//! testdata/workloads/loops.c, 50 ms sync rounds): the middle third of
//! the recording holds a third of its samples, within 3 %. Skipped with a
//! printed reason where perf_event_open or cc are missing, unless
//! PROFKIT_REQUIRE_PERF=1, where that is a failure.

use crate::live::build_workload;
use crate::util::*;

use profkit_testsupport::perf_ok;

#[test]
fn live_the_middle_third_of_a_recording_holds_a_third_of_its_samples() {
    let _rec = recording();
    if !perf_ok() {
        return;
    }
    let d = tempdir();
    let Some(loops) = build_workload(d.path(), "loops", &[]) else {
        return;
    };
    crate::live::record_with(
        d.path(),
        &["--sync-interval", "50"],
        &[loops.to_str().unwrap(), "500"],
    );
    let s = d.path().join("s");
    let total = |args: &[&str]| {
        let mut all = vec![
            "--session-dir",
            s.to_str().unwrap(),
            "--format",
            "json",
            "image:loops",
        ];
        all.extend_from_slice(args);
        profreport(&all).expect(0).json()["total_samples"]
            .as_u64()
            .unwrap()
    };
    let whole = total(&[]);
    let middle = total(&["--time", "33.3333%-66.6667%"]);
    let share = 100.0 * middle as f64 / whole as f64;
    eprintln!("loops: {whole} samples, {middle} in the middle third ({share:.2} %)");
    assert!(whole > 2000, "too few samples");
    assert!(
        (share - 100.0 / 3.0).abs() <= 3.0,
        "middle third holds {share:.2} %"
    );
}
