//! `kdd resolve`: regenerate every conflicted or stale `.kdd-index/` path from the (resolved)
//! staged specs and stage it. Covers what the merge driver cannot: modify/delete and add/add
//! conflicts git resolves without drivers, clones where the driver is not configured, text
//! merges with conflict markers, commits made with `--no-verify`.

use crate::cli::{output, ExitStatus, GlobalArgs};
use crate::hook::{self, Options};

/// Arguments of `kdd resolve`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Write the work tree only; do not stage.
    #[arg(long)]
    pub no_stage: bool,
}

/// Run the subcommand.
pub fn run(args: &Args, global: &GlobalArgs) -> anyhow::Result<ExitStatus> {
    let settings = global.settings()?;
    let report = hook::heal(
        &settings,
        Options {
            stage: !args.no_stage,
            embed: true,
        },
    )?;
    if global.json {
        output::json(&report)?;
    } else {
        for w in &report.warnings {
            output::warn(w);
        }
        for d in &report.diagnostics {
            output::info(&format!("kdd: {d}"));
        }
        output::info(&format!(
            "kdd resolve: {} specs, re-derived {}, wrote {}, removed {} under .kdd-index/{}",
            report.specs,
            report.rederived.len(),
            report.written.len(),
            report.removed.len(),
            if args.no_stage { "" } else { " (staged)" }
        ));
    }
    if !report.conflicted_specs.is_empty() {
        output::error(&format!(
            "resolve these specs first, `git add` them, then run `kdd resolve` again: {}",
            report.conflicted_specs.join(", ")
        ));
        return Ok(ExitStatus::Failure);
    }
    Ok(ExitStatus::Success)
}
