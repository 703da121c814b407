//! Cookies: stable 64-bit ids for binaries (OProfile's dcookies).
//!
//! How a binary's cookie is derived is the format's
//! ([`profkit_eventlog::cookie`], re-exported here): from its GNU build-id
//! when the kernel, the file or perf.data gives one, else from (device,
//! inode, generation); kernel, module, vDSO and anonymous-memory cookies
//! hash a fixed tag with their name (and pid). This module keeps what is
//! the sync stage's own: reading a file's build-id, and the table that
//! remembers which cookies were already defined in the session so each
//! `CookieDef` is written once.

use profkit_eventlog::{Cookie, CookieEntry};
use std::collections::HashMap;
use std::path::Path;

pub use profkit_eventlog::cookie::{anon_cookie, build_id_cookie, inode_cookie, vdso_cookie};
pub use profkit_eventlog::{build_id_from_notes, cookie_hash, file_entry, unknown_entry};

/// The set of cookies defined so far in a session.
#[derive(Debug, Default, Clone)]
pub struct CookieTable {
    defs: HashMap<Cookie, CookieEntry>,
}

impl CookieTable {
    /// Records `entry`; returns true if the cookie was new (so the caller
    /// writes a `CookieDef`).
    pub fn define(&mut self, entry: CookieEntry) -> bool {
        if self.defs.contains_key(&entry.cookie) {
            return false;
        }
        self.defs.insert(entry.cookie, entry);
        true
    }

    /// True if `cookie` is defined.
    pub fn contains(&self, cookie: Cookie) -> bool {
        self.defs.contains_key(&cookie)
    }

    /// Every definition (for re-emission after `reset`).
    pub fn entries(&self) -> impl Iterator<Item = &CookieEntry> {
        self.defs.values()
    }

    /// Number of cookies.
    pub fn len(&self) -> usize {
        self.defs.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.defs.is_empty()
    }
}

/// Reads the GNU build-id of an ELF file, reading only the headers and
/// notes; the path is opened without following symlinks or blocking, and
/// must be a regular file ([`crate::binfile::open_mapped`]).
pub fn read_build_id(path: &Path) -> Option<Vec<u8>> {
    crate::binfile::read_build_id_at(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_id_of_own_executable_is_found() {
        // Rust test binaries are linked with a build-id by the system linker.
        let exe = std::env::current_exe().unwrap();
        let id = read_build_id(&exe);
        if let Some(id) = &id {
            assert!(id.len() >= 8);
        }
    }
}
