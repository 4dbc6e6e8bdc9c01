//! The L2 step plugged into [`crate::index`] through its [`ArtifactExtras`] seam.
//!
//! [`for_index`] is what `kdd index`, the hook and the server call: it opens the embedder (warm
//! server or in-process) and returns [`L2Extras`], or — when the runtime/model is missing or
//! embeddings are disabled — [`L1Extras`] plus the warning to print (BR-INDEX-001: the executed
//! level is recorded in the manifest; existing vector files are kept, so restoring the model
//! re-embeds only what changed meanwhile).

use super::plan::{embed_specs, EmbedStats, VectorPool};
use super::store::QUANTIZATION;
use super::Embedder;
use crate::artifact::{ArtifactPaths, EmbeddingInfo, IndexLevel, Manifest};
use crate::index::ArtifactExtras;
use crate::spec::Extracted;
use std::path::Path;
use std::sync::Mutex;

struct State {
    embedder: Box<dyn Embedder + Send>,
    pool: VectorPool,
    pool_loaded: bool,
    stats: EmbedStats,
    warnings: Vec<String>,
}

/// Embeds each spec's chunks (reusing every vector already in the index) and renders its
/// `embeddings/…bin`; sets the manifest to L2 with the model's id, dims and quantisation.
pub struct L2Extras {
    state: Mutex<State>,
    model: String,
    dims: usize,
}

impl L2Extras {
    pub fn new(embedder: Box<dyn Embedder + Send>) -> L2Extras {
        let model = embedder.model_id().to_string();
        let dims = embedder.dims();
        L2Extras {
            state: Mutex::new(State {
                pool: VectorPool::new(&model, dims),
                embedder,
                pool_loaded: false,
                stats: EmbedStats::default(),
                warnings: Vec::new(),
            }),
            model,
            dims,
        }
    }

    pub fn model_id(&self) -> &str {
        &self.model
    }

    /// What was embedded and reused so far.
    pub fn stats(&self) -> EmbedStats {
        self.lock().stats.clone()
    }

    /// Problems met with existing vector files (corrupt files are re-embedded, never fatal).
    pub fn warnings(&self) -> Vec<String> {
        self.lock().warnings.clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Give the embedder back (e.g. to reuse a loaded model for another run).
    pub fn into_embedder(self) -> Box<dyn Embedder + Send> {
        self.state
            .into_inner()
            .unwrap_or_else(|p| p.into_inner())
            .embedder
    }

    /// The manifest's embedding description.
    pub fn info(&self) -> EmbeddingInfo {
        EmbeddingInfo {
            model: self.model.clone(),
            dimensions: self.dims as u32,
            quantization: QUANTIZATION.to_string(),
        }
    }
}

impl ArtifactExtras for L2Extras {
    fn files(
        &self,
        extracted: &Extracted,
        paths: &ArtifactPaths,
    ) -> Result<Vec<(String, Vec<u8>)>, String> {
        let mut guard = self.lock();
        let st = &mut *guard;
        if !st.pool_loaded {
            st.pool_loaded = true;
            for e in st.pool.load_index(paths) {
                st.warnings.push(e.to_string());
            }
        }
        let (files, stats) =
            embed_specs(&mut st.embedder, &[extracted], &mut st.pool).map_err(|e| e.to_string())?;
        st.stats.add(&stats);
        Ok(files.into_iter().map(|f| (f.rel, f.bytes)).collect())
    }

    fn manifest(&self, manifest: &mut Manifest) {
        manifest.index_level = IndexLevel::L2;
        manifest.embedding = Some(self.info());
    }
}

/// L1: writes no vectors (existing vector files are left alone) and records level L1.
pub struct L1Extras;

impl ArtifactExtras for L1Extras {
    fn files(&self, _: &Extracted, _: &ArtifactPaths) -> Result<Vec<(String, Vec<u8>)>, String> {
        Ok(Vec::new())
    }

    fn manifest(&self, manifest: &mut Manifest) {
        manifest.index_level = IndexLevel::L1;
        manifest.embedding = None;
    }
}

/// The index level a run will execute, with its extras.
// One value per run: boxing the large variant would buy nothing.
#[allow(clippy::large_enum_variant)]
pub enum Level {
    L2(L2Extras),
    /// L1 and the reason (already phrased for the user: what is missing and how to install it).
    L1(L1Extras, String),
}

impl Level {
    pub fn extras(&self) -> &dyn ArtifactExtras {
        match self {
            Level::L2(x) => x,
            Level::L1(x, _) => x,
        }
    }
}

/// Decide the level for an index run (BR-INDEX-001) and open the embedder for L2.
pub fn for_index(cache_dir: &Path) -> Level {
    match super::open(Some(cache_dir)) {
        Ok(e) => Level::L2(L2Extras::new(e)),
        Err(e) => Level::L1(L1Extras, e.to_string()),
    }
}
