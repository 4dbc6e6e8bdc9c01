//! The `/v1/retrieve/*` route handlers of the HTTP API: each decodes and validates its body or
//! query string with [`super::api`], runs the query on the blocking pool under the deadline
//! ([`super::http`]'s `run`) and answers JSON or the error.

use super::api::{self, ApiError};
use super::http::{body_bytes, finish, json_ok, params_value, run, run_fresh, AppState, Fail, Rid};
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use serde::Serialize;

macro_rules! rid {
    ($req:expr) => {
        $req.map(|r| r.0 .0).unwrap_or_default()
    };
}

pub(super) async fn search(
    State(st): State<AppState>,
    rid: Option<axum::Extension<Rid>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let rid = rid!(rid);
    let req = match body_bytes(&headers, body, st.opts.max_body)
        .and_then(|b| api::decode::<api::SearchBody>(&b))
        .and_then(|b| b.validate())
    {
        Ok(r) => r,
        Err(e) => return Fail(e, rid).into_response(),
    };
    let r = run_fresh(&st, &rid, move |c| api::run_search(c, &req)).await;
    // The answer carries `freshness`, and a `STALE_SPECS` warning when specs changed since
    // they were indexed (the cache only knows of edits made before it was built).
    let r = r.map(|r| {
        r.map(|(mut v, fresh)| {
            stale(&mut v.warnings, &fresh);
            Stamped {
                answer: v,
                freshness: fresh,
                warnings: Vec::new(),
            }
        })
    });
    finish(&st, rid, r)
}

/// An answer with the served index's freshness, and for an answer that has no `warnings` of
/// its own (the GET routes) the freshness warnings.
#[derive(Serialize)]
struct Stamped<T: Serialize> {
    #[serde(flatten)]
    answer: T,
    freshness: super::Freshness,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    warnings: Vec<crate::query::Warning>,
}

/// Add a `STALE_SPECS` warning for `fresh`'s stale specs unless the answer has one, and
/// `INDEX_REFRESHING` / `INDEX_RELOAD_FAILED` when the answer comes from the previous index
/// while a new one loads / because the changed one could not be loaded.
fn stale(warnings: &mut Vec<crate::query::Warning>, fresh: &super::Freshness) {
    if fresh.refreshing {
        warnings.push(super::fresh::refreshing_warning());
    }
    if fresh.reload_failed.is_some() {
        let why = fresh.reload_failed.as_deref();
        warnings.push(super::fresh::reload_failed_warning(why));
    }
    if warnings.iter().any(|w| w.code == "STALE_SPECS") {
        return;
    }
    warnings.extend(crate::query::Warning::stale_specs(&fresh.stale_specs));
}

pub(super) async fn context(
    State(st): State<AppState>,
    rid: Option<axum::Extension<Rid>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let rid = rid!(rid);
    let plan = match body_bytes(&headers, body, st.opts.max_body)
        .and_then(|b| api::decode::<api::ContextBody>(&b))
        .and_then(|b| b.plan(8000))
    {
        Ok(p) => p,
        Err(e) => return Fail(e, rid).into_response(),
    };
    let p2 = plan.clone();
    let answer = run_fresh(&st, &rid, move |c| api::run_context(c, &p2)).await;
    let answer = answer.map(|r| {
        r.map(|(mut v, fresh)| {
            stale(&mut v.warnings, &fresh);
            v
        })
    });
    match answer {
        Err(()) => {
            // Partial results: the lexical ranking alone, without graph expansion.
            let mut lex = plan.clone();
            lex.strategy = api::Strategy::Lexical;
            let fallback = tokio::time::timeout(
                st.opts.timeout / 2,
                run(&st, &rid, move |c| api::run_context(c, &lex)),
            )
            .await;
            let mut resp = match fallback {
                Ok(Ok(Ok(r))) => r,
                _ => crate::query::HybridResponse {
                    results: Vec::new(),
                    graph_expansion: Vec::new(),
                    warnings: Vec::new(),
                    total_results: 0,
                    total_tokens: 0,
                    next_offset: None,
                    expanded_with: Vec::new(),
                    read_as: Vec::new(),
                },
            };
            resp.warnings.push(crate::query::Warning::new(
                "TIMEOUT",
                format!(
                    "hybrid retrieval did not finish within {} ms; partial results (lexical only, \
                     no graph expansion)",
                    st.opts.timeout.as_millis()
                ),
            ));
            json_ok(&resp)
        }
        ok => finish(&st, rid, ok),
    }
}

pub(super) async fn context_hints(
    State(st): State<AppState>,
    rid: Option<axum::Extension<Rid>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let rid = rid!(rid);
    let req = match body_bytes(&headers, body, st.opts.max_body)
        .and_then(|b| api::decode::<api::HintsBody>(&b))
        .and_then(|b| b.validate(4000))
    {
        Ok(r) => r,
        Err(e) => return Fail(e, rid).into_response(),
    };
    let r = run_fresh(&st, &rid, move |c| Ok(crate::query::context(c, &req)?)).await;
    // Its warnings are plain messages (QRY-007's shape): the `STALE_SPECS` one by its message.
    let r = r.map(|r| {
        r.map(|(mut v, fresh)| {
            let mut w = Vec::new();
            stale(&mut w, &fresh);
            v.warnings.extend(w.into_iter().map(|w| w.message));
            v
        })
    });
    finish(&st, rid, r)
}

/// A GET route: decode + validate the query string into a request, run `query` on the cache
/// under the deadline, answer its JSON (or the error) with `freshness`, and `warnings` when
/// it comes from a previous index or specs changed since they were indexed.
async fn get_route<P, Req, T>(
    st: AppState,
    rid: String,
    q: Result<Query<Vec<(String, String)>>, QueryRejection>,
    validate: fn(&P) -> Result<Req, ApiError>,
    query: fn(&crate::cache::Cache, &Req) -> Result<T, crate::query::Error>,
) -> Response
where
    P: serde::de::DeserializeOwned,
    Req: Send + 'static,
    T: Serialize + Send + 'static,
{
    let req = match params_value(q)
        .and_then(api::decode_value::<P>)
        .and_then(|p| validate(&p))
    {
        Ok(r) => r,
        Err(e) => return Fail(e, rid).into_response(),
    };
    let r = run_fresh(&st, &rid, move |c| Ok(query(c, &req)?)).await;
    let r = r.map(|r| {
        r.map(|(answer, freshness)| {
            let mut warnings = Vec::new();
            stale(&mut warnings, &freshness);
            Stamped {
                answer,
                freshness,
                warnings,
            }
        })
    });
    finish(&st, rid, r)
}

pub(super) async fn graph(
    State(st): State<AppState>,
    rid: Option<axum::Extension<Rid>>,
    q: Result<Query<Vec<(String, String)>>, QueryRejection>,
) -> Response {
    get_route(
        st,
        rid!(rid),
        q,
        api::GraphParams::validate,
        crate::query::graph,
    )
    .await
}

pub(super) async fn impact(
    State(st): State<AppState>,
    rid: Option<axum::Extension<Rid>>,
    q: Result<Query<Vec<(String, String)>>, QueryRejection>,
) -> Response {
    get_route(
        st,
        rid!(rid),
        q,
        api::ImpactParams::validate,
        crate::query::impact,
    )
    .await
}

pub(super) async fn coverage(
    State(st): State<AppState>,
    rid: Option<axum::Extension<Rid>>,
    q: Result<Query<Vec<(String, String)>>, QueryRejection>,
) -> Response {
    get_route(
        st,
        rid!(rid),
        q,
        api::CoverageParams::validate,
        crate::query::coverage,
    )
    .await
}

pub(super) async fn violations(
    State(st): State<AppState>,
    rid: Option<axum::Extension<Rid>>,
    q: Result<Query<Vec<(String, String)>>, QueryRejection>,
) -> Response {
    get_route(
        st,
        rid!(rid),
        q,
        api::ViolationsParams::validate,
        crate::query::violations,
    )
    .await
}
