//! Unit tests of the whole pipeline on small sessions written here with
//! `profkit_eventlog::SessionWriter`: every number is known in advance.

use std::path::PathBuf;

use profkit_eventlog::*;

use crate::*;

const APP: Cookie = 0xa;
const LIBC: Cookie = 0xb;
const KERNEL: Cookie = 0xc;
const OTHER: Cookie = 0xd;
const MODULE: Cookie = 0xe;
const ANON: Cookie = 0xf;
const KBASE: u64 = 0xffff_ffff_a000_0000;

fn def(cookie: Cookie, kind: CookieKind, path: &str, base: u64, pid: Option<u32>) -> Event {
    Event::CookieDef(CookieEntry {
        cookie,
        kind,
        path: path.into(),
        build_id: None,
        dev: 0,
        inode: 0,
        generation: 0,
        base,
        pid,
    })
}

fn comm(pid: u32, tid: u32, name: &str, exec: bool) -> Event {
    Event::Comm {
        pid,
        tid,
        comm: name.into(),
        exec,
    }
}

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/symbols")
        .join(name)
}

/// Writes a session: `chunks` of (markers, samples (cpu, pid, tid, kernel,
/// cookie, offset, count)); a footer when `footer` is given.
type S = (u32, u32, u32, bool, Cookie, u64, u32);

fn write_session(
    dir: &std::path::Path,
    chunks: &[(Vec<Event>, Vec<S>)],
    footer: Option<SessionFooter>,
) -> PathBuf {
    let header = SessionHeader {
        host: "test".into(),
        event: EventConfigDesc {
            name: "cpu-clock".into(),
            frequency: Some(1000),
            ..Default::default()
        },
        cpus: vec![0, 1],
        start_time_unix_ns: 1_795_379_395_000_000_000,
        start_monotonic_ns: 1_000_000_000,
        sync_interval_ms: 250,
        target: "command app".into(),
        ..Default::default()
    };
    let path = dir.join(SESSION_FILE);
    let mut w = SessionWriter::create(&path, &header).unwrap();
    for (round, (markers, samples)) in chunks.iter().enumerate() {
        let mut enc = ChunkEncoder::new();
        for m in markers {
            enc.event(m);
        }
        for &(cpu, pid, tid, kernel, cookie, offset, n) in samples {
            for _ in 0..n {
                enc.sample(cpu, pid, tid, kernel, cookie, offset);
            }
        }
        let time = 1_000_000_000 + (round as u64 + 1) * 250_000_000;
        w.append_chunk(round as u64, time, enc.bytes()).unwrap();
    }
    if let Some(f) = footer {
        w.write_footer(&f).unwrap();
    }
    path
}

/// The standard session: an app with a worker thread, libc, kernel, a
/// module, anon code, an idle kernel thread, another process, and losses.
fn standard(dir: &std::path::Path, with_footer: bool) -> PathBuf {
    let chunk0 = (
        vec![
            def(APP, CookieKind::User, "/usr/bin/app", 0, None),
            def(LIBC, CookieKind::User, "/usr/lib/libc.so.6", 0, None),
            def(KERNEL, CookieKind::Kernel, "[kernel.kallsyms]", KBASE, None),
            def(
                MODULE,
                CookieKind::Module,
                "[fixture_mod]",
                0xffff_ffff_c040_0000,
                None,
            ),
            comm(10, 10, "app", true),
            comm(10, 11, "worker", false),
            Event::ModuleLoad {
                cookie: APP,
                start: 0x5000,
                end: 0x6000,
                pgoff: 0,
                pid: Some(10),
            },
        ],
        vec![
            (0, 10, 10, false, APP, 0x100, 6),
            (0, 10, 10, false, LIBC, 0x200, 2),
            (1, 10, 11, false, APP, 0x100, 3),
            (1, 10, 11, true, KERNEL, 0x210, 1),
            (1, 10, 11, true, MODULE, 0x110, 1),
            (1, 0, 0, true, KERNEL, 0x60, 4),
        ],
    );
    let chunk1 = (
        vec![
            def(OTHER, CookieKind::User, "/opt/other", 0, None),
            def(ANON, CookieKind::Anon, "//anon", 0, Some(4242)),
            comm(20, 20, "other", true),
            comm(4242, 4242, "node", true),
            Event::Lost {
                cpu: 1,
                kind: LostKind::Ring,
                count: 5,
            },
        ],
        vec![
            (0, 20, 20, false, OTHER, 0x10, 4),
            (0, 4242, 4242, false, ANON, 0x7f3c_0000_1010, 2),
        ],
    );
    let footer = with_footer.then(|| SessionFooter {
        end_time_unix_ns: 1_795_379_395_600_000_000,
        end_monotonic_ns: 1_600_000_000,
        rounds: 2,
        accounting: vec![
            CpuAccounting {
                cpu: 0,
                samples_written: 14,
                ..Default::default()
            },
            CpuAccounting {
                cpu: 1,
                samples_written: 9,
                lost_ring: 5,
                ..Default::default()
            },
        ],
    });
    write_session(dir, &[chunk0, chunk1], footer)
}

fn sources() -> SymbolSources {
    SymbolSources {
        kallsyms: Some(fixture("kallsyms")),
        ..Default::default()
    }
}

fn report_with(path: &std::path::Path, opts: ReportOptions) -> Report {
    let s = Session::open(path).unwrap();
    build_report(&[s], &opts, &sources(), &NoProgress).unwrap()
}

fn rows(r: &Report) -> Vec<(String, Option<String>, u64)> {
    r.rows
        .iter()
        .map(|r| (r.image.clone(), r.symbol.clone(), r.total))
        .collect()
}

fn text(r: &Report) -> String {
    let mut out = Vec::new();
    write_text(r, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn image_summary_counts_every_binary() {
    let d = tempfile::tempdir().unwrap();
    standard(d.path(), true);
    let r = report_with(d.path(), ReportOptions::default());
    assert_eq!(r.header.total_samples, 23);
    assert_eq!(r.header.samples_read, 23);
    assert_eq!(r.header.samples_unreadable, Some(0));
    assert_eq!(
        rows(&r),
        [
            ("app".to_owned(), None, 9),
            ("[kernel.kallsyms]".to_owned(), None, 5),
            ("other".to_owned(), None, 4),
            ("anon (tgid:4242)".to_owned(), None, 2),
            ("libc.so.6".to_owned(), None, 2),
            ("[fixture_mod]".to_owned(), None, 1),
        ]
    );
    let pct: f64 = r.rows.iter().map(|r| r.total_percent).sum();
    assert!((pct - 100.0).abs() < 1e-9);
    assert_eq!(r.header.lost_total, 5);
    assert_eq!(r.header.lost_source, "footer");
    let cpu1 = &r.header.cpus[1];
    assert_eq!((cpu1.cpu, cpu1.samples, cpu1.lost), (1, 9, 5));
    assert!((cpu1.percent - 5.0 * 100.0 / 14.0).abs() < 1e-9);
    let t = text(&r);
    assert!(
        t.contains("warning: cpu1 lost 35.714 % of its samples (5 of 14)"),
        "{t}"
    );
    assert!(
        t.contains("Event:    cpu-clock, sampled at 1000 Hz per CPU"),
        "{t}"
    );
    assert!(
        t.contains("Time:     2026-11-22 20:29:55 UTC, 0.600 s"),
        "{t}"
    );
}

#[test]
fn symbols_resolve_kernel_module_and_perf_map_and_group_the_rest() {
    let d = tempfile::tempdir().unwrap();
    standard(d.path(), true);
    std::fs::copy(fixture("perf-4242.map"), d.path().join("perf-4242.map")).unwrap();
    let r = report_with(
        d.path(),
        ReportOptions {
            symbols: true,
            show_address: true,
            ..Default::default()
        },
    );
    let got = rows(&r);
    let find = |image: &str, sym: &str| {
        got.iter()
            .find(|(i, s, _)| i == image && s.as_deref() == Some(sym))
            .map(|x| x.2)
    };
    assert_eq!(find("app", NO_SYMBOLS), Some(9), "{got:?}");
    assert_eq!(
        find("[kernel.kallsyms]", "do_one_initcall"),
        Some(4),
        "{got:?}"
    );
    assert_eq!(find("[kernel.kallsyms]", "schedule"), Some(1), "{got:?}");
    assert_eq!(
        find("[fixture_mod]", "fixture_mod_write"),
        Some(1),
        "{got:?}"
    );
    assert_eq!(
        find("anon (tgid:4242)", "LazyCompile:*fib /app/fib.js:3"),
        Some(2)
    );
    let sched = r
        .rows
        .iter()
        .find(|r| r.symbol.as_deref() == Some("schedule"));
    assert_eq!(sched.unwrap().vma, Some(KBASE + 0x200));
    assert!(
        r.warnings.iter().any(|w| w.contains("/usr/bin/app")),
        "{:?}",
        r.warnings
    );
    let t = text(&r);
    assert!(t.contains("vma"), "{t}");
    assert!(t.contains("ffffffffa0000200"), "{t}");
}

#[test]
fn separate_cpu_gives_per_cpu_percentages() {
    let d = tempfile::tempdir().unwrap();
    standard(d.path(), true);
    let r = report_with(
        d.path(),
        ReportOptions {
            separate: Separate::parse("cpu").unwrap(),
            ..Default::default()
        },
    );
    assert_eq!(r.columns, [Column::Cpu(0), Column::Cpu(1)]);
    let app = r.rows.iter().find(|r| r.image == "app").unwrap();
    assert_eq!(app.samples, [6, 3]);
    // cpu0 has 14 samples, cpu1 9.
    assert!((app.percent[0] - 600.0 / 14.0).abs() < 1e-9);
    assert!((app.percent[1] - 300.0 / 9.0).abs() < 1e-9);
    let t = text(&r);
    assert!(t.contains("cpu:0") && t.contains("cpu:1"), "{t}");
    let flat = flat_rows(&r);
    let cells: Vec<_> = flat
        .iter()
        .filter(|(r, _)| r.image == "app")
        .map(|(r, c)| (*c, r.samples[0]))
        .collect();
    assert_eq!(cells, [(Some(0), 6), (Some(1), 3)]);
}

#[test]
fn separate_thread_splits_rows_with_names() {
    let d = tempfile::tempdir().unwrap();
    standard(d.path(), true);
    let r = report_with(
        d.path(),
        ReportOptions {
            separate: Separate::parse("thread").unwrap(),
            ..Default::default()
        },
    );
    let app_rows: Vec<_> = r
        .rows
        .iter()
        .filter(|r| r.image == "app")
        .map(|r| (r.tgid, r.tid, r.comm.clone(), r.total))
        .collect();
    assert_eq!(
        app_rows,
        [
            (Some(10), Some(10), Some("app".to_owned()), 6),
            (Some(10), Some(11), Some("worker".to_owned()), 3)
        ]
    );
    let idle = r.rows.iter().find(|r| r.tgid == Some(0)).unwrap();
    assert_eq!(idle.comm.as_deref(), Some("?"));
}

#[test]
fn separate_lib_nests_dependents_under_the_application() {
    let d = tempfile::tempdir().unwrap();
    standard(d.path(), true);
    let r = report_with(
        d.path(),
        ReportOptions {
            separate: Separate::parse("lib").unwrap(),
            ..Default::default()
        },
    );
    assert!(r.shown.nested);
    let app = r.rows.iter().find(|r| r.image == "app").unwrap();
    // app's own 9 and libc's 2; kernel samples stay with the kernel (no
    // kernel separation).
    assert_eq!(app.total, 11);
    let kids: Vec<_> = app
        .children
        .iter()
        .map(|c| (c.image.as_str(), c.total))
        .collect();
    assert_eq!(kids, [("app", 9), ("libc.so.6", 2)]);
    assert!((app.children[0].total_percent - 900.0 / 11.0).abs() < 1e-9);
    let kernel = r
        .rows
        .iter()
        .find(|r| r.image == "[kernel.kallsyms]")
        .unwrap();
    assert_eq!(kernel.total, 5);

    // kernel separation moves the app's kernel and module samples to it.
    let r = report_with(
        d.path(),
        ReportOptions {
            separate: Separate::parse("kernel").unwrap(),
            ..Default::default()
        },
    );
    let app = r.rows.iter().find(|r| r.image == "app").unwrap();
    assert_eq!(app.total, 13);
    let t = text(&r);
    assert!(t.contains("application"), "{t}");
}

#[test]
fn app_column_names_the_process_executable() {
    let d = tempfile::tempdir().unwrap();
    standard(d.path(), true);
    let r = report_with(
        d.path(),
        ReportOptions {
            symbols: true,
            app_column: true,
            ..Default::default()
        },
    );
    let libc = r.rows.iter().find(|r| r.image == "libc.so.6").unwrap();
    assert_eq!(libc.app.as_deref(), Some("app"));
    let idle = r
        .rows
        .iter()
        .find(|r| r.symbol.as_deref() == Some("do_one_initcall"))
        .unwrap();
    assert_eq!(idle.app.as_deref(), Some("[kernel.kallsyms]"));
    assert!(text(&r).contains("app name"));
}

#[test]
fn specs_filter_cpu_task_and_image() {
    let d = tempfile::tempdir().unwrap();
    standard(d.path(), true);
    let with = |spec: &[&str]| {
        report_with(
            d.path(),
            ReportOptions {
                spec: ProfileSpec::parse(spec).unwrap(),
                ..Default::default()
            },
        )
    };
    assert_eq!(with(&["cpu:1"]).header.total_samples, 9);
    assert_eq!(with(&["tgid:10"]).header.total_samples, 13);
    assert_eq!(with(&["tid:11"]).header.total_samples, 5);
    assert_eq!(with(&["tgid:10", "cpu:0"]).header.total_samples, 8);
    assert_eq!(with(&["image:app"]).header.total_samples, 9);
    assert_eq!(with(&["image:lib*,other"]).header.total_samples, 6);
    assert_eq!(with(&["image-exclude:[[]kernel*"]).header.total_samples, 18);
    // the read count does not depend on specs
    assert_eq!(with(&["cpu:1"]).header.samples_read, 23);
}

#[test]
fn exclude_dependent_keeps_only_executables() {
    let d = tempfile::tempdir().unwrap();
    standard(d.path(), true);
    let r = report_with(
        d.path(),
        ReportOptions {
            exclude_dependent: true,
            ..Default::default()
        },
    );
    let got: Vec<_> = rows(&r).into_iter().map(|(i, _, n)| (i, n)).collect();
    // app 9, other 4, the idle kernel thread's kernel samples (no app: its
    // own), anon of a process whose executable is unknown (its own).
    assert_eq!(
        got,
        [
            ("app".to_owned(), 9),
            ("[kernel.kallsyms]".to_owned(), 4),
            ("other".to_owned(), 4),
            ("anon (tgid:4242)".to_owned(), 2)
        ]
    );
}

#[test]
fn threshold_sort_reverse_and_global_percent() {
    let d = tempfile::tempdir().unwrap();
    standard(d.path(), true);
    let r = report_with(
        d.path(),
        ReportOptions {
            threshold: 10.0,
            ..Default::default()
        },
    );
    assert_eq!(r.rows.len(), 3, "{:?}", rows(&r));
    assert_eq!(r.rows_below_threshold, 3);
    assert!(text(&r).contains("3 rows below the threshold"));

    let r = report_with(
        d.path(),
        ReportOptions {
            sort: SortKey::Image,
            ..Default::default()
        },
    );
    let names: Vec<_> = r.rows.iter().map(|r| r.image.as_str()).collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);

    let r = report_with(
        d.path(),
        ReportOptions {
            reverse: true,
            ..Default::default()
        },
    );
    assert_eq!(r.rows.last().unwrap().image, "app");

    let r = report_with(
        d.path(),
        ReportOptions {
            spec: ProfileSpec::parse(&["image:app"]).unwrap(),
            global_percent: true,
            ..Default::default()
        },
    );
    assert!((r.rows[0].total_percent - 900.0 / 23.0).abs() < 1e-9);
    let r = report_with(
        d.path(),
        ReportOptions {
            spec: ProfileSpec::parse(&["image:app"]).unwrap(),
            ..Default::default()
        },
    );
    assert!((r.rows[0].total_percent - 100.0).abs() < 1e-9);
}

#[test]
fn sort_by_vma_and_symbol() {
    let d = tempfile::tempdir().unwrap();
    standard(d.path(), true);
    let r = report_with(
        d.path(),
        ReportOptions {
            symbols: true,
            show_address: true,
            sort: SortKey::Vma,
            spec: ProfileSpec::parse(&["image:?kernel*"]).unwrap(),
            ..Default::default()
        },
    );
    let syms: Vec<_> = r.rows.iter().map(|r| r.symbol.clone().unwrap()).collect();
    assert_eq!(syms, ["do_one_initcall", "schedule"]);
    let r = report_with(
        d.path(),
        ReportOptions {
            symbols: true,
            sort: SortKey::Symbol,
            spec: ProfileSpec::parse(&["image:?kernel*"]).unwrap(),
            reverse: true,
            ..Default::default()
        },
    );
    let syms: Vec<_> = r.rows.iter().map(|r| r.symbol.clone().unwrap()).collect();
    assert_eq!(syms, ["schedule", "do_one_initcall"]);
}

#[test]
fn no_footer_takes_losses_from_markers() {
    let d = tempfile::tempdir().unwrap();
    standard(d.path(), false);
    let r = report_with(d.path(), ReportOptions::default());
    assert_eq!(r.header.lost_source, "markers");
    assert_eq!(r.header.lost_total, 5);
    assert!(r.header.sessions[0].state.contains("no footer"));
    assert_eq!(r.header.samples_unreadable, Some(0));
}

#[test]
fn forged_loss_counts_saturate_instead_of_wrapping() {
    let d = tempfile::tempdir().unwrap();
    let forged = |cpu| CpuAccounting {
        cpu,
        samples_received: u64::MAX - 1,
        samples_written: u64::MAX - 1,
        lost_ring: u64::MAX - 1,
        lost_reconcile: 7,
        ..Default::default()
    };
    write_session(
        d.path(),
        &[(vec![], vec![])],
        Some(SessionFooter {
            rounds: 1,
            accounting: vec![forged(0), forged(1)],
            ..Default::default()
        }),
    );
    // Before: "Lost: 18446744073709551613" (or an overflow panic).
    let r = report_with(d.path(), ReportOptions::default());
    assert_eq!(r.header.lost_total, u64::MAX);
    assert!(r.header.lost_percent <= 100.0, "{}", r.header.lost_percent);
    assert!(text(&r).contains(&u64::MAX.to_string()), "{}", text(&r));
}

#[test]
fn a_header_claiming_a_million_cpus_costs_only_the_cpus_with_data() {
    let d = tempfile::tempdir().unwrap();
    let chunks: Vec<(Vec<Event>, Vec<S>)> = (0..40).map(|_| (vec![], vec![])).collect();
    let path = write_session(d.path(), &chunks, None);
    // Rewrite the header with a million CPUs (before: 3.9 GB and 20 s
    // for --timeline, chunks x CPUs).
    let header = SessionHeader {
        cpus: (0..1_000_000).collect(),
        event: EventConfigDesc {
            name: "cpu-clock".into(),
            ..Default::default()
        },
        ..Default::default()
    };
    let old = SessionReader::open(&path).unwrap();
    let chunks: Vec<(u64, u64, Vec<u8>)> = old
        .chunks()
        .iter()
        .map(|c| (c.round, c.time, old.payload(c).to_vec()))
        .collect();
    drop(old);
    std::fs::remove_file(&path).unwrap();
    let mut w = SessionWriter::create(&path, &header).unwrap();
    for (round, time, p) in &chunks {
        w.append_chunk(*round, *time, p).unwrap();
    }
    drop(w);
    let r = report_with(
        d.path(),
        ReportOptions {
            timeline: Some(1),
            ..Default::default()
        },
    );
    let t = r.timeline.as_ref().expect("a timeline");
    assert!(t.cpus.len() <= 2, "{} CPU columns", t.cpus.len());
    assert!(
        r.header.cpus.len() <= 2,
        "{} CPUs in the header",
        r.header.cpus.len()
    );
}

#[test]
fn terminal_escapes_in_names_are_shown_not_sent() {
    let d = tempfile::tempdir().unwrap();
    let evil = "/tmp/\u{1b}]0;pwned\u{7}\u{1b}[2J\u{9b}31m";
    write_session(
        d.path(),
        &[(
            vec![
                def(APP, CookieKind::User, evil, 0, None),
                comm(10, 10, "\u{1b}[31mred", true),
            ],
            vec![(0, 10, 10, false, APP, 0x10, 3)],
        )],
        None,
    );
    let r = report_with(
        d.path(),
        ReportOptions {
            separate: Separate::parse("thread").unwrap(),
            ..Default::default()
        },
    );
    for format in [Format::Text, Format::Csv] {
        let mut out = Vec::new();
        render(&r, format, &mut out).unwrap();
        let t = String::from_utf8(out).unwrap();
        assert!(
            !t.chars().any(|c| c.is_control() && c != '\n' && c != '\t'),
            "{format:?}: {t:?}"
        );
        assert!(t.contains("\\x1b]0;pwned\\x07"), "{format:?}: {t}");
        assert!(t.contains("\\x9b31m"), "{format:?}: {t}");
    }
    assert_eq!(printable("a\u{1b}b\nc"), "a\\x1bb\nc");
}

#[test]
fn corrupt_and_torn_chunks_are_named_and_skipped() {
    let d = tempfile::tempdir().unwrap();
    let path = standard(d.path(), true);
    let mut bytes = std::fs::read(&path).unwrap();
    let reader = SessionReader::open(&path).unwrap();
    let second = reader.chunks()[1];
    // Flip a payload byte of the second chunk: CRC mismatch.
    bytes[second.payload_offset() as usize + 3] ^= 0xff;
    std::fs::write(&path, &bytes).unwrap();
    let r = report_with(d.path(), ReportOptions::default());
    assert_eq!(r.header.samples_read, 17);
    assert_eq!(r.header.samples_unreadable, Some(6));
    assert_eq!(r.header.bad_chunks.len(), 1);
    assert_eq!(r.header.bad_chunks[0].index, 1);
    assert_eq!(r.header.bad_chunks[0].offset, second.offset);
    assert!(r
        .warnings
        .iter()
        .any(|w| w.contains(&format!("chunk 1 at byte {}", second.offset))));
    assert!(r
        .warnings
        .iter()
        .any(|w| w.contains("6 samples are in unreadable chunks")));

    // Cut in the middle of the second chunk, no footer: a torn tail.
    std::fs::write(&path, &bytes[..second.payload_offset() as usize + 5]).unwrap();
    let mut s = Session::open(d.path()).unwrap();
    s.set_liveness(Liveness::NotRunning);
    let r = build_report(&[s], &ReportOptions::default(), &sources(), &NoProgress).unwrap();
    assert_eq!(r.header.samples_read, 17);
    assert!(r.header.bad_chunks[0].torn);
    assert!(r.header.sessions[0].state.contains("killed"));
    assert!(
        r.warnings.iter().any(|w| w.contains("torn chunk")),
        "{:?}",
        r.warnings
    );
    assert!(text(&r).contains(&format!(
        "torn chunk: {} chunk 1 at byte {}",
        path.display(),
        second.offset
    )));

    // The same while a recorder runs: being written, not a warning.
    let mut s = Session::open(d.path()).unwrap();
    s.set_liveness(Liveness::Running);
    let r = build_report(&[s], &ReportOptions::default(), &sources(), &NoProgress).unwrap();
    assert!(
        !r.warnings.iter().any(|w| w.contains("torn")),
        "{:?}",
        r.warnings
    );
    assert!(r.header.sessions[0].state.starts_with("running"));
}

#[test]
fn a_missing_cookie_definition_is_named_not_fatal() {
    let d = tempfile::tempdir().unwrap();
    write_session(
        d.path(),
        &[(vec![], vec![(0, 1, 1, false, 0x99, 4, 3)])],
        None,
    );
    let r = report_with(d.path(), ReportOptions::default());
    assert_eq!(r.rows[0].image, "[unknown binary 0x0000000000000099]");
    assert!(r.warnings[0].contains("definition was not read"));
}

#[test]
fn timeline_counts_per_round_and_cpu() {
    let d = tempfile::tempdir().unwrap();
    standard(d.path(), true);
    let r = report_with(
        d.path(),
        ReportOptions {
            timeline: Some(1),
            ..Default::default()
        },
    );
    let t = r.timeline.as_ref().unwrap();
    assert_eq!(t.cpus, [0, 1]);
    let lines = &t.sessions[0].lines;
    assert_eq!(lines.len(), 2);
    assert_eq!(lines[0].samples, [8, 9]);
    assert_eq!(lines[1].samples, [6, 0]);
    assert_eq!(lines[1].lost, [0, 5]);
    assert!((lines[1].time_s - 0.5).abs() < 1e-9);
    let r = report_with(
        d.path(),
        ReportOptions {
            timeline: Some(2),
            ..Default::default()
        },
    );
    let lines = &r.timeline.as_ref().unwrap().sessions[0].lines;
    assert_eq!(lines.len(), 1);
    assert_eq!((lines[0].first_round, lines[0].last_round), (0, 1));
    assert_eq!(lines[0].samples, [14, 9]);
    let t = text(&r);
    assert!(t.contains("cpu1 lost"), "{t}");
    let mut csv = Vec::new();
    write_csv(&r, &mut csv).unwrap();
    assert!(String::from_utf8(csv)
        .unwrap()
        .contains(",0,1,0.500,1,9,5\n"));
}

#[test]
fn merged_sessions_add_up() {
    let a = tempfile::tempdir().unwrap();
    let b = tempfile::tempdir().unwrap();
    standard(a.path(), true);
    standard(b.path(), true);
    let sessions = vec![
        Session::open(a.path()).unwrap(),
        Session::open(b.path()).unwrap(),
    ];
    let r = build_report(
        &sessions,
        &ReportOptions::default(),
        &sources(),
        &NoProgress,
    )
    .unwrap();
    assert_eq!(r.header.total_samples, 46);
    assert_eq!(r.header.lost_total, 10);
    assert_eq!(r.rows[0].total, 18);
    assert_eq!(r.header.sessions.len(), 2);
}

#[test]
fn merging_different_events_is_refused() {
    let a = tempfile::tempdir().unwrap();
    standard(a.path(), true);
    let b = tempfile::tempdir().unwrap();
    let header = SessionHeader {
        event: EventConfigDesc {
            name: "page-faults".into(),
            type_: 1,
            config: 2,
            ..Default::default()
        },
        ..Default::default()
    };
    SessionWriter::create(b.path().join(SESSION_FILE), &header).unwrap();
    let sessions = vec![
        Session::open(a.path()).unwrap(),
        Session::open(b.path()).unwrap(),
    ];
    let e = build_report(
        &sessions,
        &ReportOptions::default(),
        &sources(),
        &NoProgress,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("page-faults") && e.contains("cpu-clock"), "{e}");
}

#[test]
fn json_and_csv_rows() {
    let d = tempfile::tempdir().unwrap();
    standard(d.path(), true);
    let r = report_with(
        d.path(),
        ReportOptions {
            symbols: true,
            separate: Separate::parse("cpu,thread").unwrap(),
            ..Default::default()
        },
    );
    let mut out = Vec::new();
    write_json(&r, &mut out).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["event"], "cpu-clock");
    assert_eq!(v["frequency"], 1000);
    assert_eq!(v["period"], serde_json::Value::Null);
    assert_eq!(v["total_samples"], 23);
    assert_eq!(v["lost"]["total"], 5);
    assert_eq!(v["lost"]["per_cpu"]["1"], 5);
    let rows = v["rows"].as_array().unwrap();
    let worker = rows
        .iter()
        .find(|r| r["comm"] == "worker" && r["image"] == "app")
        .unwrap();
    assert_eq!(worker["cpu"], 1);
    assert_eq!(worker["tgid"], 10);
    assert_eq!(worker["tid"], 11);
    assert_eq!(worker["samples"], 3);
    assert_eq!(worker["symbol"], NO_SYMBOLS);
    assert_eq!(worker["percent"], 33.3333);
    let sum: u64 = rows.iter().map(|r| r["samples"].as_u64().unwrap()).sum();
    assert_eq!(sum, 23);

    let mut out = Vec::new();
    write_csv(&r, &mut out).unwrap();
    let csv = String::from_utf8(out).unwrap();
    assert!(csv.starts_with("samples,percent,cpu,tgid,tid,comm,app,image,symbol,vma,location\n"));
    assert!(
        csv.contains("3,33.3333,1,10,11,worker,,app,(no symbols),,\n"),
        "{csv}"
    );
}

#[test]
fn wrong_version_names_both_versions() {
    let d = tempfile::tempdir().unwrap();
    let path = standard(d.path(), true);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[8] = 0x63;
    bytes[9] = 0;
    std::fs::write(&path, &bytes).unwrap();
    let e = Session::open(d.path()).unwrap_err().to_string();
    assert!(
        e.contains("version 99") && e.contains(&format!("{FORMAT_VERSION}")),
        "{e}"
    );
}

#[test]
fn no_session_says_how_to_make_one() {
    let d = tempfile::tempdir().unwrap();
    let e = Session::open(d.path()).unwrap_err().to_string();
    assert!(e.contains("profctl record"), "{e}");
}

// ---------------------------------------------------------------- call graphs

/// Kernel offsets (from `_text` in testdata/symbols/kallsyms) inside
/// `do_one_initcall` ("main"), `schedule` ("a"), `arch_weak_hook` ("b")
/// and `local_helper` ("c"). Frames are return addresses: the function
/// is found at offset − 1.
const MAIN_RET: u64 = 0x61;
const A_RET: u64 = 0x211;
const B_RET: u64 = 0x311;
const C_OFF: u64 = 0x390;

fn frame(offset: u64) -> Frame {
    Frame {
        cookie: KERNEL,
        offset,
        kernel: true,
    }
}

/// main → a → c (10 samples), main → b → c (20, split over two chunks,
/// the second chunk's stack defined only in the first), main itself (5),
/// and one sample whose caller is `[unknown]`.
fn call_session(dir: &std::path::Path) -> PathBuf {
    let header = SessionHeader {
        host: "test".into(),
        event: EventConfigDesc {
            name: "cpu-clock".into(),
            frequency: Some(1000),
            callchain: true,
            ..Default::default()
        },
        cpus: vec![0, 1],
        start_time_unix_ns: 1_795_379_395_000_000_000,
        start_monotonic_ns: 1_000_000_000,
        target: "command app".into(),
        ..Default::default()
    };
    let path = dir.join(SESSION_FILE);
    let mut w = SessionWriter::create(&path, &header).unwrap();
    let mut kdef = CookieEntry {
        cookie: KERNEL,
        kind: CookieKind::Kernel,
        path: "[kernel.kallsyms]".into(),
        build_id: Some(vec![0xab, 0xcd, 0x01]),
        dev: 0,
        inode: 0,
        generation: 0,
        base: KBASE,
        pid: None,
    };
    let mut enc = ChunkEncoder::new();
    enc.event(&Event::CookieDef(kdef.clone()));
    enc.event(&Event::CookieDef(CookieEntry {
        cookie: COOKIE_UNKNOWN,
        kind: CookieKind::Other,
        path: "[unknown]".into(),
        build_id: None,
        ..kdef.clone()
    }));
    enc.event(&comm(10, 10, "app", true));
    enc.event(&Event::StackDef {
        id: 1,
        frames: vec![frame(A_RET), frame(MAIN_RET)],
    });
    enc.event(&Event::StackDef {
        id: 2,
        frames: vec![frame(B_RET), frame(MAIN_RET)],
    });
    enc.event(&Event::StackDef {
        id: 3,
        frames: vec![Frame {
            cookie: COOKIE_UNKNOWN,
            offset: 0,
            kernel: true,
        }],
    });
    for i in 0..10 {
        enc.sample_with_stack(0, 10, 10, true, KERNEL, C_OFF + i % 3, 1);
    }
    for _ in 0..12 {
        enc.sample_with_stack(1, 10, 10, true, KERNEL, C_OFF, 2);
    }
    for _ in 0..5 {
        enc.sample(0, 10, 10, true, KERNEL, MAIN_RET + 4);
    }
    enc.sample_with_stack(0, 10, 10, true, KERNEL, 0x220, 3);
    w.append_chunk(0, 1_100_000_000, enc.bytes()).unwrap();
    let mut enc = ChunkEncoder::new();
    kdef.build_id = None; // a repeated definition: the first wins
    for _ in 0..8 {
        enc.sample_with_stack(1, 10, 10, true, KERNEL, C_OFF + 8, 2);
    }
    w.append_chunk(1, 1_200_000_000, enc.bytes()).unwrap();
    path
}

fn call_report(dir: &std::path::Path, opts: ReportOptions) -> Report {
    report_with(dir, opts)
}

#[test]
fn callgraph_splits_callers_and_counts_inclusive_samples() {
    let d = tempfile::tempdir().unwrap();
    call_session(d.path());
    let r = call_report(
        d.path(),
        ReportOptions {
            callgraph: true,
            ..Default::default()
        },
    );
    assert_eq!(r.header.total_samples, 36);
    let cg = r.callgraph.as_ref().unwrap();
    let entry = |name: &str| cg.entries.iter().find(|e| e.symbol == name).unwrap();
    let c = entry("local_helper");
    assert_eq!((c.self_samples, c.total), (30, 30));
    let callers: Vec<(&str, u64)> = c
        .callers
        .iter()
        .map(|a| (a.symbol.as_str(), a.samples))
        .collect();
    assert_eq!(callers, [("arch_weak_hook", 20), ("schedule", 10)]);
    assert!((c.callers[0].percent - 200.0 / 3.0).abs() < 1e-9);
    assert!(c.callees.is_empty());
    let main = entry("do_one_initcall");
    assert_eq!((main.self_samples, main.total), (5, 35));
    let callees: Vec<(&str, u64)> = main
        .callees
        .iter()
        .map(|a| (a.symbol.as_str(), a.samples))
        .collect();
    assert_eq!(callees, [("arch_weak_hook", 20), ("schedule", 10)]);
    assert!(main.callers.is_empty(), "the outermost frame has no caller");
    // schedule: 10 via the stack as a caller of c, plus 1 sampled itself
    // (with an [unknown] caller).
    let a = entry("schedule");
    assert_eq!((a.self_samples, a.total), (1, 11));
    assert_eq!(a.callers[0].symbol, "do_one_initcall");
    assert_eq!(a.callers[1].symbol, "[unknown]");
    // Sorted by self samples.
    assert_eq!(cg.entries[0].symbol, "local_helper");

    let t = text(&r);
    assert!(t.contains("local_helper [self]"), "{t}");
    assert!(
        t.lines().any(|l| l.starts_with("  20 ")
            && l.contains(" 66.6667 ")
            && l.ends_with("arch_weak_hook")),
        "{t}"
    );
}

#[test]
fn children_adds_inclusive_rows_for_callers() {
    let d = tempfile::tempdir().unwrap();
    call_session(d.path());
    let r = call_report(
        d.path(),
        ReportOptions {
            children: true,
            ..Default::default()
        },
    );
    assert!(r.shown.inclusive && r.shown.symbols);
    let got: Vec<(&str, u64, u64)> = r
        .rows
        .iter()
        .map(|r| (r.symbol.as_deref().unwrap(), r.total, r.inclusive_total))
        .collect();
    assert_eq!(
        got,
        [
            ("do_one_initcall", 5, 35),
            ("local_helper", 30, 30),
            ("arch_weak_hook", 0, 20),
            ("schedule", 1, 11),
            ("[unknown]", 0, 1),
        ]
    );
    let b = r.rows.iter().find(|r| r.inclusive_total == 20).unwrap();
    assert!((b.inclusive_total_percent - 2000.0 / 36.0).abs() < 1e-9);
    // Threshold cuts by inclusive share.
    let r = call_report(
        d.path(),
        ReportOptions {
            children: true,
            threshold: 50.0,
            ..Default::default()
        },
    );
    assert_eq!(r.rows.len(), 3);
    assert_eq!(r.rows_below_threshold, 2);
    // Per CPU columns: inclusive per column.
    let r = call_report(
        d.path(),
        ReportOptions {
            children: true,
            separate: Separate::parse("cpu").unwrap(),
            ..Default::default()
        },
    );
    let main = r
        .rows
        .iter()
        .find(|r| r.symbol.as_deref() == Some("do_one_initcall"))
        .unwrap();
    assert_eq!(main.inclusive, [15, 20]);
    assert_eq!(main.samples, [5, 0]);
}

#[test]
fn stacks_do_not_change_the_flat_profile() {
    let d = tempfile::tempdir().unwrap();
    call_session(d.path());
    let flat = call_report(
        d.path(),
        ReportOptions {
            symbols: true,
            ..Default::default()
        },
    );
    let with = call_report(
        d.path(),
        ReportOptions {
            symbols: true,
            stacks: true,
            ..Default::default()
        },
    );
    assert_eq!(rows(&flat), rows(&with));
    assert!(flat.stacks.is_none());
    assert_eq!(with.stacks.as_ref().unwrap().total(), 36);
}

#[test]
fn callgraph_conflicts_with_thread_separation() {
    let d = tempfile::tempdir().unwrap();
    call_session(d.path());
    let s = Session::open(d.path()).unwrap();
    let e = build_report(
        &[s],
        &ReportOptions {
            callgraph: true,
            separate: Separate::parse("thread").unwrap(),
            ..Default::default()
        },
        &sources(),
        &NoProgress,
    )
    .unwrap_err();
    assert!(e.to_string().contains("--separate=thread"), "{e}");
}

#[test]
fn a_session_without_stacks_says_so() {
    let d = tempfile::tempdir().unwrap();
    standard(d.path(), true);
    let r = report_with(
        d.path(),
        ReportOptions {
            callgraph: true,
            ..Default::default()
        },
    );
    assert!(
        r.warnings.iter().any(|w| w.contains("record with")),
        "{:?}",
        r.warnings
    );
    // Every function is its own root.
    let cg = r.callgraph.unwrap();
    assert!(cg.entries.iter().all(|e| e.callers.is_empty()));
}

#[test]
fn collapsed_stacks_are_folded_outermost_first() {
    let d = tempfile::tempdir().unwrap();
    call_session(d.path());
    let r = call_report(
        d.path(),
        ReportOptions {
            stacks: true,
            ..Default::default()
        },
    );
    let mut out = Vec::new();
    render(&r, Format::Collapsed, &mut out).unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "app;[unknown];schedule 1\n\
         app;do_one_initcall 5\n\
         app;do_one_initcall;arch_weak_hook;local_helper 20\n\
         app;do_one_initcall;schedule;local_helper 10\n"
    );
    // One CPU's lines only.
    let r = call_report(
        d.path(),
        ReportOptions {
            stacks: true,
            separate: Separate::parse("cpu").unwrap(),
            ..Default::default()
        },
    );
    let lines = collapsed_lines(&r, Some(1)).unwrap();
    assert_eq!(
        lines,
        [(
            "app;do_one_initcall;arch_weak_hook;local_helper".to_owned(),
            20
        )]
    );
}

#[test]
fn flame_graph_is_an_svg_with_every_function() {
    let d = tempfile::tempdir().unwrap();
    call_session(d.path());
    let r = call_report(
        d.path(),
        ReportOptions {
            stacks: true,
            ..Default::default()
        },
    );
    let mut out = Vec::new();
    render(&r, Format::Flamegraph, &mut out).unwrap();
    let svg = String::from_utf8(out).unwrap();
    assert!(svg.starts_with("<?xml"));
    for f in [
        "do_one_initcall",
        "arch_weak_hook",
        "schedule",
        "local_helper",
    ] {
        assert!(svg.contains(&format!("<title>{f} (")), "{f} missing");
    }
}

#[test]
fn pprof_round_trips_with_names_totals_and_build_ids() {
    let d = tempfile::tempdir().unwrap();
    call_session(d.path());
    let r = call_report(
        d.path(),
        ReportOptions {
            stacks: true,
            ..Default::default()
        },
    );
    let mut out = Vec::new();
    render(&r, Format::Pprof, &mut out).unwrap();
    assert_eq!(&out[..2], &[0x1f, 0x8b], "gzip");
    let p = pprof::read_pprof(&out).unwrap();
    assert_eq!(p.string_table[0], "");
    let types: Vec<(&str, &str)> = p
        .sample_type
        .iter()
        .map(|t| (p.string(t.r#type), p.string(t.unit)))
        .collect();
    assert_eq!(types, [("samples", "count"), ("cpu", "nanoseconds")]);
    assert_eq!(p.period, 1_000_000);
    let total: i64 = p.sample.iter().map(|s| s.value[0]).sum();
    let nanos: i64 = p.sample.iter().map(|s| s.value[1]).sum();
    assert_eq!((total, nanos), (36, 36_000_000));
    let kernel = p
        .mapping
        .iter()
        .find(|m| p.string(m.filename) == "[kernel.kallsyms]")
        .unwrap();
    assert_eq!(p.string(kernel.build_id), "abcd01");
    assert_eq!(kernel.memory_start, KBASE);
    // Self samples per function, from the leaf location, as the text report.
    let name_of_loc = |id: u64| {
        let l = &p.location[id as usize - 1];
        assert_eq!(l.id, id);
        let f = &p.function[l.line[0].function_id as usize - 1];
        p.string(f.name).to_owned()
    };
    let mut own: std::collections::BTreeMap<String, i64> = Default::default();
    for s in &p.sample {
        *own.entry(name_of_loc(s.location_id[0])).or_default() += s.value[0];
    }
    let flat: std::collections::BTreeMap<String, i64> = r
        .rows
        .iter()
        .map(|r| (r.symbol.clone().unwrap(), r.total as i64))
        .collect();
    assert_eq!(own, flat);
    // Addresses are kernel addresses: _text + offset (− 1 for callers).
    let c = p
        .location
        .iter()
        .find(|l| l.address == KBASE + C_OFF)
        .expect("the sampled location of local_helper");
    assert_eq!(c.mapping_id, kernel.id);
    assert!(p.location.iter().any(|l| l.address == KBASE + A_RET - 1));
}

#[test]
fn diff_sorts_by_absolute_change_in_share() {
    let d = tempfile::tempdir().unwrap();
    let old_dir = d.path().join("old");
    let new_dir = d.path().join("new");
    std::fs::create_dir_all(&old_dir).unwrap();
    std::fs::create_dir_all(&new_dir).unwrap();
    let k = |name, kind, base| def(KERNEL, kind, name, base, None);
    write_session(
        &old_dir,
        &[(
            vec![k("[kernel.kallsyms]", CookieKind::Kernel, KBASE)],
            vec![
                (0, 1, 1, true, KERNEL, 0x60, 50),
                (0, 1, 1, true, KERNEL, 0x210, 50),
            ],
        )],
        None,
    );
    write_session(
        &new_dir,
        &[(
            vec![k("[kernel.kallsyms]", CookieKind::Kernel, KBASE)],
            vec![
                (0, 1, 1, true, KERNEL, 0x60, 20),
                (0, 1, 1, true, KERNEL, 0x210, 70),
                (0, 1, 1, true, KERNEL, 0x390, 10),
            ],
        )],
        None,
    );
    let opts = ReportOptions {
        symbols: true,
        ..Default::default()
    };
    let old = report_with(&old_dir, opts.clone());
    let new = report_with(&new_dir, opts);
    let diff = diff_reports(&old, &new, 0.0);
    let got: Vec<(&str, i64)> = diff
        .rows
        .iter()
        .map(|r| (r.symbol.as_deref().unwrap(), r.change.round() as i64))
        .collect();
    assert_eq!(
        got,
        [
            ("do_one_initcall", -30),
            ("schedule", 20),
            ("local_helper", 10)
        ]
    );
    let mut out = Vec::new();
    write_diff(&diff, Format::Text, &mut out).unwrap();
    let t = String::from_utf8(out).unwrap();
    assert!(t.contains("-30.0000"), "{t}");
    // A threshold leaves out small changes.
    assert_eq!(diff_reports(&old, &new, 15.0).rows.len(), 2);
}
