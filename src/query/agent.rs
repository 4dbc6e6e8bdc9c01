//! Marking what the developer's agent contributed (L3) in query answers: every hit whose best
//! evidence is the agent's summary, every edge that is an agent relation and every agent impact
//! note carries `source: "agent"`, so a reader can always tell the agent's words and links from
//! the specs'. Pure over a snapshot; nothing here ranks.

use super::types::{AgentImpactNote, EdgeRef, ImpactResponse};
use super::Error;
use crate::cache::{NodeRecord, Snapshot};

/// The marker.
pub const AGENT: &str = "agent";

/// `Some("agent")` when section `best` of `rec` is the agent's summary.
pub fn hit_source(rec: &NodeRecord, best: Option<usize>) -> Option<String> {
    best.filter(|i| crate::cache::agent::is_summary(rec, *i))
        .map(|_| AGENT.to_string())
}

/// Mark the hits the graph reached through an agent edge (`reached_via` is
/// `A -> TYPE -> B -> TYPE -> C`; a hop may have been followed either way).
pub fn mark_reached(snap: &Snapshot<'_>, hits: &mut [super::types::Hit]) -> Result<(), Error> {
    for h in hits.iter_mut().filter(|h| h.source.is_none()) {
        let Some(via) = h.reached_via.clone() else {
            continue;
        };
        let parts: Vec<&str> = via.split(" -> ").collect();
        for w in parts.windows(3).step_by(2) {
            let (a, ty, b) = (w[0], w[1], w[2]);
            if snap.is_agent_edge(a, b, ty)? || snap.is_agent_edge(b, a, ty)? {
                h.source = Some(AGENT.to_string());
                break;
            }
        }
    }
    Ok(())
}

/// Mark the agent edges among `edges`.
pub fn mark_edges(snap: &Snapshot<'_>, edges: &mut [EdgeRef]) -> Result<(), Error> {
    for e in edges {
        if snap.is_agent_edge(&e.from_node, &e.to_node, &e.edge_type)? {
            e.source = Some(AGENT.to_string());
        }
    }
    Ok(())
}

/// Mark the dependents reached through agent edges and add the agent's impact notes of the
/// analysed node.
pub fn mark_impact(snap: &Snapshot<'_>, r: &mut ImpactResponse) -> Result<(), Error> {
    let root = r.analyzed_node.id.clone();
    for d in &mut r.directly_affected {
        if snap.is_agent_edge(&d.id, &root, &d.edge_type)? {
            d.source = Some(AGENT.to_string());
        }
    }
    for t in &mut r.transitively_affected {
        // `path` runs from the analysed node outwards; each hop is an edge dependent → dependee.
        for (i, ty) in t.edge_types.iter().enumerate() {
            let (Some(to), Some(from)) = (t.path.get(i), t.path.get(i + 1)) else {
                continue;
            };
            if snap.is_agent_edge(from, to, ty)? {
                t.source = Some(AGENT.to_string());
                break;
            }
        }
    }
    if let Some(a) = snap.node(&root)?.and_then(|rec| rec.agent) {
        r.agent_notes = a
            .impact
            .iter()
            .map(|note| AgentImpactNote {
                note: note.clone(),
                agent: a.agent.clone(),
                source: AGENT.to_string(),
            })
            .collect();
    }
    Ok(())
}
