//! `kdd merge-driver %O %A %B %P` and the `kdd-merge-driver` binary: git's merge driver for
//! `.kdd-index/` artifacts (contract in `merge-driver/README.md`).
//!
//! Exit 0: merged cleanly, result in `%A`. Exit 1: a real conflict (`%A` left as ours, or with
//! git's own text merge when an input could not be read). Never exits above 128 on bad input.
//! `KDD_MERGE=0` falls back to `git merge-file`.

use crate::cli::{output, ExitStatus, GlobalArgs};
use crate::merge::{self, FileKind, Outcome};
use std::path::{Path, PathBuf};

/// Arguments of `kdd merge-driver`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// %O: the common ancestor's version.
    pub base: PathBuf,
    /// %A: our version; the result is written here.
    pub ours: PathBuf,
    /// %B: their version.
    pub theirs: PathBuf,
    /// %P: the path being merged (repo-relative).
    pub path: Option<String>,
}

#[derive(Debug, clap::Parser)]
#[command(
    name = "kdd-merge-driver",
    version,
    about = "git merge driver for .kdd-index/"
)]
struct DriverCli {
    #[command(flatten)]
    args: Args,
}

/// Run the subcommand.
pub fn run(args: &Args, _global: &GlobalArgs) -> anyhow::Result<ExitStatus> {
    Ok(drive(args))
}

fn drive(args: &Args) -> ExitStatus {
    let path = args.path.clone().unwrap_or_default();
    let kill = std::env::var(crate::config::env::MERGE).is_ok_and(|v| v.trim() == "0");
    let read = |p: &Path| std::fs::read(p);
    let (ours, theirs) = match (read(&args.ours), read(&args.theirs)) {
        (Ok(o), Ok(t)) => (o, t),
        (Err(e), _) | (_, Err(e)) => {
            output::error(&format!(
                "kdd merge-driver {path}: cannot read an input: {e}"
            ));
            return ExitStatus::Failure;
        }
    };
    let base = read(&args.base).ok();
    let kind = merge::classify(&path);
    if kill {
        return fallback(args, &path, &ours, &theirs, "KDD_MERGE=0");
    }
    match merge::merge_file(kind, base.as_deref(), &ours, &theirs) {
        Outcome::Merged(bytes) => match std::fs::write(&args.ours, bytes) {
            Ok(()) => ExitStatus::Success,
            Err(e) => {
                output::error(&format!(
                    "kdd merge-driver {path}: cannot write the result: {e}"
                ));
                ExitStatus::Failure
            }
        },
        Outcome::Conflict(msg) => {
            output::error(&format!("{path}: {msg}"));
            ExitStatus::Failure
        }
        Outcome::Unsupported(why) => fallback(args, &path, &ours, &theirs, &why),
    }
}

/// git's own behaviour: a text merge with markers for text, ours kept for binary; exit 1 unless
/// the text merge was clean.
fn fallback(args: &Args, path: &str, ours: &[u8], theirs: &[u8], why: &str) -> ExitStatus {
    let binary = |b: &[u8]| b.contains(&0);
    if merge::classify(path) == FileKind::Embedding || binary(ours) || binary(theirs) {
        output::warn(&format!(
            "{path}: {why}; kept our version, resolve with `kdd resolve`"
        ));
        return ExitStatus::Failure;
    }
    let dir = std::env::current_dir().unwrap_or_default();
    let status = std::process::Command::new("git")
        .current_dir(&dir)
        .args(["merge-file", "-L", "ours", "-L", "base", "-L", "theirs"])
        .arg(&args.ours)
        .arg(&args.base)
        .arg(&args.theirs)
        .status();
    match status {
        Ok(s) if s.success() && why == "KDD_MERGE=0" => ExitStatus::Success,
        _ => {
            output::warn(&format!(
                "{path}: {why}; fell back to git's text merge, run `kdd resolve` to regenerate it"
            ));
            ExitStatus::Failure
        }
    }
}

/// Entry of the `kdd-merge-driver` binary.
pub fn main_from_env() -> anyhow::Result<ExitStatus> {
    use clap::Parser;
    let cli = match DriverCli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            output::error(&e.to_string());
            return Ok(ExitStatus::Error);
        }
    };
    Ok(drive(&cli.args))
}
