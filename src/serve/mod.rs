//! Serving agents and services: the MCP stdio server ([`mcp`]), the HTTP retrieval API
//! ([`http`]) and the bare-repository mirror behind `kdd serve --ref` and the `post-receive`
//! hook ([`bare`], [`receive`]).
//!
//! Both servers share one [`Engine`]: it owns the open query cache and re-checks freshness
//! before answering (every MCP call; HTTP at most every `check_interval`), so a re-index — a
//! new commit, `kdd index`, a push to the served ref — is picked up without a restart. A
//! refresh builds the new cache state while requests keep using the old snapshot (`Arc`), then
//! swaps it in. Request bodies and validation live in [`api`].

pub mod api;
pub mod bare;
pub mod conn;
pub use fresh::{Freshness, StaleScan};
mod fresh;
mod guard;
pub mod http;
pub mod mcp;
pub mod receive;
mod routes;
pub mod stdio;
pub mod sync;

use crate::cache::{self, Cache, OpenOptions};
use crate::config::Settings;
use api::ApiError;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

/// Where the served specs and index come from.
#[derive(Debug, Clone)]
pub enum Source {
    /// The work tree of a normal repository (`.kdd-index/` and specs on disk).
    WorkTree {
        index_dir: PathBuf,
        repo_root: PathBuf,
    },
    /// The tree of a ref, mirrored from the object database (bare repositories, `--ref`).
    Tree(bare::Mirror),
    /// The merge of the indexes pushed to this server (`kdd serve --accept-push`), kept in a
    /// sync store directory; pushes are capped at `max_push` bytes (see [`sync`]).
    Pushed { dir: PathBuf, max_push: usize },
}

/// One opened cache state and what is known about its freshness.
pub struct Loaded {
    pub cache: Cache,
    /// Fingerprint of `.kdd-index/` when opened.
    pub fingerprint: String,
    /// Commit served (tree mode).
    pub commit: Option<String>,
    /// `source_file → source_hash` of every node (for the stale scan).
    files: BTreeMap<String, String>,
    /// Number of nodes.
    pub nodes: usize,
    /// Every node's identity, sorted by id (for listing without reading section text).
    pub briefs: Vec<crate::spec::Node>,
    /// Specs whose committed artifacts were re-derived on the server at the last sync.
    pub rederived: Vec<String>,
    /// When this state was opened.
    pub opened: std::time::SystemTime,
}

/// File stamp memo for the stale scan: path → (len, mtime, hash).
type Memo = BTreeMap<String, (u64, i128, String)>;

/// Shared serving state.
pub struct Engine {
    pub settings: Settings,
    pub source: Source,
    current: RwLock<Option<Arc<Loaded>>>,
    refresh_lock: Mutex<()>,
    last_check: Mutex<Option<Instant>>,
    /// Minimum time between two freshness checks (zero: every call).
    pub check_interval: Duration,
    memo: Mutex<Memo>,
    last_scan: Mutex<Option<(Instant, StaleScan)>>,
    /// The query embedder (L2): the model in this process, loaded once (lazily on the first
    /// semantic query, or at start with `KDD_EMBED_PRELOAD=1`) and shared by every request
    /// task and across reloads. Never another process: nothing here can go stale when idle.
    embedder: Mutex<Option<Arc<dyn crate::embed::QueryEmbedder>>>,
    /// Set while a changed index is being loaded: answers given meanwhile come from the
    /// previous state, and say so ([`Freshness::refreshing`]).
    loading: std::sync::atomic::AtomicBool,
    /// Why the last refresh failed while the previous state kept answering (no index on a
    /// branch switched to, an unreadable manifest): stated in [`Freshness::reload_failed`].
    reload_failed: Mutex<Option<String>>,
}

/// `KDD_EMBED_PRELOAD=1`: load the model at start rather than on the first semantic query.
fn preload_requested() -> bool {
    std::env::var(crate::config::env::EMBED_PRELOAD)
        .is_ok_and(|v| !matches!(v.trim(), "" | "0" | "false" | "no"))
}

fn log(msg: &str) {
    crate::report::log(msg);
}

impl Engine {
    /// Serve the work tree of `settings` (or, for a bare repository or with `rev`, the tree of
    /// that ref through a mirror).
    pub fn new(settings: Settings, rev: Option<&str>, check_interval: Duration) -> Engine {
        // Many questions in one process: translations use a warm pipeline kept here.
        crate::query::translate::keep_warm();
        let source = match (settings.bare, rev) {
            (false, None) => Source::WorkTree {
                index_dir: settings.repo_root.join(crate::artifact::INDEX_DIR),
                repo_root: settings.repo_root.clone(),
            },
            (_, rev) => {
                let rev = rev.unwrap_or("HEAD");
                let rev = match crate::git::open(&settings.git_common_dir) {
                    Ok(repo) => bare::full_ref(&repo, rev),
                    Err(_) => rev.to_string(),
                };
                Source::Tree(bare::Mirror::new(&settings, &rev))
            }
        };
        Engine {
            settings,
            source,
            current: RwLock::new(None),
            refresh_lock: Mutex::new(()),
            last_check: Mutex::new(None),
            check_interval,
            memo: Mutex::new(Memo::new()),
            last_scan: Mutex::new(None),
            embedder: Mutex::new(None),
            loading: Default::default(),
            reload_failed: Mutex::new(None),
        }
    }

    fn paths(&self) -> (PathBuf, PathBuf, PathBuf) {
        match &self.source {
            Source::WorkTree {
                index_dir,
                repo_root,
            } => (
                index_dir.clone(),
                repo_root.clone(),
                cache::cache_root(&self.settings),
            ),
            Source::Tree(m) => (m.index_dir(), m.tree(), m.cache_root()),
            Source::Pushed { dir, .. } => (
                dir.join("merged").join(crate::artifact::INDEX_DIR),
                dir.join("merged"),
                dir.join("cache"),
            ),
        }
    }

    /// Accept pushed indexes of at most `max_push` bytes and serve their merge instead
    /// (`--accept-push`).
    pub fn serve_pushed(mut self, max_push: usize) -> Engine {
        let dir = sync::store_dir(&self.settings);
        self.source = Source::Pushed { dir, max_push };
        self
    }

    /// The `.kdd-index/` this engine serves.
    pub fn index_dir(&self) -> PathBuf {
        self.paths().0
    }

    /// The current state without any freshness check (None before the first load).
    pub fn peek(&self) -> Option<Arc<Loaded>> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The cache to answer from, refreshed first when the index changed. Returns the state and
    /// whether it was reloaded for this call. While another request refreshes, the old state
    /// answers.
    pub fn get(&self) -> Result<(Arc<Loaded>, bool), ApiError> {
        let cur = self.peek();
        if let Some(c) = &cur {
            let due = {
                let lc = self.last_check.lock().unwrap_or_else(|e| e.into_inner());
                // A damaged cache (a read met a corrupt store) is reopened at once.
                c.cache.is_damaged() || lc.is_none_or(|t| t.elapsed() >= self.check_interval)
            };
            if !due {
                return Ok((c.clone(), false));
            }
        }
        let _guard = match (self.refresh_lock.try_lock(), &cur) {
            (Ok(g), _) => g,
            (Err(_), Some(c)) => return Ok((c.clone(), false)),
            (Err(_), None) => self.refresh_lock.lock().unwrap_or_else(|e| e.into_inner()),
        };
        // Another thread may have loaded while we waited.
        let cur = self.peek();
        let res = self.check(cur.as_ref());
        *self.last_check.lock().unwrap_or_else(|e| e.into_inner()) = Some(Instant::now());
        *self.reload_failed.lock().unwrap_or_else(|e| e.into_inner()) =
            res.as_ref().err().map(|e| e.message.clone());
        match res {
            Ok(None) => Ok((cur.expect("checked state exists"), false)),
            Ok(Some(new)) => {
                let new = Arc::new(new);
                *self.current.write().unwrap_or_else(|e| e.into_inner()) = Some(new.clone());
                *self.last_scan.lock().unwrap_or_else(|e| e.into_inner()) = None;
                Ok((new, true))
            }
            Err(e) => {
                if let Some(c) = cur {
                    // Keep answering from the last good state; the problem is logged.
                    log(&format!("refresh failed, serving the previous index: {e}"));
                    Ok((c, false))
                } else {
                    Err(e)
                }
            }
        }
    }

    /// Run `f` on the current state. When it fails because the cache turned out damaged (a read
    /// met a corrupt store and condemned its generation), the state is reopened — which
    /// rebuilds the cache into a fresh generation — and `f` runs once more.
    pub fn with_cache<T>(
        &self,
        f: impl Fn(&Arc<Loaded>, bool) -> Result<T, ApiError>,
    ) -> Result<T, ApiError> {
        let (loaded, reloaded) = self.get()?;
        match f(&loaded, reloaded) {
            Err(e) if loaded.cache.is_damaged() => {
                log(&format!("the query cache is damaged ({e}); rebuilding it"));
                drop(loaded);
                let (loaded, _) = self.get()?;
                f(&loaded, true)
            }
            r => r,
        }
    }

    /// Compare with the index; open a new state when it changed.
    fn check(&self, cur: Option<&Arc<Loaded>>) -> Result<Option<Loaded>, ApiError> {
        let mut rederived = Vec::new();
        let mut commit = None;
        if let Source::Tree(m) = &self.source {
            let repo = crate::git::open(&m.git_dir).map_err(|e| {
                log(&format!("{e}"));
                ApiError::unavailable()
            })?;
            let want = m
                .ref_commit(&repo)
                .map_err(|e| {
                    log(&format!("{e}"));
                    ApiError::new(
                        503,
                        "INDEX_UNAVAILABLE",
                        format!("ref `{}` not found", m.rev),
                    )
                })?
                .to_string();
            if cur.is_some_and(|c| {
                c.commit.as_deref() == Some(want.as_str()) && !c.cache.is_damaged()
            }) {
                return Ok(None);
            }
            if m.served_commit().as_deref() != Some(want.as_str()) {
                match m.sync(None) {
                    Ok(Some(r)) => {
                        log(&format!(
                            "mirrored {} at {} ({} written, {} removed, {} re-derived, {} ms)",
                            r.rev,
                            &r.to[..12.min(r.to.len())],
                            r.written,
                            r.removed,
                            r.rederived.len(),
                            r.millis
                        ));
                        rederived = r.rederived;
                    }
                    Ok(None) => {}
                    Err(e) => {
                        log(&format!("mirror sync failed: {e}"));
                        return Err(ApiError::unavailable());
                    }
                }
            } else {
                rederived = receive::last_rederived(m);
            }
            commit = m.served_commit();
        }
        let (index_dir, repo_root, root) = self.paths();
        let fp = cache::fingerprint(&index_dir).map_err(|_| ApiError::unavailable())?;
        let same = |c: &Arc<Loaded>| {
            c.fingerprint == fp && !c.cache.is_damaged() && !c.cache.watched_moved()
        };
        if commit.is_none() && cur.is_some_and(same) {
            return Ok(None);
        }
        let t0 = Instant::now();
        let _loading = fresh::Loading::start(&self.loading);
        fresh::test_load_delay();
        let mut cache = Cache::open_paths(&index_dir, &repo_root, &root, &OpenOptions::default())
            .map_err(|e| {
            log(&format!("cannot open the index: {e}"));
            ApiError::from(e)
        })?;
        if cache.level() >= crate::artifact::IndexLevel::L2 {
            self.attach_embedder(&mut cache);
            cache.keep_vectors_resident();
        }
        let snap = cache.snapshot().map_err(ApiError::from)?;
        let all = snap.all_lite().map_err(ApiError::from)?;
        drop(snap);
        let files: BTreeMap<String, String> = all
            .iter()
            .map(|n| (n.source_file.clone(), n.source_hash.clone()))
            .collect();
        log(&format!(
            "index loaded ({} nodes, {:?}, {} ms)",
            all.len(),
            cache.level(),
            t0.elapsed().as_millis()
        ));
        let mut briefs: Vec<crate::spec::Node> = all;
        briefs.sort_by(|a, b| a.id.cmp(&b.id));
        Ok(Some(Loaded {
            nodes: briefs.len(),
            briefs,
            cache,
            fingerprint: fp,
            commit,
            files,
            rederived,
            opened: std::time::SystemTime::now(),
        }))
    }

    /// Give an L2 cache the query embedder (kept warm across reloads while the model matches);
    /// without one, hybrid search degrades to L1 with a `NO_EMBEDDINGS` warning saying why.
    fn attach_embedder(&self, cache: &mut Cache) {
        let want = cache.manifest().embedding.as_ref().map(|e| e.model.clone());
        let mut slot = self.embedder.lock().unwrap_or_else(|e| e.into_inner());
        if let (Some(e), Some(w)) = (slot.as_ref(), want.as_ref()) {
            if e.model() == w {
                cache.set_embedder(e.clone());
                return;
            }
        }
        let Some(want) = want else {
            cache.set_embedder_unavailable("the index has no embeddings".into());
            return;
        };
        match crate::embed::shared::for_index_model(&want, true) {
            Ok(e) => {
                if preload_requested() {
                    match e.preload() {
                        Ok(()) => log(&format!("embedding model `{want}` loaded")),
                        Err(err) => log(&format!("semantic search unavailable: {err}")),
                    }
                } else {
                    log(&format!(
                        "embedding model `{want}` loads in this process on the first semantic query"
                    ));
                }
                let e: Arc<dyn crate::embed::QueryEmbedder> = Arc::new(e);
                *slot = Some(e.clone());
                cache.set_embedder(e);
            }
            Err(reason) => {
                log(&format!("semantic search unavailable: {reason}"));
                cache.set_embedder_unavailable(reason.to_string());
            }
        }
    }

    /// The directory spec paths are confined to (the specs root of the served tree).
    pub fn specs_dir(&self) -> PathBuf {
        self.paths().1.join(self.specs_root())
    }

    /// The specs root of the served index (relative to [`Engine::tree_root`]).
    pub fn specs_root(&self) -> String {
        self.specs_root_of(self.peek().as_deref())
    }

    /// In a work tree, the loaded index's (a branch switch may move it); the mirror's otherwise.
    fn specs_root_of(&self, loaded: Option<&Loaded>) -> String {
        let manifest = loaded.map(|l| l.cache.manifest().specs_root.as_str());
        match (
            &self.source,
            manifest.and_then(crate::config::normalize_rel),
        ) {
            (Source::WorkTree { .. }, Some(root)) => root,
            _ => self.settings.specs_root.clone(),
        }
    }

    /// The root `source_file` paths are relative to.
    pub fn tree_root(&self) -> PathBuf {
        self.paths().1
    }
}

/// Resolve a user-given spec path inside `specs_dir`, refusing every escape: absolute paths,
/// `..`, backslashes, NUL, and symlinks that lead outside (checked after canonicalisation).
pub fn confined_path(specs_dir: &Path, rel: &str) -> Result<PathBuf, ApiError> {
    let bad = || {
        ApiError::bad(
            "PATH_OUTSIDE_SPECS",
            "`path` must be a spec file path relative to the specs root (no `..`, no absolute \
             paths, no links leading outside)",
        )
    };
    let rel = rel.trim();
    if rel.is_empty()
        || rel.contains('\0')
        || rel.contains('\\')
        || rel.starts_with('/')
        || rel.split('/').any(|c| c == "..")
        || (rel.len() > 1 && rel.as_bytes()[1] == b':')
    {
        return Err(bad());
    }
    let norm = crate::config::normalize_rel(rel).ok_or_else(bad)?;
    let root = std::fs::canonicalize(specs_dir).map_err(|_| ApiError::unavailable())?;
    let cand = root.join(&norm);
    let real = std::fs::canonicalize(&cand).map_err(|_| {
        ApiError::new(
            404,
            "SPEC_NOT_FOUND",
            format!("no spec file `{}` under the specs root", norm),
        )
    })?;
    if !real.starts_with(&root) {
        return Err(bad());
    }
    if !real.is_file() {
        return Err(ApiError::new(
            404,
            "SPEC_NOT_FOUND",
            format!("`{norm}` is not a spec file"),
        ));
    }
    Ok(real)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn confinement() {
        let tmp = tempfile::tempdir().unwrap();
        let specs = tmp.path().join("specs");
        std::fs::create_dir_all(specs.join("a")).unwrap();
        std::fs::write(specs.join("a/x.md"), "# x").unwrap();
        std::fs::write(tmp.path().join("secret.md"), "s").unwrap();
        assert!(confined_path(&specs, "a/x.md").is_ok());
        for p in [
            "../secret.md",
            "/etc/passwd",
            "a/../../secret.md",
            "a\\x.md",
            "C:/x",
        ] {
            assert_eq!(
                confined_path(&specs, p).unwrap_err().code,
                "PATH_OUTSIDE_SPECS",
                "{p}"
            );
        }
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(tmp.path().join("secret.md"), specs.join("link.md"))
                .unwrap();
            assert_eq!(
                confined_path(&specs, "link.md").unwrap_err().code,
                "PATH_OUTSIDE_SPECS"
            );
        }
        assert_eq!(
            confined_path(&specs, "nope.md").unwrap_err().code,
            "SPEC_NOT_FOUND"
        );
    }
}
