//! The session's one disk budget (issue 25): what everything a session
//! writes counts against.
//!
//! - Its total is `--max-disk` when given, else [`DEFAULT_BUDGET_PERCENT`]
//!   of the free space of the session's file system at start, at most
//!   [`DEFAULT_BUDGET_MAX`] ([`BudgetLimit::resolve`]); `profctl start`
//!   says which, and status and stop show it.
//! - Parts (the recording) are counted in it; the copies a session makes
//!   besides them (binaries kept from containers, JIT maps, the host's
//!   perf maps, the trimmed kallsyms, `debug/not-kept`: "extras") are
//!   charged to it before they are written, by the bytes they will take
//!   on disk (holes are not written, so they cost nothing).
//! - Extras take at most half the total ([`DiskBudget::extras_share`]),
//!   and the files of one user other than root (the owner of the kept
//!   binary, the JIT map's process) at most a quarter
//!   ([`DiskBudget::user_share`]): one user cannot take the whole budget,
//!   and the recording always has the other half. Under `--max-disk`,
//!   retention deletes old parts until the parts fit in what the extras
//!   leave (the part being written excepted); without it no part is
//!   deleted by the default budget (the recording is what the user asked
//!   for), it only bounds the extras.
//! - A copy that does not fit is refused, never partly written: counted
//!   by reason and named (path, uid, why; the first [`NAMED_REFUSALS`])
//!   in status and stop ([`DiskSummary`]).
//!
//! Shared by the engine, the keeper's two threads and the stop-time
//! extras: one mutex around a few counters, taken once per copy.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex};

/// Without `--max-disk`: this percentage of the free space at start.
pub const DEFAULT_BUDGET_PERCENT: u64 = 10;
/// Without `--max-disk`: at most this.
pub const DEFAULT_BUDGET_MAX: u64 = 4 << 30;
/// Refusals named in status and stop, at most (all are counted).
pub const NAMED_REFUSALS: usize = 20;

/// The budget's total and where it comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BudgetLimit {
    /// Bytes.
    pub total: u64,
    /// Where it comes from, for people (`--max-disk`, or the default and
    /// the free space it was taken from).
    pub source: String,
}

impl BudgetLimit {
    /// `--max-disk` if given, else [`DEFAULT_BUDGET_PERCENT`] of the free
    /// space (for unprivileged users: root's reserve not counted) of the
    /// file system holding `dir`, at most [`DEFAULT_BUDGET_MAX`]; when the
    /// free space cannot be read, [`DEFAULT_BUDGET_MAX`].
    pub fn resolve(max_disk: Option<u64>, dir: &Path) -> Self {
        if let Some(m) = max_disk {
            return BudgetLimit {
                total: m,
                source: "--max-disk".into(),
            };
        }
        // The directory may not be made yet: its nearest ancestor that is.
        let vfs = dir
            .ancestors()
            .map(|d| {
                if d.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    d
                }
            })
            .map(rustix::fs::statvfs)
            .find(|r| r.is_ok())
            .unwrap_or_else(|| rustix::fs::statvfs(dir));
        match vfs {
            Ok(v) => {
                let free = v.f_bavail.saturating_mul(v.f_frsize);
                let total = (free / 100 * DEFAULT_BUDGET_PERCENT).min(DEFAULT_BUDGET_MAX);
                BudgetLimit {
                    total,
                    source: format!(
                        "default: {DEFAULT_BUDGET_PERCENT} % of the {} free at start, at most {}; set it with --max-disk",
                        crate::summary::human_bytes(free),
                        crate::summary::human_bytes(DEFAULT_BUDGET_MAX)
                    ),
                }
            }
            Err(e) => BudgetLimit {
                total: DEFAULT_BUDGET_MAX,
                source: format!(
                    "default: {} (the free space could not be read: {e}); set it with --max-disk",
                    crate::summary::human_bytes(DEFAULT_BUDGET_MAX)
                ),
            },
        }
    }

    /// One line for `profctl start`.
    pub fn describe(&self) -> String {
        let parts = if self.source == "--max-disk" {
            "the parts count against it (the oldest closed ones are deleted to fit)"
        } else {
            "the parts are counted in it, never deleted for it (--max-disk does)"
        };
        format!(
            "disk budget {} ({}): {parts}; copies (binaries kept from containers, JIT maps, kallsyms) take at most half of it, one user's at most a quarter",
            crate::summary::human_bytes(self.total),
            self.source
        )
    }
}

/// Why a copy was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Refusal {
    /// The extras' half of the budget is used up.
    Share,
    /// The user's quarter of the budget is used up.
    UserShare,
    /// Over a bound of one file (a binary's size, a JIT map's lines).
    FileBound,
}

impl Refusal {
    /// The key status and stop count it under.
    pub fn key(self) -> &'static str {
        match self {
            Refusal::Share => "budget",
            Refusal::UserShare => "user_share",
            Refusal::FileBound => "file_bound",
        }
    }
}

/// What the budget says in status and stop.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiskSummary {
    /// The total, bytes.
    pub budget_bytes: u64,
    /// Where it comes from.
    pub budget_source: String,
    /// The parts' bytes (closed and being written), last counted.
    pub parts_bytes: u64,
    /// Bytes on disk of everything else the session wrote.
    pub extras_bytes: u64,
    /// Copies refused, by reason (`budget`, `user_share`, `file_bound`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub refused: BTreeMap<String, u64>,
    /// The first [`NAMED_REFUSALS`] of them: `PATH (uid U): why`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused_named: Vec<String>,
}

impl DiskSummary {
    /// Copies refused, all reasons.
    pub fn refused_total(&self) -> u64 {
        self.refused.values().sum()
    }

    /// Lines for people: the budget and its use, then each named refusal.
    pub fn text(&self) -> String {
        let mut out = format!(
            "disk:     {} of the {} budget ({}): parts {}, copies {}",
            crate::summary::human_bytes(self.parts_bytes + self.extras_bytes),
            crate::summary::human_bytes(self.budget_bytes),
            self.budget_source,
            crate::summary::human_bytes(self.parts_bytes),
            crate::summary::human_bytes(self.extras_bytes),
        );
        let n = self.refused_total();
        if n > 0 {
            let by: Vec<String> = self
                .refused
                .iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect();
            out.push_str(&format!("; {n} copies refused ({})", by.join(", ")));
        }
        out.push('\n');
        for r in &self.refused_named {
            out.push_str(&format!("note: disk: refused {r}\n"));
        }
        if (self.refused_named.len() as u64) < n {
            out.push_str(&format!(
                "note: disk: and {} more refused\n",
                n - self.refused_named.len() as u64
            ));
        }
        out
    }
}

#[derive(Debug, Default)]
struct State {
    parts: u64,
    extras: u64,
    per_uid: HashMap<u32, u64>,
    refused: BTreeMap<&'static str, u64>,
    named: Vec<String>,
}

/// The session's disk budget (see the module's rules); cheap to clone,
/// every clone the same budget.
#[derive(Debug, Clone)]
pub struct DiskBudget {
    limit: Arc<BudgetLimit>,
    state: Arc<Mutex<State>>,
}

impl DiskBudget {
    /// A budget of `limit`.
    pub fn new(limit: BudgetLimit) -> Self {
        DiskBudget {
            limit: Arc::new(limit),
            state: Arc::default(),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The total.
    pub fn total(&self) -> u64 {
        self.limit.total
    }

    /// What extras may take together: half the total.
    pub fn extras_share(&self) -> u64 {
        self.limit.total / 2
    }

    /// What one user's extras may take (root's: the extras' share).
    pub fn user_share(&self, uid: u32) -> u64 {
        if uid == 0 {
            self.extras_share()
        } else {
            self.limit.total / 4
        }
    }

    /// Charges `bytes` on disk of a copy of `uid`'s file before it is
    /// written; refused (nothing charged) when over the extras' or the
    /// user's share.
    pub fn charge(&self, uid: u32, bytes: u64) -> Result<(), Refusal> {
        let mut s = self.state();
        if s.extras.saturating_add(bytes) > self.extras_share() {
            return Err(Refusal::Share);
        }
        let mine = s.per_uid.get(&uid).copied().unwrap_or(0);
        if mine.saturating_add(bytes) > self.user_share(uid) {
            return Err(Refusal::UserShare);
        }
        s.extras += bytes;
        *s.per_uid.entry(uid).or_default() += bytes;
        Ok(())
    }

    /// What a copy of `uid`'s file may still take, and the share that
    /// bounds it.
    pub fn room(&self, uid: u32) -> (u64, Refusal) {
        let s = self.state();
        let all = self.extras_share().saturating_sub(s.extras);
        let mine = self
            .user_share(uid)
            .saturating_sub(s.per_uid.get(&uid).copied().unwrap_or(0));
        if all <= mine {
            (all, Refusal::Share)
        } else {
            (mine, Refusal::UserShare)
        }
    }

    /// Gives back `bytes` of `uid`'s charge (a copy that took less than
    /// charged, or was removed).
    pub fn release(&self, uid: u32, bytes: u64) {
        let mut s = self.state();
        s.extras = s.extras.saturating_sub(bytes);
        if let Some(m) = s.per_uid.get_mut(&uid) {
            *m = m.saturating_sub(bytes);
        }
    }

    /// Counts a refusal and names it (`what`: the file; `why`: what it
    /// would have taken).
    pub fn refuse(&self, r: Refusal, what: &str, uid: u32, why: &str) {
        let mut s = self.state();
        *s.refused.entry(r.key()).or_default() += 1;
        if s.named.len() < NAMED_REFUSALS {
            let text = format!("{what} (uid {uid}): {why}");
            s.named.push(text.replace(['\n', '\r'], " "));
        }
    }

    /// A message for a refusal of `bytes`: which share it would exceed.
    pub fn refusal_text(&self, r: Refusal, uid: u32, bytes: u64) -> String {
        match r {
            Refusal::Share => format!(
                "{} more would pass the copies' half of the {} disk budget",
                crate::summary::human_bytes(bytes),
                crate::summary::human_bytes(self.total())
            ),
            Refusal::UserShare => format!(
                "{} more would pass uid {uid}'s quarter of the {} disk budget",
                crate::summary::human_bytes(bytes),
                crate::summary::human_bytes(self.total())
            ),
            Refusal::FileBound => format!(
                "{} over a bound of one file",
                crate::summary::human_bytes(bytes)
            ),
        }
    }

    /// [`DiskBudget::charge`]; a refusal is counted and named, and its
    /// text returned.
    pub fn charge_or_refuse(&self, uid: u32, bytes: u64, what: &str) -> Result<(), String> {
        self.charge(uid, bytes).map_err(|r| {
            let why = self.refusal_text(r, uid, bytes);
            self.refuse(r, what, uid, &why);
            why
        })
    }

    /// The parts' bytes now (closed and being written).
    pub fn set_parts(&self, bytes: u64) {
        self.state().parts = bytes;
    }

    /// Bytes of extras charged.
    pub fn extras(&self) -> u64 {
        self.state().extras
    }

    /// What the parts may take under `--max-disk` (`max_disk`): what the
    /// extras leave of it.
    pub fn parts_room(&self, max_disk: u64) -> u64 {
        max_disk.saturating_sub(self.extras()).max(1)
    }

    /// For status and stop.
    pub fn summary(&self) -> DiskSummary {
        let s = self.state();
        DiskSummary {
            budget_bytes: self.limit.total,
            budget_source: self.limit.source.clone(),
            parts_bytes: s.parts,
            extras_bytes: s.extras,
            refused: s
                .refused
                .iter()
                .map(|(k, v)| ((*k).to_owned(), *v))
                .collect(),
            refused_named: s.named.clone(),
        }
    }
}

/// Bytes on disk of a file of `len` bytes, `data` of them data (not
/// holes), in 4 KiB blocks: what a copy of it is charged.
pub(crate) fn on_disk(data: u64) -> u64 {
    data.div_ceil(4096).saturating_mul(4096).max(4096)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(total: u64) -> DiskBudget {
        DiskBudget::new(BudgetLimit {
            total,
            source: "test".into(),
        })
    }

    #[test]
    fn copies_take_half_and_one_user_a_quarter() {
        let b = budget(1000);
        assert_eq!(b.charge(1000, 250), Ok(()));
        assert_eq!(b.charge(1000, 1), Err(Refusal::UserShare));
        assert_eq!(b.charge(1001, 200), Ok(()));
        // Root's files: only the copies' half bounds them.
        assert_eq!(b.charge(0, 51), Err(Refusal::Share));
        assert_eq!(b.charge(0, 50), Ok(()));
        assert_eq!(b.extras(), 500);
        assert_eq!(b.room(1001), (0, Refusal::Share));
        b.release(1001, 100);
        assert_eq!(b.room(1001), (100, Refusal::Share));
        assert_eq!(b.room(1000), (0, Refusal::UserShare));
        assert_eq!(b.room(0), (100, Refusal::Share));
        b.charge(1001, 100).unwrap();
        assert_eq!(b.charge(1002, 1), Err(Refusal::Share));
        b.release(1000, 100);
        assert_eq!(b.charge(1000, 100), Ok(()));
        // Under --max-disk the parts get what the copies leave.
        assert_eq!(b.parts_room(1000), 500);
        assert_eq!(b.parts_room(100), 1);
    }

    #[test]
    fn refusals_are_counted_by_reason_and_the_first_named() {
        let b = budget(400);
        b.set_parts(123);
        for i in 0..(NAMED_REFUSALS + 5) {
            let e = b
                .charge_or_refuse(7, 150, &format!("/tmp/f{i}"))
                .unwrap_err();
            assert!(e.contains("uid 7's quarter"), "{e}");
        }
        assert!(b.charge_or_refuse(0, 300, "/x").is_err());
        let s = b.summary();
        assert_eq!(s.parts_bytes, 123);
        assert_eq!(s.refused["user_share"], NAMED_REFUSALS as u64 + 5);
        assert_eq!(s.refused["budget"], 1);
        assert_eq!(s.refused_named.len(), NAMED_REFUSALS);
        assert_eq!(
            s.refused_named[0],
            "/tmp/f0 (uid 7): 150 B more would pass uid 7's quarter of the 400 B disk budget"
        );
        let t = s.text();
        assert!(
            t.contains("26 copies refused (budget 1, user_share 25)"),
            "{t}"
        );
        assert!(t.contains("and 6 more refused"), "{t}");
    }

    #[test]
    fn the_default_is_a_tenth_of_the_free_space_at_most_4_gib() {
        let d = tempfile::tempdir().unwrap();
        let l = BudgetLimit::resolve(None, d.path());
        assert!(l.total > 0 && l.total <= DEFAULT_BUDGET_MAX, "{l:?}");
        assert!(l.source.starts_with("default: 10 %"), "{l:?}");
        let l = BudgetLimit::resolve(Some(5 << 20), d.path());
        assert_eq!((l.total, l.source.as_str()), (5 << 20, "--max-disk"));
        assert!(l.describe().starts_with("disk budget 5.0 MiB (--max-disk)"));
    }
}
