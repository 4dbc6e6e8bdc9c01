//! Which language a few keywords are in, told by the corpus's own vocabulary.
//!
//! Function words tell the language of a sentence ([`super::lang`]), not of keywords: "late
//! cancellation penalty" has none. Over a corpus with spec translations ([`super::doctr`]),
//! the corpus holds its vocabulary twice, as written and translated into the other language,
//! so a keyword's language shows in which of the two holds it: a word only the translation
//! holds is a word of the other language the corpus uses in its own words.
//!
//! Invariants: words both renderings hold (identifiers, names, loanwords) and words neither
//! holds say nothing; without translations (none made, or skipped for a large corpus) every
//! word the corpus holds is its own, so no text is ever read as the other language.

use super::lang::Lang;
use super::text::TextIndex;
use super::Error;
use tantivy::schema::Field;

/// How many distinct content words of a text only the corpus as written holds, and only its
/// translation into the other language.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WordsFound {
    pub own_only: usize,
    pub translation_only: usize,
}

impl TextIndex {
    /// Count `text`'s content words over a corpus written in `corpus`: each analysed as that
    /// language's body text (every spec's headings and sections: what a translation renders),
    /// then as the translations into the other language are.
    /// A panic inside tantivy (garbage postings) is reported as damage, as in `search`.
    pub fn words_found(&self, text: &str, corpus: Lang) -> Result<WordsFound, Error> {
        super::text::unpanicked(|| self.count_words(text, corpus))
    }

    fn count_words(&self, text: &str, corpus: Lang) -> Result<WordsFound, Error> {
        let f = &self.fields;
        let (own, other) = match corpus {
            Lang::Es => (f.body_es, Lang::En),
            Lang::En => (f.body_en, Lang::Es),
        };
        // The translation's fields are analysed both ways; its own language's analysis.
        let tr = f.tr_fields(other)[usize::from(other == Lang::En)];
        let mut words: Vec<String> = Vec::new();
        super::text::each_query_word(text, |w| {
            if !words.iter().any(|x| x == w) {
                words.push(w.to_string());
            }
            words.len() < 32
        });
        let searcher = self.searcher();
        let mut found = WordsFound::default();
        for w in &words {
            let in_own = self.holds(&searcher, own, w)?;
            let in_tr = self.holds(&searcher, tr, w)?;
            match (in_own, in_tr) {
                (true, false) => found.own_only += 1,
                (false, true) => found.translation_only += 1,
                _ => {}
            }
        }
        Ok(found)
    }

    /// Whether some live document of `searcher` holds a term of `word` as `field` analyses it
    /// (live counts: an incrementally updated cache answers like a fresh build).
    fn holds(&self, searcher: &tantivy::Searcher, field: Field, word: &str) -> Result<bool, Error> {
        use tantivy::query::Bm25StatisticsProvider;
        let stats = super::bm25::LiveStats {
            searcher,
            memo: &self.tokens,
        };
        for t in self.terms(field, word) {
            let n = stats.doc_freq(&t);
            if n.map_err(|e| Error::Corrupt(format!("text index: {e}")))? > 0 {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::super::store::{NodeRecord, SectionText};
    use super::*;
    use crate::spec::{Kind, Layer, Node};

    fn rec(id: &str, text: &str, translation: Option<(Lang, &str)>) -> NodeRecord {
        let node = Node {
            id: format!("BR:{id}"),
            kind: Kind::BusinessRule,
            source_file: format!("specs/01-domain/rules/{id}.md"),
            source_hash: String::new(),
            title: id.into(),
            status: None,
            aliases: Vec::new(),
            domain: None,
            layer: Layer::Domain,
        };
        NodeRecord {
            sections: vec![SectionText {
                heading: "Declaración".into(),
                key: None,
                level: 2,
                ancestors: Vec::new(),
                text: text.into(),
                line: 3,
                end: 3,
            }],
            translation: translation.map(|(l, t)| (l, t.to_string())),
            ..NodeRecord::brief(node)
        }
    }

    fn index(dir: &std::path::Path, translated: bool) -> TextIndex {
        let t = TextIndex::create(dir).unwrap();
        let w = t.writer().unwrap();
        let specs = [
            (
                "BR-001",
                "Una cancelación tardía de la reserva cobra una penalización del depósito.",
                "A late cancellation of the booking charges a penalty of the deposit.",
            ),
            (
                "BR-002",
                "El stock reservado vuelve al inventario cuando caduca el carrito.",
                "The reserved stock returns to the inventory when the cart expires.",
            ),
        ];
        for (id, es, en) in specs {
            let tr = translated.then_some((Lang::En, en));
            t.add_node(&w, &rec(id, es, tr)).unwrap();
        }
        t.commit(w).unwrap();
        t.reload().unwrap();
        t
    }

    #[test]
    fn keywords_only_the_translation_holds_are_the_other_language() {
        let dir = tempfile::tempdir().unwrap();
        let t = index(dir.path(), true);
        let en = t
            .words_found("late cancellation penalty", Lang::Es)
            .unwrap();
        assert_eq!(en.own_only, 0);
        assert!(en.translation_only >= 2, "{en:?}");
        let es = t
            .words_found("cancelacion tardia deposito", Lang::Es)
            .unwrap();
        assert_eq!(es.translation_only, 0, "{es:?}");
        assert!(es.own_only >= 2, "{es:?}");
        // Words neither rendering holds, or both hold, say nothing.
        let none = t.words_found("zzzq xyzzy BR-001", Lang::Es).unwrap();
        assert_eq!((none.own_only, none.translation_only), (0, 0), "{none:?}");
    }

    #[test]
    fn without_translations_no_word_is_the_other_language() {
        let dir = tempfile::tempdir().unwrap();
        let t = index(dir.path(), false);
        let f = t
            .words_found("late cancellation penalty", Lang::Es)
            .unwrap();
        assert_eq!(f.translation_only, 0, "{f:?}");
    }
}
