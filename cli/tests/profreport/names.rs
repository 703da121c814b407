//! Names follow time: a child that renames itself right after `fork`, or
//! execs once or twice, has every one of its samples under its own name,
//! whichever CPU's ring the sync stage reads first. Before the fix 3 runs
//! in 30 showed the renamed child under its parent's name; the order is up
//! to the scheduler, so the sync stage's unit test
//! `a_child_renamed_after_fork_keeps_its_name_whatever_the_ring_order`
//! feeds both orders for certain.

use std::collections::BTreeMap;

use crate::live::{build_workload, record_with};
use crate::util::*;

use profkit_testsupport::perf_ok;

/// Records testdata/workloads/forker.c ten times; in each, every child's
/// burner is shown under the child's own name and only under it.
#[test]
fn live_forked_renamed_and_execd_children_carry_their_own_names_every_time() {
    let _rec = recording();
    if !perf_ok() {
        return;
    }
    let d = tempdir();
    let Some(forker) = build_workload(d.path(), "forker", &[]) else {
        return;
    };
    for link in ["stage1", "stage2"] {
        std::os::unix::fs::symlink(&forker, d.path().join(link)).unwrap();
    }
    let expected = [
        ("burn_forked", "forker"),
        ("burn_renamed", "renamed"),
        ("burn_stage1", "stage1"),
        ("burn_stage2", "stage2"),
    ];
    for run in 0..10 {
        let _ = std::fs::remove_dir_all(d.path().join("s"));
        record_with(d.path(), &[], &["./forker", "100000000"]);
        let s = d.path().join("s");
        let v = profreport(&[
            "--session-dir",
            s.to_str().unwrap(),
            "--format",
            "json",
            "-l",
            "--separate=thread",
        ])
        .expect(0)
        .json();
        // symbol -> command -> samples
        let mut seen: BTreeMap<String, BTreeMap<String, u64>> = BTreeMap::new();
        for r in rows(&v) {
            let (Some(sym), Some(comm)) = (r["symbol"].as_str(), r["comm"].as_str()) else {
                continue;
            };
            *seen
                .entry(sym.to_owned())
                .or_default()
                .entry(comm.to_owned())
                .or_default() += r["samples"].as_u64().unwrap();
        }
        for (sym, comm) in expected {
            let names = seen.get(sym).cloned().unwrap_or_default();
            assert!(
                names.get(comm).is_some_and(|&n| n > 0) && names.len() == 1,
                "run {run}: {sym} should be under {comm} only, is under {names:?}"
            );
        }
    }
}
