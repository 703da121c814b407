//! Mangled names: C++ from g++, Rust legacy and v0 from rustc, and the raw-name switch.

use std::process::Command;

use profkit_symbols::{BinaryRequest, SymbolizerOptions};

use crate::util::*;

const CPP: &str = r#"
namespace ns {
__attribute__((noinline)) int work(int x) { return x * 7; }
template <typename T> __attribute__((noinline)) T twice(T x) { return x + x; }
}
int main(int argc, char **) { return ns::work(argc) + ns::twice<long>(argc); }
"#;

#[test]
fn cpp_names_are_demangled_unless_raw_is_asked() {
    let dir = tempfile::tempdir().unwrap();
    let src = write(dir.path(), "fixture.cpp", CPP);
    let bin = compile("c++", &src, &dir.path().join("cpp"), &["-O1"]);
    let work = sym(&bin, "_ZN2ns4workEi");
    let twice = sym(&bin, "_ZN2ns5twiceIlEET_S1_");
    let offsets = [
        file_offset(&bin, work.vaddr),
        file_offset(&bin, twice.vaddr + 1),
    ];

    let r = symbolizer(isolated()).symbolize(&BinaryRequest::elf(&bin), &offsets);
    assert_eq!(r.name_at(0), Some("ns::work(int)"));
    assert_eq!(r.name_at(1), Some("long ns::twice<long>(long)"));
    assert_eq!(r.symbol_at(0).unwrap().raw_name, "_ZN2ns4workEi");

    let raw = SymbolizerOptions {
        demangle: false,
        ..isolated()
    };
    let r = symbolizer(raw).symbolize(&BinaryRequest::elf(&bin), &offsets);
    assert_eq!(r.name_at(0), Some("_ZN2ns4workEi"));
    assert_eq!(r.name_at(1), Some("_ZN2ns5twiceIlEET_S1_"));
}

const RUST: &str = r#"
#[inline(never)]
pub fn hot_rust_fn(x: u64) -> u64 {
    std::hint::black_box(x).wrapping_mul(7)
}
fn main() {
    println!("{}", hot_rust_fn(std::env::args().count() as u64));
}
"#;

/// Compiles the Rust fixture with extra `args`; returns (binary, raw name of hot_rust_fn).
fn rust_fixture(dir: &std::path::Path, name: &str, args: &[&str]) -> (std::path::PathBuf, NmSym) {
    let src = write(dir, "fixture.rs", RUST);
    let bin = dir.join(name);
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    run(Command::new(rustc)
        .args([
            "--edition=2021",
            "-C",
            "opt-level=1",
            "-C",
            "link-arg=-Wl,--build-id",
            "--crate-name",
            "fixture",
        ])
        .args(args)
        .arg("-o")
        .arg(&bin)
        .arg(&src));
    let hot = nm(&bin, false)
        .into_iter()
        .find(|s| s.name.contains("hot_rust_fn"))
        .expect("hot_rust_fn in the Rust fixture");
    (bin, hot)
}

#[test]
fn rust_legacy_and_v0_names_are_demangled() {
    let dir = tempfile::tempdir().unwrap();
    let (legacy, legacy_sym) = rust_fixture(dir.path(), "legacy", &[]);
    let (v0, v0_sym) = rust_fixture(dir.path(), "v0", &["-C", "symbol-mangling-version=v0"]);
    assert!(v0_sym.name.starts_with("_R"), "{}", v0_sym.name);
    let s = symbolizer(isolated());
    for (bin, hot) in [(&legacy, &legacy_sym), (&v0, &v0_sym)] {
        let r = s.symbolize(&BinaryRequest::elf(bin), &[file_offset(bin, hot.vaddr + 1)]);
        assert_eq!(r.name_at(0), Some("fixture::hot_rust_fn"), "{}", hot.name);
        assert_eq!(r.symbol_at(0).unwrap().raw_name, hot.name);
    }
}
