//! profkit-debuginfod against a scripted local server.

mod config;
mod fetch;
mod hostile;
mod server;

use profkit_debuginfod::Config;
use std::path::Path;
use std::time::Duration;

/// An ELF file whose `.note.gnu.build-id` holds `id`, `pad` bytes of
/// `.data` after it.
pub fn elf(id: &[u8], pad: usize) -> Vec<u8> {
    use object::write::Object;
    use object::{Architecture, BinaryFormat, Endianness, SectionKind};
    let mut obj = Object::new(BinaryFormat::Elf, Architecture::X86_64, Endianness::Little);
    let note_sec = obj.add_section(
        Vec::new(),
        b".note.gnu.build-id".to_vec(),
        SectionKind::Note,
    );
    let mut note = Vec::new();
    note.extend_from_slice(&4u32.to_le_bytes());
    note.extend_from_slice(&(id.len() as u32).to_le_bytes());
    note.extend_from_slice(&object::elf::NT_GNU_BUILD_ID.to_le_bytes());
    note.extend_from_slice(b"GNU\0");
    note.extend_from_slice(id);
    while note.len() % 4 != 0 {
        note.push(0);
    }
    obj.append_section_data(note_sec, &note, 4);
    if pad > 0 {
        let data = obj.add_section(Vec::new(), b".data".to_vec(), SectionKind::Data);
        obj.append_section_data(data, &vec![0xa5; pad], 1);
    }
    obj.write().unwrap()
}

/// A config with `urls`, a 5 s timeout and its cache in `dir`.
pub fn config(dir: &Path, urls: &[&str]) -> Config {
    Config {
        urls: urls.iter().map(|u| u.to_string()).collect(),
        timeout: Duration::from_secs(5),
        max_size: None,
        max_time: None,
        cache: dir.join("cache"),
        verbose: false,
        offline: false,
    }
}

/// The server path of `kind` for `id`.
pub fn path(id: &[u8], what: &str) -> String {
    format!("/buildid/{}/{what}", profkit_debuginfod::hex(id))
}

/// Temporary files left in `dir`.
pub fn temps(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n.starts_with(".profkit-tmp"))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn elf_helper_carries_its_build_id() {
    let f = elf(&[1, 2, 3, 4], 10);
    assert_eq!(profkit_elf::build_id(&f[..]), Some(vec![1, 2, 3, 4]));
}

#[test]
fn client_is_send_and_sync() {
    fn check<T: Send + Sync>() {}
    check::<profkit_debuginfod::Client>();
}

/// An https server on the internet, by the build-id of this machine's
/// `/bin/ls`: run with `PROFKIT_DEBUGINFOD_LIVE=https://… cargo test -- --ignored`.
#[test]
#[ignore = "needs the network"]
fn live_https_server() {
    let Ok(url) = std::env::var("PROFKIT_DEBUGINFOD_LIVE") else {
        return;
    };
    let ls = std::fs::read("/bin/ls").unwrap();
    let id = profkit_elf::build_id(&ls[..]).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path(), &[&url]);
    cfg.verbose = true;
    cfg.timeout = Duration::from_secs(30);
    let c = profkit_debuginfod::Client::new(cfg);
    let r = c.fetch(&id, &profkit_debuginfod::Kind::Executable);
    eprintln!("{r:?} {:?}", c.stats());
    assert!(r.is_ok(), "{r:?}");
}
