//! Opening sessions: a session directory (or file), what the caller knows
//! of its recorder ([`Liveness`]), the symbol sources it carries (kallsyms
//! copy, perf maps, an archive's `debug/` tree), and whether several can be
//! merged into one report ([`check_merge`]).

use std::path::{Path, PathBuf};

use profkit_eventlog::parts::CURRENT_PART;
use profkit_eventlog::SessionReader;

use crate::error::{Error, Result};
use crate::model::CallGraphMode;
use crate::window::TimeSpec;

/// The file name of the session log inside a session directory.
pub const SESSION_FILE: &str = profkit_eventlog::parts::CURRENT_PART;
/// The kallsyms copy a session directory may hold (used instead of the
/// live `/proc/kallsyms` when present).
pub const KALLSYMS_FILE: &str = profkit_eventlog::layout::KALLSYMS_FILE;
/// Where `profctl archive` puts the sampled binaries and debug files, by
/// build-id (`debug/.build-id/ab/cdef…`); searched automatically.
pub const ARCHIVE_DEBUG_DIR: &str = profkit_eventlog::layout::DEBUG_DIR;
/// Binaries of other mount namespaces the recorder could not keep.
pub const NOT_KEPT_FILE: &str = profkit_eventlog::layout::NOT_KEPT_FILE;

/// Whether the recorder of a session is still running, as far as the
/// caller knows (the report only reads bytes; the command line asks the
/// daemon's lock).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Liveness {
    /// Not known.
    #[default]
    Unknown,
    /// A recorder holds the session: a torn tail is a chunk being written.
    Running,
    /// Nothing records into it: a missing footer means the recorder died.
    NotRunning,
}

/// One file of a session: the whole of a session in one file, or one part
/// of a rotated session (`profctl start --rotate`).
#[derive(Debug)]
pub struct Part {
    reader: SessionReader,
    number: Option<u64>,
    current: bool,
}

impl Part {
    /// The part's checked file.
    pub fn reader(&self) -> &SessionReader {
        &self.reader
    }

    /// Its number among the parts of a rotated session (from its header);
    /// None for a session in one file.
    pub fn number(&self) -> Option<u64> {
        self.number
    }

    /// Whether it is `session.pkl`: the part a running recorder writes
    /// (the only one that may lack a footer or end in a torn chunk).
    pub fn is_current(&self) -> bool {
        self.current
    }
}

/// Where the parts of a rotated session that were read sit among all its
/// parts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rotation {
    /// The oldest part present (parts before it were deleted by retention,
    /// or, with [`Rotation::one_file`], not asked for).
    pub first: u64,
    /// The newest part present.
    pub last: u64,
    /// How many parts were read: fewer than `last - first + 1` with a
    /// `--time` window (parts outside it are not opened) or when some
    /// could not be read (then [`Session::warnings`] says which).
    pub read: u64,
    /// One part file was given: it is reported alone.
    pub one_file: bool,
}

/// The most CPUs a session header is believed about (Linux's largest
/// `NR_CPUS`); a header claiming more gets columns only for the CPUs its
/// chunks have samples or losses of (a forged million cost 3.9 GB).
pub const MAX_CLAIMED_CPUS: usize = profkit_eventlog::MAX_HEADER_CPUS;

/// The most closed parts a session directory may have: a directory with
/// more is refused before anything in it is opened.
pub const MAX_PARTS: usize = 100_000;

/// A `--time` report of a rotated session with JIT code also reads the
/// parts starting this long after its window, for the `JitCode` markers
/// that name the window's samples late (a runtime's dump is buffered);
/// markers later than that are not seen and those samples show by perf
/// map or address. 10 minutes.
pub const JIT_DEFINITIONS_AFTER_NS: u64 = 600_000_000_000;

/// How often a session directory is listed again when a rotation or
/// retention changed it while it was being read.
const LIST_ATTEMPTS: usize = 5;

/// One opened session: its directory (for the kallsyms copy and perf maps)
/// and its checked files, one per part of a rotated session (by number,
/// the newest last) or the one `session.pkl`.
#[derive(Debug)]
pub struct Session {
    dir: PathBuf,
    parts: Vec<Part>,
    rotation: Option<Rotation>,
    /// The whole session's start (monotonic ns, Unix ns): the first part's,
    /// even when it was deleted.
    start: (u64, u64),
    /// The whole session's end (monotonic ns), when its newest part was
    /// read for it but is not among `parts` (a `--time` percentage
    /// window before it).
    end: Option<u64>,
    warnings: Vec<String>,
    liveness: Liveness,
}

/// What one listing of a session directory found, or that it changed.
enum Attempt {
    Done(Session),
    Again(String),
}

/// A part listed in a directory, with its header once read.
struct Listed {
    number: u64,
    path: PathBuf,
    current: bool,
    header: profkit_eventlog::SessionHeader,
}

fn not_found(e: &profkit_eventlog::Error) -> bool {
    matches!(e, profkit_eventlog::Error::Io { source, .. }
        if source.kind() == std::io::ErrorKind::NotFound)
}

impl Session {
    /// Opens the session in `dir` (`dir/session.pkl`, and with it every
    /// closed part `dir/session.NNNNNN.pkl` of a rotated session, read as
    /// one session); `dir` may also name a session file (or one part),
    /// which is then read alone.
    ///
    /// # Errors
    /// [`Error::NoSession`] when there is no session file; [`Error::Session`]
    /// when it cannot be read or is not a session of a version this build
    /// reads (the message names both versions); [`Error::Parts`] when the
    /// directory cannot be listed or holds more than [`MAX_PARTS`] parts.
    pub fn open(dir: impl AsRef<Path>) -> Result<Session> {
        Session::open_window(dir, None)
    }

    /// [`Session::open`] for a report of the `--time` window `window`: of
    /// a rotated session, only the parts whose time (placed from their
    /// headers alone) meets the window are opened, and those starting
    /// within [`JIT_DEFINITIONS_AFTER_NS`] after it of a session with JIT
    /// code (`jit_code`: their `JitCode` markers may name the window's
    /// samples; their samples do not count); the others are never read. The window is that of the whole session (its start
    /// is the first part's, even when that part was deleted).
    ///
    /// # Errors
    /// As [`Session::open`].
    pub fn open_window(dir: impl AsRef<Path>, window: Option<&TimeSpec>) -> Result<Session> {
        let given = dir.as_ref();
        if given.is_file() {
            let parent = given
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            let reader = SessionReader::open(given)?;
            let number = reader.header().part.map(|p| p.number);
            // Every live session's one file says it is part 1: only a
            // later part, or a closed one, is a part of a rotated session.
            let closed = given
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(profkit_eventlog::parts::parse_part_file_name)
                .is_some();
            let rotation = number.filter(|&n| n > 1 || closed).map(|n| Rotation {
                first: n,
                last: n,
                read: 1,
                one_file: true,
            });
            let current = given.file_name().is_some_and(|n| n == CURRENT_PART);
            return Ok(Session::of_parts(
                parent.to_path_buf(),
                vec![Part {
                    reader,
                    number,
                    current,
                }],
                rotation,
                Vec::new(),
            ));
        }
        let mut why = String::new();
        for attempt in 1..=LIST_ATTEMPTS {
            if attempt > 1 {
                // Let a rotation under way finish (2, 4, 8, 16 ms).
                std::thread::sleep(std::time::Duration::from_millis(2 << (attempt - 2)));
            }
            match Session::try_open_dir(given, window, attempt == LIST_ATTEMPTS)? {
                Attempt::Done(s) => return Ok(s),
                Attempt::Again(w) => why = w,
            }
        }
        // The last attempt never asks for another.
        Err(Error::Parts {
            dir: given.to_path_buf(),
            reason: why,
        })
    }

    fn of_parts(
        dir: PathBuf,
        parts: Vec<Part>,
        rotation: Option<Rotation>,
        warnings: Vec<String>,
    ) -> Session {
        let start = parts.first().map_or((0, 0), |p| {
            let h = p.reader.header();
            match h.part {
                Some(p) => (p.session_start_monotonic_ns, p.session_start_unix_ns),
                None => (h.start_monotonic_ns, h.start_time_unix_ns),
            }
        });
        Session {
            dir,
            parts,
            rotation,
            start,
            end: None,
            warnings,
            liveness: Liveness::Unknown,
        }
    }

    /// One listing of `dir` and the opening of the parts it names; `last`:
    /// the last attempt, which reads what it can and says what it could
    /// not instead of asking for another.
    fn try_open_dir(dir: &Path, window: Option<&TimeSpec>, last: bool) -> Result<Attempt> {
        let parts_error = |reason: String| Error::Parts {
            dir: dir.to_path_buf(),
            reason,
        };
        let current_path = dir.join(CURRENT_PART);
        let closed = match profkit_eventlog::parts::closed_parts(dir) {
            Ok(c) => c,
            Err(_) if !current_path.exists() => {
                return Err(Error::NoSession {
                    dir: dir.to_path_buf(),
                    file: current_path,
                })
            }
            Err(e) => return Err(parts_error(format!("cannot list it: {e}"))),
        };
        if closed.len() > MAX_PARTS {
            return Err(parts_error(format!(
                "{} parts, more than the {MAX_PARTS} a report reads: report a part file \
                 alone, or fewer parts moved to another directory",
                closed.len()
            )));
        }
        let mut warnings = Vec::new();
        // `session.0000001.pkl` beside `session.000001.pkl` is not part 1
        // a second time: only the canonical name is read.
        for name in profkit_eventlog::parts::stray_part_names(dir, 8).unwrap_or_default() {
            warnings.push(format!(
                "{}: not a part's name (part N is session.{{N, six digits}}.pkl); not read",
                dir.join(name).display()
            ));
        }
        if closed.is_empty() {
            // A session in one file, or a rotated one whose closed parts
            // were all deleted.
            let reader = match SessionReader::open(&current_path) {
                Ok(r) => r,
                // Renamed to part 1 (or later) since the listing.
                Err(e)
                    if not_found(&e)
                        && !last
                        && profkit_eventlog::parts::closed_parts(dir)
                            .is_ok_and(|c| !c.is_empty()) =>
                {
                    return Ok(Attempt::Again(format!(
                        "{CURRENT_PART} was renamed while the directory was read"
                    )))
                }
                Err(e) if not_found(&e) => {
                    return Err(Error::NoSession {
                        dir: dir.to_path_buf(),
                        file: current_path,
                    })
                }
                Err(e) => return Err(e.into()),
            };
            let number = reader.header().part.map(|p| p.number);
            if let Some(n) = number.filter(|&n| n > 1) {
                // Part n alone: were 1..n deleted, or renamed since the
                // listing (a rotation)?
                let again = profkit_eventlog::parts::closed_parts(dir)
                    .map_err(|e| parts_error(format!("cannot list it: {e}")))?;
                if again.iter().any(|&(m, _)| m < n) && !last {
                    return Ok(Attempt::Again(format!(
                        "part {} appeared while the directory was read",
                        again[0].0
                    )));
                }
            }
            // A session.pkl that is part 1 is a session in one file.
            let rotation = number.filter(|&n| n > 1).map(|n| Rotation {
                first: n,
                last: n,
                read: 1,
                one_file: false,
            });
            return Ok(Attempt::Done(Session::of_parts(
                dir.to_path_buf(),
                vec![Part {
                    reader,
                    number,
                    current: true,
                }],
                rotation,
                warnings,
            )));
        }
        // Every part's header: where it sits, in number and in time.
        let mut listed: Vec<Listed> = Vec::with_capacity(closed.len() + 1);
        // Parts present but unreadable (already warned about): not gaps.
        let mut unreadable = std::collections::BTreeSet::new();
        for (n, path) in closed {
            match profkit_eventlog::read_header(&path) {
                Ok((h, _)) => {
                    if h.part.map(|p| p.number) != Some(n) {
                        warnings.push(format!(
                            "{}: its header does not say it is part {n} of a rotated session; \
                             not read",
                            path.display()
                        ));
                        unreadable.insert(n);
                        continue;
                    }
                    listed.push(Listed {
                        number: n,
                        path,
                        current: false,
                        header: h,
                    });
                }
                // The oldest part deleted by retention since the listing.
                Err(e) if not_found(&e) && listed.is_empty() => {}
                Err(e) if not_found(&e) && !last => {
                    return Ok(Attempt::Again(format!(
                        "part {n} vanished while the directory was read"
                    )))
                }
                Err(e) => {
                    warnings.push(format!("part {n} could not be read: {e}"));
                    unreadable.insert(n);
                }
            }
        }
        let newest_closed = closed_numbers_end(&listed).max(unreadable.last().copied());
        match profkit_eventlog::read_header(&current_path) {
            Ok((h, _)) => match h.part.map(|p| p.number) {
                None => {
                    // Not a part: a session in one file beside old parts.
                    warnings.push(format!(
                        "{}: not a part of a rotated session, but closed parts are beside \
                         it: reporting {CURRENT_PART} alone",
                        dir.display()
                    ));
                    let reader = SessionReader::open(&current_path)?;
                    return Ok(Attempt::Done(Session::of_parts(
                        dir.to_path_buf(),
                        vec![Part {
                            reader,
                            number: None,
                            current: true,
                        }],
                        None,
                        warnings,
                    )));
                }
                Some(n) if newest_closed.is_some_and(|m| n != m + 1) && !last => {
                    return Ok(Attempt::Again(format!(
                        "{CURRENT_PART} is part {n}, after part {}: a rotation while the \
                         directory was read",
                        newest_closed.unwrap_or(0)
                    )));
                }
                Some(n) if newest_closed.is_some_and(|m| n <= m) => warnings.push(format!(
                    "{CURRENT_PART} says it is part {n}, not after the closed parts; not read"
                )),
                Some(n) => listed.push(Listed {
                    number: n,
                    path: current_path.clone(),
                    current: true,
                    header: h,
                }),
            },
            // Between a rotation's rename and the new part: none yet, or a
            // session whose last part was closed.
            Err(e) if not_found(&e) => {
                let again = profkit_eventlog::parts::closed_parts(dir)
                    .map_err(|e| parts_error(format!("cannot list it: {e}")))?;
                if again.last().map(|p| p.0) != newest_closed && !last {
                    return Ok(Attempt::Again(format!(
                        "{CURRENT_PART} was renamed while the directory was read"
                    )));
                }
            }
            // Created by a rotation but its header not yet written.
            Err(_) if !last => {
                return Ok(Attempt::Again(format!(
                    "{CURRENT_PART} had no readable header yet"
                )))
            }
            Err(e) => warnings.push(format!("{}: {e}; not read", current_path.display())),
        }
        // Consecutive numbers; a gap after the first is a part missed.
        for w in listed.windows(2) {
            let (a, b) = (w[0].number, w[1].number);
            if b != a + 1 && !(a + 1..b).all(|n| unreadable.contains(&n)) {
                if !last {
                    return Ok(Attempt::Again(format!(
                        "parts {} to {} are missing",
                        a + 1,
                        b - 1
                    )));
                }
                let which = if b == a + 2 {
                    format!("part {}", a + 1)
                } else {
                    format!("parts {}–{}", a + 1, b - 1)
                };
                warnings.push(format!(
                    "{}: {which} of the rotated session could not be read (missing, or renamed \
                     while the directory was read {LIST_ATTEMPTS} times); the report leaves \
                     it out",
                    dir.display()
                ));
            }
        }
        let Some(newest) = listed.last() else {
            return Err(Error::NoSession {
                dir: dir.to_path_buf(),
                file: current_path,
            });
        };
        let (mut first, last_n) = (listed[0].number, newest.number);
        // Place each part in time from its header: part i spans its start
        // to the next one's; the newest to its end (read only if needed).
        let start = listed[0].header.part.map_or(
            (
                listed[0].header.start_monotonic_ns,
                listed[0].header.start_time_unix_ns,
            ),
            |p| (p.session_start_monotonic_ns, p.session_start_unix_ns),
        );
        let mut opened: Vec<Option<SessionReader>> = (0..listed.len()).map(|_| None).collect();
        let mut session_end = None;
        let mut wanted = vec![true; listed.len()];
        if let Some(w) = window {
            let newest_i = listed.len() - 1;
            let end = if matches!(w, TimeSpec::Percent(..)) {
                // Percentages need the session's end: the newest part's.
                match open_listed(&listed[newest_i]) {
                    Ok(r) => {
                        let end = reader_end(&r);
                        session_end = Some(end);
                        opened[newest_i] = Some(r);
                        end
                    }
                    Err(e) if not_found(&e) && !last => {
                        return Ok(Attempt::Again(format!(
                            "{} vanished while the directory was read",
                            listed[newest_i].path.display()
                        )))
                    }
                    Err(e) => return Err(e.into()),
                }
            } else {
                u64::MAX
            };
            let (lo, hi) = w.resolve(start.0, start.1, end);
            for i in 0..listed.len() {
                let from = listed[i].header.start_monotonic_ns;
                let to = listed
                    .get(i + 1)
                    .map_or(u64::MAX, |n| n.header.start_monotonic_ns);
                // Its rounds end by the next part's start, so their
                // middles fall before it. A part starting within
                // JIT_DEFINITIONS_AFTER of the window's end, of a session
                // with JIT code (every live one), is read too, for its
                // definitions only: a runtime writes its dump late, so the
                // JitCode naming a sample may come parts later; bounded,
                // so that a window of a week-long session does not read
                // the rest of the week.
                let jit_after = listed[i].header.event.jit_code
                    && from < hi.saturating_add(JIT_DEFINITIONS_AFTER_NS);
                wanted[i] = (from < hi || jit_after) && to > lo;
            }
        }
        let mut parts = Vec::new();
        for (i, l) in listed.iter().enumerate() {
            if !wanted[i] {
                continue;
            }
            let reader = match opened[i].take() {
                Some(r) => r,
                None => match open_listed(l) {
                    Ok(r) => r,
                    // Deleted by retention since the listing.
                    Err(e) if not_found(&e) && parts.is_empty() && !l.current => {
                        if l.number == first {
                            first += 1;
                        }
                        continue;
                    }
                    Err(e) if not_found(&e) && !last => {
                        return Ok(Attempt::Again(format!(
                            "{} vanished while the directory was read",
                            l.path.display()
                        )))
                    }
                    Err(e) => {
                        warnings.push(format!("part {} could not be read: {e}", l.number));
                        continue;
                    }
                },
            };
            // session.pkl may have become the next part since its header
            // was read.
            if reader.header().part.map(|p| p.number) != Some(l.number) {
                if !last {
                    return Ok(Attempt::Again(format!(
                        "{} changed while the directory was read",
                        l.path.display()
                    )));
                }
                warnings.push(format!(
                    "{}: part {} changed while the directory was read {LIST_ATTEMPTS} times; \
                     the report leaves it out",
                    dir.display(),
                    l.number
                ));
                continue;
            }
            parts.push(Part {
                reader,
                number: Some(l.number),
                current: l.current,
            });
        }
        if parts.is_empty() {
            // Nothing of the session meets the window: read the newest part
            // (an empty report, with the session's header).
            let l = newest;
            parts.push(Part {
                reader: open_listed(l)?,
                number: Some(l.number),
                current: l.current,
            });
        }
        let rotation = Rotation {
            first,
            last: last_n,
            read: parts.len() as u64,
            one_file: false,
        };
        let mut s = Session::of_parts(dir.to_path_buf(), parts, Some(rotation), warnings);
        s.start = start;
        s.end = session_end;
        Ok(Attempt::Done(s))
    }

    /// A session already read (tests, or bytes from elsewhere); `dir` is
    /// where its kallsyms copy and perf maps would be.
    pub fn from_reader(reader: SessionReader, dir: impl Into<PathBuf>) -> Session {
        let number = reader.header().part.map(|p| p.number);
        let rotation = number.filter(|&n| n > 1).map(|n| Rotation {
            first: n,
            last: n,
            read: 1,
            one_file: true,
        });
        Session::of_parts(
            dir.into(),
            vec![Part {
                reader,
                number,
                current: false,
            }],
            rotation,
            Vec::new(),
        )
    }

    /// The files read, oldest first: one for a session in one file; the
    /// parts of a rotated session that were read (all, or those a `--time`
    /// window needs).
    pub fn parts(&self) -> &[Part] {
        &self.parts
    }

    /// Where the parts read sit among the parts of a rotated session; None
    /// for a session in one file.
    pub fn rotation(&self) -> Option<&Rotation> {
        self.rotation.as_ref()
    }

    /// What went wrong while the directory was read (a part missing, one
    /// that could not be read), for the report's warnings.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// The whole session's start, monotonic ns and Unix ns (of a rotated
    /// session, its first part's, even when that part was deleted).
    pub fn start(&self) -> (u64, u64) {
        self.start
    }

    /// The session's end, monotonic ns: its newest part's footer's end or
    /// last chunk's time, whichever is later (of a rotated session read
    /// for a `--time` window that ends before its newest part, that part
    /// was read for this alone; for other windows, the newest part read).
    pub fn end_monotonic_ns(&self) -> u64 {
        self.end.unwrap_or_else(|| reader_end(self.reader()))
    }

    /// Says whether a recorder still writes this session.
    pub fn set_liveness(&mut self, liveness: Liveness) {
        self.liveness = liveness;
    }

    /// The session directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The CPUs its header lists, when believable (at most
    /// [`MAX_CLAIMED_CPUS`]); else none: then only CPUs seen in the data
    /// get a column.
    pub fn claimed_cpus(&self) -> &[u32] {
        let cpus = &self.reader().header().cpus;
        if cpus.len() <= MAX_CLAIMED_CPUS {
            cpus
        } else {
            &[]
        }
    }

    /// The newest file read: the session file, or of a rotated session
    /// the newest part read (its header gives the event, CPUs and the
    /// recorder's state).
    pub fn reader(&self) -> &SessionReader {
        &self.parts[self.parts.len() - 1].reader
    }

    /// Gives back every part's chunk bytes ([`SessionReader::release_data`]):
    /// for a session whose samples are all counted.
    pub(crate) fn release_chunks(&mut self) {
        for p in &mut self.parts {
            p.reader.release_data();
        }
    }

    /// What the caller said about the recorder.
    pub fn liveness(&self) -> Liveness {
        self.liveness
    }

    /// The kallsyms copy saved with the session, if there is one.
    pub fn kallsyms_copy(&self) -> Option<PathBuf> {
        let p = self.dir.join(KALLSYMS_FILE);
        p.is_file().then_some(p)
    }

    /// The `debug/` directory of an unpacked `profctl archive` (binaries and
    /// debug files under `.build-id/`), if the session directory has one.
    pub fn archive_debug_dir(&self) -> Option<PathBuf> {
        let p = self.dir.join(ARCHIVE_DEBUG_DIR);
        p.join(".build-id").is_dir().then_some(p)
    }

    /// True when the session was recorded on this machine (its host name
    /// is this one's, `/proc/sys/kernel/hostname`): then a recorded file's
    /// inode and mtime mean something here.
    pub fn recorded_here(&self) -> bool {
        let here = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
        let host = &self.reader().header().host;
        !host.is_empty() && host == here.trim()
    }

    /// The copy the recorder kept of cookie `cookie`'s file (another mount
    /// namespace's binary: `debug/.kept/COOKIE`, a regular file), if any.
    pub fn kept_copy(&self, cookie: profkit_eventlog::Cookie) -> Option<PathBuf> {
        let p = profkit_eventlog::SessionLayout::new(&self.dir).kept_copy(cookie);
        std::fs::symlink_metadata(&p)
            .is_ok_and(|m| m.is_file())
            .then_some(p)
    }

    /// Binaries of other mount namespaces the recorder could not keep,
    /// recorded path → why (`debug/not-kept`, lines `PATH: why`; read as a
    /// regular file of at most 1 MiB, else nothing).
    pub fn not_kept(&self) -> std::collections::HashMap<String, String> {
        use std::io::Read;
        let mut out = std::collections::HashMap::new();
        let p = self.dir.join(NOT_KEPT_FILE);
        // A regular file, not a link or FIFO (checked before opening).
        if !std::fs::symlink_metadata(&p).is_ok_and(|m| m.file_type().is_file()) {
            return out;
        }
        let mut text = String::new();
        let read = std::fs::File::open(&p).and_then(|f| f.take(1 << 20).read_to_string(&mut text));
        if read.is_err() {
            return out;
        }
        for line in text.lines() {
            if let Some((path, why)) = line.split_once(": ") {
                out.insert(path.to_owned(), why.to_owned());
            }
        }
        out
    }

    /// The session directory, if it holds perf maps (`perf-PID.map`).
    pub fn perf_map_dir(&self) -> Option<PathBuf> {
        let rd = std::fs::read_dir(&self.dir).ok()?;
        let has_map = rd.flatten().any(|e| {
            let n = e.file_name();
            let n = n.to_string_lossy();
            n.starts_with("perf-") && n.ends_with(".map")
        });
        has_map.then(|| self.dir.clone())
    }
}

/// Checks that `sessions` can be merged into one report: the same event
/// (else [`Error::MergeMismatch`]); different rates are only a warning.
pub(crate) fn check_merge(sessions: &[Session], warnings: &mut Vec<String>) -> Result<()> {
    let Some(first) = sessions.first() else {
        return Ok(());
    };
    let e0 = &first.reader().header().event;
    for s in &sessions[1..] {
        let e = &s.reader().header().event;
        if (e.type_, e.config, &e.name) != (e0.type_, e0.config, &e0.name) {
            return Err(Error::MergeMismatch {
                first_path: first.reader().path().to_path_buf(),
                first: e0.name.clone(),
                second_path: s.reader().path().to_path_buf(),
                second: e.name.clone(),
            });
        }
        let (m0, m) = (CallGraphMode::of(e0), CallGraphMode::of(e));
        if m != m0 {
            let name = |m: Option<CallGraphMode>| m.map_or("none".to_owned(), |m| m.to_string());
            warnings.push(format!(
                "merged sessions record call graphs differently ({} and {}): the header shows \
                 the first's",
                name(m0),
                name(m)
            ));
        }
        if (e.frequency, e.period) != (e0.frequency, e0.period) {
            warnings.push(format!(
                "merged sessions sample at different rates ({} and {}): a sample stands for a \
                 different amount of time in each",
                rate(e0.frequency, e0.period),
                rate(e.frequency, e.period)
            ));
        }
    }
    Ok(())
}

/// Where the closed parts listed end: the newest's number.
fn closed_numbers_end(listed: &[Listed]) -> Option<u64> {
    listed.last().map(|l| l.number)
}

fn open_listed(l: &Listed) -> profkit_eventlog::Result<SessionReader> {
    SessionReader::open(&l.path)
}

/// A file's end, monotonic ns: its footer's end or its last chunk's time,
/// whichever is later (its start when it has neither).
pub(crate) fn reader_end(r: &SessionReader) -> u64 {
    r.footer().map_or(0, |f| f.end_monotonic_ns).max(
        r.chunks()
            .last()
            .map_or(r.header().start_monotonic_ns, |c| c.time),
    )
}

fn rate(frequency: Option<u64>, period: Option<u64>) -> String {
    match (frequency, period) {
        (Some(f), _) => format!("{f} Hz"),
        (None, Some(p)) => format!("period {p}"),
        (None, None) => "unknown rate".to_owned(),
    }
}
