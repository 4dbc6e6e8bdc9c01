//! `kdd search "<text>" --semantic | --lexical`: a single retrieval strategy (QRY-002 / BM25).

use crate::cli::shared::{fail, open_cache_at, parse_kind, parse_layer, print_hits};
use crate::cli::{output, ExitStatus, GlobalArgs};
use crate::query::{self, SearchMode, SearchRequest};
use crate::spec::{Kind, Layer};

/// Arguments of `kdd search`.
#[derive(Debug, Clone, clap::Args)]
#[command(group(clap::ArgGroup::new("mode").required(true).args(["semantic", "lexical"])))]
pub struct Args {
    #[command(flatten)]
    pub at: super::at_ref::RefArg,
    /// What to look for (≥ 3 characters).
    pub text: String,
    /// Embedding similarity only (needs an L2 index and the model).
    #[arg(long)]
    pub semantic: bool,
    /// BM25 over ids, titles, headings and text only.
    #[arg(long)]
    pub lexical: bool,
    #[arg(long, value_delimiter = ',', value_parser = parse_kind)]
    pub kind: Vec<Kind>,
    #[arg(long, value_delimiter = ',', value_parser = parse_layer)]
    pub layer: Vec<Layer>,
    #[arg(long)]
    pub domain: Option<String>,
    #[arg(long, short = 'n', default_value_t = 10)]
    pub limit: usize,
    #[arg(long, default_value_t = 0.0)]
    pub min_score: f32,
}

/// Run the subcommand.
pub fn run(args: &Args, global: &GlobalArgs) -> anyhow::Result<ExitStatus> {
    let req = SearchRequest {
        query: args.text.clone(),
        mode: if args.semantic {
            SearchMode::Semantic
        } else {
            SearchMode::Lexical
        },
        kinds: args.kind.clone(),
        layers: args.layer.clone(),
        domain: args.domain.clone(),
        limit: args.limit,
        min_score: args.min_score,
        expansion: Default::default(),
    };
    let cache = match open_cache_at(global, args.semantic, args.at.get()) {
        Ok(c) => c,
        Err(e) => return fail(global, &e),
    };
    let mut r = match query::search(&cache, &req) {
        Ok(r) => r,
        Err(e) => return fail(global, &e),
    };
    let ids = r.results.iter().map(|h| h.node_id.as_str());
    if let Err(e) = query::fresh::mark_stale(&cache, &mut r.warnings, ids) {
        return fail(global, &e);
    }
    if global.json {
        output::json(&r)?;
    } else {
        for w in &r.warnings {
            output::warn(&format!("{}: {}", w.code, w.message));
        }
        print_hits(&r.results)?;
    }
    Ok(if r.results.is_empty() {
        ExitStatus::Failure
    } else {
        ExitStatus::Success
    })
}
