//! The warm embedding service, server side: `kdd doctor --embed-server SOCKET` (hidden flag,
//! started by [`super::warm::connect_or_spawn`]).
//!
//! Invariants:
//! - Claiming the socket is serialised by an exclusive lock on `<socket>.lock`: a socket file
//!   that answers means another service runs (this one exits); one that does not is stale and
//!   is replaced. The socket is bound before the model loads, so concurrent starters see it at
//!   once; clients that connect meanwhile get their `hello` answered after the load.
//! - The directory is 0700 and the socket 0600: only this user can talk to the service.
//! - A thread per connection; the model sits behind one mutex and each request waits for it at
//!   most its own `deadline_ms` (then it is answered `busy`, and the client falls back), so no
//!   client ever waits on another's idle connection.
//! - `translate` requests never wait for the model: they go to the service's warm Apertium
//!   ([`super::translator::Translators`], one pipeline per pair started on first use, answers
//!   memoised), so a translation is never `busy` behind an embedding.
//! - Idle exit after [`super::warm::idle_secs`] without requests never breaks a request: the
//!   service first stops taking work (requests that arrive are answered `closing`, and clients
//!   reconnect), waits until no request is in flight, removes its socket and exits. It also
//!   exits when its socket file is removed or replaced by another service.

use super::model::{discover, ModelChoice, ModelSpec};
use super::warm::{frame, Op, Request, Response};
use super::{Embedder, Error};
use std::os::unix::fs::MetadataExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Translations the service remembers (short questions: a few hundred KiB at most).
const TRANSLATION_MEMO: usize = 1024;
/// Longest a translation may take (a freshly started pipeline loads its data first).
const TRANSLATION_DEADLINE: Duration = Duration::from_secs(5);

/// In-flight bookkeeping shared by the connection threads and the idle watcher.
struct Activity {
    in_flight: usize,
    last: Instant,
    closing: bool,
}

struct State {
    model: Mutex<Box<dyn Embedder + Send>>,
    activity: Mutex<Activity>,
    id: String,
    dir: std::path::PathBuf,
    dims: usize,
    translators: super::translator::Translators,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Bind `socket`, replacing a stale file, under the lock. `Err` when another service answers.
fn claim(socket: &Path) -> Result<UnixListener, Error> {
    use std::os::unix::fs::PermissionsExt;
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| Error::Io { path, source }
    };
    if let Some(dir) = socket.parent() {
        super::warm::ensure_service_dir(dir)?;
    }
    let lock_path = socket.with_extension("lock");
    let lock_file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(io(&lock_path))?;
    fs4::FileExt::lock(&lock_file).map_err(io(&lock_path))?;
    if socket.exists() {
        if UnixStream::connect(socket).is_ok() {
            return Err(Error::Warm("another service already listens".into()));
        }
        // Stale: a service that died without removing its socket.
        std::fs::remove_file(socket).map_err(io(socket))?;
    }
    let listener = UnixListener::bind(socket).map_err(io(socket))?;
    std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o600)).map_err(io(socket))?;
    let _ = fs4::FileExt::unlock(&lock_file);
    Ok(listener)
}

/// Run the service on `socket` until idle (blocking). Loads the discovered model.
pub fn serve(socket: &Path) -> Result<(), Error> {
    let spec = match discover() {
        ModelChoice::Model(spec) => spec,
        ModelChoice::Test => ModelSpec::test(),
        ModelChoice::Disabled => return Err(Error::Disabled),
    };
    let listener = claim(socket)?;
    let ino = std::fs::metadata(socket).map(|m| m.ino()).unwrap_or(0);
    let model = match spec.load() {
        Ok(m) => m,
        Err(e) => {
            let _ = std::fs::remove_file(socket);
            return Err(e);
        }
    };
    let state = Arc::new(State {
        dims: model.dims(),
        model: Mutex::new(model),
        activity: Mutex::new(Activity {
            in_flight: 0,
            last: Instant::now(),
            closing: false,
        }),
        id: spec.id.clone(),
        dir: spec.dir.clone(),
        translators: super::translator::Translators::new(TRANSLATION_MEMO),
    });
    {
        let state = state.clone();
        let socket = socket.to_path_buf();
        let idle = Duration::from_secs(super::warm::idle_secs());
        std::thread::spawn(move || watch_idle(&state, &socket, ino, idle));
    }
    for conn in listener.incoming() {
        let Ok(conn) = conn else { continue };
        let state = state.clone();
        std::thread::spawn(move || {
            let _ = handle(conn, &state);
        });
    }
    Ok(())
}

/// Exit when idle (after draining) or when the socket file is no longer ours.
fn watch_idle(state: &State, socket: &Path, ino: u64, idle: Duration) {
    loop {
        std::thread::sleep(Duration::from_millis(100));
        let ours = std::fs::metadata(socket).is_ok_and(|m| m.ino() == ino);
        let mut a = lock(&state.activity);
        if !a.closing && (!ours || a.last.elapsed() >= idle) && a.in_flight == 0 {
            // Stop taking work first: no new request starts after this point.
            a.closing = true;
            if ours {
                let _ = std::fs::remove_file(socket);
            }
        }
        if a.closing && a.in_flight == 0 {
            std::process::exit(0);
        }
    }
}

fn handle(conn: UnixStream, state: &State) -> std::io::Result<()> {
    let mut reader = conn.try_clone()?;
    let mut writer = conn;
    while let Some(req) = frame::read::<Request>(&mut reader)? {
        {
            let mut a = lock(&state.activity);
            if a.closing {
                drop(a);
                let resp = Response {
                    closing: true,
                    ..Response::default()
                };
                frame::write(&mut writer, &resp)?;
                return Ok(());
            }
            a.in_flight += 1;
            a.last = Instant::now();
        }
        let resp = answer(state, req);
        let sent = frame::write(&mut writer, &resp);
        {
            let mut a = lock(&state.activity);
            a.in_flight -= 1;
            a.last = Instant::now();
        }
        sent?;
    }
    Ok(())
}

fn answer(state: &State, req: Request) -> Response {
    let texts: Vec<String>;
    let query = match req.op {
        Op::Hello => {
            return Response {
                model: Some(state.id.clone()),
                dims: Some(state.dims),
                dir: Some(state.dir.clone()),
                pid: Some(std::process::id()),
                rss_kb: Some(super::warm::self_rss_kb()),
                ..Response::default()
            }
        }
        Op::Passages { texts: t } => {
            texts = t;
            false
        }
        Op::Query { text } => {
            texts = vec![text];
            true
        }
        Op::Translate { pair, text } => {
            return match state
                .translators
                .translate(&pair, &text, TRANSLATION_DEADLINE)
            {
                Ok(t) => Response {
                    translation: Some(t),
                    ..Response::default()
                },
                Err(e) => Response {
                    error: Some(e.to_string()),
                    ..Response::default()
                },
            };
        }
    };
    // Wait for the model at most until the request's deadline.
    let deadline = Instant::now() + Duration::from_millis(req.deadline_ms.max(1));
    let mut model = loop {
        match state.model.try_lock() {
            Ok(g) => break g,
            Err(std::sync::TryLockError::Poisoned(p)) => break p.into_inner(),
            Err(std::sync::TryLockError::WouldBlock) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(std::sync::TryLockError::WouldBlock) => {
                return Response {
                    busy: true,
                    ..Response::default()
                }
            }
        }
    };
    let r = if query {
        model.embed_query(&texts[0]).map(|v| vec![v])
    } else {
        model.embed_passages(&texts)
    };
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
