//! `--annotate` on the checked-in `ratio` session (testdata/sessions):
//! the chosen function's lines and instructions, hot lines coloured only
//! when asked.

use super::*;

fn ratio(annotate: AnnotateOptions) -> Report {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../testdata");
    let bin = root.join("sessions/bin");
    let s = Session::open(root.join("sessions/ratio")).unwrap();
    let sources = SymbolSources {
        sysroot: Some(bin.clone()),
        search_dirs: vec![bin],
        ..Default::default()
    };
    let opts = ReportOptions {
        annotate: Some(AnnotateOptions {
            source_dirs: vec![root.join("workloads")],
            ..annotate
        }),
        ..Default::default()
    };
    build_report(&[s], &opts, &sources, &NoProgress).unwrap()
}

#[test]
fn a_functions_lines_add_up_to_its_samples_and_hot_lines_are_coloured_on_request() {
    let r = ratio(AnnotateOptions {
        symbol: Some("f_a".into()),
        ..Default::default()
    });
    let list = r.annotations.as_ref().unwrap();
    assert_eq!(list.len(), 1);
    let a = &list[0];
    assert_eq!((a.symbol.as_str(), &*a.image), ("f_a", "shares"));
    let src = a.source.as_ref().unwrap();
    let lines: u64 = src
        .files
        .iter()
        .flat_map(|f| &f.lines)
        .map(|l| l.samples[0])
        .sum();
    assert_eq!(lines + src.without_line[0], a.samples[0]);
    assert!(a.assembly.is_none(), "source only by default");
    let render_to = |color: bool| {
        let mut out = Vec::new();
        render_colored(&r, Format::Text, &mut out, color).unwrap();
        String::from_utf8(out).unwrap()
    };
    let plain = render_to(false);
    assert!(!plain.contains('\x1b'), "{plain}");
    let coloured = render_to(true);
    let hot = coloured
        .lines()
        .find(|l| l.contains("x = x * 6364136223846793005UL + i;"))
        .unwrap();
    assert!(hot.starts_with("\x1b[1;31m"), "{hot:?}");
    // Without the colour codes the coloured text is the plain one.
    assert_eq!(
        coloured
            .replace("\x1b[1;31m", "")
            .replace("\x1b[32m", "")
            .replace("\x1b[0m", ""),
        plain
    );
}

#[test]
fn assembly_alone_reads_no_lines_and_mixed_has_both() {
    let asm = ratio(AnnotateOptions {
        symbol: Some("f_b".into()),
        assembly: true,
        ..Default::default()
    });
    let a = &asm.annotations.as_ref().unwrap()[0];
    assert!(a.source.is_none());
    let insns = a.assembly.as_ref().unwrap();
    assert!(insns.iter().all(|i| i.line.is_none()), "no DWARF read");
    let total: u64 = insns.iter().map(|i| i.samples[0]).sum();
    assert_eq!(total, a.samples[0]);
    let mixed = ratio(AnnotateOptions {
        symbol: Some("f_b".into()),
        assembly: true,
        source: true,
        ..Default::default()
    });
    let a = &mixed.annotations.as_ref().unwrap()[0];
    assert!(a.source.is_some());
    assert!(a
        .assembly
        .as_ref()
        .unwrap()
        .iter()
        .any(|i| i.line.is_some()));
}
