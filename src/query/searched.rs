//! The text a search runs on: the question plus what expands it.
//!
//! - Cross-lingual: a question clearly in the other language of the corpus is searched together
//!   with its translation. An agent may give its own (`translation`, preferred: no translator
//!   runs); otherwise the question is machine-translated (see [`super::translate`]).
//! - Agent-side expansion: the calling agent is a language model, so it may add `keywords`
//!   (extra lexical queries) and a `hypothetical_answer` (a short passage written like the spec
//!   it expects). Each is appended to the searched text, so it is fused exactly like a
//!   translation: BM25 matches its words and the embedding of the whole text moves toward it.
//! - Semantic weight (for fusion): the knob's, less for a translated question (the hybrid
//!   ranking lowers it further for a question naming an identifier, see [`super::ident`]).
//! - `used` names every expansion applied, in order (`translation`, `machine_translation`,
//!   `keywords`, `hypothetical_answer`), and the answer reports it as `expanded_with`.
//!
//! - The semantic signal embeds `sem_texts`: the searched text as one, except that a machine
//!   translation is not embedded (the multilingual model reads the question as asked, and
//!   Apertium's word-by-word English or Spanish only blurs it: dev 0.793 → 0.795, check 0.796
//!   → 0.802, the blind check-two 0.767 → 0.774; an agent's fluent translation is embedded
//!   with the question as before). With the knob `KDD_RANK_XSEM=1` the question and its
//!   translation are embedded apart, a node keeping its best cosine (one more embedding;
//!   measured on dev: 0.742 → 0.733, not kept as the default).
//!
//! Invariants: the expansion texts are bounded ([`MAX_TEXT`], [`MAX_KEYWORDS`]; longer input is
//! an `INVALID_EXPANSION` error, never silently cut); nothing is searched that the caller did
//! not send or the translator did not make from the question.

use super::translate;
use super::types::{Expansion, Warning};
use super::util::clip;
use super::Error;
use crate::artifact::IndexLevel;
use crate::cache::Snapshot;

/// Longest expansion text (bytes), like the question itself.
pub const MAX_TEXT: usize = 2000;
/// Most keywords accepted.
pub const MAX_KEYWORDS: usize = 20;

/// What a search runs on.
pub struct Searched {
    /// Question followed by its expansions.
    pub text: String,
    /// Semantic weight that suits it (less when translated).
    pub w_sem: f32,
    /// The translation, when one was used.
    pub translation: Option<String>,
    /// Expansions applied, in order.
    pub used: Vec<String>,
    /// The texts embedded for the semantic signal: `text`, or (knob `KDD_RANK_XSEM`) the
    /// question and its translation apart, each with the agent's keywords and answer.
    pub sem_texts: Vec<String>,
}

/// Reject oversized expansions (`INVALID_EXPANSION`).
pub fn validate(e: &Expansion) -> Result<(), Error> {
    let bad = |m: String| Err(Error::invalid("INVALID_EXPANSION", m));
    if e.keywords.len() > MAX_KEYWORDS {
        return bad(format!("at most {MAX_KEYWORDS} keywords"));
    }
    let texts = e
        .keywords
        .iter()
        .chain(e.hypothetical_answer.iter())
        .chain(e.translation.iter());
    for t in texts {
        if t.len() > MAX_TEXT {
            return bad(format!("expansion texts must be at most {MAX_TEXT} bytes"));
        }
    }
    Ok(())
}

fn given(t: &Option<String>) -> Option<&str> {
    t.as_deref().map(str::trim).filter(|t| !t.is_empty())
}

/// The searched text for a question and its expansions; warnings say what happened.
pub fn searched(
    snap: &Snapshot<'_>,
    query: &str,
    exp: &Expansion,
    warnings: &mut Vec<Warning>,
) -> Result<Searched, Error> {
    validate(exp)?;
    let k = super::knobs::knobs();
    let mut out = Searched {
        text: query.to_string(),
        w_sem: k.w_sem,
        translation: None,
        used: Vec::new(),
        sem_texts: Vec::new(),
    };
    if let Some(t) = given(&exp.translation) {
        out.translation = Some(t.to_string());
        out.used.push("translation".into());
    } else if let Some(t) = machine_translation(snap, query, warnings)? {
        out.translation = Some(t);
        out.used.push("machine_translation".into());
    }
    if let Some(t) = &out.translation {
        out.text = format!("{query} {t}");
        out.w_sem = k.w_sem_translated;
    }
    let kws: Vec<&str> = exp
        .keywords
        .iter()
        .map(|s| s.trim())
        .filter(|s| !s.is_empty())
        .collect();
    if !kws.is_empty() {
        out.text.push(' ');
        out.text.push_str(&kws.join(" "));
        out.used.push("keywords".into());
    }
    let mut extra = String::new();
    if !kws.is_empty() {
        extra.push(' ');
        extra.push_str(&kws.join(" "));
    }
    if let Some(h) = given(&exp.hypothetical_answer) {
        out.text.push(' ');
        out.text.push_str(h);
        out.used.push("hypothetical_answer".into());
        extra.push(' ');
        extra.push_str(h);
    }
    let machine = out.used.first().is_some_and(|u| u == "machine_translation");
    out.sem_texts = embedded(&out, query, &extra, machine, k.xsem == 1);
    Ok(out)
}

/// The texts embedded for the semantic signal (see the module docs): `extra` is the agent's
/// keywords and answer, `machine` says the translation is machine-made, `apart` is the knob.
fn embedded(s: &Searched, query: &str, extra: &str, machine: bool, apart: bool) -> Vec<String> {
    match &s.translation {
        Some(t) if apart => vec![format!("{query}{extra}"), format!("{t}{extra}")],
        // The multilingual model reads the question as asked; a word-by-word machine
        // translation only blurs its embedding and serves BM25 alone.
        Some(_) if machine => vec![format!("{query}{extra}")],
        _ => vec![s.text.clone()],
    }
}

/// True when this cache can rank by meaning at all (L2 and a loaded model).
pub(super) fn semantic_possible(snap: &Snapshot<'_>) -> bool {
    snap.cache.level() >= IndexLevel::L2 && snap.cache.embedder().is_some()
}

/// The machine translation of a question clearly in the other language of the corpus.
fn machine_translation(
    snap: &Snapshot<'_>,
    query: &str,
    warnings: &mut Vec<Warning>,
) -> Result<Option<String>, Error> {
    let (from, to) = match translate::plan(snap, query)? {
        translate::Plan::Keep => return Ok(None),
        translate::Plan::Translate { from, to } => (from, to),
        // The servers refuse longer questions; the CLI searches one as it is, untranslated.
        translate::Plan::TooLong { from, to } => {
            warnings.push(Warning::new(
                "NO_TRANSLATION",
                format!(
                    "The query is {}, the specs are mostly {}, and it is over {} bytes: not translated (ask a shorter question, or pass your own `translation`)",
                    from.name(),
                    to.name(),
                    translate::MAX_TRANSLATED
                ),
            ));
            return Ok(None);
        }
    };
    // BM25 alone (L1, or no model loaded) needs only the target lemmas, which come 2-3x faster.
    let style = if semantic_possible(snap) {
        translate::Style::Full
    } else {
        translate::Style::Lemmas
    };
    Ok(match translate::translate(query, from, to, style) {
        Ok(t) => {
            warnings.push(Warning::new(
                "QUERY_TRANSLATED",
                format!(
                    "The query is {}, the specs are mostly {}: also searched as \"{}\"",
                    from.name(),
                    to.name(),
                    clip(&t, 300)
                ),
            ));
            Some(t)
        }
        Err(e) => {
            warnings.push(Warning::new(
                "NO_TRANSLATION",
                format!(
                    "The query is {}, the specs are mostly {}, and it could not be translated: {e}; cross-lingual matches rely on embeddings alone (KDD_TRANSLATE=off silences this; an agent can pass its own `translation`)",
                    from.name(),
                    to.name()
                ),
            ));
            None
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn searched_with(translation: Option<&str>) -> Searched {
        let text = match translation {
            Some(t) => format!("¿quién paga? {t} fee"),
            None => "¿quién paga? fee".to_string(),
        };
        Searched {
            text,
            w_sem: 0.5,
            translation: translation.map(str::to_string),
            used: Vec::new(),
            sem_texts: Vec::new(),
        }
    }

    #[test]
    fn a_machine_translation_is_searched_lexically_but_not_embedded() {
        let q = "¿quién paga?";
        let s = searched_with(Some("who pays?"));
        // Machine-made: the model reads the question as asked, with the agent's extras.
        assert_eq!(
            embedded(&s, q, " fee", true, false),
            vec!["¿quién paga? fee"]
        );
        // The agent's own (fluent) translation is embedded with the question.
        assert_eq!(embedded(&s, q, " fee", false, false), vec![s.text.clone()]);
        // The knob embeds both apart, whoever translated.
        assert_eq!(
            embedded(&s, q, " fee", true, true),
            vec!["¿quién paga? fee", "who pays? fee"]
        );
        // No translation: the searched text as one.
        let s = searched_with(None);
        assert_eq!(embedded(&s, q, " fee", false, false), vec![s.text.clone()]);
    }
}
