//! ClickHouse's `TabSeparated` format and SQL string literals: escaping
//! what is sent, parsing what comes back.

/// Appends `s` escaped as ClickHouse escapes strings in TabSeparated and
/// in quoted literals: `\` `'` tab, newline, CR, NUL, backspace and
/// form feed as backslash sequences, every other byte as is.
pub fn escape_into(out: &mut String, s: &str) {
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\0' => out.push_str("\\0"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c => out.push(c),
        }
    }
}

/// `s` as a SQL string literal: `'…'`, escaped.
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('\'');
    escape_into(&mut out, s);
    out.push('\'');
    out
}

/// An `Array(String)` as TabSeparated writes it: `['a','b']`.
pub fn array_into(out: &mut String, items: &[String]) {
    out.push('[');
    for (i, s) in items.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push('\'');
        escape_into(out, s);
        out.push('\'');
    }
    out.push(']');
}

/// One TabSeparated field, unescaped (invalid UTF-8 replaced).
pub fn unescape(field: &[u8]) -> String {
    let mut out = Vec::with_capacity(field.len());
    let mut it = field.iter();
    while let Some(&b) = it.next() {
        if b != b'\\' {
            out.push(b);
            continue;
        }
        match it.next() {
            Some(b'n') => out.push(b'\n'),
            Some(b't') => out.push(b'\t'),
            Some(b'r') => out.push(b'\r'),
            Some(b'0') => out.push(0),
            Some(b'b') => out.push(8),
            Some(b'f') => out.push(12),
            Some(&o) => out.push(o),
            None => out.push(b'\\'),
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// An `Array(String)` field as TabSeparated writes it (`['a','b\'c']`),
/// or `None` when it is not one.
pub fn parse_array(field: &[u8]) -> Option<Vec<String>> {
    let inner = field.strip_prefix(b"[")?.strip_suffix(b"]")?;
    let mut items = Vec::new();
    let mut i = 0;
    while i < inner.len() {
        if !items.is_empty() {
            if inner[i] != b',' {
                return None;
            }
            i += 1;
        }
        if inner.get(i) != Some(&b'\'') {
            return None;
        }
        i += 1;
        let start = i;
        loop {
            match inner.get(i)? {
                b'\\' => i += 2,
                b'\'' => break,
                _ => i += 1,
            }
        }
        items.push(unescape(inner.get(start..i)?));
        i += 1;
    }
    Some(items)
}

/// The lines of a TabSeparated answer, each split into `columns` raw
/// fields; `Err` says what is wrong (quoting the start of the line).
pub fn rows(body: &[u8], columns: usize) -> Result<Vec<Vec<&[u8]>>, String> {
    if body.is_empty() {
        return Ok(Vec::new());
    }
    let Some(body) = body.strip_suffix(b"\n") else {
        return Err(format!(
            "the answer does not end with a newline (cut short?): …{}",
            excerpt(&body[body.len().saturating_sub(80)..])
        ));
    };
    body.split(|&b| b == b'\n')
        .map(|line| {
            let fields: Vec<&[u8]> = line.split(|&b| b == b'\t').collect();
            if fields.len() == columns {
                Ok(fields)
            } else {
                Err(format!(
                    "a line of {} columns, {columns} expected: {}",
                    fields.len(),
                    excerpt(line)
                ))
            }
        })
        .collect()
}

/// A number field.
pub fn number(field: &[u8]) -> Result<u64, String> {
    std::str::from_utf8(field)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("not a number: {}", excerpt(field)))
}

/// At most 80 bytes of `b`, lossy, for a message.
pub fn excerpt(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(&b[..b.len().min(80)]);
    let s: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if b.len() > 80 {
        format!("{s:?}…")
    } else {
        format!("{s:?}")
    }
}

/// A ClickHouse exception in a body: `Code: NNN, e.displayText() = …`
/// (18.x–20.x) or `Code: NNN. DB::Exception: …` (later), at the start or
/// at the start of a line (a failure after the answer began is appended
/// to what was sent). Its code and text (at most 1000 characters).
pub fn exception(body: &[u8]) -> Option<(u32, String)> {
    let mut at = None;
    let mut from = 0;
    while let Some(i) = find(&body[from..], b"Code: ") {
        let i = from + i;
        if i == 0 || body[i - 1] == b'\n' {
            at = Some(i);
        }
        from = i + 1;
    }
    let text = &body[at?..];
    let digits = text[6..].iter().take_while(|b| b.is_ascii_digit()).count();
    let after = &text[6 + digits..];
    if digits == 0
        || !(after.starts_with(b", e.displayText() = ") || after.starts_with(b". DB::Exception"))
    {
        return None;
    }
    let code = std::str::from_utf8(&text[6..6 + digits])
        .ok()?
        .parse()
        .ok()?;
    let msg = String::from_utf8_lossy(text);
    Some((code, msg.trim().chars().take(1000).collect()))
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_round_trip() {
        let hostile = "a\tb\nc\\d'e\"f\r\0g\u{8}\u{c}h[',]é";
        let mut s = String::new();
        escape_into(&mut s, hostile);
        assert!(!s.contains('\t') && !s.contains('\n'));
        assert_eq!(unescape(s.as_bytes()), hostile);
        let mut a = String::new();
        array_into(&mut a, &[hostile.to_owned(), String::new(), "x".into()]);
        assert_eq!(
            parse_array(a.as_bytes()).unwrap(),
            vec![hostile.to_owned(), String::new(), "x".into()]
        );
        assert_eq!(parse_array(b"[]").unwrap(), Vec::<String>::new());
        for bad in [&b"['a"[..], b"['a'", b"['a',]", b"[a]", b"x", b"['a''b']"] {
            assert_eq!(parse_array(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
        assert_eq!(unescape(b"\xff\\"), "\u{fffd}\\");
    }

    #[test]
    fn finds_exceptions() {
        let b =
            b"1\t2\nCode: 395, e.displayText() = DB::Exception: boom, e.what() = DB::Exception\n";
        assert_eq!(exception(b).unwrap().0, 395);
        assert_eq!(
            exception(b"Code: 60. DB::Exception: no table").unwrap().0,
            60
        );
        assert_eq!(exception(b"x Code: 60. DB::Exception"), None);
        assert_eq!(exception(b"Code: x"), None);
        assert_eq!(exception(b"1\t2\n"), None);
    }

    #[test]
    fn splits_rows() {
        assert_eq!(rows(b"1\t2\n3\t4\n", 2).unwrap().len(), 2);
        assert!(rows(b"1\t2\n3\t4", 2).is_err());
        assert!(rows(b"1\t2\n3\n", 2).is_err());
        assert!(rows(b"<html>\n", 2).is_err());
        assert!(number(b"12x").is_err());
    }
}
