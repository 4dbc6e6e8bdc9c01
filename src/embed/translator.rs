//! Warm Apertium: a translation pipeline kept running between questions, and a small LRU of
//! answers. Hosted by the warm embedding service (shared by every short-lived `kdd` process of
//! the user, see [`super::service`]) and by long-running servers (`kdd serve`, `kdd mcp`,
//! through `query::translate`); it lives in `embed/` because the service does.
//!
//! A cold `apertium -u eng-spa` starts eleven processes that each load their data (~120 ms,
//! more on a loaded machine); the same pipeline in null-flush mode (`-z`: every stage flushes
//! and answers when it reads a NUL) answers a question in ~2 ms once started.
//!
//! Invariants:
//! - The answer is the one `apertium -u <pair>` (text format) gives: the input is deformatted as
//!   `apertium-destxt` does (stream characters escaped with `\`, the line end a superblank), the
//!   stages are the pair's mode file with `-z` (`apertium-wblank-mode -z`, as `apertium -z`
//!   runs them), `-n` for the generator (unknown words unmarked), and the output is reformatted
//!   as `apertium-retxt` does (superblank brackets dropped, escapes undone). `~` (which
//!   `apertium-destxt` moves into a blank) becomes a space; callers drop it from answers anyway.
//! - One question at a time per pipeline (callers hold it behind a mutex), under a deadline: a
//!   pipeline that does not answer in time, or dies, is killed (its whole process group) and
//!   dropped; the next question starts a fresh one.
//! - Only pairs named `xxx-yyy` (ASCII letters) whose mode file is installed are started: a
//!   pair never names a path of its own.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::time::Duration;

/// Where Debian's Apertium keeps the mode files (one shell pipeline per language pair).
pub const MODE_DIRS: &[&str] = &[
    "/usr/share/apertium/modes",
    "/usr/local/share/apertium/modes",
];

/// Why the warm pipeline could not answer.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("`{0}` is not an Apertium language pair")]
    BadPair(String),
    #[error("the Apertium pair `{0}` is not installed (install the Debian packages apertium and apertium-eng-spa)")]
    NotInstalled(String),
    #[error("cannot start the Apertium pipeline for `{pair}`: {detail}")]
    Start { pair: String, detail: String },
    #[error("the Apertium pipeline for `{pair}` failed: {detail}")]
    Failed { pair: String, detail: String },
}

/// The mode file of an installed pair.
pub fn mode_file(pair: &str) -> Result<PathBuf, Error> {
    let ok = pair.split_once('-').is_some_and(|(a, b)| {
        [a, b]
            .iter()
            .all(|s| (2..=8).contains(&s.len()) && s.bytes().all(|c| c.is_ascii_lowercase()))
    });
    if !ok {
        return Err(Error::BadPair(pair.to_string()));
    }
    MODE_DIRS
        .iter()
        .map(|d| Path::new(d).join(format!("{pair}.mode")))
        .find(|p| p.is_file())
        .ok_or_else(|| Error::NotInstalled(pair.to_string()))
}

/// What `apertium-destxt` makes of one line of text: stream characters escaped, the line end
/// a superblank, then the NUL that makes every stage answer.
fn deformat(text: &str) -> Vec<u8> {
    let mut s = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            '$' | '/' | '<' | '>' | '@' | '[' | '\\' | ']' | '^' | '{' | '}' => {
                s.push('\\');
                s.push(c);
            }
            '~' => s.push(' '),
            c if c.is_control() => s.push(' '),
            c => s.push(c),
        }
    }
    s.push_str("[][\n]\0");
    s.into_bytes()
}

/// What `apertium-retxt` makes of the pipeline's answer: brackets of blanks dropped, escapes
/// undone; trimmed.
fn reformat(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => out.extend(chars.next()),
            '[' | ']' | '\0' => {}
            c => out.push(c),
        }
    }
    out.trim().to_string()
}

/// One running pipeline (a `sh` running the pair's stages in its own process group).
pub struct Pipeline {
    pair: String,
    child: Child,
    stdin: ChildStdin,
    answers: Receiver<Vec<u8>>,
}

impl Pipeline {
    /// Start the null-flush pipeline of `pair`.
    pub fn start(pair: &str) -> Result<Pipeline, Error> {
        use std::os::unix::process::CommandExt;
        let mode = mode_file(pair)?;
        let start = |detail: String| Error::Start {
            pair: pair.to_string(),
            detail,
        };
        let script = Command::new("apertium-wblank-mode")
            .arg("-z")
            .arg(&mode)
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .map_err(|e| start(format!("apertium-wblank-mode: {e}")))?;
        let script = String::from_utf8_lossy(&script.stdout).trim().to_string();
        if script.is_empty() {
            return Err(start("apertium-wblank-mode printed no pipeline".into()));
        }
        let mut cmd = Command::new("sh");
        // $1: the generator's option (`-n`: unknown words unmarked, as `apertium -u`); $2: the
        // tagger's (none).
        cmd.arg("-c").arg(&script).args(["sh", "-n", ""]);
        if std::env::var_os("LC_ALL").is_none() {
            cmd.env("LC_CTYPE", "C.UTF-8");
        }
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .current_dir("/")
            .process_group(0)
            .spawn()
            .map_err(|e| start(e.to_string()))?;
        let (Some(stdin), Some(mut stdout)) = (child.stdin.take(), child.stdout.take()) else {
            return Err(start("no pipes".into()));
        };
        let (tx, answers) = mpsc::channel();
        std::thread::spawn(move || {
            let mut pending = Vec::new();
            let mut buf = [0u8; 8192];
            while let Ok(n) = stdout.read(&mut buf) {
                if n == 0 {
                    break;
                }
                pending.extend_from_slice(&buf[..n]);
                while let Some(i) = pending.iter().position(|&b| b == 0) {
                    let answer: Vec<u8> = pending.drain(..=i).collect();
                    if tx.send(answer).is_err() {
                        return;
                    }
                }
            }
        });
        Ok(Pipeline {
            pair: pair.to_string(),
            child,
            stdin,
            answers,
        })
    }

    /// Translate one line (line breaks become spaces) within `deadline`. After an error the
    /// pipeline must be dropped.
    pub fn translate(&mut self, text: &str, deadline: Duration) -> Result<String, Error> {
        let failed = |detail: String| Error::Failed {
            pair: self.pair.clone(),
            detail,
        };
        // Answers left over from an earlier question that timed out are not this one's.
        while self.answers.try_recv().is_ok() {}
        self.stdin
            .write_all(&deformat(text))
            .and_then(|()| self.stdin.flush())
            .map_err(|e| failed(e.to_string()))?;
        match self.answers.recv_timeout(deadline) {
            Ok(raw) => Ok(reformat(&String::from_utf8_lossy(&raw))),
            Err(RecvTimeoutError::Timeout) => Err(failed(format!(
                "no answer within {} ms",
                deadline.as_millis()
            ))),
            Err(RecvTimeoutError::Disconnected) => Err(failed("the pipeline exited".into())),
        }
    }
}

impl Drop for Pipeline {
    fn drop(&mut self) {
        // The whole group: `sh` and every stage it started (a stuck stage would outlive a
        // closed stdin).
        crate::proc::kill_group(self.child.id());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Warm pipelines by pair, and the answers already given (an LRU keyed by pair and text).
pub struct Translators {
    pipes: std::sync::Mutex<HashMap<String, Pipeline>>,
    memo: std::sync::Mutex<Lru<(String, String), String>>,
    /// Pipelines started so far (a question answered from the memo starts none).
    pub started: std::sync::atomic::AtomicUsize,
}

impl Translators {
    /// No pipeline running yet; at most `memo_cap` answers remembered.
    pub fn new(memo_cap: usize) -> Translators {
        Translators {
            pipes: std::sync::Mutex::new(HashMap::new()),
            memo: std::sync::Mutex::new(Lru::new(memo_cap)),
            started: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// The translation of `text` (the memo's, else the pair's warm pipeline's, started on first
    /// use; a pipeline that fails is replaced once).
    pub fn translate(&self, pair: &str, text: &str, deadline: Duration) -> Result<String, Error> {
        let key = (pair.to_string(), text.to_string());
        if let Some(t) = lock(&self.memo).get(&key) {
            return Ok(t);
        }
        let mut pipes = lock(&self.pipes);
        loop {
            let fresh = !pipes.contains_key(pair);
            if fresh {
                let p = Pipeline::start(pair)?;
                self.started
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                pipes.insert(pair.to_string(), p);
            }
            let Some(p) = pipes.get_mut(pair) else {
                continue;
            };
            match p.translate(text, deadline) {
                Ok(t) => {
                    lock(&self.memo).put(key, t.clone());
                    return Ok(t);
                }
                Err(e) => {
                    // A pipeline that had answered before may just have died: one fresh try.
                    pipes.remove(pair);
                    if fresh {
                        return Err(e);
                    }
                }
            }
        }
    }
}

fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// A small least-recently-used map (translations: a few hundred short strings).
pub struct Lru<K, V> {
    cap: usize,
    tick: u64,
    map: HashMap<K, (V, u64)>,
}

impl<K: std::hash::Hash + Eq + Clone, V: Clone> Lru<K, V> {
    /// An empty map holding at most `cap` entries.
    pub fn new(cap: usize) -> Lru<K, V> {
        Lru {
            cap: cap.max(1),
            tick: 0,
            map: HashMap::new(),
        }
    }

    /// The value of `k`, now the most recently used.
    pub fn get(&mut self, k: &K) -> Option<V> {
        self.tick += 1;
        let tick = self.tick;
        self.map.get_mut(k).map(|(v, t)| {
            *t = tick;
            v.clone()
        })
    }

    /// Insert, evicting the least recently used entry when full.
    pub fn put(&mut self, k: K, v: V) {
        self.tick += 1;
        if self.map.len() >= self.cap && !self.map.contains_key(&k) {
            if let Some(old) = self
                .map
                .iter()
                .min_by_key(|(_, (_, t))| *t)
                .map(|(k, _)| k.clone())
            {
                self.map.remove(&old);
            }
        }
        self.map.insert(k, (v, self.tick));
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_deformatted_and_reformatted_like_apertium_txt() {
        assert_eq!(
            String::from_utf8(deformat("a/b [x] ^y$ <z> @w {v} \\u ~t\n")).unwrap(),
            "a\\/b \\[x\\] \\^y\\$ \\<z\\> \\@w \\{v\\} \\\\u  t [][\n]\0"
        );
        assert_eq!(reformat("Un \\/b \\[x\\] \\@w [][\n]\0"), "Un /b [x] @w");
    }

    #[test]
    fn only_installed_pairs_with_plain_names_are_started() {
        assert!(matches!(mode_file("../etc"), Err(Error::BadPair(_))));
        assert!(matches!(mode_file("eng-spa/x"), Err(Error::BadPair(_))));
        assert!(matches!(mode_file("Eng-spa"), Err(Error::BadPair(_))));
        assert!(matches!(mode_file("zzz-qqq"), Err(Error::NotInstalled(_))));
    }

    #[test]
    fn the_least_recently_used_entry_goes_first() {
        let mut l = Lru::new(2);
        l.put("a", 1);
        l.put("b", 2);
        assert_eq!(l.get(&"a"), Some(1));
        l.put("c", 3);
        assert_eq!(l.get(&"b"), None);
        assert_eq!((l.get(&"a"), l.get(&"c"), l.len()), (Some(1), Some(3), 2));
    }

    #[cfg_attr(not(kdd_apertium), ignore = "Apertium with eng-spa is not installed")]
    #[test]
    fn the_warm_pipeline_answers_like_a_cold_apertium() {
        let texts = [
            "what happens when the file is removed",
            "who can approve a return?",
            "source_hash / BR-MERGE-001 when [x] is ^removed$ <a> @b *c {d} e\\f",
            "¿Qué pasa con el pedido cuando se paga?",
        ];
        for pair in ["eng-spa", "spa-eng"] {
            let mut p = Pipeline::start(pair).expect("pipeline starts");
            for t in texts {
                let cold = Command::new("apertium")
                    .args(["-u", pair])
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .spawn()
                    .and_then(|mut c| {
                        c.stdin
                            .take()
                            .unwrap()
                            .write_all(format!("{t}\n").as_bytes())?;
                        c.wait_with_output()
                    })
                    .expect("apertium runs");
                let cold = String::from_utf8_lossy(&cold.stdout).trim().to_string();
                let warm = p.translate(t, Duration::from_secs(20)).expect("answer");
                assert_eq!(warm, cold, "{pair}: {t}");
            }
        }
    }
}
