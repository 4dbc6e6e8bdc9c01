//! Building and incrementally updating the cache from `.kdd-index/` plus the spec files.
//!
//! Artifacts hold only identity, links and vectors, so searchable text is re-derived by parsing
//! each spec again (same tree) and checked against the node's `source_hash`. Only specs whose
//! artifact files changed (size or mtime) are re-read, re-parsed and re-indexed; global link
//! resolution is then redone over the stored (node, links) pairs, which is cheap; the agent's
//! edges (L3, `agent.rs`) are added to it.

use super::resolve::KeyRank;
use super::scan::{load_vectors, scan, LoadedVector, Stamps};
use super::store::{lm, Edge, FileStamp, NodeRecord, SectionText, Store};
use super::text::{LangTally, TextIndex};
use super::Error;
use super::Orphan;
use crate::artifact::{read_links, read_node};
use crate::spec::{IndexedFields, Node};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Stamps of the artifact files of one spec.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StemStamp {
    pub node_id: String,
    pub node: FileStamp,
    pub edges: Option<FileStamp>,
    pub emb: Option<FileStamp>,
}

/// Figures of one build or update.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BuildStats {
    pub full: bool,
    pub added: usize,
    pub updated: usize,
    pub removed: usize,
    pub nodes: usize,
    pub edges: usize,
    pub stale_specs: Vec<String>,
    pub errors: Vec<String>,
    pub millis: u64,
}

/// A spec's record and vectors, or why it could not be loaded.
type Loaded = Result<(NodeRecord, Vec<LoadedVector>), String>;

/// Re-derive a spec's sections and indexed fields from its bytes (core's extractor; a plain
/// heading splitter when the file cannot be extracted at all).
pub fn parse_spec(rel: &str, bytes: &[u8], specs_root: &str) -> (IndexedFields, Vec<SectionText>) {
    let (f, s, _) = parse_spec_full(rel, bytes, specs_root);
    (f, s)
}

/// [`parse_spec`] plus the extraction itself (for re-chunking vectors).
fn parse_spec_full(
    rel: &str,
    bytes: &[u8],
    specs_root: &str,
) -> (
    IndexedFields,
    Vec<SectionText>,
    Option<crate::spec::Extracted>,
) {
    match crate::extract::extract(rel, bytes, specs_root) {
        Ok(x) => {
            let sections = x
                .sections
                .iter()
                .map(|s| SectionText {
                    heading: s.heading.clone(),
                    key: s.key.clone(),
                    level: s.level,
                    ancestors: s.ancestors.clone(),
                    text: s.text(),
                    line: s.line,
                })
                .collect();
            (x.fields.clone(), sections, Some(x))
        }
        Err(_) => {
            let text = String::from_utf8_lossy(bytes);
            let (f, s) = fallback_sections(rel, &text);
            (f, s, None)
        }
    }
}

/// A small CommonMark-aware splitter used for the searchable text: headings outside code fences
/// start sections, front matter is skipped, wiki-links keep their display text.
fn fallback_sections(rel: &str, text: &str) -> (IndexedFields, Vec<SectionText>) {
    let mut body = text;
    if let Some(rest) = text.strip_prefix("---") {
        if let Some(end) = rest.find("\n---") {
            let after = &rest[end + 4..];
            body = after.split_once('\n').map(|(_, b)| b).unwrap_or("");
        }
    }
    let feature = rel.ends_with(".feature");
    let mut sections: Vec<SectionText> = Vec::new();
    let mut cur = SectionText {
        heading: String::new(),
        key: None,
        level: 0,
        ancestors: Vec::new(),
        text: String::new(),
        line: 1,
    };
    let mut stack: Vec<(u8, String)> = Vec::new();
    let mut fence: Option<&str> = None;
    let fm_lines = text[..text.len() - body.len()].lines().count();
    for (i, line) in body.lines().enumerate() {
        let t = line.trim_start();
        if let Some(f) = fence {
            if t.starts_with(f) {
                fence = None;
                continue;
            }
            cur.text.push_str(line);
            cur.text.push('\n');
            continue;
        }
        if t.starts_with("```") || t.starts_with("~~~") {
            fence = Some(if t.starts_with("```") { "```" } else { "~~~" });
            continue;
        }
        let heading = if feature {
            let lw = t.to_ascii_lowercase();
            [
                "feature:",
                "scenario:",
                "scenario outline:",
                "background:",
                "escenario:",
                "característica:",
            ]
            .iter()
            .find(|p| lw.starts_with(*p))
            .map(|_| (if lw.starts_with("feature") { 1 } else { 2 }, t.to_string()))
        } else {
            let hashes = t.chars().take_while(|c| *c == '#').count();
            if (1..=6).contains(&hashes) && t[hashes..].starts_with(' ') {
                Some((
                    hashes as u8,
                    t[hashes..].trim().trim_end_matches('#').trim().to_string(),
                ))
            } else {
                None
            }
        };
        if let Some((level, h)) = heading {
            sections.push(std::mem::replace(
                &mut cur,
                SectionText {
                    heading: strip_links(&h),
                    key: None,
                    level,
                    ancestors: Vec::new(),
                    text: String::new(),
                    line: fm_lines + i + 1,
                },
            ));
            while stack.last().is_some_and(|(l, _)| *l >= level) {
                stack.pop();
            }
            cur.ancestors = stack.iter().skip(1).map(|(_, h)| h.clone()).collect();
            stack.push((level, strip_links(&h)));
            continue;
        }
        cur.text.push_str(&strip_links(line));
        cur.text.push('\n');
    }
    sections.push(cur);
    sections.retain(|s| !(s.heading.is_empty() && s.text.trim().is_empty()));
    for s in &mut sections {
        s.text = s.text.trim().to_string();
    }
    (IndexedFields::new(), sections)
}

/// `[[Target|alias]]` → `alias`, `[[Target]]` → `Target`, `[[d::T]]` → `T`.
pub fn strip_links(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find("[[") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        match after.find("]]") {
            Some(j) => {
                let inner = &after[..j];
                let shown = inner.rsplit('|').next().unwrap_or(inner);
                let shown = shown.rsplit("::").next().unwrap_or(shown);
                let shown = shown.split('#').next().unwrap_or(shown);
                out.push_str(shown);
                rest = &after[j + 2..];
            }
            None => {
                out.push_str(&rest[i..]);
                rest = "";
            }
        }
    }
    out.push_str(rest);
    out
}

/// Load one spec's record from its artifacts and its source file.
fn load_record(
    index_dir: &Path,
    repo_root: &Path,
    roots: &crate::roots::Roots,
    stem: &str,
) -> Result<(NodeRecord, Vec<LoadedVector>), String> {
    let node_path = index_dir.join("nodes").join(format!("{stem}.json"));
    let node: Node = read_node(&node_path).map_err(|e| e.to_string())?;
    let links = read_links(&index_dir.join("edges").join(format!("{stem}.jsonl")))
        .map_err(|e| e.to_string())?;
    // The committed `source_file` is checked and read under the one rule (`crate::source`):
    // never an absolute path, `..`, a link or a device; anything else is a stale node.
    let bytes = crate::roots::read_source(repo_root, &node.source_file, roots);
    let (fields, sections, stale, extracted) = match bytes {
        Ok(bytes) => {
            let stale =
                !crate::spec::same_content(&crate::spec::content_hash(&bytes), &node.source_hash);
            let (f, s, x) = parse_spec_full(&node.source_file, &bytes, &roots.specs);
            (f, s, stale, x)
        }
        Err(_) => (IndexedFields::new(), Vec::new(), true, None),
    };
    let mut lang = LangTally::default();
    for sec in &sections {
        lang.add(LangTally::of(&sec.heading));
        lang.add(LangTally::of(&sec.text));
    }
    let mut vectors = load_vectors(
        &index_dir.join("embeddings").join(format!("{stem}.bin")),
        &node.id,
        extracted.as_ref(),
    )?;
    let mut rec = NodeRecord {
        links,
        stale,
        stem: stem.to_string(),
        lang,
        fields,
        sections,
        ..NodeRecord::brief(node)
    };
    super::agent::attach(index_dir, stem, &mut rec, &mut vectors);
    Ok((rec, vectors))
}

/// Resolve every link globally with core's resolver ([`crate::graph::Graph`]): typed edges
/// (no self-loops; a generic `WIKI_LINK` is dropped when a typed edge joins the same pair) and
/// orphans.
pub fn resolve_graph(srcs: &[(Node, Vec<crate::spec::LinkRecord>)]) -> (Vec<Edge>, Vec<Orphan>) {
    let g = crate::graph::Graph::build(
        srcs.iter().map(|(n, _)| n.clone()).collect(),
        srcs.iter()
            .map(|(n, l)| (n.id.clone(), l.clone()))
            .collect(),
    );
    let typed: BTreeSet<(&str, &str)> = g
        .edges
        .iter()
        .filter(|e| e.edge_type != "WIKI_LINK")
        .map(|e| (e.from.as_str(), e.to.as_str()))
        .collect();
    let edges: Vec<Edge> = g
        .edges
        .iter()
        .filter(|e| {
            e.edge_type != "WIKI_LINK" || !typed.contains(&(e.from.as_str(), e.to.as_str()))
        })
        .map(|e| Edge {
            from: e.from.clone(),
            to: e.to.clone(),
            edge_type: e.edge_type.clone(),
            violation: e.layer_violation,
            agent: false,
        })
        .collect();
    // One orphan per link as written: a typed record and its generic twin are the same link.
    let typed_orphans: BTreeSet<(&str, &str)> = g
        .orphans
        .iter()
        .filter(|o| o.edge_type != "WIKI_LINK")
        .map(|o| (o.from.as_str(), o.to.as_str()))
        .collect();
    let orphans = g
        .orphans
        .iter()
        .filter(|o| {
            o.edge_type != "WIKI_LINK" || !typed_orphans.contains(&(o.from.as_str(), o.to.as_str()))
        })
        .map(|o| Orphan {
            from_node: o.from.clone(),
            to: o.to.clone(),
            edge_type: o.edge_type.clone(),
            source_file: o.source_file.clone(),
        })
        .collect();
    (edges, orphans)
}

fn manifest_dims(index_dir: &Path) -> Option<usize> {
    let m = crate::artifact::read_manifest(&index_dir.join("manifest.json")).ok()?;
    if m.index_level < crate::artifact::IndexLevel::L2 {
        return None;
    }
    m.embedding
        .map(|e| e.dimensions as usize)
        .filter(|d| *d > 0)
}

fn w_dims(d: Option<usize>) -> usize {
    d.unwrap_or(0)
}

/// Remove a node's vector items (and their chunk refs). True when something was removed.
fn drop_items(
    store: &Store,
    wtxn: &mut heed::RwTxn,
    w: Option<&arroy::Writer<arroy::distances::Cosine>>,
    node_id: &str,
) -> Result<bool, Error> {
    let Some(rec) = store.nodes.get(wtxn, node_id).map_err(lm)? else {
        return Ok(false);
    };
    let mut any = false;
    for item in rec.items {
        if let Some(w) = w {
            w.del_item(wtxn, item)
                .map_err(|e| Error::Corrupt(format!("vectors: {e}")))?;
        }
        store.chunks.delete(wtxn, &item).map_err(lm)?;
        any = true;
    }
    Ok(any)
}

/// Bring the store and text index up to date with the artifacts. `full` clears everything first.
pub fn update(
    store: &Store,
    text: &TextIndex,
    index_dir: &Path,
    repo_root: &Path,
    roots: &crate::roots::Roots,
    full: bool,
) -> Result<BuildStats, Error> {
    let t0 = std::time::Instant::now();
    let mut stats = BuildStats {
        full,
        ..BuildStats::default()
    };
    let current = scan(index_dir);
    let mut wtxn = store.wtxn()?;
    if full {
        for db in [store.fwd, store.rev] {
            db.clear(&mut wtxn).map_err(lm)?;
        }
        store.nodes.clear(&mut wtxn).map_err(lm)?;
        store.lite.clear(&mut wtxn).map_err(lm)?;
        store.names.clear(&mut wtxn).map_err(lm)?;
        store.files.clear(&mut wtxn).map_err(lm)?;
        store.chunks.clear(&mut wtxn).map_err(lm)?;
        store.meta.clear(&mut wtxn).map_err(lm)?;
    }
    let files = store
        .files
        .remap_data_type::<heed::types::SerdeJson<StemStamp>>();
    let mut old: BTreeMap<String, StemStamp> = BTreeMap::new();
    for kv in files.iter(&wtxn).map_err(lm)? {
        let (k, v) = kv.map_err(lm)?;
        old.insert(k.to_string(), v);
    }
    // Vectors (arroy, index 0) for L2 indexes.
    let dims = manifest_dims(index_dir);
    let vwriter = dims.map(|d| arroy::Writer::<arroy::distances::Cosine>::new(store.vectors, 0, d));
    if let (true, Some(w)) = (full, &vwriter) {
        w.clear(&mut wtxn)
            .map_err(|e| Error::Corrupt(format!("vectors: {e}")))?;
    }
    let mut next_item: u32 = if full {
        0
    } else {
        store.get_meta(&wtxn, "next_item")?.unwrap_or(0)
    };
    let mut vectors_changed = full && vwriter.is_some();
    let writer = text.writer()?;
    if full {
        writer
            .delete_all_documents()
            .map_err(|e| Error::Corrupt(format!("text index: {e}")))?;
    }
    // Removed specs.
    for (stem, st) in &old {
        if !current.contains_key(stem) {
            vectors_changed |= drop_items(store, &mut wtxn, vwriter.as_ref(), &st.node_id)?;
            store.nodes.delete(&mut wtxn, &st.node_id).map_err(lm)?;
            files.delete(&mut wtxn, stem).map_err(lm)?;
            text.delete_node(&writer, &st.node_id);
            stats.removed += 1;
        }
    }
    // Added or changed specs: read and parse in parallel, write sequentially.
    let todo: Vec<(&String, &Stamps)> = current
        .iter()
        .filter(|(stem, (n, e, v))| match old.get(*stem) {
            Some(o) => o.node != *n || o.edges != *e || o.emb != *v,
            None => true,
        })
        .collect();
    use rayon::prelude::*;
    let loaded: Vec<(String, Loaded)> = todo
        .par_iter()
        .map(|(stem, _)| {
            (
                (*stem).clone(),
                load_record(index_dir, repo_root, roots, stem),
            )
        })
        .collect();
    for (stem, rec) in loaded {
        let (n, e, v) = current[&stem];
        if let Some(o) = old.get(&stem) {
            vectors_changed |= drop_items(store, &mut wtxn, vwriter.as_ref(), &o.node_id)?;
            store.nodes.delete(&mut wtxn, &o.node_id).map_err(lm)?;
            text.delete_node(&writer, &o.node_id);
            stats.updated += 1;
        } else {
            stats.added += 1;
        }
        match rec {
            Ok((mut rec, vecs)) => {
                if let Some(w) = &vwriter {
                    vectors_changed |= drop_items(store, &mut wtxn, Some(w), &rec.node.id)?;
                    for lv in vecs {
                        if lv.vector.len() != w_dims(dims) {
                            stats.errors.push(format!(
                                "{}: vectors have {} dimensions, the manifest says {}; run `kdd index` to re-embed",
                                rec.node.source_file,
                                lv.vector.len(),
                                w_dims(dims)
                            ));
                            break;
                        }
                        w.add_item(&mut wtxn, next_item, &lv.vector)
                            .map_err(|e| Error::Corrupt(format!("vectors: {e}")))?;
                        store
                            .chunks
                            .put(&mut wtxn, &next_item, &lv.chunk)
                            .map_err(lm)?;
                        rec.items.push(next_item);
                        next_item += 1;
                        vectors_changed = true;
                    }
                }
                text.delete_node(&writer, &rec.node.id);
                text.add_node(&writer, &rec)?;
                store.nodes.put(&mut wtxn, &rec.node.id, &rec).map_err(lm)?;
                files
                    .put(
                        &mut wtxn,
                        &stem,
                        &StemStamp {
                            node_id: rec.node.id.clone(),
                            node: n,
                            edges: e,
                            emb: v,
                        },
                    )
                    .map_err(lm)?;
            }
            Err(msg) => {
                stats.errors.push(msg);
                files.delete(&mut wtxn, &stem).map_err(lm)?;
            }
        }
    }
    // Global resolution over all (node, links).
    let mut srcs: Vec<(Node, Vec<crate::spec::LinkRecord>)> = Vec::new();
    let (mut lang, mut agent) = (LangTally::default(), Vec::new());
    for kv in store.nodes.iter(&wtxn).map_err(lm)? {
        let (_, rec) = kv.map_err(lm)?;
        lang.add(rec.lang);
        agent.extend(super::agent::relations(&rec));
        stats.errors.extend(super::agent::error(&rec));
        if rec.stale {
            stats.stale_specs.push(rec.node.source_file.clone());
        }
        srcs.push((rec.node, rec.links));
    }
    let (mut edges, orphans) = resolve_graph(&srcs);
    let ids = srcs.iter().map(|(n, _)| n.id.as_str()).collect();
    super::agent::add_edges(&mut edges, &agent, &ids);
    store.fwd.clear(&mut wtxn).map_err(lm)?;
    store.rev.clear(&mut wtxn).map_err(lm)?;
    let mut fwd: BTreeMap<&str, Vec<Edge>> = BTreeMap::new();
    let mut rev: BTreeMap<&str, Vec<Edge>> = BTreeMap::new();
    for e in &edges {
        fwd.entry(e.from.as_str()).or_default().push(e.clone());
        rev.entry(e.to.as_str()).or_default().push(e.clone());
    }
    for (k, v) in &fwd {
        store.fwd.put(&mut wtxn, k, v).map_err(lm)?;
    }
    for (k, v) in &rev {
        store.rev.put(&mut wtxn, k, v).map_err(lm)?;
    }
    store.lite.clear(&mut wtxn).map_err(lm)?;
    for (n, _) in &srcs {
        let lite = super::store::NodeLite {
            node: n.clone(),
            in_degree: rev.get(n.id.as_str()).map_or(0, |v| v.len() as u32),
            out_degree: fwd.get(n.id.as_str()).map_or(0, |v| v.len() as u32),
        };
        store.lite.put(&mut wtxn, &n.id, &lite).map_err(lm)?;
    }
    store.names.clear(&mut wtxn).map_err(lm)?;
    let mut names: BTreeMap<String, Vec<(KeyRank, String)>> = BTreeMap::new();
    for (n, _) in &srcs {
        for (k, r) in super::resolve::node_keys(n) {
            names.entry(k).or_default().push((r, n.id.clone()));
        }
    }
    for (k, mut v) in names {
        v.sort();
        v.dedup();
        store.names.put(&mut wtxn, &k, &v).map_err(lm)?;
    }
    let violations: Vec<&Edge> = edges.iter().filter(|e| e.violation).collect();
    if let (true, Some(w)) = (vectors_changed, &vwriter) {
        use rand::SeedableRng;
        let mut rng = rand::rngs::StdRng::seed_from_u64(0x6b6464);
        w.builder(&mut rng)
            .build(&mut wtxn)
            .map_err(|e| Error::Corrupt(format!("vector index build: {e}")))?;
    }
    store.put_meta(&mut wtxn, "next_item", &next_item)?;
    store.put_meta(&mut wtxn, "orphans", &orphans)?;
    store.put_meta(&mut wtxn, "violations", &violations)?;
    store.put_meta(&mut wtxn, "edge_count", &edges.len())?;
    store.put_meta(&mut wtxn, "lang", &lang)?;
    store.put_meta(&mut wtxn, "link_count", &(edges.len() + orphans.len()))?;
    stats.nodes = srcs.len();
    stats.edges = edges.len();
    stats.stale_specs.sort();
    text.commit(writer)?;
    stats.millis = t0.elapsed().as_millis() as u64;
    store.put_meta(&mut wtxn, "stats", &stats)?;
    wtxn.commit().map_err(lm)?;
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sections_skip_fences_and_front_matter() {
        let (_, s) = fallback_sections(
            "specs/x.md",
            "---\nid: X\n---\n# Title\n\nIntro [[Pedido|el pedido]].\n\n## Flujo\n\n```yaml\n# not a heading\n```\n\n### Paso\n\ntexto\n",
        );
        let heads: Vec<&str> = s.iter().map(|s| s.heading.as_str()).collect();
        assert_eq!(heads, vec!["Title", "Flujo", "Paso"]);
        assert_eq!(s[0].text, "Intro el pedido.");
        assert_eq!(s[2].ancestors, vec!["Flujo".to_string()]);
        assert_eq!(s[0].line, 4);
    }
}
