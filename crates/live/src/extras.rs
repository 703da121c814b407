//! Session extras: what a later report needs that the system will not keep.

use crate::budget::{on_disk, DiskBudget, Refusal};
use crate::jitmap::{MapCopy, PERF_MAP_KEPT_MAX_LINES};
use profkit_eventlog::{module_name, Cookie, CookieEntry, CookieKind, Event, SessionReader};
use profkit_symbols::{trim_kallsyms, KallsymsInput, KallsymsWanted, TrimmedKallsyms};
use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};

/// Name of the kernel symbol table's copy in the session directory.
pub const KALLSYMS_COPY: &str = profkit_eventlog::layout::KALLSYMS_FILE;

/// Where the extras are copied from (the real system by default; tests
/// point these at fake files).
#[derive(Debug, Clone)]
pub struct ExtrasSources {
    /// The kernel's symbol table (`/proc/kallsyms`).
    pub kallsyms: PathBuf,
    /// Where JIT runtimes write `perf-PID.map` (`/tmp`).
    pub perf_map_dir: PathBuf,
    /// `/proc`, where a live process's owner is read.
    pub proc_root: PathBuf,
}

impl Default for ExtrasSources {
    fn default() -> Self {
        ExtrasSources {
            kallsyms: "/proc/kallsyms".into(),
            perf_map_dir: "/tmp".into(),
            proc_root: "/proc".into(),
        }
    }
}

/// Whether `name` is a session extra (an archive packs these).
pub fn is_extra(name: &str) -> bool {
    profkit_eventlog::SessionLayout::is_copied_file(name)
}

/// The largest JIT map read (a runaway file is refused; its holes are
/// not read, and only its map lines are copied).
pub const PERF_MAP_MAX_BYTES: u64 = 256 << 20;
/// The largest kernel symbol table copied.
pub const KALLSYMS_MAX_BYTES: u64 = 256 << 20;

/// What [`save_session_extras`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SavedExtras {
    /// Names copied into the session directory.
    pub saved: Vec<String>,
    /// Sources not copied, each with why (`/tmp/perf-42.map: a FIFO`).
    pub refused: Vec<String>,
    /// Processes with samples in anonymous code (JIT code) whose
    /// `perf-PID.map` the host's `/tmp` does not have (neither copied nor
    /// refused).
    pub perf_maps_missing: Vec<u32>,
}

/// Saves next to `session` (the session file) the lines of the kernel's
/// symbol table its kernel samples and frames need (0600, root's; the
/// whole table when the session cannot be read) and copies the JIT maps of sampled processes with anonymous
/// code. A JIT map is a file users write, read here as root: it is copied
/// only if it is a regular file (no symlink, no FIFO: opened `O_NOFOLLOW`,
/// `O_NONBLOCK`, checked on the opened file), owned by the process's user
/// (`owner_of(pid)`, perf's rule; unknown owner: refused) and at most
/// [`PERF_MAP_MAX_BYTES`]; what is copied of it are its perf map lines
/// (`jitmap`: bounded per line and per map, holes skipped unread). Every
/// copy is charged to `budget` before it is written (a map as its
/// process's user's, kallsyms as root's). A missing source is skipped
/// silently; a refused one is named in [`SavedExtras::refused`] (or, when
/// the budget refused it, in the budget's summary); a copy is all or
/// nothing.
pub fn save_session_extras(
    session: &Path,
    from: &ExtrasSources,
    owner_of: &dyn Fn(u32) -> Option<u32>,
    budget: &DiskBudget,
) -> SavedExtras {
    let mut out = SavedExtras::default();
    let Some(dir) = session.parent() else {
        return out;
    };
    let Ok(r) = SessionReader::open(session) else {
        // Nothing to trim by: the whole table.
        let done = copy_checked(
            &from.kallsyms,
            &dir.join(KALLSYMS_COPY),
            None,
            KALLSYMS_MAX_BYTES,
        );
        out.note(&from.kallsyms, KALLSYMS_COPY, done);
        return out;
    };
    let mut pids = BTreeSet::new();
    let mut kernel = KernelUse::default();
    let mut kernel_frames = HashSet::new();
    // Every part of a rotated session, not only the last one: the copy
    // names the kernel samples of all of them (before, a report of a
    // rotated session named the earlier parts' kernel samples from lines
    // kept for the last part's: wrong names).
    let mut readers: Vec<SessionReader> = profkit_eventlog::parts::closed_parts(dir)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|(_, p)| SessionReader::open(&p).ok())
        .collect();
    readers.push(r);
    for r in &readers {
        for c in r.chunks() {
            let _ = r.for_each_sample(
                c,
                |s| {
                    if s.kernel {
                        kernel.offsets.entry(s.cookie).or_default().insert(s.offset);
                    }
                },
                |m| match m {
                    Event::CookieDef(e) => match e.kind {
                        CookieKind::Anon => pids.extend(e.pid),
                        CookieKind::Kernel | CookieKind::Module => {
                            kernel.cookies.insert(e.cookie, e);
                        }
                        _ => {}
                    },
                    Event::StackDef { frames, .. } | Event::StackDefOn { frames, .. } => {
                        kernel_frames.extend(
                            frames
                                .iter()
                                .filter(|f| f.kernel)
                                .map(|f| (f.cookie, f.offset)),
                        );
                    }
                    _ => {}
                },
            );
        }
    }
    for (cookie, offset) in kernel_frames {
        kernel.add_frame(cookie, offset);
    }
    let done = save_trimmed_kallsyms(&from.kallsyms, &dir.join(KALLSYMS_COPY), &kernel, budget);
    out.note(&from.kallsyms, KALLSYMS_COPY, done);
    for pid in pids {
        let name = format!("perf-{pid}.map");
        let src = from.perf_map_dir.join(&name);
        let done = copy_map(&src, &dir.join(&name), owner_of(pid), budget);
        if done == Ok(false) {
            out.perf_maps_missing.push(pid);
        }
        out.note(&src, &name, done);
    }
    out
}

impl SavedExtras {
    fn note(&mut self, src: &Path, name: &str, done: Result<bool, String>) {
        match done {
            Ok(true) => self.saved.push(name.to_owned()),
            Ok(false) => {}
            // Refused by the budget, which names it.
            Err(why) if why.is_empty() => {}
            Err(why) => self.refused.push(format!("{}: {why}", src.display())),
        }
    }
}

/// The kernel code a session's samples and stack frames hit: distinct
/// offsets per cookie (bounded by the kernel's code, not the session), and the kernel and module cookies' definitions.
#[derive(Default)]
struct KernelUse {
    offsets: HashMap<Cookie, HashSet<u64>>,
    cookies: HashMap<Cookie, CookieEntry>,
}

impl KernelUse {
    /// A caller frame: a return address, which reports name by the byte
    /// before it (the call), so that byte's symbol is kept too (a call
    /// that is a function's last instruction returns to the next one).
    fn add_frame(&mut self, cookie: Cookie, offset: u64) {
        let offs = self.offsets.entry(cookie).or_default();
        offs.insert(offset.saturating_sub(1));
        offs.insert(offset);
    }

    fn wanted(&self) -> KallsymsWanted {
        let mut w = KallsymsWanted::default();
        for (cookie, offs) in &self.offsets {
            let Some(e) = self.cookies.get(cookie) else {
                continue;
            };
            if e.kind == CookieKind::Kernel {
                w.kernel_base = e.base;
                w.kernel_offsets.extend(offs);
            } else if e.kind == CookieKind::Module {
                w.modules
                    .entry(module_name(&e.path))
                    .or_default()
                    .extend(offs.iter().map(|&o| e.base.wrapping_add(o)));
            }
        }
        for v in w.modules.values_mut().chain([&mut w.kernel_offsets]) {
            v.sort_unstable();
            v.dedup();
        }
        w
    }

    /// The recorded kernel build-id, in hex.
    fn kernel_build_id(&self) -> Option<String> {
        let e = self
            .cookies
            .values()
            .find(|e| e.kind == CookieKind::Kernel)?;
        let id = e.build_id.as_ref()?;
        Some(id.iter().map(|b| format!("{b:02x}")).collect())
    }
}

/// Saves the lines of the kernel's symbol table that `kernel` needs (see
/// `profkit_symbols::trim_kallsyms`: every recorded kernel and module
/// address is named from them exactly as from the whole table), under a
/// `#` line naming the kernel release and build-id. A whole kallsyms is
/// some 5 MB: at 4 kHz for 8 s that was 98 % of the session.
fn save_trimmed_kallsyms(
    from: &Path,
    to: &Path,
    kernel: &KernelUse,
    budget: &DiskBudget,
) -> Result<bool, String> {
    use std::io::Read;
    let Some(src) = open_checked(from, None, KALLSYMS_MAX_BYTES)? else {
        return Ok(false);
    };
    let mut data = Vec::new();
    src.take(KALLSYMS_MAX_BYTES + 1)
        .read_to_end(&mut data)
        .map_err(|e| format!("reading: {e}"))?;
    if data.len() as u64 > KALLSYMS_MAX_BYTES {
        return Err(format!("over {KALLSYMS_MAX_BYTES} bytes"));
    }
    let lines = data.iter().filter(|&&b| b == b'\n').count();
    let (text, what) = match trim_kallsyms(KallsymsInput::Bytes(&data), &kernel.wanted()) {
        Ok(TrimmedKallsyms::Text(t)) => {
            let kept = t.lines().count();
            (
                t,
                format!(
                    "the {kept} of {lines} lines this session's kernel samples and frames need"
                ),
            )
        }
        // All addresses zero: one such line says so to a report as well.
        Ok(TrimmedKallsyms::Hidden) => (
            "0000000000000000 T _text\n".to_owned(),
            format!("its addresses were hidden (kptr_restrict): 1 of {lines} lines"),
        ),
        Err(e) => return Err(format!("trimming: {e}")),
    };
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let header = format!(
        "# profkit kallsyms, trimmed at stop to {what}; kernel {}, build-id {}\n",
        release.trim(),
        kernel.kernel_build_id().as_deref().unwrap_or("unknown"),
    );
    let cost = on_disk((header.len() + text.len()) as u64);
    budget
        .charge_or_refuse(0, cost, &from.display().to_string())
        .map_err(|_| String::new())?;
    write_new(
        to,
        header.as_bytes().chain(text.as_bytes()),
        KALLSYMS_MAX_BYTES,
    )
    .map(|_| true)
    .inspect_err(|_| budget.release(0, cost))
}

impl ExtrasSources {
    /// The owner of a live process (the uid of `/proc/PID`), for
    /// [`save_session_extras`] when the recorder did not note it.
    pub fn live_process_owner(&self, pid: u32) -> Option<u32> {
        use std::os::unix::fs::MetadataExt;
        std::fs::metadata(self.proc_root.join(pid.to_string()))
            .ok()
            .map(|m| m.uid())
    }
}

/// Copies the perf map lines of the JIT map `from` (see [`MapCopy`]) to a
/// new 0600 file `to` (replacing it, never following a link), if
/// [`open_checked`] accepts it for `owner`, charged to the budget as
/// theirs (its lines and a block). `Ok(false)`: `from` does not exist;
/// `Err("")`: the budget refused it (and named it).
fn copy_map(
    from: &Path,
    to: &Path,
    owner: Option<u32>,
    budget: &DiskBudget,
) -> Result<bool, String> {
    let Some(src) = open_checked(from, Some(owner), PERF_MAP_MAX_BYTES)? else {
        return Ok(false);
    };
    let uid = owner.unwrap_or(0);
    let mut c = MapCopy::default();
    let mut left = PERF_MAP_KEPT_MAX_LINES;
    let (room, over) = budget.room(uid);
    let out = c
        .read_new(&src, true, &mut left, u64::MAX, room.saturating_sub(4096))
        .map_err(|e| format!("reading: {e}"))?;
    let shown = from.display().to_string();
    if c.full {
        // Not even read to its end: refused whole (a host map is copied
        // all or nothing).
        let why = budget.refusal_text(over, uid, c.kept_bytes + 4096);
        budget.refuse(over, &shown, uid, &format!("{why}, and more"));
        return Err(String::new());
    }
    if c.lines_over > 0 {
        budget.refuse(
            Refusal::FileBound,
            &shown,
            uid,
            &c.note().unwrap_or_default(),
        );
    }
    let cost = out.len() as u64 + 4096;
    budget
        .charge_or_refuse(uid, cost, &shown)
        .map_err(|_| String::new())?;
    write_new(to, &out[..], out.len() as u64)
        .map(|_| true)
        .inspect_err(|_| budget.release(uid, cost))
}

/// Copies `from` to a new 0600 file `to` (replacing it, never following a
/// link), if [`open_checked`] accepts it. `Ok(false)`: `from` does not
/// exist. The copy is removed if it could not be completed.
fn copy_checked(
    from: &Path,
    to: &Path,
    owner: Option<Option<u32>>,
    max: u64,
) -> Result<bool, String> {
    let Some(src) = open_checked(from, owner, max)? else {
        return Ok(false);
    };
    write_new(to, src, max).map(|_| true)
}

/// Opens `from` if it is a regular file (or a procfs file, for kallsyms:
/// `owner` None), not a link, owned by `owner` when given, and at most
/// `max` bytes (procfs files say 0: readers cap what they read too).
/// `Ok(None)`: `from` does not exist.
fn open_checked(
    from: &Path,
    owner: Option<Option<u32>>,
    max: u64,
) -> Result<Option<std::fs::File>, String> {
    use profkit_untrusted::{open_untrusted, Policy, Refusal};
    // Opened no-follow and non-blocking; the owner and size are checked
    // below, with the process's-owner wording.
    let src = match open_untrusted(from, &Policy::regular().no_follow()) {
        Ok(o) => o.file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if matches!(Refusal::of(&e), Some(Refusal::Link { .. })) => {
            return Err("a symbolic link".into())
        }
        Err(e) => return Err(e.to_string()),
    };
    check_opened(src, owner, max).map(Some)
}

/// [`open_checked`]'s checks on a file opened otherwise (a container's JIT
/// map): a regular file, owned by `owner` when given, at most `max` bytes.
pub(crate) fn check_opened(
    src: std::fs::File,
    owner: Option<Option<u32>>,
    max: u64,
) -> Result<std::fs::File, String> {
    let m = src.metadata().map_err(|e| e.to_string())?;
    check_metadata(&m, owner, max)?;
    Ok(src)
}

/// [`check_opened`] on the metadata of a file held open (read again each
/// time a held JIT map is read).
pub(crate) fn check_metadata(
    m: &std::fs::Metadata,
    owner: Option<Option<u32>>,
    max: u64,
) -> Result<(), String> {
    use profkit_untrusted::{check, Policy, Refusal};
    let mut policy = Policy::regular().max_bytes(max);
    match owner {
        Some(None) if m.file_type().is_file() => {
            return Err("its process's owner is unknown".into())
        }
        Some(Some(uid)) => policy = policy.owner(uid),
        _ => {}
    }
    check(Path::new(""), m, &policy).map_err(|e| match Refusal::of(&e) {
        Some(Refusal::Owner { owner, wanted, .. }) => {
            format!("owned by uid {owner}, not by the process's user (uid {wanted})")
        }
        _ => e.to_string(),
    })
}

/// Writes at most `max` bytes of `src` to a new 0600 file `to` (replacing
/// it, never following a link); removes it if that fails. Returns the
/// bytes written.
pub(crate) fn write_new(to: &Path, src: impl std::io::Read, max: u64) -> Result<u64, String> {
    use std::os::unix::fs::OpenOptionsExt;
    let _ = std::fs::remove_file(to);
    let mut dst = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(to)
        .map_err(|e| format!("creating {}: {e}", to.display()))?;
    let copied =
        std::io::copy(&mut src.take(max + 1), &mut dst).and_then(|n| dst.sync_all().map(|_| n));
    match copied {
        Ok(n) if n <= max => Ok(n),
        Ok(n) => {
            let _ = std::fs::remove_file(to);
            Err(format!("over {max} bytes ({n} read)"))
        }
        Err(e) => {
            let _ = std::fs::remove_file(to);
            Err(format!("copying: {e}"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::MetadataExt;

    fn big_budget() -> DiskBudget {
        DiskBudget::new(crate::budget::BudgetLimit {
            total: 1 << 30,
            source: "test".into(),
        })
    }

    fn uid_of(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().uid()
    }

    /// The kernel's offsets (from `_text`) and each module's absolute
    /// addresses, by kallsyms' module name; frames and samples alike.
    #[test]
    fn kernel_and_module_offsets_become_the_addresses_to_keep() {
        let mut k = KernelUse::default();
        let kernel = profkit_eventlog::kernel_entry(0xffff_0000, Some(vec![0xab, 0xcd]));
        let module = profkit_eventlog::module_entry("snd-seq", 0xc000, None);
        let user = profkit_eventlog::file_entry("/bin/app", None, 8, 1, 0);
        let (kc, mc, uc) = (kernel.cookie, module.cookie, user.cookie);
        for e in [kernel, module, user] {
            k.cookies.insert(e.cookie, e);
        }
        k.offsets.insert(kc, [0x10].into());
        k.add_frame(kc, 0x20); // a return address: 0x1f is the call
        k.offsets.insert(mc, [0x8].into());
        k.offsets.insert(uc, [0x99].into());
        k.offsets.insert(4, [0x77].into()); // no definition: unknown
        let w = k.wanted();
        assert_eq!(
            (w.kernel_base, w.kernel_offsets.clone()),
            (0xffff_0000, vec![0x10, 0x1f, 0x20])
        );
        assert_eq!(w.modules.len(), 1);
        assert_eq!(w.modules["snd_seq"], vec![0xc008]);
        assert_eq!(k.kernel_build_id().as_deref(), Some("abcd"));
    }

    /// Hidden addresses (kptr_restrict): the copy keeps one all-zero line,
    /// so a report still says they were hidden, not that symbols are missing.
    #[test]
    fn a_hidden_kallsyms_is_kept_as_one_zero_line() {
        let d = tempfile::tempdir().unwrap();
        let src = d.path().join("kallsyms");
        std::fs::write(&src, "0000000000000000 T _text\n0000000000000000 T f\n").unwrap();
        let to = d.path().join("copy");
        assert_eq!(
            save_trimmed_kallsyms(&src, &to, &KernelUse::default(), &big_budget()),
            Ok(true)
        );
        let text = std::fs::read_to_string(&to).unwrap();
        let (first, rest) = text.split_once('\n').unwrap();
        assert!(
            first.starts_with("# profkit kallsyms") && first.contains("hidden"),
            "{first}"
        );
        assert_eq!(rest, "0000000000000000 T _text\n");
        // A missing source is no copy and no refusal.
        assert_eq!(
            save_trimmed_kallsyms(
                &d.path().join("none"),
                &to,
                &KernelUse::default(),
                &big_budget()
            ),
            Ok(false)
        );
    }

    #[test]
    fn only_regular_small_files_of_the_right_owner_are_copied() {
        let d = tempfile::tempdir().unwrap();
        let src = d.path().join("perf-1.map");
        std::fs::write(&src, "1000 10 jitted\n").unwrap();
        let me = uid_of(&src);
        let to = d.path().join("copy");
        let max = 1 << 20;
        assert_eq!(copy_checked(&src, &to, Some(Some(me)), max), Ok(true));
        assert_eq!(std::fs::read_to_string(&to).unwrap(), "1000 10 jitted\n");
        // Missing: skipped, not refused.
        assert_eq!(
            copy_checked(&d.path().join("nope"), &to, Some(Some(me)), max),
            Ok(false)
        );
        // Another owner, or none known.
        let e = copy_checked(&src, &to, Some(Some(me + 1)), max).unwrap_err();
        assert!(e.contains("not by the process's user"), "{e}");
        let e = copy_checked(&src, &to, Some(None), max).unwrap_err();
        assert!(e.contains("unknown"), "{e}");
        // A FIFO: refused at once (a plain open would wait for a writer).
        let fifo = d.path().join("fifo.map");
        assert!(std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
        let e = copy_checked(&fifo, &to, Some(Some(me)), max).unwrap_err();
        assert!(e.contains("not a regular file"), "{e}");
        // A symlink to a secret.
        let secret = d.path().join("shadow");
        std::fs::write(&secret, "root:x").unwrap();
        let link = d.path().join("link.map");
        std::os::unix::fs::symlink(&secret, &link).unwrap();
        let e = copy_checked(&link, &to, Some(Some(me)), max).unwrap_err();
        assert!(e.contains("symbolic link"), "{e}");
        // A sparse giant: refused by its size, never read.
        let big = d.path().join("big.map");
        std::fs::File::create(&big)
            .unwrap()
            .set_len(768 << 20)
            .unwrap();
        let to_big = d.path().join("copy-big");
        let e = copy_checked(&big, &to_big, Some(Some(me)), PERF_MAP_MAX_BYTES).unwrap_err();
        assert!(e.contains("over the"), "{e}");
        assert!(!to_big.exists(), "nothing copied");
    }

    /// Issue 25: a sparse 255 MiB host map costs its lines (today's code
    /// wrote all 255 MiB: six of them 1.5 GiB); over the budget it is
    /// refused, named by the budget, and not written.
    #[test]
    fn a_sparse_host_map_costs_its_lines() {
        use std::os::unix::fs::FileExt;
        let d = tempfile::tempdir().unwrap();
        let src = d.path().join("perf-7.map");
        let f = std::fs::File::create(&src).unwrap();
        f.write_all_at(b"7f0000 9 jitted_loop\n", 0).unwrap();
        f.set_len(255 << 20).unwrap();
        drop(f);
        let me = uid_of(&src);
        let b = big_budget();
        let to = d.path().join("copy");
        let t = std::time::Instant::now();
        assert_eq!(copy_map(&src, &to, Some(me), &b), Ok(true));
        assert!(t.elapsed() < std::time::Duration::from_secs(5));
        assert_eq!(
            std::fs::read_to_string(&to).unwrap(),
            "7f0000 9 jitted_loop\n"
        );
        assert_eq!(b.extras(), 21 + 4096);
        let tiny = DiskBudget::new(crate::budget::BudgetLimit {
            total: 8192,
            source: "test".into(),
        });
        let to2 = d.path().join("copy2");
        assert_eq!(copy_map(&src, &to2, Some(me), &tiny), Err(String::new()));
        assert!(!to2.exists());
        assert_eq!(tiny.summary().refused_total(), 1);
    }

    #[test]
    fn a_procfs_style_file_is_capped_while_copying() {
        // /proc files say size 0; the limit holds on the bytes read.
        let d = tempfile::tempdir().unwrap();
        let to = d.path().join("kallsyms");
        let e = copy_checked(Path::new("/proc/self/maps"), &to, None, 10).unwrap_err();
        assert!(e.contains("over 10 bytes"), "{e}");
        assert!(!to.exists());
        assert_eq!(
            copy_checked(Path::new("/proc/self/maps"), &to, None, 1 << 30),
            Ok(true)
        );
    }
}
