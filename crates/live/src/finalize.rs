//! Crash finalisation: the session of a daemon that died gets its footer.

use crate::error::{Error, Result};
use crate::extras::{save_session_extras, ExtrasSources};
use crate::summary::{CpuSummary, SessionSummary, Summary};
use crate::RESERVE_FILE;
use profkit_daemon::{DaemonLock, SessionDir, SESSION_LOG};
use profkit_eventlog::{CpuAccounting, Event, SessionFooter, SessionReader, SessionWriter};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::{SystemTime, UNIX_EPOCH};

/// The budget of the extras a dead daemon's session gets at finalisation:
/// the default one (its `--max-disk` is not known here).
fn dead_budget(sdir: &SessionDir) -> crate::budget::DiskBudget {
    crate::budget::DiskBudget::new(crate::budget::BudgetLimit::resolve(None, &sdir.held_path()))
}

/// What [`finalize_dead`] did.
#[derive(Debug, Clone)]
pub struct Finalized {
    /// The summary (as `stop` prints it).
    pub summary: Summary,
    /// Complete rounds kept.
    pub rounds: u64,
    /// Bytes of a torn last round that were cut.
    pub truncated: u64,
    /// The session already had its footer (the daemon died after writing
    /// it): nothing was rewritten.
    pub already_complete: bool,
}

/// Finishes the session of a daemon that died: keeps every complete round,
/// cuts a torn one, rebuilds the accounting from the log, writes the
/// footer and saves the session extras. Takes over the stale lock for the
/// time it works (and releases it).
pub fn finalize_dead(session_dir: &Path, extras: &ExtrasSources) -> Result<Finalized> {
    let sdir = SessionDir::open(session_dir)?;
    // Takes over the stale lock (and cleans it up when dropped).
    let _lock = DaemonLock::acquire(&sdir)?;
    // Opened under the held directory, never again through its path.
    let mut path = sdir.held_path().join(SESSION_LOG);
    let mut shown = sdir.join(SESSION_LOG);
    // Died in a rotation, between closing the part and starting the next:
    // the newest closed part is the one to finish. (Every other part has
    // its footer; the summary is of the part finished.)
    if !path.exists() {
        if let Some((n, p)) = profkit_eventlog::parts::closed_parts(&sdir.held_path())
            .ok()
            .and_then(|mut v| v.pop())
        {
            path = p;
            shown = sdir.join(&profkit_eventlog::parts::part_file_name(n));
        }
    }
    // Free the space kept for this footer.
    let _ = sdir.remove(RESERVE_FILE);
    // Killed after its footer: the session is finished; say so.
    if let Ok(r) = SessionReader::open_shown(&path, &shown) {
        if let Some(f) = r.footer() {
            let saved = save_session_extras(
                &path,
                extras,
                &|pid| extras.live_process_owner(pid),
                &dead_budget(&sdir),
            );
            return Ok(Finalized {
                summary: Summary {
                    rounds: f.rounds,
                    cpus: f.accounting.iter().map(CpuSummary::from).collect(),
                    session: Some(SessionSummary {
                        duration_s: f
                            .end_monotonic_ns
                            .saturating_sub(r.header().start_monotonic_ns)
                            as f64
                            / 1e9,
                        session: shown.display().to_string(),
                        session_bytes: std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0),
                        extras_refused: saved.refused,
                        kept: Default::default(),
                    }),
                    ..Default::default()
                },
                rounds: r.chunks().len() as u64,
                truncated: 0,
                already_complete: true,
            });
        }
    }
    let (mut w, resume) = SessionWriter::open_append(&path).map_err(|source| Error::Reopen {
        path: shown.clone(),
        source,
    })?;
    let r = SessionReader::open_shown(&path, &shown)?;
    let mut acct: BTreeMap<u32, CpuAccounting> = r
        .header()
        .cpus
        .iter()
        .map(|&c| {
            (
                c,
                CpuAccounting {
                    cpu: c,
                    ..Default::default()
                },
            )
        })
        .collect();
    let mut last_time = r.header().start_monotonic_ns;
    for c in r.chunks() {
        last_time = last_time.max(c.time);
        let mut per_cpu: BTreeMap<u32, u64> = Default::default();
        let mut lost = Vec::new();
        let mut waits: BTreeMap<u32, u64> = Default::default();
        r.for_each_sample(
            c,
            |s| *per_cpu.entry(s.cpu).or_default() += 1,
            |m| match m {
                Event::Lost { cpu, kind, count } => lost.push((cpu, kind, count)),
                // Off-CPU waits written: the switch counts died with the
                // recorder, these are in the file.
                Event::OffCpu { cpu, count, .. } => {
                    let w = waits.entry(cpu).or_default();
                    *w = w.saturating_add(count);
                }
                _ => {}
            },
        )?;
        for (cpu, n) in waits {
            let a = acct.entry(cpu).or_insert_with(|| CpuAccounting {
                cpu,
                ..Default::default()
            });
            a.offcpu_intervals = a.offcpu_intervals.saturating_add(n);
        }
        for (cpu, n) in per_cpu {
            let a = acct.entry(cpu).or_insert_with(|| CpuAccounting {
                cpu,
                ..Default::default()
            });
            a.samples_written += n;
            a.samples_received += n;
        }
        for (cpu, kind, n) in lost {
            let a = acct.entry(cpu).or_insert_with(|| CpuAccounting {
                cpu,
                ..Default::default()
            });
            a.add_lost_marker(kind, n);
        }
    }
    let footer = SessionFooter {
        end_time_unix_ns: SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0),
        end_monotonic_ns: last_time,
        rounds: resume.chunks,
        accounting: acct.values().cloned().collect(),
    };
    w.write_footer(&footer)?;
    w.sync_data()?;
    let saved = save_session_extras(
        &path,
        extras,
        &|pid| extras.live_process_owner(pid),
        &dead_budget(&sdir),
    );
    let summary = Summary {
        rounds: resume.chunks,
        cpus: footer.accounting.iter().map(CpuSummary::from).collect(),
        session: Some(SessionSummary {
            duration_s: (last_time.saturating_sub(r.header().start_monotonic_ns)) as f64 / 1e9,
            session: shown.display().to_string(),
            session_bytes: std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0),
            extras_refused: saved.refused,
            kept: Default::default(),
        }),
        ..Default::default()
    };
    Ok(Finalized {
        summary,
        rounds: resume.chunks,
        truncated: resume.truncated,
        already_complete: false,
    })
}
