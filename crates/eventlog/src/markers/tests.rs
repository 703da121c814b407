use super::*;
use crate::codec::push_uvar;
use crate::{decode_events, ChunkEncoder};

fn jit() -> JitCode {
    JitCode {
        cookie: 0x0102_0304_0506_0708,
        addr: 0x7f00_1234_0000,
        size: 8,
        index: 3,
        time: 1_000_000_000,
        name: "py::f_three:/tmp/work.py".into(),
        code: Some(vec![0x55, 0x48, 0x89, 0xe5, 0x90, 0x5d, 0xc3, 0x90]),
        files: vec!["/tmp/work.py".into(), "/tmp/other.py".into()],
        lines: vec![
            JitLine {
                offset: 0,
                line: 10,
                discrim: 0,
                file: 0,
            },
            JitLine {
                offset: 4,
                line: 11,
                discrim: 2,
                file: 1,
            },
            JitLine {
                offset: 4,
                line: 12,
                discrim: 0,
                file: 0,
            },
        ],
    }
}

/// The marker's payload bytes, written as they are (no bounds applied).
fn raw(j: &JitCode) -> Vec<u8> {
    let mut body = Vec::new();
    push_jit_code(&mut body, j);
    let mut p = vec![tag::JIT_CODE];
    push_uvar(&mut p, body.len() as u64);
    p.extend_from_slice(&body);
    p
}

fn decode(p: &[u8]) -> Result<Vec<Event>> {
    let mut out = Vec::new();
    decode_events(p, |e| out.push(e))?;
    Ok(out)
}

fn refused(j: &JitCode, says: &str) {
    assert!(!j.fits(), "{says}: fits");
    let err = decode(&raw(j)).unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(
            err,
            Error::Malformed {
                what: "JitCode",
                ..
            }
        ) && msg.contains(says),
        "wanted a malformed JitCode saying {says:?}, got {msg}"
    );
    // The encoder never writes what a reader refuses.
    let mut enc = ChunkEncoder::new();
    enc.event(&Event::JitCode(j.clone()));
    let back = decode(enc.bytes()).unwrap();
    let [Event::JitCode(b)] = &back[..] else {
        panic!("{back:?}")
    };
    assert!(b.fits(), "{says}: bounded {b:?}");
    assert_eq!(b, &j.bounded());
}

#[test]
fn jit_code_round_trips() {
    for j in [
        jit(),
        JitCode {
            code: None,
            files: vec![],
            lines: vec![],
            ..jit()
        },
        JitCode::default(),
    ] {
        assert!(j.fits());
        let mut enc = ChunkEncoder::new();
        enc.sample(0, 7, 7, false, j.cookie, j.addr + 4);
        enc.event(&Event::JitCode(j.clone()));
        let evs = decode(enc.bytes()).unwrap();
        assert_eq!(evs.last(), Some(&Event::JitCode(j.clone())));
        assert!(evs.last().unwrap().is_marker() && evs.last().unwrap().is_definition());
        assert_eq!(raw(&j), enc.bytes()[enc.bytes().len() - raw(&j).len()..]);
    }
}

#[test]
fn jit_code_over_its_bounds_is_refused() {
    let long = "x".repeat(MAX_JIT_NAME + 1);
    refused(
        &JitCode {
            name: long.clone(),
            ..jit()
        },
        "name of 4097 bytes",
    );
    let mut j = jit();
    j.files[1] = long;
    refused(&j, "source file name of 4097 bytes");
    refused(
        &JitCode {
            files: vec![String::new(); MAX_JIT_FILES + 1],
            ..jit()
        },
        "4097 source files",
    );
    let size = 1 << 20;
    refused(
        &JitCode {
            size,
            code: None,
            lines: vec![JitLine::default(); MAX_JIT_LINES + 1],
            ..jit()
        },
        "65537 source lines",
    );
    refused(
        &JitCode {
            size: MAX_JIT_CODE as u64 + 1,
            code: Some(vec![0x90; MAX_JIT_CODE + 1]),
            ..jit()
        },
        "1048577 code bytes (the format's limit is 1048576)",
    );
    refused(
        &JitCode { size: 9, ..jit() },
        "8 code bytes for a function of size 9",
    );
    let mut j = jit();
    j.lines[1].file = 2;
    refused(&j, "file index 2 but 2 source files");
    let mut j = jit();
    j.lines[2].offset = 3;
    refused(&j, "out of order");
    let mut j = jit();
    j.lines[2].offset = 8;
    refused(&j, "past the function's size 8");
    refused(
        &JitCode {
            addr: u64::MAX - 3,
            ..jit()
        },
        "past the end of the address space",
    );
}

/// Forged counts and lengths are checked against the bytes left before
/// anything is allocated; a truncated or mangled body is an error,
/// never a panic.
#[test]
fn hostile_jit_code_bodies_are_errors() {
    let good = raw(&jit());
    // A forged files count: 2^40 files in a few bytes.
    let mut body = Vec::new();
    body.extend_from_slice(&1u64.to_le_bytes());
    for v in [0x1000, 0, 0, 0] {
        push_uvar(&mut body, v);
    }
    push_uvar(&mut body, 0); // name ""
    body.push(0); // no code
    push_uvar(&mut body, 1 << 40);
    let mut p = vec![tag::JIT_CODE];
    push_uvar(&mut p, body.len() as u64);
    p.extend_from_slice(&body);
    let err = decode(&p).unwrap_err().to_string();
    assert!(err.contains("count") && err.contains("files"), "{err}");
    // Every cut and every single-byte change of a good marker.
    for n in 0..good.len() {
        let mut cut = good[..n].to_vec();
        if n > 1 {
            cut[1] = (n - 2) as u8;
        }
        let _ = decode(&cut);
        for b in [0x00, 0x01, 0x7f, 0x80, 0xff] {
            let mut m = good.clone();
            m[n] = b;
            if let Ok(evs) = decode(&m) {
                for e in evs {
                    if let Event::JitCode(j) = e {
                        assert!(j.fits(), "read past its bounds: {j:?}");
                    }
                }
            }
        }
    }
}

#[test]
fn bounded_cuts_names_at_a_character_boundary() {
    let j = JitCode {
        name: "é".repeat(MAX_JIT_NAME),
        ..jit()
    };
    let b = j.bounded();
    assert_eq!(b.name.len(), MAX_JIT_NAME);
    assert!(b.fits());
    assert_eq!(jit().bounded(), jit());
}
