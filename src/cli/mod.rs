//! Command-line adapter: clap derive arguments, one file per subcommand under `commands/`,
//! named exit codes. No business logic lives here.
//!
//! Exit codes (all binaries): 0 ok, 1 nothing found / check failed, 2 error.

#[cfg(feature = "serve")]
pub mod commands;
/// Without `serve` (the slim `kdd-hook` and `kdd-merge-driver`): only their two commands.
#[cfg(not(feature = "serve"))]
pub mod commands {
    pub mod hook;
    pub mod merge_driver;
}
#[cfg(feature = "serve")]
pub mod shared;
pub use crate::report as output;

#[cfg(feature = "serve")]
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

/// Named process exit statuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitStatus {
    /// 0: success.
    Success,
    /// 1: nothing found, or a check failed (conflicts for the merge driver).
    Failure,
    /// 2: error.
    Error,
}

impl From<ExitStatus> for ExitCode {
    fn from(s: ExitStatus) -> ExitCode {
        match s {
            ExitStatus::Success => ExitCode::from(0),
            ExitStatus::Failure => ExitCode::from(1),
            ExitStatus::Error => ExitCode::from(2),
        }
    }
}

/// Flags shared by every subcommand.
#[derive(Debug, Clone, clap::Args)]
pub struct GlobalArgs {
    /// Run as if started in PATH (like `git -C`).
    #[arg(short = 'C', long = "repo", global = true, value_name = "PATH")]
    pub repo: Option<PathBuf>,
    /// Specs root relative to the repository root (default: $KDD_SPECS, git config kdd.specs, `specs`).
    #[arg(long = "specs", global = true, value_name = "DIR")]
    pub specs: Option<String>,
    /// Print machine-readable JSON on stdout.
    #[arg(long, global = true)]
    pub json: bool,
}

impl GlobalArgs {
    /// Resolve locations for this invocation.
    pub fn settings(&self) -> anyhow::Result<crate::config::Settings> {
        let start = match &self.repo {
            Some(p) => p.clone(),
            None => std::env::current_dir()?,
        };
        let settings = crate::config::Settings::discover(&start, self.specs.as_deref())?;
        // A specs root named on the command line or in KDD_SPECS must exist: a typo would
        // otherwise index, verify or report an empty tree.
        let named = self.specs.is_some()
            || std::env::var(crate::config::env::SPECS).is_ok_and(|s| !s.is_empty());
        if named && !settings.bare && !settings.specs_dir().is_dir() {
            anyhow::bail!(
                "specs directory `{}` does not exist in {} (from {}); pass an existing \
                 directory relative to the repository root",
                settings.specs_root,
                settings.repo_root.display(),
                if self.specs.is_some() {
                    "--specs"
                } else {
                    "KDD_SPECS"
                }
            );
        }
        // A root from `git config kdd.specs` (or the default) that is not in this work tree:
        // the committed manifest's, as `kdd index` does (a clone has no `kdd.specs`).
        if named || settings.bare {
            return Ok(settings);
        }
        Ok(crate::index::with_manifest_specs_root(settings))
    }
}

#[cfg(feature = "serve")]
/// `kdd` — git-native retrieval over KDD specs.
#[derive(Debug, Parser)]
#[command(name = "kdd", version, about, propagate_version = true)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

#[cfg(feature = "serve")]
/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Index every spec into `.kdd-index/` (full run).
    Index(commands::index::Args),
    /// Counts per kind and edge type, orphans, layer violations, stale and failed files.
    Status(commands::status::Args),
    /// Hybrid search (semantic + lexical + graph), QRY-003.
    Query(commands::query::Args),
    /// Single-strategy search (--semantic or --lexical).
    Search(commands::search::Args),
    /// Graph traversal from a node (QRY-001).
    Graph(commands::graph::Args),
    /// What a change to a node affects (QRY-004).
    Impact(commands::impact::Args),
    /// Which related artifacts a node has and lacks (QRY-005).
    Coverage(commands::coverage::Args),
    /// Edges that break the layer rule (QRY-006).
    Violations(commands::violations::Args),
    /// Links whose target does not exist.
    Orphans(commands::orphans::Args),
    /// Context for a task from hints: paths, ids, names, keywords (QRY-007).
    Context(commands::context::Args),
    /// L3: have your own agent summarise specs and find implicit relations (UC-003).
    Enrich(commands::enrich::Args),
    /// Check the installation: runtime, model, hooks, merge driver, index and cache.
    Doctor(commands::doctor::Args),
    /// Wire hooks and the merge driver into a repository (idempotent).
    Install(commands::install::Args),
    /// Regenerate conflicted `.kdd-index/` paths from the (resolved) specs and stage them.
    Resolve(commands::resolve::Args),
    /// Push or pull only the derived index artifacts to or from a team server (CMD-005).
    Sync(commands::sync::Args),
    /// Merge the indexes of two or more refs (BR-MERGE-001, CMD-004).
    MergeIndex(commands::merge_index::Args),
    /// Git merge driver entry: `kdd merge-driver %O %A %B %P`.
    MergeDriver(commands::merge_driver::Args),
    /// Exit non-zero when `.kdd-index/` does not match the specs of a tree (for CI).
    Verify(commands::verify::Args),
    /// Print the `.gitattributes` lines that register the merge driver.
    Gitattributes(commands::gitattributes::Args),
    /// MCP server on stdio for agents.
    Mcp(commands::mcp::Args),
    /// HTTP retrieval API.
    Serve(commands::serve::Args),
    /// Git hook entry (`kdd hook post-receive` is where the slim `kdd-hook` hands over).
    #[command(hide = true)]
    Hook(commands::hook::Args),
}

#[cfg(feature = "serve")]
/// Entry point of the `kdd` binary.
///
/// With `--json` anywhere on the command line every error is a JSON object on stdout too
/// (`{"error": {"code", "message"}}`; `USAGE` for a command line clap rejects, `ERROR` for any
/// other failure), so scripts never have to parse prose.
pub fn main() -> ExitCode {
    crate::proc::confine_runtime_cache();
    let json = std::env::args_os().any(|a| a == "--json");
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => return usage_error(e, json),
    };
    let r = dispatch(&cli);
    if cli.global.json {
        if let Err(e) = &r {
            if !is_broken_pipe(e) {
                let _ = json_error("ERROR", &describe(e));
            }
        }
    }
    finish(r)
}

#[cfg(feature = "serve")]
fn json_error(code: &str, message: &str) -> std::io::Result<()> {
    output::json(&serde_json::json!({"error": {"code": code, "message": message}}))
}

#[cfg(feature = "serve")]
/// A command line clap rejects: its text on stderr as usual (and JSON on stdout with
/// `--json`); `--help` / `--version` print normally.
fn usage_error(e: clap::Error, json: bool) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion)
        || e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand && !json
    {
        e.exit();
    }
    if json {
        let text = e.to_string();
        let head = text.split("\n\nUsage:").next().unwrap_or(&text);
        let first = head
            .trim_start_matches("error: ")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        let _ = json_error("USAGE", &format!("{first} (see `kdd --help`)"));
    }
    let _ = e.print();
    ExitStatus::Error.into()
}

#[cfg(feature = "serve")]
fn dispatch(cli: &Cli) -> anyhow::Result<ExitStatus> {
    match run_command(cli) {
        // A read met a damaged query cache; its generation is condemned, so running the
        // command again rebuilds the cache first (once: a second failure is reported).
        Err(e) if e.is::<shared::CacheDamaged>() => {
            output::warn(&format!("{e}; rebuilding it and answering again"));
            shared::RETRYING.store(true, std::sync::atomic::Ordering::SeqCst);
            run_command(cli)
        }
        r => r,
    }
}

#[cfg(feature = "serve")]
fn run_command(cli: &Cli) -> anyhow::Result<ExitStatus> {
    let g = &cli.global;
    match &cli.command {
        Command::Index(a) => commands::index::run(a, g),
        Command::Status(a) => commands::status::run(a, g),
        Command::Query(a) => commands::query::run(a, g),
        Command::Search(a) => commands::search::run(a, g),
        Command::Graph(a) => commands::graph::run(a, g),
        Command::Impact(a) => commands::impact::run(a, g),
        Command::Coverage(a) => commands::coverage::run(a, g),
        Command::Violations(a) => commands::violations::run(a, g),
        Command::Orphans(a) => commands::orphans::run(a, g),
        Command::Context(a) => commands::context::run(a, g),
        Command::Enrich(a) => commands::enrich::run(a, g),
        Command::Doctor(a) => commands::doctor::run(a, g),
        Command::Install(a) => commands::install::run(a, g),
        Command::Resolve(a) => commands::resolve::run(a, g),
        Command::Sync(a) => commands::sync::run(a, g),
        Command::MergeIndex(a) => commands::merge_index::run(a, g),
        Command::MergeDriver(a) => commands::merge_driver::run(a, g),
        Command::Verify(a) => commands::verify::run(a, g),
        Command::Gitattributes(a) => commands::gitattributes::run(a, g),
        Command::Mcp(a) => commands::mcp::run(a, g),
        Command::Serve(a) => commands::serve::run(a, g),
        Command::Hook(a) => commands::hook::run(a, g),
    }
}

/// Map a command result to a process exit code; errors go to stderr with their causes.
pub fn finish(r: anyhow::Result<ExitStatus>) -> ExitCode {
    match r {
        Ok(s) => s.into(),
        Err(e) => {
            if is_broken_pipe(&e) {
                return ExitCode::from(0);
            }
            output::error(&describe(&e));
            ExitStatus::Error.into()
        }
    }
}

/// An error and its causes on one line, each cause left out when the text before it already
/// says it (most module errors name their source: `path: Is a directory (os error 21)`).
pub fn describe(e: &anyhow::Error) -> String {
    let mut out = String::new();
    for c in e.chain() {
        let c = c.to_string();
        if out.is_empty() {
            out = c;
        } else if !out.contains(&c) {
            out.push_str(": ");
            out.push_str(&c);
        }
    }
    out
}

fn is_broken_pipe(e: &anyhow::Error) -> bool {
    e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// Entry point of the `kdd-hook` binary: `kdd-hook <pre-commit|post-merge|…> [args]`.
pub fn hook_main() -> ExitCode {
    crate::proc::confine_runtime_cache();
    finish(commands::hook::main_from_env())
}

/// Entry point of the `kdd-merge-driver` binary: `kdd-merge-driver %O %A %B %P`.
pub fn merge_driver_main() -> ExitCode {
    finish(commands::merge_driver::main_from_env())
}
