//! Kernel symbols from kallsyms text, and the kernel build-id from `/sys/kernel/notes`.
//!
//! Kallsyms lines are `ADDRESS TYPE NAME` for the kernel and `ADDRESS TYPE NAME\t[MODULE]` for
//! modules. Only text symbols (`t T w W`) are kept. Kallsyms has no sizes, so each symbol ends
//! where the next one of the same table starts; the kernel's last one ends at `_etext`, a
//! module's last one is unbounded (the module's own mapping bounds the offsets asked about).
//!
//! When `kptr_restrict` hides addresses, every address reads as zero. That is detected here
//! ([`Kallsyms::hidden`]) so samples go to `[kernel]` instead of all landing on whichever
//! symbol sorts last.

use profkit_eventlog::module_name;
use std::collections::HashMap;

use crate::table::{Candidate, SymbolTable};
use crate::types::SymbolOrigin;

/// Parsed kallsyms.
#[derive(Debug, Default)]
pub(crate) struct Kallsyms {
    /// True when every address was zero (kptr_restrict, or read without privilege).
    pub hidden: bool,
    /// The core kernel's text symbols.
    pub kernel: SymbolTable,
    /// Each module's text symbols, keyed by module name (`-` normalised to `_`).
    pub modules: HashMap<String, SymbolTable>,
    /// Address of `_text`, the base kernel offsets are relative to.
    pub text: Option<u64>,
    /// Lines that could not be parsed.
    pub skipped: usize,
}

impl Kallsyms {
    pub fn parse(text: &str) -> Kallsyms {
        let mut kernel = Vec::new();
        let mut modules: HashMap<String, Vec<Candidate>> = HashMap::new();
        let mut text_addr = None;
        let mut etext = None;
        let mut skipped = 0;
        let mut any = false;
        let mut all_zero = true;
        for (line_no, line) in text.lines().enumerate() {
            // Blank lines, and `#` comments (profkit's trimmed copies say
            // what they were trimmed from in one).
            if line.trim().is_empty() || line.starts_with('#') {
                continue;
            }
            let mut fields = line.split_whitespace();
            let (Some(addr), Some(kind), Some(name)) =
                (fields.next(), fields.next(), fields.next())
            else {
                skipped += 1;
                continue;
            };
            let Ok(addr) = u64::from_str_radix(addr, 16) else {
                skipped += 1;
                continue;
            };
            let module = fields
                .next()
                .and_then(|m| m.strip_prefix('[')?.strip_suffix(']'))
                .map(module_name);
            any = true;
            all_zero &= addr == 0;
            if module.is_none() {
                match name {
                    "_text" => text_addr = Some(addr),
                    "_etext" => {
                        etext = Some(addr);
                        continue;
                    }
                    _ => {}
                }
            }
            if !matches!(kind, "t" | "T" | "w" | "W") {
                continue;
            }
            let cand = Candidate {
                start: addr,
                size: None,
                limit: None,
                name: name.into(),
                origin: SymbolOrigin::Kallsyms,
                // Among aliases prefer global, then the first listed.
                rank: (u64::from(kind == "t" || kind == "w") << 32) | line_no as u64,
            };
            match module {
                Some(m) => modules.entry(m).or_default().push(cand),
                None => kernel.push(cand),
            }
        }
        let hidden = any && all_zero;
        if let Some(end) = etext {
            for c in &mut kernel {
                c.limit = Some(end);
            }
        }
        Kallsyms {
            hidden,
            kernel: SymbolTable::build(kernel),
            modules: modules
                .into_iter()
                .map(|(name, cands)| (name, SymbolTable::build(cands)))
                .collect(),
            text: text_addr,
            skipped,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "\
ffffffff81000000 T _text
ffffffff81000000 T startup_64
ffffffff81000100 t secondary_startup
ffffffff81000200 D some_data
ffffffff81000300 T do_syscall_64
ffffffff81000400 T _etext
ffffffffc0001000 t my_mod_fn\t[my-mod]
ffffffffc0001080 T my_mod_init\t[my-mod]
garbage
";

    fn name(t: &SymbolTable, addr: u64) -> Option<&str> {
        t.lookup(addr).map(|i| &*t.entry(i).name)
    }

    #[test]
    fn parses_kernel_and_module_symbols() {
        let k = Kallsyms::parse(TEXT);
        assert!(!k.hidden);
        assert_eq!(k.skipped, 1);
        assert_eq!(k.text, Some(0xffffffff81000000));
        // `_text` and `startup_64` share an address; both global, the first listed wins.
        assert_eq!(name(&k.kernel, 0xffffffff81000010), Some("_text"));
        assert_eq!(
            name(&k.kernel, 0xffffffff81000150),
            Some("secondary_startup")
        );
        // Data symbols are not kept, so secondary_startup runs to do_syscall_64.
        assert_eq!(
            name(&k.kernel, 0xffffffff81000250),
            Some("secondary_startup")
        );
        assert_eq!(name(&k.kernel, 0xffffffff810003ff), Some("do_syscall_64"));
        assert_eq!(
            name(&k.kernel, 0xffffffff81000400),
            None,
            "_etext bounds the kernel"
        );
        let m = &k.modules["my_mod"];
        assert_eq!(name(m, 0xffffffffc0001010), Some("my_mod_fn"));
        assert_eq!(name(m, 0xffffffffc0001090), Some("my_mod_init"));
        assert_eq!(name(&k.kernel, 0xffffffffc0001010), None);
    }

    #[test]
    fn all_zero_addresses_mean_hidden() {
        let k = Kallsyms::parse("0000000000000000 T _text\n0000000000000000 t foo\t[bar]\n");
        assert!(k.hidden);
        assert!(!Kallsyms::parse("").hidden);
    }
}
