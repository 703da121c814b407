//! [`Config`]: the client's settings, from the `DEBUGINFOD_*` variables.

use crate::Error;
use std::path::PathBuf;
use std::time::Duration;

/// `DEBUGINFOD_TIMEOUT` when unset (elfutils' default).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(90);

/// The client's settings (see [`Config::from_vars`] for the variables).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// Server base URLs (`DEBUGINFOD_URLS` split on ASCII whitespace,
    /// trailing `/` trimmed), tried in order: the first 200 answer wins,
    /// a 404 (or a refused or failed answer) moves on to the next.
    pub urls: Vec<String>,
    /// Connect timeout, and the longest any read may stall: the server must
    /// answer, and keep sending body bytes, within it (`DEBUGINFOD_TIMEOUT`
    /// seconds, default 90).
    pub timeout: Duration,
    /// Largest file accepted (`DEBUGINFOD_MAXSIZE` bytes): a larger
    /// `Content-Length` is refused before the body is read, a body passing
    /// it is cut and refused. Unset: [`crate::MAX_ELF_BYTES`] and
    /// [`crate::MAX_SOURCE_BYTES`].
    pub max_size: Option<u64>,
    /// Longest whole transfer of one file (`DEBUGINFOD_MAXTIME` seconds).
    pub max_time: Option<Duration>,
    /// The cache directory (elfutils' layout, shared with gdb and perf).
    pub cache: PathBuf,
    /// Describe each request and answer on stderr (`DEBUGINFOD_VERBOSE`
    /// set and non-empty).
    pub verbose: bool,
    /// Never touch the network (a report's `--offline`).
    pub offline: bool,
}

impl Config {
    /// The settings from the process environment ([`Config::from_vars`]
    /// over `std::env::var`).
    ///
    /// # Errors
    /// [`Error::BadVariable`] for a number that does not parse.
    pub fn from_env() -> Result<Config, Error> {
        Config::from_vars(|name| std::env::var(name).ok())
    }

    /// The settings from variables looked up by `get`:
    ///
    /// | variable | meaning |
    /// |---|---|
    /// | `DEBUGINFOD_URLS` | servers, whitespace-separated |
    /// | `DEBUGINFOD_TIMEOUT` | seconds, a positive integer (default 90) |
    /// | `DEBUGINFOD_MAXSIZE` | bytes, a positive integer (0 or empty: no limit but the built-in ones) |
    /// | `DEBUGINFOD_MAXTIME` | seconds, a positive integer (0 or empty: none) |
    /// | `DEBUGINFOD_CACHE_PATH` | the cache; else `$XDG_CACHE_HOME/debuginfod_client`, else `$HOME/.cache/debuginfod_client` |
    /// | `DEBUGINFOD_VERBOSE` | set and non-empty: describe requests on stderr |
    ///
    /// `offline` starts false. Unlike elfutils (whose `atoi` takes
    /// `"10s"` as 10 and `"x"` as 0), a value that is not a number is an
    /// error, and an empty one counts as unset.
    ///
    /// # Errors
    /// [`Error::BadVariable`] for a bad number, or for no cache directory
    /// at all (none of `DEBUGINFOD_CACHE_PATH`, `XDG_CACHE_HOME`, `HOME`).
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> Result<Config, Error> {
        let set = |name: &str| get(name).filter(|v| !v.is_empty());
        let urls = set("DEBUGINFOD_URLS")
            .map(|v| {
                v.split_ascii_whitespace()
                    .map(|u| u.trim_end_matches('/').to_owned())
                    .filter(|u| !u.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        let number = |name: &str| -> Result<Option<u64>, Error> {
            let Some(v) = set(name) else { return Ok(None) };
            match v.trim().parse::<u64>() {
                Ok(0) => Ok(None),
                Ok(n) => Ok(Some(n)),
                Err(e) => Err(Error::BadVariable {
                    name: name.to_owned(),
                    value: v,
                    why: format!("not a whole number ({e})"),
                }),
            }
        };
        let timeout = match number("DEBUGINFOD_TIMEOUT")? {
            Some(s) => Duration::from_secs(s),
            None if set("DEBUGINFOD_TIMEOUT").is_some() => {
                return Err(Error::BadVariable {
                    name: "DEBUGINFOD_TIMEOUT".into(),
                    value: set("DEBUGINFOD_TIMEOUT").unwrap_or_default(),
                    why: "a timeout of 0 seconds would fail every request".into(),
                })
            }
            None => DEFAULT_TIMEOUT,
        };
        let max_size = number("DEBUGINFOD_MAXSIZE")?;
        let max_time = number("DEBUGINFOD_MAXTIME")?.map(Duration::from_secs);
        // elfutils' rule (debuginfod-client.c, 0.188), without its legacy
        // `$HOME/.debuginfod_client_cache`, which it only uses if present.
        let cache = if let Some(p) = set("DEBUGINFOD_CACHE_PATH") {
            PathBuf::from(p)
        } else if let Some(x) = set("XDG_CACHE_HOME") {
            PathBuf::from(x).join("debuginfod_client")
        } else if let Some(h) = set("HOME") {
            PathBuf::from(h).join(".cache").join("debuginfod_client")
        } else {
            return Err(Error::BadVariable {
                name: "HOME".into(),
                value: String::new(),
                why: "no cache directory: set DEBUGINFOD_CACHE_PATH, XDG_CACHE_HOME or HOME".into(),
            });
        };
        Ok(Config {
            urls,
            timeout,
            max_size,
            max_time,
            cache,
            verbose: set("DEBUGINFOD_VERBOSE").is_some(),
            offline: false,
        })
    }

    /// Whether requests may be sent: not offline, and some server named.
    pub fn network(&self) -> bool {
        !self.offline && !self.urls.is_empty()
    }
}
