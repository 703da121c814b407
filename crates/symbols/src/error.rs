//! The crate's one error type.

use std::path::PathBuf;

/// Everything that can go wrong while symbolizing.
///
/// [`Symbolizer::symbolize_all`](crate::Symbolizer::symbolize_all) never fails: it turns these
/// into per-binary warning strings (their `Display` text) and shows the affected samples as
/// offsets. The type is public so that [`Symbolizer::new`](crate::Symbolizer::new) can report
/// bad options and so callers can match on causes.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A file could not be read for a reason other than "not found".
    #[error("cannot read {}: {source}; check that it exists and is readable", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A file named by a sample or an option does not exist.
    #[error(
        "{} not found; samples shown as offsets (restore the file, or give a sysroot or search \
         directory holding a copy)",
        path.display()
    )]
    NotFound {
        /// The missing file.
        path: PathBuf,
    },
    /// A file exists but is not an ELF file the `object` crate can read.
    #[error("{} is not a readable ELF file ({source}); samples shown as offsets", path.display())]
    Elf {
        /// The file.
        path: PathBuf,
        /// The parser's complaint.
        #[source]
        source: object::Error,
    },
    /// The DWARF in a file is malformed; names still work, lines do not.
    #[error(
        "bad DWARF in {} ({source}); function names are still shown, source lines are not",
        path.display()
    )]
    Dwarf {
        /// The file holding the DWARF.
        path: PathBuf,
        /// The DWARF parser's complaint.
        #[source]
        source: gimli::Error,
    },
    /// An option names something unusable; raised by [`Symbolizer::new`](crate::Symbolizer::new).
    #[error("invalid symbolizer option {option}: {} {problem}", path.display())]
    BadOption {
        /// Which option.
        option: &'static str,
        /// The value given.
        path: PathBuf,
        /// What is wrong with it.
        problem: &'static str,
    },
    /// The vDSO of this process could not be read (used for `[vdso]` samples).
    #[error("cannot read this process's vDSO ({what}); [vdso] samples shown as offsets")]
    Vdso {
        /// What failed.
        what: String,
    },
    /// No kallsyms was given (`KallsymsSource::None`): kernel samples cannot be named.
    #[error("kernel symbols not loaded (no kallsyms given)")]
    NoKallsyms,
    /// A file taken to be read by range (ELF64 little-endian) turned out not to be.
    #[error("{}: its symbols cannot be read by range", path.display())]
    NotReadByRange {
        /// The file.
        path: PathBuf,
    },
}

impl Error {
    /// Wraps an I/O error, mapping `NotFound` to [`Error::NotFound`].
    pub(crate) fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        let path = path.into();
        if source.kind() == std::io::ErrorKind::NotFound {
            Error::NotFound { path }
        } else {
            Error::Io { path, source }
        }
    }
}
