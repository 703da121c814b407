//! `--time`: a window of a session's time, as perf's `--time` takes it.
//!
//! Forms (one window):
//! - `START,END`: seconds from the session's start (`10,20`, `10.5,`,
//!   `,30`; either end may be left open);
//! - wall-clock times in UTC, as the report header prints them:
//!   `2026-11-26 10:00:00,2026-11-26 10:05:00` (or `T` between date and
//!   time), or `10:00:00,10:05:00` on the session's first day;
//! - perf's percentages of the session's length: `A%-B%`, and `P%/N` for
//!   the Nth slice of P % (`10%/2` is 10 % to 20 %).
//!
//! Samples carry no time of their own in the log; a chunk holds one sync
//! round, and a round counts in the window when the middle of the time it
//! covers does. The window is so exact to half a sync interval at each end
//! (`--sync-interval` when recording makes it finer).

use crate::error::{Error, Result};

/// A parsed `--time` value, resolved against each session when reading.
#[derive(Clone, Debug, PartialEq)]
pub enum TimeSpec {
    /// Seconds from the session's start; `None`: open.
    Seconds(Option<f64>, Option<f64>),
    /// Unix times in ns (UTC); `None`: open.
    Wall(Option<u64>, Option<u64>),
    /// Time of day in ns since midnight UTC, on the session's first day.
    TimeOfDay(Option<u64>, Option<u64>),
    /// Percent of the session's length.
    Percent(f64, f64),
}

fn bad(value: &str, why: impl Into<String>) -> Error {
    Error::BadValue {
        option: "--time",
        value: value.to_owned(),
        allowed: why.into(),
    }
}

const FORMS: &str = "START,END in seconds from the start (10,20 or 10, or ,20), wall-clock \
                     times in UTC (2026-11-26 10:00:00,2026-11-26 10:05:00 or 10:00:00,10:05:00), \
                     or percent of the session (10%-20%, or 10%/2 for the second tenth)";

impl TimeSpec {
    /// Parses a `--time` value.
    pub fn parse(s: &str) -> Result<TimeSpec> {
        let t = s.trim();
        if t.is_empty() {
            return Err(bad(s, FORMS));
        }
        if t.contains('%') {
            return parse_percent(s, t);
        }
        let Some((a, b)) = t.split_once(',') else {
            return Err(bad(s, format!("no comma between start and end: {FORMS}")));
        };
        let (a, b) = (a.trim(), b.trim());
        if a.is_empty() && b.is_empty() {
            return Err(bad(s, format!("an empty window: {FORMS}")));
        }
        let spec = if a.contains(':') || b.contains(':') {
            let dated = |x: &str| x.contains('-');
            if [a, b].iter().any(|x| !x.is_empty() && dated(x)) {
                let one = |x: &str| -> Result<Option<u64>> {
                    if x.is_empty() {
                        Ok(None)
                    } else {
                        parse_date_time(x)
                            .map(Some)
                            .ok_or_else(|| bad(s, format!("'{x}' is not YYYY-MM-DD HH:MM:SS")))
                    }
                };
                TimeSpec::Wall(one(a)?, one(b)?)
            } else {
                let one = |x: &str| -> Result<Option<u64>> {
                    if x.is_empty() {
                        Ok(None)
                    } else {
                        parse_time_of_day(x)
                            .map(Some)
                            .ok_or_else(|| bad(s, format!("'{x}' is not HH:MM:SS")))
                    }
                };
                TimeSpec::TimeOfDay(one(a)?, one(b)?)
            }
        } else {
            let one = |x: &str| -> Result<Option<f64>> {
                if x.is_empty() {
                    return Ok(None);
                }
                match x.parse::<f64>() {
                    Ok(v) if v.is_finite() && v >= 0.0 => Ok(Some(v)),
                    _ => Err(bad(s, format!("'{x}' is not a number of seconds: {FORMS}"))),
                }
            };
            TimeSpec::Seconds(one(a)?, one(b)?)
        };
        if let Some((lo, hi)) = spec.bounds_if_known() {
            if hi <= lo {
                return Err(bad(s, "an empty window: the end is not after the start"));
            }
        }
        Ok(spec)
    }

    /// Both ends when both are given in the same unit (to refuse empty
    /// windows up front).
    fn bounds_if_known(&self) -> Option<(f64, f64)> {
        match *self {
            TimeSpec::Seconds(Some(a), Some(b)) => Some((a, b)),
            TimeSpec::Wall(Some(a), Some(b)) | TimeSpec::TimeOfDay(Some(a), Some(b)) => {
                Some((a as f64, b as f64))
            }
            TimeSpec::Percent(a, b) => Some((a, b)),
            _ => None,
        }
    }

    /// The window in a session's monotonic ns: `[lo, hi)`, given its start
    /// (monotonic and Unix ns) and its end (monotonic ns).
    pub fn resolve(&self, start_mono: u64, start_unix: u64, end_mono: u64) -> (u64, u64) {
        let from_secs = |s: f64| start_mono.saturating_add((s * 1e9) as u64);
        let from_unix = |u: u64| {
            if u >= start_unix {
                start_mono.saturating_add(u - start_unix)
            } else {
                start_mono.saturating_sub(start_unix - u)
            }
        };
        let day = start_unix - start_unix % 86_400_000_000_000;
        match *self {
            TimeSpec::Seconds(a, b) => (a.map_or(0, from_secs), b.map_or(u64::MAX, from_secs)),
            TimeSpec::Wall(a, b) => (a.map_or(0, from_unix), b.map_or(u64::MAX, from_unix)),
            TimeSpec::TimeOfDay(a, b) => (
                a.map_or(0, |t| from_unix(day + t)),
                b.map_or(u64::MAX, |t| from_unix(day + t)),
            ),
            TimeSpec::Percent(a, b) => {
                let len = end_mono.saturating_sub(start_mono) as f64;
                (
                    start_mono.saturating_add((len * a / 100.0) as u64),
                    start_mono.saturating_add((len * b / 100.0) as u64),
                )
            }
        }
    }
}

fn parse_percent(s: &str, t: &str) -> Result<TimeSpec> {
    let pct = |x: &str| -> Result<f64> {
        let v = x
            .trim()
            .strip_suffix('%')
            .ok_or_else(|| bad(s, format!("'{x}' is not a percentage: {FORMS}")))?;
        match v.trim().parse::<f64>() {
            Ok(p) if (0.0..=100.0).contains(&p) => Ok(p),
            _ => Err(bad(s, format!("'{x}' is not a percentage from 0% to 100%"))),
        }
    };
    let (a, b) = if let Some((p, n)) = t.split_once('/') {
        let p = pct(p)?;
        let n: u32 = n.trim().parse().ok().filter(|&n| n >= 1).ok_or_else(|| {
            bad(
                s,
                format!("'{n}' is not a slice number (1 or more) in P%/N"),
            )
        })?;
        (p * f64::from(n - 1), p * f64::from(n))
    } else if let Some((a, b)) = t.split_once('-') {
        (pct(a)?, pct(b)?)
    } else {
        return Err(bad(
            s,
            format!("a percentage needs a range or a slice: {FORMS}"),
        ));
    };
    if b > 100.0 + 1e-9 {
        return Err(bad(s, "the window ends after 100% of the session"));
    }
    if b <= a {
        return Err(bad(s, "an empty window: the end is not after the start"));
    }
    Ok(TimeSpec::Percent(a, b))
}

/// `HH:MM:SS[.frac]` → ns since midnight.
fn parse_time_of_day(x: &str) -> Option<u64> {
    let mut it = x.split(':');
    let h: u64 = it.next()?.parse().ok()?;
    let m: u64 = it.next()?.parse().ok()?;
    let s: f64 = it.next()?.parse().ok()?;
    if it.next().is_some() || h > 23 || m > 59 || !(0.0..60.0).contains(&s) {
        return None;
    }
    Some((h * 3600 + m * 60) * 1_000_000_000 + (s * 1e9) as u64)
}

/// `YYYY-MM-DD HH:MM:SS[.frac]` (or with `T`) in UTC → Unix ns.
fn parse_date_time(x: &str) -> Option<u64> {
    let (date, time) = x.split_once([' ', 'T'])?;
    let mut d = date.split('-');
    let y: i64 = d.next()?.parse().ok()?;
    let mo: i64 = d.next()?.parse().ok()?;
    let da: i64 = d.next()?.parse().ok()?;
    if d.next().is_some() || !(1..=12).contains(&mo) || !(1..=31).contains(&da) || y < 1970 {
        return None;
    }
    // Days from the civil date (Howard Hinnant's algorithm).
    let (y2, m2) = if mo <= 2 {
        (y - 1, mo + 9)
    } else {
        (y, mo - 3)
    };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let doy = (153 * m2 + 2) / 5 + da - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let tod = parse_time_of_day(time.trim())?;
    u64::try_from(days)
        .ok()?
        .checked_mul(86_400_000_000_000)?
        .checked_add(tod)
}

/// Whether a chunk that covers `(prev, time]` counts in `[lo, hi)`: its
/// middle does.
pub(crate) fn in_window(prev: u64, time: u64, (lo, hi): (u64, u64)) -> bool {
    let mid = middle(prev, time);
    lo <= mid && mid < hi
}

/// The middle of `(prev, time]`: where a sample without its own time (a
/// session written before sample times) is placed.
pub(crate) fn middle(prev: u64, time: u64) -> u64 {
    prev / 2 + time / 2 + (prev % 2 + time % 2) / 2
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_forms_parse_and_resolve() {
        let (s0, u0) = (1_000_000_000_000, 1_795_379_395_000_000_000); // 2026-11-22 20:29:55
        let end = s0 + 60_000_000_000;
        let r = |t: &str| TimeSpec::parse(t).unwrap().resolve(s0, u0, end);
        assert_eq!(r("10,20"), (s0 + 10_000_000_000, s0 + 20_000_000_000));
        assert_eq!(r("10.5,"), (s0 + 10_500_000_000, u64::MAX));
        assert_eq!(r(",20"), (0, s0 + 20_000_000_000));
        assert_eq!(r("10%-20%"), (s0 + 6_000_000_000, s0 + 12_000_000_000));
        assert_eq!(r("10%/2"), (s0 + 6_000_000_000, s0 + 12_000_000_000));
        assert_eq!(
            r("2026-11-22 20:30:05,2026-11-22T20:30:15"),
            (s0 + 10_000_000_000, s0 + 20_000_000_000)
        );
        assert_eq!(
            r("20:30:05,20:30:15"),
            (s0 + 10_000_000_000, s0 + 20_000_000_000)
        );
    }

    #[test]
    fn bad_windows_name_the_value() {
        for v in [
            "",
            "10",
            ",",
            "20,10",
            "5,5",
            "x,3",
            "-1,3",
            "10%",
            "30%-20%",
            "10%/0",
            "50%/3",
            "25:00:00,",
            "2026-13-01 00:00:00,",
            "abc%-1%",
        ] {
            let e = TimeSpec::parse(v).unwrap_err().to_string();
            assert!(e.contains(&format!("'{v}'")), "{v}: {e}");
        }
    }

    #[test]
    fn a_chunk_counts_where_its_middle_is() {
        assert!(in_window(0, 10, (5, 20)));
        assert!(!in_window(0, 10, (6, 20)));
        assert!(in_window(10, 20, (5, 16)));
        assert!(!in_window(10, 20, (5, 15)));
    }
}
