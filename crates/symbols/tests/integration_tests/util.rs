//! Fixture helpers: build C, C++ and Rust programs at test time and read their layout with
//! binutils (`nm`, `readelf`), independently of the code under test.

use std::path::{Path, PathBuf};
use std::process::Command;

use profkit_symbols::{KallsymsSource, Symbolizer, SymbolizerOptions};

/// Runs a command, panicking with its stderr if it fails.
pub fn run(cmd: &mut Command) -> String {
    let out = cmd
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

/// Writes `source` to `dir/name` and returns the path.
pub fn write(dir: &Path, name: &str, source: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, source).unwrap();
    path
}

/// Compiles with `compiler` (`cc`, `c++`), build-id on unless `args` says otherwise.
pub fn compile(compiler: &str, src: &Path, out: &Path, args: &[&str]) -> PathBuf {
    let mut cmd = Command::new(compiler);
    if !args.iter().any(|a| a.starts_with("-Wl,--build-id")) {
        cmd.arg("-Wl,--build-id");
    }
    cmd.args(args).arg("-o").arg(out).arg(src);
    run(&mut cmd);
    out.to_owned()
}

/// A symbol as `nm -S` lists it.
#[derive(Clone, Debug)]
pub struct NmSym {
    pub vaddr: u64,
    pub size: u64,
    pub name: String,
}

/// Defined symbols of `bin` (`nm -S --defined-only`, or `-D` for the dynamic table).
pub fn nm(bin: &Path, dynamic: bool) -> Vec<NmSym> {
    let mut cmd = Command::new("nm");
    cmd.args(["-S", "--defined-only"]);
    if dynamic {
        cmd.arg("-D");
    }
    run(cmd.arg(bin))
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.len() == 4).then(|| NmSym {
                vaddr: u64::from_str_radix(f[0], 16).unwrap(),
                size: u64::from_str_radix(f[1], 16).unwrap(),
                name: f[3].split('@').next().unwrap().to_owned(),
            })
        })
        .collect()
}

/// The symbol `name` of `bin`.
pub fn sym(bin: &Path, name: &str) -> NmSym {
    nm(bin, false)
        .into_iter()
        .find(|s| s.name == name)
        .unwrap_or_else(|| panic!("{name} not in {}", bin.display()))
}

/// PT_LOAD headers of `bin` as (p_offset, p_vaddr, p_filesz), from `readelf -lW`.
pub fn loads(bin: &Path) -> Vec<(u64, u64, u64)> {
    let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
    run(Command::new("readelf").arg("-lW").arg(bin))
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            (f.first() == Some(&"LOAD")).then(|| (hex(f[1]), hex(f[2]), hex(f[4])))
        })
        .collect()
}

/// The file offset of `vaddr` in `bin`, through its program headers.
pub fn file_offset(bin: &Path, vaddr: u64) -> u64 {
    loads(bin)
        .into_iter()
        .find(|&(_, v, size)| vaddr >= v && vaddr < v + size)
        .map(|(off, v, _)| off + (vaddr - v))
        .unwrap_or_else(|| panic!("{vaddr:#x} not in a PT_LOAD of {}", bin.display()))
}

/// The GNU build-id of `bin` (`readelf -n`).
pub fn build_id(bin: &Path) -> Vec<u8> {
    let text = run(Command::new("readelf").arg("-n").arg(bin));
    let hex = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: "))
        .unwrap_or_else(|| panic!("no build-id in {}", bin.display()));
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
        .collect()
}

/// The 1-based line of the first line of `source` containing `marker`.
pub fn line_of(source: &str, marker: &str) -> u32 {
    source
        .lines()
        .position(|l| l.contains(marker))
        .unwrap_or_else(|| panic!("{marker} not in source")) as u32
        + 1
}

/// Options that touch nothing of this machine's: no kallsyms, no system debug dirs.
pub fn isolated() -> SymbolizerOptions {
    SymbolizerOptions {
        kallsyms: KallsymsSource::None,
        debug_dirs: Vec::new(),
        ..SymbolizerOptions::default()
    }
}

pub fn symbolizer(opts: SymbolizerOptions) -> Symbolizer {
    Symbolizer::new(opts).expect("valid options")
}

/// `testdata/symbols/NAME` in the repository.
pub fn testdata(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/symbols")
        .join(name)
}
