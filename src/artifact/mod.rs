//! The COMMITTED on-disk format under `.kdd-index/`: stable, deterministic, merge-friendly.
//!
//! Layout (format version [`FORMAT_VERSION`] = 2; the manifest records it):
//!
//! ```text
//! .kdd-index/
//!   manifest.json                         configuration only (no timestamps, stats or commits)
//!   nodes/<kind>/[<domain>/]<id>.json     one node per spec, ONE compact JSON line: identity +
//!                                         128-bit blake3 of the source (`spec::content_hash`)
//!   edges/<kind>/[<domain>/]<id>.jsonl    that spec's links, one line per (type, domain) group
//!                                         with its sorted targets (`links.rs`)
//!   embeddings/<kind>/[<domain>/]<id>.bin that spec's chunk vectors (L2 only, see `embed::store`:
//!                                         8-byte keys, model fingerprint, int2 codes)
//!   enrichments/<kind>/[<domain>/]<id>.json what the developer's agent said (L3, `kdd enrich`)
//! ```
//!
//! Format v2 against v1, file content bytes (`cargo bench --bench bench -- storage`):
//!
//! ```text
//!                       nodes      edges      vectors    L1 (% of specs)   L2 (% of specs)
//! real corpus v1        17,270     19,239     52,472     23.5%             57.1%   (54 specs,
//! real corpus v2        13,658      9,158     14,692     14.8%             24.2%    156,391 B)
//! synthetic 1k v1      304,422    243,477        —       19.1%             46.1%*
//! synthetic 1k v2      240,843    123,746        —       12.7%             20.3%*
//! synthetic 10k v1   3,180,279  2,635,700        —       20.4%             47.5%*
//! synthetic 10k v2   2,544,364  1,368,412        —       13.7%             21.4%*
//! ```
//! (* synthetic L2 indexed with the 64-d hashed test embedder, projected to the model's 384
//! dimensions: 1,957 / 19,529 chunks at the v2 int2 record size, 104 bytes.) L2 meets issue
//! 15's 25% everywhere; L1 does not reach REQ-002's 10%: what is left is content (source path,
//! title, aliases, status, the 128-bit hash, link targets as written), not encoding overhead —
//! the real corpus needs 290 bytes per spec for all of it to fit, and its node lines alone
//! average 253.

//! Per-spec files and their names are kept: a spec's change touches only its own files and the
//! merge driver still merges per file; one file per spec (node + links) would save no byte of
//! content, only file count, and would need a new merge rule.
//!
//! Compatibility: every reader accepts v1 and v2 ([`READ_VERSIONS`]; pretty or compact nodes,
//! 64- or 32-hex hashes compared by `spec::same_content`, one-link or grouped edge lines, v1 or
//! v2 vector files). `kdd index` rewrites a v1 index as v2 in place (same paths, so nothing is
//! left behind; stored vectors are reused by their key prefix). The merge driver reads both and
//! writes v2. Golden fixtures: `fixtures/format/` (`tests/it/format.rs`).
//!
//! Invariants:
//! - The same specs give the same bytes on every machine and every run: sorted keys in a fixed
//!   order, `\n` line endings, a trailing newline, no wall-clock time anywhere.
//! - Writing an unchanged artifact does not touch the file (no mtime churn).
//! - Every write is temp-file + rename inside the target directory, and every path is built by
//!   [`ArtifactPaths`] from sanitised components: nothing is ever written outside the index root.

pub mod enrichment;
pub mod links;
mod paths;
mod store;

pub use links::render_links;
pub use paths::{
    inside_files, is_artifact_rel, path_clash, sanitize_component, stem_of, ArtifactPaths,
};
pub use store::{
    absent, list_files, parse_manifest, read_artifact, read_links, read_manifest, read_node,
    remove_artifacts, render_manifest, render_node, replace_index, root_outside, through_link,
    write_artifact, write_if_changed, IndexStore, MAX_ARTIFACT_BYTES,
};

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Version of the committed artifact format written by this build. Bump on incompatible change.
pub const FORMAT_VERSION: u32 = 2;

/// Format versions this build reads (a v1 index answers queries; `kdd index` rewrites it as v2).
pub const READ_VERSIONS: &[u32] = &[1, 2];

/// Name of the index directory at the repository root (defined in `config`).
pub use crate::config::INDEX_DIR;

/// Errors reading or writing artifacts. Every variant names the file involved.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not a valid kdd artifact ({message}); run `kdd index` to regenerate it")]
    Corrupt { path: PathBuf, message: String },
    #[error(
        "{path}: artifact format version {found} is not supported (this kdd reads versions 1 to {expected}); upgrade kdd"
    )]
    Version {
        path: PathBuf,
        found: u32,
        expected: u32,
    },
}

/// Single- or multi-domain layout (auto-detected from `specs/domains/`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Structure {
    SingleDomain,
    MultiDomain,
}

/// Index level (BR-INDEX-001): L1 graph + lexical, L2 adds embeddings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub enum IndexLevel {
    L1,
    L2,
}

/// The embedding configuration an L2 index was built with. Two indexes with different models
/// cannot be merged (BR-MERGE-001).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EmbeddingInfo {
    /// Model id, e.g. `multilingual-e5-small-int8`.
    pub model: String,
    pub dimensions: u32,
    /// Stored quantisation: `int2-rms` (format v2 as written), `int4-scaled` and `binary-sign` (v2, read), `int8-scaled` (v1).
    pub quantization: String,
}

/// `.kdd-index/manifest.json`: configuration only, so it does not change on every run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub format_version: u32,
    /// KDD standard version from `specs/_kdd.yaml` (`kdd_version`), default `"2.0"`.
    pub kdd_version: String,
    pub structure: Structure,
    /// Specs root relative to the repository root (`specs`).
    pub specs_root: String,
    /// Documents roots indexed besides the specs root (`docs`, `README.md`), sorted; absent
    /// when none, so indexes without documents keep their bytes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub docs: Vec<String>,
    /// Sorted domain names (multi-domain only; `_shared` included when present).
    #[serde(default)]
    pub domains: Vec<String>,
    pub index_level: IndexLevel,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embedding: Option<EmbeddingInfo>,
}

impl Manifest {
    /// A fresh L1 manifest for a specs root.
    pub fn new(specs_root: &str, structure: Structure, domains: Vec<String>) -> Manifest {
        Manifest {
            format_version: FORMAT_VERSION,
            kdd_version: "2.0".to_string(),
            structure,
            specs_root: specs_root.to_string(),
            docs: Vec::new(),
            domains,
            index_level: IndexLevel::L1,
            embedding: None,
        }
    }
}
