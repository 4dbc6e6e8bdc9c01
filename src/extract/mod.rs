//! Extract: [`Document`] → [`Extracted`] (node identity, indexed fields, typed link records).
//!
//! - Kind router (BR-DOCUMENT-001): front-matter `kind` → file name / folder pattern → legacy
//!   `tags`/`type`; kind-less Markdown becomes [`Kind::Document`] with a warning.
//! - Node id `<prefix>:<front-matter id or stem>`, domain-qualified under `domains/<d>/` and
//!   `_shared/`. Hostile ids (path separators, `:`, control characters, >128 bytes) fall back to
//!   the file stem with a warning.
//! - Layer from the first `NN-name` folder, else the kind's default.
//! - `indexed_fields` per canonical section key (both heading languages), plus the PRD names
//!   (`state_machine`, `input_params`, `relations`…).
//! - Link records typed by source kind + section ([`links`]); resolution happens in
//!   [`crate::graph`].
//!
//! Pure: no I/O. One spec's output never depends on another spec.

pub mod docs;
pub mod fields;
pub mod links;
pub mod route;

use crate::parse::{self, frontmatter, Document};
use crate::spec::{Diagnostic, Extracted, Kind, Layer, Node, Severity};
use route::Location;

/// Longest front-matter id accepted verbatim.
const MAX_ID_LEN: usize = 128;

/// Parse and extract one spec file. `path` is repo-relative with `/` separators; `specs_root`
/// is the repo-relative specs root (`specs`). `Err` means the file cannot be indexed at all.
pub fn extract(path: &str, bytes: &[u8], specs_root: &str) -> Result<Extracted, Diagnostic> {
    let doc = parse::parse(path, bytes)?;
    Ok(from_document(path, bytes, specs_root, doc))
}

/// Extraction from an already parsed document (`bytes` only feeds the source hash).
pub fn from_document(path: &str, bytes: &[u8], specs_root: &str, doc: Document) -> Extracted {
    let loc = route::locate(path, specs_root);
    let mut diags = doc.diagnostics.clone();
    let warn = |diags: &mut Vec<Diagnostic>, message: String| {
        diags.push(Diagnostic {
            severity: Severity::Warning,
            file: path.to_string(),
            line: None,
            message,
        })
    };
    let is_doc = docs::is_document(path, specs_root);
    let kind = if is_doc {
        docs::KIND
    } else {
        route_kind(path, &doc, &loc, &mut diags)
    };
    let fm = &doc.front_matter;
    wrong_shapes(fm, &mut |m| warn(&mut diags, m));
    // Local id.
    let stem_id = safe_stem(&loc, kind);
    let local = match fm.get("id").and_then(frontmatter::scalar) {
        Some(id) if kind != Kind::Document => {
            if id_is_safe(&id) {
                id
            } else {
                warn(
                    &mut diags,
                    format!(
                        "front-matter id {:?} is not a usable id (path separators, `:`, control characters or over {MAX_ID_LEN} bytes); using the file name `{stem_id}` instead",
                        truncate(&id, 60)
                    ),
                );
                stem_id.clone()
            }
        }
        _ => stem_id.clone(),
    };
    let domain = if is_doc { None } else { loc.domain.clone() };
    let id = match &domain {
        Some(d) => format!("{d}:{}:{local}", kind.id_prefix()),
        None => format!("{}:{local}", kind.id_prefix()),
    };
    let title = doc
        .title
        .clone()
        .or_else(|| fm.get("title").and_then(frontmatter::scalar))
        .unwrap_or_else(|| loc.stem.clone());
    let status = fm.get("status").and_then(frontmatter::scalar);
    let mut aliases: Vec<String> = fm
        .get("aliases")
        .map(frontmatter::string_list)
        .unwrap_or_default();
    // Feature files: scenario ids (`SCN-Checkout-001 — …`) make `[[SCN-Checkout-001]]` resolve.
    if let Some(f) = &doc.feature {
        for sc in &f.scenarios {
            let first = sc.name.split_whitespace().next().unwrap_or("");
            if first.starts_with("SCN-") && !aliases.iter().any(|a| a == first) {
                aliases.push(first.to_string());
            }
        }
    }
    aliases.retain(|a| !a.is_empty());
    aliases.dedup();
    let layer = loc.layer.filter(|_| !is_doc).unwrap_or_else(|| {
        if kind == Kind::Document {
            Layer::Unknown
        } else {
            kind.default_layer()
        }
    });
    let node = Node {
        id,
        kind,
        source_file: path.to_string(),
        source_hash: crate::spec::content_hash(bytes),
        title,
        status,
        aliases,
        domain,
        layer,
    };
    let mut sections = doc.sections.clone();
    fields::adjust_keys(kind, &mut sections);
    let eff = fields::effective_keys(&sections);
    let mut links = links::records(kind, &doc, &sections, &eff, node.domain.as_deref());
    if is_doc {
        links.extend(docs::markdown_links(path, bytes));
        links.sort();
        links.dedup();
    }
    let fields = fields::indexed_fields(kind, &node, &doc, &sections, &eff);
    Extracted {
        node,
        fields,
        links,
        sections,
        diagnostics: diags,
    }
}

fn route_kind(path: &str, doc: &Document, loc: &Location, diags: &mut Vec<Diagnostic>) -> Kind {
    let fm = &doc.front_matter;
    let is_feature = path.ends_with(".feature");
    let from_path = route::kind_from_filename(&loc.stem, is_feature)
        .or_else(|| route::kind_from_dirs(&loc.dirs));
    if is_feature {
        return Kind::Feature;
    }
    let mut warned = false;
    if let Some(k) = fm.get("kind").and_then(frontmatter::scalar) {
        warned = true;
        match Kind::parse(&k) {
            Some(kind) => {
                // FA-3: a kind in an unexpected folder is kept, with a warning.
                if let Some(dir_kind) = route::kind_from_dirs(&loc.dirs) {
                    if family(dir_kind) != family(kind) {
                        diags.push(Diagnostic {
                            severity: Severity::Warning,
                            file: path.to_string(),
                            line: None,
                            message: format!(
                                "kind `{kind}` in a folder meant for `{dir_kind}`; the front-matter kind wins (move the file or fix its kind)"
                            ),
                        });
                    }
                }
                return kind;
            }
            None => diags.push(Diagnostic {
                severity: Severity::Warning,
                file: path.to_string(),
                line: None,
                message: format!(
                    "unknown kind {:?} in front-matter; {}",
                    truncate(&k, 60),
                    match from_path {
                        Some(p) => format!("using `{p}` from the file's name/folder"),
                        None => "indexed as a generic document".to_string(),
                    }
                ),
            }),
        }
    }
    if let Some(k) = from_path {
        return k;
    }
    for field in ["type", "tags"] {
        if let Some(v) = fm.get(field) {
            if let Some(k) = frontmatter::string_list(v)
                .iter()
                .find_map(|t| Kind::parse(t))
            {
                return k;
            }
        }
    }
    if warned {
        return Kind::Document;
    }
    diags.push(Diagnostic {
        severity: Severity::Warning,
        file: path.to_string(),
        line: None,
        message: "no `kind` in front-matter and no kind-specific name or folder; indexed as a generic document (add `kind: …` to the front-matter)".into(),
    });
    Kind::Document
}

/// Kinds that legitimately share folders (roles and systems live in `entities/`, policies in
/// `rules/` in some templates, components in `views/` in PRD-era layouts).
fn family(k: Kind) -> u8 {
    match k {
        Kind::Entity | Kind::Role | Kind::System | Kind::Glossary => 1,
        Kind::BusinessRule | Kind::BusinessPolicy | Kind::CrossPolicy => 2,
        Kind::UiView | Kind::UiComponent | Kind::UiFlow => 3,
        Kind::Objective | Kind::Prd | Kind::Nfr | Kind::ValueUnit | Kind::Release => 4,
        other => 10 + other as u8,
    }
}

fn id_is_safe(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= MAX_ID_LEN
        && !id.starts_with('.')
        && !id
            .chars()
            .any(|c| c == '/' || c == '\\' || c == ':' || c.is_control())
}

/// The file stem as a local id (generic documents use their whole path so that two
/// `README.md` files do not collide).
fn safe_stem(loc: &Location, kind: Kind) -> String {
    let base = if kind == Kind::Document {
        let rel = loc
            .rel
            .rsplit_once('.')
            .map_or(loc.rel.as_str(), |(a, _)| a);
        rel.replace('/', ".")
    } else {
        loc.stem.clone()
    };
    let s: String = base
        .chars()
        .map(|c| {
            if c == ':' || c == '\\' || c.is_control() {
                '_'
            } else {
                c
            }
        })
        .collect();
    let s = s.trim_start_matches('.').to_string();
    if s.is_empty() {
        "_".to_string()
    } else {
        s
    }
}

fn truncate(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

/// A field kdd reads as one value but given as a list or a map is ignored: say so rather than
/// fall back in silence (a field left empty is simply unset).
fn wrong_shapes(fm: &serde_json::Map<String, serde_json::Value>, warn: &mut dyn FnMut(String)) {
    for key in ["id", "kind", "title", "status"] {
        let shape = match fm.get(key) {
            Some(serde_json::Value::Array(_)) => "a list",
            Some(serde_json::Value::Object(_)) => "a map",
            _ => continue,
        };
        warn(format!(
            "front-matter `{key}` is {shape}, not a single value; ignored (write it as a plain string)"
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn router_and_ids() {
        let e = extract(
            "specs/02-behavior/use-cases/UC-001-IndexDocument.md",
            b"---\nid: UC-001\nkind: use-case\nstatus: draft\n---\n# UC-001 \xe2\x80\x94 IndexDocument\n",
            "specs",
        )
        .unwrap();
        assert_eq!(e.node.id, "UC:UC-001");
        assert_eq!(e.node.layer, Layer::Behavior);
        assert_eq!(e.node.title, "UC-001 — IndexDocument");
        let e = extract("specs/01-domain/entities/Pedido.md", b"# Pedido\n", "specs").unwrap();
        assert_eq!(e.node.id, "Entity:Pedido");
        let e = extract(
            "specs/domains/auth/01-domain/entities/Token.md",
            b"---\nkind: entity\n---\n# Token\n",
            "specs",
        )
        .unwrap();
        assert_eq!(e.node.id, "auth:Entity:Token");
        let e = extract(
            "specs/x/evil.md",
            b"---\nkind: entity\nid: ../../.git/hooks/x\n---\n",
            "specs",
        )
        .unwrap();
        assert_eq!(e.node.id, "Entity:evil");
        assert!(e
            .diagnostics
            .iter()
            .any(|d| d.message.contains("not a usable id")));
        let e = extract("specs/notes/README.md", b"hello", "specs").unwrap();
        assert_eq!(e.node.kind, Kind::Document);
        assert_eq!(e.node.id, "Doc:notes.README");
        let e = extract(
            "specs/02-behavior/commands/Pedido.md",
            b"---\nkind: entity\n---\n# Pedido\n",
            "specs",
        )
        .unwrap();
        assert_eq!(e.node.kind, Kind::Entity);
        assert!(e.diagnostics[0]
            .message
            .contains("folder meant for `command`"));
        let e = extract(
            "specs/x/Legacy.md",
            b"---\ntags: [entity]\n---\n# L\n",
            "specs",
        )
        .unwrap();
        assert_eq!(e.node.kind, Kind::Entity);
    }

    #[test]
    fn a_field_given_as_a_list_or_a_map_is_named() {
        let e = extract(
            "specs/01-domain/entities/Raro.md",
            b"---\nid: [1, 2]\nkind: entity\ntitle: {a: 1}\nstatus:\n---\n# Raro\n",
            "specs",
        )
        .unwrap();
        assert_eq!(e.node.id, "Entity:Raro");
        let said: Vec<&str> = e.diagnostics.iter().map(|d| d.message.as_str()).collect();
        assert!(
            said.iter().any(|m| m.contains("`id` is a list")),
            "{said:?}"
        );
        assert!(
            said.iter().any(|m| m.contains("`title` is a map")),
            "{said:?}"
        );
        // A field left empty is simply unset.
        assert!(!said.iter().any(|m| m.contains("`status`")), "{said:?}");
    }
}
