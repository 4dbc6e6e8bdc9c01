//! Serving a repository without a work tree (a bare server repo): the `.kdd-index/` and specs
//! of a ref's tree are mirrored, blob by blob, into the cache directory, and the query cache is
//! built from that mirror. This is the engine of `kdd serve --ref` and of the `post-receive`
//! hook.
//!
//! Layout: `<cache dir>/serve/<ref>-<hash>/` holds `tree/` (only `<specs root>/**`, the
//! documents of the documents roots — configured, else those the ref's manifest records, see
//! `crate::roots` — and `.kdd-index/**`, regular files only), `cache/` (the LMDB + tantivy cache of that tree),
//! `state` (the commit mirrored, written last), `dirty` (present while a sync is in flight: a
//! crash leaves it and the next sync re-mirrors everything) and `lock` (one syncer at a time).
//!
//! A sync diffs the old commit's tree with the new one and writes/removes only the changed
//! blobs. If the pushed `.kdd-index/` does not match the pushed specs (a commit made with
//! `--no-verify`, a forge merge button that bypassed the merge driver), the affected specs are
//! re-derived here with the same code `kdd index` runs (L1; embeddings are not recomputed on
//! the server) and the report says so. A spec that cannot be indexed there either (a YAML
//! bomb, a duplicate id) is reported as a problem in the pushed specs, not as a mismatch: no
//! index holds an artifact for it. Nothing is ever written into the git repository itself.

use crate::artifact::{IndexStore, INDEX_DIR};
use crate::config::Settings;
use crate::git;
use crate::spec::{Diagnostic, Severity};
use gix::ObjectId;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::{Path, PathBuf};

/// Errors of a mirror sync.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Git(#[from] git::Error),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Index(String),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// File (in the mirror root) holding the last [`SyncReport`] as JSON.
pub const LAST_SYNC: &str = "last-sync.json";
/// Present while the mirror's `.kdd-index/` holds what the server re-derived, so it is not
/// the served commit's: the next sync mirrors that folder whole (red team, eighteenth round: a
/// spec deleted without its artifacts, then restored as it was, was re-derived at L1 and lost
/// its vectors, with a warning about a push that matched).
const HEALED: &str = "healed";

/// What a sync did.
#[derive(Debug, Clone, Default, Serialize, serde::Deserialize)]
pub struct SyncReport {
    /// The ref mirrored.
    pub rev: String,
    /// Commit mirrored before (None: first sync or full re-mirror).
    pub from: Option<String>,
    /// Commit mirrored now.
    pub to: String,
    /// Full re-mirror (first sync, or recovery after an interrupted one).
    pub full: bool,
    /// Files written into the mirror (changed blobs).
    pub written: usize,
    /// Files removed from the mirror.
    pub removed: usize,
    /// Specs whose committed artifacts did not match them and were re-derived on the server.
    pub rederived: Vec<String>,
    /// Problems met while re-deriving (file and message), among them the specs that cannot be
    /// indexed at all (not counted in `rederived`).
    pub diagnostics: Vec<String>,
    /// Milliseconds spent (mirror + re-derivation, without the cache update).
    pub millis: u64,
}

/// The mirror of one ref of a bare repository.
#[derive(Debug, Clone)]
pub struct Mirror {
    pub rev: String,
    pub root: PathBuf,
    pub git_dir: PathBuf,
    pub specs_root: String,
    /// Configured documents roots; empty: the ones the mirrored tree's manifest records.
    pub docs_roots: Vec<String>,
}

/// `refs/heads/main` / `main` → a safe folder name.
fn folder_for(rev: &str) -> String {
    let safe: String = rev
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .take(40)
        .collect();
    let h = blake3::hash(rev.as_bytes()).to_hex();
    format!("{safe}-{}", &h[..10])
}

/// Full ref name for a short one (`main` → `refs/heads/main`); `HEAD` and full names unchanged.
pub fn full_ref(repo: &gix::Repository, rev: &str) -> String {
    if rev == "HEAD" {
        if let Ok(Some(name)) = repo.head_name() {
            return name.as_bstr().to_string();
        }
        return rev.to_string();
    }
    if rev.starts_with("refs/") {
        return rev.to_string();
    }
    format!("refs/heads/{rev}")
}

/// An error about one path of the mirrored commit.
fn error(file: &str, message: String) -> Diagnostic {
    Diagnostic {
        severity: Severity::Error,
        file: crate::source::printable(file),
        line: None,
        message,
    }
}

/// Is `path` a file the mirror holds (specs root or `.kdd-index/`), and safe to write?
fn wanted(specs_root: &str, path: &str) -> bool {
    if crate::config::normalize_rel(path).as_deref() != Some(path) {
        return false;
    }
    if path
        .split('/')
        .any(|c| c.eq_ignore_ascii_case(".git") || c.is_empty())
    {
        return false;
    }
    let under = |p: &str| {
        p.is_empty()
            || (path.len() > p.len() && path.starts_with(p) && path.as_bytes()[p.len()] == b'/')
    };
    under(INDEX_DIR) || under(specs_root)
}

impl Mirror {
    /// The mirror of `rev` for the bare repository described by `settings`.
    pub fn new(settings: &Settings, rev: &str) -> Mirror {
        Mirror {
            rev: rev.to_string(),
            root: settings.cache_dir.join("serve").join(folder_for(rev)),
            git_dir: settings.git_common_dir.clone(),
            specs_root: settings.specs_root.clone(),
            docs_roots: settings.docs_roots.clone(),
        }
    }

    /// The mirrored tree (acts as the repository root for the cache).
    pub fn tree(&self) -> PathBuf {
        self.root.join("tree")
    }

    /// `.kdd-index/` inside the mirror.
    pub fn index_dir(&self) -> PathBuf {
        self.tree().join(INDEX_DIR)
    }

    /// The cache built from the mirror.
    pub fn cache_root(&self) -> PathBuf {
        self.root.join("cache")
    }

    /// Commit mirrored by the last complete sync.
    pub fn served_commit(&self) -> Option<String> {
        let s = std::fs::read_to_string(self.root.join("state")).ok()?;
        let mut it = s.split_whitespace();
        let c = it.next()?;
        (it.next() == Some(self.specs_root.as_str()) || self.specs_root.is_empty())
            .then(|| c.to_string())
    }

    /// The paths of the mirrored commit that are left out of the mirror (symbolic links,
    /// files inside files), each named as the push report named it: `kdd status` in a bare
    /// repository lists them among the files with errors.
    pub fn left_out(&self) -> Result<Vec<Diagnostic>, Error> {
        let repo = git::open(&self.git_dir)?;
        let commit = match self.served_commit() {
            Some(c) => c,
            None => self.ref_commit(&repo)?.to_string(),
        };
        Ok(self.entries(&repo, &commit)?.1)
    }

    /// Commit the ref points at now.
    pub fn ref_commit(&self, repo: &gix::Repository) -> Result<ObjectId, Error> {
        let id = repo
            .rev_parse_single(self.rev.as_str())
            .map_err(|e| git::Error::Read {
                what: format!("revision {}", self.rev),
                message: e.to_string(),
            })?;
        let commit =
            id.object()
                .and_then(|o| o.peel_to_commit())
                .map_err(|e| git::Error::Read {
                    what: format!("commit of {}", self.rev),
                    message: e.to_string(),
                })?;
        Ok(commit.id)
    }

    /// Settings pointing at the mirror as a repository root (for re-derivation).
    pub fn settings(&self) -> Settings {
        crate::index::with_manifest_docs(Settings {
            repo_root: self.tree(),
            git_common_dir: self.git_dir.clone(),
            bare: false,
            specs_root: self.specs_root.clone(),
            docs_roots: self.docs_roots.clone(),
            index_dir: self.index_dir(),
            cache_dir: self.root.clone(),
        })
    }

    /// The roots mirrored at `rev`: the configured ones, else those its manifest records.
    fn roots_at(&self, arts: &git::Entries, repo: &gix::Repository) -> crate::roots::Roots {
        let mut docs = self.docs_roots.clone();
        if docs.is_empty() {
            if let Some(id) = arts.get(&format!("{INDEX_DIR}/manifest.json")) {
                docs = git::read_blob(repo, *id)
                    .ok()
                    .and_then(|b| serde_json::from_slice::<crate::artifact::Manifest>(&b).ok())
                    .map(|m| m.docs)
                    .unwrap_or_default();
            }
        }
        crate::roots::Roots::new(&self.specs_root, &docs)
    }

    /// The mirrored files of `rev`, and one message per path left out of them.
    fn entries(
        &self,
        repo: &gix::Repository,
        rev: &str,
    ) -> Result<(git::Entries, Vec<Diagnostic>), Error> {
        let (mut out, art_links) = git::tree_entries_and_links(repo, rev, INDEX_DIR)?;
        let roots = self.roots_at(&out, repo);
        let (specs, mut links) = git::tree_entries_and_links(repo, rev, &self.specs_root)?;
        out.extend(specs);
        for d in &roots.docs {
            let (docs, doc_links) = git::roots::tree_root_entries(repo, rev, d)?;
            out.extend(docs);
            links.extend(doc_links);
        }
        let keep = |p: &String| wanted(&self.specs_root, p) || (wanted("", p) && roots.is_doc(p));
        out.retain(|p, _| keep(p));
        // Links are never mirrored nor followed; each is named to the pusher, as `kdd index`
        // and `verify` name them (red team, eighteenth round: the push report named none).
        let is_spec = |p: &String| {
            keep(p) && (crate::source::is_spec_path(p, &self.specs_root) || roots.is_doc(p))
        };
        let mut left_out = crate::source::link_errors(links, is_spec);
        left_out.extend(art_links.iter().filter(|p| keep(p)).map(|p| {
            error(p, "a symbolic link in .kdd-index/, never followed; left out — commit the file itself (`kdd resolve` in a clone)".into())
        }));
        // A hand-made tree can hold a path as a file and as a folder (git's fsck refuses it,
        // a push without `receive.fsckObjects` does not): the file stays, what lies inside it
        // is left out and named.
        let inside: Vec<(String, String)> = crate::artifact::inside_files(&out)
            .map(|(f, i)| (f.to_string(), i.to_string()))
            .collect();
        for (file, inner) in inside {
            out.remove(&inner);
            left_out.push(error(
                &inner,
                format!(
                    "lies inside the file `{file}` in this commit's tree (a hand-made tree \
                     git's fsck refuses); left out — commit a tree made by git"
                ),
            ));
        }
        Ok((out, left_out))
    }

    /// Bring the mirror to the commit the ref points at (or `to`), incrementally. Returns
    /// `None` when it already was there.
    pub fn sync(&self, to: Option<ObjectId>) -> Result<Option<SyncReport>, Error> {
        let t0 = std::time::Instant::now();
        std::fs::create_dir_all(&self.root).map_err(io(&self.root))?;
        let lock_path = self.root.join("lock");
        let lock = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(io(&lock_path))?;
        fs4::FileExt::lock(&lock).map_err(io(&lock_path))?;
        let repo = git::open(&self.git_dir)?;
        let to = match to {
            Some(t) => t,
            None => self.ref_commit(&repo)?,
        };
        let to_hex = to.to_string();
        let dirty = self.root.join("dirty");
        let tree = self.tree();
        let from = if dirty.exists() || !tree.is_dir() {
            None
        } else {
            self.served_commit()
        };
        if from.as_deref() == Some(to_hex.as_str()) {
            return Ok(None);
        }
        std::fs::write(&dirty, b"sync in progress\n").map_err(io(&dirty))?;
        let (new, left_out) = self.entries(&repo, &to_hex)?;
        let roots = self.roots_at(&new, &repo);
        let old = match &from {
            // The old commit may be gone (force push + gc): then re-mirror everything.
            Some(f) => self.entries(&repo, f).ok().map(|(o, _)| o),
            None => None,
        };
        let full = old.is_none();
        let mut old = match old {
            Some(o) => o,
            None => {
                if tree.exists() {
                    std::fs::remove_dir_all(&tree).map_err(io(&tree))?;
                }
                git::Entries::new()
            }
        };
        let healed = self.root.join(HEALED);
        let recheck = self.remirror_if_healed(&mut old)?;
        std::fs::create_dir_all(&tree).map_err(io(&tree))?;
        let d = git::diff(&old, &new);
        let mut report = SyncReport {
            rev: self.rev.clone(),
            from: if full { None } else { from.clone() },
            to: to_hex.clone(),
            full,
            ..SyncReport::default()
        };
        let (mut changed_specs, deleted_specs) =
            write_diff(&repo, &tree, &roots, &new, &d, &mut report)?;
        if recheck {
            every_spec(&repo, &new, &roots, &mut changed_specs)?;
        }
        report.diagnostics.extend(
            left_out
                .iter()
                .map(|d| format!("{}: {}", d.file, d.message)),
        );
        // The mirror's `.kdd-index/` is now the commit's; `heal` marks it again if it writes.
        if healed.exists() {
            std::fs::remove_file(&healed).map_err(io(&healed))?;
        }
        self.heal(
            &new,
            &roots,
            changed_specs,
            deleted_specs,
            recheck,
            &mut report,
        )?;
        report.millis = t0.elapsed().as_millis() as u64;
        let last = self.root.join(LAST_SYNC);
        let _ = crate::artifact::write_if_changed(
            &last,
            &serde_json::to_vec_pretty(&report).unwrap_or_default(),
        );
        let _ = crate::artifact::write_if_changed(&self.root.join("rev"), self.rev.as_bytes());
        let state = self.root.join("state");
        let mut tmp = tempfile::NamedTempFile::new_in(&self.root).map_err(io(&self.root))?;
        writeln!(tmp, "{to_hex} {}", self.specs_root).map_err(io(&state))?;
        tmp.persist(&state).map_err(|e| io(&state)(e.error))?;
        let _ = std::fs::remove_file(&dirty);
        drop(lock);
        Ok(Some(report))
    }

    /// When the server re-derived into the mirror's `.kdd-index/` (the [`HEALED`] marker): drop
    /// it and its entries from `old`, so the sync mirrors the commit's whole, and say so.
    fn remirror_if_healed(&self, old: &mut git::Entries) -> Result<bool, Error> {
        if !self.root.join(HEALED).exists() {
            return Ok(false);
        }
        let index = self.index_dir();
        if index.exists() {
            std::fs::remove_dir_all(&index).map_err(io(&index))?;
        }
        old.retain(|p, _| !p.starts_with(&format!("{INDEX_DIR}/")));
        Ok(true)
    }

    /// Re-derive specs whose committed artifacts disagree with them (see the module docs).
    fn heal(
        &self,
        new: &git::Entries,
        roots: &crate::roots::Roots,
        changed: Vec<(String, Vec<u8>)>,
        deleted: Vec<String>,
        all: bool,
        report: &mut SyncReport,
    ) -> Result<(), Error> {
        if changed.is_empty() && deleted.is_empty() {
            return Ok(());
        }
        if !self.index_dir().join("manifest.json").is_file() {
            // No committed index at all: nothing to heal against (the server reports
            // INDEX_UNAVAILABLE until an index is pushed).
            return Ok(());
        }
        let store = IndexStore::new(self.index_dir());
        let (nodes, _errors) = store
            .load_nodes()
            .map_err(|e| Error::Index(e.to_string()))?;
        let mut by_file: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for n in &nodes {
            by_file
                .entry(n.source_file.as_str())
                .or_default()
                .push(n.source_hash.as_str());
        }
        // Specs excluded by the mirrored `.kddignore` are not indexed (as in `kdd index`).
        let ign = crate::roots::Ignores::load(&self.tree(), roots);
        let mut stale = Vec::new();
        for (p, bytes) in changed.into_iter().filter(|(p, _)| !ign.ignores(p)) {
            let h = crate::spec::content_hash(&bytes);
            let ok = by_file
                .get(p.as_str())
                .is_some_and(|hs| hs.iter().any(|x| crate::spec::same_content(x, &h)));
            if !ok {
                stale.push(crate::index::SpecSource { path: p, bytes });
            }
        }
        // `all`: every node whose spec the commit lacks, not only this push's deletions.
        let gone: Vec<String> = if all {
            by_file.keys().map(|p| p.to_string()).collect()
        } else {
            deleted
        };
        let gone: Vec<String> = gone
            .into_iter()
            .filter(|p| by_file.contains_key(p.as_str()) && !new.contains_key(p))
            .collect();
        if stale.is_empty() && gone.is_empty() {
            return Ok(());
        }
        let paths: Vec<String> = stale.iter().map(|s| s.path.clone()).collect();
        let healed = self.root.join(HEALED);
        std::fs::write(&healed, b"re-derived on the server\n").map_err(io(&healed))?;
        let out = crate::index::apply(&self.settings(), stale, gone.clone())
            .map_err(|e| Error::Index(e.to_string()))?;
        // A spec that cannot be indexed here either (a YAML bomb, a duplicate id) has no
        // artifact in any index: the pushed one did not disagree with it. It is a spec error,
        // reported as one, not a mismatch.
        let failed: BTreeSet<&str> = out
            .diagnostics
            .iter()
            .filter(|d| d.severity == crate::spec::Severity::Error)
            .map(|d| d.file.as_str())
            .collect();
        report.rederived.extend(
            paths
                .into_iter()
                .filter(|p| !failed.contains(p.as_str()))
                .chain(gone),
        );
        report.rederived.sort();
        report.diagnostics.extend(
            out.diagnostics
                .iter()
                .map(|d| format!("{}: {}", d.file, d.message)),
        );
        Ok(())
    }
}

/// Spec paths of a tree (the mirror or a work tree) under the one reading rule of
/// [`crate::source`]: regular files only, links never followed.
pub fn specs_in(tree: &Path, specs_root: &str) -> BTreeSet<String> {
    crate::source::walk_specs(tree, specs_root)
        .map(|w| w.files.into_iter().collect())
        .unwrap_or_default()
}

/// A spec's path and bytes.
type SpecBytes = (String, Vec<u8>);

/// Add every spec of `new` not in `changed` to it: the commit's `.kdd-index/` replaced the
/// server's derivation, so every spec is checked against it again, not only this push's (red
/// team, eighteenth round: a stale artifact came back after a push that changed no spec).
fn every_spec(
    repo: &gix::Repository,
    new: &git::Entries,
    roots: &crate::roots::Roots,
    changed: &mut Vec<SpecBytes>,
) -> Result<(), Error> {
    let seen: BTreeSet<String> = changed.iter().map(|(p, _)| p.clone()).collect();
    for (p, id) in new
        .iter()
        .filter(|(p, _)| roots.is_source(p) && !seen.contains(*p))
    {
        changed.push((p.clone(), git::read_blob(repo, *id)?));
    }
    Ok(())
}

/// Make the mirror's files follow one diff: removals first (a folder of the old commit may be a
/// file in this one), then the added and modified blobs. Returns the changed specs (with their
/// bytes) and the deleted ones.
fn write_diff(
    repo: &gix::Repository,
    tree: &Path,
    roots: &crate::roots::Roots,
    new: &git::Entries,
    d: &git::Diff,
    report: &mut SyncReport,
) -> Result<(Vec<SpecBytes>, Vec<String>), Error> {
    let mut deleted_specs = Vec::new();
    for p in &d.deleted {
        let abs = tree.join(p);
        match std::fs::remove_file(&abs) {
            Ok(()) => report.removed += 1,
            Err(e) if crate::artifact::absent(&e) => {}
            Err(e) => return Err(io(&abs)(e)),
        }
        if roots.is_source(p) {
            deleted_specs.push(p.clone());
        }
    }
    let mut changed_specs: Vec<SpecBytes> = Vec::new();
    for p in d.added.iter().chain(&d.modified) {
        let bytes = git::read_blob(repo, new[p])?;
        let abs = tree.join(p);
        if abs.symlink_metadata().is_ok_and(|m| m.is_dir()) {
            // A folder of the old commit where this commit has a file (its files are gone).
            std::fs::remove_dir_all(&abs).map_err(io(&abs))?;
        }
        // Creates the parent folders.
        crate::artifact::write_if_changed(&abs, &bytes).map_err(|e| Error::Index(e.to_string()))?;
        report.written += 1;
        if roots.is_source(p) {
            changed_specs.push((p.clone(), bytes));
        }
    }
    Ok((changed_specs, deleted_specs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_safe_paths_are_mirrored() {
        assert!(wanted("specs", "specs/a.md"));
        assert!(wanted("specs", ".kdd-index/nodes/entity/X.json"));
        assert!(!wanted("specs", "src/main.rs"));
        assert!(!wanted("specs", "specs/../x.md"));
        assert!(!wanted("specs", "/etc/passwd"));
        assert!(!wanted("specs", "specs/.git/config"));
        assert!(!wanted("specs", "specsx/a.md"));
    }

    #[test]
    fn folder_names_are_safe() {
        let f = folder_for("refs/heads/../../x");
        assert!(!f.contains('/') && !f.contains(".."));
    }
}
