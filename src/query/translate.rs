//! Cross-lingual queries: a question asked in one language over specs written in the other is
//! also searched in the specs' language.
//!
//! KDD corpora are often Spanish while the agents that query them ask in English (and the
//! other way round). The small multilingual model aligns the two languages only loosely, and
//! BM25 not at all, so a query whose language differs from the corpus's is machine-translated
//! (Apertium, a rule-based offline translator from Debian's packages) and the search runs on
//! the original text followed by its translation: identifiers and English technical terms keep
//! matching, and the Spanish words now match too.
//!
//! - Languages are told apart by function words ([`LangTally`]): the corpus's tally is summed
//!   over every spec when the cache is built; a query is translated only when it is clearly in
//!   one language and the corpus is clearly ([`CORPUS_SHARE`]) in the other. Same-language
//!   queries, mixed corpora and keyword queries without function words are left alone.
//! - The translator is a program reading the text on stdin and writing the translation on
//!   stdout: `apertium -u eng-spa|spa-eng` by default, `KDD_TRANSLATOR=<program>` (called as
//!   `<program> eng-spa`) to use another one, `KDD_TRANSLATE=off` to never translate. It runs
//!   under a deadline ([`DEADLINE`]); answers are memoised per process (the servers ask again).
//! - When a translation is needed but cannot be made the query still runs, with a
//!   `NO_TRANSLATION` warning that says what to install; a translated query carries a
//!   `QUERY_TRANSLATED` warning quoting the translation, so every answer explains itself.

use crate::cache::LangTally;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Environment switch: `KDD_TRANSLATE=off` (or `0`) never translates.
pub const ENV_TRANSLATE: &str = crate::config::env::TRANSLATE;
/// Environment override of the translator program.
pub const ENV_TRANSLATOR: &str = crate::config::env::TRANSLATOR;
/// A corpus is "in" a language when at least this share of its function words are.
pub const CORPUS_SHARE: f32 = 0.6;
/// Longest a translator may take.
pub const DEADLINE: Duration = Duration::from_secs(5);
/// Memoised translations kept per process.
const MEMO_CAP: usize = 256;

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

/// The language a query is written in, when its function words say so clearly.
pub fn query_lang(t: LangTally) -> Option<Lang> {
    match t.en.cmp(&t.es) {
        std::cmp::Ordering::Greater => Some(Lang::En),
        std::cmp::Ordering::Less => Some(Lang::Es),
        std::cmp::Ordering::Equal => None,
    }
}

/// The language a corpus is written in, when at least [`CORPUS_SHARE`] of it is.
pub fn corpus_lang(t: LangTally) -> Option<Lang> {
    let total = (t.es + t.en) as f32;
    if total < 1.0 {
        None
    } else if t.es as f32 / total >= CORPUS_SHARE {
        Some(Lang::Es)
    } else if t.en as f32 / total >= CORPUS_SHARE {
        Some(Lang::En)
    } else {
        None
    }
}

/// Which translation a query needs over a corpus: `(from, to)`, or none.
pub fn needed(query: &str, corpus: LangTally) -> Option<(Lang, Lang)> {
    let q = query_lang(LangTally::of(query))?;
    let c = corpus_lang(corpus)?;
    (q != c).then_some((q, c))
}

/// Why a translation could not be made.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("`{program}` is not installed (install the Debian packages apertium and apertium-eng-spa, as ./install.sh does, or set KDD_TRANSLATOR)")]
    NotInstalled { program: String },
    #[error("`{program} {pair}` failed: {detail}")]
    Failed {
        program: String,
        pair: String,
        detail: String,
    },
    #[error("`{program} {pair}` took longer than {secs} s")]
    Timeout {
        program: String,
        pair: String,
        secs: u64,
    },
}

/// True unless `KDD_TRANSLATE` is `off`/`0`/`false`/`no`.
pub fn enabled() -> bool {
    !matches!(
        std::env::var(ENV_TRANSLATE)
            .unwrap_or_default()
            .to_ascii_lowercase()
            .as_str(),
        "off" | "0" | "false" | "no"
    )
}

/// The translator command for a language pair: program and arguments.
fn command(pair: &str) -> (String, Vec<String>) {
    match std::env::var(ENV_TRANSLATOR) {
        Ok(p) if !p.trim().is_empty() => (p, vec![pair.to_string()]),
        _ => (
            "apertium".to_string(),
            vec!["-u".to_string(), pair.to_string()],
        ),
    }
}

fn memo() -> &'static Mutex<HashMap<(String, String), String>> {
    static M: OnceLock<Mutex<HashMap<(String, String), String>>> = OnceLock::new();
    M.get_or_init(|| Mutex::new(HashMap::new()))
}

/// Translate `text` from one language to the other (memoised per process).
pub fn translate(text: &str, from: Lang, to: Lang) -> Result<String, Error> {
    let pair = format!("{}-{}", from.code(), to.code());
    let key = (pair.clone(), text.to_string());
    if let Some(t) = memo().lock().ok().and_then(|m| m.get(&key).cloned()) {
        return Ok(t);
    }
    let out = run(&pair, text)?;
    if let Ok(mut m) = memo().lock() {
        if m.len() >= MEMO_CAP {
            m.clear();
        }
        m.insert(key, out.clone());
    }
    Ok(out)
}

/// Run the translator once under [`DEADLINE`].
fn run(pair: &str, text: &str) -> Result<String, Error> {
    let (program, args) = command(pair);
    let failed = |detail: String| Error::Failed {
        program: program.clone(),
        pair: pair.to_string(),
        detail,
    };
    let mut child = Command::new(&program)
        .args(&args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => Error::NotInstalled {
                program: program.clone(),
            },
            _ => failed(e.to_string()),
        })?;
    // One line in, so line-oriented translators answer it whole.
    let input = format!("{}\n", text.replace(['\n', '\r'], " "));
    if let Some(mut stdin) = child.stdin.take() {
        // A translator that exits without reading is reported below by its status.
        let _ = stdin.write_all(input.as_bytes());
    }
    let mut stdout = child.stdout.take();
    let mut stderr = child.stderr.take();
    let reader = std::thread::spawn(move || {
        let mut out = Vec::new();
        let mut err = Vec::new();
        if let Some(s) = stdout.as_mut() {
            let _ = s.read_to_end(&mut out);
        }
        if let Some(s) = stderr.as_mut() {
            let _ = s.take(4096).read_to_end(&mut err);
        }
        (out, err)
    });
    let t0 = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break st,
            Ok(None) if t0.elapsed() < DEADLINE => std::thread::sleep(Duration::from_millis(2)),
            Ok(None) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(Error::Timeout {
                    program: program.clone(),
                    pair: pair.to_string(),
                    secs: DEADLINE.as_secs(),
                });
            }
            Err(e) => return Err(failed(e.to_string())),
        }
    };
    let (out, err) = reader
        .join()
        .map_err(|_| failed("reader thread panicked".into()))?;
    if !status.success() {
        let msg = String::from_utf8_lossy(&err).trim().to_string();
        return Err(failed(if msg.is_empty() {
            status.to_string()
        } else {
            msg
        }));
    }
    let t = clean(&String::from_utf8_lossy(&out), text.chars().count());
    if t.is_empty() {
        return Err(failed("empty translation".into()));
    }
    Ok(t)
}

/// Drop Apertium's analysis marks (`*` unknown, `#` generation error, `@` untranslated),
/// collapse white space and bound the length (a runaway translator cannot flood the search).
fn clean(raw: &str, input_chars: usize) -> String {
    let s: String = raw
        .chars()
        .map(|c| match c {
            '*' | '#' | '@' | '~' => ' ',
            c if c.is_control() => ' ',
            c => c,
        })
        .collect();
    let words: Vec<&str> = s.split_whitespace().collect();
    let mut out = String::new();
    let cap = input_chars * 3 + 64;
    for w in words {
        if out.len() + w.len() + 1 > cap {
            break;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        out.push_str(w);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn languages_are_told_apart_by_function_words() {
        let es = LangTally::of("¿Qué pasa con los vectores cuando se borra la especificación?");
        let en = LangTally::of("What happens to the vectors when the spec is removed?");
        assert_eq!(query_lang(es), Some(Lang::Es));
        assert_eq!(query_lang(en), Some(Lang::En));
        assert_eq!(query_lang(LangTally::of("source_hash UC-004")), None);
        assert_eq!(corpus_lang(LangTally { es: 70, en: 30 }), Some(Lang::Es));
        assert_eq!(corpus_lang(LangTally { es: 30, en: 70 }), Some(Lang::En));
        assert_eq!(corpus_lang(LangTally { es: 50, en: 50 }), None);
        assert_eq!(corpus_lang(LangTally::default()), None);
    }

    #[test]
    fn only_a_query_in_the_other_language_is_translated() {
        let es_corpus = LangTally { es: 900, en: 100 };
        assert_eq!(
            needed("what happens when the file is removed", es_corpus),
            Some((Lang::En, Lang::Es))
        );
        assert_eq!(
            needed("qué pasa cuando se borra el fichero", es_corpus),
            None
        );
        assert_eq!(needed("BR-MERGE-001 source_hash", es_corpus), None);
        assert_eq!(
            needed(
                "qué pasa cuando se borra el fichero",
                LangTally { es: 10, en: 90 }
            ),
            Some((Lang::Es, Lang::En))
        );
    }

    #[test]
    fn apertium_marks_are_cleaned_and_length_bounded() {
        assert_eq!(
            clean("Cuándo *teammates  #editar\n@foo ~bar", 40),
            "Cuándo teammates editar foo bar"
        );
        assert!(clean(&"palabra ".repeat(1000), 10).len() <= 94);
    }
}
