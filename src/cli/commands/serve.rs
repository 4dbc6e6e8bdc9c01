//! `kdd serve`: the HTTP retrieval API (PRD Appendix C) over the work tree's index, or over the
//! tree of a ref of a bare repository (`--ref`, no work tree needed).

use crate::cli::{output, ExitStatus, GlobalArgs};
use crate::serve::{http, Engine};
use anyhow::Context;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

/// Arguments of `kdd serve`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Address to listen on. Anything but loopback requires KDD_TOKEN (bearer auth).
    #[arg(long, default_value = "127.0.0.1:7878", value_name = "ADDR:PORT")]
    pub bind: SocketAddr,
    /// Serve the tree of this ref (branch, tag or commit) instead of the work tree; the
    /// default for a bare repository is HEAD's branch.
    #[arg(long = "ref", value_name = "REF")]
    pub rev: Option<String>,
    /// Per-request deadline in milliseconds (hybrid queries answer partial results past it).
    #[arg(long, default_value_t = 10_000, value_name = "MS")]
    pub timeout_ms: u64,
    /// Maximum request body in bytes.
    #[arg(long, default_value_t = 64 * 1024, value_name = "BYTES")]
    pub max_body: usize,
    /// Minimum milliseconds between two index freshness checks.
    #[arg(long, default_value_t = 500, value_name = "MS")]
    pub check_interval_ms: u64,
    /// A request's head (request line and headers) must arrive within this many milliseconds
    /// of the connection opening or of the previous answer.
    #[arg(long, default_value_t = 10_000, value_name = "MS")]
    pub header_timeout_ms: u64,
    /// A connection with no request in flight for this many milliseconds is closed.
    #[arg(long, default_value_t = 5_000, value_name = "MS")]
    pub idle_timeout_ms: u64,
    /// Connections open at once; at the cap the longest-idle one is closed to make room.
    #[arg(long, default_value_t = 256, value_name = "N")]
    pub max_connections: usize,
    /// Accept indexes pushed with `kdd sync push --api` (KDD_TOKEN required, even on
    /// loopback) and serve their BR-MERGE-001 merge instead of this repository's index.
    #[arg(long)]
    pub accept_push: bool,
    /// Maximum push body in bytes.
    #[arg(long, default_value_t = crate::serve::sync::DEFAULT_MAX_PUSH, value_name = "BYTES")]
    pub max_push_bytes: usize,
}

/// Run the subcommand.
pub fn run(args: &Args, global: &GlobalArgs) -> anyhow::Result<ExitStatus> {
    crate::report::set_program("kdd serve");
    let settings = global.settings()?;
    let token = std::env::var(crate::config::env::TOKEN)
        .ok()
        .filter(|t| !t.trim().is_empty());
    if let Some(t) = &token {
        http::check_token(t).map_err(|e| anyhow::anyhow!("refusing to start: {e}"))?;
    }
    let loopback = args.bind.ip().is_loopback();
    if !loopback && token.is_none() {
        anyhow::bail!(
            "refusing to bind {} without a token: set {} to a secret (clients send \
             `Authorization: Bearer <token>`), or bind 127.0.0.1",
            args.bind,
            crate::config::env::TOKEN
        );
    }
    let test_delay = std::env::var("KDD_SERVE_TEST_DELAY_MS")
        .ok()
        .and_then(|v| v.parse().ok())
        .map(Duration::from_millis)
        .unwrap_or_default();
    let timeout = Duration::from_millis(args.timeout_ms.max(1));
    let header_timeout = Duration::from_millis(args.header_timeout_ms.max(1));
    let opts = http::Options {
        token,
        timeout,
        max_body: args.max_body.max(1024),
        loopback,
        test_delay,
        limits: crate::serve::conn::Limits {
            header_timeout,
            idle_timeout: Duration::from_millis(args.idle_timeout_ms.max(1)),
            max_connections: args.max_connections.max(1),
            // Body read, the query and a hybrid query's partial-results retry.
            request_timeout: header_timeout + timeout * 2,
        },
    };
    let engine = Engine::new(
        settings,
        args.rev.as_deref(),
        Duration::from_millis(args.check_interval_ms),
    );
    let engine = Arc::new(if args.accept_push {
        engine.serve_pushed(args.max_push_bytes.max(1024))
    } else {
        engine
    });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(args.bind)
            .await
            .with_context(|| format!("cannot listen on {}", args.bind))?;
        let addr = listener.local_addr()?;
        output::info(&format!("kdd serve: listening on http://{addr}"));
        http::serve(engine, listener, opts).await?;
        output::info("kdd serve: stopped");
        anyhow::Ok(())
    })?;
    Ok(ExitStatus::Success)
}
