//! `kdd context` (not yet implemented).

use crate::cli::{ExitStatus, GlobalArgs};

/// Arguments of `kdd context`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {}

/// Run the subcommand.
pub fn run(_args: &Args, _global: &GlobalArgs) -> anyhow::Result<ExitStatus> {
    anyhow::bail!("`kdd context` is not implemented yet")
}
