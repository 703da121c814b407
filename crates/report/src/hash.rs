//! The aggregation maps' hasher: rustc's Fx hash (the `rustc-hash`
//! crate). Keys are our own integers, never attacker-chosen strings, so
//! SipHash's flood resistance buys nothing and costs about a third of the
//! aggregation time.

pub(crate) use rustc_hash::{FxHashMap, FxHashSet};
