//! Byte-level building blocks shared by the stream codec and the session
//! file: tag values, LEB128 varints, zigzag, and a bounds-checked body reader.
//!
//! Every multi-byte fixed-width integer is little-endian. Every varint is
//! unsigned LEB128 (7 bits per byte, low group first, high bit = "more"),
//! at most 10 bytes; signed values are zigzag-mapped first.

use crate::error::{Error, Result};

/// Tag bytes of the chunk event stream. See `docs/FORMAT.md`.
pub mod tag {
    /// Never written: a zero byte where a tag should be means zero-filled data.
    pub const INVALID: u8 = 0x00;
    /// `CpuSwitch`: cpu uvar.
    pub const CPU_SWITCH: u8 = 0x01;
    /// `TaskSwitch`: pid uvar, (tid - pid) zigzag svar.
    pub const TASK_SWITCH: u8 = 0x02;
    /// `Mode { kernel: false }`, no operand.
    pub const MODE_USER: u8 = 0x03;
    /// `Mode { kernel: true }`, no operand.
    pub const MODE_KERNEL: u8 = 0x04;
    /// `CookieSwitch` spelled out: cookie u64 LE; fills the next cookie slot.
    pub const COOKIE_SWITCH: u8 = 0x05;
    /// `CgroupSwitch` (since version 4): cgroup id uvar (0: none); samples
    /// that follow were taken in this cgroup. Unset by `CpuSwitch`.
    pub const CGROUP_SWITCH: u8 = 0x06;
    /// `TimeUnit` (since version 6): nanoseconds per tick uvar
    /// (`1..=MAX_TIME_UNIT_NS`) of the sample times that follow in the chunk
    /// (1 until one is written); resets the time state.
    pub const TIME_UNIT: u8 = 0x07;
    /// `Sample`: absolute offset uvar.
    pub const SAMPLE: u8 = 0x10;
    /// `Sample`: zigzag delta against the last offset of the current cookie slot.
    pub const SAMPLE_DELTA: u8 = 0x11;
    /// `StackSample` (since version 2): absolute offset uvar, stack id as a
    /// zigzag delta against the last stack id of the current cookie slot.
    pub const STACK_SAMPLE: u8 = 0x12;
    /// `StackSample`: offset as for [`SAMPLE_DELTA`], stack id delta as for
    /// [`STACK_SAMPLE`].
    pub const STACK_SAMPLE_DELTA: u8 = 0x13;
    /// `StackSample` on the same stack as the last one of the current
    /// cookie slot: absolute offset uvar only.
    pub const STACK_SAMPLE_SAME: u8 = 0x14;
    /// `StackSample` on the same stack as the last one of the current
    /// cookie slot: offset delta only.
    pub const STACK_SAMPLE_SAME_DELTA: u8 = 0x15;
    /// First timed sample tag (since version 6): `0x16`..=`0x1B` are
    /// `0x10`..=`0x15` (tag - [`TIMED`]) followed by the sample's time, a
    /// zigzag svar against the time predicted from the CPU run's last two
    /// samples (see docs/FORMAT.md).
    pub const TIMED_SAMPLE: u8 = 0x16;
    /// Last timed sample tag (`STACK_SAMPLE_SAME_DELTA` + [`TIMED`]).
    pub const TIMED_STACK_SAMPLE_SAME_DELTA: u8 = 0x1b;
    /// What a sample tag's timed form adds to it.
    pub const TIMED: u8 = TIMED_SAMPLE - SAMPLE;
    /// Marker `Comm`: len uvar + body.
    pub const COMM: u8 = 0x20;
    /// Marker `CookieDef`: len uvar + body.
    pub const COOKIE_DEF: u8 = 0x21;
    /// Marker `ModuleLoad`: len uvar + body.
    pub const MODULE_LOAD: u8 = 0x22;
    /// Marker `Lost`: len uvar + body.
    pub const LOST: u8 = 0x23;
    /// Marker `Throttle`: len uvar + body.
    pub const THROTTLE: u8 = 0x24;
    /// Marker `StackDef` (since version 2): len uvar + body.
    pub const STACK_DEF: u8 = 0x25;
    /// Marker `StackDefOn` (since version 3): len uvar + body.
    pub const STACK_DEF_ON: u8 = 0x26;
    /// Marker `CgroupDef` (since version 4): len uvar + body.
    pub const CGROUP_DEF: u8 = 0x27;
    /// Marker `OffCpu` (since version 5): len uvar + body.
    pub const OFF_CPU: u8 = 0x28;
    /// Marker `JitCode` (since version 7): len uvar + body.
    pub const JIT_CODE: u8 = 0x29;
    /// First `CookieSwitch` back-reference tag: slot = tag - COOKIE_REF_BASE.
    pub const COOKIE_REF_BASE: u8 = 0x40;
    /// Last `CookieSwitch` back-reference tag.
    pub const COOKIE_REF_LAST: u8 = 0x7f;
}

/// Largest time unit a chunk may declare (`TimeUnit`): one second.
pub const MAX_TIME_UNIT_NS: u64 = 1_000_000_000;

/// Number of chunk-local cookie slots (one back-reference tag each).
pub const COOKIE_SLOTS: usize = (tag::COOKIE_REF_LAST - tag::COOKIE_REF_BASE) as usize + 1;

/// Longest LEB128 encoding of a u64.
pub const MAX_VARINT: usize = 10;

/// Bytes the LEB128 encoding of `v` takes (1..=10).
#[inline(always)]
pub fn uvar_len(v: u64) -> usize {
    // bits needed (at least 1), rounded up to groups of 7.
    let bits = 64 - (v | 1).leading_zeros();
    (bits as usize).div_ceil(7)
}

/// Zigzag: 0, -1, 1, -2, ... → 0, 1, 2, 3, ...
#[inline(always)]
pub fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// Inverse of [`zigzag`].
#[inline(always)]
pub fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Writes `v` as LEB128 into `out` at `n`; returns the new position.
/// `out` must have room for 10 bytes after `n`.
#[inline(always)]
pub fn put_uvar<const N: usize>(out: &mut [u8; N], mut n: usize, mut v: u64) -> usize {
    while v >= 0x80 {
        out[n] = (v as u8) | 0x80;
        v >>= 7;
        n += 1;
    }
    out[n] = v as u8;
    n + 1
}

/// Appends `v` as LEB128.
#[inline]
pub fn push_uvar(out: &mut Vec<u8>, v: u64) {
    let mut tmp = [0u8; MAX_VARINT];
    let n = put_uvar(&mut tmp, 0, v);
    out.extend_from_slice(&tmp[..n]);
}

/// Why a varint could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VarintError {
    /// The buffer ended first.
    Truncated,
    /// More than 64 bits.
    Overflow,
}

/// Reads a LEB128 varint at `pos`; returns it and the position after it.
#[inline(always)]
pub fn read_uvar(buf: &[u8], pos: usize) -> Result<(u64, usize), VarintError> {
    match buf.get(pos) {
        Some(&b) if b < 0x80 => Ok((u64::from(b), pos + 1)),
        Some(_) => read_uvar_multi(buf, pos),
        None => Err(VarintError::Truncated),
    }
}

#[inline]
fn read_uvar_multi(buf: &[u8], pos: usize) -> Result<(u64, usize), VarintError> {
    // Fast path: 10 bytes available, so no per-byte bounds check is needed.
    if let Some(win) = buf.get(pos..pos + MAX_VARINT) {
        let mut v = 0u64;
        for (i, &b) in win.iter().enumerate() {
            if i == MAX_VARINT - 1 && b > 1 {
                return Err(VarintError::Overflow);
            }
            v |= u64::from(b & 0x7f) << (7 * i);
            if b < 0x80 {
                return Ok((v, pos + i + 1));
            }
        }
        return Err(VarintError::Overflow);
    }
    let mut v = 0u64;
    for i in 0..MAX_VARINT {
        let Some(&b) = buf.get(pos + i) else {
            return Err(VarintError::Truncated);
        };
        if i == MAX_VARINT - 1 && b > 1 {
            return Err(VarintError::Overflow);
        }
        v |= u64::from(b & 0x7f) << (7 * i);
        if b < 0x80 {
            return Ok((v, pos + i + 1));
        }
    }
    Err(VarintError::Overflow)
}

/// Appends a length-prefixed UTF-8 string.
pub fn push_str(out: &mut Vec<u8>, s: &str) {
    push_bytes(out, s.as_bytes());
}

/// Appends length-prefixed bytes.
pub fn push_bytes(out: &mut Vec<u8>, b: &[u8]) {
    push_uvar(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// Appends a bool as one byte, 0 or 1.
pub fn push_bool(out: &mut Vec<u8>, b: bool) {
    out.push(u8::from(b));
}

/// Appends a length-prefixed struct body built by `f`.
pub fn push_struct(out: &mut Vec<u8>, f: impl FnOnce(&mut Vec<u8>)) {
    let mut body = Vec::new();
    f(&mut body);
    push_bytes(out, &body);
}

/// A bounds-checked reader over a record body. Errors are
/// [`Error::Malformed`] with the absolute offset (`base` + position).
#[derive(Debug, Clone)]
pub struct BodyReader<'a> {
    buf: &'a [u8],
    pos: usize,
    base: u64,
    what: &'static str,
}

impl<'a> BodyReader<'a> {
    /// Reads `buf`, which starts at absolute offset `base`, for errors naming `what`.
    pub fn new(buf: &'a [u8], base: u64, what: &'static str) -> Self {
        BodyReader {
            buf,
            pos: 0,
            base,
            what,
        }
    }

    /// Bytes left.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// Absolute offset of the next byte.
    pub fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    fn err(&self, reason: String) -> Error {
        Error::malformed(self.what, self.offset(), reason)
    }

    /// One byte.
    pub fn u8(&mut self, field: &str) -> Result<u8> {
        match self.buf.get(self.pos) {
            Some(&b) => {
                self.pos += 1;
                Ok(b)
            }
            None => Err(self.err(format!("body ends before field `{field}`"))),
        }
    }

    /// A bool byte (0 or 1; anything else is an error).
    pub fn bool(&mut self, field: &str) -> Result<bool> {
        let at = self.offset();
        match self.u8(field)? {
            0 => Ok(false),
            1 => Ok(true),
            v => Err(Error::malformed(
                self.what,
                at,
                format!("field `{field}`: bool byte {v}, expected 0 or 1"),
            )),
        }
    }

    /// A LEB128 varint.
    pub fn uvar(&mut self, field: &str) -> Result<u64> {
        match read_uvar(self.buf, self.pos) {
            Ok((v, next)) => {
                self.pos = next;
                Ok(v)
            }
            Err(VarintError::Truncated) => {
                Err(self.err(format!("body ends inside field `{field}`")))
            }
            Err(VarintError::Overflow) => {
                Err(self.err(format!("field `{field}`: varint longer than 64 bits")))
            }
        }
    }

    /// A LEB128 varint that must fit a u32.
    pub fn u32var(&mut self, field: &str) -> Result<u32> {
        let at = self.offset();
        let v = self.uvar(field)?;
        u32::try_from(v).map_err(|_| {
            Error::malformed(
                self.what,
                at,
                format!("field `{field}`: {v} does not fit 32 bits"),
            )
        })
    }

    /// A fixed 8-byte little-endian u64.
    pub fn u64le(&mut self, field: &str) -> Result<u64> {
        let b = self.take(8, field)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    /// `n` raw bytes.
    pub fn take(&mut self, n: usize, field: &str) -> Result<&'a [u8]> {
        if n > self.remaining() {
            return Err(self.err(format!(
                "field `{field}` needs {n} bytes, {} left in the body",
                self.remaining()
            )));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    /// Length-prefixed bytes. The length is checked against the body before
    /// anything is allocated.
    pub fn bytes(&mut self, field: &str) -> Result<&'a [u8]> {
        let at = self.offset();
        let n = self.uvar(field)?;
        if n > self.remaining() as u64 {
            return Err(Error::malformed(
                self.what,
                at,
                format!(
                    "field `{field}`: length {n} but only {} bytes left in the body",
                    self.remaining()
                ),
            ));
        }
        self.take(n as usize, field)
    }

    /// A length-prefixed UTF-8 string.
    pub fn string(&mut self, field: &str) -> Result<String> {
        let at = self.offset();
        let b = self.bytes(field)?;
        match std::str::from_utf8(b) {
            Ok(s) => Ok(s.to_owned()),
            Err(e) => Err(Error::malformed(
                self.what,
                at,
                format!("field `{field}`: invalid UTF-8: {e}"),
            )),
        }
    }

    /// An option: presence byte 0/1, then the value.
    pub fn option<T>(
        &mut self,
        field: &str,
        f: impl FnOnce(&mut Self) -> Result<T>,
    ) -> Result<Option<T>> {
        if self.bool(field)? {
            Ok(Some(f(self)?))
        } else {
            Ok(None)
        }
    }

    /// A length-prefixed struct body: returns a reader over it and skips it.
    pub fn struct_body(&mut self, field: &str) -> Result<BodyReader<'a>> {
        let base = self.offset();
        let b = self.bytes(field)?;
        let hdr = self.offset() - base - b.len() as u64;
        Ok(BodyReader {
            buf: b,
            pos: 0,
            base: base + hdr,
            what: self.what,
        })
    }

    /// A count of items that each take at least `min_item_bytes`, checked
    /// against the bytes left so that a forged count cannot make the caller
    /// allocate more than the body holds.
    pub fn count(&mut self, field: &str, min_item_bytes: usize) -> Result<usize> {
        let at = self.offset();
        let n = self.uvar(field)?;
        let max = (self.remaining() / min_item_bytes.max(1)) as u64;
        if n > max {
            return Err(Error::malformed(
                self.what,
                at,
                format!(
                    "field `{field}`: count {n} cannot fit in the {} bytes left",
                    self.remaining()
                ),
            ));
        }
        Ok(n as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varint_lengths_and_round_trip() {
        for (v, len) in [
            (0u64, 1),
            (127, 1),
            (128, 2),
            (16383, 2),
            (16384, 3),
            (u64::MAX, 10),
        ] {
            assert_eq!(uvar_len(v), len, "len of {v}");
            let mut out = Vec::new();
            push_uvar(&mut out, v);
            assert_eq!(out.len(), len);
            assert_eq!(read_uvar(&out, 0), Ok((v, len)));
            // Also through the slow (short buffer) and fast (padded) paths.
            out.extend_from_slice(&[0xff; 12]);
            assert_eq!(read_uvar(&out, 0), Ok((v, len)));
        }
    }

    #[test]
    fn varint_overflow_and_truncation() {
        assert_eq!(read_uvar(&[0x80, 0x80], 0), Err(VarintError::Truncated));
        assert_eq!(read_uvar(&[], 0), Err(VarintError::Truncated));
        let eleven = [0xffu8; 11];
        assert_eq!(read_uvar(&eleven, 0), Err(VarintError::Overflow));
        // 10th byte may only carry the top bit.
        let mut max = [0xffu8; 10];
        max[9] = 0x02;
        assert_eq!(read_uvar(&max, 0), Err(VarintError::Overflow));
        max[9] = 0x01;
        assert_eq!(read_uvar(&max, 0), Ok((u64::MAX, 10)));
    }

    #[test]
    fn zigzag_round_trip() {
        for v in [0i64, -1, 1, -2, i64::MIN, i64::MAX, 123_456, -987_654] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
        assert_eq!(zigzag(-1), 1);
        assert_eq!(zigzag(1), 2);
    }

    #[test]
    fn body_reader_rejects_forged_lengths() {
        let mut buf = Vec::new();
        push_uvar(&mut buf, 1 << 40); // a string "length" far past the body
        buf.push(b'x');
        let err = BodyReader::new(&buf, 100, "test")
            .string("name")
            .unwrap_err();
        assert!(matches!(err, Error::Malformed { offset: 100, .. }), "{err}");
        let err = BodyReader::new(&buf, 0, "test").count("n", 1).unwrap_err();
        assert!(err.to_string().contains("count"), "{err}");
    }
}
