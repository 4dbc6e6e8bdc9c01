//! `kdd sync push|pull [--remote NAME | --api URL] [--branch B] [--no-text]`: move only the
//! derived artifacts of `.kdd-index/` to or from a team server (UC-007 / CMD-005, REQ-003).
//! Errors carry the CMD-005 codes (`--json`: `{"error": {"code", "message"}}` on stdout) and
//! exit 1; the local index is untouched on any failure (see `crate::sync`).

use crate::cli::{output, ExitStatus, GlobalArgs};
use crate::sync;

/// Direction of a sync.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum Direction {
    /// Send the local index (merged with what the remote has) to the remote.
    Push,
    /// Merge the remote index into the local `.kdd-index/`.
    Pull,
}

/// Arguments of `kdd sync`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// `push` or `pull`.
    #[arg(value_enum)]
    pub direction: Direction,
    /// Git remote (name or URL) whose `refs/kdd/index/<branch>` carries the index.
    #[arg(long, default_value = "origin", conflicts_with = "api")]
    pub remote: String,
    /// Use the HTTP API of a `kdd serve` at this base URL instead of git (token: KDD_TOKEN).
    #[arg(long, value_name = "URL")]
    pub api: Option<String>,
    /// Branch whose index ref to sync (default: the checked-out branch).
    #[arg(long)]
    pub branch: Option<String>,
    /// Push no text at all: node titles and aliases are replaced by ids (also
    /// `git config kdd.syncText false`).
    #[arg(long)]
    pub no_text: bool,
}

/// Run the subcommand.
pub fn run(args: &Args, global: &GlobalArgs) -> anyhow::Result<ExitStatus> {
    let settings = global.settings()?;
    if settings.bare {
        anyhow::bail!(
            "{}: a bare repository has no local index to sync; run `kdd sync` in a clone",
            settings.repo_root.display()
        );
    }
    let dir = &settings.repo_root;
    let index_dir = &settings.index_dir;
    let text = sync::text_enabled(dir, args.no_text);
    let result = match (&args.api, args.direction) {
        (None, d) => {
            let o = sync::git::Options {
                remote: args.remote.clone(),
                branch: args.branch.clone(),
                text,
            };
            match d {
                Direction::Push => sync::git::push(dir, index_dir, &o),
                Direction::Pull => sync::git::pull(dir, index_dir, &o),
            }
        }
        (Some(url), Direction::Push) => {
            let branch = args.branch.clone().unwrap_or_else(|| {
                crate::git::git(dir, &["symbolic-ref", "--short", "-q", "HEAD"])
                    .map(|s| s.trim().to_string())
                    .unwrap_or_default()
            });
            let source = sync::api::source_id(dir, &branch);
            sync::api::push(url, index_dir, &source, text)
        }
        (Some(url), Direction::Pull) => sync::api::pull(url, index_dir),
    };
    let report = match result {
        Ok(r) => r,
        Err(e) => {
            if global.json {
                output::json(&serde_json::json!({
                    "error": {"code": e.code(), "message": e.to_string()}
                }))?;
            } else {
                output::error(&format!("{}: {e}", e.code()));
            }
            return Ok(ExitStatus::Failure);
        }
    };
    if global.json {
        output::json(&report)?;
        return Ok(ExitStatus::Success);
    }
    let what = if report.up_to_date {
        "up to date".to_string()
    } else {
        format!(
            "{} files ({} nodes, {} bytes)",
            report.files, report.nodes, report.bytes
        )
    };
    let target = report.remote_ref.as_deref().unwrap_or("");
    output::data(&format!(
        "sync {} via {} {} {target}: {what}, {} conflicts resolved{}",
        report.direction,
        report.transport,
        report.remote,
        report.conflicts_resolved,
        if report.direction == "push" && !report.text {
            " (no text)"
        } else {
            ""
        }
    ))?;
    for w in &report.warnings {
        output::warn(w);
    }
    Ok(ExitStatus::Success)
}
