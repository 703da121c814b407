//! Fetching, the cache, servers in order, redirects, sources, many.

use crate::server::{Reply, Server};
use crate::{config, elf, path, temps};
use profkit_debuginfod::{Client, Error, Fetched, Kind};
use std::fs;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

const ID: &[u8] = &[0xab, 0xcd, 0xef, 0x01, 0x23, 0x45, 0x67, 0x89];

fn found(r: Result<Fetched, Error>) -> (std::path::PathBuf, bool, Option<String>, u64) {
    match r {
        Ok(Fetched::Found {
            path,
            from_cache,
            server,
            bytes,
        }) => (path, from_cache, server, bytes),
        other => panic!("not found: {other:?}"),
    }
}

#[test]
fn debuginfo_lands_at_elfutils_path_and_is_then_cached() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start();
    let file = elf(ID, 1000);
    s.on(&path(ID, "debuginfo"), Reply::Ok(file.clone()));
    let c = Client::new(config(dir.path(), &[&s.url]));
    let (p, from_cache, server, bytes) = found(c.fetch(ID, &Kind::Debuginfo));
    let idir = dir.path().join("cache/abcdef0123456789");
    assert_eq!(p, idir.join("debuginfo"));
    assert!(!from_cache);
    assert_eq!(server.as_deref(), Some(s.url.as_str()));
    assert_eq!(bytes, file.len() as u64);
    assert_eq!(fs::read(&p).unwrap(), file);
    assert_eq!(fs::metadata(&p).unwrap().mode() & 0o777, 0o600);
    assert_eq!(fs::metadata(&idir).unwrap().mode() & 0o777, 0o700);
    assert!(temps(&idir).is_empty());
    assert_eq!(s.requests(), 1);
    let (p2, from_cache, server, _) = found(c.fetch(ID, &Kind::Debuginfo));
    assert_eq!((p2, from_cache, server), (p.clone(), true, None));
    assert_eq!(s.requests(), 1, "the second fetch asked the server");
    assert_eq!(c.cached(ID, &Kind::Debuginfo), Some(p));
    let st = c.stats();
    assert_eq!((st.requests, st.fetched, st.cache_hits), (1, 1, 1));
    assert_eq!(st.bytes, file.len() as u64);
}

#[test]
fn a_404_moves_on_to_the_next_server() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (Server::start(), Server::start());
    b.on(&path(ID, "executable"), Reply::Ok(elf(ID, 0)));
    let c = Client::new(config(dir.path(), &[&a.url, &b.url]));
    let (_, _, server, _) = found(c.fetch(ID, &Kind::Executable));
    assert_eq!(server.as_deref(), Some(b.url.as_str()));
    assert_eq!((a.requests(), b.requests()), (1, 1));
}

#[test]
fn a_liar_is_refused_and_nothing_is_cached() {
    let dir = tempfile::tempdir().unwrap();
    let liar = Server::start();
    liar.on(&path(ID, "debuginfo"), Reply::Ok(elf(&[9; 20], 0)));
    let c = Client::new(config(dir.path(), &[&liar.url]));
    match c.fetch(ID, &Kind::Debuginfo) {
        Err(Error::WrongBuildId { found, url }) => {
            assert_eq!(found, "09".repeat(20));
            assert!(url.starts_with(&liar.url));
        }
        other => panic!("{other:?}"),
    }
    let idir = dir.path().join("cache/abcdef0123456789");
    assert!(!idir.join("debuginfo").exists());
    assert!(temps(&idir).is_empty());
    assert_eq!(c.stats().refused, 1);
    // No negative entry either: the next call asks again.
    assert!(c.fetch(ID, &Kind::Debuginfo).is_err());
    assert_eq!(liar.requests(), 2);
}

#[test]
fn a_liar_first_then_the_honest_server_wins() {
    let dir = tempfile::tempdir().unwrap();
    let (liar, honest) = (Server::start(), Server::start());
    liar.on(&path(ID, "debuginfo"), Reply::Ok(elf(&[9; 20], 0)));
    honest.on(&path(ID, "debuginfo"), Reply::Ok(elf(ID, 0)));
    let c = Client::new(config(dir.path(), &[&liar.url, &honest.url]));
    let (p, _, server, _) = found(c.fetch(ID, &Kind::Debuginfo));
    assert_eq!(server.as_deref(), Some(honest.url.as_str()));
    assert_eq!(
        profkit_elf::build_id(&fs::read(p).unwrap()[..]).as_deref(),
        Some(ID)
    );
    assert_eq!((c.stats().refused, c.stats().fetched), (1, 1));
}

#[test]
fn all_404_writes_a_negative_entry_believed_for_cache_miss_s() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (Server::start(), Server::start());
    let c = Client::new(config(dir.path(), &[&a.url, &b.url]));
    assert_eq!(c.fetch(ID, &Kind::Debuginfo).unwrap(), Fetched::NotFound);
    let entry = dir.path().join("cache/abcdef0123456789/debuginfo");
    let meta = fs::symlink_metadata(&entry).unwrap();
    assert_eq!((meta.len(), meta.mode() & 0o777), (0, 0));
    assert_eq!((a.requests(), b.requests()), (1, 1));
    // Believed: no request.
    assert_eq!(c.fetch(ID, &Kind::Debuginfo).unwrap(), Fetched::NotFound);
    assert_eq!(c.cached(ID, &Kind::Debuginfo), None);
    assert_eq!((a.requests(), b.requests()), (1, 1));
    // Written on first need with elfutils' default, as elfutils does.
    assert_eq!(
        fs::read_to_string(dir.path().join("cache/cache_miss_s"))
            .unwrap()
            .trim(),
        "600"
    );
    // An old entry is retried.
    let old = SystemTime::now() - Duration::from_secs(3600);
    set_mtime(&entry, old);
    assert_eq!(c.fetch(ID, &Kind::Debuginfo).unwrap(), Fetched::NotFound);
    assert_eq!((a.requests(), b.requests()), (2, 2));
    // cache_miss_s of 0: always asked.
    fs::write(dir.path().join("cache/cache_miss_s"), "0\n").unwrap();
    b.on(&path(ID, "debuginfo"), Reply::Ok(elf(ID, 0)));
    let (_, from_cache, _, _) = found(c.fetch(ID, &Kind::Debuginfo));
    assert!(!from_cache);
    assert_eq!((a.requests(), b.requests()), (3, 3));
    assert_eq!(c.stats().not_found, 3);
}

fn set_mtime(path: &std::path::Path, t: SystemTime) {
    // The entry is mode 0000: make it writable a moment to open it (root
    // needs not; others do), then restore.
    fs::set_permissions(path, fs::Permissions::from_mode(0o600)).unwrap();
    fs::File::options()
        .write(true)
        .open(path)
        .unwrap()
        .set_modified(t)
        .unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o000)).unwrap();
}

#[test]
fn redirects_to_http_are_followed_and_others_refused() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start();
    s.on(
        &path(ID, "debuginfo"),
        Reply::Redirect("/elsewhere/file".into()),
    );
    s.on("/elsewhere/file", Reply::Ok(elf(ID, 0)));
    s.on(
        &path(ID, "executable"),
        Reply::Redirect("file:///etc/passwd".into()),
    );
    s.on(&path(ID, "source/a/loop"), Reply::Redirect("loop".into()));
    let c = Client::new(config(dir.path(), &[&s.url]));
    found(c.fetch(ID, &Kind::Debuginfo));
    assert_eq!(s.paths()[1], "/elsewhere/file");
    match c.fetch(ID, &Kind::Executable) {
        Err(Error::BadRedirect { location, .. }) => assert_eq!(location, "file:///etc/passwd"),
        other => panic!("{other:?}"),
    }
    assert!(!dir
        .path()
        .join("cache/abcdef0123456789/executable")
        .exists());
    match c.fetch(ID, &Kind::Source("/a/loop".into())) {
        Err(Error::TooManyRedirects { .. }) => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(c.stats().refused, 2);
}

#[test]
fn offline_or_no_servers_touch_no_network() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start();
    s.on(&path(ID, "debuginfo"), Reply::Ok(elf(ID, 0)));
    let mut cfg = config(dir.path(), &[&s.url]);
    cfg.offline = true;
    assert!(!cfg.network());
    let off = Client::new(cfg.clone());
    assert_eq!(off.fetch(ID, &Kind::Debuginfo).unwrap(), Fetched::NotFound);
    let none = Client::new(config(dir.path(), &[]));
    assert_eq!(none.fetch(ID, &Kind::Debuginfo).unwrap(), Fetched::NotFound);
    assert_eq!(s.connections(), 0);
    // Nor is anything created on disk.
    assert!(!dir.path().join("cache").exists());
    // No negative entry: a later online run asks.
    found(Client::new(config(dir.path(), &[&s.url])).fetch(ID, &Kind::Debuginfo));
    let (_, from_cache, _, _) = found(off.fetch(ID, &Kind::Debuginfo));
    assert!(from_cache);
    assert_eq!(s.connections(), 1);
}

#[test]
fn sources_are_stored_escaped_and_cannot_leave_their_directory() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start();
    s.on(
        &path(ID, "source/usr/src/a%23b%20c.c"),
        Reply::Ok(b"int main;\n".to_vec()),
    );
    s.on(
        &path(ID, "source/../../etc/passwd"),
        Reply::Ok(b"root:x\n".to_vec()),
    );
    let c = Client::new(config(dir.path(), &[&s.url]));
    let idir = dir.path().join("cache/abcdef0123456789");
    let (p, ..) = found(c.fetch(ID, &Kind::Source("/usr/src/a#b c.c".into())));
    assert_eq!(p, idir.join("source##usr##src##a#_b c.c"));
    assert_eq!(fs::read(&p).unwrap(), b"int main;\n");
    let (p, ..) = found(c.fetch(ID, &Kind::Source("/../../etc/passwd".into())));
    assert_eq!(p, idir.join("source##..##..##etc##passwd"));
    assert_eq!(p.parent(), Some(idir.as_path()));
    for bad in ["relative/a.c", "/a\0b"] {
        assert!(matches!(
            c.fetch(ID, &Kind::Source(bad.into())),
            Err(Error::BadSourcePath { .. })
        ));
    }
    assert!(matches!(
        c.fetch(ID, &Kind::Source(format!("/{}", "x".repeat(300)))),
        Err(Error::BadSourcePath { .. })
    ));
    for id in [&[][..], &[1u8; 65][..]] {
        assert!(matches!(
            c.fetch(id, &Kind::Debuginfo),
            Err(Error::BadBuildId { .. })
        ));
    }
    assert_eq!(
        profkit_debuginfod::escape_source("/a b/c#d~e"),
        "a%20b/c%23d~e"
    );
}

#[test]
fn fetch_many_keeps_order_and_at_most_eight_transfers() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start();
    let ids: Vec<Vec<u8>> = (0..12u8).map(|i| vec![i + 1; 20]).collect();
    for id in &ids {
        let reply = Reply::Delay(
            Duration::from_millis(300),
            Box::new(Reply::Ok(elf(id, 100))),
        );
        s.on(&path(id, "debuginfo"), reply);
    }
    let c = Client::new(config(dir.path(), &[&s.url]));
    let wants: Vec<_> = ids.iter().map(|id| (id.clone(), Kind::Debuginfo)).collect();
    let seen = Mutex::new(Vec::new());
    let answers = c.fetch_many(&wants, &|p| seen.lock().unwrap().push(p));
    assert_eq!(answers.len(), 12);
    for (id, a) in ids.iter().zip(answers) {
        let (p, ..) = found(a);
        assert_eq!(
            p.parent().unwrap().file_name().unwrap().to_str(),
            Some(&*profkit_debuginfod::hex(id))
        );
    }
    assert!(s.max_in_flight() <= 8, "{} at once", s.max_in_flight());
    assert!(s.max_in_flight() >= 2, "not parallel");
    let seen = seen.into_inner().unwrap();
    assert_eq!(seen.len(), 12);
    let last = seen.last().unwrap();
    assert_eq!((last.done, last.total), (12, 12));
    assert!(seen.windows(2).all(|w| w[0].done < w[1].done));
    assert_eq!(last.bytes, c.stats().bytes);
}

#[test]
fn a_corrupt_or_linked_cache_entry_is_not_returned() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start();
    s.on(&path(ID, "debuginfo"), Reply::Ok(elf(ID, 0)));
    let c = Client::new(config(dir.path(), &[&s.url]));
    let (p, ..) = found(c.fetch(ID, &Kind::Debuginfo));
    // Someone planted another build-id's file.
    fs::remove_file(&p).unwrap();
    fs::write(&p, elf(&[7; 20], 0)).unwrap();
    assert_eq!(c.cached(ID, &Kind::Debuginfo), None);
    let (p2, from_cache, ..) = found(c.fetch(ID, &Kind::Debuginfo));
    assert!(!from_cache);
    assert_eq!(
        profkit_elf::build_id(&fs::read(&p2).unwrap()[..]).as_deref(),
        Some(ID)
    );
    // A link to a file with the right id elsewhere is not followed.
    let elsewhere = dir.path().join("elsewhere");
    fs::write(&elsewhere, elf(ID, 0)).unwrap();
    fs::remove_file(&p).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &p).unwrap();
    assert_eq!(c.cached(ID, &Kind::Debuginfo), None);
    let (p3, from_cache, ..) = found(c.fetch(ID, &Kind::Debuginfo));
    assert!(!from_cache);
    assert!(fs::symlink_metadata(&p3).unwrap().is_file());
    assert_eq!(s.requests(), 3);
}

#[test]
fn a_cache_others_may_write_is_not_used() {
    let dir = tempfile::tempdir().unwrap();
    let cache = dir.path().join("cache");
    fs::create_dir(&cache).unwrap();
    fs::set_permissions(&cache, fs::Permissions::from_mode(0o777)).unwrap();
    let c = Client::new(config(dir.path(), &[]));
    match c.fetch(ID, &Kind::Debuginfo) {
        Err(e @ Error::Cache { .. }) => assert!(e.to_string().contains("cache"), "{e}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(c.cached(ID, &Kind::Debuginfo), None);
}
