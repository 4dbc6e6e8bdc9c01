//! `kdd-hook post-receive` on a bare server repository: for pushes to a served ref, mirror the
//! new tree incrementally ([`bare::Mirror::sync`]) and update the query cache from it, so a
//! running `kdd serve` switches to the new content on its next request.
//!
//! Served refs: `git config kdd.serveRef` (one or more values), else the branch `HEAD` names,
//! plus every ref a `kdd serve --ref` has mirrored before. The hook never fails the push (git
//! ignores post-receive's exit status anyway); it reports to the pusher on stderr.

use super::bare::{self, Mirror, SyncReport, LAST_SYNC};
use crate::cache::{Cache, OpenOptions};
use crate::config::Settings;

/// What the hook did for one ref.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RefUpdate {
    pub rev: String,
    pub sync: Option<SyncReport>,
    /// Cache update figures (nodes, edges, millis), when the index could be opened.
    pub cache: Option<crate::cache::BuildStats>,
    /// Milliseconds from hook start to the cache being fresh.
    pub millis: u64,
    pub error: Option<String>,
}

/// Specs re-derived by the last sync of a mirror (for freshness answers).
pub fn last_rederived(m: &Mirror) -> Vec<String> {
    std::fs::read(m.root.join(LAST_SYNC))
        .ok()
        .and_then(|b| serde_json::from_slice::<SyncReport>(&b).ok())
        .map(|r| r.rederived)
        .unwrap_or_default()
}

/// Refs this repository serves (see the module docs).
pub fn served_refs(settings: &Settings) -> Vec<String> {
    let mut out = Vec::new();
    if let Ok(repo) = crate::git::open(&settings.git_common_dir) {
        let cfg = repo.config_snapshot();
        if let Some(vals) = cfg.plumbing().strings("kdd.serveRef") {
            for v in vals {
                out.push(bare::full_ref(&repo, &v.to_string()));
            }
        }
        if out.is_empty() {
            out.push(bare::full_ref(&repo, "HEAD"));
        }
    }
    if let Ok(rd) = std::fs::read_dir(settings.cache_dir.join("serve")) {
        for e in rd.flatten() {
            if let Ok(r) = std::fs::read_to_string(e.path().join("rev")) {
                out.push(r.trim().to_string());
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// Update the mirror and cache of `rev` to `new` (a commit id; None: where the ref points).
pub fn update_ref(settings: &Settings, rev: &str, new: Option<gix::ObjectId>) -> RefUpdate {
    let t0 = std::time::Instant::now();
    let m = Mirror::new(settings, rev);
    let mut up = RefUpdate {
        rev: rev.to_string(),
        sync: None,
        cache: None,
        millis: 0,
        error: None,
    };
    match m.sync(new) {
        Ok(r) => up.sync = r,
        Err(e) => {
            up.error = Some(e.to_string());
            return up;
        }
    }
    if m.index_dir().join("manifest.json").is_file() {
        match Cache::open_paths(
            &m.index_dir(),
            &m.tree(),
            &m.cache_root(),
            &OpenOptions::default(),
        ) {
            Ok(c) => up.cache = c.last_update().cloned(),
            Err(e) => up.error = Some(format!("cache update failed: {e}")),
        }
    } else {
        up.error = Some("the pushed tree has no .kdd-index/ (run `kdd index` and push)".into());
    }
    up.millis = t0.elapsed().as_millis() as u64;
    up
}

/// Handle post-receive input (`<old> <new> <ref>` lines). Returns one update per served ref
/// that was pushed.
pub fn post_receive(settings: &Settings, input: &str) -> Vec<RefUpdate> {
    let served = served_refs(settings);
    let mut out = Vec::new();
    for line in input.lines() {
        let mut it = line.split_whitespace();
        let (Some(_old), Some(new), Some(name)) = (it.next(), it.next(), it.next()) else {
            continue;
        };
        if !served.iter().any(|s| s == name) {
            continue;
        }
        let Ok(new) = gix::ObjectId::from_hex(new.as_bytes()) else {
            continue;
        };
        if new.is_null() {
            continue; // ref deleted: keep serving the last content
        }
        out.push(update_ref(settings, name, Some(new)));
    }
    out
}

/// One line per update for the pusher's terminal.
pub fn describe(u: &RefUpdate) -> String {
    let mut s = format!("kdd: {}", u.rev);
    match &u.sync {
        Some(r) => {
            s.push_str(&format!(
                " → {}: {} file(s) updated, {} removed",
                &r.to[..12.min(r.to.len())],
                r.written,
                r.removed
            ));
            if !r.rederived.is_empty() {
                s.push_str(&format!(
                    "; WARNING: the pushed .kdd-index/ did not match {} spec(s), re-derived on \
                     the server (L1): {} — run `kdd index` and commit, `kdd verify` in CI",
                    r.rederived.len(),
                    r.rederived.join(", ")
                ));
            }
            if let Some(first) = first_of(&r.diagnostics) {
                s.push_str(&format!(
                    "; {} problem(s) in the pushed specs, first: {first}",
                    r.diagnostics.len()
                ));
            }
        }
        None => s.push_str(": already up to date"),
    }
    if let Some(c) = &u.cache {
        s.push_str(&format!(
            "; query cache: {} node(s), {} updated",
            c.nodes,
            c.added + c.updated + c.removed
        ));
        if let Some(first) = first_of(&c.errors) {
            s.push_str(&format!(
                " ({} left out or degraded, first: {first})",
                c.errors.len()
            ));
        }
    }
    s.push_str(&format!("; fresh in {} ms", u.millis));
    if let Some(e) = &u.error {
        s.push_str(&format!("; error: {e}"));
    }
    s
}

/// The first of `problems`, cut to 300 characters for a terminal line.
fn first_of(problems: &[String]) -> Option<String> {
    problems.first().map(|p| p.chars().take(300).collect())
}

/// `kdd-hook post-receive`: read git's ref lines on stdin, update, report on stderr. Always
/// succeeds (a push is never failed by the index server).
pub fn run_hook(settings: &Settings) -> anyhow::Result<()> {
    use std::io::Read;
    let mut input = String::new();
    let _ = std::io::stdin().take(1 << 20).read_to_string(&mut input);
    for u in post_receive(settings, &input) {
        crate::report::info(&describe(&u));
    }
    Ok(())
}
