//! `kdd mcp`: MCP server over stdio for coding agents (tools `kdd_query`, `kdd_context`,
//! `kdd_graph`, `kdd_impact`, `kdd_coverage`, `kdd_violations`, `kdd_read`, `kdd_list`,
//! `kdd_status`). Stdout carries only the protocol; logs go to stderr.

use crate::cli::{ExitStatus, GlobalArgs};
use crate::serve::{mcp, Engine};
use anyhow::Context;
use std::sync::Arc;
use std::time::Duration;

/// Arguments of `kdd mcp`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Serve the tree of this ref instead of the work tree (bare repositories default to
    /// HEAD's branch).
    #[arg(long = "ref", value_name = "REF")]
    pub rev: Option<String>,
    /// Per-call deadline in seconds.
    #[arg(long, default_value_t = 30, value_name = "SECONDS")]
    pub timeout: u64,
}

/// Run the subcommand.
pub fn run(args: &Args, global: &GlobalArgs) -> anyhow::Result<ExitStatus> {
    crate::report::set_program("kdd mcp");
    let settings = global.settings()?;
    // Freshness is checked on every call (interval zero): a re-index is picked up at once.
    let engine = Arc::new(Engine::new(settings, args.rev.as_deref(), Duration::ZERO));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    rt.block_on(mcp::serve_stdio(
        engine,
        Duration::from_secs(args.timeout.max(1)),
    ))?;
    Ok(ExitStatus::Success)
}
