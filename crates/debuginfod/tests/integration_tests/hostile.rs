//! Size and time limits, and servers answering garbage.

use crate::server::{Reply, Server};
use crate::{config, elf, path, temps};
use profkit_debuginfod::{Client, Error, Fetched, Kind};
use std::time::{Duration, Instant};

const ID: &[u8] = &[0x11; 20];

fn idir(dir: &tempfile::TempDir) -> std::path::PathBuf {
    dir.path().join("cache").join("11".repeat(20))
}

#[test]
fn a_content_length_over_max_size_is_refused_unread() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start();
    // Announces 10 MB, sends 10 bytes, stalls: reading would hang 5 s.
    s.on(
        &path(ID, "debuginfo"),
        Reply::Stall {
            len: 10 << 20,
            send: vec![0; 10],
        },
    );
    let mut cfg = config(dir.path(), &[&s.url]);
    cfg.max_size = Some(1 << 20);
    let c = Client::new(cfg);
    let t = Instant::now();
    match c.fetch(ID, &Kind::Debuginfo) {
        Err(Error::TooLarge { size, max, .. }) => assert_eq!((size, max), (10 << 20, 1 << 20)),
        other => panic!("{other:?}"),
    }
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    assert!(temps(&idir(&dir)).is_empty());
    assert_eq!(c.stats().refused, 1);
}

#[test]
fn a_chunked_body_over_max_size_is_cut_and_refused() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start();
    s.on(&path(ID, "debuginfo"), Reply::Chunked(elf(ID, 300_000)));
    let mut cfg = config(dir.path(), &[&s.url]);
    cfg.max_size = Some(100_000);
    let c = Client::new(cfg);
    match c.fetch(ID, &Kind::Debuginfo) {
        Err(Error::TooLarge { size, max, .. }) => assert!(size > max && size < 200_000, "{size}"),
        other => panic!("{other:?}"),
    }
    assert!(!idir(&dir).join("debuginfo").exists());
    assert!(temps(&idir(&dir)).is_empty());
    // Under the limit, chunked is fine.
    let mut cfg = config(dir.path(), &[&s.url]);
    cfg.max_size = Some(1 << 20);
    assert!(matches!(
        Client::new(cfg).fetch(ID, &Kind::Debuginfo),
        Ok(Fetched::Found { .. })
    ));
}

fn timed_out(c: &Client, within: Duration) {
    let t = Instant::now();
    match c.fetch(ID, &Kind::Debuginfo) {
        Err(Error::TimedOut { .. }) => {}
        other => panic!("{other:?}"),
    }
    assert!(t.elapsed() < within, "{:?}", t.elapsed());
}

#[test]
fn a_server_that_never_answers_times_out() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start();
    s.on(&path(ID, "debuginfo"), Reply::Hang);
    let mut cfg = config(dir.path(), &[&s.url]);
    cfg.timeout = Duration::from_secs(1);
    let c = Client::new(cfg);
    timed_out(&c, Duration::from_millis(2500));
    assert_eq!(c.stats().failed, 1);
    assert!(temps(&idir(&dir)).is_empty());
}

/// A server that timed out is not asked again by the same client: a report
/// of fifty stripped binaries against a dead server waits one timeout, not
/// fifty; the next server in the list still is asked.
#[test]
fn a_server_that_timed_out_is_not_asked_again() {
    let dir = tempfile::tempdir().unwrap();
    let dead = Server::start();
    let ids: Vec<Vec<u8>> = (1..=3u8).map(|i| vec![i; 20]).collect();
    for id in &ids {
        dead.on(&path(id, "debuginfo"), Reply::Hang);
    }
    let mut cfg = config(dir.path(), &[&dead.url]);
    cfg.timeout = Duration::from_secs(1);
    let c = Client::new(cfg);
    let t = Instant::now();
    for id in &ids {
        assert!(c.fetch(id, &Kind::Debuginfo).is_err());
    }
    assert!(
        t.elapsed() < Duration::from_millis(2500),
        "{:?}",
        t.elapsed()
    );
    assert_eq!(dead.requests(), 1);
    match c.fetch(&ids[0], &Kind::Debuginfo) {
        Err(e) => assert!(e.to_string().contains("not asked again"), "{e}"),
        other => panic!("{other:?}"),
    }
    // A port nobody listens on: unreachable once, then not asked.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://127.0.0.1:{}", l.local_addr().unwrap().port())
    };
    let c = Client::new(config(dir.path(), &[&closed]));
    match c.fetch(&ids[0], &Kind::Debuginfo) {
        Err(Error::Unreachable { .. }) => {}
        other => panic!("{other:?}"),
    }
    match c.fetch(&ids[1], &Kind::Debuginfo) {
        Err(e) => assert!(e.to_string().contains("not asked again"), "{e}"),
        other => panic!("{other:?}"),
    }
    // A second server after it is asked.
    let alive = Server::start();
    alive.on(&path(&ids[1], "debuginfo"), Reply::Ok(elf(&ids[1], 4000)));
    let mut cfg = config(dir.path(), &[&dead.url, &alive.url]);
    cfg.timeout = Duration::from_secs(1);
    let c = Client::new(cfg);
    assert!(matches!(
        c.fetch(&ids[1], &Kind::Debuginfo),
        Ok(Fetched::Found { .. })
    ));
}

/// A client's budget bounds what it downloads, all files together: the
/// transfer that passes it is cut (nothing of it kept) and no more start.
#[test]
fn the_download_budget_bounds_all_files_together() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start();
    let ids: Vec<Vec<u8>> = (1..=4u8).map(|i| vec![i; 20]).collect();
    for id in &ids {
        s.on(&path(id, "debuginfo"), Reply::Ok(elf(id, 40_000)));
    }
    let c = Client::new(config(dir.path(), &[&s.url])).with_budget(100_000);
    let mut found = 0;
    let mut over = 0;
    for id in &ids {
        match c.fetch(id, &Kind::Debuginfo) {
            Ok(Fetched::Found { .. }) => found += 1,
            Err(Error::OverBudget { budget, .. }) => {
                assert_eq!(budget, 100_000);
                over += 1;
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!((found, over), (2, 2));
    assert_eq!(s.requests(), 3, "none after the budget was spent");
    assert!(c.stats().bytes <= 100_000 + (64 << 10), "{:?}", c.stats());
    for id in &ids[2..] {
        let d = dir.path().join("cache").join(profkit_debuginfod::hex(id));
        assert!(!d.join("debuginfo").exists());
        assert!(temps(&d).is_empty());
    }
}

#[test]
fn a_body_stalling_midway_times_out() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start();
    s.on(
        &path(ID, "debuginfo"),
        Reply::Stall {
            len: 1000,
            send: vec![0; 100],
        },
    );
    let mut cfg = config(dir.path(), &[&s.url]);
    cfg.timeout = Duration::from_secs(1);
    timed_out(&Client::new(cfg), Duration::from_millis(2500));
}

#[test]
fn max_time_bounds_a_trickling_transfer() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start();
    // 100 bytes every 200 ms for 20 s: never stalls a full second.
    let trickle = Reply::Trickle {
        chunk: 100,
        pause: Duration::from_millis(200),
        count: 100,
    };
    s.on(&path(ID, "debuginfo"), trickle);
    let mut cfg = config(dir.path(), &[&s.url]);
    cfg.timeout = Duration::from_secs(1);
    cfg.max_time = Some(Duration::from_secs(1));
    timed_out(&Client::new(cfg), Duration::from_millis(2500));
}

#[test]
fn garbage_truncated_and_empty_answers_fail_cleanly() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start();
    let c = Client::new(config(dir.path(), &[&s.url]));
    let cases: [(Reply, &str); 5] = [
        (Reply::Raw(b"garbage\r\n\r\n".to_vec()), "garbage"),
        (
            Reply::Raw(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nshort".to_vec()),
            "truncated",
        ),
        (Reply::Raw(Vec::new()), "closed at once"),
        (Reply::Status(200), "200 with no body"),
        (Reply::Status(500), "500"),
    ];
    for (reply, what) in cases {
        s.on(&path(ID, "debuginfo"), reply);
        match c.fetch(ID, &Kind::Debuginfo) {
            Err(Error::WrongBuildId { found, .. }) if what == "200 with no body" => {
                assert_eq!(found, "none")
            }
            Err(Error::Status { status: 500, .. }) if what == "500" => {}
            Err(Error::Http { .. }) => {}
            other => panic!("{what}: {other:?}"),
        }
        assert!(!idir(&dir).join("debuginfo").exists(), "{what}");
        assert!(temps(&idir(&dir)).is_empty(), "{what}");
    }
    let st = c.stats();
    assert_eq!((st.refused, st.failed, st.fetched), (1, 4, 0));
}

#[test]
fn https_to_a_plain_http_server_fails_its_handshake_cleanly() {
    // The TLS stack (rustls with the platform verifier) is set up and
    // used: the handshake fails, as an error, not a panic or a hang.
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start();
    let url = s.url.replace("http://", "https://");
    let mut cfg = config(dir.path(), &[&url]);
    cfg.timeout = Duration::from_secs(2);
    let c = Client::new(cfg);
    match c.fetch(ID, &Kind::Debuginfo) {
        Err(Error::Http { .. } | Error::TimedOut { .. }) => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(s.connections(), 1);
}
