//! The LMDB side of the cache (heed): nodes with their re-parsed text, raw links, resolved edges
//! in both directions, the name table, per-artifact file stamps (for incremental updates),
//! chunk references for vectors, and a meta table (version stamp, freshness fingerprint, graph
//! summaries; agent edges and enrichment notes, see `agent.rs`). One write transaction per update: readers always see a committed snapshot.
//!
//! Two tables serve only the incremental update (`links.rs`): `keys` (every resolver lookup key
//! → the ids of the nodes found under it) and `lkeys` (every probe key of a written link or an
//! agent relation target → the ids of the nodes holding it), both kept exact by every update.
//! `pending` holds the vector items changed since arroy's trees were last built (`vectors.rs`):
//! item → its f32 vector (little-endian), or empty bytes for a built item that was removed.

use super::Error;
use crate::spec::{IndexedFields, LinkRecord, Node};
use heed::types::{Bytes, SerdeJson, Str, U32};
use heed::{byteorder::BE, Database, Env, EnvOpenOptions, RoTxn, RwTxn, WithoutTls};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Text of one section as stored in the cache.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SectionText {
    pub heading: String,
    pub key: Option<String>,
    pub level: u8,
    pub ancestors: Vec<String>,
    pub text: String,
    /// 1-based line of the heading in the spec file.
    pub line: usize,
    /// 1-based last non-blank line of the section's body in the file (its heading line when
    /// the body is empty; 0 when unknown, as for an agent summary).
    #[serde(default)]
    pub end: usize,
}

/// Everything the cache knows about one node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeRecord {
    pub node: Node,
    pub fields: IndexedFields,
    pub sections: Vec<SectionText>,
    /// Links as written (resolved globally into `fwd`/`rev`).
    pub links: Vec<LinkRecord>,
    /// The text is not the indexed version's: the spec's bytes no longer match `source_hash`
    /// and git holds no copy that does (or the spec is missing).
    pub stale: bool,
    /// Artifact stem (`entity/Pedido`) the record came from.
    pub stem: String,
    /// Vector item ids of this node's chunks.
    #[serde(default)]
    pub items: Vec<u32>,
    /// Spanish/English function words in the spec's text (summed into the corpus language).
    #[serde(default)]
    pub lang: super::text::LangTally,
    /// The current agent enrichment (L3), when there is one; its summary is the last section.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<super::agent::AgentNote>,
    /// The spec's text in the other corpus language ([`super::doctr`]) and that language, on
    /// its way to the text index during a build: indexed, never stored.
    #[serde(skip)]
    pub translation: Option<(super::lang::Lang, String)>,
}

impl NodeRecord {
    /// A record holding only the node identity (no fields, no text): for graph walks.
    pub fn brief(node: Node) -> NodeRecord {
        NodeRecord {
            node,
            fields: Default::default(),
            sections: Vec::new(),
            links: Vec::new(),
            stale: false,
            stem: String::new(),
            items: Vec::new(),
            lang: Default::default(),
            agent: None,
            translation: None,
        }
    }
}

/// A node's identity plus its degree: what graph walks need, without the text.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeLite {
    pub node: Node,
    pub in_degree: u32,
    pub out_degree: u32,
    /// The node has vector items (a spec without any, like an event, or kept without its
    /// unreadable vectors, has none): the hybrid ranking asks this of every lexical candidate
    /// the vector search did not return, which a full record would cost a text decode each.
    #[serde(default)]
    pub vectors: bool,
}

/// A [`NodeLite`]'s counts alone, read from the same record without decoding the identity's
/// strings: graph walks ask a neighbour's in-degree, the fusion a candidate's vectors flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub struct Degrees {
    pub in_degree: u32,
    pub out_degree: u32,
    #[serde(default)]
    pub vectors: bool,
}

/// A resolved, typed edge.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Edge {
    pub from: String,
    pub to: String,
    pub edge_type: String,
    /// BR-LAYER-001 violation (source layer below target layer in the 01→04 flow).
    pub violation: bool,
    /// An implicit relation from the developer's agent (L3), not a link written in a spec.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub agent: bool,
}

/// One chunk behind a vector item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChunkRef {
    pub node_id: String,
    /// Section heading path of the chunk.
    pub section: String,
    pub text: String,
}

/// Size and mtime of an artifact file, to detect changes without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileStamp {
    pub len: u64,
    pub mtime_ns: i128,
}

type Json<T> = SerdeJson<T>;

/// The LMDB environment and its tables.
#[derive(Clone)]
pub struct Store {
    pub env: &'static Env<WithoutTls>,
    pub meta: Database<'static, Str, Json<serde_json::Value>>,
    pub nodes: Database<'static, Str, Json<NodeRecord>>,
    pub lite: Database<'static, Str, Json<NodeLite>>,
    pub fwd: Database<'static, Str, Json<Vec<Edge>>>,
    pub rev: Database<'static, Str, Json<Vec<Edge>>>,
    pub names: Database<'static, Str, Json<Vec<(super::resolve::KeyRank, String)>>>,
    pub files: Database<'static, Str, Json<FileStamp>>,
    pub chunks: Database<'static, U32<BE>, Json<ChunkRef>>,
    /// Resolver lookup key → ids of the nodes found under it (sorted).
    pub keys: Database<'static, Str, Json<Vec<String>>>,
    /// Link probe key (or `@` + agent relation target) → ids of the nodes holding it (sorted).
    pub lkeys: Database<'static, Str, Json<Vec<String>>>,
    /// Every ending of a spec's source path at a `/` (the whole path too) → ids of the specs
    /// whose path ends so (sorted): path hints resolve without reading every spec.
    pub paths: Database<'static, Str, Json<Vec<String>>>,
    pub vectors: arroy::Database<'static, arroy::distances::Cosine>,
    /// Vector items not yet in arroy's trees (see `vectors.rs`).
    pub pending: Database<'static, U32<BE>, Bytes>,
}

/// Bytes reserved for LMDB's lock file: its reader table for [`MAX_READERS`] readers (64-byte
/// slots) and header, rounded up.
const LOCK_FILE_BYTES: u64 = 64 << 10;

/// Most concurrent LMDB readers of one environment.
const MAX_READERS: u32 = 512;

/// Make LMDB's `lock.mdb` hold real blocks before LMDB maps it: LMDB sizes it with `ftruncate`
/// and writes it through the map, so on a full file system its first write is a SIGBUS that
/// kills the process. Reserved here, a full disk is a clean error naming the directory.
fn reserve_lock_file(dir: &Path) -> Result<(), Error> {
    let p = dir.join("lock.mdb");
    let f = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(&p)
        .map_err(|e| Error::io(&p, e))?;
    fs4::FileExt::allocate(&f, LOCK_FILE_BYTES).map_err(|e| {
        let why = format!("{e}; free space for the query cache, or set KDD_CACHE_DIR elsewhere");
        Error::io(&p, std::io::Error::new(e.kind(), why))
    })
}

impl Store {
    /// Open (creating when missing) the environment in `dir`.
    pub fn open(dir: &Path) -> Result<Store, Error> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        reserve_lock_file(dir)?;
        let mut opts = EnvOpenOptions::new().read_txn_without_tls();
        opts.map_size(8 << 30).max_dbs(16).max_readers(MAX_READERS);
        // SAFETY: heed requires that the same environment is not opened twice in one process
        // and that the files are not modified outside LMDB. The cache directory is private to
        // kdd and every environment is opened once per process (see `super::gen::store_for`), then
        // leaked so its databases can be `'static` (arroy needs that).
        #[allow(unsafe_code)]
        let env = unsafe { opts.open(dir) }.map_err(|e| Error::lmdb(dir, e))?;
        let env: &'static Env<WithoutTls> = Box::leak(Box::new(env));
        let wtxn = env.write_txn().map_err(|e| Error::lmdb(dir, e))?;
        let dbs = env
            .create_databases_and_commit(wtxn, |o, w| -> heed::Result<_> {
                let meta = o.create_database(w, Some("meta"))?;
                let nodes = o.create_database(w, Some("nodes"))?;
                let lite = o.create_database(w, Some("lite"))?;
                let fwd = o.create_database(w, Some("fwd"))?;
                let rev = o.create_database(w, Some("rev"))?;
                let names = o.create_database(w, Some("names"))?;
                let files = o.create_database(w, Some("files"))?;
                let chunks = o.create_database(w, Some("chunks"))?;
                let vectors = o.create_database(w, Some("vectors"))?;
                let keys = o.create_database(w, Some("keys"))?;
                let lkeys = o.create_database(w, Some("lkeys"))?;
                let pending = o.create_database(w, Some("pending"))?;
                let paths = o.create_database(w, Some("paths"))?;
                // heed commits tuples of at most 12 databases.
                Ok(heed::CommitOrAbort::<_, ()>::Commit((
                    (
                        meta, nodes, lite, fwd, rev, names, files, chunks, vectors, keys, lkeys,
                        pending,
                    ),
                    paths,
                )))
            })
            .map_err(|e| Error::lmdb(dir, e))?
            .unwrap_commit();
        let (
            (meta, nodes, lite, fwd, rev, names, files, chunks, vectors, keys, lkeys, pending),
            paths,
        ) = dbs;
        Ok(Store {
            env,
            meta,
            nodes,
            lite,
            fwd,
            rev,
            names,
            files,
            chunks,
            keys,
            lkeys,
            paths,
            vectors,
            pending,
        })
    }

    pub fn rtxn(&self) -> Result<RoTxn<'static, WithoutTls>, Error> {
        self.env
            .read_txn()
            .map_err(|e| Error::Corrupt(format!("lmdb read: {e}")))
    }

    pub fn wtxn(&self) -> Result<RwTxn<'static>, Error> {
        self.env
            .write_txn()
            .map_err(|e| Error::Corrupt(format!("lmdb write: {e}")))
    }

    pub fn get_meta<T: for<'de> Deserialize<'de>>(
        &self,
        txn: &RoTxn,
        key: &str,
    ) -> Result<Option<T>, Error> {
        match self.meta.get(txn, key).map_err(lm)? {
            Some(v) => serde_json::from_value(v)
                .map(Some)
                .map_err(|e| Error::Corrupt(format!("cache meta {key}: {e}"))),
            None => Ok(None),
        }
    }

    pub fn put_meta<T: Serialize>(&self, txn: &mut RwTxn, key: &str, v: &T) -> Result<(), Error> {
        let v = serde_json::to_value(v).map_err(|e| Error::Corrupt(e.to_string()))?;
        self.meta.put(txn, key, &v).map_err(lm)
    }
}

/// Map a heed error to a cache error.
pub fn lm(e: heed::Error) -> Error {
    Error::Corrupt(format!("lmdb: {e}"))
}

/// A link whose target does not exist.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize)]
pub struct Orphan {
    pub from_node: String,
    /// The target as written.
    pub to: String,
    pub edge_type: String,
    pub source_file: String,
}
