//! Live, root: debug files from a real debuginfod server (elfutils',
//! Debian's `debuginfod` package) for a stripped program with two static
//! hot functions (2:1), recorded once:
//! - without `DEBUGINFOD_URLS` it is unnamed (and the summary line says how
//!   to fetch), with its debug file under `--debug-dir` named;
//! - through the server it is named with the same rows (names, samples,
//!   source lines) as through the local debug file; the cold report says
//!   what it fetched, a warm one sends the server no request (its
//!   `/metrics`), `--offline` none either;
//! - `--annotate` shows the source text the server serves (the server sees
//!   the sources in a mount namespace of its own; the report's machine does
//!   not have them at the path DWARF records);
//! - a server that lies (another build-id) is refused and the next one
//!   asked; a server that never answers costs `DEBUGINFOD_TIMEOUT`;
//!   `DEBUGINFOD_MAXSIZE` holds;
//! - `profctl archive` packs the fetched debug file, and a report of the
//!   unpacked archive names the functions with no server at all;
//! - https with the system's roots: a certificate of a CA the test made is
//!   trusted with that CA as `SSL_CERT_FILE`, refused without;
//! - a throwaway user's program claiming the build-id is not named with the
//!   genuine debug file.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::*;
use profkit_testsupport::perf_ok;

/// A running `debuginfod -F DIR`, killed when dropped.
struct Server {
    child: Child,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Requests of `kind` (`debuginfo`, `source`, …) the server has had.
    fn requests(&self, kind: &str) -> u64 {
        let (_, body) = http_get(self.port, "/metrics");
        let want = format!("http_requests_total{{type=\"{kind}\"}} ");
        String::from_utf8_lossy(&body)
            .lines()
            .find_map(|l| l.strip_prefix(&want)?.trim().parse::<f64>().ok())
            .map_or(0, |n| n as u64)
    }
}

/// A port free right now.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `GET path` on 127.0.0.1:`port`: the status and the body.
fn http_get(port: u16, path: &str) -> (u16, Vec<u8>) {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return (0, Vec::new());
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
    let _ = write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
    let mut all = Vec::new();
    let _ = s.read_to_end(&mut all);
    let head_end = all.windows(4).position(|w| w == b"\r\n\r\n");
    let status = std::str::from_utf8(&all[..head_end.unwrap_or(0)])
        .ok()
        .and_then(|h| h.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0);
    (status, all.split_off(head_end.map_or(all.len(), |e| e + 4)))
}

/// Starts debuginfod over `dir` (its database in `db_dir`), in a mount
/// namespace where `sources` is mounted on `served`; waits until it serves
/// `ready` (a debuginfo path).
fn start_server(dir: &Path, db_dir: &Path, sources: &Path, served: &Path, ready: &str) -> Server {
    let port = free_port();
    let script = format!(
        "mount --bind '{}' '{}' && exec debuginfod -p {port} -d '{}' -F '{}'",
        sources.display(),
        served.display(),
        db_dir.join("db.sqlite").display(),
        dir.display()
    );
    let child = Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c", &script])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("starting debuginfod (apt-get install debuginfod; scripts/test.sh does)");
    let server = Server { child, port };
    let deadline = Instant::now() + Duration::from_secs(60);
    while http_get(port, ready).0 != 200 {
        assert!(
            Instant::now() < deadline,
            "debuginfod on port {port} did not serve {ready} within 60 s"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    server
}

/// A server that answers every request with `body` (200), counting them.
fn liar(body: Vec<u8>) -> (u16, std::sync::Arc<std::sync::atomic::AtomicU64>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let count = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let n = count.clone();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            n.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let mut buf = [0u8; 4096];
            let _ = s.read(&mut buf);
            let _ = write!(
                s,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                body.len()
            );
            let _ = s.write_all(&body);
        }
    });
    (port, count)
}

/// A server that accepts connections and never answers.
fn mute() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in l.incoming() {
            held.push(s);
        }
    });
    port
}

/// profreport with `args` and the `DEBUGINFOD_*` variables `env` (the
/// others removed).
fn report_env(args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut c = Command::new(PROFREPORT);
    c.args(args).current_dir(cli_dir());
    for v in [
        "DEBUGINFOD_URLS",
        "DEBUGINFOD_CACHE_PATH",
        "DEBUGINFOD_TIMEOUT",
        "DEBUGINFOD_MAXSIZE",
        "DEBUGINFOD_MAXTIME",
        "DEBUGINFOD_VERBOSE",
        "PROFKIT_SESSION_DIR",
    ] {
        c.env_remove(v);
    }
    c.envs(env.iter().copied());
    let o = c.output().expect("running profreport");
    Run {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// Samples per symbol of the binary `image`'s rows (JSON, `-l`).
fn by_symbol(v: &serde_json::Value, image: &str) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for r in rows(v) {
        let img = r["image"].as_str().unwrap_or_default();
        if !img.ends_with(image) {
            continue;
        }
        let sym = r["symbol"].as_str().unwrap_or("(none)").to_owned();
        *out.entry(sym).or_default() += r["samples"].as_u64().unwrap_or(0);
    }
    out
}

/// hot_two_thirds' share of the two hot functions, percent.
fn share(m: &BTreeMap<String, u64>) -> f64 {
    let a = m.get("hot_two_thirds").copied().unwrap_or(0) as f64;
    let b = m.get("hot_one_third").copied().unwrap_or(0) as f64;
    100.0 * a / (a + b).max(1.0)
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn run_ok(cmd: &mut Command) {
    let st = cmd.status().expect("running a tool");
    assert!(st.success(), "{cmd:?}: {st}");
}

#[test]
fn live_a_stripped_binary_is_named_through_a_debuginfod_server() {
    let _rec = recording();
    if !perf_ok() {
        return;
    }
    if Command::new("debuginfod")
        .arg("--version")
        .output()
        .is_err()
    {
        profkit_testsupport::skip("no debuginfod (apt-get install debuginfod)");
        return;
    }
    let d = tempdir();
    let dir = d.path();
    // The source where it is built, and the path DWARF records for it
    // (empty here: only the server's namespace sees the file there).
    let src = dir.join("src");
    let served = dir.join("served");
    for p in [&src, &served, &dir.join("srv"), &dir.join("db")] {
        std::fs::create_dir_all(p).unwrap();
    }
    std::fs::copy(
        testdata().join("workloads/stripped.c"),
        src.join("stripped.c"),
    )
    .unwrap();
    let unstripped = dir.join("unstripped");
    if !compile(
        Command::new("cc")
            .args(["-O1", "-g", "-fno-omit-frame-pointer", &unique_build_id()])
            .arg(format!(
                "-fdebug-prefix-map={}={}",
                src.display(),
                served.display()
            ))
            .arg("-o")
            .arg(&unstripped)
            .arg(src.join("stripped.c")),
        "C compiler (cc)",
    ) {
        return;
    }
    // The server's directory holds the debug file only; the program run
    // is stripped of everything.
    let debug = dir.join("srv/stripped.debug");
    run_ok(
        Command::new("objcopy")
            .arg("--only-keep-debug")
            .arg(&unstripped)
            .arg(&debug),
    );
    let bin = dir.join("stripped");
    run_ok(
        Command::new("strip")
            .arg("--strip-all")
            .arg("-o")
            .arg(&bin)
            .arg(&unstripped),
    );
    let id = build_id_of(&bin);
    assert_eq!(id, build_id_of(&debug), "the debug file is the binary's");
    let h = hex(&id);
    // The same debug file under a local debug dir, for comparison.
    let local = dir.join("debug/.build-id").join(&h[..2]);
    std::fs::create_dir_all(&local).unwrap();
    std::fs::copy(&debug, local.join(format!("{}.debug", &h[2..]))).unwrap();
    std::fs::remove_file(&unstripped).unwrap();

    let server = start_server(
        &dir.join("srv"),
        &dir.join("db"),
        &src,
        &served,
        &format!("/buildid/{h}/debuginfo"),
    );
    // The session: ~1.5 s of the stripped program.
    crate::live::record(dir, &[bin.to_str().unwrap(), "150"]);
    let s = dir.join("s");
    let s = s.to_str().unwrap();
    let base = ["--session-dir", s, "--format", "json", "-l", "--debug-info"];
    let cache = |n: &str| dir.join(format!("cache-{n}"));
    let cache_str = |n: &str| cache(n).to_str().unwrap().to_owned();

    // 1. No DEBUGINFOD_URLS: unnamed, as before, and the line says how.
    let none = report_env(&base, &[("DEBUGINFOD_CACHE_PATH", &cache_str("none"))]).expect(0);
    let m = by_symbol(&none.json(), "stripped");
    assert!(
        !m.contains_key("hot_two_thirds") && !m.contains_key("hot_one_third"),
        "{m:?}"
    );
    assert!(
        none.stderr.contains("set DEBUGINFOD_URLS to fetch them"),
        "{}",
        none.stderr
    );

    // 2. The local debug file: the reference.
    let mut with_dir = base.to_vec();
    let debug_root = dir.join("debug");
    with_dir.extend(["--debug-dir", debug_root.to_str().unwrap()]);
    let local_run =
        report_env(&with_dir, &[("DEBUGINFOD_CACHE_PATH", &cache_str("none"))]).expect(0);
    let local_v = local_run.json();
    let reference = by_symbol(&local_v, "stripped");
    let total: u64 = reference.values().sum();
    assert!(total > 3000, "too few samples: {reference:?}");
    let sh = share(&reference);
    eprintln!("local debug file: {reference:?}, hot_two_thirds {sh:.2} %");
    assert!(
        (sh - 200.0 / 3.0).abs() <= 2.0,
        "share {sh:.2} % (want 66.67 ± 2)"
    );

    // 3. Through the server, cold: the same rows, lines and all.
    let before = server.requests("debuginfo");
    let env = [
        ("DEBUGINFOD_URLS", server.url()),
        ("DEBUGINFOD_CACHE_PATH", cache_str("a")),
    ];
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let cold = report_env(&base, &env).expect(0);
    let cold_v = cold.json();
    assert_eq!(by_symbol(&cold_v, "stripped"), reference);
    assert_eq!(
        lines_of(&cold_v, "stripped"),
        lines_of(&local_v, "stripped")
    );
    assert!(
        lines_of(&cold_v, "stripped")
            .iter()
            .any(|l| l.contains("stripped.c:")),
        "{:?}",
        lines_of(&cold_v, "stripped")
    );
    assert!(
        cold.stderr.contains("debuginfod: fetched 1 file"),
        "{}",
        cold.stderr
    );
    assert!(server.requests("debuginfo") > before);
    let fetched = cache("a").join(&h).join("debuginfo");
    assert_eq!(
        std::fs::read(&fetched).unwrap(),
        std::fs::read(&debug).unwrap()
    );
    assert_eq!(cold_v["debuginfod"]["named"], 1, "{cold_v:#}");

    // 4. Warm: the server hears nothing; the rows are the same.
    let before = server.requests("debuginfo");
    let warm = report_env(&base, &env).expect(0);
    assert_eq!(by_symbol(&warm.json(), "stripped"), reference);
    assert!(!warm.stderr.contains("fetched"), "{}", warm.stderr);
    assert_eq!(server.requests("debuginfo"), before, "a warm report asked");

    // 5. --offline with an empty cache: unnamed, and nothing asked.
    let mut offline = base.to_vec();
    offline.push("--offline");
    let env_off = [
        ("DEBUGINFOD_URLS", server.url()),
        ("DEBUGINFOD_CACHE_PATH", cache_str("off")),
    ];
    let env_off: Vec<(&str, &str)> = env_off.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let off = report_env(&offline, &env_off).expect(0);
    assert!(!by_symbol(&off.json(), "stripped").contains_key("hot_two_thirds"));
    assert!(off.stderr.contains("--offline"), "{}", off.stderr);
    assert_eq!(server.requests("debuginfo"), before, "--offline asked");

    // 6. --annotate: the source text comes from the server.
    let before_src = server.requests("source");
    let ann = report_env(&["--session-dir", s, "--annotate=hot_two_thirds"], &env).expect(0);
    assert!(
        ann.stdout.contains("LINE_UNIT"),
        "{}{}",
        ann.stdout,
        ann.stderr
    );
    assert!(server.requests("source") > before_src);
    // Without a server: the local debug file gives the lines, but the text
    // is only the server's; once fetched, the cache shows it offline.
    let debug_root_s = debug_root.to_str().unwrap();
    let no_src = report_env(
        &[
            "--session-dir",
            s,
            "--annotate=hot_two_thirds",
            "--debug-dir",
            debug_root_s,
        ],
        &[("DEBUGINFOD_CACHE_PATH", &cache_str("src-none"))],
    )
    .expect(0);
    assert!(
        !no_src.stdout.contains("LINE_UNIT") && no_src.stdout.contains("stripped.c"),
        "{}",
        no_src.stdout
    );
    let cached_src = report_env(
        &["--session-dir", s, "--annotate=hot_two_thirds", "--offline"],
        &[
            ("DEBUGINFOD_URLS", &server.url()),
            ("DEBUGINFOD_CACHE_PATH", &cache_str("a")),
        ],
    )
    .expect(0);
    assert!(
        cached_src.stdout.contains("LINE_UNIT"),
        "{}",
        cached_src.stdout
    );

    // 7. A server that lies (serves another binary's debug file) is
    // refused; the next server is then asked.
    let other = std::fs::read(std::env::current_exe().unwrap()).unwrap();
    let (liar_port, liar_hits) = liar(other);
    let liar_url = format!("http://127.0.0.1:{liar_port}");
    let lied = report_env(
        &base,
        &[
            ("DEBUGINFOD_URLS", &liar_url),
            ("DEBUGINFOD_CACHE_PATH", &cache_str("liar")),
        ],
    )
    .expect(0);
    assert!(liar_hits.load(std::sync::atomic::Ordering::Relaxed) > 0);
    assert!(!by_symbol(&lied.json(), "stripped").contains_key("hot_two_thirds"));
    assert!(lied.stderr.contains("refused"), "{}", lied.stderr);
    assert!(!cache("liar").join(&h).join("debuginfo").exists());
    let both = format!("{liar_url} {}", server.url());
    let honest = report_env(
        &base,
        &[
            ("DEBUGINFOD_URLS", &both),
            ("DEBUGINFOD_CACHE_PATH", &cache_str("liar")),
        ],
    )
    .expect(0);
    assert_eq!(by_symbol(&honest.json(), "stripped"), reference);

    // 8. A server that never answers costs the timeout, not the report.
    let mute_url = format!("http://127.0.0.1:{}", mute());
    let t = Instant::now();
    let stuck = report_env(
        &base,
        &[
            ("DEBUGINFOD_URLS", &mute_url),
            ("DEBUGINFOD_TIMEOUT", "2"),
            ("DEBUGINFOD_CACHE_PATH", &cache_str("mute")),
        ],
    )
    .expect(0);
    let took = t.elapsed();
    assert!(took < Duration::from_secs(15), "took {took:?}");
    assert!(stuck.stderr.contains("debuginfod: "), "{}", stuck.stderr);

    // 9. DEBUGINFOD_MAXSIZE below the debug file's size: refused.
    let capped = report_env(
        &base,
        &[
            ("DEBUGINFOD_URLS", &server.url()),
            ("DEBUGINFOD_MAXSIZE", "1000"),
            ("DEBUGINFOD_CACHE_PATH", &cache_str("cap")),
        ],
    )
    .expect(0);
    assert!(!by_symbol(&capped.json(), "stripped").contains_key("hot_two_thirds"));
    assert!(!cache("cap").join(&h).join("debuginfo").exists());

    // 10. profctl archive packs the debug file it fetches; the unpacked
    // archive names the functions with no server.
    let tar = dir.join("a.tar");
    let arch = Command::new(PROFCTL)
        .args(["archive", "--session-dir", s, "-o"])
        .arg(&tar)
        .env("DEBUGINFOD_URLS", server.url())
        .env("DEBUGINFOD_CACHE_PATH", cache("arch"))
        .output()
        .unwrap();
    assert!(arch.status.success(), "{arch:?}");
    let said = String::from_utf8_lossy(&arch.stdout);
    assert!(
        said.contains("1 debug files") || said.contains(" debug files"),
        "{said}"
    );
    let unpacked = dir.join("unpacked");
    std::fs::create_dir(&unpacked).unwrap();
    run_ok(
        Command::new("tar")
            .arg("xf")
            .arg(&tar)
            .arg("-C")
            .arg(&unpacked),
    );
    let in_tar = unpacked
        .join("debug/.build-id")
        .join(&h[..2])
        .join(format!("{}.debug", &h[2..]));
    assert!(in_tar.is_file(), "{said}");
    let from_archive = report_env(
        &[
            "--session-dir",
            unpacked.to_str().unwrap(),
            "--format",
            "json",
            "-l",
        ],
        &[("DEBUGINFOD_CACHE_PATH", &cache_str("none"))],
    )
    .expect(0);
    assert_eq!(by_symbol(&from_archive.json(), "stripped"), reference);

    // 11. https: a server whose certificate a CA of the test signed is
    // trusted when that CA is among the roots (`SSL_CERT_FILE`, which the
    // system's root store honours), refused when not.
    https_case(dir, &h, &debug, &base, &reference);

    // 12. A local user's stripped program claiming this build-id (another
    // layout): root's report fetches the genuine debug file for the claim
    // and still names none of the user's samples with it.
    let Some(user) = profkit_testsupport::ThrowawayUser::create() else {
        return;
    };
    let theirs = dir.join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    let spin = theirs.join("spin.c");
    std::fs::write(
        &spin,
        "volatile unsigned long s;\n\
         static void pad(void) { for (int i = 0; i < 3; i++) s += i; }\n\
         int main(void) { pad(); for (unsigned long i = 0; i < 400000000UL; i++) s += i; return 0; }\n",
    )
    .unwrap();
    let impostor = theirs.join("impostor");
    assert!(compile(
        Command::new("cc")
            .args(["-O1", &format!("-Wl,--build-id=0x{h}"), "-o"])
            .arg(&impostor)
            .arg(&spin),
        "C compiler (cc)",
    ));
    run_ok(Command::new("strip").arg(&impostor));
    assert_eq!(build_id_of(&impostor), id, "the claim");
    for p in [dir, theirs.as_path()] {
        run_ok(Command::new("chmod").arg("755").arg(p));
    }
    run_ok(
        Command::new("chown")
            .arg(user.uid.to_string())
            .arg(&impostor),
    );
    let _ = std::fs::remove_dir_all(dir.join("s"));
    let mut cmd = vec!["/usr/bin/setpriv".to_owned()];
    let prog = user.command(&impostor);
    cmd.extend(prog.get_args().map(|a| a.to_string_lossy().into_owned()));
    let cmd: Vec<&str> = cmd.iter().map(String::as_str).collect();
    crate::live::record(dir, &cmd);
    let claimed = report_env(
        &base,
        &[
            ("DEBUGINFOD_URLS", &server.url()),
            ("DEBUGINFOD_CACHE_PATH", &cache_str("a")),
        ],
    )
    .expect(0);
    let m = by_symbol(&claimed.json(), "impostor");
    let total: u64 = m.values().sum();
    assert!(total > 100, "the user's samples: {m:?}");
    assert!(
        !m.contains_key("hot_two_thirds") && !m.contains_key("hot_one_third"),
        "the claim named the user's program with root's debug file: {m:?}"
    );
}

/// Serves `debug` as `/buildid/H/debuginfo` over https (`openssl
/// s_server -WWW`, a certificate for 127.0.0.1 signed by a CA made here)
/// and reports through it with and without that CA among the roots.
fn https_case(dir: &Path, h: &str, debug: &Path, base: &[&str], reference: &BTreeMap<String, u64>) {
    let tls = dir.join("tls");
    let www = tls.join("www").join("buildid").join(h);
    std::fs::create_dir_all(&www).unwrap();
    std::fs::copy(debug, www.join("debuginfo")).unwrap();
    let openssl = |args: &[&str]| {
        run_ok(
            Command::new("openssl")
                .args(args)
                .current_dir(&tls)
                .stderr(Stdio::null()),
        )
    };
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=profkit test CA",
        "-addext",
        "basicConstraints=critical,CA:TRUE",
        "-addext",
        "keyUsage=critical,keyCertSign",
    ]);
    openssl(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "srv.key",
        "-out",
        "srv.csr",
        "-subj",
        "/CN=127.0.0.1",
    ]);
    std::fs::write(
        tls.join("ext"),
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    openssl(&[
        "x509",
        "-req",
        "-in",
        "srv.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "srv.pem",
        "-days",
        "2",
        "-extfile",
        "ext",
    ]);
    let port = free_port();
    let child = Command::new("openssl")
        .args(["s_server", "-quiet", "-WWW", "-accept", &port.to_string()])
        .args(["-cert", "../srv.pem", "-key", "../srv.key"])
        .current_dir(tls.join("www"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("openssl s_server");
    let _server = Server { child, port };
    let deadline = Instant::now() + Duration::from_secs(20);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "openssl s_server did not start");
        std::thread::sleep(Duration::from_millis(100));
    }
    let url = format!("https://127.0.0.1:{port}");
    let ca = tls.join("ca.pem");
    let cache = |n: &str| tls.join(n).to_str().unwrap().to_owned();
    let trusted = report_env(
        base,
        &[
            ("DEBUGINFOD_URLS", &url),
            ("DEBUGINFOD_CACHE_PATH", &cache("c-trusted")),
            ("SSL_CERT_FILE", ca.to_str().unwrap()),
        ],
    )
    .expect(0);
    assert_eq!(
        &by_symbol(&trusted.json(), "stripped"),
        reference,
        "{}",
        trusted.stderr
    );
    let untrusted = report_env(
        base,
        &[
            ("DEBUGINFOD_URLS", &url),
            ("DEBUGINFOD_CACHE_PATH", &cache("c-untrusted")),
        ],
    )
    .expect(0);
    assert!(!by_symbol(&untrusted.json(), "stripped").contains_key("hot_two_thirds"));
    assert!(
        untrusted.stderr.contains("certificate"),
        "{}",
        untrusted.stderr
    );
}

/// Source locations of the binary `image`'s rows, sorted.
fn lines_of(v: &serde_json::Value, image: &str) -> Vec<String> {
    let mut out: Vec<String> = rows(v)
        .iter()
        .filter(|r| r["image"].as_str().unwrap_or_default().ends_with(image))
        .map(|r| {
            format!(
                "{} {}",
                r["symbol"].as_str().unwrap_or("-"),
                r["location"].as_str().unwrap_or("-")
            )
        })
        .collect();
    out.sort();
    out
}

/// The build-id of the ELF file at `p`.
pub(crate) fn build_id_of(p: &Path) -> Vec<u8> {
    let out = Command::new("readelf").arg("-n").arg(p).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let h = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("Build ID: "))
        .unwrap_or_else(|| panic!("no build-id in {}", p.display()));
    (0..h.len() / 2)
        .map(|i| u8::from_str_radix(&h[2 * i..2 * i + 2], 16).unwrap())
        .collect()
}
