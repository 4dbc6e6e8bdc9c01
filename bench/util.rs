//! Helpers every process-driving benchmark shares: the `kdd` binary under test and a quiet git.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The `kdd` binary to measure: `KDD_BIN`, else the one built beside this bench
/// (`target/<profile>/deps/bench-…` → `target/<profile>/kdd`).
pub fn kdd_bin() -> PathBuf {
    if let Ok(p) = std::env::var("KDD_BIN") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().expect("bench path");
    let dir = exe.parent().and_then(Path::parent).expect("target dir");
    dir.join("kdd")
}

/// Run git in `dir` with a fixed identity and no system configuration; panics on failure.
pub fn git(dir: &Path, args: &[&str]) {
    let ok = Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "b")
        .env("GIT_AUTHOR_EMAIL", "b@example.com")
        .env("GIT_COMMITTER_NAME", "b")
        .env("GIT_COMMITTER_EMAIL", "b@example.com")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(ok, "git {args:?} failed");
}

/// `kdd index` in `dir` (a git repository holding `specs/`), then everything committed; the
/// time the index took.
pub fn index_and_commit(bin: &Path, dir: &Path) -> std::time::Duration {
    let t = std::time::Instant::now();
    let o = Command::new(bin)
        .arg("index")
        .current_dir(dir)
        .output()
        .expect("kdd index runs");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let took = t.elapsed();
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-qm", "corpus"]);
    took
}
