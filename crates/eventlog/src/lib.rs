//! placeholder until this crate is written.
#![forbid(unsafe_code)]
