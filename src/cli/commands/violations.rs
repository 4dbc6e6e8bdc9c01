//! `kdd violations` (not yet implemented).

use crate::cli::{ExitStatus, GlobalArgs};

/// Arguments of `kdd violations`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {}

/// Run the subcommand.
pub fn run(_args: &Args, _global: &GlobalArgs) -> anyhow::Result<ExitStatus> {
    anyhow::bail!("`kdd violations` is not implemented yet")
}
