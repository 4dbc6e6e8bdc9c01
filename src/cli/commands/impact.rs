//! `kdd impact <node>`: what a change to a node affects (QRY-004).

use crate::cli::shared::{fail, hl, open_cache_at};
use crate::cli::{output, ExitStatus, GlobalArgs};
use crate::query::{self, ChangeType, ImpactRequest};

/// Arguments of `kdd impact`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub at: super::at_ref::RefArg,
    /// Full id (`Entity:Pedido`), short id (`UC-004`), file stem or path.
    pub node: String,
    /// `modify_attribute` (default), `add_attribute`, `remove` or `rename`.
    #[arg(long, default_value = "modify_attribute", value_parser = parse_change)]
    pub change_type: ChangeType,
    /// Ignore the implicit relations found by the developer's agent (L3 `source: agent` edges).
    #[arg(long)]
    pub no_agent_edges: bool,
    /// Propagation depth (1–5).
    #[arg(long, default_value_t = 3)]
    pub depth: u8,
}

fn parse_change(s: &str) -> Result<ChangeType, String> {
    ChangeType::parse(s).ok_or_else(|| format!("INVALID_CHANGE_TYPE: unknown change type: {s}"))
}

/// Run the subcommand.
pub fn run(args: &Args, global: &GlobalArgs) -> anyhow::Result<ExitStatus> {
    let cache = match open_cache_at(global, false, args.at.get()) {
        Ok(c) => c,
        Err(e) => return fail(global, &e),
    };
    cache.set_agent_edges(!args.no_agent_edges);
    let req = ImpactRequest {
        node: args.node.clone(),
        change_type: args.change_type,
        depth: args.depth,
    };
    let r = match query::impact(&cache, &req) {
        Ok(r) => r,
        Err(e) => return fail(global, &e),
    };
    if global.json {
        output::json(&r)?;
    } else {
        let mut s = format!(
            "impact of {} ({})\n",
            hl(&r.analyzed_node.id),
            r.analyzed_node.kind
        );
        s.push_str(&format!(
            "directly affected ({}):\n",
            r.total_directly_affected
        ));
        for d in &r.directly_affected {
            let mark = if d.source.is_some() {
                "  (source: agent)"
            } else {
                ""
            };
            s.push_str(&format!(
                "  {}  {}  [{}] {}{mark}\n",
                hl(&d.id),
                d.kind,
                d.edge_type,
                d.source_file
            ));
        }
        s.push_str(&format!(
            "transitively affected ({}):\n",
            r.total_transitively_affected
        ));
        for t in &r.transitively_affected {
            s.push_str(&format!("  {}  via {}\n", hl(&t.id), t.path.join(" <- ")));
        }
        s.push_str(&format!("scenarios to re-run ({}):\n", r.total_scenarios));
        for sc in &r.scenarios_to_rerun {
            s.push_str(&format!(
                "  {} :: {}  ({})\n",
                sc.feature, sc.scenario, sc.reason
            ));
        }
        for n in &r.agent_notes {
            s.push_str(&format!(
                "agent note ({}, source: agent): {}\n",
                n.agent, n.note
            ));
        }
        if r.truncated {
            s.push_str("(truncated at the requested depth)\n");
        }
        output::data(&s)?;
    }
    Ok(ExitStatus::Success)
}
