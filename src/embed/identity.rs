//! The identity chunk of a spec: one vector that says what the spec IS (issue 13), for the specs
//! BR-EMBEDDING-001's section chunks leave without any vector.
//!
//! Choice: a spec that yields no section chunk — every event (BR-EMBEDDING-001 embeds no event
//! section) and any spec without embeddable prose — gets exactly one identity chunk (see
//! [`super::chunk::chunk_spec`]). It is not a section chunk: its context text is the identity
//! line (`[kind: id · title]`), the aliases, and the spec's opening prose (the first paragraphs
//! in document order, code and tables skipped, up to [`OPENING_WORDS`] words), so a question
//! phrased like the spec's name or purpose finds it by meaning. Identity chunks for every kind
//! were measured too and not kept (they add a near-duplicate of the first section chunk and
//! did not improve the out-of-fold dev score).
//!
//! Invariants: pure and deterministic (same spec → same chunk, same key); the chunk cites the
//! section its opening prose came from (the first section with text when there is none).

use super::chunk::{chunk_key, identity_line, Chunk};
use crate::spec::{Block, Extracted};

/// The opening prose stops at the first paragraph that brings it to this many words.
pub const OPENING_WORDS: usize = 60;

/// The spec's opening prose: (index of its first section, text), paragraphs joined by a blank
/// line; `None` when the spec has no paragraph at all.
fn opening(ex: &Extracted) -> Option<(usize, String)> {
    let mut first: Option<usize> = None;
    let mut parts: Vec<&str> = Vec::new();
    let mut words = 0usize;
    for (i, s) in ex.sections.iter().enumerate() {
        for b in &s.blocks {
            let Block::Paragraph { text } = b else {
                continue;
            };
            let t = text.trim();
            if t.is_empty() {
                continue;
            }
            first.get_or_insert(i);
            parts.push(t);
            words += t.split_whitespace().count();
            if words >= OPENING_WORDS {
                return first.map(|f| (f, parts.join("\n\n")));
            }
        }
    }
    first.map(|f| (f, parts.join("\n\n")))
}

/// The identity chunk of `ex` under `model_id` (see the module docs).
pub fn identity_chunk(ex: &Extracted, model_id: &str) -> Chunk {
    let line = identity_line(ex);
    let open = opening(ex);
    let mut context_text = line;
    let aliases: Vec<&str> = ex
        .node
        .aliases
        .iter()
        .map(|a| a.trim())
        .filter(|a| !a.is_empty())
        .collect();
    if !aliases.is_empty() {
        context_text.push_str(" > ");
        context_text.push_str(&aliases.join(", "));
    }
    if let Some((_, t)) = &open {
        context_text.push_str(" > ");
        context_text.push_str(t);
    }
    let at = open
        .as_ref()
        .map(|o| o.0)
        .or_else(|| ex.sections.iter().position(|s| !s.text().trim().is_empty()));
    let sec = at.and_then(|i| ex.sections.get(i));
    Chunk {
        key: chunk_key(model_id, &context_text),
        section: sec.map(|s| s.heading.clone()).unwrap_or_default(),
        section_key: Some("identity".to_string()),
        line: sec.map_or(1, |s| s.line),
        text: open.map(|o| o.1).unwrap_or_else(|| ex.node.title.clone()),
        context_text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::chunk::tests::{para, sec, spec};
    use crate::spec::Kind;

    #[test]
    fn events_get_an_identity_chunk_with_aliases_and_opening_prose() {
        let mut evt = spec(
            Kind::Event,
            "EVT-Order-Cancelled",
            "Order cancelled",
            vec![
                sec("Order cancelled", None, 1, &[], vec![]),
                sec(
                    "Description",
                    Some("description"),
                    2,
                    &[],
                    vec![
                        para("Emitted when a customer cancels an order before shipping."),
                        Block::Code {
                            lang: "json".into(),
                            text: "{}".into(),
                        },
                    ],
                ),
            ],
        );
        evt.node.aliases = vec!["Cancellation".into()];
        let c = identity_chunk(&evt, "m");
        assert_eq!(
            c.context_text,
            "[event: EVT-Order-Cancelled · Order cancelled] > Cancellation > Emitted when a customer cancels an order before shipping."
        );
        assert_eq!(c.section, "Description");
        assert_eq!(c.section_key.as_deref(), Some("identity"));
        assert_eq!(
            c.text,
            "Emitted when a customer cancels an order before shipping."
        );
        assert_eq!(identity_chunk(&evt, "m"), c, "deterministic");
        assert_ne!(identity_chunk(&evt, "other").key, c.key);
    }

    #[test]
    fn opening_prose_is_bounded_and_a_spec_without_prose_is_named_by_its_title() {
        let long = "word ".repeat(40);
        let ex = spec(
            Kind::Entity,
            "Order",
            "Order",
            vec![sec(
                "Description",
                Some("description"),
                2,
                &[],
                vec![para(&long), para(&long), para("never reached")],
            )],
        );
        let c = identity_chunk(&ex, "m");
        assert!(!c.context_text.contains("never reached"), "{c:?}");
        let bare = spec(Kind::Event, "EVT-X", "X happened", vec![]);
        let c = identity_chunk(&bare, "m");
        assert_eq!(c.text, "X happened");
        assert_eq!(c.line, 1);
    }
}
