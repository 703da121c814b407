//! Opening sessions: a session directory (or file), what the caller knows
//! of its recorder ([`Liveness`]), the symbol sources it carries (kallsyms
//! copy, perf maps, an archive's `debug/` tree), and whether several can be
//! merged into one report ([`check_merge`]).

use std::path::{Path, PathBuf};

use profkit_eventlog::SessionReader;

use crate::error::{Error, Result};
use crate::model::CallGraphMode;

/// The file name of the session log inside a session directory.
pub const SESSION_FILE: &str = "session.pkl";
/// The kallsyms copy a session directory may hold (used instead of the
/// live `/proc/kallsyms` when present).
pub const KALLSYMS_FILE: &str = "kallsyms";
/// Where `profctl archive` puts the sampled binaries and debug files, by
/// build-id (`debug/.build-id/ab/cdef…`); searched automatically.
pub const ARCHIVE_DEBUG_DIR: &str = "debug";
/// Binaries of other mount namespaces the recorder could not keep (kept
/// in step with `profkit_live::NOT_KEPT_FILE`).
pub const NOT_KEPT_FILE: &str = "debug/not-kept";

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

/// One opened session: its directory (for the kallsyms copy and perf maps)
/// and its checked file.
#[derive(Debug)]
pub struct Session {
    dir: PathBuf,
    reader: SessionReader,
    liveness: Liveness,
}

/// The most CPUs a session header is believed about (Linux's largest
/// `NR_CPUS`); a header claiming more gets columns only for the CPUs its
/// chunks have samples or losses of (a forged million cost 3.9 GB).
pub const MAX_CLAIMED_CPUS: usize = 8192;

impl Session {
    /// Opens the session in `dir` (`dir/session.pkl`); `dir` may also name
    /// the session file itself.
    ///
    /// # Errors
    /// [`Error::NoSession`] when there is no session file; [`Error::Session`]
    /// when it cannot be read or is not a session of a version this build
    /// reads (the message names both versions).
    pub fn open(dir: impl AsRef<Path>) -> Result<Session> {
        let given = dir.as_ref();
        let (dir, file) = if given.is_file() {
            let parent = given
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            (parent.to_path_buf(), given.to_path_buf())
        } else {
            (given.to_path_buf(), given.join(SESSION_FILE))
        };
        if !file.exists() {
            return Err(Error::NoSession {
                dir: given.to_path_buf(),
                file,
            });
        }
        let reader = SessionReader::open(&file)?;
        Ok(Session {
            dir,
            reader,
            liveness: Liveness::Unknown,
        })
    }

    /// A session already read (tests, or bytes from elsewhere); `dir` is
    /// where its kallsyms copy and perf maps would be.
    pub fn from_reader(reader: SessionReader, dir: impl Into<PathBuf>) -> Session {
        Session {
            dir: dir.into(),
            reader,
            liveness: Liveness::Unknown,
        }
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

    /// The session's reader.
    pub fn reader(&self) -> &SessionReader {
        &self.reader
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

fn rate(frequency: Option<u64>, period: Option<u64>) -> String {
    match (frequency, period) {
        (Some(f), _) => format!("{f} Hz"),
        (None, Some(p)) => format!("period {p}"),
        (None, None) => "unknown rate".to_owned(),
    }
}
