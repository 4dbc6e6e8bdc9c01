//! The derived query cache: LMDB (heed) tables + an arroy vector index + a tantivy text index,
//! built lazily from `.kdd-index/` and the spec files, never committed.
//!
//! Location: `<cache_dir>/<hash of the work-tree root>/` (the cache dir defaults to the git
//! common dir, shared by linked worktrees; each worktree has its own index, hence its own
//! subfolder). Inside: `lock` (one writer at a time, fs4), `current` (name of the live
//! generation) and `gen-*/{lmdb,text}`.
//!
//! Freshness: every open compares a fingerprint of `.kdd-index/` with the one stored in the
//! cache. The fingerprint hashes the manifest's stamp and the mtimes of the artifact
//! directories (`nodes/<kind>[/<domain>]`, `edges/…`, `embeddings/…`): artifacts are only
//! ever written by temp-file + rename (and git checkouts unlink + create), so any change to a
//! spec's artifacts changes its directory's mtime. That is ~100 `stat`s, far below 5 ms at 10k
//! specs. On a mismatch the writer takes the lock and updates only the specs whose artifact
//! files changed; a missing, corrupt or older-version cache is rebuilt from scratch into a new
//! generation, swapped in atomically, so concurrent readers keep a consistent snapshot.
//!
//! Self-healing ([`check`]): a generation is opened only when its `complete` marker (written
//! last, fsync'd) matches its files, checked with plain reads before LMDB maps anything — so a
//! truncated store is rebuilt, never a SIGBUS. Any heed/arroy/tantivy error met while opening,
//! updating or reading a generation condemns it (`damaged` note, marker removed): the next open
//! rebuilds into a fresh generation, [`take_damage`] lets a command answer again once, and
//! [`Cache::is_damaged`] makes the servers reopen. [`health`] is `kdd doctor`'s deep check.

pub mod agent;
mod bm25;
pub mod build;
pub mod check;
mod doctr;
mod gen;
mod indexed;
pub mod lang;
mod links;
mod parse;
mod phrase;
mod resident;
pub mod resolve;
mod scan;
pub mod store;
pub mod text;
mod vectors;
mod vocab;
mod watch;

pub use build::BuildStats;
pub use gen::{health, Health};
pub use store::{ChunkRef, Edge, NodeLite, NodeRecord, Orphan, SectionText};
pub use text::{LangTally, LexHit, TextFilter};
pub use vocab::WordsFound;

use crate::artifact::{read_manifest, IndexLevel, Manifest, INDEX_DIR};
use crate::config::Settings;
use crate::spec::Kind;
use gen::{build_fresh, gen_ok, read_current, update_current, Opened, Paths, WriterLock};
use heed::RoTxn;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use store::{lm, Store};
use text::TextIndex;

/// Version of the cache layout and of what it derives. Bump to force a rebuild everywhere
/// (10: caches built before crafted nodes were left out drop them; 11: the `paths` table; 12:
/// positions in the text index, for `phrase.rs`).
pub const CACHE_VERSION: u32 = 12;

/// Cache errors.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No `.kdd-index/manifest.json` (INDEX_UNAVAILABLE).
    #[error("no index available for querying at {0} (run `kdd index` first; an index committed but not checked out, as in a `--no-checkout` clone or a sparse checkout that leaves `.kdd-index/` out, answers with `--ref HEAD`)")]
    IndexUnavailable(PathBuf),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{0}")]
    Artifact(#[from] crate::artifact::Error),
    /// The cache is damaged; it is rebuilt automatically when met during open.
    #[error("query cache is damaged: {0} (it will be rebuilt; delete the cache directory if this persists)")]
    Corrupt(String),
    /// A fresh generation could not be written (a full or read-only file system, most often).
    #[error("the query cache could not be built in {0}: {1}; is its file system full? Free space there, or set KDD_CACHE_DIR to another directory")]
    Unwritable(PathBuf, String),
    /// The cache was built by another version of kdd: rebuilt, nothing is wrong.
    #[error("query cache was built by another version of kdd ({0}); it will be rebuilt")]
    Outdated(String),
}

impl Error {
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Error {
        Error::Io {
            path: path.to_path_buf(),
            source,
        }
    }
    pub(crate) fn lmdb(path: &Path, e: heed::Error) -> Error {
        Error::Corrupt(format!("{}: {e}", path.display()))
    }
    pub(crate) fn text(path: &Path, e: impl std::fmt::Display) -> Error {
        Error::Corrupt(format!("{}: {e}", path.display()))
    }
}

/// Where the cache of a repository lives.
pub fn cache_root(settings: &Settings) -> PathBuf {
    let h = blake3::hash(settings.repo_root.to_string_lossy().as_bytes()).to_hex();
    settings.cache_dir.join(format!("wt-{}", &h[..16]))
}

/// Cheap fingerprint of the index directory (see the module docs).
pub fn fingerprint(index_dir: &Path) -> Result<String, Error> {
    let manifest_path = index_dir.join("manifest.json");
    let md = std::fs::metadata(&manifest_path)
        .map_err(|_| Error::IndexUnavailable(index_dir.to_path_buf()))?;
    let mut h = blake3::Hasher::new();
    h.update(&CACHE_VERSION.to_le_bytes());
    h.update(doctr::state().as_bytes());
    let mut add = |p: &Path, md: Option<std::fs::Metadata>| {
        h.update(p.as_os_str().as_encoded_bytes());
        if let Some(md) = md {
            let t = md
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map(|d| d.as_nanos())
                .unwrap_or(0);
            h.update(&t.to_le_bytes());
            h.update(&md.len().to_le_bytes());
        } else {
            h.update(b"-");
        }
    };
    add(&manifest_path, Some(md));
    let manifest = crate::artifact::read_artifact(&manifest_path).unwrap_or_default();
    add(
        Path::new(&String::from_utf8_lossy(&manifest).into_owned()),
        None,
    );
    let domains: Vec<String> = serde_json::from_slice::<Manifest>(&manifest)
        .map(|m| m.domains)
        .unwrap_or_default();
    for top in ["nodes", "edges", "embeddings", "enrichments"] {
        let t = index_dir.join(top);
        add(&t, std::fs::metadata(&t).ok());
        for k in Kind::ALL {
            let kd = t.join(k.as_str());
            let kmd = std::fs::metadata(&kd).ok();
            let exists = kmd.is_some();
            add(&kd, kmd);
            if exists {
                for d in &domains {
                    let dd = kd.join(crate::artifact::sanitize_component(d));
                    add(&dd, std::fs::metadata(&dd).ok());
                }
            }
        }
    }
    Ok(h.finalize().to_hex()[..32].to_string())
}

/// Options for [`Cache::open_with`].
#[derive(Debug, Clone, Default)]
pub struct OpenOptions {
    /// Rebuild from scratch even when the cache looks fresh.
    pub force_rebuild: bool,
}

/// An open, fresh cache. Cheap to query; [`Cache::refresh`] re-checks freshness (for
/// long-lived servers).
pub struct Cache {
    pub(crate) store: Store,
    pub(crate) text: TextIndex,
    root: PathBuf,
    gen: PathBuf,
    index_dir: PathBuf,
    repo_root: PathBuf,
    fingerprint: String,
    manifest: Manifest,
    last_update: Option<BuildStats>,
    healed: Vec<String>,
    damaged: AtomicBool,
    embedder: Option<std::sync::Arc<dyn crate::embed::QueryEmbedder>>,
    embedder_missing: Option<String>,
    agent_edges: AtomicBool,
    /// A server's resident copy of the vectors (see [`Cache::keep_vectors_resident`]).
    resident: Option<resident::ResidentSlot>,
}

impl std::fmt::Debug for Cache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cache")
            .field("gen", &self.gen)
            .field("fingerprint", &self.fingerprint)
            .finish()
    }
}

/// Set once any cache of this process was found damaged (see [`take_damage`]).
static DAMAGE_SEEN: AtomicBool = AtomicBool::new(false);

/// True (once) when a cache read of this process met a damaged store since the last call: the
/// generation has been condemned, so opening the cache again rebuilds it. Commands use this to
/// retry once instead of failing.
pub fn take_damage() -> bool {
    DAMAGE_SEEN.swap(false, Ordering::SeqCst)
}

impl Cache {
    /// Open the cache of the repository described by `settings`, building or updating it first
    /// when `.kdd-index/` changed.
    pub fn open(settings: &Settings) -> Result<Cache, Error> {
        Cache::open_with(settings, &OpenOptions::default())
    }

    /// [`Cache::open`] with options.
    pub fn open_with(settings: &Settings, opts: &OpenOptions) -> Result<Cache, Error> {
        let index_dir = settings.repo_root.join(INDEX_DIR);
        Cache::open_paths(&index_dir, &settings.repo_root, &cache_root(settings), opts)
    }

    /// Open with explicit locations (tests, benches, servers).
    pub fn open_paths(
        index_dir: &Path,
        repo_root: &Path,
        root: &Path,
        opts: &OpenOptions,
    ) -> Result<Cache, Error> {
        let manifest_path = index_dir.join("manifest.json");
        if !manifest_path.is_file() {
            return Err(Error::IndexUnavailable(index_dir.to_path_buf()));
        }
        let manifest = read_manifest(&manifest_path)?;
        let fp = fingerprint(index_dir)?;
        let cache = |o: Opened, fp: String, manifest: Manifest, healed: Vec<String>| Cache {
            store: o.store,
            text: o.text,
            root: root.to_path_buf(),
            gen: o.gen,
            index_dir: index_dir.to_path_buf(),
            repo_root: repo_root.to_path_buf(),
            fingerprint: fp,
            manifest,
            last_update: o.stats,
            healed,
            damaged: AtomicBool::new(false),
            embedder: None,
            embedder_missing: None,
            agent_edges: AtomicBool::new(true),
            resident: None,
        };
        // Fast path: a fresh, intact generation.
        if !opts.force_rebuild {
            if let Some(gen) = read_current(root) {
                if let Ok((store, text, Some(have))) = gen_ok(&gen) {
                    if have == fp && watch::moved_now(&store, repo_root).is_empty() {
                        let o = Opened {
                            gen,
                            store,
                            text,
                            stats: None,
                        };
                        return Ok(cache(o, fp, manifest, Vec::new()));
                    }
                }
            }
        }
        let _lock = WriterLock::acquire(root)?;
        // Re-check under the lock: another process may have done the work.
        let fp = fingerprint(index_dir)?;
        let roots = crate::roots::Roots::new(&manifest.specs_root, &manifest.docs);
        let p = Paths {
            index_dir,
            repo_root,
            root,
            roots: &roots,
        };
        let mut healed = Vec::new();
        let existing = if opts.force_rebuild {
            None
        } else {
            update_current(&p, &fp, &mut healed)?
        };
        let o = match existing {
            Some(o) => o,
            None => build_fresh(&p, &fp)?,
        };
        o.text.reload()?;
        Ok(cache(o, fp, manifest, healed))
    }

    /// Why a damaged generation was replaced by a fresh one during this open (empty when
    /// nothing was damaged).
    pub fn healed(&self) -> &[String] {
        &self.healed
    }

    /// Mark the generation in use damaged (a read met a corrupt store): the next open rebuilds
    /// it into a fresh generation, and [`take_damage`] reports it once.
    pub fn condemn(&self, why: &str) {
        self.damaged.store(true, Ordering::SeqCst);
        DAMAGE_SEEN.store(true, Ordering::SeqCst);
        check::condemn(&self.gen, why);
    }

    /// True once a read of this cache met a damaged store (servers reopen then).
    pub fn is_damaged(&self) -> bool {
        self.damaged.load(Ordering::SeqCst)
    }

    /// Re-check freshness and update when `.kdd-index/` changed. Returns true when it did.
    pub fn refresh(&mut self) -> Result<bool, Error> {
        let fp = fingerprint(&self.index_dir)?;
        if fp == self.fingerprint && !self.watched_moved() {
            return Ok(false);
        }
        let fresh = Cache::open_paths(
            &self.index_dir,
            &self.repo_root,
            &self.root,
            &OpenOptions::default(),
        )?;
        let (emb, agent_edges) = (
            self.embedder.take(),
            self.agent_edges.load(Ordering::SeqCst),
        );
        *self = fresh;
        (self.embedder, self.agent_edges) = (emb, AtomicBool::new(agent_edges));
        Ok(true)
    }

    /// A stale record's spec changed on disk since it was read (`watch.rs`): reopen to update.
    pub fn watched_moved(&self) -> bool {
        !watch::moved_now(&self.store, &self.repo_root).is_empty()
    }

    /// Figures of the build/update this open performed, if any.
    pub fn last_update(&self) -> Option<&BuildStats> {
        self.last_update.as_ref()
    }

    /// Use this embedder for semantic search (L2).
    pub fn set_embedder(&mut self, e: std::sync::Arc<dyn crate::embed::QueryEmbedder>) {
        self.embedder = Some(e);
    }

    /// This cache answers many questions (a server): keep a copy of every vector in memory
    /// and search it exactly (`vectors.rs`, `Resident`), instead of arroy's trees.
    pub fn keep_vectors_resident(&mut self) {
        self.resident = Some(std::sync::Mutex::new(None));
    }

    /// Record why no embedder could be loaded (reported in `NO_EMBEDDINGS` warnings).
    pub fn set_embedder_unavailable(&mut self, reason: String) {
        self.embedder_missing = Some(reason);
    }

    /// Why semantic search is unavailable, when known.
    pub fn embedder_missing(&self) -> Option<&str> {
        self.embedder_missing.as_deref()
    }

    /// The embedder set with [`Cache::set_embedder`].
    pub fn embedder(&self) -> Option<&dyn crate::embed::QueryEmbedder> {
        self.embedder.as_deref()
    }

    /// The index manifest.
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// L1 or L2.
    pub fn level(&self) -> IndexLevel {
        self.manifest.index_level
    }

    /// The generation directory in use.
    pub fn generation(&self) -> &Path {
        &self.gen
    }

    /// The repository root the cache serves.
    pub fn repo_root(&self) -> &Path {
        &self.repo_root
    }

    /// A consistent read view. The store's meta and root pages are checked with plain reads
    /// first (tens of microseconds): a store damaged under a long-lived reader (a server) is
    /// condemned instead of being read through the map, where garbage can kill the process.
    pub fn snapshot(&self) -> Result<Snapshot<'_>, Error> {
        if let Err(why) = check::lmdb_meta(&self.gen.join("lmdb")) {
            self.condemn(&why);
            return Err(Error::Corrupt(why));
        }
        let txn = self.store.rtxn().inspect_err(|e| {
            if let Error::Corrupt(why) = e {
                self.condemn(why);
            }
        })?;
        Ok(Snapshot { cache: self, txn })
    }
}

/// A read transaction over the cache: every read in one query sees the same state.
pub struct Snapshot<'c> {
    pub cache: &'c Cache,
    txn: RoTxn<'static, heed::WithoutTls>,
}

impl Snapshot<'_> {
    /// A read met a damaged store: condemn the generation (the next open rebuilds it).
    fn bad(&self, e: Error) -> Error {
        if let Error::Corrupt(why) = &e {
            self.cache.condemn(why);
        }
        e
    }

    /// A node's record.
    pub fn node(&self, id: &str) -> Result<Option<NodeRecord>, Error> {
        self.cache
            .store
            .nodes
            .get(&self.txn, id)
            .map_err(|e| self.bad(lm(e)))
    }

    /// A node's identity and degree (cheap: no text).
    pub fn lite(&self, id: &str) -> Result<Option<NodeLite>, Error> {
        self.cache
            .store
            .lite
            .get(&self.txn, id)
            .map_err(|e| self.bad(lm(e)))
    }

    /// A node's degrees and vectors flag, without its identity (see [`store::Degrees`]).
    pub fn degrees(&self, id: &str) -> Result<Option<store::Degrees>, Error> {
        let lite = self.cache.store.lite;
        let counts = lite.remap_data_type::<heed::types::SerdeJson<store::Degrees>>();
        counts.get(&self.txn, id).map_err(|e| self.bad(lm(e)))
    }

    /// A record holding only the node identity (no fields, no text): for graph walks.
    pub fn node_brief(&self, id: &str) -> Result<Option<NodeRecord>, Error> {
        Ok(self.lite(id)?.map(|l| NodeRecord::brief(l.node)))
    }

    /// Edges leaving a node.
    pub fn out_edges(&self, id: &str) -> Result<Vec<Edge>, Error> {
        Ok(self
            .cache
            .store
            .fwd
            .get(&self.txn, id)
            .map_err(|e| self.bad(lm(e)))?
            .map_or_else(Vec::new, |v| self.keep(v)))
    }

    /// Edges arriving at a node.
    pub fn in_edges(&self, id: &str) -> Result<Vec<Edge>, Error> {
        Ok(self
            .cache
            .store
            .rev
            .get(&self.txn, id)
            .map_err(|e| self.bad(lm(e)))?
            .map_or_else(Vec::new, |v| self.keep(v)))
    }

    /// Every node id, sorted.
    pub fn node_ids(&self) -> Result<Vec<String>, Error> {
        let mut out = Vec::new();
        for kv in self
            .cache
            .store
            .nodes
            .remap_data_type::<heed::types::DecodeIgnore>()
            .iter(&self.txn)
            .map_err(|e| self.bad(lm(e)))?
        {
            out.push(kv.map_err(|e| self.bad(lm(e)))?.0.to_string());
        }
        Ok(out)
    }

    /// Every node's identity, sorted by id (a full scan of the identity table: no fields and no
    /// text are decoded; a full node record is read with [`Snapshot::node`]).
    pub fn all_lite(&self) -> Result<Vec<crate::spec::Node>, Error> {
        let mut out = Vec::new();
        for kv in self
            .cache
            .store
            .lite
            .iter(&self.txn)
            .map_err(|e| self.bad(lm(e)))?
        {
            out.push(kv.map_err(|e| self.bad(lm(e)))?.1.node);
        }
        Ok(out)
    }

    /// Unresolved links.
    pub fn orphans(&self) -> Result<Vec<Orphan>, Error> {
        Ok(self
            .cache
            .store
            .get_meta(&self.txn, "orphans")
            .map_err(|e| self.bad(e))?
            .unwrap_or_default())
    }

    /// Edges violating BR-LAYER-001.
    pub fn violations(&self) -> Result<Vec<Edge>, Error> {
        Ok(self
            .cache
            .store
            .get_meta(&self.txn, "violations")
            .map_err(|e| self.bad(e))?
            .unwrap_or_default())
    }

    /// Number of resolved edges.
    pub fn edge_count(&self) -> Result<usize, Error> {
        Ok(self
            .cache
            .store
            .get_meta(&self.txn, "edge_count")
            .map_err(|e| self.bad(e))?
            .unwrap_or_default())
    }

    /// Number of links (resolved + orphan).
    pub fn link_count(&self) -> Result<usize, Error> {
        Ok(self
            .cache
            .store
            .get_meta(&self.txn, "link_count")
            .map_err(|e| self.bad(e))?
            .unwrap_or_default())
    }

    /// Build figures stored with the cache.
    pub fn stats(&self) -> Result<Option<BuildStats>, Error> {
        self.cache
            .store
            .get_meta(&self.txn, "stats")
            .map_err(|e| self.bad(e))
    }

    /// Spanish/English function words over the whole corpus (its language, roughly).
    pub fn corpus_lang(&self) -> Result<LangTally, Error> {
        Ok(self
            .cache
            .store
            .get_meta(&self.txn, "lang")
            .map_err(|e| self.bad(e))?
            .unwrap_or_default())
    }

    /// Field-weighted BM25 search, aggregated per node.
    pub fn lexical(
        &self,
        text: &str,
        filter: &TextFilter,
        limit: usize,
    ) -> Result<Vec<LexHit>, Error> {
        self.cache
            .text
            .search(text, filter, limit)
            .map_err(|e| self.bad(e))
    }

    /// Nearest chunks to a query vector: (node id, cosine similarity, chunk text), best first,
    /// one entry per node (its best chunk); built and pending items alike (`vectors.rs`).
    pub fn nearest(&self, v: &[f32], limit: usize) -> Result<Vec<(String, f32, String)>, Error> {
        let resident = self.cache.resident.as_ref();
        vectors::nearest(&self.cache.store, &self.txn, v, limit, resident).map_err(|e| match e {
            vectors::NearError::Damage(e) => self.bad(e),
            vectors::NearError::Other(e) => e,
        })
    }

    /// Significant words of a query (folded, stop words dropped) for snippets.
    pub fn query_words(&self, text: &str) -> Vec<String> {
        self.cache.text.query_words(text)
    }

    /// `text`'s words only the corpus (written in `corpus`) or only its translation holds.
    pub fn words_found(&self, text: &str, corpus: lang::Lang) -> Result<vocab::WordsFound, Error> {
        self.cache.text.words_found(text, corpus)
    }

    /// Each significant word of `text`, repeats included, until `f` returns false.
    pub fn each_query_word(&self, text: &str, f: impl FnMut(&str) -> bool) {
        text::each_query_word(text, f)
    }
}
