//! `kdd violations`: edges that break the layer rule BR-LAYER-001 (QRY-006).

use crate::cli::shared::{fail, open_cache_at, parse_kind, parse_layer};
use crate::cli::{output, ExitStatus, GlobalArgs};
use crate::query::{self, ViolationsRequest};
use crate::spec::{Kind, Layer};

/// Arguments of `kdd violations`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub at: super::at_ref::RefArg,
    /// Only violations whose source node has one of these kinds.
    #[arg(long, value_delimiter = ',', value_parser = parse_kind)]
    pub kind: Vec<Kind>,
    /// Only violations whose source node is in one of these layers.
    #[arg(long, value_delimiter = ',', value_parser = parse_layer)]
    pub layer: Vec<Layer>,
}

/// Run the subcommand. Exit 1 when there are violations (usable as a check).
pub fn run(args: &Args, global: &GlobalArgs) -> anyhow::Result<ExitStatus> {
    let cache = match open_cache_at(global, false, args.at.get()) {
        Ok(c) => c,
        Err(e) => return fail(global, &e),
    };
    let req = ViolationsRequest {
        kinds: args.kind.clone(),
        layers: args.layer.clone(),
    };
    let r = match query::violations(&cache, &req) {
        Ok(r) => r,
        Err(e) => return fail(global, &e),
    };
    if global.json {
        output::json(&r)?;
    } else {
        let mut s = String::new();
        for v in &r.violations {
            s.push_str(&format!(
                "{}: {} -{}-> {} ({})\n",
                v.source_file, v.from_node, v.edge_type, v.to_node, v.explanation
            ));
        }
        s.push_str(&format!(
            "{} violations in {} edges ({:.1}%)\n",
            r.total_violations, r.total_edges_analyzed, r.violation_rate
        ));
        output::data(&s)?;
    }
    Ok(if r.violations.is_empty() {
        ExitStatus::Success
    } else {
        ExitStatus::Failure
    })
}
