//! Bridge from spec bytes (read from a staged blob or a tree, never the work tree) to the exact
//! artifact bytes `kdd index` writes, so the hook, the merge driver, `resolve` and `verify`
//! agree with a full index byte for byte.
//!
//! Until the core indexer exposes its per-spec derivation this holds a minimal stand-in
//! (front-matter id/kind/title, `[[wiki-links]]` as `WIKI_LINK`); everything outside this file
//! only sees [`derive_spec`] / [`derive_manifest`].

use crate::artifact::{
    render_links, render_manifest, render_node, ArtifactPaths, Manifest, Structure,
};
use crate::config::Settings;
use crate::spec::{Diagnostic, Kind, LinkRecord, Node, Severity};

/// The committed artifacts of one spec: its node and every file under `.kdd-index/` it owns.
#[derive(Debug, Clone)]
pub struct Derived {
    pub node: Node,
    /// `(path relative to .kdd-index/, bytes)`, node file first.
    pub files: Vec<(String, Vec<u8>)>,
    pub diagnostics: Vec<Diagnostic>,
}

/// True for a file under the specs root that is indexed (`.md`, `.feature`).
pub fn is_spec_path(specs_root: &str, path: &str) -> bool {
    let rel = if specs_root.is_empty() {
        path
    } else {
        match path
            .strip_prefix(specs_root)
            .and_then(|r| r.strip_prefix('/'))
        {
            Some(r) => r,
            None => return false,
        }
    };
    if rel.starts_with(crate::artifact::INDEX_DIR) {
        return false;
    }
    (rel.ends_with(".md") || rel.ends_with(".feature"))
        && !rel.split('/').any(|c| c.starts_with('.'))
}

/// Domain of a spec path in a multi-domain layout (`specs/domains/<d>/…`, `specs/_shared/…`).
fn domain_of(specs_root: &str, path: &str) -> Option<String> {
    let rel = path
        .strip_prefix(specs_root)
        .map(|r| r.trim_start_matches('/'))
        .unwrap_or(path);
    let mut it = rel.split('/');
    match it.next() {
        Some("domains") => {
            let d = it.next()?;
            it.next().map(|_| d.to_string())
        }
        Some("_shared") => Some("_shared".to_string()),
        _ => None,
    }
}

/// Derive the artifacts of the spec at repo-relative `path` with content `bytes`.
/// A spec that cannot be read at all is an error diagnostic naming the file and line.
pub fn derive_spec(settings: &Settings, path: &str, bytes: &[u8]) -> Result<Derived, Diagnostic> {
    let fail = |line: Option<usize>, message: &str| Diagnostic {
        severity: Severity::Error,
        file: path.to_string(),
        line,
        message: message.to_string(),
    };
    let text = std::str::from_utf8(bytes)
        .map_err(|_| fail(None, "not UTF-8 text; save the file as UTF-8"))?;
    let stem = path
        .rsplit('/')
        .next()
        .unwrap_or(path)
        .rsplit_once('.')
        .map(|(s, _)| s)
        .unwrap_or(path);
    let mut fm = std::collections::BTreeMap::new();
    let mut body = text;
    if let Some(rest) = text
        .strip_prefix("---\n")
        .or_else(|| text.strip_prefix("---\r\n"))
    {
        let end = rest
            .find("\n---")
            .ok_or_else(|| fail(Some(1), "front-matter opened with `---` is never closed"))?;
        for (i, line) in rest[..end].lines().enumerate() {
            if line.trim().is_empty() || line.starts_with(' ') || line.starts_with('#') {
                continue;
            }
            match line.split_once(':') {
                Some((k, v)) => {
                    fm.insert(
                        k.trim().to_string(),
                        v.trim().trim_matches('"').trim_matches('\'').to_string(),
                    );
                }
                None if line.trim_start().starts_with('-') => {}
                None => return Err(fail(Some(i + 2), "invalid YAML front-matter line")),
            }
        }
        body = &rest[end + 4..];
    }
    let kind = if path.ends_with(".feature") {
        Kind::Feature
    } else {
        fm.get("kind")
            .and_then(|k| Kind::parse(k))
            .unwrap_or(Kind::Document)
    };
    let local = fm
        .get("id")
        .filter(|s| !s.is_empty())
        .cloned()
        .unwrap_or_else(|| stem.to_string());
    let domain = domain_of(&settings.specs_root, path);
    let id = match &domain {
        Some(d) => format!("{d}:{}:{local}", kind.id_prefix()),
        None => format!("{}:{local}", kind.id_prefix()),
    };
    let title = fm
        .get("title")
        .filter(|s| !s.is_empty())
        .cloned()
        .or_else(|| {
            body.lines()
                .find_map(|l| l.strip_prefix("# ").map(|t| t.trim().to_string()))
        })
        .unwrap_or_else(|| stem.to_string());
    let node = Node {
        id,
        kind,
        source_file: path.to_string(),
        source_hash: blake3::hash(bytes).to_hex().to_string(),
        title,
        status: fm.get("status").filter(|s| !s.is_empty()).cloned(),
        aliases: Vec::new(),
        domain,
        layer: kind.default_layer(),
    };
    let mut links = Vec::new();
    let mut rest = body;
    while let Some(i) = rest.find("[[") {
        rest = &rest[i + 2..];
        let Some(j) = rest.find("]]") else { break };
        let inner = &rest[..j];
        rest = &rest[j + 2..];
        let target = inner
            .split('|')
            .next()
            .unwrap_or("")
            .split('#')
            .next()
            .unwrap_or("");
        let (dom, to) = match target.split_once("::") {
            Some((d, t)) => (Some(d.trim().to_string()), t.trim()),
            None => (None, target.trim()),
        };
        if !to.is_empty() {
            links.push(LinkRecord {
                edge_type: "WIKI_LINK".into(),
                to: to.to_string(),
                domain: dom,
            });
        }
    }
    let files = vec![
        (ArtifactPaths::node_rel(&node), render_node(&node)),
        (ArtifactPaths::edges_rel(&node), render_links(&links)),
    ];
    Ok(Derived {
        node,
        files,
        diagnostics: Vec::new(),
    })
}

/// The manifest for the given spec paths (repo-relative). The index level and embedding
/// configuration are kept from `existing` (the staged manifest): they come from the machine that
/// embedded, and a hook on a machine without the model must not downgrade them.
pub fn derive_manifest<'a>(
    settings: &Settings,
    spec_paths: impl Iterator<Item = &'a str>,
    existing: Option<&[u8]>,
) -> Vec<u8> {
    let mut domains = std::collections::BTreeSet::new();
    let mut multi = false;
    for p in spec_paths {
        let rel = p
            .strip_prefix(settings.specs_root.as_str())
            .map(|r| r.trim_start_matches('/'))
            .unwrap_or(p);
        if rel.starts_with("domains/") {
            multi = true;
        }
        if let Some(d) = domain_of(&settings.specs_root, p) {
            domains.insert(d);
        }
    }
    let mut m = if multi {
        Manifest::new(
            &settings.specs_root,
            Structure::MultiDomain,
            domains.into_iter().collect(),
        )
    } else {
        Manifest::new(&settings.specs_root, Structure::SingleDomain, Vec::new())
    };
    if let Some(old) = existing.and_then(|b| serde_json::from_slice::<Manifest>(b).ok()) {
        m.index_level = old.index_level;
        m.embedding = old.embedding;
    }
    render_manifest(&m)
}

/// The complete expected `.kdd-index/` (path relative to it → bytes) for a set of spec files,
/// exactly what a fresh full index writes. Specs that cannot be read are returned as
/// diagnostics (their artifacts are then unknown).
pub fn derive_index(
    settings: &Settings,
    files: &[(String, Vec<u8>)],
    existing_manifest: Option<&[u8]>,
) -> (std::collections::BTreeMap<String, Vec<u8>>, Vec<Diagnostic>) {
    let mut out = std::collections::BTreeMap::new();
    let mut diags = Vec::new();
    let specs: Vec<&(String, Vec<u8>)> = files
        .iter()
        .filter(|(p, _)| is_spec_path(&settings.specs_root, p))
        .collect();
    for (p, b) in &specs {
        match derive_spec(settings, p, b) {
            Ok(d) => {
                diags.extend(d.diagnostics);
                out.extend(d.files);
            }
            Err(d) => diags.push(d),
        }
    }
    if !specs.is_empty() {
        out.insert(
            "manifest.json".to_string(),
            derive_manifest(
                settings,
                specs.iter().map(|(p, _)| p.as_str()),
                existing_manifest,
            ),
        );
    }
    (out, diags)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_paths() {
        assert!(is_spec_path("specs", "specs/01-domain/a.md"));
        assert!(is_spec_path("specs", "specs/x.feature"));
        assert!(!is_spec_path("specs", "specs/_kdd.yaml"));
        assert!(!is_spec_path("specs", "docs/a.md"));
        assert!(!is_spec_path("specs", "specs/.hidden/a.md"));
        assert!(is_spec_path("", "a.md"));
        assert!(!is_spec_path("", ".kdd-index/a.md"));
    }

    #[test]
    fn domains() {
        assert_eq!(
            domain_of("specs", "specs/domains/auth/a.md").as_deref(),
            Some("auth")
        );
        assert_eq!(
            domain_of("specs", "specs/_shared/a.md").as_deref(),
            Some("_shared")
        );
        assert_eq!(domain_of("specs", "specs/01-domain/a.md"), None);
    }
}
