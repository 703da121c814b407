//! Integration tests of the perf.data import: the same records as a
//! SimRing scenario and as a perf.data file give the same session.

mod dwarf;
mod equivalence;
mod forms;
mod hostile;
mod offcpu;
mod perf_data;
