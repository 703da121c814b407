//! Integration tests of profkit-perf: the SimRing protocol (property tests)
//! and the live kernel (real events, real rings).

mod live;
mod sim;
