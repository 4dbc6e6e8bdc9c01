//! embed stage: BR-EMBEDDING-001 chunks → content-addressed, quantised vectors (L2).
//!
//! ```text
//! Extracted ─ chunk ─▶ Chunk{key = blake3(model id ‖ context_text), context_text}
//!           ─ plan  ─▶ reuse vectors whose key already exists (this spec's file or anywhere)
//!           ─ Embedder (fixed deterministic batches) ─▶ new vectors
//!           ─ store ─▶ embeddings/<kind>/[<domain>/]<id>.bin (v2: header + 8-byte key + binary codes)
//! ```
//!
//! - [`Embedder`] is the one seam between chunking and a model; [`QueryEmbedder`] is the
//!   query-side seam the cache and the servers hold ([`shared`]: loaded in-process for servers,
//!   through the per-user warm service ([`warm`], [`service`]) for short-lived processes). The shipped implementation is
//!   [`model::OrtEmbedder`] (the model's ONNX session on a provisioned ONNX Runtime, loaded at run time, never
//!   downloaded); [`hashed::HashedEmbedder`] is a small deterministic stand-in selected only by
//!   tests or `KDD_TEST_EMBEDDER=1`.
//! - Loading never panics: a missing runtime or model is an [`Error`] whose message names what is
//!   missing and the command that installs it; callers degrade to L1 (BR-INDEX-001).
//! - Determinism: every text is embedded alone (batch of one, see [`plan`]) so a vector never
//!   depends on what else was in its batch (dynamic int8 activation scales are per batch), and a
//!   key already stored is never re-embedded, so committed bytes only change when text changes.

pub mod centre;
pub mod chunk;
pub mod hashed;
pub mod identity;
pub mod model;
pub mod onnx;
pub mod service;
pub mod shared;
pub mod store;
pub mod tokenizer;
pub mod translator;
pub mod unigram;
pub mod warm;

pub use chunk::{chunk_spec, embeddable_keys, Chunk};
pub use hashed::HashedEmbedder;
pub use model::{discover, ModelChoice, ModelSpec, OrtEmbedder};
pub use shared::{QueryEmbedder, Shared};
pub use store::{decode, encode, quantization, VectorFile};

use std::path::PathBuf;

/// A text embedding model. Vectors are L2-normalised, `dims()` long.
pub trait Embedder {
    /// Stable model id recorded in vector files and the manifest (`multilingual-e5-small-int8`).
    fn model_id(&self) -> &str;
    /// Vector length.
    fn dims(&self) -> usize;
    /// Embed document passages (the model's passage prefix is applied here).
    fn embed_passages(&mut self, texts: &[String]) -> Result<Vec<Vec<f32>>, Error>;
    /// Embed one search query (the model's query prefix is applied here).
    fn embed_query(&mut self, q: &str) -> Result<Vec<f32>, Error>;
}

impl<E: Embedder + ?Sized> Embedder for Box<E> {
    fn model_id(&self) -> &str {
        (**self).model_id()
    }
    fn dims(&self) -> usize {
        (**self).dims()
    }
    fn embed_passages(&mut self, texts: &[String]) -> Result<Vec<Vec<f32>>, Error> {
        (**self).embed_passages(texts)
    }
    fn embed_query(&mut self, q: &str) -> Result<Vec<f32>, Error> {
        (**self).embed_query(q)
    }
}

/// The command that provisions the runtime and the default model.
pub const INSTALL_HINT: &str = "./install.sh (from the kdd source tree)";

/// Errors of the embed stage. Every variant says what is wrong and what to do.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Embeddings are switched off (`KDD_NO_EMBED=1`).
    #[error("embeddings disabled by KDD_NO_EMBED=1; indexing at L1")]
    Disabled,
    /// The ONNX Runtime shared library is not where we look for it.
    #[error("ONNX Runtime library not found at {path}; install it with `{hint}` (or set ORT_DYLIB_PATH); indexing at L1", hint = INSTALL_HINT)]
    RuntimeMissing { path: PathBuf },
    /// The library exists but could not be loaded (wrong version, wrong architecture…).
    #[error("ONNX Runtime library {path} could not be loaded: {message}; reinstall it with `{hint}`; indexing at L1", hint = INSTALL_HINT)]
    RuntimeLoad { path: PathBuf, message: String },
    /// A model directory or one of its files is missing.
    #[error("embedding model `{model}` not found: {path} is missing; install it with `{hint}` (or set KDD_MODEL_DIR); indexing at L1", hint = INSTALL_HINT)]
    ModelMissing { model: String, path: PathBuf },
    /// The model files exist but the model could not be built.
    #[error("embedding model `{model}` in {dir} could not be loaded: {message}; reinstall it with `{hint}`; indexing at L1", hint = INSTALL_HINT)]
    ModelLoad {
        model: String,
        dir: PathBuf,
        message: String,
    },
    /// Inference failed.
    #[error("embedding failed: {0}")]
    Inference(String),
    /// A vector file is unreadable.
    #[error("{path}: corrupt vector file ({message}); run `kdd index` to regenerate it")]
    Corrupt { path: String, message: String },
    /// A vector file was written by another model or with another size.
    #[error("{path}: vectors were made with `{found}`, the index uses `{expected}`; run `kdd index` to re-embed")]
    ModelMismatch {
        path: String,
        found: String,
        expected: String,
    },
    /// The warm service could not be reached or answered badly (callers reconnect, then load
    /// the model in-process).
    #[error("warm embedding service: {0}")]
    Warm(String),
    /// Semantic search cannot run (the reason, already phrased for the user).
    #[error("{0}")]
    Unavailable(String),
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

impl Error {
    /// True for "not installed / switched off" conditions that mean "index at L1 with a warning",
    /// as opposed to failures of an installed model.
    pub fn is_unavailable(&self) -> bool {
        matches!(
            self,
            Error::Disabled
                | Error::RuntimeMissing { .. }
                | Error::RuntimeLoad { .. }
                | Error::ModelMissing { .. }
                | Error::ModelLoad { .. }
        )
    }
}

/// Cosine similarity of two vectors (they need not be normalised).
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let (mut dot, mut na, mut nb) = (0f32, 0f32, 0f32);
    for (x, y) in a.iter().zip(b) {
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 {
        0.0
    } else {
        dot / (na.sqrt() * nb.sqrt())
    }
}

/// Open the embedder the environment selects for a short-lived process (see
/// [`model::discover`]): the per-user warm service when possible ([`warm::Resilient`], which
/// reconnects or loads in-process when the service dies), else the model loaded in-process. A
/// missing runtime or model is an error for which [`Error::is_unavailable`] is true: index at
/// L1 and warn.
pub fn open() -> Result<Box<dyn Embedder + Send>, Error> {
    match discover() {
        ModelChoice::Disabled => Err(Error::Disabled),
        ModelChoice::Test if warm::forced() => {
            Ok(Box::new(warm::Resilient::open(&ModelSpec::test())?))
        }
        ModelChoice::Test => Ok(Box::new(HashedEmbedder::new())),
        ModelChoice::Model(spec) if warm::enabled() => Ok(Box::new(warm::Resilient::open(&spec)?)),
        ModelChoice::Model(spec) => Ok(Box::new(OrtEmbedder::load(&spec)?)),
    }
}
