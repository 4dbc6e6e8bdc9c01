//! Incremental, self-healing index maintenance from the staged tree: the engine behind
//! `kdd-hook pre-commit`, the post-merge/post-checkout/post-rewrite heal and `kdd resolve`.
//!
//! One pass ([`heal`]) makes the `.kdd-index/` entries of the index git is committing agree with
//! the staged specs:
//! - specs whose staged blob is new or changed (rename = delete + add), or whose node is missing,
//!   has another source hash or is conflicted, are re-derived from the **staged blob** (never the
//!   work tree, so `git add -p` indexes exactly what is committed);
//! - nodes whose spec is gone, stray edges/embeddings and conflicted artifact paths nobody derives
//!   are removed (an L3 enrichment file is kept exactly while its node file is);
//! - exactly the artifact paths written or removed are staged (`git update-index`), nothing else.
//!
//! Speed: a verification cache (`<cache dir>/hook-state`) records, per spec path, the staged
//! blob id and the blob ids of its artifacts last seen consistent. A commit touching no spec and
//! no artifact only compares staged entries with that record (no blob is read). The record is an
//! optimisation only: without it every staged node is checked against its spec once.

mod state;

use crate::artifact::{remove_artifacts, write_artifact, ArtifactPaths, INDEX_DIR};
use crate::config::Settings;
use crate::git::{self, Entries};
use crate::spec::{Diagnostic, Node};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Errors of a heal pass. The hook reports them and lets the commit through.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Git(#[from] git::Error),
    #[error(transparent)]
    Artifact(#[from] crate::artifact::Error),
}

/// What a heal pass did.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Report {
    /// Specs in the staged tree.
    pub specs: usize,
    /// Specs re-derived from their staged blob.
    pub rederived: Vec<String>,
    /// Artifact paths (repo-relative) written and staged.
    pub written: Vec<String>,
    /// Artifact paths (repo-relative) removed and staged.
    pub removed: Vec<String>,
    /// Specs that could not be read (file and line); their previous artifacts are kept.
    pub diagnostics: Vec<Diagnostic>,
    /// Specs still in conflict: their artifacts were left alone.
    pub conflicted_specs: Vec<String>,
    /// True when the verification record showed nothing to do.
    pub fast_path: bool,
    /// Problems of the run itself (e.g. indexed at L1 because the model is missing).
    pub warnings: Vec<String>,
}

impl Report {
    /// Paths staged by this pass.
    pub fn staged(&self) -> Vec<String> {
        let mut v: Vec<String> = self.written.iter().chain(&self.removed).cloned().collect();
        v.sort();
        v.dedup();
        v
    }
}

/// Per work tree (in its git dir): digest of the staged specs + index last left consistent.
const STAMP_FILE: &str = "kdd-hook-stamp";
use state::{State, STATE_HEADER};

fn art_key(rel: &str) -> String {
    format!("{INDEX_DIR}/{rel}")
}

/// `nodes/entity/X.json` → `entity/X`; same for edges/embeddings.
fn stem_of(rel: &str) -> Option<(&str, &str)> {
    let (top, rest) = rel.split_once('/')?;
    let stem = rest.rsplit_once('.').map(|(s, _)| s)?;
    Some((top, stem))
}

/// Options of a heal pass.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options {
    /// Stage the written/removed paths (false: only write the work tree).
    pub stage: bool,
    /// Run the L2 step like `kdd index` does (opened only when a spec must be re-derived;
    /// missing runtime/model → L1 with a warning). Without it, existing vector files of live
    /// nodes are kept, as `kdd index` does at L1.
    pub embed: bool,
}

/// Make `.kdd-index/` in the index git is committing agree with the staged specs (see module doc).
pub fn heal(settings: &Settings, opts: Options) -> Result<Report, Error> {
    let repo = git::open(&settings.repo_root)?;
    // One heal at a time per work tree (two hooks or agents writing .kdd-index/ at once would
    // interleave); released when the file is dropped.
    let _lock = lock(repo.git_dir());
    let index = git::load_index(&repo)?;
    let settings = &crate::index::with_manifest_docs(settings.clone());
    let roots = settings.roots();
    let root = settings.specs_root.as_str();
    // Fastest path: the staged specs and index are exactly what the last pass left consistent.
    let stamp_file = repo.git_dir().join(STAMP_FILE);
    let stamp = |index: &gix::index::File| {
        format!(
            "{STATE_HEADER} {root}\n{}\n",
            git::index_stamp(index, &[root, INDEX_DIR]) + &git::roots::docs_stamp(index, &roots)
        )
    };
    let current_stamp = stamp(&index);
    if std::fs::read_to_string(&stamp_file).is_ok_and(|s| s == current_stamp) {
        return Ok(Report {
            fast_path: true,
            ..Report::default()
        });
    }
    if let Some(link) = git::staged_root_link(&index, root) {
        // A linked specs root is never followed; nothing is re-derived or removed.
        let diagnostics = crate::source::link_errors(vec![link], |_| true);
        return Ok(Report {
            diagnostics,
            ..Report::default()
        });
    }
    let (staged_root, staged_links, conflicted) = git::roots::staged(&index, &roots);
    let kdd_yaml_id = staged_root.get(&crate::index::kdd_yaml_path(root)).copied();
    // The staged `.kddignore` files exclude exactly what `kdd index` excludes in the work tree.
    let ign = git::roots::ignores_of(&repo, &staged_root, &roots)?;
    let wanted = |p: &String| roots.is_source(p) && !ign.ignores(p);
    let specs: Entries = staged_root.into_iter().filter(|(p, _)| wanted(p)).collect();
    let arts = git::index_entries(&index, INDEX_DIR);
    let conflicted_specs: BTreeSet<String> = conflicted.into_iter().filter(wanted).collect();
    let conflicted_arts = git::conflicted_paths(&index, INDEX_DIR);
    // Staged links named like specs are never read: the same per-file error as `kdd index`.
    let link_errors = crate::source::link_errors(staged_links, wanted);
    let mut report = Report {
        specs: specs.len(),
        conflicted_specs: conflicted_specs.iter().cloned().collect(),
        diagnostics: link_errors.clone(),
        ..Report::default()
    };
    let mut state = State::load(settings);
    let before = state.clone();
    let manifest_key = art_key("manifest.json");
    let kdd_yaml = match kdd_yaml_id {
        Some(id) => Some(git::read_blob(&repo, id)?),
        None => None,
    };
    let existing_manifest = match arts.get(&manifest_key) {
        Some(id) => Some(git::read_blob(&repo, *id)?),
        None => None,
    };
    let expected_manifest = |indexed: &mut dyn Iterator<Item = &str>,
                             extras: Option<&dyn crate::index::ArtifactExtras>|
     -> Option<Vec<u8>> {
        let paths: Vec<&str> = indexed.collect();
        (!paths.is_empty() || existing_manifest.is_some()).then(|| {
            crate::index::derive_manifest(
                settings,
                paths.into_iter(),
                kdd_yaml.as_deref(),
                existing_manifest.as_deref(),
                extras,
            )
        })
    };

    // 1. Specs the record vouches for.
    let mut claimed: BTreeSet<String> = BTreeSet::new();
    let mut owner: BTreeMap<String, String> = BTreeMap::new();
    let mut todo: Vec<&String> = Vec::new();
    for (p, id) in &specs {
        let ok = state.specs.get(p).is_some_and(|(sid, a)| {
            sid == id
                && a.iter()
                    .all(|(rel, aid)| arts.get(&art_key(rel)) == Some(aid))
        });
        if ok {
            for (rel, _) in &state.specs[p].1 {
                claimed.insert(rel.clone());
                if rel.starts_with("nodes/") {
                    owner.insert(rel.clone(), p.clone());
                }
            }
        } else {
            todo.push(p);
        }
    }
    let unclaimed: Vec<&String> = arts
        .keys()
        .filter(|k| *k != &manifest_key)
        .filter(|k| !claimed.contains(&ArtifactPaths::owner_rel(&k[INDEX_DIR.len() + 1..])))
        .collect();
    if todo.is_empty() && unclaimed.is_empty() && conflicted_arts.is_empty() {
        let m = expected_manifest(&mut specs.keys().map(String::as_str), None);
        if m.as_ref().map(|b| git::blob_id(&repo, b)) == arts.get(&manifest_key).copied() {
            report.fast_path = true;
            if link_errors.is_empty() {
                let _ = std::fs::write(&stamp_file, &current_stamp);
            }
            return Ok(report);
        }
    }

    // Something to do: open the L2 step now (never on the fast path).
    let level = opts.embed.then(crate::index::l2::for_index);
    if let Some(crate::index::l2::Level::L1(_, why)) = &level {
        report.warnings.push(why.clone());
    }
    let extras = level.as_ref().map(|l| l.extras());

    // 2. Read the unclaimed nodes to learn which spec each belongs to.
    let paths = ArtifactPaths::new(&settings.index_dir);
    let mut nodes_by_spec: BTreeMap<String, Vec<(String, Node)>> = BTreeMap::new();
    for key in &unclaimed {
        let rel = &key[INDEX_DIR.len() + 1..];
        if !rel.starts_with("nodes/") {
            continue;
        }
        let bytes = git::read_blob(&repo, arts[*key])?;
        // A corrupt node file belongs to nobody and is removed below.
        if let Ok(n) = serde_json::from_slice::<Node>(&bytes) {
            nodes_by_spec
                .entry(n.source_file.clone())
                .or_default()
                .push((rel.to_string(), n));
        }
    }

    // 3. Re-derive every spec the record does not vouch for (cheap at L1; after a merge a node
    //    can match its spec while its edges were unioned from both sides). Duplicate ids: the
    //    first path wins, as in `kdd index`.
    let mut write: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let mut keep_files: BTreeSet<String> = claimed.clone();
    let mut derived_stems: BTreeSet<String> = BTreeSet::new();
    let todo_set: BTreeSet<&String> = todo.iter().copied().collect();
    let mut indexed: BTreeSet<&str> = specs
        .keys()
        .filter(|p| !todo_set.contains(p))
        .map(String::as_str)
        .collect();
    let keep_node = |n: &Node, rel: &str, keep_files: &mut BTreeSet<String>| {
        keep_files.insert(rel.to_string());
        keep_files.insert(ArtifactPaths::edges_rel(n));
        keep_files.insert(ArtifactPaths::embeddings_rel(n));
    };
    for p in todo {
        let id = specs[p];
        let bytes = git::read_blob(&repo, id)?;
        let candidates = nodes_by_spec.get(p).cloned().unwrap_or_default();
        let d = match crate::index::derive_spec(settings, p, &bytes, extras) {
            Ok(d) => d,
            Err(diag) => {
                // Keep whatever was indexed for it; `kdd status` shows it stale.
                report.diagnostics.push(diag);
                state.specs.remove(p);
                for (rel, n) in &candidates {
                    keep_node(n, rel, &mut keep_files);
                    derived_stems.remove(&ArtifactPaths::node_stem(n));
                }
                if !candidates.is_empty() {
                    indexed.insert(p);
                }
                continue;
            }
        };
        report.diagnostics.extend(d.diagnostics.iter().cloned());
        let node_rel = ArtifactPaths::node_rel(&d.node);
        if let Some(o) = owner.get(&node_rel).cloned() {
            if o.as_str() < p.as_str() {
                report
                    .diagnostics
                    .push(crate::index::duplicate_error(p, &o, &d.node.id));
                state.specs.remove(p);
                continue;
            }
            // This path sorts first: it takes the id over from a spec verified earlier.
            report
                .diagnostics
                .push(crate::index::duplicate_error(&o, p, &d.node.id));
            if let Some((_, files)) = state.specs.remove(&o) {
                for (rel, _) in files {
                    keep_files.remove(&rel);
                }
            }
            indexed.remove(o.as_str());
        }
        owner.insert(node_rel.clone(), p.clone());
        report.rederived.push(p.clone());
        // When this run produced no vectors (L1), the node's existing vector file is kept,
        // as `kdd index` does (vectors are keyed by chunk content; L2 re-embeds what changed).
        let emb = ArtifactPaths::embeddings_rel(&d.node);
        let reuse = !conflicted_arts.contains(&art_key(&emb));
        let mut files = Vec::new();
        for (rel, b) in d.files {
            files.push((rel.clone(), git::blob_id(&repo, &b)));
            keep_files.insert(rel.clone());
            write.insert(rel, b);
        }
        if reuse && !write.contains_key(&emb) {
            if let Some(eid) = arts.get(&art_key(&emb)) {
                files.push((emb.clone(), *eid));
                keep_files.insert(emb);
            }
        }
        state.specs.insert(p.clone(), (id, files));
        derived_stems.insert(ArtifactPaths::node_stem(&d.node));
        indexed.insert(p);
    }
    // Nodes of conflicted specs are left alone.
    for p in &conflicted_specs {
        for (rel, n) in nodes_by_spec.get(p).into_iter().flatten() {
            keep_node(n, rel, &mut keep_files);
        }
    }
    state.specs.retain(|p, _| specs.contains_key(p));

    // 4. Everything staged (or conflicted) under .kdd-index/ that nobody owns goes.
    let mut remove: BTreeSet<String> = BTreeSet::new();
    for key in arts.keys().chain(conflicted_arts.iter()) {
        let rel = &key[INDEX_DIR.len() + 1..];
        if rel == "manifest.json" || write.contains_key(rel) {
            continue;
        }
        let kept = keep_files.contains(&ArtifactPaths::owner_rel(rel))
            && !(conflicted_arts.contains(key.as_str())
                && stem_of(rel).is_some_and(|(_, s)| derived_stems.contains(s)));
        if !kept {
            remove.insert(rel.to_string());
        }
    }

    // 5. Write, remove, stage.
    let mut stage: Vec<String> = Vec::new();
    for (rel, bytes) in &write {
        let key = art_key(rel);
        write_artifact(&paths, rel, bytes)?;
        if arts.get(&key) != Some(&git::blob_id(&repo, bytes)) || conflicted_arts.contains(&key) {
            report.written.push(key.clone());
            stage.push(key);
        }
    }
    // Embedding failures are never silent: list them (the manifest then records L1).
    if let Some(crate::index::l2::Level::L2(x)) = &level {
        for (file, why) in x.failed() {
            report.warnings.push(format!(
                "{file}: indexed without vectors: {why}; run `kdd index`"
            ));
        }
    }
    let m = expected_manifest(&mut indexed.iter().copied(), extras);
    let m_id = m.as_ref().map(|b| git::blob_id(&repo, b));
    if m_id != arts.get(&manifest_key).copied() || conflicted_arts.contains(&manifest_key) {
        match &m {
            Some(bytes) => {
                write_artifact(&paths, "manifest.json", bytes)?;
                report.written.push(manifest_key.clone());
            }
            None => {
                remove_file(&paths, "manifest.json")?;
                report.removed.push(manifest_key.clone());
            }
        }
        stage.push(manifest_key.clone());
    }
    for rel in &remove {
        remove_file(&paths, rel)?;
        let key = art_key(rel);
        report.removed.push(key.clone());
        stage.push(key);
    }
    if opts.stage && !settings.bare {
        git::stage_paths(&repo, &settings.repo_root, &stage)?;
        let failed = report
            .diagnostics
            .iter()
            .any(|d| d.severity == crate::spec::Severity::Error);
        if !failed && conflicted_specs.is_empty() {
            if let Ok(after) = git::load_index(&repo) {
                let _ = std::fs::write(&stamp_file, stamp(&after));
            }
        }
    }
    if state != before {
        state.save(settings);
    }
    Ok(report)
}

fn lock(git_dir: &Path) -> Option<std::fs::File> {
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(git_dir.join("kdd-hook.lock"))
        .ok()?;
    fs4::FileExt::lock(&f).ok()?;
    Some(f)
}

fn remove_file(paths: &ArtifactPaths, rel: &str) -> Result<(), crate::artifact::Error> {
    let p = paths.abs(rel);
    match std::fs::remove_file(&p) {
        Ok(()) => {
            let mut dir = p.parent();
            while let Some(d) = dir {
                if d == paths.root()
                    || !d.starts_with(paths.root())
                    || std::fs::remove_dir(d).is_err()
                {
                    break;
                }
                dir = d.parent();
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(crate::artifact::Error::Io { path: p, source: e }),
    }
}

/// Remove a node's artifacts from the work tree (used by callers that hold a [`Node`]).
pub fn remove_node(settings: &Settings, node: &Node) -> Result<Vec<String>, Error> {
    Ok(remove_artifacts(
        &ArtifactPaths::new(&settings.index_dir),
        node,
    )?)
}

/// True when `KDD_HOOK=0` disables the hooks.
pub fn disabled() -> bool {
    std::env::var(crate::config::env::HOOK).is_ok_and(|v| v.trim() == "0")
}

/// Directory git runs hooks from (`core.hooksPath`, else `<common dir>/hooks`).
pub fn hooks_dir(settings: &Settings) -> PathBuf {
    match git::config_get(&settings.repo_root, "core.hooksPath") {
        Some(p) => {
            let p = PathBuf::from(p);
            if p.is_absolute() {
                p
            } else {
                settings.repo_root.join(p)
            }
        }
        None => settings.git_common_dir.join("hooks"),
    }
}

/// Path of an installed hook script, if present.
pub fn installed_hook_path(settings: &Settings, name: &str) -> Option<PathBuf> {
    let p = hooks_dir(settings).join(name);
    p.exists().then_some(p)
}

/// Files under `index_dir` containing git conflict markers (relative paths).
pub fn conflict_marker_files(index_dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![index_dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Ok(b) = crate::artifact::read_artifact(&p) {
                if has_conflict_markers(&b) {
                    out.push(
                        p.strip_prefix(index_dir)
                            .unwrap_or(&p)
                            .to_string_lossy()
                            .replace('\\', "/"),
                    );
                }
            }
        }
    }
    out.sort();
    out
}

/// True when `bytes` contain a line starting with a git conflict marker.
pub fn has_conflict_markers(bytes: &[u8]) -> bool {
    bytes
        .split(|b| *b == b'\n')
        .any(|l| l.starts_with(b"<<<<<<< ") || l.starts_with(b">>>>>>> ") || l == b"=======")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stems() {
        assert_eq!(stem_of("nodes/entity/X.json"), Some(("nodes", "entity/X")));
        assert_eq!(
            stem_of("edges/entity/d/X.jsonl"),
            Some(("edges", "entity/d/X"))
        );
        assert_eq!(stem_of("manifest.json"), None);
    }

    #[test]
    fn markers() {
        assert!(has_conflict_markers(b"a\n<<<<<<< HEAD\nb\n"));
        assert!(!has_conflict_markers(b"{\"a\": \"<<<<<<< \"}\n"));
    }
}
