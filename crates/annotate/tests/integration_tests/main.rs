//! Integration tests of profkit-annotate: real binaries built by the system C compiler,
//! checked against binutils.

mod objdump;
