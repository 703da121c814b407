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

/// `s` on one line: every control character (C0 including newline, tab and
/// carriage return, DEL, and C1) written as `\xNN`. Names without one (all
/// real ones) are returned as they are, without allocating.
///
/// ```
/// use profkit_eventlog::shown;
/// assert_eq!(shown("sshd"), "sshd");
/// assert_eq!(shown("x\n   99999  99.9  sshd"), "x\\x0a   99999  99.9  sshd");
/// assert_eq!(shown("\u{1b}]0;pwned\u{7}"), "\\x1b]0;pwned\\x07");
/// ```
pub fn shown(s: &str) -> Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if c.is_control() {
            use std::fmt::Write;
            let _ = write!(out, "\\x{:02x}", c as u32);
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
            "a\\x0ab",
        ] {
            assert!(matches!(shown(s), std::borrow::Cow::Borrowed(_)), "{s}");
        }
    }
}
