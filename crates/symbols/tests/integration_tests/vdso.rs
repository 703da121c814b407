//! `[vdso]` samples, resolved against this process's own vDSO.

use std::io::{Read, Seek, SeekFrom};

use profkit_symbols::BinaryRequest;

use crate::util::*;

/// This process's vDSO bytes, read independently of the code under test.
fn own_vdso() -> Vec<u8> {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let line = maps
        .lines()
        .find(|l| l.ends_with("[vdso]"))
        .expect("a vDSO");
    let (start, end) = line
        .split_whitespace()
        .next()
        .unwrap()
        .split_once('-')
        .unwrap();
    let start = u64::from_str_radix(start, 16).unwrap();
    let end = u64::from_str_radix(end, 16).unwrap();
    let mut mem = std::fs::File::open("/proc/self/mem").unwrap();
    mem.seek(SeekFrom::Start(start)).unwrap();
    let mut data = vec![0; (end - start) as usize];
    mem.read_exact(&mut data).unwrap();
    data
}

#[test]
fn vdso_samples_are_named_from_this_processs_vdso() {
    let dir = tempfile::tempdir().unwrap();
    let image = dir.path().join("vdso.so");
    std::fs::write(&image, own_vdso()).unwrap();
    let syms = nm(&image, true);
    let target = syms
        .iter()
        .find(|s| s.name.ends_with("clock_gettime") && s.size > 2)
        .expect("the vDSO exports clock_gettime");
    let aliases: Vec<&str> = syms
        .iter()
        .filter(|s| s.vaddr == target.vaddr)
        .map(|s| s.name.as_str())
        .collect();
    let offset = file_offset(&image, target.vaddr + 1);
    let id = build_id(&image);
    let s = symbolizer(isolated());
    let r = s.symbolize_all(vec![
        (
            BinaryRequest::vdso("[vdso]").with_build_id(id.clone()),
            vec![offset],
        ),
        (BinaryRequest::vdso(&image), vec![offset]),
        (
            BinaryRequest::vdso("[vdso]").with_build_id(vec![1, 2, 3]),
            vec![offset],
        ),
    ]);
    for result in &r[..2] {
        assert!(result.warnings.is_empty(), "{:?}", result.warnings);
        let name = result.name_at(0).expect("named");
        assert!(aliases.contains(&name), "{name} not in {aliases:?}");
    }
    assert_eq!(r[2].name_at(0), None);
    assert!(
        r[2].warnings[0].contains("binary changed since recording: [vdso]"),
        "{:?}",
        r[2].warnings
    );
}
