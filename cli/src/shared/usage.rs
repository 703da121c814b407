//! What both binaries print for a bad command line: clap's message on one
//! line, `TOOL: <error and its details> (see TOOL --help)`, exit status 2.

use std::process::ExitCode;

/// Parses the command line; on a usage error prints the one-line message
/// and returns the exit code (0 for --help/--version, 2 otherwise).
pub fn parse_or_exit<P: clap::Parser>(tool: &str) -> Result<P, ExitCode> {
    match P::try_parse() {
        Ok(p) => Ok(p),
        Err(e) if !e.use_stderr() => {
            // --help, --version
            let _ = e.print();
            Err(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("{tool}: {} (see {tool} --help)", one_line(&e.to_string()));
            Err(ExitCode::from(2))
        }
    }
}

/// clap's message without the usage block, tips and blank lines.
fn one_line(text: &str) -> String {
    let parts: Vec<&str> = text
        .lines()
        .map(str::trim)
        .take_while(|l| !l.starts_with("Usage:") && !l.starts_with("For more"))
        .filter(|l| !l.is_empty() && !l.starts_with("tip:"))
        .collect();
    parts.join(" ").trim_start_matches("error: ").to_owned()
}
