//! `kdd merge-index <ref> <ref>… [--output DIR]`: merge the indexes committed at two or more
//! refs per BR-MERGE-001 (last-write-wins by commit time, delete-wins, edge union with cascade,
//! embeddings follow the winner, compatible manifests) and report the conflicts resolved.

use crate::cli::{output, ExitStatus, GlobalArgs};
use std::path::PathBuf;

/// Arguments of `kdd merge-index`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Two or more refs or commits whose `.kdd-index/` to merge.
    #[arg(required = true, num_args = 2..)]
    pub refs: Vec<String>,
    /// Directory to write the merged index to (default: the work tree's `.kdd-index/`).
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    /// Only report; write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Refuse to merge when any node conflicts (CMD-004 `fail_on_conflict`), instead of
    /// last-write-wins.
    #[arg(long)]
    pub fail_on_conflict: bool,
}

/// Run the subcommand.
pub fn run(args: &Args, global: &GlobalArgs) -> anyhow::Result<ExitStatus> {
    let settings = global.settings()?;
    let report = match crate::merge::refs::merge_refs(&settings.repo_root, &args.refs) {
        Ok(r) => r,
        Err(e @ crate::merge::refs::Error::Incompatible(_)) => {
            output::error(&e.to_string());
            return Ok(ExitStatus::Failure);
        }
        Err(e) => return Err(e.into()),
    };
    if args.fail_on_conflict && !report.conflicts_resolved.is_empty() {
        output::error(&format!(
            "Merge aborted: {} conflicts detected ({})",
            report.conflicts_resolved.len(),
            report
                .conflicts_resolved
                .iter()
                .map(|c| c.node.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
        return Ok(ExitStatus::Failure);
    }
    if !args.dry_run {
        let out = match &args.output {
            Some(o) => o.clone(),
            None if settings.bare => {
                anyhow::bail!("a bare repository has no work tree: pass --output DIR")
            }
            None => settings.index_dir.clone(),
        };
        let is_index = out.join("manifest.json").exists()
            || std::fs::read_dir(&out).map_or(true, |mut d| d.next().is_none());
        if !is_index {
            anyhow::bail!(
                "{}: not empty and not a kdd index (no manifest.json); pass an empty or index directory",
                out.display()
            );
        }
        let paths = crate::artifact::ArtifactPaths::new(&out);
        crate::artifact::replace_index(&paths, &report.files)?;
    }
    if global.json {
        output::json(&report)?;
    } else {
        output::data(&format!(
            "merged {} refs: {} nodes, {} edges, {} conflicts resolved, {} deleted",
            report.refs.len(),
            report.nodes,
            report.edges,
            report.conflicts_resolved.len(),
            report.deleted.len()
        ))?;
        for c in &report.conflicts_resolved {
            output::data(&format!(
                "  {} {} → {} ({})",
                c.rule,
                c.node,
                c.winner.as_deref().unwrap_or("deleted"),
                c.detail
            ))?;
        }
        for w in &report.warnings {
            output::warn(w);
        }
    }
    Ok(ExitStatus::Success)
}
