//! Opening a perf.data: file mode (seekable; its header, feature sections
//! and AUXTRACE records checked before linux-perf-data reads them; `-z`
//! files expanded first) or pipe mode (a stream, from a file or standard
//! input).

use super::*;

/// The most CPUs a file's NRCPUS feature is believed about (Linux's
/// largest `NR_CPUS` is 8192).
pub(super) const MAX_CLAIMED_CPUS: u32 = 8192;

/// A perf.data file opened: file mode (seekable, its header and feature
/// sections checked), or pipe mode (`perf record -o -`: a stream, from a
/// file or standard input), with what its stream met.
pub(crate) enum Opened {
    /// File mode.
    File(PerfFileReader<BufReader<std::fs::File>>),
    /// Pipe mode.
    Pipe(
        PerfFileReader<BufReader<Stream<Box<dyn Read>>>>,
        Rc<RefCell<StreamReport>>,
    ),
}

/// The path that names standard input.
pub(crate) const STDIN: &str = "-";

/// A stream in pipe mode (its 16-byte header read from it again).
pub(super) fn open_pipe(path: &Path, inner: Box<dyn Read>) -> Result<Opened> {
    let report = Rc::new(RefCell::new(StreamReport::default()));
    let stream = Stream::new(inner, report.clone()).map_err(|source| Error::Read {
        path: path.to_path_buf(),
        source,
    })?;
    let parsed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        PerfFileReader::parse_pipe(BufReader::new(stream))
    }));
    if let Some(source) = report.borrow_mut().failure.take() {
        return Err(Error::Compressed {
            path: path.to_path_buf(),
            source,
        });
    }
    let not_perf = |message: String| Error::NotPerfData {
        path: path.to_path_buf(),
        message,
    };
    let reader = parsed
        .map_err(|_| not_perf("malformed pipe-mode header records".into()))?
        .map_err(|e| not_perf(format!("pipe mode: {e}")))?;
    Ok(Opened::Pipe(reader, report))
}

pub(crate) fn open(path: &Path) -> Result<Opened> {
    if path.as_os_str() == STDIN {
        // Only pipe mode can be read from a pipe: file mode seeks.
        let mut stdin = std::io::stdin().lock();
        let mut h = [0u8; 16];
        let n = fill(&mut stdin, &mut h).map_err(|source| Error::Read {
            path: path.to_path_buf(),
            source,
        })?;
        let big = &h[..8] == b"2ELIFREP";
        if n == 16 && (big || &h[..8] == b"PERFILE2") && uint_at::<8>(&h, 8, big) != Some(16) {
            return Err(Error::NotPerfData {
                path: path.to_path_buf(),
                message: "a file-mode perf.data cannot be read from standard input \
                          (give its path, or record with `perf record -o -`)"
                    .into(),
            });
        }
        let head = std::io::Cursor::new(h[..n].to_vec());
        return open_pipe(path, Box::new(head.chain(stdin)));
    }
    let file = open_file(path)?;
    match file {
        Ok(reader) => Ok(Opened::File(reader)),
        Err(pipe) => open_pipe(path, Box::new(pipe)),
    }
}

/// Reads up to `buf.len()` bytes of `r` (fewer only at its end).
pub(super) fn fill(r: &mut impl Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}

/// A file: file mode's reader, or the file at its start when it is in
/// pipe mode (a 16-byte header).
#[allow(clippy::type_complexity)]
pub(super) fn open_file(
    path: &Path,
) -> Result<std::result::Result<PerfFileReader<BufReader<std::fs::File>>, std::fs::File>> {
    let read_err = |source| Error::Read {
        path: path.to_path_buf(),
        source,
    };
    let not_perf = |message: String| Error::NotPerfData {
        path: path.to_path_buf(),
        message,
    };
    // Non-blocking: a FIFO given as perf.data must not hang the report.
    use profkit_untrusted::{open_untrusted, Policy, Refusal};
    let profkit_untrusted::Opened { mut file, meta } =
        match open_untrusted(path, &Policy::regular()) {
            Ok(o) => o,
            Err(e) if matches!(Refusal::of(&e), Some(Refusal::NotRegular { .. })) => {
                return Err(not_perf("not a regular file".into()))
            }
            Err(e) => return Err(read_err(e)),
        };
    let mut h = [0u8; 16];
    if file.read_exact(&mut h).is_ok() {
        let big = &h[..8] == b"2ELIFREP";
        if (big || &h[..8] == b"PERFILE2") && uint_at::<8>(&h, 8, big) == Some(16) {
            file.seek(std::io::SeekFrom::Start(0)).map_err(read_err)?;
            return Ok(Err(file));
        }
    }
    file.seek(std::io::SeekFrom::Start(0)).map_err(read_err)?;
    check_sections(&mut file, meta.len()).map_err(not_perf)?;
    if let Some((h, big)) = compressed_header(&mut file).map_err(read_err)? {
        // perf record -z: read from a copy with its records expanded.
        file = crate::compressed::expand(&mut file, meta.len(), &h, big).map_err(|source| {
            Error::Compressed {
                path: path.to_path_buf(),
                source,
            }
        })?;
        let len = file.metadata().map_err(read_err)?.len();
        check_sections(&mut file, len).map_err(not_perf)?;
    }
    file.seek(std::io::SeekFrom::Start(0)).map_err(read_err)?;
    // linux-perf-data asserts on some malformed input: a panic there is a
    // file we cannot read, not a crash.
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        PerfFileReader::parse_file(BufReader::new(file))
    }))
    .map_err(|_| not_perf("malformed header or feature sections".into()))?
    .map_err(|e| not_perf(e.to_string()))
    .map(Ok)
}

/// The header of a perf.data file whose feature bitmap says it has
/// compressed records (`HEADER_COMPRESSED`), and whether it is big-endian.
pub(super) fn compressed_header(
    f: &mut std::fs::File,
) -> std::io::Result<Option<([u8; 104], bool)>> {
    let mut h = [0u8; 104];
    f.seek(std::io::SeekFrom::Start(0))?;
    f.read_exact(&mut h)?;
    let big = match &h[..8] {
        b"PERFILE2" => false,
        b"2ELIFREP" => true,
        _ => return Ok(None),
    };
    let bit = crate::compressed::COMPRESSED_BIT;
    let word = uint_at::<8>(&h, 72 + 8 * (bit / 64) as usize, big).unwrap_or(0);
    Ok((word >> (bit % 64) & 1 == 1).then_some((h, big)))
}

/// `PERF_RECORD_AUXTRACE`: its body says how many bytes of trace data
/// follow the record, and linux-perf-data reserves that many up front.
pub(super) const RECORD_AUXTRACE: u32 = 71;

/// Walks the data section's record headers: every AUXTRACE record's
/// trace data must lie within the section (a flipped byte claimed 140 TB).
pub(super) fn check_auxtrace(
    f: &mut std::fs::File,
    off: u64,
    size: u64,
    big: bool,
) -> std::result::Result<(), String> {
    let end = off.saturating_add(size);
    f.seek(std::io::SeekFrom::Start(off))
        .map_err(|e| e.to_string())?;
    let mut r = std::io::BufReader::with_capacity(1 << 16, &mut *f);
    let mut at = off;
    let mut h = [0u8; 16];
    while at + 8 <= end {
        if r.read_exact(&mut h[..8]).is_err() {
            break;
        }
        let kind = uint_at::<4>(&h, 0, big).unwrap_or(0) as u32;
        let len = uint_at::<2>(&h, 6, big).unwrap_or(0);
        if len < 8 {
            break; // the reader stops here with an error of its own
        }
        // Bytes after the 8 read: the rest of the record, and for AUXTRACE
        // the trace data that follows it.
        let mut skip = len - 8;
        let mut total = len;
        if kind == RECORD_AUXTRACE && len >= 16 {
            r.read_exact(&mut h[8..16]).map_err(|e| e.to_string())?;
            let aux = uint_at::<8>(&h, 8, big).unwrap_or(u64::MAX);
            if at.saturating_add(len).saturating_add(aux) > end {
                return Err(format!(
                    "an AUXTRACE record at byte {at} claims {aux} bytes of trace data beyond its section"
                ));
            }
            skip = len - 16 + aux;
            total = len + aux;
        }
        if r.seek_relative(skip as i64).is_err() {
            break;
        }
        at = at.saturating_add(total);
    }
    Ok(())
}

/// The unsigned integer of `N` bytes at `at` in `b`, in the file's byte
/// order (`big`), if `b` holds them.
pub(super) fn uint_at<const N: usize>(b: &[u8], at: usize, big: bool) -> Option<u64> {
    let a: [u8; N] = b.get(at..at.checked_add(N)?)?.try_into().ok()?;
    Some(a.iter().enumerate().fold(0u64, |v, (i, &x)| {
        let shift = 8 * if big { N - 1 - i } else { i };
        v | u64::from(x) << shift
    }))
}

/// `HEADER_CMDLINE`'s bit in the feature bitmap.
pub(super) const CMDLINE_BIT: u32 = 11;

/// A string list (`nr`, then `nr` times a length and that many bytes)
/// must fit its section.
pub(super) fn check_string_list(sec: &[u8], big: bool) -> std::result::Result<(), String> {
    let bad = || "its command line claims more strings than its section holds".to_string();
    let u32_at = |at: usize| {
        uint_at::<4>(sec, at, big)
            .map(|v| v as usize)
            .ok_or_else(bad)
    };
    let nr = u32_at(0)?;
    if nr.saturating_mul(4) > sec.len() {
        return Err(bad());
    }
    let mut at = 4usize;
    for _ in 0..nr {
        let len = u32_at(at)?;
        at = at
            .checked_add(4 + len)
            .filter(|&a| a <= sec.len())
            .ok_or_else(bad)?;
    }
    Ok(())
}

/// `HEADER_EVENT_DESC`'s bit in the feature bitmap.
pub(super) const EVENT_DESC_BIT: u32 = 12;

/// The event descriptions (`nr`, `attr_size`, then per event the
/// attribute, `nr_ids`, a length-prefixed string and the ids) must fit the
/// section they are in, counts included.
pub(super) fn check_event_desc(sec: &[u8], big: bool) -> std::result::Result<(), String> {
    let bad = || "its event descriptions claim more than their section holds".to_string();
    let u32_at = |at: usize| {
        uint_at::<4>(sec, at, big)
            .map(|v| v as usize)
            .ok_or_else(bad)
    };
    let nr = u32_at(0)?;
    let attr_size = u32_at(4)?;
    if attr_size < 64 {
        return Err(bad());
    }
    let mut at = 8usize;
    for _ in 0..nr {
        at = at.checked_add(attr_size).ok_or_else(bad)?;
        let nr_ids = u32_at(at)?;
        let len = u32_at(at + 4)?;
        at = at
            .checked_add(8)
            .and_then(|a| a.checked_add(len))
            .and_then(|a| a.checked_add(nr_ids.checked_mul(8)?))
            .filter(|&a| a <= sec.len())
            .ok_or_else(bad)?;
    }
    Ok(())
}

/// The perf.data header (`struct perf_file_header`), checked before
/// linux-perf-data allocates by what it says: every section (attributes,
/// data, event types, and each feature section listed after the data)
/// lies within the file's `len` bytes, and the attribute size is sane.
/// linux-perf-data allocates a feature section's claimed size up front (a
/// flipped byte asked for 46 PB).
pub(super) fn check_sections(f: &mut std::fs::File, len: u64) -> std::result::Result<(), String> {
    let mut h = [0u8; 104];
    f.read_exact(&mut h)
        .map_err(|_| format!("{len} bytes: too short for a perf.data header"))?;
    let big = match &h[..8] {
        b"PERFILE2" => false,
        b"2ELIFREP" => true,
        _ => return Ok(()), // Not ours to judge: the reader names the format.
    };
    let at = |i: usize| uint_at::<8>(&h, i * 8, big).unwrap_or(0);
    let within = |what: &str, off: u64, size: u64| {
        off.checked_add(size)
            .filter(|&end| end <= len)
            .map(|_| ())
            .ok_or_else(|| {
                format!("its {what} section ({size} bytes at {off}) lies outside the file's {len} bytes")
            })
    };
    let attr_size = at(2);
    if !(64..=65536).contains(&attr_size) {
        return Err(format!("an attribute size of {attr_size} bytes"));
    }
    within("attribute", at(3), at(4))?;
    let (data_off, data_size) = (at(5), at(6));
    within("data", data_off, data_size)?;
    within("event type", at(7), at(8))?;
    // Set bits of the 256-bit feature bitmap, in order: one section each.
    let bits: Vec<u32> = (0..256u32)
        .filter(|b| at(9 + (b / 64) as usize) >> (b % 64) & 1 == 1)
        .collect();
    let table = data_off.saturating_add(data_size);
    within("feature table", table, bits.len() as u64 * 16)?;
    f.seek(std::io::SeekFrom::Start(table))
        .map_err(|e| e.to_string())?;
    let mut sections = Vec::with_capacity(bits.len());
    for &bit in &bits {
        let mut e = [0u8; 16];
        f.read_exact(&mut e).map_err(|e| e.to_string())?;
        let (off, size) = (
            uint_at::<8>(&e, 0, big).unwrap_or(u64::MAX),
            uint_at::<8>(&e, 8, big).unwrap_or(u64::MAX),
        );
        within(&format!("feature {bit}"), off, size)?;
        sections.push((bit, off, size));
    }
    // HEADER_EVENT_DESC (bit 12): linux-perf-data reserves its claimed
    // event and id counts before reading them.
    if let Some(&(_, off, size)) = sections.iter().find(|(b, _, _)| *b == EVENT_DESC_BIT) {
        let mut sec = vec![0u8; size as usize];
        f.seek(std::io::SeekFrom::Start(off))
            .map_err(|e| e.to_string())?;
        f.read_exact(&mut sec).map_err(|e| e.to_string())?;
        check_event_desc(&sec, big)?;
    }
    check_auxtrace(f, data_off, data_size, big)?;
    // HEADER_CMDLINE (bit 11): a string list whose claimed count the
    // reader reserves up to.
    if let Some(&(_, off, size)) = sections.iter().find(|(b, _, _)| *b == CMDLINE_BIT) {
        let mut sec = vec![0u8; size as usize];
        f.seek(std::io::SeekFrom::Start(off))
            .map_err(|e| e.to_string())?;
        f.read_exact(&mut sec).map_err(|e| e.to_string())?;
        check_string_list(&sec, big)?;
    }
    Ok(())
}
