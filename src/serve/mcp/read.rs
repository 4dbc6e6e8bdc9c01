//! `kdd_read` (a node's spec text, or one section of it, confined to the specs root and read
//! with the one no-follow rule of `source`) and `kdd_list` (nodes by kind/layer/domain, paged).

use super::super::api::{self, ApiError};
use super::super::Engine;
use crate::cache::NodeRecord;
use serde_json::{json, Value};

/// `kdd_read` arguments.
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReadParams {
    #[serde(default)]
    pub node: Option<String>,
    #[serde(default)]
    pub path: Option<String>,
    #[serde(default)]
    pub section: Option<String>,
    /// Only the section whose heading is on this line (a `kdd_query` hit's `lines[0]`).
    #[serde(default)]
    pub line: Option<usize>,
}

fn fold(s: &str) -> String {
    use unicode_normalization::UnicodeNormalization;
    s.nfkd()
        .filter(|c| c.is_alphanumeric() || c.is_whitespace())
        .collect::<String>()
        .to_lowercase()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
}

pub(super) fn read(
    engine: &Engine,
    loaded: &super::super::Loaded,
    p: &ReadParams,
) -> Result<Value, ApiError> {
    let snap = loaded.cache.snapshot()?;
    let rec = match (&p.node, &p.path) {
        (Some(n), None) if !n.trim().is_empty() => {
            let (id, _) = crate::query::resolve_node(&snap, n)?;
            snap.node(&id)?.ok_or_else(|| {
                ApiError::new(404, "NODE_NOT_FOUND", format!("node not found: {id}"))
            })?
        }
        (None, Some(path)) => match by_path(engine, loaded, &snap, path)? {
            Ok(rec) => rec,
            Err(raw) => return Ok(raw),
        },
        _ => {
            return Err(ApiError::bad(
                "MISSING_NODE",
                "give exactly one of `node` (an id, short id or title) or `path` (relative to \
                 the specs root)",
            ))
        }
    };
    let sections: Vec<Value> = rec
        .sections
        .iter()
        .map(|s| {
            json!({"heading": s.heading, "key": s.key, "level": s.level, "line": s.line, "text": s.text})
        })
        .collect();
    let keep = if let Some(line) = p.line {
        // Just the cited span: the one section starting on that line.
        let Some(i) = rec.sections.iter().position(|s| s.line == line) else {
            return Err(ApiError::new(
                404,
                "SECTION_NOT_FOUND",
                format!("no section of {} starts on line {line}", rec.node.id),
            ));
        };
        vec![i]
    } else if let Some(want) = p
        .section
        .as_deref()
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        named_section(&rec, want)?
    } else {
        (0..sections.len()).collect()
    };
    // Stale when the index marks it so or the file changed since (the freshness scan).
    let changed = engine.freshness(loaded, false, true).stale_specs;
    let stale = rec.stale || changed.contains(&rec.node.source_file);
    Ok(json!({
        "node_id": rec.node.id,
        "kind": rec.node.kind,
        "title": rec.node.title,
        "layer": rec.node.layer,
        "source_file": rec.node.source_file,
        "stale": stale,
        "sections": keep.into_iter().map(|i| sections[i].clone()).collect::<Vec<_>>(),
    }))
}

/// The node whose spec is at `path` (relative to the specs root, or the repository-relative
/// `source_file` the other tools return), or — for a file that is not
/// indexed — the answer carrying its raw text, read through the one no-follow rule.
fn by_path(
    engine: &Engine,
    loaded: &super::super::Loaded,
    snap: &crate::cache::Snapshot,
    path: &str,
) -> Result<Result<NodeRecord, Value>, ApiError> {
    let specs = engine.specs_dir();
    // The `source_file` every other tool returns (`specs/01-domain/…`, relative to the
    // repository) names the same file, unless the specs root really holds that path.
    let path = path.trim();
    let specs_root = engine.specs_root();
    let root = specs_root.as_str();
    let path = match path.strip_prefix(root).and_then(|r| r.strip_prefix('/')) {
        Some(rest) if !root.is_empty() && !specs.join(path).exists() => rest,
        _ => path,
    };
    // Escapes and missing files keep their codes; the bytes then come only through the
    // one reading rule (`crate::source`): no link is followed, even inside the root.
    super::super::confined_path(&specs, path)?;
    let norm = crate::config::normalize_rel(path.trim()).unwrap_or_default();
    let rel = if specs_root.is_empty() {
        norm
    } else {
        format!("{specs_root}/{norm}")
    };
    let id = loaded
        .briefs
        .iter()
        .find(|n| n.source_file == rel)
        .map(|n| n.id.clone());
    if let Some(r) = id.and_then(|id| snap.node(&id).ok().flatten()) {
        return Ok(Ok(r));
    }
    if crate::source::Ignore::load(&engine.tree_root(), &specs_root).ignores(&rel) {
        return Err(ApiError::new(
            404,
            "SPEC_NOT_FOUND",
            format!("`{rel}` is excluded by the specs root's .kddignore; kdd never reads it"),
        ));
    }
    use crate::source::Error as E;
    let bytes =
        crate::source::read_spec(&engine.tree_root(), &rel, &specs_root).map_err(|e| match e {
            E::TooLarge { .. } => ApiError::bad("SPEC_TOO_LARGE", "spec file over the size limit"),
            E::Io { .. } => ApiError::new(
                404,
                "SPEC_NOT_FOUND",
                format!("no spec file `{}` under the specs root", e.path()),
            ),
            _ => ApiError::bad("PATH_OUTSIDE_SPECS", e.to_string()),
        })?;
    let text = String::from_utf8_lossy(&bytes).into_owned();
    Ok(Err(json!({
        "node_id": null,
        "source_file": rel,
        "note": "this file is not in the index (run `kdd index`); raw text follows",
        "sections": [{"heading": "", "level": 0, "line": 1, "text": text}],
    })))
}

/// The indexes of the section `want` names (a heading, a heading path `Parent > Heading`, or a
/// section key) and of its subsections; a prefix of the heading when nothing matches exactly.
fn named_section(rec: &NodeRecord, want: &str) -> Result<Vec<usize>, ApiError> {
    // A hit's `section` is a heading path (`Parent > Heading`): its last heading names it.
    let want = want.rsplit(" > ").next().unwrap_or(want).trim();
    let w = fold(want);
    let wk = want.to_ascii_lowercase().replace([' ', '-'], "_");
    let pick: Vec<usize> = rec
        .sections
        .iter()
        .enumerate()
        .filter(|(_, s)| {
            let key = s
                .key
                .as_deref()
                .or_else(|| crate::parse::heading::section_key(&s.heading));
            key == Some(wk.as_str())
                || key.is_some() && key == crate::parse::heading::section_key(want)
                || fold(&s.heading) == w
        })
        .map(|(i, _)| i)
        .collect();
    let pick = if pick.is_empty() {
        rec.sections
            .iter()
            .enumerate()
            .filter(|(_, s)| !w.is_empty() && fold(&s.heading).starts_with(&w))
            .map(|(i, _)| i)
            .collect()
    } else {
        pick
    };
    let Some(&first) = pick.first() else {
        let heads: Vec<String> = rec
            .sections
            .iter()
            .filter(|s| !s.heading.is_empty())
            .map(|s| s.heading.clone())
            .collect();
        return Err(ApiError::new(
            404,
            "SECTION_NOT_FOUND",
            format!(
                "no section `{}` in {}; sections: {}",
                want.chars().take(80).collect::<String>(),
                rec.node.id,
                heads.join(" | ")
            ),
        ));
    };
    // The section and its subsections.
    let level = rec.sections[first].level;
    let mut keep = vec![first];
    for (i, s) in rec.sections.iter().enumerate().skip(first + 1) {
        if s.level <= level {
            break;
        }
        keep.push(i);
    }
    Ok(keep)
}

/// `kdd_list` arguments.
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListParams {
    #[serde(default, alias = "kind", alias = "include_kinds")]
    pub kinds: api::StrList,
    #[serde(default, alias = "layer")]
    pub layers: api::StrList,
    #[serde(default)]
    pub domain: Option<String>,
}

pub(super) fn list(loaded: &super::super::Loaded, p: &ListParams) -> Result<Value, ApiError> {
    let kinds = api::parse_kinds(&p.kinds)?;
    let layers = api::parse_layers(&p.layers)?;
    let nodes: Vec<Value> = loaded
        .briefs
        .iter()
        .filter(|n| kinds.is_empty() || kinds.contains(&n.kind))
        .filter(|n| layers.is_empty() || layers.contains(&n.layer))
        .filter(|n| {
            p.domain
                .as_deref()
                .is_none_or(|d| n.domain.as_deref() == Some(d))
        })
        .map(|n| {
            json!({"id": n.id, "kind": n.kind, "title": n.title, "layer": n.layer,
                   "source_file": n.source_file, "domain": n.domain})
        })
        .collect();
    Ok(json!({"total_nodes": nodes.len(), "nodes": nodes}))
}
