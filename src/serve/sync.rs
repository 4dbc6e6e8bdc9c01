//! The server side of index sync over the API (UC-007 FA-4): `POST /v1/index/push` and
//! `GET /v1/index/pull` on `kdd serve` (client in `crate::sync::api`, wire form in
//! `crate::sync::bundle`).
//!
//! Store (`kdd serve --accept-push`): under the repository's cache directory,
//! `sync/sources/<source>.bundle` holds the latest push of each source (a client sends a stable,
//! non-identifying `X-Kdd-Source`), `sync/merged/.kdd-index/` the BR-MERGE-001 merge of all of
//! them (`merge::refs::merge_file_sets`: union of nodes, last-write-wins by push time between
//! differing versions, compatible manifests) and `sync/cache/` the query cache the engine
//! serves from it ([`super::Source::Pushed`]). Nothing is written into the git repository: a
//! served bare repository has no work tree, and the pushed artifacts are not its commits.
//!
//! Invariants: a push needs the bearer token even on loopback (a server started without
//! `KDD_TOKEN` refuses every push with `AUTH_FAILED`); the body is capped (`--max-push-bytes`,
//! 413); every path in it is checked before anything is written; a push whose format version
//! or embedding model does not match the merged index is refused with `PUSH_REJECTED` and
//! changes nothing; pushes are serialised by one lock. Pull answers the index this server
//! serves (the merged one with `--accept-push`), `NO_REMOTE_INDEX` when there is none.

use super::api::ApiError;
use super::http::{AppState, Fail, Rid};
use crate::artifact::{read_manifest, ArtifactPaths, Manifest, FORMAT_VERSION, INDEX_DIR};
use crate::sync::bundle;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Router};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Default cap of a push body (bytes).
pub const DEFAULT_MAX_PUSH: usize = 64 << 20;

/// One push at a time per process.
static PUSH_LOCK: Mutex<()> = Mutex::new(());

/// The sync store of a repository (see the module doc).
pub fn store_dir(settings: &crate::config::Settings) -> PathBuf {
    crate::cache::cache_root(settings).join("sync")
}

/// The routes, with their own body cap (`--max-push-bytes` when the engine takes pushes).
pub fn routes(engine: &super::Engine) -> Router<AppState> {
    let max_push = match &engine.source {
        super::Source::Pushed { max_push, .. } => *max_push,
        _ => DEFAULT_MAX_PUSH,
    };
    Router::new()
        .route("/v1/index/push", post(push))
        .route("/v1/index/pull", get(pull))
        .layer(DefaultBodyLimit::max(max_push))
}

/// What a push answers.
#[derive(Debug, serde::Serialize)]
struct PushAnswer {
    source: String,
    files: usize,
    sources: usize,
    nodes: usize,
    edges: usize,
    conflicts_resolved: usize,
    up_to_date: bool,
    warnings: Vec<String>,
}

fn err(status: u16, code: &str, msg: impl Into<String>) -> ApiError {
    ApiError::new(status, code, msg)
}

async fn push(
    State(st): State<AppState>,
    Extension(rid): Extension<Rid>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let rid = rid.0;
    if st.opts.token.is_none() {
        let e = err(
            401,
            "AUTH_FAILED",
            "this server takes no pushes without a token: start `kdd serve --accept-push` with \
             KDD_TOKEN set (also on loopback) and send `Authorization: Bearer $KDD_TOKEN`",
        );
        return Fail(e, rid).into_response();
    }
    if !matches!(st.engine.source, super::Source::Pushed { .. }) {
        let e = err(
            409,
            "PUSH_REJECTED",
            "this server does not accept pushed indexes: start it with `kdd serve --accept-push`",
        );
        return Fail(e, rid).into_response();
    }
    let source = headers
        .get("x-kdd-source")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("default")
        .to_string();
    if source.is_empty()
        || source.len() > 64
        || !source
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        let e = err(
            400,
            "BAD_REQUEST",
            "X-Kdd-Source must be 1-64 ASCII letters, digits, `-` or `_`",
        );
        return Fail(e, rid).into_response();
    }
    let dir = store_dir(&st.engine.settings);
    let r = tokio::task::spawn_blocking(move || accept(&dir, &source, &body)).await;
    match r {
        Ok(Ok(a)) => super::http::json_ok(&a),
        Ok(Err(e)) => Fail(e, rid).into_response(),
        Err(_) => Fail(ApiError::internal(), rid).into_response(),
    }
}

fn io_fail(what: &str, path: &Path, e: impl std::fmt::Display) -> ApiError {
    super::log(&format!("kdd serve: {what} {}: {e}", path.display()));
    ApiError::internal()
}

/// Check, merge and store one push (blocking).
fn accept(dir: &Path, source: &str, body: &[u8]) -> Result<PushAnswer, ApiError> {
    let files =
        bundle::decode(body, "push body").map_err(|e| err(400, "BAD_REQUEST", e.to_string()))?;
    let manifest: Manifest = files
        .get("manifest.json")
        .and_then(|b| serde_json::from_slice(b).ok())
        .ok_or_else(|| {
            err(
                422,
                "PUSH_REJECTED",
                "the pushed index has no valid manifest.json",
            )
        })?;
    if manifest.format_version != FORMAT_VERSION {
        return Err(err(
            409,
            "PUSH_REJECTED",
            format!(
                "index format version {} is not this server's ({FORMAT_VERSION}); upgrade kdd on \
                 the older side",
                manifest.format_version
            ),
        ));
    }
    let _g = PUSH_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let sources = dir.join("sources");
    let mine = sources.join(format!("{source}.bundle"));
    let previous = std::fs::read(&mine).ok();
    // Every other source's latest push, with its push time.
    let mut names = Vec::new();
    let mut sets = Vec::new();
    let mut times = Vec::new();
    for e in std::fs::read_dir(&sources).into_iter().flatten().flatten() {
        let p = e.path();
        let Some(name) = p
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(|n| n.strip_suffix(".bundle"))
        else {
            continue;
        };
        if name == source {
            continue;
        }
        let Ok(bytes) = std::fs::read(&p) else {
            continue;
        };
        let Ok(set) = bundle::decode(&bytes, name) else {
            super::log(&format!("kdd serve: {}: unreadable, skipped", p.display()));
            continue;
        };
        let t = e
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_secs() as i64);
        names.push(name.to_string());
        sets.push(set);
        times.push(t);
    }
    names.push(source.to_string());
    sets.push(files.clone());
    times.push(i64::MAX);
    let merged =
        crate::merge::refs::merge_file_sets(&names, sets, &times).map_err(|e| match e {
            crate::merge::refs::Error::Incompatible(m) => err(409, "PUSH_REJECTED", m),
            other => err(422, "PUSH_REJECTED", other.to_string()),
        })?;
    let index = dir.join("merged").join(INDEX_DIR);
    let up_to_date =
        previous.as_deref() == Some(body) && read_manifest(&index.join("manifest.json")).is_ok();
    if !up_to_date {
        // The merged index first: a push is stored only once it has been served, so a push
        // that cannot be installed never blocks the pushes after it.
        crate::artifact::replace_index(
            &ArtifactPaths::new(&index),
            &crate::sync::normalise(merged.files),
        )
        .map_err(|e| io_fail("writing", &index, e))?;
        std::fs::create_dir_all(&sources).map_err(|e| io_fail("creating", &sources, e))?;
        crate::artifact::write_if_changed(&mine, body).map_err(|e| io_fail("writing", &mine, e))?;
    }
    Ok(PushAnswer {
        source: source.to_string(),
        files: files.len(),
        sources: names.len(),
        nodes: merged.nodes,
        edges: merged.edges,
        conflicts_resolved: merged.conflicts_resolved.len(),
        up_to_date,
        warnings: merged.warnings,
    })
}

async fn pull(State(st): State<AppState>, Extension(rid): Extension<Rid>) -> Response {
    let rid = rid.0;
    let index = st.engine.index_dir();
    let r = tokio::task::spawn_blocking(move || match crate::sync::collect(&index, true) {
        Ok(files) => Ok(bundle::encode(&files)),
        Err(crate::sync::Error::NoLocalIndex(_)) => Err(err(
            404,
            "NO_REMOTE_INDEX",
            "No merged index available on remote: nothing was pushed here yet",
        )),
        Err(e) => {
            super::log(&format!("kdd serve: pull: {e}"));
            Err(ApiError::internal())
        }
    })
    .await;
    match r {
        Ok(Ok(body)) => (
            StatusCode::OK,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static(bundle::CONTENT_TYPE),
            )],
            body,
        )
            .into_response(),
        Ok(Err(e)) => Fail(e, rid).into_response(),
        Err(_) => Fail(ApiError::internal(), rid).into_response(),
    }
}
