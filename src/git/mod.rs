//! The only module that reads git objects (through gix) or runs the `git` binary.
//!
//! - Reading: the staging area (honouring `GIT_INDEX_FILE`, which git points at `index.lock`
//!   for `commit -a` and at a temporary `next-index-*.lock` for `commit --only`), trees at any
//!   revision (bare repositories included) and blobs. Paths are repo-relative, `/`-separated.
//! - Writing: only [`stage_paths`], which updates exactly the given paths in the index git is
//!   committing (`git update-index --add --remove`, never `add -A`/`-u`), and
//!   [`sparse::skip_worktree`], which marks such paths left out of a sparse checkout.
//! - Diffs are plain comparisons of `path → blob id` maps, so rename = delete + add.

mod commit;
pub mod roots;
pub mod sparse;

pub use commit::{amend_head, commit_on_head, head_is_local, only_staged};

use gix::ObjectId;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Errors talking to git. Every variant says what was being read or run.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{path}: cannot open git repository: {message}")]
    Open { path: PathBuf, message: String },
    #[error("{what}: {message}")]
    Read { what: String, message: String },
    #[error("`git {args}` failed: {stderr}")]
    Command { args: String, stderr: String },
    #[error("cannot run `git` ({0}); is git installed and on PATH?")]
    Spawn(std::io::Error),
}

/// `path → blob id` of the files under a prefix (a tree or a staging area).
pub type Entries = BTreeMap<String, ObjectId>;

/// Open the repository containing `path` (work tree, linked worktree or bare).
pub fn open(path: &Path) -> Result<gix::Repository, Error> {
    gix::discover(path).map_err(|e| Error::Open {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

fn read_err(what: impl Into<String>) -> impl FnOnce(gix::Error) -> Error {
    let what = what.into();
    move |e| Error::Read {
        what,
        message: e.to_string(),
    }
}

/// The index file git is using right now: `$GIT_INDEX_FILE` when set (relative to the current
/// directory, as git does), else the repository's own index.
pub fn index_file(repo: &gix::Repository) -> PathBuf {
    match std::env::var_os("GIT_INDEX_FILE") {
        Some(p) if !p.is_empty() => {
            let p = PathBuf::from(p);
            if p.is_absolute() {
                p
            } else {
                std::env::current_dir().unwrap_or_default().join(p)
            }
        }
        _ => repo.index_path(),
    }
}

/// Load the staging area git is committing (an empty one when no index file exists yet).
pub fn load_index(repo: &gix::Repository) -> Result<gix::index::File, Error> {
    let path = index_file(repo);
    if !path.exists() {
        return Ok(gix::index::File::from_state(
            gix::index::State::new(repo.object_hash()),
            path,
        ));
    }
    // The trailing checksum is not re-verified (git wrote and verifies this file; hashing a
    // large index costs more than decoding it).
    gix::index::File::at(
        &path,
        repo.object_hash(),
        true,
        gix::index::decode::Options::default(),
    )
    .map_err(|e| Error::Read {
        what: path.display().to_string(),
        message: e.to_string(),
    })
}

fn under(path: &str, prefix: &str) -> bool {
    prefix.is_empty()
        || (path.len() > prefix.len()
            && path.starts_with(prefix)
            && path.as_bytes()[prefix.len()] == b'/')
}

/// Staged (stage 0) blobs under `prefix` (`""` = everything) of a loaded index. Symbolic links
/// (mode 120000) are never returned: their blob is a link target, not a file's bytes (see
/// [`index_links`] and [`crate::source`]).
pub fn index_entries(index: &gix::index::File, prefix: &str) -> Entries {
    index_entries_and_links(index, prefix).0
}

/// Staged (stage 0) symbolic links under `prefix`, sorted: each spec path among them is the
/// per-file error [`crate::source::symlink_diagnostic`], as in `kdd index`.
pub fn index_links(index: &gix::index::File, prefix: &str) -> Vec<String> {
    index_entries_and_links(index, prefix).1
}

/// The first folder of `specs_root` (`docs`, then `docs/specs`) staged as a symbolic link, if
/// any: the whole specs root is then unreadable, as `kdd index` says for the work tree.
pub fn staged_root_link(index: &gix::index::File, specs_root: &str) -> Option<String> {
    let mut prefix = String::new();
    for c in specs_root.split('/').filter(|c| !c.is_empty()) {
        if !prefix.is_empty() {
            prefix.push('/');
        }
        prefix.push_str(c);
        let link = index
            .entry_by_path(prefix.as_str().into())
            .is_some_and(|e| e.mode == gix::index::entry::Mode::SYMLINK);
        if link {
            return Some(prefix);
        }
    }
    None
}

fn index_entries_and_links(index: &gix::index::File, prefix: &str) -> (Entries, Vec<String>) {
    let mut out = Entries::new();
    let mut links = Vec::new();
    let entries = if prefix.is_empty() {
        Some(index.entries())
    } else {
        index.prefixed_entries(format!("{prefix}/").as_str().into())
    };
    for e in entries.unwrap_or_default() {
        // Unmerged stages, submodules, sparse directories and `git add -N` placeholders (their
        // staged blob is empty: the content is not staged yet) are not staged files.
        if e.stage_raw() != 0
            || e.mode.is_submodule()
            || e.mode.is_sparse()
            || e.flags.contains(gix::index::entry::Flags::INTENT_TO_ADD)
        {
            continue;
        }
        let p = e.path(index).to_string();
        if !under(&p, prefix) {
            continue;
        }
        if e.mode == gix::index::entry::Mode::SYMLINK {
            links.push(p);
        } else {
            out.insert(p, e.id);
        }
    }
    links.sort();
    (out, links)
}

/// A digest of every entry (path, stage, mode, blob id) under the given prefixes of a loaded
/// index: equal digests mean an identical staged content under those folders. No allocation per
/// entry, so it is cheap even for tens of thousands of entries.
pub fn index_stamp(index: &gix::index::File, prefixes: &[&str]) -> String {
    let mut h = blake3::Hasher::new();
    for prefix in prefixes {
        h.update(prefix.as_bytes());
        h.update(&[0xff]);
        let entries = if prefix.is_empty() {
            Some(index.entries())
        } else {
            index.prefixed_entries(format!("{prefix}/").as_str().into())
        };
        for e in entries.unwrap_or_default() {
            h.update(e.path(index));
            h.update(&[0, e.stage_raw() as u8]);
            h.update(&e.mode.bits().to_le_bytes());
            let ita = e.flags.contains(gix::index::entry::Flags::INTENT_TO_ADD);
            h.update(&[u8::from(ita)]);
            h.update(e.id.as_bytes());
        }
    }
    h.finalize().to_hex().to_string()
}

/// Paths under `prefix` that have unmerged (stage 1–3) entries.
pub fn conflicted_paths(index: &gix::index::File, prefix: &str) -> BTreeSet<String> {
    index
        .entries()
        .iter()
        .filter(|e| e.stage_raw() != 0)
        .map(|e| e.path(index).to_string())
        .filter(|p| under(p, prefix))
        .collect()
}

/// Staged blobs under `prefix` in the index git is committing.
pub fn staged_entries(repo: &gix::Repository, prefix: &str) -> Result<Entries, Error> {
    Ok(index_entries(&load_index(repo)?, prefix))
}

/// Blobs under `prefix` in the tree of `rev` (`HEAD`, a branch, a commit id). An unborn `HEAD`
/// gives an empty map (the first commit diffs against the empty tree). Symbolic links are never
/// returned (see [`tree_entries_and_links`]).
pub fn tree_entries(repo: &gix::Repository, rev: &str, prefix: &str) -> Result<Entries, Error> {
    Ok(tree_entries_and_links(repo, rev, prefix)?.0)
}

/// [`tree_entries`] plus the sorted paths of the symbolic links under `prefix` (never read).
pub fn tree_entries_and_links(
    repo: &gix::Repository,
    rev: &str,
    prefix: &str,
) -> Result<(Entries, Vec<String>), Error> {
    let id = match repo.rev_parse_single(rev) {
        Ok(id) => id,
        Err(e) => {
            if rev == "HEAD" && repo.head_id().is_err() {
                return Ok((Entries::new(), Vec::new()));
            }
            return Err(read_err(format!("revision {rev}"))(e));
        }
    };
    let tree = id
        .object()
        .and_then(|o| o.peel_to_tree())
        .map_err(read_err(format!("tree of {rev}")))?;
    let sub = if prefix.is_empty() {
        tree
    } else {
        match tree
            .lookup_entry_by_path(prefix)
            .map_err(read_err(format!("{rev}:{prefix}")))?
        {
            Some(e) if e.mode().is_tree() => e
                .object()
                .map_err(read_err(format!("{rev}:{prefix}")))?
                .into_tree(),
            _ => return Ok((Entries::new(), Vec::new())),
        }
    };
    let mut rec = gix::traverse::tree::Recorder::default();
    sub.traverse()
        .breadthfirst(&mut rec)
        .map_err(read_err(format!("{rev}:{prefix}")))?;
    let mut out = Entries::new();
    let mut links = Vec::new();
    for e in rec.records {
        let p = || {
            if prefix.is_empty() {
                e.filepath.to_string()
            } else {
                format!("{prefix}/{}", e.filepath)
            }
        };
        if e.mode.is_link() {
            links.push(p());
        } else if e.mode.is_blob() {
            out.insert(p(), e.oid);
        }
    }
    links.sort();
    Ok((out, links))
}

/// The `.kddignore` of `specs_root` among `path → blob` entries (staged or a tree): what
/// every reader of those entries must exclude (see [`crate::source::Ignore`]).
pub fn ignore_of(
    repo: &gix::Repository,
    entries: &Entries,
    specs_root: &str,
) -> Result<crate::source::Ignore, Error> {
    Ok(
        match entries.get(&crate::source::kddignore_path(specs_root)) {
            Some(id) => crate::source::Ignore::from_bytes(specs_root, &read_blob(repo, *id)?),
            None => crate::source::Ignore::none(specs_root),
        },
    )
}

/// The bytes of a blob.
pub fn read_blob(repo: &gix::Repository, id: ObjectId) -> Result<Vec<u8>, Error> {
    repo.find_blob(id)
        .map(|mut b| b.take_data())
        .map_err(read_err(format!("blob {id}")))
}

/// The bytes of blob `id` when it holds at most `max` bytes (its size is read from the object's
/// header first); `None` for a larger one, which is never inflated.
pub fn read_blob_within(
    repo: &gix::Repository,
    id: ObjectId,
    max: usize,
) -> Result<Option<Vec<u8>>, Error> {
    let size = repo
        .find_header(id)
        .map(|h| h.size())
        .map_err(|e| Error::Read {
            what: format!("blob {id}"),
            message: e.to_string(),
        })?;
    if size > max as u64 {
        return Ok(None);
    }
    read_blob(repo, id).map(Some)
}

/// The blob at `path` in `HEAD`'s tree, when `HEAD` is born and `path` is a regular file there.
pub fn head_blob(repo: &gix::Repository, path: &str) -> Option<ObjectId> {
    let tree = repo.head_tree().ok()?;
    let entry = tree.lookup_entry_by_path(path).ok()??;
    entry.mode().is_blob().then(|| entry.object_id())
}

/// The blobs git holds for the regular file `path`: its staged entries (every stage of a
/// conflict: base, ours, theirs) and `HEAD`'s. Links are never among them.
pub fn known_blobs(repo: &gix::Repository, index: &gix::index::File, path: &str) -> Vec<ObjectId> {
    use gix::{bstr::ByteSlice, index::entry::Mode};
    let staged = index
        .entry_range(path.as_bytes().as_bstr())
        .map_or(&[][..], |r| &index.entries()[r]);
    let file = |m: Mode| m == Mode::FILE || m == Mode::FILE_EXECUTABLE;
    let mut ids: Vec<ObjectId> = staged
        .iter()
        .filter(|e| file(e.mode))
        .map(|e| e.id)
        .collect();
    ids.extend(head_blob(repo, path).filter(|h| !ids.contains(h)));
    ids
}

/// Every regular file under `prefix` at `rev` with its bytes (for bare repositories: `serve`,
/// `verify`); symbolic links are never read.
pub fn read_tree_files(
    repo: &gix::Repository,
    rev: &str,
    prefix: &str,
) -> Result<Vec<(String, Vec<u8>)>, Error> {
    tree_entries(repo, rev, prefix)?
        .into_iter()
        .map(|(p, id)| Ok((p, read_blob(repo, id)?)))
        .collect()
}

/// The git blob id `bytes` would get.
pub fn blob_id(repo: &gix::Repository, bytes: &[u8]) -> ObjectId {
    gix::objs::compute_hash(repo.object_hash(), gix::objs::Kind::Blob, bytes)
        .expect("hashing a blob in memory cannot fail")
}

/// Changes between two `path → blob` maps. A rename shows as a delete plus an add.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Diff {
    pub added: Vec<String>,
    pub modified: Vec<String>,
    pub deleted: Vec<String>,
}

impl Diff {
    /// Nothing changed.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.modified.is_empty() && self.deleted.is_empty()
    }
}

/// Compare `old` and `new`.
pub fn diff(old: &Entries, new: &Entries) -> Diff {
    let mut d = Diff::default();
    for (p, id) in new {
        match old.get(p) {
            None => d.added.push(p.clone()),
            Some(o) if o != id => d.modified.push(p.clone()),
            _ => {}
        }
    }
    d.deleted = old
        .keys()
        .filter(|p| !new.contains_key(*p))
        .cloned()
        .collect();
    d
}

/// Staged changes under `prefix` relative to `HEAD` (empty tree on the first commit).
pub fn staged_diff(repo: &gix::Repository, prefix: &str) -> Result<Diff, Error> {
    Ok(diff(
        &tree_entries(repo, "HEAD", prefix)?,
        &staged_entries(repo, prefix)?,
    ))
}

/// Run `git` in `dir` and return its stdout; a non-zero exit is an error with stderr.
pub fn git(dir: &Path, args: &[&str]) -> Result<String, Error> {
    let out = Command::new("git")
        .current_dir(dir)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(Error::Spawn)?;
    if !out.status.success() {
        return Err(Error::Command {
            args: args.join(" "),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Run `git` with `input` on stdin.
pub fn git_stdin(
    dir: &Path,
    args: &[&str],
    input: &[u8],
    env: &[(&str, &Path)],
) -> Result<String, Error> {
    use std::io::Write;
    let mut cmd = Command::new("git");
    cmd.current_dir(dir)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().map_err(Error::Spawn)?;
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(input)
        .map_err(Error::Spawn)?;
    let out = child.wait_with_output().map_err(Error::Spawn)?;
    if !out.status.success() {
        return Err(Error::Command {
            args: args.join(" "),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        });
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Stage exactly `paths` (repo-relative) from the work tree into the index git is committing:
/// present files are added/updated, missing ones removed. Nothing else in the index changes.
///
/// During `git commit --only <paths>` git commits a temporary index and afterwards installs
/// `index.lock` as the real index; the same paths are staged there too so the real index does
/// not drift from the commit.
pub fn stage_paths(repo: &gix::Repository, workdir: &Path, paths: &[String]) -> Result<(), Error> {
    if paths.is_empty() {
        return Ok(());
    }
    // `--force-remove` stages a removal; `--add --remove` adds or updates present files;
    // `--replace` drops a conflicting entry (a committed symlink where kdd now has a folder,
    // e.g. `.kdd-index/nodes/entity -> /elsewhere`, replaced by `artifact::write_artifact`).
    let (present, missing): (Vec<&String>, Vec<&String>) = paths
        .iter()
        .partition(|p| workdir.join(p.as_str()).exists());
    update_index(
        repo,
        workdir,
        &["update-index", "--add", "--remove", "--replace"],
        &present,
    )?;
    update_index(repo, workdir, &["update-index", "--force-remove"], &missing)
}

/// Run `git <args> -z --stdin` with `paths` on every index a staging change goes to.
fn update_index(
    repo: &gix::Repository,
    workdir: &Path,
    args: &[&str],
    paths: &[&String],
) -> Result<(), Error> {
    if paths.is_empty() {
        return Ok(());
    }
    let mut input = Vec::new();
    for p in paths {
        input.extend_from_slice(p.as_bytes());
        input.push(0);
    }
    let args: Vec<&str> = args.iter().copied().chain(["-z", "--stdin"]).collect();
    for target in index_targets(repo) {
        let env: Vec<(&str, &Path)> = match &target {
            Some(p) => vec![("GIT_INDEX_FILE", p.as_path())],
            None => vec![],
        };
        git_stdin(workdir, &args, &input, &env)?;
    }
    Ok(())
}

/// The index files a staging change goes to: the one git is committing (`None`: as the
/// environment says) and, during `git commit --only`, the real `index.lock` too.
fn index_targets(repo: &gix::Repository) -> Vec<Option<PathBuf>> {
    let mut targets: Vec<Option<PathBuf>> = vec![None];
    let current = index_file(repo);
    if let Some(name) = current.file_name().and_then(|n| n.to_str()) {
        if name.starts_with("next-index-") && name.ends_with(".lock") {
            let real = current.with_file_name("index.lock");
            if real.exists() {
                targets.push(Some(real));
            }
        }
    }
    targets
}

/// Unix time of the last commit reachable from `rev` that changed `path` (`None` if none did).
pub fn last_change_time(dir: &Path, rev: &str, path: &str) -> Result<Option<i64>, Error> {
    let out = git(dir, &["log", "-1", "--format=%ct", rev, "--", path])?;
    Ok(out.trim().parse().ok())
}

/// Best common ancestor of two revisions (`None` for unrelated histories).
pub fn merge_base(dir: &Path, a: &str, b: &str) -> Result<Option<String>, Error> {
    match git(dir, &["merge-base", a, b]) {
        Ok(s) => Ok(Some(s.trim().to_string())),
        Err(Error::Command { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// True while a rebase is in progress in the work tree containing `dir` (its own git dir, so
/// linked worktrees are handled).
pub fn rebase_in_progress(dir: &Path) -> bool {
    match open(dir) {
        Ok(repo) => {
            let gd = repo.git_dir();
            gd.join("rebase-merge").exists() || gd.join("rebase-apply").exists()
        }
        Err(_) => false,
    }
}

/// How many commands git's sequencer lists in `sequencer/todo` for a multi-commit cherry-pick
/// or revert: the current one and those after it (0 when none runs). Moving `HEAD` or staging
/// behind the sequencer while more than one is listed breaks the sequence (git keeps its own
/// staging area in memory between picks, and stops with "your local changes would be
/// overwritten"), so the last commit of the sequence is the one healed.
pub fn sequence_commands(dir: &Path) -> usize {
    let Ok(repo) = open(dir) else {
        return 0;
    };
    let Ok(todo) = std::fs::read_to_string(repo.git_dir().join("sequencer").join("todo")) else {
        return 0;
    };
    todo.lines()
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .count()
}

/// The marker a pre-commit inside a sequence leaves for its post-commit (`git cherry-pick
/// --continue` commits through a child `git commit`, which runs both hooks; git's own picks run
/// only post-commit). `None` outside a repository.
pub fn sequence_marker(dir: &Path) -> Option<std::path::PathBuf> {
    open(dir)
        .ok()
        .map(|r| r.git_dir().join("kdd-sequence-commit"))
}

/// `git config --get key` in `dir` (`None` when unset).
pub fn config_get(dir: &Path, key: &str) -> Option<String> {
    git(dir, &["config", "--get", key])
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_matching() {
        assert!(under("specs/a.md", "specs"));
        assert!(!under("specsx/a.md", "specs"));
        assert!(!under("specs", "specs"));
        assert!(under("x", ""));
    }

    #[test]
    fn diff_is_add_modify_delete() {
        let a = ObjectId::null(gix::hash::Kind::Sha1);
        let b = ObjectId::empty_blob(gix::hash::Kind::Sha1);
        let old: Entries = [("x".into(), a), ("y".into(), a)].into();
        let new: Entries = [("x".into(), b), ("z".into(), a)].into();
        let d = diff(&old, &new);
        assert_eq!(d.added, vec!["z"]);
        assert_eq!(d.modified, vec!["x"]);
        assert_eq!(d.deleted, vec!["y"]);
    }
}
