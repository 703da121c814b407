//! Inlined frames in a Rust program, for DWARF call graphs (`--call-graph
//! dwarf`) and `profreport -l --debug-info`: built without frame pointers
//! (Rust's default on x86-64), with full debug info, so only .eh_frame can
//! name the callers and only DWARF knows what was inlined where.
//!
//! ```text
//!   inline::main ─┬─► caller_once  ─[dispatch]─► hot ─[helper]      once a round
//!                 └─► caller_twice ─[dispatch]─► hot ─[helper]      twice a round
//! ```
//!
//! `hot` (never inlined) spends all its time in `helper`, which is always
//! inlined into it: `hot` is a leaf whose every instruction but a few
//! belongs to an inlined function. The callers (never inlined) reach `hot`
//! through `dispatch`, always inlined into them: the return addresses in
//! the callers lie in inlined code. Every call of `hot` does the same work,
//! so its samples split 1/3 (caller_once) : 2/3 (caller_twice). No call is
//! a tail call: each caller uses the result after the call.
//!
//! ```text
//!   inline ROUNDS      (about 10 ms per round on the development VM)
//! ```
//!
//! Build: rustc --edition 2021 -C opt-level=2 -C debuginfo=2 -C force-frame-pointers=no -o inline inline.rs

use std::hint::black_box;

/// Iterations of `helper` per call of `hot`.
const N: u64 = 400_000;

#[inline(always)]
fn helper(x: u64, i: u64) -> u64 {
    let mut y = x ^ i;
    for _ in 0..8 {
        // black_box: one dependent multiply-add at a time, not folded.
        y = black_box(
            y.wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407),
        );
    }
    y
}

#[inline(never)]
fn hot(seed: u64, n: u64) -> u64 {
    let mut x = seed;
    for i in 0..n {
        x = helper(x, i);
    }
    x
}

#[inline(always)]
fn dispatch(seed: u64, n: u64) -> u64 {
    hot(seed, n).rotate_left(7)
}

#[inline(never)]
fn caller_once(seed: u64, n: u64) -> u64 {
    dispatch(seed, n) ^ 3
}

#[inline(never)]
fn caller_twice(seed: u64, n: u64) -> u64 {
    let a = dispatch(seed, n);
    let b = dispatch(a, n);
    a ^ b
}

fn main() {
    let Some(rounds) = std::env::args().nth(1).and_then(|s| s.parse::<u64>().ok()) else {
        eprintln!("usage: inline ROUNDS");
        std::process::exit(2);
    };
    let n = black_box(N);
    let mut sink = 0u64;
    for r in 0..rounds {
        sink = sink.wrapping_add(caller_once(r, n));
        sink = sink.wrapping_add(caller_twice(r, n));
    }
    println!("{sink}");
}
