//! Request and response types of every query: the stable library API wrapped by the CLI, the MCP
//! server and the HTTP API. All types are serde (snake_case JSON, the shapes of QRY-001…007).

use crate::spec::{IndexedFields, Kind, Layer};
use serde::{Deserialize, Serialize};

fn default_limit() -> usize {
    10
}
/// Default `min_score` of searches (see `query::evidence`: scores are calibrated confidences).
pub const DEFAULT_MIN_SCORE: f32 = super::evidence::DEFAULT_MIN_SCORE;
fn default_min_score() -> f32 {
    DEFAULT_MIN_SCORE
}
fn default_hybrid_depth() -> u8 {
    2
}
fn default_true() -> bool {
    true
}
fn default_max_tokens() -> usize {
    8000
}
fn default_graph_depth() -> u8 {
    2
}
fn default_impact_depth() -> u8 {
    3
}
fn default_context_depth() -> u8 {
    1
}
fn default_context_tokens() -> usize {
    4000
}

/// A warning attached to a response (`NO_EMBEDDINGS`, `TOKEN_LIMIT_EXCEEDED`, `STALE_SPECS`,
/// `QUERY_TRANSLATED`, `NO_TRANSLATION`…).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Warning {
    pub code: String,
    pub message: String,
}

impl Warning {
    pub fn new(code: &str, message: impl Into<String>) -> Warning {
        Warning {
            code: code.to_string(),
            message: message.into(),
        }
    }

    /// `STALE_SPECS` for specs changed since they were indexed (`None` when there are none),
    /// worded alike by the CLI, HTTP and MCP.
    pub fn stale_specs(stale: &[String]) -> Option<Warning> {
        let first = stale.first()?;
        Some(Warning::new(
            "STALE_SPECS",
            format!(
                "{} spec(s) changed or removed since they were indexed (e.g. {first}); run `kdd index`",
                stale.len()
            ),
        ))
    }
}

/// Agent-side expansion of a question (see `query::searched`): optional texts the calling
/// agent adds; each is searched together with the question, like a translation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Expansion {
    /// Extra lexical queries (ids, terms in the corpus's words), at most 20.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keywords: Vec<String>,
    /// A short passage written like the spec that would answer the question.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hypothetical_answer: Option<String>,
    /// The question in the corpus's language (replaces the machine translation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub translation: Option<String>,
}

/// QRY-003 hybrid search request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HybridRequest {
    /// Natural-language query (≥ 3 characters).
    pub query: String,
    /// Only these kinds (empty = all).
    #[serde(default)]
    pub kinds: Vec<Kind>,
    /// Only these layers (empty = all).
    #[serde(default)]
    pub layers: Vec<Layer>,
    /// Only this domain (multi-domain repos).
    #[serde(default)]
    pub domain: Option<String>,
    /// 1–100, default 10.
    #[serde(default = "default_limit")]
    pub limit: usize,
    /// Minimum calibrated score (0–1), default [`DEFAULT_MIN_SCORE`]: below it a hit is no
    /// match (an answer left empty carries a `NO_MATCH` warning).
    #[serde(default = "default_min_score")]
    pub min_score: f32,
    /// Graph expansion depth 1–5, default 2.
    #[serde(default = "default_hybrid_depth")]
    pub depth: u8,
    /// Expand the top hits through typed graph edges (default true).
    #[serde(default = "default_true")]
    pub expand: bool,
    /// Skip edges that violate BR-LAYER-001 during expansion (default true).
    #[serde(default = "default_true")]
    pub respect_layers: bool,
    /// Token budget of the response (default 8000), spent on the page after `offset`.
    #[serde(default = "default_max_tokens")]
    pub max_tokens: usize,
    /// Ranked hits skipped before this page (paging; `limit` counts them too).
    #[serde(default)]
    pub offset: usize,
    /// Agent-side expansion (keywords, hypothetical answer, translation).
    #[serde(default, flatten)]
    pub expansion: Expansion,
}

impl HybridRequest {
    /// A request with every option at its default.
    pub fn new(query: impl Into<String>) -> HybridRequest {
        HybridRequest {
            query: query.into(),
            kinds: Vec::new(),
            layers: Vec::new(),
            domain: None,
            limit: default_limit(),
            min_score: DEFAULT_MIN_SCORE,
            depth: default_hybrid_depth(),
            expand: true,
            respect_layers: true,
            max_tokens: default_max_tokens(),
            offset: 0,
            expansion: Expansion::default(),
        }
    }
}

/// Serialize an `f32` as the `f64` its shortest decimal form names, so an answer built through
/// `serde_json::Value` (MCP) says `0.9817` as the CLI does, not `0.9817000031471252`.
fn short_f32<S: serde::Serializer>(v: &f32, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(v.to_string().parse().unwrap_or(f64::from(*v)))
}

/// One ranked result (the exact QRY-003 JSON shape).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hit {
    pub node_id: String,
    pub kind: Kind,
    /// Calibrated confidence, 0–1, best first: comparable across questions (see
    /// `query::evidence`), so `min_score` means the same for every question.
    #[serde(serialize_with = "short_f32")]
    pub score: f32,
    /// Repo-relative path (`specs/…`).
    pub source_file: String,
    /// `lexical`, `semantic`, `graph` or `fusion` (more than one signal).
    pub match_source: String,
    pub snippet: String,
    pub title: String,
    pub layer: Layer,
    pub domain: Option<String>,
    pub indexed_fields: IndexedFields,
    /// For nodes reached by graph expansion: `A -> EDGE -> B` path; `None` for direct hits.
    pub reached_via: Option<String>,
    /// Heading path (`Parent > Heading`) of the section holding the best evidence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub section: Option<String>,
    /// 1-based `[start, end]` lines of that section in `source_file`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lines: Option<[usize; 2]>,
    /// `agent` when the developer's agent (L3) put it here: its best evidence is the agent's
    /// summary, or the graph reached it through an agent edge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// An edge followed during expansion.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct EdgeRef {
    pub from_node: String,
    pub to_node: String,
    pub edge_type: String,
    /// `agent` for an implicit relation found by the developer's agent (L3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

impl EdgeRef {
    /// A spec edge (`source` is set afterwards for agent edges).
    pub fn new(from_node: &str, to_node: &str, edge_type: &str) -> EdgeRef {
        EdgeRef {
            from_node: from_node.to_string(),
            to_node: to_node.to_string(),
            edge_type: edge_type.to_string(),
            source: None,
        }
    }
}

/// QRY-003 response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HybridResponse {
    pub results: Vec<Hit>,
    pub graph_expansion: Vec<EdgeRef>,
    pub warnings: Vec<Warning>,
    pub total_results: usize,
    pub total_tokens: usize,
    /// The `offset` of the next page when the token budget cut this one (hits past it are
    /// left for that page, never lost).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_offset: Option<usize>,
    /// Expansions the search used (`translation`, `machine_translation`, `keywords`,
    /// `hypothetical_answer`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expanded_with: Vec<String>,
    /// How the question itself steered the ranking: `identifier:<name>` (it names an identifier
    /// the specs contain, so it was ranked without the semantic signal), `asks_for:<kind>` (the
    /// specs of that kind were lifted). See README "How a question is read".
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub read_as: Vec<String>,
}

/// Single-strategy search mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SearchMode {
    Lexical,
    Semantic,
}

/// `kdd search` request (QRY-002 semantic, or lexical BM25).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchRequest {
    pub query: String,
    pub mode: SearchMode,
    #[serde(default)]
    pub kinds: Vec<Kind>,
    #[serde(default)]
    pub layers: Vec<Layer>,
    #[serde(default)]
    pub domain: Option<String>,
    #[serde(default = "default_limit")]
    pub limit: usize,
    #[serde(default)]
    pub min_score: f32,
    /// Agent-side expansion (keywords, hypothetical answer, translation).
    #[serde(default, flatten)]
    pub expansion: Expansion,
}

/// `kdd search` response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SearchResponse {
    pub results: Vec<Hit>,
    pub warnings: Vec<Warning>,
    pub total_results: usize,
    /// Model used for semantic search.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub embedding_model: Option<String>,
    /// Expansions the search used.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub expanded_with: Vec<String>,
}

/// Short description of a node in graph answers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeBrief {
    pub id: String,
    pub kind: Kind,
    pub title: String,
    pub layer: Layer,
    pub source_file: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub domain: Option<String>,
}

/// QRY-001 request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GraphRequest {
    /// Full id, short id (`UC-004`), file stem or path.
    pub node: String,
    /// 1–5, default 2.
    #[serde(default = "default_graph_depth")]
    pub depth: u8,
    /// Only these edge types (empty = all).
    #[serde(default)]
    pub edge_types: Vec<String>,
    /// Only nodes of these kinds in `related_nodes` (empty = all).
    #[serde(default)]
    pub kinds: Vec<Kind>,
    #[serde(default = "default_true")]
    pub respect_layers: bool,
}

/// A node reached from the center.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RelatedNode {
    #[serde(flatten)]
    pub node: NodeBrief,
    /// Hops from the center.
    pub distance: u8,
}

/// QRY-001 response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GraphResponse {
    pub center_node: NodeBrief,
    pub related_nodes: Vec<RelatedNode>,
    pub edges: Vec<EdgeRef>,
    pub total_nodes: usize,
    pub total_edges: usize,
}

/// QRY-004 change types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeType {
    ModifyAttribute,
    AddAttribute,
    Remove,
    Rename,
}

impl ChangeType {
    pub fn parse(s: &str) -> Option<ChangeType> {
        Some(match s.trim().replace('-', "_").as_str() {
            "modify_attribute" | "modify" => ChangeType::ModifyAttribute,
            "add_attribute" | "add" => ChangeType::AddAttribute,
            "remove" | "delete" => ChangeType::Remove,
            "rename" => ChangeType::Rename,
            _ => return None,
        })
    }
}

/// QRY-004 request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImpactRequest {
    pub node: String,
    #[serde(default = "default_change_type")]
    pub change_type: ChangeType,
    /// 1–5, default 3.
    #[serde(default = "default_impact_depth")]
    pub depth: u8,
}

fn default_change_type() -> ChangeType {
    ChangeType::ModifyAttribute
}

/// A node that depends directly on the analysed node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DirectImpact {
    pub id: String,
    pub kind: Kind,
    pub title: String,
    pub source_file: String,
    /// The edge from the dependent to the analysed node (first one when several).
    pub edge_type: String,
    pub impact: String,
    /// `agent` when that edge is an implicit relation from the developer's agent (L3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// A node that depends on the analysed node through others.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TransitiveImpact {
    pub id: String,
    pub kind: Kind,
    pub title: String,
    pub source_file: String,
    /// Node ids from the analysed node to this one.
    pub path: Vec<String>,
    pub edge_types: Vec<String>,
    pub distance: u8,
    pub impact: String,
    /// `agent` when an edge of the path is an implicit relation from the developer's agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

/// A preliminary impact note the developer's agent wrote for the analysed node (L3).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AgentImpactNote {
    pub note: String,
    /// Agent id (`program@hash`).
    pub agent: String,
    /// Always `agent`.
    pub source: String,
}

/// A BDD scenario to re-run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScenarioRef {
    /// Feature file name (`retrieve-impact.feature`).
    pub feature: String,
    pub source_file: String,
    pub scenario: String,
    pub reason: String,
}

/// QRY-004 response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImpactResponse {
    pub analyzed_node: NodeBrief,
    pub change_type: ChangeType,
    pub directly_affected: Vec<DirectImpact>,
    pub transitively_affected: Vec<TransitiveImpact>,
    pub scenarios_to_rerun: Vec<ScenarioRef>,
    pub total_directly_affected: usize,
    pub total_transitively_affected: usize,
    pub total_scenarios: usize,
    /// True when propagation stopped at `depth` with more dependents beyond.
    pub truncated: bool,
    /// The agent's impact notes for the analysed node (L3), marked `source: agent`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agent_notes: Vec<AgentImpactNote>,
}

/// QRY-005 request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CoverageRequest {
    pub node: String,
}

/// One governance expectation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CoverageItem {
    pub category: String,
    pub description: String,
    pub edge_type: String,
    /// `covered` or `missing`.
    pub status: String,
    pub found: Vec<String>,
}

/// QRY-005 response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CoverageResponse {
    pub analyzed_node: NodeBrief,
    pub required: Vec<CoverageItem>,
    pub present: usize,
    pub missing: usize,
    #[serde(serialize_with = "short_f32")]
    pub coverage_percent: f32,
}

/// QRY-006 request.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ViolationsRequest {
    #[serde(default)]
    pub kinds: Vec<Kind>,
    #[serde(default)]
    pub layers: Vec<Layer>,
}

/// One edge that breaks BR-LAYER-001.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Violation {
    pub from_node: String,
    pub from_layer: Layer,
    pub to_node: String,
    pub to_layer: Layer,
    pub edge_type: String,
    pub source_file: String,
    pub explanation: String,
}

/// QRY-006 response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ViolationsResponse {
    pub violations: Vec<Violation>,
    pub total_violations: usize,
    pub total_edges_analyzed: usize,
    /// Percentage of analysed edges that violate the rule.
    #[serde(serialize_with = "short_f32")]
    pub violation_rate: f32,
}

/// `kdd orphans` request.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct OrphansRequest {
    #[serde(default)]
    pub edge_types: Vec<String>,
}

pub use crate::cache::Orphan;

/// `kdd orphans` response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OrphansResponse {
    pub orphans: Vec<Orphan>,
    pub total_orphans: usize,
    pub total_edges: usize,
    #[serde(serialize_with = "short_f32")]
    pub orphan_rate: f32,
}

/// QRY-007 request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContextRequest {
    /// File paths, ids, names, keywords.
    pub hints: Vec<String>,
    /// 1–3, default 1.
    #[serde(default = "default_context_depth")]
    pub depth: u8,
    /// Default 4000.
    #[serde(default = "default_context_tokens")]
    pub max_tokens: usize,
}

/// One constraint or behaviour item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContextItem {
    pub node_id: String,
    pub kind: Kind,
    pub title: String,
    pub content: String,
    pub source_file: String,
    pub reached_via: String,
}

/// How a hint was resolved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResolvedEntity {
    pub node_id: String,
    pub matched_from: String,
    /// `exact_id`, `short_id`, `path`, `basename`, `title`, `alias`, `text_search`.
    pub match_method: String,
}

/// QRY-007 response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ContextResponse {
    pub constraints: Vec<ContextItem>,
    pub behavior: Vec<ContextItem>,
    pub resolved_entities: Vec<ResolvedEntity>,
    /// Human-readable warnings (`No match found for hint: 'x'`).
    pub warnings: Vec<String>,
    pub total_items: usize,
    pub total_tokens: usize,
}
