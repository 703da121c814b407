//! Integration tests of profkit-daemon: real processes, sockets and signals
//! around a fake engine.
//!
//! Tests that need another process re-execute this test binary with
//! `--ignored --exact <helper>` and an environment variable naming the
//! helper's job (see `util::helper_command`).

mod control;
mod lock;
mod main_loop;
mod process;
mod session_dir;
mod util;
