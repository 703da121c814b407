//! Perf map files (`/tmp/perf-PID.map`) written by JITs: one `START SIZE NAME` line per code
//! blob, START and SIZE in hex (with or without `0x`), NAME the rest of the line.
//!
//! A JIT may reuse an address for new code; the later line wins for the same start, and the
//! innermost (latest-starting) blob wins for overlapping ranges.

use crate::table::{Candidate, SymbolTable};
use crate::types::SymbolOrigin;

/// A parsed perf map.
#[derive(Debug, Default)]
pub(crate) struct PerfMap {
    pub table: SymbolTable,
    /// Lines that could not be parsed.
    pub skipped: usize,
}

fn hex(s: &str) -> Option<u64> {
    let s = s
        .strip_prefix("0x")
        .or_else(|| s.strip_prefix("0X"))
        .unwrap_or(s);
    u64::from_str_radix(s, 16).ok()
}

impl PerfMap {
    pub fn parse(text: &str) -> PerfMap {
        let mut cands = Vec::new();
        let mut skipped = 0;
        for (line_no, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            let parsed = (|| {
                let (start, rest) = line.split_once(char::is_whitespace)?;
                let (size, name) = rest.trim_start().split_once(char::is_whitespace)?;
                let name = name.trim();
                let (start, size) = (hex(start)?, hex(size)?);
                (!name.is_empty() && size > 0).then_some((start, size, name))
            })();
            let Some((start, size, name)) = parsed else {
                skipped += 1;
                continue;
            };
            cands.push(Candidate {
                start,
                size: Some(size),
                limit: None,
                name: name.into(),
                origin: SymbolOrigin::PerfMap,
                rank: u64::MAX - line_no as u64,
            });
        }
        PerfMap {
            table: SymbolTable::build(cands),
            skipped,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(m: &PerfMap, addr: u64) -> Option<&str> {
        m.table.lookup(addr).map(|i| &*m.table.entry(i).name)
    }

    #[test]
    fn parses_lines_with_and_without_0x_and_spaces_in_names() {
        let m = PerfMap::parse(
            "7f0000001000 40 LazyCompile:~foo bar.js:1\n\
             0x7f0000002000 0x20 Interpreter\n\
             not a line\n\
             7f0000003000 0 zero_size\n",
        );
        assert_eq!(m.skipped, 2);
        assert_eq!(name(&m, 0x7f0000001000), Some("LazyCompile:~foo bar.js:1"));
        assert_eq!(name(&m, 0x7f000000103f), Some("LazyCompile:~foo bar.js:1"));
        assert_eq!(name(&m, 0x7f0000001040), None);
        assert_eq!(name(&m, 0x7f000000201f), Some("Interpreter"));
    }

    #[test]
    fn later_line_wins_for_reused_address() {
        let m = PerfMap::parse("1000 10 old\n1000 10 new\n");
        assert_eq!(name(&m, 0x1008), Some("new"));
    }
}
