//! Derivation from spec bytes (read from a staged blob or a tree, never the work tree) to the exact
//! artifact bytes `kdd index` writes, so the hook, the merge driver, `resolve` and `verify`
//! agree with a full index byte for byte.
//!
//! Per spec: [`crate::extract::extract`] then [`crate::index::artifact_files`] (the one render
//! point, with the L2 seam). The manifest follows `index`'s rules: domains of the indexed
//! specs, multi-domain when any domain other than `_shared` exists, `kdd_version` from
//! `<specs>/_kdd.yaml`, index level and embedding kept from the existing manifest.

use crate::artifact::{render_manifest, ArtifactPaths, Manifest, Structure};
use crate::config::Settings;
use crate::spec::{Diagnostic, Node, Severity};
use std::collections::{BTreeMap, BTreeSet};

/// The committed artifacts of one spec: its node and every file under `.kdd-index/` it owns.
#[derive(Debug, Clone)]
pub struct Derived {
    pub node: Node,
    /// `(path relative to .kdd-index/, bytes)`, node file first.
    pub files: Vec<(String, Vec<u8>)>,
    pub diagnostics: Vec<Diagnostic>,
}

/// Repo-relative path of `<specs>/_kdd.yaml`.
pub fn kdd_yaml_path(specs_root: &str) -> String {
    if specs_root.is_empty() {
        "_kdd.yaml".to_string()
    } else {
        format!("{specs_root}/_kdd.yaml")
    }
}

/// Derive the artifacts of the spec at repo-relative `path` with content `bytes`.
/// A spec that cannot be read is an error diagnostic naming the file (and line when known).
pub fn derive_spec(
    settings: &Settings,
    path: &str,
    bytes: &[u8],
    extras: Option<&dyn crate::index::ArtifactExtras>,
) -> Result<Derived, Diagnostic> {
    extract_spec(settings, path, bytes).map(|ex| finish_spec(settings, ex, extras))
}

/// The checks and the extraction of [`derive_spec`], before any artifact is made.
fn extract_spec(
    settings: &Settings,
    path: &str,
    bytes: &[u8],
) -> Result<crate::spec::Extracted, Diagnostic> {
    // The path rule `kdd index` reads a work-tree file under (control characters, `..`, …):
    // a staged or committed path it refuses is refused here too, or the hook and `kdd index`
    // would write and remove the same artifacts in turn.
    crate::roots::check_source(path, &settings.roots()).map_err(|e| e.diagnostic())?;
    if bytes.len() > crate::parse::MAX_SPEC_BYTES {
        return Err(Diagnostic {
            severity: Severity::Error,
            file: path.to_string(),
            line: None,
            message: format!(
                "file is {} bytes, over the {} MB limit for a spec; skipped",
                bytes.len(),
                crate::parse::MAX_SPEC_BYTES / (1024 * 1024)
            ),
        });
    }
    crate::extract::extract(path, bytes, &settings.specs_root)
}

/// The artifacts of an extracted spec (see [`derive_spec`]).
fn finish_spec(
    settings: &Settings,
    mut ex: crate::spec::Extracted,
    extras: Option<&dyn crate::index::ArtifactExtras>,
) -> Derived {
    // L2: the embed step plugs in through `index::ArtifactExtras`, as in `kdd index`.
    let (files, warning) =
        crate::index::artifact_files(&ex, extras, &ArtifactPaths::new(&settings.index_dir));
    let mut diagnostics = std::mem::take(&mut ex.diagnostics);
    diagnostics.extend(warning);
    Derived {
        node: ex.node,
        files,
        diagnostics,
    }
}

fn kdd_version(bytes: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(bytes).ok()?;
    let docs = crate::parse::yaml::load(text).ok()?;
    let v = crate::parse::frontmatter::to_json(docs.into_iter().next()?);
    v.get("kdd_version")
        .and_then(crate::parse::frontmatter::scalar)
}

/// The manifest for the indexed spec paths (repo-relative), given the staged `_kdd.yaml` and the
/// existing manifest (whose index level, embedding and, without `_kdd.yaml`, `kdd_version` are
/// kept: a hook on a machine without the model must not downgrade them).
pub fn derive_manifest<'a>(
    settings: &Settings,
    spec_paths: impl Iterator<Item = &'a str>,
    kdd_yaml: Option<&[u8]>,
    existing: Option<&[u8]>,
    extras: Option<&dyn crate::index::ArtifactExtras>,
) -> Vec<u8> {
    let domains: BTreeSet<String> = spec_paths
        .filter(|p| crate::source::is_spec_path(p, &settings.specs_root))
        .filter_map(|p| crate::extract::route::locate(p, &settings.specs_root).domain)
        .collect();
    let mut m = manifest_of_domains(settings, domains);
    let old = existing.and_then(|b| serde_json::from_slice::<Manifest>(b).ok());
    if let Some(v) = kdd_yaml
        .and_then(kdd_version)
        .or_else(|| old.as_ref().map(|o| o.kdd_version.clone()))
    {
        m.kdd_version = v;
    }
    if let Some(old) = old {
        m.index_level = old.index_level;
        m.embedding = old.embedding;
    }
    // The level that actually ran (as `kdd index` records it).
    if let Some(x) = extras {
        x.manifest(&mut m);
    }
    render_manifest(&m)
}

/// What [`derive_index`] derived.
#[derive(Debug, Clone, Default)]
pub struct DerivedIndex {
    /// Path relative to `.kdd-index/` → bytes.
    pub files: BTreeMap<String, Vec<u8>>,
    /// Every diagnostic (warnings included).
    pub diagnostics: Vec<Diagnostic>,
    /// Spec paths that could not be indexed at all (their previous artifacts are kept by the
    /// hook, so they are neither missing nor extra).
    pub unreadable: BTreeSet<String>,
}

/// The complete expected `.kdd-index/` (path relative to it → bytes) for the files of a tree,
/// exactly what a full index writes over an index whose ids are held as `holders` says (specs
/// excluded by the tree's `.kddignore` skipped): duplicate ids are settled by
/// [`super::takes_id`], specs that cannot be read are returned as diagnostics.
pub fn derive_index(
    settings: &Settings,
    files: &[(String, Vec<u8>)],
    existing_manifest: Option<&[u8]>,
    holders: &super::Holders<'_>,
    extras: Option<&dyn crate::index::ArtifactExtras>,
) -> DerivedIndex {
    let mut sorted: Vec<&(String, Vec<u8>)> = files.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let yaml = kdd_yaml_path(&settings.specs_root);
    let kdd_yaml = sorted
        .iter()
        .find(|(p, _)| *p == yaml)
        .map(|(_, b)| b.as_slice());
    // Every root's `.kddignore` (specs and documents alike), as `kdd index` reads them.
    let roots = settings.roots();
    let ign = crate::roots::Ignores::from_lookup(&roots, |rel| {
        sorted
            .iter()
            .find(|(p, _)| p == rel)
            .map(|(_, b)| b.clone())
    });
    let sources = sorted
        .into_iter()
        .filter(|(p, _)| roots.is_source(p) && !ign.ignores(p));
    let mut d = keep_one_per_id(settings, sources, holders);
    d.diagnostics.extend(ign.diagnostics());
    // Finished only for the spec that keeps its id: a duplicate's chunks never reach the extras
    // (verify's vector audit counted them against the spec that kept the id, and failed for good).
    let mut out = BTreeMap::new();
    let mut indexed: Vec<String> = Vec::new();
    for ex in std::mem::take(&mut d.kept) {
        indexed.push(ex.node.source_file.clone());
        let f = finish_spec(settings, ex, extras);
        d.diagnostics.extend(f.diagnostics);
        out.extend(f.files);
    }
    if !indexed.is_empty() || existing_manifest.is_some() {
        out.insert(
            "manifest.json".to_string(),
            derive_manifest(
                settings,
                indexed.iter().map(String::as_str),
                kdd_yaml,
                existing_manifest,
                extras,
            ),
        );
    }
    DerivedIndex {
        files: out,
        diagnostics: d.diagnostics,
        unreadable: d.unreadable,
    }
}

/// The specs of a tree extracted, one per id.
struct Settled {
    /// The spec that keeps each id, in path order.
    kept: Vec<crate::spec::Extracted>,
    diagnostics: Vec<Diagnostic>,
    unreadable: BTreeSet<String>,
}

/// Extract every source (in path order) and keep one spec per claim
/// ([`ArtifactPaths::claim_key`], [`super::takes_id`]); the others are named as duplicates.
fn keep_one_per_id<'a>(
    settings: &Settings,
    sources: impl Iterator<Item = &'a (String, Vec<u8>)>,
    holders: &super::Holders<'_>,
) -> Settled {
    let mut s = Settled {
        kept: Vec::new(),
        diagnostics: Vec::new(),
        unreadable: BTreeSet::new(),
    };
    let mut extracted: Vec<crate::spec::Extracted> = Vec::new();
    let mut keeper: BTreeMap<String, usize> = BTreeMap::new();
    for (p, b) in sources {
        let ex = match extract_spec(settings, p, b) {
            Ok(ex) => ex,
            Err(d) => {
                s.unreadable.insert(p.clone());
                s.diagnostics.push(d);
                continue;
            }
        };
        let key = ArtifactPaths::claim_key(&ex.node);
        extracted.push(ex);
        let new = extracted.len() - 1;
        let Some(old) = keeper.insert(key.clone(), new) else {
            continue;
        };
        let file = |i: usize| extracted[i].node.source_file.as_str();
        let (win, lose) = match super::takes_id(file(new), file(old), holders.get(&key)) {
            true => (new, old),
            false => (old, new),
        };
        keeper.insert(key, win);
        s.diagnostics.push(super::claim_error(
            &extracted[lose].node,
            &extracted[win].node,
        ));
    }
    let keep: BTreeSet<usize> = keeper.into_values().collect();
    for (i, ex) in extracted.into_iter().enumerate() {
        if keep.contains(&i) {
            s.kept.push(ex);
        } else {
            s.diagnostics.extend(ex.diagnostics);
        }
    }
    s
}

/// The manifest's structure rule, written once: multi-domain when any domain other than
/// `_shared` exists; the specs root, the domains of the indexed specs and the documents roots.
pub(super) fn manifest_of_domains(settings: &Settings, domains: BTreeSet<String>) -> Manifest {
    let structure = if domains.iter().any(|d| d != "_shared") {
        Structure::MultiDomain
    } else {
        Structure::SingleDomain
    };
    let mut m = Manifest::new(
        &settings.specs_root,
        structure,
        domains.into_iter().collect(),
    );
    m.docs = settings.docs_roots.clone();
    m
}
