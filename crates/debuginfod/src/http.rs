//! The transport: one GET with redirects checked by hand, its body
//! streamed into a file under the size and time limits.

use crate::{Config, Error};
use std::fs::File;
use std::io::{Read, Write};
use std::time::{Duration, Instant};
use ureq::tls::{RootCerts, TlsConfig};
use ureq::Agent;

/// Redirects followed for one file, at most.
pub const MAX_REDIRECTS: u32 = 5;

/// The agent: rustls with the system's roots (rustls-platform-verifier),
/// statuses returned rather than errors, redirects returned to
/// [`get`] (which checks where they lead), the configured timeout on
/// resolving, connecting, sending, the response's arrival and every read.
pub fn agent(cfg: &Config) -> Agent {
    let t = Some(cfg.timeout);
    Agent::config_builder()
        .http_status_as_error(false)
        .max_redirects(0)
        .tls_config(
            TlsConfig::builder()
                .root_certs(RootCerts::PlatformVerifier)
                .build(),
        )
        .user_agent(concat!("profkit-debuginfod/", env!("CARGO_PKG_VERSION")))
        .timeout_resolve(t)
        .timeout_connect(t)
        .timeout_send_request(t)
        .timeout_recv_response(t)
        .timeout_per_read(t)
        .build()
        .new_agent()
}

/// What one server said about one file.
pub enum Answer {
    /// 200: the body is in the file, `bytes` long; `url` the final URL.
    Body {
        /// Body bytes written.
        bytes: u64,
        /// The URL that answered (after redirects).
        url: String,
    },
    /// 404.
    NotFound,
}

/// Counters the transport bumps.
pub struct Count<'a> {
    /// Requests sent.
    pub requests: &'a std::sync::atomic::AtomicU64,
    /// Body bytes received (by every transfer of the client).
    pub bytes: &'a std::sync::atomic::AtomicU64,
    /// What `bytes` may reach: a transfer that takes it past is cut.
    pub budget: u64,
}

/// GETs `url`, following at most [`MAX_REDIRECTS`] redirects to http or
/// https URLs, and streams a 200's body into `out`, refusing more than
/// `max` bytes and a transfer longer than `cfg.max_time`.
pub fn get(
    agent: &Agent,
    cfg: &Config,
    url: &str,
    max: u64,
    out: &mut File,
    count: &Count<'_>,
) -> Result<Answer, Error> {
    use std::sync::atomic::Ordering::Relaxed;
    let start = Instant::now();
    let mut at = url.to_owned();
    for _ in 0..=MAX_REDIRECTS {
        let left = match cfg.max_time {
            Some(m) => Some(
                m.checked_sub(start.elapsed())
                    .ok_or_else(|| max_time(url, m))?,
            ),
            None => None,
        };
        if cfg.verbose {
            eprintln!("debuginfod: GET {at}");
        }
        let spent = count.bytes.load(Relaxed);
        if spent >= count.budget {
            return Err(over_budget(&at, spent, count.budget));
        }
        count.requests.fetch_add(1, Relaxed);
        let resp = agent
            .get(&at)
            .config()
            .timeout_global(left)
            .build()
            .call()
            .map_err(|e| failure(&at, e, cfg))?;
        let status = resp.status().as_u16();
        if cfg.verbose {
            let len = resp.body().content_length();
            eprintln!("debuginfod: {at}: {status}, {len:?} bytes announced");
        }
        match status {
            200 => {}
            404 => return Ok(Answer::NotFound),
            301 | 302 | 303 | 307 | 308 => {
                let location = resp
                    .headers()
                    .get("location")
                    .and_then(|v| v.to_str().ok())
                    .ok_or_else(|| Error::Http {
                        url: at.clone(),
                        why: format!("a redirect ({status}) without a readable Location"),
                    })?;
                at = resolve(&at, location).ok_or_else(|| Error::BadRedirect {
                    url: at.clone(),
                    location: location.to_owned(),
                })?;
                continue;
            }
            status => return Err(Error::Status { url: at, status }),
        }
        if let Some(len) = resp.body().content_length() {
            if len > max {
                return Err(Error::TooLarge {
                    url: at,
                    size: len,
                    max,
                });
            }
        }
        let mut body = resp.into_body().into_reader();
        let mut buf = vec![0u8; 64 << 10];
        let mut bytes = 0u64;
        loop {
            if let Some(m) = cfg.max_time {
                if start.elapsed() > m {
                    return Err(max_time(&at, m));
                }
            }
            let n = match body.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(read_failure(&at, e, cfg)),
            };
            let spent = count.bytes.fetch_add(n as u64, Relaxed) + n as u64;
            if spent > count.budget {
                return Err(over_budget(&at, spent, count.budget));
            }
            bytes += n as u64;
            if bytes > max {
                return Err(Error::TooLarge {
                    url: at,
                    size: bytes,
                    max,
                });
            }
            out.write_all(&buf[..n]).map_err(|e| Error::Http {
                url: at.clone(),
                why: format!("writing the download into the cache failed: {e}"),
            })?;
        }
        return Ok(Answer::Body { bytes, url: at });
    }
    Err(Error::TooManyRedirects {
        url: url.to_owned(),
        max: MAX_REDIRECTS,
    })
}

fn over_budget(url: &str, spent: u64, budget: u64) -> Error {
    Error::OverBudget {
        url: url.to_owned(),
        spent,
        budget,
    }
}

fn max_time(url: &str, m: Duration) -> Error {
    Error::TimedOut {
        url: url.to_owned(),
        what: "the transfer was not done (DEBUGINFOD_MAXTIME)",
        after: m,
    }
}

fn failure(url: &str, e: ureq::Error, cfg: &Config) -> Error {
    match e {
        ureq::Error::Timeout(ureq::Timeout::Global) => {
            max_time(url, cfg.max_time.unwrap_or_default())
        }
        ureq::Error::Timeout(t) => Error::TimedOut {
            url: url.to_owned(),
            what: match t {
                ureq::Timeout::Connect | ureq::Timeout::Resolve => "no connection",
                ureq::Timeout::RecvResponse => "no answer",
                _ => "the server stalled",
            },
            after: cfg.timeout,
        },
        ureq::Error::Io(io) if io.kind() == std::io::ErrorKind::TimedOut => {
            read_failure(url, io, cfg)
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
                url: url.to_owned(),
                why: format!("no connection: {io}"),
            }
        }
        ureq::Error::HostNotFound | ureq::Error::ConnectionFailed => Error::Unreachable {
            url: url.to_owned(),
            why: e.to_string(),
        },
        ureq::Error::Io(io) => Error::Http {
            url: url.to_owned(),
            why: format!("the request failed: {io}"),
        },
        e => Error::Http {
            url: url.to_owned(),
            why: e.to_string(),
        },
    }
}

fn read_failure(url: &str, e: std::io::Error, cfg: &Config) -> Error {
    // ureq's body reader wraps its own errors (a timeout) in io::Error.
    let inner = e.get_ref().and_then(|i| i.downcast_ref::<ureq::Error>());
    match inner {
        Some(ureq::Error::Timeout(ureq::Timeout::Global)) => {
            max_time(url, cfg.max_time.unwrap_or_default())
        }
        Some(ureq::Error::Timeout(_)) => Error::TimedOut {
            url: url.to_owned(),
            what: "the body stalled",
            after: cfg.timeout,
        },
        _ if e.kind() == std::io::ErrorKind::TimedOut
            || e.kind() == std::io::ErrorKind::WouldBlock =>
        {
            Error::TimedOut {
                url: url.to_owned(),
                what: "the body stalled",
                after: cfg.timeout,
            }
        }
        _ => Error::Http {
            url: url.to_owned(),
            why: format!("the body could not be read: {e}"),
        },
    }
}

/// Where a redirect from `base` to `location` leads, if it is an http or
/// https URL: absolute, scheme-relative (`//host/p`), absolute-path
/// (`/p`) or relative (`p`). `None` for any other scheme (`file:`,
/// `ftp:`, `data:` …).
pub fn resolve(base: &str, location: &str) -> Option<String> {
    let location = location.trim();
    let scheme_end = location.find(':');
    let first_sep = location.find(['/', '?', '#']);
    let has_scheme = match (scheme_end, first_sep) {
        (Some(c), Some(s)) => c < s,
        (Some(_), None) => true,
        _ => false,
    };
    if has_scheme {
        let lower = location.to_ascii_lowercase();
        return (lower.starts_with("http://") || lower.starts_with("https://"))
            .then(|| location.to_owned());
    }
    let (scheme, rest) = base.split_once("://")?;
    if let Some(r) = location.strip_prefix("//") {
        return Some(format!("{scheme}://{r}"));
    }
    let host_end = rest.find('/').unwrap_or(rest.len());
    let origin = format!("{scheme}://{}", &rest[..host_end]);
    if location.starts_with('/') {
        return Some(format!("{origin}{location}"));
    }
    let path = &rest[host_end..];
    let path = &path[..path.find(['?', '#']).unwrap_or(path.len())];
    let dir = &path[..path.rfind('/').map_or(0, |i| i + 1)];
    let dir = if dir.is_empty() { "/" } else { dir };
    Some(format!("{origin}{dir}{location}"))
}

/// The path part of a source's URL, as elfutils 0.188 builds it
/// (debuginfod-client.c, PR28034): `curl_easy_escape` of the path without
/// its leading `/` (every byte but `A-Z a-z 0-9 - . _ ~` as `%XX`,
/// uppercase hex), then each `%2F` turned back into `/`.
pub fn escape_source(path: &str) -> String {
    let mut out = String::with_capacity(path.len() * 3 / 2);
    for &b in path.strip_prefix('/').unwrap_or(path).as_bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' | b'/' => {
                out.push(b as char)
            }
            b => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::resolve;

    #[test]
    fn redirects_resolve_to_http_only() {
        let base = "http://h:1/buildid/ab/debuginfo";
        assert_eq!(resolve(base, "https://o/x").as_deref(), Some("https://o/x"));
        assert_eq!(resolve(base, "HTTP://o/x").as_deref(), Some("HTTP://o/x"));
        assert_eq!(resolve(base, "//o/x").as_deref(), Some("http://o/x"));
        assert_eq!(resolve(base, "/x/y").as_deref(), Some("http://h:1/x/y"));
        assert_eq!(
            resolve(base, "other").as_deref(),
            Some("http://h:1/buildid/ab/other")
        );
        assert_eq!(
            resolve("http://h", "a?b:c").as_deref(),
            Some("http://h/a?b:c")
        );
        for bad in [
            "file:///etc/passwd",
            "ftp://h/x",
            "data:text/plain,x",
            "javascript:x",
            "FILE:/x",
        ] {
            assert_eq!(resolve(base, bad), None, "{bad}");
        }
    }
}
