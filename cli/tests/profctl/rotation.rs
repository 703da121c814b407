//! `--rotate`, `--keep`, SIGHUP and `profctl rotate` on the real kernel:
//! parts that are whole sessions, nothing lost between them.

use super::*;
use profkit_eventlog::parts::{closed_parts, CURRENT_PART};

/// The session's files in part order: (number, path), `session.pkl` last.
fn parts(dir: &Path) -> Vec<(u64, PathBuf)> {
    let mut v = closed_parts(dir).unwrap();
    let current = dir.join(CURRENT_PART);
    let n = profkit_eventlog::read_header(&current)
        .unwrap()
        .0
        .part
        .expect("a live session's header says its part")
        .number;
    v.push((n, current));
    v
}

/// Samples of `pid` in one part file, and the footer's samples.
fn part_samples(path: &Path, pid: u32) -> (u64, u64) {
    let r = SessionReader::open(path).unwrap();
    assert!(r.bad_chunks().is_empty(), "{path:?}: {:?}", r.bad_chunks());
    let footer = r.footer().unwrap_or_else(|| panic!("{path:?}: no footer"));
    let mut mine = 0;
    let mut all = 0;
    for c in r.chunks() {
        r.for_each_sample(
            c,
            |s| {
                all += 1;
                if s.pid == pid {
                    mine += 1;
                }
            },
            |_| {},
        )
        .unwrap();
    }
    let written: u64 = footer.accounting.iter().map(|a| a.samples_written).sum();
    assert_eq!(written, all, "{path:?}: the footer counts its own part");
    (mine, all)
}

#[test]
fn rotating_every_2s_gives_whole_parts_and_sighup_and_rotate_add_one_each() {
    if !perf_ok() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("s");
    let ds = d.to_str().unwrap();
    let _stop = StopOnDrop(d.clone());
    let o = profctl(
        tmp.path(),
        &[
            "start",
            "-a",
            "-F",
            "1000",
            "--rotate",
            "2s",
            "--session-dir",
            ds,
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("a new part every 2s"), "{}", text(&o));
    let mut w = busy_on(0);
    std::thread::sleep(Duration::from_secs(9));
    let pid = std::fs::read_to_string(d.join("daemon.pid")).unwrap();
    let before = status_json(tmp.path(), ds)["parts"]["part"]
        .as_u64()
        .unwrap();
    assert!(Command::new("kill")
        .args(["-HUP", pid.trim()])
        .status()
        .unwrap()
        .success());
    let mut rotated = false;
    for _ in 0..40 {
        std::thread::sleep(Duration::from_millis(50));
        let log = std::fs::read_to_string(d.join("daemon.log")).unwrap();
        if log.contains("SIGHUP: rotated") {
            rotated = true;
            break;
        }
    }
    assert!(rotated, "SIGHUP rotated");
    let after_hup = status_json(tmp.path(), ds)["parts"]["part"]
        .as_u64()
        .unwrap();
    assert!(after_hup > before, "{before} -> {after_hup}");
    let o = profctl(tmp.path(), &["rotate", "--session-dir", ds]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("now writing part"), "{}", text(&o));
    let stop = profctl(tmp.path(), &["stop", "--session-dir", ds]);
    let _ = w.kill();
    let _ = w.wait();
    assert!(stop.status.success(), "{}", text(&stop));
    assert!(
        text(&stop).contains("profreport reads them as one"),
        "{}",
        text(&stop)
    );
    let log = std::fs::read_to_string(d.join("daemon.log")).unwrap();
    assert!(
        log.contains("rotated: {") && log.contains("\"why\":\"time\""),
        "the daemon logs its own rotations: {log}"
    );
    let files = parts(&d);
    let numbers: Vec<u64> = files.iter().map(|p| p.0).collect();
    // 9 s at 2 s: at least 4 parts by time, then SIGHUP and rotate.
    assert!(numbers.len() >= 6, "{numbers:?}");
    assert_eq!(
        numbers,
        (1..=numbers.len() as u64).collect::<Vec<_>>(),
        "consecutive, none deleted"
    );
    let mut total = 0;
    let mut worker = 0;
    let mut rounds = Vec::new();
    for (n, p) in &files {
        let (mine, all) = part_samples(p, w.id());
        total += all;
        worker += mine;
        let r = SessionReader::open(p).unwrap();
        let h = r.header().part.unwrap();
        assert_eq!(h.number, *n);
        if let Some(c) = r.chunks().first() {
            assert_eq!(c.round, h.first_round, "part {n}");
        }
        rounds.extend(r.chunks().iter().map(|c| c.round));
    }
    // Round numbers go on across parts with none missing: nothing fell
    // between two parts.
    assert_eq!(
        rounds,
        (rounds[0]..rounds[0] + rounds.len() as u64).collect::<Vec<_>>()
    );
    // The parts add up to what stop counted.
    let said: u64 = text(&stop)
        .split("recorded ")
        .nth(1)
        .and_then(|t| t.split(" samples").next())
        .and_then(|t| t.rsplit(", ").next())
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("{}", text(&stop)));
    assert_eq!(total, said, "{}", text(&stop));
    assert!(worker > 5000, "the busy worker's samples: {worker}");
}

#[test]
fn keep_2_leaves_the_newest_two_parts() {
    if !perf_ok() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let d = tmp.path().join("s");
    let ds = d.to_str().unwrap();
    let _stop = StopOnDrop(d.clone());
    // An old session's part in the directory is not this session's.
    std::fs::create_dir(&d).unwrap();
    std::fs::write(d.join("session.000042.pkl"), b"old").unwrap();
    let o = profctl(
        tmp.path(),
        &[
            "start",
            "-a",
            "-F",
            "500",
            "--rotate",
            "1s",
            "--keep",
            "2",
            "--session-dir",
            ds,
        ],
    );
    assert!(o.status.success(), "{}", text(&o));
    assert!(!text(&o).contains("without --rotate"), "{}", text(&o));
    assert!(!d.join("session.000042.pkl").exists());
    std::thread::sleep(Duration::from_millis(4500));
    let st = status_json(tmp.path(), ds);
    assert!(
        st["parts"]["removed"].as_u64() >= Some(2),
        "{}",
        st["parts"]
    );
    let stop = profctl(tmp.path(), &["stop", "--session-dir", ds]);
    assert!(stop.status.success(), "{}", text(&stop));
    let files = parts(&d);
    let numbers: Vec<u64> = files.iter().map(|p| p.0).collect();
    assert_eq!(numbers.len(), 2, "{numbers:?}");
    assert!(
        numbers[0] >= 4 && numbers[1] == numbers[0] + 1,
        "{numbers:?}"
    );
    for (_, p) in &files {
        part_samples(p, 0);
    }
    assert!(
        text(&stop).contains("deleted by retention"),
        "{}",
        text(&stop)
    );
    // --keep without --rotate says when parts close.
    let o = profctl(tmp.path(), &["start", "--keep", "2", "--session-dir", ds]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(
        text(&o).contains("without --rotate a part closes only on SIGHUP"),
        "{}",
        text(&o)
    );
    let stop = profctl(tmp.path(), &["stop", "--session-dir", ds]);
    assert!(stop.status.success(), "{}", text(&stop));
}

#[test]
fn rotating_on_a_full_disk_counts_the_loss_and_stop_still_succeeds() {
    if !perf_ok() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let Some(_guard) = small_tmpfs(tmp.path()) else {
        return;
    };
    let mnt = _guard.0.clone();
    let d = mnt.join("s");
    let ds = d.to_str().unwrap();
    let _stop = StopOnDrop(d.clone());
    let o = profctl(
        tmp.path(),
        &["start", "-F", "4000", "--rotate", "1s", "--session-dir", ds],
    );
    assert!(o.status.success(), "{}", text(&o));
    fill(&mnt);
    let mut w = busy_on(0);
    // Three rotations on a full disk.
    std::thread::sleep(Duration::from_millis(3500));
    let st = status_json(tmp.path(), ds);
    assert_eq!(st["state"], "running", "{st}");
    let stop = profctl(tmp.path(), &["stop", "--session-dir", ds]);
    let _ = w.kill();
    let _ = w.wait();
    assert!(
        stop.status.success(),
        "stop succeeds on a full disk: {}",
        text(&stop)
    );
    assert!(
        text(&stop).contains("warning: cpu"),
        "the summary warns about the loss: {}",
        text(&stop)
    );
    // Whatever parts there are read without error; the last one has its
    // footer (the reserve); the footers count the disk's loss.
    let mut disk = 0;
    for (n, p) in parts(&d) {
        let r = SessionReader::open(&p).unwrap();
        assert!(
            r.bad_chunks().iter().all(|b| b.is_torn_tail()),
            "part {n}: {:?}",
            r.bad_chunks()
        );
        if let Some(f) = r.footer() {
            disk += f.accounting.iter().map(|a| a.lost_disk_full).sum::<u64>();
        }
    }
    let r = SessionReader::open(d.join(CURRENT_PART)).unwrap();
    assert!(r.footer().is_some(), "the last footer fits in the reserve");
    assert!(disk > 0, "no part counts a loss to the full disk");
}
