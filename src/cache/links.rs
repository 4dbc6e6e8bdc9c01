//! The link step of a cache update: resolved edges (`fwd`/`rev`), orphans, violations, degrees,
//! the name table and the corpus summaries, brought up to date in time proportional to the
//! change, not to the corpus.
//!
//! Invariants:
//! - `keys` maps every resolver lookup key ([`crate::graph::lookup_keys`]) to the nodes found
//!   under it; `lkeys` maps every probe key of a written link ([`crate::graph::probe_keys`]) and
//!   every agent relation target (`@id`) to the nodes that hold it. Both are patched by every
//!   update, never rebuilt.
//! - The sources re-resolved are the new versions of the changed specs plus every node holding
//!   a probe key that a changed spec's lookup keys (old or new version) meet. A link's answer
//!   depends only on the nodes under its probe keys, so no other link can change; each is
//!   resolved by core's [`crate::graph::Graph`] over just those nodes, with the global rules.
//! - Every list keeps the order a fresh build gives (per source: spec edges sorted, then agent
//!   edges; `rev` by (agent, from); orphans and violations by source), so an updated cache
//!   equals a fresh rebuild (`proptests.rs`).
//! - A full build is the same step with every spec new and empty tables.

use super::agent;
use super::build::resolve_graph;
use super::resolve::{node_keys as name_keys, KeyRank};
use super::store::{lm, Edge, NodeLite, NodeRecord, Store};
use super::text::LangTally;
use super::{Error, Orphan};
use crate::artifact::enrichment::Relation;
use crate::spec::{LinkRecord, Node};
use heed::types::{SerdeJson, Str};
use heed::{Database, RwTxn};
use serde::{de::DeserializeOwned, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashSet};

/// What the link step needs of one version (old or new) of a spec.
#[derive(Debug, Clone)]
pub(super) struct Slim {
    pub node: Node,
    pub links: Vec<LinkRecord>,
    pub rels: Vec<(String, Relation)>,
    pub lang: LangTally,
    pub stale: bool,
    pub agent_error: Option<String>,
    /// The record has vector items.
    pub vectors: bool,
}

impl Slim {
    pub(super) fn of(rec: &NodeRecord) -> Slim {
        Slim {
            node: rec.node.clone(),
            links: rec.links.clone(),
            rels: agent::relations(rec),
            lang: rec.lang,
            vectors: !rec.items.is_empty(),
            stale: rec.stale,
            agent_error: agent::error(rec),
        }
    }
}

/// The specs one update replaced: old versions (changed or removed) and new ones.
#[derive(Debug, Default)]
pub(super) struct Delta {
    pub old: Vec<Slim>,
    pub new: Vec<Slim>,
}

/// Corpus figures after the link step.
#[derive(Debug, Default)]
pub(super) struct Figures {
    pub edges: usize,
    pub stale_specs: Vec<String>,
    pub agent_errors: Vec<String>,
}

/// LMDB keys are at most 511 bytes: a longer key is stored as its hash (collisions only widen
/// the set of links re-resolved).
pub(super) fn db_key(k: String) -> String {
    if k.len() <= 256 {
        k
    } else {
        format!("#{}", &blake3::hash(k.as_bytes()).to_hex()[..32])
    }
}

fn lookup_keys(n: &Node) -> Vec<String> {
    let mut v: Vec<String> = crate::graph::lookup_keys(n)
        .into_iter()
        .map(db_key)
        .collect();
    v.push(format!("@{}", n.id));
    v
}

fn probe_keys(s: &Slim) -> BTreeSet<String> {
    let mut out: BTreeSet<String> = s
        .links
        .iter()
        .flat_map(|l| crate::graph::probe_keys(&l.to))
        .map(db_key)
        .collect();
    out.extend(s.rels.iter().map(|(_, r)| format!("@{}", r.target)));
    out
}

type Sets<T> = Database<'static, Str, SerdeJson<Vec<T>>>;
type Changes<T> = BTreeMap<String, (BTreeSet<T>, BTreeSet<T>)>;

/// Per key: remove the first set, add the second (one read and one write per key).
fn patch<T>(db: Sets<T>, wtxn: &mut RwTxn, changes: Changes<T>) -> Result<(), Error>
where
    T: Ord + Clone + Serialize + DeserializeOwned + 'static,
{
    for (k, (rm, add)) in changes {
        let mut v = db.get(wtxn, &k).map_err(lm)?.unwrap_or_default();
        v.retain(|x| !rm.contains(x));
        v.extend(add);
        v.sort();
        v.dedup();
        if v.is_empty() {
            db.delete(wtxn, &k).map_err(lm)?;
        } else {
            db.put(wtxn, &k, &v).map_err(lm)?;
        }
    }
    Ok(())
}

/// `keys`, `lkeys`, `paths` and `names` without the old versions and with the new ones.
fn patch_key_tables(store: &Store, wtxn: &mut RwTxn, d: &Delta) -> Result<(), Error> {
    let mut keys: Changes<String> = BTreeMap::new();
    let mut lkeys: Changes<String> = BTreeMap::new();
    let mut paths: Changes<String> = BTreeMap::new();
    let mut names: Changes<(KeyRank, String)> = BTreeMap::new();
    for (side, list) in [(0, &d.old), (1, &d.new)] {
        for s in list {
            let id = &s.node.id;
            for k in lookup_keys(&s.node) {
                let e = keys.entry(k).or_default();
                if side == 0 { &mut e.0 } else { &mut e.1 }.insert(id.clone());
            }
            for k in probe_keys(s) {
                let e = lkeys.entry(k).or_default();
                if side == 0 { &mut e.0 } else { &mut e.1 }.insert(id.clone());
            }
            for k in super::resolve::path_endings(&s.node.source_file) {
                let e = paths.entry(db_key(k.to_string())).or_default();
                if side == 0 { &mut e.0 } else { &mut e.1 }.insert(id.clone());
            }
            for (k, r) in name_keys(&s.node) {
                let e = names.entry(db_key(k)).or_default();
                if side == 0 { &mut e.0 } else { &mut e.1 }.insert((r, id.clone()));
            }
        }
    }
    patch(store.keys, wtxn, keys)?;
    patch(store.lkeys, wtxn, lkeys)?;
    patch(store.paths, wtxn, paths)?;
    patch(store.names, wtxn, names)
}

/// The sources whose links must be resolved again: every new version, plus (incremental) the
/// nodes holding a probe key that a changed spec's lookup keys meet.
fn affected(
    store: &Store,
    wtxn: &RwTxn,
    d: &Delta,
    full: bool,
) -> Result<BTreeMap<String, Slim>, Error> {
    let mut out: BTreeMap<String, Slim> = d
        .new
        .iter()
        .map(|s| (s.node.id.clone(), s.clone()))
        .collect();
    if full {
        return Ok(out);
    }
    let dirty: BTreeSet<String> = d
        .old
        .iter()
        .chain(&d.new)
        .flat_map(|s| lookup_keys(&s.node))
        .collect();
    let mut ids = BTreeSet::new();
    for k in &dirty {
        ids.extend(store.lkeys.get(wtxn, k).map_err(lm)?.unwrap_or_default());
    }
    for id in ids {
        if out.contains_key(&id) {
            continue;
        }
        if let Some(rec) = store.nodes.get(wtxn, &id).map_err(lm)? {
            out.insert(id, Slim::of(&rec));
        }
    }
    Ok(out)
}

/// The nodes a resolver needs for `srcs`: the sources and every node under their probe keys.
fn candidates(
    store: &Store,
    wtxn: &RwTxn,
    srcs: &BTreeMap<String, Slim>,
) -> Result<Vec<Node>, Error> {
    let mut ids: BTreeSet<String> = BTreeSet::new();
    for s in srcs.values() {
        for k in probe_keys(s) {
            ids.extend(store.keys.get(wtxn, &k).map_err(lm)?.unwrap_or_default());
        }
    }
    let mut nodes: Vec<Node> = srcs.values().map(|s| s.node.clone()).collect();
    for id in ids {
        if srcs.contains_key(&id) {
            continue;
        }
        if let Some(l) = store.lite.get(wtxn, &id).map_err(lm)? {
            nodes.push(l.node);
        }
    }
    Ok(nodes)
}

/// Resolve `srcs` (spec links, then agent relations towards existing nodes).
fn resolve(
    store: &Store,
    wtxn: &RwTxn,
    srcs: &BTreeMap<String, Slim>,
    full: bool,
) -> Result<(Vec<Edge>, Vec<Orphan>), Error> {
    let nodes = if full {
        srcs.values().map(|s| s.node.clone()).collect()
    } else {
        candidates(store, wtxn, srcs)?
    };
    let links: Vec<(String, Vec<LinkRecord>)> = srcs
        .iter()
        .map(|(id, s)| (id.clone(), s.links.clone()))
        .collect();
    let (mut edges, orphans) = resolve_graph(nodes, links);
    let rels: Vec<(String, Relation)> = srcs.values().flat_map(|s| s.rels.clone()).collect();
    let mut exist: HashSet<&str> = HashSet::new();
    for (_, r) in &rels {
        let here = srcs.contains_key(&r.target)
            || (!full && store.lite.get(wtxn, &r.target).map_err(lm)?.is_some());
        if here {
            exist.insert(r.target.as_str());
        }
    }
    agent::add_edges(&mut edges, &rels, &exist);
    Ok((edges, orphans))
}

/// Replace the edges of `cleared` sources in `fwd` and `rev`; returns the old ones.
fn write_edges(
    store: &Store,
    wtxn: &mut RwTxn,
    cleared: &BTreeSet<String>,
    edges: &[Edge],
) -> Result<Vec<Edge>, Error> {
    let mut old = Vec::new();
    for s in cleared {
        if let Some(v) = store.fwd.get(wtxn, s).map_err(lm)? {
            old.extend(v);
            store.fwd.delete(wtxn, s).map_err(lm)?;
        }
    }
    let mut fwd: BTreeMap<&str, Vec<Edge>> = BTreeMap::new();
    let mut rev: BTreeMap<&str, Vec<Edge>> = old.iter().map(|e| (e.to.as_str(), vec![])).collect();
    for e in edges {
        fwd.entry(e.from.as_str()).or_default().push(e.clone());
        rev.entry(e.to.as_str()).or_default().push(e.clone());
    }
    for (k, v) in &fwd {
        store.fwd.put(wtxn, k, v).map_err(lm)?;
    }
    for (t, add) in rev {
        let mut v = store.rev.get(wtxn, t).map_err(lm)?.unwrap_or_default();
        v.retain(|e| !cleared.contains(&e.from));
        v.extend(add);
        v.sort_by(|a, b| (a.agent, &a.from).cmp(&(b.agent, &b.from)));
        if v.is_empty() {
            store.rev.delete(wtxn, t).map_err(lm)?;
        } else {
            store.rev.put(wtxn, t, &v).map_err(lm)?;
        }
    }
    Ok(old)
}

fn meta_or_default<T: DeserializeOwned + Default>(
    store: &Store,
    wtxn: &RwTxn,
    key: &str,
) -> Result<T, Error> {
    Ok(store.get_meta(wtxn, key)?.unwrap_or_default())
}

/// Orphans, violations and counts without the cleared sources' old links, with the new ones.
fn patch_summaries(
    store: &Store,
    wtxn: &mut RwTxn,
    cleared: &BTreeSet<String>,
    old: &[Edge],
    edges: &[Edge],
    orphans: Vec<Orphan>,
) -> Result<usize, Error> {
    let mut all: Vec<Orphan> = meta_or_default(store, wtxn, "orphans")?;
    all.retain(|o| !cleared.contains(&o.from_node));
    all.extend(orphans);
    all.sort_by(|a, b| a.from_node.cmp(&b.from_node));
    let mut viol: Vec<Edge> = meta_or_default(store, wtxn, "violations")?;
    viol.retain(|e| !cleared.contains(&e.from));
    viol.extend(edges.iter().filter(|e| e.violation).cloned());
    viol.sort_by(|a, b| a.from.cmp(&b.from));
    let count: usize = meta_or_default(store, wtxn, "edge_count")?;
    let count = count.saturating_sub(old.len()) + edges.len();
    store.put_meta(wtxn, "orphans", &all)?;
    store.put_meta(wtxn, "violations", &viol)?;
    store.put_meta(wtxn, "edge_count", &count)?;
    store.put_meta(wtxn, "link_count", &(count + all.len()))?;
    Ok(count)
}

/// `lite` without the old versions and with the new ones (degrees fixed by [`fix_degrees`]).
fn patch_lite(store: &Store, wtxn: &mut RwTxn, d: &Delta) -> Result<(), Error> {
    for s in &d.old {
        store.lite.delete(wtxn, &s.node.id).map_err(lm)?;
    }
    for s in &d.new {
        let lite = NodeLite {
            node: s.node.clone(),
            in_degree: 0,
            out_degree: 0,
            vectors: s.vectors,
        };
        store.lite.put(wtxn, &s.node.id, &lite).map_err(lm)?;
    }
    Ok(())
}

/// Degrees of every node whose edges moved, from its `fwd` and `rev` lists.
fn fix_degrees(store: &Store, wtxn: &mut RwTxn, touched: BTreeSet<&str>) -> Result<(), Error> {
    for id in touched {
        let Some(mut lite) = store.lite.get(wtxn, id).map_err(lm)? else {
            continue;
        };
        let len = |v: Option<Vec<Edge>>| v.map_or(0, |v| v.len() as u32);
        lite.in_degree = len(store.rev.get(wtxn, id).map_err(lm)?);
        lite.out_degree = len(store.fwd.get(wtxn, id).map_err(lm)?);
        store.lite.put(wtxn, id, &lite).map_err(lm)?;
    }
    Ok(())
}

/// Corpus language, stale specs and agent errors: old versions out, new versions in.
fn patch_corpus(store: &Store, wtxn: &mut RwTxn, d: &Delta) -> Result<Figures, Error> {
    let mut lang: LangTally = meta_or_default(store, wtxn, "lang")?;
    let mut stale: BTreeSet<String> = meta_or_default(store, wtxn, "stale_specs")?;
    let mut errs: BTreeMap<String, String> = meta_or_default(store, wtxn, "agent_errors")?;
    for s in &d.old {
        lang.es = lang.es.saturating_sub(s.lang.es);
        lang.en = lang.en.saturating_sub(s.lang.en);
        if s.stale {
            stale.remove(&s.node.source_file);
        }
        errs.remove(&s.node.id);
    }
    for s in &d.new {
        lang.add(s.lang);
        if s.stale {
            stale.insert(s.node.source_file.clone());
        }
        if let Some(e) = &s.agent_error {
            errs.insert(s.node.id.clone(), e.clone());
        }
    }
    store.put_meta(wtxn, "lang", &lang)?;
    store.put_meta(wtxn, "stale_specs", &stale)?;
    store.put_meta(wtxn, "agent_errors", &errs)?;
    Ok(Figures {
        edges: 0,
        stale_specs: stale.into_iter().collect(),
        agent_errors: errs.into_values().collect(),
    })
}

/// The link step (see the module invariants). `full`: the tables are empty and every spec is in
/// `d.new`.
pub(super) fn refresh(
    store: &Store,
    wtxn: &mut RwTxn,
    d: &Delta,
    full: bool,
) -> Result<Figures, Error> {
    patch_key_tables(store, wtxn, d)?;
    patch_lite(store, wtxn, d)?;
    let srcs = affected(store, wtxn, d, full)?;
    let (edges, orphans) = resolve(store, wtxn, &srcs, full)?;
    let mut cleared: BTreeSet<String> = srcs.into_keys().collect();
    cleared.extend(d.old.iter().map(|s| s.node.id.clone()));
    let old = write_edges(store, wtxn, &cleared, &edges)?;
    let count = patch_summaries(store, wtxn, &cleared, &old, &edges, orphans)?;
    let touched: BTreeSet<&str> = cleared
        .iter()
        .map(String::as_str)
        .chain(old.iter().chain(&edges).map(|e| e.to.as_str()))
        .collect();
    fix_degrees(store, wtxn, touched)?;
    let mut fig = patch_corpus(store, wtxn, d)?;
    fig.edges = count;
    Ok(fig)
}
