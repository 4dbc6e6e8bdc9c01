//! The git transport: the index travels on its own ref, `refs/kdd/index/<branch>`, whose tree
//! holds ONLY `.kdd-index/` — a team server repository can collect indexes from repositories
//! whose specs it never receives.
//!
//! Push: the local artifacts are written as blobs + one tree + one commit with gix (no work
//! tree or staging area is touched); when the remote ref already holds an index this clone has
//! not got, the two are merged per BR-MERGE-001 (`merge::refs`, the code of `kdd merge-index`)
//! and the merged tree is committed on top of the remote tip, so the ref only fast-forwards.
//! The commit is sent with `git push <remote> <commit>:refs/kdd/index/<branch>` (the git CLI:
//! credentials, protocols and hooks are git's own). Pull: `git fetch` of that ref into
//! `refs/kdd/fetched/<remote>/<branch>`, a BR-MERGE-001 merge of the local index with it, and
//! the result installed into `.kdd-index/`; `refs/kdd/sync/<remote>/<branch>` then records the
//! remote tip synced.
//!
//! Invariants: the only writes are git objects and those `refs/kdd/…` refs in the local
//! repository, the remote ref, and (pull, at the very end) `.kdd-index/`; any failure before
//! that leaves `.kdd-index/` untouched. The local snapshot commit has no parent, so the merge
//! has no common ancestor: nodes are united and differing versions resolved last-write-wins —
//! a deletion does not travel through sync (see README "Sync"). `GIT_TERMINAL_PROMPT=0`: a
//! remote asking for credentials fails (`AUTH_FAILED`) instead of hanging.

use super::{count, Error, Report, TREE_DIR};
use crate::git;
use gix::ObjectId;
use std::collections::BTreeMap;
use std::path::Path;

/// The ref an index travels on.
pub fn remote_ref(branch: &str) -> String {
    format!("refs/kdd/index/{branch}")
}

/// Options of a git-transport sync.
#[derive(Debug, Clone)]
pub struct Options {
    /// Remote name (or URL).
    pub remote: String,
    /// Branch whose index ref to sync (default: the checked-out branch).
    pub branch: Option<String>,
    /// Push titles and aliases (see `super::collect`).
    pub text: bool,
}

/// A remote as one ref-name component: a plain remote name as is, anything else (a URL, a
/// path) as `url-` + 16 hex digits of its blake3.
fn ref_component(remote: &str) -> String {
    let plain = !remote.is_empty()
        && !remote.starts_with('.')
        && !remote.ends_with(".lock")
        && !remote.contains("..")
        && remote
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if plain {
        remote.to_string()
    } else {
        format!("url-{}", &blake3::hash(remote.as_bytes()).to_hex()[..16])
    }
}

fn run_git(dir: &Path, args: &[&str]) -> Result<String, git::Error> {
    git::git_stdin(dir, args, b"", &[("GIT_TERMINAL_PROMPT", Path::new("0"))])
}

fn rev(dir: &Path, name: &str) -> Option<String> {
    git::git(
        dir,
        &["rev-parse", "--verify", "-q", &format!("{name}^{{commit}}")],
    )
    .ok()
    .map(|s| s.trim().to_string())
    .filter(|s| !s.is_empty())
}

fn branch_of(dir: &Path, o: &Options) -> Result<String, Error> {
    if let Some(b) = &o.branch {
        return Ok(b.clone());
    }
    git::git(dir, &["symbolic-ref", "--short", "-q", "HEAD"])
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .ok_or_else(|| Error::transport("sync", "HEAD is not on a branch: pass --branch NAME"))
}

/// Check the remote exists (a configured name, or something that looks like a URL/path).
fn check_remote(dir: &Path, remote: &str) -> Result<(), Error> {
    // git would read a leading `-` as an option (`--upload-pack=…` runs a command).
    if remote.starts_with('-') {
        return Err(Error::RemoteUnreachable {
            remote: remote.to_string(),
            detail: "a remote name or URL cannot start with `-`".into(),
        });
    }
    let looks_like_url = remote.contains('/') || remote.contains(':');
    if looks_like_url || git::git(dir, &["remote", "get-url", remote]).is_ok() {
        return Ok(());
    }
    Err(Error::RemoteUnreachable {
        remote: remote.to_string(),
        detail: format!("no remote named `{remote}`; add one with `git remote add {remote} URL`"),
    })
}

/// True when `code` stands alone in `text` (an HTTP status such as `returned error: 403`), not
/// inside a temporary path or an object id that happens to contain its digits.
fn has_token(text: &str, code: &str) -> bool {
    text.split(|c: char| !c.is_ascii_alphanumeric())
        .any(|t| t == code)
}

/// Map a failed `git fetch` / `git push` to a CMD-005 error.
fn classify(remote: &str, direction: &str, e: git::Error) -> Error {
    let msg = e.to_string();
    let low = msg.to_ascii_lowercase();
    // git's own reason: its first `fatal:`/`error:` line, else the last line.
    let detail = msg
        .lines()
        .find(|l| l.contains("fatal:") || l.contains("error:") || l.contains("[rejected]"))
        .or_else(|| msg.lines().last())
        .unwrap_or("")
        .trim()
        .to_string();
    if low.contains("couldn't find remote ref") {
        Error::NoRemoteIndex(remote.to_string())
    } else if low.contains("authentication failed")
        || low.contains("permission denied")
        || low.contains("could not read username")
        || has_token(&low, "403")
        || has_token(&low, "401")
    {
        Error::AuthFailed {
            remote: remote.to_string(),
            detail,
        }
    } else if low.contains("[rejected]")
        || low.contains("[remote rejected]")
        || low.contains("non-fast-forward")
        || low.contains("fetch first")
    {
        Error::PushRejected(format!(
            "the remote refused the update of its index ref ({detail}); run `kdd sync push` again"
        ))
    } else if low.contains("does not appear to be a git repository")
        || low.contains("could not read from remote")
        || low.contains("unable to access")
        || low.contains("could not resolve")
        || low.contains("connection")
        || low.contains("no such file")
    {
        Error::RemoteUnreachable {
            remote: remote.to_string(),
            detail,
        }
    } else {
        Error::transport(direction, detail)
    }
}

/// Fetch the remote index ref into `refs/kdd/fetched/<remote>/<branch>`: its commit, or
/// `None` when the remote has no such ref.
fn fetch(dir: &Path, remote: &str, branch: &str, direction: &str) -> Result<Option<String>, Error> {
    let local = format!("refs/kdd/fetched/{}/{branch}", ref_component(remote));
    let spec = format!("+{}:{local}", remote_ref(branch));
    match run_git(dir, &["fetch", "--quiet", "--no-tags", remote, &spec]) {
        Ok(_) => Ok(rev(dir, &local)),
        Err(e) => match classify(remote, direction, e) {
            Error::NoRemoteIndex(_) => Ok(None),
            other => Err(other),
        },
    }
}

fn gix_err(e: impl std::fmt::Display) -> Error {
    Error::transport("sync", format!("writing the index commit: {e}"))
}

/// Write `files` as a tree holding only `.kdd-index/` and a commit of it with `parents`.
fn commit_files(
    repo: &gix::Repository,
    files: &BTreeMap<String, Vec<u8>>,
    parents: &[ObjectId],
    message: &str,
) -> Result<ObjectId, Error> {
    let mut ed = repo
        .edit_tree(ObjectId::empty_tree(repo.object_hash()))
        .map_err(gix_err)?;
    for (rel, bytes) in files {
        let id = repo.write_blob(bytes).map_err(gix_err)?.detach();
        ed.upsert(
            format!("{TREE_DIR}/{rel}").as_str(),
            gix::object::tree::EntryKind::Blob,
            id,
        )
        .map_err(gix_err)?;
    }
    let tree = ed.write().map_err(gix_err)?.detach();
    let sig = gix::actor::Signature {
        name: "kdd sync".into(),
        email: "kdd@localhost".into(),
        time: gix::date::Time::now_utc(),
    };
    let commit = gix::objs::Commit {
        message: message.into(),
        tree,
        author: sig.clone(),
        committer: sig,
        encoding: None,
        parents: parents.iter().copied().collect(),
        extra_headers: Vec::new(),
    };
    Ok(repo.write_object(commit).map_err(gix_err)?.detach())
}

fn tree_of(dir: &Path, commit: &str) -> Option<String> {
    rev(dir, commit).and_then(|_| {
        git::git(dir, &["rev-parse", &format!("{commit}^{{tree}}")])
            .ok()
            .map(|s| s.trim().to_string())
    })
}

/// The files of the `.kdd-index/` of a commit (relative to the index root).
fn files_at(repo: &gix::Repository, commit: &str) -> Result<BTreeMap<String, Vec<u8>>, Error> {
    Ok(crate::merge::refs::read_artifacts(repo, commit)?
        .into_iter()
        .collect())
}

/// Merge the local snapshot commit with the fetched remote tip (BR-MERGE-001).
fn merge(
    dir: &Path,
    local: &ObjectId,
    remote: &str,
    report: &mut Report,
) -> Result<BTreeMap<String, Vec<u8>>, Error> {
    let revs = vec![local.to_string(), remote.to_string()];
    let merged = crate::merge::refs::merge_refs(dir, &revs).map_err(|e| match e {
        crate::merge::refs::Error::Incompatible(m) => Error::Incompatible(m),
        other => Error::Merge(other),
    })?;
    report.conflicts_resolved = merged.conflicts_resolved.len();
    report.warnings.extend(merged.warnings);
    Ok(super::normalise(merged.files))
}

/// `kdd sync push` over git.
pub fn push(repo_dir: &Path, index_dir: &Path, o: &Options) -> Result<Report, Error> {
    let files = super::collect(index_dir, o.text)?;
    let branch = branch_of(repo_dir, o)?;
    check_remote(repo_dir, &o.remote)?;
    let mut report = Report {
        direction: "push".into(),
        transport: "git".into(),
        remote: o.remote.clone(),
        remote_ref: Some(remote_ref(&branch)),
        text: o.text,
        ..Report::default()
    };
    let repo = git::open(repo_dir).map_err(gix_err)?;
    let remote_tip = fetch(repo_dir, &o.remote, &branch, "push")?;
    let local = commit_files(&repo, &files, &[], "kdd sync: local index snapshot")?;
    let (commit, sent) = match &remote_tip {
        None => (local, files),
        Some(tip) => {
            let merged = merge(repo_dir, &local, tip, &mut report).map_err(|e| match e {
                Error::Incompatible(m) => Error::PushRejected(m),
                other => other,
            })?;
            let tip_id = ObjectId::from_hex(tip.as_bytes()).map_err(gix_err)?;
            let c = commit_files(&repo, &merged, &[tip_id], "kdd sync: index")?;
            (c, merged)
        }
    };
    count(&mut report, &sent);
    let cid = commit.to_string();
    if let Some(tip) = &remote_tip {
        if tree_of(repo_dir, tip) == tree_of(repo_dir, &cid) {
            report.up_to_date = true;
            report.commit = Some(tip.clone());
            return Ok(report);
        }
    }
    let spec = format!("{cid}:{}", remote_ref(&branch));
    run_git(repo_dir, &["push", "--quiet", &o.remote, &spec])
        .map_err(|e| classify(&o.remote, "push", e))?;
    let track = format!("refs/kdd/sync/{}/{branch}", ref_component(&o.remote));
    let _ = git::git(repo_dir, &["update-ref", &track, &cid]);
    report.commit = Some(cid);
    Ok(report)
}

/// `kdd sync pull` over git.
pub fn pull(repo_dir: &Path, index_dir: &Path, o: &Options) -> Result<Report, Error> {
    let branch = branch_of(repo_dir, o)?;
    check_remote(repo_dir, &o.remote)?;
    let mut report = Report {
        direction: "pull".into(),
        transport: "git".into(),
        remote: o.remote.clone(),
        remote_ref: Some(remote_ref(&branch)),
        text: true,
        ..Report::default()
    };
    let local_files = match super::collect(index_dir, true) {
        Ok(f) => Some(f),
        Err(Error::NoLocalIndex(_)) => None,
        Err(e) => return Err(e),
    };
    let Some(tip) = fetch(repo_dir, &o.remote, &branch, "pull")? else {
        return Err(Error::NoRemoteIndex(o.remote.clone()));
    };
    let repo = git::open(repo_dir).map_err(gix_err)?;
    let files = match &local_files {
        None => files_at(&repo, &tip)?,
        Some(local) => {
            let c = commit_files(&repo, local, &[], "kdd sync: local index snapshot")?;
            merge(repo_dir, &c, &tip, &mut report)?
        }
    };
    if !files.contains_key("manifest.json") {
        return Err(Error::NoRemoteIndex(o.remote.clone()));
    }
    count(&mut report, &files);
    report.up_to_date = local_files.as_ref() == Some(&files);
    if !report.up_to_date {
        super::install(index_dir, &files)?;
    }
    let track = format!("refs/kdd/sync/{}/{branch}", ref_component(&o.remote));
    let _ = git::git(repo_dir, &["update-ref", &track, &tip]);
    report.commit = Some(tip);
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::has_token;

    #[test]
    fn an_http_status_is_a_whole_token_not_digits_in_a_path_or_id() {
        assert!(has_token("the requested url returned error: 403", "403"));
        assert!(has_token("http 401 unauthorized", "401"));
        assert!(!has_token("/tmp/.tmp4013xk/locked.git", "401"));
        assert!(!has_token(
            "! [remote rejected] e4403a1 -> refs/kdd/index",
            "403"
        ));
    }
}
