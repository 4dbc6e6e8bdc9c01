//! Index: the one write path from spec bytes to `.kdd-index/` artifacts.
//!
//! - The pure core is [`derive_spec`] (`derive.rs`): spec path + bytes → the node and the exact
//!   artifact bytes, no I/O. [`artifact_files`] is the ONE function that renders an
//!   [`Extracted`]; the L2 step plugs in there through [`ArtifactExtras`] (see its docs).
//!   Every writer derives through it: [`full`] (`kdd index`, `full.rs`), [`apply`] (the
//!   bare-repo mirror, `apply.rs`), the staged-tree heal (`crate::hook`: pre-commit, post-merge,
//!   `kdd resolve`) and `kdd verify` ([`derive_index`]). The manifest rule is written once
//!   (`derive.rs`).
//! - [`full`] walks the specs root and the documents roots (`crate::roots`) of the work tree
//!   (rayon), writes every spec's and document's artifacts,
//!   removes artifacts of specs that are gone and writes the manifest. Unchanged specs rewrite
//!   nothing ([`crate::artifact::write_if_changed`]), so a re-run leaves the tree byte-identical.
//! - [`apply`] is the incremental entry of the bare-repo mirror with contents read from git
//!   (a rename is a delete + an add). Its [`Outcome`] lists exactly the repo-relative artifact
//!   paths written and removed.
//!
//! Duplicate node ids across files ([`takes_id`]): the spec the index already gives the id to
//! keeps it while it declares it; between new claimants the lexicographically first path wins.
//! The other file gets an error naming both files and writes nothing. One bad spec never aborts
//! a run; every problem is a [`Diagnostic`] naming the file.
//!
//! Storage choice (REQ-002): the committed node file holds only identity (no indexed fields,
//! no section text), edges are compact JSON lines, and files with no links write no edges file.
//! Everything else is re-derived from the spec, which sits in the same tree.

use crate::artifact::{
    self, read_manifest, remove_artifacts, render_links, render_manifest, render_node,
    ArtifactPaths, Manifest,
};
use crate::config::Settings;
use crate::spec::{Diagnostic, Extracted, Node, Severity};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

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
pub use apply::{apply, apply_with};
pub use derive::{
    derive_index, derive_manifest, derive_spec, kdd_yaml_path, Derived, DerivedIndex,
};
pub use roots::{with_manifest_docs, with_manifest_specs_root};
pub use vectors::{embed_specs, EmbedStats, SpecVectors};

mod apply;
mod derive;
mod full;
pub use full::full;
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

pub(crate) use crate::artifact::stem_of;

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
}

struct Writer {
    paths: ArtifactPaths,
    prefix: String,
}

impl Writer {
    fn new(settings: &Settings) -> Writer {
        Writer {
            paths: ArtifactPaths::new(&settings.index_dir),
            prefix: index_prefix(settings),
        }
    }

    /// Write one derived spec's artifacts (see [`Written`]).
    fn write(&self, d: &Derived) -> Result<Written, Error> {
        let mut written = Vec::new();
        let mut removed = Vec::new();
        let mut expected = Vec::new();
        for (rel, bytes) in &d.files {
            if artifact::write_artifact(&self.paths, rel, bytes)? {
                written.push(format!("{}{rel}", self.prefix));
            }
            expected.push(rel.clone());
        }
        let edges = ArtifactPaths::edges_rel(&d.node);
        if !expected.contains(&edges) {
            // A spec that lost all its links: its old edges file goes.
            let abs = self.paths.abs(&edges);
            if std::fs::remove_file(&abs).is_ok() {
                prune(self.paths.root(), &abs);
                removed.push(format!("{}{edges}", self.prefix));
            }
        }
        Ok(Written {
            written,
            removed,
            expected,
        })
    }

    fn remove(&self, node: &Node, out: &mut Outcome) -> Result<(), Error> {
        for rel in remove_artifacts(&self.paths, node)? {
            out.removed.push(format!("{}{rel}", self.prefix));
        }
        Ok(())
    }
}

/// Who holds each claim ([`ArtifactPaths::claim_key`]) in the index being updated: the spec
/// its node file names. Read on first use: a run in which no two specs make one claim (nearly
/// every run) reads no node file for it.
pub struct Holders<'a> {
    load: Box<dyn Fn() -> Vec<Node> + 'a>,
    map: std::cell::OnceCell<std::collections::HashMap<String, String>>,
}

impl<'a> Holders<'a> {
    /// Holders of the nodes `load` returns, called at most once.
    pub fn new(load: impl Fn() -> Vec<Node> + 'a) -> Holders<'a> {
        Holders {
            load: Box::new(load),
            map: std::cell::OnceCell::new(),
        }
    }

    /// The spec holding `claim`, if any.
    pub fn get(&self, claim: &str) -> Option<&str> {
        let map = self.map.get_or_init(|| holder_map(&(self.load)()));
        map.get(claim).map(String::as_str)
    }
}

/// Claim → the spec each of `nodes` names.
pub fn holder_map(nodes: &[Node]) -> std::collections::HashMap<String, String> {
    nodes
        .iter()
        .map(|n| (ArtifactPaths::claim_key(n), n.source_file.clone()))
        .collect()
}

/// The duplicate-id rule, written once for every writer: when `challenger` declares an id that
/// `holder` took earlier in this run, does the challenger take it over? The spec the index
/// already gives the id to (`indexed`) keeps it for as long as it declares it, so a new file
/// never takes over an indexed node, whatever its name; between newcomers the first path in
/// order wins.
pub fn takes_id(challenger: &str, holder: &str, indexed: Option<&str>) -> bool {
    match indexed {
        Some(i) if i == challenger => true,
        Some(i) if i == holder => false,
        _ => challenger < holder,
    }
}

/// The error of a spec that lost its claim to `winner` ([`takes_id`]): [`duplicate_error`] when
/// both declare one id, else their two ids name one node file.
pub fn claim_error(loser: &Node, winner: &Node) -> Diagnostic {
    if loser.id == winner.id {
        return duplicate_error(&loser.source_file, &winner.source_file, &loser.id);
    }
    Diagnostic {
        severity: Severity::Error,
        file: loser.source_file.clone(),
        line: None,
        message: format!(
            "id `{}` is stored under the same index file as `{}` of {}, which keeps it (their file names collide once made safe); this file was not indexed — give it a different `id`",
            loser.id, winner.id, winner.source_file
        ),
    }
}

/// The error of a spec whose id `winner` keeps ([`takes_id`]); shared with the hook so both
/// say the same.
pub fn duplicate_error(loser: &str, winner: &str, id: &str) -> Diagnostic {
    Diagnostic {
        severity: Severity::Error,
        file: loser.to_string(),
        line: None,
        message: format!(
            "duplicate id `{id}`: also defined by {winner}, which keeps it (the spec already indexed under an id keeps it; between new ones the first path in order); this file was not indexed — give one of them a different `id`"
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

fn write_manifest(m: &Manifest, w: &Writer, out: &mut Outcome) -> Result<(), Error> {
    if artifact::write_artifact(&w.paths, "manifest.json", &render_manifest(m))? {
        out.written.push(format!("{}manifest.json", w.prefix));
    }
    Ok(())
}

/// Repo-relative paths (`rel/…`) of the regular files under `dir` (the one index-folder walker,
/// [`crate::artifact::list_files`]).
pub(crate) use crate::artifact::list_files;

fn prune(root: &Path, file: &Path) {
    let mut dir = file.parent();
    while let Some(d) = dir {
        if d == root || !d.starts_with(root) || std::fs::remove_dir(d).is_err() {
            break;
        }
        dir = d.parent();
    }
}
