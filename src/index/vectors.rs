//! Content-addressed embedding of many specs: chunk, reuse known vectors, embed only new keys in
//! fixed batches, and render each spec's vector file.
//!
//! A chunk's vector is looked up by key in a [`VectorPool`] filled from the existing vector files
//! (the spec's own file and, for moved or copied text, every other file of the index). Only keys
//! found nowhere are embedded, in document order, [`BATCH`] texts per call; the embedder runs
//! each text alone, so the stored bytes do not depend on batch composition and a re-index of
//! unchanged specs embeds nothing and rewrites nothing.

use crate::artifact::ArtifactPaths;
use crate::embed::chunk::{chunk_spec, Chunk};
use crate::embed::store::{decode, encode, write_quant, ChunkKey, Quant, Record, VectorFile};
use crate::embed::{Embedder, Error};
use crate::spec::Extracted;
use std::collections::{BTreeMap, HashMap};
use std::time::{Duration, Instant};

/// Texts handed to the embedder per call (progress granularity; results do not depend on it).
pub const BATCH: usize = 16;

/// Known vectors by chunk key, for one model.
#[derive(Debug, Clone)]
pub struct VectorPool {
    pub model: String,
    pub dims: usize,
    map: HashMap<ChunkKey, Record>,
}

impl VectorPool {
    pub fn new(model: &str, dims: usize) -> VectorPool {
        VectorPool {
            model: model.to_string(),
            dims,
            map: HashMap::new(),
        }
    }

    /// Number of known vectors.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Add the records of a decoded file made with the same model and dims (others are ignored:
    /// their keys could never match anyway, since the key includes the model id). Records that
    /// cannot become this model's written quantisation without loss are ignored too (2-bit or
    /// sign codes of raw vectors, when centred codes are written): their chunks are embedded
    /// again.
    pub fn add_file(&mut self, file: &VectorFile) -> bool {
        if !file.belongs_to(&self.model) || file.dims != self.dims {
            return false;
        }
        let lossy = matches!(file.quant, Quant::Int2 | Quant::Binary);
        if lossy && write_quant(&self.model, self.dims) == Quant::BinaryCentred {
            return false;
        }
        for r in &file.records {
            self.map.entry(r.key).or_insert_with(|| r.clone());
        }
        true
    }

    /// Add one vector file from disk; a missing file is fine, a corrupt one is an error (the
    /// caller reports it and the spec's chunks are simply re-embedded).
    pub fn add_path(&mut self, paths: &ArtifactPaths, rel: &str) -> Result<(), Error> {
        let abs = paths.abs(rel);
        // The one no-follow, bounded read (a committed link to /dev/zero is never followed).
        match crate::source::read_regular(&abs, rel, 64 << 20) {
            Ok(bytes) => {
                let f = decode(rel, &bytes)?;
                self.add_file(&f);
                Ok(())
            }
            Err(crate::source::Error::Io { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                Ok(())
            }
            Err(crate::source::Error::Io { source, .. }) => Err(Error::Io { path: abs, source }),
            Err(other) => Err(Error::Io {
                path: abs,
                source: std::io::Error::new(std::io::ErrorKind::InvalidData, other.to_string()),
            }),
        }
    }

    /// Load every vector file under `embeddings/` of an index. Returns the errors of unreadable
    /// files (never fatal).
    pub fn load_index(&mut self, paths: &ArtifactPaths) -> Vec<Error> {
        let mut rels = Vec::new();
        super::list_files(&paths.root().join("embeddings"), "embeddings", &mut rels);
        rels.retain(|r| r.ends_with(".bin"));
        rels.sort();
        rels.into_iter()
            .filter_map(|rel| self.add_path(paths, &rel).err())
            .collect()
    }

    pub fn get(&self, key: &ChunkKey) -> Option<&Record> {
        self.map.get(key)
    }

    pub fn insert(&mut self, key: ChunkKey, v: &[f32]) {
        self.map.insert(key, Record::quantize(key, v));
    }
}

/// One spec's rendered vector file.
#[derive(Debug, Clone)]
pub struct SpecVectors {
    /// Path relative to the index root (`embeddings/<kind>/…/<id>.bin`).
    pub rel: String,
    pub bytes: Vec<u8>,
    /// Chunks in the file.
    pub chunks: usize,
}

/// What a run embedded.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct EmbedStats {
    pub specs: usize,
    pub chunks: usize,
    /// Chunks whose vector was computed in this run.
    pub embedded: usize,
    /// Chunks whose vector was found in existing files.
    pub reused: usize,
    /// Chunks per kind.
    pub per_kind: BTreeMap<String, usize>,
    /// Time spent inside the model.
    #[serde(skip)]
    pub embed_time: Duration,
}

impl EmbedStats {
    pub fn add(&mut self, other: &EmbedStats) {
        self.specs += other.specs;
        self.chunks += other.chunks;
        self.embedded += other.embedded;
        self.reused += other.reused;
        for (k, v) in &other.per_kind {
            *self.per_kind.entry(k.clone()).or_default() += v;
        }
        self.embed_time += other.embed_time;
    }
}

/// Render a spec's vector file from its chunks (all keys must be in the pool).
pub fn render(pool: &VectorPool, chunks: &[Chunk]) -> Vec<u8> {
    let records = chunks
        .iter()
        .filter_map(|c| pool.get(&c.key).cloned())
        .collect();
    encode(&VectorFile::new(&pool.model, pool.dims, records))
}

/// Embed the given specs: chunk, embed keys missing from `pool` (which is updated), render one
/// vector file per spec (a spec without embeddable text gets a header-only file).
pub fn embed_specs(
    embedder: &mut dyn Embedder,
    docs: &[&Extracted],
    pool: &mut VectorPool,
) -> Result<(Vec<SpecVectors>, EmbedStats), Error> {
    let model = embedder.model_id().to_string();
    let mut stats = EmbedStats {
        specs: docs.len(),
        ..EmbedStats::default()
    };
    let chunked: Vec<Vec<Chunk>> = docs.iter().map(|d| chunk_spec(d, &model)).collect();
    let mut missing: Vec<(ChunkKey, &str)> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (doc, chunks) in docs.iter().zip(&chunked) {
        *stats
            .per_kind
            .entry(doc.node.kind.as_str().to_string())
            .or_default() += chunks.len();
        stats.chunks += chunks.len();
        for c in chunks {
            if pool.get(&c.key).is_none() && seen.insert(c.key) {
                missing.push((c.key, &c.context_text));
            } else {
                stats.reused += 1;
            }
        }
    }
    let t0 = Instant::now();
    for batch in missing.chunks(BATCH) {
        let texts: Vec<String> = batch.iter().map(|(_, t)| t.to_string()).collect();
        let vectors = embedder.embed_passages(&texts)?;
        if vectors.len() != texts.len() {
            return Err(Error::Inference(format!(
                "{} vectors for {} texts",
                vectors.len(),
                texts.len()
            )));
        }
        for ((key, _), v) in batch.iter().zip(&vectors) {
            if v.len() != pool.dims {
                return Err(Error::Inference(format!(
                    "model `{model}` returned {} dims, the index uses {}",
                    v.len(),
                    pool.dims
                )));
            }
            pool.insert(*key, v);
        }
        stats.embedded += batch.len();
    }
    stats.embed_time = t0.elapsed();
    let out = docs
        .iter()
        .zip(&chunked)
        .map(|(d, chunks)| SpecVectors {
            rel: ArtifactPaths::embeddings_rel(&d.node),
            bytes: render(pool, chunks),
            chunks: chunks.len(),
        })
        .collect();
    Ok((out, stats))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::chunk::tests::{para, sec, spec};
    use crate::embed::HashedEmbedder;
    use crate::spec::Kind;

    const P1: &str = "Cada pedido pertenece a un único usuario y no puede cambiar de propietario una vez confirmado, salvo intervención explícita del equipo de soporte.";
    const P2: &str = "El total del pedido se recalcula cada vez que se añade o elimina una línea, aplicando los impuestos vigentes del país de entrega configurado.";

    #[test]
    fn reuse_and_incremental() {
        let a = spec(
            Kind::Entity,
            "Pedido",
            "Pedido",
            vec![sec(
                "Descripción",
                Some("description"),
                2,
                &[],
                vec![para(P1), para(P2)],
            )],
        );
        let b = spec(
            Kind::BusinessRule,
            "BR-1",
            "R",
            vec![sec(
                "Declaración",
                Some("declaration"),
                2,
                &[],
                vec![para(P2)],
            )],
        );
        let mut e = HashedEmbedder::new();
        let mut pool = VectorPool::new(crate::embed::hashed::MODEL_ID, crate::embed::hashed::DIMS);
        let (files, stats) = embed_specs(&mut e, &[&a, &b], &mut pool).unwrap();
        assert_eq!((stats.chunks, stats.embedded, stats.reused), (3, 3, 0));
        assert_eq!(files[0].rel, "embeddings/entity/Pedido.bin");
        // second run from the files alone: nothing embedded, identical bytes
        let mut pool2 = VectorPool::new(crate::embed::hashed::MODEL_ID, crate::embed::hashed::DIMS);
        for f in &files {
            pool2.add_file(&decode(&f.rel, &f.bytes).unwrap());
        }
        let (files2, stats2) = embed_specs(&mut e, &[&a, &b], &mut pool2).unwrap();
        assert_eq!(stats2.embedded, 0);
        assert_eq!(files2[0].bytes, files[0].bytes);
        // edit one paragraph: exactly one chunk re-embedded
        let a2 = spec(
            Kind::Entity,
            "Pedido",
            "Pedido",
            vec![sec(
                "Descripción",
                Some("description"),
                2,
                &[],
                vec![para(P1), para(&P2.replace("vigentes", "actuales"))],
            )],
        );
        let (_, stats3) = embed_specs(&mut e, &[&a2], &mut pool2).unwrap();
        assert_eq!((stats3.embedded, stats3.reused), (1, 1));
        // a spec with no section chunk gets its one identity vector (embed/identity.rs)
        let evt = spec(Kind::Event, "EVT-X", "X", vec![]);
        let (f, _) = embed_specs(&mut e, &[&evt], &mut pool2).unwrap();
        assert_eq!(decode("x", &f[0].bytes).unwrap().records.len(), 1);
    }

    #[test]
    fn raw_two_bit_records_are_not_reused_when_centred_codes_are_written() {
        let model = crate::embed::model::DEFAULT_MODEL;
        let v: Vec<f32> = (0..384)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 400.0)
            .collect();
        let rec = Record::quantize([7; 8], &v);
        let file = |quant| VectorFile {
            quant,
            ..VectorFile::new(model, 384, vec![rec.clone()])
        };
        let mut pool = VectorPool::new(model, 384);
        assert!(!pool.add_file(&file(Quant::Int2)) && pool.is_empty());
        assert!(!pool.add_file(&file(Quant::Binary)) && pool.is_empty());
        // int8 (format v1) and centred records are reused.
        assert!(pool.add_file(&file(Quant::Int8)) && pool.len() == 1);
        // A model without a centre keeps reusing its 2-bit records.
        let mut other = VectorPool::new("m", 384);
        let f = VectorFile {
            quant: Quant::Int2,
            ..VectorFile::new("m", 384, vec![rec.clone()])
        };
        assert!(other.add_file(&f) && other.len() == 1);
    }
}
