//! `kdd query "<text>"`: QRY-003 hybrid search (semantic + lexical + graph).

use crate::cli::shared::{fail, open_cache_at, parse_kind, parse_layer, print_hits};
use crate::cli::{output, ExitStatus, GlobalArgs};
use crate::query::{self, HybridRequest, HybridResponse};
use crate::spec::{Kind, Layer};

/// Arguments of `kdd query`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub at: super::at_ref::RefArg,
    /// What to look for, in natural language (≥ 3 characters).
    pub text: String,
    /// Only these kinds (repeatable or comma-separated: `business-rule,use-case`).
    #[arg(long, value_delimiter = ',', value_parser = parse_kind)]
    pub kind: Vec<Kind>,
    /// Only these layers (`01-domain`, `02`, `behavior`…).
    #[arg(long, value_delimiter = ',', value_parser = parse_layer)]
    pub layer: Vec<Layer>,
    /// Only this domain (multi-domain repositories).
    #[arg(long)]
    pub domain: Option<String>,
    /// Maximum results (1–100).
    #[arg(long, short = 'n', default_value_t = 10)]
    pub limit: usize,
    /// Minimum calibrated score (0–1; scores are confidences comparable across questions).
    #[arg(long, default_value_t = query::DEFAULT_MIN_SCORE)]
    pub min_score: f32,
    /// Graph expansion depth (1–5).
    #[arg(long, default_value_t = 2)]
    pub depth: u8,
    /// Rank on lexical + semantic evidence only: no support from linked specs and no graph
    /// expansion of the top hits.
    #[arg(long)]
    pub no_expand: bool,
    /// Skip edges that violate BR-LAYER-001 during expansion (default).
    #[arg(long, overrides_with = "no_respect_layers")]
    pub respect_layers: bool,
    /// Follow edges that violate BR-LAYER-001 too.
    #[arg(long)]
    pub no_respect_layers: bool,
    /// Ignore the implicit relations found by the developer's agent (L3 `source: agent` edges).
    #[arg(long)]
    pub no_agent_edges: bool,
    /// Token budget of the answer: indexed fields are shed from the bottom hits first, then
    /// hits (the best one always stays).
    #[arg(long, default_value_t = 8000)]
    pub max_tokens: usize,
}

fn print_human(r: &HybridResponse) -> std::io::Result<()> {
    for w in &r.warnings {
        output::warn(&format!("{}: {}", w.code, w.message));
    }
    if r.results.is_empty() {
        output::info("no results");
        return Ok(());
    }
    print_hits(&r.results)?;
    if !r.graph_expansion.is_empty() {
        let mut s = String::from("graph:\n");
        for e in &r.graph_expansion {
            let mark = if e.source.is_some() {
                "  (source: agent)"
            } else {
                ""
            };
            s.push_str(&format!(
                "    {} -{}-> {}{mark}\n",
                e.from_node, e.edge_type, e.to_node
            ));
        }
        output::data(&s)?;
    }
    let read_as = if r.read_as.is_empty() {
        String::new()
    } else {
        format!("; read as {}", r.read_as.join(", "))
    };
    output::info(&format!(
        "{} results, ~{} tokens{read_as}",
        r.total_results, r.total_tokens
    ));
    Ok(())
}

/// Run the subcommand.
pub fn run(args: &Args, global: &GlobalArgs) -> anyhow::Result<ExitStatus> {
    let _span = crate::trace::span("command");
    let req = HybridRequest {
        query: args.text.clone(),
        kinds: args.kind.clone(),
        layers: args.layer.clone(),
        domain: args.domain.clone(),
        limit: args.limit,
        min_score: args.min_score,
        depth: args.depth,
        expand: !args.no_expand,
        respect_layers: !args.no_respect_layers,
        max_tokens: args.max_tokens,
        offset: 0,
        expansion: Default::default(),
    };
    if let Some(e) = query::check_text(&req.query) {
        return fail(global, &e);
    }
    let cache = match open_cache_at(global, true, args.at.get()) {
        Ok(c) => c,
        Err(e) => return fail(global, &e),
    };
    cache.set_agent_edges(!args.no_agent_edges);
    let searching = crate::trace::span("hybrid");
    let mut r = match query::hybrid(&cache, &req) {
        Ok(r) => r,
        Err(e) => return fail(global, &e),
    };
    drop(searching);
    let ids = r.results.iter().map(|h| h.node_id.as_str());
    if let Err(e) = query::fresh::mark_stale(&cache, &mut r.warnings, ids) {
        return fail(global, &e);
    }
    let _span = crate::trace::span("output");
    if global.json {
        output::json(&r)?;
    } else {
        print_human(&r)?;
    }
    Ok(if r.results.is_empty() {
        ExitStatus::Failure
    } else {
        ExitStatus::Success
    })
}
