//! The edges file `edges/<kind>/[<domain>/]<id>.jsonl`: one spec's links as written.
//!
//! Format v2 (written): one compact JSON object per line and per link GROUP — the links that share
//! a type and an explicit domain — with their targets sorted and deduplicated:
//!
//! ```text
//! {"type":"REQ_TRACES_TO","to":["PRD-Tienda"],"bare":true}
//! {"type":"UC_APPLIES_RULE","to":["BR-INDEX-001","BR-LAYER-001"]}
//! {"type":"WIKI_LINK","to":["Pedido"],"domain":"billing"}
//! ```
//!
//! A typed link written as a wiki-link also yields a generic `WIKI_LINK` record to the same target
//! (its twin, see `extract::links`). A typed group line implies that twin for each of its
//! targets, so twins are not written; a typed link that has no twin (a front-matter field, an id
//! in a Gherkin step) goes on a line marked `"bare":true`. Readers put the twins back, so the
//! link set read is exactly the one extracted (the graph keeps both edges, as SCN index-entity
//! requires). Lines are sorted by (type, domain, bare, unknown keys); keys in the fixed order
//! `type`, `to`, `domain`, `bare`, then any key this kdd does not know (sorted; kept through
//! merges, see `merge::fields`). Format v1 (read, and rewritten as v2 by `kdd index`) wrote one
//! object per link, `{"type":"WIKI_LINK","to":"Pedido"}`, twins included; a reader accepts both
//! shapes on any line, and a v1 line (its `to` is a string) implies no twin.
//! Grouping writes each type name once per spec instead of once per link, and implied twins are
//! not written: on the real corpus (54 specs) the edges take 9,158 bytes against v1's 19,239.
//!
//! Decoding is bounded by the artifact read cap (`MAX_ARTIFACT_BYTES`); a bad line is a
//! `Corrupt` error naming the file.

use crate::spec::LinkRecord;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};

/// The generic link type (a wiki-link outside any typed section).
const GENERIC: &str = "WIKI_LINK";

/// Keys of one edge line this kdd knows: a link's own ([`LINK_FIELDS`]) and `bare`.
pub const LINE_FIELDS: &[&str] = &["type", "to", "domain", "bare"];

/// Keys of one link this kdd knows.
pub const LINK_FIELDS: &[&str] = &["type", "to", "domain"];

/// One link and the unknown keys of the line it came from, as canonical JSON object text
/// (`""` when there are none).
pub type LinkLine = (LinkRecord, String);

/// Canonical bytes of an edges file with no unknown keys. An empty list renders as an empty
/// file.
pub fn render_links(links: &[LinkRecord]) -> Vec<u8> {
    let set: BTreeSet<LinkLine> = links.iter().map(|l| (l.clone(), String::new())).collect();
    render_link_lines(set.iter())
}

/// Canonical bytes of an edges file from links with their unknown keys. Links are a set by
/// (type, to, domain): when the same link comes with different unknown keys, the first one
/// given stays (callers pass a sorted set, so the smallest: deterministic and symmetric).
pub fn render_link_lines<'a>(lines: impl Iterator<Item = &'a LinkLine>) -> Vec<u8> {
    let mut kept: BTreeMap<&LinkRecord, &str> = BTreeMap::new();
    for (l, extra) in lines {
        kept.entry(l).or_insert(extra.as_str());
    }
    // The generic twins a typed line implies (see the module doc): a generic link without
    // unknown keys to the same target as a typed link is not written.
    let twins: BTreeSet<(&str, Option<&str>)> = kept
        .iter()
        .filter(|(l, extra)| l.edge_type == GENERIC && extra.is_empty())
        .map(|(l, _)| (l.to.as_str(), l.domain.as_deref()))
        .collect();
    let mut implied: BTreeSet<(&str, Option<&str>)> = BTreeSet::new();
    let mut groups: BTreeMap<Group<'_>, BTreeSet<&str>> = BTreeMap::new();
    for (l, extra) in &kept {
        let target = (l.to.as_str(), l.domain.as_deref());
        let bare = l.edge_type != GENERIC && !twins.contains(&target);
        if l.edge_type != GENERIC && !bare {
            implied.insert(target);
        }
        let key = (l.edge_type.as_str(), l.domain.as_deref(), bare, *extra);
        groups.entry(key).or_default().insert(l.to.as_str());
    }
    let mut out = Vec::new();
    for ((ty, domain, bare, extra), tos) in groups {
        let tos: Vec<Value> = tos
            .into_iter()
            .filter(|to| ty != GENERIC || !extra.is_empty() || !implied.contains(&(*to, domain)))
            .map(Value::from)
            .collect();
        if tos.is_empty() {
            continue;
        }
        let mut m = Map::new();
        m.insert("type".into(), Value::from(ty));
        m.insert("to".into(), Value::Array(tos));
        if let Some(d) = domain {
            m.insert("domain".into(), Value::from(d));
        }
        if bare {
            m.insert("bare".into(), Value::from(true));
        }
        if let Ok(Value::Object(x)) = serde_json::from_str::<Value>(extra) {
            m.extend(x);
        }
        out.extend_from_slice(Value::Object(m).to_string().as_bytes());
        out.push(b'\n');
    }
    out
}

/// A line's group: type, explicit domain, `bare`, unknown keys (canonical JSON or `""`).
type Group<'a> = (&'a str, Option<&'a str>, bool, &'a str);

/// Parse one line (v1: one link; v2: one group) into its links and unknown keys.
pub fn parse_line(line: &str) -> Result<Vec<LinkLine>, String> {
    let Value::Object(map) = serde_json::from_str::<Value>(line).map_err(|e| e.to_string())? else {
        return Err("not a JSON object".into());
    };
    let text = |k: &str| match map.get(k) {
        Some(Value::String(s)) => Ok(Some(s.clone())),
        None | Some(Value::Null) => Ok(None),
        Some(_) => Err(format!("`{k}` is not a string")),
    };
    let edge_type = text("type")?.ok_or("missing `type`")?;
    let domain = text("domain")?;
    let tos: Vec<String> = match map.get("to") {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(a)) => a
            .iter()
            .map(|v| {
                v.as_str()
                    .map(str::to_string)
                    .ok_or("`to` holds a non-string")
            })
            .collect::<Result<_, _>>()?,
        _ => return Err("missing `to` (a string or a list of strings)".into()),
    };
    let bare = match map.get("bare") {
        None | Some(Value::Bool(false)) => false,
        Some(Value::Bool(true)) => true,
        Some(_) => return Err("`bare` is not a boolean".into()),
    };
    // A typed group line (format v2: `to` is a list) implies the generic twin of each target
    // unless it says `bare`; a v1 line names one link and implies nothing.
    let twins = edge_type != GENERIC && !bare && matches!(map.get("to"), Some(Value::Array(_)));
    let extra: BTreeMap<&String, &Value> = map
        .iter()
        .filter(|(k, _)| !LINE_FIELDS.contains(&k.as_str()))
        .collect();
    let extra = if extra.is_empty() {
        String::new()
    } else {
        serde_json::to_string(&extra).map_err(|e| e.to_string())?
    };
    let mut out = Vec::with_capacity(tos.len() * if twins { 2 } else { 1 });
    for to in tos {
        let link = |edge_type: &str, to: String| LinkRecord {
            edge_type: edge_type.to_string(),
            to,
            domain: domain.clone(),
        };
        if twins {
            out.push((link(GENERIC, to.clone()), String::new()));
        }
        out.push((link(&edge_type, to), extra.clone()));
    }
    Ok(out)
}

/// Parse a whole edges file (v1 or v2 lines; blank lines ignored).
pub fn parse_links_text(text: &str) -> Result<BTreeSet<LinkLine>, String> {
    let mut out = BTreeSet::new();
    for l in text.lines().filter(|l| !l.trim().is_empty()) {
        let parsed = parse_line(l).map_err(|e| {
            format!(
                "edge line {:?}: {e}",
                l.chars().take(80).collect::<String>()
            )
        })?;
        out.extend(parsed);
        if out.len() > MAX_LINKS {
            return Err(format!(
                "over {MAX_LINKS} links: no spec yields so many (a spec's wiki-links are capped at \
                 {}); re-run `kdd index` to rewrite the file",
                crate::parse::limits::MAX_WIKILINKS
            ));
        }
    }
    Ok(out)
}

/// Most links one edges file may hold: each of a spec's wiki-links (at most
/// `parse::limits::MAX_WIKILINKS`) with its typed twin, and room for front-matter links. A
/// committed file with more was not written by kdd (a 4 MB one with 500,000 targets took
/// 1.8 GB to load into the query cache).
pub const MAX_LINKS: usize = 2 * crate::parse::limits::MAX_WIKILINKS + 1_000;

#[cfg(test)]
mod tests {
    use super::*;

    fn link(t: &str, to: &str, d: Option<&str>) -> LinkRecord {
        LinkRecord {
            edge_type: t.into(),
            to: to.into(),
            domain: d.map(str::to_string),
        }
    }

    #[test]
    fn grouped_sorted_deduplicated() {
        let a = link("WIKI_LINK", "B", None);
        let b = link("EMITS", "EVT-X", None);
        let c = link("WIKI_LINK", "A", None);
        let d = link("WIKI_LINK", "Token", Some("auth"));
        let bytes = render_links(&[a.clone(), b, a, c, d]);
        assert_eq!(
            String::from_utf8(bytes.clone()).unwrap(),
            "{\"type\":\"EMITS\",\"to\":[\"EVT-X\"],\"bare\":true}\n{\"type\":\"WIKI_LINK\",\"to\":[\"A\",\"B\"]}\n\
             {\"type\":\"WIKI_LINK\",\"to\":[\"Token\"],\"domain\":\"auth\"}\n"
        );
        let back = parse_links_text(std::str::from_utf8(&bytes).unwrap()).unwrap();
        assert_eq!(back.len(), 4);
        assert_eq!(render_link_lines(back.iter()), bytes);
        assert!(render_links(&[]).is_empty());
    }

    #[test]
    fn twins_are_implied_not_written_and_read_back() {
        let typed = link("EMITS", "EVT-X", None);
        let twin = link("WIKI_LINK", "EVT-X", None);
        // Another domain's target of the same name is not a twin.
        let other = link("WIKI_LINK", "EVT-X", Some("billing"));
        let plain = link("WIKI_LINK", "Pedido", None);
        // A typed link without a twin (a front-matter field) is written bare.
        let front = link("REQ_TRACES_TO", "PRD-X", None);
        let all = [twin.clone(), typed.clone(), other, plain, front];
        let bytes = render_links(&all);
        assert_eq!(
            String::from_utf8(bytes.clone()).unwrap(),
            "{\"type\":\"EMITS\",\"to\":[\"EVT-X\"]}\n\
             {\"type\":\"REQ_TRACES_TO\",\"to\":[\"PRD-X\"],\"bare\":true}\n\
             {\"type\":\"WIKI_LINK\",\"to\":[\"Pedido\"]}\n\
             {\"type\":\"WIKI_LINK\",\"to\":[\"EVT-X\"],\"domain\":\"billing\"}\n"
        );
        // Lossless: the set read back is the set written, and renders to the same bytes.
        let back = parse_links_text(std::str::from_utf8(&bytes).unwrap()).unwrap();
        let want: BTreeSet<LinkLine> = all.iter().map(|l| (l.clone(), String::new())).collect();
        assert_eq!(back, want);
        assert_eq!(render_link_lines(back.iter()), bytes);
        // A v1 line implies nothing; a bad `bare` is an error.
        let v1 = parse_links_text("{\"type\":\"EMITS\",\"to\":\"EVT-X\"}").unwrap();
        assert_eq!(v1.len(), 1);
        assert!(parse_links_text("{\"type\":\"EMITS\",\"to\":[\"A\"],\"bare\":1}").is_err());
        // A generic twin that carries keys this kdd does not know is written with them.
        let lines = [(typed, String::new()), (twin, "{\"z\":1}".to_string())];
        let text = String::from_utf8(render_link_lines(lines.iter())).unwrap();
        assert!(
            text.contains("{\"type\":\"EMITS\",\"to\":[\"EVT-X\"],\"bare\":true}")
                && text.contains("{\"type\":\"WIKI_LINK\",\"to\":[\"EVT-X\"],\"z\":1}"),
            "{text}"
        );
    }

    #[test]
    fn v1_lines_and_unknown_keys_are_read() {
        let text = "{\"type\":\"WIKI_LINK\",\"to\":\"B\"}\n\n{\"type\":\"WIKI_LINK\",\"to\":\"A\",\"z\":1}\n";
        let set = parse_links_text(text).unwrap();
        assert_eq!(
            String::from_utf8(render_link_lines(set.iter())).unwrap(),
            "{\"type\":\"WIKI_LINK\",\"to\":[\"B\"]}\n{\"type\":\"WIKI_LINK\",\"to\":[\"A\"],\"z\":1}\n"
        );
        for bad in [
            "[1]",
            "{\"to\":\"A\"}",
            "{\"type\":\"X\"}",
            "{\"type\":\"X\",\"to\":[1]}",
            "{\"type\":7,\"to\":\"A\"}",
            "{",
        ] {
            assert!(parse_links_text(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_edges_file_with_more_links_than_a_spec_yields_is_refused() {
        let line = |n: usize| {
            let to: Vec<String> = (0..n).map(|i| format!("\"T{i}\"")).collect();
            format!(
                "{{\"type\":\"UC_APPLIES_RULE\",\"to\":[{}],\"bare\":true}}\n",
                to.join(",")
            )
        };
        assert!(parse_links_text(&line(MAX_LINKS)).is_ok());
        let err = parse_links_text(&line(MAX_LINKS + 1)).unwrap_err();
        assert!(err.contains("no spec yields so many"), "{err}");
    }
}
