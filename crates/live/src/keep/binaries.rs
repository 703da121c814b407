//! Copying binaries other mount namespaces hide into the session
//! (`debug/.kept/COOKIE`), and the list of those that could not be kept.

use super::*;

/// Why a directory of the session, a kept binary's copy or the list of
/// binaries not kept could not be written. These end up as lines of the
/// stop summary (`PATH: why`), so the text carries its cause.
#[derive(Debug, thiserror::Error)]
pub(crate) enum KeepError {
    /// Something not a directory (a link, a file) is where one should be.
    #[error("{} is not a directory", path.display())]
    NotADirectory { path: PathBuf },
    /// What is where a directory should be could not be looked at.
    #[error("{}: {source}", path.display())]
    Stat {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A directory or a copy's file could not be created.
    #[error("creating {}: {source}", path.display())]
    Create {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Copying into it failed.
    #[error("copying: {0}")]
    Copy(#[source] std::io::Error),
    /// The disk budget refused it (and named it there); its words.
    #[error("{0}")]
    OverBudget(String),
    /// Writing the file failed; `write_new`'s words.
    #[error("{0}")]
    Write(String),
}

/// Writes [`NOT_KEPT_FILE`] in session directory `dir` (nothing when no
/// binary was refused): the first [`NOT_KEPT_LINES`] `PATH: why` lines,
/// charged to the budget as root's.
pub(crate) fn write_not_kept(
    dir: &Path,
    refused: &[String],
    budget: &DiskBudget,
) -> Result<(), KeepError> {
    if refused.is_empty() {
        return Ok(());
    }
    make_dir(&dir.join("debug"))?;
    let mut text = String::new();
    for r in refused.iter().take(NOT_KEPT_LINES) {
        text.push_str(&r.replace('\n', " "));
        text.push('\n');
    }
    let to = dir.join(NOT_KEPT_FILE);
    let cost = on_disk(text.len() as u64);
    budget
        .charge_or_refuse(0, cost, &to.display().to_string())
        .map_err(KeepError::OverBudget)?;
    write_new(&to, text.as_bytes(), text.len() as u64)
        .map(|_| ())
        .map_err(KeepError::Write)
        .inspect_err(|_| budget.release(0, cost))
}

/// Copies a binary into `DIR/debug/.kept/COOKIE` with its holes (and
/// all-zero blocks) left holes, charged to `budget` as its owner's by its
/// data (its blocks on disk) before it is written; `left`: what is left of
/// [`BINARIES_KEPT_MAX_BYTES`]. Returns its bytes on disk, `Ok(0)` when one
/// is there already; `Err((why, true))` when the budget refused it (named
/// there).
pub(super) fn keep_binary(
    dir: &Path,
    b: KeptBinary,
    left: &mut u64,
    budget: &DiskBudget,
) -> Result<u64, NotKept> {
    use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
    let what = |why: String| {
        (
            format!(
                "{}: kept from another mount namespace failed: {why}",
                b.path
            ),
            false,
        )
    };
    let m = b.file.metadata().map_err(|e| what(e.to_string()))?;
    if !m.file_type().is_file() {
        return Err(what("not a regular file".into()));
    }
    let len = m.len();
    if len > BINARY_KEEP_MAX_BYTES {
        return Err(what(format!(
            "{len} bytes, over the {BINARY_KEEP_MAX_BYTES}-byte limit per binary"
        )));
    }
    // What its copy will take: its data, as its blocks on disk say.
    let cost = on_disk((m.blocks() * 512).min(len));
    if cost > *left {
        return Err(what(format!(
            "{cost} bytes on disk, over what is left of the {BINARIES_KEPT_MAX_BYTES}-byte limit per session"
        )));
    }
    let layout = profkit_eventlog::SessionLayout::new(dir);
    for d in [layout.debug_dir(), layout.kept_dir()] {
        make_dir(&d).map_err(|e| what(e.to_string()))?;
    }
    let to = layout.kept_copy(b.cookie);
    if std::fs::symlink_metadata(&to).is_ok_and(|m| m.file_type().is_file()) {
        return Ok(0);
    }
    budget
        .charge_or_refuse(m.uid(), cost, &b.path)
        .map_err(|why| {
            (
                format!(
                    "{}: kept from another mount namespace failed: {why}",
                    b.path
                ),
                true,
            )
        })?;
    let copied = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&to)
        .map_err(|source| KeepError::Create {
            path: to.clone(),
            source,
        })
        .and_then(|dst| {
            crate::sparse::copy_sparse(&b.file, &dst, len, cost)
                .and_then(|_| dst.sync_all())
                .map_err(KeepError::Copy)?;
            Ok(dst.metadata().map_or(cost, |m| m.blocks() * 512))
        });
    match copied {
        Ok(on) => {
            // Charged by the source's blocks; the copy's may be fewer.
            let on = on.min(cost);
            budget.release(m.uid(), cost - on);
            *left -= on;
            // Kept (0 would say it was there already), if all holes.
            Ok(on.max(1))
        }
        Err(why) => {
            let _ = std::fs::remove_file(&to);
            budget.release(m.uid(), cost);
            Err(what(why.to_string()))
        }
    }
}

/// Creates `d` (0700) unless it is there; it must be a directory, not a
/// link (the session directory is its owner's alone, `SessionDir::open`).
pub(super) fn make_dir(d: &Path) -> Result<(), KeepError> {
    use std::os::unix::fs::DirBuilderExt;
    let path = || d.to_path_buf();
    match std::fs::DirBuilder::new().mode(0o700).create(d) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(source) => {
            return Err(KeepError::Create {
                path: path(),
                source,
            })
        }
    }
    match std::fs::symlink_metadata(d) {
        Ok(m) if m.file_type().is_dir() => Ok(()),
        Ok(_) => Err(KeepError::NotADirectory { path: path() }),
        Err(source) => Err(KeepError::Stat {
            path: path(),
            source,
        }),
    }
}
