//! The crate's one error type.

/// What can go wrong reading an ELF fact. Paths are the caller's to add.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The bytes are not an ELF file (`kind` is what `object` took them for).
    #[error("not an ELF file ({kind})")]
    NotElf {
        /// What the file is, as `object::FileKind` names it.
        kind: String,
    },
    /// The ELF headers are malformed.
    #[error("{0}")]
    Parse(#[from] object::Error),
    /// A section's bytes are not where or what its header says (past the
    /// end of the file, an unknown compression).
    #[error("{0}")]
    Malformed(&'static str),
    /// More than the caller reads: a section whose bytes (decompressed)
    /// would be over its bound, or more section headers than
    /// [`crate::MAX_SECTIONS`].
    #[error("{what} {size}, over the {max} this reads")]
    TooLarge {
        /// What is too large ("section of", "section headers").
        what: &'static str,
        /// Its size (bytes, or headers).
        size: u64,
        /// The bound.
        max: u64,
    },
    /// This process's vDSO could not be read.
    #[error("cannot read this process's vDSO ({what})")]
    Vdso {
        /// What failed.
        what: String,
    },
}
