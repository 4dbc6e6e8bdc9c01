//! Graph queries: traversal (QRY-001), impact (QRY-004), coverage (QRY-005), layer violations
//! (QRY-006) and orphan links.

use super::types::*;
use super::util::{brief, must, resolve_node};
use super::Error;
use crate::cache::{Cache, Edge, NodeRecord, Snapshot};
use crate::spec::Kind;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};

/// Every edge type the graph holds (relation names, agent edge types included).
fn edge_types_held(snap: &Snapshot<'_>) -> Result<BTreeSet<String>, Error> {
    let mut found = BTreeSet::new();
    for id in snap.node_ids()? {
        found.extend(snap.out_edges(&id)?.into_iter().map(|e| e.edge_type));
    }
    Ok(found)
}

/// QRY-001: the subgraph reachable from a node (edges followed in both directions).
pub fn graph(cache: &Cache, req: &GraphRequest) -> Result<GraphResponse, Error> {
    if !(1..=5).contains(&req.depth) {
        return Err(Error::invalid(
            "INVALID_DEPTH",
            "Depth must be between 1 and 5",
        ));
    }
    let snap = cache.snapshot()?;
    super::util::check_edge_types(&req.edge_types, || edge_types_held(&snap))?;
    let (root, _) = resolve_node(&snap, &req.node)?;
    let center = must(&snap, &root)?;
    let wanted: BTreeSet<&str> = req.edge_types.iter().map(String::as_str).collect();
    let mut dist: BTreeMap<String, u8> = BTreeMap::from([(root.clone(), 0)]);
    let mut edges: BTreeSet<(String, String, String)> = BTreeSet::new();
    let mut q = VecDeque::from([(root.clone(), 0u8)]);
    while let Some((cur, d)) = q.pop_front() {
        if d >= req.depth {
            continue;
        }
        let mut es: Vec<(Edge, String)> = Vec::new();
        for e in snap.out_edges(&cur)? {
            let nb = e.to.clone();
            es.push((e, nb));
        }
        for e in snap.in_edges(&cur)? {
            let nb = e.from.clone();
            es.push((e, nb));
        }
        for (e, nb) in es {
            if req.respect_layers && e.violation {
                continue;
            }
            if !wanted.is_empty() && !wanted.contains(e.edge_type.as_str()) {
                continue;
            }
            edges.insert((e.from.clone(), e.to.clone(), e.edge_type.clone()));
            if !dist.contains_key(&nb) {
                dist.insert(nb.clone(), d + 1);
                q.push_back((nb, d + 1));
            }
        }
    }
    let mut related = Vec::new();
    for (id, d) in &dist {
        if *id == root {
            continue;
        }
        let Some(rec) = snap.node_brief(id)? else {
            continue;
        };
        if !req.kinds.is_empty() && !req.kinds.contains(&rec.node.kind) {
            continue;
        }
        related.push(RelatedNode {
            node: brief(&rec),
            distance: *d,
        });
    }
    related.sort_by(|a, b| a.distance.cmp(&b.distance).then(a.node.id.cmp(&b.node.id)));
    let keep: BTreeSet<&str> = related
        .iter()
        .map(|r| r.node.id.as_str())
        .chain([root.as_str()])
        .collect();
    let edges: Vec<EdgeRef> = edges
        .into_iter()
        .filter(|(f, t, _)| keep.contains(f.as_str()) && keep.contains(t.as_str()))
        .map(|(from, to, edge_type)| EdgeRef::new(&from, &to, &edge_type))
        .collect();
    let mut edges = edges;
    super::agent::mark_edges(&snap, &mut edges)?;
    Ok(GraphResponse {
        center_node: brief(&center),
        total_nodes: related.len() + 1,
        total_edges: edges.len(),
        related_nodes: related,
        edges,
    })
}

fn impact_text(dep: &NodeRecord, target: &str, edge: &str) -> String {
    match edge {
        "UC_APPLIES_RULE" => format!("The use case applies {target}"),
        "UC_EXECUTES_CMD" => format!("The use case executes {target}"),
        "ENTITY_RULE" => format!("The rule constrains {target}"),
        "ENTITY_POLICY" => format!("The policy governs {target}"),
        "EMITS" => format!("Emits {target}"),
        "VALIDATES" => format!("The feature validates {target}"),
        "REQ_TRACES_TO" => format!("The requirement traces to {target}"),
        _ => format!("{} {} references {target}", dep.node.kind, dep.node.id),
    }
}

/// QRY-004: who depends on a node (reverse edges), directly and transitively, and which BDD
/// scenarios should run again.
pub fn impact(cache: &Cache, req: &ImpactRequest) -> Result<ImpactResponse, Error> {
    if !(1..=5).contains(&req.depth) {
        return Err(Error::invalid(
            "INVALID_DEPTH",
            "Depth must be between 1 and 5",
        ));
    }
    let snap = cache.snapshot()?;
    let (root, _) = resolve_node(&snap, &req.node)?;
    let center = must(&snap, &root)?;
    let reach = Reverse::walk(&snap, &root, req.depth)?;
    let (direct, trans) = affected(&snap, &reach, &center.node.id)?;
    let scenarios = scenarios_to_rerun(&snap, &reach)?;
    let mut r = ImpactResponse {
        analyzed_node: brief(&center),
        change_type: req.change_type,
        total_directly_affected: direct.len(),
        total_transitively_affected: trans.len(),
        total_scenarios: scenarios.len(),
        directly_affected: direct,
        transitively_affected: trans,
        scenarios_to_rerun: scenarios,
        truncated: reach.truncated,
        agent_notes: Vec::new(),
    };
    super::agent::mark_impact(&snap, &mut r)?;
    Ok(r)
}

/// The nodes that depend on a root, by a breadth-first walk over reverse edges (the first,
/// shortest path wins).
struct Reverse {
    /// Distance from the root (the root itself at 0).
    dist: BTreeMap<String, u8>,
    /// The step towards the root and its edge type, per reached node.
    prev: HashMap<String, (String, String)>,
    /// Some dependant lies beyond the depth limit.
    truncated: bool,
}

impl Reverse {
    fn walk(snap: &Snapshot<'_>, root: &str, depth: u8) -> Result<Reverse, Error> {
        let mut r = Reverse {
            dist: BTreeMap::from([(root.to_string(), 0)]),
            prev: HashMap::new(),
            truncated: false,
        };
        let mut q = VecDeque::from([root.to_string()]);
        while let Some(cur) = q.pop_front() {
            let d = r.dist[&cur];
            let mut ins = snap.in_edges(&cur)?;
            ins.sort();
            for e in ins {
                if e.from == cur || r.dist.contains_key(&e.from) {
                    continue;
                }
                if d >= depth {
                    r.truncated = true;
                    break;
                }
                r.dist.insert(e.from.clone(), d + 1);
                r.prev
                    .insert(e.from.clone(), (cur.clone(), e.edge_type.clone()));
                q.push_back(e.from.clone());
            }
        }
        Ok(r)
    }

    /// The path from the root to `id` and the edge types along it.
    fn path(&self, id: &str) -> (Vec<String>, Vec<String>) {
        let mut path = vec![id.to_string()];
        let mut types = Vec::new();
        let mut cur = id.to_string();
        while let Some((p, t)) = self.prev.get(&cur) {
            types.push(t.clone());
            path.push(p.clone());
            cur = p.clone();
        }
        path.reverse();
        types.reverse();
        (path, types)
    }
}

/// The directly (one hop) and transitively affected nodes, transitive ones by distance.
fn affected(
    snap: &Snapshot<'_>,
    reach: &Reverse,
    center_name: &str,
) -> Result<(Vec<DirectImpact>, Vec<TransitiveImpact>), Error> {
    let mut direct = Vec::new();
    let mut trans = Vec::new();
    for (id, d) in &reach.dist {
        if *d == 0 {
            continue;
        }
        let Some(rec) = snap.node_brief(id)? else {
            continue;
        };
        let (path, types) = reach.path(id);
        if *d == 1 {
            direct.push(DirectImpact {
                id: id.clone(),
                kind: rec.node.kind,
                title: rec.node.title.clone(),
                source_file: rec.node.source_file.clone(),
                impact: impact_text(&rec, center_name, &types[0]),
                edge_type: types[0].clone(),
                source: None,
            });
        } else {
            let via = &path[path.len() - 2];
            trans.push(TransitiveImpact {
                id: id.clone(),
                kind: rec.node.kind,
                title: rec.node.title.clone(),
                source_file: rec.node.source_file.clone(),
                impact: format!(
                    "Depends on {via}, which depends on {center_name} ({} hops)",
                    d
                ),
                path,
                edge_types: types,
                distance: *d,
                source: None,
            });
        }
    }
    trans.sort_by(|a, b| a.distance.cmp(&b.distance).then(a.id.cmp(&b.id)));
    Ok((direct, trans))
}

/// Scenarios of the features that link the analysed node or any affected node (a feature
/// that is itself affected counts too).
fn scenarios_to_rerun(snap: &Snapshot<'_>, reach: &Reverse) -> Result<Vec<ScenarioRef>, Error> {
    let mut scenarios: Vec<ScenarioRef> = Vec::new();
    let mut seen = BTreeSet::new();
    for id in reach.dist.keys() {
        let Some(rec) = snap.node_brief(id)? else {
            continue;
        };
        let mut feats: Vec<NodeRecord> = Vec::new();
        if rec.node.kind == Kind::Feature {
            if let Some(full) = snap.node(id)? {
                feats.push(full);
            }
        }
        for e in snap.in_edges(id)? {
            let is_feature = snap
                .lite(&e.from)?
                .is_some_and(|l| l.node.kind == Kind::Feature);
            if is_feature {
                if let Some(f) = snap.node(&e.from)? {
                    feats.push(f);
                }
            }
        }
        for f in feats {
            for sc in scenarios_of(&f, &rec) {
                if seen.insert((f.node.id.clone(), sc.clone())) {
                    scenarios.push(ScenarioRef {
                        feature: f
                            .node
                            .source_file
                            .rsplit('/')
                            .next()
                            .unwrap_or("")
                            .to_string(),
                        source_file: f.node.source_file.clone(),
                        scenario: sc,
                        reason: format!("validates {}", rec.node.id),
                    });
                }
            }
        }
    }
    Ok(scenarios)
}

/// Scenario names of a feature that mention `target` (in tags, name or steps: its local id,
/// short id, title or file stem); all its scenarios when none mentions it specifically.
fn scenarios_of(feature: &NodeRecord, target: &NodeRecord) -> Vec<String> {
    use crate::cache::resolve::{file_stem, norm_key, short_id};
    let tags_of = |name: &str| -> String {
        feature
            .fields
            .get("scenarios")
            .and_then(|v| v.as_array())
            .and_then(|a| {
                a.iter()
                    .find(|s| s.get("name").and_then(|n| n.as_str()) == Some(name))
            })
            .and_then(|s| s.get("tags"))
            .map(|t| t.to_string())
            .unwrap_or_default()
    };
    let all: Vec<&crate::cache::SectionText> = feature
        .sections
        .iter()
        .filter(|s| s.key.as_deref() == Some("scenario"))
        .collect();
    let local = target.node.local_id();
    let mut keys: Vec<String> = vec![
        norm_key(local),
        norm_key(&target.node.title),
        norm_key(file_stem(&target.node.source_file)),
    ];
    if let Some(s) = short_id(local) {
        keys.push(norm_key(s));
    }
    keys.retain(|k| k.len() > 3);
    let specific: Vec<String> = all
        .iter()
        .filter(|s| {
            let t = norm_key(&format!("{} {} {}", tags_of(&s.heading), s.heading, s.text));
            keys.iter().any(|k| t.contains(k.as_str()))
        })
        .map(|s| s.heading.clone())
        .collect();
    if specific.is_empty() && target.node.id != feature.node.id {
        all.iter().map(|s| s.heading.clone()).collect()
    } else {
        specific
    }
}

struct Rule {
    category: &'static str,
    description: &'static str,
    edge_type: &'static str,
    kinds: &'static [Kind],
}

// table: the coverage rules per kind (QRY-005).
fn rules_for(kind: Kind) -> Option<Vec<Rule>> {
    use Kind::*;
    let r = |category, description, edge_type, kinds| Rule {
        category,
        description,
        edge_type,
        kinds,
    };
    Some(match kind {
        Entity => vec![
            r("events", "At least one domain event", "EMITS", &[Event]),
            r(
                "business_rules",
                "At least one business rule",
                "ENTITY_RULE",
                &[BusinessRule, BusinessPolicy],
            ),
            r(
                "use_cases",
                "Referenced by at least one use case",
                "WIKI_LINK",
                &[UseCase],
            ),
            r(
                "requirements",
                "Traced to at least one requirement",
                "REQ_TRACES_TO",
                &[Requirement],
            ),
        ],
        UseCase => vec![
            r(
                "business_rules",
                "Applies at least one business rule",
                "UC_APPLIES_RULE",
                &[BusinessRule, BusinessPolicy, CrossPolicy],
            ),
            r(
                "commands",
                "Executes at least one command or query",
                "UC_EXECUTES_CMD",
                &[Command, Query],
            ),
            r(
                "requirements",
                "Traced to at least one requirement",
                "REQ_TRACES_TO",
                &[Requirement],
            ),
            r(
                "scenarios",
                "Validated by at least one BDD feature",
                "VALIDATES",
                &[Feature],
            ),
        ],
        Command | Query => vec![
            r(
                "use_cases",
                "Executed by at least one use case",
                "UC_EXECUTES_CMD",
                &[UseCase],
            ),
            r("events", "Emits at least one event", "EMITS", &[Event]),
            r(
                "scenarios",
                "Validated by at least one BDD feature",
                "VALIDATES",
                &[Feature],
            ),
        ],
        BusinessRule | BusinessPolicy | CrossPolicy => vec![
            r(
                "entities",
                "Constrains at least one entity",
                "ENTITY_RULE",
                &[Entity],
            ),
            r(
                "use_cases",
                "Applied by at least one use case",
                "UC_APPLIES_RULE",
                &[UseCase],
            ),
            r(
                "scenarios",
                "Validated by at least one BDD feature",
                "VALIDATES",
                &[Feature],
            ),
        ],
        Event => vec![
            r(
                "emitters",
                "Emitted by an entity or command",
                "EMITS",
                &[Entity, Command],
            ),
            r(
                "use_cases",
                "Part of at least one use case",
                "WIKI_LINK",
                &[UseCase],
            ),
        ],
        Requirement => vec![r(
            "traces",
            "Traces to at least one use case, rule or command",
            "REQ_TRACES_TO",
            &[UseCase, BusinessRule, Command],
        )],
        _ => return None,
    })
}

/// QRY-005: which related artifacts a node should have, by kind, and which are missing.
pub fn coverage(cache: &Cache, req: &CoverageRequest) -> Result<CoverageResponse, Error> {
    let snap = cache.snapshot()?;
    let (root, _) = resolve_node(&snap, &req.node)?;
    let rec = must(&snap, &root)?;
    let rules =
        rules_for(rec.node.kind).ok_or_else(|| Error::UnknownKind(rec.node.kind.to_string()))?;
    let mut neighbours: BTreeMap<String, Kind> = BTreeMap::new();
    for e in snap
        .out_edges(&root)?
        .into_iter()
        .chain(snap.in_edges(&root)?)
    {
        let other = if e.from == root { &e.to } else { &e.from };
        if let Some(n) = snap.node_brief(other)? {
            neighbours.insert(other.clone(), n.node.kind);
        }
    }
    let mut required = Vec::new();
    for r in rules {
        let found: Vec<String> = neighbours
            .iter()
            .filter(|(_, k)| r.kinds.contains(k))
            .map(|(id, _)| id.clone())
            .collect();
        required.push(CoverageItem {
            category: r.category.into(),
            description: r.description.into(),
            edge_type: r.edge_type.into(),
            status: if found.is_empty() {
                "missing"
            } else {
                "covered"
            }
            .into(),
            found,
        });
    }
    let present = required.iter().filter(|c| c.status == "covered").count();
    let missing = required.len() - present;
    Ok(CoverageResponse {
        analyzed_node: brief(&rec),
        coverage_percent: if required.is_empty() {
            100.0
        } else {
            (present as f32 * 1000.0 / required.len() as f32).round() / 10.0
        },
        required,
        present,
        missing,
    })
}

fn layer_name(l: crate::spec::Layer) -> &'static str {
    l.as_str()
}

/// QRY-006: every edge that breaks BR-LAYER-001.
pub fn violations(cache: &Cache, req: &ViolationsRequest) -> Result<ViolationsResponse, Error> {
    let snap = cache.snapshot()?;
    let mut out = Vec::new();
    for e in snap.violations()? {
        let (Some(f), Some(t)) = (snap.node_brief(&e.from)?, snap.node_brief(&e.to)?) else {
            continue;
        };
        if !req.kinds.is_empty() && !req.kinds.contains(&f.node.kind) {
            continue;
        }
        if !req.layers.is_empty() && !req.layers.contains(&f.node.layer) {
            continue;
        }
        out.push(Violation {
            explanation: format!(
                "{} should not reference {}",
                layer_name(f.node.layer),
                layer_name(t.node.layer)
            ),
            from_node: e.from,
            from_layer: f.node.layer,
            to_node: e.to,
            to_layer: t.node.layer,
            edge_type: e.edge_type,
            source_file: f.node.source_file,
        });
    }
    let total = snap.edge_count()?;
    Ok(ViolationsResponse {
        total_violations: out.len(),
        total_edges_analyzed: total,
        violation_rate: if total == 0 {
            0.0
        } else {
            (out.len() as f32 * 1000.0 / total as f32).round() / 10.0
        },
        violations: out,
    })
}

/// Links whose target does not exist (QRY-008 of the upstream engine).
pub fn orphans(cache: &Cache, req: &OrphansRequest) -> Result<OrphansResponse, Error> {
    let snap: Snapshot<'_> = cache.snapshot()?;
    let mut out = snap.orphans()?;
    super::util::check_edge_types(&req.edge_types, || {
        let mut found = edge_types_held(&snap)?;
        found.extend(out.iter().map(|o| o.edge_type.clone()));
        Ok(found)
    })?;
    if !req.edge_types.is_empty() {
        out.retain(|o| req.edge_types.contains(&o.edge_type));
    }
    let total = snap.link_count()?;
    Ok(OrphansResponse {
        total_orphans: out.len(),
        total_edges: total,
        orphan_rate: if total == 0 {
            0.0
        } else {
            (out.len() as f32 * 1000.0 / total as f32).round() / 10.0
        },
        orphans: out,
    })
}
