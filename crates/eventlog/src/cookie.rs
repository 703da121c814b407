//! Cookie derivation: which [`Cookie`] and [`CookieEntry`] a binary gets.
//!
//! Part of the format's contract, like [`cookie_hash`]: every writer of
//! sessions (the sync stage on live rings, the perf.data import) derives
//! the same cookie for the same binary through these functions, so
//! sessions merge and compare. The tags fed to [`cookie_hash`]:
//!
//! | code | cookie | entry |
//! |---|---|---|
//! | user file with a GNU build-id | `build-id`, id | [`file_entry`] |
//! | another file claiming that build-id | `build-id-file`, id, dev, inode, size, mtime | [`claimed_file_entry`] |
//! | a file claiming it that could not be identified | `build-id-unverified`, id | [`claimed_file_entry`] |
//! | user file without one | `inode`, dev, inode, generation | [`file_entry`] |
//! | the kernel image | `kernel-build-id`, id; else `kernel`, `_text` | [`kernel_entry`] |
//! | a module | `module-build-id`, id; else `module`, name, base | [`module_entry`] |
//! | anonymous code of a process | `anon`, pid | [`anon_entry`] |
//! | the vDSO | `vdso` | [`vdso_entry`] |
//! | a process's JIT code described by a jitdump file | `jit`, pid, dev, inode, generation | [`jit_entry`] |
//! | a frame in no binary | reserved [`COOKIE_UNKNOWN`] | [`unknown_entry`] |
//!
//! ## A build-id is a claim
//!
//! Any user can link a file with any build-id (`-Wl,--build-id=0x…`), so
//! a build-id says which file a binary claims to be, not which it is. The
//! sync stage identifies the file behind each mapping (device, inode,
//! size, mtime, through the mapping itself) and gives the plain
//! `build-id` cookie to the first file *identified* with that build-id in
//! the session; any other file claiming it gets its own `build-id-file`
//! cookie (same build-id, its own identity), and a claim whose file could
//! not be identified gets `build-id-unverified`. Each entry records its
//! file ([`FileCheck`]), and a report names a cookie only with that file.
//! The usual case, one file per build-id, keeps the plain cookie, so the
//! same libc on two hosts still has one cookie in merges and diffs; a
//! session where a forger's file was identified first has the genuine
//! file under a `build-id-file` cookie instead (it is still named right,
//! but does not pair with other sessions' plain cookie).
//!
//! Which mapping paths are anonymous code is decided once, by
//! [`is_anonymous_code`]; module names are spelled as kallsyms spells them
//! by [`module_name`].

use crate::event::{
    cookie_hash, Cookie, CookieEntry, CookieKind, FileCheck, FileIdentity, COOKIE_UNKNOWN,
};

/// Cookie of a file with a GNU build-id.
pub fn build_id_cookie(build_id: &[u8]) -> Cookie {
    cookie_hash("build-id", &[build_id])
}

/// Cookie of a file claiming build-id `build_id` that is not the file
/// holding [`build_id_cookie`] in the session: by the claim and the file's
/// identity, or (`None`) an unidentified claim.
pub fn claim_cookie(build_id: &[u8], file: Option<&FileIdentity>) -> Cookie {
    match file {
        Some(i) => cookie_hash(
            "build-id-file",
            &[
                build_id,
                &i.dev.to_le_bytes(),
                &i.inode.to_le_bytes(),
                &i.size.to_le_bytes(),
                &i.mtime_ns.to_le_bytes(),
            ],
        ),
        None => cookie_hash("build-id-unverified", &[build_id]),
    }
}

/// Cookie of a file without a build-id: its (device, inode, generation).
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

/// Cookie of process `pid`'s JIT code described by the jitdump file
/// (`dev`, `inode`), JIT generation `generation` (the writer starts a new
/// generation when the runtime reuses addresses).
pub fn jit_cookie(pid: u32, dev: u64, inode: u64, generation: u64) -> Cookie {
    cookie_hash(
        "jit",
        &[
            &pid.to_le_bytes(),
            &dev.to_le_bytes(),
            &inode.to_le_bytes(),
            &generation.to_le_bytes(),
        ],
    )
}

/// Cookie of the vDSO (one for every process: it is the same code).
pub fn vdso_cookie() -> Cookie {
    cookie_hash("vdso", &[])
}

/// Cookie of the kernel image: by build-id when known, else by the address
/// of `_text` (which changes with every boot under KASLR).
pub fn kernel_cookie(text_start: u64, build_id: Option<&[u8]>) -> Cookie {
    match build_id {
        Some(b) => cookie_hash("kernel-build-id", &[b]),
        None => cookie_hash("kernel", &[&text_start.to_le_bytes()]),
    }
}

/// Cookie of a kernel module: by build-id when known, else by its
/// kallsyms name and load address.
pub fn module_cookie(name: &str, base: u64, build_id: Option<&[u8]>) -> Cookie {
    match build_id {
        Some(b) => cookie_hash("module-build-id", &[b]),
        None => cookie_hash("module", &[name.as_bytes(), &base.to_le_bytes()]),
    }
}

fn entry(cookie: Cookie, kind: CookieKind, path: String) -> CookieEntry {
    CookieEntry {
        cookie,
        kind,
        path,
        build_id: None,
        dev: 0,
        inode: 0,
        generation: 0,
        base: 0,
        pid: None,
        file: FileCheck::NotRecorded,
    }
}

/// The entry of a user-space file: its cookie by build-id when it has a
/// non-empty one, else by (device, inode, generation); the identity not
/// used for the cookie is kept in the entry too. A path of `[vdso]` makes a
/// [`CookieKind::Vdso`] entry (the vDSO seen with a build-id).
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
    let kind = if path == "[vdso]" {
        CookieKind::Vdso
    } else {
        CookieKind::User
    };
    CookieEntry {
        build_id,
        dev,
        inode,
        generation,
        ..entry(cookie, kind, path.to_string())
    }
}

/// The entry of a user-space file with a non-empty build-id whose file
/// was identified (`file` Some) or could not be (`None`): `holder` true
/// when it is the session's first identified file with that build-id (the
/// plain [`build_id_cookie`]), else its [`claim_cookie`]. The identity's
/// device and inode fill the entry's `dev` and `inode` too.
pub fn claimed_file_entry(
    path: &str,
    build_id: Vec<u8>,
    file: Option<FileIdentity>,
    holder: bool,
    generation: u64,
) -> CookieEntry {
    let (dev, inode) = file.map_or((0, 0), |i| (i.dev, i.inode));
    let mut e = file_entry(path, Some(build_id), dev, inode, generation);
    if !(holder && file.is_some()) {
        e.cookie = claim_cookie(e.build_id.as_deref().unwrap_or_default(), file.as_ref());
    }
    e.file = match file {
        Some(i) => FileCheck::File(i),
        None => FileCheck::Unverified,
    };
    e
}

/// The entry of the kernel image, whose offsets are relative to
/// `text_start` (the address of `_text`).
pub fn kernel_entry(text_start: u64, build_id: Option<Vec<u8>>) -> CookieEntry {
    CookieEntry {
        base: text_start,
        ..entry(
            kernel_cookie(text_start, build_id.as_deref()),
            CookieKind::Kernel,
            "[kernel.kallsyms]".into(),
        )
    }
    .with_build_id(build_id)
}

/// The entry of a kernel module `name` (kallsyms' spelling, see
/// [`module_name`]) loaded at `base`; its path is `[name]`.
pub fn module_entry(name: &str, base: u64, build_id: Option<Vec<u8>>) -> CookieEntry {
    CookieEntry {
        base,
        ..entry(
            module_cookie(name, base, build_id.as_deref()),
            CookieKind::Module,
            format!("[{name}]"),
        )
    }
    .with_build_id(build_id)
}

/// The entry of process `pid`'s anonymous executable memory (path
/// `//anon`; offsets are absolute addresses, named through
/// `/tmp/perf-PID.map`).
pub fn anon_entry(pid: u32) -> CookieEntry {
    CookieEntry {
        pid: Some(pid),
        ..entry(anon_cookie(pid), CookieKind::Anon, "//anon".into())
    }
}

/// The entry of process `pid`'s JIT code described by the jitdump file at
/// `path` (as the process mapped it, `/tmp/jit-1234.dump`; device `dev`,
/// inode `inode`), JIT generation `generation`: kind
/// [`CookieKind::Jit`], `base` the generation (the entry's own
/// `generation` is 0), offsets absolute addresses named by the session's
/// `JitCode` markers.
pub fn jit_entry(pid: u32, path: &str, dev: u64, inode: u64, generation: u64) -> CookieEntry {
    CookieEntry {
        pid: Some(pid),
        dev,
        inode,
        base: generation,
        ..entry(
            jit_cookie(pid, dev, inode, generation),
            CookieKind::Jit,
            path.into(),
        )
    }
}

/// The entry of the vDSO.
pub fn vdso_entry() -> CookieEntry {
    entry(vdso_cookie(), CookieKind::Vdso, "[vdso]".into())
}

/// The entry of the reserved [`COOKIE_UNKNOWN`]: call-stack frames that
/// resolved to no binary (path `[unknown]`, kind [`CookieKind::Other`]).
pub fn unknown_entry() -> CookieEntry {
    entry(COOKIE_UNKNOWN, CookieKind::Other, "[unknown]".into())
}

impl CookieEntry {
    fn with_build_id(mut self, build_id: Option<Vec<u8>>) -> Self {
        self.build_id = build_id;
        self
    }
}

/// True when an executable mapping of `path` (as `/proc/PID/maps` or an
/// `MMAP2` record names it) is anonymous code: code with no file a
/// symbolizer could open, owned by its process and named only through the
/// process's `/tmp/perf-PID.map` (JITs write it), by absolute address.
///
/// This follows perf, which names such code through `perf-PID.map`: perf's
/// anonymous memory (`//anon`, `/dev/zero…`, `/anon_hugepage…`) and its
/// "no DSO" memory (`[heap]`, `[stack…`, `/SYSV…`), plus:
///
/// - an empty path and named anonymous mappings (`[anon:NAME]`,
///   `[anon_shmem:NAME]`);
/// - `/memfd:…`: a memfd has no file on disk (its `/proc` path does not
///   open), and the JITs that map code from one (V8, .NET's double
///   mapping) name it in `perf-PID.map` by address;
/// - `/tmp/perf-…`: perf's own spelling of anonymous memory after its
///   renaming, which is the very file that names it;
/// - other kernel pseudo-mappings in brackets (`[vsyscall]`, `[uprobes]`):
///   no file either.
///
/// `[vdso]` is not anonymous: it has its own cookie and is read from the
/// session's copy or the running kernel.
pub fn is_anonymous_code(path: &str) -> bool {
    if path == "[vdso]" {
        return false;
    }
    path.is_empty()
        || path == "//anon"
        || path.starts_with('[')
        || path.starts_with("/dev/zero")
        || path.starts_with("/anon_hugepage")
        || path.starts_with("/SYSV")
        || path.starts_with("/memfd:")
        || path.starts_with("/tmp/perf-")
}

/// A kernel module's name as kallsyms spells it, from the path perf or
/// `/proc` gives: `ext4` from `/lib/modules/…/ext4.ko.xz` or `[ext4]`, with
/// `-` as `_` (`[snd-seq-device]` → `snd_seq_device`). The one module-name
/// rule: cookies (the sync stage) and kallsyms lookups (`profkit-symbols`)
/// both use it.
pub fn module_name(path: &str) -> String {
    let base = path.rsplit('/').next().unwrap_or(path);
    let base = base.trim_start_matches('[').trim_end_matches(']');
    let base = [".ko.xz", ".ko.zst", ".ko.gz", ".ko"]
        .iter()
        .find_map(|suffix| base.strip_suffix(suffix))
        .unwrap_or(base);
    base.replace('-', "_")
}

/// The GNU build-id in a sequence of ELF notes (as `/sys/kernel/notes` or
/// `/sys/module/NAME/notes/.note.gnu.build-id` holds them), or `None` when
/// there is none or the notes are malformed.
pub fn build_id_from_notes(mut b: &[u8]) -> Option<Vec<u8>> {
    let rd = |b: &[u8], o: usize| -> Option<u32> {
        Some(u32::from_ne_bytes(b.get(o..o + 4)?.try_into().ok()?))
    };
    let align4 = |n: usize| n.checked_add(3).map(|n| n & !3);
    while b.len() >= 12 {
        let namesz = rd(b, 0)? as usize;
        let descsz = rd(b, 4)? as usize;
        let ty = rd(b, 8)?;
        let name_end = 12usize.checked_add(align4(namesz)?)?;
        let desc_end = name_end.checked_add(align4(descsz)?)?;
        let name = b.get(12..12usize.checked_add(namesz)?)?;
        let desc = b.get(name_end..name_end.checked_add(descsz)?)?;
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
    use crate::COOKIE_NONE;

    #[test]
    fn module_names_are_normalised() {
        assert_eq!(module_name("[nf-conntrack]"), "nf_conntrack");
        assert_eq!(
            module_name("/lib/modules/6.1/kernel/net/nf-conntrack.ko.zst"),
            "nf_conntrack"
        );
        assert_eq!(module_name("/lib/modules/6.1/ext4.ko.xz"), "ext4");
        assert_eq!(module_name("ext4"), "ext4");
    }

    #[test]
    fn build_id_note_is_found_after_other_notes() {
        let mut notes = Vec::new();
        let mut push = |name: &[u8], kind: u32, desc: &[u8]| {
            notes.extend_from_slice(&(name.len() as u32).to_ne_bytes());
            notes.extend_from_slice(&(desc.len() as u32).to_ne_bytes());
            notes.extend_from_slice(&kind.to_ne_bytes());
            notes.extend_from_slice(name);
            notes.resize(notes.len().next_multiple_of(4), 0);
            notes.extend_from_slice(desc);
            notes.resize(notes.len().next_multiple_of(4), 0);
        };
        push(b"Xen\0", 6, b"\x01\x02\x03");
        push(b"GNU\0", 3, &[0xab, 0xcd, 0xef, 0x01, 0x23]);
        assert_eq!(
            build_id_from_notes(&notes),
            Some(vec![0xab, 0xcd, 0xef, 0x01, 0x23])
        );
        assert_eq!(build_id_from_notes(&notes[..20]), None);
        // A size that runs past the end is malformed, not a panic.
        let mut bad = notes.clone();
        bad[0..4].copy_from_slice(&u32::MAX.to_ne_bytes());
        assert_eq!(build_id_from_notes(&bad), None);
    }

    #[test]
    fn cookies_are_stable_distinct_and_nonzero() {
        assert_eq!(build_id_cookie(&[1, 2, 3]), build_id_cookie(&[1, 2, 3]));
        assert_ne!(build_id_cookie(&[1, 2, 3]), build_id_cookie(&[1, 2, 4]));
        assert_ne!(inode_cookie(1, 2, 0), inode_cookie(2, 1, 0));
        assert_ne!(anon_cookie(5), anon_cookie(6));
        assert_ne!(vdso_cookie(), COOKIE_NONE);
        assert_ne!(kernel_cookie(1, None), kernel_cookie(2, None));
        assert_eq!(kernel_cookie(1, Some(&[7])), kernel_cookie(2, Some(&[7])));
        assert_ne!(kernel_cookie(1, Some(&[7])), build_id_cookie(&[7]));
        assert_ne!(module_cookie("a", 1, None), module_cookie("a", 2, None));
    }

    /// A JIT cookie is its process's dump file and generation: a new
    /// generation (addresses reused) is a new cookie.
    #[test]
    fn jit_cookies_and_entries() {
        let c = jit_cookie(1234, 0x803, 99, 0);
        assert_eq!(
            c,
            cookie_hash(
                "jit",
                &[
                    &1234u32.to_le_bytes(),
                    &0x803u64.to_le_bytes(),
                    &99u64.to_le_bytes(),
                    &0u64.to_le_bytes()
                ]
            )
        );
        assert_ne!(c, jit_cookie(1234, 0x803, 99, 1));
        assert_ne!(c, jit_cookie(1235, 0x803, 99, 0));
        assert_ne!(c, jit_cookie(1234, 0x803, 98, 0));
        assert_ne!(c, anon_cookie(1234));
        let e = jit_entry(1234, "/tmp/jit-1234.dump", 0x803, 99, 1);
        assert_eq!(
            e,
            CookieEntry {
                cookie: jit_cookie(1234, 0x803, 99, 1),
                kind: CookieKind::Jit,
                path: "/tmp/jit-1234.dump".into(),
                build_id: None,
                dev: 0x803,
                inode: 99,
                generation: 0,
                base: 1,
                pid: Some(1234),
                file: FileCheck::NotRecorded,
            }
        );
        // Kind 6 on disk, and back.
        let mut body = Vec::new();
        crate::markers::push_cookie_entry(&mut body, &e);
        assert_eq!(body[8], 6);
        let back = crate::markers::read_cookie_entry(&mut crate::codec::BodyReader::new(
            &body,
            0,
            "CookieDef",
        ))
        .unwrap();
        assert_eq!(back, e);
        body[8] = 7;
        let err = crate::markers::read_cookie_entry(&mut crate::codec::BodyReader::new(
            &body,
            0,
            "CookieDef",
        ))
        .unwrap_err();
        assert!(err
            .to_string()
            .contains("unknown cookie kind 7 (this build knows 0..=6)"));
    }

    /// The values sessions on disk already carry: changing a tag or the
    /// order of parts would split a binary in two across sessions.
    #[test]
    fn cookie_values_are_the_formats() {
        assert_eq!(
            file_entry("/bin/x", Some(vec![1, 2]), 3, 4, 5).cookie,
            cookie_hash("build-id", &[&[1, 2]])
        );
        let by_inode = file_entry("/bin/x", Some(vec![]), 3, 4, 5);
        assert_eq!(
            by_inode.cookie,
            cookie_hash(
                "inode",
                &[
                    &3u64.to_le_bytes(),
                    &4u64.to_le_bytes(),
                    &5u64.to_le_bytes()
                ]
            )
        );
        assert_eq!((by_inode.dev, by_inode.inode), (3, 4));
        assert_eq!(file_entry("[vdso]", None, 0, 0, 0).kind, CookieKind::Vdso);
        let k = kernel_entry(0xffff_8000, None);
        assert_eq!(
            k.cookie,
            cookie_hash("kernel", &[&0xffff_8000u64.to_le_bytes()])
        );
        assert_eq!(
            (k.base, k.path.as_str()),
            (0xffff_8000, "[kernel.kallsyms]")
        );
        let m = module_entry("ext4", 0xc000, Some(vec![9]));
        assert_eq!(m.cookie, cookie_hash("module-build-id", &[&[9]]));
        assert_eq!((m.base, m.path.as_str()), (0xc000, "[ext4]"));
        let a = anon_entry(42);
        assert_eq!(a.cookie, cookie_hash("anon", &[&42u32.to_le_bytes()]));
        assert_eq!((a.pid, a.kind), (Some(42), CookieKind::Anon));
        assert_eq!(vdso_entry().cookie, cookie_hash("vdso", &[]));
        assert_eq!(unknown_entry().cookie, COOKIE_UNKNOWN);
    }

    fn ident(inode: u64) -> FileIdentity {
        FileIdentity {
            dev: 0x803,
            inode,
            size: 4096,
            mtime_ns: 1_700_000_000_000_000_001,
        }
    }

    /// Two files claiming one build-id are two cookies: the first
    /// identified keeps the plain one, any other gets its own, an
    /// unidentified claim another still.
    #[test]
    fn a_build_id_is_a_claim_not_an_identity() {
        let b = vec![0xab, 0xcd];
        let first = claimed_file_entry("/usr/bin/md5sum", b.clone(), Some(ident(7)), true, 0);
        assert_eq!(first.cookie, build_id_cookie(&b));
        assert_eq!(first.file, FileCheck::File(ident(7)));
        assert_eq!((first.dev, first.inode), (0x803, 7));
        let other = claimed_file_entry("/tmp/x", b.clone(), Some(ident(8)), false, 0);
        assert_ne!(other.cookie, first.cookie);
        assert_eq!(other.build_id.as_deref(), Some(&b[..]));
        let mut touched = ident(7);
        touched.mtime_ns += 1;
        let changed = claimed_file_entry("/usr/bin/md5sum", b.clone(), Some(touched), false, 0);
        assert_ne!(changed.cookie, first.cookie);
        assert_ne!(changed.cookie, other.cookie);
        let unverified = claimed_file_entry("/tmp/y", b.clone(), None, true, 0);
        assert_eq!(unverified.file, FileCheck::Unverified);
        assert_eq!(
            unverified.cookie,
            cookie_hash("build-id-unverified", &[&b]),
            "no identity never holds the plain cookie"
        );
        let i = ident(8);
        assert_eq!(
            other.cookie,
            cookie_hash(
                "build-id-file",
                &[
                    &b,
                    &i.dev.to_le_bytes(),
                    &i.inode.to_le_bytes(),
                    &i.size.to_le_bytes(),
                    &i.mtime_ns.to_le_bytes()
                ]
            )
        );
    }

    /// An entry written before the file check (no appended field) reads
    /// as `NotRecorded`, and such an entry is still written with exactly
    /// those bytes; the new field round-trips.
    #[test]
    fn cookie_entries_before_the_file_check_still_read() {
        use crate::codec::BodyReader;
        use crate::markers::{push_cookie_entry, read_cookie_entry};
        // The version-1..4 body of file_entry("/bin/x", Some([1, 2]), 3, 4, 5).
        let mut old = Vec::new();
        old.extend_from_slice(&cookie_hash("build-id", &[&[1, 2]]).to_le_bytes());
        old.extend_from_slice(&[0, 6]);
        old.extend_from_slice(b"/bin/x");
        old.extend_from_slice(&[1, 2, 1, 2, 3, 4, 5, 0, 0]);
        let e = read_cookie_entry(&mut BodyReader::new(&old, 0, "CookieDef")).unwrap();
        assert_eq!(e, file_entry("/bin/x", Some(vec![1, 2]), 3, 4, 5));
        assert_eq!(e.file, FileCheck::NotRecorded);
        let mut again = Vec::new();
        push_cookie_entry(&mut again, &e);
        assert_eq!(again, old, "an entry without a check keeps its bytes");
        let mut neg = ident(9);
        neg.mtime_ns = -5;
        for f in [
            FileCheck::File(ident(9)),
            FileCheck::File(neg),
            FileCheck::Unverified,
        ] {
            let e = CookieEntry {
                file: f,
                ..e.clone()
            };
            let mut b = Vec::new();
            push_cookie_entry(&mut b, &e);
            let back = read_cookie_entry(&mut BodyReader::new(&b, 0, "CookieDef")).unwrap();
            assert_eq!(back, e);
        }
        // A newer writer's kind of check cannot be verified: unverified.
        let mut newer = old.clone();
        newer.extend_from_slice(&[7, 1, 2, 3]);
        let e = read_cookie_entry(&mut BodyReader::new(&newer, 0, "CookieDef")).unwrap();
        assert_eq!(e.file, FileCheck::Unverified);
    }

    #[test]
    fn anonymous_code_paths() {
        for p in [
            "",
            "//anon",
            "[anon:v8]",
            "[heap]",
            "[stack]",
            "[vsyscall]",
            "/dev/zero (deleted)",
            "/anon_hugepage",
            "/SYSV00000000 (deleted)",
            "/memfd:doublemapper (deleted)",
            "/tmp/perf-4242.map",
        ] {
            assert!(is_anonymous_code(p), "{p}");
        }
        for p in ["[vdso]", "/usr/bin/python3", "/tmp/x.so", "/memfdx"] {
            assert!(!is_anonymous_code(p), "{p}");
        }
    }

    #[test]
    fn module_names_are_kallsyms_names() {
        assert_eq!(
            module_name("/lib/modules/6.1/kernel/fs/ext4/ext4.ko.xz"),
            "ext4"
        );
        assert_eq!(module_name("[snd-seq-device]"), "snd_seq_device");
        assert_eq!(module_name("e1000"), "e1000");
    }

    #[test]
    fn build_id_notes() {
        let mut n = Vec::new();
        // A note of another type first, then the GNU build-id.
        n.extend_from_slice(&4u32.to_ne_bytes());
        n.extend_from_slice(&2u32.to_ne_bytes());
        n.extend_from_slice(&1u32.to_ne_bytes());
        n.extend_from_slice(b"Xen\0");
        n.extend_from_slice(&[1, 2, 0, 0]);
        n.extend_from_slice(&4u32.to_ne_bytes());
        n.extend_from_slice(&4u32.to_ne_bytes());
        n.extend_from_slice(&3u32.to_ne_bytes());
        n.extend_from_slice(b"GNU\0");
        n.extend_from_slice(&[9, 8, 7, 6]);
        assert_eq!(build_id_from_notes(&n), Some(vec![9, 8, 7, 6]));
        assert_eq!(build_id_from_notes(&n[..30]), None);
        let mut huge = n.clone();
        huge[0..4].copy_from_slice(&u32::MAX.to_ne_bytes());
        assert_eq!(build_id_from_notes(&huge), None);
    }
}
