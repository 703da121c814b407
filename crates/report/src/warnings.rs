//! What a report says on standard error: its warnings, at most
//! [`MAX_WARNING_LINES`] lines unless asked for all.
//!
//! A system-wide report meets dozens of binaries without symbols (the
//! shell, awk, the assembler, perf itself): one line each drowned the rest.
//! They are counted in one line with the share of samples they leave
//! unnamed and the biggest named; `-v` lists each with where its debug file
//! was looked for.

use crate::model::{Report, UnnamedBinary};
use crate::spec::base_name;

/// Lines a report's warnings take without `-v`.
pub const MAX_WARNING_LINES: usize = 3;

/// Binaries named in the summary line of binaries without symbols.
const NAMED: usize = 3;

impl Report {
    /// The warning lines to print: with `verbose`, every warning and every
    /// binary without symbols; else at most [`MAX_WARNING_LINES`], the
    /// binaries without symbols summarized in one, the rest counted.
    pub fn warning_lines(&self, verbose: bool) -> Vec<String> {
        let total = self.header.total_samples;
        let amount = |n: u64| match self.header.off_cpu {
            Some(_) => format!("{} ms off-CPU", crate::render::ms(n)),
            None => format!("{n} samples"),
        };
        let mut lines = Vec::new();
        if verbose {
            lines.extend(self.warnings.iter().cloned());
            for b in &self.unnamed_binaries {
                lines.push(format!(
                    "{} ({}, {} unnamed)",
                    b.note,
                    amount(b.samples),
                    percent(b.samples, total)
                ));
            }
            return lines;
        }
        if !self.unnamed_binaries.is_empty() {
            lines.push(unnamed_summary(
                &self.unnamed_binaries,
                total,
                &amount,
                self.header.debuginfod.as_ref(),
            ));
        }
        let room = MAX_WARNING_LINES - lines.len();
        if self.warnings.len() <= room {
            lines.extend(self.warnings.iter().cloned());
        } else {
            lines.extend(self.warnings.iter().take(room - 1).cloned());
            lines.push(format!(
                "… and {} more warnings (-v shows them all)",
                self.warnings.len() - (room - 1)
            ));
        }
        lines
    }
}

/// "14 binaries have no symbols: 2,113 samples (4.8 %) shown as offsets,
/// most in cc1 (3.5 %), bash (0.6 %), as (0.2 %); …", with what debuginfod
/// did (`debuginfod`: the report's client, if it had one).
fn unnamed_summary(
    bins: &[UnnamedBinary],
    total: u64,
    amount: &dyn Fn(u64) -> String,
    debuginfod: Option<&crate::DebuginfodOutcome>,
) -> String {
    let samples: u64 = bins.iter().fold(0, |a, b| a.saturating_add(b.samples));
    let named: Vec<String> = bins
        .iter()
        .take(NAMED)
        .map(|b| format!("{} ({})", base_name(&b.path), percent(b.samples, total)))
        .collect();
    let (what, their) = if bins.len() == 1 {
        ("1 binary has".to_owned(), "its")
    } else {
        (format!("{} binaries have", bins.len()), "their")
    };
    let servers = match debuginfod {
        Some(d) if d.network => format!(
            "; the debuginfod server{} named {} other binar{} and not these",
            if d.servers == 1 { "" } else { "s" },
            d.named,
            if d.named == 1 { "y" } else { "ies" },
        ),
        Some(d) if d.servers > 0 => format!(
            "; debuginfod named {} other binar{} from its cache, its server{} not asked \
             (--offline)",
            d.named,
            if d.named == 1 { "y" } else { "ies" },
            if d.servers == 1 { " was" } else { "s were" },
        ),
        _ => String::new(),
    };
    let or_fetch = match debuginfod {
        Some(d) if d.servers > 0 => "",
        _ => ", or set DEBUGINFOD_URLS to fetch them",
    };
    format!(
        "{what} no symbols: {} ({}) shown as offsets, {} {}{servers}; install {their} \
         debug symbols (Debian: the -dbgsym packages) or give --debug-dir{or_fetch}; \
         -v lists them",
        amount(samples),
        percent(samples, total),
        if bins.len() == 1 { "in" } else { "most in" },
        named.join(", ")
    )
}

fn percent(n: u64, total: u64) -> String {
    if total == 0 {
        return "0 %".to_owned();
    }
    format!("{:.1} %", n as f64 * 100.0 / total as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Column, Header, ShownColumns};

    fn report(warnings: usize, unnamed: &[(&str, u64)]) -> Report {
        Report {
            header: Header {
                total_samples: 10_000,
                ..Header::default()
            },
            columns: vec![Column::All],
            shown: ShownColumns::default(),
            rows: Vec::new(),
            rows_below_threshold: 0,
            timeline: None,
            warnings: (0..warnings).map(|i| format!("warning {i}")).collect(),
            unnamed_binaries: unnamed
                .iter()
                .map(|&(path, samples)| UnnamedBinary {
                    path: path.to_owned(),
                    samples,
                    note: format!("{path} has no .symtab"),
                })
                .collect(),
            callgraph: None,
            stacks: None,
            annotations: None,
        }
    }

    /// Seventeen binaries without symbols and five other warnings: three
    /// lines, the first counting the binaries and naming the biggest.
    #[test]
    fn many_binaries_without_symbols_take_one_line_and_all_fit_in_three() {
        let bins: Vec<(String, u64)> = (0..17)
            .map(|i| (format!("/usr/bin/tool{i}"), 500 - 10 * i as u64))
            .collect();
        let refs: Vec<(&str, u64)> = bins.iter().map(|(p, n)| (p.as_str(), *n)).collect();
        let r = report(5, &refs);
        let lines = r.warning_lines(false);
        assert_eq!(lines.len(), 3, "{lines:#?}");
        let samples: u64 = (0..17).map(|i| 500 - 10 * i).sum();
        assert_eq!(samples, 7140);
        assert!(
            lines[0].starts_with(&format!(
                "17 binaries have no symbols: {samples} samples (71.4 %) shown as offsets, \
                 most in tool0 (5.0 %), tool1 (4.9 %), tool2 (4.8 %);"
            )),
            "{}",
            lines[0]
        );
        assert_eq!(lines[1], "warning 0");
        assert_eq!(lines[2], "… and 4 more warnings (-v shows them all)");
        let all = r.warning_lines(true);
        assert_eq!(all.len(), 5 + 17);
        assert_eq!(
            all[5],
            "/usr/bin/tool0 has no .symtab (500 samples, 5.0 % unnamed)"
        );
    }

    /// The summary says what debuginfod did: named others, was not asked
    /// (`--offline`), or is not configured.
    #[test]
    fn the_summary_says_what_debuginfod_did() {
        let mut r = report(0, &[("/bin/bash", 20), ("/usr/bin/mawk", 10)]);
        let line = |r: &Report| r.warning_lines(false)[0].clone();
        assert!(
            line(&r).ends_with(
                "or give --debug-dir, or set DEBUGINFOD_URLS to fetch them; -v lists them"
            ),
            "{}",
            line(&r)
        );
        r.header.debuginfod = Some(crate::DebuginfodOutcome {
            servers: 2,
            network: true,
            named: 9,
            ..Default::default()
        });
        let l = line(&r);
        assert!(
            l.contains("(0.1 %); the debuginfod servers named 9 other binaries and not these;"),
            "{l}"
        );
        assert!(!l.contains("DEBUGINFOD_URLS"), "{l}");
        r.header.debuginfod = Some(crate::DebuginfodOutcome {
            servers: 1,
            network: false,
            named: 1,
            ..Default::default()
        });
        let l = line(&r);
        assert!(
            l.contains(
                "; debuginfod named 1 other binary from its cache, its server was not asked \
                 (--offline);"
            ),
            "{l}"
        );
    }

    #[test]
    fn few_warnings_are_shown_as_they_are() {
        assert!(report(0, &[]).warning_lines(false).is_empty());
        assert_eq!(report(3, &[]).warning_lines(false).len(), 3);
        let r = report(2, &[("/bin/bash", 10)]);
        let lines = r.warning_lines(false);
        assert_eq!(lines.len(), 3);
        assert!(lines[0].starts_with("1 binary has no symbols: 10 samples (0.1 %) shown as offsets, in bash (0.1 %); install its"), "{}", lines[0]);
        assert_eq!(
            report(4, &[]).warning_lines(false)[2],
            "… and 2 more warnings (-v shows them all)"
        );
    }
}
