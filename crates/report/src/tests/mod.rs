//! Unit tests of the whole pipeline on small sessions written here with
//! `profkit_eventlog::SessionWriter`: every number is known in advance.

use std::path::PathBuf;

use profkit_eventlog::*;

use crate::*;

const APP: Cookie = 0xa;
const LIBC: Cookie = 0xb;
const KERNEL: Cookie = 0xc;
const OTHER: Cookie = 0xd;
const MODULE: Cookie = 0xe;
const ANON: Cookie = 0xf;
const KBASE: u64 = 0xffff_ffff_a000_0000;

fn def(cookie: Cookie, kind: CookieKind, path: &str, base: u64, pid: Option<u32>) -> Event {
    Event::CookieDef(CookieEntry {
        cookie,
        kind,
        path: path.into(),
        build_id: None,
        dev: 0,
        inode: 0,
        generation: 0,
        base,
        pid,
        file: Default::default(),
    })
}

fn comm(pid: u32, tid: u32, name: &str, exec: bool) -> Event {
    Event::Comm {
        pid,
        tid,
        comm: name.into(),
        exec,
        ns: None,
    }
}

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/symbols")
        .join(name)
}

/// Writes a session: `chunks` of (markers, samples (cpu, pid, tid, kernel,
/// cookie, offset, count)); a footer when `footer` is given.
type S = (u32, u32, u32, bool, Cookie, u64, u32);

fn write_session(
    dir: &std::path::Path,
    chunks: &[(Vec<Event>, Vec<S>)],
    footer: Option<SessionFooter>,
) -> PathBuf {
    write_session_of(
        dir,
        EventConfigDesc {
            name: "cpu-clock".into(),
            frequency: Some(1000),
            ..Default::default()
        },
        chunks,
        footer,
    )
}

/// [`write_session`] with another event (call graphs, a rate).
fn write_session_of(
    dir: &std::path::Path,
    event: EventConfigDesc,
    chunks: &[(Vec<Event>, Vec<S>)],
    footer: Option<SessionFooter>,
) -> PathBuf {
    write_session_on(dir, vec![0, 1], event, chunks, footer)
}

/// [`write_session_of`] recorded on `cpus`.
fn write_session_on(
    dir: &std::path::Path,
    cpus: Vec<u32>,
    event: EventConfigDesc,
    chunks: &[(Vec<Event>, Vec<S>)],
    footer: Option<SessionFooter>,
) -> PathBuf {
    let header = SessionHeader {
        host: "test".into(),
        event,
        cpus,
        start_time_unix_ns: 1_795_379_395_000_000_000,
        start_monotonic_ns: 1_000_000_000,
        sync_interval_ms: 250,
        target: "command app".into(),
        ..Default::default()
    };
    let path = dir.join(SESSION_FILE);
    let mut w = SessionWriter::create(&path, &header).unwrap();
    for (round, (markers, samples)) in chunks.iter().enumerate() {
        let mut enc = ChunkEncoder::new();
        for m in markers {
            enc.event(m);
        }
        for &(cpu, pid, tid, kernel, cookie, offset, n) in samples {
            for _ in 0..n {
                enc.sample(cpu, pid, tid, kernel, cookie, offset);
            }
        }
        let time = 1_000_000_000 + (round as u64 + 1) * 250_000_000;
        w.append_chunk(round as u64, time, enc.bytes()).unwrap();
    }
    if let Some(f) = footer {
        w.write_footer(&f).unwrap();
    }
    path
}

/// The standard session: an app with a worker thread, libc, kernel, a
/// module, anon code, an idle kernel thread, another process, and losses.
fn standard(dir: &std::path::Path, with_footer: bool) -> PathBuf {
    let chunk0 = (
        vec![
            def(APP, CookieKind::User, "/usr/bin/app", 0, None),
            def(LIBC, CookieKind::User, "/usr/lib/libc.so.6", 0, None),
            def(KERNEL, CookieKind::Kernel, "[kernel.kallsyms]", KBASE, None),
            def(
                MODULE,
                CookieKind::Module,
                "[fixture_mod]",
                0xffff_ffff_c040_0000,
                None,
            ),
            comm(10, 10, "app", true),
            comm(10, 11, "worker", false),
            Event::ModuleLoad {
                cookie: APP,
                start: 0x5000,
                end: 0x6000,
                pgoff: 0,
                pid: Some(10),
            },
        ],
        vec![
            (0, 10, 10, false, APP, 0x100, 6),
            (0, 10, 10, false, LIBC, 0x200, 2),
            (1, 10, 11, false, APP, 0x100, 3),
            (1, 10, 11, true, KERNEL, 0x210, 1),
            (1, 10, 11, true, MODULE, 0x110, 1),
            (1, 0, 0, true, KERNEL, 0x60, 4),
        ],
    );
    let chunk1 = (
        vec![
            def(OTHER, CookieKind::User, "/opt/other", 0, None),
            def(ANON, CookieKind::Anon, "//anon", 0, Some(4242)),
            comm(20, 20, "other", true),
            comm(4242, 4242, "node", true),
            Event::Lost {
                cpu: 1,
                kind: LostKind::Ring,
                count: 5,
            },
        ],
        vec![
            (0, 20, 20, false, OTHER, 0x10, 4),
            (0, 4242, 4242, false, ANON, 0x7f3c_0000_1010, 2),
        ],
    );
    let footer = with_footer.then(|| SessionFooter {
        end_time_unix_ns: 1_795_379_395_600_000_000,
        end_monotonic_ns: 1_600_000_000,
        rounds: 2,
        accounting: vec![
            CpuAccounting {
                cpu: 0,
                samples_written: 14,
                ..Default::default()
            },
            CpuAccounting {
                cpu: 1,
                samples_written: 9,
                lost_ring: 5,
                ..Default::default()
            },
        ],
    });
    write_session(dir, &[chunk0, chunk1], footer)
}

fn sources() -> SymbolSources {
    SymbolSources {
        kallsyms: Some(fixture("kallsyms")),
        ..Default::default()
    }
}

fn report_with(path: &std::path::Path, opts: ReportOptions) -> Report {
    let s = Session::open(path).unwrap();
    build_report(&[s], &opts, &sources(), &NoProgress).unwrap()
}

fn rows(r: &Report) -> Vec<(String, Option<String>, u64)> {
    r.rows
        .iter()
        .map(|r| (r.image.to_string(), r.symbol.clone(), r.total))
        .collect()
}

fn text(r: &Report) -> String {
    let mut out = Vec::new();
    write_text(r, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

mod annotate;
mod callgraph;
mod cpus;
mod flat;
mod inline;
mod jit;
mod offcpu;
mod parts;
mod sessions;
mod times;
mod viewers;
