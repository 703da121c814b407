//! The transport: one POST per statement to ClickHouse's HTTP interface,
//! the answer read under a size cap, errors sorted into [`Error`]s.

use crate::{tsv, Error, Target};
use std::io::Read;
use std::sync::OnceLock;
use std::time::Duration;
use ureq::tls::{RootCerts, TlsConfig};
use ureq::Agent;

/// Connect timeout (and resolving, sending the request).
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// Each read of the answer (its head and every body read).
pub const READ_TIMEOUT: Duration = Duration::from_secs(60);
/// The default cap on an answer's body.
pub const DEFAULT_MAX_RESPONSE: u64 = 256 << 20;

/// A ClickHouse HTTP client for one [`Target`]. `Send + Sync`: threads
/// may share one. Its `Debug` shows the target redacted.
pub struct Client {
    target: Target,
    agent: Agent,
    max_response: u64,
    connect: Duration,
    read: Duration,
    /// Settings an INSERT sends, as `&name=value`, found once per client.
    insert_settings: OnceLock<String>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client")
            .field("target", &self.target.redacted())
            .field("max_response", &self.max_response)
            .finish_non_exhaustive()
    }
}

fn agent(connect: Duration, read: Duration) -> Agent {
    Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .tls_config(
            TlsConfig::builder()
                .root_certs(RootCerts::PlatformVerifier)
                .build(),
        )
        .user_agent(concat!("profkit-fleet/", env!("CARGO_PKG_VERSION")))
        .timeout_resolve(Some(connect))
        .timeout_connect(Some(connect))
        .timeout_send_request(Some(connect.max(read)))
        .timeout_send_body(Some(read))
        .timeout_recv_response(Some(read))
        .timeout_per_read(Some(read))
        .build()
        .new_agent()
}

impl Client {
    /// A client of `target`: connect within 10 s, each read within 60 s,
    /// answers capped at [`DEFAULT_MAX_RESPONSE`]. The credentials go in
    /// `X-ClickHouse-User` / `X-ClickHouse-Key` headers, never the URL.
    pub fn new(target: Target) -> Client {
        Client {
            target,
            agent: agent(CONNECT_TIMEOUT, READ_TIMEOUT),
            max_response: DEFAULT_MAX_RESPONSE,
            connect: CONNECT_TIMEOUT,
            read: READ_TIMEOUT,
            insert_settings: OnceLock::new(),
        }
    }

    /// The same client with answers capped at `bytes`.
    pub fn max_response(mut self, bytes: u64) -> Client {
        self.max_response = bytes;
        self
    }

    /// The same client with other timeouts: `connect` for resolving and
    /// connecting, `read` for the answer's head and each read of its body.
    pub fn timeouts(mut self, connect: Duration, read: Duration) -> Client {
        self.agent = agent(connect, read);
        self.connect = connect;
        self.read = read;
        self
    }

    /// Where it sends.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// Runs `sql` (sent as the body) and returns the answer's body.
    pub(crate) fn run(&self, sql: &str, what: &'static str) -> Result<Vec<u8>, Error> {
        self.post(None, "", sql.as_bytes(), what)
    }

    /// Runs `INSERT … FORMAT …` (`sql`, sent in the URL) with `data` as the
    /// body.
    pub(crate) fn insert(&self, sql: &str, data: &[u8], what: &'static str) -> Result<(), Error> {
        let settings = match self.insert_settings.get() {
            Some(s) => s,
            None => {
                let s = self.find_insert_settings()?;
                self.insert_settings.get_or_init(|| s)
            }
        };
        let body = self.post(Some(sql), settings, data, what)?;
        if body.iter().all(u8::is_ascii_whitespace) {
            Ok(())
        } else {
            Err(self.bad(
                what,
                format!("an INSERT answered text: {}", tsv::excerpt(&body)),
            ))
        }
    }

    /// `&input_format_parallel_parsing=0` where the server has the
    /// setting (19.x and later; 18.16 refuses unknown settings): parsed in
    /// parallel, an INSERT's rows may make several blocks (chunks of
    /// about 10 MB), and the export's INSERT must stay one block.
    fn find_insert_settings(&self) -> Result<String, Error> {
        let what = "the settings query";
        let rows = self.select(
            "SELECT name FROM system.settings WHERE name = 'input_format_parallel_parsing' FORMAT TabSeparated",
            1,
            what,
        )?;
        Ok(match rows.as_slice() {
            [] => String::new(),
            [r] if r[0] == b"input_format_parallel_parsing" => {
                "&input_format_parallel_parsing=0".to_owned()
            }
            _ => return Err(self.bad(what, format!("{} lines, at most 1 expected", rows.len()))),
        })
    }

    /// A TabSeparated answer of `columns` columns to `sql`, split.
    pub(crate) fn select(
        &self,
        sql: &str,
        columns: usize,
        what: &'static str,
    ) -> Result<Vec<Vec<Vec<u8>>>, Error> {
        let body = self.run(sql, what)?;
        let rows = tsv::rows(&body, columns).map_err(|why| self.bad(what, why))?;
        Ok(rows
            .into_iter()
            .map(|r| r.into_iter().map(<[u8]>::to_vec).collect())
            .collect())
    }

    pub(crate) fn bad(&self, what: &'static str, why: String) -> Error {
        Error::BadAnswer {
            target: self.target.redacted(),
            what,
            why,
        }
    }

    fn post(
        &self,
        query: Option<&str>,
        settings: &str,
        body: &[u8],
        what: &'static str,
    ) -> Result<Vec<u8>, Error> {
        // Tables are named with their database in every statement: no
        // `database=` (it fails while the database does not exist yet).
        // wait_end_of_query: the server answers once the query is done,
        // so a failure is an error status rather than text appended to a
        // 200 (still detected, for servers or proxies that ignore it).
        // insert_distributed_sync: an INSERT into a Distributed table is
        // done when it answers, so the export's read-back sees it.
        let mut url = format!(
            "{}/?wait_end_of_query=1&insert_distributed_sync=1",
            self.target.base
        );
        url.push_str(settings);
        if let Some(q) = query {
            url.push_str("&query=");
            url.push_str(&crate::target::encode(q));
        }
        let mut req = self.agent.post(&url);
        if let Some(u) = &self.target.user {
            req = req.header("X-ClickHouse-User", u);
        }
        if let Some(p) = &self.target.password {
            req = req.header("X-ClickHouse-Key", p);
        }
        let resp = req.send(body).map_err(|e| self.failure(e))?;
        let status = resp.status().as_u16();
        let max = self.max_response;
        if let Some(len) = resp.body().content_length() {
            if len > max {
                return Err(self.too_large());
            }
        }
        let mut out = Vec::new();
        let mut reader = resp.into_body().into_reader().take(max + 1);
        if let Err(e) = reader.read_to_end(&mut out) {
            return Err(self.read_failure(e));
        }
        if out.len() as u64 > max {
            return Err(self.too_large());
        }
        if let Some((code, message)) = tsv::exception(&out) {
            let target = self.target.redacted();
            return Err(
                if status == 401 || status == 403 || matches!(code, 192..=194 | 516) {
                    Error::Auth { target, message }
                } else {
                    Error::Server {
                        target,
                        status,
                        code,
                        message,
                    }
                },
            );
        }
        match status {
            200 => Ok(out),
            401 | 403 => Err(Error::Auth {
                target: self.target.redacted(),
                message: format!("HTTP {status}: {}", tsv::excerpt(&out)),
            }),
            _ => Err(Error::Server {
                target: self.target.redacted(),
                status,
                code: 0,
                message: format!("{} ({what})", tsv::excerpt(&out)),
            }),
        }
    }

    fn too_large(&self) -> Error {
        Error::TooLarge {
            target: self.target.redacted(),
            max: self.max_response,
        }
    }

    fn failure(&self, e: ureq::Error) -> Error {
        let target = self.target.redacted();
        let timed_out = |what, after| Error::TimedOut {
            target: target.clone(),
            what,
            after,
        };
        match e {
            ureq::Error::Timeout(t) => match t {
                ureq::Timeout::Resolve | ureq::Timeout::Connect => {
                    timed_out("no connection", self.connect)
                }
                ureq::Timeout::RecvResponse | ureq::Timeout::RecvBody | ureq::Timeout::PerCall => {
                    timed_out("no answer", self.read)
                }
                _ => timed_out("the transfer stalled", self.read),
            },
            ureq::Error::Io(io) if io.kind() == std::io::ErrorKind::TimedOut => {
                timed_out("no connection", self.connect)
            }
            ureq::Error::Io(io)
                if matches!(
                    io.kind(),
                    std::io::ErrorKind::ConnectionRefused
                        | std::io::ErrorKind::HostUnreachable
                        | std::io::ErrorKind::NetworkUnreachable
                        | std::io::ErrorKind::AddrNotAvailable
                ) =>
            {
                Error::Unreachable {
                    target,
                    why: io.to_string(),
                }
            }
            ureq::Error::HostNotFound | ureq::Error::ConnectionFailed => Error::Unreachable {
                target,
                why: e.to_string(),
            },
            // Before any answer: a name that does not resolve, a connection
            // reset or closed. Nothing is known to be done: try later.
            ureq::Error::Io(io) => Error::Unreachable {
                target,
                why: format!("no answer: {io}"),
            },
            e => Error::Http {
                target,
                why: format!("the request failed: {e}"),
            },
        }
    }

    fn read_failure(&self, e: std::io::Error) -> Error {
        let inner = e.get_ref().and_then(|i| i.downcast_ref::<ureq::Error>());
        let stalled = matches!(inner, Some(ureq::Error::Timeout(_)))
            || matches!(
                e.kind(),
                std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
            );
        if stalled {
            return Error::TimedOut {
                target: self.target.redacted(),
                what: "the answer stalled",
                after: self.read,
            };
        }
        Error::Http {
            target: self.target.redacted(),
            why: format!("the answer could not be read (cut short?): {e}"),
        }
    }
}
