//! The vector side of the cache: arroy (index 0) holds the vectors and the ANN trees of the
//! items present at the last tree build; the `pending` table holds what changed since.
//!
//! Invariants:
//! - arroy is never left with unbuilt changes (its `Reader::open` refuses them with
//!   `NeedBuild`): an incremental update writes a new item to `pending` (item → its vector) and
//!   marks a removed built item with a tombstone (item → empty bytes) instead of touching arroy.
//!   Its chunk reference is deleted at once, so no answer ever names a removed chunk.
//! - Item numbers are never reused between full builds, so a built item without a chunk
//!   reference is a tombstone.
//! - The trees are rebuilt (tombstones deleted from arroy, pending vectors added, `build`) when
//!   the pending entries exceed max([`MIN_PENDING`], 10% of the built items), and by every full
//!   build; so a one-spec update costs a few LMDB writes, not a tree build.
//! - [`nearest`] searches arroy for `limit` + tombstones items (so the live top `limit` stays
//!   full), scans the pending vectors exactly with arroy's own cosine, merges both by distance
//!   and keeps the best `limit` chunks: the same answer as a fresh build searched exactly.
//! - A server ([`Resident`], `Cache::keep_vectors_resident`) searches instead an in-memory copy
//!   of every live vector, exactly (`resident.rs`); the copy is reloaded whenever the
//!   vector version (a meta counter bumped by every write that changes a vector, in the same
//!   transaction) differs from the one the query's transaction sees, so an update made by
//!   another process is never answered from a stale copy.

use super::resident::{Resident, ResidentSlot};
use super::scan::LoadedVector;
use super::store::{lm, NodeRecord, Store};
use super::Error;
use arroy::distances::Cosine;
use arroy::internals::{Leaf, UnalignedVector};
use arroy::Distance;
use heed::{RoTxn, RwTxn, WithoutTls};

/// Pending entries always allowed before the trees are rebuilt.
pub const MIN_PENDING: u64 = 1000;

type Writer = arroy::Writer<Cosine>;

fn arroy_err(e: arroy::Error) -> Error {
    Error::Corrupt(format!("vectors: {e}"))
}

fn to_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub(super) fn from_bytes(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// The vector side of one update (L2 indexes only: `writer` is `None` below L2).
pub(super) struct Vectors {
    dims: usize,
    writer: Option<Writer>,
    next_item: u32,
    full: bool,
    changed: bool,
}

impl Vectors {
    /// `dims`: the manifest's vector dimensions (`None` below L2). A full build clears arroy
    /// and the pending table.
    pub(super) fn open(
        store: &Store,
        wtxn: &mut RwTxn,
        dims: Option<usize>,
        full: bool,
    ) -> Result<Vectors, Error> {
        let writer = dims.map(|d| Writer::new(store.vectors, 0, d));
        if let (true, Some(w)) = (full, &writer) {
            w.clear(wtxn).map_err(arroy_err)?;
        }
        if full {
            store.pending.clear(wtxn).map_err(lm)?;
        }
        let next_item = if full {
            0
        } else {
            store.get_meta(wtxn, "next_item")?.unwrap_or(0)
        };
        Ok(Vectors {
            changed: full && writer.is_some(),
            dims: dims.unwrap_or(0),
            writer,
            next_item,
            full,
        })
    }

    /// Remove vector items (and their chunk refs): a pending item is forgotten, a built one
    /// tombstoned (a full build deletes it from arroy, whose trees it rebuilds anyway).
    pub(super) fn drop_items(
        &mut self,
        store: &Store,
        wtxn: &mut RwTxn,
        items: &[u32],
    ) -> Result<(), Error> {
        for item in items {
            store.chunks.delete(wtxn, item).map_err(lm)?;
            let Some(w) = &self.writer else { continue };
            let pending = store.pending.get(wtxn, item).map_err(lm)?;
            if pending.is_some_and(|b| !b.is_empty()) {
                store.pending.delete(wtxn, item).map_err(lm)?;
            } else if self.full {
                w.del_item(wtxn, *item).map_err(arroy_err)?;
            } else {
                store.pending.put(wtxn, item, &[]).map_err(lm)?;
            }
            self.changed = true;
        }
        Ok(())
    }

    /// Add a spec's chunk vectors as new items (a dimension mismatch is reported, not added).
    pub(super) fn add(
        &mut self,
        store: &Store,
        wtxn: &mut RwTxn,
        rec: &mut NodeRecord,
        vecs: Vec<LoadedVector>,
        errors: &mut Vec<String>,
    ) -> Result<(), Error> {
        let Some(w) = &self.writer else {
            return Ok(());
        };
        for lv in vecs {
            if lv.vector.len() != self.dims {
                errors.push(format!(
                    "{}: vectors have {} dimensions, the manifest says {}; run `kdd index` to re-embed",
                    rec.node.source_file,
                    lv.vector.len(),
                    self.dims
                ));
                break;
            }
            if self.full {
                w.add_item(wtxn, self.next_item, &lv.vector)
                    .map_err(arroy_err)?;
            } else {
                store
                    .pending
                    .put(wtxn, &self.next_item, &to_bytes(&lv.vector))
                    .map_err(lm)?;
            }
            store
                .chunks
                .put(wtxn, &self.next_item, &lv.chunk)
                .map_err(lm)?;
            rec.items.push(self.next_item);
            self.next_item += 1;
            self.changed = true;
        }
        Ok(())
    }

    /// Keep the item counter; build arroy's trees on a full build, or fold the pending entries
    /// into arroy and rebuild when they exceed the bound. Returns the pending entries left.
    pub(super) fn finish(self, store: &Store, wtxn: &mut RwTxn) -> Result<u64, Error> {
        store.put_meta(wtxn, "next_item", &self.next_item)?;
        if self.changed {
            // Every change of the live vectors, in the same transaction: a resident copy
            // ([`Resident`]) of another version is stale.
            let v: u64 = store.get_meta(wtxn, VERSION)?.unwrap_or(0);
            store.put_meta(wtxn, VERSION, &(v + 1))?;
        }
        let Some(w) = &self.writer else {
            return Ok(0);
        };
        let pending = store.pending.len(wtxn).map_err(lm)?;
        let built: u64 = store.get_meta(wtxn, "built_items")?.unwrap_or(0);
        let flush = pending > MIN_PENDING.max(built / 10);
        if !(self.full && self.changed || flush) {
            return Ok(pending);
        }
        if flush {
            let entries: Vec<(u32, Vec<u8>)> = store
                .pending
                .iter(wtxn)
                .map_err(lm)?
                .map(|kv| kv.map(|(k, v)| (k, v.to_vec())).map_err(lm))
                .collect::<Result<_, _>>()?;
            for (item, bytes) in entries {
                if bytes.is_empty() {
                    w.del_item(wtxn, item).map_err(arroy_err)?;
                } else {
                    w.add_item(wtxn, item, &from_bytes(&bytes))
                        .map_err(arroy_err)?;
                }
            }
            store.pending.clear(wtxn).map_err(lm)?;
        }
        use rand::SeedableRng;
        let mut rng = rand::rngs::StdRng::seed_from_u64(0x6b6464);
        w.builder(&mut rng)
            .build(wtxn)
            .map_err(|e| Error::Corrupt(format!("vector index build: {e}")))?;
        let built = arroy::Reader::open(wtxn, 0, store.vectors)
            .map_err(arroy_err)?
            .item_ids()
            .len();
        store.put_meta(wtxn, "built_items", &built)?;
        Ok(0)
    }
}

/// Why [`nearest`] failed: damage (the caller condemns the generation) or a state/mistake.
#[derive(Debug)]
pub(super) enum NearError {
    Damage(Error),
    Other(Error),
}

/// Up to this many built vectors, [`nearest`] visits every tree node (an exact search, about a
/// millisecond at this size).
const EXACT_UP_TO: u64 = 4096;

/// Tree nodes inspected per wanted item and tree, past [`EXACT_UP_TO`] (see [`nearest`]).
const SEARCH_K_FACTOR: usize = 2;

/// A vector as arroy's cosine compares it (its norm in the header).
pub(super) fn leaf(v: &[f32]) -> Leaf<'_, Cosine> {
    let vector = UnalignedVector::from_slice(v);
    Leaf {
        header: Cosine::new_header(&vector),
        vector,
    }
}

/// One candidate chunk: (arroy cosine distance, item).
pub(super) type Hit = (f32, u32);

/// A distance as ranked: one that is not a number (a vector no decoder should have let in)
/// ranks last, never first as a negative NaN would under `total_cmp`.
pub(super) fn ranked(d: f32) -> f32 {
    if d.is_nan() {
        f32::INFINITY
    } else {
        d
    }
}

/// The pending vectors nearest to `v` (exact, arroy's cosine distance), and the tombstone count.
fn scan_pending(
    store: &Store,
    txn: &RoTxn<WithoutTls>,
    v: &[f32],
    limit: usize,
) -> Result<(Vec<Hit>, usize), NearError> {
    let query = leaf(v);
    let mut hits = Vec::new();
    let mut tombs = 0;
    let damage = |e: String| NearError::Damage(Error::Corrupt(format!("pending vectors: {e}")));
    for kv in store.pending.iter(txn).map_err(|e| damage(e.to_string()))? {
        let (item, bytes) = kv.map_err(|e| damage(e.to_string()))?;
        if bytes.is_empty() {
            tombs += 1;
            continue;
        }
        if bytes.len() != v.len() * 4 {
            return Err(NearError::Other(Error::Corrupt(format!(
                "vector search: item {item} has {} dimensions, the query {}",
                bytes.len() / 4,
                v.len()
            ))));
        }
        let vector = UnalignedVector::from_bytes(bytes).map_err(|e| damage(format!("{e:?}")))?;
        let leaf = Leaf::<Cosine> {
            header: Cosine::new_header(&vector),
            vector,
        };
        hits.push((ranked(Cosine::built_distance(&query, &leaf)), item));
    }
    hits.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    hits.truncate(limit);
    Ok((hits, tombs))
}

/// Nearest chunks to a query vector: (node id, cosine similarity, chunk text), best first,
/// one entry per node (its best chunk), among the best `limit` chunks.
pub(super) fn nearest(
    store: &Store,
    txn: &RoTxn<WithoutTls>,
    v: &[f32],
    limit: usize,
    resident: Option<&ResidentSlot>,
) -> Result<Vec<(String, f32, String)>, NearError> {
    let limit = limit.max(1);
    let copy = match resident {
        Some(slot) => Resident::current(slot, store, txn)?,
        None => None,
    };
    let hits = match copy {
        Some(r) => r.nearest(v, limit)?,
        None => searched(store, txn, v, limit)?,
    };
    named(store, txn, hits, limit)
}

/// The best `limit` live chunks by arroy's trees and the pending scan, merged by distance.
fn searched(
    store: &Store,
    txn: &RoTxn<WithoutTls>,
    v: &[f32],
    limit: usize,
) -> Result<Vec<Hit>, NearError> {
    let (mut hits, tombs) = scan_pending(store, txn, v, limit)?;
    match arroy::Reader::open(txn, 0, store.vectors) {
        Ok(reader) => {
            // Inspect more tree nodes than arroy's default so larger indexes are searched nearly
            // exactly, and every node of a small one, which is then searched exactly: the answer
            // cannot depend on how its trees happened to split (an incrementally updated cache
            // answers like a fresh build). Measured at 10k specs with the real model (about 20k
            // 2-bit vectors, 25 questions, top 20 against an exhaustive search): 8 × the
            // default recalls 0.996 at a CLI p50 of 41 ms, 4 × 0.992 at 33 ms, 2 × 0.992 at
            // 28 ms; 2 × is kept (bench `query`, in-process hybrid p95 at 10k specs: 9.7–10.1 ms
            // at 4 ×, 9.0 ms at 2 ×). Indexes up to EXACT_UP_TO are searched exactly either way.
            let want = limit + tombs;
            let trees = reader.n_trees().max(1);
            let mut k = want * trees * SEARCH_K_FACTOR;
            if reader.n_items() <= EXACT_UP_TO {
                k = k.max(reader.n_items() as usize * trees);
            }
            let mut q = reader.nns(want);
            if let Some(k) = std::num::NonZeroUsize::new(k) {
                q.search_k(k);
            }
            let built = q.by_vector(txn, v).map_err(|e| match e {
                // A query vector of another model is the caller's mistake, not damage.
                arroy::Error::InvalidVecDimension { .. } => {
                    NearError::Other(Error::Corrupt(format!("vector search: {e}")))
                }
                e => NearError::Damage(Error::Corrupt(format!("vector search: {e}"))),
            })?;
            hits.extend(built.into_iter().map(|(item, d)| (ranked(d), item)));
        }
        // No vectors at all is a state, not damage.
        Err(e @ arroy::Error::MissingMetadata(_)) if hits.is_empty() => {
            return Err(NearError::Other(Error::Corrupt(format!(
                "vector index: {e}"
            ))))
        }
        Err(arroy::Error::MissingMetadata(_)) => {}
        Err(e) => {
            return Err(NearError::Damage(Error::Corrupt(format!(
                "vector index: {e}"
            ))))
        }
    }
    hits.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    Ok(hits)
}

/// Hits (best first) named by their chunk references, one entry per node, among the best
/// `limit` live chunks.
fn named(
    store: &Store,
    txn: &RoTxn<WithoutTls>,
    hits: Vec<Hit>,
    limit: usize,
) -> Result<Vec<(String, f32, String)>, NearError> {
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    let mut live = 0;
    for (dist, item) in hits {
        if live == limit || !dist.is_finite() {
            // Sorted: past the first distance that is not a number, nothing is comparable.
            break;
        }
        // A built item without its chunk reference is a tombstone.
        let chunk = store.chunks.get(txn, &item);
        let Some(c) = chunk.map_err(|e| NearError::Damage(lm(e)))? else {
            continue;
        };
        live += 1;
        if seen.insert(c.node_id.clone()) {
            // arroy's cosine distance is (1 - cos) / 2.
            out.push((c.node_id, 1.0 - 2.0 * dist, c.text));
        }
    }
    Ok(out)
}

/// Meta key counting the changes of the live vectors (bumped by [`Vectors::finish`]).
pub(super) const VERSION: &str = "vectors_version";
