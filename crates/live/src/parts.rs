//! Rotation and retention of a long recording (`profctl start --rotate
//! TIME|SIZE --keep N --max-disk SIZE`): when the engine closes the
//! current part, and which closed parts it deletes. The parts themselves
//! (file names, what each holds) are `profkit_eventlog::parts` and
//! `profkit_sync::Recorder::rotate`.

use profkit_eventlog::parts::closed_parts;
use serde::{Deserialize, Serialize};
use std::path::Path;
use std::time::Duration;

/// When to close the current part.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Rotate {
    /// After this long (`--rotate 30m`).
    Every(Duration),
    /// Once the part holds this many bytes (`--rotate 100M`).
    Size(u64),
}

impl Rotate {
    /// Reads perf's `--switch-output` spellings: a number with a time
    /// unit `s`, `m`, `h`, `d` or a size unit `B`, `K`, `M`, `G`, `T`
    /// (powers of 1024). Zero and a bare number are errors that say what
    /// to write instead.
    pub fn parse(s: &str) -> Result<Rotate, String> {
        let t = s.trim();
        let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
        let (num, unit) = t.split_at(split);
        if num.is_empty() {
            return Err(format!(
                "{s:?} is not a time or size: write a number and a unit, e.g. 30s, 10m, 1h, 1d \
                 or 100M, 1G"
            ));
        }
        let n: u64 = num
            .parse()
            .map_err(|_| format!("{s:?}: the number is too large"))?;
        if n == 0 {
            return Err(format!(
                "{s:?}: a part must last some time or hold some bytes (e.g. 10m or 100M)"
            ));
        }
        let secs = |mul: u64| {
            n.checked_mul(mul)
                .map(|s| Rotate::Every(Duration::from_secs(s)))
                .ok_or_else(|| format!("{s:?}: too long"))
        };
        match unit {
            "s" => secs(1),
            "m" => secs(60),
            "h" => secs(3600),
            "d" => secs(86_400),
            "" => Err(format!(
                "{s:?} has no unit: write a time (30s, 10m, 1h, 1d) or a size (100M, 1G)"
            )),
            _ => parse_size(t).map(Rotate::Size),
        }
    }

    /// As the user would write it.
    pub fn describe(&self) -> String {
        match self {
            Rotate::Every(d) => format!("every {}", describe_duration(*d)),
            Rotate::Size(b) => format!("at {}", describe_size(*b)),
        }
    }
}

/// Reads a size: a number and `B`, `K`, `M`, `G` or `T` (powers of 1024,
/// an optional `B` or `iB` after the letter); zero is an error.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let bad = || format!("{s:?} is not a size: write a number and a unit, e.g. 500M or 10G");
    if num.is_empty() {
        return Err(bad());
    }
    let n: u64 = num.parse().map_err(|_| format!("{s:?}: too large"))?;
    let shift = match unit.trim_end_matches("iB").trim_end_matches('B') {
        "" if !unit.is_empty() => 0,
        "K" | "k" => 10,
        "M" => 20,
        "G" => 30,
        "T" => 40,
        "" => return Err(format!("{s:?} has no unit: write e.g. 500M or 10G")),
        _ => return Err(bad()),
    };
    if n == 0 {
        return Err(format!("{s:?}: a size of zero holds nothing"));
    }
    n.checked_mul(1u64 << shift)
        .ok_or_else(|| format!("{s:?}: too large"))
}

/// Reads `--keep N`: at least 1.
pub fn parse_keep(s: &str) -> Result<u32, String> {
    match s.trim().parse::<u32>() {
        Ok(0) => Err(format!(
            "{s:?}: the part being written always stays, so keep at least 1"
        )),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("{s:?} is not a number of parts (1 or more)")),
    }
}

fn describe_duration(d: Duration) -> String {
    let s = d.as_secs();
    for (unit, n) in [("d", 86_400), ("h", 3600), ("m", 60)] {
        if s % n == 0 {
            return format!("{}{unit}", s / n);
        }
    }
    format!("{s}s")
}

fn describe_size(b: u64) -> String {
    for (unit, shift) in [("T", 40), ("G", 30), ("M", 20), ("K", 10)] {
        if b % (1u64 << shift) == 0 {
            return format!("{}{unit}", b >> shift);
        }
    }
    format!("{b}B")
}

/// Rotation and retention as configured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PartsConfig {
    /// When to close the current part on its own (SIGHUP and `profctl
    /// rotate` always can).
    pub rotate: Option<Rotate>,
    /// Keep at most this many parts, the one being written included.
    pub keep: Option<u32>,
    /// Keep the parts' total size at most this many bytes, by deleting the
    /// oldest closed parts (the part being written is never deleted).
    pub max_disk: Option<u64>,
}

impl PartsConfig {
    /// One line for `profctl start` and the log; None without rotation.
    pub fn describe(&self) -> Option<String> {
        let mut v = Vec::new();
        if let Some(r) = &self.rotate {
            v.push(format!("a new part {}", r.describe()));
        }
        if let Some(k) = self.keep {
            v.push(format!("keeping the newest {k}"));
        }
        if let Some(m) = self.max_disk {
            v.push(format!("at most {} on disk", describe_size(m)));
        }
        (!v.is_empty()).then(|| v.join(", "))
    }
}

/// What retention found and did in a session directory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Retention {
    /// Closed parts left: (number, bytes), oldest first.
    pub closed: Vec<(u64, u64)>,
    /// Parts deleted now, by number.
    pub removed: Vec<u64>,
    /// Deletions that failed: `file: why`.
    pub errors: Vec<String>,
}

impl Retention {
    /// Bytes of the closed parts left.
    pub fn closed_bytes(&self) -> u64 {
        self.closed.iter().map(|p| p.1).sum()
    }
}

/// Deletes the oldest closed parts in `dir` until at most `keep` parts
/// are left (the one being written counts, and stays) and the parts'
/// total, with `current_bytes` for the part being written, is at most
/// `max_disk`.
pub fn apply_retention(dir: &Path, cfg: &PartsConfig, current_bytes: u64) -> Retention {
    let mut out = Retention::default();
    let listed = match closed_parts(dir) {
        Ok(l) => l,
        Err(e) => {
            out.errors.push(format!("{}: {e}", dir.display()));
            return out;
        }
    };
    let mut parts: Vec<(u64, std::path::PathBuf, u64)> = listed
        .into_iter()
        .map(|(n, p)| {
            let len = std::fs::symlink_metadata(&p).map_or(0, |m| m.len());
            (n, p, len)
        })
        .collect();
    let keep_closed = cfg
        .keep
        .map_or(usize::MAX, |k| (k as usize).saturating_sub(1));
    let mut total: u64 = parts.iter().map(|p| p.2).sum::<u64>() + current_bytes;
    let mut i = 0;
    while i < parts.len() {
        let over_count = parts.len() - i > keep_closed;
        let over_disk = cfg.max_disk.is_some_and(|m| total > m);
        if !(over_count || over_disk) {
            break;
        }
        let (n, p, len) = &parts[i];
        match std::fs::remove_file(p) {
            Ok(()) => out.removed.push(*n),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => out.removed.push(*n),
            Err(e) => out.errors.push(format!("{}: {e}", p.display())),
        }
        total = total.saturating_sub(*len);
        i += 1;
    }
    parts.drain(..i);
    out.closed = parts.into_iter().map(|(n, _, len)| (n, len)).collect();
    out
}

/// What a rotation answers (`profctl rotate`, and the daemon's log line
/// for one by time or size).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Rotation {
    /// The number of the part now being written.
    pub part: u64,
    /// The first round it holds.
    pub first_round: u64,
    /// What asked for it (`requested`, `time`, `size`, `SIGHUP`).
    pub why: String,
    /// Closed parts deleted by retention, by number.
    pub removed: Vec<u64>,
    /// How long closing one part and opening the next took.
    pub took_ms: f64,
    /// Closed, but its footer or the next file failed: why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Rotation {
    /// As JSON for the control protocol.
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use profkit_eventlog::parts::part_file_name;

    #[test]
    fn rotate_reads_perfs_spellings_and_names_bad_values() {
        assert_eq!(
            Rotate::parse("2s"),
            Ok(Rotate::Every(Duration::from_secs(2)))
        );
        assert_eq!(
            Rotate::parse("10m"),
            Ok(Rotate::Every(Duration::from_secs(600)))
        );
        assert_eq!(
            Rotate::parse("1h"),
            Ok(Rotate::Every(Duration::from_secs(3600)))
        );
        assert_eq!(
            Rotate::parse("1d"),
            Ok(Rotate::Every(Duration::from_secs(86_400)))
        );
        assert_eq!(Rotate::parse("100M"), Ok(Rotate::Size(100 << 20)));
        assert_eq!(Rotate::parse("1G"), Ok(Rotate::Size(1 << 30)));
        assert_eq!(Rotate::parse("4096B"), Ok(Rotate::Size(4096)));
        assert_eq!(Rotate::parse("64K"), Ok(Rotate::Size(64 << 10)));
        for (bad, says) in [
            ("0", "\"0\""),
            ("0s", "some time"),
            ("0M", "some bytes"),
            ("10", "no unit"),
            ("", "not a time"),
            ("s", "not a time"),
            ("5x", "not a size"),
            ("-1s", "not a time"),
            ("99999999999999999999s", "too large"),
            ("9999999999999999999d", "too long"),
        ] {
            let e = Rotate::parse(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
        assert_eq!(
            Rotate::Every(Duration::from_secs(7200)).describe(),
            "every 2h"
        );
        assert_eq!(Rotate::Size(3 << 20).describe(), "at 3M");
    }

    #[test]
    fn keep_and_sizes_refuse_zero() {
        assert_eq!(parse_keep("2"), Ok(2));
        assert!(parse_keep("0").unwrap_err().contains("at least 1"));
        assert!(parse_keep("x").unwrap_err().contains("\"x\""));
        assert_eq!(parse_size("1G"), Ok(1 << 30));
        assert_eq!(parse_size("2GiB"), Ok(2 << 30));
        assert!(parse_size("0G").unwrap_err().contains("zero"));
        assert!(parse_size("100").unwrap_err().contains("no unit"));
    }

    fn dir_with(parts: &[(u64, usize)]) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        for &(n, len) in parts {
            std::fs::write(d.path().join(part_file_name(n)), vec![0u8; len]).unwrap();
        }
        d
    }

    #[test]
    fn keep_deletes_the_oldest_and_counts_the_part_being_written() {
        let d = dir_with(&[(3, 10), (1, 10), (2, 10), (4, 10)]);
        let cfg = PartsConfig {
            keep: Some(2),
            ..Default::default()
        };
        let r = apply_retention(d.path(), &cfg, 5);
        assert_eq!(r.removed, [1, 2, 3]);
        assert_eq!(r.closed, [(4, 10)]);
        assert!(d.path().join(part_file_name(4)).exists());
        // Keeping 1 keeps only the part being written.
        let r = apply_retention(
            d.path(),
            &PartsConfig {
                keep: Some(1),
                ..cfg
            },
            5,
        );
        assert_eq!((r.removed, r.closed), (vec![4], vec![]));
    }

    #[test]
    fn max_disk_deletes_the_oldest_until_the_total_fits() {
        let d = dir_with(&[(1, 100), (2, 100), (3, 100)]);
        let cfg = PartsConfig {
            max_disk: Some(250),
            ..Default::default()
        };
        // 300 closed + 60 being written: two must go to fit 250 (one
        // leaves 260).
        let r = apply_retention(d.path(), &cfg, 60);
        assert_eq!(r.removed, [1, 2]);
        assert_eq!(r.closed_bytes(), 100);
        // The part being written alone over the limit: every closed part
        // goes, that one stays.
        let r = apply_retention(d.path(), &cfg, 1000);
        assert_eq!((r.removed, r.closed), (vec![3], vec![]));
        // Nothing over: nothing deleted.
        let d = dir_with(&[(5, 10)]);
        let r = apply_retention(d.path(), &cfg, 10);
        assert!(r.removed.is_empty() && r.closed == [(5, 10)]);
    }
}
