//! Bodies of the marker events (tags 0x20..=0x3f) and of [`CookieEntry`].
//!
//! Every marker is `tag, len uvar, body`. A body is a sequence of fields;
//! a reader ignores bytes after the fields it knows (written by a newer
//! writer that appended fields).

use crate::codec::{push_bool, push_str, push_uvar, tag, BodyReader};
use crate::error::{Error, Result};
use crate::event::{
    CookieEntry, CookieKind, Event, FileCheck, FileIdentity, Frame, JitCode, JitLine, LostKind,
    NsTask, OffCpuKind,
};

pub(crate) fn cookie_kind_code(k: &CookieKind) -> u8 {
    match k {
        CookieKind::User => 0,
        CookieKind::Kernel => 1,
        CookieKind::Module => 2,
        CookieKind::Anon => 3,
        CookieKind::Vdso => 4,
        CookieKind::Other => 5,
        CookieKind::Jit => 6,
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
        6 => CookieKind::Jit,
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
            format!("unknown cookie kind {code} (this build knows 0..=6)"),
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

/// The longest name (and source file name) a `JitCode` holds: readers
/// refuse longer ones as malformed.
pub const MAX_JIT_NAME: usize = 4096;

/// The most code bytes a `JitCode` holds (1 MiB): readers refuse more as
/// malformed; a writer keeps none (`code` None) for a larger function.
pub const MAX_JIT_CODE: usize = 1 << 20;

/// The most source files a `JitCode` names.
pub const MAX_JIT_FILES: usize = 4096;

/// The most source lines a `JitCode` holds.
pub const MAX_JIT_LINES: usize = 65536;

/// Appends a `JitCode` body: cookie, addr, size, index, time, name, code
/// `opt<bytes>`, files (n, n × str), lines (m, m × (offset delta from the
/// previous line's, line, discrim, file)).
fn push_jit_code(out: &mut Vec<u8>, j: &JitCode) {
    out.extend_from_slice(&j.cookie.to_le_bytes());
    push_uvar(out, j.addr);
    push_uvar(out, j.size);
    push_uvar(out, j.index);
    push_uvar(out, j.time);
    push_str(out, &j.name);
    match &j.code {
        None => out.push(0),
        Some(c) => {
            out.push(1);
            crate::codec::push_bytes(out, c);
        }
    }
    push_uvar(out, j.files.len() as u64);
    for f in &j.files {
        push_str(out, f);
    }
    push_uvar(out, j.lines.len() as u64);
    let mut prev = 0u64;
    for l in &j.lines {
        push_uvar(out, l.offset.wrapping_sub(prev));
        push_uvar(out, u64::from(l.line));
        push_uvar(out, u64::from(l.discrim));
        push_uvar(out, u64::from(l.file));
        prev = l.offset;
    }
}

impl JitCode {
    /// True when a reader takes this marker as it is: within the bounds
    /// ([`MAX_JIT_NAME`], [`MAX_JIT_CODE`], [`MAX_JIT_FILES`],
    /// [`MAX_JIT_LINES`]), `code` of `size` bytes, `addr + size` without
    /// overflow, lines sorted, within `0..size` and naming a file.
    pub fn fits(&self) -> bool {
        let mut prev = 0;
        self.name.len() <= MAX_JIT_NAME
            && self.addr.checked_add(self.size).is_some()
            && self
                .code
                .as_ref()
                .is_none_or(|c| c.len() <= MAX_JIT_CODE && c.len() as u64 == self.size)
            && self.files.len() <= MAX_JIT_FILES
            && self.files.iter().all(|f| f.len() <= MAX_JIT_NAME)
            && self.lines.len() <= MAX_JIT_LINES
            && self.lines.iter().all(|l| {
                let ok = l.offset >= prev
                    && l.offset < self.size
                    && (l.file as usize) < self.files.len();
                prev = l.offset;
                ok
            })
    }

    /// This marker cut to what a reader takes ([`JitCode::fits`]): names
    /// cut at a character boundary, code not kept when over the bound or
    /// not `size` bytes, the size cut at the end of the address space,
    /// files past the bound and lines out of order, out of range, naming a
    /// missing file or past the bound left out. [`crate::ChunkEncoder`]
    /// writes every `JitCode` through it, so a writer never makes a chunk
    /// readers refuse.
    pub fn bounded(&self) -> JitCode {
        let size = self.size.min(u64::MAX - self.addr);
        let files: Vec<String> = self
            .files
            .iter()
            .take(MAX_JIT_FILES)
            .map(|f| cut(f, MAX_JIT_NAME).to_owned())
            .collect();
        let mut prev = 0;
        let lines = self
            .lines
            .iter()
            .filter(|l| {
                let ok = l.offset >= prev && l.offset < size && (l.file as usize) < files.len();
                if ok {
                    prev = l.offset;
                }
                ok
            })
            .take(MAX_JIT_LINES)
            .copied()
            .collect();
        JitCode {
            cookie: self.cookie,
            addr: self.addr,
            size,
            index: self.index,
            time: self.time,
            name: cut(&self.name, MAX_JIT_NAME).to_owned(),
            code: self
                .code
                .as_ref()
                .filter(|c| c.len() <= MAX_JIT_CODE && c.len() as u64 == size)
                .cloned(),
            files,
            lines,
        }
    }
}

/// `s` cut to at most `max` bytes at a character boundary.
fn cut(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// Smallest line entry: offset delta, line, discrim, file (1 byte each).
const MIN_JIT_LINE_BYTES: usize = 4;

fn read_jit_code(r: &mut BodyReader<'_>) -> Result<Event> {
    const W: &str = "JitCode";
    let cookie = r.u64le("cookie")?;
    let addr = r.uvar("addr")?;
    let size = r.uvar("size")?;
    let index = r.uvar("index")?;
    let time = r.uvar("time")?;
    let at = r.offset();
    let name = r.string("name")?;
    if name.len() > MAX_JIT_NAME {
        return Err(Error::malformed(
            W,
            at,
            format!(
                "name of {} bytes (the format's limit is {MAX_JIT_NAME})",
                name.len()
            ),
        ));
    }
    if addr.checked_add(size).is_none() {
        return Err(Error::malformed(
            W,
            at,
            format!("code at {addr:#x} of {size} bytes runs past the end of the address space"),
        ));
    }
    let at = r.offset();
    let code = r.option("code", |r| r.bytes("code"))?;
    if let Some(c) = code {
        if c.len() > MAX_JIT_CODE {
            return Err(Error::malformed(
                W,
                at,
                format!(
                    "{} code bytes (the format's limit is {MAX_JIT_CODE})",
                    c.len()
                ),
            ));
        }
        if c.len() as u64 != size {
            return Err(Error::malformed(
                W,
                at,
                format!("{} code bytes for a function of size {size}", c.len()),
            ));
        }
    }
    let at = r.offset();
    let n = r.count("files", 1)?;
    if n > MAX_JIT_FILES {
        return Err(Error::malformed(
            W,
            at,
            format!("{n} source files (the format's limit is {MAX_JIT_FILES})"),
        ));
    }
    let mut files = Vec::with_capacity(n);
    for _ in 0..n {
        let at = r.offset();
        let f = r.string("files")?;
        if f.len() > MAX_JIT_NAME {
            return Err(Error::malformed(
                W,
                at,
                format!(
                    "source file name of {} bytes (the format's limit is {MAX_JIT_NAME})",
                    f.len()
                ),
            ));
        }
        files.push(f);
    }
    let at = r.offset();
    let m = r.count("lines", MIN_JIT_LINE_BYTES)?;
    if m > MAX_JIT_LINES {
        return Err(Error::malformed(
            W,
            at,
            format!("{m} source lines (the format's limit is {MAX_JIT_LINES})"),
        ));
    }
    let mut lines = Vec::with_capacity(m);
    let mut offset = 0u64;
    for i in 0..m {
        let at = r.offset();
        let d = r.uvar("lines.offset")?;
        // A delta cannot go back, so a writer's out-of-order line comes
        // out as a (wrapped) offset past the size.
        offset = match offset.checked_add(d) {
            Some(o) if o < size => o,
            _ => {
                return Err(Error::malformed(
                    W,
                    at,
                    format!(
                        "line {i}: offset {offset} + {d} is out of order or past the function's size {size}"
                    ),
                ))
            }
        };
        let line = r.u32var("lines.line")?;
        let discrim = r.u32var("lines.discrim")?;
        let fat = r.offset();
        let file = r.u32var("lines.file")?;
        if file as usize >= files.len() {
            return Err(Error::malformed(
                W,
                fat,
                format!(
                    "line {i}: file index {file} but {} source files",
                    files.len()
                ),
            ));
        }
        lines.push(JitLine {
            offset,
            line,
            discrim,
            file,
        });
    }
    Ok(Event::JitCode(JitCode {
        cookie,
        addr,
        size,
        index,
        time,
        name,
        code: code.map(<[u8]>::to_vec),
        files,
        lines,
    }))
}

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
        Event::JitCode(j) => {
            if j.fits() {
                push_jit_code(&mut body, j);
            } else {
                push_jit_code(&mut body, &j.bounded());
            }
            tag::JIT_CODE
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
        tag::JIT_CODE => "JitCode",
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
        tag::JIT_CODE => read_jit_code(&mut r)?,
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

#[cfg(test)]
mod tests;
