//! The indexed version of a spec whose work-tree bytes no longer match its node.
//!
//! The cache re-derives a spec's searchable text from the spec file when the spec's artifacts
//! change. When the file was edited since it was indexed (an uncommitted edit, a merge's
//! conflict markers), that text is not the indexed version's, and a later `git stash`,
//! `git checkout -- file` or `git merge --abort` puts the file back without touching
//! `.kdd-index/`, so nothing would ever re-read it. So a mismatching spec is looked up in git
//! first: the blobs the staging area holds for its path (every stage of a conflict) and
//! `HEAD`'s, the one whose content hash is the node's `source_hash` giving the text. Only when
//! none matches is the record marked stale with the work tree's text (a teammate's commit made
//! without the hook, say), and the cache watches that file ([`super::build`]).

use std::path::Path;
use std::sync::OnceLock;

/// Git's copies of spec files: the staging area is read on the first mismatch of a build (most
/// builds have none), the repository opened for each mismatch (this gix build shares none
/// across threads).
pub struct Versions<'a> {
    repo_root: &'a Path,
    staged: OnceLock<Option<gix::index::File>>,
}

impl<'a> Versions<'a> {
    pub fn new(repo_root: &'a Path) -> Versions<'a> {
        Versions {
            repo_root,
            staged: OnceLock::new(),
        }
    }

    /// The bytes git holds for the spec `rel` whose content hash is `hash`, if any (none in a
    /// directory that is not a git work tree, or for a blob over the spec size cap).
    pub fn find(&self, rel: &str, hash: &str) -> Option<Vec<u8>> {
        let repo = &crate::git::open(self.repo_root).ok()?;
        // Only this work tree's own repository (not one found further up).
        let own = repo.workdir().and_then(|w| w.canonicalize().ok());
        if own.is_none() || own != self.repo_root.canonicalize().ok() {
            return None;
        }
        let index = self
            .staged
            .get_or_init(|| crate::git::load_index(repo).ok())
            .as_ref()?;
        crate::git::known_blobs(repo, index, rel)
            .into_iter()
            .filter_map(|id| {
                crate::git::read_blob_within(repo, id, crate::source::MAX_SPEC_BYTES)
                    .ok()
                    .flatten()
            })
            .find(|b| crate::spec::same_content(&crate::spec::content_hash(b), hash))
    }
}
