//! `profreport`: not written yet (issue 6). Says so instead of pretending.
#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    eprintln!("profreport: not implemented yet (issue 6); `cargo run --release -p profkit-sync --example capture` prints a per-binary summary meanwhile");
    std::process::ExitCode::from(1)
}
