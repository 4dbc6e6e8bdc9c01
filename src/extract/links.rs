//! Typed link records per the PRD edge table, decided from the source kind and the section a
//! link appears in (the target's kind is only known after global resolution, where
//! [`crate::graph::refine_type`] corrects types whose target does not fit).
//!
//! Every wiki-link yields a `WIKI_LINK` record; typed records are added on top:
//! DOMAIN_RELATION (entity relation tables and attribute types) + the author's lower-case
//! relation name (`pertenece_a`), ENTITY_RULE / ENTITY_POLICY (entity links in a rule's or
//! policy's declaration), EMITS / CONSUMES (`EVT-*` links in event/postcondition sections),
//! UC_APPLIES_RULE, UC_EXECUTES_CMD, UC_STORY, VIEW_TRIGGERS_UC, VIEW_USES_COMPONENT,
//! COMPONENT_USES_ENTITY, REQ_TRACES_TO, VALIDATES (feature tags, links and ids in steps),
//! DECIDES_FOR (ADRs), CROSS_DOMAIN_REF (`[[d::X]]` to another domain). Front-matter links count
//! too: UI `links:`, PRD `related:`, REQ `source:`, BR/BP `entity:`, ADR `supersedes:`.

use crate::parse::{fold, frontmatter, Document};
use crate::spec::{Block, Kind, LinkRecord, Section};
use serde_json::Value;
use std::collections::BTreeSet;

pub const WIKI_LINK: &str = "WIKI_LINK";
pub const DOMAIN_RELATION: &str = "DOMAIN_RELATION";
pub const ENTITY_RULE: &str = "ENTITY_RULE";
pub const ENTITY_POLICY: &str = "ENTITY_POLICY";
pub const EMITS: &str = "EMITS";
pub const CONSUMES: &str = "CONSUMES";
pub const UC_APPLIES_RULE: &str = "UC_APPLIES_RULE";
pub const UC_EXECUTES_CMD: &str = "UC_EXECUTES_CMD";
pub const UC_STORY: &str = "UC_STORY";
pub const VIEW_TRIGGERS_UC: &str = "VIEW_TRIGGERS_UC";
pub const VIEW_USES_COMPONENT: &str = "VIEW_USES_COMPONENT";
pub const COMPONENT_USES_ENTITY: &str = "COMPONENT_USES_ENTITY";
pub const REQ_TRACES_TO: &str = "REQ_TRACES_TO";
pub const VALIDATES: &str = "VALIDATES";
pub const DECIDES_FOR: &str = "DECIDES_FOR";
pub const CROSS_DOMAIN_REF: &str = "CROSS_DOMAIN_REF";
pub const LAYER_DEPENDENCY: &str = "LAYER_DEPENDENCY";

/// Every structural (upper-case) edge type.
pub const STRUCTURAL: &[&str] = &[
    WIKI_LINK,
    DOMAIN_RELATION,
    ENTITY_RULE,
    ENTITY_POLICY,
    EMITS,
    CONSUMES,
    UC_APPLIES_RULE,
    UC_EXECUTES_CMD,
    UC_STORY,
    VIEW_TRIGGERS_UC,
    VIEW_USES_COMPONENT,
    COMPONENT_USES_ENTITY,
    REQ_TRACES_TO,
    VALIDATES,
    DECIDES_FOR,
    CROSS_DOMAIN_REF,
    LAYER_DEPENDENCY,
];

/// The id prefix of a link target (`UC-001-X` → `UC`), when it is a known spec prefix.
pub fn target_prefix(target: &str) -> Option<&'static str> {
    const P: &[&str] = &[
        "EVT", "BR", "BP", "XP", "CMD", "QRY", "PROC", "PRC", "UC", "UI", "REQ", "OBJ", "ADR",
        "PRD", "NFR", "UV", "REL", "VER",
    ];
    let (head, rest) = target.split_once('-')?;
    if rest.is_empty() {
        return None;
    }
    P.iter().copied().find(|p| *p == head)
}

/// True for targets that look like an entity (no spec-id prefix).
pub fn entity_like(target: &str) -> bool {
    target_prefix(target).is_none()
}

/// Direction of an event link.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventDir {
    Emits,
    Consumes,
}

/// Whether a link to `target` in `section` of a `kind` spec emits or consumes an event.
pub fn event_direction(
    kind: Kind,
    section: &Section,
    key: Option<&str>,
    target: &str,
) -> Option<EventDir> {
    if target_prefix(target) != Some("EVT") {
        return None;
    }
    let h = fold(&section.heading);
    let consumed = [
        "consum",
        "subscri",
        "suscri",
        "listen",
        "escucha",
        "reacts",
        "reacciona",
    ]
    .iter()
    .any(|w| h.contains(w));
    match kind {
        Kind::Entity | Kind::Role | Kind::System => {
            if consumed {
                Some(EventDir::Consumes)
            } else if matches!(key, Some("events" | "lifecycle" | "states" | "transitions")) {
                Some(EventDir::Emits)
            } else {
                None
            }
        }
        Kind::Command => {
            if consumed {
                None
            } else if matches!(key, Some("postconditions" | "events" | "events_generated")) {
                Some(EventDir::Emits)
            } else {
                None
            }
        }
        Kind::Process => {
            if consumed {
                Some(EventDir::Consumes)
            } else if matches!(key, Some("events" | "events_generated")) {
                Some(EventDir::Emits)
            } else {
                None
            }
        }
        _ => None,
    }
}

/// Columns of an entity relations table.
pub struct RelationColumns {
    pub relation: usize,
    pub cardinality: Option<usize>,
}

impl RelationColumns {
    pub fn new(header: &[String]) -> RelationColumns {
        let find = |names: &[&str]| {
            header
                .iter()
                .position(|h| names.contains(&fold(h).as_str()))
        };
        RelationColumns {
            relation: find(&[
                "relacion",
                "relation",
                "relationship",
                "relaciones",
                "tipo",
                "type",
                "nombre",
                "name",
            ])
            .unwrap_or(0),
            cardinality: find(&["cardinalidad", "cardinality", "card.", "multiplicidad"]),
        }
    }
}

/// `pertenece a` / `Pertenece_A` / `extraído de` → `pertenece_a` / `extraido_de`; `None` when
/// nothing usable is left.
pub fn business_relation(name: &str) -> Option<String> {
    let f = fold(name.trim().trim_matches('`').trim_matches('*'));
    let mut out = String::new();
    for c in f.chars() {
        if c.is_alphanumeric() {
            out.push(c);
        } else if (c == ' ' || c == '_' || c == '-') && !out.ends_with('_') {
            out.push('_');
        } else if !(c == ' ' || c == '_' || c == '-') {
            return None;
        }
    }
    let out = out.trim_matches('_').to_string();
    (!out.is_empty() && out.len() <= 64 && out.chars().next().is_some_and(|c| c.is_alphabetic()))
        .then_some(out)
}

fn rec(set: &mut BTreeSet<LinkRecord>, t: &str, to: &str, domain: Option<&str>) {
    let to = to.trim();
    if to.is_empty() {
        return;
    }
    set.insert(LinkRecord {
        edge_type: t.to_string(),
        to: to.to_string(),
        domain: domain.map(str::to_string),
    });
}

/// Parse a front-matter link value: `UC-001`, `[[UC-001]]`, `[[core::X|a]]`.
fn fm_target(v: &str) -> Option<(String, Option<String>)> {
    let v = v.trim();
    if let Some(l) = crate::parse::wikilink::scan(v).into_iter().next() {
        return (!l.target.is_empty()).then_some((l.target, l.domain));
    }
    if v.is_empty() || v.contains(char::is_whitespace) && v.len() > 80 {
        return None;
    }
    match v.split_once("::") {
        Some((d, t)) if !d.is_empty() && !t.is_empty() => {
            Some((t.to_string(), Some(d.to_string())))
        }
        _ => Some((v.to_string(), None)),
    }
}

/// All link records of one document, sorted and deduplicated.
pub fn records(
    kind: Kind,
    doc: &Document,
    sections: &[Section],
    eff: &[Option<String>],
    own_domain: Option<&str>,
) -> Vec<LinkRecord> {
    let mut set = BTreeSet::new();
    for l in &doc.links {
        let d = l.domain.as_deref();
        let t = l.target.as_str();
        rec(&mut set, WIKI_LINK, t, d);
        if let Some(dom) = d {
            if Some(dom) != own_domain {
                rec(&mut set, CROSS_DOMAIN_REF, t, d);
            }
        }
        let section = &sections[l.section];
        let key = eff[l.section].as_deref();
        if let Some(dir) = event_direction(kind, section, key, t) {
            let ty = if dir == EventDir::Emits {
                EMITS
            } else {
                CONSUMES
            };
            rec(&mut set, ty, t, d);
        }
        let at = LinkAt {
            doc,
            l,
            section,
            key,
        };
        typed_link(&mut set, kind, &at);
    }
    front_matter_links(kind, doc, &mut set);
    if let Some(f) = &doc.feature {
        for (id, _) in &f.mentions {
            rec(&mut set, VALIDATES, id, None);
        }
    }
    set.into_iter().collect()
}

/// A body wiki-link and where it stands.
struct LinkAt<'a> {
    doc: &'a Document,
    l: &'a crate::parse::WikiLink,
    section: &'a Section,
    /// The section's effective key (`rules_applied`, `relations`, …).
    key: Option<&'a str>,
}

/// The typed edge a body link makes, by the linking spec's kind and the section it is in.
fn typed_link(set: &mut BTreeSet<LinkRecord>, kind: Kind, at: &LinkAt<'_>) {
    let (t, d, key) = (at.l.target.as_str(), at.l.domain.as_deref(), at.key);
    let prefix = target_prefix(t);
    match kind {
        Kind::Entity | Kind::Role | Kind::System => entity_table_link(set, at),
        Kind::BusinessRule if key == Some("declaration") && entity_like(t) => {
            rec(set, ENTITY_RULE, t, d)
        }
        Kind::BusinessPolicy | Kind::CrossPolicy
            if key == Some("declaration") && entity_like(t) =>
        {
            rec(set, ENTITY_POLICY, t, d)
        }
        Kind::UseCase => {
            if matches!(prefix, Some("BR" | "BP" | "XP")) || key == Some("rules_applied") {
                rec(set, UC_APPLIES_RULE, t, d);
            }
            if prefix == Some("CMD") || key == Some("commands_executed") {
                rec(set, UC_EXECUTES_CMD, t, d);
            }
            if prefix == Some("OBJ") {
                rec(set, UC_STORY, t, d);
            }
        }
        Kind::UiView | Kind::UiFlow => {
            if prefix == Some("UC") {
                rec(set, VIEW_TRIGGERS_UC, t, d);
            } else if key == Some("components") {
                rec(set, VIEW_USES_COMPONENT, t, d);
            }
        }
        Kind::UiComponent if entity_like(t) => rec(set, COMPONENT_USES_ENTITY, t, d),
        Kind::Requirement
            if matches!(
                prefix,
                Some("UC" | "BR" | "BP" | "XP" | "CMD" | "QRY" | "PROC" | "PRC")
            ) || key == Some("traceability") =>
        {
            rec(set, REQ_TRACES_TO, t, d)
        }
        Kind::Feature => rec(set, VALIDATES, t, d),
        Kind::Adr => rec(set, DECIDES_FOR, t, d),
        _ => {}
    }
}

/// An entity's (role's, system's) link inside its relations / attributes table: a domain
/// relation, and the row's business relation on the row's first link.
fn entity_table_link(set: &mut BTreeSet<LinkRecord>, at: &LinkAt<'_>) {
    let (l, key) = (at.l, at.key);
    let (t, d) = (l.target.as_str(), l.domain.as_deref());
    let (Some(cell), Some(Block::Table { header, rows })) =
        (l.cell, at.section.blocks.get(l.block))
    else {
        return;
    };
    if matches!(key, Some("relations" | "attributes")) && entity_like(t) && cell.row > 0 {
        rec(set, DOMAIN_RELATION, t, d);
    }
    if key != Some("relations") || cell.row == 0 {
        return;
    }
    let cols = RelationColumns::new(header);
    // The business relation goes to the row's first link only.
    let first_in_row = at.doc.links.iter().find(|o| {
        o.section == l.section && o.block == l.block && o.cell.is_some_and(|c| c.row == cell.row)
    });
    let is_first = first_in_row.is_some_and(|o| std::ptr::eq(o, l));
    if is_first && cell.col != cols.relation {
        if let Some(name) = rows
            .get(cell.row - 1)
            .and_then(|r| r.get(cols.relation))
            .and_then(|n| business_relation(n))
        {
            rec(set, &name, t, d);
        }
    }
}

fn front_matter_links(kind: Kind, doc: &Document, set: &mut BTreeSet<LinkRecord>) {
    let fm = &doc.front_matter;
    let mut add = |t: &str, v: &Value| {
        for s in frontmatter::string_list(v) {
            if let Some((target, dom)) = fm_target(&s) {
                if target.eq_ignore_ascii_case("prd") {
                    continue;
                }
                rec(set, t, &target, dom.as_deref());
            }
        }
    };
    match kind {
        Kind::UiView | Kind::UiComponent | Kind::UiFlow => {
            if let Some(Value::Object(links)) = fm.get("links") {
                for (k, v) in links {
                    let t = match (fold(k).as_str(), kind) {
                        (
                            "use-cases" | "use_cases" | "usecases" | "casos-de-uso",
                            Kind::UiComponent,
                        ) => WIKI_LINK,
                        ("use-cases" | "use_cases" | "usecases" | "casos-de-uso", _) => {
                            VIEW_TRIGGERS_UC
                        }
                        ("components" | "componentes", Kind::UiComponent) => WIKI_LINK,
                        ("components" | "componentes", _) => VIEW_USES_COMPONENT,
                        ("entities" | "entidades", Kind::UiComponent) => COMPONENT_USES_ENTITY,
                        _ => WIKI_LINK,
                    };
                    add(t, v);
                }
            }
        }
        Kind::Requirement => {
            if let Some(v) = fm.get("source") {
                add(REQ_TRACES_TO, v);
            }
        }
        Kind::BusinessRule => {
            if let Some(v) = fm.get("entity") {
                add(ENTITY_RULE, v);
            }
        }
        Kind::BusinessPolicy | Kind::CrossPolicy => {
            if let Some(v) = fm.get("entity") {
                add(ENTITY_POLICY, v);
            }
        }
        Kind::Adr | Kind::ImplementationCharter => {
            for k in ["supersedes", "superseded_by"] {
                if let Some(v) = fm.get(k) {
                    add(WIKI_LINK, v);
                }
            }
        }
        _ => {}
    }
    if let Some(v) = fm.get("related") {
        add(WIKI_LINK, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn relation_names() {
        assert_eq!(
            business_relation("pertenece_a").as_deref(),
            Some("pertenece_a")
        );
        assert_eq!(
            business_relation("Extraído de").as_deref(),
            Some("extraido_de")
        );
        assert_eq!(business_relation("`contiene`").as_deref(), Some("contiene"));
        assert_eq!(business_relation("a/b"), None);
        assert_eq!(business_relation(""), None);
        assert_eq!(target_prefix("UC-001-X"), Some("UC"));
        assert_eq!(target_prefix("Pedido"), None);
        assert_eq!(target_prefix("UC-"), None);
    }
}
