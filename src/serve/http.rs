//! The HTTP retrieval API of the PRD (Appendix C) on axum: `POST /v1/retrieve/search`,
//! `GET /v1/retrieve/graph`, `POST /v1/retrieve/context` (QRY-003 hybrid),
//! `POST /v1/retrieve/context-hints` (QRY-007), `GET /v1/retrieve/impact`,
//! `GET /v1/retrieve/coverage`, `GET /v1/retrieve/layer-violations` and `GET /health`.
//!
//! Bodies are the same JSON as the CLI's `--json` output. Every response carries an
//! `x-request-id` (the client's, when it sent a sane one), which also starts every log line.
//! Errors are `{"error": {"code", "message", "status"}, "request_id"}` with a 4xx/5xx status and
//! never contain a stack trace or a server path. Request bodies are capped (`max_body`), every
//! query runs on the blocking pool under a deadline (`timeout`): a hybrid query that misses it
//! answers with lexical-only partial results and a `TIMEOUT` warning (UC-004 EX-3), others 504.
//!
//! Security: loopback by default; binding anything else requires a bearer token (`KDD_TOKEN`,
//! at least [`MIN_TOKEN_LEN`] characters, checked at startup by [`check_token`]), compared in
//! constant time on every route but `/health`. Every request needs exactly one well-formed
//! `Host` (`name[:port]`, `IPv4[:port]` or `[IPv6][:port]`; no userinfo, no second header, an
//! absolute-form target must name the same authority): anything else is 400. On loopback, a
//! `Host` that is not `localhost` or a loopback address is 403 (DNS-rebinding guard).
//! Timeouts and the connection cap live one layer down, in [`super::conn`].

use super::api::ApiError;
pub use super::guard::{check_token, MIN_TOKEN_LEN};
use super::guard::{ct_eq, host_error};
use super::routes;
use super::Engine;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, Query, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Server options.
#[derive(Debug, Clone)]
pub struct Options {
    /// Bearer token required on every route but `/health` (None: no auth; only allowed on
    /// loopback).
    pub token: Option<String>,
    /// Per-request deadline.
    pub timeout: Duration,
    /// Maximum request body in bytes.
    pub max_body: usize,
    /// True when bound to a loopback address (enables the Host check).
    pub loopback: bool,
    /// Artificial delay added to every query (tests of the timeout path only).
    pub test_delay: Duration,
    /// Connection limits (timeouts, cap).
    pub limits: super::conn::Limits,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            token: None,
            timeout: Duration::from_secs(10),
            max_body: 64 * 1024,
            loopback: true,
            test_delay: Duration::ZERO,
            limits: super::conn::Limits::default(),
        }
    }
}

/// Shared state of the handlers.
#[derive(Clone)]
pub struct AppState {
    pub(super) engine: Arc<Engine>,
    pub(super) opts: Arc<Options>,
    counter: Arc<AtomicU64>,
    started: Instant,
    /// Query work admitted at once: one per core. Queries are CPU-bound, so more would only
    /// time-slice; queued requests wait FIFO (inside their deadline), which keeps tail latency
    /// close to the queue length times the service time.
    work: Arc<tokio::sync::Semaphore>,
    /// The permits of `work`.
    cores: usize,
    /// Requests admitted to query work and not finished (waiting for a permit or running, the
    /// work of an answer already given up by its deadline included): see [`run`].
    admitted: Arc<std::sync::atomic::AtomicUsize>,
}

/// Requests admitted per core (waiting or running) before the server answers 503 `BUSY`
/// instead of queueing more: at tens of milliseconds a query, 32 a core is well inside the
/// deadline; past it the queue only holds work whose clients will have given up.
const QUEUE_PER_CORE: usize = 32;

/// One admitted request: counted until dropped (see [`AppState::admitted`]).
struct Admitted(Arc<std::sync::atomic::AtomicUsize>);

impl Drop for Admitted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The request id of the current request (set by the middleware).
#[derive(Debug, Clone)]
pub(super) struct Rid(pub(super) String);

/// An error response.
pub(super) struct Fail(pub(super) ApiError, pub(super) String);

#[derive(Serialize)]
struct ErrorBody<'a> {
    error: ErrorInner<'a>,
    request_id: &'a str,
}

#[derive(Serialize)]
struct ErrorInner<'a> {
    code: &'a str,
    message: &'a str,
    status: u16,
}

impl IntoResponse for Fail {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.0.status).unwrap_or(StatusCode::BAD_REQUEST);
        let body = ErrorBody {
            error: ErrorInner {
                code: &self.0.code,
                message: &self.0.message,
                status: status.as_u16(),
            },
            request_id: &self.1,
        };
        let mut r = (status, axum::Json(body)).into_response();
        if status == StatusCode::UNAUTHORIZED {
            r.headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        r
    }
}

pub(super) fn json_ok<T: Serialize>(v: &T) -> Response {
    match serde_json::to_vec(v) {
        Ok(b) => (
            StatusCode::OK,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            b,
        )
            .into_response(),
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR.into_response(),
    }
}

/// Build the router.
pub fn router(engine: Arc<Engine>, opts: Options) -> Router {
    let max_body = opts.max_body;
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let state = AppState {
        engine,
        opts: Arc::new(opts),
        counter: Arc::new(AtomicU64::new(0)),
        started: Instant::now(),
        work: Arc::new(tokio::sync::Semaphore::new(cores)),
        cores,
        admitted: Arc::new(std::sync::atomic::AtomicUsize::new(0)),
    };
    Router::new()
        .route("/health", get(health))
        .route("/v1/retrieve/search", post(routes::search))
        .route("/v1/retrieve/context", post(routes::context))
        .route("/v1/retrieve/context-hints", post(routes::context_hints))
        .route("/v1/retrieve/graph", get(routes::graph))
        .route("/v1/retrieve/impact", get(routes::impact))
        .route("/v1/retrieve/coverage", get(routes::coverage))
        .route("/v1/retrieve/layer-violations", get(routes::violations))
        .merge(super::sync::routes(&state.engine))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(max_body))
        .layer(axum::middleware::from_fn_with_state(state.clone(), frame))
        .with_state(state)
}

/// The request's `Content-Length` (0 when absent or unreadable: the body limit still applies
/// while it is read).
fn declared_len(req: &Request) -> u64 {
    req.headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

fn rid_ok(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
}

/// Request id, Host check, auth and the access log line.
async fn frame(State(st): State<AppState>, mut req: Request, next: Next) -> Response {
    let t0 = Instant::now();
    let n = st.counter.fetch_add(1, Ordering::Relaxed);
    let rid = req
        .headers()
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .filter(|s| rid_ok(s))
        .map(str::to_string)
        .unwrap_or_else(|| {
            format!(
                "{:08x}-{n:06x}",
                (st.started.elapsed().as_nanos() as u64 ^ (std::process::id() as u64) << 32) as u32
            )
        });
    req.extensions_mut().insert(Rid(rid.clone()));
    let method = req.method().clone();
    let path = req.uri().path().to_string();
    let target_len = req.uri().path_and_query().map_or(0, |p| p.as_str().len());
    let denied = if target_len > super::conn::MAX_REQUEST_LINE {
        Some(ApiError::new(
            414,
            "URI_TOO_LONG",
            format!(
                "the request line is longer than {} bytes; send long queries as a POST body",
                super::conn::MAX_REQUEST_LINE
            ),
        ))
    } else if let Some(e) = host_error(&req, st.opts.loopback) {
        Some(e)
    } else if let (Some(tok), false) = (&st.opts.token, path == "/health") {
        let given = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("");
        (!ct_eq(given.trim().as_bytes(), tok.as_bytes())).then(|| {
            ApiError::new(
                401,
                "UNAUTHORIZED",
                "missing or wrong bearer token (send `Authorization: Bearer $KDD_TOKEN`)",
            )
        })
    } else if path.starts_with("/v1/retrieve/") && declared_len(&req) > st.opts.max_body as u64 {
        // Refused before the body is read: waiting for it would hold the connection until
        // the read timeout and answer 408.
        Some(ApiError::new(
            413,
            "PAYLOAD_TOO_LARGE",
            format!("request body over {} bytes", st.opts.max_body),
        ))
    } else {
        None
    };
    let mut resp = match denied {
        Some(e) => Fail(e, rid.clone()).into_response(),
        None => next.run(req).await,
    };
    if let Ok(v) = HeaderValue::from_str(&rid) {
        resp.headers_mut().insert("x-request-id", v);
    }
    resp.headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    if let Some(l) = st.engine.peek() {
        if let Some(c) = &l.commit {
            if let Ok(v) = HeaderValue::from_str(c) {
                resp.headers_mut().insert("x-kdd-index-commit", v);
            }
        }
    }
    crate::report::info(&format!(
        "[{rid}] {method} {path} {} {}us",
        resp.status().as_u16(),
        t0.elapsed().as_micros()
    ));
    resp
}

async fn not_found(req: Request) -> Response {
    let rid = rid_of(&req);
    Fail(
        ApiError::new(
            404,
            "NOT_FOUND",
            "no such route; see /v1/retrieve/{search,context,context-hints,graph,impact,coverage,layer-violations} and /health",
        ),
        rid,
    )
    .into_response()
}

async fn method_not_allowed(req: Request) -> Response {
    let rid = rid_of(&req);
    let m = req.method().clone();
    Fail(
        ApiError::new(
            405,
            "METHOD_NOT_ALLOWED",
            format!("{m} is not allowed here (search, context and context-hints are POST; the rest GET)"),
        ),
        rid,
    )
    .into_response()
}

fn rid_of(req: &Request) -> String {
    req.extensions()
        .get::<Rid>()
        .map(|r| r.0.clone())
        .unwrap_or_default()
}

#[derive(Serialize)]
struct Health {
    status: &'static str,
    version: &'static str,
    index_loaded: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    level: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    nodes: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    commit: Option<String>,
}

async fn health(State(st): State<AppState>) -> Response {
    let l = st.engine.peek();
    json_ok(&Health {
        status: "ok",
        version: env!("CARGO_PKG_VERSION"),
        index_loaded: l.is_some(),
        level: l.as_ref().map(|l| format!("{:?}", l.cache.level())),
        nodes: l.as_ref().map(|l| l.nodes),
        commit: l.as_ref().and_then(|l| l.commit.clone()),
    })
}

/// Run `f` on the blocking pool against a fresh cache, under the deadline.
pub(super) async fn run<T, F>(st: &AppState, rid: &str, f: F) -> Result<Result<T, ApiError>, ()>
where
    T: Send + 'static,
    F: Fn(&crate::cache::Cache) -> Result<T, ApiError> + Send + 'static,
{
    run_loaded(st, rid, move |loaded, _| f(&loaded.cache)).await
}

/// [`run`] with the answer's freshness: the stale-spec scan MCP answers carry (specs edited
/// since they were indexed), rate-limited like theirs.
pub(super) async fn run_fresh<T, F>(
    st: &AppState,
    rid: &str,
    f: F,
) -> Result<Result<(T, super::Freshness), ApiError>, ()>
where
    T: Send + 'static,
    F: Fn(&crate::cache::Cache) -> Result<T, ApiError> + Send + 'static,
{
    let engine = st.engine.clone();
    run_loaded(st, rid, move |loaded, reloaded| {
        let v = f(&loaded.cache)?;
        Ok((v, engine.freshness(loaded, reloaded, false)))
    })
    .await
}

/// [`run`] over the loaded state (`reloaded`: the index was reloaded for this request).
async fn run_loaded<T, F>(st: &AppState, rid: &str, f: F) -> Result<Result<T, ApiError>, ()>
where
    T: Send + 'static,
    F: Fn(&Arc<super::Loaded>, bool) -> Result<T, ApiError> + Send + 'static,
{
    let engine = st.engine.clone();
    let delay = st.opts.test_delay;
    let rid2 = rid.to_string();
    let work = st.work.clone();
    let waiting = st.admitted.fetch_add(1, Ordering::SeqCst);
    let admitted = Admitted(st.admitted.clone());
    if waiting >= st.cores * QUEUE_PER_CORE {
        drop(admitted);
        return Ok(Err(ApiError::new(
            503,
            "BUSY",
            format!("{waiting} queries are already waiting or running; retry in a moment"),
        )));
    }
    let task = async move {
        // Closed never: the semaphore lives as long as the state.
        let permit = work.acquire_owned().await.expect("work semaphore open");
        tokio::task::spawn_blocking(move || {
            // Held until the work ends, not only until its answer is given up at the deadline:
            // a query past its deadline still occupies its core, and admitting another in its
            // place only added threads (150 timed-out queries kept 142 threads busy for 60 s).
            // A request dropped while it waits for a permit never starts its work.
            let _held = (permit, admitted);
            if !delay.is_zero() {
                std::thread::sleep(delay);
            }
            engine.with_cache(|loaded, reloaded| {
                if reloaded {
                    crate::report::info(&format!("[{rid2}] index reloaded"));
                }
                f(loaded, reloaded)
            })
        })
        .await
    };
    match tokio::time::timeout(st.opts.timeout, task).await {
        Ok(Ok(r)) => Ok(r),
        Ok(Err(join)) => {
            crate::report::error(&format!("[{rid}] query task failed: {join}"));
            Ok(Err(ApiError::internal()))
        }
        Err(_) => Err(()),
    }
}

pub(super) fn timeout_error(st: &AppState) -> ApiError {
    ApiError::new(
        504,
        "TIMEOUT",
        format!(
            "the query did not finish within {} ms; narrow it (lower depth or limit)",
            st.opts.timeout.as_millis()
        ),
    )
}

pub(super) fn finish<T: Serialize>(
    st: &AppState,
    rid: String,
    r: Result<Result<T, ApiError>, ()>,
) -> Response {
    match r {
        Ok(Ok(v)) => json_ok(&v),
        Ok(Err(e)) => Fail(e, rid).into_response(),
        Err(()) => Fail(timeout_error(st), rid).into_response(),
    }
}

pub(super) fn body_bytes(
    headers: &HeaderMap,
    body: Result<Bytes, BytesRejection>,
    max: usize,
) -> Result<Bytes, ApiError> {
    // Any content type is read as JSON (curl's default form type included); multipart is not.
    if let Some(ct) = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    {
        if ct.trim().to_ascii_lowercase().starts_with("multipart/") {
            return Err(ApiError::new(
                415,
                "UNSUPPORTED_MEDIA_TYPE",
                "send the body as application/json",
            ));
        }
    }
    body.map_err(|e| {
        if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
            ApiError::new(
                413,
                "PAYLOAD_TOO_LARGE",
                format!("request body over {max} bytes"),
            )
        } else {
            ApiError::bad("INVALID_BODY", "cannot read the request body")
        }
    })
}

/// GET parameters as a JSON object: repeated keys become arrays; numbers and booleans of the
/// known numeric/boolean parameters are converted.
pub(super) fn params_value(
    q: Result<Query<Vec<(String, String)>>, QueryRejection>,
) -> Result<serde_json::Value, ApiError> {
    let Query(pairs) =
        q.map_err(|_| ApiError::bad("INVALID_QUERY_STRING", "malformed query string"))?;
    let mut map = serde_json::Map::new();
    for (k, v) in pairs {
        let val = match k.as_str() {
            "depth" | "offset" | "limit" => v
                .trim()
                .parse::<i64>()
                .map(serde_json::Value::from)
                .unwrap_or(serde_json::Value::String(v)),
            "respect_layers" => match v.trim() {
                "true" | "1" => serde_json::Value::Bool(true),
                "false" | "0" => serde_json::Value::Bool(false),
                _ => serde_json::Value::String(v),
            },
            _ => serde_json::Value::String(v),
        };
        match map.get_mut(&k) {
            None => {
                map.insert(k, val);
            }
            Some(serde_json::Value::Array(a)) => a.push(val),
            Some(prev) => {
                let p = prev.take();
                *prev = serde_json::Value::Array(vec![p, val]);
            }
        }
    }
    Ok(serde_json::Value::Object(map))
}

/// Bind and serve until Ctrl-C / SIGTERM. Loads the index before accepting connections so the
/// first request is fast (a missing index is not fatal: requests answer `INDEX_UNAVAILABLE`
/// until one appears).
pub async fn serve(
    engine: Arc<Engine>,
    listener: tokio::net::TcpListener,
    opts: Options,
) -> std::io::Result<()> {
    let e2 = engine.clone();
    let t0 = Instant::now();
    let _ = tokio::task::spawn_blocking(move || {
        if let Err(e) = e2.get() {
            crate::report::warn(&format!("kdd serve: {e}"));
        }
    })
    .await;
    crate::report::info(&format!(
        "kdd serve: ready in {} ms",
        t0.elapsed().as_millis()
    ));
    let limits = opts.limits;
    let app = router(engine, opts);
    super::conn::serve(listener, app, limits, shutdown_signal()).await
}

async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        if let Ok(mut s) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        {
            s.recv().await;
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {},
        _ = term => {},
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_ids() {
        assert!(rid_ok("abc-1.2_x"));
        assert!(!rid_ok("a b"));
    }
}
