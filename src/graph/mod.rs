//! Graph: global link resolution over all nodes → typed edges, orphans, layer violations.
//!
//! Input is what the committed index holds (nodes + per-spec [`LinkRecord`]s) or fresh
//! [`Extracted`]s. Each record is resolved with the [`Resolver`]; unresolved links are kept as
//! [`Orphan`]s (never phantom nodes); self-links are dropped; the edge type is refined once the
//! target kind is known ([`refine_type`]); `layer_violation` follows BR-LAYER-001 with the
//! target's real layer (00 and 05 are outside the flow). Duplicate ids (possible after a merge)
//! keep the node of the lexicographically first path and are reported.
//!
//! `LAYER_DEPENDENCY` is implicit (PRD: "N > M"): it is not stored as edges but summarised by
//! [`Graph::layer_dependencies`].

mod resolve;

pub use resolve::{lookup_keys, probe_keys, short_form, Resolver};

use crate::artifact::{read_links, ArtifactPaths, IndexStore};
use crate::extract::links as lt;
use crate::spec::{Extracted, Kind, Layer, LinkRecord, Node};
use rayon::prelude::*;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// A resolved, typed edge.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Edge {
    pub from: String,
    pub to: String,
    #[serde(rename = "type")]
    pub edge_type: String,
    pub layer_violation: bool,
    /// Link text as written (`UC-001-IndexDocument`).
    #[serde(skip_serializing_if = "String::is_empty")]
    pub written: String,
    #[serde(skip)]
    pub from_idx: u32,
    #[serde(skip)]
    pub to_idx: u32,
}

/// A link whose target does not exist.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Orphan {
    pub from: String,
    pub source_file: String,
    #[serde(rename = "type")]
    pub edge_type: String,
    /// Target as written.
    pub to: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
}

/// Two or more files claiming one node id.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Duplicate {
    pub id: String,
    /// The file whose node is kept.
    pub kept: String,
    pub dropped: Vec<String>,
}

/// The resolved knowledge graph.
#[derive(Debug, Clone, Default)]
pub struct Graph {
    /// Nodes sorted by id.
    pub nodes: Vec<Node>,
    /// Edges sorted by (from, to, type), deduplicated.
    pub edges: Vec<Edge>,
    pub orphans: Vec<Orphan>,
    pub duplicates: Vec<Duplicate>,
    by_id: HashMap<String, u32>,
    out_adj: Vec<Vec<u32>>,
    in_adj: Vec<Vec<u32>>,
    resolver: Resolver,
}

fn entity_family(k: Kind) -> bool {
    matches!(k, Kind::Entity | Kind::Role | Kind::System)
}

/// The edge type once the target kind is known: a typed record whose target does not fit falls
/// back to `WIKI_LINK`; a plain `WIKI_LINK` between kinds with a structural relation is typed
/// (`ui-view → ui-component` = `VIEW_USES_COMPONENT`…). Business relations and
/// `CROSS_DOMAIN_REF` / `VALIDATES` / `DECIDES_FOR` keep their type.
pub fn refine_type(edge_type: &str, from: Kind, to: Kind) -> String {
    let fits = match edge_type {
        lt::DOMAIN_RELATION | lt::ENTITY_RULE | lt::ENTITY_POLICY | lt::COMPONENT_USES_ENTITY => {
            entity_family(to)
        }
        lt::EMITS | lt::CONSUMES => to == Kind::Event,
        lt::UC_APPLIES_RULE => matches!(
            to,
            Kind::BusinessRule | Kind::BusinessPolicy | Kind::CrossPolicy
        ),
        lt::UC_EXECUTES_CMD => matches!(to, Kind::Command | Kind::Query),
        lt::UC_STORY => to == Kind::Objective,
        lt::VIEW_TRIGGERS_UC => to == Kind::UseCase,
        lt::VIEW_USES_COMPONENT => to == Kind::UiComponent,
        lt::REQ_TRACES_TO => !matches!(to, Kind::Feature | Kind::Document),
        lt::WIKI_LINK => {
            let inferred = match (from, to) {
                (Kind::UiView | Kind::UiFlow, Kind::UiComponent) => Some(lt::VIEW_USES_COMPONENT),
                (Kind::UiView | Kind::UiFlow, Kind::UseCase) => Some(lt::VIEW_TRIGGERS_UC),
                (Kind::UiComponent, t) if entity_family(t) => Some(lt::COMPONENT_USES_ENTITY),
                (Kind::UseCase, Kind::Objective) => Some(lt::UC_STORY),
                _ => None,
            };
            return inferred.unwrap_or(lt::WIKI_LINK).to_string();
        }
        _ => true,
    };
    if fits {
        edge_type.to_string()
    } else {
        lt::WIKI_LINK.to_string()
    }
}

/// Problems met while loading an index (unreadable artifact files); the rest is loaded.
pub type LoadErrors = Vec<crate::artifact::Error>;

impl Graph {
    /// Build from nodes and their link records (`(from node id, records)`).
    pub fn build(nodes: Vec<Node>, links: Vec<(String, Vec<LinkRecord>)>) -> Graph {
        // Deduplicate ids: the first source path wins.
        let mut nodes = nodes;
        nodes.sort_by(|a, b| (&a.id, &a.source_file).cmp(&(&b.id, &b.source_file)));
        let mut duplicates: Vec<Duplicate> = Vec::new();
        let mut kept: Vec<Node> = Vec::with_capacity(nodes.len());
        for n in nodes {
            match kept.last() {
                Some(k) if k.id == n.id => {
                    let kept_file = k.source_file.clone();
                    match duplicates.last_mut() {
                        Some(d) if d.id == n.id => d.dropped.push(n.source_file),
                        _ => duplicates.push(Duplicate {
                            id: n.id.clone(),
                            kept: kept_file,
                            dropped: vec![n.source_file],
                        }),
                    }
                }
                _ => kept.push(n),
            }
        }
        let nodes = kept;
        let by_id: HashMap<String, u32> = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.id.clone(), i as u32))
            .collect();
        let resolver = Resolver::new(&nodes);
        let per_node: Vec<(Vec<Edge>, Vec<Orphan>)> = links
            .par_iter()
            .filter_map(|(from_id, recs)| {
                let &fi = by_id.get(from_id)?;
                let from = &nodes[fi as usize];
                let mut edges = Vec::new();
                let mut orphans = Vec::new();
                for r in recs {
                    match resolver.resolve(&r.to, r.domain.as_deref(), from.domain.as_deref()) {
                        Some(ti) => {
                            if ti as u32 == fi {
                                continue;
                            }
                            let to = &nodes[ti];
                            let et = refine_type(&r.edge_type, from.kind, to.kind);
                            edges.push(Edge {
                                from: from.id.clone(),
                                to: to.id.clone(),
                                layer_violation: from.layer.violates(to.layer),
                                edge_type: et,
                                written: r.to.clone(),
                                from_idx: fi,
                                to_idx: ti as u32,
                            });
                        }
                        None => orphans.push(Orphan {
                            from: from.id.clone(),
                            source_file: from.source_file.clone(),
                            edge_type: r.edge_type.clone(),
                            to: r.to.clone(),
                            domain: r.domain.clone(),
                        }),
                    }
                }
                Some((edges, orphans))
            })
            .collect();
        let mut edges = Vec::new();
        let mut orphans = Vec::new();
        for (e, o) in per_node {
            edges.extend(e);
            orphans.extend(o);
        }
        edges.sort();
        edges.dedup_by(|a, b| a.from == b.from && a.to == b.to && a.edge_type == b.edge_type);
        orphans.sort();
        orphans.dedup();
        let mut out_adj = vec![Vec::new(); nodes.len()];
        let mut in_adj = vec![Vec::new(); nodes.len()];
        for (i, e) in edges.iter().enumerate() {
            out_adj[e.from_idx as usize].push(i as u32);
            in_adj[e.to_idx as usize].push(i as u32);
        }
        Graph {
            nodes,
            edges,
            orphans,
            duplicates,
            by_id,
            out_adj,
            in_adj,
            resolver,
        }
    }

    /// Build from freshly extracted specs.
    pub fn from_extracted(list: &[Extracted]) -> Graph {
        Graph::build(
            list.iter().map(|e| e.node.clone()).collect(),
            list.iter()
                .map(|e| (e.node.id.clone(), e.links.clone()))
                .collect(),
        )
    }

    /// Load the committed index at `index_dir` (`<repo>/.kdd-index`). Unreadable files are
    /// returned alongside; everything readable is loaded.
    pub fn load(
        index_dir: &std::path::Path,
    ) -> Result<(Graph, LoadErrors), crate::artifact::Error> {
        let store = IndexStore::new(index_dir);
        let (nodes, mut errors) = store.load_nodes()?;
        let paths = &store.paths;
        let links: Vec<Result<(String, Vec<LinkRecord>), crate::artifact::Error>> = nodes
            .par_iter()
            .map(|n| {
                read_links(&paths.abs(&ArtifactPaths::edges_rel(n))).map(|l| (n.id.clone(), l))
            })
            .collect();
        let mut ok = Vec::with_capacity(links.len());
        for l in links {
            match l {
                Ok(x) => ok.push(x),
                Err(e) => errors.push(e),
            }
        }
        Ok((Graph::build(nodes, ok), errors))
    }

    /// The resolver over [`Graph::nodes`] (indices are node indices).
    pub fn resolver(&self) -> &Resolver {
        &self.resolver
    }

    /// Index of a node id.
    pub fn index_of(&self, id: &str) -> Option<usize> {
        self.by_id.get(id).map(|&i| i as usize)
    }

    /// A node by id.
    pub fn node(&self, id: &str) -> Option<&Node> {
        self.index_of(id).map(|i| &self.nodes[i])
    }

    /// Resolve link text as written in a spec of `from_domain`.
    pub fn resolve(
        &self,
        text: &str,
        explicit: Option<&str>,
        from_domain: Option<&str>,
    ) -> Option<&Node> {
        self.resolver
            .resolve(text, explicit, from_domain)
            .map(|i| &self.nodes[i])
    }

    /// Resolve a user hint (path, id, name, alias); best first.
    pub fn resolve_hint(&self, hint: &str) -> Vec<&Node> {
        self.resolver
            .resolve_hint(hint)
            .into_iter()
            .map(|i| &self.nodes[i])
            .collect()
    }

    /// Outgoing edges of node index `i`.
    pub fn out_edges(&self, i: usize) -> impl Iterator<Item = &Edge> {
        self.out_adj
            .get(i)
            .into_iter()
            .flatten()
            .map(|&e| &self.edges[e as usize])
    }

    /// Incoming edges of node index `i` (reverse adjacency).
    pub fn in_edges(&self, i: usize) -> impl Iterator<Item = &Edge> {
        self.in_adj
            .get(i)
            .into_iter()
            .flatten()
            .map(|&e| &self.edges[e as usize])
    }

    /// Edges flagged by BR-LAYER-001.
    pub fn violations(&self) -> impl Iterator<Item = &Edge> {
        self.edges.iter().filter(|e| e.layer_violation)
    }

    /// Node count per kind.
    pub fn kind_counts(&self) -> BTreeMap<Kind, usize> {
        let mut m = BTreeMap::new();
        for n in &self.nodes {
            *m.entry(n.kind).or_insert(0) += 1;
        }
        m
    }

    /// Edge count per type.
    pub fn edge_type_counts(&self) -> BTreeMap<String, usize> {
        let mut m = BTreeMap::new();
        for e in &self.edges {
            *m.entry(e.edge_type.clone()).or_insert(0) += 1;
        }
        m
    }

    /// The implicit `LAYER_DEPENDENCY` relation: (from layer, to layer) → number of edges going
    /// down the 04 → 01 flow.
    pub fn layer_dependencies(&self) -> BTreeMap<(Layer, Layer), usize> {
        let mut m = BTreeMap::new();
        for e in &self.edges {
            let (a, b) = (
                self.nodes[e.from_idx as usize].layer,
                self.nodes[e.to_idx as usize].layer,
            );
            if let (Some(x), Some(y)) = (a.rank(), b.rank()) {
                if x > y {
                    *m.entry((a, b)).or_insert(0) += 1;
                }
            }
        }
        m
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refine() {
        assert_eq!(
            refine_type("EMITS", Kind::Command, Kind::Entity),
            "WIKI_LINK"
        );
        assert_eq!(refine_type("EMITS", Kind::Command, Kind::Event), "EMITS");
        assert_eq!(
            refine_type("WIKI_LINK", Kind::UiView, Kind::UiComponent),
            "VIEW_USES_COMPONENT"
        );
        assert_eq!(
            refine_type("pertenece_a", Kind::Entity, Kind::Entity),
            "pertenece_a"
        );
    }
}
