//! Agent enrichments (L3) in the cache: what `kdd enrich` committed under
//! `.kdd-index/enrichments/` becomes searchable text and typed edges, always marked as the
//! agent's.
//!
//! Invariants:
//! - Only the entry written for the spec bytes the node was indexed from is used
//!   (`Enrichment::current`): a stale enrichment never reaches an answer.
//! - The summary is the record's LAST section, headed [`SUMMARY_HEADING`] with key
//!   [`SUMMARY_KEY`] and line 0 (it is not in the spec file), so the lexical index finds the spec
//!   by words only the summary holds, and any answer that shows it names its source.
//! - A summary vector made with the manifest's model joins the spec's vector chunks (section
//!   [`SUMMARY_HEADING`]), so semantic search finds the summary too; any other is ignored.
//! - Implicit relations become [`Edge`]s with `agent: true`, only towards nodes that exist, never
//!   self-loops and never a copy of an edge the specs already write. [`Cache::set_agent_edges`]
//!   (`--no-agent-edges`) hides them from every graph walk of that cache.
//! - A bad enrichment file never drops its spec: the spec loads without it and the error is
//!   reported with the build figures.

use super::scan::LoadedVector;
use super::store::{ChunkRef, Edge, NodeRecord, SectionText};
use super::{Cache, Snapshot};
use crate::artifact::enrichment::{self, Relation};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeSet, HashSet};
use std::path::Path;

/// Heading of the summary section (shown wherever the summary surfaces).
pub const SUMMARY_HEADING: &str = "Agent summary (source: agent)";
/// Section key of the summary.
pub const SUMMARY_KEY: &str = "agent_summary";

/// The enrichment of a node as the cache keeps it (the summary is a section).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentNote {
    /// Agent id (`program@hash`).
    pub agent: String,
    pub relations: Vec<Relation>,
    pub impact: Vec<String>,
    /// Why the spec's enrichment file could not be used (then nothing else is set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Attach the current enrichment of the spec at `stem` to its record; a bad file is recorded
/// as the note's `error` (reported by [`error`]) and the spec loads without it.
pub fn attach(index_dir: &Path, stem: &str, rec: &mut NodeRecord, vectors: &mut Vec<LoadedVector>) {
    if let Err(e) = try_attach(index_dir, stem, rec, vectors) {
        rec.agent = Some(AgentNote {
            agent: String::new(),
            relations: Vec::new(),
            impact: Vec::new(),
            error: Some(e),
        });
    }
}

/// The enrichment error of a record, if its file was bad.
pub fn error(rec: &NodeRecord) -> Option<String> {
    rec.agent.as_ref().and_then(|a| a.error.clone())
}

fn try_attach(
    index_dir: &Path,
    stem: &str,
    rec: &mut NodeRecord,
    vectors: &mut Vec<LoadedVector>,
) -> Result<(), String> {
    let path = index_dir.join("enrichments").join(format!("{stem}.json"));
    let bytes = match crate::artifact::read_artifact(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let file = enrichment::parse(&bytes).map_err(|e| {
        format!(
            "{}: not a valid enrichment ({e}); run `kdd enrich --force {}`",
            path.display(),
            rec.node.id
        )
    })?;
    let Some(entry) = file.current(&rec.node.source_hash) else {
        return Ok(());
    };
    rec.sections.push(SectionText {
        heading: SUMMARY_HEADING.to_string(),
        key: Some(SUMMARY_KEY.to_string()),
        level: 2,
        ancestors: Vec::new(),
        text: entry.summary.clone(),
        line: 0,
        end: 0,
    });
    // The summary's vector joins the spec's chunks when it was made with the index's model.
    let model = crate::artifact::read_manifest(&index_dir.join("manifest.json"))
        .ok()
        .and_then(|m| m.embedding)
        .map(|e| e.model);
    if let Some(v) = entry
        .vector
        .as_ref()
        .filter(|v| Some(&v.model) == model.as_ref())
    {
        vectors.push(LoadedVector {
            chunk: ChunkRef {
                node_id: rec.node.id.clone(),
                section: SUMMARY_HEADING.to_string(),
                text: entry.summary.clone(),
            },
            vector: v.q.iter().map(|&x| x as f32 * v.scale).collect(),
        });
    }
    rec.agent = Some(AgentNote {
        agent: entry.agent.clone(),
        relations: entry.relations.clone(),
        impact: entry.impact.clone(),
        error: None,
    });
    Ok(())
}

/// True when section `i` of `rec` is the agent's summary.
pub fn is_summary(rec: &NodeRecord, i: usize) -> bool {
    rec.sections
        .get(i)
        .is_some_and(|s| s.key.as_deref() == Some(SUMMARY_KEY) && s.line == 0)
}

/// The agent relations of a record as `(from, relation)`.
pub fn relations(rec: &NodeRecord) -> Vec<(String, Relation)> {
    rec.agent
        .iter()
        .flat_map(|a| &a.relations)
        .map(|r| (rec.node.id.clone(), r.clone()))
        .collect()
}

/// Add the agent edges to the resolved spec edges (see the module invariants).
pub fn add_edges(edges: &mut Vec<Edge>, rels: &[(String, Relation)], ids: &HashSet<&str>) {
    let written: BTreeSet<(String, String, String)> = edges
        .iter()
        .map(|e| (e.from.clone(), e.to.clone(), e.edge_type.clone()))
        .collect();
    let mut added = BTreeSet::new();
    for (from, r) in rels {
        let key = (from.clone(), r.target.clone(), r.edge_type.clone());
        if *from == r.target
            || !ids.contains(r.target.as_str())
            || written.contains(&key)
            || !added.insert(key)
        {
            continue;
        }
        edges.push(Edge {
            from: from.clone(),
            to: r.target.clone(),
            edge_type: r.edge_type.clone(),
            violation: false,
            agent: true,
        });
    }
}

impl Cache {
    /// Include (default) or hide the agent's edges in every graph walk of this cache.
    pub fn set_agent_edges(&self, on: bool) {
        self.agent_edges
            .store(on, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Snapshot<'_> {
    /// The edges a walk may follow (agent edges only when the cache includes them).
    pub(super) fn keep(&self, edges: Vec<Edge>) -> Vec<Edge> {
        if self
            .cache
            .agent_edges
            .load(std::sync::atomic::Ordering::SeqCst)
        {
            edges
        } else {
            edges.into_iter().filter(|e| !e.agent).collect()
        }
    }

    /// True when `from --edge_type--> to` is an agent edge (and no spec writes it).
    pub fn is_agent_edge(
        &self,
        from: &str,
        to: &str,
        edge_type: &str,
    ) -> Result<bool, super::Error> {
        Ok(self
            .out_edges(from)?
            .iter()
            .any(|e| e.agent && e.to == to && e.edge_type == edge_type))
    }
}
