//! Records the whole system while a command runs, then prints what the
//! rings captured: per-CPU samples and losses, and the busiest binaries.
//! This is the whole pipeline (rings → sync → event buffer → session file →
//! reader) without the daemon; `scripts/demo.sh` runs it.
//!
//! Usage: `capture [-F HZ] [-g] SESSION_FILE -- CMD [ARGS...]` (`-g`:
//! call graphs; it also prints what the stacks cost in the file).

use profkit_eventlog::{Event, SessionHeader, SessionReader};
use profkit_perf::{EventSpec, Rate, Sampler, SamplerConfig};
use profkit_sync::{FileSink, Recorder, RecorderOptions, SyncOptions, SyncStage};
use std::collections::HashMap;
use std::process::{Command, ExitCode};
use std::time::Duration;

fn main() -> ExitCode {
    match run() {
        Ok(code) => code,
        Err(e) => {
            eprintln!("capture: {e}");
            ExitCode::from(2)
        }
    }
}

fn run() -> Result<ExitCode, String> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut freq = 4000;
    let mut callchain = false;
    loop {
        match args.first().map(String::as_str) {
            Some("-F") => {
                freq = args
                    .get(1)
                    .and_then(|f| f.parse().ok())
                    .ok_or("-F needs a number (Hz)")?;
                args.drain(..2);
            }
            Some("-g") => {
                callchain = true;
                args.remove(0);
            }
            _ => break,
        }
    }
    let sep = args
        .iter()
        .position(|a| a == "--")
        .ok_or("usage: capture [-F HZ] [-g] SESSION_FILE -- CMD [ARGS...]")?;
    let (session, cmd) = (
        args[..sep].first().ok_or("missing SESSION_FILE")?.clone(),
        args[sep + 1..].to_vec(),
    );
    if cmd.is_empty() {
        return Err("missing command after --".into());
    }
    let mut config = SamplerConfig::new(EventSpec::parse("cpu-clock").map_err(|e| e.to_string())?);
    config.rate = Rate::Frequency(freq);
    config.callchain = callchain;
    let sampler = Sampler::open(&config).map_err(|e| e.to_string())?;
    let mut stage = SyncStage::with_probe(
        SyncOptions::new(sampler.layout()),
        profkit_sync::ProcfsProbe::default(),
    );
    stage.seed_from_proc();
    let header = SessionHeader {
        cpus: config.cpu_list().map_err(|e| e.to_string())?,
        event: profkit_eventlog::EventConfigDesc {
            name: "cpu-clock".into(),
            frequency: Some(freq),
            callchain,
            ..Default::default()
        },
        target: format!("system-wide while running {}", cmd.join(" ")),
        sync_interval_ms: 250,
        ..Default::default()
    };
    let _ = std::fs::remove_file(&session);
    let sink = FileSink::create(session.clone().into(), header).map_err(|e| e.to_string())?;
    let mut rec = Recorder::new(sampler, stage, Box::new(sink), RecorderOptions::default())
        .map_err(|e| e.to_string())?;
    rec.source_mut().enable().map_err(|e| e.to_string())?;
    let mut child = Command::new(&cmd[0])
        .args(&cmd[1..])
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", cmd[0]))?;
    let status = loop {
        std::thread::sleep(Duration::from_millis(250));
        rec.round();
        if let Some(st) = child.try_wait().map_err(|e| e.to_string())? {
            break st;
        }
    };
    let st = rec.stop().map_err(|e| e.to_string())?;
    let reader = SessionReader::open(&session).map_err(|e| e.to_string())?;
    let mut names = HashMap::new();
    let mut per_image: HashMap<u64, u64> = HashMap::new();
    let (mut with_stack, mut defs, mut def_bytes, mut frames) = (0u64, 0u64, 0u64, 0u64);
    for c in reader.chunks() {
        reader
            .for_each_sample(
                c,
                |s| {
                    *per_image.entry(s.cookie).or_default() += 1;
                    with_stack += u64::from(s.stack.is_some());
                },
                |m| match m {
                    Event::CookieDef(e) => {
                        names.insert(e.cookie, e.path);
                    }
                    Event::StackDef { .. } => {
                        let mut enc = profkit_eventlog::ChunkEncoder::new();
                        enc.event(&m);
                        defs += 1;
                        def_bytes += enc.bytes().len() as u64;
                        if let Event::StackDef { frames: f, .. } = m {
                            frames += f.len() as u64;
                        }
                    }
                    _ => {}
                },
            )
            .map_err(|e| e.to_string())?;
    }
    let total: u64 = per_image.values().sum();
    let file_len = std::fs::metadata(&session).map(|m| m.len()).unwrap_or(0);
    println!(
        "\nprofkit capture: {} rounds, {} bytes in {}: {} samples, {:.2} bytes/sample",
        st.rounds,
        file_len,
        session,
        total,
        file_len as f64 / total.max(1) as f64
    );
    if callchain {
        println!(
            "call graphs: {with_stack} samples with a stack ({:.1} %), {defs} stack definitions \
             ({frames} frames, {def_bytes} bytes = {:.2} bytes/sample), table flushes {}",
            100.0 * with_stack as f64 / total.max(1) as f64,
            def_bytes as f64 / total.max(1) as f64,
            st.stacks.flushes,
        );
    }
    println!(
        "{:>5} {:>10} {:>10} {:>8}",
        "cpu", "samples", "lost", "lost %"
    );
    for a in &st.accounting {
        let n = a.samples_written + a.lost_total();
        println!(
            "{:>5} {:>10} {:>10} {:>7.3}%",
            a.cpu,
            a.samples_written,
            a.lost_total(),
            if n > 0 {
                100.0 * a.lost_total() as f64 / n as f64
            } else {
                0.0
            }
        );
    }
    let mut rows: Vec<_> = per_image.into_iter().collect();
    rows.sort_by_key(|r| std::cmp::Reverse(r.1));
    println!("\n{:>10} {:>7}  image", "samples", "%");
    for (cookie, n) in rows.iter().take(10) {
        let name = names.get(cookie).map(String::as_str).unwrap_or("?");
        println!(
            "{:>10} {:>6.2}%  {}",
            n,
            100.0 * *n as f64 / total.max(1) as f64,
            name
        );
    }
    Ok(if status.success() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(status.code().unwrap_or(1) as u8)
    })
}
