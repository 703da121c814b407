//! A writer of dumps, for tests (this crate's and other crates') and
//! tools such as the fuzz target. Not a runtime's writer: it builds the
//! file in memory and checks nothing.

use crate::header::{HEADER_SIZE, MAGIC};
use crate::record::{
    DebugEntry, JIT_CODE_CLOSE, JIT_CODE_DEBUG_INFO, JIT_CODE_LOAD, JIT_CODE_MOVE,
    JIT_CODE_UNWINDING_INFO, PREFIX_SIZE,
};

/// Builds a dump in memory, the way runtimes write them: code loads
/// unpadded (as Python's), debug and unwinding infos padded to 8 bytes.
/// For tests and tools only. Sizes over `u32::MAX` saturate (the record is
/// then wrong, as a test may want).
#[derive(Debug, Clone)]
pub struct DumpWriter {
    bytes: Vec<u8>,
}

impl DumpWriter {
    /// A dump's header (version 1, 40 bytes, `elf_mach` 62: x86-64,
    /// flags 0).
    pub fn new(pid: u32, timestamp: u64) -> Self {
        let mut w = DumpWriter { bytes: Vec::new() };
        w.u32(MAGIC)
            .u32(1)
            .u32(HEADER_SIZE as u32)
            .u32(62)
            .u32(0)
            .u32(pid)
            .u64(timestamp)
            .u64(0);
        w
    }

    /// A code load of `code` at `addr` (vma = code_addr = `addr`).
    #[allow(clippy::too_many_arguments)]
    pub fn code_load(
        &mut self,
        time: u64,
        pid: u32,
        tid: u32,
        addr: u64,
        code: &[u8],
        index: u64,
        name: &str,
    ) -> &mut Self {
        let size = PREFIX_SIZE + 40 + name.len() + 1 + code.len();
        self.prefix(JIT_CODE_LOAD, size, time)
            .u32(pid)
            .u32(tid)
            .u64(addr)
            .u64(addr)
            .u64(code.len() as u64)
            .u64(index)
            .raw(name.as_bytes())
            .raw(&[0])
            .raw(code)
    }

    /// A code move from `old` to `new` (vma = `new`).
    #[allow(clippy::too_many_arguments)]
    pub fn code_move(
        &mut self,
        time: u64,
        pid: u32,
        tid: u32,
        old: u64,
        new: u64,
        size: u64,
        index: u64,
    ) -> &mut Self {
        self.prefix(JIT_CODE_MOVE, PREFIX_SIZE + 48, time)
            .u32(pid)
            .u32(tid)
            .u64(new)
            .u64(old)
            .u64(new)
            .u64(size)
            .u64(index)
    }

    /// A debug info; an entry whose file is the previous entry's is
    /// written `"\xff\0"`, as the spec allows.
    pub fn debug_info(&mut self, time: u64, code_addr: u64, entries: &[DebugEntry]) -> &mut Self {
        let mut body = Vec::new();
        body.extend_from_slice(&code_addr.to_le_bytes());
        body.extend_from_slice(&(entries.len() as u64).to_le_bytes());
        let mut prev: Option<&str> = None;
        for e in entries {
            body.extend_from_slice(&e.addr.to_le_bytes());
            body.extend_from_slice(&e.line.to_le_bytes());
            body.extend_from_slice(&e.discrim.to_le_bytes());
            if prev == Some(&*e.file) {
                body.push(0xff);
            } else {
                body.extend_from_slice(e.file.as_bytes());
            }
            body.push(0);
            prev = Some(&e.file);
        }
        self.padded(JIT_CODE_DEBUG_INFO, time, &body)
    }

    /// An unwinding info: data = `eh_frame` then `eh_frame_hdr`.
    pub fn unwinding_info(
        &mut self,
        time: u64,
        eh_frame: &[u8],
        eh_frame_hdr: &[u8],
        mapped_size: u64,
    ) -> &mut Self {
        let mut body = Vec::new();
        body.extend_from_slice(&((eh_frame.len() + eh_frame_hdr.len()) as u64).to_le_bytes());
        body.extend_from_slice(&(eh_frame_hdr.len() as u64).to_le_bytes());
        body.extend_from_slice(&mapped_size.to_le_bytes());
        body.extend_from_slice(eh_frame);
        body.extend_from_slice(eh_frame_hdr);
        self.padded(JIT_CODE_UNWINDING_INFO, time, &body)
    }

    /// A close record.
    pub fn close(&mut self, time: u64) -> &mut Self {
        self.prefix(JIT_CODE_CLOSE, PREFIX_SIZE, time)
    }

    /// Bytes as they are (a record of an unknown kind, a lie, a tail).
    pub fn raw(&mut self, bytes: &[u8]) -> &mut Self {
        self.bytes.extend_from_slice(bytes);
        self
    }

    /// The dump so far.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    fn padded(&mut self, id: u32, time: u64, body: &[u8]) -> &mut Self {
        let size = (PREFIX_SIZE + body.len()).next_multiple_of(8);
        let pad = size - PREFIX_SIZE - body.len();
        self.prefix(id, size, time).raw(body).raw(&[0; 8][..pad])
    }

    fn prefix(&mut self, id: u32, size: usize, time: u64) -> &mut Self {
        self.u32(id)
            .u32(u32::try_from(size).unwrap_or(u32::MAX))
            .u64(time)
    }

    fn u32(&mut self, v: u32) -> &mut Self {
        self.raw(&v.to_le_bytes())
    }

    fn u64(&mut self, v: u64) -> &mut Self {
        self.raw(&v.to_le_bytes())
    }
}
