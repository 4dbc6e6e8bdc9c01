//! Model discovery and the real model loader (an ONNX Runtime loaded at run time, the session
//! built by [`super::onnx`], the tokenizer by [`super::tokenizer`]).
//!
//! Discovery (first match wins), see [`discover`]:
//! 1. `KDD_NO_EMBED=1` → [`ModelChoice::Disabled`] (L1).
//! 2. `KDD_TEST_EMBEDDER=1` → [`ModelChoice::Test`] (the hashed embedder; tests only).
//! 3. `KDD_MODEL_DIR=<dir>` → that directory (fastembed's user-defined model layout:
//!    `model.onnx`, `tokenizer.json`, `config.json`, `special_tokens_map.json`,
//!    `tokenizer_config.json`; optional `kdd-model.json` with id, prefixes, pooling).
//! 4. `<data dir>/models/<KDD_MODEL or multilingual-e5-small-int8>`, where the data dir is
//!    `KDD_DATA_DIR`, else `$XDG_DATA_HOME/kdd`, else `~/.local/share/kdd` (what `install.sh`
//!    provisions).
//!
//! The ONNX Runtime library is `ORT_DYLIB_PATH` when set, else
//! `<data dir>/lib/libonnxruntime.so.1.31.1` (or the unversioned symlink). It is loaded with
//! `ort::init_from`, which returns an error instead of panicking; every session is built in that
//! one environment.

use super::onnx::{OnnxModel, SessionMemory};
use super::tokenizer::{TextTokenizer, TokenizerFiles};
use super::{Embedder, Error};
use crate::config::env;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The default model (multilingual: specs are mostly Spanish, agents often ask in English).
pub const DEFAULT_MODEL: &str = "multilingual-e5-small-int8";
/// The resident size a warm model process should stay under (issue 12), reported by
/// `kdd doctor`. Measured floor for multilingual-e5-small int8 (debug build, VmRSS after load):
/// ~164 MB = ~112 MB int8 initializers held once by ONNX Runtime (the model file is 118 MB)
/// + ~15 MB session state + ~7 MB compact tokenizer + ~29 MB code pages (runtime + kdd).
pub const RSS_TARGET_MB: u64 = 250;
/// The ONNX Runtime release `install.sh` provisions.
pub const ORT_VERSION: &str = "1.31.1";
/// Longest input in tokens (e5 and MiniLM both accept 512).
pub const MAX_LENGTH: usize = 512;
/// The pseudo model directory of [`ModelSpec::test`].
const TEST_DIR: &str = "<kdd-test-embedder>";
/// Files a model directory must contain.
pub const MODEL_FILES: [&str; 5] = [
    "model.onnx",
    "tokenizer.json",
    "config.json",
    "special_tokens_map.json",
    "tokenizer_config.json",
];

/// What discovery decided.
#[derive(Debug, Clone)]
pub enum ModelChoice {
    /// `KDD_NO_EMBED=1`: L1 only.
    Disabled,
    /// `KDD_TEST_EMBEDDER=1`: the deterministic hashed embedder.
    Test,
    /// A real model directory (it may not exist: loading reports that).
    Model(ModelSpec),
}

impl ModelChoice {
    /// Load the chosen embedder. `Disabled` is an [`Error::Disabled`].
    pub fn load(&self) -> Result<Box<dyn Embedder + Send>, Error> {
        match self {
            ModelChoice::Disabled => Err(Error::Disabled),
            ModelChoice::Test => Ok(Box::new(super::HashedEmbedder::new())),
            ModelChoice::Model(spec) => Ok(Box::new(OrtEmbedder::load(spec)?)),
        }
    }

    /// The model id vectors would carry, when known without loading.
    pub fn model_id(&self) -> Option<String> {
        match self {
            ModelChoice::Disabled => None,
            ModelChoice::Test => Some(super::hashed::MODEL_ID.to_string()),
            ModelChoice::Model(s) => Some(s.id.clone()),
        }
    }
}

/// Optional `kdd-model.json` written by `install.sh` next to the model files.
#[derive(Debug, Clone, Default, Deserialize)]
struct ModelMeta {
    id: Option<String>,
    dimensions: Option<usize>,
    pooling: Option<String>,
    max_length: Option<usize>,
    query_prefix: Option<String>,
    passage_prefix: Option<String>,
}

/// A located model: where its files and the runtime are, and how to call it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelSpec {
    /// Model id (from `kdd-model.json`, else the directory name).
    pub id: String,
    pub dir: PathBuf,
    /// The ONNX Runtime shared library to load.
    pub runtime: PathBuf,
    /// Prefix for passages (`passage: ` for e5 models, else empty).
    pub passage_prefix: String,
    /// Prefix for queries (`query: ` for e5 models, else empty).
    pub query_prefix: String,
    /// `true` for CLS pooling, else mean pooling.
    pub cls_pooling: bool,
    pub max_length: usize,
    /// Vector length when declared by `kdd-model.json`.
    pub dims: Option<usize>,
}

impl ModelSpec {
    /// Describe the model in `dir` using `runtime`; reads `kdd-model.json` when present.
    pub fn from_dir(dir: &Path, runtime: &Path) -> ModelSpec {
        let meta: ModelMeta = std::fs::read(dir.join("kdd-model.json"))
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default();
        let dir_name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "model".to_string());
        let id = meta.id.clone().unwrap_or(dir_name);
        let e5 = id.to_ascii_lowercase().contains("e5");
        let prefix = |declared: &Option<String>, e5_default: &str| {
            declared.clone().unwrap_or_else(|| {
                if e5 {
                    e5_default.to_string()
                } else {
                    String::new()
                }
            })
        };
        ModelSpec {
            passage_prefix: prefix(&meta.passage_prefix, "passage: "),
            query_prefix: prefix(&meta.query_prefix, "query: "),
            cls_pooling: meta.pooling.as_deref() == Some("cls"),
            max_length: meta.max_length.unwrap_or(MAX_LENGTH).min(MAX_LENGTH),
            dims: meta.dimensions,
            id,
            dir: dir.to_path_buf(),
            runtime: runtime.to_path_buf(),
        }
    }

    /// The spec standing for the hashed test embedder behind the warm service (tests only).
    pub fn test() -> ModelSpec {
        ModelSpec {
            id: super::hashed::MODEL_ID.to_string(),
            dir: PathBuf::from(TEST_DIR),
            runtime: PathBuf::new(),
            passage_prefix: String::new(),
            query_prefix: String::new(),
            cls_pooling: false,
            max_length: MAX_LENGTH,
            dims: Some(super::hashed::DIMS),
        }
    }

    /// True for [`ModelSpec::test`].
    pub fn is_test(&self) -> bool {
        self.dir.as_os_str() == TEST_DIR && self.id == super::hashed::MODEL_ID
    }

    /// Load this model in-process (the hashed embedder for [`ModelSpec::test`]).
    pub fn load(&self) -> Result<Box<dyn Embedder + Send>, Error> {
        if self.is_test() {
            return Ok(Box::new(super::HashedEmbedder::new()));
        }
        Ok(Box::new(OrtEmbedder::load(self)?))
    }

    /// The first required file that is missing, if any.
    pub fn missing_file(&self) -> Option<PathBuf> {
        if self.is_test() {
            return None;
        }
        if !self.dir.is_dir() {
            return Some(self.dir.clone());
        }
        MODEL_FILES
            .iter()
            .map(|f| self.dir.join(f))
            .find(|p| !p.is_file())
    }

    /// Whether the model looks installed (its files and, for a real model, the runtime
    /// library): the typed error that names what is missing, before anything is loaded.
    pub fn check_installed(&self) -> Result<(), Error> {
        if let Some(missing) = self.missing_file() {
            return Err(Error::ModelMissing {
                model: self.id.clone(),
                path: missing,
            });
        }
        if !self.is_test() && !self.runtime.exists() {
            return Err(Error::RuntimeMissing {
                path: self.runtime.clone(),
            });
        }
        Ok(())
    }
}

fn env_nonempty(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

/// An absolute path from an environment variable; a relative one is no path at all.
fn env_absolute(name: &str) -> Option<PathBuf> {
    env_nonempty(name)
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
}

/// The per-user data directory holding `lib/` and `models/`: `KDD_DATA_DIR`, else
/// `$XDG_DATA_HOME/kdd`, else `$HOME/.local/share/kdd`, each only when absolute. A relative
/// value would be read from the current directory — a hook's is the repository, where a
/// teammate could commit a `lib/libonnxruntime.so` that this process would then load.
pub fn data_dir() -> Option<PathBuf> {
    if let Some(d) = env_absolute(env::DATA_DIR) {
        return Some(d);
    }
    if let Some(x) = env_absolute("XDG_DATA_HOME") {
        return Some(x.join("kdd"));
    }
    env_absolute("HOME").map(|h| h.join(".local/share/kdd"))
}

/// Where the data directory's files are looked for when there is none (no absolute `HOME`,
/// `XDG_DATA_HOME` or `KDD_DATA_DIR`): a path that cannot exist (`/dev/null` is no directory),
/// named so that the "not found" messages say what to set.
const NO_DATA_DIR: &str = "/dev/null/no-data-dir-set-HOME-or-KDD_DATA_DIR";

fn data_dir_or_none() -> PathBuf {
    data_dir().unwrap_or_else(|| PathBuf::from(NO_DATA_DIR))
}

/// The ONNX Runtime library to load: `ORT_DYLIB_PATH`, else the data dir's copy. A relative
/// `ORT_DYLIB_PATH` is read beside this executable, as ONNX Runtime's own loader reads it,
/// never from the current directory.
pub fn runtime_path() -> PathBuf {
    if let Some(p) = env_nonempty("ORT_DYLIB_PATH").map(PathBuf::from) {
        if p.is_absolute() {
            return p;
        }
        let beside = std::env::current_exe()
            .ok()
            .and_then(|e| e.parent().map(|d| d.join(&p)));
        return beside.unwrap_or_else(|| PathBuf::from(NO_DATA_DIR).join(p));
    }
    let lib = data_dir_or_none().join("lib");
    let versioned = lib.join(format!("libonnxruntime.so.{ORT_VERSION}"));
    if versioned.exists() {
        return versioned;
    }
    let plain = lib.join("libonnxruntime.so");
    if plain.exists() {
        plain
    } else {
        versioned
    }
}

/// Decide which embedder to use from the environment (see the module docs).
pub fn discover() -> ModelChoice {
    let flag = |name: &str| env_nonempty(name).is_some_and(|v| v != "0" && v != "false");
    if flag(env::NO_EMBED) {
        return ModelChoice::Disabled;
    }
    if flag(env::TEST_EMBEDDER) {
        return ModelChoice::Test;
    }
    let runtime = runtime_path();
    if let Some(dir) = env_nonempty(env::MODEL_DIR) {
        return ModelChoice::Model(ModelSpec::from_dir(Path::new(&dir), &runtime));
    }
    let name = env_nonempty(env::MODEL).unwrap_or_else(|| DEFAULT_MODEL.to_string());
    let name = crate::paths::sanitize_component(&name);
    let dir = data_dir_or_none().join("models").join(name);
    ModelChoice::Model(ModelSpec::from_dir(&dir, &runtime))
}

/// The process-wide ONNX Runtime environment (the library can be loaded only once per process).
static ORT_ENV: Mutex<Option<ort::environment::Environment>> = Mutex::new(None);

/// Load the ONNX Runtime library (once per process) and return its environment, or a typed error.
pub fn runtime_environment(path: &Path) -> Result<ort::environment::Environment, Error> {
    let mut guard = ORT_ENV.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(env) = guard.as_ref() {
        return Ok(env.clone());
    }
    if !path.exists() {
        return Err(Error::RuntimeMissing {
            path: path.to_path_buf(),
        });
    }
    let path_buf = path.to_path_buf();
    let built = std::panic::catch_unwind(move || {
        ort::init_from(&path_buf)
            .map_err(|e| e.to_string())
            .and_then(|b| {
                // ONNX Runtime's telemetry (on by default) keeps a device id and an event
                // store under ~/.cache/Microsoft: a write outside the repository and the
                // cache, on machines that never send anything.
                b.with_name("kdd")
                    .with_telemetry(false)
                    .build()
                    .map_err(|e| e.to_string())
            })
    })
    .map_err(|p| panic_message(&p))
    .and_then(|r| r);
    match built {
        Ok(env) => {
            *guard = Some(env.clone());
            Ok(env)
        }
        Err(message) => Err(Error::RuntimeLoad {
            path: path.to_path_buf(),
            message,
        }),
    }
}

/// The ONNX Runtime version string of the loaded library (e.g. `1.31.1`), loading it if needed.
pub fn runtime_version(path: &Path) -> Result<String, Error> {
    runtime_environment(path)?;
    let info = std::panic::catch_unwind(ort::info).map_err(|p| Error::RuntimeLoad {
        path: path.to_path_buf(),
        message: panic_message(&p),
    })?;
    // "ORT Build Info: git-branch=rel-1.31.1, git-commit-id=…"
    let version = info
        .split([',', ' '])
        .find_map(|t| t.strip_prefix("git-branch=rel-"))
        .map(str::to_string)
        .unwrap_or_else(|| info.to_string());
    Ok(version)
}

fn panic_message(p: &Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<String>()
        .cloned()
        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "ONNX Runtime panicked while loading".to_string())
}

/// Load time breakdown of an [`OrtEmbedder`].
#[derive(Debug, Clone, Copy, Default)]
pub struct LoadTimings {
    /// dlopen + environment.
    pub runtime: Duration,
    /// Reading the tokenizer files (ONNX Runtime reads `model.onnx` itself, inside `build`).
    pub read: Duration,
    /// Tokenizer + ONNX session construction.
    pub build: Duration,
}

/// The shipped embedder: the model's ONNX graph in an ONNX Runtime session built by kdd
/// ([`super::onnx`]) with the compact tokenizer ([`super::tokenizer`]); the vectors are the
/// ones fastembed 7.5 produced for the same files.
pub struct OrtEmbedder {
    spec: ModelSpec,
    model: OnnxModel,
    dims: usize,
    /// How long loading took.
    pub timings: LoadTimings,
}

impl OrtEmbedder {
    /// Load the model described by `spec`. Never panics: every failure is an [`Error`].
    pub fn load(spec: &ModelSpec) -> Result<OrtEmbedder, Error> {
        Self::load_with(spec, &SessionMemory::default())
    }

    /// Like [`OrtEmbedder::load`] with explicit session options (benchmarks, measurements).
    pub fn load_with(spec: &ModelSpec, memory: &SessionMemory) -> Result<OrtEmbedder, Error> {
        if let Some(missing) = spec.missing_file() {
            return Err(Error::ModelMissing {
                model: spec.id.clone(),
                path: missing,
            });
        }
        let t0 = Instant::now();
        let env = runtime_environment(&spec.runtime)?;
        let t1 = Instant::now();
        let read = |name: &str| {
            let p = spec.dir.join(name);
            std::fs::read(&p).map_err(|source| Error::Io { path: p, source })
        };
        let files = TokenizerFiles {
            tokenizer: read("tokenizer.json")?,
            config: read("config.json")?,
            special_tokens_map: read("special_tokens_map.json")?,
            tokenizer_config: read("tokenizer_config.json")?,
        };
        let onnx = spec.dir.join("model.onnx");
        let t2 = Instant::now();
        let load_error = |message: String| Error::ModelLoad {
            model: spec.id.clone(),
            dir: spec.dir.clone(),
            message,
        };
        let tokenizer = TextTokenizer::load(&files, spec.max_length).map_err(load_error)?;
        drop(files);
        // ONNX Runtime reads model.onnx itself: no second, Rust-side copy of its bytes during
        // the load. A panic inside the runtime is an error, not an abort.
        let built = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            OnnxModel::build(&env, &onnx, tokenizer, spec.cls_pooling, memory)
        }))
        .map_err(|p| panic_message(&p))
        .and_then(|r| r);
        let mut model = built.map_err(load_error)?;
        let t3 = Instant::now();
        let dims = match spec.dims {
            Some(d) => d,
            None => model
                .embed(&["dimension probe"])
                .map_err(load_error)?
                .first()
                .map(Vec::len)
                .unwrap_or(0),
        };
        release_free_heap();
        Ok(OrtEmbedder {
            spec: spec.clone(),
            model,
            dims,
            timings: LoadTimings {
                runtime: t1 - t0,
                read: t2 - t1,
                build: t3 - t2,
            },
        })
    }

    /// The model's description.
    pub fn spec(&self) -> &ModelSpec {
        &self.spec
    }

    /// Embed already-prefixed texts as one batch (exposed for benchmarks).
    pub fn embed_raw(&mut self, texts: &[String]) -> Result<Vec<Vec<f32>>, Error> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let out = self.model.embed(&refs).map_err(Error::Inference)?;
        if let Some(v) = out.iter().find(|v| v.len() != self.dims) {
            return Err(Error::Inference(format!(
                "model `{}` returned a {}-d vector, expected {}",
                self.spec.id,
                v.len(),
                self.dims
            )));
        }
        Ok(out)
    }
}

impl Embedder for OrtEmbedder {
    fn model_id(&self) -> &str {
        &self.spec.id
    }

    fn dims(&self) -> usize {
        self.dims
    }

    /// One text per ONNX run: a vector never depends on its batch neighbours (see [`super`]).
    /// Long passages leave freed run buffers in the heap; they are handed back to the kernel
    /// after each batch (measured: 20 passages of ~500 tokens left +20 MB RSS; the trim takes
    /// ~1.6 ms, against ≥ 10 ms per passage). Queries are short and skip it.
    fn embed_passages(&mut self, texts: &[String]) -> Result<Vec<Vec<f32>>, Error> {
        let mut out = Vec::with_capacity(texts.len());
        for t in texts {
            let text = format!("{}{}", self.spec.passage_prefix, t);
            out.extend(self.embed_raw(std::slice::from_ref(&text))?);
        }
        release_free_heap();
        Ok(out)
    }

    fn embed_query(&mut self, q: &str) -> Result<Vec<f32>, Error> {
        let text = format!("{}{}", self.spec.query_prefix, q);
        self.embed_raw(std::slice::from_ref(&text))?
            .pop()
            .ok_or_else(|| Error::Inference("no vector returned".into()))
    }
}

/// Give the heap pages freed while loading back to the kernel.
///
/// Loading parses the 9 MB `tokenizer.json` and the ONNX graph through large temporary
/// allocations; glibc keeps their freed pages resident in the main heap for the life of the
/// process. Measured on multilingual-e5-small int8 (`kdd doctor --embed-server`, VmRSS):
/// 721 MB after loading, 416 MB after this call, same vectors. A no-op off glibc.
pub fn release_free_heap() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[allow(unsafe_code)]
    // SAFETY: malloc_trim only returns free memory of glibc's own heap to the kernel; it takes
    // no pointer and is thread-safe (it locks each arena).
    unsafe {
        libc::malloc_trim(0);
    }
}
