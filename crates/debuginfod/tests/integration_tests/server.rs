//! A tiny scripted HTTP/1.1 server on 127.0.0.1: one thread per
//! connection, `Connection: close`, replies per path, counters.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What the server answers on a path.
#[derive(Clone)]
pub enum Reply {
    /// 200 with a Content-Length.
    Ok(Vec<u8>),
    /// 200, chunked.
    Chunked(Vec<u8>),
    /// A bare status, empty body.
    Status(u16),
    /// 302 to a Location.
    Redirect(String),
    /// Reads the request and never answers.
    Hang,
    /// 200 announcing `len` bytes, sends `send`, then stalls.
    Stall { len: u64, send: Vec<u8> },
    /// Raw bytes, then close.
    Raw(Vec<u8>),
    /// 200 chunked, `chunk` bytes every `pause`, `count` times.
    Trickle {
        chunk: usize,
        pause: Duration,
        count: usize,
    },
    /// Waits, then replies.
    Delay(Duration, Box<Reply>),
}

#[derive(Default)]
struct State {
    routes: Mutex<HashMap<String, Reply>>,
    paths: Mutex<Vec<String>>,
    connections: AtomicUsize,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
}

/// A running server (its threads live until the test process ends).
pub struct Server {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    state: Arc<State>,
}

impl Server {
    pub fn start() -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let state = Arc::new(State::default());
        let s = state.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                s.connections.fetch_add(1, SeqCst);
                let s = s.clone();
                std::thread::spawn(move || serve(conn, &s));
            }
        });
        Server { url, state }
    }

    /// Answers `reply` on `path`.
    pub fn on(&self, path: &str, reply: Reply) -> &Server {
        self.state
            .routes
            .lock()
            .unwrap()
            .insert(path.to_owned(), reply);
        self
    }

    /// Requests received.
    pub fn requests(&self) -> usize {
        self.state.paths.lock().unwrap().len()
    }

    /// Paths requested, in order.
    pub fn paths(&self) -> Vec<String> {
        self.state.paths.lock().unwrap().clone()
    }

    /// Connections accepted.
    pub fn connections(&self) -> usize {
        self.state.connections.load(SeqCst)
    }

    /// Most requests in progress at once.
    pub fn max_in_flight(&self) -> usize {
        self.state.max_in_flight.load(SeqCst)
    }
}

fn serve(mut conn: TcpStream, s: &State) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && head.len() < 16 << 10 {
        match conn.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return,
        }
    }
    let head = String::from_utf8_lossy(&head);
    let path = head.split(' ').nth(1).unwrap_or("").to_owned();
    s.paths.lock().unwrap().push(path.clone());
    let now = s.in_flight.fetch_add(1, SeqCst) + 1;
    s.max_in_flight.fetch_max(now, SeqCst);
    let reply = s.routes.lock().unwrap().get(&path).cloned();
    let _ = answer(&mut conn, reply.unwrap_or(Reply::Status(404)));
    s.in_flight.fetch_sub(1, SeqCst);
}

fn answer(conn: &mut TcpStream, reply: Reply) -> std::io::Result<()> {
    let hang = || std::thread::sleep(Duration::from_secs(30));
    match reply {
        Reply::Ok(body) => {
            write!(
                conn,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            )?;
            conn.write_all(&body)
        }
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
        Reply::Status(code) => write!(
            conn,
            "HTTP/1.1 {code} X\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        ),
        Reply::Redirect(to) => write!(
            conn,
            "HTTP/1.1 302 Found\r\nLocation: {to}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        ),
        Reply::Hang => {
            hang();
            Ok(())
        }
        Reply::Stall { len, send } => {
            write!(
                conn,
                "HTTP/1.1 200 OK\r\nContent-Length: {len}\r\nConnection: close\r\n\r\n"
            )?;
            conn.write_all(&send)?;
            conn.flush()?;
            hang();
            Ok(())
        }
        Reply::Raw(bytes) => conn.write_all(&bytes),
        Reply::Trickle {
            chunk,
            pause,
            count,
        } => {
            write!(
                conn,
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
            )?;
            for _ in 0..count {
                write!(conn, "{chunk:x}\r\n")?;
                conn.write_all(&vec![0u8; chunk])?;
                conn.write_all(b"\r\n")?;
                conn.flush()?;
                std::thread::sleep(pause);
            }
            conn.write_all(b"0\r\n\r\n")
        }
        Reply::Delay(d, inner) => {
            std::thread::sleep(d);
            answer(conn, *inner)
        }
    }
}
