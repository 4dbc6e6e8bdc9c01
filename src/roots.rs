//! Roots: which repository paths kdd reads — the specs root and the configured documents roots
//! (`git config kdd.docs "docs,adr,README.md"`, `KDD_DOCS`, `kdd index --docs`, else the roots
//! the committed manifest records). Same level as [`crate::source`] (below parse): pure path
//! rules plus the one walker/reader of `source`, so specs and documents are listed, read and
//! ignored by the SAME rule.
//!
//! Invariants:
//! - A documents root is a repo-relative folder or file, normalised (`./docs/` → `docs`),
//!   never absolute, never escaping with `..`, never the repository root itself (that is what
//!   `--specs ""` is for) and never inside `.kdd-index/`. [`parse_docs`] refuses anything else
//!   with a message naming the entry.
//! - A document is a `.md`/`.markdown` file equal to a documents root (a file root) or under one
//!   (a folder root), with no hidden or empty component and no `_`-prefixed file name below the
//!   root — the spec rule ([`crate::source::is_spec_path`]) minus `.feature`. A path that is a
//!   spec is a spec, never a document (the specs root wins where roots overlap).
//! - `<root>/.kddignore` (gitignore syntax, paths relative to that root) excludes files under
//!   each folder root, specs root included ([`Ignores`]); a file root has no ignore file (drop it
//!   from `kdd.docs` instead).
//! - [`read_source`] is [`crate::source::read_spec`]'s rule (no link at any component,
//!   regular file, bounded read) for a path [`check_source`] accepted.

use crate::source::{self, Error, Ignore, Walk};

use crate::paths::INDEX_DIR;
use crate::spec::{Diagnostic, Severity};
use std::path::Path;

/// The specs root and the documents roots of one repository.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Roots {
    /// Specs root (`specs`; `` for the repository root).
    pub specs: String,
    /// Documents roots (folders or files), sorted, deduplicated.
    pub docs: Vec<String>,
}

fn under<'a>(path: &'a str, root: &str) -> Option<&'a str> {
    if path == root {
        return Some("");
    }
    path.strip_prefix(root).and_then(|r| r.strip_prefix('/'))
}

impl Roots {
    /// The roots of `specs` and `docs`.
    pub fn new(specs: &str, docs: &[String]) -> Roots {
        let mut docs = docs.to_vec();
        docs.sort();
        docs.dedup();
        Roots {
            specs: specs.to_string(),
            docs,
        }
    }

    /// True when `path` is a document (see the module doc).
    pub fn is_doc(&self, path: &str) -> bool {
        if source::is_spec_path(path, &self.specs) {
            return false;
        }
        let lower = path.to_ascii_lowercase();
        if !(lower.ends_with(".md") || lower.ends_with(".markdown")) {
            return false;
        }
        if path.split('/').next() == Some(INDEX_DIR) {
            return false;
        }
        self.docs.iter().any(|root| match under(path, root) {
            Some("") => true,
            Some(rel) => {
                let comps: Vec<&str> = rel.split('/').collect();
                !comps.iter().any(|c| c.is_empty() || c.starts_with('.'))
                    && !comps.last().is_some_and(|f| f.starts_with('_'))
            }
            None => false,
        })
    }

    /// True when `path` is a spec or a document.
    pub fn is_source(&self, path: &str) -> bool {
        source::is_spec_path(path, &self.specs) || self.is_doc(path)
    }

    /// The specs root, then every documents root.
    pub fn all(&self) -> Vec<&str> {
        std::iter::once(self.specs.as_str())
            .chain(self.docs.iter().map(String::as_str))
            .collect()
    }
}

/// Parse a comma-separated list of documents roots (`docs, adr/ ,README.md`). Returns the
/// normalised, sorted roots, or a message naming the bad entry.
pub fn parse_docs(list: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    for raw in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let bad = |why: &str| {
            Err(format!(
                "documents root {:?} {why}; list folders or files relative to the repository root (`git config kdd.docs \"docs,adr,README.md\"`)",
                source::printable(raw)
            ))
        };
        let Some(n) = crate::paths::normalize_rel(raw) else {
            return bad("is absolute or leaves the repository with `..`");
        };
        if n.is_empty() {
            return bad(
                "is the repository root (use --specs \"\" to index every Markdown file as a spec)",
            );
        }
        if n.split('/').next() == Some(INDEX_DIR) || n.chars().any(char::is_control) {
            return bad("is inside .kdd-index/ or has control characters");
        }
        out.push(n);
    }
    out.sort();
    out.dedup();
    Ok(out)
}

/// Validate a repo-relative spec or document path from a committed artifact or a client: the
/// checks of [`source::check_rel`], with documents accepted too.
pub fn check_source(rel: &str, roots: &Roots) -> Result<String, Error> {
    match source::check_rel(rel, &roots.specs) {
        Err(Error::BadPath { why, .. }) if why.starts_with("not a .md") && roots.is_doc(rel) => {
            // Only the "not a spec" check failed: the shape checks passed.
            Ok(rel.to_string())
        }
        other => other,
    }
}

/// Read one spec or document of the work tree under the one rule (see the module doc).
pub fn read_source(repo_root: &Path, rel: &str, roots: &Roots) -> Result<Vec<u8>, Error> {
    let rel = check_source(rel, roots)?;
    source::read_checked(repo_root, &rel)
}

/// The content hash ([`crate::spec::content_hash`]) of one spec or document of the work tree,
/// read by [`read_source`]: what freshness checks compare with a node's `source_hash`.
pub fn hash_source(repo_root: &Path, rel: &str, roots: &Roots) -> Result<String, Error> {
    read_source(repo_root, rel, roots).map(|b| crate::spec::content_hash(&b))
}

/// The `.kddignore` matchers of every folder root.
#[derive(Debug, Clone, Default)]
pub struct Ignores(Vec<(String, Ignore)>);

impl Ignores {
    /// Build from a lookup of each root's `.kddignore` bytes (work tree, staged or committed).
    pub fn from_lookup(
        roots: &Roots,
        mut bytes_of: impl FnMut(&str) -> Option<Vec<u8>>,
    ) -> Ignores {
        Ignores(
            roots
                .all()
                .into_iter()
                .filter_map(|r| {
                    let b = bytes_of(&source::kddignore_path(r))?;
                    Some((r.to_string(), Ignore::from_bytes(r, &b)))
                })
                .collect(),
        )
    }

    /// Read every root's `.kddignore` from a work tree or mirror (no-follow, bounded).
    pub fn load(repo_root: &Path, roots: &Roots) -> Ignores {
        Ignores::from_lookup(roots, |rel| {
            source::read_regular(&repo_root.join(rel), rel, source::MAX_SPEC_BYTES).ok()
        })
    }

    /// True when the `.kddignore` of the root holding `path` excludes it.
    pub fn ignores(&self, path: &str) -> bool {
        self.0.iter().any(|(_, i)| i.ignores(path))
    }

    /// A warning per `.kddignore` whose lines over the bounds were skipped.
    pub fn diagnostics(&self) -> Vec<crate::spec::Diagnostic> {
        self.0.iter().filter_map(|(_, i)| i.diagnostic()).collect()
    }
}

/// List the documents of the work tree: every folder root walked with the specs' walker (links
/// never followed, `.kddignore` honoured), every file root read by the same rule. A root that
/// does not exist is a warning naming it, never an abort.
pub fn walk_docs(repo_root: &Path, roots: &Roots) -> Walk {
    let mut out = Walk::default();
    let ign = Ignores::load(repo_root, roots);
    for root in &roots.docs {
        let abs = repo_root.join(root);
        let md = std::fs::symlink_metadata(&abs);
        if md.as_ref().is_ok_and(|m| m.is_file()) {
            if roots.is_doc(root) {
                out.files.push(root.clone());
            }
            continue;
        }
        let keep = |p: &str| roots.is_doc(p) && !ign.ignores(p);
        match source::walk_root(repo_root, root, &keep) {
            Ok(w) => {
                out.files.extend(w.files);
                out.diagnostics.extend(w.diagnostics);
            }
            Err(e) => out.diagnostics.push(Diagnostic {
                severity: Severity::Warning,
                file: source::printable(root),
                line: None,
                message: match e {
                    Error::Symlink { .. } => {
                        "documents root is a symbolic link; not followed, not indexed".into()
                    }
                    _ => "documents root not found; nothing indexed from it (create it, or remove it from `git config kdd.docs`)".into(),
                },
            }),
        }
    }
    // The specs root's `.kddignore` is named by the specs' walk.
    let specs_ignore = source::kddignore_path(&roots.specs);
    let named = ign.diagnostics().into_iter();
    out.diagnostics
        .extend(named.filter(|d| d.file != specs_ignore));
    out.files.sort();
    out.files.dedup();
    out.diagnostics.sort();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documents_roots() {
        assert_eq!(
            parse_docs(" docs/, ./adr ,README.md,docs").unwrap(),
            vec!["README.md", "adr", "docs"]
        );
        for bad in ["/etc", "../x", ".", ".kdd-index/x"] {
            assert!(parse_docs(bad).is_err(), "{bad}");
        }
        let r = Roots::new("specs", &parse_docs("docs,README.md,specs/guides").unwrap());
        assert!(r.is_doc("docs/a/guide.md") && r.is_doc("README.md") && r.is_doc("docs/X.MD"));
        assert!(!r.is_doc("docs/.hidden/a.md") && !r.is_doc("docs/_draft.md"));
        assert!(!r.is_doc("docs/a.txt") && !r.is_doc("docsx/a.md") && !r.is_doc("other.md"));
        // Inside the specs root, a spec stays a spec.
        assert!(!r.is_doc("specs/guides/a.md") && r.is_source("specs/guides/a.md"));
        assert!(check_source("docs/a/guide.md", &r).is_ok());
        assert!(check_source("docs/../etc/a.md", &r).is_err());
        assert!(check_source("other/a.md", &r).is_err());
    }

    #[test]
    fn walks_documents_under_the_one_rule() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path();
        std::fs::create_dir_all(root.join("docs/sub")).unwrap();
        std::fs::write(root.join("docs/a.md"), "# A\n").unwrap();
        std::fs::write(root.join("docs/sub/b.md"), "# B\n").unwrap();
        std::fs::write(root.join("docs/c.txt"), "c").unwrap();
        std::fs::write(root.join("README.md"), "# R\n").unwrap();
        std::fs::write(root.join("secret.md"), "SECRET").unwrap();
        std::os::unix::fs::symlink(root.join("secret.md"), root.join("docs/l.md")).unwrap();
        std::fs::write(root.join("docs/.kddignore"), "sub/\n").unwrap();
        let r = Roots::new("specs", &parse_docs("docs,README.md,gone").unwrap());
        let w = walk_docs(root, &r);
        assert_eq!(w.files, vec!["README.md", "docs/a.md"]);
        let files: Vec<&str> = w.diagnostics.iter().map(|d| d.file.as_str()).collect();
        assert_eq!(files, vec!["gone", "docs/l.md"], "{:?}", w.diagnostics);
        assert_eq!(read_source(root, "docs/a.md", &r).unwrap(), b"# A\n");
        assert!(read_source(root, "docs/l.md", &r).is_err());
        assert!(read_source(root, "secret.md", &r).is_err());
    }
}
