//! The tantivy side of the cache: one document per node (identity: ids, title, aliases, file
//! stem) and one per section (heading path + text), analysed twice (Spanish and English
//! stemming, both folding case and accents, both dropping ES+EN stop words) so either language
//! matches. Lexical search scores each node by its identity document plus its best sections
//! (section-level BM25: a long spec is not diluted by its length). Every commit merges deleted
//! documents away, so BM25 statistics are those of the live documents only: an incrementally
//! updated index scores exactly like a fresh build.

pub use super::lang::LangTally;
use super::store::NodeRecord;
use super::Error;
use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::sync::LazyLock;
use tantivy::collector::TopDocs;
use tantivy::query::{BooleanQuery, BoostQuery, Occur, Query, TermQuery};
use tantivy::schema::{
    Field, IndexRecordOption, Schema, TextFieldIndexing, TextOptions, Value, STORED, STRING,
};
use tantivy::tokenizer::{
    AsciiFoldingFilter, Language, LowerCaser, RemoveLongFilter, SimpleTokenizer, Stemmer,
    StopWordFilter, TextAnalyzer,
};
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy, TantivyDocument, Term};

/// Weight of identity matches (ids, titles, aliases) relative to body text.
const W_IDENT: f32 = 1.5;
/// Weight of heading matches relative to body text.
const W_HEAD: f32 = 0.5;
/// Weight of the identity document in a node's lexical score.
const W_NODE_DOC: f32 = 1.0;
/// Weight of the second-best section (rewards specs matching in several places, a little).
const W_SECOND: f32 = 0.3;

/// A ranking weight that applies inside the text index (`doctr.rs`, `phrase.rs`; the others
/// live in `query/knobs.rs`): `name`'s value when it parses within `0..=hi`, else `default`.
pub(super) fn weight_knob(name: &str, default: f32, hi: f32) -> f32 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().parse::<f32>().ok())
        .filter(|w| (0.0..=hi).contains(w))
        .unwrap_or(default)
}

/// Split `RetrievalQuery` / `retrieval_query` / `UC-004` into words, keeping the original too.
pub fn expand_identifier(s: &str) -> String {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut prev: Option<char> = None;
    for c in s.chars() {
        if !c.is_alphanumeric() {
            if !cur.is_empty() {
                words.push(std::mem::take(&mut cur));
            }
            prev = None;
            continue;
        }
        if let Some(p) = prev {
            let boundary = (p.is_lowercase() && c.is_uppercase())
                || (p.is_alphabetic() && c.is_ascii_digit())
                || (p.is_ascii_digit() && c.is_alphabetic());
            if boundary && !cur.is_empty() {
                words.push(std::mem::take(&mut cur));
            }
        }
        cur.push(c);
        prev = Some(c);
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    format!("{s} {}", words.join(" "))
}

/// Each content word of `text` in order, repeats included: folded, longer than two
/// characters, not a stop word. `f` returns false to stop early.
pub fn each_query_word(text: &str, mut f: impl FnMut(&str) -> bool) {
    static STOP: LazyLock<HashSet<&str>> =
        LazyLock::new(|| super::lang::STOP_WORDS.iter().copied().collect());
    let mut a = analyzer(None, false);
    let mut ts = a.token_stream(text);
    while ts.advance() {
        let w = ts.token().text.as_str();
        if w.chars().count() > 2 && !STOP.contains(w) && !f(w) {
            return;
        }
    }
}

fn analyzer(lang: Option<Language>, stop: bool) -> TextAnalyzer {
    let b = TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(RemoveLongFilter::limit(48))
        .filter(LowerCaser);
    match (lang, stop) {
        (Some(l), true) => b
            .filter(StopWordFilter::remove(
                super::lang::STOP_WORDS.iter().map(|s| s.to_string()),
            ))
            .filter(Stemmer::new(l))
            .filter(AsciiFoldingFilter)
            .build(),
        (Some(l), false) => b.filter(Stemmer::new(l)).filter(AsciiFoldingFilter).build(),
        (None, _) => b.filter(AsciiFoldingFilter).build(),
    }
}

/// Field handles of the schema.
#[derive(Clone, Copy)]
pub struct Fields {
    pub node_id: Field,
    pub sec: Field,
    pub kind: Field,
    pub layer: Field,
    pub domain: Field,
    pub ident: Field,
    pub head_es: Field,
    pub head_en: Field,
    pub body_es: Field,
    pub body_en: Field,
    /// A spec's translation ([`super::doctr`]) into Spanish, then into English, each analysed
    /// both ways like a body (on the identity document: translations add no document, so
    /// BM25's document counts are those of the specs).
    pub tr: [[Field; 2]; 2],
}

impl Fields {
    /// The fields holding translations into `lang` (Spanish- and English-analysed).
    pub fn tr_fields(&self, lang: super::lang::Lang) -> [Field; 2] {
        match lang {
            super::lang::Lang::Es => self.tr[0],
            super::lang::Lang::En => self.tr[1],
        }
    }
}

fn text_opts(tokenizer: &str, stored: bool) -> TextOptions {
    let o = TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer(tokenizer)
            // Positions: the phrase evidence of `phrase.rs`.
            .set_index_option(IndexRecordOption::WithFreqsAndPositions),
    );
    if stored {
        o.set_stored()
    } else {
        o
    }
}

fn schema() -> (Schema, Fields) {
    let mut b = Schema::builder();
    let f = Fields {
        node_id: b.add_text_field("node_id", STRING | STORED),
        sec: b.add_u64_field("sec", STORED),
        kind: b.add_text_field("kind", STRING),
        layer: b.add_text_field("layer", STRING),
        domain: b.add_text_field("domain", STRING),
        ident: b.add_text_field("ident", text_opts("kdd_ident", false)),
        head_es: b.add_text_field("head_es", text_opts("kdd_es", false)),
        head_en: b.add_text_field("head_en", text_opts("kdd_en", false)),
        body_es: b.add_text_field("body_es", text_opts("kdd_es", false)),
        body_en: b.add_text_field("body_en", text_opts("kdd_en", false)),
        tr: [
            [
                b.add_text_field("tr_es_es", text_opts("kdd_es", false)),
                b.add_text_field("tr_es_en", text_opts("kdd_en", false)),
            ],
            [
                b.add_text_field("tr_en_es", text_opts("kdd_es", false)),
                b.add_text_field("tr_en_en", text_opts("kdd_en", false)),
            ],
        ],
    };
    (b.build(), f)
}

fn register(index: &Index) {
    let t = index.tokenizers();
    t.register("kdd_ident", analyzer(None, false));
    t.register("kdd_es", analyzer(Some(Language::Spanish), true));
    t.register("kdd_en", analyzer(Some(Language::English), true));
}

/// Section index marking a node's identity document.
pub const NODE_DOC: u64 = u64::MAX;

/// An open tantivy index.
pub struct TextIndex {
    pub index: Index,
    pub fields: Fields,
    reader: IndexReader,
    /// Token totals per field of the searcher generation they were computed for.
    pub(super) tokens: std::sync::Mutex<(u64, HashMap<u32, u64>)>,
}

/// One node's lexical score, with its best section.
#[derive(Debug, Clone)]
pub struct LexHit {
    pub node_id: String,
    pub score: f32,
    /// Index into `NodeRecord::sections` of the best-matching section.
    pub best_section: Option<usize>,
    /// True when the identity document (id/title/alias) matched.
    pub ident_match: bool,
}

/// Filters applied inside the search.
#[derive(Debug, Clone, Default)]
pub struct TextFilter {
    pub kinds: Vec<String>,
    pub layers: Vec<String>,
    pub domain: Option<String>,
    /// The question's language: the specs' translations into it ([`super::doctr`]) are
    /// searched too. `None` (unknown, or not a question): translations are not searched.
    pub question_lang: Option<super::lang::Lang>,
}

impl TextIndex {
    /// Create an empty index in `dir` (which must exist and be empty).
    pub fn create(dir: &Path) -> Result<TextIndex, Error> {
        let (schema, fields) = schema();
        let index = Index::create_in_dir(dir, schema).map_err(|e| Error::text(dir, e))?;
        Self::finish(index, fields, dir)
    }

    /// Open an existing index.
    pub fn open(dir: &Path) -> Result<TextIndex, Error> {
        let index = Index::open_in_dir(dir).map_err(|e| Error::text(dir, e))?;
        let (expected, fields) = schema();
        if index.schema() != expected {
            return Err(Error::Corrupt(format!(
                "{}: unexpected text index schema",
                dir.display()
            )));
        }
        Self::finish(index, fields, dir)
    }

    fn finish(index: Index, fields: Fields, dir: &Path) -> Result<TextIndex, Error> {
        register(&index);
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .map_err(|e| Error::text(dir, e))?;
        Ok(TextIndex {
            index,
            fields,
            reader,
            tokens: std::sync::Mutex::new((u64::MAX, HashMap::new())),
        })
    }

    /// Number of searchable segments (tests and diagnostics).
    pub fn segment_count(&self) -> usize {
        self.index.searchable_segment_metas().map_or(0, |m| m.len())
    }

    /// See the latest commit.
    pub fn reload(&self) -> Result<(), Error> {
        self.reader
            .reload()
            .map_err(|e| Error::Corrupt(format!("text index reload: {e}")))
    }

    /// A writer (one thread, modest memory, no background merges: see [`TextIndex::commit`]).
    /// A busy lock is retried for up to a second: a process being spawned by another thread
    /// holds a copy of the lock file just closed here until it execs (the writer lock of the
    /// whole cache, `gen.rs`, is what keeps two kdd processes apart).
    pub fn writer(&self) -> Result<IndexWriter<TantivyDocument>, Error> {
        let mut tries = 0;
        let w = loop {
            match self.index.writer_with_num_threads(1, 30_000_000) {
                Err(tantivy::TantivyError::LockFailure(..)) if tries < 50 => tries += 1,
                r => break r.map_err(|e| Error::Corrupt(format!("text index writer: {e}")))?,
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        w.set_merge_policy(Box::new(tantivy::indexer::NoMergePolicy));
        Ok(w)
    }

    /// Commit, then merge for speed only (BM25 counts live documents, `bm25.rs`): all segments
    /// but the largest past 8 of them; everything once a tenth of the documents are deleted.
    pub fn commit(&self, mut w: IndexWriter<TantivyDocument>) -> Result<(), Error> {
        let err = |e: tantivy::TantivyError| Error::Corrupt(format!("text index commit: {e}"));
        w.commit().map_err(err)?;
        let metas = self.index.searchable_segment_metas().map_err(err)?;
        let total: u64 = metas.iter().map(|m| u64::from(m.max_doc())).sum();
        let deleted: u64 = metas.iter().map(|m| u64::from(m.num_deleted_docs())).sum();
        let largest = metas.iter().max_by_key(|m| m.max_doc()).map(|m| m.id());
        let ids: Vec<_> = if deleted * 10 > total {
            metas.iter().map(|m| m.id()).collect()
        } else if metas.len() > 8 {
            metas
                .iter()
                .map(|m| m.id())
                .filter(|id| Some(*id) != largest)
                .collect()
        } else {
            Vec::new()
        };
        if !ids.is_empty() {
            w.merge(&ids).wait().map_err(err)?;
        }
        w.wait_merging_threads().map_err(err)
    }

    /// Remove a node's documents.
    pub fn delete_node(&self, w: &IndexWriter<TantivyDocument>, node_id: &str) {
        w.delete_term(Term::from_field_text(self.fields.node_id, node_id));
    }

    /// Add a node's identity and section documents.
    pub fn add_node(
        &self,
        w: &IndexWriter<TantivyDocument>,
        rec: &NodeRecord,
    ) -> Result<(), Error> {
        let f = &self.fields;
        let n = &rec.node;
        let base = |sec: u64| {
            let mut d = TantivyDocument::default();
            d.add_text(f.node_id, &n.id);
            d.add_u64(f.sec, sec);
            d.add_text(f.kind, n.kind.as_str());
            d.add_text(f.layer, n.layer.as_str());
            if let Some(dm) = &n.domain {
                d.add_text(f.domain, dm);
            }
            d
        };
        let mut ident = String::new();
        for s in [
            n.id.as_str(),
            n.local_id(),
            super::resolve::file_stem(&n.source_file),
        ] {
            ident.push_str(&expand_identifier(s));
            ident.push(' ');
        }
        ident.push_str(&expand_identifier(&n.title));
        for a in &n.aliases {
            ident.push(' ');
            ident.push_str(&expand_identifier(a));
        }
        let mut d = base(NODE_DOC);
        d.add_text(f.ident, &ident);
        let title_words = expand_identifier(&n.title);
        d.add_text(f.head_es, &title_words);
        d.add_text(f.head_en, &title_words);
        // The whole file as one body too: long questions match different aspects in
        // different sections, which only a file-level score sees.
        let all: String = rec
            .sections
            .iter()
            .map(|s| format!("{}\n{}\n", s.heading, s.text))
            .collect();
        d.add_text(f.body_es, &all);
        d.add_text(f.body_en, &all);
        if let Some((lang, t)) = &rec.translation {
            for field in f.tr_fields(*lang) {
                d.add_text(field, t);
            }
        }
        w.add_document(d)
            .map_err(|e| Error::Corrupt(format!("text index add: {e}")))?;
        for (i, s) in rec.sections.iter().enumerate() {
            if s.text.trim().is_empty() && s.heading.trim().is_empty() {
                continue;
            }
            let mut d = base(i as u64);
            let mut head = s.ancestors.join(" ");
            head.push(' ');
            head.push_str(&s.heading);
            d.add_text(f.head_es, &head);
            d.add_text(f.head_en, &head);
            d.add_text(f.body_es, &s.text);
            d.add_text(f.body_en, &s.text);
            w.add_document(d)
                .map_err(|e| Error::Corrupt(format!("text index add: {e}")))?;
        }
        Ok(())
    }

    /// The analysed terms of `text` for `field`, each once, in order.
    pub(super) fn terms(&self, field: Field, text: &str) -> Vec<Term> {
        let mut out: Vec<Term> = Vec::new();
        for t in super::phrase::term_seq(&self.index, field, text) {
            if !out.contains(&t) {
                out.push(t);
            }
        }
        out
    }

    /// The current searcher (one per read: every lookup of it sees the same segments).
    pub(super) fn searcher(&self) -> tantivy::Searcher {
        self.reader.searcher()
    }

    /// Query terms of the analysed text, per field, for snippets and explanations.
    pub fn query_words(&self, text: &str) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        each_query_word(text, |w| {
            if !out.iter().any(|o| o == w) {
                out.push(w.to_string());
            }
            true
        });
        out
    }

    /// Field-weighted BM25 over identity and section documents, aggregated per node (a panic
    /// inside tantivy is damage: [`unpanicked`]).
    pub fn search(
        &self,
        text: &str,
        filter: &TextFilter,
        limit: usize,
    ) -> Result<Vec<LexHit>, Error> {
        unpanicked(|| self.search_inner(text, filter, limit))
    }

    /// `query` restricted to the filter's kinds, layers and domain.
    fn filtered(&self, mut query: Box<dyn Query>, filter: &TextFilter) -> Box<dyn Query> {
        let f = &self.fields;
        let mut must: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        for (field, values) in [(f.kind, &filter.kinds), (f.layer, &filter.layers)] {
            if !values.is_empty() {
                let any: Vec<(Occur, Box<dyn Query>)> = values
                    .iter()
                    .map(|v| {
                        let q: Box<dyn Query> = Box::new(TermQuery::new(
                            Term::from_field_text(field, v),
                            IndexRecordOption::Basic,
                        ));
                        (Occur::Should, q)
                    })
                    .collect();
                must.push((Occur::Must, Box::new(BooleanQuery::new(any))));
            }
        }
        if let Some(d) = &filter.domain {
            must.push((
                Occur::Must,
                Box::new(TermQuery::new(
                    Term::from_field_text(f.domain, d),
                    IndexRecordOption::Basic,
                )),
            ));
        }
        if !must.is_empty() {
            must.push((Occur::Must, query));
            query = Box::new(BooleanQuery::new(must));
        }
        query
    }

    fn search_inner(
        &self,
        text: &str,
        filter: &TextFilter,
        limit: usize,
    ) -> Result<Vec<LexHit>, Error> {
        let f = &self.fields;
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        let ident_text = expand_identifier(text);
        for (field, w, src) in [
            (f.ident, W_IDENT, ident_text.as_str()),
            (f.head_es, W_HEAD, text),
            (f.head_en, W_HEAD, text),
            (f.body_es, 1.0, text),
            (f.body_en, 1.0, text),
        ] {
            for t in self.terms(field, src) {
                let q: Box<dyn Query> = Box::new(TermQuery::new(t, IndexRecordOption::WithFreqs));
                clauses.push((Occur::Should, Box::new(BoostQuery::new(q, w))));
            }
        }
        let pairs = super::phrase::pairs(self, text, W_HEAD);
        // A question meets the translations into its own language only: a spec in its
        // language has none, so same-language questions rank as without translations.
        let tr_fields = filter.question_lang.map(|l| f.tr_fields(l));
        for field in tr_fields.iter().flatten().copied() {
            for t in self.terms(field, text) {
                let q: Box<dyn Query> = Box::new(TermQuery::new(t, IndexRecordOption::WithFreqs));
                clauses.push((
                    Occur::Should,
                    Box::new(BoostQuery::new(q, super::doctr::weight())),
                ));
            }
        }
        if clauses.is_empty() {
            return Ok(Vec::new());
        }
        let query = self.filtered(Box::new(BooleanQuery::new(clauses)), filter);
        let searcher = self.reader.searcher();
        let stats = super::bm25::LiveStats {
            searcher: &searcher,
            memo: &self.tokens,
        };
        let keep = limit.max(1) * 8;
        let top = TopDocs::with_limit(keep * super::phrase::OVERFETCH).order_by_score();
        let top = searcher
            .search_with_statistics_provider(&query, &top, &stats)
            .and_then(|mut top| {
                super::phrase::rescore(&searcher, &stats, &pairs, &mut top, keep).map(|_| top)
            })
            .map_err(|e| Error::Corrupt(format!("text search: {e}")))?;

        struct Acc {
            node: f32,
            secs: Vec<(f32, usize)>,
        }
        let mut acc: HashMap<String, Acc> = HashMap::new();
        let mut order: Vec<String> = Vec::new();
        for (score, addr) in top {
            let doc: TantivyDocument = searcher
                .doc(addr)
                .map_err(|e| Error::Corrupt(format!("text doc: {e}")))?;
            let Some(id) = doc.get_first(f.node_id).and_then(|v| v.as_str()) else {
                continue;
            };
            let sec = doc.get_first(f.sec).and_then(|v| v.as_u64()).unwrap_or(0);
            let e = acc.entry(id.to_string()).or_insert_with(|| {
                order.push(id.to_string());
                Acc {
                    node: 0.0,
                    secs: Vec::new(),
                }
            });
            if sec == NODE_DOC {
                e.node = e.node.max(score);
            } else {
                e.secs.push((score, sec as usize));
            }
        }
        let mut hits: Vec<LexHit> = order
            .into_iter()
            .map(|id| {
                let a = &acc[&id];
                let mut secs = a.secs.clone();
                secs.sort_by(|x, y| y.0.total_cmp(&x.0).then(x.1.cmp(&y.1)));
                let best = secs.first().map(|s| s.0).unwrap_or(0.0);
                let second = secs.get(1).map(|s| s.0).unwrap_or(0.0);
                LexHit {
                    score: W_NODE_DOC * a.node + 1.0 * best + W_SECOND * second,
                    best_section: secs.first().map(|s| s.1),
                    ident_match: a.node > 0.0,
                    node_id: id,
                }
            })
            .collect();
        hits.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.node_id.cmp(&b.node_id)));
        hits.truncate(limit);
        Ok(hits)
    }
}

/// Run a read of the text index, reporting a panic inside tantivy (it trusts its files:
/// garbage postings or a garbage doc store panic) as damage, so the cache heals instead of the
/// process dying.
pub(super) fn unpanicked<T>(read: impl FnOnce() -> Result<T, Error>) -> Result<T, Error> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(read)).unwrap_or_else(|_| {
        Err(Error::Corrupt(
            "text index panicked on damaged files".into(),
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_split() {
        assert_eq!(
            expand_identifier("RetrievalQuery"),
            "RetrievalQuery Retrieval Query"
        );
        assert!(expand_identifier("UC-004-RetrieveContext").contains("UC 004 Retrieve Context"));
    }

    #[test]
    fn analyzers_fold_and_stem() {
        let mut a = analyzer(Some(Language::Spanish), true);
        let mut ts = a.token_stream("Las Devoluciones del pedido");
        let mut v = Vec::new();
        while ts.advance() {
            v.push(ts.token().text.clone());
        }
        assert_eq!(v, vec!["devolu", "ped"]);
    }
}
