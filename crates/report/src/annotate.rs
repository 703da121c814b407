//! `--annotate[=SYMBOL]`: samples per source line and per instruction of
//! the functions a report names (opannotate, perf annotate).
//!
//! The aggregation already keeps each sample's (binary, offset); a
//! function's samples are those offsets inside it, placed in columns as
//! the report places them (so specs and `--separate=cpu` apply). Its code
//! is read by range (`profkit_annotate::read_code`: the ELF headers and
//! the function's bytes), disassembled, and each instruction's source line
//! and inlined function come from DWARF through the same symbolizer setup
//! the report uses (debug files by build-id and debuglink, the archive's
//! debug directory, `--sysroot`, `--search-dir`). JIT code described by
//! the session's `JitCode` markers is disassembled from the code bytes the
//! marker keeps, its lines the marker's. Kernel code and other JIT code
//! have no file to read here: their samples are listed per address.

use std::collections::BTreeMap;

use std::path::PathBuf;

use profkit_annotate::{
    annotate_instructions, read_code, source_listing_fetching, Bitness, Code, LineInfo,
    SourceReader, Syntax,
};
use profkit_eventlog::{Cookie, CookieKind};
use profkit_symbols::{SymbolId, Symbolizer, SymbolizerOptions};
use rayon::prelude::*;

use crate::aggregate::Aggregate;
use crate::error::{Error, Result};
use crate::hash::FxHashMap;
use crate::model::{Annotation, AsmLine};
use crate::naming::apps::Images;
use crate::naming::jit::line_at;
use crate::naming::symbolize::{request, symbolizer_options, Resolved};
use crate::options::{AnnotateOptions, ReportOptions, SymbolSources};
use crate::session::Session;

/// One function's samples before annotation: per offset, per column.
pub(crate) type Offsets = BTreeMap<u64, Vec<u64>>;

/// A function to annotate.
pub(crate) struct Chosen {
    pub cookie: Cookie,
    pub sym: SymbolId,
    pub samples: Vec<u64>,
}

/// Picks the functions: the one named (by its shown or raw name; several
/// binaries may have one of that name), else every function at or above
/// the threshold, hottest first. `funcs` are the report's per-function
/// samples; `denom` its per-column totals.
pub(crate) fn choose(
    funcs: FxHashMap<(Cookie, SymbolId), Vec<u64>>,
    a: &AnnotateOptions,
    opts: &ReportOptions,
    symbols: &FxHashMap<Cookie, Resolved>,
    denom: &[u64],
) -> Result<Vec<Chosen>> {
    let name_of = |c: Cookie, s: SymbolId| symbols.get(&c).map(|r| r.result.symbol(s));
    let all: u64 = denom.iter().sum();
    let mut chosen: Vec<Chosen> = funcs
        .into_iter()
        .filter(|&((c, s), ref v)| {
            let n: u64 = v.iter().sum();
            match &a.symbol {
                Some(want) => name_of(c, s).is_some_and(|i| i.name == *want || i.raw_name == *want),
                None => n > 0 && 100.0 * n as f64 >= opts.threshold * all.max(1) as f64,
            }
        })
        .map(|((cookie, sym), samples)| Chosen {
            cookie,
            sym,
            samples,
        })
        .collect();
    if let (Some(want), true) = (&a.symbol, chosen.is_empty()) {
        let mut names: Vec<&str> = symbols
            .values()
            .flat_map(|r| r.result.symbols.iter().map(|s| s.name.as_str()))
            .collect();
        names.sort_unstable();
        names.dedup();
        names.sort_by_key(|n| distance(want, n));
        let close: Vec<&str> = names.into_iter().take(5).collect();
        return Err(Error::Conflict(if close.is_empty() {
            format!("--annotate={want}: no function has samples in this report")
        } else {
            format!(
                "--annotate={want}: no sampled function of that name; the closest: {}",
                close.join(", ")
            )
        }));
    }
    chosen.sort_by(|x, y| {
        y.samples
            .iter()
            .sum::<u64>()
            .cmp(&x.samples.iter().sum::<u64>())
            .then(x.cookie.cmp(&y.cookie))
            .then(x.sym.cmp(&y.sym))
    });
    Ok(chosen)
}

/// Edit distance (Levenshtein, on bytes), for "did you mean".
fn distance(a: &str, b: &str) -> usize {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, &x) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, &y) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(x != y))
                .min(prev[j + 1] + 1)
                .min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// What annotating needs from the report.
pub(crate) struct Context<'a> {
    pub sessions: &'a [Session],
    pub agg: &'a Aggregate,
    pub opts: &'a ReportOptions,
    pub annotate: &'a AnnotateOptions,
    pub sources: &'a SymbolSources,
    pub symbols: &'a FxHashMap<Cookie, Resolved>,
    pub images: &'a Images<'a>,
    pub denom: &'a [u64],
}

/// Whose permissions the sources a binary's DWARF names are read with
/// at their recorded paths: its file's owner, unless the file is a copy
/// inside one of the sessions read (the recorder keeps copies as root, so
/// their owner says nothing): then only what every user may read.
fn source_reader(binary: &std::path::Path, sessions: &[Session]) -> SourceReader {
    use std::os::unix::fs::MetadataExt;
    // The path's own owner: a link put at the binary's path since (to
    // root's /usr/bin/true, say) is its maker's, not root's.
    let Ok(m) = std::fs::symlink_metadata(binary) else {
        return SourceReader::Anyone;
    };
    let real = std::fs::canonicalize(binary).unwrap_or_else(|_| binary.to_path_buf());
    let kept = sessions
        .iter()
        .any(|s| std::fs::canonicalize(s.dir()).is_ok_and(|d| real.starts_with(d)));
    if kept {
        SourceReader::Anyone
    } else {
        SourceReader::Owner {
            uid: m.uid(),
            gid: m.gid(),
        }
    }
}

/// Annotates the chosen functions (one binary per task, in parallel).
pub(crate) fn annotate(
    cx: &Context<'_>,
    chosen: Vec<Chosen>,
    offsets: &mut FxHashMap<(Cookie, SymbolId), Offsets>,
) -> Vec<Annotation> {
    let mut by_binary: BTreeMap<Cookie, Vec<(usize, Chosen, Offsets)>> = BTreeMap::new();
    for (i, c) in chosen.into_iter().enumerate() {
        let offs = offsets.remove(&(c.cookie, c.sym)).unwrap_or_default();
        by_binary.entry(c.cookie).or_default().push((i, c, offs));
    }
    let mut done: Vec<(usize, Annotation)> = by_binary
        .into_par_iter()
        .flat_map_iter(|(cookie, funcs)| {
            let lines = LineReader::new(cx, cookie);
            funcs
                .into_iter()
                .map(|(i, c, offs)| (i, one(cx, &lines, &c, &offs)))
                .collect::<Vec<_>>()
        })
        .collect();
    done.sort_by_key(|(i, _)| *i);
    // A note (a missing source file, say) is said once: at the first
    // function it concerns.
    let mut said = crate::hash::FxHashSet::default();
    let mut out: Vec<Annotation> = done.into_iter().map(|(_, a)| a).collect();
    for a in &mut out {
        a.notes.retain(|n| said.insert(n.clone()));
    }
    out
}

/// Source lines of one binary's instructions, through a symbolizer that
/// reads its DWARF (made only when lines are wanted).
struct LineReader {
    symbolizer: Option<Symbolizer>,
    request: Option<profkit_symbols::BinaryRequest>,
    /// The report's debuginfod client, for a debug file with DWARF and
    /// for source files the binary's build-id names.
    debuginfod: Option<crate::Debuginfod>,
    /// Made again once a debug file was fetched.
    options: Option<SymbolizerOptions>,
}

impl LineReader {
    fn new(cx: &Context<'_>, cookie: Cookie) -> LineReader {
        let wanted = cx.annotate.source || !cx.annotate.assembly;
        let Some((entry, sess, _)) = cx.agg.cookies.get(&cookie) else {
            return LineReader {
                symbolizer: None,
                request: None,
                debuginfod: None,
                options: None,
            };
        };
        let user = matches!(entry.kind, CookieKind::User | CookieKind::Vdso);
        let options = (wanted && user)
            .then(|| {
                let s = cx.sessions.get(*sess as usize)?;
                Some(SymbolizerOptions {
                    kallsyms: profkit_symbols::KallsymsSource::None,
                    ..symbolizer_options(s, cx.opts, cx.sources, true)
                })
            })
            .flatten();
        LineReader {
            symbolizer: options.clone().and_then(|o| Symbolizer::new(o).ok()),
            request: Some(request(entry, cx.sessions.get(*sess as usize))),
            debuginfod: cx.sources.debuginfod.clone(),
            options,
        }
    }

    /// The binary's build-id, when a file found by it may serve the binary
    /// (an ELF file the recorder identified, not a mere claim).
    fn build_id(&self) -> Option<&[u8]> {
        let r = self.request.as_ref()?;
        if r.kind != profkit_symbols::BinaryKind::Elf || r.unverified {
            return None;
        }
        r.build_id.as_deref().filter(|id| !id.is_empty())
    }

    /// The file `file` (as DWARF records it) from the debuginfod servers,
    /// by the binary's build-id.
    fn fetch_source(&self, file: &str) -> Option<std::path::PathBuf> {
        let (d, id) = (self.debuginfod.as_ref()?, self.build_id()?);
        match d
            .client()
            .fetch(id, &profkit_debuginfod::Kind::Source(file.to_owned()))
        {
            Ok(profkit_debuginfod::Fetched::Found { path, .. }) => Some(path),
            _ => None,
        }
    }

    /// Per file offset: its line, and the inlined function it is in;
    /// None when DWARF is not there (with the symbolizer's warnings).
    fn lines(&self, offsets: &[u64]) -> (Option<Vec<Option<LineInfo>>>, Vec<String>) {
        let (Some(s), Some(r)) = (&self.symbolizer, &self.request) else {
            return (None, Vec::new());
        };
        let mut res = s.symbolize(r, offsets);
        // No DWARF here: a debuginfod server's debug file may have it.
        let no_dwarf = res.debug_file_used.is_none()
            && res.warnings.iter().any(|w| w.starts_with("no DWARF for "));
        if let (true, Some(d), Some(id), Some(o)) =
            (no_dwarf, &self.debuginfod, self.build_id(), &self.options)
        {
            if let Ok(profkit_debuginfod::Fetched::Found { .. }) =
                d.client().fetch(id, &profkit_debuginfod::Kind::Debuginfo)
            {
                if let Ok(again) = Symbolizer::new(o.clone()) {
                    res = again.symbolize(r, offsets);
                }
            }
        }
        let lines: Vec<Option<LineInfo>> = res
            .offsets
            .iter()
            .map(|o| {
                let loc = o.location.as_ref()?;
                Some(LineInfo {
                    file: loc.file.clone(),
                    line: loc.line?,
                    inlined: o.inlined.first().and_then(|f| f.function.clone()),
                })
            })
            .collect();
        if lines.iter().all(Option::is_none) {
            (None, res.warnings)
        } else {
            (Some(lines), res.warnings)
        }
    }
}

/// Annotates one function.
fn one(cx: &Context<'_>, lines: &LineReader, c: &Chosen, offs: &Offsets) -> Annotation {
    let ncols = c.samples.len();
    let resolved = &cx.symbols[&c.cookie];
    let info = resolved.result.symbol(c.sym);
    let kind = cx
        .agg
        .cookies
        .get(&c.cookie)
        .map(|(e, _, _)| e.kind.clone());
    let mut notes = Vec::new();
    let mut out = Annotation {
        image: cx.images.name(c.cookie),
        path: None,
        symbol: info.name.clone(),
        start: info.start,
        size: info.size,
        samples: c.samples.clone(),
        percent: c
            .samples
            .iter()
            .zip(cx.denom)
            .map(|(&n, &d)| crate::aggregate::summary::percent(n, d))
            .collect(),
        source: None,
        assembly: None,
        notes: Vec::new(),
    };
    // Sampled addresses: link-time addresses for ELF code.
    let vaddr_of = |off: u64| -> Option<u64> {
        match &kind {
            Some(CookieKind::User | CookieKind::Vdso) => {
                let fo = info.file_offset?;
                Some(info.start.wrapping_add(off.wrapping_sub(fo)))
            }
            Some(CookieKind::Kernel | CookieKind::Module) => {
                let base = cx.agg.cookies.get(&c.cookie).map_or(0, |(e, _, _)| e.base);
                Some(base.wrapping_add(off))
            }
            _ => Some(off),
        }
    };
    // Without code to read: the note, and the samples per address.
    let per_address = |mut out: Annotation, mut notes: Vec<String>, why: String| {
        notes.push(format!("{}: {why}; samples per address", out.image));
        out.assembly = Some(
            offs.iter()
                .map(|(&off, v)| AsmLine {
                    address: vaddr_of(off).unwrap_or(off),
                    text: None,
                    samples: v.clone(),
                    target: None,
                    local_target: false,
                    file: None,
                    line: None,
                    inlined: None,
                })
                .collect(),
        );
        out.notes = notes;
        out
    };
    // JIT code: its bytes and lines from the session's JitCode marker.
    let jit = match &kind {
        Some(CookieKind::Jit) => cx.agg.jit.of_symbol(c.cookie, info),
        _ => None,
    };
    let (path, code) = if let Some(j) = jit {
        let entry_path = cx
            .agg
            .cookies
            .get(&c.cookie)
            .map_or_else(String::new, |(e, _, _)| e.path.clone());
        let Some(bytes) = &j.code else {
            let why = "the session did not keep this JIT function's code".to_owned();
            return per_address(out, notes, why);
        };
        match Code::from_bytes(bytes.clone(), j.addr, Bitness::Bits64) {
            Ok(code) => (PathBuf::from(entry_path), code),
            Err(e) => return per_address(out, notes, e.to_string()),
        }
    } else {
        let path = match (&kind, &resolved.result.path_used) {
            (Some(CookieKind::User | CookieKind::Vdso), Some(p)) => p.clone(),
            (Some(CookieKind::Kernel | CookieKind::Module), _) => {
                // Sizes from a trimmed kallsyms run to the next symbol kept,
                // not the next in the kernel: not shown.
                out.size = 0;
                let why = "kernel code is not read (no vmlinux)".to_owned();
                return per_address(out, notes, why);
            }
            (Some(CookieKind::User | CookieKind::Vdso), None) => {
                let why = "the binary was not found, so its code cannot be shown (give \
                           --sysroot or --search-dir, or archive the session with `profctl \
                           archive`)"
                    .to_owned();
                return per_address(out, notes, why);
            }
            (Some(CookieKind::Jit), _) => {
                let why = "no JitCode marker of the session describes this JIT code, so it has \
                           no bytes to disassemble"
                    .to_owned();
                return per_address(out, notes, why);
            }
            _ => {
                let why = "JIT or anonymous code has no file to disassemble".to_owned();
                return per_address(out, notes, why);
            }
        };
        match read_code(&path, info.start, info.size) {
            Ok(code) => (path, code),
            Err(e) => return per_address(out, notes, e.to_string()),
        }
    };
    out.path = Some(path.display().to_string());
    let syntax = if cx.annotate.intel {
        Syntax::Intel
    } else {
        Syntax::Att
    };
    let listing = annotate_instructions(&code, &[], syntax);
    // Samples per instruction and column.
    let mut per_insn = vec![vec![0u64; ncols]; listing.insns.len()];
    let mut outside = vec![0u64; ncols];
    for (&off, v) in offs {
        let slot = vaddr_of(off)
            .and_then(|a| listing.insn_at(a))
            .map_or(&mut outside, |i| &mut per_insn[i]);
        for (t, n) in slot.iter_mut().zip(v) {
            *t += n;
        }
    }
    if outside.iter().any(|&n| n > 0) {
        notes.push(format!(
            "{} samples fell outside the function's instructions",
            outside.iter().sum::<u64>()
        ));
    }
    // Source lines of every instruction: the JIT function's own, else DWARF.
    let (insn_lines, warnings) = match jit {
        Some(j) => {
            let l: Vec<Option<LineInfo>> = listing
                .insns
                .iter()
                .map(|i| {
                    let (file, line) = line_at(j, i.addr.wrapping_sub(j.addr))?;
                    Some(LineInfo {
                        file: file.to_owned(),
                        line,
                        inlined: None,
                    })
                })
                .collect();
            let any = l.iter().any(Option::is_some);
            (any.then_some(l), Vec::new())
        }
        None => {
            let fo = info.file_offset.unwrap_or(0);
            let insn_offsets: Vec<u64> = listing
                .insns
                .iter()
                .map(|i| fo.wrapping_add(i.addr.wrapping_sub(info.start)))
                .collect();
            lines.lines(&insn_offsets)
        }
    };
    let wants_source = cx.annotate.source || !cx.annotate.assembly;
    let wants_asm = cx.annotate.assembly || insn_lines.is_none();
    if wants_source {
        match &insn_lines {
            Some(l) => {
                let rows: Vec<(Option<LineInfo>, Vec<u64>)> =
                    l.iter().cloned().zip(per_insn.iter().cloned()).collect();
                let reader = source_reader(&path, cx.sessions);
                let listing = source_listing_fetching(
                    &rows,
                    ncols,
                    &cx.annotate.source_dirs,
                    reader,
                    &|file| lines.fetch_source(file),
                );
                for f in &listing.files {
                    if let Some(why) = &f.missing {
                        notes.push(why.clone());
                    }
                }
                out.source = Some(listing);
            }
            None => {
                // The symbolizer's "no DWARF for X (where it looked);
                // source lines not shown", without its own conclusion.
                let why = warnings
                    .iter()
                    .find(|w| w.contains("DWARF"))
                    .map(|w| w.trim_end_matches("; source lines not shown").to_owned())
                    .unwrap_or_else(|| match jit {
                        Some(_) => format!("{}: the runtime gave no source lines", out.symbol),
                        None => format!("no line information in {}", path.display()),
                    });
                notes.push(format!(
                    "{why}: no source lines (build with -g, or install the binary's debug \
                     symbols: Debian's -dbgsym package, found by build-id under \
                     /usr/lib/debug or --debug-dir); showing instructions"
                ));
            }
        }
    }
    if wants_asm {
        let loc = |i: usize| insn_lines.as_ref().and_then(|l| l[i].as_ref());
        out.assembly = Some(
            listing
                .insns
                .iter()
                .enumerate()
                .map(|(i, insn)| AsmLine {
                    address: insn.addr,
                    text: Some(insn.text.clone()),
                    samples: per_insn[i].clone(),
                    target: insn.target,
                    local_target: insn.local_target,
                    file: loc(i).map(|l| l.file.clone()),
                    line: loc(i).map(|l| l.line),
                    inlined: loc(i).and_then(|l| l.inlined.clone()),
                })
                .collect(),
        );
    }
    out.notes = notes;
    out
}

#[cfg(test)]
mod tests {
    use super::distance;

    #[test]
    fn distance_counts_edits() {
        assert_eq!(distance("loop_a", "loop_a"), 0);
        assert_eq!(distance("loop_a", "loop_b"), 1);
        assert_eq!(distance("main", "mian"), 2);
        assert_eq!(distance("", "abc"), 3);
    }
}
