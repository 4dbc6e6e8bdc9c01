//! Merging `.kdd-index/` artifacts (BR-MERGE-001) without conflict markers.
//!
//! - [`merge_file`]: the per-file three-way merge behind the git merge driver
//!   (`kdd merge-driver %O %A %B %P`). Every rule is symmetric in ours/theirs, so a rebase (which
//!   swaps the sides) gives the same bytes as a merge.
//!   - node files: equal → keep; one side unchanged → the other; both changed → the node with the
//!     smaller canonical bytes (deterministic; artifacts carry no clock). The post-merge heal or
//!     next pre-commit re-derives it from the merged spec, so the index ends equal to a fresh
//!     index of the merged specs. Nodes are merged whole, keys this kdd does not know included
//!     (`fields.rs`): a node written by a newer kdd keeps its new fields.
//!   - edge files: set union by (type, to, domain), minus the links either side removed
//!     relative to the base (cascading removals); unknown keys of a line are kept.
//!   - embedding files: a valid vector file always wins over an invalid one (empty, truncated,
//!     garbage); between two valid ones, one side unchanged → the other, both changed → the
//!     smaller bytes (re-derived with their node by the heal); two invalid → the fallback.
//! - Every rule is total: arbitrary bytes never panic, they give `Unsupported` (property tests
//!   and a bounded fuzz in `proptests.rs` and `tests/it/hostile/net.rs`).
//!   - enrichment files (L3): union of the `(spec_hash, agent)` entries minus those either side
//!     removed; readers use the entry whose spec hash is the merged node's
//!     (`artifact::enrichment`), so the side that enriched the merged text wins.
//!   - manifest: field-wise three-way merge, union of domains; incompatible embedding models or
//!     format versions are a real conflict ("Incompatible embedding models, cannot merge").
//! - [`refs`]: the ref-level merge of whole indexes for the server (`kdd merge-index`, CMD-004).

mod fields;
#[cfg(test)]
mod proptests;
pub mod refs;

pub(crate) use crate::artifact::links::render_link_lines;
use crate::artifact::links::LinkLine;
use crate::artifact::{render_manifest, IndexLevel, Manifest, FORMAT_VERSION, READ_VERSIONS};
use std::collections::BTreeSet;

/// The message of an incompatible-manifest conflict (BR-MERGE-001).
pub const INCOMPATIBLE: &str = "Incompatible embedding models, cannot merge";

/// Which artifact a path under `.kdd-index/` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    Node,
    Edges,
    Embedding,
    Enrichment,
    Manifest,
    /// Not a known artifact: git's own merge applies.
    Other,
}

/// Classify a repo-relative path (`.kdd-index/nodes/entity/X.json`).
pub fn classify(path: &str) -> FileKind {
    let rel = match path.find(".kdd-index/") {
        Some(i) => &path[i + ".kdd-index/".len()..],
        None => return FileKind::Other,
    };
    if rel == "manifest.json" {
        FileKind::Manifest
    } else if rel.starts_with("nodes/") && rel.ends_with(".json") {
        FileKind::Node
    } else if rel.starts_with("edges/") && rel.ends_with(".jsonl") {
        FileKind::Edges
    } else if rel.starts_with("embeddings/") && rel.ends_with(".bin") {
        FileKind::Embedding
    } else if rel.starts_with("enrichments/") && rel.ends_with(".json") {
        FileKind::Enrichment
    } else {
        FileKind::Other
    }
}

/// Result of merging one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Clean: write these bytes to `%A`, exit 0.
    Merged(Vec<u8>),
    /// A real conflict: leave `%A` as ours, report, exit 1.
    Conflict(String),
    /// Unreadable input or unknown format: fall back to git's own merge, exit non-zero.
    Unsupported(String),
}

/// Three-way merge of one artifact. `base` is `None` (or empty) for add/add.
pub fn merge_file(kind: FileKind, base: Option<&[u8]>, ours: &[u8], theirs: &[u8]) -> Outcome {
    let base = base.filter(|b| !b.is_empty() || kind == FileKind::Edges);
    match kind {
        FileKind::Node => merge_node(base, ours, theirs),
        FileKind::Edges => merge_edges(base, ours, theirs),
        FileKind::Embedding => merge_embeddings(base, ours, theirs),
        FileKind::Manifest => merge_manifest(base, ours, theirs),
        FileKind::Enrichment => crate::artifact::enrichment::merge_enrichment(base, ours, theirs)
            .map_or_else(Outcome::Unsupported, Outcome::Merged),
        FileKind::Other => Outcome::Unsupported("not a kdd artifact".into()),
    }
}

/// Generic three-way pick: equal → ours; one side unchanged → the other; else the smaller.
fn pick3<'a>(base: Option<&[u8]>, ours: &'a [u8], theirs: &'a [u8]) -> &'a [u8] {
    if ours == theirs || base == Some(theirs) {
        ours
    } else if base == Some(ours) {
        theirs
    } else {
        ours.min(theirs)
    }
}

fn merge_node(base: Option<&[u8]>, ours: &[u8], theirs: &[u8]) -> Outcome {
    let parse = |b: &[u8], side: &str| {
        fields::parse_node(b).map_err(|e| format!("{side} node is not valid: {e}"))
    };
    let (o, t) = match (parse(ours, "our"), parse(theirs, "their")) {
        (Ok(o), Ok(t)) => (o, t),
        (Err(e), _) | (_, Err(e)) => return Outcome::Unsupported(e),
    };
    // Whole nodes, unknown keys included, so the winner is one side's node, complete.
    let b = base.and_then(|b| fields::parse_node(b).ok());
    let (ro, rt) = (fields::render_node(&o), fields::render_node(&t));
    let rb = b.as_ref().map(fields::render_node);
    Outcome::Merged(pick3(rb.as_deref(), &ro, &rt).to_vec())
}

/// An edges file (format v1 or v2) as its links with their unknown keys.
fn parse_links(b: &[u8]) -> Result<BTreeSet<LinkLine>, String> {
    let text = std::str::from_utf8(b).map_err(|e| e.to_string())?;
    crate::artifact::links::parse_links_text(text)
}

fn merge_edges(base: Option<&[u8]>, ours: &[u8], theirs: &[u8]) -> Outcome {
    let (o, t) = match (parse_links(ours), parse_links(theirs)) {
        (Ok(o), Ok(t)) => (o, t),
        (Err(e), _) | (_, Err(e)) => return Outcome::Unsupported(e),
    };
    // An unreadable base (a criss-cross merge's virtual ancestor can hold conflict markers)
    // counts as empty: a plain union, nothing removed.
    let b = base.and_then(|b| parse_links(b).ok()).unwrap_or_default();
    let removed: BTreeSet<&LinkLine> = b
        .iter()
        .filter(|l| !o.contains(*l) || !t.contains(*l))
        .collect();
    Outcome::Merged(render_link_lines(
        o.union(&t).filter(|l| !removed.contains(l)),
    ))
}

/// Vector files: a valid side always wins over an invalid (empty, truncated, garbage) one;
/// two valid sides follow the three-way rule; two invalid sides are left to the fallback.
fn merge_embeddings(base: Option<&[u8]>, ours: &[u8], theirs: &[u8]) -> Outcome {
    let valid = |b: &[u8]| crate::embed::store::decode("", b).is_ok();
    match (valid(ours), valid(theirs)) {
        (true, true) => Outcome::Merged(pick3(base.filter(|b| valid(b)), ours, theirs).to_vec()),
        (true, false) => Outcome::Merged(ours.to_vec()),
        (false, true) => Outcome::Merged(theirs.to_vec()),
        (false, false) => Outcome::Unsupported("neither side is a valid kdd vector file".into()),
    }
}

fn parse_manifest(b: &[u8], side: &str) -> Result<Manifest, String> {
    let v: serde_json::Value =
        serde_json::from_slice(b).map_err(|e| format!("{side} manifest is not JSON: {e}"))?;
    // A v1 side merges with a v2 one: the merged manifest (and every merged file) is v2.
    let fv = v.get("format_version").and_then(|x| x.as_u64());
    if !fv.is_some_and(|f| READ_VERSIONS.iter().any(|r| u64::from(*r) == f)) {
        return Err(format!(
            "{side} manifest has format version {fv:?}, this kdd merges {READ_VERSIONS:?}"
        ));
    }
    let m: Manifest =
        serde_json::from_value(v).map_err(|e| format!("{side} manifest is not valid: {e}"))?;
    match crate::artifact::root_outside(&m) {
        Some(why) => Err(format!("{side} manifest: {why}")),
        None => Ok(m),
    }
}

/// Three-way merge of manifests (also used by the ref-level merge).
pub fn merge_manifests(
    base: Option<&Manifest>,
    ours: &Manifest,
    theirs: &Manifest,
) -> Result<Manifest, String> {
    if let (Some(a), Some(b)) = (&ours.embedding, &theirs.embedding) {
        if a.model != b.model || a.dimensions != b.dimensions {
            return Err(format!("{INCOMPATIBLE}: {} vs {}", a.model, b.model));
        }
    }
    fn f3<T: Clone + PartialEq + Ord>(b: Option<&T>, o: &T, t: &T) -> T {
        if o == t || b == Some(t) {
            o.clone()
        } else if b == Some(o) {
            t.clone()
        } else {
            o.clone().min(t.clone())
        }
    }
    let str3 = |b: Option<&String>, o: &String, t: &String| f3(b, o, t);
    let structure = {
        let s = |m: &Manifest| serde_json::to_string(&m.structure).unwrap_or_default();
        let pick = f3(base.map(s).as_ref(), &s(ours), &s(theirs));
        if pick == s(ours) {
            ours.structure
        } else {
            theirs.structure
        }
    };
    let domains: BTreeSet<String> = ours
        .domains
        .iter()
        .chain(&theirs.domains)
        .cloned()
        .collect();
    let index_level = ours.index_level.max(theirs.index_level);
    let embedding = match (&ours.embedding, &theirs.embedding) {
        (Some(a), Some(b)) => Some(if a.quantization <= b.quantization {
            a.clone()
        } else {
            b.clone()
        }),
        (Some(a), None) | (None, Some(a)) => Some(a.clone()),
        (None, None) => None,
    };
    Ok(Manifest {
        format_version: FORMAT_VERSION,
        kdd_version: str3(
            base.map(|m| &m.kdd_version),
            &ours.kdd_version,
            &theirs.kdd_version,
        ),
        structure,
        specs_root: str3(
            base.map(|m| &m.specs_root),
            &ours.specs_root,
            &theirs.specs_root,
        ),
        // Documents roots: the union (a root added on either side stays indexed).
        docs: crate::roots::Roots::new("", &[ours.docs.clone(), theirs.docs.clone()].concat()).docs,
        domains: domains.into_iter().collect(),
        embedding: if index_level == IndexLevel::L2 {
            embedding
        } else {
            None
        },
        index_level,
    })
}

fn merge_manifest(base: Option<&[u8]>, ours: &[u8], theirs: &[u8]) -> Outcome {
    let (o, t) = match (parse_manifest(ours, "our"), parse_manifest(theirs, "their")) {
        (Ok(o), Ok(t)) => (o, t),
        (Err(e), _) | (_, Err(e)) => return Outcome::Unsupported(e),
    };
    let b = base.and_then(|b| parse_manifest(b, "base").ok());
    match merge_manifests(b.as_ref(), &o, &t) {
        Ok(m) => Outcome::Merged(render_manifest(&m)),
        Err(e) => Outcome::Conflict(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::artifact::{render_node, EmbeddingInfo, Structure};
    use crate::spec::Node;
    use crate::spec::{Kind, Layer};

    fn node(hash: &str, title: &str) -> Vec<u8> {
        render_node(&Node {
            id: "Entity:Pedido".into(),
            kind: Kind::Entity,
            source_file: "specs/Pedido.md".into(),
            source_hash: hash.into(),
            title: title.into(),
            status: None,
            aliases: vec![],
            domain: None,
            layer: Layer::Domain,
        })
    }

    #[test]
    fn classify_paths() {
        assert_eq!(classify(".kdd-index/nodes/entity/X.json"), FileKind::Node);
        assert_eq!(classify(".kdd-index/edges/entity/X.jsonl"), FileKind::Edges);
        assert_eq!(
            classify(".kdd-index/embeddings/entity/X.bin"),
            FileKind::Embedding
        );
        assert_eq!(classify(".kdd-index/manifest.json"), FileKind::Manifest);
        assert_eq!(classify("specs/x.md"), FileKind::Other);
    }

    #[test]
    fn node_rules_are_symmetric() {
        let (b, o, t) = (node("a", "x"), node("b", "x"), node("c", "x"));
        assert_eq!(
            merge_file(FileKind::Node, Some(&b), &b, &t),
            Outcome::Merged(t.clone())
        );
        assert_eq!(
            merge_file(FileKind::Node, Some(&b), &o, &b),
            Outcome::Merged(o.clone())
        );
        let m1 = merge_file(FileKind::Node, Some(&b), &o, &t);
        let m2 = merge_file(FileKind::Node, Some(&b), &t, &o);
        assert_eq!(m1, m2);
        assert!(matches!(
            merge_file(FileKind::Node, Some(&b), b"<<<<<<<", &t),
            Outcome::Unsupported(_)
        ));
    }

    #[test]
    fn edges_union_with_removals() {
        let l = |to: &str| format!("{{\"type\":\"WIKI_LINK\",\"to\":\"{to}\"}}\n");
        let base = format!("{}{}", l("A"), l("B"));
        let ours = format!("{}{}", l("A"), l("C"));
        let theirs = format!("{}{}{}", l("A"), l("B"), l("D"));
        let out = merge_file(
            FileKind::Edges,
            Some(base.as_bytes()),
            ours.as_bytes(),
            theirs.as_bytes(),
        );
        // v1 lines in, one v2 group out.
        let want = "{\"type\":\"WIKI_LINK\",\"to\":[\"A\",\"C\",\"D\"]}\n";
        assert_eq!(out, Outcome::Merged(want.as_bytes().to_vec()));
        // A v1 side merged with a v2 side: the same union, as v2.
        let theirs_v2 = "{\"type\":\"WIKI_LINK\",\"to\":[\"A\",\"B\",\"D\"]}\n";
        let out = merge_file(
            FileKind::Edges,
            Some(base.as_bytes()),
            ours.as_bytes(),
            theirs_v2.as_bytes(),
        );
        assert_eq!(out, Outcome::Merged(want.as_bytes().to_vec()));
    }

    #[test]
    fn manifest_union_and_incompatible_models() {
        let mut a = Manifest::new(
            "specs",
            Structure::MultiDomain,
            vec!["auth".into(), "core".into()],
        );
        let mut b = Manifest::new(
            "specs",
            Structure::MultiDomain,
            vec!["core".into(), "sessions".into()],
        );
        let out = merge_file(
            FileKind::Manifest,
            None,
            &render_manifest(&a),
            &render_manifest(&b),
        );
        let Outcome::Merged(m) = out else { panic!() };
        let m: Manifest = serde_json::from_slice(&m).unwrap();
        assert_eq!(m.domains, vec!["auth", "core", "sessions"]);
        let e = |m: &str| EmbeddingInfo {
            model: m.into(),
            dimensions: 384,
            quantization: "int8".into(),
        };
        a.index_level = IndexLevel::L2;
        b.index_level = IndexLevel::L2;
        a.embedding = Some(e("nomic-embed-text-v1.5"));
        b.embedding = Some(e("bge-small-en-v1.5"));
        let out = merge_file(
            FileKind::Manifest,
            None,
            &render_manifest(&a),
            &render_manifest(&b),
        );
        assert!(matches!(out, Outcome::Conflict(m) if m.starts_with(INCOMPATIBLE)));
    }
}
