//! Model-free query expansion by pseudo-relevance feedback (RM3-style).
//!
//! The first ranking's top specs are assumed relevant; the words that are frequent in them,
//! rare across the wider candidate pool and absent from the question form a feedback query,
//! whose lexical scores are added (with a knob weight) to the first ranking. This brings in
//! specs that answer the question in the corpus's own words when the question used others
//! (paraphrases, translated questions). It needs no model and no list of synonyms.
//!
//! Invariants: the feedback words come only from the indexed specs (never from outside the
//! repository); the feedback never removes a candidate, it only adds evidence; with
//! `terms == 0` nothing runs.

use super::Error;
use crate::cache::{Snapshot, TextFilter};
use std::collections::{HashMap, HashSet};

/// How many of the first ranking's top specs are taken as relevant.
const FEEDBACK_DOCS: usize = 3;
/// How many candidates estimate how common a word is (its document frequency).
const POOL_DOCS: usize = 30;

/// Content words of a spec, each with the number of its parts (title, sections) that use it.
fn word_counts(snap: &Snapshot<'_>, id: &str) -> Result<HashMap<String, f32>, Error> {
    let mut out: HashMap<String, f32> = HashMap::new();
    let Some(rec) = snap.node(id)? else {
        return Ok(out);
    };
    for w in snap.query_words(&rec.node.title) {
        *out.entry(w).or_default() += 1.0;
    }
    for s in &rec.sections {
        for w in snap.query_words(&s.text) {
            *out.entry(w).or_default() += 1.0;
        }
    }
    Ok(out)
}

/// The feedback words for a first ranking (`ranked`: node id and score, best first), best
/// first, at most `terms` of them.
pub fn feedback_words(
    snap: &Snapshot<'_>,
    query: &str,
    ranked: &[(String, f32)],
    terms: usize,
) -> Result<Vec<String>, Error> {
    if terms == 0 || ranked.is_empty() {
        return Ok(Vec::new());
    }
    let asked: HashSet<String> = snap.query_words(query).into_iter().collect();
    let mut df: HashMap<String, f32> = HashMap::new();
    let mut top: Vec<(f32, HashMap<String, f32>)> = Vec::new();
    let best = ranked[0].1.max(1e-6);
    for (i, (id, score)) in ranked.iter().take(POOL_DOCS).enumerate() {
        let counts = word_counts(snap, id)?;
        for w in counts.keys() {
            *df.entry(w.clone()).or_default() += 1.0;
        }
        if i < FEEDBACK_DOCS {
            top.push((score / best, counts));
        }
    }
    let pool = ranked.len().min(POOL_DOCS) as f32;
    let mut weight: HashMap<&str, f32> = HashMap::new();
    for (w_doc, counts) in &top {
        let len: f32 = counts.values().sum::<f32>().max(1.0);
        for (w, c) in counts {
            if asked.contains(w) || w.chars().all(|c| c.is_ascii_digit()) {
                continue;
            }
            let idf = (1.0 + pool / df[w]).ln();
            *weight.entry(w.as_str()).or_default() += w_doc * (c / len) * idf;
        }
    }
    let mut ws: Vec<(&str, f32)> = weight.into_iter().collect();
    ws.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(b.0)));
    Ok(ws
        .into_iter()
        .take(terms)
        .map(|w| w.0.to_string())
        .collect())
}

/// Lexical scores of the feedback query, normalised by the best one (node id → 0..1).
pub fn feedback_scores(
    snap: &Snapshot<'_>,
    words: &[String],
    filter: &TextFilter,
    pool: usize,
) -> Result<HashMap<String, f32>, Error> {
    if words.is_empty() {
        return Ok(HashMap::new());
    }
    let hits = snap.lexical(&words.join(" "), filter, pool)?;
    let max = hits.first().map(|h| h.score).unwrap_or(0.0).max(1e-6);
    Ok(hits
        .into_iter()
        .map(|h| (h.node_id, h.score / max))
        .collect())
}
