//! `kdd mcp`: the MCP server over stdio (rmcp, pinned), for coding agents.
//!
//! Tools (snake_case, `kdd_` prefix, arguments named like the HTTP bodies): `kdd_query`
//! (hybrid, QRY-003), `kdd_context` (QRY-007 hints), `kdd_graph`, `kdd_impact`, `kdd_coverage`,
//! `kdd_violations`, `kdd_read` (a node's spec text or one section, confined to the specs root),
//! `kdd_list` (nodes by kind/layer/domain, paged) and `kdd_status`. All are annotated
//! read-only, idempotent and closed-world.
//!
//! Every answer is one JSON text block that carries `index` (level, node count, freshness,
//! stale specs; see [`super::Freshness`]) and stays within a token budget (`max_tokens`,
//! default 4000 ≈ 16k characters, far under agents' 25k-token tool-output limits). Long lists
//! are paged, never cut silently: the answer's `page` says `{offset, returned, total,
//! next_offset}`; call again with `offset = next_offset`. The cache freshness is checked on
//! every call, so a re-index is picked up without restarting the server. Stdout carries only
//! the protocol; logs go to stderr. A line that is not JSON is answered `-32700` (id null) by
//! the framing in [`super::stdio`] and the session goes on.

use super::api::{self, ApiError};
use super::Engine;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{json, Map, Value};
use std::sync::Arc;
use std::time::Duration;

/// Default token budget of an answer.
pub const DEFAULT_TOKENS: i64 = 4000;
/// Largest budget a caller may ask for.
pub const MAX_TOKENS: i64 = 20_000;

/// The MCP handler.
#[derive(Clone)]
pub struct KddMcp {
    engine: Arc<Engine>,
    tools: Arc<Vec<Tool>>,
    timeout: Duration,
}

fn schema(v: Value) -> Arc<Map<String, Value>> {
    match v {
        Value::Object(m) => Arc::new(m),
        _ => Arc::new(Map::new()),
    }
}

fn ro(title: &str) -> ToolAnnotations {
    ToolAnnotations::with_title(title)
        .read_only(true)
        .destructive(false)
        .idempotent(true)
        .open_world(false)
}

fn p_kinds() -> Value {
    json!({"type": "array", "items": {"type": "string"},
        "description": "Only these kinds, e.g. [\"use-case\", \"business-rule\", \"entity\", \"command\", \"event\"]. Omit for all."})
}
fn p_layers() -> Value {
    json!({"type": "array", "items": {"type": "string"},
        "description": "Only these layers: 00-requirements, 01-domain, 02-behavior, 03-experience, 04-verification, 05-architecture. Omit for all."})
}
fn p_node() -> Value {
    json!({"type": "string", "minLength": 1,
        "description": "The node: full id (`Entity:Pedido`, `UC:UC-004`), short id (`UC-004`), file stem, title or spec path."})
}
fn p_tokens() -> Value {
    json!({"type": "integer", "minimum": api::MIN_TOKENS, "maximum": MAX_TOKENS,
        "description": "Token budget of the answer (default 4000). Long lists are paged, not cut."})
}
fn p_offset() -> Value {
    json!({"type": "integer", "minimum": 0,
        "description": "Paging: skip this many list items (use `page.next_offset` of the previous answer)."})
}

fn tools() -> Vec<Tool> {
    vec![
        Tool::new(
            "kdd_query",
            "Search the KDD specs (hybrid: lexical + semantic + typed graph expansion). The main \
             entry point: describe the task in natural language and get the most relevant spec \
             nodes (use cases, rules, entities, commands, events…) with snippets. Ask in English \
             or Spanish: a question in the other language of the specs is also searched \
             translated (a QUERY_TRANSLATED warning quotes it). Each result cites its best \
             evidence: `section` (heading path) and `lines` [start, end] in `source_file`; \
             `score` is a calibrated confidence (an empty answer with NO_MATCH means nothing \
             matched). To improve recall, add `keywords`, a `hypothetical_answer` and, when \
             you ask in another language than the specs', your own `translation`; the answer's \
             `expanded_with` lists what was used. Follow up with kdd_read for full text or \
             kdd_graph/kdd_impact for relations.",
            schema(json!({
                "type": "object",
                "properties": {
                    "query": {"type": "string", "minLength": 3, "description": "What you are looking for, in natural language (≥ 3 characters), e.g. \"cancel an order\"."},
                    "include_kinds": p_kinds(),
                    "layers": p_layers(),
                    "domain": {"type": "string", "description": "Only this domain (multi-domain repos)."},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 100, "description": "Maximum results (default 10)."},
                    "min_score": {"type": "number", "minimum": 0, "maximum": 1, "description": "Drop results below this calibrated score (default 0.15). Scores are absolute confidences comparable across questions: ≥ 0.6 is a strong match, < 0.15 no match (the answer is then empty with a NO_MATCH warning)."},
                    "depth": {"type": "integer", "minimum": 1, "maximum": 5, "description": "Graph expansion depth (default 2)."},
                    "expand_graph": {"type": "boolean", "description": "Add nodes linked to the top hits (default true)."},
                    "respect_layers": {"type": "boolean", "description": "Skip links that violate the KDD layer rule while expanding (default true)."},
                    "strategy": {"type": "string", "enum": ["hybrid", "semantic", "lexical"], "description": "Retrieval strategy (default hybrid)."},
                    "max_tokens": p_tokens(),
                    "offset": {"type": "integer", "minimum": 0, "maximum": 99, "description": "Skip this many results (paging)."},
                    "keywords": {"type": "array", "items": {"type": "string", "maxLength": 2000}, "maxItems": 20, "description": "Optional extra lexical queries: ids, names and terms the specs are likely to use (e.g. [\"BR-ORDER-002\", \"refund window\"]). Searched with the question."},
                    "hypothetical_answer": {"type": "string", "maxLength": 2000, "description": "Optional: a short passage written like the spec that would answer (2-3 sentences in the specs' style and language). Searched with the question; helps paraphrased questions."},
                    "translation": {"type": "string", "maxLength": 2000, "description": "Optional: the question rendered in the specs' language when you ask in another one (replaces the built-in machine translation)."}
                },
                "required": ["query"],
                "additionalProperties": false
            })),
        )
        .annotate(ro("Search KDD specs")),
        Tool::new(
            "kdd_context",
            "Before changing code: give hints (file paths you will touch, entity names, \
             keywords) and get the constraints (business rules, policies, invariants, command \
             pre/postconditions) and behaviour (use cases) that apply, each with how it was \
             reached.",
            schema(json!({
                "type": "object",
                "properties": {
                    "hints": {"type": "array", "items": {"type": "string"}, "minItems": 1, "description": "File paths, node ids, entity names or keywords, e.g. [\"src/orders/pedido.ts\", \"checkout\"]."},
                    "depth": {"type": "integer", "minimum": 1, "maximum": 3, "description": "Graph traversal depth (default 1)."},
                    "max_tokens": p_tokens()
                },
                "required": ["hints"],
                "additionalProperties": false
            })),
        )
        .annotate(ro("Constraints for a change")),
        Tool::new(
            "kdd_graph",
            "Nodes and typed edges around one node (QRY-001), e.g. the rules, events and use \
             cases linked to an entity.",
            schema(json!({
                "type": "object",
                "properties": {
                    "node": p_node(),
                    "depth": {"type": "integer", "minimum": 1, "maximum": 5, "description": "Hops from the node (default 2)."},
                    "edge_types": {"type": "array", "items": {"type": "string"}, "description": "Only these edge types, e.g. [\"ENTITY_RULE\", \"EMITS\"]. Omit for all."},
                    "kinds": p_kinds(),
                    "respect_layers": {"type": "boolean", "description": "Skip layer-violating edges (default true)."},
                    "max_tokens": p_tokens(),
                    "offset": p_offset()
                },
                "required": ["node"],
                "additionalProperties": false
            })),
        )
        .annotate(ro("Graph around a node")),
        Tool::new(
            "kdd_impact",
            "What depends on a node (QRY-004): directly and transitively affected specs and the \
             BDD scenarios to re-run if it changes.",
            schema(json!({
                "type": "object",
                "properties": {
                    "node": p_node(),
                    "change_type": {"type": "string", "enum": ["modify_attribute", "add_attribute", "remove", "rename"], "description": "Kind of change (default modify_attribute)."},
                    "depth": {"type": "integer", "minimum": 1, "maximum": 5, "description": "Propagation depth (default 3)."},
                    "max_tokens": p_tokens(),
                    "offset": p_offset()
                },
                "required": ["node"],
                "additionalProperties": false
            })),
        )
        .annotate(ro("Impact of a change")),
        Tool::new(
            "kdd_coverage",
            "Governance coverage of a node (QRY-005): which expected related specs exist \
             (e.g. an entity's events and rules, a use case's rules and scenarios) and which are \
             missing.",
            schema(json!({
                "type": "object",
                "properties": {"node": p_node()},
                "required": ["node"],
                "additionalProperties": false
            })),
        )
        .annotate(ro("Coverage of a node")),
        Tool::new(
            "kdd_violations",
            "Links that break the KDD layer rule (QRY-006: a lower layer referencing a higher \
             one, e.g. 01-domain → 02-behavior).",
            schema(json!({
                "type": "object",
                "properties": {
                    "kinds": p_kinds(),
                    "layers": p_layers(),
                    "max_tokens": p_tokens(),
                    "offset": p_offset()
                },
                "additionalProperties": false
            })),
        )
        .annotate(ro("Layer violations")),
        Tool::new(
            "kdd_read",
            "Read a spec: the sections of a node (or of a spec file under the specs root), or \
             just one section (by heading, heading path or line: a kdd_query hit's `section` / \
             `lines[0]` read just its cited evidence). Use after kdd_query to read the full text.",
            schema(json!({
                "type": "object",
                "properties": {
                    "node": {"type": "string", "description": "Node id, short id, stem or title (give this or `path`)."},
                    "path": {"type": "string", "description": "Spec file path relative to the specs root, e.g. \"01-domain/entities/Pedido.md\" (no `..`, no absolute paths)."},
                    "section": {"type": "string", "description": "Only this section: a heading (\"Invariants\", \"Flujo Principal\") or a canonical key (invariants, main_flow, preconditions…)."},
                    "line": {"type": "integer", "minimum": 1, "description": "Only the section whose heading is on this line: pass a kdd_query hit's lines[0] to read just its cited evidence."},
                    "max_tokens": p_tokens(),
                    "offset": p_offset()
                },
                "additionalProperties": false
            })),
        )
        .annotate(ro("Read a spec")),
        Tool::new(
            "kdd_list",
            "List spec nodes (id, kind, title, layer, file), filtered by kind, layer or domain, \
             sorted by id, paged.",
            schema(json!({
                "type": "object",
                "properties": {
                    "kinds": p_kinds(),
                    "layers": p_layers(),
                    "domain": {"type": "string", "description": "Only this domain."},
                    "page_size": {"type": "integer", "minimum": 1, "maximum": 200, "description": "Items per page (default 50)."},
                    "max_tokens": p_tokens(),
                    "offset": p_offset()
                },
                "additionalProperties": false
            })),
        )
        .annotate(ro("List spec nodes")),
        Tool::new(
            "kdd_status",
            "Index status: level (L1 graph+lexical / L2 with embeddings), node/edge counts per \
             kind, orphan links, layer violations, and freshness (specs changed since they were \
             indexed).",
            schema(json!({"type": "object", "properties": {}, "additionalProperties": false})),
        )
        .annotate(ro("Index status")),
    ]
}

impl KddMcp {
    pub fn new(engine: Arc<Engine>, timeout: Duration) -> KddMcp {
        KddMcp {
            engine,
            tools: Arc::new(tools()),
            timeout,
        }
    }

    /// Run one tool call synchronously (the blocking pool calls this).
    pub fn call(&self, name: &str, args: Map<String, Value>) -> Result<Value, ApiError> {
        call(&self.engine, name, args)
    }
}

fn take_i64(args: &mut Map<String, Value>, key: &str) -> Result<Option<i64>, ApiError> {
    match args.remove(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n.as_i64().map(Some).ok_or_else(|| {
            ApiError::bad("INVALID_PARAMETER", format!("`{key}` must be an integer"))
        }),
        Some(_) => Err(ApiError::bad(
            "INVALID_PARAMETER",
            format!("`{key}` must be an integer"),
        )),
    }
}

fn budget(v: Option<i64>) -> Result<usize, ApiError> {
    let v = v.unwrap_or(DEFAULT_TOKENS);
    if !(api::MIN_TOKENS..=MAX_TOKENS).contains(&v) {
        return Err(ApiError::bad(
            "INVALID_MAX_TOKENS",
            format!(
                "`max_tokens` must be between {} and {MAX_TOKENS}",
                api::MIN_TOKENS
            ),
        ));
    }
    Ok(v as usize)
}

fn tokens_of(v: &Value) -> usize {
    serde_json::to_string(v)
        .map(|s| s.len())
        .unwrap_or(0)
        .div_ceil(4)
}

/// Keep the answer within `budget` tokens by paging the given list fields (concatenated, in
/// order) from `offset`. Always returns at least one item when any remain.
pub fn page(mut v: Value, lists: &[&str], offset: usize, budget: usize, max_items: usize) -> Value {
    let Value::Object(obj) = &mut v else {
        return v;
    };
    let mut items: Vec<(usize, Value)> = Vec::new();
    for (i, f) in lists.iter().enumerate() {
        if let Some(Value::Array(a)) = obj.get_mut(*f) {
            items.extend(std::mem::take(a).into_iter().map(|x| (i, x)));
        }
    }
    let total = items.len();
    let base = tokens_of(&Value::Object(obj.clone())) + 40;
    let mut used = base;
    let mut taken = 0;
    for (i, item) in items.into_iter().skip(offset) {
        let t = tokens_of(&item) + 1;
        if taken > 0 && (used + t > budget || taken >= max_items) {
            break;
        }
        used += t;
        taken += 1;
        if let Some(Value::Array(a)) = obj.get_mut(lists[i]) {
            a.push(item);
        }
    }
    let next = (offset + taken < total).then_some(offset + taken);
    obj.insert(
        "page".into(),
        json!({"offset": offset, "returned": taken, "total": total, "next_offset": next}),
    );
    v
}

fn to_value<T: serde::Serialize>(v: &T) -> Result<Value, ApiError> {
    serde_json::to_value(v).map_err(|_| ApiError::internal())
}

/// Dispatch one tool call. The answer carries `index` (freshness) on success.
pub fn call(engine: &Engine, name: &str, args: Map<String, Value>) -> Result<Value, ApiError> {
    engine.with_cache(|loaded, reloaded| {
        call_on(engine, loaded.clone(), reloaded, name, args.clone())
    })
}

fn call_on(
    engine: &Engine,
    loaded: std::sync::Arc<super::Loaded>,
    reloaded: bool,
    name: &str,
    mut args: Map<String, Value>,
) -> Result<Value, ApiError> {
    let cache = &loaded.cache;
    let fresh = engine.freshness(&loaded, reloaded, false);
    let mut out = match name {
        "kdd_query" => {
            let body: api::ContextBody = api::decode_value(Value::Object(args))?;
            let mut plan = body.plan(DEFAULT_TOKENS)?;
            if plan.req.max_tokens as i64 > MAX_TOKENS {
                plan.req.max_tokens = MAX_TOKENS as usize;
            }
            let b = plan.req.max_tokens;
            let r = api::run_context(cache, &plan)?;
            let v = to_value(&r)?;
            page(v, &["results", "graph_expansion"], 0, b, usize::MAX)
        }
        "kdd_context" => {
            let body: api::HintsBody = api::decode_value(Value::Object(args))?;
            let mut req = body.validate(DEFAULT_TOKENS)?;
            req.max_tokens = req.max_tokens.min(MAX_TOKENS as usize);
            to_value(&crate::query::context(cache, &req)?)?
        }
        "kdd_graph" => {
            let offset = api::offset_of(take_i64(&mut args, "offset")?)?;
            let b = budget(take_i64(&mut args, "max_tokens")?)?;
            let p: api::GraphParams = api::decode_value(Value::Object(args))?;
            let r = crate::query::graph(cache, &p.validate()?)?;
            page(
                to_value(&r)?,
                &["related_nodes", "edges"],
                offset,
                b,
                usize::MAX,
            )
        }
        "kdd_impact" => {
            let offset = api::offset_of(take_i64(&mut args, "offset")?)?;
            let b = budget(take_i64(&mut args, "max_tokens")?)?;
            let p: api::ImpactParams = api::decode_value(Value::Object(args))?;
            let r = crate::query::impact(cache, &p.validate()?)?;
            page(
                to_value(&r)?,
                &[
                    "directly_affected",
                    "transitively_affected",
                    "scenarios_to_rerun",
                ],
                offset,
                b,
                usize::MAX,
            )
        }
        "kdd_coverage" => {
            let p: api::CoverageParams = api::decode_value(Value::Object(args))?;
            to_value(&crate::query::coverage(cache, &p.validate()?)?)?
        }
        "kdd_violations" => {
            let offset = api::offset_of(take_i64(&mut args, "offset")?)?;
            let b = budget(take_i64(&mut args, "max_tokens")?)?;
            let p: api::ViolationsParams = api::decode_value(Value::Object(args))?;
            let r = crate::query::violations(cache, &p.validate()?)?;
            page(to_value(&r)?, &["violations"], offset, b, usize::MAX)
        }
        "kdd_read" => {
            let offset = api::offset_of(take_i64(&mut args, "offset")?)?;
            let b = budget(take_i64(&mut args, "max_tokens")?)?;
            let p: ReadParams = api::decode_value(Value::Object(args))?;
            page(
                read(engine, &loaded, &p)?,
                &["sections"],
                offset,
                b,
                usize::MAX,
            )
        }
        "kdd_list" => {
            let offset = api::offset_of(take_i64(&mut args, "offset")?)?;
            let b = budget(take_i64(&mut args, "max_tokens")?)?;
            let size = take_i64(&mut args, "page_size")?.unwrap_or(50);
            if !(1..=200).contains(&size) {
                return Err(ApiError::bad(
                    "INVALID_PAGE_SIZE",
                    "`page_size` must be between 1 and 200",
                ));
            }
            let p: ListParams = api::decode_value(Value::Object(args))?;
            page(list(&loaded, &p)?, &["nodes"], offset, b, size as usize)
        }
        "kdd_status" => {
            if !args.is_empty() {
                return Err(ApiError::bad(
                    "UNKNOWN_PARAMETER",
                    "kdd_status takes no arguments",
                ));
            }
            status(engine, &loaded, reloaded)?
        }
        other => {
            return Err(ApiError::new(
                404,
                "UNKNOWN_TOOL",
                format!(
                    "no tool `{}`; tools: kdd_query, kdd_context, kdd_graph, kdd_impact, \
                     kdd_coverage, kdd_violations, kdd_read, kdd_list, kdd_status",
                    other.chars().take(64).collect::<String>()
                ),
            ))
        }
    };
    if let Value::Object(o) = &mut out {
        if name != "kdd_status" {
            o.insert("index".into(), to_value(&fresh)?);
        }
    }
    Ok(out)
}

/// `kdd_read` arguments.
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReadParams {
    #[serde(default)]
    pub node: Option<String>,
    #[serde(default)]
    pub path: Option<String>,
    #[serde(default)]
    pub section: Option<String>,
    /// Only the section whose heading is on this line (a `kdd_query` hit's `lines[0]`).
    #[serde(default)]
    pub line: Option<usize>,
}

fn fold(s: &str) -> String {
    use unicode_normalization::UnicodeNormalization;
    s.nfkd()
        .filter(|c| c.is_alphanumeric() || c.is_whitespace())
        .collect::<String>()
        .to_lowercase()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

fn read(engine: &Engine, loaded: &super::Loaded, p: &ReadParams) -> Result<Value, ApiError> {
    let snap = loaded.cache.snapshot()?;
    let rec = match (&p.node, &p.path) {
        (Some(n), None) if !n.trim().is_empty() => {
            let (id, _) = crate::query::resolve_node(&snap, n)?;
            snap.node(&id)?.ok_or_else(|| {
                ApiError::new(404, "NODE_NOT_FOUND", format!("node not found: {id}"))
            })?
        }
        (None, Some(path)) => {
            let specs = engine.specs_dir();
            // Escapes and missing files keep their codes; the bytes then come only through the
            // one reading rule (`crate::source`): no link is followed, even inside the root.
            super::confined_path(&specs, path)?;
            let norm = crate::config::normalize_rel(path.trim()).unwrap_or_default();
            let specs_root = engine.settings.specs_root.as_str();
            let rel = if specs_root.is_empty() {
                norm
            } else {
                format!("{specs_root}/{norm}")
            };
            let id = loaded
                .briefs
                .iter()
                .find(|n| n.source_file == rel)
                .map(|n| n.id.clone());
            match id.and_then(|id| snap.node(&id).ok().flatten()) {
                Some(r) => r,
                None => {
                    use crate::source::Error as E;
                    let bytes = crate::source::read_spec(&engine.tree_root(), &rel, specs_root)
                        .map_err(|e| match e {
                            E::TooLarge { .. } => {
                                ApiError::bad("SPEC_TOO_LARGE", "spec file over the size limit")
                            }
                            E::Io { .. } => ApiError::new(
                                404,
                                "SPEC_NOT_FOUND",
                                format!("no spec file `{}` under the specs root", e.path()),
                            ),
                            _ => ApiError::bad("PATH_OUTSIDE_SPECS", e.to_string()),
                        })?;
                    let text = String::from_utf8_lossy(&bytes).into_owned();
                    return Ok(json!({
                        "node_id": null,
                        "source_file": rel,
                        "note": "this file is not in the index (run `kdd index`); raw text follows",
                        "sections": [{"heading": "", "level": 0, "line": 1, "text": text}],
                    }));
                }
            }
        }
        _ => {
            return Err(ApiError::bad(
                "MISSING_NODE",
                "give exactly one of `node` (an id, short id or title) or `path` (relative to \
                 the specs root)",
            ))
        }
    };
    let mut sections: Vec<Value> = rec
        .sections
        .iter()
        .map(|s| {
            json!({"heading": s.heading, "key": s.key, "level": s.level, "line": s.line, "text": s.text})
        })
        .collect();
    if let Some(line) = p.line {
        // Just the cited span: the one section starting on that line.
        let Some(i) = rec.sections.iter().position(|s| s.line == line) else {
            return Err(ApiError::new(
                404,
                "SECTION_NOT_FOUND",
                format!("no section of {} starts on line {line}", rec.node.id),
            ));
        };
        sections = vec![sections[i].clone()];
    } else if let Some(want) = p
        .section
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        // A hit's `section` is a heading path (`Parent > Heading`): its last heading names it.
        let want = want.rsplit(" > ").next().unwrap_or(want).trim();
        let w = fold(want);
        let wk = want.to_ascii_lowercase().replace([' ', '-'], "_");
        let pick: Vec<usize> = rec
            .sections
            .iter()
            .enumerate()
            .filter(|(_, s)| {
                let key = s
                    .key
                    .as_deref()
                    .or_else(|| crate::parse::heading::section_key(&s.heading));
                key == Some(wk.as_str())
                    || key.is_some() && key == crate::parse::heading::section_key(want)
                    || fold(&s.heading) == w
            })
            .map(|(i, _)| i)
            .collect();
        let pick = if pick.is_empty() {
            rec.sections
                .iter()
                .enumerate()
                .filter(|(_, s)| !w.is_empty() && fold(&s.heading).starts_with(&w))
                .map(|(i, _)| i)
                .collect()
        } else {
            pick
        };
        let Some(&first) = pick.first() else {
            let heads: Vec<String> = rec
                .sections
                .iter()
                .filter(|s| !s.heading.is_empty())
                .map(|s| s.heading.clone())
                .collect();
            return Err(ApiError::new(
                404,
                "SECTION_NOT_FOUND",
                format!(
                    "no section `{}` in {}; sections: {}",
                    want.chars().take(80).collect::<String>(),
                    rec.node.id,
                    heads.join(" | ")
                ),
            ));
        };
        // The section and its subsections.
        let level = rec.sections[first].level;
        let mut keep = vec![first];
        for (i, s) in rec.sections.iter().enumerate().skip(first + 1) {
            if s.level <= level {
                break;
            }
            keep.push(i);
        }
        sections = keep.into_iter().map(|i| sections[i].clone()).collect();
    }
    Ok(json!({
        "node_id": rec.node.id,
        "kind": rec.node.kind,
        "title": rec.node.title,
        "layer": rec.node.layer,
        "source_file": rec.node.source_file,
        "stale": rec.stale,
        "sections": sections,
    }))
}

/// `kdd_list` arguments.
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListParams {
    #[serde(default, alias = "kind", alias = "include_kinds")]
    pub kinds: api::StrList,
    #[serde(default, alias = "layer")]
    pub layers: api::StrList,
    #[serde(default)]
    pub domain: Option<String>,
}

fn list(loaded: &super::Loaded, p: &ListParams) -> Result<Value, ApiError> {
    let kinds = api::parse_kinds(&p.kinds)?;
    let layers = api::parse_layers(&p.layers)?;
    let nodes: Vec<Value> = loaded
        .briefs
        .iter()
        .filter(|n| kinds.is_empty() || kinds.contains(&n.kind))
        .filter(|n| layers.is_empty() || layers.contains(&n.layer))
        .filter(|n| {
            p.domain
                .as_deref()
                .is_none_or(|d| n.domain.as_deref() == Some(d))
        })
        .map(|n| {
            json!({"id": n.id, "kind": n.kind, "title": n.title, "layer": n.layer,
                   "source_file": n.source_file, "domain": n.domain})
        })
        .collect();
    Ok(json!({"total_nodes": nodes.len(), "nodes": nodes}))
}

fn status(engine: &Engine, loaded: &super::Loaded, reloaded: bool) -> Result<Value, ApiError> {
    let cache = &loaded.cache;
    let snap = cache.snapshot()?;
    let mut per_kind: std::collections::BTreeMap<String, usize> = Default::default();
    for n in &loaded.briefs {
        *per_kind.entry(n.kind.as_str().to_string()).or_default() += 1;
    }
    let mut fresh = engine.freshness(loaded, reloaded, true);
    let stale_total = fresh.stale_specs.len();
    let unindexed_total = fresh.unindexed_specs.len();
    fresh.stale_specs.truncate(100);
    fresh.unindexed_specs.truncate(100);
    let m = cache.manifest();
    Ok(json!({
        "index": fresh,
        "stale_total": stale_total,
        "unindexed_total": unindexed_total,
        "manifest": {
            "format_version": m.format_version,
            "structure": m.structure,
            "specs_root": m.specs_root,
            "domains": m.domains,
            "index_level": m.index_level,
            "embedding": m.embedding,
        },
        "counts": {
            "nodes": loaded.nodes,
            "edges": snap.edge_count()?,
            "links": snap.link_count()?,
            "orphans": snap.orphans()?.len(),
            "violations": snap.violations()?.len(),
            "by_kind": per_kind,
        },
    }))
}

fn error_result(e: &ApiError) -> CallToolResult {
    let body = json!({"error": {"code": e.code, "message": e.message}});
    CallToolResult::error(vec![ContentBlock::text(body.to_string())])
}

impl ServerHandler for KddMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(
                Implementation::new("kdd", env!("CARGO_PKG_VERSION"))
                    .with_title("kdd — KDD spec retrieval"),
            )
            .with_instructions(
                "Read-only access to this repository's KDD specs (requirements, domain, \
                 behaviour, experience, verification). Start with kdd_query (natural-language \
                 search) or kdd_context (hints: files you will touch). Use kdd_read for full \
                 text, kdd_graph / kdd_impact for relations. Every answer has `index` (is the \
                 index fresh?) and `page` (call again with offset = page.next_offset for more).",
            )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        Ok(ListToolsResult::with_all_items((*self.tools).clone()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let name = request.name.to_string();
        if !self.tools.iter().any(|t| t.name == name) {
            return Err(ErrorData::invalid_params(
                format!(
                    "unknown tool `{}`",
                    name.chars().take(64).collect::<String>()
                ),
                None,
            ));
        }
        let args = request.arguments.unwrap_or_default();
        let me = self.clone();
        let t0 = std::time::Instant::now();
        let n2 = name.clone();
        let task = tokio::task::spawn_blocking(move || me.call(&n2, args));
        let res = match tokio::time::timeout(self.timeout, task).await {
            Ok(Ok(r)) => r,
            Ok(Err(_)) => Err(ApiError::internal()),
            Err(_) => Err(ApiError::new(
                504,
                "TIMEOUT",
                format!(
                    "the query did not finish within {} s; narrow it (lower depth or limit)",
                    self.timeout.as_secs()
                ),
            )),
        };
        crate::report::info(&format!(
            "kdd mcp: {name} {} in {} ms",
            match &res {
                Ok(_) => "ok".to_string(),
                Err(e) => e.code.clone(),
            },
            t0.elapsed().as_millis()
        ));
        Ok(match res {
            Ok(v) => CallToolResult::success(vec![ContentBlock::text(v.to_string())]),
            Err(e) => error_result(&e),
        }
        .into())
    }
}

/// Serve MCP on stdin/stdout until the client disconnects.
pub async fn serve_stdio(engine: Arc<Engine>, timeout: Duration) -> anyhow::Result<()> {
    use rmcp::ServiceExt;
    let e2 = engine.clone();
    // Warm the cache before the first call (errors surface on the first tool call instead).
    let _ = tokio::task::spawn_blocking(move || {
        if let Err(e) = e2.get() {
            crate::report::warn(&format!("kdd mcp: {e}"));
        }
    })
    .await;
    // Lines that are not JSON get a -32700 answer before rmcp (which drops them) sees them.
    let (stdin, stdout) = rmcp::transport::stdio();
    let (rx, tx, out) = super::stdio::framed(stdin, stdout);
    let service = KddMcp::new(engine, timeout)
        .serve((rx, tx))
        .await
        .map_err(|e| anyhow::anyhow!("MCP initialisation failed: {e}"))?;
    service.waiting().await?;
    let _ = tokio::time::timeout(Duration::from_secs(2), out).await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_names_are_portable() {
        for t in tools() {
            assert!(t.name.len() <= 32);
            assert!(t.name.chars().all(|c| c.is_ascii_lowercase() || c == '_'));
            assert_eq!(t.annotations.as_ref().unwrap().read_only_hint, Some(true));
            assert!(t.description.as_ref().unwrap().len() > 40);
        }
    }

    #[test]
    fn paging_respects_budget() {
        let items: Vec<Value> = (0..100)
            .map(|i| json!({"id": format!("n{i}"), "t": "x".repeat(100)}))
            .collect();
        let v = json!({"nodes": items, "total": 100});
        let p = page(v.clone(), &["nodes"], 0, 500, usize::MAX);
        let got = p["nodes"].as_array().unwrap().len();
        assert!(got > 0 && got < 100);
        assert!(tokens_of(&p) <= 600);
        let next = p["page"]["next_offset"].as_u64().unwrap() as usize;
        assert_eq!(next, got);
        let p2 = page(v, &["nodes"], next, 500, usize::MAX);
        assert_eq!(p2["nodes"][0]["id"], json!(format!("n{next}")));
    }
}
