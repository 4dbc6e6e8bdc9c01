//! [`apply`]: the incremental update from changed spec contents and deleted paths (the bare-repo
//! mirror's re-derivation, `crate::serve::bare`), as named steps: load the committed nodes, sort
//! the changed files, drop the deleted specs, derive the changed ones through the pure core
//! ([`super::derive_spec`]), retire ids that moved, write the winners, write the manifest.
//!
//! A rename is a delete + an add; a path both deleted and changed counts as changed. A file that
//! fails keeps its previous artifacts (nothing indexed is lost; `kdd status` shows it stale).
//! Duplicate ids: the spec the committed index gives an id keeps it, else the first path in
//! order ([`super::takes_id`]), as in [`super::full`].

use super::{
    build_manifest, claim_error, kdd_version, write_manifest, Derived, Error, Options, Outcome,
    SpecSource, Writer,
};
use crate::artifact::{ArtifactPaths, IndexStore};
use crate::config::Settings;
use crate::spec::{Diagnostic, Node, Severity};
use rayon::prelude::*;
use std::collections::{BTreeSet, HashMap};

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
    let w = Writer::new(settings);
    let mut out = Outcome::default();
    let mut known = Known::load(settings, &mut out)?;
    let (specs, kv) = sources_of(settings, changed);
    let changed_paths: BTreeSet<&str> = specs.iter().map(|s| s.path.as_str()).collect();
    for path in deleted
        .iter()
        .filter(|p| !changed_paths.contains(p.as_str()))
    {
        for n in known.take_file(path) {
            w.remove(&n, &mut out)?;
        }
    }
    out.files = specs.len();
    let results: Vec<Result<Derived, Diagnostic>> = specs
        .par_iter()
        .map(|s| super::derive_spec(settings, &s.path, &s.bytes, opts.extras))
        .collect();
    // Old nodes of successfully re-derived files whose id changed are gone.
    for d in results.iter().flatten() {
        for n in known.take_file(&d.node.source_file) {
            if ArtifactPaths::node_rel(&n) != ArtifactPaths::node_rel(&d.node) {
                w.remove(&n, &mut out)?;
            }
        }
    }
    for r in results {
        known.settle(r, &w, &mut out)?;
    }
    let nodes: Vec<&Node> = known.by_id.values().collect();
    let m = build_manifest(settings, &nodes, kv, opts, &w.paths);
    write_manifest(&m, &w, &mut out)?;
    // A path both removed and rewritten in this run was updated, not removed.
    let written: BTreeSet<String> = out.written.iter().cloned().collect();
    out.removed.retain(|p| !written.contains(p));
    out.finish();
    Ok(out)
}

/// The changed files that are specs or documents, sorted and deduplicated, and the
/// `kdd_version` of a changed `<specs>/_kdd.yaml`.
fn sources_of(settings: &Settings, changed: Vec<SpecSource>) -> (Vec<SpecSource>, Option<String>) {
    let kdd_yaml = super::kdd_yaml_path(&settings.specs_root);
    let roots = settings.roots();
    let mut kv = None;
    let mut specs: Vec<SpecSource> = Vec::new();
    for s in changed {
        if s.path == kdd_yaml {
            kv = kdd_version(&s.bytes);
        } else if roots.is_source(&s.path) {
            specs.push(s);
        }
    }
    specs.sort_by(|a, b| a.path.cmp(&b.path));
    specs.dedup_by(|a, b| a.path == b.path);
    (specs, kv)
}

/// The committed nodes, by claim ([`ArtifactPaths::claim_key`]) and by source file.
struct Known {
    by_id: HashMap<String, Node>,
    /// Who held each claim before this run (the nodes are loaded anyway).
    holders: std::collections::HashMap<String, String>,
    /// Source file → the claims of its nodes.
    by_file: HashMap<String, Vec<String>>,
}

impl Known {
    /// Load every committed node (unreadable node files are warnings).
    fn load(settings: &Settings, out: &mut Outcome) -> Result<Known, Error> {
        let (existing, errors) = IndexStore::new(&settings.index_dir).load_nodes()?;
        out.diagnostics
            .extend(errors.into_iter().map(|e| Diagnostic {
                severity: Severity::Warning,
                file: String::new(),
                line: None,
                message: e.to_string(),
            }));
        let mut k = Known {
            holders: super::holder_map(&existing),
            by_id: HashMap::new(),
            by_file: HashMap::new(),
        };
        for n in existing {
            let keys = k.by_file.entry(n.source_file.clone()).or_default();
            keys.push(ArtifactPaths::claim_key(&n));
            k.by_id.insert(ArtifactPaths::claim_key(&n), n);
        }
        Ok(k)
    }

    /// Forget the nodes of one file and return them.
    fn take_file(&mut self, path: &str) -> Vec<Node> {
        let ids = self.by_file.remove(path).unwrap_or_default();
        ids.iter().filter_map(|id| self.by_id.remove(id)).collect()
    }

    /// Take one derivation result: a failure keeps the previous entry, a duplicate id is settled
    /// by [`super::takes_id`], a winner is written.
    fn settle(
        &mut self,
        r: Result<Derived, Diagnostic>,
        w: &Writer,
        out: &mut Outcome,
    ) -> Result<(), Error> {
        let mut d = match r {
            Ok(d) => d,
            Err(mut diag) => {
                out.failed += 1;
                if self.by_file.contains_key(&diag.file) {
                    diag.message.push_str("; its previous index entry is kept");
                }
                out.diagnostics.push(diag);
                return Ok(());
            }
        };
        out.diagnostics.append(&mut d.diagnostics);
        let key = ArtifactPaths::claim_key(&d.node);
        if let Some(other) = self.by_id.get(&key).cloned() {
            let holder = self.holders.get(&key).map(String::as_str);
            if !super::takes_id(&d.node.source_file, &other.source_file, holder) {
                out.failed += 1;
                out.diagnostics.push(claim_error(&d.node, &other));
                return Ok(());
            }
            // The new file wins: the other one is no longer indexed.
            w.remove(&other, out)?;
            out.diagnostics.push(claim_error(&other, &d.node));
        }
        let r = w.write(&d)?;
        out.written.extend(r.written);
        out.removed.extend(r.removed);
        out.indexed += 1;
        self.by_id.insert(key, d.node);
        Ok(())
    }
}
