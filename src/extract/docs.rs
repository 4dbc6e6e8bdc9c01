//! Generic documents (README, guides, ADRs outside the specs root; see `crate::roots`): what
//! extraction does differently for them. Pure.
//!
//! Invariants:
//! - A file outside the specs root is a document: kind [`Kind::Document`] whatever its
//!   front-matter says (front-matter is optional: `title`/`aliases` are used when present), id
//!   `Doc:<repo path without extension, `/` → `.`>` (`docs/guide.md` → `Doc:docs.guide`), no
//!   domain, layer `unknown`, and no "missing kind" warning.
//! - Its links are its wiki-links plus its Markdown links to other Markdown files
//!   (`[text](../adr/0001.md)`), recorded as `WIKI_LINK` to the repo-relative path
//!   (`adr/0001.md`); the resolver finds specs and documents by path. A link leaving the
//!   repository is dropped.

use super::links::WIKI_LINK;
use crate::spec::{Kind, LinkRecord};

/// True when `path` (repo-relative) is outside the specs root, i.e. a generic document.
pub fn is_document(path: &str, specs_root: &str) -> bool {
    !specs_root.is_empty()
        && path
            .strip_prefix(specs_root)
            .and_then(|r| r.strip_prefix('/'))
            .is_none()
}

/// The kind of every document.
pub const KIND: Kind = Kind::Document;

/// Link records of the Markdown links of a document (see the module doc).
pub fn markdown_links(path: &str, bytes: &[u8]) -> Vec<LinkRecord> {
    let text = String::from_utf8_lossy(bytes);
    crate::parse::mdlink::relative_targets(&text)
        .into_iter()
        .filter_map(|d| crate::parse::mdlink::resolve(path, &d))
        .filter(|to| to != path)
        .map(|to| LinkRecord {
            edge_type: WIKI_LINK.to_string(),
            to,
            domain: None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_and_their_links() {
        assert!(is_document("docs/a.md", "specs") && is_document("README.md", "specs"));
        assert!(!is_document("specs/a.md", "specs") && !is_document("a.md", ""));
        let e = crate::extract::extract(
            "docs/guide/setup.md",
            b"# Setup\n\nRead [the ADR](../../adr/0001.md) and [[Pedido]].\n",
            "specs",
        )
        .unwrap();
        assert_eq!(e.node.id, "Doc:docs.guide.setup");
        assert_eq!(e.node.kind, Kind::Document);
        assert!(e.diagnostics.is_empty(), "{:?}", e.diagnostics);
        let to: Vec<&str> = e.links.iter().map(|l| l.to.as_str()).collect();
        assert_eq!(to, vec!["Pedido", "adr/0001.md"]);
    }
}
