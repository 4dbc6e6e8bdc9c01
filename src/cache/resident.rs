//! A server's resident copy of the vectors (`Cache::keep_vectors_resident`), searched exactly.
//!
//! arroy's trees are nearly exhaustive at the sizes KDD corpora reach (10k specs: 101 trees,
//! and the search budget exceeds the item count) and pay an LMDB page walk per node; a scan of
//! an in-memory copy gives the exact answer in a fraction of the time. The copy is loaded on
//! first use and again whenever the store's vector version (`vectors::VERSION`) differs from
//! the copy's, read in the query's own transaction, so a copy never answers for other vectors
//! than that transaction sees.
//!
//! Two layouts, one distance (arroy's cosine, `(1 − cos) / 2`):
//! - **Sign bits.** A vector read from a `binary-centred` file decodes to exactly
//!   `centre + scale × (±1)` per component (`embed::centre`), so the copy keeps its sign bits
//!   (48 bytes at 384 dimensions), its scale and its norm. Its dot product with a question `q`
//!   is `q·centre + scale × (2 × Σ q_i over the set bits − Σ q_i)`; the sum over set bits is read
//!   from per-byte tables made once per question (256 partial sums per byte of bits). At 10k
//!   specs the copy is 1.2 MB instead of 30 MB and a scan reads 48 bytes a vector, not 1,536.
//!   The result equals the float scan's to rounding (about 1e-6 in distance).
//! - **Floats.** Any other vector (another quantisation, a model without a shipped centre, an
//!   agent summary's vector) is kept as it is and compared with arroy's own distance.
//!
//! Only servers keep a copy, and only up to [`RESIDENT_MAX_ITEMS`] vectors.

use super::store::Store;
use super::vectors::{from_bytes, leaf, ranked, Hit, NearError, VERSION};
use super::Error;
use arroy::distances::Cosine;
use arroy::internals::{Leaf, UnalignedVector};
use arroy::Distance;
use heed::{RoTxn, WithoutTls};

/// Most vectors a [`Resident`] copy holds (at 10k specs, about 20k): a larger index is
/// searched through arroy's trees, so a server's memory stays bounded whatever the corpus.
pub const RESIDENT_MAX_ITEMS: u64 = 100_000;

/// True when the vectors `txn` sees (built and pending) fit a resident copy.
fn fits_resident(store: &Store, txn: &RoTxn<WithoutTls>) -> bool {
    let built = arroy::Reader::open(txn, 0, store.vectors).map_or(0, |r| r.n_items());
    let pending = store.pending.len(txn).unwrap_or(u64::MAX);
    built.saturating_add(pending) <= RESIDENT_MAX_ITEMS
}

/// Where a long-running process keeps its [`Resident`] copy.
pub type ResidentSlot = std::sync::Mutex<Option<std::sync::Arc<Resident>>>;

/// A copy of every live vector of one vector version (see the module docs).
pub struct Resident {
    version: u64,
    dims: usize,
    /// The centres a vector may be coded around (the first of its dimensions is used).
    centres: Vec<Vec<f32>>,
    /// Vectors of the form `centre + scale × (±1)`, as sign bits.
    bits: Option<Bits>,
    /// Every other vector, as floats with arroy's header.
    items: Vec<u32>,
    headers: Vec<<Cosine as Distance>::Header>,
    data: Vec<f32>,
}

/// Sign-bit vectors around one centre (see the module docs).
struct Bits {
    centre: Vec<f32>,
    /// Bytes of sign bits per vector: ⌈dims / 8⌉ (bit i of byte i / 8, LSB first, set = +1).
    width: usize,
    codes: Vec<u8>,
    scales: Vec<f32>,
    norms: Vec<f32>,
    items: Vec<u32>,
}

impl Bits {
    /// Keep `v` as sign bits when it is `centre + scale × (±1)` to rounding; false otherwise.
    fn push(&mut self, item: u32, v: &[f32]) -> bool {
        let scale = (v[0] - self.centre[0]).abs();
        if !(scale.is_finite() && scale > 0.0) {
            return false;
        }
        // Decoding rounds each component once (about 6e-8 of its size); anything further off
        // is not `centre ± scale` (a crafted or foreign vector stays a float vector), so a
        // vector kept as bits scores within about 1e-5 of its floats, real ones within 1e-6.
        let tolerance = |x: f32| 1e-5 * (scale + x.abs());
        let start = self.codes.len();
        self.codes.resize(start + self.width, 0);
        for (i, (x, c)) in v.iter().zip(&self.centre).enumerate() {
            let r = x - c;
            // A component that is not a number fails too (a crafted file stays a float vector).
            if !r.is_finite() || (r.abs() - scale).abs() > tolerance(*x) {
                self.codes.truncate(start);
                return false;
            }
            if r > 0.0 {
                self.codes[start + i / 8] |= 1 << (i % 8);
            }
        }
        self.scales.push(scale);
        self.norms
            .push(Cosine::norm_no_header(&UnalignedVector::from_slice(v)));
        self.items.push(item);
        true
    }

    /// The best `limit` vectors by distance to `q` (of norm `qn`), appended to `out` (unsorted).
    /// A large copy is scanned in parts on rayon's threads, each keeping its own best `limit`:
    /// the order is total (distance, then item), so the union holds the same best as one scan.
    fn best(&self, q: &[f32], qn: f32, limit: usize, out: &mut Vec<Hit>) {
        let qc: f32 = q.iter().zip(&self.centre).map(|(a, b)| a * b).sum();
        let total: f32 = q.iter().sum();
        // tables[j][x]: the sum of q over the bits set in byte value x at byte j.
        let mut tables = vec![[0f32; 256]; self.width];
        for (j, t) in tables.iter_mut().enumerate() {
            for x in 1..256usize {
                let w = q.get(8 * j + x.trailing_zeros() as usize).copied();
                t[x] = t[x & (x - 1)] + w.unwrap_or(0.0);
            }
        }
        let scan = Scan {
            bits: self,
            tables: &tables,
            qc,
            total,
            qn,
        };
        let rows = self.items.len();
        if rows < PAR_MIN_ROWS {
            let mut hits = Vec::with_capacity(rows);
            scan.rows(0, rows, &mut hits);
            out.extend(keep_best(hits, limit));
            return;
        }
        use rayon::prelude::*;
        let parts = rayon::current_num_threads().clamp(1, 8);
        let per = rows.div_ceil(parts).div_ceil(SCAN_BLOCK) * SCAN_BLOCK;
        let found: Vec<Vec<Hit>> = (0..rows.div_ceil(per))
            .into_par_iter()
            .map(|p| {
                let (from, to) = (p * per, ((p + 1) * per).min(rows));
                let mut hits = Vec::with_capacity(to - from);
                scan.rows(from, to, &mut hits);
                keep_best(hits, limit)
            })
            .collect();
        out.extend(found.into_iter().flatten());
    }
}

/// One question's scan of a [`Bits`] copy: its per-byte tables and constant terms.
struct Scan<'a> {
    bits: &'a Bits,
    tables: &'a [[f32; 256]],
    qc: f32,
    total: f32,
    qn: f32,
}

impl Scan<'_> {
    /// The distances of rows `from..to` (`from` a multiple of [`SCAN_BLOCK`]), appended.
    fn rows(&self, from: usize, to: usize, out: &mut Vec<Hit>) {
        let b = self.bits;
        let w = b.width;
        // Rows in blocks, one byte position at a time over the block: the byte's 1 KB table
        // stays in the first-level cache (all tables together are 48 KB at 384 dimensions and
        // crowd it out when read row by row). Each row still sums its lanes in byte order, so
        // the arithmetic, and every distance, is the row-by-row loop's to the bit.
        let mut acc = [[0f32; 4]; SCAN_BLOCK];
        for (k, block) in b.codes[from * w..to * w].chunks(SCAN_BLOCK * w).enumerate() {
            let acc = &mut acc[..block.len() / w];
            acc.fill([0.0; 4]);
            for (j, t) in self.tables.iter().enumerate() {
                for (a, code) in acc.iter_mut().zip(block.chunks_exact(w)) {
                    a[j & 3] += t[code[j] as usize];
                }
            }
            let first = from + k * SCAN_BLOCK;
            for (i, a) in acc.iter().enumerate() {
                let set = (a[0] + a[1]) + (a[2] + a[3]);
                let dot = self.qc + b.scales[first + i] * (2.0 * set - self.total);
                let d = distance(dot, b.norms[first + i], self.qn);
                out.push((ranked(d), b.items[first + i]));
            }
        }
    }
}

/// The hit order: distance, then item.
fn by_distance(a: &Hit, b: &Hit) -> std::cmp::Ordering {
    a.0.total_cmp(&b.0).then(a.1.cmp(&b.1))
}

/// The best `limit` of `hits` (unsorted).
fn keep_best(mut hits: Vec<Hit>, limit: usize) -> Vec<Hit> {
    if hits.len() > limit {
        hits.select_nth_unstable_by(limit - 1, by_distance);
        hits.truncate(limit);
    }
    hits
}

/// Fewer sign-bit rows than this are scanned on the calling thread (a part must outweigh
/// handing it to another thread).
const PAR_MIN_ROWS: usize = 4096;

/// Rows of sign bits scored together by [`Scan::rows`].
const SCAN_BLOCK: usize = 64;

/// arroy's cosine distance from a dot product and the two norms.
fn distance(dot: f32, pn: f32, qn: f32) -> f32 {
    let pnqn = pn * qn;
    if pnqn > f32::EPSILON {
        let cos = (dot / pnqn).clamp(-1.0, 1.0);
        (1.0 - cos) / 2.0
    } else {
        0.0
    }
}

impl Resident {
    /// The copy in `slot` when it is of the version `txn` sees, else a fresh one (kept); `None`
    /// when the vectors have grown past [`RESIDENT_MAX_ITEMS`] (a copy held is let go, and
    /// arroy's trees answer). The size is checked only when the version changes.
    pub(super) fn current(
        slot: &ResidentSlot,
        store: &Store,
        txn: &RoTxn<WithoutTls>,
    ) -> Result<Option<std::sync::Arc<Resident>>, NearError> {
        let version: u64 = store
            .get_meta(txn, VERSION)
            .map_err(NearError::Damage)?
            .unwrap_or(0);
        let mut g = slot.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(r) = g.as_ref().filter(|r| r.version == version) {
            return Ok(Some(r.clone()));
        }
        if !fits_resident(store, txn) {
            *g = None;
            return Ok(None);
        }
        let r = std::sync::Arc::new(Resident::load(store, txn, version)?);
        *g = Some(r.clone());
        Ok(Some(r))
    }

    /// An empty copy; vectors of the form `centre + scale × (±1)` are kept as sign bits when a
    /// centre of their dimensions is given (`centres`), the others as floats.
    fn empty(version: u64, centres: Vec<Vec<f32>>) -> Resident {
        Resident {
            version,
            dims: 0,
            centres,
            bits: None,
            items: Vec::new(),
            headers: Vec::new(),
            data: Vec::new(),
        }
    }

    /// Every live vector `txn` sees: arroy's items but the tombstoned, and the pending ones.
    fn load(store: &Store, txn: &RoTxn<WithoutTls>, version: u64) -> Result<Resident, NearError> {
        let damage = |e: String| NearError::Damage(Error::Corrupt(format!("vectors: {e}")));
        let mut r = Resident::empty(version, crate::embed::centre::shipped());
        let mut tombs = std::collections::HashSet::new();
        let mut fresh = Vec::new();
        for kv in store.pending.iter(txn).map_err(|e| damage(e.to_string()))? {
            let (item, bytes) = kv.map_err(|e| damage(e.to_string()))?;
            if bytes.is_empty() {
                tombs.insert(item);
            } else {
                fresh.push((item, from_bytes(bytes)));
            }
        }
        match arroy::Reader::open(txn, 0, store.vectors) {
            Ok(reader) => {
                for kv in reader.iter(txn).map_err(|e| damage(e.to_string()))? {
                    let (item, v) = kv.map_err(|e| damage(e.to_string()))?;
                    if !tombs.contains(&item) {
                        r.push(item, &v)?;
                    }
                }
            }
            Err(arroy::Error::MissingMetadata(_)) => {}
            Err(e) => return Err(damage(e.to_string())),
        }
        for (item, v) in fresh {
            r.push(item, &v)?;
        }
        Ok(r)
    }

    fn push(&mut self, item: u32, v: &[f32]) -> Result<(), NearError> {
        if self.dims == 0 {
            self.dims = v.len();
            let centre = self
                .centres
                .iter()
                .find(|c| c.len() == v.len() && !c.is_empty());
            self.bits = centre.map(|c| Bits {
                centre: c.clone(),
                width: c.len().div_ceil(8),
                codes: Vec::new(),
                scales: Vec::new(),
                norms: Vec::new(),
                items: Vec::new(),
            });
        } else if v.len() != self.dims {
            return Err(NearError::Other(Error::Corrupt(format!(
                "vector search: item {item} has {} dimensions, others {}",
                v.len(),
                self.dims
            ))));
        }
        if self.bits.as_mut().is_some_and(|b| b.push(item, v)) {
            return Ok(());
        }
        self.items.push(item);
        self.headers.push(leaf(v).header);
        self.data.extend_from_slice(v);
        Ok(())
    }

    /// How many vectors the copy holds as sign bits and as floats.
    fn counts(&self) -> (usize, usize) {
        (
            self.bits.as_ref().map_or(0, |b| b.items.len()),
            self.items.len(),
        )
    }

    /// The best `limit` items by arroy's cosine distance (ties by item), best first.
    pub(super) fn nearest(&self, v: &[f32], limit: usize) -> Result<Vec<Hit>, NearError> {
        let (packed, floats) = self.counts();
        if packed + floats == 0 {
            return Err(NearError::Other(Error::Corrupt(
                "vector index: no vectors".into(),
            )));
        }
        if v.len() != self.dims {
            return Err(NearError::Other(Error::Corrupt(format!(
                "vector search: the query has {} dimensions, the index {}",
                v.len(),
                self.dims
            ))));
        }
        let q = leaf(v);
        // The sign bits give at most `limit` per scanned part, the floats one hit each.
        let mut hits: Vec<Hit> = Vec::with_capacity(floats + limit.min(packed));
        if let Some(b) = &self.bits {
            b.best(v, Cosine::norm_no_header(&q.vector), limit, &mut hits);
        }
        let rows = self.data.chunks_exact(self.dims.max(1));
        for ((x, h), item) in rows.zip(&self.headers).zip(&self.items) {
            let leaf = Leaf::<Cosine> {
                header: *h,
                vector: UnalignedVector::from_slice(x),
            };
            hits.push((ranked(Cosine::built_distance(&q, &leaf)), *item));
        }
        let mut hits = keep_best(hits, limit);
        hits.sort_by(by_distance);
        Ok(hits)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator (no dependency): values in [-1, 1).
    fn noise(seed: u64) -> impl FnMut() -> f32 {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 40) as f32 / (1u64 << 23) as f32 - 1.0
        }
    }

    #[test]
    fn sign_bit_vectors_score_like_their_floats() {
        let dims = 21; // not a multiple of 8: the last byte is partial
        let mut r = noise(7);
        let centre: Vec<f32> = (0..dims).map(|_| 0.2 + 0.05 * r()).collect();
        let mut coded = Resident::empty(1, vec![centre.clone()]);
        let mut floats = Resident::empty(1, Vec::new());
        for item in 0..300u32 {
            let v: Vec<f32> = if item % 10 == 9 {
                // Not of the centred form: kept as floats in both copies.
                (0..dims).map(|_| r()).collect()
            } else {
                let scale = 0.01 + 0.02 * r().abs();
                centre
                    .iter()
                    .map(|c| c + if r() > 0.0 { scale } else { -scale })
                    .collect()
            };
            coded.push(item, &v).unwrap();
            floats.push(item, &v).unwrap();
        }
        // A large vector of ±1 (an int8 file of extreme scale): within a loose tolerance of
        // `centre ± 635`, but not exactly that, so it stays a float vector.
        let big: Vec<f32> = (0..dims)
            .map(|i| if i % 3 == 0 { 635.0 } else { -635.0 })
            .collect();
        coded.push(301, &big).unwrap();
        floats.push(301, &big).unwrap();
        // A component that is not a number keeps the vector out of the bits.
        let mut odd: Vec<f32> = centre.iter().map(|c| c + 0.01).collect();
        odd[dims - 1] = f32::NAN;
        coded.push(300, &odd).unwrap();
        floats.push(300, &odd).unwrap();
        assert_eq!(coded.counts(), (270, 32));
        assert_eq!(floats.counts(), (0, 302));
        for probe in 0..20 {
            let mut p = noise(100 + probe);
            let q: Vec<f32> = centre.iter().map(|c| c + 0.05 * p()).collect();
            let (a, b) = (
                coded.nearest(&q, 300).unwrap(),
                floats.nearest(&q, 300).unwrap(),
            );
            let by_item = |h: &[Hit]| {
                let mut m: Vec<Hit> = h.to_vec();
                m.sort_by_key(|x| x.1);
                m
            };
            for (x, y) in by_item(&a).iter().zip(&by_item(&b)) {
                assert_eq!(x.1, y.1);
                assert!((x.0 - y.0).abs() < 1e-5, "probe {probe}: {x:?} vs {y:?}");
            }
            let top = |h: &[Hit]| h.iter().take(10).map(|x| x.1).collect::<Vec<_>>();
            let gap = b[9].0 < b[10].0 - 1e-5;
            assert!(!gap || top(&a) == top(&b), "probe {probe}");
        }
        let wrong = coded.nearest(&[0.0; 3], 5);
        assert!(matches!(wrong, Err(NearError::Other(_))));
    }

    #[test]
    fn a_large_copy_scanned_in_parts_answers_like_one_ordered_scan() {
        // More rows than the calling thread scans alone, and not a whole number of blocks.
        let dims = 37;
        let rows = PAR_MIN_ROWS as u32 + 3 * SCAN_BLOCK as u32 + 5;
        let mut r = noise(11);
        let centre: Vec<f32> = (0..dims).map(|_| 0.1 + 0.05 * r()).collect();
        let mut coded = Resident::empty(1, vec![centre.clone()]);
        let mut floats = Resident::empty(1, Vec::new());
        for item in 0..rows {
            let scale = 0.01 + 0.02 * r().abs();
            let v: Vec<f32> = centre
                .iter()
                .map(|c| c + if r() > 0.0 { scale } else { -scale })
                .collect();
            coded.push(item, &v).unwrap();
            floats.push(item, &v).unwrap();
        }
        assert_eq!(coded.counts(), (rows as usize, 0));
        for probe in 0..10 {
            let mut p = noise(200 + probe);
            let q: Vec<f32> = centre.iter().map(|c| c + 0.05 * p()).collect();
            // Every row, in order: the parts' union sorted as one list.
            let all = coded.nearest(&q, rows as usize).unwrap();
            assert_eq!(all.len(), rows as usize);
            assert!(all.windows(2).all(|w| by_distance(&w[0], &w[1]).is_lt()));
            // A shorter answer is exactly its prefix, to the bit.
            for limit in [1, 10, 120] {
                assert_eq!(coded.nearest(&q, limit).unwrap(), all[..limit].to_vec());
            }
            // And each distance is the float copy's to rounding.
            let exact = floats.nearest(&q, rows as usize).unwrap();
            let mut a = all.clone();
            let mut b = exact.clone();
            a.sort_by_key(|h| h.1);
            b.sort_by_key(|h| h.1);
            for (x, y) in a.iter().zip(&b) {
                assert_eq!(x.1, y.1);
                assert!((x.0 - y.0).abs() < 1e-5, "probe {probe}: {x:?} vs {y:?}");
            }
        }
    }

    #[test]
    fn real_model_vectors_round_tripped_through_a_committed_file_are_kept_as_bits() {
        use crate::embed::store::{decode, encode, Quant, Record, VectorFile};
        let golden = include_str!("../../fixtures/embed-golden/e5-small-int8.json");
        let g: serde_json::Value = serde_json::from_str(golden).unwrap();
        let of = |role: &str| -> Vec<Vec<f32>> {
            let items = g["items"].as_array().unwrap().iter();
            items
                .filter(|i| i["role"] == role)
                .map(|i| {
                    let v = i["vector"].as_array().unwrap();
                    v.iter().map(|x| x.as_f64().unwrap() as f32).collect()
                })
                .collect()
        };
        // The golden passages and their pairwise blends, written and read back as `kdd index`
        // and the cache do.
        let p = of("passage");
        let mut passages = p.clone();
        for i in 0..p.len() {
            for j in i + 1..p.len() {
                passages.push(p[i].iter().zip(&p[j]).map(|(a, b)| (a + b) / 2.0).collect());
            }
        }
        let model = crate::embed::model::DEFAULT_MODEL;
        let file = VectorFile {
            model: model.into(),
            fingerprint: crate::embed::store::fingerprint(model),
            dims: passages[0].len(),
            quant: Quant::BinaryCentred,
            records: (0..passages.len())
                .map(|i| Record::quantize([i as u8; 8], &passages[i]))
                .collect(),
        };
        let read = decode("x.bin", &encode(&file)).unwrap();
        let mut coded = Resident::empty(1, crate::embed::centre::shipped());
        let mut floats = Resident::empty(1, Vec::new());
        for (item, r) in read.records.iter().enumerate() {
            coded.push(item as u32, &r.dequantize()).unwrap();
            floats.push(item as u32, &r.dequantize()).unwrap();
        }
        assert_eq!(coded.counts(), (passages.len(), 0), "every vector as bits");
        for q in of("query") {
            let (a, b) = (
                coded.nearest(&q, 20).unwrap(),
                floats.nearest(&q, 20).unwrap(),
            );
            assert_eq!(a.len(), b.len());
            for (x, y) in a.iter().zip(&b) {
                assert!((x.0 - y.0).abs() < 1e-5, "{x:?} vs {y:?}");
            }
        }
    }
}
