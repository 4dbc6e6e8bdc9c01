//! Request bodies shared by the HTTP API and the MCP tools, their strict validation, and the
//! calls into [`crate::query`].
//!
//! Every body rejects unknown fields and checks every range of QRY-001…007 before the query
//! runs, so a client learns which parameter is wrong from a stable error `code`
//! (`QUERY_TOO_SHORT`, `INVALID_DEPTH`, `INVALID_KIND`, `UNKNOWN_PARAMETER`…). Errors never
//! carry server paths: messages are built here or come from the query layer, whose
//! `INDEX_UNAVAILABLE` text (which names the index directory) is replaced by a fixed sentence.

use crate::cache::Cache;
use crate::query::{self, types::*};
use crate::spec::{Kind, Layer};
use serde::Deserialize;

/// An API error: HTTP status, stable code and a message safe to show a client.
#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub status: u16,
    pub code: String,
    pub message: String,
}

impl ApiError {
    pub fn new(status: u16, code: &str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code: code.to_string(),
            message: message.into(),
        }
    }

    /// 400 with a code.
    pub fn bad(code: &str, message: impl Into<String>) -> ApiError {
        ApiError::new(400, code, message)
    }

    /// The index is missing or cannot be opened (503).
    pub fn unavailable() -> ApiError {
        ApiError::new(
            503,
            "INDEX_UNAVAILABLE",
            "No index available for querying (run `kdd index` and commit `.kdd-index/`)",
        )
    }

    /// An internal failure; the detail goes to the server log only.
    pub fn internal() -> ApiError {
        ApiError::new(
            500,
            "INTERNAL",
            "internal error (see the server log with this request id)",
        )
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code, self.message)
    }
}

impl From<query::Error> for ApiError {
    fn from(e: query::Error) -> ApiError {
        let code = e.code();
        // `CODE: message` → keep the message part only (the code is separate).
        let text = e.to_string();
        let msg = text
            .strip_prefix(code)
            .and_then(|m| m.strip_prefix(": "))
            .unwrap_or(&text)
            .to_string();
        match e {
            query::Error::IndexUnavailable(_) => ApiError::unavailable(),
            // The index exists but its query cache could not be read or rebuilt (a damaged
            // cache is rebuilt by itself first): say so, not "run kdd index".
            query::Error::Cache(_) => ApiError::new(
                503,
                code,
                "the query cache could not be opened or rebuilt (see the server log)",
            ),
            query::Error::NodeNotFound(_) => ApiError::new(404, code, msg),
            query::Error::NoEmbeddings(_) | query::Error::UnknownKind(_) => {
                ApiError::new(422, code, msg)
            }
            query::Error::Ambiguous { .. } => ApiError::new(409, code, msg),
            _ => ApiError::bad(code, msg),
        }
    }
}

impl From<crate::cache::Error> for ApiError {
    fn from(e: crate::cache::Error) -> ApiError {
        ApiError::from(query::Error::from(e))
    }
}

type R<T> = Result<T, ApiError>;

/// A list of strings given as a JSON array or one comma-separated string.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(untagged)]
pub enum StrList {
    #[default]
    None,
    One(String),
    Many(Vec<String>),
}

impl StrList {
    /// The items, split on commas, trimmed, empties dropped.
    pub fn items(&self) -> Vec<String> {
        let raw: Vec<&str> = match self {
            StrList::None => Vec::new(),
            StrList::One(s) => vec![s.as_str()],
            StrList::Many(v) => v.iter().map(String::as_str).collect(),
        };
        raw.iter()
            .flat_map(|s| s.split(','))
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect()
    }
}

/// Parse kind names (`use-case`, `business_rule`, `entity`); unknown → `INVALID_KIND`.
pub fn parse_kinds(list: &StrList) -> R<Vec<Kind>> {
    list.items()
        .iter()
        .map(|s| {
            Kind::parse(s).ok_or_else(|| {
                ApiError::bad(
                    "INVALID_KIND",
                    format!(
                        "unknown kind `{}`; use one of: {}",
                        clip(s, 40),
                        Kind::ALL
                            .iter()
                            .map(|k| k.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )
            })
        })
        .collect()
}

/// Parse layer names (`01-domain`, `01`, `domain`); unknown → `INVALID_LAYER`.
pub fn parse_layers(list: &StrList) -> R<Vec<Layer>> {
    list.items()
        .iter()
        .map(|s| {
            Layer::parse(s).ok_or_else(|| {
                ApiError::bad(
                    "INVALID_LAYER",
                    format!(
                        "unknown layer `{}`; use 00-requirements, 01-domain, 02-behavior, \
                         03-experience, 04-verification or 05-architecture",
                        clip(s, 40)
                    ),
                )
            })
        })
        .collect()
}

fn clip(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

fn int_in(name: &str, v: Option<i64>, default: i64, lo: i64, hi: i64, code: &str) -> R<i64> {
    let v = v.unwrap_or(default);
    if v < lo || v > hi {
        return Err(ApiError::bad(
            code,
            format!("`{name}` must be between {lo} and {hi} (got {v})"),
        ));
    }
    Ok(v)
}

fn query_text(q: &Option<String>) -> R<String> {
    let q = q.as_deref().unwrap_or("").trim();
    if q.is_empty() {
        return Err(ApiError::bad(
            "QUERY_MISSING",
            "`query` is required: the question or keywords to search for",
        ));
    }
    if query::too_short(q) {
        return Err(ApiError::bad(
            "QUERY_TOO_SHORT",
            "Query text must have at least 3 letters or digits",
        ));
    }
    if q.len() > 2000 {
        return Err(ApiError::bad(
            "QUERY_TOO_LONG",
            "Query text must be at most 2000 bytes",
        ));
    }
    Ok(q.to_string())
}

fn node_arg(n: &Option<String>) -> R<String> {
    let n = n.as_deref().unwrap_or("").trim();
    if n.is_empty() {
        return Err(ApiError::bad(
            "MISSING_NODE",
            "`node` is required: a full id like `Entity:Pedido`, a short id like `UC-004`, a \
             file stem or a spec path",
        ));
    }
    if n.len() > 512 {
        return Err(ApiError::bad("INVALID_NODE", "`node` is too long"));
    }
    Ok(n.to_string())
}

/// Token budget bounds shared by every endpoint.
pub const MIN_TOKENS: i64 = 100;
pub const MAX_TOKENS: i64 = 50_000;

/// `POST /v1/retrieve/context` and `kdd_query` (QRY-003 hybrid; `query_text` is an alias).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ContextBody {
    #[serde(default, alias = "query_text")]
    pub query: Option<String>,
    /// `hybrid` (default), `semantic` or `lexical`.
    #[serde(default)]
    pub strategy: Option<String>,
    #[serde(default)]
    pub expand_graph: Option<bool>,
    #[serde(default)]
    pub depth: Option<i64>,
    #[serde(default, alias = "kinds")]
    pub include_kinds: StrList,
    #[serde(default)]
    pub layers: StrList,
    #[serde(default)]
    pub domain: Option<String>,
    #[serde(default)]
    pub respect_layers: Option<bool>,
    #[serde(default)]
    pub min_score: Option<f64>,
    #[serde(default)]
    pub limit: Option<i64>,
    #[serde(default)]
    pub max_tokens: Option<i64>,
    /// MCP paging: skip this many results (default 0).
    #[serde(default)]
    pub offset: Option<i64>,
    /// Agent-side expansion: extra lexical queries in the corpus's words.
    #[serde(default)]
    pub keywords: Vec<String>,
    /// Agent-side expansion: a short passage like the spec that would answer.
    #[serde(default)]
    pub hypothetical_answer: Option<String>,
    /// Agent-side expansion: the question in the corpus's language.
    #[serde(default)]
    pub translation: Option<String>,
}

/// A validated QRY-003 request plus the chosen strategy.
#[derive(Debug, Clone)]
pub struct ContextPlan {
    pub strategy: Strategy,
    pub req: HybridRequest,
    pub offset: usize,
}

/// The agent-side expansion of a body, validated (`INVALID_EXPANSION` when oversized).
fn expansion(
    keywords: &[String],
    hypothetical_answer: &Option<String>,
    translation: &Option<String>,
) -> R<query::Expansion> {
    let e = query::Expansion {
        keywords: keywords.to_vec(),
        hypothetical_answer: hypothetical_answer.clone(),
        translation: translation.clone(),
    };
    query::validate_expansion(&e)
        .map_err(|err| ApiError::bad("INVALID_EXPANSION", err.to_string()))?;
    Ok(e)
}

/// Retrieval strategy of `POST /v1/retrieve/context`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    Hybrid,
    Semantic,
    Lexical,
}

fn min_score(v: Option<f64>, default: f64) -> R<f32> {
    let v = v.unwrap_or(default);
    if !(0.0..=1.0).contains(&v) || v.is_nan() {
        return Err(ApiError::bad(
            "INVALID_MIN_SCORE",
            format!("`min_score` must be between 0 and 1 (got {v})"),
        ));
    }
    Ok(v as f32)
}

impl ContextBody {
    /// Check every parameter (QRY-003 ranges). `default_tokens` is 8000 over HTTP and lower
    /// over MCP.
    pub fn plan(&self, default_tokens: i64) -> R<ContextPlan> {
        let query = query_text(&self.query)?;
        let strategy = match self.strategy.as_deref().map(str::trim) {
            None | Some("") | Some("hybrid") => Strategy::Hybrid,
            Some("semantic") => Strategy::Semantic,
            Some("lexical") => Strategy::Lexical,
            Some(other) => {
                return Err(ApiError::bad(
                    "INVALID_STRATEGY",
                    format!(
                        "unknown strategy `{}`; use hybrid, semantic or lexical",
                        clip(other, 40)
                    ),
                ))
            }
        };
        let depth = int_in("depth", self.depth, 2, 1, 5, "INVALID_DEPTH")?;
        let limit = int_in("limit", self.limit, 10, 1, 100, "INVALID_LIMIT")?;
        let max_tokens = int_in(
            "max_tokens",
            self.max_tokens,
            default_tokens,
            MIN_TOKENS,
            MAX_TOKENS,
            "INVALID_MAX_TOKENS",
        )?;
        let offset = int_in("offset", self.offset, 0, 0, 99, "INVALID_OFFSET")?;
        if limit + offset > 100 {
            return Err(ApiError::bad(
                "INVALID_OFFSET",
                "`offset` + `limit` must be at most 100 (refine the query instead)",
            ));
        }
        let mut req = HybridRequest::new(query);
        req.kinds = parse_kinds(&self.include_kinds)?;
        req.layers = parse_layers(&self.layers)?;
        req.domain = self
            .domain
            .as_deref()
            .map(str::trim)
            .filter(|d| !d.is_empty())
            .map(str::to_string);
        req.limit = (limit + offset) as usize;
        req.min_score = min_score(self.min_score, query::DEFAULT_MIN_SCORE as f64)?;
        req.depth = depth as u8;
        req.expand = self.expand_graph.unwrap_or(true);
        req.respect_layers = self.respect_layers.unwrap_or(true);
        req.max_tokens = max_tokens as usize;
        req.expansion = expansion(&self.keywords, &self.hypothetical_answer, &self.translation)?;
        Ok(ContextPlan {
            strategy,
            req,
            offset: offset as usize,
        })
    }
}

/// Run a validated context plan. Semantic on an L1 index falls back to lexical with a
/// `NO_EMBEDDINGS` warning, as QRY-003 says.
pub fn run_context(cache: &Cache, plan: &ContextPlan) -> R<HybridResponse> {
    let mut resp = match plan.strategy {
        Strategy::Hybrid => query::hybrid(cache, &plan.req)?,
        Strategy::Semantic | Strategy::Lexical => {
            let s = run_search(
                cache,
                &SearchRequest {
                    query: plan.req.query.clone(),
                    mode: if plan.strategy == Strategy::Semantic {
                        SearchMode::Semantic
                    } else {
                        SearchMode::Lexical
                    },
                    kinds: plan.req.kinds.clone(),
                    layers: plan.req.layers.clone(),
                    domain: plan.req.domain.clone(),
                    limit: plan.req.limit,
                    min_score: plan.req.min_score,
                    expansion: plan.req.expansion.clone(),
                },
            )?;
            let total_tokens = s
                .results
                .iter()
                .map(|h| serde_json::to_string(h).map(|j| j.len() / 4).unwrap_or(0))
                .sum();
            HybridResponse {
                expanded_with: s.expanded_with,
                total_results: s.results.len(),
                results: s.results,
                graph_expansion: Vec::new(),
                warnings: s.warnings,
                total_tokens,
            }
        }
    };
    if plan.offset > 0 {
        resp.results = resp.results.into_iter().skip(plan.offset).collect();
        resp.total_results = resp.results.len();
    }
    Ok(resp)
}

/// `POST /v1/retrieve/search` (QRY-002; lexical when the index has no embeddings).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchBody {
    #[serde(default, alias = "query_text")]
    pub query: Option<String>,
    /// `semantic` (default; falls back to lexical on L1) or `lexical`.
    #[serde(default)]
    pub mode: Option<String>,
    #[serde(default, alias = "include_kinds")]
    pub kinds: StrList,
    #[serde(default)]
    pub layers: StrList,
    #[serde(default)]
    pub domain: Option<String>,
    #[serde(default)]
    pub limit: Option<i64>,
    #[serde(default)]
    pub min_score: Option<f64>,
    /// Agent-side expansion: extra lexical queries in the corpus's words.
    #[serde(default)]
    pub keywords: Vec<String>,
    /// Agent-side expansion: a short passage like the spec that would answer.
    #[serde(default)]
    pub hypothetical_answer: Option<String>,
    /// Agent-side expansion: the question in the corpus's language.
    #[serde(default)]
    pub translation: Option<String>,
}

impl SearchBody {
    pub fn validate(&self) -> R<SearchRequest> {
        let query = query_text(&self.query)?;
        let mode = match self.mode.as_deref().map(str::trim) {
            None | Some("") | Some("semantic") => SearchMode::Semantic,
            Some("lexical") => SearchMode::Lexical,
            Some(other) => {
                return Err(ApiError::bad(
                    "INVALID_MODE",
                    format!(
                        "unknown mode `{}`; use semantic or lexical",
                        clip(other, 40)
                    ),
                ))
            }
        };
        Ok(SearchRequest {
            query,
            mode,
            kinds: parse_kinds(&self.kinds)?,
            layers: parse_layers(&self.layers)?,
            domain: self
                .domain
                .as_deref()
                .map(str::trim)
                .filter(|d| !d.is_empty())
                .map(str::to_string),
            limit: int_in("limit", self.limit, 10, 1, 100, "INVALID_LIMIT")? as usize,
            min_score: min_score(self.min_score, 0.0)?,
            expansion: expansion(&self.keywords, &self.hypothetical_answer, &self.translation)?,
        })
    }
}

/// Semantic search that degrades to lexical (with a `NO_EMBEDDINGS` warning) on L1.
pub fn run_search(cache: &Cache, req: &SearchRequest) -> R<SearchResponse> {
    match query::search(cache, req) {
        Err(query::Error::NoEmbeddings(why)) if req.mode == SearchMode::Semantic => {
            let mut lex = req.clone();
            lex.mode = SearchMode::Lexical;
            let mut r = query::search(cache, &lex)?;
            r.warnings.push(Warning::new(
                "NO_EMBEDDINGS",
                format!("No embeddings available, falling back to lexical ({why})"),
            ));
            Ok(r)
        }
        other => Ok(other?),
    }
}

/// `POST /v1/retrieve/context-hints` and `kdd_context` (QRY-007).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HintsBody {
    #[serde(default)]
    pub hints: StrList,
    #[serde(default)]
    pub depth: Option<i64>,
    #[serde(default)]
    pub max_tokens: Option<i64>,
}

impl HintsBody {
    pub fn validate(&self, default_tokens: i64) -> R<ContextRequest> {
        let hints: Vec<String> = match &self.hints {
            StrList::None => Vec::new(),
            StrList::One(s) => vec![s.trim().to_string()],
            StrList::Many(v) => v.iter().map(|s| s.trim().to_string()).collect(),
        }
        .into_iter()
        .filter(|s| !s.is_empty())
        .collect();
        if hints.is_empty() {
            return Err(ApiError::bad(
                "EMPTY_HINTS",
                "At least one hint is required (file paths, entity names or keywords)",
            ));
        }
        if hints.len() > 50 || hints.iter().any(|h| h.len() > 512) {
            return Err(ApiError::bad(
                "TOO_MANY_HINTS",
                "At most 50 hints of at most 512 bytes each",
            ));
        }
        Ok(ContextRequest {
            hints,
            depth: int_in("depth", self.depth, 1, 1, 3, "INVALID_DEPTH")? as u8,
            max_tokens: int_in(
                "max_tokens",
                self.max_tokens,
                default_tokens,
                MIN_TOKENS,
                MAX_TOKENS,
                "INVALID_MAX_TOKENS",
            )? as usize,
        })
    }
}

/// `GET /v1/retrieve/graph` and `kdd_graph` (QRY-001).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GraphParams {
    #[serde(default)]
    pub node: Option<String>,
    #[serde(default)]
    pub depth: Option<i64>,
    #[serde(default)]
    pub edge_types: StrList,
    #[serde(default, alias = "include_kinds")]
    pub kinds: StrList,
    #[serde(default)]
    pub respect_layers: Option<bool>,
}

impl GraphParams {
    pub fn validate(&self) -> R<GraphRequest> {
        let edge_types = self.edge_types.items();
        if let Some(bad) = edge_types
            .iter()
            .find(|t| !t.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'))
        {
            return Err(ApiError::bad(
                "INVALID_EDGE_TYPE",
                format!(
                    "edge type `{}` must be letters, digits and `_` (e.g. ENTITY_RULE, emits)",
                    clip(bad, 40)
                ),
            ));
        }
        Ok(GraphRequest {
            node: node_arg(&self.node)?,
            depth: int_in("depth", self.depth, 2, 1, 5, "INVALID_DEPTH")? as u8,
            edge_types,
            kinds: parse_kinds(&self.kinds)?,
            respect_layers: self.respect_layers.unwrap_or(true),
        })
    }
}

/// `GET /v1/retrieve/impact` and `kdd_impact` (QRY-004).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImpactParams {
    #[serde(default)]
    pub node: Option<String>,
    #[serde(default)]
    pub change_type: Option<String>,
    #[serde(default)]
    pub depth: Option<i64>,
}

impl ImpactParams {
    pub fn validate(&self) -> R<ImpactRequest> {
        let change_type = match self.change_type.as_deref() {
            None | Some("") => ChangeType::ModifyAttribute,
            Some(s) => ChangeType::parse(s).ok_or_else(|| {
                ApiError::bad(
                    "INVALID_CHANGE_TYPE",
                    format!(
                        "unknown change_type `{}`; use modify_attribute, add_attribute, remove \
                         or rename",
                        clip(s, 40)
                    ),
                )
            })?,
        };
        Ok(ImpactRequest {
            node: node_arg(&self.node)?,
            change_type,
            depth: int_in("depth", self.depth, 3, 1, 5, "INVALID_DEPTH")? as u8,
        })
    }
}

/// `GET /v1/retrieve/coverage` and `kdd_coverage` (QRY-005).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CoverageParams {
    #[serde(default)]
    pub node: Option<String>,
}

impl CoverageParams {
    pub fn validate(&self) -> R<CoverageRequest> {
        Ok(CoverageRequest {
            node: node_arg(&self.node)?,
        })
    }
}

/// `GET /v1/retrieve/layer-violations` and `kdd_violations` (QRY-006).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ViolationsParams {
    #[serde(default, alias = "include_kinds")]
    pub kinds: StrList,
    #[serde(default)]
    pub layers: StrList,
}

impl ViolationsParams {
    pub fn validate(&self) -> R<ViolationsRequest> {
        Ok(ViolationsRequest {
            kinds: parse_kinds(&self.kinds)?,
            layers: parse_layers(&self.layers)?,
        })
    }
}

/// Paging offset of list answers (`offset`, 0–100000).
pub fn offset_of(v: Option<i64>) -> R<usize> {
    Ok(int_in("offset", v, 0, 0, 100_000, "INVALID_OFFSET")? as usize)
}

/// Decode a JSON body strictly: unknown fields → `UNKNOWN_PARAMETER`, wrong types →
/// `INVALID_PARAMETER`, not JSON → `INVALID_JSON`.
pub fn decode<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> R<T> {
    let bytes = if bytes.iter().all(u8::is_ascii_whitespace) {
        b"{}".as_slice()
    } else {
        bytes
    };
    serde_json::from_slice(bytes).map_err(json_error)
}

/// Decode a JSON value (MCP arguments) strictly.
pub fn decode_value<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> R<T> {
    serde_json::from_value(v).map_err(json_error)
}

fn json_error(e: serde_json::Error) -> ApiError {
    let msg = e.to_string();
    // serde messages name the field and the expected type; never paths.
    let msg = msg.split(" at line ").next().unwrap_or(&msg).to_string();
    if msg.starts_with("unknown field") {
        ApiError::bad("UNKNOWN_PARAMETER", msg)
    } else if e.is_syntax() || e.is_eof() {
        ApiError::bad(
            "INVALID_JSON",
            format!("request body is not valid JSON: {msg}"),
        )
    } else {
        ApiError::bad("INVALID_PARAMETER", msg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_too_short_and_alias() {
        let b: ContextBody = decode(br#"{"query_text":"ab"}"#).unwrap();
        assert_eq!(b.plan(8000).unwrap_err().code, "QUERY_TOO_SHORT");
        let b: ContextBody = decode(br#"{"query_text":"pedido"}"#).unwrap();
        assert_eq!(b.plan(8000).unwrap().req.query, "pedido");
    }

    #[test]
    fn ranges_and_unknown_fields() {
        let b: ContextBody = decode(br#"{"query":"pedido","depth":9}"#).unwrap();
        assert_eq!(b.plan(8000).unwrap_err().code, "INVALID_DEPTH");
        let b: ContextBody = decode(br#"{"query":"pedido","limit":0}"#).unwrap();
        assert_eq!(b.plan(8000).unwrap_err().code, "INVALID_LIMIT");
        let b: ContextBody = decode(br#"{"query":"pedido","min_score":2}"#).unwrap();
        assert_eq!(b.plan(8000).unwrap_err().code, "INVALID_MIN_SCORE");
        let e = decode::<ContextBody>(br#"{"query":"pedido","bogus":1}"#).unwrap_err();
        assert_eq!(e.code, "UNKNOWN_PARAMETER");
        let e = decode::<ContextBody>(br#"{"query":"pedido","depth":"x"}"#).unwrap_err();
        assert_eq!(e.code, "INVALID_PARAMETER");
        let e = decode::<ContextBody>(b"{not json").unwrap_err();
        assert_eq!(e.code, "INVALID_JSON");
        let b: ContextBody =
            decode(br#"{"query":"pedido","include_kinds":["use-case","nope"]}"#).unwrap();
        assert_eq!(b.plan(8000).unwrap_err().code, "INVALID_KIND");
    }

    #[test]
    fn lists_accept_commas() {
        let b: ContextBody =
            decode(br#"{"query":"pedido","include_kinds":"entity, use-case","layers":["01"]}"#)
                .unwrap();
        let p = b.plan(8000).unwrap();
        assert_eq!(p.req.kinds, vec![Kind::Entity, Kind::UseCase]);
        assert_eq!(p.req.layers, vec![Layer::Domain]);
    }

    #[test]
    fn hints_required() {
        let b: HintsBody = decode(br#"{"hints":[]}"#).unwrap();
        assert_eq!(b.validate(4000).unwrap_err().code, "EMPTY_HINTS");
        let b: HintsBody = decode(br#"{"hints":["pedido.ts"],"depth":4}"#).unwrap();
        assert_eq!(b.validate(4000).unwrap_err().code, "INVALID_DEPTH");
    }
}
