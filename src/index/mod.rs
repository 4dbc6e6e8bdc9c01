//! Index: drive parse → extract → artifact over a specs tree.
//!
//! - [`full`] walks the specs root and the documents roots (`crate::roots`) of the work tree
//!   (rayon), writes every spec's and document's artifacts,
//!   removes artifacts of specs that are gone and writes the manifest. Unchanged specs rewrite
//!   nothing ([`crate::artifact::write_if_changed`]), so a re-run leaves the tree byte-identical.
//! - [`apply`] is the incremental entry the pre-commit hook calls with staged blob contents
//!   (a rename is a delete + an add). Its [`Outcome`] lists exactly the repo-relative artifact
//!   paths written and removed, so the hook can stage those and nothing else.
//! - [`artifact_files`] is the ONE function that turns an [`Extracted`] into its artifact files.
//!   The L2 step plugs in there through [`ArtifactExtras`] (see its docs): nothing else in this
//!   module needs to change to add embeddings.
//!
//! Duplicate node ids across files: the lexicographically first path wins, deterministically;
//! the other file gets an error naming both files and writes nothing. One bad spec never aborts
//! a run; every problem is a [`Diagnostic`] naming the file.
//!
//! Storage choice (REQ-002): the committed node file holds only identity (no indexed fields,
//! no section text), edges are compact JSON lines, and files with no links write no edges file.
//! Everything else is re-derived from the spec, which sits in the same tree.

use crate::artifact::{
    self, read_manifest, remove_artifacts, render_links, render_manifest, render_node,
    ArtifactPaths, IndexStore, Manifest,
};
use crate::config::Settings;
use crate::spec::{Diagnostic, Extracted, Node, Severity};
use rayon::prelude::*;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Errors that stop a whole run (per-file problems are diagnostics, never errors).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Source(#[from] crate::source::Error),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Artifact(#[from] artifact::Error),
}

/// One spec's content, as the hook reads it from the staged tree.
#[derive(Debug, Clone)]
pub struct SpecSource {
    /// Repo-relative path with `/` separators.
    pub path: String,
    pub bytes: Vec<u8>,
}

/// The seam for artifacts beyond node + edges (the L2 embeddings step).
///
/// `files` is called once for every spec whose artifacts are rendered (changed or not) and
/// returns extra files as `(path relative to the index root, bytes)` — normally
/// `ArtifactPaths::embeddings_rel(&extracted.node)`. Returning the same bytes as already on
/// disk rewrites nothing; an implementation can read the existing file through `paths` to reuse
/// vectors of unchanged chunks. An `Err(message)` becomes a per-file warning and the spec is
/// still indexed at L1 (BR-INDEX-001 degradation). Extra files of specs that disappear are
/// removed by the index (any file under `embeddings/<stem>.*`).
pub trait ArtifactExtras: Sync {
    fn files(
        &self,
        extracted: &Extracted,
        paths: &ArtifactPaths,
    ) -> Result<Vec<(String, Vec<u8>)>, String>;

    /// Adjust the manifest (index level, embedding model) before it is written.
    fn manifest(&self, _manifest: &mut Manifest) {}
}

/// Options of a run.
#[derive(Default, Clone, Copy)]
pub struct Options<'a> {
    /// The L2 step, when available.
    pub extras: Option<&'a dyn ArtifactExtras>,
    /// Called as `(done, total)` while files are processed (from worker threads).
    pub progress: Option<&'a (dyn Fn(usize, usize) + Sync)>,
}

/// What a run did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Outcome {
    /// Spec files considered.
    pub files: usize,
    /// Specs whose node is in the index after the run.
    pub indexed: usize,
    /// Specs that could not be indexed (unreadable, binary, too large, duplicate id).
    pub failed: usize,
    /// Repo-relative artifact paths written (content changed), sorted.
    pub written: Vec<String>,
    /// Repo-relative artifact paths removed, sorted.
    pub removed: Vec<String>,
    /// Every per-file problem, sorted by file and line.
    pub diagnostics: Vec<Diagnostic>,
}

impl Outcome {
    fn finish(&mut self) {
        self.written.sort();
        self.written.dedup();
        self.removed.sort();
        self.removed.dedup();
        self.diagnostics
            .sort_by(|a, b| (&a.file, a.line, &a.message).cmp(&(&b.file, b.line, &b.message)));
        self.diagnostics.dedup();
    }

    /// Number of error diagnostics.
    pub fn errors(&self) -> usize {
        self.diagnostics
            .iter()
            .filter(|d| d.severity == Severity::Error)
            .count()
    }
}

pub use crate::source::is_spec_path;
pub use derive::{
    derive_index, derive_manifest, derive_spec, kdd_yaml_path, Derived, DerivedIndex,
};
pub use roots::{with_manifest_docs, with_manifest_specs_root};
pub use vectors::{embed_specs, EmbedStats, SpecVectors};

mod derive;
pub mod l2;
mod roots;
pub mod vectors;

/// Repo-relative paths of every regular spec file in the work tree, sorted, and the per-file
/// errors of the walk (symlinked or non-regular specs: see [`crate::source`]).
pub fn list_specs(settings: &Settings) -> Result<(Vec<String>, Vec<Diagnostic>), Error> {
    let mut w = crate::source::walk_specs(&settings.repo_root, &settings.specs_root)?;
    // Documents roots: the same walker and read rule (see `crate::roots`).
    let d = crate::roots::walk_docs(&settings.repo_root, &settings.roots());
    w.files.extend(d.files);
    w.files.sort();
    w.files.dedup();
    w.diagnostics.extend(d.diagnostics);
    Ok((w.files, w.diagnostics))
}

fn read_spec(settings: &Settings, path: &str) -> Result<Vec<u8>, Diagnostic> {
    crate::roots::read_source(&settings.repo_root, path, &settings.roots())
        .map_err(|e| e.diagnostic())
}

/// Render every artifact file of one spec: node, edges (omitted when there are no links) and
/// the extras. Returns `(files, warning)`; paths are relative to the index root.
pub fn artifact_files(
    ex: &Extracted,
    extras: Option<&dyn ArtifactExtras>,
    paths: &ArtifactPaths,
) -> (Vec<(String, Vec<u8>)>, Option<Diagnostic>) {
    let mut files = vec![(ArtifactPaths::node_rel(&ex.node), render_node(&ex.node))];
    if !ex.links.is_empty() {
        files.push((ArtifactPaths::edges_rel(&ex.node), render_links(&ex.links)));
    }
    let mut warning = None;
    if let Some(x) = extras {
        match x.files(ex, paths) {
            Ok(more) => files.extend(more),
            Err(message) => {
                warning = Some(Diagnostic {
                    severity: Severity::Warning,
                    file: ex.node.source_file.clone(),
                    line: None,
                    message: format!("indexed without embeddings: {message}"),
                })
            }
        }
    }
    (files, warning)
}

/// Artifact stem (`<kind>/[<domain>/]<id>`) of a relative artifact path, and its top folder.
fn stem_of(rel: &str) -> Option<(&str, &str)> {
    let (top, rest) = rel.split_once('/')?;
    let stem = match top {
        "nodes" => rest.strip_suffix(".json")?,
        "edges" => rest.strip_suffix(".jsonl")?,
        "embeddings" | "enrichments" => rest.rsplit_once('.').map(|(s, _)| s)?,
        _ => return None,
    };
    Some((top, stem))
}

fn index_prefix(settings: &Settings) -> String {
    let rel = settings
        .index_dir
        .strip_prefix(&settings.repo_root)
        .map(|p| p.to_string_lossy().replace('\\', "/"))
        .unwrap_or_else(|_| crate::artifact::INDEX_DIR.to_string());
    format!("{rel}/")
}

/// What writing one spec's artifacts did.
struct Written {
    /// Repo-relative paths whose content changed.
    written: Vec<String>,
    /// Repo-relative paths removed (an edges file of a spec that lost its links).
    removed: Vec<String>,
    /// Index-relative paths the spec owns now.
    expected: Vec<String>,
    warning: Option<Diagnostic>,
}

struct Writer<'a> {
    paths: ArtifactPaths,
    prefix: String,
    opts: Options<'a>,
}

impl Writer<'_> {
    /// Write one spec's artifacts; returns (written repo-relative paths, expected rel paths).
    fn write(&self, ex: &Extracted) -> Result<Written, Error> {
        let (files, warn) = artifact_files(ex, self.opts.extras, &self.paths);
        let mut written = Vec::new();
        let mut removed = Vec::new();
        let mut expected = Vec::new();
        for (rel, bytes) in files {
            if artifact::write_artifact(&self.paths, &rel, &bytes)? {
                written.push(format!("{}{rel}", self.prefix));
            }
            expected.push(rel);
        }
        if ex.links.is_empty() {
            // A spec that lost all its links: its old edges file goes.
            let rel = ArtifactPaths::edges_rel(&ex.node);
            let abs = self.paths.abs(&rel);
            if std::fs::remove_file(&abs).is_ok() {
                prune(self.paths.root(), &abs);
                removed.push(format!("{}{rel}", self.prefix));
            }
        }
        Ok(Written {
            written,
            removed,
            expected,
            warning: warn,
        })
    }

    fn remove(&self, node: &Node, out: &mut Outcome) -> Result<(), Error> {
        for rel in remove_artifacts(&self.paths, node)? {
            out.removed.push(format!("{}{rel}", self.prefix));
        }
        Ok(())
    }
}

/// The error of a spec whose id is already taken by `winner` (first path in order); shared
/// with the hook so both say the same.
pub fn duplicate_error(loser: &str, winner: &str, id: &str) -> Diagnostic {
    Diagnostic {
        severity: Severity::Error,
        file: loser.to_string(),
        line: None,
        message: format!(
            "duplicate id `{id}`: also defined by {winner}, which wins (first path in order); this file was not indexed — give one of them a different `id`"
        ),
    }
}

/// Read `kdd_version` from `<specs>/_kdd.yaml`.
fn kdd_version(bytes: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(bytes).ok()?;
    let docs = crate::parse::yaml::load(text).ok()?;
    let v = crate::parse::frontmatter::to_json(docs.into_iter().next()?);
    v.get("kdd_version")
        .and_then(crate::parse::frontmatter::scalar)
}

fn build_manifest(
    settings: &Settings,
    nodes: &[&Node],
    kdd_version_override: Option<String>,
    opts: &Options<'_>,
    paths: &ArtifactPaths,
) -> Manifest {
    let existing = read_manifest(&paths.manifest()).ok();
    let domains: BTreeSet<String> = nodes.iter().filter_map(|n| n.domain.clone()).collect();
    let mut m = derive::manifest_of_domains(settings, domains);
    if let Some(v) =
        kdd_version_override.or_else(|| existing.as_ref().map(|e| e.kdd_version.clone()))
    {
        m.kdd_version = v;
    }
    if let Some(e) = &existing {
        m.index_level = e.index_level;
        m.embedding = e.embedding.clone();
    }
    if let Some(x) = opts.extras {
        x.manifest(&mut m);
    }
    m
}

fn write_manifest(m: &Manifest, w: &Writer<'_>, out: &mut Outcome) -> Result<(), Error> {
    if artifact::write_artifact(&w.paths, "manifest.json", &render_manifest(m))? {
        out.written.push(format!("{}manifest.json", w.prefix));
    }
    Ok(())
}

/// Index every spec of the work tree (see the module docs).
pub fn full(settings: &Settings, opts: &Options<'_>) -> Result<Outcome, Error> {
    let (files, walk_diags) = list_specs(settings)?;
    let paths = ArtifactPaths::new(&settings.index_dir);
    let w = Writer {
        paths: paths.clone(),
        prefix: index_prefix(settings),
        opts: *opts,
    };
    let mut out = Outcome {
        files: files.len() + walk_diags.len(),
        // A missing documents root is a warning, not a failed file.
        failed: walk_diags
            .iter()
            .filter(|d| d.severity == Severity::Error)
            .count(),
        diagnostics: walk_diags,
        ..Outcome::default()
    };
    let done = AtomicUsize::new(0);
    let total = files.len();
    let results: Vec<Result<Extracted, Diagnostic>> = files
        .par_iter()
        .map(|p| {
            let r = read_spec(settings, p)
                .and_then(|bytes| crate::extract::extract(p, &bytes, &settings.specs_root));
            if let Some(cb) = opts.progress {
                cb(done.fetch_add(1, Ordering::Relaxed) + 1, total);
            }
            r
        })
        .collect();
    let mut winners: BTreeMap<String, Extracted> = BTreeMap::new();
    for r in results {
        match r {
            Ok(mut ex) => {
                out.diagnostics.append(&mut ex.diagnostics);
                if let Some(w) = winners.get(&ex.node.id) {
                    out.failed += 1;
                    out.diagnostics.push(duplicate_error(
                        &ex.node.source_file,
                        &w.node.source_file,
                        &ex.node.id,
                    ));
                } else {
                    winners.insert(ex.node.id.clone(), ex);
                }
            }
            Err(d) => {
                out.failed += 1;
                out.diagnostics.push(d);
            }
        }
    }
    let list: Vec<&Extracted> = winners.values().collect();
    let written: Vec<Result<_, Error>> = list.par_iter().map(|ex| w.write(ex)).collect();
    let mut expected: BTreeSet<String> = BTreeSet::new();
    for r in written {
        let r = r?;
        out.written.extend(r.written);
        out.removed.extend(r.removed);
        expected.extend(r.expected);
        out.diagnostics.extend(r.warning);
    }
    out.indexed = list.len();
    // Remove artifacts of specs that are gone (and stale files of live specs, e.g. an edges
    // file whose spec lost all its links). Embeddings (and L3 enrichments) of live specs stay.
    let live: BTreeSet<String> = list
        .iter()
        .map(|e| ArtifactPaths::node_stem(&e.node))
        .collect();
    let store = IndexStore::new(&settings.index_dir);
    let mut existing = Vec::new();
    for top in ["nodes", "edges", "embeddings", "enrichments"] {
        list_files(&store.paths.root().join(top), top, &mut existing);
    }
    for rel in existing {
        let Some((top, stem)) = stem_of(&rel) else {
            continue;
        };
        let keep = if top == "embeddings" || top == "enrichments" {
            live.contains(stem)
        } else {
            expected.contains(&rel)
        };
        if !keep {
            let abs = paths.abs(&rel);
            if std::fs::remove_file(&abs).is_ok() {
                prune(paths.root(), &abs);
                out.removed.push(format!("{}{rel}", w.prefix));
            }
        }
    }
    let kdd_yaml = settings.specs_dir().join("_kdd.yaml");
    let kv = crate::source::read_regular(&kdd_yaml, "_kdd.yaml", crate::parse::MAX_SPEC_BYTES)
        .ok()
        .and_then(|b| kdd_version(&b));
    let nodes: Vec<&Node> = list.iter().map(|e| &e.node).collect();
    let m = build_manifest(settings, &nodes, kv, opts, &paths);
    write_manifest(&m, &w, &mut out)?;
    out.finish();
    Ok(out)
}

/// Repo-relative paths (`rel/…`) of the regular files under `dir`, recursively; links and
/// kdd's own temporary files are never listed.
pub(crate) fn list_files(dir: &Path, rel: &str, out: &mut Vec<String>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let child = format!("{rel}/{name}");
        match e.file_type() {
            Ok(ft) if ft.is_dir() => list_files(&e.path(), &child, out),
            Ok(ft) if ft.is_file() && !name.starts_with(".kdd-tmp-") => out.push(child),
            _ => {}
        }
    }
}

fn prune(root: &Path, file: &Path) {
    let mut dir = file.parent();
    while let Some(d) = dir {
        if d == root || !d.starts_with(root) || std::fs::remove_dir(d).is_err() {
            break;
        }
        dir = d.parent();
    }
}

/// Incremental update from changed spec contents and deleted paths (see the module docs).
pub fn apply(
    settings: &Settings,
    changed: Vec<SpecSource>,
    deleted: Vec<String>,
) -> Result<Outcome, Error> {
    apply_with(settings, changed, deleted, &Options::default())
}

/// [`apply`] with options (the L2 extras).
pub fn apply_with(
    settings: &Settings,
    changed: Vec<SpecSource>,
    deleted: Vec<String>,
    opts: &Options<'_>,
) -> Result<Outcome, Error> {
    let paths = ArtifactPaths::new(&settings.index_dir);
    let w = Writer {
        paths: paths.clone(),
        prefix: index_prefix(settings),
        opts: *opts,
    };
    let mut out = Outcome::default();
    let store = IndexStore::new(&settings.index_dir);
    let (existing, errors) = store.load_nodes()?;
    for e in errors {
        out.diagnostics.push(Diagnostic {
            severity: Severity::Warning,
            file: String::new(),
            line: None,
            message: e.to_string(),
        });
    }
    let mut by_id: HashMap<String, Node> = HashMap::new();
    let mut by_file: HashMap<String, Vec<String>> = HashMap::new();
    for n in existing {
        by_file
            .entry(n.source_file.clone())
            .or_default()
            .push(n.id.clone());
        by_id.insert(n.id.clone(), n);
    }
    let mut kv = None;
    let kdd_yaml = if settings.specs_root.is_empty() {
        "_kdd.yaml".to_string()
    } else {
        format!("{}/_kdd.yaml", settings.specs_root)
    };
    let mut specs: Vec<SpecSource> = Vec::new();
    for s in changed {
        if s.path == kdd_yaml {
            kv = kdd_version(&s.bytes);
        } else if settings.roots().is_source(&s.path) {
            specs.push(s);
        }
    }
    specs.sort_by(|a, b| a.path.cmp(&b.path));
    specs.dedup_by(|a, b| a.path == b.path);
    // Deleted files (a path both deleted and changed counts as changed).
    let changed_paths: BTreeSet<&str> = specs.iter().map(|s| s.path.as_str()).collect();
    for path in &deleted {
        if changed_paths.contains(path.as_str()) {
            continue;
        }
        for id in by_file.remove(path).unwrap_or_default() {
            if let Some(n) = by_id.remove(&id) {
                w.remove(&n, &mut out)?;
            }
        }
    }
    out.files = specs.len();
    let results: Vec<Result<Extracted, Diagnostic>> = specs
        .par_iter()
        .map(|s| {
            if s.bytes.len() > crate::parse::MAX_SPEC_BYTES {
                return Err(Diagnostic {
                    severity: Severity::Error,
                    file: s.path.clone(),
                    line: None,
                    message: format!(
                        "file is {} bytes, over the {} MB limit for a spec; skipped",
                        s.bytes.len(),
                        crate::parse::MAX_SPEC_BYTES / (1024 * 1024)
                    ),
                });
            }
            crate::extract::extract(&s.path, &s.bytes, &settings.specs_root)
        })
        .collect();
    // Old nodes of successfully re-extracted files whose id changed are gone. A file that
    // fails keeps its previous artifacts (nothing indexed is lost; `kdd status` shows it stale).
    for ex in results.iter().flatten() {
        for id in by_file.remove(&ex.node.source_file).unwrap_or_default() {
            if id != ex.node.id {
                if let Some(n) = by_id.remove(&id) {
                    w.remove(&n, &mut out)?;
                }
            } else {
                by_id.remove(&id);
            }
        }
    }
    for r in results {
        let mut ex = match r {
            Ok(ex) => ex,
            Err(mut d) => {
                out.failed += 1;
                if by_file.contains_key(&d.file) {
                    d.message.push_str("; its previous index entry is kept");
                }
                out.diagnostics.push(d);
                continue;
            }
        };
        out.diagnostics.append(&mut ex.diagnostics);
        let id = ex.node.id.clone();
        if let Some(other) = by_id.get(&id).cloned() {
            if other.source_file < ex.node.source_file {
                out.failed += 1;
                out.diagnostics.push(duplicate_error(
                    &ex.node.source_file,
                    &other.source_file,
                    &id,
                ));
                continue;
            }
            // The new file wins: the other one is no longer indexed.
            w.remove(&other, &mut out)?;
            out.diagnostics.push(duplicate_error(
                &other.source_file,
                &ex.node.source_file,
                &id,
            ));
        }
        let r = w.write(&ex)?;
        out.written.extend(r.written);
        out.removed.extend(r.removed);
        out.diagnostics.extend(r.warning);
        out.indexed += 1;
        by_id.insert(id, ex.node);
    }
    let nodes: Vec<&Node> = by_id.values().collect();
    let m = build_manifest(settings, &nodes, kv, opts, &paths);
    write_manifest(&m, &w, &mut out)?;
    // A path both removed and rewritten in this run was updated, not removed.
    let written: BTreeSet<String> = out.written.iter().cloned().collect();
    out.removed.retain(|p| !written.contains(p));
    out.finish();
    Ok(out)
}
