//! The language of a text, told by its function words: a cheap, dependency-free signal for a
//! spec (its record's tally), the corpus (the sum over specs), a question, and which way a
//! spec's translation for the lexical index goes ([`super::doctr`]).
//!
//! [`Lang`] names the two languages of KDD corpora.
//!
//! Invariants: the marker lists are sorted, lowercase, accent-free and disjoint; words longer
//! than eight bytes are never markers.

use serde::{Deserialize, Serialize};

/// The two languages of KDD corpora.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lang {
    Es,
    En,
}

impl Lang {
    /// ISO 639-3 code, as Apertium names its pairs.
    pub fn code(self) -> &'static str {
        match self {
            Lang::Es => "spa",
            Lang::En => "eng",
        }
    }

    /// Name for messages.
    pub fn name(self) -> &'static str {
        match self {
            Lang::Es => "Spanish",
            Lang::En => "English",
        }
    }
}

/// Function words that mark Spanish text (none of them an English word).
const ES_MARKERS: &[&str] = &[
    "al", "cada", "como", "con", "cual", "cuando", "de", "del", "desde", "donde", "el", "ella",
    "en", "entre", "es", "esta", "este", "esto", "hay", "la", "las", "los", "mas", "para", "pero",
    "por", "porque", "que", "se", "ser", "si", "sin", "sobre", "son", "su", "sus", "tambien", "un",
    "una", "unos", "y", "ya",
];
/// Function words that mark English text (none of them a Spanish word).
const EN_MARKERS: &[&str] = &[
    "and", "are", "be", "been", "by", "can", "does", "for", "from", "has", "have", "how", "if",
    "in", "into", "is", "it", "its", "of", "on", "or", "should", "than", "that", "the", "their",
    "them", "then", "there", "they", "this", "to", "was", "we", "what", "when", "where", "which",
    "who", "why", "will", "with", "would", "you", "your",
];

/// Stop words of both corpus languages (questions in natural language otherwise drown BM25).
pub(super) const STOP_WORDS: &[&str] = &[
    // Spanish
    "a", "al", "algo", "algun", "alguna", "algunas", "alguno", "algunos", "ante", "antes", "asi",
    "aun", "cada", "como", "con", "contra", "cual", "cuales", "cuando", "cuanto", "de", "del",
    "desde", "donde", "dos", "e", "el", "ella", "ellas", "ellos", "en", "entre", "era", "es",
    "esa", "esas", "ese", "eso", "esos", "esta", "estan", "estar", "estas", "este", "esto",
    "estos", "fue", "ha", "han", "hasta", "hay", "la", "las", "le", "les", "lo", "los", "mas",
    "me", "mi", "mis", "mucho", "muy", "ni", "no", "nos", "o", "otra", "otro", "para", "pero",
    "poco", "por", "porque", "puede", "que", "quien", "se", "sea", "ser", "si", "sin", "sobre",
    "solo", "son", "su", "sus", "tambien", "te", "tiene", "todo", "todos", "tu", "un", "una",
    "unas", "uno", "unos", "y", "ya", "yo", "qué", "cómo", "cuál", "cuándo", "dónde", "más", "sí",
    "también", "está", "están", "qu", "hacer", "hace", "debe", "deben", "va", "voy",
    // English
    "about", "after", "all", "also", "am", "an", "and", "any", "are", "as", "at", "be", "been",
    "before", "being", "both", "but", "by", "can", "could", "did", "do", "does", "doing", "for",
    "from", "get", "got", "had", "has", "have", "how", "i", "if", "in", "into", "is", "it", "its",
    "just", "may", "might", "must", "my", "of", "on", "once", "only", "or", "other", "our", "out",
    "over", "own", "same", "should", "so", "some", "such", "than", "that", "the", "their", "them",
    "then", "there", "these", "they", "this", "those", "through", "to", "too", "under", "up", "us",
    "very", "was", "we", "were", "what", "when", "where", "which", "while", "who", "whom", "why",
    "will", "with", "would", "you", "your", "i", "me", "do", "does", "happen", "happens", "work",
    "out",
];

/// Counts of Spanish and English function words in a text: a cheap, dependency-free language
/// signal for the corpus (summed over specs) and for queries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LangTally {
    pub es: u32,
    pub en: u32,
}

impl LangTally {
    /// Tally the function words of `text` (case- and accent-insensitive).
    pub fn of(text: &str) -> LangTally {
        let mut t = LangTally::default();
        for w in text.split(|c: char| !c.is_alphanumeric()) {
            if w.is_empty() || w.len() > 8 {
                continue;
            }
            let w = crate::parse::fold(w);
            if ES_MARKERS.binary_search(&w.as_str()).is_ok() {
                t.es += 1;
            } else if EN_MARKERS.binary_search(&w.as_str()).is_ok() {
                t.en += 1;
            }
        }
        t
    }

    /// Add another tally.
    pub fn add(&mut self, o: LangTally) {
        self.es += o.es;
        self.en += o.en;
    }

    /// The language at least `share` of the function words are in, if one is.
    pub fn clearly(self, share: f32) -> Option<Lang> {
        let total = (self.es + self.en) as f32;
        if total < 1.0 {
            None
        } else if self.es as f32 / total >= share {
            Some(Lang::Es)
        } else if self.en as f32 / total >= share {
            Some(Lang::En)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marker_lists_are_sorted_and_disjoint() {
        for l in [ES_MARKERS, EN_MARKERS] {
            assert!(l.windows(2).all(|w| w[0] < w[1]), "{l:?}");
        }
        assert!(ES_MARKERS.iter().all(|w| !EN_MARKERS.contains(w)));
    }

    #[test]
    fn tallies_tell_spanish_from_english() {
        let es = LangTally::of("¿Qué pasa cuando se borra el fichero de una especificación?");
        assert!(es.es >= 4 && es.en == 0, "{es:?}");
        let en = LangTally::of("What happens to the vectors when the file is removed?");
        assert!(en.en >= 4 && en.es == 0, "{en:?}");
        assert_eq!(LangTally::of("UC-004 source_hash"), LangTally::default());
    }
}
