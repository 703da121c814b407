//! The session directory: private creation, refusals, no symlink followed.

use std::os::unix::fs::{MetadataExt, PermissionsExt};

use profkit_daemon::{Daemon, Error, Logger, SessionDir, DAEMON_LOG, LOCK_FILE, SESSION_LOG};

use crate::util::{is_root, opts};
use std::time::Duration;

#[test]
fn dir_is_created_0700_with_parents() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("deep/er/profkit_data");
    let dir = SessionDir::create(&p).unwrap();
    assert_eq!(std::fs::metadata(&p).unwrap().mode() & 0o7777, 0o700);
    assert_eq!(dir.owner_uid(), rustix::process::geteuid().as_raw());
}

#[test]
fn world_writable_existing_dir_is_refused_and_left_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("s");
    std::fs::create_dir(&p).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o777)).unwrap();
    let e = SessionDir::create(&p).unwrap_err();
    assert!(matches!(e, Error::InsecureDir { mode: 0o777, .. }), "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains(&p.display().to_string()) && msg.contains("chmod go-w"),
        "{msg}"
    );
    // Never chmod'ed behind the user's back.
    assert_eq!(std::fs::metadata(&p).unwrap().mode() & 0o777, 0o777);
}

#[test]
fn readable_by_others_is_accepted() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("s");
    std::fs::create_dir(&p).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    SessionDir::create(&p).unwrap();
}

#[test]
fn file_where_dir_expected_names_the_path() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("s");
    std::fs::write(&p, b"not a dir").unwrap();
    for e in [
        SessionDir::create(&p).unwrap_err(),
        SessionDir::open(&p).unwrap_err(),
    ] {
        assert!(matches!(e, Error::NotADirectory { .. }), "{e}");
        assert!(e.to_string().contains(&p.display().to_string()), "{e}");
    }
    let e = SessionDir::create(p.join("below")).unwrap_err();
    assert!(matches!(e, Error::NotADirectory { .. }), "{e}");
}

#[test]
fn symlinked_session_dir_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let real = tmp.path().join("real");
    std::fs::create_dir(&real).unwrap();
    let link = tmp.path().join("link");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    let e = SessionDir::create(&link).unwrap_err();
    assert!(matches!(e, Error::Symlink { .. }), "{e}");
}

#[test]
fn dir_owned_by_someone_else_is_refused() {
    if !is_root() {
        eprintln!("skipped: chown to another user needs root");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("s");
    std::fs::create_dir(&p).unwrap();
    std::os::unix::fs::chown(&p, Some(65534), Some(65534)).unwrap();
    let e = SessionDir::open(&p).unwrap_err();
    assert!(
        matches!(
            e,
            Error::NotOwned {
                owner: 65534,
                uid: 0,
                ..
            }
        ),
        "{e}"
    );
}

#[test]
fn unwritable_dir_is_refused() {
    if is_root() {
        eprintln!("skipped: root can write into a 0500 directory");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("s");
    std::fs::create_dir(&p).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o500)).unwrap();
    let e = SessionDir::open(&p).unwrap_err();
    assert!(matches!(e, Error::NotWritable { .. }), "{e}");
    assert!(e.to_string().contains(&p.display().to_string()), "{e}");
}

#[test]
fn symlink_planted_at_session_log_is_not_followed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = SessionDir::create(tmp.path().join("s")).unwrap();
    let victim = tmp.path().join("victim");
    std::fs::write(&victim, b"precious").unwrap();
    std::os::unix::fs::symlink(&victim, dir.join(SESSION_LOG)).unwrap();

    for e in [
        dir.create_truncate(SESSION_LOG).unwrap_err(),
        dir.open_append(SESSION_LOG).unwrap_err(),
        dir.open_read(SESSION_LOG).unwrap_err(),
    ] {
        assert!(matches!(e, Error::Symlink { .. }), "{e}");
        assert!(e.to_string().contains("session.pkl"), "{e}");
    }
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
}

#[test]
fn dangling_symlink_at_daemon_log_creates_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = SessionDir::create(tmp.path().join("s")).unwrap();
    let target = tmp.path().join("would-be-created");
    std::os::unix::fs::symlink(&target, dir.join(DAEMON_LOG)).unwrap();

    let e = Logger::open(&dir).unwrap_err();
    assert!(matches!(e, Error::Symlink { .. }), "{e}");
    let e = Daemon::new(&dir, opts(Duration::from_millis(250))).unwrap_err();
    assert!(matches!(e, Error::Symlink { .. }), "{e}");
    assert!(e.to_string().contains("daemon.log"), "{e}");
    assert!(!target.exists());
}

#[test]
fn symlink_planted_at_lock_file_is_not_followed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = SessionDir::create(tmp.path().join("s")).unwrap();
    let victim = tmp.path().join("victim");
    std::fs::write(&victim, b"precious").unwrap();
    std::os::unix::fs::symlink(&victim, dir.join(LOCK_FILE)).unwrap();
    let e = Daemon::new(&dir, opts(Duration::from_millis(250))).unwrap_err();
    assert!(matches!(e, Error::Symlink { .. }), "{e}");
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
}
