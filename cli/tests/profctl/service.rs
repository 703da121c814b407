//! The systemd unit, `scripts/profkit.service` (issue 25, 8): how
//! `systemd-analyze security` rates it, and the daemon recording under the
//! unit's restrictions as far as this machine can apply them without
//! systemd as PID 1: its capability bounding set, no new privileges,
//! `UMask=0077` and no network (`unshare --net`), with every system call it
//! makes (strace) checked against the unit's `SystemCallFilter=`.

use super::*;
use std::collections::BTreeSet;

fn unit_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../scripts/profkit.service")
}

/// The values of `key=` in the unit, in order.
fn unit_values(key: &str) -> Vec<String> {
    let text = std::fs::read_to_string(unit_path()).unwrap();
    text.lines()
        .filter_map(|l| l.strip_prefix(key)?.strip_prefix('='))
        .map(str::to_owned)
        .collect()
}

/// `name` on this machine, else a skip (a failure under
/// `PROFKIT_REQUIRE_PERF=1`: scripts/test.sh installs them).
fn tool(name: &str) -> bool {
    let found = Command::new("sh")
        .args(["-c", &format!("command -v {name}")])
        .output()
        .is_ok_and(|o| o.status.success());
    found || !profkit_testsupport::skip(format!("{name} is not installed"))
}

#[test]
fn the_service_unit_is_rated_ok_by_systemd_analyze() {
    if !tool("systemd-analyze") {
        return;
    }
    let o = Command::new("systemd-analyze")
        .args(["security", "--offline=true"])
        .arg(unit_path())
        .output()
        .unwrap();
    let out = text(&o);
    let level: f64 = out
        .lines()
        .find_map(|l| {
            l.split("Overall exposure level for profkit.service: ")
                .nth(1)
        })
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("no rating: {out}"));
    eprintln!("systemd-analyze security: {level}");
    assert!(level <= 4.9, "exposure {level} (want <= 4.9, OK): {out}");
}

/// Options that take capabilities out of the bounding set whatever
/// `CapabilityBoundingSet=` says (systemd.exec(5)): a unit that sets one of
/// them loses what it lists (ProtectKernelLogs took CAP_SYSLOG, so kernel
/// addresses read 0 under systemd; the capability test, which applies the
/// bounding set with setpriv, could not see it).
const STRIPPING: &[(&str, &[&str])] = &[
    ("ProtectKernelLogs", &["CAP_SYSLOG"]),
    ("ProtectKernelModules", &["CAP_SYS_MODULE"]),
    ("ProtectClock", &["CAP_SYS_TIME", "CAP_WAKE_ALARM"]),
    ("PrivateDevices", &["CAP_MKNOD", "CAP_SYS_RAWIO"]),
    ("ProtectKernelTunables", &[]),
    (
        "PrivateUsers",
        &["CAP_PERFMON", "CAP_SYS_PTRACE", "CAP_SYSLOG"],
    ),
];

#[test]
fn no_option_of_the_unit_strips_a_capability_it_needs() {
    let caps = unit_values("CapabilityBoundingSet").concat();
    let listed: Vec<&str> = caps.split_whitespace().collect();
    for (option, stripped) in STRIPPING {
        if unit_values(option)
            .iter()
            .any(|v| v == "yes" || v == "true")
        {
            for c in *stripped {
                assert!(
                    !listed.contains(c),
                    "{option}=yes takes {c} out of the bounding set, which the unit lists"
                );
            }
        }
    }
    // ProtectKernelTunables= makes /proc/kallsyms inaccessible: no kernel
    // symbols.
    assert!(unit_values("ProtectKernelTunables").is_empty());
    assert!(listed.contains(&"CAP_SYSLOG"), "kallsyms addresses need it");
}

/// The system calls of `filter` (a `SystemCallFilter=` group or name),
/// groups expanded.
fn syscalls(filter: &str, out: &mut BTreeSet<String>) {
    if !filter.starts_with('@') {
        out.insert(filter.to_owned());
        return;
    }
    let o = Command::new("systemd-analyze")
        .args(["syscall-filter", filter])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    for l in String::from_utf8_lossy(&o.stdout).lines().skip(1) {
        let l = l.trim();
        if l.is_empty() || l.starts_with('#') || l.contains(' ') {
            continue;
        }
        syscalls(l, out);
    }
}

#[test]
fn the_daemon_profiles_under_the_units_restrictions() {
    if !perf_ok() {
        return;
    }
    for t in ["systemd-analyze", "strace", "setpriv", "unshare", "cc"] {
        if !tool(t) {
            return;
        }
    }
    let tmp = tempfile::tempdir().unwrap();
    let spin = tmp.path().join("spin");
    let src = tmp.path().join("spin.c");
    std::fs::write(
        &src,
        "volatile unsigned long x;\nvoid spin_here(void) { for (unsigned long i = 0; \
         i < 300000000UL; i++) x += i; }\nint main(void) { spin_here(); return 0; }\n",
    )
    .unwrap();
    assert!(Command::new("cc")
        .args(["-O1", "-g", "-o"])
        .arg(&spin)
        .arg(&src)
        .status()
        .unwrap()
        .success());
    // CapabilityBoundingSet=CAP_PERFMON CAP_SYS_PTRACE … as setpriv's
    // --bounding-set=-all,+perfmon,+sys_ptrace,…
    let caps: Vec<String> = unit_values("CapabilityBoundingSet")
        .concat()
        .split_whitespace()
        .map(|c| format!("+{}", c.trim_start_matches("CAP_").to_lowercase()))
        .collect();
    assert!(caps.contains(&"+perfmon".to_owned()), "{caps:?}");
    assert_eq!(unit_values("UMask"), ["0077"]);
    assert_eq!(unit_values("NoNewPrivileges"), ["yes"]);
    assert_eq!(unit_values("PrivateNetwork"), ["yes"]);
    let d = tmp.path().join("s");
    let ds = d.to_str().unwrap();
    let _stop = StopOnDrop(d.clone());
    let trace = tmp.path().join("trace");
    let script = format!(
        "umask 077; exec unshare --net -- setpriv --bounding-set=-all,{} --inh-caps=-all \
         --no-new-privs -- strace -f -qq -o {} {PROFCTL} start --foreground -a -F 1000 \
         --rotate 1s --session-dir {ds}",
        caps.join(","),
        trace.display()
    );
    let mut daemon = Command::new("sh")
        .args(["-c", &script])
        .env_remove("PROFKIT_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut running = false;
    for _ in 0..200 {
        std::thread::sleep(Duration::from_millis(50));
        let o = profctl(tmp.path(), &["status", "--json", "--session-dir", ds]);
        let v: serde_json::Value =
            serde_json::from_slice(&o.stdout).unwrap_or(serde_json::Value::Null);
        if v["state"] == "running" {
            running = true;
            break;
        }
    }
    if !running {
        let _ = daemon.kill();
        let out = daemon.wait_with_output().unwrap();
        panic!(
            "the daemon never ran under the unit's restrictions: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert!(Command::new(&spin).status().unwrap().success());
    let o = profctl(tmp.path(), &["rotate", "--session-dir", ds]);
    assert!(o.status.success(), "{}", text(&o));
    std::thread::sleep(Duration::from_millis(1200));
    let o = profctl(tmp.path(), &["stop", "--session-dir", ds]);
    assert!(o.status.success(), "{}", text(&o));
    let out = daemon.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Profiling works: the user function and kernel functions are named.
    let o = Command::new(env!("CARGO_BIN_EXE_profreport"))
        .args(["--session-dir", ds, "-l", "--format", "json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", text(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = v["rows"].as_array().unwrap();
    let named = |image: &str, f: &dyn Fn(&str) -> bool| {
        rows.iter().any(|r| {
            r["image"].as_str().is_some_and(|i| i.ends_with(image))
                && r["symbol"].as_str().is_some_and(f)
        })
    };
    assert!(named("spin", &|s| s == "spin_here"), "{v:#}");
    assert!(
        named("[kernel.kallsyms]", &|s| !s.starts_with("0x")
            && !s.starts_with('[')),
        "kernel symbols need CAP_SYSLOG and /proc/kallsyms: {v:#}"
    );
    // UMask=0077: nothing the daemon made is readable by others.
    for e in std::fs::read_dir(&d).unwrap().flatten() {
        use std::os::unix::fs::PermissionsExt;
        let mode = e.metadata().unwrap().permissions().mode();
        assert_eq!(mode & 0o077, 0, "{} is {mode:o}", e.path().display());
    }
    // Every system call made passes the unit's SystemCallFilter=.
    let mut allowed = BTreeSet::new();
    let mut denied = BTreeSet::new();
    for f in unit_values("SystemCallFilter") {
        match f.strip_prefix('~') {
            Some(deny) => deny
                .split_whitespace()
                .for_each(|g| syscalls(g, &mut denied)),
            None => f.split_whitespace().for_each(|g| syscalls(g, &mut allowed)),
        }
    }
    let trace = std::fs::read_to_string(&trace).unwrap();
    let used: BTreeSet<String> = trace
        .lines()
        .filter_map(|l| {
            let call = l.split_once(' ')?.1.trim_start();
            let name = &call[..call.find('(')?];
            (!name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_'))
                .then(|| name.to_owned())
        })
        .collect();
    assert!(used.contains("perf_event_open"), "{used:?}");
    let refused: Vec<&String> = used
        .iter()
        .filter(|s| !allowed.contains(*s) || denied.contains(*s))
        .collect();
    eprintln!("{} system calls used, all allowed: {:?}", used.len(), used);
    assert!(
        refused.is_empty(),
        "the unit's filter would refuse {refused:?}"
    );
}
