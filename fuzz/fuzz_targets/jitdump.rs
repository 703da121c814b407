//! Jitdump files: `parse_record` record after record, and `DumpReader`
//! over a file in steps the first byte chooses.
#![no_main]
use libfuzzer_sys::fuzz_target;
use profkit_jitdump::{parse_record, DumpReader, Header, Limits};

fuzz_target!(|data: &[u8]| {
    let limits = Limits {
        max_record: 1 << 16,
        max_name: 64,
        max_code: 1024,
        max_debug_entries: 256,
        max_unwind: 1024,
    };
    let _ = Header::parse(data);
    let mut rest = data.get(40..).unwrap_or(&[]);
    while let Ok(Some((_, len))) = parse_record(rest, &limits) {
        rest = &rest[len..];
    }

    let step = u64::from(data.first().copied().unwrap_or(0));
    let Ok(mut file) = tempfile::tempfile() else {
        return;
    };
    if std::io::Write::write_all(&mut file, data).is_err() {
        return;
    }
    let mut reader = DumpReader::new(limits);
    for _ in 0..=data.len() {
        match reader.read(&file, step) {
            Ok(o) if o.more => {}
            _ => break,
        }
    }
});
