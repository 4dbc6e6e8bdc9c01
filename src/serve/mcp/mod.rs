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
//! next_offset}` (`kdd_query`'s counts ranked hits and has no `total`: the ranking pages
//! itself within the budget); call again with `offset = next_offset`. The cache freshness is checked on
//! every call, so a re-index is picked up without restarting the server. Stdout carries only
//! the protocol; logs go to stderr. A line that is not JSON is answered `-32700` (id null) by
//! the framing in [`super::stdio`] and the session goes on.

mod read;
mod tools;

use super::api::{self, ApiError};
use super::Engine;
use read::{list, read, ListParams, ReadParams};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{json, Map, Value};
use std::sync::Arc;
use std::time::Duration;
use tools::tools;

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
    args: Map<String, Value>,
) -> Result<Value, ApiError> {
    let fresh = engine.freshness(&loaded, reloaded, false);
    let mut out = match name {
        "kdd_status" => {
            if !args.is_empty() {
                return Err(ApiError::bad(
                    "UNKNOWN_PARAMETER",
                    "kdd_status takes no arguments",
                ));
            }
            return status(engine, &loaded, reloaded);
        }
        "kdd_read" => paged(args, &["sections"], usize::MAX, |a| {
            read(
                engine,
                &loaded,
                &api::decode_value::<ReadParams>(Value::Object(a))?,
            )
        })?,
        "kdd_list" => {
            let mut args = args;
            let size = take_i64(&mut args, "page_size")?.unwrap_or(50);
            if !(1..=200).contains(&size) {
                return Err(ApiError::bad(
                    "INVALID_PAGE_SIZE",
                    "`page_size` must be between 1 and 200",
                ));
            }
            paged(args, &["nodes"], size as usize, |a| {
                list(&loaded, &api::decode_value::<ListParams>(Value::Object(a))?)
            })?
        }
        _ => query_tool(&loaded.cache, name, args)?,
    };
    if let Value::Object(o) = &mut out {
        stale_warning(o, &fresh);
        o.insert("index".into(), to_value(&fresh)?);
    }
    Ok(out)
}

/// An answer with a `warnings` list (`kdd_query`, `kdd_context`) also says `STALE_SPECS` when
/// specs changed since they were indexed, as HTTP answers do: agents read the warnings, not
/// always `index`. `kdd_context` lists plain messages, `kdd_query` `{code, message}` objects.
fn stale_warning(answer: &mut Map<String, Value>, fresh: &super::Freshness) {
    let plain = answer.contains_key("constraints"); // QRY-007's shape
    let Some(Value::Array(list)) = answer.get_mut("warnings") else {
        return;
    };
    let Some(w) = crate::query::Warning::stale_specs(&fresh.stale_specs) else {
        return;
    };
    let has = |v: &Value| v["code"] == "STALE_SPECS" || v.as_str() == Some(w.message.as_str());
    if !list.iter().any(has) {
        list.push(if plain {
            Value::String(w.message)
        } else {
            json!({"code": w.code, "message": w.message})
        });
    }
}

/// A paged answer: `offset` and `max_tokens` come out of the arguments, `run` decodes the rest.
fn paged(
    mut args: Map<String, Value>,
    lists: &[&str],
    page_size: usize,
    run: impl FnOnce(Map<String, Value>) -> Result<Value, ApiError>,
) -> Result<Value, ApiError> {
    let offset = api::offset_of(take_i64(&mut args, "offset")?)?;
    let b = budget(take_i64(&mut args, "max_tokens")?)?;
    Ok(page(run(args)?, lists, offset, b, page_size))
}

/// The tools that are one query over the cache.
fn query_tool(
    cache: &crate::cache::Cache,
    name: &str,
    args: Map<String, Value>,
) -> Result<Value, ApiError> {
    use crate::query;
    let all = usize::MAX;
    Ok(match name {
        "kdd_query" => {
            let body: api::ContextBody = api::decode_value(Value::Object(args))?;
            let mut plan = body.plan(DEFAULT_TOKENS)?;
            if plan.req.max_tokens as i64 > MAX_TOKENS {
                plan.req.max_tokens = MAX_TOKENS as usize;
            }
            // The ranking pages itself: the budget is spent on the hits after `offset`, and
            // `next_offset` counts ranked hits (what `offset` skips), never graph edges.
            let resp = api::run_context(cache, &plan)?;
            let (returned, next) = (resp.results.len(), resp.next_offset);
            let mut v = to_value(&resp)?;
            v["page"] = json!({
                "offset": plan.offset,
                "returned": returned,
                "next_offset": next,
            });
            v
        }
        "kdd_context" => {
            let body: api::HintsBody = api::decode_value(Value::Object(args))?;
            let mut req = body.validate(DEFAULT_TOKENS)?;
            req.max_tokens = req.max_tokens.min(MAX_TOKENS as usize);
            to_value(&query::context(cache, &req)?)?
        }
        "kdd_graph" => paged(args, &["related_nodes", "edges"], all, |a| {
            let p: api::GraphParams = api::decode_value(Value::Object(a))?;
            to_value(&query::graph(cache, &p.validate()?)?)
        })?,
        "kdd_impact" => {
            let lists = [
                "directly_affected",
                "transitively_affected",
                "scenarios_to_rerun",
            ];
            paged(args, &lists, all, |a| {
                let p: api::ImpactParams = api::decode_value(Value::Object(a))?;
                to_value(&query::impact(cache, &p.validate()?)?)
            })?
        }
        "kdd_coverage" => {
            let p: api::CoverageParams = api::decode_value(Value::Object(args))?;
            to_value(&query::coverage(cache, &p.validate()?)?)?
        }
        "kdd_violations" => paged(args, &["violations"], all, |a| {
            let p: api::ViolationsParams = api::decode_value(Value::Object(a))?;
            to_value(&query::violations(cache, &p.validate()?)?)
        })?,
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
    })
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
    let served = match KddMcp::new(engine, timeout).serve((rx, tx)).await {
        Ok(service) => service
            .waiting()
            .await
            .map(drop)
            .map_err(anyhow::Error::from),
        Err(e) => Err(anyhow::anyhow!("MCP initialisation failed: {e}")),
    };
    // Every answer goes out, also when input ended before `initialize` (the framing's own
    // refusals of those lines are still queued).
    let _ = tokio::time::timeout(Duration::from_secs(2), out).await;
    served
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
