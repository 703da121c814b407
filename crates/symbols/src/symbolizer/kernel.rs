//! The kernel's and its modules' symbols: kallsyms loaded once (live, a
//! file or trimmed text), a module's `.ko` when kallsyms lacks it.

use profkit_eventlog::{build_id_from_notes, module_name};

use super::builder::{Builder, SymKey};
use super::Symbolizer;
use crate::cache::Loaded;
use crate::elf::hex;
use crate::error::Error;
use crate::kallsyms::Kallsyms;
use crate::types::{BinaryRequest, BinaryResult, KallsymsSource, SymbolOrigin};

/// Kallsyms as loaded once, with the words to say when it cannot be used.
pub(super) struct KernelSymbols {
    symbols: Result<Kallsyms, Error>,
    /// What to say when addresses are hidden.
    hidden_warning: String,
    /// The running kernel's build-id (live source only).
    build_id: Option<Vec<u8>>,
}

impl Symbolizer {
    fn kernel_symbols(&self) -> &KernelSymbols {
        self.kernel.get_or_init(|| {
            let advice = "kernel samples attributed to [kernel]";
            let (text, hidden_warning, build_id) = match &self.opts.kallsyms {
                KallsymsSource::Live => {
                    let level = std::fs::read_to_string("/proc/sys/kernel/kptr_restrict")
                        .map_or_else(|_| "?".to_owned(), |s| s.trim().to_owned());
                    let notes = std::fs::read("/sys/kernel/notes").ok();
                    (
                        std::fs::read_to_string("/proc/kallsyms")
                            .map_err(|e| Error::io("/proc/kallsyms", e)),
                        format!(
                            "kernel addresses hidden (kptr_restrict={level}): {advice}; run the \
                             report as root or set sysctl kernel.kptr_restrict=0"
                        ),
                        notes.as_deref().and_then(build_id_from_notes),
                    )
                }
                KallsymsSource::File(path) => (
                    crate::files::read_regular_text(path, crate::files::MAX_TEXT_BYTES)
                        .map_err(|e| Error::io(path, e)),
                    format!(
                        "kernel addresses hidden in {} (all zero: kptr_restrict was set or it \
                         was copied without root): {advice}",
                        path.display()
                    ),
                    None,
                ),
                KallsymsSource::Text(text) => (
                    Ok(text.clone()),
                    format!(
                        "kernel addresses hidden (all zero in the given kallsyms, \
                         kptr_restrict): {advice}"
                    ),
                    None,
                ),
                KallsymsSource::None => (Err(Error::NoKallsyms), String::new(), None),
            };
            KernelSymbols {
                symbols: text.map(|t| Kallsyms::parse(&t)),
                hidden_warning,
                build_id,
            }
        })
    }

    /// The table to use for the kernel or a module, or the warning saying why there is none.
    fn kallsyms_usable(&self) -> Result<&Kallsyms, String> {
        let k = self.kernel_symbols();
        match &k.symbols {
            Ok(ks) if ks.hidden => Err(k.hidden_warning.clone()),
            Ok(ks) => Ok(ks),
            Err(e) => Err(format!("{e}; kernel samples attributed to [kernel]")),
        }
    }

    pub(super) fn symbolize_kernel(
        &self,
        mut b: Builder,
        req: &BinaryRequest,
        offsets: &[u64],
    ) -> BinaryResult {
        let k = self.kernel_symbols();
        let usable = match (&req.build_id, &k.build_id) {
            (Some(want), Some(now)) if want != now => Err(format!(
                "kernel changed since recording (build-id recorded {}, now {}): kernel samples \
                 attributed to [kernel]; give the kallsyms saved with the session",
                hex(want),
                hex(now)
            )),
            _ => self.kallsyms_usable(),
        };
        let ks = match usable {
            Ok(ks) => ks,
            Err(msg) => {
                b.warn(msg);
                let id = b.stand_in("[kernel]".to_owned(), 0, 0, SymbolOrigin::KernelUnresolved);
                for &off in offsets {
                    b.push(off, None, Some(id));
                }
                return b.result;
            }
        };
        if ks.skipped > 0 {
            b.warn(format!("kallsyms: {} malformed lines skipped", ks.skipped));
        }
        let base = match ks.text {
            Some(text) if req.base != 0 && text != req.base => {
                b.warn(format!(
                    "kernel relocated since recording (_text recorded {:#x}, kallsyms has {text:#x}): \
                     offsets taken from kallsyms' _text; if the kernel itself changed, use the \
                     kallsyms saved with the session",
                    req.base
                ));
                text
            }
            Some(text) if req.base == 0 => text,
            _ => req.base,
        };
        for &off in offsets {
            let addr = base.wrapping_add(off);
            let symbol = ks
                .kernel
                .lookup(addr)
                .map(|i| b.intern_entry(SymKey::Table(i), &ks.kernel, i, |_| None));
            b.push(off, Some(addr), symbol);
        }
        b.result
    }

    pub(super) fn symbolize_module(
        &self,
        mut b: Builder,
        req: &BinaryRequest,
        offsets: &[u64],
    ) -> BinaryResult {
        let name = module_name(&req.path.to_string_lossy());
        let kallsyms = self.kallsyms_usable();
        if let Ok(Some(table)) = kallsyms.as_ref().map(|ks| ks.modules.get(&name)) {
            for &off in offsets {
                let addr = req.base.wrapping_add(off);
                let symbol = table
                    .lookup(addr)
                    .map(|i| b.intern_entry(SymKey::Table(i), table, i, |_| None));
                b.push(off, Some(addr), symbol);
            }
            return b.result;
        }
        // Not in kallsyms: try the .ko file.
        let ko = self.host_path(&req.path);
        let is_ko = ko.extension().is_some_and(|e| e == "ko");
        if is_ko && ko.is_file() {
            match self
                .cache
                .load(&ko, req.build_id.as_deref(), &self.load_config(), offsets)
            {
                Ok(Loaded::Image(image, _)) if image.relocatable => {
                    b.warn(format!(
                        "module {name} not in kallsyms; names read from {} assuming the \
                         kernel's section layout",
                        ko.display()
                    ));
                    return self.resolve_in_image(b, image, offsets);
                }
                Ok(Loaded::Image(..)) => {
                    b.warn(format!(
                        "{} is not a relocatable module object",
                        ko.display()
                    ));
                }
                Ok(Loaded::WrongBuildId { now }) => b.warn(format!(
                    "binary changed since recording: {} (build-id recorded {}, now {}); \
                     samples shown as offsets, not guessed",
                    ko.display(),
                    hex(req.build_id.as_deref().unwrap_or_default()),
                    now.as_deref().map_or_else(|| "none".to_owned(), hex)
                )),
                Err(e) => b.warn(e.to_string()),
            }
            return b.unresolved(offsets);
        }
        match kallsyms {
            Err(msg) => {
                b.warn(msg);
                let id = b.stand_in(
                    format!("[{name}]"),
                    req.base,
                    0,
                    SymbolOrigin::KernelUnresolved,
                );
                for &off in offsets {
                    b.push(off, None, Some(id));
                }
                b.result
            }
            Ok(_) => {
                let hint = if req.path.to_string_lossy().ends_with(".ko.xz")
                    || req.path.to_string_lossy().ends_with(".ko.zst")
                    || req.path.to_string_lossy().ends_with(".ko.gz")
                {
                    " (compressed .ko files are not read: decompress it)"
                } else {
                    ""
                };
                b.warn(format!(
                    "module {name} is neither in kallsyms nor at {}{hint}; samples shown as offsets",
                    ko.display()
                ));
                b.unresolved(offsets)
            }
        }
    }
}
