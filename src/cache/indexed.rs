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

use std::cell::RefCell;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

/// Git's copies of spec files, looked at only on a mismatch (most builds have none): the
/// staging area is read once per build, the repository opened once per build and thread (this
/// gix build shares none across threads), and a directory that is not its own repository's
/// work tree is found out once.
pub struct Versions<'a> {
    repo_root: &'a Path,
    build: u64,
    /// The staging area of the work tree's own repository (`None`: not one).
    staged: OnceLock<Option<gix::index::File>>,
}

static BUILDS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    /// The repository this thread opened for a build, by build number.
    static OPEN: RefCell<Option<(u64, gix::Repository)>> = const { RefCell::new(None) };
}

/// The repository whose work tree is `root` itself (not one found further up).
fn own_repo(root: &Path) -> Option<gix::Repository> {
    let repo = crate::git::open(root).ok()?;
    let own = repo.workdir().and_then(|w| w.canonicalize().ok());
    (own.is_some() && own == root.canonicalize().ok()).then_some(repo)
}

impl<'a> Versions<'a> {
    pub fn new(repo_root: &'a Path) -> Versions<'a> {
        Versions {
            repo_root,
            build: BUILDS.fetch_add(1, Ordering::Relaxed),
            staged: OnceLock::new(),
        }
    }

    /// The bytes git holds for the spec `rel` whose content hash is `hash`, if any (none in a
    /// directory that is not a git work tree, or for a blob over the spec size cap).
    pub fn find(&self, rel: &str, hash: &str) -> Option<Vec<u8>> {
        let index = self
            .staged
            .get_or_init(|| crate::git::load_index(&own_repo(self.repo_root)?).ok())
            .as_ref()?;
        OPEN.with(|cell| {
            let mut open = cell.borrow_mut();
            if open.as_ref().is_none_or(|(b, _)| *b != self.build) {
                *open = own_repo(self.repo_root).map(|r| (self.build, r));
            }
            let (_, repo) = open.as_ref()?;
            crate::git::known_blobs(repo, index, rel)
                .into_iter()
                .filter_map(|id| {
                    crate::git::read_blob_within(repo, id, crate::source::MAX_SPEC_BYTES)
                        .ok()
                        .flatten()
                })
                .find(|b| crate::spec::same_content(&crate::spec::content_hash(b), hash))
        })
    }
}
