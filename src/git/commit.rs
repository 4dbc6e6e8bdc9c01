//! Commit what a post-merge / post-rewrite / post-commit heal staged, so a merge, rebase,
//! cherry-pick or revert ends with a clean `git status` and an index that verifies at `HEAD`.
//!
//! Two ways, both plumbing only (git may still hold rebase state while `post-rewrite` runs, so
//! `git commit` is never used, and no hook runs again):
//! - [`amend_head`]: rewrite `HEAD` with the staged tree, keeping its parents, author,
//!   committer, encoding and message byte for byte (a signature header is dropped: it would no
//!   longer match). Only for a commit that exists on the current branch alone ([`head_is_local`]),
//!   i.e. the merge commit, rebased tip or picked commit the operation just made.
//! - [`commit_on_head`]: a follow-up commit on top of `HEAD` (fast-forwards, where `HEAD` is
//!   somebody else's commit too).
//!
//! Invariants: `HEAD` moves with `update-ref <new> <old>`, so a concurrent change of `HEAD`
//! makes the step fail instead of losing a commit; nothing is done unless the staging area
//! differs from `HEAD` only in the paths the heal staged.

use super::{git, git_stdin, Error};
use std::path::Path;

/// True when the staging area differs from `HEAD` in exactly paths out of `staged` (and in at
/// least one).
pub fn only_staged(dir: &Path, staged: &[String]) -> Result<bool, Error> {
    let cached = git(dir, &["diff", "--cached", "--name-only", "--no-renames"])?;
    let mut any = false;
    for p in cached.lines() {
        if !staged.iter().any(|s| s == p) {
            return Ok(false);
        }
        any = true;
    }
    Ok(any)
}

/// True when `HEAD` is a commit no ref other than the current branch contains (no other
/// branch, tag or remote-tracking ref): rewriting it cannot change anybody else's history.
pub fn head_is_local(dir: &Path) -> Result<bool, Error> {
    let branch = match git(dir, &["symbolic-ref", "-q", "HEAD"]) {
        Ok(b) => b.trim().to_string(),
        Err(_) => return Ok(false), // detached HEAD: leave history alone
    };
    let refs = git(
        dir,
        &["for-each-ref", "--format=%(refname)", "--contains", "HEAD"],
    )?;
    Ok(refs.lines().all(|r| r == branch))
}

/// Rewrite `HEAD` with the staged tree (see the module doc). Returns the new commit id.
pub fn amend_head(dir: &Path, reason: &str) -> Result<String, Error> {
    let tree = git(dir, &["write-tree"])?;
    let head = git(dir, &["rev-parse", "HEAD"])?;
    let raw = git(dir, &["cat-file", "commit", head.trim()])?;
    let body = replace_tree(&raw, tree.trim());
    let new = git_stdin(
        dir,
        &["hash-object", "-t", "commit", "-w", "--stdin"],
        body.as_bytes(),
        &[],
    )?;
    let msg = format!("kdd: {reason} (amend)");
    git(
        dir,
        &["update-ref", "-m", &msg, "HEAD", new.trim(), head.trim()],
    )?;
    Ok(new.trim().to_string())
}

/// A follow-up commit of the staged tree on top of `HEAD`. Returns the new commit id.
pub fn commit_on_head(dir: &Path, message: &str) -> Result<String, Error> {
    let tree = git(dir, &["write-tree"])?;
    let head = git(dir, &["rev-parse", "HEAD"])?;
    let commit = git(
        dir,
        &["commit-tree", tree.trim(), "-p", head.trim(), "-m", message],
    )?;
    git(
        dir,
        &[
            "update-ref",
            "-m",
            message,
            "HEAD",
            commit.trim(),
            head.trim(),
        ],
    )?;
    Ok(commit.trim().to_string())
}

/// The raw commit `raw` with its `tree` header set to `tree` and signature headers removed.
fn replace_tree(raw: &str, tree: &str) -> String {
    let (headers, message) = raw.split_once("\n\n").unwrap_or((raw, ""));
    let mut out = String::with_capacity(raw.len());
    let mut in_sig = false;
    for line in headers.lines() {
        if in_sig && line.starts_with(' ') {
            continue;
        }
        in_sig = false;
        if line.starts_with("gpgsig ") || line.starts_with("gpgsig-sha256 ") {
            in_sig = true;
            continue;
        }
        if line.starts_with("tree ") {
            out.push_str("tree ");
            out.push_str(tree);
        } else {
            out.push_str(line);
        }
        out.push('\n');
    }
    out.push('\n');
    out.push_str(message);
    out
}

#[cfg(test)]
mod tests {
    use super::replace_tree;

    #[test]
    fn tree_replaced_signature_dropped_message_kept() {
        let raw = "tree aaaa\nparent bbbb\nparent cccc\nauthor A <a@x> 1 +0000\n\
                   committer C <c@x> 2 +0000\ngpgsig -----BEGIN PGP SIGNATURE-----\n \n abc\n \
                   -----END PGP SIGNATURE-----\n\nMerge branch 'x'\n\n  body\n";
        let got = replace_tree(raw, "dddd");
        assert_eq!(
            got,
            "tree dddd\nparent bbbb\nparent cccc\nauthor A <a@x> 1 +0000\n\
             committer C <c@x> 2 +0000\n\nMerge branch 'x'\n\n  body\n"
        );
    }
}
