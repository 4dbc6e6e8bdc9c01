//! `kdd coverage <node>`: which related artifacts a node has and lacks (QRY-005).

use crate::cli::shared::{fail, hl, open_cache_at};
use crate::cli::{output, ExitStatus, GlobalArgs};
use crate::query::{self, CoverageRequest};

/// Arguments of `kdd coverage`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub at: super::at_ref::RefArg,
    /// Full id (`Entity:Pedido`), short id (`UC-004`), file stem or path.
    pub node: String,
}

/// Run the subcommand. Exit 1 when something required is missing.
pub fn run(args: &Args, global: &GlobalArgs) -> anyhow::Result<ExitStatus> {
    let cache = match open_cache_at(global, false, args.at.get()) {
        Ok(c) => c,
        Err(e) => return fail(global, &e),
    };
    let r = match query::coverage(
        &cache,
        &CoverageRequest {
            node: args.node.clone(),
        },
    ) {
        Ok(r) => r,
        Err(e) => return fail(global, &e),
    };
    if global.json {
        output::json(&r)?;
    } else {
        let mut s = format!(
            "coverage of {} ({}): {:.1}%\n",
            hl(&r.analyzed_node.id),
            r.analyzed_node.kind,
            r.coverage_percent
        );
        for c in &r.required {
            s.push_str(&format!(
                "  [{}] {} — {}: {}\n",
                if c.status == "covered" { "x" } else { " " },
                c.category,
                c.description,
                c.found.join(", ")
            ));
        }
        output::data(&s)?;
    }
    Ok(if r.missing == 0 {
        ExitStatus::Success
    } else {
        ExitStatus::Failure
    })
}
