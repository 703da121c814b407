//! What both binaries print when they fail: for a bad command line,
//! clap's message on one line, `TOOL: <error and its details> (see TOOL
//! --help)`, exit status 2; for any other error, its chain on one line
//! ([`error_text`]).

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

/// An error and its causes on one line, `outer: inner: cause`, leaving out
/// a cause whose text the message before it already quotes (library errors
/// that put their source's text in their own message, like `open X: No
/// such file or directory`, would otherwise say it twice).
pub fn error_text(e: &anyhow::Error) -> String {
    profkit_daemon::error_message(e.as_ref())
}
