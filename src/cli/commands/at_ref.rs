//! `--ref REF` of the read commands (`query`, `search`, `status`, `graph`, `impact`,
//! `context`, `coverage`, `violations`, `orphans`): answer from the tree of a ref instead of
//! the work tree — the only way to read a bare repository (`kdd -C server.git query …`).
//!
//! Invariants:
//! - Without `--ref`, a repository with a work tree is read as before (its `.kdd-index/`).
//! - In a bare repository, or with `--ref`, the ref's tree is mirrored into the cache directory
//!   by the same [`crate::serve::bare::Mirror`] `kdd serve --ref` and the post-receive hook use
//!   (same folder, same cache), lazily: only when the ref moved since the last sync. Nothing is
//!   written into the git repository itself.
//! - The default ref of a bare repository is the served ref: the first `git config
//!   kdd.serveRef`, else the branch HEAD names (what post-receive keeps fresh).

use crate::cli::GlobalArgs;
use crate::config::Settings;
use crate::serve::bare::{self, Mirror};

/// The `--ref` flag shared by the read commands.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct RefArg {
    /// Read the tree of this ref (branch, tag or commit) through a mirror in the cache
    /// directory instead of the work tree. Default in a bare repository: `git config
    /// kdd.serveRef`, else HEAD's branch.
    #[arg(long = "ref", value_name = "REF")]
    pub rev: Option<String>,
}

impl RefArg {
    /// The ref given, if any.
    pub fn get(&self) -> Option<&str> {
        self.rev.as_deref()
    }
}

/// The ref a bare repository serves by default: the first `kdd.serveRef`, else HEAD's branch.
pub fn default_ref(repo: &gix::Repository) -> String {
    let configured = repo
        .config_snapshot()
        .plumbing()
        .strings("kdd.serveRef")
        .and_then(|v| v.first().map(|s| s.to_string()))
        .filter(|s| !s.trim().is_empty());
    bare::full_ref(repo, configured.as_deref().unwrap_or("HEAD"))
}

/// The mirror to read for this invocation: `None` to read the work tree; else the mirror of
/// `rev` (or the default ref of a bare repository), brought up to the ref's commit first.
pub fn mirror(settings: &Settings, rev: Option<&str>) -> anyhow::Result<Option<Mirror>> {
    if !settings.bare && rev.is_none() {
        return Ok(None);
    }
    let repo = crate::git::open(&settings.git_common_dir)?;
    let full = match rev {
        Some(r) if r.starts_with("refs/") || r == "HEAD" => bare::full_ref(&repo, r),
        // A short branch name, a tag or a commit: a branch when one exists, else as given.
        Some(r) => {
            let branch = format!("refs/heads/{r}");
            if repo.find_reference(branch.as_str()).is_ok() {
                branch
            } else {
                r.to_string()
            }
        }
        None => default_ref(&repo),
    };
    let m = Mirror::new(settings, &full);
    m.sync(None).map_err(|e| {
        anyhow::anyhow!(
            "{}: cannot read the tree of `{full}`: {e} (name an existing branch, tag or commit with --ref)",
            settings.repo_root.display()
        )
    })?;
    if !m.index_dir().join("manifest.json").is_file() {
        anyhow::bail!(
            "{}: the tree of `{full}` has no .kdd-index/; run `kdd index` in a clone, commit and push (or pass --ref to read another ref)",
            settings.repo_root.display()
        );
    }
    Ok(Some(m))
}

/// Settings that read `global`'s repository at `rev` (see [`mirror`]): the mirror's tree acts
/// as the repository root. Also returns the mirror, whose cache folder is the shared one.
pub fn settings(
    global: &GlobalArgs,
    rev: Option<&str>,
) -> anyhow::Result<(Settings, Option<Mirror>)> {
    let settings = global.settings()?;
    match mirror(&settings, rev)? {
        Some(m) => Ok((m.settings(), Some(m))),
        None => Ok((settings, None)),
    }
}
