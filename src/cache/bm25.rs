//! BM25 statistics for the text index that do not depend on its history.
//!
//! Invariant: every statistic counts live documents only, so a cache updated incrementally and
//! a fresh build weigh terms and document length identically whatever their segments hold:
//! the token total of a field is the sum of the live documents' field norms (a merge
//! re-estimates tantivy's own total from quantised norms; a fresh build keeps the exact one,
//! memoised per searcher generation); the document count is the live count; a term's document
//! frequency counts its live postings in segments with deletes (tantivy's own count includes
//! deleted documents until a merge drops them), so `TextIndex::commit` need not merge after
//! every update.

use std::collections::HashMap;
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::{DocSet, Term, TERMINATED};

/// BM25 statistics independent of the index's history: a merge that drops deleted documents
/// re-estimates a segment's token total from quantised field norms while a fresh build keeps
/// the exact one, so here the total is always the sum of the live documents' field norms.
pub(super) struct LiveStats<'a> {
    pub(super) searcher: &'a tantivy::Searcher,
    pub(super) memo: &'a std::sync::Mutex<(u64, HashMap<u32, u64>)>,
}

impl tantivy::query::Bm25StatisticsProvider for LiveStats<'_> {
    fn total_num_tokens(&self, field: Field) -> tantivy::Result<u64> {
        let mut memo = self.memo.lock().unwrap_or_else(|e| e.into_inner());
        let gen = self.searcher.generation().generation_id();
        if memo.0 != gen {
            *memo = (gen, HashMap::new());
        }
        if let Some(t) = memo.1.get(&field.field_id()) {
            return Ok(*t);
        }
        let mut total = 0u64;
        for seg in self.searcher.segment_readers() {
            let norms = seg.get_fieldnorms_reader(field)?;
            for doc in seg.doc_ids_alive() {
                total += u64::from(norms.fieldnorm(doc));
            }
        }
        memo.1.insert(field.field_id(), total);
        Ok(total)
    }

    fn total_num_docs(&self) -> tantivy::Result<u64> {
        let segs = self.searcher.segment_readers();
        Ok(segs.iter().map(|s| u64::from(s.num_docs())).sum())
    }

    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        let mut n = 0u64;
        for seg in self.searcher.segment_readers() {
            let inv = seg.inverted_index(term.field())?;
            let Some(alive) = seg.alive_bitset() else {
                n += u64::from(inv.doc_freq(term)?);
                continue;
            };
            if let Some(mut p) = inv.read_postings(term, IndexRecordOption::Basic)? {
                let mut d = p.doc();
                while d != TERMINATED {
                    n += u64::from(alive.is_alive(d));
                    d = p.advance();
                }
            }
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::super::store::{NodeRecord, SectionText};
    use super::super::text::{TextFilter, TextIndex};
    use crate::spec::{Kind, Layer, Node};

    const WORDS: &[&str] = &[
        "pedido",
        "cliente",
        "precio",
        "envío",
        "factura",
        "descuento",
        "stock",
        "pago",
    ];

    fn rec(i: usize, v: usize) -> NodeRecord {
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
        let text: Vec<&str> = (0..3 + (i + v) % 5)
            .map(|k| WORDS[(i * 3 + k * (v + 1)) % WORDS.len()])
            .collect();
        NodeRecord {
            sections: vec![SectionText {
                heading: "Descripción".into(),
                key: None,
                level: 2,
                ancestors: Vec::new(),
                text: text.join(" el "),
                line: 3,
                end: 3,
            }],
            ..NodeRecord::brief(node)
        }
    }

    fn answers(t: &TextIndex) -> Vec<(String, u32)> {
        t.reload().unwrap();
        let mut out = Vec::new();
        for q in ["pedido precio", "factura", "stock pago cliente"] {
            for h in t.search(q, &TextFilter::default(), 50).unwrap() {
                out.push((h.node_id, h.score.to_bits()));
            }
        }
        out
    }

    /// Updated in place (deleted documents kept in their segment, too few to merge) or built
    /// fresh, the index scores every hit identically.
    #[test]
    fn deleted_documents_never_weigh_in() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let updated = TextIndex::create(a.path()).unwrap();
        let w = updated.writer().unwrap();
        for i in 0..40 {
            updated.add_node(&w, &rec(i, 0)).unwrap();
        }
        updated.commit(w).unwrap();
        for (n, i) in [3usize, 17].into_iter().enumerate() {
            let w = updated.writer().unwrap();
            updated.delete_node(&w, &format!("Entity:E{i}"));
            updated.add_node(&w, &rec(i, n + 1)).unwrap();
            updated.commit(w).unwrap();
        }
        let fresh = TextIndex::create(b.path()).unwrap();
        let w = fresh.writer().unwrap();
        for i in 0..40 {
            let v = [(3, 1), (17, 2)]
                .iter()
                .find(|(k, _)| *k == i)
                .map_or(0, |x| x.1);
            fresh.add_node(&w, &rec(i, v)).unwrap();
        }
        fresh.commit(w).unwrap();
        let segs = updated.segment_count();
        assert!(segs > 1, "the update was merged away ({segs} segment)");
        assert_eq!(answers(&updated), answers(&fresh));
    }
}
