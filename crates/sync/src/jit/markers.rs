//! What a JIT dump's function becomes in the session: its `JitCode`
//! marker (code bytes read back from the dump), and a debug-info record's
//! lines as markers hold them.

use super::{Func, JitStats, Lines};
use profkit_eventlog::{Cookie, JitCode, JitLine};
use rustc_hash::FxHashMap;
use std::fs::File;
use std::sync::Arc;

/// Function `f`'s marker, its code bytes read from its dump `file` (none
/// over the format's bound, or when they cannot be read whole); None when
/// the session file's or the dump's marker bytes are spent (`all`,
/// `dump`: what they wrote so far).
pub(super) fn marker(
    cookie: Cookie,
    addr: u64,
    f: &Func,
    file: Option<&File>,
    stats: &mut JitStats,
    (all, dump): (&mut u64, &mut u64),
) -> Option<JitCode> {
    use std::os::unix::fs::FileExt;
    // What it will take in the session, at most: over what this file
    // and this dump may still take, it is not written (counted).
    let code_max = if f.size <= profkit_eventlog::MAX_JIT_CODE as u64 {
        f.size
    } else {
        0
    };
    let bytes = code_max + held_of(f) + 64;
    if all.saturating_add(bytes) > super::JIT_MAX_MARKER_BYTES
        || dump.saturating_add(bytes) > super::JIT_MAX_MARKER_BYTES_PER_DUMP
    {
        stats.markers_over += 1;
        return None;
    }
    *all += bytes;
    *dump += bytes;
    stats.written += 1;
    let code = file
        .filter(|_| f.size <= profkit_eventlog::MAX_JIT_CODE as u64)
        .and_then(|file| {
            let mut b = vec![0; usize::try_from(f.size).ok()?];
            file.read_exact_at(&mut b, f.code_at).ok()?;
            Some(b)
        });
    if code.is_none() {
        stats.code_not_held += 1;
    }
    Some(JitCode {
        cookie,
        addr,
        size: f.size,
        index: f.index,
        time: f.time,
        name: f.name.to_string(),
        code,
        files: f.files.to_vec(),
        lines: f
            .lines
            .iter()
            .filter(|l| l.offset < f.size)
            .cloned()
            .collect(),
    })
}

/// Bytes a function holds beyond its fixed size: its name, source file
/// names and lines (what [`super::JIT_MAX_HELD_BYTES`] counts, with the
/// shared unwind information).
pub(super) fn held_of(f: &Func) -> u64 {
    let files: usize = f.files.iter().map(|n| n.len() + 24).sum();
    (f.name.len() + files + f.lines.len() * std::mem::size_of::<JitLine>()) as u64
}

/// A debug-info record's lines as a marker holds them: offsets from the
/// code's start, sorted, files by index (bounded as the format bounds
/// them).
pub(super) fn lines_of(info: profkit_jitdump::DebugInfo) -> Lines {
    let mut files: Vec<String> = Vec::new();
    let mut index: FxHashMap<Arc<str>, u32> = FxHashMap::default();
    let mut lines = Vec::new();
    for e in info.entries {
        let Some(offset) = e.addr.checked_sub(info.code_addr) else {
            continue;
        };
        if lines.len() >= profkit_eventlog::MAX_JIT_LINES {
            break;
        }
        let file = match index.get(&e.file) {
            Some(&i) => i,
            None => {
                if files.len() >= profkit_eventlog::MAX_JIT_FILES
                    || e.file.len() > profkit_eventlog::MAX_JIT_NAME
                {
                    continue;
                }
                let i = files.len() as u32;
                files.push(e.file.to_string());
                index.insert(e.file.clone(), i);
                i
            }
        };
        lines.push(JitLine {
            offset,
            line: e.line,
            discrim: e.discrim,
            file,
        });
    }
    lines.sort_by_key(|l| l.offset);
    (info.code_addr, files.into(), lines.into())
}
