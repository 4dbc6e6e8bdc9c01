//! Index sync (UC-007 / CMD-005): `kdd sync push` / `kdd sync pull` move ONLY the derived
//! artifacts of `.kdd-index/` between a developer's repository and a team server, over git
//! (`git.rs`: a ref `refs/kdd/index/<branch>` whose tree holds only `.kdd-index/`) or over the
//! HTTP API of `kdd serve` (`api.rs` client, `bundle.rs` wire form, server in
//! `serve/sync.rs`).
//!
//! What travels (REQ-003) is exactly what [`collect`] returns: `manifest.json` (configuration),
//! node files (id, kind, source path, blake3 of the source, title, status, aliases, domain,
//! layer), edge files (link targets as written and their types) and embedding files (chunk keys
//! and int8 vectors). No spec byte, section, paragraph or `indexed_fields` value is in any of
//! them. With the text opt-out (`--no-text`, `git config kdd.syncText false`) node titles and
//! aliases are replaced by the node's id too, so only identifiers, hashes, links and vectors
//! leave the machine (the server's lexical search then matches ids only).
//!
//! Invariants: nothing is written to the local `.kdd-index/` unless the whole operation
//! succeeded up to the write (any error leaves it untouched); every path read from the wire or
//! a remote ref is checked by [`valid_rel`] before it is written; merging is BR-MERGE-001 via
//! `crate::merge::refs`, never a second implementation.

pub mod api;
pub mod bundle;
pub mod git;

use crate::artifact::{read_artifact, ArtifactPaths, INDEX_DIR};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Errors of a sync, each with the CMD-005 code [`Error::code`].
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("No local index found at {0}: run `kdd index` first")]
    NoLocalIndex(PathBuf),
    #[error("No merged index available on remote {0}: push one first (`kdd sync push`)")]
    NoRemoteIndex(String),
    #[error("Cannot reach remote: {remote} ({detail})")]
    RemoteUnreachable { remote: String, detail: String },
    #[error("Authentication failed for remote: {remote} ({detail})")]
    AuthFailed { remote: String, detail: String },
    #[error("Push rejected: {0}")]
    PushRejected(String),
    #[error("Cannot merge the remote index into the local one: {0}")]
    Incompatible(String),
    #[error("Sync failed during {direction}: {detail}")]
    Transport { direction: String, detail: String },
    #[error("invalid index bundle: {0}")]
    BadBundle(String),
    #[error("{0}")]
    Merge(#[from] crate::merge::refs::Error),
    #[error(transparent)]
    Artifact(#[from] crate::artifact::Error),
}

impl Error {
    /// The CMD-005 / UC-007 error code.
    pub fn code(&self) -> &'static str {
        match self {
            Error::NoLocalIndex(_) => "NO_LOCAL_INDEX",
            Error::NoRemoteIndex(_) => "NO_REMOTE_INDEX",
            Error::RemoteUnreachable { .. } => "REMOTE_UNREACHABLE",
            Error::AuthFailed { .. } => "AUTH_FAILED",
            Error::PushRejected(_) => "PUSH_REJECTED",
            Error::Incompatible(_) => "INCOMPATIBLE_INDEX",
            Error::BadBundle(_) => "TRANSPORT_ERROR",
            Error::Transport { .. } | Error::Merge(_) | Error::Artifact(_) => "TRANSPORT_ERROR",
        }
    }

    fn transport(direction: &str, detail: impl std::fmt::Display) -> Error {
        Error::Transport {
            direction: direction.to_string(),
            detail: detail.to_string(),
        }
    }
}

/// What a push or pull did (the `--json` output).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Report {
    /// `push` or `pull`.
    pub direction: String,
    /// `git` or `api`.
    pub transport: String,
    /// Remote name or URL.
    pub remote: String,
    /// The ref synced (git transport).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub remote_ref: Option<String>,
    /// Commit the remote ref points at after the operation (git transport).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// Files sent (push) or installed (pull).
    pub files: usize,
    /// Node files among them.
    pub nodes: usize,
    /// Bytes of artifacts sent or installed.
    pub bytes: usize,
    /// Titles and aliases were sent (push; false with `--no-text`).
    pub text: bool,
    /// Nothing changed (the remote already had this index / the local one already matched).
    pub up_to_date: bool,
    /// Conflicts BR-MERGE-001 resolved while merging.
    pub conflicts_resolved: usize,
    pub warnings: Vec<String>,
}

/// True for a path (relative to the index root) that names a kdd artifact (see
/// [`crate::artifact::is_artifact_rel`]): every path read from the wire or a remote ref is
/// checked with it before it is read or written.
pub use crate::artifact::is_artifact_rel as valid_rel;

/// Read the local index to send: every artifact file under `index_dir` (regular files only,
/// links never followed), bounded reads. Without `text`, node titles and aliases are replaced
/// by the id (see the module doc). `NO_LOCAL_INDEX` when there is no readable manifest.
pub fn collect(index_dir: &Path, text: bool) -> Result<BTreeMap<String, Vec<u8>>, Error> {
    let manifest = index_dir.join("manifest.json");
    let Ok(bytes) = read_artifact(&manifest) else {
        return Err(Error::NoLocalIndex(index_dir.to_path_buf()));
    };
    crate::artifact::read_manifest(&manifest)?;
    let mut files = BTreeMap::new();
    files.insert("manifest.json".to_string(), bytes);
    // Enrichments carry the agent's summary (derived prose): pushed only with text.
    let tops: &[&str] = if text {
        &["nodes", "edges", "embeddings", "enrichments"]
    } else {
        &["nodes", "edges", "embeddings"]
    };
    for top in tops.iter().copied() {
        let mut rels = Vec::new();
        crate::index::list_files(&index_dir.join(top), top, &mut rels);
        for rel in rels.into_iter().filter(|r| valid_rel(r)) {
            let p = index_dir.join(&rel);
            let bytes = read_artifact(&p).map_err(|source| crate::artifact::Error::Io {
                path: p.clone(),
                source,
            })?;
            let bytes = if !text && top == "nodes" {
                strip_text(&bytes).ok_or_else(|| crate::artifact::Error::Corrupt {
                    path: p.clone(),
                    message: "not a node file".into(),
                })?
            } else {
                bytes
            };
            files.insert(rel, bytes);
        }
    }
    Ok(files)
}

/// A node file with its title set to the node's local id and its aliases dropped (keys this
/// kdd does not know are dropped too: they could hold text).
fn strip_text(bytes: &[u8]) -> Option<Vec<u8>> {
    let mut node: crate::spec::Node = serde_json::from_slice(bytes).ok()?;
    node.title = node.local_id().to_string();
    node.aliases.clear();
    Some(crate::artifact::render_node(&node))
}

/// Whether titles and aliases are pushed: `--no-text` wins, then `git config kdd.syncText`
/// (`false`/`no`/`off`/`0` turn text off), default on.
pub fn text_enabled(repo_dir: &Path, no_text_flag: bool) -> bool {
    if no_text_flag {
        return false;
    }
    !crate::git::config_get(repo_dir, "kdd.syncText").is_some_and(|v| {
        matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "false" | "no" | "off" | "0"
        )
    })
}

/// Install `files` as the local index at `index_dir` (written only after every check passed).
fn install(index_dir: &Path, files: &BTreeMap<String, Vec<u8>>) -> Result<(), Error> {
    if let Some(bad) = files.keys().find(|k| !valid_rel(k)) {
        return Err(Error::BadBundle(format!(
            "`{bad}` is not a kdd index artifact path"
        )));
    }
    // A manifest queries would refuse never replaces a good one (red team, nineteenth round).
    if let Some(m) = files.get("manifest.json") {
        let label = Path::new(INDEX_DIR).join("manifest.json");
        crate::artifact::parse_manifest(&label, m)
            .map_err(|e| Error::BadBundle(format!("the remote index: {e}")))?;
    }
    crate::artifact::replace_index(&ArtifactPaths::new(index_dir), files)?;
    Ok(())
}

/// A merged index as `kdd index` writes it: the merge renders an edge file for every node, but
/// a spec without links has none, so empty edge files are dropped (else every sync would churn).
pub fn normalise(mut files: BTreeMap<String, Vec<u8>>) -> BTreeMap<String, Vec<u8>> {
    files.retain(|k, v| !(k.starts_with("edges/") && v.is_empty()));
    files
}

/// Fill the size figures of a report from the files sent or installed.
fn count(report: &mut Report, files: &BTreeMap<String, Vec<u8>>) {
    report.files = files.len();
    report.nodes = files.keys().filter(|k| k.starts_with("nodes/")).count();
    report.bytes = files.values().map(Vec::len).sum();
}

/// The name of the index directory inside a sync tree (`.kdd-index`).
pub const TREE_DIR: &str = INDEX_DIR;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_text_keeps_identity_and_drops_titles_and_aliases() {
        let node = br#"{"id":"BR:BR-X-001","kind":"business-rule","source_file":"specs/BR-X-001.md","source_hash":"00","title":"Secret title","aliases":["Hidden"],"layer":"01-domain","future":"prose"}"#;
        let out = String::from_utf8(strip_text(node).unwrap()).unwrap();
        assert!(out.contains("\"title\":\"BR-X-001\""), "{out}");
        for gone in ["Secret", "Hidden", "future", "prose"] {
            assert!(!out.contains(gone), "{gone} in {out}");
        }
        assert!(out.contains("\"source_hash\":\"00\""), "{out}");
    }
}
