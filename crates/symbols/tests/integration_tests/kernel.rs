//! Kernel and module samples against the kallsyms fixtures in testdata/symbols/.

use std::process::Command;

use profkit_symbols::{BinaryRequest, KallsymsSource, SymbolOrigin, Symbolizer, SymbolizerOptions};

use crate::util::*;

const TEXT: u64 = 0xffff_ffff_a000_0000;
const FIXTURE_MOD: u64 = 0xffff_ffff_c040_0000;

fn with_kallsyms(file: &str) -> Symbolizer {
    symbolizer(SymbolizerOptions {
        kallsyms: KallsymsSource::File(testdata(file)),
        ..isolated()
    })
}

#[test]
fn kernel_offsets_resolve_relative_to_text() {
    let s = with_kallsyms("kallsyms");
    let offsets = [0x0, 0x48, 0x50, 0x1ff, 0x250, 0x310, 0x390, 0xfff, 0x1000];
    let r = s.symbolize(&BinaryRequest::kernel(TEXT), &offsets);
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    let names: Vec<_> = (0..offsets.len()).map(|i| r.name_at(i)).collect();
    assert_eq!(
        names,
        [
            Some("_text"),
            Some("__pfx_do_one_initcall"),
            Some("do_one_initcall"),
            Some("do_one_initcall"),
            Some("schedule"),
            Some("arch_weak_hook"),
            Some("local_helper"),
            Some("local_helper"),
            None, // at _etext: past the kernel's text
        ]
    );
    assert_eq!(r.offsets[2].address, Some(TEXT + 0x50));
    let schedule = r.symbol_at(4).unwrap();
    assert_eq!((schedule.start, schedule.size), (TEXT + 0x200, 0x100));
    assert_eq!(schedule.origin, SymbolOrigin::Kallsyms);
}

#[test]
fn module_offsets_resolve_in_that_modules_symbols() {
    let s = with_kallsyms("kallsyms");
    let r = s.symbolize_all(vec![
        (
            BinaryRequest::module("[fixture_mod]", FIXTURE_MOD),
            vec![0x10, 0x110],
        ),
        (
            BinaryRequest::module(
                "/lib/modules/6.1.0/extra/other-mod.ko",
                0xffff_ffff_c050_0000,
            ),
            vec![0x4],
        ),
        (
            BinaryRequest::module("[no_such_mod]", 0xffff_ffff_c060_0000),
            vec![0x4],
        ),
    ]);
    assert_eq!(r[0].name_at(0), Some("fixture_mod_read"));
    assert_eq!(r[0].name_at(1), Some("fixture_mod_write"));
    assert_eq!(r[0].offsets[1].address, Some(FIXTURE_MOD + 0x110));
    assert_eq!(r[1].name_at(0), Some("other_fn"));
    assert_eq!(r[2].name_at(0), None);
    assert!(
        r[2].warnings[0].contains("module no_such_mod is neither in kallsyms"),
        "{:?}",
        r[2].warnings
    );
}

#[test]
fn hidden_kallsyms_attributes_to_kernel_and_says_so() {
    let s = with_kallsyms("kallsyms-hidden");
    let r = s.symbolize_all(vec![
        (BinaryRequest::kernel(TEXT), vec![0x50, 0x250]),
        (
            BinaryRequest::module("[fixture_mod]", FIXTURE_MOD),
            vec![0x10],
        ),
    ]);
    assert_eq!(r[0].name_at(0), Some("[kernel]"));
    assert_eq!(r[0].name_at(1), Some("[kernel]"));
    assert_eq!(r[0].symbols.len(), 1);
    assert_eq!(r[0].symbols[0].origin, SymbolOrigin::KernelUnresolved);
    assert_eq!(r[0].warnings.len(), 1);
    assert!(
        r[0].warnings[0].contains("kernel addresses hidden"),
        "{:?}",
        r[0].warnings
    );
    assert!(
        r[0].warnings[0].contains("kptr_restrict"),
        "{:?}",
        r[0].warnings
    );
    assert_eq!(r[1].name_at(0), Some("[fixture_mod]"));
}

#[test]
fn relocated_kernel_uses_kallsyms_text_and_warns() {
    let s = with_kallsyms("kallsyms");
    // Recorded under another KASLR slide: offsets from _text are still right.
    let r = s.symbolize(&BinaryRequest::kernel(0xffff_ffff_b000_0000), &[0x250]);
    assert_eq!(r.name_at(0), Some("schedule"));
    assert!(
        r.warnings[0].contains("kernel relocated since recording"),
        "{:?}",
        r.warnings
    );
}

#[test]
fn kallsyms_given_as_text() {
    let text = std::fs::read_to_string(testdata("kallsyms")).unwrap();
    let s = symbolizer(SymbolizerOptions {
        kallsyms: KallsymsSource::Text(text),
        ..isolated()
    });
    let r = s.symbolize(&BinaryRequest::kernel(TEXT), &[0x250]);
    assert_eq!(r.name_at(0), Some("schedule"));
}

#[test]
fn live_kallsyms_never_misattributes() {
    // Whatever this machine allows: either real names inside _text.._etext, or [kernel].
    let s = symbolizer(SymbolizerOptions::default());
    let r = s.symbolize(&BinaryRequest::kernel(0), &[0x100]);
    let name = r.name_at(0);
    if name == Some("[kernel]") {
        assert!(!r.warnings.is_empty());
    } else {
        assert!(name.is_some(), "{:?}", r.warnings);
    }
}

const MODULE_C: &str = r#"
int mod_first(int x) { return x * 3 + 1; }
int mod_second(int x) { return mod_first(x) * 5 - 1; }
"#;

#[test]
fn module_not_in_kallsyms_is_read_from_its_ko_file() {
    let dir = tempfile::tempdir().unwrap();
    let src = write(dir.path(), "fixmod.c", MODULE_C);
    let ko = dir.path().join("fixmod.ko");
    run(Command::new("cc")
        .args(["-c", "-O1", "-fno-asynchronous-unwind-tables", "-o"])
        .arg(&ko)
        .arg(&src));
    // In a relocatable object nm gives section-relative values; .text is the only code
    // section, so they are the offsets into the module's text.
    let second = sym(&ko, "mod_second");
    let s = with_kallsyms("kallsyms");
    let r = s.symbolize(
        &BinaryRequest::module(&ko, 0xffff_ffff_c070_0000),
        &[second.vaddr + 1],
    );
    assert_eq!(r.name_at(0), Some("mod_second"));
    assert_eq!(r.symbol_at(0).unwrap().origin, SymbolOrigin::ModuleFile);
    assert!(
        r.warnings[0].contains("not in kallsyms"),
        "{:?}",
        r.warnings
    );
}
