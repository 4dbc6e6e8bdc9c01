//! The request bodies and parameters of each endpoint / MCP tool (QRY-001…007), each with the
//! strict validation that turns it into a query request, and the calls into [`crate::query`].

use super::*;
use crate::cache::Cache;

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
        // A huge value is echoed in exponent form (`-1e308`, not its 309 digits).
        let got = if v.abs() < 1e6 {
            v.to_string()
        } else {
            format!("{v:e}")
        };
        return Err(ApiError::bad(
            "INVALID_MIN_SCORE",
            format!("`min_score` must be between 0 and 1 (got {got})"),
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
        req.offset = offset as usize;
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
                read_as: Vec::new(),
                total_results: s.results.len(),
                results: s.results,
                graph_expansion: Vec::new(),
                warnings: s.warnings,
                total_tokens,
                next_offset: None,
            }
        }
    };
    // The hybrid ranking pages itself (the budget is spent on the page); a single strategy
    // has no budget, so its page is the hits after the offset.
    if plan.offset > 0 && plan.strategy != Strategy::Hybrid {
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
