//! The documents roots ([`crate::roots`]) in git objects: the staged and committed entries of
//! every root (a folder root like a specs root, a file root as its one entry), and the
//! `.kddignore` of every folder root, so the hook, `verify` and the bare mirror keep exactly the
//! documents `kdd index` keeps in the work tree.
//!
//! Invariants: symbolic links are never returned as entries (they are listed apart, as for
//! specs); a root that is absent at a revision or in the staging area is simply empty.

use super::{
    conflicted_paths, index_entries_and_links, read_blob, read_err, tree_entries_and_links,
    Entries, Error,
};
use crate::roots::{Ignores, Roots};

/// Staged (stage 0) blobs and links of one documents root (folder or file).
pub fn index_root_entries(index: &gix::index::File, root: &str) -> (Entries, Vec<String>) {
    let (mut out, mut links) = index_entries_and_links(index, root);
    if let Some(e) = index.entry_by_path(root.into()) {
        if e.mode == gix::index::entry::Mode::SYMLINK {
            links.push(root.to_string());
        } else if matches!(
            e.mode,
            gix::index::entry::Mode::FILE | gix::index::entry::Mode::FILE_EXECUTABLE
        ) && e.stage_raw() == 0
        {
            out.insert(root.to_string(), e.id);
        }
    }
    (out, links)
}

/// Staged blobs, links and conflicted paths of every root, specs root first (the hook's view of
/// the staging area; filter them with `Roots::is_source` and [`ignores_of`]).
pub fn staged(
    index: &gix::index::File,
    roots: &Roots,
) -> (Entries, Vec<String>, std::collections::BTreeSet<String>) {
    let (mut entries, mut links) = index_entries_and_links(index, &roots.specs);
    let mut conflicted = conflicted_paths(index, &roots.specs);
    for d in &roots.docs {
        let (e, l) = index_root_entries(index, d);
        entries.extend(e);
        links.extend(l);
        conflicted.extend(conflicted_paths(index, d));
        if index.entry_by_path(d.as_str().into()).is_none() {
            // A conflicted file root has only stage 1–3 entries.
            conflicted.extend(
                index
                    .entries()
                    .iter()
                    .filter(|e| e.stage_raw() != 0 && e.path(index) == d.as_str())
                    .map(|_| d.clone()),
            );
        }
    }
    links.sort();
    links.dedup();
    (entries, links, conflicted)
}

/// Blobs and links of one documents root (folder or file) in the tree of `rev`.
pub fn tree_root_entries(
    repo: &gix::Repository,
    rev: &str,
    root: &str,
) -> Result<(Entries, Vec<String>), Error> {
    let (mut out, mut links) = tree_entries_and_links(repo, rev, root)?;
    if out.is_empty() && links.is_empty() {
        let Ok(id) = repo.rev_parse_single(rev) else {
            return Ok((out, links));
        };
        let tree = id
            .object()
            .and_then(|o| o.peel_to_tree())
            .map_err(read_err(format!("tree of {rev}")))?;
        if let Some(e) = tree
            .lookup_entry_by_path(root)
            .map_err(read_err(format!("{rev}:{root}")))?
        {
            if e.mode().is_link() {
                links.push(root.to_string());
            } else if e.mode().is_blob() {
                out.insert(root.to_string(), e.object_id());
            }
        }
    }
    Ok((out, links))
}

/// The `.kddignore` of every folder root among `entries` (staged or a tree).
pub fn ignores_of(
    repo: &gix::Repository,
    entries: &Entries,
    roots: &Roots,
) -> Result<Ignores, Error> {
    let mut err = None;
    let ign = Ignores::from_lookup(roots, |rel| {
        let id = entries.get(rel)?;
        match read_blob(repo, *id) {
            Ok(b) => Some(b),
            Err(e) => {
                err = Some(e);
                None
            }
        }
    });
    match err {
        Some(e) => Err(e),
        None => Ok(ign),
    }
}

/// A digest of the staged entries of the documents roots (file roots included, which a
/// folder-prefix stamp misses).
pub fn docs_stamp(index: &gix::index::File, roots: &Roots) -> String {
    let mut h = blake3::Hasher::new();
    for root in &roots.docs {
        h.update(root.as_bytes());
        h.update(&[0xff]);
        for e in index
            .prefixed_entries(root.as_str().into())
            .unwrap_or_default()
        {
            let p = e.path(index);
            if p != root.as_str() && !p.starts_with(format!("{root}/").as_bytes()) {
                continue;
            }
            h.update(p);
            h.update(&[0, e.stage_raw() as u8]);
            h.update(&e.mode.bits().to_le_bytes());
            h.update(e.id.as_bytes());
        }
    }
    h.finalize().to_hex().to_string()
}

/// The staged paths a sparse checkout leaves out of the work tree (`skip-worktree`; a
/// sparse-index folder entry ends with `/` and covers what is under it). Empty when the index
/// cannot be read or nothing is left out.
#[derive(Debug, Default)]
pub struct LeftOut(Vec<String>);

impl LeftOut {
    /// Read the staging area of the repository at `dir`.
    pub fn read(dir: &std::path::Path) -> LeftOut {
        let Ok(repo) = super::open(dir) else {
            return LeftOut::default();
        };
        let Ok(index) = super::load_index(&repo) else {
            return LeftOut::default();
        };
        LeftOut::of(&index)
    }

    /// The entries of a loaded staging area a sparse checkout leaves out.
    pub fn of(index: &gix::index::File) -> LeftOut {
        LeftOut(
            index
                .entries()
                .iter()
                .filter(|e| e.flags.contains(gix::index::entry::Flags::SKIP_WORKTREE))
                .map(|e| e.path(index).to_string())
                .collect(),
        )
    }

    /// True when the work tree lacks `path` because the sparse checkout left it out.
    pub fn holds(&self, path: &str) -> bool {
        self.0
            .iter()
            .any(|p| p == path || (p.ends_with('/') && path.starts_with(p.as_str())))
    }

    /// True when the staging area is a sparse index that folds a folder under (or over) one of
    /// `roots` into one entry: its specs are not listed, so `kdd resolve` and the hook refuse.
    pub fn folds(&self, roots: &Roots) -> bool {
        self.folded(roots).is_some()
    }

    /// The first folder [`LeftOut::folds`] finds, without its trailing `/`.
    pub fn folded(&self, roots: &Roots) -> Option<&str> {
        self.0
            .iter()
            .find(|p| p.ends_with('/') && touches_roots(p, roots))
            .map(|p| p.trim_end_matches('/'))
    }

    /// How many left-out entries lie under (or cover) one of `roots`.
    pub fn under(&self, roots: &Roots) -> usize {
        self.0.iter().filter(|p| touches_roots(p, roots)).count()
    }
}

/// True when the staged `path` (a file, or a sparse-index folder ending with `/`) lies under one
/// of `roots` or holds one of them.
pub fn touches_roots(path: &str, roots: &Roots) -> bool {
    let dir = path.trim_end_matches('/');
    std::iter::once(roots.specs.as_str())
        .chain(roots.docs.iter().map(String::as_str))
        .any(|root| {
            root.is_empty()
                || dir == root
                || dir.starts_with(&format!("{root}/"))
                || root.starts_with(&format!("{dir}/"))
        })
}
