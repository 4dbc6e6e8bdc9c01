//! Ref-level merge of whole indexes (CMD-004, `merge-index.feature`) for a server that receives
//! several developers' branches: per node last-write-wins by the commit time of the commit that
//! last changed that node's spec on each side, delete-wins against the merge base, edge union
//! with cascading removals, embeddings follow the winning node, manifests must be compatible.
//! Node and edge keys this kdd does not know are kept (see `fields.rs`).

use super::{fields, merge_manifests, INCOMPATIBLE};
use crate::artifact::{render_manifest, Manifest};
use crate::git;
use crate::spec::{LinkRecord, Node};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Errors of a ref-level merge.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Merge requires at least 2 source indices")]
    InsufficientSources,
    #[error("No manifest found in {0}:.kdd-index/")]
    ManifestNotFound(String),
    #[error("{0}")]
    Incompatible(String),
    #[error("{rev}:{path}: {message}")]
    Corrupt {
        rev: String,
        path: String,
        message: String,
    },
    #[error(transparent)]
    Git(#[from] git::Error),
}

/// One node's artifacts in one index.
#[derive(Debug, Clone, PartialEq)]
struct Entry {
    node: Node,
    /// Canonical bytes of the node file, keys this kdd does not know included.
    raw: Vec<u8>,
    /// Edge lines (typed part, canonical line with unknown keys).
    links: BTreeSet<(LinkRecord, String)>,
    embedding: Option<Vec<u8>>,
    /// The agent enrichment of this spec (L3), following its node like the embedding.
    enrichment: Option<Vec<u8>>,
}

/// A whole index read from a tree: stem → entry, plus the manifest.
#[derive(Debug, Clone)]
struct Index {
    manifest: Option<Manifest>,
    nodes: BTreeMap<String, Entry>,
}

fn read_index(repo: &gix::Repository, rev: &str) -> Result<Index, Error> {
    index_from_files(rev, read_artifacts(repo, rev)?)
}

/// The artifact files of the `.kdd-index/` of `rev` (path relative to it → bytes). Only
/// artifact paths are read, each bounded by its object header: a tree can hold any blob under
/// `.kdd-index/` (red team, nineteenth round: a 1 GiB blob on a sync ref was inflated whole).
pub fn read_artifacts(repo: &gix::Repository, rev: &str) -> Result<Vec<(String, Vec<u8>)>, Error> {
    let entries = git::tree_entries(repo, rev, crate::artifact::INDEX_DIR)?;
    let mut files = Vec::with_capacity(entries.len());
    let max = crate::artifact::MAX_ARTIFACT_BYTES;
    for (path, id) in &entries {
        let rel = path[crate::artifact::INDEX_DIR.len() + 1..].to_string();
        if !crate::artifact::is_artifact_rel(&rel) {
            continue;
        }
        let Some(bytes) = git::read_blob_within(repo, *id, max)? else {
            return Err(Error::Corrupt {
                rev: rev.to_string(),
                path: path.clone(),
                message: format!("larger than {} MiB, not a kdd artifact", max >> 20),
            });
        };
        files.push((rel, bytes));
    }
    Ok(files)
}

/// Read an index from its files (path relative to `.kdd-index/` → bytes); `name` labels errors.
fn index_from_files(
    name: &str,
    files: impl IntoIterator<Item = (String, Vec<u8>)>,
) -> Result<Index, Error> {
    let corrupt = |path: &str, message: String| Error::Corrupt {
        rev: name.to_string(),
        path: format!("{}/{path}", crate::artifact::INDEX_DIR),
        message,
    };
    let mut manifest = None;
    let mut nodes: BTreeMap<String, Entry> = BTreeMap::new();
    let mut links: BTreeMap<String, BTreeSet<crate::artifact::links::LinkLine>> = BTreeMap::new();
    let mut embeddings: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    let mut enrichments: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    for (rel, bytes) in files {
        let rel = rel.as_str();
        if rel == "manifest.json" {
            manifest = Some(super::parse_manifest(&bytes, name).map_err(|e| corrupt(rel, e))?);
        } else if let Some(stem) = rel
            .strip_prefix("nodes/")
            .and_then(|r| r.strip_suffix(".json"))
        {
            let rec = fields::parse_node(&bytes).map_err(|e| corrupt(rel, e))?;
            nodes.insert(
                stem.to_string(),
                Entry {
                    raw: fields::render_node(&rec),
                    node: rec.known,
                    links: BTreeSet::new(),
                    embedding: None,
                    enrichment: None,
                },
            );
        } else if let Some(stem) = rel
            .strip_prefix("edges/")
            .and_then(|r| r.strip_suffix(".jsonl"))
        {
            let set = super::parse_links(&bytes).map_err(|e| corrupt(rel, e))?;
            links.insert(stem.to_string(), set);
        } else if let Some(stem) = rel
            .strip_prefix("embeddings/")
            .and_then(|r| r.strip_suffix(".bin"))
        {
            embeddings.insert(stem.to_string(), bytes);
        } else if let Some(stem) = rel
            .strip_prefix("enrichments/")
            .and_then(|r| r.strip_suffix(".json"))
        {
            enrichments.insert(stem.to_string(), bytes);
        }
    }
    for (stem, e) in nodes.iter_mut() {
        e.links = links.remove(stem).unwrap_or_default();
        e.embedding = embeddings.remove(stem);
        e.enrichment = enrichments.remove(stem);
    }
    Ok(Index { manifest, nodes })
}

/// A conflict the merge resolved.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Resolved {
    pub node: String,
    /// `last-write-wins` or `delete-wins`.
    pub rule: String,
    /// The ref whose version won (`None` when the node was deleted).
    pub winner: Option<String>,
    pub detail: String,
}

/// What `kdd merge-index` produced.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Report {
    pub refs: Vec<String>,
    pub base: Option<String>,
    pub nodes: usize,
    pub edges: usize,
    pub conflicts_resolved: Vec<Resolved>,
    pub deleted: Vec<String>,
    pub warnings: Vec<String>,
    /// The merged artifacts: path relative to `.kdd-index/` → bytes.
    #[serde(skip)]
    pub files: BTreeMap<String, Vec<u8>>,
}

/// Merge the indexes committed at `revs` (two or more) per BR-MERGE-001.
pub fn merge_refs(repo_dir: &Path, revs: &[String]) -> Result<Report, Error> {
    if revs.len() < 2 {
        return Err(Error::InsufficientSources);
    }
    let repo = git::open(repo_dir)?;
    let mut base_args = vec!["merge-base", "--octopus"];
    base_args.extend(revs.iter().map(String::as_str));
    let base_rev = git::git(repo_dir, &base_args)
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty());
    let base = match &base_rev {
        Some(b) => Some(read_index(&repo, b)?),
        None => None,
    };
    let mut sides = Vec::new();
    for r in revs {
        sides.push(read_index(&repo, r)?);
    }
    // The time of the commit that last changed the spec on that side; a ref that carries only
    // `.kdd-index/` (a sync ref) has no spec, so the node file's last change stands in for it.
    let mut time_of = |i: usize, stem: &str, e: &Entry| -> Result<Option<i64>, Error> {
        let t = git::last_change_time(repo_dir, &revs[i], &e.node.source_file)?;
        if t.is_some() {
            return Ok(t);
        }
        let node_path = format!("{}/nodes/{stem}.json", crate::artifact::INDEX_DIR);
        Ok(git::last_change_time(repo_dir, &revs[i], &node_path)?)
    };
    merge_sides(revs, base_rev, base, sides, &mut time_of)
}

/// Merge whole indexes given as files (path relative to `.kdd-index/` → bytes), with no common
/// ancestor (so nothing is deleted: the union of the nodes, last-write-wins between differing
/// versions by `times[i]`, the time side `i` was written). The API sync server merges the latest
/// push of every source this way; one side is accepted and comes back normalised.
pub fn merge_file_sets(
    names: &[String],
    sets: Vec<BTreeMap<String, Vec<u8>>>,
    times: &[i64],
) -> Result<Report, Error> {
    if sets.is_empty() || sets.len() != names.len() || times.len() != names.len() {
        return Err(Error::InsufficientSources);
    }
    let mut sides = Vec::new();
    for (name, files) in names.iter().zip(sets) {
        sides.push(index_from_files(name, files)?);
    }
    let mut time_of =
        |i: usize, _: &str, _: &Entry| -> Result<Option<i64>, Error> { Ok(Some(times[i])) };
    merge_sides(names, None, None, sides, &mut time_of)
}

/// Time of the last change of one side's node (side index, stem, entry).
type TimeOf<'a> = dyn FnMut(usize, &str, &Entry) -> Result<Option<i64>, Error> + 'a;

/// The one BR-MERGE-001 merge of whole indexes, whatever they were read from.
fn merge_sides(
    revs: &[String],
    base_rev: Option<String>,
    base: Option<Index>,
    sides: Vec<Index>,
    time_of: &mut TimeOf<'_>,
) -> Result<Report, Error> {
    let manifest = fold_manifests(revs, base.as_ref(), &sides)?;
    let mut report = Report {
        refs: revs.to_vec(),
        base: base_rev.clone(),
        nodes: 0,
        edges: 0,
        conflicts_resolved: Vec::new(),
        deleted: Vec::new(),
        warnings: Vec::new(),
        files: BTreeMap::new(),
    };
    let mut stems: BTreeSet<&String> = sides.iter().flat_map(|s| s.nodes.keys()).collect();
    if let Some(b) = &base {
        stems.extend(b.nodes.keys());
    }
    for stem in stems {
        let b = base.as_ref().and_then(|b| b.nodes.get(stem));
        let present: Vec<(usize, &Entry)> = sides
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.nodes.get(stem).map(|e| (i, e)))
            .collect();
        // Delete-wins: in the base, missing on some side.
        if let Some(be) = b {
            if present.len() < sides.len() {
                delete_wins(&mut report, revs, be, &present);
                continue;
            }
        }
        if present.is_empty() {
            continue;
        }
        let (_, we) = pick_winner(&mut report, revs, stem, b, &present, time_of)?;
        emit(&mut report, stem, b, we, &present);
    }
    report
        .files
        .insert("manifest.json".into(), render_manifest(&manifest));
    if let Some((file, inner)) = crate::artifact::path_clash(&report.files) {
        let holder = |rel: &str| {
            let stem = crate::artifact::stem_of(rel).map_or("", |(_, s)| s);
            sides
                .iter()
                .position(|s| s.nodes.contains_key(stem))
                .map_or("?", |i| revs[i].as_str())
        };
        return Err(Error::Corrupt {
            rev: holder(inner).to_string(),
            path: inner.to_string(),
            message: format!(
                "lies inside `{file}` (from {}), which is a file; one of the two specs' ids must \
                 change",
                holder(file)
            ),
        });
    }
    Ok(report)
}

/// Every side's manifest, checked present and pairwise compatible, folded left to right.
fn fold_manifests(
    revs: &[String],
    base: Option<&Index>,
    sides: &[Index],
) -> Result<crate::artifact::Manifest, Error> {
    for (r, idx) in revs.iter().zip(sides) {
        if idx.manifest.is_none() {
            return Err(Error::ManifestNotFound(r.clone()));
        }
    }
    let bm = base.and_then(|b| b.manifest.clone());
    let mut manifest = sides[0].manifest.clone().expect("checked");
    for s in &sides[1..] {
        let m = s.manifest.as_ref().expect("checked");
        if m.structure != manifest.structure {
            return Err(Error::Incompatible(
                "Cannot merge single-domain with multi-domain indices".into(),
            ));
        }
        manifest = merge_manifests(bm.as_ref(), &manifest, m).map_err(Error::Incompatible)?;
    }
    let _ = INCOMPATIBLE;
    Ok(manifest)
}

/// A node of the base that some side deleted: the deletion wins (warned when another side
/// modified it).
fn delete_wins(report: &mut Report, revs: &[String], be: &Entry, present: &[(usize, &Entry)]) {
    let changed: Vec<&str> = present
        .iter()
        .filter(|(_, e)| !crate::spec::same_content(&e.node.source_hash, &be.node.source_hash))
        .map(|(i, _)| revs[*i].as_str())
        .collect();
    if !changed.is_empty() {
        report.warnings.push(format!(
            "{}: deleted on one side but modified on {}; the deletion wins",
            be.node.id,
            changed.join(", ")
        ));
    }
    report.deleted.push(be.node.id.clone());
    if !present.is_empty() {
        report.conflicts_resolved.push(Resolved {
            node: be.node.id.clone(),
            rule: "delete-wins".into(),
            winner: None,
            detail: "deleted on at least one side; its edges and embeddings go too".into(),
        });
    }
}

/// The version of a node that wins: the one side that changed it, else the last write (by the
/// time of the commit that last changed the spec on each side, ties by bytes).
fn pick_winner<'e>(
    report: &mut Report,
    revs: &[String],
    stem: &str,
    b: Option<&Entry>,
    present: &[(usize, &'e Entry)],
    time_of: &mut TimeOf<'_>,
) -> Result<(usize, &'e Entry), Error> {
    // Versions that differ from the base.
    let changed: Vec<(usize, &Entry)> = present
        .iter()
        .filter(|(_, e)| b.is_none_or(|be| *e != be))
        .cloned()
        .collect();
    let distinct: BTreeSet<&str> = changed
        .iter()
        .map(|(_, e)| crate::spec::hash_key(&e.node.source_hash))
        .collect();
    if changed.is_empty() {
        return Ok(present[0]);
    }
    if distinct.len() <= 1 {
        return Ok(changed[0]);
    }
    let mut best: Option<(i64, Vec<u8>, usize, &Entry)> = None;
    for (i, e) in &changed {
        let t = time_of(*i, stem, e)?.unwrap_or(i64::MIN);
        let bytes = e.raw.clone();
        let better = match &best {
            None => true,
            Some((bt, bb, _, _)) => t > *bt || (t == *bt && bytes < *bb),
        };
        if better {
            best = Some((t, bytes, *i, e));
        }
    }
    let (t, _, i, e) = best.expect("at least two changed versions");
    report.conflicts_resolved.push(Resolved {
        node: e.node.id.clone(),
        rule: "last-write-wins".into(),
        winner: Some(revs[i].clone()),
        detail: format!(
            "{} versions; {} changed {} last (commit time {t})",
            distinct.len(),
            revs[i],
            e.node.source_file
        ),
    });
    Ok((i, e))
}

/// The merged files of one node: the winner's node and vectors, the union of the sides' links
/// minus those a side removed relative to the base, and the merged enrichments.
fn emit(
    report: &mut Report,
    stem: &str,
    b: Option<&Entry>,
    we: &Entry,
    present: &[(usize, &Entry)],
) {
    let mut links: BTreeSet<crate::artifact::links::LinkLine> = present
        .iter()
        .flat_map(|(_, e)| e.links.iter().cloned())
        .collect();
    if let Some(be) = b {
        for l in &be.links {
            if present.iter().any(|(_, e)| !e.links.contains(l)) {
                links.remove(l);
            }
        }
    }
    let edges = super::render_link_lines(links.iter());
    report.nodes += 1;
    report.edges += links.iter().map(|(l, _)| l).collect::<BTreeSet<_>>().len();
    report
        .files
        .insert(format!("nodes/{stem}.json"), we.raw.clone());
    report.files.insert(format!("edges/{stem}.jsonl"), edges);
    if let Some(emb) = &we.embedding {
        report
            .files
            .insert(format!("embeddings/{stem}.bin"), emb.clone());
    }
    // Enrichments: every side's entries, minus those a side removed relative to the base
    // (the driver's rule); readers pick the entry whose hash matches the spec.
    let base_enr = b.and_then(|be| be.enrichment.as_deref());
    let mut enr: Option<Vec<u8>> = None;
    for (_, e) in present {
        let Some(theirs) = e.enrichment.as_deref() else {
            continue;
        };
        enr = Some(match enr {
            None => theirs.to_vec(),
            Some(acc) => {
                crate::artifact::enrichment::merge_enrichment(base_enr, &acc, theirs).unwrap_or(acc)
            }
        });
    }
    if let Some(bytes) = enr {
        report
            .files
            .insert(format!("enrichments/{stem}.json"), bytes);
    }
}
