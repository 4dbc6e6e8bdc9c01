//! Every query of the PRD over the [`Cache`]: hybrid search (QRY-003), single-strategy search
//! (QRY-002 / lexical), graph traversal (QRY-001), impact (QRY-004), coverage (QRY-005), layer
//! violations (QRY-006), orphans and task context (QRY-007).
//!
//! This is the library API the CLI, the MCP server and the HTTP API wrap: each function takes
//! the cache and a serde request and returns a serde response or a typed [`Error`] whose
//! [`Error::code`] is the PRD error code (`QUERY_TOO_SHORT`, `NODE_NOT_FOUND`…).

pub mod agent;
mod codepath;
mod context;
mod domain;
pub mod evidence;
mod expand;
pub mod fresh;
mod fuse;
mod graph;
mod hits;
mod hybrid;
mod ident;
mod intent;
mod isolate;
pub mod knobs;
mod prf;
pub mod render;
mod searched;
pub mod translate;
pub mod types;
mod util;

pub use crate::embed::QueryEmbedder;
pub use context::context;
pub use graph::{coverage, graph, impact, orphans, violations};
pub use hybrid::{hybrid, search};
pub use searched::validate as validate_expansion;
pub use types::*;
pub use util::resolve_node;

use crate::cache::Cache;

/// The error for a query text that is too short: [`Error::QueryMissing`] when it is empty or
/// blank, [`Error::QueryTooShort`] when it has 1–2 letters or digits; `None` when it is usable.
pub fn check_text(query: &str) -> Option<Error> {
    if query.trim().is_empty() {
        Some(Error::QueryMissing)
    } else if too_short(query) {
        Some(Error::QueryTooShort)
    } else {
        None
    }
}

/// True when a query has fewer than 3 letters or digits (`QUERY_TOO_SHORT`): punctuation
/// alone carries nothing to match, and would only return the embedding's nearest noise.
pub fn too_short(query: &str) -> bool {
    query.chars().filter(|c| c.is_alphanumeric()).count() < 3
}

/// Query errors; `code()` gives the PRD error code.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("QUERY_TOO_SHORT: query text must have at least 3 letters or digits")]
    QueryTooShort,
    #[error(
        "QUERY_MISSING: no query text was given (e.g. `kdd query \"how are refunds issued?\"`)"
    )]
    QueryMissing,
    #[error("INDEX_UNAVAILABLE: {0}")]
    IndexUnavailable(String),
    #[error("NODE_NOT_FOUND: node not found: {0} (try a full id like `Entity:Pedido`, a short id like `UC-004`, a file stem or a path)")]
    NodeNotFound(String),
    #[error("AMBIGUOUS_NODE: `{name}` names several nodes: {candidates} (use a full id)")]
    Ambiguous { name: String, candidates: String },
    #[error("EMPTY_HINTS: at least one hint is required")]
    EmptyHints,
    #[error("NO_EMBEDDINGS: semantic search requires an L2 index with embeddings and a loadable model ({0})")]
    NoEmbeddings(String),
    #[error("UNKNOWN_KIND: no coverage rules defined for kind: {0}")]
    UnknownKind(String),
    #[error("{code}: {message}")]
    Invalid { code: &'static str, message: String },
    #[error("INDEX_UNAVAILABLE: {0}")]
    Cache(crate::cache::Error),
}

impl From<crate::cache::Error> for Error {
    fn from(e: crate::cache::Error) -> Error {
        match e {
            crate::cache::Error::IndexUnavailable(p) => Error::IndexUnavailable(format!(
                "no index available for querying at {} (run `kdd index` first; an index committed but not checked out, as in a `--no-checkout` clone or a sparse checkout that leaves `.kdd-index/` out, answers with `--ref HEAD`)",
                p.display()
            )),
            other => Error::Cache(other),
        }
    }
}

impl Error {
    /// The PRD error code.
    pub fn code(&self) -> &'static str {
        match self {
            Error::QueryTooShort => "QUERY_TOO_SHORT",
            Error::QueryMissing => "QUERY_MISSING",
            Error::IndexUnavailable(_) | Error::Cache(_) => "INDEX_UNAVAILABLE",
            Error::NodeNotFound(_) => "NODE_NOT_FOUND",
            Error::Ambiguous { .. } => "AMBIGUOUS_NODE",
            Error::EmptyHints => "EMPTY_HINTS",
            Error::NoEmbeddings(_) => "NO_EMBEDDINGS",
            Error::UnknownKind(_) => "UNKNOWN_KIND",
            Error::Invalid { code, .. } => code,
        }
    }

    pub(crate) fn invalid(code: &'static str, message: impl Into<String>) -> Error {
        Error::Invalid {
            code,
            message: message.into(),
        }
    }
}

/// Open the cache for a repository, mapping "no index" to `INDEX_UNAVAILABLE`.
pub fn open(settings: &crate::config::Settings) -> Result<Cache, Error> {
    Ok(Cache::open(settings)?)
}

/// The query embedder for an L2 index in a short-lived process (the CLI): the model the
/// environment selects, which must be the one named in the manifest, through the per-user warm
/// service (loaded in-process when the service cannot serve). Loaded now, so a missing model
/// is reported up front. `Err` says why semantic search is unavailable; hybrid search then
/// degrades to L1 with a `NO_EMBEDDINGS` warning. Servers use [`crate::embed::shared`] directly
/// (in-process, lazy).
pub fn embedder_for(
    manifest: &crate::artifact::Manifest,
) -> Result<std::sync::Arc<dyn QueryEmbedder>, String> {
    let Some(info) = manifest.embedding.as_ref() else {
        return Err("the index has no embeddings".into());
    };
    let e = crate::embed::shared::for_index_model(&info.model, false).map_err(|e| e.to_string())?;
    e.preload().map_err(|e| e.to_string())?;
    Ok(std::sync::Arc::new(e))
}
