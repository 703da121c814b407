//! What the schema's documentation says, run against the real server:
//! its DDL is the code's, its example queries run, its Distributed
//! variant works (on a cluster of one shard).

use crate::real::sql;
use crate::{part, row};
use profkit_fleet::{Client, Exported, Key, Query, Target};
use profkit_testsupport::{ClickHouseServer, CLUSTER};

/// The ```sql blocks of schema.rs's docs, each split into statements.
fn documented() -> Vec<Vec<String>> {
    let src = include_str!("../../src/schema.rs");
    let mut blocks = Vec::new();
    let mut cur: Option<Vec<String>> = None;
    for line in src.lines() {
        let Some(l) = line.strip_prefix("//!") else {
            continue;
        };
        let l = l.strip_prefix(' ').unwrap_or(l);
        match (&mut cur, l.trim()) {
            (None, "```sql") => cur = Some(vec![String::new()]),
            (Some(b), "```") => {
                b.retain(|s| !s.trim().is_empty());
                blocks.push(cur.take().unwrap());
            }
            (Some(b), _) => {
                let code = l.split("--").next().unwrap();
                if l.starts_with("CREATE") && !b.last().unwrap().trim().is_empty() {
                    b.push(String::new());
                }
                let last = b.last_mut().unwrap();
                last.push_str(code);
                last.push('\n');
            }
            _ => {}
        }
    }
    blocks
}

#[test]
fn the_documented_ddl_is_the_codes() {
    let Some(s) = ClickHouseServer::start("code") else {
        return;
    };
    let blocks = documented();
    assert!(blocks.len() >= 6, "{blocks:?}");
    Client::new(Target::parse(&s.url).unwrap())
        .ensure_schema()
        .unwrap();
    sql(&s, "CREATE DATABASE docs");
    for stmt in blocks[..2].iter().flatten() {
        sql(&s, &stmt.replace("DB.", "docs."));
    }
    for t in ["profkit_samples", "profkit_parts"] {
        let code = sql(&s, &format!("SHOW CREATE TABLE code.{t}"));
        let docs = sql(&s, &format!("SHOW CREATE TABLE docs.{t}"));
        assert_eq!(code.replace("code.", "docs."), docs);
    }
}

#[test]
fn the_documented_queries_run() {
    let Some(s) = ClickHouseServer::start("ex") else {
        return;
    };
    let c = Client::new(Target::parse(&s.url).unwrap());
    c.ensure_schema().unwrap();
    let p = part(
        "web-1",
        "s",
        0,
        1_714_521_600, // 2024-05-01 00:00:00 UTC
        vec![
            row("/bin/a", "leaf", 3, &["/bin/a\tleaf", "/bin/a\tmain"]),
            row("/bin/a", "main", 1, &["/bin/a\tmain"]),
        ],
    );
    c.export_part(&p).unwrap();
    let blocks = documented();
    let queries: Vec<&String> = blocks
        .iter()
        .flatten()
        .filter(|q| q.trim_start().starts_with("SELECT"))
        .collect();
    assert_eq!(queries.len(), 3);
    let run = |q: &str| sql(&s, &q.replace("DB.", "ex."));
    assert_eq!(run(queries[0]), "/bin/a\tleaf\t3\n/bin/a\tmain\t1\n");
    let folded = run(queries[1]);
    let mut lines: Vec<&str> = folded.lines().collect();
    lines.sort();
    assert_eq!(
        lines,
        ["/bin/a\\tmain\t1", "/bin/a\\tmain;/bin/a\\tleaf\t3"]
    );
    let day = run(queries[2]);
    assert!(day == "web-1\t4\t3\n", "{day}");
}

#[test]
fn the_distributed_variant_works() {
    let Some(s) = ClickHouseServer::start("fleet") else {
        return;
    };
    let shard = Client::new(Target::parse(&s.url.replace("/fleet", "/shard")).unwrap());
    shard.ensure_schema().unwrap();
    sql(&s, "CREATE DATABASE fleet");
    let ddl = documented()
        .into_iter()
        .find(|b| b.iter().any(|s| s.contains("Distributed(")))
        .unwrap();
    for stmt in ddl {
        let stmt = stmt
            .replace(" ON CLUSTER CLUSTER", "")
            .replace("CLUSTER", CLUSTER)
            .replace("DB", "shard");
        sql(&s, &stmt);
    }
    let c = Client::new(Target::parse(&s.url).unwrap());
    c.ensure_schema().unwrap();
    assert!(sql(&s, "SHOW CREATE TABLE fleet.profkit_parts").contains("Distributed"));
    let p = part(
        "h",
        "s",
        0,
        1_700_000_000,
        vec![row("/bin/a", "f", 2, &[]), row("/bin/b", "g", 5, &[])],
    );
    assert!(matches!(
        c.export_part(&p).unwrap(),
        Exported::Inserted { rows: 2, .. }
    ));
    assert_eq!(c.export_part(&p).unwrap(), Exported::AlreadyThere);
    assert_eq!(
        sql(
            &s,
            "SELECT count(), sum(samples) FROM shard.profkit_samples"
        ),
        "2\t7\n"
    );
    let q = Query {
        group: vec![Key::Binary],
        ..Default::default()
    };
    assert_eq!(c.query(&q).unwrap()[0].keys, ["/bin/b"]);
    assert_eq!(c.totals(&Query::default()).unwrap().samples, 7);
}

#[test]
fn non_utf8_answers_are_read_lossily() {
    let Some(s) = ClickHouseServer::start("bytes") else {
        return;
    };
    let c = Client::new(Target::parse(&s.url).unwrap());
    c.ensure_schema().unwrap();
    sql(
        &s,
        "INSERT INTO bytes.profkit_samples (host, part_id, start, binary, function, stack, samples) \
         SELECT 'h', 'h/s/0', 1700000000, unhex('2F62696EFF'), unhex('66FE'), [unhex('C3')], 4",
    );
    sql(
        &s,
        "INSERT INTO bytes.profkit_parts (part_id, host, start, samples) VALUES ('h/s/0', 'h', 1700000000, 4)",
    );
    let q = Query {
        group: vec![Key::Binary, Key::Function],
        ..Default::default()
    };
    let r = c.query(&q).unwrap();
    assert_eq!(r[0].keys, ["/bin\u{fffd}", "f\u{fffd}"]);
    assert_eq!(
        c.stacks(&Query::default())
            .unwrap()
            .into_iter()
            .map(|r| (r.stack, r.samples))
            .collect::<Vec<_>>(),
        [(vec!["\u{fffd}".to_string()], 4)]
    );
}
