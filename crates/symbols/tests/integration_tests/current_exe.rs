//! The symbolizer on the test binary itself: a function found by its address in this very
//! process, converted to a file offset through /proc/self/maps.

use std::hint::black_box;
use std::path::PathBuf;

use profkit_symbols::{BinaryRequest, SymbolizerOptions};

use crate::util::*;

const MARKER_LINE: u32 = line!() + 2;
#[inline(never)]
pub fn marker_function_for_current_exe(x: u64) -> u64 {
    black_box(x)
        .wrapping_mul(0x9e37_79b9_7f4a_7c15)
        .rotate_left(7)
}

/// The file and file offset of `addr` in this process.
pub fn file_offset_in_self(addr: u64) -> (PathBuf, u64) {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    for line in maps.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (start, end) = f[0].split_once('-').unwrap();
        let start = u64::from_str_radix(start, 16).unwrap();
        let end = u64::from_str_radix(end, 16).unwrap();
        if (start..end).contains(&addr) {
            let pgoff = u64::from_str_radix(f[2], 16).unwrap();
            return (PathBuf::from(f[5]), addr - start + pgoff);
        }
    }
    panic!("{addr:#x} not mapped");
}

#[test]
fn names_a_function_of_the_test_binary_itself() {
    assert_eq!(
        marker_function_for_current_exe(1),
        marker_function_for_current_exe(1)
    );
    let addr = marker_function_for_current_exe as *const () as usize as u64;
    let (path, offset) = file_offset_in_self(addr);
    let exe = std::env::current_exe().unwrap();
    assert_eq!(
        std::fs::canonicalize(&path).unwrap(),
        std::fs::canonicalize(&exe).unwrap()
    );

    let opts = SymbolizerOptions {
        debug_info: true,
        ..isolated()
    };
    let s = symbolizer(opts);
    let r = s
        .symbolize_all(vec![(BinaryRequest::elf(&exe), vec![offset, offset + 1])])
        .remove(0);
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    let want = "integration_tests::current_exe::marker_function_for_current_exe";
    assert_eq!(r.name_at(0), Some(want));
    assert_eq!(r.name_at(1), Some(want));
    let symbol = r.symbol_at(0).unwrap();
    assert_eq!(symbol.file_offset, Some(offset));
    assert!(symbol.raw_name.starts_with("_ZN") || symbol.raw_name.starts_with("_R"));
    let loc = r.offsets[0]
        .location
        .as_ref()
        .expect("test binary has DWARF");
    assert!(loc.file.ends_with("current_exe.rs"), "{loc}");
    let line = loc.line.unwrap();
    assert!(
        (MARKER_LINE..MARKER_LINE + 3).contains(&line),
        "line {line}, fn at {MARKER_LINE}"
    );
}

#[test]
fn names_a_std_function_in_the_test_binary() {
    // A generic std function monomorphised into this binary, to exercise demangling of
    // whatever mangling this toolchain uses.
    let f: fn(&[u8]) -> Vec<u8> = <[u8]>::to_vec;
    let (path, offset) = file_offset_in_self(f as usize as u64);
    let r = symbolizer(isolated()).symbolize(&BinaryRequest::elf(path), &[offset]);
    let name = r.name_at(0).expect("named");
    assert!(name.contains("to_vec"), "{name}");
    assert!(
        !name.starts_with("_ZN") && !name.starts_with("_R"),
        "{name}"
    );
}

#[test]
fn names_a_function_of_the_system_libc_this_process_uses() {
    // A real distribution library, usually stripped down to .dynsym.
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let libc = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| p.contains("/libc.so") || p.contains("/libc-"))
        .map(PathBuf::from)
        .expect("the test binary links libc dynamically");
    let dynsyms = nm(&libc, true);
    let getpid = dynsyms
        .iter()
        .find(|s| s.name == "getpid" && s.size > 0)
        .expect("libc exports getpid");
    let aliases: Vec<&str> = dynsyms
        .iter()
        .filter(|s| s.vaddr == getpid.vaddr)
        .map(|s| s.name.as_str())
        .collect();
    let r = symbolizer(isolated()).symbolize(
        &BinaryRequest::elf(&libc),
        &[file_offset(&libc, getpid.vaddr + 1)],
    );
    let name = r.name_at(0).expect("getpid is named");
    assert!(aliases.contains(&name), "{name} not in {aliases:?}");
}

/// With `--debug-info`, the lines of one function of this test binary (tens of megabytes,
/// most of it DWARF) cost a small part of the file: `.debug_aranges`, and the unit, line
/// table and strings of that function, read by range.
#[test]
fn debug_info_for_one_function_reads_a_small_part_of_the_binary() {
    let addr = marker_function_for_current_exe as *const () as usize as u64;
    let (path, offset) = file_offset_in_self(addr);
    let len = std::fs::metadata(&path).unwrap().len();
    let s = symbolizer(SymbolizerOptions {
        debug_info: true,
        ..isolated()
    });
    let offsets: Vec<u64> = (offset..offset + 16).collect();
    let r = s.symbolize(&BinaryRequest::elf(&path), &offsets);
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    assert!(r.offsets.iter().all(|o| o
        .location
        .as_ref()
        .is_some_and(|l| l.file.ends_with("current_exe.rs"))));
    let read = s.cache_stats().dwarf_bytes_read;
    eprintln!("{read} bytes of DWARF read for one function of a {len}-byte binary");
    assert!(read > 0 && read < len / 20, "{read} of {len} bytes");
    // Asked again, nothing more is read for it.
    let again = s.symbolize(&BinaryRequest::elf(&path), &offsets);
    assert_eq!(again, r);
    assert!(s.cache_stats().dwarf_bytes_read - read < 256 << 10);
}
