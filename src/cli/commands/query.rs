//! `kdd query "<text>"`: QRY-003 hybrid search (semantic + lexical + graph). Also hosts the
//! helpers shared by the other retrieval commands (opening the cache, printing errors).

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

/// Parse a kind name for clap.
pub fn parse_kind(s: &str) -> Result<Kind, String> {
    Kind::parse(s).ok_or_else(|| format!("unknown kind `{s}`"))
}

/// Parse a layer name for clap.
pub fn parse_layer(s: &str) -> Result<Layer, String> {
    Layer::parse(s).ok_or_else(|| format!("unknown layer `{s}`"))
}

/// Open the cache (building or refreshing it), loading the query embedder for L2 indexes.
pub fn open_cache(
    global: &GlobalArgs,
    want_embedder: bool,
) -> Result<crate::cache::Cache, query::Error> {
    open_cache_at(global, want_embedder, None)
}

/// [`open_cache`] at a ref (`--ref`; a bare repository reads its served ref: see
/// [`super::at_ref`]).
pub fn open_cache_at(
    global: &GlobalArgs,
    want_embedder: bool,
    rev: Option<&str>,
) -> Result<crate::cache::Cache, query::Error> {
    let unavailable = |e: anyhow::Error| query::Error::IndexUnavailable(format!("{e:#}"));
    let (settings, mirror) = super::at_ref::settings(global, rev).map_err(unavailable)?;
    let mut cache = match mirror {
        Some(m) => crate::cache::Cache::open_paths(
            &m.index_dir(),
            &m.tree(),
            &m.cache_root(),
            &crate::cache::OpenOptions::default(),
        )?,
        None => query::open(&settings)?,
    };
    for why in cache.healed() {
        output::warn(&format!(
            "the query cache was damaged ({why}); rebuilt it into a fresh generation"
        ));
    }
    if let Some(stats) = cache.last_update() {
        for e in &stats.errors {
            output::warn(e);
        }
    }
    if want_embedder && cache.level() >= crate::artifact::IndexLevel::L2 {
        match query::embedder_for(cache.manifest()) {
            Ok(e) => cache.set_embedder(e),
            Err(reason) => cache.set_embedder_unavailable(reason),
        }
    }
    Ok(cache)
}

/// A read met a damaged query cache (its generation is condemned): the dispatcher runs the
/// command once more, which rebuilds the cache.
#[derive(Debug, thiserror::Error)]
#[error("the query cache is damaged ({0})")]
pub struct CacheDamaged(String);

/// Set while the dispatcher runs a command again after [`CacheDamaged`].
pub static RETRYING: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Report a query error: JSON on stdout with `--json`, a message on stderr otherwise. Returns
/// the exit status (1 for "nothing found" errors, 2 otherwise). An error from a damaged cache
/// is returned as [`CacheDamaged`] instead (first time only), so the command runs again.
pub fn fail(global: &GlobalArgs, e: &query::Error) -> anyhow::Result<ExitStatus> {
    if crate::cache::take_damage() && !RETRYING.load(std::sync::atomic::Ordering::SeqCst) {
        return Err(CacheDamaged(e.to_string()).into());
    }
    let status = match e {
        query::Error::NodeNotFound(_) => ExitStatus::Failure,
        _ => ExitStatus::Error,
    };
    if global.json {
        output::json(&serde_json::json!({"error": {"code": e.code(), "message": e.to_string()}}))?;
    } else {
        output::error(&e.to_string());
    }
    Ok(status)
}

/// True when stdout may be coloured (NO_COLOR unset and stdout is a terminal).
pub fn color() -> bool {
    use std::io::IsTerminal;
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty()) && std::io::stdout().is_terminal()
}

/// Bold/cyan an id when colour is allowed.
pub fn hl(s: &str) -> String {
    if color() {
        format!("\x1b[1;36m{s}\x1b[0m")
    } else {
        s.to_string()
    }
}

/// Human rendering of a hybrid or search answer.
pub fn print_hits(hits: &[query::Hit]) -> std::io::Result<()> {
    let mut out = String::new();
    for (i, h) in hits.iter().enumerate() {
        out.push_str(&format!(
            "{:>2}. {:.3}  {}  {} — {}\n    {}{}  [{}{}]\n    {}\n",
            i + 1,
            h.score,
            hl(&h.node_id),
            h.kind,
            h.title,
            h.source_file,
            match (&h.section, h.lines, &h.source) {
                (Some(s), Some([a, b]), _) => format!(":{a}-{b} ({s})"),
                (Some(s), None, Some(src)) => format!(" ({s}; source: {src})"),
                _ => String::new(),
            },
            h.match_source,
            h.reached_via
                .as_deref()
                .map(|v| format!(" via {v}"))
                .unwrap_or_default(),
            h.snippet
        ));
    }
    output::data(&out)
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
    output::info(&format!(
        "{} results, ~{} tokens",
        r.total_results, r.total_tokens
    ));
    Ok(())
}

/// Run the subcommand.
pub fn run(args: &Args, global: &GlobalArgs) -> anyhow::Result<ExitStatus> {
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
    let r = match query::hybrid(&cache, &req) {
        Ok(r) => r,
        Err(e) => return fail(global, &e),
    };
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
