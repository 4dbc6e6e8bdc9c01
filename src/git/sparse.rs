//! Sparse checkouts that leave `.kdd-index/` out of the work tree: its entries carry git's
//! skip-worktree bit, and git clears that bit for every such file it finds present in the work
//! tree (the whole folder came back after one commit). The hook writes artifacts through the
//! work tree to stage them, so it then marks exactly the staged paths skip-worktree again and
//! removes its files (see `hook::heal`).

use super::{update_index, Error};
use std::path::Path;

/// Whether the staged entry at `path` is left out of the work tree (skip-worktree).
pub fn skips_worktree(index: &gix::index::File, path: &str) -> bool {
    index
        .entry_by_path(path.into())
        .is_some_and(|e| e.flags.contains(gix::index::entry::Flags::SKIP_WORKTREE))
}

/// Mark `paths` (repo-relative, staged) skip-worktree in the index git is committing.
pub fn skip_worktree(
    repo: &gix::Repository,
    workdir: &Path,
    paths: &[String],
) -> Result<(), Error> {
    let paths: Vec<&String> = paths.iter().collect();
    update_index(repo, workdir, &["update-index", "--skip-worktree"], &paths)
}
