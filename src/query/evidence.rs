//! What a hit can show for itself: a calibrated confidence and the span of its best evidence.
//!
//! **Calibration.** The fused ranking score is relative (every signal is normalised by its best
//! value in the answer), so on its own it cannot say whether an answer is any good. The
//! confidence of a hit is absolute instead: the larger of
//! - its *coverage*: the share of the question's content words (stop words dropped, words
//!   compared by their first [`PREFIX`] folded characters, so inflections meet) found in the
//!   spec's id, title, aliases and text;
//! - its *semantic closeness*: the best chunk cosine mapped linearly from [`COS_FLOOR`] (what
//!   the model gives unrelated text, measured: nonsense questions) to [`COS_CEIL`] (a close
//!   paraphrase) onto 0–1.
//!
//! An answer's confidence is the best confidence among its first [`CONF_TOP`] hits, and a hit's
//! reported `score` is that confidence times its place in the answer
//! (`conf × (BASE + (1 − BASE) × fused / best fused)`): scores fall with rank, a nonsense
//! question scores near 0 everywhere, and `min_score` means the same across questions.
//!
//! **Cited spans.** The best evidence of a hit is its best-matching section (lexical, else the
//! section of its best semantic chunk, else its summary section); the span is that section's
//! heading path and its line range in the spec file: from the heading's line to the line
//! before the next section (the last section ends where its text does, estimated from the
//! text's lines).
//!
//! Invariants: confidences and scores are finite and within 0–1; a span's `start ≤ end`, both
//! 1-based lines of the spec file.

use crate::cache::{NodeRecord, Snapshot};

/// Words are compared by this many leading (folded) characters.
pub const PREFIX: usize = 5;
/// Cosine the model gives text unrelated to the question (→ semantic closeness 0). Measured
/// with multilingual-e5-small over the dev corpus: nonsense and off-topic questions ("zzzzqqqq
/// xyzzyplugh", a cake recipe, the weather) reach 0.83–0.84 at best.
pub const COS_FLOOR: f32 = 0.85;
/// Cosine of a close paraphrase (→ semantic closeness 1).
pub const COS_CEIL: f32 = 0.93;
/// The answer's confidence is the best of its first this many hits.
pub const CONF_TOP: usize = 3;
/// Share of the confidence every hit of an answer keeps whatever its rank.
pub const BASE: f32 = 0.4;
/// Default `min_score`: an answer whose confidence is below it is no match at all. Questions
/// about nothing in the corpus get a confidence of 0 (no content word found, the model's
/// cosine below [`COS_FLOOR`]) or share a word or two with it (≥ 0.19 measured: "install
/// python on windows" over a corpus that names Python); real but weakly worded questions
/// start at 0.17 (two of 60 check questions). Since a hit's score falls to `BASE` × the
/// answer's confidence at the bottom of the answer, 0.15 cut most of such answers' results:
/// 0.10 cuts none of the 120 dev and check questions' first ten and still empties answers of
/// confidence 0.
pub const DEFAULT_MIN_SCORE: f32 = 0.10;

fn stem(w: &str) -> String {
    prefix(w).to_string()
}

/// The first [`PREFIX`] characters of `w`.
fn prefix(w: &str) -> &str {
    w.char_indices().nth(PREFIX).map_or(w, |(i, _)| &w[..i])
}

/// The stems of a question's content words.
pub fn question_stems(snap: &Snapshot<'_>, text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for w in snap.query_words(text) {
        let s = stem(&w);
        if !out.contains(&s) {
            out.push(s);
        }
    }
    out
}

/// Share of `stems` the spec contains (0 when there are none).
pub fn coverage(snap: &Snapshot<'_>, rec: &NodeRecord, stems: &[String]) -> f32 {
    if stems.is_empty() {
        return 0.0;
    }
    let mut found = vec![false; stems.len()];
    let mut left = stems.len();
    // False once every stem is found: the rest of the spec cannot change the share.
    let mut look = |t: &str| {
        snap.each_query_word(t, |w| {
            let s = prefix(w);
            for (f, _) in found.iter_mut().zip(stems).filter(|(f, x)| !**f && *x == s) {
                *f = true;
                left -= 1;
            }
            left > 0
        });
        left > 0
    };
    let id = rec.node.id.replace(['-', '_', ':'], " ");
    let _ = look(&id)
        && look(&rec.node.title)
        && rec.node.aliases.iter().all(|a| look(a))
        && rec
            .sections
            .iter()
            .all(|s| look(&s.heading) && look(&s.text));
    (stems.len() - left) as f32 / stems.len() as f32
}

/// Semantic closeness of a raw cosine (0–1).
pub fn closeness(cos: f32) -> f32 {
    ((cos - COS_FLOOR) / (COS_CEIL - COS_FLOOR)).clamp(0.0, 1.0)
}

/// A hit's absolute confidence from its coverage and best raw cosine.
pub fn confidence(coverage: f32, cos: Option<f32>) -> f32 {
    coverage.max(cos.map_or(0.0, closeness)).clamp(0.0, 1.0)
}

/// The reported score of a hit: the answer's confidence times its place in the answer.
pub fn calibrated(conf: f32, fused: f32, best: f32) -> f32 {
    let rel = if best > 0.0 {
        (fused / best).clamp(0.0, 1.0)
    } else {
        0.0
    };
    (conf * (BASE + (1.0 - BASE) * rel)).clamp(0.0, 1.0)
}

/// The section whose text holds `chunk` (a semantic hit's chunk text), if any.
pub fn section_of_chunk(rec: &NodeRecord, chunk: &str) -> Option<usize> {
    let probe: String = chunk
        .split_whitespace()
        .take(8)
        .collect::<Vec<_>>()
        .join(" ");
    if probe.is_empty() {
        return None;
    }
    rec.sections.iter().position(|s| {
        let flat: String = s.text.split_whitespace().collect::<Vec<_>>().join(" ");
        !flat.is_empty() && flat.contains(&probe)
    })
}

/// Heading path (`Ancestor > Heading`) and 1-based line range of section `i`.
pub fn span(rec: &NodeRecord, i: usize) -> Option<(String, [usize; 2])> {
    let s = rec.sections.get(i)?;
    let mut path: Vec<&str> = s.ancestors.iter().map(String::as_str).collect();
    if !s.heading.is_empty() {
        path.push(&s.heading);
    }
    let start = s.line.max(1);
    // The section's recorded last line; a record without one (an agent summary) ends before
    // the next section's heading, or after its own text.
    let end = if s.end >= start {
        s.end
    } else {
        match rec.sections.iter().skip(i + 1).find(|n| n.line > start) {
            Some(next) => next.line - 1,
            None => start + s.text.lines().count(),
        }
    };
    Some((path.join(" > "), [start, end.max(start)]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closeness_is_clamped_and_monotone() {
        assert_eq!(closeness(0.1), 0.0);
        assert_eq!(closeness(0.99), 1.0);
        assert!(closeness(0.90) > closeness(0.87));
    }

    #[test]
    fn calibrated_falls_with_rank_and_stays_in_range() {
        let top = calibrated(0.8, 2.0, 2.0);
        let low = calibrated(0.8, 0.5, 2.0);
        assert!((top - 0.8).abs() < 1e-6);
        assert!(low < top && low >= 0.8 * BASE);
        assert_eq!(calibrated(0.0, 1.0, 1.0), 0.0);
        assert!(calibrated(1.0, 5.0, 1.0) <= 1.0);
    }

    #[test]
    fn stems_compare_inflections() {
        assert_eq!(stem("cancellation"), stem("cancelled"));
    }
}
