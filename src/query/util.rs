//! Helpers shared by the queries: node-argument resolution, briefs, snippets, section picking,
//! token estimates.

use super::types::NodeBrief;
use super::Error;
use crate::cache::resolve::{file_stem, norm_key, short_id, KeyRank};
use crate::cache::{NodeRecord, Snapshot};
use unicode_normalization::UnicodeNormalization;

/// Resolve a node argument: full id (`Entity:Pedido`), short id (`UC-004`), file stem, title,
/// alias or path (`specs/01-domain/entities/Pedido.md`). Returns the node id and how it matched.
pub fn resolve_node(snap: &Snapshot<'_>, arg: &str) -> Result<(String, KeyRank), Error> {
    let arg = arg.trim();
    if arg.is_empty() {
        return Err(Error::NodeNotFound(String::new()));
    }
    if snap.node(arg)?.is_some() {
        return Ok((arg.to_string(), KeyRank::Id));
    }
    let looks_like_path = arg.contains('/') || arg.ends_with(".md") || arg.ends_with(".feature");
    if looks_like_path {
        let want = arg.replace('\\', "/");
        let want = want.trim_start_matches("./");
        if let Some(id) = snap.specs_at_path(want, true)?.into_iter().next() {
            return Ok((id, KeyRank::Stem));
        }
    }
    let mut names = vec![arg.to_string()];
    if looks_like_path {
        names.insert(0, file_stem(arg).to_string());
    }
    if let Some(s) = short_id(arg) {
        names.push(s.to_string());
    }
    for name in names {
        let cands = snap.lookup(&name)?;
        if cands.is_empty() {
            continue;
        }
        let best = cands[0].0;
        let top: Vec<&(KeyRank, String)> = cands.iter().filter(|(r, _)| *r == best).collect();
        if top.len() == 1 {
            return Ok((top[0].1.clone(), best));
        }
        return Err(Error::Ambiguous {
            name: arg.to_string(),
            candidates: top
                .iter()
                .map(|(_, id)| id.as_str())
                .collect::<Vec<_>>()
                .join(", "),
        });
    }
    Err(Error::NodeNotFound(arg.to_string()))
}

/// Load a node that must exist.
pub fn must(snap: &Snapshot<'_>, id: &str) -> Result<NodeRecord, Error> {
    snap.node(id)?
        .ok_or_else(|| Error::NodeNotFound(id.to_string()))
}

/// Brief of a node record.
pub fn brief(rec: &NodeRecord) -> NodeBrief {
    NodeBrief {
        id: rec.node.id.clone(),
        kind: rec.node.kind,
        title: rec.node.title.clone(),
        layer: rec.node.layer,
        source_file: rec.node.source_file.clone(),
        domain: rec.node.domain.clone(),
    }
}

/// Rough token estimate (≈ 4 characters per token).
pub fn tokens(s: &str) -> usize {
    s.chars().count().div_ceil(4)
}

/// Fold one string for matching (lowercase, no accents), keeping a map to byte offsets.
fn fold_map(s: &str) -> (String, Vec<usize>) {
    let mut out = String::new();
    let mut map = Vec::new();
    for (i, c) in s.char_indices() {
        // ASCII folds to itself lowercased (one byte): no decomposition to look up.
        if c.is_ascii() {
            out.push(c.to_ascii_lowercase());
            map.push(i);
            continue;
        }
        for f in c.to_lowercase().flat_map(|l| l.nfkd().collect::<Vec<_>>()) {
            if unicode_normalization::char::is_combining_mark(f) {
                continue;
            }
            out.push(f);
            for _ in 0..f.len_utf8() {
                map.push(i);
            }
        }
    }
    (out, map)
}

/// Collapse whitespace and cut at a char boundary near `max` chars, with an ellipsis.
pub fn clip(s: &str, max: usize) -> String {
    let flat: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        return flat;
    }
    let mut out: String = flat.chars().take(max).collect();
    if let Some(sp) = out.rfind(' ') {
        if sp > max / 2 {
            out.truncate(sp);
        }
    }
    out.push('…');
    out
}

/// A snippet of `text` around the first occurrence of any query word.
pub fn snippet(text: &str, words: &[String], max: usize) -> String {
    let (folded, map) = fold_map(text);
    let pos = words
        .iter()
        .filter_map(|w| {
            let stem: String = w.chars().take(w.chars().count().clamp(3, 6)).collect();
            folded.find(&stem)
        })
        .min();
    let start = match pos {
        Some(p) if p > max / 3 => {
            let want = map.get(p).copied().unwrap_or(0).saturating_sub(max / 3);
            let mut s = want;
            while s > 0 && !text.is_char_boundary(s) {
                s -= 1;
            }
            // Start at a word boundary.
            match text[s..].find(char::is_whitespace) {
                Some(ws) if ws < 30 => s + ws,
                _ => s,
            }
        }
        _ => 0,
    };
    let body = clip(&text[start..], max);
    if start > 0 {
        format!("…{body}")
    } else {
        body
    }
}

/// The text of the first section whose canonical key or folded heading matches one of `keys`
/// (prefix match on the heading, so `Declaración` matches `declaracion`).
pub fn section_text<'a>(rec: &'a NodeRecord, keys: &[&str]) -> Option<&'a str> {
    for k in keys {
        let kn = norm_key(k);
        for s in &rec.sections {
            let hit = s.key.as_deref() == Some(*k) || {
                let h = norm_key(&s.heading);
                !h.is_empty() && (h.starts_with(&kn) || kn.starts_with(&h) && h.len() > 4)
            };
            if hit && !s.text.trim().is_empty() {
                return Some(s.text.as_str());
            }
        }
    }
    None
}

/// The first non-empty section text (description-like summary).
pub fn summary(rec: &NodeRecord) -> &str {
    section_text(
        rec,
        &[
            "description",
            "descripcion",
            "declaration",
            "declaracion",
            "statement",
            "purpose",
            "proposito",
            "objective",
        ],
    )
    .or_else(|| {
        rec.sections
            .iter()
            .map(|s| s.text.as_str())
            .find(|t| !t.trim().is_empty())
    })
    .unwrap_or("")
}

/// `Err(INVALID_EDGE_TYPE)` when a requested edge type is neither a structural one nor among
/// `found()` (the relation names and agent edge types the graph holds, read only when needed):
/// a typo would otherwise answer an empty graph.
pub fn check_edge_types(
    types: &[String],
    found: impl FnOnce() -> Result<std::collections::BTreeSet<String>, Error>,
) -> Result<(), Error> {
    let structural = crate::extract::links::STRUCTURAL;
    let odd: Vec<&String> = types
        .iter()
        .filter(|t| !structural.contains(&t.as_str()))
        .collect();
    if odd.is_empty() {
        return Ok(());
    }
    let found = found()?;
    let Some(bad) = odd.into_iter().find(|t| !found.contains(*t)) else {
        return Ok(());
    };
    let shown: String = crate::spec::escape_control(bad).chars().take(80).collect();
    Err(Error::invalid(
        "INVALID_EDGE_TYPE",
        format!(
            "unknown edge type `{shown}`; known: {}{}",
            structural.join(", "),
            {
                let more: Vec<String> = found
                    .into_iter()
                    .filter(|t| !structural.contains(&t.as_str()))
                    .collect();
                if more.is_empty() {
                    String::new()
                } else {
                    format!("; relations in this graph: {}", more.join(", "))
                }
            }
        ),
    ))
}
