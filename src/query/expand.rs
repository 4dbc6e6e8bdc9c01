//! Steps 4 and 5 of hybrid ranking (see [`super::hybrid`]): neighbourhood support over typed
//! edges ([`smooth`]) and graph expansion from the top hits ([`expand`]), with the [`Trail`] of
//! edges followed that the answer reports as `graph_expansion`.
//!
//! Invariants: both steps only add score (a node is never pushed down by its neighbours);
//! expansion never reorders direct hits blindly: a direct hit reached from a better seed gets a
//! small bonus ([`GRAPH_BONUS`]), other reached nodes are listed below with the path that
//! reached them; hubs are damped by their in-degree; edges across a layer violation are skipped
//! when layers are respected.

use super::hybrid::Signals;
use super::types::EdgeRef;
use super::Error;
use crate::cache::Snapshot;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

/// Bonus (times edge weight and seed score) for a direct hit also reached from a better hit.
const GRAPH_BONUS: f32 = 0.1;

/// Weight of an edge type for expansion: typed structure first, generic links last.
pub fn edge_weight(t: &str) -> f32 {
    match t {
        "UC_APPLIES_RULE" | "UC_EXECUTES_CMD" => 0.9,
        "ENTITY_RULE" | "ENTITY_POLICY" => 0.8,
        "EMITS" | "CONSUMES" => 0.7,
        "VALIDATES" | "REQ_TRACES_TO" | "VIEW_TRIGGERS_UC" => 0.6,
        "DOMAIN_RELATION" | "UC_STORY" | "DECIDES_FOR" => 0.5,
        "WIKI_LINK" | "CROSS_DOMAIN_REF" => 0.25,
        t if t.chars().any(|c| c.is_ascii_lowercase()) => 0.5,
        _ => 0.4,
    }
}

/// Where a node's neighbourhood support came from: (neighbour, edge type, outgoing from it).
pub(super) type Support = (String, String, bool);

/// A ranked candidate: id, score, its direct signals (none when only the graph reached it) and
/// the neighbour that supported it.
pub(super) type Candidate = (String, f32, Option<Signals>, Option<Support>);

/// Neighbourhood smoothing: every candidate lends a share of its score to the nodes it is linked
/// with (both directions, typed edge weights), and each node adds its best lent share. Specs that
/// answer a question together (a use case, the rule it applies, the command it runs, the event
/// that command emits) support each other; an isolated hit that merely shares words does not.
/// Nodes that only receive support join the candidates (reached through the graph).
pub(super) fn smooth(
    snap: &Snapshot<'_>,
    direct: Vec<(String, f32, Signals)>,
    respect_layers: bool,
    lenders: usize,
) -> Result<Vec<Candidate>, Error> {
    let mut lent: HashMap<String, (f32, Support)> = HashMap::new();
    // `direct` is best first: only the leading candidates lend (a low one's share is negligible).
    for (id, score, _) in direct.iter().take(lenders) {
        if *score <= 0.0 {
            continue;
        }
        let out = snap
            .out_edges(id)?
            .into_iter()
            .map(|e| (e.to.clone(), e, true));
        let inc = snap
            .in_edges(id)?
            .into_iter()
            .map(|e| (e.from.clone(), e, false));
        for (nb, e, outgoing) in out.chain(inc) {
            if nb == *id || (respect_layers && e.violation) {
                continue;
            }
            let share = edge_weight(&e.edge_type) * score;
            let slot = lent
                .entry(nb)
                .or_insert((0.0, (String::new(), String::new(), true)));
            if share > slot.0 {
                *slot = (share, (id.clone(), e.edge_type.clone(), outgoing));
            }
        }
    }
    let mut out = Vec::with_capacity(direct.len() + lent.len());
    for (id, score, sig) in direct {
        let support = lent.remove(&id);
        let smooth_share = super::knobs::knobs().smooth;
        let bonus = support.as_ref().map_or(0.0, |s| smooth_share * s.0);
        out.push((id, score + bonus, Some(sig), support.map(|s| s.1)));
    }
    // Edge ends are resolved nodes; a vanished one is skipped when results are assembled.
    for (id, (share, support)) in lent {
        out.push((
            id,
            super::knobs::knobs().smooth * share,
            None,
            Some(support),
        ));
    }
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    Ok(out)
}

/// Edges followed, in order and without repeats, and what they did.
#[derive(Default)]
pub(super) struct Trail {
    pub followed: Vec<EdgeRef>,
    seen: HashSet<EdgeRef>,
    /// Direct hits that the graph also supported or reached.
    pub graph_hit: HashSet<String>,
    /// Nodes only the neighbourhood reached: the path that reached them.
    pub support_path: HashMap<String, String>,
}

impl Trail {
    fn follow(&mut self, e: EdgeRef) {
        if self.seen.insert(e.clone()) {
            self.followed.push(e);
        }
    }

    /// The support edges of the candidates (step 4).
    pub fn from_support(cands: &[Candidate]) -> Trail {
        let mut t = Trail::default();
        for (id, _, sg, support) in cands {
            let Some((nb, ty, outgoing)) = support else {
                continue;
            };
            let (from_node, to_node) = if *outgoing {
                (nb.clone(), id.clone())
            } else {
                (id.clone(), nb.clone())
            };
            t.follow(EdgeRef::new(&from_node, &to_node, ty));
            if sg.is_some() {
                t.graph_hit.insert(id.clone());
            } else {
                t.support_path
                    .insert(id.clone(), format!("{nb} -> {ty} -> {id}"));
            }
        }
        t
    }
}

/// One step from a node: the weight it carries and whether it follows the edge forwards.
#[derive(Clone, Copy)]
struct Step {
    weight: f32,
    outgoing: bool,
}

/// The neighbours of `cur` (out-edges at full weight, in-edges at 0.8), each weighted by its
/// edge type and damped by the neighbour's in-degree (hubs lend little).
fn neighbours(
    snap: &Snapshot<'_>,
    cur: &str,
    respect_layers: bool,
) -> Result<Vec<(String, String, Step)>, Error> {
    let mut nexts: Vec<(String, String, bool, bool)> = Vec::new();
    for e in snap.out_edges(cur)? {
        nexts.push((e.to.clone(), e.edge_type.clone(), e.violation, true));
    }
    for e in snap.in_edges(cur)? {
        nexts.push((e.from.clone(), e.edge_type.clone(), e.violation, false));
    }
    let mut out = Vec::with_capacity(nexts.len());
    for (nb, ty, viol, outgoing) in nexts {
        if respect_layers && viol {
            continue;
        }
        let indeg = snap.degrees(&nb)?.map_or(1, |l| l.in_degree.max(1)) as f32;
        let hub = 1.0 / (1.0 + (indeg / 8.0)).sqrt();
        let dir_w = if outgoing { 1.0 } else { 0.8 };
        let weight = edge_weight(&ty) * dir_w * hub;
        out.push((nb, ty, Step { weight, outgoing }));
    }
    Ok(out)
}

/// How far expansion walks.
#[derive(Clone, Copy)]
pub(super) struct Walk {
    pub depth: u8,
    pub respect_layers: bool,
}

/// Graph expansion (step 5) from `seeds` (the top candidates, best first): breadth-first over
/// typed edges up to `walk.depth`. A candidate reached from a better seed gets a bonus in
/// `scores`; any other node reached is returned with its best score and path.
pub(super) fn expand(
    snap: &Snapshot<'_>,
    seeds: &[(String, f32)],
    is_cand: &HashSet<&str>,
    walk: Walk,
    scores: &mut HashMap<String, f32>,
    trail: &mut Trail,
) -> Result<BTreeMap<String, (f32, String)>, Error> {
    let mut expanded: BTreeMap<String, (f32, String)> = BTreeMap::new();
    for (seed, seed_score) in seeds {
        let mut seen: HashSet<String> = HashSet::from([seed.clone()]);
        let mut q: VecDeque<(String, u8, f32, String)> =
            VecDeque::from([(seed.clone(), 0u8, *seed_score, seed.clone())]);
        while let Some((cur, d, s, path)) = q.pop_front() {
            if d >= walk.depth {
                continue;
            }
            for (nb, ty, w) in neighbours(snap, &cur, walk.respect_layers)? {
                if !seen.insert(nb.clone()) {
                    continue;
                }
                let ns = s * w.weight * super::knobs::knobs().expand;
                let npath = format!("{path} -> {ty} -> {nb}");
                let (from_node, to_node) = if w.outgoing {
                    (cur.clone(), nb.clone())
                } else {
                    (nb.clone(), cur.clone())
                };
                let er = EdgeRef::new(&from_node, &to_node, &ty);
                if let Some(own) = scores.get(&nb).copied() {
                    if own < *seed_score && is_cand.contains(nb.as_str()) {
                        scores.insert(nb.clone(), own + GRAPH_BONUS * w.weight * seed_score);
                        trail.graph_hit.insert(nb.clone());
                        trail.follow(er);
                    }
                } else {
                    let e = expanded.entry(nb.clone()).or_insert((0.0, String::new()));
                    if ns > e.0 {
                        *e = (ns, npath.clone());
                    }
                    trail.follow(er);
                }
                q.push_back((nb, d + 1, ns, npath));
            }
        }
    }
    Ok(expanded)
}
