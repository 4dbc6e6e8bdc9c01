//! `kdd graph <node>`: the subgraph around a node (QRY-001) as JSON, text, Mermaid or DOT.

use crate::cli::shared::{fail, hl, open_cache_at, parse_kind};
use crate::cli::{output, ExitStatus, GlobalArgs};
use crate::query::{self, render, GraphRequest};
use crate::spec::Kind;

/// Output format of `kdd graph`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Text,
    Json,
    Mermaid,
    Dot,
}

/// Arguments of `kdd graph`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub at: super::at_ref::RefArg,
    /// Full id (`Entity:Pedido`), short id (`UC-004`), file stem or path.
    pub node: String,
    /// Hops to follow (1–5).
    #[arg(long, default_value_t = 2)]
    pub depth: u8,
    /// Only these edge types (comma-separated: `EMITS,ENTITY_RULE`).
    #[arg(long, value_delimiter = ',')]
    pub edge_types: Vec<String>,
    /// Only related nodes of these kinds.
    #[arg(long, value_delimiter = ',', value_parser = parse_kind)]
    pub kind: Vec<Kind>,
    /// Follow edges that violate BR-LAYER-001 too.
    #[arg(long)]
    pub no_respect_layers: bool,
    /// Ignore the implicit relations found by the developer's agent (L3 `source: agent` edges).
    #[arg(long)]
    pub no_agent_edges: bool,
    /// Output format (default text, or json with --json).
    #[arg(long, value_enum)]
    pub format: Option<Format>,
}

/// Run the subcommand.
pub fn run(args: &Args, global: &GlobalArgs) -> anyhow::Result<ExitStatus> {
    let req = GraphRequest {
        node: args.node.clone(),
        depth: args.depth,
        edge_types: args.edge_types.clone(),
        kinds: args.kind.clone(),
        respect_layers: !args.no_respect_layers,
    };
    let cache = match open_cache_at(global, false, args.at.get()) {
        Ok(c) => c,
        Err(e) => return fail(global, &e),
    };
    cache.set_agent_edges(!args.no_agent_edges);
    let g = match query::graph(&cache, &req) {
        Ok(g) => g,
        Err(e) => return fail(global, &e),
    };
    let format = args.format.unwrap_or(if global.json {
        Format::Json
    } else {
        Format::Text
    });
    match format {
        Format::Json => output::json(&g)?,
        Format::Mermaid => output::data(&render::mermaid(&g))?,
        Format::Dot => output::data(&render::dot(&g))?,
        Format::Text => {
            let mut s = format!(
                "{} ({}) — {}\n",
                hl(&g.center_node.id),
                g.center_node.kind,
                g.center_node.title
            );
            for r in &g.related_nodes {
                s.push_str(&format!(
                    "  d{}  {}  {} — {}\n",
                    r.distance,
                    hl(&r.node.id),
                    r.node.kind,
                    r.node.title
                ));
            }
            s.push_str("edges:\n");
            for e in &g.edges {
                let mark = if e.source.is_some() {
                    "  (source: agent)"
                } else {
                    ""
                };
                s.push_str(&format!(
                    "  {} -{}-> {}{mark}\n",
                    e.from_node, e.edge_type, e.to_node
                ));
            }
            output::data(&s)?;
        }
    }
    Ok(ExitStatus::Success)
}
