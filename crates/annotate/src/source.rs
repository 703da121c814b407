//! The source half: a function's samples per source line.
//!
//! Input is one entry per instruction of the function: its source line
//! (the line of the address itself, inside the innermost inlined function,
//! as DWARF says) and the samples on it. Lines are grouped per file; the
//! function's own file (the one most of its instructions come from outside
//! inlined code) comes first. Each file shows the lines its instructions
//! come from with short gaps filled in (so a loop reads as a loop), longer
//! gaps elided. Source text is read from `--source-dir` directories (the
//! recorded path under the directory, then its shorter tails:
//! `DIR/src/x.c`, `DIR/x.c`), else from the recorded path, as regular files
//! of at most [`MAX_SOURCE_BYTES`].
//!
//! The recorded path is whatever the binary's DWARF says, and any local
//! user can build a binary that says `#line 1 "/etc/shadow"`; root runs the
//! report. So a file at its recorded path is shown only if the binary's
//! owner could have read it ([`SourceReader`]): the path is walked one
//! component at a time from the descriptor of the directory before, each
//! directory checked for search permission and the file for reading (links
//! followed by hand), so what is checked is what is opened. Under a `--source-dir` the reader named, files are
//! shown as found.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::{Error, Result};

/// Largest source file read.
pub const MAX_SOURCE_BYTES: u64 = 16 << 20;
/// Gaps between lines with code up to this many lines are shown whole.
pub const FILLED_GAP: u32 = 8;

/// Where an instruction's code comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LineInfo {
    /// The source file as recorded in DWARF.
    pub file: String,
    /// The line (DWARF line 0, "no line", is given as None by callers).
    pub line: u32,
    /// The inlined function the instruction belongs to, when it is inlined
    /// code (innermost).
    pub inlined: Option<String>,
}

/// One line of a listing.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SourceLine {
    /// Line number, from 1.
    pub line: u32,
    /// The text, when the file was found and has the line.
    pub text: Option<String>,
    /// Samples on instructions of this line, per column (one per CPU
    /// with `--separate=cpu`, else one).
    pub samples: Vec<u64>,
    /// Whether instructions of this line were generated for it.
    pub has_code: bool,
    /// Inlined function(s) this line's code belongs to (empty: the
    /// function's own code).
    pub inlined: Vec<String>,
    /// Lines were left out before this one (a long gap without code).
    pub gap_before: bool,
}

/// The lines of one source file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SourceFile {
    /// The file as recorded in DWARF.
    pub file: String,
    /// Where its text was read, if it was found.
    pub found: Option<PathBuf>,
    /// Why its text is missing, if it is.
    pub missing: Option<String>,
    /// Samples of all its lines, per column.
    pub samples: Vec<u64>,
    /// The lines, ascending.
    pub lines: Vec<SourceLine>,
}

/// A function's samples per source line.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct SourceListing {
    /// Files, the function's own first.
    pub files: Vec<SourceFile>,
    /// Samples on instructions DWARF gives no line for, per column.
    pub without_line: Vec<u64>,
}

/// Whose permissions a source file found at its recorded path (not under a
/// `--source-dir`) is read with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceReader {
    /// The owner of the binary whose DWARF names the file: its user and
    /// group ids (the group is the binary file's). Root's binaries may
    /// name any file.
    Owner {
        /// User id.
        uid: u32,
        /// Group id.
        gid: u32,
    },
    /// Nobody in particular (the binary's owner is not known, e.g. a copy
    /// the recorder kept in the session): only files every user may read.
    Anyone,
}

impl SourceReader {
    /// Whether this reader may use a file of `uid`, `gid` and `mode` for
    /// `bits` (4 read, 1 search).
    fn may(self, uid: u32, gid: u32, mode: u32, bits: u32) -> bool {
        match self {
            SourceReader::Owner { uid: 0, .. } => true,
            SourceReader::Owner { uid: u, .. } if uid == u => mode & (bits << 6) != 0,
            SourceReader::Owner { gid: g, .. } if gid == g => mode & (bits << 3) != 0,
            _ => mode & bits != 0,
        }
    }

    fn who(self) -> String {
        match self {
            SourceReader::Owner { uid, .. } => format!("the binary's owner (uid {uid})"),
            SourceReader::Anyone => {
                "every user (the binary's owner is not known: a copy kept in the session)"
                    .to_owned()
            }
        }
    }

    /// Opens `path` as this reader could, walking it one component at a
    /// time from a descriptor of the directory before (so a link swapped
    /// meanwhile cannot lead the check one way and the open another): each
    /// directory on the way must be searchable by the reader, links are
    /// read and followed by hand (at most 40), and the file itself is
    /// opened without following a link, non-blocking, and must be a
    /// regular file the reader may read. A refusal is a `PermissionDenied`
    /// holding [`Error::SourceNotShown`] (see [`not_shown`]).
    fn open(self, path: &Path) -> std::io::Result<std::fs::File> {
        use rustix::fs::{fstat, openat, readlinkat, FileType, Mode, OFlags, CWD};
        use std::collections::VecDeque;
        use std::ffi::OsString;
        use std::os::unix::ffi::OsStrExt;
        // Carried through `io::Error` to `find_source`, which takes it out again.
        let refuse = |what: &Path| {
            std::io::Error::new(
                std::io::ErrorKind::PermissionDenied,
                Error::SourceNotShown {
                    path: path.to_path_buf(),
                    blocked: what.to_path_buf(),
                    reader: self.who(),
                },
            )
        };
        let walk = OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let searchable = |st: &rustix::fs::Stat| self.may(st.st_uid, st.st_gid, st.st_mode, 1);
        let parts = |p: &Path| -> Vec<OsString> {
            p.components()
                .filter_map(|c| match c {
                    std::path::Component::RootDir | std::path::Component::Prefix(_) => None,
                    c => Some(c.as_os_str().to_owned()),
                })
                .collect()
        };
        let start = if path.is_absolute() { "/" } else { "." };
        let first = openat(CWD, start, walk | OFlags::DIRECTORY, Mode::empty())?;
        if !searchable(&fstat(&first)?) {
            return Err(refuse(Path::new(start)));
        }
        // The directories walked, with the path that reached each.
        let mut dirs = vec![(first, PathBuf::from(start))];
        let mut todo: VecDeque<OsString> = parts(path).into();
        let mut links = 0;
        while let Some(name) = todo.pop_front() {
            let (dir, at) = dirs.last().expect("the start stays");
            match name.as_bytes() {
                b"." => continue,
                b".." => {
                    if dirs.len() > 1 {
                        dirs.pop();
                    }
                    continue;
                }
                _ => {}
            }
            let here = at.join(&name);
            let fd = openat(dir, name.as_os_str(), walk, Mode::empty())?;
            let st = fstat(&fd)?;
            match FileType::from_raw_mode(st.st_mode) {
                FileType::Symlink => {
                    links += 1;
                    if links > 40 {
                        return Err(std::io::Error::from_raw_os_error(libc_eloop()));
                    }
                    let target = PathBuf::from(std::ffi::OsStr::from_bytes(
                        readlinkat(&fd, "", Vec::new())?.as_bytes(),
                    ));
                    if target.is_absolute() {
                        dirs.truncate(1);
                        let root = openat(CWD, "/", walk | OFlags::DIRECTORY, Mode::empty())?;
                        if !searchable(&fstat(&root)?) {
                            return Err(refuse(Path::new("/")));
                        }
                        dirs[0] = (root, PathBuf::from("/"));
                    }
                    for p in parts(&target).into_iter().rev() {
                        todo.push_front(p);
                    }
                }
                FileType::Directory if !todo.is_empty() => {
                    if !searchable(&st) {
                        return Err(refuse(&here));
                    }
                    dirs.push((fd, here));
                }
                FileType::RegularFile if todo.is_empty() => {
                    if !self.may(st.st_uid, st.st_gid, st.st_mode, 4) {
                        return Err(refuse(&here));
                    }
                    // The file itself, from the same directory, no link
                    // followed, and the very file checked.
                    let f = openat(
                        dir,
                        name.as_os_str(),
                        OFlags::RDONLY
                            | OFlags::NOFOLLOW
                            | OFlags::NONBLOCK
                            | OFlags::NOCTTY
                            | OFlags::CLOEXEC,
                        Mode::empty(),
                    )?;
                    let again = fstat(&f)?;
                    if (again.st_dev, again.st_ino) != (st.st_dev, st.st_ino) {
                        return Err(refuse(&here));
                    }
                    return Ok(std::fs::File::from(f));
                }
                _ if todo.is_empty() => {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::InvalidInput,
                        "not a regular file",
                    ))
                }
                _ => return Err(std::io::Error::from_raw_os_error(libc_enotdir())),
            }
        }
        Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file",
        ))
    }
}

fn libc_eloop() -> i32 {
    rustix::io::Errno::LOOP.raw_os_error()
}

fn libc_enotdir() -> i32 {
    rustix::io::Errno::NOTDIR.raw_os_error()
}

/// Builds the listing of one function from its instructions' lines and
/// samples (per column; every entry has `columns` of them), reading source
/// text through `dirs`, and at recorded paths with `reader`'s permissions,
/// as the module docs say.
pub fn source_listing(
    insns: &[(Option<LineInfo>, Vec<u64>)],
    columns: usize,
    dirs: &[PathBuf],
    reader: SourceReader,
) -> SourceListing {
    source_listing_fetching(insns, columns, dirs, reader, &|_| None)
}

/// [`source_listing`], with `fetch` asked for each file found nowhere
/// locally: a path it returns (a debuginfod client's cached copy of the
/// file, fetched by the binary's build-id) is read as a file the reader
/// named (regular, at most [`MAX_SOURCE_BYTES`]).
pub fn source_listing_fetching(
    insns: &[(Option<LineInfo>, Vec<u64>)],
    columns: usize,
    dirs: &[PathBuf],
    reader: SourceReader,
    fetch: &dyn Fn(&str) -> Option<PathBuf>,
) -> SourceListing {
    struct Acc {
        samples: Vec<u64>,
        inlined: Vec<String>,
    }
    let add = |to: &mut Vec<u64>, n: &[u64]| {
        for (t, v) in to.iter_mut().zip(n) {
            *t += v;
        }
    };
    let mut per_file: HashMap<&str, BTreeMap<u32, Acc>> = HashMap::new();
    let mut own: HashMap<&str, usize> = HashMap::new();
    let mut without_line = vec![0; columns];
    for (info, n) in insns {
        let Some(i) = info else {
            add(&mut without_line, n);
            continue;
        };
        let acc = per_file
            .entry(i.file.as_str())
            .or_default()
            .entry(i.line)
            .or_insert_with(|| Acc {
                samples: vec![0; columns],
                inlined: Vec::new(),
            });
        add(&mut acc.samples, n);
        match &i.inlined {
            Some(f) if !acc.inlined.contains(f) => acc.inlined.push(f.clone()),
            Some(_) => {}
            None => *own.entry(i.file.as_str()).or_default() += 1,
        }
    }
    let mut files: Vec<SourceFile> = per_file
        .into_iter()
        .map(|(file, lines)| {
            let (found, text) = match find_source(file, dirs, reader) {
                Ok((p, t)) => (Some(p), Ok(t)),
                Err(why @ Error::SourceNotFound { .. }) => match fetch(file) {
                    Some(p) => match read_text(&p, None) {
                        Ok(t) => (Some(p), Ok(t)),
                        Err(source) => (
                            None,
                            Err(Error::SourceUnreadable { path: p, source }.to_string()),
                        ),
                    },
                    None => (None, Err(why.to_string())),
                },
                Err(why) => (None, Err(why.to_string())),
            };
            let text_lines: Vec<&str> = match &text {
                Ok(t) => t.lines().collect(),
                Err(_) => Vec::new(),
            };
            let mut samples = vec![0; columns];
            for a in lines.values() {
                add(&mut samples, &a.samples);
            }
            let mut out = Vec::new();
            let mut prev: Option<u32> = None;
            for (&line, acc) in &lines {
                let mut gap_before = false;
                if let Some(p) = prev {
                    if line - p - 1 <= FILLED_GAP {
                        for l in p + 1..line {
                            out.push(SourceLine {
                                line: l,
                                text: text_of(&text_lines, l),
                                samples: vec![0; columns],
                                has_code: false,
                                inlined: Vec::new(),
                                gap_before: false,
                            });
                        }
                    } else {
                        gap_before = true;
                    }
                }
                out.push(SourceLine {
                    line,
                    text: text_of(&text_lines, line),
                    samples: acc.samples.clone(),
                    has_code: true,
                    inlined: acc.inlined.clone(),
                    gap_before,
                });
                prev = Some(line);
            }
            SourceFile {
                file: file.to_owned(),
                found,
                missing: text.err(),
                samples,
                lines: out,
            }
        })
        .collect();
    files.sort_by(|a, b| {
        let own_a = own.get(a.file.as_str()).copied().unwrap_or(0);
        let own_b = own.get(b.file.as_str()).copied().unwrap_or(0);
        let total = |f: &SourceFile| f.samples.iter().sum::<u64>();
        own_b
            .cmp(&own_a)
            .then(total(b).cmp(&total(a)))
            .then_with(|| a.file.cmp(&b.file))
    });
    SourceListing {
        files,
        without_line,
    }
}

fn text_of(lines: &[&str], line: u32) -> Option<String> {
    let i = usize::try_from(line).ok()?.checked_sub(1)?;
    lines.get(i).map(|s| s.replace('\t', "    "))
}

/// Where the text of `file` (as recorded) is found: under each of `dirs`
/// the recorded path and its shorter tails (the user said where the
/// sources are: that wins over an older copy at the recorded path), then
/// the recorded path, if `reader` may read it. Returns the path and the
/// text, or why none was read: the first error other than "not found"
/// ([`Error::SourceNotShown`], [`Error::SourceUnreadable`]), else
/// [`Error::SourceNotFound`].
pub fn find_source(
    file: &str,
    dirs: &[PathBuf],
    reader: SourceReader,
) -> Result<(PathBuf, String)> {
    let recorded = Path::new(file);
    let mut tried = Vec::new();
    let parts: Vec<_> = recorded
        .components()
        .filter(|c| matches!(c, std::path::Component::Normal(_)))
        .collect();
    for d in dirs {
        for skip in 0..parts.len() {
            let mut p = d.clone();
            p.extend(&parts[skip..]);
            tried.push(p);
        }
    }
    let under_dirs = tried.len();
    tried.push(recorded.to_path_buf());
    let mut first_error = None;
    for (i, p) in tried.iter().enumerate() {
        let checked = (i >= under_dirs).then_some(reader);
        match read_text(p, checked) {
            Ok(t) => return Ok((p.clone(), t)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) if first_error.is_none() => {
                first_error = Some(match not_shown(e) {
                    Ok(refusal) => refusal,
                    Err(source) => Error::SourceUnreadable {
                        path: p.clone(),
                        source,
                    },
                });
            }
            Err(_) => {}
        }
    }
    Err(first_error.unwrap_or_else(|| Error::SourceNotFound {
        file: file.to_owned(),
        under_source_dirs: !dirs.is_empty(),
    }))
}

/// The refusal of the owner check ([`SourceReader::open`]) that `e` carries, else `e`.
fn not_shown(e: std::io::Error) -> Result<Error, std::io::Error> {
    if e.kind() != std::io::ErrorKind::PermissionDenied || e.raw_os_error().is_some() {
        return Err(e);
    }
    if !e.get_ref().is_some_and(|inner| inner.is::<Error>()) {
        return Err(e);
    }
    let inner = e.into_inner().expect("checked above");
    Ok(*inner.downcast::<Error>().expect("checked above"))
}

/// Reads a source file: a regular file (opened non-blocking, so a FIFO
/// does not hang), at most [`MAX_SOURCE_BYTES`], invalid UTF-8 replaced;
/// with `reader`, only one it may read (else `PermissionDenied`, the
/// error's text saying why).
fn read_text(p: &Path, reader: Option<SourceReader>) -> std::io::Result<String> {
    use std::io::Read;
    let (f, m) = match reader {
        // Root's binary may name anything: the ordinary checked open.
        None | Some(SourceReader::Owner { uid: 0, .. }) => {
            let o = profkit_untrusted::open_untrusted(p, &profkit_untrusted::Policy::regular())?;
            (o.file, o.meta)
        }
        Some(r) => {
            let f = r.open(p)?;
            let m = f.metadata()?;
            (f, m)
        }
    };
    if m.len() > MAX_SOURCE_BYTES {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "{} bytes, over the {MAX_SOURCE_BYTES}-byte limit for source files",
                m.len()
            ),
        ));
    }
    let mut data = Vec::with_capacity(m.len() as usize);
    f.take(MAX_SOURCE_BYTES).read_to_end(&mut data)?;
    Ok(String::from_utf8_lossy(&data).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROOT: SourceReader = SourceReader::Owner { uid: 0, gid: 0 };

    fn at(file: &str, line: u32, inlined: Option<&str>) -> Option<LineInfo> {
        Some(LineInfo {
            file: file.into(),
            line,
            inlined: inlined.map(str::to_owned),
        })
    }

    #[test]
    fn samples_add_up_per_line_with_short_gaps_filled_and_long_ones_elided() {
        let d = tempfile::tempdir().unwrap();
        let src = d.path().join("loop.c");
        let text: String = (1..=40).map(|i| format!("line {i}\n")).collect();
        std::fs::write(&src, text).unwrap();
        let f = src.to_str().unwrap();
        let l = source_listing(
            &[
                (at(f, 3, None), vec![5, 0]),
                (at(f, 3, None), vec![0, 1]),
                (at(f, 6, None), vec![2, 0]),
                (at(f, 30, Some("helper")), vec![1, 3]),
                (None, vec![7, 0]),
            ],
            2,
            &[],
            ROOT,
        );
        assert_eq!(l.without_line, [7, 0]);
        assert_eq!(l.files.len(), 1);
        let file = &l.files[0];
        assert_eq!(file.found.as_deref(), Some(src.as_path()));
        assert_eq!(file.samples, [8, 4]);
        let lines: Vec<_> = file
            .lines
            .iter()
            .map(|s| (s.line, s.samples.clone(), s.has_code, s.gap_before))
            .collect();
        assert_eq!(
            lines,
            [
                (3, vec![5, 1], true, false),
                (4, vec![0, 0], false, false),
                (5, vec![0, 0], false, false),
                (6, vec![2, 0], true, false),
                (30, vec![1, 3], true, true),
            ]
        );
        assert_eq!(file.lines[0].text.as_deref(), Some("line 3"));
        assert_eq!(file.lines[4].inlined, ["helper"]);
    }

    #[test]
    fn the_functions_own_file_comes_first_and_missing_files_say_so() {
        let l = source_listing(
            &[
                (at("/nowhere/own.c", 10, None), vec![1]),
                (at("/nowhere/own.c", 11, None), vec![0]),
                (at("/nowhere/inl.h", 2, Some("inl")), vec![50]),
            ],
            1,
            &[],
            ROOT,
        );
        let files: Vec<_> = l.files.iter().map(|f| f.file.as_str()).collect();
        assert_eq!(files, ["/nowhere/own.c", "/nowhere/inl.h"]);
        let why = l.files[0].missing.as_deref().unwrap();
        assert!(why.contains("--source-dir"), "{why}");
        assert!(matches!(
            find_source("/nowhere/own.c", &[], ROOT),
            Err(Error::SourceNotFound {
                under_source_dirs: false,
                ..
            })
        ));
        assert_eq!(l.files[0].lines[0].text, None);
    }

    /// A file found nowhere locally is asked of `fetch` (a debuginfod
    /// server's copy); what it returns is read, bounded, and a FIFO it
    /// returns is refused.
    #[test]
    fn a_file_missing_locally_is_fetched() {
        let d = tempfile::tempdir().unwrap();
        let got = d.path().join("source##nowhere##own.c");
        std::fs::write(&got, "a\nb\nc\n").unwrap();
        let rows = [(at("/nowhere/own.c", 2, None), vec![7])];
        let asked = std::cell::RefCell::new(Vec::new());
        let l = source_listing_fetching(&rows, 1, &[], ROOT, &|f| {
            asked.borrow_mut().push(f.to_owned());
            Some(got.clone())
        });
        assert_eq!(*asked.borrow(), ["/nowhere/own.c"]);
        assert_eq!(l.files[0].found.as_deref(), Some(got.as_path()));
        assert_eq!(l.files[0].lines[0].text.as_deref(), Some("b"));
        assert_eq!(l.files[0].missing, None);
        // Nothing fetched: the local complaint stays.
        let l = source_listing_fetching(&rows, 1, &[], ROOT, &|_| None);
        assert!(l.files[0].missing.as_deref().unwrap().contains("not found"));
        // A file found locally is not asked for.
        let local = d.path().join("here.c");
        std::fs::write(&local, "x\ny\n").unwrap();
        let rows = [(at(local.to_str().unwrap(), 1, None), vec![1])];
        let l = source_listing_fetching(&rows, 1, &[], ROOT, &|_| panic!("asked"));
        assert_eq!(l.files[0].lines[0].text.as_deref(), Some("x"));
        // A FIFO returned is refused, not waited on.
        let fifo = d.path().join("fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.is_ok_and(|s| s.success()), "mkfifo");
        let rows = [(at("/nowhere/other.c", 1, None), vec![1])];
        let l = source_listing_fetching(&rows, 1, &[], ROOT, &|_| Some(fifo.clone()));
        let why = l.files[0].missing.as_deref().unwrap();
        assert!(why.contains("not a regular file"), "{why}");
    }

    #[test]
    fn source_dirs_find_the_recorded_path_or_its_tails() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("proj/src")).unwrap();
        std::fs::write(d.path().join("proj/src/x.c"), "int x;\n").unwrap();
        let dirs = [d.path().join("proj")];
        let (p, t) = find_source("/build/tree/src/x.c", &dirs, ROOT).unwrap();
        assert_eq!(p, d.path().join("proj/src/x.c"));
        assert_eq!(t, "int x;\n");
        // A FIFO is refused, not opened for reading and waited on.
        let fifo = d.path().join("proj/src/f.c");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        assert!(made.is_ok_and(|s| s.success()), "mkfifo");
        let e = find_source("/b/src/f.c", &dirs, ROOT)
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a regular file"), "{e}");
    }

    /// Issue 25 (4): a user's function compiled with `#line 1
    /// "/etc/shadow"` made root's `profreport --annotate` print the file.
    #[test]
    fn a_recorded_path_is_read_only_if_the_binarys_owner_could_read_it() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let set = |p: &Path, mode: u32| {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap()
        };
        set(d.path(), 0o755);
        let secret = d.path().join("shadow");
        std::fs::write(&secret, "root:$6$hash\n").unwrap();
        set(&secret, 0o600);
        let me = std::fs::metadata(&secret).unwrap();
        let (uid, gid) = {
            use std::os::unix::fs::MetadataExt;
            (me.uid(), me.gid())
        };
        let user = SourceReader::Owner {
            uid: uid.wrapping_add(4242),
            gid: gid.wrapping_add(4242),
        };
        let file = secret.to_str().unwrap();
        let e = find_source(file, &[], user).unwrap_err();
        assert!(
            matches!(&e, Error::SourceNotShown { blocked, .. } if blocked.ends_with("shadow")),
            "{e:?}"
        );
        let e = e.to_string();
        assert!(e.contains("not shown") && e.contains("--source-dir"), "{e}");
        assert!(!e.contains("$6$"), "{e}");
        // Its owner, root, and a reader who names the directory may.
        let owner = SourceReader::Owner {
            uid,
            gid: gid.wrapping_add(1),
        };
        assert!(find_source(file, &[], owner).is_ok());
        assert!(find_source(file, &[], ROOT).is_ok());
        let (p, _) = find_source("/elsewhere/shadow", &[d.path().to_path_buf()], user).unwrap();
        assert_eq!(p, secret);
        // The group's read bit for the binary's group.
        set(&secret, 0o640);
        let group = SourceReader::Owner {
            uid: uid.wrapping_add(1),
            gid,
        };
        assert!(find_source(file, &[], group).is_ok());
        assert!(find_source(file, &[], user).is_err());
        // World-readable, but in a directory others cannot search.
        let inner = d.path().join("private");
        std::fs::create_dir(&inner).unwrap();
        let hidden = inner.join("notes.c");
        std::fs::write(&hidden, "int x;\n").unwrap();
        set(&hidden, 0o644);
        set(&inner, 0o700);
        let e = find_source(hidden.to_str().unwrap(), &[], user)
            .unwrap_err()
            .to_string();
        assert!(e.contains("private is not readable"), "{e}");
        assert!(find_source(hidden.to_str().unwrap(), &[], SourceReader::Anyone).is_err());
        set(&inner, 0o755);
        assert!(find_source(hidden.to_str().unwrap(), &[], SourceReader::Anyone).is_ok());
        // Through links and `..` (the review's case: a path whose
        // canonical form could not be computed was let through): the walk
        // follows links by hand and checks the directories really crossed.
        set(&inner, 0o700);
        let public = d.path().join("pub/sub");
        std::fs::create_dir_all(&public).unwrap();
        std::fs::write(public.join("ok.c"), "int ok;\n").unwrap();
        std::os::unix::fs::symlink(&public, d.path().join("pub/link")).unwrap();
        std::os::unix::fs::symlink("sub/ok.c", d.path().join("pub/rel.c")).unwrap();
        let via = d.path().join("pub/link/../../private/notes.c");
        let e = find_source(via.to_str().unwrap(), &[], user)
            .unwrap_err()
            .to_string();
        assert!(e.contains("private is not readable"), "{e}");
        let ok = d.path().join("pub/link/ok.c");
        assert_eq!(
            find_source(ok.to_str().unwrap(), &[], user).unwrap().1,
            "int ok;\n"
        );
        let rel = d.path().join("pub/rel.c");
        assert_eq!(
            find_source(rel.to_str().unwrap(), &[], user).unwrap().1,
            "int ok;\n"
        );
        // A link loop ends.
        std::os::unix::fs::symlink("loop", d.path().join("pub/loop")).unwrap();
        let lp = d.path().join("pub/loop");
        assert!(find_source(lp.to_str().unwrap(), &[], user).is_err());
    }
}
