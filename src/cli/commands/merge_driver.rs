//! `kdd merge-driver` (not yet implemented).

use crate::cli::{ExitStatus, GlobalArgs};

/// Arguments of `kdd merge-driver`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {}

/// Run the subcommand.
pub fn run(_args: &Args, _global: &GlobalArgs) -> anyhow::Result<ExitStatus> {
    anyhow::bail!("`kdd merge-driver` is not implemented yet")
}

/// Entry of the `kdd-merge-driver` binary.
pub fn main_from_env() -> anyhow::Result<ExitStatus> {
    anyhow::bail!("kdd-merge-driver is not implemented yet")
}
