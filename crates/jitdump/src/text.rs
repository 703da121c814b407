//! Names from the dump made safe to show and to keep.

/// `raw` as text of at most `max` bytes: invalid UTF-8 and control
/// characters become `?` (so the text is never longer than `raw`), cut at
/// a character boundary. Stops reading `raw` once `max` bytes are kept.
pub(crate) fn sanitise(raw: &[u8], max: usize) -> String {
    let mut out = String::with_capacity(raw.len().min(max));
    for chunk in raw.utf8_chunks() {
        for c in chunk.valid().chars() {
            let c = if c.is_control() { '?' } else { c };
            if out.len() + c.len_utf8() > max {
                return out;
            }
            out.push(c);
        }
        if !chunk.invalid().is_empty() {
            if out.len() + 1 > max {
                return out;
            }
            out.push('?');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::sanitise;

    #[test]
    fn replaces_and_cuts() {
        assert_eq!(sanitise(b"py::f:<string>", 4096), "py::f:<string>");
        assert_eq!(sanitise(b"a\nb\x1b[31m\x7f", 4096), "a?b?[31m?");
        assert_eq!(sanitise(b"a\xff\xfeb", 4096), "a??b");
        assert_eq!(sanitise("é€x".as_bytes(), 4), "é");
        assert_eq!(sanitise("é€x".as_bytes(), 5), "é€");
        assert_eq!(sanitise(b"abc", 0), "");
        // C1 controls are control characters too.
        assert_eq!(sanitise("a\u{85}b".as_bytes(), 10), "a?b");
    }

    #[test]
    fn never_longer_than_the_bytes() {
        let raw: Vec<u8> = (0..=255u8).cycle().take(3000).collect();
        assert!(sanitise(&raw, usize::MAX).len() <= raw.len());
    }
}
