//! Snapshot tests (insta): the `--json` answer of every read command, and of `index`, `status`,
//! `verify` and `resolve`, on the demo corpus at L1 (`KDD_NO_EMBED=1`, so the answers do not
//! depend on whether a model is installed). The snapshots live in `tests/it/snapshots/`; a change
//! in any answer shows as a reviewable diff (`INSTA_UPDATE=always cargo test --test it snapshots`
//! rewrites them; review with `git diff`).
//!
//! Normalisation, so the snapshots are the same on every machine: the temporary repository path
//! becomes `[repo]`, the cache directory `[cache]`, and timing fields (`*_ms`, `elapsed*`,
//! `seconds`) become 0. Nothing else is redacted: ids, scores, order and warnings are the
//! product's answer and are pinned as they are.
//!
//! `kdd doctor` is not snapshotted: its answer describes the machine (runtime, model, service)
//! and is covered by the doctor tests instead.

use crate::util::{self, kdd_env, text};
use serde_json::Value;
use std::path::Path;

/// Replace machine-specific values (paths, timings) in place.
fn normalise(v: &mut Value, repo: &str, cache: &str) {
    match v {
        Value::String(s) if s.contains(repo) || s.contains(cache) => {
            *s = s.replace(repo, "[repo]").replace(cache, "[cache]");
        }
        Value::Array(a) => a.iter_mut().for_each(|x| normalise(x, repo, cache)),
        Value::Object(o) => {
            for (k, x) in o.iter_mut() {
                let timing = k.ends_with("_ms") || k.starts_with("elapsed") || k == "seconds";
                if timing && x.is_number() {
                    *x = Value::from(0);
                } else {
                    normalise(x, repo, cache);
                }
            }
        }
        _ => {}
    }
}

/// Run `kdd --json <args>` in `repo` and return its normalised JSON answer.
fn answer(repo: &Path, cache: &Path, args: &[&str]) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let cache_s = cache.to_string_lossy().into_owned();
    let o = kdd_env(
        repo,
        &all,
        &[("KDD_NO_EMBED", "1"), ("KDD_CACHE_DIR", cache_s.as_str())],
    );
    let mut v: Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("kdd {args:?}: not JSON ({e}): {:?}", text(&o)));
    let repo_s = repo
        .canonicalize()
        .unwrap_or(repo.to_path_buf())
        .to_string_lossy()
        .into_owned();
    normalise(&mut v, &repo_s, &cache_s);
    // A path may also be printed as given (not canonical).
    normalise(&mut v, &repo.to_string_lossy(), &cache_s);
    v
}

#[test]
fn every_command_answers_the_same_json_on_the_demo_corpus() {
    let repo = util::repo_with_fixture("demo");
    let cache = tempfile::tempdir().expect("cache dir");
    let (r, c) = (repo.path(), cache.path());
    util::git(r, &["add", "-A"]);
    util::git(r, &["commit", "-qm", "demo"]);
    let cases: &[(&str, &[&str])] = &[
        ("index", &["index"]),
        ("status", &["status"]),
        ("query", &["query", "cancel an order that was already paid"]),
        ("query_es", &["query", "¿cómo se reembolsa una devolución?"]),
        ("query_nonsense", &["query", "zzzzqqqq xyzzyplugh"]),
        ("search_lexical", &["search", "--lexical", "reembolso"]),
        ("graph", &["graph", "UC-002"]),
        ("impact", &["impact", "Entity:Pedido"]),
        ("coverage", &["coverage", "UC-001"]),
        ("violations", &["violations"]),
        ("orphans", &["orphans"]),
        (
            "context",
            &["context", "--hint", "cancelar pedido", "CMD-002"],
        ),
        ("verify_staged", &["verify", "--staged"]),
    ];
    for (name, args) in cases {
        let v = answer(r, c, args);
        insta::assert_json_snapshot!(*name, v);
    }
    // The index is committed: verify the commit and resolve (nothing conflicted).
    util::git(r, &["add", "-A"]);
    util::git(r, &["commit", "-qm", "index"]);
    insta::assert_json_snapshot!("verify_head", answer(r, c, &["verify"]));
    insta::assert_json_snapshot!("resolve_clean", answer(r, c, &["resolve"]));
}
