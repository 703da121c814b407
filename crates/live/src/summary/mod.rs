//! The status and stop summary: one typed struct, built here and only
//! here, serialised with serde for the control protocol (and a `--json`),
//! and rendered for people here too ([`text`]: `profctl status`'s table
//! and the stop summary; [`status`]: the daemon's state around it).

mod status;
mod text;

pub use status::Status;
pub(crate) use text::human_bytes;

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
    /// Binaries demoted to frame-pointer stepping because their frames
    /// cost too much to unwind.
    #[serde(default)]
    pub demoted: u64,
    /// User stacks (or their rest) stepped by frame pointer because their
    /// sync round had spent its unwinding budget.
    #[serde(default)]
    pub stacks_over_budget: u64,
    /// Frames of generated code stepped with the runtime's own unwind
    /// information (a jitdump's).
    #[serde(default)]
    pub jit_frames_cfi: u64,
    /// Frames of generated code stepped by decoding their epilogue.
    #[serde(default)]
    pub jit_frames_epilogue: u64,
    /// JIT functions whose unwind information was refused.
    #[serde(default)]
    pub jit_unwind_refused: u64,
    /// Binaries (of `binaries`) whose unwind information came from their
    /// separate debug file (`/usr/lib/debug/.build-id/…`).
    #[serde(default)]
    pub from_debug_file: u64,
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
            demoted: u.demoted,
            stacks_over_budget: u.stacks_over_budget,
            jit_frames_cfi: u.jit_frames_cfi,
            jit_frames_epilogue: u.jit_frames_epilogue,
            jit_unwind_refused: u.jit_unwind_refused,
            from_debug_file: u.from_debug_file,
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
    /// Mappings claiming a build-id whose file could not be identified
    /// (gone, refused, timed out): named by their recorded path only,
    /// never with another file's symbols.
    #[serde(default)]
    pub files_unidentified: u64,
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
    /// Binaries demoted to frame-pointer stepping for the session because
    /// their frames cost too much to unwind, `PATH: cost` (the first few).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unwind_demoted: Vec<String>,
    /// The session's parts (`--rotate`, `--keep`, `--max-disk`, SIGHUP,
    /// `profctl rotate`); absent until the first rotation when none was
    /// asked for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parts: Option<PartsSummary>,
    /// The session's disk budget: its total, what parts and copies take,
    /// the copies it refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk: Option<crate::budget::DiskSummary>,
    /// Off-CPU recording (`--off-cpu`), all CPUs; absent without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub off_cpu: Option<OffCpuSummary>,
    /// Runtimes' JIT dumps read; absent when none was met.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jit: Option<JitSummary>,
    /// The finished session (stop only).
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub session: Option<SessionSummary>,
}

/// What `--off-cpu` recorded and lost, all CPUs (the footer's off-CPU
/// counts), and what the sync stage holds now.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OffCpuSummary {
    /// The counts.
    #[serde(flatten)]
    pub counts: profkit_eventlog::OffCpuCounts,
    /// Switch records waiting to be paired now.
    pub pending: usize,
    /// Waits going on now.
    pub open: usize,
}

impl OffCpuSummary {
    fn of(st: &RecorderStatus) -> Option<Self> {
        st.off_cpu.then(|| OffCpuSummary {
            counts: profkit_eventlog::OffCpuCounts::of(&st.accounting),
            pending: st.offcpu.pending,
            open: st.offcpu.open,
        })
    }
}

/// What the sync stage did with runtimes' JIT dumps
/// ([`profkit_sync::JitStats`]).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct JitSummary {
    /// Dumps followed.
    pub dumps: u64,
    /// Dumps that could not be opened (gone, or refused: not a regular
    /// file, not the process's user's own, mostly holes).
    pub unopened: u64,
    /// Dumps not followed (too many at once).
    pub over_dumps: u64,
    /// Dumps whose reading ended at a malformed record or at the size bound.
    pub malformed: u64,
    /// Bytes read.
    pub bytes: u64,
    /// Functions described.
    pub functions: u64,
    /// Functions not held (bound reached).
    pub functions_over: u64,
    /// Functions written without their code (over 1 MiB, or not readable
    /// from their dump): no annotation.
    pub code_not_held: u64,
    /// Functions written to the session (hit by samples or frames).
    pub written: u64,
    /// Generations (a runtime putting new code where code was).
    pub generations: u64,
    /// Functions replaced by code whose record came after samples of a
    /// later time had been written under them.
    pub generations_late: u64,
    /// Of those, the ones whose samples were then named by the new code.
    #[serde(default)]
    pub late_renamed: u64,
    /// Hit addresses no function of the dump described.
    pub undescribed: u64,
    /// Hits not kept (bound reached).
    pub hits_dropped: u64,
    /// Dumps given up before their end after their process exited.
    #[serde(default)]
    pub unread_at_exit: u64,
    /// Functions hit but not written: the markers' bytes bounds.
    #[serde(default)]
    pub markers_over: u64,
}

impl From<&profkit_sync::JitStats> for JitSummary {
    fn from(j: &profkit_sync::JitStats) -> Self {
        JitSummary {
            dumps: j.dumps,
            unopened: j.unopened,
            over_dumps: j.over_dumps,
            malformed: j.malformed,
            bytes: j.bytes,
            functions: j.functions,
            functions_over: j.functions_over,
            code_not_held: j.code_not_held,
            written: j.written,
            generations: j.generations,
            generations_late: j.generations_late,
            late_renamed: j.late_renamed,
            undescribed: j.undescribed,
            hits_dropped: j.hits_dropped,
            unread_at_exit: j.unread_at_exit,
            markers_over: j.markers_over,
        }
    }
}

impl JitSummary {
    /// Its lines for status and stop.
    pub fn lines(&self) -> Vec<String> {
        let mut v = vec![format!(
            "JIT dumps: {} read ({:.1} MiB), {} functions described, {} of them hit and written to the session",
            self.dumps,
            self.bytes as f64 / (1 << 20) as f64,
            self.functions,
            self.written
        )];
        if self.unopened + self.over_dumps + self.malformed + self.unread_at_exit > 0 {
            v.push(format!(
                "note: {} JIT dumps not read (gone before they were opened, or refused: not a regular file, not the process's user's own, mostly holes), {} not followed (over {} at once), {} ended at a malformed record or at {} GiB, {} given up unread after their process exited",
                self.unopened,
                self.over_dumps,
                profkit_sync::JIT_MAX_DUMPS,
                self.malformed,
                profkit_sync::JIT_MAX_DUMP_BYTES >> 30,
                self.unread_at_exit
            ));
        }
        if self.undescribed + self.hits_dropped > 0 {
            v.push(format!(
                "note: {} addresses in JIT code were hit that their dump never described (its runtime had not written them when the process exited or the session stopped; they show as addresses or by the perf map){}",
                self.undescribed + self.hits_dropped,
                if self.hits_dropped > 0 {
                    format!(", {} of them past the bound of pending hits", self.hits_dropped)
                } else {
                    String::new()
                }
            ));
        }
        if self.functions_over > 0 {
            v.push(format!(
                "note: {} JIT functions not held (over {} functions or {} MiB of names and unwind information): their samples show unnamed",
                self.functions_over,
                profkit_sync::JIT_MAX_FUNCTIONS,
                profkit_sync::JIT_MAX_HELD_BYTES >> 20
            ));
        }
        if self.markers_over > 0 {
            v.push(format!(
                "note: {} JIT functions hit were not written to the session (over {} MiB of them from one dump, or {} MiB from all, in one session file): their samples show as addresses",
                self.markers_over,
                profkit_sync::JIT_MAX_MARKER_BYTES_PER_DUMP >> 20,
                profkit_sync::JIT_MAX_MARKER_BYTES >> 20
            ));
        }
        if self.code_not_held > 0 {
            v.push(format!(
                "note: {} JIT functions written without their code (over 1 MiB, or no longer readable from their dump): no annotation of them",
                self.code_not_held
            ));
        }
        if self.generations_late > 0 {
            v.push(format!(
                "note: {} times a runtime put new code where code had been and wrote so only after samples there had been written (its dump is buffered): {} of them renamed to the new code (all or most of those samples came after it), the other {} keep the older code's name",
                self.generations_late,
                self.late_renamed,
                self.generations_late.saturating_sub(self.late_renamed)
            ));
        }
        v
    }
}

/// The parts of a rotated session, as status and stop show them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartsSummary {
    /// The number of the part being written (`session.pkl`).
    pub part: u64,
    /// Closed parts on disk (`session.NNNNNN.pkl`).
    pub closed: u64,
    /// Their bytes.
    pub closed_bytes: u64,
    /// Closed parts deleted by `--keep`/`--max-disk`.
    pub removed: u64,
    /// The rule, as the user would say it (`a new part every 2s, keeping
    /// the newest 3`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule: Option<String>,
    /// Rotations and deletions that failed (the newest few), each with why.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
    /// `--export`: how the parts' export stands.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub export: Option<crate::export::ExportState>,
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
            files_unidentified: st.files_unidentified,
            unwind: UnwindSummary::from(&st.unwind),
            unattributed: st
                .unattributed
                .iter()
                .map(UnattributedExample::from)
                .collect(),
            unwind_refused: st.unwind_refused.clone(),
            unwind_demoted: st.unwind_demoted.clone(),
            parts: None,
            disk: None,
            off_cpu: OffCpuSummary::of(st),
            jit: (st.jit.dumps > 0).then(|| JitSummary::from(&st.jit)),
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

    /// The CPUs the kernel throttled, `cpu0 3x, cpu1 1x`; None when none.
    pub fn throttled(&self) -> Option<String> {
        let t: Vec<String> = self
            .cpus
            .iter()
            .filter(|c| c.throttle_events > 0)
            .map(|c| format!("cpu{} {}x", c.cpu, c.throttle_events))
            .collect();
        (!t.is_empty()).then(|| t.join(", "))
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

    fn two_cpus() -> Summary {
        Summary {
            rounds: 48,
            bytes_written: 3 << 20,
            last_round_ms: 0.75,
            cpus: vec![
                CpuSummary {
                    cpu: 0,
                    samples: 12000,
                    ..Default::default()
                },
                CpuSummary::from(&CpuAccounting {
                    cpu: 1,
                    samples_written: 900,
                    lost_ring: 90,
                    lost_no_task: 10,
                    throttle_events: 3,
                    ..Default::default()
                }),
            ],
            ..Default::default()
        }
    }

    #[test]
    fn status_text_is_an_aligned_table_with_the_losses_and_notes_and_no_json() {
        let t = two_cpus().status_text();
        assert!(!t.contains('{') && !t.contains('"'), "{t}");
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0], "rounds:   48 (last took 0.8 ms), 3.0 MiB written");
        assert_eq!(lines[1], "samples:  12900, lost 100 (0.769%)");
        assert_eq!(lines[2], "  cpu  samples  lost  lost %  losses");
        assert_eq!(lines[3], "    0    12000     0   0.000");
        assert_eq!(
            lines[4],
            "    1      900   100  10.000  ring 90, no task 10"
        );
        assert_eq!(
            lines[5],
            "note: 10 samples unattributed (no mapping or no task)"
        );
        assert!(lines[6].contains("throttled sampling (cpu1 3x)"), "{t}");
        assert_eq!(lines.len(), 7, "no DWARF notes without DWARF: {t}");
        let mut s = two_cpus();
        s.unwind = UnwindSummary {
            stacks: 10,
            frames: 55,
            binaries: 2,
            without_cfi: 1,
            ..Default::default()
        };
        let t = s.status_text();
        assert!(t.contains("10 user stacks unwound, 5.5 frames each"), "{t}");
        assert!(t.contains("1 without unwind information"), "{t}");
        // Binaries demoted for their unwinding cost are counted and named.
        s.unwind.demoted = 1;
        s.unwind.stacks_over_budget = 7;
        s.unwind_demoted = vec!["/tmp/x: unwinding its frames took 21 ms".into()];
        let t = s.status_text();
        assert!(t.contains("note: DWARF: 1 binaries stepped by frame pointer since their unwinding cost too much"), "{t}");
        assert!(
            t.contains("note: DWARF: demoted /tmp/x: unwinding its frames took 21 ms\n"),
            "{t}"
        );
        assert!(t.contains("note: DWARF: 7 user stacks stepped by frame pointer past a round's unwinding budget"), "{t}");
        // Claims whose file could not be identified are counted.
        assert!(!t.contains("could not be identified"), "{t}");
        s.files_unidentified = 3;
        let t = s.status_text();
        assert!(
            t.contains("note: 3 mappings claimed a build-id whose file could not be identified"),
            "{t}"
        );
    }

    #[test]
    fn status_reads_a_daemon_reply_and_prints_it_in_text_or_json() {
        let tmp = tempfile::tempdir().unwrap();
        let reply = serde_json::json!({
            "daemon": {"pid": 77, "uptime_s": 12.25, "sync_interval_ms": 250.0, "round_errors": 0},
            "engine": two_cpus().to_value(),
        });
        // Counters the reply leaves out read as zero.
        let reply = profkit_daemon::StatusReply::from_value(reply).unwrap();
        let st = Status::running(Some(77), tmp.path(), &reply);
        assert_eq!(st.summary.as_ref(), Some(&two_cpus()));
        let t = st.text();
        assert!(!t.contains('{') && !t.contains('"'), "{t}");
        assert!(t.starts_with("profkit: running (pid 77), session "), "{t}");
        assert!(
            t.contains("uptime:   12.2 s") || t.contains("uptime:   12.3 s"),
            "{t}"
        );
        assert!(t.contains("sync every 250 ms"), "{t}");
        assert!(
            t.contains("    1      900   100  10.000  ring 90, no task 10"),
            "{t}"
        );
        let v = serde_json::to_value(&st).unwrap();
        assert_eq!(
            (v["state"].as_str(), v["pid"].as_u64()),
            (Some("running"), Some(77))
        );
        assert_eq!(v["cpus"][1]["samples"], 900);
        assert_eq!(serde_json::from_value::<Status>(v).unwrap(), st);
        let stopping = Status::running(
            None,
            tmp.path(),
            &profkit_daemon::StatusReply {
                engine: serde_json::json!({"stopped": true}),
                ..Default::default()
            },
        );
        assert_eq!(stopping.state, "stopping");
        let none = Status::of_dir("not running", None, &tmp.path().join("none"));
        assert_eq!(none.text().lines().count(), 1);
        assert!(none.text().contains("no daemon running for"));
        assert_eq!(none.session_dir_bytes, None);
    }

    /// Issue 25: status (text and JSON) names the budget, its use and
    /// the copies it refused.
    #[test]
    fn status_shows_the_disk_budget_and_its_refusals() {
        let b = crate::budget::DiskBudget::new(crate::budget::BudgetLimit {
            total: 64 << 20,
            source: "--max-disk".into(),
        });
        b.set_parts(1 << 20);
        b.charge(1000, 2 << 20).unwrap();
        assert!(b
            .charge_or_refuse(1000, 15 << 20, "/proc/9/root/tmp/perf-1.map")
            .is_err());
        let mut s = two_cpus();
        s.disk = Some(b.summary());
        let t = s.status_text();
        assert!(
            t.contains("disk:     3.0 MiB of the 64.0 MiB budget (--max-disk): parts 1.0 MiB, copies 2.0 MiB; 1 copies refused (user_share 1)"),
            "{t}"
        );
        assert!(
            t.contains("note: disk: refused /proc/9/root/tmp/perf-1.map (uid 1000): 15.0 MiB more would pass uid 1000's quarter"),
            "{t}"
        );
        let v = s.to_value();
        assert_eq!(v["disk"]["refused"]["user_share"], 1);
        assert_eq!(v["disk"]["extras_bytes"], 2 << 20);
        assert_eq!(serde_json::from_value::<Summary>(v).unwrap(), s);
    }

    #[test]
    fn status_reads_event_and_rate_from_the_session_header_and_sizes() {
        let tmp = tempfile::tempdir().unwrap();
        let header = profkit_eventlog::SessionHeader {
            event: profkit_eventlog::EventConfigDesc {
                name: "cpu-clock".into(),
                frequency: Some(999),
                ..Default::default()
            },
            sync_interval_ms: 100,
            ..Default::default()
        };
        let path = tmp.path().join(profkit_daemon::SESSION_LOG);
        let w = profkit_eventlog::SessionWriter::create(&path, &header).unwrap();
        drop(w);
        std::fs::write(tmp.path().join("other"), [0u8; 100]).unwrap();
        let st = Status::of_dir("running", Some(1), tmp.path());
        assert_eq!(st.event.as_deref(), Some("cpu-clock"));
        assert_eq!(
            (st.frequency_hz, st.sync_interval_ms),
            (Some(999), Some(100.0))
        );
        let file = std::fs::metadata(&path).unwrap().len();
        assert_eq!(st.session_file_bytes, Some(file));
        assert_eq!(st.session_dir_bytes, Some(file + 100));
        assert!(
            st.text()
                .contains("event:    cpu-clock at 999 Hz, sync every 100 ms"),
            "{}",
            st.text()
        );
    }

    /// Every key `profctl status --json` prints, at the top level and in
    /// `cpus`, `parts` and `disk`, is named in its help.
    #[test]
    fn every_status_json_key_is_in_the_help() {
        let mut s = Status::of_dir("running", Some(1), std::path::Path::new("/nonexistent"));
        let mut summary = two_cpus();
        summary.parts = Some(PartsSummary::default());
        summary.off_cpu = Some(OffCpuSummary::default());
        s.summary = Some(summary);
        let v = serde_json::to_value(&s).unwrap();
        let help = Status::JSON_KEYS;
        let mut missing = Vec::new();
        let mut check = |obj: &serde_json::Value| {
            for k in obj.as_object().unwrap().keys() {
                if !help.contains(k.as_str()) {
                    missing.push(k.clone());
                }
            }
        };
        check(&v);
        check(&v["cpus"][0]);
        check(&v["parts"]);
        check(&v["off_cpu"]);
        assert!(missing.is_empty(), "not in Status::JSON_KEYS: {missing:?}");
    }

    /// The off-CPU line names every count of what was not measured, and
    /// only those that are not 0.
    #[test]
    fn the_off_cpu_line_names_what_was_not_measured() {
        let mut o = OffCpuSummary::default();
        o.counts.switches = 10;
        o.counts.intervals = 9;
        assert_eq!(
            o.line(),
            "profkit: off-CPU: 10 switch-outs, 9 waits measured."
        );
        o.counts.lost = 5;
        o.counts.kernel_lost = 7;
        o.counts.no_stack = 2;
        o.counts.unpaired = 1;
        o.counts.dropped = 3;
        let l = o.line();
        for want in [
            "7 switch records dropped by the kernel (ring full: raise --buffer-pages)",
            "2 waits without their stack",
            "1 not measurable",
            "3 switch records over the sync stage's bounds",
        ] {
            assert!(l.contains(want), "{l}");
        }
        let s = Summary {
            off_cpu: Some(o),
            ..Default::default()
        };
        assert!(s.stop_text().contains("profkit: off-CPU: 10 switch-outs"));
        assert!(s.status_text().contains("off-cpu:  10 switch-outs"));
    }
}
