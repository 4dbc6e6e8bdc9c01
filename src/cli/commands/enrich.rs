//! `kdd enrich [SPEC…] [--agent CMD] [--timeout S] [--force]`: L3 enrichment by the developer's
//! own agent (UC-003 / CMD-003; see `crate::enrich`). Prints one line per spec as it ends (or the
//! whole report as JSON with `--json`); exit 0 when nothing failed, 1 when a spec failed, 2 when
//! nothing could run (no agent configured, no index).

use crate::cli::shared::{fail, hl, open_cache};
use crate::cli::{output, ExitStatus, GlobalArgs};
use crate::enrich::{self, Options, Outcome};
use std::time::Duration;

/// Arguments of `kdd enrich`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Specs to enrich: full ids, short ids (`UC-004`), file stems or paths (default: every
    /// spec not yet enriched for its current text by this agent).
    #[arg(value_name = "SPEC")]
    pub targets: Vec<String>,
    /// The agent command, run with `sh -c` in the repository root: the request JSON on its
    /// stdin, the answer JSON on its stdout (default: `git config kdd.agent`). kdd passes the
    /// environment through untouched and stores no API key.
    #[arg(long, value_name = "CMD")]
    pub agent: Option<String>,
    /// Seconds the agent may take per spec before its process group is killed.
    #[arg(long, value_name = "S", default_value_t = 300)]
    pub timeout: u64,
    /// Enrich again specs already enriched for their current text by this agent.
    #[arg(long)]
    pub force: bool,
}

fn line(o: &Outcome) -> String {
    let mut s = match (o.status, &o.message, &o.file) {
        ("failed", Some(m), _) => format!("failed    {}: {m}", hl(&o.id)),
        (st, _, Some(f)) => format!("{st:<9} {}  {f}", hl(&o.id)),
        (st, _, None) => format!("{st:<9} {}", hl(&o.id)),
    };
    for w in &o.warnings {
        s.push_str(&format!("\n  warning: {w}"));
    }
    s.push('\n');
    s
}

/// Run the subcommand.
pub fn run(args: &Args, global: &GlobalArgs) -> anyhow::Result<ExitStatus> {
    let settings = global.settings()?;
    let cache = match open_cache(global, false) {
        Ok(c) => c,
        Err(e) => return fail(global, &e),
    };
    let opts = Options {
        specs: args.targets.clone(),
        agent: args.agent.clone(),
        timeout: Duration::from_secs(args.timeout.max(1)),
        force: args.force,
    };
    let json = global.json;
    let mut print_err: Option<std::io::Error> = None;
    let mut on_done = |o: &Outcome| {
        if !json && print_err.is_none() {
            print_err = output::data(&line(o)).err();
        }
    };
    let report = match enrich::enrich(&settings, &cache, &opts, &mut on_done) {
        Ok(r) => r,
        Err(e) => {
            if json {
                output::json(
                    &serde_json::json!({"error": {"code": e.code(), "message": e.to_string()}}),
                )?;
            } else {
                output::error(&e.to_string());
            }
            return Ok(ExitStatus::Error);
        }
    };
    if let Some(e) = print_err {
        return Err(e.into());
    }
    if json {
        output::json(&report)?;
    } else {
        output::data(&format!(
            "{} enriched, {} up to date, {} failed (agent {}); commit .kdd-index/enrichments/ to share them\n",
            report.enriched, report.skipped, report.failed, report.agent
        ))?;
    }
    Ok(if report.failed > 0 {
        ExitStatus::Failure
    } else {
        ExitStatus::Success
    })
}
