//! The symbol index's side of the by-range reader (issue 32): a binary's
//! whole function table built once ([`parse_full`]), written as an index
//! entry and answered from ([`parse_indexed`]), or an entry's symbols for
//! the wanted addresses ([`image_from_index`]).

use super::*;

/// What [`parse_full`] read.
pub(super) enum Full {
    /// The whole table.
    Table(Box<FullTable>),
    /// Its names came to more than the bound given (what an entry can
    /// hold): a crafted table (every symbol naming one 64 KiB string) must
    /// not make a builder hold names without end. Not indexed.
    TooLarge,
}

/// A binary's whole function table, as [`parse_ranged`] would build it if
/// every address were wanted: what a symbol index entry holds.
pub(super) struct FullTable {
    /// Every function (aliases chosen, ends fixed), raw names.
    pub symbols: SymbolTable,
    /// No function in a `.symtab` of the binary's own.
    pub stripped: bool,
    /// Some table had a function.
    pub any_function: bool,
    debug: DebugSymbols,
}

/// A string table is held in memory up to this many bytes; a larger one
/// is read a name at a time. The largest real ones met are librustc_driver's
/// and Rust's libLLVM's `.strtab`s (19.8 and 17.9 MB); a binary anyone can
/// write must not make a root builder hold a gigabyte.
const MAX_HELD_NAMES: u64 = 64 << 20;

/// A string table read whole, to name every symbol of a table at once;
/// a name it does not hold to its end is read as [`NameReader`] reads it.
struct HeldNames<'a> {
    file: &'a File,
    at: u64,
    held: Vec<u8>,
}

impl<'a> HeldNames<'a> {
    fn load(file: &'a File, t: &Table, file_len: u64) -> HeldNames<'a> {
        let len = t.str_size.min(file_len.saturating_sub(t.str_at));
        let mut held = Vec::new();
        if len <= MAX_HELD_NAMES {
            held = vec![0u8; len as usize];
            if file.read_exact_at(&mut held, t.str_at).is_err() {
                held = Vec::new();
            }
        }
        HeldNames {
            file,
            at: t.str_at,
            held,
        }
    }

    /// The name at file position `pos`, as [`NameReader::read`] gives it.
    fn read(&self, pos: u64) -> String {
        let rest = pos
            .checked_sub(self.at)
            .and_then(|o| usize::try_from(o).ok())
            .and_then(|o| self.held.get(o..));
        if let Some(rest) = rest {
            let window = &rest[..rest.len().min(MAX_NAME)];
            let end = memchr::memchr(0, window)
                .or_else(|| (window.len() == MAX_NAME).then_some(MAX_NAME));
            if let Some(end) = end {
                return String::from_utf8_lossy(&window[..end]).into_owned();
            }
        }
        NameReader { file: self.file }.read(pos)
    }
}

/// Every function of the binary `file` (and, stripped, of its debug file
/// as `debug` says) with its name: one streamed pass over each table and
/// its string table read whole; [`Full::TooLarge`] past `max_names` bytes
/// of names. `None` where [`parse_ranged`] says `None`.
pub(crate) fn parse_full(
    f: Opened<'_>,
    h: &Headers,
    cfg: &LoadConfig<'_>,
    debug: DebugLookup<'_>,
    max_names: u64,
) -> Result<Option<Full>, Error> {
    let Opened { path, file, meta } = f;
    let io = |e| Error::io(path, e);
    // (which source, the function), in table order.
    let mut funcs: Vec<(usize, Func)> = Vec::new();
    let mut from_symtab = 0;
    for (k, t) in h.tables.iter().enumerate() {
        for_each_function(file, t, &h.layout, meta.len(), |f| {
            funcs.push((k, f));
            from_symtab += usize::from(t.origin == SymbolOrigin::Symtab);
        })
        .map_err(io)?;
    }
    let mut ds = DebugSymbols::NONE;
    if from_symtab == 0 {
        let Some(d) = debug_symbols_of(path, h, cfg, debug) else {
            return Ok(None);
        };
        if let (Some(found), Some((l, t))) = (&d.found, &d.table) {
            let k = h.tables.len();
            for_each_function(&found.file, t, l, found.len, |f| funcs.push((k, f))).map_err(io)?;
        }
        ds = d;
    }
    let mut sources: Vec<(&File, u64, &Table)> =
        h.tables.iter().map(|t| (file, meta.len(), t)).collect();
    if let (Some(d), Some((_, t))) = (&ds.found, &ds.table) {
        sources.push((&d.file, d.len, t));
    }
    let mut starts: Vec<u64> = funcs.iter().map(|(_, f)| f.start).collect();
    let any_function = !starts.is_empty();
    starts.sort_unstable();
    starts.dedup();
    let names: Vec<HeldNames<'_>> = sources
        .iter()
        .map(|&(file, len, t)| HeldNames::load(file, t, len))
        .collect();
    let mut cands = Vec::new();
    let mut held = 0u64;
    for (k, f) in &funcs {
        if f.name_at >= names_end(sources[*k].2) {
            continue;
        }
        let name = names[*k].read(f.name_at);
        held += name.len() as u64;
        if held > max_names {
            return Ok(Some(Full::TooLarge));
        }
        cands.extend(candidate(f, name, end_of(&starts, f)));
    }
    drop((funcs, starts, names));
    Ok(Some(Full::Table(Box::new(FullTable {
        symbols: SymbolTable::build(cands),
        stripped: from_symtab == 0,
        any_function,
        debug: ds,
    }))))
}

/// [`parse`] with a symbol index: the entry of this very file (identity and
/// build-id; a stripped binary's, with the debug file found now), binary
/// searched for `wanted`; else the whole table built, written as the entry,
/// and looked up. Answers as [`parse_ranged`] would.
pub(super) fn parse_indexed(
    store: &IndexStore,
    f: Opened<'_>,
    h: Headers,
    cfg: &LoadConfig<'_>,
    wanted: &[u64],
    debug: DebugLookup<'_>,
) -> Result<Option<ElfImage>, Error> {
    let Opened { path, meta, .. } = f;
    let id = Identity::of(meta);
    let name = IndexStore::entry_name(path, h.build_id.as_deref(), &id);
    // A stripped binary's debug file, when found to check an entry not used after all.
    let mut looked_for: Option<DebugSymbols> = None;
    if let Found::Hit(index) = store.read(&name, &id, h.build_id.as_deref()) {
        let ds = if index.facts.stripped {
            let Some(d) = debug_symbols_of(path, &h, cfg, debug) else {
                return Ok(None);
            };
            d
        } else {
            DebugSymbols::NONE
        };
        if ds.identity() == Ok(index.facts.debug) {
            let image = image_from_index(&index, path, &h, cfg, wanted, &ds, store.demangle);
            if let Some(image) = image {
                store.count_hit();
                return Ok(Some(image));
            }
        }
        // Made with another debug file, or a name read is damaged: built anew.
        store.count_rejected();
        if index.facts.stripped {
            looked_for = Some(ds);
        }
    }
    let debug = match &looked_for {
        Some(d) => DebugLookup::Found(d.found.as_ref()),
        None => debug,
    };
    build_indexed(store, &name, f, h, cfg, wanted, debug)
}

/// The cold side of [`parse_indexed`]: the whole table built and written
/// as the entry `name` (when the directory takes writes; else the table
/// is read for `wanted` only, as without an index).
fn build_indexed(
    store: &IndexStore,
    name: &str,
    f: Opened<'_>,
    h: Headers,
    cfg: &LoadConfig<'_>,
    wanted: &[u64],
    debug: DebugLookup<'_>,
) -> Result<Option<ElfImage>, Error> {
    if !store.writable() || store.defer() {
        return parse_ranged(f, h, cfg, wanted, debug);
    }
    let Opened { path, meta, .. } = f;
    let full = match parse_full(f, &h, cfg, debug, index::format::MAX_ENTRY_BYTES)? {
        None => return Ok(None),
        Some(Full::Table(t)) => *t,
        Some(Full::TooLarge) => {
            store.count_not_written();
            return parse_ranged(f, h, cfg, wanted, debug);
        }
    };
    let FullTable {
        symbols,
        stripped,
        any_function,
        debug: ds,
    } = full;
    // With the names demangled once, here, when the report demangles:
    // later reports show them as stored (demangling the names hit was half
    // of a warm report of a cargo build). That is most of a build's time
    // (libLLVM's 100,000 C++ names), which is why a report defers builds
    // to a builder run after its output.
    // Demangled names are bounded as the raw ones are (a demangled name
    // can be far longer than its mangled one): past what an entry holds,
    // no more are made and no entry is written.
    let room = std::sync::atomic::AtomicU64::new(index::format::MAX_ENTRY_BYTES);
    let shown: Vec<Option<String>> = if store.demangle {
        use rayon::prelude::*;
        use std::sync::atomic::Ordering::Relaxed;
        symbols
            .entries()
            .par_iter()
            .map(|e| {
                if room.load(Relaxed) == 0 {
                    return None;
                }
                let d = crate::demangle::demangle(&e.name)?;
                let n = d.len() as u64;
                let left = room.fetch_update(Relaxed, Relaxed, |r| Some(r.saturating_sub(n)));
                (left.unwrap_or(0) >= n).then_some(d)
            })
            .collect()
    } else {
        Vec::new()
    };
    let overflowed = room.into_inner() == 0;
    let bytes = ds
        .identity()
        .ok()
        .filter(|_| !overflowed)
        .and_then(|debug_id| {
            let facts = Facts {
                binary: Identity::of(meta),
                build_id: h.build_id.clone(),
                stripped,
                any_function,
                debug: debug_id,
                demangled: store.demangle,
            };
            let list: Vec<index::format::Symbol<'_>> = symbols
                .entries()
                .iter()
                .enumerate()
                .map(|(i, e)| index::format::Symbol {
                    start: e.start,
                    end: e.end,
                    raw: &e.name,
                    shown: shown.get(i).and_then(Option::as_deref),
                    origin: e.origin,
                })
                .collect();
            index::format::encode(&facts, &list)
        });
    drop(shown);
    store.write(name, bytes.as_deref());
    drop(bytes);
    // The whole table answers every offset as the table read for them
    // would (it is the table the entry was made from, not a copy).
    let sparse_note = (stripped && ds.found.is_none())
        .then(|| crate::elf::stripped_note(path, h.build_id.as_deref(), !any_function, cfg));
    Ok(Some(ElfImage {
        path: path.to_owned(),
        build_id: h.build_id,
        relocatable: false,
        segments: h.segments,
        symbols,
        debug_file: ds.found.map(|d| d.path),
        sparse_note,
        notes: Vec::new(),
        dwarf: None,
        from_index: false,
    }))
}

/// The image of the file `path` (headers `h`) for `wanted` from its index
/// entry: the entries the wanted addresses fall in, with their stored
/// demangled names when `demangle`. `None` if a name read is damaged.
fn image_from_index(
    index: &Index,
    path: &Path,
    h: &Headers,
    cfg: &LoadConfig<'_>,
    wanted: &[u64],
    ds: &DebugSymbols,
    demangle: bool,
) -> Option<ElfImage> {
    // One pass over the entry's head for every address (its CRC checked).
    let mut addrs: Vec<u64> = Vec::with_capacity(wanted.len());
    addrs.extend(wanted.iter().filter_map(|&o| h.segments.to_vaddr(o)));
    let found = index.symbols_at(addrs).ok()?;
    let mut entries = Vec::with_capacity(found.len());
    let mut shown = Vec::with_capacity(if demangle { found.len() } else { 0 });
    for (hit, (raw, show)) in found {
        entries.push(Entry {
            start: hit.start,
            end: hit.end,
            name: raw,
            origin: hit.origin,
        });
        if demangle {
            shown.push(show);
        }
    }
    let facts = &index.facts;
    let sparse_note = (facts.stripped && ds.found.is_none())
        .then(|| crate::elf::stripped_note(path, h.build_id.as_deref(), !facts.any_function, cfg));
    Some(ElfImage {
        path: path.to_owned(),
        build_id: h.build_id.clone(),
        relocatable: false,
        segments: h.segments.clone(),
        // Names demangled ahead (an entry written so) are used; raw ones
        // are demangled when shown, as without the index.
        symbols: SymbolTable::from_sorted(
            entries,
            (demangle && index.facts.demangled).then_some(shown),
        ),
        debug_file: ds.found.as_ref().map(|d| d.path.clone()),
        sparse_note,
        notes: Vec::new(),
        dwarf: None,
        from_index: true,
    })
}
