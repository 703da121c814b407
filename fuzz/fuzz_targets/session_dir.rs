//! A whole session directory as `profreport` meets it: `session.pkl`, a
//! `kallsyms` copy and a `perf-PID.map`, each from the input (split at
//! 0xfe bytes), and each possibly replaced by a symbolic link, a FIFO
//! or a sparse file (first input byte); then a symbol report with call
//! stacks and a timeline, rendered as text. Never a panic, an abort, a
//! hang or unbounded memory.
#![no_main]
use libfuzzer_sys::fuzz_target;
use profkit_report::{
    build_report, render, Format, NoProgress, ReportOptions, Session, SymbolSources,
};

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let Ok(dir) = tempfile::tempdir() else { return };
    let d = dir.path();
    let mut parts = rest.split(|&b| b == 0xfe);
    let names = ["session.pkl", "kallsyms", "perf-1.map"];
    for (i, name) in names.iter().enumerate() {
        let body = parts.next().unwrap_or(&[]);
        let p = d.join(name);
        let kind = (mode >> (2 * i)) & 3;
        let made = match kind {
            0 => std::fs::write(&p, body),
            1 => std::os::unix::fs::symlink("/dev/zero", &p),
            2 => std::process::Command::new("mkfifo")
                .arg(&p)
                .status()
                .map(|_| ()),
            _ => std::fs::File::create(&p).and_then(|f| f.set_len(1 << 40)),
        };
        if made.is_err() {
            return;
        }
    }
    let Ok(session) = Session::open(d) else {
        return;
    };
    let opts = ReportOptions {
        symbols: true,
        stacks: true,
        timeline: Some(1),
        ..Default::default()
    };
    // The session's own kallsyms copy and perf maps are used by default.
    let sources = SymbolSources::default();
    if let Ok(r) = build_report(&[session], &opts, &sources, &NoProgress) {
        let _ = render(&r, Format::Text, &mut std::io::sink());
    }
});
