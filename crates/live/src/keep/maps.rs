//! The JIT maps of processes in other pid namespaces: the map thread's
//! looks ([`MapJob`] → [`MapDone`]) and its reader of held maps
//! ([`MapReader`]), as the parent module's docs describe.

use super::*;

/// A look at a process's JIT map, on the map thread.
#[derive(Debug)]
pub(super) struct MapJob {
    pub(super) pid: u32,
    pub(super) owner: u32,
    /// The pid it sees, once known (else the look classifies it first).
    pub(super) ns_pid: Option<u32>,
    /// The process exited, or the session stops: read the rest, close.
    pub(super) last: bool,
}

/// What one look found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Seen {
    /// In the daemon's pid namespace (or its namespace cannot be told):
    /// its map is the host's `/tmp/perf-PID.map`, saved at stop.
    HostNs,
    /// Gone before its pid namespace could be told.
    Vanished,
    /// No map in its root.
    NoMap,
    /// Copied, or grown and appended to.
    Copied,
    /// Not grown since the last look.
    Unchanged,
    /// Refused or failed (named): not looked at again.
    Refused(String),
    /// Refused by the disk budget (named there): not looked at again.
    OverBudget,
}

/// The answer to a [`MapJob`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct MapDone {
    pub(super) pid: u32,
    /// The pid it sees in its own (other) pid namespace.
    pub(super) ns_pid: Option<u32>,
    pub(super) seen: Seen,
    /// Its descriptor is held for the next look.
    pub(super) held: bool,
    /// Look again next round (alive, not the last look, not refused).
    pub(super) again: bool,
    /// Copied but not held because as many maps as the bound allows were.
    pub(super) crowded: bool,
    /// The process was alive when looked at.
    pub(super) alive: bool,
}

/// How many JIT maps the map thread holds open: [`MAX_HELD_PERF_MAPS`],
/// or a quarter of the open-file limit if less (the per-CPU events and
/// binaries being kept need descriptors too).
pub(super) fn held_limit() -> usize {
    let soft = std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Max open files"))
                .and_then(|l| l.split_whitespace().next()?.parse::<usize>().ok())
        })
        .unwrap_or(1024);
    MAX_HELD_PERF_MAPS.min(soft / 4)
}

/// A JIT map held open (what of it was kept is its [`MapCopy`]).
#[derive(Debug)]
pub(super) struct Held {
    pub(super) file: File,
    pub(super) owner: u32,
    /// Its path, for messages.
    pub(super) shown: PathBuf,
}

/// Why a map is no longer copied.
#[derive(Debug)]
pub(super) enum MapStop {
    /// Refused or failed, with why.
    Refused(String),
    /// The disk budget refused its new lines (and named it).
    OverBudget,
}

impl From<MapStop> for Seen {
    fn from(m: MapStop) -> Seen {
        match m {
            MapStop::Refused(why) => Seen::Refused(why),
            MapStop::OverBudget => Seen::OverBudget,
        }
    }
}

/// The map thread's side: looks at processes' JIT maps, holds their
/// descriptors.
#[derive(Debug)]
pub(super) struct MapReader {
    pub(super) dir: PathBuf,
    pub(super) proc_root: PathBuf,
    pub(super) max_held: usize,
    pub(super) held: HashMap<u32, Held>,
    /// The `tmp` directories of processes whose map was not there yet.
    pub(super) tmp_dirs: HashMap<u32, File>,
    /// Looks that found no map, per process (while it is looked at).
    pub(super) no_map_looks: HashMap<u32, u32>,
    /// What was read and kept of each map, while its process is looked at
    /// (held or not).
    pub(super) copies: HashMap<u32, MapCopy>,
    /// Lines all copies may still remember ([`PERF_MAP_LINES_HELD_MAX`]).
    pub(super) lines_left: u64,
    pub(super) budget: DiskBudget,
}

impl MapReader {
    pub(super) fn new(
        dir: PathBuf,
        proc_root: PathBuf,
        max_held: usize,
        budget: DiskBudget,
    ) -> Self {
        MapReader {
            dir,
            proc_root,
            max_held,
            held: HashMap::new(),
            tmp_dirs: HashMap::new(),
            no_map_looks: HashMap::new(),
            copies: HashMap::new(),
            lines_left: PERF_MAP_LINES_HELD_MAX,
            budget,
        }
    }

    /// Done with `pid`'s map: its copy's lines are forgotten (their
    /// memory given back); lines it could not keep for a bound are named.
    pub(super) fn forget(&mut self, pid: u32, owner: u32) {
        let Some(c) = self.copies.remove(&pid) else {
            return;
        };
        self.lines_left += c.kept_lines;
        if c.lines_over > 0 {
            let shown = self.dir.join(format!("perf-{pid}.map"));
            self.budget.refuse(
                Refusal::FileBound,
                &shown.display().to_string(),
                owner,
                &c.note().unwrap_or_default(),
            );
        }
    }

    /// Reads on through `pid`'s map `f`: appends its new lines to
    /// `DIR/perf-PID.map` (made at the first), charged to the budget
    /// (the lines' bytes, and a block for a new file); `last`: the last
    /// read (synced). A copy that is not the one written (another file,
    /// another length) is written again from the map's start. `Ok(true)`:
    /// lines were added.
    pub(super) fn append_lines(
        &mut self,
        pid: u32,
        f: &File,
        owner: u32,
        shown: &Path,
        last: bool,
    ) -> Result<bool, MapStop> {
        use std::os::unix::fs::OpenOptionsExt;
        let what = |why: String| MapStop::Refused(format!("{}: {why}", shown.display()));
        let fresh_copy = !self.copies.contains_key(&pid);
        let copy = self.copies.entry(pid).or_default();
        // A first look reads a piece: the other first looks wait for it.
        let max = if fresh_copy {
            0
        } else {
            PERF_MAP_READ_PER_LOOK
        };
        // What fits in the budget (a new file costs a block too): lines
        // past it are not even read.
        let (room, over) = self.budget.room(owner);
        let room = room.saturating_sub(if copy.written == 0 { 4096 } else { 0 });
        let mut out = copy
            .read_new(f, last, &mut self.lines_left, max, room)
            .map_err(|e| what(format!("reading: {e}")))?;
        let budget = self.budget.clone();
        let refuse_rest = || {
            let why = match over {
                Refusal::UserShare => format!(
                    "its next lines would pass uid {owner}'s quarter of the {} disk budget",
                    crate::summary::human_bytes(budget.total())
                ),
                _ => format!(
                    "its next lines would pass the copies' half of the {} disk budget",
                    crate::summary::human_bytes(budget.total())
                ),
            };
            budget.refuse(over, &shown.display().to_string(), owner, &why);
            MapStop::OverBudget
        };
        if out.is_empty() {
            return if copy.full {
                Err(refuse_rest())
            } else {
                Ok(false)
            };
        }
        let to = self.dir.join(format!("perf-{pid}.map"));
        let kept = (copy.written > 0)
            .then(|| {
                std::fs::OpenOptions::new()
                    .append(true)
                    .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
                    .open(&to)
                    .ok()
            })
            .flatten()
            .filter(|d| {
                d.metadata()
                    .is_ok_and(|m| m.file_type().is_file() && m.len() == copy.written)
            });
        let fresh = kept.is_none();
        if fresh && copy.written > 0 {
            // Not the copy written: all of the map again.
            self.lines_left += copy.kept_lines;
            copy.reset();
            out = copy
                .read_new(f, last, &mut self.lines_left, max, room)
                .map_err(|e| what(format!("reading: {e}")))?;
        }
        let cost = out.len() as u64 + if fresh { 4096 } else { 0 };
        if self
            .budget
            .charge_or_refuse(owner, cost, &shown.display().to_string())
            .is_err()
        {
            copy.unkeep(&out, &mut self.lines_left);
            return Err(MapStop::OverBudget);
        }
        let written = match kept {
            Some(mut dst) => {
                let was = copy.written;
                let r = dst.write_all(&out).and_then(|_| {
                    if last {
                        dst.sync_data()?;
                    }
                    Ok(())
                });
                r.map_err(|e| {
                    let _ = dst.set_len(was);
                    format!("appending to {}: {e}", to.display())
                })
            }
            None => write_new(&to, &out[..], out.len() as u64).map(|_| ()),
        };
        if let Err(why) = written {
            self.budget.release(owner, cost);
            copy.unkeep(&out, &mut self.lines_left);
            return Err(what(why));
        }
        copy.written = if fresh {
            out.len() as u64
        } else {
            copy.written + out.len() as u64
        };
        if copy.full {
            // What fit is kept; the rest is refused.
            return Err(refuse_rest());
        }
        Ok(true)
    }

    /// Whether nothing of `pid`'s map was opened or read yet.
    pub(super) fn is_new(&self, pid: u32) -> bool {
        !self.held.contains_key(&pid) && !self.copies.contains_key(&pid)
    }

    /// Descriptors held: maps and `tmp` directories.
    pub(super) fn holding(&self) -> usize {
        self.held.len() + self.tmp_dirs.len()
    }

    /// Whether `pid` still has a root to look in (a process that exited,
    /// zombie or reaped, has none).
    pub(super) fn alive(&self, pid: u32) -> bool {
        std::fs::read_link(self.proc_root.join(format!("{pid}/root"))).is_ok()
    }

    pub(super) fn look(&mut self, j: &MapJob) -> MapDone {
        let d = self.look_once(j);
        if !d.again {
            self.forget(j.pid, j.owner);
        }
        d
    }

    pub(super) fn look_once(&mut self, j: &MapJob) -> MapDone {
        let pid = j.pid;
        // Before reading: a map read after its process is gone is whole.
        let alive = self.alive(pid);
        let more = !j.last && alive;
        let done = |ns_pid, seen, held, again| MapDone {
            pid,
            ns_pid,
            seen,
            held,
            again,
            crowded: false,
            alive,
        };
        if let Some(h) = self.held.remove(&pid) {
            let checked = h
                .file
                .metadata()
                .map_err(|e| e.to_string())
                .and_then(|m| check_metadata(&m, Some(Some(h.owner)), PERF_MAP_MAX_BYTES))
                .map_err(|why| MapStop::Refused(format!("{}: {why}", h.shown.display())));
            let read =
                checked.and_then(|_| self.append_lines(pid, &h.file, h.owner, &h.shown, !more));
            return match read {
                Ok(grew) => {
                    if more {
                        self.held.insert(pid, h);
                    }
                    let seen = if grew { Seen::Copied } else { Seen::Unchanged };
                    done(j.ns_pid, seen, more, more)
                }
                Err(why) => done(j.ns_pid, why.into(), false, false),
            };
        }
        let Some(ns_pid) = j.ns_pid.or_else(|| foreign_ns_pid(&self.proc_root, pid)) else {
            let seen = if alive { Seen::HostNs } else { Seen::Vanished };
            return done(None, seen, false, false);
        };
        let tmp = self.tmp_dirs.remove(&pid);
        let crowded = self.holding() >= self.max_held;
        let (seen, kept) = self.open_and_copy(pid, ns_pid, j.owner, more && !crowded, tmp.as_ref());
        let held = kept.is_some();
        if let Some(h) = kept {
            self.held.insert(pid, h);
        }
        let again = more && !matches!(seen, Seen::Refused(_) | Seen::OverBudget);
        self.hold_tmp_dir(pid, again && seen == Seen::NoMap, tmp, crowded);
        MapDone {
            crowded: more && crowded && seen == Seen::Copied,
            ..done(Some(ns_pid), seen, held, again)
        }
    }

    /// After a look at `pid` that found no map (`no_map`, and it is to be
    /// looked at again): holds its `tmp` directory (`tmp`, or opened now
    /// unless `crowded`) for [`TMP_DIR_LOOKS`] such looks; else forgets.
    pub(super) fn hold_tmp_dir(
        &mut self,
        pid: u32,
        no_map: bool,
        tmp: Option<File>,
        crowded: bool,
    ) {
        if !no_map {
            self.no_map_looks.remove(&pid);
            return;
        }
        let n = self.no_map_looks.entry(pid).or_default();
        *n += 1;
        if *n > TMP_DIR_LOOKS {
            return;
        }
        let tmp = match tmp {
            Some(d) => Some(d),
            None if !crowded => open_perf_map_in_root(&self.proc_root, pid, Path::new("tmp"))
                .ok()
                .filter(|d| d.metadata().is_ok_and(|m| m.is_dir())),
            None => None,
        };
        if let Some(d) = tmp {
            self.tmp_dirs.insert(pid, d);
        }
    }

    /// Opens `pid`'s map inside its root (in its held `tmp` directory if
    /// given) and appends its new lines to the copy; returns it to hold
    /// when `may_hold`.
    pub(super) fn open_and_copy(
        &mut self,
        pid: u32,
        ns_pid: u32,
        owner: u32,
        may_hold: bool,
        tmp: Option<&File>,
    ) -> (Seen, Option<Held>) {
        let rel = perf_map_in_root(ns_pid);
        let shown = self.proc_root.join(format!("{pid}/root")).join(&rel);
        let refused = |why: String| (Seen::Refused(format!("{}: {why}", shown.display())), None);
        let opened = match tmp {
            Some(d) => open_in_dir(d, &format!("perf-{ns_pid}.map")),
            None => open_perf_map_in_root(&self.proc_root, pid, &rel),
        };
        let f = match opened {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return (Seen::NoMap, None),
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                return refused("a symbolic link on the way".into())
            }
            Err(e) => return refused(e.to_string()),
        };
        let f = match check_opened(f, Some(Some(owner)), PERF_MAP_MAX_BYTES) {
            Ok(f) => f,
            Err(why) => return refused(why),
        };
        let seen = match self.append_lines(pid, &f, owner, &shown, !may_hold) {
            Ok(true) => Seen::Copied,
            Ok(false) => Seen::Unchanged,
            Err(stop) => return (stop.into(), None),
        };
        let held = may_hold.then_some(Held {
            file: f,
            owner,
            shown,
        });
        (seen, held)
    }
}

/// Opens `name` (one file name) in the directory `dir` is open on, with
/// no link followed (the directory is reached through the daemon's own
/// `/proc/self/fd`, and stays reachable after its mount is gone),
/// non-blocking.
pub(super) fn open_in_dir(dir: &File, name: &str) -> std::io::Result<File> {
    use std::os::fd::AsRawFd;
    let path = format!("/proc/self/fd/{}/{name}", dir.as_raw_fd());
    profkit_untrusted::open_untrusted(
        Path::new(&path),
        &profkit_untrusted::Policy::regular().no_follow(),
    )
    .map(|o| o.file)
}
