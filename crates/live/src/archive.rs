//! Archives: a session plus every binary and debug file it samples, keyed
//! by build-id, in one tar, so a report elsewhere symbolizes the same.

use crate::error::{Error, Result};
use crate::extras::is_extra;
use profkit_daemon::{daemon_state, DaemonState, SESSION_LOG};
use profkit_eventlog::{CookieEntry, CookieKind, Event, SessionReader};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where the system keeps separate debug files by build-id.
pub const SYSTEM_DEBUG_DIR: &str = "/usr/lib/debug/.build-id";

/// What [`archive`] packed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Archived {
    /// Binaries packed.
    pub binaries: usize,
    /// Bytes of file data packed.
    pub bytes: u64,
    /// Binaries left out, each with why (`PATH (reason)`).
    pub skipped: Vec<String>,
}

/// Writes the session (log, kallsyms copy, perf maps) and the binaries and
/// debug files it refers to into the tar `output`: `debug/.build-id/ab/cdef…`
/// for each binary whose build-id still matches the recorded one,
/// `….debug` for its separate debug file from `debug_dir` (normally
/// [`SYSTEM_DEBUG_DIR`]). `profreport` uses `DIR/debug` as a debug
/// directory when it exists. Refuses while a daemon records.
pub fn archive(session_dir: &Path, output: &Path, debug_dir: &Path) -> Result<Archived> {
    if let DaemonState::Running { .. } = daemon_state(session_dir)? {
        return Err(Error::StillRecording {
            dir: session_dir.into(),
        });
    }
    let session = session_dir.join(SESSION_LOG);
    let r = SessionReader::open(&session)?;
    let mut entries: BTreeMap<String, CookieEntry> = Default::default();
    for c in r.chunks() {
        let _ = r.for_each_sample(
            c,
            |_| {},
            |m| {
                if let Event::CookieDef(e) = m {
                    if matches!(e.kind, CookieKind::User) {
                        entries.insert(e.path.clone(), e);
                    }
                }
            },
        );
    }
    let file = {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(output)
            .map_err(|e| Error::io("creating", output, e))?
    };
    let mut tar = Tar {
        builder: tar::Builder::new(std::io::BufWriter::new(file)),
        output: output.into(),
    };
    tar.builder.mode(tar::HeaderMode::Deterministic);
    let mut done = Archived {
        bytes: tar.add(&session, SESSION_LOG)?,
        ..Default::default()
    };
    if let Ok(rd) = std::fs::read_dir(session_dir) {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if is_extra(&name) {
                done.bytes += tar.add(&e.path(), &name)?;
            }
        }
    }
    for (path, e) in &entries {
        let Some(id) = e.build_id.as_deref().filter(|b| b.len() > 1) else {
            done.skipped.push(format!("{path} (no build-id recorded)"));
            continue;
        };
        let h = hex(id);
        let p = Path::new(path);
        match profkit_sync::read_build_id(p) {
            Some(now) if now == id => {
                done.bytes += tar.add(p, &format!("debug/.build-id/{}/{}", &h[..2], &h[2..]))?;
                done.binaries += 1;
            }
            Some(_) => done
                .skipped
                .push(format!("{path} (changed since recording)")),
            None => done.skipped.push(format!("{path} (missing or unreadable)")),
        }
        let dbg = debug_dir.join(&h[..2]).join(format!("{}.debug", &h[2..]));
        if dbg.exists() {
            done.bytes += tar.add(
                &dbg,
                &format!("debug/.build-id/{}/{}.debug", &h[..2], &h[2..]),
            )?;
        }
    }
    tar.builder
        .into_inner()
        .and_then(|mut w| std::io::Write::flush(&mut w))
        .map_err(|e| Error::io("writing", output, e))?;
    Ok(done)
}

struct Tar {
    builder: tar::Builder<std::io::BufWriter<std::fs::File>>,
    output: PathBuf,
}

impl Tar {
    /// Adds the file `from` as `name` (mode 0600); returns its size.
    fn add(&mut self, from: &Path, name: &str) -> Result<u64> {
        let data = std::fs::read(from).map_err(|e| Error::io("reading", from, e))?;
        let mut h = tar::Header::new_gnu();
        h.set_size(data.len() as u64);
        h.set_mode(0o600);
        h.set_cksum();
        self.builder
            .append_data(&mut h, name, &data[..])
            .map_err(|e| Error::io("writing", &self.output, e))?;
        Ok(data.len() as u64)
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
