//! Chunking per BR-EMBEDDING-001: which sections of each kind are embedded, and how their
//! paragraphs become chunks.
//!
//! Policy:
//! - Only the embeddable sections of the spec's kind ([`embeddable_keys`], the rule's table with
//!   the EN v2 headings mapped to the same canonical keys by the parser, e.g. `Statement` →
//!   `declaration`, `Main Flow (Happy Path)` → `main_flow`). A sub-section without a canonical
//!   key inherits the embeddability of its enclosing section (`### Ejemplo` under
//!   `## Descripción` is embedded; `### Transitions` under `## States` is not).
//! - Units are paragraphs and lists (a list is one unit, e.g. a whole main flow), and tables (one
//!   chunk per table, never split by row). Code blocks (mermaid, examples) are never embedded.
//! - A unit under [`MIN_WORDS`] words is merged with the next unit of the same section; a short
//!   last unit is merged into the previous chunk of its section (or stands alone).
//! - `context_text` = identity line `[kind: id · title]` + ancestor section titles + the
//!   section's own title + the text, joined with ` > `.
//! - `.feature` files: the feature description (free text under `Feature:`) is chunked like
//!   prose, and every Scenario / Scenario Outline is ONE chunk (its name + its steps; example
//!   tables and Background are not embedded).
//! - Generic documents (`document`), glossaries and implementation charters: every section's
//!   prose is embedded (there is no kind table for them).
//! - v2 kinds without a row in the rule: role/system → description, purpose; nfr → goal,
//!   description; value-unit/release → objective, description; ui-flow → purpose, description,
//!   steps. Process also embeds a v2 `Description`; ui-view/ui-component a v2 `Purpose`;
//!   requirement also the EARS requirement sections (`REQ-NNN.1: …`, no canonical key).
//! - At most [`MAX_CHUNKS`] chunks per spec; identical context texts are embedded once.
//! - A spec none of whose sections yields a chunk (every event, which BR-EMBEDDING-001 leaves
//!   without section vectors, and any spec without embeddable prose) gets ONE identity chunk
//!   instead (see [`super::identity`]: identity line, aliases, opening prose), so every spec is
//!   reachable by meaning. Measured (issue 13): identity chunks for every kind did not
//!   generalise (dev out-of-fold 0.732 vs 0.742); for chunkless specs only they did.

use super::store::{ChunkKey, KEY_LEN};
use crate::spec::{Block, Extracted, Kind, Section};

/// Units with fewer words are merged with the next one (BR-EMBEDDING-001 rule 3).
pub const MIN_WORDS: usize = 20;
/// Upper bound of chunks per spec (huge generic documents).
pub const MAX_CHUNKS: usize = 256;

/// One embeddable piece of a spec.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    /// Content address: first 8 bytes of blake3(model id ‖ 0x00 ‖ context_text).
    pub key: ChunkKey,
    /// Heading of the section the chunk comes from (empty for a preamble).
    pub section: String,
    /// Canonical key of that section (or of the enclosing embeddable section).
    pub section_key: Option<String>,
    /// 1-based line of the section heading.
    pub line: usize,
    /// The paragraph text (merged units joined by a blank line).
    pub text: String,
    /// What is embedded: identity + ancestors + section title + text.
    pub context_text: String,
}

/// The chunk key of a context text under a model.
pub fn chunk_key(model_id: &str, context_text: &str) -> ChunkKey {
    let mut h = blake3::Hasher::new();
    h.update(model_id.as_bytes());
    h.update(&[0]);
    h.update(context_text.as_bytes());
    let mut key = [0u8; KEY_LEN];
    key.copy_from_slice(&h.finalize().as_bytes()[..KEY_LEN]);
    key
}

/// Canonical section keys embedded for a kind. `None` = every section (generic documents).
pub fn embeddable_keys(kind: Kind) -> Option<&'static [&'static str]> {
    Some(match kind {
        Kind::Entity => &["description"],
        Kind::Event => &[],
        Kind::BusinessRule => &["declaration", "when_applies"],
        Kind::BusinessPolicy => &["declaration"],
        Kind::CrossPolicy => &["purpose", "declaration"],
        Kind::Command | Kind::Query => &["purpose"],
        Kind::Process => &["participants", "steps", "description"],
        Kind::UseCase => &["description", "main_flow"],
        Kind::UiView => &["description", "purpose", "behavior"],
        Kind::UiComponent => &["description", "purpose"],
        Kind::Requirement => &["description", "requirements"],
        Kind::Objective => &["objective"],
        Kind::Prd => &["problem"],
        Kind::Adr => &["context", "decision"],
        Kind::Role | Kind::System => &["description", "purpose"],
        Kind::Nfr => &["goal", "description"],
        Kind::ValueUnit | Kind::Release => &["objective", "description"],
        Kind::UiFlow => &["purpose", "description", "steps"],
        Kind::Feature => &["scenario"],
        Kind::Document | Kind::Glossary | Kind::ImplementationCharter => return None,
    })
}

/// The identity line: `[business-rule: BR-EMBEDDING-001 · Embedding Strategy]`.
pub fn identity_line(ex: &Extracted) -> String {
    let id = ex.node.local_id();
    let title = ex.node.title.trim();
    if title.is_empty() || title == id {
        format!("[{}: {id}]", ex.node.kind)
    } else {
        format!("[{}: {id} · {title}]", ex.node.kind)
    }
}

/// Decide, per section, whether it is embedded and under which canonical key.
fn section_policy(ex: &Extracted) -> Vec<Option<Option<String>>> {
    let kind = ex.node.kind;
    let keys = embeddable_keys(kind);
    // Stack of (level, embeddable-with-key) for inheritance by unkeyed sub-sections.
    let mut stack: Vec<(u8, Option<Option<String>>)> = Vec::new();
    ex.sections
        .iter()
        .map(|s| {
            while stack
                .last()
                .is_some_and(|(l, _)| *l >= s.level && s.level > 0)
            {
                stack.pop();
            }
            let decision = match (&s.key, keys) {
                (_, None) => Some(s.key.clone()),
                (Some(k), Some(keys)) => keys.contains(&k.as_str()).then(|| Some(k.clone())),
                (None, Some(_)) => {
                    let inherited = stack.last().and_then(|(_, d)| d.clone());
                    match kind {
                        // EARS requirement sections (`REQ-001.1: …`) carry no canonical key.
                        Kind::Requirement if inherited.is_none() && s.level == 2 => {
                            looks_like_req(&s.heading).then_some(None)
                        }
                        // The free text under `Feature:` (level 1) is the feature description.
                        Kind::Feature if s.level <= 1 => Some(None),
                        _ => inherited,
                    }
                }
            };
            if s.level > 0 {
                stack.push((s.level, decision.clone()));
            }
            decision
        })
        .collect()
}

fn looks_like_req(heading: &str) -> bool {
    let h = heading.trim_start();
    h.starts_with("REQ-") && !h.to_ascii_lowercase().contains("traceab")
}

fn words(s: &str) -> usize {
    s.split_whitespace().count()
}

/// The embeddable text units of a section, in order (code blocks dropped).
fn units(section: &Section, scenario: bool) -> Vec<(String, bool)> {
    if scenario {
        // One chunk per scenario: name + steps (example tables and doc strings excluded).
        let steps: Vec<String> = section
            .blocks
            .iter()
            .filter_map(|b| match b {
                Block::List { items } => Some(items.join("\n")),
                Block::Paragraph { text } => Some(text.clone()),
                _ => None,
            })
            .collect();
        let body = steps.join("\n");
        return if body.trim().is_empty() {
            Vec::new()
        } else {
            vec![(body, false)]
        };
    }
    section
        .blocks
        .iter()
        .filter_map(|b| match b {
            Block::Code { .. } => None,
            Block::Table { .. } => Some((b.text(), true)),
            _ => Some((b.text(), false)),
        })
        .filter(|(t, _)| !t.trim().is_empty())
        .collect()
}

/// Merge units per rule 3 (short units go with the next one; tables stand alone but may
/// absorb a short introduction before them).
fn merge_units(units: Vec<(String, bool)>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut pending: Option<String> = None;
    for (text, is_table) in units {
        let text = match pending.take() {
            Some(p) => format!("{p}\n\n{text}"),
            None => text,
        };
        if !is_table && words(&text) < MIN_WORDS {
            pending = Some(text);
        } else {
            out.push(text);
        }
    }
    if let Some(p) = pending {
        match out.last_mut() {
            Some(last) => {
                last.push_str("\n\n");
                last.push_str(&p);
            }
            None => out.push(p),
        }
    }
    out
}

/// Chunk one extracted spec for `model_id` (see the module docs for the policy).
pub fn chunk_spec(ex: &Extracted, model_id: &str) -> Vec<Chunk> {
    let identity = identity_line(ex);
    let policy = section_policy(ex);
    let mut out: Vec<Chunk> = Vec::new();
    for (section, decision) in ex.sections.iter().zip(policy) {
        let Some(section_key) = decision else {
            continue;
        };
        let scenario = ex.node.kind == Kind::Feature && section.key.as_deref() == Some("scenario");
        let mut path: Vec<&str> = section.ancestors.iter().map(String::as_str).collect();
        let heading = section.heading.trim();
        if !heading.is_empty() && section.level > 1 {
            path.push(heading);
        }
        let prefix = std::iter::once(identity.clone())
            .chain(path.iter().map(|p| format!("[{p}]")))
            .collect::<Vec<_>>()
            .join(" > ");
        for text in merge_units(units(section, scenario)) {
            let context_text = format!("{prefix} > {text}");
            let key = chunk_key(model_id, &context_text);
            if out.iter().any(|c| c.key == key) {
                continue;
            }
            out.push(Chunk {
                key,
                section: section.heading.clone(),
                section_key: section_key.clone(),
                line: section.line,
                text,
                context_text,
            });
            if out.len() >= MAX_CHUNKS {
                return out;
            }
        }
    }
    if out.is_empty() {
        // No section says what the spec is (events, specs without embeddable prose): its
        // identity chunk does (see `super::identity`).
        out.push(super::identity::identity_chunk(ex, model_id));
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::spec::{Layer, Node};

    pub fn para(t: &str) -> Block {
        Block::Paragraph { text: t.into() }
    }

    pub fn sec(
        heading: &str,
        key: Option<&str>,
        level: u8,
        ancestors: &[&str],
        blocks: Vec<Block>,
    ) -> Section {
        Section {
            heading: heading.into(),
            key: key.map(str::to_string),
            level,
            ancestors: ancestors.iter().map(|s| s.to_string()).collect(),
            blocks,
            line: 1,
        }
    }

    pub fn spec(kind: Kind, id: &str, title: &str, sections: Vec<Section>) -> Extracted {
        Extracted {
            node: Node {
                id: format!("{}:{id}", kind.id_prefix()),
                kind,
                source_file: format!("specs/{id}.md"),
                source_hash: String::new(),
                title: title.into(),
                status: None,
                aliases: vec![],
                domain: None,
                layer: Layer::Domain,
            },
            fields: Default::default(),
            links: vec![],
            sections,
            diagnostics: vec![],
        }
    }

    const LONG1: &str = "Representa un pedido de compra realizado por un usuario registrado en la tienda, con sus líneas, importes, impuestos y la dirección de entrega elegida al confirmar.";
    const LONG2: &str = "El pedido tiene un ciclo de vida que va desde borrador hasta entregado o cancelado, y cada transición emite un evento de dominio que otros contextos consumen.";

    #[test]
    fn entity_description_only_paragraphs_and_merge() {
        let ex = spec(
            Kind::Entity,
            "Pedido",
            "Pedido",
            vec![
                sec("Pedido", None, 1, &[], vec![para("intro")]),
                sec(
                    "Descripción",
                    Some("description"),
                    2,
                    &[],
                    vec![
                        para(LONG1),
                        para("Corto."),
                        para(LONG2),
                        para("Final corto."),
                    ],
                ),
                sec("Ejemplo", None, 3, &["Descripción"], vec![para(LONG2)]),
                sec(
                    "Atributos",
                    Some("attributes"),
                    2,
                    &[],
                    vec![Block::Table {
                        header: vec!["a".into()],
                        rows: vec![vec!["b".into()]],
                    }],
                ),
                sec("Transiciones", None, 3, &["Atributos"], vec![para(LONG1)]),
            ],
        );
        let chunks = chunk_spec(&ex, "m");
        let texts: Vec<&str> = chunks.iter().map(|c| c.text.as_str()).collect();
        assert_eq!(texts.len(), 3, "{texts:#?}");
        assert_eq!(texts[0], LONG1);
        assert_eq!(texts[1], format!("Corto.\n\n{LONG2}\n\nFinal corto."));
        assert_eq!(
            chunks[0].context_text,
            format!("[entity: Pedido] > [Descripción] > {LONG1}")
        );
        assert_eq!(
            chunks[2].context_text,
            format!("[entity: Pedido] > [Descripción] > [Ejemplo] > {LONG2}")
        );
        assert_eq!(chunks[2].section_key.as_deref(), Some("description"));
        // keys depend on the model id and the context text only
        assert_ne!(chunk_spec(&ex, "other")[0].key, chunks[0].key);
        assert_eq!(chunk_spec(&ex, "m"), chunks);
    }

    #[test]
    fn rule_tables_events_and_features() {
        let table = Block::Table {
            header: vec!["kind".into(), "secciones".into()],
            rows: vec![vec!["entity".into(), "Descripción".into()]],
        };
        let br = spec(
            Kind::BusinessRule,
            "BR-X-001",
            "Regla X",
            vec![
                sec(
                    "Declaración",
                    Some("declaration"),
                    2,
                    &[],
                    vec![para("Tabla:"), table.clone(), para(LONG1)],
                ),
                sec(
                    "Por qué existe",
                    Some("rationale"),
                    2,
                    &[],
                    vec![para(LONG2)],
                ),
                sec(
                    "Cuándo aplica",
                    Some("when_applies"),
                    2,
                    &[],
                    vec![
                        Block::Code {
                            lang: "mermaid".into(),
                            text: "graph".into(),
                        },
                        para(LONG2),
                    ],
                ),
            ],
        );
        let c = chunk_spec(&br, "m");
        assert_eq!(c.len(), 3);
        assert!(c[0].text.starts_with("Tabla:\n\nkind | secciones"));
        assert!(c[0]
            .context_text
            .starts_with("[business-rule: BR-X-001 · Regla X] > [Declaración] > "));
        assert_eq!(c[2].section_key.as_deref(), Some("when_applies"));
        let feature = spec(
            Kind::Feature,
            "f",
            "Cancelar pedido",
            vec![
                sec(
                    "Cancelar pedido",
                    None,
                    1,
                    &[],
                    vec![para("Como cliente quiero cancelar")],
                ),
                sec(
                    "Background",
                    Some("background"),
                    2,
                    &[],
                    vec![Block::List {
                        items: vec!["Given a user".into()],
                    }],
                ),
                sec(
                    "Cancel before shipping",
                    Some("scenario"),
                    2,
                    &[],
                    vec![
                        Block::List {
                            items: vec!["Given an order".into(), "When I cancel".into()],
                        },
                        table,
                    ],
                ),
            ],
        );
        let c = chunk_spec(&feature, "m");
        assert_eq!(c.len(), 2, "{c:#?}");
        assert_eq!(c[1].text, "Given an order\nWhen I cancel");
        assert!(c[1].context_text.contains("[Cancel before shipping]"));
        let doc = spec(
            Kind::Document,
            "notes",
            "Notes",
            vec![sec("Anything", None, 2, &[], vec![para(LONG1)])],
        );
        assert_eq!(chunk_spec(&doc, "m").len(), 1);
    }

    #[test]
    fn events_get_only_their_identity_chunk() {
        let evt = spec(
            Kind::Event,
            "EVT-A",
            "EVT-A",
            vec![sec(
                "Descripción",
                Some("description"),
                2,
                &[],
                vec![para(LONG1)],
            )],
        );
        let ids: Vec<_> = chunk_spec(&evt, "m")
            .into_iter()
            .map(|c| c.section_key)
            .collect();
        assert_eq!(
            ids,
            [Some("identity".to_string())],
            "an event: its identity chunk only"
        );
    }
}
