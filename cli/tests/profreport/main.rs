//! profreport end to end: the built binary on the sessions checked into
//! `testdata/sessions/` (golden outputs in `testdata/golden/`), one test
//! per flag and spec tag, and live recordings of workloads with known
//! shares of time.
//!
//! Golden files are regenerated with `PROFKIT_BLESS=1 cargo test -p
//! profkit-cli --test profreport golden`; the sessions themselves with
//! `scripts/golden-sessions.sh`.

mod annotate;
mod callgraph;
mod cgroups;
mod claims;
mod debuginfod;
mod dwarf;
mod flags;
mod fleet;
mod golden;
mod jit;
mod live;
mod names;
mod namespaces;
mod offcpu;
mod offcpu_live;
mod parts;
mod perfdata_forms;
mod rotation;
mod script;
mod symindex;
mod times;
mod util;
mod viewers;
mod window;
