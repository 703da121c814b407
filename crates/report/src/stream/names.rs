//! The stream's frame table: every distinct frame, image and symbol the
//! stream has met, each with a small integer id, named from the first
//! pass's symbolization ([`Resolved`]) when first met.

use profkit_eventlog::{Cookie, CookieKind, COOKIE_UNKNOWN};

use crate::hash::FxHashMap;
use crate::naming::apps::Images;
use crate::naming::symbolize::Resolved;

/// A frame's id in its [`FrameTable`]: one per distinct (binary, offset,
/// kernel, return address or not). Ids are dense, from 0, in the order
/// frames are first met.
pub type FrameId = u32;
/// An image's id in its [`FrameTable`], dense from 0.
pub type ImageId = u32;
/// A symbol's id in its [`FrameTable`] (one per (binary, symbol)), dense
/// from 0.
pub type SymbolId = u32;

/// One frame of a stack.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamFrame {
    /// Its binary.
    pub image: ImageId,
    /// The offset in the binary as the session recorded it (a file offset
    /// for user code, relative to the load address for the kernel and its
    /// modules); for a caller, the return address's (the instruction after
    /// the call).
    pub offset: u64,
    /// The virtual address, where the session tells it: kernel and module
    /// frames (load address + offset). `None` for user code (the session
    /// keeps (binary, offset), not addresses).
    pub address: Option<u64>,
    /// Its symbol, when named. A caller is named at its call instruction
    /// (return address − 1), as the report's call graphs name it; when that
    /// is in no symbol, at its return address (as perf names callers).
    pub symbol: Option<SymbolId>,
    /// The offset from the symbol's start to `offset` (perf's `+0x..`),
    /// when the symbol's start is known.
    pub symbol_offset: Option<u64>,
    /// A kernel frame (the kernel or a module).
    pub kernel: bool,
    /// A caller (its offset a return address), not the sampled
    /// instruction.
    pub return_address: bool,
}

/// A binary of the stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamImage {
    /// The session's cookie for it.
    pub cookie: Cookie,
    /// The recorded path (`[kernel.kallsyms]`, `/usr/lib/…/libc.so.6`,
    /// `[unknown]` for frames that resolved to no binary).
    pub path: String,
    /// The name reports show (the file name, or the path with
    /// `long_filenames`; `anon (tgid:N)` for anonymous code).
    pub name: String,
    /// The kernel or a module.
    pub kernel: bool,
    /// GNU build-id in lower-case hex, when recorded.
    pub build_id: Option<String>,
    /// The binary's symbols could not be read: its frames are unnamed.
    pub no_symbols: bool,
}

/// A symbol of the stream: a function of one binary.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamSymbol {
    /// Its binary.
    pub image: ImageId,
    /// Its name (demangled unless asked not to).
    pub name: String,
    /// Its start: a file offset for user code, an address for the kernel,
    /// when known.
    pub start: Option<u64>,
}

/// Frames, images and symbols by id. Grows as the stream meets new ones
/// (bounded by the distinct addresses of the sessions, never by samples).
#[derive(Clone, Debug, Default)]
pub struct FrameTable {
    frames: Vec<StreamFrame>,
    images: Vec<StreamImage>,
    symbols: Vec<StreamSymbol>,
}

impl FrameTable {
    /// A frame by id.
    ///
    /// # Panics
    /// If `id` is not from this table.
    pub fn frame(&self, id: FrameId) -> &StreamFrame {
        &self.frames[id as usize]
    }

    /// An image by id.
    ///
    /// # Panics
    /// If `id` is not from this table.
    pub fn image(&self, id: ImageId) -> &StreamImage {
        &self.images[id as usize]
    }

    /// A symbol by id.
    ///
    /// # Panics
    /// If `id` is not from this table.
    pub fn symbol(&self, id: SymbolId) -> &StreamSymbol {
        &self.symbols[id as usize]
    }

    /// A frame's symbol name, when it has one.
    pub fn symbol_name(&self, f: &StreamFrame) -> Option<&str> {
        f.symbol.map(|s| self.symbols[s as usize].name.as_str())
    }

    /// All frames so far, by id.
    pub fn frames(&self) -> &[StreamFrame] {
        &self.frames
    }

    /// All images so far, by id.
    pub fn images(&self) -> &[StreamImage] {
        &self.images
    }

    /// All symbols so far, by id.
    pub fn symbols(&self) -> &[StreamSymbol] {
        &self.symbols
    }
}

/// Builds the [`FrameTable`] as frames are met: one hash lookup per frame
/// already seen.
pub(super) struct Namer<'a> {
    pub table: FrameTable,
    frame_ids: FxHashMap<(Cookie, u64, bool, bool), FrameId>,
    image_ids: FxHashMap<Cookie, ImageId>,
    /// (image, symbol index in its `Resolved`) → symbol id.
    symbol_ids: FxHashMap<(ImageId, u32), SymbolId>,
    images: &'a Images<'a>,
    symbols: &'a FxHashMap<Cookie, Resolved>,
}

impl<'a> Namer<'a> {
    pub(super) fn new(images: &'a Images<'a>, symbols: &'a FxHashMap<Cookie, Resolved>) -> Self {
        Namer {
            table: FrameTable::default(),
            frame_ids: FxHashMap::default(),
            image_ids: FxHashMap::default(),
            symbol_ids: FxHashMap::default(),
            images,
            symbols,
        }
    }

    /// The id of a frame: the sampled instruction (`caller` false) or a
    /// return address (`caller` true).
    #[inline]
    pub(super) fn frame(
        &mut self,
        cookie: Cookie,
        offset: u64,
        kernel: bool,
        caller: bool,
    ) -> FrameId {
        if let Some(&id) = self.frame_ids.get(&(cookie, offset, kernel, caller)) {
            return id;
        }
        self.new_frame(cookie, offset, kernel, caller)
    }

    #[cold]
    fn new_frame(&mut self, cookie: Cookie, offset: u64, kernel: bool, caller: bool) -> FrameId {
        let image = self.image(cookie, kernel);
        let entry = self.images.entry(cookie);
        let base = match entry.map(|e| &e.kind) {
            Some(CookieKind::Kernel | CookieKind::Module) => entry.map(|e| e.base),
            _ => None,
        };
        // An unknown frame has no address (its offset says why the stack
        // broke there: `profkit_eventlog::broken`); perf prints 0.
        let address = if cookie == COOKIE_UNKNOWN {
            Some(0)
        } else {
            base.map(|b| b.wrapping_add(offset))
        };
        let lookup = if caller {
            offset.saturating_sub(1)
        } else {
            offset
        };
        let mut symbol = None;
        let mut symbol_offset = None;
        if let Some(r) = self.symbols.get(&cookie) {
            // A caller whose call instruction is in no symbol: named by
            // its return address, as perf does.
            let sid = r
                .symbol_of(lookup)
                .or_else(|| caller.then(|| r.symbol_of(offset)).flatten());
            if let Some(sid) = sid {
                let info = r.result.symbol(sid);
                let start = match base {
                    Some(_) => Some(info.start),
                    None => info.file_offset,
                };
                symbol_offset = match (base, start) {
                    (Some(b), Some(s)) => b.wrapping_add(offset).checked_sub(s),
                    (None, Some(s)) => offset.checked_sub(s),
                    _ => None,
                };
                let next = self.table.symbols.len() as SymbolId;
                let id = *self.symbol_ids.entry((image, sid.0)).or_insert(next);
                if id == next {
                    self.table.symbols.push(StreamSymbol {
                        image,
                        name: info.name.clone(),
                        start,
                    });
                }
                symbol = Some(id);
            }
        }
        let id = self.table.frames.len() as FrameId;
        self.table.frames.push(StreamFrame {
            image,
            offset,
            address,
            symbol,
            symbol_offset,
            kernel,
            return_address: caller,
        });
        self.frame_ids.insert((cookie, offset, kernel, caller), id);
        id
    }

    fn image(&mut self, cookie: Cookie, kernel: bool) -> ImageId {
        if let Some(&id) = self.image_ids.get(&cookie) {
            return id;
        }
        let entry = self.images.entry(cookie);
        let path = match entry {
            Some(e) => e.path.clone(),
            None if cookie == COOKIE_UNKNOWN => "[unknown]".to_owned(),
            None => self.images.name(cookie),
        };
        let kernel = match entry {
            Some(e) => matches!(e.kind, CookieKind::Kernel | CookieKind::Module),
            None => kernel,
        };
        let no_symbols = self
            .symbols
            .get(&cookie)
            .is_none_or(|r| r.result.symbols.is_empty());
        let id = self.table.images.len() as ImageId;
        self.table.images.push(StreamImage {
            cookie,
            path,
            name: self.images.name(cookie),
            kernel,
            build_id: entry
                .and_then(|e| e.build_id.as_ref())
                .map(|b| b.iter().map(|x| format!("{x:02x}")).collect()),
            no_symbols,
        });
        self.image_ids.insert(cookie, id);
        id
    }
}
