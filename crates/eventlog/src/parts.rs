//! The files of a rotated session (`profctl start --rotate`): the part
//! being written is always [`CURRENT_PART`] (`session.pkl`, as for a
//! session in one file); a part closed by a rotation is renamed
//! `session.NNNNNN.pkl`, its number zero-padded to six digits (more once
//! past 999,999), so `ls` lists a session's parts in order with the part
//! being written last. Each part's header says its number
//! ([`PartInfo`](crate::PartInfo)), so a reader that lists the directory
//! while a rotation renames a file can tell a part it missed.

use std::path::{Path, PathBuf};

/// The part being written, and the whole of a session without rotation.
pub const CURRENT_PART: &str = "session.pkl";

/// The file name of closed part `number`.
pub fn part_file_name(number: u64) -> String {
    format!("session.{number:06}.pkl")
}

/// The number of a closed part's file name; None for any other name
/// (`session.pkl` included). Only the name [`part_file_name`] gives is a
/// part's: `session.0000001.pkl` beside `session.000001.pkl` would be part
/// 1 twice (issue 25), so a name with more digits than needed is none
/// ([`stray_part_names`] finds them for a warning).
pub fn parse_part_file_name(name: &str) -> Option<u64> {
    let n: u64 = looks_like_part(name)?.parse().ok()?;
    (part_file_name(n) == name).then_some(n)
}

/// `session.DIGITS.pkl` with at least six digits: its digits.
fn looks_like_part(name: &str) -> Option<&str> {
    let digits = name.strip_prefix("session.")?.strip_suffix(".pkl")?;
    if digits.len() < 6 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(digits)
}

/// Names in `dir` that look like a part's (`session.DIGITS.pkl`) but are
/// not the name its number has (`session.0000001.pkl`): never read as a
/// part, named in a warning. At most `max` are returned.
///
/// # Errors
/// When `dir` cannot be listed.
pub fn stray_part_names(dir: &Path, max: usize) -> std::io::Result<Vec<String>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir)? {
        let name = e?.file_name();
        let Some(name) = name.to_str() else { continue };
        if looks_like_part(name).is_some() && parse_part_file_name(name).is_none() {
            out.push(name.to_owned());
            if out.len() >= max {
                break;
            }
        }
    }
    out.sort_unstable();
    Ok(out)
}

/// The closed parts in `dir`, by number (regular files only: a link or
/// directory with a part's name is not one).
///
/// # Errors
/// When `dir` cannot be listed.
pub fn closed_parts(dir: &Path) -> std::io::Result<Vec<(u64, PathBuf)>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir)? {
        let e = e?;
        let name = e.file_name();
        let Some(n) = name.to_str().and_then(parse_part_file_name) else {
            continue;
        };
        if e.file_type().is_ok_and(|t| t.is_file()) {
            out.push((n, e.path()));
        }
    }
    out.sort_unstable();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn part_names_round_trip_and_sort_in_order() {
        assert_eq!(part_file_name(7), "session.000007.pkl");
        assert_eq!(part_file_name(1_234_567), "session.1234567.pkl");
        for n in [1, 999_999, 1_000_000, u64::MAX / 10] {
            assert_eq!(parse_part_file_name(&part_file_name(n)), Some(n));
        }
        for bad in [
            "session.pkl",
            "session.1.pkl",
            "session.00001a.pkl",
            "session.000001.pkl.tmp",
            "x.000001.pkl",
            "session.+00001.pkl",
            "session.0000001.pkl",
            "session.01234567.pkl",
            "session.18446744073709551616.pkl",
        ] {
            assert_eq!(parse_part_file_name(bad), None, "{bad}");
        }
        let mut names = [
            part_file_name(2),
            CURRENT_PART.to_owned(),
            part_file_name(1),
        ];
        names.sort();
        assert_eq!(names[2], CURRENT_PART, "the part being written sorts last");
    }

    #[test]
    fn closed_parts_lists_files_by_number_only() {
        let d = tempfile::tempdir().unwrap();
        for n in [3, 1, 2] {
            std::fs::write(d.path().join(part_file_name(n)), b"x").unwrap();
        }
        std::fs::write(d.path().join(CURRENT_PART), b"x").unwrap();
        std::fs::create_dir(d.path().join(part_file_name(4))).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", d.path().join(part_file_name(5))).unwrap();
        let got: Vec<u64> = closed_parts(d.path())
            .unwrap()
            .into_iter()
            .map(|p| p.0)
            .collect();
        assert_eq!(got, [1, 2, 3]);
        // Part 1 under a second spelling is not part 1 again.
        std::fs::write(d.path().join("session.0000001.pkl"), b"x").unwrap();
        std::fs::write(d.path().join("session.0000002.pkl"), b"x").unwrap();
        assert_eq!(closed_parts(d.path()).unwrap().len(), 3);
        assert_eq!(
            stray_part_names(d.path(), 10).unwrap(),
            ["session.0000001.pkl", "session.0000002.pkl"]
        );
        // Too many digits for any number: a stray too.
        let huge = format!("session.{}.pkl", "9".repeat(30));
        std::fs::write(d.path().join(&huge), b"x").unwrap();
        assert_eq!(stray_part_names(d.path(), 10).unwrap().len(), 3);
        assert_eq!(stray_part_names(d.path(), 1).unwrap().len(), 1);
    }
}
