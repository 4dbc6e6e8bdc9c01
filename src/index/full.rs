//! [`full`]: index every spec and document of the work tree, as named steps: list the files,
//! derive each through the pure core ([`super::derive_spec`], rayon), settle duplicate ids
//! ([`super::takes_id`]), write, prune what no live spec owns, write the manifest.
//!
//! Unchanged specs rewrite nothing ([`crate::artifact::write_if_changed`]), so a re-run leaves the
//! tree byte-identical; one unreadable spec is a diagnostic, never an abort.

use super::{
    build_manifest, claim_error, list_files, list_specs, prune, read_spec, stem_of, write_manifest,
    Derived, Error, Options, Outcome, Writer,
};
use crate::artifact::{ArtifactPaths, IndexStore};
use crate::config::Settings;
use crate::spec::{Diagnostic, Node, Severity};
use rayon::prelude::*;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Index every spec of the work tree (see the module docs).
pub fn full(settings: &Settings, opts: &Options<'_>) -> Result<Outcome, Error> {
    let (files, walk_diags) = list_specs(settings)?;
    let w = Writer::new(settings);
    // A file the walk refused is an error; a missing documents root or a `.kddignore` over its
    // bounds is a warning, and not a file.
    let refused = walk_diags
        .iter()
        .filter(|d| d.severity == Severity::Error)
        .count();
    let mut out = Outcome {
        files: files.len() + refused,
        failed: refused,
        diagnostics: walk_diags,
        ..Outcome::default()
    };
    let results = derive_files(settings, &files, opts);
    let unreadable: BTreeSet<String> = results
        .iter()
        .filter_map(|r| r.as_ref().err().map(|d| d.file.clone()))
        .collect();
    let holders = super::Holders::new(|| {
        // Unreadable node files hold nothing.
        let store = IndexStore::new(&settings.index_dir);
        store
            .load_nodes()
            .map(|(nodes, _)| nodes)
            .unwrap_or_default()
    });
    let winners = settle_ids(results, &holders, &mut out);
    let list: Vec<&Derived> = winners.values().collect();
    let written: Vec<Result<_, Error>> = list.par_iter().map(|d| w.write(d)).collect();
    let mut expected: BTreeSet<String> = BTreeSet::new();
    for r in written {
        let r = r?;
        out.written.extend(r.written);
        out.removed.extend(r.removed);
        expected.extend(r.expected);
    }
    out.indexed = list.len();
    let mut live: BTreeSet<String> = list
        .iter()
        .map(|d| ArtifactPaths::node_stem(&d.node))
        .collect();
    let kept = keep_previous(settings, &unreadable, &winners);
    for n in &kept {
        expected.insert(ArtifactPaths::node_rel(n));
        expected.insert(ArtifactPaths::edges_rel(n));
        live.insert(ArtifactPaths::node_stem(n));
    }
    prune_unowned(settings, &w, &live, &expected, &mut out);
    let kdd_yaml = settings.specs_dir().join("_kdd.yaml");
    let kv = crate::source::read_regular(&kdd_yaml, "_kdd.yaml", crate::parse::MAX_SPEC_BYTES)
        .ok()
        .and_then(|b| super::kdd_version(&b));
    let nodes: Vec<&Node> = list.iter().map(|d| &d.node).chain(&kept).collect();
    let m = build_manifest(settings, &nodes, kv, opts, &w.paths);
    write_manifest(&m, &w, &mut out)?;
    out.finish();
    Ok(out)
}

/// The indexed nodes of specs that are still there but could not be read or derived now: they
/// keep what was indexed for them, as in the pre-commit hook (`kdd status` shows them stale and
/// the error names the file), unless another spec now holds their id.
fn keep_previous(
    settings: &Settings,
    unreadable: &BTreeSet<String>,
    winners: &BTreeMap<String, Derived>,
) -> Vec<Node> {
    if unreadable.is_empty() {
        return Vec::new();
    }
    let store = IndexStore::new(&settings.index_dir);
    let (nodes, _) = store.load_nodes().unwrap_or_default();
    nodes
        .into_iter()
        .filter(|n| unreadable.contains(&n.source_file))
        .filter(|n| !winners.contains_key(&ArtifactPaths::claim_key(n)))
        .collect()
}

/// Read and derive every file (in parallel, reporting progress), in path order.
fn derive_files(
    settings: &Settings,
    files: &[String],
    opts: &Options<'_>,
) -> Vec<Result<Derived, Diagnostic>> {
    let done = AtomicUsize::new(0);
    let total = files.len();
    files
        .par_iter()
        .map(|p| {
            let r = read_spec(settings, p)
                .and_then(|bytes| super::derive_spec(settings, p, &bytes, opts.extras));
            if let Some(cb) = opts.progress {
                cb(done.fetch_add(1, Ordering::Relaxed) + 1, total);
            }
            r
        })
        .collect()
}

/// Duplicate node ids ([`super::takes_id`]): the spec the index on disk gives the id to keeps
/// it, else the first path in order; the others are failed files with an error naming both.
/// Every other diagnostic is collected into `out`.
fn settle_ids(
    results: Vec<Result<Derived, Diagnostic>>,
    indexed: &super::Holders<'_>,
    out: &mut Outcome,
) -> BTreeMap<String, Derived> {
    let mut winners: BTreeMap<String, Derived> = BTreeMap::new();
    for r in results {
        match r {
            Ok(mut d) => {
                out.diagnostics.append(&mut d.diagnostics);
                let key = ArtifactPaths::claim_key(&d.node);
                let Some(w) = winners.get(&key) else {
                    winners.insert(key, d);
                    continue;
                };
                out.failed += 1;
                if super::takes_id(&d.node.source_file, &w.node.source_file, indexed.get(&key)) {
                    out.diagnostics.push(claim_error(&w.node, &d.node));
                    winners.insert(key, d);
                } else {
                    out.diagnostics.push(claim_error(&d.node, &w.node));
                }
            }
            Err(d) => {
                out.failed += 1;
                out.diagnostics.push(d);
            }
        }
    }
    winners
}

/// Remove artifacts of specs that are gone (and stale files of live specs, e.g. an edges file
/// whose spec lost all its links). Embeddings (and L3 enrichments) of live specs stay.
fn prune_unowned(
    settings: &Settings,
    w: &Writer,
    live: &BTreeSet<String>,
    expected: &BTreeSet<String>,
    out: &mut Outcome,
) {
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
            let abs = w.paths.abs(&rel);
            if std::fs::remove_file(&abs).is_ok() {
                prune(w.paths.root(), &abs);
                out.removed.push(format!("{}{rel}", w.prefix));
            }
        }
    }
}
