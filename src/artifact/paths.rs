//! Artifact paths built only from sanitised components, so hostile ids (`../../.git/hooks/x`,
//! absolute paths, NUL, 10 kB names) can never address a file outside `.kdd-index/`.

use crate::spec::{Kind, Node};
use std::path::{Path, PathBuf};

pub use crate::paths::sanitize_component;

/// Resolves artifact paths under one index root.
#[derive(Debug, Clone)]
pub struct ArtifactPaths {
    root: PathBuf,
}

impl ArtifactPaths {
    /// Paths under `root` (normally `<repo>/.kdd-index`).
    pub fn new(root: impl Into<PathBuf>) -> ArtifactPaths {
        ArtifactPaths { root: root.into() }
    }

    /// The index root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `manifest.json`.
    pub fn manifest(&self) -> PathBuf {
        self.root.join("manifest.json")
    }

    /// Relative stem `<kind>/[<domain>/]<id>` for a node (no extension), `/`-separated.
    pub fn stem(kind: Kind, domain: Option<&str>, local_id: &str) -> String {
        let mut s = String::from(kind.as_str());
        s.push('/');
        if let Some(d) = domain {
            // A domain folder named like an artifact file (`Pedido.json`) would put one node's
            // files inside another's (`nodes/entity/Pedido.json/x.json`): marked apart.
            let mut c = sanitize_component(d);
            if [".json", ".jsonl", ".bin"].iter().any(|e| c.ends_with(e)) {
                c.push('~');
                c.push_str(&blake3::hash(d.as_bytes()).to_hex()[..8]);
            }
            s.push_str(&c);
            s.push('/');
        }
        s.push_str(&sanitize_component(local_id));
        s
    }

    /// Relative stem for a node.
    pub fn node_stem(node: &Node) -> String {
        Self::stem(node.kind, node.domain.as_deref(), node.local_id())
    }

    /// The claim a node makes, `<id prefix>/[<domain>/]<id>`: equal for two nodes that would
    /// hold one id (kinds sharing an id prefix: `ui-view`, `ui-component`, `ui-flow`) or write
    /// one node file (sanitised names that collide). Duplicate ids are settled on it
    /// (`index::takes_id`).
    pub fn claim_key(node: &Node) -> String {
        claim_of(node.kind, &Self::node_stem(node))
    }

    /// [`Self::claim_key`] of a node file path relative to the index root
    /// (`nodes/<kind>/….json`).
    pub fn claim_key_of_rel(rel: &str) -> Option<String> {
        let stem = rel.strip_prefix("nodes/")?.strip_suffix(".json")?;
        let (kind, _) = stem.split_once('/')?;
        Some(claim_of(Kind::parse(kind)?, stem))
    }

    /// `nodes/<stem>.json`, relative to the index root.
    pub fn node_rel(node: &Node) -> String {
        format!("nodes/{}.json", Self::node_stem(node))
    }

    /// `edges/<stem>.jsonl`, relative to the index root.
    pub fn edges_rel(node: &Node) -> String {
        format!("edges/{}.jsonl", Self::node_stem(node))
    }

    /// `embeddings/<stem>.bin`, relative to the index root.
    pub fn embeddings_rel(node: &Node) -> String {
        format!("embeddings/{}.bin", Self::node_stem(node))
    }

    /// `enrichments/<stem>.json` (L3), relative to the index root.
    pub fn enrichment_rel(node: &Node) -> String {
        format!("enrichments/{}.json", Self::node_stem(node))
    }

    /// The artifact whose life a file follows: an enrichment file (`enrichments/<stem>.json`)
    /// lives exactly as long as its node file (`nodes/<stem>.json`); any other file is its own.
    pub fn owner_rel(rel: &str) -> String {
        match rel
            .strip_prefix("enrichments/")
            .and_then(|r| r.strip_suffix(".json"))
        {
            Some(stem) => format!("nodes/{stem}.json"),
            None => rel.to_string(),
        }
    }

    /// Absolute path of a relative artifact path produced by this type.
    pub fn abs(&self, rel: &str) -> PathBuf {
        let mut p = self.root.clone();
        for c in rel.split('/') {
            p.push(c);
        }
        p
    }
}

/// The first pair of relative paths (sorted set) where one is a file and the other lies inside
/// it as if it were a folder (`nodes/entity/Pedido.json` and `nodes/entity/Pedido.json/x.json`):
/// no file system can hold both, so a set of artifacts holding them is refused before any write.
pub fn path_clash<V>(files: &std::collections::BTreeMap<String, V>) -> Option<(&str, &str)> {
    inside_files(files).next()
}

/// Every such pair of [`path_clash`]: (the file, a path inside it), in path order, lazily.
pub fn inside_files<V>(
    files: &std::collections::BTreeMap<String, V>,
) -> impl Iterator<Item = (&str, &str)> {
    files.keys().flat_map(move |k| {
        let folder = format!("{k}/");
        files
            .range(folder.clone()..)
            .map(|(p, _)| p.as_str())
            .take_while(move |p| p.starts_with(&folder))
            .map(move |inner| (k.as_str(), inner))
    })
}

/// True for a path (relative to the index root) that names a kdd artifact: `manifest.json`,
/// or `nodes/…/*.json`, `edges/…/*.jsonl`, `embeddings/…/*.bin`, `enrichments/…/*.json` made
/// of plain components
/// (no empty, `.`-leading or `..` component, no backslash, NUL or control character).
pub fn is_artifact_rel(rel: &str) -> bool {
    if rel == "manifest.json" {
        return true;
    }
    let ext = match rel.split('/').next() {
        Some("nodes") => ".json",
        Some("edges") => ".jsonl",
        Some("embeddings") => ".bin",
        Some("enrichments") => ".json",
        _ => return false,
    };
    let comps: Vec<&str> = rel.split('/').collect();
    comps.len() >= 2
        && rel.ends_with(ext)
        && comps.iter().all(|c| {
            !c.is_empty()
                && !c.starts_with('.')
                && !c.chars().any(|ch| ch == '\\' || ch.is_control())
        })
}

/// Artifact stem (`<kind>/[<domain>/]<id>`) of a relative artifact path, and its top folder
/// (`nodes/entity/X.json` → `("nodes", "entity/X")`); `None` for anything else.
pub fn stem_of(rel: &str) -> Option<(&str, &str)> {
    let (top, rest) = rel.split_once('/')?;
    let stem = match top {
        "nodes" => rest.strip_suffix(".json")?,
        "edges" => rest.strip_suffix(".jsonl")?,
        "embeddings" | "enrichments" => rest.rsplit_once('.').map(|(s, _)| s)?,
        _ => return None,
    };
    Some((top, stem))
}

/// `<id prefix>/<the stem after its kind>`.
fn claim_of(kind: Kind, stem: &str) -> String {
    let tail = stem.split_once('/').map_or(stem, |(_, t)| t);
    format!("{}/{tail}", kind.id_prefix())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_artifact_paths_are_valid() {
        for ok in [
            "manifest.json",
            "nodes/entity/Pedido.json",
            "nodes/entity/auth/Token~1a2b3c4d.json",
            "edges/use-case/UC-001.jsonl",
            "embeddings/business-rule/BR-X-001.bin",
        ] {
            assert!(is_artifact_rel(ok), "{ok}");
        }
        for bad in [
            "",
            "specs/01-domain/Pedido.md",
            "nodes/../../.git/hooks/pre-commit.json",
            "nodes/./x.json",
            "nodes//x.json",
            "/nodes/x.json",
            "nodes/x.jsonl",
            "edges/x.json",
            "embeddings/x.json",
            "nodes/.hidden.json",
            "nodes/a\\b.json",
            "nodes/a\nb.json",
            "nodes.json",
        ] {
            assert!(!is_artifact_rel(bad), "{bad:?}");
        }
    }

    #[test]
    fn a_domain_named_like_an_artifact_file_never_nests_one_node_in_another() {
        let plain = ArtifactPaths::stem(Kind::Entity, None, "Pedido");
        for d in ["Pedido.json", "Pedido.jsonl", "Pedido.bin"] {
            let inner = ArtifactPaths::stem(Kind::Entity, Some(d), "x");
            let mut files = std::collections::BTreeMap::new();
            for (top, ext) in [("nodes", "json"), ("edges", "jsonl"), ("embeddings", "bin")] {
                files.insert(format!("{top}/{plain}.{ext}"), ());
                files.insert(format!("{top}/{inner}.{ext}"), ());
            }
            assert_eq!(path_clash(&files), None, "{inner}");
        }
        assert_eq!(
            ArtifactPaths::stem(Kind::Entity, Some("ventas"), "x"),
            "entity/ventas/x"
        );
    }

    #[test]
    fn hostile_components_are_confined() {
        for raw in [
            "../../.git/hooks/x",
            "/etc/passwd",
            "a\0b",
            "..",
            ".",
            "",
            "C:\\x",
        ] {
            let s = sanitize_component(raw);
            assert!(
                !s.contains('/') && !s.contains('\\') && !s.contains('\0'),
                "{s}"
            );
            assert!(!s.starts_with('.'), "{s}");
            assert!(!s.is_empty());
        }
        let long = "x".repeat(10_000);
        assert!(sanitize_component(&long).len() < 120);
        assert_ne!(sanitize_component("a/b"), sanitize_component("a_b"));
        assert_eq!(sanitize_component("BR-PRECIO-001"), "BR-PRECIO-001");
        assert_eq!(sanitize_component("Sesión"), "Sesión");
    }
}
