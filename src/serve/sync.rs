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
//! changes nothing; pushes are decoded and merged one at a time (one lock), within bounds
//! checked from the bundles' headers first ([`MAX_SOURCES`], [`MAX_STORED_FILES`]; 413); a
//! push answered 408 by the request deadline while it merged is not applied, and one whose write
//! began is answered with its result, never 408 ([`Commitment`]). Pull answers the index this server
//! serves (the merged one with `--accept-push`), `NO_REMOTE_INDEX` when there is none.

use super::api::ApiError;
use super::conn::Commitment;
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

/// Most sources a server keeps (each push merges them all).
pub const MAX_SOURCES: usize = 64;
/// Most files the stored pushes may hold together, the new one included: every push decodes
/// and merges them all, so this bounds a push's memory (red team, nineteenth round: three
/// pushes of 150,000 files took a server to 3.9 GB; two of them still to 2.3 GB). As many as
/// one push may hold: pushes of one team's repository hold about the same specs.
pub const MAX_STORED_FILES: usize = bundle::MAX_FILES;

/// The file count a stored bundle declares (its header), without reading the rest.
fn declared_files(path: &Path) -> usize {
    use std::io::Read;
    let mut head = [0u8; 12];
    match std::fs::File::open(path).and_then(|mut f| f.read_exact(&mut head)) {
        Ok(()) => bundle::declared_files(&head).unwrap_or(0),
        Err(_) => 0,
    }
}

/// Refuse a push the store cannot take within its bounds ([`MAX_SOURCES`],
/// [`MAX_STORED_FILES`]), before anything is decoded.
fn check_bounds(sources: &Path, source: &str, body: &[u8]) -> Result<(), ApiError> {
    let mut others = 0;
    let mut files = bundle::declared_files(body).unwrap_or(0);
    for e in std::fs::read_dir(sources).into_iter().flatten().flatten() {
        let p = e.path();
        let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
        match name.strip_suffix(".bundle") {
            Some(n) if n != source => {
                others += 1;
                files += declared_files(&p);
            }
            _ => {}
        }
    }
    let remedy = format!(
        "remove the pushes of sources that are gone from {} on the server",
        sources.display()
    );
    if others >= MAX_SOURCES {
        let m = format!("this server keeps at most {MAX_SOURCES} sources; {remedy}");
        return Err(err(413, "PUSH_REJECTED", m));
    }
    if files > MAX_STORED_FILES {
        let m = format!(
            "the stored pushes would hold {files} files, over {MAX_STORED_FILES}; {remedy}"
        );
        return Err(err(413, "PUSH_REJECTED", m));
    }
    Ok(())
}

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
    point: Option<Extension<Commitment>>,
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
    // Claimed before the write: a push the deadline answered 408 first is not applied, and
    // one whose write began is answered with its result.
    let point = point.map(|Extension(p)| p).unwrap_or_default();
    let slow = st.opts.test_delay;
    let r = tokio::task::spawn_blocking(move || accept(&dir, &source, &body, &point, slow)).await;
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

/// The files of one push: path relative to `.kdd-index/` → bytes.
type Files = std::collections::BTreeMap<String, Vec<u8>>;

/// Every other source's latest push, with its push time (unreadable ones skipped, logged).
fn stored(sources: &Path, source: &str) -> (Vec<String>, Vec<Files>, Vec<i64>) {
    let mut names = Vec::new();
    let mut sets = Vec::new();
    let mut times = Vec::new();
    for e in std::fs::read_dir(sources).into_iter().flatten().flatten() {
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
    (names, sets, times)
}

/// Check, merge and store one push (blocking).
fn accept(
    dir: &Path,
    source: &str,
    body: &[u8],
    point: &Commitment,
    slow: std::time::Duration,
) -> Result<PushAnswer, ApiError> {
    // One push decoded and merged at a time: memory is bounded by the store's bounds.
    let _g = PUSH_LOCK.lock().unwrap_or_else(|e| e.into_inner());
    let sources = dir.join("sources");
    check_bounds(&sources, source, body)?;
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
    let mine = sources.join(format!("{source}.bundle"));
    let previous = std::fs::read(&mine).ok();
    let (mut names, mut sets, mut times) = stored(&sources, source);
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
    if !up_to_date && !point.claim() {
        // The request was already answered 408: the push is not applied, as it said.
        return Err(err(
            408,
            "REQUEST_TIMEOUT",
            "the push was not applied in time",
        ));
    }
    if !slow.is_zero() {
        // Tests only (`KDD_SERVE_TEST_DELAY_MS`): a write that outlasts the request deadline.
        std::thread::sleep(slow);
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn header(files: u32) -> Vec<u8> {
        let mut b = bundle::MAGIC.to_vec();
        b.extend_from_slice(&files.to_le_bytes());
        b
    }

    /// Red team, nineteenth round: the store had no bound, and three pushes of 150,000 files
    /// took a server to 3.9 GB. The bounds are read from the bundles' headers.
    #[test]
    fn a_push_over_the_store_bounds_is_refused_before_it_is_decoded() {
        let dir = tempfile::tempdir().unwrap();
        let sources = dir.path();
        assert!(check_bounds(sources, "a", &header(10)).is_ok());
        for i in 0..MAX_SOURCES {
            std::fs::write(sources.join(format!("s{i}.bundle")), header(1)).unwrap();
        }
        let e = check_bounds(sources, "new", &header(1)).unwrap_err();
        assert!(e.to_string().contains("at most 64 sources"), "{e}");
        // A source already stored replaces its own push.
        assert!(check_bounds(sources, "s0", &header(1)).is_ok());
        std::fs::remove_file(sources.join("s1.bundle")).unwrap();
        let big = (MAX_STORED_FILES - MAX_SOURCES + 2) as u32;
        let e = check_bounds(sources, "new", &header(big)).unwrap_err();
        assert!(e.to_string().contains("files, over"), "{e}");
        assert!(check_bounds(sources, "new", &header(big - 1)).is_ok());
    }
}
