//! Naming aggregated samples: thread names, binaries and applications
//! ([`apps`]), and symbols ([`symbolize`]). Depends only on the aggregate;
//! the call graph and the rows use it.

pub(crate) mod apps;
pub(crate) mod symbolize;
