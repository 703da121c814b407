//! One ELF file, parsed once: PT_LOAD segments, function symbols from `.symtab` and
//! `.dynsym` (plus a separate debug file's `.symtab` when the file is stripped), and
//! optionally its DWARF.
//!
//! # Implementation notes
//!
//! Samples give *file* offsets, so PIE and non-PIE need no special case: a file offset is
//! mapped through the PT_LOAD header that covers it to a link-time virtual address, the
//! address space symbols and DWARF use (`profkit-elf`'s `Segments`, the rule every crate
//! shares).
//!
//! ```text
//!   file:   0x0000 [ .text  p_offset=0x1000 p_filesz=0x800 ] 0x1800
//!   vaddr:         [ 0x401000 (non-PIE)  or  0x1000 (PIE)  ]
//!   file offset 0x1234 → vaddr = p_vaddr + (0x1234 - 0x1000)
//! ```
//!
//! A relocatable file (a kernel module's `.ko`) has no segments; there the offset is taken as
//! an offset into the module's text as the kernel lays it out: its executable, non-`.init`
//! sections in header order, each aligned to its `sh_addralign` (`layout_sections` in
//! `kernel/module/main.c`).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use object::{
    Architecture, Object, ObjectKind, ObjectSection, ObjectSymbol, SectionFlags, SymbolKind,
};
use profkit_elf::Segments;

use crate::dwarf;
use crate::error::Error;
use crate::table::{Candidate, SymbolTable};
use crate::types::SymbolOrigin;

/// What loading depends on (fixed per symbolizer).
pub(crate) struct LoadConfig<'a> {
    pub debug_dirs: &'a [PathBuf],
    /// A debuginfod client cache, searched by build-id after `debug_dirs`.
    pub debuginfod_cache: Option<&'a Path>,
    pub debug_info: bool,
}

/// A parsed ELF file, shared through the cache.
pub(crate) struct ElfImage {
    /// The file parsed.
    pub path: PathBuf,
    pub build_id: Option<Vec<u8>>,
    /// A `.ko` (or any `ET_REL` object): offsets are module-text offsets.
    pub relocatable: bool,
    /// Its PT_LOAD headers (`profkit-elf`), through which offsets are mapped.
    pub segments: Segments,
    pub symbols: SymbolTable,
    /// The separate debug file used for symbols or DWARF, if any.
    pub debug_file: Option<PathBuf>,
    /// Why some offsets may find no name (stripped binary); shown only when one does not.
    pub sparse_note: Option<String>,
    /// Problems found while loading (bad DWARF, no DWARF although asked for).
    pub notes: Vec<String>,
    /// Shared with the cache (by range, with `--debug-info`) or owned (file read whole).
    pub dwarf: Option<Arc<dwarf::Dwarf>>,
    /// Its symbols came from a symbol index entry (no symbol table was read).
    pub from_index: bool,
}

impl std::fmt::Debug for ElfImage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ElfImage")
            .field("path", &self.path)
            .field("symbols", &self.symbols.len())
            .field("debug_file", &self.debug_file)
            .field("dwarf", &self.dwarf.is_some())
            .finish_non_exhaustive()
    }
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Reads only as much of `data` as needed for the build-id.
pub(crate) fn build_id_of(path: &Path, data: &[u8]) -> Result<Option<Vec<u8>>, Error> {
    let file = object::File::parse(data).map_err(|source| Error::Elf {
        path: path.to_owned(),
        source,
    })?;
    Ok(file.build_id().ok().flatten().map(<[u8]>::to_vec))
}

impl ElfImage {
    /// Parses `data`, the contents of `path`.
    pub fn parse(path: &Path, data: &[u8], cfg: &LoadConfig<'_>) -> Result<ElfImage, Error> {
        let file = object::File::parse(data).map_err(|source| Error::Elf {
            path: path.to_owned(),
            source,
        })?;
        let build_id = file.build_id().ok().flatten().map(<[u8]>::to_vec);
        let relocatable = file.kind() == ObjectKind::Relocatable;
        // The headers `object` has just parsed: no error left to meet.
        let segments = Segments::parse(data).unwrap_or_default();
        let sections = Sections::new(&file, relocatable);

        let mut cands = Vec::new();
        let origin = if relocatable {
            SymbolOrigin::ModuleFile
        } else {
            SymbolOrigin::Symtab
        };
        let from_symtab = collect(&file, file.symbols(), origin, &sections, &mut cands);
        collect(
            &file,
            file.dynamic_symbols(),
            SymbolOrigin::Dynsym,
            &sections,
            &mut cands,
        );

        let own_dwarf = dwarf::has_dwarf(&file);
        let mut notes = Vec::new();
        let mut debug_file = None;
        let mut debug_data = None;
        if !relocatable && (from_symtab == 0 || (cfg.debug_info && !own_dwarf)) {
            let link = file.gnu_debuglink().ok().flatten();
            if let Some((dpath, ddata)) = find_debug_file(
                path,
                build_id.as_deref(),
                link,
                &segments.layout(),
                cfg.debug_dirs,
                cfg.debuginfod_cache,
            ) {
                debug_file = Some(dpath);
                debug_data = Some(ddata);
            }
        }
        let debug_obj = match (&debug_data, &debug_file) {
            (Some(d), Some(p)) => match object::File::parse(&d[..]) {
                Ok(obj) => Some(obj),
                Err(source) => {
                    notes.push(
                        Error::Elf {
                            path: p.clone(),
                            source,
                        }
                        .to_string(),
                    );
                    None
                }
            },
            _ => None,
        };
        if let Some(dobj) = &debug_obj {
            if from_symtab == 0 {
                let dsections = Sections::new(dobj, false);
                collect(
                    dobj,
                    dobj.symbols(),
                    SymbolOrigin::DebugFile,
                    &dsections,
                    &mut cands,
                );
            }
        }

        let dwarf = if cfg.debug_info {
            let source = if own_dwarf {
                Some((&file, path))
            } else {
                debug_obj
                    .as_ref()
                    .filter(|d| dwarf::has_dwarf(d))
                    .zip(debug_file.as_deref())
            };
            match source {
                Some((obj, from)) => match dwarf::load(obj) {
                    Ok(d) => Some(Arc::new(d)),
                    Err(source) => {
                        notes.push(
                            Error::Dwarf {
                                path: from.to_owned(),
                                source,
                            }
                            .to_string(),
                        );
                        None
                    }
                },
                None => {
                    notes.push(no_dwarf_note(path, cfg));
                    None
                }
            }
        } else {
            None
        };

        let symbols = SymbolTable::build(cands);
        let sparse_note = if from_symtab > 0 || debug_obj.is_some() {
            None
        } else {
            Some(stripped_note(
                path,
                build_id.as_deref(),
                symbols.is_empty(),
                cfg,
            ))
        };
        Ok(ElfImage {
            path: path.to_owned(),
            build_id,
            relocatable,
            segments,
            symbols,
            debug_file,
            sparse_note,
            notes,
            dwarf,
            from_index: false,
        })
    }

    /// Maps a file offset to a link-time virtual address through the PT_LOAD headers
    /// (a relocatable file's offsets are its addresses, see the module docs).
    pub fn to_vaddr(&self, file_offset: u64) -> Option<u64> {
        if self.relocatable {
            return Some(file_offset);
        }
        self.segments.to_vaddr(file_offset)
    }

    /// The inverse of [`ElfImage::to_vaddr`].
    pub fn to_file_offset(&self, vaddr: u64) -> Option<u64> {
        if self.relocatable {
            return None;
        }
        self.segments.to_file_offset(vaddr)
    }

    /// True if the file has PT_LOAD segments with file bytes (so file offsets can be mapped).
    pub fn has_segments(&self) -> bool {
        self.relocatable || self.segments.has_file_bytes()
    }
}

/// Why `--debug-info` shows no source lines for the binary at `path`.
pub(crate) fn no_dwarf_note(path: &Path, cfg: &LoadConfig<'_>) -> String {
    format!(
        "no DWARF for {} (not built with -g, and no debug file under {} by build-id or \
         debuglink{}); source lines not shown",
        path.display(),
        dirs_list(cfg.debug_dirs),
        in_cache(cfg)
    )
}

/// ", nor in the debuginfod cache DIR" when there is one.
fn in_cache(cfg: &LoadConfig<'_>) -> String {
    cfg.debuginfod_cache
        .map(|c| format!(", nor in the debuginfod cache {}", c.display()))
        .unwrap_or_default()
}

/// Why a stripped binary's samples may find no name.
pub(crate) fn stripped_note(
    path: &Path,
    build_id: Option<&[u8]>,
    no_symbols: bool,
    cfg: &LoadConfig<'_>,
) -> String {
    let id = build_id.map_or_else(|| "none".to_owned(), hex);
    format!(
        "{} has no .symtab{} and no debug file was found under {}{} (build-id {id}); \
         unnamed samples shown as offsets: install its debug symbols",
        path.display(),
        if no_symbols {
            " or .dynsym"
        } else {
            " (only exported names)"
        },
        dirs_list(cfg.debug_dirs),
        in_cache(cfg)
    )
}

fn dirs_list(dirs: &[PathBuf]) -> String {
    if dirs.is_empty() {
        return "(no debug dirs)".to_owned();
    }
    dirs.iter()
        .map(|d| d.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// Per section index: where the section is (link-time, or module-layout for `ET_REL`) and
/// whether it holds code.
#[derive(Clone)]
pub(crate) struct Sections {
    by_index: Vec<Option<SectionInfo>>,
}

#[derive(Clone, Copy)]
pub(crate) struct SectionInfo {
    pub base: u64,
    pub size: u64,
    pub exec: bool,
}

impl Sections {
    fn new(file: &object::File<'_>, relocatable: bool) -> Sections {
        let mut by_index = Vec::new();
        let mut layout_end = 0u64;
        for s in file.sections() {
            let exec = match s.flags() {
                SectionFlags::Elf { sh_flags } => {
                    sh_flags & u64::from(object::elf::SHF_EXECINSTR) != 0
                }
                _ => s.kind() == object::SectionKind::Text,
            };
            let base = if relocatable {
                let name = s.name().unwrap_or("");
                if !exec || name.starts_with(".init") {
                    continue;
                }
                let align = s.align().max(1);
                let at = layout_end.next_multiple_of(align);
                layout_end = at + s.size();
                at
            } else {
                s.address()
            };
            let i = s.index().0;
            if by_index.len() <= i {
                by_index.resize(i + 1, None);
            }
            by_index[i] = Some(SectionInfo {
                base,
                size: s.size(),
                exec,
            });
        }
        Sections { by_index }
    }

    /// A non-relocatable file's sections from their headers, in index
    /// order: (address, size, executable).
    pub fn from_headers(headers: impl Iterator<Item = (u64, u64, bool)>) -> Sections {
        Sections {
            by_index: headers
                .map(|(base, size, exec)| Some(SectionInfo { base, size, exec }))
                .collect(),
        }
    }

    pub fn get(&self, index: object::SectionIndex) -> Option<SectionInfo> {
        self.by_index.get(index.0).copied().flatten()
    }
}

/// Adds the function symbols of `symbols` to `out`; returns how many were added.
fn collect<'data, 'file>(
    file: &'file object::File<'data>,
    symbols: impl Iterator<Item = object::Symbol<'data, 'file>>,
    origin: SymbolOrigin,
    sections: &Sections,
    out: &mut Vec<Candidate>,
) -> usize {
    let thumb = file.architecture() == Architecture::Arm;
    let relocatable = file.kind() == ObjectKind::Relocatable;
    let before = out.len();
    for sym in symbols {
        let kind = sym.kind();
        if !sym.is_definition() || !matches!(kind, SymbolKind::Text | SymbolKind::Unknown) {
            continue;
        }
        let Some(section) = sym.section_index().and_then(|i| sections.get(i)) else {
            continue;
        };
        if !section.exec {
            continue;
        }
        let Ok(name) = sym.name() else { continue };
        if name.is_empty() || name.starts_with('$') || name.starts_with(".L") {
            continue;
        }
        let mut start = sym.address();
        if thumb {
            start &= !1;
        }
        if relocatable {
            start += section.base;
        }
        let size = sym.size();
        let binding = if sym.is_global() {
            0
        } else if sym.is_weak() {
            1
        } else {
            2
        };
        let underscores = name.bytes().take_while(|&b| b == b'_').count().min(255) as u64;
        let rank = (u64::from(size == 0) << 40)
            | (u64::from(kind != SymbolKind::Text) << 36)
            | (binding << 32)
            | (underscores << 24)
            | (name.len().min(0xff_ffff) as u64);
        out.push(Candidate {
            start,
            size: Some(size),
            limit: Some(section.base + section.size),
            name: name.into(),
            origin,
            rank,
        });
    }
    out.len() - before
}

/// What makes a candidate the binary's debug file.
pub(crate) enum DebugCheck {
    /// Found by build-id: it must carry that build-id.
    BuildId(Vec<u8>),
    /// Found by debuglink: its CRC-32 must be this.
    Crc(u32),
}

/// Where a separate debug file for the binary at `bin_path` may be, in the
/// order gdb looks: by build-id (`DIR/.build-id/ab/cdef….debug`), then by
/// debuglink (next to the binary, in its `.debug/` subdirectory, and
/// `DIR/<binary's directory>/NAME`), each with its check.
pub(crate) fn debug_candidates(
    bin_path: &Path,
    build_id: Option<&[u8]>,
    debuglink: Option<(&[u8], u32)>,
    debug_dirs: &[PathBuf],
    debuginfod_cache: Option<&Path>,
) -> Vec<(PathBuf, DebugCheck)> {
    let mut out = Vec::new();
    if let Some(id) = build_id.filter(|id| id.len() >= 2) {
        for dir in debug_dirs {
            let candidate = profkit_eventlog::build_id_path(dir, id, ".debug");
            out.push((candidate, DebugCheck::BuildId(id.to_vec())));
        }
        if let Some(cache) = debuginfod_cache {
            out.push((
                debuginfod_path(cache, id, "debuginfo"),
                DebugCheck::BuildId(id.to_vec()),
            ));
        }
    }
    let Some((name, crc)) = debuglink else {
        return out;
    };
    // A debug link names a file, not a path: no directory part, no `..`
    // (a binary's link to `/dev/zero` or `../../etc/x` is not followed).
    if name.is_empty() || name.contains(&b'/') || name == b"." || name == b".." {
        return out;
    }
    let name = Path::new(OsStr::from_bytes(name));
    let bin_dir = bin_path.parent().unwrap_or(Path::new("/"));
    let mut by_link = vec![bin_dir.join(name), bin_dir.join(".debug").join(name)];
    let abs_dir = std::fs::canonicalize(bin_dir).unwrap_or_else(|_| bin_dir.to_owned());
    let rel_dir = abs_dir.strip_prefix("/").unwrap_or(&abs_dir);
    by_link.extend(debug_dirs.iter().map(|d| d.join(rel_dir).join(name)));
    let bin_canon = std::fs::canonicalize(bin_path).ok();
    out.extend(
        by_link
            .into_iter()
            .filter(|c| std::fs::canonicalize(c).ok() != bin_canon)
            .map(|c| (c, DebugCheck::Crc(crc))),
    );
    out
}

/// Where a debuginfod client keeps the file `kind` (`debuginfo`, `executable`) of build-id
/// `id` in its cache `cache` (elfutils' layout, which gdb and perf share).
pub(crate) fn debuginfod_path(cache: &Path, id: &[u8], kind: &str) -> PathBuf {
    cache.join(hex(id)).join(kind)
}

/// True when a separate debug file found by build-id, with PT_LOAD layout `debug`, may
/// name the binary with layout `bin`: the same segments at the same addresses and sizes
/// (`objcopy --only-keep-debug` keeps them; a build-id alone is a claim any file can
/// make, so a file linked with libc's build-id is not named with libc's debug symbols
/// unless it is laid out as libc is). A side without PT_LOAD headers is not compared.
pub(crate) fn same_loads(bin: &[(u64, u64)], debug: &[(u64, u64)]) -> bool {
    bin.is_empty() || debug.is_empty() || bin == debug
}

/// Finds a separate debug file for the binary at `bin_path`
/// ([`debug_candidates`]) and reads it whole; one found by build-id must have the
/// binary's PT_LOAD layout `loads` ([`same_loads`]).
fn find_debug_file(
    bin_path: &Path,
    build_id: Option<&[u8]>,
    debuglink: Option<(&[u8], u32)>,
    loads: &[(u64, u64)],
    debug_dirs: &[PathBuf],
    debuginfod_cache: Option<&Path>,
) -> Option<(PathBuf, Vec<u8>)> {
    for (candidate, check) in
        debug_candidates(bin_path, build_id, debuglink, debug_dirs, debuginfod_cache)
    {
        let Ok(data) = crate::files::read_regular(&candidate, crate::files::MAX_BINARY_BYTES)
        else {
            continue;
        };
        let ok = match &check {
            DebugCheck::BuildId(id) => {
                build_id_of(&candidate, &data).ok().flatten().as_deref() == Some(id.as_slice())
                    && Segments::parse(&data[..]).is_ok_and(|d| same_loads(loads, &d.layout()))
            }
            DebugCheck::Crc(crc) => crc32fast::hash(&data) == *crc,
        };
        if ok {
            return Some((candidate, data));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_debug_link_is_a_name_beside_the_binary_never_a_path_or_a_fifo() {
        let d = tempfile::tempdir().unwrap();
        let bin_dir = d.path().join("bin");
        std::fs::create_dir(&bin_dir).unwrap();
        let bin = bin_dir.join("prog");
        std::fs::write(&bin, b"not really elf").unwrap();
        let secret = d.path().join("secret");
        std::fs::write(&secret, b"root:x").unwrap();
        let crc = crc32fast::hash(b"root:x");
        // A path in the link: not followed, though its CRC would match.
        let abs = secret.to_str().unwrap().as_bytes();
        assert!(find_debug_file(&bin, None, Some((abs, crc)), &[], &[], None).is_none());
        assert!(find_debug_file(&bin, None, Some((b"../secret", crc)), &[], &[], None).is_none());
        assert!(find_debug_file(&bin, None, Some((b"..", crc)), &[], &[], None).is_none());
        // A name beside the binary is found...
        std::fs::write(bin_dir.join("prog.debug"), b"root:x").unwrap();
        assert!(find_debug_file(&bin, None, Some((b"prog.debug", crc)), &[], &[], None).is_some());
        // ...unless it is a FIFO (which a plain read would wait on forever).
        let fifo = bin_dir.join("fifo.debug");
        assert!(std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
        assert!(find_debug_file(&bin, None, Some((b"fifo.debug", crc)), &[], &[], None).is_none());
    }
}
