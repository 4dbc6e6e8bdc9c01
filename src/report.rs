//! The only place that writes to stdout/stderr, shared by the CLI and the servers (which sit
//! above it and never import each other for it; the CLI re-exports it as `cli::output`). Over MCP stdio, stdout *is* the protocol, so
//! every human message goes to stderr and data goes through [`data`] / [`json`].
//!
//! Nothing from the repository reaches the terminal raw: messages are single lines with every
//! control character escaped, data keeps only its newlines, tabs and, on a coloured terminal,
//! the two colour sequences `kdd` itself adds ([`COLOURS`]; both through
//! [`crate::spec::escape_control_keep`]), so a file name cannot forge a diagnostic line, move
//! the cursor, clear the screen or retitle the terminal.

use std::io::Write;
use std::sync::OnceLock;

static PROGRAM: OnceLock<&'static str> = OnceLock::new();

/// Name the running program for [`log`] (`kdd serve`, `kdd mcp`); first call wins.
pub fn set_program(name: &'static str) {
    let _ = PROGRAM.set(name);
}

/// The name set by [`set_program`], else `kdd`.
pub fn program() -> &'static str {
    PROGRAM.get().copied().unwrap_or("kdd")
}

/// A log line of a long-running server on stderr, prefixed with its name (`kdd mcp: …`).
pub fn log(msg: &str) {
    info(&format!("{}: {msg}", program()));
}

/// Write data (a result) to stdout. Errors (broken pipe) are returned to the caller.
pub fn data(text: &str) -> std::io::Result<()> {
    let text = escape_data(text, colour());
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    if !text.ends_with('\n') {
        out.write_all(b"\n")?;
    }
    out.flush()
}

/// Write a JSON value to stdout (pretty, one object).
pub fn json<T: serde::Serialize>(v: &T) -> std::io::Result<()> {
    let s = serde_json::to_string_pretty(v).map_err(std::io::Error::other)?;
    data(&s)
}

/// The colour sequences `kdd` itself writes (around ids, `cli::shared::hl`).
pub const COLOURS: [&str; 2] = ["\x1b[1;36m", "\x1b[0m"];

/// True when stdout may be coloured (NO_COLOR unset and stdout is a terminal).
pub fn colour() -> bool {
    use std::io::IsTerminal;
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()) && std::io::stdout().is_terminal()
}

/// Stdout text: newlines and tabs kept, and kdd's own [`COLOURS`] when `keep` (stdout is
/// coloured);
/// every other control character escaped (a spec's own `ESC[8m` hides nothing).
fn escape_data(text: &str, keep: bool) -> std::borrow::Cow<'_, str> {
    if !text.contains('\u{1b}') {
        return crate::spec::escape_control_keep(text, "\n\t");
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find('\u{1b}') {
        out.push_str(&crate::spec::escape_control_keep(&rest[..i], "\n\t"));
        rest = &rest[i..];
        match COLOURS.iter().find(|c| keep && rest.starts_with(**c)) {
            Some(c) => {
                out.push_str(c);
                rest = &rest[c.len()..];
            }
            None => {
                out.push_str("\\u001b");
                rest = &rest[1..];
            }
        }
    }
    out.push_str(&crate::spec::escape_control_keep(rest, "\n\t"));
    std::borrow::Cow::Owned(out)
}

fn line(msg: &str) -> std::borrow::Cow<'_, str> {
    crate::spec::escape_control(msg)
}

/// An informational line on stderr.
pub fn info(msg: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{}", line(msg));
}

/// A warning on stderr.
pub fn warn(msg: &str) {
    let _ = writeln!(std::io::stderr().lock(), "kdd: warning: {}", line(msg));
}

/// An error on stderr.
pub fn error(msg: &str) {
    let _ = writeln!(std::io::stderr().lock(), "kdd: error: {}", line(msg));
}

#[cfg(test)]
mod tests {
    #[test]
    fn data_keeps_layout_and_colour_only() {
        assert_eq!(super::escape_data("a\tb\nc", true), "a\tb\nc");
        let text = "\u{1b}[1;36mid\u{1b}[0m \u{1b}]0;title\u{7} \u{1b}[2J\r \u{1b}[8mhid\u{1b}[28m";
        assert_eq!(
            super::escape_data(text, true),
            "\u{1b}[1;36mid\u{1b}[0m \\u001b]0;title\\u0007 \\u001b[2J\\r \\u001b[8mhid\\u001b[28m"
        );
        // NO_COLOR or not a terminal: no escape sequence at all.
        assert_eq!(
            super::escape_data(text, false),
            "\\u001b[1;36mid\\u001b[0m \\u001b]0;title\\u0007 \\u001b[2J\\r \\u001b[8mhid\\u001b[28m"
        );
    }
}
