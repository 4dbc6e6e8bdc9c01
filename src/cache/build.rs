//! Building and incrementally updating the cache from `.kdd-index/` plus the spec files.
//!
//! Artifacts hold only identity, links and vectors, so searchable text is re-derived by parsing
//! each spec again (`parse.rs`, same tree) and checked against the node's `source_hash`. Only
//! specs whose artifact files changed (size or mtime) are re-read, re-parsed and re-indexed
//! (LMDB record, tantivy documents and vector items of those specs only, see `vectors.rs`:
//! arroy's trees are rebuilt only once enough items changed); then only the links
//! whose source or target changed are resolved again (`links.rs`), with the agent's edges (L3,
//! `agent.rs`). A full build is the same sequence over empty tables.

use super::indexed::Versions;
use super::links::{Delta, Slim};
use super::parse::parse_spec_full;
pub use super::parse::{parse_spec, strip_links};
use super::scan::{folder_of, load_vectors, scan_since, DirStamps, LoadedVector, Scan, Stamps};
use super::store::{lm, Edge, FileStamp, NodeRecord, Store};
use super::text::{LangTally, TextIndex};
use super::vectors::Vectors;
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
    /// Vector items changed since arroy's trees were last built (`vectors.rs`).
    #[serde(default)]
    pub pending_vectors: u64,
    /// Microseconds per step (`scan`, `records`, `links`, `vectors`, `text`), for benchmarks.
    #[serde(default)]
    pub steps_us: BTreeMap<String, u64>,
}

/// Why a spec's links or vectors could not be read: the spec is kept without them.
#[derive(Debug, Default)]
struct Problems {
    links: Option<String>,
    vectors: Option<String>,
}

/// The paths a sparse checkout leaves out, read once per update and only when a spec is missing.
type LeftOut = std::sync::OnceLock<crate::git::roots::LeftOut>;

/// A spec's record, its vectors and what of its artifacts could not be read, or why the spec
/// could not be loaded at all.
type Loaded = Result<(NodeRecord, Vec<LoadedVector>, Problems), String>;

/// Load one spec's record from its artifacts and its source file.
fn load_record(
    index_dir: &Path,
    (repo_root, left_out, versions): (&Path, &LeftOut, &Versions),
    roots: &crate::roots::Roots,
    stem: &str,
) -> Loaded {
    let node_path = index_dir.join("nodes").join(format!("{stem}.json"));
    let node: Node = read_node(&node_path).map_err(|e| e.to_string())?;
    // kdd never writes a node whose `source_file` is not a spec path (`..`, absolute, outside
    // the specs root): such a committed node is crafted, and is left out rather than listed
    // as a stale spec under that path.
    let rel = crate::roots::check_source(&node.source_file, roots).map_err(|e| {
        let at = format!("{}/nodes/{stem}.json", crate::paths::INDEX_DIR);
        format!("{at}: node left out; its source_file {e}")
    })?;
    // An unreadable edges file (crafted: kdd writes none over the link cap) costs the spec its
    // links, not its place in the graph and the text index.
    let (links, links_problem) =
        match read_links(&index_dir.join("edges").join(format!("{stem}.jsonl"))) {
            Ok(l) => (l, None),
            Err(e) => (
                Vec::new(),
                Some(format!("{e}; the spec is kept without its links")),
            ),
        };
    // The checked path is read under the one rule (`crate::source`): never a link or a device;
    // a spec that cannot be read is a stale node.
    let bytes = crate::source::read_checked(repo_root, &rel);
    // A spec edited since it was indexed is read as git holds its indexed version
    // (`indexed.rs`): the text never depends on uncommitted edits or conflict markers.
    let indexed = |now: Option<&[u8]>| {
        let same =
            |b: &[u8]| crate::spec::same_content(&crate::spec::content_hash(b), &node.source_hash);
        match now {
            Some(b) if same(b) => None,
            _ => versions.find(&rel, &node.source_hash),
        }
    };
    let bytes = match bytes {
        Ok(b) => Ok(indexed(Some(&b)).unwrap_or(b)),
        Err(e) => indexed(None).ok_or(e),
    };
    let (fields, sections, stale, extracted) = match bytes {
        Ok(bytes) => {
            let stale =
                !crate::spec::same_content(&crate::spec::content_hash(&bytes), &node.source_hash);
            let (f, s, x) = parse_spec_full(&node.source_file, &bytes, &roots.specs);
            (f, s, stale, x)
        }
        // A spec a sparse checkout leaves out is committed as indexed: not stale.
        Err(crate::source::Error::Io { .. })
            if left_out
                .get_or_init(|| crate::git::roots::LeftOut::read(repo_root))
                .holds(&node.source_file) =>
        {
            (IndexedFields::new(), Vec::new(), false, None)
        }
        Err(_) => (IndexedFields::new(), Vec::new(), true, None),
    };
    let mut lang = LangTally::default();
    for sec in &sections {
        lang.add(LangTally::of(&sec.heading));
        lang.add(LangTally::of(&sec.text));
    }
    // An unreadable vector file costs the spec its vectors, not its place in the graph and the
    // text index.
    let (mut vectors, vector_problem) = match load_vectors(
        &index_dir.join("embeddings").join(format!("{stem}.bin")),
        &node.id,
        extracted.as_ref(),
    ) {
        Ok(v) => (v, None),
        Err(e) => (Vec::new(), Some(e)),
    };
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
    let problems = Problems {
        links: links_problem,
        vectors: vector_problem,
    };
    Ok((rec, vectors, problems))
}

/// Resolve the links of `sources` with core's resolver ([`crate::graph::Graph`]) over `nodes`
/// (all nodes, or every node under the sources' probe keys: the same answer, see
/// [`crate::graph::lookup_keys`]): typed edges (no self-loops; a generic `WIKI_LINK` is dropped
/// when a typed edge joins the same pair) and orphans, both sorted by source.
pub fn resolve_graph(
    nodes: Vec<Node>,
    sources: Vec<(String, Vec<crate::spec::LinkRecord>)>,
) -> (Vec<Edge>, Vec<Orphan>) {
    let g = crate::graph::Graph::build(nodes, sources);
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

type StampDb = heed::Database<'static, heed::types::Str, heed::types::SerdeJson<StemStamp>>;

/// One update in progress: the stores, the text writer, the vectors and what changed.
struct Step<'a> {
    store: &'a Store,
    text: &'a TextIndex,
    writer: tantivy::IndexWriter<tantivy::TantivyDocument>,
    files: StampDb,
    vec: Vectors,
    delta: Delta,
    stats: BuildStats,
}

fn clear_all(store: &Store, wtxn: &mut heed::RwTxn) -> Result<(), Error> {
    for db in [store.fwd, store.rev] {
        db.clear(wtxn).map_err(lm)?;
    }
    for db in [store.keys, store.lkeys, store.paths] {
        db.clear(wtxn).map_err(lm)?;
    }
    store.nodes.clear(wtxn).map_err(lm)?;
    store.lite.clear(wtxn).map_err(lm)?;
    store.names.clear(wtxn).map_err(lm)?;
    store.files.clear(wtxn).map_err(lm)?;
    store.chunks.clear(wtxn).map_err(lm)?;
    store.meta.clear(wtxn).map_err(lm)
}

impl Step<'_> {
    /// Forget the stored version of `node_id` everywhere (record, vectors, text documents); it
    /// joins the delta's old versions for the link step.
    fn forget(&mut self, wtxn: &mut heed::RwTxn, node_id: &str) -> Result<(), Error> {
        self.text.delete_node(&self.writer, node_id);
        let Some(rec) = self.store.nodes.get(wtxn, node_id).map_err(lm)? else {
            return Ok(());
        };
        self.vec.drop_items(self.store, wtxn, &rec.items)?;
        self.store.nodes.delete(wtxn, node_id).map_err(lm)?;
        self.delta.old.push(Slim::of(&rec));
        Ok(())
    }

    /// Specs whose artifacts are gone.
    fn remove_gone(
        &mut self,
        wtxn: &mut heed::RwTxn,
        old: &BTreeMap<String, StemStamp>,
        current: &BTreeMap<String, Stamps>,
    ) -> Result<(), Error> {
        for (stem, st) in old {
            if !current.contains_key(stem) {
                self.forget(wtxn, &st.node_id)?;
                self.files.delete(wtxn, stem).map_err(lm)?;
                self.stats.removed += 1;
            }
        }
        Ok(())
    }

    /// Store one re-loaded spec (replacing its old version) or report why it could not load.
    fn write_loaded(
        &mut self,
        wtxn: &mut heed::RwTxn,
        stem: &str,
        stamps: Stamps,
        old: Option<&StemStamp>,
        rec: Loaded,
    ) -> Result<(), Error> {
        if let Some(o) = old {
            self.forget(wtxn, &o.node_id)?;
            self.stats.updated += 1;
        } else {
            self.stats.added += 1;
        }
        let (mut rec, vecs, problems) = match rec {
            Ok(x) => x,
            Err(msg) => {
                self.stats.errors.push(msg);
                self.files.delete(wtxn, stem).map_err(lm)?;
                return Ok(());
            }
        };
        // Another spec may hold the same id (a merge can do that): the last one loaded wins.
        self.forget(wtxn, &rec.node.id)?;
        self.vec
            .add(self.store, wtxn, &mut rec, vecs, &mut self.stats.errors)?;
        self.text.add_node(&self.writer, &rec)?;
        self.store.nodes.put(wtxn, &rec.node.id, &rec).map_err(lm)?;
        let (node, edges, emb) = stamps;
        // A spec kept without its unreadable links or vectors is stamped as if that file were
        // new, so every update reads it again and reports it until it is fixed.
        let mut unread = |problem: Option<String>, stamp| match problem {
            Some(p) => {
                self.stats.errors.push(p);
                None
            }
            None => stamp,
        };
        let edges = unread(problems.links, edges);
        let emb = unread(problems.vectors, emb);
        let stamp = StemStamp {
            node_id: rec.node.id.clone(),
            node,
            edges,
            emb,
        };
        self.files.put(wtxn, stem, &stamp).map_err(lm)?;
        self.delta.new.push(Slim::of(&rec));
        Ok(())
    }
}

/// Specs whose artifacts are new or changed, read and parsed in parallel.
fn load_changed(
    index_dir: &Path,
    repo_root: &Path,
    roots: &crate::roots::Roots,
    old: &BTreeMap<String, StemStamp>,
    current: &BTreeMap<String, Stamps>,
) -> Vec<(String, Loaded)> {
    use rayon::prelude::*;
    let todo: Vec<&String> = current
        .iter()
        .filter(|(stem, (n, e, v))| match old.get(*stem) {
            Some(o) => o.node != *n || o.edges != *e || o.emb != *v,
            None => true,
        })
        .map(|(stem, _)| stem)
        .collect();
    let left_out = LeftOut::new();
    let versions = Versions::new(repo_root);
    todo.par_iter()
        .map(|stem| {
            let rec = load_record(index_dir, (repo_root, &left_out, &versions), roots, stem);
            ((*stem).clone(), rec)
        })
        .collect()
}

/// The stored stamps of the stems in the folders `read` (the other folders did not change).
fn old_stamps(
    files: StampDb,
    wtxn: &heed::RwTxn,
    read: &BTreeSet<String>,
) -> Result<BTreeMap<String, StemStamp>, Error> {
    let mut old = BTreeMap::new();
    let mut keep = |kv: heed::Result<(&str, StemStamp)>| -> Result<(), Error> {
        let (k, v) = kv.map_err(lm)?;
        if read.contains(folder_of(k)) {
            old.insert(k.to_string(), v);
        }
        Ok(())
    };
    if read.contains("") {
        for kv in files.iter(wtxn).map_err(lm)? {
            keep(kv)?;
        }
    } else {
        for folder in read {
            for kv in files.prefix_iter(wtxn, &format!("{folder}/")).map_err(lm)? {
                keep(kv)?;
            }
        }
    }
    Ok(old)
}

/// Time of each step since the previous one.
struct Lap(std::time::Instant, BTreeMap<String, u64>);

impl Lap {
    fn done(&mut self, step: &str) {
        let now = std::time::Instant::now();
        self.1
            .insert(step.to_string(), (now - self.0).as_micros() as u64);
        self.0 = now;
    }
}

/// Bring the store and text index up to date with the artifacts, in named steps: stamps →
/// removed specs → changed specs (records, vectors, text) → links (`links.rs`, proportional to
/// the change) → vectors → commit. `full` clears everything first.
pub fn update(
    store: &Store,
    text: &TextIndex,
    index_dir: &Path,
    repo_root: &Path,
    roots: &crate::roots::Roots,
    full: bool,
    memo: Option<&Path>,
) -> Result<BuildStats, Error> {
    let t0 = std::time::Instant::now();
    let mut lap = Lap(t0, BTreeMap::new());
    let mut wtxn = store.wtxn()?;
    if full {
        clear_all(store, &mut wtxn)?;
    }
    let mut prev: DirStamps = store.get_meta(&wtxn, "scan_dirs")?.unwrap_or_default();
    // Stale records whose spec file moved are read again (`watch.rs`).
    let moved = super::watch::moved(store, &wtxn, repo_root);
    super::watch::reload(store, &mut wtxn, &mut prev, &moved)?;
    let Scan {
        stems: current,
        read,
        dirs,
    } = scan_since(index_dir, &prev);
    let files = store
        .files
        .remap_data_type::<heed::types::SerdeJson<StemStamp>>();
    let old = old_stamps(files, &wtxn, &read)?;
    lap.done("scan");
    let mut step = Step {
        store,
        text,
        writer: text.writer()?,
        files,
        vec: Vectors::open(store, &mut wtxn, manifest_dims(index_dir), full)?,
        delta: Delta::default(),
        stats: BuildStats {
            full,
            ..BuildStats::default()
        },
    };
    if full {
        step.writer
            .delete_all_documents()
            .map_err(|e| Error::Corrupt(format!("text index: {e}")))?;
    }
    step.remove_gone(&mut wtxn, &old, &current)?;
    let mut loaded = load_changed(index_dir, repo_root, roots, &old, &current);
    let mut tr = super::doctr::DocTranslator::new(memo);
    let mut recs: Vec<&mut NodeRecord> = loaded
        .iter_mut()
        .filter_map(|(_, r)| r.as_mut().ok().map(|(r, _, _)| r))
        .collect();
    let notice = tr.translate_all(&mut recs);
    step.stats.errors.extend(notice);
    let mut read = Vec::with_capacity(loaded.len());
    for (stem, rec) in loaded {
        let stale = rec.as_ref().ok().map(|(r, _, _)| r).filter(|r| r.stale);
        read.push((stem.clone(), stale.map(|r| r.node.source_file.clone())));
        step.write_loaded(&mut wtxn, &stem, current[&stem], old.get(&stem), rec)?;
    }
    if full {
        tr.prune();
    }
    let Step {
        writer,
        vec,
        delta,
        mut stats,
        ..
    } = step;
    store.put_meta(&mut wtxn, "scan_dirs", &dirs)?;
    super::watch::record(store, &mut wtxn, repo_root, read)?;
    lap.done("records");
    let fig = super::links::refresh(store, &mut wtxn, &delta, full)?;
    lap.done("links");
    stats.pending_vectors = vec.finish(store, &mut wtxn)?;
    lap.done("vectors");
    stats.nodes = store.nodes.len(&wtxn).map_err(lm)? as usize;
    stats.edges = fig.edges;
    stats.stale_specs = fig.stale_specs;
    stats.errors.extend(fig.agent_errors);
    text.commit(writer)?;
    lap.done("text");
    stats.steps_us = lap.1;
    stats
        .steps_us
        .insert("translate".into(), tr.spent.as_micros() as u64);
    stats.millis = t0.elapsed().as_millis() as u64;
    store.put_meta(&mut wtxn, "stats", &stats)?;
    wtxn.commit().map_err(lm)?;
    Ok(stats)
}
