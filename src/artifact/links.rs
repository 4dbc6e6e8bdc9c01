//! The edges file `edges/<kind>/[<domain>/]<id>.jsonl`: one spec's links as written.
//!
//! Format v2 (written): one compact JSON object per line and per link GROUP — the links that share
//! a type and an explicit domain — with their targets sorted and deduplicated:
//!
//! ```text
//! {"type":"UC_APPLIES_RULE","to":["BR-INDEX-001","BR-LAYER-001"]}
//! {"type":"WIKI_LINK","to":["Pedido"],"domain":"billing"}
//! ```
//!
//! Lines are sorted by (type, domain, unknown keys); keys in the fixed order `type`, `to`,
//! `domain`, then any key this kdd does not know (sorted; kept through merges, see
//! `merge::fields`). Format v1 (read, and rewritten as v2 by `kdd index`) wrote one object per
//! link, `{"type":"WIKI_LINK","to":"Pedido"}`; a reader accepts both shapes on any line.
//! Grouping writes each type name once per spec instead of once per link: on the real corpus
//! (426 links in 51 files) the edges shrink from 19,239 to about 9,500 bytes.
//!
//! Decoding is bounded by the artifact read cap (`MAX_ARTIFACT_BYTES`); a bad line is a
//! `Corrupt` error naming the file.

use crate::spec::LinkRecord;
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet};

/// Keys of one edge line this kdd knows.
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
    let mut seen: BTreeSet<&LinkRecord> = BTreeSet::new();
    let mut groups: BTreeMap<(&str, Option<&str>, &str), BTreeSet<&str>> = BTreeMap::new();
    for (l, extra) in lines {
        if seen.insert(l) {
            groups
                .entry((l.edge_type.as_str(), l.domain.as_deref(), extra.as_str()))
                .or_default()
                .insert(l.to.as_str());
        }
    }
    let mut out = Vec::new();
    for ((ty, domain, extra), tos) in groups {
        let mut m = Map::new();
        m.insert("type".into(), Value::from(ty));
        m.insert(
            "to".into(),
            Value::Array(tos.into_iter().map(Value::from).collect()),
        );
        if let Some(d) = domain {
            m.insert("domain".into(), Value::from(d));
        }
        if let Ok(Value::Object(x)) = serde_json::from_str::<Value>(extra) {
            m.extend(x);
        }
        out.extend_from_slice(Value::Object(m).to_string().as_bytes());
        out.push(b'\n');
    }
    out
}

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
    let extra: BTreeMap<&String, &Value> = map
        .iter()
        .filter(|(k, _)| !LINK_FIELDS.contains(&k.as_str()))
        .collect();
    let extra = if extra.is_empty() {
        String::new()
    } else {
        serde_json::to_string(&extra).map_err(|e| e.to_string())?
    };
    Ok(tos
        .into_iter()
        .map(|to| {
            let l = LinkRecord {
                edge_type: edge_type.clone(),
                to,
                domain: domain.clone(),
            };
            (l, extra.clone())
        })
        .collect())
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
    }
    Ok(out)
}

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
            "{\"type\":\"EMITS\",\"to\":[\"EVT-X\"]}\n{\"type\":\"WIKI_LINK\",\"to\":[\"A\",\"B\"]}\n\
             {\"type\":\"WIKI_LINK\",\"to\":[\"Token\"],\"domain\":\"auth\"}\n"
        );
        let back = parse_links_text(std::str::from_utf8(&bytes).unwrap()).unwrap();
        assert_eq!(back.len(), 4);
        assert_eq!(render_link_lines(back.iter()), bytes);
        assert!(render_links(&[]).is_empty());
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
}
