//! Phrase evidence for BM25 (issue 13, fourteenth round): a section that holds the question's
//! words *together* outranks one that holds them apart. Each distinct pair of adjacent analysed
//! words of the question becomes a tantivy phrase query with a little slop, per heading and
//! body field, weighted like that field's words times [`weight`] (a sequential-dependence term
//! in the sense of Metzler & Croft, 2005). Needs positions in those fields (`text.rs` indexes
//! them).
//!
//! Invariants: with weight 0 no clause is added and the ranking is exactly the words' BM25;
//! a pair of equal words, or one already added for a field, adds nothing.

use super::text::TextIndex;
use std::collections::HashSet;
use tantivy::query::{BoostQuery, Occur, PhraseQuery, Query};
use tantivy::schema::Field;
use tantivy::{Index, Term};

/// Positions a phrase match may stretch: room for the stop words the analysers drop on either
/// side (`carpeta de artefactos` / `carpeta de los artefactos`). Chosen before measuring; at
/// weight 0.45, slop 1 / 2 / 4 gave dev 0.791 / 0.796 / 0.800 and check 0.806 / 0.807 / 0.803,
/// so it is not what the gain hangs on.
const SLOP: u32 = 2;

/// The measured default of [`weight`].
const DEFAULT: f32 = 0.3;

/// Weight of a question's adjacent word pairs met in the same order within [`SLOP`] positions,
/// relative to the words' own BM25. `KDD_RANK_PHRASE` (0–2) for sweeps; read here, not in
/// `query/knobs.rs`, because it applies inside the text index. Swept {0, 0.3, 0.6, 1.0}: 0.3
/// kept, chosen in 5/5 dev folds (dev 0.778 → 0.793 out of fold, paraphrase 0.738 → 0.777);
/// check 0.809 → 0.811 (0.6 chosen there, 0.819), check-two 0.764 → 0.765 (never tuned on).
pub(super) fn weight() -> f32 {
    static W: std::sync::OnceLock<f32> = std::sync::OnceLock::new();
    *W.get_or_init(|| super::text::weight_knob("KDD_RANK_PHRASE", DEFAULT, 2.0))
}

/// Add the phrase clauses of `text` to `clauses`: headings weighted `w_head`, bodies 1.
pub(super) fn clauses(
    idx: &TextIndex,
    text: &str,
    w_head: f32,
    clauses: &mut Vec<(Occur, Box<dyn Query>)>,
) {
    let w = weight();
    if w <= 0.0 {
        return;
    }
    let f = &idx.fields;
    for (field, fw) in [
        (f.head_es, w_head),
        (f.head_en, w_head),
        (f.body_es, 1.0),
        (f.body_en, 1.0),
    ] {
        let seq = term_seq(&idx.index, field, text);
        let mut seen = HashSet::new();
        for pair in seq.windows(2) {
            if pair[0] == pair[1] || !seen.insert((pair[0].clone(), pair[1].clone())) {
                continue;
            }
            let mut q = PhraseQuery::new(pair.to_vec());
            q.set_slop(SLOP);
            let q: Box<dyn Query> = Box::new(q);
            clauses.push((Occur::Should, Box::new(BoostQuery::new(q, fw * w))));
        }
    }
}

/// The analysed terms of `text` for `field`, in order, repeats kept (`text.rs` dedups them for
/// the words' own clauses).
pub(super) fn term_seq(index: &Index, field: Field, text: &str) -> Vec<Term> {
    let Ok(mut a) = index.tokenizer_for_field(field) else {
        return Vec::new();
    };
    let mut out: Vec<Term> = Vec::new();
    let mut ts = a.token_stream(text);
    while ts.advance() {
        out.push(Term::from_field_text(field, &ts.token().text));
    }
    out
}
