//! `kdd hook <name> [args]` and the `kdd-hook` binary: git hook entry points.
//!
//! `pre-commit` indexes the staged tree incrementally; `post-merge`, `post-checkout` and
//! `post-rewrite` heal after merges, branch switches and rebases. Hooks never fail because of
//! the indexer's own trouble: they report and exit 0. `KDD_HOOK=0` disables them.

use crate::cli::{output, ExitStatus, GlobalArgs};
use crate::config::Settings;
use crate::hook::{self, Options, Report};

/// Arguments of `kdd hook`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Hook name: pre-commit, post-merge, post-checkout, post-rewrite, post-receive.
    pub name: String,
    /// Arguments git passed to the hook.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub args: Vec<String>,
}

#[derive(Debug, clap::Parser)]
#[command(name = "kdd-hook", version, about = "git hook entry for kdd")]
struct HookCli {
    #[command(flatten)]
    global: GlobalArgs,
    #[command(flatten)]
    args: Args,
}

/// Run the subcommand.
pub fn run(args: &Args, global: &GlobalArgs) -> anyhow::Result<ExitStatus> {
    if hook::disabled() {
        return Ok(ExitStatus::Success);
    }
    let settings = match global.settings() {
        Ok(s) => s,
        Err(e) => {
            output::warn(&format!("kdd-hook: {e:#}; skipping"));
            return Ok(ExitStatus::Success);
        }
    };
    if args.name == "post-receive" {
        return crate::serve::receive::run_hook(&settings);
    }
    if settings.bare {
        return Ok(ExitStatus::Success);
    }
    let event = match args.name.as_str() {
        "pre-commit" => None,
        "post-merge" => Some("merge"),
        "post-rewrite" => Some("rewrite"),
        // cherry-pick and revert run no pre-commit; their commits are healed here. Ordinary
        // commits were indexed by pre-commit, so this is the fast no-op path.
        "post-commit" => {
            if crate::git::rebase_in_progress(&settings.repo_root) {
                return Ok(ExitStatus::Success);
            }
            Some("commit")
        }
        "post-checkout" => {
            // Only branch switches (flag 1) that moved HEAD, never in the middle of a rebase.
            let branch = args.args.get(2).map(String::as_str) == Some("1");
            let moved = args.args.first() != args.args.get(1);
            let rebasing = crate::git::rebase_in_progress(&settings.repo_root);
            if !branch
                || !moved
                || rebasing
                || std::env::var_os("GIT_REFLOG_ACTION")
                    .is_some_and(|a| a.to_string_lossy().starts_with("rebase"))
            {
                return Ok(ExitStatus::Success);
            }
            Some("checkout")
        }
        "post-receive" => return Ok(ExitStatus::Success),
        other => {
            output::warn(&format!("kdd-hook: unknown hook `{other}`; nothing to do"));
            return Ok(ExitStatus::Success);
        }
    };
    match hook::heal(
        &settings,
        Options {
            stage: true,
            embed: true,
        },
    ) {
        Ok(report) => {
            print_report(&report, &args.name);
            if let Some(ev) = event {
                follow_up_commit(&settings, &report, ev);
            }
        }
        Err(e) => output::warn(&format!(
            "kdd-hook {}: {e}; .kdd-index/ was not updated and the git operation goes ahead \
             (`kdd status` shows what is stale, `kdd resolve` repairs it)",
            args.name
        )),
    }
    Ok(ExitStatus::Success)
}

fn print_report(r: &Report, name: &str) {
    for w in &r.warnings {
        output::warn(w);
    }
    for d in &r.diagnostics {
        output::info(&format!("kdd: {d}"));
    }
    if !r.conflicted_specs.is_empty() {
        output::warn(&format!(
            "specs still in conflict, not indexed: {}",
            r.conflicted_specs.join(", ")
        ));
    }
    if !r.written.is_empty() || !r.removed.is_empty() {
        output::info(&format!(
            "kdd {name}: re-derived {} spec(s); staged {} written, {} removed under .kdd-index/",
            r.rederived.len(),
            r.written.len(),
            r.removed.len()
        ));
    }
}

/// With `git config kdd.healCommit true`, commit what a post-merge/rewrite heal staged.
fn follow_up_commit(settings: &Settings, r: &Report, event: &str) {
    let staged = r.staged();
    if staged.is_empty() {
        return;
    }
    let on = crate::git::config_get(&settings.repo_root, "kdd.healCommit")
        .is_some_and(|v| matches!(v.as_str(), "true" | "yes" | "1" | "on"));
    if !on {
        output::info("kdd: the healed .kdd-index/ paths are staged; commit them (or set kdd.healCommit=true)");
        return;
    }
    // Plumbing, not `git commit`: git may still consider the merge in progress while
    // post-merge runs. Only when the index holds nothing but what this heal staged.
    let dir = &settings.repo_root;
    let run = || -> Result<(), crate::git::Error> {
        let cached = crate::git::git(dir, &["diff", "--cached", "--name-only", "--no-renames"])?;
        if cached.lines().any(|p| !staged.iter().any(|s| s == p)) {
            output::info(
                "kdd: other changes are staged; commit the healed .kdd-index/ paths yourself",
            );
            return Ok(());
        }
        let tree = crate::git::git(dir, &["write-tree"])?;
        let head = crate::git::git(dir, &["rev-parse", "HEAD"])?;
        let msg = format!("kdd: re-derive .kdd-index/ after {event}");
        let commit = crate::git::git(
            dir,
            &[
                "commit-tree",
                tree.trim(),
                "-p",
                head.trim(),
                "-m",
                msg.as_str(),
            ],
        )?;
        crate::git::git(
            dir,
            &[
                "update-ref",
                "-m",
                msg.as_str(),
                "HEAD",
                commit.trim(),
                head.trim(),
            ],
        )?;
        output::info(&format!(
            "kdd: committed the healed index as {}",
            &commit.trim()[..12.min(commit.trim().len())]
        ));
        Ok(())
    };
    if let Err(e) = run() {
        output::warn(&format!("kdd: follow-up commit failed: {e}"));
    }
}

/// Entry of the `kdd-hook` binary.
pub fn main_from_env() -> anyhow::Result<ExitStatus> {
    use clap::Parser;
    let cli = match HookCli::try_parse() {
        Ok(c) => c,
        Err(e)
            if e.kind() == clap::error::ErrorKind::DisplayHelp
                || e.kind() == clap::error::ErrorKind::DisplayVersion =>
        {
            output::data(&e.to_string())?;
            return Ok(ExitStatus::Success);
        }
        Err(e) => {
            output::warn(&format!("kdd-hook: {e}"));
            return Ok(ExitStatus::Success);
        }
    };
    run(&cli.args, &cli.global)
}
