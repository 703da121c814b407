//! Tests of the stream over hand-written sessions.
