//! `kdd hook` (not yet implemented).

use crate::cli::{ExitStatus, GlobalArgs};

/// Arguments of `kdd hook`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {}

/// Run the subcommand.
pub fn run(_args: &Args, _global: &GlobalArgs) -> anyhow::Result<ExitStatus> {
    anyhow::bail!("`kdd hook` is not implemented yet")
}

/// Entry of the `kdd-hook` binary.
pub fn main_from_env() -> anyhow::Result<ExitStatus> {
    anyhow::bail!("kdd-hook is not implemented yet")
}
