//! The status and stop summary: one typed struct, built here and only
//! here, serialised with serde for the control protocol (and a `--json`).

use profkit_eventlog::CpuAccounting;
use profkit_sync::RecorderStatus;
use serde::{Deserialize, Serialize};

/// One CPU's accounting as `status` and `stop` report it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CpuSummary {
    /// The CPU.
    pub cpu: u32,
    /// Samples written to the session.
    pub samples: u64,
    /// Samples lost, all causes.
    pub lost: u64,
    /// `lost` as a percentage of samples + lost.
    pub lost_pct: f64,
    /// Lost in the kernel's ring (LOST records).
    pub lost_ring: u64,
    /// Lost to a full event buffer.
    pub lost_overflow: u64,
    /// Lost to a failed write.
    pub lost_disk_full: u64,
    /// Samples in no known mapping.
    pub lost_no_mapping: u64,
    /// Samples of no known task.
    pub lost_no_task: u64,
    /// Lost without a LOST record (found when reconciling at stop).
    pub lost_reconcile: u64,
    /// The kernel's own lost count.
    pub kernel_lost: u64,
    /// Throttle events.
    pub throttle_events: u64,
    /// Stacks with an `[unknown]` frame.
    #[serde(default)]
    pub stacks_unknown: u64,
    /// Stacks cut at the most frames a stack keeps.
    #[serde(default)]
    pub stacks_truncated: u64,
    /// DWARF user stacks cut at the copy size.
    #[serde(default)]
    pub user_stacks_cut: u64,
}

/// A sample that resolved to nothing ([`profkit_sync::UnattributedSample`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnattributedExample {
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// The address, hexadecimal.
    pub ip: String,
    /// Sample time (ns, CLOCK_MONOTONIC).
    pub time: u64,
    /// Kernel mode.
    pub kernel: bool,
    /// "no mapping" or "no task".
    pub reason: String,
    /// The process's name, when known.
    pub comm: Option<String>,
}

impl From<&profkit_sync::UnattributedSample> for UnattributedExample {
    fn from(u: &profkit_sync::UnattributedSample) -> Self {
        UnattributedExample {
            pid: u.pid,
            tid: u.tid,
            ip: format!("{:#x}", u.ip),
            time: u.time,
            kernel: u.kernel,
            reason: match u.reason {
                profkit_sync::Unresolved::NoMapping => "no mapping".into(),
                profkit_sync::Unresolved::NoTask => "no task".into(),
            },
            comm: u.comm.clone(),
        }
    }
}

/// The DWARF unwinder's counters ([`profkit_sync::UnwindStats`]), all
/// zero without DWARF call graphs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnwindSummary {
    /// User stacks unwound.
    pub stacks: u64,
    /// Return addresses found.
    pub frames: u64,
    /// Binaries whose unwind information was read.
    pub binaries: u64,
    /// Bytes of unwind sections read (a binary read again after a flush counts again).
    pub bytes: u64,
    /// Binaries without unwind information (frame-pointer fallback).
    pub without_cfi: u64,
    /// Binaries that could not be read, or not in time.
    pub unreadable: u64,
    /// Binaries whose unwind information failed the check.
    pub refused: u64,
    /// Frames stepped by the frame pointer while their binary's unwind
    /// information was still being read.
    #[serde(default)]
    pub frames_while_loading: u64,
}

impl From<&profkit_sync::UnwindStats> for UnwindSummary {
    fn from(u: &profkit_sync::UnwindStats) -> Self {
        UnwindSummary {
            stacks: u.stacks,
            frames: u.frames,
            binaries: u.binaries,
            bytes: u.bytes,
            without_cfi: u.without_cfi,
            unreadable: u.unreadable,
            refused: u.refused,
            frames_while_loading: u.frames_while_loading,
        }
    }
}

impl From<&CpuAccounting> for CpuSummary {
    fn from(a: &CpuAccounting) -> Self {
        let lost = a.lost_total();
        let n = a.samples_written + lost;
        CpuSummary {
            cpu: a.cpu,
            samples: a.samples_written,
            lost,
            lost_pct: if n > 0 {
                100.0 * lost as f64 / n as f64
            } else {
                0.0
            },
            lost_ring: a.lost_ring,
            lost_overflow: a.lost_overflow,
            lost_disk_full: a.lost_disk_full,
            lost_no_mapping: a.lost_no_mapping,
            lost_no_task: a.lost_no_task,
            lost_reconcile: a.lost_reconcile,
            kernel_lost: a.kernel_lost,
            throttle_events: a.throttle_events,
            stacks_unknown: a.stacks_unknown,
            stacks_truncated: a.stacks_truncated,
            user_stacks_cut: a.user_stacks_cut,
        }
    }
}

/// What a finished session is: present in the stop summary (and crash
/// finalisation's), absent from `status`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionSummary {
    /// Seconds recorded.
    pub duration_s: f64,
    /// The session file, for display.
    pub session: String,
    /// Its size.
    pub session_bytes: u64,
    /// Session extras not copied, each with why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extras_refused: Vec<String>,
    /// Binaries and JIT maps kept from other mount and pid namespaces.
    #[serde(default)]
    pub kept: crate::keep::KeptSummary,
}

/// The recorder's counters as `profctl status` shows them and `stop`
/// prints them. Fields a crashed daemon's session cannot tell (processes,
/// tables, bytes written, round timing) are zero in crash finalisation's.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Sync rounds run.
    pub rounds: u64,
    /// Bytes the writer wrote.
    pub bytes_written: u64,
    /// Duration of the last round.
    pub last_round_ms: f64,
    /// Time since the recorder started.
    pub elapsed_s: f64,
    /// Processes in the table.
    pub processes: usize,
    /// Threads with a name of their own.
    pub threads_named: usize,
    /// Tasks announced to the log.
    pub tasks_announced: usize,
    /// Distinct call stacks.
    pub stacks: usize,
    /// Memory of the call-stack table.
    pub stack_table_bytes: usize,
    /// Per-CPU accounting.
    pub cpus: Vec<CpuSummary>,
    /// Mapped binaries whose build-id was not read, by reason: unopenable
    /// or behind a symlink, not a regular file (a FIFO planted at a
    /// renamed binary's path), another file than the one mapped, timed out.
    #[serde(default)]
    pub build_ids_refused: [u64; 4],
    /// DWARF call graphs: what the unwinder did.
    #[serde(default)]
    pub unwind: UnwindSummary,
    /// The first samples that resolved to nothing (no mapping, no task),
    /// as examples: where unattributed samples come from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unattributed: Vec<UnattributedExample>,
    /// Binaries whose unwind information was refused as hostile or
    /// corrupt, `PATH: reason` (the first few).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unwind_refused: Vec<String>,
    /// The finished session (stop only).
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub session: Option<SessionSummary>,
}

impl Summary {
    /// The summary of a running (or just stopped) recorder.
    pub fn of_recorder(st: &RecorderStatus) -> Self {
        Summary {
            rounds: st.rounds,
            bytes_written: st.buffer.bytes_written,
            last_round_ms: st.last_round.as_secs_f64() * 1e3,
            elapsed_s: st.elapsed.as_secs_f64(),
            processes: st.processes,
            threads_named: st.tables.threads,
            tasks_announced: st.tables.announced,
            stacks: st.stacks.stacks,
            stack_table_bytes: st.stacks.bytes,
            cpus: st.accounting.iter().map(CpuSummary::from).collect(),
            build_ids_refused: st.build_ids_refused,
            unwind: UnwindSummary::from(&st.unwind),
            unattributed: st
                .unattributed
                .iter()
                .map(UnattributedExample::from)
                .collect(),
            unwind_refused: st.unwind_refused.clone(),
            session: None,
        }
    }

    /// Samples written, all CPUs.
    pub fn samples(&self) -> u64 {
        self.cpus.iter().map(|c| c.samples).sum()
    }

    /// Samples lost, all CPUs.
    pub fn lost(&self) -> u64 {
        self.cpus.iter().map(|c| c.lost).sum()
    }

    /// Samples lost because no mapping or no task was known, all CPUs.
    pub fn unattributed(&self) -> u64 {
        self.cpus
            .iter()
            .map(|c| c.lost_no_mapping + c.lost_no_task)
            .sum()
    }

    /// As JSON for the control protocol.
    pub fn to_value(&self) -> serde_json::Value {
        serde_json::to_value(self).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lost_pct_counts_lost_against_everything_produced() {
        let a = CpuAccounting {
            cpu: 1,
            samples_written: 300,
            lost_ring: 50,
            lost_no_task: 50,
            throttle_events: 2,
            ..Default::default()
        };
        let c = CpuSummary::from(&a);
        assert_eq!((c.cpu, c.samples, c.lost), (1, 300, 100));
        assert_eq!(c.lost_pct, 25.0);
        assert_eq!(c.throttle_events, 2);
        assert_eq!(CpuSummary::from(&CpuAccounting::default()).lost_pct, 0.0);
    }

    #[test]
    fn status_json_has_no_session_fields_stop_json_has_them_and_both_read_back() {
        let mut s = Summary {
            rounds: 4,
            cpus: vec![CpuSummary {
                cpu: 0,
                samples: 10,
                ..Default::default()
            }],
            ..Default::default()
        };
        let v = s.to_value();
        assert_eq!(v["rounds"], 4);
        assert_eq!(v["cpus"][0]["samples"], 10);
        assert!(v.get("session").is_none() && v.get("duration_s").is_none());
        assert_eq!(serde_json::from_value::<Summary>(v).unwrap(), s);

        s.session = Some(SessionSummary {
            duration_s: 1.5,
            session: "d/session.pkl".into(),
            session_bytes: 99,
            extras_refused: vec!["/tmp/perf-1.map: not a regular file".into()],
            kept: Default::default(),
        });
        let v = s.to_value();
        assert_eq!(v["session"], "d/session.pkl");
        assert_eq!(v["session_bytes"], 99);
        assert_eq!(serde_json::from_value::<Summary>(v).unwrap(), s);
    }
}
