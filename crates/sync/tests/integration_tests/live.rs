//! Live kernel: a helper process dlopen()s a library mid-run; its samples
//! after the load resolve to the library's cookie, and the module-load
//! marker precedes them.

use crate::decode;
use profkit_eventlog::{CookieKind, Event, SessionHeader};
use profkit_perf::{EventSpec, Rate, Sampler, SamplerConfig};
use profkit_sync::{FileSink, Recorder, RecorderOptions, SyncOptions, SyncStage};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

fn cc(args: &[&str]) -> bool {
    Command::new("cc")
        .args(args)
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

#[test]
fn samples_after_dlopen_resolve_to_the_library() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let lib_c = d.join("hot.c");
    std::fs::write(
        &lib_c,
        "volatile unsigned long sink;\n\
         unsigned long hot_spin(unsigned long n) { unsigned long x = 0; for (unsigned long i = 0; i < n; i++) { x = x * 6364136223846793005UL + i; } sink = x; return x; }\n",
    )
    .unwrap();
    let main_c = d.join("main.c");
    std::fs::write(
        &main_c,
        "#include <dlfcn.h>\n#include <stdio.h>\n#include <unistd.h>\n\
         int main(int argc, char **argv) { usleep(300000);\n\
         void *h = dlopen(argv[1], RTLD_NOW); if (!h) { fprintf(stderr, \"%s\\n\", dlerror()); return 2; }\n\
         unsigned long (*f)(unsigned long) = (unsigned long (*)(unsigned long))dlsym(h, \"hot_spin\");\n\
         f(400000000UL); return 0; }\n",
    )
    .unwrap();
    let lib = d.join("libhot.so");
    let exe = d.join("dlopener");
    if !cc(&[
        "-O1",
        "-shared",
        "-fPIC",
        "-Wl,--build-id",
        "-o",
        lib.to_str().unwrap(),
        lib_c.to_str().unwrap(),
    ]) || !cc(&[
        "-O1",
        "-o",
        exe.to_str().unwrap(),
        main_c.to_str().unwrap(),
        "-ldl",
    ]) {
        panic!("cc could not build the dlopen fixture");
    }

    let mut config = SamplerConfig::new(EventSpec::parse("cpu-clock").unwrap());
    config.rate = Rate::Frequency(1000);
    let sampler = match Sampler::open(&config) {
        Ok(s) => s,
        Err(e) => {
            if std::env::var("PROFKIT_REQUIRE_PERF").as_deref() == Ok("1") {
                panic!("PROFKIT_REQUIRE_PERF=1 but perf events cannot be opened: {e}");
            }
            eprintln!("SKIP: perf events unavailable here: {e}");
            return;
        }
    };
    let layout = sampler.layout();
    let mut stage = SyncStage::new(SyncOptions {
        layout,
        paths: Default::default(),
        use_procfs: true,
    });
    stage.seed_from_proc();
    let sink = FileSink::create(d.join("session.pkl"), SessionHeader::default()).unwrap();
    let mut rec =
        Recorder::new(sampler, stage, Box::new(sink), RecorderOptions::default()).unwrap();
    rec.source_mut().enable().unwrap();
    let mut child = Command::new(&exe).arg(&lib).spawn().unwrap();
    let pid = child.id();
    loop {
        std::thread::sleep(Duration::from_millis(250));
        rec.round();
        if let Some(st) = child.try_wait().unwrap() {
            assert!(st.success(), "the fixture failed: {st}");
            break;
        }
    }
    rec.stop().unwrap();

    let s = decode(&d.join("session.pkl"));
    let lib_cookie = s
        .markers
        .iter()
        .find_map(|(_, m)| match m {
            Event::CookieDef(e) if e.kind == CookieKind::User && Path::new(&e.path) == lib => {
                Some(e.cookie)
            }
            _ => None,
        })
        .expect("the library's cookie is defined");
    let ours: Vec<_> = s
        .samples
        .iter()
        .filter(|x| x.pid == pid && !x.kernel)
        .collect();
    let in_lib = ours.iter().filter(|x| x.cookie == lib_cookie).count();
    assert!(
        in_lib as f64 >= ours.len() as f64 * 0.8 && in_lib > 50,
        "{in_lib} of {} user samples of the helper in libhot.so",
        ours.len()
    );
    // The module-load marker of the library comes before its first sample.
    let load_seen = std::cell::Cell::new(false);
    let mut ok = false;
    let r = profkit_eventlog::SessionReader::open(d.join("session.pkl")).unwrap();
    'outer: for c in r.chunks() {
        let mut first_sample_before_load = false;
        r.for_each_sample(
            c,
            |x| {
                if x.cookie == lib_cookie && !load_seen.get() {
                    first_sample_before_load = true;
                }
                if x.cookie == lib_cookie && load_seen.get() {
                    ok = true;
                }
            },
            |m| {
                if matches!(m, Event::ModuleLoad { cookie, pid: Some(p), .. } if cookie == lib_cookie && p == pid) {
                    load_seen.set(true);
                }
            },
        )
        .unwrap();
        assert!(
            !first_sample_before_load,
            "a library sample came before its module-load marker"
        );
        if ok {
            break 'outer;
        }
    }
    assert!(ok);
    // The library's offsets fall inside the file.
    let len = std::fs::metadata(&lib).unwrap().len();
    assert!(ours
        .iter()
        .filter(|x| x.cookie == lib_cookie)
        .all(|x| x.offset < len));
}
