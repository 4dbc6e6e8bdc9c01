//! A contested claim in a heal pass (two specs declaring one id, or two ids whose node files
//! collide): [`committed_holder`] says who held it before this commit (`HEAD`'s node file, so a
//! node file staged beside a newcomer does not decide); [`node_at`] reads the other claimant's
//! node to name it in the error. Read only when a claim is contested (rare).

use super::art_key;
use crate::artifact::{INDEX_DIR, MAX_ARTIFACT_BYTES};
use crate::git::{self, Entries};
use crate::spec::Node;
use std::collections::BTreeMap;

/// The spec `HEAD`'s node file at one of `node_rels` names, if any.
pub(super) fn committed_holder(repo: &gix::Repository, node_rels: &[&str]) -> Option<String> {
    node_rels.iter().find_map(|rel| {
        let id = git::head_blob(repo, &format!("{INDEX_DIR}/{rel}"))?;
        let bytes = git::read_blob_within(repo, id, MAX_ARTIFACT_BYTES).ok()??;
        serde_json::from_slice::<Node>(&bytes)
            .ok()
            .map(|n| n.source_file)
    })
}

/// The node at `rel` as the pass leaves it: written in this pass, else staged.
pub(super) fn node_at(
    repo: &gix::Repository,
    staged: &Entries,
    written: &BTreeMap<String, Vec<u8>>,
    rel: &str,
) -> Option<Node> {
    let bytes = match written.get(rel) {
        Some(b) => b.clone(),
        None => {
            let id = *staged.get(&art_key(rel))?;
            git::read_blob_within(repo, id, MAX_ARTIFACT_BYTES).ok()??
        }
    };
    serde_json::from_slice(&bytes).ok()
}
