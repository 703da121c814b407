//! Issue 14: a report's memory is bounded by the symbol tables of the
//! binaries it names, not by their size. Its own test binary, so the
//! process's peak RSS is this test's.
//!
//! A binary with 20,000 functions, debug info and a 96 MiB constant table
//! (the bulk of real binaries is code, data and DWARF a profile does not
//! need); a session with 2,000 of its functions sampled. The report's peak
//! RSS growth must stay under its symbol and string tables' size plus
//! 8 MiB: reading the file whole (as before) costs its size, over 100 MB.

use std::path::Path;
use std::process::Command;

use profkit_eventlog::*;
use profkit_report::*;

const FUNCTIONS: usize = 20_000;

/// A field of /proc/self/status, in KiB.
fn status_kib(field: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap();
    s.lines()
        .find_map(|l| {
            l.strip_prefix(field)?
                .trim()
                .strip_suffix("kB")?
                .trim()
                .parse()
                .ok()
        })
        .unwrap()
}

/// (name, file offset) of the functions `f_*`, and the sizes of
/// `.symtab` + `.strtab`, from `readelf` (a child process: nothing of the
/// binary is read into this one).
fn functions(bin: &Path) -> (Vec<u64>, u64) {
    let out = Command::new("readelf")
        .arg("-lsSW")
        .arg(bin)
        .output()
        .unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    let mut loads = Vec::new();
    let mut tables = 0u64;
    let mut offsets = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap_or(0);
        if f.first() == Some(&"LOAD") {
            // LOAD offset vaddr paddr filesz memsz flags align
            loads.push((hex(f[1]), hex(f[2]), hex(f[4])));
        } else if line.contains(".symtab") || line.contains(" .strtab") {
            // [Nr] Name Type Address Off Size ...
            if let Some(i) = f.iter().position(|x| *x == "SYMTAB" || *x == "STRTAB") {
                tables += hex(f[i + 3]);
            }
        } else if f.len() == 8 && f[3] == "FUNC" && f[7].starts_with("f_") {
            let vaddr = hex(f[1]);
            if let Some((off, va, _)) = loads
                .iter()
                .find(|(_, va, sz)| vaddr >= *va && vaddr < va + sz)
            {
                offsets.push(off + (vaddr - va));
            }
        }
    }
    (offsets, tables)
}

#[test]
fn a_report_costs_the_symbol_tables_of_what_it_names_not_the_binary() {
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("big.c");
    let mut c = String::from(
        "const unsigned char table[96 << 20] = {1};\n\
         int use(int i) { return table[i]; }\n",
    );
    for i in 0..FUNCTIONS {
        c.push_str(&format!(
            "int f_{i}(int x) {{ return x * {i} + use(x); }}\n"
        ));
    }
    c.push_str("int main(void) { return f_0(1); }\n");
    std::fs::write(&src, c).unwrap();
    let bin = tmp.path().join("big");
    let o = Command::new("cc")
        .args(["-O0", "-g", "-o"])
        .arg(&bin)
        .arg(&src)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let size = std::fs::metadata(&bin).unwrap().len();
    let (offsets, tables) = functions(&bin);
    assert_eq!(offsets.len(), FUNCTIONS, "readelf found the functions");
    assert!(
        size > 96 << 20 && tables > 0,
        "{size} bytes, tables {tables}"
    );

    // A session: 2,000 functions sampled, 5 samples each.
    let session = tmp.path().join(SESSION_FILE);
    let mut w = SessionWriter::create(
        &session,
        &SessionHeader {
            cpus: vec![0],
            ..Default::default()
        },
    )
    .unwrap();
    let mut enc = ChunkEncoder::new();
    let binary = file_entry(bin.to_str().unwrap(), None, 0, 0, 0);
    let cookie = binary.cookie;
    enc.event(&Event::CookieDef(binary));
    for &off in offsets.iter().step_by(FUNCTIONS / 2000) {
        for _ in 0..5 {
            enc.sample(0, 10, 10, false, cookie, off + 4);
        }
    }
    w.append_chunk(0, 1, enc.bytes()).unwrap();
    drop(w);

    let opts = ReportOptions {
        symbols: true,
        ..Default::default()
    };
    let s = Session::open(&session).unwrap();
    // Peak RSS from here on (writing 5 resets VmHWM to the current RSS).
    std::fs::write("/proc/self/clear_refs", "5").unwrap();
    let before = status_kib("VmRSS:");
    let r = build_report(&[s], &opts, &SymbolSources::default(), &NoProgress).unwrap();
    let peak = status_kib("VmHWM:");
    let grew = (peak.saturating_sub(before)) << 10;
    let named = r
        .rows
        .iter()
        .filter(|row| row.symbol.as_deref().is_some_and(|n| n.starts_with("f_")))
        .count();
    assert_eq!(named, 2000, "every sampled function named");
    let bound = tables + (8 << 20);
    eprintln!(
        "binary {size} bytes, symbol tables {tables}; report peak RSS growth {grew} bytes (bound {bound})"
    );
    assert!(
        grew < bound,
        "the report grew by {grew} bytes, over {bound} (symbol tables {tables} + 8 MiB); the binary is {size}"
    );
}
