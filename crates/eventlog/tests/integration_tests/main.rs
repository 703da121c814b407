//! Integration tests of profkit-eventlog: sessions written to real files
//! and read back, corrupted, torn, appended to concurrently and resumed.

mod append;
mod concurrent;
mod corruption;
mod disk_full;
mod roundtrip;
mod util;
