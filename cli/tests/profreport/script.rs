//! `--format script` against `perf script` on the same perf.data, and
//! against our own `--format collapsed` through FlameGraph's
//! stackcollapse-perf.pl parsing rules. Live: skipped with a printed
//! reason when perf events cannot be opened (or there is no perf, no C
//! compiler), unless PROFKIT_REQUIRE_PERF=1, where that is a failure.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use profkit_testsupport::{perf_ok, skip};

use crate::live::{build_workload, fix_mmap2_build_id_bits, perf_record};
use crate::util::*;

/// perf script's fields, as `--format script` writes them.
const FIELDS: &str = "comm,pid,tid,cpu,time,event,ip,sym,dso";

/// One sample block: the header's fields and the frames (ip, sym, dso).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Block {
    time: String,
    cpu: String,
    comm: String,
    pid: String,
    tid: String,
    event: String,
    frames: Vec<(String, String, String)>,
}

/// Parses perf script's text with call stacks: a header line, frame
/// lines (a tab, the ip, the symbol, the binary in parentheses), a blank
/// line.
fn blocks(text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut cur: Option<Block> = None;
    for line in text.lines() {
        if line.is_empty() {
            out.extend(cur.take());
        } else if let Some(f) = line.strip_prefix('\t') {
            let b = cur
                .as_mut()
                .unwrap_or_else(|| panic!("frame before a header: {line:?}"));
            let f = f.trim_start();
            let (ip, rest) = f.split_once(' ').expect(f);
            let open = rest.rfind(" (").expect(rest);
            let dso = rest[open + 2..].strip_suffix(')').expect(rest);
            b.frames
                .push((ip.to_owned(), rest[..open].to_owned(), dso.to_owned()));
        } else {
            assert!(cur.is_none(), "two headers: {line:?}");
            // COMM PID/TID [CPU] TIME: EVENT: (COMM may hold spaces).
            let (head, event) = line
                .trim_end()
                .trim_end_matches(':')
                .rsplit_once(": ")
                .expect(line);
            let mut w: Vec<&str> = head.split_whitespace().collect();
            let time = w.pop().expect(line).to_owned();
            let cpu = w.pop().expect(line).to_owned();
            let ids = w.pop().expect(line);
            let (pid, tid) = ids.split_once('/').expect(line);
            cur = Some(Block {
                time,
                cpu,
                comm: w.join(" "),
                pid: pid.to_owned(),
                tid: tid.to_owned(),
                event: event.to_owned(),
                frames: Vec::new(),
            });
        }
    }
    out.extend(cur);
    out
}

/// Records `cmd` with `perf record -g` into `dir/perf.data` (two
/// processes at once, so samples of both CPUs interleave); None after a
/// skip.
fn record_two(perf: &str, dir: &Path) -> Option<PathBuf> {
    let cg = build_workload(dir, "callgraph", &[])?;
    let data = dir.join("perf.data");
    let cmd = format!("{0} 40 & {0} 40; wait", cg.display());
    let args = [
        "-q",
        "-e",
        "cpu-clock",
        "-F",
        "4000",
        "-g",
        "--sample-cpu",
        "--no-bpf-event",
        "-o",
        data.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        &cmd,
    ];
    perf_record(perf, dir, &data, &args).then_some(data)
}

/// `perf script -F FIELDS` on `data` (again on a copy with MMAP2
/// build-id bits fixed if perf fails on it).
fn perf_script(perf: &str, data: &Path) -> Option<String> {
    perf_script_with(perf, data, &["-F", FIELDS])
}

/// Every name each thread had, by tid, from perf's task events: the name
/// perf shows on each (a forked thread's inherited name on its FORK) and
/// the names COMM records give.
fn thread_names(perf: &str, data: &Path) -> Option<BTreeMap<String, Vec<String>>> {
    let out = perf_script_with(perf, data, &["--show-task-events", "-F", "comm,tid,time"])?;
    Some(parse_thread_names(&out))
}

/// [`thread_names`] of `perf script --show-task-events -F comm,tid,time`.
fn parse_thread_names(out: &str) -> BTreeMap<String, Vec<String>> {
    let mut names: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in out.lines() {
        let Some(at) = line.find(" PERF_RECORD_") else {
            continue;
        };
        let head: Vec<&str> = line[..at].split_whitespace().collect();
        if head.len() < 3 {
            continue;
        }
        let tid = head[head.len() - 2].to_owned();
        let comm = head[..head.len() - 2].join(" ");
        // `PERF_RECORD_FORK(PID:TID):(PPID:PTID)`, on the parent's line:
        // the child starts with the parent's name.
        if let Some(child) = line[at..]
            .strip_prefix(" PERF_RECORD_FORK(")
            .and_then(|r| r.split_once(')'))
            .and_then(|(ids, _)| ids.split_once(':'))
        {
            names
                .entry(child.1.to_owned())
                .or_default()
                .push(comm.clone());
        }
        let v = names.entry(tid).or_default();
        v.push(comm);
        // `PERF_RECORD_COMM exec: NAME:PID/TID`
        if let Some(rest) = line[at..].split_once(": ").map(|(_, r)| r) {
            if line[at..].starts_with(" PERF_RECORD_COMM") {
                if let Some((name, _)) = rest.rsplit_once(':') {
                    v.push(name.to_owned());
                }
            }
        }
    }
    names
}

#[test]
fn thread_names_are_read_from_perf_task_events() {
    let out = "       perf-exec     0     0.000000: PERF_RECORD_COMM: perf-exec:9049/9049
              sh  9049 62307.466844: PERF_RECORD_COMM exec: sh:9049/9049
              sh  9049 62307.467615: PERF_RECORD_FORK(9051:9051):(9049:9049)
           sleep  9051 62307.467875: PERF_RECORD_COMM exec: sleep:9051/9051
           sleep  9051 62307.470000:
           sleep  9051 62307.478714: PERF_RECORD_EXIT(9051:9051):(9049:9049)
";
    let names = parse_thread_names(out);
    let has = |tid: &str, name: &str| names.get(tid).is_some_and(|n| n.iter().any(|x| x == name));
    assert!(has("9051", "sh"), "{names:?}");
    assert!(has("9051", "sleep"), "{names:?}");
    assert!(has("9049", "sh") && !has("9049", "sleep"), "{names:?}");
}

fn perf_script_with(perf: &str, data: &Path, args: &[&str]) -> Option<String> {
    let run = |data: &Path| {
        Command::new(perf)
            .arg("script")
            .args(args)
            .arg("-i")
            .arg(data)
            .output()
            .unwrap()
    };
    let mut out = run(data);
    if !out.status.success() {
        out = run(&fix_mmap2_build_id_bits(data));
    }
    if !out.status.success() {
        skip(format!(
            "perf script failed on {}: {}",
            data.display(),
            String::from_utf8_lossy(&out.stderr)
        ));
        return None;
    }
    Some(String::from_utf8(out.stdout).expect("perf script's UTF-8"))
}

fn perf_path() -> Option<String> {
    let perf = std::env::var("PERF").unwrap_or_else(|_| "/usr/bin/perf".into());
    if !Path::new(&perf).exists() {
        skip(format!("no perf at {perf} (set PERF=...)"));
        return None;
    }
    perf_ok().then_some(perf)
}

#[test]
fn script_of_an_imported_perf_data_is_what_perf_script_prints() {
    let _rec = recording();
    let Some(perf) = perf_path() else {
        return;
    };
    let d = tempdir();
    let Some(data) = record_two(&perf, d.path()) else {
        return;
    };
    let Some(theirs) = perf_script(&perf, &data) else {
        return;
    };
    let run = profreport(&["--import", data.to_str().unwrap(), "--format", "script"]).expect(0);
    let (theirs, ours) = (blocks(&theirs), blocks(&run.stdout));
    eprintln!(
        "{} samples by perf script, {} by profreport",
        theirs.len(),
        ours.len()
    );
    assert!(theirs.len() > 500, "too few samples: {}", theirs.len());
    assert_eq!(ours.len(), theirs.len(), "every sample, once");
    if theirs.iter().all(|b| b.cpu == theirs[0].cpu) {
        eprintln!("note: the two processes ran on one CPU (a busy machine): nothing interleaved");
    }

    // Names: every frame's symbol and binary, and its ip (perf's
    // map-relative ip for user code, the address for the kernel). Three
    // known differences, counted: where perf found a symbol our
    // symbolizer did not (perf also reads its build-id cache), ours says
    // [unknown] in the same binary at the same ip; of a symbol's aliases
    // perf shows the longest name (fstatat64, not fstatat) where ours may
    // show another; and a caller perf could not place ends our stack
    // there, as `0 [unknown] ([unknown])` (the sync stage drops the rest
    // of such a context: stack data, not callers), as does a user caller
    // of a sample taken inside execve (perf resolves it in the old
    // program's mappings).
    let (mut frames, mut tolerated, mut cut) = (0usize, 0usize, 0usize);
    let same_frames =
        |a: &Block, b: &Block, frames: &mut usize, tolerated: &mut usize, cut: &mut usize| {
            let unplaced = |f: &(String, String, String)| f.1 == "[unknown]" && f.2 == "[unknown]";
            for (i, x) in a.frames.iter().enumerate() {
                *frames += 1;
                let Some(y) = b.frames.get(i) else {
                    return false;
                };
                if x == y {
                    // Perf printed the unplaced frame too, then went on
                    // with what follows it; ours ends there.
                    if unplaced(y)
                        && y.0 == "0"
                        && i + 1 == b.frames.len()
                        && a.frames.len() > b.frames.len()
                    {
                        *cut += 1;
                        return true;
                    }
                    continue;
                }
                // Ours could not place it (a stray frame, or one taken
                // across an exec): the rest of the stack is left out.
                if unplaced(y) && y.0 == "0" && i + 1 == b.frames.len() {
                    *cut += 1;
                    return true;
                }
                if unplaced(x) && unplaced(y) && y.0 == "0" {
                    continue;
                }
                if x.0 == y.0 && x.2 == y.2 {
                    *tolerated += 1;
                    continue;
                }
                return false;
            }
            a.frames.len() == b.frames.len()
        };

    // An import keeps perf's nanoseconds (format version 6): every block
    // is perf's, in perf's order (samples with the same time on two CPUs
    // in either order).
    assert!(
        !run.stderr.contains("before per-sample times"),
        "an import of a perf.data file with times gave samples without: {}",
        run.stderr
    );
    let mut renamed = 0usize;
    let mut names: Option<BTreeMap<String, Vec<String>>> = None;
    let mut i = 0;
    while i < theirs.len() {
        let t = &theirs[i].time;
        let j = i + theirs[i..].iter().take_while(|b| &b.time == t).count();
        let mut a: Vec<&Block> = theirs[i..j].iter().collect();
        let mut b: Vec<&Block> = ours[i..j.min(ours.len())].iter().collect();
        a.sort();
        b.sort();
        assert_eq!(a.len(), b.len(), "at sample {i} (time {t})");
        for (x, y) in a.iter().zip(&b) {
            let heads = |k: &Block| {
                (
                    k.time.clone(),
                    k.cpu.clone(),
                    k.pid.clone(),
                    k.tid.clone(),
                    k.event.clone(),
                )
            };
            assert_eq!(
                heads(x),
                heads(y),
                "sample {i}: perf's\n{x:#?}\nours\n{y:#?}"
            );
            // A sample taken inside execve, at the rename: perf names
            // it by the COMM record's time, ours by where the rename
            // sits in its chunk; either way both are the thread's
            // names, one before and one after.
            if x.comm != y.comm {
                // (The name before may be on no sample of perf's: a
                // thread forked and renamed by exec at once.)
                let both = theirs.iter().any(|b| b.tid == x.tid && b.comm == y.comm)
                    || names
                        .get_or_insert_with(|| thread_names(&perf, &data).unwrap_or_default())
                        .get(&x.tid)
                        .is_some_and(|n| n.contains(&y.comm));
                assert!(both, "sample {i}: perf's\n{x:#?}\nours\n{y:#?}");
                renamed += 1;
            }
            assert!(
                same_frames(x, y, &mut frames, &mut tolerated, &mut cut),
                "sample {i}: perf's\n{x:#?}\nours\n{y:#?}"
            );
        }
        i = j;
    }
    eprintln!(
        "{frames} frames, {tolerated} named otherwise by perf, {cut} stacks cut at an unplaced caller"
    );
    assert!(
        tolerated * 100 <= frames,
        "{tolerated} of {frames} frames differ from perf's"
    );
    assert!(
        cut * 50 <= ours.len(),
        "{cut} of {} stacks cut short of perf's",
        ours.len()
    );
    eprintln!("{renamed} samples in execve named by the other side of the rename");
    assert!(renamed * 100 <= ours.len(), "{renamed} samples renamed");
    // Ours is in time order.
    let t: Vec<f64> = ours.iter().map(|b| b.time.parse().unwrap()).collect();
    assert!(t.windows(2).all(|w| w[0] <= w[1]), "not in time order");
}

/// FlameGraph's stackcollapse-perf.pl, its default options, on perf
/// script's text: a header line per sample (`^(\S.+?)\s+(\d+)\/*(\d+)*\s+`,
/// the event `:\s*(\d+)*\s+(\S+):\s*$`), frame lines
/// (`^\s*(\w+)\s*(.+) \((\S*)\)`), a blank line ending the sample; the
/// command (spaces to `_`) first, frames outermost first, `+0x..` offsets
/// stripped, `[unknown]` named `[binary]` after its binary's file name,
/// `;` to `:`, everything from the first `(` dropped (but
/// `(anonymous namespace)` and Go methods), quotes dropped; only the first
/// event type.
fn stackcollapse_perf(text: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    let mut stack: Vec<String> = Vec::new();
    let mut pname: Option<String> = None;
    let mut event_filter: Option<String> = None;
    for line in text.lines() {
        if line.starts_with('#') {
            continue;
        }
        if line.is_empty() {
            if let Some(p) = pname.take() {
                if !stack.is_empty() || !p.is_empty() {
                    stack.insert(0, p);
                    *out.entry(stack.join(";")).or_insert(0) += 1;
                }
            }
            stack.clear();
            continue;
        }
        if let Some((comm, _pid, _tid)) = header_regex(line) {
            // `:\s*(\d+)*\s+(\S+):\s*$`: the event.
            let event = line
                .trim_end()
                .strip_suffix(':')
                .and_then(|l| l.rsplit_once(char::is_whitespace))
                .map(|(_, e)| e.to_owned());
            if let Some(e) = event {
                match &event_filter {
                    None => event_filter = Some(e),
                    Some(f) if *f != e => {
                        pname = None;
                        continue;
                    }
                    _ => {}
                }
            }
            pname = Some(comm.replace(' ', "_"));
        } else if let Some((pc, rawfunc, module)) = stack_regex(line) {
            if pname.is_none() {
                continue;
            }
            let _ = pc;
            let mut func = strip_offset(rawfunc).to_owned();
            if func.starts_with('(') {
                continue;
            }
            if func == "[unknown]" {
                func = if module != "[unknown]" {
                    format!("[{}]", module.rsplit('/').next().unwrap_or(module))
                } else {
                    "[unknown]".to_owned()
                };
            }
            func = func.replace(';', ":");
            let go = func.find(".(").is_some_and(|i| func[i..].contains(")."));
            if !go {
                let mut from = 0;
                while let Some(i) = func[from..].find('(') {
                    let at = from + i;
                    if func[at..].starts_with("(anonymous namespace)") {
                        from = at + 1;
                        continue;
                    }
                    func.truncate(at);
                    break;
                }
            }
            func.retain(|c| c != '"' && c != '\'');
            stack.insert(0, func);
        } else {
            panic!("stackcollapse-perf.pl: unrecognized line: {line:?}");
        }
    }
    out
}

/// `^(\S.+?)\s+(\d+)\/*(\d+)*\s+`: the shortest command (at least two
/// characters, the first not a space) followed by whitespace, digits,
/// optional `/digits`, whitespace.
fn header_regex(line: &str) -> Option<(&str, &str, Option<&str>)> {
    let b = line.as_bytes();
    if b.first().is_none_or(|c| c.is_ascii_whitespace()) {
        return None;
    }
    // Lazy: try each end of the command from the shortest.
    for end in 2..b.len() {
        let mut i = end;
        let ws = b[i..]
            .iter()
            .take_while(|c| c.is_ascii_whitespace())
            .count();
        if ws == 0 {
            continue;
        }
        i += ws;
        let d1 = b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
        if d1 == 0 {
            continue;
        }
        let pid = &line[i..i + d1];
        i += d1;
        let slashes = b[i..].iter().take_while(|&&c| c == b'/').count();
        i += slashes;
        let d2 = b[i..].iter().take_while(|c| c.is_ascii_digit()).count();
        let tid = (d2 > 0).then(|| &line[i..i + d2]);
        i += d2;
        if b.get(i).is_some_and(|c| c.is_ascii_whitespace()) {
            return Some((&line[..end], pid, tid));
        }
    }
    None
}

/// `^\s*(\w+)\s*(.+) \((\S*)\)`: an ip, the symbol (greedy), and the
/// binary in parentheses (no whitespace in it).
fn stack_regex(line: &str) -> Option<(&str, &str, &str)> {
    let t = line.trim_start();
    let w = t
        .char_indices()
        .find(|&(_, c)| !(c.is_alphanumeric() || c == '_'))
        .map_or(t.len(), |(i, _)| i);
    if w == 0 {
        return None;
    }
    let pc = &t[..w];
    let rest = t[w..].trim_start();
    // Greedy `(.+)`: the last " (" whose `\S*)` follows.
    let mut best = None;
    for (i, _) in rest.match_indices(" (") {
        let tail = &rest[i + 2..];
        if let Some(close) = tail.find(')') {
            if !tail[..close].contains(char::is_whitespace) && i >= 1 {
                best = Some((i, &tail[..close]));
            }
        }
    }
    let (i, module) = best?;
    Some((pc, &rest[..i], module))
}

/// `s/\+0x[\da-f]+$//`.
fn strip_offset(f: &str) -> &str {
    match f.rfind("+0x") {
        Some(i)
            if i + 3 < f.len()
                && f[i + 3..]
                    .bytes()
                    .all(|c| c.is_ascii_digit() || (b'a'..=b'f').contains(&c)) =>
        {
            &f[..i]
        }
        _ => f,
    }
}

#[test]
fn stackcollapse_rules_parse_perf_scripts_own_lines() {
    assert_eq!(
        header_regex("lto cgu.12 23503/25520 [001] 26823.114234: cpu-clock: "),
        Some(("lto cgu.12", "23503", Some("25520")))
    );
    assert_eq!(
        header_regex("            busy 25461/25461 [001] 26819.6: cpu-clock:  ffff x (y)"),
        None,
        "a header must not start with a space"
    );
    assert_eq!(
        stack_regex("\t    7f5bc9bf35d8 llvm::X<a, b>::run(int) (/usr/lib/libLLVM.so)"),
        Some((
            "7f5bc9bf35d8",
            "llvm::X<a, b>::run(int)",
            "/usr/lib/libLLVM.so"
        ))
    );
    assert_eq!(
        stack_regex("\t 0 [unknown] ([unknown])"),
        Some(("0", "[unknown]", "[unknown]"))
    );
    let text = "busy 1/1 [000] 1.000001: cpu-clock: \n\
                \t 10 leaf+0x4 (/tmp/busy)\n\
                \t 20 [unknown] (/usr/lib/libc.so.6)\n\
                \t 30 ns::f(int)::{lambda()#1} (/tmp/busy)\n\
                \n\
                my comm 1/2 [001] 1.000002: cpu-clock: \n\
                \t 10 leaf (/tmp/busy)\n\
                \n";
    let folded = stackcollapse_perf(text);
    assert_eq!(
        folded.into_iter().collect::<Vec<_>>(),
        [
            ("busy;ns::f;[libc.so.6];leaf".to_owned(), 1),
            ("my_comm;leaf".to_owned(), 1)
        ]
    );
}

/// Folded lines without their first element (the command: stackcollapse
/// takes each sample's thread name at the time, our collapsed the
/// process's last name), merged.
fn without_command(m: &BTreeMap<String, u64>) -> BTreeMap<Vec<String>, u64> {
    let mut out = BTreeMap::new();
    for (line, &n) in m {
        let frames: Vec<String> = line.split(';').skip(1).map(str::to_owned).collect();
        *out.entry(frames).or_insert(0) += n;
    }
    out
}

#[test]
fn script_folded_by_stackcollapse_rules_is_our_collapsed() {
    let _rec = recording();
    let Some(perf) = perf_path() else {
        return;
    };
    let d = tempdir();
    let Some(data) = record_two(&perf, d.path()) else {
        return;
    };
    let data = data.to_str().unwrap();
    let script = profreport(&["--import", data, "--format", "script"]).expect(0);
    let collapsed = profreport(&["--import", data, "--format", "collapsed"]).expect(0);
    let ours: BTreeMap<String, u64> = collapsed
        .stdout
        .lines()
        .map(|l| {
            let (s, n) = l.rsplit_once(' ').expect(l);
            (s.to_owned(), n.parse().expect(l))
        })
        .collect();
    let folded = stackcollapse_perf(&script.stdout);
    let total = |m: &BTreeMap<String, u64>| m.values().sum::<u64>();
    eprintln!(
        "{} folded lines ({} samples) from script, {} ({} samples) collapsed",
        folded.len(),
        total(&folded),
        ours.len(),
        total(&ours)
    );
    assert!(total(&ours) > 500);
    assert_eq!(total(&folded), total(&ours), "samples");
    let (mut a, mut b) = (without_command(&folded), without_command(&ours));
    // The stream names a caller whose call instruction is in no symbol by
    // its return address (as perf does); the report leaves it as its
    // binary, `[libc.so.6]`. Such a stack matches a collapsed stack that
    // has a bracketed frame at that place.
    let exact: Vec<Vec<String>> = a.keys().filter(|k| b.contains_key(*k)).cloned().collect();
    for k in exact {
        let (x, y) = (a[&k], b[&k]);
        let m = x.min(y);
        for (map, v) in [(&mut a, x), (&mut b, y)] {
            if v == m {
                map.remove(&k);
            } else {
                map.insert(k.clone(), v - m);
            }
        }
    }
    let mut renamed = 0u64;
    for (k, n) in std::mem::take(&mut a) {
        let mut left = n;
        for (c, m) in b.iter_mut() {
            let fits =
                c.len() == k.len() && c.iter().zip(&k).all(|(c, k)| c == k || c.starts_with('['));
            if fits && *m > 0 && left > 0 {
                let t = left.min(*m);
                left -= t;
                *m -= t;
                renamed += t;
            }
        }
        if left > 0 {
            a.insert(k, left);
        }
    }
    b.retain(|_, m| *m > 0);
    assert!(
        a.is_empty() && b.is_empty(),
        "folded from script only: {a:#?}\ncollapsed only: {b:#?}"
    );
    assert!(renamed * 100 <= total(&ours), "{renamed} samples renamed");
}

#[test]
fn stream_formats_refuse_report_shapes() {
    for (format, flag, why) in [
        ("script", "--timeline", "already in time order"),
        ("jsonl", "-c", "not a report of rows"),
        ("script", "--separate=cpu", "not a report of rows"),
        ("jsonl", "--off-cpu", "items of their own"),
        ("script", "--inline", "without inlined functions"),
        ("firefox", "--children", "not a report of rows"),
    ] {
        let run = on_fixture("callgraph", &["--format", format, flag]).expect(2);
        assert!(
            run.stderr
                .contains(&format!("--format {format} cannot be combined with"))
                && run.stderr.contains(why),
            "{format} {flag}: {}",
            run.stderr
        );
    }
    let run = on_fixture("callgraph", &["--format", "scrpt"]).expect(2);
    assert!(
        run.stderr.contains("script, jsonl, firefox, speedscope"),
        "{}",
        run.stderr
    );
}

#[test]
fn script_and_jsonl_write_every_sample_to_o_file_and_say_how_times_were_placed() {
    let d = tempdir();
    let total = on_fixture("callgraph", &["--format", "json"])
        .expect(0)
        .json()["total_samples"]
        .as_u64()
        .unwrap();
    assert!(total > 100, "{total}");
    let jsonl = d.path().join("s.jsonl");
    let run = on_fixture(
        "callgraph",
        &["--format", "jsonl", "-o", jsonl.to_str().unwrap()],
    )
    .expect(0);
    assert!(run.stdout.is_empty(), "{}", run.stdout);
    // A session written before per-sample times says so, once.
    assert_eq!(
        run.stderr
            .matches("written before per-sample times")
            .count(),
        1,
        "{}",
        run.stderr
    );
    let text = std::fs::read_to_string(&jsonl).unwrap();
    let (mut samples, mut last, mut summary) = (0u64, 0u64, None);
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect(line);
        match v["type"].as_str() {
            Some("sample") => {
                samples += 1;
                let t = v["time_ns"].as_u64().unwrap();
                assert!(t >= last, "time order: {line}");
                last = t;
                assert_eq!(v["time_exact"], false);
                assert!(!v["stack"].as_array().unwrap().is_empty());
                assert_eq!(v["stack"][0]["symbol"], v["symbol"]);
            }
            Some("summary") => summary = Some(v),
            Some("lost" | "part" | "off_cpu") => {}
            other => panic!("{other:?}: {line}"),
        }
    }
    assert_eq!(samples, total);
    let summary = summary.expect("a summary line");
    assert_eq!(summary["samples"].as_u64(), Some(total));
    assert_eq!(summary["round_middle"].as_u64(), Some(total));
    let script = d.path().join("s.txt");
    on_fixture(
        "callgraph",
        &["--format", "script", "-o", script.to_str().unwrap()],
    )
    .expect(0);
    let text = std::fs::read_to_string(&script).unwrap();
    assert_eq!(blocks(&text).len() as u64, total);
    // A --time window holds the report's samples of that window.
    for window in ["20%-60%", "0.1,0.3"] {
        let total = on_fixture("callgraph", &["--format", "json", "--time", window])
            .expect(0)
            .json()["total_samples"]
            .as_u64()
            .unwrap();
        let run = on_fixture("callgraph", &["--format", "jsonl", "--time", window]).expect(0);
        let n = run
            .stdout
            .lines()
            .filter(|l| l.contains(r#""type":"sample""#))
            .count();
        assert_eq!(n as u64, total, "--time {window}");
        assert!(total > 0, "--time {window}");
    }
    // The same callers as the call graph's: c is called from a and b.
    let folded = stackcollapse_perf(&text);
    assert!(folded.keys().any(|k| k.ends_with(";a;c")), "{folded:#?}");
    assert!(folded.keys().any(|k| k.ends_with(";b;c")), "{folded:#?}");
}
