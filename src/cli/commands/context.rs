//! `kdd context --hint H [--hint H…]`: what an agent must know before touching some code
//! (QRY-007), as JSON, YAML or a markdown context pack.

use crate::cli::shared::{fail, open_cache_at};
use crate::cli::{output, ExitStatus, GlobalArgs};
use crate::query::{self, render, ContextRequest};

/// Output format of `kdd context`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Markdown context pack (default for humans).
    Markdown,
    Json,
    Yaml,
}

/// Arguments of `kdd context`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub at: super::at_ref::RefArg,
    /// A file path, node id, name or keyword (repeatable).
    #[arg(long = "hint", value_name = "HINT")]
    pub hints: Vec<String>,
    /// More hints, positional.
    #[arg(value_name = "HINTS")]
    pub rest: Vec<String>,
    /// Graph depth (1–3).
    #[arg(long, default_value_t = 1)]
    pub depth: u8,
    /// Token budget.
    #[arg(long, default_value_t = 4000)]
    pub max_tokens: usize,
    /// Output format (default markdown, or json with --json).
    #[arg(long, value_enum)]
    pub format: Option<Format>,
}

/// Run the subcommand.
pub fn run(args: &Args, global: &GlobalArgs) -> anyhow::Result<ExitStatus> {
    let mut hints = args.hints.clone();
    hints.extend(args.rest.iter().cloned());
    if hints.iter().all(|h| h.trim().is_empty()) {
        return fail(global, &query::Error::EmptyHints);
    }
    let cache = match open_cache_at(global, false, args.at.get()) {
        Ok(c) => c,
        Err(e) => return fail(global, &e),
    };
    let req = ContextRequest {
        hints,
        depth: args.depth,
        max_tokens: args.max_tokens,
    };
    let mut r = match query::context(&cache, &req) {
        Ok(r) => r,
        Err(e) => return fail(global, &e),
    };
    let items = r.constraints.iter().chain(&r.behavior);
    match query::fresh::stale_warning(&cache, items.map(|i| i.node_id.as_str())) {
        Ok(w) => r.warnings.extend(w.map(|w| w.message)),
        Err(e) => return fail(global, &e),
    }
    let format = args.format.unwrap_or(if global.json {
        Format::Json
    } else {
        Format::Markdown
    });
    match format {
        Format::Json => output::json(&r)?,
        Format::Yaml => output::data(&render::yaml(&r))?,
        Format::Markdown => output::data(&render::context_markdown(&r))?,
    }
    if format != Format::Json {
        for w in &r.warnings {
            output::warn(w);
        }
    }
    Ok(if r.total_items == 0 {
        ExitStatus::Failure
    } else {
        ExitStatus::Success
    })
}
