//! `kdd doctor` (not yet implemented).

use crate::cli::{ExitStatus, GlobalArgs};

/// Arguments of `kdd doctor`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {}

/// Run the subcommand.
pub fn run(_args: &Args, _global: &GlobalArgs) -> anyhow::Result<ExitStatus> {
    anyhow::bail!("`kdd doctor` is not implemented yet")
}
