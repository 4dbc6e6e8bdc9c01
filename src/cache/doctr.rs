//! Spec translation for the lexical index (issue 13): each spec's text, translated by Apertium
//! into the other corpus language (Spanish → English, English → Spanish), is indexed in BM25
//! fields of its own ([`super::text`]), so a question asked in the other language meets the spec
//! in the question's words. Translating the question alone leaves a short question at the mercy
//! of one rendering ("cita" → "date"); a whole spec, translated, carries its vocabulary in both
//! languages. Measured in `tools/eval/README.md` (seventh round).
//!
//! - **Which way:** by the spec's own function words ([`LangTally`]): Spanish when at least
//!   [`SHARE`] of its markers are Spanish, English likewise; a mixed or wordless spec is not
//!   translated.
//! - **How:** warm Apertium pipelines ([`crate::embed::translator::Pipeline`]), up to
//!   [`WORKERS`] per pair in parallel, each spec (headings and text, at most [`MAX_CHARS`]) on
//!   its own under a deadline; a spec comes out the same whatever was translated before it.
//! - **Memo:** `<cache root>/translations/<pair>/<blake3 of the text>`, outside generations, so
//!   a rebuilt generation (damage, a new cache version) does not translate again; a full build
//!   removes the entries it did not use.
//! - **Off:** `KDD_TRANSLATE=off` or `KDD_DOC_TRANSLATE=0`, or Apertium or the pair not
//!   installed: specs are indexed without a translation, and nothing fails.
//! - **Bounded:** a build translates at most [`MAX_FRESH`] specs the memo does not hold (a
//!   first build of a very large corpus would otherwise take minutes); over it, it translates
//!   none and says so, until `KDD_DOC_TRANSLATE=all`; and it stops after [`BUDGET`], saying
//!   how many it left (Apertium slow or hanging on some text never holds a build for long).
//!
//! Invariants: a translation only ranks: it is indexed, never stored, shown or cited, so a
//! crafted memo file cannot put a byte into an answer (and one over [`MEMO_MAX`] bytes or not
//! UTF-8 is ignored). A failure (no pipeline, a deadline, a crash) leaves that spec untranslated
//! and the build goes on.

use super::lang::{Lang, LangTally};
use super::store::NodeRecord;
use crate::embed::translator::Pipeline;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Weight of the translation fields: a body's (1.0), or `KDD_RANK_DOC_TR` (0–3) for sweeps.
/// Read here, not in `query/knobs.rs`, because the weight applies inside the text index.
pub(super) fn weight() -> f32 {
    static W: std::sync::OnceLock<f32> = std::sync::OnceLock::new();
    *W.get_or_init(|| super::text::weight_knob("KDD_RANK_DOC_TR", 1.0, 3.0))
}

/// Share of a spec's function words that must be of one language for it to be translated.
pub const SHARE: f32 = 0.6;
/// At most this many characters of a spec are translated (specs are far shorter).
pub const MAX_CHARS: usize = 30_000;
/// A memo file larger than this is not a translation of ours.
pub const MEMO_MAX: u64 = 4 * MAX_CHARS as u64;
/// Environment switch: `KDD_DOC_TRANSLATE=0` indexes specs without translations.
pub const ENV_DOC_TRANSLATE: &str = crate::config::env::DOC_TRANSLATE;

/// The Apertium pair that translates a spec of this tally into the other language, and that
/// language.
pub fn pair_of(t: LangTally) -> Option<(&'static str, Lang)> {
    Some(match t.clearly(SHARE)? {
        Lang::Es => ("spa-eng", Lang::En),
        Lang::En => ("eng-spa", Lang::Es),
    })
}

/// True unless `KDD_TRANSLATE` is off or `KDD_DOC_TRANSLATE` is `0`.
pub fn enabled() -> bool {
    !crate::config::env_off(crate::config::env::TRANSLATE)
        && !crate::config::env_off(ENV_DOC_TRANSLATE)
}

/// True when `KDD_DOC_TRANSLATE=all` lifts a build's limits.
fn all_asked() -> bool {
    std::env::var(ENV_DOC_TRANSLATE).is_ok_and(|v| v.eq_ignore_ascii_case("all"))
}

/// What this process can translate, as the cache records it: the installed pairs, or `off`.
/// A cache built in another state is rebuilt from scratch (an incremental update would leave
/// the unchanged specs as they were: without translations once Apertium is installed, or with
/// them once it is switched off).
pub fn state() -> String {
    if !enabled() {
        return "off".into();
    }
    let pairs: Vec<&str> = ["spa-eng", "eng-spa"]
        .into_iter()
        .filter(|p| crate::embed::translator::mode_file(p).is_ok())
        .collect();
    match (pairs.is_empty(), all_asked()) {
        (true, _) => "none".into(),
        (false, false) => pairs.join(","),
        (false, true) => format!("{}+all", pairs.join(",")),
    }
}

/// The text of a spec that is translated: its headings and sections, cut at [`MAX_CHARS`].
fn source_text(rec: &NodeRecord) -> String {
    let mut out = String::new();
    for s in &rec.sections {
        for part in [s.heading.as_str(), s.text.as_str()] {
            if !part.trim().is_empty() {
                out.push_str(part.trim());
                out.push_str(if part == s.heading { ".\n" } else { "\n" });
            }
        }
    }
    match out.char_indices().nth(MAX_CHARS) {
        Some((i, _)) => out[..i].to_string(),
        None => out,
    }
}

/// At most this many pipelines per pair translate at once.
const WORKERS: usize = 4;
/// A build stops translating after this long, unless `KDD_DOC_TRANSLATE=all` (a spec that makes
/// Apertium hang costs its deadline, seconds, each time): the rest stay untranslated until they
/// change, and it says so.
pub const BUDGET: Duration = Duration::from_secs(120);
/// A build translates at most this many specs that are not in the memo (~23 ms each on two
/// cores: 2,000 specs ≈ 46 s, once); over it, none, with a notice, unless
/// `KDD_DOC_TRANSLATE=all`.
pub const MAX_FRESH: usize = 2_000;

/// Translates the specs of one build.
pub struct DocTranslator {
    memo: Option<PathBuf>,
    enabled: bool,
    used: HashSet<PathBuf>,
    /// Time spent translating (for the build's step figures).
    pub spent: Duration,
}

/// One spec to translate: its index in the build's list, memo file and text.
struct Job {
    at: usize,
    file: Option<PathBuf>,
    text: String,
}

impl DocTranslator {
    /// A translator for one build, with its memo under `memo` (none: no memo).
    pub fn new(memo: Option<&Path>) -> DocTranslator {
        DocTranslator {
            memo: memo.map(Path::to_path_buf),
            enabled: enabled(),
            used: HashSet::new(),
            spent: Duration::ZERO,
        }
    }

    /// Set `translation` on every record that has one to make: from the memo, else from
    /// Apertium (a few pipelines per pair in parallel). Over [`MAX_FRESH`]
    /// specs to translate, only the memo's are set, and the notice says why.
    pub fn translate_all(&mut self, recs: &mut [&mut NodeRecord]) -> Option<String> {
        if !self.enabled || recs.is_empty() {
            return None;
        }
        let start = Instant::now();
        let mut todo: HashMap<(&'static str, Lang), Vec<Job>> = HashMap::new();
        for (at, rec) in recs.iter_mut().enumerate() {
            let Some((pair, into)) = pair_of(rec.lang) else {
                continue;
            };
            let text = source_text(rec);
            if text.trim().is_empty() {
                continue;
            }
            let file = self.memo.as_ref().map(|m| {
                m.join(pair)
                    .join(blake3::hash(text.as_bytes()).to_hex().as_str())
            });
            if let Some(f) = &file {
                self.used.insert(f.clone());
            }
            match file.as_deref().and_then(read_memo) {
                Some(t) => rec.translation = Some((into, t)),
                None => todo
                    .entry((pair, into))
                    .or_default()
                    .push(Job { at, file, text }),
            }
        }
        let fresh: usize = todo.values().map(Vec::len).sum();
        let all = all_asked();
        if fresh > MAX_FRESH && !all {
            self.spent += start.elapsed();
            return Some(format!(
                "{fresh} specs were not translated for cross-language search (over {MAX_FRESH} \
                 in one build, about {} s); set {ENV_DOC_TRANSLATE}=all once to translate them \
                 (kept in the cache), or {ENV_DOC_TRANSLATE}=0 to silence this",
                fresh / 40
            ));
        }
        // `all` asked for every spec, however long it takes (each still under its deadline).
        let until = (!all).then(|| start + BUDGET);
        let mut done = 0;
        for ((pair, into), jobs) in todo {
            for (at, t) in run_pair(pair, jobs, until) {
                recs[at].translation = Some((into, t));
                done += 1;
            }
        }
        self.spent += start.elapsed();
        (past(until) && done < fresh).then(|| {
            format!(
                "{} specs were not translated for cross-language search: translation stopped \
                 after {} s (Apertium slow or failing); they are translated when they change",
                fresh - done,
                BUDGET.as_secs()
            )
        })
    }

    /// After a full build: remove the memo entries this build did not use.
    pub fn prune(&self) {
        let Some(memo) = &self.memo else { return };
        if !self.enabled {
            return;
        }
        for pair in ["spa-eng", "eng-spa"] {
            let dir = memo.join(pair);
            if !real_dirs(&dir) {
                continue;
            }
            let Ok(rd) = std::fs::read_dir(&dir) else {
                continue;
            };
            for e in rd.flatten() {
                if !self.used.contains(&e.path()) {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
    }
}

/// Translate `jobs` of one pair, spread over a few workers, each with its own pipeline; memo
/// entries written. Returns (index, translation) of those translated. Each spec goes alone, so
/// its rendering cannot depend on the specs next to it in a batch (a full build and an update
/// would otherwise be free to disagree); that costs ~10 ms a spec more than 6 KB batches.
fn run_pair(pair: &'static str, jobs: Vec<Job>, until: Option<Instant>) -> Vec<(usize, String)> {
    let workers = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
        .clamp(1, WORKERS)
        .min(jobs.len());
    let mut shares: Vec<Vec<Job>> = (0..workers).map(|_| Vec::new()).collect();
    for (i, j) in jobs.into_iter().enumerate() {
        shares[i % workers.max(1)].push(j);
    }
    std::thread::scope(|scope| {
        let handles: Vec<_> = shares
            .into_iter()
            .map(|share| scope.spawn(move || work(pair, share, until)))
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap_or_default())
            .collect()
    })
}

/// One worker: its specs through one pipeline of its own (started on first need, restarted
/// after a failure). Never the per-user service's: its long-running pipeline rendered 3 of the
/// check corpus's 29 specs otherwise than fresh pipelines did (cause not found; fresh
/// pipelines agree whatever the order or the number of workers), and the index must not
/// depend on which process translated.
fn work(pair: &'static str, jobs: Vec<Job>, until: Option<Instant>) -> Vec<(usize, String)> {
    let mut pipe: Option<Pipeline> = None;
    let mut started = false;
    let mut ask = |text: &str| -> Option<String> {
        let deadline = Duration::from_millis(5_000 + text.len() as u64 / 10);
        if !started {
            pipe = Pipeline::start(pair).ok();
            started = true;
        }
        match pipe.as_mut()?.translate(text, deadline) {
            Ok(t) => Some(t),
            Err(_) => {
                pipe = Pipeline::start(pair).ok();
                None
            }
        }
    };
    let mut out = Vec::new();
    for j in jobs {
        if past(until) {
            break;
        }
        if let Some(t) = ask(&j.text).filter(|t| !t.trim().is_empty()) {
            if let Some(f) = &j.file {
                write_memo(f, &t);
            }
            out.push((j.at, t));
        }
    }
    out
}

/// True once the build's translation time is over (never without a limit).
fn past(until: Option<Instant>) -> bool {
    until.is_some_and(|u| Instant::now() >= u)
}

/// True when `dir` and its parent (the memo root) are directories, not links: the memo never
/// reads, writes or removes anything a link would lead it to.
fn real_dirs(dir: &Path) -> bool {
    [Some(dir), dir.parent()].into_iter().all(|d| {
        d.and_then(|d| std::fs::symlink_metadata(d).ok())
            .is_some_and(|m| m.is_dir())
    })
}

/// A memo entry, when it is a plausible translation (a regular file, bounded, UTF-8).
fn read_memo(file: &Path) -> Option<String> {
    let meta = std::fs::symlink_metadata(file).ok()?;
    if !meta.is_file() || meta.len() > MEMO_MAX || !real_dirs(file.parent()?) {
        return None;
    }
    std::fs::read_to_string(file).ok()
}

/// Store a memo entry (written beside, then renamed: a reader never sees half of one).
fn write_memo(file: &Path, text: &str) {
    let Some(dir) = file.parent() else { return };
    if std::fs::create_dir_all(dir).is_err() || !real_dirs(dir) {
        return;
    }
    let name = file.file_name().map(|n| n.to_string_lossy().into_owned());
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        name.unwrap_or_default(),
        std::process::id()
    ));
    if std::fs::write(&tmp, text).is_ok() && std::fs::rename(&tmp, file).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pair_follows_the_spec_language() {
        let t = |es, en| LangTally { es, en };
        assert_eq!(pair_of(t(9, 1)), Some(("spa-eng", Lang::En)));
        assert_eq!(pair_of(t(1, 9)), Some(("eng-spa", Lang::Es)));
        assert_eq!(pair_of(t(5, 5)), None);
        assert_eq!(pair_of(t(0, 0)), None);
    }

    #[test]
    fn memo_entries_that_are_not_ours_are_ignored() {
        let dir = tempfile::tempdir().unwrap();
        let ok = dir.path().join("ok");
        write_memo(&ok, "the appointment is booked");
        assert_eq!(read_memo(&ok).as_deref(), Some("the appointment is booked"));
        let big = dir.path().join("big");
        std::fs::write(&big, vec![b'a'; MEMO_MAX as usize + 1]).unwrap();
        assert_eq!(read_memo(&big), None);
        let bin = dir.path().join("bin");
        std::fs::write(&bin, [0xff, 0xfe, 0x00]).unwrap();
        assert_eq!(read_memo(&bin), None);
        let link = dir.path().join("link");
        std::os::unix::fs::symlink("/etc/hostname", &link).unwrap();
        assert_eq!(read_memo(&link), None);
        // A memo folder that is a link leads nowhere: nothing is written through it.
        let elsewhere = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), dir.path().join("eng-spa")).unwrap();
        write_memo(&dir.path().join("eng-spa").join("x"), "texto");
        assert_eq!(std::fs::read_dir(elsewhere.path()).unwrap().count(), 0);
    }
}
