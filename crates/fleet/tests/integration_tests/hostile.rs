//! Servers that lie, fail, stall or are not there: a clear error each
//! time, never a panic, never a password in it.

use crate::server::{Reply, Server};
use crate::{part, row};
use profkit_fleet::{Client, Error, Query};
use std::time::Duration;

fn totals_with(reply: Reply) -> Error {
    let s = Server::start(vec![reply]);
    let c =
        Client::new(s.target("u:secret")).timeouts(Duration::from_secs(2), Duration::from_secs(2));
    let e = c.totals(&Query::default()).unwrap_err();
    let shown = format!("{e} {e:?}");
    assert!(!shown.contains("secret"), "{shown}");
    assert!(shown.contains("clickhouse://u:***@127.0.0.1:"), "{shown}");
    e
}

#[test]
fn garbage_answers_are_bad_answers() {
    for (body, says) in [
        (&b"abc\t1\t1\t1\t1\t1\n"[..], "not a number"),
        (b"1\t2\n", "2 columns, 6 expected"),
        (b"1\t2\t3\t4\t5\t6\n1\t2\t3\t4\t5\t6\n", "2 lines"),
        (b"<html><body>proxy error</body></html>", "newline"),
        (b"<html>\n<body>proxy error</body>\n</html>\n", "1 columns"),
        (b"1\t2\t3\t4\t5\t-6\n", "not a number"),
        (b"1\t2\t3\t4\t5\t99999999999999999999999\n", "not a number"),
        (b"\xff\xfe\t\n", "2 columns"),
    ] {
        match totals_with(Reply::Ok(body)) {
            Error::BadAnswer { why, .. } => assert!(why.contains(says), "{why} / {says}"),
            e => panic!("{body:?}: {e:?}"),
        }
    }
}

#[test]
fn an_exception_in_a_200_is_a_server_error() {
    let body = b"1\t2\t3\t4\t5\t6\nCode: 395, e.displayText() = DB::Exception: Value passed to 'throwIf' function is non zero, e.what() = DB::Exception\n";
    match totals_with(Reply::Ok(body)) {
        Error::Server {
            status,
            code,
            message,
            ..
        } => {
            assert_eq!((status, code), (200, 395));
            assert!(message.contains("throwIf"), "{message}");
        }
        e => panic!("{e:?}"),
    }
    let body = b"Code: 60, e.displayText() = DB::Exception: Table db.profkit_parts doesn't exist., e.what() = DB::Exception\n";
    match totals_with(Reply::Status(404, body)) {
        Error::Server { status, code, .. } => assert_eq!((status, code), (404, 60)),
        e => panic!("{e:?}"),
    }
    match totals_with(Reply::Status(502, b"<html>Bad Gateway</html>")) {
        Error::Server {
            status,
            code,
            message,
            ..
        } => {
            assert_eq!((status, code), (502, 0));
            assert!(message.contains("Bad Gateway"), "{message}");
        }
        e => panic!("{e:?}"),
    }
}

#[test]
fn auth_failures_say_so() {
    let body = b"Code: 193, e.displayText() = DB::Exception: Wrong password for user u, e.what() = DB::Exception\n";
    assert!(matches!(
        totals_with(Reply::Status(401, body)),
        Error::Auth { .. }
    ));
    assert!(matches!(
        totals_with(Reply::Status(403, b"")),
        Error::Auth { .. }
    ));
}

#[test]
fn cut_bodies_are_errors() {
    let raw = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nConnection: close\r\n\r\n1\t2\t3";
    let e = totals_with(Reply::Raw(raw));
    assert!(matches!(e, Error::Http { .. }), "{e:?}");
    let raw =
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n4\r\n1\t2\t";
    let e = totals_with(Reply::Raw(raw));
    assert!(
        matches!(e, Error::Http { .. } | Error::BadAnswer { .. }),
        "{e:?}"
    );
    let e = totals_with(Reply::Raw(b"SSH-2.0-OpenSSH_9.2\r\n"));
    assert!(matches!(e, Error::Http { .. }), "{e:?}");
    // Closed without a word: as good as not there (try later).
    let e = totals_with(Reply::Raw(b""));
    assert!(e.is_unreachable(), "{e:?}");
}

#[test]
fn answers_are_capped() {
    let big = b"1\t1\t1\t1\t1\t1\n".repeat(200);
    for reply in [Reply::Body(big.clone()), Reply::Chunked(big)] {
        let s = Server::start(vec![reply]);
        let c = Client::new(s.target("")).max_response(1000);
        match c.totals(&Query::default()) {
            Err(Error::TooLarge { max, .. }) => assert_eq!(max, 1000),
            r => panic!("{r:?}"),
        }
    }
}

#[test]
fn a_silent_server_times_out() {
    let s = Server::start(vec![Reply::Hang]);
    let c =
        Client::new(s.target("u:secret")).timeouts(Duration::from_secs(1), Duration::from_secs(1));
    let t = std::time::Instant::now();
    let e = c.ensure_schema().unwrap_err();
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    assert!(
        matches!(e, Error::TimedOut { .. }) && e.is_unreachable(),
        "{e:?}"
    );
}

#[test]
fn a_server_down_is_unreachable() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let t = profkit_fleet::Target::parse(&format!("clickhouse://u:secret@127.0.0.1:{port}/db"))
        .unwrap();
    let e = Client::new(t)
        .export_part(&part("h", "s", 0, 1, vec![]))
        .unwrap_err();
    assert!(
        matches!(e, Error::Unreachable { .. }) && e.is_unreachable(),
        "{e:?}"
    );
    assert!(!format!("{e} {e:?}").contains("secret"));
    let t = profkit_fleet::Target::parse("clickhouse://u:secret@no-such-host.invalid/db").unwrap();
    let e = Client::new(t).ensure_schema().unwrap_err();
    assert!(e.is_unreachable(), "{e:?}");
}

#[test]
fn credentials_go_in_headers_only() {
    let s = Server::start(vec![Reply::Ok(b"1\t2\t3\t4\t5\t6\n")]);
    let c = Client::new(s.target("us%20er:p%40ss%3Asecret"));
    assert!(!format!("{c:?} {:?}", c.target()).contains("secret"));
    c.totals(&Query::default()).unwrap();
    let r = &s.requests()[0];
    let line = r.head.lines().next().unwrap();
    assert!(!line.contains("secret") && !line.contains("ss"), "{line}");
    let head = r.head.to_ascii_lowercase();
    assert!(
        head.contains("\r\nx-clickhouse-user: us er\r\n"),
        "{}",
        r.head
    );
    assert!(
        head.contains("\r\nx-clickhouse-key: p@ss:secret\r\n"),
        "{}",
        r.head
    );
    assert!(String::from_utf8_lossy(&r.body).starts_with("SELECT "));
    assert!(!r.head.to_ascii_lowercase().contains("authorization"));
}

#[test]
fn an_insert_that_did_not_land_is_caught() {
    // parts check: none; samples check: none; the settings (a server
    // that has input_format_parallel_parsing); the INSERT: 200; read
    // back: nothing stored.
    let s = Server::start(vec![
        Reply::Ok(b"0\n"),
        Reply::Ok(b"0\t0\n"),
        Reply::Ok(b"input_format_parallel_parsing\n"),
        Reply::Ok(b""),
        Reply::Ok(b"0\t0\n"),
    ]);
    let p = part("h", "s", 1, 1, vec![row("/bin/x", "f", 5, &[])]);
    match Client::new(s.target("")).export_part(&p) {
        Err(Error::BadAnswer { why, .. }) => {
            assert!(why.contains("1 rows with 5 samples sent"), "{why}")
        }
        r => panic!("{r:?}"),
    }
    let reqs = s.requests();
    // No parts row was written after the failed check.
    assert_eq!(reqs.len(), 5);
    let insert = reqs[3].head.lines().next().unwrap();
    assert!(
        insert
            .contains("&input_format_parallel_parsing=0&query=INSERT%20INTO%20db.profkit_samples"),
        "{insert}"
    );
    assert!(reqs[3].body.starts_with(b"h\ts\t1\th/s/1\t"));
}

#[test]
fn stored_rows_that_differ_are_inconsistent() {
    let s = Server::start(vec![Reply::Ok(b"0\n"), Reply::Ok(b"2\t9\n")]);
    let p = part("h", "s", 1, 1, vec![row("/bin/x", "f", 5, &[])]);
    match Client::new(s.target("")).export_part(&p) {
        Err(Error::Inconsistent {
            stored_rows,
            stored_samples,
            rows,
            samples,
            ..
        }) => {
            assert_eq!((stored_rows, stored_samples, rows, samples), (2, 9, 1, 5))
        }
        r => panic!("{r:?}"),
    }
    assert_eq!(s.requests().len(), 2, "nothing written");
}

#[test]
fn bad_parts_are_refused_before_sending() {
    let s = Server::start(vec![Reply::Ok(b"0\n")]);
    let c = Client::new(s.target(""));
    let mut p = part("h", "s", 1, 1, vec![row("/bin/x", "f", 5, &[])]);
    p.samples = 6;
    assert!(matches!(c.export_part(&p), Err(Error::BadPart { .. })));
    let mut p = part("h", "s", 1, 1, vec![row("/bin/x", "f", 5, &[])]);
    p.rows[0].cpu = 70000;
    assert!(matches!(c.export_part(&p), Err(Error::BadPart { .. })));
    let p = part("", "s", 1, 1, vec![]);
    assert!(matches!(c.export_part(&p), Err(Error::BadPart { .. })));
    assert!(s.requests().is_empty());
}
