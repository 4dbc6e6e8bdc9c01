//! `kdd index`: full index of the specs root into `.kdd-index/` (see [`crate::index::full`]).
//!
//! Per-file diagnostics and a summary go to stderr (progress too, for long runs); `--json`
//! prints the [`crate::index::Outcome`] on stdout. Exit 0 when every file was indexed, 1 when
//! some failed (the others are indexed and written), 2 on a run-level error.

use crate::cli::{output, ExitStatus, GlobalArgs};
use crate::spec::Severity;

/// Arguments of `kdd index` (the specs root comes from the global `--specs DIR`).
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Do not print warnings (errors and the summary are still printed).
    #[arg(long, short = 'q')]
    pub quiet: bool,
    /// Documents roots to index besides the specs (comma-separated folders or files relative
    /// to the repository root, e.g. `docs,adr,README.md`; default: $KDD_DOCS, `git config
    /// kdd.docs`, else the roots the committed manifest records). Recorded in the manifest, so
    /// the hook and other clones keep them; `--docs ""` removes every document.
    #[arg(long, value_name = "LIST")]
    pub docs: Option<String>,
}

/// Runs with at least this many files report progress.
const PROGRESS_MIN: usize = 500;

/// Run the subcommand.
pub fn run(args: &Args, global: &GlobalArgs) -> anyhow::Result<ExitStatus> {
    let mut settings = crate::index::with_manifest_specs_root(global.settings()?);
    // Explicit `--docs` wins over the manifest's roots (`--docs ""` stops indexing documents).
    if let Some(list) = &args.docs {
        settings.docs_roots = crate::roots::parse_docs(list).map_err(anyhow::Error::msg)?;
    }
    if settings.bare {
        anyhow::bail!(
            "{}: bare repository; `kdd index` needs a work tree: run it in a clone, commit and push \
             (the post-receive hook keeps the server's cache fresh); read commands work here \
             (`kdd -C <repo> query|search|status|graph|impact|context … [--ref REF]`)",
            settings.repo_root.display()
        );
    }
    let progress = |done: usize, total: usize| {
        let step = (total / 10).max(1);
        if total >= PROGRESS_MIN && (done.is_multiple_of(step) || done == total) {
            output::info(&format!("kdd: indexing {done}/{total} files"));
        }
    };
    // Fail fast on a missing specs root, before loading any model; a root left out of a sparse
    // checkout is named as such, not as missing.
    refuse_a_sparse_checkout(&settings)?;
    let (files, diags) = crate::index::list_specs(&settings)?;
    refuse_a_wrong_root(&settings, files.is_empty() && diags.is_empty())?;
    // L2 when the embedding runtime + model are available, else L1 with a warning (embed owns this).
    let level = crate::index::l2::for_index();
    if let crate::index::l2::Level::L1(_, why) = &level {
        output::warn(why);
    }
    let opts = crate::index::Options {
        extras: Some(level.extras()),
        progress: Some(&progress),
    };
    let started = std::time::Instant::now();
    let out = crate::index::full(&settings, &opts)?;
    if let crate::index::l2::Level::L2(x) = &level {
        for w in x.warnings() {
            output::warn(&w);
        }
        let s = x.stats();
        let kinds: Vec<String> = s.per_kind.iter().map(|(k, n)| format!("{k} {n}")).collect();
        output::info(&format!(
            "kdd: L2 embeddings ({}): {} chunks, {} embedded, {} reused in {:.2}s; per kind: {}",
            x.model_id(),
            s.chunks,
            s.embedded,
            s.reused,
            s.embed_time.as_secs_f64(),
            kinds.join(", ")
        ));
    }
    for d in &out.diagnostics {
        if d.severity == Severity::Error || !args.quiet {
            output::info(&d.to_string());
        }
    }
    let warnings = out.diagnostics.len() - out.errors();
    output::info(&format!(
        "kdd: indexed {} of {} spec files in {:.2}s ({} failed, {} warnings); {} artifact files written, {} removed",
        out.indexed,
        out.files,
        started.elapsed().as_secs_f64(),
        out.failed,
        warnings,
        out.written.len(),
        out.removed.len()
    ));
    if global.json {
        output::json(&out)?;
    }
    let lacking = match &level {
        crate::index::l2::Level::L2(x) => x.failed(),
        crate::index::l2::Level::L1(..) => Default::default(),
    };
    if !lacking.is_empty() {
        for (file, why) in &lacking {
            output::info(&format!("{file}: no vectors: {why}"));
        }
        output::error(&format!(
            "{} spec(s) could not be embedded (listed above); the manifest records L1; fix the model (`kdd doctor`) and run `kdd index` again",
            lacking.len()
        ));
        return Ok(ExitStatus::Failure);
    }
    if out.failed > 0 {
        output::error(&format!(
            "{} file(s) could not be indexed (see the errors above); the other specs were indexed",
            out.failed
        ));
        return Ok(ExitStatus::Failure);
    }
    Ok(ExitStatus::Success)
}

/// A sparse checkout that leaves specs out of the work tree: indexing the work tree would remove
/// their artifacts although the specs are still committed (red team, sixteenth round). Nothing
/// is written; the hook reads the staged tree and keeps indexing them.
fn refuse_a_sparse_checkout(settings: &crate::config::Settings) -> anyhow::Result<()> {
    let n = crate::git::roots::LeftOut::read(&settings.repo_root).under(&settings.roots());
    if n > 0 {
        anyhow::bail!(
            "{n} staged path(s) under the specs or documents roots (files, or folders of a \
             sparse index) are not checked out (sparse checkout); `kdd index` reads the work tree and would drop them, so nothing was \
             changed (commits keep the index current through the pre-commit hook; \
             `git sparse-checkout disable` before a full `kdd index`)"
        );
    }
    Ok(())
}

/// A specs root inside `.git/` or `.kdd-index/` is a mistake, and so is one holding no spec
/// while the index holds nodes: indexing it would remove every artifact (`kdd index --specs
/// .git` reported "0 of 0 … 144 removed" and exit 0). Nothing is written; to empty an index on
/// purpose, delete `.kdd-index/`.
fn refuse_a_wrong_root(settings: &crate::config::Settings, no_spec: bool) -> anyhow::Result<()> {
    let root = settings.specs_root.trim_start_matches("./");
    let first = root.split('/').next().unwrap_or_default();
    if first == ".git" || first == crate::artifact::INDEX_DIR {
        anyhow::bail!(
            "specs root `{root}` is inside `{first}/`; nothing was indexed (pass --specs DIR, set \
             KDD_SPECS or `git config kdd.specs DIR` to the folder of your specs)"
        );
    }
    if !no_spec {
        return Ok(());
    }
    // Only a run that found no spec walks the index, to count what it would remove.
    let mut found = Vec::new();
    let index = settings.repo_root.join(crate::artifact::INDEX_DIR);
    crate::artifact::list_files(&index, "", &mut found);
    let nodes = found
        .iter()
        .filter(|p| p.starts_with("nodes/") || p.contains("/nodes/"))
        .count();
    if nodes > 0 {
        anyhow::bail!(
            "no spec file under `{root}/`, but .kdd-index/ holds {nodes} node(s); nothing was \
             changed (check --specs / KDD_SPECS / `git config kdd.specs`; to empty the index on \
             purpose, delete .kdd-index/)"
        );
    }
    Ok(())
}
