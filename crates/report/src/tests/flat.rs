//! Flat profiles: images, symbols, --separate, applications, specs,
//! sorting and thresholds.

use super::*;

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
    let app = r.rows.iter().find(|r| &*r.image == "app").unwrap();
    assert_eq!(app.samples[..], [6, 3]);
    // cpu0 has 14 samples, cpu1 9.
    assert!((app.percent[0] - 600.0 / 14.0).abs() < 1e-9);
    assert!((app.percent[1] - 300.0 / 9.0).abs() < 1e-9);
    let t = text(&r);
    assert!(t.contains("cpu:0") && t.contains("cpu:1"), "{t}");
    let flat = flat_rows(&r);
    let cells: Vec<_> = flat
        .iter()
        .filter(|(r, _)| &*r.image == "app")
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
        .filter(|r| &*r.image == "app")
        .map(|r| (r.tgid(), r.tid(), r.comm().map(str::to_owned), r.total))
        .collect();
    assert_eq!(
        app_rows,
        [
            (Some(10), Some(10), Some("app".to_owned()), 6),
            (Some(10), Some(11), Some("worker".to_owned()), 3)
        ]
    );
    let idle = r.rows.iter().find(|r| r.tgid() == Some(0)).unwrap();
    assert_eq!(idle.comm(), Some("?"));
}

#[test]
fn thread_rows_show_a_containers_own_pids_beside_the_hosts() {
    let d = tempfile::tempdir().unwrap();
    let ns = |pid, tid| Some(profkit_eventlog::NsTask { pid, tid });
    let named = |pid, tid, name: &str, ns| Event::Comm {
        pid,
        tid,
        comm: name.into(),
        exec: false,
        ns,
    };
    write_session(
        d.path(),
        &[(
            vec![
                def(APP, CookieKind::User, "/usr/bin/app", 0, None),
                // The container's init and a thread of it, and a host
                // process.
                named(500, 500, "app", ns(1, 1)),
                named(500, 502, "app", ns(1, 3)),
                comm(10, 10, "app", true),
            ],
            vec![
                (0, 500, 500, false, APP, 0x100, 5),
                (0, 500, 502, false, APP, 0x100, 3),
                // A thread named nowhere: its process's pid, no tid.
                (0, 500, 504, false, APP, 0x100, 2),
                (1, 10, 10, false, APP, 0x100, 1),
            ],
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
    let ids: Vec<_> = r
        .rows
        .iter()
        .map(|r| (r.tgid(), r.tid(), r.ns_tgid(), r.ns_tid(), r.total))
        .collect();
    assert_eq!(
        ids,
        [
            (Some(500), Some(500), Some(1), Some(1), 5),
            (Some(500), Some(502), Some(1), Some(3), 3),
            (Some(500), Some(504), Some(1), None, 2),
            (Some(10), Some(10), None, None, 1),
        ]
    );
    let t = text(&r);
    assert!(t.contains("ns tgid/tid"), "{t}");
    let line = |tid: &str| {
        t.lines()
            .find(|l| l.split_whitespace().nth(3) == Some(tid))
            .unwrap_or_else(|| panic!("no row of tid {tid}: {t}"))
            .to_owned()
    };
    assert!(line("502").contains(" 1/3 "), "{t}");
    assert!(line("504").contains(" 1/? "), "{t}");
    let mut json = Vec::new();
    write_json(&r, &mut json).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&json).unwrap();
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows[1]["ns_tgid"], 1);
    assert_eq!(rows[1]["ns_tid"], 3);
    assert!(rows[3].get("ns_tgid").is_none(), "{}", rows[3]);
    let mut csv = Vec::new();
    write_csv(&r, &mut csv).unwrap();
    let csv = String::from_utf8(csv).unwrap();
    let head: Vec<_> = csv.lines().next().unwrap().split(',').collect();
    let second: Vec<_> = csv.lines().nth(2).unwrap().split(',').collect();
    let col = |name| head.iter().position(|h| *h == name).unwrap();
    assert_eq!((second[col("ns_tgid")], second[col("ns_tid")]), ("1", "3"));
    // Without any container task the column is not shown.
    let plain = tempfile::tempdir().unwrap();
    standard(plain.path(), true);
    let r = report_with(
        plain.path(),
        ReportOptions {
            separate: Separate::parse("thread").unwrap(),
            ..Default::default()
        },
    );
    assert!(!text(&r).contains("ns tgid"));
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
    let app = r.rows.iter().find(|r| &*r.image == "app").unwrap();
    // app's own 9 and libc's 2; kernel samples stay with the kernel (no
    // kernel separation).
    assert_eq!(app.total, 11);
    let kids: Vec<_> = app
        .children()
        .iter()
        .map(|c| (&*c.image, c.total))
        .collect();
    assert_eq!(kids, [("app", 9), ("libc.so.6", 2)]);
    assert!((app.children()[0].total_percent - 900.0 / 11.0).abs() < 1e-9);
    let kernel = r
        .rows
        .iter()
        .find(|r| &*r.image == "[kernel.kallsyms]")
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
    let app = r.rows.iter().find(|r| &*r.image == "app").unwrap();
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
    let libc = r.rows.iter().find(|r| &*r.image == "libc.so.6").unwrap();
    assert_eq!(libc.app().map(|a| &**a), Some("app"));
    let idle = r
        .rows
        .iter()
        .find(|r| r.symbol.as_deref() == Some("do_one_initcall"))
        .unwrap();
    assert_eq!(idle.app().map(|a| &**a), Some("[kernel.kallsyms]"));
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
    let names: Vec<_> = r.rows.iter().map(|r| &*r.image).collect();
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
    assert_eq!(&*r.rows.last().unwrap().image, "app");

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

/// A session recorded with cgroups in `dir`: `defs` (id, path), then
/// samples (cgroup id, pid, binary, count) on CPU 0.
fn cgroup_session(
    dir: &std::path::Path,
    defs: &[(u64, &str)],
    samples: &[(u64, u32, Cookie, u32)],
) {
    let path = dir.join(SESSION_FILE);
    let header = SessionHeader {
        event: EventConfigDesc {
            name: "cpu-clock".into(),
            ..Default::default()
        },
        cpus: vec![0],
        cgroups: CgroupSource::Sample,
        ..Default::default()
    };
    let mut w = SessionWriter::create(&path, &header).unwrap();
    let mut enc = ChunkEncoder::new();
    enc.event(&def(APP, CookieKind::User, "/bin/app", 0, None));
    enc.event(&def(OTHER, CookieKind::User, "/bin/other", 0, None));
    for &(id, path) in defs {
        enc.event(&Event::CgroupDef {
            id,
            path: path.into(),
        });
    }
    enc.event(&Event::CpuSwitch { cpu: 0 });
    for &(cg, pid, cookie, n) in samples {
        enc.cgroup(cg);
        for _ in 0..n {
            enc.sample(0, pid, pid, false, cookie, 0x10);
        }
    }
    w.append_chunk(0, 1, enc.bytes()).unwrap();
}

/// A session recorded with cgroups: `--separate=cgroup` gives rows per
/// cgroup path, `cgroup:GLOB` keeps one, JSON rows carry `cgroup`.
#[test]
fn separate_cgroup_splits_rows_by_cgroup_path() {
    let d = tempfile::tempdir().unwrap();
    cgroup_session(
        d.path(),
        &[(100, "/grp/a"), (200, "/grp/b")],
        &[
            (100, 10, APP, 3),
            (200, 20, OTHER, 5),
            (100, 10, APP, 1),
            (7, 30, OTHER, 2),
        ],
    );
    let r = report_with(
        d.path(),
        ReportOptions {
            separate: Separate::parse("cgroup").unwrap(),
            ..Default::default()
        },
    );
    assert!(r.shown.cgroup);
    let mut got: Vec<_> = r
        .rows
        .iter()
        .map(|r| (r.cgroup().unwrap().to_owned(), r.image.to_string(), r.total))
        .collect();
    got.sort();
    assert_eq!(
        got,
        [
            ("/grp/a".to_owned(), "app".to_owned(), 4),
            ("/grp/b".to_owned(), "other".to_owned(), 5),
            ("[cgroup 7]".to_owned(), "other".to_owned(), 2),
        ]
    );
    assert!(text(&r).contains("/grp/b"), "{}", text(&r));
    let mut json = Vec::new();
    write_json(&r, &mut json).unwrap();
    let json = String::from_utf8(json).unwrap();
    assert!(json.contains("\"cgroup\": \"/grp/a\""), "{json}");
    // A spec keeps one group; without --separate=cgroup no column.
    let r = report_with(
        d.path(),
        ReportOptions {
            spec: ProfileSpec::parse(&["cgroup:/grp/b*"]).unwrap(),
            ..Default::default()
        },
    );
    assert!(!r.shown.cgroup);
    assert_eq!(rows(&r), [("other".to_owned(), None, 5)]);
}

/// Rows are per cgroup path, not id: a group removed and made again under
/// the same path (a new id) is one row, and merged sessions (other hosts
/// number their groups apart) add up by path.
#[test]
fn cgroup_rows_are_keyed_by_path_across_ids_and_sessions() {
    let d = tempfile::tempdir().unwrap();
    let (one, two) = (d.path().join("one"), d.path().join("two"));
    std::fs::create_dir_all(&one).unwrap();
    std::fs::create_dir_all(&two).unwrap();
    // Made again: ids 100 and 300 are both /grp/a.
    cgroup_session(
        &one,
        &[(100, "/grp/a"), (200, "/grp/b"), (300, "/grp/a")],
        &[(100, 10, APP, 3), (300, 11, APP, 4), (200, 20, OTHER, 5)],
    );
    // Another host: the same ids, swapped.
    cgroup_session(
        &two,
        &[(100, "/grp/b"), (200, "/grp/a")],
        &[(100, 20, OTHER, 6), (200, 10, APP, 7), (9, 10, APP, 1)],
    );
    let by_path = |sessions: &[&std::path::Path], spec: &[&str]| {
        let s: Vec<_> = sessions.iter().map(|p| Session::open(p).unwrap()).collect();
        let opts = ReportOptions {
            separate: Separate::parse("cgroup").unwrap(),
            spec: ProfileSpec::parse(spec).unwrap(),
            ..Default::default()
        };
        let r = build_report(&s, &opts, &sources(), &NoProgress).unwrap();
        let mut got: Vec<_> = r
            .rows
            .iter()
            .map(|r| (r.cgroup().unwrap().to_owned(), r.image.to_string(), r.total))
            .collect();
        got.sort();
        got
    };
    let row = |cg: &str, image: &str, n| (cg.to_owned(), image.to_owned(), n);
    assert_eq!(
        by_path(&[&one], &[]),
        [row("/grp/a", "app", 7), row("/grp/b", "other", 5)]
    );
    assert_eq!(
        by_path(&[&one, &two], &[]),
        [
            row("/grp/a", "app", 14),
            row("/grp/b", "other", 11),
            row("[cgroup 9]", "app", 1)
        ]
    );
    assert_eq!(
        by_path(&[&one, &two], &["cgroup:/grp/a"]),
        [row("/grp/a", "app", 14)]
    );
}
