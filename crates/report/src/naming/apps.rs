//! Naming without symbols: thread names ([`Comms`], last one in file order
//! winning), display names of binaries ([`Images`]), and application
//! attribution ([`find_apps`]): the application of a process is the user
//! binary whose file name starts with the process's name at exec (the
//! kernel's `comm`, the executable's file name cut to 15 bytes), preferring
//! one the process was seen mapping; failing that, its most sampled user
//! binary that is not a shared library; kernel threads have none.

use std::collections::{BTreeMap, HashMap};

use profkit_eventlog::{Cookie, CookieEntry, CookieKind, NsTask, COOKIE_UNKNOWN};

use crate::aggregate::{Aggregate, Cookies, KeyCounts};
use crate::hash::FxHashMap;
use crate::spec::base_name;

/// Thread names, last one in file order winning.
pub(crate) struct Comms {
    by_tid: HashMap<(u32, u32, u32), String>,
    exec: HashMap<(u32, u32), String>,
    /// Tasks' ids in their own pid namespaces (containers), by (session,
    /// pid, tid); the last known.
    ns: HashMap<(u32, u32, u32), NsTask>,
}

impl Comms {
    pub(crate) fn new(agg: &Aggregate) -> Comms {
        let mut marks: Vec<_> = agg.comms.iter().collect();
        marks.sort_by_key(|m| (m.sess, m.file, m.chunk, m.seq));
        let mut by_tid = HashMap::new();
        let mut exec = HashMap::new();
        let mut ns = HashMap::new();
        for m in marks {
            by_tid.insert((m.sess, m.pid, m.tid), m.comm.clone());
            if m.exec && m.pid == m.tid {
                exec.insert((m.sess, m.pid), m.comm.clone());
            }
            if let Some(n) = m.ns {
                ns.insert((m.sess, m.pid, m.tid), n);
            }
        }
        Comms { by_tid, exec, ns }
    }

    /// A task's process and thread ids in its own pid namespace, each when
    /// the session knows it (the task ran in another pid namespace than
    /// the recorder).
    pub(crate) fn ns(&self, sess: u32, pid: u32, tid: u32) -> (Option<u32>, Option<u32>) {
        let own = self.ns.get(&(sess, pid, tid));
        let process = self.ns.get(&(sess, pid, pid)).or(own);
        (process.map(|n| n.pid), own.map(|n| n.tid))
    }

    /// The name of a thread (else of its process, else `?`).
    pub(crate) fn name(&self, sess: u32, pid: u32, tid: u32) -> &str {
        self.by_tid
            .get(&(sess, pid, tid))
            .or_else(|| self.by_tid.get(&(sess, pid, pid)))
            .map_or("?", String::as_str)
    }

    /// The name a process's executable should have: its name at exec, else
    /// its main thread's name.
    pub(crate) fn process(&self, sess: u32, pid: u32) -> Option<&str> {
        self.exec
            .get(&(sess, pid))
            .or_else(|| self.by_tid.get(&(sess, pid, pid)))
            .map(String::as_str)
    }
}

/// Display names of binaries.
pub(crate) struct Images<'a> {
    /// The aggregation's cookies (borrowed alone: the counts beside them
    /// can be given back while the names are still wanted).
    cookies: &'a Cookies,
    long: bool,
}

impl<'a> Images<'a> {
    /// The names of `cookies` (an aggregation's); `counts` (its counts)
    /// are read for the warning about binaries never defined.
    pub(crate) fn new(
        cookies: &'a Cookies,
        counts: &KeyCounts,
        long: bool,
        warnings: &mut Vec<String>,
    ) -> Images<'a> {
        let mut unknown: BTreeMap<Cookie, u64> = BTreeMap::new();
        for (k, n) in counts.iter() {
            if !cookies.contains_key(&k.cookie) {
                *unknown.entry(k.cookie).or_insert(0) += n;
            }
        }
        for (c, n) in unknown {
            warnings.push(format!(
                "{n} samples in a binary whose definition was not read (cookie {c:#018x}; it was \
                 in an unreadable chunk): shown as {}",
                unknown_name(c)
            ));
        }
        Images { cookies, long }
    }

    pub(crate) fn entry(&self, c: Cookie) -> Option<&'a CookieEntry> {
        self.cookies.get(&c).map(|(e, _, _)| e)
    }

    /// The name shown for a binary.
    pub(crate) fn name(&self, c: Cookie) -> String {
        match self.entry(c) {
            None if c == COOKIE_UNKNOWN => "[unknown]".to_owned(),
            None => unknown_name(c),
            Some(e) => match e.kind {
                CookieKind::Anon => match e.pid {
                    Some(p) => format!("anon (tgid:{p})"),
                    None => "anon".to_owned(),
                },
                _ if self.long => e.path.clone(),
                _ => base_name(&e.path).to_owned(),
            },
        }
    }

    /// The name image globs are matched against: the full path.
    pub(crate) fn match_path(&self, c: Cookie) -> String {
        match self.entry(c) {
            Some(e) if e.kind != CookieKind::Anon => e.path.clone(),
            _ => self.name(c),
        }
    }
}

fn unknown_name(c: Cookie) -> String {
    format!("[unknown binary {c:#018x}]")
}

/// The application of each (session, pid): the user binary whose file
/// name starts with the process's name (the kernel's `comm` is the
/// executable's file name, cut to 15 bytes), preferring one the process
/// mapped; else the process's most sampled user binary that is not a
/// shared library; else none (kernel threads).
pub(crate) fn find_apps(agg: &Aggregate, comms: &Comms) -> FxHashMap<(u32, u32), Cookie> {
    let is_user = |c: &Cookie| {
        agg.cookies
            .get(c)
            .is_some_and(|(e, _, _)| e.kind == CookieKind::User)
    };
    // (sess, pid) → cookie → (samples, mapped)
    let mut cands: HashMap<(u32, u32), BTreeMap<Cookie, (u64, bool)>> = HashMap::new();
    for &(sess, pid, cookie) in &agg.maps {
        if is_user(&cookie) {
            cands
                .entry((sess, pid))
                .or_default()
                .entry(cookie)
                .or_default()
                .1 = true;
        }
    }
    for (k, n) in agg.counts.iter() {
        if is_user(&k.cookie) {
            cands
                .entry((k.sess, k.pid))
                .or_default()
                .entry(k.cookie)
                .or_default()
                .0 += n;
        }
    }
    let mut apps = FxHashMap::default();
    for ((sess, pid), list) in cands {
        let path = |c: &Cookie| agg.cookies.get(c).map_or("", |(e, _, _)| e.path.as_str());
        let comm = comms.process(sess, pid).filter(|c| !c.is_empty());
        let by_name = comm.and_then(|comm| {
            list.iter()
                .filter(|(c, _)| base_name(path(c)).starts_with(comm))
                .max_by_key(|(c, &(n, mapped))| (mapped, n, std::cmp::Reverse(**c)))
                .map(|(c, _)| *c)
        });
        let chosen = by_name.or_else(|| {
            list.iter()
                .filter(|(c, _)| !base_name(path(c)).contains(".so"))
                .max_by_key(|(c, &(n, _))| (n, std::cmp::Reverse(**c)))
                .map(|(c, _)| *c)
        });
        if let Some(c) = chosen {
            apps.insert((sess, pid), c);
        }
    }
    apps
}
