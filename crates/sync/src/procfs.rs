//! Reading the state that existed before sampling started: processes and
//! their executable mappings (`/proc/PID/maps`), thread names, the kernel
//! text range (`/proc/kallsyms`) and modules (`/proc/modules`).

use std::path::{Path, PathBuf};

/// One executable mapping from `/proc/PID/maps`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcMap {
    /// Start address.
    pub start: u64,
    /// End address (exclusive).
    pub end: u64,
    /// File offset of `start`.
    pub pgoff: u64,
    /// Device (`makedev(major, minor)` as the kernel encodes it in MMAP2: major << 8 | minor... we keep (major << 32 | minor)).
    pub dev: u64,
    /// Inode (0 for anonymous memory).
    pub inode: u64,
    /// Path, `[vdso]`, or empty for anonymous memory.
    pub path: String,
}

/// Device number as profkit stores it: `major << 32 | minor`, for both
/// `/proc/PID/maps` (hex `maj:min`) and MMAP2 records (`maj`, `min`).
pub fn dev_number(major: u32, minor: u32) -> u64 {
    ((major as u64) << 32) | minor as u64
}

/// Parses the executable lines of a `/proc/PID/maps` text.
pub fn parse_maps(text: &str) -> Vec<ProcMap> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut it = line.splitn(6, ' ');
        let (Some(range), Some(perms), Some(off), Some(dev), Some(ino)) =
            (it.next(), it.next(), it.next(), it.next(), it.next())
        else {
            continue;
        };
        if !perms.contains('x') {
            continue;
        }
        let path = it.next().unwrap_or("").trim_start().to_string();
        let Some((a, z)) = range.split_once('-') else {
            continue;
        };
        let (Ok(start), Ok(end), Ok(pgoff)) = (
            u64::from_str_radix(a, 16),
            u64::from_str_radix(z, 16),
            u64::from_str_radix(off, 16),
        ) else {
            continue;
        };
        let dev = dev
            .split_once(':')
            .and_then(|(ma, mi)| {
                Some(dev_number(
                    u32::from_str_radix(ma, 16).ok()?,
                    u32::from_str_radix(mi, 16).ok()?,
                ))
            })
            .unwrap_or(0);
        out.push(ProcMap {
            start,
            end,
            pgoff,
            dev,
            inode: ino.parse().unwrap_or(0),
            path,
        });
    }
    out
}

/// A process found in `/proc`.
#[derive(Debug, Clone)]
pub struct ProcProcess {
    /// Process id.
    pub pid: u32,
    /// Command name of the main thread.
    pub comm: String,
    /// Threads other than the main one: (tid, comm).
    pub threads: Vec<(u32, String)>,
    /// Executable mappings.
    pub maps: Vec<ProcMap>,
}

fn read_comm(path: &Path) -> Option<String> {
    Some(
        std::fs::read_to_string(path)
            .ok()?
            .trim_end_matches('\n')
            .to_string(),
    )
}

/// Reads one process from `/proc` (None if it is gone or unreadable).
pub fn read_process(proc_root: &Path, pid: u32) -> Option<ProcProcess> {
    let dir = proc_root.join(pid.to_string());
    let comm = read_comm(&dir.join("comm"))?;
    let maps = parse_maps(&std::fs::read_to_string(dir.join("maps")).ok()?);
    let mut threads = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir.join("task")) {
        for e in rd.flatten() {
            let Some(tid) = e.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            if tid != pid {
                if let Some(c) = read_comm(&e.path().join("comm")) {
                    threads.push((tid, c));
                }
            }
        }
    }
    Some(ProcProcess {
        pid,
        comm,
        threads,
        maps,
    })
}

/// Every process in `/proc` (processes that vanish meanwhile are skipped).
pub fn read_all_processes(proc_root: &Path) -> Vec<ProcProcess> {
    let Ok(rd) = std::fs::read_dir(proc_root) else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| read_process(proc_root, pid))
        .collect()
}

/// A loaded kernel module.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelModule {
    /// Module name.
    pub name: String,
    /// Load address of its core text.
    pub base: u64,
    /// Size in bytes.
    pub size: u64,
}

/// Parses `/proc/modules` (`name size refs deps state addr`).
pub fn parse_modules(text: &str) -> Vec<KernelModule> {
    let mut v: Vec<KernelModule> = text
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let base = u64::from_str_radix(f.get(5)?.trim_start_matches("0x"), 16).ok()?;
            Some(KernelModule {
                name: f[0].to_string(),
                size: f.get(1)?.parse().ok()?,
                base,
            })
        })
        .filter(|m| m.base != 0)
        .collect();
    v.sort_by_key(|m| m.base);
    v
}

/// The kernel's text range from kallsyms: (`_text` or `_stext`, `_etext`).
/// None when the addresses are hidden (kptr_restrict) or unreadable.
pub fn parse_kernel_text(kallsyms: &str) -> Option<(u64, u64)> {
    let (mut text, mut stext, mut etext) = (None, None, None);
    for line in kallsyms.lines() {
        let mut f = line.split_whitespace();
        let (Some(a), Some(_t), Some(name)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        let slot = match name {
            "_text" => &mut text,
            "_stext" => &mut stext,
            "_etext" => &mut etext,
            _ => continue,
        };
        *slot = u64::from_str_radix(a, 16).ok();
        if text.is_some() && etext.is_some() {
            break;
        }
    }
    let start = text.or(stext)?;
    let end = etext?;
    (start != 0 && end > start).then_some((start, end))
}

/// Where the kernel's `/proc` and `/sys` live (overridable for tests).
#[derive(Debug, Clone)]
pub struct ProcPaths {
    /// `/proc`.
    pub proc_root: PathBuf,
    /// `/sys`.
    pub sys_root: PathBuf,
}

impl Default for ProcPaths {
    fn default() -> Self {
        Self {
            proc_root: "/proc".into(),
            sys_root: "/sys".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_maps_lines() {
        let t = "55d0c3a00000-55d0c3a28000 r--p 00000000 fd:01 1234   /usr/bin/my prog\n\
                 55d0c3a28000-55d0c3b00000 r-xp 00028000 fd:01 1234   /usr/bin/my prog\n\
                 7ffd1c9f0000-7ffd1c9f2000 r-xp 00000000 00:00 0      [vdso]\n\
                 7f0000000000-7f0000001000 rwxp 00000000 00:00 0 \n";
        let m = parse_maps(t);
        assert_eq!(m.len(), 3);
        assert_eq!(m[0].path, "/usr/bin/my prog");
        assert_eq!(
            (m[0].start, m[0].pgoff, m[0].inode),
            (0x55d0c3a28000, 0x28000, 1234)
        );
        assert_eq!(m[0].dev, dev_number(0xfd, 1));
        assert_eq!(m[1].path, "[vdso]");
        assert_eq!(m[2].path, "");
    }

    #[test]
    fn parses_modules_and_kernel_text() {
        let m = parse_modules(
            "ext4 1000 1 - Live 0xffffffffc0100000\nx 10 0 - Live 0x0000000000000000\n",
        );
        assert_eq!(
            m,
            vec![KernelModule {
                name: "ext4".into(),
                base: 0xffffffffc0100000,
                size: 1000
            }]
        );
        let k = "ffffffff81000000 T _text\nffffffff81000000 T _stext\nffffffff82000000 T _etext\n";
        assert_eq!(
            parse_kernel_text(k),
            Some((0xffffffff81000000, 0xffffffff82000000))
        );
        assert_eq!(
            parse_kernel_text("0000000000000000 T _text\n0000000000000000 T _etext\n"),
            None
        );
    }

    #[test]
    fn reads_own_process() {
        let p = read_process(Path::new("/proc"), std::process::id()).unwrap();
        assert!(!p.comm.is_empty());
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        assert!(p.maps.iter().any(|m| Path::new(&m.path) == exe));
    }
}
