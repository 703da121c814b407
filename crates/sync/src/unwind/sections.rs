//! Reading binaries' unwind sections for the unwinder: where they come
//! from ([`CfiSource`]), what is read ([`CfiSections`], checked by
//! `cfi_check` before framehop sees them), and the reader threads
//! ([`Loader`], on `profkit_untrusted`'s `TimeBox`) that keep a slow or
//! stuck file from stalling the stage, as the parent module's docs
//! describe. PT_LOAD headers and the vDSO image come from `profkit-elf`.

use super::*;
use profkit_untrusted::{Late, Running, TimeBox};
use std::sync::atomic::Ordering;

/// Section bytes as framehop holds them: shared, never copied again.
pub(super) type Data = Arc<[u8]>;

/// Where a binary's unwind information is read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CfiSource {
    /// A mapped file, and the build-id it must have if one is known.
    File {
        /// How to open it.
        binary: MappedBinary,
        /// Its build-id, when the cookie was derived from one.
        build_id: Option<Vec<u8>>,
    },
    /// The kernel's vdso, read from this process's own mapping.
    Vdso,
}

/// A binary's unwind sections and load segments, as read.
#[derive(Debug, Clone)]
pub(crate) struct CfiSections {
    /// The address the module's relative addresses count from.
    pub(super) base_svma: u64,
    /// Addresses of executable code (the module's range).
    pub(super) code: Range<u64>,
    pub(super) text_svma: Option<Range<u64>>,
    pub(super) got_svma: Option<Range<u64>>,
    pub(super) eh_frame_svma: Option<Range<u64>>,
    pub(super) eh_frame: Option<Data>,
    pub(super) eh_frame_hdr_svma: Option<Range<u64>>,
    pub(super) eh_frame_hdr: Option<Data>,
    pub(super) debug_frame: Option<Data>,
    /// Executable LOAD segments first: (file offset, address, file size).
    pub(super) segments: Vec<(u64, u64, u64)>,
    /// The `.debug_frame` came from the binary's separate debug file.
    pub(super) from_debug_file: bool,
}

impl CfiSections {
    pub(super) fn bytes(&self) -> usize {
        [&self.eh_frame, &self.eh_frame_hdr, &self.debug_frame]
            .iter()
            .map(|d| d.as_ref().map_or(0, |d| d.len()))
            .sum()
    }

    pub(super) fn unwinder(&self) -> UnwinderX86_64<Data> {
        let info = ExplicitModuleSectionInfo {
            base_svma: self.base_svma,
            text_svma: self.text_svma.clone(),
            got_svma: self.got_svma.clone(),
            eh_frame_svma: self.eh_frame_svma.clone(),
            eh_frame: self.eh_frame.clone(),
            eh_frame_hdr_svma: self.eh_frame_hdr_svma.clone(),
            eh_frame_hdr: self.eh_frame_hdr.clone(),
            debug_frame: self.debug_frame.clone(),
            ..Default::default()
        };
        let mut u = UnwinderX86_64::new();
        // Placed at its own addresses: avma == svma.
        u.add_module(Module::new(
            String::new(),
            self.code.clone(),
            self.base_svma,
            info,
        ));
        u
    }

    /// Whether an FDE covers the binary's address `svma`: None when that
    /// cannot be told (no `.eh_frame_hdr`, or it does not answer).
    pub(super) fn covers(&self, svma: u64) -> Option<bool> {
        use gimli::{EhFrame, EhFrameHdr, LittleEndian, UnwindSection};
        let (eh, hdr) = (self.eh_frame.as_deref()?, self.eh_frame_hdr.as_deref()?);
        let start = |r: &Option<Range<u64>>| r.as_ref().map_or(0, |r| r.start);
        let bases = framehop_bases(
            start(&self.eh_frame_svma),
            start(&self.eh_frame_hdr_svma),
            start(&self.text_svma),
            start(&self.got_svma),
        );
        let parsed = EhFrameHdr::new(hdr, LittleEndian).parse(&bases, 8).ok()?;
        let mut eh_frame = EhFrame::new(eh, LittleEndian);
        eh_frame.set_address_size(8);
        match parsed
            .table()?
            .fde_for_address(&eh_frame, &bases, svma, EhFrame::cie_from_offset)
        {
            Ok(_) => Some(true),
            Err(gimli::Error::NoUnwindInfoForAddress) => Some(false),
            Err(_) => None,
        }
    }

    /// What to subtract from an address of mapping `m` to get the
    /// binary's own address.
    pub(super) fn bias(&self, m: &Map) -> u64 {
        let page = |o: u64| o & !0xfff;
        let svma_at_start = self
            .segments
            .iter()
            .find(|&&(off, _, size)| page(off) <= m.pgoff && m.pgoff < off.saturating_add(size))
            .map(|&(off, vaddr, _)| vaddr.wrapping_sub(off).wrapping_add(m.pgoff))
            .unwrap_or(m.pgoff);
        m.start.wrapping_sub(svma_at_start)
    }
}

/// Why a binary's unwind information is not used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum CfiMissing {
    /// The file could not be opened (see [`crate::binfile::Refused`]) or
    /// parsed, or is not the binary the cookie names.
    Unreadable,
    /// It has no `.eh_frame` or `.debug_frame`.
    NoCfi,
    /// Its unwind information failed the check (hostile or corrupt).
    Refused(String),
    /// Reading it took longer than [`CFI_TIMEOUT`].
    TimedOut,
    /// Its frames cost too much to unwind ([`DEMOTE_FRAME_COST`]).
    Demoted,
}

/// Reads binaries' unwind sections on worker threads
/// (`profkit_untrusted::TimeBox`), at most [`CFI_READS_IN_FLIGHT`] at once
/// (a huge binary does not hold up libc's small sections behind it);
/// answers are collected when the stage next looks.
pub(super) struct Loader {
    pub(super) answers: (Sender<Answered>, Receiver<Answered>),
    /// Requests not started yet.
    pub(super) queued: VecDeque<(Cookie, CfiSource)>,
    /// Reads running, each with when it started and whether it has called
    /// the fetch hook (then its time box is `sources.fetch_timeout`).
    pub(super) running: FxHashMap<Cookie, (Running<()>, Arc<AtomicBool>)>,
    /// The reader threads: a read given up after the timeout is left to
    /// its thread and counts as stuck until it answers (then its answer is
    /// taken after all); at [`MAX_STUCK_READS`] stuck no more reads start.
    pub(super) workers: TimeBox,
    pub(super) timeout: Duration,
    /// Where binaries without unwind tables find their debug files.
    pub(super) sources: Arc<DebugFrameSources>,
}

/// A binary's answer, from its reading thread.
pub(super) type Answered = (Cookie, CfiAnswer);

/// Unwind-section reads running at once.
pub(super) const CFI_READS_IN_FLIGHT: usize = 4;

impl Loader {
    pub(super) fn new(timeout: Duration, sources: DebugFrameSources) -> Self {
        Loader {
            sources: Arc::new(sources),
            answers: channel(),
            queued: VecDeque::new(),
            running: FxHashMap::default(),
            workers: TimeBox::new("profkit-cfi", MAX_STUCK_READS as usize, CFI_READS_IN_FLIGHT),
            timeout,
        }
    }

    /// Whether `cookie` was asked for and not answered yet.
    pub(super) fn is_pending(&self, cookie: Cookie) -> bool {
        self.running.contains_key(&cookie) || self.queued.iter().any(|(c, _)| *c == cookie)
    }

    /// Queues a request; false when reading has stopped (too many reads
    /// that never came back).
    pub(super) fn request(&mut self, cookie: Cookie, source: CfiSource) -> bool {
        if self.workers.is_refusing() {
            return false;
        }
        self.queued.push_back((cookie, source));
        self.start_reads();
        true
    }

    pub(super) fn start_reads(&mut self) {
        while self.running.len() < CFI_READS_IN_FLIGHT {
            let Some((c, s)) = self.queued.pop_front() else {
                return;
            };
            let tx = self.answers.0.clone();
            let sources = self.sources.clone();
            let fetching = Arc::new(AtomicBool::new(false));
            let flag = fetching.clone();
            match self.workers.start(move || {
                let _ = tx.send((c, read_cfi(s, &sources, &flag)));
            }) {
                Ok(r) => {
                    self.running.insert(c, (r, fetching));
                }
                Err(Late::TooManyStuck { .. }) => {
                    let _ = self.answers.0.send((c, Err(CfiMissing::TimedOut)));
                }
                Err(_) => {
                    let _ = self.answers.0.send((c, Err(CfiMissing::Unreadable)));
                }
            }
        }
    }

    /// The answers in, waiting up to `wait` for the first; a read past the
    /// timeout is answered `TimedOut` and given up (its thread left to it).
    pub(super) fn poll(&mut self, wait: Duration) -> Vec<(Cookie, CfiAnswer)> {
        let mut out = Vec::new();
        if !wait.is_zero() && !self.running.is_empty() {
            if let Ok(a) = self.answers.1.recv_timeout(wait) {
                out.push(a);
            }
        }
        while let Ok(a) = self.answers.1.try_recv() {
            out.push(a);
        }
        for (c, _) in &out {
            // A slow read's answer, after its time-out, replaces the
            // time-out (`install`); its thread no longer counts as stuck.
            self.running.remove(c);
        }
        let late: Vec<Cookie> = self
            .running
            .iter()
            .filter(|(_, (r, fetching))| {
                let limit = if fetching.load(Ordering::Acquire) {
                    self.sources.fetch_timeout
                } else {
                    self.timeout
                };
                r.started().elapsed() > limit
            })
            .map(|(&c, _)| c)
            .collect();
        for c in late {
            if let Some((r, _)) = self.running.remove(&c) {
                // Finished just now after all: its answer is in `answers`
                // for the next poll, as a slow read's.
                let _ = r.give_up();
            }
            out.push((c, Err(CfiMissing::TimedOut)));
        }
        if self.workers.is_refusing() {
            out.extend(
                self.queued
                    .drain(..)
                    .map(|(c, _)| (c, Err(CfiMissing::TimedOut))),
            );
        }
        self.start_reads();
        out
    }
}

/// Reads a binary's unwind sections (on the reader's worker thread): a
/// file's own, else, when it has neither `.eh_frame` nor `.debug_frame`
/// (or an `.eh_frame` that covers less than half its code,
/// [`scant_eh_frame`]) and its build-id is known, the `.debug_frame` of its
/// separate debug file (`debug_file`: found through `sources`; `fetching` is set when
/// the fetch hook is called, which gives the read the longer time box).
pub(super) fn read_cfi(
    source: CfiSource,
    sources: &DebugFrameSources,
    fetching: &AtomicBool,
) -> CfiAnswer {
    match source {
        CfiSource::Vdso => {
            let bytes = profkit_elf::read_own_vdso().map_err(|_| CfiMissing::Unreadable)?;
            sections_of(&*bytes)
        }
        CfiSource::File { binary, build_id } => {
            let f = open_mapped(&binary).map_err(|_| CfiMissing::Unreadable)?;
            if let Some(want) = &build_id {
                let again = f.try_clone().map_err(|_| CfiMissing::Unreadable)?;
                if build_id_of(again).as_deref() != Some(&want[..]) {
                    return Err(CfiMissing::Unreadable);
                }
            }
            let cache = object::read::ReadCache::new(f);
            let mut parsed = Parsed::parse(&cache)?;
            match (parsed.assemble(&cache, None::<(&Parsed, &[u8])>), build_id) {
                (Err(CfiMissing::NoCfi), Some(id)) if !parsed.has_cfi() => {
                    debug_file::debug_frame_of(&parsed, &cache, &id, sources, fetching)
                }
                // The start files' `_start` alone: the debug file's
                // `.debug_frame` if there is one, else this.
                (Ok(own), Some(id)) if scant_eh_frame(&own) => {
                    parsed.without_eh_frame = true;
                    debug_file::debug_frame_of(&parsed, &cache, &id, sources, fetching).or(Ok(own))
                }
                (answer, _) => answer,
            }
        }
    }
}

/// The unwind sections and load segments of an ELF file, read by range
/// (`profkit_elf`: program headers, section headers, then only the
/// sections used).
pub(super) fn sections_of<'d, R: object::ReadRef<'d>>(data: R) -> CfiAnswer {
    Parsed::parse(data)?.assemble(data, None::<(&Parsed, &[u8])>)
}

/// An x86-64 ELF file's load segments and section table, parsed.
pub(super) struct Parsed {
    pub(super) loads: profkit_elf::Segments,
    pub(super) table: profkit_elf::Sections,
    /// Its own `.eh_frame` is set aside (too scant: [`scant_eh_frame`]), so
    /// a debug file's `.debug_frame` may serve instead.
    pub(super) without_eh_frame: bool,
}

/// An `.eh_frame` this small is looked at for how much of the code it
/// covers ([`scant_eh_frame`]); larger ones are taken as whole (the scan
/// stays cheap: gcc's start files alone bring about 100 bytes).
pub(super) const SCANT_EH_FRAME_BYTES: usize = 4096;

/// Whether the binary's own `.eh_frame` describes at most one function of
/// its `.text`: a program built with `-fno-asynchronous-unwind-tables`
/// still gets the start files' entry for `_start`, and nothing else (a
/// program with tables has at least `main`'s besides; the share of code
/// covered says less: the start files' other functions have no entries,
/// and in a small program they are half its `.text`). Its separate debug
/// file's `.debug_frame`, if there is one, is then used instead (framehop
/// takes one table or the other per module).
pub(super) fn scant_eh_frame(s: &CfiSections) -> bool {
    use gimli::{CieOrFde, EhFrame, LittleEndian, UnwindSection};
    let Some(eh) = s.eh_frame.as_deref() else {
        return false;
    };
    if s.debug_frame.is_some() || eh.len() > SCANT_EH_FRAME_BYTES {
        return false;
    }
    let code = s.text_svma.clone().unwrap_or(s.code.clone());
    let start = |r: &Option<Range<u64>>| r.as_ref().map_or(0, |r| r.start);
    let bases = framehop_bases(
        start(&s.eh_frame_svma),
        start(&s.eh_frame_hdr_svma),
        start(&s.text_svma),
        start(&s.got_svma),
    );
    let mut table = EhFrame::new(eh, LittleEndian);
    table.set_address_size(8);
    let mut entries = table.entries(&bases);
    let mut in_text = 0;
    while let Ok(Some(entry)) = entries.next() {
        if let CieOrFde::Fde(partial) = entry {
            if let Ok(fde) = partial.parse(EhFrame::cie_from_offset) {
                if code.contains(&fde.initial_address()) {
                    in_text += 1;
                    if in_text > 1 {
                        return false;
                    }
                }
            }
        }
    }
    true
}

/// A section's bytes, uncompressed, at most [`MAX_CFI_SECTION`].
fn read_section<'d, R: object::ReadRef<'d>>(
    table: &profkit_elf::Sections,
    data: R,
    s: &profkit_elf::Section,
) -> Result<Data, CfiMissing> {
    if s.size > MAX_CFI_SECTION {
        return Err(CfiMissing::Refused(format!(
            "its {} is {} bytes, over the {} MiB this reads",
            String::from_utf8_lossy(&s.name),
            s.size,
            MAX_CFI_SECTION >> 20
        )));
    }
    let d = table.data(data, s, MAX_CFI_SECTION).map_err(|e| match e {
        profkit_elf::Error::TooLarge { size, .. } => CfiMissing::Refused(format!(
            "its {} decompresses to {size} bytes, over the {} MiB this reads",
            String::from_utf8_lossy(&s.name),
            MAX_CFI_SECTION >> 20
        )),
        _ => CfiMissing::Unreadable,
    })?;
    Ok(Arc::from(&d[..]))
}

impl Parsed {
    /// The headers of the ELF file in `data`: `NoCfi` for another machine
    /// than x86-64 (64-bit).
    pub(super) fn parse<'d, R: object::ReadRef<'d>>(data: R) -> Result<Parsed, CfiMissing> {
        use profkit_elf::{Sections, Segments};
        let loads = Segments::parse(data).map_err(|_| CfiMissing::Unreadable)?;
        let table = Sections::parse(data).map_err(|_| CfiMissing::Unreadable)?;
        if !(table.is_64() && loads.machine() == object::elf::EM_X86_64) {
            return Err(CfiMissing::NoCfi);
        }
        Ok(Parsed {
            loads,
            table,
            without_eh_frame: false,
        })
    }

    /// A section with bytes in this file (not `SHT_NOBITS`, as a
    /// `--only-keep-debug` file's code and `.eh_frame` are).
    pub(super) fn section(&self, name: &str) -> Option<&profkit_elf::Section> {
        if self.without_eh_frame && name.starts_with(".eh_frame") {
            return None;
        }
        self.table
            .by_name(name)
            .filter(|s| s.size > 0 && !s.is_nobits())
    }

    /// Whether the file holds `.eh_frame` or `.debug_frame` bytes.
    pub(super) fn has_cfi(&self) -> bool {
        self.section(".eh_frame").is_some() || self.section(".debug_frame").is_some()
    }

    /// The executable PT_LOADs' (address, size in memory): what a separate
    /// debug file must share with its binary.
    pub(super) fn code_layout(&self) -> Vec<(u64, u64)> {
        self.loads
            .all()
            .iter()
            .filter(|s| s.executable)
            .map(|s| (s.vaddr, s.mem_size))
            .collect()
    }

    /// The unwind sections and load segments of this file (`data`), its
    /// `.debug_frame` taken from `debug` instead when given (the separate
    /// debug file's table and bytes, checked by the caller to be this
    /// binary's).
    pub(super) fn assemble<'d, 'e, R: object::ReadRef<'d>, D: object::ReadRef<'e>>(
        &self,
        data: R,
        debug: Option<(&Parsed, D)>,
    ) -> CfiAnswer {
        let range = |s: &&profkit_elf::Section| s.range();
        let read = |s: &&profkit_elf::Section| read_section(&self.table, data, s);
        let mut segments = Vec::new();
        let mut code: Option<Range<u64>> = None;
        for seg in self.loads.all() {
            let (off, size) = (seg.file_offset, seg.file_size);
            if seg.executable {
                let r = seg.vaddr..seg.vaddr.saturating_add(seg.mem_size);
                code = Some(match code {
                    Some(c) => c.start.min(r.start)..c.end.max(r.end),
                    None => r,
                });
                segments.insert(0, (off, seg.vaddr, size));
            } else {
                segments.push((off, seg.vaddr, size));
            }
        }
        let code = code.ok_or(CfiMissing::NoCfi)?;
        let section = |name: &str| self.section(name);
        let eh = section(".eh_frame");
        let hdr = section(".eh_frame_hdr");
        let eh_frame = eh.as_ref().map(read).transpose()?;
        let debug_frame = match (eh, debug) {
            (Some(_), _) => None,
            (None, None) => section(".debug_frame").as_ref().map(read).transpose()?,
            (None, Some((d, bytes))) => d
                .section(".debug_frame")
                .map(|s| read_section(&d.table, bytes, s))
                .transpose()?,
        };
        if eh_frame.is_none() && debug_frame.is_none() {
            return Err(CfiMissing::NoCfi);
        }
        let eh_frame_svma = eh.as_ref().map(range);
        let eh_frame_hdr = match (&eh_frame, &hdr) {
            (Some(_), Some(h)) => Some(read(h)?),
            _ => None,
        };
        let eh_frame_hdr_svma = hdr.as_ref().map(range);
        // Addresses only: a stripped binary keeps its section headers.
        let by_name = |name: &str| self.table.by_name(name).filter(|s| s.size > 0);
        let text_svma = by_name(".text").as_ref().map(range);
        let got_svma = by_name(".got").as_ref().map(range);
        // The bases framehop decodes pointers with: the check must see the
        // same pointers.
        let start = |r: &Option<Range<u64>>| r.as_ref().map_or(0, |r| r.start);
        let bases = framehop_bases(
            start(&eh_frame_svma),
            eh_frame_hdr
                .as_ref()
                .map_or(0, |_| start(&eh_frame_hdr_svma)),
            start(&text_svma),
            start(&got_svma),
        );
        let refused = |e: crate::cfi_check::CfiRefusal| CfiMissing::Refused(e.to_string());
        if let Some(d) = &eh_frame {
            let hdr = eh_frame_hdr.as_deref();
            check_cfi(CfiSection::EhFrame { hdr }, d, &bases).map_err(refused)?;
        }
        if let Some(d) = &debug_frame {
            check_cfi(CfiSection::DebugFrame, d, &bases).map_err(refused)?;
        }
        Ok(CfiSections {
            base_svma: code.start & !0xfff,
            code,
            text_svma,
            got_svma,
            eh_frame_hdr,
            eh_frame_hdr_svma: eh_frame_hdr_svma.filter(|_| eh_frame.is_some()),
            eh_frame_svma,
            eh_frame,
            debug_frame,
            segments,
            from_debug_file: debug.is_some(),
        })
    }
}

/// Where the unwind information of the binary of mapping `m`, with cookie
/// entry `entry`, is read from; None for code no file holds.
pub(crate) fn source_of(
    entry: &profkit_eventlog::CookieEntry,
    m: &Map,
    pid: u32,
    proc_root: Option<&std::path::Path>,
) -> Option<CfiSource> {
    use profkit_eventlog::CookieKind;
    match entry.kind {
        CookieKind::Vdso => Some(CfiSource::Vdso),
        CookieKind::User => Some(CfiSource::File {
            binary: MappedBinary {
                path: PathBuf::from(&entry.path),
                map_file: proc_root
                    .map(|r| r.join(format!("{pid}/map_files/{:x}-{:x}", m.start, m.end))),
                identity: ((entry.dev, entry.inode) != (0, 0)).then_some((entry.dev, entry.inode)),
            },
            build_id: entry.build_id.clone().filter(|b| !b.is_empty()),
        }),
        _ => None,
    }
}
