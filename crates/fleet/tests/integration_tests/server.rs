//! A tiny scripted HTTP/1.1 server on 127.0.0.1: one thread per
//! connection, `Connection: close`; the n-th request gets the n-th reply
//! (the last one repeated), requests are recorded.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the server answers.
#[derive(Clone)]
pub enum Reply {
    /// 200 with a Content-Length.
    Ok(&'static [u8]),
    /// 200 with an owned body.
    Body(Vec<u8>),
    /// 200, chunked, without a length.
    Chunked(Vec<u8>),
    /// A status with a body.
    Status(u16, &'static [u8]),
    /// Reads the request and never answers.
    Hang,
    /// Raw bytes, then close.
    Raw(&'static [u8]),
}

/// A request as received.
#[derive(Clone, Debug)]
pub struct Request {
    /// The request line and headers.
    pub head: String,
    /// The body.
    pub body: Vec<u8>,
}

/// A running server (its threads live until the test process ends).
pub struct Server {
    /// Its port.
    pub port: u16,
    requests: Arc<Mutex<Vec<Request>>>,
}

impl Server {
    pub fn start(replies: Vec<Reply>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let r = requests.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                let r = r.clone();
                let replies = replies.clone();
                std::thread::spawn(move || serve(conn, &r, &replies));
            }
        });
        Server { port, requests }
    }

    /// `clickhouse://…@127.0.0.1:PORT/db` with `cred` (`user:pass`).
    pub fn target(&self, cred: &str) -> profkit_fleet::Target {
        let at = if cred.is_empty() { "" } else { "@" };
        profkit_fleet::Target::parse(&format!(
            "clickhouse://{cred}{at}127.0.0.1:{}/db",
            self.port
        ))
        .unwrap()
    }

    /// Requests received, in order.
    pub fn requests(&self) -> Vec<Request> {
        self.requests.lock().unwrap().clone()
    }
}

fn serve(mut conn: TcpStream, log: &Mutex<Vec<Request>>, replies: &[Reply]) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && head.len() < 64 << 10 {
        match conn.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return,
        }
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let len = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0);
    let mut body = vec![0u8; len];
    if conn.read_exact(&mut body).is_err() {
        return;
    }
    let n = {
        let mut l = log.lock().unwrap();
        l.push(Request { head, body });
        l.len() - 1
    };
    let reply = replies[n.min(replies.len() - 1)].clone();
    let _ = answer(&mut conn, reply);
}

fn answer(conn: &mut TcpStream, reply: Reply) -> std::io::Result<()> {
    let status = |conn: &mut TcpStream, code: u16, body: &[u8]| {
        write!(
            conn,
            "HTTP/1.1 {code} X\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        )?;
        conn.write_all(body)
    };
    match reply {
        Reply::Ok(body) => status(conn, 200, body),
        Reply::Body(body) => status(conn, 200, &body),
        Reply::Status(code, body) => status(conn, code, body),
        Reply::Chunked(body) => {
            write!(
                conn,
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
            )?;
            for c in body.chunks(4096) {
                write!(conn, "{:x}\r\n", c.len())?;
                conn.write_all(c)?;
                conn.write_all(b"\r\n")?;
            }
            conn.write_all(b"0\r\n\r\n")
        }
        Reply::Hang => {
            std::thread::sleep(Duration::from_secs(30));
            Ok(())
        }
        Reply::Raw(bytes) => conn.write_all(bytes),
    }
}
