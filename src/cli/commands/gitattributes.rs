//! `kdd gitattributes`: print the `.gitattributes` lines that route `.kdd-index/` merges to the
//! kdd merge driver (the same text as `.gitattributes.example`).

use crate::cli::{output, ExitStatus, GlobalArgs};

/// The lines `kdd install` adds to `.gitattributes`.
pub const LINES: &str = "\
# kdd: merge the committed index with the kdd merge driver (see merge-driver/README.md)
.kdd-index/** merge=kdd
# kdd: generated files, collapsed in code review
.kdd-index/** linguist-generated=true
# kdd: artifacts are written byte for byte (no CRLF on an autocrlf checkout)
.kdd-index/** -text
";

/// The line of [`LINES`] that `kdd install` adds on its own to attributes written before it.
pub const NO_EOL: &str = ".kdd-index/** -text";

/// Arguments of `kdd gitattributes`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {}

/// Run the subcommand.
pub fn run(_args: &Args, _global: &GlobalArgs) -> anyhow::Result<ExitStatus> {
    output::data(LINES)?;
    Ok(ExitStatus::Success)
}
