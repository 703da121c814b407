//! A full disk under a recording: its losses counted per CPU, and `stop`
//! still succeeds.

use super::*;

#[test]
fn a_full_disk_is_counted_per_cpu_and_stop_still_succeeds() {
    if !perf_ok() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let Some(_guard) = small_tmpfs(tmp.path()) else {
        return;
    };
    let mnt = _guard.0.clone();
    let ds = mnt.join("s");
    let ds = ds.to_str().unwrap();
    let _stop = StopOnDrop(std::path::PathBuf::from(ds));
    let o = profctl(tmp.path(), &["start", "-F", "4000", "--session-dir", ds]);
    assert!(o.status.success(), "{}", text(&o));
    fill(&mnt);
    let mut workers: Vec<Child> = profkit_perf::online_cpus()
        .unwrap()
        .iter()
        .map(|&c| busy_on(c))
        .collect();
    std::thread::sleep(Duration::from_millis(1500));
    let o = profctl(tmp.path(), &["status", "--session-dir", ds]);
    assert!(
        text(&o).contains("running"),
        "the daemon stays up: {}",
        text(&o)
    );
    let o = profctl(tmp.path(), &["stop", "--session-dir", ds]);
    for w in &mut workers {
        let _ = w.kill();
        let _ = w.wait();
    }
    assert!(
        o.status.success(),
        "stop succeeds on a full disk: {}",
        text(&o)
    );
    assert!(
        text(&o).contains("warning: cpu"),
        "the summary warns about the loss: {}",
        text(&o)
    );
    let r = SessionReader::open(mnt.join("s/session.pkl")).unwrap();
    let f = r.footer().expect("the footer fits in the reserved space");
    let disk: u64 = f.accounting.iter().map(|a| a.lost_disk_full).sum();
    assert!(disk > 0, "{:?}", f.accounting);
    for a in &f.accounting {
        assert_eq!(
            a.samples_received,
            a.samples_written
                + a.lost_no_mapping
                + a.lost_no_task
                + a.lost_overflow
                + a.lost_disk_full,
            "every sample of cpu {} is written or counted: {a:?}",
            a.cpu
        );
    }
    let mut n = 0;
    for c in r.chunks() {
        n += r.for_each_sample(c, |_| {}, |_| {}).unwrap();
    }
    assert_eq!(
        n,
        f.accounting.iter().map(|a| a.samples_written).sum::<u64>()
    );
    assert!(
        !mnt.join("s/kallsyms").exists()
            || std::fs::metadata(mnt.join("s/kallsyms")).unwrap().len() > 0
    );
}
