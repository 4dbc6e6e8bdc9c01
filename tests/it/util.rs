//! Small generic helpers shared by the integration tests: temp git repos, running the real
//! binaries, copying fixtures, hashing trees, locating `../shared`.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The crate root (where `Cargo.toml` is).
pub fn crate_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A fixture folder under `fixtures/`.
pub fn fixture(name: &str) -> PathBuf {
    crate_root().join("fixtures").join(name)
}

/// `../shared` next to the crate (or one level further up, for git worktrees), when present.
/// Tests that need it are ignored unless build.rs saw it (`cfg(kdd_shared)`).
pub fn shared_dir() -> Option<PathBuf> {
    let root = crate_root();
    [root.join("../shared"), root.join("../../shared")]
        .into_iter()
        .find(|p| p.join("corpus").is_dir())
}

/// Run `git` in `dir`, panicking with its stderr on failure.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .expect("git runs");
    assert!(
        out.status.success(),
        "git {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A fresh temp git repository (with a committer identity).
pub fn git_repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    git(dir.path(), &["init", "-q", "-b", "main"]);
    git(dir.path(), &["config", "user.email", "test@example.com"]);
    git(dir.path(), &["config", "user.name", "Test"]);
    git(dir.path(), &["config", "commit.gpgsign", "false"]);
    dir
}

/// Recursively copy `src` into `dst` (created).
pub fn copy_dir(src: &Path, dst: &Path) {
    std::fs::create_dir_all(dst).expect("mkdir");
    for e in std::fs::read_dir(src).expect("read fixture dir") {
        let e = e.expect("entry");
        let to = dst.join(e.file_name());
        if e.file_type().expect("file type").is_dir() {
            copy_dir(&e.path(), &to);
        } else {
            std::fs::copy(e.path(), &to).expect("copy");
        }
    }
}

/// A temp git repo holding a copy of `fixtures/<name>` at its root.
pub fn repo_with_fixture(name: &str) -> tempfile::TempDir {
    let dir = git_repo();
    copy_dir(&fixture(name), dir.path());
    dir
}

/// Run the real `kdd` binary in `dir`. Embeddings are off (`KDD_NO_EMBED=1`) so results do not
/// depend on whether a model is installed; L2 tests use [`kdd_env`].
pub fn kdd(dir: &Path, args: &[&str]) -> Output {
    kdd_env(dir, args, &[("KDD_NO_EMBED", "1")])
}

/// Run the real `kdd` binary in `dir` with extra environment variables (the warm embedder
/// server and query translation are off unless `KDD_EMBED_WARM` / `KDD_TRANSLATE` are given).
pub fn kdd_env(dir: &Path, args: &[&str], envs: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_kdd"));
    c.args(args)
        .current_dir(dir)
        .env_remove("KDD_SPECS")
        .env_remove("KDD_CACHE_DIR")
        .env_remove("KDD_NO_EMBED")
        .env_remove("KDD_TEST_EMBEDDER")
        .env_remove("KDD_TRANSLATOR")
        .env("KDD_TRANSLATE", "off")
        .env("KDD_EMBED_WARM", "0");
    for (k, v) in envs {
        c.env(k, v);
    }
    c.output().expect("kdd runs")
}

/// One check of `kdd doctor --json --no-load` (by name), run with extra environment variables.
pub fn doctor_check(dir: &Path, envs: &[(&str, &str)], name: &str) -> serde_json::Value {
    let o = kdd_env(dir, &["doctor", "--json", "--no-load"], envs);
    let v: serde_json::Value =
        serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&o)));
    v["checks"]
        .as_array()
        .and_then(|cs| cs.iter().find(|c| c["name"] == name))
        .cloned()
        .unwrap_or_else(|| panic!("no check {name}: {v}"))
}

/// The `score` of every result of a JSON answer, in order.
pub fn scores(v: &serde_json::Value) -> Vec<f64> {
    v["results"]
        .as_array()
        .unwrap_or_else(|| panic!("no results array: {v}"))
        .iter()
        .map(|r| r["score"].as_f64().unwrap())
        .collect()
}

/// stdout + stderr of an output, for assertion messages.
pub fn text(o: &Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}\n--- stderr\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Every file under `root` (relative path → bytes), sorted.
pub fn tree(root: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd.flatten() {
            let p = e.path();
            if e.file_type().map(|t| t.is_dir()).unwrap_or(false) {
                walk(base, &p, out);
            } else {
                let rel = p
                    .strip_prefix(base)
                    .unwrap()
                    .to_string_lossy()
                    .replace('\\', "/");
                out.insert(rel, std::fs::read(&p).unwrap_or_default());
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(root, root, &mut out);
    out
}

/// A temp repo holding `fixtures/<name>/specs`, indexed by `kdd index` and committed.
pub fn indexed_fixture_repo(name: &str) -> tempfile::TempDir {
    let dir = git_repo();
    copy_dir(
        &fixture(&format!("{name}/specs")),
        &dir.path().join("specs"),
    );
    let o = kdd(dir.path(), &["index"]);
    assert!(o.status.success(), "{}", text(&o));
    git(dir.path(), &["add", "-A"]);
    git(dir.path(), &["commit", "-qm", "specs"]);
    dir
}

/// The `field` of every item of the array `key` of a JSON answer (empty when absent).
pub fn ids(v: &serde_json::Value, key: &str, field: &str) -> Vec<String> {
    v[key]
        .as_array()
        .unwrap_or(&Vec::new())
        .iter()
        .map(|x| x[field].as_str().unwrap_or("").to_string())
        .collect()
}
