//! The crate's one error type.

use std::path::PathBuf;

/// Everything that can go wrong while reading a function's code.
///
/// Disassembly itself cannot fail ([`annotate_instructions`](crate::annotate_instructions)
/// turns undecodable bytes into `(bad)`); only finding and reading the bytes can.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The file could not be opened or read.
    #[error("cannot read {}: {source}; check that it exists and is readable", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The path names a FIFO, device or directory (reading one could block or never end).
    #[error("{} is not a regular file (a FIFO, device or directory); not read", path.display())]
    NotRegularFile {
        /// The file.
        path: PathBuf,
    },
    /// The file is not an ELF file, or its headers are malformed.
    #[error("{} is not a readable ELF file ({source})", path.display())]
    Elf {
        /// The file.
        path: PathBuf,
        /// The parser's complaint.
        #[source]
        source: object::Error,
    },
    /// The file is ELF for a machine this crate cannot disassemble.
    #[error("disassembly of {machine} is not supported ({}); only x86-64 and i386", path.display())]
    UnsupportedMachine {
        /// The file.
        path: PathBuf,
        /// The ELF machine, named (`aarch64`) or as its `e_machine` number.
        machine: String,
    },
    /// More code was asked for than [`MAX_CODE_BYTES`](crate::MAX_CODE_BYTES).
    #[error(
        "{len} bytes of code asked for at {vaddr:#x}, over the {max}-byte limit (is the \
         function size right?)"
    )]
    TooLong {
        /// The address asked for.
        vaddr: u64,
        /// The length asked for.
        len: u64,
        /// The limit.
        max: u64,
    },
    /// A zero-length range was asked for (an unsized symbol: give it the distance to the
    /// next symbol).
    #[error("an empty range of code asked for at {vaddr:#x}")]
    EmptyRange {
        /// The address asked for.
        vaddr: u64,
    },
    /// The range is not wholly inside the file bytes of one executable PT_LOAD segment.
    #[error(
        "{vaddr:#x}..{end:#x} is not inside one executable PT_LOAD segment of {}{why}",
        path.display(),
        end = vaddr.saturating_add(*len)
    )]
    NotInExecutableSegment {
        /// The file.
        path: PathBuf,
        /// The start asked for.
        vaddr: u64,
        /// The length asked for.
        len: u64,
        /// What was found instead (": it is in a segment that is not executable", …).
        why: &'static str,
    },
    /// A file offset lies in no PT_LOAD segment's file bytes.
    #[error("file offset {offset:#x} is in no PT_LOAD segment of {}", path.display())]
    OffsetNotMapped {
        /// The file.
        path: PathBuf,
        /// The offset.
        offset: u64,
    },
    /// The file is shorter than its program headers say (truncated, or changed since).
    #[error(
        "{} is {file_len} bytes, shorter than its program headers say ({needed} needed); \
         truncated or changed since it was recorded",
        path.display()
    )]
    Truncated {
        /// The file.
        path: PathBuf,
        /// Its length.
        file_len: u64,
        /// The end of the bytes wanted.
        needed: u64,
    },
    /// A function's source file is at none of the paths looked at: under each `--source-dir`
    /// directory (the recorded path and its shorter tails), then the recorded path.
    #[error(
        "{file} not found{}",
        if *under_source_dirs {
            ", nor under the --source-dir directories"
        } else {
            " (give --source-dir DIR to look for it there)"
        }
    )]
    SourceNotFound {
        /// The file as the DWARF records it.
        file: String,
        /// Whether `--source-dir` directories were looked in too.
        under_source_dirs: bool,
    },
    /// A source file at its recorded path that the binary's owner could not have read (the
    /// file, or a directory on the way to it): not shown, whoever runs the report.
    #[error(
        "{}: not shown: {} is not readable by {reader}; give --source-dir DIR to show \
         sources from a directory you name",
        path.display(),
        blocked.display()
    )]
    SourceNotShown {
        /// The path looked at.
        path: PathBuf,
        /// What the owner could not read or search: the file or a directory on the way.
        blocked: PathBuf,
        /// Who ("the binary's owner (uid 1000)").
        reader: String,
    },
    /// A source file was found but could not be read (not a regular file, over
    /// [`MAX_SOURCE_BYTES`](crate::MAX_SOURCE_BYTES), an I/O error).
    #[error("{}: {source}", path.display())]
    SourceUnreadable {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
