//! `profctl archive`'s debug files: the system's by build-id, else the
//! debuginfod cache's, else (a stripped binary's, unless offline) fetched
//! from the debuginfod servers, all at once in parallel.

use std::path::{Path, PathBuf};

use profkit_debuginfod::{Client, Fetched, Kind};
use profkit_live::{DebugDir, DebugFiles};

/// The debug files `profctl archive` packs.
pub(crate) struct ArchiveDebugFiles {
    /// The system's debug directory (`/usr/lib/debug`).
    pub(crate) dir: PathBuf,
    /// The debuginfod client (its cache; its servers unless offline).
    pub(crate) client: Client,
}

impl DebugFiles for ArchiveDebugFiles {
    fn find(&self, binaries: &[(Vec<u8>, PathBuf)]) -> Vec<Option<PathBuf>> {
        let mut out = DebugDir(&self.dir).find(binaries);
        let mut wanted = Vec::new();
        let mut slots = Vec::new();
        for (i, (id, path)) in binaries.iter().enumerate() {
            if out[i].is_some() {
                continue;
            }
            if let Some(p) = self.client.cached(id, &Kind::Debuginfo) {
                out[i] = Some(p);
            } else if !has_symtab(path) {
                wanted.push((id.clone(), Kind::Debuginfo));
                slots.push(i);
            }
        }
        if wanted.is_empty() || !self.client.config().network() {
            return out;
        }
        let got = self.client.fetch_many(&wanted, &|_| {});
        for (i, r) in slots.into_iter().zip(got) {
            match r {
                Ok(Fetched::Found { path, .. }) => out[i] = Some(path),
                Ok(Fetched::NotFound) => {}
                Err(e) => eprintln!("profkit: debuginfod: {e}"),
            }
        }
        out
    }
}

/// Whether the binary at `path` names its own functions (a `.symtab`); a
/// missing or unreadable one does not.
fn has_symtab(path: &Path) -> bool {
    let policy = profkit_untrusted::Policy::regular().max_bytes(4 << 30);
    let Ok(o) = profkit_untrusted::open_untrusted(path, &policy) else {
        return false;
    };
    let data = object::ReadCache::new(o.file);
    profkit_elf::Sections::parse(&data).is_ok_and(|s| s.by_name(".symtab").is_some())
}
