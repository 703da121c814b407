//! Live, root, issue 25: a build-id is a claim. An unprivileged user's
//! program linked with the build-id of a root-owned program (and laid out
//! like it) runs while root records, before root's program runs: the
//! report names each one's samples with its own file's symbols, from a
//! plain path in the user's directory, from a tmpfs only the user's mount
//! namespace sees (kept in the session), and after the user rebuilds the
//! file (refused as changed, root's still named). Skipped with a printed
//! reason when perf, cc, unshare or useradd are missing, unless
//! PROFKIT_REQUIRE_PERF=1, where that is a failure.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::util::*;

use profkit_testsupport::{perf_ok, ThrowawayUser};

/// Spins in `NAME` for argv[1] seconds. Root's and the forgery differ
/// only in the function's name (kept in the symbol table, after the
/// code), so the loop is at the same offset in both.
fn spinner(name: &str, extra: &str) -> String {
    format!(
        r#"#include <stdlib.h>
#include <time.h>
static double now(void) {{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}}
__attribute__((noinline)) unsigned long {name}(double until) {{
    volatile unsigned long x = 0;
    while (now() < until)
        for (int i = 0; i < 200000; i++) x++;
    return x;
}}
{extra}
int main(int argc, char **argv) {{
    (void)argc;
    return (int)({name}(now() + atof(argv[1])) & 1);
}}
"#
    )
}

fn cc(dir: &Path, name: &str, src: &str, build_id: &str) -> Option<PathBuf> {
    let c = dir.join(format!("{name}.c"));
    std::fs::write(&c, src).unwrap();
    let out = dir.join(name);
    compile(
        Command::new("cc")
            .args(["-O1", "-fno-pie", "-no-pie"])
            .arg(format!("-Wl,--build-id={build_id}"))
            .arg("-o")
            .arg(&out)
            .arg(&c),
        "cc",
    )
    .then_some(out)
}

struct Setup {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    user: ThrowawayUser,
    /// Root's program, root-owned, in a root-owned directory.
    genuine: PathBuf,
    /// The user's forgery (same build-id), in a directory the user owns.
    forged: PathBuf,
    build_id: String,
}

fn setup() -> Option<Setup> {
    let user = ThrowawayUser::create()?;
    let tmp = tempdir();
    let dir = tmp.path().to_path_buf();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o711)).unwrap();
    let root_dir = dir.join("root");
    std::fs::create_dir(&root_dir).unwrap();
    std::fs::set_permissions(&root_dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let build_id = unique_build_id()
        .strip_prefix("-Wl,--build-id=")
        .unwrap()
        .to_owned();
    let genuine = cc(&root_dir, "md5sum", &spinner("root_work", ""), &build_id)?;
    let own = dir.join("user");
    std::fs::create_dir(&own).unwrap();
    std::fs::set_permissions(&own, std::fs::Permissions::from_mode(0o755)).unwrap();
    let forged = cc(&own, "md5sum", &spinner("FORGED_spin", ""), &build_id)?;
    user.give(&own);
    user.give(&forged);
    Some(Setup {
        _tmp: tmp,
        dir,
        user,
        genuine,
        forged,
        build_id,
    })
}

/// Records system-wide in `dir/s` while `forgery` (the user's) runs for
/// 1 s and then root's program for 1 s.
fn record(dir: &Path, mut forgery: Command, genuine: &Path) {
    profctl(dir, &["start", "-a", "-F", "1000", "--session-dir", "s"]).expect(0);
    let f = forgery.status();
    let g = Command::new(genuine).arg("1").status();
    profctl(dir, &["stop", "--session-dir", "s"]).expect(0);
    assert!(f.as_ref().is_ok_and(|s| s.success()), "{forgery:?}: {f:?}");
    assert!(g.as_ref().is_ok_and(|s| s.success()), "{g:?}");
}

fn report(dir: &Path) -> (serde_json::Value, String) {
    let r = profreport(&[
        "--session-dir",
        dir.join("s").to_str().unwrap(),
        "--format",
        "json",
        "-l",
    ])
    .expect(0);
    (r.json(), r.stderr)
}

/// Each program's second of samples is named with its own function, not
/// the other's.
fn assert_each_named_its_own(v: &serde_json::Value, forged_name: &str) {
    let (root, user) = (samples_of(v, "root_work"), samples_of(v, forged_name));
    eprintln!("root_work {root} samples, {forged_name} {user} samples");
    assert!(root > 100, "root's samples named root_work: {root}; {v:#}");
    assert!(user > 100, "the user's named {forged_name}: {user}; {v:#}");
    let ratio = root as f64 / user as f64;
    assert!(
        (0.33..3.0).contains(&ratio),
        "one second each, {root} against {user}: one took the other's; {v:#}"
    );
}

/// From a plain path in the user's directory; then the user rebuilds the
/// file with the same build-id after the recording.
#[test]
fn a_users_binary_with_roots_build_id_names_neither_with_the_others_symbols() {
    let _rec = recording();
    if !perf_ok() {
        return;
    }
    let Some(s) = setup() else {
        return;
    };
    let mut forgery = s.user.command(&s.forged);
    forgery.arg("1");
    record(&s.dir, forgery, &s.genuine);
    let (v, _) = report(&s.dir);
    assert_each_named_its_own(&v, "FORGED_spin");
    // The user rebuilds it: another program, the same build-id.
    let rebuilt = cc(
        &s.dir,
        "rebuilt",
        &spinner(
            "FORGED_again",
            "int FORGED_pad(int x) { return x * 3 + 7; }",
        ),
        &s.build_id,
    )
    .unwrap();
    std::fs::remove_file(&s.forged).unwrap();
    std::fs::copy(&rebuilt, &s.forged).unwrap();
    let (v, warnings) = report(&s.dir);
    assert_eq!(samples_of(&v, "FORGED_again"), 0, "{v:#}");
    assert!(samples_of(&v, "root_work") > 100, "{v:#}");
    let forged = s.forged.display().to_string();
    assert!(
        warnings
            .lines()
            .any(|l| l.contains("changed since recording") && l.contains(&forged)),
        "{warnings}"
    );
}

/// From a tmpfs only the user's mount namespace sees: the daemon keeps
/// the forgery in the session, and the kept copy names the forgery's
/// samples only.
#[test]
fn a_users_binary_with_roots_build_id_kept_from_its_namespace_names_only_its_own() {
    let _rec = recording();
    if !perf_ok() {
        return;
    }
    let unshare_ok = Command::new("unshare")
        .args(["-m", "true"])
        .status()
        .is_ok_and(|s| s.success());
    if !unshare_ok && !profkit_testsupport::skip("unshare -m does not work") {
        return;
    }
    let Some(s) = setup() else {
        return;
    };
    let mnt = s.dir.join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let inside = mnt.join("md5sum");
    let script = format!(
        "mount -t tmpfs ns-only {m} && chmod 755 {m} && cp {src} {bin} && chown {u}:{g} {bin} && \
         setpriv --reuid={u} --regid={g} --clear-groups {bin} 1",
        m = mnt.display(),
        src = s.forged.display(),
        bin = inside.display(),
        u = s.user.uid,
        g = s.user.gid,
    );
    let mut forgery = Command::new("unshare");
    forgery.args(["-m", "sh", "-c", &script]);
    record(&s.dir, forgery, &s.genuine);
    assert!(
        !inside.exists(),
        "the host never sees the namespace's tmpfs"
    );
    std::fs::remove_file(&s.forged).unwrap();
    let (v, _) = report(&s.dir);
    assert_each_named_its_own(&v, "FORGED_spin");
    assert!(
        s.dir.join("s/debug/.kept").is_dir(),
        "the forgery was kept under its cookie"
    );
}
