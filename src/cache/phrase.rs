//! Phrase evidence for BM25 (issue 13, fourteenth round): a section that holds the question's
//! words *together* outranks one that holds them apart. Each distinct pair of adjacent analysed
//! words of the question, per heading and body field, scores like a tantivy phrase query with a
//! little slop, weighted like that field's words times [`weight`] (a sequential-dependence term
//! in the sense of Metzler & Croft, 2005). Needs positions in those fields (`text.rs` indexes
//! them). The pairs are scored after the words' own search, on the documents it found
//! ([`rescore`], sixteenth round, for speed): the same scores as phrase clauses inside the query.
//!
//! Invariants: with weight 0 there are no pairs and the ranking is exactly the words' BM25;
//! a pair of equal words, or one already taken for a field, adds nothing; a document that holds
//! a pair holds both its words, so the words' search finds every document a pair can score.

use super::text::TextIndex;
use std::collections::HashSet;
use tantivy::fieldnorm::FieldNormReader;
use tantivy::postings::{Postings, SegmentPostings};
use tantivy::query::{Bm25StatisticsProvider, Bm25Weight};
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::{DocAddress, DocId, DocSet, HasLen, Index, Term};

/// Positions a phrase match may stretch: room for the stop words the analysers drop on either
/// side (`carpeta de artefactos` / `carpeta de los artefactos`). Chosen before measuring; at
/// weight 0.45, slop 1 / 2 / 4 gave dev 0.791 / 0.796 / 0.800 and check 0.806 / 0.807 / 0.803,
/// so it is not what the gain hangs on.
const SLOP: u32 = 2;

/// The words' own query collects this many times the documents the search keeps, so that a
/// document lifted into the kept ones by its phrase evidence is among those rescored. At 2 the
/// top 10 of every question of the three evaluation sets and of 16 questions over the 10k-spec
/// synthetic corpus equal those of phrase clauses inside the query; at 1 one of the 16 differs.
pub(super) const OVERFETCH: usize = 2;

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

/// The question's phrase clauses: each distinct pair of adjacent analysed words per heading and
/// body field, with its boost (the field's weight × [`weight`]).
pub(super) struct Pairs(Vec<([Term; 2], f32)>);

/// The phrase clauses of `text`: headings weighted `w_head`, bodies 1; none at weight 0.
pub(super) fn pairs(idx: &TextIndex, text: &str, w_head: f32) -> Pairs {
    let w = weight();
    let mut out = Vec::new();
    if w <= 0.0 {
        return Pairs(out);
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
            out.push(([pair[0].clone(), pair[1].clone()], fw * w));
        }
    }
    Pairs(out)
}

/// Add each phrase clause's BM25 to the documents of `top` (found by the words' own query, so
/// every document that holds a pair is a candidate), then order `top` by score (ties by
/// address) and keep `keep`. The score is tantivy's phrase score, computed here only for these
/// documents: a phrase query as a clause of the search walked every document holding both words
/// of a frequent pair and kept the words' query off its block-max pruning.
pub(super) fn rescore(
    searcher: &tantivy::Searcher,
    stats: &dyn Bm25StatisticsProvider,
    pairs: &Pairs,
    top: &mut Vec<(f32, DocAddress)>,
    keep: usize,
) -> tantivy::Result<()> {
    if !pairs.0.is_empty() && !top.is_empty() {
        let mut by_doc: Vec<usize> = (0..top.len()).collect();
        by_doc.sort_by_key(|&i| top[i].1);
        let (mut left, mut right) = (Vec::new(), Vec::new());
        for (terms, boost) in &pairs.0 {
            let bm25 = Bm25Weight::for_terms(stats, terms)?.boost_by(*boost);
            let mut seg_ord = u32::MAX;
            let mut postings = None;
            for &i in &by_doc {
                let addr = top[i].1;
                if addr.segment_ord != seg_ord {
                    seg_ord = addr.segment_ord;
                    postings = segment_postings(searcher.segment_reader(seg_ord), terms)?;
                }
                let Some((p1, p2, norms)) = postings.as_mut() else {
                    continue;
                };
                if !at(p1, addr.doc_id) || !at(p2, addr.doc_id) {
                    continue;
                }
                // As tantivy's phrase scorer: the first word's positions shifted by one, so a
                // match is the second word within SLOP of the first's next position; the word
                // with fewer documents in the segment leads the count.
                p1.positions_with_offset(1, &mut left);
                p2.positions(&mut right);
                let n = if p2.len() < p1.len() {
                    matches_within(&right, &left, SLOP)
                } else {
                    matches_within(&left, &right, SLOP)
                };
                if n > 0 {
                    top[i].0 += bm25.score(norms.fieldnorm_id(addr.doc_id), n);
                }
            }
        }
    }
    top.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
    top.truncate(keep);
    Ok(())
}

type PairPostings = (SegmentPostings, SegmentPostings, FieldNormReader);

/// Both words' postings (with positions) in one segment and the field's norms; `None` when the
/// segment lacks either word.
fn segment_postings(
    seg: &tantivy::SegmentReader,
    terms: &[Term; 2],
) -> tantivy::Result<Option<PairPostings>> {
    let inv = seg.inverted_index(terms[0].field())?;
    let opt = IndexRecordOption::WithFreqsAndPositions;
    let (Some(a), Some(b)) = (
        inv.read_postings(&terms[0], opt)?,
        inv.read_postings(&terms[1], opt)?,
    ) else {
        return Ok(None);
    };
    Ok(Some((a, b, seg.get_fieldnorms_reader(terms[0].field())?)))
}

/// Move `p` forward to `doc` (documents are visited in increasing order) and say whether it
/// holds it.
fn at(p: &mut SegmentPostings, doc: DocId) -> bool {
    if p.doc() < doc {
        p.seek(doc);
    }
    p.doc() == doc
}

/// How many pairs of positions, one from each sorted list, lie within `slop` of each other,
/// each position used once and a left position passed over when the next one is nearer the
/// right one (the count tantivy's two-word phrase scorer gives with slop).
fn matches_within(left: &[u32], right: &[u32], slop: u32) -> u32 {
    let (mut i, mut j, mut n) = (0, 0, 0);
    while i < left.len() && j < right.len() {
        let (l, r) = (left[i], right[j]);
        if l.abs_diff(r) <= slop {
            while i + 1 < left.len() && left[i + 1] <= r {
                i += 1;
            }
            n += 1;
            i += 1;
            j += 1;
        } else if l < r {
            i += 1;
        } else {
            j += 1;
        }
    }
    n
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

#[cfg(test)]
mod tests {
    use super::super::bm25::LiveStats;
    use super::super::store::{NodeRecord, SectionText};
    use super::super::text::TextIndex;
    use super::*;
    use crate::spec::{Kind, Layer, Node};
    use tantivy::collector::TopDocs;
    use tantivy::query::{BooleanQuery, BoostQuery, Occur, PhraseQuery, Query};

    /// Sections whose words sit together, apart, reversed and repeated.
    const TEXTS: &[&str] = &[
        "el pedido confirmado se factura",
        "pedido pedido confirmado confirmado",
        "confirmado el pedido",
        "el pedido del cliente fue confirmado ayer",
        "pedido uno dos tres cuatro confirmado",
        "factura del pedido confirmado y factura pagada",
        "cliente sin pedido",
    ];

    fn rec(i: usize) -> NodeRecord {
        let node = Node {
            id: format!("Entity:E{i}"),
            kind: Kind::Entity,
            source_file: format!("specs/01-domain/entities/E{i}.md"),
            source_hash: String::new(),
            title: format!("E{i}"),
            status: None,
            aliases: Vec::new(),
            domain: None,
            layer: Layer::Domain,
        };
        let text = TEXTS[i % TEXTS.len()];
        NodeRecord {
            sections: vec![SectionText {
                heading: text.into(),
                key: None,
                level: 2,
                ancestors: Vec::new(),
                text: format!("{text}. {}", TEXTS[(i * 3 + 1) % TEXTS.len()]),
                line: 3,
                end: 3,
            }],
            ..NodeRecord::brief(node)
        }
    }

    /// Every document's phrase score from tantivy's own phrase queries, as the search once
    /// added them.
    fn tantivy_scores(idx: &TextIndex, pairs: &Pairs) -> Vec<(f32, DocAddress)> {
        let clauses: Vec<(Occur, Box<dyn Query>)> = pairs
            .0
            .iter()
            .map(|(terms, boost)| {
                let mut q = PhraseQuery::new(terms.to_vec());
                q.set_slop(SLOP);
                let q: Box<dyn Query> = Box::new(BoostQuery::new(Box::new(q), *boost));
                (Occur::Should, q)
            })
            .collect();
        let searcher = idx.searcher();
        let stats = LiveStats {
            searcher: &searcher,
            memo: &idx.tokens,
        };
        let mut top = searcher
            .search_with_statistics_provider(
                &BooleanQuery::new(clauses),
                &TopDocs::with_limit(1000).order_by_score(),
                &stats,
            )
            .unwrap();
        top.sort_by_key(|t| t.1);
        top
    }

    /// Rescored from zero, every document gets exactly the score tantivy's phrase queries give
    /// it, across segments.
    #[test]
    fn rescoring_gives_the_phrase_queries_scores() {
        let dir = tempfile::tempdir().unwrap();
        let idx = TextIndex::create(dir.path()).unwrap();
        for part in [0..20, 20..35] {
            let w = idx.writer().unwrap();
            for i in part {
                idx.add_node(&w, &rec(i)).unwrap();
            }
            idx.commit(w).unwrap();
        }
        idx.reload().unwrap();
        let searcher = idx.searcher();
        assert!(searcher.segment_readers().len() > 1);
        for q in [
            "pedido confirmado",
            "factura del pedido confirmado",
            "confirmado pedido",
        ] {
            let pairs = pairs(&idx, q, 0.5);
            assert!(!pairs.0.is_empty());
            let want = tantivy_scores(&idx, &pairs);
            let mut got: Vec<(f32, DocAddress)> = Vec::new();
            for (ord, seg) in searcher.segment_readers().iter().enumerate() {
                for doc in seg.doc_ids_alive() {
                    got.push((0.0, DocAddress::new(ord as u32, doc)));
                }
            }
            let stats = LiveStats {
                searcher: &searcher,
                memo: &idx.tokens,
            };
            rescore(&searcher, &stats, &pairs, &mut got, usize::MAX).unwrap();
            got.retain(|g| g.0 > 0.0);
            got.sort_by_key(|t| t.1);
            assert_eq!(got.len(), want.len(), "{q}");
            for (g, w) in got.iter().zip(&want) {
                assert_eq!(g.1, w.1, "{q}");
                assert!((g.0 - w.0).abs() <= 1e-5 * w.0, "{q}: {} vs {}", g.0, w.0);
            }
        }
    }

    #[test]
    fn positions_match_within_the_slop_once_each() {
        assert_eq!(matches_within(&[2, 9], &[3, 10, 30], 2), 2);
        assert_eq!(matches_within(&[2, 9], &[3, 4, 30], 2), 1);
        assert_eq!(matches_within(&[2, 3, 4], &[4], 0), 1);
        assert_eq!(matches_within(&[], &[1], 2), 0);
        assert_eq!(matches_within(&[10], &[1], 2), 0);
    }
}
