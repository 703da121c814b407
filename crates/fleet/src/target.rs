//! `clickhouse://` URLs: parsed into a [`Target`], shown redacted.

use crate::Error;

/// Where the profiles go: a ClickHouse HTTP endpoint, the credentials and
/// the database. Its `Debug` shows the password as `***`.
#[derive(Clone, PartialEq, Eq)]
pub struct Target {
    /// `http://HOST:PORT` or `https://HOST:PORT`.
    pub base: String,
    /// The user (`X-ClickHouse-User`), or ClickHouse's `default`.
    pub user: Option<String>,
    /// The password (`X-ClickHouse-Key`).
    pub password: Option<String>,
    /// The database: `[A-Za-z0-9_]+`.
    pub database: String,
}

/// ClickHouse's HTTP port.
pub const DEFAULT_HTTP_PORT: u16 = 8123;
/// ClickHouse's HTTPS port.
pub const DEFAULT_HTTPS_PORT: u16 = 8443;

impl Target {
    /// Parses `clickhouse://[USER[:PASS]@]HOST[:PORT]/DATABASE` (http,
    /// port 8123 unless given) or `clickhouses://…` (https, port 8443).
    /// USER and PASS are percent-decoded (a `@`, `:` or `/` in them may
    /// also be written as is: the last `@` ends them); HOST is a name, an
    /// IPv4 address or a bracketed IPv6 address; DATABASE is
    /// `[A-Za-z0-9_]+`. No query string or fragment.
    pub fn parse(url: &str) -> Result<Target, Error> {
        let bad = |why: &str| Error::BadUrl {
            url: redact_raw(url),
            why: why.to_owned(),
        };
        let (scheme, rest) = url.split_once("://").ok_or_else(|| bad("no scheme"))?;
        let (http, default_port) = match scheme.to_ascii_lowercase().as_str() {
            "clickhouse" => ("http", DEFAULT_HTTP_PORT),
            "clickhouses" => ("https", DEFAULT_HTTPS_PORT),
            _ => return Err(bad("the scheme must be clickhouse or clickhouses")),
        };
        let (userinfo, rest) = match rest.rfind('@') {
            Some(at) => (Some(&rest[..at]), &rest[at + 1..]),
            None => (None, rest),
        };
        let (user, password) = match userinfo {
            None => (None, None),
            Some(ui) => {
                let (u, p) = match ui.split_once(':') {
                    Some((u, p)) => (u, Some(p)),
                    None => (ui, None),
                };
                let u =
                    decode(u).ok_or_else(|| bad("the user is not valid percent-encoded UTF-8"))?;
                if u.is_empty() {
                    return Err(bad("an empty user before '@'"));
                }
                let p =
                    match p {
                        Some(p) => Some(decode(p).ok_or_else(|| {
                            bad("the password is not valid percent-encoded UTF-8")
                        })?),
                        None => None,
                    };
                (Some(u), p)
            }
        };
        let (hostport, database) = rest
            .split_once('/')
            .ok_or_else(|| bad("no /DATABASE after the host"))?;
        if database.is_empty() {
            return Err(bad("an empty database name"));
        }
        if !database
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_')
        {
            return Err(bad(
                "the database name may hold only A-Z a-z 0-9 _ (no path, query or fragment)",
            ));
        }
        let (host, port) =
            split_host_port(hostport).ok_or_else(|| bad("a malformed HOST[:PORT]"))?;
        let port = match port {
            None => default_port,
            Some(p) => match p.parse::<u16>() {
                Ok(p) if p > 0 => p,
                _ => return Err(bad("the port must be a number from 1 to 65535")),
            },
        };
        Ok(Target {
            base: format!("{http}://{host}:{port}"),
            user,
            password,
            database: database.to_owned(),
        })
    }

    /// `clickhouse://USER:***@HOST:PORT/DB` (or without the user or the
    /// `:***`): what logs, status and errors may show.
    pub fn redacted(&self) -> String {
        let (scheme, hostport) = match self.base.split_once("://") {
            Some(("https", h)) => ("clickhouses", h),
            Some((_, h)) => ("clickhouse", h),
            None => ("clickhouse", self.base.as_str()),
        };
        let cred = match (&self.user, &self.password) {
            (Some(u), Some(_)) => format!("{}:***@", encode(u)),
            (Some(u), None) => format!("{}@", encode(u)),
            (None, Some(_)) => "***@".to_owned(),
            (None, None) => String::new(),
        };
        format!("{scheme}://{cred}{hostport}/{}", self.database)
    }
}

impl std::fmt::Debug for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Target")
            .field("base", &self.base)
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| "***"))
            .field("database", &self.database)
            .finish()
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.redacted())
    }
}

/// `url` with everything between `://` (or the start) and its last `@`
/// replaced by `***`: a URL that did not parse, shown without its
/// credentials.
pub fn redact_raw(url: &str) -> String {
    let Some(at) = url.rfind('@') else {
        return url.to_owned();
    };
    let start = url.find("://").map_or(0, |i| i + 3).min(at);
    format!("{}***{}", &url[..start], &url[at..])
}

fn split_host_port(s: &str) -> Option<(&str, Option<&str>)> {
    let (host, port) = if let Some(r) = s.strip_prefix('[') {
        let end = r.find(']')?;
        let host = &s[..end + 2];
        let v6 = &r[..end];
        if v6.is_empty()
            || !v6
                .bytes()
                .all(|b| b.is_ascii_hexdigit() || b == b':' || b == b'.')
        {
            return None;
        }
        match &r[end + 1..] {
            "" => (host, None),
            p => (host, Some(p.strip_prefix(':')?)),
        }
    } else {
        match s.split_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (s, None),
        }
    };
    let name_ok = host.starts_with('[')
        || (!host.is_empty()
            && host
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'-' || b == b'_'));
    name_ok.then_some((host, port))
}

fn decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// `s` percent-encoded (RFC 3986 unreserved characters kept): user names
/// in redacted URLs, query parameters.
pub(crate) fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_forms() {
        let t = Target::parse("clickhouse://h/db").unwrap();
        assert_eq!(t.base, "http://h:8123");
        assert_eq!(
            (t.user, t.password, t.database.as_str()),
            (None, None, "db")
        );
        let t = Target::parse("clickhouses://u:p%40ss%3A%2F@ch.example.com:9443/prof_1").unwrap();
        assert_eq!(t.base, "https://ch.example.com:9443");
        assert_eq!(t.user.as_deref(), Some("u"));
        assert_eq!(t.password.as_deref(), Some("p@ss:/"));
        assert_eq!(
            t.redacted(),
            "clickhouses://u:***@ch.example.com:9443/prof_1"
        );
        let t = Target::parse("CLICKHOUSE://us%20er@[::1]:1/d").unwrap();
        assert_eq!(t.base, "http://[::1]:1");
        assert_eq!(t.redacted(), "clickhouse://us%20er@[::1]:1/d");
        let t = Target::parse("clickhouse://u:a/b@c@h:2/d").unwrap();
        assert_eq!(t.password.as_deref(), Some("a/b@c"));
        assert_eq!(
            Target::parse("clickhouse://[::1]/d").unwrap().base,
            "http://[::1]:8123"
        );
    }

    #[test]
    fn refuses_the_rest_without_showing_secrets() {
        for bad in [
            "http://h/db",
            "h/db",
            "clickhouse://h",
            "clickhouse://h/",
            "clickhouse://h/db/x",
            "clickhouse://h/db?x=1",
            "clickhouse://h/d-b",
            "clickhouse://h:0/db",
            "clickhouse://h:99999/db",
            "clickhouse://h:x/db",
            "clickhouse:///db",
            "clickhouse://h h/db",
            "clickhouse://[zz]/db",
            "clickhouse://:secret@h/db",
            "clickhouse://u:secret%zz@h/db",
            "clickhouse://u:secret%ff@h/db",
            "clickhouse://u:secret@h/d;b",
            "u:secret@h/db",
        ] {
            let e = Target::parse(bad).unwrap_err();
            let shown = format!("{e} {e:?}");
            assert!(shown.contains("expected clickhouse://"), "{bad}: {shown}");
            assert!(!shown.contains("secret"), "{bad}: {shown}");
        }
    }

    #[test]
    fn debug_hides_the_password() {
        let t = Target::parse("clickhouse://u:secret@h/db").unwrap();
        let d = format!("{t:?} {t}");
        assert!(!d.contains("secret") && d.contains("***"), "{d}");
    }
}
