use super::*;

const DWARF: RingMode = RingMode::Dwarf { stack_bytes: 8192 };

fn need(cpus: u32, rate_hz: u64, mode: RingMode) -> RingNeed {
    RingNeed {
        cpus,
        rate_hz,
        mode,
        sync_interval_ms: 250,
        page_size: 4096,
    }
}

const ROOT: LockLimit = LockLimit::Budget {
    bytes: ROOT_LOCK_BUDGET,
};

fn mlock(kb_per_cpu: u64, online_cpus: u32) -> LockLimit {
    LockLimit::Mlock {
        kb_per_cpu,
        online_cpus,
    }
}

fn refused(need: RingNeed, limit: LockLimit) -> (String, u64, u64) {
    match ring_plan(need, limit) {
        Err(Error::LockedMemory {
            message,
            allowed_bytes,
            needed_bytes,
            cpus,
        }) => {
            assert_eq!(cpus, need.cpus);
            (message, allowed_bytes, needed_bytes)
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn record_sizes_follow_the_layout() {
    use crate::Layout;
    let flat = Layout::default();
    assert_eq!(RingMode::of(flat), RingMode::Flat);
    let fp = Layout {
        callchain: true,
        ..flat
    };
    assert_eq!(RingMode::of(fp), RingMode::FramePointers);
    let dwarf = Layout {
        callchain: true,
        user_stack: 4096,
        cgroup: false,
    };
    assert_eq!(RingMode::of(dwarf), RingMode::Dwarf { stack_bytes: 4096 });
    // The flat record is exactly what the encoder writes.
    let mut v = Vec::new();
    let s = crate::SampleParts {
        ip: 1,
        pid: 2,
        tid: 2,
        time: 3,
        cpu: 0,
        period: 1,
        cpumode: crate::misc::USER,
        cgroup: 0,
        user: Default::default(),
    };
    flat.encode_sample(&s, std::iter::empty(), &mut v);
    assert_eq!(8 + v.len() as u64, RingMode::Flat.record_bytes());
    // 64 frames: nr and 64 entries more.
    v.clear();
    fp.encode_sample(&s, std::iter::repeat_n(0x400000, 64), &mut v);
    assert_eq!(8 + v.len() as u64, RingMode::FramePointers.record_bytes());
    assert_eq!(DWARF.record_bytes(), 8352);
    assert_eq!(DWARF.to_string(), "dwarf,8192");
}

#[test]
fn two_cpus_keep_the_rings_they_had() {
    // Flat: the 512 KiB default (two intervals need 94 KiB).
    let p = ring_plan(need(2, 4000, RingMode::Flat), ROOT).unwrap();
    assert_eq!((p.pages, p.reason), (128, RingReason::TwoIntervals));
    assert_eq!(p.drain_every_ms(), 250.0);
    assert_eq!(
        p.to_string(),
        "rings of 512 KiB × 2 CPUs = 1032 KiB locked, because flat samples (48 bytes each) at \
         4000 Hz fill a 512 KiB ring in 2.7 s, two 250 ms sync intervals or more, within \
         profkit's budget of 512 MiB for a user the kernel does not limit"
    );
    // DWARF: two intervals of 8 KiB stacks, 16 MiB, as `DwarfRing` chose.
    let p = ring_plan(need(2, 4000, DWARF), ROOT).unwrap();
    assert_eq!((p.pages, p.ring_bytes()), (4096, 16 << 20));
    assert_eq!(p.reason, RingReason::TwoIntervals);
    // And within the unprivileged default, flat rings are unchanged.
    let p = ring_plan(need(2, 4000, RingMode::Flat), mlock(516, 2)).unwrap();
    assert_eq!((p.pages, p.reason), (128, RingReason::TwoIntervals));
}

#[test]
fn flat_rings_on_256_cpus_fit_both_limits() {
    for limit in [ROOT, mlock(516, 256)] {
        let p = ring_plan(need(256, 4000, RingMode::Flat), limit).unwrap();
        assert_eq!((p.pages, p.reason), (128, RingReason::TwoIntervals));
        assert_eq!(p.locked_bytes(), 129 << 20);
        assert!(p
            .to_string()
            .starts_with("rings of 512 KiB × 256 CPUs = 129 MiB locked, because flat samples"));
        // A round could take 2.5 s before a ring overflowed.
        assert!((p.loss_after_round_ms() - 2480.0).abs() < 1.0, "{p:?}");
    }
}

#[test]
fn frame_pointer_rings_on_256_cpus_shrink_to_the_limit() {
    // Two intervals of 568-byte samples at 4 kHz: 1.1 MB, a 2 MiB ring;
    // 256 of them and their control pages are past 512 MiB: 1 MiB rings,
    // drained when half full, every 231 ms.
    let p = ring_plan(need(256, 4000, RingMode::FramePointers), ROOT).unwrap();
    assert_eq!((p.wanted_pages, p.pages), (512, 256));
    assert_eq!(p.reason, RingReason::Watermark);
    assert!(p.locked_bytes() <= ROOT_LOCK_BUDGET);
    assert!((p.drain_every_ms() - 230.8).abs() < 0.1, "{p:?}");
    assert!(
        p.to_string().ends_with(
            "(2 MiB wanted; profkit's budget of 512 MiB for a user the kernel does not limit \
             allows this): drained when half full, every 230.8 ms"
        ),
        "{p}"
    );
    // Smaller than the default ring, still two intervals: flat samples
    // with a 260 KiB allowance.
    let p = ring_plan(need(256, 4000, RingMode::Flat), mlock(260, 256)).unwrap();
    assert_eq!((p.pages, p.reason), (64, RingReason::Limited));
    assert!(
        p.to_string().ends_with(
            "two 250 ms sync intervals or more (512 KiB wanted; kernel.perf_event_mlock_kb = \
             260 KiB per CPU allows this)"
        ),
        "{p}"
    );
    // Unprivileged, 512 KiB: the watermark drains them every 115 ms.
    let p = ring_plan(need(256, 4000, RingMode::FramePointers), mlock(516, 256)).unwrap();
    assert_eq!((p.pages, p.reason), (128, RingReason::Watermark));
    assert!((p.drain_every_ms() - 115.4).abs() < 0.1, "{p:?}");
    assert!(
        p.to_string()
            .contains("drained when half full, every 115.4 ms"),
        "{p}"
    );
}

#[test]
fn dwarf_on_64_cpus_drains_more_often_within_the_budget() {
    let p = ring_plan(need(64, 4000, DWARF), ROOT).unwrap();
    // 512 MiB / 64 CPUs = 8 MiB with the control page: a 4 MiB ring.
    assert_eq!((p.wanted_pages, p.pages), (4096, 1024));
    assert_eq!(p.reason, RingReason::Watermark);
    assert!(p.locked_bytes() <= ROOT_LOCK_BUDGET);
    assert!((p.fill_ms() - 125.5).abs() < 0.1, "{p:?}");
    assert!((p.drain_every_ms() - 62.8).abs() < 0.1, "{p:?}");
    assert_eq!(
        p.to_string(),
        "rings of 4 MiB × 64 CPUs = 256.2 MiB locked, because dwarf,8192 samples (8352 bytes \
         each) at 4000 Hz fill a 4 MiB ring in 125.5 ms, less than two 250 ms sync intervals \
         (16 MiB wanted; profkit's budget of 512 MiB for a user the kernel does not limit \
         allows this): drained when half full, every 62.8 ms"
    );
}

#[test]
fn dwarf_on_256_cpus_with_a_small_mlock_limit_says_what_to_raise() {
    // 516 KiB per CPU: 512 KiB rings, full in 15.7 ms.
    let (m, allowed, needed) = refused(need(256, 4000, DWARF), mlock(516, 256));
    assert_eq!((allowed, needed), (512 << 10, 2 << 20));
    assert_eq!(
        m,
        "dwarf,8192 samples (8352 bytes each) at 4000 Hz on 256 CPUs: \
         kernel.perf_event_mlock_kb = 516 KiB per CPU allows rings of 512 KiB per CPU, which \
         fill in 15.7 ms and would be drained every 7.8 ms (at least 25 ms between rounds is \
         needed); raise kernel.perf_event_mlock_kb to 2052 for rings of 2 MiB (513 MiB in \
         all), or run as root; or lower -F to 1255, copy less with --call-graph dwarf,SIZE, or \
         use -C"
    );
    // What it says works: that sysctl, or that rate.
    let p = ring_plan(need(256, 4000, DWARF), mlock(2052, 256)).unwrap();
    assert_eq!((p.pages, p.reason), (512, RingReason::Watermark));
    assert!(p.drain_every_ms() >= MIN_DRAIN_MS as f64);
    let p = ring_plan(need(256, 1255, DWARF), mlock(516, 256)).unwrap();
    assert!(p.drain_every_ms() >= MIN_DRAIN_MS as f64, "{p:?}");
    assert!(ring_plan(need(256, 1256, DWARF), mlock(516, 256)).is_err());
    // On 2 CPUs too (what an unprivileged `record --call-graph dwarf` meets).
    let (m, _, _) = refused(need(2, 4000, DWARF), mlock(516, 2));
    assert!(
        m.contains("raise kernel.perf_event_mlock_kb to 2052"),
        "{m}"
    );
}

#[test]
fn dwarf_on_256_cpus_as_root_is_past_the_budget() {
    let (m, allowed, needed) = refused(need(256, 4000, DWARF), ROOT);
    assert_eq!((allowed, needed), (1 << 20, 2 << 20));
    assert!(
        m.ends_with(
            "give --buffer-pages 512 for rings of 2 MiB (513 MiB in all, past the budget); or \
             lower -F to 2510, copy less with --call-graph dwarf,SIZE, or use -C"
        ),
        "{m}"
    );
    assert!(ring_plan(need(256, 2510, DWARF), ROOT).is_ok());
    assert!(ring_plan(need(256, 2511, DWARF), ROOT).is_err());
    // 2 KiB stacks fit at 4 kHz.
    let small = RingMode::Dwarf { stack_bytes: 2048 };
    let p = ring_plan(need(256, 4000, small), ROOT).unwrap();
    assert!(p.drain_every_ms() >= MIN_DRAIN_MS as f64, "{p:?}");
}

#[test]
fn a_cpu_subset_shares_the_whole_allowance() {
    // The kernel multiplies perf_event_mlock_kb by the online CPUs: 4
    // rings of 256 may each take a 64th of it.
    let p = ring_plan(need(4, 4000, DWARF), mlock(516, 256)).unwrap();
    assert_eq!((p.pages, p.reason), (4096, RingReason::TwoIntervals));
    assert!(p.locked_bytes() <= mlock(516, 256).total_bytes());
}

#[test]
fn no_ring_at_all_or_one_too_small_for_a_sample_is_refused() {
    let big = RingMode::Dwarf { stack_bytes: 65528 };
    let (m, allowed, _) = refused(need(256, 1, big), mlock(8, 256));
    assert_eq!(allowed, 4096);
    assert!(
        m.ends_with("or copy less stack with --call-graph dwarf,SIZE"),
        "{m}"
    );
    let (m, allowed, _) = refused(need(4096, 4000, RingMode::Flat), mlock(4, 4096));
    assert_eq!(allowed, 0);
    assert!(m.ends_with("or record on fewer CPUs (-C)"), "{m}");
}

#[test]
fn rings_are_capped_and_rates_cannot_overflow() {
    let p = ring_plan(
        need(1, 4000, RingMode::Dwarf { stack_bytes: 65528 }),
        LockLimit::Budget { bytes: u64::MAX },
    )
    .unwrap();
    assert_eq!((p.ring_bytes(), p.capped), (MAX_RING_BYTES, true));
    assert_eq!(p.reason, RingReason::Watermark);
    assert!(
        p.to_string()
            .contains("(128 MiB wanted; the 64 MiB cap per ring allows this)"),
        "{p}"
    );
    assert!(ring_plan(need(u32::MAX, u64::MAX, DWARF), ROOT).is_err());
    let p = ring_plan(need(2, 0, RingMode::Flat), ROOT).unwrap();
    assert_eq!((p.pages, p.fill_ms()), (128, f64::INFINITY));
}

#[test]
fn the_limit_is_read_from_proc() {
    let d = std::env::temp_dir().join(format!("profkit-plan-{}", std::process::id()));
    let sys = d.join("sys/kernel");
    std::fs::create_dir_all(&sys).unwrap();
    std::fs::create_dir_all(d.join("self")).unwrap();
    let status = |uid: u32, cap: &str| {
        std::fs::write(
            d.join("self/status"),
            format!("Name:\tx\nUid:\t{uid}\t{uid}\t{uid}\t{uid}\nCapEff:\t{cap}\n"),
        )
        .unwrap()
    };
    std::fs::write(sys.join("perf_event_paranoid"), "2\n").unwrap();
    std::fs::write(sys.join("perf_event_mlock_kb"), "2052\n").unwrap();
    status(1000, "0000000000000000");
    assert_eq!(LockLimit::of_process_in(&d, 256), mlock(2052, 256));
    // CAP_IPC_LOCK (bit 14), uid 0, paranoid -1: profkit's budget.
    status(1000, "0000000000004000");
    assert_eq!(LockLimit::of_process_in(&d, 256), ROOT);
    status(0, "0000000000000000");
    assert_eq!(LockLimit::of_process_in(&d, 256), ROOT);
    status(1000, "0000000000000000");
    std::fs::write(sys.join("perf_event_paranoid"), "-1\n").unwrap();
    assert_eq!(LockLimit::of_process_in(&d, 256), ROOT);
    // An unreadable sysctl: the kernel's default.
    std::fs::write(sys.join("perf_event_paranoid"), "2\n").unwrap();
    std::fs::remove_file(sys.join("perf_event_mlock_kb")).unwrap();
    assert_eq!(LockLimit::of_process_in(&d, 8), mlock(DEFAULT_MLOCK_KB, 8));
    assert_eq!(mlock(516, 8).total_bytes(), 516 * 1024 * 8);
    std::fs::remove_dir_all(&d).unwrap();
}
