//! The warm embedding service, client side: one service per user and model keeps the model
//! loaded for short-lived processes (the hook, `kdd index`, `kdd query`), so they do not pay
//! the model load (~2.5 s for e5-small int8) every time. Long-running servers never use it
//! (they load the model in-process, see [`super::shared`]).
//!
//! - Where: `$XDG_RUNTIME_DIR/kdd/` when that is set, else `<data dir>/run/` (a 0700
//!   directory), socket `embed-<key>.sock` (0600), where `<key>` is derived from the model's
//!   checksum file (`SHA256SUMS`, written by `install.sh`; else the model file's size and
//!   mtime) and its id. No socket per repository.
//! - Protocol ([`frame`]): length-prefixed JSON frames (`u32` big-endian length, then a JSON
//!   object), any number per connection. Every request carries `deadline_ms`: a request that
//!   cannot get the model within it is answered `busy` instead of waiting on other clients.
//!   `hello` → model id, dims, model dir, pid and resident size.
//! - [`Resilient`] is the client embedder: it connects (starting the service, detached, when
//!   none answers; a stale socket file is replaced under a lock), and when the connection
//!   breaks (EOF, broken pipe, timeout, `busy`, service closing) it reconnects once and
//!   otherwise loads the model in-process. It never degrades to L1: only a model or runtime
//!   that is really absent is an error for which [`Error::is_unavailable`] holds.
//! - `KDD_EMBED_WARM=0` disables the service (always in-process).
//! - The service also keeps Apertium warm for the questions of short-lived processes
//!   ([`translate_via_service`]: a running service only, never started for it), so a `kdd
//!   query` that needs a translation does not start the translator's eleven processes.
//!
//! Floats round-trip exactly through JSON (shortest representation), so a vector from the
//! service is bit-identical to one computed in-process.

use super::model::ModelSpec;
use super::{Embedder, Error};
use serde::{Deserialize, Serialize};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Default idle lifetime of the service, in seconds.
pub const IDLE_SECS: u64 = 600;
/// Environment switch: `KDD_EMBED_WARM=0` disables the warm path.
pub const ENV_WARM: &str = crate::config::env::EMBED_WARM;
/// How long a client waits for a freshly started service to answer `hello` (model load).
const STARTUP_WAIT: Duration = Duration::from_secs(30);
/// Longest frame accepted either way (a batch of vectors is far below).
pub const MAX_FRAME: usize = 64 * 1024 * 1024;
/// Longest unix socket path the kernel accepts (`sun_path` is 108 bytes with the NUL).
const MAX_SOCKET_PATH: usize = 107;

/// A request frame.
#[derive(Debug, Serialize, Deserialize)]
pub struct Request {
    #[serde(flatten)]
    pub op: Op,
    /// The client gives up waiting for the model after this many milliseconds.
    #[serde(default)]
    pub deadline_ms: u64,
}

/// What a request asks for.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
pub enum Op {
    Hello,
    Passages {
        texts: Vec<String>,
    },
    Query {
        text: String,
    },
    /// Translate one question with the service's warm Apertium (see [`super::translator`]).
    Translate {
        pair: String,
        text: String,
    },
}

/// A response frame (fields by request kind).
#[derive(Debug, Default, Serialize, Deserialize)]
pub struct Response {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dims: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dir: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// Resident set size of the service in KiB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rss_kb: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vectors: Option<Vec<Vec<f32>>>,
    /// The answer to `translate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub translation: Option<String>,
    /// The model was not free within the deadline (retry elsewhere).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub busy: bool,
    /// The service is shutting down (idle): reconnect.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub closing: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Length-prefixed JSON frames.
pub mod frame {
    use super::MAX_FRAME;
    use std::io::{Read, Write};

    /// Write one frame.
    pub fn write<T: serde::Serialize>(w: &mut impl Write, value: &T) -> std::io::Result<()> {
        let body = serde_json::to_vec(value).map_err(std::io::Error::other)?;
        let len = u32::try_from(body.len()).map_err(std::io::Error::other)?;
        let mut buf = Vec::with_capacity(body.len() + 4);
        buf.extend_from_slice(&len.to_be_bytes());
        buf.extend_from_slice(&body);
        w.write_all(&buf)?;
        w.flush()
    }

    /// Read one frame; `Ok(None)` on a clean EOF before a frame starts.
    pub fn read<T: serde::de::DeserializeOwned>(r: &mut impl Read) -> std::io::Result<Option<T>> {
        let mut len = [0u8; 4];
        match r.read_exact(&mut len) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(e),
        }
        let len = u32::from_be_bytes(len) as usize;
        if len > MAX_FRAME {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("frame of {len} bytes is over the {MAX_FRAME}-byte limit"),
            ));
        }
        let mut body = vec![0u8; len];
        r.read_exact(&mut body)?;
        serde_json::from_slice(&body)
            .map(Some)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
    }
}

/// True when `KDD_EMBED_WARM=1` is set explicitly (the hashed test embedder uses the service
/// only then).
pub fn forced() -> bool {
    matches!(
        std::env::var(ENV_WARM).ok().as_deref().map(str::trim),
        Some("1") | Some("true") | Some("yes")
    )
}

/// True unless `KDD_EMBED_WARM=0`.
pub fn enabled() -> bool {
    !matches!(
        std::env::var(ENV_WARM).ok().as_deref().map(str::trim),
        Some("0") | Some("false") | Some("no")
    )
}

/// The idle lifetime: `KDD_EMBED_IDLE_S` (or the older `KDD_EMBED_IDLE`), else [`IDLE_SECS`].
pub fn idle_secs() -> u64 {
    [
        crate::config::env::EMBED_IDLE,
        crate::config::env::EMBED_IDLE_LEGACY,
    ]
    .iter()
    .find_map(|n| std::env::var(n).ok()?.trim().parse::<u64>().ok())
    .unwrap_or(IDLE_SECS)
}

/// The per-user directory holding service sockets: `$XDG_RUNTIME_DIR/kdd`, else
/// `<data dir>/run`.
pub fn service_dir() -> Option<PathBuf> {
    if let Some(x) = std::env::var_os("XDG_RUNTIME_DIR").filter(|x| !x.is_empty()) {
        let x = PathBuf::from(x);
        if x.is_dir() {
            return Some(x.join("kdd"));
        }
    }
    super::model::data_dir().map(|d| d.join("run"))
}

/// The key of a model: its checksum file when present, else its model file's size and mtime;
/// always with its id, directory and runtime.
pub fn model_key(spec: &ModelSpec) -> String {
    let mut h = blake3::Hasher::new();
    h.update(spec.id.as_bytes());
    h.update(b"\0");
    h.update(spec.dir.as_os_str().as_encoded_bytes());
    h.update(b"\0");
    h.update(spec.runtime.as_os_str().as_encoded_bytes());
    h.update(b"\0");
    match std::fs::read(spec.dir.join("SHA256SUMS")) {
        Ok(sums) => {
            h.update(&sums);
        }
        Err(_) => {
            if let Ok(m) = std::fs::metadata(spec.dir.join("model.onnx")) {
                h.update(&m.len().to_le_bytes());
                let mtime = m
                    .modified()
                    .ok()
                    .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                    .map(|d| d.as_nanos())
                    .unwrap_or(0);
                h.update(&mtime.to_le_bytes());
            }
        }
    }
    h.finalize().to_hex()[..16].to_string()
}

/// The socket of the service for `spec`.
pub fn socket_path(spec: &ModelSpec) -> Option<PathBuf> {
    Some(service_dir()?.join(format!("embed-{}.sock", model_key(spec))))
}

/// Create the service directory with mode 0700 (tightening it when it exists and is ours).
pub fn ensure_service_dir(dir: &Path) -> Result<(), Error> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    let io = |source| Error::Io {
        path: dir.to_path_buf(),
        source,
    };
    if !dir.is_dir() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(io)?;
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(io)
}

/// One connection to the service.
pub struct WarmClient {
    stream: UnixStream,
    model: String,
    dims: usize,
}

/// Status of a running service (for `kdd doctor`).
#[derive(Debug, Clone, Serialize)]
pub struct ServiceStatus {
    pub socket: PathBuf,
    pub model: String,
    pub pid: u32,
    pub rss_kb: u64,
}

impl WarmClient {
    /// Connect to a running service and check it serves `spec`'s model directory. `wait`
    /// bounds the `hello` round trip (a service that is still loading answers after the load).
    pub fn connect(socket: &Path, spec: &ModelSpec, wait: Duration) -> Result<WarmClient, Error> {
        let stream = UnixStream::connect(socket).map_err(|e| Error::Warm(e.to_string()))?;
        let mut c = WarmClient {
            stream,
            model: String::new(),
            dims: 0,
        };
        let r = c.call(Op::Hello, wait)?;
        let (Some(model), Some(dims), Some(dir)) = (r.model, r.dims, r.dir) else {
            return Err(Error::Warm("bad hello".into()));
        };
        if model != spec.id || dir != spec.dir {
            return Err(Error::Warm(format!(
                "service runs {model} from {}, wanted {} from {}",
                dir.display(),
                spec.id,
                spec.dir.display()
            )));
        }
        c.model = model;
        c.dims = dims;
        Ok(c)
    }

    /// One request with a deadline; connection-level failures are [`Error::Warm`].
    fn call(&mut self, op: Op, deadline: Duration) -> Result<Response, Error> {
        let warm = |e: std::io::Error| Error::Warm(e.to_string());
        // The service gives up waiting for the model at the deadline; the socket timeout adds
        // room for the computation itself.
        let timeout = deadline + Duration::from_secs(30);
        self.stream.set_read_timeout(Some(timeout)).map_err(warm)?;
        self.stream.set_write_timeout(Some(timeout)).map_err(warm)?;
        let req = Request {
            op,
            deadline_ms: deadline.as_millis() as u64,
        };
        frame::write(&mut self.stream, &req).map_err(warm)?;
        let r: Response = frame::read(&mut self.stream)
            .map_err(warm)?
            .ok_or_else(|| Error::Warm("the service closed the connection".into()))?;
        if r.busy {
            return Err(Error::Warm("the service is busy".into()));
        }
        if r.closing {
            return Err(Error::Warm("the service is shutting down".into()));
        }
        if let Some(e) = r.error {
            return Err(Error::Inference(e));
        }
        Ok(r)
    }

    fn vectors(&mut self, op: Op, n: usize) -> Result<Vec<Vec<f32>>, Error> {
        // A generous deadline: waiting behind 8 other clients is fine, a stuck service is not.
        let deadline = Duration::from_millis(5_000 + 2_000 * n as u64);
        let v = self.call(op, deadline)?.vectors.unwrap_or_default();
        if v.len() != n || v.iter().any(|x| x.len() != self.dims) {
            return Err(Error::Warm("wrong number or size of vectors".into()));
        }
        Ok(v)
    }

    /// The service's pid and resident size (fresh `hello`).
    pub fn status(&mut self, socket: &Path) -> Result<ServiceStatus, Error> {
        let r = self.call(Op::Hello, Duration::from_secs(5))?;
        Ok(ServiceStatus {
            socket: socket.to_path_buf(),
            model: r.model.unwrap_or_default(),
            pid: r.pid.unwrap_or(0),
            rss_kb: r.rss_kb.unwrap_or(0),
        })
    }
}

impl Embedder for WarmClient {
    fn model_id(&self) -> &str {
        &self.model
    }
    fn dims(&self) -> usize {
        self.dims
    }
    fn embed_passages(&mut self, texts: &[String]) -> Result<Vec<Vec<f32>>, Error> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let op = Op::Passages {
            texts: texts.to_vec(),
        };
        self.vectors(op, texts.len())
    }
    fn embed_query(&mut self, q: &str) -> Result<Vec<f32>, Error> {
        let op = Op::Query {
            text: q.to_string(),
        };
        Ok(self.vectors(op, 1)?.pop().unwrap_or_default())
    }
}

/// Translate `text` (`pair` like `eng-spa`) with the running service's warm Apertium.
/// `None` when no service answers (disabled, not started, an older service): the caller
/// translates some other way. Never starts a service.
pub fn translate_via_service(
    pair: &str,
    text: &str,
    deadline: Duration,
) -> Option<Result<String, Error>> {
    if !enabled() {
        return None;
    }
    let spec = match super::model::discover() {
        super::model::ModelChoice::Model(spec) => spec,
        super::model::ModelChoice::Test if forced() => ModelSpec::test(),
        _ => return None,
    };
    let socket = socket_path(&spec)?;
    if !socket.exists() {
        return None;
    }
    let mut c = WarmClient::connect(&socket, &spec, Duration::from_secs(2)).ok()?;
    let op = Op::Translate {
        pair: pair.to_string(),
        text: text.to_string(),
    };
    match c.call(op, deadline) {
        // No translation: an older service that does not know the request.
        Ok(r) => r.translation.map(Ok),
        Err(Error::Warm(_)) => None,
        Err(e) => Some(Err(e)),
    }
}

/// The running service for the environment's model, if one answers (never starts one).
pub fn running(spec: &ModelSpec) -> Option<ServiceStatus> {
    let socket = socket_path(spec)?;
    let mut c = WarmClient::connect(&socket, spec, Duration::from_secs(5)).ok()?;
    c.status(&socket).ok()
}

/// Connect to the service for `spec`, starting it when none answers. `Err` means "load the
/// model in-process instead" (or, when [`Error::is_unavailable`], that it is not installed).
pub fn connect_or_spawn(spec: &ModelSpec) -> Result<WarmClient, Error> {
    if !enabled() {
        return Err(Error::Warm("disabled by KDD_EMBED_WARM=0".into()));
    }
    let socket = socket_path(spec).ok_or_else(|| Error::Warm("no service directory".into()))?;
    if socket.as_os_str().len() > MAX_SOCKET_PATH {
        return Err(Error::Warm(format!(
            "socket path {} is too long",
            socket.display()
        )));
    }
    if let Ok(c) = WarmClient::connect(&socket, spec, STARTUP_WAIT) {
        return Ok(c);
    }
    // Nothing usable answers: the model must at least look installed before we start one.
    spec.check_installed()?;
    if let Some(dir) = socket.parent() {
        ensure_service_dir(dir)?;
    }
    let mut child = spawn_service(&socket, spec)?;
    let start = Instant::now();
    while start.elapsed() < STARTUP_WAIT {
        std::thread::sleep(Duration::from_millis(20));
        if socket.exists() {
            if let Ok(c) = WarmClient::connect(&socket, spec, STARTUP_WAIT) {
                return Ok(c);
            }
        }
        // The service we started gave up (another one holds the socket but does not answer
        // properly, or the model failed to load): stop waiting, load in-process.
        if let Ok(Some(status)) = child.try_wait() {
            return Err(Error::Warm(format!(
                "the service exited at start ({status})"
            )));
        }
    }
    Err(Error::Warm("the service did not start in time".into()))
}

fn spawn_service(socket: &Path, spec: &ModelSpec) -> Result<std::process::Child, Error> {
    use std::os::unix::process::CommandExt;
    let exe = current_kdd_exe().ok_or_else(|| Error::Warm("kdd executable not found".into()))?;
    let mut cmd = std::process::Command::new(exe);
    cmd.arg("doctor").arg("--embed-server").arg(socket);
    if spec.is_test() {
        cmd.env(crate::config::env::TEST_EMBEDDER, "1");
    } else {
        cmd.env_remove(crate::config::env::TEST_EMBEDDER)
            .env(crate::config::env::MODEL_DIR, &spec.dir)
            .env("ORT_DYLIB_PATH", &spec.runtime);
    }
    cmd.env_remove(crate::config::env::NO_EMBED)
        .current_dir("/")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .spawn()
        .map_err(|e| Error::Warm(format!("cannot start the service: {e}")))
}

/// The `kdd` binary: this executable when it is `kdd`, else a `kdd` next to it (`kdd-hook`,
/// benches and tests live elsewhere), else `kdd` on PATH.
fn current_kdd_exe() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    if exe.file_name().is_some_and(|n| n == "kdd") {
        return Some(exe);
    }
    let sibling = exe.parent()?.join("kdd");
    if sibling.is_file() {
        return Some(sibling);
    }
    let parent_sibling = exe.parent()?.parent()?.join("kdd");
    if parent_sibling.is_file() {
        return Some(parent_sibling);
    }
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join("kdd"))
            .find(|c| c.is_file())
    })
}

/// The client embedder of short-lived processes: the warm service while it answers, else
/// (after one reconnect) the model loaded in this process. Never L1.
pub struct Resilient {
    spec: ModelSpec,
    warm: Option<WarmClient>,
    local: Option<Box<dyn Embedder + Send>>,
    model: String,
    dims: usize,
    /// How many times the service connection was re-established or replaced.
    pub reconnects: usize,
}

impl Resilient {
    /// Connect (or start the service); when that fails, load in-process. `Err` only when the
    /// model or runtime is absent or cannot be loaded at all.
    pub fn open(spec: &ModelSpec) -> Result<Resilient, Error> {
        let (warm, local) = match connect_or_spawn(spec) {
            Ok(c) => (Some(c), None),
            Err(e) if e.is_unavailable() => return Err(e),
            Err(_) => (None, Some(spec.load()?)),
        };
        let (model, dims) = match (&warm, &local) {
            (Some(c), _) => (c.model_id().to_string(), c.dims()),
            (_, Some(l)) => (l.model_id().to_string(), l.dims()),
            _ => unreachable!("one of the two is set"),
        };
        Ok(Resilient {
            spec: spec.clone(),
            warm,
            local,
            model,
            dims,
            reconnects: 0,
        })
    }

    /// True while the warm service is used (false once fallen back in-process).
    pub fn is_warm(&self) -> bool {
        self.local.is_none()
    }

    /// Run `f` on the service, reconnecting once on a connection failure, then in-process.
    fn with<T>(
        &mut self,
        mut f: impl FnMut(&mut dyn Embedder) -> Result<T, Error>,
    ) -> Result<T, Error> {
        if self.local.is_none() {
            for _ in 0..2 {
                if self.warm.is_none() {
                    self.reconnects += 1;
                    match connect_or_spawn(&self.spec) {
                        Ok(c) => self.warm = Some(c),
                        Err(_) => break,
                    }
                }
                let Some(c) = self.warm.as_mut() else { break };
                match f(c) {
                    Err(Error::Warm(_)) => self.warm = None,
                    other => return other,
                }
            }
            self.warm = None;
            self.local = Some(self.spec.load()?);
        }
        match self.local.as_mut() {
            Some(l) => f(l.as_mut()),
            None => Err(Error::Warm("no embedder".into())),
        }
    }
}

impl Embedder for Resilient {
    fn model_id(&self) -> &str {
        &self.model
    }
    fn dims(&self) -> usize {
        self.dims
    }
    fn embed_passages(&mut self, texts: &[String]) -> Result<Vec<Vec<f32>>, Error> {
        self.with(|e| e.embed_passages(texts))
    }
    fn embed_query(&mut self, q: &str) -> Result<Vec<f32>, Error> {
        let _span = crate::trace::span("embed");
        self.with(|e| e.embed_query(q))
    }
}

/// This process's resident set size in KiB (from `/proc/self/status`; 0 when unknown).
pub fn self_rss_kb() -> u64 {
    rss_kb_of("self")
}

/// The resident set size of process `pid` (`"self"` or a number) in KiB, 0 when unknown.
pub fn rss_kb_of(pid: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0)
}
