//! Naming aggregated samples: thread names, binaries and applications
//! ([`apps`]), symbols ([`symbolize`]), and JIT code by the session's
//! `JitCode` markers ([`jit`]). Depends only on the aggregate;
//! the call graph and the rows use it.

pub(crate) mod apps;
pub(crate) mod debuginfod;
pub(crate) mod jit;
pub(crate) mod symbolize;
