//! `kdd orphans`: links whose target does not exist.

use crate::cli::shared::{fail, open_cache_at};
use crate::cli::{output, ExitStatus, GlobalArgs};
use crate::query::{self, OrphansRequest};

/// Arguments of `kdd orphans`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub at: super::at_ref::RefArg,
    /// Only links of these edge types (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub edge_type: Vec<String>,
}

/// Run the subcommand. Exit 1 when there are orphan links (usable as a check).
pub fn run(args: &Args, global: &GlobalArgs) -> anyhow::Result<ExitStatus> {
    let cache = match open_cache_at(global, false, args.at.get()) {
        Ok(c) => c,
        Err(e) => return fail(global, &e),
    };
    let r = match query::orphans(
        &cache,
        &OrphansRequest {
            edge_types: args.edge_type.clone(),
        },
    ) {
        Ok(r) => r,
        Err(e) => return fail(global, &e),
    };
    if global.json {
        output::json(&r)?;
    } else {
        let mut s = String::new();
        for o in &r.orphans {
            s.push_str(&format!(
                "{}: {} -{}-> {} (not found)\n",
                o.source_file, o.from_node, o.edge_type, o.to
            ));
        }
        s.push_str(&format!(
            "{} orphan links of {} ({:.1}%)\n",
            r.total_orphans, r.total_edges, r.orphan_rate
        ));
        output::data(&s)?;
    }
    Ok(if r.orphans.is_empty() {
        ExitStatus::Success
    } else {
        ExitStatus::Failure
    })
}
