//! The scratch directory of `profreport --import`.

use std::io;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// A scratch directory for an imported perf.data, removed on drop.
pub(super) struct Scratch(pub(super) PathBuf);

impl Scratch {
    /// A private (0700) scratch directory; those left by a crashed
    /// `profreport` of ours (its pid gone) are removed first.
    pub(super) fn new() -> Result<Scratch> {
        use std::os::unix::fs::DirBuilderExt;
        let base = std::env::temp_dir();
        Self::sweep(&base);
        for i in 0..1000u32 {
            let p = base.join(format!("profreport-import-{}-{i}", std::process::id()));
            match std::fs::DirBuilder::new().mode(0o700).create(&p) {
                Ok(()) => return Ok(Scratch(p)),
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    return Err(e).with_context(|| format!("creating {}", p.display()));
                }
            }
        }
        anyhow::bail!("no free scratch directory in {}", base.display())
    }

    /// Removes `profreport-import-PID-N` directories of ours whose
    /// process is gone.
    fn sweep(base: &Path) {
        use std::os::unix::fs::MetadataExt;
        let me = rustix::process::geteuid().as_raw();
        let Ok(rd) = std::fs::read_dir(base) else {
            return;
        };
        for e in rd.flatten() {
            let name = e.file_name();
            let Some(pid) = name
                .to_str()
                .and_then(|n| n.strip_prefix("profreport-import-"))
                .and_then(|r| r.split('-').next())
                .and_then(|p| p.parse::<u32>().ok())
            else {
                continue;
            };
            let ours =
                std::fs::symlink_metadata(e.path()).is_ok_and(|m| m.is_dir() && m.uid() == me);
            if ours && !Path::new(&format!("/proc/{pid}")).exists() {
                let _ = std::fs::remove_dir_all(e.path());
            }
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
