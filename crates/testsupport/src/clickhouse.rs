//! A throwaway ClickHouse server for the tests of `profkit-fleet`: its
//! own temporary directory, free ports on 127.0.0.1, killed and removed
//! when dropped.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Where Debian's package installs the server.
pub const CLICKHOUSE_SERVER: &str = "/usr/sbin/clickhouse-server";

/// The cluster of one shard (the server itself, over its TCP port) its
/// config defines, for Distributed tables.
pub const CLUSTER: &str = "profkit_one";

/// How long [`ClickHouseServer::start`] waits for `SELECT 1` to answer.
pub const READY_TIMEOUT: Duration = Duration::from_secs(30);

/// A running `clickhouse-server` (HTTP interface only is used).
pub struct ClickHouseServer {
    /// Its HTTP port on 127.0.0.1.
    pub port: u16,
    /// `clickhouse://127.0.0.1:PORT/DB` (with `user:password@` for
    /// [`ClickHouseServer::start_with_password`]).
    pub url: String,
    /// Its directory (config, data, logs).
    pub dir: PathBuf,
    child: Option<Child>,
    cred: Option<(String, String)>,
    _tmp: tempfile::TempDir,
}

impl ClickHouseServer {
    /// Starts a server whose `default` user has no password; `url` names
    /// database `db`. `None` after [`skip`](crate::skip) when there is no
    /// `clickhouse-server` or it does not start.
    ///
    /// # Panics
    /// Under `PROFKIT_REQUIRE_PERF=1`, when it cannot start.
    #[track_caller]
    pub fn start(db: &str) -> Option<ClickHouseServer> {
        Self::start_inner(db, None)
    }

    /// As [`start`](Self::start), but the only user is `user` with
    /// `password` (plain text in users.xml); `url` carries them,
    /// percent-encoded.
    ///
    /// # Panics
    /// Under `PROFKIT_REQUIRE_PERF=1`, when it cannot start.
    #[track_caller]
    pub fn start_with_password(db: &str, user: &str, password: &str) -> Option<ClickHouseServer> {
        Self::start_inner(db, Some((user, password)))
    }

    #[track_caller]
    fn start_inner(db: &str, cred: Option<(&str, &str)>) -> Option<ClickHouseServer> {
        if !Path::new(CLICKHOUSE_SERVER).exists() {
            crate::skip(format_args!(
                "no {CLICKHOUSE_SERVER} (apt install clickhouse-server)"
            ));
            return None;
        }
        let tmp = tempfile::Builder::new()
            .prefix("profkit-clickhouse")
            .tempdir()
            .expect("a temporary directory");
        let dir = tmp.path().to_path_buf();
        for d in ["data", "tmp", "log", "user_files"] {
            std::fs::create_dir_all(dir.join(d)).expect("server directories");
        }
        let (port, tcp) = (free_port(), free_port());
        let d = dir.display();
        let (user, password) = cred.unwrap_or(("default", ""));
        let config = format!(
            "<yandex><logger><level>warning</level><log>{d}/log/server.log</log>\
             <errorlog>{d}/log/err.log</errorlog><console>0</console></logger>\
             <http_port>{port}</http_port><tcp_port>{tcp}</tcp_port>\
             <listen_host>127.0.0.1</listen_host><path>{d}/data/</path><tmp_path>{d}/tmp/</tmp_path>\
             <user_files_path>{d}/user_files/</user_files_path><users_config>users.xml</users_config>\
             <default_profile>default</default_profile><default_database>default</default_database>\
             <mark_cache_size>5368709</mark_cache_size>\
             <remote_servers><{CLUSTER}><shard><replica><host>127.0.0.1</host><port>{tcp}</port>\
             <user>{user}</user><password>{password}</password></replica></shard></{CLUSTER}></remote_servers>\
             </yandex>\n",
            password = xml_escape(password)
        );
        let users = format!(
            "<yandex><profiles><default></default></profiles><users><{user}><password>{}</password>\
             <networks><ip>::1</ip><ip>127.0.0.1</ip></networks><profile>default</profile>\
             <quota>default</quota></{user}></users><quotas><default></default></quotas></yandex>\n",
            xml_escape(password)
        );
        std::fs::write(dir.join("config.xml"), config).expect("config.xml");
        std::fs::write(dir.join("users.xml"), users).expect("users.xml");
        let url = match cred {
            Some((u, p)) => format!("clickhouse://{}:{}@127.0.0.1:{port}/{db}", pct(u), pct(p)),
            None => format!("clickhouse://127.0.0.1:{port}/{db}"),
        };
        let mut s = ClickHouseServer {
            port,
            url,
            dir,
            child: None,
            cred: cred.map(|(u, p)| (u.to_owned(), p.to_owned())),
            _tmp: tmp,
        };
        if let Err(why) = s.launch(cred) {
            crate::skip(format_args!("clickhouse-server did not start: {why}"));
            return None;
        }
        Some(s)
    }

    fn launch(&mut self, cred: Option<(&str, &str)>) -> Result<(), String> {
        let child = Command::new(CLICKHOUSE_SERVER)
            .arg(format!(
                "--config-file={}",
                self.dir.join("config.xml").display()
            ))
            .current_dir(&self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("{CLICKHOUSE_SERVER}: {e}"))?;
        self.child = Some(child);
        let start = Instant::now();
        while start.elapsed() < READY_TIMEOUT {
            if let Some(Ok(Some(st))) = self.child.as_mut().map(|c| c.try_wait()) {
                self.child = None;
                let log = std::fs::read_to_string(self.dir.join("log/err.log")).unwrap_or_default();
                return Err(format!("it exited ({st}): {}", tail(&log)));
            }
            if select_1(self.port, cred) {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        self.kill();
        Err(format!("no answer to SELECT 1 within {READY_TIMEOUT:?}"))
    }

    /// Kills the server (SIGKILL: what a crash does); its port and data
    /// stay for [`restart`](Self::restart).
    pub fn stop(&mut self) {
        self.kill();
    }

    /// Starts the server again on the same port and data directory.
    ///
    /// # Panics
    /// When it does not start (it did before).
    pub fn restart(&mut self) {
        self.kill();
        let cred = self.cred.clone();
        let r = self.launch(cred.as_ref().map(|(u, p)| (u.as_str(), p.as_str())));
        if let Err(why) = r {
            panic!("clickhouse-server did not restart: {why}");
        }
    }

    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for ClickHouseServer {
    fn drop(&mut self) {
        self.kill();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

fn select_1(port: u16, cred: Option<(&str, &str)>) -> bool {
    let Ok(mut c) = TcpStream::connect(("127.0.0.1", port)) else {
        return false;
    };
    let _ = c.set_read_timeout(Some(Duration::from_secs(5)));
    let auth = match cred {
        Some((u, p)) => format!("X-ClickHouse-User: {u}\r\nX-ClickHouse-Key: {p}\r\n"),
        None => String::new(),
    };
    let req = format!("GET /?query=SELECT%201 HTTP/1.0\r\nHost: 127.0.0.1\r\n{auth}\r\n");
    if c.write_all(req.as_bytes()).is_err() {
        return false;
    }
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    let out = String::from_utf8_lossy(&out);
    // HTTP/1.0: no chunks, closed after the answer.
    out.starts_with("HTTP/1.") && out.contains(" 200 ") && out.ends_with("\r\n\r\n1\n")
}

fn tail(s: &str) -> &str {
    let start = s.len().saturating_sub(2000);
    let start = (start..s.len())
        .find(|&i| s.is_char_boundary(i))
        .unwrap_or(s.len());
    &s[start..]
}

fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn pct(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
