//! Exact identifiers in a question: code-like names the corpus contains verbatim.
//!
//! A question that names an identifier of the specs (`SLOT_TAKEN`, `source_hash`,
//! `RetrievalQuery`, `UC-001`, `BR-{ENTITY}-NNN`) asks for the specs that contain it: that is
//! an exact, lexical question. An embedding model knows nothing of such names and pulls in
//! specs that merely sound alike, so the hybrid ranking leans on the semantic signal less for
//! it (knob `KDD_RANK_W_SEM_ID`, see [`super::knobs`]; measured in `tools/eval/README.md`).
//!
//! Code-like: a run of letters, digits, `_`, `-`, `{`, `}` that has an inner `_`
//! (snake_case, SCREAMING_SNAKE), a lower-to-upper case change (camelCase, PascalCase), a
//! `{placeholder}`, or two or more capitals then `-` and more (`UC-001`, `INV-CUS-001`). Plain
//! words, acronyms (`API`, `PRD`) and hyphenated words (`multi-domain`) are not.
//!
//! Invariants: only the question as asked is read (not the translation nor an agent's
//! expansions); an identifier counts only when a spec of the corpus contains it verbatim
//! (case-insensitive), so a typo or a name the corpus does not know leaves the ranking as it is;
//! at most [`MAX_IDENTS`] identifiers are checked, each with one small lexical search.

use super::Error;
use crate::cache::{NodeRecord, Snapshot, TextFilter};

/// Most identifiers of one question checked against the corpus.
const MAX_IDENTS: usize = 8;
/// Lexical hits searched for the spec that contains an identifier.
const PROBE: usize = 5;

/// The code-like tokens of a text, in order, without repeats.
pub(super) fn code_like(text: &str) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    let is_part = |c: char| c.is_alphanumeric() || matches!(c, '_' | '-' | '{' | '}');
    for raw in text.split(|c: char| !is_part(c)) {
        let t = raw.trim_matches(|c: char| c == '-' || c == '_');
        if !t.is_empty() && looks_like_code(t) && !out.contains(&t) {
            out.push(t);
        }
    }
    out
}

fn looks_like_code(t: &str) -> bool {
    let cs: Vec<char> = t.chars().collect();
    let inner_underscore = cs
        .windows(3)
        .any(|w| w[1] == '_' && w[0].is_alphanumeric() && w[2].is_alphanumeric());
    let case_change = cs
        .windows(2)
        .any(|w| w[0].is_lowercase() && w[1].is_uppercase());
    let placeholder = t
        .find('{')
        .is_some_and(|i| t[i..].find('}').is_some_and(|j| j > 1));
    let caps = cs.iter().take_while(|c| c.is_uppercase()).count();
    let prefixed_id = caps >= 2 && cs.get(caps) == Some(&'-') && cs.len() > caps + 1;
    inner_underscore || case_change || placeholder || prefixed_id
}

/// The semantic weight the hybrid fusion gives a question, and the identifier that set it: `w`,
/// or at most the knob `KDD_RANK_W_SEM_ID` when the question names an identifier the corpus
/// contains (checked only when that lowers the weight and the cache can rank by meaning at
/// all). Single-strategy search never asks: with one signal there is nothing to weigh.
pub(super) fn fusion_weight(
    snap: &Snapshot<'_>,
    question: &str,
    w: f32,
) -> Result<(f32, Option<String>), Error> {
    let id_w = super::knobs::knobs().w_sem_ident;
    if id_w < w && super::searched::semantic_possible(snap) {
        if let Some(ident) = corpus_identifier(snap, question)? {
            return Ok((id_w, Some(ident)));
        }
    }
    Ok((w, None))
}

/// The first identifier of the question that some spec of the corpus contains verbatim.
fn corpus_identifier(snap: &Snapshot<'_>, question: &str) -> Result<Option<String>, Error> {
    for ident in code_like(question).into_iter().take(MAX_IDENTS) {
        let needle = ident.to_lowercase();
        for hit in snap.lexical(ident, &TextFilter::default(), PROBE)? {
            if snap
                .node(&hit.node_id)?
                .is_some_and(|rec| contains(&rec, &needle))
            {
                return Ok(Some(ident.to_string()));
            }
        }
    }
    Ok(None)
}

/// True when the record's id, title or section text contains `needle` (lowercase).
fn contains(rec: &NodeRecord, needle: &str) -> bool {
    let has = |s: &str| s.to_lowercase().contains(needle);
    has(&rec.node.id)
        || has(&rec.node.title)
        || rec.sections.iter().any(|s| has(&s.heading) || has(&s.text))
}

#[cfg(test)]
mod tests {
    use super::code_like;

    #[test]
    fn code_like_names_are_told_from_words() {
        let q = "identificador {Kind}:{DocumentId} y source_hash, error SLOT_TAKEN en UC-001 \
                 BR-{ENTITY}-NNN INV-CUS-001 RetrievalQuery; no: API PRD multi-domain e-mail \
                 Spanish -- _x_ 3-5";
        assert_eq!(
            code_like(q),
            [
                "{Kind}",
                "{DocumentId}",
                "source_hash",
                "SLOT_TAKEN",
                "UC-001",
                "BR-{ENTITY}-NNN",
                "INV-CUS-001",
                "RetrievalQuery"
            ]
        );
    }

    #[test]
    fn odd_text_never_panics_and_stays_bounded() {
        let odd = "𝔘_𝔙 É_Ü {} {{}} }{ -_- ÀB-1 ǅǆ_x {é} İ_ı ß_ẞ \u{0} _ - {";
        let got = code_like(odd);
        assert!(got.contains(&"𝔘_𝔙") && got.contains(&"{é}"), "{got:?}");
        let long = "a_b ".repeat(10_000);
        assert_eq!(code_like(&long), ["a_b"]);
    }
}
