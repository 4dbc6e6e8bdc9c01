//! The warm embedder: a long-lived local process that keeps the model loaded, so commands do not
//! pay the model load (~2.5 s for e5-small int8, mostly the 250k-piece tokenizer) every time.
//!
//! - Server: `kdd doctor --embed-server SOCKET` (hidden flag) loads the discovered model, listens
//!   on a unix socket (mode 0600) and answers one request per line (JSON). It exits after
//!   [`IDLE_SECS`] without requests (`KDD_EMBED_IDLE` overrides) or when its socket file is removed.
//! - Client: [`connect_or_spawn`] connects to `<cache dir>/embed.sock`, checks that the server
//!   runs the same model directory, and otherwise starts one (detached, own process group) and
//!   waits for it; if anything fails the caller loads the model in-process. `KDD_EMBED_WARM=0`
//!   disables the warm path.
//!
//! Protocol (one JSON object per line each way):
//! `{"op":"hello"}` → `{"model":id,"dims":n,"dir":model dir}`;
//! `{"op":"passages","texts":[…]}` / `{"op":"query","text":…}` → `{"vectors":[[…]]}` or
//! `{"error":"…"}`. Floats round-trip exactly through JSON (shortest representation), so a
//! vector from the server is bit-identical to one computed in-process.

use super::model::{discover, FastEmbedder, ModelChoice, ModelSpec};
use super::{Embedder, Error};
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Default idle lifetime of the server.
pub const IDLE_SECS: u64 = 600;
/// Socket file name inside the cache directory.
pub const SOCKET_NAME: &str = "embed.sock";
/// Environment switch: `KDD_EMBED_WARM=0` disables the warm path.
pub const ENV_WARM: &str = crate::config::env::EMBED_WARM;
/// Environment override of the idle lifetime (seconds).
pub const ENV_IDLE: &str = crate::config::env::EMBED_IDLE;
/// How long a client waits for a freshly started server.
const STARTUP_WAIT: Duration = Duration::from_secs(20);

#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "lowercase")]
enum Request {
    Hello,
    Passages { texts: Vec<String> },
    Query { text: String },
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct Response {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    model: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    dims: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    dir: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    vectors: Option<Vec<Vec<f32>>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

/// True unless `KDD_EMBED_WARM=0`.
pub fn enabled() -> bool {
    !matches!(
        std::env::var(ENV_WARM).ok().as_deref().map(str::trim),
        Some("0") | Some("false") | Some("no")
    )
}

/// The socket path for a cache directory.
pub fn socket_path(cache_dir: &Path) -> PathBuf {
    cache_dir.join(SOCKET_NAME)
}

/// An [`Embedder`] backed by the warm server.
pub struct WarmClient {
    stream: BufReader<UnixStream>,
    model: String,
    dims: usize,
}

impl WarmClient {
    /// Connect to a running server and check it serves `spec`'s model directory.
    pub fn connect(socket: &Path, spec: &ModelSpec) -> Result<WarmClient, Error> {
        let stream = UnixStream::connect(socket).map_err(|e| Error::Warm(e.to_string()))?;
        stream.set_read_timeout(Some(Duration::from_secs(300))).ok();
        let mut c = WarmClient {
            stream: BufReader::new(stream),
            model: String::new(),
            dims: 0,
        };
        let r = c.call(&Request::Hello)?;
        let (Some(model), Some(dims), Some(dir)) = (r.model, r.dims, r.dir) else {
            return Err(Error::Warm("bad hello".into()));
        };
        if model != spec.id || dir != spec.dir {
            return Err(Error::Warm(format!(
                "server runs {model} from {}, wanted {} from {}",
                dir.display(),
                spec.id,
                spec.dir.display()
            )));
        }
        c.model = model;
        c.dims = dims;
        Ok(c)
    }

    fn call(&mut self, req: &Request) -> Result<Response, Error> {
        let warm = |e: std::io::Error| Error::Warm(e.to_string());
        let mut line = serde_json::to_vec(req).map_err(|e| Error::Warm(e.to_string()))?;
        line.push(b'\n');
        self.stream.get_mut().write_all(&line).map_err(warm)?;
        let mut buf = String::new();
        let n = self.stream.read_line(&mut buf).map_err(warm)?;
        if n == 0 {
            return Err(Error::Warm("server closed the connection".into()));
        }
        let r: Response = serde_json::from_str(&buf).map_err(|e| Error::Warm(e.to_string()))?;
        if let Some(e) = r.error {
            return Err(Error::Inference(e));
        }
        Ok(r)
    }

    fn vectors(&mut self, req: &Request, n: usize) -> Result<Vec<Vec<f32>>, Error> {
        let v = self.call(req)?.vectors.unwrap_or_default();
        if v.len() != n || v.iter().any(|x| x.len() != self.dims) {
            return Err(Error::Warm("wrong number or size of vectors".into()));
        }
        Ok(v)
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
        self.vectors(
            &Request::Passages {
                texts: texts.to_vec(),
            },
            texts.len(),
        )
    }
    fn embed_query(&mut self, q: &str) -> Result<Vec<f32>, Error> {
        let mut v = self.vectors(
            &Request::Query {
                text: q.to_string(),
            },
            1,
        )?;
        Ok(v.pop().unwrap_or_default())
    }
}

/// Connect to the warm server for `spec` under `cache_dir`, starting it when none runs.
/// `Err` means "use an in-process model instead".
pub fn connect_or_spawn(cache_dir: &Path, spec: &ModelSpec) -> Result<WarmClient, Error> {
    if !enabled() {
        return Err(Error::Warm("disabled by KDD_EMBED_WARM=0".into()));
    }
    let socket = socket_path(cache_dir);
    if socket.as_os_str().len() > 100 {
        return Err(Error::Warm("socket path too long".into()));
    }
    if let Ok(c) = WarmClient::connect(&socket, spec) {
        return Ok(c);
    }
    // Nothing usable answers: the model must at least look installed before we start a server.
    if let Some(missing) = spec.missing_file() {
        return Err(Error::ModelMissing {
            model: spec.id.clone(),
            path: missing,
        });
    }
    if !spec.runtime.exists() {
        return Err(Error::RuntimeMissing {
            path: spec.runtime.clone(),
        });
    }
    std::fs::create_dir_all(cache_dir).map_err(|source| Error::Io {
        path: cache_dir.to_path_buf(),
        source,
    })?;
    spawn_server(&socket, spec)?;
    let start = Instant::now();
    while start.elapsed() < STARTUP_WAIT {
        std::thread::sleep(Duration::from_millis(30));
        if let Ok(c) = WarmClient::connect(&socket, spec) {
            return Ok(c);
        }
    }
    Err(Error::Warm("server did not start in time".into()))
}

fn spawn_server(socket: &Path, spec: &ModelSpec) -> Result<(), Error> {
    use std::os::unix::process::CommandExt;
    let exe = current_kdd_exe().ok_or_else(|| Error::Warm("kdd executable not found".into()))?;
    std::process::Command::new(exe)
        .arg("doctor")
        .arg("--embed-server")
        .arg(socket)
        .env(crate::config::env::MODEL_DIR, &spec.dir)
        .env("ORT_DYLIB_PATH", &spec.runtime)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .process_group(0)
        .spawn()
        .map_err(|e| Error::Warm(format!("cannot start the server: {e}")))?;
    Ok(())
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

fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Run the server on `socket` until idle (blocking). Loads the model from the environment.
pub fn serve(socket: &Path) -> Result<(), Error> {
    let ModelChoice::Model(spec) = discover() else {
        return Err(Error::Disabled);
    };
    let mut model = FastEmbedder::load(&spec)?;
    // Replace a stale socket (a previous server that died) only if nobody answers on it.
    if socket.exists() {
        if UnixStream::connect(socket).is_ok() {
            return Err(Error::Warm("another server already listens".into()));
        }
        let _ = std::fs::remove_file(socket);
    }
    let listener = UnixListener::bind(socket).map_err(|source| Error::Io {
        path: socket.to_path_buf(),
        source,
    })?;
    {
        use std::os::unix::fs::PermissionsExt;
        let _ = std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o600));
    }
    let idle = std::env::var(ENV_IDLE)
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(IDLE_SECS);
    let last = Arc::new(AtomicU64::new(now_secs()));
    {
        let last = last.clone();
        let socket = socket.to_path_buf();
        std::thread::spawn(move || loop {
            std::thread::sleep(Duration::from_millis(500));
            let gone = !socket.exists();
            if gone || now_secs().saturating_sub(last.load(Ordering::Relaxed)) >= idle {
                if !gone {
                    let _ = std::fs::remove_file(&socket);
                }
                std::process::exit(0);
            }
        });
    }
    for conn in listener.incoming() {
        let Ok(conn) = conn else { continue };
        last.store(now_secs(), Ordering::Relaxed);
        let _ = handle(conn, &mut model, &spec, &last);
    }
    Ok(())
}

fn handle(
    conn: UnixStream,
    model: &mut FastEmbedder,
    spec: &ModelSpec,
    last: &AtomicU64,
) -> std::io::Result<()> {
    conn.set_read_timeout(Some(Duration::from_secs(60)))?;
    let mut reader = BufReader::new(conn.try_clone()?);
    let mut writer = conn;
    let mut line = String::new();
    loop {
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        last.store(now_secs(), Ordering::Relaxed);
        let resp = match serde_json::from_str::<Request>(&line) {
            Err(e) => Response {
                error: Some(format!("bad request: {e}")),
                ..Response::default()
            },
            Ok(Request::Hello) => Response {
                model: Some(spec.id.clone()),
                dims: Some(model.dims()),
                dir: Some(spec.dir.clone()),
                ..Response::default()
            },
            Ok(Request::Passages { texts }) => to_response(model.embed_passages(&texts)),
            Ok(Request::Query { text }) => to_response(model.embed_query(&text).map(|v| vec![v])),
        };
        let mut out = serde_json::to_vec(&resp).map_err(std::io::Error::other)?;
        out.push(b'\n');
        writer.write_all(&out)?;
        last.store(now_secs(), Ordering::Relaxed);
    }
}

fn to_response(r: Result<Vec<Vec<f32>>, Error>) -> Response {
    match r {
        Ok(v) => Response {
            vectors: Some(v),
            ..Response::default()
        },
        Err(e) => Response {
            error: Some(e.to_string()),
            ..Response::default()
        },
    }
}
