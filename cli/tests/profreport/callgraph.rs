//! Call graphs and exports on the checked-in `callgraph` session
//! (`testdata/workloads/callgraph.c` recorded with `profctl record -g`:
//! main → a → c once per round, main → b → c twice, all the time in c),
//! and `--diff` on the flat fixtures.

use std::collections::{BTreeMap, BTreeSet};

use profkit_report::pprof;

use crate::util::*;

fn json(args: &[&str]) -> serde_json::Value {
    let mut a = args.to_vec();
    a.extend(["--format", "json"]);
    on_fixture("callgraph", &a).expect(0).json()
}

fn entry<'a>(v: &'a serde_json::Value, symbol: &str) -> &'a serde_json::Value {
    v["callgraph"]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["symbol"] == symbol)
        .unwrap_or_else(|| panic!("no call-graph entry for {symbol}: {v:#}"))
}

fn arcs(e: &serde_json::Value, which: &str) -> BTreeMap<String, f64> {
    e[which]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["symbol"].as_str().unwrap().to_owned(),
                a["percent"].as_f64().unwrap(),
            )
        })
        .collect()
}

#[test]
fn callers_of_c_split_one_third_two_thirds() {
    let v = json(&["-c"]);
    let c = entry(&v, "c");
    let callers = arcs(c, "callers");
    eprintln!("callers of c: {callers:?}");
    assert!((callers["a"] - 100.0 / 3.0).abs() <= 3.0, "{callers:?}");
    assert!((callers["b"] - 200.0 / 3.0).abs() <= 3.0, "{callers:?}");
    assert_eq!(c["self_samples"], c["total"]);
    // main calls a and b; its callees add up with its self samples.
    let main = entry(&v, "main");
    let callees = arcs(main, "callees");
    assert!(callees.contains_key("a") && callees.contains_key("b"));
}

#[test]
fn flag_children_gives_inclusive_shares() {
    let v = json(&["-l", "--children"]);
    let incl = |s: &str| {
        rows(&v)
            .iter()
            .find(|r| r["symbol"] == s)
            .and_then(|r| r["inclusive_percent"].as_f64())
            .unwrap_or_else(|| panic!("no row for {s}: {v:#}"))
    };
    let (a, b, main) = (incl("a"), incl("b"), incl("main"));
    eprintln!("inclusive: a {a:.2} %, b {b:.2} %, main {main:.2} %");
    assert!((a - 100.0 / 3.0).abs() <= 3.0);
    assert!((b - 200.0 / 3.0).abs() <= 3.0);
    assert!(main > 95.0);
    // Sorted by inclusive share: main (or the libc frame above it) first.
    let first = rows(&v)[0]["inclusive_percent"].as_f64().unwrap();
    assert!(first >= main);
    // Self samples are unchanged by --children.
    let flat = on_fixture("callgraph", &["-l", "--format", "json"])
        .expect(0)
        .json();
    assert_eq!(samples_of(&flat, "c"), samples_of(&v, "c"));
}

#[test]
fn flag_callgraph_threshold_and_text_layout() {
    let run = on_fixture("callgraph", &["--callgraph", "-t", "10"]).expect(0);
    assert!(run.stdout.contains("c [self]"), "{}", run.stdout);
    assert!(run.stdout.contains("functions below the threshold"));
    // With --children, blocks are cut by inclusive share: a, b, main stay.
    let run = on_fixture("callgraph", &["-c", "--children", "-t", "10"]).expect(0);
    for f in [" a\n", " b\n", " main\n"] {
        assert!(run.stdout.contains(f), "{f:?} missing:\n{}", run.stdout);
    }
}

#[test]
fn callgraph_with_separate_thread_is_a_usage_error() {
    let run = on_fixture("callgraph", &["-c", "--separate=thread"]);
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert!(run.stderr.contains("--separate=thread"), "{}", run.stderr);
}

/// Every `<title>` of an SVG, checking on the way that the whole document
/// parses as XML.
fn svg_titles(svg: &str) -> Vec<String> {
    use quick_xml::events::Event;
    let mut r = quick_xml::Reader::from_str(svg);
    let mut titles = Vec::new();
    let mut in_title = false;
    let mut depth = 0i64;
    loop {
        match r
            .read_event()
            .unwrap_or_else(|e| panic!("SVG does not parse at byte {}: {e}", r.buffer_position()))
        {
            Event::Start(e) => {
                depth += 1;
                in_title = e.name().as_ref() == b"title";
            }
            Event::End(_) => {
                depth -= 1;
                in_title = false;
            }
            Event::Text(t) if in_title => {
                titles.push(String::from_utf8_lossy(t.as_ref()).into_owned());
            }
            Event::GeneralRef(g) if in_title => {
                // &amp; and friends inside a title
                if let Some(last) = titles.last_mut() {
                    last.push_str(&format!("&{};", String::from_utf8_lossy(g.as_ref())));
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    assert_eq!(depth, 0, "unbalanced SVG");
    titles
}

#[test]
fn flame_graph_parses_as_xml_and_names_every_symbol_above_1_percent() {
    let d = tempdir();
    let out = d.path().join("out.svg");
    on_fixture(
        "callgraph",
        &["--format", "flamegraph", "-o", out.to_str().unwrap()],
    )
    .expect(0);
    let svg = std::fs::read_to_string(&out).unwrap();
    assert!(svg.contains("<svg"), "not an SVG");
    let titles = svg_titles(&svg);
    let framed: BTreeSet<String> = titles
        .iter()
        .filter_map(|t| t.rsplit_once(" (").map(|(name, _)| name.to_owned()))
        .collect();
    let v = json(&["-l", "--children"]);
    let mut checked = 0;
    for r in rows(&v) {
        if r["inclusive_percent"].as_f64().unwrap() > 1.0 && r["symbol"] != "(no symbols)" {
            let s = r["symbol"].as_str().unwrap();
            assert!(framed.contains(s), "{s} not in the flame graph: {framed:?}");
            checked += 1;
        }
    }
    assert!(checked >= 4, "only {checked} symbols above 1 %");
    // stdout works too.
    let run = on_fixture("callgraph", &["--format", "flamegraph"]).expect(0);
    assert!(run.stdout.starts_with("<?xml"));
}

#[test]
fn flame_graphs_one_per_cpu_with_separate_cpu() {
    let d = tempdir();
    let out = d.path().join("fg.svg");
    let run = on_fixture(
        "callgraph",
        &[
            "--format",
            "flamegraph",
            "--separate=cpu",
            "-o",
            out.to_str().unwrap(),
        ],
    )
    .expect(0);
    let v = json(&[]);
    let cpus: Vec<u64> = v["lost"]["per_cpu"]
        .as_object()
        .unwrap()
        .keys()
        .map(|k| k.parse().unwrap())
        .collect();
    assert!(!cpus.is_empty());
    for cpu in cpus {
        let p = d.path().join(format!("fg-cpu{cpu}.svg"));
        let svg = std::fs::read_to_string(&p)
            .unwrap_or_else(|e| panic!("{}: {e}; stderr: {}", p.display(), run.stderr));
        svg_titles(&svg);
    }
    // Without -o it is a usage error.
    let run = on_fixture("callgraph", &["--format", "flamegraph", "--separate=cpu"]);
    assert_eq!(run.code, 2);
    assert!(run.stderr.contains("-o FILE"), "{}", run.stderr);
}

#[test]
fn pprof_decodes_and_matches_the_text_report() {
    let d = tempdir();
    let out = d.path().join("profile.pb.gz");
    on_fixture(
        "callgraph",
        &["--format", "pprof", "-o", out.to_str().unwrap()],
    )
    .expect(0);
    let p = pprof::read_pprof(&std::fs::read(&out).unwrap()).unwrap();
    assert_eq!(p.string_table[0], "");
    let types: Vec<(&str, &str)> = p
        .sample_type
        .iter()
        .map(|t| (p.string(t.r#type), p.string(t.unit)))
        .collect();
    assert_eq!(types, [("samples", "count"), ("cpu", "nanoseconds")]);
    assert_eq!(p.period, 1_000_000, "1000 Hz: a sample is 1 ms");
    // Totals and self samples per function match the text report's.
    let v = on_fixture("callgraph", &["-l", "--format", "json"])
        .expect(0)
        .json();
    let total: i64 = p.sample.iter().map(|s| s.value[0]).sum();
    assert_eq!(total as u64, v["total_samples"].as_u64().unwrap());
    let func_of = |loc: u64| {
        let l = &p.location[loc as usize - 1];
        assert_eq!(l.id, loc);
        let f = &p.function[l.line[0].function_id as usize - 1];
        p.string(f.name).to_owned()
    };
    let mut own: BTreeMap<String, u64> = BTreeMap::new();
    for s in &p.sample {
        *own.entry(func_of(s.location_id[0])).or_default() += s.value[0] as u64;
    }
    let mut flat: BTreeMap<String, u64> = BTreeMap::new();
    for r in rows(&v) {
        *flat
            .entry(r["symbol"].as_str().unwrap().to_owned())
            .or_default() += r["samples"].as_u64().unwrap();
    }
    assert_eq!(own, flat);
    // Stacks go through a or b to c.
    let via = |f: &str| -> i64 {
        p.sample
            .iter()
            .filter(|s| s.location_id.iter().any(|&l| func_of(l) == f))
            .map(|s| s.value[0])
            .sum()
    };
    assert!(via("b") > via("a") && via("a") > 0);
    // The workload's mapping carries its build-id, in hex.
    let m = p
        .mapping
        .iter()
        .find(|m| p.string(m.filename).ends_with("/callgraph"))
        .expect("a mapping for the workload");
    let id = p.string(m.build_id);
    assert_eq!(id.len(), 40, "{id}");
    assert!(id.chars().all(|c| c.is_ascii_hexdigit()));
    assert!(m.has_functions);
}

#[test]
fn pprof_of_a_session_without_stacks_has_one_frame_samples() {
    let d = tempdir();
    let out = d.path().join("p.pb.gz");
    on_fixture("ratio", &["--format", "pprof", "-o", out.to_str().unwrap()]).expect(0);
    let p = pprof::read_pprof(&std::fs::read(&out).unwrap()).unwrap();
    assert!(p.sample.iter().all(|s| s.location_id.len() == 1));
    let names: BTreeSet<&str> = p.function.iter().map(|f| p.string(f.name)).collect();
    assert!(names.contains("f_a") && names.contains("f_b"), "{names:?}");
}

#[test]
fn flag_diff_sorts_symbols_by_change_in_share() {
    let mut args = fixture_args("ratio");
    // --diff takes the two session directories instead of --session-dir.
    args.drain(0..2);
    let with = |extra: &[&str]| {
        let mut a = args.clone();
        a.extend(extra.iter().map(|s| s.to_string()));
        profreport(&a)
    };
    let v = with(&[
        "--diff",
        &session("ratio"),
        &session("pinned"),
        "--format",
        "json",
    ])
    .expect(0)
    .json();
    let rows = v["rows"].as_array().unwrap();
    let change = |s: &str| {
        rows.iter()
            .find(|r| r["symbol"] == s)
            .and_then(|r| r["change"].as_f64())
            .unwrap_or_else(|| panic!("no {s}: {v:#}"))
    };
    assert!(change("f_a") < -60.0, "{}", change("f_a"));
    assert!(change("f_cpu0") > 40.0);
    let abs: Vec<f64> = rows
        .iter()
        .map(|r| r["change"].as_f64().unwrap().abs())
        .collect();
    assert!(abs.windows(2).all(|w| w[0] >= w[1]), "{abs:?}");
    // A session against itself changes nothing.
    let v = with(&[
        "--diff",
        &session("ratio"),
        &session("ratio"),
        "--format",
        "json",
    ])
    .expect(0)
    .json();
    assert!(v["rows"]
        .as_array()
        .unwrap()
        .iter()
        .all(|r| r["change"].as_f64().unwrap() == 0.0));
    // Text, with a threshold.
    let run = with(&["--diff", &session("ratio"), &session("pinned"), "-t", "10"]).expect(0);
    assert!(run.stdout.contains("change"), "{}", run.stdout);
    assert!(run.stdout.contains("f_a") && !run.stdout.contains("tick"));
}
