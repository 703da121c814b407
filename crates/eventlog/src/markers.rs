//! Bodies of the marker events (tags 0x20..=0x3f) and of [`CookieEntry`].
//!
//! Every marker is `tag, len uvar, body`. A body is a sequence of fields;
//! a reader ignores bytes after the fields it knows (written by a newer
//! writer that appended fields).

use crate::codec::{push_bool, push_str, push_uvar, tag, BodyReader};
use crate::error::{Error, Result};
use crate::event::{
    CookieEntry, CookieKind, Event, FileCheck, FileIdentity, Frame, LostKind, NsTask, OffCpuKind,
};

pub(crate) fn cookie_kind_code(k: &CookieKind) -> u8 {
    match k {
        CookieKind::User => 0,
        CookieKind::Kernel => 1,
        CookieKind::Module => 2,
        CookieKind::Anon => 3,
        CookieKind::Vdso => 4,
        CookieKind::Other => 5,
    }
}

fn cookie_kind_from(code: u8) -> Option<CookieKind> {
    Some(match code {
        0 => CookieKind::User,
        1 => CookieKind::Kernel,
        2 => CookieKind::Module,
        3 => CookieKind::Anon,
        4 => CookieKind::Vdso,
        5 => CookieKind::Other,
        _ => return None,
    })
}

pub(crate) fn lost_kind_code(k: LostKind) -> u8 {
    match k {
        LostKind::Ring => 0,
        LostKind::Overflow => 1,
        LostKind::DiskFull => 2,
        LostKind::NoMapping => 3,
        LostKind::NoTask => 4,
        LostKind::Reconcile => 5,
        LostKind::Other => 6,
    }
}

fn lost_kind_from(code: u8) -> Option<LostKind> {
    Some(match code {
        0 => LostKind::Ring,
        1 => LostKind::Overflow,
        2 => LostKind::DiskFull,
        3 => LostKind::NoMapping,
        4 => LostKind::NoTask,
        5 => LostKind::Reconcile,
        6 => LostKind::Other,
        _ => return None,
    })
}

fn push_opt_u32(out: &mut Vec<u8>, v: Option<u32>) {
    match v {
        None => out.push(0),
        Some(p) => {
            out.push(1);
            push_uvar(out, u64::from(p));
        }
    }
}

/// Appends the body of a cookie entry (without length prefix).
pub(crate) fn push_cookie_entry(out: &mut Vec<u8>, e: &CookieEntry) {
    out.extend_from_slice(&e.cookie.to_le_bytes());
    out.push(cookie_kind_code(&e.kind));
    push_str(out, &e.path);
    match &e.build_id {
        None => out.push(0),
        Some(b) => {
            out.push(1);
            crate::codec::push_bytes(out, b);
        }
    }
    push_uvar(out, e.dev);
    push_uvar(out, e.inode);
    push_uvar(out, e.generation);
    push_uvar(out, e.base);
    push_opt_u32(out, e.pid);
    // Appended field: left out when not recorded, so such entries keep
    // their earlier bytes.
    match e.file {
        FileCheck::NotRecorded => {}
        FileCheck::File(i) => {
            out.push(1);
            push_uvar(out, i.dev);
            push_uvar(out, i.inode);
            push_uvar(out, i.size);
            push_uvar(out, crate::codec::zigzag(i.mtime_ns));
        }
        FileCheck::Unverified => out.push(2),
    }
}

pub(crate) fn read_cookie_entry(r: &mut BodyReader<'_>) -> Result<CookieEntry> {
    let cookie = r.u64le("cookie")?;
    let at = r.offset();
    let code = r.u8("kind")?;
    let kind = cookie_kind_from(code).ok_or_else(|| {
        Error::malformed(
            "CookieDef",
            at,
            format!("unknown cookie kind {code} (this build knows 0..=5)"),
        )
    })?;
    Ok(CookieEntry {
        cookie,
        kind,
        path: r.string("path")?,
        build_id: r.option("build_id", |r| r.bytes("build_id").map(<[u8]>::to_vec))?,
        dev: r.uvar("dev")?,
        inode: r.uvar("inode")?,
        generation: r.uvar("generation")?,
        base: r.uvar("base")?,
        pid: r.option("pid", |r| r.u32var("pid"))?,
        file: if r.remaining() > 0 {
            match r.u8("file")? {
                0 => FileCheck::NotRecorded,
                1 => FileCheck::File(FileIdentity {
                    dev: r.uvar("file.dev")?,
                    inode: r.uvar("file.inode")?,
                    size: r.uvar("file.size")?,
                    mtime_ns: crate::codec::unzigzag(r.uvar("file.mtime")?),
                }),
                // A newer writer's kind of check: whatever it says, this
                // build cannot verify a file against it.
                _ => FileCheck::Unverified,
            }
        } else {
            FileCheck::NotRecorded
        },
    })
}

/// Appends a `StackDef` body: id, then the frames as runs of consecutive
/// frames in the same binary and mode (`cookie u64 LE, kernel bool, n uvar,
/// n × offset uvar`), so a cookie is spelled once per run, not per frame.
pub(crate) fn push_stack_def(out: &mut Vec<u8>, id: u32, frames: &[Frame]) {
    push_uvar(out, u64::from(id));
    let same = |a: &Frame, b: &Frame| a.cookie == b.cookie && a.kernel == b.kernel;
    let runs = frames.chunk_by(same);
    push_uvar(out, runs.clone().count() as u64);
    for run in runs {
        out.extend_from_slice(&run[0].cookie.to_le_bytes());
        push_bool(out, run[0].kernel);
        push_uvar(out, run.len() as u64);
        for f in run {
            push_uvar(out, f.offset);
        }
    }
}

/// The longest cgroup path a `CgroupDef` holds (the kernel's `PATH_MAX`;
/// a writer cuts a longer one): readers refuse longer ones as malformed.
pub const MAX_CGROUP_PATH: usize = 4096;

/// The most frames a stack has (docs/FORMAT.md, "Bounds"): writers drop
/// the outermost frames of longer stacks; readers refuse longer
/// definitions as malformed, so a crafted file cannot make a report hold
/// (and copy) a million frames per stack.
pub const MAX_STACK_FRAMES: usize = 256;

/// Smallest run: cookie (8), kernel (1), n (1), one offset (1).
const MIN_RUN_BYTES: usize = 11;

fn read_stack_def(r: &mut BodyReader<'_>) -> Result<Event> {
    let id = r.u32var("id")?;
    let runs = r.count("runs", MIN_RUN_BYTES)?;
    let mut frames = Vec::new();
    for _ in 0..runs {
        let cookie = r.u64le("run.cookie")?;
        let kernel = r.bool("run.kernel")?;
        let n = r.count("run.frames", 1)?;
        if frames.len() + n > MAX_STACK_FRAMES {
            return Err(Error::malformed(
                "StackDef",
                r.offset(),
                format!(
                    "more than {MAX_STACK_FRAMES} frames (the format's limit; a writer cuts longer stacks)"
                ),
            ));
        }
        frames.reserve(n);
        for _ in 0..n {
            frames.push(Frame {
                cookie,
                offset: r.uvar("run.offset")?,
                kernel,
            });
        }
    }
    Ok(Event::StackDef { id, frames })
}

/// Appends a marker event (`tag, len, body`). Panics on non-marker events;
/// callers dispatch those before.
pub(crate) fn push_marker(out: &mut Vec<u8>, ev: &Event) {
    let mut body = Vec::new();
    let t = match ev {
        Event::Comm {
            pid,
            tid,
            comm,
            exec,
            ns,
        } => {
            push_uvar(&mut body, u64::from(*pid));
            push_uvar(&mut body, u64::from(*tid));
            push_bool(&mut body, *exec);
            push_str(&mut body, comm);
            // Appended field: left out when None, so a Comm of a task in
            // the recorder's own namespace keeps its version-1 bytes.
            if let Some(n) = ns {
                push_bool(&mut body, true);
                push_uvar(&mut body, u64::from(n.pid));
                push_uvar(&mut body, u64::from(n.tid));
            }
            tag::COMM
        }
        Event::CookieDef(e) => {
            push_cookie_entry(&mut body, e);
            tag::COOKIE_DEF
        }
        Event::ModuleLoad {
            cookie,
            start,
            end,
            pgoff,
            pid,
        } => {
            body.extend_from_slice(&cookie.to_le_bytes());
            push_uvar(&mut body, *start);
            push_uvar(&mut body, *end);
            push_uvar(&mut body, *pgoff);
            push_opt_u32(&mut body, *pid);
            tag::MODULE_LOAD
        }
        Event::Lost { cpu, kind, count } => {
            push_uvar(&mut body, u64::from(*cpu));
            body.push(lost_kind_code(*kind));
            push_uvar(&mut body, *count);
            tag::LOST
        }
        Event::Throttle {
            cpu,
            time,
            throttled,
        } => {
            push_uvar(&mut body, u64::from(*cpu));
            push_uvar(&mut body, *time);
            push_bool(&mut body, *throttled);
            tag::THROTTLE
        }
        Event::StackDef { id, frames } => {
            push_stack_def(&mut body, *id, frames);
            tag::STACK_DEF
        }
        Event::StackDefOn { id, parent, frames } => {
            push_uvar(&mut body, u64::from(*id));
            push_stack_def(&mut body, *parent, frames);
            tag::STACK_DEF_ON
        }
        Event::CgroupDef { id, path } => {
            push_uvar(&mut body, *id);
            push_str(&mut body, path);
            tag::CGROUP_DEF
        }
        Event::OffCpu {
            cpu,
            pid,
            tid,
            kind,
            kernel,
            cookie,
            offset,
            stack,
            cgroup,
            count,
            total_ns,
        } => {
            push_uvar(&mut body, u64::from(*cpu));
            push_uvar(&mut body, u64::from(*pid));
            push_uvar(&mut body, u64::from(*tid));
            body.push(kind.code());
            push_bool(&mut body, *kernel);
            body.extend_from_slice(&cookie.to_le_bytes());
            push_uvar(&mut body, *offset);
            push_opt_u32(&mut body, *stack);
            push_uvar(&mut body, *cgroup);
            push_uvar(&mut body, *count);
            push_uvar(&mut body, *total_ns);
            tag::OFF_CPU
        }
        Event::CpuSwitch { .. }
        | Event::CgroupSwitch { .. }
        | Event::TaskSwitch { .. }
        | Event::Mode { .. }
        | Event::CookieSwitch { .. }
        | Event::Sample { .. }
        | Event::StackSample { .. } => unreachable!("push_marker called with a state event"),
    };
    out.push(t);
    push_uvar(out, body.len() as u64);
    out.extend_from_slice(&body);
}

/// Decodes a marker body of tag `t`; `base` is the body's payload offset.
pub(crate) fn read_marker(t: u8, body: &[u8], base: u64) -> Result<Event> {
    let what = match t {
        tag::COMM => "Comm",
        tag::COOKIE_DEF => "CookieDef",
        tag::MODULE_LOAD => "ModuleLoad",
        tag::LOST => "Lost",
        tag::THROTTLE => "Throttle",
        tag::STACK_DEF => "StackDef",
        tag::STACK_DEF_ON => "StackDefOn",
        tag::CGROUP_DEF => "CgroupDef",
        tag::OFF_CPU => "OffCpu",
        _ => {
            return Err(Error::UnknownTag {
                tag: t,
                offset: base,
            })
        }
    };
    let mut r = BodyReader::new(body, base, what);
    let ev = match t {
        tag::COMM => Event::Comm {
            pid: r.u32var("pid")?,
            tid: r.u32var("tid")?,
            exec: r.bool("exec")?,
            comm: r.string("comm")?,
            ns: if r.remaining() > 0 {
                r.option("ns", |r| {
                    Ok(NsTask {
                        pid: r.u32var("ns.pid")?,
                        tid: r.u32var("ns.tid")?,
                    })
                })?
            } else {
                None
            },
        },
        tag::COOKIE_DEF => Event::CookieDef(read_cookie_entry(&mut r)?),
        tag::MODULE_LOAD => Event::ModuleLoad {
            cookie: r.u64le("cookie")?,
            start: r.uvar("start")?,
            end: r.uvar("end")?,
            pgoff: r.uvar("pgoff")?,
            pid: r.option("pid", |r| r.u32var("pid"))?,
        },
        tag::LOST => {
            let cpu = r.u32var("cpu")?;
            let at = r.offset();
            let code = r.u8("kind")?;
            let kind = lost_kind_from(code).ok_or_else(|| {
                Error::malformed(
                    "Lost",
                    at,
                    format!("unknown lost kind {code} (this build knows 0..=6)"),
                )
            })?;
            Event::Lost {
                cpu,
                kind,
                count: r.uvar("count")?,
            }
        }
        tag::STACK_DEF => read_stack_def(&mut r)?,
        tag::STACK_DEF_ON => {
            let id = r.u32var("id")?;
            match read_stack_def(&mut r)? {
                Event::StackDef { id: parent, frames } => Event::StackDefOn { id, parent, frames },
                _ => unreachable!("read_stack_def gives a StackDef"),
            }
        }
        tag::CGROUP_DEF => {
            let id = r.uvar("id")?;
            let at = r.offset();
            let path = r.string("path")?;
            if path.len() > MAX_CGROUP_PATH {
                return Err(Error::malformed(
                    "CgroupDef",
                    at,
                    format!(
                        "path of {} bytes (the format's limit is {MAX_CGROUP_PATH})",
                        path.len()
                    ),
                ));
            }
            Event::CgroupDef { id, path }
        }
        tag::OFF_CPU => {
            let cpu = r.u32var("cpu")?;
            let pid = r.u32var("pid")?;
            let tid = r.u32var("tid")?;
            let at = r.offset();
            let code = r.u8("kind")?;
            let kind = OffCpuKind::from_code(code).ok_or_else(|| {
                Error::malformed(
                    "OffCpu",
                    at,
                    format!("unknown off-CPU kind {code} (this build knows 0..=1)"),
                )
            })?;
            Event::OffCpu {
                cpu,
                pid,
                tid,
                kind,
                kernel: r.bool("kernel")?,
                cookie: r.u64le("cookie")?,
                offset: r.uvar("offset")?,
                stack: r.option("stack", |r| r.u32var("stack"))?,
                cgroup: r.uvar("cgroup")?,
                count: r.uvar("count")?,
                total_ns: r.uvar("total_ns")?,
            }
        }
        _ => Event::Throttle {
            cpu: r.u32var("cpu")?,
            time: r.uvar("time")?,
            throttled: r.bool("throttled")?,
        },
    };
    Ok(ev)
}
