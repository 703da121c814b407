//! What the `profctl` test binaries share (included by `#[path]`, so each
//! sees its own `CARGO_BIN_EXE_profctl`): running `profctl` against a
//! session directory, stopping a test's daemon however the test ends, and
//! a command's whole output as text.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub const PROFCTL: &str = env!("CARGO_BIN_EXE_profctl");

/// `profctl ARGS` with `PROFKIT_SESSION_DIR` set to `dir`.
pub fn profctl(dir: &Path, args: &[&str]) -> Output {
    Command::new(PROFCTL)
        .args(args)
        .env("PROFKIT_SESSION_DIR", dir)
        .env_remove("PROFKIT_LOG")
        .output()
        .expect("running profctl")
}

/// Stops the daemon of a session directory when a test ends, however it
/// ends (a failed assertion must not leave a daemon sampling the machine).
pub struct StopOnDrop(pub PathBuf);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        let _ = Command::new(PROFCTL)
            .arg("stop")
            .arg("--session-dir")
            .arg(&self.0)
            .output();
    }
}

/// A command's standard output then its standard error.
pub fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}
