//! A tiny logger writing lines to `DIR/daemon.log`.
//!
//! One `write(2)` per line on an `O_APPEND` descriptor, so lines from the
//! logger and from the daemon's stderr (also `daemon.log`) never tear.
//! The level comes from `PROFKIT_LOG` (`error`, `warn`, `info` — the
//! default — or `debug`; debug adds one line per sync round).
//! A message is one line whatever it quotes: paths and names in it are
//! shown with [`profkit_eventlog::shown`] (a newline in a binary's path
//! cannot add a line of its own making, nor ESC reach a terminal that
//! reads the log).

use std::fmt;
use std::fs::File;
use std::io::Write;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::dir::{SessionDir, DAEMON_LOG};
use crate::error::Result;

/// The environment variable that sets the log level.
pub const LOG_ENV: &str = "PROFKIT_LOG";

/// How much to log, least to most.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// Failures.
    Error,
    /// Things that went wrong but were survived (a failed round, a refused
    /// client).
    Warn,
    /// Start, stop, requests (the default).
    Info,
    /// Also one line per sync round.
    Debug,
}

impl Level {
    /// The level named by `PROFKIT_LOG`, [`Level::Info`] if unset or unknown.
    pub fn from_env() -> Level {
        std::env::var(LOG_ENV)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(Level::Info)
    }

    fn label(self) -> &'static str {
        match self {
            Level::Error => "ERROR",
            Level::Warn => "WARN",
            Level::Info => "INFO",
            Level::Debug => "DEBUG",
        }
    }
}

impl FromStr for Level {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "error" => Ok(Level::Error),
            "warn" | "warning" => Ok(Level::Warn),
            "info" => Ok(Level::Info),
            "debug" | "trace" => Ok(Level::Debug),
            _ => Err(format!(
                "unknown log level {s:?} (expected error, warn, info or debug)"
            )),
        }
    }
}

/// Appends timestamped lines to `daemon.log`. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Logger {
    file: Option<Arc<File>>,
    level: Level,
    /// Also write each line to stderr (a daemon run in the foreground
    /// under a service manager, which collects stderr).
    stderr: bool,
}

impl Logger {
    /// Log to `DIR/daemon.log` at the level from `PROFKIT_LOG`.
    pub fn open(dir: &SessionDir) -> Result<Logger> {
        Ok(Logger {
            file: Some(Arc::new(dir.open_append(DAEMON_LOG)?)),
            level: Level::from_env(),
            stderr: false,
        })
    }

    /// A logger that drops everything.
    pub fn sink() -> Logger {
        Logger {
            file: None,
            level: Level::Error,
            stderr: false,
        }
    }

    /// The same logger, also writing each line to stderr.
    pub fn with_stderr(mut self) -> Logger {
        self.stderr = true;
        self
    }

    /// The same logger at another level.
    pub fn with_level(mut self, level: Level) -> Logger {
        self.level = level;
        self
    }

    /// Whether lines at `level` are written.
    pub fn enabled(&self, level: Level) -> bool {
        self.file.is_some() && level <= self.level
    }

    /// Write one line at `level` (write errors are ignored: there is
    /// nowhere left to report them).
    pub fn log(&self, level: Level, args: fmt::Arguments<'_>) {
        let Some(file) = &self.file else { return };
        if level > self.level {
            return;
        }
        let msg = args.to_string();
        let line = format!(
            "{} profkitd[{}] {:<5} {}\n",
            utc_timestamp(SystemTime::now()),
            std::process::id(),
            level.label(),
            profkit_eventlog::shown(&msg)
        );
        let _ = (&**file).write_all(line.as_bytes());
        if self.stderr {
            let _ = std::io::stderr().write_all(line.as_bytes());
        }
    }

    /// [`Level::Error`] line.
    pub fn error(&self, msg: impl fmt::Display) {
        self.log(Level::Error, format_args!("{msg}"));
    }

    /// [`Level::Warn`] line.
    pub fn warn(&self, msg: impl fmt::Display) {
        self.log(Level::Warn, format_args!("{msg}"));
    }

    /// [`Level::Info`] line.
    pub fn info(&self, msg: impl fmt::Display) {
        self.log(Level::Info, format_args!("{msg}"));
    }

    /// [`Level::Debug`] line.
    pub fn debug(&self, msg: impl fmt::Display) {
        self.log(Level::Debug, format_args!("{msg}"));
    }
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` without a date crate.
fn utc_timestamp(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (days, rem) = (secs / 86_400, secs % 86_400);
    let (y, m, day) = civil_from_days(days as i64);
    format!(
        "{y:04}-{m:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        d.subsec_millis()
    )
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian
/// (Howard Hinnant's `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn timestamps_are_utc_iso8601() {
        assert_eq!(utc_timestamp(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let t = UNIX_EPOCH + Duration::from_millis(951_782_400_000 + 3_723_456);
        assert_eq!(utc_timestamp(t), "2000-02-29T01:02:03.456Z");
        let t = UNIX_EPOCH + Duration::from_secs(1_767_225_599);
        assert_eq!(utc_timestamp(t), "2025-12-31T23:59:59.000Z");
    }

    #[test]
    fn levels_parse_and_filter() {
        assert_eq!("DEBUG".parse::<Level>().unwrap(), Level::Debug);
        assert_eq!("warning".parse::<Level>().unwrap(), Level::Warn);
        assert!("loud".parse::<Level>().is_err());
        let tmp = tempfile::tempdir().unwrap();
        let dir = SessionDir::create(tmp.path().join("s")).unwrap();
        let log = Logger::open(&dir).unwrap().with_level(Level::Info);
        assert!(log.enabled(Level::Warn) && !log.enabled(Level::Debug));
        log.debug("hidden");
        log.warn(format_args!("round failed: {}", 7));
        let text = std::fs::read_to_string(dir.join(DAEMON_LOG)).unwrap();
        assert!(!text.contains("hidden"));
        let line = text.lines().next().unwrap();
        assert!(line.ends_with("WARN  round failed: 7"), "{line}");
        assert!(!Logger::sink().enabled(Level::Error));
    }

    #[test]
    fn a_name_with_a_newline_or_escape_stays_on_its_line() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = SessionDir::create(tmp.path().join("s")).unwrap();
        let log = Logger::open(&dir).unwrap();
        log.warn(format_args!(
            "not kept: {}",
            "/tmp/x\n2026-01-01T00:00:00.000Z profkitd[1] ERROR fake\u{1b}]0;t\u{7}"
        ));
        let text = std::fs::read_to_string(dir.join(DAEMON_LOG)).unwrap();
        assert_eq!(text.lines().count(), 1, "{text}");
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{7}'),
            "{text}"
        );
        assert!(text.contains("/tmp/x\\x0a2026"), "{text}");
    }
}
