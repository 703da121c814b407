//! What the parallel pass says about the sessions themselves, before any
//! naming: the report [`Header`] (sessions and their state, event and rate,
//! time span, loss per CPU from the footer's accounting or else the Lost
//! markers, unreadable chunks with their warnings) and the `--timeline`.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::{Aggregate, MAX_TIMELINE_LINES};
use crate::model::{
    BadChunkInfo, CallGraphMode, CpuLoss, Header, OffCpuCounts, SessionInfo, SessionTimeline,
    StackCounts, Timeline, TimelineLine,
};
use crate::options::OffCpuMode;
use crate::session::{Liveness, Part, Session};
use crate::spec::ProfileSpec;

/// `n` in percent of `of` (0 when `of` is 0).
pub(crate) fn percent(n: u64, of: u64) -> f64 {
    if of == 0 {
        0.0
    } else {
        n as f64 * 100.0 / of as f64
    }
}

/// [`percent`] per column.
pub(crate) fn percents(samples: &[u64], denom: &[u64]) -> Vec<f64> {
    samples
        .iter()
        .zip(denom)
        .map(|(&n, &d)| percent(n, d))
        .collect()
}

/// The header, and the samples read per CPU (the global denominators);
/// with `off_cpu`, the off-CPU nanoseconds read per CPU.
pub(crate) fn header(
    sessions: &[Session],
    agg: &Aggregate,
    windowed: bool,
    off_cpu: Option<OffCpuMode>,
    warnings: &mut Vec<String>,
) -> (Header, BTreeMap<u32, u64>) {
    let mut off_cpu_counts = OffCpuCounts::default();
    let mut infos = Vec::new();
    let mut bad = Vec::new();
    let mut read_per_cpu: BTreeMap<u32, u64> = BTreeMap::new();
    let mut cpus: BTreeMap<u32, (u64, u64)> = BTreeMap::new();
    let mut start = u64::MAX;
    let mut end = 0u64;
    let mut unreadable = Some(0u64);
    let (mut with_footer, mut without_footer) = (0, 0);
    let mut problems = false;
    let mut stacks = StackCounts::default();
    // Files (parts) are numbered over all sessions, in order.
    let mut file = 0u32;
    for s in sessions {
        let newest = s.reader();
        let h = newest.header();
        let path = newest.path().display().to_string();
        warnings.extend(s.warnings().iter().cloned());
        let rotated = s.rotation().is_some_and(|r| !r.one_file);
        let mut first_part_start = u64::MAX;
        let mut chunks_read = 0u64;
        let mut rounds = Some(0u64);
        for part in s.parts() {
            let f = file;
            file += 1;
            let r = part.reader();
            let ph = r.header();
            let path = r.path().display().to_string();
            chunks_read += r.chunks().len() as u64;
            rounds = rounds
                .zip(r.footer().map(|f| f.rounds))
                .map(|(a, b)| a.saturating_add(b));
            first_part_start = first_part_start.min(ph.start_time_unix_ns);
            // Only the file being written may lack its footer or end torn:
            // the session file, or the newest part of a rotated session.
            let being_written = part.is_current() || part.number().is_none();
            let running = s.liveness() == Liveness::Running && being_written;
            let stats = agg.chunks.iter().filter(|c| c.file == f);
            let mut read_here: BTreeMap<u32, u64> = BTreeMap::new();
            let mut lost_here: BTreeMap<u32, u64> = BTreeMap::new();
            let mut last_time = ph.start_monotonic_ns;
            // With `--time`: from the start of the first round in the window.
            let mut first_time = u64::MAX;
            for c in stats {
                first_time = first_time.min(c.time);
                for &(cpu, n) in &c.read {
                    add(read_here.entry(cpu).or_insert(0), n);
                }
                for &(cpu, n) in &c.lost {
                    add(lost_here.entry(cpu).or_insert(0), n);
                }
                last_time = last_time.max(c.time);
            }
            for (&cpu, &n) in &read_here {
                add(read_per_cpu.entry(cpu).or_insert(0), n);
            }
            let read_total: u64 = read_here.values().fold(0, |a, &b| a.saturating_add(b));
            let errors: Vec<_> = agg.errors.iter().filter(|e| e.file == f).collect();
            // A window's samples and losses are its chunks' (the footer counts
            // the whole file: each part's footer its own part).
            let end_mono = match r.footer().filter(|_| !windowed) {
                Some(f) => {
                    with_footer += 1;
                    for a in &f.accounting {
                        let e = cpus.entry(a.cpu).or_insert((0, 0));
                        add(&mut e.0, a.samples_written);
                        add(&mut e.1, a.lost_total());
                        add(&mut stacks.unknown, a.stacks_unknown);
                        add(&mut stacks.truncated, a.stacks_truncated);
                        add(&mut stacks.user_stacks_cut, a.user_stacks_cut);
                        off_cpu_counts.add(a);
                    }
                    let written: u64 = f
                        .accounting
                        .iter()
                        .fold(0, |t, a| t.saturating_add(a.samples_written));
                    // Samples written against nanoseconds read would say
                    // nothing: off-CPU reports leave it.
                    if let Some(u) = unreadable.as_mut().filter(|_| off_cpu.is_none()) {
                        add(u, written.saturating_sub(read_total));
                    }
                    f.end_monotonic_ns.max(last_time)
                }
                None => {
                    without_footer += 1;
                    for (&cpu, &n) in &read_here {
                        add(&mut cpus.entry(cpu).or_insert((0, 0)).0, n);
                    }
                    for (&cpu, &n) in &lost_here {
                        add(&mut cpus.entry(cpu).or_insert((0, 0)).1, n);
                    }
                    let missing = r
                        .bad_chunks()
                        .iter()
                        .any(|b| !(b.is_torn_tail() && running));
                    if missing || !errors.is_empty() {
                        unreadable = None;
                    }
                    if r.footer().is_none() && !being_written {
                        problems = true;
                        warnings.push(format!(
                            "{path}: a closed part without a footer: the recorder was killed or \
                             crashed while writing it; its losses are taken from its markers"
                        ));
                    }
                    last_time
                }
            };
            let begin = if windowed && first_time != u64::MAX {
                let round = u64::from(ph.sync_interval_ms) * 1_000_000;
                ph.start_time_unix_ns.saturating_add(
                    first_time
                        .saturating_sub(round)
                        .saturating_sub(ph.start_monotonic_ns),
                )
            } else {
                ph.start_time_unix_ns
            };
            if windowed || !rotated {
                start = start.min(begin);
            }
            end = end.max(
                ph.start_time_unix_ns
                    .saturating_add(end_mono.saturating_sub(ph.start_monotonic_ns)),
            );
            for b in r.bad_chunks() {
                let torn = b.is_torn_tail();
                bad.push(BadChunkInfo {
                    session: path.clone(),
                    index: b.index,
                    offset: b.offset,
                    len: b.len,
                    reason: b.reason.to_string(),
                    torn,
                });
                if torn && running {
                    continue; // a chunk being written: expected, not a problem
                }
                problems = true;
                let what = if torn {
                    "torn chunk (the recorder stopped while writing it); not read"
                } else {
                    "unreadable; skipped"
                };
                warnings.push(format!("{path}: {b}: {what}"));
            }
            for e in errors {
                problems = true;
                bad.push(BadChunkInfo {
                    session: path.clone(),
                    index: e.index,
                    offset: e.offset,
                    len: 0,
                    reason: format!(
                        "decoding stopped ({}); {} samples before it were read",
                        e.message, e.samples_before
                    ),
                    torn: false,
                });
                warnings.push(format!(
                    "{path}: chunk {} at byte {}: decoding stopped: {}; the {} samples before \
                     the bad byte are reported, the rest of the chunk is skipped",
                    e.index, e.offset, e.message, e.samples_before
                ));
            }
        }
        // A rotated session starts at its oldest part present.
        if rotated && !windowed && first_part_start != u64::MAX {
            start = start.min(first_part_start);
        }
        for &cpu in s.claimed_cpus() {
            cpus.entry(cpu).or_insert((0, 0));
        }
        let rotation = s.rotation();
        let newest_read =
            rotation.is_none_or(|r| s.parts().last().and_then(Part::number) == Some(r.last));
        let state = match (newest.footer(), s.liveness()) {
            _ if !newest_read => match s.liveness() {
                Liveness::Running => "running; the parts after the --time window were not read",
                Liveness::NotRunning => {
                    "not running; the parts after the --time window were not read"
                }
                Liveness::Unknown => {
                    "its newest parts are outside the --time window and were not read"
                }
            }
            .to_owned(),
            (Some(_), _) => "stopped".to_owned(),
            (None, Liveness::Running) => {
                format!("running: reading the {chunks_read} complete chunks so far")
            }
            (None, Liveness::NotRunning) => {
                "not stopped cleanly: no footer, the recorder was killed or crashed".to_owned()
            }
            (None, Liveness::Unknown) => {
                "no footer: still running, or the recorder was killed".to_owned()
            }
        };
        infos.push(SessionInfo {
            path,
            state,
            target: h.target.clone(),
            host: h.host.clone(),
            chunks: chunks_read,
            rounds,
            parts: rotation.map(|r| r.last.saturating_sub(r.first).saturating_add(1)),
            first_part: rotation.map(|r| r.first),
            last_part: rotation.map(|r| r.last),
            parts_read: rotation.map(|r| r.read),
            one_part: rotation.is_some_and(|r| r.one_file),
        });
    }
    bad.sort_by(|a, b| (&a.session, a.index).cmp(&(&b.session, b.index)));
    let samples_read: u64 = read_per_cpu.values().fold(0, |a, &b| a.saturating_add(b));
    if problems {
        match unreadable {
            Some(n) if n > 0 => warnings.push(format!(
                "{n} samples are in unreadable chunks and not in this report (footer counts \
                 minus samples read)"
            )),
            None => warnings.push(
                "an unknown number of samples are in unreadable chunks (the session has no \
                 footer to count them)"
                    .to_owned(),
            ),
            _ => {}
        }
    }
    let cpus: Vec<CpuLoss> = cpus
        .into_iter()
        .map(|(cpu, (samples, lost))| CpuLoss {
            cpu,
            samples,
            lost,
            percent: percent(lost, samples.saturating_add(lost)),
        })
        .collect();
    let lost_total: u64 = cpus.iter().fold(0, |a, c| a.saturating_add(c.lost));
    let all: u64 = cpus
        .iter()
        .fold(lost_total, |a, c| a.saturating_add(c.samples));
    let first = sessions.first().map(|s| s.reader().header());
    let header = Header {
        sessions: infos,
        event: first.map(|h| h.event.name.clone()).unwrap_or_default(),
        frequency: first.and_then(|h| h.event.frequency),
        period: first.and_then(|h| h.event.period),
        call_graph: first.and_then(|h| CallGraphMode::of(&h.event)),
        cgroups: sessions
            .iter()
            .find_map(|s| match s.reader().header().cgroups {
                profkit_eventlog::CgroupSource::None => None,
                profkit_eventlog::CgroupSource::Sample => Some("sample"),
                profkit_eventlog::CgroupSource::Proc => Some("proc"),
            }),
        start_unix_ns: if start == u64::MAX { 0 } else { start },
        duration_ns: end.saturating_sub(start),
        window: windowed,
        samples_read,
        total_samples: 0,
        samples_unreadable: unreadable,
        cpus,
        lost_total,
        lost_percent: percent(lost_total, all),
        lost_source: match (with_footer, without_footer) {
            (_, 0) => "footer",
            (0, _) => "markers",
            _ => "footer and markers",
        }
        .to_owned(),
        stacks,
        bad_chunks: bad,
        off_cpu,
        off_cpu_accounting: (!windowed
            && sessions.iter().any(|s| s.reader().header().event.off_cpu))
        .then_some(off_cpu_counts),
        debuginfod: None,
    };
    (header, read_per_cpu)
}

/// Samples and losses per CPU per `per` rounds (`--timeline`).
pub(crate) fn timeline(
    sessions: &[Session],
    agg: &Aggregate,
    per: u32,
    spec: &ProfileSpec,
) -> Timeline {
    let cpus = timeline_cpus(sessions, agg, spec);
    let idx: HashMap<u32, usize> = cpus.iter().enumerate().map(|(i, &c)| (c, i)).collect();
    let mut out = Vec::new();
    for (i, s) in sessions.iter().enumerate() {
        // The time axis starts at the session's start (of a rotated one,
        // its first part's, even when deleted).
        let start = s.start().0;
        let mut lines: BTreeMap<u64, TimelineLine> = BTreeMap::new();
        let per = u64::from(per);
        let new_line = |bucket: u64| TimelineLine {
            first_round: bucket.saturating_mul(per),
            last_round: bucket.saturating_mul(per).saturating_add(per - 1),
            time_s: 0.0,
            samples: vec![0; cpus.len()],
            lost: vec![0; cpus.len()],
            unreadable_chunks: Vec::new(),
        };
        let mut seen_last: BTreeMap<u64, u64> = BTreeMap::new();
        let mut chunks: Vec<_> = agg.chunks.iter().filter(|c| c.sess == i as u32).collect();
        chunks.sort_by_key(|c| c.round);
        for c in chunks {
            let line = lines
                .entry(c.round / per)
                .or_insert_with(|| new_line(c.round / per));
            line.time_s = line.time_s.max(c.time.saturating_sub(start) as f64 / 1e9);
            let last = seen_last.entry(c.round / per).or_insert(c.round);
            *last = (*last).max(c.round);
            for &(cpu, n) in &c.kept {
                if let Some(&j) = idx.get(&cpu) {
                    add(&mut line.samples[j], n);
                }
            }
            for &(cpu, n) in &c.lost {
                if let Some(&j) = idx.get(&cpu) {
                    add(&mut line.lost[j], n);
                }
            }
        }
        for b in s.parts().iter().flat_map(|p| p.reader().bad_chunks()) {
            if let profkit_eventlog::BadReason::PayloadCrc { round, .. } = b.reason {
                lines
                    .entry(round / per)
                    .or_insert_with(|| new_line(round / per))
                    .unreadable_chunks
                    .push(b.index);
                let last = seen_last.entry(round / per).or_insert(round);
                *last = (*last).max(round);
            }
        }
        for (bucket, line) in lines.iter_mut() {
            line.last_round = seen_last.get(bucket).copied().unwrap_or(line.first_round);
        }
        out.push(SessionTimeline {
            session: s.reader().path().display().to_string(),
            lines: lines.into_values().collect(),
        });
    }
    Timeline {
        rounds_per_line: per,
        step_ns: None,
        cpus,
        sessions: out,
    }
}

/// The CPUs of a timeline: those claimed and those with data, as the spec
/// keeps them.
fn timeline_cpus(sessions: &[Session], agg: &Aggregate, spec: &ProfileSpec) -> Vec<u32> {
    let mut cpus: BTreeSet<u32> = sessions
        .iter()
        .flat_map(|s| s.claimed_cpus().iter().copied())
        .collect();
    for c in &agg.chunks {
        cpus.extend(c.read.iter().map(|&(cpu, _)| cpu));
        cpus.extend(c.lost.iter().map(|&(cpu, _)| cpu));
    }
    if !spec.cpus.is_empty() {
        cpus.retain(|c| spec.cpus.contains(c));
    }
    cpus.into_iter().collect()
}

/// Samples per CPU per `step` ns from each session's start, each sample
/// in the line of its own time ([`crate::aggregate::ChunkStat::buckets`]);
/// losses and unreadable chunks in the line of their round's time.
pub(crate) fn timeline_every(
    sessions: &[Session],
    agg: &Aggregate,
    step: u64,
    spec: &ProfileSpec,
) -> Timeline {
    let step = step.max(1);
    let cpus = timeline_cpus(sessions, agg, spec);
    let idx: HashMap<u32, usize> = cpus.iter().enumerate().map(|(i, &c)| (c, i)).collect();
    let mut out = Vec::new();
    for (i, s) in sessions.iter().enumerate() {
        let start = s.start().0;
        let line_of = |t: u64| (t.saturating_sub(start) / step).min(MAX_TIMELINE_LINES);
        let mut lines: BTreeMap<u64, TimelineLine> = BTreeMap::new();
        let mut round_time: BTreeMap<u64, u64> = BTreeMap::new();
        for c in agg.chunks.iter().filter(|c| c.sess == i as u32) {
            round_time.insert(c.round, c.time);
        }
        for c in agg.chunks.iter().filter(|c| c.sess == i as u32) {
            for &(l, cpu, n) in &c.buckets {
                if let Some(&j) = idx.get(&cpu) {
                    let e = timeline_line(&mut lines, l, c.round, step, cpus.len());
                    add(&mut e.samples[j], n);
                }
            }
            for &(cpu, n) in &c.lost {
                if let Some(&j) = idx.get(&cpu) {
                    let e = timeline_line(&mut lines, line_of(c.time), c.round, step, cpus.len());
                    add(&mut e.lost[j], n);
                }
            }
        }
        for b in s.parts().iter().flat_map(|p| p.reader().bad_chunks()) {
            if let profkit_eventlog::BadReason::PayloadCrc { round, .. } = b.reason {
                // Placed at the time of the nearest round read before it.
                let t = round_time
                    .range(..=round)
                    .next_back()
                    .map_or(start, |(_, &t)| t);
                timeline_line(&mut lines, line_of(t), round, step, cpus.len())
                    .unreadable_chunks
                    .push(b.index);
            }
        }
        out.push(SessionTimeline {
            session: s.reader().path().display().to_string(),
            lines: lines.into_values().collect(),
        });
    }
    Timeline {
        rounds_per_line: 0,
        step_ns: Some(step),
        cpus,
        sessions: out,
    }
}

/// Line `l` of a time-step timeline, made on first use; `round` joins its
/// rounds.
fn timeline_line(
    lines: &mut BTreeMap<u64, TimelineLine>,
    l: u64,
    round: u64,
    step: u64,
    ncpus: usize,
) -> &mut TimelineLine {
    let e = lines.entry(l).or_insert_with(|| TimelineLine {
        first_round: round,
        last_round: round,
        time_s: l.saturating_add(1).saturating_mul(step) as f64 / 1e9,
        samples: vec![0; ncpus],
        lost: vec![0; ncpus],
        unreadable_chunks: Vec::new(),
    });
    e.first_round = e.first_round.min(round);
    e.last_round = e.last_round.max(round);
    e
}

/// `*to += n`, saturating: counts in a session are the file's word, and a
/// forged one must not wrap a total into nonsense.
fn add(to: &mut u64, n: u64) {
    *to = to.saturating_add(n);
}
