//! `kdd hook <name> [args]` and the `kdd-hook` binary: git hook entry points.
//!
//! `pre-commit` indexes the staged tree incrementally; `post-merge`, `post-checkout` and
//! `post-rewrite` heal after merges, branch switches and rebases; `post-commit` heals a commit
//! no pre-commit indexed (cherry-pick, revert, `--no-verify`) and is silent after one that was. Hooks never fail because of
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
            output::warn(&format!("kdd-hook: {}; skipping", crate::cli::describe(&e)));
            return Ok(ExitStatus::Success);
        }
    };
    if args.name == "post-receive" {
        post_receive(&settings)?;
        return Ok(ExitStatus::Success);
    }
    if settings.bare || !uses_kdd(&settings) {
        return Ok(ExitStatus::Success);
    }
    let event = match args.name.as_str() {
        // A commit `git cherry-pick --continue` makes inside a sequence: staging here, or
        // amending in its post-commit, leaves git's in-memory staging area behind and stops the
        // sequence (exit 128). It is left for a later commit to heal, and so told to
        // post-commit.
        "pre-commit" if crate::git::sequence_commands(&settings.repo_root) > 0 => {
            if let Some(m) = crate::git::sequence_marker(&settings.repo_root) {
                let _ = std::fs::write(m, b"");
            }
            return Ok(ExitStatus::Success);
        }
        "pre-commit" => None,
        "post-merge" => Some("merge"),
        "post-rewrite" => Some("rewrite"),
        // cherry-pick and revert run no pre-commit; their commits are healed here (a sequence
        // of them at its last commit). Ordinary commits were indexed by pre-commit, so this is
        // the fast no-op path.
        "post-commit" => {
            let marker = crate::git::sequence_marker(&settings.repo_root);
            let continued = marker.is_some_and(|m| std::fs::remove_file(m).is_ok());
            if continued
                || crate::git::rebase_in_progress(&settings.repo_root)
                || crate::git::sequence_commands(&settings.repo_root) > 1
            {
                return Ok(ExitStatus::Success);
            }
            Some("commit")
        }
        "post-checkout" if !heals_checkout(&settings, args) => return Ok(ExitStatus::Success),
        "post-checkout" => Some("checkout"),
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
            // An ordinary commit's post-commit changes nothing: its pre-commit already named
            // every problem of this tree, so it stays silent rather than name each one twice.
            if args.name != "post-commit" || !report.staged().is_empty() {
                print_report(&report, &args.name);
            }
            match event {
                // A branch switch makes no commit of its own: only an explicit
                // `kdd.healCommit=commit` adds one.
                Some("checkout") if settle_mode(&settings) != Settle::FollowUp => {}
                Some("merge") if args.args.first().map(String::as_str) == Some("1") => {}
                Some(ev) => settle(&settings, &report, ev),
                None => {}
            }
        }
        Err(e) => warn_failure(args, &e),
    }
    Ok(ExitStatus::Success)
}

/// A repository uses kdd when it holds `.kdd-index/` (in the work tree or `HEAD`: a folder
/// removed by hand or left out of a sparse checkout) or `kdd install` configured its merge
/// driver. A hook reaching any other (a `core.hooksPath` shared by every repository) does
/// nothing: it never writes an index nobody asked for.
fn uses_kdd(settings: &crate::config::Settings) -> bool {
    settings.index_dir.exists()
        || committed_index(settings)
        || crate::git::config_get(&settings.repo_root, "merge.kdd.driver").is_some()
}

/// A pass that failed: the commit goes ahead, and the warning says what to do. A refusal names
/// its own way out, and post-commit's second pass would repeat it: it is said once.
fn warn_failure(args: &Args, e: &hook::Error) {
    let name = &args.name;
    let amend = args.args.first().map(String::as_str) == Some("amend");
    if e.is_refusal() && (name == "post-commit" || (name == "post-rewrite" && amend)) {
        return;
    }
    let advice = if e.is_refusal() {
        ""
    } else {
        " (`kdd status` shows what is stale, `kdd resolve` repairs it)"
    };
    output::warn(&format!(
        "kdd-hook {name}: {e}; .kdd-index/ was not updated and the git operation goes ahead{advice}"
    ));
}

/// `post-receive`: refresh the served mirrors of the pushed refs.
#[cfg(feature = "serve")]
fn post_receive(settings: &Settings) -> anyhow::Result<()> {
    crate::serve::receive::run_hook(settings)
}

/// `post-receive` in the slim `kdd-hook` (no cache linked): the full `kdd` binary, beside this
/// one or else on `PATH`, refreshes the served mirrors (`kdd hook post-receive`, same stdin).
#[cfg(not(feature = "serve"))]
fn post_receive(settings: &Settings) -> anyhow::Result<()> {
    let beside = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join("kdd")))
        .filter(|p| p.is_file());
    let kdd = beside.unwrap_or_else(|| "kdd".into());
    let status = std::process::Command::new(&kdd)
        .current_dir(&settings.repo_root)
        .args(["hook", "post-receive"])
        .status();
    match status {
        Ok(_) => Ok(()),
        Err(e) => {
            output::warn(&format!(
                "kdd-hook post-receive: cannot run `{}` ({e}); the served index was not updated \
                 (install kdd beside kdd-hook)",
                kdd.display()
            ));
            Ok(())
        }
    }
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

/// How a post-merge/rewrite/commit heal ends (`git config kdd.healCommit`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Settle {
    /// Default (`amend`): amend the commit the operation just made when it is on the current
    /// branch only (merge commit, rebased tip, picked commit); otherwise a follow-up commit.
    Amend,
    /// `commit` / `true`: always a follow-up commit.
    FollowUp,
    /// `stage` / `false`: leave the healed paths staged.
    Stage,
}

fn settle_mode(settings: &Settings) -> Settle {
    match crate::git::config_get(&settings.repo_root, "kdd.healCommit").as_deref() {
        Some("commit" | "true" | "yes" | "1" | "on") => Settle::FollowUp,
        Some("stage" | "false" | "no" | "0" | "off") => Settle::Stage,
        _ => Settle::Amend,
    }
}

/// post-checkout heals branch switches (flag 1) that moved `HEAD`, never in the middle of a
/// rebase, and only onto a branch with a committed index.
fn heals_checkout(settings: &Settings, args: &Args) -> bool {
    let branch = args.args.get(2).map(String::as_str) == Some("1");
    let moved = args.args.first() != args.args.get(1);
    let rebasing = crate::git::rebase_in_progress(&settings.repo_root)
        || std::env::var_os("GIT_REFLOG_ACTION")
            .is_some_and(|a| a.to_string_lossy().starts_with("rebase"));
    if !branch || !moved || rebasing {
        return false;
    }
    if !committed_index(settings) {
        // A branch from before kdd was adopted: healing would stage a whole index that differs
        // from the one of the branch left, and git would refuse to switch back.
        output::info(
            "kdd: this branch has no committed .kdd-index/; nothing staged. Its next commit \
             indexes it; `kdd index` indexes it now, but remove .kdd-index/ again (or commit \
             it) before switching back, or git will refuse to overwrite it",
        );
        return false;
    }
    true
}

/// `HEAD`'s tree holds a committed `.kdd-index/` (its manifest).
fn committed_index(settings: &Settings) -> bool {
    crate::git::open(&settings.repo_root).is_ok_and(|repo| {
        let manifest = format!("{}/manifest.json", crate::artifact::INDEX_DIR);
        crate::git::head_blob(&repo, &manifest).is_some()
    })
}

/// Commit what a post-merge/rewrite/commit heal staged, so the operation ends with a clean
/// status and an index that verifies at `HEAD` (see `git::commit`). Squash merges and
/// post-checkout only stage: their next commit runs pre-commit.
fn settle(settings: &Settings, r: &Report, event: &str) {
    let staged = r.staged();
    if staged.is_empty() {
        return;
    }
    let mode = settle_mode(settings);
    if mode == Settle::Stage {
        output::info(
            "kdd: the healed .kdd-index/ paths are staged; commit them (kdd.healCommit=stage)",
        );
        return;
    }
    let dir = &settings.repo_root;
    let reason = format!("re-derive .kdd-index/ after {event}");
    let run = || -> Result<(), crate::git::Error> {
        if !crate::git::only_staged(dir, &staged)? {
            output::info(
                "kdd: other changes are staged; commit the healed .kdd-index/ paths yourself",
            );
            return Ok(());
        }
        if mode == Settle::Amend && crate::git::head_is_local(dir)? {
            let id = crate::git::amend_head(dir, &reason)?;
            // "the commit", "the merge commit", "the rewrite commit" (never "commit commit").
            let which = match event {
                "commit" => "commit".to_string(),
                other => format!("{other} commit"),
            };
            output::info(&format!(
                "kdd: the {which} now carries the healed index ({})",
                &id[..12.min(id.len())]
            ));
        } else {
            let id = crate::git::commit_on_head(dir, &format!("kdd: {reason}"))?;
            output::info(&format!(
                "kdd: committed the healed index as {}",
                &id[..12.min(id.len())]
            ));
        }
        Ok(())
    };
    if let Err(e) = run() {
        output::warn(&format!(
            "kdd: could not commit the healed index ({e}); the paths stay staged"
        ));
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
