//! Trimming a kallsyms file to the lines a report needs, next to the
//! kallsyms parser (`kallsyms.rs`) it must agree with.
//!
//! A kallsyms copy holds ~120,000 symbols (5 MB); a report touches a few
//! hundred. Parsed whole, it costs the symbolizer ~80 ms and ~20 MB, more
//! than everything else in a 1 M-sample report. So a report reads the
//! file twice as a stream — once for the text-symbol addresses of each
//! table (kernel, each module), once to copy out the lines at the starts
//! nearest below each sampled address — and hands the symbolizer that
//! small text (`KallsymsSource::Text`).
//!
//! The symbolizer names every sampled address exactly as it would from the
//! whole file: for an address, the whole table's answer is the text symbol
//! with the greatest start at or below it (among aliases at that start, the
//! global one listed first), and every line at that start is kept, in file
//! order, together with `_text` (relocation) and `_etext` (the end of the
//! last kernel symbol). Only symbol *sizes* may differ (a size is the
//! distance to the next kept start), and the report shows none.
//!
//! ```text
//!  kallsyms:  a0 T f   a8 t g   b0 T h   c0 d data   d0 T k        sampled: a9, b4
//!  nearest start ≤ a9 = a8 (g), ≤ b4 = b0 (h)  →  kept: _text, a8 g, b0 h, _etext
//! ```

use std::collections::{BTreeSet, HashMap};

use std::io::{self, BufRead, BufReader, Read};
use std::path::Path;

use profkit_eventlog::module_name;

/// What to keep: absolute addresses sampled in the kernel and, per module
/// (name normalised as kallsyms spells it), in each module.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KallsymsWanted {
    /// Kernel offsets (relative to `_text`, or to `kernel_base` when the
    /// file has no `_text`).
    pub kernel_offsets: Vec<u64>,
    /// The recorded `_text`.
    pub kernel_base: u64,
    /// Module name → absolute addresses.
    pub modules: HashMap<String, Vec<u64>>,
}

/// A parsed line: address, type, name, module.
type Line<'a> = (u64, u8, &'a [u8], Option<&'a [u8]>);

/// One parsed line: address, type, name, module (bytes; kallsyms is
/// ASCII). Hand-rolled because this runs on 120,000 lines twice: splitting
/// on whitespace and UTF-8 checks were most of the report's time.
fn parse(line: &[u8]) -> Option<Line<'_>> {
    let (addr, rest) = parse_addr(line)?;
    let (&kind, rest) = rest.split_first()?;
    let rest = rest.strip_prefix(b" ")?;
    let end = memchr::memchr2(b'\t', b' ', rest).unwrap_or(rest.len());
    let (name, tail) = rest.split_at(end);
    if name.is_empty() {
        return None;
    }
    let tail = tail.trim_ascii();
    let module = tail.strip_prefix(b"[").and_then(|m| m.strip_suffix(b"]"));
    Some((addr, kind, name, module))
}

/// The leading hex address and what follows its space.
#[inline]
fn parse_addr(line: &[u8]) -> Option<(u64, &[u8])> {
    let mut addr = 0u64;
    for (i, &b) in line.iter().enumerate().take(17) {
        let d = match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'f' => b - b'a' + 10,
            b'A'..=b'F' => b - b'A' + 10,
            b' ' if i > 0 => return Some((addr, &line[i + 1..])),
            _ => return None,
        };
        addr = addr << 4 | u64::from(d);
    }
    None
}

fn is_text(kind: u8) -> bool {
    matches!(kind, b't' | b'T' | b'w' | b'W')
}

/// Where kallsyms text comes from.
#[derive(Clone, Copy, Debug)]
pub enum KallsymsInput<'a> {
    /// A file, streamed (twice).
    File(&'a Path),
    /// Text already read (`/proc/kallsyms`, which is slow to generate, is
    /// read once).
    Bytes(&'a [u8]),
}

/// Calls `f` with each line (without its newline).
fn for_each_line(src: KallsymsInput<'_>, mut f: impl FnMut(&[u8])) -> io::Result<()> {
    let path = match src {
        KallsymsInput::Bytes(mut rest) => {
            while let Some(i) = memchr::memchr(b'\n', rest) {
                f(&rest[..i]);
                rest = &rest[i + 1..];
            }
            if !rest.is_empty() {
                f(rest);
            }
            return Ok(());
        }
        KallsymsInput::File(path) => path,
    };
    // A regular file (or procfs), read no further than the text limit.
    let (file, _) = crate::files::open_regular(path)?;
    let mut r = BufReader::with_capacity(1 << 18, file.take(crate::files::MAX_TEXT_BYTES));
    let mut carry: Vec<u8> = Vec::new();
    loop {
        let buf = r.fill_buf()?;
        if buf.is_empty() {
            break;
        }
        let n = buf.len();
        let mut at = 0;
        if !carry.is_empty() {
            match memchr::memchr(b'\n', buf) {
                Some(i) => {
                    carry.extend_from_slice(&buf[..i]);
                    f(&carry);
                    carry.clear();
                    at = i + 1;
                }
                None => {
                    carry.extend_from_slice(buf);
                    r.consume(n);
                    continue;
                }
            }
        }
        let mut rest = &buf[at..];
        while let Some(i) = memchr::memchr(b'\n', rest) {
            f(&rest[..i]);
            rest = &rest[i + 1..];
        }
        carry.extend_from_slice(rest);
        r.consume(n);
    }
    if !carry.is_empty() {
        f(&carry);
    }
    Ok(())
}

/// What [`trim_kallsyms`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum TrimmedKallsyms {
    /// The lines needed.
    Text(String),
    /// Every address is zero (`kptr_restrict`): nothing to trim.
    Hidden,
}

/// The lines of kallsyms that `wanted` needs: handed to the symbolizer as
/// [`crate::KallsymsSource::Text`], they name every wanted address as the
/// whole file would.
///
/// # Errors
/// The file cannot be opened or read.
pub fn trim_kallsyms(
    src: KallsymsInput<'_>,
    wanted: &KallsymsWanted,
) -> io::Result<TrimmedKallsyms> {
    // Pass 1: text-symbol starts per table, `_text`, and whether addresses
    // are hidden (all zero).
    let mut kernel_starts = Vec::new();
    let mut module_starts: HashMap<String, Vec<u64>> = HashMap::new();
    let (mut text, mut etext) = (None, None);
    let (mut any, mut all_zero) = (false, true);
    for_each_line(src, |line| {
        if let Some((addr, kind, name, module)) = parse(line) {
            any = true;
            all_zero &= addr == 0;
            match module {
                None => {
                    if name == b"_text" {
                        text = Some(addr);
                    } else if name == b"_etext" {
                        etext = Some(addr);
                    }
                    if is_text(kind) {
                        kernel_starts.push(addr);
                    }
                }
                Some(m) if is_text(kind) && !wanted.modules.is_empty() => {
                    let m = module_name(&String::from_utf8_lossy(m));
                    if wanted.modules.contains_key(&m) {
                        module_starts.entry(m).or_default().push(addr);
                    }
                }
                Some(_) => {}
            }
        }
    })?;
    if any && all_zero {
        return Ok(TrimmedKallsyms::Hidden);
    }
    let nearest = |starts: &mut Vec<u64>, addrs: &mut dyn Iterator<Item = u64>| {
        starts.sort_unstable();
        starts.dedup();
        let mut keep = BTreeSet::new();
        for a in addrs {
            let i = starts.partition_point(|&s| s <= a);
            // No start below: keep the first, so the table still exists and
            // the lookup fails as it would on the whole file.
            if let Some(&s) = starts.get(i.saturating_sub(1)) {
                keep.insert(s);
            }
        }
        keep
    };
    let base = text.unwrap_or(wanted.kernel_base);
    let keep_kernel = nearest(
        &mut kernel_starts,
        &mut wanted.kernel_offsets.iter().map(|&o| base.wrapping_add(o)),
    );
    drop(kernel_starts);
    let keep_modules: HashMap<String, BTreeSet<u64>> = module_starts
        .into_iter()
        .map(|(m, mut starts)| {
            let addrs = wanted.modules.get(&m).cloned().unwrap_or_default();
            let keep = nearest(&mut starts, &mut addrs.into_iter());
            (m, keep)
        })
        .collect();

    // Pass 2: copy the lines at the kept starts. Most lines are rejected on
    // their address alone.
    let mut addresses: Vec<u64> = keep_kernel.iter().copied().collect();
    addresses.extend(text);
    addresses.extend(etext);
    for k in keep_modules.values() {
        addresses.extend(k);
    }
    addresses.sort_unstable();
    addresses.dedup();
    let mut out = String::new();
    for_each_line(src, |line| {
        if parse_addr(line).is_none_or(|(a, _)| addresses.binary_search(&a).is_err()) {
            return;
        }
        if let Some((addr, kind, name, module)) = parse(line) {
            let keep = match module {
                None => {
                    name == b"_text"
                        || name == b"_etext"
                        || (is_text(kind) && keep_kernel.contains(&addr))
                }
                Some(m) => {
                    is_text(kind)
                        && !keep_modules.is_empty()
                        && keep_modules
                            .get(&module_name(&String::from_utf8_lossy(m)))
                            .is_some_and(|k| k.contains(&addr))
                }
            };
            if keep {
                out.push_str(&String::from_utf8_lossy(line));
                out.push('\n');
            }
        }
    })?;
    Ok(TrimmedKallsyms::Text(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIXTURE: &str = "ffffffffa0000000 T _text
ffffffffa0000000 T _stext
ffffffffa0000040 t __pfx_do_one_initcall
ffffffffa0000050 T do_one_initcall
ffffffffa0000050 t do_one_initcall_alias
ffffffffa0000200 T schedule
ffffffffa0000300 W arch_weak_hook
ffffffffa0000400 D jiffies
ffffffffa0001000 T _etext
ffffffffc0400000 t fixture_mod_read\t[fixture_mod]
ffffffffc0400100 T fixture_mod_write\t[fixture_mod]
ffffffffc0500000 t other_fn\t[other_mod]
";

    fn trimmed(wanted: &KallsymsWanted) -> String {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("kallsyms");
        std::fs::write(&p, FIXTURE).unwrap();
        let from_file = trim_kallsyms(KallsymsInput::File(&p), wanted).unwrap();
        let from_bytes = trim_kallsyms(KallsymsInput::Bytes(FIXTURE.as_bytes()), wanted).unwrap();
        assert_eq!(from_file, from_bytes);
        match from_file {
            TrimmedKallsyms::Text(t) => t,
            TrimmedKallsyms::Hidden => panic!("hidden"),
        }
    }

    #[test]
    fn keeps_the_nearest_starts_with_their_aliases() {
        let w = KallsymsWanted {
            kernel_offsets: vec![0x60, 0x210, 0x410],
            kernel_base: 0xffff_ffff_a000_0000,
            modules: [("fixture_mod".to_owned(), vec![0xffff_ffff_c040_0110])].into(),
        };
        assert_eq!(
            trimmed(&w),
            "ffffffffa0000000 T _text
ffffffffa0000050 T do_one_initcall
ffffffffa0000050 t do_one_initcall_alias
ffffffffa0000200 T schedule
ffffffffa0000300 W arch_weak_hook
ffffffffa0001000 T _etext
ffffffffc0400100 T fixture_mod_write\t[fixture_mod]
"
        );
    }

    #[test]
    fn a_relocated_kernel_is_looked_up_at_the_files_text() {
        // Recorded _text differs: the symbolizer uses the file's, so do we.
        let w = KallsymsWanted {
            kernel_offsets: vec![0x200],
            kernel_base: 0xffff_ffff_b000_0000,
            modules: HashMap::new(),
        };
        assert!(trimmed(&w).contains(" schedule\n"));
    }

    #[test]
    fn hidden_addresses_stay_hidden() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("kallsyms");
        std::fs::write(
            &p,
            "0000000000000000 T _text\n0000000000000000 T schedule\n",
        )
        .unwrap();
        let w = KallsymsWanted {
            kernel_offsets: vec![0x10],
            ..Default::default()
        };
        assert_eq!(
            trim_kallsyms(KallsymsInput::File(&p), &w).unwrap(),
            TrimmedKallsyms::Hidden
        );
    }

    #[test]
    fn the_parser_names_every_wanted_address_as_from_the_whole_file() {
        use crate::kallsyms::Kallsyms;
        use crate::table::SymbolTable;
        let kernel_base = 0xffff_ffff_a000_0000;
        let kernel_offsets: Vec<u64> = (0..0x1100).step_by(4).collect();
        let module_addrs: Vec<u64> = (0xffff_ffff_c040_0000..0xffff_ffff_c040_0200)
            .step_by(4)
            .collect();
        let w = KallsymsWanted {
            kernel_offsets: kernel_offsets.clone(),
            kernel_base,
            modules: [("fixture_mod".to_owned(), module_addrs.clone())].into(),
        };
        let whole = Kallsyms::parse(FIXTURE);
        let part = Kallsyms::parse(&trimmed(&w));
        let name = |t: &SymbolTable, a: u64| t.lookup(a).map(|i| t.entry(i).name.to_string());
        assert_eq!(whole.text, part.text);
        let text = whole.text.unwrap();
        for o in kernel_offsets {
            let a = text + o;
            assert_eq!(
                name(&whole.kernel, a),
                name(&part.kernel, a),
                "kernel {a:#x}"
            );
        }
        for a in module_addrs {
            assert_eq!(
                name(&whole.modules["fixture_mod"], a),
                name(&part.modules["fixture_mod"], a),
                "module {a:#x}"
            );
        }
    }
}
