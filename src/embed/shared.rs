//! The query-side seam: [`QueryEmbedder`] (typed errors, `&self`, shared across request tasks)
//! and the two ways of backing it.
//!
//! - [`Shared::in_process`] — for long-running servers (`kdd mcp`, `kdd serve`, the bare-repo
//!   server): the model is loaded in this process, once, lazily on the first semantic query (or
//!   at once with [`Shared::preload`]), and every request task shares it. A server never depends
//!   on another process for embeddings, so nothing it holds can go stale or time out.
//! - [`Shared::short_lived`] — for the CLI: the per-user warm service ([`super::warm`]) with its
//!   reconnect-or-load-in-process fallback ([`super::warm::Resilient`]).
//!
//! Invariants: a model that is not installed is an error at once (not at the first query); the
//! model id is known before loading (from discovery), so a mismatch with the
//! index manifest is reported without loading anything; a load failure is remembered and
//! reported on every later query (with the reason, never a silent L1); the hashed test embedder
//! (`KDD_TEST_EMBEDDER=1`) stands in for the model in both modes.

use super::model::{ModelChoice, ModelSpec};
use super::{Embedder, Error};
use std::sync::Mutex;

/// Turns a query into a vector comparable with the stored chunk vectors. Shared by request
/// tasks: implementations synchronise internally.
pub trait QueryEmbedder: Send + Sync {
    /// Embed one query text.
    fn embed_query(&self, text: &str) -> Result<Vec<f32>, Error>;
    /// Model id (must match the index manifest).
    fn model(&self) -> &str;
}

/// How a [`Shared`] gets its model on first use.
#[derive(Debug, Clone)]
enum Source {
    /// Load in this process.
    InProcess(ModelChoice),
    /// The per-user warm service, else in-process (see [`super::warm::Resilient`]).
    Warm(ModelSpec),
}

enum Slot {
    Empty,
    Ready(Box<dyn Embedder + Send>),
    /// The load failed: the message is repeated on every query.
    Failed(String),
}

/// A lazily loaded embedder behind a mutex (embedding needs `&mut`; queries are short).
pub struct Shared {
    model: String,
    source: Source,
    slot: Mutex<Slot>,
}

impl Shared {
    /// The environment's model (see [`super::model::discover`]) loaded in this process on first
    /// use. `Err` when embeddings are disabled (`KDD_NO_EMBED=1`).
    pub fn in_process() -> Result<Shared, Error> {
        Shared::new(Source::InProcess(super::discover()))
    }

    /// The environment's model through the per-user warm service (short-lived processes).
    pub fn short_lived() -> Result<Shared, Error> {
        match super::discover() {
            ModelChoice::Model(spec) if super::warm::enabled() => Shared::new(Source::Warm(spec)),
            ModelChoice::Test if super::warm::forced() => {
                Shared::new(Source::Warm(ModelSpec::test()))
            }
            other => Shared::new(Source::InProcess(other)),
        }
    }

    fn new(source: Source) -> Result<Shared, Error> {
        // A model that is plainly not installed is reported now, not at the first query.
        if let Source::InProcess(ModelChoice::Model(spec)) | Source::Warm(spec) = &source {
            spec.check_installed()?;
        }
        let id = match &source {
            Source::InProcess(c) => c.model_id().ok_or(Error::Disabled)?,
            Source::Warm(spec) => spec.id.clone(),
        };
        Ok(Shared {
            model: id,
            source,
            slot: Mutex::new(Slot::Empty),
        })
    }

    /// True once the model is loaded (for `doctor` and logs).
    pub fn is_loaded(&self) -> bool {
        matches!(*self.lock(), Slot::Ready(_))
    }

    /// Load now (servers started with a preload flag). Returns the load error, if any.
    pub fn preload(&self) -> Result<(), Error> {
        let mut g = self.lock();
        self.ensure(&mut g).map(|_| ())
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Slot> {
        self.slot.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn ensure<'a>(&self, slot: &'a mut Slot) -> Result<&'a mut Box<dyn Embedder + Send>, Error> {
        if let Slot::Empty = slot {
            let loaded = match &self.source {
                Source::InProcess(c) => c.load(),
                Source::Warm(spec) => super::warm::Resilient::open(spec)
                    .map(|r| Box::new(r) as Box<dyn Embedder + Send>),
            };
            *slot = match loaded {
                Ok(e) if e.model_id() == self.model => Slot::Ready(e),
                Ok(e) => Slot::Failed(format!(
                    "the loaded model is `{}`, expected `{}`",
                    e.model_id(),
                    self.model
                )),
                Err(e) => Slot::Failed(e.to_string()),
            };
        }
        match slot {
            Slot::Ready(e) => Ok(e),
            Slot::Failed(m) => Err(Error::Unavailable(m.clone())),
            Slot::Empty => Err(Error::Unavailable("model not loaded".into())),
        }
    }
}

impl QueryEmbedder for Shared {
    fn embed_query(&self, text: &str) -> Result<Vec<f32>, Error> {
        let mut g = self.lock();
        self.ensure(&mut g)?.embed_query(text)
    }

    fn model(&self) -> &str {
        &self.model
    }
}

/// The query embedder for an index embedded with `want` (its manifest's model id): `Err` says
/// why semantic search is unavailable (disabled, or another model than the index's).
pub fn for_index_model(want: &str, in_process: bool) -> Result<Shared, Error> {
    let shared = if in_process {
        Shared::in_process()?
    } else {
        Shared::short_lived()?
    };
    if shared.model() != want {
        return Err(Error::Unavailable(format!(
            "the index was embedded with `{want}` but the available model is `{}`",
            shared.model()
        )));
    }
    Ok(shared)
}
