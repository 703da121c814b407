//! Reports of a synthetic 256-CPU session (issue 33): `--separate=cpu` and
//! `--timeline` stay readable in text (CPUs added up in ranges past
//! [`TEXT_CPU_COLUMNS`]), a `cpu:` spec selects single CPUs, and JSON keeps
//! every CPU.

use super::*;

const CPUS: u32 = 256;

/// App samples on every CPU: CPU c has c % 4 + 1 of them, and c % 2 of
/// libc, in two rounds; the footer counts them.
fn many_cpus(dir: &std::path::Path) -> (PathBuf, Vec<u64>) {
    let defs = vec![
        def(APP, CookieKind::User, "/usr/bin/app", 0, None),
        def(LIBC, CookieKind::User, "/usr/lib/libc.so.6", 0, None),
        comm(10, 10, "app", true),
    ];
    let per_cpu: Vec<u64> = (0..CPUS).map(|c| u64::from(c % 4 + 1 + c % 2)).collect();
    let samples = |half: u32| -> Vec<S> {
        (0..CPUS)
            .filter(|c| c % 2 == half)
            .flat_map(|c| {
                [
                    (c, 10, 10 + c, false, APP, 0x100, c % 4 + 1),
                    (c, 10, 10 + c, false, LIBC, 0x200, c % 2),
                ]
            })
            .filter(|s| s.6 > 0)
            .collect()
    };
    let footer = SessionFooter {
        end_time_unix_ns: 1_795_379_395_600_000_000,
        end_monotonic_ns: 1_600_000_000,
        rounds: 2,
        accounting: (0..CPUS)
            .map(|c| CpuAccounting {
                cpu: c,
                samples_written: per_cpu[c as usize],
                // Ring losses on ten CPUs: the header names the eight
                // that lost most.
                lost_ring: if c % 25 == 7 { u64::from(c) } else { 0 },
                ..Default::default()
            })
            .collect(),
    };
    let path = write_session_on(
        dir,
        (0..CPUS).collect(),
        EventConfigDesc {
            name: "cpu-clock".into(),
            frequency: Some(1000),
            ..Default::default()
        },
        &[(defs, samples(0)), (Vec::new(), samples(1))],
        Some(footer),
    );
    (path, per_cpu)
}

fn by_cpu(cpu_columns: Option<usize>) -> ReportOptions {
    ReportOptions {
        separate: Separate::parse("cpu").unwrap(),
        cpu_columns,
        ..Default::default()
    }
}

#[test]
fn text_adds_up_256_cpus_in_eight_ranges() {
    let d = tempfile::tempdir().unwrap();
    let (_, per_cpu) = many_cpus(d.path());
    let r = report_with(d.path(), by_cpu(Some(TEXT_CPU_COLUMNS)));
    let want: Vec<Column> = (0..8).map(|g| Column::Cpus(g * 32, g * 32 + 31)).collect();
    assert_eq!(r.columns, want);
    let app = r.rows.iter().find(|r| &*r.image == "app").unwrap();
    // Each range of 32 CPUs: 8 each of 1, 2, 3, 4 app samples.
    assert_eq!(app.samples[..], [80; 8]);
    // Its share of the range's samples (app and libc: 80 + 16).
    let range_total: u64 = per_cpu[..32].iter().sum();
    assert_eq!(range_total, 96);
    assert!((app.percent[0] - 8000.0 / 96.0).abs() < 1e-9, "{app:?}");
    assert_eq!(app.total, 640);
    let t = text(&r);
    assert!(t.contains("cpu:0-31") && t.contains("cpu:224-255"), "{t}");
    assert!(!t.contains("cpu:255 "), "{t}");
    let widest = t.lines().map(str::len).max().unwrap();
    assert!(widest < 260, "a line of {widest} characters:\n{t}");
    assert!(
        r.warnings
            .iter()
            .any(|w| w.contains("8 CPU columns") && w.contains("cpu:LIST")),
        "{:?}",
        r.warnings
    );
}

#[test]
fn a_cpu_spec_selects_single_cpus_and_json_keeps_all() {
    let d = tempfile::tempdir().unwrap();
    many_cpus(d.path());
    // cpu:0-3,200: five columns of their own, under the text bound.
    let r = report_with(
        d.path(),
        ReportOptions {
            spec: ProfileSpec::parse(&["cpu:0-3,200"]).unwrap(),
            ..by_cpu(Some(TEXT_CPU_COLUMNS))
        },
    );
    let cpus = [0, 1, 2, 3, 200].map(Column::Cpu);
    assert_eq!(r.columns, cpus);
    let t = text(&r);
    assert!(t.contains("cpu:200"), "{t}");
    assert!(r.warnings.iter().all(|w| !w.contains("CPU columns")));
    // Without a bound (JSON, CSV): one column per CPU.
    let r = report_with(d.path(), by_cpu(None));
    assert_eq!(r.columns.len(), CPUS as usize);
    let mut out = Vec::new();
    write_json(&r, &mut out).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let cpus: std::collections::BTreeSet<u64> = v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["cpu"].as_u64())
        .collect();
    assert_eq!(cpus.len(), CPUS as usize);
}

#[test]
fn the_timeline_of_256_cpus_is_eight_ranges_in_text_and_every_cpu_in_json() {
    let d = tempfile::tempdir().unwrap();
    let (_, per_cpu) = many_cpus(d.path());
    let r = report_with(
        d.path(),
        ReportOptions {
            timeline: Some(1),
            ..Default::default()
        },
    );
    let tl = r.timeline.as_ref().unwrap();
    assert_eq!(tl.cpus.len(), CPUS as usize);
    let t = text(&r);
    assert!(
        t.contains("cpu0-31 samples") && t.contains("cpu224-255 lost"),
        "{t}"
    );
    assert!(!t.contains("cpu255 samples"), "{t}");
    let widest = t.lines().map(str::len).max().unwrap();
    assert!(widest < 320, "a line of {widest} characters:\n{t}");
    // The header's losses: the eight CPUs that lost most, the rest counted.
    let lost = t.lines().find(|l| l.starts_with("Lost:")).unwrap();
    assert!(
        lost.contains("cpu232 232 (")
            && !lost.contains("cpu7 ")
            && lost.ends_with("248 other CPUs 39"),
        "{lost}"
    );
    // The ranges add up: round 0 has the even CPUs, round 1 the odd ones.
    let first: u64 = per_cpu.iter().step_by(2).take(16).sum();
    let line = t
        .lines()
        .find(|l| l.trim_start().starts_with('0'))
        .expect("round 0");
    assert!(
        line.split_whitespace().nth(2) == Some(&first.to_string()),
        "{line} (want {first} in cpu0-31)"
    );
    let mut out = Vec::new();
    write_json(&r, &mut out).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(
        v["timeline"]["cpus"].as_array().unwrap().len(),
        CPUS as usize
    );
}
