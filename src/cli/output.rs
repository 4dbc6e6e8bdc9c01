//! The only place that writes to stdout/stderr. Over MCP stdio, stdout *is* the protocol, so
//! every human message goes to stderr and data goes through [`data`] / [`json`].

use std::io::Write;

/// Write data (a result) to stdout. Errors (broken pipe) are returned to the caller.
pub fn data(text: &str) -> std::io::Result<()> {
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

/// An informational line on stderr.
pub fn info(msg: &str) {
    let _ = writeln!(std::io::stderr().lock(), "{msg}");
}

/// A warning on stderr.
pub fn warn(msg: &str) {
    let _ = writeln!(std::io::stderr().lock(), "kdd: warning: {msg}");
}

/// An error on stderr.
pub fn error(msg: &str) {
    let _ = writeln!(std::io::stderr().lock(), "kdd: error: {msg}");
}

/// True when colour may be used on stderr (NO_COLOR unset and stderr is a terminal).
pub fn color() -> bool {
    use std::io::IsTerminal;
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()) && std::io::stderr().is_terminal()
}
