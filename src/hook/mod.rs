//! Incremental, self-healing index maintenance from the staged tree: the engine behind
//! `kdd-hook pre-commit`, the post-merge/post-checkout/post-rewrite heal and `kdd resolve`.
//!
//! One pass ([`heal`]) makes the `.kdd-index/` entries of the index git is committing agree with
//! the staged specs:
//! - specs whose staged blob is new or changed (rename = delete + add), or whose node is missing,
//!   has another source hash or is conflicted, are re-derived from the **staged blob** (never the
//!   work tree, so `git add -p` indexes exactly what is committed);
//! - nodes whose spec is gone, stray edges/embeddings and conflicted artifact paths nobody derives
//!   are removed (an L3 enrichment file is kept exactly while its node file is);
//! - exactly the artifact paths written or removed are staged (`git update-index`), nothing else.
//!
//! Speed: a verification cache (`<cache dir>/hook-state`) records, per spec path, the staged
//! blob id and the blob ids of its artifacts last seen consistent. A commit touching no spec and
//! no artifact only compares staged entries with that record (no blob is read). The record is an
//! optimisation only: without it every staged node is checked against its spec once.
//!
//! The pass itself is a list of named steps in `heal.rs`; every spec is derived through the
//! pure `index` core ([`crate::index::derive_spec`]), like `kdd index` and the bare mirror, and
//! `crate::git` only reads the staged tree and stages the result.

mod heal;
mod holder;
mod state;

pub use heal::heal;

use crate::artifact::{remove_artifacts, ArtifactPaths, INDEX_DIR};
use crate::config::Settings;
use crate::git;
use crate::index::l2::Level;
use crate::spec::{Diagnostic, Node};
use std::path::{Path, PathBuf};

/// Errors of a heal pass. The hook reports them and lets the commit through.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Git(#[from] git::Error),
    #[error(transparent)]
    Artifact(#[from] crate::artifact::Error),
    /// No staged spec under the specs root while the staged index holds nodes: healing would
    /// remove every artifact (a clone without the `kdd.specs` the index was built with, a specs
    /// folder moved without it).
    #[error(
        "no staged spec under `{root}/`, but .kdd-index/ holds {nodes} node(s) (set `git config \
         kdd.specs` to the folder of your specs; to empty the index on purpose, `git rm -r \
         --cached .kdd-index`)"
    )]
    EmptyRoot { root: String, nodes: usize },
    /// A sparse index folds folders left out of the checkout into one entry: their specs are
    /// not listed, and a pass would remove their artifacts.
    #[error(
        "the staging area is a sparse index that folds `{folder}` away, so its specs are not \
         listed (`git sparse-checkout init --no-sparse-index` keeps the sparse checkout and \
         lists every spec)"
    )]
    SparseIndex { folder: String },
}

impl Error {
    /// A pass refused on purpose ([`Error::EmptyRoot`], [`Error::SparseIndex`]): the message
    /// names what to do, and `kdd resolve` would refuse the same way.
    pub fn is_refusal(&self) -> bool {
        matches!(self, Error::EmptyRoot { .. } | Error::SparseIndex { .. })
    }
}

/// Refuse a pass over a sparse index with a folded folder under (or over) one of `roots`: see
/// [`Error::SparseIndex`].
fn refuse_a_sparse_index(
    index: &gix::index::File,
    roots: &crate::roots::Roots,
) -> Result<(), Error> {
    match git::roots::LeftOut::of(index).folded(roots) {
        Some(folder) => Err(Error::SparseIndex {
            folder: folder.to_string(),
        }),
        None => Ok(()),
    }
}

/// Refuse a pass that finds no staged spec (`specs` and `conflicted` empty) while `arts`, the
/// staged `.kdd-index/` paths, hold nodes: see [`Error::EmptyRoot`]. A commit that deletes the
/// specs (`git rm -r specs`) is not refused: see [`specs_deleted`].
fn refuse_an_empty_root<'a>(
    repo: &gix::Repository,
    index: &gix::index::File,
    settings: &Settings,
    no_spec: bool,
    arts: impl Iterator<Item = &'a String>,
) -> Result<(), Error> {
    let root = &settings.specs_root;
    let prefix = format!("{INDEX_DIR}/nodes/");
    let nodes = arts.filter(|p| p.starts_with(&prefix)).count();
    if no_spec && nodes > 0 && !specs_deleted(repo, index, settings)? {
        return Err(Error::EmptyRoot {
            root: root.to_string(),
            nodes,
        });
    }
    Ok(())
}

/// True when this commit deletes the specs, and their artifacts go with them: the committed
/// index was built from this root (`HEAD`'s manifest names it), `HEAD` holds spec files under
/// it, and the commit adds no spec-like file (`.md`, `.markdown`, `.feature`) anywhere. A folder
/// moved elsewhere, even renamed and edited, adds its files under new paths; a root the index
/// was not built from (a clone without the setting whose default folder holds something else)
/// and a root that never held specs are refused.
fn specs_deleted(
    repo: &gix::Repository,
    index: &gix::index::File,
    settings: &Settings,
) -> Result<bool, Error> {
    let root = &settings.specs_root;
    let built_from = git::head_blob(repo, &format!("{INDEX_DIR}/manifest.json"))
        .and_then(|id| git::read_blob_within(repo, id, 1 << 20).ok().flatten())
        .and_then(|b| serde_json::from_slice::<crate::artifact::Manifest>(&b).ok())
        .and_then(|m| crate::paths::normalize_rel(&m.specs_root));
    if built_from.as_ref() != Some(root) {
        return Ok(false);
    }
    let head = git::tree_entries(repo, "HEAD", "")?;
    if !head.keys().any(|p| crate::source::is_spec_path(p, root)) {
        return Ok(false);
    }
    let spec_like = |p: &str| {
        [".md", ".markdown", ".feature"]
            .iter()
            .any(|e| p.ends_with(e))
    };
    Ok(!git::index_entries(index, "")
        .keys()
        .any(|p| spec_like(p) && !head.contains_key(p)))
}

/// What a heal pass did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Report {
    /// Specs in the staged tree.
    pub specs: usize,
    /// Specs re-derived from their staged blob.
    pub rederived: Vec<String>,
    /// Artifact paths (repo-relative) written and staged.
    pub written: Vec<String>,
    /// Artifact paths (repo-relative) removed and staged.
    pub removed: Vec<String>,
    /// Specs that could not be read (file and line); their previous artifacts are kept.
    pub diagnostics: Vec<Diagnostic>,
    /// Specs still in conflict: their artifacts were left alone.
    pub conflicted_specs: Vec<String>,
    /// True when the verification record showed nothing to do.
    pub fast_path: bool,
    /// Problems of the run itself (e.g. indexed at L1 because the model is missing).
    pub warnings: Vec<String>,
}

impl Report {
    /// Paths staged by this pass.
    pub fn staged(&self) -> Vec<String> {
        let mut v: Vec<String> = self.written.iter().chain(&self.removed).cloned().collect();
        v.sort();
        v.dedup();
        v
    }
}

fn art_key(rel: &str) -> String {
    format!("{INDEX_DIR}/{rel}")
}

use crate::artifact::stem_of;

/// Options of a heal pass.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Stage the written/removed paths (false: only write the work tree).
    pub stage: bool,
    /// Run the L2 step like `kdd index` does (opened only when a spec must be re-derived;
    /// missing runtime/model → L1 with a warning). Without it, existing vector files of live
    /// nodes are kept, as `kdd index` does at L1.
    pub embed: bool,
}

fn lock(git_dir: &Path) -> Option<std::fs::File> {
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(git_dir.join("kdd-hook.lock"))
        .ok()?;
    fs4::FileExt::lock(&f).ok()?;
    Some(f)
}

fn remove_file(paths: &ArtifactPaths, rel: &str) -> Result<(), crate::artifact::Error> {
    let p = paths.abs(rel);
    if crate::artifact::through_link(paths, rel) {
        return Ok(());
    }
    match std::fs::remove_file(&p) {
        Ok(()) => {
            let mut dir = p.parent();
            while let Some(d) = dir {
                if d == paths.root()
                    || !d.starts_with(paths.root())
                    || std::fs::remove_dir(d).is_err()
                {
                    break;
                }
                dir = d.parent();
            }
            Ok(())
        }
        Err(e) if crate::artifact::absent(&e) => Ok(()),
        Err(e) => Err(crate::artifact::Error::Io { path: p, source: e }),
    }
}

/// Embedding failures are never silent: list them (the manifest then records L1).
fn l2_failures(level: Option<&Level>, report: &mut Report) {
    if let Some(Level::L2(x)) = level {
        for (file, why) in x.failed() {
            report.warnings.push(format!(
                "{file}: indexed without vectors: {why}; run `kdd index`"
            ));
        }
    }
}

/// A sparse checkout that leaves `.kdd-index/` out (its staged manifest is skip-worktree), or
/// some of its files: the files a pass wrote to stage them (`rels`, index-relative, those left
/// out) leave the work tree again and are marked skip-worktree, or git would bring them back
/// ([`git::sparse`]).
fn leave_out(
    repo: &gix::Repository,
    settings: &Settings,
    paths: &ArtifactPaths,
    rels: Vec<String>,
) -> Result<(), Error> {
    if rels.is_empty() {
        return Ok(());
    }
    for rel in &rels {
        remove_file(paths, rel)?;
    }
    // The folder itself goes too when it is left empty (never when it holds anything).
    let _ = std::fs::remove_dir(paths.root());
    let keys: Vec<String> = rels.iter().map(|r| art_key(r)).collect();
    git::sparse::skip_worktree(repo, &settings.repo_root, &keys)?;
    Ok(())
}

/// Remove a node's artifacts from the work tree (used by callers that hold a [`Node`]).
pub fn remove_node(settings: &Settings, node: &Node) -> Result<Vec<String>, Error> {
    Ok(remove_artifacts(
        &ArtifactPaths::new(&settings.index_dir),
        node,
    )?)
}

/// True when `KDD_HOOK=0` disables the hooks.
pub fn disabled() -> bool {
    std::env::var(crate::config::env::HOOK).is_ok_and(|v| v.trim() == "0")
}

/// Directory git runs hooks from (`core.hooksPath`, else `<common dir>/hooks`).
pub fn hooks_dir(settings: &Settings) -> PathBuf {
    match git::config_get(&settings.repo_root, "core.hooksPath") {
        Some(p) => {
            let p = PathBuf::from(p);
            if p.is_absolute() {
                p
            } else {
                settings.repo_root.join(p)
            }
        }
        None => settings.git_common_dir.join("hooks"),
    }
}

/// Path of an installed hook script, if present.
pub fn installed_hook_path(settings: &Settings, name: &str) -> Option<PathBuf> {
    let p = hooks_dir(settings).join(name);
    p.exists().then_some(p)
}

/// Files under `index_dir` containing git conflict markers (relative paths).
pub fn conflict_marker_files(index_dir: &Path) -> Vec<String> {
    let mut files = Vec::new();
    crate::artifact::list_files(index_dir, "", &mut files);
    let mut out: Vec<String> = files
        .into_iter()
        .filter(|rel| {
            crate::artifact::read_artifact(&index_dir.join(rel))
                .is_ok_and(|b| has_conflict_markers(&b))
        })
        .collect();
    out.sort();
    out
}

/// True when `bytes` contain a line starting with a git conflict marker.
pub fn has_conflict_markers(bytes: &[u8]) -> bool {
    bytes
        .split(|b| *b == b'\n')
        .any(|l| l.starts_with(b"<<<<<<< ") || l.starts_with(b">>>>>>> ") || l == b"=======")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stems() {
        assert_eq!(stem_of("nodes/entity/X.json"), Some(("nodes", "entity/X")));
        assert_eq!(
            stem_of("edges/entity/d/X.jsonl"),
            Some(("edges", "entity/d/X"))
        );
        assert_eq!(stem_of("manifest.json"), None);
    }

    #[test]
    fn markers() {
        assert!(has_conflict_markers(b"a\n<<<<<<< HEAD\nb\n"));
        assert!(!has_conflict_markers(b"{\"a\": \"<<<<<<< \"}\n"));
    }
}
