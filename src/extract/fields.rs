//! Per-kind `indexed_fields` (PRD domain model) from canonical section keys.
//!
//! Every keyed section becomes a field under its canonical key (a table → array of
//! `{header: cell}` objects, a single list → array of strings, else text with sub-headings
//! inlined). Kind-specific PRD names are added on top: `state_machine` (entity),
//! `input_params` / `output_structure` (command, query), `mermaid_flow` (process),
//! `producer` / `consumers` (event), `formalization_ears` (cross-policy), `relations` with
//! `{relation, cardinality, target}` rows, `emits` / `consumes`, `scenarios` (feature).

use crate::parse::{fold, frontmatter, Document};
use crate::spec::{Block, IndexedFields, Kind, Node, Section};
use serde_json::{json, Map, Value};

/// Kind-specific key corrections (a PRD's "Acceptance Criteria" is its go-live list).
pub fn adjust_keys(kind: Kind, sections: &mut [Section]) {
    for s in sections {
        if kind == Kind::Prd && s.key.as_deref() == Some("acceptance_criteria") {
            s.key = Some("acceptance".into());
        }
        if matches!(kind, Kind::Objective) && s.key.as_deref() == Some("actors") {
            s.key = Some("actor".into());
        }
    }
}

/// The key of each section, or of its nearest keyed ancestor (`### FA-1` under
/// `## Flujos Alternativos` → `alternatives`).
pub fn effective_keys(sections: &[Section]) -> Vec<Option<String>> {
    let mut stack: Vec<(u8, Option<String>)> = Vec::new();
    sections
        .iter()
        .map(|s| {
            while stack.last().is_some_and(|(l, _)| *l >= s.level) {
                stack.pop();
            }
            let eff = s
                .key
                .clone()
                .or_else(|| stack.iter().rev().find_map(|(_, k)| k.clone()));
            stack.push((s.level, s.key.clone()));
            eff
        })
        .collect()
}

/// Rows of a table as objects keyed by header cell.
pub fn table_rows(header: &[String], rows: &[Vec<String>]) -> Value {
    Value::Array(
        rows.iter()
            .map(|r| {
                let mut m = Map::new();
                for (i, cell) in r.iter().enumerate() {
                    let k = header
                        .get(i)
                        .filter(|h| !h.is_empty())
                        .cloned()
                        .unwrap_or_else(|| format!("col{i}"));
                    m.insert(k, Value::String(cell.clone()));
                }
                Value::Object(m)
            })
            .collect(),
    )
}

fn blocks_value(blocks: &[(Option<&str>, &Block)]) -> Value {
    let non_empty: Vec<_> = blocks.iter().collect();
    if non_empty.len() == 1 && non_empty[0].0.is_none() {
        match non_empty[0].1 {
            Block::Table { header, rows } => return table_rows(header, rows),
            Block::List { items } => {
                return Value::Array(items.iter().map(|i| Value::String(i.clone())).collect())
            }
            _ => {}
        }
    }
    let mut text = String::new();
    let mut last_heading = None;
    for (h, b) in blocks {
        if let Some(h) = h {
            if last_heading != Some(*h) {
                if !text.is_empty() {
                    text.push_str("\n\n");
                }
                text.push_str(h);
                last_heading = Some(*h);
            }
        }
        if !text.is_empty() {
            text.push_str("\n\n");
        }
        text.push_str(&b.text());
    }
    Value::String(text)
}

/// Compute the fields of one spec.
pub fn indexed_fields(
    kind: Kind,
    node: &Node,
    doc: &Document,
    sections: &[Section],
    eff: &[Option<String>],
) -> IndexedFields {
    let mut f = IndexedFields::new();
    f.insert("title".into(), Value::String(node.title.clone()));
    // Group blocks by effective key, in document order.
    let mut order: Vec<String> = Vec::new();
    let mut groups: std::collections::HashMap<String, Vec<(Option<&str>, &Block)>> =
        Default::default();
    for (s, k) in sections.iter().zip(eff) {
        let Some(k) = k else { continue };
        let sub = (s.key.as_deref() != Some(k.as_str())).then_some(s.heading.as_str());
        let g = groups.entry(k.clone()).or_insert_with(|| {
            order.push(k.clone());
            Vec::new()
        });
        for b in &s.blocks {
            g.push((sub, b));
        }
    }
    for k in &order {
        let v = blocks_value(&groups[k]);
        if v != Value::String(String::new()) {
            f.insert(k.clone(), v);
        }
    }
    // Description fallback: the H1 section's own text or the preamble.
    if !f.contains_key("description") {
        if let Some(s) = sections
            .iter()
            .find(|s| s.level <= 1 && !s.blocks.is_empty())
        {
            f.insert("description".into(), Value::String(s.text()));
        }
    }
    let copy = |f: &mut IndexedFields, from: &str, to: &str| {
        if let Some(v) = f.get(from).cloned() {
            f.entry(to.to_string()).or_insert(v);
        }
    };
    match kind {
        Kind::Entity | Kind::Role | Kind::System => {
            let sm = state_machine(sections, eff);
            if !sm.is_empty() {
                f.insert("state_machine".into(), Value::Object(sm));
            }
            let rel = relations(sections, eff, doc);
            if !rel.is_empty() {
                f.insert("relations".into(), Value::Array(rel));
            }
        }
        Kind::Event => {
            copy(&mut f, "emitter", "producer");
            copy(&mut f, "subscribers", "consumers");
        }
        Kind::Command | Kind::Query => {
            copy(&mut f, "input", "input_params");
            copy(&mut f, "output", "output_structure");
        }
        Kind::Process => copy(&mut f, "diagram", "mermaid_flow"),
        Kind::CrossPolicy => copy(&mut f, "formalization", "formalization_ears"),
        Kind::Feature => {
            if let Some(feat) = &doc.feature {
                let scen: Vec<Value> = feat
                    .scenarios
                    .iter()
                    .filter(|s| !s.background)
                    .map(|s| json!({"name": s.name, "tags": s.tags, "line": s.line}))
                    .collect();
                f.insert("scenarios".into(), Value::Array(scen));
                f.insert("tags".into(), json!(feat.tags));
            }
        }
        _ => {}
    }
    // Event lists for entities/commands/processes.
    let (emits, consumes) = event_lists(kind, doc, sections, eff);
    if !emits.is_empty() {
        f.insert("emits".into(), json!(emits));
    }
    if !consumes.is_empty() {
        f.insert("consumes".into(), json!(consumes));
    }
    for key in [
        "actor", "entity", "source", "category", "severity", "version",
    ] {
        if let Some(v) = doc.front_matter.get(key).and_then(frontmatter::scalar) {
            f.entry(key.to_string()).or_insert(Value::String(v));
        }
    }
    f
}

fn state_machine(sections: &[Section], eff: &[Option<String>]) -> Map<String, Value> {
    let mut m = Map::new();
    let mut states: Vec<String> = Vec::new();
    let mut transitions: Vec<Value> = Vec::new();
    for (s, k) in sections.iter().zip(eff) {
        let Some(k) = k.as_deref() else { continue };
        if !matches!(k, "states" | "transitions" | "lifecycle") {
            continue;
        }
        for b in &s.blocks {
            match b {
                Block::Code { lang, text } if lang == "mermaid" || text.contains("-->") => {
                    m.insert("diagram".into(), Value::String(text.clone()));
                    for line in text.lines() {
                        let line = line.trim();
                        let Some((from, rest)) = line.split_once("-->") else {
                            continue;
                        };
                        let (to, label) = match rest.split_once(':') {
                            Some((t, l)) => (t.trim(), Some(l.trim())),
                            None => (rest.trim(), None),
                        };
                        let clean = |x: &str| {
                            x.trim()
                                .trim_matches(|c| c == '[' || c == ']' || c == '*')
                                .to_string()
                        };
                        let (from, to) = (clean(from), clean(to));
                        for st in [&from, &to] {
                            if !st.is_empty() && !states.contains(st) {
                                states.push(st.clone());
                            }
                        }
                        let mut t = Map::new();
                        t.insert("from".into(), Value::String(from));
                        t.insert("to".into(), Value::String(to));
                        if let Some(l) = label.filter(|l| !l.is_empty()) {
                            t.insert("event".into(), Value::String(l.to_string()));
                        }
                        transitions.push(Value::Object(t));
                    }
                }
                Block::Table { header, rows } => {
                    let col = |names: &[&str]| {
                        header
                            .iter()
                            .position(|h| names.contains(&fold(h).as_str()))
                    };
                    let from = col(&["from", "desde", "origen", "estado origen"]);
                    let to = col(&["to", "hacia", "hasta", "destino", "estado destino"]);
                    if let (Some(fi), Some(ti)) = (from, to) {
                        let ev = col(&["event", "evento", "trigger", "disparador"]);
                        for r in rows {
                            let mut t = Map::new();
                            t.insert("from".into(), json!(r.get(fi).cloned().unwrap_or_default()));
                            t.insert("to".into(), json!(r.get(ti).cloned().unwrap_or_default()));
                            if let Some(e) = ev.and_then(|e| r.get(e)) {
                                t.insert("event".into(), json!(e));
                            }
                            transitions.push(Value::Object(t));
                        }
                    } else if k == "states" {
                        for r in rows {
                            if let Some(c) = r.first().filter(|c| !c.is_empty()) {
                                if !states.contains(c) {
                                    states.push(c.clone());
                                }
                            }
                        }
                    }
                }
                Block::List { items } if k == "states" => {
                    for i in items {
                        let st = i
                            .split([':', '—', '('])
                            .next()
                            .unwrap_or("")
                            .trim()
                            .to_string();
                        if !st.is_empty() && !states.contains(&st) {
                            states.push(st);
                        }
                    }
                }
                _ => {}
            }
        }
    }
    if !states.is_empty() {
        m.insert("states".into(), json!(states));
    }
    if !transitions.is_empty() {
        m.insert("transitions".into(), Value::Array(transitions));
    }
    m
}

fn relations(sections: &[Section], eff: &[Option<String>], doc: &Document) -> Vec<Value> {
    let mut out = Vec::new();
    for (si, (s, k)) in sections.iter().zip(eff).enumerate() {
        if k.as_deref() != Some("relations") {
            continue;
        }
        for (bi, b) in s.blocks.iter().enumerate() {
            let Block::Table { header, rows } = b else {
                continue;
            };
            let cols = links::RelationColumns::new(header);
            for (ri, r) in rows.iter().enumerate() {
                let target = doc
                    .links
                    .iter()
                    .find(|l| {
                        l.section == si && l.block == bi && l.cell.is_some_and(|c| c.row == ri + 1)
                    })
                    .map(|l| l.target.clone());
                let mut m = Map::new();
                m.insert(
                    "relation".into(),
                    json!(r.get(cols.relation).cloned().unwrap_or_default()),
                );
                if let Some(c) = cols.cardinality.and_then(|c| r.get(c)) {
                    m.insert("cardinality".into(), json!(c));
                }
                if let Some(t) = target {
                    m.insert("target".into(), json!(t));
                }
                out.push(Value::Object(m));
            }
        }
    }
    out
}

use super::links;

fn event_lists(
    kind: Kind,
    doc: &Document,
    sections: &[Section],
    eff: &[Option<String>],
) -> (Vec<String>, Vec<String>) {
    let mut emits = Vec::new();
    let mut consumes = Vec::new();
    for l in &doc.links {
        let s = &sections[l.section];
        match links::event_direction(kind, s, eff[l.section].as_deref(), &l.target) {
            Some(links::EventDir::Emits) if !emits.contains(&l.target) => {
                emits.push(l.target.clone())
            }
            Some(links::EventDir::Consumes) if !consumes.contains(&l.target) => {
                consumes.push(l.target.clone())
            }
            _ => {}
        }
    }
    (emits, consumes)
}
