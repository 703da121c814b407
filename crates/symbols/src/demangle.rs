//! Demangling of Rust (legacy and v0) and C++ names.

/// Demangles `raw` if it is a Rust (legacy `_ZN…E` or v0 `_R…`) or C++ (`_Z…`) symbol.
///
/// Rust names are shown without their hash (`{:#}`), as perf and samply do. Returns `None` for
/// names that are not mangled (C functions) or that fail to parse.
///
/// ```
/// assert_eq!(
///     profkit_symbols::demangle("_ZN4core3fmt5write17h0123456789abcdefE").as_deref(),
///     Some("core::fmt::write")
/// );
/// assert_eq!(profkit_symbols::demangle("_ZN2ns4workEi").as_deref(), Some("ns::work(int)"));
/// assert_eq!(profkit_symbols::demangle("main"), None);
/// ```
pub fn demangle(raw: &str) -> Option<String> {
    if let Ok(d) = rustc_demangle::try_demangle(raw) {
        return Some(format!("{d:#}"));
    }
    if raw.starts_with("_Z") {
        let sym = cpp_demangle::Symbol::new(raw).ok()?;
        return sym.demangle(&cpp_demangle::DemangleOptions::default()).ok();
    }
    None
}

/// The name to show for `raw` under the `demangle` option.
pub(crate) fn display_name(raw: &str, demangle_names: bool) -> String {
    if demangle_names {
        if let Some(d) = demangle(raw) {
            return d;
        }
    }
    raw.to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_legacy() {
        assert_eq!(
            demangle("_ZN3std2rt10lang_start17h6e9a4c2d4f0b8a1cE").as_deref(),
            Some("std::rt::lang_start")
        );
    }

    #[test]
    fn rust_legacy_with_llvm_suffix() {
        assert_eq!(
            demangle("_ZN3foo3bar17h05af221e174051e9E.llvm.12345").as_deref(),
            Some("foo::bar")
        );
    }

    #[test]
    fn rust_v0() {
        // From the v0 mangling RFC's examples: `<mycrate::Foo>::bar` style paths.
        assert_eq!(
            demangle("_RNvCs1234_7mycrate3foo").as_deref(),
            Some("mycrate::foo")
        );
        assert_eq!(
            demangle("_RNvNtCs1234_7mycrate3bar3baz").as_deref(),
            Some("mycrate::bar::baz")
        );
    }

    #[test]
    fn cpp() {
        assert_eq!(demangle("_ZN2ns4workEi").as_deref(), Some("ns::work(int)"));
        assert_eq!(
            demangle("_ZNSt6vectorIiSaIiEE9push_backERKi").as_deref(),
            Some("std::vector<int, std::allocator<int> >::push_back(int const&)")
        );
    }

    #[test]
    fn c_names_and_garbage_are_left_alone() {
        assert_eq!(demangle("main"), None);
        assert_eq!(demangle("_Zgarbage"), None);
        assert_eq!(display_name("_Zgarbage", true), "_Zgarbage");
        assert_eq!(display_name("_ZN2ns4workEi", false), "_ZN2ns4workEi");
        assert_eq!(display_name("_ZN2ns4workEi", true), "ns::work(int)");
    }
}
