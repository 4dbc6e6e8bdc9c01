//! BM25 statistics for the text index that do not depend on its history.
//!
//! Invariant: the token total of a field is the sum of the live documents' field norms, so a
//! cache updated incrementally (segments merged after deletes, where tantivy re-estimates the
//! total from quantised norms) and a fresh build (where tantivy stores the exact total) weigh
//! document length identically; document counts and frequencies are tantivy's own (exact once
//! deleted documents are merged away, see `TextIndex::commit`). Memoised per searcher generation.

use std::collections::HashMap;
use tantivy::schema::Field;
use tantivy::Term;

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
        tantivy::query::Bm25StatisticsProvider::total_num_docs(self.searcher)
    }

    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        self.searcher.doc_freq(term)
    }
}
