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
//!   one language and the corpus is clearly ([`CORPUS_SHARE`]) in the other. Keywords without
//!   function words are Spanish by a letter English never writes, else the other language when
//!   more of their words only the specs' translations hold than only the specs themselves
//!   ([`text_lang`]). Same-language queries, mixed corpora and undecided keywords are left alone.
//! - Two styles ([`Style`]). `Full` is Apertium's whole pipeline (`apertium -u eng-spa`): fluent
//!   text, which the embedding model needs (~120 ms: eleven processes each load their data).
//!   `Lemmas` stops after lexical selection (analysis, tagging, bilingual lookup, choice of
//!   sense: the first five stages of the pair's mode file) and keeps the chosen target lemmas
//!   (~50 ms). BM25 stems every word, so inflection and word order do not matter to it: the
//!   lexical-only search (L1, or no model loaded) uses `Lemmas`, which measured the same there.
//! - `KDD_TRANSLATOR=<program>` replaces Apertium in both styles (called as `<program> eng-spa`,
//!   text on stdin, translation on stdout); `KDD_TRANSLATE=off` never translates. Translators
//!   run under a deadline ([`DEADLINE`]).
//! - Warm translation (`Full` style with Apertium): a short-lived process (the CLI) asks the
//!   per-user warm embedding service, which keeps the pair's pipeline running and memoises
//!   answers ([`crate::embed::translator`]); a long-running server ([`keep_warm`]: `kdd serve`,
//!   `kdd mcp`) keeps its own. Both give exactly what a cold `apertium -u` gives, so answers do
//!   not depend on the path; without a service (or `KDD_TRANSLATE_WARM=0`) the same pipeline is
//!   started for the one question and stopped after it (cold), straight from the pair's mode
//!   file rather than through the `apertium` script (measured on the dev corpus, a fresh
//!   `kdd query` per English question: p50 / p95 185 / 212 ms → 132 / 158 ms, same answers);
//!   `apertium -u` itself runs only when that pipeline cannot start, and says what is missing.
//! - Every process memoises answers in an LRU keyed by (direction, style, text) ([`MEMO_CAP`]):
//!   a server asked the same question again runs no translator; [`runs`] counts the translator
//!   processes started.
//! - When a translation is needed but cannot be made the query still runs, with a
//!   `NO_TRANSLATION` warning that says what to install; a translated query carries a
//!   `QUERY_TRANSLATED` warning quoting the translation, so every answer explains itself.

use crate::cache::{LangTally, Snapshot};
use crate::embed::translator::{Lru, Translators};
use crate::proc::Failure;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

/// Environment switch: `KDD_TRANSLATE=off` (or `0`) never translates.
pub const ENV_TRANSLATE: &str = crate::config::env::TRANSLATE;
/// Environment override of the translator program.
pub const ENV_TRANSLATOR: &str = crate::config::env::TRANSLATOR;
/// A corpus is "in" a language when at least this share of its function words are.
pub const CORPUS_SHARE: f32 = 0.6;
/// Longest a translator may take.
pub const DEADLINE: Duration = Duration::from_secs(5);
/// Memoised translations kept per process.
pub const MEMO_CAP: usize = 256;
/// Environment switch: `KDD_TRANSLATE_WARM=0` never uses a warm pipeline (cold process only).
pub const ENV_TRANSLATE_WARM: &str = "KDD_TRANSLATE_WARM";

pub use crate::cache::lang::Lang;

/// The language a query is written in, when its function words say so clearly; a query whose
/// function words do not tell (a few keywords: "cancelación tardía") is Spanish when it has a
/// letter or mark English never writes (ñ, an accented vowel, ¿, ¡), else undecided.
pub fn query_lang(query: &str) -> Option<Lang> {
    let t = LangTally::of(query);
    match t.en.cmp(&t.es) {
        std::cmp::Ordering::Greater => Some(Lang::En),
        std::cmp::Ordering::Less => Some(Lang::Es),
        std::cmp::Ordering::Equal => query
            .chars()
            .any(|c| "ñáéíóúü¿¡ÑÁÉÍÓÚÜ".contains(c))
            .then_some(Lang::Es),
    }
}

/// The language a corpus is written in, when at least [`CORPUS_SHARE`] of it is.
pub fn corpus_lang(t: LangTally) -> Option<Lang> {
    t.clearly(CORPUS_SHARE)
}

/// Which translation a text in language `q` needs over a corpus: `(from, to)`, or none.
pub fn needed(q: Option<Lang>, corpus: LangTally) -> Option<(Lang, Lang)> {
    let q = q?;
    let c = corpus_lang(corpus)?;
    (q != c).then_some((q, c))
}

/// The language of `text` searched over the snapshot's corpus: its function words' ([`query_lang`]);
/// for a few keywords they do not tell, over a corpus clearly in one language, the other
/// language when more of its words only the corpus's translations into it hold than only the
/// corpus itself (`Snapshot::words_found`: "late cancellation penalty" over Spanish specs).
pub fn text_lang(snap: &Snapshot<'_>, text: &str) -> Result<Option<Lang>, super::Error> {
    if let Some(l) = query_lang(text) {
        return Ok(Some(l));
    }
    let Some(c) = corpus_lang(snap.corpus_lang()?) else {
        return Ok(None);
    };
    let found = snap.words_found(text, c)?;
    let other = match c {
        Lang::Es => Lang::En,
        Lang::En => Lang::Es,
    };
    Ok((found.translation_only > found.own_only).then_some(other))
}

/// Longest text sent to a translator, in bytes (the servers' bound on a question): a longer
/// one is searched as it is.
pub const MAX_TRANSLATED: usize = 2000;

/// Whether a text searched over a corpus goes through the translator: the one decision that
/// questions ([`super::searched`]) and context keyword hints ([`super::context`]) share; each
/// reports the outcome in its own words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// Translation is off, or the text's language is the corpus's or is not clear.
    Keep,
    /// In the other language but over [`MAX_TRANSLATED`] bytes: not sent.
    TooLong { from: Lang, to: Lang },
    /// To translate from one language to the other.
    Translate { from: Lang, to: Lang },
}

/// The [`Plan`] for `text` searched over the snapshot's corpus (its language: [`text_lang`]).
pub fn plan(snap: &Snapshot<'_>, text: &str) -> Result<Plan, super::Error> {
    Ok(if enabled() {
        plan_on(text, text_lang(snap, text)?, snap.corpus_lang()?)
    } else {
        Plan::Keep
    })
}

/// [`plan`] with translation switched on, for a text in language `lang`.
fn plan_on(text: &str, lang: Option<Lang>, corpus: LangTally) -> Plan {
    match needed(lang, corpus) {
        None => Plan::Keep,
        Some((from, to)) if text.len() > MAX_TRANSLATED => Plan::TooLong { from, to },
        Some((from, to)) => Plan::Translate { from, to },
    }
}

/// How much of the translation pipeline to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Style {
    /// Fluent target text (for the embedding model).
    Full,
    /// The chosen target lemmas, in source order (for BM25, which stems anyway).
    Lemmas,
}

/// Where Debian's Apertium keeps the mode files (one shell pipeline per language pair).
const MODE_DIRS: &[&str] = crate::embed::translator::MODE_DIRS;

/// Why a translation could not be made.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("`{program}` is not installed (install the Debian packages apertium and apertium-eng-spa, as ./install.sh does, or set KDD_TRANSLATOR)")]
    NotInstalled { program: String },
    #[error("`{program}`, named by KDD_TRANSLATOR, was not found (give the path of an executable, or unset KDD_TRANSLATOR to use Apertium)")]
    CustomMissing { program: String },
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
    !crate::config::env_off(ENV_TRANSLATE)
}

/// The program `KDD_TRANSLATOR` names, when set.
fn custom_translator() -> Option<String> {
    std::env::var(ENV_TRANSLATOR)
        .ok()
        .filter(|p| !p.trim().is_empty())
}

/// The translator command for a language pair: program and arguments.
fn command(pair: &str) -> (String, Vec<String>) {
    match custom_translator() {
        Some(p) => (p, vec![pair.to_string()]),
        None => (
            "apertium".to_string(),
            vec!["-u".to_string(), pair.to_string()],
        ),
    }
}

/// The lemma pipeline of a pair: the stages of its Apertium mode file up to lexical selection
/// (or bilingual lookup when the pair has no lexical selection), when installed.
fn lemma_pipeline(pair: &str) -> Option<String> {
    let mode = MODE_DIRS
        .iter()
        .find_map(|d| std::fs::read_to_string(Path::new(d).join(format!("{pair}.mode"))).ok())?;
    let stages: Vec<&str> = mode.trim().split(" | ").collect();
    let last = stages
        .iter()
        .position(|s| s.starts_with("lrx-proc"))
        .or_else(|| stages.iter().position(|s| s.contains("autobil")))?;
    Some(stages[..=last].join(" | "))
}

/// The chosen target lemma of every `^source<tags>/target<tags>$` unit of Apertium's stream;
/// unknown words (`*word`) and everything between units are kept as they are.
fn lemmas_of(stream: &str) -> String {
    let mut out = String::new();
    let mut rest = stream;
    while let Some(start) = rest.find('^') {
        out.push_str(&rest[..start]);
        let Some(len) = rest[start..].find('$') else {
            rest = &rest[start + 1..];
            continue;
        };
        let unit = &rest[start + 1..start + len];
        let mut parts = unit.split('/');
        let source = parts.next().unwrap_or("");
        let target = parts.next().filter(|t| !t.is_empty()).unwrap_or(source);
        let lemma = target.split('<').next().unwrap_or("");
        out.push_str(&lemma.replace(['#', '+'], " "));
        rest = &rest[start + len + 1..];
    }
    out.push_str(rest);
    out
}

/// Memoised translations: (pair, style, text) → translation.
type Memo = Mutex<Lru<(String, Style, String), String>>;

fn memo() -> &'static Memo {
    static M: OnceLock<Memo> = OnceLock::new();
    M.get_or_init(|| Mutex::new(Lru::new(MEMO_CAP)))
}

static RESIDENT: AtomicBool = AtomicBool::new(false);
static RUNS: AtomicUsize = AtomicUsize::new(0);

/// This process serves many questions (`kdd serve`, `kdd mcp`): keep a warm Apertium pipeline
/// in it rather than asking the per-user service or starting one per question.
pub fn keep_warm() {
    RESIDENT.store(true, Ordering::Relaxed);
}

/// Translator processes this process started so far (cold runs and warm pipelines; answers
/// from a memo or the warm service start none).
pub fn runs() -> usize {
    RUNS.load(Ordering::Relaxed) + resident().started.load(Ordering::Relaxed)
}

fn resident() -> &'static Translators {
    static T: OnceLock<Translators> = OnceLock::new();
    T.get_or_init(|| Translators::new(MEMO_CAP))
}

/// True unless `KDD_TRANSLATE_WARM` is `off`/`0`/`false`/`no`.
fn warm_enabled() -> bool {
    !crate::config::env_off(ENV_TRANSLATE_WARM)
}

/// The full translation from a warm pipeline (this process's when resident, else the warm
/// service's), `None` when there is none to ask or it failed (the cold process runs then).
fn warm(pair: &str, text: &str) -> Option<String> {
    if !warm_enabled() {
        return None;
    }
    let raw = if RESIDENT.load(Ordering::Relaxed) {
        resident().translate(pair, text, DEADLINE).ok()?
    } else {
        crate::embed::warm::translate_via_service(pair, text, DEADLINE)?.ok()?
    };
    (!raw.is_empty()).then(|| clean(&raw, text.chars().count()))
}

/// Translate `text` from one language to the other (memoised per process).
pub fn translate(text: &str, from: Lang, to: Lang, style: Style) -> Result<String, Error> {
    // KDD_TRACE names the path taken: memo, warm pipeline or cold process.
    let start = std::time::Instant::now();
    let pair = format!("{}-{}", from.code(), to.code());
    let key = (pair.clone(), style, text.to_string());
    if let Some(t) = memo().lock().ok().and_then(|mut m| m.get(&key)) {
        crate::trace::done("translate_memo", start);
        return Ok(t);
    }
    let custom = custom_translator().is_some();
    let warm = (style == Style::Full && !custom)
        .then(|| warm(&pair, text))
        .flatten();
    let out = match warm {
        Some(t) => {
            crate::trace::done("translate_warm", start);
            t
        }
        None => {
            let t = cold(text, &pair, style, custom);
            crate::trace::done("translate_cold", start);
            t?
        }
    };
    if let Ok(mut m) = memo().lock() {
        m.put(key, out.clone());
    }
    Ok(out)
}

/// A translator process for this one question.
fn cold(text: &str, pair: &str, style: Style, custom: bool) -> Result<String, Error> {
    RUNS.fetch_add(1, Ordering::Relaxed);
    let lemmas = (style == Style::Lemmas && !custom)
        .then(|| lemma_pipeline(pair))
        .flatten();
    Ok(match lemmas {
        Some(pipeline) => {
            // Characters of Apertium's stream format would break the unformatted pipeline.
            let plain: String = text
                .chars()
                .map(|c| {
                    if "^$[]{}\\/<>@*#~".contains(c) {
                        ' '
                    } else {
                        c
                    }
                })
                .collect();
            let stream = run("sh", &["-c".to_string(), pipeline], pair, &plain)?;
            clean(&lemmas_of(&stream), text.chars().count())
        }
        None => match (!custom).then(|| direct(text, pair)).flatten() {
            Some(answer) => answer?,
            None => {
                let (program, args) = command(pair);
                clean(&run(&program, &args, pair, text)?, text.chars().count())
            }
        },
    })
}

/// Apertium's whole pipeline run once for this question, started straight from the pair's
/// mode file: the stages `apertium -u` runs, and its very answer (see
/// [`crate::embed::translator`]), without the wrapper script's own processes (bash, gawk, the
/// format filters: ~20–40 ms of a cold translation). `None` when the pipeline cannot start (no
/// mode file, no tools): then `apertium` itself runs and says what is missing.
fn direct(text: &str, pair: &str) -> Option<Result<String, Error>> {
    let mut pipeline = crate::embed::translator::Pipeline::start(pair).ok()?;
    let failed = |detail: String| Error::Failed {
        program: "apertium".to_string(),
        pair: pair.to_string(),
        detail,
    };
    Some(match pipeline.translate(text, DEADLINE) {
        Ok(raw) if !raw.is_empty() => Ok(clean(&raw, text.chars().count())),
        Ok(_) => Err(failed("empty translation".into())),
        Err(e) => Err(failed(e.to_string())),
    })
}

/// Run a translator once under [`DEADLINE`] (see [`crate::proc::run`]): `text` on stdin, its
/// (non-empty) answer back.
fn run(program: &str, args: &[String], pair: &str, text: &str) -> Result<String, Error> {
    let failed = |detail: String| Error::Failed {
        program: program.to_string(),
        pair: pair.to_string(),
        detail,
    };
    // One line in, so line-oriented translators answer it whole.
    let input = format!("{}\n", text.replace(['\n', '\r'], " "));
    let caps = crate::proc::Caps {
        stdout: MAX_OUTPUT,
        stderr: 4096,
    };
    let mut cmd = Command::new(program);
    cmd.args(args);
    let f =
        crate::proc::run(&mut cmd, input.into_bytes(), DEADLINE, caps).map_err(|e| match e {
            Failure::Spawn(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let program = program.to_string();
                if custom_translator().as_deref() == Some(program.as_str()) {
                    Error::CustomMissing { program }
                } else {
                    Error::NotInstalled { program }
                }
            }
            Failure::Spawn(e) | Failure::Wait(e) => failed(e.to_string()),
            Failure::Timeout => Error::Timeout {
                program: program.to_string(),
                pair: pair.to_string(),
                secs: DEADLINE.as_secs(),
            },
        })?;
    if !f.status.success() {
        let msg = String::from_utf8_lossy(&f.stderr).trim().to_string();
        return Err(failed(if msg.is_empty() {
            f.status.to_string()
        } else {
            msg
        }));
    }
    let t = String::from_utf8_lossy(&f.stdout).trim().to_string();
    if t.is_empty() {
        return Err(failed("empty translation".into()));
    }
    Ok(t)
}

/// Most bytes of a translator's answer kept (the rest is read and dropped; [`clean`] bounds the
/// searched text further).
const MAX_OUTPUT: usize = 1 << 20;

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
        let es = "¿Qué pasa con los vectores cuando se borra la especificación?";
        let en = "What happens to the vectors when the spec is removed?";
        assert_eq!(query_lang(es), Some(Lang::Es));
        assert_eq!(query_lang(en), Some(Lang::En));
        assert_eq!(query_lang("source_hash UC-004"), None);
        // Keywords alone: a Spanish-only letter tells, plain words do not.
        assert_eq!(query_lang("cancelación tardía"), Some(Lang::Es));
        assert_eq!(query_lang("señal reserva"), Some(Lang::Es));
        assert_eq!(query_lang("late fee"), None);
        // Function words outweigh a borrowed accented word.
        assert_eq!(query_lang("the café of the clinic"), Some(Lang::En));
        assert_eq!(corpus_lang(LangTally { es: 70, en: 30 }), Some(Lang::Es));
        assert_eq!(corpus_lang(LangTally { es: 30, en: 70 }), Some(Lang::En));
        assert_eq!(corpus_lang(LangTally { es: 50, en: 50 }), None);
        assert_eq!(corpus_lang(LangTally::default()), None);
    }

    #[test]
    fn only_a_query_in_the_other_language_is_translated() {
        let es_corpus = LangTally { es: 900, en: 100 };
        assert_eq!(
            needed(
                query_lang("what happens when the file is removed"),
                es_corpus
            ),
            Some((Lang::En, Lang::Es))
        );
        assert_eq!(
            needed(query_lang("qué pasa cuando se borra el fichero"), es_corpus),
            None
        );
        assert_eq!(
            needed(query_lang("BR-MERGE-001 source_hash"), es_corpus),
            None
        );
        assert_eq!(
            needed(
                query_lang("qué pasa cuando se borra el fichero"),
                LangTally { es: 10, en: 90 }
            ),
            Some((Lang::Es, Lang::En))
        );
    }

    #[test]
    fn a_text_over_the_bound_is_never_sent_to_the_translator() {
        let en_corpus = LangTally { es: 10, en: 90 };
        let q = "qué pasa cuando se borra el fichero";
        let (from, to) = (Lang::Es, Lang::En);
        let es = query_lang(q);
        assert_eq!(plan_on(q, es, en_corpus), Plan::Translate { from, to });
        let long = format!("{q} {}", "y el fichero ".repeat(MAX_TRANSLATED / 10));
        assert_eq!(plan_on(&long, es, en_corpus), Plan::TooLong { from, to });
        let en = query_lang("what happens to the file");
        assert_eq!(
            plan_on("what happens to the file", en, en_corpus),
            Plan::Keep
        );
    }

    #[test]
    fn lemmas_are_read_from_the_bilingual_stream() {
        let stream = "^the<det><def><sp>/el<det><def><GD><ND>$ ^file<n><sg>/archivo<n><m><sg>$ \
                      ^be<vbser><pres>/ser<vbser><pres>$ ^teammates/*teammates$ \
                      ^Age of Enlightenment<np>/Siglo# de las Luces<np>$?";
        assert_eq!(
            lemmas_of(stream),
            "el archivo ser *teammates Siglo  de las Luces?"
        );
        assert_eq!(lemmas_of("no units here"), "no units here");
        assert_eq!(lemmas_of("^broken unit"), "broken unit");
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
