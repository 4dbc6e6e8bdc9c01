//! The L2 step plugged into [`crate::index`] through its [`ArtifactExtras`] seam.
//!
//! [`for_index`] is what `kdd index`, the hook and the server call: it opens the embedder (warm
//! service or in-process) and returns [`L2Extras`], or — when the runtime/model is missing or
//! embeddings are disabled — [`L1Extras`] plus the warning to print (BR-INDEX-001: the executed
//! level is recorded in the manifest; existing vector files are kept, so restoring the model
//! re-embeds only what changed meanwhile).
//!
//! Embedding failures are never silent: the embedder already reconnects to the service or
//! loads the model in-process when the service dies ([`crate::embed::warm::Resilient`]); a spec whose
//! vectors still cannot be computed is recorded in [`L2Extras::failed`], the caller exits
//! non-zero with that list, and the manifest of such a run does not claim L2.
//! [`VectorAudit`] is the read-only check behind `kdd verify`: at an L2 manifest, every node
//! whose embeddable chunks lack vectors in the committed files is reported.

use super::vectors::{embed_specs, EmbedStats, VectorPool};
use super::ArtifactExtras;
use crate::artifact::{ArtifactPaths, EmbeddingInfo, IndexLevel, Manifest};
use crate::embed::store::quantization;
use crate::embed::Embedder;
use crate::spec::Extracted;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

struct State {
    embedder: Box<dyn Embedder + Send>,
    pool: VectorPool,
    pool_loaded: bool,
    stats: EmbedStats,
    warnings: Vec<String>,
    /// Source files whose vectors could not be computed, with the reason.
    failed: BTreeMap<String, String>,
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
                failed: BTreeMap::new(),
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

    /// Specs (source files) whose vectors could not be computed, with the reason: the run
    /// must fail loudly with this list (and its manifest does not claim L2).
    pub fn failed(&self) -> BTreeMap<String, String> {
        self.lock().failed.clone()
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
            quantization: quantization(&self.model, self.dims).to_string(),
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
        match embed_specs(&mut st.embedder, &[extracted], &mut st.pool) {
            Ok((files, stats)) => {
                st.stats.add(&stats);
                Ok(files.into_iter().map(|f| (f.rel, f.bytes)).collect())
            }
            Err(e) => {
                let message = e.to_string();
                st.failed
                    .insert(extracted.node.source_file.clone(), message.clone());
                Err(message)
            }
        }
    }

    fn manifest(&self, manifest: &mut Manifest) {
        if self.lock().failed.is_empty() {
            manifest.index_level = IndexLevel::L2;
            manifest.embedding = Some(self.info());
        } else {
            // Some specs lack vectors: the index must not claim L2 for them.
            manifest.index_level = IndexLevel::L1;
            manifest.embedding = None;
        }
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

/// `kdd verify`'s vector check: renders nothing, and records every spec whose embeddable
/// chunks (for the manifest's model) have no vector in its committed vector file.
pub struct VectorAudit {
    model: String,
    /// Committed vector files by index-relative path.
    committed: BTreeMap<String, Vec<u8>>,
    lacking: Mutex<BTreeSet<String>>,
}

impl VectorAudit {
    /// Audit against `committed` (index-relative path → bytes; non-vector paths are ignored).
    pub fn new(model: &str, committed: BTreeMap<String, Vec<u8>>) -> VectorAudit {
        VectorAudit {
            model: model.to_string(),
            committed,
            lacking: Mutex::new(BTreeSet::new()),
        }
    }

    /// Node ids lacking vectors, sorted.
    pub fn lacking(&self) -> Vec<String> {
        let g = self.lacking.lock().unwrap_or_else(|p| p.into_inner());
        g.iter().cloned().collect()
    }
}

impl ArtifactExtras for VectorAudit {
    fn files(&self, ex: &Extracted, _: &ArtifactPaths) -> Result<Vec<(String, Vec<u8>)>, String> {
        let chunks = crate::embed::chunk_spec(ex, &self.model);
        if chunks.is_empty() {
            return Ok(Vec::new());
        }
        let rel = ArtifactPaths::embeddings_rel(&ex.node);
        let file = self
            .committed
            .get(&rel)
            .and_then(|b| crate::embed::decode(&rel, b).ok())
            .filter(|f| f.belongs_to(&self.model));
        let complete = file.is_some_and(|f| chunks.iter().all(|c| f.get(&c.key).is_some()));
        if !complete {
            let mut g = self.lacking.lock().unwrap_or_else(|p| p.into_inner());
            g.insert(ex.node.id.clone());
        }
        Ok(Vec::new())
    }
}

/// Decide the level for an index run (BR-INDEX-001) and open the embedder for L2.
pub fn for_index() -> Level {
    match crate::embed::open() {
        Ok(e) => Level::L2(L2Extras::new(e)),
        Err(e) => Level::L1(L1Extras, e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::chunk::tests::{para, sec, spec};
    use crate::embed::Error;
    use crate::spec::Kind;

    /// An embedder whose model is gone (what is left when the service and the in-process
    /// fallback both fail).
    struct Broken;

    impl Embedder for Broken {
        fn model_id(&self) -> &str {
            "broken"
        }
        fn dims(&self) -> usize {
            4
        }
        fn embed_passages(&mut self, _: &[String]) -> Result<Vec<Vec<f32>>, Error> {
            Err(Error::Inference("the model process died".into()))
        }
        fn embed_query(&mut self, _: &str) -> Result<Vec<f32>, Error> {
            Err(Error::Inference("the model process died".into()))
        }
    }

    #[test]
    fn failed_specs_are_listed_and_the_manifest_does_not_claim_l2() {
        let dir = tempfile::tempdir().unwrap();
        let paths = ArtifactPaths::new(dir.path());
        let x = L2Extras::new(Box::new(Broken));
        let mut ex = spec(
            Kind::BusinessRule,
            "BR-X-001",
            "Regla",
            vec![sec(
                "Declaración",
                Some("declaration"),
                2,
                &[],
                vec![para(
                    "Un texto bastante largo que se embebe como un párrafo propio de la regla.",
                )],
            )],
        );
        ex.node.source_file = "specs/rules/BR-X-001.md".into();
        let err = x.files(&ex, &paths).unwrap_err();
        assert!(err.contains("died"), "{err}");
        assert_eq!(
            x.failed().keys().cloned().collect::<Vec<_>>(),
            vec!["specs/rules/BR-X-001.md".to_string()]
        );
        let mut m = Manifest::new("specs", crate::artifact::Structure::SingleDomain, vec![]);
        x.manifest(&mut m);
        assert_eq!(m.index_level, IndexLevel::L1);
        assert!(m.embedding.is_none());
    }
}
