//! Inlined frames (`ReportOptions::inline`): a real binary, compiled here
//! with the system C compiler and `-g`, whose sampled function does its
//! work in an always-inlined helper and whose caller reaches it through an
//! always-inlined wrapper; a synthetic session samples it.

use std::path::Path;
use std::process::Command;

use super::*;

const SOURCE: &str = r#"
static inline __attribute__((always_inline)) int inner(int x) {
    volatile int v = x;
    for (int i = 0; i < 16; i++) v = v * v + i;
    return v + 7;
}
__attribute__((noinline)) int leaf(int x) { return inner(x) + 1; }
static inline __attribute__((always_inline)) int via(int x) {
    volatile int w = leaf(x);
    return w * 3;
}
__attribute__((noinline)) int outer(int x) { return via(x) + 5; }
int main(int argc, char **argv) { (void)argv; return outer(argc); }
"#;

const APP_PID: u32 = 10;

/// Builds the fixture in `dir`. A missing C compiler fails the test (the
/// other real-binary tests need one too): it must not pass unrun.
fn build(dir: &Path) -> Option<std::path::PathBuf> {
    let src = dir.join("inl.c");
    std::fs::write(&src, SOURCE).unwrap();
    let out = dir.join("inl");
    let status = Command::new("cc")
        .args(["-O2", "-g", "-fno-omit-frame-pointer", "-o"])
        .arg(&out)
        .arg(&src)
        .status();
    match status {
        Ok(s) if s.success() => Some(out),
        other => panic!("cc could not build the inline fixture: {other:?}"),
    }
}

/// A file offset of `bin` in function `symbol` inside inlined `inlined`.
fn offset_in(bin: &Path, symbol: &str, inlined: &str) -> u64 {
    let sym = profkit_symbols::Symbolizer::new(profkit_symbols::SymbolizerOptions {
        debug_info: true,
        kallsyms: profkit_symbols::KallsymsSource::None,
        ..Default::default()
    })
    .unwrap();
    let len = std::fs::metadata(bin).unwrap().len();
    let offsets: Vec<u64> = (0..len.min(0x4000)).collect();
    let r = sym.symbolize(&profkit_symbols::BinaryRequest::elf(bin), &offsets);
    r.offsets
        .iter()
        .find(|o| {
            o.symbol.map(|s| r.symbol(s).name.as_str()) == Some(symbol)
                && o.inlined.first().and_then(|f| f.function.as_deref()) == Some(inlined)
        })
        .unwrap_or_else(|| panic!("no offset of {symbol} inside inlined {inlined}"))
        .offset
}

/// 10 samples in `leaf` inside `inner`, called from `outer` inside `via`.
fn session(dir: &Path, bin: &Path) {
    let leaf = offset_in(bin, "leaf", "inner");
    let call = offset_in(bin, "outer", "via");
    let header = SessionHeader {
        host: "test".into(),
        event: EventConfigDesc {
            name: "cpu-clock".into(),
            frequency: Some(1000),
            callchain: true,
            ..Default::default()
        },
        cpus: vec![0],
        start_time_unix_ns: 1_795_379_395_000_000_000,
        start_monotonic_ns: 1_000_000_000,
        target: "command inl".into(),
        ..Default::default()
    };
    let mut w = SessionWriter::create(dir.join(SESSION_FILE), &header).unwrap();
    let mut enc = ChunkEncoder::new();
    enc.event(&def(APP, CookieKind::User, bin.to_str().unwrap(), 0, None));
    enc.event(&comm(APP_PID, APP_PID, "inl", true));
    enc.event(&Event::StackDef {
        id: 1,
        // A return address: the call is looked up at − 1.
        frames: vec![Frame {
            cookie: APP,
            offset: call + 1,
            kernel: false,
        }],
    });
    for _ in 0..10 {
        enc.sample_with_stack(0, APP_PID, APP_PID, false, APP, leaf, 1);
    }
    w.append_chunk(0, 1_100_000_000, enc.bytes()).unwrap();
}

fn inline_report(dir: &Path, opts: ReportOptions) -> Report {
    let s = Session::open(dir.join(SESSION_FILE)).unwrap();
    build_report(&[s], &opts, &SymbolSources::default(), &NoProgress).unwrap()
}

#[test]
fn inlined_frames_expand_leaf_and_callers_in_every_stack_output() {
    let d = tempfile::tempdir().unwrap();
    let Some(bin) = build(d.path()) else {
        return;
    };
    session(d.path(), &bin);
    let stacks = ReportOptions {
        stacks: true,
        inline: true,
        ..Default::default()
    };
    // Folded stacks: outer → via (inlined) → leaf → inner (inlined).
    let r = inline_report(d.path(), stacks.clone());
    assert!(
        !r.warnings.iter().any(|w| w.contains("DWARF")),
        "{:?}",
        r.warnings
    );
    let lines = collapsed_lines(&r, None).unwrap();
    assert_eq!(
        lines,
        [(
            "inl;outer;via (inlined);leaf;inner (inlined)".to_owned(),
            10
        )]
    );
    // Without (the default): the symbols only.
    let off = inline_report(
        d.path(),
        ReportOptions {
            inline: false,
            ..stacks.clone()
        },
    );
    assert_eq!(
        collapsed_lines(&off, None).unwrap(),
        [("inl;outer;leaf".to_owned(), 10)]
    );
    // The flat rows are the same either way.
    assert_eq!(rows(&r), rows(&off));
    assert!(r.rows.iter().all(|r| !r.inlined));

    // pprof: one location, two lines (inner then leaf), inline frames
    // announced on the mapping; names without " (inlined)".
    let mut out = Vec::new();
    render(&r, Format::Pprof, &mut out).unwrap();
    let p = pprof::read_pprof(&out).unwrap();
    let names = |l: &pprof::Location| -> Vec<String> {
        l.line
            .iter()
            .map(|x| {
                p.string(p.function[x.function_id as usize - 1].name)
                    .to_owned()
            })
            .collect()
    };
    let s = &p.sample[0];
    let frames: Vec<Vec<String>> = s
        .location_id
        .iter()
        .map(|&id| names(&p.location[id as usize - 1]))
        .collect();
    assert_eq!(frames, [vec!["inner", "leaf"], vec!["via", "outer"]]);
    assert!(p.mapping[0].has_inline_frames);
}

#[test]
fn inlined_functions_are_nodes_of_the_call_graph_and_of_children() {
    let d = tempfile::tempdir().unwrap();
    let Some(bin) = build(d.path()) else {
        return;
    };
    session(d.path(), &bin);
    let r = inline_report(
        d.path(),
        ReportOptions {
            callgraph: true,
            children: true,
            inline: true,
            ..Default::default()
        },
    );
    let cg = r.callgraph.as_ref().unwrap();
    let entry = |name: &str| {
        cg.entries
            .iter()
            .find(|e| e.symbol == name)
            .unwrap_or_else(|| panic!("no entry {name}: {cg:?}"))
    };
    let arcs = |a: &[CallArc]| -> Vec<(String, u64)> {
        a.iter().map(|a| (a.symbol.clone(), a.samples)).collect()
    };
    let inner = entry("inner (inlined)");
    assert!(inner.inlined);
    assert_eq!((inner.self_samples, inner.total), (10, 10));
    assert_eq!(arcs(&inner.callers), [("leaf".to_owned(), 10)]);
    let leaf = entry("leaf");
    assert!(!leaf.inlined);
    assert_eq!((leaf.self_samples, leaf.total), (0, 10));
    assert_eq!(arcs(&leaf.callers), [("via (inlined)".to_owned(), 10)]);
    assert_eq!(arcs(&leaf.callees), [("inner (inlined)".to_owned(), 10)]);
    assert!(leaf.callees[0].inlined);
    let via = entry("via (inlined)");
    assert_eq!(arcs(&via.callers), [("outer".to_owned(), 10)]);
    assert_eq!(entry("outer").total, 10);

    // --children: a row per inlined function, inclusive samples only; the
    // self samples stay with the symbol, as in the flat profile.
    let row = |name: &str| {
        r.rows
            .iter()
            .find(|x| x.symbol.as_deref() == Some(name))
            .unwrap_or_else(|| panic!("no row {name}"))
    };
    let inner = row("inner (inlined)");
    assert!(inner.inlined);
    assert_eq!((inner.total, inner.inclusive_total()), (0, 10));
    assert_eq!(inner.vma, None);
    let via = row("via (inlined)");
    assert_eq!((via.total, via.inclusive_total()), (0, 10));
    let leaf = row("leaf");
    assert_eq!((leaf.total, leaf.inclusive_total()), (10, 10));
    assert!(!leaf.inlined);
    assert_eq!(r.rows.iter().map(|r| r.total).sum::<u64>(), 10);

    // JSON says which rows and arcs are inlined.
    let mut out = Vec::new();
    render(&r, Format::Json, &mut out).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    let json_rows = v["rows"].as_array().unwrap();
    let inlined: Vec<&str> = json_rows
        .iter()
        .filter(|r| r["inlined"] == true)
        .map(|r| r["symbol"].as_str().unwrap())
        .collect();
    assert_eq!(inlined.len(), 2, "{inlined:?}");
    assert!(inlined.contains(&"inner (inlined)") && inlined.contains(&"via (inlined)"));
    assert!(json_rows
        .iter()
        .filter(|r| r["symbol"] == "leaf")
        .all(|r| r.get("inlined").is_none()));
    let cg_entries = v["callgraph"]["entries"].as_array().unwrap();
    assert!(cg_entries
        .iter()
        .any(|e| e["symbol"] == "inner (inlined)" && e["inlined"] == true));
}

#[test]
fn flat_profiles_do_not_read_inlined_frames() {
    let d = tempfile::tempdir().unwrap();
    let Some(bin) = build(d.path()) else {
        return;
    };
    session(d.path(), &bin);
    let r = inline_report(
        d.path(),
        ReportOptions {
            symbols: true,
            inline: true,
            ..Default::default()
        },
    );
    assert_eq!(rows(&r), [("inl".to_owned(), Some("leaf".to_owned()), 10)]);
    assert!(!r.shown.location);
}
