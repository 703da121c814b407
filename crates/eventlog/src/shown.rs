//! How a name from a session is shown as one line of text.
//!
//! Command names, binary paths, symbols, cgroup paths and the daemon's
//! notes come from whatever the sampled processes and their files say: any
//! local user controls them. Text outputs (reports, `profctl status` and
//! `stop`, warnings, logs) put each such name into a line of their own
//! making, so a name must not be able to end that line (a newline would add
//! a fake row under root's eyes) or talk to the terminal (ESC, BEL). Every
//! writer of text shows names through [`shown`]; the machine formats (JSON,
//! CSV fields, pprof) keep the bytes faithful.

use std::borrow::Cow;

/// Characters that reorder or split the line they are shown on in
/// terminals and viewers: bidirectional marks, overrides and isolates, and
/// the line and paragraph separators.
fn reorders(c: char) -> bool {
    matches!(
        c,
        '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}'
            | '\u{2028}' | '\u{2029}'
    )
}

/// `s` on one line: every control character (C0 including newline, tab and
/// carriage return, DEL, and C1) written as `\xNN`, the characters that
/// reorder or split a line ([`reorders`]) as `\u{NNNN}`, and a backslash
/// as `\\` (so a name cannot spell an escape it does not hold). Names
/// without any (all real ones) are returned as they are, without
/// allocating.
///
/// ```
/// use profkit_eventlog::shown;
/// assert_eq!(shown("sshd"), "sshd");
/// assert_eq!(shown("x\n   99999  99.9  sshd"), "x\\x0a   99999  99.9  sshd");
/// assert_eq!(shown("\u{1b}]0;pwned\u{7}"), "\\x1b]0;pwned\\x07");
/// ```
pub fn shown(s: &str) -> Cow<'_, str> {
    // Printable ASCII (every real name, nearly): one pass over the bytes,
    // no character decoding (this check is most of a text report's
    // rendering, once per cell).
    // (Without an early exit, so that it vectorizes.)
    let special = s.bytes().fold(false, |any, b| {
        any | !(0x20..0x7f).contains(&b) | (b == b'\\')
    });
    if !special {
        return Cow::Borrowed(s);
    }
    if !s
        .chars()
        .any(|c| c.is_control() || c == '\\' || reorders(c))
    {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        use std::fmt::Write;
        if c.is_control() {
            let _ = write!(out, "\\x{:02x}", c as u32);
        } else if reorders(c) {
            let _ = write!(out, "\\u{{{:04x}}}", c as u32);
        } else if c == '\\' {
            out.push_str("\\\\");
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::shown;

    #[test]
    fn every_control_character_is_escaped_and_nothing_else() {
        for c in (0u32..0x20).chain([0x7f]).chain(0x80..0xa0) {
            let c = char::from_u32(c).unwrap();
            let s = format!("a{c}b");
            let out = shown(&s);
            assert_eq!(out, format!("a\\x{:02x}b", c as u32), "{:?}", c);
            assert!(!out.chars().any(char::is_control));
        }
        for s in [
            "",
            "libc.so.6",
            "std::vec::Vec<T>::push",
            "ünïcödé 名前",
            "a/b",
        ] {
            assert!(matches!(shown(s), std::borrow::Cow::Borrowed(_)), "{s}");
        }
        // A name cannot spell an escape it does not hold, nor reorder the
        // line it is shown on.
        assert_eq!(shown("a\\x0ab"), "a\\\\x0ab");
        assert_eq!(shown("ab\u{202e}cd"), "ab\\u{202e}cd");
        assert_eq!(shown("x\u{2028}y"), "x\\u{2028}y");
    }
}
