//! Lists of CPU, process and thread numbers in the kernel's notation
//! (`0-3,5,7-8`, as `/sys/devices/system/cpu/online` and `taskset` write
//! them): the one parser and formatter for `profctl -C`, the session
//! header's CPUs and `profreport`'s `cpu:`/`tgid:`/`tid:` specs.

/// What was wrong with an id list; the message names the offending part.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IdListError {
    /// A part that is not a number.
    #[error("'{0}' is not a number (give numbers or ranges: 0,1,4-7)")]
    NotANumber(String),
    /// A range that ends before it starts, or spans more than 65,536 ids.
    #[error("bad range '{0}' (give low-high, e.g. 4-7)")]
    BadRange(String),
    /// Nothing but commas and spaces.
    #[error("the list is empty")]
    Empty,
}

/// Parses `0-3,5,7-8` into sorted, distinct ids. Spaces around parts are
/// allowed; empty parts (`1,,2`, a trailing comma) are skipped.
pub fn parse_id_list(s: &str) -> Result<Vec<u32>, IdListError> {
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let num = |n: &str| {
            n.trim()
                .parse::<u32>()
                .map_err(|_| IdListError::NotANumber(n.trim().to_owned()))
        };
        match part.split_once('-') {
            Some((lo, hi)) => {
                let (lo, hi) = (num(lo)?, num(hi)?);
                if lo > hi || hi - lo > 1 << 16 {
                    return Err(IdListError::BadRange(part.to_owned()));
                }
                out.extend(lo..=hi);
            }
            None => out.push(num(part)?),
        }
    }
    if out.is_empty() {
        return Err(IdListError::Empty);
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// Formats sorted ids the way the kernel does (`0-3,5`).
pub fn format_id_list(ids: &[u32]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < ids.len() {
        let start = ids[i];
        let mut end = start;
        while i + 1 < ids.len() && ids[i + 1] == end.wrapping_add(1) {
            i += 1;
            end = ids[i];
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    parts.join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_parse_sorted_and_distinct_and_format_back() {
        assert_eq!(
            parse_id_list("5, 0-3,2,7-8,").unwrap(),
            [0, 1, 2, 3, 5, 7, 8]
        );
        assert_eq!(format_id_list(&[0, 1, 2, 3, 5, 7, 8]), "0-3,5,7-8");
        assert_eq!(format_id_list(&[]), "");
        assert_eq!(parse_id_list("4294967295").unwrap(), [u32::MAX]);
        assert_eq!(format_id_list(&[u32::MAX]), "4294967295");
    }

    #[test]
    fn bad_lists_name_the_bad_part() {
        assert_eq!(
            parse_id_list("0,x-y"),
            Err(IdListError::NotANumber("x".into()))
        );
        assert_eq!(
            parse_id_list("3-1"),
            Err(IdListError::BadRange("3-1".into()))
        );
        assert_eq!(
            parse_id_list("0-100000"),
            Err(IdListError::BadRange("0-100000".into()))
        );
        assert_eq!(parse_id_list(" , "), Err(IdListError::Empty));
        assert!(parse_id_list("1-2-3").is_err());
        assert!(parse_id_list("-1").is_err());
    }
}
