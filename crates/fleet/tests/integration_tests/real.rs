//! Against a real ClickHouse (18.16 here): each test its own server.

use crate::{part, row};
use profkit_fleet::{Client, Cut, Error, Exported, FrameTotal, Key, Query, Row, Target};
use profkit_testsupport::ClickHouseServer;

fn client(s: &ClickHouseServer) -> Client {
    let c = Client::new(Target::parse(&s.url).unwrap());
    c.ensure_schema().unwrap();
    c
}

/// Runs `sql` on the server as the default user; its answer.
pub fn sql(s: &ClickHouseServer, sql: &str) -> String {
    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .build()
        .new_agent();
    let mut resp = agent
        .post(&format!("http://127.0.0.1:{}/", s.port))
        .send(sql.as_bytes())
        .unwrap();
    let body = resp.body_mut().read_to_string().unwrap();
    assert_eq!(resp.status().as_u16(), 200, "{sql}: {body}");
    body
}

/// `count(), sum(samples)` of the samples table and `count()` of parts.
fn counts(s: &ClickHouseServer, db: &str) -> String {
    sql(
        s,
        &format!(
            "SELECT (SELECT count() FROM {db}.profkit_samples), (SELECT sum(samples) FROM {db}.profkit_samples), (SELECT count() FROM {db}.profkit_parts)"
        ),
    )
}

#[test]
fn export_once_whatever_happens() {
    let Some(s) = ClickHouseServer::start("once") else {
        return;
    };
    let c = client(&s);
    c.ensure_schema().unwrap();
    let p = part(
        "web-1",
        "s1",
        0,
        1_700_000_000,
        vec![
            row("/bin/a", "f", 5, &["/bin/a\tf", "/bin/a\tmain"]),
            row("/bin/a", "g", 7, &[]),
        ],
    );
    match c.export_part(&p).unwrap() {
        Exported::Inserted { rows, bytes_sent } => assert!(rows == 2 && bytes_sent > 0),
        e => panic!("{e:?}"),
    }
    assert_eq!(counts(&s, "once"), "2\t12\t1\n");
    assert_eq!(c.export_part(&p).unwrap(), Exported::AlreadyThere);
    assert_eq!(counts(&s, "once"), "2\t12\t1\n");
    let t = c.totals(&Query::default()).unwrap();
    assert_eq!((t.samples, t.lost, t.parts, t.hosts), (12, 3, 1, 1));
    assert_eq!(
        (t.start_unix_ns, t.end_unix_ns),
        (p.start_unix_ns, p.end_unix_ns)
    );

    // Half done: an earlier attempt's samples landed, its parts row not.
    let q = part(
        "web-1",
        "s1",
        1,
        1_700_000_010,
        vec![row("/bin/a", "f", 4, &[]), row("/bin/b", "h", 6, &[])],
    );
    sql(
        &s,
        "INSERT INTO once.profkit_samples (host, session, part, part_id, start, start_ns, end_ns, binary, function, samples) \
         VALUES ('web-1','s1',1,'web-1/s1/1',1700000010,1700000010000000000,1700000020000000000,'/bin/a','f',4), \
         ('web-1','s1',1,'web-1/s1/1',1700000010,1700000010000000000,1700000020000000000,'/bin/b','h',6)",
    );
    // Not counted by the reports before it is complete.
    assert_eq!(c.query(&Query::default()).unwrap()[0].samples, 12);
    assert_eq!(c.export_part(&q).unwrap(), Exported::AlreadyThere);
    assert_eq!(counts(&s, "once"), "4\t22\t2\n");
    assert_eq!(c.export_part(&q).unwrap(), Exported::AlreadyThere);
    assert_eq!(counts(&s, "once"), "4\t22\t2\n");
    assert_eq!(c.query(&Query::default()).unwrap()[0].samples, 22);

    // Half done, but what is stored is not this part: refused, nothing written.
    sql(
        &s,
        "INSERT INTO once.profkit_samples (host, session, part, part_id, start, binary, samples) \
         VALUES ('web-1','s1',2,'web-1/s1/2',1700000020,'/bin/a',1)",
    );
    let r = part(
        "web-1",
        "s1",
        2,
        1_700_000_020,
        vec![row("/bin/a", "f", 2, &[])],
    );
    let e = c.export_part(&r).unwrap_err();
    assert!(
        matches!(
            e,
            Error::Inconsistent {
                stored_rows: 1,
                stored_samples: 1,
                ..
            }
        ),
        "{e:?}"
    );
    assert!(e.to_string().contains("web-1/s1/2"), "{e}");
    assert_eq!(counts(&s, "once"), "5\t23\t2\n");

    // An empty part is listed (its totals count), no rows.
    let empty = part("web-2", "s9", 0, 1_700_000_000, vec![]);
    assert_eq!(
        c.export_part(&empty).unwrap(),
        Exported::Inserted {
            rows: 0,
            bytes_sent: 0
        }
    );
    assert_eq!(c.export_part(&empty).unwrap(), Exported::AlreadyThere);
    assert_eq!(c.totals(&Query::default()).unwrap().parts, 3);
}

#[test]
fn hostile_strings_round_trip() {
    let Some(s) = ClickHouseServer::start("hostile") else {
        return;
    };
    let c = client(&s);
    let nasty = [
        "tab\there",
        "new\nline\r\n",
        "back\\slash\\",
        "quote'\"`",
        "\\N",
        "nul\0byte",
        "Code: 1, e.displayText() = DB::Exception: not one",
        "[',']",
        "ünïcødé 🔥",
        "",
    ];
    let rows: Vec<_> = nasty
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let mut r = row(n, n, i as u64 + 1, &[n, "x\ty", n]);
            r.comm = n.to_string();
            r.cgroup = n.to_string();
            r.build_id = n.to_string();
            r
        })
        .collect();
    let p = part("h'\t\\", "s\n1", 0, 1_700_000_000, rows);
    assert!(matches!(
        c.export_part(&p).unwrap(),
        Exported::Inserted { rows: 10, .. }
    ));
    assert_eq!(c.export_part(&p).unwrap(), Exported::AlreadyThere);
    let got = c
        .query(&Query {
            group: vec![
                Key::Host,
                Key::Comm,
                Key::Cgroup,
                Key::Binary,
                Key::Function,
            ],
            ..Default::default()
        })
        .unwrap();
    assert_eq!(got.len(), nasty.len());
    for (i, n) in nasty.iter().enumerate() {
        let want = Row {
            keys: vec![
                p.host.clone(),
                n.to_string(),
                n.to_string(),
                n.to_string(),
                n.to_string(),
            ],
            samples: i as u64 + 1,
        };
        assert!(got.contains(&want), "{want:?} not in {got:?}");
    }
    let stacks: Vec<(Vec<String>, u64)> = c
        .stacks(&Query::default())
        .unwrap()
        .into_iter()
        .map(|r| (r.stack, r.samples))
        .collect();
    for (i, n) in nasty.iter().enumerate() {
        let want = (
            vec![n.to_string(), "x\ty".to_string(), n.to_string()],
            i as u64 + 1,
        );
        assert!(stacks.contains(&want), "{want:?} not in {stacks:?}");
    }
    // A host glob with a LIKE metacharacter in it is literal.
    let q = |g: &str| {
        c.totals(&Query {
            hosts: Some(g.into()),
            ..Default::default()
        })
        .unwrap()
        .parts
    };
    assert_eq!(q("h'\t\\"), 1);
    assert_eq!(q("h'?\\"), 1);
    assert_eq!(q("h*"), 1);
    assert_eq!(q("h%"), 0);
    assert_eq!(q("h_\t\\"), 0);
}

fn fleet(c: &Client) {
    let a = vec![
        row(
            "/usr/lib/libc.so.6",
            "memcpy",
            10,
            &["/usr/lib/libc.so.6\tmemcpy", "/bin/app\tmain"],
        ),
        row("/bin/app", "main", 3, &["/bin/app\tmain"]),
        row("[kernel.kallsyms]", "do_syscall_64", 4, &[]),
    ];
    let b = vec![
        row(
            "/usr/lib/libc.so.6",
            "memcpy",
            20,
            &["/usr/lib/libc.so.6\tmemcpy", "/bin/app\tmain"],
        ),
        row("/bin/db", "", 2, &[]),
    ];
    let mut unnamed = row("/bin/db", "", 1, &[]);
    unnamed.offset = 0x1234;
    let mut c3 = vec![row("/bin/app", "main", 5, &["/bin/app\tmain"]), unnamed];
    c3[0].cpu = 3;
    for p in [
        part("web-1", "s1", 0, 1_700_000_000, a),
        part("web-2", "s1", 0, 1_700_000_000, b),
        part("db-1", "x", 7, 1_700_086_400, c3), // a day later
    ] {
        assert!(matches!(
            c.export_part(&p).unwrap(),
            Exported::Inserted { .. }
        ));
    }
}

fn keys(rows: &[Row]) -> Vec<(String, u64)> {
    rows.iter().map(|r| (r.keys.join(" "), r.samples)).collect()
}

#[test]
fn reports_are_computed_by_the_server() {
    let Some(s) = ClickHouseServer::start("reports") else {
        return;
    };
    let c = client(&s);
    fleet(&c);
    let l = Query {
        group: vec![Key::Binary, Key::Function],
        ..Default::default()
    };
    let want = [
        ("/usr/lib/libc.so.6 memcpy", 30),
        ("/bin/app main", 8),
        ("[kernel.kallsyms] do_syscall_64", 4),
        ("/bin/db ", 3),
    ];
    let want: Vec<_> = want.iter().map(|(k, n)| (k.to_string(), *n)).collect();
    assert_eq!(keys(&c.query(&l).unwrap()), want);
    let t = c.totals(&Query::default()).unwrap();
    assert_eq!((t.samples, t.lost, t.parts, t.hosts), (45, 9, 3, 3));
    assert_eq!(
        c.query(&Query::default()).unwrap(),
        vec![Row {
            keys: vec![],
            samples: 45
        }]
    );

    // Ties are ordered by key; the limit keeps the largest.
    let by_host = Query {
        group: vec![Key::Host],
        limit: Some(2),
        ..Default::default()
    };
    assert_eq!(
        keys(&c.query(&by_host).unwrap()),
        [("web-2".into(), 22), ("web-1".into(), 17)]
    );
    let sep = Query {
        group: vec![Key::Cpu, Key::Binary, Key::Function, Key::Offset],
        hosts: Some("db-?".into()),
        ..Default::default()
    };
    assert_eq!(
        keys(&c.query(&sep).unwrap()),
        [
            ("3 /bin/app main 0".into(), 5),
            ("1 /bin/db  4660".into(), 1)
        ]
    );

    // Host globs.
    let web = Query {
        hosts: Some("web-*".into()),
        group: vec![Key::Host],
        ..Default::default()
    };
    assert_eq!(
        keys(&c.query(&web).unwrap()),
        [("web-2".into(), 22), ("web-1".into(), 17)]
    );
    assert_eq!(c.totals(&web).unwrap().hosts, 2);
    let none = Query {
        hosts: Some("web".into()),
        ..Default::default()
    };
    assert_eq!(
        c.query(&none).unwrap(),
        vec![Row {
            keys: vec![],
            samples: 0
        }]
    );
    assert_eq!(c.totals(&none).unwrap(), profkit_fleet::Totals::default());

    // Time windows: parts overlapping [from, to).
    let ns = |s: u64| Some(s * 1_000_000_000);
    let day2 = Query {
        from_unix_ns: ns(1_700_000_011),
        group: vec![Key::Host],
        ..Default::default()
    };
    assert_eq!(keys(&c.query(&day2).unwrap()), [("db-1".into(), 6)]);
    let t = c.totals(&day2).unwrap();
    assert_eq!((t.parts, t.start_unix_ns), (1, 1_700_086_400_000_000_000));
    let day1 = Query {
        from_unix_ns: ns(1_700_000_005),
        to_unix_ns: ns(1_700_000_006),
        ..Default::default()
    };
    assert_eq!(c.totals(&day1).unwrap().parts, 2);
    assert_eq!(c.query(&day1).unwrap()[0].samples, 39);
    let before = Query {
        to_unix_ns: ns(1_700_000_000),
        ..Default::default()
    };
    assert_eq!(c.totals(&before).unwrap().parts, 0);

    // Binary globs: on the file name, or on the path with a '/'.
    let bin = |g: &str| {
        let q = Query {
            binaries: vec![g.into()],
            ..Default::default()
        };
        c.query(&q).unwrap()[0].samples
    };
    assert_eq!(bin("libc*"), 30);
    assert_eq!(bin("/usr/lib/*"), 30);
    assert_eq!(bin("/bin/*"), 11);
    assert_eq!(bin("app"), 8);
    assert_eq!(bin("lib"), 0);
    assert_eq!(bin("[kernel.kallsyms]"), 4);
    let sum = |q: Query| c.query(&q).unwrap().first().map_or(0, |r| r.samples);
    let q = Query::default();
    assert!(!q.filters_samples());
    let all = sum(q);
    let q = Query {
        exclude_binaries: vec!["libc*".into(), "app".into()],
        ..Default::default()
    };
    assert!(q.filters_samples());
    assert_eq!(sum(q), all - 38);
    let q = Query {
        binaries: vec!["libc*".into(), "app".into()],
        ..Default::default()
    };
    assert_eq!(sum(q), 38);
    for (q, want) in [
        (
            Query {
                cpus: vec![1],
                ..Default::default()
            },
            all - 5,
        ),
        (
            Query {
                cpus: vec![0, 2],
                ..Default::default()
            },
            0,
        ),
        (
            Query {
                pids: vec![100],
                ..Default::default()
            },
            all,
        ),
        (
            Query {
                tids: vec![7],
                ..Default::default()
            },
            0,
        ),
        (
            Query {
                cgroups: vec!["/system.slice/*".into()],
                ..Default::default()
            },
            all,
        ),
        (
            Query {
                cgroups: vec!["[none]".into()],
                ..Default::default()
            },
            0,
        ),
        (
            Query {
                build_ids: vec!["ABC".into()],
                ..Default::default()
            },
            all,
        ),
        (
            Query {
                build_ids: vec!["abd".into()],
                ..Default::default()
            },
            0,
        ),
    ] {
        assert_eq!(sum(q.clone()), want, "{q:?}");
    }

    // A call graph's functions and arcs, computed by the server.
    let cut = Cut {
        by_inclusive: false,
        threshold: 0.0,
        total: all,
    };
    let (frames, below) = c.call_graph_frames(&Query::default(), &cut).unwrap();
    let f = |frame: &str, self_samples: u64, total: u64| FrameTotal {
        frame: frame.to_owned(),
        self_samples,
        total,
    };
    assert_eq!(
        frames,
        [
            f("/bin/app\tmain", 8, 38),
            f("/usr/lib/libc.so.6\tmemcpy", 30, 30)
        ]
    );
    assert_eq!(below, 0);
    // 30 of 45 samples in memcpy itself: a 50 % cut keeps none, 60 %
    // inclusive keeps main.
    let half = Cut {
        threshold: 50.0,
        ..cut
    };
    let (frames, below) = c.call_graph_frames(&Query::default(), &half).unwrap();
    assert_eq!((frames.len(), below), (1, 1));
    let wide = Cut {
        by_inclusive: true,
        threshold: 80.0,
        ..cut
    };
    let (frames, below) = c.call_graph_frames(&Query::default(), &wide).unwrap();
    assert_eq!((frames, below), (vec![f("/bin/app\tmain", 8, 38)], 1));
    let arc = |a: &str, b: &str, n: u64| (a.to_owned(), b.to_owned(), n);
    let both = [
        "/bin/app\tmain".to_owned(),
        "/usr/lib/libc.so.6\tmemcpy".to_owned(),
    ];
    let arcs = c.call_graph_arcs(&Query::default(), &both).unwrap();
    assert_eq!(
        arcs.callers,
        [arc("/usr/lib/libc.so.6\tmemcpy", "/bin/app\tmain", 30)]
    );
    assert_eq!(
        arcs.callees,
        [arc("/bin/app\tmain", "/usr/lib/libc.so.6\tmemcpy", 30)]
    );
    // Only main's: it has no caller.
    let arcs = c.call_graph_arcs(&Query::default(), &both[..1]).unwrap();
    assert!(arcs.callers.is_empty());
    assert_eq!(arcs.callees.len(), 1);

    // Stacks, with their counts, leaf first as exported.
    let st = c
        .stacks(&Query {
            hosts: Some("web-*".into()),
            ..Default::default()
        })
        .unwrap();
    let s = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let st: Vec<(Vec<String>, u64)> = st.into_iter().map(|r| (r.stack, r.samples)).collect();
    assert_eq!(
        st,
        vec![
            (s(&["/usr/lib/libc.so.6\tmemcpy", "/bin/app\tmain"]), 30),
            (s(&[]), 6),
            (s(&["/bin/app\tmain"]), 3),
        ]
    );
}

#[test]
fn passwords_work_and_wrong_ones_say_so() {
    let Some(s) = ClickHouseServer::start_with_password("auth", "prof", "s3cr:et@/x") else {
        return;
    };
    let good = Client::new(Target::parse(&s.url).unwrap());
    good.ensure_schema().unwrap();
    let p = part("h", "s", 0, 1_700_000_000, vec![row("/bin/a", "f", 1, &[])]);
    assert!(matches!(
        good.export_part(&p).unwrap(),
        Exported::Inserted { .. }
    ));
    let bad = Target::parse(&format!(
        "clickhouse://prof:wrongsecret@127.0.0.1:{}/auth",
        s.port
    ))
    .unwrap();
    let e = Client::new(bad).totals(&Query::default()).unwrap_err();
    let shown = format!("{e} {e:?}");
    assert!(matches!(e, Error::Auth { .. }), "{e:?}");
    assert!(
        shown.contains("authentication failed") && !shown.contains("wrongsecret"),
        "{shown}"
    );
    let nobody = Target::parse(&format!("clickhouse://127.0.0.1:{}/auth", s.port)).unwrap();
    let e = Client::new(nobody).totals(&Query::default()).unwrap_err();
    assert!(matches!(e, Error::Auth { .. }), "{e:?}");
}

#[test]
fn a_server_that_goes_away_and_comes_back() {
    let Some(mut s) = ClickHouseServer::start("restart") else {
        return;
    };
    let c = client(&s);
    let p = part("h", "s", 0, 1_700_000_000, vec![row("/bin/a", "f", 1, &[])]);
    let q = part("h", "s", 1, 1_700_000_010, vec![row("/bin/a", "f", 2, &[])]);
    assert!(matches!(
        c.export_part(&p).unwrap(),
        Exported::Inserted { .. }
    ));
    s.stop();
    let e = c.export_part(&q).unwrap_err();
    assert!(e.is_unreachable(), "{e:?}");
    s.restart();
    assert!(matches!(
        c.export_part(&q).unwrap(),
        Exported::Inserted { .. }
    ));
    assert_eq!(c.export_part(&p).unwrap(), Exported::AlreadyThere);
    assert_eq!(c.totals(&Query::default()).unwrap().samples, 3);
}

#[test]
fn server_errors_are_clear() {
    let Some(s) = ClickHouseServer::start("errs") else {
        return;
    };
    // No schema: the tables are missing.
    let c = Client::new(Target::parse(&s.url).unwrap());
    match c.totals(&Query::default()) {
        Err(Error::Server {
            code: 60 | 81,
            message,
            ..
        }) => assert!(message.contains("exist"), "{message}"),
        r => panic!("{r:?}"),
    }
}

#[test]
fn a_large_part_goes_in_one_insert() {
    let Some(s) = ClickHouseServer::start("large") else {
        return;
    };
    let c = client(&s);
    let rows: Vec<_> = (0..100_000u64)
        .map(|i| {
            let mut r = row(
                "/usr/lib/libbig.so",
                &format!("fn_{i}"),
                i % 7 + 1,
                &["a\tb", "c\td"],
            );
            r.tid = i as u32;
            r
        })
        .collect();
    let p = part("big", "s", 0, 1_700_000_000, rows);
    let samples = p.samples;
    assert!(matches!(
        c.export_part(&p).unwrap(),
        Exported::Inserted { rows: 100_000, .. }
    ));
    assert_eq!(c.export_part(&p).unwrap(), Exported::AlreadyThere);
    assert_eq!(counts(&s, "large"), format!("100000\t{samples}\t1\n"));
    // One INSERT, one block: one data part.
    let parts = sql(&s, "SELECT count() FROM system.parts WHERE database = 'large' AND table = 'profkit_samples' AND active");
    assert_eq!(parts, "1\n");
}

/// A samples table made before the `process` column gets it (18.16 has
/// no `ADD COLUMN IF NOT EXISTS`), its old rows read '', and exports go
/// on.
#[test]
fn tables_without_the_process_column_get_it() {
    let Some(s) = ClickHouseServer::start("older") else {
        return;
    };
    sql(&s, "CREATE DATABASE older");
    let old_columns = profkit_fleet::schema::SAMPLES_COLUMNS.replace(" process String,", "");
    assert_ne!(old_columns, profkit_fleet::schema::SAMPLES_COLUMNS);
    sql(
        &s,
        &format!(
            "CREATE TABLE older.profkit_samples ({old_columns}) ENGINE = MergeTree() \
             PARTITION BY toYYYYMMDD(start) ORDER BY (host, start, binary, function)"
        ),
    );
    let c = client(&s);
    c.ensure_schema().unwrap(); // again: nothing to add
    let names = sql(
        &s,
        "SELECT name FROM system.columns WHERE database = 'older' AND table = 'profkit_samples'",
    );
    assert!(names.contains("\nprocess\ncgroup\n"), "{names}");
    let p = part(
        "h",
        "s",
        1,
        1_700_000_000,
        vec![row("/bin/app", "main", 3, &[])],
    );
    assert!(matches!(
        c.export_part(&p).unwrap(),
        Exported::Inserted { .. }
    ));
    let q = Query {
        group: vec![Key::Process],
        ..Default::default()
    };
    assert_eq!(keys(&c.query(&q).unwrap()), [("app".to_owned(), 3)]);
}
