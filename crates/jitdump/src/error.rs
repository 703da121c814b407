//! The crate's one error type.

use std::fmt;

/// What can be wrong with a jitdump. Paths are the caller's to add.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The file does not start with the jitdump magic.
    #[error("not a jitdump file (it does not start with the \"JiTD\" magic)")]
    NotJitdump,
    /// The magic is there, byte-swapped: a dump of a machine of the other
    /// byte order.
    #[error("a jitdump written in the other byte order (by a machine of the other endianness): not supported")]
    OtherEndian,
    /// The header's fields are impossible.
    #[error("bad jitdump header: {0}")]
    BadHeader(String),
    /// A record's prefix claims more than [`crate::Limits::max_record`].
    #[error("jitdump record at offset {offset} claims {} (more than {}): the file is not a jitdump or is corrupt", Size(*size), Size(*max))]
    RecordTooLarge {
        /// The record's file offset (0-based in [`crate::parse_record`]'s buffer).
        offset: u64,
        /// Its claimed size in bytes.
        size: u64,
        /// The limit it is over.
        max: u64,
    },
    /// A record's fields contradict each other or its size.
    #[error("jitdump record at offset {offset} is malformed ({what}): the file is not a jitdump or is corrupt")]
    Malformed {
        /// The record's file offset (0-based in [`crate::parse_record`]'s buffer).
        offset: u64,
        /// What is wrong.
        what: &'static str,
    },
    /// Reading the file failed.
    #[error("cannot read the jitdump: {0}")]
    Io(#[from] std::io::Error),
    /// The reader met an error before and reads no further.
    #[error("the jitdump reader stopped at an earlier error and reads no further")]
    GivenUp,
}

/// A byte count for messages: "3 GiB", "16 MiB", "1.5 KiB", "12 bytes".
struct Size(u64);

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [(u64, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
        for (unit, name) in UNITS {
            if self.0 >= unit {
                let whole = self.0 / unit;
                let tenth = (self.0 % unit) * 10 / unit;
                return if tenth == 0 {
                    write!(f, "{whole} {name}")
                } else {
                    write!(f, "{whole}.{tenth} {name}")
                };
            }
        }
        write!(f, "{} bytes", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn too_large_says_sizes_people_read() {
        let e = Error::RecordTooLarge {
            offset: 4096,
            size: 3 << 30,
            max: 16 << 20,
        };
        assert_eq!(
            e.to_string(),
            "jitdump record at offset 4096 claims 3 GiB (more than 16 MiB): the file is not a jitdump or is corrupt"
        );
        assert_eq!(Size(1536).to_string(), "1.5 KiB");
        assert_eq!(Size(12).to_string(), "12 bytes");
        assert_eq!(Size(u64::MAX).to_string(), "17179869183.9 GiB");
    }
}
