//! Kernel-side resolution: the kernel image's text range and the loaded
//! modules, each with its cookie.
//!
//! Two sources give the same facts: a live session reads `/proc/kallsyms`
//! (`_text`, `_etext`), `/sys/kernel/notes` and `/proc/modules`
//! ([`KernelMaps::read`], [`KernelMaps::refresh_modules`]); a perf.data
//! file carries them as perf's `[kernel.kallsyms]_text` mapping (whose
//! `pgoff` is the address of `_text`) and pid −1 module mappings, given
//! here through [`KernelMaps::set_text`] and [`KernelMaps::add_module`].
//! Both derive cookies with the format's rules, so the same kernel and
//! module get the same cookie either way (by build-id when known; else by
//! `_text`, or by module name and load address).

use crate::procfs::{parse_kernel_text, parse_modules, KernelModule, ProcPaths};
use profkit_eventlog::{build_id_from_notes, Cookie, CookieEntry};

pub use profkit_eventlog::kernel_entry;

/// A module with its cookie.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadedModule {
    /// Name, base, size.
    pub module: KernelModule,
    /// Its cookie.
    pub cookie: Cookie,
}

/// Kernel text and modules.
#[derive(Debug, Clone, Default)]
pub struct KernelMaps {
    /// `[_text, _etext)`, when kallsyms shows addresses.
    pub text: Option<(u64, u64)>,
    /// The kernel's cookie entry.
    pub kernel: Option<CookieEntry>,
    /// Modules sorted by base.
    pub modules: Vec<LoadedModule>,
    modules_text: String,
}

/// The cookie entry of a module (the format's derivation,
/// [`profkit_eventlog::module_entry`], for a `/proc/modules` line).
pub fn module_entry(m: &KernelModule, build_id: Option<Vec<u8>>) -> CookieEntry {
    profkit_eventlog::module_entry(&m.name, m.base, build_id)
}

impl KernelMaps {
    /// Reads kallsyms and the kernel's notes; modules come from
    /// [`KernelMaps::refresh_modules`].
    pub fn read(paths: &ProcPaths) -> Self {
        let kallsyms =
            std::fs::read_to_string(paths.proc_root.join("kallsyms")).unwrap_or_default();
        let text = parse_kernel_text(&kallsyms);
        let build_id = std::fs::read(paths.sys_root.join("kernel/notes"))
            .ok()
            .and_then(|n| build_id_from_notes(&n));
        Self {
            text,
            kernel: Some(kernel_entry(text.map(|t| t.0).unwrap_or(0), build_id)),
            ..Self::default()
        }
    }

    /// Re-reads `/proc/modules`; returns the modules that appeared.
    pub fn refresh_modules(&mut self, paths: &ProcPaths) -> Vec<(LoadedModule, CookieEntry)> {
        let Ok(text) = std::fs::read_to_string(paths.proc_root.join("modules")) else {
            return Vec::new();
        };
        if text == self.modules_text {
            return Vec::new();
        }
        self.modules_text = text;
        let mut added = Vec::new();
        let mut next = Vec::new();
        for m in parse_modules(&self.modules_text) {
            if let Some(old) = self.modules.iter().find(|o| o.module == m) {
                next.push(old.clone());
                continue;
            }
            let bid = std::fs::read(
                paths
                    .sys_root
                    .join("module")
                    .join(&m.name)
                    .join("notes/.note.gnu.build-id"),
            )
            .ok()
            .and_then(|n| build_id_from_notes(&n));
            let e = module_entry(&m, bid);
            let lm = LoadedModule {
                module: m,
                cookie: e.cookie,
            };
            added.push((lm.clone(), e));
            next.push(lm);
        }
        self.modules = next;
        added
    }

    /// Sets the kernel image from another source than `/proc`: offsets are
    /// from `text_start` (`_text`), and `[text_start, text_end)` is its
    /// text, cut short at the first module above it (as perf ends its
    /// kernel map where the modules begin). Returns the image's cookie entry.
    pub fn set_text(
        &mut self,
        text_start: u64,
        text_end: u64,
        build_id: Option<Vec<u8>>,
    ) -> CookieEntry {
        let e = kernel_entry(text_start, build_id);
        let end = self
            .modules
            .iter()
            .map(|m| m.module.base)
            .filter(|&b| b > text_start)
            .fold(text_end, u64::min);
        self.text = Some((text_start, end.max(text_start)));
        self.kernel = Some(e.clone());
        e
    }

    /// Adds a module met other than through `/proc/modules` (a perf.data
    /// mapping); a module it overlaps (an unloaded one whose range was
    /// reused) is dropped, and a kernel text range reaching over it ends
    /// where it starts. Returns the module with its cookie entry.
    pub fn add_module(
        &mut self,
        module: KernelModule,
        build_id: Option<Vec<u8>>,
    ) -> (LoadedModule, CookieEntry) {
        let e = module_entry(&module, build_id);
        let (start, end) = (module.base, module.base.saturating_add(module.size));
        self.modules.retain(|m| {
            let (a, z) = (m.module.base, m.module.base.saturating_add(m.module.size));
            z <= start || a >= end
        });
        let lm = LoadedModule {
            module,
            cookie: e.cookie,
        };
        if let Some((a, z)) = &mut self.text {
            if *a < start && start < *z {
                *z = start;
            }
        }
        let at = self.modules.partition_point(|m| m.module.base < start);
        self.modules.insert(at, lm.clone());
        (lm, e)
    }

    /// Sets the modules directly (tests).
    pub fn set_modules(&mut self, modules: Vec<LoadedModule>) {
        self.modules = modules;
        self.modules.sort_by_key(|m| m.module.base);
    }

    /// Resolves a kernel address to (cookie, offset from the image's or module's base).
    #[inline]
    pub fn resolve(&self, ip: u64) -> Option<(Cookie, u64)> {
        if let (Some((a, z)), Some(k)) = (self.text, &self.kernel) {
            if ip >= a && ip < z {
                return Some((k.cookie, ip - a));
            }
        }
        let i = self.modules.partition_point(|m| m.module.base <= ip);
        if i > 0 {
            let m = &self.modules[i - 1];
            if ip < m.module.base.saturating_add(m.module.size) {
                return Some((m.cookie, ip - m.module.base));
            }
        }
        // Outside the text and every module (BPF programs, trampolines), or
        // addresses hidden by kptr_restrict: attribute to the kernel image
        // with the offset taken modulo 2^64, so `base + offset` gives back
        // the address for a later kallsyms lookup.
        self.kernel
            .as_ref()
            .map(|k| (k.cookie, ip.wrapping_sub(k.base)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fake_proc(text: u64, modules: &str, notes: Option<&[u8]>) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        let proc_ = d.path().join("proc");
        let sys = d.path().join("sys");
        std::fs::create_dir_all(&proc_).unwrap();
        std::fs::create_dir_all(sys.join("kernel")).unwrap();
        std::fs::write(
            proc_.join("kallsyms"),
            format!("{text:016x} T _text\n{:016x} T _etext\n", text + 0x100_0000),
        )
        .unwrap();
        std::fs::write(proc_.join("modules"), modules).unwrap();
        if let Some(n) = notes {
            std::fs::write(sys.join("kernel/notes"), n).unwrap();
        }
        d
    }

    fn paths(d: &tempfile::TempDir) -> ProcPaths {
        ProcPaths {
            proc_root: d.path().join("proc"),
            sys_root: d.path().join("sys"),
        }
    }

    fn gnu_note(id: &[u8]) -> Vec<u8> {
        let mut n = Vec::new();
        n.extend_from_slice(&4u32.to_ne_bytes());
        n.extend_from_slice(&(id.len() as u32).to_ne_bytes());
        n.extend_from_slice(&3u32.to_ne_bytes());
        n.extend_from_slice(b"GNU\0");
        n.extend_from_slice(id);
        n
    }

    /// The kernel and a module read from `/proc` get the cookies the same
    /// facts get from perf.data's mappings (`set_text`, `add_module`), with
    /// and without build-ids, and resolve addresses alike.
    #[test]
    fn proc_and_perf_data_kernel_maps_agree() {
        const TEXT: u64 = 0xffff_ffff_8100_0000;
        const MODULE: u64 = 0xffff_ffff_c000_0000;
        let modules = format!("snd_seq_device 16384 1 snd_seq, Live 0x{MODULE:x}\n");
        for id in [None, Some(&[1u8, 2, 3, 4][..])] {
            let d = fake_proc(TEXT, &modules, id.map(gnu_note).as_deref());
            let mut live = KernelMaps::read(&paths(&d));
            live.refresh_modules(&paths(&d));

            let mut file = KernelMaps::default();
            // perf's mapping of the kernel starts at or below `_text`.
            let k = file.set_text(TEXT, MODULE, id.map(<[u8]>::to_vec));
            let name = profkit_eventlog::module_name("/lib/modules/6.1/snd-seq-device.ko.xz");
            let (m, me) = file.add_module(
                KernelModule {
                    name,
                    base: MODULE,
                    size: 16384,
                },
                None,
            );
            assert_eq!(Some(&k), live.kernel.as_ref());
            assert_eq!(m, live.modules[0]);
            assert_eq!(me.path, "[snd_seq_device]");
            for ip in [
                TEXT + 0x10,
                TEXT + 0x200_0000,
                MODULE + 0x20,
                MODULE + 0x5000,
            ] {
                assert_eq!(file.resolve(ip), live.resolve(ip), "{ip:x}");
            }
        }
    }

    /// A kernel mapping that reaches over the modules (its length up to
    /// the end of the address space) still leaves module addresses to
    /// their modules, whichever came first.
    #[test]
    fn kernel_text_ends_where_the_modules_begin() {
        const TEXT: u64 = 0xffff_ffff_8100_0000;
        const MODULE: u64 = 0xffff_ffff_c000_0000;
        let module = || KernelModule {
            name: "m".into(),
            base: MODULE,
            size: 0x1000,
        };
        let mut first_kernel = KernelMaps::default();
        let k = first_kernel.set_text(TEXT, u64::MAX, None).cookie;
        let (m, _) = first_kernel.add_module(module(), None);
        let mut first_module = KernelMaps::default();
        first_module.add_module(module(), None);
        first_module.set_text(TEXT, u64::MAX, None);
        for maps in [first_kernel, first_module] {
            assert_eq!(maps.text, Some((TEXT, MODULE)));
            assert_eq!(maps.resolve(MODULE + 0x10), Some((m.cookie, 0x10)));
            assert_eq!(maps.resolve(TEXT + 0x10), Some((k, 0x10)));
        }
    }

    #[test]
    fn an_added_module_replaces_the_one_it_overlaps() {
        let mut k = KernelMaps::default();
        let m = |name: &str, base| KernelModule {
            name: name.into(),
            base,
            size: 0x1000,
        };
        let (a, _) = k.add_module(m("a", 0x5000), None);
        let (b, _) = k.add_module(m("b", 0x1000), None);
        assert_eq!(k.resolve(0x5010), Some((a.cookie, 0x10)));
        let (c, _) = k.add_module(m("c", 0x5800), None);
        assert_eq!(k.modules, vec![b, c.clone()]);
        assert_eq!(k.resolve(0x5810), Some((c.cookie, 0x10)));
    }
}
