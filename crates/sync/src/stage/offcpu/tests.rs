//! Unit tests of off-CPU intervals: pairing in time order whatever ring is
//! read first, across rounds, parts and stop; exits; bounds.

use super::*;
use crate::stage::{Chunk, SyncOptions};
use profkit_eventlog::decode_events;
use profkit_perf::{Layout, SimRecord, SimRing, PERF_CONTEXT_USER};

const MS: u64 = 1_000_000;
const PID: u32 = 100;
const TID: u32 = 101;
const APP: u64 = 0x40_0000;

fn layout() -> Layout {
    Layout {
        callchain: true,
        user_stack: 0,
        cgroup: false,
    }
}

/// A stage that knows process 100 (thread 101) with `/bin/app` mapped at
/// 0x400000.
fn stage() -> SyncStage {
    let mut st = SyncStage::new(SyncOptions::new(layout()));
    st.enable_offcpu();
    let mut ring = SimRing::new(0, 1 << 16, layout());
    for r in [
        SimRecord::Comm {
            pid: PID,
            tid: PID,
            comm: "app".into(),
            exec: true,
            time: 1,
        },
        SimRecord::Mmap2 {
            pid: PID,
            tid: PID,
            addr: APP,
            len: 0x10000,
            pgoff: 0,
            ino: 7,
            build_id: None,
            prot: 5,
            filename: "/bin/app".into(),
            time: 1,
        },
    ] {
        assert!(ring.push(&r));
    }
    st.begin_round(0);
    st.drain(&mut ring);
    st.finish_round();
    st
}

/// The switch-out of TID on `cpu` at `t`: its stack sample (user code
/// at `leaf`, called from 0x401000), then the switch record.
fn out(ring: &mut SimRing, t: u64, leaf: u64, preempt: bool) {
    assert!(ring.push(&SimRecord::Sample {
        ip: leaf,
        pid: PID,
        tid: TID,
        time: t,
        kernel: false,
        period: 1,
        callchain: vec![PERF_CONTEXT_USER, leaf, 0x40_1000],
    }));
    assert!(ring.push(&SimRecord::TaskSwitch {
        out: true,
        preempt,
        pid: PID,
        tid: TID,
        time: t + 1000,
    }));
}

fn switch_in(ring: &mut SimRing, t: u64) {
    assert!(ring.push(&SimRecord::TaskSwitch {
        out: false,
        preempt: false,
        pid: PID,
        tid: TID,
        time: t,
    }));
}

/// The OffCpu markers of a chunk.
fn intervals(c: &Chunk) -> Vec<Event> {
    let mut v = Vec::new();
    decode_events(&c.bytes, |e| {
        if matches!(e, Event::OffCpu { .. }) {
            v.push(e);
        }
    })
    .unwrap();
    v
}

/// (count, total_ns, kind, cpu, has a stack) of each marker.
fn summary(c: &Chunk) -> Vec<(u64, u64, OffCpuKind, u32, bool)> {
    intervals(c)
        .into_iter()
        .map(|e| match e {
            Event::OffCpu {
                count,
                total_ns,
                kind,
                cpu,
                stack,
                ..
            } => (count, total_ns, kind, cpu, stack.is_some()),
            _ => unreachable!(),
        })
        .collect()
}

fn round(st: &mut SyncStage, rings: &mut [&mut SimRing], now: u64) -> Chunk {
    st.begin_round(now);
    for r in rings.iter_mut() {
        st.drain_offcpu(*r);
    }
    st.finish_round()
}

#[test]
fn a_task_that_blocks_on_one_cpu_and_wakes_on_another_is_paired_whichever_ring_is_read_first() {
    for first in [0, 1] {
        let mut st = stage();
        let mut r0 = SimRing::new(0, 1 << 16, layout());
        let mut r1 = SimRing::new(1, 1 << 16, layout());
        out(&mut r0, 10 * MS, APP + 0x100, false);
        switch_in(&mut r1, 40 * MS);
        let c = if first == 0 {
            round(&mut st, &mut [&mut r0, &mut r1], 1000 * MS)
        } else {
            round(&mut st, &mut [&mut r1, &mut r0], 1000 * MS)
        };
        // 10 ms + 1 µs (the switch record after its stack sample) to 40 ms.
        assert_eq!(
            summary(&c),
            vec![(1, 30 * MS - 1000, OffCpuKind::Blocked, 0, true)],
            "ring {first} read first"
        );
        let e = &intervals(&c)[0];
        let Event::OffCpu {
            pid,
            tid,
            cookie,
            offset,
            kernel,
            ..
        } = e
        else {
            unreachable!()
        };
        assert_eq!((*pid, *tid, *offset, *kernel), (PID, TID, 0x100, false));
        assert_ne!(*cookie, COOKIE_UNKNOWN);
        let a = st.accounting();
        assert_eq!(a[0].offcpu_switches, 1);
        assert_eq!(a[0].offcpu_intervals, 1);
        assert_eq!(a.iter().map(|a| a.offcpu_unpaired).sum::<u64>(), 0);
    }
}

#[test]
fn a_switch_in_read_a_round_before_its_switch_out_waits_for_it() {
    let mut st = stage();
    let mut r0 = SimRing::new(0, 1 << 16, layout());
    let mut r1 = SimRing::new(1, 1 << 16, layout());
    // Round 1 starts at 30 ms: CPU 1's ring already holds the switch-in
    // at 40 ms, CPU 0's the switch-out at 10 ms only next round (it was
    // written after that ring's drain).
    switch_in(&mut r1, 40 * MS);
    let c1 = round(&mut st, &mut [&mut r0, &mut r1], 30 * MS);
    assert!(intervals(&c1).is_empty());
    assert_eq!(st.offcpu_sizes().pending, 1);
    out(&mut r0, 10 * MS, APP + 0x100, false);
    let c2 = round(&mut st, &mut [&mut r0, &mut r1], 1000 * MS);
    assert_eq!(
        summary(&c2),
        vec![(1, 30 * MS - 1000, OffCpuKind::Blocked, 0, true)]
    );
    assert_eq!(st.offcpu_sizes(), OffCpuSizes::default());
}

#[test]
fn intervals_of_one_task_and_stack_in_a_round_are_one_marker_and_kinds_are_apart() {
    let mut st = stage();
    let mut r0 = SimRing::new(0, 1 << 16, layout());
    for i in 0..5 {
        let t = i * 10 * MS;
        out(&mut r0, t + MS, APP + 0x100, false);
        switch_in(&mut r0, t + 3 * MS);
    }
    out(&mut r0, 60 * MS, APP + 0x200, true);
    switch_in(&mut r0, 61 * MS);
    let c = round(&mut st, &mut [&mut r0], 1000 * MS);
    let mut s = summary(&c);
    s.sort();
    assert_eq!(
        s,
        vec![
            (1, MS - 1000, OffCpuKind::Runnable, 0, true),
            (5, 5 * (2 * MS - 1000), OffCpuKind::Blocked, 0, true),
        ]
    );
}

#[test]
fn a_wait_open_at_stop_is_closed_at_the_stop() {
    let mut st = stage();
    let mut r0 = SimRing::new(0, 1 << 16, layout());
    out(&mut r0, 10 * MS, APP + 0x100, false);
    // Stop: the last round pairs everything and closes what is open.
    st.begin_round(500 * MS);
    st.drain_offcpu(&mut r0);
    let c = st.finish_final_round();
    assert_eq!(
        summary(&c),
        vec![(1, 490 * MS - 1000, OffCpuKind::Blocked, 0, true)]
    );
    assert_eq!(st.offcpu_sizes(), OffCpuSizes::default());
}

#[test]
fn a_rotation_in_the_middle_of_a_wait_counts_each_part_its_share_with_its_own_stack_ids() {
    let mut st = stage();
    let mut r0 = SimRing::new(0, 1 << 16, layout());
    out(&mut r0, 10 * MS, APP + 0x100, false);
    st.close_offcpu_intervals_next_round();
    let c1 = round(&mut st, &mut [&mut r0], 100 * MS);
    // Closed at the horizon: the round's start less the margin.
    let at = 100 * MS - HORIZON_MARGIN_NS;
    assert_eq!(
        summary(&c1),
        vec![(1, at - (10 * MS + 1000), OffCpuKind::Blocked, 0, true)]
    );
    st.new_part();
    switch_in(&mut r0, 150 * MS);
    let c2 = round(&mut st, &mut [&mut r0], 1000 * MS);
    assert_eq!(
        summary(&c2),
        vec![(1, 150 * MS - at, OffCpuKind::Blocked, 0, true)]
    );
    // The new part defines the stack (and its cookie) again.
    let mut defs = 0;
    decode_events(&c2.bytes, |e| {
        defs += usize::from(matches!(e, Event::StackDef { .. } | Event::CookieDef(_)));
    })
    .unwrap();
    assert!(defs >= 2, "{defs} definitions in the new part");
    // Both parts together: the whole wait.
    let total: u64 = [&c1, &c2]
        .iter()
        .flat_map(|c| summary(c))
        .map(|s| s.1)
        .sum();
    assert_eq!(total, 150 * MS - (10 * MS + 1000));
}

#[test]
fn a_dying_tasks_last_switch_out_is_not_a_wait() {
    let mut st = stage();
    let mut main = SimRing::new(0, 1 << 16, layout());
    let mut r0 = SimRing::new(0, 1 << 16, layout());
    assert!(main.push(&SimRecord::Exit {
        pid: PID,
        ppid: 1,
        tid: TID,
        ptid: 1,
        time: 50 * MS,
    }));
    // It blocks in its exit path, runs again, then switches out for good.
    out(&mut r0, 51 * MS, APP + 0x100, false);
    switch_in(&mut r0, 52 * MS);
    out(&mut r0, 53 * MS, APP + 0x100, false);
    st.begin_round(500 * MS);
    st.drain(&mut main);
    st.drain_offcpu(&mut r0);
    let c = st.finish_final_round();
    assert!(intervals(&c).is_empty(), "{:?}", intervals(&c));
}

#[test]
fn a_switch_out_whose_stack_was_not_recorded_is_counted_without_one() {
    let mut st = stage();
    let mut r0 = SimRing::new(0, 1 << 16, layout());
    // The stack sample was throttled: only the switch records.
    assert!(r0.push(&SimRecord::TaskSwitch {
        out: true,
        preempt: false,
        pid: PID,
        tid: TID,
        time: 10 * MS,
    }));
    switch_in(&mut r0, 20 * MS);
    let c = round(&mut st, &mut [&mut r0], 1000 * MS);
    assert_eq!(
        summary(&c),
        vec![(1, 10 * MS, OffCpuKind::Blocked, 0, false)]
    );
    let Event::OffCpu { cookie, .. } = intervals(&c)[0] else {
        unreachable!()
    };
    assert_eq!(cookie, COOKIE_UNKNOWN);
    assert_eq!(st.accounting()[0].offcpu_no_stack, 1);
}

/// Hostile input: switch records out of order, a switch-in before its
/// switch-out, two switch-outs in a row: no negative interval, every odd
/// record counted as unpaired.
#[test]
fn out_of_order_and_unpaired_switches_make_no_negative_interval() {
    let mut st = stage();
    let mut r0 = SimRing::new(0, 1 << 16, layout());
    switch_in(&mut r0, 40 * MS);
    out(&mut r0, 50 * MS, APP + 0x100, false);
    out(&mut r0, 60 * MS, APP + 0x100, false);
    switch_in(&mut r0, 70 * MS);
    let c = round(&mut st, &mut [&mut r0], 1000 * MS);
    assert_eq!(
        summary(&c),
        vec![(1, 10 * MS - 1000, OffCpuKind::Blocked, 0, true)]
    );
    assert_eq!(st.accounting()[0].offcpu_unpaired, 2);
}

/// Hostile input: a storm of switch records from ever new tasks (a fork
/// storm) keeps the waiting records and the open intervals under their
/// bounds, and counts what it drops.
#[test]
fn a_storm_of_new_tasks_stays_within_the_bounds_and_counts_the_rest() {
    let storm = |st: &mut SyncStage, n: u32| {
        for i in 0..n {
            st.record_offcpu(
                0,
                &Record::Switch {
                    out: true,
                    preempt: false,
                    next_prev: None,
                    sid: profkit_perf::SampleId {
                        pid: 1000 + i,
                        tid: 1000 + i,
                        time: 1000 * MS + u64::from(i),
                        cpu: 0,
                    },
                },
            );
        }
    };
    // More waits than may be open: the rest dropped and counted.
    let mut st = stage();
    storm(&mut st, (MAX_OPEN + 5) as u32);
    st.begin_round(10_000 * MS);
    assert!(intervals(&st.finish_round()).is_empty());
    assert_eq!(st.offcpu_sizes().open, MAX_OPEN);
    assert_eq!(st.accounting()[0].offcpu_dropped, 5);
    // More records than may wait: the rest dropped and counted, and,
    // since a dropped record may be a switch-in, no wait open then is
    // measured (counted as not measurable).
    let mut st = stage();
    storm(&mut st, (MAX_PENDING + 10) as u32);
    assert_eq!(st.offcpu_sizes().pending, MAX_PENDING);
    assert_eq!(st.accounting()[0].offcpu_dropped, 10);
    st.begin_round(10_000 * MS);
    assert!(intervals(&st.finish_round()).is_empty());
    assert_eq!(st.offcpu_sizes(), OffCpuSizes::default());
    let a = &st.accounting()[0];
    assert_eq!(a.offcpu_dropped, 10 + (MAX_PENDING - MAX_OPEN) as u64);
    assert_eq!(a.offcpu_unpaired, MAX_OPEN as u64);
}

/// A thread id used again after its task exited (within the two seconds
/// exits are remembered) is a new task: its switch-outs are waits again,
/// the dead task's are not.
#[test]
fn a_thread_id_used_again_after_an_exit_waits_again() {
    let mut st = stage();
    let mut main = SimRing::new(0, 1 << 16, layout());
    let mut r0 = SimRing::new(0, 1 << 16, layout());
    assert!(main.push(&SimRecord::Exit {
        pid: PID,
        ppid: 1,
        tid: TID,
        ptid: 1,
        time: 50 * MS,
    }));
    assert!(main.push(&SimRecord::Fork {
        pid: PID,
        ppid: PID,
        tid: TID,
        ptid: PID,
        time: 60 * MS,
    }));
    // The dead task's last switch-out, then the new task's wait.
    out(&mut r0, 51 * MS, APP + 0x100, false);
    out(&mut r0, 70 * MS, APP + 0x100, false);
    switch_in(&mut r0, 80 * MS);
    st.begin_round(1000 * MS);
    st.drain(&mut main);
    st.drain_offcpu(&mut r0);
    let c = st.finish_round();
    assert_eq!(
        summary(&c),
        vec![(1, 10 * MS - 1000, OffCpuKind::Blocked, 0, true)]
    );
}

/// Records the kernel dropped may hold a switch-in: an interval open
/// across a loss is not measured (it would take in time its task ran),
/// and counted as unpaired; the loss itself is counted.
#[test]
fn an_interval_open_across_a_kernel_loss_is_not_measured() {
    let mut st = stage();
    let mut r0 = SimRing::new(0, 1 << 16, layout());
    out(&mut r0, 10 * MS, APP + 0x100, false);
    switch_in(&mut r0, 30 * MS);
    st.begin_round(1000 * MS);
    st.drain_offcpu(&mut r0);
    st.record_offcpu(
        1,
        &Record::Lost {
            id: 0,
            lost: 3,
            sid: profkit_perf::SampleId {
                pid: 0,
                tid: 0,
                time: 20 * MS,
                cpu: 1,
            },
        },
    );
    let c = st.finish_round();
    assert!(intervals(&c).is_empty(), "{:?}", intervals(&c));
    let a = st.accounting();
    let sum = |f: fn(&profkit_eventlog::CpuAccounting) -> u64| a.iter().map(f).sum::<u64>();
    assert_eq!(sum(|a| a.offcpu_lost), 3);
    // The interval dropped at the loss, then its switch-in unpaired.
    assert_eq!(sum(|a| a.offcpu_unpaired), 2);
}

/// A round that could not be stored takes its waits with it: they move
/// from written to dropped, nothing silent.
#[test]
fn the_waits_of_a_dropped_round_are_counted_as_dropped() {
    let mut st = stage();
    let mut r0 = SimRing::new(0, 1 << 16, layout());
    out(&mut r0, 10 * MS, APP + 0x100, false);
    switch_in(&mut r0, 20 * MS);
    out(&mut r0, 30 * MS, APP + 0x100, false);
    switch_in(&mut r0, 40 * MS);
    let c = round(&mut st, &mut [&mut r0], 1000 * MS);
    assert_eq!(c.offcpu, vec![(0, 2)]);
    assert_eq!(st.accounting()[0].offcpu_intervals, 2);
    st.chunk_dropped(c, profkit_eventlog::LostKind::Overflow);
    let a = &st.accounting()[0];
    assert_eq!((a.offcpu_intervals, a.offcpu_dropped), (0, 2));
}

/// The kernel's lost count read back at stop above the LOST records seen
/// (records lost while a ring was full at the end) is counted, and the
/// waits open then are not measured.
#[test]
fn a_loss_known_only_from_the_kernels_count_is_reconciled_at_stop() {
    let mut st = stage();
    let mut r0 = SimRing::new(0, 1 << 16, layout());
    out(&mut r0, 10 * MS, APP + 0x100, false);
    st.begin_round(500 * MS);
    st.drain_offcpu(&mut r0);
    st.reconcile_offcpu(&[(0, 7)]);
    let c = st.finish_final_round();
    assert!(intervals(&c).is_empty(), "{:?}", intervals(&c));
    let a = &st.accounting()[0];
    assert_eq!((a.offcpu_lost, a.offcpu_kernel_lost), (7, 7));
    assert_eq!(a.offcpu_unpaired, 1);
}
