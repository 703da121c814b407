//! profctl run by an unprivileged user: the paranoid level named, the
//! fall-back to user space, a DWARF ring that cannot be locked.

use super::*;

#[test]
fn unprivileged_system_wide_start_prints_the_paranoid_level() {
    let tmp = tempfile::tempdir().unwrap();
    let Some(o) = as_nobody(tmp.path(), &["start", "--session-dir", "s"]) else {
        return;
    };
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let p = profkit_perf::read_sysctl("kernel.perf_event_paranoid").unwrap();
    assert!(
        text(&o).contains(&format!("perf_event_paranoid is {p}"))
            && text(&o).contains("system-wide"),
        "{}",
        text(&o)
    );
}

#[test]
fn unprivileged_record_falls_back_to_user_space_and_says_why() {
    if !perf_ok() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let Some(o) = as_nobody(
        tmp.path(),
        &[
            "record",
            "--session-dir",
            "s",
            "--",
            "sh",
            "-c",
            "i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done",
        ],
    ) else {
        return;
    };
    if profkit_perf::read_sysctl("kernel.perf_event_paranoid").unwrap_or(3) > 2 {
        assert!(!o.status.success());
        return;
    }
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("kernel samples excluded"), "{}", text(&o));
    let (r, d) = decode(&tmp.path().join("s/session.pkl"));
    assert!(r.header().event.exclude_kernel);
    assert!(d.per_cpu_pid.values().sum::<u64>() > 0);
}

/// `--off-cpu` has no user-space-only fall-back (a switch happens in the
/// kernel): the refusal says what it needs, not the sampled event's advice
/// to use --user-only.
#[test]
fn an_unprivileged_off_cpu_record_says_it_needs_kernel_rights() {
    if !perf_ok() {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let Some(o) = as_nobody(
        tmp.path(),
        &["record", "--off-cpu", "--session-dir", "s", "--", "true"],
    ) else {
        return;
    };
    if profkit_perf::read_sysctl("kernel.perf_event_paranoid").unwrap_or(3) <= 1 {
        // A user may sample the kernel here: the recording works.
        assert!(o.status.success(), "{}", text(&o));
        return;
    }
    assert!(!o.status.success(), "{}", text(&o));
    let t = text(&o);
    assert!(
        t.contains("--off-cpu needs the right to sample the kernel")
            && t.contains("perf_event_paranoid is")
            && !t.contains("--user-only"),
        "{t}"
    );
}

#[test]
fn an_unprivileged_dwarf_record_whose_ring_cannot_be_locked_says_what_fits() {
    if !perf_ok() {
        return;
    }
    // Below 0 anyone may lock any ring; above 2 a user opens nothing.
    let paranoid = profkit_perf::read_sysctl("kernel.perf_event_paranoid");
    if !matches!(paranoid, Some(0..=2)) {
        eprintln!("SKIP: needs perf_event_paranoid 0, 1 or 2 (paranoid {paranoid:?})");
        return;
    }
    // A user of its own: the locked-memory allowance is per user.
    let Some(user) = profkit_testsupport::ThrowawayUser::create() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(tmp.path(), std::fs::Permissions::from_mode(0o711)).unwrap();
    let own = tmp.path().join("user");
    std::fs::create_dir(&own).unwrap();
    user.give(&own);
    let bin = own.join("profctl");
    std::fs::copy(PROFCTL, &bin).unwrap();
    // RLIMIT_MEMLOCK 64 KiB: the kernel.perf_event_mlock_kb allowance is
    // all there is, whatever the limit the tests run with.
    let run = |flags: &[&str]| {
        user.command("/bin/sh")
            .args(["-c", "ulimit -l 64 && exec \"$@\"", "sh"])
            .arg(&bin)
            .args(["record", "--call-graph", "dwarf"])
            .args(flags)
            .args(["--session-dir", "s", "--", "sh", "-c"])
            .arg("i=0; while [ $i -lt 100000 ]; do i=$((i+1)); done")
            .current_dir(&own)
            .env("HOME", &own)
            .output()
            .unwrap()
    };
    let o = run(&["-F", "4000"]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(1), "{out}");
    // The rings are planned within the allowance and refused before any
    // is mapped, not the kernel samples a fallback dropped.
    assert!(!out.contains("no permission"), "{out}");
    assert!(
        out.contains("dwarf,8192 samples (8352 bytes each) at 4000 Hz on ")
            && out.contains("kernel.perf_event_mlock_kb = ")
            && out.contains("raise kernel.perf_event_mlock_kb to "),
        "{out}"
    );
    // What it suggests works.
    let (_, rate) = out
        .split_once("lower -F to ")
        .unwrap_or_else(|| panic!("{out}"));
    let hz = rate.split([',', ' ']).next().unwrap();
    let o = run(&["-F", hz]);
    let out = text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert!(out.contains("drained when half full"), "{out}");
    let r = SessionReader::open(own.join("s/session.pkl")).unwrap();
    assert_eq!(r.header().event.user_stack, 8192);
}
