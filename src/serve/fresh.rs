//! Freshness of served answers: the stale-spec scan a server runs over every spec (rate
//! limited, memoised by size + mtime) and the [`Freshness`] stated in MCP answers, `kdd_status`
//! and the HTTP answers, including an answer given from the previous index while a new one
//! loads.

use super::{bare, Engine, Loaded, Source};
use serde::Serialize;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Result of comparing the specs on disk with the index.
#[derive(Debug, Clone, Default, Serialize)]
pub struct StaleScan {
    /// Indexed specs whose bytes changed since they were indexed (or that are gone).
    pub stale_specs: Vec<String>,
    /// Spec files with no node in the index.
    pub unindexed_specs: Vec<String>,
}

/// Freshness stated in every MCP answer (and `kdd_status`).
#[derive(Debug, Clone, Serialize)]
pub struct Freshness {
    /// `L1` (graph + lexical) or `L2` (with embeddings).
    pub level: String,
    pub nodes: usize,
    /// True when the cache matches `.kdd-index/` and every spec matches its node.
    pub fresh: bool,
    /// The cache was rebuilt/updated for this call (a re-index was picked up).
    pub reloaded: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub stale_specs: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unindexed_specs: Vec<String>,
    /// Commit served (bare repositories / `--ref`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// What to do when not fresh.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
    /// The index changed and a new cache is loading: this answer comes from the previous one.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub refreshing: bool,
    /// The index changed and could not be loaded (why): this answer comes from the last one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reload_failed: Option<String>,
}

/// Marks the engine loading a changed index for as long as it lives.
pub(super) struct Loading<'a>(&'a AtomicBool);

impl<'a> Loading<'a> {
    pub(super) fn start(flag: &'a AtomicBool) -> Loading<'a> {
        flag.store(true, Ordering::SeqCst);
        Loading(flag)
    }
}

impl Drop for Loading<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::SeqCst);
    }
}

/// The warning an answer carries when the changed index could not be loaded.
pub fn reload_failed_warning(why: Option<&str>) -> crate::query::Warning {
    crate::query::Warning::new(
        "INDEX_RELOAD_FAILED",
        format!(
            "the index changed and could not be loaded ({}); this answer comes from the last \
             index loaded",
            why.unwrap_or("see the server log")
        ),
    )
}

/// Tests only: `KDD_SERVE_TEST_LOAD_DELAY_MS` makes loading a changed index that much slower.
pub(super) fn test_load_delay() {
    if let Some(ms) = std::env::var("KDD_SERVE_TEST_LOAD_DELAY_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        std::thread::sleep(Duration::from_millis(ms));
    }
}

/// The warning an answer given from the previous index carries (HTTP; MCP states it in
/// `index.refreshing`).
pub fn refreshing_warning() -> crate::query::Warning {
    crate::query::Warning::new(
        "INDEX_REFRESHING",
        "the index changed and is loading: this answer comes from the previous index; ask \
         again in a moment",
    )
}

impl Engine {
    /// Compare every spec file with its node's source hash (memoised by size + mtime, so a
    /// repeat scan only stats). `max_age`: reuse a scan younger than this.
    pub fn stale_scan(&self, loaded: &Loaded, max_age: Duration) -> StaleScan {
        if matches!(self.source, Source::Pushed { .. }) {
            return StaleScan::default(); // pushed indexes come without specs to compare
        }
        if let Some((t, s)) = &*self.last_scan.lock().unwrap_or_else(|e| e.into_inner()) {
            if t.elapsed() < max_age {
                return s.clone();
            }
        }
        let (_, repo_root, _) = self.paths();
        let specs_root = self.specs_root_of(Some(loaded));
        let on_disk = bare::specs_in(&repo_root, &specs_root);
        let roots = crate::roots::Roots::new(&specs_root, &loaded.cache.manifest().docs);
        let mut memo = self.memo.lock().unwrap_or_else(|e| e.into_inner());
        let mut scan = StaleScan::default();
        let mut seen = BTreeSet::new();
        for (file, hash) in &loaded.files {
            seen.insert(file.as_str());
            let abs = repo_root.join(file);
            // Committed paths are checked before any stat or read (see `crate::source`).
            let checked = crate::roots::check_source(file, &roots);
            let Ok(md) = checked.and_then(|_| {
                std::fs::symlink_metadata(&abs).map_err(|source| crate::source::Error::Io {
                    path: file.clone(),
                    source,
                })
            }) else {
                scan.stale_specs.push(crate::source::printable(file));
                continue;
            };
            let mtime = md
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map(|d| d.as_nanos() as i128)
                .unwrap_or(0);
            let h = match memo.get(file) {
                Some((l, m, h)) if *l == md.len() && *m == mtime => h.clone(),
                _ => {
                    let h = crate::roots::hash_source(&repo_root, file, &roots).unwrap_or_default();
                    memo.insert(file.clone(), (md.len(), mtime, h.clone()));
                    h
                }
            };
            if !crate::spec::same_content(&h, hash) {
                scan.stale_specs.push(file.clone());
            }
        }
        scan.unindexed_specs = on_disk
            .iter()
            .filter(|p| !seen.contains(p.as_str()))
            .cloned()
            .collect();
        *self.last_scan.lock().unwrap_or_else(|e| e.into_inner()) =
            Some((Instant::now(), scan.clone()));
        scan
    }

    /// Freshness of a state, for answers. `full`: include every stale path (else at most 20).
    pub fn freshness(&self, loaded: &Loaded, reloaded: bool, full: bool) -> Freshness {
        // Loading a changed index: the previous one answers, and the specs on disk belong to
        // the new one (a branch switch), so they are not compared with it.
        let refreshing = self.loading.load(Ordering::SeqCst);
        let scan = if refreshing {
            StaleScan::default()
        } else {
            self.stale_scan(loaded, self.check_interval)
        };
        let cap = if full { usize::MAX } else { 20 };
        let mut stale = scan.stale_specs.clone();
        stale.extend(loaded.rederived.iter().cloned());
        stale.sort();
        stale.dedup();
        let failed = self
            .reload_failed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        let fresh =
            stale.is_empty() && scan.unindexed_specs.is_empty() && !refreshing && failed.is_none();
        let hint = (!fresh).then(|| match self.source {
            _ if refreshing => refreshing_warning().message,
            _ if failed.is_some() => reload_failed_warning(failed.as_deref()).message,
            Source::WorkTree { .. } => {
                "some specs changed since they were indexed: run `kdd index` (answers use the last \
                 index for those specs)"
                    .to_string()
            }
            Source::Pushed { .. } => {
                "served from indexes pushed with `kdd sync push`: the specs' text is not on this \
                 server, so answers carry ids, titles, links and vectors only"
                    .to_string()
            }
            Source::Tree(_) => {
                "the pushed .kdd-index/ did not match the pushed specs; the server re-derived \
                 those specs (L1). Run `kdd verify` in CI and `kdd index` locally."
                    .to_string()
            }
        });
        Freshness {
            level: format!("{:?}", loaded.cache.level()),
            nodes: loaded.nodes,
            fresh,
            reloaded,
            stale_specs: stale.into_iter().take(cap).collect(),
            unindexed_specs: scan.unindexed_specs.into_iter().take(cap).collect(),
            commit: loaded.commit.clone(),
            hint,
            refreshing,
            reload_failed: failed,
        }
    }
}
