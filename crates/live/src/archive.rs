//! Archives: a session plus every binary and debug file it samples, keyed
//! by build-id, in one tar, so a report elsewhere symbolizes the same.

use crate::error::{Error, Result};
use crate::extras::is_extra;
use crate::keep::KEPT_DIR;
use profkit_daemon::{daemon_state, DaemonState, SessionDir, SESSION_LOG};
use profkit_eventlog::{
    build_id_path, Cookie, CookieEntry, CookieKind, Event, FileCheck, FileIdentity, SessionReader,
};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Where the system keeps separate debug files by build-id.
pub const SYSTEM_DEBUG_DIR: &str = "/usr/lib/debug";

/// What [`archive`] packed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Archived {
    /// Binaries packed.
    pub binaries: usize,
    /// Separate debug files packed with them.
    pub debug_files: usize,
    /// Bytes of file data packed.
    pub bytes: u64,
    /// Binaries left out, each with why (`PATH (reason)`).
    pub skipped: Vec<String>,
}

/// Writes the session (log, kallsyms copy, perf maps) and the binaries and
/// debug files it refers to into the tar `output`: `debug/.kept/COOKIE` for
/// each binary the recorder identified (a build-id is only a claim: the
/// copy kept of it, or its path if still that file — inode, size, mtime),
/// `debug/.build-id/ab/cdef…` for one recorded before identities were
/// (whose build-id still matches the recorded one),
/// `debug/.build-id/ab/cdef….debug` for a packed binary's separate debug file
/// under `debug_dir`/.build-id (normally [`SYSTEM_DEBUG_DIR`]). `profreport` uses `DIR/debug` as a debug
/// directory when it exists. Refuses while a daemon records.
///
/// The session directory must be one [`SessionDir::open`] accepts (owned
/// by the caller, not writable by others): its files are read under the
/// held descriptor, as regular files only, never through a symbolic link
/// (a `kallsyms -> /etc/shadow` is left out and named in
/// [`Archived::skipped`]). `output` is written as a new 0600 file beside
/// it and renamed over it: an existing file (or link) at `output` is
/// replaced, never written through.
pub fn archive(session_dir: &Path, output: &Path, debug_dir: &Path) -> Result<Archived> {
    archive_with(session_dir, output, &DebugDir(debug_dir))
}

/// Where [`archive_with`] finds the separate debug files of the binaries it
/// packs.
pub trait DebugFiles {
    /// For each binary (its build-id, and its recorded path), the debug
    /// file to pack for it, if any; one answer per binary, in order.
    /// The archive opens each as it opens binaries (a regular file, not
    /// through a link in its last component); the report that reads the
    /// archive checks each against its binary (build-id and layout).
    fn find(&self, binaries: &[(Vec<u8>, PathBuf)]) -> Vec<Option<PathBuf>>;
}

/// Debug files under one directory by build-id (`DIR/.build-id/ab/cdef….debug`).
pub struct DebugDir<'a>(pub &'a Path);

impl DebugFiles for DebugDir<'_> {
    fn find(&self, binaries: &[(Vec<u8>, PathBuf)]) -> Vec<Option<PathBuf>> {
        binaries
            .iter()
            .map(|(id, _)| Some(build_id_path(self.0, id, ".debug")).filter(|p| p.exists()))
            .collect()
    }
}

/// [`archive`], with the debug files found by `debug_files` (the CLI's
/// also come from the debuginfod cache and servers).
pub fn archive_with(
    session_dir: &Path,
    output: &Path,
    debug_files: &dyn DebugFiles,
) -> Result<Archived> {
    let sdir = SessionDir::open(session_dir)?;
    if let DaemonState::Running { .. } = daemon_state(session_dir)? {
        return Err(Error::StillRecording {
            dir: session_dir.into(),
        });
    }
    let held = sdir.held_path();
    // Every part of a rotated session, oldest first, then the last one.
    let mut parts: Vec<(PathBuf, String)> = profkit_eventlog::parts::closed_parts(&held)
        .map_err(|e| Error::io("listing", session_dir, e))?
        .into_iter()
        .map(|(n, p)| (p, profkit_eventlog::parts::part_file_name(n)))
        .collect();
    parts.push((held.join(SESSION_LOG), SESSION_LOG.to_owned()));
    let mut entries: BTreeMap<(String, Cookie), CookieEntry> = Default::default();
    for (path, name) in &parts {
        let r = SessionReader::open_shown(path, &sdir.join(name))?;
        for c in r.chunks() {
            let _ = r.for_each_sample(
                c,
                |_| {},
                |m| {
                    if let Event::CookieDef(e) = m {
                        if matches!(e.kind, CookieKind::User) {
                            entries.insert((e.path.clone(), e.cookie), e);
                        }
                    }
                },
            );
        }
    }
    // What `output` names, checked (no planted link, no other user's
    // file): a device, pipe or our stdout is streamed to as it is; a
    // regular file (absent or ours) is written beside and renamed over.
    let named =
        profkit_untrusted::open_output(output).map_err(|e| Error::io("opening", output, e))?;
    if let profkit_untrusted::OutputPath::Stream(s) = named {
        return write_tar(s, output, &sdir, &parts, &entries, debug_files);
    }
    let tmp = temp_beside(output);
    let file = {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&tmp)
            .map_err(|e| Error::io("creating", &tmp, e))?
    };
    let written = write_tar(
        profkit_untrusted::Output::File(file),
        &tmp,
        &sdir,
        &parts,
        &entries,
        debug_files,
    );
    let done = match written {
        Ok(d) => d,
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
    };
    std::fs::rename(&tmp, output).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        Error::io("replacing", output, e)
    })?;
    Ok(done)
}

/// `DIR/.NAME.PID.tmp` for `DIR/NAME`.
fn temp_beside(output: &Path) -> PathBuf {
    let name = output
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "archive".into());
    output.with_file_name(format!(".{name}.{}.tmp", std::process::id()))
}

fn write_tar(
    file: profkit_untrusted::Output,
    output: &Path,
    sdir: &SessionDir,
    parts: &[(PathBuf, String)],
    entries: &BTreeMap<(String, Cookie), CookieEntry>,
    debug_files: &dyn DebugFiles,
) -> Result<Archived> {
    let mut tar = Tar {
        builder: tar::Builder::new(std::io::BufWriter::new(file)),
        output: output.into(),
    };
    tar.builder.mode(tar::HeaderMode::Deterministic);
    let mut done = Archived::default();
    for (path, name) in parts {
        done.bytes += tar.add(path, name)?;
    }
    if let Ok(rd) = std::fs::read_dir(sdir.held_path()) {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if is_extra(&name) {
                match tar.add(&e.path(), &name) {
                    Ok(n) => done.bytes += n,
                    Err(Error::Refused { why, .. }) => done
                        .skipped
                        .push(format!("{} ({why})", sdir.join(&name).display())),
                    Err(err) => return Err(err),
                }
            }
        }
    }
    // The binaries' build-ids (not a mere claim): their debug files are
    // looked for together (the CLI's fetches run in parallel).
    let mut packed: Vec<(Vec<u8>, PathBuf)> = Vec::new();
    for ((path, _), e) in entries {
        let Some(id) = e.build_id.as_deref().filter(|b| b.len() > 1) else {
            done.skipped.push(format!("{path} (no build-id recorded)"));
            continue;
        };
        if !matches!(e.file, FileCheck::Unverified) {
            packed.push((id.to_vec(), PathBuf::from(path)));
        }
        // A build-id is a claim: an identified file is packed under its
        // cookie, from the copy kept of it or its path if still that file.
        match e.file {
            FileCheck::File(want) => {
                let name = format!(
                    "{}/{KEPT_DIR}/{}",
                    profkit_eventlog::layout::DEBUG_DIR,
                    profkit_eventlog::layout::kept_name(e.cookie)
                );
                let kept = sdir.held_path().join(&name);
                let link_free = |p: &Path| std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file());
                let (from, on_host) = if link_free(&kept) {
                    (kept, false)
                } else {
                    (PathBuf::from(path), true)
                };
                match tar.add_if(&from, &name, |m| same_file(m, &want, on_host)) {
                    Ok(n) => {
                        done.bytes += n;
                        done.binaries += 1;
                    }
                    Err(Error::Refused { why, .. }) => done.skipped.push(format!("{path} ({why})")),
                    Err(err) => return Err(err),
                }
                continue;
            }
            FileCheck::Unverified => {
                done.skipped.push(format!(
                    "{path} (its file was not identified when recorded: only the build-id it claimed is known)"
                ));
                continue;
            }
            _ => {}
        }
        let in_session = |suffix: &str| {
            build_id_path(Path::new(profkit_eventlog::layout::DEBUG_DIR), id, suffix)
                .to_string_lossy()
                .into_owned()
        };
        let name = in_session("");
        // A binary kept in the session because the host could not reach
        // it (another mount namespace): that copy, by build-id.
        let kept = sdir.held_path().join(&name);
        let kept_is = || kept_build_id(&kept).as_deref() == Some(id);
        let (p, now) = match profkit_sync::read_build_id(Path::new(path)) {
            Some(now) if now == id => (Path::new(path), Some(now)),
            _ if kept_is() => (kept.as_path(), Some(id.to_vec())),
            now => (Path::new(path), now),
        };
        match now {
            Some(now) if now == id => match tar.add(p, &name) {
                Ok(n) => {
                    done.bytes += n;
                    done.binaries += 1;
                }
                Err(Error::Refused { why, .. }) => done.skipped.push(format!("{path} ({why})")),
                Err(err) => return Err(err),
            },
            Some(_) => done
                .skipped
                .push(format!("{path} (changed since recording)")),
            None => done.skipped.push(format!("{path} (missing or unreadable)")),
        }
    }
    // One debug file per build-id.
    packed.sort_by(|a, b| a.0.cmp(&b.0));
    packed.dedup_by(|a, b| a.0 == b.0);
    let found = debug_files.find(&packed);
    for ((id, _), dbg) in packed.iter().zip(found) {
        let Some(dbg) = dbg else { continue };
        let name = build_id_path(Path::new(profkit_eventlog::layout::DEBUG_DIR), id, ".debug");
        match tar.add(&dbg, &name.to_string_lossy()) {
            Ok(n) => {
                done.bytes += n;
                done.debug_files += 1;
            }
            Err(Error::Refused { why, .. }) => {
                done.skipped.push(format!("{} ({why})", dbg.display()))
            }
            Err(err) => return Err(err),
        }
    }
    tar.builder
        .into_inner()
        .and_then(|mut w| std::io::Write::flush(&mut w))
        .map_err(|e| Error::io("writing", output, e))?;
    Ok(done)
}

/// True when a file with metadata `m` is the recorded file `want`: its
/// size, and at its recorded path (`at_path`) its inode and mtime too (a
/// kept copy has its own).
fn same_file(m: &std::fs::Metadata, want: &FileIdentity, at_path: bool) -> bool {
    use std::os::unix::fs::MetadataExt;
    let mtime = m
        .mtime()
        .saturating_mul(1_000_000_000)
        .saturating_add(m.mtime_nsec());
    m.size() == want.size && (!at_path || (m.ino() == want.inode && mtime == want.mtime_ns))
}

/// The build-id of a binary kept in the session directory (a regular file,
/// never through a link in its last component; the directory is the
/// user's own session).
fn kept_build_id(p: &Path) -> Option<Vec<u8>> {
    let o = profkit_untrusted::open_untrusted(p, &profkit_untrusted::Policy::regular().no_follow())
        .ok()?;
    profkit_sync::binfile::build_id_of(o.file)
}

struct Tar {
    builder: tar::Builder<std::io::BufWriter<profkit_untrusted::Output>>,
    output: PathBuf,
}

impl Tar {
    /// Adds the file `from` as `name` (mode 0600), streamed; returns its
    /// size. `from` must be a regular file reached without a symlink in
    /// its last component ([`Error::Refused`] otherwise).
    fn add(&mut self, from: &Path, name: &str) -> Result<u64> {
        self.add_if(from, name, |_| true)
    }

    /// [`Tar::add`], if the opened file's metadata passes `check` (else
    /// refused as "changed since recording").
    fn add_if(
        &mut self,
        from: &Path,
        name: &str,
        check: impl Fn(&std::fs::Metadata) -> bool,
    ) -> Result<u64> {
        use profkit_untrusted::{open_untrusted, Policy, Refusal};
        let refused = |why: &str| Error::Refused {
            path: from.into(),
            why: why.into(),
        };
        let (f, m) = match open_untrusted(from, &Policy::regular().no_follow()) {
            Ok(o) => (o.file, o.meta),
            Err(e) => match Refusal::of(&e) {
                Some(Refusal::Link { .. }) => return Err(refused("a symbolic link")),
                Some(Refusal::NotRegular { .. }) => return Err(refused("not a regular file")),
                _ => return Err(Error::io("reading", from, e)),
            },
        };
        if !check(&m) {
            return Err(refused("changed since recording"));
        }
        let mut h = tar::Header::new_gnu();
        h.set_size(m.len());
        h.set_mode(0o600);
        h.set_cksum();
        use std::io::Read;
        self.builder
            .append_data(&mut h, name, f.take(m.len()))
            .map_err(|e| Error::io("writing", &self.output, e))?;
        Ok(m.len())
    }
}
