//! Integration tests of profkit-symbols: real ELF files built at test time with the system's
//! C, C++ and Rust compilers, the test binary itself, and the fixtures in testdata/symbols/.

mod claims;
mod current_exe;
mod debuginfod_cache;
mod elf;
mod index;
mod kernel;
mod mangled;
mod perf_map;
mod util;
mod vdso;
