//! Cookies: stable 64-bit ids for binaries (OProfile's dcookies).
//!
//! A cookie comes from the binary's GNU build-id when the kernel or the file
//! gives one, else from (device, inode, generation); kernel, module, vDSO and
//! anonymous-memory cookies hash a fixed tag with their name (and pid).
//! The table remembers which cookies were already defined in the session so
//! each `CookieDef` is written once.

use profkit_eventlog::{Cookie, CookieEntry, CookieKind, COOKIE_UNKNOWN};
use std::collections::HashMap;
use std::path::Path;

pub use profkit_eventlog::cookie_hash;

/// Cookie of a file with a build-id.
pub fn build_id_cookie(build_id: &[u8]) -> Cookie {
    cookie_hash("build-id", &[build_id])
}

/// Cookie of a file without a build-id.
pub fn inode_cookie(dev: u64, inode: u64, generation: u64) -> Cookie {
    cookie_hash(
        "inode",
        &[
            &dev.to_le_bytes(),
            &inode.to_le_bytes(),
            &generation.to_le_bytes(),
        ],
    )
}

/// Cookie of a process's anonymous executable memory.
pub fn anon_cookie(pid: u32) -> Cookie {
    cookie_hash("anon", &[&pid.to_le_bytes()])
}

/// Cookie of the vDSO.
pub fn vdso_cookie() -> Cookie {
    cookie_hash("vdso", &[])
}

/// The entry of the reserved [`COOKIE_UNKNOWN`]: call-stack frames that
/// resolved to no binary.
pub fn unknown_entry() -> CookieEntry {
    CookieEntry {
        cookie: COOKIE_UNKNOWN,
        kind: CookieKind::Other,
        path: "[unknown]".into(),
        build_id: None,
        dev: 0,
        inode: 0,
        generation: 0,
        base: 0,
        pid: None,
    }
}

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

/// An entry for a user-space file.
pub fn file_entry(
    path: &str,
    build_id: Option<Vec<u8>>,
    dev: u64,
    inode: u64,
    generation: u64,
) -> CookieEntry {
    let cookie = match &build_id {
        Some(b) if !b.is_empty() => build_id_cookie(b),
        _ => inode_cookie(dev, inode, generation),
    };
    CookieEntry {
        cookie,
        kind: if path == "[vdso]" {
            CookieKind::Vdso
        } else {
            CookieKind::User
        },
        path: path.to_string(),
        build_id,
        dev,
        inode,
        generation,
        base: 0,
        pid: None,
    }
}

/// Reads the GNU build-id of an ELF file, reading only the headers and notes.
pub fn read_build_id(path: &Path) -> Option<Vec<u8>> {
    use object::read::ReadCache;
    use object::Object;
    let f = std::fs::File::open(path).ok()?;
    let cache = ReadCache::new(f);
    let obj = object::File::parse(&cache).ok()?;
    obj.build_id().ok().flatten().map(|b| b.to_vec())
}

/// Parses ELF notes (as in `/sys/kernel/notes`) and returns the GNU build-id.
pub fn build_id_from_notes(mut b: &[u8]) -> Option<Vec<u8>> {
    let rd = |b: &[u8], o: usize| -> Option<u32> {
        Some(u32::from_ne_bytes(b.get(o..o + 4)?.try_into().ok()?))
    };
    let align4 = |n: usize| (n + 3) & !3;
    while b.len() >= 12 {
        let namesz = rd(b, 0)? as usize;
        let descsz = rd(b, 4)? as usize;
        let ty = rd(b, 8)?;
        let name_end = 12usize.checked_add(align4(namesz))?;
        let desc_end = name_end.checked_add(align4(descsz))?;
        let name = b.get(12..12 + namesz)?;
        let desc = b.get(name_end..name_end + descsz)?;
        if ty == 3 && name.starts_with(b"GNU") {
            return Some(desc.to_vec());
        }
        b = b.get(desc_end..)?;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies_are_stable_distinct_and_nonzero() {
        assert_eq!(build_id_cookie(&[1, 2, 3]), build_id_cookie(&[1, 2, 3]));
        assert_ne!(build_id_cookie(&[1, 2, 3]), build_id_cookie(&[1, 2, 4]));
        assert_ne!(inode_cookie(1, 2, 0), inode_cookie(2, 1, 0));
        assert_ne!(anon_cookie(5), anon_cookie(6));
        assert_ne!(cookie_hash("a", &[b"bc"]), cookie_hash("ab", &[b"c"]));
        assert_ne!(vdso_cookie(), profkit_eventlog::COOKIE_NONE);
    }

    #[test]
    fn build_id_of_own_executable_is_found() {
        // Rust test binaries are linked with a build-id by the system linker.
        let exe = std::env::current_exe().unwrap();
        let id = read_build_id(&exe);
        if let Some(id) = &id {
            assert!(id.len() >= 8);
        }
        // Notes parsing: a hand-made GNU build-id note.
        let mut n = Vec::new();
        n.extend_from_slice(&4u32.to_ne_bytes());
        n.extend_from_slice(&4u32.to_ne_bytes());
        n.extend_from_slice(&3u32.to_ne_bytes());
        n.extend_from_slice(b"GNU\0");
        n.extend_from_slice(&[9, 8, 7, 6]);
        assert_eq!(build_id_from_notes(&n), Some(vec![9, 8, 7, 6]));
        assert_eq!(build_id_from_notes(&n[..14]), None);
    }
}
