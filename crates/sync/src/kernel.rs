//! Kernel-side resolution: the kernel image's text range and the loaded
//! modules, each with its cookie.

use crate::cookies::{build_id_from_notes, cookie_hash};
use crate::procfs::{parse_kernel_text, parse_modules, KernelModule, ProcPaths};
use profkit_eventlog::{Cookie, CookieEntry, CookieKind};

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

/// The cookie entry of a module.
pub fn module_entry(m: &KernelModule, build_id: Option<Vec<u8>>) -> CookieEntry {
    let cookie = match &build_id {
        Some(b) => cookie_hash("module-build-id", &[b]),
        None => cookie_hash("module", &[m.name.as_bytes(), &m.base.to_le_bytes()]),
    };
    CookieEntry {
        cookie,
        kind: CookieKind::Module,
        path: format!("[{}]", m.name),
        build_id,
        dev: 0,
        inode: 0,
        generation: 0,
        base: m.base,
        pid: None,
    }
}

/// The cookie entry of the kernel image.
pub fn kernel_entry(text_start: u64, build_id: Option<Vec<u8>>) -> CookieEntry {
    let cookie = match &build_id {
        Some(b) => cookie_hash("kernel-build-id", &[b]),
        None => cookie_hash("kernel", &[&text_start.to_le_bytes()]),
    };
    CookieEntry {
        cookie,
        kind: CookieKind::Kernel,
        path: "[kernel.kallsyms]".into(),
        build_id,
        dev: 0,
        inode: 0,
        generation: 0,
        base: text_start,
        pid: None,
    }
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
            if ip < m.module.base + m.module.size {
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
